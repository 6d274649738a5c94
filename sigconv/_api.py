"""Public array API: ``scipy.signal``'s four convolution functions on the cpu or cuda backend.

The four take SciPy's arguments in SciPy's positions (``mode``, ``method``; ``boundary``, ``fillvalue``) and
follow SciPy's rules for them (:mod:`sigconv._scipy_rules`: result dtypes, exact integers, errors); sigconv's
own options (``axis``, ``backend``, ``variant``, ``block``) are keyword-only. Every 1-D mode is one call of the
backend contract ``corr1d(x, w, pad, out_len)`` (see ``sigconv.backends``): convolution passes the reversed
taps, and ``pad``/``out_len`` select the window of the full result that SciPy's ``mode`` names; the 2-D modes
are one call of ``corr2d`` on a single-channel image.
"""

from __future__ import annotations

import numpy as np

from sigconv import _scipy_rules as rules
from sigconv._core.blocks import check_block, check_block2d
from sigconv._core.checks import LAST_AXIS, check_mode, check_numeric, check_time_axis, float_dtype
from sigconv._core.xp import array_namespace, is_cupy, like, to_backend
from sigconv.engine.design import check_fs
from sigconv.engine.ops import backend_for, check_taps, corr1d, corr2d, window_1d, window_2d
from sigconv.registry import table
from sigconv.registry.auto import conv1d_candidates

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "apply_fir"]


# ------------------------------------------------------------------------------------ variants


def _by_fft(op: str, be: str, variant: str) -> bool:
    """Whether ``variant`` of ``op`` on ``be`` transforms (its registry ``method`` is "fft")."""
    try:
        return table.get(op, be, variant).method == "fft"
    except ValueError:  # "auto", or a name the launcher refuses with the list of valid ones
        return False


def _fixed_variant(op: str, method: str, variant: str, arith, be: str):
    """The variant the call's arguments fix, or None when the choice is left to ``auto``: the caller's
    ``variant`` (checked against ``method``), or, for 64-bit integer arithmetic, the direct kernel (cuda's
    backend picks it for uint64 data). ``ValueError`` for a ``variant`` that contradicts ``method`` or cannot
    give the integers exactly."""
    fft = _by_fft(op, be, variant)
    if method != "auto" and variant != "auto" and (method == "fft") != fft:
        raise ValueError(f"method={method!r} and variant={variant!r} disagree; give one of them")
    if arith.direct_only and fft:
        raise ValueError(f"variant {variant!r} cannot give these integers exactly (their sums reach 2^32 or more); "
                         "use method='direct' or the default")
    if not arith.modular:
        return None if variant == "auto" else variant
    if variant not in ("auto", "direct", "naive"):
        raise ValueError(f"integers this large are computed exactly by the direct kernel only, not by variant "
                         f"{variant!r}")
    return "direct" if be == "cpu" else "auto"


def _variant_1d(method: str, variant: str, arith, be: str, C: int, L: int, K: int) -> str:
    """The variant a 1-D call runs: SciPy's ``method`` mapped onto sigconv's variants (``variant`` overrides)."""
    fixed = _fixed_variant("conv1d", method, variant, arith, be)
    if fixed:
        return fixed
    if method == "fft" and not arith.direct_only:
        return "fft"
    if method != "auto" or arith.direct_only:  # direct, or fft on integers it cannot give exactly (as SciPy)
        return _direct_1d(be, C, L, K, arith.compute)
    return "auto"


def _direct_1d(be: str, C: int, L: int, K: int, dtype) -> str:
    """The favourite non-FFT variant for the job (cpu: ``direct``)."""
    if be == "cpu":
        return "direct"
    for name, _ in conv1d_candidates("cuda", C, L, K, dtype):
        if not _by_fft("conv1d", "cuda", name):
            return name
    return "shared"  # any K, both dtypes


def _variant_2d(method: str, variant: str, arith, be: str, exact_sums: bool = False) -> str:
    """As :func:`_variant_1d` for 2-D jobs; ``exact_sums``: ``auto`` sums directly on the cpu too (SciPy's
    convolve2d always does, so integer-valued floats come out exact)."""
    fixed = _fixed_variant("conv2d", method, variant, arith, be)
    if fixed:
        return fixed
    if be == "cpu":
        if method == "direct" or arith.direct_only or exact_sums:
            return "direct"
        return "fft" if method == "fft" else "auto"
    return "auto"  # the cuda 2-D kernels are all direct: method only names how SciPy would compute


# ------------------------------------------------------------------------------------ 1-D API


def _filter1d(x, h, mode, axis, backend, variant, block, reverse: bool, arith, causal: bool = False,
              method: str = "auto", name: str = "in1"):
    """``x`` (N-D; the caller's argument ``name``) filtered along ``axis`` by the 1-D ``h``, computed as ``arith``
    says."""
    xp = array_namespace(x, h)
    check_block(block)
    ax, L = check_time_axis(tuple(x.shape), axis, name)
    be = backend_for(backend, x, h, job="conv1d" if variant == "auto" and block is None else None)
    K = int(h.size)
    pad, out_len = (K - 1, L) if causal else window_1d(mode, L, K)
    xm = xp.moveaxis(x, ax, -1)
    lead = xm.shape[:-1]
    C = int(np.prod(lead, dtype=np.int64))
    run = _variant_1d(method, variant, arith, be, C, L, K)
    if (variant == "auto" and run != "fft" and method != "fft" and be == "cuda" and array_namespace(h) is np
            and arith.result.kind == "f" and not np.isfinite(h).all()):
        # SciPy's direct sum never multiplies a tap by a sample outside the signal; the tiled kernels read zeros
        # there, and 0 * nan would spread a non-finite tap to the edges. The naive kernel clips the tap range.
        run = "naive"
    bxp = np if be == "cpu" else array_namespace(to_backend(np.zeros(1), be))
    x2 = bxp.ascontiguousarray(rules.operand(to_backend(xm.reshape(-1, L), be), arith))
    w = rules.operand(to_backend(h, be), arith)
    w = w[::-1].copy() if reverse else w.copy()
    host = None
    if be == "cuda" and array_namespace(h) is np and not arith.modular:  # the taps as uploaded (fft cache)
        host = np.asarray(h).astype(arith.compute)
        host = host[::-1] if reverse else host
    y2 = corr1d(x2, w, pad, out_len, backend=be, variant=run, block=block, host_taps=host)
    y = like(rules.finish(y2, arith), x).reshape(lead + (out_len,))
    return array_namespace(y).moveaxis(y, -1, ax)


def _inputs(in1, in2):
    """The two inputs as arrays of one namespace (cupy when either is), checked to hold real numbers."""
    xp = array_namespace(in1, in2)
    a, b = xp.asarray(in1), xp.asarray(in2)
    rules.check_numeric_pair(a, b)
    return a, b


def _convolve_nd(in1, in2, mode, method, axis, backend, variant, block, reverse: bool):
    """convolve/correlate: SciPy's shapes (0-D, 1-D, 2-D), plus N-D ``in1`` with 1-D ``in2`` along ``axis``."""
    a, b = _inputs(in1, in2)
    if a.ndim == 0 and b.ndim == 0:  # as SciPy: the product, before any other check
        return a * b
    check_mode(mode)
    rules.check_method(method)
    if not (b.ndim == 1 and a.ndim > 1 and axis is not LAST_AXIS):  # else sigconv's multichannel form
        rules.check_same_ndim(a, b)
        if a.ndim == 2 and axis is not LAST_AXIS:
            raise ValueError(f"axis applies to a 1-D in2 only (filtering along one axis of in1), got axis={axis!r} "
                             "with a 2-D in2")
    rules.check_not_empty(a, b)
    arith = rules.arithmetic(a, b)
    if b.ndim == 1:
        return _filter1d(a, b, mode, axis, backend, variant, block, reverse, arith, method=method)
    # 2-D: SciPy's N-D convolution (correlate is convolve with the reversed kernel, "same" centred as convolve)
    window_2d(mode, a.shape, b.shape)  # SciPy's "valid" shape rule, checked before any shortcut
    for ax in (1, 0):  # a one-row (one-column) kernel filters every row (column) in 1-D: the long-filter kernels
        if b.shape[1 - ax] == 1:
            h = b.reshape(-1)
            return _filter1d(a, h, mode, ax, backend, variant, block, reverse, arith, method=method)
    return _filter2d(a, b, mode, backend, variant, block, reverse, arith, method=method)


def convolve(in1, in2, mode: str = "full", method: str = "auto", *, axis=LAST_AXIS, backend: str = "auto",
             variant: str = "auto", block=None):
    """Convolve ``in1`` with ``in2``, as ``scipy.signal.convolve`` (1-D and 2-D inputs).

    Parameters
    ----------
    in1, in2 : array_like (numpy or cupy), bool, integer or real float
        Both 0-D, 1-D or 2-D, as in SciPy; or an N-D ``in1`` with 1-D taps ``in2`` filtered along ``axis``
        (sigconv's multichannel form, which needs ``axis``).
    mode : {"full", "same", "valid"}
        As in SciPy. "same" is centred on the full output; "valid" swaps the roles when ``in2`` is larger in
        every dimension (convolution commutes).
    method : {"auto", "direct", "fft"}
        As in SciPy: "direct" runs the direct kernels (cuda: the favourite non-FFT variant), "fft" the FFT
        variant (1-D; the cuda 2-D kernels are all direct). Results agree within rounding either way.
    axis : int, keyword-only
        The axis of an N-D ``in1`` that a 1-D ``in2`` filters (each other index is one channel). A 2-D input
        whose filtered axis is much shorter than the other is refused unless ``axis`` is given explicitly,
        since that is usually (frames, channels) data passed the wrong way round.
    backend : {"auto", "cpu", "cuda"}, keyword-only
        "auto" is cuda when an input is a cupy array, or when a usable GPU and CuPy are present and the job is
        large enough to repay the copies to and from the GPU (with ``variant`` and ``block`` left to sigconv:
        NumPy inputs below ``sigconv.registry.auto.HOST_CPU_BELOW`` samples run on the cpu, and CuPy is not
        imported for them).
    variant : str, keyword-only
        Kernel variant (``sigconv.variants("conv1d")`` / ``("conv2d")``) or "auto"; overrides ``method``.
    block : int, keyword-only, optional
        CUDA launch block size, a multiple of 32 up to 1024.

    Returns
    -------
    ndarray
        SciPy's dtype: ``numpy.result_type(in1, in2)`` (integers stay integers, computed exactly; bool stays
        bool); same array type as ``in1`` (cupy in, cupy out). 0-D inputs give their product.

    Raises
    ------
    ValueError
        Unknown mode or method, empty input, dimensions SciPy rejects, complex or more than 2-D inputs,
        a bad axis or block, transposed-looking input.
    TypeError
        Inputs that are not numbers (object, string, datetime arrays) or of extended precision.
    RuntimeError
        ``backend="cuda"`` on a machine where it cannot run (one-line reason).

    See Also
    --------
    scipy.signal.convolve : the reference semantics.

    Notes
    -----
    Non-finite values propagate as in SciPy. Integer results are exact (NumPy's wrap-around on overflow, as
    SciPy's direct method); SciPy's FFT method may round large integer sums, sigconv does not.

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> sigconv.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]), backend="cpu")
    array([0. , 1. , 2.5, 4. , 1.5])
    >>> sigconv.convolve(np.array([3, 4, 5]), np.array([1, 2, 3]), backend="cpu")
    array([ 3, 10, 22, 22, 15])
    """
    return _convolve_nd(in1, in2, mode, method, axis, backend, variant, block, reverse=True)


def correlate(in1, in2, mode: str = "full", method: str = "auto", *, axis=LAST_AXIS, backend: str = "auto",
              variant: str = "auto", block=None):
    """Cross-correlate ``in1`` with ``in2``, as ``scipy.signal.correlate`` (what cuDNN and
    ``torch.nn.functional.conv1d`` compute).

    Equal to ``convolve(in1, in2[::-1], mode)`` (reversed in every dimension); parameters, returns and errors as
    :func:`convolve`.

    See Also
    --------
    scipy.signal.correlate

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> sigconv.correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]), backend="cpu")
    array([0.5, 2. , 3.5, 3. , 0. ])
    """
    return _convolve_nd(in1, in2, mode, method, axis, backend, variant, block, reverse=False)


def apply_fir(x, taps, fs=None, *, phase: str = "zero", axis=LAST_AXIS, backend: str = "auto",
              variant: str = "auto", block=None):
    """Filter ``x`` with FIR ``taps`` along ``axis``; the output has the input's length.

    Parameters
    ----------
    x : array_like
    taps : array_like, 1-D
        From :func:`design_fir` / :func:`design_notch` or your own.
    fs : float, optional
        Sample rate, only checked (> 0) and kept for symmetry with the design functions.
    phase : {"zero", "linear"}
        "zero": centred, delay-free: ``scipy.signal.convolve(x, taps, mode="same")``; needs an odd
        number of taps (a symmetric even-length filter has a half-sample delay that cannot be
        removed). "linear": causal, ``scipy.signal.lfilter(taps, 1, x)``.
    axis, backend, variant, block
        As in :func:`convolve`.

    Returns
    -------
    ndarray, same shape as ``x``.

    See Also
    --------
    scipy.signal.lfilter, scipy.signal.filtfilt

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> sigconv.apply_fir(np.array([0.0, 1.0, 0.0, 0.0]), np.array([0.25, 0.5, 0.25]), backend="cpu")
    array([0.25, 0.5 , 0.25, 0.  ])
    """
    if fs is not None:
        check_fs(fs)
    taps = check_taps(taps, "taps")
    xp = array_namespace(x)
    x = xp.asarray(x)
    check_numeric(x, "x")
    if x.ndim == 0:
        raise ValueError("x must be at least 1-D, got a scalar")
    dtype = float_dtype(x, taps)
    arith = rules.Arithmetic(dtype, dtype)
    if phase == "zero":
        if taps.size % 2 == 0:
            raise ValueError(
                f"phase='zero' needs an odd number of taps (got {taps.size}): an even-length filter delays "
                "by half a sample; use phase='linear' or design an odd-length filter"
            )
        return _filter1d(x, taps, "same", axis, backend, variant, block, True, arith, name="x")
    if phase == "linear":
        return _filter1d(x, taps, None, axis, backend, variant, block, True, arith, causal=True, name="x")
    raise ValueError(f"phase must be 'zero' or 'linear', got {phase!r}")


# ------------------------------------------------------------------------------------ 2-D API


def _filter2d(x, k, mode, backend, variant, block, reverse: bool, arith, *, method: str = "auto",
              correlate2d: bool = False, boundary: str = "fill", fillvalue=0, exact_sums: bool = False):
    """2-D ``x`` filtered by 2-D ``k`` in SciPy's ``mode``; ``correlate2d``: that function's "same" centring
    (its output starts at (k-1)//2 into the padded input for even sides, where convolve2d's and
    convolve's/correlate's start at k//2)."""
    check_block2d(block)
    be = backend_for(backend, x, k, job="conv2d" if variant == "auto" and block is None else None)
    pad, out_hw = window_2d(mode, x.shape, k.shape, correlate=correlate2d)
    if mode == "valid":  # no window reaches past the image (a swapped "valid" reads only the smaller input)
        boundary, fillvalue = "fill", 0
    run = _variant_2d(method, variant, arith, be, exact_sums)
    bxp = np if be == "cpu" else array_namespace(to_backend(np.zeros(1), be))
    x4 = bxp.ascontiguousarray(rules.operand(to_backend(x, be), arith))[None, None]
    w4 = rules.operand(to_backend(k, be), arith)
    w4 = bxp.ascontiguousarray(w4[::-1, ::-1] if reverse else w4)[None, None]
    host_k = None  # the weights exactly as uploaded (dtype, orientation): separability is judged on them
    if not is_cupy(k) and not arith.modular:
        host_k = np.asarray(k).astype(arith.compute)
        host_k = host_k[::-1, ::-1] if reverse else host_k
    fill = rules.operand(np.asarray(fillvalue, dtype=arith.result), arith).item()
    y = corr2d(x4, w4, None, (1, 1), pad, out_hw, backend=be, variant=run, block=block, host_weights=host_k,
               boundary=boundary, fillvalue=fill)
    return like(rules.finish(y[0, 0], arith), x)


def _filter2d_scipy(in1, in2, mode, boundary, fillvalue, backend, variant, block, reverse: bool):
    a, b = _inputs(in1, in2)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError(f"{'convolve2d' if reverse else 'correlate2d'} inputs must both be 2-D arrays, got "
                         f"shapes {tuple(a.shape)} and {tuple(b.shape)}")
    check_mode(mode)
    bnd = rules.check_boundary(boundary)
    rules.check_not_empty(a, b)
    arith = rules.arithmetic(a, b)
    fill = rules.fill_value(fillvalue, arith.result) if bnd == "fill" else 0
    # SciPy's convolve2d always sums directly (so integer-valued floats come out exact): so does auto here
    return _filter2d(a, b, mode, backend, variant, block, reverse, arith, correlate2d=not reverse, boundary=bnd,
                     fillvalue=fill, exact_sums=True)


def convolve2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0, *, backend: str = "auto",
               variant: str = "auto", block=None):
    """2-D convolution, as ``scipy.signal.convolve2d``.

    Parameters
    ----------
    in1, in2 : 2-D array_like (numpy or cupy), bool, integer or real float
    mode : {"full", "same", "valid"}
    boundary : {"fill", "wrap", "symm"}
        How ``in1`` extends beyond its edges: ``fillvalue`` ("fill", alias "pad"), periodically ("wrap", alias
        "circular") or mirrored with the edge repeated ("symm", alias "symmetric"), as in SciPy; on the GPU the
        2-D kernels apply it themselves (no host round trip).
    fillvalue : scalar
        The value outside ``in1`` for ``boundary="fill"``, converted to the output type as SciPy does.
    backend, variant
        As in :func:`convolve`; variants from ``sigconv.variants("conv2d")``.
    block : (bx, by) or int, optional
        CUDA launch block shape.

    Returns
    -------
    2-D ndarray of SciPy's dtype (``numpy.result_type(in1, in2)``; integers exact), same array type as ``in1``.

    Raises
    ------
    ValueError
        Inputs that are not 2-D, or empty, or complex; unknown mode or boundary; a ``fillvalue`` that is not one
        number or does not convert to the output type; "valid" with neither input at least as large as the other.

    See Also
    --------
    scipy.signal.convolve2d

    Notes
    -----
    bool and float16 inputs, which SciPy's ``convolve2d`` refuses, are computed (in float32 for float16).

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> sigconv.convolve2d(np.eye(2), np.ones((1, 2)), backend="cpu")
    array([[1., 1., 0.],
           [0., 1., 1.]])
    >>> sigconv.convolve2d(np.array([[1, 2, 3]]), np.ones((1, 3), dtype=int), "same", "wrap", backend="cpu")
    array([[6, 6, 6]])
    """
    return _filter2d_scipy(in1, in2, mode, boundary, fillvalue, backend, variant, block, reverse=True)


def correlate2d(in1, in2, mode: str = "full", boundary: str = "fill", fillvalue=0, *, backend: str = "auto",
                variant: str = "auto", block=None):
    """2-D cross-correlation, as ``scipy.signal.correlate2d``.

    See :func:`convolve2d`; equal to ``convolve2d(in1, in2[::-1, ::-1], mode)`` except that "same" is centred
    as SciPy centres it for correlate2d (for even kernel sides, half a kernel earlier than convolve2d's).

    See Also
    --------
    scipy.signal.correlate2d
    """
    return _filter2d_scipy(in1, in2, mode, boundary, fillvalue, backend, variant, block, reverse=False)
