"""The builds behind strip-ring.txt (kernel of commit c17ad37, which had the STRIP_UNIFORM define): strip's ring
kernels (7x7, 9x9, 11x11) under wrap/symm, STRIP_UNIFORM 0 (plain loads for the threads whose window lies inside the
image, edge functions for the others, capped at the fill build's occupancy) against 1 (every thread through the
rule's chunk map), capped (c) or not; ratios to the fill(0) build; 1024 x 1024, 2048 x 2048, 1025 x 65536; median
of 50 launches (20 on the spectrogram) between CUDA events; U1 checked bit for bit against U0. Run from the
repository root on a GPU."""
import itertools, sys, time
sys.path.insert(0, ".")
import cupy
import numpy as np
from sigconv import _kernels
from sigconv.backends import cuda2d as c2


def launch(x, w, block, boundary, uniform=None, cap=True):
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = c2._dims(x, w, (x.shape[2], x.shape[3]))
    pad = ((kH - 1) // 2, (kW - 1) // 2)
    defines = dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-pad[1]) % 4, STRIP_ROWS=c2.STRIP_ROWS)
    if boundary == "fill":
        mod = _kernels.module(c2._SRC, defines)
    else:
        d2 = dict(defines, STRIP_UNIFORM=uniform)
        opts = c2._reg_cap(cupy.cuda.Device().id, "conv2d_strip", tuple(sorted(defines.items()))) if cap else ()
        mod = _kernels.module(c2._SRC, {**d2, "C2D_BOUNDARY": c2.BOUNDARIES[boundary]}, options=opts)
    f, y, b, hb, vi, vo = c2._single_channel_setup(mod, "conv2d_strip", "c_taps", x, w, None, None, Ho, Wo)
    g = c2.strip_grid(N, Ho, Wo, block)
    args = (x, y) + c2._i32(N, H, W, pad[0], pad[1], Ho, Wo) + (b,) + c2._i32(hb, vi, vo) + (np.float32(0),)
    return f, g, args, y


def median_ms(f, g, block, args, reps):
    for _ in range(3):
        f(g, (block[0], block[1], 1), args)
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    ts = []
    for _ in range(reps):
        e0.record(); f(g, (block[0], block[1], 1), args); e1.record(); e1.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(e0, e1))
    return float(np.median(ts))


rng = cupy.random.default_rng(1)
t0 = time.time()
for k in (11, 9, 7):
    for name, shape in (("1024", (1024, 1024)), ("2048", (2048, 2048)), ("spec", (1025, 65536))):
        x = rng.standard_normal((1, 1) + shape, dtype=cupy.float32)
        w = rng.standard_normal((1, 1, k, k), dtype=cupy.float32)
        reps = 20 if name == "spec" else 50
        for block in ((64, 1), (128, 1)):
            f, g, a, _ = launch(x, w, block, "fill")
            tf = median_ms(f, g, block, a, reps)
            line = f"k{k} {name} block={block} fill {tf * 1e3:8.1f} us"
            for bnd, (u, cap) in itertools.product(("wrap", "symm"), ((0, True), (1, True), (1, False))):
                f2, g2, a2, y2 = launch(x, w, block, bnd, u, cap)
                r = median_ms(f2, g2, block, a2, reps) / tf
                if u == 1 and not cap and block == (64, 1) and name == "1024":  # correctness vs the U0 build
                    f3, g3, a3, y3 = launch(x, w, block, bnd, 0, True)
                    f3(g3, (block[0], block[1], 1), a3)
                    err = float(cupy.abs(y2 - y3).max())
                    line += f" [U1-U0 max {err:.2g}]"
                line += f" | {bnd} U{u}{'c' if cap else ''} {r:5.3f} ({f2.num_regs}r)"
            print(line, f"[{time.time() - t0:.0f}s]", flush=True)
