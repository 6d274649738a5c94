"""fft_fused of another commit against the working tree's, side by side in one process.

    python benchmarks/fused_ab.py --old REV [--new REV|DIR ...] [--case K[/BLOCK][:TILE][@E] ...]
                                  [--extra NAME=V,NAME2;...] [--old-natural-h [TILE ...]] [--old-column-h [TILE ...]]
                                  [--peak-one] [--L 26] [--out DIR]

The old kernels come from ``git archive REV kernels`` into a temporary folder, or from a folder given as --old that
holds them (a copy of the tree without its git history, as on the device machine). Each side is compiled from source by
NVRTC, as CuPy compiles it, and gets the table its source reads: overlap_save.fused_host_table, the same twiddles. With
--old-natural-h the old side reads H in natural order on those tiles (none given: 16384), as commits before the column
tiles do; with --old-column-h it reads H by column (bin s + 16 c at s N/32 + c, H[N/2] last; none given: 16384 and
32768), as commits before the pair table do.

Cases are K at sigconv's tile and block, with the launcher's zero taps and 8-byte loads where it uses them
(--floats: neither). K/BLOCK sets another block, K:TILE another tile length; K@E scales the taps
by 2^E; --peak-one scales the taps to a peak of 0.75 first (their power of two, the kernel's tap shift, is then E). The
outputs are compared with the old side's (largest difference over the old peak). Then come 4 interleaved
rounds of CUDA-event medians of 30 calls each, and the best round of each side is kept.

--new REV|DIR takes the new side's kernels from a commit or folder instead of the working tree (the launch arithmetic
stays the tree's). Given several, each is a side of its own, named by its folder or commit ("tree" for the working
tree's), all timed against the old side in the same interleaved rounds: one process, one compile of the old side, for
a bisection over several commits or copies. --extra adds variants of the (first) new side's source with those defines
in front: experiments behind an #ifdef.
Variants are separated by ';', defines within one by ','. A lower-case entry is the variant's launch instead:
grid_x=N launches N blocks a row of the grid (the kernel's grid-stride loop takes the other tiles);
smem_extra=N gives each block N bytes more of shared memory; block=N runs the variant on N threads, the launcher's
kernel for that block and the case's tile (block=512 on the 32768 tile: overlap_save.fused_wide), against the old
side on the case's own block.

Prints one line per case and variant. --out writes fused-ab-<device>-<date>.json. Needs a GPU and git.
"""

from __future__ import annotations

import argparse
import datetime
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from fft_stages import _time  # CUDA events, median after a warm-up (this folder)

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_CASES = ("127", "255", "511", "1023", "2047", "3001", "4095", "5001", "6001", "7921", "7921/512", "4095/1024",
                 "4095/256", "4095@60", "4095@-130")


def parse_case(text: str) -> tuple:
    """'K[/BLOCK][:TILE][@E]' -> (K, block or None, tile or None, E)."""
    body, _, e = text.partition("@")
    body, _, n = body.partition(":")
    k, _, b = body.partition("/")
    return int(k), (int(b) if b else None), (int(n) if n else None), (int(e) if e else 0)


def parse_variant(text: str) -> tuple:
    """'NAME=V,...' -> (its #define lines, its launch entries {lower-case name: int}); 'base' or '' -> none."""
    entries = [d.split("=", 1) for d in text.split(",")] if text not in ("", "base") else []
    return ("".join(f"#define {n} {v}\n" for n, v in entries if not n.islower()),
            {n: int(v) for n, v in entries if n.islower()})


def launcher_case(os_, w, L: int, block=None, tile=None, floats: bool = False) -> dict:
    """K = len(w) taps ("same": pad (K-1)//2) as the fused launcher runs them on one aligned channel of L samples: the
    zero taps that start every tile on an even sample and the 8-byte loads where those allow (``floats``: neither).
    Returns the taps with their zeros (float32), their count K, pad, tile N, block, zeros (z, d), pairs and plan."""
    K = len(w)
    pad = (K - 1) // 2
    N = os_.fused_plan(K, L, 1, block, tile=tile)["N"]
    from sigconv.registry import auto as _auto

    b = block or _auto.fused_block(K, N)  # (the launcher's block: N/64 on the longest tile, whose kernel bounds it)
    z, d = (0, 0) if floats else os_.fused_alignment(K, pad, N)
    w = np.concatenate([np.zeros(z), w, np.zeros(d)]).astype(np.float32)
    pairs = not floats and os_.fused_pairs(N, b, K + z + d, pad + z, L, True)
    return {"w": w, "K": K + z + d, "pad": pad + z, "N": N, "block": b, "zeros": (z, d), "pairs": pairs,
            "plan": os_.fused_plan(K + z + d, L, 1, block, tile=N, pairs=pairs)}


def conv1d_source(old: str | None = None) -> str:
    """conv1d.cu with its includes inlined (sigconv._kernels.source), of the working tree's kernels/, or with ``old`` of
    a commit's (git archive REV kernels) or of the kernels/ in the folder ``old`` (a machine without the history)."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    from sigconv import _kernels

    def read(kdir: Path) -> str:
        orig = _kernels.kernel_dir
        _kernels.kernel_dir = lambda: kdir
        _kernels.source.cache_clear()
        try:
            return _kernels.source("conv1d.cu")
        finally:
            _kernels.kernel_dir = orig
            _kernels.source.cache_clear()

    if old is None:
        return read(_kernels.kernel_dir())
    if (Path(old) / "kernels").is_dir():
        return read(Path(old) / "kernels")
    with tempfile.TemporaryDirectory() as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", old, "kernels"], check=True,
                                 capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        return read(Path(tmp) / "kernels")


def side_sources(old: str, new: list | None) -> dict:
    """{side: conv1d.cu source}: "old" first, then the new sides (``new``: commits or folders as ``--old``, "tree" for
    the working tree's; none: the tree's alone, as "new"). One new side is named "new"; several are named by their
    folder's name or commit, made unique."""
    src = {"old": conv1d_source(old)}
    news = list(new or [None])
    if len(news) == 1:
        src["new"] = conv1d_source(None if news[0] in (None, "tree") else news[0])
        return src
    for n in news:
        label = "tree" if n in (None, "tree") else Path(str(n).rstrip("/")).name or str(n)
        while label in src:
            label += "'"
        src[label] = conv1d_source(None if n in (None, "tree") else n)
    return src


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--old", required=True,
                   help="the commit whose kernels/ is the old side, or a folder holding that kernels/ (git archive REV "
                        "kernels | tar -x -C DIR, for a machine without the history)")
    p.add_argument("--new", nargs="+", default=None, metavar="REV|DIR",
                   help="the new side's kernels: a commit or a folder holding kernels/, as --old, or 'tree' (default: "
                        "the tree's); several: each its own side, named by its folder or commit")
    p.add_argument("--case", nargs="+", default=list(DEFAULT_CASES), help="K[/BLOCK][:TILE][@E] (default: %(default)s)")
    p.add_argument("--extra", default="", help="variants of the new source: defines NAME=V joined by ',', ';' apart")
    p.add_argument("--old-natural-h", type=int, nargs="*", default=None, metavar="TILE",
                   help="tile lengths on which the old side reads H in natural order (none given: 16384)")
    p.add_argument("--old-column-h", type=int, nargs="*", default=None, metavar="TILE",
                   help="tile lengths on which the old side reads H by column (none given: 16384 and 32768)")
    p.add_argument("--peak-one", action="store_true", help="taps of peak 0.75 (times 2^E): a tap shift of E")
    p.add_argument("--floats", action="store_true",
                   help="neither the launcher's zero taps nor its 8-byte loads (commits before those)")
    p.add_argument("--L", type=int, default=26, help="log2 of the signal length")
    p.add_argument("--out", type=Path, default=None, help="folder for the JSON file")
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("fused_ab: no GPU:", _devices.cuda_reason())
        return 2
    import cupy
    from sigconv import _kernels
    from sigconv.backends import overlap_save as os_

    src = side_sources(a.old, a.new)
    first = list(src)[1]  # (the side that --extra's variants build on)
    launch = {}  # variant -> its launch entries (lower-case names)
    for extra in [e for e in a.extra.split(";") if e]:
        defines, launch[extra] = parse_variant(extra)
        # (a comment naming the variant: its own module, whose function's shared-memory limit is its own)
        src[extra] = f"// {extra}\n" + defines + src[first]

    L = 1 << a.L
    x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
    out = cupy.empty_like(x)
    copy_ms = min(_time(lambda: cupy.copyto(out, x), 30) for _ in range(3))
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{name}; old {a.old}; copy {copy_ms:.4f} ms {2 * x.nbytes / copy_ms / 1e6:.0f} GB/s", flush=True)
    rng = np.random.default_rng(1)
    rows = []
    natural_tiles = set() if a.old_natural_h is None else set(a.old_natural_h or [1 << 14])
    column_tiles = set() if a.old_column_h is None else set(a.old_column_h or [1 << 14, 1 << 15])
    for K, block, tile, e in map(parse_case, a.case):
        w = rng.standard_normal(K)
        if a.peak_one:
            w *= 0.75 / np.abs(w).max()
        case = launcher_case(os_, np.ldexp(w, e).astype(np.float32), L, block, tile, a.floats)
        w, Kr, pad, N, b, plan, pairs = (case[k] for k in ("w", "K", "pad", "N", "block", "plan", "pairs"))
        z, d = case["zeros"]
        H, ts0 = os_.host_spectrum(w, N)
        folded, ts = os_.fused_host_table(w, N)  # (the launcher's table from host taps, the same for both sides)
        if ts[0] != ts0[0]:  # (the taps' power of two folded into it: the old layouts below the same)
            H = H * 2.0 ** int(ts0[0])
        M = N // 2
        h = H[: M + 1]
        if N in column_tiles:  # bin s + 16 c at s M/16 + c, H[M] last
            h = np.concatenate([h[:M].reshape(M // 16, 16).T.reshape(-1), h[M:]])
        old_h = np.zeros((M, 4), dtype=np.float32)
        old_h.reshape(-1, 2)[: M + 1] = np.stack([h.real, h.imag], axis=1)
        table = cupy.asarray(folded)
        tables = {k: cupy.asarray(old_h) if k == "old" and N in natural_tiles | column_tiles else table for k in src}
        ts, tw = cupy.asarray(ts), os_._device_twiddles(N)
        fns, grids, smems, blocks = {}, {}, {}, {}
        for k, code in src.items():
            lk = launch.get(k, {})
            blocks[k] = lk.get("block", b)
            expr = plan["expr"] if blocks[k] == b else os_.fused_plan(Kr, L, 1, blocks[k], tile=N, pairs=pairs)["expr"]
            f = cupy.RawModule(code=code, options=_kernels.NVRTC_OPTIONS,
                               name_expressions=(expr,)).get_function(expr)
            smems[k] = plan["smem"] + lk.get("smem_extra", 0)
            grids[k] = (min(lk.get("grid_x", plan["grid"][0]), plan["grid"][0]), plan["grid"][1])
            if smems[k] > 48 * 1024:
                f.max_dynamic_shared_size_bytes = smems[k]
            fns[k] = f

        def call(k, o):
            fns[k](grids[k], (blocks[k],), (x, o, tables[k], tw, tw, np.int32(1), np.int64(L), np.int32(Kr),
                                    np.int64(pad), np.int64(L), np.int64(plan["ntiles"]), ts,
                                    np.int32(os_.FFT_SAFE_EXPONENT["float32"])), shared_mem=smems[k])

        outs = {k: cupy.empty_like(x) for k in fns}
        for k in fns:
            try:
                call(k, outs[k])
            except cupy.cuda.driver.CUDADriverError as err:  # which side, and what the driver was asked for
                f = fns[k]
                print(f"fused_ab: K={K} side {k!r} refused ({err}): grid {grids[k]} block {blocks[k]} smem {smems[k]}; "
                      f"function: {f.num_regs} registers, {f.shared_size_bytes} B static shared, "
                      f"{f.max_dynamic_shared_size_bytes} B dynamic allowed, {f.max_threads_per_block} threads at most",
                      file=sys.stderr)
                return 1
        times = {k: [] for k in fns}
        for _ in range(4):
            for k in fns:
                times[k].append(_time(lambda: call(k, outs[k]), 30))
        old_ms = min(times["old"])
        peak = float(cupy.abs(outs["old"]).max())
        for k in fns:
            if k == "old":
                continue
            diff = float(cupy.abs(outs[k] - outs["old"]).max()) / peak
            ms = min(times[k])
            rows.append({"K": K, "taps_scale_log2": e, "tile": N, "block": blocks[k], "old_block": b, "pairs": pairs,
                         "zero_taps": [z, d],
                         "variant": k, "old_ms": old_ms,
                         "new_ms": ms, "change": ms / old_ms - 1, "max_rel_diff": diff,
                         "pct_copy_new": 100 * copy_ms / ms, "rounds": {k: times[k], "old": times["old"]}})
            print(f"K={K:5d}{f' x2^{e}' if e else ''} tile {N:5d}/{blocks[k]:4d} {k:>8}: "
                  f"old {old_ms:.4f} new {ms:.4f} ms "
                  f"({100 * (ms / old_ms - 1):+5.1f}%), {100 * copy_ms / ms:4.1f}% copy; max diff/peak {diff:.1e}",
                  flush=True)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        path = a.out / f"fused-ab-{name.replace(' ', '-')}-{datetime.date.today().isoformat()}.json"
        path.write_text(json.dumps({"device": name, "old": a.old, "new": a.new, "copy_ms": copy_ms, "rows": rows},
                                   indent=1))
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
