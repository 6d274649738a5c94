"""CUDA 2-D backend: sigconv's own NCHW kernels (``kernels/conv2d.cu``) behind the ``corr2d`` contract.

Variants (``sigconv.variants("conv2d")``): ``naive``, ``shared``, ``regblock``, ``prefetch``, ``strip``
and ``shfl`` (single-channel fast paths), ``separable`` (rank-1 kernels), and ``auto`` (autotuned per shape
class; ``shfl`` is not among its candidates until it has been timed on a GPU).
Every launcher has the signature ``launch_NAME(x, w, bias, stride, pad, out_hw, block=None, out=None)``
on C-contiguous cupy arrays; it owns its grid maths and refuses (``ValueError``) what it cannot run.
Nothing here imports CuPy at module level.
"""

from __future__ import annotations

import math

import numpy as np

from sigconv.registry.table import Variant, register

__all__ = ["corr2d", "launch_naive", "launch_shared", "launch_regblock", "launch_prefetch", "launch_strip",
           "launch_shfl", "launch_separable", "separable_factors", "strip_applies", "shfl_applies", "tune_shapes",
           "VARIANTS"]

_SRC = "conv2d.cu"
_REQ = ("cupy", "gpu")
MAX_TAPS = 31

# Accepted (bx, by) launch blocks per variant. The tiled kernels need bx % 4 == 0 (aligned input tiles).
_BLOCKS_GENERIC = ((8, 4), (8, 8), (16, 4), (16, 8), (16, 16), (32, 4), (32, 8), (32, 16))
_BLOCKS_TILED = ((8, 4), (8, 8), (16, 4), (16, 8), (16, 16), (32, 4), (32, 8))
_BLOCKS_PREFETCH = ((8, 4), (8, 8), (16, 4), (16, 8))
_BLOCKS_STRIP = ((32, 1), (64, 1), (128, 1), (256, 1), (32, 4), (64, 4), (32, 8))
# shfl: bx a multiple of 32, so that a warp is one row of threads (its shuffles and its exit are uniform)
_BLOCKS_SHFL = ((32, 1), (64, 1), (128, 1), (256, 1), (32, 4), (64, 4), (32, 8))

#: Separability test: s[1] <= SEP_RTOL * s[0] for every (co, ci) pair.
SEP_RTOL = 1e-7
#: Largest kernel side the strip fast path compiles (register ring of KH x 4 accumulators).
STRIP_MAX = 15
#: Output rows per strip thread.
STRIP_ROWS = 32
#: Output rows per shfl thread; the widest halo (columns each side) the shfl kernel takes from a neighbour lane.
SHFL_ROWS = 32
SHFL_HALO = 4
#: Scratch budget of the separable row pass (bytes); larger jobs run in chunks of planes.
SEP_SCRATCH = 512 << 20

VARIANTS = ("naive", "shared", "regblock", "prefetch", "strip", "shfl", "separable")

_L = "sigconv.backends.cuda2d:"
register(Variant("naive", "conv2d", "cuda", "one thread per output, loops Cin x kH x kW (article A)",
                 _L + "launch_naive", blocks=_BLOCKS_GENERIC, default_block=(32, 8), max_taps=MAX_TAPS,
                 requires=_REQ))
register(Variant("shared", "conv2d", "cuda", "input tile + halo per channel in shared memory, bank-padded rows",
                 _L + "launch_shared", blocks=_BLOCKS_GENERIC, default_block=(32, 8), max_taps=MAX_TAPS,
                 requires=_REQ))
register(Variant("regblock", "conv2d", "cuda",
                 "16-byte tile loads, 2x4 outputs x 8 output channels per thread in registers",
                 _L + "launch_regblock", blocks=_BLOCKS_TILED, default_block=(16, 8), dtypes=("float32",),
                 max_taps=MAX_TAPS, requires=_REQ))
register(Variant("prefetch", "conv2d", "cuda",
                 "article B: one-warp 8x4 blocks, float4 tiles, next channel prefetched (double buffer)",
                 _L + "launch_prefetch", blocks=_BLOCKS_PREFETCH, default_block=(8, 4), dtypes=("float32",),
                 max_taps=MAX_TAPS, requires=_REQ))
register(Variant("strip", "conv2d", "cuda",
                 "single channel (Cin=Cout=1, stride 1, k<=15): row-streaming register window, taps in constant",
                 _L + "launch_strip", blocks=_BLOCKS_STRIP, default_block=(64, 1), dtypes=("float32",),
                 max_taps=STRIP_MAX, requires=_REQ))
register(Variant("shfl", "conv2d", "cuda",
                 "single channel, stride 1, halos <= 4 columns: one float4 per row, halo columns by warp shuffles",
                 _L + "launch_shfl", blocks=_BLOCKS_SHFL, default_block=(128, 1), dtypes=("float32",),
                 max_taps=STRIP_MAX, requires=_REQ))
register(Variant("separable", "conv2d", "cuda", "rank-1 kernels (Gaussian, box): a row pass then a column pass",
                 _L + "launch_separable", blocks=_BLOCKS_GENERIC, default_block=(32, 8), max_taps=MAX_TAPS,
                 requires=_REQ))


# ------------------------------------------------------------------------------------------ helpers


def _block(name: str, block, accepted, default):
    """The launch block for variant ``name``: ``default`` for None, else one of ``accepted``."""
    if block is None:
        return default
    try:
        b = (int(block[0]), int(block[1]))
    except (TypeError, ValueError, IndexError):
        b = (int(block), 1) if isinstance(block, (int, np.integer)) else None
    if b not in accepted:
        raise ValueError(f"block for conv2d variant {name!r} must be one of "
                         f"{', '.join(f'{bx}x{by}' for bx, by in accepted)}; got {block!r}")
    return b


def _dtype_check(name: str, x, allowed=("float32", "float64")):
    if x.dtype.name not in allowed:
        raise ValueError(f"conv2d variant {name!r} supports dtypes {', '.join(allowed)}; got {x.dtype.name}"
                         + ("; use naive, shared or separable for float64" if x.dtype.name == "float64" else ""))


def _taps_check(name: str, w, limit=MAX_TAPS):
    kH, kW = w.shape[2], w.shape[3]
    if kH > limit or kW > limit:
        raise ValueError(f"conv2d variant {name!r} supports kernels up to {limit}x{limit}; got {kH}x{kW}")


def _out(out, shape, dtype):
    import cupy

    if out is None:
        return cupy.empty(shape, dtype=dtype)
    if tuple(out.shape) != tuple(shape) or out.dtype != dtype or not out.flags.c_contiguous:
        raise ValueError(f"out must be a C-contiguous {np.dtype(dtype).name} array of shape {tuple(shape)}; "
                         f"got {out.dtype.name} {tuple(out.shape)}")
    return out


def _bias_arg(bias, x):
    """(pointer array, has_bias): the kernels read bias only when has_bias is 1."""
    if bias is None:
        return x, 0
    return bias, 1


def _grid_z(n: int) -> int:
    return max(1, min(int(n), 65535))  # kernels loop z over the rest


def generic_grid(planes: int, Ho: int, Wo: int, block) -> tuple:
    """Grid of the naive and shared kernels: one thread per output column/row, planes along z (capped)."""
    return (math.ceil(Wo / block[0]), math.ceil(Ho / block[1]), _grid_z(planes))


def _dims(x, w, out_hw):
    N, Cin, H, W = (int(v) for v in x.shape)
    Cout, _, kH, kW = (int(v) for v in w.shape)
    Ho, Wo = (int(v) for v in out_hw)
    return N, Cin, H, W, Cout, kH, kW, Ho, Wo


def _i32(*vals):
    return tuple(np.int32(v) for v in vals)


def _aligned(a) -> bool:
    return a.data.ptr % 16 == 0


_GENERIC_NAMES = tuple(f"{k}<{t}>" for k in ("conv2d_naive", "conv2d_shared", "conv2d_sep_rows", "conv2d_sep_cols")
                       for t in ("float", "double"))


def _generic(kernel: str, dtype):
    from sigconv import _kernels

    t = "float" if np.dtype(dtype) == np.float32 else "double"
    mod = _kernels.module(_SRC, {}, name_expressions=_GENERIC_NAMES)
    return mod.get_function(f"{kernel}<{t}>")


def _set_smem(func, nbytes: int) -> None:
    """Allow more than 48 KB of dynamic shared memory for ``func``."""
    if nbytes <= 48 * 1024:
        return
    if func.max_dynamic_shared_size_bytes < nbytes:
        func.max_dynamic_shared_size_bytes = int(nbytes)


def _smem_limit() -> int:
    import cupy

    try:
        return int(cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"])
    except Exception:  # pragma: no cover
        return 48 * 1024


# ---------------------------------------------------------------------------------------- launchers


def launch_naive(x, w, bias, stride, pad, out_hw, block=None, out=None):
    """One thread per output element (float32/float64)."""
    _dtype_check("naive", x)
    _taps_check("naive", w)
    bx, by = _block("naive", block, _BLOCKS_GENERIC, (32, 8))
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    f = _generic("conv2d_naive", x.dtype)
    f(generic_grid(N * Cout, Ho, Wo, (bx, by)), (bx, by, 1),
      (x, w, b, y) + _i32(N, Cin, H, W, Cout, kH, kW, stride[0], stride[1], pad[0], pad[1], Ho, Wo, hb))
    return y


def shared_pitch(tw: int, bx: int) -> int:
    """Row pitch >= tw for the shared kernel: with bx < 32 a warp spans 32/bx rows; a pitch that is an odd
    multiple of bx puts those rows in distinct bank ranges (k * pitch mod 32 distinct for k < 32/bx)."""
    if bx >= 32:
        return tw
    p = tw
    while p % (2 * bx) != bx:
        p += 1
    return p


def shared_geometry(block, kH: int, kW: int, stride, itemsize: int) -> tuple:
    """(row pitch, dynamic shared memory bytes) of the shared kernel's input tile."""
    (bx, by), (sy, sx) = block, stride
    th, tw = (by - 1) * sy + kH, (bx - 1) * sx + kW
    pitch = shared_pitch(tw, bx)
    return pitch, th * pitch * itemsize


def launch_shared(x, w, bias, stride, pad, out_hw, block=None, out=None):
    """Input tile + halo per input channel in shared memory (float32/float64)."""
    _dtype_check("shared", x)
    _taps_check("shared", w)
    bx, by = _block("shared", block, _BLOCKS_GENERIC, (32, 8))
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    sy, sx = stride
    pitch, smem = shared_geometry((bx, by), kH, kW, stride, x.dtype.itemsize)
    if smem > _smem_limit():
        raise ValueError(f"block {bx}x{by} needs {smem} bytes of shared memory for a {kH}x{kW} kernel at stride "
                         f"{tuple(stride)}; pick a smaller block")
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    f = _generic("conv2d_shared", x.dtype)
    _set_smem(f, smem)
    f(generic_grid(N * Cout, Ho, Wo, (bx, by)), (bx, by, 1),
      (x, w, b, y) + _i32(N, Cin, H, W, Cout, kH, kW, sy, sx, pad[0], pad[1], Ho, Wo, hb, pitch),
      shared_mem=smem)
    return y


def tiled_plan(block, kH: int, kW: int, stride, px: int, Cout: int, prefetch: bool, limit: int = 200 * 1024) -> dict:
    """#defines and shared-memory size of the regblock/prefetch kernel (mirrors the macros in conv2d.cu).

    Starts from 2x4 outputs x min(8, Cout) channels per thread and shrinks (TY, then TX, then COB) until
    the stages fit in ``limit`` bytes of shared memory.
    """
    bx, by = block
    sy, sx = stride
    stages = 2 if prefetch else 1
    for ty, tx, cob in ((2, 4, 8), (1, 4, 8), (1, 1, 8), (1, 1, 4), (1, 1, 1)):
        cob = min(cob, Cout)
        sh = (-px) % 4
        oh, ow = by * ty, bx * tx
        th = (oh - 1) * sy + kH
        twn = (ow - 1) * sx + kW
        twl = -(-(twn + sh) // 4) * 4
        pitch = twl  # multiple of 4: float4 rows; a phase of 8 lanes reads 128 consecutive bytes
        smem = stages * (-(-(th * pitch + kH * kW * cob) // 4) * 4) * 4  # STAGE_FLOATS, 16-byte aligned
        if smem <= limit:
            break
    d = dict(KH=kH, KW=kW, SY=sy, SX=sx, SH=sh, TX=tx, TY=ty, COB=cob, BX=bx, BY=by, PITCH=pitch,
             PREFETCH=int(prefetch))
    return dict(defines=d, smem=smem, tile=(oh, ow), th=th, twl=twl)


def tiled_grid(plan: dict, N: int, Cout: int, Ho: int, Wo: int) -> tuple:
    """Launch grid of conv2d_tiled for :func:`tiled_plan`'s ``plan``: output tiles along x and y, planes of
    (image, group of COB output channels) along z (capped; the kernel loops over the rest)."""
    oh, ow = plan["tile"]
    cob = plan["defines"]["COB"]
    return (math.ceil(Wo / ow), math.ceil(Ho / oh), _grid_z(N * math.ceil(Cout / cob)))


def _launch_tiled(name, x, w, bias, stride, pad, out_hw, block, out, prefetch, accepted, default):
    _dtype_check(name, x, ("float32",))
    _taps_check(name, w)
    blk = _block(name, block, accepted, default)
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    plan = tiled_plan(blk, kH, kW, stride, pad[1], Cout, prefetch, min(200 * 1024, _smem_limit()))
    if plan["smem"] > _smem_limit():  # pragma: no cover (only with tiny shared memory)
        raise ValueError(f"conv2d variant {name!r}: block {blk} needs {plan['smem']} bytes of shared memory")
    from sigconv import _kernels

    f = _kernels.module(_SRC, plan["defines"]).get_function("conv2d_tiled")
    _set_smem(f, plan["smem"])
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    vec_in = int(W % 4 == 0 and _aligned(x))
    vec_out = int(Wo % 4 == 0 and _aligned(y))
    f(tiled_grid(plan, N, Cout, Ho, Wo), blk + (1,),
      (x, w, b, y) + _i32(N, Cin, H, W, Cout, pad[0], pad[1], Ho, Wo, hb, vec_in, vec_out),
      shared_mem=plan["smem"])
    return y


def launch_regblock(x, w, bias, stride, pad, out_hw, block=None, out=None):
    """Register-blocked tiles with 16-byte loads (float32)."""
    return _launch_tiled("regblock", x, w, bias, stride, pad, out_hw, block, out, False, _BLOCKS_TILED, (16, 8))


def launch_prefetch(x, w, bias, stride, pad, out_hw, block=None, out=None):
    """Article B's one-warp blocks with a double-buffered prefetch of the next channel (float32)."""
    return _launch_tiled("prefetch", x, w, bias, stride, pad, out_hw, block, out, True, _BLOCKS_PREFETCH, (8, 4))


def strip_applies(x, w, stride) -> str | None:
    """``None`` when the strip fast path can run this job, else why not (one line)."""
    if x.dtype.name != "float32":
        return f"it is float32 only (got {x.dtype.name})"
    if x.shape[1] != 1 or w.shape[0] != 1:
        return f"it needs one input and one output channel (got Cin={x.shape[1]}, Cout={w.shape[0]})"
    if tuple(stride) != (1, 1):
        return f"it needs stride 1 (got {tuple(stride)})"
    if w.shape[2] > STRIP_MAX or w.shape[3] > STRIP_MAX:
        return f"it supports kernels up to {STRIP_MAX}x{STRIP_MAX} (got {w.shape[2]}x{w.shape[3]})"
    return None


def strip_grid(N: int, Ho: int, Wo: int, block, rows: int = STRIP_ROWS) -> tuple:
    """Launch grid of conv2d_strip: x over threads of 4 output columns, y over strips of ``rows`` output
    rows, z over the N planes (capped; the kernel loops over the rest)."""
    bx, by = block
    return (math.ceil(math.ceil(Wo / 4) / bx), math.ceil(math.ceil(Ho / rows) / by), _grid_z(N))


def launch_strip(x, w, bias, stride, pad, out_hw, block=None, out=None):
    """Single-channel fast path: vertical strips streaming rows through registers (float32, Cin=Cout=1)."""
    why = strip_applies(x, w, stride)
    if why:
        raise ValueError(f"conv2d variant 'strip' does not apply: {why}")
    bx, by = _block("strip", block, _BLOCKS_STRIP, (64, 1))
    from sigconv import _kernels

    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    mod = _kernels.module(_SRC, dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-pad[1]) % 4, STRIP_ROWS=STRIP_ROWS))
    f, y, b, hb, vec_in, vec_out = _single_channel_setup(mod, "conv2d_strip", "c_taps", x, w, bias, out, Ho, Wo)
    f(strip_grid(N, Ho, Wo, (bx, by)), (bx, by, 1),
      (x, y) + _i32(N, H, W, pad[0], pad[1], Ho, Wo) + (b,) + _i32(hb, vec_in, vec_out))
    return y


def _single_channel_setup(mod, kernel: str, taps_name: str, x, w, bias, out, Ho: int, Wo: int):
    """For the strip and shfl launchers: the kernel, the taps copied into its __constant__ array on the
    current stream (ordered before the launch), the output, the bias argument, and whether rows of x and y
    allow 16-byte loads and stores."""
    import cupy

    f = mod.get_function(kernel)
    taps = mod.get_global(taps_name)
    wflat = cupy.ascontiguousarray(w.reshape(-1), dtype=cupy.float32)
    taps.copy_from_device_async(wflat.data, wflat.size * 4, cupy.cuda.get_current_stream())
    y = _out(out, (x.shape[0], 1, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    vec_in = int(x.shape[3] % 4 == 0 and _aligned(x))
    vec_out = int(Wo % 4 == 0 and _aligned(y))
    return f, y, b, hb, vec_in, vec_out


def shfl_applies(x, w, stride, pad) -> str | None:
    """``None`` when the shfl kernel can run this job, else why not (one line)."""
    why = strip_applies(x, w, stride)
    if why:
        return why
    kW, px = int(w.shape[3]), int(pad[1])
    if not (0 <= px <= SHFL_HALO and 0 <= kW - 1 - px <= SHFL_HALO):
        return (f"it takes at most {SHFL_HALO} halo columns on each side (kernel width {kW} with left pad {px} "
                f"needs {px} and {kW - 1 - px})")
    return None


def launch_shfl(x, w, bias, stride, pad, out_hw, block=None, out=None):
    """Single-channel stencil: strip's row ring with one float4 load per row and the halo columns from the
    neighbouring lanes by warp shuffles (float32, Cin=Cout=1, stride 1)."""
    why = shfl_applies(x, w, stride, pad)
    if why:
        raise ValueError(f"conv2d variant 'shfl' does not apply: {why}")
    bx, by = _block("shfl", block, _BLOCKS_SHFL, (128, 1))
    from sigconv import _kernels

    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    mod = _kernels.module(_SRC, dict(SHFL_KH=kH, SHFL_KW=kW, SHFL_PX=int(pad[1]), SHFL_ROWS=SHFL_ROWS))
    f, y, b, hb, vec_in, vec_out = _single_channel_setup(mod, "conv2d_shfl", "c_taps_shfl", x, w, bias, out, Ho,
                                                         Wo)
    f(strip_grid(N, Ho, Wo, (bx, by), rows=SHFL_ROWS), (bx, by, 1),
      (x, y) + _i32(N, H, W, pad[0], Ho, Wo) + (b,) + _i32(hb, vec_in, vec_out))
    return y


def separable_factors(w):
    """(u, v) with w[co, ci] ~= outer(u[co, ci], v[co, ci]) for every pair, or the reason it is not rank-1.

    Returns ``(u, v, None)`` (numpy float64 arrays of shape (Cout, Cin, kH) and (Cout, Cin, kW)) when every
    (co, ci) kernel has s[1] <= SEP_RTOL * s[0], else ``(None, None, reason)``.
    """
    wn = np.asarray(w.get() if hasattr(w, "get") else w, dtype=np.float64)
    Cout, Cin, kH, kW = wn.shape
    U, s, Vt = np.linalg.svd(wn, full_matrices=False)  # batched over (co, ci)
    s0 = s[..., 0]
    s1 = s[..., 1] if s.shape[-1] > 1 else np.zeros_like(s0)
    bad = s1 > SEP_RTOL * s0
    if np.any(bad):
        co, ci = (int(v) for v in np.argwhere(bad)[0])
        ratio = s1[co, ci] / s0[co, ci] if s0[co, ci] else np.inf
        return None, None, (f"the kernel is not rank-1 (separable): pair (co={co}, ci={ci}) has singular values "
                            f"s1/s0 = {ratio:.3g} > {SEP_RTOL:g}")
    root = np.sqrt(s0)
    u = U[..., :, 0] * root[..., None]
    v = Vt[..., 0, :] * root[..., None]
    return u, v, None


def launch_separable(x, w, bias, stride, pad, out_hw, block=None, out=None, factors=None):
    """Rank-1 kernels: a row pass into scratch, then a column pass (float32/float64)."""
    _dtype_check("separable", x)
    _taps_check("separable", w)
    bx, by = _block("separable", block, _BLOCKS_GENERIC, (32, 8))
    import cupy

    if factors is None:
        u, v, why = separable_factors(w)
        if why:
            raise ValueError(f"conv2d variant 'separable' does not apply: {why}")
    else:
        u, v = factors
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    sy, sx = stride
    ud = cupy.asarray(u, dtype=x.dtype)
    vd = cupy.asarray(v, dtype=x.dtype)
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    Hn = (Ho - 1) * sy + kH  # rows the column pass reads
    per_plane = Cin * Hn * Wo * x.dtype.itemsize  # scratch per (n, co) plane
    chunk = max(1, min(N * Cout, SEP_SCRATCH // max(per_plane, 1)))
    tmp = cupy.empty((chunk * Cin * Hn * Wo,), dtype=x.dtype)
    frows = _generic("conv2d_sep_rows", x.dtype)
    fcols = _generic("conv2d_sep_cols", x.dtype)
    for z0 in range(0, N * Cout, chunk):
        nz = min(chunk, N * Cout - z0)
        frows((math.ceil(Wo / bx), math.ceil(Hn / by), _grid_z(nz * Cin)), (bx, by, 1),
              (x, vd, tmp) + _i32(z0, nz, Cin, H, W, Cout, kW, sx, pad[0], pad[1], Hn, Wo))
        fcols((math.ceil(Wo / bx), math.ceil(Ho / by), _grid_z(nz)), (bx, by, 1),
              (tmp, ud, b, y) + _i32(z0, nz, Cin, Cout, kH, sy, Hn, Ho, Wo, hb))
    return y


_LAUNCHERS = {"naive": launch_naive, "shared": launch_shared, "regblock": launch_regblock,
              "prefetch": launch_prefetch, "strip": launch_strip, "shfl": launch_shfl,
              "separable": launch_separable}


# ------------------------------------------------------------------------------------------- auto


def _candidates(x, w, stride, separable: bool) -> list:
    """(variant, block) pairs that apply, heuristic favourite first."""
    f32 = x.dtype.name == "float32"
    kH, kW = w.shape[2], w.shape[3]
    cands = []
    strip = strip_applies(x, w, stride) is None
    if separable and (not strip or kH * kW >= 81):
        cands += [("separable", (32, 8)), ("separable", (32, 4))]
    if strip:
        cands += [("strip", b) for b in ((64, 1), (128, 1), (32, 4), (256, 1))]
    if separable and strip and kH * kW < 81:
        cands += [("separable", (32, 8))]
    if f32:
        small_cout = w.shape[0] <= 8
        pre = [("prefetch", b) for b in ((8, 4), (16, 4), (8, 8), (16, 8))]
        reg = [("regblock", b) for b in ((16, 8), (32, 4), (16, 16), (32, 8))]
        cands += pre + reg if small_cout else reg + pre
    cands += [("shared", (32, 8)), ("naive", (32, 8))]
    seen, out = set(), []
    for c in cands:
        if c not in seen:
            seen.add(c)
            out.append(c)
    return out


def _bucket(n: int) -> int:
    """Power-of-two size class."""
    return 1 << max(0, int(n) - 1).bit_length()


def _shape_key(x, w, stride, pad, out_hw, separable: bool) -> tuple:
    N, Cin, H, W = x.shape
    Cout, _, kH, kW = w.shape
    return (x.dtype.name, _bucket(N), int(Cin), int(Cout), int(kH), int(kW), int(stride[0]), int(stride[1]),
            int(pad[1]) % 4, _bucket(out_hw[0]), _bucket(out_hw[1]), int(W % 4 == 0), bool(separable))


def separable_worth_checking(w_shape) -> bool:
    """Separability can only win with one channel in and out and a kernel of 5x5 or more."""
    _, _, kH, kW = w_shape
    return w_shape[0] == 1 and w_shape[1] == 1 and min(kH, kW) > 1 and kH * kW >= 25


def _auto(x, w, bias, stride, pad, out_hw, separable=None):
    """(variant, block) for this job: autotuned per shape class, else the heuristic favourite.

    ``separable`` is the caller's knowledge of whether ``w`` is rank-1 (the public API checks weights that
    arrive in host memory, where that costs no device sync). When it is None the weights are on the device
    and are not checked: copying them to the host would stall the GPU queue on every call (measured:
    0.38 ms instead of 0.23 ms for a 5x5 kernel on a 1025 x 65536 spectrogram); pass
    ``variant="separable"`` to use the separable path on device weights.
    """
    sep = bool(separable) and separable_worth_checking(w.shape)
    cands = _candidates(x, w, stride, sep)
    try:
        from sigconv.registry import tune as _autotune
    except ImportError:
        return cands[0]
    scratch = []

    def runner(variant, block):
        if not scratch:
            scratch.append(_out(None, (x.shape[0], w.shape[0]) + tuple(out_hw), x.dtype))
        _LAUNCHERS[variant](x, w, bias, stride, pad, out_hw, block=block, out=scratch[0])

    return _autotune.pick("conv2d", _shape_key(x, w, stride, pad, out_hw, sep), cands, runner, sources=(_SRC,))


def corr2d(x, w, bias, stride, pad, out_hw, *, variant="auto", block=None, out=None, separable=None, factors=None):
    """The 2-D contract (see ``sigconv.backends``) on cupy arrays; ``variant`` from :data:`VARIANTS` or auto.

    ``separable``/``factors``: what the caller knows from a host copy of ``w`` (whether it is rank-1, and
    its :func:`separable_factors` (u, v)); the separable launcher then does not read ``w`` back."""
    import cupy

    stride = (int(stride[0]), int(stride[1]))
    pad = (int(pad[0]), int(pad[1]))
    x = cupy.ascontiguousarray(x)
    w = cupy.ascontiguousarray(w, dtype=x.dtype)
    if bias is not None:
        bias = cupy.ascontiguousarray(bias, dtype=x.dtype)
    if variant == "auto":
        variant, auto_block = _auto(x, w, bias, stride, pad, out_hw, separable)
        if block is None:
            block = auto_block
        elif variant in _LAUNCHERS:  # a user block the tuned variant refuses: fall back to its default
            try:
                _block(variant, block, _accepted(variant), None)
            except ValueError:
                block = auto_block
    fn = _LAUNCHERS.get(variant)
    if fn is None:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, auto for conv2d on the cuda backend, "
                         f"got {variant!r}")
    if variant == "separable" and factors is not None:
        return fn(x, w, bias, stride, pad, out_hw, block=block, out=out, factors=factors)
    return fn(x, w, bias, stride, pad, out_hw, block=block, out=out)


def _accepted(variant: str):
    return {"naive": _BLOCKS_GENERIC, "shared": _BLOCKS_GENERIC, "regblock": _BLOCKS_TILED,
            "prefetch": _BLOCKS_PREFETCH, "strip": _BLOCKS_STRIP, "shfl": _BLOCKS_SHFL,
            "separable": _BLOCKS_GENERIC}[variant]


# ------------------------------------------------------------------------------------------- tune


def tune_shapes() -> list:
    """Zero-arg callables, each tuning one common shape class (used by ``sigconv tune``)."""

    def job(N, Cin, H, W, Cout, k, pad, seed=0):
        def run():
            import cupy

            rng = cupy.random.default_rng(seed)
            x = rng.standard_normal((N, Cin, H, W), dtype=cupy.float32)
            w = rng.standard_normal((Cout, Cin, k, k), dtype=cupy.float32)
            Ho, Wo = H + 2 * pad - k + 1, W + 2 * pad - k + 1
            corr2d(x, w, None, (1, 1), (pad, pad), (Ho, Wo))
            cupy.cuda.get_current_stream().synchronize()

        run.__name__ = f"conv2d_{N}x{Cin}x{H}x{W}_cout{Cout}_k{k}_pad{pad}"
        return run

    jobs = [job(1, 1, 1025, 65536, 1, k, k // 2) for k in (3, 5, 9, 15)]
    jobs += [job(1, 1, 257, 16384, 1, k, k // 2) for k in (3, 5, 9, 15)]
    jobs += [job(1, 6, 768, 512, 6, 6, 0), job(16, 256, 128, 128, 256, 3, 1)]
    return jobs
