"""The device-taps call of fft_fused (spectrum check + tile kernel) against the tile kernel alone, with the
spectrum kernel's (and the tile kernel's) preferred shared-memory carveout set to a few values."""
import sys
from pathlib import Path
import numpy as np
ROOT = Path(__file__).resolve().parents[4]  # (the repository, from benchmarks/results/<folder>/experiments)
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from fft_stages import _time  # noqa: E402
import cupy  # noqa: E402
from sigconv.backends import overlap_save as os_  # noqa: E402
from sigconv.backends.overlap_save import host_taps_key  # noqa: E402

L = 1 << 26
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
for K in (4095, 7921):
    wh = np.random.default_rng(1).standard_normal(K).astype(np.float32)
    w = cupy.asarray(wh)
    pad = (K - 1) // 2
    key = host_taps_key(wh)
    plan = os_.fused_plan(K, L, 1, None)
    N = plan["N"]
    logn = N.bit_length() - 1
    smem = os_._fused_smem(N, 1)
    os_.launch_fft_fused(x, w, pad, L, None, out=out)
    spec = os_._fused_function(f"conv1d_fft_fused_spectrum<{logn}>", smem)
    tile = os_._fused_function(plan["expr"], plan["smem"])
    print(f"K={K} tile {N}: spectrum carveout {spec.preferred_shared_memory_carveout}, tile {tile.preferred_shared_memory_carveout}", flush=True)
    res = {}
    for rnd in range(3):
        for name, sc, tc in (("default", -1, -1), ("spec 100", 100, -1), ("spec 0", 0, -1), ("spec 50", 50, -1),
                             ("both 72", 72, 72), ("both 100", 100, 100)):
            spec.preferred_shared_memory_carveout = sc
            tile.preferred_shared_memory_carveout = tc
            t = _time(lambda: os_.launch_fft_fused(x, w, pad, L, None, out=out), 40)
            res.setdefault("device taps, " + name, []).append(t)
        spec.preferred_shared_memory_carveout = -1
        tile.preferred_shared_memory_carveout = -1
        res.setdefault("taps key (no spectrum launch)", []).append(
            _time(lambda: os_.launch_fft_fused(x, w, pad, L, None, out=out, taps_key=key), 40))
    for k, v in res.items():
        print(f"K={K} {k:40s} best of 3 medians {min(v):.4f} ms  ({', '.join(f'{t:.4f}' for t in v)})", flush=True)
