"""Where a block of the fused kernel's column tiles spends its time: thread 0's clock at six points of every tile.

    python benchmarks/fused_timeline.py [--K 7921 ...] [--variant DEFINES ...] [--L 26] [--out FILE]

The working tree's conv1d.cu is compiled with FF_TIMELINE (kernels/fft_fused.cuh): thread 0 of each block records
clock64 where the tile starts, where its own loads have arrived, after the barrier that ends the first pass (the
columns start), after the barrier that ends the columns, before its own output stores, and after a barrier at the
tile's end (every thread's stores issued), with the multiprocessor and the global timer. The tiles are the launcher's
(its zero taps, its 8-byte loads where it uses them). A variant is a list of defines NAME=V joined by ',' as
benchmarks/fused_ab.py --extra takes them, lower-case grid_x=N, smem_extra=N and block=N included; "base" is none. Per
variant and K: the kernel's time with and without the recording (CUDA events), then the medians and means over tiles
of each phase, the gap between one tile's end and the next tile's start on the same multiprocessor, and the share of
the kernel's span that the multiprocessors spend inside tiles. Only the tiles transformed by columns (2^14 samples and more) record;
the gaps mean what they say where a block holds a multiprocessor alone (the 32768 tile). Needs a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
ROWS = 1 << 14  # the recorded pairs


def summarize(t: np.ndarray) -> dict:
    """The summary of ff_timeline's rows (one a tile: clock64 at its start, its loads arrived, the columns' start and
    end, its outputs computed and its end; the multiprocessor; the global timer at the start and the end, ns):
    the clock rate against the timer, the kernel's span (us), the share of the multiprocessors' span spent inside
    tiles, and the medians and means (us) of a tile, of the gap from a tile's end to the next tile's start on the
    same multiprocessor, and of each phase."""
    clk, sm, g0, g1 = t[:, :6], t[:, 6], t[:, 7], t[:, 8]
    per_sm = [np.where(sm == s)[0] for s in np.unique(sm)]
    # the clock against the global timer, over each multiprocessor's whole run (the timer's steps are coarse)
    mhz = float(np.median([(clk[r, 5].max() - clk[r, 0].min()) / max(g1[r].max() - g0[r].min(), 1)
                           for r in per_sm])) * 1e3
    phase = {"loads": clk[:, 1] - clk[:, 0], "first pass": clk[:, 2] - clk[:, 0],
             "columns": clk[:, 3] - clk[:, 2], "outputs": clk[:, 5] - clk[:, 3],
             "outputs before stores": clk[:, 4] - clk[:, 3]}
    total = clk[:, 5] - clk[:, 0]
    gaps = []
    for r in per_sm:
        r = r[np.argsort(clk[r, 0])]
        gaps.extend(clk[r[1:], 0] - clk[r[:-1], 5])
    gaps = np.asarray(gaps if gaps else [0])
    span = (g1.max() - g0.min()) / 1e3

    def stats(cycles):
        return {"median": float(np.median(cycles)) / mhz, "mean": float(np.mean(cycles)) / mhz}

    return {"clock_mhz": mhz, "span_us": float(span), "busy": float(total.sum() / mhz / (len(per_sm) * span)),
            "tile_us": stats(total), "gap_us": stats(gaps), "phases_us": {k: stats(v) for k, v in phase.items()}}


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--K", type=int, nargs="+", default=[7921])
    p.add_argument("--variant", nargs="+", default=["base"], help="defines NAME=V joined by ','; 'base': none")
    p.add_argument("--L", type=int, default=26, help="log2 of the signal length")
    p.add_argument("--out", type=Path, default=None, help="JSON file of the summaries")
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("fused_timeline: no GPU:", _devices.cuda_reason())
        return 2
    import cupy
    from fft_stages import _time  # CUDA events, median after a warm-up (this folder)
    from fused_ab import launcher_case, parse_variant  # (this folder)
    from sigconv import _kernels
    from sigconv.backends import overlap_save as os_

    base_src = _kernels.source("conv1d.cu")
    L = 1 << a.L
    x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
    y = cupy.empty_like(x)
    rng = np.random.default_rng(1)
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{name}; L = 2^{a.L}", flush=True)
    summaries = []
    for K in a.K:
        case = launcher_case(os_, rng.standard_normal(K).astype(np.float32), L)
        w, Kr, pad, N, plan = (case[k] for k in ("w", "K", "pad", "N", "plan"))
        if plan["logn"] < _kernels.constants()["SIGCONV_FFT_FUSED_COLS_MIN_LOGN"]:
            print(f"K={K}: its tile of {N} samples is not transformed by columns (no timeline)")
            continue
        table, ts = os_.fused_host_table(w, N)  # (the launcher's table from host taps)
        table, ts, tw = cupy.asarray(table), cupy.asarray(ts), os_._device_twiddles(N)
        for variant in a.variant:
            defines, launch = parse_variant(variant)
            smem = plan["smem"] + launch.get("smem_extra", 0)
            grid = (min(launch.get("grid_x", plan["grid"][0]), plan["grid"][0]), plan["grid"][1])
            block = launch.get("block", case["block"])
            expr = os_.fused_plan(Kr, L, 1, block, tile=N, pairs=case["pairs"])["expr"]
            fns = {}
            for rec in (False, True):
                code = (f"#define FF_TIMELINE {ROWS}\n" if rec else "") + defines + base_src
                mod = cupy.RawModule(code=code, options=_kernels.NVRTC_OPTIONS, name_expressions=(expr,))
                f = mod.get_function(expr)
                f.max_dynamic_shared_size_bytes = smem
                fns[rec] = (f, mod)

            def call(rec):
                fns[rec][0](grid, (block,), (x, y, table, tw, tw, np.int32(1), np.int64(L), np.int32(Kr),
                                               np.int64(pad), np.int64(L), np.int64(plan["ntiles"]), ts,
                                               np.int32(os_.FFT_SAFE_EXPONENT["float32"])), shared_mem=smem)

            ms = {rec: _time(lambda: call(rec), 30) for rec in (False, True)}
            call(True)
            cupy.cuda.Device().synchronize()
            tl = fns[True][1].get_global("ff_timeline")
            t = cupy.ndarray((ROWS, 9), dtype=cupy.uint64, memptr=tl).get()[: min(ROWS, plan["ntiles"])]
            row = {"K": K, "variant": variant, "tile": N, "expr": expr, "block": block, "grid": grid, "ms": ms[False],
                   "ms_recording": ms[True], **summarize(t.astype(np.int64))}
            span, busy, mhz = row["span_us"], row["busy"], row["clock_mhz"]
            summaries.append(row)
            print(f"K={K} {expr} {variant} grid {grid}: {ms[False]:.4f} ms ({ms[True]:.4f} recording), "
                  f"{mhz:.0f} MHz, span {span:.1f} us, inside tiles {100 * busy:.1f}%", flush=True)
            print(f"  tile {row['tile_us']['median']:.2f} us median ({row['tile_us']['mean']:.2f} mean), gap "
                  f"{row['gap_us']['median']:.2f} ({row['gap_us']['mean']:.2f}); " +
                  ", ".join(f"{k} {v['median']:.2f} ({v['mean']:.2f})" for k, v in row["phases_us"].items()),
                  flush=True)
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(json.dumps({"device": name, "L": L, "rows": summaries}, indent=1))
        print("wrote", a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
