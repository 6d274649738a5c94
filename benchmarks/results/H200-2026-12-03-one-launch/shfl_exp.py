"""shfl on widths that are not a multiple of 4 under wrap/symm: loader experiments, timed against fill(0)."""
import sys, functools
sys.path.insert(0, '.')
import numpy as np, cupy
from sigconv import _kernels
from sigconv.backends import cuda2d

ORIG = _kernels.source
INLINE = "shfl_body(x, y, N, H, W, py, Ho, Wo, lane, cx, r0, nin, live, vst, bias, ShflExtAny<B, true>(H, W, cx, lane, vec))"
EXPS = {
    "E0 as is": [],
    "E1 ExtAny<near> inline": [("SHFL_EDGE(ShflExtAny<B, true>);", INLINE + ";")],
    "E2 every warp ExtAny<near> when !vec": [("    if (!(wx - 4 >= 0 && wx + 4 * 32 + 4 <= W)) {  // columns leave the image",
        "    if (!vec && near) { " + INLINE + "; return; }\n    if (!(wx - 4 >= 0 && wx + 4 * 32 + 4 <= W)) {  // columns leave the image")],
    "E3 ExtAny<near> noinline for every !vec warp": [("    if (!(wx - 4 >= 0 && wx + 4 * 32 + 4 <= W)) {  // columns leave the image",
        "    if (!vec && near) { SHFL_EDGE(ShflExtAny<B, true>); return; }\n    if (!(wx - 4 >= 0 && wx + 4 * 32 + 4 <= W)) {  // columns leave the image")],
}

def make_source(subs):
    def src(name):
        t = ORIG(name)
        for a, b in subs:
            assert a in t, a
            t = t.replace(a, b)
        return t
    return src

def reset():
    _kernels._MODULES.clear()
    cuda2d._boundary_module.cache_clear()
    cuda2d._reg_cap.cache_clear()

def timeit(fn, reps=200):
    for _ in range(5): fn()
    s, e = cupy.cuda.Event(), cupy.cuda.Event()
    best = []
    for _ in range(3):
        s.record()
        for _ in range(reps): fn()
        e.record(); e.synchronize()
        best.append(cupy.cuda.get_elapsed_time(s, e) / reps * 1000)
    return min(best)

rng = np.random.default_rng(0)
data = {}
for case, (H, W) in (("odd9", (1024, 1023)), ("spec9odd", (1025, 65535))):
    data[case] = (H, W, cupy.asarray(rng.standard_normal((1, 1, H, W)), dtype=cupy.float32),
                  cupy.asarray(rng.standard_normal((1, 1, 9, 9)), dtype=cupy.float32))
xe = {}
for name, subs in EXPS.items():
    _kernels.source = make_source(subs)
    reset()
    for case, (H, W, x, w) in data.items():
        y = cupy.empty_like(x)
        res = {}
        for b in ("fill", "wrap", "symm"):
            fn = functools.partial(cuda2d.launch_shfl, x, w, None, (1, 1), (4, 4), (H, W), block=(128, 1), out=y,
                                   boundary=b)
            fn(); cupy.cuda.Device().synchronize()
            got = cupy.asnumpy(y)
            if (case, b) in xe:
                assert np.array_equal(got, xe[case, b]), (name, case, b)
            else:
                xe[case, b] = got
            res[b] = timeit(fn, 200 if case == "odd9" else 30)
        print(f"{case:9s} {name:44s} fill {res['fill']:8.2f} us  wrap {res['wrap']:8.2f} ({res['wrap']/res['fill']:.3f})"
              f"  symm {res['symm']:8.2f} ({res['symm']/res['fill']:.3f})", flush=True)
_kernels.source = ORIG
