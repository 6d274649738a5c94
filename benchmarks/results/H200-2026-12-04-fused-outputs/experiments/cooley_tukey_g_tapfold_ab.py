"""The 16384 tile: committed kernel (Stockham passes) against the Cooley-Tukey path, each with the spectrum read as H
or as the coefficients G (SIGCONV_FFT_FUSED_H_MIN_LOGN 15), and with the taps' power of two applied per output
(tap_shift, as the product) or folded into the table (tap_shift 0: no multiply per output). 4 interleaved rounds of
CUDA-event medians of 30, best round; outputs compared with the committed kernel's.
Run from the repository root with cooley-tukey-path.diff applied (git apply) and the committed kernels (2705eba)
unpacked in oldk/ beside this file:  python3 .../cooley_tukey_g_tapfold_ab.py 4095,3001,4000"""
import sys, json, os
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # benchmarks/ (fft_stages)
sys.path.insert(0, str(Path(__file__).resolve().parents[4]))  # the repository
import numpy as np
import cupy
from fft_stages import _time
from sigconv import _kernels
from sigconv.backends import overlap_save as os_

def text(kdir):
    orig = _kernels.kernel_dir
    _kernels.kernel_dir = lambda: Path(kdir)
    _kernels.source.cache_clear()
    try:
        return _kernels.source("conv1d.cu")
    finally:
        _kernels.kernel_dir = orig
        _kernels.source.cache_clear()

OLD = text(Path(__file__).resolve().parent / "oldk" / "kernels")
NEW = text(_kernels.kernel_dir())
HG = ("#define SIGCONV_FFT_FUSED_H_MIN_LOGN 14", "#define SIGCONV_FFT_FUSED_H_MIN_LOGN 15")
assert HG[0] in OLD and HG[0] in NEW
SRC = {"old": OLD, "old-G": OLD.replace(*HG), "ct": NEW, "ct-G": NEW.replace(*HG)}
L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
copy_ms = min(_time(lambda: cupy.copyto(out, x), 30) for _ in range(3))
print(f"copy {copy_ms:.4f} ms {2*x.nbytes/copy_ms/1e6:.0f} GB/s", flush=True)
rng = np.random.default_rng(1)
res = []
for K in [int(k) for k in (sys.argv[1] if len(sys.argv) > 1 else "4095,3001").split(",")]:
    w = rng.standard_normal(K).astype(np.float32)
    pad = (K - 1) // 2
    plan = os_.fused_plan(K, L, 1, None)
    N = plan["N"]; b = N // 32
    assert N == 16384
    H, ts = os_.host_spectrum(w, N)
    e = int(np.asarray(ts).ravel()[0])
    tabs = {("H", False): os_.fused_table(H, N), ("G", False): os_.fused_coefficients(H, N),
            ("H", True): os_.fused_table(H * 2.0 ** e, N), ("G", True): os_.fused_coefficients(H * 2.0 ** e, N)}
    tabs = {k: cupy.asarray(v.astype(np.float32)) for k, v in tabs.items()}
    tsd = {False: cupy.asarray(np.asarray(ts, np.int32).ravel()), True: cupy.zeros(1, np.int32)}
    tw = os_._device_twiddles(N)
    fns = {}
    for k, src in SRC.items():
        f = cupy.RawModule(code=src, options=_kernels.NVRTC_OPTIONS, name_expressions=(plan["expr"],)).get_function(plan["expr"])
        f.max_dynamic_shared_size_bytes = plan["smem"]
        fns[k] = f
    variants = [(k, t, fold) for k in SRC for t in ("H",) + (("G",) if k.endswith("-G") else ()) for fold in (False, True)
                if (t == "G") == k.endswith("-G")]
    def call(v, o):
        k, t, fold = v
        fns[k](plan["grid"], (b,), (x, o, tabs[(t, fold)], tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64(pad),
                                   np.int64(L), np.int64(plan["ntiles"]), tsd[fold],
                                   np.int32(os_.FFT_SAFE_EXPONENT["float32"])), shared_mem=plan["smem"])
    outs = {v: cupy.empty_like(x) for v in variants}
    for v in variants:
        call(v, outs[v])
    ref = outs[variants[0]]
    t = {v: [] for v in variants}
    for rnd in range(4):
        for v in variants:
            t[v].append(_time(lambda: call(v, outs[v]), 30))
    b0 = min(t[variants[0]])
    for v in variants:
        bv = min(t[v])
        d = float(cupy.abs(outs[v] - ref).max() / cupy.abs(ref).max())
        name = f"{v[0]}{' fold' if v[2] else ''}"
        res.append({"K": K, "variant": name, "ms": bv, "change": bv / b0 - 1, "pct_copy": 100 * copy_ms / bv,
                    "max_rel_diff": d, "rounds": t[v]})
        print(f"K={K} {name:>12}: {bv:.4f} ms ({100*(bv/b0-1):+5.1f}%) {100*copy_ms/bv:4.1f}% copy; diff {d:.1e}",
              flush=True)
if os.environ.get("OUT"):
    Path(os.environ["OUT"], "ct_ab.json").write_text(json.dumps({"copy_ms": copy_ms, "rows": res}, indent=1))
