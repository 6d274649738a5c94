"""Readers and writers of the batch formats, and the time-series chores around them.

Tables (CSV, Parquet) are read through pyarrow, typed. The time column is kept as it was read (a
CSV time column is read as text, so its text is written back byte for byte) and only parsed to
seconds to infer the rate. Channels are float64 while filtering; a float32 column is written back
as float32, an integer column as float64 (filtered values are not integers). Nulls and NaN are gaps.

NPY: (frames,) or (frames, channels) of numbers. The rate comes from ``--fs`` or from a sidecar
JSON file beside the array, ``NAME.npy.json`` holding ``{"fs": RATE}``; the sidecar is copied
next to the output. NPY files are memory-mapped and, when they hold no gaps, streamed block by
block into a memory-mapped output, so an array larger than memory is fine.
"""

from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from sigconv._core.errors import InputError

#: Column names taken as the time column (case-insensitive), in order of preference.
TIME_NAMES = ("timestamp", "time", "datetime", "date_time", "t", "ts", "time_s", "seconds", "epoch", "date")
#: Spacing deviating from the median by more than this fraction counts as irregular.
IRREGULAR_TOL = 0.01


@dataclass
class Table:
    """A table being filtered: the pyarrow table, its time column and its channel columns."""

    table: object  # pyarrow.Table
    time_column: Optional[str]
    channels: list
    warnings: list = field(default_factory=list)


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


# ------------------------------------------------------------------------------------ tables


def _csv_header(path: Path) -> list[str]:
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        line = f.readline()
    if not line.strip():
        raise InputError(f"{path}: file is empty" if not line else f"{path}: the first line (header) is empty")
    return next(csv.reader([line]))


def detect_time_column(names, types=None, asked: Optional[str] = None, path="") -> Optional[str]:
    """``asked`` when given (must exist), else a column named like a time axis, else the first
    column of a timestamp type, else None."""
    if asked is not None:
        if asked not in names:
            raise InputError(f"{path}: no column named {asked!r} for --time-column "
                             f"(columns: {', '.join(names[:12])}{' ...' if len(names) > 12 else ''})")
        return asked
    lower = {n.lower().strip(): n for n in names}
    for want in TIME_NAMES:
        if want in lower:
            return lower[want]
    for n in names:
        if re.match(r"^(time|timestamp)[ _]?\(?(s|ms|us|ns|sec|seconds)?\)?$", n.lower().strip()):
            return n
    if types is not None:
        import pyarrow as pa

        for n, t in zip(names, types):
            if pa.types.is_timestamp(t) or pa.types.is_date(t):
                return n
    return None


def read_table(path: Path, kind: str, time_column: Optional[str]):
    """(pyarrow table, time column name or None). One-line InputError on anything unreadable."""
    import pyarrow as pa

    try:
        if kind == "csv":
            import pyarrow.csv as pcsv

            if path.stat().st_size == 0:
                raise InputError(f"{path}: file is empty")
            names = _csv_header(path)
            tc = detect_time_column(names, None, time_column, path)
            types = {tc: pa.string()} if tc is not None else {}
            table = pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types=types,
                                                                           strings_can_be_null=False))
        else:
            import pyarrow.parquet as pq

            if path.stat().st_size == 0:
                raise InputError(f"{path}: file is empty")
            table = pq.read_table(path)
            tc = detect_time_column(table.column_names, table.schema.types, time_column, path)
    except InputError:
        raise
    except (pa.ArrowException, ValueError, UnicodeDecodeError, OSError) as exc:
        what = "CSV" if kind == "csv" else "Parquet"
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable {what} file ({msg})") from None
    if table.num_rows == 0:
        raise InputError(f"{path}: holds no data rows")
    return table, tc


def time_seconds(col, name: str, path) -> np.ndarray:
    """The time column as float64 seconds (numbers are taken as seconds; timestamps relative to
    the first row). NaN where a value is missing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    try:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            try:
                col = pc.cast(col, pa.float64())
            except pa.ArrowInvalid:
                col = pc.cast(col, pa.timestamp("ns"))
            t = col.type
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            # int64 nanoseconds, relative to the first valid row before going to float64 (epoch
            # nanoseconds do not fit a float64 exactly); missing values become NaN
            ns = pc.cast(pc.cast(col, pa.timestamp("ns")), pa.int64())
            valid = np.asarray(pc.is_valid(ns).to_numpy(zero_copy_only=False), dtype=bool)
            ints = pc.fill_null(ns, 0).to_numpy(zero_copy_only=False).astype(np.int64)
            first = ints[valid][0] if valid.any() else 0
            v = (ints - first).astype(np.float64) / 1e9
            v[~valid] = np.nan
            return v
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            return pc.fill_null(pc.cast(col, pa.float64()), float("nan")).to_numpy(zero_copy_only=False)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    raise InputError(f"{path}: time column {name!r} holds neither numbers (seconds) nor timestamps; "
                     "pass --time-column or --fs")


def file_rate(tc: Optional[str], time_column, fs_asked: Optional[float], path) -> tuple[float, list]:
    """(sample rate, warnings) of a table: from the time column (``time_column()`` returns it; read only when
    there is one) by its median spacing, else ``--fs``; InputError when neither exists."""
    if tc is None:
        if fs_asked is None:
            raise InputError(f"{path}: no time column found (looked for {', '.join(TIME_NAMES[:4])}, ...); "
                             "pass --time-column or --fs")
        return float(fs_asked), []
    return infer_rate(time_seconds(time_column(), tc, path), path, fs_asked)


def nice_rate(fs: float) -> float:
    """Round a rate inferred from float timestamps (100.00000000000001 -> 100)."""
    r = round(fs)
    if r > 0 and abs(fs - r) <= 1e-6 * fs:
        return float(r)
    return float(f"{fs:.9g}")


def infer_rate(t: np.ndarray, path, fs: Optional[float] = None) -> tuple[float, list]:
    """Rate from the median spacing of ``t`` (seconds), and the warnings about the timestamps.
    Non-monotonic or missing timestamps are an error unless ``fs`` is given."""
    warnings = []
    problems = []
    n = t.size
    bad = ~np.isfinite(t)
    if bad.any():
        problems.append(f"{int(bad.sum())} missing timestamp(s), first at row {int(np.argmax(bad))}")
    d = np.diff(t)
    ok = np.isfinite(d)
    back = np.flatnonzero(ok & (d <= 0))
    if back.size:
        problems.append(f"non-monotonic timestamps: {back.size} step(s) <= 0, first between rows {back[0]} "
                        f"and {back[0] + 1} ({t[back[0]]:g} -> {t[back[0] + 1]:g})")
    pos = d[ok & (d > 0)]
    med = float(np.median(pos)) if pos.size else float("nan")
    if pos.size:
        off = np.abs(pos - med) > IRREGULAR_TOL * med
        if off.any():
            warnings.append(f"irregular timestamps: {int(off.sum())} of {pos.size} steps differ from the median "
                            f"spacing {med:.6g} s by more than {IRREGULAR_TOL:.0%} (from {pos.min():.6g} to "
                            f"{pos.max():.6g} s); filtered as if uniformly sampled")
    if fs is None:
        if problems:
            raise InputError(f"{path}: {'; '.join(problems)}; cannot infer the rate (pass --fs to filter anyway)")
        if n < 2 or not pos.size:
            raise InputError(f"{path}: needs at least 2 rows with increasing timestamps to infer the rate; pass --fs")
        return nice_rate(1.0 / med), warnings
    warnings = problems + warnings
    if pos.size and abs(1.0 / med - fs) > IRREGULAR_TOL * fs:
        warnings.append(f"--fs {fs:g} Hz differs from the rate of the timestamps ({nice_rate(1.0 / med):g} Hz)")
    return float(fs), warnings


def numeric_type(t) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(t) or pa.types.is_floating(t)) and not pa.types.is_boolean(t)


def choose_channels(table, time_column, columns, path) -> list[str]:
    """``columns`` when given (each must exist and be numeric), else every numeric column but time."""
    names = table.column_names
    if columns:
        for c in columns:
            if c not in names:
                raise InputError(f"{path}: no column named {c!r} for --columns")
            if c == time_column:
                raise InputError(f"{path}: --columns names the time column {c!r}")
            t = table.schema.field(c).type
            if not numeric_type(t):
                raise InputError(f"{path}: column {c!r} is not numeric ({t}); it cannot be filtered")
        return list(columns)
    chans = [n for n in names if n != time_column and numeric_type(table.schema.field(n).type)]
    if not chans:
        raise InputError(f"{path}: no numeric columns to filter")
    return chans


def column_values(table, name) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values with NaN for nulls, null mask)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column(name)
    nulls = col.is_null().to_numpy(zero_copy_only=False) if col.null_count else np.zeros(len(col), bool)
    vals = pc.fill_null(pc.cast(col, pa.float64()), float("nan")).to_numpy(zero_copy_only=False)
    return np.array(vals, dtype=np.float64), np.asarray(nulls, dtype=bool)


def replace_column(table, name, y: np.ndarray, nulls: np.ndarray):
    import pyarrow as pa

    old = table.schema.field(name)
    typ = pa.float32() if old.type == pa.float32() else pa.float64()
    arr = pa.array(y.astype(typ.to_pandas_dtype(), copy=False), type=typ, mask=nulls if nulls.any() else None)
    i = table.column_names.index(name)
    return table.set_column(i, pa.field(name, typ, metadata=old.metadata), arr)


def write_table(table, kind: str, tmp: Path) -> None:
    if kind == "csv":
        import pyarrow.csv as pcsv

        import pyarrow as pa

        import io

        import pyarrow as pa

        head = io.StringIO()
        csv.writer(head, lineterminator="\n").writerow(table.column_names)  # quotes only where needed
        with open(tmp, "wb") as f:
            f.write(head.getvalue().encode())
            try:  # no quotes unless a value needs them (then pyarrow quotes every string)
                pcsv.write_csv(table, f, write_options=pcsv.WriteOptions(include_header=False, quoting_style="none"))
            except pa.ArrowInvalid:
                f.seek(len(head.getvalue().encode()))
                f.truncate()
                pcsv.write_csv(table, f, write_options=pcsv.WriteOptions(include_header=False,
                                                                         quoting_style="needed"))
    else:
        import pyarrow.parquet as pq

        pq.write_table(table, tmp)


# ------------------------------------------------------------------------------------ npy


def read_npy(path: Path, fs: Optional[float]):
    """(memory-mapped (frames, channels) array, rate, was_1d)."""
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty")
    try:
        a = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a readable NPY file ({msg})") from None
    if a.dtype.kind not in "iuf":
        raise InputError(f"{path}: holds {a.dtype} values; only real numbers can be filtered")
    if a.ndim not in (1, 2):
        raise InputError(f"{path}: has shape {a.shape}; expected (frames,) or (frames, channels)")
    if a.shape[0] == 0 or a.size == 0:
        raise InputError(f"{path}: holds no samples")
    side = sidecar_path(path)
    if fs is None:
        if not side.exists():
            raise InputError(f"{path}: NPY files carry no rate: pass --fs or write {side.name} "
                             '(JSON: {"fs": RATE})')
        try:
            meta = json.loads(side.read_text())
            fs = float(meta["fs"])
        except (ValueError, KeyError, TypeError, OSError) as exc:
            raise InputError(f"{side}: not a sidecar JSON with a numeric 'fs' ({type(exc).__name__}: {exc})") from None
        if not math.isfinite(fs) or fs <= 0:
            raise InputError(f"{side}: 'fs' must be a positive rate in Hz, got {fs:g}")
    was_1d = a.ndim == 1
    return (a[:, None] if was_1d else a), float(fs), was_1d


def npy_out_dtype(dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype) == np.float32 else np.dtype(np.float64)
