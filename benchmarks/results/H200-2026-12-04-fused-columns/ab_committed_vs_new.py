"""fft_fused before and after, side by side: the kernels of an earlier commit (unpacked in oldk/ beside this file)
against the working tree's, each compiled from source by NVRTC with the table each reads (overlap_save.fused_table;
for the variants named FFX_G, G by column on the 16384 tile) and the same twiddles, at the tile and block sigconv
picks and a few others (16384 samples on 256, 512 and 1024 threads; taps scaled by 2^60 and 2^-130); the outputs
compared, then 4 interleaved rounds of CUDA-event medians of 30, the best round kept. AB_EXTRA="NAME=V,..;..." adds
variants of the new source with those defines in front (the experiments' builds). `cases` lists (K, block, taps'
power of two); each run of the folder's files used the list its file shows.

Run from the repository root (this copy lives two folders below benchmarks/; the runs ran it from benchmarks/.dev/):
    git archive c60486d kernels | tar -x -C <this folder>/oldk
    python3 <this folder>/ab_committed_vs_new.py
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
#: whether the old kernels read H in natural order on the 16384 tile (c60486d and before: yes)
OLD_NATURAL_H = os.environ.get("AB_OLD_NATURAL_H", "1") == "1"
L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
copy_ms = min(_time(lambda: cupy.copyto(out, x), 30) for _ in range(3))
print(f"copy {copy_ms:.4f} ms {2*x.nbytes/copy_ms/1e6:.0f} GB/s", flush=True)
rng = np.random.default_rng(1)
cases = [(127, None, 0), (255, None, 0), (511, None, 0), (1023, None, 0), (2047, None, 0), (3001, None, 0), (4095, None, 0), (5001, None, 0), (6001, None, 0), (7921, None, 0), (7921, 512, 0), (4095, 1024, 0), (4095, 256, 0), (4095, None, 60), (4095, None, -130)]
res = []
for K, block, sc in cases:
    w = np.ldexp(rng.standard_normal(K), sc).astype(np.float32)
    pad = (K - 1) // 2
    plan = os_.fused_plan(K, L, 1, block)
    N = plan["N"]; b = block or N // 32
    H, ts = os_.host_spectrum(w, N)
    def table(k):
        if k == "old" and N == 16384 and OLD_NATURAL_H:  # a kernel before the column tile: H in natural order
            t = np.zeros((N // 2, 4), dtype=np.float32)
            h = np.asarray(H)[: N // 2 + 1]
            t.reshape(-1, 2)[: h.size] = np.stack([h.real, h.imag], axis=1)
            return cupy.asarray(t)
        if "FFX_G" in k and N == 16384:
            Gt = os_.fused_coefficients(H, N)  # (M, 4) natural order
            M = N // 2
            idx = np.arange(M)
            T = np.empty_like(Gt)
            T[(idx % 16) * (M // 16) + idx // 16] = Gt
            return cupy.asarray(T)
        return cupy.asarray(os_.fused_table(H, N))
    tabs = {k: table(k) for k in SRC}
    ts = cupy.asarray(ts)
    tw = os_._device_twiddles(N)
    fns = {}
    for k, src in SRC.items():
        f = cupy.RawModule(code=src, options=_kernels.NVRTC_OPTIONS, name_expressions=(plan["expr"],)).get_function(plan["expr"])
        if plan["smem"] > 48 * 1024:
            f.max_dynamic_shared_size_bytes = plan["smem"]
        fns[k] = f
    def call(k, o):
        vec = False
        nt = -(-L // (N - K)) if vec else plan["ntiles"]
        grid = (nt, 1) if vec else plan["grid"]
        fns[k](grid, (b,), (x, o, tabs[k], tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64(pad),
                                   np.int64(L), np.int64(nt), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])),
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
