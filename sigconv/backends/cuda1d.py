"""CUDA 1-D backend: sigconv's own kernels (``kernels/conv1d.cu``) behind the ``corr1d`` contract.

Variants (registered below; launchers ``launch_<name>``): naive, constant, shared, l2, tiled, fft,
and ``auto`` (autotuned choice, :func:`resolve_auto`). :class:`StreamFilter` is the stateful causal
filter behind ``FIRStream`` on cuda; :class:`FileFilter` is the GPU half of ``sigconv denoise``.

CuPy is imported inside functions only: importing this module registers the variants and nothing else.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict

import numpy as np

from sigconv.registry.table import BLOCKS_1D, Variant, get as _get_variant, register

__all__ = ["corr1d", "resolve_auto", "StreamFilter", "FileFilter", "fft_size", "tiled_geometry",
           "CONST_TAPS", "TILED_STATIC_MAX_K", "SOURCE"]

SOURCE = "conv1d.cu"
#: __constant__ tap capacity per dtype (one 32 KB buffer, SIGCONV_CONST_TAP_DOUBLES in conv1d.cu).
CONST_TAPS = {"float32": 8192, "float64": 4096}
#: Taps per shared-memory chunk of the ``shared`` variant (SIGCONV_SHARED_KCH_* in conv1d.cu).
SHARED_KCH = {"float32": 2048, "float64": 1024}
#: ``tiled`` compiles K into the kernel (conv1d_tiled<K, R>) up to this K, else conv1d_tiled_rt<R>.
#: Measured on an H200 (2026-11-30, C=1, L=2^26): fully unrolled K=255 took 4.38 ms while the runtime-K
#: kernel ran K=1023 in 2.91 ms (70% of the FP32 FMA rate); the unrolled body outgrows the instruction
#: cache well before 255 taps, so only short filters are unrolled.
TILED_STATIC_MAX_K = 64
#: Dynamic shared memory a block gets without opting in.
_SMEM_DEFAULT = 48 * 1024

_ALL = tuple(BLOCKS_1D)
_VARIANTS = (
    ("naive", "one thread per output, input and taps from global memory", _ALL, 256, ("float32", "float64"), None),
    ("constant", "as naive with the taps in __constant__ memory (<= 8192 float32 / 4096 float64 taps)", _ALL, 256,
     ("float32", "float64"), CONST_TAPS["float32"]),
    ("shared", "input tile + K-1 halo staged in shared memory once (taps walked in chunks, any K)", _ALL, 256,
     ("float32", "float64"), None),
    ("l2", "core tile in shared memory, halo read from global memory through L2", _ALL, 256,
     ("float32", "float64"), None),
    ("tiled", "R outputs/thread in registers, float4 tile loads, padded smem, constant taps, K unrolled", _ALL, 256,
     ("float32",), CONST_TAPS["float32"]),
    ("fft", "overlap-save with cuFFT real transforms, fused spectrum product, cached filter spectrum", _ALL, 256,
     ("float32", "float64"), None),
)
for _n, _d, _b, _db, _dt, _mt in _VARIANTS:
    register(Variant(_n, "conv1d", "cuda", _d, f"sigconv.backends.cuda1d:launch_{_n}", blocks=_b, default_block=_db,
                     dtypes=_dt, max_taps=_mt, requires=("gpu",)))


# ------------------------------------------------------------------------------------ plumbing


def _cupy():
    import cupy

    return cupy


def _module(**kw):
    from sigconv import _kernels

    return _kernels.module(SOURCE, **kw)


def _sfx(dtype) -> str:
    return "f32" if np.dtype(dtype) == np.float32 else "f64"


def _prep(name, x, w, pad, out_len, block, out):
    """Common checks of a launcher; returns (w as a device array, block, out)."""
    cupy = _cupy()
    v = _get_variant("conv1d", "cuda", name)
    if not isinstance(x, cupy.ndarray) or x.ndim != 2 or not x.flags.c_contiguous:
        raise ValueError(f"x must be a C-contiguous 2-D cupy array (channels, samples), got {type(x).__name__} "
                         f"{getattr(x, 'shape', '')}")
    dt = x.dtype.name
    if dt not in v.dtypes:
        raise ValueError(f"variant {name!r} supports dtypes {', '.join(v.dtypes)}, got {dt}")
    if block is None:
        block = v.default_block
    if block not in v.blocks:
        raise ValueError(f"block {block!r} is not accepted by variant {name!r}; accepted: "
                         f"{', '.join(map(str, v.blocks))}")
    w = cupy.ascontiguousarray(cupy.asarray(w))
    if w.ndim != 1 or w.size < 1:
        raise ValueError(f"w must be a non-empty 1-D array of taps, got shape {w.shape}")
    if w.dtype != x.dtype:
        raise ValueError(f"w must have x's dtype {dt}, got {w.dtype}")
    if v.max_taps is not None and w.size > v.max_taps:
        raise ValueError(f"variant {name!r} accepts at most {v.max_taps} taps, got K={w.size}")
    if isinstance(pad, bool) or not isinstance(pad, (int, np.integer)):
        raise ValueError(f"pad must be an integer, got {pad!r}")
    if isinstance(out_len, bool) or not isinstance(out_len, (int, np.integer)) or out_len < 0:
        raise ValueError(f"out_len must be an integer >= 0, got {out_len!r}")
    C = x.shape[0]
    if out is None:
        out = cupy.empty((C, int(out_len)), dtype=x.dtype)
    elif (not isinstance(out, cupy.ndarray) or out.shape != (C, out_len) or out.dtype != x.dtype
          or not out.flags.c_contiguous):
        raise ValueError(f"out must be a C-contiguous cupy array of shape {(C, out_len)} and dtype {dt}, got "
                         f"{getattr(out, 'shape', None)} {getattr(out, 'dtype', None)}")
    return w, int(block), out


def _ints(C, L, K, pad, out_len):
    return np.int32(C), np.int64(L), np.int32(K), np.int64(pad), np.int64(out_len)


def launch_config(variant: str, dtype, C: int, K: int, out_len: int, block: int) -> dict:
    """Grid, dynamic shared memory (bytes) and taps uploaded to __constant__ memory (zero-padded count, 0
    for none) of a direct variant's launch; for ``tiled`` also :func:`tiled_geometry`'s fields. The
    launchers use it, and so does the host emulation of the kernels (tests/test_kernel_build.py)."""
    itemsize = np.dtype(dtype).itemsize
    cfg = {"grid": _grid(out_len, block, C), "smem": 0, "taps": 0}
    if variant == "constant":
        cfg["taps"] = K
    elif variant == "shared":
        cfg["smem"] = (block + 2 * SHARED_KCH[np.dtype(dtype).name] - 1) * itemsize
    elif variant == "l2":
        cfg["smem"] = block * itemsize
    elif variant == "tiled":
        g = tiled_geometry(K, block)
        cfg.update(g, grid=_grid(out_len, g["outputs_per_block"], C), taps=4 * (-(-K // 4)))
    elif variant != "naive":
        raise ValueError(f"no direct launch configuration for variant {variant!r}")
    return cfg


def _grid(n_items: int, per_block: int, C: int):
    return (max(1, -(-n_items // per_block)), max(1, min(C, 65535)))


def _empty(x, out_len):
    """Nothing to launch: no channels or no outputs (a zero-length input still launches: all zeros)."""
    return x.shape[0] == 0 or out_len == 0


def _upload_taps(mod, w, K_padded: int) -> None:
    """Copy taps into the module's __constant__ buffer on the current stream, zeros up to K_padded."""
    cupy = _cupy()
    ptr = mod.get_global("c_taps_raw")
    stream = cupy.cuda.get_current_stream()
    nbytes = w.size * w.itemsize
    ptr.copy_from_device_async(w.data, nbytes, stream)
    extra = (K_padded - w.size) * w.itemsize
    if extra > 0:
        cupy.cuda.runtime.memsetAsync(ptr.ptr + nbytes, 0, extra, stream.ptr)


# ------------------------------------------------------------------------------------ launchers


def launch_naive(x, w, pad, out_len, block, out=None):
    """One thread per output; taps and input from global memory."""
    w, block, out = _prep("naive", x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    C, L = x.shape
    fn = _module().get_function(f"conv1d_naive_{_sfx(x.dtype)}")
    fn(launch_config("naive", x.dtype, C, w.size, out_len, block)["grid"], (block,),
       (x, w, out, *_ints(C, L, w.size, pad, out_len)))
    return out


def launch_constant(x, w, pad, out_len, block, out=None):
    """naive with taps in __constant__ memory; more than CONST_TAPS[dtype] taps -> ValueError."""
    lim = CONST_TAPS.get(getattr(getattr(x, "dtype", None), "name", ""))
    K = int(getattr(w, "size", 0) or len(w))
    if lim is not None and K > lim:
        raise ValueError(f"variant 'constant' holds at most {lim} {x.dtype.name} taps in __constant__ memory "
                         f"(32 KB), got K={K}; use 'shared', 'tiled' or 'fft'")
    w, block, out = _prep("constant", x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    C, L = x.shape
    mod = _module()
    cfg = launch_config("constant", x.dtype, C, w.size, out_len, block)
    _upload_taps(mod, w, cfg["taps"])
    fn = mod.get_function(f"conv1d_constant_{_sfx(x.dtype)}")
    fn(cfg["grid"], (block,), (x, out, *_ints(C, L, w.size, pad, out_len)))
    return out


def launch_shared(x, w, pad, out_len, block, out=None):
    """Tile + halo in shared memory, taps in chunks of SHARED_KCH (any K)."""
    w, block, out = _prep("shared", x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    C, L = x.shape
    cfg = launch_config("shared", x.dtype, C, w.size, out_len, block)
    fn = _module().get_function(f"conv1d_shared_{_sfx(x.dtype)}")
    fn(cfg["grid"], (block,), (x, w, out, *_ints(C, L, w.size, pad, out_len)), shared_mem=cfg["smem"])
    return out


def launch_l2(x, w, pad, out_len, block, out=None):
    """Core tile in shared memory, halo through L2."""
    w, block, out = _prep("l2", x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    C, L = x.shape
    cfg = launch_config("l2", x.dtype, C, w.size, out_len, block)
    fn = _module().get_function(f"conv1d_l2_{_sfx(x.dtype)}")
    fn(cfg["grid"], (block,), (x, w, out, *_ints(C, L, w.size, pad, out_len)), shared_mem=cfg["smem"])
    return out


def _pad32_words(S: int) -> int:
    """Mirror of sc_pad32_words in common.cuh: words that logical [0, S) occupy in padded smem."""
    return ((S + 3) & ~3) + 4 * ((S + 31) // 32)


def tiled_geometry(K: int, block: int) -> dict:
    """Launch geometry of ``tiled``: outputs per thread R, kernel name, logical smem length S, bytes.

    Static K (<= TILED_STATIC_MAX_K): S = (B-1)*R + 4*ceil((R+K-1)/4), the last float4 a thread reads.
    Runtime K: S = B*R + 4*ceil(K/4) (window R+4 slid in steps of 4 taps over zero-padded taps).
    """
    R = 8 if K <= 32 else 16
    if K <= TILED_STATIC_MAX_K:
        nw = (R + K - 1 + 3) // 4
        S = (block - 1) * R + 4 * nw
        expr, static = f"conv1d_tiled<{K}, {R}>", True
    else:
        S = block * R + 4 * (-(-K // 4))
        expr, static = f"conv1d_tiled_rt<{R}>", False
    return dict(R=R, S=S, expr=expr, static=static, smem=4 * _pad32_words(S), outputs_per_block=block * R)


_RT_EXPRS = ("conv1d_tiled_rt<8>", "conv1d_tiled_rt<16>")


def launch_tiled(x, w, pad, out_len, block, out=None):
    """The fast direct kernel (float32): register tiles, float4 loads, constant taps, K unrolled."""
    w, block, out = _prep("tiled", x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    C, L = x.shape
    K = w.size
    g = launch_config("tiled", x.dtype, C, K, out_len, block)
    if g["static"]:
        mod = _module(name_expressions=(g["expr"],))
        args = (x, out, np.int32(C), np.int64(L), np.int64(pad), np.int64(out_len), np.int32(g["S"]))
    else:
        mod = _module(name_expressions=_RT_EXPRS)
        args = (x, out, np.int32(C), np.int64(L), np.int32(K), np.int64(pad), np.int64(out_len), np.int32(g["S"]))
    fn = mod.get_function(g["expr"])
    if g["smem"] > _SMEM_DEFAULT and fn.max_dynamic_shared_size_bytes < g["smem"]:
        fn.max_dynamic_shared_size_bytes = g["smem"]
    _upload_taps(mod, w, g["taps"])
    fn(g["grid"], (block,), args, shared_mem=g["smem"])
    return out


# ---- fft


def fft_size(K: int) -> int:
    """Overlap-save length: a power of two about 8x K (4x K above 2048 taps), at least 1024."""
    n = 8 * K if K <= 2048 else 4 * K
    return max(1024, 1 << (n - 1).bit_length())


_SPECTRA: "OrderedDict[tuple, object]" = OrderedDict()
_SPECTRA_LOCK = threading.Lock()
_SPECTRA_MAX = 32


def host_taps_key(w_host) -> str:
    """Cache key of host taps (correlation form, working dtype) for the fft variant's spectrum cache."""
    a = np.ascontiguousarray(w_host)
    return f"{hashlib.sha1(a.tobytes()).hexdigest()}:{a.size}:{a.dtype.name}"


def _filter_spectrum(w, N: int, key=None):
    """rfft of the convolution taps (w reversed), zero-padded to N, times 1/N, computed on the device in
    float64 and cast to the working precision; the inverse transform then runs unscaled (norm="forward").

    With ``key`` (:func:`host_taps_key` of the host copy the caller already has: the array API and the stream
    filters pass it) the spectrum is computed once and cached per (key, N, device). Without one (taps that
    only exist on the device) it is recomputed, a few small launches: identifying the taps would mean reading
    them back, which waits for the GPU on every call."""
    cupy = _cupy()
    ck = None
    if key is not None:
        ck = (key, int(N), w.dtype.name, cupy.cuda.Device().id)
        with _SPECTRA_LOCK:
            H = _SPECTRA.get(ck)
            if H is not None:
                _SPECTRA.move_to_end(ck)
                return H
    cdt = cupy.complex64 if w.dtype == cupy.float32 else cupy.complex128
    Hd = cupy.fft.rfft(cupy.ascontiguousarray(w[::-1], dtype=cupy.float64), n=N)
    Hd *= 1.0 / N
    H = Hd.astype(cdt, copy=False)
    if ck is not None:
        with _SPECTRA_LOCK:
            _SPECTRA[ck] = H
            while len(_SPECTRA) > _SPECTRA_MAX:
                _SPECTRA.popitem(last=False)
    return H


#: grid.y / grid.z limit of the hardware
_GRID_YZ_MAX = 65535
#: about this many blocks per overlap-save helper launch at most (many waves; the rest by grid-stride)
_OS_BLOCKS = 1 << 16


def os_grid(kind: str, block: int, *, N: int, C: int = 1, nseg: int = 1, M: int = 1, rows: int = 1,
            cap_y: int = _GRID_YZ_MAX, cap_z: int = _GRID_YZ_MAX) -> tuple:
    """Launch grid of an overlap-save helper (kernels/overlap_save.cuh documents the layout).

    gather: x covers N/4 threads of 4 samples, y segments, z channels; scatter: x covers the M valid
    outputs of a segment, y segments, z channels; cmul: x covers the N/2+1 bins, y the C*nseg rows.
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
    else:
        raise ValueError(f"unknown overlap-save kernel {kind!r}")
    gz = max(1, min(nz, _GRID_YZ_MAX, cap_z))
    gy = max(1, min(ny, _GRID_YZ_MAX, cap_y, max(1, _OS_BLOCKS // (gx * gz))))
    return (gx, gy, gz)


#: float32 fft problems with fewer than this many samples (C * (out_len + K)) are transformed in float64.
_FFT_F64_BELOW = 1 << 16


def launch_fft(x, w, pad, out_len, block, out=None, taps_key=None):
    """Overlap-save: gather segments (one kernel), batched rfft, fused spectrum product, irfft, scatter.
    ``taps_key``: :func:`host_taps_key` of the host taps, when the caller has them (spectrum cached)."""
    w, block, out = _prep("fft", x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    cupy = _cupy()
    C, L = x.shape
    K = w.size
    if x.dtype == np.float32 and C * (out_len + K) <= _FFT_F64_BELOW:
        # Tiny problems transform in float64 (free at this size): an FFT's rounding error scales with the
        # input's magnitude, so an output much smaller than its inputs (cancellation, or a single product
        # when L=1) would miss float32 relative accuracy. Large problems keep float32 transforms.
        out[...] = launch_fft(x.astype(cupy.float64), cupy.asarray(w, dtype=cupy.float64), pad, out_len, block,
                              taps_key=taps_key)
        return out
    N = fft_size(K)
    M = N - K + 1  # valid outputs per segment
    nseg = -(-out_len // M)
    sfx = _sfx(x.dtype)
    mod = _module()
    H = _filter_spectrum(w, N, taps_key)
    segs = cupy.empty((C * nseg, N), dtype=x.dtype)
    mod.get_function(f"conv1d_os_gather_{sfx}")(
        os_grid("gather", block, N=N, C=C, nseg=nseg), (block,),
        (x, segs, np.int32(C), np.int64(L), np.int64(pad), np.int64(M), np.int32(N), np.int64(nseg)))
    X = cupy.fft.rfft(segs, axis=-1)
    del segs
    NF = N // 2 + 1
    mod.get_function(f"conv1d_os_cmul_{sfx}")(os_grid("cmul", block, N=N, rows=C * nseg), (block,),
                                              (X, H, np.int64(C * nseg), np.int32(NF)))
    import cupyx.scipy.fft

    # overwrite_x: cuFFT's C2R destroys its input; without it CuPy copies the whole spectrum first
    Ys = cupyx.scipy.fft.irfft(X, n=N, axis=-1, norm="forward", overwrite_x=True)
    del X
    if Ys.dtype != x.dtype:  # irfft keeps the precision, but be explicit
        Ys = Ys.astype(x.dtype)
    mod.get_function(f"conv1d_os_scatter_{sfx}")(
        os_grid("scatter", block, N=N, C=C, nseg=nseg, M=M), (block,),
        (Ys, out, np.int32(C), np.int64(out_len), np.int64(M), np.int32(N), np.int64(nseg), np.int32(K)))
    return out


# ------------------------------------------------------------------------------------ auto


def shape_key(C: int, L: int, K: int, dtype) -> tuple:
    """Autotuner shape class: (C bucket, log2 L bucket, K exact up to 64 else next power of two, dtype)."""
    cb = 1 << max(0, (int(C) - 1).bit_length())
    lb = max(0, int(L).bit_length() - 1)
    kb = int(K) if K <= 64 else 1 << (int(K) - 1).bit_length()
    return (cb, lb, kb, np.dtype(dtype).name)


def candidates(C: int, L: int, K: int, dtype) -> list:
    """(variant, block) candidates for auto, heuristic favourite first (tiled small K, fft large K)."""
    if np.dtype(dtype) == np.float32:
        if K <= TILED_STATIC_MAX_K:
            # block 64 was the fastest tiled block at K=25 and K=63 on the H200 (bench, 2026-11-30)
            c = [("tiled", 256), ("tiled", 128), ("tiled", 64), ("tiled", 512)]
            return c + ([("fft", 256)] if K >= 48 else [])
        if K <= 2048:
            return [("fft", 256), ("tiled", 256), ("tiled", 128)]
        return [("fft", 256), ("fft", 512)]
    if K <= 32:
        return [("shared", 256), ("l2", 256), ("naive", 256), ("fft", 256)]
    return [("fft", 256), ("shared", 256)]


#: Below this many outputs (C * out_len) auto does not time anything: the heuristic choice is used.
AUTOTUNE_MIN_OUTPUTS = 1 << 16


def resolve_auto(x, w, pad, out_len) -> tuple:
    """(variant, block) that ``variant="auto"`` runs for these arguments (autotuned, cached)."""
    C, L = x.shape
    K = int(w.size)
    cands = candidates(C, L, K, x.dtype)
    if C * out_len < AUTOTUNE_MIN_OUTPUTS:
        return cands[0]
    from sigconv.registry import tune as _autotune

    scratch = {}

    def runner(variant, block):
        cupy = _cupy()
        if "out" not in scratch:
            scratch["out"] = cupy.empty((C, out_len), dtype=x.dtype)
        _get_variant("conv1d", "cuda", variant).load()(x, w, pad, out_len, block, out=scratch["out"])

    return _autotune.pick("conv1d", shape_key(C, L, K, x.dtype), cands, runner, sources=(SOURCE,))


def corr1d(x, w, pad, out_len, *, variant="auto", block=None, out=None, taps_key=None):
    """The 1-D contract on the GPU: y[c, n] = sum_j w[j] x[c, n + j - pad] (see sigconv.backends).

    x : cupy (C, L) C-contiguous float32/float64; w : cupy or numpy (K,) of the same dtype.
    taps_key : :func:`host_taps_key` of w's host copy, if the caller has one (the fft variant caches its
    spectrum under it). Returns cupy (C, out_len) (``out`` when given).
    """
    cupy = _cupy()
    from sigconv._core.blocks import check_block

    check_block(block)
    if not isinstance(x, cupy.ndarray):
        raise ValueError(f"x must be a cupy array on the cuda backend, got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64):
        raise ValueError(f"x must be float32 or float64, got {x.dtype}")
    w = cupy.asarray(w)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"w must be a non-empty 1-D array of taps, got shape {w.shape}")
    if variant == "auto":
        variant, tuned_block = resolve_auto(x, w, pad, out_len)
        v = _get_variant("conv1d", "cuda", variant)
        if block is None or block not in v.blocks:
            block = tuned_block
    kw = {"taps_key": taps_key} if variant == "fft" else {}
    return _get_variant("conv1d", "cuda", variant).load()(x, w, pad, out_len, block, out=out, **kw)


# ------------------------------------------------------------------------------------ streaming


class StreamFilter:
    """Causal FIR filter on the GPU with the K-1 history kept on the device (``lfilter`` semantics).

    ``process(x)`` takes (C, n) numpy or cupy and returns the same array type; ``flush()`` returns
    the K-1 tail of the full convolution and resets; ``reset()`` drops the history.
    """

    def __init__(self, taps, channels, dtype, *, variant="auto", block=None):
        cupy = _cupy()
        self.dtype = np.dtype(dtype)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        h = np.asarray(cupy.asnumpy(taps) if isinstance(taps, cupy.ndarray) else taps, dtype=np.float64).ravel()
        if h.size == 0:
            raise ValueError("taps must hold at least one tap")
        self.K = int(h.size)
        self.C = int(channels)
        self.variant, self.block = variant, block
        if variant != "auto":
            v = _get_variant("conv1d", "cuda", variant)
            if self.dtype.name not in v.dtypes:
                raise ValueError(f"variant {variant!r} supports dtypes {', '.join(v.dtypes)}, got {self.dtype}")
        wh = np.ascontiguousarray(h[::-1]).astype(self.dtype)  # correlation form
        self.w = cupy.asarray(wh)
        self.taps_key = host_taps_key(wh)
        self._numpy_io = True
        self.reset()

    def reset(self) -> None:
        cupy = _cupy()
        self.hist = cupy.zeros((self.C, self.K - 1), dtype=self.dtype)

    def _filter(self, xg):
        """(C, n) cupy, C-contiguous, self.dtype -> (C, n) outputs continuing the stream."""
        cupy = _cupy()
        C, n = xg.shape
        K = self.K
        if n == 0:
            return cupy.empty((C, 0), dtype=self.dtype)
        # outputs as if the history were zero; outputs n < K-1 are redone with the history below
        y = corr1d(xg, self.w, K - 1, n, variant=self.variant, block=self.block, taps_key=self.taps_key)
        if K > 1:
            h = min(n, K - 1)
            ext = cupy.concatenate([self.hist, xg[:, :h]], axis=1)  # stream samples t0-(K-1) .. t0+h-1
            y[:, :h] = corr1d(ext, self.w, 0, h, variant=self.variant, block=self.block, taps_key=self.taps_key)
            if n >= K - 1:
                hist = cupy.ascontiguousarray(xg[:, n - (K - 1):])
            else:
                hist = cupy.concatenate([self.hist[:, n:], xg], axis=1)
            self.hist = hist
        return y

    def process(self, x):
        cupy = _cupy()
        is_np = not isinstance(x, cupy.ndarray)
        if x.ndim != 2 or x.shape[0] != self.C:
            raise ValueError(f"x must have shape ({self.C}, n), got {x.shape}")
        self._numpy_io = is_np
        xg = cupy.ascontiguousarray(cupy.asarray(x, dtype=self.dtype))
        y = self._filter(xg)
        return cupy.asnumpy(y) if is_np else y

    def flush(self):
        cupy = _cupy()
        tail = self._filter(cupy.zeros((self.C, self.K - 1), dtype=self.dtype))
        self.reset()
        return cupy.asnumpy(tail) if self._numpy_io else tail


# ------------------------------------------------------------------------------------ file engine

_READ_SCALE = {"int16": 1.0 / 32768.0, "int32": 1.0 / 2147483648.0, "float32": 1.0, "float64": 1.0}
#: float -> integer: v = rint(y * scale), saturated to [lo, hi].
_INT_OUT = {"int16": (32768.0, -32768.0, 32767.0), "int32": (2147483648.0, -2147483648.0, 2147483647.0)}
_OUT_DTYPES = ("int16", "int32", "float32", "float64")

_EK: dict = {}


def _ek(name):
    """Lazily built elementwise kernels for the file engine's conversions."""
    k = _EK.get(name)
    if k is None:
        cupy = _cupy()
        if name == "to_float":
            k = cupy.ElementwiseKernel("T x, float32 s", "float32 y", "y = (float)x * s", "sigconv_fe_to_float")
        elif name == "to_int":
            k = cupy.ElementwiseKernel(
                "float32 y, float64 scale, float64 lo, float64 hi", "O out, uint8 flag",
                "double v = rint((double)y * scale); flag = (v < lo || v > hi); out = (O)fmin(fmax(v, lo), hi);",
                "sigconv_fe_to_int")
        elif name == "clip_float":
            k = cupy.ElementwiseKernel(
                "float32 y", "O out, uint8 flag",
                "flag = (y < -1.0f || y > 1.0f); out = (O)fminf(fmaxf(y, -1.0f), 1.0f);", "sigconv_fe_clip")
        _EK[name] = k
    return k


def _is_oom(exc) -> bool:
    cupy = _cupy()
    if isinstance(exc, cupy.cuda.memory.OutOfMemoryError):
        return True
    return "ALLOC_FAILED" in str(exc) or "out of memory" in str(exc).lower()


class FileFilter:
    """GPU half of ``sigconv denoise --backend cuda``: interleaved sample blocks in, ready-to-write blocks out.

    Parameters
    ----------
    taps : (K,) array
    channels : int
    read_dtype : {"int16", "int32", "float32"}
        What the engine reads (int16 for PCM_16, int32 for PCM_24/32, float32 for float subtypes);
        integers are scaled to [-1, 1) on the GPU (int16 / 32768, int32 / 2^31).
    phase : {"zero", "linear"}
        "zero": centred (scipy.signal.convolve(x, taps, "same") per channel, K odd), the total
        output length equals the input's; "linear": causal lfilter output.
    out_dtype : {"int16", "int32", "float32", "float64"}
        Integers: rint(y * 32768) (int16) or rint(y * 2^31) (int32), saturated to the type's range;
        every saturated sample counts in ``clipped``.
    clip : bool
        For float outputs: clip to [-1, 1] (and count). Integer outputs always saturate.
    variant, block
        Kernel choice; "auto" uses fft for K > 1024, else the autotuned choice.
    chunk_frames : int, optional
        Overrides ``preferred_frames``.
    """

    #: Smallest block (frames) the out-of-memory retry splits down to.
    OOM_FLOOR_FRAMES = 1 << 14

    def __init__(self, taps, channels, *, read_dtype, phase="zero", out_dtype, clip, variant="auto", block=None,
                 chunk_frames=None):
        h = np.asarray(taps, dtype=np.float64).ravel()
        K = int(h.size)
        if K == 0:
            raise ValueError("taps must hold at least one tap")
        if str(read_dtype) not in _READ_SCALE:
            raise ValueError(f"read_dtype must be one of int16, int32, float32, got {read_dtype!r}")
        if str(out_dtype) not in _OUT_DTYPES:
            raise ValueError(f"out_dtype must be one of {', '.join(_OUT_DTYPES)}, got {out_dtype!r}")
        if phase not in ("zero", "linear"):
            raise ValueError(f"phase must be 'zero' or 'linear', got {phase!r}")
        if phase == "zero" and K % 2 == 0:
            raise ValueError(f"phase='zero' needs an odd number of taps (got {K}); use phase='linear'")
        self.C = int(channels)
        self.K = K
        self.read_dtype, self.out_dtype = str(read_dtype), str(out_dtype)
        self.phase, self.clip = phase, bool(clip)
        if variant == "auto" and K > 1024:
            variant = "fft"
        self._core = StreamFilter(h, self.C, np.float32, variant=variant, block=block)
        self.delay = (K - 1) // 2 if phase == "zero" else 0
        if chunk_frames is not None:
            self.preferred_frames = int(chunk_frames)
        else:
            self.preferred_frames = max(1 << 22, 1 << (8 * K - 1).bit_length())
        self.clipped = 0
        self._to_drop = self.delay

    # -- state snapshot for the out-of-memory retry (a failed attempt leaves no trace)
    def _state(self):
        return (self._core.hist, self._to_drop, self.clipped)

    def _restore(self, st):
        self._core.hist, self._to_drop, self.clipped = st

    def _process_device(self, block: np.ndarray) -> np.ndarray:
        cupy = _cupy()
        n, C = block.shape
        xg = cupy.asarray(block)  # (n, C) interleaved, read dtype
        xf = cupy.empty((C, n), dtype=np.float32)
        _ek("to_float")(xg.T, np.float32(_READ_SCALE.get(xg.dtype.name, 1.0)), xf)  # deinterleave + scale
        del xg
        y = self._core._filter(xf)
        del xf
        d = min(self._to_drop, y.shape[1])
        if d:
            y = y[:, d:]
            self._to_drop -= d
        m = y.shape[1]
        out = cupy.empty((m, C), dtype=self.out_dtype)
        if self.out_dtype in _INT_OUT:
            flag = cupy.empty((m, C), dtype=np.uint8)
            s, lo, hi = _INT_OUT[self.out_dtype]
            _ek("to_int")(y.T, s, lo, hi, out, flag)  # scale, round, saturate, interleave
            self.clipped += int(cupy.count_nonzero(flag))
        elif self.clip:
            flag = cupy.empty((m, C), dtype=np.uint8)
            _ek("clip_float")(y.T, out, flag)
            self.clipped += int(cupy.count_nonzero(flag))
        else:
            out[...] = y.T
        return cupy.asnumpy(out)

    def _run(self, block: np.ndarray) -> np.ndarray:
        cupy = _cupy()
        st = self._state()
        try:
            return self._process_device(block)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is retried
            if not _is_oom(exc):
                raise
            self._restore(st)
            cupy.get_default_memory_pool().free_all_blocks()
            n = block.shape[0]
            if n // 2 < self.OOM_FLOOR_FRAMES:
                raise RuntimeError(f"GPU out of memory filtering a block of {n} frames: {exc}") from None
        half = block.shape[0] // 2
        a = self._run(block[:half])
        b = self._run(block[half:])
        return np.concatenate([a, b], axis=0)

    def process(self, block) -> np.ndarray:
        """Filter the next (n, C) block; returns (m, C) samples of out_dtype ready to write."""
        block = np.asarray(block)
        if block.ndim == 1 and self.C == 1:
            block = block[:, None]
        if block.ndim != 2 or block.shape[1] != self.C:
            raise ValueError(f"block must have shape (frames, {self.C}), got {block.shape}")
        if block.shape[0] == 0:
            return np.empty((0, self.C), dtype=self.out_dtype)
        return self._run(np.ascontiguousarray(block))

    def finish(self) -> np.ndarray:
        """Rest of the output: zero phase feeds D = (K-1)/2 zeros; linear phase returns nothing. Resets."""
        if self.delay:
            tail = self.process(np.zeros((self.delay, self.C), dtype=np.float32))
        else:
            tail = np.empty((0, self.C), dtype=self.out_dtype)
        self._core.reset()
        self._to_drop = self.delay
        return tail
