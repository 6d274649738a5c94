"""Internals of ``sigconv batch`` (see :mod:`sigconv.cli.batch`), one module per concern.

- :mod:`.discovery`: inputs (files, folders, globs) -> tasks with a safe output path under OUTDIR.
- :mod:`.formats`: CSV / Parquet (pyarrow), NPY and audio: read, time column, rate, gaps, write.
- :mod:`.process`: one file in, one file out (runs in a worker): filter choice per rate, filtering.
- :mod:`.manifest`: the JSON-lines record of what was done (written by the coordinator only).
- :mod:`.runners`: in-process, local process pool and Dask; GPU assignment.
"""
