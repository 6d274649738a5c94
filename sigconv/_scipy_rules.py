"""SciPy's rules for ``convolve``, ``correlate``, ``convolve2d`` and ``correlate2d``, in one place: the argument
checks (mode, method, boundary, fillvalue, dimensions), the result dtype, the dtype the kernels compute in, and
how integer results are made exact.

The result dtype is NumPy's ``result_type`` of the two inputs, as in SciPy: integers stay integers, bool stays
bool, float16 stays float16. The arithmetic behind it:

- floats: float32 for float16/float32 results, float64 for float64 (float16 results are computed in float32
  and rounded once at the end);
- integers and bool: float64 while every partial sum is an integer below 2^52 (SciPy's own bound in
  ``choose_conv_method``), rounded to the nearest integer and cast with NumPy's wrap-around, which is what
  NumPy's integer arithmetic gives; the FFT variants only while the bound is below 2^32, where their rounding
  error stays far below half a unit;
- larger integers: 64-bit two's-complement arithmetic (as uint64) on the direct kernel, exact modulo 2^64
  and therefore, after the cast, exactly NumPy's (and SciPy's direct method's) result.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sigconv._core.checks import check_numeric

__all__ = ["METHODS", "BOUNDARIES", "Arithmetic", "arithmetic", "check_method", "check_boundary", "fill_value",
           "check_same_ndim", "check_not_empty", "check_numeric_pair", "operand", "finish", "EXACT_FLOAT_BOUND",
           "EXACT_FFT_BOUND"]

METHODS = ("auto", "direct", "fft")

#: SciPy's boundary names -> sigconv's ("pad" and "circular", "symmetric" are SciPy's aliases).
BOUNDARIES = {"fill": "fill", "pad": "fill", "wrap": "wrap", "circular": "wrap", "symm": "symm", "symmetric": "symm"}

#: Integer inputs whose partial sums stay below this are computed exactly in float64 (SciPy's bound, 2^52).
EXACT_FLOAT_BOUND = 1 << 52
#: ... and with an FFT variant only below this (its rounding error is then far below half a unit).
EXACT_FFT_BOUND = 1 << 32


@dataclass(frozen=True)
class Arithmetic:
    """How one call computes: ``result`` is what SciPy returns, ``compute`` what the kernels run in.

    ``integral``: the result is an integer or bool type (rounded before the cast). ``modular``: computed in 64-bit
    integers (``compute`` uint64, signed values as their two's-complement bits), which only the direct kernels do. ``direct_only``: an integer job
    whose bound rules the FFT variants out."""

    result: np.dtype
    compute: np.dtype
    integral: bool = False
    modular: bool = False
    direct_only: bool = False


def _peak(a) -> int:
    """max |a| as a Python int (exact for every integer dtype, int8's -128 included)."""
    if a.size == 0:
        return 0
    return max(abs(int(a.max())), abs(int(a.min())))


def arithmetic(a, b) -> Arithmetic:
    """The :class:`Arithmetic` of ``a`` and ``b`` (numpy or cupy arrays, already checked numeric)."""
    result = np.result_type(a.dtype, b.dtype)
    if result.kind == "f":
        if result.itemsize > 8:
            raise TypeError(f"inputs of dtype {result} (extended precision) are not supported; convert them to "
                            "float64 first")
        return Arithmetic(result, np.dtype(np.float32 if result.itemsize <= 4 else np.float64))
    # integers and bool: the largest partial sum is at most max|a| * max|b| * min(size) (SciPy's bound)
    bound = _peak(a) * _peak(b) * min(int(a.size), int(b.size))
    if bound < EXACT_FLOAT_BOUND:
        return Arithmetic(result, np.dtype(np.float64), integral=True, direct_only=bound >= EXACT_FFT_BOUND)
    return Arithmetic(result, np.dtype(np.uint64), integral=True, modular=True, direct_only=True)


def operand(a, arith: Arithmetic):
    """``a`` in the dtype the kernels compute in; for the modular path, its 64-bit two's-complement bits as
    uint64 (unsigned arithmetic wraps by definition, on the host and in CUDA C alike)."""
    if arith.modular:
        wide = np.uint64 if arith.result.kind == "u" else np.int64
        return a.astype(wide, copy=False).view(np.uint64)
    return a.astype(arith.compute, copy=False)


def finish(y, arith: Arithmetic):
    """The computed ``y`` in SciPy's result dtype: integers rounded (float path) and cast with wrap-around."""
    if arith.modular:
        return y.view(np.uint64 if arith.result.kind == "u" else np.int64).astype(arith.result, copy=False)
    if arith.integral:
        from sigconv._core.xp import array_namespace

        xp = array_namespace(y)
        r = xp.rint(y)
        if arith.result.kind == "b":
            return r != 0
        return r.astype(np.int64).astype(arith.result, copy=False)
    return y.astype(arith.result, copy=False)


def check_method(method) -> str:
    if not isinstance(method, str) or method not in METHODS:
        raise ValueError(f"method must be one of 'auto', 'direct' or 'fft' (as in SciPy), got {method!r}")
    return method


def check_boundary(boundary) -> str:
    """SciPy's boundary name (or alias) -> "fill", "wrap" or "symm"."""
    try:
        return BOUNDARIES[boundary]
    except (KeyError, TypeError):
        raise ValueError(f"boundary must be 'fill', 'wrap' (or 'circular') or 'symm' (or 'symmetric'), got "
                         f"{boundary!r}") from None


def fill_value(fillvalue, dtype: np.dtype):
    """SciPy's conversion of ``fillvalue`` to the output type: a scalar (or one-element array) that converts to
    ``dtype`` (1.5 becomes 1 for integers, as in SciPy); complex values, NaN for integers and values out of an
    integer type's range are refused."""
    try:
        f = np.asarray(fillvalue, dtype=dtype)
    except (TypeError, ValueError, OverflowError):
        np.asarray(fillvalue, dtype=complex)  # what even complex cannot hold fails with NumPy's own error
        raise ValueError("could not cast `fillvalue` directly to the output type (it was first converted to "
                         f"complex): {fillvalue!r} does not fit {np.dtype(dtype)}") from None
    if f.size != 1:
        if f.size == 0:
            raise ValueError("`fillvalue` cannot be an empty array.")
        raise ValueError(f"`fillvalue` must be scalar or an array with one element, got shape {f.shape}")
    return f.reshape(()).item()


def check_same_ndim(a, b) -> None:
    """SciPy's dimension rule, with sigconv's contract: both 1-D or both 2-D (0-D pairs are handled before)."""
    if a.ndim != b.ndim:
        raise ValueError(f"in1 and in2 should have the same dimensionality, got {a.ndim}-D and {b.ndim}-D "
                         f"(shapes {tuple(a.shape)} and {tuple(b.shape)}); to filter every row of an N-D in1 "
                         "with 1-D taps, pass axis=")
    if a.ndim > 2:
        raise ValueError(f"inputs of more than 2 dimensions are outside sigconv's contract (got shapes "
                         f"{tuple(a.shape)} and {tuple(b.shape)}); use scipy.signal for N-D convolution")


def check_not_empty(a, b) -> None:
    if a.size == 0 or b.size == 0:
        raise ValueError(f"in1 and in2 must not be empty, got shapes {tuple(a.shape)} and {tuple(b.shape)}")


def check_numeric_pair(a, b) -> None:
    check_numeric(a, "in1")
    check_numeric(b, "in2")
