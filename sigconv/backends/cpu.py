"""CPU backend: NumPy/SciPy implementations of the backend contract (see ``sigconv.backends``).

Variants (registered at the bottom): ``direct`` (np.convolve / shift-and-add, exact summation order, best
for short kernels) and ``fft`` (overlap-add/overlap-save with scipy.fft, multithreaded). ``auto`` is the
chooser's answer (:mod:`sigconv.registry.auto`). :class:`OverlapSave` is the stateful causal filter that the
streaming API and the file engine share. SciPy is imported where used, not by ``import sigconv``.
"""

from __future__ import annotations

import math
import os

import numpy as np

from sigconv._core.xp import FFT_SAFE_EXPONENT, peak_exponents
from sigconv.registry import auto as _auto
from sigconv.registry.table import Conv2dJob, Variant, register

__all__ = ["corr1d", "corr2d", "OverlapSave", "choose_fft_size", "WORKERS"]

#: Threads used by scipy.fft (pocketfft releases the GIL while it runs).
WORKERS = max(1, os.cpu_count() or 1)


# --------------------------------------------------------------------------------------------- 1-D


def _window_from_full(full: np.ndarray, K: int, pad: int, out_len: int) -> np.ndarray:
    """y[n] = full[n + K-1-pad] (zero outside): every mode is a window of the full convolution."""
    s = K - 1 - pad
    C, Lf = full.shape
    y = np.zeros((C, out_len), dtype=full.dtype)
    lo, hi = max(0, -s), min(out_len, Lf - s)
    if hi > lo:
        y[:, lo:hi] = full[:, lo + s:hi + s]
    return y


def corr1d_direct(x: np.ndarray, w: np.ndarray, pad: int, out_len: int, block=None) -> np.ndarray:
    """Direct summation, one np.convolve per channel."""
    h = w[::-1]
    full = np.stack([np.convolve(row, h, mode="full") for row in x]) if x.shape[0] else np.zeros(
        (0, x.shape[1] + w.size - 1), x.dtype)
    return _window_from_full(full.astype(x.dtype, copy=False), w.size, pad, out_len)


def fft_shifts(a: np.ndarray, axis=-1):
    """Power-of-two exponents that bring each row of ``a`` (along ``axis``) to a peak in [0.5, 1) before an FFT
    path, or None when every row's peak is in the range where the FFT needs none (:data:`FFT_SAFE_EXPONENT`):
    huge samples (1e306) overflow a transform's sums and tiny ones (1e-310) lose their bits in the subnormals,
    where a direct sum is exact. The scaling and its undoing (``np.ldexp``) are exact; a normal signal pays one
    max/min pass."""
    e = peak_exponents(a, axis=axis)
    lim = FFT_SAFE_EXPONENT[a.dtype.name] if a.dtype.name in FFT_SAFE_EXPONENT else FFT_SAFE_EXPONENT["float32"]
    return e if e.size and bool(np.any(np.abs(e) > lim)) else None


def scaled(a: np.ndarray, shifts, axis=-1) -> np.ndarray:
    """``a`` times 2^-shifts (per row along ``axis``; unchanged when ``shifts`` is None)."""
    if shifts is None:
        return a
    return np.ldexp(a, -np.expand_dims(shifts, axis)).astype(a.dtype, copy=False)


def unscaled(y: np.ndarray, shift, axis=-1) -> np.ndarray:
    """``y`` times 2^shift (exact; inf where the true value is beyond the dtype's range, without a warning)."""
    if shift is None:
        return y
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(y, np.expand_dims(shift, axis)).astype(y.dtype, copy=False)


def _total_shift(*shifts):
    """The sum of the operands' shifts (None when no operand was scaled)."""
    given = [np.asarray(s, dtype=np.int64) for s in shifts if s is not None]
    return sum(given[1:], given[0]) if given else None


def corr1d_fft(x: np.ndarray, w: np.ndarray, pad: int, out_len: int, block=None) -> np.ndarray:
    """Overlap-add through scipy.signal.oaconvolve along the last axis, each channel and the taps brought to a
    peak near 1 first when their magnitudes would overflow or underflow the transforms (:func:`fft_shifts`)."""
    import scipy.fft
    import scipy.signal

    sx, sw = fft_shifts(x), fft_shifts(w[None])
    h = scaled(w[None], sw)[:, ::-1]
    with scipy.fft.set_workers(WORKERS), np.errstate(over="ignore", invalid="ignore"):  # inf/NaN in x: NaN out
        full = scipy.signal.oaconvolve(scaled(x, sx), h, mode="full", axes=-1)
    y = _window_from_full(full.astype(x.dtype, copy=False), w.size, pad, out_len)
    return unscaled(y, _total_shift(sx, None if sw is None else sw[0]))


def corr1d(x: np.ndarray, w: np.ndarray, pad: int, out_len: int, *, variant: str = "auto", block=None) -> np.ndarray:
    """The 1-D contract on the CPU; ``variant`` is ``auto``, ``direct`` or ``fft``."""
    if variant == "auto":
        variant, _ = _auto.choose_conv1d("cpu", x.shape[0], x.shape[-1], w.size, x.dtype)
    if variant == "direct":
        return corr1d_direct(x, w, pad, out_len)
    if variant == "fft":
        return corr1d_fft(x, w, pad, out_len)
    raise ValueError(f"variant must be one of auto, direct, fft for the cpu backend, got {variant!r}")


def choose_fft_size(K: int) -> int:
    """Overlap-save FFT length for K taps: the power of two at or above 16 K (on a small x86 machine
    shorter transforms were clearly slower for long filters), at least 4096 so per-call overhead is
    amortised, at most 2^20 unless K itself needs more."""
    n = 1 << max(12, math.ceil(math.log2(16 * max(K, 1))))
    return min(n, max(1 << 20, 1 << math.ceil(math.log2(2 * K))))


class OverlapSave:
    """Causal FIR filter with state: ``process`` returns ``lfilter(taps, 1, x)`` for the stream so far.

    Parameters
    ----------
    taps : (K,) array
    channels : int
    dtype : float32 or float64 (the arithmetic and output precision)
    method : "auto", "direct" or "fft"
        "auto" asks the chooser for every block (direct summation for short filters or short blocks).
    fft : "scipy" or "numpy"
        The library of the transforms: scipy.fft on :data:`WORKERS` threads, or numpy.fft (one thread, no SciPy
        import: for short files, :func:`sigconv.registry.auto.cpu_fft_library`). Both are pocketfft.

    Blocks of any length are accepted, shorter or longer than the filter. Long blocks are split
    into overlap-save segments that go through one batched real FFT. ``ran`` counts the samples
    each method filtered: what ran, for reporting.
    """

    def __init__(self, taps, channels: int = 1, dtype=np.float64, method: str = "auto", fft: str = "scipy"):
        if method not in ("auto", "direct", "fft"):
            raise ValueError(f"variant must be one of auto, direct, fft for the cpu backend, got {method!r}")
        if fft not in ("scipy", "numpy"):
            raise ValueError(f"fft must be 'scipy' or 'numpy', got {fft!r}")
        self.method = method
        self.fft = fft
        self.dtype = np.dtype(dtype)
        self.taps = np.ascontiguousarray(taps, dtype=self.dtype)
        self.K = self.taps.size
        self.C = int(channels)
        self.nfft = choose_fft_size(self.K)
        # the fft method transforms taps of peak ~1 when theirs would overflow or underflow it (see fft_shifts)
        sh = fft_shifts(self.taps[None])
        self._tap_shift = None if sh is None else int(sh[0])
        self._fft_taps = scaled(self.taps, None if sh is None else sh[0])
        self._spectra: dict[int, np.ndarray] = {}
        self.ran = {"direct": 0, "fft": 0}
        self.reset()

    def reset(self) -> None:
        """Forget the history (start of a new stream)."""
        self.hist = np.zeros((self.C, self.K - 1), dtype=self.dtype)

    def _spectrum(self, n: int) -> np.ndarray:
        H = self._spectra.get(n)
        if H is None:
            H = self._lib().rfft(self._fft_taps, n)
            self._spectra[n] = H
        return H

    def _lib(self):
        if self.fft == "numpy":
            return np.fft
        import scipy.fft

        return scipy.fft

    def _size(self, n: int) -> int:
        """A fast transform length of at least ``n``: SciPy's next_fast_len, or the power of two above it."""
        if self.fft == "numpy":
            return 1 << (n - 1).bit_length()
        import scipy.fft

        return scipy.fft.next_fast_len(n, real=True)

    def process(self, x: np.ndarray) -> np.ndarray:
        """Filter the next (C, n) block; returns (C, n) outputs."""
        x = np.asarray(x, dtype=self.dtype)
        C, n = x.shape
        if n == 0:
            return np.zeros((C, 0), self.dtype)
        K = self.K
        ext = np.concatenate([self.hist, x], axis=1) if K > 1 else x
        if K > 1:
            self.hist = ext[:, -(K - 1):].copy()
        method = self.method
        if method == "auto":
            method, _ = _auto.choose_conv1d("cpu", C, n, K, self.dtype)
        self.ran[method] += C * n
        if method == "direct":
            y = np.stack([np.convolve(ext[c], self.taps, mode="valid") for c in range(C)])
            return y.astype(self.dtype, copy=False)
        N = self.nfft
        if n + K - 1 < N:  # short block: a smaller transform that still covers it
            N = self._size(n + K - 1)
        step = N - K + 1
        nseg = -(-n // step)
        need = (nseg - 1) * step + N
        if need > ext.shape[1]:
            ext = np.concatenate([ext, np.zeros((C, need - ext.shape[1]), self.dtype)], axis=1)
        # each call's output depends only on ``ext`` (the history is kept as it came), so scaling it per call by a
        # power of two and undoing that on the output is exact and the same whatever the block boundaries
        sx = fft_shifts(ext)
        ext = scaled(ext, sx)
        segs = np.lib.stride_tricks.sliding_window_view(ext, N, axis=1)[:, ::step][:, :nseg]
        lib = self._lib()
        kw = {"workers": WORKERS} if self.fft == "scipy" else {}
        with np.errstate(over="ignore", invalid="ignore"):  # an inf sample makes NaN outputs, not a warning
            X = lib.rfft(segs, axis=-1, **kw)
            X *= self._spectrum(N)
            y = lib.irfft(X, N, axis=-1, **kw)[:, :, K - 1:]
        y = y.reshape(C, nseg * step)[:, :n].astype(self.dtype, copy=False)
        return unscaled(y, _total_shift(sx, self._tap_shift))

    def flush(self) -> np.ndarray:
        """The filter's tail (C, K-1): the rest of the full convolution. Resets the state."""
        tail = self.process(np.zeros((self.C, self.K - 1), self.dtype))
        self.reset()
        return tail


# --------------------------------------------------------------------------------------------- 2-D


def _padded(x: np.ndarray, py: int, px: int, Hn: int, Wn: int) -> np.ndarray:
    """x placed at (py, px) inside a zero (.., Hn, Wn) canvas, cropped where it sticks out."""
    N, C, H, W = x.shape
    out = np.zeros((N, C, Hn, Wn), dtype=x.dtype)
    r0, c0 = max(0, py), max(0, px)
    sr, sc = max(0, -py), max(0, -px)
    h = min(H - sr, Hn - r0)
    w = min(W - sc, Wn - c0)
    if h > 0 and w > 0:
        out[:, :, r0:r0 + h, c0:c0 + w] = x[:, :, sr:sr + h, sc:sc + w]
    return out


def corr2d_direct(x, w, bias, stride, pad, out_hw, block=None):
    """Shift-and-add: for each tap (i, j), one tensordot over input channels. One channel in and out
    at stride 1 (spectrogram smoothing) goes through scipy.ndimage.correlate instead: one C pass over
    the image rather than kH*kW NumPy passes."""
    N, Cin, H, W = x.shape
    Cout, _, kH, kW = w.shape
    sy, sx = stride
    Ho, Wo = out_hw
    if N == 1 and Cin == 1 and Cout == 1 and stride == (1, 1) and x.dtype.kind == "f":
        import scipy.ndimage  # (it sums in float64: integer data takes the shift-and-add below, exact)

        py, px = pad
        if 0 <= py < kH and 0 <= px < kW and Ho <= H and Wo <= W:
            # "same"-like windows: ndimage's origin shifts the kernel centre (kH//2) to the pad, so the
            # image itself is the input (zero outside it) and no padded copy is made
            full = scipy.ndimage.correlate(x[0, 0], w[0, 0], mode="constant", cval=0.0,
                                           origin=(py - kH // 2, px - kW // 2))
            y = full[:Ho, :Wo]
        else:  # on the padded canvas, where ndimage centres the window starting at (r, c)
            cv = _padded(x, pad[0], pad[1], Ho - 1 + kH, Wo - 1 + kW)[0, 0]
            full = scipy.ndimage.correlate(cv, w[0, 0], mode="constant", cval=0.0)
            y = full[kH // 2:kH // 2 + Ho, kW // 2:kW // 2 + Wo]
        y = np.ascontiguousarray(y, dtype=x.dtype)[None, None]
        if bias is not None:
            y = y + np.asarray(bias, x.dtype)[None, :, None, None]
        return y
    xp = _padded(x, pad[0], pad[1], (Ho - 1) * sy + kH, (Wo - 1) * sx + kW)
    y = np.zeros((N, Cout, Ho, Wo), dtype=x.dtype)
    for i in range(kH):
        for j in range(kW):
            patch = xp[:, :, i:i + (Ho - 1) * sy + 1:sy, j:j + (Wo - 1) * sx + 1:sx]
            y += np.einsum("oc,nchw->nohw", w[:, :, i, j], patch, optimize=True)
    if bias is not None:
        y += np.asarray(bias, x.dtype)[None, :, None, None]
    return y


def corr2d_fft(x, w, bias, stride, pad, out_hw, block=None):
    """FFT correlation per (output, input) channel pair (stride 1; strided outputs are subsampled)."""
    N, Cin, H, W = x.shape
    Cout, _, kH, kW = w.shape
    sy, sx = stride
    Ho, Wo = out_hw
    import scipy.fft
    import scipy.signal

    # one power of two for the whole input and one for the weights (their channels are summed together), when
    # their magnitudes would overflow or underflow the transforms (see fft_shifts)
    ex, ew = fft_shifts(x.reshape(1, -1)), fft_shifts(w.reshape(1, -1))
    xp = _padded(scaled(x.reshape(1, -1), ex).reshape(x.shape), pad[0], pad[1], (Ho - 1) * sy + kH,
                 (Wo - 1) * sx + kW)
    w = scaled(w.reshape(1, -1), ew).reshape(w.shape)
    y = np.zeros((N, Cout, Ho, Wo), dtype=x.dtype)
    with scipy.fft.set_workers(WORKERS), np.errstate(over="ignore", invalid="ignore"):
        for n in range(N):
            for co in range(Cout):
                acc = 0
                for ci in range(Cin):
                    acc = acc + scipy.signal.oaconvolve(xp[n, ci], w[co, ci, ::-1, ::-1], mode="valid")
                y[n, co] = acc[::sy, ::sx][:Ho, :Wo]
    shift = _total_shift(ex, ew)
    if shift is not None:
        y = unscaled(y.reshape(1, -1), shift).reshape(y.shape)
    if bias is not None:
        y += np.asarray(bias, x.dtype)[None, :, None, None]
    return y


#: SciPy's convolve2d boundaries as numpy.pad modes (verified equal, extension by several periods included).
_PAD_MODES = {"wrap": "wrap", "symm": "symmetric"}


def extended(x, kshape, pad, out_hw, boundary: str, fillvalue):
    """(x on the canvas its windows read, extended by ``boundary``, and the pad left: (0, 0)). One channel."""
    (kH, kW), (py, px), (Ho, Wo) = kshape, pad, out_hw
    N, C, H, W = x.shape
    if (N, C) != (1, 1):
        raise ValueError(f"boundary {boundary!r} takes one single-channel image, got shape {tuple(x.shape)}")
    widths = ((0, 0), (0, 0), (py, max(0, Ho - 1 + kH - py - H)), (px, max(0, Wo - 1 + kW - px - W)))
    if boundary == "fill":
        return np.pad(x, widths, mode="constant", constant_values=np.asarray(fillvalue, x.dtype)), (0, 0)
    if boundary not in _PAD_MODES:
        raise ValueError(f"boundary must be 'fill', 'wrap' or 'symm', got {boundary!r}")
    return np.pad(x, widths, mode=_PAD_MODES[boundary]), (0, 0)


def corr2d(x, w, bias, stride, pad, out_hw, *, variant: str = "auto", block=None, boundary: str = "fill",
           fillvalue=0):
    """The 2-D contract on the CPU; ``variant`` is ``auto``, ``direct`` or ``fft``. ``boundary``/``fillvalue``:
    what the windows read beyond the image (see :func:`extended`); stride 1, one channel."""
    if boundary != "fill" or fillvalue != 0:
        if tuple(stride) != (1, 1) or bias is not None:
            raise ValueError("a boundary other than zero fill needs stride 1 and no bias")
        x, pad = extended(x, w.shape[2:], pad, out_hw, boundary, fillvalue)
    if variant == "auto":
        variant, _ = _auto.choose_conv2d("cpu", Conv2dJob(x.shape, w.shape, x.dtype.name, tuple(stride), tuple(pad),
                                                          tuple(out_hw)))
    if variant == "direct":
        return corr2d_direct(x, w, bias, stride, pad, out_hw)
    if variant == "fft":
        return corr2d_fft(x, w, bias, stride, pad, out_hw)
    raise ValueError(f"variant must be one of auto, direct, fft for the cpu backend, got {variant!r}")


register(Variant("direct", "conv1d", "cpu", "direct summation (np.convolve per channel); exact, O(L*K)",
                 corr1d_direct, auto=True))
register(Variant("fft", "conv1d", "cpu", "overlap-add with multithreaded scipy.fft; O(L log K)", corr1d_fft,
                 auto=True, method="fft"))
register(Variant("direct", "conv2d", "cpu", "shift-and-add over kernel taps with tensordot over channels",
                 corr2d_direct, auto=True))
register(Variant("fft", "conv2d", "cpu", "scipy.signal.oaconvolve per (output, input) channel pair; stride 1",
                 corr2d_fft, auto=True, method="fft"))
