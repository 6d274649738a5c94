"""Where the files are filtered: in the coordinating process, in a local process pool, or on Dask.

Every runner is a generator of (task, result) in completion order; the coordinator records each
result (manifest, progress) as it arrives. At most ``2 * workers`` files are in flight, so a
Ctrl-C or a dead worker affects only those. Closing the generator (Ctrl-C in the coordinator)
stops the workers: pool workers get SIGTERM, which they turn into SystemExit so that the file in
hand loses its temporary output and nothing partial remains.

GPUs: one CUDA context per worker process. The coordinator never touches CUDA (it counts GPUs from
/proc and CUDA_VISIBLE_DEVICES), and each worker is pinned to one GPU through CUDA_VISIBLE_DEVICES
before it imports CuPy: round robin over the GPUs in the local pool, one worker per GPU in a Dask
LocalCluster (``--scheduler local``). On a remote cluster (``--scheduler ADDRESS``) the workers'
own environment decides (start one worker per GPU with CUDA_VISIBLE_DEVICES set, e.g. with
dask-cuda); when every worker advertises a ``GPU`` resource, each file asks for ``GPU=1``.
"""

from __future__ import annotations

import logging
import os
import signal
from collections import deque
from pathlib import Path
from typing import Iterable, Optional

from sigconv.engine.batch.process import process_task

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


def run_serial(tasks: Iterable[dict]):
    for t in tasks:
        yield t, process_task(t)


def _pool_worker_init(gpu_queue) -> None:
    # Ctrl-C goes to the whole process group: the coordinator alone decides what to stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, _exit_on_term)
    if gpu_queue is not None:
        dev = gpu_queue.get()
        if dev is not None:
            os.environ["CUDA_VISIBLE_DEVICES"] = dev


def _exit_on_term(signum, frame):
    raise SystemExit(128 + signum)  # unwinds through atomic_output: the temporary file is removed


def _pool_context():
    import multiprocessing as mp

    # forkserver: workers are forked from a clean server process (no coordinator threads, no CUDA),
    # with numpy/pyarrow/sigconv preloaded once
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["sigconv.engine.batch.process", "sigconv.engine.batch.formats", "pyarrow.csv",
                                "pyarrow.parquet"])
    return ctx


_DIED = object()
_DIED_TEXT = "a worker process died (killed or crashed) while this file was in flight; rerun to retry"


def _outcome(fut, task: dict):
    """The result of a finished pool future; ``_DIED`` when its worker died."""
    from concurrent.futures.process import BrokenProcessPool

    try:
        return fut.result()
    except BrokenProcessPool:
        return _DIED
    except Exception as exc:  # noqa: BLE001 (e.g. a result that cannot be pickled)
        return failed(task, f"worker error: {type(exc).__name__}: {exc}")


def run_pool(tasks: Iterable[dict], jobs: int, n_gpus: int = 0):
    """A process pool of ``jobs`` workers; a worker that dies fails the files in flight (rerun to retry)
    and the batch goes on with a fresh pool."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = _pool_context()
    pending = deque(tasks)
    while pending:
        gq = ctx.Queue()
        for dev in pool_gpu_plan(jobs, n_gpus):
            gq.put(dev)
        pool = ProcessPoolExecutor(max_workers=jobs, mp_context=ctx, initializer=_pool_worker_init,
                                   initargs=(gq,))
        inflight: dict = {}
        clean = False
        try:
            broken = False
            while (pending or inflight) and not broken:
                while pending and len(inflight) < 2 * jobs and not broken:
                    try:
                        inflight[pool.submit(process_task, pending[0])] = pending[0]
                        pending.popleft()
                    except BrokenProcessPool:  # a worker died since the last wait: its futures tell which
                        broken = True
                done, _ = wait(list(inflight), timeout=0.5, return_when=FIRST_COMPLETED)
                for f in done:
                    t = inflight.pop(f)
                    r = _outcome(f, t)
                    broken = broken or r is _DIED
                    yield t, failed(t, _DIED_TEXT) if r is _DIED else r
            if broken:  # the executor fails every future left; those that finished keep their result
                wait(list(inflight), timeout=10)
                for f, t in list(inflight.items()):
                    inflight.pop(f)
                    r = _outcome(f, t) if f.done() else _DIED
                    yield t, failed(t, _DIED_TEXT) if r is _DIED else r
            clean = not broken
        finally:
            if not clean:
                procs = list((getattr(pool, "_processes", None) or {}).values())
                for p in procs:
                    try:
                        p.terminate()  # SIGTERM -> SystemExit in the worker: temp files removed
                    except Exception:  # noqa: BLE001
                        pass
                # let them exit before the pool closes its queues: a worker still reading its call queue
                # when the pipe closes dies with EOFError and prints a traceback
                for p in procs:
                    p.join(timeout=10)
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
    from distributed import Client, as_completed

    from sigconv._core.errors import InputError

    cluster = None
    client = None
    pending = deque(tasks)
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
        ac = as_completed()

        def submit():
            t = pending.popleft()
            f = client.submit(process_task, t, pure=False, resources=resources)
            futs[f] = t
            ac.add(f)

        while pending and len(futs) < 2 * width:
            submit()
        for f in ac:
            t = futs.pop(f)
            try:
                r = f.result()
            except Exception as exc:  # noqa: BLE001 - KilledWorker, lost connections: a failed file
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
                r = failed(t, f"Dask worker failed: {type(exc).__name__}: {first}; rerun to retry")
            yield t, r
            while pending and len(futs) < 2 * width:
                submit()
    finally:
        if client is not None and futs:
            try:
                client.cancel(list(futs))
            except Exception:  # noqa: BLE001
                pass
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()
