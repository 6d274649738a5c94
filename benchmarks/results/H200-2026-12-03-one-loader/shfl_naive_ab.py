"""The A/B runs of this folder (runs 1 and 2): shfl and naive through cuda2d.corr2d, GPU time by
boundary2d._graph_time, with the kernels read from other folders in the same process. As run: from the repository
root, .exp/old holding kernels/ of 2357408 (`git show 2357408:kernels/NAME`), .exp/v4s the working tree's kernels/
with shfl's `if (vec)` loader test made `if (vec && B == SIGCONV_BOUNDARY_WRAP)` (what 503d55d ships). Run 1 used
the first version of this script (shfl and naive, "old" and "new" only); this is run 2's."""
import sys, time, functools
from pathlib import Path
sys.path.insert(0, '.')
sys.path.insert(0, 'benchmarks')
import numpy as np, cupy
from sigconv import _kernels
from sigconv.backends import cuda2d
import boundary2d as bd

NEW = _kernels.kernel_dir()
OLD = Path('.exp/old').resolve()
CASES = {"spec3": (1025, 65536, 3, 3), "odd9": (1024, 1023, 9, 9), "spec9odd": (1025, 65535, 9, 9), "img7": (4096, 4096, 7, 7),
         "spec5": (1025, 65536, 5, 5), "k31": (512, 512, 31, 31)}
WANT = [("shfl", c, ("old", "new", "v4s")) for c in ("spec5", "img7", "spec3")] + \
       [("naive", c, ("new",)) for c in ("spec9odd", "odd9", "k31", "img7")]
DIRS = {"old": OLD, "new": NEW, "v4s": Path('.exp/v4s').resolve()}


def use(kdir):
    _kernels.kernel_dir = lambda: kdir
    _kernels.source.cache_clear()
    _kernels._MODULES.clear()
    for f in (cuda2d._boundary_module, cuda2d._reg_cap):
        f.cache_clear()
    for name in dir(cuda2d):
        f = getattr(cuda2d, name)
        if hasattr(f, "cache_clear") and name.startswith("_") and "module" in name:
            f.cache_clear()


rng = np.random.default_rng(0)
data = {}
for case in sorted({c for _, c, _ in WANT}):
    H, W, kH, kW = CASES[case]
    copies = max(1, min(31, int(256e6 // (H * W * 4))))
    xs = [cupy.asarray(rng.standard_normal((1, 1, H, W)), dtype=cupy.float32) for _ in range(copies)]
    w = cupy.asarray(rng.standard_normal((1, 1, kH, kW)), dtype=cupy.float32)
    data[case] = (H, W, kH, kW, xs, w)

ref = {}
for variant, case, tags in WANT:
    H, W, kH, kW, xs, w = data[case]
    pad, out_hw = (kH // 2, kW // 2), (H, W)
    out = cupy.empty((1, 1, H, W), cupy.float32)
    line = {}
    for tag in tags:
        kdir = DIRS[tag]
        use(kdir)
        t0 = time.time()
        res = {}
        for b, f in (("fill", 0.0), ("fill", 1.5), ("wrap", 0.0), ("symm", 0.0)):
            y = cuda2d.corr2d(xs[0], w, None, (1, 1), pad, out_hw, variant=variant, out=out, boundary=b, fillvalue=f)
            got = cupy.asnumpy(y)
            key = (variant, case, b, f)
            if key in ref:
                err = float(np.max(np.abs(got - ref[key])) / max(np.max(np.abs(ref[key])), 1e-30))
                assert err < 1e-5, (variant, case, b, f, err)
            else:
                ref[key] = got
            g = bd._graph_time(lambda i: cuda2d.corr2d(xs[i], w, None, (1, 1), pad, out_hw, variant=variant, out=out,
                                                       boundary=b, fillvalue=f), len(xs), 60)
            res[f"{b}({f:g})" if b == "fill" else b] = g[0]
        f0 = res["fill(0)"]
        worst = max(v / f0 for k, v in res.items() if k != "fill(0)")
        print(f"{variant:6s} {case:9s} {tag}: " + "  ".join(f"{k} {v*1000:8.1f} us" for k, v in res.items())
              + f"  worst {worst:.3f}  ({time.time()-t0:.0f} s)", flush=True)
use(NEW)
