"""fft_fused before and after, side by side: the kernels of 040d660 against those of the change, each compiled from
source by NVRTC, with its own table (G for the old; overlap_save.fused_table for the new), at the tile and block sigconv
picks and two others; the outputs compared, then 4 interleaved rounds of CUDA-event medians of 30, the best round kept.

Run from benchmarks/ (it imports fft_stages) with the old kernels unpacked beside it:
    git archive 040d660 kernels | tar -x -C benchmarks/.oldk && OUT=DIR python3 benchmarks/ab_committed_vs_new.py
"""
import sys, json, os
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
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

SRC = {"old": text(Path(__file__).resolve().parent / ".oldk" / "kernels"), "new": text(_kernels.kernel_dir())}
L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
copy_ms = min(_time(lambda: cupy.copyto(out, x), 30) for _ in range(3))
print(f"copy {copy_ms:.4f} ms {2*x.nbytes/copy_ms/1e6:.0f} GB/s", flush=True)
rng = np.random.default_rng(1)
cases = [(255, None), (1023, None), (2047, None), (4095, None), (7921, None), (4095, 256), (7921, 512), (2000, None)]
res = []
for K, block in cases:
    w = rng.standard_normal(K).astype(np.float32)
    pad = (K - 1) // 2
    plan = os_.fused_plan(K, L, 1, block)
    N = plan["N"]; b = block or N // 32
    H, ts = os_.host_spectrum(w, N)
    tabs = {"old": cupy.asarray(os_.fused_coefficients(H, N)), "new": cupy.asarray(os_.fused_table(H, N))}
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
    d = float(cupy.abs(outs["new"] - outs["old"]).max() / cupy.abs(outs["old"]).max())
    t = {k: [] for k in fns}
    for rnd in range(4):
        for k in fns:
            t[k].append(_time(lambda: call(k, outs[k]), 30))
    bo, bn = min(t["old"]), min(t["new"])
    r = {"K": K, "tile": N, "block": b, "old_ms": bo, "new_ms": bn, "change": bn / bo - 1, "max_rel_diff": d,
         "pct_copy_new": 100 * copy_ms / bn, "rounds": t}
    res.append(r)
    print(f"K={K:5d} tile {N:5d}/{b:4d}: old {bo:.4f} new {bn:.4f} ms ({100*(bn/bo-1):+5.1f}%), "
          f"{100*copy_ms/bn:4.1f}% copy; max diff/peak {d:.1e}", flush=True)
if os.environ.get("OUT"):
    Path(os.environ["OUT"], "ab.json").write_text(json.dumps({"copy_ms": copy_ms, "rows": res}, indent=1))
