"""(Run as `python3 dsmem_bandwidth.py` on a GPU machine with CuPy.) Distributed shared memory throughput on clusters of two blocks (sm_90): each block moves 16 8-byte words a thread
(block of T threads: T * 128 bytes) a round, to or from its partner's shared memory or its own, a cluster barrier a
round; per multiprocessor GB/s and bytes a clock."""
import cupy as cp
import numpy as np

SRC = r'''
template <int MODE>
__device__ __forceinline__ void round_(unsigned local, unsigned remote, int tid, int T, float& acc) {
#pragma unroll
    for (int r = 0; r < 16; ++r) {
        const unsigned off = (unsigned)(tid + r * T) * 8u;
        if (MODE == 0) {  // own shared memory: store then load
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(local + off), "f"(acc), "f"((float)r) : "memory");
        } else if (MODE == 1) {  // partner's: store
            asm volatile("st.shared::cluster.v2.f32 [%0], {%1, %2};" ::"r"(remote + off), "f"(acc), "f"((float)r) : "memory");
        } else {  // partner's: load
            float a, b;
            asm volatile("ld.shared::cluster.v2.f32 {%0, %1}, [%2];" : "=f"(a), "=f"(b) : "r"(remote + off) : "memory");
            acc += a * b;
        }
    }
    if (MODE == 0) {
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const unsigned off = (unsigned)(tid + r * T) * 8u;
            float a, b;
            asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];" : "=f"(a), "=f"(b) : "r"(local + off) : "memory");
            acc += a * b;
        }
    }
}
template <int MODE>
__device__ void body(int iters, float* sink) {
    extern __shared__ float2 buf[];
    const int tid = threadIdx.x, T = blockDim.x;
    unsigned rank;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    const unsigned local = (unsigned)__cvta_generic_to_shared(buf);
    unsigned remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(local), "r"(rank ^ 1u));
    float acc = (float)tid;
    asm volatile("barrier.cluster.arrive; barrier.cluster.wait;" ::: "memory");
    for (int it = 0; it < iters; ++it) {
        round_<MODE>(local, remote, tid, T, acc);
        asm volatile("barrier.cluster.arrive; barrier.cluster.wait;" ::: "memory");
    }
    if (acc == 1234.5f) sink[0] = acc;
}
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(1024) own(int iters, float* sink) { body<0>(iters, sink); }
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(1024) put(int iters, float* sink) { body<1>(iters, sink); }
extern "C" __global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(1024) get(int iters, float* sink) { body<2>(iters, sink); }
'''
mod = cp.RawModule(code=SRC, options=("-std=c++17",))
sink = cp.zeros(1, cp.float32)
props = cp.cuda.runtime.getDeviceProperties(0)
sms, mhz = props["multiProcessorCount"], props["clockRate"] / 1e3
print(props["name"].decode(), sms, "multiprocessors")
start, end = cp.cuda.Event(), cp.cuda.Event()
iters = 2000
for name in ("own", "put", "get"):
    f = mod.get_function(name)
    for T, per_sm in ((1024, 1), (512, 2), (256, 4)):
        smem = T * 128
        f.max_dynamic_shared_size_bytes = smem
        grid = sms * per_sm
        args = (np.int32(iters), sink)
        f((grid,), (T,), args, shared_mem=smem)
        best = 1e9
        for _ in range(5):
            start.record()
            f((grid,), (T,), args, shared_mem=smem)
            end.record()
            end.synchronize()
            best = min(best, cp.cuda.get_elapsed_time(start, end))
        moved = (2 if name == "own" else 1) * smem * iters  # bytes a block (own: stored and loaded)
        per_sm_gbs = moved * per_sm / (best * 1e-3) / 1e9
        print(f"{name}: {T:4d} threads, {per_sm} block(s) a multiprocessor: {best:.3f} ms, {per_sm_gbs:.0f} GB/s a "
              f"multiprocessor ({per_sm_gbs * 1e9 / (1955e6):.1f} bytes a clock at 1955 MHz), "
              f"{per_sm_gbs * sms / 1e3:.2f} TB/s in all")
