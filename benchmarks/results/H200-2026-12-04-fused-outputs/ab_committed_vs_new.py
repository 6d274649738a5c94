"""fft_fused before and after, side by side: the kernels of the commit before the change (unpacked in oldk/ beside this
file) against the working tree's, each compiled from source by NVRTC with the same table (overlap_save.fused_table)
and twiddles, at the tile and block sigconv picks and a few others (16384 samples on 256, 512 and 1024 threads; taps
scaled by 2^60 and 2^-130, where the outputs' scale is a normal float or not); the outputs compared, then 4
interleaved rounds of CUDA-event medians of 30, the best round kept. AB_EXTRA="NAME=V,..;..." adds variants of the new
source with those defines in front (the experiments' FFX_OUT builds).

Run from the repository root:
    git archive 2705eba kernels | tar -x -C benchmarks/results/H200-2026-12-04-fused-outputs/oldk
    OUT=DIR python3 benchmarks/results/H200-2026-12-04-fused-outputs/ab_committed_vs_new.py
"""
import sys, json, os
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # benchmarks/ (fft_stages)
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # the repository
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

NEWSRC = text(_kernels.kernel_dir())
SRC = {"old": text(Path(__file__).resolve().parent / "oldk" / "kernels"), "new": NEWSRC}
for extra in [e for e in os.environ.get("AB_EXTRA", "").split(";") if e]:
    SRC[extra] = "".join(f"#define {d.replace('=', ' ')}\n" for d in extra.split(",")) + NEWSRC
L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
copy_ms = min(_time(lambda: cupy.copyto(out, x), 30) for _ in range(3))
print(f"copy {copy_ms:.4f} ms {2*x.nbytes/copy_ms/1e6:.0f} GB/s", flush=True)
rng = np.random.default_rng(1)
cases = [(255, None, 0), (1023, None, 0), (2047, None, 0), (4095, None, 0), (7921, None, 0), (3001, None, 0), (5001, None, 0), (6001, None, 0), (4000, None, 0), (4095, 1024, 0), (4095, 256, 0), (7921, 512, 0), (4095, None, 60), (4095, None, -130)]
res = []
for K, block, sc in cases:
    w = np.ldexp(rng.standard_normal(K), sc).astype(np.float32)
    pad = (K - 1) // 2
    plan = os_.fused_plan(K, L, 1, block)
    N = plan["N"]; b = block or N // 32
    H, ts = os_.host_spectrum(w, N)
    tabs = {k: cupy.asarray(os_.fused_table(H, N)) for k in SRC}
    ts = cupy.asarray(ts)
    tw = os_._device_twiddles(N)
    fns = {}
    for k, src in SRC.items():
        f = cupy.RawModule(code=src, options=_kernels.NVRTC_OPTIONS, name_expressions=(plan["expr"],)).get_function(plan["expr"])
        if plan["smem"] > 48 * 1024:
            f.max_dynamic_shared_size_bytes = plan["smem"]
        fns[k] = f
    def call(k, o):
        fns[k](plan["grid"], (b,), (x, o, tabs[k], tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64(pad),
                                   np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])),
               shared_mem=plan["smem"])
    outs = {k: cupy.empty_like(x) for k in fns}
    for k in fns:
        call(k, outs[k])
    t = {k: [] for k in fns}
    for rnd in range(4):
        for k in fns:
            t[k].append(_time(lambda: call(k, outs[k]), 30))
    bo = min(t["old"])
    for k in fns:
        if k == "old":
            continue
        d = float(cupy.abs(outs[k] - outs["old"]).max() / cupy.abs(outs["old"]).max())
        bn = min(t[k])
        r = {"K": K, "taps_scale_log2": sc, "tile": N, "block": b, "variant": k, "old_ms": bo, "new_ms": bn,
             "change": bn / bo - 1, "max_rel_diff": d, "pct_copy_new": 100 * copy_ms / bn, "rounds": {k: t[k], "old": t["old"]}}
        res.append(r)
        print(f"K={K:5d}{f' x2^{sc}' if sc else ''} tile {N:5d}/{b:4d} {k:>8}: old {bo:.4f} new {bn:.4f} ms ({100*(bn/bo-1):+5.1f}%), "
              f"{100*copy_ms/bn:4.1f}% copy; max diff/peak {d:.1e}", flush=True)
if os.environ.get("OUT"):
    Path(os.environ["OUT"], "ab.json").write_text(json.dumps({"copy_ms": copy_ms, "rows": res}, indent=1))
