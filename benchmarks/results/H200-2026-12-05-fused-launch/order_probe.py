"""Does any kernel between two fused launches slow the second? events + CUPTI durations."""
import sys
sys.path.insert(0, ".")
import numpy as np
import cupy
from sigconv.backends import overlap_save as os_, cuda1d

L = 1 << 26
K = 7921
rng = np.random.default_rng(1)
xs = [cupy.asarray(rng.standard_normal((1, L)).astype(np.float32)) for _ in range(2)]
wh = (rng.standard_normal(K) / np.sqrt(K)).astype(np.float32)
w = cupy.asarray(wh)
pad = (K - 1) // 2
key = cuda1d.host_taps_key(wh)
out = cupy.empty((1, L), cupy.float32)
tiny_a = cupy.ones(1, cupy.float32); tiny_b = cupy.empty(1, cupy.float32)
big_a = cupy.ones(1 << 22, cupy.float32); big_b = cupy.empty(1 << 22, cupy.float32)

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
    def f(i, grid=None):
        x = xs[i % 2]
        fn(grid or plan["grid"], (block,), (x, out, G, tw, tw, np.int32(1), np.int64(L), np.int32(K + z + d), np.int64(pad + z),
                      np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])), shared_mem=plan["smem"])
    return f, N, d, plan

res = {}
for block in (512, 1024):
    f, N, d, plan = kernel_call(block)
    print(block, plan["grid"], plan["ntiles"], plan["smem"])
    spec15 = lambda i: os_._fused_spectrum(w, 32768, None, d)
    spec14 = lambda i: os_._fused_spectrum(w, 16384, None, d)
    tiny = lambda i: cupy.add(tiny_a, tiny_a, out=tiny_b)
    big = lambda i: cupy.add(big_a, big_a, out=big_b)
    cases = {"alone": f, "after_tiny": lambda i: (tiny(i), f(i)), "after_big16MB": lambda i: (big(i), f(i)),
             "after_spec15": lambda i: (spec15(i), f(i)), "after_spec14": lambda i: (spec14(i), f(i)),
             "tiny_alone": tiny, "big_alone": big}
    for name, g in cases.items():
        res[f"{name}/{block}"] = timeit(g)
        print(f"{name}/{block:<6} {res[f'{name}/{block}']:.4f}", flush=True)
    if block == 512:
        import torch
        from torch.profiler import profile, ProfilerActivity
        torch.cuda.init()
        for name in ("alone", "after_tiny", "after_spec15", "after_spec14"):
            g = cases[name]
            for i in range(3): g(i)
            cupy.cuda.Device().synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for i in range(10): g(i)
                cupy.cuda.Device().synchronize()
            evs = sorted([e for e in prof.events() if e.device_type.name == "CUDA"], key=lambda e: e.time_range.start)
            main = [e.time_range.end - e.time_range.start for e in evs if "conv1d_fft_fused<" in e.name]
            other = [e.time_range.end - e.time_range.start for e in evs if "conv1d_fft_fused<" not in e.name]
            gaps = [b.time_range.start - a.time_range.end for a, b in zip(evs, evs[1:])]
            print(f"  prof {name}: main median {np.median(main):.1f} us (n={len(main)}), other {np.median(other) if other else 0:.1f}, "
                  f"gaps median {np.median(gaps):.1f} max {max(gaps):.1f}", flush=True)
