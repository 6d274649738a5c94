"""The array API's cpu/cuda crossover for NumPy inputs: where `backend="auto"` should stay on the cpu.

    python benchmarks/api_auto.py [--quick] [--out DIR]          # needs a GPU for the cuda columns

Each call takes NumPy arrays and returns NumPy arrays, so the cuda backend pays the copies both ways and a few
launches on top of its kernels. Two measurements:

1. First call in a fresh process (``python -c``: import sigconv, one ``convolve`` of 1000 samples by 7 taps),
   wall clock, median of 3, for ``--backend`` cpu, cuda and auto: what a script that filters one small array pays.
2. Warm calls (CuPy imported, kernels loaded, the call made once before): seconds a call, the best of 3 batches,
   on the cpu (all cores; and two, the CI kind: the process pinned to cores 0-1 and the cpu backend's threads set
   to 2) and on cuda, for:
   - ``convolve(x, w, "same")``, one channel of L samples, K taps;
   - ``convolve2d(x, k, "same")``, n x n by k x k;
   - ``spectral_denoise(x, 48000)``, two channels of L samples.
   For each row, the smallest size from which cuda is faster ("crossover").

Writes api-auto-<device>-<date>.json and .md to --out (default benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
FIRST_CALL = ("import numpy as np, sigconv; "
              "y = sigconv.convolve(np.ones(1000), np.ones(7), backend={b!r}); assert y.shape == (1006,)")


def first_call(backend: str, repeat: int = 3) -> float:
    walls = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", FIRST_CALL.format(b=backend)], check=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])})
        walls.append(time.perf_counter() - t)
    return statistics.median(walls)


def per_call(fn, budget_s: float = 0.15, batches: int = 3) -> float:
    """Seconds a call: the best of ``batches`` batches, each as many calls as fit ``budget_s`` (at least one)."""
    fn()
    t = time.perf_counter()
    fn()
    one = max(time.perf_counter() - t, 1e-7)
    n = max(1, min(1000, int(budget_s / one)))
    best = float("inf")
    for _ in range(batches):
        t = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, (time.perf_counter() - t) / n)
    return best


def cases(quick: bool):
    Ls = [1 << e for e in range(8, 23, 2)] if not quick else [1 << 10, 1 << 14]
    for K in (7, 63, 255, 1023, 7921):
        for L in Ls:
            if L >= K:
                yield "conv1d", f"K={K}", L, (L, K)
    for k in (3, 9):
        for n in ((16, 32, 64, 128, 256, 512, 1024, 2048) if not quick else (64, 256)):
            yield "conv2d", f"k={k}", n * n, (n, k)
    for L in (Ls if not quick else Ls[:1]):
        if L >= 4096:
            yield "spectral", "stereo", 2 * L, (L,)


def call(op: str, shape, backend: str, rng):
    import sigconv

    if op == "conv1d":
        L, K = shape
        x, w = rng.standard_normal(L).astype(np.float32), rng.standard_normal(K).astype(np.float32)
        return lambda: sigconv.convolve(x, w, "same", backend=backend)
    if op == "conv2d":
        n, k = shape
        x, w = rng.standard_normal((n, n)).astype(np.float32), rng.standard_normal((k, k)).astype(np.float32)
        return lambda: sigconv.convolve2d(x, w, "same", backend=backend)
    (L,) = shape
    x = (0.1 * rng.standard_normal((2, L))).astype(np.float32)
    return lambda: sigconv.spectral_denoise(x, 48000, backend=backend)


def two_cores():
    """Pin this process to cores 0-1 and the cpu backend to two threads (the CI kind); returns the undo."""
    from sigconv.backends import cpu
    from sigconv.engine.spectral import gate

    old = (os.sched_getaffinity(0), cpu.WORKERS, gate.WORKERS)
    os.sched_setaffinity(0, {0, 1})
    cpu.WORKERS = gate.WORKERS = 2

    def undo():
        os.sched_setaffinity(0, old[0])
        cpu.WORKERS, gate.WORKERS = old[1], old[2]

    return undo


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="a few sizes (a smoke run)")
    p.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = p.parse_args(argv)
    from sigconv._core import devices

    gpu = devices.cuda_reason() is None
    device = (devices.gpu_name() or "GPU") if gpu else f"no GPU ({os.cpu_count()} cores)"
    rec = {"date": datetime.date.today().isoformat(), "device": device, "cores": len(os.sched_getaffinity(0)),
           "first_call_s": {}, "rows": []}
    for b in (["cpu", "cuda", "auto"] if gpu else ["cpu", "auto"]):
        rec["first_call_s"][b] = first_call(b)
        print(f"first call, backend {b}: {rec['first_call_s'][b]:.3f} s", flush=True)
    rng = np.random.default_rng(20261204)
    for op, row, size, shape in cases(a.quick):
        r = {"op": op, "row": row, "size": size, "shape": list(shape)}
        r["cpu_s"] = per_call(call(op, shape, "cpu", rng))
        undo = two_cores()
        try:
            r["cpu2_s"] = per_call(call(op, shape, "cpu", rng))
        finally:
            undo()
        if gpu:
            r["cuda_s"] = per_call(call(op, shape, "cuda", rng))
        rec["rows"].append(r)
        print(json.dumps(r), flush=True)
    a.out.mkdir(parents=True, exist_ok=True)
    slug = "".join(c if c.isalnum() else "-" for c in device.split(",")[0]).strip("-")
    stem = a.out / f"api-auto-{slug}-{rec['date']}"
    stem.with_suffix(".json").write_text(json.dumps(rec, indent=1) + "\n")
    stem.with_suffix(".md").write_text(markdown(rec))
    print(markdown(rec))
    return 0


def markdown(rec) -> str:
    out = [f"# The array API, NumPy in and out: cpu against cuda ({rec['device']}, {rec['date']})", "",
           "First call in a fresh process (`convolve` of 1000 samples by 7 taps), wall clock, median of 3: "
           + ", ".join(f"{b} {s:.3f} s" for b, s in rec["first_call_s"].items()) + ".", "",
           f"Warm calls, ms a call (best of 3 batches); cpu on {rec['cores']} cores and on 2 (pinned, two threads).",
           "", "| op | row | size | cpu | cpu, 2 cores | cuda |", "|---|---|---:|---:|---:|---:|"]
    for r in rec["rows"]:
        cu = f"{r['cuda_s'] * 1e3:.3f}" if "cuda_s" in r else "-"
        out.append(f"| {r['op']} | {r['row']} | {r['size']} | {r['cpu_s'] * 1e3:.3f} | {r['cpu2_s'] * 1e3:.3f} | {cu} |")
    out += ["", "Crossover (the smallest size measured from which cuda is faster, and stays so):", "",
            "| op | row | against all cores | against 2 cores |", "|---|---|---:|---:|"]
    groups: dict = {}
    for r in rec["rows"]:
        groups.setdefault((r["op"], r["row"]), []).append(r)
    for (op, row), rs in groups.items():
        cells = []
        for key in ("cpu_s", "cpu2_s"):
            x = None
            for r in sorted(rs, key=lambda r: r["size"]):
                if "cuda_s" not in r:
                    break
                if r["cuda_s"] < r[key]:
                    x = r["size"] if x is None else x
                else:
                    x = None
            cells.append(str(x) if x is not None else ("none" if "cuda_s" in rs[0] else "-"))
        out.append(f"| {op} | {row} | {cells[0]} | {cells[1]} |")
    return "\n".join(out) + "\n"


if __name__ == "__main__":
    sys.exit(main())
