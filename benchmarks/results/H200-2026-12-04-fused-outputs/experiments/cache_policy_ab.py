"""fft_fused cache-policy variants, measurement only (SIGCONV_FF_EXP bits in kernels/fft_fused.cuh as patched by
cache-variants.diff): 1 = x loads ld.global.cs, 16 = x loads L1::evict_first (nc), 2 = the table's loads (H or G)
L1::evict_last, 4 = the twiddles' loads L1::evict_last, 8 = y stores st.global.cs, 32 = the 16384 tile reads G
(16 B a bin) instead of H; a suffix cNN sets the function's preferred shared-memory carveout to NN percent. Each
against the production kernel in 4 interleaved rounds of CUDA-event medians of 30, the best round kept.

Run from the repository root, with cache-policy-variants.diff applied to kernels/fft_fused.cuh (git apply):
    python3 benchmarks/results/H200-2026-12-04-fused-outputs/experiments/cache_policy_ab.py \
        0,1,16,2,4,6,7,8,15,22,32,38,0c64,0c100,7c64 4095,7921,2047,255
"""
import sys, time, json, os
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # benchmarks/ (fft_stages)
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository
import numpy as np
import cupy
from fft_stages import _time
from sigconv import _kernels
from sigconv.backends import overlap_save as os_, cuda1d as _c1

L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
copy_ms = min(_time(lambda: cupy.copyto(out, x), 30) for _ in range(3))
print(f"copy {copy_ms:.4f} ms {2*x.nbytes/copy_ms/1e6:.0f} GB/s", flush=True)
SPECS0 = sys.argv[1].split(",")
KS = [int(k) for k in sys.argv[2].split(",")]
rng = np.random.default_rng(1)
res = {}
for K in KS:
    w = cupy.asarray(rng.standard_normal(K).astype(np.float32))
    pad = (K - 1) // 2
    key = ("dev1", K)
    ref = os_.launch_fft_fused(x, w, pad, L, None, out=cupy.empty_like(x), taps_key=key)
    cupy.cuda.Device().synchronize()
    plan = os_.fused_plan(K, L, 1, None)
    N = plan["N"]
    Hh, ts = os_.host_spectrum(cupy.asnumpy(w), N)
    tab_h = cupy.asarray(os_.fused_table(Hh, N))
    tab_g = cupy.asarray(os_.fused_coefficients(Hh, N).astype(np.float32))
    ts = cupy.asarray(ts)
    tw = os_._device_twiddles(N)
    specs = [s for s in SPECS0 if not (int(s.partition("c")[0]) & 32 and N != 16384)]
    fns = {}
    for sp in specs:
        e, _, c = sp.partition("c")
        e = int(e)
        t = time.time()
        f = _kernels.module(_c1.SOURCE, defines={"SIGCONV_FF_EXP": e, "FFX_CARVE": int(c or -1)},
                            name_expressions=(plan["expr"],)).get_function(plan["expr"])
        if plan["smem"] > 48 * 1024:
            f.max_dynamic_shared_size_bytes = plan["smem"]
        if c:
            f.preferred_shared_memory_carveout = int(c)
        fns[sp] = (f, tab_g if e & 32 else tab_h)
        print(f"K={K} compiled {sp} in {time.time()-t:.1f} s", flush=True)

    def call(sp, o):
        f, tab = fns[sp]
        f(plan["grid"], (N // 32,), (x, o, tab, tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64(pad),
                                     np.int64(L), np.int64(plan["ntiles"]), ts,
                                     np.int32(os_.FFT_SAFE_EXPONENT["float32"])), shared_mem=plan["smem"])
    times = {sp: [] for sp in specs}
    prod = []
    for rnd in range(4):
        prod.append(_time(lambda: os_.launch_fft_fused(x, w, pad, L, None, out=out, taps_key=key), 30))
        for sp in specs:
            o = cupy.empty_like(x)
            times[sp].append(_time(lambda: call(sp, o), 30))
            if rnd == 0:
                call(sp, o)
                d = float(cupy.abs(o - ref).max()) / float(cupy.abs(ref).max())
                print(f"K={K} {sp} max diff / peak vs production {d:.2e}", flush=True)
    best = {sp: min(v) for sp, v in times.items()}
    res[K] = {"tile": N, "block": N // 32, "production_ms": min(prod), "variants": best, "copy_ms": copy_ms}
    print(f"K={K} tile {N}/{N//32}: production {min(prod):.4f} ms ({100*copy_ms/min(prod):.1f}% copy)")
    for sp in specs:
        print(f"   {sp:>6}: {best[sp]:.4f} ms  {100*copy_ms/best[sp]:5.1f}% copy  {100*(best[sp]/best[specs[0]]-1):+6.1f}%"
              f"  rounds {[round(v, 4) for v in times[sp]]}", flush=True)
if os.environ.get("OUT"):
    Path(os.environ["OUT"], "cache_ab.json").write_text(json.dumps(res, indent=1))
