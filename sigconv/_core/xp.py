"""numpy or cupy? Asked once, where an array enters (as SciPy's ``array_namespace``), and answered here only.

CuPy is imported only when a cupy array or the cuda backend is involved, so ``import sigconv`` never needs it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_cupy", "array_namespace", "namespace_of_backend", "to_backend", "like", "to_host", "peak_exponents",
           "exact_float64", "FFT_SAFE_EXPONENT"]


def is_cupy(a) -> bool:
    """True for a cupy array (checked by type, without importing cupy)."""
    return type(a).__module__.split(".")[0] == "cupy"


def array_namespace(*arrays):
    """cupy when any of ``arrays`` is a cupy array, else numpy."""
    if any(is_cupy(a) for a in arrays):
        import cupy

        return cupy
    return np


def namespace_of_backend(backend: str):
    """The array module a backend computes in: cupy for ``"cuda"``, numpy for ``"cpu"``."""
    if backend == "cuda":
        import cupy

        return cupy
    return np


def to_backend(a, backend: str):
    """``a`` in the backend's memory (numpy for cpu, cupy for cuda)."""
    if backend == "cuda":
        import cupy

        return cupy.asarray(a)
    return to_host(a)


def to_host(a) -> np.ndarray:
    """A numpy array of ``a`` (a device-to-host copy for cupy)."""
    return a.get() if is_cupy(a) else np.asarray(a)


def like(y, template):
    """``y`` as the array type of the caller's input ``template`` (cupy in, cupy out)."""
    if is_cupy(template):
        import cupy

        return cupy.asarray(y)
    return to_host(y) if is_cupy(y) else y


#: FFT convolution needs no rescaling while every operand's peak is within 2^+-this (by dtype): the transforms'
#: intermediates (at most the peaks' product times N * K < 2^42) then neither overflow nor fall into the
#: subnormals, where an FFT would lose the accuracy a direct sum keeps.
FFT_SAFE_EXPONENT = {"float32": 40, "float64": 448}


def peak_exponents(a, axis=-1):
    """The exponent ``e`` of each row's peak along ``axis``, max |a| = m * 2^e with 0.5 <= m < 1, as int32 in
    ``a``'s namespace (no host sync on cupy); 0 for rows that are all zero or hold inf/NaN. Scaling by 2^-e is
    exact, so an FFT path can run on operands of peak ~1 and undo the scale on its output (``ldexp``)."""
    xp = array_namespace(a)
    if a.shape[axis] == 0:
        return xp.zeros(a.shape[:axis % a.ndim] + a.shape[axis % a.ndim + 1:], xp.int32)
    if xp is not np:  # one fused pass on the device (max and min would be two)
        return _device_peak_exponents()(a, axis=axis)
    peak = xp.maximum(a.max(axis=axis), -a.min(axis=axis))
    e = xp.frexp(peak)[1]
    return xp.where(xp.isfinite(peak), e, 0).astype(xp.int32, copy=False)


_PEAK_KERNEL = []
_WIDEN_KERNEL = []

#: CuPy compiles every kernel with -ftz=true, under which a float32 converted to float64 (``astype``, or a cast in a
#: kernel) loses its subnormals to zero; PTX's cvt.f64.f32 without .ftz keeps them (double is never flushed).
_EXACT_F64 = ("__device__ double sigconv_f64(float v) { double d; asm(\"cvt.f64.f32 %0, %1;\" : \"=d\"(d) : \"f\"(v));"
              " return d; }\n"
              "template <typename T> __device__ double sigconv_f64(T v) { return (double)v; }\n")


def _device_peak_exponents():
    """The cupy reduction of :func:`peak_exponents`: |x| reduced by max, then the exponent of the peak (0 for a
    zero or non-finite peak), built on first use; float32 subnormals count (:data:`_EXACT_F64`)."""
    if not _PEAK_KERNEL:
        import cupy

        _PEAK_KERNEL.append(cupy.ReductionKernel(
            "T val_in", "int32 pexp_out", "abs(sigconv_f64(val_in))", "max(a, b)", "pexp_out = sigconv_peak_exp(a)",
            "0.0", "sigconv_peak_exponent", reduce_type="double",
            preamble=_EXACT_F64 + "__device__ int sigconv_peak_exp(double a) {"
                                  " int ex = 0; if (isfinite(a) && a != 0.0) frexp(a, &ex); return ex; }"))
    return _PEAK_KERNEL[0]


def exact_float64(a):
    """``a`` as a C-contiguous float64 array of its namespace, every value exact: on cupy, float32 subnormals kept,
    which CuPy's own ``astype`` flushes to zero (:data:`_EXACT_F64`)."""
    xp = array_namespace(a)
    if xp is np or a.dtype != xp.float32:
        return xp.ascontiguousarray(a, dtype=xp.float64)
    if not _WIDEN_KERNEL:
        _WIDEN_KERNEL.append(xp.ElementwiseKernel("float32 v", "float64 d", "d = sigconv_f64(v)",
                                                  "sigconv_exact_float64", preamble=_EXACT_F64))
    return _WIDEN_KERNEL[0](a)
