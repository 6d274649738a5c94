"""fft_fused variants for measurement only (experiments/variants.diff applied to kernels/fft_fused.cuh: SIGCONV_FF_EXP
bits 1 = the coefficient table read from 16 L1-resident rows, 2 = no barriers in the passes (wrong results), 4 = no x
loads and one store per thread (wrong results), 8 = the spectrum H read from global memory, 16 = pairs of outputs as
one 8-byte store; 100 + bits = conv1d_fft_fused_sub, groups of M/16 threads sharing H in shared memory), each
against the production kernel in 4 interleaved rounds of CUDA-event medians of 30, the best round kept.

Run from benchmarks/ (it imports fft_stages):  python3 variants_ab.py 0,1,2,4,7 2047,4095,7921
"""
import sys, time, json
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import numpy as np
import cupy
from fft_stages import _time
from sigconv import _kernels
from sigconv.backends import overlap_save as os_, cuda1d as _c1
from sigconv.registry import auto

L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
copy_ms = min(_time(lambda: cupy.copyto(out, x), 30) for _ in range(3))
print(f"copy {copy_ms:.4f} ms {2*x.nbytes/copy_ms/1e6:.0f} GB/s", flush=True)
EXPS0 = [int(e) for e in sys.argv[1].split(",")] if len(sys.argv) > 1 else [0, 1, 2, 4, 7]
KS = [int(k) for k in sys.argv[2].split(",")] if len(sys.argv) > 2 else [2047, 4095, 7921]
names = {100: "sub", 116: "sub + float2 st", 8: "H table", 16: "float2 stores", 24: "H + float2 st", 0: "as is", 1: "G from L1", 2: "no barriers", 3: "G L1 + no bar", 4: "no x/y traffic", 5: "noG+noIO", 6: "nobar+noIO", 7: "all three"}
rng = np.random.default_rng(1)
res = {}
for K in KS:
    EXPS = [e for e in EXPS0 if not (e & 8 and e < 100 and K in (1023, 2047)) and not (e >= 100 and K > 6000)]
    w = cupy.asarray(rng.standard_normal(K).astype(np.float32))
    pad = (K - 1) // 2
    key = ("dev1", K)
    ref = os_.launch_fft_fused(x, w, pad, L, None, out=cupy.empty_like(x), taps_key=key)
    cupy.cuda.Device().synchronize()
    plan = os_.fused_plan(K, L, 1, None)
    N = plan["N"]
    G, ts = os_._fused_spectrum(w, N, key)
    Hh, _ts = os_.host_spectrum(cupy.asnumpy(w), N)
    Ht = cupy.asarray(np.ascontiguousarray(np.stack([Hh.real, Hh.imag], 1), dtype=np.float32))
    assert int(_ts[0]) == int(cupy.asnumpy(ts).ravel()[0])
    tw = os_._device_twiddles(N)
    block = N // 32
    fns = {}
    M = N // 2
    subs = 1024 // (M // 16)
    sub_smem = 8 * ((M + 2) & ~1) + subs * (8 * (M + M // 16) + 128)
    sub_grid = (min(-(-plan["ntiles"] // subs), 132),)
    for e in EXPS:
        if e >= 100:
            t = time.time()
            ex = f"conv1d_fft_fused_sub<{plan['logn']}>"
            f = _kernels.module(_c1.SOURCE, defines={"SIGCONV_FF_EXP": e - 100}, name_expressions=(ex,)).get_function(ex)
            f.max_dynamic_shared_size_bytes = sub_smem
            fns[e] = f
            print(f"K={K} compiled sub E={e} in {time.time()-t:.1f} s smem {sub_smem}", flush=True)
            continue
        t = time.time()
        f = _kernels.module(_c1.SOURCE, defines={"SIGCONV_FF_EXP": e}, name_expressions=(plan["expr"],)).get_function(plan["expr"])
        if plan["smem"] > 48 * 1024:
            f.max_dynamic_shared_size_bytes = plan["smem"]
        fns[e] = f
        print(f"K={K} compiled E={e} in {time.time()-t:.1f} s", flush=True)
    def call(f, o, e=0):
        if e >= 100:
            f(sub_grid, (1024,), (x, o, Ht, tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64(pad),
                                   np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])),
              shared_mem=sub_smem)
            return
        f(plan["grid"], (block,), (x, o, Ht if e & 8 else G, tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64(pad),
                                   np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])),
          shared_mem=plan["smem"])
    o0 = cupy.empty_like(x)
    call(fns[EXPS[0]], o0)
    if EXPS[0] == 0:
        print(f"K={K} E=0 equals production: {bool((o0 == ref).all())}", flush=True)
    times = {e: [] for e in EXPS}
    prod = []
    for rnd in range(4):
        prod.append(_time(lambda: os_.launch_fft_fused(x, w, pad, L, None, out=out, taps_key=key), 30))
        for e in EXPS:
            o = cupy.empty_like(x)
            times[e].append(_time(lambda: call(fns[e], o, e), 30))
            if rnd == 0:
                call(fns[e], o, e)
                d = float(cupy.abs(o - ref).max()) / float(cupy.abs(ref).max())
                print(f"K={K} E={e} max diff / peak vs production {d:.2e}", flush=True)
    best = {e: min(v) for e, v in times.items()}
    res[K] = {"tile": N, "block": block, "production_ms": min(prod), "variants": best, "copy_ms": copy_ms}
    print(f"K={K} tile {N}/{block}: production {min(prod):.4f} ms ({100*copy_ms/min(prod):.1f}% copy)")
    for e in EXPS:
        print(f"   E={e} {names[e]:>16}: {best[e]:.4f} ms  {100*copy_ms/best[e]:5.1f}% copy  {100*(best[e]/best[EXPS[0]]-1):+6.1f}%  rounds {[round(v,4) for v in times[e]]}", flush=True)
import os
if os.environ.get("OUT"):
    Path(os.environ["OUT"], "sol.json").write_text(json.dumps(res, indent=1))
