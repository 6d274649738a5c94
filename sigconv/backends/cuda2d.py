"""CUDA 2-D backend: sigconv's own NCHW kernels (``kernels/conv2d.cu``) behind the ``corr2d`` contract.

Variants (``sigconv.variants("conv2d")``, registered at the bottom): ``naive``, ``shared``, ``regblock``,
``prefetch``, ``strip`` and ``shfl`` (single-channel fast paths), ``separable`` (rank-1 kernels), ``igemm``
(multi-channel layers as an implicit GEMM) and ``igemm_tf32`` (the same on TF32 tensor cores).
``variant="auto"`` asks :func:`sigconv.registry.auto.choose_conv2d` (:func:`resolve_auto`); ``shfl`` is not
among its candidates until it has been timed on a GPU, and ``igemm_tf32`` (lower precision) never is. Every launcher has the signature
``launch_NAME(x, w, bias, stride, pad, out_hw, block=None, out=None)`` on C-contiguous cupy arrays; it owns
its grid maths and refuses (``ValueError``) what its registry entry says it cannot run.

Boundaries (SciPy's ``boundary``/``fillvalue``, single-channel jobs): every variant reads the extended image in its
own loads, no second pass (regblock, prefetch, strip and shfl compile the boundary in; naive and shared take it as
an argument; separable reads it in its row pass). On request (``extend=True``) a variant instead reads a copy of
the extended image (:func:`launch_extend`) with zero padding.
uint64 arrays (exact integer convolution mod 2^64) run on ``naive`` only, chosen here, never by the chooser.
Nothing here imports CuPy at module level.
"""

from __future__ import annotations

import functools
import math
from typing import Mapping

import numpy as np

from sigconv import _kernels
from sigconv.registry import auto as _auto
from sigconv.registry.table import Conv2dJob, Variant, dtype_name, get as _get_variant, register

__all__ = ["corr2d", "resolve_auto", "launch_naive", "launch_shared", "launch_regblock", "launch_prefetch",
           "launch_strip", "launch_shfl", "launch_separable", "launch_igemm", "launch_igemm_tf32", "igemm_plan",
           "igemm_layout", "igemm_weights", "igemm_grid", "igemm_table", "igemm_refusal", "launch_extend",
           "extend_grid",
           "separable_factors", "strip_applies", "shfl_applies", "prebuilt_modules", "VARIANTS", "BOUNDARIES",
           "EXACT_DTYPE"]

_SRC = "conv2d.cu"
_LIMITS = _kernels.constants()
MAX_TAPS = 31

# The (bx, by) launch blocks the benchmark and the autotuner try per variant; each variant accepts any block of a
# multiple of 32 threads up to 1024 (Variant.block_refusal), the tiled kernels with bx % 4 == 0 (aligned input tiles).
_BLOCKS_GENERIC = ((8, 4), (8, 8), (16, 4), (16, 8), (16, 16), (32, 4), (32, 8), (32, 16))
_BLOCKS_TILED = ((8, 4), (8, 8), (16, 4), (16, 8), (16, 16), (32, 4), (32, 8))
_BLOCKS_PREFETCH = ((8, 4), (8, 8), (16, 4), (16, 8))
_BLOCKS_STRIP = ((32, 1), (64, 1), (128, 1), (256, 1), (32, 4), (64, 4), (32, 8))
_BLOCKS_SHFL = ((32, 1), (64, 1), (128, 1), (256, 1), (32, 4), (64, 4), (32, 8))
_BLOCKS_IGEMM = ((16, 16), (16, 8), (32, 8), (8, 16), (32, 4), (16, 32))
_BLOCKS_IGEMM_TF32 = ((32, 8), (32, 4), (32, 2), (32, 16))
# What bx must be a multiple of: 4 for the tiled kernels; 32 for shfl, so that a warp is one row of threads (its
# shuffles and its exit are uniform)
_STEP_TILED = dict(block_step=4, block_step_reason="16-byte tile loads")
_STEP_SHFL = dict(block_step=32, block_step_reason="a warp is one row of threads")

#: Largest kernel side the strip fast path compiles (register ring of KH x 4 accumulators).
STRIP_MAX = 15
#: Output rows per strip / shfl thread (kernels/limits.cuh).
STRIP_ROWS = _LIMITS["SIGCONV_STRIP_ROWS"]
#: strip keeps the accumulators of kernels up to this tall, with up to this many taps, in a ring (:func:`strip_ring`).
STRIP_RING_MAX_KH = _LIMITS["SIGCONV_STRIP_RING_MAX_KH"]
STRIP_RING_MAX_TAPS = _LIMITS["SIGCONV_STRIP_RING_MAX_TAPS"]
SHFL_ROWS = _LIMITS["SIGCONV_SHFL_ROWS"]
#: The widest halo (columns each side) the shfl kernel takes from a neighbour lane (kernels/limits.cuh).
SHFL_HALO = _LIMITS["SIGCONV_SHFL_MAX_HALO"]
#: Scratch budget of the separable row pass (bytes); larger jobs run in chunks of planes.
SEP_SCRATCH = 512 << 20

VARIANTS = ("naive", "shared", "regblock", "prefetch", "strip", "shfl", "separable", "igemm", "igemm_tf32")

_CODES = _kernels.constants("conv2d_common.cuh")
#: Boundary rule name -> its code in kernels/conv2d_common.cuh (SIGCONV_BOUNDARY_*).
BOUNDARIES = {b: _CODES[f"SIGCONV_BOUNDARY_{b.upper()}"] for b in ("fill", "wrap", "symm")}
#: Fused kernel -> the C2D_PART define of its builds (kernels/conv2d_common.cuh): each build compiles that kernel
#: alone (NVRTC: under 1 s against about 5 s for the whole file).
_PARTS = {k: _CODES[f"SIGCONV_C2D_PART_{p}"] for k, p in (("conv2d_tiled", "TILED"), ("conv2d_strip", "STRIP"),
                                                            ("conv2d_shfl", "SHFL"))}
#: Launch block of the extension (threads along the columns, along the rows).
EXTEND_BLOCK = (32, 8)
#: The dtype of exact integer convolution (two's-complement values reinterpreted; sums wrap mod 2^64); the
#: variants that have a kernel for it.
EXACT_DTYPE = "uint64"
EXACT_VARIANTS = ("naive",)
_U64 = np.dtype(EXACT_DTYPE)  # (dtype comparisons: cheaper than .name on the launch path)

#: (u, v, None) rank-1 factors of host weights, or (None, None, reason): the chooser's test.
separable_factors = _auto.rank1_factors


# ------------------------------------------------------------------------------------------ helpers


def _job(x, w, stride, pad, out_hw, rank1=None, dtype=None, border="zero") -> Conv2dJob:
    return Conv2dJob(tuple(map(int, x.shape)), tuple(map(int, w.shape)),
                     dtype_name(x.dtype if dtype is None else dtype), tuple(map(int, stride)), tuple(map(int, pad)),
                     tuple(map(int, out_hw)), rank1, border)


def _border(boundary: str, fillvalue) -> str:
    """What a call reads beyond the image (:data:`sigconv.registry.table.BORDERS`)."""
    return ("fill" if fillvalue != 0 else "zero") if boundary == "fill" else boundary


def _checked(name: str, x, w, stride, pad, out_hw, block) -> tuple:
    """The launch block of variant ``name`` (its default for None); ``ValueError`` when the block is not one it
    accepts or its registry entry says it does not apply to this job."""
    v = _get_variant("conv2d", "cuda", name)
    b = v.launch_block(block)
    # uint64 is no registry dtype (the registry lists floating ones): its kernels have float64's constraints
    exact = x.dtype == _U64 and name in EXACT_VARIANTS
    why = v.applies(_job(x, w, stride, pad, out_hw, dtype="float64" if exact else None))
    if why:
        raise ValueError(f"conv2d variant {name!r} does not apply: {why}")
    return b


def strip_applies(x, w, stride) -> str | None:
    """``None`` when the strip fast path can run this job, else why not (one line)."""
    return _get_variant("conv2d", "cuda", "strip").applies(_job(x, w, stride, (0, 0), (1, 1)))


def shfl_applies(x, w, stride, pad) -> str | None:
    """``None`` when the shfl kernel can run this job, else why not (one line)."""
    return _get_variant("conv2d", "cuda", "shfl").applies(_job(x, w, stride, pad, (1, 1)))


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


@functools.lru_cache(maxsize=1024)
def _i32(*vals):
    """``vals`` as the kernels' int arguments (memoised: a launch's integer arguments repeat from call to call)."""
    return tuple(np.int32(v) for v in vals)


def _aligned(a) -> bool:
    return a.data.ptr % 16 == 0


def _check_boundary(boundary: str) -> None:
    if boundary not in BOUNDARIES:
        raise ValueError(f"boundary must be one of {', '.join(BOUNDARIES)}; got {boundary!r}")


def _require_image(boundary: str, x) -> None:
    """Refuse an empty image where ``boundary`` has to read it (wrap and symm repeat its samples)."""
    H, W = int(x.shape[2]), int(x.shape[3])
    if H * W == 0:
        raise ValueError(f"boundary {boundary!r} needs a non-empty image; got {H}x{W}")


def strip_ring(kH: int, kW: int) -> bool:
    """Whether strip's build for a kH x kW kernel keeps its accumulators in a ring (kernels/conv2d_strip.cuh), else
    rotates them. Its wrap/symm builds are held to the fill build's occupancy only with the ring: the rotating
    builds spill under that cap (15x15: 104 registers against 128)."""
    return int(kH) <= STRIP_RING_MAX_KH and int(kH) * int(kW) <= STRIP_RING_MAX_TAPS


#: Registers are allocated to a warp in units of 256, 8 per thread (sm_70 and later): counts that round up to the
#: same multiple of 8 give the same occupancy.
_REG_UNIT = 8


def occupancy_regs(regs: int) -> int:
    """The most registers per thread a build may use and keep the occupancy of a build that uses ``regs``."""
    return min(255, -(-int(regs) // _REG_UNIT) * _REG_UNIT)


@functools.lru_cache(maxsize=128)
def _reg_cap(device: int, kernel: str, defines: tuple) -> tuple:
    """NVRTC options holding a build to the occupancy of ``kernel``'s zero-fill build (memoised per device)."""
    regs = _kernels.module(_SRC, dict(defines)).get_function(kernel).num_regs
    return (f"--maxrregcount={occupancy_regs(regs)}",)


#: 32-bit registers of a multiprocessor, the most one block may hold (every architecture since sm_50).
_BLOCK_REGS = 65536
#: Threads of a block that any build can launch: 255 registers (the most a thread has) x 256 fit in _BLOCK_REGS.
_ANY_BUILD_THREADS = 256


def block_reg_cap(threads: int) -> int:
    """The most registers per thread with which a block of ``threads`` threads launches (allocated per warp, in
    units of 8 per thread): 64 for 1024 or 992, 224 for 288."""
    warps = -(-int(threads) // 32)
    return min(255, _BLOCK_REGS // (warps * 32) // _REG_UNIT * _REG_UNIT)


@functools.lru_cache(maxsize=256)
def _module_for_threads(device: int, kernel: str, defines: tuple, boundary: str, threads: int):
    """:func:`_fused`'s module for a block of ``threads`` threads (more than :data:`_ANY_BUILD_THREADS`): its usual
    build where that launches so many, else the build held to :func:`block_reg_cap` registers (strip and shfl carry
    no launch bounds: strip's 15x15 build takes 104-128 registers, and a block of 992 threads may have 64; spills
    then cost time, the block is the caller's choice). Memoised per device."""
    d = dict(defines)
    if boundary == "fill":
        mod = _kernels.module(_SRC, d)
    else:
        mod = _boundary_module(device, kernel, defines, boundary)
        d["C2D_BOUNDARY"] = BOUNDARIES[boundary]
    if mod.get_function(kernel).max_threads_per_block >= threads:
        return mod
    mod = _kernels.module(_SRC, d, options=(f"--maxrregcount={block_reg_cap(threads)}",))
    most = mod.get_function(kernel).max_threads_per_block
    if most < threads:  # pragma: no cover (the cap leaves registers for every thread)
        raise ValueError(f"{kernel} launches at most {most} threads per block on this GPU; got {threads}")
    return mod


def _fused(kernel: str, defines: dict, boundary: str, fillvalue, x, threads: int = 0) -> tuple:
    """(the compiled module, the fill argument) of a fused launcher's ``kernel`` for ``boundary``.

    fill (any constant) runs the zero-fill build. A wrap or symm build is compiled to the occupancy of the
    zero-fill build (:func:`_reg_cap`): its extra code would otherwise set the register count, and so the
    occupancy, of every thread (on an H200 the cap took shfl's spectrogram 5x5 from 1.27 to 1.05 x the fill time,
    strip's 9x9 and 7x7 from 1.10 to 0.93-0.98 x); strip's builds that rotate their accumulators
    (:func:`strip_ring`) are not capped. conv2d_tiled's wrap/symm builds carry no ``__launch_bounds__``, whose
    register limit ptxas would take over the cap. A block of more than 256 ``threads`` gets a build that launches
    it (:func:`_module_for_threads`)."""
    _check_boundary(boundary)
    if boundary != "fill":
        _require_image(boundary, x)
    defines = {**defines, "C2D_PART": _PARTS[kernel]}
    if boundary == "fill" and threads <= _ANY_BUILD_THREADS:
        return _kernels.module(_SRC, defines), np.float32(fillvalue)
    import cupy

    key = (cupy.cuda.Device().id, kernel, tuple(sorted(defines.items())), boundary)
    if threads <= _ANY_BUILD_THREADS:
        return _boundary_module(*key), np.float32(fillvalue)
    return _module_for_threads(*key, threads), np.float32(fillvalue)


@functools.lru_cache(maxsize=256)
def _boundary_module(device: int, kernel: str, defines: tuple, boundary: str):
    """:func:`_fused`'s wrap/symm build (memoised per device: a repeated call costs one lookup)."""
    d = dict(defines)
    rotating = kernel == "conv2d_strip" and not strip_ring(d["STRIP_KH"], d["STRIP_KW"])
    options = () if rotating else _reg_cap(device, kernel, defines)
    return _kernels.module(_SRC, {**d, "C2D_BOUNDARY": BOUNDARIES[boundary]}, options=options)


_CTYPES = {np.dtype(np.float32): "float", np.dtype(np.float64): "double", _U64: "unsigned long long"}
# naive and extend also for uint64; the other templates for the floating dtypes
_GENERIC_NAMES = (tuple(f"{k}<{t}>" for k in ("conv2d_naive", "conv2d_naive_ext", "conv2d_extend")
                        for t in _CTYPES.values())
                  + tuple(f"{k}<{t}>" for k in ("conv2d_shared", "conv2d_sep_rows", "conv2d_sep_rows_ext",
                                                "conv2d_sep_cols")
                          for t in ("float", "double")))


def _generic_spec() -> dict:
    return dict(name=_SRC, defines={"C2D_PART": _CODES["SIGCONV_C2D_PART_GENERIC"]}, name_expressions=_GENERIC_NAMES)


def prebuilt_modules() -> list[dict]:
    """:func:`sigconv._kernels.module`'s arguments of the modules here that ship pre-built (see
    ``sigconv.backends.prebuilt_modules``): the generic kernels (naive, shared, separable, extend), which the
    spectral gate's mask smoothing runs. The specialised builds (tiled, strip, shfl) compile on first use."""
    return [_generic_spec()]


def _generic(kernel: str, dtype):
    mod = _kernels.module(**_generic_spec())
    return mod.get_function(f"{kernel}<{_CTYPES[np.dtype(dtype)]}>")


def _set_smem(func, nbytes: int) -> None:
    """Allow more than 48 KB of dynamic shared memory for ``func``."""
    if nbytes <= 48 * 1024:
        return
    if func.max_dynamic_shared_size_bytes < nbytes:
        func.max_dynamic_shared_size_bytes = int(nbytes)


def _smem_limit() -> int:
    """The current device's opt-in shared memory per block (bytes)."""
    import cupy

    return _smem_limit_of(cupy.cuda.Device().id)


def _smem_limit_of(device: int) -> int:
    """From the device's memoised attributes (:func:`sigconv._kernels.device_attributes`)."""
    try:
        return int(_kernels.device_attributes(device)["MaxSharedMemoryPerBlockOptin"])
    except Exception:  # pragma: no cover
        return 48 * 1024


# ---------------------------------------------------------------------------------------- launchers


def _boundary_args(boundary: str, fillvalue, x) -> tuple:
    """(rule code, fill scalar of x's dtype) of the generic kernels' boundary arguments (naive, shared)."""
    _check_boundary(boundary)
    if boundary != "fill":
        _require_image(boundary, x)
    return _BOUNDARY_ARG[boundary], _fill_scalar(fillvalue, x.dtype)


def launch_naive(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """One thread per output element (float32/float64; uint64: exact, sums wrap mod 2^64); ``boundary``/
    ``fillvalue``: the extension of x (:data:`BOUNDARIES`), read by the taps that fall outside the image."""
    bx, by = _checked("naive", x, w, stride, pad, out_hw, block)
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    code, fill = _boundary_args(boundary, fillvalue, x)
    # the fill constant (zero padding included) and the rules wrap/symm in kernels of their own
    f, last = (_generic("conv2d_naive", x.dtype), (fill,)) if boundary == "fill" else \
        (_generic("conv2d_naive_ext", x.dtype), _i32(code))
    f(generic_grid(N * Cout, Ho, Wo, (bx, by)), (bx, by, 1),
      (x, w, b, y) + _i32(N, Cin, H, W, Cout, kH, kW, stride[0], stride[1], pad[0], pad[1], Ho, Wo, hb) + last)
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


def launch_shared(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """Input tile + halo per input channel in shared memory (float32/float64); boundaries as :func:`launch_naive`
    (the tile loads read the extended image)."""
    bx, by = _checked("shared", x, w, stride, pad, out_hw, block)
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    sy, sx = stride
    pitch, smem = shared_geometry((bx, by), kH, kW, stride, x.dtype.itemsize)
    why = smem_refusal("shared", (bx, by), (kH, kW), smem, _smem_limit())
    if why:
        raise ValueError(why)
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    f = _generic("conv2d_shared", x.dtype)
    _set_smem(f, smem)
    f(generic_grid(N * Cout, Ho, Wo, (bx, by)), (bx, by, 1),
      (x, w, b, y) + _i32(N, Cin, H, W, Cout, kH, kW, sy, sx, pad[0], pad[1], Ho, Wo, hb, pitch)
      + _boundary_args(boundary, fillvalue, x), shared_mem=smem)
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


def smem_refusal(name: str, block, kernel, need: int, limit: int) -> str | None:
    """``None`` when a launch of variant ``name`` that needs ``need`` bytes of shared memory fits in ``limit``, else
    why not (one line): a wide explicit block of a large kernel (prefetch 1024x1 with 31x31 needs two tiles of 31
    rows of 1056 floats; shared 1024x1 with 31x31 in float64 one of 261 KB)."""
    if need <= limit:
        return None
    bx, by = block
    return (f"conv2d variant {name!r}: block {bx}x{by} needs {need} bytes of shared memory for a "
            f"{kernel[0]}x{kernel[1]} kernel, more than this GPU's {limit}; use fewer columns per block (an integer "
            f"block of {bx * by} threads lays them out {_get_variant('conv2d', 'cuda', name).block_layout_words()})")


def tiled_grid(plan: dict, N: int, Cout: int, Ho: int, Wo: int) -> tuple:
    """Launch grid of conv2d_tiled for :func:`tiled_plan`'s ``plan``: output tiles along x and y, planes of
    (image, group of COB output channels) along z (capped; the kernel loops over the rest)."""
    oh, ow = plan["tile"]
    cob = plan["defines"]["COB"]
    return (math.ceil(Wo / ow), math.ceil(Ho / oh), _grid_z(N * math.ceil(Cout / cob)))


def _launch_tiled(name, x, w, bias, stride, pad, out_hw, block, out, prefetch, boundary, fillvalue):
    blk = _checked(name, x, w, stride, pad, out_hw, block)
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    limit = _smem_limit()
    plan = tiled_plan(blk, kH, kW, stride, pad[1], Cout, prefetch, min(200 * 1024, limit))
    why = smem_refusal(name, blk, (kH, kW), plan["smem"], limit)
    if why:
        raise ValueError(why)
    mod, fill = _fused("conv2d_tiled", plan["defines"], boundary, fillvalue, x, blk[0] * blk[1])
    f = mod.get_function("conv2d_tiled")
    _set_smem(f, plan["smem"])
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    vec_in = int(W % 4 == 0 and _aligned(x))
    vec_out = int(Wo % 4 == 0 and _aligned(y))
    f(tiled_grid(plan, N, Cout, Ho, Wo), blk + (1,),
      (x, w, b, y) + _i32(N, Cin, H, W, Cout, pad[0], pad[1], Ho, Wo, hb, vec_in, vec_out) + (fill,),
      shared_mem=plan["smem"])
    return y


def launch_regblock(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """Register-blocked tiles with 16-byte loads (float32); ``boundary``/``fillvalue``: the extension of x
    (:data:`BOUNDARIES`), compiled into the tile loads."""
    return _launch_tiled("regblock", x, w, bias, stride, pad, out_hw, block, out, False, boundary, fillvalue)


def launch_prefetch(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """Article B's one-warp blocks with a double-buffered prefetch of the next channel (float32); boundaries as
    :func:`launch_regblock`."""
    return _launch_tiled("prefetch", x, w, bias, stride, pad, out_hw, block, out, True, boundary, fillvalue)


#: Relative error (||y - ref|| / ||ref||) igemm_tf32 is checked to: its inputs are rounded to 10 mantissa bits (relative
#: error up to 2^-11 each), so a correct result lands near 5e-4 where float32 kernels land near 1e-7.
TF32_TOL = 2e-3
#: Largest int32 value: the igemm kernel keeps Cin*kH*kW, Ho*Wo and its block count in int.
_INT_MAX = (1 << 31) - 1


#: k rows per step of the implicit GEMM (IG_BK, kernels/conv2d_igemm.cuh).
IGEMM_BK = 16
#: igemm runs four pipeline stages where they take at most this much shared memory (two blocks of them then fit in a
#: multiprocessor's 228 KB), else three, else two: on an H200, article A's layer at 16x16 took 7.00 ms with four stages
#: against 7.11 with three (benchmarks/results/H200-2026-12-03-igemm).
IGEMM_FOUR_STAGES_MAX = 100 * 1024


def igemm_plan(block, kH: int, kW: int, stride, tf32: bool, limit: int = 200 * 1024) -> dict:
    """#defines, shared-memory size, output tile and launch block of the implicit-GEMM kernel (mirrors
    kernels/conv2d_igemm.cuh).

    igemm lays the (bx, by) block out as it is: thread (tx, ty) computes TM x TN outputs (8 x 8 up to 256 threads,
    8 x 4 up to 512, 4 x 4 above, so that the accumulators fit in a large block's share of the registers), the tile
    is TM*by output channels by TN*bx pixels. A block of another shape (bx below 8 or above 64, or one row: a tile of
    many channels by a few pixels or the reverse, whose copies take more registers per thread than a block of many
    threads has), and any block of more than 512 threads, is laid out 16 x n/16; above 512 threads a step takes 8 rows
    of k instead of 16, which keeps the kernel within the 64 registers a thread of 1024 has.

    igemm_tf32 takes the block's bx*by threads as warps in a grid of 2 x n/2 (4 x 2 for 8 warps, 1 x n when the count
    is odd), each warp owning 4 x 4 fragments of 16 x 8 outputs (4 x 2 above 8 warps, 2 x 2 above 16).

    Four stages of shared memory where they fit in :data:`IGEMM_FOUR_STAGES_MAX` and ``limit``, else three, else two.
    """
    bx, by = (int(v) for v in block)
    nt = bx * by
    sy, sx = (int(v) for v in stride)
    d = dict(KH=int(kH), KW=int(kW), SY=sy, SX=sx, C2D_PART=_CODES["SIGCONV_C2D_PART_IGEMM"])
    if tf32:
        nw = nt // 32
        mt, nt8 = (4, 4) if nw <= 8 else (4, 2) if nw <= 16 else (2, 2)
        wm = 4 if nw == 8 else 2 if nw % 2 == 0 else 1
        d.update(BX=nt, BY=1, IG_TF32=1, IG_WARPS_M=wm, IG_WARPS_N=nw // wm, IG_MT=mt, IG_NT8=nt8)
        launch = (nt, 1, 1)
    else:
        tm, tn = (8, 8) if nt <= 256 else (8, 4) if nt <= 512 else (4, 4)
        d.update(BX=bx, BY=by, IG_TM=tm, IG_TN=tn)
        launch = (bx, by, 1)
    if nt > 512:
        d["IG_BK"] = IGEMM_BK // 2
    lay = igemm_layout(d)
    stage = lay["stage"]
    keep = tf32 or (8 <= bx <= 64 and by >= 2 and nt <= 512)
    if (2 * stage > limit or not keep) and (bx, by) != (16, nt // 16):
        return igemm_plan((16, nt // 16), kH, kW, stride, tf32, limit)
    stages = 4 if 4 * stage <= min(IGEMM_FOUR_STAGES_MAX, limit) else 3 if 3 * stage <= limit else 2
    d["IG_STAGES"] = stages
    return dict(defines=d, smem=stages * stage, tile=lay["tile"], launch=launch)


def igemm_layout(defines: Mapping) -> dict:
    """The output tile (bm channels, bn pixels), rows of k per step (bk) and bytes of shared memory per pipeline stage
    (an A tile of bk x bm and a B tile of bk x bn, each row padded as kernels/conv2d_igemm.cuh pads it) of the
    implicit GEMM's build for ``defines`` (:func:`igemm_plan`'s, or a benchmark's variations of them: the thread tile
    IG_TM x IG_TN on a BX x BY block; on tensor cores IG_WARPS_M x IG_WARPS_N warps of IG_MT x IG_NT8 fragments)."""
    bk = int(defines.get("IG_BK", IGEMM_BK))
    if defines.get("IG_TF32"):
        bm = 16 * int(defines["IG_MT"]) * int(defines["IG_WARPS_M"])
        bn = 8 * int(defines["IG_NT8"]) * int(defines["IG_WARPS_N"])
        apitch, bpitch = bm + 8, (bn + 8 if bn % 16 == 0 else bn)
    else:
        bm, bn = int(defines["IG_TM"]) * int(defines["BY"]), int(defines["IG_TN"]) * int(defines["BX"])
        apitch, bpitch = bm + 4, bn
    return dict(tile=(bm, bn), bk=bk, stage=bk * (apitch + bpitch) * 4)


def igemm_weights(mod, w, bk: int):
    """The weights (Cout, Cin, kH, kW) as the implicit GEMM's B operand, on the current stream: (Cin kH kW rounded up
    to a multiple of ``bk``) x (Cout rounded up to a multiple of 4), zero-padded, by ``mod``'s conv2d_igemm_wt (one
    launch); returns (that array, its padded Cout)."""
    import cupy

    Cout, ktot = int(w.shape[0]), int(w.shape[1] * w.shape[2] * w.shape[3])
    coutp, ktp = -(-Cout // 4) * 4, -(-ktot // bk) * bk
    wt = cupy.empty((ktp, coutp), dtype=cupy.float32)
    mod.get_function("conv2d_igemm_wt")((min(-(-wt.size // 256), 4096),), (256,),
                                        (w, wt) + _i32(Cout, ktot, coutp, ktp))
    return wt, coutp


def igemm_grid(plan: dict, N: int, Cout: int, Ho: int, Wo: int) -> tuple:
    """One-dimensional grid of conv2d_igemm: the channel tiles of each run of pixels adjacent (they read the same
    input), ``ValueError`` when the job has more than 2^31 - 1 tiles."""
    bm, bn = plan["tile"]
    blocks = math.ceil(Cout / bm) * math.ceil(N * Ho * Wo / bn)
    if blocks > _INT_MAX:
        raise ValueError(f"conv2d variant igemm: {blocks} output tiles, more than one launch takes (2^31 - 1)")
    return (blocks, 1, 1)


#: Kernels of at most this many taps test a tap's place in the image by a per-pixel bit mask (IG_MASK).
IGEMM_MASK_TAPS = 31


def igemm_masked(kH: int, kW: int, boundary: str) -> bool:
    """Whether the igemm build for this kernel and boundary tests taps by the pixel's bit mask (IG_MASK)."""
    return int(kH) * int(kW) <= IGEMM_MASK_TAPS and boundary == "fill"


def igemm_table(Cin: int, H: int, W: int, kH: int, kW: int, masked: bool = False) -> np.ndarray:
    """The gather's table (kernels/conv2d_igemm.cuh, ig_issue), int32 pairs: row k = (ci*kH + i)*kW + j holds
    (ci*H*W + i*W + j, i << 16 | j); ``masked`` (IG_MASK builds): (ci*H*W + i*W + j, i*kW + j), padded to a multiple of
    16 rows with (0, 31)."""
    ktot = Cin * kH * kW
    k = np.arange(ktot, dtype=np.int64)
    ci, r = np.divmod(k, kH * kW)
    i, j = np.divmod(r, kW)
    if not masked:
        return np.stack([ci * H * W + i * W + j, (i << 16) | j], axis=1).astype(np.int32)
    tab = np.zeros((-(-ktot // IGEMM_BK) * IGEMM_BK, 2), np.int32)
    tab[:, 1] = IGEMM_MASK_TAPS
    tab[:ktot, 0] = ci * H * W + i * W + j
    tab[:ktot, 1] = r
    return tab


@functools.lru_cache(maxsize=64)
def _igemm_table_on(device: int, Cin: int, H: int, W: int, kH: int, kW: int, masked: bool):
    """:func:`igemm_table` on ``device``, built once per geometry (memoised: a layer called again finds it)."""
    import cupy

    return cupy.asarray(igemm_table(Cin, H, W, kH, kW, masked))


def igemm_refusal(job) -> str | None:
    """Why the implicit GEMM cannot run ``job`` (its kernel keeps offsets within an image, the taps per output and the
    outputs per plane in int32, and a tap's row and column in 16 bits each), or None."""
    N, Cin, H, W = job.x_shape
    kH, kW = job.w_shape[2], job.w_shape[3]
    Ho, Wo = job.out_hw
    if max(Cin * H * W, Cin * kH * kW, Ho * Wo) > _INT_MAX:
        return (f"it keeps Cin*H*W, Cin*kH*kW and Ho*Wo below 2^31 (got {Cin * H * W}, {Cin * kH * kW}, "
                f"{Ho * Wo})")
    if kH >= 1 << 15 or kW >= 1 << 16:
        return f"it takes kernels of fewer than 32768 rows and 65536 columns (got {kH}x{kW})"
    return None


@functools.lru_cache(maxsize=256)
def _igemm_module(device: int, defines: tuple):
    """The igemm build for ``defines`` (memoised per device): held to two blocks of 256 threads per multiprocessor
    (128 registers a thread) where that costs no spill, else (a few layouts, by a few bytes) the build without that
    bound, which spills nothing and runs one block of them."""
    mod = _kernels.module(_SRC, dict(defines))
    if mod.get_function("conv2d_igemm").local_size_bytes:
        mod = _kernels.module(_SRC, {**dict(defines), "IG_MINB": 1})
    return mod


def _launch_igemm(name, x, w, bias, stride, pad, out_hw, block, out, tf32, boundary, fillvalue):
    blk = _checked(name, x, w, stride, pad, out_hw, block)
    _check_boundary(boundary)
    if boundary != "fill":
        _require_image(boundary, x)
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    limit = _smem_limit()
    plan = igemm_plan(blk, kH, kW, stride, tf32, min(200 * 1024, limit))
    why = smem_refusal(name, blk, (kH, kW), plan["smem"], limit)
    if why:  # pragma: no cover (igemm_plan lays a block out to fit)
        raise ValueError(why)
    y = _out(out, (N, Cout, Ho, Wo), x.dtype)
    if y.size == 0:
        return y
    import cupy

    grid = igemm_grid(plan, N, Cout, Ho, Wo)
    defines = dict(plan["defines"])
    masked = igemm_masked(kH, kW, boundary)
    if masked:
        defines["IG_MASK"] = 1
    if boundary != "fill":
        defines["C2D_BOUNDARY"] = BOUNDARIES[boundary]
    elif fillvalue != 0:
        defines["IG_FILLC"] = 1
    mod = _igemm_module(cupy.cuda.Device().id, tuple(sorted(defines.items())))
    wt, coutp = igemm_weights(mod, w, igemm_layout(defines)["bk"])
    tab = _igemm_table_on(cupy.cuda.Device().id, Cin, H, W, kH, kW, masked)
    f = mod.get_function("conv2d_igemm")
    _set_smem(f, plan["smem"])
    b, hb = _bias_arg(bias, x)
    vec_out = int(Ho * Wo % 4 == 0 and _aligned(y))
    f(grid, plan["launch"], (x, wt, tab, b, y) + _i32(N, Cin, H, W, Cout, coutp, pad[0], pad[1], Ho, Wo, hb,
                                                      math.ceil(Cout / plan["tile"][0]), vec_out)
      + (np.float32(fillvalue),), shared_mem=plan["smem"])
    return y


def launch_igemm(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """Implicit GEMM on the CUDA cores (float32), for multi-channel layers; ``boundary``/``fillvalue`` as
    :func:`launch_regblock` (the gather reads the extension)."""
    return _launch_igemm("igemm", x, w, bias, stride, pad, out_hw, block, out, False, boundary, fillvalue)


def launch_igemm_tf32(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """Implicit GEMM on TF32 tensor cores (inputs rounded to 10 mantissa bits, float32 sums): opt-in, never chosen
    by ``auto``; boundaries as :func:`launch_igemm`."""
    return _launch_igemm("igemm_tf32", x, w, bias, stride, pad, out_hw, block, out, True, boundary, fillvalue)


def strip_grid(N: int, Ho: int, Wo: int, block, rows: int = STRIP_ROWS) -> tuple:
    """Launch grid of conv2d_strip: x over threads of 4 output columns, y over strips of ``rows`` output
    rows, z over the N planes (capped; the kernel loops over the rest)."""
    bx, by = block
    return (math.ceil(math.ceil(Wo / 4) / bx), math.ceil(math.ceil(Ho / rows) / by), _grid_z(N))


def launch_strip(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """Single-channel fast path: vertical strips streaming rows through registers (float32, Cin=Cout=1);
    boundaries as :func:`launch_regblock`."""
    bx, by = _checked("strip", x, w, stride, pad, out_hw, block)
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    mod, fill = _fused("conv2d_strip", dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-pad[1]) % 4, STRIP_ROWS=STRIP_ROWS),
                     boundary, fillvalue, x, bx * by)
    with _kernels.constant_memory(mod.get_global("c_taps")) as taps:
        f, y, b, hb, vec_in, vec_out = _single_channel_setup(mod, "conv2d_strip", taps, x, w, bias, out, Ho, Wo)
        f(strip_grid(N, Ho, Wo, (bx, by)), (bx, by, 1),
          (x, y) + _i32(N, H, W, pad[0], pad[1], Ho, Wo) + (b,) + _i32(hb, vec_in, vec_out) + (fill,))
    return y


def _single_channel_setup(mod, kernel: str, taps, x, w, bias, out, Ho: int, Wo: int):
    """For the strip and shfl launchers: the kernel, the taps copied into its __constant__ array ``taps`` on the
    current stream (ordered before the launch; both inside :func:`sigconv._kernels.constant_memory`), the output,
    the bias argument, and whether rows of x and y allow 16-byte loads and stores."""
    import cupy

    f = mod.get_function(kernel)
    wflat = cupy.ascontiguousarray(w.reshape(-1), dtype=cupy.float32)
    taps.copy_from_device_async(wflat.data, wflat.size * 4, cupy.cuda.get_current_stream())
    y = _out(out, (x.shape[0], 1, Ho, Wo), x.dtype)
    b, hb = _bias_arg(bias, x)
    vec_in = int(x.shape[3] % 4 == 0 and _aligned(x))
    vec_out = int(Wo % 4 == 0 and _aligned(y))
    return f, y, b, hb, vec_in, vec_out


def launch_shfl(x, w, bias, stride, pad, out_hw, block=None, out=None, boundary="fill", fillvalue=0.0):
    """Single-channel stencil: strip's row ring with one float4 load per row and the halo columns from the
    neighbouring lanes by warp shuffles (float32, Cin=Cout=1, stride 1); boundaries as :func:`launch_regblock`."""
    bx, by = _checked("shfl", x, w, stride, pad, out_hw, block)
    N, Cin, H, W, Cout, kH, kW, Ho, Wo = _dims(x, w, out_hw)
    mod, fill = _fused("conv2d_shfl", dict(SHFL_KH=kH, SHFL_KW=kW, SHFL_PX=int(pad[1]), SHFL_ROWS=SHFL_ROWS),
                     boundary, fillvalue, x, bx * by)
    with _kernels.constant_memory(mod.get_global("c_taps_shfl")) as taps:
        f, y, b, hb, vec_in, vec_out = _single_channel_setup(mod, "conv2d_shfl", taps, x, w, bias, out, Ho, Wo)
        f(strip_grid(N, Ho, Wo, (bx, by), rows=SHFL_ROWS), (bx, by, 1),
          (x, y) + _i32(N, H, W, pad[0], Ho, Wo) + (b,) + _i32(hb, vec_in, vec_out) + (fill,))
    return y


def launch_separable(x, w, bias, stride, pad, out_hw, block=None, out=None, factors=None, boundary="fill",
                     fillvalue=0.0):
    """Rank-1 kernels: a row pass into scratch, then a column pass (float32/float64). ``boundary``/``fillvalue``
    other than zero fill (one image, one channel, stride 1, no bias): the row pass reads the extended image
    (conv2d_sep_rows_ext)."""
    bx, by = _checked("separable", x, w, stride, pad, out_hw, block)
    import cupy

    _check_boundary(boundary)
    if boundary != "fill" or fillvalue != 0:
        why = _border_applies(x, w, bias, stride)
        if why:
            raise ValueError(f"boundary {boundary!r} with fillvalue {fillvalue!r} needs {why}")
        _require_image(boundary, x)

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
    if boundary != "fill" or fillvalue != 0:  # one plane: the row pass through the rule, the column pass as ever
        _generic("conv2d_sep_rows_ext", x.dtype)(
            (math.ceil(Wo / bx), math.ceil(Hn / by), 1), (bx, by, 1),
            (x, vd, tmp) + _i32(H, W, kW, pad[0], pad[1], Hn, Wo) + (_BOUNDARY_ARG[boundary],
                                                                     _fill_scalar(fillvalue, x.dtype)))
        fcols((math.ceil(Wo / bx), math.ceil(Ho / by), 1), (bx, by, 1),
              (tmp, ud, b, y) + _i32(0, 1, 1, 1, kH, 1, Hn, Ho, Wo, hb))
        return y
    for z0 in range(0, N * Cout, chunk):
        nz = min(chunk, N * Cout - z0)
        frows((math.ceil(Wo / bx), math.ceil(Hn / by), _grid_z(nz * Cin)), (bx, by, 1),
              (x, vd, tmp) + _i32(z0, nz, Cin, H, W, Cout, kW, sx, pad[0], pad[1], Hn, Wo))
        fcols((math.ceil(Wo / bx), math.ceil(Ho / by), _grid_z(nz)), (bx, by, 1),
              (tmp, ud, b, y) + _i32(z0, nz, Cin, Cout, kH, sy, Hn, Ho, Wo, hb))
    return y


# ------------------------------------------------------------------------------------------ boundaries


def _fill_scalar(fillvalue, dtype):
    """``fillvalue`` as the kernel's scalar of ``dtype``; uint64 takes an integer, negative ones mod 2^64."""
    dt = np.dtype(dtype)
    if dt != _U64:
        return dt.type(fillvalue)
    v = fillvalue.item() if isinstance(fillvalue, np.generic) else fillvalue
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise ValueError(f"fillvalue must be an integer for {EXACT_DTYPE} (exact integer) data; got {fillvalue!r}")
    return np.uint64(v % (1 << 64))


_BOUNDARY_ARG = {b: np.int32(code) for b, code in BOUNDARIES.items()}


def _extended_width(Wo: int, kW: int) -> int:
    """Row length of :func:`launch_extend`'s copy: the Wo + kW - 1 columns the outputs read, rounded up to a
    multiple of 4 (16-byte rows for float32: the tiled kernels' vector loads)."""
    return -(-(int(Wo) + int(kW) - 1) // 4) * 4


def extend_grid(He: int, We: int, block=EXTEND_BLOCK) -> tuple:
    """Grid of conv2d_extend for an He x We copy: a thread per column, rows over the y blocks (capped; the kernel
    steps over the rest)."""
    bx, by = block
    return (-(-int(We) // bx), max(1, min(-(-int(He) // by), 65535)))


def launch_extend(x, kH: int, kW: int, pad, out_hw, boundary: str = "fill", fillvalue=0.0):
    """The image x (1, 1, H, W) extended by ``boundary`` ("fill" with ``fillvalue``, "wrap", "symm") into a new
    (1, 1, Ho + kH - 1, We) array, element [r, c] = the extended image at (r - py, c - px); We covers the
    Wo + kW - 1 columns the outputs read (:func:`_extended_width`). Any variant run on it with pad (0, 0) and
    ``out_hw`` gives the result under ``boundary``. float32, float64, uint64."""
    import cupy

    _check_boundary(boundary)
    _require_image(boundary, x)
    H, W = int(x.shape[2]), int(x.shape[3])
    (py, px), (Ho, Wo) = (int(v) for v in pad), (int(v) for v in out_hw)
    He, We = Ho + int(kH) - 1, _extended_width(Wo, kW)
    xe = cupy.empty((1, 1, He, We), dtype=x.dtype)
    _generic("conv2d_extend", x.dtype)(extend_grid(He, We), EXTEND_BLOCK, (x, xe) + _i32(H, W, He, We, py, px)
                                       + (_BOUNDARY_ARG[boundary], _fill_scalar(fillvalue, x.dtype)))
    return xe


def _border_applies(x, w, bias, stride) -> str | None:
    """Why a boundary other than zero fill cannot apply to this job (one line), or None: one single-channel
    image."""
    N, Cin = int(x.shape[0]), int(x.shape[1])
    Cout = int(w.shape[0])
    if (N, Cin, Cout) != (1, 1, 1) or tuple(stride) != (1, 1) or bias is not None:
        return (f"one image, one channel in and out, stride 1 and no bias (got N={N}, Cin={Cin}, Cout={Cout}, "
                f"stride {tuple(stride)}, {'a' if bias is not None else 'no'} bias)")
    return None


# ------------------------------------------------------------------------------------------- auto


def resolve_auto(x, w, bias, stride, pad, out_hw, separable=None, block=None, factors=None, boundary="fill",
                 fillvalue=0.0, extend=False) -> tuple:
    """(variant, block) that ``variant="auto"`` runs for these arrays: the chooser's answer, timed on them
    (once per shape class and border) when the job is large enough, each candidate run as :func:`corr2d` runs it
    under ``boundary``/``fillvalue`` (its own loads, or the extended copy under ``extend``).

    ``separable`` is the caller's knowledge of whether ``w`` is rank-1, from a host copy of the weights
    (:func:`sigconv.registry.auto.host_rank1`); None for device weights, which are not read back.
    """
    stride, pad, out_hw = tuple(int(v) for v in stride), tuple(int(v) for v in pad), tuple(int(v) for v in out_hw)
    scratch = []

    def runner(variant, b):
        if not scratch:
            scratch.append(_out(None, (x.shape[0], w.shape[0]) + out_hw, x.dtype))
        _run_variant(variant, b, x, w, bias, stride, pad, out_hw, scratch[0], factors, boundary, fillvalue, extend)

    job = _job(x, w, stride, pad, out_hw, separable, border=_border(boundary, fillvalue))
    return _auto.choose_conv2d("cuda", job, block=block, runner=runner)


def _run_variant(variant, block, x, w, bias, stride, pad, out_hw, out, factors, boundary, fillvalue, extend):
    """Run ``variant`` (not auto) as :func:`corr2d` does, on checked arguments: a boundary other than zero fill
    through the variant's own loads, or with ``extend`` through the extended copy."""
    run = _get_variant("conv2d", "cuda", variant).run
    if extend and (boundary != "fill" or fillvalue != 0):  # the variant reads the extended copy with zero padding
        x = launch_extend(x, int(w.shape[2]), int(w.shape[3]), pad, out_hw, boundary, fillvalue)
        pad, boundary, fillvalue = (0, 0), "fill", 0.0
    kw = {"factors": factors} if variant == "separable" and factors is not None else {}
    return run(x, w, bias, stride, pad, out_hw, block=block, out=out, boundary=boundary, fillvalue=fillvalue, **kw)


def corr2d(x, w, bias, stride, pad, out_hw, *, variant="auto", block=None, out=None, separable=None, factors=None,
           boundary="fill", fillvalue=0.0, extend=False):
    """The 2-D contract (see ``sigconv.backends``) on cupy arrays; ``variant`` from :data:`VARIANTS` or auto.

    ``separable``/``factors``: what the caller knows from a host copy of ``w`` (whether it is rank-1, and
    its :func:`separable_factors` (u, v)); the separable launcher then does not read ``w`` back.
    ``boundary``/``fillvalue``: the extension of x beyond the image ("fill" with the constant, "wrap", "symm"),
    for a single-channel job (N = Cin = Cout = 1, stride 1, no bias) unless it is "fill" with 0; each
    variant reads the extension in its own loads, or with ``extend`` True a copy of the extended image
    (:func:`launch_extend`) with zero padding. ``auto`` chooses among the variants as they run under the boundary.
    uint64 x (exact integer convolution mod 2^64; w an integer array, taken mod 2^64) runs ``naive``."""
    import cupy

    stride = (int(stride[0]), int(stride[1]))
    pad = (int(pad[0]), int(pad[1]))
    _check_boundary(boundary)
    x = cupy.ascontiguousarray(x)
    exact = x.dtype == _U64
    if exact:
        kinds = [np.dtype(a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype) for a in (w, bias) if a is not None]
        if any(k.kind not in "iu" for k in kinds):
            raise ValueError(f"w and bias must be integer arrays for {EXACT_DTYPE} x; got "
                             f"{', '.join(k.name for k in kinds)}")
        if variant not in ("auto",) + EXACT_VARIANTS:
            raise ValueError(f"conv2d variant {variant!r} does not run {EXACT_DTYPE} (exact integer) data; "
                             f"{', '.join(EXACT_VARIANTS)} does")
    w = cupy.ascontiguousarray(w, dtype=x.dtype)
    if bias is not None:
        bias = cupy.ascontiguousarray(bias, dtype=x.dtype)
    if boundary != "fill" or fillvalue != 0:
        why = _border_applies(x, w, bias, stride)
        if why:
            what = "fill with a non-zero fillvalue" if boundary == "fill" else repr(boundary)
            raise ValueError(f"boundary {what} needs {why}")
        fillvalue = _fill_scalar(fillvalue, x.dtype)  # (refused before anything runs)
    if exact:
        variant = EXACT_VARIANTS[0]  # the chooser's candidates are floating kernels
    elif variant == "auto":
        variant, block = resolve_auto(x, w, bias, stride, pad, out_hw, separable, block, factors, boundary, fillvalue,
                                      extend)
    return _run_variant(variant, block, x, w, bias, stride, pad, out_hw, out, factors, boundary, fillvalue, extend)


# ------------------------------------------------------------------------------------------- registry


def _one_channel_stride1(job) -> str | None:
    if not job.single_channel:
        return f"it needs one input and one output channel (got Cin={job.x_shape[1]}, Cout={job.w_shape[0]})"
    if tuple(job.stride) != (1, 1):
        return f"it needs stride 1 (got {tuple(job.stride)})"
    return None


def _shfl_fits(job) -> str | None:
    why = _one_channel_stride1(job)
    if why:
        return why
    kW, px = int(job.w_shape[3]), int(job.pad[1])
    if not (0 <= px <= SHFL_HALO and 0 <= kW - 1 - px <= SHFL_HALO):
        return (f"it takes at most {SHFL_HALO} halo columns on each side (kernel width {kW} with left pad {px} "
                f"needs {px} and {kW - 1 - px})")
    return None


def _rank1(job) -> str | None:
    return "the kernel is not rank-1 (separable)" if job.rank1 is False else None


_F32 = ("float32",)
for _name, _run, _desc, _blocks, _default, _kw in (
    ("naive", launch_naive, "one thread per output, loops Cin x kH x kW (article A); any kernel size",
     _BLOCKS_GENERIC, (32, 8), dict(max_taps=None)),
    ("shared", launch_shared, "input tile + halo per channel in shared memory, bank-padded rows", _BLOCKS_GENERIC,
     (32, 8), {}),
    ("regblock", launch_regblock, "16-byte tile loads, 2x4 outputs x 8 output channels per thread in registers",
     _BLOCKS_TILED, (16, 8), dict(dtypes=_F32, **_STEP_TILED)),
    ("prefetch", launch_prefetch,
     "article B: one-warp 8x4 blocks, float4 tiles, next channel prefetched (double buffer)", _BLOCKS_PREFETCH,
     (8, 4), dict(dtypes=_F32, **_STEP_TILED)),
    ("strip", launch_strip,
     f"single channel (Cin=Cout=1, stride 1, k<={STRIP_MAX}): row-streaming register window, taps in constant",
     _BLOCKS_STRIP, (64, 1), dict(dtypes=_F32, max_taps=STRIP_MAX, constraint=_one_channel_stride1)),
    ("shfl", launch_shfl,
     f"single channel, stride 1, halos <= {SHFL_HALO} columns: one float4 per row, halo columns by warp shuffles",
     _BLOCKS_SHFL, (128, 1),
     dict(dtypes=_F32, max_taps=STRIP_MAX, constraint=_shfl_fits, auto=False, **_STEP_SHFL)),
    ("separable", launch_separable, "rank-1 kernels (Gaussian, box): a row pass then a column pass", _BLOCKS_GENERIC,
     (32, 8), dict(constraint=_rank1)),
    ("igemm", launch_igemm,
     "multi-channel layers as an implicit GEMM: im2col gathered into shared memory by cp.async, 8x8 outputs per "
     "thread", _BLOCKS_IGEMM, (16, 16), dict(dtypes=_F32, max_taps=None, constraint=igemm_refusal)),
    ("igemm_tf32", launch_igemm_tf32,
     "igemm on TF32 tensor cores (mma.sync; inputs rounded to 10 mantissa bits): opt-in, never chosen by auto",
     _BLOCKS_IGEMM_TF32, (32, 8), dict(dtypes=_F32, max_taps=None, auto=False, constraint=igemm_refusal,
                                      extra={"tol": TF32_TOL})),
):
    register(Variant(_name, "conv2d", "cuda", _desc, _run, **{"blocks": _blocks, "default_block": _default,
                                                              "max_taps": MAX_TAPS, "requires": ("cupy", "gpu"),
                                                              "auto": True, "source": _SRC, **_kw}))
