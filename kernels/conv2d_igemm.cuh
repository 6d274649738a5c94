// conv2d_igemm.cuh: the multi-channel layer as an implicit GEMM (float32 data), variants igemm (CUDA cores) and
// igemm_tf32 (TF32 tensor cores, opt-in). conv2d.cu includes it for C2D_PART == SIGCONV_C2D_PART_IGEMM.
//
//   Y[co, p] = sum_k A[k, co] * B[k, p]
//   A = w viewed as (Cout, Cin*KH*KW) and transposed (conv2d_igemm_wt, once per call), k = (ci*KH + i)*KW + j
//   B[k, p] = x[n, ci, r*SY + i - py, c*SX + j - px] (0 outside the image), p = (n*Ho + r)*Wo + c
//   y[n, co, r, c] = Y[co, p] + bias[co]
//
// A block of IG_NT threads computes one IG_BM x IG_BN tile of Y (a group of output channels by a run of pixels, which
// may span output rows and images), stepping through k IG_BK = 16 at a time. Each step's slices of A and B are copied
// into shared memory by cp.async, IG_STAGES - 1 steps ahead of the step being computed, so that the copies of later
// steps overlap the arithmetic: A by 16-byte copies of the transposed weights, B gathered from x by 4-byte copies,
// zero-filled where a tap falls outside the image or past the ends. A table of the k index's parts (ci*H*W + i*W + j
// and i, j), built once per geometry, spares the gather any division. Nothing of B is materialised in global memory: the
// im2col happens in the copies.
//   igemm      : thread (tx, ty) of the (BX, BY) block holds IG_TM x IG_TN accumulators, rows (h*BY + ty)*4 + e
//                (h < IG_TM/4), columns (g*BX + tx)*4 + e (g < IG_TN/4), each read as float4s from shared memory (a
//                warp reads a few A vectors, broadcast, and consecutive B vectors).
//   igemm_tf32 : (IG_TF32 = 1) mma.sync m16n8k8 on TF32 operands (sm_80 and later): warp (wm, wn) of the
//                IG_WARPS_M x IG_WARPS_N warps owns IG_MT x IG_NT8 fragments of 16 x 8 outputs. The inputs are rounded
//                to TF32 (10-bit mantissa, cvt.rna) and the products summed in float32: the arithmetic of cuDNN with
//                allow_tf32.
// Boundaries: zero fill, or (single-channel jobs) the fill constant `fill` (IG_FILLC builds) or C2D_BOUNDARY's wrap/symm
// compiled in: the gather maps each tap through c2d_extend, so no extended copy of the image is made.
// Shared memory, per stage: As[k][m] (row pitch IG_APITCH floats), then Bs[k][p] (row pitch IG_BPITCH).
// The launcher (sigconv.backends.cuda2d.igemm_plan) sets the defines and mirrors the sizes below.
#ifndef IG_TF32
#define IG_TF32 0
#endif
#ifndef IG_STAGES
#define IG_STAGES 3
#endif
#ifndef IG_BK
#define IG_BK 16  // k rows per step (the launcher passes 8 for blocks of more than 512 threads: fewer registers)
#endif
#define IG_NT (BX * BY)
#define IG_KK (KH * KW)
#if IG_TF32
#ifndef IG_WARPS_M
#define IG_WARPS_M 2
#endif
#ifndef IG_WARPS_N
#define IG_WARPS_N 4
#endif
#ifndef IG_MT
#define IG_MT 4
#endif
#ifndef IG_NT8
#define IG_NT8 4
#endif
#define IG_BM (16 * IG_MT * IG_WARPS_M)
#define IG_BN (8 * IG_NT8 * IG_WARPS_N)
// Pitches of an odd multiple of 8 floats: a fragment load (k = lane % 4 and k + 4, m or p = lane / 4 + const) then
// reads 32 distinct banks.
#define IG_APITCH (IG_BM + 8)
#define IG_BPITCH (IG_BN % 16 == 0 ? IG_BN + 8 : IG_BN)
#else
#ifndef IG_TM
#define IG_TM 8
#endif
#ifndef IG_TN
#define IG_TN 8
#endif
#define IG_BM (IG_TM * BY)
#define IG_BN (IG_TN * BX)
#define IG_APITCH (IG_BM + 4)  // the 8 k rows of a warp's A stores start in distinct bank groups
#define IG_BPITCH IG_BN
#endif
#define IG_STAGE_FLOATS (IG_BK * (IG_APITCH + IG_BPITCH))
// Copy assignments. A: float4 idx = tid + q*IG_NT of the IG_BK x IG_BM/4 slice, k row idx / (IG_BM/4), channels
// 4*(idx % (IG_BM/4)) and the three after.
#define IG_A_VEC (IG_BK * (IG_BM / 4))
#define IG_A_PER ((IG_A_VEC + IG_NT - 1) / IG_NT)
// B: thread tid copies pixels p = tid % IG_BN + q*IG_NT (q < IG_B_PIX) in the k rows kg + r*IG_B_KSPLIT (r < IG_B_KPER)
// with kg = tid / IG_BN: a block wider than the tile splits the k rows among IG_B_KSPLIT threads per pixel.
#define IG_B_KSPLIT (IG_NT >= IG_BN ? IG_NT / IG_BN : 1)
#define IG_B_PIX (IG_NT >= IG_BN ? 1 : (IG_BN + IG_NT - 1) / IG_NT)
#define IG_B_KPER ((IG_BK + IG_B_KSPLIT - 1) / IG_B_KSPLIT)
// The row origin of a pixel past the end (or past the tile), and the tap row of a k past Cin*KH*KW (the table's
// padding): every such tap fails the bounds test, and is no tap of an output.
#define IG_NO_ROW (-(1 << 29))
// 1: a build for a non-zero fill constant (plain stores of `fill` where a tap leaves the image); 0: zero fill, by
// cp.async's zero fill alone.
#ifndef IG_FILLC
#define IG_FILLC 0
#endif
// 1: a tap's place in the image is tested by one bit of a per-pixel mask over the kernel's taps (kernels of at most 31
// taps, zero or constant fill), the table's second column then holding the tap's number r = i*KW + j and padded to
// whole steps with r = 31 (no bit); 0: by the tap's row and column (i << 16 | j) against the image's bounds.
#ifndef IG_MASK
#define IG_MASK 0
#endif
#if IG_MASK
static_assert(IG_KK <= 31 && C2D_BOUNDARY == SIGCONV_BOUNDARY_FILL, "the tap mask covers up to 31 taps, fill only");
#endif
// At least two blocks of 256 threads per multiprocessor (registers held to 128 per thread); the launcher passes 1 for a
// build that would spill under that bound.
#ifndef IG_MINB
#define IG_MINB (IG_NT >= 512 ? 1 : 512 / IG_NT)
#endif

static_assert(IG_BM % 4 == 0 && IG_BN % 4 == 0, "tile sides must be multiples of 4");
static_assert(IG_NT % 32 == 0 && IG_NT <= 1024, "whole warps, at most 1024 threads");
#if IG_TF32
static_assert(IG_WARPS_M * IG_WARPS_N * 32 == IG_NT, "warp grid must cover the block");
#else
static_assert(IG_TM % 4 == 0 && IG_TN % 4 == 0, "IG_TM and IG_TN must be multiples of 4");
#endif

// The weights as the A operand: wt[k][m] = w[m][k] (k < Ktot, m < Cout), zero in the padding up to Ktp rows (a
// multiple of IG_BK) and Coutp columns (a multiple of 4), so that the tile copies are 16-byte and unconditional in k.
extern "C" __global__ void conv2d_igemm_wt(const float* __restrict__ w, float* __restrict__ wt, int Cout, int Ktot,
                                           int Coutp, int Ktp) {
    const i64 n = (i64)Ktp * Coutp;
    for (i64 idx = (i64)blockIdx.x * blockDim.x + threadIdx.x; idx < n; idx += (i64)gridDim.x * blockDim.x) {
        const int k = (int)(idx / Coutp), m = (int)(idx - (i64)k * Coutp);
        wt[idx] = (m < Cout && k < Ktot) ? w[(i64)m * Ktot + k] : 0.f;
    }
}

// One thread's pixel: where its window starts (ih0, iw0), and where that lies in x: org = &x[n, 0, ih0, iw0], to which a
// tap adds its table entry (a pointer that may lie outside x: it is read only through the taps inside the image).
struct IgPixel {
    const float* org;
    int ih0, iw0;
#if IG_MASK
    unsigned mask;  // bit r: tap r = i*KW + j lies inside the image
#endif
};

// Issue the copies of k step kt into stage buffer `st`. tab[k] = (ci*H*W + i*W + j, i << 16 | j) for k = (ci*KH + i)*KW + j
// < Ktot, or with IG_MASK (ci*H*W + i*W + j, r) padded (sigconv.backends.cuda2d.igemm_table, built once per geometry);
// k beyond Ktot copies zeros (its A row is zero too).
__device__ __forceinline__ void ig_issue(float* st, const float* __restrict__ wt, const int2* __restrict__ tab,
                                         const IgPixel (&pix)[IG_B_PIX], int tid, int kt, int Ktot, int Coutp, int co0,
                                         int H, int W, float fill) {
    const int k0 = kt * IG_BK;
    float* As = st;
    float* Bs = st + IG_BK * IG_APITCH;
    const float* wrow = wt + ((i64)k0 * Coutp + co0);  // the step's first row of A, at the tile's first channel
#pragma unroll
    for (int q = 0; q < IG_A_PER; ++q) {
        const int idx = tid + q * IG_NT;
        if (IG_A_PER * IG_NT > IG_A_VEC && idx >= IG_A_VEC) break;
        const int kk = idx / (IG_BM / 4), m = 4 * (idx - kk * (IG_BM / 4));
        const bool ok = co0 + m < Coutp;
        cp_async16(As + kk * IG_APITCH + m, ok ? (const void*)(wrow + (kk * Coutp + m)) : (const void*)wt, ok ? 16 : 0);
    }
    if (IG_NT > IG_B_KSPLIT * IG_BN && tid >= IG_B_KSPLIT * IG_BN) return;  // (threads beyond the split: no B copies)
    const int kg = tid / IG_BN;
    const int2* trow = tab + (k0 + kg);  // this thread's first table row; the others at constant offsets
    const int krem = Ktot - (k0 + kg);   // its rows r*IG_B_KSPLIT < krem are taps, the rest padding
#pragma unroll
    for (int r = 0; r < IG_B_KPER; ++r) {
        const int kk = kg + r * IG_B_KSPLIT;
        if (IG_B_KPER * IG_B_KSPLIT > IG_BK && kk >= IG_BK) break;
#if IG_MASK
        const int2 t = __ldg(trow + r * IG_B_KSPLIT);  // (padded: the rows past Ktot have r = 31, no bit of any mask)
        (void)krem;
#pragma unroll
        for (int q = 0; q < IG_B_PIX; ++q) {
            const int p = tid % IG_BN + q * IG_NT;
            if (IG_B_PIX * IG_NT > IG_BN && p >= IG_BN) break;
            float* dst = Bs + kk * IG_BPITCH + p;
            const bool ok = (pix[q].mask >> t.y) & 1u;
#if IG_FILLC
            if (!ok && t.y != 31 && pix[q].ih0 != IG_NO_ROW) {
                *dst = fill;
                continue;
            }
#endif
            cp_async4(dst, ok ? (const void*)(pix[q].org + t.x) : (const void*)tab, ok ? 4 : 0);
        }
#else
        const bool kin = r * IG_B_KSPLIT < krem;
        const int2 t = kin ? __ldg(trow + r * IG_B_KSPLIT) : make_int2(0, 0);
        const int i = t.y >> 16, j = t.y & 0xffff;
#pragma unroll
        for (int q = 0; q < IG_B_PIX; ++q) {
            const int p = tid % IG_BN + q * IG_NT;
            if (IG_B_PIX * IG_NT > IG_BN && p >= IG_BN) break;
            float* dst = Bs + kk * IG_BPITCH + p;
            const int ih = pix[q].ih0 + i, iw = pix[q].iw0 + j;
#if C2D_BOUNDARY == SIGCONV_BOUNDARY_FILL
            const bool ok = kin && (unsigned)ih < (unsigned)H && (unsigned)iw < (unsigned)W;
#if IG_FILLC
            if (!ok && kin && pix[q].ih0 != IG_NO_ROW) {
                *dst = fill;  // (a plain store into the stage; the barrier before its step makes it visible)
                continue;
            }
#endif
            cp_async4(dst, ok ? (const void*)(pix[q].org + t.x) : (const void*)tab, ok ? 4 : 0);
#else  // wrap, symm: every tap of an output reads the image (H, W > 0: the launcher refuses an empty one)
            const bool real = kin && pix[q].ih0 != IG_NO_ROW;
            const int er = c2d_extend(ih, H, C2D_BOUNDARY), ec = c2d_extend(iw, W, C2D_BOUNDARY);
            // x[n, ci, er, ec] = org - (ih0*W + iw0) + (koff - (i*W + j)) + er*W + ec
            const int rel = (er - ih) * W + (ec - iw);
            cp_async4(dst, real ? (const void*)(pix[q].org + t.x + rel) : (const void*)tab, real ? 4 : 0);
#endif
        }
#endif  // IG_MASK
    }
    (void)fill;
}

#if IG_TF32
#ifndef SIGCONV_HOST_EMULATION  // (the CPU harness emulates these two: tests/host_emulation/cuda_shim_threads.h)
__device__ __forceinline__ unsigned ig_tf32(float v) {
    unsigned r;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
    return r;
}
// d += a (16 x 8, row-major fragments) * b (8 x 8, column-major fragments): PTX's m16n8k8 TF32 layout, lane = 4*g + t:
// a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]; b = B[t][g], B[t+4][g]; d = D[g][2t], D[g][2t+1], D[g+8][2t],
// D[g+8][2t+1].
__device__ __forceinline__ void ig_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

typedef float IgAcc[IG_MT][IG_NT8][4];

__device__ __forceinline__ void ig_zero(IgAcc& acc) {
#pragma unroll
    for (int i = 0; i < IG_MT; ++i)
#pragma unroll
        for (int j = 0; j < IG_NT8; ++j)
#pragma unroll
            for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.f;
}

__device__ __forceinline__ void ig_compute(const float* st, IgAcc& acc, int tid) {
    const float* As = st;
    const float* Bs = st + IG_BK * IG_APITCH;
    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int m0 = (warp % IG_WARPS_M) * (16 * IG_MT) + g, n0 = (warp / IG_WARPS_M) * (8 * IG_NT8) + g;
#pragma unroll
    for (int k8 = 0; k8 < IG_BK; k8 += 8) {
        unsigned a[IG_MT][4], b[IG_NT8][2];
#pragma unroll
        for (int i = 0; i < IG_MT; ++i) {
            const float* ap = As + (k8 + t) * IG_APITCH + m0 + 16 * i;
            a[i][0] = ig_tf32(ap[0]);
            a[i][1] = ig_tf32(ap[8]);
            a[i][2] = ig_tf32(ap[4 * IG_APITCH]);
            a[i][3] = ig_tf32(ap[4 * IG_APITCH + 8]);
        }
#pragma unroll
        for (int j = 0; j < IG_NT8; ++j) {
            const float* bp = Bs + (k8 + t) * IG_BPITCH + n0 + 8 * j;
            b[j][0] = ig_tf32(bp[0]);
            b[j][1] = ig_tf32(bp[4 * IG_BPITCH]);
        }
#pragma unroll
        for (int i = 0; i < IG_MT; ++i)
#pragma unroll
            for (int j = 0; j < IG_NT8; ++j) ig_mma(acc[i][j], a[i], b[j]);
    }
}

// The output (m, p) of accumulator [i][j][e]: m = m0 + 16i + 8(e/2), p = n0 + 8j + (e%2), with m0, n0 of the warp
// and lane (row g, columns 2t and 2t + 1 of each fragment).
__device__ __forceinline__ void ig_store(const IgAcc& acc, float* __restrict__ y, const float* __restrict__ bias,
                                         int has_bias, int tid, int co0, i64 p0, int Cout, int HoWo, i64 Npix,
                                         int vec_out) {
    const int warp = tid / 32, lane = tid % 32, g = lane >> 2, t = lane & 3;
    const int m0 = (warp % IG_WARPS_M) * (16 * IG_MT) + g, n0 = (warp / IG_WARPS_M) * (8 * IG_NT8) + 2 * t;
#pragma unroll
    for (int j = 0; j < IG_NT8; ++j) {
        const i64 p = p0 + n0 + 8 * j;  // even: with HoWo even the pair lies in one image
        if (p >= Npix) continue;
        const i64 n = p / HoWo;
        const int q = (int)(p - n * HoWo);
#pragma unroll
        for (int i = 0; i < IG_MT; ++i)
#pragma unroll
            for (int hf = 0; hf < 2; ++hf) {
                const int co = co0 + m0 + 16 * i + 8 * hf;
                if (co >= Cout) continue;
                const float bv = has_bias ? bias[co] : 0.f;
                const float v0 = acc[i][j][2 * hf] + bv, v1 = acc[i][j][2 * hf + 1] + bv;
                float* yp = y + (n * Cout + co) * HoWo + q;
                if (vec_out && q + 2 <= HoWo) {
                    *reinterpret_cast<float2*>(yp) = make_float2(v0, v1);
                } else {
                    *yp = v0;
                    if (p + 1 < Npix) {  // the next pixel, maybe the first of the next image
                        const i64 n1 = (p + 1) / HoWo;
                        y[(n1 * Cout + co) * HoWo + (p + 1 - n1 * HoWo)] = v1;
                    }
                }
            }
    }
}

#else  // CUDA cores

typedef float IgAcc[IG_TM][IG_TN];

__device__ __forceinline__ void ig_zero(IgAcc& acc) {
#pragma unroll
    for (int m = 0; m < IG_TM; ++m)
#pragma unroll
        for (int n = 0; n < IG_TN; ++n) acc[m][n] = 0.f;
}

__device__ __forceinline__ void ig_compute(const float* st, IgAcc& acc, int tid) {
    const float* As = st;
    const float* Bs = st + IG_BK * IG_APITCH;
    const int tx = tid % BX, ty = tid / BX;
#pragma unroll
    for (int kk = 0; kk < IG_BK; ++kk) {
        float a[IG_TM], b[IG_TN];
#pragma unroll
        for (int h = 0; h < IG_TM / 4; ++h) {
            const float4 v = *reinterpret_cast<const float4*>(As + kk * IG_APITCH + (h * BY + ty) * 4);
            a[4 * h] = v.x; a[4 * h + 1] = v.y; a[4 * h + 2] = v.z; a[4 * h + 3] = v.w;
        }
#pragma unroll
        for (int gq = 0; gq < IG_TN / 4; ++gq) {
            const float4 v = *reinterpret_cast<const float4*>(Bs + kk * IG_BPITCH + (gq * BX + tx) * 4);
            b[4 * gq] = v.x; b[4 * gq + 1] = v.y; b[4 * gq + 2] = v.z; b[4 * gq + 3] = v.w;
        }
#pragma unroll
        for (int m = 0; m < IG_TM; ++m)
#pragma unroll
            for (int n = 0; n < IG_TN; ++n) acc[m][n] = fmaf(a[m], b[n], acc[m][n]);
    }
}

// acc[4h + e][4gq + e2] is output (m, p) = ((h*BY + ty)*4 + e, (gq*BX + tx)*4 + e2) of the tile.
__device__ __forceinline__ void ig_store(const IgAcc& acc, float* __restrict__ y, const float* __restrict__ bias,
                                         int has_bias, int tid, int co0, i64 p0, int Cout, int HoWo, i64 Npix,
                                         int vec_out) {
    const int tx = tid % BX, ty = tid / BX;
#pragma unroll
    for (int gq = 0; gq < IG_TN / 4; ++gq) {
        const i64 p = p0 + (gq * BX + tx) * 4;  // a multiple of 4: with HoWo % 4 == 0 the four lie in one image
        if (p >= Npix) continue;
        const i64 n = p / HoWo;
        const int q = (int)(p - n * HoWo);
        const bool vec = vec_out && q + 4 <= HoWo;
#pragma unroll
        for (int h = 0; h < IG_TM / 4; ++h)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
                const int m = 4 * h + e, co = co0 + (h * BY + ty) * 4 + e;
                if (co >= Cout) continue;
                const float bv = has_bias ? bias[co] : 0.f;
                float* yp = y + (n * Cout + co) * HoWo + q;
                if (vec) {
                    *reinterpret_cast<float4*>(yp) = make_float4(acc[m][4 * gq] + bv, acc[m][4 * gq + 1] + bv,
                                                                 acc[m][4 * gq + 2] + bv, acc[m][4 * gq + 3] + bv);
                } else {
#pragma unroll
                    for (int e2 = 0; e2 < 4; ++e2) {
                        const i64 pe = p + e2;
                        if (pe >= Npix) break;
                        const i64 ne = pe / HoWo;
                        y[(ne * Cout + co) * HoWo + (pe - ne * HoWo)] = acc[m][4 * gq + e2] + bv;
                    }
                }
            }
    }
}
#endif  // IG_TF32

extern "C" __global__ void __launch_bounds__(IG_NT, IG_MINB)
    conv2d_igemm(const float* __restrict__ x, const float* __restrict__ wt, const int2* __restrict__ tab,
                 const float* __restrict__ bias, float* __restrict__ y, int N, int Cin, int H, int W, int Cout,
                 int Coutp, int py, int px, int Ho, int Wo, int has_bias, int co_tiles, int vec_out, float fill) {
    extern __shared__ __align__(16) float smem[];
    const int tid = threadIdx.y * BX + threadIdx.x;
    const int pt = blockIdx.x / co_tiles, cot = blockIdx.x - pt * co_tiles;  // a pixel run's channel tiles adjacent
    const int co0 = cot * IG_BM;
    const i64 p0 = (i64)pt * IG_BN;
    const int HoWo = Ho * Wo;
    const i64 Npix = (i64)N * HoWo;
    const int Ktot = Cin * IG_KK;
    const int nk = (Ktot + IG_BK - 1) / IG_BK;

    // The pixels this thread copies: where their windows start in x.
    IgPixel pix[IG_B_PIX];
#pragma unroll
    for (int q = 0; q < IG_B_PIX; ++q) {
        const int pl = tid % IG_BN + q * IG_NT;
        const i64 p = p0 + pl;
        pix[q].org = x;
        pix[q].ih0 = IG_NO_ROW;
        pix[q].iw0 = 0;
#if IG_MASK
        pix[q].mask = 0u;
#endif
        if (p < Npix && pl < IG_BN) {
            const i64 n = p / HoWo;
            const int rc = (int)(p - n * HoWo);
            const int r = rc / Wo, c = rc - r * Wo;
            pix[q].ih0 = r * SY - py;
            pix[q].iw0 = c * SX - px;
            pix[q].org = x + (n * Cin * ((i64)H * W) + (pix[q].ih0 * W + pix[q].iw0));
#if IG_MASK
#pragma unroll
            for (int t = 0; t < IG_KK; ++t)
                if ((unsigned)(pix[q].ih0 + t / KW) < (unsigned)H && (unsigned)(pix[q].iw0 + t % KW) < (unsigned)W)
                    pix[q].mask |= 1u << t;
#endif
        }
    }

    IgAcc acc;
    ig_zero(acc);

    // Pipeline: the copies of step kt + IG_STAGES - 1 are issued while step kt is computed. Every iteration commits one
    // group (empty past the end), so "at most IG_STAGES - 2 pending" means step kt has landed.
#pragma unroll
    for (int s = 0; s < IG_STAGES - 1; ++s) {
        if (s < nk) ig_issue(smem + s * IG_STAGE_FLOATS, wt, tab, pix, tid, s, Ktot, Coutp, co0, H, W, fill);
        cp_async_commit();
    }
    for (int kt = 0; kt < nk; ++kt) {
        cp_async_wait_pending<IG_STAGES - 2>();
        __syncthreads();  // step kt is visible to all; step kt - 1's buffer, refilled below, is no longer read
        const int nxt = kt + IG_STAGES - 1;
        if (nxt < nk) ig_issue(smem + (nxt % IG_STAGES) * IG_STAGE_FLOATS, wt, tab, pix, tid, nxt, Ktot, Coutp, co0, H,
                               W, fill);
        cp_async_commit();
        ig_compute(smem + (kt % IG_STAGES) * IG_STAGE_FLOATS, acc, tid);
    }
    // (the tile's origin recomputed from the launch: kept live across the loop, it cost a spill at 128 registers)
    const int pt2 = blockIdx.x / co_tiles;
    ig_store(acc, y, bias, has_bias, tid, (blockIdx.x - pt2 * co_tiles) * IG_BM, (i64)pt2 * IG_BN, Cout, HoWo,
             (i64)N * HoWo, vec_out);
}
