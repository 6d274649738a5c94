"""Large CSV / Parquet logs filtered in a stream: memory bounded by a few blocks, not by the file.

Used for tables of at least ``STREAM_MIN_BYTES``, and for wide ones of at least ``STREAM_MIN_CELLS`` cells
(their float64 copies in memory would be many times the file: a 28 MB CSV of 20,000 x 700 small integers);
smaller ones take the simple in-memory path of ``process.do_table``. Record batches hold about
``BATCH_CELLS`` cells at most (fewer rows for wide tables), the filter blocks ``filters.BLOCK_SAMPLES``. The result is the one the in-memory path gives: byte for byte for CSV, value
for value for Parquet (its row groups may be cut differently).

Two passes:

1. The time column alone (``include_columns`` / ``columns=[...]``) is read to infer the rate and
   report irregular or non-monotonic timestamps, with the same functions as the in-memory path. It
   also gives the row count. Skipped only when there is no time column (``--fs``).
2. Record batches (``pyarrow.csv.open_csv`` blocks of ``CSV_BLOCK_BYTES``;
   ``ParquetFile.iter_batches`` of ``PARQUET_BATCH_ROWS``) go through one block filter over all
   chosen channels, its state carried across batches. The filter is fed exactly the blocks
   ``edges.filter_into`` feeds it, through the same ``edges.ExtendedFeed`` (the edge extension
   of ``--edges``, then ``preferred_frames`` rows from the extended stream's row 0, the remainder,
   ``finish()``), because overlap-save output depends on the block cut in its last bits, and the
   CSV text of a float64 shows every bit. The zero-phase delay (and the left extension, which waits
   for the first rows it reflects) makes outputs lag inputs by up to K-1 rows: the input batches
   wait in a queue (their pass-through columns) until their filtered values exist, and are written
   as soon as they do (``CSVWriter`` / ``ParquetWriter``), into the atomic temporary output.

Whenever the stream cannot promise the in-memory result, it gives up (``Fallback``; the temporary
output is removed) and the file is redone in memory, exactly as before:
- a gap (null, NaN or inf) in a filtered channel: ``--gaps split|interpolate`` are in-memory only;
- a CSV value that does not convert to the type inferred from the first block (``read_csv`` unifies
  the types of all blocks: an integer column holding a decimal later becomes float64 there), or a
  ``--columns`` choice refused on the first block's types.
A CSV value that needs quoting restarts the stream with ``quoting_style="needed"`` (what
``formats.write_table`` falls back to). A CSV channel read as text for a damaged cell, and a filtered value
that is not finite, fail the file as in memory (``logs.NumberCells``, ``filters.check_finite``).
"""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Optional

import numpy as np

from sigconv._core.errors import InputError
from sigconv.engine.batch import cancel, filters
from sigconv.engine.batch.discovery import safe_output
from sigconv.engine.batch.edges import ExtendedFeed
from sigconv.engine.batch.formats import channel_array, channel_dtype, channel_type, csv_header_line
from sigconv.engine.batch.logs import (NumberCells, check_names, choose_channels, column_values, csv_header,
                                       csv_read_options, detect_time_column, file_rate, reading, unreadable)
from sigconv.engine.batch.settings import BatchSettings

#: Tables at least this large (bytes) are streamed.
STREAM_MIN_BYTES = 64 << 20
#: CSV block read at a time. The same as ``pyarrow.csv.read_csv``'s, so the first block (whose
#: inferred types the stream keeps) is the first block ``read_csv`` infers from.
CSV_BLOCK_BYTES = 1 << 20
#: Parquet rows per record batch (fewer for wide tables: ``BATCH_CELLS``).
PARQUET_BATCH_ROWS = 1 << 16
#: Tables of at least this many cells (rows x columns; a CSV's at most one per two bytes) are streamed too.
STREAM_MIN_CELLS = 4 << 20
#: Cells of a Parquet record batch at most.
BATCH_CELLS = 1 << 20


class Fallback(Exception):
    """The stream cannot give the in-memory result for this file; redo it in memory."""


class _NeedsQuoting(Exception):
    pass


def wanted(path: Path, kind: str) -> bool:
    """Stream table ``path``: large (``STREAM_MIN_BYTES``) or of many cells (``STREAM_MIN_CELLS``)."""
    if kind not in ("csv", "parquet"):
        return False
    try:
        size = path.stat().st_size
        if size >= STREAM_MIN_BYTES:
            return True
        if kind == "csv":
            return size // 2 >= STREAM_MIN_CELLS
        import pyarrow.parquet as pq

        meta = pq.ParquetFile(path).metadata
        return meta.num_rows * meta.num_columns >= STREAM_MIN_CELLS
    except Exception:  # noqa: BLE001 - unreadable: the in-memory path says why, in one line
        return False


def streamed(task: dict) -> bool:
    """Whether the batch task's table is streamed (:func:`wanted`), judged once (``task["streamed"]``; a Parquet
    file's footer is read for it)."""
    if "streamed" not in task:
        task["streamed"] = wanted(Path(task["input"]), task["kind"])
    return task["streamed"]


class _Source:
    """One table file: its time column name, the time column alone, and its record batches."""

    def __init__(self, path: Path, kind: str, time_column: Optional[str]):
        self.path, self.kind = path, kind
        with reading(path, kind):
            if kind == "csv":
                names = csv_header(path)
                check_names(names, path)
                self.tc = detect_time_column(names, None, time_column, path)
                self.rows = None
                self.read_options = csv_read_options(path, CSV_BLOCK_BYTES)
            else:
                import pyarrow.parquet as pq

                self.pf = pq.ParquetFile(path)
                schema = self.pf.schema_arrow
                check_names(schema.names, path)
                self.tc = detect_time_column(schema.names, schema.types, time_column, path)
                self.rows = self.pf.metadata.num_rows
        if self.rows == 0:
            raise InputError(f"{path}: holds no data rows")

    def _convert(self, include=None):
        import pyarrow as pa
        import pyarrow.csv as pcsv

        types = {self.tc: pa.string()} if self.tc is not None else {}
        return pcsv.ConvertOptions(column_types=types, strings_can_be_null=False,
                                   **({"include_columns": include} if include else {}))

    def time_column(self):
        """The time column alone (as the in-memory path types it)."""
        import pyarrow as pa

        with reading(self.path, self.kind):
            if self.kind == "csv":
                import pyarrow.csv as pcsv

                reader = pcsv.open_csv(self.path, read_options=self.read_options,
                                       convert_options=self._convert([self.tc]))
                col = pa.chunked_array([b.column(0) for b in reader], type=pa.string())
            else:
                col = self.pf.read(columns=[self.tc]).column(0)
        if len(col) == 0:
            raise InputError(f"{self.path}: holds no data rows")
        self.rows = len(col)
        return col

    def open(self):
        """(schema, iterator of record batches)."""
        with reading(self.path, self.kind):
            if self.kind == "csv":
                import pyarrow.csv as pcsv

                reader = pcsv.open_csv(self.path, read_options=self.read_options, convert_options=self._convert())
                return reader.schema, iter(reader)
            rows = max(1, min(PARQUET_BATCH_ROWS, BATCH_CELLS // max(1, len(self.pf.schema_arrow))))
            return self.pf.schema_arrow, self.pf.iter_batches(batch_size=rows)


def out_schema(schema, chans, kind: str = "parquet", computed=np.float64):
    """The output schema: each channel typed per ``formats.channel_type`` (as ``formats.replace_columns``), built
    once (linear in the column count)."""
    import pyarrow as pa

    chans = set(chans)
    fields = [pa.field(f.name, channel_type(f.type, kind, computed), metadata=f.metadata) if f.name in chans else f
              for f in schema]
    return pa.schema(fields, metadata=schema.metadata)


def channel_block(rb, chans) -> np.ndarray:
    """(rows, C) float64 of the channels of record batch ``rb`` (nulls as NaN), by logs.column_values."""
    x = np.empty((rb.num_rows, len(chans)), np.float64)
    for j, c in enumerate(chans):
        x[:, j] = column_values(rb, c)[0]
    return x


class _Writer:
    """CSV (the header line as formats.write_table writes it, then CSVWriter rows) or ParquetWriter."""

    def __init__(self, tmp: Path, kind: str, schema, quoting: str):
        import pyarrow as pa

        self.kind, self.schema = kind, schema
        self._ArrowInvalid = pa.ArrowInvalid
        if kind == "csv":
            import pyarrow.csv as pcsv

            self.f = open(tmp, "wb")
            self.f.write(csv_header_line(schema.names))
            self.w = pcsv.CSVWriter(self.f, schema, write_options=pcsv.WriteOptions(include_header=False,
                                                                                   quoting_style=quoting))
        else:
            import pyarrow.parquet as pq

            self.f = None
            self.w = pq.ParquetWriter(tmp, schema)

    def write(self, table) -> None:
        try:
            self.w.write_table(table)
        except self._ArrowInvalid:
            if self.kind == "csv":
                raise _NeedsQuoting from None
            raise

    def close(self) -> None:
        try:
            self.w.close()
        finally:
            if self.f is not None:
                self.f.close()


def pump(batches, chans, flt, ext, writer, schema_out, path, cells: Optional[NumberCells] = None) -> int:
    """Filter the record batches through ``flt`` and write them; returns the rows written.

    The rows go through ``edges.ExtendedFeed`` (edge extension ``ext``), as ``filter_into`` feeds
    them in memory: the same blocks, so the same bytes. pending: the input batches whose filtered
    values are not all out yet (the filter lags by its delay, and by the left extension's wait).
    ``cells`` counts the text columns' cells (a CSV channel with a damaged cell fails at the end);
    a filtered value that is not finite fails the file before it is written."""
    import pyarrow as pa

    pending: collections.deque = collections.deque()  # record batches waiting for their filtered values
    written = 0
    types = [schema_out.field(c).type for c in chans]
    idx = [schema_out.get_field_index(c) for c in chans]
    labels, dtypes = [f"column {c!r}" for c in chans], [channel_dtype(t) for t in types]

    def emit(y: np.ndarray) -> None:
        """Write len(y) rows: the oldest pending input rows with their channels replaced by y."""
        nonlocal written
        y = np.asarray(y, dtype=np.float64)
        filters.check_finite(y, path, labels, "data row", written + 1, dtype=dtypes)
        pieces, used = [], 0
        while used < y.shape[0]:
            rb = pending[0]
            m = min(rb.num_rows, y.shape[0] - used)
            part = rb.slice(0, m)
            if m == rb.num_rows:
                pending.popleft()
            else:
                pending[0] = rb.slice(m)
            cols = list(part.columns)
            for j, (i, typ) in enumerate(zip(idx, types)):
                cols[i] = channel_array(y[used:used + m, j], typ)
            pieces.append(pa.RecordBatch.from_arrays(cols, schema=schema_out))
            used += m
        if pieces:
            writer.write(pa.Table.from_batches(pieces, schema=schema_out))
            written += y.shape[0]

    feed = ExtendedFeed(flt, ext, emit)
    for rb in batches:
        cancel.check()
        if rb.num_rows == 0:
            continue
        x = channel_block(rb, chans)
        if not np.isfinite(x).all():
            raise Fallback("a gap in a filtered channel")
        if cells is not None:
            cells.add(rb)
        pending.append(rb)
        with filters.quiet():
            feed.push(x)
    with filters.quiet():
        feed.close()
    if cells is not None:
        cells.check()
    if pending:
        raise RuntimeError(f"{path}: block filter left {sum(b.num_rows for b in pending)} rows unfiltered")
    if written == 0:
        raise InputError(f"{path}: holds no data rows")
    return written


def do_table(task: dict, settings: BatchSettings, inp: Path, out: Path, outdir: Path, res: dict) -> bool:
    """Filter table ``inp`` in a stream. True when done; False when it must be redone in memory
    (nothing written, nothing added to ``res``). Raises InputError / OutputError / ValueError as
    the in-memory path does."""
    import pyarrow as pa

    kind = task["kind"]
    src = _Source(inp, kind, settings.time_column)
    tc = src.tc
    warnings: list = []
    fs, w = file_rate(tc, src.time_column, settings.fs, inp)  # first pass: the time column only
    warnings.extend(w)
    schema, batches = src.open()
    try:
        chans = choose_channels(schema.empty_table(), tc, settings.columns, inp)
    except InputError:
        if kind == "csv":  # judged on the first block's types: let read_csv's types judge
            return False
        raise
    taps, desc = filters.taps_for(settings.fir, fs, settings.edges, frames=src.rows, source=inp)
    schema_out = out_schema(schema, chans, kind, filters.computed_dtype(settings))
    quoting = "none"
    while True:
        try:
            with safe_output(inp, out, outdir) as tmp:
                writer = _Writer(tmp, kind, schema_out, quoting)
                try:
                    flt = filters.block_filter(taps, len(chans), settings)
                    cells = NumberCells(schema, tc, settings.columns, inp) if kind == "csv" else None
                    try:
                        n = pump(batches, chans, flt, filters.run_extension(flt, taps, settings), writer, schema_out,
                                 inp, cells if cells is not None and cells.names else None)
                    except pa.ArrowInvalid as exc:  # reading: a bad row, or a value the first block's
                        if kind == "csv":  # types do not take: read_csv has the final word
                            raise Fallback(str(exc)) from None
                        raise unreadable(inp, kind, exc) from None
                finally:
                    writer.close()
                filters.check_length(taps, n, fs, inp)
                cancel.check()  # the last moment before the output is moved into place
            break
        except _NeedsQuoting:
            if quoting == "needed":
                raise
            quoting = "needed"
            schema, batches = src.open()
        except Fallback:
            return False
    res["warnings"].extend(warnings)
    res.update(fs=fs, filter=desc, frames=n, channels=chans, columns=list(chans), time_column=tc, streamed=True)
    return True
