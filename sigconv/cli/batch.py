"""``sigconv batch``: filter folders of sensor logs and recordings (CSV, Parquet, NPY; WAV, FLAC, OGG, MP3, AIFF
and the other formats libsndfile reads).

    sigconv batch logs/ -r -o cleaned/                  # every supported file under logs/
    sigconv batch 'logs/*.csv' -o cleaned/ --notch 50   # a glob; same filter options as denoise
    sigconv batch logs/ -r -o cleaned/ --jobs 8          # a local process pool
    sigconv batch logs/ -r -o cleaned/ --scheduler local            # a Dask LocalCluster (one worker per GPU)
    sigconv batch logs/ -r -o cleaned/ --scheduler tcp://host:8786  # an existing Dask cluster

Folders are walked through symbolic links (each real folder once); files found there with another suffix
are skipped and counted. Outputs mirror the input tree under OUTDIR in the same format, each written to a
temporary file and renamed when complete. ``OUTDIR/sigconv-batch.jsonl`` records every file (input, size, mtime, hash of
the filter settings, status, output and its size and mtime, reason); a rerun skips what is done and unchanged (its
input and its output) and redoes what failed or changed (an output edited by hand is redone). The batch replaces
no file it did not write: a file at an output path that the manifest does not record as the batch's own output (a
file put there by hand) fails with the reason; ``--force`` replaces it (and redoes every file). A folder, FIFO,
device or socket at an output path is never replaced, not even with ``--force``.

Exit codes: 0 all done, 1 some file failed (each listed with its reason), 2 usage error, 130 interrupted (Ctrl-C),
143 terminated (SIGTERM: ``timeout``, systemd, job schedulers), 129 hung up (SIGHUP: the terminal closed). Each of
the three stops the batch alike: no more files start, the files in flight stop and leave no output (nor a
temporary file), finished files are complete and recorded; rerun to finish. A second signal quits at once.

With no filter option, each file gets the default for its rate, the rule `denoise` and the TUI apply too
(``sigconv.default_band``): recordings (>= 8 kHz) a band-pass 80-8000 Hz; sensor logs a band-pass
fs/200 .. 0.4 fs (0.5-40 Hz at 100 Hz), which removes drift and offsets and the band near Nyquist. The
summary lists the filter used per rate.

Tables and NPY logs are extended at both ends of each filtered run by odd reflection (``--edges odd``,
the default), so a log with an offset gets no step transient at its start and end; ``--edges zero``
pads with zeros (SciPy "same", the behaviour before). Audio files always use zero padding.
"""

from __future__ import annotations

import argparse
import re
import sys

import sigconv
from sigconv.cli.errors import EXIT_DATA, EXIT_INTERRUPTED, EXIT_OK, UsageError, one_line
from sigconv.cli.options import (add_backend_arguments, add_filter_arguments, add_spectral_arguments,
                                 check_method_options, fir_spec_from_args, gate_spec_from_args, kernel_from_args,
                                 positive_float, positive_int)

__all__ = ["add_batch_arguments", "run_batch"]


def _columns(s):
    cols = [c.strip() for c in s.split(",")]
    if not s.strip() or any(not c for c in cols):
        raise argparse.ArgumentTypeError(f"--columns takes comma-separated column names, got {s!r}")
    return cols


def add_batch_arguments(p) -> None:
    p.description = ("Filter many files (CSV, Parquet, NPY; WAV, FLAC, OGG, MP3, AIFF and the other formats "
                     "libsndfile reads) into OUTDIR, mirroring the input tree; "
                     "resumable (manifest in OUTDIR), parallel (--jobs) or on Dask (--scheduler).")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or glob patterns (quote them)")
    p.add_argument("-o", "--output-dir", required=True, metavar="OUTDIR", help="where the filtered files go")
    p.add_argument("-r", "--recursive", action="store_true", help="look into subfolders (and ** in patterns)")
    p.add_argument("--method", choices=("fir", "spectral"), default="fir",
                   help="fir (default) or spectral (audio files only)")
    add_filter_arguments(p)
    add_spectral_arguments(p)
    g = p.add_argument_group("sensor logs (CSV, Parquet, NPY)")
    g.add_argument("--fs", type=positive_float("--fs"), metavar="HZ",
                   help="sample rate (default: from the time column's span, irregular steps left out and warned "
                        "about; NPY: from NAME.npy.json)")
    g.add_argument("--time-column", metavar="NAME", help="the time column (default: detected by name or type)")
    g.add_argument("--columns", type=_columns, metavar="A,B,...",
                   help="channels to filter (default: every numeric column); other columns pass through")
    g.add_argument("--gaps", choices=("split", "interpolate"), default="split",
                   help="missing values: split (default: filter each run between gaps, gaps stay NaN) or "
                        "interpolate (fill linearly, then filter)")
    g.add_argument("--edges", choices=("odd", "zero"), default="odd",
                   help="how each filtered run of a table or NPY log is extended at its ends: odd (default: odd "
                        "reflection about the edge sample, as scipy.signal.filtfilt's padtype, so an offset "
                        "such as a temperature around 20 leaves no step transient) or zero (zero padding, "
                        "SciPy 'same' semantics). Audio files always use zero padding, as denoise")
    g = p.add_argument_group("recordings (WAV, FLAC, ...)")
    g.add_argument("--allow-truncated", action="store_true",
                   help="filter what a truncated recording holds (its header promises more frames than the file "
                        "has) instead of failing it")
    add_backend_arguments(p)
    g = p.add_argument_group("execution")
    g.add_argument("-j", "--jobs", type=positive_int("--jobs"), metavar="N",
                   help="worker processes (default: CPU count; --scheduler local: one worker per GPU, else per "
                        "CPU); never more than the files to run")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask cluster: 'local' starts a LocalCluster, else a scheduler address")
    g.add_argument("--force", action="store_true",
                   help="redo every file, even those the manifest has as done, and replace files at the output "
                        "paths that the batch did not write (never a folder, FIFO, device or socket)")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary (failures still listed)")


def _request(args) -> "sigconv.BatchRequest":
    """The parsed options as the engine's typed request."""
    spectral = args.method == "spectral"
    gate = gate_spec_from_args(args) if spectral else sigconv.GateSpec()  # check_method_options: spectral only
    try:
        settings = sigconv.BatchSettings(method=args.method, fir=fir_spec_from_args(args), gate=gate,
                                         kernel=kernel_from_args(args, "conv2d" if spectral else "conv1d"),
                                         fs=args.fs, time_column=args.time_column, columns=args.columns,
                                         gaps=args.gaps, edges=args.edges, allow_truncated=args.allow_truncated)
    except ValueError as exc:  # a value the settings refuse, named as the option the user typed
        raise UsageError(re.sub(r"^fs\b", "--fs", str(exc))) from None
    return sigconv.BatchRequest(args.inputs, args.output_dir, settings, recursive=args.recursive, jobs=args.jobs,
                                scheduler=args.scheduler, force=args.force)


class _Progress:
    """A rich progress bar over files and bytes with throughput, advanced by ``run_batch``'s ``on_result``; a
    no-op when not shown. The totals (the files to run, once skipped ones are known) come with each result."""

    def __init__(self, show: bool, console=None):
        self.bar = None
        if not show:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeRemainingColumn, TransferSpeedColumn)

        self.bar = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                            MofNCompleteColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                            console=console or Console(stderr=True), transient=True)
        self.files = self.bar.add_task("files", total=None)
        self.bytes = self.bar.add_task("bytes", total=None)

    def __enter__(self):
        if self.bar:
            self.bar.start()
        return self

    def advance(self, p) -> None:
        """One file finished (a ``sigconv`` batch progress event: rel, size, files_total, bytes_total)."""
        if self.bar:
            self.bar.update(self.files, total=p.files_total, advance=1, description=f"files ({p.rel[-30:]})")
            self.bar.update(self.bytes, total=p.bytes_total, advance=p.size)

    def __exit__(self, *exc):
        if self.bar:
            self.bar.stop()


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def _print_summary(report, quiet: bool) -> None:
    out = sys.stderr
    if not quiet:
        if report.stale:
            print(f"removed {report.stale} temporary file(s) left by an interrupted run", file=out)
        if report.filters:
            print("filters used (by sample rate):", file=out)
            for fs in sorted(report.filters):
                print(f"  {fs:g} Hz: {report.filters[fs]}", file=out)
        for rel, w in report.warnings:
            print(one_line(f"warning: {rel}: {w}"), file=out)
        for note in report.notes:
            print(one_line(f"note: {note}"), file=out)
    for rel, why in report.failed:
        print(one_line(f"failed: {rel}: {why}"), file=out)
    if not quiet or report.interrupted:
        secs, n = report.seconds, len(report.done)
        rate = f"{n / secs:.1f} files/s, {report.bytes / 1e6 / secs:.2f} MB/s" if secs > 0 else ""
        state = "interrupted; " if report.interrupted else ""
        print(f"batch: {state}{n} done, {report.skipped} skipped, {len(report.failed)} failed "
              f"({_mb(report.bytes)} in {secs:.2f} s, {rate}; {report.where}); manifest {report.manifest}", file=out)
        if report.interrupted:
            stopped = (f"{report.stopped} file(s) stopped in flight left no output; " if report.stopped else "")
            print(f"batch: {stopped}the {n} finished file(s) are complete and recorded in the manifest; run the "
                  "same command again to finish", file=out)


def run_batch(args) -> int:
    check_method_options(args)
    request = _request(args)
    with _Progress(not args.quiet and sys.stderr.isatty()) as bar:
        report = sigconv.run_batch(request, on_result=bar.advance)
    _print_summary(report, args.quiet)
    if report.interrupted:  # 130 for Ctrl-C (or a stop not by a signal), 143 for SIGTERM, 129 for SIGHUP
        return 128 + report.stop_signal if report.stop_signal else EXIT_INTERRUPTED
    return EXIT_DATA if report.failed else EXIT_OK
