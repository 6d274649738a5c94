// pcm.cu: the file engine's sample conversions on the GPU (sigconv.backends.cuda_pcm): samples as read become
// work samples, filtered samples become what the output file keeps. One pass each, grid-stride loops.
#include "common.cuh"

// Raw samples x (n, C) interleaved, as read (int16 / int32 / float) -> work samples y (C, n): y = x * scale in
// double, rounded once to TO (the scales are powers of two: integers land exactly on [-1, 1) steps).
// Threads walk the input in order (coalesced reads); each channel's row is written in order too.
template <typename TI, typename TO>
__global__ void pcm_to_work(const TI* __restrict__ x, TO* __restrict__ y, sc_i64 n, int C, double scale) {
    const sc_i64 total = n * C;
    for (sc_i64 i = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (sc_i64)gridDim.x * blockDim.x) {
        const sc_i64 t = i / C;
        const int c = (int)(i - t * C);
        y[c * n + t] = (TO)((double)x[i] * scale);
    }
}

// Work samples y (C, n), row c at y + c * ld -> output samples q (n, C) interleaved, sigconv.engine.audio.quantise's
// rule in double: v = rint(y * scale) when scale != 0 (integer outputs), saturated to [lo, hi] and counted when
// `clip`, times `mult` (256 puts 24-bit samples in the top of an int32). The count of saturated samples is added
// to *clipped (one atomic per warp).
template <typename TI, typename TO>
__global__ void pcm_quantise(const TI* __restrict__ y, TO* __restrict__ q, sc_i64 n, int C, sc_i64 ld, double scale,
                             double lo, double hi, double mult, int clip, sc_u64* __restrict__ clipped) {
    const sc_i64 total = n * C;
    unsigned int count = 0;
    for (sc_i64 i = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (sc_i64)gridDim.x * blockDim.x) {
        const sc_i64 t = i / C;
        const int c = (int)(i - t * C);
        double v = (double)y[c * ld + t];
        if (scale != 0.0) v = rint(v * scale);
        if (clip) {
            count += (v < lo || v > hi) ? 1u : 0u;
            v = fmin(fmax(v, lo), hi);
        }
        q[i] = (TO)(v * mult);
    }
    // every thread of the block is here (the loop above holds no barrier): a warp sum, then one atomic per warp
    for (int off = 16; off > 0; off >>= 1) count += __shfl_down_sync(0xffffffffu, count, off);
    if ((threadIdx.x & 31) == 0 && count) atomicAdd(clipped, (sc_u64)count);
}

#ifdef SIGCONV_NVCC_CHECK
// every instantiation sigconv.backends.cuda_pcm asks for (PCM_EXPRESSIONS)
template __global__ void pcm_to_work<short, float>(const short*, float*, sc_i64, int, double);
template __global__ void pcm_to_work<short, double>(const short*, double*, sc_i64, int, double);
template __global__ void pcm_to_work<int, float>(const int*, float*, sc_i64, int, double);
template __global__ void pcm_to_work<int, double>(const int*, double*, sc_i64, int, double);
template __global__ void pcm_to_work<float, float>(const float*, float*, sc_i64, int, double);
template __global__ void pcm_to_work<float, double>(const float*, double*, sc_i64, int, double);
template __global__ void pcm_to_work<double, float>(const double*, float*, sc_i64, int, double);
template __global__ void pcm_to_work<double, double>(const double*, double*, sc_i64, int, double);
template __global__ void pcm_quantise<float, short>(const float*, short*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
template __global__ void pcm_quantise<float, int>(const float*, int*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
template __global__ void pcm_quantise<float, float>(const float*, float*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
template __global__ void pcm_quantise<float, double>(const float*, double*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
template __global__ void pcm_quantise<double, short>(const double*, short*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
template __global__ void pcm_quantise<double, int>(const double*, int*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
template __global__ void pcm_quantise<double, float>(const double*, float*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
template __global__ void pcm_quantise<double, double>(const double*, double*, sc_i64, int, sc_i64, double, double, double, double, int, sc_u64*);
#endif
