"""Sensor logs (CSV, Parquet): the time column, the sample rate and the channels, read through pyarrow.

:func:`read_log` reads a whole log into a :class:`LogData` (the terminal UI loads logs with it); the batch
reads tables with :func:`read_table` and the same helpers, so that both find the same time column, rate and
channels. The time column is the one asked for, else one named like a time axis (:data:`TIME_NAMES`, or
"time (s)", "timestamp_ms", ...), else the first column of a timestamp or date type
(:func:`detect_time_column`). A CSV time column is read as text (the batch writes it back byte for byte)
and parsed to seconds only to infer the rate (:func:`infer_rate`: by the span of the timestamps, irregular
steps left out and warned about).
Channels are the numeric columns but time; nulls and NaN are gaps. A CSV column read as text although most of its
cells are numbers is a channel with a damaged cell (:class:`NumberCells`): the file is refused, naming the first such
cell, rather than passed through unfiltered. Integers are filtered as float64 (the nearest one where they have more
than 53 bits). Problems raise ``InputError`` (one line).
"""

from __future__ import annotations

import csv
import re
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

from sigconv._core.errors import InputError, first_line
from sigconv.engine.batch.settings import rate_problem

__all__ = ["LogData", "read_log", "TIME_NAMES", "detect_time_column", "read_table", "time_seconds", "infer_rate",
           "file_rate", "choose_channels", "column_values", "table_kind", "check_names", "csv_read_options",
           "NumberCells", "check_rate"]

#: Column names taken as the time column (case-insensitive), in order of preference.
TIME_NAMES = ("timestamp", "time", "datetime", "date_time", "t", "ts", "time_s", "seconds", "epoch", "date")
#: Spacing deviating from the median by more than this fraction (plus the rounding of the written timestamps)
#: counts as irregular.
IRREGULAR_TOL = 0.01
#: The most (relative) a rate inferred from rounded timestamps is moved to a whole number of Hz.
_NICE_MAX = 1e-4
#: Timestamps looked at to find the step they were rounded to (:func:`time_resolution`).
_RESOLUTION_SAMPLE = 1 << 12
_TIME_WITH_UNIT = re.compile(r"^(time|timestamp)[ _]?\(?(s|ms|us|ns|sec|seconds)?\)?$")
#: Suffix -> table kind.
_KINDS = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet"}
#: pyarrow's CSV block (bytes): its default. A block must hold whole lines, so a longer header or first row gets a
#: larger block (:func:`csv_read_options`).
CSV_BLOCK_BYTES = 1 << 20
#: A CSV cell that reads as a number (what pyarrow's float parser takes, spaces around it allowed).
_NUMBER = (r"^\s*[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?\s*$|"
           r"^\s*[-+]?(?:[iI][nN][fF]|[iI][nN][fF][iI][nN][iI][tT][yY]|[nN][aA][nN])\s*$")


@dataclass(frozen=True, eq=False)
class LogData:
    """A sensor log read whole (:func:`read_log`).

    ``values`` is (frames, channels) float64 with NaN where a value is missing; ``names`` names its columns.
    ``timestamps`` holds the time column in seconds (NaN where missing): numbers as written, timestamp types
    from the first row; None without a time column. ``fs`` is the rate (asked for, or inferred from
    the timestamps by :func:`infer_rate`);
    ``warnings`` what is odd about the timestamps (irregular steps, a rate that differs from the one asked for).
    """

    path: Path
    names: list
    values: np.ndarray = field(repr=False)
    time_name: Optional[str]
    timestamps: Optional[np.ndarray] = field(repr=False)
    fs: float
    warnings: list = field(default_factory=list)

    @property
    def frames(self) -> int:
        return int(self.values.shape[0])


def table_kind(path) -> Optional[str]:
    """"csv" or "parquet" by the file's suffix, else None."""
    return _KINDS.get(Path(path).suffix.lower())


def detect_time_column(names, types=None, asked: Optional[str] = None, path="") -> Optional[str]:
    """The time column: ``asked`` when given (it must exist), else a column named like a time axis, else the
    first column of a timestamp or date type (``types``: the pyarrow types of ``names``), else None."""
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
        if _TIME_WITH_UNIT.match(n.lower().strip()):
            return n
    if types is not None:
        import pyarrow as pa

        for n, t in zip(names, types):
            if pa.types.is_timestamp(t) or pa.types.is_date(t):
                return n
    return None


def csv_header(path: Path) -> list[str]:
    """The column names on a CSV file's first line."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as f:
        line = f.readline()
    if not line.strip():
        raise InputError(f"{path}: file is empty" if not line else f"{path}: the first line (header) is empty")
    return next(csv.reader([line]))


def csv_read_options(path: Path, block: int = CSV_BLOCK_BYTES):
    """pyarrow ReadOptions for CSV ``path`` in blocks of ``block`` bytes, or more where its first lines are long
    (a block must hold a whole line: a header of a million names is longer than pyarrow's default block)."""
    import pyarrow.csv as pcsv

    longest = 0
    with open(path, "rb") as f:
        for _ in range(2):
            longest = max(longest, len(f.readline(1 << 30)))
    return pcsv.ReadOptions(block_size=int(max(block, 4 * longest + 1024)))


def check_names(names, path) -> None:
    """InputError when two columns share a name (their values could not be told apart, nor written back)."""
    if len(set(names)) == len(names):
        return
    seen: dict = {}
    for i, n in enumerate(names):
        if n in seen:
            raise InputError(f"{path}: columns {seen[n] + 1} and {i + 1} are both named {n!r}; "
                             "give each column its own name")
        seen[n] = i


def check_rate(fs: float, path, source: str, fix: str = "") -> float:
    """``fs`` when it is a rate a log can have (:func:`~sigconv.engine.batch.settings.rate_problem`), else
    InputError naming the file, ``source`` (where the rate came from) and ``fix``."""
    problem = rate_problem(fs)
    if problem:
        raise InputError(f"{path}: {source} {problem}{fix}")
    return float(fs)


class NumberCells:
    """Finds a CSV's channels that pyarrow read as text because of a few cells that are not numbers.

    A text column (not the time column) most of whose filled cells are numbers is such a channel, as is a text
    column named by ``--columns`` that holds numbers at all: :meth:`check` raises InputError naming its first
    cell that is not a number (empty cells and pyarrow's null markers, "NA" ..., are gaps, not damage). Fed
    the whole table at once (in memory) or record batch by record batch (streamed): the same counts, the
    same verdict."""

    def __init__(self, schema, time_column, columns, path):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        self.path, self.asked = path, set(columns or ())
        self.names = [n for n, t in zip(schema.names, schema.types)
                      if n != time_column and (pa.types.is_string(t) or pa.types.is_large_string(t))]
        # the cells pyarrow reads as null, as one anchored regex (a value_set array would need pa.array of Python
        # strings, whose conversion imports pandas where installed)
        self._nulls = "^(?:" + "|".join(re.escape(v) for v in pcsv.ConvertOptions().null_values) + ")$"
        self.numbers = dict.fromkeys(self.names, 0)
        self.filled = dict.fromkeys(self.names, 0)
        self.bad = dict.fromkeys(self.names, 0)
        self.first: dict = {}  # name -> (row, text) of the first cell that is not a number
        self.rows = 0

    def add(self, table) -> None:
        """Count the cells of the next rows (a table or record batch with the schema's columns)."""
        import pyarrow.compute as pc

        for n in self.names:
            col = table.column(n)
            empty = pc.or_(pc.is_null(col), pc.match_substring_regex(pc.utf8_trim_whitespace(col), self._nulls))
            num = pc.match_substring_regex(col, _NUMBER)
            bad = pc.and_not(pc.invert(empty), num)
            k = pc.sum(bad).as_py() or 0
            self.numbers[n] += pc.sum(num).as_py() or 0
            self.filled[n] += len(col) - (pc.sum(empty).as_py() or 0)
            self.bad[n] += k
            if k and n not in self.first:
                i = pc.index(bad, True).as_py()
                self.first[n] = (self.rows + i, col[i].as_py())
        self.rows += table.num_rows

    def check(self) -> None:
        """InputError (one line) for the first damaged channel, in column order."""
        for n in self.names:
            damaged = 2 * self.numbers[n] > self.filled[n] or (n in self.asked and self.numbers[n])
            if damaged and n in self.first:
                row, text = self.first[n]
                more = f" (and {self.bad[n] - 1} more such cell(s))" if self.bad[n] > 1 else ""
                raise InputError(f"{self.path}: column {n!r} data row {row + 1} (line {row + 2}): {text!r} is not "
                                 f"a number{more}; fix or empty the cell (an empty cell is a gap)")


def unreadable(path, kind: str, exc: BaseException) -> InputError:
    """The one-line error for a table pyarrow cannot read."""
    what = "CSV" if kind == "csv" else "Parquet"
    return InputError(f"{path}: not a readable {what} file ({first_line(exc)})")


@contextmanager
def reading(path, kind: str):
    """Turn what pyarrow and the OS raise while reading the table ``path`` into a one-line InputError."""
    import pyarrow as pa

    try:
        yield
    except InputError:
        raise
    except (pa.ArrowException, ValueError, UnicodeDecodeError, OSError) as exc:
        raise unreadable(path, kind, exc) from None


def read_table(path: Path, kind: str, time_column: Optional[str], columns=None):
    """(pyarrow table, time column name or None) of a CSV or Parquet file; a CSV time column is read as text.
    InputError for columns sharing a name, and for a CSV channel with a cell that is not a number (:class:`NumberCells`;
    ``columns``: the channels asked for)."""
    import pyarrow as pa

    with reading(path, kind):
        if path.stat().st_size == 0:
            raise InputError(f"{path}: file is empty")
        if kind == "csv":
            import pyarrow.csv as pcsv

            names = csv_header(path)
            check_names(names, path)
            tc = detect_time_column(names, None, time_column, path)
            types = {tc: pa.string()} if tc is not None else {}
            # Ctrl-C is the batch's to handle (coordinator._StopOnSignals). pyarrow's own handler, set for the
            # duration of read_csv in the main thread, turns a SIGINT into ArrowCancelled inside the read and can
            # lose it altogether (the batch then runs to the end and exits 0)
            pa.enable_signal_handlers(False)
            table = pcsv.read_csv(path, read_options=csv_read_options(path),
                                  convert_options=pcsv.ConvertOptions(column_types=types, strings_can_be_null=False))
        else:
            import pyarrow.parquet as pq

            table = pq.read_table(path)
            check_names(table.column_names, path)
            tc = detect_time_column(table.column_names, table.schema.types, time_column, path)
    if table.num_rows == 0:
        raise InputError(f"{path}: holds no data rows")
    if kind == "csv":
        cells = NumberCells(table.schema, tc, columns, path)
        if cells.names:
            cells.add(table)
            cells.check()
    return table, tc


def arrow_values(col, dtype, fill, out=None) -> tuple[np.ndarray, np.ndarray]:
    """(values, null mask) of a pyarrow array or chunked array whose values are NumPy's ``dtype`` (float64, int64,
    ...), as ``out`` (default ``dtype``), ``fill`` where null, read from its buffers. (Arrow's own conversion to NumPy
    imports pandas, where installed, on its first use in a process: a few tenths of a second, holding the
    interpreter.)"""
    import pyarrow as pa

    dtype = np.dtype(dtype)
    chunks = col.chunks if isinstance(col, pa.ChunkedArray) else [col]
    vals = np.empty(len(col), dtype if out is None else out)
    nulls = np.zeros(len(col), bool)
    at, any_null = 0, False
    for c in chunks:
        n = len(c)
        if not n:
            continue
        bufs = c.buffers()
        vals[at:at + n] = np.frombuffer(bufs[1], dtype, count=c.offset + n)[c.offset:]
        if c.null_count:
            any_null = True
            bits = np.unpackbits(np.frombuffer(bufs[0], np.uint8), bitorder="little", count=c.offset + n)
            nulls[at:at + n] = bits[c.offset:] == 0
        at += n
    if any_null:
        vals[nulls] = fill
    return vals, nulls


def _numpy_type(t) -> Optional[np.dtype]:
    """The NumPy dtype holding the values of pyarrow number type ``t`` as they lie in its buffer, else None."""
    import pyarrow as pa

    if pa.types.is_integer(t) or (pa.types.is_floating(t) and not pa.types.is_float16(t)):
        kind = "f" if pa.types.is_floating(t) else "u" if pa.types.is_unsigned_integer(t) else "i"
        return np.dtype(f"{kind}{t.bit_width // 8}")
    return None


def time_seconds(col, name: str, path) -> np.ndarray:
    """The time column as float64 seconds (numbers are taken as seconds; timestamps relative to
    the first row). NaN where a value is missing."""
    import pyarrow as pa
    import pyarrow.compute as pc

    t = col.type
    try:
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            try:
                col = pc.cast(col, pa.float64())  # text: numbers as written, else timestamps
            except pa.ArrowInvalid:
                col = pc.cast(col, pa.timestamp("ns"))
            t = col.type
        if pa.types.is_timestamp(t) or pa.types.is_date(t):
            # int64 nanoseconds, relative to the first valid row before going to float64 (epoch
            # nanoseconds do not fit a float64 exactly); missing values become NaN
            ns = pc.cast(pc.cast(col, pa.timestamp("ns")), pa.int64())
            ints, nulls = arrow_values(ns, np.int64, 0)
            valid = ~nulls
            first = ints[valid][0] if valid.any() else 0
            v = (ints - first).astype(np.float64) / 1e9
            v[~valid] = np.nan
            return v
        if pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t):
            return arrow_values(pc.cast(col, pa.float64(), safe=False), np.float64, np.nan)[0]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        pass
    raise InputError(f"{path}: time column {name!r} holds neither numbers (seconds) nor timestamps; "
                     "pass --time-column or --fs")


def time_resolution(t: np.ndarray) -> float:
    """The step the timestamps were rounded to when written (0.001 for "12.345"), as the coarsest power of ten
    from 1 s to 1 ns that every timestamp is a multiple of; 0 when there is none (unrounded floats). Judged on
    at most ``_RESOLUTION_SAMPLE`` timestamps spread over the log."""
    v = t[np.isfinite(t)]
    if v.size > _RESOLUTION_SAMPLE:
        v = v[np.linspace(0, v.size - 1, _RESOLUTION_SAMPLE).astype(np.int64)]
    if not v.size:
        return 0.0
    noise = 4 * np.finfo(np.float64).eps * np.abs(v)  # what float64 cannot hold of a printed decimal
    for k in range(10):
        q = 10.0 ** -k
        x = v / q
        if np.all(np.abs(x - np.rint(x)) <= 1e-3 + noise / q):
            return q
    return 0.0


def nice_rate(fs: float, uncertainty: float = 0.0) -> float:
    """Round a rate inferred from timestamps to the whole number of Hz within its ``uncertainty`` (Hz) or within
    1e-6 of it (100.00000000000001 -> 100), else to 9 significant digits."""
    r = round(fs)
    if r > 0 and abs(fs - r) <= max(1e-6 * fs, uncertainty):
        return float(r)
    return float(f"{fs:.9g}")


def _median(a: np.ndarray) -> float:
    """The median of finite 1-D ``a`` (size > 0), as ``np.median`` gives it, without its NaN check: that imports
    ``numpy.ma`` on first use, 40 ms in every batch worker's first file."""
    k = (a.size - 1) // 2
    if a.size % 2:
        return float(np.partition(a, k)[k])
    p = np.partition(a, (k, k + 1))
    return float((p[k] + p[k + 1]) / 2)


def infer_rate(t: np.ndarray, path, fs: Optional[float] = None) -> tuple[float, list]:
    """Rate of the timestamps ``t`` (seconds), and the warnings about them.

    The steps are regular when each is within ``IRREGULAR_TOL`` of the median step, plus the step the
    timestamps were rounded to when written where that is under half a step (:func:`time_resolution`:
    millisecond timestamps of a 360 Hz log step by 2 or 3 ms). The rate is the number of regular steps over
    their total length: for a log without irregular steps its span, (n - 1) / (t[-1] - t[0]) (the median of
    rounded steps is off: 333.3 Hz there, 359.971 Hz with 6 decimals); irregular steps are left out of it and
    warned about.
    Non-monotonic or missing timestamps are an error unless ``fs`` is given (then only warned about)."""
    warnings = []
    problems = []
    n = t.size
    bad = ~np.isfinite(t)
    if bad.any():
        problems.append(f"{int(bad.sum())} missing timestamp(s), first at row {int(np.argmax(bad))}")
    with np.errstate(invalid="ignore", over="ignore"):  # (steps next to missing or huge stamps: not finite, left out)
        d = np.diff(t)
    ok = np.isfinite(d)
    back = np.flatnonzero(ok & (d <= 0))
    if back.size:
        problems.append(f"non-monotonic timestamps: {back.size} step(s) <= 0, first between rows {back[0]} "
                        f"and {back[0] + 1} ({t[back[0]]:g} -> {t[back[0] + 1]:g})")
    pos = d[ok & (d > 0)]
    med = _median(pos) if pos.size else float("nan")
    rate = float("nan")
    if pos.size:
        # rounding moves a step by less than q; allowed only when q < step / 2, where a missing sample (a
        # step of 2 dt) still stands out
        q = time_resolution(t)
        q = q if 2 * q <= med else 0.0
        off = np.abs(pos - med) > IRREGULAR_TOL * med + q * (1 + 1e-6)
        if off.any():
            rounding = f" plus the {q:g} s the timestamps are rounded to" if q else ""
            warnings.append(f"irregular timestamps: {int(off.sum())} of {pos.size} steps differ from the median "
                            f"spacing {med:.6g} s by more than {IRREGULAR_TOL:.0%}{rounding} (from "
                            f"{pos.min():.6g} to {pos.max():.6g} s); filtered as if uniformly sampled")
        steps = pos[~off]
        m, total = steps.size, float(steps.sum())
        rate = m / total
        # the regular steps form n - m runs, each of whose length is off by less than q: a whole number of Hz
        # that close is the rate
        rate = nice_rate(rate, rate * min((n - m) * q / total, _NICE_MAX))
    if fs is None:
        if problems:
            raise InputError(f"{path}: {'; '.join(problems)}; cannot infer the rate (pass --fs to filter anyway)")
        if n < 2 or not pos.size:
            raise InputError(f"{path}: needs at least 2 rows with increasing timestamps to infer the rate; pass --fs")
        return check_rate(nice_rate(rate), path, "the timestamps' rate:", "; pass --fs"), warnings
    warnings = problems + warnings
    if pos.size and abs(rate - fs) > IRREGULAR_TOL * fs:
        warnings.append(f"--fs {fs:g} Hz differs from the rate of the timestamps ({nice_rate(rate):g} Hz)")
    return float(fs), warnings


def file_rate(tc: Optional[str], time_column, fs_asked: Optional[float], path) -> tuple[float, list]:
    """(sample rate, warnings) of a table: from the time column (``time_column()`` returns it; read only when
    there is one) by :func:`infer_rate`, else ``fs_asked``; InputError when neither exists."""
    if tc is None:
        if fs_asked is None:
            raise InputError(f"{path}: no time column found (looked for {', '.join(TIME_NAMES[:4])}, ...); "
                             "pass --time-column or --fs")
        return float(fs_asked), []
    return infer_rate(time_seconds(time_column(), tc, path), path, fs_asked)


def numeric_type(t) -> bool:
    import pyarrow as pa

    return (pa.types.is_integer(t) or pa.types.is_floating(t)) and not pa.types.is_boolean(t)


def choose_channels(table, time_column, columns, path) -> list[str]:
    """``columns`` when given (each must exist and be numeric), else every numeric column but time."""
    names = table.column_names
    if columns:
        known = set(names)
        for c in columns:
            if c not in known:
                raise InputError(f"{path}: no column named {c!r} for --columns")
            if c == time_column:
                raise InputError(f"{path}: --columns names the time column {c!r}")
            t = table.schema.field(c).type
            if not numeric_type(t):
                raise InputError(f"{path}: column {c!r} is not numeric ({t}); it cannot be filtered")
        return list(columns)
    chans = [n for n, t in zip(names, table.schema.types) if n != time_column and numeric_type(t)]
    if not chans:
        raise InputError(f"{path}: no numeric columns to filter")
    return chans


def column_values(table, name) -> tuple[np.ndarray, np.ndarray]:
    """(float64 values with NaN for nulls, null mask); ``name`` a column name or index. Integers beyond 2**53
    become the nearest float64 (they are filtered as float64 anyway)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    col = table.column(name)
    native = _numpy_type(col.type)
    if native is not None:  # read as it lies and converted by NumPy: no cast through Arrow for each column
        return arrow_values(col, native, np.nan, out=np.float64)
    return arrow_values(pc.cast(col, pa.float64(), safe=False), np.float64, np.nan)


def read_log(path, *, time_column: Optional[str] = None, columns=None, fs: Optional[float] = None) -> LogData:
    """Read a CSV or Parquet sensor log whole.

    Parameters
    ----------
    path : str or Path
        A ``.csv``, ``.parquet`` or ``.pq`` file.
    time_column : str, optional
        The time column (default: detected by name, else by a timestamp type).
    columns : sequence of str, optional
        The channels (default: every numeric column but time).
    fs : float, optional
        The sample rate; needed when there is no time column, else inferred from the timestamps
        (:func:`infer_rate`; non-monotonic or missing timestamps are then an error).

    Returns
    -------
    LogData

    Raises
    ------
    InputError
        One line: no such file, not a readable table, no data rows, no numeric columns, no time column and
        no ``fs``, timestamps that give no rate.
    """
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file")
    if path.is_dir():
        raise InputError(f"{path}: is a folder, not a sensor log")
    kind = table_kind(path)
    if kind is None:
        raise InputError(f"{path}: not a sensor log (CSV or Parquet: .csv, .parquet, .pq)")
    table, tc = read_table(path, kind, time_column, columns)
    if tc is None:
        timestamps = None
        fs, warnings = file_rate(None, None, fs, path)
    else:
        t = time_seconds(table.column(tc), tc, path)
        fs, warnings = infer_rate(t, path, fs)
        timestamps = t
    chans = choose_channels(table, tc, columns, path)
    values = np.stack([column_values(table, c)[0] for c in chans], axis=1)
    return LogData(path, chans, values, tc, timestamps, float(fs), warnings)
