"""Host time per call against device time per call of the long-filter path, to tell a host-bound row from a
kernel-bound one.

    python benchmarks/call_overhead.py [--L 26] [--C 1] [--K 255 1023 4095] [--calls 50] [--out DIR]

For each K (float32, "same" window, the bench's shapes) and each way of calling:
  auto-device   sigconv.backends.cuda1d.corr1d(variant="auto") with device taps (what `sigconv bench` times)
  auto-host     the same with a host_taps_key (the spectrum cached: the array API, stream and file engines)
  fused-device  launch_fft_fused with device taps (the spectrum computed on the device every call)
  fused-key     launch_fft_fused with the key (the kernel launch alone)
the script issues `--calls` calls back to back and reports host microseconds per call (perf_counter from the first
issue to the last, no synchronisation in between) and device microseconds per call (CUDA events around the whole
run, after a synchronisation). Where host time is at or above device time, the GPU waits on Python: the row is
host-bound. Needs a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
import time
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--L", type=int, default=26, help="log2 of the signal length")
    p.add_argument("--C", type=int, default=1)
    p.add_argument("--K", type=int, nargs="+", default=[255, 1023, 4095])
    p.add_argument("--calls", type=int, default=50)
    p.add_argument("--out", type=Path, default=None)
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("call_overhead: no GPU:", _devices.cuda_reason())
        return 2
    import cupy

    from sigconv.backends import cuda1d, overlap_save

    rng = np.random.default_rng(20261203)
    L = 1 << a.L
    x = cupy.asarray(rng.standard_normal((a.C, L), dtype=np.float32))
    rows = []
    for K in a.K:
        wh = (rng.standard_normal(K) / np.sqrt(K)).astype(np.float32)
        wd = cupy.asarray(wh)
        key = cuda1d.host_taps_key(wh)
        pad, n = K // 2, L
        out = cupy.empty((a.C, n), dtype=np.float32)
        ways = {
            "auto-device": lambda: cuda1d.corr1d(x, wd, pad, n, out=out),
            "auto-host": lambda: cuda1d.corr1d(x, wd, pad, n, out=out, taps_key=key),
            "fused-device": lambda: overlap_save.launch_fft_fused(x, wd, pad, n, None, out=out),
            "fused-key": lambda: overlap_save.launch_fft_fused(x, wd, pad, n, None, out=out, taps_key=key),
        }
        for name, call in ways.items():
            for _ in range(5):
                call()
            cupy.cuda.Device().synchronize()
            e0, e1 = cupy.cuda.Event(), cupy.cuda.Event()
            e0.record()
            t0 = time.perf_counter()
            for _ in range(a.calls):
                call()
            host_us = (time.perf_counter() - t0) / a.calls * 1e6
            e1.record()
            e1.synchronize()
            dev_us = cupy.cuda.get_elapsed_time(e0, e1) / a.calls * 1e3
            rows.append({"K": K, "C": a.C, "L": L, "way": name, "host_us": host_us, "device_us": dev_us,
                         "host_bound": host_us >= 0.95 * dev_us})
            print(f"K={K:5d} {name:13s} host {host_us:8.1f} us/call  device {dev_us:8.1f} us/call"
                  f"{'  HOST-BOUND' if rows[-1]['host_bound'] else ''}", flush=True)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        dev = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode().replace(" ", "-")
        day = datetime.date.today().isoformat()
        (a.out / f"call-overhead-{dev}-{day}.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
