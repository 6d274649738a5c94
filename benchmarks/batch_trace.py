"""Where a `sigconv batch` run's time goes: every process's stages on one timeline.

    python benchmarks/batch_trace.py SRC OUTDIR -- --backend cuda        # arguments after -- go to `sigconv batch`

Runs `sigconv batch SRC -r -o OUTDIR -q ...` in this process, with a timer around each stage of a log's run (read,
rate, filter, write, the GPU process's answers, the coordinator's recording), in the coordinator, its pool workers and
the GPU's process alike (they are forked from it and keep the timers). Prints the timeline's landmarks, each
stage's count, median and total, how busy each kind of process was, and writes every event to OUTDIR.trace.jsonl.
The timers cost a few microseconds a call; time the plain command with `batch_bench.py`.
"""

from __future__ import annotations

import functools
import json
import os
import statistics
import sys
import time
from pathlib import Path

T0 = time.time()
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_EVENTS = None  # this process's trace file (opened after a fork, per pid)
_PID = None


def _emit(name: str, start: float, end: float) -> None:
    global _EVENTS, _PID
    if _PID != os.getpid():
        _PID = os.getpid()
        _EVENTS = open(f"{os.environ['SIGCONV_TRACE_FILE']}.{_PID}", "a", buffering=1)
    _EVENTS.write(f'["{name}", {start - T0:.6f}, {end - T0:.6f}]\n')


def _timed(owner, attr: str, name: str) -> None:
    fn = getattr(owner, attr)

    @functools.wraps(fn)
    def wrapper(*a, **k):
        t = time.time()
        try:
            return fn(*a, **k)
        finally:
            _emit(name, t, time.time())

    setattr(owner, attr, wrapper)


def _timed_generator(owner, attr: str, name: str) -> None:
    """A context manager's set-up and tear-down, each timed (``safe_output``: the checks before and the rename)."""
    import contextlib

    fn = getattr(owner, attr)

    @contextlib.contextmanager
    def wrapper(*a, **k):
        t = time.time()
        cm = fn(*a, **k)
        v = cm.__enter__()
        _emit(name + ":enter", t, time.time())
        try:
            yield v
        except BaseException:
            if not cm.__exit__(*sys.exc_info()):
                raise
        else:
            t = time.time()
            cm.__exit__(None, None, None)
            _emit(name + ":exit", t, time.time())

    setattr(owner, attr, wrapper)


def install() -> None:
    import sigconv.cli
    from sigconv.engine.batch import (coordinator, filters, formats, gpu_service, logs, manifest, process,
                                      runners)

    # (owner, function, stage): the stages of one log in a worker, the GPU process's, the coordinator's
    timed = [(logs, "read_table", "worker:read"), (logs, "file_rate", "worker:rate"),
             (filters, "taps_for", "worker:taps"), (filters, "filter_columns", "worker:filter"),
             (formats, "replace_columns", "worker:columns"), (formats, "write_table", "worker:write"),
             (runners, "process_task", "worker:file"), (gpu_service._Client, "filter_span", "worker:gpu-request"),
             (runners, "_pool_worker_init", "worker:init"),
             (gpu_service, "_answer", "gpu:answer"), (gpu_service, "_start_cuda", "gpu:start-cuda"),
             (manifest.Manifest, "append", "coordinator:record"), (coordinator, "find_inputs", "coordinator:find"),
             (runners, "start_gpu_process", "coordinator:start-gpu-process"),
             (runners, "_pool_context", "coordinator:pool-context"),
             (coordinator, "_check_request", "coordinator:check-request"), (coordinator, "_tasks", "coordinator:tasks"),
             (manifest.Manifest, "__init__", "coordinator:manifest"),
             (sigconv.cli, "make_parser", "coordinator:make-parser")]
    for owner, attr, name in timed:
        _timed(owner, attr, name)
    _timed_generator(process, "safe_output", "worker:output")


def summarize(trace: Path, wall: float) -> dict:
    events = []
    for f in sorted(trace.parent.glob(trace.name + ".*")):
        pid = int(f.name.rsplit(".", 1)[1])
        for line in f.read_text().splitlines():
            name, a, b = json.loads(line)
            events.append({"pid": pid, "name": name, "start": a, "end": b})
        f.unlink()
    trace.write_text("".join(json.dumps(e) + "\n" for e in events))
    by: dict = {}
    for e in events:
        by.setdefault(e["name"], []).append(e)
    stages = {}
    for name, es in sorted(by.items()):
        d = [1e3 * (e["end"] - e["start"]) for e in es]
        stages[name] = {"n": len(d), "median_ms": round(statistics.median(d), 3), "total_s": round(sum(d) / 1e3, 3),
                        "first_s": round(min(e["start"] for e in es), 3), "last_s": round(max(e["end"] for e in es), 3),
                        "processes": len({e["pid"] for e in es})}
    return {"wall_s": round(wall, 3), "stages": stages}


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    pos = argv[:argv.index("--")] if "--" in argv else argv
    if len(pos) != 2:
        print(__doc__)
        return 2
    src, out = Path(pos[0]), Path(pos[1])
    trace = out.with_name(out.name + ".trace.jsonl")
    os.environ["SIGCONV_TRACE_FILE"] = str(trace)
    for old in trace.parent.glob(trace.name + ".*"):
        old.unlink()
    t_import = time.time()
    import sigconv.cli

    imported = time.time()
    install()
    rc = sigconv.cli.main(["batch", str(src), "-r", "-o", str(out), "-q", *extra])
    wall = time.time() - T0
    s = summarize(trace, wall)
    s["rc"] = rc
    s["import_s"] = round(imported - t_import, 3)
    print(f"wall {s['wall_s']} s (rc {rc}; import sigconv.cli {s['import_s']} s); times in seconds since this script "
          "started (the interpreter's own start, about 0.03 s, and its exit are not in them):")
    print(f"{'stage':34} {'n':>5} {'median ms':>10} {'total s':>8} {'first s':>8} {'last s':>8} {'procs':>5}")
    for name, st in s["stages"].items():
        print(f"{name:34} {st['n']:5d} {st['median_ms']:10.3f} {st['total_s']:8.3f} {st['first_s']:8.3f} "
              f"{st['last_s']:8.3f} {st['processes']:5d}")
    trace.with_suffix(".json").write_text(json.dumps(s, indent=1))
    return int(rc or 0)


if __name__ == "__main__":
    sys.exit(main())
