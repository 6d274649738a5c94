"""``sigconv batch``: filter folders of sensor logs and recordings (CSV, Parquet, NPY, WAV/FLAC).

    sigconv batch logs/ -r -o cleaned/                  # every supported file under logs/
    sigconv batch 'logs/*.csv' -o cleaned/ --notch 50   # a glob; same filter options as denoise
    sigconv batch logs/ -r -o cleaned/ --jobs 8          # a local process pool
    sigconv batch logs/ -r -o cleaned/ --scheduler local            # a Dask LocalCluster (one worker per GPU)
    sigconv batch logs/ -r -o cleaned/ --scheduler tcp://host:8786  # an existing Dask cluster

Outputs mirror the input tree under OUTDIR in the same format, each written to a temporary file and
renamed when complete. ``OUTDIR/sigconv-batch.jsonl`` records every file (input, size, mtime, hash of
the filter settings, status, output, reason); a rerun skips what is done and unchanged and redoes
what failed or changed. Exit codes: 0 all done, 1 some file failed (each listed with its reason),
2 usage error, 130 interrupted (finished files are complete and recorded; rerun to finish).

With no filter option, each file gets a default that suits its rate: recordings (>= 8 kHz) the
`denoise` band-pass 80-8000 Hz; sensor logs a band-pass fs/200 .. 0.4 fs (0.5-40 Hz at 100 Hz), which
removes drift and offsets and the band near Nyquist. The summary lists the filter used per rate.

Tables and NPY logs are extended at both ends of each filtered run by odd reflection (``--edges odd``,
the default), so a log with an offset gets no step transient at its start and end; ``--edges zero``
pads with zeros (SciPy "same", the behaviour before). Audio files always use zero padding.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import re
import sys
import time
from pathlib import Path

from sigconv.cli import (EXIT_DATA, EXIT_INTERRUPTED, EXIT_OK, UsageError, _positive_float, _positive_int,
                  add_backend_arguments, add_filter_arguments, add_spectral_arguments)

__all__ = ["add_batch_arguments", "run_batch"]

#: Temporary outputs (ours: mkstemp's 8 random characters) left by a killed run; removed at start.
_STALE_PART = re.compile(r"^\..+\.[A-Za-z0-9_]{8}\.part$")
_SPECTRAL_KEYS = ("noise_clip", "noise_from", "strength", "stationary", "n_std", "freq_smooth", "time_smooth",
                  "n_fft", "hop", "share_mask")


def _columns(s):
    cols = [c.strip() for c in s.split(",")]
    if not s.strip() or any(not c for c in cols):
        raise argparse.ArgumentTypeError(f"--columns takes comma-separated column names, got {s!r}")
    return cols


def add_batch_arguments(p) -> None:
    p.description = ("Filter many files (CSV, Parquet, NPY, WAV, FLAC) into OUTDIR, mirroring the input tree; "
                     "resumable (manifest in OUTDIR), parallel (--jobs) or on Dask (--scheduler).")
    p.add_argument("inputs", nargs="+", metavar="INPUT", help="files, folders or glob patterns (quote them)")
    p.add_argument("-o", "--output-dir", required=True, metavar="OUTDIR", help="where the filtered files go")
    p.add_argument("-r", "--recursive", action="store_true", help="look into subfolders (and ** in patterns)")
    p.add_argument("--method", choices=("fir", "spectral"), default="fir",
                   help="fir (default) or spectral (audio files; needs sigconv.engine.spectral)")
    add_filter_arguments(p)
    add_spectral_arguments(p)
    g = p.add_argument_group("sensor logs (CSV, Parquet, NPY)")
    g.add_argument("--fs", type=_positive_float("--fs"), metavar="HZ",
                   help="sample rate (default: from the time column's median spacing; NPY: from NAME.npy.json)")
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
    add_backend_arguments(p)
    g = p.add_argument_group("execution")
    g.add_argument("-j", "--jobs", type=_positive_int("--jobs"), metavar="N",
                   help="worker processes (default: CPU count, at most one per file; --scheduler local: "
                        "one worker per GPU, else per CPU)")
    g.add_argument("--scheduler", metavar="ADDRESS",
                   help="run on a Dask cluster: 'local' starts a LocalCluster, else a scheduler address")
    g.add_argument("--force", action="store_true", help="redo every file, even those the manifest has as done")
    g.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary (failures still listed)")


def _settings(args) -> dict:
    keys = ["method", "band", "lowpass", "highpass", "notch", "notch_width", "taps", "transition", "phase", "fs",
            "time_column", "columns", "gaps", "edges", "backend", "variant", "block"]
    s = {k: getattr(args, k, None) for k in keys}
    s["band"] = list(s["band"]) if s["band"] else None
    for k in _SPECTRAL_KEYS:
        s[k] = getattr(args, k, None)
    if s.get("noise_clip"):
        s["noise_clip"] = os.path.abspath(s["noise_clip"])
    if args.method != "spectral":  # spectral options do not change a FIR output
        for k in _SPECTRAL_KEYS:
            s[k] = None
    return s


def _clean_stale_parts(outdir: Path) -> int:
    n = 0
    for root, _dirs, files in os.walk(outdir):
        for f in files:
            if _STALE_PART.match(f):
                try:
                    os.unlink(os.path.join(root, f))
                    n += 1
                except OSError:
                    pass
    return n


def _lock(outdir: Path):
    f = open(outdir / ".sigconv-batch.lock", "w")
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        f.close()
        raise UsageError(f"{outdir}: another 'sigconv batch' is writing into this folder") from None
    return f


class _Progress:
    """A rich progress bar over files and bytes with throughput; a no-op when not shown."""

    def __init__(self, show: bool, n_files: int, n_bytes: int, console=None):
        self.bar = None
        if not show:
            return
        from rich.console import Console
        from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn,
                                   TimeRemainingColumn, TransferSpeedColumn)

        self.bar = Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                            MofNCompleteColumn(), DownloadColumn(), TransferSpeedColumn(), TimeRemainingColumn(),
                            console=console or Console(stderr=True), transient=True)
        self.files = self.bar.add_task("files", total=n_files)
        self.bytes = self.bar.add_task("bytes", total=n_bytes)

    def __enter__(self):
        if self.bar:
            self.bar.start()
        return self

    def advance(self, nbytes: int, rel: str) -> None:
        if self.bar:
            self.bar.update(self.files, advance=1, description=f"files ({rel[-30:]})")
            self.bar.update(self.bytes, advance=nbytes)

    def __exit__(self, *exc):
        if self.bar:
            self.bar.stop()


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def run_batch(args) -> int:
    from sigconv.engine.batch import runners
    from sigconv.engine.batch.discovery import DiscoveryError, discover, output_problem
    from sigconv.engine.batch.manifest import Manifest, settings_hash
    from sigconv._core.errors import InputError, OutputError

    if args.method == "spectral":
        try:
            from sigconv.engine.spectral import file_filter_factory  # noqa: F401
        except ImportError:
            raise UsageError("--method spectral is not available in this build (sigconv.engine.spectral is missing); "
                             "use --method fir") from None
    if args.scheduler is None and args.backend == "cuda":
        # fail before any work; safe for the workers: pool workers come from a fresh forkserver process
        from sigconv._core import devices as _devices

        try:
            _devices.resolve_backend("cuda")
        except RuntimeError as exc:
            raise InputError(str(exc)) from None
    outdir = Path(args.output_dir)
    if outdir.exists() and not outdir.is_dir():
        raise UsageError(f"{outdir}: OUTDIR exists and is not a folder")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{outdir}: cannot create OUTDIR ({exc.strerror})") from None
    outdir = Path(os.path.abspath(outdir))
    from sigconv.cli import _check_writable

    _check_writable(outdir)
    try:
        found = discover(args.inputs, outdir, recursive=args.recursive)
    except DiscoveryError as exc:
        raise UsageError(str(exc)) from None
    if not found:
        raise UsageError("no supported input files found (CSV, Parquet, NPY, WAV, FLAC)")

    lock = _lock(outdir)
    t_start = time.perf_counter()
    settings = _settings(args)
    hashes: dict = {}  # per kind: --edges counts for tables and NPY only
    manifest = Manifest(outdir)
    stale = _clean_stale_parts(outdir)
    tasks, refused = [], []
    by_rel: dict[str, str] = {}
    for f in found:
        out = outdir / f.rel
        try:
            st = f.path.stat()
            size, mtime = st.st_size, st.st_mtime_ns
        except OSError as exc:
            size, mtime = 0, 0
            f.refused = f.refused or f"cannot read ({exc.strerror})"
        if f.kind not in hashes:
            hashes[f.kind] = settings_hash(settings, f.kind)
        t = {"input": str(f.path), "rel": f.rel, "output": str(out), "outdir": str(outdir), "kind": f.kind,
             "size": size, "mtime_ns": mtime, "hash": hashes[f.kind], "settings": settings}
        why = f.refused
        if not why and f.rel in by_rel:
            why = f"output {f.rel} collides with the output of {by_rel[f.rel]}; refusing"
        if not why:
            why = output_problem(f.path, out, outdir)
        by_rel.setdefault(f.rel, str(f.path))
        if why:
            refused.append(t | {"why": why})
        else:
            tasks.append(t)
    todo = [t for t in tasks if args.force or not manifest.up_to_date(t)]
    skipped = len(tasks) - len(todo)

    n_gpus = 0 if args.backend == "cpu" else runners.visible_gpu_count()
    jobs = args.jobs or min(os.cpu_count() or 1, max(1, len(todo)))
    info: dict = {}
    if args.scheduler:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise InputError("--scheduler needs Dask: pip install 'sigconv[dask]'") from None
        gen = runners.run_dask(todo, args.scheduler, args.jobs, n_gpus, info)
        where = None
    elif jobs <= 1 or len(todo) <= 1:
        gen = runners.run_serial(todo)
        where = "in this process"
    else:
        gen = runners.run_pool(todo, jobs, n_gpus)
        where = f"{jobs} worker processes" + (f" sharing {n_gpus} GPU(s)" if n_gpus else "")

    done, failed_, warned = [], [], []
    filters: dict[float, str] = {}
    nbytes = 0
    interrupted = False
    show = not args.quiet and sys.stderr.isatty()
    try:
        for t in refused:
            manifest.append(t, runners.failed(t, t["why"]))
            failed_.append((t["rel"], t["why"]))
        with _Progress(show, len(todo), sum(t["size"] for t in todo)) as bar:
            try:
                for t, r in gen:
                    manifest.append(t, r)
                    if r["status"] == "done":
                        done.append(t["rel"])
                        nbytes += t["size"]
                        if r.get("fs") is not None and r.get("filter"):
                            filters.setdefault(r["fs"], r["filter"])
                    else:
                        failed_.append((t["rel"], r["reason"]))
                    for w in r.get("warnings") or []:
                        warned.append((t["rel"], w))
                    bar.advance(t["size"], t["rel"])
            finally:
                gen.close()
    except KeyboardInterrupt:
        interrupted = True
    finally:
        manifest.close()
        lock.close()
    secs = time.perf_counter() - t_start

    out = sys.stderr
    if not args.quiet:
        if stale:
            print(f"removed {stale} temporary file(s) left by an interrupted run", file=out)
        if filters:
            print("filters used (by sample rate):", file=out)
            for fs in sorted(filters):
                print(f"  {fs:g} Hz: {filters[fs]}", file=out)
        for rel, w in warned:
            print(f"warning: {rel}: {w}", file=out)
    for rel, why in failed_:
        print(f"failed: {rel}: {why}", file=out)
    if not args.quiet or interrupted:
        where = where or info.get("cluster", "Dask")
        rate = f"{len(done) / secs:.1f} files/s, {nbytes / 1e6 / secs:.2f} MB/s" if secs > 0 else ""
        state = "interrupted; " if interrupted else ""
        print(f"batch: {state}{len(done)} done, {skipped} skipped, {len(failed_)} failed "
              f"({_mb(nbytes)} in {secs:.2f} s, {rate}; {where}); manifest {manifest.path}", file=out)
        if interrupted:
            print("batch: finished files are complete and recorded; run the same command again to finish", file=out)
    if interrupted:
        return EXIT_INTERRUPTED
    return EXIT_DATA if failed_ else EXIT_OK
