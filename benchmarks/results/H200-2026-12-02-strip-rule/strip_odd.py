"""The builds behind strip-odd.txt: strip's wrap/symm builds over its fill(0) build as the launcher compiles them
(ring kernels capped at the fill build's occupancy, rotating ones not), on widths that are not a multiple of 4
(1024 x 1023, 1025 x 65535) and, for 7x7, 11x11 and 15x15, on widths that are. E0 is the kept kernel (with W % 4
!= 0 every thread runs the edge function, StripExtAny); E1 was a trial define, STRIP_EXP_SCALAR=1, not kept: those
threads inline scalar loads through the rule's selects (c2d_extend_near per column). max |E1 - E0| checked. Median
of 50 launches (20 on the spectrogram), block (64, 1). Run from the repository root on a GPU."""
import sys, time
sys.path.insert(0, ".")
import cupy
import numpy as np
from sigconv import _kernels
from sigconv.backends import cuda2d as c2


def launch(x, w, block, boundary, E=0):
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = c2._dims(x, w, (x.shape[2], x.shape[3]))
    pad = ((kH - 1) // 2, (kW - 1) // 2)
    defines = dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-pad[1]) % 4, STRIP_ROWS=c2.STRIP_ROWS)
    if boundary == "fill":
        mod = _kernels.module(c2._SRC, defines)
    else:
        ring = kH <= 11 and kH * kW <= 121
        opts = c2._reg_cap(cupy.cuda.Device().id, "conv2d_strip", tuple(sorted(defines.items()))) if ring else ()
        mod = _kernels.module(c2._SRC, {**defines, "STRIP_EXP_SCALAR": E, "C2D_BOUNDARY": c2.BOUNDARIES[boundary]},
                              options=opts)
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
block = (64, 1)
for k in (3, 5, 7, 9, 11, 15):
    for name, shape in (("1024x1023", (1024, 1023)), ("spec-odd", (1025, 65535)), ("1024x1024", (1024, 1024)),
                        ("spec", (1025, 65536))):
        if shape[1] % 4 == 0 and k in (3, 5, 9):
            continue
        x = rng.standard_normal((1, 1) + shape, dtype=cupy.float32)
        w = rng.standard_normal((1, 1, k, k), dtype=cupy.float32)
        reps = 20 if shape[1] > 9999 else 50
        f, g, a, _ = launch(x, w, block, "fill")
        tf = median_ms(f, g, block, a, reps)
        line = f"k{k} {name} fill {tf * 1e3:8.1f} us"
        for bnd in ("wrap", "symm"):
            ys = []
            for E in (0, 1):
                f2, g2, a2, y2 = launch(x, w, block, bnd, E)
                line += f" | {bnd} E{E} {median_ms(f2, g2, block, a2, reps) / tf:5.3f} ({f2.num_regs}r)"
                ys.append(y2)
            line += f" [diff {float(cupy.abs(ys[0] - ys[1]).max()):.2g}]"
        print(line, f"[{time.time() - t0:.0f}s]", flush=True)
