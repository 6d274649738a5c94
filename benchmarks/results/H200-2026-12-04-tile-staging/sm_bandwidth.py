"""(Run as `python3 sm_bandwidth.py` on a GPU machine with CuPy.) Per-multiprocessor load and store throughput of the fused tile's memory phases, alone: one block of 1024 threads a
multiprocessor, each tile 16 8-byte loads a thread (128 KB, tiles overlapping as the 32768 tile at K=7921 does) and/or
12424 8-byte stores a block (97 KB), a barrier a tile."""
import cupy as cp
import numpy as np

SRC = r'''
extern "C" __global__ void __launch_bounds__(1024) mem(const float2* __restrict__ x, float2* __restrict__ y, int tiles,
                                                        long long vstep, int mode, float* sink) {
    float acc = 0.0f;
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) {
        const float2* p = x + (long long)t * vstep;
        float2 v[16];
        if (mode & 1) {
#pragma unroll
            for (int r = 0; r < 16; ++r) v[r] = p[threadIdx.x + r * 1024];
        } else {
#pragma unroll
            for (int r = 0; r < 16; ++r) v[r] = make_float2(acc, (float)r);
        }
#pragma unroll
        for (int r = 0; r < 16; ++r) acc += v[r].x * 1.0001f + v[r].y;
        if (mode & 2) {
            float2* q = y + (long long)t * vstep;
#pragma unroll
            for (int r = 0; r < 16; ++r) {
                const int i = threadIdx.x + r * 1024;
                if (i < vstep) q[i] = v[r];
            }
        }
        __syncthreads();
    }
    if (acc == 1234.5f) sink[0] = acc;
}
'''
f = cp.RawModule(code=SRC, options=("-std=c++17",)).get_function("mem")
L = 1 << 26
V = 24848 // 2  # float2 a tile's step
tiles = -(-L // 24848)
x = cp.asarray(cp.random.default_rng(0).standard_normal(L + 65536, dtype=cp.float32))
y = cp.empty_like(x)
sink = cp.zeros(1, cp.float32)
start, end = cp.cuda.Event(), cp.cuda.Event()
print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())
for mode, what in ((1, "loads 128 KB"), (2, "stores 97 KB"), (3, "loads + stores")):
    for grid in (132, 66, 33):
        f((grid,), (1024,), (x, y, np.int32(tiles), np.int64(V), np.int32(mode), sink))
        best = 1e9
        for _ in range(20):
            start.record()
            f((grid,), (1024,), (x, y, np.int32(tiles), np.int64(V), np.int32(mode), sink))
            end.record()
            end.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, end))
        per_tile_us = best * 1e3 / (tiles / grid)
        nbytes = (131072 if mode & 1 else 0) + (V * 8 if mode & 2 else 0)
        print(f"{what:15s} grid {grid:3d}: {best:.4f} ms, {per_tile_us:.2f} us a tile a multiprocessor, "
              f"{nbytes / per_tile_us / 1e3:.1f} GB/s a multiprocessor, {nbytes * tiles / best / 1e6:.0f} GB/s in all")
