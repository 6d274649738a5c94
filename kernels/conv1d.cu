// conv1d.cu: sigconv's 1-D convolution kernels (the backend contract in sigconv/backends/__init__.py).
//
// Every kernel computes the correlation form over C channels in one launch:
//     y[c, n] = sum_{j<K} w[j] * x[c, n + j - pad],   0 <= n < out_len,   x = 0 outside [0, L)
// x is (C, L) and y is (C, out_len), both C-contiguous. Channels run over grid.y (a grid-stride loop,
// so any C works). Variants, in order (each is a faster retelling of the one before):
//   naive     one thread per output; x and w read from global memory. float32/float64, and uint64 for
//             exact integer convolution (modular arithmetic mod 2^64).
//   constant  as naive, taps in __constant__ memory (broadcast to the warp). Limit: 32 KB of taps,
//             8192 float32 / 4096 float64 (the launcher refuses more).
//   shared    a block's input tile plus its K-1 halo staged in shared memory once, then every thread
//             computes from it. K of any size: the taps are walked in chunks of SIGCONV_SHARED_KCH_*
//             (the tile is re-staged per chunk), so nothing is refused.
//   l2        only the block's core tile in shared memory; the halo (threads near the tile's right
//             edge) reads x from global memory, where neighbouring blocks have just pulled it into L2.
//   tiled     the fast one (float32). R outputs per thread accumulated in registers; the block tile
//             (plus halo) is loaded with 16-byte float4 loads (aligned covering range, any start),
//             kept in shared memory padded 4 words per 32 (no bank conflicts for the float4 reads),
//             read back as float4 windows; taps from __constant__ memory, used directly as FFMA operands.
//             conv1d_tiled<K, R>: K fixed at compile time, every loop unrolled (instantiated per K
//             through NVRTC name expressions). conv1d_tiled_rt<R>: any K up to 8192 (runtime tap loop
//             of 4 taps a step, a register sliding window of R+4 inputs).
//   fft       (Python, sigconv/backends/overlap_save.py) overlap-save with cuFFT; its three helper kernels
//             are wrapped here: conv1d_os_gather_* (build the segments, note each one's peak exponent),
//             conv1d_os_rescale_* (scale the few segments of extreme magnitude by a power of two),
//             conv1d_os_cmul_* (spectrum product), conv1d_os_scatter_* (keep the valid part of each segment,
//             unscaled); their bodies and
//             launch geometry are in overlap_save.cuh.
//   fft_fused overlap-save in one kernel (float32): conv1d_fft_fused<LOGN, ONE> transforms a tile of 2^LOGN
//             samples in shared memory, multiplies by the filter's spectrum, transforms back and writes the valid
//             outputs, so the signal crosses memory once; conv1d_fft_fused_spectrum<LOGN> computes its table from
//             taps on the device (fft_fused.cuh).
//
// Compile alone (checks, register and spill report):
//   nvcc -std=c++17 -arch=sm_90 -cubin -Xptxas -v -DSIGCONV_NVCC_CHECK -o /dev/null kernels/conv1d.cu
// (SIGCONV_NVCC_CHECK instantiates the tiled templates for a spread of K; at run time CuPy's NVRTC
// compiles exactly the instantiations asked for.)
#include "common.cuh"
#include "limits.cuh"  // SIGCONV_CONST_TAP_DOUBLES, SIGCONV_SHARED_KCH_*: shared with the Python launchers

// One raw buffer serves both dtypes (float kernels view it as 8192 floats). The launcher uploads
// the taps (zero-padded to a multiple of 4) on the launch stream just before the launch.
__constant__ double c_taps_raw[SIGCONV_CONST_TAP_DOUBLES];

template <typename T> __device__ __forceinline__ T sc_ctap(int j);
template <> __device__ __forceinline__ float sc_ctap<float>(int j) {
    return reinterpret_cast<const float*>(c_taps_raw)[j];
}
template <> __device__ __forceinline__ double sc_ctap<double>(int j) { return c_taps_raw[j]; }

// ============================================================================ naive
// Thread n of channel c: the contract's sum, taps clipped to those landing inside [0, L).
template <typename T>
__device__ __forceinline__ void naive_body(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                           int C, sc_i64 L, int K, sc_i64 pad, sc_i64 out_len) {
    const sc_i64 n = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= out_len) return;
    const sc_i64 base = n - pad;  // input index under tap 0
    int jlo, jhi;
    sc_tap_range(base, L, K, jlo, jhi);
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const T* xc = x + (sc_i64)c * L;
        T acc = T(0);
        for (int j = jlo; j < jhi; ++j) acc += w[j] * xc[base + j];
        y[(sc_i64)c * out_len + n] = acc;
    }
}

extern "C" __global__ void conv1d_naive_f32(const float* x, const float* w, float* y, int C, sc_i64 L, int K,
                                            sc_i64 pad, sc_i64 out_len) {
    naive_body<float>(x, w, y, C, L, K, pad, out_len);
}
extern "C" __global__ void conv1d_naive_f64(const double* x, const double* w, double* y, int C, sc_i64 L, int K,
                                            sc_i64 pad, sc_i64 out_len) {
    naive_body<double>(x, w, y, C, L, K, pad, out_len);
}
// Exact integer convolution: unsigned products and sums wrap mod 2^64, the same bits as NumPy's int64
// arithmetic on signed values passed reinterpreted (the launcher's uint64 path).
extern "C" __global__ void conv1d_naive_u64(const sc_u64* x, const sc_u64* w, sc_u64* y, int C, sc_i64 L, int K,
                                            sc_i64 pad, sc_i64 out_len) {
    naive_body<sc_u64>(x, w, y, C, L, K, pad, out_len);
}

// ============================================================================ constant
// naive with the taps in __constant__ memory: every thread of a warp reads the same w[j] (broadcast).
template <typename T>
__device__ __forceinline__ void constant_body(const T* __restrict__ x, T* __restrict__ y, int C, sc_i64 L, int K,
                                              sc_i64 pad, sc_i64 out_len) {
    const sc_i64 n = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (n >= out_len) return;
    const sc_i64 base = n - pad;
    int jlo, jhi;
    sc_tap_range(base, L, K, jlo, jhi);
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const T* xc = x + (sc_i64)c * L;
        T acc = T(0);
        for (int j = jlo; j < jhi; ++j) acc += sc_ctap<T>(j) * xc[base + j];
        y[(sc_i64)c * out_len + n] = acc;
    }
}

extern "C" __global__ void conv1d_constant_f32(const float* x, float* y, int C, sc_i64 L, int K, sc_i64 pad,
                                               sc_i64 out_len) {
    constant_body<float>(x, y, C, L, K, pad, out_len);
}
extern "C" __global__ void conv1d_constant_f64(const double* x, double* y, int C, sc_i64 L, int K, sc_i64 pad,
                                               sc_i64 out_len) {
    constant_body<double>(x, y, C, L, K, pad, out_len);
}

// ============================================================================ shared
// Block b owns outputs [n0, n0 + B). For taps [j0, j0 + kc) it needs inputs x[n0 - pad + j0 + q],
// q in [0, B + kc - 1): the tile plus a halo of kc - 1 on the right. Dynamic shared memory:
//   sx[B + KCH - 1] inputs, then sw[KCH] taps; (B + 2*KCH - 1) * sizeof(T) bytes.
template <typename T, int KCH>
__device__ __forceinline__ void shared_body(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                            int C, sc_i64 L, int K, sc_i64 pad, sc_i64 out_len) {
    extern __shared__ double sc_smem_d[];  // double-typed for 8-byte alignment
    T* sx = reinterpret_cast<T*>(sc_smem_d);
    const int B = blockDim.x, t = threadIdx.x;
    T* sw = sx + B + KCH - 1;
    const sc_i64 n0 = (sc_i64)blockIdx.x * B;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const T* xc = x + (sc_i64)c * L;
        T acc = T(0);
        for (int j0 = 0; j0 < K; j0 += KCH) {
            const int kc = min(KCH, K - j0);
            __syncthreads();  // everyone is done reading the previous chunk / channel
            for (int q = t; q < B + kc - 1; q += B) sx[q] = sc_load_or_zero(xc, n0 - pad + j0 + q, L);
            for (int q = t; q < kc; q += B) sw[q] = w[j0 + q];
            __syncthreads();
            for (int j = 0; j < kc; ++j) acc += sw[j] * sx[t + j];  // consecutive threads, consecutive banks
        }
        if (n0 + t < out_len) y[(sc_i64)c * out_len + n0 + t] = acc;
    }
}

extern "C" __global__ void conv1d_shared_f32(const float* x, const float* w, float* y, int C, sc_i64 L, int K,
                                             sc_i64 pad, sc_i64 out_len) {
    shared_body<float, SIGCONV_SHARED_KCH_F32>(x, w, y, C, L, K, pad, out_len);
}
extern "C" __global__ void conv1d_shared_f64(const double* x, const double* w, double* y, int C, sc_i64 L, int K,
                                             sc_i64 pad, sc_i64 out_len) {
    shared_body<double, SIGCONV_SHARED_KCH_F64>(x, w, y, C, L, K, pad, out_len);
}

// ============================================================================ l2
// Only the core tile x[n0 - pad + q], q in [0, B), in shared memory (B * sizeof(T) bytes); tap j of
// thread t reads q = t + j, from shared memory when q < B, else from global memory (L2-resident halo).
template <typename T>
__device__ __forceinline__ void l2_body(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y,
                                        int C, sc_i64 L, int K, sc_i64 pad, sc_i64 out_len) {
    extern __shared__ double sc_smem_d[];
    T* sx = reinterpret_cast<T*>(sc_smem_d);
    const int B = blockDim.x, t = threadIdx.x;
    const sc_i64 n0 = (sc_i64)blockIdx.x * B;
    const sc_i64 g = n0 - pad;  // global index of sx[0]
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        const T* xc = x + (sc_i64)c * L;
        __syncthreads();  // previous channel's reads are done
        sx[t] = sc_load_or_zero(xc, g + t, L);
        __syncthreads();
        T acc = T(0);
        const int jcore = min(K, B - t);  // taps served from the tile
        for (int j = 0; j < jcore; ++j) acc += __ldg(&w[j]) * sx[t + j];
        for (int j = jcore; j < K; ++j) acc += __ldg(&w[j]) * sc_load_or_zero(xc, g + t + j, L);
        if (n0 + t < out_len) y[(sc_i64)c * out_len + n0 + t] = acc;
    }
}

extern "C" __global__ void conv1d_l2_f32(const float* x, const float* w, float* y, int C, sc_i64 L, int K,
                                         sc_i64 pad, sc_i64 out_len) {
    l2_body<float>(x, w, y, C, L, K, pad, out_len);
}
extern "C" __global__ void conv1d_l2_f64(const double* x, const double* w, double* y, int C, sc_i64 L, int K,
                                         sc_i64 pad, sc_i64 out_len) {
    l2_body<double>(x, w, y, C, L, K, pad, out_len);
}

// ============================================================================ tiled (float32)
// Block of B threads owns T = B*R outputs [n0, n0 + T); thread t owns [n0 + t*R, n0 + t*R + R).
// Logical shared index q holds x[g + q], g = n0 - pad, for q in [0, S) (S from the launcher:
// static K: S = (B-1)*R + 4*NW with NW = ceil((R+K-1)/4); runtime K: S = B*R + 4*ceil(K/4)).
// Physical slot: sc_pad32(q). Thread t reads float4s at q = t*R + 4k (16-byte aligned, never across
// a pad); for R = 8 or 16 the padding spreads a quarter-warp's 8 reads over distinct bank groups.

// Fill s[pad32(q)] = x[g + q] for q in [0, S): float4 loads of the aligned range covering it.
__device__ __forceinline__ void tiled_load(float* s, const float* __restrict__ xc, sc_i64 L, sc_i64 g, int S) {
    const int mis = sc_misalign4(xc, g);  // x[g] sits `mis` floats past a 16-byte boundary
    const sc_i64 ga = g - mis;            // aligned global start, logical q = -mis
    const int NV = (mis + S + 3) >> 2;    // float4s covering [ga, g + S)
    for (int m = threadIdx.x; m < NV; m += blockDim.x) {
        const sc_i64 gi = ga + 4 * (sc_i64)m;
        float4 v;
        if (gi >= 0 && gi + 4 <= L) {
            v = __ldg(reinterpret_cast<const float4*>(xc + gi));
        } else {  // left/right edge: element-wise with the zero padding
            v.x = sc_load_or_zero(xc, gi, L);
            v.y = sc_load_or_zero(xc, gi + 1, L);
            v.z = sc_load_or_zero(xc, gi + 2, L);
            v.w = sc_load_or_zero(xc, gi + 3, L);
        }
        const int q = 4 * m - mis;  // logical index of v.x
        if (mis == 0) {
            // q < S and q % 4 == 0: the slot group lies inside the sc_pad32_words(S) allocation
            *reinterpret_cast<float4*>(&s[sc_pad32(q)]) = v;
        } else {  // unaligned start: shift by scattering the four words
            const float e4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int qe = q + e;
                if (qe >= 0 && qe < S) s[sc_pad32(qe)] = e4[e];
            }
        }
    }
}

__device__ __forceinline__ float4 tiled_lds4(const float* s, int q) {
    return *reinterpret_cast<const float4*>(&s[sc_pad32(q)]);
}

// K known at compile time: every index below is a constant, taps become FFMA constant-bank operands.
template <int K, int R>
__global__ void __launch_bounds__(1024) conv1d_tiled(const float* __restrict__ x, float* __restrict__ y, int C,
                                                     sc_i64 L, sc_i64 pad, sc_i64 out_len, int S) {
    static_assert(R % 4 == 0 && R >= 4, "R must be a multiple of 4");
    static_assert(K >= 1 && K <= 2 * SIGCONV_CONST_TAP_DOUBLES, "K out of the constant buffer");
    extern __shared__ float4 sc_smem4[];
    float* s = reinterpret_cast<float*>(sc_smem4);
    constexpr int NW = (R + K - 1 + 3) / 4;  // float4 reads per thread: its R outputs + K-1 halo
    const sc_i64 n0 = (sc_i64)blockIdx.x * blockDim.x * R;
    const int qb = threadIdx.x * R;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        if (c != (int)blockIdx.y) __syncthreads();  // previous channel's reads are done
        tiled_load(s, x + (sc_i64)c * L, L, n0 - pad, S);
        __syncthreads();
        float acc[R];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = 0.f;
#pragma unroll
        for (int p4 = 0; p4 < NW; ++p4) {
            const float4 v = tiled_lds4(s, qb + 4 * p4);
            const float vv[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; ++e) {
#pragma unroll
                for (int r = 0; r < R; ++r) {
                    const int j = 4 * p4 + e - r;  // input qb + 4*p4 + e feeds output r through tap j
                    if (j >= 0 && j < K) acc[r] = fmaf(sc_ctap<float>(j), vv[e], acc[r]);
                }
            }
        }
        sc_store_outputs<R>(y + (sc_i64)c * out_len, out_len, n0 + qb, acc);
    }
}

// Any K (<= 8192; the launcher zero-pads the taps to a multiple of 4): 4 taps per step, window
// win[i] = s[qb + j0 + i] for i < R + 4, slid by 4 each step.
template <int R>
__global__ void __launch_bounds__(1024) conv1d_tiled_rt(const float* __restrict__ x, float* __restrict__ y, int C,
                                                        sc_i64 L, int K, sc_i64 pad, sc_i64 out_len, int S) {
    static_assert(R % 4 == 0 && R >= 4, "R must be a multiple of 4");
    extern __shared__ float4 sc_smem4[];
    float* s = reinterpret_cast<float*>(sc_smem4);
    const sc_i64 n0 = (sc_i64)blockIdx.x * blockDim.x * R;
    const int qb = threadIdx.x * R;
    for (int c = blockIdx.y; c < C; c += gridDim.y) {
        if (c != (int)blockIdx.y) __syncthreads();
        tiled_load(s, x + (sc_i64)c * L, L, n0 - pad, S);
        __syncthreads();
        float acc[R], win[R + 4];
#pragma unroll
        for (int r = 0; r < R; ++r) acc[r] = 0.f;
#pragma unroll
        for (int k = 0; k < R / 4; ++k) {
            const float4 v = tiled_lds4(s, qb + 4 * k);
            win[4 * k] = v.x; win[4 * k + 1] = v.y; win[4 * k + 2] = v.z; win[4 * k + 3] = v.w;
        }
        for (int j0 = 0; j0 < K; j0 += 4) {
            const float4 v = tiled_lds4(s, qb + R + j0);  // next 4 inputs of the window
            win[R] = v.x; win[R + 1] = v.y; win[R + 2] = v.z; win[R + 3] = v.w;
            const float wj[4] = {sc_ctap<float>(j0), sc_ctap<float>(j0 + 1), sc_ctap<float>(j0 + 2),
                                 sc_ctap<float>(j0 + 3)};
#pragma unroll
            for (int e = 0; e < 4; ++e)
#pragma unroll
                for (int r = 0; r < R; ++r) acc[r] = fmaf(wj[e], win[r + e], acc[r]);
#pragma unroll
            for (int i = 0; i < R; ++i) win[i] = win[i + 4];
        }
        sc_store_outputs<R>(y + (sc_i64)c * out_len, out_len, n0 + qb, acc);
    }
}

// ============================================================================ fft helpers
// The bodies and their launch geometry are in overlap_save.cuh (kept apart so a CPU test can run them).
#include "overlap_save.cuh"

extern "C" __global__ void conv1d_os_gather_f32(const float* x, float* segs, int C, sc_i64 L, sc_i64 pad, sc_i64 M,
                                                int N, sc_i64 nseg, int* shift) {
    os_gather_body<float>(x, segs, C, L, pad, M, N, nseg, shift);
}
extern "C" __global__ void conv1d_os_gather_f64(const double* x, double* segs, int C, sc_i64 L, sc_i64 pad,
                                                sc_i64 M, int N, sc_i64 nseg, int* shift) {
    os_gather_body<double>(x, segs, C, L, pad, M, N, nseg, shift);
}

extern "C" __global__ void conv1d_os_rescale_f32(float* segs, const int* shift, int C, int N, sc_i64 nseg, int safe) {
    os_rescale_body<float>(segs, shift, C, N, nseg, safe);
}
extern "C" __global__ void conv1d_os_rescale_f64(double* segs, const int* shift, int C, int N, sc_i64 nseg, int safe) {
    os_rescale_body<double>(segs, shift, C, N, nseg, safe);
}

extern "C" __global__ void conv1d_os_cmul_f32(float2* X, const float2* H, sc_i64 rows, int NF) {
    os_cmul_body<float2>(X, H, rows, NF);
}
extern "C" __global__ void conv1d_os_cmul_f64(double2* X, const double2* H, sc_i64 rows, int NF) {
    os_cmul_body<double2>(X, H, rows, NF);
}

extern "C" __global__ void conv1d_os_scatter_f32(const float* Ys, float* y, int C, sc_i64 out_len, sc_i64 M, int N,
                                                 sc_i64 nseg, int K, const int* shift, const int* tap_shift,
                                                 int safe) {
    os_scatter_body<float>(Ys, y, C, out_len, M, N, nseg, K, shift, tap_shift, safe);
}
extern "C" __global__ void conv1d_os_scatter_f64(const double* Ys, double* y, int C, sc_i64 out_len, sc_i64 M,
                                                 int N, sc_i64 nseg, int K, const int* shift, const int* tap_shift,
                                                 int safe) {
    os_scatter_body<double>(Ys, y, C, out_len, M, N, nseg, K, shift, tap_shift, safe);
}

// What the overlap-save launcher would otherwise ask CuPy for (an elementwise kernel each, compiled on a first run):
// filling the segments' exponent slots, and the float32 <-> float64 casts of its small problems (contiguous).
extern "C" __global__ void conv1d_fill_i32(int* p, sc_i64 n, int v) {
    for (sc_i64 i = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (sc_i64)gridDim.x * blockDim.x) p[i] = v;
}
extern "C" __global__ void conv1d_cast_f32_f64(const float* __restrict__ a, double* __restrict__ b, sc_i64 n) {
    for (sc_i64 i = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (sc_i64)gridDim.x * blockDim.x)
        b[i] = (double)a[i];
}
extern "C" __global__ void conv1d_cast_f64_f32(const double* __restrict__ a, float* __restrict__ b, sc_i64 n) {
    for (sc_i64 i = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (sc_i64)gridDim.x * blockDim.x)
        b[i] = (float)a[i];
}

// ============================================================================ fft_fused
#include "fft_fused.cuh"

// ============================================================================ compile check
#ifdef SIGCONV_NVCC_CHECK
// The instantiations the runtime asks for most (sigconv.backends.cuda1d picks R = 8 for K <= 32, else 16).
template __global__ void conv1d_tiled<1, 8>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<2, 8>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<3, 8>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<7, 8>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<24, 8>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<25, 8>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<63, 16>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<64, 16>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled<255, 16>(const float*, float*, int, sc_i64, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled_rt<8>(const float*, float*, int, sc_i64, int, sc_i64, sc_i64, int);
template __global__ void conv1d_tiled_rt<16>(const float*, float*, int, sc_i64, int, sc_i64, sc_i64, int);
// fft_fused: tiles of 1024 to 16384 samples, in one buffer (ONE) and through two; 32768 in one buffer
template __global__ void conv1d_fft_fused<10, true>(const float*, float*, const float4*, const float2*,
                                                const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                const int*, int);
template __global__ void conv1d_fft_fused<10, false>(const float*, float*, const float4*, const float2*,
                                                 const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                 const int*, int);
template __global__ void conv1d_fft_fused<11, true>(const float*, float*, const float4*, const float2*,
                                                const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                const int*, int);
template __global__ void conv1d_fft_fused<11, false>(const float*, float*, const float4*, const float2*,
                                                 const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                 const int*, int);
template __global__ void conv1d_fft_fused<12, true>(const float*, float*, const float4*, const float2*,
                                                const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                const int*, int);
template __global__ void conv1d_fft_fused<12, false>(const float*, float*, const float4*, const float2*,
                                                 const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                 const int*, int);
template __global__ void conv1d_fft_fused<13, true>(const float*, float*, const float4*, const float2*,
                                                const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                const int*, int);
template __global__ void conv1d_fft_fused<13, false>(const float*, float*, const float4*, const float2*,
                                                 const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                 const int*, int);
template __global__ void conv1d_fft_fused<14, true>(const float*, float*, const float4*, const float2*,
                                                const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                const int*, int);
template __global__ void conv1d_fft_fused<14, false>(const float*, float*, const float4*, const float2*,
                                                 const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                 const int*, int);
template __global__ void conv1d_fft_fused_spectrum<10>(const float*, int, int, const float2*, float4*, int*,
                                                      int*);
template __global__ void conv1d_fft_fused_spectrum<11>(const float*, int, int, const float2*, float4*, int*,
                                                      int*);
template __global__ void conv1d_fft_fused_spectrum<12>(const float*, int, int, const float2*, float4*, int*,
                                                      int*);
template __global__ void conv1d_fft_fused_spectrum<13>(const float*, int, int, const float2*, float4*, int*,
                                                      int*);
template __global__ void conv1d_fft_fused_spectrum<14>(const float*, int, int, const float2*, float4*, int*,
                                                      int*);
template __global__ void conv1d_fft_fused<15, true>(const float*, float*, const float4*, const float2*,
                                                const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                const int*, int);
template __global__ void conv1d_fft_fused<15, true, true>(const float*, float*, const float4*, const float2*,
                                                      const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                      const int*, int);
template __global__ void conv1d_fft_fused<15, true, false, true>(const float*, float*, const float4*, const float2*,
                                                             const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                             const int*, int);
template __global__ void conv1d_fft_fused<15, true, true, true>(const float*, float*, const float4*, const float2*,
                                                            const float2*, int, sc_i64, int, sc_i64, sc_i64, sc_i64,
                                                            const int*, int);
template __global__ void conv1d_fft_fused_spectrum<15>(const float*, int, int, const float2*, float4*, int*,
                                                      int*);
#endif
