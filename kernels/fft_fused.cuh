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
// length); the middle step unpacks the real spectrum X[k], k <= M, multiplies it by H[k] (the rfft of h divided by N,
// and by 2^tap_shift, as the fft variant's spectrum: sigconv/backends/overlap_save.py; or, where the taps' exponent is
// within +-SIGCONV_FFT_FUSED_FOLD_MAX, not divided by it and a tap shift of 0) and packs it again so that
// the inverse complex FFT gives y[2n] + i y[2n+1]: one linear map of the bins k and M-k (ff_middle). The launcher's
// table holds its coefficients G (16 bytes a bin) on tiles shorter than 2^SIGCONV_FFT_FUSED_H_MIN_LOGN samples, and on
// the longer ones, whose tiles otherwise spend a tenth of their time waiting for G from L2, a pair table of half those
// bytes from which a pair's coefficients take 6 instructions (ff_pair_coefs). A thread owns the bins k and M-k, so the
// step runs in place.
//
// On a block of N/32 threads or more a tile crosses shared memory as few times as it can (ff_tile_one): the first
// pass reads x straight into registers, the middle step rides on the last forward pass, the last inverse pass
// writes y straight from registers. Tiles of 2^SIGCONV_FFT_FUSED_COLS_MIN_LOGN samples and more run ff_tile_cols
// instead: after the first pass each warp (2^14) or pair of warps (2^15) transforms a column of N/32 points on its
// own, so that a tile waits at three barriers of the whole block where ff_tile_one waits at fourteen (on an H200,
// 10-12% faster than ff_tile_one on 2^14 at K = 3001 to 7921, 10-12% on 2^15 at K = 2047 to 8000).
//
// The complex FFTs are Stockham autosort passes (radix 16 first, then radices 4 to 16: ff_bits) over shared-memory
// buffers of M float2, padded with one float2 per 16 (ff_pad) so that no pass has bank conflicts and a butterfly's
// addresses are constant offsets from one base. A block of M/16 = N/32 threads or more holds every butterfly of a
// pass in registers (at most 16 points per thread; its first M/16 threads do the work, with strides that are
// constants, and the others only meet them at the barriers) and runs each pass in place in one buffer: 4.25N bytes
// of shared memory. A smaller block (any block size works: a thread takes butterflies j = tid, tid + T, ...) passes
// between two buffers: 8.5N bytes. Twiddles come from a table computed in float64 by the launcher (L1/L2
// resident, read at consecutive entries: ff_twiddle_count), passed twice: `tw` for the forward transform, `twi`
// for the inverse (the same table; through one pointer the compiler would keep a forward pass's twiddles in
// registers, or spill them, until the inverse pass of the same length, instead of reading them again).
//
// Scaling as the fft variant's (overlap_save.cuh, "Scaling"): the block reduces the tile's peak exponent; a
// tile of extreme magnitude (exponent outside [-safe, safe]) is divided by 2^e before the transform and its
// outputs multiplied by 2^e; every output is multiplied by 2^tap_shift[0] (neither where both are 0). A tile holding
// inf or NaN is not scaled (its outputs are NaN, as an FFT's are). (On the tiles of FF_EARLY_DFT_*, the first
// radix-16 DFT runs on each thread's own scaling and is brought to the tile's after it: the same values.)
//
// Launch: grid (tiles, channels), any caps (block (x, y) takes tiles x, x + gridDim.x, ... of channels y, y + gridDim.y,
// ...; fewer than 2^31 tiles a channel; the longest tile on 512 threads with 8-byte loads, on a grid of one row, walks
// every channel's tiles as one sequence instead);
// block: any multiple of 32 up to 1024 (conv1d_fft_fused<LOGN, ONE>, ONE for M/16 threads or more; tiles of 2^15
// samples, SIGCONV_FFT_FUSED_ONE_MAX_LOGN, only in place: 1024 threads); dynamic shared memory: 8*ff_pad(M) + 128
// bytes for a block of M/16 threads or more (one buffer and the reduction's 32 slots), else 16*ff_pad(M) + 128 (two
// buffers); on the longest tile on 512 threads, 16 + SIGCONV_FFT_FUSED_PREFETCH_ROWS * N/4 bytes more for the prefetch
// of a block's next tile (ff_prefetch_on).
#ifndef SIGCONV_FFT_FUSED_CUH
#define SIGCONV_FFT_FUSED_CUH
#include "common.cuh"
#include "limits.cuh"  // SIGCONV_FFT_FUSED_*_LOGN
#include "overlap_save.cuh"
#include "async_copy.cuh"  // bulk_bar_init, bulk_load, bulk_wait

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

// The multiplies of a butterfly's twiddles fused into the first stage of its DFT (ff_dft_tw, ff_dft4_tw,
// ff_dft32_join): c = t + u w as FMAs (w conjugated for the inverse), and 2 t - c = t - u w from it: four and two
// instructions where a product and a sum and a difference take eight. On an H200 (2026-12-04) ff_dft_tw's were 0.7-1.9%
// faster on the column tile (K = 3001 to 7921), within 1% either way on the others; ff_dft4_tw's and ff_dft32_join's
// 1.3-1.5% on the 32768 tile on 512 threads with ff_wide_columns32's inverse (H100, 2026-12-05).
template <bool INV> __device__ __forceinline__ float2 ff_fma_cw(float2 t, float2 u, float2 w) {
    const float wy = INV ? -w.y : w.y;
    return make_float2(fmaf(u.x, w.x, fmaf(-u.y, wy, t.x)), fmaf(u.x, wy, fmaf(u.y, w.x, t.y)));
}
__device__ __forceinline__ float2 ff_twice_minus(float2 t, float2 c) {
    return make_float2(fmaf(2.0f, t.x, -c.x), fmaf(2.0f, t.y, -c.y));
}
template <bool INV> __device__ __forceinline__ float2 ff_tw(float2 v, float2 w) { return ff_mul(v, INV ? ff_conj(w) : w); }

// A DFT of 4 on u1 w1, u2 w2 and u3 w3 (conjugated for the inverse; W2_MI: w2 = -i, the forward's exp(-2 pi i / 4)),
// the products fused into its first stage (ff_fma_cw): u0 + u2 w2 and u0 - u2 w2 in six instructions, u1 w1 + u3 w3
// and u1 w1 - u3 w3 in ten, where products, sums and differences take eight and twelve.
template <bool INV, bool W2_MI = false>
__device__ __forceinline__ void ff_dft4_tw(float2& u0, float2& u1, float2& u2, float2& u3, float2 w1, float2 w2,
                                           float2 w3) {
    float2 c0, c1;
    if constexpr (W2_MI) {
        const float2 t2 = ff_mul_mi<INV>(u2);
        c0 = ff_add(u0, t2);
        c1 = ff_sub(u0, t2);
    } else {
        c0 = ff_fma_cw<INV>(u0, u2, w2);
        c1 = ff_twice_minus(u0, c0);
    }
    const float2 t1 = ff_tw<INV>(u1, w1);
    const float2 c2 = ff_fma_cw<INV>(t1, u3, w3), c3 = ff_mul_mi<INV>(ff_twice_minus(t1, c2));
    u0 = ff_add(c0, c2);
    u2 = ff_sub(c0, c2);
    u1 = ff_add(c1, c3);
    u3 = ff_sub(c1, c3);
}
// 16 points as 4 x 4: DFTs of 4 over n1 (x[4 n1 + n2]), twiddles exp(-+2 pi i n2 k1 / 16) fused into the DFTs of 4
// over n2 (ff_dft4_tw); X[k1 + 4 k2] comes out at v[4 k1 + k2] and is put back in order.
template <bool INV, bool FIRST = true> __device__ __forceinline__ void ff_dft16(float2* v) {
    const float c1 = 0.92387953251128675613f, s1 = 0.38268343236508977173f, h = 0.70710678118654752440f;
    if constexpr (FIRST) {
#pragma unroll
        for (int n2 = 0; n2 < 4; ++n2) ff_dft4<INV>(v[n2], v[4 + n2], v[8 + n2], v[12 + n2]);
    }
    // exp(-2 pi i m / 16) as (cos, -sin), m = 1, 2, 3, 6, 9 (m = 4: -i)
    const float2 w1 = make_float2(c1, -s1), w2 = make_float2(h, -h), w3 = make_float2(s1, -c1);
    const float2 w6 = make_float2(-h, -h), w9 = make_float2(-c1, s1);
    ff_dft4<INV>(v[0], v[1], v[2], v[3]);
    ff_dft4_tw<INV>(v[4], v[5], v[6], v[7], w1, w2, w3);
    ff_dft4_tw<INV, true>(v[8], v[9], v[10], v[11], w2, w2, w6);
    ff_dft4_tw<INV>(v[12], v[13], v[14], v[15], w3, w6, w9);
    float2 o[16];
#pragma unroll
    for (int k1 = 0; k1 < 4; ++k1)
#pragma unroll
        for (int k2 = 0; k2 < 4; ++k2) o[k1 + 4 * k2] = v[4 * k1 + k2];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = o[i];
}
template <int R, bool INV> __device__ __forceinline__ void ff_dft(float2* v) {
    if constexpr (R == 2) ff_dft2<INV>(v);
    else if constexpr (R == 4) ff_dft4<INV>(v);
    else if constexpr (R == 8) ff_dft8<INV>(v);
    else ff_dft16<INV>(v);
}

// ff_dft16's first DFTs of 4 (over v[n2 + 4 m], m < 4), for column n2, on v[n2 + 4 m] times its twiddle (a, b, c, d
// for m = 0..3; a unread for n2 = 0, where it is 1), the products fused into the first stage (ff_fma_cw).
template <bool INV>
__device__ __forceinline__ void ff_dft16_tw_column(float2* v, int n2, float2 a, float2 b, float2 c, float2 d) {
    const float2 t0 = n2 == 0 ? v[0] : ff_tw<INV>(v[n2], a);
    const float2 c0 = ff_fma_cw<INV>(t0, v[n2 + 8], c), c1 = ff_twice_minus(t0, c0);
    const float2 t1 = ff_tw<INV>(v[n2 + 4], b);
    const float2 c2 = ff_fma_cw<INV>(t1, v[n2 + 12], d);
    const float2 c3 = ff_mul_mi<INV>(ff_twice_minus(t1, c2));
    v[n2] = ff_add(c0, c2);
    v[8 + n2] = ff_sub(c0, c2);
    v[4 + n2] = ff_add(c1, c3);
    v[12 + n2] = ff_sub(c1, c3);
}
// v[r] times w[r] (conjugated for the inverse; w[0] = 1, unread), then the R-point DFT, with the products fused into
// the DFT's first stage (ff_fma_cw): the first stage of a butterfly of a pass with twiddles.
template <int R, bool INV> __device__ __forceinline__ void ff_dft_tw(float2* v, const float2* w) {
    if constexpr (R == 8) {
        const float sq = 0.70710678118654752440f;
        float2 a[4], b[4];
#pragma unroll
        for (int r = 0; r < 4; ++r) {  // a_r = t_r + v_{r+4} w_{r+4}, b_r = 2 t_r - a_r, t_r = v_r w_r (w_0 = 1)
            const float2 t = r == 0 ? v[0] : ff_tw<INV>(v[r], w[r]);
            a[r] = ff_fma_cw<INV>(t, v[r + 4], w[r + 4]);
            b[r] = ff_twice_minus(t, a[r]);
        }
        float2 b1 = b[1], b3 = b[3];
        b1 = INV ? make_float2(sq * (b1.x - b1.y), sq * (b1.x + b1.y)) : make_float2(sq * (b1.x + b1.y), sq * (b1.y - b1.x));
        float2 b2 = ff_mul_mi<INV>(b[2]);
        b3 = INV ? make_float2(-sq * (b3.x + b3.y), sq * (b3.x - b3.y)) : make_float2(sq * (b3.y - b3.x), -sq * (b3.x + b3.y));
        float2 b0 = b[0];
        ff_dft4<INV>(a[0], a[1], a[2], a[3]);
        ff_dft4<INV>(b0, b1, b2, b3);
        v[0] = a[0]; v[2] = a[1]; v[4] = a[2]; v[6] = a[3];
        v[1] = b0; v[3] = b1; v[5] = b2; v[7] = b3;
    } else if constexpr (R == 16) {
#pragma unroll
        for (int n2 = 0; n2 < 4; ++n2) ff_dft16_tw_column<INV>(v, n2, w[n2], w[n2 + 4], w[n2 + 8], w[n2 + 12]);
        ff_dft16<INV, false>(v);
    } else if constexpr (R == 4) {
        float2 a[2], b[2];
#pragma unroll
        for (int r = 0; r < 2; ++r) {
            const float2 t = r == 0 ? v[0] : ff_tw<INV>(v[r], w[r]);
            a[r] = ff_fma_cw<INV>(t, v[r + 2], w[r + 2]);
            b[r] = ff_twice_minus(t, a[r]);
        }
        const float2 c3 = ff_mul_mi<INV>(b[1]);
        v[0] = ff_add(a[0], a[1]);
        v[2] = ff_sub(a[0], a[1]);
        v[1] = ff_add(b[0], c3);
        v[3] = ff_sub(b[0], c3);
    } else {
#pragma unroll
        for (int r = 1; r < R; ++r) v[r] = ff_tw<INV>(v[r], w[r]);
        ff_dft<R, INV>(v);
    }
}

// Shared-memory layout: point i of a transform lives at ff_pad(i) = i + i/16 (a float2 of padding after every 16).
// A pass reads its butterflies' inputs at consecutive j and writes them R * NS apart; through the padding both are
// free of bank conflicts (a half-warp's 16 float2 accesses land on 16 distinct slots mod 16) when the first pass
// has radix 16 (its outputs, 16j + r, go to 17j + r) and every later NS is a multiple of 16. Then a butterfly's R
// addresses are one ff_pad plus constants (immediate offsets, no index arithmetic per point).
__host__ __device__ constexpr int ff_pad(int i) { return i + (i >> 4); }

// The passes of the complex FFT of M = 2^MB points: P = ceil(MB / 4) passes; the first of radix 16, the remaining
// MB - 4 bits spread over the other P - 1 passes as evenly as possible, the larger radices first (2^9: 16 8 4,
// 2^10: 16 8 8, 2^11: 16 16 8, 2^12: 16 16 16, 2^13: 16 8 8 8). Pass p of radix R = 2^bits(p) follows
// sub-transforms of length NS = ns(p).
//
// Twiddles: tw[k] = exp(-2 pi i k / N) for k < M (the real-spectrum step); after them, for each pass p >= 1 in
// order, bits(p) rows of NS entries: row a holds exp(-2 pi i 2^a k / (NS R)), k < NS (w, w^2, w^4, w^8: a
// butterfly reads them at consecutive k, coalesced, and forms the other powers by products). ff_twiddle_count(MB)
// entries in all; sigconv/backends/overlap_save.py (fused_twiddles) builds the same table.
__host__ __device__ constexpr int ff_passes(int MB) { return (MB + 3) / 4; }
__host__ __device__ constexpr int ff_bits(int MB, int p) {
    return p == 0 ? 4 : (MB - 4) / (ff_passes(MB) - 1) + ((p - 1) < (MB - 4) % (ff_passes(MB) - 1) ? 1 : 0);
}
__host__ __device__ constexpr int ff_ns(int MB, int p) {
    int s = 0;
    for (int i = 0; i < p; ++i) s += ff_bits(MB, i);
    return 1 << s;
}
__host__ __device__ constexpr int ff_tw_offset(int MB, int p) {  // where pass p's rows start (p >= 1)
    int o = 1 << MB;
    for (int i = 1; i < p; ++i) o += ff_bits(MB, i) * ff_ns(MB, i);
    return o;
}
__host__ __device__ constexpr int ff_twiddle_count(int MB) { return ff_tw_offset(MB, ff_passes(MB)); }

// The other powers w[r], 0 < r < R, of a butterfly's twiddles from w[1], w[2], w[4] and w[8] (those below R), by
// products; from r = 9 on only (R0 = 9) where w[3] and w[5..7] are formed already (ff_twiddles, as its loads arrive).
template <int R, int R0 = 3> __device__ __forceinline__ void ff_twiddle_powers(float2* w) {
    static_assert(R0 == 3 || R0 == 9, "all the powers, or those from w[8]");
    if constexpr (R >= 4 && R0 == 3) w[3] = ff_mul(w[1], w[2]);
    if constexpr (R >= 8 && R0 == 3) {
        w[5] = ff_mul(w[1], w[4]);
        w[6] = ff_mul(w[2], w[4]);
        w[7] = ff_mul(w[3], w[4]);
    }
    if constexpr (R >= 16) {
#pragma unroll
        for (int r = 9; r < 16; ++r) w[r] = ff_mul(w[r - 8], w[8]);
    }
}
// The twiddles of a butterfly of a Stockham pass of radix R, sub-transforms of length NS done, at k = j mod NS:
// w[r] = exp(-2 pi i r k / (NS R)), 0 < r < R (rows at TWO of the table: w, w^2, w^4, w^8 read, the other powers
// formed by products; the inverse butterfly conjugates them).
template <int R, int NS, int TWO>
__device__ __forceinline__ void ff_twiddles(const float2* __restrict__ tw, int k, float2* w) {
    const float2* t = tw + TWO + k;
    w[1] = __ldg(t);
    if constexpr (R >= 4) {
        w[2] = __ldg(t + NS);
        w[3] = ff_mul(w[1], w[2]);
    }
    if constexpr (R >= 8) {
        w[4] = __ldg(t + 2 * NS);
        w[5] = ff_mul(w[1], w[4]);
        w[6] = ff_mul(w[2], w[4]);
        w[7] = ff_mul(w[3], w[4]);
    }
    if constexpr (R >= 16) {
        w[8] = __ldg(t + 3 * NS);
        ff_twiddle_powers<R, 9>(w);
    }
}
// Butterfly j of a Stockham pass of radix R over M = 2^MB points, sub-transforms of length NS done, with its
// twiddles w (ff_twiddles; unused when NS = 1): reads point j + r M/R of `src`, multiplies it by w[r] (conjugated for
// the inverse) and leaves the R-point DFT in v; it belongs at point (j - k) R + k + r NS, k = j mod NS (ff_store).
template <int R, bool INV, int MB, int NS>
__device__ __forceinline__ void ff_butterfly_w(const float2* __restrict__ src, int j, const float2* w, float2* v) {
    constexpr int M = 1 << MB, B = M / R, SS = ff_pad(B);
    static_assert(B % 16 == 0 && (NS == 1 ? R == 16 : NS % 16 == 0), "ff_pad's offsets need these");
    const float2* s = src + ff_pad(j);
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = s[r * SS];
    if constexpr (NS > 1) ff_dft_tw<R, INV>(v, w);
    else ff_dft<R, INV>(v);
}
// The same with its own twiddles.
template <int R, bool INV, int MB, int NS, int TWO>
__device__ __forceinline__ void ff_butterfly(const float2* __restrict__ src, int j, const float2* __restrict__ tw,
                                             float2* v) {
    float2 w[R];
    if constexpr (NS > 1) ff_twiddles<R, NS, TWO>(tw, j & (NS - 1), w);
    ff_butterfly_w<R, INV, MB, NS>(src, j, w, v);
}
template <int R, int NS>
__device__ __forceinline__ void ff_store(float2* __restrict__ dst, int j, const float2* v) {
    constexpr int DS = ff_pad(NS);
    const int k = j & (NS - 1);
    float2* d = dst + ff_pad((j - k) * R + k);
#pragma unroll
    for (int r = 0; r < R; ++r) d[r * DS] = v[r];
}

// One Stockham pass, src -> dst (padded layout): a thread takes butterflies j = tid, tid + T, ... (any block size).
template <int R, bool INV, int MB, int NS, int TWO>
__device__ __forceinline__ void ff_pass(const float2* __restrict__ src, float2* __restrict__ dst,
                                        const float2* __restrict__ tw) {
    constexpr int B = (1 << MB) / R;
    const int T = (int)blockDim.x, tid = (int)threadIdx.x;
    for (int j = tid; j < B; j += T) {
        float2 v[R];
        ff_butterfly<R, INV, MB, NS, TWO>(src, j, tw, v);
        ff_store<R, NS>(dst, j, v);
    }
    __syncthreads();
}

// The thread's index, read anew in each tile. Straight-line in-place passes let the compiler hoist every address
// that depends on the index alone (the tile's loads, the outputs' stores) out of the tile loop, where they would hold
// some 40 registers for the whole kernel; read here by an instruction it may not move, they are not. (So too a
// butterfly's registers: written under a condition, the values a thread past the last butterfly left undefined
// would stay allocated across the loop; ff_pass_inplace has every thread compute, and only stores under one.)
__device__ __forceinline__ int ff_tid() {
#ifdef SIGCONV_HOST_EMULATION
    return (int)threadIdx.x;
#else
    int t;
    asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
    return t;
#endif
}
// The block's size, read anew where it is used, for the same reason (a count the compiler would otherwise keep in a
// register, or spill, for the whole kernel).
__device__ __forceinline__ int ff_ntid() {
#ifdef SIGCONV_HOST_EMULATION
    return (int)blockDim.x;
#else
    int t;
    asm volatile("mov.u32 %0, %%ntid.x;" : "=r"(t));
    return t;
#endif
}

// The barrier of the columns s and 16 - s of ff_tile_cols, CT threads a column: bar.sync number min(s, 16 - s) of their
// 2 CT threads; columns 0 and 8, each its own partner, meet each other at number 8. (With __syncwarp there, on columns
// of one warp, which orders their lanes all the same, compute-sanitizer's racecheck reports hazards between the last
// column pass's stores and the reads after the block's barrier: it orders accesses across the block's barriers only
// where every warp has passed as many barriers. The number is in a register, so ptxas reserves all 16 of the block's
// barriers: two blocks a multiprocessor still fit.)
template <int CT> __device__ __forceinline__ void ff_pair_sync(int s) {
    const int id = (s & 7) == 0 ? 8 : s < 8 ? s : 16 - s;
#ifdef SIGCONV_HOST_EMULATION
    sc_emu_bar_sync(id, 2 * CT);
#else
    asm volatile("bar.sync %0, %1;" ::"r"(id), "n"(2 * CT) : "memory");
#endif
}
// The barrier of an in-place pass: the block's (CT 0), or that of a column of ff_tile_cols (CT threads): a warp's own
// (CT 32), or, on columns of two warps, their pair's (ff_pair_sync: the partner column's two warps meet there too).
template <int CT> __device__ __forceinline__ void ff_sync() {
    static_assert(CT == 0 || CT == 32 || CT == 64, "a block, a warp or a pair of columns of two warps");
    if constexpr (CT == 0) __syncthreads();
    else if constexpr (CT == 32) __syncwarp();
    else ff_pair_sync<CT>((int)((unsigned)ff_tid() / CT));
}
// The conjugate transpose of a forward pass (radix R, NS, twiddle rows at TWO), for an inverse transform that runs
// the forward passes backwards (ff_tile_cols): butterfly j reads the R points the forward butterfly writes,
// (j - k) R + k + r NS with k = j mod NS (ff_store's places), takes their inverse R-point DFT and multiplies point r by
// conj w[r] (ff_twiddles; unused when NS = 1): point r belongs where the forward butterfly reads, j + r M/R
// (ff_store_back). The same shared-memory accesses as the forward pass's, the other way round: free of bank conflicts
// alike.
template <int R, int NS>
__device__ __forceinline__ void ff_butterfly_back_w(const float2* __restrict__ src, int j, const float2* w, float2* v) {
    constexpr int DS = ff_pad(NS);
    const float2* const s = src + ff_pad((j - (j & (NS - 1))) * R + (j & (NS - 1)));
#pragma unroll
    for (int r = 0; r < R; ++r) v[r] = s[r * DS];
    ff_dft<R, true>(v);
    if constexpr (NS > 1) {
#pragma unroll
        for (int r = 1; r < R; ++r) v[r] = ff_mul(v[r], ff_conj(w[r]));
    }
}
// The transposed butterfly j on its R points already in registers (v), its twiddles (k = j mod NS) from the table.
template <int R, int NS, int TWO>
__device__ __forceinline__ void ff_back_regs(const float2* __restrict__ tw, int j, float2* v) {
    ff_dft<R, true>(v);
    if constexpr (NS > 1) {
        float2 w[R];
        ff_twiddles<R, NS, TWO>(tw, j & (NS - 1), w);
#pragma unroll
        for (int r = 1; r < R; ++r) v[r] = ff_mul(v[r], ff_conj(w[r]));
    }
}
template <int R, int MB>
__device__ __forceinline__ void ff_store_back(float2* __restrict__ dst, int j, const float2* v) {
    constexpr int SS = ff_pad((1 << MB) / R);
    float2* const d = dst + ff_pad(j);
#pragma unroll
    for (int r = 0; r < R; ++r) d[r * SS] = v[r];
}

// The same pass in place, for blocks of B0 = M/16 threads or more: thread jt < B0 computes its Q = 16/R butterflies
// j = jt + q B0 (all there are) in registers, and stores them after a barrier, when every point has been read. One
// buffer instead of two (half the shared memory) for one more barrier per pass. The strides are constants: where
// B0 is a multiple of NS the Q butterflies share their twiddles (k = jt mod NS), computed once. A thread past B0
// (on false; jt = tid mod B0) computes thread jt's butterflies all the same, so that its registers are defined on
// every path (see ff_tid), and stores nothing. (CT: a column of ff_tile_cols, of CT = B0 threads, jt the thread's place
// in it, ff_sync<CT>. BACK: the pass transposed, ff_butterfly_back_w and ff_store_back; INV unread.)
template <int R, bool INV, int MB, int NS, int TWO, int CT = 0, bool BACK = false>
__device__ __forceinline__ void ff_pass_inplace(float2* buf, const float2* __restrict__ tw, int jt, bool on) {
    constexpr int B0 = (1 << MB) / 16, Q = 16 / R;
    static_assert(CT == 0 || CT == B0, "a column's threads: one a butterfly of 16");
    float2 v[Q][R];
    if constexpr (NS > 1 && Q > 1 && B0 % NS == 0) {
        float2 w[R];
        ff_twiddles<R, NS, TWO>(tw, jt & (NS - 1), w);
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            if constexpr (BACK) ff_butterfly_back_w<R, NS>(buf, jt + q * B0, w, v[q]);
            else ff_butterfly_w<R, INV, MB, NS>(buf, jt + q * B0, w, v[q]);
        }
    } else {
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            float2 w[R];
            if constexpr (NS > 1) ff_twiddles<R, NS, TWO>(tw, (jt + q * B0) & (NS - 1), w);
            if constexpr (BACK) ff_butterfly_back_w<R, NS>(buf, jt + q * B0, w, v[q]);
            else ff_butterfly_w<R, INV, MB, NS>(buf, jt + q * B0, w, v[q]);
        }
    }
    ff_sync<CT>();
    if (on) {
#pragma unroll
        for (int q = 0; q < Q; ++q) {
            if constexpr (BACK) ff_store_back<R, MB>(buf, jt + q * B0, v[q]);
            else ff_store<R, NS>(buf, jt + q * B0, v[q]);
        }
    }
    ff_sync<CT>();
}

// The complex FFT (unscaled) of the M = 2^MB points in `a`, from pass P on, `b` the second buffer (both padded).
// Returns the buffer holding the result.
template <bool INV, int MB, int P = 0>
__device__ __forceinline__ float2* ff_fft(float2* a, float2* b, const float2* __restrict__ tw) {
    if constexpr (P == ff_passes(MB)) {
        return a;
    } else {
        ff_pass<1 << ff_bits(MB, P), INV, MB, ff_ns(MB, P), (P == 0 ? 0 : ff_tw_offset(MB, P))>(a, b, tw);
        return ff_fft<INV, MB, P + 1>(b, a, tw);
    }
}
// The block's maximum of the threads' `e`, the same in every thread (the tile's peak), red:
// 32 ints of shared memory. Every thread of the block calls it. (ANEW: the thread's index read anew, ff_tid, so that
// its slot's address is not held in a register across the tile loop: ff_tile_wide's.)
template <bool ANEW = false> __device__ __forceinline__ int ff_block_max(int e, int* red) {
#ifdef SIGCONV_HOST_EMULATION
    for (int d = 16; d; d >>= 1) e = max(e, __shfl_xor_sync(0xffffffffu, e, d));
#else
    e = __reduce_max_sync(0xffffffffu, e);
#endif
    const int tid = ANEW ? ff_tid() : (int)threadIdx.x, nw = (ff_ntid() + 31) / 32;
    if ((tid & 31) == 0) red[tid >> 5] = e;
    __syncthreads();
    int m = red[0];
    for (int w = 1; w < nw; ++w) m = max(m, red[w]);
    return m;
}

// Loads each thread issues before it stores any, in the two-buffer path's tile load and output loop (their
// latencies overlap).
#define FF_LOADS 8

// The longest tile (log2 of its samples) whose in-place path reads a tile lying wholly inside x without a predicate
// per sample: on an H200 (2026-12-04) that is 1-2% faster on tiles of 4096 and 8192 samples (K = 255 to 2047), level
// on 16384 and 1% slower on 32768 (both then ff_tile_one), where the other code takes the registers.
#ifndef FF_PLAIN_LOADS_MAX_LOGN  // (an experiment's define first: benchmarks/fused_ab.py --extra)
#define FF_PLAIN_LOADS_MAX_LOGN 13
#endif

// FF_TIMELINE (benchmarks/fused_timeline.py, a measurement build): thread 0 of the block records clock64 at six points
// of each ff_tile_cols tile (its start, its own loads arrived, the columns' start and end, its outputs computed, the
// tile's end after a barrier of its own), its multiprocessor and the global timer at the start and the end, in
// ff_timeline (a row of 9 per pair c * ntiles + t below FF_TIMELINE). Without it nothing of this is compiled. (Only
// ff_tile_cols's launches set the row; ff_first_pass's mark is a column tile's.)
#ifdef FF_TIMELINE
__device__ unsigned long long ff_timeline[FF_TIMELINE * 9];
static __shared__ long long ff_tl_row;
template <int I> __device__ __forceinline__ void ff_mark(int dep = 0) {  // (dep: a value the clock is read after)
    unsigned long long t;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(t) : "r"(dep));
    if (threadIdx.x == 0 && (unsigned long long)ff_tl_row < FF_TIMELINE) ff_timeline[ff_tl_row * 9 + I] = t;
}
#define FF_MARK(I, DEP) ff_mark<I>(DEP)
__device__ __forceinline__ void ff_tl_begin(sc_i64 w) {
    if (threadIdx.x == 0) {
        ff_tl_row = w;
        unsigned smid;
        unsigned long long gt;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        if (w < FF_TIMELINE) {
            ff_timeline[w * 9 + 6] = smid;
            ff_timeline[w * 9 + 7] = gt;
        }
    }
    ff_mark<0>();
}
__device__ __forceinline__ void ff_tl_end() {
    __syncthreads();
    ff_mark<5>();
    const sc_i64 w = ff_tl_row;
    if (threadIdx.x == 0 && w < FF_TIMELINE) {
        unsigned long long gt;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(gt));
        ff_timeline[w * 9 + 8] = gt;
    }
}
#else
#define FF_MARK(I, DEP)
__device__ __forceinline__ void ff_tl_begin(sc_i64) {}
__device__ __forceinline__ void ff_tl_end() {}
#endif

// The tiles (log2 of their samples) whose in-place path computes its first DFT before the barrier of the tile's peak
// (ff_tile_one, ff_tile_cols): on an H200 (2026-12-04, three runs) 0.2-0.9% faster on the 8192 tile and 0.7-1.4% on
// 16384 (ff_tile_one), level to 0.5% slower on 4096; 2.3-3.0% faster on 32768 (ff_tile_cols, K = 2047 to 8000; one
// block a multiprocessor, whose warps all wait out the tile's loads at its peak's barrier without it).
#ifndef FF_EARLY_DFT_MIN_LOGN  // (an experiment's define first: benchmarks/fused_ab.py --extra)
#define FF_EARLY_DFT_MIN_LOGN 13
#endif
#ifndef FF_EARLY_DFT_MAX_LOGN  // (an experiment's define first: benchmarks/fused_ab.py --extra)
#define FF_EARLY_DFT_MAX_LOGN 15
#endif

// ff_tile_wide's register cap (its kernel: 512 threads, one block a multiprocessor by its shared memory, so any cap
// up to 128 keeps its occupancy). ptxas takes all 128 uncapped. On an H100 (2026-12-05, benchmarks/fused_ab.py,
// L = 2^26, benchmarks/results/H100-2026-12-05-tuner-wide-registers/) the kernel capped at 104 ran 0.1-3.4% faster
// than uncapped at K = 7921 and 8000 in each of 22 comparisons over five runs (the same code each time; the last
// three runs 0.1-1.2%), at 108 and 112 1.5-2.1%, at 96, 100 and 120 level (+0.9 to -0.6%); no spills at 96 and up. On
// sm_90 only (ptxas spills 4 to 16 bytes at 104 for sm_100 and sm_120, unmeasured there): 0 elsewhere, the kernel's
// bounds of 512 threads as before.
#ifndef FF_WIDE_MAX_REGISTERS  // (an experiment's define first: benchmarks/fused_ab.py --extra)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
#define FF_WIDE_MAX_REGISTERS 104
#else
#define FF_WIDE_MAX_REGISTERS 0
#endif
#endif

// ff_tile_wide's staggered start. Its kernel runs one block a multiprocessor, and every tile of it takes the same
// time: the first wave's blocks start together, and so do the later waves' (each where one before it ends). All
// multiprocessors then read their tiles at once, DRAM-bound (a tile's loads took 3.9 us of 15.9 on an H100 where the
// kernel's DRAM throughput is 40% of peak), and compute together while DRAM idles. Block b < (multiprocessors) of the
// first wave waits (b mod FF_STAGGER_PHASES) * FF_STAGGER_STEP clock cycles before its first tile, so that the
// multiprocessors' load phases are spread over a tile's time (some 31,000 cycles) from then on; only on grids of
// FF_STAGGER_MIN_WAVES waves or more, which the delay (at most 25,000 cycles, some 13 us, on one multiprocessor in six)
// costs little. On an H100 (2026-12-05, benchmarks/fused_ab.py, L = 2^26, against FF_STAGGER_PHASES=1 in the same
// rounds) 7.7-9.1% faster at K = 4800 to 8000 (K = 7921: 0.3658 to 0.3365 ms); 8 phases of 4000 cycles 5.9-9.8%, 4 of
// 8000 5.0-6.2%, 5 of 6000 6.7-8.0%. A tile's loads took 2.26 us instead of 3.94, its columns the same 7.3
// (benchmarks/fused_timeline.py). On sm_90 only (unmeasured elsewhere): 1 phase, no delay. Returns the block's rank:
// on a grid of one block a multiprocessor or fewer (each block several tiles, all starting at once) its place when
// the blocks are ordered by their delay, phase 0's first, so that the blocks that start first (ff_fused_kernel: rank r
// takes items r, r + G, ...) take the tiles of the last partial wave; else b.
#ifndef FF_STAGGER_PHASES  // (an experiment's define first: benchmarks/fused_ab.py --extra)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900
#define FF_STAGGER_PHASES 6
#else
#define FF_STAGGER_PHASES 1
#endif
#endif
#ifndef FF_STAGGER_STEP
#define FF_STAGGER_STEP 5000
#endif
#ifndef FF_STAGGER_MIN_WAVES
#define FF_STAGGER_MIN_WAVES 8
#endif
__device__ __forceinline__ unsigned ff_stagger(unsigned long long total, unsigned b, unsigned long long G) {
#if FF_STAGGER_PHASES > 1 && !defined(SIGCONV_HOST_EMULATION)
    unsigned nsm;
    asm("mov.u32 %0, %%nsmid;" : "=r"(nsm));
    if (total >= (unsigned long long)FF_STAGGER_MIN_WAVES * nsm && b < nsm) {  // (the first wave: b < nsm)
        const unsigned p = b % FF_STAGGER_PHASES;
        unsigned r = b;
        if (G <= nsm) {  // (every block at once, each of several tiles: rank by delay, phase 0's blocks first)
            r = b / FF_STAGGER_PHASES;
            for (unsigned q = 0; q < p; ++q) r += ((unsigned)G - q + FF_STAGGER_PHASES - 1) / FF_STAGGER_PHASES;
        }
        if (p != 0) {
            if (threadIdx.x == 0) {
                const long long s0 = clock64(), d = (long long)FF_STAGGER_STEP * p;
                while (clock64() - s0 < d) {
                }
            }
            __syncthreads();
        }
        return r;
    }
#endif
    return b;
}

// The tile's peak exponent from the block's largest sample bit pattern `mb` (ff_block_max), and the power of two the
// tile is divided by before its transform: 0 unless its magnitude is extreme (outside [-safe, safe]) and finite.
__device__ __forceinline__ int ff_tile_shift(int mb, int safe) {
    const int e = mb >= 0x7f800000 ? SC_OS_NONFINITE
                  : mb == 0        ? SC_OS_NO_PEAK
                                   : os_frexp_exp<float>(__int_as_float(mb));
    return (e == SC_OS_NO_PEAK || e == SC_OS_NONFINITE || (e >= -safe && e <= safe)) ? 0 : e;
}

// The middle step for the bins k and M-k of the half-length spectrum Z (the unpacking of the real spectrum, the
// product with the filter's H and the packing for the inverse transform), as one linear map of Z[k] and Z[M-k]:
//   E = (Z[k] + conj Z[M-k]) / 2, O = (Z[k] - conj Z[M-k]) / 2i, W = exp(-2 pi i k / N):
//   X[k] = E + W O, X[M-k] = conj(E - W O); Y = X H;
//   Zy[k] = A + iB, A = Y[k] + conj Y[M-k], B = (Y[k] - conj Y[M-k]) conj(W)
// comes to Zy[k] = a[k] Z[k] + b[k] conj Z[M-k], with (s = sin, c = cos of 2 pi k / N)
//   a[k] = (1 - s) H[k] + (1 + s) conj H[M-k],   b[k] = i c (H[k] - conj H[M-k]),
// and Zy[M-k] the same with k and M-k swapped. G[k] = (a[k], b[k]) for k < M is the launcher's table
// (fused_coefficients in sigconv/backends/overlap_save.py; conv1d_fft_fused_spectrum on the device): two 16-byte
// loads and 16 FMA-class instructions per pair of bins. zk, zm in place; for a bin that is its own partner (k = 0,
// M/2) ff_middle_self.
__device__ __forceinline__ float2 ff_ab(float4 g, float2 u, float2 v) {  // a u + b conj(v), g = (a, b)
    return make_float2(g.x * u.x - g.y * u.y + g.z * v.x + g.w * v.y, g.x * u.y + g.y * u.x + g.w * v.x - g.z * v.y);
}
__device__ __forceinline__ void ff_middle(float2& zk, float2& zm, float4 gk, float4 gm) {
    const float2 a = zk, b = zm;
    zk = ff_ab(gk, a, b);
    zm = ff_ab(gm, b, a);
}
__device__ __forceinline__ void ff_middle_self(float2& z, float4 g) { z = ff_ab(g, z, z); }
// Whether tiles of 2^LOGN samples read the pair table P (below) rather than G.
__host__ __device__ constexpr bool ff_reads_h(int LOGN) { return LOGN >= SIGCONV_FFT_FUSED_H_MIN_LOGN; }
// Whether tiles of 2^LOGN samples run ff_tile_cols on blocks of N/32 threads or more.
__host__ __device__ constexpr bool ff_cols(int LOGN) { return LOGN >= SIGCONV_FFT_FUSED_COLS_MIN_LOGN; }
// The pair table P of the tiles of ff_reads_h: half of G's bytes, and the coefficients of a pair of bins formed from
// it in 6 instructions. With D = H[k] - conj H[M-k] and S = H[k] + conj H[M-k] (H[M] for k = 0),
//   a[k] = S - s D,  conj a[M-k] = S + s D,  b[k] = i c D,  b[M-k] = i c conj D = -conj b[k]
// (s the same at M-k, c negated), so one float4 (S, D) a pair of bins holds them, given W = exp(-2 pi i k / N) =
// (c, -s). Its place: bin k = s + 16 c' of the split into 16 columns of CM = M/16 points (ff_tile_cols's) with
// c' < CM/2 is the lower bin of its pair (its partner M - k lies in the upper half of column 16 - s, or is M for
// k = 0) and has the pair's entry at s * CM/2 + c' (what a column's threads read is consecutive); bin M/2, its own
// partner, has (S, D) of H[M/2] with itself at M/2 (of the launcher's M float4: fused_table in
// sigconv/backends/overlap_save.py lays it out the same; conv1d_fft_fused_spectrum on the device).
template <int LOGN> __host__ __device__ constexpr bool ff_pair_low(int k) {  // (0 <= k < M)
    constexpr int M = 1 << (LOGN - 1), CM = M / 16;
    return (k >> 4) < CM / 2;
}
template <int LOGN> __host__ __device__ constexpr int ff_pair_index(int k) {  // (k lower, or k = M/2)
    constexpr int M = 1 << (LOGN - 1), CM = M / 16;
    return 2 * k == M ? M / 2 : (k & 15) * (CM / 2) + (k >> 4);
}
// The coefficients G[k] = (a[k], b[k]) and G[M-k] of the pair whose entry is p = (S, D), W = exp(-2 pi i k / N).
__device__ __forceinline__ void ff_pair_coefs(float4 p, float2 W, float4& gk, float4& gm) {
    const float c = W.x, s = -W.y;
    const float bx = -c * p.w, by = c * p.z;  // b[k] = i c D
    gk = make_float4(fmaf(-s, p.z, p.x), fmaf(-s, p.w, p.y), bx, by);
    gm = make_float4(fmaf(s, p.z, p.x), -fmaf(s, p.w, p.y), -bx, by);
}
// The coefficients of the bins k and m = M - k (0 < k < M/2) from G: G[k] and G[m].
__device__ __forceinline__ void ff_coefs(const float4* __restrict__ G, int k, int m, float4& gk, float4& gm) {
    gk = __ldg(G + k);
    gm = __ldg(G + m);
}
// The middle step of bins k and M-k read from and written back to the padded buffer Z (0 <= k <= M/2).
template <int M>
__device__ __forceinline__ void ff_middle_smem(float2* Z, int k, const float4* __restrict__ G) {
    float2 zk = Z[ff_pad(k)];
    if (k == 0 || 2 * k == M) {
        ff_middle_self(zk, __ldg(G + k));
    } else {
        float2 zm = Z[ff_pad(M - k)];
        ff_middle(zk, zm, __ldg(G + k), __ldg(G + (M - k)));
        Z[ff_pad(M - k)] = zm;
    }
    Z[ff_pad(k)] = zk;
}

// The same over the whole buffer for the two-buffer path: bins k and M-k (0 <= k <= M/2) by one thread, k = tid,
// tid + T, ...; the loads of FF_MIDDLE_BATCH pairs issued before any is computed, so that their latencies overlap (on
// an H200 its tiles run 4-9% faster so; the in-place path, whose other warps fill that latency, runs 2-3% slower).
#define FF_MIDDLE_BATCH 4
template <int LOGN>
__device__ __forceinline__ void ff_middle_batched(float2* Z, const float4* __restrict__ G,
                                                  const float2* __restrict__ tw, int tid, int T) {
    constexpr int U = FF_MIDDLE_BATCH, M = (1 << LOGN) / 2;
    constexpr bool HT = ff_reads_h(LOGN);
    static_assert(!HT || ff_pair_low<LOGN>(M / 2 - 1), "every bin below M/2 the lower of its pair");
    for (int k0 = tid; k0 <= M / 2; k0 += U * T) {
        float4 gk[U], gm[U];
        float2 zk[U], zm[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int k = k0 + u * T, m = (M - k) & (M - 1);  // (k = 0 its own partner, as k = M/2)
            const bool in = k <= M / 2;
            if constexpr (HT) {  // (the pair table: its entry at ff_pair_index, bin k the lower of its pair)
                const float4 p = in ? __ldg(G + ff_pair_index<LOGN>(k)) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                const float2 W = in ? __ldg(tw + k) : make_float2(0.0f, 0.0f);
                ff_pair_coefs(p, W, gk[u], gm[u]);
            } else {
                gk[u] = in ? __ldg(G + k) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                gm[u] = in ? __ldg(G + m) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
            zk[u] = in ? Z[ff_pad(k)] : make_float2(0.0f, 0.0f);
            zm[u] = in ? Z[ff_pad(m)] : make_float2(0.0f, 0.0f);
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            const int k = k0 + u * T;
            if (k > M / 2) continue;
            if (k == 0 || 2 * k == M) {
                ff_middle_self(zk[u], gk[u]);
            } else {
                ff_middle(zk[u], zm[u], gk[u], gm[u]);
                Z[ff_pad(M - k)] = zm[u];
            }
            Z[ff_pad(k)] = zk[u];
        }
    }
}

// In-place passes [P0, P1) of the complex FFT of 2^MB points (ff_pass_inplace).
template <bool INV, int MB, int P0, int P1>
__device__ __forceinline__ void ff_passes_inplace(float2* a, const float2* __restrict__ tw, int jt, bool on) {
    if constexpr (P0 < P1) {
        constexpr int R = 1 << ff_bits(MB, P0), TWO = P0 == 0 ? 0 : ff_tw_offset(MB, P0);
        ff_pass_inplace<R, INV, MB, ff_ns(MB, P0), TWO>(a, tw, jt, on);
        ff_passes_inplace<INV, MB, P0 + 1, P1>(a, tw, jt, on);
    }
}

// The forward transform's last pass (radix R = 16/Q, Q >= 2; NS = M/R butterflies) with the middle step in
// registers: bin k = j + r NS of butterfly j has its partner M - k = (NS - j) + (R-1-r) NS in butterfly NS - j, so a
// thread takes the pair (u, NS - u) (u = jt + q B0, B0 = M/16, u < NS/2 (all there are); u = 0 pairs with NS/2, both
// their own partners), and stores the packed spectrum the inverse transform reads. One shared-memory round trip and
// one barrier fewer than a pass and a separate step. (jt, on as ff_pass_inplace's.)
template <int MB>
__device__ __forceinline__ void ff_last_forward_middle(float2* buf, const float4* __restrict__ G,
                                                       const float2* __restrict__ tw, int jt, bool on) {
    constexpr int M = 1 << MB, PL = ff_passes(MB) - 1, R = 1 << ff_bits(MB, PL), NS = ff_ns(MB, PL);
    constexpr int TWO = ff_tw_offset(MB, PL), QP = 16 / R / 2, DS = ff_pad(NS), B0 = M / 16;
    static_assert(QP >= 1 && NS * R == M && QP * B0 == NS / 2, "a pair of butterflies per thread");
    static_assert(!ff_reads_h(MB + 1), "reads G");
    float2 va[QP][R], vb[QP][R];
#pragma unroll
    for (int q = 0; q < QP; ++q) {
        const int u = jt + q * B0;
        ff_butterfly<R, false, MB, NS, TWO>(buf, u, tw, va[q]);
        ff_butterfly<R, false, MB, NS, TWO>(buf, u == 0 ? NS / 2 : NS - u, tw, vb[q]);
    }
    __syncthreads();
    if (on) {
#pragma unroll
        for (int q = QP - 1; q >= 0; --q) {  // (the last pair first: so ptxas (sm_90) fits 2^10 tiles unspilled)
            const int u = jt + q * B0;
            if (u == 0) {
                // butterfly 0: bins r NS, partners (R - r) NS, 0 and M/2 their own; butterfly NS/2: r and R-1-r
                ff_middle_self(va[q][0], __ldg(G));
                ff_middle_self(va[q][R / 2], __ldg(G + M / 2));
#pragma unroll
                for (int r = 1; r < R / 2; ++r) {
                    float4 gk, gm;
                    ff_coefs(G, r * NS, (R - r) * NS, gk, gm);
                    ff_middle(va[q][r], va[q][R - r], gk, gm);
                }
                ff_store<R, NS>(buf, 0, va[q]);  // (before vb's step: va's registers free for it)
#pragma unroll
                for (int r = 0; r < R / 2; ++r) {
                    float4 gk, gm;
                    ff_coefs(G, NS / 2 + r * NS, NS / 2 + (R - 1 - r) * NS, gk, gm);
                    ff_middle(vb[q][r], vb[q][R - 1 - r], gk, gm);
                }
                ff_store<R, NS>(buf, NS / 2, vb[q]);
            } else {
                float2* const da = buf + ff_pad(u);
                float2* const db = buf + ff_pad(NS - u);
#pragma unroll
                for (int r = 0; r < R; ++r) {  // each pair stored when done (ff_store's places): its registers free
                    float4 gk, gm;
                    ff_coefs(G, u + r * NS, (NS - u) + (R - 1 - r) * NS, gk, gm);
                    ff_middle(va[q][r], vb[q][R - 1 - r], gk, gm);
                    da[r * DS] = va[q][r];
                    db[(R - 1 - r) * DS] = vb[q][R - 1 - r];
                }
            }
        }
    }
    __syncthreads();
}

// ff_tile_wide's prefetch of the next tile (FF_PREFETCH_ROWS): where the launch gives the block shared memory past its
// buffer and reduction slots for an mbarrier (16 bytes) and FF_PREFETCH_ROWS rows of a tile (row r: float4 jt + r M/32
// of ff_first_pass's 16-byte loads, 8 KB; the first rows are one run of x), ff_fused_kernel's loop has thread 0 hand
// those rows of the block's next tile to the tensor memory accelerator (one bulk copy, kernels/async_copy.cuh) after
// the first pass, and the next tile's first pass read them there. Only with PAIRS, on sm_90 and later. On an H100
// (2026-12-05, benchmarks/fused_ab.py, L = 2^26, a grid of 132 blocks, with ff_outputs_bulk; benchmarks/results/
// H100-2026-12-05-wide-tile-prefetch/) 4.0-8.2% faster than the kernel before it on a block a tile at K = 4800 to
// 8000 (K = 7921: 0.3339 to 0.3131 ms); 6 rows (the L1 cache 60 KB instead of 28) 5.0-8.5%, 8 rows 2.2-6.1%, 5 rows
// 3.5-8.3%; without the bulk stores 1.3-2.9% (11 rows); the same rows by cp.async, 16 bytes a thread, without the
// bulk stores, 2.3-8.3% slower than that kernel (their issue stalls the first pass). On an H200 (the same day,
// benchmarks/results/H200-2026-12-05-wide-tile-prefetch/) 4.7-8.4% faster (6 rows 5.5-7.3%): K = 7921 from 0.3234 to
// 0.2966 ms.
#ifndef FF_PREFETCH_ROWS  // (an experiment's define first: benchmarks/fused_ab.py --extra)
#define FF_PREFETCH_ROWS SIGCONV_FFT_FUSED_PREFETCH_ROWS
#endif
template <int LOGN, bool PAIRS>
__device__ __forceinline__ bool ff_prefetch_on() {
    if constexpr (!PAIRS || FF_PREFETCH_ROWS <= 0 || !SC_BULK_COPY) {
        return false;
    } else {
        constexpr unsigned M = 1u << (LOGN - 1), need = 8u * ff_pad((int)M) + 128u + 16u + FF_PREFETCH_ROWS * (M / 2u);
#ifdef SIGCONV_HOST_EMULATION
        const unsigned dyn = (unsigned)sc_emu_dynamic_smem;
#else
        unsigned dyn;
        asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
#endif
        return dyn >= need;
    }
}

// The first forward pass of ff_tile_one, ff_tile_cols and ff_tile_wide (radix 16, no twiddles), from x into
// registers: v[16 u + r] gets the DFT of the points p = W jt + u + r M/16 of the tile (u < W: the thread's W
// butterflies W jt + u), p = (x[s0 + 2p], x[s0 + 2p + 1]) (zero outside [0, L)); returns the tile's shift es
// (ff_tile_shift) by which v is divided. Its barrier: every read of the last tile's shared memory done. PAIRS: the
// launcher's promise that xc + s0 is 8-byte aligned and s0 and L are even (so are lo and hi below): a point's two
// samples are one 8-byte load, inside x or not at all; with W = 2 a tile wholly inside x and 16-byte aligned reads
// a thread's two points as one 16-byte load.
template <int LOGN, bool PAIRS = false, int W = 1>
__device__ __forceinline__ int ff_first_pass(const float* __restrict__ xc, sc_i64 L, sc_i64 s0, int jt, int safe,
                                             int* red, float2* v, const float4* pre = nullptr,
                                             unsigned long long* bar = nullptr, unsigned phase = 0) {
    constexpr int N = 1 << LOGN, M = N / 2, B0 = M / 16;
    static_assert(W == 1 || W == 2, "one or two butterflies a thread");
    // 1. the points (a warp reads 256 W consecutive bytes per r); the peak as the largest bit pattern of |sample|
    int mb = 0;
    {
        // floats [lo, hi) of the tile lie inside x (all of them but in a channel's first and last tiles): one
        // predicated load per float, except where the whole tile lies inside x on tiles of up to
        // 2^FF_PLAIN_LOADS_MAX_LOGN samples (FF_PLAIN_LOADS_MAX_LOGN)
        const int lo = s0 >= 0 ? 0 : (int)(-s0 < N ? -s0 : N);
        const int hi = L - s0 >= N ? N : L - s0 <= 0 ? 0 : (int)(L - s0);
        const float* const xt = xc + s0;  // float f of the tile (read only at f in [lo, hi))
        if constexpr (PAIRS) {
            const float2* const xp = reinterpret_cast<const float2*>(xt);
            if (W == 2 && hi - lo == N && (reinterpret_cast<unsigned long long>(xt) & 15) == 0) {
                const float4* const xq = reinterpret_cast<const float4*>(xt);
                if (pre != nullptr) {  // (its first FF_PREFETCH_ROWS rows in `pre` once `bar` completes: ff_prefetch_on)
                    bulk_wait(bar, phase);
#pragma unroll
                    for (int r = 0; r < 16; ++r) {
                        const float4 q = r < FF_PREFETCH_ROWS ? pre[jt + r * (B0 / 2)] : xq[jt + r * (B0 / 2)];
                        v[r] = make_float2(q.x, q.y);
                        v[16 * (W - 1) + r] = make_float2(q.z, q.w);
                    }
                } else {
#pragma unroll
                    for (int r = 0; r < 16; ++r) {
                        const float4 q = xq[jt + r * (B0 / 2)];
                        v[r] = make_float2(q.x, q.y);
                        v[16 * (W - 1) + r] = make_float2(q.z, q.w);
                    }
                }
            } else {
#pragma unroll
                for (int u = 0; u < W; ++u)
#pragma unroll
                    for (int r = 0; r < 16; ++r) {
                        const int pt = W * jt + u + r * B0, f = 2 * pt;
                        v[16 * u + r] =
                            (unsigned)(f - lo) < (unsigned)(hi - lo) ? xp[pt] : make_float2(0.0f, 0.0f);
                    }
            }
        } else if (LOGN <= FF_PLAIN_LOADS_MAX_LOGN && hi - lo == N) {
#pragma unroll
            for (int u = 0; u < W; ++u)
#pragma unroll
                for (int r = 0; r < 16; ++r) {
                    const int f = 2 * (W * jt + u + r * B0);
                    v[16 * u + r] = make_float2(xt[f], xt[f + 1]);
                }
        } else {
#pragma unroll
            for (int u = 0; u < W; ++u)
#pragma unroll
                for (int r = 0; r < 16; ++r) {
                    const int f = 2 * (W * jt + u + r * B0);
                    v[16 * u + r] = make_float2((unsigned)(f - lo) < (unsigned)(hi - lo) ? xt[f] : 0.0f,
                                                (unsigned)(f + 1 - lo) < (unsigned)(hi - lo) ? xt[f + 1] : 0.0f);
                }
        }
        // (the largest pattern as a signed int, the positive samples', and as an unsigned one, the negative samples'
        // with the sign bit set: two maxima and no mask a sample)
        int sp = 0;
        unsigned un = 0u;
#pragma unroll
        for (int i = 0; i < 16 * W; ++i) {
            const int a = __float_as_int(v[i].x), b = __float_as_int(v[i].y);
            sp = max(sp, max(a, b));
            un = max(un, max((unsigned)a, (unsigned)b));
        }
        mb = max(sp, (int)(un & 0x7fffffffu));
        FF_MARK(1, mb);
    }
    int es;
    if constexpr (LOGN >= FF_EARLY_DFT_MIN_LOGN && LOGN <= FF_EARLY_DFT_MAX_LOGN) {
        // the first DFT before the barrier, on the thread's own samples divided by 2^el (el: the exponent of the
        // thread's own peak where that is extreme, else 0); only where some thread's peak is extreme does the
        // block take its maximum, and a thread whose el is not the tile's es multiplies its DFT by 2^(el - es)
        // (the DFT is linear; powers of two are exact)
        const int e0 = mb >= 0x7f800000 || mb == 0 ? 0 : os_frexp_exp<float>(__int_as_float(mb));
        const bool extreme = e0 < -safe || e0 > safe;
        const int el = extreme ? e0 : 0;
        if (extreme) {
            const OsScale<float> down(-el);
#pragma unroll
            for (int i = 0; i < 16 * W; ++i) v[i] = make_float2(down(v[i].x), down(v[i].y));
        }
#pragma unroll
        for (int u = 0; u < W; ++u) ff_dft<16, false>(v + 16 * u);
        es = 0;
        if (__syncthreads_or(extreme)) {
            es = ff_tile_shift(ff_block_max<W == 2>(mb, red), safe);
            if (es != el) {
                const OsScale<float> fix(el - es);
#pragma unroll
                for (int i = 0; i < 16 * W; ++i) v[i] = make_float2(fix(v[i].x), fix(v[i].y));
            }
        }
    } else {
        es = ff_tile_shift(ff_block_max<W == 2>(mb, red), safe);
        if (es != 0) {  // extreme magnitude: the tile divided by 2^es
            const OsScale<float> down(-es);
#pragma unroll
            for (int i = 0; i < 16 * W; ++i) v[i] = make_float2(down(v[i].x), down(v[i].y));
        }
#pragma unroll
        for (int u = 0; u < W; ++u) ff_dft<16, false>(v + 16 * u);
    }
    return es;
}

// One tile on a block of B0 = M/16 threads or more, in one buffer, crossing shared memory as few times as it can: the
// first forward pass (radix 16, no twiddles) reads its 16 points straight from x into registers (the tile's peak
// taken there), the middle step rides on the last forward pass (ff_last_forward_middle, where its radix is below
// 16), and the last inverse pass writes the valid outputs straight to y. Thread jt < B0 does the work with strides
// that are constants; a thread past B0 repeats thread tid mod B0's and stores nothing (ff_pass_inplace). No barrier
// at the end: the next tile's first shared-memory store waits at its peak's barrier, which every thread reaches only
// after its reads.
template <int LOGN>
__device__ __forceinline__ void ff_tile_one(const float* __restrict__ xc, float* __restrict__ yt,
                                            const float4* __restrict__ G, const float2* __restrict__ tw,
                                            const float2* __restrict__ twi, sc_i64 L, int K, sc_i64 s0, int nv,
                                            const int* __restrict__ tap_shift, int safe, float2* buf, int* red) {
    constexpr int MB = LOGN - 1, N = 1 << LOGN, M = N / 2, B0 = M / 16, P = ff_passes(MB);
    const int tid = ff_tid(), jt = tid & (B0 - 1);
    const bool on = tid < B0;
    // 1. point p = (x[s0 + 2p], x[s0 + 2p + 1]) of the first pass's butterfly jt: p = jt + r M/16
    float2 v[16];
    const int es = ff_first_pass<LOGN>(xc, L, s0, jt, safe, red, v);
    if (on) ff_store<16, 1>(buf, jt, v);
    __syncthreads();
    sc_grid_wait();  // (G and tap_shift ready: conv1d_fft_fused's launch)
    // 2. the other forward passes and the middle step
    constexpr int RL = 1 << ff_bits(MB, P - 1);
    if constexpr (RL < 16) {
        ff_passes_inplace<false, MB, 1, P - 1>(buf, tw, jt, on);
        ff_last_forward_middle<MB>(buf, G, tw, jt, on);
    } else {  // last radix 16 (one butterfly per thread): the middle step on its own, bins k and M-k by one thread
        static_assert(!ff_reads_h(LOGN), "ff_middle_smem reads G");
        ff_passes_inplace<false, MB, 1, P>(buf, tw, jt, on);
        if (on) {
#pragma unroll 1
            for (int k = jt; k <= M / 2; k += B0) ff_middle_smem<M>(buf, k, G);
        }
        __syncthreads();
    }
    // 3. the inverse transform but its last pass
    ff_passes_inplace<true, MB, 0, P - 1>(buf, twi, jt, on);
    // 4. its last pass (radix R, NS = M/R butterflies, bin j + r NS of butterfly j in natural order): y[2p] + i
    // y[2p+1] at point p, float f = 2p of the tile is output f - (K-1) when that is in [0, nv)
    constexpr int R = RL, NS = M / R, Q = 16 / R, TWO = ff_tw_offset(MB, P - 1);
    static_assert(Q * B0 == NS, "the last pass's butterflies, Q per thread");
    const int et = tap_shift ? __ldg(tap_shift) : 0;  // (read here, not held across the tile)
    const OsScale<float> up(es + et);
    const bool scaled = es + et != 0;  // (none on a tile of ordinary magnitude, the taps' exponent in the table)
    float* const yo = yt - (K - 1);  // y of tile float f (only ever written at f >= K-1)
    if (!on) return;                 // (no barrier follows)
#pragma unroll
    for (int q = 0; q < Q; ++q) {
        const int j = jt + q * B0;
        float2 w[R];
        ff_butterfly<R, true, MB, NS, TWO>(buf, j, twi, w);
#pragma unroll
        for (int r = 0; r < R; ++r) {
            const int f = 2 * (j + r * NS);
            const float a = scaled ? up(w[r].x) : w[r].x, b = scaled ? up(w[r].y) : w[r].y;
            if ((unsigned)(f - (K - 1)) < (unsigned)nv) yo[f] = a;
            if ((unsigned)(f + 1 - (K - 1)) < (unsigned)nv) yo[f + 1] = b;
        }
    }
}

// v[s] times the twiddle W^(j s), 0 < s < 16, W = exp(-2 pi i / M), of ff_tile_cols and ff_tile_wide (j < M/16), from
// W^j, W^2j, W^4j and W^8j (w1, w2, w4, w8: ff_cols_rows), the others their products, each formed where it is used.
__device__ __forceinline__ void ff_cols_twiddle_w(float2* v, float2 w1, float2 w2, float2 w4, float2 w8) {
    float2 w[8];
    w[1] = w1;
    w[2] = w2;
    w[4] = w4;
    w[3] = ff_mul(w[1], w[2]);
    w[5] = ff_mul(w[1], w[4]);
    w[6] = ff_mul(w[2], w[4]);
    w[7] = ff_mul(w[3], w[4]);
#pragma unroll
    for (int s = 1; s < 8; ++s) v[s] = ff_mul(v[s], w[s]);
    v[8] = ff_mul(v[8], w8);
#pragma unroll
    for (int s = 9; s < 16; ++s) v[s] = ff_mul(v[s], ff_mul(w[s - 8], w8));
}
// Where ff_tile_cols's twiddles W^j, W^2j and W^4j lie: the rows of the M-point transform's last pass (tw +
// ff_tw_offset(MB, 3): exp(-2 pi i 2^a k / M), k < M/8, a < 3), row a at ff_cols_row<MB>(a) + j; W^8j is in the third
// row at 2j.
template <int MB> __host__ __device__ constexpr int ff_cols_row(int a) {
    static_assert(ff_passes(MB) == 4 && ff_bits(MB, 3) == 3 && ff_ns(MB, 3) * 8 == (1 << MB), "the last pass's rows");
    return ff_tw_offset(MB, 3) + a * ff_ns(MB, 3);
}
// ff_cols_twiddle_w on the twiddles of j, read from the table.
template <int MB>
__device__ __forceinline__ void ff_cols_twiddle(const float2* __restrict__ tw, int j, float2* v) {
    ff_cols_twiddle_w(v, __ldg(tw + ff_cols_row<MB>(0) + j), __ldg(tw + ff_cols_row<MB>(1) + j),
                      __ldg(tw + ff_cols_row<MB>(2) + j), __ldg(tw + ff_cols_row<MB>(2) + 2 * j));
}
// v[s] times conj W^(j s) (the twiddles of ff_cols_twiddle_w), then the inverse DFT of 16, the products fused into its
// first stage (ff_dft16_tw_column; column n2 takes W^(j n2) times 1, W^4j, W^8j and W^12j).
__device__ __forceinline__ void ff_cols_twiddle_idft16_w(float2* v, float2 w1, float2 w2, float2 w4, float2 w8) {
    const float2 w12 = ff_mul(w4, w8);
    ff_dft16_tw_column<true>(v, 0, w1, w4, w8, w12);  // (a unread)
    ff_dft16_tw_column<true>(v, 1, w1, ff_mul(w1, w4), ff_mul(w1, w8), ff_mul(w1, w12));
    ff_dft16_tw_column<true>(v, 2, w2, ff_mul(w2, w4), ff_mul(w2, w8), ff_mul(w2, w12));
    const float2 w3 = ff_mul(w1, w2);
    ff_dft16_tw_column<true>(v, 3, w3, ff_mul(w3, w4), ff_mul(w3, w8), ff_mul(w3, w12));
    ff_dft16<true, false>(v);
}
template <int MB>
__device__ __forceinline__ void ff_cols_twiddle_idft16(const float2* __restrict__ tw, int j, float2* v) {
    ff_cols_twiddle_idft16_w(v, __ldg(tw + ff_cols_row<MB>(0) + j), __ldg(tw + ff_cols_row<MB>(1) + j),
                             __ldg(tw + ff_cols_row<MB>(2) + j), __ldg(tw + ff_cols_row<MB>(2) + 2 * j));
}
// The groups of the widest store (W = 2: the thread's two points, 16 bytes; W = 1: a point, 8 bytes), y aligned for it
// and no group of the thread partly outside [0, nv); times fs (SCALE) or as they are.
template <int B0, int W, bool SCALE>
__device__ __forceinline__ void ff_store_groups(const float2* v, int jt, float* yo, int K, int nv, float fs) {
    const auto up = [fs](float a) { return SCALE ? os_mul(a, fs) : a; };
#pragma unroll
    for (int m = 0; m < 16; ++m) {
        const int f = 2 * (W * jt + m * B0);  // (a multiple of 2 W)
        const float2 p = v[m], q = v[16 * (W - 1) + m];
        if ((unsigned)(f - (K - 1)) < (unsigned)nv) {
            if constexpr (W == 2) *reinterpret_cast<float4*>(yo + f) = make_float4(up(p.x), up(p.y), up(q.x), up(q.y));
            else *reinterpret_cast<float2*>(yo + f) = make_float2(up(p.x), up(p.y));
        }
    }
}
// The outputs of a tile whose y[2p] + i y[2p+1] at point p = W jt + u + B0 m is v[16 u + m] (ff_tile_cols, W = 1;
// ff_tile_wide, W = 2): float f = 2p of the tile is output f - (K-1) when that is in [0, nv), multiplied by
// 2^(es + et) (es the tile's shift, et the taps'; where that is not a normal float, v is multiplied by OsScale's first
// factor here and the outputs by its second; where it is 1, the usual case with the taps' exponent in the table,
// SIGCONV_FFT_FUSED_FOLD_MAX, not multiplied). A thread's outputs go out in groups of G floats, one store each: the
// points of its two butterflies (G = 4, with W = 2 where y is 16-byte aligned), or a point (G = 2, where 8-byte
// aligned). Only the groups that hold the tile's first or last output can lie partly outside [0, nv): the threads of
// those two (the points (K-1)/2 and (K-2+nv)/2) store float by float; every other thread stores a group whole or not
// at all, by its first float, one compare and one predicated store a group.
template <int B0, int W = 1>
__device__ __forceinline__ void ff_tile_outputs_points(float2* v, int jt, float* yo, int K, int nv, int es, int et) {
    const OsScale<float> up(es + et);
    if (up.f2 != 1.0f) {  // (not a normal float: its first factor here)
#pragma unroll
        for (int i = 0; i < 16 * W; ++i) v[i] = make_float2(os_mul(v[i].x, up.f1), os_mul(v[i].y, up.f1));
    }
    const float fs = up.f2 != 1.0f ? up.f2 : up.f1;
    const unsigned long long ya = reinterpret_cast<unsigned long long>(yo);  // (a group's f: a multiple of 2 W)
    const int ps = (K - 1) >> 1, pe = (K - 2 + nv) >> 1;
    const bool grouped = (ps & (B0 - 1)) / W != jt && (pe & (B0 - 1)) / W != jt;
    if (grouped && (ya & (8 * W - 1)) == 0) {
        if (fs == 1.0f) ff_store_groups<B0, W, false>(v, jt, yo, K, nv, fs);
        else ff_store_groups<B0, W, true>(v, jt, yo, K, nv, fs);
        return;
    }
#pragma unroll
    for (int u = 0; u < W; ++u)
#pragma unroll
        for (int m = 0; m < 16; ++m) {
            const int f = 2 * (W * jt + u + m * B0);
            const float a = os_mul(v[16 * u + m].x, fs), b = os_mul(v[16 * u + m].y, fs);
            if (grouped && (ya & 7) == 0) {  // (W = 2, y 8-byte but not 16-byte aligned: a point a store)
                if ((unsigned)(f - (K - 1)) < (unsigned)nv) *reinterpret_cast<float2*>(yo + f) = make_float2(a, b);
            } else {
                if ((unsigned)(f - (K - 1)) < (unsigned)nv) yo[f] = a;
                if ((unsigned)(f + 1 - (K - 1)) < (unsigned)nv) yo[f + 1] = b;
            }
        }
}

// ff_tile_wide's outputs through shared memory and one bulk copy (FF_BULK_STORE, on a block of several tiles:
// ff_fused_kernel's): the tile's floats, multiplied as ff_tile_outputs_points multiplies them, are written in order
// into the buffer (float f at f, a warp's 16-byte groups side by side), and thread 0 hands the valid ones that fill
// whole 16-byte groups of y to the tensor memory accelerator (bulk_store, one instruction), which drains them while
// the block starts its next tile; threads 0-3 store the at most 3 floats before y's first 16-byte boundary, 4-7 those
// after the last group. Thread 0 waits until the copy has read the buffer (ff_bulk_wait) before the next tile's
// first write to it (ff_tile_wide) or the block's end. Only where the valid floats and y share their alignment: float
// K - 1 + a of the tile on a multiple of 4, where y + a is the first 16-byte boundary of the tile's outputs (y + t0);
// else false, and ff_tile_outputs_points stores them from registers. On an H100 (2026-12-05, benchmarks/fused_ab.py,
// L = 2^26, a grid of one block a multiprocessor) with the prefetch of ff_prefetch_on, 3.9-5.0% faster than with
// stores from registers at K = 5001 to 8000; alone level with them (-0.4 to +1.6%), the outputs' drain then slowing
// the next tile's loads (benchmarks/results/H100-2026-12-05-wide-tile-stores/).
#ifndef FF_BULK_STORE  // (an experiment's define first: benchmarks/fused_ab.py --extra)
#define FF_BULK_STORE 1
#endif
__device__ __forceinline__ void ff_bulk_wait() {  // (thread 0: its bulk copies have read the buffer)
    if constexpr (FF_BULK_STORE && SC_BULK_COPY) {
        if (threadIdx.x == 0) bulk_store_wait_read();
    }
}
template <int B0>
__device__ __forceinline__ bool ff_outputs_bulk(float2* v, int jt, float* yt, int K, int nv, int es, int et,
                                                float2* buf) {
    if constexpr (!FF_BULK_STORE || !SC_BULK_COPY) {
        return false;
    } else {
        const unsigned long long ya = reinterpret_cast<unsigned long long>(yt);
        const int a = (int)(((16u - (unsigned)(ya & 15u)) & 15u) >> 2);  // (floats before y's first 16-byte boundary)
        if ((ya & 3u) != 0 || ((K - 1 + a) & 3) != 0 || nv - a < 4) return false;
        const int n4 = (nv - a) >> 2;  // (16-byte groups in the bulk copy)
        const OsScale<float> up(es + et);
        if (up.f2 != 1.0f) {
#pragma unroll
            for (int i = 0; i < 32; ++i) v[i] = make_float2(os_mul(v[i].x, up.f1), os_mul(v[i].y, up.f1));
        }
        const float fs = up.f2 != 1.0f ? up.f2 : up.f1;
        float* const sb = reinterpret_cast<float*>(buf);
        __syncthreads();  // (every thread's reads of the columns done)
#pragma unroll
        for (int m = 0; m < 16; ++m)
            *reinterpret_cast<float4*>(sb + 4 * jt + 2 * B0 * m) = make_float4(
                os_mul(v[m].x, fs), os_mul(v[m].y, fs), os_mul(v[16 + m].x, fs), os_mul(v[16 + m].y, fs));
        bulk_fence();  // (the writes visible to the copy)
        __syncthreads();
        if (jt == 0) bulk_store(yt + a, sb + (K - 1 + a), 16u * (unsigned)n4);
        if (jt < 8) {
            const int i = jt < 4 ? jt : a + 4 * n4 + (jt - 4);
            if (jt < 4 ? i < a : i < nv) yt[i] = sb[K - 1 + i];
        }
        return true;
    }
}

// One tile of 2^14 or 2^15 samples on a block of B0 = M/16 threads or more, its M-point transforms as 16 columns of
// CM = M/16 points (512 or 1024), each the work of CT = CM/16 threads (a warp, or two) alone (four-step): thread jt
// takes the first pass's DFT of 16 (ff_first_pass, over points jt + B0 r), multiplies output s by W^(jt s)
// (ff_cols_twiddle) and stores it at point jt of column s; the CT threads of column s then transform it alone (passes
// of radix 16, R1 (the transform's second radix: 8 or 16) and 4 in place, at their column's barrier, ff_sync<CT>),
// which gives the bins s + 16 c in natural order of c. The middle step pairs bin k with M - k, which column (16 - s) mod
// 16 holds: between two barriers of the pair of columns (ff_pair_sync) each takes the pairs of its own lower half,
// reading and writing the partner's upper half (the pair table's entries by column: ff_pair_index); then it runs the
// column passes transposed and backwards (ff_pass_inplace with BACK; the first in registers). After the block's
// barrier, thread jt reads point jt of every column, multiplies by the conjugate twiddles and takes the inverse DFT
// of 16 (ff_cols_twiddle_idft16): y at points jt + B0 m, straight to y. Three block barriers a tile (the peak's and
// two) where ff_tile_one has fourteen. Threads past B0 (whole warps) wait at the block's barriers and store nothing.
// (PAIRS: ff_first_pass's.)
template <int LOGN, bool PAIRS = false>
__device__ __forceinline__ void ff_tile_cols(const float* __restrict__ xc, float* __restrict__ yt,
                                             const float4* __restrict__ G, const float2* __restrict__ tw,
                                             const float2* __restrict__ twi, sc_i64 L, int K, sc_i64 s0, int nv,
                                             const int* __restrict__ tap_shift, int safe, float2* buf, int* red) {
    constexpr int MB = LOGN - 1, M = 1 << MB, B0 = M / 16, CB = MB - 4, CM = 1 << CB, CP = ff_pad(CM), CT = CM / 16;
    constexpr int R1 = 1 << ff_bits(MB, 1);                  // column pass 1 (radix R1, NS 16): the transform's pass 1
    constexpr int TWB = ff_tw_offset(MB, 1);
    constexpr int T2 = ff_tw_offset(MB, 2), NS2 = ff_ns(MB, 2);  // its pass 2 (radix 8, NS2): exp(-2 pi i 2^a k / 8 NS2)
    constexpr int TWC = T2 + NS2;  // column pass 2 (radix 4, NS CM/4 = NS2): rows 1 and 2 of that
    static_assert((CT == 32 || CT == 64) && 16 * R1 * 4 == CM && NS2 == CM / 4 && ff_bits(MB, 2) == 3,
                  "columns of 512 or 1024 points: passes of radix 16, R1 and 4, their twiddles the transform's");
    static_assert(16 * CP == ff_pad(M), "the columns' layout");
    // bin c = l + CT q + CM/4 r of the column (the last pass's butterfly j = l + CT q, output r) at ff_pad(l) + DQ q +
    // DR r; its partner c' = CM - 1 - c (column 0: CM - c) at ff_pad(CT - 1 - l) (ff_pad(CT - l)) + PO - DQ q - DR r
    constexpr int DQ = ff_pad(CT), DR = ff_pad(CM / 4), PO = 3 * DQ + 3 * DR;
    const int tid = ff_tid(), jt = tid & (B0 - 1);
    const bool on = tid < B0;
    // 1. the first pass, twiddled into the columns
    float2 v[16];
    const int es = ff_first_pass<LOGN, PAIRS>(xc, L, s0, jt, safe, red, v);
    if (on) {
        ff_cols_twiddle<MB>(tw, jt, v);
#pragma unroll
        for (int s = 0; s < 16; ++s) buf[s * CP + ff_pad(jt)] = v[s];
    }
    __syncthreads();
    FF_MARK(2, 0);
    sc_grid_wait();  // (G and tap_shift ready: conv1d_fft_fused's launch)
    // 2. column s: forward, the middle step, inverse
    if (on) {
        const int s = tid >> (CB - 4), l = tid & (CT - 1);
        float2* const col = buf + s * CP;
        ff_pass_inplace<16, false, CB, 1, 0, CT>(col, tw, l, true);
        ff_pass_inplace<R1, false, CB, 16, TWB, CT>(col, tw, l, true);
        float2 z[4][4];  // the last pass's butterflies j = l + CT q: bin s + 16 c of the transform at c = j + CM/4 r
#pragma unroll
        for (int q = 0; q < 4; ++q) ff_butterfly<4, false, CB, CM / 4, TWC>(col, l + CT * q, tw, z[q]);
        ff_sync<CT>();
        // the middle step: bin k = s + 16 c pairs with M - k = p + 16 c' in column p = 16 - s (c' = CM - 1 - c; column
        // 0: c' = CM - c, c = 0 and CM/2 their own partners). Column s takes the pairs of its lower half (c < CM/2, r <
        // 2: in registers) and the partner's upper half (c' >= CM/2, from shared memory, where the partner stores it),
        // and writes the partner's results back there; column p does the same the other way round. No bin is read or
        // written by two threads: one barrier of the two columns before (the upper halves stored) and one after (the
        // results). (The places: one base each, offsets that are constants.)
        float2* const mine = col + ff_pad(l);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            mine[DQ * q + 2 * DR] = z[q][2];
            mine[DQ * q + 3 * DR] = z[q][3];
        }
        ff_pair_sync<CT>(s);
        {
            const int p = (16 - s) & 15, lp = s == 0 ? CT - l : CT - 1 - l;
            float2* const theirs = buf + p * CP + ff_pad(lp);
            const float4* const Pk = G + s * (CM / 2) + l;  // the pair table's entry of bin s + 16 c: Pk[CT q + CM/4 r]
            const float2 ws = __ldg(tw + s);  // exp(-2 pi i s / N)
            const float h = 0.70710678118654752440f;
#pragma unroll
            for (int q = 0; q < 4; ++q) {
                const float2 wj = ff_mul(ws, __ldg(tw + T2 + l + CT * q));  // W of bin s + 16 j, j = l + CT q
#pragma unroll
                for (int r = 0; r < 2; ++r) {
                    const float2 W = r == 0 ? wj : ff_mul(wj, make_float2(h, -h));  // times exp(-2 pi i r / 8)
                    float4 gk, gm;
                    ff_pair_coefs(__ldg(Pk + CT * q + CM / 4 * r), W, gk, gm);
                    if ((s | l | q | r) == 0) {  // bin 0: its own partner
                        ff_middle_self(z[q][r], gk);
                    } else {
                        float2 zm = theirs[PO - DQ * q - DR * r];
                        ff_middle(z[q][r], zm, gk, gm);
                        theirs[PO - DQ * q - DR * r] = zm;
                    }
                }
            }
            if ((s | l) == 0) {  // bin M/2 = 16 CM/2 of column 0, its own partner (W = -i)
                float4 gc, unused;
                ff_pair_coefs(__ldg(G + M / 2), make_float2(0.0f, -1.0f), gc, unused);
                float2 zc = z[0][2];
                ff_middle_self(zc, gc);
                mine[2 * DR] = zc;
            }
        }
        ff_pair_sync<CT>(s);  // (the partner's results in this column's upper half)
        const int t2 = ff_tid(), l2 = t2 & (CT - 1);  // (read anew: its addresses not held through the step)
        float2* const col2 = buf + (t2 >> (CB - 4)) * CP;
#pragma unroll
        for (int q = 0; q < 4; ++q) {
            const int j = l2 + CT * q;
            z[q][2] = col2[ff_pad(j + CM / 2)];
            z[q][3] = col2[ff_pad(j + 3 * CM / 4)];
            ff_back_regs<4, CM / 4, TWC>(twi, j, z[q]);
            ff_store<4, CM / 4>(col2, j, z[q]);
        }
        ff_sync<CT>();
        ff_pass_inplace<R1, true, CB, 16, TWB, CT, true>(col2, twi, l2, true);
        ff_pass_inplace<16, true, CB, 1, 0, CT, true>(col2, twi, l2, true);
    }
    __syncthreads();
    FF_MARK(3, 0);
    // 3. point jt of every column, the conjugate twiddles and the inverse DFT of 16: y[2p] + i y[2p+1] at p = jt + B0 m
    const int et = tap_shift ? __ldg(tap_shift) : 0;
    if (!on) return;  // (no barrier follows)
#pragma unroll
    for (int s = 0; s < 16; ++s) v[s] = buf[s * CP + ff_pad(jt)];
    ff_cols_twiddle_idft16<MB>(twi, jt, v);
    FF_MARK(4, __float_as_int(v[15].x) ^ __float_as_int(v[0].y));
    ff_tile_outputs_points<B0>(v, jt, yt - (K - 1), K, nv, es, et);
}

// ff_tile_wide's layout of a column: point i at ff_pad2(i) = i + 2 (i / 32) (two float2 of padding after every 32), so
// that the points 2m and 2m + 1 are one aligned 16-byte slot (slot m + m/16: one slot of padding per 16). The passes
// below access such slots at consecutive m, or at m = 17 l + constant, per quarter-warp: free of bank conflicts. A
// column of 1024 points takes as many bytes as in ff_pad's layout.
__host__ __device__ constexpr int ff_pad2(int i) { return i + 2 * (i >> 5); }
// The points a, b of the 16-byte slot at p (shared memory), or of the table at p (read-only, through L1).
__device__ __forceinline__ void ff_lds2(const float2* p, float2& a, float2& b) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    a = make_float2(q.x, q.y);
    b = make_float2(q.z, q.w);
}
__device__ __forceinline__ void ff_sts2(float2* p, float2 a, float2 b) {
    *reinterpret_cast<float4*>(p) = make_float4(a.x, a.y, b.x, b.y);
}
__device__ __forceinline__ void ff_ldg2(const float2* __restrict__ p, float2& a, float2& b) {
    const float4 q = __ldg(reinterpret_cast<const float4*>(p));
    a = make_float2(q.x, q.y);
    b = make_float2(q.z, q.w);
}

// W^j, W^2j and W^4j of ff_cols_twiddle_w for j = 2t + u, u < 2 (ff_tile_wide's first and last steps): c[u][a] for
// a = 0..2 (W^8j: ff_wide_w8).
template <int MB>
__device__ __forceinline__ void ff_wide_cols_rows(const float2* __restrict__ tw, int t, float2 (&c)[2][3]) {
#pragma unroll
    for (int a = 0; a < 3; ++a) ff_ldg2(tw + ff_cols_row<MB>(a) + 2 * t, c[0][a], c[1][a]);
}
template <int MB> __device__ __forceinline__ float2 ff_wide_w8(const float2* __restrict__ tw, int t, int u) {
    return __ldg(tw + ff_cols_row<MB>(2) + 4 * t + 2 * u);  // W^8j, j = 2t + u: the third row at 2j
}

// ff_tile_wide's columns: each of 1024 points as 32 x 32, two passes of radix 32, each lane one butterfly of 32 points
// a pass. A column crosses shared memory 8 times where passes of radix 16, 16 and 4 cross it 12 (reads and writes, each
// a column's bytes; the middle step's half reads and writes counted). On an H200 (benchmarks/fused_ab.py, L = 2^26, one
// channel, 2026-12-05) the 32768 tile so took 0.345 ms at K = 7921 where those three passes on 512 threads took 0.377
// and ff_tile_cols's on 1024 threads 0.373: its columns took 8.0 us of a 15.6 us tile, ff_tile_cols's 9.7 of 16.8.
//
// exp(-2 pi i k / 32) as (cos, -sin), k < 16.
__device__ __forceinline__ float2 ff_w32c(int k) {
    constexpr float C[9] = {1.0f, 0.98078528040323044913f, 0.92387953251128675613f, 0.83146961230254523708f,
                            0.70710678118654752440f, 0.55557023301960222474f, 0.38268343236508977173f,
                            0.19509032201612826785f, 0.0f};  // cos(2 pi k / 32), k <= 8
    return k < 8 ? make_float2(C[k], -C[8 - k]) : make_float2(-C[16 - k], -C[k - 8]);
}
// The last stage of a DFT of 32 points, 2 x 16, decimated in time: a[h] the DFT of 16 of the points x[2m + h] (with
// their twiddles, where the pass has them), out a[h][k] = X[16h + k]; the twiddles' products fused into the sums and
// differences (ff_fma_cw: six instructions a pair where eight take them apart).
template <bool INV> __device__ __forceinline__ void ff_dft32_join(float2 (&a)[2][16]) {
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const float2 e = a[0][k];
        if (k == 0 || k == 8) {
            const float2 t = k == 0 ? a[1][k] : ff_mul_mi<INV>(a[1][k]);  // (twiddle 1, or -i forward)
            a[0][k] = ff_add(e, t);
            a[1][k] = ff_sub(e, t);
        } else {
            const float2 c = ff_fma_cw<INV>(e, a[1][k], ff_w32c(k));
            a[0][k] = c;
            a[1][k] = ff_twice_minus(e, c);
        }
    }
}
// Lane l's points l + 32 r of a column (ff_pad2), read or written (STORE): r = 2m + h at a[h][m] (EVEN_ODD: the
// inputs of ff_dft32_join's DFTs of 16), else r = 16h + k at a[h][k] (its outputs).
template <bool STORE, bool EVEN_ODD = true>
__device__ __forceinline__ void ff_col32_io(float2* col, int l, float2 (&a)[2][16]) {
#pragma unroll
    for (int r = 0; r < 32; ++r) {
        float2* const p = col + ff_pad2(l + 32 * r);
        float2& v = EVEN_ODD ? a[r & 1][r >> 1] : a[r >> 4][r & 15];
        if constexpr (STORE) *p = v;
        else v = *p;
    }
}
// Lane l's points 32 l + i of a column in 16-byte slots, read or written (STORE): i = 16h + k at a[h][k], or i = 2m + h
// at a[h][m] (EVEN_ODD). (The 32 points of a row have no padding among them: ff_pad2(32 l + i) = ff_pad2(32 l) + i for
// i < 32, one base and constant offsets.)
template <bool STORE, bool EVEN_ODD = false>
__device__ __forceinline__ void ff_col32_rows(float2* col, int l, float2 (&a)[2][16]) {
    float2* const row = col + ff_pad2(32 * l);
#pragma unroll
    for (int i = 0; i < 32; i += 2) {
        float2* const p = row + i;
        float2& v0 = EVEN_ODD ? a[0][i >> 1] : a[i >> 4][i & 15];
        float2& v1 = EVEN_ODD ? a[1][i >> 1] : a[i >> 4][(i & 15) + 1];
        if constexpr (STORE) ff_sts2(p, v0, v1);
        else ff_lds2(p, v0, v1);
    }
}
// Lane l's twiddles of the second pass, u[m] = w^2m (u[0] unread), w = exp(-2 pi i l / 1024): w, w^2 and w^4 from
// the rows of the transform's pass 2 (T2, NS2: exp(-2 pi i 2^a k / 2048), a < 3), w^8 and w^16 by squares.
template <int T2, int NS2>
__device__ __forceinline__ float2 ff_col32_twiddles(const float2* __restrict__ tw, int l, float2 (&u)[16]) {
    const float2 w = __ldg(tw + T2 + NS2 + l);
    u[1] = __ldg(tw + T2 + 2 * NS2 + l);
    u[2] = __ldg(tw + T2 + 2 * NS2 + 2 * l);
    u[4] = ff_mul(u[2], u[2]);
    u[8] = ff_mul(u[4], u[4]);
    ff_twiddle_powers<16>(u);
    return w;
}
// ff_tile_wide's step 2 as 32 x 32: warp s, column s of CM = 1024 points (ff_pad2), lane l. Pass 1: points l + 32 r,
// their DFT of 32 to 32 l + r'. Pass 2: points l + 32 r times w^(r l), their DFT: bin c = l + 32 r' in registers,
// s + 16 c of the transform. The middle step as ff_tile_cols's (bins c < 512 in registers, r' < 16; the upper half
// through shared memory to the partner column 16 - s, ff_pair_sync), then the inverse as the forward: the lane's DFT
// of its bins, to l + 32 m1; the points 32 l + r times conj w^(r l) and their DFT, to point m1 + 32 m2 (both passes
// transposed, the twiddles moved across the transposition, from the first one's outputs to the second one's inputs,
// where ff_dft_tw fuses their products). With ff_dft4_tw and ff_dft32_join's fused twiddles, the kernel of the
// 32768 tile on 512 threads so executes 5.2% fewer instructions at K = 7921 (Nsight Compute on an H100, 2026-12-05:
// 187.5 M to 177.9 M; FP32 4.95 G to 4.64 G thread instructions) and runs 1.3-1.5% faster at K = 5001 to 8000
// (fused_ab.py): its time is in latency (no eligible warp in 52% of the cycles, four warps a scheduler), not in
// issuing.
template <int MB>
__device__ __forceinline__ void ff_wide_columns32(float2* buf, const float4* __restrict__ G,
                                                  const float2* __restrict__ tw, const float2* __restrict__ twi,
                                                  int tid) {
    constexpr int M = 1 << MB, CM = M / 16, CP = ff_pad2(CM);
    constexpr int T2 = ff_tw_offset(MB, 2), NS2 = ff_ns(MB, 2);
    static_assert(CM == 1024 && NS2 == 256 && ff_bits(MB, 2) == 3, "columns of 32 x 32; pass 2's rows at 2048");
    const int s = tid >> 5, l = tid & 31;
    float2* const col = buf + s * CP;
    float2 a[2][16];
    // pass 1
    ff_col32_io<false>(col, l, a);
    ff_dft16<false>(a[0]);
    ff_dft16<false>(a[1]);
    ff_dft32_join<false>(a);
    __syncwarp();
    ff_col32_rows<true>(col, l, a);
    __syncwarp();
    // pass 2
    ff_col32_io<false>(col, l, a);
    {
        float2 u[16];
        const float2 w = ff_col32_twiddles<T2, NS2>(tw, l, u);
#pragma unroll
        for (int m = 0; m < 16; ++m) a[1][m] = ff_mul(a[1][m], w);
        ff_dft_tw<16, false>(a[0], u);
        ff_dft_tw<16, false>(a[1], u);
    }
    ff_dft32_join<false>(a);
    // the middle step: the upper half (r' >= 16) stored for the partner, the lower half's pairs c = l + 32 k with
    // c' = 1023 - c in column p = 16 - s (column 0: 1024 - c; c = 0 and 512 their own partners)
#pragma unroll
    for (int k = 0; k < 16; ++k) col[ff_pad2(l + 32 * (16 + k))] = a[1][k];
    ff_pair_sync<32>(s);
    {
        // the partner c' = lp + 32 (31 - k), lp = 31 - l (column 0: 32 - l), at ff_pad2(lp) + 34 (31 - k) (lp <= 32):
        // one base, offsets that are constants
        const int lp = s == 0 ? 32 - l : 31 - l;
        float2* const theirs = buf + ((16 - s) & 15) * CP + ff_pad2(lp) + ff_pad2(32 * 31);
        const float4* const Pk = G + s * (CM / 2) + l;  // the pair table's entry of bin s + 16 c: Pk[32 k]
        const float2 ws = __ldg(tw + s);                // exp(-2 pi i s / N)
        const float2* const twl = tw + T2 + l;          // exp(-2 pi i 16 (l + 32 k') / N), k' < 8: twl[32 k']
        const float h = 0.70710678118654752440f;
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            // W = exp(-2 pi i (s + 16 c) / N), c = l + 32 k: c mod 256 from pass 2's row 0, c >= 256 times
            // exp(-2 pi i / 8)
            float2 W = ff_mul(ws, __ldg(twl + 32 * (k & 7)));
            if (k >= 8) W = ff_mul(W, make_float2(h, -h));
            float4 gk, gm;
            ff_pair_coefs(__ldg(Pk + 32 * k), W, gk, gm);
            if (k == 0 && (s | l) == 0) {  // bin 0
                ff_middle_self(a[0][0], gk);
            } else {
                float2* const pm = theirs - ff_pad2(32 * k);
                float2 zm = *pm;
                ff_middle(a[0][k], zm, gk, gm);
                *pm = zm;
            }
        }
        if ((s | l) == 0) {  // bin M/2 = 16 CM/2 of column 0, its own partner (W = -i)
            float4 gc, unused;
            ff_pair_coefs(__ldg(G + M / 2), make_float2(0.0f, -1.0f), gc, unused);
            float2 zc = col[ff_pad2(CM / 2)];
            ff_middle_self(zc, gc);
            col[ff_pad2(CM / 2)] = zc;
        }
    }
    ff_pair_sync<32>(s);  // (the partner's results in this column's upper half)
    const int t2 = ff_tid(), l2 = t2 & 31;  // (read anew: its addresses not held through the step)
    float2* const col2 = buf + (t2 >> 5) * CP;
#pragma unroll
    for (int k = 0; k < 16; ++k) a[1][k] = col2[ff_pad2(l2 + 32 * (16 + k))];
    // the inverse as the forward, decimated in time: a lane's bins c = l + 32 r' (r' = 16h + k at a[h][k]), their
    // DFT over r' to l + 32 m1; lane l then takes the points 32 l + r, r = 2m + h, times conj w^(r l) (the twiddles
    // on this side, where ff_dft_tw fuses them), their DFT to l + 32 m2: point m1 + 32 m2 (pass 2, then pass 1,
    // transposed, with the twiddles moved from the outputs of the first to the inputs of the second)
    {
        float2 b[2][16];
#pragma unroll
        for (int r = 0; r < 32; ++r) b[r & 1][r >> 1] = a[r >> 4][r & 15];
        ff_dft16<true>(b[0]);
        ff_dft16<true>(b[1]);
        ff_dft32_join<true>(b);
        ff_col32_io<true, false>(col2, l2, b);
    }
    __syncwarp();
    ff_col32_rows<false, true>(col2, l2, a);
    {
        float2 u[16];
        const float2 w = ff_col32_twiddles<T2, NS2>(twi, l2, u);
#pragma unroll
        for (int m = 0; m < 16; ++m) a[1][m] = ff_tw<true>(a[1][m], w);
        ff_dft_tw<16, true>(a[0], u);
        ff_dft_tw<16, true>(a[1], u);
    }
    ff_dft32_join<true>(a);
    __syncwarp();
    ff_col32_io<true, false>(col2, l2, a);
}

// One tile of 2^15 samples on a block of B0/2 = M/32 = 512 threads, each taking two butterflies where ff_tile_cols's
// take one (a register budget of 128 where that has 64): ff_tile_cols's four-step, its columns of CM = 1024 points
// one warp's each (warp s, column s), in the layout of ff_pad2. Thread t takes the first pass's butterflies j = 2t + u
// (u < 2; ff_first_pass with W = 2), multiplies output s by W^(j s) and stores the pair at points 2t, 2t + 1 of column
// s (a 16-byte slot). Warp s then transforms column s as 32 x 32, takes the middle step with the partner column
// (ff_pair_sync: warps s and 16 - s) and runs the inverse through both passes again, transposed (ff_wide_columns32);
// after the block's barrier thread t reads points 2t and 2t + 1 of every column, multiplies by the conjugate twiddles,
// takes the inverse DFTs of 16 and writes y at the points 2t + u + B0 m (ff_tile_outputs_points with W = 2). Barriers:
// the block's three (the peak's and two), the columns' __syncwarp, and two of each pair of columns. (PAIRS:
// ff_first_pass's.)
// On a block of several tiles (ff_fused_kernel's grid of one block a multiprocessor) the first pass may read the
// tile's first rows from shared memory, where the last tile put them (ff_prefetch_on: `have`, `pre`, `bar` and
// `phase`), thread 0 then hands the first rows of the next tile (from `xn`, where not null) to a bulk copy, and the
// outputs leave through one (ff_outputs_bulk, `bulk`), whose read of the buffer thread 0 waits for before the next
// tile's first write to it. (L2 prefetches of the block's next tile instead, a line a thread or one bulk prefetch,
// made it 5-9% slower on an H100: benchmarks/results/H100-2026-12-05-fused-since-bfe2a10/; a prefetch a wave on at
// the tile's start, 8% on an H200.)
template <int LOGN, bool PAIRS = false>
__device__ __forceinline__ void ff_tile_wide(const float* __restrict__ xc, float* __restrict__ yt,
                                             const float4* __restrict__ G, const float2* __restrict__ tw,
                                             const float2* __restrict__ twi, sc_i64 L, int K, sc_i64 s0, int nv,
                                             const int* __restrict__ tap_shift, int safe, float2* buf, int* red,
                                             bool bulk, bool have = false, float4* pre = nullptr,
                                             unsigned long long* bar = nullptr, unsigned phase = 0,
                                             const float* __restrict__ xn = nullptr) {
    constexpr int MB = LOGN - 1, M = 1 << MB, B0 = M / 16, CM = B0, CP = ff_pad2(CM);
    static_assert(CM == 1024 && 16 * CP == ff_pad(M) && ff_cols_row<MB>(0) % 2 == 0 && ff_cols_row<MB>(1) % 2 == 0 &&
                      ff_cols_row<MB>(2) % 2 == 0,
                  "columns of 1024 points; the columns' layout; twiddle rows whose pairs are 16-byte aligned");
    const int tid = ff_tid();
    // 1. the first pass, twiddled into the columns
    float2 v[32];
    {
        const int es = ff_first_pass<LOGN, PAIRS, 2>(xc, L, s0, tid, safe, red, v, have ? pre : nullptr, bar,
                                                     phase);
        if (tid == 0) red[31] = es;  // (read back for the outputs: a register held across the columns otherwise)
    }
    // the next tile's first rows into `pre` while this one computes (ff_prefetch_on; every thread's reads of them
    // done: the first pass's barrier)
    if (xn != nullptr && tid == 0) bulk_load(pre, xn, FF_PREFETCH_ROWS * 16u * (B0 / 2), bar);
    if (bulk) {  // (the last tile's bulk copy has read the buffer before anything is written to it)
        ff_bulk_wait();
        __syncthreads();
    }
    {
        float2 c[2][3];
        ff_wide_cols_rows<MB>(tw, tid, c);
#pragma unroll
        for (int u = 0; u < 2; ++u) ff_cols_twiddle_w(v + 16 * u, c[u][0], c[u][1], c[u][2], ff_wide_w8<MB>(tw, tid, u));
#pragma unroll
        for (int s = 0; s < 16; ++s) ff_sts2(buf + s * CP + ff_pad2(2 * tid), v[s], v[16 + s]);
    }
    __syncthreads();
    FF_MARK(2, 0);
    sc_grid_wait();  // (G and tap_shift ready: conv1d_fft_fused's launch)
    // 2. column s: forward, the middle step, inverse
    ff_wide_columns32<MB>(buf, G, tw, twi, tid);
    __syncthreads();
    FF_MARK(3, 0);
    // 3. points 2t and 2t + 1 of every column, the conjugate twiddles and the inverse DFTs of 16: y[2p] + i y[2p+1] at
    // p = 2t + u + B0 m
    const int et = tap_shift ? __ldg(tap_shift) : 0, es = red[31];
#pragma unroll
    for (int s = 0; s < 16; ++s) ff_lds2(buf + s * CP + ff_pad2(2 * tid), v[s], v[16 + s]);
    {
        float2 c[2][3];
        ff_wide_cols_rows<MB>(twi, tid, c);
#pragma unroll
        for (int u = 0; u < 2; ++u)
            ff_cols_twiddle_idft16_w(v + 16 * u, c[u][0], c[u][1], c[u][2], ff_wide_w8<MB>(twi, tid, u));
    }
    FF_MARK(4, __float_as_int(v[31].x) ^ __float_as_int(v[0].y));
    if (!bulk || !ff_outputs_bulk<B0>(v, tid, yt, K, nv, es, et, buf))
        ff_tile_outputs_points<B0, 2>(v, tid, yt - (K - 1), K, nv, es, et);
}

// The same on a block of fewer than M/16 threads, through two buffers: the tile loaded into shared memory, the
// passes (ff_fft), the middle step, the inverse and the outputs, each its own step.
template <int LOGN>
__device__ __forceinline__ void ff_tile_two(const float* __restrict__ xc, float* __restrict__ yc,
                                            const float4* __restrict__ G, const float2* __restrict__ tw, sc_i64 L,
                                            int K, sc_i64 s0, sc_i64 t0, sc_i64 nv, int et, int safe, float2* buf0,
                                            float2* buf1, int* red) {
    constexpr int N = 1 << LOGN, M = N / 2;
    const int T = (int)blockDim.x;
    const int tid = ff_tid();
    // 1. the tile and its peak. Sample i is float i of the pair layout (point n = (x[2n], x[2n+1])), at float
    // i + 2 (i / 32) of the padded buffer: read with unit stride, stored without bank conflicts. FF_LOADS loads in
    // flight per thread: a plain loop would wait out the memory latency once per sample.
    float* const f0 = reinterpret_cast<float*>(buf0);
    int mb = 0;
    const bool inside = s0 >= 0 && s0 + N <= L;
    for (int i0 = tid; i0 < N; i0 += FF_LOADS * T) {
        float a[FF_LOADS];
#pragma unroll
        for (int u = 0; u < FF_LOADS; ++u) {
            const int i = i0 + u * T;
            a[u] = i >= N ? 0.0f : inside ? xc[s0 + i] : sc_load_or_zero(xc, s0 + i, L);
        }
#pragma unroll
        for (int u = 0; u < FF_LOADS; ++u) {
            const int i = i0 + u * T;
            if (i < N) f0[i + 2 * (i >> 5)] = a[u];
            mb = max(mb, __float_as_int(a[u]) & 0x7fffffff);
        }
    }
    const int es = ff_tile_shift(ff_block_max(mb, red), safe);  // (its barrier also publishes the tile)
    if (es != 0) {  // extreme magnitude: the tile divided by 2^es
        const OsScale<float> down(-es);
        for (int n = tid; n < M; n += T) {
            const float2 v = buf0[ff_pad(n)];
            buf0[ff_pad(n)] = make_float2(down(v.x), down(v.y));
        }
        __syncthreads();
    }
    // 2. forward transform
    float2* Z = ff_fft<false, LOGN - 1>(buf0, buf1, tw);
    // 3. the middle step: bins k and M-k by one thread
    ff_middle_batched<LOGN>(Z, G, tw, tid, T);
    __syncthreads();
    // 4. inverse transform (unscaled: the table holds the 1/N), y[2n] + i y[2n+1]
    const float* Yr = reinterpret_cast<const float*>(ff_fft<true, LOGN - 1>(Z, Z == buf0 ? buf1 : buf0, tw));
    // 5. the valid outputs
    const int eo = es + et;
    const OsScale<float> up(eo);
    for (int r0 = tid; r0 < nv; r0 += FF_LOADS * T) {  // FF_LOADS shared-memory reads before the stores
        float v[FF_LOADS];
#pragma unroll
        for (int u = 0; u < FF_LOADS; ++u) {
            const int r = r0 + u * T, f = K - 1 + r;  // float f of the pair layout
            v[u] = r < nv ? Yr[f + 2 * (f >> 5)] : 0.0f;
        }
#pragma unroll
        for (int u = 0; u < FF_LOADS; ++u) {
            const int r = r0 + u * T;
            if (r < nv) yc[t0 + r] = eo != 0 ? up(v[u]) : v[u];
        }
    }
    __syncthreads();  // the buffers are the next tile's
}

// The filter's coefficient table for conv1d_fft_fused<LOGN, *> from taps on the device, in one launch (the
// launcher's path for taps it has no host copy of; sigconv/backends/overlap_save.py computes the same in float64
// from host taps, overlap_save.fused_host_table): e, the exponent of the taps' peak (max |w| = m 2^e, 0.5 <= m < 1; 0
// when the taps are all zero or one is inf/NaN), is folded into the table where |e| <= SIGCONV_FFT_FUSED_FOLD_MAX
// (limits.cuh), which then holds H times 2^e, and tap_shift[0] = 0; else tap_shift[0] = e and the table holds H:
// H[k] = rfft(h)[k] / N for k <= M, h[i] = w[K-1-(i-delay)] 2^-e for delay <= i <
// K + delay, zero elsewhere up to N (the fft variant's spectrum, delayed by `delay` samples: that of the taps with
// `delay` zeros after them, which the launcher adds so that its tiles start on even samples, see
// sigconv/backends/overlap_save.py, fused_alignment), and from it G[k] = (a[k], b[k]), k < M (ff_middle), all in
// float32; on the tiles of ff_reads_h
// the pair table instead, M/2 + 1 float4 at its start (of the same M float4; ff_pair_index). The real h is
// transformed as M complex points (h[2n], h[2n+1]) by the tile kernel's passes, then unpacked: X[k] = E + W O,
// X[M-k] = conj(E - W O).
// last (or null): the taps G and tap_shift were last computed from, kept by the launcher with them (last[0] = their
// count K | delay << 24, 0 for none yet; last[1 + j] = the bit pattern of tap j, M + 1 ints in all). Taps bit for bit
// the same with the same delay (the launcher's next call with the same filter) leave G as it is: one read of the K
// taps instead of the transform.
// Launch: one block of M/16 threads (at least 32), dynamic shared memory 8*ff_pad(M) + 128 bytes.
template <int LOGN>
__global__ void __launch_bounds__(LOGN > SIGCONV_FFT_FUSED_MAX_LOGN ? 1024 : 512)
    conv1d_fft_fused_spectrum(const float* __restrict__ w, int K, int delay, const float2* __restrict__ tw,
                              float4* __restrict__ G, int* __restrict__ tap_shift, int* __restrict__ last) {
    constexpr int MB = LOGN - 1, N = 1 << LOGN, M = N / 2, B0 = M / 16, MP = ff_pad(M);
    extern __shared__ float4 sc_smem4[];
    float2* const buf = reinterpret_cast<float2*>(sc_smem4);
    int* const red = reinterpret_cast<int*>(buf + MP);
    const int T = (int)blockDim.x, tid = (int)threadIdx.x;
    sc_launch_dependents();  // (the tile kernel after it may start its loads: it waits for G, conv1d_fft_fused)
    const int tag = K | (delay << 24);  // (the record's first entry: the count and the delay, K < 2^24)
    if (last != nullptr && last[0] == tag) {  // (the same in every thread)
        int differ = 0;
        for (int j = tid; j < K; j += T) differ |= __float_as_int(w[j]) != last[1 + j];
        if (!__syncthreads_or(differ)) return;  // (its barrier: every read of `last` done before the writes below)
    }
    int mb = 0;
    for (int j = tid; j < K; j += T) mb = max(mb, __float_as_int(w[j]) & 0x7fffffff);
    mb = ff_block_max(mb, red);
    const int e = mb >= 0x7f800000 || mb == 0 ? 0 : os_frexp_exp<float>(__int_as_float(mb));
    if (tid < B0) {  // the first pass's butterfly tid from the taps, reversed, delayed and scaled
        const OsScale<float> down(-e);  // (subnormal taps too: ldexpf under -ftz=true flushes them)
        float2 v[16];
#pragma unroll
        for (int r = 0; r < 16; ++r) {
            const int g = 2 * (tid + r * B0) - delay;  // h[f] = w[K - 1 - g], g = f - delay in [0, K)
            v[r] = make_float2((unsigned)g < (unsigned)K ? down(w[K - 1 - g]) : 0.0f,
                               (unsigned)(g + 1) < (unsigned)K ? down(w[K - 2 - g]) : 0.0f);
        }
        ff_dft<16, false>(v);
        ff_store<16, 1>(buf, tid, v);
    }
    __syncthreads();
    ff_passes_inplace<false, MB, 1, ff_passes(MB)>(buf, tw, tid & (B0 - 1), tid < B0);
    // 1/N, times 2^e where |e| <= SIGCONV_FFT_FUSED_FOLD_MAX (the table of the taps' own spectrum and a tap shift of
    // 0: overlap_save.fused_host_table's rule): exact powers of two
    const int fold = e >= -SIGCONV_FFT_FUSED_FOLD_MAX && e <= SIGCONV_FFT_FUSED_FOLD_MAX ? e : 0;
    const float sc = __int_as_float((127 + fold - LOGN) << 23);
    for (int k = tid; k <= M / 2; k += T) {
        const float2 za = buf[ff_pad(k)], zb = buf[ff_pad((M - k) & (M - 1))];
        const float2 E = make_float2(0.5f * (za.x + zb.x), 0.5f * (za.y - zb.y));
        const float2 D = make_float2(0.5f * (za.x - zb.x), 0.5f * (za.y + zb.y));
        const float2 W = __ldg(tw + k);                                  // exp(-2 pi i k / N) = (c, -s)
        const float2 WO = ff_mul(W, make_float2(D.y, -D.x));             // W O, O = D / i
        const float2 xk = ff_add(E, WO), xm = ff_conj(ff_sub(E, WO));    // X[k], X[M-k] (k = 0: X[M])
        const float2 hk = make_float2(xk.x * sc, xk.y * sc), hm = make_float2(xm.x * sc, xm.y * sc);
        // the pair's (S, D) (ff_pair_coefs; k = 0: with H[M], k = M/2: with itself)
        const float4 p = make_float4(hk.x + hm.x, hk.y - hm.y, hk.x - hm.x, hk.y + hm.y);
        if constexpr (ff_reads_h(LOGN)) {  // the pair table (every k < M/2 the lower bin of its pair)
            G[ff_pair_index<LOGN>(k)] = p;
        } else {
            float4 gk, gm;
            ff_pair_coefs(p, W, gk, gm);
            G[k] = gk;
            if (k != 0 && 2 * k != M) G[M - k] = gm;
        }
    }
    if (tid == 0) tap_shift[0] = e - fold;
    if (last != nullptr) {
        for (int j = tid; j < K; j += T) last[1 + j] = __float_as_int(w[j]);
        if (tid == 0) last[0] = tag;
    }
}

// ONE: the block has M/16 threads or more and runs ff_tile_one, else ff_tile_two (the launcher picks the
// instantiation by its block; two kernels, so that neither path's registers are the other's). Bounds of 1024
// threads: every block size launches (64K registers per block); ptxas (sm_90) fits either in 64 registers or fewer
// with no spills. PAIRS (on tiles of 2^SIGCONV_FFT_FUSED_PAIRS_LOGN samples, ONE): every tile of every channel starts
// on an 8-byte boundary of x and L is even (the launcher's choice: sigconv/backends/overlap_save.py, fused_pairs), and
// the first pass reads a point's two samples as one 8-byte load (on an H200 4.7% faster at K = 7921; on the 16384
// tile, where ptxas spills 20 bytes so, -1.3% to +2.2%: not built). WIDE: the longest tile on M/32 = 512 threads, two
// butterflies a thread (ff_tile_wide; FF_WIDE_MAX_REGISTERS registers, the kernels below). G and tap_shift may be the
// output of the kernel before it on the stream (conv1d_fft_fused_spectrum, which lets it start early:
// sc_launch_dependents): a tile in place reads them only after its first pass and sc_grid_wait, the two-buffer tile
// before anything else, so that under the launcher's programmatic dependent launch the first blocks load and
// transform their tiles while that kernel runs.
template <int LOGN, bool ONE, bool PAIRS, bool WIDE>
__device__ __forceinline__ void ff_fused_kernel(const float* __restrict__ x, float* __restrict__ y,
                                                const float4* __restrict__ G, const float2* __restrict__ tw,
                                                const float2* __restrict__ twi, int C, sc_i64 L, int K, sc_i64 pad,
                                                sc_i64 out_len, sc_i64 ntiles, const int* __restrict__ tap_shift,
                                                int safe) {
    static_assert(LOGN >= SIGCONV_FFT_FUSED_MIN_LOGN &&
                      LOGN <= (ONE ? SIGCONV_FFT_FUSED_ONE_MAX_LOGN : SIGCONV_FFT_FUSED_MAX_LOGN),
                  "tile length");
    static_assert(!PAIRS || (ONE && LOGN == SIGCONV_FFT_FUSED_PAIRS_LOGN), "8-byte loads: the PAIRS tile, in place");
    static_assert(!WIDE || (ONE && LOGN == SIGCONV_FFT_FUSED_ONE_MAX_LOGN), "ff_tile_wide: the longest tile");
    constexpr int N = 1 << LOGN, M = N / 2, MP = ff_pad(M);
    extern __shared__ float4 sc_smem4[];
    // (the other instantiation's block: nothing written)
    if (WIDE ? (int)blockDim.x != M / 32 : ONE != ((int)blockDim.x * 16 >= M)) return;
    float2* const buf0 = reinterpret_cast<float2*>(sc_smem4);
    int* red = reinterpret_cast<int*>(buf0 + (ONE ? MP : 2 * MP));
    const sc_i64 V = N - K + 1;
    if constexpr (!ONE) sc_grid_wait();  // (the tile kernels in place wait after their first pass)
    const int et = ONE || !tap_shift ? 0 : tap_shift[0];  // (ff_tile_one reads it itself)
    // block (x, y) takes tiles x, x + gridDim.x, ... of channels y, y + gridDim.y, ...: nothing per channel held
    // across tiles, and no division (the 64-bit one is a call, whose clobbered registers NVRTC's build of the 1024 tile
    // spilled at the kernel's start; the launcher's grid has a block a tile, the inner loop one turn). The tile's index
    // in 32 bits (fewer than 2^31 tiles a channel: the launcher's fused_plan; in 64, nvcc's build of ff_tile_wide with
    // pairs spilled 4 bytes).
    if constexpr (WIDE && PAIRS) {
        // a grid of one row walks the tiles of every channel as one sequence (item c * ntiles + t), so that a grid of
        // one block a multiprocessor (the launcher's for many tiles: overlap_save.fused_persistent) shares them
        // evenly; else as below. A block of several tiles prefetches the next one (ff_prefetch_on) and stores through
        // bulk copies (ff_outputs_bulk). (Not with float loads: their tiles' alignments alternate where the stride V is
        // odd, and a block of 132 would take tiles of one kind only, the blocks of the unaligned ones the kernel's
        // time, 17.5% slower at K = 8000 on an H100, and the code here is 2.5-3.0% slower on a grid of a block a tile
        // than the loop below: benchmarks/results/H100-2026-12-05-wide-tile-prefetch/.)
        const unsigned nt = (unsigned)ntiles, gx = gridDim.x;
        const bool flat = gridDim.y == 1;
        const unsigned long long total = (unsigned long long)ntiles * (unsigned)C, g = (unsigned long long)gx * gridDim.y;
        const unsigned r = ff_stagger(total, blockIdx.y * gx + blockIdx.x, g);
        const bool bulk = total > g;  // (a block of several tiles: ff_outputs_bulk)
        unsigned c = flat ? r / nt : blockIdx.y, t = flat ? r - c * nt : blockIdx.x;
        if (t >= nt) c = (unsigned)C;  // (a block past the tiles: the launcher's grids have none)
        const bool pf = ff_prefetch_on<LOGN, PAIRS>();
        unsigned long long* const bar = reinterpret_cast<unsigned long long*>(red + 32);
        float4* const pre = reinterpret_cast<float4*>(bar + 2);
        if (pf && threadIdx.x == 0) bulk_bar_init(bar);  // (used after the first tile's first barrier)
        bool have = false;    // (this tile's first rows in `pre`)
        unsigned phase = 0;   // (the parity of the mbarrier's phase that its copy completes)
        while (c < (unsigned)C) {
            const sc_i64 t0 = (sc_i64)t * V, nv = out_len - t0 < V ? out_len - t0 : V;  // (nv <= V < N)
            unsigned cn = c, tn = t + gx;  // the block's next tile (t < 2^31 and gx < 2^31)
            if (tn >= nt) {
                if (flat) {
                    const unsigned q = tn / nt;
                    cn += q;
                    tn -= q * nt;
                } else {
                    cn += gridDim.y;
                    tn = blockIdx.x;
                }
            }
            // its first rows prefetched where it lies wholly inside x, 16-byte aligned (ff_first_pass's 16-byte path)
            const float* xn = nullptr;
            if (pf && cn < (unsigned)C) {
                const sc_i64 sn = (sc_i64)tn * V - pad;
                const float* const p = x + (sc_i64)cn * L + sn;
                if (sn >= 0 && L - sn >= N && (reinterpret_cast<unsigned long long>(p) & 15) == 0) xn = p;
            }
            ff_tl_begin((sc_i64)c * ntiles + t);  // (FF_TIMELINE's row; nothing otherwise)
            ff_tile_wide<LOGN, PAIRS>(x + (sc_i64)c * L, y + (sc_i64)c * out_len + t0, G, tw, twi, L, K, t0 - pad,
                                      (int)nv, tap_shift, safe, buf0, red, bulk, have, pre, bar, phase, xn);
            ff_tl_end();
            if (have) phase ^= 1u;
            have = xn != nullptr;
            c = cn;
            t = tn;
        }
        ff_bulk_wait();  // (the block's last copy has read the buffer before the block ends)
        return;
    }
    if constexpr (WIDE)
        ff_stagger((unsigned long long)ntiles * (unsigned)C, blockIdx.y * gridDim.x + blockIdx.x,
                   (unsigned long long)gridDim.x * gridDim.y);
    for (int c = (int)blockIdx.y; c < C; c += (int)gridDim.y)
    for (unsigned t = blockIdx.x; t < (unsigned)ntiles; t += gridDim.x) {
        const float* xc = x + (sc_i64)c * L;
        float* yc = y + (sc_i64)c * out_len;
        const sc_i64 t0 = (sc_i64)t * V, nv = out_len - t0 < V ? out_len - t0 : V;  // (nv <= V < N)
        if constexpr (WIDE) {
            ff_tl_begin((sc_i64)c * ntiles + t);  // (FF_TIMELINE's row; nothing otherwise)
            ff_tile_wide<LOGN, PAIRS>(xc, yc + t0, G, tw, twi, L, K, t0 - pad, (int)nv, tap_shift, safe, buf0, red,
                                      false);
            ff_tl_end();
        } else if constexpr (ONE && ff_cols(LOGN)) {
            ff_tl_begin((sc_i64)c * ntiles + t);
            ff_tile_cols<LOGN, PAIRS>(xc, yc + t0, G, tw, twi, L, K, t0 - pad, (int)nv, tap_shift, safe, buf0, red);
            ff_tl_end();
        } else if constexpr (ONE)
            ff_tile_one<LOGN>(xc, yc + t0, G, tw, twi, L, K, t0 - pad, (int)nv, tap_shift, safe, buf0, red);
        else
            ff_tile_two<LOGN>(xc, yc, G, tw, L, K, t0 - pad, t0, nv, et, safe, buf0, buf0 + MP, red);
    }
}

// The kernels: ff_fused_kernel under bounds of 1024 threads, and WIDE under a cap of FF_WIDE_MAX_REGISTERS registers
// where that is set, else bounds of 512 threads (two templates of one name, the WIDE parameter picking one:
// ff_enable_if; __maxnreg__ and __launch_bounds__ do not combine, the first overriding the second).
template <bool B> struct ff_enable_if {};
template <> struct ff_enable_if<true> { using type = void; };
#define FF_FUSED_PARAMS                                                                                              \
    const float* __restrict__ x, float* __restrict__ y, const float4* __restrict__ G, const float2* __restrict__ tw, \
        const float2* __restrict__ twi, int C, sc_i64 L, int K, sc_i64 pad, sc_i64 out_len, sc_i64 ntiles,          \
        const int* __restrict__ tap_shift, int safe
template <int LOGN, bool ONE, bool PAIRS = false, bool WIDE = false>
__global__ typename ff_enable_if<!WIDE>::type __launch_bounds__(1024) conv1d_fft_fused(FF_FUSED_PARAMS) {
    ff_fused_kernel<LOGN, ONE, PAIRS, false>(x, y, G, tw, twi, C, L, K, pad, out_len, ntiles, tap_shift, safe);
}
#if FF_WIDE_MAX_REGISTERS
#define FF_WIDE_BOUNDS __maxnreg__(FF_WIDE_MAX_REGISTERS)
#else
#define FF_WIDE_BOUNDS __launch_bounds__(512)
#endif
template <int LOGN, bool ONE, bool PAIRS = false, bool WIDE = false>
__global__ typename ff_enable_if<WIDE>::type FF_WIDE_BOUNDS conv1d_fft_fused(FF_FUSED_PARAMS) {
    ff_fused_kernel<LOGN, ONE, PAIRS, true>(x, y, G, tw, twi, C, L, K, pad, out_len, ntiles, tap_shift, safe);
}
#undef FF_FUSED_PARAMS
#undef FF_WIDE_BOUNDS

#endif  // SIGCONV_FFT_FUSED_CUH
