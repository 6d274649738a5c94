"""Timing: CUDA events (wall clock on the CPU) after a warm-up, and the copy bandwidth rows are compared with."""

from __future__ import annotations

import os
import platform
import time
from pathlib import Path
from typing import Callable

import numpy as np

__all__ = ["sync", "time_calls", "stats", "gpu_copy_gbs", "cpu_copy_gbs", "cpu_name", "cpu_model"]


def sync(xp) -> None:
    """Wait for the device (no-op for numpy)."""
    if xp is not np:
        xp.cuda.Device().synchronize()


def _estimate(call: Callable[[int], object], nbuf: int, xp) -> float:
    """Seconds per call, after a warm-up call (the correctness check already ran once)."""
    t0 = time.perf_counter()
    call(1 % nbuf)
    sync(xp)
    est = time.perf_counter() - t0
    if est < 0.02:  # a few more calls for clocks and caches to settle, and a better estimate
        n = max(2, min(50, int(0.02 / max(est, 1e-6))))
        t0 = time.perf_counter()
        for i in range(n):
            call(i % nbuf)
        sync(xp)
        est = (time.perf_counter() - t0) / n
    return est


def time_calls(call: Callable[[int], object], nbuf: int, xp, *, budget_s: float, min_reps: int,
               max_reps: int) -> list[float]:
    """Milliseconds per call after a warm-up; call(i) runs on rotation buffer i % nbuf.

    GPU: one pair of CUDA events per call, all queued before a single synchronisation, so the
    host never stalls the device between calls. CPU: perf_counter around each call.
    """
    est = _estimate(call, nbuf, xp)
    reps = int(max(min_reps, min(max_reps, budget_s / max(est, 1e-7))))
    if xp is np:
        out = []
        for i in range(reps):
            t = time.perf_counter()
            call(i % nbuf)
            out.append((time.perf_counter() - t) * 1e3)
        return out
    ev = [(xp.cuda.Event(), xp.cuda.Event()) for _ in range(reps)]
    for i, (a, b) in enumerate(ev):
        a.record()
        call(i % nbuf)
        b.record()
    ev[-1][1].synchronize()
    return [xp.cuda.get_elapsed_time(a, b) for a, b in ev]


def stats(ms: list[float]) -> dict:
    """Median, 20th and 80th percentiles (ms) and the number of runs."""
    a = np.asarray(ms)
    return {"ms_median": float(np.median(a)), "p20": float(np.percentile(a, 20)),
            "p80": float(np.percentile(a, 80)), "reps": int(a.size)}


def gpu_copy_gbs(nbytes: int = 1 << 30, reps: int = 20) -> dict:
    """Device-to-device copy (cudaMemcpyAsync) of ``nbytes``: bytes read + written per second."""
    import cupy

    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    for _ in range(5):
        dst.data.copy_from_device_async(src.data, src.nbytes)
    ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
    for a, b in ev:
        a.record()
        dst.data.copy_from_device_async(src.data, src.nbytes)
        b.record()
    ev[-1][1].synchronize()
    ms = float(np.median([cupy.cuda.get_elapsed_time(a, b) for a, b in ev]))
    del src, dst
    cupy.get_default_memory_pool().free_all_blocks()
    return {"gbs": 2 * nbytes / (ms * 1e-3) / 1e9, "ms": ms, "bytes": nbytes,
            "method": f"cudaMemcpyAsync device-to-device, {nbytes / 2**30:.2f} GiB, median of {reps}"}


def cpu_copy_gbs(nbytes: int = 1 << 28, reps: int = 5) -> dict:
    """numpy copy of ``nbytes`` (one thread): bytes read + written per second."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(dst, src)
        ts.append(time.perf_counter() - t)
    s = float(np.median(ts))
    return {"gbs": 2 * nbytes / s / 1e9, "ms": s * 1e3, "bytes": nbytes,
            "method": f"numpy.copyto, {nbytes / 2**20:.0f} MiB, median of {reps}"}


def cpu_model() -> str:
    """The CPU's model name (/proc/cpuinfo's, else what the platform module says)."""
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return name


def cpu_name() -> str:
    """The CPU's model name and thread count."""
    return f"{cpu_model()} ({os.cpu_count()} threads)"
