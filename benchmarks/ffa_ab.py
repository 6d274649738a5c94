"""A/B of the fast FIR algorithm's thread shapes and blocks (variant ffa) against tiled, on one long signal.

    python benchmarks/ffa_ab.py [--K 25,63] [--L 2^26] [--shapes 8x256,4x512] [--blocks 64,96,128,256]

Each row runs cuda1d.launch_ffa with one (quarter positions per thread RQ, __launch_bounds__) shape and block, checks
the output against the float64 direct sum of a 2^16-sample window (relative L2 error) and prints the median of CUDA-event
timings (taps preparation and upload included, as a user's call pays them), its share of the device-to-device copy
bandwidth (read x, write y) and the kernel's registers. tiled at its usual blocks runs in the same process for
comparison. Needs a GPU and CuPy.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def _ints(text: str) -> list[int]:
    return [int(t) if "^" not in t else int(t.split("^")[0]) ** int(t.split("^")[1]) for t in text.split(",")]


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--K", default="25,63")
    p.add_argument("--L", default="2^26")
    p.add_argument("--shapes", default="8x256,4x512", help="RQ x __launch_bounds__ pairs (RQ even)")
    p.add_argument("--blocks", default="64,96,128,192,256")
    p.add_argument("--budget", type=float, default=0.25, help="seconds of timed calls per row")
    a = p.parse_args(argv)
    import cupy

    from sigconv import _kernels
    from sigconv.backends import cpu as cpu_backend, cuda1d
    from sigconv.bench.timing import gpu_copy_gbs, stats, time_calls

    (L,) = _ints(a.L)
    copy = gpu_copy_gbs()["gbs"]
    rng = cupy.random.default_rng(0)
    x = rng.standard_normal((1, L), dtype=cupy.float32)
    y = cupy.empty_like(x)
    win = slice(L // 2, L // 2 + (1 << 16))
    print(f"device {cupy.cuda.runtime.getDeviceProperties(0)['name'].decode()}, copy {copy:.0f} GB/s, L={L}")
    for K in _ints(a.K):
        w = rng.standard_normal(K, dtype=cupy.float32)
        pad = (K - 1) // 2
        xs = cupy.asnumpy(x[:, win.start - pad: win.stop - pad + K - 1]).astype(np.float64)
        ref = cpu_backend.corr1d_direct(xs, cupy.asnumpy(w).astype(np.float64), 0, win.stop - win.start)
        rows = [("tiled", None, b) for b in (64, 96, 128, 256)]
        rows += [("ffa", tuple(int(v) for v in s.split("x")), b) for s in a.shapes.split(",") for b in _ints(a.blocks)]
        for name, shape, b in rows:
            if shape and b > shape[1]:
                continue
            if name == "tiled":
                run = lambda i, b=b: cuda1d.launch_tiled(x, w, pad, L, b, out=y)  # noqa: E731
                regs = ""
            else:
                kw = {"_shape": {"rq": shape[0], "maxt": shape[1]}}
                run = lambda i, b=b, kw=kw: cuda1d.launch_ffa(x, w, pad, L, b, out=y, **kw)  # noqa: E731
                g = cuda1d.ffa_launches(x.data.ptr // 4, 1, L, K, pad, L, b, **kw["_shape"])[0]
                fn = _kernels.module(cuda1d.FFA_SOURCE, name_expressions=(g["expr"],)).get_function(g["expr"])
                run(0)
                regs = f"{fn.num_regs} regs"
            y.fill(np.nan)
            run(0)
            got = cupy.asnumpy(y[:, win]).astype(np.float64)
            err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
            st = stats(time_calls(run, 1, cupy, budget_s=a.budget, min_reps=10, max_reps=400))
            ms = st["ms_median"]
            pct = 100 * (2 * 4 * L / (ms * 1e-3) / 1e9) / copy
            tag = name if shape is None else f"ffa RQ={shape[0]} bound={shape[1]}"
            print(f"K={K:4d} {tag:24s} b={b:4d} {ms:8.4f} ms  p20-p80 {st['p20']:.4f}-{st['p80']:.4f}  {pct:5.1f}% copy"
                  f"  err {err:.1e} {regs}" + ("  BAD" if not err <= 1e-5 else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
