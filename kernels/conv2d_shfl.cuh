// conv2d_shfl.cuh: single-channel 2-D stencil with warp shuffles (variant `shfl`), included by kernels/conv2d.cu.
//
// The job is the spectrogram smoothing: one large plane, a small kernel, stride 1, memory bound. Like `strip`,
// each thread owns 4 output columns cx..cx+3 and a vertical strip of SHFL_ROWS output rows, streams the input
// rows through a ring of KH accumulator rows and reads the taps from __constant__ memory. Unlike `strip`, which
// loads three float4 per row (its own four columns and both halos: 48 bytes for 16 new ones), a thread loads
// only its own float4 and takes the halo columns from its neighbours with warp shuffles; lanes 0 and 31 load
// the chunk beyond the warp's edge themselves. Fewer loads and fewer registers per row mean more rows and more
// warps in flight per multiprocessor, which is what a memory-bound stencil needs.
//
// Row values: v[m] = x[gr, cx - 4 + m], m in [0, 12): the left neighbour's chunk, the own chunk, the right
// neighbour's chunk. Output column cx + b with tap column j reads x[., cx + b + j - px] = v[4 - px + b + j],
// so px <= 4 and KW - 1 - px <= 4 (sigconv.backends.cuda2d.shfl_applies checks it).
//
// Warp uniformity: every lane of a warp takes part in every shuffle. blockDim.x is a multiple of 32 (the
// registry's blocks), so a warp is 32 consecutive x threads of one thread row and shares r0; the only exit
// is on r0, uniform per warp. Lanes past the last output column load xe (the fill constant, wrapped or
// mirrored columns) like any other and store nothing; their chunk is the halo of the last live lane.
//
// Boundaries: every load reads the image extended by the compiled C2D_BOUNDARY (conv2d_common.cuh), the fill
// constant being the `fill` argument, so wrap and symm cost no second pass.
//
// No shared memory, no barriers: tests/test_kernel_build.py compiles this exact source for the host, where
// the shuffles are emulated with a per-warp rendezvous (tests/host_emulation/cuda_shim_threads.h).
#ifndef SIGCONV_CONV2D_SHFL_CUH
#define SIGCONV_CONV2D_SHFL_CUH
#include "conv2d_common.cuh"
#include "limits.cuh"

#ifndef SHFL_KH
#define SHFL_KH 3       // kernel height
#endif
#ifndef SHFL_KW
#define SHFL_KW 3       // kernel width (with SHFL_PX: halos of at most 4 columns each side)
#endif
#ifndef SHFL_PX
#define SHFL_PX 1       // left padding in columns (0..4)
#endif
#ifndef SHFL_ROWS
#define SHFL_ROWS SIGCONV_SHFL_ROWS  // output rows per thread
#endif
// Small kernels (up to 12 taps) are compiled for blocks of up to 1024 threads, which caps the registers at 64
// (3x3: 60 instead of 100 uncapped, no spills): at least 1024 resident threads per multiprocessor, so that
// enough warps, each with its next rows' loads in flight, cover the memory latency. Larger kernels would spill
// under that cap (5x5: 156 bytes), and so would tall ones, whose unrolled ring is KH rows deep (8x1: 84 bytes,
// 11x1: 624), so they get no bound.
#if SHFL_KH * SHFL_KW <= 12 && SHFL_KH <= 6
#define SHFL_BOUNDS __launch_bounds__(1024)
#else
#define SHFL_BOUNDS
#endif

#define SHFL_RH (SHFL_KW - 1 - SHFL_PX)  // right halo in columns (0..SIGCONV_SHFL_MAX_HALO)
#if SHFL_PX < 0 || SHFL_PX > SIGCONV_SHFL_MAX_HALO || SHFL_RH < 0 || SHFL_RH > SIGCONV_SHFL_MAX_HALO
#error "conv2d_shfl: the halos must be 0..SIGCONV_SHFL_MAX_HALO columns on each side"
#endif

// Taps of the current call (copied in stream order by the launcher before each launch).
__constant__ float c_taps_shfl[SHFL_KH * SHFL_KW];

// Chunk loaders of shfl_row: rowp(xp, gr) is xe's row gr in the image (null for a row of the fill constant);
// own(rp) the four values xe[gr, cx..cx+3], left(rp) / right(rp) those at cx-4 / cx+4 (asked of lanes 0 / 31).
// The plain loads (a fill build's): 16-byte chunks where the row allows, the fill constant outside the image. vec:
// W % 4 == 0 and x 16-byte aligned, so a chunk (a multiple of 4) is wholly inside or outside the row.
struct ShflPlain {
    int H, W, cx;
    bool vec;
    float fill;
    __device__ __forceinline__ const float* rowp(const float* __restrict__ xp, int gr, int) const {
        return gr >= 0 && gr < H ? xp + (i64)gr * W : nullptr;
    }
    __device__ __forceinline__ float4 chunk(const float* __restrict__ rp, int c) const {
        float4 t = make_float4(fill, fill, fill, fill);
        if (rp == nullptr) return t;
        if (vec) {
            if (c >= 0 && c < W) t = __ldg(reinterpret_cast<const float4*>(rp + c));
        } else {
            t.x = (c >= 0 && c < W) ? __ldg(rp + c) : fill;
            t.y = (c + 1 >= 0 && c + 1 < W) ? __ldg(rp + c + 1) : fill;
            t.z = (c + 2 >= 0 && c + 2 < W) ? __ldg(rp + c + 2) : fill;
            t.w = (c + 3 >= 0 && c + 3 < W) ? __ldg(rp + c + 3) : fill;
        }
        return t;
    }
    __device__ __forceinline__ float4 own(const float* __restrict__ rp) const { return chunk(rp, cx); }
    __device__ __forceinline__ float4 left(const float* __restrict__ rp) const { return chunk(rp, cx - 4); }
    __device__ __forceinline__ float4 right(const float* __restrict__ rp) const { return chunk(rp, cx + 4); }
};

// The loaders of a wrap or symm build, which every warp of the launch takes, those whose window lies inside the
// image too: one copy of the unrolled ring runs in the launch, as in a fill build. (With a loader of their own for
// the warps whose window leaves the image, in a __noinline__ copy of the ring, 9x9 on 1024 x 1023 took 1.32-1.67 x
// the fill time on an H200: on a grid of a fraction of a wave the edge warps' copy of the 9x9 ring missed the
// instruction cache, Nsight Compute's no_instruction stalls went from 614 to 1382 samples at the same instruction
// count.) Every load is unconditional, the places computed ahead.

// wrap with 16-byte rows (W % 4 == 0), the strip's rows within one period of the image: the places of the lane's
// own chunk and of its halo chunk (cx-4 for lane 0, cx+4 for the others: only lane 31 asks) computed once (C2dChunk),
// the row by selects. (Under symm, whose mirrored chunks are read backwards, the selects that reverse them cost the
// spectrogram 1.07-1.18 x the fill time on an H200 where ShflExtAny's scalar loads cost 1.00.)
template <int B>
struct ShflExtNear {
    int H;
    C2dChunk m, h;
    __device__ __forceinline__ ShflExtNear(int H_, int W, int cx, int lane)
        : H(H_), m(c2d_vchunk<B>(cx, W)), h(c2d_vchunk<B>(lane == 0 ? cx - 4 : cx + 4, W)) {}
    __device__ __forceinline__ const float* rowp(const float* __restrict__ xp, int gr, int W) const {
        return xp + (i64)c2d_extend_near<B>(gr, H) * W;
    }
    __device__ __forceinline__ float4 own(const float* __restrict__ rp) const { return c2d_ld_chunk<B>(rp, m); }
    __device__ __forceinline__ float4 left(const float* __restrict__ rp) const { return c2d_ld_chunk<B>(rp, h); }
    __device__ __forceinline__ float4 right(const float* __restrict__ rp) const { return c2d_ld_chunk<B>(rp, h); }
};

// symm, any other width, or rows beyond one period (a kernel taller than the image): a column index per value
// computed once; the row by selects where the strip's rows lie within one period (NEAR), else through c2d_extend.
template <int B, bool NEAR>
struct ShflExtAny {
    int H;
    int mc[4], hc[4];
    __device__ __forceinline__ ShflExtAny(int H_, int W, int cx, int lane) : H(H_) {
        const int hx = lane == 0 ? cx - 4 : cx + 4;
#pragma unroll
        for (int e = 0; e < 4; ++e) {
            mc[e] = c2d_extend(cx + e, W, B);
            hc[e] = c2d_extend(hx + e, W, B);
        }
    }
    __device__ __forceinline__ const float* rowp(const float* __restrict__ xp, int gr, int W) const {
        return xp + (i64)(NEAR ? c2d_extend_near<B>(gr, H) : c2d_extend(gr, H, B)) * W;
    }
    __device__ __forceinline__ float4 own(const float* __restrict__ rp) const {
        return make_float4(__ldg(rp + mc[0]), __ldg(rp + mc[1]), __ldg(rp + mc[2]), __ldg(rp + mc[3]));
    }
    __device__ __forceinline__ float4 left(const float* __restrict__ rp) const {
        return make_float4(__ldg(rp + hc[0]), __ldg(rp + hc[1]), __ldg(rp + hc[2]), __ldg(rp + hc[3]));
    }
    __device__ __forceinline__ float4 right(const float* __restrict__ rp) const { return left(rp); }
};

// v[m] = xe[gr, cx - 4 + m]: own chunk loaded, halo columns shuffled from lanes -1 / +1 (edge lanes load).
// Only the halo columns the kernel reads are exchanged: SHFL_PX from the left, SHFL_RH from the right.
template <typename Load>
__device__ __forceinline__ void shfl_row(float (&v)[12], const float* __restrict__ xp, int W, int gr, int lane,
                                         const Load& load) {
    const unsigned FULL = 0xffffffffu;
    const float* rp = load.rowp(xp, gr, W);
    const float4 m = load.own(rp);
    float4 l = make_float4(0.f, 0.f, 0.f, 0.f), r = make_float4(0.f, 0.f, 0.f, 0.f);
    if (SHFL_PX > 0 && lane == 0) l = load.left(rp);
    if (SHFL_RH > 0 && lane == 31) r = load.right(rp);
    // left neighbour's columns cx-1, cx-2, ... are its m.w, m.z, ...
    if (SHFL_PX >= 1) { const float t = __shfl_up_sync(FULL, m.w, 1); if (lane != 0) l.w = t; }
    if (SHFL_PX >= 2) { const float t = __shfl_up_sync(FULL, m.z, 1); if (lane != 0) l.z = t; }
    if (SHFL_PX >= 3) { const float t = __shfl_up_sync(FULL, m.y, 1); if (lane != 0) l.y = t; }
    if (SHFL_PX >= 4) { const float t = __shfl_up_sync(FULL, m.x, 1); if (lane != 0) l.x = t; }
    // right neighbour's columns cx+4, cx+5, ... are its m.x, m.y, ...
    if (SHFL_RH >= 1) { const float t = __shfl_down_sync(FULL, m.x, 1); if (lane != 31) r.x = t; }
    if (SHFL_RH >= 2) { const float t = __shfl_down_sync(FULL, m.y, 1); if (lane != 31) r.y = t; }
    if (SHFL_RH >= 3) { const float t = __shfl_down_sync(FULL, m.z, 1); if (lane != 31) r.z = t; }
    if (SHFL_RH >= 4) { const float t = __shfl_down_sync(FULL, m.w, 1); if (lane != 31) r.w = t; }
    v[0] = l.x; v[1] = l.y; v[2] = l.z; v[3] = l.w;
    v[4] = m.x; v[5] = m.y; v[6] = m.z; v[7] = m.w;
    v[8] = r.x; v[9] = r.y; v[10] = r.z; v[11] = r.w;
}

// The ring (as in conv2d_strip): input row s (relative to r0 - py) feeds tap row i into output row o = s - i,
// which lives in slot o % KH; the loop over s is unrolled by KH so that slot indices are compile-time
// constants; after row s, output row s - KH + 1 is complete, stored and its slot zeroed. Rows by `load`.
template <typename Load>
__device__ __forceinline__ void shfl_body(const float* __restrict__ x, float* __restrict__ y, int N, int H, int W,
                                          int py, int Ho, int Wo, int lane, int cx, int r0, int nin, bool live,
                                          bool vst, float bias, const Load& load) {
    FOR_PLANES(z, N) {
        const float* xp = x + (i64)z * H * W;
        float* yp = y + (i64)z * Ho * Wo;
        float acc[SHFL_KH][4];
#pragma unroll
        for (int k = 0; k < SHFL_KH; ++k)
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[k][b] = 0.f;
#if SHFL_KH <= 11
        for (int base = 0; base < nin; base += SHFL_KH) {
#pragma unroll
            for (int u = 0; u < SHFL_KH; ++u) {
                const int s = base + u;
                if (s >= nin) break;  // uniform across the warp: nin is
                float v[12];
                shfl_row(v, xp, W, r0 - py + s, lane, load);
#pragma unroll
                for (int i = 0; i < SHFL_KH; ++i) {
                    const int slot = (u - i + SHFL_KH) % SHFL_KH;
#pragma unroll
                    for (int j = 0; j < SHFL_KW; ++j) {
                        const float t = c_taps_shfl[i * SHFL_KW + j];
#pragma unroll
                        for (int b = 0; b < 4; ++b) acc[slot][b] = fmaf(t, v[4 - SHFL_PX + b + j], acc[slot][b]);
                    }
                }
                const int done = (u + 1) % SHFL_KH;
                const int o = s - (SHFL_KH - 1);
                if (o >= 0 && live) c2d_store4(yp + (i64)(r0 + o) * Wo + cx, acc[done], bias, cx, Wo, vst);
#pragma unroll
                for (int b = 0; b < 4; ++b) acc[done][b] = 0.f;
            }
        }
#else
        // Tall kernels: rotate the accumulators instead of unrolling the ring (less code, no spills).
        for (int s = 0; s < nin; ++s) {
            float v[12];
            shfl_row(v, xp, W, r0 - py + s, lane, load);
#pragma unroll
            for (int i = 0; i < SHFL_KH; ++i)
#pragma unroll
                for (int j = 0; j < SHFL_KW; ++j) {
                    const float t = c_taps_shfl[i * SHFL_KW + j];
#pragma unroll
                    for (int b = 0; b < 4; ++b)
                        acc[SHFL_KH - 1 - i][b] = fmaf(t, v[4 - SHFL_PX + b + j], acc[SHFL_KH - 1 - i][b]);
                }
            const int o = s - (SHFL_KH - 1);
            if (o >= 0 && live) c2d_store4(yp + (i64)(r0 + o) * Wo + cx, acc[0], bias, cx, Wo, vst);
#pragma unroll
            for (int k = 0; k + 1 < SHFL_KH; ++k)
#pragma unroll
                for (int b = 0; b < 4; ++b) acc[k][b] = acc[k + 1][b];
#pragma unroll
            for (int b = 0; b < 4; ++b) acc[SHFL_KH - 1][b] = 0.f;
        }
#endif
    }
}

#if C2D_BOUNDARY != SIGCONV_BOUNDARY_FILL
// A strip whose rows reach beyond one period of the image (a kernel taller than the image): its own copy of the ring
// (__noinline__), out of the way of the common one.
__device__ __noinline__ void shfl_far(const float* __restrict__ x, float* __restrict__ y, int N, int H, int W, int py,
                                      int Ho, int Wo, int lane, int cx, int r0, int nin, bool live, bool vst,
                                      float bias) {
    shfl_body(x, y, N, H, W, py, Ho, Wo, lane, cx, r0, nin, live, vst, bias,
              ShflExtAny<C2D_BOUNDARY, false>(H, W, cx, lane));
}
#endif

// (blockIdx, threadIdx) -> (columns, strip) directly. A fill build takes the plain loads, a wrap or symm build the
// extension's loaders (ShflExtNear, ShflExtAny) in every warp. The branches are uniform across the warp (r0 is, and
// vec), so all its lanes take the same body and meet at every shuffle.
extern "C" __global__ void SHFL_BOUNDS conv2d_shfl(const float* __restrict__ x,
                                                                    float* __restrict__ y, int N,
                                                                    int H, int W, int py, int Ho, int Wo,
                                                                    const float* __restrict__ bptr, int has_bias,
                                                                    int vec_in, int vec_out, float fill) {
    const int lane = threadIdx.x & 31;
    const int cx = 4 * (blockIdx.x * blockDim.x + threadIdx.x);
    const int r0 = (blockIdx.y * blockDim.y + threadIdx.y) * SHFL_ROWS;
    if (r0 >= Ho) return;  // uniform across the warp (see the top of the file)
    const bool live = cx < Wo;  // lanes past the last column shuffle but do not store
    const int nout = min(SHFL_ROWS, Ho - r0);
    const int nin = nout + SHFL_KH - 1;
    const bool vec = vec_in != 0;
    const bool vst = vec_out != 0 && cx + 4 <= Wo;
    const float bias = has_bias ? bptr[0] : 0.f;
#if C2D_BOUNDARY == SIGCONV_BOUNDARY_FILL
    shfl_body(x, y, N, H, W, py, Ho, Wo, lane, cx, r0, nin, live, vst, bias, ShflPlain{H, W, cx, vec, fill});
#else
    constexpr int B = C2D_BOUNDARY;
    if (r0 - py >= -H && r0 - py + nin <= 2 * H) {  // the strip's input rows within one period of the image
        if (vec && B == SIGCONV_BOUNDARY_WRAP)
            shfl_body(x, y, N, H, W, py, Ho, Wo, lane, cx, r0, nin, live, vst, bias, ShflExtNear<B>(H, W, cx, lane));
        else
            shfl_body(x, y, N, H, W, py, Ho, Wo, lane, cx, r0, nin, live, vst, bias,
                      ShflExtAny<B, true>(H, W, cx, lane));
    } else {
        shfl_far(x, y, N, H, W, py, Ho, Wo, lane, cx, r0, nin, live, vst, bias);
    }
#endif
}

#endif  // SIGCONV_CONV2D_SHFL_CUH
