"""Run 3: naive of 2357408 (one kernel, the boundary an argument), compiled from .exp/old (that commit's
kernels/) and launched directly, against the launcher of 503d55d, block 32x8, in one process."""
import sys, time
from pathlib import Path
sys.path.insert(0, '.'); sys.path.insert(0, 'benchmarks')
import numpy as np, cupy
from sigconv import _kernels
from sigconv.backends import cuda2d
import boundary2d as bd

src_old = (Path('.exp/old') / 'conv2d.cu').read_text()
# inline the includes of HEAD's source
import re
def expand(name, seen=set()):
    t = (Path('.exp/old') / name).read_text()
    def repl(m):
        inc = m.group(1)
        if inc in seen: return ""
        seen.add(inc); return expand(inc)
    return re.sub(r'^\s*#\s*include\s+"([^"]+)".*$', repl, t, flags=re.M)
mod = cupy.RawModule(code=expand('conv2d.cu'), options=("-std=c++17",), name_expressions=("conv2d_naive<float>",))
f_old = mod.get_function("conv2d_naive<float>")
CODES = {"fill": 0, "wrap": 1, "symm": 2}
CASES = {"spec9odd": (1025, 65535, 9, 9), "odd9": (1024, 1023, 9, 9), "k31": (512, 512, 31, 31),
         "img7": (4096, 4096, 7, 7), "spec5": (1025, 65536, 5, 5)}
rng = np.random.default_rng(0)
for case, (H, W, kH, kW) in CASES.items():
    copies = max(1, min(31, int(256e6 // (H * W * 4))))
    xs = [cupy.asarray(rng.standard_normal((1, 1, H, W)), dtype=cupy.float32) for _ in range(copies)]
    w = cupy.asarray(rng.standard_normal((1, 1, kH, kW)), dtype=cupy.float32)
    pad = (kH // 2, kW // 2)
    out = cupy.empty((1, 1, H, W), cupy.float32)
    res = {}
    for tag in ("head", "tree"):
        for b, fv in (("fill", 0.0), ("fill", 1.5), ("wrap", 0.0), ("symm", 0.0)):
            if tag == "head":
                def call(i, b=b, fv=fv):
                    f_old(cuda2d.generic_grid(1, H, W, (32, 8)), (32, 8, 1),
                          (xs[i], w, xs[i], out) + tuple(np.int32(v) for v in (1, 1, H, W, 1, kH, kW, 1, 1, pad[0], pad[1], H, W, 0, CODES[b]))
                          + (np.float32(fv),))
            else:
                def call(i, b=b, fv=fv):
                    cuda2d.launch_naive(xs[i], w, None, (1, 1), pad, (H, W), block=(32, 8), out=out, boundary=b, fillvalue=fv)
            call(0); y = cupy.asnumpy(out)
            key = (b, fv)
            if (key, "ref") in res:
                assert np.allclose(y, res[key, "ref"], rtol=1e-5, atol=1e-4), (case, tag, b, fv)
            else:
                res[key, "ref"] = y
            res[tag, key] = bd._graph_time(call, copies, 60)[0] * 1000
        f0 = res[tag, ("fill", 0.0)]
        print(f"naive {case:9s} {tag}: " + "  ".join(f"{b}({fv:g}) {res[tag, (b, fv)]:8.1f} us" for b, fv in
              (("fill", 0.0), ("fill", 1.5), ("wrap", 0.0), ("symm", 0.0)))
              + f"  worst/own fill {max(res[tag, k] for k in (('fill', 1.5), ('wrap', 0.0), ('symm', 0.0))) / f0:.3f}", flush=True)
