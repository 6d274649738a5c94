import sys, statistics
import numpy as np
import cupy as cp
from sigconv.backends import cuda1d, overlap_save as os_
from sigconv.registry.table import get as get_variant
K = int(sys.argv[1]) if len(sys.argv) > 1 else 7921
C, L = 1, 1 << 26
rng = cp.random.default_rng(1)
x = rng.standard_normal((C, L), dtype=cp.float32)
w = (rng.standard_normal(K, dtype=cp.float32) / K ** 0.5).astype(cp.float32)
wh = w.get()
key = cuda1d.host_taps_key(wh)
pad, n = K // 2, L
out = cp.empty((C, n), cp.float32)
var = get_variant("conv1d", "cuda", "fft_fused")
# the tile kernel alone, as launch_fft_fused launches it with a cached table
blk = 512
N = os_.fused_plan(K, n, C, blk)["N"]
z, d = os_.fused_alignment(K, pad, N)
pairs = os_.fused_pairs(N, blk, K + z + d, pad + z, L, x.data.ptr % 8 == 0)
plan = os_.fused_plan(K + z + d, n, C, blk, tile=N, pairs=pairs)
fn = os_._fused_function(plan["expr"], plan["smem"])
tw = os_._device_twiddles(N)
wz = w
G, ts = os_._fused_spectrum(w, N, key, d)
args = (x, out, G, tw, tw, np.int32(C), np.int64(L), np.int32(K + z + d), np.int64(pad + z), np.int64(n),
        np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"]))
print(plan["expr"], plan["grid"], "pairs", pairs, "z d", z, d)
def spec_only():
    os_._fused_spectrum(wz, N, None, d)
cases = {
    "tile kernel alone": lambda: fn(plan["grid"], (blk,), args, shared_mem=plan["smem"]),
    "run, device taps": lambda: var.run(x, w, pad, n, blk, out=out),
    "run, device taps + key": lambda: var.run(x, w, pad, n, blk, out=out, taps_key=key),
    "spectrum kernel alone": spec_only,
    "copy": lambda: cp.copyto(out, x),
}
for f in cases.values():
    for _ in range(5): f()
s, e = cp.cuda.Event(), cp.cuda.Event()
res = {k: [] for k in cases}
for r in range(9):
    for k, f in cases.items():
        s.record()
        for _ in range(40): f()
        e.record(); e.synchronize()
        res[k].append(cp.cuda.get_elapsed_time(s, e) / 40)
for k, v in res.items():
    print(f"K={K} {k:24s} median {statistics.median(v):.4f} ms  min {min(v):.4f}")
