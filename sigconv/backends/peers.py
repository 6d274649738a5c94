"""Peers: the library implementations sigconv's kernels are measured against (``sigconv bench``).

Each peer is a :class:`sigconv.registry.table.Variant` with ``kind="peer"``, so the bench, the tests and
the TUI find them in the same registry as sigconv's own variants. Importing ``sigconv.backends`` registers
them (at the bottom of this module); torch, CuPy and SciPy are imported inside the launchers.

Every launcher computes exactly what the backend contract computes (see ``sigconv.backends``), so
the bench checks peers against the same float64 reference as sigconv's variants::

    conv1d:  run(x, w, pad, out_len) -> y
        x (C, L), w (K,);  y[c, n] = sum_{j<K} w[j] * x[c, n + j - pad],  0 <= n < out_len
    conv2d:  run(x, w, bias, stride, pad, out_hw) -> y
        x (N, Cin, H, W), w (Cout, Cin, kH, kW); torch.nn.functional.conv2d's correlation,
        cropped to out_hw

``x`` and ``w`` are CuPy arrays for the cuda peers and NumPy arrays for the cpu ones. ``y`` is
whatever the library returns without a copy (a CuPy array, a NumPy array or a torch tensor, possibly
a non-contiguous view): the bench converts it only when checking, never inside the timed loop.
A peer that cannot compute a case raises :class:`NotSupported` (a ``ValueError``) with the reason,
and the bench lists the row as skipped.

Mode mapping. The library functions compute convolutions in SciPy's ``full``/``same``/``valid``
windows; a correlation with ``w`` is a convolution with ``w[::-1]``. The (pad, out_len) windows
the bench uses are SciPy's ``same`` (pad = K // 2, out_len = L), which every peer computes
natively; any other window goes through a zero-padded canvas (documented at each helper), which
is correct but not what the peer would be timed on.
"""

from __future__ import annotations

from sigconv._core.xp import array_namespace
from sigconv.registry.table import Variant, register

__all__ = ["NotSupported", "clear_caches"]


class NotSupported(ValueError):
    """The peer cannot compute this case (shape, dtype or option); the message says why."""


_GPU = ("cupy", "gpu")
_TORCH = ("torch",)

# ---------------------------------------------------------------------------------- helpers


def mode_1d(K: int, L: int, pad: int, out_len: int):
    """SciPy's mode name for the window (pad, out_len) of a correlation with K taps, else None."""
    if pad == K // 2 and out_len == L:
        return "same"
    if pad == K - 1 and out_len == L + K - 1:
        return "full"
    if L >= K and pad == 0 and out_len == L - K + 1:
        return "valid"
    return None


def canvas_1d(xp, x, pad: int, n: int):
    """(C, n) zero canvas with canvas[:, t] = x[:, t - pad]: then y = valid correlation of it."""
    C, L = x.shape
    out = xp.zeros((C, n), dtype=x.dtype)
    lo, src = max(0, pad), max(0, -pad)  # first canvas column written, first source column read
    m = min(L - src, n - lo)
    if m > 0:
        out[:, lo:lo + m] = x[:, src:src + m]
    return out


def canvas_2d(xp, x, pad, Hn: int, Wn: int):
    """(N, C, Hn, Wn) zero canvas with x placed at (py, px), cropped where it sticks out."""
    N, C, H, W = x.shape
    py, px = pad
    out = xp.zeros((N, C, Hn, Wn), dtype=x.dtype)
    r0, c0, sr, sc = max(0, py), max(0, px), max(0, -py), max(0, -px)
    h, w = min(H - sr, Hn - r0), min(W - sc, Wn - c0)
    if h > 0 and w > 0:
        out[:, :, r0:r0 + h, c0:c0 + w] = x[:, :, sr:sr + h, sc:sc + w]
    return out


def signal_corr1d(fn, x, w, pad: int, out_len: int, *, axes: bool):
    """Correlation through a SciPy-style convolution ``fn(in1, in2, mode[, axes=-1])``.

    ``fn`` is scipy.signal.oaconvolve, cupyx.scipy.signal.convolve, ... A correlation with w is a
    convolution with w[::-1]. For C > 1 the taps become a (1, K) array, which convolves each row
    alone (size 1 along the channel axis keeps C rows in every mode). Windows other than SciPy's
    modes: full convolution, then y[n] = full[n + K-1-pad] (zero outside).
    """
    xp = array_namespace(x)
    C, L = x.shape
    K = w.shape[0]
    h = w[::-1]
    mode = mode_1d(K, L, pad, out_len) or "full"
    kw = {"axes": -1} if axes else {}
    if C == 1:
        y = fn(x[0], h, mode, **kw)[None, :]
    else:
        y = fn(x, h[None, :], mode, **kw)
    if mode_1d(K, L, pad, out_len):
        return y
    s = K - 1 - pad  # offset of output n in the full result
    out = xp.zeros((C, out_len), dtype=y.dtype)
    lo, hi = max(0, -s), min(out_len, y.shape[1] - s)
    if hi > lo:
        out[:, lo:hi] = y[:, lo + s:hi + s]
    return out


def ndimage_corr1d(ndi, x, w, pad: int, out_len: int):
    """Correlation through ``ndi.convolve1d`` (scipy.ndimage or cupyx.scipy.ndimage), mode='constant'.

    ndimage.correlate1d with origin 0 centres the taps at K // 2:
    z[i] = sum_j w[j] x[i + j - K//2], i.e. our "same" window. convolve1d(x, h, origin=o) equals
    correlate1d(x, h[::-1], origin=-o - e) with e = 1 for even K, so h = w[::-1], o = -e.
    Any other window: y[n] = sum_j w[j] canvas[n + j] = z'[n + K//2] over the canvas.
    """
    xp = array_namespace(x)
    C, L = x.shape
    K = w.shape[0]
    origin = -1 if K % 2 == 0 else 0
    if mode_1d(K, L, pad, out_len) == "same":
        return ndi.convolve1d(x, w[::-1], axis=-1, mode="constant", cval=0.0, origin=origin)
    cv = canvas_1d(xp, x, pad, out_len + K - 1)
    z = ndi.convolve1d(cv, w[::-1], axis=-1, mode="constant", cval=0.0, origin=origin)
    return z[:, K // 2:K // 2 + out_len]


def _single_channel(x, w, bias, stride):
    if x.shape[0] != 1 or x.shape[1] != 1 or w.shape[0] != 1:
        raise NotSupported(f"single-channel only (N=Cin=Cout=1), got x {tuple(x.shape)} and w {tuple(w.shape)}")
    if tuple(stride) != (1, 1):
        raise NotSupported(f"stride 1 only, got {tuple(stride)}")


def _add_bias(y, bias):
    if bias is not None:
        y = y + bias.reshape(1, -1, 1, 1).astype(y.dtype)
    return y


def _flipped_single(x, w, bias, stride, out_hw):
    """The single-channel peers' common start: (canvas maker, k = w[::-1, ::-1], kH, kW, same_window, Ho, Wo),
    ``same_window`` the pad of SciPy's "same" ((kH // 2, kW // 2)) when the output has the input's size."""
    _single_channel(x, w, bias, stride)
    kH, kW = w.shape[2:]
    Ho, Wo = out_hw
    same = (kH // 2, kW // 2) if (Ho, Wo) == tuple(x.shape[2:]) else None

    def canvas(pad):
        return canvas_2d(array_namespace(x), x, pad, Ho + kH - 1, Wo + kW - 1)[0, 0]

    return canvas, w[0, 0, ::-1, ::-1], kH, kW, same, Ho, Wo


def ndimage_corr2d(ndi, x, w, bias, stride, pad, out_hw):
    """Single-channel correlation through ``ndi.convolve`` (mode='constant'), as :func:`ndimage_corr1d`
    per axis: h = w[::-1, ::-1], origin -1 on each even-sized axis; other windows via a canvas."""
    canvas, k, kH, kW, same, Ho, Wo = _flipped_single(x, w, bias, stride, out_hw)
    origin = (-1 if kH % 2 == 0 else 0, -1 if kW % 2 == 0 else 0)
    if tuple(pad) == same:
        y = ndi.convolve(x[0, 0], k, mode="constant", cval=0.0, origin=origin)
    else:
        y = ndi.convolve(canvas(pad), k, mode="constant", cval=0.0, origin=origin)[kH // 2:kH // 2 + Ho,
                                                                                    kW // 2:kW // 2 + Wo]
    return _add_bias(y[None, None], bias)


def signal_corr2d(fn, x, w, bias, stride, pad, out_hw):
    """Single-channel correlation through ``fn(in1, in2, mode)`` (scipy/cupyx signal.convolve2d):
    SciPy's modes natively (see ``sigconv.engine.ops.window_2d``), other windows via a canvas."""
    canvas, k, kH, kW, same, Ho, Wo = _flipped_single(x, w, bias, stride, out_hw)
    H, W = x.shape[2:]
    pad = tuple(pad)
    if pad == same:
        y = fn(x[0, 0], k, "same")
    elif pad == (kH - 1, kW - 1) and (Ho, Wo) == (H + kH - 1, W + kW - 1):
        y = fn(x[0, 0], k, "full")
    else:
        y = fn(canvas(pad), k, "valid")
    return _add_bias(y[None, None], bias)


# ---------------------------------------------------------------------------------- torch (cuDNN)

# torch views of CuPy buffers and repeated depthwise weights, keyed by device pointer and shape, so
# that the timed loop does no conversion. The views keep their buffers alive: clear between cases.
_TORCH_CACHE: dict = {}


def clear_caches() -> None:
    """Drop cached torch views (call between benchmark cases so their buffers can be freed)."""
    _TORCH_CACHE.clear()


def _torch(tf32: bool):
    import torch

    torch.backends.cudnn.benchmark = True
    try:
        torch.backends.cudnn.allow_tf32 = tf32
    except Exception:  # newer torch may only accept the fp32_precision API
        torch.backends.cudnn.conv.fp32_precision = "tf32" if tf32 else "ieee"
    return torch


def _as_torch(torch, a, key_extra=()):
    key = ("t", a.data.ptr, a.shape, a.strides, str(a.dtype)) + tuple(key_extra)
    t = _TORCH_CACHE.get(key)
    if t is None:
        if len(_TORCH_CACHE) > 256:
            _TORCH_CACHE.clear()
        t = torch.from_dlpack(a)
        _TORCH_CACHE[key] = t
    return t


def _torch_conv1d(x, w, pad: int, out_len: int, tf32: bool):
    torch = _torch(tf32)
    C, L = x.shape
    K = w.shape[0]
    n = L + 2 * pad - K + 1  # conv1d's output length with zero padding `pad` on both sides
    if out_len > n:
        raise NotSupported(f"window (pad={pad}, out_len={out_len}) is longer than conv1d's {n} outputs")
    xt = _as_torch(torch, x).view(1, C, L)
    key = ("w1", w.data.ptr, K, C, str(w.dtype))
    wt = _TORCH_CACHE.get(key)
    if wt is None:  # depthwise: the same taps for each of the C groups, (C, 1, K) contiguous
        wt = torch.from_dlpack(w).view(1, 1, K).repeat(C, 1, 1).contiguous()
        _TORCH_CACHE[key] = wt
    y = torch.nn.functional.conv1d(xt, wt, padding=pad, groups=C)
    return y[0, :, :out_len]


def run_cudnn_1d(x, w, pad, out_len):
    """cuDNN through torch.nn.functional.conv1d (a correlation, like the contract), TF32 off."""
    return _torch_conv1d(x, w, pad, out_len, tf32=False)


def _torch_conv2d(x, w, bias, stride, pad, out_hw, tf32: bool):
    torch = _torch(tf32)
    N, Cin, H, W = x.shape
    Cout, _, kH, kW = w.shape
    sy, sx = stride
    py, px = pad
    Ho, Wo = out_hw
    n_h = (H + 2 * py - kH) // sy + 1
    n_w = (W + 2 * px - kW) // sx + 1
    if Ho > n_h or Wo > n_w:
        raise NotSupported(f"out_hw {tuple(out_hw)} exceeds conv2d's {n_h}x{n_w} outputs")
    xt = _as_torch(torch, x)
    wt = _as_torch(torch, w)
    bt = None if bias is None else _as_torch(torch, bias)
    y = torch.nn.functional.conv2d(xt, wt, bt, stride=(sy, sx), padding=(py, px))
    return y[:, :, :Ho, :Wo]


def run_cudnn_2d(x, w, bias, stride, pad, out_hw):
    """cuDNN through torch.nn.functional.conv2d, float32 arithmetic (TF32 off)."""
    return _torch_conv2d(x, w, bias, stride, pad, out_hw, tf32=False)


def run_cudnn_tf32_2d(x, w, bias, stride, pad, out_hw):
    """cuDNN with TF32 tensor cores allowed (what torch does by default for convolutions)."""
    return _torch_conv2d(x, w, bias, stride, pad, out_hw, tf32=True)


# ---------------------------------------------------------------------------------- CuPy


def run_cupyx_direct_1d(x, w, pad, out_len):
    import cupyx.scipy.signal as sig

    return signal_corr1d(lambda a, b, mode: sig.convolve(a, b, mode, method="direct"), x, w, pad, out_len,
                         axes=False)


def run_cupyx_fft_1d(x, w, pad, out_len):
    import cupyx.scipy.signal as sig

    if x.shape[0] == 1:  # exactly convolve(method="fft"), which is fftconvolve over all axes
        return signal_corr1d(lambda a, b, mode: sig.convolve(a, b, mode, method="fft"), x, w, pad, out_len,
                             axes=False)
    return signal_corr1d(sig.fftconvolve, x, w, pad, out_len, axes=True)


def run_cupyx_oa_1d(x, w, pad, out_len):
    import cupyx.scipy.signal as sig

    return signal_corr1d(sig.oaconvolve, x, w, pad, out_len, axes=True)


def run_cupyx_ndimage_1d(x, w, pad, out_len):
    import cupyx.scipy.ndimage as ndi

    return ndimage_corr1d(ndi, x, w, pad, out_len)


def run_cupyx_ndimage_2d(x, w, bias, stride, pad, out_hw):
    import cupyx.scipy.ndimage as ndi

    return ndimage_corr2d(ndi, x, w, bias, stride, pad, out_hw)


def run_cupyx_convolve2d(x, w, bias, stride, pad, out_hw):
    import cupyx.scipy.signal as sig

    return signal_corr2d(sig.convolve2d, x, w, bias, stride, pad, out_hw)


# ---------------------------------------------------------------------------------- SciPy (CPU)


def run_scipy_1d(x, w, pad, out_len):
    """scipy.signal.oaconvolve along the last axis, scipy.fft's workers on every core."""
    import os

    import scipy.fft
    import scipy.signal

    with scipy.fft.set_workers(os.cpu_count() or 1):
        return signal_corr1d(scipy.signal.oaconvolve, x, w, pad, out_len, axes=True)


def run_scipy_2d(x, w, bias, stride, pad, out_hw):
    """One channel, stride 1: scipy.ndimage.convolve. Otherwise scipy.signal.correlate of the padded
    (Cin, H', W') input with each (Cin, kH, kW) filter in 'valid' mode, subsampled by the stride."""
    import numpy as np
    import scipy.ndimage
    import scipy.signal

    N, Cin, H, W = x.shape
    Cout, _, kH, kW = w.shape
    if N == Cin == Cout == 1 and tuple(stride) == (1, 1):
        return ndimage_corr2d(scipy.ndimage, x, w, bias, stride, pad, out_hw)
    sy, sx = stride
    Ho, Wo = out_hw
    cv = canvas_2d(np, x, pad, (Ho - 1) * sy + kH, (Wo - 1) * sx + kW)
    y = np.empty((N, Cout, Ho, Wo), dtype=x.dtype)
    for n in range(N):
        for co in range(Cout):
            full = scipy.signal.correlate(cv[n], w[co], mode="valid")[0]  # (H'-kH+1, W'-kW+1)
            y[n, co] = full[::sy, ::sx][:Ho, :Wo]
    return _add_bias(y, bias)


# ---------------------------------------------------------------------------------- registry


def _single_channel_stride1(job):
    if job.x_shape[0] != 1 or not job.single_channel:
        return "single-channel only (N=Cin=Cout=1)"
    if tuple(job.stride) != (1, 1):
        return "stride 1 only"
    return None


for _v in (
    Variant("cudnn", "conv1d", "cuda",
            "torch.nn.functional.conv1d (cuDNN), TF32 off, cudnn.benchmark, depthwise (groups=C) for C > 1",
            run_cudnn_1d, kind="peer", requires=_TORCH),
    Variant("cupyx.convolve-direct", "conv1d", "cuda", "cupyx.scipy.signal.convolve(method='direct')",
            run_cupyx_direct_1d, kind="peer", requires=_GPU),
    Variant("cupyx.convolve-fft", "conv1d", "cuda",
            "cupyx.scipy.signal.convolve(method='fft') (fftconvolve along the last axis for C > 1)",
            run_cupyx_fft_1d, kind="peer", requires=_GPU),
    Variant("cupyx.oaconvolve", "conv1d", "cuda", "cupyx.scipy.signal.oaconvolve along the last axis",
            run_cupyx_oa_1d, kind="peer", requires=_GPU),
    Variant("cupyx.ndimage.convolve1d", "conv1d", "cuda", "cupyx.scipy.ndimage.convolve1d, mode='constant'",
            run_cupyx_ndimage_1d, kind="peer", requires=_GPU),
    Variant("scipy", "conv1d", "cpu", "scipy.signal.oaconvolve on the CPU (reference only)",
            run_scipy_1d, kind="peer"),
    Variant("cudnn", "conv2d", "cuda", "torch.nn.functional.conv2d (cuDNN), float32 with TF32 off, cudnn.benchmark",
            run_cudnn_2d, kind="peer", requires=_TORCH),
    Variant("cudnn-tf32", "conv2d", "cuda",
            "torch.nn.functional.conv2d (cuDNN) with TF32 tensor cores on (10-bit mantissa: not fp32-exact)",
            run_cudnn_tf32_2d, kind="peer", requires=_TORCH, dtypes=("float32",),
            extra={"tol": 1e-2}),
    Variant("cupyx.ndimage.convolve", "conv2d", "cuda", "cupyx.scipy.ndimage.convolve, mode='constant' (1 channel)",
            run_cupyx_ndimage_2d, kind="peer", requires=_GPU,
            extra={"single_channel": True}, constraint=_single_channel_stride1),
    Variant("cupyx.convolve2d", "conv2d", "cuda", "cupyx.scipy.signal.convolve2d (1 channel)",
            run_cupyx_convolve2d, kind="peer", requires=_GPU,
            extra={"single_channel": True}, constraint=_single_channel_stride1),
    Variant("scipy", "conv2d", "cpu",
            "scipy.ndimage.convolve (1 channel) or scipy.signal.correlate per output channel, on the CPU",
            run_scipy_2d, kind="peer"),
):
    register(_v)
del _v
