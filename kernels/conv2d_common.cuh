// conv2d_common.cuh: helpers shared by kernels/conv2d.cu and the headers it includes. NVRTC-compatible.
#ifndef SIGCONV_CONV2D_COMMON_CUH
#define SIGCONV_CONV2D_COMMON_CUH

typedef long long i64;

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

#endif  // SIGCONV_CONV2D_COMMON_CUH
