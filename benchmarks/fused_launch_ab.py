"""fft_fused through its launcher with one of its layout choices against the same launcher without it, side by side in
one process.

    python benchmarks/fused_launch_ab.py --off alignment|pairs [--L 26] [--C 1] [--K ...]

--off alignment: the zero taps that start every tile on an even sample (overlap_save.fused_alignment) against the taps
as given; --off pairs: the 32768 tile's kernel that reads a point's two samples as one 8-byte load where it may
(overlap_save.fused_pairs) against float loads. Device taps (the path `sigconv bench` times: the spectrum kernel's
comparison launch included), "same" window, CUDA-event medians of 30 calls, 4 interleaved rounds, the best round of
each kept. The outputs are compared with each other and with a float64 reference on the first 2^16 outputs. Prints one
line per K with every round. Needs a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from fft_stages import _time  # CUDA events, median after a warm-up (this folder)

ROOT = Path(__file__).resolve().parent.parent
#: the launcher's function each choice comes from, and what it returns where the choice is off
CHOICES = {"alignment": ("fused_alignment", (0, 0)), "pairs": ("fused_pairs", False)}


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--off", choices=sorted(CHOICES), required=True, help="the choice the other side goes without")
    p.add_argument("--L", type=int, default=26, help="log2 of the signal length")
    p.add_argument("--C", type=int, default=1)
    p.add_argument("--K", type=int, nargs="+",
                   default=[127, 255, 511, 1023, 2047, 3001, 4095, 4097, 5001, 6001, 7921, 8000])
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("fused_launch_ab: no GPU:", _devices.cuda_reason())
        return 2
    import cupy
    from sigconv.backends import overlap_save as os_

    attr, off_value = CHOICES[a.off]
    chosen = getattr(os_, attr)
    L, C = 1 << a.L, a.C
    x = cupy.random.default_rng(0).standard_normal((C, L), dtype=cupy.float32)
    copy_ms = min(_time(lambda: cupy.copyto(cupy.empty_like(x), x), 30) for _ in range(3))
    name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    print(f"{name}; --off {a.off}; C={C} L=2^{a.L}; copy {copy_ms:.4f} ms", flush=True)
    outs = {k: cupy.empty_like(x) for k in ("on", "off")}
    for K in a.K:
        wh = (np.random.default_rng(K).standard_normal(K) / np.sqrt(K)).astype(np.float32)
        w = cupy.asarray(wh)
        pad = (K - 1) // 2
        N = os_.fused_plan(K, L, C)["N"]
        z, d = os_.fused_alignment(K, pad, N)
        pairs = os_.fused_pairs(N, os_._auto.fused_block(K), K + z + d, pad + z, L, x.data.ptr % 8 == 0)

        def run(k):
            setattr(os_, attr, chosen if k == "on" else (lambda *_: off_value))
            try:
                os_.launch_fft_fused(x, w, pad, L, None, out=outs[k])
            finally:
                setattr(os_, attr, chosen)

        times = {k: [] for k in outs}
        for k in outs:
            run(k)
        for _ in range(4):
            for k in outs:
                times[k].append(_time(lambda: run(k), 30))
        n = min(L, 1 << 16)
        ref = np.array([np.correlate(np.pad(cupy.asnumpy(x[c, : n + K]).astype(np.float64), (pad, 0)),
                                     wh.astype(np.float64), "valid")[:n] for c in range(C)])
        errs = {k: float(np.abs(cupy.asnumpy(outs[k][:, :n]) - ref).max() / np.abs(ref).max()) for k in outs}
        diff = float(cupy.abs(outs["on"] - outs["off"]).max() / cupy.abs(outs["off"]).max())
        t_on, t_off = min(times["on"]), min(times["off"])
        print(f"K={K:5d} tile {N:5d} (z {z}, d {d}, pairs {pairs}): off {t_off:.4f} ms {100 * copy_ms / t_off:4.1f}% "
              f"copy, on {t_on:.4f} ms {100 * copy_ms / t_on:4.1f}% copy ({100 * (t_on / t_off - 1):+5.1f}%); max "
              f"err/peak vs float64 {errs['off']:.1e} / {errs['on']:.1e}, between {diff:.1e}; rounds "
              + "; ".join(f"{k}: " + " ".join(f"{t:.4f}" for t in v) for k, v in times.items()), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
