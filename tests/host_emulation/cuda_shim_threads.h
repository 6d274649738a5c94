// cuda_shim_threads.h: cuda_shim.h plus what kernels with shared memory and __syncthreads need. Each block
// runs as blockDim OS threads meeting at a std::barrier for every __syncthreads (a thread that returns
// leaves the barrier, as exited threads do on the device); blocks run one after another, so the harness's
// global arrays stand in for a block's shared memory. The bytes past the launch's dynamic shared memory
// size are poisoned under AddressSanitizer, so an overrun of the requested size fails like memcheck would.
#pragma once
#include "cuda_shim.h"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <memory>
#include <mutex>
#include <cstddef>
#include <cstring>
#include <thread>
#include <vector>
#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>

// The shared memory the harnesses give a block: an H200's opt-in maximum (227 KB).
constexpr size_t SC_EMU_SMEM_CAP = 232448;
#define SC_EMU_POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define SC_EMU_UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define SC_EMU_POISON(p, n) ((void)0)
#define SC_EMU_UNPOISON(p, n) ((void)0)
#endif

#define __shared__
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __align__(n) __attribute__((aligned(n)))

// cp.async stand-ins (kernels/conv2d.cu leaves its asm versions out under SIGCONV_HOST_EMULATION): the copy
// happens at once, `src_bytes` bytes then zeros up to the size, with the device's alignment rules checked.
static std::atomic<unsigned long long> sc_emu_cp_async_bytes{0};  // (bytes copied by cp.async stand-ins so far)
inline void cp_async16(void* dst, const void* src, int src_bytes) {
    sc_emu_cp_async_bytes += (unsigned)src_bytes;
    sc_emu_check_aligned(dst, 16);
    if (src_bytes) sc_emu_check_aligned(src, 16);
    std::memcpy(dst, src, src_bytes);
    std::memset(static_cast<char*>(dst) + src_bytes, 0, 16 - src_bytes);
}
inline void cp_async4(void* dst, const void* src, int src_bytes) {
    sc_emu_cp_async_bytes += (unsigned)src_bytes;
    sc_emu_check_aligned(dst, 4);
    std::memcpy(dst, src, src_bytes);
    std::memset(static_cast<char*>(dst) + src_bytes, 0, 4 - src_bytes);
}
// The bulk copies (kernels/async_copy.cuh) at once, the load's mbarrier unused; each counted in `count`.
#define SC_BULK_COPY 1
static std::atomic<unsigned long long> sc_emu_bulk_store_bytes{0};  // (bytes stored by bulk_store so far)
inline void sc_emu_bulk_copy(void* dst, const void* src, unsigned bytes, std::atomic<unsigned long long>& count) {
    count += bytes;
    sc_emu_check_aligned(dst, 16);
    sc_emu_check_aligned(src, 16);
    if (bytes % 16 != 0) {
        std::fprintf(stderr, "bulk copy of %u bytes, not a multiple of 16\n", bytes);
        std::exit(4);
    }
    std::memcpy(dst, src, bytes);
}
inline void bulk_bar_init(unsigned long long*) {}
inline void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long*) {
    sc_emu_bulk_copy(dst, src, bytes, sc_emu_cp_async_bytes);
}
inline void bulk_wait(unsigned long long*, unsigned) {}
inline void bulk_fence() {}
inline void bulk_store(void* dst, const void* src, unsigned bytes) {
    sc_emu_bulk_copy(dst, src, bytes, sc_emu_bulk_store_bytes);
}
inline void bulk_store_wait_read() {}
inline void cp_async_commit() {}
inline void cp_async_wait_all() {}
template <int Pending> inline void cp_async_wait_pending() {}

static std::barrier<>* sc_emu_barrier = nullptr;
// The launch's dynamic shared memory in bytes (%dynamic_smem_size on the device).
static size_t sc_emu_dynamic_smem = 0;
inline void __syncthreads() { sc_emu_barrier->arrive_and_wait(); }

// Warp shuffles: the lanes of a warp meet at the warp's own barrier, each publishes its value, they meet
// again after reading. Only full-warp masks are emulated; a shuffle in a warp where a lane has already
// returned is undefined on the device and ends the run here (exit code 4).
static thread_local unsigned sc_emu_tid = 0;  // linear thread index in the block

// __syncthreads_or: a barrier that also tells every thread whether any thread's predicate was non-zero (thread 0
// clears the flag between two barriers, the threads set it between the next two, and read it after the third).
static std::atomic<int> sc_emu_or_flag{0};
inline int __syncthreads_or(int predicate) {
    sc_emu_barrier->arrive_and_wait();
    if (sc_emu_tid == 0) sc_emu_or_flag.store(0);
    sc_emu_barrier->arrive_and_wait();
    if (predicate) sc_emu_or_flag.store(1);
    sc_emu_barrier->arrive_and_wait();
    return sc_emu_or_flag.load();
}

static std::vector<std::barrier<>*> sc_emu_warp_bars;
static std::vector<int> sc_emu_warp_size;
static std::atomic<int> sc_emu_warp_alive[32];
static unsigned long long sc_emu_slots[32][32];

// mode 0: from lane - d (up), 1: lane + d (down), 2: lane ^ d (xor)
template <typename T> inline T sc_emu_shfl(unsigned mask, T v, int d, int mode) {
    static_assert(sizeof(T) <= sizeof(unsigned long long), "shuffle of a type wider than 8 bytes");
    const unsigned w = sc_emu_tid / 32, lane = sc_emu_tid % 32;
    if (mask != 0xffffffffu) {
        std::fprintf(stderr, "emulated shuffles support the full mask only (got %#x)\n", mask);
        std::exit(4);
    }
    std::memcpy(&sc_emu_slots[w][lane], &v, sizeof(T));
    sc_emu_warp_bars[w]->arrive_and_wait();
    if (sc_emu_warp_alive[w].load() != sc_emu_warp_size[w]) {
        std::fprintf(stderr, "shuffle in warp %u after some of its lanes returned\n", w);
        std::exit(4);
    }
    T r = v;
    const int src = mode == 0 ? (int)lane - d : mode == 1 ? (int)lane + d : (int)(lane ^ (unsigned)d);
    if (src >= 0 && src < sc_emu_warp_size[w]) std::memcpy(&r, &sc_emu_slots[w][src], sizeof(T));
    sc_emu_warp_bars[w]->arrive_and_wait();
    return r;
}
template <typename T> inline T __shfl_up_sync(unsigned mask, T v, unsigned d) { return sc_emu_shfl(mask, v, (int)d, 0); }
template <typename T> inline T __shfl_down_sync(unsigned mask, T v, unsigned d) { return sc_emu_shfl(mask, v, (int)d, 1); }
template <typename T> inline T __shfl_xor_sync(unsigned mask, T v, int d) { return sc_emu_shfl(mask, v, d, 2); }

// __syncwarp (full warps only): the lanes of the thread's warp meet at the warp's own barrier.
inline void __syncwarp(unsigned mask = 0xffffffffu) {
    if (mask != 0xffffffffu) {
        std::fprintf(stderr, "emulated __syncwarp supports the full mask only (got %#x)\n", mask);
        std::exit(4);
    }
    sc_emu_warp_bars[sc_emu_tid / 32]->arrive_and_wait();
}
// bar.sync id, count (a named barrier of `count` threads, whole warps): one std::barrier per id, made by the first
// thread to arrive; a later use of the id with another count ends the run (exit code 4).
inline void sc_emu_bar_sync(int id, int count) {
    static std::mutex m;
    static std::unique_ptr<std::barrier<>> bars[16];
    static int counts[16];
    std::barrier<>* b;
    {
        std::lock_guard<std::mutex> g(m);
        if (id <= 0 || id >= 16 || count % 32 != 0) {
            std::fprintf(stderr, "named barrier %d of %d threads\n", id, count);
            std::exit(4);
        }
        if (!bars[id]) {
            bars[id] = std::make_unique<std::barrier<>>(count);
            counts[id] = count;
        } else if (counts[id] != count) {
            std::fprintf(stderr, "named barrier %d used with %d and %d threads\n", id, counts[id], count);
            std::exit(4);
        }
        b = bars[id].get();
    }
    b->arrive_and_wait();
}

// TF32 tensor-core stand-ins (kernels/conv2d_igemm.cuh): cvt.rna.tf32.f32 (round to nearest, ties away from zero, to
// 10 mantissa bits; the low 13 bits cleared), and mma.sync m16n8k8 as a warp collective in PTX's fragment layout (lane =
// 4*g + t: a = A[g][t], A[g+8][t], A[g][t+4], A[g+8][t+4]; b = B[t][g], B[t+4][g]; d = D[g][2t], D[g][2t+1],
// D[g+8][2t], D[g+8][2t+1]). The products of the rounded operands are summed in double and added to d once.
inline unsigned ig_tf32(float v) {
    unsigned u;
    std::memcpy(&u, &v, sizeof u);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;  // (Inf and NaN pass unchanged)
    return u;
}
static unsigned sc_emu_mma_in[32][32][6];
inline void ig_mma(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
    const unsigned w = sc_emu_tid / 32, lane = sc_emu_tid % 32;
    if (sc_emu_warp_size[w] != 32 || sc_emu_warp_alive[w].load() != 32) {
        std::fprintf(stderr, "mma.sync in warp %u without all 32 lanes\n", w);
        std::exit(4);
    }
    for (int r = 0; r < 4; ++r) sc_emu_mma_in[w][lane][r] = a[r];
    sc_emu_mma_in[w][lane][4] = b[0];
    sc_emu_mma_in[w][lane][5] = b[1];
    sc_emu_warp_bars[w]->arrive_and_wait();
    auto f = [](unsigned u) { float v; std::memcpy(&v, &u, sizeof v); return v; };
    auto A = [&](int row, int k) { return f(sc_emu_mma_in[w][(row % 8) * 4 + k % 4][(row >= 8) + 2 * (k >= 4)]); };
    auto B = [&](int k, int col) { return f(sc_emu_mma_in[w][col * 4 + k % 4][4 + (k >= 4)]); };
    const int g = (int)lane / 4, t = (int)lane % 4;
    for (int e = 0; e < 4; ++e) {
        const int row = g + 8 * (e / 2), col = 2 * t + e % 2;
        double s = 0;
        for (int k = 0; k < 8; ++k) s += (double)A(row, k) * (double)B(k, col);
        d[e] = (float)((double)d[e] + s);
    }
    sc_emu_warp_bars[w]->arrive_and_wait();
}

// Programmatic dependent launch (kernels/common.cuh: sc_grid_wait). emu_after_writer(regions) makes the next
// emu_launch_threads the launch of a kernel that may start while the kernel writing `regions` still runs: each block
// starts with their bytes overwritten by 0xFF (NaN in every float, -1 in every int) and poisoned under
// AddressSanitizer, and gets them back (unpoisoned, as they were before the launch) once every thread of the block has
// called sc_grid_wait. A thread that reads them before its own wait reads poison: AddressSanitizer's report, else
// NaN. give_back false keeps them poisoned all through the launch (the control: the kernel's first read must fail).
// After the launch they hold their bytes again and the setting is gone.
struct EmuRegion {
    void* p;
    size_t n;
};
static std::vector<EmuRegion> sc_emu_pdl_regions;
static std::vector<std::vector<char>> sc_emu_pdl_saved;
static bool sc_emu_pdl_give_back = true;
static std::atomic<bool> sc_emu_pdl_open{true};

inline void emu_after_writer(std::vector<EmuRegion> regions, bool give_back = true) {
    sc_emu_pdl_regions = std::move(regions);
    sc_emu_pdl_give_back = give_back;
    sc_emu_pdl_saved.clear();
    for (const EmuRegion& r : sc_emu_pdl_regions) {
        const char* b = static_cast<const char*>(r.p);
        sc_emu_pdl_saved.emplace_back(b, b + r.n);
    }
}
inline void sc_emu_pdl_close() {  // (a block's start: the writer still runs)
    for (const EmuRegion& r : sc_emu_pdl_regions) {
        SC_EMU_UNPOISON(r.p, r.n);  // (still poisoned where the block before never waited)
        std::memset(r.p, 0xFF, r.n);
        SC_EMU_POISON(r.p, r.n);
    }
    sc_emu_pdl_open = false;
}
inline void sc_emu_pdl_reopen() {
    for (size_t k = 0; k < sc_emu_pdl_regions.size(); ++k) {
        SC_EMU_UNPOISON(sc_emu_pdl_regions[k].p, sc_emu_pdl_regions[k].n);
        std::memcpy(sc_emu_pdl_regions[k].p, sc_emu_pdl_saved[k].data(), sc_emu_pdl_regions[k].n);
    }
    sc_emu_pdl_open = true;
}
inline void sc_emu_pdl_wait() {
    sc_emu_barrier->arrive_and_wait();  // every thread of the block has come to its wait
    if (sc_emu_pdl_give_back && !sc_emu_pdl_open.exchange(true)) sc_emu_pdl_reopen();
    sc_emu_barrier->arrive_and_wait();
}

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
    sc_emu_dynamic_smem = smem_bytes;
    const unsigned nt = b.x * b.y * b.z;
    SC_EMU_POISON(static_cast<char*>(smem) + smem_bytes, smem_cap - smem_bytes);
    sc_emu_grid_wait_hook = sc_emu_pdl_regions.empty() ? nullptr : sc_emu_pdl_wait;
    for (unsigned bz = 0; bz < g.z; ++bz)
        for (unsigned by = 0; by < g.y; ++by)
            for (unsigned bx = 0; bx < g.x; ++bx) {
                blockIdx = uint3{bx, by, bz};
                std::memset(smem, 0xFF, smem_bytes);  // NaN in every float/double: reads before writes show
                if (!sc_emu_pdl_regions.empty()) sc_emu_pdl_close();
                std::barrier<> bar(nt);
                sc_emu_barrier = &bar;
                const unsigned nw = (nt + 31) / 32;
                std::vector<std::unique_ptr<std::barrier<>>> wbars;
                sc_emu_warp_bars.assign(nw, nullptr);
                sc_emu_warp_size.assign(nw, 0);
                for (unsigned w = 0; w < nw; ++w) {
                    sc_emu_warp_size[w] = (int)std::min(32u, nt - 32 * w);
                    sc_emu_warp_alive[w] = sc_emu_warp_size[w];
                    wbars.emplace_back(new std::barrier<>(sc_emu_warp_size[w]));
                    sc_emu_warp_bars[w] = wbars.back().get();
                }
                std::vector<std::thread> threads;
                threads.reserve(nt);
                for (unsigned t = 0; t < nt; ++t)
                    threads.emplace_back([&, t] {
                        sc_emu_tid = t;
                        threadIdx = uint3{t % b.x, (t / b.x) % b.y, t / (b.x * b.y)};
                        body();
                        sc_emu_warp_alive[t / 32].fetch_sub(1);
                        sc_emu_warp_bars[t / 32]->arrive_and_drop();
                        bar.arrive_and_drop();
                    });
                for (auto& th : threads) th.join();
                sc_emu_barrier = nullptr;
            }
    SC_EMU_UNPOISON(static_cast<char*>(smem) + smem_bytes, smem_cap - smem_bytes);
    if (!sc_emu_pdl_regions.empty()) {
        if (!sc_emu_pdl_open) sc_emu_pdl_reopen();
        sc_emu_pdl_regions.clear();
        sc_emu_pdl_saved.clear();
        sc_emu_grid_wait_hook = nullptr;
    }
}
