// cuda_shim.h: just enough of CUDA's device-side vocabulary to compile simple kernel bodies (no shared
// memory, no barriers, no intrinsics) as host C++ and run a launch's blocks and threads one by one.
// Used by tests/test_kernel_build.py through os_harness.cpp; compiled with -fsanitize=address so an
// out-of-bounds access in the kernel body fails the test (a host-side stand-in for memcheck).
#pragma once
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>  // memcpy: the bit casts
#include <math.h>  // fmaf: a fused multiply-add, as on the device

#define SIGCONV_HOST_EMULATION 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__  // (empty: libstdc++ spells its own attribute __noinline__)
#define __constant__

struct uint3 { unsigned x, y, z; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };
static uint3 blockIdx;
static thread_local uint3 threadIdx;  // one OS thread per CUDA thread in cuda_shim_threads.h
static dim3 blockDim, gridDim;

struct alignas(8) float2 { float x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
inline float2 make_float2(float a, float b) { return float2{a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return float4{a, b, c, d}; }
inline double2 make_double2(double a, double b) { return double2{a, b}; }
struct alignas(8) int2 { int x, y; };
inline int2 make_int2(int a, int b) { return int2{a, b}; }

// kernels/common.cuh's sc_grid_wait (programmatic dependent launch) calls this: nothing unless a harness models such a
// launch (cuda_shim_threads.h, emu_after_writer).
static void (*sc_emu_grid_wait_hook)() = nullptr;
inline void sc_emu_grid_wait() {
    if (sc_emu_grid_wait_hook) sc_emu_grid_wait_hook();
}

// Blocks and threads run one at a time here, so an atomic is a plain read-modify-write.
inline int atomicMax(int* p, int v) { const int old = *p; if (v > old) *p = v; return old; }

// The bit casts of the device's intrinsics.
inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, sizeof i); return i; }
inline int __clz(int x) { return x == 0 ? 32 : __builtin_clz((unsigned)x); }
inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, sizeof f); return f; }
inline double __longlong_as_double(long long i) { double d; std::memcpy(&d, &i, sizeof d); return d; }

inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }

// A vector store to an address the hardware would refuse (misaligned) ends the run with exit code 3.
inline void sc_emu_check_aligned(const void* p, int bytes) {
    if (reinterpret_cast<std::uintptr_t>(p) % bytes) {
        std::fprintf(stderr, "misaligned %d-byte vector access at %p\n", bytes, p);
        std::exit(3);
    }
}

// Read-only cache load: a plain load; 16-byte loads must be 16-byte aligned, as on the device.
template <typename T> inline T __ldg(const T* p) {
    if (sizeof(T) >= 8) sc_emu_check_aligned(p, (int)sizeof(T));
    return *p;
}

// Run body() for every thread of every block of grid g with block b, in order (z, y, x).
template <class F> void emu_launch(dim3 g, dim3 b, F body) {
    gridDim = g;
    blockDim = b;
    for (unsigned bz = 0; bz < g.z; ++bz)
        for (unsigned by = 0; by < g.y; ++by)
            for (unsigned bx = 0; bx < g.x; ++bx)
                for (unsigned tz = 0; tz < b.z; ++tz)
                    for (unsigned ty = 0; ty < b.y; ++ty)
                        for (unsigned tx = 0; tx < b.x; ++tx) {
                            blockIdx = uint3{bx, by, bz};
                            threadIdx = uint3{tx, ty, tz};
                            body();
                        }
}
