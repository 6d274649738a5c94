"""NCHW multichannel 2-D convolution with torch.nn.functional.conv2d semantics."""

from __future__ import annotations

import numbers

import numpy as np

from sigconv._core.blocks import check_block2d
from sigconv._core.xp import array_namespace, is_cupy, like, to_backend
from sigconv.engine.ops import backend_for, corr2d
from sigconv._core.checks import check_finite_array, check_numeric, float_dtype

__all__ = ["conv2d", "conv2d_geometry"]

#: Largest kernel side.
MAX_TAPS = 31
#: Largest stride per axis.
MAX_STRIDE = 4


def _pair(value, name: str, lo: int, hi: int | None) -> tuple[int, int]:
    """An int or a pair of ints in [lo, hi] -> (vertical, horizontal)."""
    vals = (value, value) if isinstance(value, numbers.Integral) and not isinstance(value, bool) else value
    try:
        a, b = vals
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an integer or a pair of integers, got {value!r}") from None
    rng = f"[{lo}, {hi}]" if hi is not None else f">= {lo}"
    for v in (a, b):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < lo or (hi is not None and v > hi):
            raise ValueError(f"{name} must be an integer or a pair of integers in {rng}, got {value!r}")
    return int(a), int(b)


def conv2d_geometry(in_hw, k_hw, stride, padding):
    """((py, px), (Ho, Wo), (sy, sx)) of torch's conv2d for the given arguments (checked)."""
    sy, sx = _pair(stride, "stride", 1, MAX_STRIDE)
    (H, W), (kH, kW) = in_hw, k_hw
    if isinstance(padding, str):
        if padding == "valid":
            py = px = 0
        elif padding == "same":
            if (sy, sx) != (1, 1):
                raise ValueError(f"padding='same' needs stride 1 (as in torch), got stride {(sy, sx)}")
            # torch: total pad k-1, the extra one (even k) at the bottom/right; left pad (k-1)//2.
            py, px = (kH - 1) // 2, (kW - 1) // 2
            return (py, px), (H, W), (sy, sx)
        else:
            raise ValueError(f"padding must be an integer, a pair, 'same' or 'valid', got {padding!r}")
    else:
        py, px = _pair(padding, "padding", 0, None)
    Hp, Wp = H + 2 * py, W + 2 * px
    if kH > Hp or kW > Wp:
        raise ValueError(f"kernel ({kH}x{kW}) is larger than the padded input ({Hp}x{Wp}: input {H}x{W} with "
                         f"padding {(py, px)})")
    return (py, px), ((Hp - kH) // sy + 1, (Wp - kW) // sx + 1), (sy, sx)


def conv2d(x, w, bias=None, stride=1, padding=0, *, backend: str = "auto", variant: str = "auto", block=None):
    """2-D cross-correlation of NCHW data, as ``torch.nn.functional.conv2d``.

    ``y[n, co, r, c] = bias[co] + sum_{ci, i, j} w[co, ci, i, j] * x[n, ci, r*sy + i - py, c*sx + j - px]``
    with zeros outside the image.

    Parameters
    ----------
    x : array_like (numpy or cupy)
        Input, shape (N, Cin, H, W), or (Cin, H, W) for one unbatched image.
    w : array_like
        Weights, shape (Cout, Cin, kH, kW), kH and kW at most 31; must be finite (checked for host arrays,
        not for arrays already on the GPU, where the check would stall the GPU queue on every call).
    bias : array_like, optional
        Shape (Cout,).
    stride : int or (int, int)
        1 to 4 per axis (vertical, horizontal).
    padding : int, (int, int), "same" or "valid"
        Zero padding on each side (top/bottom, left/right). "same" keeps H x W at stride 1 with torch's
        split (total k-1, (k-1)//2 on the top/left); refused with stride > 1, as in torch.
    backend : {"auto", "cpu", "cuda"}
        "auto" is cuda when a usable GPU and CuPy are present (or ``x`` is a cupy array).
    variant : str
        Kernel variant (``sigconv.variants("conv2d")``) or "auto".
    block : (bx, by), optional
        CUDA launch block shape; the accepted shapes depend on the variant.

    Returns
    -------
    ndarray
        (N, Cout, Ho, Wo), or (Cout, Ho, Wo) for a 3-D input; float32 when ``x`` and ``w`` (and ``bias``)
        are float32, else float64; same array type as ``x``.

    Raises
    ------
    ValueError
        Wrong number of dimensions, channel mismatch between ``x`` and ``w``, bias of the wrong length,
        kernel larger than the padded input or than 31, bad stride, padding, block or variant.
    RuntimeError
        ``backend="cuda"`` where it cannot run (one-line reason).

    See Also
    --------
    torch.nn.functional.conv2d : the reference semantics.
    sigconv.correlate2d, sigconv.convolve2d : single-channel 2-D filtering with SciPy's modes.

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> x = np.arange(16.0).reshape(1, 1, 4, 4)
    >>> w = np.ones((1, 1, 2, 2))
    >>> sigconv.conv2d(x, w, backend="cpu")[0, 0]
    array([[10., 14., 18.],
           [26., 30., 34.],
           [42., 46., 50.]])
    >>> sigconv.conv2d(x, w, padding="same", backend="cpu").shape
    (1, 1, 4, 4)
    """
    x = array_namespace(x).asarray(x)
    w = array_namespace(w).asarray(w)
    check_numeric(x, "x")
    check_numeric(w, "w")
    if x.ndim not in (3, 4):
        raise ValueError(f"x must be 4-D (N, Cin, H, W) or 3-D (Cin, H, W), got shape {tuple(x.shape)}")
    if w.ndim != 4:
        raise ValueError(f"w must be 4-D (Cout, Cin, kH, kW), got shape {tuple(w.shape)}")
    unbatched = x.ndim == 3
    x4 = x[None] if unbatched else x
    N, Cin, H, W = (int(v) for v in x4.shape)
    Cout, wCin, kH, kW = (int(v) for v in w.shape)
    if 0 in x4.shape or 0 in w.shape:
        raise ValueError(f"x and w must be non-empty, got shapes {tuple(x.shape)} and {tuple(w.shape)}")
    if wCin != Cin:
        raise ValueError(f"input channels mismatch: x has Cin={Cin} (shape {tuple(x.shape)}) but w expects "
                         f"{wCin} (shape {tuple(w.shape)})")
    if kH > MAX_TAPS or kW > MAX_TAPS:
        raise ValueError(f"kernel must be at most {MAX_TAPS}x{MAX_TAPS}, got {kH}x{kW}")
    arrays = [x4, w]
    if bias is not None:
        bias = array_namespace(bias).asarray(bias)
        check_numeric(bias, "bias")
        if bias.ndim != 1 or int(bias.shape[0]) != Cout:
            raise ValueError(f"bias must have shape ({Cout},) (one value per output channel), got "
                             f"{tuple(bias.shape)}")
        arrays.append(bias)
    check_block2d(block)
    pad, out_hw, stride = conv2d_geometry((H, W), (kH, kW), stride, padding)
    if not is_cupy(w):  # device weights are not checked: reading them back would stall the GPU queue
        check_finite_array(w, "w")
    dtype = float_dtype(*arrays)
    be = backend_for(backend, *arrays)
    bxp = np
    if be == "cuda":
        import cupy

        bxp = cupy
    x4b = bxp.ascontiguousarray(to_backend(x4, be).astype(dtype, copy=False))
    wb = bxp.ascontiguousarray(to_backend(w, be).astype(dtype, copy=False))
    bb = None if bias is None else bxp.ascontiguousarray(to_backend(bias, be).astype(dtype, copy=False))
    y = corr2d(x4b, wb, bb, stride, pad, out_hw, backend=be, variant=variant, block=block,
               host_weights=None if is_cupy(w) else np.asarray(w).astype(dtype))
    y = like(y, x)
    return y[0] if unbatched else y
