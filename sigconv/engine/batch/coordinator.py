"""The batch coordinator: inputs -> tasks -> workers -> manifest, and a report of what happened.

:func:`run_batch` finds the files (:mod:`.discovery`), takes OUTDIR's lock (one batch writes into a folder at
a time), removes temporary outputs a killed run left, skips what the manifest has as done and unchanged,
runs the rest in this process (serially), a local process pool (with one GPU: the GPU's own process filters
the pool's logs, recordings then run in threads here) or on Dask (:mod:`.runners`), records every result as it
arrives (:mod:`.manifest`) and returns a :class:`BatchReport`. With several GPUs, pool and Dask workers get
their GPU (and create their CUDA context) themselves; the coordinator makes one only when files run in its own
threads or serially, after any pool has forked. Ctrl-C, SIGTERM or SIGHUP (or ``cancel.STOP``) stops the batch:
no file starts after it, the files in flight stop and leave no temporary file, and the report and manifest hold
exactly the outputs left. A file whose output path already holds a file the batch did not write (by its manifest)
fails, unless ``force``; one that holds anything but a regular file always fails (:mod:`.discovery`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import signal
import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional, Sequence

from sigconv._core import devices
from sigconv._core.atomic import PART_NAME
from sigconv._core.errors import STOP_SIGNALS, InputError, OutputError, Terminated
from sigconv.engine.batch import cancel, gpu_service, runners, stream
from sigconv.engine.batch.discovery import DiscoveryError, find_inputs, output_problem, overwrite_problem
from sigconv.engine.batch.manifest import Manifest, settings_hash
from sigconv.engine.batch.settings import BatchSettings

__all__ = ["BatchRequest", "BatchReport", "BatchProgress", "run_batch"]

LOCK_NAME = ".sigconv-batch.lock"


@dataclass(frozen=True)
class BatchRequest:
    """What to filter and where: ``inputs`` (files, folders, glob patterns) into ``outdir``, mirroring the
    input tree. ``recursive`` looks into subfolders (and ``**`` in patterns); ``jobs`` is the number of worker
    processes (default: the CPU count, at most one per file; on a local Dask cluster one per GPU, else per
    CPU; never more than the files to run); ``scheduler`` runs on Dask ("local" starts a LocalCluster, else a
    scheduler address); ``force`` redoes files the manifest has as done, and replaces files at their output paths
    that the batch did not write (never a folder, FIFO, device or socket)."""

    inputs: Sequence
    outdir: object
    settings: BatchSettings = field(default_factory=BatchSettings)
    recursive: bool = False
    jobs: Optional[int] = None
    scheduler: Optional[str] = None
    force: bool = False

    def __post_init__(self):
        if isinstance(self.inputs, (str, os.PathLike)):
            object.__setattr__(self, "inputs", (self.inputs,))
        object.__setattr__(self, "inputs", tuple(str(i) for i in self.inputs))
        if not self.inputs:
            raise ValueError("inputs must name at least one file, folder or pattern")
        if not isinstance(self.settings, BatchSettings):
            raise ValueError(f"settings must be a BatchSettings, got {type(self.settings).__name__}")
        if self.jobs is not None and (isinstance(self.jobs, bool) or not isinstance(self.jobs, int) or self.jobs < 1):
            raise ValueError(f"jobs must be a positive integer, got {self.jobs!r}")


@dataclass(frozen=True)
class BatchProgress:
    """One finished file, passed to ``run_batch``'s ``on_result``: its output name ``rel``, its ``size`` in
    bytes and ``status`` ("done" or "failed"), with the totals of the files being run (skipped and refused
    files are not counted)."""

    rel: str
    size: int
    status: str
    files_total: int
    bytes_total: int


@dataclass
class BatchReport:
    """What a batch did. ``failed`` and ``warnings`` are (rel, text) pairs; ``filters`` maps each sample rate to
    the filter used there; ``bytes`` is the input size of the files done; ``where`` says where they ran."""

    done: list = field(default_factory=list)
    skipped: int = 0
    failed: list = field(default_factory=list)
    warnings: list = field(default_factory=list)
    filters: dict = field(default_factory=dict)
    bytes: int = 0
    seconds: float = 0.0
    where: str = ""
    manifest: Optional[Path] = None
    interrupted: bool = False
    stale: int = 0
    #: files stopped in flight by an interruption: nothing of them was left (the manifest does not list them)
    stopped: int = 0
    #: the signal that stopped the batch (SIGINT, SIGTERM or SIGHUP; the first of them), None when none did
    stop_signal: Optional[int] = None
    #: lines worth a user's eye that concern no single file (files of other suffixes left out of folders)
    notes: list = field(default_factory=list)


def _clean_stale_parts(outdir: Path) -> int:
    n = 0
    for root, _dirs, files in os.walk(outdir):
        for f in files:
            if PART_NAME.match(f):  # a temporary output left by a killed run
                try:
                    os.unlink(os.path.join(root, f))
                    n += 1
                except OSError:
                    pass
    return n


class _Lock:
    """OUTDIR's lock: an flock on ``LOCK_NAME``, removed when the batch ends (while still held, so a batch
    waiting on the same file sees it gone and takes a fresh one)."""

    def __init__(self, outdir: Path):
        self.path = outdir / LOCK_NAME
        for _ in range(100):
            f = open(self.path, "w")
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                f.close()
                raise ValueError(f"{outdir}: another 'sigconv batch' is writing into this folder") from None
            try:
                same = os.path.samestat(os.fstat(f.fileno()), os.stat(self.path))
            except OSError:
                same = False
            if same:  # not a file that the batch before us removed after we opened it
                self.f = f
                return
            f.close()
        raise ValueError(f"{outdir}: cannot take the batch lock {LOCK_NAME}")

    def close(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass
        self.f.close()


def _check_request(request: BatchRequest) -> Path:
    """Fail before any work: the method and backend can run, OUTDIR is (or becomes) a writable folder."""
    s = request.settings
    if s.method == "spectral":
        try:
            from sigconv.engine.spectral import spectral_file_filter  # noqa: F401
        except ImportError:
            raise ValueError("--method spectral is not available in this build (its module is missing); "
                             "use --method fir") from None
    if request.scheduler is None and s.kernel.backend == "cuda":
        # safe for the workers: pool workers come from a fresh forkserver process. When CuPy is installed and one
        # GPU is visible, the full check (CuPy's import, the driver's start) waits for _runner: the GPU runner makes
        # it while the first files are read, and stops the batch with its error, before any output, if it fails
        try:
            if devices.cuda_quick_reason() or runners.visible_gpu_count() != 1:
                s.kernel.resolve()  # (the variant was checked when the KernelChoice was made)
        except RuntimeError as exc:
            raise InputError(str(exc)) from None
    outdir = Path(request.outdir)
    if outdir.exists() and not outdir.is_dir():
        raise ValueError(f"{outdir}: OUTDIR exists and is not a folder")
    try:
        outdir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{outdir}: cannot create OUTDIR ({exc.strerror})") from None
    outdir = Path(os.path.abspath(outdir))
    from sigconv.engine.denoise import check_writable

    check_writable(outdir)
    return outdir


def _out_stamp(path) -> Optional[tuple]:
    """What identifies the file at ``path`` now (device, inode, size, mtime); None when there is none."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _tasks(found, outdir: Path, settings: BatchSettings):
    """(tasks to run or skip, refused tasks with their reason) for the files found."""
    options = settings.manifest_dict()
    batch = uuid.uuid4().hex
    hashes: dict = {}  # per kind: the edge rule counts for tables and NPY only
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
            hashes[f.kind] = settings_hash(options, f.kind)
        t = {"input": str(f.path), "rel": f.rel, "output": str(out), "outdir": str(outdir), "kind": f.kind,
             "size": size, "mtime_ns": mtime, "hash": hashes[f.kind], "settings": settings, "batch": batch}
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
    return tasks, refused


def _replaceable(todo: list, refused: list, manifest: Manifest, force: bool) -> list:
    """The tasks of ``todo`` whose output path holds nothing, or a file the batch may replace (``force``, or the
    file the manifest records it wrote there, unchanged: ``task["replace"]`` tells the worker, which checks again
    just before its rename); the others go to ``refused`` with the reason."""
    keep = []
    for t in todo:
        t["replace"] = True if force else manifest.written(t["output"])
        why = overwrite_problem(Path(t["output"]), t["replace"])
        if why:
            refused.append(t | {"why": why})
        else:
            keep.append(t)
    return keep


def _on_gpu(request: BatchRequest, n_gpus: int) -> bool:
    """Whether this process's files filter on a GPU: "cuda", or "auto" where CuPy is installed and a GPU is
    visible (should CUDA then fail to start, "auto" files filter on the cpu backend, in the same threads)."""
    backend = request.settings.kernel.backend
    if backend == "cpu" or n_gpus == 0:
        return False
    return backend == "cuda" or devices.cuda_quick_reason() is None


#: ``--backend auto`` with one GPU runs a batch of logs there (a worker pool and the GPU's process) when every log is
#: read whole and they average ``AUTO_GPU_LOG_BYTES`` or more; other batches of logs go to the CPU process pool, which
#: then starts no CUDA. Measured on an H200 host (16 cores), 2026-12-02, whole commands, medians of 3 in one run of
#: ``benchmarks/batch_bench.py`` (benchmarks/results/H200-2026-12-02-batch/): 1,000 logs of 63 KB, the pool 2.71 s
#: against the GPU 2.99 s (such a log filters in well under a millisecond on a CPU, less than a request to the GPU's
#: process costs); 200 logs of 1.5 MB, the GPU 1.72 s against the pool 1.91 s; 3 CSV logs of 25 MB (streamed in blocks,
#: so on the GPU they run in threads of one process), the pool 2.40 s against 2.49 s (parsing and writing the text
#: is the work there, and processes do it without sharing an interpreter lock).
AUTO_GPU_LOG_BYTES = 1 << 20
#: A batch with recordings (which run in threads sharing the GPU) goes there when its files average this much or
#: more.
AUTO_GPU_MIN_FILE_BYTES = 4 << 20


def _auto_on_gpu(todo: list) -> bool:
    """Whether ``--backend auto`` with one GPU (and no other choice made) runs the files ``todo`` there: the rules
    above."""
    total = sum(t["size"] for t in todo)
    if all(t["kind"] != "audio" for t in todo):
        return (all(gpu_service.served(t, stream.streamed(t)) for t in todo)
                and total >= AUTO_GPU_LOG_BYTES * len(todo))
    return total >= AUTO_GPU_MIN_FILE_BYTES * len(todo)


def _gpu_process_wanted(request: BatchRequest) -> bool:
    """Whether the batch will likely run on one GPU with its own process (``runners.run_gpu``), judged before the
    files are found, so that the process (and CUDA) can start first; a wrong guess costs one process's start."""
    if request.settings.kernel.backend == "cpu" or request.scheduler or request.jobs == 1:
        return False
    return runners.visible_gpu_count() == 1 and _on_gpu(request, 1)


def _runner(request: BatchRequest, todo: list, feed: Callable, info: dict, gpu=None):
    """(generator of (task, result), where the files run; None for Dask: known once its cluster is up, whether
    a stop is cooperative (threads, pool, Dask) or Ctrl-C interrupts this process's file (serial)). ``feed(tasks)``
    hands tasks of ``todo`` to a runner as it takes them; ``gpu``: the GPU's process, started already (the runner
    takes it over, or it is closed here). When "auto" settles on the CPU pool although a GPU is here,
    ``info["settings"]`` holds the tasks' settings on "cpu". No more workers (processes, threads, Dask workers)
    start than there are files for them, and the description says how many did."""
    n_todo = len(todo)
    n_gpus = 0 if request.settings.kernel.backend == "cpu" else runners.visible_gpu_count()
    jobs = request.jobs or min(os.cpu_count() or 1, max(1, n_todo))
    kernel = request.settings.kernel
    if (kernel.backend == "auto" and kernel.variant == "auto" and n_gpus and not request.scheduler and jobs > 1
            and n_todo > 1 and not _auto_on_gpu(todo)):
        # the CPU pool is the faster there, on the cpu backend (its workers would otherwise each start CUDA)
        info["settings"] = replace(request.settings, kernel=replace(kernel, backend="cpu"))
        n_gpus = 0
    if request.scheduler:
        try:
            import distributed  # noqa: F401
        except ImportError:
            raise InputError("--scheduler needs Dask: pip install 'sigconv[dask]'") from None
        jobs = request.jobs
        if request.scheduler == "local":  # a cluster of our own: no more workers than files
            jobs = max(1, min(jobs or n_gpus or os.cpu_count() or 1, n_todo))
        return runners.run_dask(feed(todo), request.scheduler, jobs, n_gpus, info), None, True
    cuda = request.settings.kernel.backend == "cuda"
    if n_gpus == 1 and jobs > 1 and n_todo > 1 and _on_gpu(request, n_gpus):
        # one GPU, one CUDA context: logs in a process pool that parses and writes while one more process filters
        # them on the GPU; then recordings and streamed tables in threads of this process
        served = [t for t in todo if gpu_service.served(t, stream.streamed(t))]
        rest = [t for t in todo if not gpu_service.served(t, stream.streamed(t))]
        procs, threads = min(jobs, len(served)), min(jobs, len(rest))
        where = " then ".join(w for w in (f"{procs} worker processes and 1 GPU process" if served else "",
                                          f"{threads} threads sharing 1 GPU" if rest else "") if w)
        return runners.run_gpu(feed(served), feed(rest), max(1, procs), check_cuda=cuda, info=info, service=gpu,
                               threads=max(1, threads)), where, True
    if gpu is not None:
        gpu.close(timeout=0)  # not needed after all: ended at once, whatever it is doing
    if cuda:
        try:
            request.settings.kernel.resolve()
        except RuntimeError as exc:
            raise InputError(str(exc)) from None
    if jobs <= 1 or n_todo <= 1:
        return runners.run_serial(feed(todo)), "in this process", False
    jobs = min(jobs, n_todo)
    return runners.run_pool(feed(todo), jobs, n_gpus), f"{jobs} worker processes" + (
        f" sharing {n_gpus} GPU(s)" if n_gpus else ""), True


def _remove_parts(outputs) -> None:
    """Remove the temporary outputs of ``outputs`` (files stopped in flight in a process that was then killed):
    one look into each folder."""
    by_folder: dict = {}
    for out in outputs:
        out = Path(out)
        by_folder.setdefault(out.parent, set()).add(out.name)
    for folder, names in by_folder.items():
        try:
            entries = os.listdir(folder)
        except OSError:
            continue
        for n in entries:
            m = PART_NAME.match(n)
            if m and m.group(1) in names:
                try:
                    os.unlink(folder / n)
                except OSError:
                    pass


class _StopOnSignals:
    """The stop signals while a batch runs: Ctrl-C's SIGINT, and SIGTERM and SIGHUP (what ``timeout``, systemd, job
    schedulers and a closed terminal send), each handled alike. The first one stops the batch (``cancel.STOP``;
    ``interrupt``: also raise KeyboardInterrupt, or :class:`Terminated` for the others, in this thread, for the file
    that runs here); a second one raises at once. Either is raised once at most: after that, and within
    :meth:`held` (a result being recorded), signals are only noted, so that no clean-up is cut short. ``signum``:
    the first signal. Only in the main thread; elsewhere the handling before stays, and so does an ignored signal
    (``nohup``'s SIGHUP). Where SIGTERM or SIGHUP had their default action (a program calling ``run_batch``), the
    process still ends by that signal, once the batch has cleaned up and released OUTDIR."""

    def __init__(self, interrupt: bool):
        self.interrupt = interrupt
        self.prev: dict = {}
        self.signum: Optional[int] = None
        self.raised = False
        self.depth = 0
        self.pending: Optional[BaseException] = None

    def _handler(self, signum, frame):
        if self.signum is None:
            self.signum = signum
        again = cancel.STOP.is_set()
        cancel.STOP.set()
        if (again or self.interrupt) and not self.raised:
            self.raised = True
            exc = KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)
            if self.depth:
                self.pending = exc  # raised when the result being recorded is
            else:
                raise exc

    @contextlib.contextmanager
    def held(self):
        """A block that a stop signal does not cut short: what it raises comes at the block's end."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
            if not self.depth and self.pending is not None:
                exc, self.pending = self.pending, None
                raise exc

    def closing(self) -> None:
        """From now on signals are only noted (the batch is cleaning up)."""
        self.raised = True
        self.pending = None

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in STOP_SIGNALS:
                if signal.getsignal(sig) != signal.SIG_IGN:
                    self.prev[sig] = signal.signal(sig, self._handler)
        return self

    def __exit__(self, *exc):
        for sig, prev in self.prev.items():
            signal.signal(sig, prev if prev is not None else signal.SIG_DFL)
        if self.signum != signal.SIGINT and self.prev.get(self.signum) == signal.SIG_DFL:
            signal.raise_signal(self.signum)


def run_batch(request: BatchRequest, *, on_result: Optional[Callable[[BatchProgress], None]] = None) -> BatchReport:
    """Filter every file of ``request``; see the module docstring.

    ``on_result(BatchProgress)`` is called in this process after each file run (a progress bar). Ctrl-C, SIGTERM
    or SIGHUP stops the workers: the files in flight leave no output, the report says ``interrupted`` (and
    ``stop_signal``) and a rerun finishes.

    Raises ValueError (a request that cannot work: no input found, OUTDIR is a file or busy, spectral missing),
    InputError (the backend asked for cannot run, Dask missing) or OutputError (OUTDIR cannot be created or
    written), each with one line, before any file is touched.
    """
    # the GPU's process first: CUDA's start is the longest part of a batch's start, and overlaps all of the rest
    gpu = runners.start_gpu_process() if _gpu_process_wanted(request) else None
    try:
        outdir = _check_request(request)
        try:
            inputs = find_inputs(request.inputs, outdir, recursive=request.recursive)  # none found: DiscoveryError
        except DiscoveryError as exc:
            raise ValueError(str(exc)) from None
        lock = _Lock(outdir)
    except BaseException:
        if gpu is not None:
            gpu.close(timeout=0)  # a request that cannot run: the error now, not once CUDA has started
        raise
    found = inputs.found

    t_start = time.perf_counter()
    manifest = Manifest(outdir)
    report = BatchReport(manifest=manifest.path)
    if inputs.skipped_note():
        report.notes.append(inputs.skipped_note())
    cancel.STOP.clear()
    launched: dict = {}  # tasks handed to the runner, by rel, until their result is recorded
    ran: list = []  # the outputs of every task handed to the runner

    def feed(part):
        for t in part:
            if cancel.STOP.is_set():
                return
            if info.get("settings") is not None:  # "auto" decided for the CPU
                t["settings"] = info["settings"]
            t["before"] = _out_stamp(t["output"])
            launched[t["rel"]] = t
            ran.append(t["output"])
            yield t

    try:
        report.stale = _clean_stale_parts(outdir)
        tasks, refused = _tasks(found, outdir, request.settings)
        todo = [t for t in tasks if request.force or not manifest.up_to_date(t)]
        report.skipped = len(tasks) - len(todo)
        todo = _replaceable(todo, refused, manifest, request.force)
        info: dict = {}
        total_bytes = sum(t["size"] for t in todo)
        gen, where, cooperative = _runner(request, todo, feed, info, gpu)
        gpu = None  # the runner has it
    except BaseException:
        if gpu is not None:
            gpu.close()
        manifest.close()
        lock.close()
        raise

    def record(t, r):
        if r["status"] == "cancelled" or r.get("lost"):
            if _out_stamp(t["output"]) in (t.get("before"), None):
                if r["status"] == "cancelled":
                    launched.pop(t["rel"], None)
                    report.stopped += 1
                    return
            else:  # its output was moved into place as the stop (or its worker's death) came: it is complete
                r = r | {"status": "done", "output": t["output"], "reason": None}
        manifest.append(t, r)
        launched.pop(t["rel"], None)
        if r["status"] == "done":
            report.done.append(t["rel"])
            report.bytes += t["size"]
            if r.get("fs") is not None and r.get("filter"):
                report.filters.setdefault(r["fs"], r["filter"])
        else:
            report.failed.append((t["rel"], r["reason"]))
        for w in r.get("warnings") or []:
            report.warnings.append((t["rel"], w))
        if on_result is not None:
            on_result(BatchProgress(t["rel"], t["size"], r["status"], len(todo), total_bytes))

    stopper = _StopOnSignals(interrupt=not cooperative)
    with stopper:
        try:
            with stopper.held():
                for t in refused:
                    manifest.append(t, runners.failed(t, t["why"]))
                    report.failed.append((t["rel"], t["why"]))
            try:
                for t, r in gen:
                    with stopper.held():
                        record(t, r)
            finally:
                gen.close()
        except KeyboardInterrupt as exc:
            cancel.STOP.set()
            stopper.signum = stopper.signum or getattr(exc, "signum", None)
        finally:
            stopper.closing()
            try:
                # files in flight whose result never came (their process was stopped or killed): an output moved
                # into place counts as done; then the temporary files of every file run are removed (those of a
                # worker killed in flight; a worker still running one, on a remote cluster, then fails to move it
                # into place)
                for t in list(launched.values()):
                    record(t, runners.cancelled(t))
                _remove_parts(ran)
                report.interrupted = cancel.STOP.is_set()
                report.stop_signal = stopper.signum if report.interrupted else None
            finally:
                cancel.STOP.clear()
                manifest.close()
                lock.close()
    if info.get("gpu_error"):
        raise InputError(info["gpu_error"])
    report.seconds = time.perf_counter() - t_start
    report.where = where or info.get("cluster", "Dask")
    return report
