// overlap_save.cuh: bodies of the fft variant's four helper kernels (kernels/conv1d.cu wraps them as
// conv1d_os_gather_*, conv1d_os_rescale_*, conv1d_os_cmul_*, conv1d_os_scatter_*; sigconv/backends/overlap_save.py
// launches them).
//
// Overlap-save with segment length N (a power of two >= 1024) and step M = N - K + 1: output block b
// (outputs [b*M, b*M + M)) is the circular convolution of segment b, seg[i] = x[b*M - pad + i] (i < N),
// with the convolution taps h = w reversed, read at i = K-1 + r (r < M).
//
// Launch geometry: a 2-D/3-D grid, so no thread divides a flat index (a 64-bit division per element held
// the first, flat versions far below the copy bandwidth). sigconv.backends.overlap_save.os_grid computes it:
//   gather : grid (ceil(N/4 / B), gy <= nseg, gz <= C); thread x*B + t writes samples 4t'..4t'+3 of a row
//            with one 16-byte store; rows by grid-stride over segments (y) and channels (z).
//   cmul   : grid (ceil(NF / B), gy <= rows): bin k = x*B + t of every row, rows by grid-stride over y.
//   scatter: grid (ceil(M / B), gy <= nseg, gz <= C): output r = x*B + t of each segment's valid part.
// Every loop is a grid-stride loop, so any grid.y / grid.z caps are correct (the launcher caps them at
// 65535, the hardware limit, or lower).
//
//   rescale: grid (1, gy <= nseg, gz <= C): a block per segment; it returns at once unless the segment is scaled.
//
// Scaling. An FFT of operands near the ends of the float range overflows (huge samples) or loses its bits in
// the subnormals (tiny ones); a direct sum would not. So while gathering a segment, gather also notes its peak
// exponent, shift[c*nseg + b] (frexp's: peak = m * 2^e, m in [0.5, 1); one atomicMax per warp). A segment whose
// exponent lies outside [-safe, safe] (safe: sigconv._core.xp.FFT_SAFE_EXPONENT, a launch argument) is then
// divided by 2^e by rescale, and scatter multiplies its outputs by 2^e; scatter also multiplies every output by
// 2^tap_shift[0] (the taps' spectrum holds the taps divided by it). Ordinary data so costs rescale's launch and
// no pass over the segments. Powers of two are exact; the exponents never leave the device (no host sync); a
// segment's outputs depend on its own samples only, so a stream filtered block by block gets the same values
// however it is cut; a null pointer means no scaling.
#ifndef SIGCONV_OVERLAP_SAVE_CUH
#define SIGCONV_OVERLAP_SAVE_CUH
#include "common.cuh"

// Four consecutive elements at p (16-byte aligned for float: the launcher's segment rows start at
// multiples of N >= 1024 elements from a 256-byte aligned allocation, and i is a multiple of 4).
template <typename T> __device__ __forceinline__ void os_store4(T* p, T a, T b, T c, T d);
template <> __device__ __forceinline__ void os_store4<float>(float* p, float a, float b, float c, float d) {
#ifdef SIGCONV_HOST_EMULATION
    sc_emu_check_aligned(p, 16);
#endif
    *reinterpret_cast<float4*>(p) = make_float4(a, b, c, d);
}
template <> __device__ __forceinline__ void os_store4<double>(double* p, double a, double b, double c, double d) {
#ifdef SIGCONV_HOST_EMULATION
    sc_emu_check_aligned(p, 16);
#endif
    reinterpret_cast<double2*>(p)[0] = make_double2(a, b);
    reinterpret_cast<double2*>(p)[1] = make_double2(c, d);
}

// The exponent slots' special values: no sample yet (all zero) and a non-finite sample; both mean "no scaling".
#define SC_OS_NO_PEAK (-2147483647 - 1)
#define SC_OS_NONFINITE 2147483647

// The exponent a segment is scaled by: 0 for none (all zero, holding inf/NaN, within [-safe, safe], or no
// exponents at all), else its slot's.
__device__ __forceinline__ int os_exponent(const int* __restrict__ shift, sc_i64 k, int safe) {
    if (!shift) return 0;
    const int e = shift[k];
    return (e == SC_OS_NO_PEAK || e == SC_OS_NONFINITE || (e >= -safe && e <= safe)) ? 0 : e;
}

// a b rounded once, with subnormal operands and results kept whatever the build's -ftz (float: PTX mul.rn.f32, which
// has no .ftz; double is never flushed).
template <typename T> __device__ __forceinline__ T os_mul(T a, T b) { return a * b; }
#ifndef SIGCONV_HOST_EMULATION
template <> __device__ __forceinline__ float os_mul<float>(float a, float b) {
    float r;
    asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b));
    return r;
}
#endif
// 2^a for a within T's normal exponents [LO, HI] (float: [-126, 127]; double: [-1022, 1023]).
template <typename T> struct OsPow2;
template <> struct OsPow2<float> {
    static constexpr int LO = -126, HI = 127;
    static __device__ __forceinline__ float of(int a) { return __int_as_float((a + 127) << 23); }
};
template <> struct OsPow2<double> {
    static constexpr int LO = -1022, HI = 1023;
    static __device__ __forceinline__ double of(int a) { return __longlong_as_double((long long)(a + 1023) << 52); }
};

// Multiplying by 2^e, as two products by normal powers of two, v 2^a 2^b with a + b = e (os_mul: subnormals kept):
// within the normal range a = e and f2 = 2^b = 1; above it a = HI; below it b = LO, so that v 2^a is exact wherever
// the result is not zero and only the second product rounds. The result is ldexp's for e within [2 LO, 2 HI]
// (float: [-252, 254]); beyond, e counts as that range's end, which still gives ldexp's zero or infinity for every
// normal v below 2^102 in magnitude (double: 2^969; the values scaled here lie near 1). Two multiplies and no branch,
// so that code scaling many registers stays small; a caller that can do with one multiply where f2 is 1 reads f1 and
// f2 itself.
template <typename T> struct OsScale {
    T f1, f2;
    __device__ __forceinline__ explicit OsScale(int e) {
        constexpr int LO = OsPow2<T>::LO, HI = OsPow2<T>::HI;
        const int a = e > HI ? HI : e >= LO ? e : max(e - LO, LO);
        f1 = OsPow2<T>::of(a);
        f2 = OsPow2<T>::of(min(max(e - a, LO), HI));
    }
    __device__ __forceinline__ T operator()(T v) const { return os_mul(os_mul(v, f1), f2); }
};

// frexp's exponent e of a finite v != 0 (v = m 2^e, m in [0.5, 1)). Float from its bits, so that a subnormal v has its
// own whatever the build's -ftz (frexpf under -ftz=true takes a subnormal for zero: e = 0); double is never flushed.
template <typename T> __device__ __forceinline__ int os_frexp_exp(T v);
template <> __device__ __forceinline__ int os_frexp_exp<float>(float v) {
    const int b = __float_as_int(v) & 0x7fffffff;
    return b >= 0x00800000 ? (b >> 23) - 126 : -117 - __clz(b);  // (a subnormal is b 2^-149)
}
template <> __device__ __forceinline__ int os_frexp_exp<double>(double v) { int e; frexp(v, &e); return e; }

// The peak exponent of four samples: SC_OS_NONFINITE when one is inf/NaN, SC_OS_NO_PEAK when all are zero.
template <typename T> __device__ __forceinline__ int os_exponent4(T v0, T v1, T v2, T v3) {
    if (!(isfinite(v0) && isfinite(v1) && isfinite(v2) && isfinite(v3))) return SC_OS_NONFINITE;
    const T m = fmax(fmax(fabs(v0), fabs(v1)), fmax(fabs(v2), fabs(v3)));
    return m != T(0) ? os_frexp_exp<T>(m) : SC_OS_NO_PEAK;
}
// (float: the largest magnitude as the largest bit pattern, so that subnormal samples count under -ftz as well)
template <> __device__ __forceinline__ int os_exponent4<float>(float v0, float v1, float v2, float v3) {
    const int m = max(max(__float_as_int(v0) & 0x7fffffff, __float_as_int(v1) & 0x7fffffff),
                      max(__float_as_int(v2) & 0x7fffffff, __float_as_int(v3) & 0x7fffffff));
    return m >= 0x7f800000 ? SC_OS_NONFINITE : m != 0 ? os_frexp_exp<float>(__int_as_float(m)) : SC_OS_NO_PEAK;
}

// *slot = max(*slot, e over the warp): one atomic per warp. Every lane of the warp must call it (gather's lanes
// do: a warp's 32 threads hold 128 consecutive samples of a row, and N is a multiple of 1024, so a warp is
// wholly inside the row or wholly past it, and returns as one). The host emulation, which runs one thread at
// a time, makes one atomic per thread: the same maximum.
__device__ __forceinline__ void os_note_exponent(int* slot, int e) {
#ifdef SIGCONV_HOST_EMULATION
    if (e != SC_OS_NO_PEAK) atomicMax(slot, e);
#else
    e = __reduce_max_sync(0xffffffffu, e);
    if ((threadIdx.x & 31) == 0 && e != SC_OS_NO_PEAK) atomicMax(slot, e);
#endif
}

// segs[(c*nseg + b)*N + i] = x[c, b*M - pad + i] (zero outside [0, L)); shift[c*nseg + b] (SC_OS_NO_PEAK before
// the launch) becomes the segment's peak exponent (SC_OS_NONFINITE with an inf/NaN; left as it was when all zero).
template <typename T>
__device__ __forceinline__ void os_gather_body(const T* __restrict__ x, T* __restrict__ segs, int C, sc_i64 L,
                                               sc_i64 pad, sc_i64 M, int N, sc_i64 nseg, int* __restrict__ shift) {
    const int i = 4 * (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (i >= N) return;
    for (int c = (int)blockIdx.z; c < C; c += (int)gridDim.z) {
        const T* xc = x + (sc_i64)c * L;
        T* sc = segs + (sc_i64)c * nseg * N + i;
        for (sc_i64 b = blockIdx.y; b < nseg; b += gridDim.y) {
            const sc_i64 s = b * M - pad + i;  // x index of segs[c, b, i]
            T v0, v1, v2, v3;
            if (s >= 0 && s + 3 < L) {  // interior: no bounds per element
                v0 = xc[s];
                v1 = xc[s + 1];
                v2 = xc[s + 2];
                v3 = xc[s + 3];
            } else {
                v0 = sc_load_or_zero(xc, s, L);
                v1 = sc_load_or_zero(xc, s + 1, L);
                v2 = sc_load_or_zero(xc, s + 2, L);
                v3 = sc_load_or_zero(xc, s + 3, L);
            }
            if (shift) os_note_exponent(shift + (sc_i64)c * nseg + b, os_exponent4<T>(v0, v1, v2, v3));
            os_store4<T>(sc + b * N, v0, v1, v2, v3);
        }
    }
}

// segs[(c*nseg + b)*N + i] /= 2^e, e = os_exponent(shift, c*nseg + b, safe), for the segments with e != 0.
template <typename T>
__device__ __forceinline__ void os_rescale_body(T* __restrict__ segs, const int* __restrict__ shift, int C, int N,
                                                sc_i64 nseg, int safe) {
    for (int c = (int)blockIdx.z; c < C; c += (int)gridDim.z) {
        for (sc_i64 b = blockIdx.y; b < nseg; b += gridDim.y) {
            const int e = os_exponent(shift, (sc_i64)c * nseg + b, safe);
            if (e == 0) continue;  // ordinary data: one load per thread and segment
            const OsScale<T> scale(-e);
            T* row = segs + ((sc_i64)c * nseg + b) * N;
            for (int i = (int)threadIdx.x; i < N; i += (int)blockDim.x) row[i] = scale(row[i]);
        }
    }
}

// X[row, k] *= H[k] for rows of NF = N/2+1 complex bins (H already holds the 1/N scale).
template <typename T2>
__device__ __forceinline__ void os_cmul_body(T2* __restrict__ X, const T2* __restrict__ H, sc_i64 rows, int NF) {
    const int k = (int)(blockIdx.x * blockDim.x + threadIdx.x);
    if (k >= NF) return;
    const T2 h = H[k];
    for (sc_i64 row = blockIdx.y; row < rows; row += gridDim.y) {
        T2* p = X + row * NF + k;
        const T2 a = *p;
        T2 r;
        r.x = a.x * h.x - a.y * h.y;
        r.y = a.x * h.y + a.y * h.x;
        *p = r;
    }
}

// y[c, b*M + r] = Ys[(c*nseg + b)*N + K-1 + r] * 2^(e + tap_shift[0]) for r < M and b*M + r < out_len,
// e = os_exponent(shift, c*nseg + b, safe).
template <typename T>
__device__ __forceinline__ void os_scatter_body(const T* __restrict__ Ys, T* __restrict__ y, int C, sc_i64 out_len,
                                                sc_i64 M, int N, sc_i64 nseg, int K, const int* __restrict__ shift,
                                                const int* __restrict__ tap_shift, int safe) {
    const sc_i64 r = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= M) return;
    const int et = tap_shift ? tap_shift[0] : 0;
    for (int c = (int)blockIdx.z; c < C; c += (int)gridDim.z) {
        const T* src = Ys + (sc_i64)c * nseg * N + (K - 1) + r;
        T* dst = y + (sc_i64)c * out_len + r;
        for (sc_i64 b = blockIdx.y; b < nseg; b += gridDim.y) {
            if (b * M + r >= out_len) continue;
            const int e = os_exponent(shift, (sc_i64)c * nseg + b, safe) + et;
            dst[b * M] = e != 0 ? OsScale<T>(e)(src[b * N]) : src[b * N];
        }
    }
}

#endif  // SIGCONV_OVERLAP_SAVE_CUH
