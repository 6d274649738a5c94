"""The spectral gate's statistics histogram on the cpu: ns per cell of its two ways of adding, at 1..N threads.

    python benchmarks/spectral_hist_threads.py [--threads 1 4 16]

``np.add.at`` (the way on up to ``gate.HIST_RUNS_THREADS`` threads) holds the GIL, so threads running it take
turns; the sorted runs (fancy indexing) release it. Each thread counts into a histogram of its own, as the statistics pass does; the
cells are one chunk of frames (512) of 48 kHz noise whose level changes from frame to frame, mono and stereo.
Sets ``sigconv.engine.spectral.gate.HIST_RUNS_THREADS``'s value.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from sigconv.engine.spectral import noise  # noqa: E402
from sigconv.engine.spectral.gate import POWER_FLOOR, HostOps  # noqa: E402


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, nargs="+", default=sorted({1, 2, 4, os.cpu_count() or 1}))
    p.add_argument("--chunks", type=int, default=4, help="chunks each thread counts")
    args = p.parse_args(argv)
    rng = np.random.default_rng(1)
    F, T = 1025, 512
    kw = dict(power_floor=POWER_FLOOR, lo_db=noise.HIST_LO_DB, step_db=noise.HIST_STEP_DB, bins=noise.HIST_BINS)
    print(f"{os.cpu_count()} CPUs; ns per cell (best of 2)")
    for Cm in (1, 2):
        pws = [(rng.exponential(1.0, (Cm, T, F)) * 10.0 ** rng.uniform(-9, -3, (1, T, 1))).astype(np.float32)
               for _ in range(args.chunks)]
        for runs in (False, True):
            line = f"{'stereo' if Cm == 2 else 'mono':6s} {'sorted runs' if runs else 'np.add.at':11s}"
            for n in args.threads:
                hists = [np.zeros(Cm * F * noise.HIST_BINS) for _ in range(n)]
                HostOps.hist_add(hists[0], pws[0], runs=runs, **kw)  # warm-up

                def work(k):
                    for pw in pws:
                        HostOps.hist_add(hists[k], pw, runs=runs, **kw)

                best = float("inf")
                for _ in range(2):
                    t = time.perf_counter()
                    with ThreadPoolExecutor(n) as ex:
                        list(ex.map(work, range(n)))
                    best = min(best, time.perf_counter() - t)
                line += f"  {n:2d} threads {best / (n * len(pws) * pws[0].size) * 1e9:6.1f}"
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
