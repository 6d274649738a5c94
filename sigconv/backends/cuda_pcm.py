"""The file engine's sample conversions on the GPU (``kernels/pcm.cu``), each one kernel over device arrays:

* :func:`to_work`: (n, C) interleaved samples as read (int16, int32, float32, float64) -> (C, n) work samples
  (float32 or float64), integers scaled to [-1, 1);
* :func:`quantise`: (C, n) work samples -> (n, C) samples of the output type, rounded, saturated and aligned by
  :func:`sigconv.engine.audio.quantise`'s rule, the saturated samples counted on the device.

Every instantiation lives in one module (:data:`PCM_EXPRESSIONS`), which ships pre-built. CuPy is imported on first
use.
"""

from __future__ import annotations

import numpy as np

from sigconv import _kernels

__all__ = ["to_work", "quantise", "prebuilt_modules", "SOURCE", "PCM_EXPRESSIONS", "READ_DTYPES", "WORK_DTYPES",
           "OUT_DTYPES"]

SOURCE = "pcm.cu"
_CTYPE = {"int16": "short", "int32": "int", "float32": "float", "float64": "double"}
READ_DTYPES = ("int16", "int32", "float32", "float64")
WORK_DTYPES = ("float32", "float64")
OUT_DTYPES = ("int16", "int32", "float32", "float64")
PCM_EXPRESSIONS = (tuple(f"pcm_to_work<{_CTYPE[a]}, {_CTYPE[b]}>" for a in READ_DTYPES for b in WORK_DTYPES)
                   + tuple(f"pcm_quantise<{_CTYPE[a]}, {_CTYPE[b]}>" for a in WORK_DTYPES for b in OUT_DTYPES))
_BLOCK = 256
#: blocks per launch at most (the kernels walk the rest by grid-stride loops)
_MAX_BLOCKS = 1 << 16


def prebuilt_modules() -> list[dict]:
    """:func:`sigconv._kernels.module`'s arguments of the modules here (see ``sigconv.backends.prebuilt_modules``)."""
    return [dict(name=SOURCE, name_expressions=PCM_EXPRESSIONS)]


def _fn(kind: str, a, b):
    mod = _kernels.module(SOURCE, name_expressions=PCM_EXPRESSIONS)
    return mod.get_function(f"pcm_{kind}<{_CTYPE[np.dtype(a).name]}, {_CTYPE[np.dtype(b).name]}>")


def _grid(total: int) -> tuple:
    return (max(1, min(-(-total // _BLOCK), _MAX_BLOCKS)),)


def _check(what: str, dtype, allowed) -> None:
    if np.dtype(dtype).name not in allowed:
        raise ValueError(f"{what} must be one of {', '.join(allowed)}, got {np.dtype(dtype).name}")


def to_work(raw, dtype, scale: float):
    """(n, C) device samples -> (C, n) ``dtype`` samples ``raw * scale`` (computed in double, rounded once)."""
    import cupy

    _check("raw samples", raw.dtype, READ_DTYPES)
    _check("work dtype", dtype, WORK_DTYPES)
    if raw.ndim != 2:
        raise ValueError(f"raw samples must be (frames, channels), got shape {raw.shape}")
    raw = cupy.ascontiguousarray(raw)
    n, C = raw.shape
    out = cupy.empty((C, n), dtype=dtype)
    if out.size:
        _fn("to_work", raw.dtype, dtype)(_grid(out.size), (_BLOCK,),
                                         (raw, out, np.int64(n), np.int32(C), np.float64(scale)))
    return out


def quantise(y, out_dtype, *, scale: float, lo: float, hi: float, mult: float, clip: bool) -> tuple:
    """(C, n) device work samples (rows may be spaced: a slice of a wider array) -> ((n, C) ``out_dtype`` samples,
    the number of saturated samples as a 0-d uint64 device array, or None without ``clip``): v = rint(y * scale)
    when ``scale`` != 0, saturated to [lo, hi] when ``clip``, times ``mult``; no host sync."""
    import cupy

    _check("work samples", y.dtype, WORK_DTYPES)
    _check("output dtype", out_dtype, OUT_DTYPES)
    if y.ndim != 2:
        raise ValueError(f"work samples must be (channels, frames), got shape {y.shape}")
    if y.strides[1] != y.itemsize or y.strides[0] % y.itemsize or y.strides[0] < 0:
        y = cupy.ascontiguousarray(y)
    C, n = y.shape
    ld = y.strides[0] // y.itemsize if C > 1 else n
    out = cupy.empty((n, C), dtype=out_dtype)
    count = cupy.zeros((), dtype=cupy.uint64)
    if out.size:
        _fn("quantise", y.dtype, out_dtype)(
            _grid(out.size), (_BLOCK,),
            (y, out, np.int64(n), np.int32(C), np.int64(ld), np.float64(scale), np.float64(lo), np.float64(hi),
             np.float64(mult), np.int32(bool(clip)), count))
    return out, (count if clip else None)
