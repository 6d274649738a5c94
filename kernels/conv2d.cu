// sigconv 2-D convolution kernels (NCHW cross-correlation, torch.nn.functional.conv2d semantics).
//
//   y[n, co, r, c] = bias[co] + sum_{ci, i, j} w[co, ci, i, j] * x[n, ci, r*sy + i - py, c*sx + j - px]
//   for 0 <= r < Ho, 0 <= c < Wo; x is zero outside [0, H) x [0, W) (bottom/right pads are implied by Ho, Wo).
//
// Variants, in the order they tell the story (sigconv/backends/cuda2d.py launches them):
//   naive     : one thread per output element, loops Cin x kH x kW (source article A, with pad and stride).
//   shared    : a block computes a bx x by output tile of one (n, co); per input channel it stages the input
//               tile plus halo in shared memory, rows padded so the warp's rows fall in distinct banks.
//   regblock  : 16-byte vector loads along W (cp.async, zero-filled at the borders, scalar path for the tails
//               when W % 4 != 0), each thread computing TY x TX outputs for COB output channels in registers.
//   prefetch  : source article B: one-warp 8x4 blocks, float4 tile loads split evenly over the threads, the
//               next input channel's tile and weights copied (cp.async) into a second buffer while the current
//               one is computed. Same body as regblock with PREFETCH=1.
//   strip     : single-channel fast path (spectrogram smoothing): each thread owns 4 output columns and a
//               vertical strip of STRIP_ROWS rows; input rows stream through a register sliding window, the
//               taps sit in __constant__ memory (FFMA reads them as operands), kernel size fixed at compile time.
//   shfl      : strip with one float4 load per thread and row, the halo columns from the neighbouring lanes by
//               warp shuffles (halos up to 4 columns each side); fewer loads and registers per row.
//   separable : rank-1 kernels w = u v^T per (co, ci) pair: a row pass into a scratch buffer, then a column pass.
//   igemm     : multi-channel layers as an implicit GEMM (Cout x Cin*kH*kW by Cin*kH*kW x pixels), the im2col
//               gathered by cp.async into shared memory, 8x8 outputs per thread; igemm_tf32 the same on TF32 tensor
//               cores (mma.sync), opt-in (conv2d_igemm.cuh).
//
// Boundaries other than zero fill (wrap, symm, a non-zero fill constant; single channel), one index-mapping
// rule (c2d_extend):
//   fused     : every variant loads the extended image directly, no second pass: regblock, prefetch, strip and
//               shfl compile the boundary in (C2D_BOUNDARY); naive and shared take it as an argument (their taps
//               or tile loads outside the image go through the rule); separable's row pass reads it
//               (conv2d_sep_rows_ext).
//   extend    : on request (corr2d's `extend`), the image extended into a new array first, which the variant then
//               reads with zero padding.
//
// Dtypes: naive, shared, separable are templates (float, double; name expressions "conv2d_naive<float>");
// naive and extend also for unsigned long long (exact integer convolution: sums wrap mod 2^64, which is
// NumPy's int64 arithmetic on the same bits); regblock, prefetch and strip are float only and specialised by
// #defines (Python prepends them).
//
// Compile on its own (checks, register counts, spills):
//   nvcc -std=c++17 -arch=sm_90 -cubin -Xptxas -v -o /dev/null kernels/conv2d.cu
// NVRTC compatible: no host headers.

// ------------------------------------------------------------------------------------------ defaults
// (The nvcc self-check compiles one instance of every specialised kernel with these.)
#ifndef KH
#define KH 3            // kernel height (tiled kernels)
#endif
#ifndef KW
#define KW 3            // kernel width
#endif
#ifndef SY
#define SY 1            // vertical stride
#endif
#ifndef SX
#define SX 1            // horizontal stride
#endif
#ifndef SH
#define SH 3            // (-px) mod 4: offset of the first needed input column inside the aligned tile
#endif
#ifndef TX
#define TX 4            // outputs per thread along x (consecutive columns)
#endif
#ifndef TY
#define TY 2            // outputs per thread along y (consecutive rows)
#endif
#ifndef COB
#define COB 8           // output channels per block (every thread computes all of them)
#endif
#ifndef BX
#define BX 16           // threads per block along x
#endif
#ifndef BY
#define BY 8            // threads per block along y
#endif
#ifndef PITCH
#define PITCH 76        // shared-memory row pitch in floats (multiple of 4); chosen by the launcher
#endif
#ifndef PREFETCH
#define PREFETCH 1      // 1: double-buffered cp.async prefetch of the next channel (prefetch variant)
#endif

// The headers the parts share, included before any part's #if: sigconv._kernels.source inlines each header once, at
// its first #include, so a first inclusion inside a part that a build leaves out would leave the others without it.
#include "conv2d_common.cuh"
#include "limits.cuh"

// ============================================================================================ naive
// The generic kernels (naive, shared, separable's row pass) take the boundary at run time (`boundary`, `fill`:
// SIGCONV_BOUNDARY_*, a single-channel job unless it is fill with zero) and read the extended image in their own
// loads, in one launch. naive (conv2d_naive for the fill constant, conv2d_naive_ext for wrap and symm) and separable
// switch once per thread to a body compiled for that boundary (c2d_row_taps<T, B>). A block whose windows' columns
// all lie inside the image reads its rows with plain loads; the others map every tap's column by selects
// (c2d_extend_near), the same instructions in every lane, so that no lane of a warp waits on another's longer loop:
// on a small image the grid is a wave or two and the slowest warps set the kernel's end. (Through c2d_extend per
// tap naive took 1.23-1.67 x its zero-fill time on an H200; with three runs of consecutive taps per row, left of the
// image, inside, right of it, whose lengths differ from lane to lane, 1.13-1.30 x.) With zero fill the outside taps
// add nothing. naive maps its tap rows alike: by selects where the block's rows lie within one period of the image
// (c2d_block_rows_near), else through c2d_extend, whose modulo code then stays out of the other blocks' row loop
// (1025 x 65535 with 9x9: wrap and symm 1.12 -> 1.05 x the zero fill).

// acc + sum_{j < kW} w[j] * xe[c0 + j] along one row of the extended image: xr the image row under it (null: a row
// of the fill constant), boundary B, W the row's length. `inside`: every lane's window columns lie in [0, W) (the
// caller's block-uniform test); else within one period of the row (-W <= c0, c0 + kW <= 2W) each tap's column by
// selects, and beyond (a kernel larger than the image) through c2d_extend. `skip`: zero fill, outside taps add
// nothing.
template <typename T, int B>
__device__ __forceinline__ T c2d_row_taps(const T* __restrict__ xr, const T* __restrict__ w, int c0, int kW, int W,
                                          T fill, bool skip, bool inside, T acc) {
    if (xr == nullptr) {
        if (!skip)
            for (int j = 0; j < kW; ++j) acc += w[j] * fill;
    } else if (inside) {
        xr += c0;
        for (int j = 0; j < kW; ++j) acc += w[j] * xr[j];
    } else if (c0 >= -W && c0 + kW <= 2 * W) {
        for (int j = 0; j < kW; ++j) {
            const int t = c0 + j;
            const int gc = B == SIGCONV_BOUNDARY_FILL ? (t >= 0 && t < W ? t : -1) : c2d_extend_near<B>(t, W);
            if (B != SIGCONV_BOUNDARY_FILL || gc >= 0)
                acc += w[j] * xr[gc];
            else if (!skip)
                acc += w[j] * fill;
        }
    } else {
        for (int j = 0; j < kW; ++j) {
            const int gc = c2d_extend(c0 + j, W, B);
            if (gc >= 0)
                acc += w[j] * xr[gc];
            else if (!skip)
                acc += w[j] * fill;
        }
    }
    return acc;
}

// Whether the windows of a block's output columns [c, c + n) all lie inside the W columns of the image: taps
// [c*sx - px, (c + n - 1)*sx - px + kW).
__device__ __forceinline__ bool c2d_block_cols_inside(int c, int n, int sx, int px, int kW, int W) {
    return c * sx - px >= 0 && (c + n - 1) * sx - px + kW <= W;
}

// Whether the windows of a block's output rows [r, r + n) all lie within one period of the H rows of the image
// (taps [r*sy - py, (r + n - 1)*sy - py + kH) inside [-H, 2H)): every row unless the kernel is larger than the image.
__device__ __forceinline__ bool c2d_block_rows_near(int r, int n, int sy, int py, int kH, int H) {
    return r * sy - py >= -H && (r + n - 1) * sy - py + kH <= 2 * H;
}

// The image row under extended row i (-1: a row of the fill constant) for boundary B: by selects where the caller
// knows i within one period (NEAR), else through c2d_extend.
template <int B, bool NEAR>
__device__ __forceinline__ int c2d_extend_row(int i, int H) {
    return B != SIGCONV_BOUNDARY_FILL && NEAR ? c2d_extend_near<B>(i, H) : c2d_extend(i, H, B);
}

template <typename T, int B, bool NEAR>
__device__ __forceinline__ void naive_body(const T* __restrict__ x, const T* __restrict__ w,
                                           const T* __restrict__ bias, T* __restrict__ y, int N, int Cin,
                                           int H, int W, int Cout, int kH, int kW, int sy, int sx, int py,
                                           int px, int Ho, int Wo, int has_bias, T fill) {
    const int cb = blockIdx.x * blockDim.x;
    const int c = cb + threadIdx.x;                       // output column
    const int r = blockIdx.y * blockDim.y + threadIdx.y;  // output row
    // (before the exit: the same answer in every thread of the block)
    const bool inside = c2d_block_cols_inside(cb, min((int)blockDim.x, Wo - cb), sx, px, kW, W);
    if (r >= Ho || c >= Wo) return;                       // no barriers below: early exit is safe
    const bool skip = B == SIGCONV_BOUNDARY_FILL && fill == T(0);  // zero fill: outside taps add nothing
    const int c0 = c * sx - px;                                     // input column of tap column 0
    FOR_PLANES(z, N * Cout) {
        const int n = z / Cout, co = z - n * Cout;
        T acc = has_bias ? bias[co] : T(0);
        for (int ci = 0; ci < Cin; ++ci) {
            const T* xp = x + (i64)(n * Cin + ci) * H * W;
            const T* wp = w + (i64)(co * Cin + ci) * kH * kW;
            for (int i = 0; i < kH; ++i) {
                const int gr = c2d_extend_row<B, NEAR>(r * sy + i - py, H);  // image row under tap row i; -1: fill
                if (gr < 0 && skip) continue;
                acc = c2d_row_taps<T, B>(gr < 0 ? nullptr : xp + (i64)gr * W, wp + i * kW, c0, kW, W, fill, skip,
                                         inside, acc);
            }
        }
        y[((i64)z * Ho + r) * Wo + c] = acc;
    }
}

// Zero padding or a fill constant (`fill`) in conv2d_naive; wrap or symm (`boundary`) in conv2d_naive_ext, whose
// row maps (near blocks by selects, the others through c2d_extend) the fill path does not carry.
template <typename T>
__global__ void conv2d_naive(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                             T* __restrict__ y, int N, int Cin, int H, int W, int Cout, int kH, int kW, int sy,
                             int sx, int py, int px, int Ho, int Wo, int has_bias, T fill) {
    naive_body<T, SIGCONV_BOUNDARY_FILL, true>(x, w, bias, y, N, Cin, H, W, Cout, kH, kW, sy, sx, py, px, Ho, Wo,
                                               has_bias, fill);
}

template <typename T>
__global__ void conv2d_naive_ext(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                 T* __restrict__ y, int N, int Cin, int H, int W, int Cout, int kH, int kW, int sy,
                                 int sx, int py, int px, int Ho, int Wo, int has_bias, int boundary) {
#define NAIVE_ARGS x, w, bias, y, N, Cin, H, W, Cout, kH, kW, sy, sx, py, px, Ho, Wo, has_bias, T(0)
    const int rb = blockIdx.y * blockDim.y;
    const bool near = c2d_block_rows_near(rb, min((int)blockDim.y, Ho - rb), sy, py, kH, H);
    if (boundary == SIGCONV_BOUNDARY_WRAP) {
        if (near) naive_body<T, SIGCONV_BOUNDARY_WRAP, true>(NAIVE_ARGS);
        else naive_body<T, SIGCONV_BOUNDARY_WRAP, false>(NAIVE_ARGS);
    } else {
        if (near) naive_body<T, SIGCONV_BOUNDARY_SYMM, true>(NAIVE_ARGS);
        else naive_body<T, SIGCONV_BOUNDARY_SYMM, false>(NAIVE_ARGS);
    }
#undef NAIVE_ARGS
}

// =========================================================================================== shared
// Block (bx, by) -> output tile rows [or0, or0+by) x cols [oc0, oc0+bx) of plane (n, co).
// Input tile: th = (by-1)*sy + kH rows, tw = (bx-1)*sx + kW cols starting at (or0*sy - py, oc0*sx - px), of the
// image extended by `boundary` (c2d_extend: the fill constant, wrapped or mirrored samples).
// Row pitch `pitch` >= tw is chosen by the launcher so that the rows one warp touches fall in distinct banks.
template <typename T>
__global__ void conv2d_shared(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                              T* __restrict__ y, int N, int Cin, int H, int W, int Cout, int kH, int kW, int sy,
                              int sx, int py, int px, int Ho, int Wo, int has_bias, int pitch, int boundary, T fill) {
    extern __shared__ __align__(16) unsigned char smem_raw[];
    T* tile = reinterpret_cast<T*>(smem_raw);
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int bx = blockDim.x, by = blockDim.y;
    const int tid = ty * bx + tx, nt = bx * by;
    const int oc0 = blockIdx.x * bx, or0 = blockIdx.y * by;
    const int r = or0 + ty, c = oc0 + tx;
    const int th = (by - 1) * sy + kH, tw = (bx - 1) * sx + kW;
    const int ir0 = or0 * sy - py, ic0 = oc0 * sx - px;  // top-left input pixel of the tile
    const bool live = r < Ho && c < Wo;                  // dead threads still load and sync
    FOR_PLANES(z, N * Cout) {
        const int n = z / Cout, co = z - n * Cout;
        T acc = (has_bias && live) ? bias[co] : T(0);
        for (int ci = 0; ci < Cin; ++ci) {
            const T* xp = x + (i64)(n * Cin + ci) * H * W;
            __syncthreads();  // previous channel's reads are done before overwriting the tile
            for (int idx = tid; idx < th * tw; idx += nt) {
                const int tr = idx / tw, tc = idx - tr * tw;
                const int er = c2d_extend(ir0 + tr, H, boundary), ec = c2d_extend(ic0 + tc, W, boundary);
                tile[tr * pitch + tc] = (er >= 0 && ec >= 0) ? xp[(i64)er * W + ec] : fill;  // the extended image
            }
            __syncthreads();
            if (live) {
                const T* wp = w + (i64)(co * Cin + ci) * kH * kW;
                const T* tp = tile + (ty * sy) * pitch + tx * sx;
                for (int i = 0; i < kH; ++i)
                    for (int j = 0; j < kW; ++j) acc += wp[i * kW + j] * tp[i * pitch + j];
            }
        }
        if (live) y[((i64)z * Ho + r) * Wo + c] = acc;
    }
}

// ======================================================================== regblock / prefetch (float)
#if C2D_HAS_PART(SIGCONV_C2D_PART_TILED)
// Block (BX, BY) threads; thread (tx, ty) computes outputs rows or0 + ty*TY + a (a < TY), columns
// oc0 + tx*TX + b (b < TX), channels co0 + cc (cc < COB). Output tile OH x OW per block.
#define OH (BY * TY)
#define OW (BX * TX)
#define NT (BX * BY)
#define MINB (NT >= 256 ? 1 : 256 / NT)  // 256 threads per SM at least (the cap stays at 255 registers)
// A wrap/symm build has no launch bounds: ptxas takes the register limit of __launch_bounds__ over --maxrregcount,
// and the launcher holds such a build to the zero-fill build's occupancy with --maxrregcount (cuda2d._fused;
// within the block's register budget, since the zero-fill build fits it).
#if C2D_BOUNDARY == SIGCONV_BOUNDARY_FILL
#define TILED_BOUNDS __launch_bounds__(NT, MINB)
#else
#define TILED_BOUNDS
#endif
// Input tile: TH rows; columns start at ca = (oc0*SX - px) - SH, a multiple of 4 because OW*SX % 4 == 0
// (BX % 4 == 0) and SH == (-px) mod 4. TWL = needed width + SH rounded up to whole float4 chunks.
#define TH ((OH - 1) * SY + KH)
#define TWN ((OW - 1) * SX + KW)
#define TWL (((TWN + SH) + 3) / 4 * 4)
#define NCH (TWL / 4)                 // float4 chunks per tile row
#define TILE_FLOATS (TH * PITCH)
#define WTS_FLOATS (KH * KW * COB)    // weights of one input channel: layout [i][j][cc]
// rounded up to 4 floats: the second stage's tile must stay 16-byte aligned for cp.async and float4 reads
#define STAGE_FLOATS ((TILE_FLOATS + WTS_FLOATS + 3) / 4 * 4)
// Per-thread input values for one tile row: (TX-1)*SX + KW needed after the SH offset, whole float4s.
#define NVAL ((((TX - 1) * SX + KW + SH) + 3) / 4 * 4)


#if C2D_BOUNDARY != SIGCONV_BOUNDARY_FILL
// A wrap or symm tile beyond one period of the image (a kernel larger than the image) without 16-byte rows: every
// element through c2d_extend, in a function of its own (__noinline__), so that the rule's division code sets neither
// the registers nor the branches of the loads of every other tile.
__device__ __noinline__ void tiled_copy_far(float* tile, const float* __restrict__ xp, int H, int W, int ir0, int ca,
                                            int tid) {
    for (int idx = tid; idx < TH * TWL; idx += NT) {
        const int tr = idx / TWL, tc = idx - tr * TWL;
        const int er = c2d_extend(ir0 + tr, H, C2D_BOUNDARY), ec = c2d_extend(ca + tc, W, C2D_BOUNDARY);
        cp_async4(tile + tr * PITCH + tc, xp + (i64)er * W + ec, 4);
    }
}
#endif

// Issue the copies of input channel ci's tile and weights into one stage of shared memory. The tile holds the
// image extended by the compiled boundary (C2D_BOUNDARY, conv2d_common.cuh): `fill` outside for fill (stored
// directly), wrapped or mirrored samples for wrap and symm. vec: W % 4 == 0 and x 16-byte aligned, so each
// aligned chunk is wholly inside or wholly outside the row, and one outside is an aligned chunk of the row too
// (c2d_vchunk): one 16-byte copy, or four 4-byte ones where symm mirrors it. An edge tile then issues as few
// copies as an inside one (a 64 x 16 tile of a 31x31 kernel has 4 of its 24 chunks per row outside).
__device__ __forceinline__ void tiled_issue(float* stage, const float* __restrict__ xp, const float* __restrict__ w,
                                            int H, int W, int Cin, int Cout, int ci, int co0, int ir0, int ca,
                                            bool vec, int tid, float fill) {
    float* tile = stage;
#if C2D_BOUNDARY != SIGCONV_BOUNDARY_FILL
    // wrap / symm, a tile within one period of the image (every tile unless the kernel is larger than the image):
    // each chunk's row and place by selects (c2d_extend_near, c2d_vchunk_near), one copy per chunk, no branch on
    // inside or outside. An edge tile then costs its warps about as many instructions as an inside one; in a
    // grid of one wave (a small image, a large kernel) the slowest warp sets the kernel's end.
    const bool near = ir0 >= -H && ir0 + TH <= 2 * H && ca >= -W && ca + TWL <= 2 * W;
    if (near && vec) {
        constexpr int B = C2D_BOUNDARY;
        for (int idx = tid; idx < TH * NCH; idx += NT) {
            const int tr = idx / NCH, q = idx - tr * NCH;
            const C2dChunk ch = c2d_vchunk_near<B>(ca + 4 * q, W);
            const float* src = xp + (i64)c2d_extend_near<B>(ir0 + tr, H) * W + ch.base;
            float* dst = tile + tr * PITCH + 4 * q;
            if (B == SIGCONV_BOUNDARY_WRAP || !ch.rev) {
                cp_async16(dst, src, 16);
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e) cp_async4(dst + e, src + 3 - e, 4);
            }
        }
    } else if (near) {
        // rows that are not 16-byte (W % 4 != 0): element by element, one unconditional copy each (wrap and symm
        // read the image everywhere), each place by selects (a loop of its own: with the choice between the selects
        // and c2d_extend inside it, ptxas branched per element around the rule's division code, and prefetch 16x8
        // with 9x9 on 1025 x 65535 took 1.16 x its zero-fill time under wrap on an H200). A tile beyond one period
        // of the image: tiled_copy_far.
        constexpr int B = C2D_BOUNDARY;
        for (int idx = tid; idx < TH * TWL; idx += NT) {
            const int tr = idx / TWL, tc = idx - tr * TWL;
            const int er = c2d_extend_near<B>(ir0 + tr, H), ec = c2d_extend_near<B>(ca + tc, W);
            cp_async4(tile + tr * PITCH + tc, xp + (i64)er * W + ec, 4);
        }
    } else if (!vec) {
        tiled_copy_far(tile, xp, H, W, ir0, ca, tid);
    } else
#endif
    if (vec) {
        for (int idx = tid; idx < TH * NCH; idx += NT) {  // chunks split evenly over the threads
            const int tr = idx / NCH, q = idx - tr * NCH;
            const int gc = ca + 4 * q;
            const int er = c2d_extend(ir0 + tr, H, C2D_BOUNDARY);  // image row under tile row tr; -1: fill
            float* dst = tile + tr * PITCH + 4 * q;
            if (er >= 0 && gc >= 0 && gc < W) {
                cp_async16(dst, xp + (i64)er * W + gc, 16);
            } else if (C2D_BOUNDARY == SIGCONV_BOUNDARY_FILL || er < 0) {
                *reinterpret_cast<float4*>(dst) = make_float4(fill, fill, fill, fill);
            } else {  // the rule maps the chunk's 4 columns onto one aligned chunk of the row, backwards under symm
                const C2dChunk ch = c2d_vchunk<C2D_BOUNDARY>(gc, W);
                const float* src = xp + (i64)er * W + ch.base;
                if (C2D_BOUNDARY == SIGCONV_BOUNDARY_WRAP || !ch.rev) {  // (wrap keeps the order)
                    cp_async16(dst, src, 16);
                } else {
#pragma unroll
                    for (int e = 0; e < 4; ++e) cp_async4(dst + e, src + 3 - e, 4);
                }
            }
        }
    } else {  // tails: W not a multiple of 4 (or unaligned base): element by element, still coalesced
        for (int idx = tid; idx < TH * TWL; idx += NT) {
            const int tr = idx / TWL, tc = idx - tr * TWL;
            const int er = c2d_extend(ir0 + tr, H, C2D_BOUNDARY);
            const int ec = c2d_extend(ca + tc, W, C2D_BOUNDARY);
            float* dst = tile + tr * PITCH + tc;
            if (er >= 0 && ec >= 0)
                cp_async4(dst, xp + (i64)er * W + ec, 4);
            else
                *dst = fill;
        }
    }
    float* wts = stage + TILE_FLOATS;  // [i][j][cc], zero for channels past Cout
    for (int idx = tid; idx < WTS_FLOATS; idx += NT) {
        const int cc = idx % COB, ij = idx / COB;
        const int co = co0 + cc;
        const bool in = co < Cout;
        cp_async4(wts + idx, in ? (const void*)(w + ((i64)co * Cin + ci) * (KH * KW) + ij) : (const void*)w,
                  in ? 4 : 0);
    }
    cp_async_commit();
}

// acc[cc][a][b] += sum_{i,j} wts[i][j][cc] * tile[(ty*TY + a)*SY + i][SH + (tx*TX + b)*SX + j]
constexpr int kUnrollI = KH <= 7 ? KH : 1;  // full unroll of the tap rows for small kernels only
__device__ __forceinline__ void tiled_compute(const float* stage, float (&acc)[COB][TY][TX], int tx, int ty) {
    const float* tile = stage;
    const float* wts = stage + TILE_FLOATS;
#pragma unroll
    for (int a = 0; a < TY; ++a) {
#pragma unroll kUnrollI
        for (int i = 0; i < KH; ++i) {
            // This thread's slice of tile row (ty*TY + a)*SY + i, starting at an aligned column.
            const float* rp = tile + ((ty * TY + a) * SY + i) * PITCH + tx * TX * SX;
            float v[NVAL];
            if ((TX * SX) % 4 == 0) {  // aligned: rp is 16-byte aligned (PITCH % 4 == 0)
#pragma unroll
                for (int q = 0; q < NVAL / 4; ++q) {
                    const float4 t = reinterpret_cast<const float4*>(rp)[q];
                    v[4 * q] = t.x; v[4 * q + 1] = t.y; v[4 * q + 2] = t.z; v[4 * q + 3] = t.w;
                }
            } else {
#pragma unroll
                for (int q = 0; q < NVAL; ++q) v[q] = (SH + (TX - 1) * SX + KW > q) ? rp[q] : 0.f;
            }
#pragma unroll
            for (int j = 0; j < KW; ++j) {
                float wv[COB];
#pragma unroll
                for (int cc = 0; cc < COB; ++cc) wv[cc] = wts[(i * KW + j) * COB + cc];  // broadcast
#pragma unroll
                for (int cc = 0; cc < COB; ++cc)
#pragma unroll
                    for (int b = 0; b < TX; ++b) acc[cc][a][b] = fmaf(wv[cc], v[SH + b * SX + j], acc[cc][a][b]);
            }
        }
    }
}

extern "C" __global__ void TILED_BOUNDS conv2d_tiled(const float* __restrict__ x, const float* __restrict__ w,
                                                             const float* __restrict__ bias, float* __restrict__ y,
                                                             int N, int Cin, int H, int W, int Cout, int py, int px,
                                                             int Ho, int Wo, int has_bias, int vec_in, int vec_out,
                                                             float fill) {
    extern __shared__ __align__(16) float smem[];
    const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * BX + tx;
    const int oc0 = blockIdx.x * OW, or0 = blockIdx.y * OH;
    const int ir0 = or0 * SY - py;
    const int ca = oc0 * SX - px - SH;  // multiple of 4 (see TWL)
    const int groups = (Cout + COB - 1) / COB;
    const bool vec = vec_in != 0;
    FOR_PLANES(z, N * groups) {
        const int n = z / groups, co0 = (z - n * groups) * COB;
        const float* xn = x + (i64)n * Cin * H * W;
        float acc[COB][TY][TX];
#pragma unroll
        for (int cc = 0; cc < COB; ++cc)
#pragma unroll
            for (int a = 0; a < TY; ++a)
#pragma unroll
                for (int b = 0; b < TX; ++b) acc[cc][a][b] = 0.f;
        __syncthreads();  // the previous plane's last reads are done before the first copy
#if PREFETCH
        // Double buffer: copy channel ci+1 into the other stage while channel ci is computed.
        tiled_issue(smem, xn, w, H, W, Cin, Cout, 0, co0, ir0, ca, vec, tid, fill);
        for (int ci = 0; ci < Cin; ++ci) {
            cp_async_wait_all();
            __syncthreads();  // stage ci%2 is complete for everyone; stage (ci+1)%2 is no longer read
            if (ci + 1 < Cin)
                tiled_issue(smem + ((ci + 1) & 1) * STAGE_FLOATS, xn + (i64)(ci + 1) * H * W, w, H, W, Cin, Cout,
                            ci + 1, co0, ir0, ca, vec, tid, fill);
            tiled_compute(smem + (ci & 1) * STAGE_FLOATS, acc, tx, ty);
        }
#else
        for (int ci = 0; ci < Cin; ++ci) {
            if (ci) __syncthreads();  // everyone finished reading the previous channel
            tiled_issue(smem, xn + (i64)ci * H * W, w, H, W, Cin, Cout, ci, co0, ir0, ca, vec, tid, fill);
            cp_async_wait_all();
            __syncthreads();
            tiled_compute(smem, acc, tx, ty);
        }
#endif
        // Store: thread's TY x TX patch for each of its channels; float4 when the whole row of 4 fits.
#pragma unroll
        for (int cc = 0; cc < COB; ++cc) {
            const int co = co0 + cc;
            if (co >= Cout) break;
            const float bv = has_bias ? bias[co] : 0.f;
#pragma unroll
            for (int a = 0; a < TY; ++a) {
                const int r = or0 + ty * TY + a;
                if (r >= Ho) break;
                const int c0 = oc0 + tx * TX;
                float* yp = y + (((i64)n * Cout + co) * Ho + r) * Wo + c0;
                if (TX % 4 == 0 && vec_out && c0 + TX <= Wo) {
#pragma unroll
                    for (int b = 0; b < TX; b += 4)
                        *reinterpret_cast<float4*>(yp + b) = make_float4(acc[cc][a][b] + bv, acc[cc][a][b + 1] + bv,
                                                                         acc[cc][a][b + 2] + bv, acc[cc][a][b + 3] + bv);
                } else {
#pragma unroll
                    for (int b = 0; b < TX; ++b)
                        if (c0 + b < Wo) yp[b] = acc[cc][a][b] + bv;
                }
            }
        }
    }
}

#endif  // C2D_HAS_PART(SIGCONV_C2D_PART_TILED)

// ============================================================================ strip (single channel)
// In conv2d_strip.cuh (kept apart, barrier-free, so a CPU test can run its source; STRIP_* defines there).
#if C2D_HAS_PART(SIGCONV_C2D_PART_STRIP)
#include "conv2d_strip.cuh"
#endif

// ============================================================================ shfl (single channel)
// In conv2d_shfl.cuh: strip's ring with one float4 load per row and the halo columns by warp shuffles.
#if C2D_HAS_PART(SIGCONV_C2D_PART_SHFL)
#include "conv2d_shfl.cuh"
#endif

// ============================================================================ igemm (multi-channel layers)
// In conv2d_igemm.cuh: the layer as an implicit GEMM, the im2col gathered by the copies into shared memory.
#if C2D_HAS_PART(SIGCONV_C2D_PART_IGEMM)
#include "conv2d_igemm.cuh"
#endif

// ========================================================================================= separable
// w[co, ci] = u[co, ci] (kH) outer v[co, ci] (kW). Planes p = z0 + zz, zz < nz, p = n*Cout + co.
// Row pass: tmp[zz, ci, r', c] = sum_j v[co, ci, j] * x[n, ci, r' - py, c*sx + j - px]  for r' < Hn = (Ho-1)*sy + kH.
template <typename T>
__global__ void conv2d_sep_rows(const T* __restrict__ x, const T* __restrict__ v, T* __restrict__ tmp, int z0, int nz,
                                int Cin, int H, int W, int Cout, int kW, int sx, int py, int px, int Hn, int Wo) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int rr = blockIdx.y * blockDim.y + threadIdx.y;
    if (c >= Wo || rr >= Hn) return;
    const int gr = rr - py;
    FOR_PLANES(q, nz * Cin) {
        const int zz = q / Cin, ci = q - zz * Cin;
        const int p = z0 + zz, n = p / Cout, co = p - n * Cout;
        T acc = T(0);
        if (gr >= 0 && gr < H) {
            const T* xr = x + ((i64)(n * Cin + ci) * H + gr) * W;
            const T* vp = v + (i64)(co * Cin + ci) * kW;
            const int c0 = c * sx - px;  // input column of tap 0
            if (c0 >= 0 && c0 + kW <= W) {  // the window's columns inside the image: no test per tap
                for (int j = 0; j < kW; ++j) acc += vp[j] * xr[c0 + j];
            } else {
                for (int j = 0; j < kW; ++j) {
                    const int gc = c0 + j;
                    if (gc >= 0 && gc < W) acc += vp[j] * xr[gc];
                }
            }
        }
        tmp[((i64)q * Hn + rr) * Wo + c] = acc;
    }
}

// Row pass under a boundary other than zero fill (one image, one channel, stride 1): tmp[r', c] = sum_j v[j] *
// xe[r' - py, c + j - px], the image extended by the rule (`boundary`, `fill`), for r' < Hn = Ho + kH - 1; the
// column pass then runs unchanged on tmp. So a wrap, symm or fill-constant call costs separable the two passes of a
// zero-fill call and no third one; the zero-fill row pass above stays as it is. The window's row through
// c2d_row_taps, as in naive.
template <typename T, int B>
__device__ __forceinline__ void sep_rows_ext_body(const T* __restrict__ x, const T* __restrict__ v, T* __restrict__ tmp,
                                                  int H, int W, int kW, int py, int px, int Hn, int Wo, T fill) {
    const int cb = blockIdx.x * blockDim.x;
    const int c = cb + threadIdx.x;
    const int rr = blockIdx.y * blockDim.y + threadIdx.y;
    const bool inside = c2d_block_cols_inside(cb, min((int)blockDim.x, Wo - cb), 1, px, kW, W);
    if (c >= Wo || rr >= Hn || H <= 0 || W <= 0) return;  // (the launcher refuses an empty image)
    const int gr = c2d_extend(rr - py, H, B);  // image row under tmp's row rr; -1: a row of the constant
    tmp[(i64)rr * Wo + c] = c2d_row_taps<T, B>(gr < 0 ? nullptr : x + (i64)gr * W, v, c - px, kW, W, fill, false,
                                               inside, T(0));
}

template <typename T>
__global__ void conv2d_sep_rows_ext(const T* __restrict__ x, const T* __restrict__ v, T* __restrict__ tmp, int H,
                                    int W, int kW, int py, int px, int Hn, int Wo, int boundary, T fill) {
    if (boundary == SIGCONV_BOUNDARY_WRAP)
        sep_rows_ext_body<T, SIGCONV_BOUNDARY_WRAP>(x, v, tmp, H, W, kW, py, px, Hn, Wo, fill);
    else if (boundary == SIGCONV_BOUNDARY_SYMM)
        sep_rows_ext_body<T, SIGCONV_BOUNDARY_SYMM>(x, v, tmp, H, W, kW, py, px, Hn, Wo, fill);
    else
        sep_rows_ext_body<T, SIGCONV_BOUNDARY_FILL>(x, v, tmp, H, W, kW, py, px, Hn, Wo, fill);
}

// Column pass: y[p, r, c] = bias[co] + sum_ci sum_i u[co, ci, i] * tmp[zz, ci, r*sy + i, c].
template <typename T>
__global__ void conv2d_sep_cols(const T* __restrict__ tmp, const T* __restrict__ u, const T* __restrict__ bias,
                                T* __restrict__ y, int z0, int nz, int Cin, int Cout, int kH, int sy, int Hn, int Ho,
                                int Wo, int has_bias) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (c >= Wo || r >= Ho) return;
    FOR_PLANES(zz, nz) {
        const int p = z0 + zz, co = p % Cout;
        T acc = has_bias ? bias[co] : T(0);
        for (int ci = 0; ci < Cin; ++ci) {
            const T* tp = tmp + ((i64)(zz * Cin + ci) * Hn + (i64)r * sy) * Wo + c;
            const T* up = u + (i64)(co * Cin + ci) * kH;
            for (int i = 0; i < kH; ++i) acc += up[i] * tp[(i64)i * Wo];
        }
        y[((i64)p * Ho + r) * Wo + c] = acc;
    }
}

// ========================================================================================= extend
// The other way to a boundary other than zero fill: the image extended by the rule (c2d_extend) into a new array
// xe of He x We, xe[r, c] = xe(x)[r - oy, c - ox], which any variant then reads with zero padding as a "valid"
// correlation, at zero-fill speed, for one read and one write of the extended image (on request: corr2d's
// `extend`; every variant reads the extension in its own loads otherwise). One thread per column, stepping over rows
// (grid-stride in y): a warp's loads and stores are consecutive columns of one row (backwards under symm's mirror,
// still within the row's cache lines).
template <typename T>
__global__ void conv2d_extend(const T* __restrict__ x, T* __restrict__ xe, int H, int W, int He, int We, int oy,
                              int ox, int boundary, T fill) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= We || H <= 0 || W <= 0) return;  // (the launcher refuses an empty image)
    const int ec = c2d_extend(c - ox, W, boundary);  // image column under xe's column c; -1: fill
    for (int r = blockIdx.y * blockDim.y + threadIdx.y; r < He; r += gridDim.y * blockDim.y) {
        const int er = c2d_extend(r - oy, H, boundary);
        xe[(i64)r * We + c] = (er < 0 || ec < 0) ? fill : x[(i64)er * W + ec];
    }
}

// Instances for the stand-alone nvcc check (NVRTC builds the same names from name_expressions).
// (C2D_I14: the 14 int arguments N .. has_bias)
#if C2D_HAS_PART(SIGCONV_C2D_PART_GENERIC)
#define C2D_I14 int, int, int, int, int, int, int, int, int, int, int, int, int, int
template __global__ void conv2d_naive<float>(const float*, const float*, const float*, float*, C2D_I14, float);
template __global__ void conv2d_naive_ext<float>(const float*, const float*, const float*, float*, C2D_I14, int);
template __global__ void conv2d_naive<double>(const double*, const double*, const double*, double*, C2D_I14, double);
template __global__ void conv2d_naive_ext<double>(const double*, const double*, const double*, double*, C2D_I14, int);
template __global__ void conv2d_naive<c2d_u64>(const c2d_u64*, const c2d_u64*, const c2d_u64*, c2d_u64*, C2D_I14,
                                               c2d_u64);
template __global__ void conv2d_naive_ext<c2d_u64>(const c2d_u64*, const c2d_u64*, const c2d_u64*, c2d_u64*,
                                                   C2D_I14, int);
#undef C2D_I14
template __global__ void conv2d_extend<float>(const float*, float*, int, int, int, int, int, int, int, float);
template __global__ void conv2d_extend<double>(const double*, double*, int, int, int, int, int, int, int, double);
template __global__ void conv2d_extend<unsigned long long>(const unsigned long long*, unsigned long long*, int, int, int,
                                                           int, int, int, int, unsigned long long);
template __global__ void conv2d_shared<float>(const float*, const float*, const float*, float*, int, int, int, int, int,
                                              int, int, int, int, int, int, int, int, int, int, int, float);
template __global__ void conv2d_shared<double>(const double*, const double*, const double*, double*, int, int, int,
                                               int, int, int, int, int, int, int, int, int, int, int, int, int, double);
template __global__ void conv2d_sep_rows<float>(const float*, const float*, float*, int, int, int, int, int, int, int,
                                                int, int, int, int, int);
template __global__ void conv2d_sep_rows<double>(const double*, const double*, double*, int, int, int, int, int, int,
                                                 int, int, int, int, int, int);
template __global__ void conv2d_sep_rows_ext<float>(const float*, const float*, float*, int, int, int, int, int, int,
                                                    int, int, float);
template __global__ void conv2d_sep_rows_ext<double>(const double*, const double*, double*, int, int, int, int, int,
                                                     int, int, int, double);
template __global__ void conv2d_sep_cols<float>(const float*, const float*, const float*, float*, int, int, int, int,
                                                int, int, int, int, int, int);
template __global__ void conv2d_sep_cols<double>(const double*, const double*, const double*, double*, int, int, int,
                                                 int, int, int, int, int, int, int);
#endif  // C2D_HAS_PART(SIGCONV_C2D_PART_GENERIC)
