// conv1d_ffa.cu: the 1-D correlation of kernels/conv1d.cu's contract (float32),
//     y[c, n] = sum_{j<K} w[j] * x[c, n + j - pad],   0 <= n < out_len,   x = 0 outside [0, L)
// through a fast FIR algorithm: two nested levels of the 2-parallel Karatsuba split, so that four outputs cost nine
// sub-filters of K/4 taps (9K/4 multiply-adds) instead of 4K: about 0.56 K multiply-adds per output instead of K, for
// filters of a few dozen taps and more, whose direct sum is bound by the FMA pipe rather than by memory.
//
// The split, in correlation form (Z = A * U means Z[m] = sum_i A[i] U[m + i]; S shifts: (S U)[m] = U[m + 1]):
// with A0[i] = A[2i], A1[i] = A[2i + 1], U0[m] = U[2m], U1[m] = U[2m + 1],
//     Zp = A0 * U0,   Zq = A1 * U1,   Zm = (A0 + A1) * (U1 + S U0)
//     Z[2m] = Zp[m] + Zq[m],   Z[2m + 1] = Zm[m] - Zp[m + 1] - Zq[m].
// Level one splits w * x into P = W0 * X0, Q = W1 * X1, M = (W0 + W1) * (X1 + S X0); level two splits each of
// those again. With the four inputs of quarter position k written a_k b_k c_k d_k (x[4k] .. x[4k + 3]) the nine
// sub-filters' input streams are
//     P: a_k, c_k, c_k + a_{k+1}        Q: b_k, d_k, d_k + b_{k+1}
//     M: b_k + c_k, d_k + a_{k+1}, d_k + a_{k+1} + b_{k+1} + c_{k+1}
// and their taps (the launcher's conv1d_ffa_taps, from w' = w shifted by s zeros and zero-padded to 4 KQ taps)
//     P: w'[4i], w'[4i+2], w'[4i] + w'[4i+2]      Q: w'[4i+1], w'[4i+3], w'[4i+1] + w'[4i+3]
//     M: w'[4i] + w'[4i+1], w'[4i+2] + w'[4i+3], the sum of all four.
//
// Launch (sigconv.backends.cuda1d.ffa_geometry, ffa_launches): B threads, R = 4 RQ outputs per thread, tiles of
// T = B R outputs, each block walking several tiles. The launcher shifts the taps by s (0..3) zeros so that a tile's
// first input, x[c, n0 - pad - s], lies on a 16-byte boundary: tiles are copied with aligned 16-byte copies only. Channels whose rows start at different
// alignments (L not a multiple of 4) are launched apart, one launch per class (c0, c0 + cstep, ...).
// Shared memory: logical q in [0, S) holds x[c, g + q], g = n0 - pad - s, S = B R + 4 (KQ + 1); physical slot
// q + 4 floor(q / R), so that thread t's float4 at q = tR + 4p is at t (R + 4) + 4p + 4 floor(4p / R): a compile-time
// offset from the thread's base, and a quarter-warp's eight reads fall in distinct bank groups (R + 4 words apart).
//
// Compile alone (register and spill report):
//   nvcc -std=c++17 -arch=sm_90 -cubin -Xptxas -v -DSIGCONV_NVCC_CHECK -o /dev/null kernels/conv1d_ffa.cu
#include "common.cuh"
#include "limits.cuh"  // SIGCONV_FFA_MAX_KQ
#include "async_copy.cuh"

// The nine sub-filters' taps, sub-filter j at [j * KQ, (j + 1) * KQ); uploaded by the launcher before each launch.
__constant__ float c_ffa_taps[9 * SIGCONV_FFA_MAX_KQ];

// The nine tap sets of w (K taps, correlation form) shifted by s zeros, zero-padded to 4 KQ: one thread per entry.
extern "C" __global__ void conv1d_ffa_taps(const float* __restrict__ w, int K, int s, int KQ, float* __restrict__ t) {
    const int e = blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= 9 * KQ) return;
    const int j = e / KQ, i = e - j * KQ;
    float v[4];
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int k = 4 * i + r - s;  // w'[4i + r] = w[4i + r - s]
        v[r] = (k >= 0 && k < K) ? w[k] : 0.f;
    }
    const float sub[9] = {v[0], v[2], v[0] + v[2], v[1], v[3], v[1] + v[3],
                          v[0] + v[1], v[2] + v[3], (v[0] + v[1]) + (v[2] + v[3])};
    t[e] = sub[j];
}

// Physical shared-memory slot of logical index q (padding of 4 words after every R), and the words a buffer of S
// logical floats spans (sigconv.backends.cuda1d.ffa_geometry allocates two).
template <int R>
__device__ __forceinline__ int ffa_slot(int q) { return q + 4 * (q / R); }
template <int R>
__device__ __forceinline__ int ffa_words(int S) { return S + 4 * ((S + R - 1) / R); }

// Start copying x[c, g + q] into buf[ffa_slot(q)] for q in [0, S) (S a multiple of 4, x + g 16-byte aligned): cp.async
// for the float4s inside [0, L) or wholly outside it (zero fill), element-wise for the two that straddle an end. A
// tile inside the signal (all but the first and the last) takes the first branch only.
template <int R>
__device__ __forceinline__ void ffa_fetch(float* buf, const float* __restrict__ xc, sc_i64 L, sc_i64 g, int S) {
    if (g >= 0 && g + S <= L) {
        const float* src = xc + g;
        for (int m = threadIdx.x; m < (S >> 2); m += blockDim.x) cp_async16(&buf[ffa_slot<R>(4 * m)], src + 4 * m, 16);
        return;
    }
    for (int m = threadIdx.x; m < (S >> 2); m += blockDim.x) {
        const sc_i64 gi = g + 4 * (sc_i64)m;
        float* d = &buf[ffa_slot<R>(4 * m)];
        if (gi >= 0 && gi + 4 <= L) {
            cp_async16(d, xc + gi, 16);
        } else if (gi + 4 <= 0 || gi >= L) {
            cp_async16(d, xc, 0);  // nothing read: sixteen zero bytes
        } else {
#pragma unroll
            for (int e = 0; e < 4; ++e) d[e] = sc_load_or_zero(xc, gi + e, L);
        }
    }
}

// Store a tile's T outputs from buf[ffa_slot(q)] to y[c, n0 + q], a warp's float4 stores covering 512 contiguous bytes
// where the row is 16-byte aligned; up to out_len.
template <int R>
__device__ __forceinline__ void ffa_store(const float* buf, float* __restrict__ yc, sc_i64 out_len, sc_i64 n0, int T,
                                          bool vec) {
    if (vec && n0 + T <= out_len) {
        float* dst = yc + n0;
        for (int m = threadIdx.x; m < (T >> 2); m += blockDim.x)
            *reinterpret_cast<float4*>(dst + 4 * m) = *reinterpret_cast<const float4*>(&buf[ffa_slot<R>(4 * m)]);
        return;
    }
    for (int m = threadIdx.x; m < (T >> 2); m += blockDim.x) {
        const sc_i64 n = n0 + 4 * (sc_i64)m;
        if (n >= out_len) break;
        const float4 v = *reinterpret_cast<const float4*>(&buf[ffa_slot<R>(4 * m)]);
        if (vec && n + 4 <= out_len) {
            *reinterpret_cast<float4*>(yc + n) = v;
        } else {
            const float e4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
            for (int e = 0; e < 4; ++e)
                if (n + e < out_len) yc[n + e] = e4[e];
        }
    }
}

// One tile's R outputs of this thread from its window of buf (thread t's float4 p at t (R + 4) + 4p + 4 floor(4p / R)).
template <int KQ, int RQ>
__device__ __forceinline__ void ffa_tile(const float* buf, float (&out)[4 * RQ]) {
    constexpr int R = 4 * RQ;
    constexpr int NP = RQ + KQ;  // quarter positions a thread reads (plus one group of look-ahead)
    const float* sp = buf + threadIdx.x * (R + 4);
    // accumulators of the nine sub-filters; Pp, Pq, Qp and Mp also at quarter position RQ (the odd outputs
    // need Zp[m + 1], and y[4k + 3] needs P[2k + 2])
    float pp[RQ + 1], pq[RQ + 1], pm[RQ], qp[RQ + 1], qq[RQ], qm[RQ], mp[RQ + 1], mq[RQ], mm[RQ];
#pragma unroll
    for (int k = 0; k <= RQ; ++k) {
        pp[k] = pq[k] = qp[k] = mp[k] = 0.f;
        if (k < RQ) pm[k] = qq[k] = qm[k] = mq[k] = mm[k] = 0.f;
    }
    float4 cur = *reinterpret_cast<const float4*>(sp);
    float bc = cur.y + cur.z;  // M's first stream at the current position
#pragma unroll
    for (int p = 0; p < NP; ++p) {
        const float4 nxt = *reinterpret_cast<const float4*>(sp + 4 * (p + 1) + 4 * ((4 * (p + 1)) / R));
        const float bc1 = nxt.y + nxt.z;
        const float da1 = cur.w + nxt.x;
        const float u[9] = {cur.x, cur.z, cur.z + nxt.x, cur.y, cur.w, cur.w + nxt.y, bc, da1, da1 + bc1};
        // sub-filter j's output k takes tap p - k of input position p
#define SC_FFA_ACC(acc, j, n)                                                        \
    _Pragma("unroll") for (int k = 0; k < (n); ++k) {                                \
        const int i = p - k;                                                         \
        if (i >= 0 && i < KQ) acc[k] = fmaf(c_ffa_taps[(j) * KQ + i], u[j], acc[k]); \
    }
        SC_FFA_ACC(pp, 0, RQ + 1) SC_FFA_ACC(pq, 1, RQ + 1) SC_FFA_ACC(pm, 2, RQ)
        SC_FFA_ACC(qp, 3, RQ + 1) SC_FFA_ACC(qq, 4, RQ) SC_FFA_ACC(qm, 5, RQ)
        SC_FFA_ACC(mp, 6, RQ + 1) SC_FFA_ACC(mq, 7, RQ) SC_FFA_ACC(mm, 8, RQ)
#undef SC_FFA_ACC
        cur = nxt;
        bc = bc1;
    }
    // the two levels of recombination: P, Q, M at half positions 2k, 2k + 1, 2k + 2, then four outputs
#pragma unroll
    for (int k = 0; k < RQ; ++k) {
        const float pe = pp[k] + pq[k], po = pm[k] - pp[k + 1] - pq[k], pn = pp[k + 1] + pq[k + 1];
        const float qe = qp[k] + qq[k], qo = qm[k] - qp[k + 1] - qq[k];
        const float me = mp[k] + mq[k], mo = mm[k] - mp[k + 1] - mq[k];
        out[4 * k] = pe + qe;
        out[4 * k + 1] = me - po - qe;
        out[4 * k + 2] = po + qo;
        out[4 * k + 3] = mo - pn - qo;
    }
}

// Blocks walk the tiles of their channel with a stride of gridDim.x, the next tile's input copied (cp.async) into the
// second buffer while the current one is computed. The outputs go through the current buffer, so that a warp's
// stores cover 512 contiguous bytes. Three barriers a tile: the copies landed (and the other buffer's outputs stored),
// the inputs read, the outputs staged.
template <int KQ, int RQ, int MAXT>
__global__ void __launch_bounds__(MAXT) conv1d_ffa(const float* __restrict__ x, float* __restrict__ y, int C, int c0,
                                                   int cstep, sc_i64 L, sc_i64 start, sc_i64 out_len, int S,
                                                   int ntiles) {
    static_assert(KQ >= 1 && KQ <= SIGCONV_FFA_MAX_KQ, "KQ out of the constant buffer");
    static_assert(RQ >= 2 && RQ % 2 == 0, "RQ even: a thread's window starts R + 4 = 4 (RQ + 1) words after the last, "
                                          "an odd number of float4s, so a quarter-warp's reads hit distinct banks");
    constexpr int R = 4 * RQ;
    extern __shared__ float4 sc_smem4[];
    float* const buf0 = reinterpret_cast<float*>(sc_smem4);
    const int words = ffa_words<R>(S);  // the second buffer's offset
    const int T = blockDim.x * R;  // outputs per tile
    for (int c = c0 + cstep * (int)blockIdx.y; c < C; c += cstep * (int)gridDim.y) {
        const float* __restrict__ xc = x + (sc_i64)c * L;
        float* __restrict__ yc = y + (sc_i64)c * out_len;
        const bool vec = sc_aligned16(yc);
        int tile = blockIdx.x, cur = 0;
        __syncthreads();  // the previous channel's last stores have read their buffer
        ffa_fetch<R>(buf0, xc, L, (sc_i64)tile * T + start, S);
        cp_async_commit();
        for (; tile < ntiles; tile += gridDim.x, cur ^= 1) {
            cp_async_wait_all();
            __syncthreads();  // this tile's copies have landed, and the last tile's stores have read the other buffer
            const int next = tile + gridDim.x;
            if (next < ntiles) ffa_fetch<R>(buf0 + (cur ^ 1) * words, xc, L, (sc_i64)next * T + start, S);
            cp_async_commit();
            float* const bc = buf0 + cur * words;
            float out[R];
            ffa_tile<KQ, RQ>(bc, out);
            __syncthreads();  // the tile's inputs are read: its buffer takes the outputs
            float* ob = bc + threadIdx.x * (R + 4);
#pragma unroll
            for (int k = 0; k < RQ; ++k)
                *reinterpret_cast<float4*>(ob + 4 * k) = make_float4(out[4 * k], out[4 * k + 1], out[4 * k + 2],
                                                                     out[4 * k + 3]);
            __syncthreads();
            ffa_store<R>(bc, yc, out_len, (sc_i64)tile * T, T, vec);
        }
        cp_async_wait_all();
    }
}

#ifdef SIGCONV_NVCC_CHECK  // the launcher's shapes (sigconv.backends.cuda1d.ffa_geometry) at short and long filters
template __global__ void conv1d_ffa<1, 8, 256>(const float*, float*, int, int, int, sc_i64, sc_i64, sc_i64, int, int);
template __global__ void conv1d_ffa<16, 8, 256>(const float*, float*, int, int, int, sc_i64, sc_i64, sc_i64, int, int);
template __global__ void conv1d_ffa<1, 4, 512>(const float*, float*, int, int, int, sc_i64, sc_i64, sc_i64, int, int);
template __global__ void conv1d_ffa<17, 4, 512>(const float*, float*, int, int, int, sc_i64, sc_i64, sc_i64, int, int);
template __global__ void conv1d_ffa<32, 4, 512>(const float*, float*, int, int, int, sc_i64, sc_i64, sc_i64, int, int);
template __global__ void conv1d_ffa<16, 2, 1024>(const float*, float*, int, int, int, sc_i64, sc_i64, sc_i64, int, int);
template __global__ void conv1d_ffa<32, 2, 1024>(const float*, float*, int, int, int, sc_i64, sc_i64, sc_i64, int, int);
#endif
