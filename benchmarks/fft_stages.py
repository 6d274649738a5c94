"""Where the time of sigconv's `fft` conv1d variant goes: each overlap-save stage timed alone.

    python benchmarks/fft_stages.py [--L 26] [--K 255 1023 4095]

Times (CUDA events, median of 20 after warm-up) the six stages of launch_fft for C=1, L=2^L, float32:
gather (segments, and each one's peak exponent), rescale (the segments of extreme magnitude: none here),
rfft, spectrum product, irfft, scatter (unscaled); prints each stage's ms, the bytes it must
move (each operand read once, each result written once) and the achieved GB/s, against the whole
call. Needs a GPU.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np


def _time(fn, reps=20):
    import cupy

    for _ in range(3):
        fn()
    ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    ev[-1][1].synchronize()
    return float(np.median([cupy.cuda.get_elapsed_time(a, b) for a, b in ev]))


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--L", type=int, default=26, help="log2 of the signal length")
    p.add_argument("--K", type=int, nargs="+", default=[255, 1023, 4095])
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("fft_stages: no GPU:", _devices.cuda_reason())
        return 2
    import cupy
    import cupyx.scipy.fft

    from sigconv._core.xp import FFT_SAFE_EXPONENT
    from sigconv.backends import cuda1d
    from sigconv.backends import overlap_save as c

    L = 1 << a.L
    x = cupy.random.standard_normal((1, L), dtype=cupy.float32)
    print(f"fft stages, C=1 L=2^{a.L} float32 on {_devices.gpu_name()}")
    print(f"{'K':>5} {'N':>6} {'stage':8} {'ms':>8} {'MB moved':>9} {'GB/s':>7}")
    for K in a.K:
        w = cupy.random.standard_normal(K, dtype=cupy.float32)
        out_len = L
        pad = K // 2
        N = c.fft_size(K)
        M = N - K + 1
        nseg = -(-out_len // M)
        NF = N // 2 + 1
        mod = cuda1d._module()
        H, tap_shift = c._filter_spectrum(w, N)
        shift = cupy.full(nseg, c._NO_PEAK, dtype=cupy.int32)
        segs = cupy.empty((nseg, N), dtype=cupy.float32)
        out = cupy.empty((1, out_len), dtype=cupy.float32)
        blk = 256
        rescale = mod.get_function("conv1d_os_rescale_f32")
        safe = np.int32(FFT_SAFE_EXPONENT["float32"])
        gather = mod.get_function("conv1d_os_gather_f32")
        cmul = mod.get_function("conv1d_os_cmul_f32")
        scatter = mod.get_function("conv1d_os_scatter_f32")
        st = {}
        st["gather"] = (_time(lambda: gather(c.os_grid("gather", blk, N=N, nseg=nseg), (blk,), (x, segs, np.int32(1), np.int64(L),
                                             np.int64(pad), np.int64(M), np.int32(N), np.int64(nseg), shift))),
                        4 * L + 4 * segs.size)
        st["rescale"] = (_time(lambda: rescale(c.os_grid("rescale", blk, N=N, nseg=nseg), (blk,),
                                               (segs, shift, np.int32(1), np.int32(N), np.int64(nseg), safe))), 4 * nseg)
        X = cupy.fft.rfft(segs, axis=-1)
        st["rfft"] = (_time(lambda: cupy.fft.rfft(segs, axis=-1)), 4 * segs.size + 8 * X.size)
        st["cmul"] = (_time(lambda: cmul(c.os_grid("cmul", blk, N=N, rows=nseg), (blk,), (X, H, np.int64(nseg), np.int32(NF)))),
                      16 * X.size)
        Xc = X.copy()
        st["irfft"] = (_time(lambda: cupyx.scipy.fft.irfft(Xc, n=N, axis=-1, norm="forward", overwrite_x=True)),
                       8 * X.size + 4 * segs.size)
        Ys = cupyx.scipy.fft.irfft(X, n=N, axis=-1, norm="forward")
        st["scatter"] = (_time(lambda: scatter(c.os_grid("scatter", blk, N=N, nseg=nseg, M=M), (blk,), (Ys, out, np.int32(1),
                                               np.int64(out_len), np.int64(M), np.int32(N), np.int64(nseg),
                                               np.int32(K), shift, tap_shift, safe))), 4 * out_len + 4 * out_len)
        st["whole"] = (_time(lambda: c.launch_fft(x, w, pad, out_len, blk, out=out)), 8 * L)
        for k, (ms, b) in st.items():
            print(f"{K:5d} {N:6d} {k:8} {ms:8.3f} {b / 1e6:9.0f} {b / ms / 1e6:7.0f}")
        del segs, X, Xc, Ys
        cupy.get_default_memory_pool().free_all_blocks()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
