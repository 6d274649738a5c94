"""One file in, one file out: what a batch worker runs (in the coordinator, a pool process or a Dask worker).

``process_task`` never raises for a bad file: it returns a result whose status is "failed" with a one-line
reason. Only KeyboardInterrupt / SystemExit escape, after removing the temporary output.

A task is a dict: input, rel, output, outdir, kind ("csv", "parquet", "npy" or "audio"), settings (a
:class:`~sigconv.engine.batch.settings.BatchSettings`), and the size, mtime and settings hash the manifest
records. Tables of at least ``stream.STREAM_MIN_BYTES`` are streamed (:mod:`.stream`), smaller ones are read
whole; NPY arrays are memory-mapped; audio goes through the engine's file filter.

On one GPU a pool worker's logs are filtered by the GPU's process (``filters.filter_run`` sends them there,
:mod:`.gpu_service`). Recordings may run in several threads of the process that holds the GPU: decoding and
encoding run in parallel (libsndfile and NumPy release the GIL) and each uses the GPU through its own block
filter. A stopped batch (:mod:`.cancel`) is checked before a file starts and just before its output is moved
into place; such a file's result has status "cancelled".
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from sigconv._core.errors import InputError, OutputError, first_line
from sigconv.engine.batch import cancel, filters, formats, logs, stream
from sigconv.engine.batch.discovery import check_output, prepare_output, safe_output
from sigconv.engine.batch.settings import BatchSettings

__all__ = ["process_task"]


def do_table(task: dict, s: BatchSettings, inp: Path, out: Path, outdir: Path, res: dict) -> None:
    """A CSV or Parquet log: streamed when large or wide (and the stream can promise the in-memory result), else
    read whole; the channels filtered, every other column written back as it was. ``res["columns"]``: the
    channels filtered. A filtered value that is not finite where its input was fails the file."""
    if stream.streamed(task) and stream.do_table(task, s, inp, out, outdir, res):
        return  # streamed (large files); else redone here, in memory
    table, tc = logs.read_table(inp, task["kind"], s.time_column, s.columns)
    warnings = res["warnings"]
    fs, w = logs.file_rate(tc, lambda: table.column(tc), s.fs, inp)
    warnings.extend(w)
    chans = logs.choose_channels(table, tc, s.columns, inp)
    taps, desc = filters.taps_for(s.fir, fs, s.edges, frames=table.num_rows, source=inp)
    cols = [logs.column_values(table, c) for c in chans]
    x = np.stack([v for v, _ in cols], axis=1)
    y = filters.filter_columns(x, taps, s, warnings, chans)
    computed = filters.computed_dtype(s)
    types = [formats.channel_type(table.schema.field(c).type, task["kind"], computed) for c in chans]
    filters.check_finite(y, inp, [f"column {c!r}" for c in chans], "data row", 1, x=x,
                         dtype=[formats.channel_dtype(t) for t in types])
    split = s.gaps == "split"
    table = formats.replace_columns(table, {c: (y[:, j], nulls if split else None)
                                            for j, (c, (_, nulls)) in enumerate(zip(chans, cols))},
                                    task["kind"], computed)
    cancel.check()
    with safe_output(inp, out, outdir) as tmp:
        formats.write_table(table, task["kind"], tmp)
        cancel.check()  # the last moment before the output is moved into place
    res.update(fs=fs, filter=desc, frames=table.num_rows, channels=chans, columns=list(chans), time_column=tc)


def do_npy(task: dict, s: BatchSettings, inp: Path, out: Path, outdir: Path, res: dict) -> None:
    """An NPY log: memory-mapped in and out (streamed block by block when it holds no gaps); its sidecar
    (the rate) is copied beside the output. ``res["columns"]``: the channels filtered ("channel 0", ...). A
    filtered value that is not finite where its input was fails the file."""
    a, fs, was_1d = formats.read_npy(inp, s.fs)
    n, C = a.shape
    taps, desc = filters.taps_for(s.fir, fs, s.edges, frames=n, source=inp)
    odt = formats.npy_out_dtype(a.dtype)
    step = 1 << 20
    finite = all(np.isfinite(a[i:i + step]).all() for i in range(0, n, step))
    side = formats.sidecar_path(inp)
    labels = [f"channel {c}" for c in range(C)]
    with safe_output(inp, out, outdir) as tmp:
        y = np.lib.format.open_memmap(tmp, mode="w+", dtype=odt, shape=(n,) if was_1d else (n, C))
        y2 = y[:, None] if was_1d else y
        if finite:  # streamed: memory-mapped in, memory-mapped out
            filters.filter_run(taps, a, y2, s)
            for i in range(0, n, step):
                filters.check_finite(y2[i:i + step], inp, labels, "sample index", i, dtype=odt)
        else:
            x = np.asarray(a, dtype=np.float64)
            yc = filters.filter_columns(x, taps, s, res["warnings"], labels)
            filters.check_finite(yc, inp, labels, "sample index", 0, x=x, dtype=odt)
            with filters.quiet():
                y2[...] = yc
            del x, yc
        y.flush()
        del y, y2
        cancel.check()  # the last moment before the output is moved into place
        if side.exists() and s.fs is None:
            with safe_output(side, formats.sidecar_path(out), outdir) as tmp_side:
                tmp_side.write_bytes(side.read_bytes())
    res.update(fs=fs, filter=desc, frames=n, channels=C, columns=labels)


def do_audio(task: dict, s: BatchSettings, inp: Path, out: Path, outdir: Path, res: dict) -> None:
    """A recording: the FIR filter with zero padding (as `sigconv denoise`), or the spectral gate."""
    from sigconv.engine.audio import probe
    from sigconv.engine.file import filter_file, fir_block_filter

    info = probe(inp, allow_truncated=s.allow_truncated)
    fs = float(info.samplerate)
    kernel = filters.kernel_here(s.kernel)
    if s.method == "spectral":
        from sigconv.engine.spectral import spectral_file_filter

        make, desc = spectral_file_filter(s.gate, kernel, info)
    else:
        taps, desc = filters.taps_for(s.fir, fs, "zero", frames=info.frames, source=inp)

        def make(info, spec):
            return fir_block_filter(taps, info.channels, spec, kernel=kernel, phase=s.fir.phase)

    prepare_output(inp, out, outdir)

    def last_look():  # as safe_output's: stopped meanwhile, or something the batch may not replace appeared
        cancel.check()
        check_output(inp, out, outdir)

    # its own temporary file and rename; a stopped batch stops it between blocks. Not under the device section:
    # a recording's decoding and encoding (FLAC, ...) take longer than its filtering, so recordings share the GPU
    r = filter_file(info, out, make, overwrite=True, cancel=cancel.STOP, before_replace=last_look)
    res.update(fs=fs, filter=desc, frames=info.frames, channels=info.channels, clipped=r.clipped)


_BY_KIND = {"csv": do_table, "parquet": do_table, "npy": do_npy, "audio": do_audio}



def process_task(task: dict) -> dict:
    """Filter one file; the result (a dict) says how it went. See the module docstring for ``task``; its
    ``replace`` says what may be replaced at its output (``discovery.overwrite_problem``: True, the manifest's
    (size, mtime_ns) of the batch's own output there, or None: nothing)."""
    t0 = time.perf_counter()
    inp, out, outdir = Path(task["input"]), Path(task["output"]), Path(task["outdir"])
    s: BatchSettings = task["settings"]
    res = {"input": task["input"], "rel": task["rel"], "status": "failed", "output": None, "reason": None,
           "warnings": [], "fs": None, "filter": None, "pid": os.getpid(),
           "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}
    from sigconv.engine.batch.discovery import replacing

    try:
        with cancel.running(task.get("batch")), replacing(out, task.get("replace")):
            cancel.check()
            if s.method == "spectral" and task["kind"] != "audio":
                raise InputError(f"{inp}: --method spectral applies to audio files only")
            _BY_KIND[task["kind"]](task, s, inp, out, outdir, res)
        res["status"], res["output"] = "done", str(out)
        res["backend"] = filters.kernel_here(s.kernel).backend
        if res["backend"] == "cuda" and res["gpu"] is None:
            res["gpu"] = "0"  # no pinning: the process's first visible GPU, where CuPy works by default
    except cancel.Cancelled:
        res["status"], res["reason"] = "cancelled", "the batch was stopped"
    except KeyboardInterrupt:
        if not cancel.STOP.is_set():
            raise
        res["status"], res["reason"] = "cancelled", "the batch was stopped"  # filter_file's answer to the flag
    except SystemExit:
        raise
    except (InputError, OutputError, ValueError) as exc:
        res["reason"] = first_line(exc)
    except MemoryError:
        res["reason"] = f"{inp}: out of memory"
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the batch
        res["reason"] = f"{inp}: {type(exc).__name__}: {first_line(exc, '')}"
    if res["reason"] and res["reason"].startswith(f"{inp}: "):
        res["reason"] = res["reason"][len(f"{inp}: "):]  # the summary names the file
    res["seconds"] = time.perf_counter() - t0
    return res
