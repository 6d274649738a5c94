// common.cuh: small device helpers shared by the 1-D kernels (kernels/conv1d.cu).
// NVRTC-compatible: no host headers. Index maths lives here so each kernel reads as its formula.
#ifndef SIGCONV_COMMON_CUH
#define SIGCONV_COMMON_CUH

typedef long long sc_i64;
typedef unsigned long long sc_u64;

// x[i] of one channel, or 0 outside [0, L) (the contract's zero padding).
template <typename T>
__device__ __forceinline__ T sc_load_or_zero(const T* __restrict__ xc, sc_i64 i, sc_i64 L) {
    return (i >= 0 && i < L) ? xc[i] : T(0);
}

// Taps j in [jlo, jhi) keep base + j inside [0, L): output n reads x[base + j], base = n - pad.
__device__ __forceinline__ void sc_tap_range(sc_i64 base, sc_i64 L, int K, int& jlo, int& jhi) {
    sc_i64 lo = base < 0 ? -base : 0;          // first tap landing at x[0] or later
    sc_i64 hi = L - base;                      // first tap landing at x[L] or later
    jlo = (int)(lo < (sc_i64)K ? lo : (sc_i64)K);
    jhi = (int)(hi < (sc_i64)K ? (hi > 0 ? hi : 0) : (sc_i64)K);
    if (jhi < jlo) jhi = jlo;
}

// Shared-memory index with 4 words of padding after every 32: a quarter-warp's 16-byte reads at
// thread strides of 8 or 16 words then land in distinct bank groups (see conv1d.cu, tiled).
__device__ __forceinline__ int sc_pad32(int q) { return q + ((q >> 5) << 2); }

// Words of shared memory that logical indices [0, S) occupy under sc_pad32 (rounded to 4).
__host__ __device__ __forceinline__ int sc_pad32_words(int S) { return ((S + 3) & ~3) + 4 * ((S + 31) / 32); }

// Misalignment, in floats (0..3), of element `start` of a float array at p: (addr/4 + start) mod 4.
// `start` may be negative (a block whose window begins in the left zero padding).
__device__ __forceinline__ int sc_misalign4(const float* p, sc_i64 start) {
    return (int)(((sc_u64)p >> 2) + (sc_u64)start) & 3;
}

// 16-byte alignment test of a float pointer (for vector stores).
__device__ __forceinline__ bool sc_aligned16(const float* p) { return (((sc_u64)p) & 15) == 0; }

// Write R accumulators to outputs [n, n + R) of one channel: float4 stores when all are in range and 16-byte aligned,
// else element by element (the tail and misaligned rows).
template <int R>
__device__ __forceinline__ void sc_store_outputs(float* __restrict__ yc, sc_i64 out_len, sc_i64 n, const float (&acc)[R]) {
    if (n + R <= out_len && sc_aligned16(yc + n)) {
#pragma unroll
        for (int k = 0; k < R / 4; ++k)
            *reinterpret_cast<float4*>(yc + n + 4 * k) =
                make_float4(acc[4 * k], acc[4 * k + 1], acc[4 * k + 2], acc[4 * k + 3]);
    } else {
#pragma unroll
        for (int r = 0; r < R; ++r)
            if (n + r < out_len) yc[n + r] = acc[r];
    }
}

// Programmatic dependent launch (compute capability 9.0 and later; nothing on earlier GPUs). A kernel launched with
// programmatic stream serialization (sigconv/_kernels.py, launch_after) may start while the kernel before it on its
// stream still runs, once every block of that one has executed sc_launch_dependents (or ended). sc_grid_wait returns
// when the kernel before has ended and its writes are visible: every thread calls it before its first read of what that
// kernel writes. Launched without the attribute, a kernel starts after the one before it has ended and sc_grid_wait
// returns at once. (The host emulation's stand-in, tests/host_emulation/cuda_shim_threads.h, keeps what the kernel
// before writes unreadable until every thread of the block has called it.)
__device__ __forceinline__ void sc_grid_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;" ::: "memory");
#elif defined(SIGCONV_HOST_EMULATION)
    sc_emu_grid_wait();
#endif
}
__device__ __forceinline__ void sc_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

#endif  // SIGCONV_COMMON_CUH
