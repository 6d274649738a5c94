import sys, numpy as np
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # (the repository, from this results folder)
sys.path.insert(0, str(Path(__file__).resolve().parents[4] / "benchmarks"))  # (fft_stages._time)
import cupy
from fft_stages import _time
from sigconv.backends import overlap_save as os_, cuda1d
L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
y = cupy.empty_like(x)
sms = cupy.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
print("SMs", sms)
for K in (1023, 2047, 4095, 7921):
    wh = (np.random.default_rng(1).standard_normal(K) / np.sqrt(K)).astype(np.float32)
    w = cupy.asarray(wh); pad = K // 2
    key = cuda1d.host_taps_key(wh)
    full = os_.fused_plan(K, L, 1, None)
    N = full["N"]; b = N // 32 if N >= 16384 else os_._auto.fused_block(K)
    per_sm = 1 if N == 32768 else 2 if N == 16384 else None
    G, ts = os_._fused_spectrum(w, N, key)
    fn = os_._fused_function(full["expr"], full["smem"])
    tw = os_._device_twiddles(N)
    caps = {"full": full["ntiles"]}
    for m in (1, 2, 4, 8):
        caps[f"{m}x{sms}"] = m * sms
    def run(cap):
        p = os_.fused_plan(K, L, 1, b, cap_x=cap)
        fn(p["grid"], (b,), (x, y, G, tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64(pad), np.int64(L),
                            np.int64(p["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])), shared_mem=p["smem"])
    ref = None
    res = {k: [] for k in caps}
    for rnd in range(4):
        for name, cap in caps.items():
            run(cap); cupy.cuda.Device().synchronize()
            if ref is None: ref = y.copy()
            assert float(cupy.abs(y - ref).max()) == 0.0, name
            res[name].append(_time(lambda: run(cap), 30))
    base = min(res["full"])
    print(f"K={K} N={N} block={b} tiles={full['ntiles']}: " + ", ".join(f"{k} {min(v):.4f} ({100*(min(v)/base-1):+.1f}%)" for k, v in res.items()), flush=True)
