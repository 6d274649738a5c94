"""Where the wall time of one `sigconv denoise` goes: a per-thread timeline of its stages.

    python benchmarks/denoise_timeline.py denoise IN.wav -o OUT.wav --backend cuda --quiet [--profile]

Runs the command in this process (``sigconv.cli.main``) with timers around its stages: the imports of
``sigconv.cli``, ``prepare_denoise`` (the probe, the filter's design, the backend's choice: CuPy's import and the
driver's start), the filter's construction, and in the file engine's threads each block's read, staging, processing,
fetch, write and write-back, the close and the rename. Prints, per thread and stage, the count, the time spent and the
first start and last end (seconds from the start of this script); ``--profile`` adds cProfile's cumulative table of
the main thread. The process then ends as the command does (``os._exit``: no interpreter teardown), so ``time`` around
this script, less its "main end", is the start of the interpreter and the end of the process (for a cuda run, the
CUDA context's teardown).

A stage missing from this version of sigconv is left out. Python's bytecode: run it once first where the environment
forbids writing it (PYTHONDONTWRITEBYTECODE), with that variable unset and PYTHONPYCACHEPREFIX set, as
benchmarks/startup.py does; otherwise every import is compiled.
"""

from __future__ import annotations

import sys
import time

T0 = time.perf_counter()

import collections  # noqa: E402
import os  # noqa: E402
import threading  # noqa: E402
from pathlib import Path  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import sigconv.cli as cli  # noqa: E402

T_IMPORT = time.perf_counter() - T0
EVENTS: list = []


def _wrap(owner, attr: str, name: str) -> None:
    """Time every call of ``owner.attr`` as stage ``name`` (nothing when this version has no such attribute)."""
    f = getattr(owner, attr, None)
    if f is None:
        return

    def timed(*a, **k):
        t = time.perf_counter()
        try:
            return f(*a, **k)
        finally:
            EVENTS.append((threading.current_thread().name, name, t - T0, time.perf_counter() - T0))

    setattr(owner, attr, timed)


def main(argv: list[str]) -> int:
    profile = "--profile" in argv
    argv = [a for a in argv if a != "--profile"]
    import soundfile as sf

    from sigconv._core import devices
    from sigconv.engine import denoise as ed
    from sigconv.engine import file as ef
    from sigconv.engine import settings

    _wrap(ed, "prepare_denoise", "prepare")
    _wrap(devices, "start_driver", "driver start")
    _wrap(devices, "_cupy_reason", "import cupy")
    _wrap(settings.FirSpec, "design", "design")
    _wrap(ef, "fir_block_filter", "make filter")
    _wrap(ed.DenoiseJob, "run", "run")
    _wrap(ef, "read_block", "read")
    _wrap(sf.SoundFile, "write", "write")
    _wrap(sf.SoundFile, "close", "close")
    _wrap(ef, "_start_writeback", "write-back")
    _wrap(os, "replace", "rename")
    try:
        from sigconv.engine import gpu_file as gf

        for attr in ("read_buffer", "stage", "process", "fetch", "finish"):
            _wrap(gf.GPUFileFilter, attr, attr)
    except ImportError:
        pass
    for attr in ("process", "finish"):
        _wrap(ef.CPUFileFilter, attr, attr)
    prof = None
    if profile:
        import cProfile

        prof = cProfile.Profile()
        prof.enable()
    rc = cli.main(argv)
    end = time.perf_counter() - T0
    if prof is not None:
        import pstats

        prof.disable()
    print(f"imports of sigconv.cli {T_IMPORT:.3f} s; main end {end:.3f} s; exit code {rc}")
    agg: dict = collections.defaultdict(lambda: [0, 0.0, float("inf"), 0.0])
    for thread, name, a, b in EVENTS:
        r = agg[(thread, name)]
        r[0] += 1
        r[1] += b - a
        r[2] = min(r[2], a)
        r[3] = max(r[3], b)
    print(f"{'thread':>18} {'stage':>12} {'calls':>6} {'time s':>8} {'first':>8} {'last end':>8}")
    for (thread, name), (n, tot, a, b) in sorted(agg.items(), key=lambda kv: kv[1][2]):
        print(f"{thread[:18]:>18} {name:>12} {n:6d} {tot:8.3f} {a:8.3f} {b:8.3f}")
    if prof is not None:
        pstats.Stats(prof, stream=sys.stdout).sort_stats("cumulative").print_stats(40)
    sys.stdout.flush()
    os._exit(rc)


if __name__ == "__main__":
    main(sys.argv[1:])
