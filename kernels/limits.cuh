// limits.cuh: the numbers the kernels and their Python launchers share, each stated once.
// The kernels include this file; sigconv._kernels.constants() reads its defines for the launchers
// (sigconv/backends/cuda1d.py, cuda2d.py), so neither side restates a value. One plain integer
// `#define SIGCONV_NAME value` per line; no expressions.
#ifndef SIGCONV_LIMITS_CUH
#define SIGCONV_LIMITS_CUH

// conv1d.cu: the __constant__ tap buffer, 32 KB: 4096 float64 or 8192 float32 taps.
#define SIGCONV_CONST_TAP_DOUBLES 4096
// conv1d.cu `shared`: taps per shared-memory chunk; a block stages (B + 2*KCH - 1) values of its dtype.
#define SIGCONV_SHARED_KCH_F32 2048
#define SIGCONV_SHARED_KCH_F64 1024
// conv2d_strip.cuh / conv2d_shfl.cuh: output rows per thread when the launcher passes none.
#define SIGCONV_STRIP_ROWS 32
#define SIGCONV_SHFL_ROWS 32
// conv2d_strip.cuh: kernels of up to this many rows and taps keep their accumulators in a ring (the row loop unrolled
// by the height); the others rotate them. The launcher caps the registers of the ring's wrap/symm builds at the fill
// build's occupancy and leaves the rotating builds' uncapped (capped, they spill).
#define SIGCONV_STRIP_RING_MAX_KH 11
#define SIGCONV_STRIP_RING_MAX_TAPS 121
// conv2d_shfl.cuh: widest halo (columns on each side) taken from a neighbouring lane: one float4.
#define SIGCONV_SHFL_MAX_HALO 4
// fft_fused.cuh: tiles of 2^10 to 2^14 samples (one or two buffers of N/2 float2 in shared memory: 4 KB to 128 KB).
#define SIGCONV_FFT_FUSED_MIN_LOGN 10
#define SIGCONV_FFT_FUSED_MAX_LOGN 14
// fft_fused.cuh: and 2^15 samples on a block of 1024 threads, in place only (one buffer: 136 KB).
#define SIGCONV_FFT_FUSED_ONE_MAX_LOGN 15
// fft_fused.cuh: tiles of 2^14 samples and more read the pair table (S, D) of the filter's spectrum (N/4 + 1 float4,
// ff_pair_coefs) and form the middle step's coefficients from it; shorter tiles read those coefficients, G (N/2
// float4: twice the bytes).
#define SIGCONV_FFT_FUSED_H_MIN_LOGN 14
// fft_fused.cuh: tiles of 2^14 samples and more on blocks of N/32 threads or more transform as 16 columns of N/32
// points (ff_tile_cols: 512 points a warp's, 1024 two warps'), and the pair table is laid out by those columns
// (ff_pair_index).
#define SIGCONV_FFT_FUSED_COLS_MIN_LOGN 14
// fft_fused.cuh: the tile whose in-place kernel has a variant that reads a point's two samples as one 8-byte
// load (conv1d_fft_fused<LOGN, true, true>), for launches whose every tile starts on an 8-byte boundary of x.
#define SIGCONV_FFT_FUSED_PAIRS_LOGN 15
// fft_fused.cuh: where the taps' exponent (tap_shift) lies within +-this, the fused table holds the filter's spectrum
// times 2^tap_shift (an exact power of two) and the kernel's tap shift is 0, so that a tile of ordinary magnitude
// writes its outputs without a multiply; beyond it the table holds the spectrum of the taps divided by 2^tap_shift.
#define SIGCONV_FFT_FUSED_FOLD_MAX 32
// fft_fused.cuh: rows of the next tile (N/4 bytes each, after a 16-byte mbarrier) that the longest tile's block
// prefetches into the shared memory past its buffer, where the launch gives it 16 + this * N/4 bytes more (ff_prefetch_on;
// sigconv/backends/overlap_save.py, fused_plan).
#define SIGCONV_FFT_FUSED_PREFETCH_ROWS 11
// conv1d_ffa.cu: taps per sub-filter (a quarter of the shifted, padded filter): nine sub-filters in __constant__ memory.
#define SIGCONV_FFA_MAX_KQ 32

#endif  // SIGCONV_LIMITS_CUH
