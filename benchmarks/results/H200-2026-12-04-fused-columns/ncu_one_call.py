"""The production fft_fused kernel once per K, for ncu: C=1, L=2^26, host taps. From the repository root:
    ncu -k conv1d_fft_fused --section ... python3 benchmarks/results/H200-2026-12-04-fused-columns/ncu_one_call.py 4095
"""
import sys
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np
import cupy
from sigconv.backends import overlap_save as os_
L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
for K in [int(k) for k in sys.argv[1].split(",")]:
    w = cupy.asarray(np.random.default_rng(1).standard_normal(K).astype(np.float32))
    os_.launch_fft_fused(x, w, (K - 1) // 2, L, None, out=out, taps_key=("ncu", K))
    cupy.cuda.Device().synchronize()
    print("K", K, "done", flush=True)
