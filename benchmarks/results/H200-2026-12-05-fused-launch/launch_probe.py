"""Where the fused launcher's time goes at K=7921 (C=1, L=2^26, same): kernel alone vs launcher paths."""
import sys, json, time
sys.path.insert(0, ".")
import numpy as np
import cupy
from sigconv.backends import overlap_save as os_, cuda1d
from sigconv.engine.ops import corr1d

L = 1 << 26
K = int(sys.argv[1]) if len(sys.argv) > 1 else 7921
rng = np.random.default_rng(1)
xs = [cupy.asarray(rng.standard_normal((1, L)).astype(np.float32)) for _ in range(2)]
wh = (rng.standard_normal(K) / np.sqrt(K)).astype(np.float32)
w = cupy.asarray(wh)
pad = (K - 1) // 2
key = cuda1d.host_taps_key(wh)
out = cupy.empty((1, L), cupy.float32)

def timeit(f, n=40, rounds=3):
    best = 1e9
    for _ in range(rounds):
        for i in range(3): f(i)
        ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(n)]
        for i, (a, b) in enumerate(ev):
            a.record(); f(i); b.record()
        ev[-1][1].synchronize()
        best = min(best, float(np.median([cupy.cuda.get_elapsed_time(a, b) for a, b in ev])))
    return best

def kernel_call(block):
    N = os_.fused_plan(K, L, 1, block)["N"]
    z, d = os_.fused_alignment(K, pad, N)
    pairs = os_.fused_pairs(N, block, K + z + d, pad + z, L, True)
    plan = os_.fused_plan(K + z + d, L, 1, block, tile=N, pairs=pairs)
    G, ts = os_._fused_spectrum(w, N, key, d)
    fn = os_._fused_function(plan["expr"], plan["smem"])
    tw = os_._device_twiddles(N)
    args = lambda x: (x, out, G, tw, tw, np.int32(1), np.int64(L), np.int32(K + z + d), np.int64(pad + z),
                      np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"]))
    def f(i):
        fn(plan["grid"], (block,), args(xs[i % 2]), shared_mem=plan["smem"])
    def spec(i):
        os_._fused_spectrum(w, N, None, d)
    return f, spec, plan

rows = {}
copy = timeit(lambda i: out.data.copy_from_device_async(xs[i % 2].data, xs[0].nbytes))
rows["copy"] = copy
for block in (512, 1024):
    f, spec, plan = kernel_call(block)
    rows[f"kernel/{block}"] = timeit(f)
    rows[f"spectrum_compare/{block}"] = timeit(spec)
    rows[f"spec+kernel/{block}"] = timeit(lambda i: (spec(i), f(i)))
    rows[f"launch_dev_out/{block}"] = timeit(lambda i: os_.launch_fft_fused(xs[i % 2], w, pad, L, block, out=out))
    rows[f"launch_dev/{block}"] = timeit(lambda i: os_.launch_fft_fused(xs[i % 2], w, pad, L, block))
    rows[f"launch_key_out/{block}"] = timeit(lambda i: os_.launch_fft_fused(xs[i % 2], w, pad, L, block, out=out, taps_key=key))
    rows[f"corr1d_fused/{block}"] = timeit(lambda i: corr1d(xs[i % 2], w, pad, L, backend="cuda", variant="fft_fused", block=block))
rows["corr1d_fused/None"] = timeit(lambda i: corr1d(xs[i % 2], w, pad, L, backend="cuda", variant="fft_fused", block=None))
rows["corr1d_auto"] = timeit(lambda i: corr1d(xs[i % 2], w, pad, L, backend="cuda", variant="auto"))
rows["corr1d_auto_hosttaps"] = timeit(lambda i: corr1d(xs[i % 2], w, pad, L, backend="cuda", variant="auto", host_taps=wh))
rows["resolve_auto"] = str(cuda1d.resolve_auto(xs[0], w, pad, L))
# host time per call (no GPU wait): launcher path
t = time.perf_counter()
for i in range(50): os_.launch_fft_fused(xs[i % 2], w, pad, L, 512, out=out)
rows["host_us_launch_dev_out"] = (time.perf_counter() - t) / 50 * 1e6
cupy.cuda.Device().synchronize()
t = time.perf_counter()
for i in range(50): corr1d(xs[i % 2], w, pad, L, backend="cuda", variant="auto")
rows["host_us_corr1d_auto"] = (time.perf_counter() - t) / 50 * 1e6
cupy.cuda.Device().synchronize()
for k, v in rows.items():
    print(f"{k:28s} {v:.4f}" if isinstance(v, float) else f"{k:28s} {v}")
# kernel timeline via torch profiler (CUPTI sees CuPy's kernels)
try:
    import torch
    from torch.profiler import profile, ProfilerActivity
    torch.cuda.init()
    with profile(activities=[ProfilerActivity.CUDA, ProfilerActivity.CPU]) as prof:
        for i in range(8):
            corr1d(xs[i % 2], w, pad, L, backend="cuda", variant="auto")
        cupy.cuda.Device().synchronize()
    evs = [e for e in prof.events() if e.device_type.name == "CUDA"]
    evs.sort(key=lambda e: e.time_range.start)
    prev = None
    for e in evs:
        s, d = e.time_range.start, e.time_range.end - e.time_range.start
        gap = s - prev if prev is not None else 0
        print(f"  {e.name[:60]:60s} dur {d:8.1f} us  gap {gap:7.1f} us")
        prev = e.time_range.end
except Exception as exc:
    print("profiler failed:", exc)
