"""Load what the TUI shows: a recording (``sigconv.probe``) or a CSV sensor log (``sigconv.read_log``) as (C, L)
float32.

No Textual import here: the screens call these functions from worker threads.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

import sigconv

#: What the file browser shows: anything libsndfile reads, and CSV sensor logs.
AUDIO_SUFFIXES = frozenset(
    ".wav .wave .flac .ogg .oga .opus .aif .aiff .aifc .au .snd .caf .w64 .rf64 .mp3 .voc .sf .ircam .mat4 .mat5 "
    ".pvf .xi .htk .sds .avr .wve .mpc .sd2".split())
CSV_SUFFIXES = frozenset({".csv"})
#: Longest signal held in memory for viewing (frames per channel); longer files are viewed in part.
MAX_VIEW_FRAMES = 1 << 25


def is_viewable(path: Path) -> bool:
    return path.suffix.lower() in AUDIO_SUFFIXES | CSV_SUFFIXES


@dataclass
class Signal:
    """A loaded recording or sensor log: (C, L) float32 samples at ``fs`` Hz."""

    path: Path
    kind: str  # "audio" | "csv"
    data: np.ndarray  # (C, L) float32
    fs: float
    fmt: str  # "WAV PCM_16", "CSV sensor log"
    names: list = field(default_factory=list)  # channel names
    info: object = None  # sigconv.AudioInfo for audio
    timestamps: Optional[np.ndarray] = None  # CSV timestamp column (seconds)
    time_name: str = "timestamp"
    note: str = ""

    @property
    def channels(self) -> int:
        return int(self.data.shape[0])

    @property
    def frames(self) -> int:
        return int(self.data.shape[1])

    @property
    def duration(self) -> float:
        if self.info is not None:
            return float(self.info.duration)
        return self.frames / self.fs if self.fs else 0.0

    def summary(self) -> str:
        names = f" ({', '.join(self.names)})" if self.kind == "csv" else ""
        s = (f"{self.path.name}: {self.duration:.2f} s, {self.fs:g} Hz, {self.channels} ch{names}, {self.fmt}")
        return s + (f"; {self.note}" if self.note else "")


def load_signal(path) -> Signal:
    """Audio through ``sigconv.probe`` (the CLI's checks), CSV sensor logs through :func:`load_csv`.
    Raises ``sigconv.InputError`` with one line on anything it cannot read."""
    p = Path(path)
    if p.suffix.lower() in CSV_SUFFIXES:
        return load_csv(p)
    import soundfile as sf

    info = sigconv.probe(p)
    n = min(info.frames, MAX_VIEW_FRAMES)
    try:
        x, fs = sf.read(str(p), frames=n, dtype="float32", always_2d=True)
    except Exception as exc:  # noqa: BLE001 (libsndfile's errors vary)
        raise sigconv.InputError(f"{p}: cannot read ({exc})") from None
    if not np.isfinite(x).all():
        raise sigconv.InputError(f"{p}: holds non-finite samples; refusing to filter")
    note = f"viewing the first {n} of {info.frames} frames" if n < info.frames else ""
    return Signal(p, "audio", np.ascontiguousarray(x.T), float(fs), f"{info.format} {info.subtype}",
                  names=[f"ch{i}" for i in range(info.channels)], info=info, note=note)


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
    return Signal(p, "csv", data, log.fs, "CSV sensor log", names=list(log.names), timestamps=log.timestamps,
                  time_name=log.time_name, note="; ".join(log.warnings))
