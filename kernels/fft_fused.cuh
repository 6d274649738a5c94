// fft_fused.cuh: overlap-save convolution in one kernel (float32): a block reads a tile of N input samples once,
// transforms it in shared memory, multiplies by the filter's spectrum, transforms back and writes the tile's valid
// outputs. Nothing but x, y and the small read-only tables (the spectrum, the twiddles) crosses memory; the
// separate passes of the cuFFT overlap-save (gather, forward FFT, product, inverse FFT, scatter) each cross it.
//
// The convolution is conv1d.cu's correlation form, y[c, n] = sum_{j<K} w[j] x[c, n + j - pad]. With N = 2^LOGN and
// V = N - K + 1 outputs per tile, tile t of channel c holds x[c, t*V - pad + i] for i < N (zero outside [0, L));
// its circular convolution with h = w reversed, read at i = K-1 + r, is y[c, t*V + r] for r < V.
//
// The real tile is transformed as M = N/2 complex samples z[n] = x[2n] + i x[2n+1] (one complex FFT of half the
// length), unpacked into the real spectrum X[k], k <= M, multiplied by H[k] (the rfft of h divided by N, and by
// 2^tap_shift, as the fft variant's spectrum: sigconv/backends/overlap_save.py) and packed again so that the
// inverse complex FFT gives y[2n] + i y[2n+1]. A thread owns the bins k and M-k of that middle step, so it runs
// in place.
//
// The complex FFTs are Stockham autosort passes (radix 8, then one of radix 2 or 4 for the remaining factor)
// between two shared-memory buffers of M float2 each: any block size works (a thread takes butterflies
// j = tid, tid + T, ...), at 8N bytes of shared memory; between passes the data is swizzled so that no access
// has bank conflicts (ff_swz). Twiddles come from tw[m] = exp(-2 pi i m / N), m < N,
// computed in float64 by the launcher (L1/L2 resident).
//
// Scaling as the fft variant's (overlap_save.cuh, "Scaling"): the block reduces the tile's peak exponent; a
// tile of extreme magnitude (exponent outside [-safe, safe]) is divided by 2^e before the transform and its
// outputs multiplied by 2^e; every output is multiplied by 2^tap_shift[0]. A tile holding inf or NaN is not
// scaled (its outputs are NaN, as an FFT's are).
//
// Launch: grid (tiles, channels), both walked by grid-stride loops (any caps); block: any multiple of 32 up to
// 1024; dynamic shared memory: 16*M + 128 bytes (two buffers and the reduction's 32 slots).
#ifndef SIGCONV_FFT_FUSED_CUH
#define SIGCONV_FFT_FUSED_CUH
#include "common.cuh"
#include "limits.cuh"  // SIGCONV_FFT_FUSED_*_LOGN
#include "overlap_save.cuh"

__device__ __forceinline__ float2 ff_mul(float2 a, float2 b) {
    return make_float2(a.x * b.x - a.y * b.y, a.x * b.y + a.y * b.x);
}
__device__ __forceinline__ float2 ff_add(float2 a, float2 b) { return make_float2(a.x + b.x, a.y + b.y); }
__device__ __forceinline__ float2 ff_sub(float2 a, float2 b) { return make_float2(a.x - b.x, a.y - b.y); }
__device__ __forceinline__ float2 ff_conj(float2 a) { return make_float2(a.x, -a.y); }
// a * (-i) for the forward direction (INV false), a * (+i) for the inverse
template <bool INV> __device__ __forceinline__ float2 ff_mul_mi(float2 a) {
    return INV ? make_float2(-a.y, a.x) : make_float2(a.y, -a.x);
}

// In-register DFTs of 2, 4 and 8 points, exp(-2 pi i / R) for the forward direction, exp(+2 pi i / R) inverse.
template <bool INV> __device__ __forceinline__ void ff_dft2(float2* v) {
    const float2 a = v[0], b = v[1];
    v[0] = ff_add(a, b);
    v[1] = ff_sub(a, b);
}
template <bool INV> __device__ __forceinline__ void ff_dft4(float2& u0, float2& u1, float2& u2, float2& u3) {
    const float2 c0 = ff_add(u0, u2), c1 = ff_sub(u0, u2), c2 = ff_add(u1, u3), c3 = ff_mul_mi<INV>(ff_sub(u1, u3));
    u0 = ff_add(c0, c2);
    u2 = ff_sub(c0, c2);
    u1 = ff_add(c1, c3);
    u3 = ff_sub(c1, c3);
}
template <bool INV> __device__ __forceinline__ void ff_dft4(float2* v) { ff_dft4<INV>(v[0], v[1], v[2], v[3]); }
template <bool INV> __device__ __forceinline__ void ff_dft8(float2* v) {
    const float s = 0.70710678118654752440f;  // 1/sqrt(2)
    float2 a0 = ff_add(v[0], v[4]), a1 = ff_add(v[1], v[5]), a2 = ff_add(v[2], v[6]), a3 = ff_add(v[3], v[7]);
    float2 b0 = ff_sub(v[0], v[4]), b1 = ff_sub(v[1], v[5]), b2 = ff_sub(v[2], v[6]), b3 = ff_sub(v[3], v[7]);
    // b_r *= exp(-+2 pi i r / 8)
    b1 = INV ? make_float2(s * (b1.x - b1.y), s * (b1.x + b1.y)) : make_float2(s * (b1.x + b1.y), s * (b1.y - b1.x));
    b2 = ff_mul_mi<INV>(b2);
    b3 = INV ? make_float2(-s * (b3.x + b3.y), s * (b3.x - b3.y)) : make_float2(s * (b3.y - b3.x), -s * (b3.x + b3.y));
    ff_dft4<INV>(a0, a1, a2, a3);
    ff_dft4<INV>(b0, b1, b2, b3);
    v[0] = a0; v[2] = a1; v[4] = a2; v[6] = a3;
    v[1] = b0; v[3] = b1; v[5] = b2; v[7] = b3;
}
template <int R, bool INV> __device__ __forceinline__ void ff_dft(float2* v) {
    if constexpr (R == 2) ff_dft2<INV>(v);
    else if constexpr (R == 4) ff_dft4<INV>(v);
    else ff_dft8<INV>(v);
}

// Shared-memory layout between the passes of one transform. A pass reads its butterflies' inputs at consecutive j
// (no bank conflicts) but writes them R * NS apart: with NS = 1 (stride 8 float2) a half-warp's 8-byte stores fall
// on two bank pairs, 8-way conflicts, and with NS = 8 on half the pairs. Stored at ff_swz(i) = i ^ ((i >> 3) & 15)
// those writes, and the next pass's reads, are conflict-free: the 16 stores of a half-warp land on 16 distinct
// i mod 16. A transform's input and its result keep the plain layout (the tile's load, the spectrum step, which
// reads k and M-k, and the output's float reads at any offset are conflict-free only there).
__device__ __forceinline__ int ff_swz(int i) { return i ^ ((i >> 3) & 15); }
template <bool SWZ> __device__ __forceinline__ int ff_at(int i) { return SWZ ? ff_swz(i) : i; }

// One Stockham pass of radix R over M points, sub-transforms of length NS done: src -> dst. Butterfly j reads
// src[j + r*M/R], applies the twiddles exp(-+2 pi i r k / (NS R)) (three table reads at most, the other powers by
// products: the table's reads share the L1 with the shared-memory traffic), k = j mod NS, and writes
// dst[(j - k)*R + k + r*NS] (indices through ff_swz where SRC_SWZ / DST_SWZ). tw[m] = exp(-2 pi i m / N);
// N / (NS R) is a whole number (NS R <= M < N).
template <int R, bool INV, int LOGN, int NS, bool SRC_SWZ, bool DST_SWZ>
__device__ __forceinline__ void ff_pass(const float2* __restrict__ src, float2* __restrict__ dst,
                                        const float2* __restrict__ tw) {
    constexpr int N = 1 << LOGN, M = N / 2, STEP = N / (NS * R);
    const int T = (int)blockDim.x, tid = (int)threadIdx.x;
    for (int j = tid; j < M / R; j += T) {
        const int k = j & (NS - 1);
        float2 v[R];
#pragma unroll
        for (int r = 0; r < R; ++r) v[r] = src[ff_at<SRC_SWZ>(j + r * (M / R))];
        if constexpr (NS > 1) {
            // w^r for r < R from the table's w, w^2 and w^4 (R = 8: w^3, w^5, w^6, w^7 one or two products away)
            float2 w[R];
            w[1] = __ldg(tw + k * STEP);
            if constexpr (R >= 4) {
                w[2] = __ldg(tw + 2 * k * STEP);
                w[3] = ff_mul(w[1], w[2]);
            }
            if constexpr (R == 8) {
                w[4] = __ldg(tw + 4 * k * STEP);
                w[5] = ff_mul(w[1], w[4]);
                w[6] = ff_mul(w[2], w[4]);
                w[7] = ff_mul(w[3], w[4]);
            }
#pragma unroll
            for (int r = 1; r < R; ++r) v[r] = ff_mul(v[r], INV ? ff_conj(w[r]) : w[r]);
        }
        ff_dft<R, INV>(v);
        const int base = (j - k) * R + k;
#pragma unroll
        for (int r = 0; r < R; ++r) dst[ff_at<DST_SWZ>(base + r * NS)] = v[r];
    }
    __syncthreads();
}

// The complex FFT (unscaled) of the M = 2^(LOGN-1) points in `a` (plain layout), from sub-transforms of length NS
// on, `b` the second buffer: radix-8 passes, then one of radix 4 or 2 for what remains. Returns the buffer holding
// the result (plain layout); between passes the data is swizzled (ff_swz).
template <bool INV, int LOGN, int NS = 1>
__device__ __forceinline__ float2* ff_fft(float2* a, float2* b, const float2* __restrict__ tw) {
    constexpr int M = 1 << (LOGN - 1);
    constexpr bool FIRST = NS == 1;
    if constexpr (NS * 8 <= M) {
        ff_pass<8, INV, LOGN, NS, !FIRST, (NS * 8 < M)>(a, b, tw);
        return ff_fft<INV, LOGN, NS * 8>(b, a, tw);
    } else if constexpr (NS * 4 == M) {
        ff_pass<4, INV, LOGN, NS, !FIRST, false>(a, b, tw);
        return b;
    } else if constexpr (NS * 2 == M) {
        ff_pass<2, INV, LOGN, NS, !FIRST, false>(a, b, tw);
        return b;
    } else {
        return a;
    }
}

// The tile's exponent, the same in every thread: the maximum of the threads' `e` (os_exponent4's values), red:
// 32 ints of shared memory. Every thread of the block calls it.
__device__ __forceinline__ int ff_block_max(int e, int* red) {
#ifdef SIGCONV_HOST_EMULATION
    for (int d = 16; d; d >>= 1) e = max(e, __shfl_xor_sync(0xffffffffu, e, d));
#else
    e = __reduce_max_sync(0xffffffffu, e);
#endif
    const int tid = (int)threadIdx.x, nw = (int)(blockDim.x + 31) / 32;
    if ((tid & 31) == 0) red[tid >> 5] = e;
    __syncthreads();
    int m = red[0];
    for (int w = 1; w < nw; ++w) m = max(m, red[w]);
    return m;
}

// No __launch_bounds__: with (1024) ptxas held the kernel to 32 registers and spilled 20 bytes; without, it uses 32
// and spills nothing, so every block size up to 1024 launches.
template <int LOGN>
__global__ void conv1d_fft_fused(const float* __restrict__ x, float* __restrict__ y, const float2* __restrict__ H,
                                 const float2* __restrict__ tw, int C, sc_i64 L, int K, sc_i64 pad, sc_i64 out_len,
                                 sc_i64 ntiles, const int* __restrict__ tap_shift, int safe) {
    static_assert(LOGN >= SIGCONV_FFT_FUSED_MIN_LOGN && LOGN <= SIGCONV_FFT_FUSED_MAX_LOGN, "tile length");
    constexpr int N = 1 << LOGN, M = N / 2;
    extern __shared__ float4 sc_smem4[];
    float2* const buf0 = reinterpret_cast<float2*>(sc_smem4);
    float2* const buf1 = buf0 + M;
    int* red = reinterpret_cast<int*>(buf1 + M);
    const int T = (int)blockDim.x, tid = (int)threadIdx.x;
    const sc_i64 V = N - K + 1;
    const int et = tap_shift ? tap_shift[0] : 0;
    for (int c = (int)blockIdx.y; c < C; c += (int)gridDim.y) {
        const float* xc = x + (sc_i64)c * L;
        float* yc = y + (sc_i64)c * out_len;
        for (sc_i64 t = blockIdx.x; t < ntiles; t += gridDim.x) {
            // 1. the tile, packed in pairs, and its peak exponent
            const sc_i64 s0 = t * V - pad;
            int e = SC_OS_NO_PEAK;
            for (int n = tid; n < M; n += T) {
                const sc_i64 s = s0 + 2 * (sc_i64)n;
                float a, b;
                if (s >= 0 && s + 1 < L) {
                    a = xc[s];
                    b = xc[s + 1];
                } else {
                    a = sc_load_or_zero(xc, s, L);
                    b = sc_load_or_zero(xc, s + 1, L);
                }
                buf0[n] = make_float2(a, b);
                e = max(e, os_exponent4<float>(a, b, 0.0f, 0.0f));
            }
            e = ff_block_max(e, red);  // (its barrier also publishes the tile)
            const int es = (e == SC_OS_NO_PEAK || e == SC_OS_NONFINITE || (e >= -safe && e <= safe)) ? 0 : e;
            if (es != 0) {  // extreme magnitude: the tile divided by 2^es
                const OsScale<float> down(-es);
                for (int n = tid; n < M; n += T) buf0[n] = make_float2(down(buf0[n].x), down(buf0[n].y));
                __syncthreads();
            }
            // 2. forward transform
            float2* Z = ff_fft<false, LOGN>(buf0, buf1, tw);
            // 3. unpack the real spectrum, multiply by H, pack for the inverse: bins k and M-k by one thread
            for (int k = tid; k <= M / 2; k += T) {
                const float2 zk = Z[k], zm = Z[(M - k) & (M - 1)];
                const float2 E = make_float2(0.5f * (zk.x + zm.x), 0.5f * (zk.y - zm.y));  // (Z[k] + conj Z[M-k]) / 2
                const float2 D = make_float2(0.5f * (zk.x - zm.x), 0.5f * (zk.y + zm.y));  // (Z[k] - conj Z[M-k]) / 2
                const float2 O = make_float2(D.y, -D.x);                                  // D / i
                const float2 W = __ldg(tw + k);                                            // exp(-2 pi i k / N)
                const float2 WO = ff_mul(W, O);
                const float2 ya = ff_mul(ff_add(E, WO), __ldg(H + k));                    // Y[k]
                const float2 yb = ff_mul(ff_conj(ff_sub(E, WO)), __ldg(H + (M - k)));     // Y[M-k]
                // Zy[k] = A + iB, A = Y[k] + conj Y[M-k], B = (Y[k] - conj Y[M-k]) conj(W)
                const float2 A = ff_add(ya, ff_conj(yb)), B = ff_mul(ff_sub(ya, ff_conj(yb)), ff_conj(W));
                Z[k] = make_float2(A.x - B.y, A.y + B.x);
                if (k != 0 && 2 * k != M) {
                    // Zy[M-k]: the same with the roles swapped; conj(exp(-2 pi i (M-k) / N)) = -W
                    const float2 A2 = ff_add(yb, ff_conj(ya)), B2 = ff_mul(ff_sub(yb, ff_conj(ya)), W);
                    Z[M - k] = make_float2(A2.x + B2.y, A2.y - B2.x);
                }
            }
            __syncthreads();
            // 4. inverse transform (unscaled: H holds the 1/N), y[2n] + i y[2n+1]
            const float* Yr = reinterpret_cast<const float*>(ff_fft<true, LOGN>(Z, Z == buf0 ? buf1 : buf0, tw));
            // 5. the valid outputs
            const int eo = es + et;
            const OsScale<float> up(eo);
            const sc_i64 t0 = t * V;
            const sc_i64 nv = out_len - t0 < V ? out_len - t0 : V;
            for (int r = tid; r < nv; r += T) {
                const float v = Yr[K - 1 + r];
                yc[t0 + r] = eo != 0 ? up(v) : v;
            }
            __syncthreads();  // the buffers are the next tile's
        }
    }
}

#endif  // SIGCONV_FFT_FUSED_CUH
