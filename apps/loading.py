"""Load what the TUI shows: a recording (``sigconv.probe``) or a CSV sensor log (``sigconv.read_log``).

A recording is never held whole: loading it streams it once for its overview (:mod:`apps.overview`, cached), and
the views read the frames they show on demand (:meth:`Signal.read`). A sensor log is small and sits in memory.

No Textual import here: the screens call these functions from worker threads.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

import sigconv

from . import overview as _overview
from .overview import Overview

#: What the file browser shows: anything libsndfile reads, and CSV sensor logs.
AUDIO_SUFFIXES = frozenset(
    ".wav .wave .flac .ogg .oga .opus .aif .aiff .aifc .au .snd .caf .w64 .rf64 .mp3 .voc .sf .ircam .mat4 .mat5 "
    ".pvf .xi .htk .sds .avr .wve .mpc .sd2".split())
CSV_SUFFIXES = frozenset({".csv"})


def is_viewable(path: Path) -> bool:
    return path.suffix.lower() in AUDIO_SUFFIXES | CSV_SUFFIXES


@dataclass
class Signal:
    """A loaded recording or sensor log: ``channels`` x ``frames`` samples at ``fs`` Hz, read as float32 through
    :meth:`read` (from the file, or from ``values`` for a sensor log), with its :class:`~apps.overview.Overview`."""

    path: Path
    kind: str  # "audio" | "csv"
    fs: float
    fmt: str  # "WAV PCM_16", "CSV sensor log"
    channels: int
    frames: int
    overview: Overview
    names: list = field(default_factory=list)  # channel names
    info: object = None  # sigconv.AudioInfo for audio
    values: Optional[np.ndarray] = None  # (C, L) float32 in memory (sensor logs); None: read from ``path``
    timestamps: Optional[np.ndarray] = None  # CSV timestamp column (seconds)
    time_name: str = "timestamp"
    note: str = ""

    @property
    def duration(self) -> float:
        if self.info is not None:
            return float(self.info.duration)
        return self.frames / self.fs if self.fs else 0.0

    def read(self, a: int = 0, b: Optional[int] = None) -> np.ndarray:
        """Frames [a, b) (clipped to the signal) as a (C, n) float32 array; from the file for a recording
        (``sigconv.InputError`` with one line when it cannot be read)."""
        b = self.frames if b is None else b
        a, b = max(0, min(int(a), self.frames)), max(0, min(int(b), self.frames))
        b = max(a, b)
        if self.values is not None:
            return self.values[:, a:b]
        import soundfile as sf

        try:
            x, _ = sf.read(str(self.path), start=a, stop=b, dtype="float32", always_2d=True)
        except Exception as exc:  # noqa: BLE001 (libsndfile's errors vary)
            raise sigconv.InputError(f"{self.path}: cannot read frames {a}-{b} ({exc})") from None
        return np.ascontiguousarray(x.T)

    def summary(self) -> str:
        names = f" ({', '.join(self.names)})" if self.kind == "csv" else ""
        s = (f"{self.path.name}: {self.duration:.2f} s, {self.fs:g} Hz, {self.channels} ch{names}, {self.fmt}")
        return s + (f"; {self.note}" if self.note else "")


def load_signal(path, *, progress: Optional[Callable[[float], None]] = None,
                cancel: Optional[threading.Event] = None) -> Signal:
    """Audio through ``sigconv.probe`` (the CLI's checks) and its overview (streamed once, then cached); CSV sensor
    logs through :func:`load_csv`. ``progress(fraction)`` as the file is read; :class:`apps.overview.Cancelled`
    when ``cancel`` is set. Raises ``sigconv.InputError`` with one line on anything it cannot read."""
    p = Path(path)
    if p.suffix.lower() in CSV_SUFFIXES:
        return load_csv(p)
    info = sigconv.probe(p)
    return audio_signal(info, _overview.overview(info, progress=progress, cancel=cancel))


def audio_signal(info, ov: Overview, note: str = "") -> Signal:
    """The :class:`Signal` of a probed sound file and its overview."""
    return Signal(Path(info.path), "audio", float(info.samplerate), f"{info.format} {info.subtype}",
                  int(info.channels), int(info.frames), ov, names=[f"ch{i}" for i in range(info.channels)],
                  info=info, note=note)


def array_signal(like: Signal, values: np.ndarray, note: str = "") -> Signal:
    """A signal of the same kind, rate and channel names as ``like`` holding ``values`` (C, L) in memory (a
    filtered sensor log)."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    return Signal(like.path, like.kind, like.fs, like.fmt, int(values.shape[0]), int(values.shape[1]),
                  _overview.from_array(values), names=list(like.names), values=values, timestamps=like.timestamps,
                  time_name=like.time_name, note=note)


def load_csv(p: Path) -> Signal:
    """A sensor log through ``sigconv.read_log`` (time column, rate from the median timestamp spacing, numeric
    channels), refused when a channel has an empty or non-finite value: the views and filters need every
    sample. Timestamps are seconds from the first row."""
    log = sigconv.read_log(p)
    bad = ~np.isfinite(log.values)
    if bad.any():
        row, col = (int(i) for i in np.argwhere(bad)[0])
        raise sigconv.InputError(f"{p}: column {log.names[col]!r} has {int(bad[:, col].sum())} empty or "
                                 f"non-finite value(s), the first in row {row}")
    data = np.ascontiguousarray(log.values.T, dtype=np.float32)
    return Signal(p, "csv", float(log.fs), "CSV sensor log", int(data.shape[0]), int(data.shape[1]),
                  _overview.from_array(data), names=list(log.names), values=data, timestamps=log.timestamps,
                  time_name=log.time_name, note="; ".join(log.warnings))
