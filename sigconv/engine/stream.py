"""Stateful streaming FIR filter: packets of any length in, ``lfilter`` of the whole stream out."""

from __future__ import annotations

import numpy as np

from sigconv._core import devices as _devices
from sigconv._core.blocks import check_block
from sigconv._core.checks import check_numeric, check_positive_int, float_dtype
from sigconv._core.xp import array_namespace, is_cupy
from sigconv.engine.design import check_fs
from sigconv.engine.ops import check_taps

__all__ = ["FIRStream"]


class FIRStream:
    """Causal FIR filter that keeps its state between packets (audio callbacks, sensor feeds).

    Concatenating the outputs of :meth:`process` gives exactly ``scipy.signal.lfilter(taps, 1, x)``
    of the concatenated input, whatever the packet lengths (shorter or longer than the filter,
    empty packets included). :meth:`flush` then returns the filter's tail, the last ``K - 1``
    samples of the full convolution, and resets the stream.

    Parameters
    ----------
    taps : array_like, 1-D
    channels : int
        Number of channels in each packet.
    fs : float, optional
        Sample rate (checked, informational).
    axis : {-1, 0}
        Time axis of a 2-D packet: -1 for (channels, frames), 0 for (frames, channels) as
        soundfile and audio callbacks deliver them.
    dtype : float32 or float64, optional
        Arithmetic and output precision; default float32 for float32 taps, else float64.
    backend, variant, block
        As in :func:`sigconv.convolve`. On cuda, packets may be numpy (copied to the GPU and back)
        or cupy arrays (kept on the GPU).

    Examples
    --------
    >>> import numpy as np, scipy.signal, sigconv
    >>> taps = sigconv.design_fir("lowpass", 1000, fs=8000, numtaps=31)
    >>> x = np.random.default_rng(0).standard_normal(1000)
    >>> s = sigconv.FIRStream(taps, backend="cpu")
    >>> y = np.concatenate([s.process(p) for p in np.array_split(x, 7)])
    >>> bool(np.allclose(y, scipy.signal.lfilter(taps, 1, x)))
    True
    """

    def __init__(self, taps, channels: int = 1, fs=None, *, axis: int = -1, dtype=None, backend: str = "auto",
                 variant: str = "auto", block=None):
        taps = check_taps(taps, "taps")
        self.channels = check_positive_int(channels, "channels")
        if fs is not None:
            check_fs(fs)
        self.fs = fs
        if axis not in (-1, 0, 1):
            raise ValueError(f"axis must be -1 (channels, frames) or 0 (frames, channels), got {axis!r}")
        self.axis = -1 if axis in (-1, 1) else 0
        self.dtype = np.dtype(dtype) if dtype is not None else float_dtype(taps)
        if self.dtype not in (np.float32, np.float64):
            raise ValueError(f"dtype must be float32 or float64, got {self.dtype}")
        check_block(block)
        self.backend = _devices.resolve_backend(backend)
        self.variant, self.block = variant, block
        host_taps = taps.get() if is_cupy(taps) else np.asarray(taps)
        if self.backend == "cpu":
            from sigconv.backends.cpu import OverlapSave

            self._f = OverlapSave(host_taps, self.channels, self.dtype, method=variant)
        else:
            from sigconv.backends.cuda1d import StreamFilter

            self._f = StreamFilter(host_taps, self.channels, self.dtype, variant=variant, block=block)
        self.numtaps = int(host_taps.size)

    def _as_cn(self, packet):
        a = array_namespace(packet).asarray(packet)
        check_numeric(a, "packet")
        if a.ndim == 1 and self.channels == 1:
            return a[None, :], "1d"
        if a.ndim != 2:
            c = self.channels
            layout = f"({c}, n) (channels, frames)" if self.axis == -1 else f"(n, {c}) (frames, channels)"
            expected = f"1-D (n,) or {layout}" if c == 1 else layout
            raise ValueError(f"packet must be {expected} for a {c}-channel stream with axis={self.axis}, "
                             f"got shape {a.shape}")
        a2 = a if self.axis == -1 else a.T
        if a2.shape[0] != self.channels:
            hint = ""
            if a.shape[::-1][0] == self.channels:
                hint = f"; packets look transposed, pass axis={0 if self.axis == -1 else -1} to FIRStream"
            raise ValueError(f"packet has shape {a.shape} but the stream has {self.channels} channel(s) "
                             f"on axis {'0' if self.axis == -1 else '1'}{hint}")
        return a2, "2d"

    def _out(self, y, form):
        if form == "1d":
            return y[0]
        return y if self.axis == -1 else y.T

    def process(self, packet):
        """Filter the next packet; returns as many output samples as it holds."""
        x, form = self._as_cn(packet)
        if self.backend == "cpu" and is_cupy(x):
            x = x.get()
        return self._out(self._f.process(x), form)

    def flush(self):
        """The tail (K - 1 samples per channel) of the full convolution; resets the stream."""
        tail = self._f.flush()
        return tail[0] if self.channels == 1 else (tail if self.axis == -1 else tail.T)

    def reset(self) -> None:
        """Start a new stream (drop the history)."""
        self._f.reset()
