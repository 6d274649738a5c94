// conv2d_common.cuh: helpers shared by kernels/conv2d.cu and the headers it includes. NVRTC-compatible.
#ifndef SIGCONV_CONV2D_COMMON_CUH
#define SIGCONV_CONV2D_COMMON_CUH

typedef long long i64;

// Plane index helper: the grid's z dimension is capped at 65535, so kernels loop z over planes.
#define FOR_PLANES(var_, nplanes_) for (int var_ = blockIdx.z; var_ < (nplanes_); var_ += gridDim.z)

#endif  // SIGCONV_CONV2D_COMMON_CUH
