"""The visible window of a signal (zoom and pan), and what the signal view draws for it.

The window's samples are read from the file on demand when it spans at most :data:`READ_LIMIT` frames: the
waveform is the exact min/max of those samples and the spectrogram their STFT. A longer window is drawn from the
overview (:mod:`apps.overview`): the envelope at the overview's bin resolution, its coarse spectrogram. Either
way nothing proportional to the file is read or held.

No Textual import here: the signal view computes a window's data in a worker thread.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional

import numpy as np

from .loading import Signal
from .running import HOP, N_FFT, spectrogram

#: Longest window whose samples are read for the views (frames): 43.7 s at 48 kHz, 8 MiB of stereo float32.
READ_LIMIT = 1 << 21
#: Shortest window (frames).
MIN_FRAMES = 256
#: Columns of the envelopes the view computes (the plots draw at most this many points).
COLUMNS = 400
#: Most STFT frames of a window's spectrogram (the view pools it to its width: two frames a cell at most); a
#: longer window takes its frames at a larger hop.
SPEC_COLUMNS = 512


@dataclass(frozen=True)
class Viewport:
    """Frames [start, start + length) of a signal of ``frames``."""

    frames: int
    start: int = 0
    length: int = 0

    @classmethod
    def whole(cls, frames: int) -> "Viewport":
        return cls(int(frames), 0, int(frames))

    @property
    def stop(self) -> int:
        return self.start + self.length

    @property
    def is_whole(self) -> bool:
        return self.start == 0 and self.length >= self.frames

    def _placed(self, start: float, length: int) -> "Viewport":
        length = int(min(max(length, min(MIN_FRAMES, self.frames)), self.frames))
        start = int(round(min(max(start, 0), self.frames - length)))
        return replace(self, start=start, length=length)

    def zoomed(self, factor: float) -> "Viewport":
        """``factor`` > 1 zooms in (a shorter window), < 1 out, about the window's centre."""
        centre = self.start + self.length / 2
        length = int(round(self.length / factor))
        return self._placed(centre - length / 2, length)

    def panned(self, fraction: float) -> "Viewport":
        """Moved by ``fraction`` of its length (negative: earlier), stopping at the ends."""
        return self._placed(self.start + fraction * self.length, self.length)

    def describe(self, fs: float) -> str:
        """"0:12.500-0:25.000 of 60:00.000" (the whole file: "whole file, 60:00.000")."""
        total = self.frames / fs
        if self.is_whole:
            return f"whole file, {clock(total, total)}"
        return f"{clock(self.start / fs, total)}-{clock(self.stop / fs, total)} of {clock(total, total)}"


def clock(seconds: float, longest: float = 0.0) -> str:
    """m:ss.sss; h:mm:ss.sss where ``seconds`` or ``longest`` (the file's duration) reaches an hour."""
    if max(seconds, longest) >= 3600:
        h, r = divmod(seconds, 3600)
        m, s = divmod(r, 60)
        return f"{int(h)}:{int(m):02d}:{s:06.3f}"
    m, s = divmod(seconds, 60)
    return f"{int(m)}:{s:06.3f}"


def minmax(x: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(column start index, min, max) of ``x`` (..., L) in ``n`` columns (at most one per sample)."""
    L = x.shape[-1]
    n = max(1, min(n, L))
    edges = np.linspace(0, L, n + 1).astype(np.int64)[:-1]
    return edges, np.minimum.reduceat(x, edges, axis=-1), np.maximum.reduceat(x, edges, axis=-1)


@dataclass
class Trace:
    """What the view draws of one signal in one window: channel 0's envelope (times in seconds) and spectrogram."""

    t: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    spec: np.ndarray
    exact: bool  # from the samples (True) or from the overview (False)


def trace(sig: Signal, vp: Viewport, columns: int = COLUMNS) -> Trace:
    """Channel 0 of ``sig`` over the window ``vp``: read when it spans at most :data:`READ_LIMIT` frames, else
    from the overview."""
    a, b = vp.start, min(vp.stop, sig.frames)
    if b - a <= READ_LIMIT:
        x = sig.read(a, b)[0]
        idx, lo, hi = minmax(x, columns)
        hop = max(HOP, -(-(x.size - N_FFT) // SPEC_COLUMNS))
        return Trace((a + idx) / sig.fs, lo, hi, spectrogram(x, hop=hop), True)
    idx, lo, hi = sig.overview.envelope(a, b, columns)
    return Trace(idx / sig.fs, lo[0], hi[0], sig.overview.spectrogram(a, b), False)


def whole(sig: Signal, columns: int = COLUMNS) -> Trace:
    """Channel 0 of the whole signal, from its overview (no spectrogram needed: the overview plot is a waveform)."""
    idx, lo, hi = sig.overview.envelope(0, sig.frames, columns)
    return Trace(idx / sig.fs, lo[0], hi[0], np.zeros((1, 1), np.float32), False)


@dataclass
class WindowView:
    """Everything the signal view draws for one window: the whole file's envelope, the window's traces before
    and (after a run) after filtering."""

    viewport: Viewport
    overview: Trace
    before: Trace
    after: Optional[Trace] = None


def window_view(sig: Signal, vp: Viewport, after: Optional[Signal] = None, columns: int = COLUMNS) -> WindowView:
    return WindowView(vp, whole(sig, columns), trace(sig, vp, columns),
                      trace(after, vp, columns) if after is not None else None)
