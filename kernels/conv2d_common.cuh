// conv2d_common.cuh: helpers shared by kernels/conv2d.cu and the headers it includes. NVRTC-compatible.
#ifndef SIGCONV_CONV2D_COMMON_CUH
#define SIGCONV_CONV2D_COMMON_CUH

typedef long long i64;
typedef unsigned long long c2d_u64;

// Plane index helper: the grid's z dimension is capped at 65535, so kernels loop z over planes.
#define FOR_PLANES(var_, nplanes_) for (int var_ = blockIdx.z; var_ < (nplanes_); var_ += gridDim.z)

// Store 4 outputs (columns cx..cx+3) plus bias; float4 when they all fit and the row is aligned (the
// single-channel kernels, strip and shfl).
__device__ __forceinline__ void c2d_store4(float* op, const float (&a)[4], float bias, int cx, int Wo, bool vst) {
    if (vst) {
        *reinterpret_cast<float4*>(op) = make_float4(a[0] + bias, a[1] + bias, a[2] + bias, a[3] + bias);
    } else {
#pragma unroll
        for (int b = 0; b < 4; ++b)
            if (cx + b < Wo) op[b] = a[b] + bias;
    }
}

// ------------------------------------------------------------------------------------ build parts
// C2D_PART: which of conv2d.cu's kernels a build compiles. NVRTC's time grows with the kernels in the file (all of
// them about 5 s, one specialised kernel under 1 s), and every specialised build (a kernel size, a boundary, a
// block) is compiled on its first use, so the launcher (sigconv.backends.cuda2d, _PARTS) asks for one part.
#define SIGCONV_C2D_PART_ALL 0      // every kernel (the default: nvcc checks)
#define SIGCONV_C2D_PART_GENERIC 1  // naive, shared, separable and extend, the templates per dtype
#define SIGCONV_C2D_PART_TILED 2    // conv2d_tiled (regblock, prefetch)
#define SIGCONV_C2D_PART_STRIP 3    // conv2d_strip
#define SIGCONV_C2D_PART_SHFL 4     // conv2d_shfl
#define SIGCONV_C2D_PART_IGEMM 5    // conv2d_igemm (igemm, igemm_tf32)
#ifndef C2D_PART
#define C2D_PART SIGCONV_C2D_PART_ALL
#endif
#define C2D_HAS_PART(part) (C2D_PART == SIGCONV_C2D_PART_ALL || C2D_PART == (part))

#include "async_copy.cuh"  // cp_async16, cp_async4, cp_async_commit, cp_async_wait_*

// ------------------------------------------------------------------------------------ boundary rules
// The extension xe of a plane beyond [0, H) x [0, W), SciPy's convolve2d `boundary`; the launcher reads these
// codes (sigconv.backends.cuda2d.BOUNDARIES).
#define SIGCONV_BOUNDARY_FILL 0  // the constant `fill`
#define SIGCONV_BOUNDARY_WRAP 1  // periodic: x[i mod H]
#define SIGCONV_BOUNDARY_SYMM 2  // mirrored with the edge sample repeated (numpy.pad "symmetric"), period 2H

// The one home of the boundary rule: index i along an axis of n samples (any integer: the window of a kernel
// larger than the image reaches several periods out) -> the sample xe[i] repeats, in [0, n), or -1 where xe is
// the fill constant. symm: m = i mod 2n, then m >= n mirrors to 2n-1-m (n..2n-1 -> n-1..0).
// Within one period of the image (-n <= i < 2n: every index unless the kernel is larger than the image) the rule
// is a select (c2d_extend_near's): no division, which costs tens of instructions per index in the loads of the edge
// tiles. Beyond it, unsigned 32-bit arithmetic (2n < 2^32): a modulo the compiler inlines (a 64-bit one is a call
// that pins registers in unrolled loops). i < 0: i mod p = p - 1 - ((-i - 1) mod p).
__device__ __forceinline__ int c2d_extend(int i, int n, int boundary) {
    if (i >= 0 && i < n) return i;
    if (boundary == SIGCONV_BOUNDARY_FILL) return -1;
    if (i < 0 ? i >= -n : i - n < n) {  // one period out: i + n or i - n under wrap, mirrored under symm
        const int k = i < 0 ? i + n : i - n;
        return boundary == SIGCONV_BOUNDARY_WRAP ? k : n - 1 - k;
    }
    const unsigned p = boundary == SIGCONV_BOUNDARY_WRAP ? (unsigned)n : 2u * (unsigned)n;
    const unsigned m = i >= 0 ? (unsigned)i % p : p - 1u - (unsigned)(-(i + 1)) % p;
    return (int)(m >= (unsigned)n ? p - 1u - m : m);
}

// The boundary the fused kernels (strip, shfl and the tiled regblock/prefetch) compile in: their loads read xe
// through c2d_extend, so a wrap or symm call costs them no second pass; the fill constant is a kernel argument
// (zero for plain zero padding). The launcher prepends the define (sigconv.backends.cuda2d._boundary_module) and caps
// the registers of a wrap/symm build at the zero-fill build's occupancy (strip's rotating builds excepted). Their
// grids are a wave or two of long-running threads, where one slow thread late in the launch sets the time of the
// whole kernel. strip loads every thread's rows through the rule, by selects from a chunk map computed once per
// thread (C2dChunk): the loads stay unconditional and every thread costs the same. shfl does the same in every warp
// (its loaders ShflExtNear and ShflExtAny), so that one copy of its unrolled ring runs in a launch (shfl's launch
// bound, where it has one, takes precedence over the cap).
#ifndef C2D_BOUNDARY
#define C2D_BOUNDARY SIGCONV_BOUNDARY_FILL
#endif

// c2d_extend for wrap or symm (B) where i lies within one period of the image, -n <= i < 2n: selects, no
// division, so that a loop unrolled over rows keeps its loads free to move ahead.
template <int B>
__device__ __forceinline__ int c2d_extend_near(int i, int n) {
    if (B == SIGCONV_BOUNDARY_WRAP) return i < 0 ? i + n : (i >= n ? i - n : i);
    return i < 0 ? -1 - i : (i >= n ? 2 * n - 1 - i : i);
}

// Where four columns c..c+3 of xe lie under wrap or symm (B) when c and W are multiples of 4: one aligned chunk
// of the image row, read backwards under symm's mirror (the rule maps them to consecutive samples). A thread
// computes these once and then loads every row without a branch (c2d_ld_chunk).
struct C2dChunk {
    int base;  // first image column of the chunk (a multiple of 4)
    bool rev;  // read backwards
};
template <int B>
__device__ __forceinline__ C2dChunk c2d_vchunk(int c, int W) {
    const int k0 = c2d_extend(c, W, B), k3 = c2d_extend(c + 3, W, B);
    C2dChunk ch;
    ch.base = k0 <= k3 ? k0 : k3;
    ch.rev = k0 > k3;
    return ch;
}
// c2d_vchunk where c lies within one period of the image (-W <= c, c + 3 < 2W): selects only, no branch.
template <int B>
__device__ __forceinline__ C2dChunk c2d_vchunk_near(int c, int W) {
    C2dChunk ch;
    if (B == SIGCONV_BOUNDARY_WRAP) {
        ch.base = c < 0 ? c + W : (c >= W ? c - W : c);
        ch.rev = false;
    } else {  // symm: columns c..c+3 mirror to -4-c..-1-c (left) or 2W-4-c..2W-1-c (right), backwards
        ch.base = c < 0 ? -4 - c : (c >= W ? 2 * W - 4 - c : c);
        ch.rev = c < 0 || c >= W;
    }
    return ch;
}
template <int B>
__device__ __forceinline__ float4 c2d_ld_chunk(const float* __restrict__ rp, C2dChunk ch) {
    const float4 t = __ldg(reinterpret_cast<const float4*>(rp + ch.base));
    if (B == SIGCONV_BOUNDARY_WRAP) return t;  // (wrap keeps the order)
    return ch.rev ? make_float4(t.w, t.z, t.y, t.x) : t;
}

#endif  // SIGCONV_CONV2D_COMMON_CUH
