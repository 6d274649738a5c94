"""fft_fused's tile length and block against the cuFFT overlap-save (fft), side by side in one run.

    python benchmarks/fused_tiles.py [--L 26] [--K 63 255 1023 2047 4095 7921] [--blocks 64 128 256 512 1024]
                                     [--out DIR]

For each K (C=1, L=2^L, float32, "same"): the fft variant, then fft_fused at every tile length N from the smallest
the kernel takes (a power of two, 1024 or more and at least 2K) to 32768 and every block (32768: 512 or 1024 threads),
timed with CUDA events (median of 20 after a warm-up), each output compared with the fft variant's (largest
difference relative to its peak; a row above 1e-4 is marked). The copy of the same array gives the bandwidth
ceiling. Prints a table, marks the fastest (N, block) and the tile that sigconv picks
(sigconv.registry.auto.fused_tile); with --out writes fused-tiles-<device>-<date>.json and .md. Needs a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import sys
from pathlib import Path

import numpy as np

from fft_stages import _time  # CUDA events, median of 20 after a warm-up (this folder)


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--L", type=int, default=26, help="log2 of the signal length")
    p.add_argument("--K", type=int, nargs="+", default=[63, 255, 1023, 2047, 4095, 7921])
    p.add_argument("--blocks", type=int, nargs="+", default=[64, 128, 256, 512, 1024])
    p.add_argument("--out", type=Path, default=None, help="folder for the JSON and markdown files")
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("fused_tiles: no GPU:", _devices.cuda_reason())
        return 2
    import cupy

    from sigconv import _kernels
    from sigconv.backends import overlap_save as os_
    from sigconv.registry import auto

    lim = _kernels.constants()
    lo, hi, two_hi = lim["SIGCONV_FFT_FUSED_MIN_LOGN"], lim["SIGCONV_FFT_FUSED_ONE_MAX_LOGN"], \
        lim["SIGCONV_FFT_FUSED_MAX_LOGN"]
    L = 1 << a.L
    x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
    out = cupy.empty_like(x)
    copy_ms = _time(lambda: cupy.copyto(out, x))
    gbs = 2 * x.nbytes / copy_ms / 1e6
    device = _devices.gpu_name() or "gpu"
    print(f"{device}, C=1 L=2^{a.L} float32; copy {copy_ms:.3f} ms ({gbs:.0f} GB/s)")
    rng = np.random.default_rng(1)
    rows = []
    for K in a.K:
        w = cupy.asarray(rng.standard_normal(K).astype(np.float32))
        pad, key = (K - 1) // 2, ("fused_tiles", K)
        fft_ms = _time(lambda: os_.launch_fft(x, w, pad, L, 256, out=out, taps_key=key))
        ref = out.copy()
        peak = float(cupy.abs(ref).max())
        try:
            picked = auto.fused_tile(K)
        except ValueError:
            picked = None
        row = {"K": K, "fft_ms": fft_ms, "picked_tile": picked, "runs": []}
        for logn in range(lo, hi + 1):
            N = 1 << logn
            if N < 2 * K:
                continue
            for b in a.blocks:
                if logn > two_hi and 32 * b < N and not os_.fused_wide(N, b):  # the longest tile: in place only
                    continue
                ms = _time(lambda: os_.launch_fft_fused(x, w, pad, L, b, out=out, taps_key=key, tile=N))
                diff = float(cupy.abs(out - ref).max()) / peak
                row["runs"].append({"tile": N, "block": b, "ms": ms, "max_rel_diff": diff})
        if row["runs"]:
            best = min(row["runs"], key=lambda r: r["ms"])
            row["best"] = best
            row["best_pct_of_copy"] = 100 * copy_ms / best["ms"]
        rows.append(row)
        cells = [f"K={K:5d} fft {fft_ms:.3f} ms |"]
        for N in sorted({r["tile"] for r in row["runs"]}):
            rs = [r for r in row["runs"] if r["tile"] == N]
            mark = "*" if N == picked else ""
            cells.append(f"N={N}{mark}: " + " ".join(
                f"{r['block']}:{r['ms']:.3f}" + ("!" if r["max_rel_diff"] > 1e-4 else "") for r in rs))
        if row["runs"]:
            cells.append(f"| best N={best['tile']} block {best['block']} {best['ms']:.3f} ms "
                         f"({row['best_pct_of_copy']:.0f}% of copy, {fft_ms / best['ms']:.2f}x fft)")
        print(" ".join(cells), flush=True)
    bad = [(r["K"], q["tile"], q["block"]) for r in rows for q in r["runs"] if not q["max_rel_diff"] <= 1e-4]
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        stamp = datetime.date.today().isoformat()
        stem = a.out / f"fused-tiles-{device.replace(' ', '-')}-{stamp}"
        doc = {"device": device, "date": stamp, "L": L, "copy_ms": copy_ms, "copy_GBps": gbs, "rows": rows}
        stem.with_suffix(".json").write_text(json.dumps(doc, indent=1))
        md = [f"# fft_fused tile and block, {device}, {stamp}", "",
              f"C=1, L=2^{a.L}, float32, same; copy {copy_ms:.3f} ms ({gbs:.0f} GB/s). ms, median of 20; "
              "* = the tile sigconv picks.", "", "| K | fft ms | tile | " + " | ".join(f"block {b}" for b in a.blocks)
              + " |", "|---:|---:|---:|" + "---:|" * len(a.blocks)]
        for r in rows:
            for N in sorted({q["tile"] for q in r["runs"]}):
                ms = {q["block"]: q["ms"] for q in r["runs"] if q["tile"] == N}
                md.append(f"| {r['K']} | {r['fft_ms']:.3f} | {N}{'*' if N == r['picked_tile'] else ''} | "
                          + " | ".join(f"{ms[b]:.3f}" if b in ms else "" for b in a.blocks) + " |")
        stem.with_suffix(".md").write_text("\n".join(md) + "\n")
        print("wrote", stem.with_suffix(".json"), stem.with_suffix(".md"))
    if bad:
        print("fused_tiles: outputs differ from the fft variant's by more than 1e-4 of the peak:", bad)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
