"""strip's wrap/symm builds on widths that are not a multiple of 4, four loaders for the rows that are not 16-byte
(trial define STRIP_EXP, from strip-exp.patch beside this file: `git apply` it to the kernel of commit fa4728d): E0 the edge function (StripExtAny, __noinline__: column table once, the row through the
general rule); E1 inlined, columns and row by selects at every load (StripExtNearScalar); E2 inlined, column table
once, the row by selects (StripExtNearTable); E3 E2's loader in the __noinline__ edge function. E1-E3 only for the
threads whose rows lie within one period. Also the 16-byte widths, where E1-E3 add code beside the chunk-map path.
Ratios to the fill(0) build of the same shape and block (median of 50 launches, 20 on the spectrogram, CUDA
events); every E checked bit for bit against E0. Builds compiled first by parallel processes (CuPy's disk cache).

    python benchmarks/results/H100-H200-2026-12-02-odd-widths/strip_odd.py [--ks 3 5 7 9 11 15] [--jobs 15]

E3 is what the kernel now does (StripExtCols<B, true> in the edge function; StripExtCols<B, false> is E0's loader).
"""
import argparse
import itertools
import multiprocessing as mp
import sys
import time

sys.path.insert(0, ".")

ES = (0, 1, 2, 3)
SHAPES = (("1024x1023", (1024, 1023)), ("spec-odd", (1025, 65535)), ("1024x1024", (1024, 1024)),
          ("spec", (1025, 65536)))


def defines(k):
    from sigconv.backends import cuda2d as c2
    return dict(STRIP_KH=k, STRIP_KW=k, STRIP_SH=(-((k - 1) // 2)) % 4, STRIP_ROWS=c2.STRIP_ROWS)


def build(k, boundary, E):
    import cupy
    from sigconv import _kernels
    from sigconv.backends import cuda2d as c2
    d = defines(k)
    if boundary == "fill":
        return _kernels.module(c2._SRC, d)
    opts = c2._reg_cap(cupy.cuda.Device().id, "conv2d_strip", tuple(sorted(d.items()))) if c2.strip_ring(k, k) else ()
    return _kernels.module(c2._SRC, {**d, "STRIP_EXP": E, "C2D_BOUNDARY": c2.BOUNDARIES[boundary]}, options=opts)


def _build_task(t):
    t0 = time.time()
    build(*t)
    return t, time.time() - t0


def launch(mod, x, w, block):
    import numpy as np
    from sigconv.backends import cuda2d as c2
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = c2._dims(x, w, (x.shape[2], x.shape[3]))
    pad = ((kH - 1) // 2, (kW - 1) // 2)
    f, y, b, hb, vi, vo = c2._single_channel_setup(mod, "conv2d_strip", "c_taps", x, w, None, None, Ho, Wo)
    g = c2.strip_grid(N, Ho, Wo, block)
    args = (x, y) + c2._i32(N, H, W, pad[0], pad[1], Ho, Wo) + (b,) + c2._i32(hb, vi, vo) + (np.float32(0),)
    return f, g, args, y


def median_ms(f, g, block, args, reps):
    import cupy
    import numpy as np
    for _ in range(3):
        f(g, (block[0], block[1], 1), args)
    e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
    ts = []
    for _ in range(reps):
        e0.record(); f(g, (block[0], block[1], 1), args); e1.record(); e1.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(e0, e1))
    return float(np.median(ts))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--ks", type=int, nargs="+", default=[3, 5, 7, 9, 11, 15])
    p.add_argument("--jobs", type=int, default=15)
    p.add_argument("--blocks", default="64,128")
    a = p.parse_args()
    t0 = time.time()
    ctx = mp.get_context("spawn")
    with ctx.Pool(a.jobs) as pool:
        list(pool.imap_unordered(_build_task, [(k, "fill", 0) for k in a.ks]))
        tasks = [(k, b, E) for k in sorted(a.ks, reverse=True) for b in ("wrap", "symm") for E in ES]
        for t, dt in pool.imap_unordered(_build_task, tasks):
            pass
    print(f"builds: {len(a.ks) * (1 + 2 * len(ES))} compiled in {time.time() - t0:.0f}s", flush=True)
    import cupy
    rng = cupy.random.default_rng(1)
    print(cupy.cuda.runtime.getDeviceProperties(0)["name"].decode(), flush=True)
    for k in a.ks:
        mods = {("fill", 0): build(k, "fill", 0)}
        for b, E in itertools.product(("wrap", "symm"), ES):
            mods[(b, E)] = build(k, b, E)
        for name, shape in SHAPES:
            x = rng.standard_normal((1, 1) + shape, dtype=cupy.float32)
            w = rng.standard_normal((1, 1, k, k), dtype=cupy.float32)
            reps = 20 if shape[1] > 9999 else 50
            for bx in (int(v) for v in a.blocks.split(",")):
                block = (bx, 1)
                f, g, args, _ = launch(mods[("fill", 0)], x, w, block)
                tf = median_ms(f, g, block, args, reps)
                line = f"k{k:<2} {name:9} b{bx:<3} fill {tf * 1e3:7.1f}us"
                for bnd in ("wrap", "symm"):
                    ys = {}
                    parts = []
                    for E in ES:
                        f2, g2, a2, y2 = launch(mods[(bnd, E)], x, w, block)
                        parts.append(f"{median_ms(f2, g2, block, a2, reps) / tf:5.3f}")
                        ys[E] = y2
                    diff = max(float(cupy.abs(ys[E] - ys[0]).max()) for E in ES[1:])
                    line += f" | {bnd} " + " ".join(parts) + ("" if diff == 0 else f" DIFF {diff:.2g}")
                print(line, f"[{time.time() - t0:.0f}s]", flush=True)


if __name__ == "__main__":
    main()
