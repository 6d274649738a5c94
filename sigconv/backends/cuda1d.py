"""CUDA 1-D backend: sigconv's own kernels (``kernels/conv1d.cu``, ``kernels/conv1d_ffa.cu``) behind the ``corr1d``
contract.

Variants (registered at the bottom; launchers ``launch_<name>``): naive, constant, shared, l2, tiled, ffa; the
``fft`` variant (overlap-save) is :mod:`sigconv.backends.overlap_save`, on the plumbing here.
``variant="auto"`` asks :func:`sigconv.registry.auto.choose_conv1d` (:func:`resolve_auto`). uint64 arrays (exact
integer convolution, sums mod 2^64) run on ``naive`` only, chosen in :func:`corr1d`, never by the chooser.
:class:`StreamFilter` is the stateful causal filter behind ``FIRStream`` and the file engine on cuda.

CuPy is imported inside functions only: importing this module registers the variants and nothing else.
"""

from __future__ import annotations

import functools

import numpy as np

from sigconv import _kernels
from sigconv.registry import auto as _auto
from sigconv.registry.table import BLOCKS_1D, Conv1dJob, Variant, get as _get_variant, register

__all__ = ["corr1d", "resolve_auto", "load_modules", "prebuilt_modules", "put_columns", "StreamFilter", "tiled_geometry",
           "launch_config", "ffa_geometry", "ffa_launches", "host_taps_key", "CONST_TAPS", "FFA_MAX_TAPS", "SHARED_KCH",
           "TILED_STATIC_MAX_K", "SOURCE", "EXACT_DTYPE", "EXACT_VARIANTS"]

SOURCE = "conv1d.cu"
_LIMITS = _kernels.constants()
#: __constant__ tap capacity per dtype (one 32 KB buffer of SIGCONV_CONST_TAP_DOUBLES, kernels/limits.cuh).
CONST_TAPS = {"float32": 2 * _LIMITS["SIGCONV_CONST_TAP_DOUBLES"], "float64": _LIMITS["SIGCONV_CONST_TAP_DOUBLES"]}
#: Taps per shared-memory chunk of the ``shared`` variant (SIGCONV_SHARED_KCH_*, kernels/limits.cuh).
SHARED_KCH = {"float32": _LIMITS["SIGCONV_SHARED_KCH_F32"], "float64": _LIMITS["SIGCONV_SHARED_KCH_F64"]}
#: ``tiled`` compiles K into the kernel (conv1d_tiled<K, R>) up to this K, else conv1d_tiled_rt<R>: the
#: fully unrolled body outgrows the instruction cache well before a few hundred taps, where the runtime-K
#: kernel is faster, so only short filters are unrolled.
TILED_STATIC_MAX_K = 64
#: ``ffa`` (the fast FIR algorithm, kernels/conv1d_ffa.cu): its nine sub-filters hold up to SIGCONV_FFA_MAX_KQ taps
#: each, a quarter of the filter shifted by up to 3 zeros (the tile's alignment) and zero-padded to a multiple of 4.
FFA_SOURCE = "conv1d_ffa.cu"
_FFA_MAX_KQ = _LIMITS["SIGCONV_FFA_MAX_KQ"]
#: The most taps ``ffa`` takes, whatever the shift: 4 KQ - 3.
FFA_MAX_TAPS = 4 * _FFA_MAX_KQ - 3
#: ``ffa``'s thread shapes, (quarter positions per thread RQ, __launch_bounds__), by block and taps per sub-filter KQ:
#: blocks of up to 256 threads with KQ <= 16 (K <= 61-64) compute 32 outputs a thread (128 registers), the others up
#: to 512 threads 16 (64 registers), larger blocks 8. On an H200, L=2^26, in one run (benchmarks/ffa_ab.py): K=63 at
#: block 64 0.169 ms with RQ 8, 0.178 with RQ 6 and 4; K=125 (KQ 32) 0.282 ms with RQ 4 against 0.286 (RQ 6) and
#: 0.293 (RQ 8, 154 registers). RQ is even (kernels/conv1d_ffa.cu: bank-conflict-free windows).
_FFA_WIDE = (256, 16, 8, 256)  # (most threads, most KQ, RQ, bound)
_FFA_SHAPES = ((512, 4, 512), (1024, 2, 1024))  # (most threads, RQ, bound) otherwise
#: Tiles each ``ffa`` block walks (the grid is a quarter of the tiles): the next tile's input is copied while one is
#: computed.
_FFA_TILES_PER_BLOCK = 4
#: Dynamic shared memory a block gets without opting in.
_SMEM_DEFAULT = 48 * 1024
#: The dtype of exact integer convolution (two's-complement values reinterpreted; sums wrap mod 2^64), and the
#: variants with a kernel for it (conv1d_naive_u64).
EXACT_DTYPE = "uint64"
EXACT_VARIANTS = ("naive",)
_SFX = {"float32": "f32", "float64": "f64", EXACT_DTYPE: "u64"}


# ------------------------------------------------------------------------------------ plumbing


def _cupy():
    import cupy

    return cupy


def _module(**kw):
    return _kernels.module(SOURCE, **kw)


def put_columns(dst, col: int, src) -> None:
    """``dst[:, col:col + w] = src`` for (C, w) device arrays of one dtype whose rows are contiguous (a C-contiguous
    array or a column slice of one), as one 2-D copy on the current stream (cudaMemcpy2DAsync): the stream filter's
    history moves without an elementwise kernel, so nothing is compiled for it on a first run."""
    cupy = _cupy()
    C, w = src.shape
    if src.dtype != dst.dtype or dst.shape[0] != C or not 0 <= col <= dst.shape[1] - w:
        raise ValueError(f"put_columns: {src.dtype} {src.shape} does not fit at column {col} of {dst.dtype} "
                         f"{dst.shape}")
    item = src.itemsize
    for a in (src, dst):
        if (a.shape[1] > 1 and a.strides[1] != item) or (a.shape[0] > 1 and a.strides[0] < a.shape[1] * item):
            raise ValueError(f"put_columns needs contiguous rows, got strides {a.strides}")
    if C == 0 or w == 0:
        return
    width = w * item
    spitch = src.strides[0] if C > 1 else width
    dpitch = dst.strides[0] if C > 1 else width
    rt = cupy.cuda.runtime
    rt.memcpy2DAsync(dst.data.ptr + col * item, dpitch, src.data.ptr, spitch, width, C, rt.memcpyDeviceToDevice,
                     cupy.cuda.get_current_stream().ptr)


def _sfx(dtype) -> str:
    return _SFX[np.dtype(dtype).name]


def _prep(name, x, w, pad, out_len, block, out):
    """Common checks of a launcher; returns (w as a device array, block, out)."""
    cupy = _cupy()
    v = _get_variant("conv1d", "cuda", name)
    if not isinstance(x, cupy.ndarray) or x.ndim != 2 or not x.flags.c_contiguous:
        raise ValueError(f"x must be a C-contiguous 2-D cupy array (channels, samples), got {type(x).__name__} "
                         f"{getattr(x, 'shape', '')}")
    dt = x.dtype.name
    block = v.launch_block(block)
    w = cupy.ascontiguousarray(cupy.asarray(w))
    if w.ndim != 1 or w.size < 1:
        raise ValueError(f"w must be a non-empty 1-D array of taps, got shape {w.shape}")
    if w.dtype != x.dtype:
        raise ValueError(f"w must have x's dtype {dt}, got {w.dtype}")
    # uint64 is no registry dtype (the registry lists floating ones): its kernel has float64's constraints
    jdt = "float64" if dt == EXACT_DTYPE and name in EXACT_VARIANTS else dt
    why = v.applies(Conv1dJob(x.shape[0], x.shape[1], w.size, jdt))
    if why:
        raise ValueError(f"variant {name!r} does not apply: {why}")
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


def _upload_taps(ptr, w, K_padded: int) -> None:
    """Copy taps into the module's __constant__ buffer ``ptr`` on the current stream, zeros up to K_padded (inside
    :func:`sigconv._kernels.constant_memory`, with the launch that reads them)."""
    cupy = _cupy()
    stream = cupy.cuda.get_current_stream()
    nbytes = w.size * w.itemsize
    ptr.copy_from_device_async(w.data, nbytes, stream)
    extra = (K_padded - w.size) * w.itemsize
    if extra > 0:
        cupy.cuda.runtime.memsetAsync(ptr.ptr + nbytes, 0, extra, stream.ptr)


# ------------------------------------------------------------------------------------ launchers


def _launch_direct(name, x, w, pad, out_len, block, out):
    """naive, constant, shared and l2: one output per thread, launched as :func:`launch_config` says;
    ``constant`` reads its taps from __constant__ memory (uploaded here) instead of an argument."""
    w, block, out = _prep(name, x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    C, L = x.shape
    mod = _module()
    cfg = launch_config(name, x.dtype, C, w.size, out_len, block)
    args = ((x, out) if cfg["taps"] else (x, w, out)) + _ints(C, L, w.size, pad, out_len)
    fn = mod.get_function(f"conv1d_{name}_{_sfx(x.dtype)}")
    if cfg["taps"]:
        with _kernels.constant_memory(mod.get_global("c_taps_raw")) as ptr:
            _upload_taps(ptr, w, cfg["taps"])
            fn(cfg["grid"], (block,), args, shared_mem=cfg["smem"])
    else:
        fn(cfg["grid"], (block,), args, shared_mem=cfg["smem"])
    return out


def _direct(name: str, doc: str):
    """The registered launcher ``launch_<name>(x, w, pad, out_len, block, out=None)`` of a direct variant."""

    def launch(x, w, pad, out_len, block, out=None):
        return _launch_direct(name, x, w, pad, out_len, block, out)

    launch.__name__ = launch.__qualname__ = f"launch_{name}"
    launch.__doc__ = doc
    return launch


launch_naive = _direct("naive", "One thread per output; taps and input from global memory.")
launch_constant = _direct("constant", "naive with taps in __constant__ memory; more than CONST_TAPS[dtype] taps -> "
                                      "ValueError.")
launch_shared = _direct("shared", "Tile + halo in shared memory, taps in chunks of SHARED_KCH (any K).")
launch_l2 = _direct("l2", "Core tile in shared memory, halo through L2.")


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


def prebuilt_modules() -> list[dict]:
    """:func:`sigconv._kernels.module`'s arguments of the modules here that ship pre-built (see
    ``sigconv.backends.prebuilt_modules``): the direct kernels and the overlap-save helpers, and the runtime-K
    ``tiled`` kernels. The static-K ``tiled`` ones, one module per K, compile on first use."""
    return [dict(name=SOURCE), dict(name=SOURCE, name_expressions=_RT_EXPRS)]


def load_modules() -> None:
    """Compile (or load from CuPy's cache) the modules every filter length uses: the direct kernels and the runtime-K
    ``tiled`` kernels; the static-K ``tiled`` ones are compiled per K on first use."""
    _module()
    _module(name_expressions=_RT_EXPRS)


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
    with _kernels.constant_memory(mod.get_global("c_taps_raw")) as ptr:
        _upload_taps(ptr, w, g["taps"])
        fn(g["grid"], (block,), args, shared_mem=g["smem"])
    return out


def ffa_geometry(K: int, block: int, shift: int, rq: int | None = None, maxt: int | None = None) -> dict:
    """Launch geometry of ``ffa`` for K taps shifted by ``shift`` (0-3) zeros: quarter positions per thread RQ
    (outputs R = 4 RQ, ``rq`` overrides the rule of :data:`_FFA_WIDE` and :data:`_FFA_SHAPES`), taps per sub-filter
    KQ, the kernel's name expression (``maxt`` its __launch_bounds__), the logical length S of one input buffer and
    the bytes of the two.

    S = B R + 4 (KQ + 1): the last thread's R outputs read KQ - 1 quarter positions past them, plus one of
    look-ahead. A buffer spans S + 4 ceil(S / R) words (four words of padding after every R, kernels/conv1d_ffa.cu).
    """
    if not 1 <= K <= FFA_MAX_TAPS or not 0 <= shift <= 3:
        raise ValueError(f"ffa takes 1 to {FFA_MAX_TAPS} taps and a shift of 0-3, got K={K}, shift={shift}")
    KQ = -(-(K + shift) // 4)
    if block <= _FFA_WIDE[0] and KQ <= _FFA_WIDE[1]:
        RQ, mt = _FFA_WIDE[2:]
    else:
        RQ, mt = next((r, m) for top, r, m in _FFA_SHAPES if block <= top)
    RQ, mt = rq or RQ, maxt or mt
    if block > mt:
        raise ValueError(f"ffa built for at most {mt} threads cannot run a block of {block}")
    R = 4 * RQ
    S = block * R + 4 * (KQ + 1)
    return dict(RQ=RQ, R=R, KQ=KQ, S=S, expr=f"conv1d_ffa<{KQ}, {RQ}, {mt}>", smem=8 * (S + 4 * (-(-S // R))),
                outputs_per_block=block * R)


def ffa_launches(x_word: int, C: int, L: int, K: int, pad: int, out_len: int, block: int, **shape) -> list[dict]:
    """The launches of ``ffa`` for x (C, L) float32 at address ``x_word`` floats (its pointer / 4): one per class of
    channels whose rows start at the same 16-byte phase (one class when L is a multiple of 4 or C is 1, else 2 or 4,
    channels c0, c0 + cstep, ...). Each has :func:`ffa_geometry`'s fields for its ``shift`` (the zeros put before the
    taps so that every tile's first input x[c, n0 - pad - shift] is 16-byte aligned; ``shape``: its rq and maxt),
    ``c0``, ``cstep``, ``start`` (= -pad - shift), ``ntiles`` (tiles of ``outputs_per_block`` per channel) and
    ``grid`` (a block per :data:`_FFA_TILES_PER_BLOCK` tiles, a row per channel of the class)."""
    return [dict(g) for g in _ffa_launches(x_word % 4, C, L, K, pad, out_len, block, shape.get("rq"),
                                           shape.get("maxt"))]


@functools.lru_cache(maxsize=256)  # a stream's blocks ask for the same launches over and over
def _ffa_launches(x_phase: int, C: int, L: int, K: int, pad: int, out_len: int, block: int, rq, maxt) -> tuple:
    step = 1 if C == 1 or L % 4 == 0 else (2 if L % 2 == 0 else 4)
    out = []
    for c0 in range(min(step, C)):
        shift = (x_phase + c0 * L - pad) % 4
        g = ffa_geometry(K, block, shift, rq, maxt)
        ntiles = max(1, -(-out_len // g["outputs_per_block"]))
        n_ch = len(range(c0, C, step))
        out.append(dict(g, c0=c0, cstep=step, shift=shift, start=-pad - shift, ntiles=ntiles,
                        grid=(-(-ntiles // _FFA_TILES_PER_BLOCK), max(1, min(n_ch, 65535)))))
    return tuple(out)


#: (device, stream, name expression) -> the ffa kernel, its taps kernel, its __constant__ taps, a scratch buffer for
#: the prepared taps and the dynamic shared memory the kernel is allowed.
_FFA_PARTS: dict = {}


def _ffa_parts(cupy, g: dict) -> list:
    """The module objects one ``ffa`` launch uses, fetched once per device, stream and instantiation (each fetch is a
    driver call), and the kernel's dynamic shared memory limit raised to what the launch needs."""
    key = (cupy.cuda.Device().id, cupy.cuda.get_current_stream().ptr, g["expr"])
    parts = _FFA_PARTS.get(key)
    if parts is None:
        if len(_FFA_PARTS) >= 64:  # streams come and go: keep the table small
            _FFA_PARTS.clear()
        mod = _kernels.module(FFA_SOURCE, name_expressions=(g["expr"],))
        fn = mod.get_function(g["expr"])
        parts = _FFA_PARTS[key] = [fn, mod.get_function("conv1d_ffa_taps"), mod.get_global("c_ffa_taps"),
                                   cupy.empty(9 * g["KQ"], dtype=np.float32), fn.max_dynamic_shared_size_bytes]
    if g["smem"] > _SMEM_DEFAULT and parts[4] < g["smem"]:
        parts[0].max_dynamic_shared_size_bytes = parts[4] = g["smem"]
    return parts


def launch_ffa(x, w, pad, out_len, block, out=None, *, _shape=None):
    """The fast FIR algorithm (float32, K <= FFA_MAX_TAPS): nine sub-filters of K/4 taps per four outputs.
    ``_shape`` (benchmarks): :func:`ffa_geometry`'s rq and maxt instead of the rule's."""
    cupy = _cupy()
    w, block, out = _prep("ffa", x, w, pad, out_len, block, out)
    if _empty(x, out_len):
        return out
    C, L = x.shape
    K = w.size
    stream = cupy.cuda.get_current_stream()
    for g in ffa_launches(x.data.ptr // 4, C, L, K, int(pad), int(out_len), block, **(_shape or {})):
        fn, taps_fn, ctaps, taps, _ = _ffa_parts(cupy, g)
        n = 9 * g["KQ"]  # the taps go through the scratch buffer in stream order, so one buffer serves every call
        taps_fn((1,), (32 * -(-n // 32),), (w, np.int32(K), np.int32(g["shift"]), np.int32(g["KQ"]), taps))
        with _kernels.constant_memory(ctaps):
            ctaps.copy_from_device_async(taps.data, 4 * n, stream)
            fn(g["grid"], (block,), (x, out, np.int32(C), np.int32(g["c0"]), np.int32(g["cstep"]), np.int64(L),
                                     np.int64(g["start"]), np.int64(out_len), np.int32(g["S"]),
                                     np.int32(g["ntiles"])), shared_mem=g["smem"])
    return out


def host_taps_key(w_host) -> str:
    """Cache key of host taps (correlation form, working dtype): the fft variant caches its filter spectrum
    under it (:mod:`sigconv.backends.overlap_save`)."""
    import hashlib

    a = np.ascontiguousarray(w_host)
    return f"{hashlib.sha1(a.tobytes()).hexdigest()}:{a.size}:{a.dtype.name}"


# ------------------------------------------------------------------------------------ auto


def resolve_auto(x, w, pad, out_len, block=None, taps_key=None) -> tuple:
    """(variant, block) that ``variant="auto"`` runs for these arrays: the chooser's answer, timed on them
    (once per shape class) when the job is large enough. ``taps_key`` as in :func:`corr1d`: the fft variants'
    timing runs then use (and fill) the cached filter spectrum the real run uses."""
    C, L = x.shape
    scratch = []

    def runner(variant, b):
        if not scratch:
            scratch.append(_cupy().empty((C, out_len), dtype=x.dtype))
        v = _get_variant("conv1d", "cuda", variant)
        kw = {"taps_key": taps_key} if v.method == "fft" else {}
        v.run(x, w, pad, out_len, b, out=scratch[0], **kw)

    return _auto.choose_conv1d("cuda", C, L, int(w.size), x.dtype, out_len=out_len, block=block, runner=runner)


def corr1d(x, w, pad, out_len, *, variant="auto", block=None, out=None, taps_key=None):
    """The 1-D contract on the GPU: y[c, n] = sum_j w[j] x[c, n + j - pad] (see sigconv.backends).

    x : cupy (C, L) C-contiguous float32/float64, or uint64 (exact integer convolution mod 2^64, on ``naive``);
    w : cupy or numpy (K,) of the same dtype.
    taps_key : :func:`host_taps_key` of w's host copy, if the caller has one (the fft variant caches its
    spectrum under it). Returns cupy (C, out_len) (``out`` when given). ``block`` was checked where it entered
    (the public API or a KernelChoice); the variant's launcher refuses one it does not accept.
    """
    cupy = _cupy()
    if not isinstance(x, cupy.ndarray):
        raise ValueError(f"x must be a cupy array on the cuda backend, got {type(x).__name__}")
    if x.dtype not in (np.float32, np.float64, np.uint64):
        raise ValueError(f"x must be float32, float64 or {EXACT_DTYPE}, got {x.dtype}")
    w = cupy.asarray(w)
    if w.ndim != 1 or w.size == 0:
        raise ValueError(f"w must be a non-empty 1-D array of taps, got shape {w.shape}")
    if x.dtype.name == EXACT_DTYPE:
        if variant not in ("auto",) + EXACT_VARIANTS:
            raise ValueError(f"conv1d variant {variant!r} does not run {EXACT_DTYPE} (exact integer) data; "
                             f"{', '.join(EXACT_VARIANTS)} does")
        if w.dtype.kind not in "iu":
            raise ValueError(f"w must be an integer array for {EXACT_DTYPE} x; got {w.dtype.name}")
        w = w.astype(x.dtype, copy=False)  # signed taps mod 2^64 (two's complement, as x)
        variant = EXACT_VARIANTS[0]  # the chooser's candidates are floating kernels
    elif variant == "auto":
        variant, block = resolve_auto(x, w, pad, out_len, block, taps_key)
    v = _get_variant("conv1d", "cuda", variant)
    kw = {"taps_key": taps_key} if v.method == "fft" else {}
    return v.run(x, w, pad, out_len, block, out=out, **kw)


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
            ext = cupy.empty((C, K - 1 + h), dtype=self.dtype)  # stream samples t0-(K-1) .. t0+h-1
            put_columns(ext, 0, self.hist)
            put_columns(ext, K - 1, xg[:, :h])
            put_columns(y, 0, corr1d(ext, self.w, 0, h, variant=self.variant, block=self.block,
                                     taps_key=self.taps_key))
            hist = cupy.empty((C, K - 1), dtype=self.dtype)
            if n >= K - 1:
                put_columns(hist, 0, xg[:, n - (K - 1):])
            else:
                put_columns(hist, 0, self.hist[:, n:])
                put_columns(hist, K - 1 - n, xg)
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


# ------------------------------------------------------------------------------------ registry


def _constant_fits(job) -> str | None:
    lim = CONST_TAPS[job.dtype]
    if job.K > lim:
        return (f"it holds at most {lim} {job.dtype} taps in __constant__ memory (32 KB), got K={job.K}; "
                "use 'shared', 'tiled' or 'fft'")
    return None


_BOTH = ("float32", "float64")
for _name, _run, _desc, _dtypes, _auto_ok, _extra in (
    ("naive", launch_naive, "one thread per output, input and taps from global memory", _BOTH, True, {}),
    ("constant", launch_constant,
     f"as naive with the taps in __constant__ memory (<= {CONST_TAPS['float32']} float32 / "
     f"{CONST_TAPS['float64']} float64 taps)", _BOTH, False, dict(max_taps=CONST_TAPS["float32"],
                                                                  constraint=_constant_fits)),
    ("shared", launch_shared, "input tile + K-1 halo staged in shared memory once (taps walked in chunks, any K)",
     _BOTH, True, {}),
    ("l2", launch_l2, "core tile in shared memory, halo read from global memory through L2", _BOTH, True, {}),
    ("tiled", launch_tiled, "R outputs/thread in registers, float4 tile loads, padded smem, constant taps, K unrolled",
     ("float32",), True, dict(max_taps=CONST_TAPS["float32"])),
    ("ffa", launch_ffa, "fast FIR algorithm: nine sub-filters of K/4 taps per four outputs (0.56 K multiply-adds per "
     "output), K unrolled", ("float32",), True, dict(max_taps=FFA_MAX_TAPS, source=FFA_SOURCE, default_block=128)),
):
    register(Variant(_name, "conv1d", "cuda", _desc, _run, blocks=BLOCKS_1D, dtypes=_dtypes, requires=("gpu",),
                     auto=_auto_ok, **{"source": SOURCE, "default_block": 256, **_extra}))
