"""Where the files are filtered: in the coordinating process, in a local process pool, or on Dask.

Every runner is a generator of (task, result) in completion order; the coordinator records each
result (manifest, progress) as it arrives. Runners take tasks from their iterable only as they launch
them, and at most ``2 * workers`` files are in flight, so a Ctrl-C or a dead worker affects only those.

Stopping (Ctrl-C, SIGTERM or SIGHUP: the coordinator sets :data:`.cancel.STOP`): a runner launches nothing more,
tells the files in flight to stop (threads see the flag; pool workers get SIGTERM, which aborts the file in hand
through its atomic output and makes every queued file return at once; Dask workers get
:func:`.cancel.stop_batch`), yields every result that comes back within ``STOP_GRACE`` seconds (done:
its output is complete; "cancelled": nothing of it remains) and ends. Pool workers ignore SIGINT (Ctrl-C reaches
the whole process group: the coordinator decides) and take SIGTERM and SIGHUP, from the coordinator or sent to the
whole group (systemd, a closed terminal), as that stop.

CPU or GPU: on the cpu backend files run in a process pool (``run_pool``). On one GPU (``run_gpu``) logs run
in a process pool too, whose workers parse and write while one more process, the only one with a CUDA context,
filters them (:mod:`.gpu_service`); recordings and streamed tables, which keep a block filter's state, then run
in threads of this process (``run_threads``). The coordinator decides which (``coordinator._auto_on_gpu``
for "auto"). Pools fork from the coordinator where that is sound (no other thread, no CUDA: the command line),
so that workers start at once with its imports; else they come from a forkserver.

Several GPUs: one CUDA context per worker process. The coordinator then never touches CUDA (it counts GPUs
from /proc and CUDA_VISIBLE_DEVICES), and each worker is pinned to one GPU through CUDA_VISIBLE_DEVICES
before it imports CuPy: round robin over the GPUs in the local pool, one worker per GPU in a Dask
LocalCluster (``--scheduler local``). On a remote cluster (``--scheduler ADDRESS``) the workers'
own environment decides (start one worker per GPU with CUDA_VISIBLE_DEVICES set, e.g. with
dask-cuda); when every worker advertises a ``GPU`` resource, each file asks for ``GPU=1``.
"""

from __future__ import annotations

import itertools
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Iterable, Optional

from sigconv.engine.batch import cancel
from sigconv.engine.batch.process import process_task

#: Seconds a stopped runner waits for the files in flight to come back.
STOP_GRACE = 1.5
#: Seconds between looks at the stop flag while waiting for results.
POLL = 0.1
#: The interpreter's thread switch interval while files run in threads (``sys.setswitchinterval``; Python's
#: default is 5 ms). A file's many short NumPy and Arrow calls each release and retake the GIL; with many threads
#: each retake can wait a whole interval behind a thread running Python, so a short one keeps the threads moving.
THREAD_SWITCH_INTERVAL = 0.0005

PROC_GPUS = "/proc/driver/nvidia/gpus"


# ------------------------------------------------------------------------------------ GPU plans


def visible_gpu_count(env=None, proc_dir: str = PROC_GPUS) -> int:
    """GPUs this process could use, without creating a CUDA context: CUDA_VISIBLE_DEVICES when set
    (empty or -1: none), else the driver's list under /proc. 0 without the NVIDIA driver."""
    env = os.environ if env is None else env
    if env.get("SIGCONV_DISABLE_CUDA"):
        return 0
    vis = env.get("CUDA_VISIBLE_DEVICES")
    if vis is not None:
        ids = []
        for tok in vis.split(","):
            tok = tok.strip()
            if not tok or tok.startswith("-"):  # CUDA stops at the first invalid id
                break
            ids.append(tok)
        return len(ids)
    try:
        return sum(1 for _ in Path(proc_dir).iterdir())
    except OSError:
        pass
    if proc_dir != PROC_GPUS:  # a faked /proc (tests): no fallback
        return 0
    import shutil
    import subprocess

    smi = shutil.which("nvidia-smi")  # containers without /proc/driver/nvidia
    if not smi:
        return 0
    try:
        r = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return 0
    return sum(1 for line in r.stdout.splitlines() if line.startswith("GPU ")) if r.returncode == 0 else 0


def _visible_ids(n_gpus: int, env=None) -> list[str]:
    """Device ids to hand out: the parent's CUDA_VISIBLE_DEVICES entries (may be UUIDs), else 0..n-1."""
    env = os.environ if env is None else env
    vis = env.get("CUDA_VISIBLE_DEVICES")
    if vis:
        ids = [t.strip() for t in vis.split(",") if t.strip()][:n_gpus]
        if len(ids) == n_gpus:
            return ids
    return [str(i) for i in range(n_gpus)]


def pool_gpu_plan(jobs: int, n_gpus: int, env=None) -> list[Optional[str]]:
    """CUDA_VISIBLE_DEVICES of each pool worker: round robin over the GPUs (None: no GPU)."""
    if n_gpus <= 0:
        return [None] * jobs
    ids = _visible_ids(n_gpus, env)
    return [ids[i % n_gpus] for i in range(jobs)]


def local_cluster_plan(n_gpus: int, n_cpus: int, jobs: Optional[int] = None, env=None) -> list[dict]:
    """Worker specs for ``--scheduler local``: one single-threaded worker per GPU (``--jobs`` more
    share the GPUs round robin), each with its own CUDA_VISIBLE_DEVICES and a ``GPU`` resource;
    without GPUs, ``--jobs`` (default: the CPU count) CPU workers."""
    if n_gpus > 0:
        n = jobs or n_gpus
        ids = pool_gpu_plan(n, n_gpus, env)
        return [{"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": ids[i]}, "resources": {"GPU": 1}} for i in range(n)]
    n = jobs or max(1, n_cpus)
    return [{"nthreads": 1, "env": {}, "resources": {}} for _ in range(n)]


# ------------------------------------------------------------------------------------ runners


def failed(task: dict, reason: str) -> dict:
    return {"input": task["input"], "rel": task["rel"], "status": "failed", "output": None, "reason": reason,
            "warnings": [], "fs": None, "filter": None, "seconds": 0.0}


def cancelled(task: dict) -> dict:
    return failed(task, "the batch was stopped") | {"status": "cancelled"}


def run_serial(tasks: Iterable[dict]):
    for t in tasks:
        if cancel.STOP.is_set():
            return
        yield t, process_task(t)


class _Lookahead:
    """Tasks taken from an iterable one at a time, with a look at the next (a failed submit keeps it)."""

    def __init__(self, tasks: Iterable[dict]):
        self._it = iter(tasks)
        self._next = None
        self._have = False

    def peek(self):
        if not self._have:
            self._next = next(self._it, None)
            self._have = self._next is not None
        return self._next if self._have else None

    def take(self):
        t = self.peek()
        self._have = False
        return t

    def __bool__(self):
        return self.peek() is not None


def run_threads(tasks: Iterable[dict], workers: int, check_cuda: bool = False, info: Optional[dict] = None,
                warm: bool = True):
    """Files in ``workers`` threads of this process, which filters them on its GPU (logs use the device one at a
    time, see ``gpu_file.DEVICE_LOCK``). ``warm``: make the CUDA context while the first files are read;
    ``check_cuda``: the batch asked for the cuda backend, so CUDA failing to start stops it, with the reason in
    ``info["gpu_error"]``."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    pending = _Lookahead(tasks)
    if not pending:
        return
    inflight: dict = {}
    if warm:
        threading.Thread(target=_warm_gpu, args=(check_cuda, info if info is not None else {}), daemon=True,
                         name="sigconv-gpu-warm-up").start()
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="sigconv-batch")
    interval = sys.getswitchinterval()
    sys.setswitchinterval(min(interval, THREAD_SWITCH_INTERVAL))
    try:
        while (pending and not cancel.STOP.is_set()) or inflight:
            while pending and len(inflight) < 2 * workers and not cancel.STOP.is_set():
                t = pending.take()
                inflight[pool.submit(process_task, t)] = t
            if cancel.STOP.is_set():
                break
            done, _ = wait(list(inflight), timeout=POLL, return_when=FIRST_COMPLETED)
            for f in done:
                t = inflight.pop(f)
                yield t, _thread_outcome(f, t)
        if inflight:  # stopped: the files in flight see the flag at their next check
            done, _ = wait(list(inflight), timeout=STOP_GRACE)
            for f in done:
                t = inflight.pop(f)
                yield t, _thread_outcome(f, t)
    finally:
        sys.setswitchinterval(interval)
        pool.shutdown(wait=False, cancel_futures=True)


def start_gpu_process():
    """The GPU's process for :func:`run_gpu` (a ``GPUService``), started now: CUDA takes about a second to start, so
    the coordinator starts it before it looks for the files. Forked from this process where that is safe, so it
    starts with this process's imports."""
    import multiprocessing as mp

    from sigconv.engine.batch.gpu_service import GPUService

    return GPUService.start(mp.get_context("fork") if _can_fork() else _pool_context(served=True))


def run_gpu(served: Iterable[dict], rest: Iterable[dict], jobs: int, check_cuda: bool = False,
            info: Optional[dict] = None, service=None, threads: Optional[int] = None):
    """One GPU: the logs in ``served`` in a pool of ``jobs`` worker processes whose filtering one more process does
    on the GPU (:class:`.gpu_service.GPUService`, started first: CUDA starts while the pool starts and the first
    files are parsed), then ``rest`` (recordings, streamed tables) in ``threads`` (default ``jobs``) threads of this
    process, which then makes its own CUDA context. ``check_cuda``: as in ``run_threads``; ``info["gpu_served"]``:
    the logs the GPU's process filtered. ``service``: the GPU's process, started already
    (:func:`start_gpu_process`); it is closed here either way."""
    info = info if info is not None else {}
    served = iter(served)
    first = next(served, None)
    if first is None and service is not None:
        service.close(timeout=0)
    if first is not None:
        service = service or start_gpu_process()

        def watch():
            reason = service.status()
            if isinstance(reason, str) and check_cuda and not info.get("gpu_error"):
                info["gpu_error"] = f"backend 'cuda' is not usable here: {reason}"
                cancel.STOP.set()

        try:
            yield from run_pool(itertools.chain([first], served), jobs, service=service, watch=watch)
        finally:
            info["gpu_served"] = service.close()
            watch()
    if not cancel.STOP.is_set():
        yield from run_threads(rest, threads or jobs, check_cuda=check_cuda, info=info)


def _warm_gpu(check_cuda: bool, info: dict) -> None:
    """Make this process's CUDA context (CuPy's import, the driver); when it cannot run and ``check_cuda``, stop the
    batch, the reason in ``info["gpu_error"]``."""
    from sigconv._core import devices

    reason = devices.cuda_reason()
    if reason:
        if check_cuda:
            info["gpu_error"] = f"backend 'cuda' is not usable here: {reason}"
            cancel.STOP.set()
        return
    try:
        import cupy

        cupy.zeros(1, dtype=cupy.float32).sum()
    except Exception:  # noqa: BLE001 - the first file to filter says what is wrong
        pass


def _thread_outcome(fut, task: dict) -> dict:
    try:
        return fut.result()
    except Exception as exc:  # noqa: BLE001 (process_task catches what a file raises; this is a bug)
        return failed(task, f"{type(exc).__name__}: {exc}")


def _pool_worker_init(gpu_queue, service, arrow_threads: int) -> None:
    # Ctrl-C goes to the whole process group: the coordinator alone decides what to stop. SIGTERM (the coordinator's,
    # or one sent to the group) and SIGHUP stop this worker's files, leaving no temporary file
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _stop_on_term)
    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, _stop_on_term)
    import pyarrow

    pyarrow.set_cpu_count(arrow_threads)  # the workers share the CPUs: no pool of Arrow threads each
    if gpu_queue is not None:
        dev = gpu_queue.get()
        if dev is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = dev
    if service is not None:  # (address, authkey): the GPU's process filters
        from sigconv.engine.batch import gpu_service

        gpu_service.connect(*service)


_IN_TASK = False


def _stop_on_term(signum, frame):
    """SIGTERM (or SIGHUP): stop. The file in hand unwinds through its atomic output (the temporary file is
    removed) and every file still queued for this worker returns "cancelled" without starting. Raised once: a
    second signal (the group's, then the coordinator's) must not cut that clean-up short."""
    global _IN_TASK
    cancel.STOP.set()
    if _IN_TASK:
        _IN_TASK = False
        raise SystemExit(128 + signum)


def _pool_task(task: dict) -> dict:
    """process_task in a pool worker, stoppable by SIGTERM (see ``_stop_on_term``)."""
    global _IN_TASK
    if cancel.STOP.is_set():
        return cancelled(task)
    _IN_TASK = True
    try:
        return process_task(task)
    except SystemExit:
        return cancelled(task)
    finally:
        _IN_TASK = False


#: What the pool's workers import before their first file, once, in the process they are forked from; those
#: served by the GPU's process filter nothing themselves (``CPU_FILTER_MODULES``: what filtering on the CPU adds).
POOL_PRELOAD = ["sigconv.engine.batch.process", "sigconv.engine.batch.formats", "sigconv.engine.batch.gpu_service",
                "sigconv.engine.gpu_file", "sigconv.backends", "sigconv.engine.file", "pyarrow.csv",
                "pyarrow.parquet", "pyarrow.compute", "encodings.utf_8_sig", "multiprocessing.connection"]
CPU_FILTER_MODULES = ["scipy.fft"]


def _can_fork() -> bool:
    """Whether a child forked from this process starts sound: it runs no other thread (whose locks a child could
    inherit held), and it has not started CUDA (the command line's coordinator never does)."""
    import multiprocessing as mp

    return "fork" in mp.get_all_start_methods() and threading.active_count() == 1 and "cupy" not in sys.modules


def _pool_context(served: bool = False):
    """fork where that is sound (``_can_fork``; the command line): the workers start at once, with what this process
    imported (``POOL_PRELOAD`` is imported here first, once; with ``CPU_FILTER_MODULES`` unless the GPU's process
    filters for them). Else forkserver: workers forked from a clean server process that imported both once."""
    import importlib
    import multiprocessing as mp

    if _can_fork():
        for name in POOL_PRELOAD + ([] if served else CPU_FILTER_MODULES):
            importlib.import_module(name)
        return mp.get_context("fork")
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(POOL_PRELOAD + CPU_FILTER_MODULES)
    return ctx


_DIED = object()
_DIED_TEXT = "a worker process died (killed or crashed) while this file was in flight; rerun to retry"


def _died(task: dict) -> dict:
    """The result of a file whose worker died in flight: failed, and ``lost`` (its output may have been moved into
    place before the worker died: the coordinator looks)."""
    return failed(task, _DIED_TEXT) | {"lost": True}


def _outcome(fut, task: dict):
    """The result of a finished pool future; ``_DIED`` when its worker died."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return fut.result()
    except BrokenProcessPool:
        return _DIED
    except SystemExit:  # a stop that landed as the file returned: its output was checked by the coordinator
        return cancelled(task)
    except Exception as exc:  # noqa: BLE001 (e.g. a result that cannot be pickled)
        return failed(task, f"worker error: {type(exc).__name__}: {exc}")


def _signal_all(procs, sig) -> None:
    for p in procs:
        try:
            os.kill(p.pid, sig)
        except (OSError, AttributeError, TypeError):
            pass


def run_pool(tasks: Iterable[dict], jobs: int, n_gpus: int = 0, service=None, watch=None):
    """A process pool of ``jobs`` workers; a worker that dies fails the files in flight (rerun to retry)
    and the batch goes on with a fresh pool. ``service``: the ``GPUService`` that filters the workers' logs;
    ``watch()`` is called between waits. Stopped: see the module docstring."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = _pool_context(served=service is not None)
    pending = _Lookahead(tasks)
    while pending and not cancel.STOP.is_set():
        gq = ctx.Queue()
        for dev in pool_gpu_plan(jobs, n_gpus):
            gq.put(dev)
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_pool_worker_init,
                                   initargs=(gq, None if service is None else (service.address, service.authkey),
                                             max(1, (os.cpu_count() or 1) // jobs)))
        inflight: dict = {}
        clean = False
        try:
            broken = False
            while (pending or inflight) and not broken and not cancel.STOP.is_set():
                while pending and len(inflight) < 2 * jobs and not broken and not cancel.STOP.is_set():
                    try:
                        inflight[pool.submit(_pool_task, pending.peek())] = pending.peek()
                        pending.take()
                    except BrokenProcessPool:  # a worker died since the last wait: its futures tell which
                        broken = True
                done, _ = wait(list(inflight), timeout=POLL, return_when=FIRST_COMPLETED)
                if watch is not None:
                    watch()
                for f in done:
                    t = inflight.pop(f)
                    r = _outcome(f, t)
                    broken = broken or r is _DIED
                    yield t, _died(t) if r is _DIED else r
            if cancel.STOP.is_set() and not broken:
                # stopped: SIGTERM aborts the file each worker has in hand, the queued ones return at once
                procs = list((getattr(pool, "_processes", None) or {}).values())
                _signal_all(procs, signal.SIGTERM)
                done, _ = wait(list(inflight), timeout=STOP_GRACE)
                for f in done:
                    t = inflight.pop(f)
                    r = _outcome(f, t)
                    if r is not _DIED:
                        yield t, r
                clean = not inflight  # else: still running after the grace period; killed below
                return
            if broken:  # the executor fails every future left; those that finished keep their result
                wait(list(inflight), timeout=10)
                for f, t in list(inflight.items()):
                    inflight.pop(f)
                    r = _outcome(f, t) if f.done() else _DIED
                    yield t, _died(t) if r is _DIED else r
            clean = not broken
        finally:
            if not clean:
                procs = list((getattr(pool, "_processes", None) or {}).values())
                sig = signal.SIGKILL if cancel.STOP.is_set() else signal.SIGTERM
                _signal_all(procs, sig)  # SIGTERM -> the file in hand loses its temporary output
                # let them exit before the pool closes its queues: a worker still reading its call queue
                # when the pipe closes dies with EOFError and prints a traceback
                deadline = time.monotonic() + (1.0 if sig == signal.SIGKILL else 10.0)
                for p in procs:
                    p.join(timeout=max(0.0, deadline - time.monotonic()))
            pool.shutdown(wait=True, cancel_futures=True)
            gq.close()


def make_local_cluster(specs: list[dict]):
    """A SpecCluster of Nanny workers, each with its own environment (CUDA_VISIBLE_DEVICES is set
    before the worker process starts, as dask-cuda's LocalCUDACluster does)."""
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {f"sigconv-{i}": {"cls": Nanny, "options": {"nthreads": s["nthreads"], "env": s["env"],
                                                          "resources": s["resources"] or None,
                                                          "name": f"sigconv-{i}", "silence_logs": logging.ERROR}}
               for i, s in enumerate(specs)}
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": None, "port": 0, "host": "127.0.0.1"}}
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR, name="sigconv-batch")


def run_dask(tasks: Iterable[dict], scheduler: str, jobs: Optional[int], n_gpus: int, info: dict):
    """Files as Dask tasks (one whole file per task). ``info`` receives the cluster's description."""
    from distributed import Client
    from distributed import wait as dwait

    from sigconv._core.errors import InputError

    cluster = None
    client = None
    pending = _Lookahead(tasks)
    futs: dict = {}
    try:
        if scheduler == "local":
            specs = local_cluster_plan(n_gpus, os.cpu_count() or 1, jobs)
            cluster = make_local_cluster(specs)
            client = Client(cluster)
            info["cluster"] = f"local Dask cluster, {len(specs)} worker(s)" + (
                f", GPUs {', '.join(s['env']['CUDA_VISIBLE_DEVICES'] for s in specs)}" if n_gpus else "")
        else:
            try:
                client = Client(scheduler, timeout="10s")
            except (OSError, TimeoutError, ValueError) as exc:
                raise InputError(f"cannot reach the Dask scheduler at {scheduler} ({exc})") from None
            info["cluster"] = f"Dask scheduler {scheduler}"
        def all_workers():
            try:
                return client.scheduler_info(n_workers=-1).get("workers", {})  # some versions list only 5
            except TypeError:
                return client.scheduler_info().get("workers", {})

        workers = all_workers()
        if not workers:
            client.wait_for_workers(1, timeout=60)
            workers = all_workers()
        gpu_res = bool(workers) and all("GPU" in (w.get("resources") or {}) for w in workers.values())
        resources = {"GPU": 1} if gpu_res else None
        width = max(1, sum(int(w.get("nthreads", 1)) for w in workers.values()))
        info["workers"] = len(workers)

        def submit():
            t = pending.take()
            futs[client.submit(process_task, t, pure=False, resources=resources)] = t

        def outcome(f, t):
            try:
                return f.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker, lost connections: a failed file
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                return failed(t, f"Dask worker failed: {type(exc).__name__}: {first}; rerun to retry") | {"lost": True}

        stopping_since = None
        while futs or (pending and stopping_since is None):
            while pending and len(futs) < 2 * width and not cancel.STOP.is_set():
                submit()
            if cancel.STOP.is_set() and stopping_since is None:
                stopping_since = time.monotonic()
                batch = next(iter(futs.values()), {}).get("batch")
                try:  # the files running on the workers stop at their next check; queued ones never start
                    if batch is not None:
                        client.run(cancel.stop_batch, batch)
                    client.cancel([f for f in futs if f.status == "pending"])
                except Exception:  # noqa: BLE001
                    pass
            if stopping_since is not None and time.monotonic() - stopping_since > STOP_GRACE:
                break
            try:
                dwait(list(futs), timeout=POLL, return_when="FIRST_COMPLETED")
            except TimeoutError:
                pass
            except Exception:  # noqa: BLE001 - FuturesCancelledError and the like: each future says below
                time.sleep(POLL)
            for f in [f for f in futs if f.done()]:
                t = futs.pop(f)
                if f.cancelled():
                    yield t, cancelled(t)
                else:
                    yield t, outcome(f, t)
    finally:
        if client is not None and futs:
            try:
                client.cancel(list(futs))
            except Exception:  # noqa: BLE001
                pass
        if cluster is not None and cancel.STOP.is_set() and client is not None:
            # stopped: a worker whose file does not return (a long call) would hold the cluster's close for
            # seconds; its workers are ours, so they go at once (the coordinator removes their temporary files)
            logging.getLogger("distributed").setLevel(logging.CRITICAL)  # the lost connections are expected
            try:
                pids = client.run(os.getpid, wait=True)
                _signal_all([type("P", (), {"pid": pid}) for pid in pids.values()], signal.SIGKILL)
            except Exception:  # noqa: BLE001
                pass
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
