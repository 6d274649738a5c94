"""The batch pipeline behind ``sigconv batch``: many files (CSV, Parquet, NPY, WAV/FLAC) into OUTDIR.

:func:`~sigconv.engine.batch.coordinator.run_batch` takes a
:class:`~sigconv.engine.batch.coordinator.BatchRequest` (inputs, OUTDIR, a
:class:`~sigconv.engine.batch.settings.BatchSettings`, jobs, scheduler) and returns a report. One module per
concern, each importing only those listed before it:

- :mod:`.settings`: the typed settings every worker gets, and the dict the manifest hashes.
- :mod:`.logs`: sensor logs: time column, rate, channels; :func:`~.logs.read_log` reads one whole.
- :mod:`.formats`: writing tables; NPY arrays in and out.
- :mod:`.edges`: edge extension of filtered runs, and the block feed every path shares.
- :mod:`.filters`: the filter per rate and kernel, gaps.
- :mod:`.discovery`: inputs (files, folders, globs) -> safe output paths under OUTDIR.
- :mod:`.stream`: large tables filtered in a stream.
- :mod:`.process`: one file in, one file out (what a worker runs).
- :mod:`.manifest`: the JSON-lines record of what was done.
- :mod:`.runners`: in this process, a local process pool or Dask; GPU assignment.
- :mod:`.coordinator`: the whole batch.
"""
