"""The cuda conv1d ``fft`` variant: overlap-save with cuFFT real transforms around three helper kernels
(``kernels/overlap_save.cuh``, wrapped in ``kernels/conv1d.cu``), on :mod:`sigconv.backends.cuda1d`'s
plumbing (checks, module, launch conventions). Registered at the bottom, after the direct variants.

Segments of N = :func:`fft_size` samples are gathered on the device (one kernel), transformed in one batch,
multiplied by the filter's spectrum (one kernel; the spectrum is cached under the host taps' key), transformed
back and their valid parts scattered into the output (one kernel). CuPy is imported inside functions only.
"""

from __future__ import annotations

import functools
import threading
from collections import OrderedDict

import numpy as np

from sigconv import _kernels
from sigconv._core.xp import FFT_SAFE_EXPONENT, exact_float64, peak_exponents
from sigconv.backends import cuda1d as _c1
from sigconv.backends.cuda1d import host_taps_key
from sigconv.registry import auto as _auto
from sigconv.registry.auto import fused_wide
from sigconv.registry.table import BLOCKS_1D, Variant, register

__all__ = ["launch_fft", "launch_fft_fused", "fft_size", "os_grid", "host_taps_key", "host_spectrum", "fused_plan",
           "fused_wide", "fused_radix_bits", "fused_twiddles", "fused_coefficients", "fused_pair_table", "fused_table",
           "fused_host_table", "fused_alignment", "fused_pairs", "prebuilt_modules", "irfft_destroying"]


def fft_size(K: int) -> int:
    """Overlap-save length: a power of two about 8x K (4x K above 2048 taps), at least 1024."""
    n = 8 * K if K <= 2048 else 4 * K
    return max(1024, 1 << (n - 1).bit_length())


_SPECTRA: "OrderedDict[tuple, object]" = OrderedDict()
_SPECTRA_LOCK = threading.Lock()
_SPECTRA_MAX = 32


def _filter_spectrum(w, N: int, key=None):
    """(H, tap_shift): the rfft of the convolution taps (w reversed) divided by 2^tap_shift (the exponent of their
    peak, a 1-element int32 device array: exact, and the transforms then see taps of peak ~1), zero-padded to N,
    times 1/N, computed in float64 and cast to the working precision; the inverse transform then
    runs unscaled (norm="forward") and the scatter multiplies by 2^tap_shift.

    With ``key`` (:func:`host_taps_key` of the host copy the caller already has: the array API, the stream
    filters and the file engine pass it) the pair is computed once per (key, N, device), on the host (NumPy's
    float64 FFT; the taps come back once): no device kernel to compile on a first run. Without one (taps that
    only exist on the device) it is computed on the device, a few small launches: identifying the taps would mean
    reading them back, which waits for the GPU on every call."""
    cupy = _c1._cupy()
    cdt = cupy.complex64 if w.dtype == cupy.float32 else cupy.complex128
    if key is None:  # (in float64 from the start: float32 subnormal taps exact, exact_float64)
        wd = exact_float64(w[::-1])
        tap_shift = peak_exponents(wd[None])
        wd = cupy.ldexp(wd, -tap_shift.astype(cupy.int32))
        Hd = cupy.fft.rfft(wd, n=N)
        Hd *= 1.0 / N
        return Hd.astype(cdt, copy=False), tap_shift
    return _cached(_SPECTRA, (key, int(N), w.dtype.name, cupy.cuda.Device().id),
                   lambda: tuple(cupy.asarray(a) for a in host_spectrum(cupy.asnumpy(w), N)))


def _cached(cache: OrderedDict, ck: tuple, make):
    """``cache[ck]``, made by ``make()`` on a miss; the least recently used of more than :data:`_SPECTRA_MAX`
    entries dropped."""
    with _SPECTRA_LOCK:
        got = cache.get(ck)
        if got is not None:
            cache.move_to_end(ck)
            return got
    got = make()
    with _SPECTRA_LOCK:
        cache[ck] = got
        while len(cache) > _SPECTRA_MAX:
            cache.popitem(last=False)
    return got


def host_spectrum(w: np.ndarray, N: int) -> tuple:
    """:func:`_filter_spectrum`'s pair for host taps ``w`` (correlation form, float32 or float64): (H, tap_shift) as
    NumPy arrays, H of the matching complex dtype, tap_shift int32 of shape (1,)."""
    w = np.asarray(w)
    cdt = np.complex64 if w.dtype == np.float32 else np.complex128
    tap_shift = peak_exponents(w[None]).astype(np.int32)
    wd = np.ldexp(np.ascontiguousarray(w[::-1], dtype=np.float64), -int(tap_shift[0]))
    Hd = np.fft.rfft(wd, n=N)
    Hd *= 1.0 / N
    return Hd.astype(cdt), tap_shift


#: The "no sample yet" value of a segment's exponent slot (SC_OS_NO_PEAK in kernels/overlap_save.cuh): INT32_MIN.
_NO_PEAK = np.iinfo(np.int32).min

#: grid.y / grid.z limit of the hardware, and grid.x's
_GRID_YZ_MAX = 65535
_GRID_X_MAX = (1 << 31) - 1
#: about this many blocks per overlap-save helper launch at most (many waves; the rest by grid-stride)
_OS_BLOCKS = 1 << 16


def os_grid(kind: str, block: int, *, N: int, C: int = 1, nseg: int = 1, M: int = 1, rows: int = 1,
            cap_y: int = _GRID_YZ_MAX, cap_z: int = _GRID_YZ_MAX) -> tuple:
    """Launch grid of an overlap-save helper (kernels/overlap_save.cuh documents the layout).

    gather: x covers N/4 threads of 4 samples, y segments, z channels; scatter: x covers the M valid
    outputs of a segment, y segments, z channels; cmul: x covers the N/2+1 bins, y the C*nseg rows; peak: one
    block per segment (x 1), y segments, z channels (rescale).
    y and z are capped (the kernels loop over the rest), ``cap_y``/``cap_z`` only lower the caps (tests)."""
    if kind == "gather":
        gx = -(-(N // 4) // block)
        ny, nz = nseg, C
    elif kind == "scatter":
        gx = -(-M // block)
        ny, nz = nseg, C
    elif kind == "cmul":
        gx = -(-(N // 2 + 1) // block)
        ny, nz = rows, 1
    elif kind == "rescale":
        gx = 1
        ny, nz = nseg, C
    else:
        raise ValueError(f"unknown overlap-save kernel {kind!r}")
    gz = max(1, min(nz, _GRID_YZ_MAX, cap_z))
    gy = max(1, min(ny, _GRID_YZ_MAX, cap_y, max(1, _OS_BLOCKS // (gx * gz))))
    return (gx, gy, gz)


# ------------------------------------------------------------------------------------ fft_fused (kernels/fft_fused.cuh)


def fused_plan(K: int, out_len: int, C: int, block: int | None = None, *, cap_x: int = _GRID_X_MAX,
               cap_y: int = _GRID_YZ_MAX, tile: int | None = None, pairs: bool = False,
               device: tuple | None = None) -> dict:
    """The launch of conv1d_fft_fused<logn, one> (``expr``) with ``block`` threads (None: the tile's own,
    :func:`sigconv.registry.auto.fused_block`, N/32 or more, N/64 on the longest tile): tile length N, valid outputs per
    tile V, tiles per channel, grid (tiles, channels; the kernel walks the rest by grid-stride loops,
    ``cap_x``/``cap_y`` only lower the caps) and dynamic shared memory: buffers of N/2 float2 with one float2 of padding
    per 16 (one where the block has N/32 threads or more and transforms in place, else two), and 32 int slots. ``tile``:
    N instead of :func:`sigconv.registry.auto.fused_tile`'s (benchmarks compare tile lengths): a power of two in the
    kernel's range (its largest only with N/32 threads, or N/64: :func:`fused_wide`), at least 2K. ``pairs``: the kernel
    that reads a point's two samples as one 8-byte load, where :func:`fused_pairs` allows it (ValueError elsewhere).
    ``device``: (multiprocessors, opt-in shared memory per block, compute capability as 10 major + minor) of the GPU
    the launch runs on, for :func:`fused_persistent`'s grid of one block a multiprocessor (``persistent`` in the plan)."""
    if tile is None:
        N = _auto.fused_tile(K, block)
    else:
        lim = _kernels.constants()
        longest = 1 << lim["SIGCONV_FFT_FUSED_ONE_MAX_LOGN"]
        top = lim["SIGCONV_FFT_FUSED_ONE_MAX_LOGN" if block is None or 32 * block >= tile or fused_wide(tile, block)
                  else "SIGCONV_FFT_FUSED_MAX_LOGN"]
        if not (tile & (tile - 1) == 0 and 1 << lim["SIGCONV_FFT_FUSED_MIN_LOGN"] <= tile <= 1 << top
                and tile >= 2 * K):
            raise ValueError(f"fft_fused tile {tile} for K={K}: a power of two from "
                             f"{1 << lim['SIGCONV_FFT_FUSED_MIN_LOGN']} to {1 << top} and at least 2K"
                             + ("" if block is None or 32 * block >= tile else
                                f" with {block} threads ({longest} samples only on {longest // 64} or "
                                f"{longest // 32})"))
        N = tile
    if block is None:
        block = _auto.fused_block(K, N)
    V = N - K + 1
    ntiles = max(1, -(-out_len // V))
    if ntiles >= 1 << 31:  # (the kernel counts a channel's tiles in 32 bits; 2^40 samples and more)
        raise ValueError(f"fft_fused: {out_len} outputs a channel are {ntiles} tiles of {V}, more than 2^31 - 1")
    grid = (max(1, min(ntiles, cap_x)), max(1, min(C, cap_y, _GRID_YZ_MAX)))
    wide = fused_wide(N, block)
    buffers = 1 if 32 * block >= N or wide else 2
    logn = N.bit_length() - 1
    if pairs and not (buffers == 1 and logn == _kernels.constants()["SIGCONV_FFT_FUSED_PAIRS_LOGN"]):
        raise ValueError(f"fft_fused reads pairs of samples on tiles of "
                         f"{1 << _kernels.constants()['SIGCONV_FFT_FUSED_PAIRS_LOGN']} samples in place, not {N}")
    smem = _fused_smem(N, buffers)
    persistent = device is not None and fused_persistent(N, block, pairs, C * ntiles, *device)
    if persistent:
        grid = (device[0], 1)
        smem += _fused_prefetch_smem(N)
    return {"N": N, "logn": logn, "V": V, "ntiles": ntiles, "grid": grid, "smem": smem,
            "expr": _fused_expr(logn, buffers == 1, pairs, wide), "persistent": persistent}


def _fused_prefetch_smem(N: int) -> int:
    """The shared memory a block of the longest tile takes past its buffer for the prefetch of its next tile: an
    mbarrier (16 bytes) and SIGCONV_FFT_FUSED_PREFETCH_ROWS rows of N/4 bytes (kernels/fft_fused.cuh, ff_prefetch_on)."""
    return 16 + _kernels.constants()["SIGCONV_FFT_FUSED_PREFETCH_ROWS"] * N // 4


def fused_persistent(N: int, block: int, pairs: bool, tiles: int, sms: int, smem_optin: int, cc: int) -> bool:
    """Whether the launch of ``tiles`` tiles (every channel's) of the longest tile on 512 threads (:func:`fused_wide`)
    with 8-byte loads (``pairs``) runs on a grid of one block a multiprocessor (``sms`` blocks in one row, each walking
    the tiles of every channel as one sequence), each block with the shared memory to prefetch its next tile while it
    computes one (:func:`_fused_prefetch_smem`) and writing its outputs through bulk copies (kernels/fft_fused.cuh:
    ff_prefetch_on, ff_outputs_bulk): where there are more tiles than multiprocessors, on compute capability 9.0 (the
    only one measured: 2026-12-05, K = 4800 to 8000, 4.0-8.2% faster than a block a tile on an H100 and 4.7-8.4% on an
    H200, benchmarks/results/*-2026-12-05-wide-tile-prefetch/) with room for it (``smem_optin`` bytes a block). Not
    with float loads (kernels/fft_fused.cuh, ff_fused_kernel)."""
    return (fused_wide(N, block) and pairs and cc == 90 and tiles > sms
            and _fused_smem(N, 1) + _fused_prefetch_smem(N) <= smem_optin)


def fused_alignment(K: int, pad: int, N: int) -> tuple:
    """(z, d): the zero taps the fused launcher puts before the K taps (z) and after them (d), 0 or 1 each, so that
    every tile of the padded filter (K + z + d taps, pad + z; the same outputs) starts on an even sample: pad + z
    even and K + z + d odd, which makes a tile's stride N - (K + z + d) + 1 even. Where a channel starts on an
    8-byte boundary (one channel, or an even length) a warp's loads of a tile's samples then cover whole 32-byte
    sectors: on an H200 (same-run A/B, benchmarks/results/H200-2026-12-04-fused-pair-table/) K=4095 0.3074 ms against
    0.3141, K=2047 -3.7%, K=8000 -3.4%, K=127 to 1023 -0.6 to -1.1%, level where the taps need no zeros. None where
    that would leave fewer than half the tile N to the padded filter."""
    z = pad & 1
    d = 1 - ((K + z) & 1)
    return (z, d) if 2 * (K + z + d) <= N else (0, 0)


def fused_pairs(N: int, block: int, K: int, pad: int, L: int, aligned: bool) -> bool:
    """Whether a launch of K taps (with the zero taps of :func:`fused_alignment`), ``pad`` and tiles of N samples on
    ``block`` threads runs conv1d_fft_fused<logn, true, true>, which reads a point's two samples as one 8-byte load:
    on tiles of 2^SIGCONV_FFT_FUSED_PAIRS_LOGN samples in place, where every tile of every channel starts on an
    8-byte boundary of x and ends on one or at x's end: x's data on one (``aligned``), L even, pad and the tile's
    stride N - K + 1 even (kernels/fft_fused.cuh, ff_first_pass)."""
    return (N == 1 << _kernels.constants()["SIGCONV_FFT_FUSED_PAIRS_LOGN"] and (32 * block >= N or fused_wide(N, block))
            and aligned and L % 2 == 0 and pad % 2 == 0 and (N - K + 1) % 2 == 0)


def _fused_expr(logn: int, one: bool, pairs: bool = False, wide: bool = False) -> str:
    """The kernel's instantiation: conv1d_fft_fused<logn, one>, ``one`` for a block of N/32 threads or more (the
    tile transformed in place in one buffer); conv1d_fft_fused<logn, true, true> for ``pairs``;
    conv1d_fft_fused<logn, true, pairs, true> for ``wide`` (:func:`fused_wide`)."""
    if wide:
        return f"conv1d_fft_fused<{logn}, true, {'true' if pairs else 'false'}, true>"
    return f"conv1d_fft_fused<{logn}, {'true' if one else 'false'}{', true' if pairs else ''}>"


def fused_radix_bits(N: int) -> list[int]:
    """log2 of the radix of each pass of fft_fused's complex FFT of M = N/2 points: the first 4 (radix 16), the
    remaining bits spread over ceil(log2(M) / 4) - 1 passes as evenly as possible, larger first. The kernel's
    schedule (kernels/fft_fused.cuh, ff_bits), which :func:`fused_twiddles` lays its table out by."""
    mb = N.bit_length() - 2
    rest, n = mb - 4, (mb + 3) // 4 - 1
    return [4] + [rest // n + (1 if i < rest % n else 0) for i in range(n)]


@functools.lru_cache(maxsize=None)
def fused_twiddles(N: int) -> np.ndarray:
    """fft_fused's twiddle table, computed in float64 and rounded to complex64 (read-only for callers):
    exp(-2 pi i k / N) for k < N/2, then for each pass after the first (radix R after sub-transforms of length NS),
    log2(R) rows of NS entries, row a holding exp(-2 pi i 2^a k / (NS R)) (kernels/fft_fused.cuh)."""
    bits = fused_radix_bits(N)
    parts = [np.exp(-2j * np.pi * np.arange(N // 2) / N)]
    ns = 1 << bits[0]
    for b in bits[1:]:
        k = np.arange(ns)
        parts += [np.exp(-2j * np.pi * (1 << a) * k / (ns << b)) for a in range(b)]
        ns <<= b
    tw = np.concatenate(parts).astype(np.complex64)
    tw.flags.writeable = False
    return tw


#: float32 fft problems with fewer than this many samples (C * (out_len + K)) are transformed in float64.
_FFT_F64_BELOW = 1 << 16


def _flat_grid(n: int, block: int) -> tuple:
    return (max(1, min(-(-n // block), _OS_BLOCKS)),)


def _cast(a, dtype, out=None):
    """A float32/float64 device array as ``dtype`` (itself when it already is; into ``out`` when given, of a's
    shape), by conv1d.cu's cast kernels when both are C-contiguous: in the module the launcher loads anyway, so
    nothing more is compiled on a first run."""
    cupy = _c1._cupy()
    dtype = np.dtype(dtype)
    if a.dtype == dtype and out is None:
        return a
    if out is None:
        out = cupy.empty(a.shape, dtype=dtype)
    if a.dtype == dtype or not (a.flags.c_contiguous and out.flags.c_contiguous):
        out[...] = a  # CuPy's copy (never on the launchers' paths: their arrays are C-contiguous)
        return out
    if a.size:
        name = f"conv1d_cast_{_c1._sfx(a.dtype)}_{_c1._sfx(dtype)}"
        _c1._module().get_function(name)(_flat_grid(a.size, 256), (256,), (a, out, np.int64(a.size)))
    return out


def irfft_destroying(X, N: int):
    """``cupyx.scipy.fft.irfft(X, n=N, axis=-1, norm="forward", overwrite_x=True)``, X destroyed: cuFFT's C2R
    overwrites its input, and without ``overwrite_x`` CuPy copies the whole spectrum first. Called through
    CuPy's own transform entry, the one cupyx's irfft calls, so that the filter path never imports cupyx: its
    package imports scipy.sparse and SciPy's array-API layer, a third of a second or more of every short run."""
    from cupy.cuda import cufft

    try:
        from cupy.fft._fft import _fft
    except ImportError:  # a CuPy that moved it: the public route
        import cupyx.scipy.fft

        return cupyx.scipy.fft.irfft(X, n=N, axis=-1, norm="forward", overwrite_x=True)
    return _fft(X, (N,), (-1,), "forward", cufft.CUFFT_INVERSE, "C2R", overwrite_x=True)


def launch_fft(x, w, pad, out_len, block, out=None, taps_key=None):
    """Overlap-save: gather segments (one kernel), batched rfft, fused spectrum product, irfft, scatter.
    ``taps_key``: :func:`host_taps_key` of the host taps, when the caller has them (spectrum cached)."""
    w, block, out = _c1._prep("fft", x, w, pad, out_len, block, out)
    if _c1._empty(x, out_len):
        return out
    cupy = _c1._cupy()
    C, L = x.shape
    K = w.size
    if x.dtype == np.float32 and C * (out_len + K) <= _FFT_F64_BELOW:
        # Tiny problems transform in float64 (free at this size): an FFT's rounding error scales with the
        # input's magnitude, so an output much smaller than its inputs (cancellation, or a single product
        # when L=1) would miss float32 relative accuracy. Large problems keep float32 transforms.
        y = launch_fft(_cast(x, cupy.float64), _cast(w, cupy.float64), pad, out_len, block, taps_key=taps_key)
        _cast(y, x.dtype, out=out)
        return out
    N = fft_size(K)
    M = N - K + 1  # valid outputs per segment
    nseg = -(-out_len // M)
    sfx = _c1._sfx(x.dtype)
    mod = _c1._module()
    # Segments of extreme magnitude, and the taps, are scaled by a power of two to a peak ~1 (kernels/overlap_save.cuh,
    # "Scaling"): gather notes each segment's exponent, rescale and scatter apply them, all on the device.
    H, tap_shift = _filter_spectrum(w, N, taps_key)
    safe = np.int32(FFT_SAFE_EXPONENT[x.dtype.name])
    shift = cupy.empty(C * nseg, dtype=cupy.int32)
    mod.get_function("conv1d_fill_i32")(_flat_grid(shift.size, block), (block,), (shift, np.int64(shift.size),
                                                                                  np.int32(_NO_PEAK)))
    segs = cupy.empty((C * nseg, N), dtype=x.dtype)
    mod.get_function(f"conv1d_os_gather_{sfx}")(
        os_grid("gather", block, N=N, C=C, nseg=nseg), (block,),
        (x, segs, np.int32(C), np.int64(L), np.int64(pad), np.int64(M), np.int32(N), np.int64(nseg), shift))
    mod.get_function(f"conv1d_os_rescale_{sfx}")(os_grid("rescale", block, N=N, C=C, nseg=nseg), (block,),
                                                 (segs, shift, np.int32(C), np.int32(N), np.int64(nseg), safe))
    X = cupy.fft.rfft(segs, axis=-1)
    del segs
    NF = N // 2 + 1
    mod.get_function(f"conv1d_os_cmul_{sfx}")(os_grid("cmul", block, N=N, rows=C * nseg), (block,),
                                              (X, H, np.int64(C * nseg), np.int32(NF)))
    Ys = irfft_destroying(X, N)
    del X
    if Ys.dtype != x.dtype:  # irfft keeps the precision, but be explicit
        Ys = Ys.astype(x.dtype)
    mod.get_function(f"conv1d_os_scatter_{sfx}")(
        os_grid("scatter", block, N=N, C=C, nseg=nseg, M=M), (block,),
        (Ys, out, np.int32(C), np.int64(out_len), np.int64(M), np.int32(N), np.int64(nseg), np.int32(K), shift,
         tap_shift, safe))
    return out


_TWIDDLES: dict = {}


def _device_twiddles(N: int):
    """:func:`fused_twiddles` on the current device, uploaded once per (N, device)."""
    cupy = _c1._cupy()
    key = (N, cupy.cuda.Device().id)
    tw = _TWIDDLES.get(key)
    if tw is None:
        tw = _TWIDDLES.setdefault(key, cupy.asarray(fused_twiddles(N)))
    return tw


_FUSED_FNS: dict = {}


def _fused_function(expr: str, smem: int):
    """The kernel ``expr`` of conv1d.cu on the current device, its dynamic shared memory limit raised to ``smem``
    where that is more than any launch of it has asked for yet, looked up once per (expr, device)."""
    cupy = _c1._cupy()
    key = (expr, cupy.cuda.Device().id)
    fn = _FUSED_FNS.get(key)
    if fn is None:
        fn = _FUSED_FNS.setdefault(key, [_c1._module(name_expressions=(expr,)).get_function(expr), 48 * 1024])
    if smem > fn[1]:  # (raised, never lowered: launches of one instantiation ask for more or less)
        fn[0].max_dynamic_shared_size_bytes = smem
        fn[1] = smem
    return fn[0]


def _fused_smem(N: int, buffers: int) -> int:
    """Dynamic shared memory of a fused launch: ``buffers`` of N/2 float2 with one float2 of padding per 16, and 32
    int slots (kernels/fft_fused.cuh)."""
    return 8 * buffers * (N // 2 + N // 32) + 128


def fused_coefficients(H: np.ndarray, N: int) -> np.ndarray:
    """fft_fused's coefficient table from the filter's spectrum ``H`` (:func:`host_spectrum`'s, N/2 + 1 bins):
    float32 of shape (N/2, 4), row k = (a[k], b[k]) as real and imaginary parts, a[k] = (1 - s) H[k] + (1 + s)
    conj H[M-k] and b[k] = i c (H[k] - conj H[M-k]), s and c the sine and cosine of 2 pi k / N, computed in float64
    (the middle step's linear map, kernels/fft_fused.cuh, ff_middle)."""
    M = N // 2
    H = np.asarray(H, dtype=np.complex128)
    th = 2 * np.pi * np.arange(M) / N
    s, c = np.sin(th), np.cos(th)
    hk, hm = H[:M], np.conj(H[M:0:-1])  # H[k], conj H[M-k] for k < M
    a = (1 - s) * hk + (1 + s) * hm
    b = 1j * c * (hk - hm)
    return np.ascontiguousarray(np.stack([a.real, a.imag, b.real, b.imag], axis=1), dtype=np.float32)


def fused_pair_table(H: np.ndarray, N: int) -> np.ndarray:
    """The pair table of fft_fused's long tiles from the filter's spectrum ``H`` (N/2 + 1 bins), float32 of shape
    (N/2, 4) (kernels/fft_fused.cuh, ff_pair_coefs and ff_pair_index): for the bins k = s + 16 c, s < 16, c < N/64
    (the lower halves of the kernel's 16 columns of M/16 points, M = N/2), row s N/64 + c = (S, D) as real and
    imaginary parts, S = H[k] + conj H[M-k] and D = H[k] - conj H[M-k]; row M/2 the same for bin M/2 with itself;
    the rest zero. Computed in float64: the kernel forms a pair's coefficients G[k] = (S - s D, i c D) and G[M-k] =
    (conj(S + s D), -conj(i c D)) from a row (s, c the sine and cosine of 2 pi k / N)."""
    M = N // 2
    H = np.asarray(H, dtype=np.complex128)[: M + 1]
    e = np.arange(M // 2)
    k = np.append(e // (M // 32) + 16 * (e % (M // 32)), M // 2)  # the lower bin of row e, then M/2
    hk, hm = H[k], np.conj(H[M - k])
    t = np.zeros((M, 4), dtype=np.float32)
    t[: M // 2 + 1] = np.stack([(hk + hm).real, (hk + hm).imag, (hk - hm).real, (hk - hm).imag], axis=1)
    return t


def fused_table(H: np.ndarray, N: int) -> np.ndarray:
    """The table conv1d_fft_fused reads for tiles of N samples, float32 of shape (N/2, 4): :func:`fused_coefficients`
    (G, 16 bytes a bin), or on tiles of 2^SIGCONV_FFT_FUSED_H_MIN_LOGN samples and more :func:`fused_pair_table` (16
    bytes a pair of bins, kernels/fft_fused.cuh, ff_reads_h)."""
    if N < 1 << _kernels.constants()["SIGCONV_FFT_FUSED_H_MIN_LOGN"]:
        return fused_coefficients(H, N)
    return fused_pair_table(H, N)


def fused_host_table(w: np.ndarray, N: int) -> tuple:
    """(table, tap_shift) of conv1d_fft_fused for host taps ``w`` (correlation form, the launcher's zero taps
    included), NumPy: :func:`fused_table` of :func:`host_spectrum`'s H, and its tap shift; where that lies within
    +-SIGCONV_FFT_FUSED_FOLD_MAX (kernels/limits.cuh) the table of H times 2^tap_shift (the same table times that
    exact power of two) and a tap shift of 0, which spares a tile of ordinary magnitude a multiply an output. The
    outputs are the same either way."""
    H, tap_shift = host_spectrum(w, N)
    if abs(int(tap_shift[0])) <= _kernels.constants()["SIGCONV_FFT_FUSED_FOLD_MAX"]:
        H = H * H.real.dtype.type(2.0 ** int(tap_shift[0]))
        tap_shift = np.zeros(1, dtype=np.int32)
    return fused_table(H, N), tap_shift


_FUSED_TABLES: "OrderedDict[tuple, tuple]" = OrderedDict()
_FUSED_DEVICE_TABLES: "OrderedDict[tuple, tuple]" = OrderedDict()


def _fused_spectrum(w, N: int, key=None, delay: int = 0) -> tuple:
    """(table, tap_shift) for conv1d_fft_fused, the taps followed by ``delay`` zeros (:func:`fused_alignment`): with
    ``key`` (:func:`host_taps_key`) the table from the host's float64 spectrum (:func:`fused_host_table`), once per
    (key, N, delay, device); without one computed on
    the device by conv1d_fft_fused_spectrum (in float32, as the fused kernel's transforms are): the path for taps
    without a host copy, one launch where the fft variant takes several small ones. That table lives per (N,
    device, stream, host thread) with the record of the taps it was made from, so that a call with taps bit for bit
    the same as the last one's (a filter applied again and again) only compares them on the device; calls on one
    stream run in order, and calls from two threads or on two streams never share a table."""
    cupy = _c1._cupy()
    if key is not None:
        def make():
            wh = cupy.asnumpy(w)
            table, tap_shift = fused_host_table(np.concatenate([wh, np.zeros(delay, wh.dtype)]), N)
            return cupy.asarray(table), cupy.asarray(tap_shift)

        return _cached(_FUSED_TABLES, (key, int(N), int(delay), cupy.cuda.Device().id), make)
    stream = cupy.cuda.get_current_stream()

    def make_device():  # (the stream held with its table: its handle is not reused while the table lives)
        return (cupy.empty((N // 2, 4), dtype=cupy.float32), cupy.empty(1, dtype=cupy.int32),
                cupy.zeros(N // 2 + 1, dtype=cupy.int32), stream)

    ck = (int(N), cupy.cuda.Device().id, stream.ptr, threading.get_ident())
    G, tap_shift, last, _ = _cached(_FUSED_DEVICE_TABLES, ck, make_device)
    logn = N.bit_length() - 1
    smem = _fused_smem(N, 1)
    fn = _fused_function(f"conv1d_fft_fused_spectrum<{logn}>", smem)
    fn((1,), (max(32, N // 32),), (w, np.int32(w.size), np.int32(delay), _device_twiddles(N), G, tap_shift, last),
       shared_mem=smem)
    return G, tap_shift


def _device_geometry() -> tuple:
    """(multiprocessors, opt-in shared memory per block, compute capability as 10 major + minor) of the current
    device (its memoised attributes: :func:`sigconv._kernels.device_attributes`): :func:`fused_plan`'s ``device``."""
    dev = _c1._cupy().cuda.Device()
    attrs = _kernels.device_attributes(dev.id)
    return (int(attrs["MultiProcessorCount"]), int(attrs["MaxSharedMemoryPerBlockOptin"]), int(dev.compute_capability))


def launch_fft_fused(x, w, pad, out_len, block, out=None, taps_key=None, *, tile=None):
    """Overlap-save in one kernel (float32, kernels/fft_fused.cuh): each block filters one tile of
    :func:`sigconv.registry.auto.fused_tile` samples (or ``tile``, see :func:`fused_plan`) in shared memory; the
    filter's spectrum is the fft variant's (as :func:`fused_table`'s), cached under ``taps_key``, else
    computed on the device in one launch (:func:`_fused_spectrum`), which the tile kernel's launch overlaps where
    it can (:func:`sigconv._kernels.launch_after`: its first tiles load and take their first pass meanwhile).
    ``block`` None: the tile's own
    (:func:`sigconv.registry.auto.fused_block`). Tiny problems go to :func:`launch_fft`, which transforms them in
    float64."""
    if block is None and 1 <= np.size(w) <= _c1._get_variant("conv1d", "cuda", "fft_fused").max_taps:
        block = _auto.fused_block(int(np.size(w)), tile)
    w, block, out = _c1._prep("fft_fused", x, w, pad, out_len, block, out)
    if _c1._empty(x, out_len):
        return out
    C, L = x.shape
    K = w.size
    if C * (out_len + K) <= _FFT_F64_BELOW:
        return launch_fft(x, w, pad, out_len, block, out=out, taps_key=taps_key)
    N = fused_plan(K, out_len, C, block, tile=tile)["N"]
    z, d = fused_alignment(K, pad, N)  # (the kernel runs the taps with z zeros before them and d after)
    pairs = fused_pairs(N, block, K + z + d, pad + z, L, x.data.ptr % 8 == 0)
    plan = fused_plan(K + z + d, out_len, C, block, tile=N, pairs=pairs, device=_device_geometry())
    fn = _fused_function(plan["expr"], plan["smem"])
    tw = _device_twiddles(N)  # (twice: the forward and the inverse transform's table, see kernels/fft_fused.cuh)
    G, tap_shift = _fused_spectrum(w, N, taps_key, d)
    args = (x, out, G, tw, tw, np.int32(C), np.int64(L), np.int32(K + z + d), np.int64(pad + z), np.int64(out_len),
            np.int64(plan["ntiles"]), tap_shift, np.int32(FFT_SAFE_EXPONENT["float32"]))
    # (after the spectrum kernel, launched just before on this stream: the tiles' loads and first passes run beside
    # it, kernels/fft_fused.cuh; nothing is queued between the two)
    if taps_key is not None or not _kernels.launch_after(fn, plan["grid"], (block,), args, plan["smem"]):
        fn(plan["grid"], (block,), args, shared_mem=plan["smem"])
    return out


def prebuilt_modules() -> list[dict]:
    """:func:`sigconv._kernels.module`'s arguments of the fused kernel's modules (per tile length: the tile kernel in
    place and through two buffers, and the spectrum kernel; the kernel that reads pairs of samples, of its tile; the
    longest tile's on 512 threads (:func:`fused_wide`, its default block), with pairs and without; see
    ``sigconv.backends.prebuilt_modules``); the
    overlap-save helpers are in :func:`sigconv.backends.cuda1d`'s base module."""
    lim = _kernels.constants()
    longest = lim["SIGCONV_FFT_FUSED_ONE_MAX_LOGN"]
    logns = range(lim["SIGCONV_FFT_FUSED_MIN_LOGN"], longest + 1)
    return ([dict(name=_c1.SOURCE, name_expressions=(_fused_expr(n, one),)) for n in logns for one in (True, False)
             if one or n <= lim["SIGCONV_FFT_FUSED_MAX_LOGN"]]
            + [dict(name=_c1.SOURCE, name_expressions=(_fused_expr(lim["SIGCONV_FFT_FUSED_PAIRS_LOGN"], True, True),))]
            + [dict(name=_c1.SOURCE, name_expressions=(_fused_expr(longest, True, p, True),)) for p in (False, True)]
            + [dict(name=_c1.SOURCE, name_expressions=(f"conv1d_fft_fused_spectrum<{n}>",)) for n in logns])


register(Variant("fft", "conv1d", "cuda",
                 "overlap-save with cuFFT real transforms, fused spectrum product, cached filter spectrum", launch_fft,
                 blocks=BLOCKS_1D, default_block=256, requires=("gpu",), auto=True, source=_c1.SOURCE,
                 method="fft"))
register(Variant("fft_fused", "conv1d", "cuda",
                 "overlap-save in one kernel: a tile's transform, spectrum product and inverse in shared memory",
                 launch_fft_fused, blocks=BLOCKS_1D, default_block=256, dtypes=("float32",),
                 max_taps=1 << (_kernels.constants()["SIGCONV_FFT_FUSED_MAX_LOGN"] - 1), requires=("gpu",),
                 auto=True, source=_c1.SOURCE, method="fft"))
