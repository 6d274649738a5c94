"""Host time of cuda2d.corr2d per call on img7 (auto and strip; fill(0), fill(1.5), wrap, symm), and a profile.

    python benchmarks/results/H100-H200-2026-12-02-odd-widths/hostprof.py   # from the repository root, on a GPU
"""
import cProfile, pstats, sys, time
sys.path.insert(0, ".")
import cupy, numpy as np
from sigconv.backends import cuda2d
x = cupy.random.default_rng(0).standard_normal((1, 1, 4096, 4096), dtype=cupy.float32)
w = cupy.random.default_rng(1).standard_normal((1, 1, 7, 7), dtype=cupy.float32)
out = cupy.empty_like(x)
def call(v, b, f):
    return cuda2d.corr2d(x, w, None, (1, 1), (3, 3), (4096, 4096), variant=v, out=out, boundary=b, fillvalue=f)
for v in ("auto", "strip"):
    for b, f in (("fill", 0.0), ("fill", 1.5), ("wrap", 0.0), ("symm", 0.0)):
        for _ in range(20): call(v, b, f)
        cupy.cuda.Device().synchronize()
        n = 300; ts = []
        for _ in range(n):  # host time per call; sync every call so the queue never backs up
            t = time.perf_counter(); call(v, b, f); ts.append(time.perf_counter() - t)
            cupy.cuda.Device().synchronize()
        print(f"{v:6s} {b}({f:g}) host {np.median(ts) * 1e6:6.1f} us (p20 {np.percentile(ts, 20) * 1e6:.1f})")
pr = cProfile.Profile(); pr.enable()
for _ in range(2000):
    call("auto", "wrap", 0.0)
pr.disable(); cupy.cuda.Device().synchronize()
pstats.Stats(pr).sort_stats("tottime").print_stats(22)
