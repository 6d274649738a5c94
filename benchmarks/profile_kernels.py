"""The kernels whose targets were missed, once each inside a profiler range, for Nsight Compute.

    ncu --clock-control none --profile-from-start off --section SpeedOfLight --section Occupancy \
        --section LaunchStats --section MemoryWorkloadAnalysis --section WarpStateStats \
        python benchmarks/profile_kernels.py [--only NAME ...]

(benchmarks/gpu_check.sh's `profile` stage runs exactly that and keeps the report's text.)

Cases, float32 (the benchmark's shapes):
  conv2d-k3-strip     spectrogram 1x1x1025x65536, random 3x3, variant strip, block 64x1
  conv2d-k3-regblock  the same, variant regblock, block 32x4 (its fastest block in the bench)
  conv2d-k3-shfl      the same, variant shfl, block 128x1 (not an auto candidate yet)
  conv2d-k31-prefetch-fill / -wrap  1x1x512x512, random 31x31, "same", variant prefetch, block 8x4, with
                      zero fill and with boundary "wrap" (what the wrap build costs over the zero-fill build)
  conv2d-img15-strip-fill / -symm  1x1x2048x2048, random 15x15, "same", variant strip, block 64x1, with zero fill
                      and with boundary "symm" (every thread through the rule's chunk map)
  conv2d-k9odd-prefetch-fill / -wrap / -symm  1x1x1025x65535 (no 16-byte rows), random 9x9, "same", variant
                      prefetch, block 16x8, with zero fill and with boundaries "wrap" and "symm" (the tiled kernels'
                      scalar loads)
  conv2d-odd9-shfl-fill / -wrap  1x1x1024x1023 (no 16-byte rows, a grid of two warps per multiprocessor), random
                      9x9, "same", variant shfl, block 128x1, with zero fill and with boundary "wrap" (on a grid this
                      small, what a wrap build adds to the code shows as instruction-fetch stalls)
  conv1d-k25-tiled    C=1, L=2^26, K=25, variant tiled, blocks 64 and 256
  conv1d-k63-tiled    C=1, L=2^26, K=63, variant tiled, blocks 96 (its fastest) and 256
  conv1d-k63-ffa / conv1d-k25-ffa  C=1, L=2^26, K=63 / 25, variant ffa, blocks 64 (auto's) and 128
  conv2d-artA-igemm / conv2d-artA-igemm_tf32  article A's layer, 16x256x128x128, 3x3 -> 256 channels, pad 1, variant
                      igemm at block 16x16 / igemm_tf32 at 32x8
  conv1d-k1023-fft    C=1, L=2^26, K=1023, variant fft, block 256: gather, rfft, product, irfft, scatter
  conv1d-k255-fft_fused / conv1d-k1023-fft_fused / conv1d-k4095-fft_fused / conv1d-k7921-fft_fused  C=1, L=2^26,
                      K=255 / 1023 / 4095 / 7921, variant fft_fused at its own tile and block (4096 / 8192 / 16384 /
                      32768 samples, 128 / 256 / 512 / 512 threads)
Each case runs three times untimed (compile, autotune-free), then once between cudaProfilerStart and
cudaProfilerStop, so ncu sees exactly one launch of each kernel of the case. Without ncu the script just
runs (a smoke test) and prints each case's CUDA-event time. Needs a GPU.
"""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

CASES = ("conv2d-k3-strip", "conv2d-k3-regblock", "conv2d-k3-shfl", "conv2d-k31-prefetch-fill",
         "conv2d-k31-prefetch-wrap", "conv2d-img15-strip-fill", "conv2d-img15-strip-symm",
         "conv2d-k9odd-prefetch-fill", "conv2d-k9odd-prefetch-wrap", "conv2d-k9odd-prefetch-symm",
         "conv2d-odd9-shfl-fill", "conv2d-odd9-shfl-wrap", "conv1d-k25-tiled", "conv1d-k1023-fft",
         "conv1d-k255-fft_fused", "conv1d-k1023-fft_fused", "conv1d-k4095-fft_fused",
         "conv1d-k7921-fft_fused", "conv1d-k63-tiled",
         "conv1d-k63-ffa", "conv1d-k25-ffa", "conv2d-artA-igemm", "conv2d-artA-igemm_tf32")


def main(argv=None) -> int:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--only", nargs="+", choices=CASES, default=list(CASES))
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("profile_kernels: no GPU:", _devices.cuda_reason())
        return 2
    import cupy
    from cupy.cuda import profiler

    from sigconv.backends import cuda1d, cuda2d, overlap_save

    rng = cupy.random.default_rng(0)
    runs = {}
    # zero-fill cases: (tag, x shape, w shape, pad, output size, (variant, launcher, block) ...); y has x's shape
    for tag, xs, ws, pad, out_hw, cases in (
            ("k3", (1, 1, 1025, 65536), (1, 1, 3, 3), (1, 1), (1025, 65536),
             (("strip", cuda2d.launch_strip, (64, 1)), ("regblock", cuda2d.launch_regblock, (32, 4)),
              ("shfl", cuda2d.launch_shfl, (128, 1)))),
            ("artA", (16, 256, 128, 128), (256, 256, 3, 3), (1, 1), (128, 128),
             (("igemm", cuda2d.launch_igemm, (16, 16)), ("igemm_tf32", cuda2d.launch_igemm_tf32, (32, 8))))):
        if not any(c.startswith(f"conv2d-{tag}-") for c in a.only):
            continue
        x = rng.standard_normal(xs, dtype=cupy.float32)
        w = rng.standard_normal(ws, dtype=cupy.float32)
        y = cupy.empty_like(x)
        for name, launch, block in cases:
            runs[f"conv2d-{tag}-{name}"] = functools.partial(launch, x, w, None, (1, 1), pad, out_hw, block=block,
                                                             out=y)
    # single-channel boundary cases: (name, image size, kernel side, launcher, block, the boundaries compared)
    for tag, hw, k, launch, block, bounds in (
            ("k31-prefetch", (512, 512), 31, cuda2d.launch_prefetch, (8, 4), ("fill", "wrap")),
            ("img15-strip", (2048, 2048), 15, cuda2d.launch_strip, (64, 1), ("fill", "symm")),
            ("k9odd-prefetch", (1025, 65535), 9, cuda2d.launch_prefetch, (16, 8), ("fill", "wrap", "symm")),
            ("odd9-shfl", (1024, 1023), 9, cuda2d.launch_shfl, (128, 1), ("fill", "wrap"))):
        if not any(c.startswith(f"conv2d-{tag}") for c in a.only):
            continue
        xb = rng.standard_normal((1, 1) + hw, dtype=cupy.float32)
        wb = rng.standard_normal((1, 1, k, k), dtype=cupy.float32)
        yb = cupy.empty_like(xb)
        for b in bounds:
            runs[f"conv2d-{tag}-{b}"] = functools.partial(launch, xb, wb, None, (1, 1), ((k - 1) // 2,) * 2,
                                                          hw, block=block, out=yb, boundary=b)
    if any(c.startswith("conv1d") for c in a.only):
        L = 1 << 26
        x1 = rng.standard_normal((1, L), dtype=cupy.float32)
        y1 = cupy.empty_like(x1)
        w25 = rng.standard_normal(25, dtype=cupy.float32)
        w1023 = rng.standard_normal(1023, dtype=cupy.float32)

        def tiled():
            cuda1d.launch_tiled(x1, w25, 12, L, 64, out=y1)
            cuda1d.launch_tiled(x1, w25, 12, L, 256, out=y1)

        runs["conv1d-k25-tiled"] = tiled
        w63 = rng.standard_normal(63, dtype=cupy.float32)

        def tiled63():
            cuda1d.launch_tiled(x1, w63, 31, L, 96, out=y1)
            cuda1d.launch_tiled(x1, w63, 31, L, 256, out=y1)

        runs["conv1d-k63-tiled"] = tiled63
        for k, wk in ((63, w63), (25, w25)):
            runs[f"conv1d-k{k}-ffa"] = functools.partial(
                lambda w, pad: [cuda1d.launch_ffa(x1, w, pad, L, b, out=y1) for b in (64, 128)], wk, (k - 1) // 2)
        runs["conv1d-k1023-fft"] = lambda: overlap_save.launch_fft(x1, w1023, 511, L, 256, out=y1)
        for k in (255, 1023, 4095, 7921):  # each at its tile's block (block None: sigconv.registry.auto.fused_block)
            wk = rng.standard_normal(k, dtype=cupy.float32)
            runs[f"conv1d-k{k}-fft_fused"] = functools.partial(overlap_save.launch_fft_fused, x1, wk, (k - 1) // 2, L,
                                                               None, out=y1)
    for name in a.only:
        fn = runs[name]
        for _ in range(3):
            fn()
        cupy.cuda.Device().synchronize()
        t0, t1 = cupy.cuda.Event(), cupy.cuda.Event()
        profiler.start()
        t0.record()
        fn()
        t1.record()
        profiler.stop()
        t1.synchronize()
        print(f"{name:20} {cupy.cuda.get_elapsed_time(t0, t1):8.3f} ms (one call; under ncu this includes replays)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
