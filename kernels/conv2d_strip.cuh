// conv2d_strip.cuh: the single-channel fast path of kernels/conv2d.cu (spectrogram smoothing), variant `strip`.
// Each thread owns 4 output columns and a vertical strip of STRIP_ROWS rows; input rows stream through a
// register sliding window, the taps sit in __constant__ memory, the kernel size is fixed at compile time
// (sigconv.backends.cuda2d.launch_strip prepends the defines; the launch grid is cuda2d.strip_grid). Loads read
// the image extended by the compiled boundary (C2D_BOUNDARY, conv2d_common.cuh; `fill` is the constant).
// No shared memory, no barriers: tests/test_kernel_build.py compiles this exact source for the host (g++,
// SIGCONV_HOST_EMULATION, AddressSanitizer) and runs every block and thread of a launch on the CPU.
#ifndef SIGCONV_CONV2D_STRIP_CUH
#define SIGCONV_CONV2D_STRIP_CUH
#include "conv2d_common.cuh"
#include "limits.cuh"

#ifndef STRIP_KH
#define STRIP_KH 3      // strip kernel: kernel height
#endif
#ifndef STRIP_KW
#define STRIP_KW 3      // strip kernel: kernel width
#endif
#ifndef STRIP_SH
#define STRIP_SH 3      // strip kernel: (-px) mod 4
#endif
#ifndef STRIP_ROWS
#define STRIP_ROWS SIGCONV_STRIP_ROWS  // strip kernel: output rows per thread
#endif
// Wrap/symm builds: every thread loads its rows through the rule's chunk map (StripExtNear, inlined, the fill
// build's thread mapping); the ring's builds are compiled to the fill build's occupancy (cuda2d._fused). A build
// with the plain loads for the threads whose window lies inside the image and edge functions for the others took
// 1.4 to 2.9 x the zero-fill time on an H200 (1024 x 1024 to 2048 x 2048, 7x7 to 15x15: a launch of a wave or less
// ends with its slowest thread; 1.01-1.40 x on the spectrogram); through the chunk map, 0.76-0.99 x.

// Taps of the current call (copied in stream order by the launcher before each launch).
__constant__ float c_taps[STRIP_KH * STRIP_KW];

// Input values one thread needs from a row: columns [cx - px, cx - px + 3 + KW) after STRIP_SH, as float4s.
#define STRIP_NV ((((STRIP_SH + 3 + STRIP_KW) + 3) / 4) * 4)

// Row loaders of strip_body: load(v, xp, gr) sets v[k] = xe[gr, ca + k] for the thread's STRIP_NV columns.
// The plain loads (every thread of a fill build): 16-byte chunks where the row allows, the fill constant outside
// the image.
struct StripPlain {
    int H, W, ca;
    bool vec;  // W % 4 == 0 and x 16-byte aligned: a chunk (ca + 4q, a multiple of 4) is wholly in or out
    float fill;
    __device__ __forceinline__ void operator()(float (&v)[STRIP_NV], const float* __restrict__ xp, int gr) const {
        const int er = c2d_extend(gr, H, SIGCONV_BOUNDARY_FILL);  // gr, or -1 outside the image
        const float* rp = xp + (i64)(er < 0 ? 0 : er) * W;
#pragma unroll
        for (int q = 0; q < STRIP_NV / 4; ++q) {
            const int gc = ca + 4 * q;
            float4 t = make_float4(fill, fill, fill, fill);
            if (er >= 0) {
                if (vec && gc >= 0 && gc < W) {
                    t = __ldg(reinterpret_cast<const float4*>(rp + gc));
                } else if (!vec) {
                    t.x = (gc >= 0 && gc < W) ? __ldg(rp + gc) : fill;
                    t.y = (gc + 1 >= 0 && gc + 1 < W) ? __ldg(rp + gc + 1) : fill;
                    t.z = (gc + 2 >= 0 && gc + 2 < W) ? __ldg(rp + gc + 2) : fill;
                    t.w = (gc + 3 >= 0 && gc + 3 < W) ? __ldg(rp + gc + 3) : fill;
                }
            }
            v[4 * q] = t.x; v[4 * q + 1] = t.y; v[4 * q + 2] = t.z; v[4 * q + 3] = t.w;
        }
    }
};

// wrap / symm (B) for a thread whose rows stay within one period of the image, with 16-byte rows (W % 4 == 0):
// each chunk's place computed once (C2dChunk), the row by selects; every load unconditional.
template <int B>
struct StripExtNear {
    int H;
    int W;
    C2dChunk ch[STRIP_NV / 4];
    __device__ __forceinline__ StripExtNear(int H_, int W_, int ca, bool) : H(H_), W(W_) {
#pragma unroll
        for (int q = 0; q < STRIP_NV / 4; ++q) ch[q] = c2d_vchunk<B>(ca + 4 * q, W);
    }
    __device__ __forceinline__ void operator()(float (&v)[STRIP_NV], const float* __restrict__ xp, int gr) const {
        const float* rp = xp + (i64)c2d_extend_near<B>(gr, H) * W;
#pragma unroll
        for (int q = 0; q < STRIP_NV / 4; ++q) {
            const float4 t = c2d_ld_chunk<B>(rp, ch[q]);
            v[4 * q] = t.x; v[4 * q + 1] = t.y; v[4 * q + 2] = t.z; v[4 * q + 3] = t.w;
        }
    }
};

// wrap / symm (B), any other thread (W % 4 != 0, or rows beyond one period: a kernel larger than the image): a column
// index per value computed once; the row by selects where the thread's rows lie within one period (NearRows), else
// through c2d_extend (its modulo code, unrolled over the ring's rows, took 9x9 on 1024 x 1023 to 1.06-1.10 x the
// fill time on an H100 and 1.16 x on an H200; by selects, 0.98-1.02 x on the H100).
template <int B, bool NearRows>
struct StripExtCols {
    int H;
    int W;
    int col[STRIP_NV];
    __device__ __forceinline__ StripExtCols(int H_, int W_, int ca, bool) : H(H_), W(W_) {
#pragma unroll
        for (int k = 0; k < STRIP_NV; ++k) col[k] = c2d_extend(ca + k, W, B);
    }
    __device__ __forceinline__ void operator()(float (&v)[STRIP_NV], const float* __restrict__ xp, int gr) const {
        const int er = NearRows ? c2d_extend_near<B>(gr, H) : c2d_extend(gr, H, B);
        const float* rp = xp + (i64)er * W;
#pragma unroll
        for (int k = 0; k < STRIP_NV; ++k) v[k] = __ldg(rp + col[k]);
    }
};

// Thread: output columns cx..cx+3 (cx = 4*(global x index)), rows [r0, r0 + nout) of every plane, rows loaded by
// `load`. Input row s (relative to r0 - py) contributes tap row i to output row o = s - i. Accumulators form a
// ring of STRIP_KH rows: output row o lives in slot o % KH. The loop over s is unrolled by KH so that every slot
// index is a compile-time constant; after row s, output row s - KH + 1 is complete: stored and its slot zeroed
// (rows o < 0 are zeroed without being stored, so the ring starts clean).
template <typename Load>
__device__ __forceinline__ void strip_body(const float* __restrict__ x, float* __restrict__ y, int N, int H, int W,
                                           int py, int Ho, int Wo, int cx, int r0, int nin, bool vst, float bias,
                                           const Load& load) {
    FOR_PLANES(z, N) {
        const float* xp = x + (i64)z * H * W;
        float* yp = y + (i64)z * Ho * Wo;
        float acc[STRIP_KH][4];
#pragma unroll
        for (int k = 0; k < STRIP_KH; ++k)
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[k][b] = 0.f;
#if STRIP_KH <= SIGCONV_STRIP_RING_MAX_KH && STRIP_KH * STRIP_KW <= SIGCONV_STRIP_RING_MAX_TAPS
        for (int base = 0; base < nin; base += STRIP_KH) {
#pragma unroll
            for (int u = 0; u < STRIP_KH; ++u) {
                const int s = base + u;
                if (s >= nin) break;
                float v[STRIP_NV];
                load(v, xp, r0 - py + s);
                // Tap row i feeds output row s - i, slot (u - i) mod KH (base is a multiple of KH).
#pragma unroll
                for (int i = 0; i < STRIP_KH; ++i) {
                    const int slot = (u - i + STRIP_KH) % STRIP_KH;
#pragma unroll
                    for (int j = 0; j < STRIP_KW; ++j) {
                        const float t = c_taps[i * STRIP_KW + j];
#pragma unroll
                        for (int b = 0; b < 4; ++b) acc[slot][b] = fmaf(t, v[STRIP_SH + b + j], acc[slot][b]);
                    }
                }
                // Output row o = s - (KH-1) is complete (slot (u+1) mod KH).
                const int done = (u + 1) % STRIP_KH;
                const int o = s - (STRIP_KH - 1);
                if (o >= 0) c2d_store4(yp + (i64)(r0 + o) * Wo + cx, acc[done], bias, cx, Wo, vst);
#pragma unroll
                for (int b = 0; b < 4; ++b) acc[done][b] = 0.f;
            }
        }
#else
        // Large kernels: the fully unrolled ring is too much code and spills; rotate the accumulators
        // instead (acc[k] holds output row s - (KH-1) + k; KH*4 moves per row, ~1/KW of the FMAs).
        for (int s = 0; s < nin; ++s) {
            float v[STRIP_NV];
            load(v, xp, r0 - py + s);
#pragma unroll
            for (int i = 0; i < STRIP_KH; ++i)
#pragma unroll
                for (int j = 0; j < STRIP_KW; ++j) {
                    const float t = c_taps[i * STRIP_KW + j];
#pragma unroll
                    for (int b = 0; b < 4; ++b)
                        acc[STRIP_KH - 1 - i][b] = fmaf(t, v[STRIP_SH + b + j], acc[STRIP_KH - 1 - i][b]);
                }
            const int o = s - (STRIP_KH - 1);
            if (o >= 0) c2d_store4(yp + (i64)(r0 + o) * Wo + cx, acc[0], bias, cx, Wo, vst);
#pragma unroll
            for (int k = 0; k + 1 < STRIP_KH; ++k)
#pragma unroll
                for (int b = 0; b < 4; ++b) acc[k][b] = acc[k + 1][b];
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[STRIP_KH - 1][b] = 0.f;
        }
#endif
    }
}

#if C2D_BOUNDARY != SIGCONV_BOUNDARY_FILL
// The threads of a wrap or symm launch that the chunk map does not serve (W % 4 != 0, or rows beyond one period of
// the image) run strip_body with StripExtCols in a function of its own (__noinline__), one per loader: ptxas
// allocates their registers apart from the chunk-map path, and what they spill stays in them. (Inlined beside it,
// the loader took 11x11 on 1024 x 1024 from 0.84-0.98 to 1.04-1.17 x the fill time on an H100: a second copy of
// the ring under the 240-register cap.)
template <class Load>
__device__ __noinline__ void strip_edge(const float* __restrict__ x, float* __restrict__ y, int N, int H, int W, int py,
                                        int Ho, int Wo, int cx, int r0, int nin, bool vst, float bias, int ca,
                                        bool vec) {
    strip_body(x, y, N, H, W, py, Ho, Wo, cx, r0, nin, vst, bias, Load(H, W, ca, vec));
}
#endif

// Thread: output columns cx..cx+3, a vertical strip of STRIP_ROWS output rows (strip_body); (blockIdx, threadIdx)
// map to (columns, strip) directly. A fill build takes the plain loads; a wrap or symm build loads through the
// rule's chunk map (StripExtNear) where the thread's rows lie within one period of the image and rows are 16-byte,
// else through strip_edge (StripExtCols).
extern "C" __global__ void conv2d_strip(const float* __restrict__ x, float* __restrict__ y, int N, int H, int W,
                                        int py, int px, int Ho, int Wo, const float* __restrict__ bptr,
                                        int has_bias, int vec_in, int vec_out, float fill) {
    const int cx = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    const int r0 = (blockIdx.y * blockDim.y + threadIdx.y) * STRIP_ROWS;
    if (cx >= Wo || r0 >= Ho) return;  // no barriers in this kernel
    const int nout = min(STRIP_ROWS, Ho - r0);
    const int nin = nout + STRIP_KH - 1;   // input rows streamed
    const int ca = cx - px - STRIP_SH;     // aligned (multiple of 4) first input column loaded
    const bool vec = vec_in != 0;
    const bool vst = vec_out != 0 && cx + 4 <= Wo;
    const float bias = has_bias ? bptr[0] : 0.f;
#if C2D_BOUNDARY == SIGCONV_BOUNDARY_FILL
    strip_body(x, y, N, H, W, py, Ho, Wo, cx, r0, nin, vst, bias, StripPlain{H, W, ca, vec, fill});
#else
    constexpr int B = C2D_BOUNDARY;
    const int g0 = r0 - py, g1 = r0 - py + nin;  // the input rows [g0, g1) the thread streams
    const bool near = g0 >= -H && g1 <= 2 * H;   // within one period of the image
    if (vec && near) {                           // and 16-byte rows
        strip_body(x, y, N, H, W, py, Ho, Wo, cx, r0, nin, vst, bias, StripExtNear<B>(H, W, ca, vec));
    } else if (near) {
        strip_edge<StripExtCols<B, true>>(x, y, N, H, W, py, Ho, Wo, cx, r0, nin, vst, bias, ca, vec);
    } else {
        strip_edge<StripExtCols<B, false>>(x, y, N, H, W, py, Ho, Wo, cx, r0, nin, vst, bias, ca, vec);
    }
#endif
}

#endif  // SIGCONV_CONV2D_STRIP_CUH
