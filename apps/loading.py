"""Load what the TUI shows: a recording through ``sigconv.probe`` or a CSV sensor log, as (C, L) float32.

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
    """A sensor log: a timestamp column and numeric channels; the rate is 1 / median timestamp spacing."""
    InputError = sigconv.InputError

    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a sensor log")
    try:
        import pyarrow as pa
        import pyarrow.csv as pcsv
        import pyarrow.types as pt
    except ImportError:
        raise InputError(f"{p}: reading CSV logs needs pyarrow (pip install pyarrow)") from None
    try:
        table = pcsv.read_csv(str(p))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{p}: not a CSV sensor log sigconv can read ({str(exc).splitlines()[0]})") from None
    if table.num_rows < 2:
        raise InputError(f"{p}: holds {table.num_rows} row(s); a sensor log needs at least 2")
    cols = table.column_names
    tname = next((c for c in cols if c.strip().lower() in ("timestamp", "time", "t", "time_s", "seconds")), cols[0])
    tcol = table.column(tname)
    if pt.is_timestamp(tcol.type):
        ts = tcol.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64)
        unit = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[tcol.type.unit]
        ts = (ts - ts[0]) * unit
    elif pt.is_integer(tcol.type) or pt.is_floating(tcol.type):
        ts = tcol.to_numpy(zero_copy_only=False).astype(np.float64)
    else:
        raise InputError(f"{p}: timestamp column {tname!r} is {tcol.type}, not numbers or times")
    names, chans = [], []
    for c in cols:
        if c == tname:
            continue
        col = table.column(c)
        if pt.is_integer(col.type) or pt.is_floating(col.type):
            if col.null_count:
                raise InputError(f"{p}: column {c!r} has {col.null_count} empty value(s)")
            names.append(c)
            chans.append(col.to_numpy(zero_copy_only=False).astype(np.float32))
    if not chans:
        raise InputError(f"{p}: no numeric channel columns besides {tname!r}")
    if not np.isfinite(ts).all():
        raise InputError(f"{p}: timestamp column {tname!r} holds empty or non-finite values")
    dt = float(np.median(np.diff(ts)))
    if not dt > 0:
        raise InputError(f"{p}: timestamps in {tname!r} do not increase (median spacing {dt:g})")
    data = np.stack(chans)
    if not np.isfinite(data).all():
        bad = np.argwhere(~np.isfinite(data))[0]
        raise InputError(f"{p}: non-finite value in column {names[bad[0]]!r}, row {int(bad[1])}")
    return Signal(p, "csv", data, 1.0 / dt, "CSV sensor log", names=names, timestamps=ts, time_name=tname)
