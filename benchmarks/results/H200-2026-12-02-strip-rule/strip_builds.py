"""The builds behind strip-ring.txt and strip-odd.txt. Run from the repository root on a GPU:

    python benchmarks/results/H200-2026-12-02-strip-rule/strip_builds.py ring   # kernel of commit c17ad37
    python benchmarks/results/H200-2026-12-02-strip-rule/strip_builds.py odd    # kernel with the trial define

ring: strip's ring kernels (11x11, 9x9, 7x7) under wrap/symm, STRIP_UNIFORM 0 (plain loads for the threads whose
window lies inside the image, edge functions for the others, capped at the fill build's occupancy) against 1 (every
thread through the rule's chunk map), capped (c) or not; 1024 x 1024, 2048 x 2048, 1025 x 65536; blocks (64, 1)
and (128, 1); U1 checked bit for bit against U0. That kernel had the STRIP_UNIFORM define.

odd: the wrap/symm builds as the launcher compiles them (ring kernels capped at the fill build's occupancy, rotating
ones not), on widths that are not a multiple of 4 (1024 x 1023, 1025 x 65535) and, for 7x7, 11x11 and 15x15, on
widths that are; block (64, 1). E0 is the kept kernel (with W % 4 != 0 every thread runs the edge function,
StripExtAny); E1 was a trial define, STRIP_EXP_SCALAR=1, not kept: those threads inlined scalar loads through the
rule's selects (c2d_extend_near per column). max |E1 - E0| checked.

Ratios are to the fill(0) build of the same shape and block; median of 50 launches (20 on the spectrogram) between
CUDA events."""
import itertools
import sys
import time

sys.path.insert(0, ".")
import cupy
import numpy as np

from sigconv import _kernels
from sigconv.backends import cuda2d as c2


def launch(x, w, block, boundary, extra=None, cap=True):
    """(function, grid, args, output) of strip's build for ``boundary`` with the defines ``extra``."""
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = c2._dims(x, w, (x.shape[2], x.shape[3]))
    pad = ((kH - 1) // 2, (kW - 1) // 2)
    defines = dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-pad[1]) % 4, STRIP_ROWS=c2.STRIP_ROWS)
    if boundary == "fill":
        mod = _kernels.module(c2._SRC, defines)
    else:
        opts = c2._reg_cap(cupy.cuda.Device().id, "conv2d_strip", tuple(sorted(defines.items()))) if cap else ()
        mod = _kernels.module(c2._SRC, {**defines, **(extra or {}), "C2D_BOUNDARY": c2.BOUNDARIES[boundary]},
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


def ring(rng, t0):
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
                    f2, g2, a2, y2 = launch(x, w, block, bnd, {"STRIP_UNIFORM": u}, cap)
                    r = median_ms(f2, g2, block, a2, reps) / tf
                    if u == 1 and not cap and block == (64, 1) and name == "1024":  # correctness vs the U0 build
                        f3, g3, a3, y3 = launch(x, w, block, bnd, {"STRIP_UNIFORM": 0}, True)
                        f3(g3, (block[0], block[1], 1), a3)
                        line += f" [U1-U0 max {float(cupy.abs(y2 - y3).max()):.2g}]"
                    line += f" | {bnd} U{u}{'c' if cap else ''} {r:5.3f} ({f2.num_regs}r)"
                print(line, f"[{time.time() - t0:.0f}s]", flush=True)


def odd(rng, t0):
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
                    f2, g2, a2, y2 = launch(x, w, block, bnd, {"STRIP_EXP_SCALAR": E}, c2.strip_ring(k, k))
                    line += f" | {bnd} E{E} {median_ms(f2, g2, block, a2, reps) / tf:5.3f} ({f2.num_regs}r)"
                    ys.append(y2)
                line += f" [diff {float(cupy.abs(ys[0] - ys[1]).max()):.2g}]"
            print(line, f"[{time.time() - t0:.0f}s]", flush=True)


if __name__ == "__main__":
    {"ring": ring, "odd": odd}[sys.argv[1]](cupy.random.default_rng(1), time.time())
