"""fft_fused through its launcher with the kernel that reads a point's two samples as one 8-byte load where it may
(overlap_save.fused_pairs) against float loads everywhere, side by side in one process: device taps (the path
`sigconv bench` times: the spectrum kernel's comparison launch included), "same" window, CUDA-event medians of 30
calls, 4 interleaved rounds, the best round of each kept; outputs compared with each other and with a float64
reference on the first 2^16 outputs.

    python benchmarks/results/H200-2026-12-04-fused-pairs/pairs_ab.py [--L 26] [--C 1] [--K ...]
"""
import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[3]  # (the repository, from benchmarks/results/<this folder>)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from fft_stages import _time  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("--L", type=int, default=26)
p.add_argument("--C", type=int, default=1)
p.add_argument("--K", type=int, nargs="+", default=[127, 255, 511, 1023, 2047, 3001, 4095, 4097, 5001, 6001, 7921, 8000])
a = p.parse_args()
import cupy  # noqa: E402
from sigconv.backends import overlap_save as os_  # noqa: E402

chosen = os_.fused_pairs
L, C = 1 << a.L, a.C
x = cupy.random.default_rng(0).standard_normal((C, L), dtype=cupy.float32)
copy_ms = min(_time(lambda: cupy.copyto(cupy.empty_like(x), x), 30) for _ in range(3))
name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
print(f"{name}; C={C} L=2^{a.L}; copy {copy_ms:.4f} ms", flush=True)
outs = {k: cupy.empty_like(x) for k in ("pairs", "floats")}
for K in a.K:
    wh = (np.random.default_rng(K).standard_normal(K) / np.sqrt(K)).astype(np.float32)
    w = cupy.asarray(wh)
    pad = (K - 1) // 2
    N = os_.fused_plan(K, L, C)["N"]
    z, d = os_.fused_alignment(K, pad, N)
    pp = chosen(N, os_._auto.fused_block(K, None), K + z + d, pad + z, L, x.data.ptr % 8 == 0)

    def run(k):
        os_.fused_pairs = chosen if k == "pairs" else (lambda *a: False)
        try:
            os_.launch_fft_fused(x, w, pad, L, None, out=outs[k])
        finally:
            os_.fused_pairs = chosen

    times = {k: [] for k in outs}
    for k in outs:
        run(k)
    for _ in range(4):
        for k in outs:
            times[k].append(_time(lambda: run(k), 30))
    n = min(L, 1 << 16)
    ref = np.array([np.correlate(np.pad(cupy.asnumpy(x[c, : n + K]).astype(np.float64), (pad, 0)), wh.astype(np.float64),
                                 "valid")[:n] for c in range(C)])
    errs = {k: float(np.abs(cupy.asnumpy(outs[k][:, :n]) - ref).max() / np.abs(ref).max()) for k in outs}
    diff = float(cupy.abs(outs["pairs"] - outs["floats"]).max() / cupy.abs(outs["floats"]).max())
    ta, tg = min(times["pairs"]), min(times["floats"])
    print(f"K={K:5d} tile {N:5d} (pairs {pp}): floats {tg:.4f} ms {100 * copy_ms / tg:4.1f}% copy, pairs "
          f"{ta:.4f} ms {100 * copy_ms / ta:4.1f}% copy ({100 * (ta / tg - 1):+5.1f}%); max err/peak vs float64 "
          f"{errs['floats']:.1e} / {errs['pairs']:.1e}, between {diff:.1e}; rounds "
          + "; ".join(f"{k}: " + " ".join(f"{t:.4f}" for t in v) for k, v in times.items()), flush=True)
