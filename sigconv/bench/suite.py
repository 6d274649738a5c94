"""``sigconv bench conv1d|conv2d``: sigconv's kernel variants timed beside their peers, in one process.

Method:

- every registered variant and peer (``sigconv.registry.table``) runs on the same inputs in one process;
- each one is first checked against a float64 reference; a sigconv variant that disagrees is reported
  as FAIL and not timed, a peer that disagrees is timed but flagged;
- timing by CUDA events after a warm-up (wall clock for CPU rows), median and 20th/80th percentiles
  of many runs, the number of runs set by a time budget;
- inputs rotated among several buffers whose total exceeds twice the L2 cache, so L2 does not flatter;
- the device copy bandwidth (device-to-device copy of 1 GiB, bytes read + written over time) is
  measured in the same run and every row reports its share of it;
- effective GB/s counts the input read once and the output written once;
- sigconv variants are timed at every accepted block size (or the ``--blocks`` given) and the best
  block is reported; ``auto`` is timed as its own row.

Results: a JSON file ``{"meta", "verdicts", "records"}`` whose records carry
``op, C, L, K, impl, block, ms_median, gbs, pct_copy, device, date`` (conv1d adds ``mode``; conv2d adds
``N, Cin, H, W, Cout, kH, kW, stride, pad``; for conv2d ``C = Cin``, ``L = H*W`` and ``K = kH*kW``)
and a markdown table, both named with the device and date; the table and the verdicts are printed.
CPU rows (sigconv's cpu variants, the SciPy peer) run at a reduced size when the case is larger than
a CPU can do in a few seconds, and say so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

from sigconv._core import devices as _devices
from sigconv._core.atomic import atomic_output
from sigconv._core.errors import OutputError
from sigconv.bench import report
from sigconv.bench.check import TOL
from sigconv.bench.harness import BenchOptions, Run, one_line, ratios, run_group, utc_now
from sigconv.bench.timing import cpu_copy_gbs, cpu_name, gpu_copy_gbs
from sigconv.registry import table as _registry

__all__ = ["SuiteOptions", "run_suite", "entry_lines", "backends_for"]


@dataclass(frozen=True)
class SuiteOptions:
    """One ``sigconv bench`` run: the cases, whose variants to time, where the results go.

    ``backend``: "auto" (cuda when a GPU is usable, else cpu), "cuda", "cpu" or "all"; peers of both
    backends run wherever they can. ``out``: folder for the JSON and markdown (None: :func:`report.default_out_dir`).
    ``max_seconds``: no row starts after this many seconds (the rest are listed as skipped). ``argv``: the
    command line, recorded in the results.
    """

    op: str
    cases: tuple
    bench: BenchOptions = field(default_factory=BenchOptions)
    backend: str = "auto"
    out: Optional[Path] = None
    quick: bool = False
    json_only: bool = False
    max_seconds: Optional[float] = None
    argv: tuple = ()


def backends_for(choice: str) -> list[str]:
    """The backends whose sigconv variants run for ``--backend choice``."""
    if choice == "all":
        return ["cuda", "cpu"]
    if choice == "auto":
        return ["cuda" if _devices.cuda_reason() is None else "cpu"]
    return [choice]


def entry_lines(op: str) -> list[str]:
    """One line per registered variant and peer of ``op``: kind, backend, name, whether it can run here."""
    out = []
    for be in ("cuda", "cpu"):
        for v in _registry.entries(op, be):
            why = v.availability()
            out.append(f"{v.kind:7} {be:4} {v.name:26} {'available' if why is None else 'unavailable: ' + why}")
    return out


@contextlib.contextmanager
def _sigterm_interrupts():
    """SIGTERM raises KeyboardInterrupt (main thread only), so a killed run still writes its rows."""
    prev = None
    if threading.current_thread() is threading.main_thread():
        def _term(signum, frame):
            raise KeyboardInterrupt

        prev = signal.signal(signal.SIGTERM, _term)
    try:
        yield
    finally:
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)


def _measure_copies(run: Run, gpu_ok: bool, quick: bool, say: Callable) -> None:
    if gpu_ok:
        try:
            run.copy["cuda"] = gpu_copy_gbs()
            say(f"device: {run.device['cuda']}; copy {run.copy['cuda']['gbs']:.0f} GB/s "
                f"({run.copy['cuda']['method']})")
        except Exception as exc:
            say(f"device copy bandwidth not measured: {one_line(exc)}")
    else:
        say(f"no usable GPU ({_devices.cuda_reason()}): GPU rows are skipped")
    run.copy["cpu"] = cpu_copy_gbs(1 << 26 if quick else 1 << 28)


def _say_rows(rows: list, be: str, say: Callable) -> None:
    """A line per measured row; skipped rows as one line per reason."""
    skipped: dict = {}
    for r in rows:
        if r["status"] == "skipped":
            skipped.setdefault(r["note"], []).append(r["impl"])
        else:
            say("   " + report.row_line(r))
    for note, impls in skipped.items():
        say(f"   {be:4} skipped {', '.join(impls)}: {note}"[:240])


def _run_cases(run: Run, opts: SuiteOptions, gpu_ok: bool, say: Callable) -> None:
    # sigconv's variants run for the backends asked for; the cuda ones are also listed (as skipped,
    # with the reason) when there is no GPU. Peers of both backends always run where they can.
    chosen = backends_for(opts.backend)
    with_variants = {"cuda": "cuda" in chosen or not gpu_ok, "cpu": "cpu" in chosen}
    peers_only = dataclasses.replace(opts.bench, variants=())
    for case in opts.cases:
        say(f"-- {case.label}")
        for be in ("cuda", "cpu"):
            n0 = len(run.records)
            run_group(run, case, be, opts.bench if with_variants[be] else peers_only)
            _say_rows(run.records[n0:], be, say)


def _meta(run: Run, opts: SuiteOptions, interrupted: bool) -> dict:
    return {"op": run.op, "dtype": run.dtype, "date": run.date, "devices": run.device, "copy": run.copy,
            "versions": report.versions(), "sigconv": report.sigconv_version(), "quick": bool(opts.quick),
            "interrupted": interrupted, "seconds": round(time.perf_counter() - run.start, 1),
            "argv": list(opts.argv), "tolerance": TOL[run.dtype], "method": __doc__.split("Results:")[0].strip()}


def _write(run: Run, opts: SuiteOptions, out_dir: Path, stem: str, meta: dict, verdicts: list) -> list[Path]:
    """The JSON file (and the markdown page unless json_only) in ``out_dir``, each written atomically; raises
    OSError or OutputError."""
    out_dir.mkdir(parents=True, exist_ok=True)
    texts = {out_dir / f"{stem}.json": json.dumps({"meta": meta, "verdicts": verdicts, "records": run.records},
                                                  indent=1, default=str) + "\n"}
    if not opts.json_only:
        texts[out_dir / f"{stem}.md"] = report.markdown(run, verdicts)
    for path, text in texts.items():
        with atomic_output(path) as tmp:
            tmp.write_text(text)
    return list(texts)


def run_suite(opts: SuiteOptions) -> int:
    """Run the benchmark; 0 when every sigconv row that ran was correct, 1 when one failed its check or
    errored, the run was interrupted, or the results could not be written."""
    now = utc_now()
    gpu_ok = _devices.cuda_reason() is None
    start = time.perf_counter()
    run = Run(opts.op, opts.bench.dtype, date=now.strftime("%Y-%m-%dT%H:%M:%SZ"), start=start,
              deadline=start + opts.max_seconds if opts.max_seconds else None,
              device={"cpu": cpu_name(), "cuda": _devices.gpu_name() if gpu_ok else None})
    say = (lambda *a: None) if opts.json_only else (lambda *a: print(*a, flush=True))
    interrupted = False
    with _sigterm_interrupts():
        try:
            _measure_copies(run, gpu_ok, opts.quick, say)
            _run_cases(run, opts, gpu_ok, say)
        except KeyboardInterrupt:
            interrupted = True
            print("sigconv bench: interrupted; writing the rows measured so far", file=sys.stderr)
    ratios(run.records)
    verdicts = report.verdicts(run)
    dev = run.device.get("cuda") if gpu_ok else "cpu"
    stem = f"{opts.op}-{report.slug(dev or 'cpu')}-{now.strftime('%Y-%m-%d')}" + ("-quick" if opts.quick else "")
    out_dir = Path(opts.out) if opts.out else report.default_out_dir()
    try:
        paths = _write(run, opts, out_dir, stem, _meta(run, opts, interrupted), verdicts)
    except (OSError, OutputError) as exc:
        print(f"sigconv bench: error: cannot write results to {out_dir}: {exc}", file=sys.stderr)
        return 1
    if not opts.json_only:
        print()
        print(report.summary(run))
    for v in verdicts:
        print(f"verdict: {v}")
    for p in paths:
        print(f"wrote {p}")
    bad = [r for r in run.records if r["kind"] == "variant" and r["status"] in ("FAIL", "error")]
    if bad:
        print(f"sigconv bench: {len(bad)} sigconv row(s) FAILED or errored", file=sys.stderr)
    return 1 if bad or interrupted else 0
