"""Public array API: SciPy's convolution semantics on the cpu or cuda backend.

Every 1-D mode is one call of the backend contract ``corr1d(x, w, pad, out_len)`` (see
``sigconv.backends``): convolution passes the reversed taps, and ``pad``/``out_len`` select the
window of the full result that SciPy's ``mode`` names.
"""

from __future__ import annotations

import numpy as np

from sigconv._core.blocks import check_block, check_block2d
from sigconv._core.checks import (LAST_AXIS, check_axis, check_finite_array, check_mode, check_numeric, check_orientation,
                                  float_dtype)
from sigconv._core.xp import array_namespace, is_cupy, like, to_backend
from sigconv.engine.design import check_fs
from sigconv.engine.ops import backend_for, check_taps, corr1d, corr2d, window_1d, window_2d

__all__ = ["convolve", "correlate", "convolve2d", "correlate2d", "apply_fir"]


# ------------------------------------------------------------------------------------ 1-D API


def _filter1d(x, h, mode, axis, backend, variant, block, reverse: bool, causal: bool = False):
    xp = array_namespace(x)
    x = xp.asarray(x)
    check_numeric(x, "x")
    h = check_taps(h, "h")
    check_block(block)
    if x.ndim == 0:
        raise ValueError("x must be at least 1-D, got a scalar")
    explicit = axis is not LAST_AXIS
    ax = check_axis(x.ndim, axis)
    check_orientation(x.shape, ax, explicit)
    L = x.shape[ax]
    if L == 0:
        raise ValueError(f"x must hold at least one sample along axis {ax}, got shape {x.shape}")
    dtype = float_dtype(x, h)
    be = backend_for(backend, x, h)
    K = int(h.size)
    if causal:
        pad, out_len = K - 1, L
    else:
        pad, out_len = window_1d(check_mode(mode), L, K)
    xm = xp.moveaxis(x, ax, -1)
    lead = xm.shape[:-1]
    x2 = to_backend(xm.reshape(-1, L), be).astype(dtype, copy=False)
    x2 = (np if be == "cpu" else array_namespace(x2)).ascontiguousarray(x2)
    w = to_backend(h, be).astype(dtype, copy=False)
    w = w[::-1].copy() if reverse else w.copy()
    host = None
    if be == "cuda" and array_namespace(h) is np:  # the taps as uploaded, for the fft variant's spectrum cache
        host = np.asarray(h, dtype=dtype)
        host = host[::-1] if reverse else host
    y2 = corr1d(x2, w, pad, out_len, backend=be, variant=variant, block=block, host_taps=host)
    y = like(y2, x).reshape(lead + (out_len,))
    return array_namespace(y).moveaxis(y, -1, ax)


def convolve(x, h, mode: str = "full", *, axis=LAST_AXIS, backend: str = "auto", variant: str = "auto",
             block=None):
    """Convolve ``x`` with the 1-D kernel ``h`` along ``axis``, as ``scipy.signal.convolve``.

    Parameters
    ----------
    x : array_like (numpy or cupy)
        Signal: 1-D, or N-D filtered along ``axis`` (each other index is one channel).
    h : array_like, 1-D
        Filter taps; must be finite (checked for host arrays; taps already on the GPU are not checked,
        since reading them back would stall the GPU queue on every call: NaN taps then give NaN outputs,
        as in SciPy and CuPy).
    mode : {"full", "same", "valid"}
        As in SciPy. "same" is centred on the full output; "valid" swaps the roles when ``h`` is
        longer than ``x`` (convolution commutes).
    axis : int
        Axis of ``x`` to filter (default last). A 2-D input whose filtered axis is much shorter
        than the other is refused unless ``axis`` is given, since that is usually
        (frames, channels) data passed the wrong way round.
    backend : {"auto", "cpu", "cuda"}
        "auto" is cuda when a usable GPU and CuPy are present (or the input is a cupy array).
    variant : str
        Kernel variant (``sigconv.variants("conv1d")``) or "auto".
    block : int, optional
        CUDA launch block size, a multiple of 32 up to 1024.

    Returns
    -------
    ndarray
        float32 when ``x`` and ``h`` are both float32, else float64; same array type as ``x``.

    Raises
    ------
    ValueError
        Unknown mode, empty input, non-finite taps, bad axis or block, transposed-looking input.
    RuntimeError
        ``backend="cuda"`` on a machine where it cannot run (one-line reason).

    See Also
    --------
    scipy.signal.convolve : the reference semantics (same-dimensional inputs only).

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> sigconv.convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]), backend="cpu")
    array([0. , 1. , 2.5, 4. , 1.5])
    """
    return _filter1d(x, h, mode, axis, backend, variant, block, reverse=True)


def correlate(x, h, mode: str = "full", *, axis=LAST_AXIS, backend: str = "auto", variant: str = "auto",
              block=None):
    """Cross-correlate ``x`` with ``h`` along ``axis``, as ``scipy.signal.correlate`` (what cuDNN
    and ``torch.nn.functional.conv1d`` compute).

    Equal to ``convolve(x, h[::-1], mode)``; parameters, returns and errors as :func:`convolve`.

    See Also
    --------
    scipy.signal.correlate

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> sigconv.correlate(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0, 0.5]), backend="cpu")
    array([0.5, 2. , 3.5, 3. , 0. ])
    """
    return _filter1d(x, h, mode, axis, backend, variant, block, reverse=False)


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
    if phase == "zero":
        if taps.size % 2 == 0:
            raise ValueError(
                f"phase='zero' needs an odd number of taps (got {taps.size}): an even-length filter delays "
                "by half a sample; use phase='linear' or design an odd-length filter"
            )
        return _filter1d(x, taps, "same", axis, backend, variant, block, reverse=True)
    if phase == "linear":
        return _filter1d(x, taps, None, axis, backend, variant, block, reverse=True, causal=True)
    raise ValueError(f"phase must be 'zero' or 'linear', got {phase!r}")


# ------------------------------------------------------------------------------------ 2-D API


def _filter2d(x, k, mode, backend, variant, block, reverse: bool):
    xp = array_namespace(x)
    x = xp.asarray(x)
    k = array_namespace(k).asarray(k)
    check_numeric(x, "x")
    check_numeric(k, "k")
    check_mode(mode)
    check_block2d(block)
    if x.ndim != 2 or k.ndim != 2:
        raise ValueError(f"x and k must both be 2-D, got shapes {x.shape} and {k.shape}")
    if 0 in x.shape or 0 in k.shape:
        raise ValueError(f"x and k must be non-empty, got shapes {x.shape} and {k.shape}")
    if array_namespace(k) is np:  # device kernels are not checked (see _taps)
        check_finite_array(k, "k")
    dtype = float_dtype(x, k)
    be = backend_for(backend, x, k)
    pad, out_hw = window_2d(mode, x.shape, k.shape, correlate=not reverse)
    bxp = np if be == "cpu" else array_namespace(to_backend(np.zeros(1), be))
    x4 = bxp.ascontiguousarray(to_backend(x, be).astype(dtype, copy=False)[None, None])
    w4 = to_backend(k, be).astype(dtype, copy=False)
    w4 = bxp.ascontiguousarray(w4[::-1, ::-1] if reverse else w4)[None, None]
    host_k = None  # the weights exactly as uploaded (dtype, orientation): separability is judged on them
    if not is_cupy(k):
        host_k = np.asarray(k).astype(dtype)
        host_k = host_k[::-1, ::-1] if reverse else host_k
    y = corr2d(x4, w4, None, (1, 1), pad, out_hw, backend=be, variant=variant, block=block, host_weights=host_k)
    return like(y[0, 0], x)


def convolve2d(x, k, mode: str = "full", *, backend: str = "auto", variant: str = "auto", block=None):
    """2-D convolution with ``scipy.signal.convolve2d`` semantics (boundary="fill", fillvalue=0).

    Parameters
    ----------
    x, k : 2-D array_like
    mode : {"full", "same", "valid"}
    backend, variant
        As in :func:`convolve`; variants from ``sigconv.variants("conv2d")``.
    block : (bx, by) or int, optional
        CUDA launch block shape.

    Returns
    -------
    2-D ndarray (float32 when both inputs are float32, else float64).

    See Also
    --------
    scipy.signal.convolve2d

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> sigconv.convolve2d(np.eye(2), np.ones((1, 2)), backend="cpu")
    array([[1., 1., 0.],
           [0., 1., 1.]])
    """
    return _filter2d(x, k, mode, backend, variant, block, reverse=True)


def correlate2d(x, k, mode: str = "full", *, backend: str = "auto", variant: str = "auto", block=None):
    """2-D cross-correlation with ``scipy.signal.correlate2d`` semantics (boundary="fill").

    See :func:`convolve2d`; equal to ``convolve2d(x, k[::-1, ::-1], mode)``.

    See Also
    --------
    scipy.signal.correlate2d
    """
    return _filter2d(x, k, mode, backend, variant, block, reverse=False)
