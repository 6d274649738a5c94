"""Writers of the batch's tables, and NPY arrays in and out (tables are read by :mod:`.logs`).

Channels are float64 while filtering; a float32 column is written back as float32, an integer column as
float64 (filtered values are not integers); the other columns, the time column's text included, are
written back as they were read. Nulls stay nulls.

NPY: (frames,) or (frames, channels) of numbers. The rate comes from ``--fs`` or from a sidecar
JSON file beside the array, ``NAME.npy.json`` holding ``{"fs": RATE}``; the sidecar is copied
next to the output. NPY files are memory-mapped and, when they hold no gaps, streamed block by
block into a memory-mapped output, so an array larger than memory is fine.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Optional

import numpy as np

from sigconv._core.errors import InputError, first_line
from sigconv.engine.batch.logs import check_rate


def sidecar_path(path: Path) -> Path:
    return path.with_name(path.name + ".json")


# ------------------------------------------------------------------------------------ tables


def channel_type(old, kind: str = "parquet", computed=np.float64):
    """The pyarrow type a filtered channel is written as: float32 stays float32; in a CSV, a channel computed in
    float32 (``computed``: on the GPU) is written as float32 too, as the shortest text that reads back as the
    computed value (no digits the computation did not make, a third fewer bytes, faster to write); anything else
    float64."""
    import pyarrow as pa

    if old == pa.float32() or (kind == "csv" and np.dtype(computed) == np.float32):
        return pa.float32()
    return pa.float64()


def channel_dtype(typ) -> np.dtype:
    """The NumPy dtype of a channel type (:func:`channel_type`); no pandas involved."""
    import pyarrow as pa

    return np.dtype(np.float32) if typ == pa.float32() else np.dtype(np.float64)


def channel_array(y: np.ndarray, typ, nulls: Optional[np.ndarray] = None):
    """The pyarrow array of channel type ``typ`` (:func:`channel_type`) holding ``y``, null where ``nulls``, made
    from its buffers (``pyarrow.array`` on a NumPy array imports pandas, where installed, on its first use)."""
    import pyarrow as pa

    v = np.ascontiguousarray(y, dtype=channel_dtype(typ))
    valid = None
    if nulls is not None and nulls.any():
        valid = pa.py_buffer(np.packbits(~np.asarray(nulls, bool), bitorder="little"))
    return pa.Array.from_buffers(typ, v.size, [valid, pa.py_buffer(v)],
                                 null_count=int(np.count_nonzero(nulls)) if valid is not None else 0)


def csv_header_line(names) -> bytes:
    """The header line of a CSV output (names quoted only where they need it)."""
    head = io.StringIO()
    csv.writer(head, lineterminator="\n").writerow(names)
    return head.getvalue().encode()


def replace_column(table, name, y: np.ndarray, nulls: np.ndarray, kind: str = "parquet", computed=np.float64):
    """``table`` with channel ``name`` holding ``y`` (null where ``nulls``), typed per :func:`channel_type`."""
    return replace_columns(table, {name: (y, nulls)}, kind, computed)


def replace_columns(table, new: dict, kind: str = "parquet", computed=np.float64):
    """``table`` with each channel of ``new`` (name -> (values, null mask or None)) replaced, typed per
    :func:`channel_type`; the table is built once, so the time is linear in the column count (replacing
    columns one by one copies the column list each time: minutes for a table of 10,000 columns). The
    names must be unique (``logs.check_names``)."""
    import pyarrow as pa

    schema = table.schema
    fields, cols = list(schema), list(table.columns)
    for i, f in enumerate(fields):
        hit = new.get(f.name)
        if hit is None:
            continue
        typ = channel_type(f.type, kind, computed)
        cols[i] = channel_array(hit[0], typ, hit[1])
        fields[i] = pa.field(f.name, typ, metadata=f.metadata)
    return pa.Table.from_arrays(cols, schema=pa.schema(fields, metadata=schema.metadata))


def write_table(table, kind: str, tmp: Path) -> None:
    if kind == "csv":
        import pyarrow as pa
        import pyarrow.csv as pcsv

        head = csv_header_line(table.column_names)
        # an Arrow file, not a Python one: the writer never needs the GIL (batch files are written from threads)
        for quoting in ("none", "needed"):  # no quotes unless a value needs them (then every string is quoted)
            with pa.OSFile(str(tmp), "wb") as f:
                f.write(head)
                try:
                    pcsv.write_csv(table, f, write_options=pcsv.WriteOptions(include_header=False,
                                                                             quoting_style=quoting))
                    return
                except pa.ArrowInvalid:
                    if quoting == "needed":
                        raise
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
        raise InputError(f"{path}: not a readable NPY file ({first_line(exc)})") from None
    except Exception:  # noqa: BLE001 - a damaged header makes NumPy's parser raise what it meets (TokenError ...)
        raise InputError(f"{path}: not a readable NPY file (its header is damaged)") from None
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
            fs = meta["fs"]
        except (ValueError, KeyError, TypeError, OSError) as exc:
            what = f"no key {exc}" if isinstance(exc, KeyError) else first_line(exc)
            raise InputError(f"{side}: not a sidecar JSON holding {{\"fs\": RATE}} ({what})") from None
        if isinstance(fs, str):  # {"fs": "100"}: a number written as text
            try:
                fs = float(fs)
            except ValueError:
                pass
        check_rate(fs, side, "'fs'")
    was_1d = a.ndim == 1
    return (a[:, None] if was_1d else a), float(fs), was_1d


def npy_out_dtype(dtype) -> np.dtype:
    return np.dtype(np.float32) if np.dtype(dtype) == np.float32 else np.dtype(np.float64)
