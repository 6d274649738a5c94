"""A/B of the implicit GEMM's build parameters on one layer (default: article A, 16x256x128x128, 3x3 -> 256, pad 1).

    python benchmarks/igemm_ab.py [--shape N,Cin,H,W,Cout,k,pad] [--reps 20]

Each row builds conv2d_igemm with cuda2d.igemm_plan's defines for a block, plus overrides (k rows per step IG_BK,
pipeline stages IG_STAGES, the occupancy bound IG_MINB), checks the result against cuDNN in float64 (relative L2 error)
and prints the median of --reps CUDA-event timings of the main kernel alone (the weight transposition and the table
are made once outside the timing), its TFLOP/s and registers. Needs a GPU, CuPy and torch.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--shape", default="16,256,128,128,256,3,1")
    p.add_argument("--reps", type=int, default=20)
    a = p.parse_args(argv)
    import cupy
    import torch

    from sigconv import _kernels
    from sigconv.backends import cuda2d

    N, Cin, H, W, Cout, k, pad = (int(v) for v in a.shape.split(","))
    Ho, Wo = H + 2 * pad - k + 1, W + 2 * pad - k + 1
    rng = cupy.random.default_rng(0)
    x = rng.standard_normal((N, Cin, H, W), dtype=cupy.float32)
    w = rng.standard_normal((Cout, Cin, k, k), dtype=cupy.float32)
    ref = torch.nn.functional.conv2d(torch.as_tensor(x, device="cuda").double(), torch.as_tensor(w, device="cuda").double(),
                                     padding=pad)
    ref = cupy.asarray(ref)
    y = cupy.empty((N, Cout, Ho, Wo), cupy.float32)
    flops = 2.0 * N * Cout * Ho * Wo * Cin * k * k
    tabs = {m: cupy.asarray(cuda2d.igemm_table(Cin, H, W, k, k, m)) for m in (False, True)}
    rows = [((16, 16), False, {}), ((16, 16), False, {"IG_MASK": 0}), ((16, 16), False, {"IG_STAGES": 4}),
            ((16, 32), False, {"IG_TN": 8}), ((16, 8), False, {}), ((8, 16), False, {}),
            ((16, 16), False, {"IG_TM": 16, "IG_MINB": 1}),
            ((32, 8), True, {}), ((32, 4), True, {}), ((32, 8), True, {"IG_WARPS_M": 4, "IG_WARPS_N": 2}),
            ((32, 16), True, {"IG_WARPS_M": 4, "IG_WARPS_N": 4}), ((32, 8), True, {"IG_MASK": 0})]
    print(f"layer {N}x{Cin}x{H}x{W} {k}x{k} -> {Cout}, pad {pad}: {flops / 1e9:.1f} GFLOP")
    for block, tf32, over in rows:
        plan = cuda2d.igemm_plan(block, k, k, (1, 1), tf32)
        d = {**plan["defines"], "IG_MASK": int(cuda2d.igemm_masked(k, k, "fill")), **over}
        tab = tabs[bool(d["IG_MASK"])]
        lay = cuda2d.igemm_layout(d)  # (the overrides' tile and stage)
        bm, bn = lay["tile"]
        plan = {**plan, "tile": lay["tile"]}
        smem = d["IG_STAGES"] * lay["stage"]
        mod = _kernels.module("conv2d.cu", d)
        f = mod.get_function("conv2d_igemm")
        if smem > 48 * 1024:
            f.max_dynamic_shared_size_bytes = smem
        wt, coutp = cuda2d.igemm_weights(mod, w, lay["bk"])
        grid = cuda2d.igemm_grid(plan, N, Cout, Ho, Wo)
        args = (x, wt, tab, x, y) + tuple(np.int32(v) for v in (N, Cin, H, W, Cout, coutp, pad, pad, Ho, Wo, 0,
                                                               -(-Cout // bm), int(Ho * Wo % 4 == 0))) \
            + (np.float32(0),)

        def run():
            f(grid, plan["launch"], args, shared_mem=smem)

        run()
        cupy.cuda.Device().synchronize()
        err = float(cupy.linalg.norm(y.astype(cupy.float64) - ref) / cupy.linalg.norm(ref))
        times = []
        for _ in range(a.reps):
            t0, t1 = cupy.cuda.Event(), cupy.cuda.Event()
            t0.record()
            run()
            t1.record()
            t1.synchronize()
            times.append(cupy.cuda.get_elapsed_time(t0, t1))
        ms = float(np.median(times))
        tag = ("tf32 " if tf32 else "fp32 ") + f"{block[0]}x{block[1]} " + " ".join(f"{k_}={v}" for k_, v in over.items())
        print(f"{tag:34} tile {bm}x{bn} smem {smem // 1024:3d} KB regs {f.num_regs:3d} local {f.local_size_bytes:3d}: "
              f"{ms:7.3f} ms {flops / ms / 1e9:6.1f} TFLOP/s  rel err {err:.1e}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
