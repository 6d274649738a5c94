// sigconv 2-D convolution kernels (NCHW cross-correlation, torch.nn.functional.conv2d semantics).
//
//   y[n, co, r, c] = bias[co] + sum_{ci, i, j} w[co, ci, i, j] * x[n, ci, r*sy + i - py, c*sx + j - px]
//   for 0 <= r < Ho, 0 <= c < Wo; outside [0, H) x [0, W) x is extended by the compiled boundary (below): zero
//   by default (bottom/right pads are implied by Ho, Wo).
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
//
// Boundaries other than zero fill (wrap, symm, a non-zero fill constant; single channel): every variant reads
// the extended image xe through one index-mapping rule (c2d_extend, conv2d_common.cuh), the rule compiled in
// (C2D_BOUNDARY, prepended by the launcher), the fill constant a kernel argument: one pass, no second one.
//
// Dtypes: naive, shared, separable are templates (float, double; name expressions "conv2d_naive<float>");
// naive also for unsigned long long (exact integer convolution: sums wrap mod 2^64, which is
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

#include "conv2d_common.cuh"

// ============================================================================================ naive
// xe: x extended by the compiled boundary (C2D_BOUNDARY, conv2d_common.cuh): `fill` outside under fill (zero for
// plain zero padding, where outside taps are skipped), wrapped or mirrored samples under wrap and symm. A row of
// taps outside the image is skipped (fill 0) or adds fill times its weights; a row inside it, c2d_row_taps. Every
// variant reads xe directly this way: one pass for any rule.

// acc + the taps j0 <= j < j1 of weight row wr over xe's row xr at columns c0 + j, each through the rule.
template <typename T>
__device__ __forceinline__ T c2d_mapped_taps(const T* __restrict__ xr, const T* __restrict__ wr, int j0, int j1,
                                             int c0, int W, T fill, bool addfill, T acc) {
    for (int j = j0; j < j1; ++j) {
        const int gc = c2d_extend(c0 + j, W, C2D_BOUNDARY);
        if (gc >= 0)
            acc += wr[j] * xr[gc];
        else if (addfill)
            acc += wr[j] * fill;
    }
    return acc;
}

// acc + the kW taps of weight row wr over xe's row xr at columns c0 + j. Under fill each column maps through the
// rule, which there is the bounds test of a zero-padded loop. Under wrap and symm the mapping is not affine in j,
// so loads through it cannot stride: only the columns outside the image map (j < jl, j >= jr), those between
// read the row directly, and a thread whose window columns all lie inside (`inside`) runs zero fill's loop. (The
// fill build keeps its one loop: split into runs like this, it measured 1.24 x slower on the 3x3 spectrogram on
// an H200, for the registers the unrolled runs take in every thread.)
template <typename T>
__device__ __forceinline__ T c2d_row_taps(const T* __restrict__ xr, const T* __restrict__ wr, int kW, int c0, int W,
                                          bool inside, T fill, bool addfill, T acc) {
    if (C2D_BOUNDARY == SIGCONV_BOUNDARY_FILL) return c2d_mapped_taps<T>(xr, wr, 0, kW, c0, W, fill, addfill, acc);
    int jl = 0, jr = kW;  // the tap columns that read inside the image: [jl, jr)
    if (!inside) {
        jl = c0 >= 0 ? 0 : (-c0 < kW ? -c0 : kW);
        jr = W - c0 <= jl ? jl : (W - c0 < kW ? W - c0 : kW);
        acc = c2d_mapped_taps<T>(xr, wr, 0, jl, c0, W, fill, addfill, acc);
    }
    for (int j = jl; j < jr; ++j) acc += wr[j] * xr[c0 + j];
    if (!inside) acc = c2d_mapped_taps<T>(xr, wr, jr, kW, c0, W, fill, addfill, acc);
    return acc;
}

template <typename T>
__device__ __forceinline__ void naive_body(const T* __restrict__ x, const T* __restrict__ w,
                                           const T* __restrict__ bias, T* __restrict__ y, int N, int Cin,
                                           int H, int W, int Cout, int kH, int kW, int sy, int sx, int py,
                                           int px, int Ho, int Wo, int has_bias, T fill) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;  // output column
    const int r = blockIdx.y * blockDim.y + threadIdx.y;  // output row
    if (r >= Ho || c >= Wo) return;                       // no barriers below: early exit is safe
    const bool addfill = fill != T(0);                    // (uniform: the zero-fill build skips outside taps)
    const int c0 = c * sx - px;                           // xe column of tap column 0
    const bool inside = c0 >= 0 && c0 + kW <= W;          // every tap column inside the image
    FOR_PLANES(z, N * Cout) {
        const int n = z / Cout, co = z - n * Cout;
        T acc = has_bias ? bias[co] : T(0);
        for (int ci = 0; ci < Cin; ++ci) {
            const T* xp = x + (i64)(n * Cin + ci) * H * W;
            const T* wp = w + (i64)(co * Cin + ci) * kH * kW;
            for (int i = 0; i < kH; ++i) {
                const int gr = c2d_extend(r * sy + i - py, H, C2D_BOUNDARY);  // xe row of tap row i
                const T* wr = wp + i * kW;
                if (gr < 0) {  // a row of the fill constant
                    if (addfill)
                        for (int j = 0; j < kW; ++j) acc += wr[j] * fill;
                    continue;
                }
                acc = c2d_row_taps<T>(xp + (i64)gr * W, wr, kW, c0, W, inside, fill, addfill, acc);
            }
        }
        y[((i64)z * Ho + r) * Wo + c] = acc;
    }
}

template <typename T>
__global__ void conv2d_naive(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                             T* __restrict__ y, int N, int Cin, int H, int W, int Cout, int kH, int kW, int sy,
                             int sx, int py, int px, int Ho, int Wo, int has_bias, T fill) {
    naive_body<T>(x, w, bias, y, N, Cin, H, W, Cout, kH, kW, sy, sx, py, px, Ho, Wo, has_bias, fill);
}

// =========================================================================================== shared
// Block (bx, by) -> output tile rows [or0, or0+by) x cols [oc0, oc0+bx) of plane (n, co).
// Input tile: th = (by-1)*sy + kH rows, tw = (bx-1)*sx + kW cols starting at (or0*sy - py, oc0*sx - px), of xe
// (the image extended by C2D_BOUNDARY, as in naive).
// Row pitch `pitch` >= tw is chosen by the launcher so that the rows one warp touches fall in distinct banks.
// A tile inside the image loads plainly; only the edge blocks' tiles (EDGE) map each element through the rule.
template <typename T, bool EDGE>
__device__ __forceinline__ void shared_load_tile(T* tile, const T* __restrict__ xp, int H, int W, int th, int tw,
                                                 int pitch, int ir0, int ic0, int tid, int nt, T fill) {
    for (int idx = tid; idx < th * tw; idx += nt) {
        const int tr = idx / tw, tc = idx - tr * tw;
        if (EDGE) {
            const int gr = c2d_extend(ir0 + tr, H, C2D_BOUNDARY), gc = c2d_extend(ic0 + tc, W, C2D_BOUNDARY);
            tile[tr * pitch + tc] = (gr >= 0 && gc >= 0) ? xp[(i64)gr * W + gc] : fill;
        } else {
            tile[tr * pitch + tc] = xp[(i64)(ir0 + tr) * W + (ic0 + tc)];
        }
    }
}

template <typename T>
__global__ void conv2d_shared(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                              T* __restrict__ y, int N, int Cin, int H, int W, int Cout, int kH, int kW, int sy,
                              int sx, int py, int px, int Ho, int Wo, int has_bias, int pitch, T fill) {
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
    const bool inside = ir0 >= 0 && ir0 + th <= H && ic0 >= 0 && ic0 + tw <= W;  // the tile needs no rule
    FOR_PLANES(z, N * Cout) {
        const int n = z / Cout, co = z - n * Cout;
        T acc = (has_bias && live) ? bias[co] : T(0);
        for (int ci = 0; ci < Cin; ++ci) {
            const T* xp = x + (i64)(n * Cin + ci) * H * W;
            __syncthreads();  // previous channel's reads are done before overwriting the tile
            if (inside)
                shared_load_tile<T, false>(tile, xp, H, W, th, tw, pitch, ir0, ic0, tid, nt, fill);
            else
                shared_load_tile<T, true>(tile, xp, H, W, th, tw, pitch, ir0, ic0, tid, nt, fill);
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
// Block (BX, BY) threads; thread (tx, ty) computes outputs rows or0 + ty*TY + a (a < TY), columns
// oc0 + tx*TX + b (b < TX), channels co0 + cc (cc < COB). Output tile OH x OW per block.
#define OH (BY * TY)
#define OW (BX * TX)
#define NT (BX * BY)
#define MINB (NT >= 256 ? 1 : 256 / NT)  // 256 threads per SM at least (the cap stays at 255 registers)
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

#ifndef SIGCONV_HOST_EMULATION  // (the CPU test harness supplies synchronous stand-ins for these five)
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
// cp.async with zero fill: copies `src_bytes` (0 or the full size) and zero-fills the rest.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
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

extern "C" __global__ void __launch_bounds__(NT, MINB) conv2d_tiled(const float* __restrict__ x, const float* __restrict__ w,
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

// ============================================================================ strip (single channel)
// In conv2d_strip.cuh (kept apart, barrier-free, so a CPU test can run its source; STRIP_* defines there).
#include "conv2d_strip.cuh"

// ============================================================================ shfl (single channel)
// In conv2d_shfl.cuh: strip's ring with one float4 load per row and the halo columns by warp shuffles.
#include "conv2d_shfl.cuh"

// ========================================================================================= separable
// w[co, ci] = u[co, ci] (kH) outer v[co, ci] (kW). Planes p = z0 + zz, zz < nz, p = n*Cout + co.
// Row pass: tmp[zz, ci, r', c] = sum_j v[co, ci, j] * xe[n, ci, r' - py, c*sx + j - px]  for r' < Hn = (Ho-1)*sy + kH,
// xe the image extended by C2D_BOUNDARY (as in naive): a row outside it is the fill constant's, sum_j v[j] * fill.
// The column pass then reads every row it needs from tmp: the boundary costs it nothing.
template <typename T>
__global__ void conv2d_sep_rows(const T* __restrict__ x, const T* __restrict__ v, T* __restrict__ tmp, int z0, int nz,
                                int Cin, int H, int W, int Cout, int kW, int sx, int py, int px, int Hn, int Wo,
                                T fill) {
    const int c = blockIdx.x * blockDim.x + threadIdx.x;
    const int rr = blockIdx.y * blockDim.y + threadIdx.y;
    if (c >= Wo || rr >= Hn) return;
    const int gr = c2d_extend(rr - py, H, C2D_BOUNDARY);
    const bool addfill = fill != T(0);
    const int c0 = c * sx - px;
    const bool inside = c0 >= 0 && c0 + kW <= W;
    FOR_PLANES(q, nz * Cin) {
        const int zz = q / Cin, ci = q - zz * Cin;
        const int p = z0 + zz, n = p / Cout, co = p - n * Cout;
        const T* vp = v + (i64)(co * Cin + ci) * kW;
        T acc = T(0);
        if (gr >= 0) {  // (the columns as in naive)
            acc = c2d_row_taps<T>(x + ((i64)(n * Cin + ci) * H + gr) * W, vp, kW, c0, W, inside, fill, addfill, acc);
        } else if (addfill) {
            for (int j = 0; j < kW; ++j) acc += vp[j] * fill;
        }
        tmp[((i64)q * Hn + rr) * Wo + c] = acc;
    }
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

// Instances for the stand-alone nvcc check (NVRTC builds the same names from name_expressions).
#define C2D_GENERIC(T)                                                                                                 \
    template __global__ void conv2d_naive<T>(const T*, const T*, const T*, T*, int, int, int, int, int, int, int, int, \
                                             int, int, int, int, int, int, T);
#define C2D_GENERIC_FLOAT(T)                                                                                           \
    C2D_GENERIC(T)                                                                                                     \
    template __global__ void conv2d_shared<T>(const T*, const T*, const T*, T*, int, int, int, int, int, int, int,     \
                                              int, int, int, int, int, int, int, int, T);                              \
    template __global__ void conv2d_sep_rows<T>(const T*, const T*, T*, int, int, int, int, int, int, int, int, int,  \
                                                int, int, int, T);                                                     \
    template __global__ void conv2d_sep_cols<T>(const T*, const T*, const T*, T*, int, int, int, int, int, int, int,  \
                                                int, int, int);
C2D_GENERIC_FLOAT(float)
C2D_GENERIC_FLOAT(double)
C2D_GENERIC(unsigned long long)
