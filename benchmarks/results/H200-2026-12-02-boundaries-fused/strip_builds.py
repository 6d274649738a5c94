"""The builds of conv2d_strip behind strip-builds.txt: fill(0) against wrap and symm at 15x15, each build compiled
with STRIP_UNIFORM 0 (the threads whose window leaves the image in __noinline__ edge functions) or 1 (every thread
through the rule's chunk map), with the launcher's register cap (c) or without, on 2048 x 2048 (img15), 1024 x 1024
(k15) and the spectrogram 1025 x 65536 (spec15). Median of 50 launches (20 for spec15) between CUDA events; each
ratio is to the fill(0) build of the same block. The first table of strip-builds.txt came from an earlier form of
this script, before STRIP_UNIFORM existed (every wrap/symm build then had the edge functions), which also varied
the rows per thread (the STRIP_ROWS define and strip_grid's rows). Run from the repository root on a GPU."""
import itertools
import sys

sys.path.insert(0, ".")
import cupy
import numpy as np

from sigconv import _kernels
from sigconv.backends import cuda2d as c2


def launch(x, w, rows, cap, block, boundary, uniform=None):
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = c2._dims(x, w, (x.shape[2], x.shape[3]))
    pad = ((kH - 1) // 2, (kW - 1) // 2)
    defines = dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-pad[1]) % 4, STRIP_ROWS=rows)
    if uniform is not None and boundary != "fill":
        defines["STRIP_UNIFORM"] = uniform
    if boundary == "fill":
        mod = _kernels.module(c2._SRC, defines)
    else:
        opts = c2._reg_cap(cupy.cuda.Device().id, "conv2d_strip", tuple(sorted(defines.items()))) if cap else ()
        mod = _kernels.module(c2._SRC, {**defines, "C2D_BOUNDARY": c2.BOUNDARIES[boundary]}, options=opts)
    f, y, b, hb, vi, vo = c2._single_channel_setup(mod, "conv2d_strip", "c_taps", x, w, None, None, Ho, Wo)
    g = c2.strip_grid(N, Ho, Wo, block, rows)
    args = (x, y) + c2._i32(N, H, W, pad[0], pad[1], Ho, Wo) + (b,) + c2._i32(hb, vi, vo) + (np.float32(0),)
    return f, g, args


def median_ms(f, g, block, args, reps):
    for _ in range(3):
        f(g, (block[0], block[1], 1), args)
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    ts = []
    for _ in range(reps):
        e0.record()
        f(g, (block[0], block[1], 1), args)
        e1.record()
        e1.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(e0, e1))
    return float(np.median(ts))


rng = cupy.random.default_rng(1)
for name, shape in (("img15", (2048, 2048)), ("k15", (1024, 1024)), ("spec15", (1025, 65536))):
    x = rng.standard_normal((1, 1) + shape, dtype=cupy.float32)
    w = rng.standard_normal((1, 1, 15, 15), dtype=cupy.float32)
    reps = 20 if name == "spec15" else 50
    for block in ((64, 1), (128, 1)):
        f, g, a = launch(x, w, 32, True, block, "fill")
        tf = median_ms(f, g, block, a, reps)
        line = f"{name} block={block} fill {tf * 1e3:8.1f} us"
        for bnd, (u, cap) in itertools.product(("wrap", "symm"), ((0, True), (1, True), (1, False))):
            f2, g2, a2 = launch(x, w, 32, cap, block, bnd, u)
            line += f" | {bnd} U{u}{'c' if cap else ''} {median_ms(f2, g2, block, a2, reps) / tf:5.3f} ({f2.num_regs}r)"
        print(line, flush=True)
