"""Run every cuda conv1d variant (and every cuda conv2d variant, if any are registered) on small
shapes, convolve and correlate, every mode, and compare with a float64 CPU reference.

Exits 1 on any mismatch, 2 when no GPU. Meant to run under compute-sanitizer:

    compute-sanitizer --tool memcheck  --report-api-errors no --error-exitcode 3 python benchmarks/sanitize.py
    compute-sanitizer --tool racecheck --report-api-errors no --error-exitcode 3 python benchmarks/sanitize.py

(``--report-api-errors no``: cuda-bindings, through which fft_fused launches after its spectrum kernel, looks up
every driver entry point on its first call, and the driver answers "invalid argument" for those it lacks; each such
answer would count as an error. A failing call of sigconv's own raises, through CuPy or the launcher, and fails the
check instead.)

(small shapes keep the instrumented run short; each variant still sees tails, K > tile, every mode,
unaligned channel starts (L % 4 != 0) and several channels; the fft variants also see inputs of huge and tiny
magnitude, which their kernels scale by powers of two, and fft_fused also problems large enough for its own kernel;
``--blocks 96,992`` runs every variant with those blocks, any
multiple of 32 threads.) Variant names as arguments (``sanitize.py fft``) restrict
the run to those variants (``sanitize.py boundary strip shfl``: those two, their boundaries included);
``--shape I`` runs only the boundary checks of BOUNDARY_SHAPES[I] and ``--no-boundary`` everything but the 2-D
boundary shapes, so that the parts can run as parallel processes (benchmarks/gpu_check.sh does: NVRTC builds dominate an instrumented run);
``boundary`` names the 2-D boundaries (fill 0 and 2.5, wrap, symm, on kernels larger than the image and 1xN /
Nx1 shapes): naive through its own loads and through the extended copy (float32, float64), the other variants
(shared: float32 and float64; regblock, prefetch, strip, shfl: float32, wherever they apply, through their own
loads; separable's row pass through the rule, rank-1) and the uint64 kernels (conv1d and conv2d naive, bit for bit
against NumPy's int64 arithmetic), which also run when no name is given.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import scipy.signal


#: Input magnitudes (powers of two) the fft variants are also checked at, by dtype: beyond what an unscaled float
#: transform survives, and deep in the small numbers.
FFT_MAGNITUDES = {"float32": (0, 120, -100), "float64": (0, 1000, -1000)}
#: The conv1d shapes (L, K, C) of every variant: a single sample, tails, K above a tile, several channels.
SHAPES_1D = ((1, 3, 1), (37, 5, 2), (300, 64, 3), (1029, 300, 2), (50, 1030, 1))
#: fft_fused's own kernel runs above the float64 fallback of small problems: tiles of 1024, 4096 and 16384 samples
#: (the column tile: warps that meet in pairs) and, for the largest filters, 32768 (on 1024 threads) or 16384 (on
#: fewer); lengths ending inside a tile; an even length, whose 32768 tiles read pairs of samples as 8-byte loads.
FUSED_SHAPES = ((22001, 1, 3), (70001, 255, 1), (40001, 2049, 2), (40001, 8192, 2), (40000, 7921, 2))
#: ffa's channel classes (rows of odd length start at four 16-byte phases: one launch each) and its longest filter.
FFA_SHAPES = ((2001, 63, 3), (999, 125, 2))
#: Multi-channel 2-D layers (N, Cin, H, W, Cout, (kH, kW), stride, pad): odd sizes with bias; more channels than one
#: tile of the implicit GEMM with a stride; article B's shape, scaled down.
MULTI_2D = ((2, 3, 9, 11, 10, (3, 3), (1, 1), (1, 1)), (1, 20, 8, 12, 50, (3, 3), (2, 1), (1, 0)),
            (1, 6, 20, 24, 6, (6, 6), (1, 1), (0, 0)))
#: The boundary shapes (H, W, kH, kW): kernel larger than the image in both / one axis, 1xN, Nx1, even; widths
#: that are multiples of 4 (the fused kernels' 16-byte loads); kernels taller than strip's ring (every thread
#: reading through the rule).
BOUNDARY_SHAPES = ((9, 13, 3, 3), (3, 5, 7, 9), (17, 6, 5, 2), (6, 2, 3, 4), (1, 11, 1, 4), (13, 1, 4, 1),
                   (9, 16, 3, 3), (5, 8, 7, 7), (20, 24, 15, 15), (30, 36, 13, 11))


def _windows_2d(H, W, kH, kW):
    """(mode, pad, out_hw) in correlation form: full, correlate2d's and convolve2d's same, valid if it fits."""
    yield "full", (kH - 1, kW - 1), (H + kH - 1, W + kW - 1)
    yield "same", ((kH - 1) // 2, (kW - 1) // 2), (H, W)
    yield "same_conv", (kH // 2, kW // 2), (H, W)
    if H >= kH and W >= kW:
        yield "valid", (0, 0), (H - kH + 1, W - kW + 1)


def _extended(x, kH, kW, pad, out_hw, boundary, fill):
    """x extended by the boundary rule as the cpu backend extends it (checked against SciPy by the CPU tests)."""
    from sigconv.backends.cpu import extended

    return extended(x[None, None], (kH, kW), pad, out_hw, boundary, fill)[0][0, 0]


def boundary_checks(cupy, rng, variants=frozenset(), shapes=BOUNDARY_SHAPES, uint1d=True) -> tuple:
    """(checks, mismatches) of the 2-D boundaries (naive: float32/float64/uint64, through its own loads and the
    copy; shared: float32/float64; the other variants: float32) over ``shapes`` and, with ``uint1d``, the uint64 conv1d kernel; each mismatch printed.
    ``variants`` (2-D variant names) restricts the run to those variants' boundaries."""
    from sigconv.backends import cuda1d, cuda2d
    from sigconv.registry.table import Conv2dJob, get

    n = bad = 0
    tol = {"float32": 1e-5, "float64": 1e-10}
    for H, W, kH, kW in shapes:
        print(f"boundary {H}x{W} k{kH}x{kW} ({n} checks so far, {bad} mismatches)", flush=True)
        xi = rng.integers(-(2**62), 2**62, (H, W), dtype=np.int64)
        wi = rng.integers(-(2**62), 2**62, (kH, kW), dtype=np.int64)
        xf, wf = rng.standard_normal((H, W)), rng.standard_normal((kH, kW))
        wr = np.outer(rng.standard_normal(kH), rng.standard_normal(kW))  # rank-1, for separable
        for mode, pad, out_hw in _windows_2d(H, W, kH, kW):
            for boundary, fill in (("fill", 0), ("fill", 2.5), ("wrap", 0), ("symm", 0)):
                job = Conv2dJob((1, 1, H, W), (1, 1, kH, kW), "float32", (1, 1), pad, out_hw)
                others = [v for v in cuda2d.VARIANTS if v not in ("naive", "shared")
                          and not get("conv2d", "cuda", v).applies(job)]
                # naive through both ways to a boundary (its own loads; the extended copy, conv2d_extend)
                runs = [("naive", d, e) for d in ("float32", "float64", "uint64") for e in (False, True)] \
                    + [("shared", d, False) for d in ("float32", "float64")] \
                    + [(v, "float32", False) for v in others]
                runs = [r for r in runs if not variants or r[0] in variants]
                for variant, dtype, extend in runs:
                    exact = dtype == "uint64"
                    if exact:
                        f = -3 if fill else 0  # an integer fill constant, negative: taken mod 2^64
                        x, w = cupy.asarray(xi.view(np.uint64)), cupy.asarray(wi.view(np.uint64))
                    else:
                        f = fill
                        x, w = cupy.asarray(xf, dtype=dtype), cupy.asarray(wr if variant == "separable" else wf,
                                                                           dtype=dtype)
                    y = cupy.asnumpy(cuda2d.corr2d(x.reshape(1, 1, H, W), w.reshape(1, 1, kH, kW), None, (1, 1), pad,
                                                   out_hw, variant=variant, boundary=boundary, fillvalue=f,
                                                   extend=extend))[0, 0]
                    n += 1
                    tag = f"{variant} {dtype} {H}x{W} k{kH}x{kW} {mode} {boundary} fill={f} extend={extend}"
                    if exact:
                        xe = _extended(xi, kH, kW, pad, out_hw, boundary, f)
                        ref = np.zeros(out_hw, np.int64)
                        for i in range(kH):
                            for j in range(kW):
                                ref += wi[i, j] * xe[i:i + out_hw[0], j:j + out_hw[1]]
                        if not np.array_equal(y.view(np.int64), ref):
                            bad += 1
                            print(f"MISMATCH {tag}: not bit for bit")
                        continue
                    xe = _extended(cupy.asnumpy(x).astype(np.float64), kH, kW, pad, out_hw, boundary, f)
                    ref = scipy.signal.correlate2d(xe, cupy.asnumpy(w).astype(np.float64), "valid")
                    den = np.linalg.norm(ref) or 1.0
                    err = np.linalg.norm(y.astype(np.float64) - ref) / den if np.isfinite(y).all() else np.inf
                    if not err <= get("conv2d", "cuda", variant).extra.get("tol", tol[dtype]):
                        bad += 1
                        print(f"MISMATCH {tag}: rel err {err:.3g}")
    for L, K, C in () if variants or not uint1d else ((1, 3, 1), (37, 5, 2), (50, 64, 3)):
        xi = rng.integers(-(2**62), 2**62, (C, L), dtype=np.int64)
        hi = rng.integers(-(2**62), 2**62, K, dtype=np.int64)
        full = np.stack([np.convolve(r, hi[::-1]) for r in xi])  # correlation with hi, full window
        for pad, out_len in ((K - 1, L + K - 1), ((K - 1) // 2, L), (0, L - K + 1)):
            if out_len <= 0:
                continue
            y = cupy.asnumpy(cuda1d.corr1d(cupy.asarray(xi.view(np.uint64)), cupy.asarray(hi.view(np.uint64)), pad,
                                           out_len))
            n += 1
            if not np.array_equal(y.view(np.int64), full[:, K - 1 - pad:K - 1 - pad + out_len]):
                bad += 1
                print(f"MISMATCH conv1d uint64 L={L} K={K} C={C} pad={pad}: not bit for bit")
    return n, bad


def _scaled_mismatch(y, ref, mag: int, what: str, tol: float = 1e-5) -> int:
    """1, and a MISMATCH line naming `what`, where the relative error of y times 2^-mag (float64) against ref is
    above tol or y is not finite; else 0."""
    err = (float(np.linalg.norm(y.astype(np.float64) * np.ldexp(1.0, -mag) - ref) / np.linalg.norm(ref))
           if np.isfinite(y).all() else np.inf)
    if err <= tol:
        return 0
    print(f"MISMATCH {what} 2^{mag}: rel err {err:.3g}")
    return 1


#: fft_fused's longest tile on 512 threads, two butterflies a thread (overlap_save.fused_wide; that tile's default
#: block, run here with the tile and block given, whatever K): (L, K, C, x offset in floats): 8-byte loads (L even, x aligned), 16-byte loads of a tile wholly
#: inside x (60000 samples), float loads (L odd; x one float off), a last tile of one output ("same" on 74545 samples)
#: whose place in y is 16-byte aligned in one channel and not in the other.
WIDE_SHAPES = ((40000, 7921, 2, 0), (60000, 7921, 1, 0), (40001, 8000, 1, 0), (40000, 7921, 1, 1),
               (74545, 7921, 2, 0))


def wide_tile_checks(cupy, rng) -> tuple:
    """(mismatches, checks) of fft_fused's 32768 tile on 512 threads (overlap_save.launch_fft_fused with that tile
    and block) against the float64 correlation, every mode, inputs of ordinary, huge and tiny magnitude; also on
    more tiles than the device has multiprocessors (the grid of one block a multiprocessor that prefetches its next
    tile and stores through bulk copies, overlap_save.fused_persistent, on compute capability 9.0), x two floats off a
    16-byte boundary in one of them."""
    from sigconv.backends import overlap_save
    from sigconv.backends.cpu import _window_from_full
    from sigconv.engine.ops import window_1d

    sms = overlap_save._device_geometry()[0]
    many = [(2 * (-(-(sms + 3) * (32768 - K + 1) // C) // 2), K, C, off) for K, C, off in ((7921, 1, 0), (7922, 2, 2))]
    bad = n = 0
    for L, K, C, off in WIDE_SHAPES + tuple(many):
        x0 = rng.standard_normal((C, L)).astype(np.float32)
        w = rng.standard_normal(K).astype(np.float32)
        corr0 = scipy.signal.oaconvolve(x0.astype(np.float64), w[::-1].astype(np.float64)[None, :], axes=-1)
        room = int(np.floor(np.log2(np.finfo(np.float32).max / 4 / np.abs(corr0).max())))  # (as main's)
        for mag in (min(m, room) for m in FFT_MAGNITUDES["float32"]):
            # (x off floats past an allocation's start, contiguous)
            flat = cupy.concatenate([cupy.zeros(off, np.float32), cupy.asarray(np.ldexp(x0, mag)).ravel()])
            xg = flat[off:].reshape(C, L)
            for mode in ("full", "same", "valid"):
                pad, out_len = window_1d(mode, L, K)
                y = cupy.asnumpy(overlap_save.launch_fft_fused(xg, cupy.asarray(w), pad, out_len, 512, tile=32768))
                bad += _scaled_mismatch(y, _window_from_full(corr0, K, pad, out_len), mag,
                                        f"conv1d fft_fused tile 32768 block=512 L={L} K={K} C={C} off={off} {mode}")
                n += 1
    return bad, n


def main(argv=None) -> int:
    import argparse

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("names", nargs="*", help="variant names and/or 'boundary' (default: everything)")
    p.add_argument("--shape", type=int, choices=range(len(BOUNDARY_SHAPES)), default=None,
                   help="only the boundary checks of BOUNDARY_SHAPES[SHAPE]")
    p.add_argument("--no-boundary", action="store_true", help="leave the boundary checks out")
    p.add_argument("--blocks", default=None, metavar="LIST",
                   help="blocks of threads to run every variant with, e.g. 96,992 (conv2d: laid out by the variant; "
                        "default: conv1d the smallest and default block of each variant, conv2d the default)")
    a = p.parse_args(argv)
    try:
        asked = [int(b) for b in a.blocks.split(",")] if a.blocks else None
    except ValueError:
        p.error(f"--blocks must list integers, got {a.blocks!r}")
    only = set(a.names)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's sigconv
    import sigconv
    from sigconv._core import devices as _devices
    from sigconv.registry import table as _registry
    from sigconv.backends import cpu, cuda2d
    from sigconv.registry.table import Conv1dJob, Conv2dJob
    from sigconv.engine.ops import window_1d
    from sigconv.backends.cpu import _window_from_full

    reason = _devices.cuda_reason()
    if reason:
        print(f"sanitize: no usable GPU ({reason})")
        return 2
    import cupy

    # no memory pool: an out-of-bounds access inside a pooled chunk would be invisible to memcheck
    cupy.cuda.set_allocator(None)
    tol = {"float32": 1e-5, "float64": 1e-10}
    rng = np.random.default_rng(0)
    bad = 0
    n = 0
    general = a.shape is None  # the checks other than the boundaries'
    for v in _registry.entries("conv1d", "cuda", kind="variant") if general else ():
        if only and v.name not in only:
            continue
        blocks = asked or sorted({min(v.blocks), v.default_block})
        for dtype in v.dtypes:
            for L, K, C in SHAPES_1D + {"fft_fused": FUSED_SHAPES, "ffa": FFA_SHAPES}.get(v.name, ()):
                if v.applies(Conv1dJob(C, L, K, dtype)):
                    continue
                x0 = rng.standard_normal((C, L)).astype(dtype)
                h = rng.standard_normal(K).astype(dtype)
                conv0 = scipy.signal.oaconvolve(x0.astype(np.float64), h.astype(np.float64)[None, :], axes=-1)
                corr0 = scipy.signal.oaconvolve(x0.astype(np.float64), h[::-1].astype(np.float64)[None, :], axes=-1)
                # a huge magnitude lowered where the exact outputs would overflow the dtype (long filters sum
                # thousands of products): an overflow to inf is right, and tells nothing about the scaling
                room = int(np.floor(np.log2(np.finfo(dtype).max / 4 / max(np.abs(conv0).max(), np.abs(corr0).max(),
                                                                           1.0))))
                for mag in FFT_MAGNITUDES[dtype] if v.method == "fft" else (0,):
                    mag = min(mag, room)
                    x = np.ldexp(x0, mag)  # x0 times a power of two (exact but for the odd subnormal at 2^-100)
                    full_conv, full_corr = np.ldexp(conv0, mag), np.ldexp(corr0, mag)
                    xg = cupy.asarray(x)
                    for block in blocks:
                        for mode in ("full", "same", "valid"):
                            pad, out_len = window_1d(mode, L, K)
                            for op, fn, full in (("convolve", sigconv.convolve, full_conv),
                                                 ("correlate", sigconv.correlate, full_corr)):
                                y = cupy.asnumpy(fn(xg, h, mode, axis=-1, backend="cuda", variant=v.name, block=block))
                                ref = _window_from_full(full, K, pad, out_len)
                                sc = np.ldexp(1.0, -mag)  # norms of 2^1000 values would overflow
                                den = np.linalg.norm(ref * sc) or 1.0
                                err = (np.linalg.norm((y.astype(np.float64) - ref) * sc) / den
                                       if np.isfinite(y).all() else np.inf)
                                n += 1
                                if not err <= tol[dtype]:
                                    bad += 1
                                    print(f"MISMATCH conv1d {v.name} {dtype} block={block} L={L} K={K} C={C} "
                                          f"{mode} {op} 2^{mag}: rel err {err:.3g}")
        print(f"conv1d {v.name}: done")
    if general and (not only or "fft_fused" in only):
        b, m = wide_tile_checks(cupy, rng)
        bad, n = bad + b, n + m
        print("conv1d fft_fused 32768 tile on 512 threads: done")
    for v in _registry.entries("conv2d", "cuda", kind="variant") if general else ():
        if only and v.name not in only:
            continue
        for dtype, block in ((d, b) for d in v.dtypes for b in asked or (None,)):
            for (H, W), (kh, kw) in (((9, 13), (3, 3)), ((17, 6), (5, 2)), ((4, 4), (6, 6)), ((40, 70), (7, 5))):
                x = rng.standard_normal((H, W)).astype(dtype)
                k = rng.standard_normal((kh, kw)).astype(dtype)
                for mode in ("full", "same", "valid"):
                    for op, fn, ref_fn in (("convolve2d", sigconv.convolve2d, scipy.signal.convolve2d),
                                           ("correlate2d", sigconv.correlate2d, scipy.signal.correlate2d)):
                        try:
                            ref = ref_fn(x.astype(np.float64), k.astype(np.float64), mode)
                        except ValueError:
                            continue  # valid mode with neither input larger in every dimension
                        try:
                            y = cupy.asnumpy(fn(cupy.asarray(x), k, mode, backend="cuda", variant=v.name,
                                                block=block))
                        except ValueError as exc:  # a documented refusal, not a memory error
                            print(f"conv2d {v.name} {dtype} {H}x{W} k{kh}x{kw} {mode} block={block}: refused ({exc})")
                            continue
                        den = np.linalg.norm(ref) or 1.0
                        err = np.linalg.norm(y.astype(np.float64) - ref) / den if np.isfinite(y).all() else np.inf
                        n += 1
                        if not err <= v.extra.get("tol", tol.get(dtype, 1e-5)):
                            bad += 1
                            print(f"MISMATCH conv2d {v.name} {dtype} {H}x{W} k{kh}x{kw} {mode} {op} block={block}: "
                                  f"{err:.3g}")
        # multi-channel layers (batch, channels in and out, stride, bias), where the variant applies
        for N, Cin, H, W, Cout, (kh, kw), stride, pad in MULTI_2D:
            Ho, Wo = (H + 2 * pad[0] - kh) // stride[0] + 1, (W + 2 * pad[1] - kw) // stride[1] + 1
            for dtype in v.dtypes:
                if v.applies(Conv2dJob((N, Cin, H, W), (Cout, Cin, kh, kw), dtype, stride, pad, (Ho, Wo))):
                    continue
                x = rng.standard_normal((N, Cin, H, W)).astype(dtype)
                w = rng.standard_normal((Cout, Cin, kh, kw)).astype(dtype)
                b = rng.standard_normal(Cout).astype(dtype)
                for block in asked or (None,):
                    try:
                        y = cupy.asnumpy(cuda2d.corr2d(cupy.asarray(x), cupy.asarray(w), cupy.asarray(b), stride, pad,
                                                       (Ho, Wo), variant=v.name, block=block))
                    except ValueError as exc:
                        print(f"conv2d {v.name} {dtype} {N}x{Cin}x{H}x{W} co{Cout} block={block}: refused ({exc})")
                        continue
                    ref = cpu.corr2d_direct(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), stride,
                                            pad, (Ho, Wo))
                    err = np.linalg.norm(y.astype(np.float64) - ref) / np.linalg.norm(ref) \
                        if np.isfinite(y).all() else np.inf
                    n += 1
                    if not err <= v.extra.get("tol", tol.get(dtype, 1e-5)):
                        bad += 1
                        print(f"MISMATCH conv2d {v.name} {dtype} {N}x{Cin}x{H}x{W} co{Cout} k{kh}x{kw} stride {stride} "
                              f"pad {pad} block={block}: {err:.3g}")
        print(f"conv2d {v.name}: done")
    if not only or "boundary" in only:
        named = frozenset(only) & {v.name for v in _registry.entries("conv2d", "cuda", kind="variant")}
        # the shapes: all, one (--shape) or none (--no-boundary); the uint64 conv1d checks go with the general part
        shapes = () if a.no_boundary else BOUNDARY_SHAPES if a.shape is None else BOUNDARY_SHAPES[a.shape:a.shape + 1]
        nb, badb = boundary_checks(cupy, rng, named, shapes, uint1d=a.shape is None)
        n, bad = n + nb, bad + badb
        print("boundary: done")
    cupy.cuda.get_current_stream().synchronize()
    print(f"sanitize: {n} checks, {bad} mismatches")
    if n == 0:
        print("sanitize: no check ran (names that select nothing?)")
    return 1 if bad or n == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
