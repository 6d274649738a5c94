// cuda_shim_threads.h: cuda_shim.h plus what kernels with shared memory and __syncthreads need. Each block
// runs as blockDim OS threads meeting at a std::barrier for every __syncthreads (a thread that returns
// leaves the barrier, as exited threads do on the device); blocks run one after another, so the harness's
// global arrays stand in for a block's shared memory. The bytes past the launch's dynamic shared memory
// size are poisoned under AddressSanitizer, so an overrun of the requested size fails like memcheck would.
#pragma once
#include "cuda_shim.h"

#include <barrier>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#define SC_EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SC_EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SC_EMU_POISON(p, n) ((void)0)
#define SC_EMU_UNPOISON(p, n) ((void)0)
#endif

#define __shared__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

// cp.async stand-ins (kernels/conv2d.cu leaves its asm versions out under SIGCONV_HOST_EMULATION): the copy
// happens at once, `src_bytes` bytes then zeros up to the size, with the device's alignment rules checked.
inline void cp_async16(void* dst, const void* src, int src_bytes) {
    sc_emu_check_aligned(dst, 16);
    if (src_bytes) sc_emu_check_aligned(src, 16);
    std::memcpy(dst, src, src_bytes);
    std::memset(static_cast<char*>(dst) + src_bytes, 0, 16 - src_bytes);
}
inline void cp_async4(void* dst, const void* src, int src_bytes) {
    sc_emu_check_aligned(dst, 4);
    std::memcpy(dst, src, src_bytes);
    std::memset(static_cast<char*>(dst) + src_bytes, 0, 4 - src_bytes);
}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {}

static std::barrier<>* sc_emu_barrier = nullptr;
inline void __syncthreads() { sc_emu_barrier->arrive_and_wait(); }

// Run body() for every thread of every block; `smem`/`smem_cap` is the shared-memory stand-in, of which the
// first `smem_bytes` are usable by this launch (the rest is poisoned while it runs).
template <class F>
void emu_launch_threads(dim3 g, dim3 b, void* smem, size_t smem_cap, size_t smem_bytes, F body) {
    if (smem_bytes > smem_cap) {
        std::fprintf(stderr, "launch asks for %zu bytes of shared memory, the emulator has %zu\n", smem_bytes, smem_cap);
        std::exit(2);
    }
    gridDim = g;
    blockDim = b;
    const unsigned nt = b.x * b.y * b.z;
    SC_EMU_POISON(static_cast<char*>(smem) + smem_bytes, smem_cap - smem_bytes);
    for (unsigned bz = 0; bz < g.z; ++bz)
        for (unsigned by = 0; by < g.y; ++by)
            for (unsigned bx = 0; bx < g.x; ++bx) {
                blockIdx = uint3{bx, by, bz};
                std::memset(smem, 0xFF, smem_bytes);  // NaN in every float/double: reads before writes show
                std::barrier<> bar(nt);
                sc_emu_barrier = &bar;
                std::vector<std::thread> threads;
                threads.reserve(nt);
                for (unsigned t = 0; t < nt; ++t)
                    threads.emplace_back([&, t] {
                        threadIdx = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
                        body();
                        bar.arrive_and_drop();
                    });
                for (auto& th : threads) th.join();
                sc_emu_barrier = nullptr;
            }
    SC_EMU_UNPOISON(static_cast<char*>(smem) + smem_bytes, smem_cap - smem_bytes);
}
