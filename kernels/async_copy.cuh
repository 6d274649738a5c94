// async_copy.cuh: cp.async helpers of the kernels that stage global memory in shared memory without registers
// (kernels/conv2d.cu, kernels/conv1d_ffa.cu). NVRTC-compatible.
#ifndef SIGCONV_ASYNC_COPY_CUH
#define SIGCONV_ASYNC_COPY_CUH

// cp.async (sm_80 and later) with zero fill: copies `src_bytes` (0 or the full size) and zero-fills the rest. The CPU
// test harnesses supply synchronous stand-ins (tests/host_emulation/cuda_shim_threads.h).
#ifndef SIGCONV_HOST_EMULATION
__device__ __forceinline__ unsigned smem_addr(const void* p) {
    return static_cast<unsigned>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async4(void* dst, const void* src, int src_bytes) {
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;\n" ::: "memory"); }
// Wait until at most `Pending` of this thread's committed groups are still in flight.
template <int Pending>
__device__ __forceinline__ void cp_async_wait_pending() {
    asm volatile("cp.async.wait_group %0;\n" ::"n"(Pending) : "memory");
}

// The tensor memory accelerator's bulk copies (sm_90 and later; SC_BULK_COPY 1 where they are built). From global to
// shared memory, completing on an mbarrier of shared memory: `bytes` a multiple of 16, both addresses 16-byte
// aligned. bulk_bar_init (one thread, before the block's barrier that precedes any use), bulk_load (one thread: the
// mbarrier's next phase expects `bytes`, which the copy completes), bulk_wait (any thread: until the phase of parity
// `phase` has completed). Generic-proxy accesses of the destination before bulk_load are ordered before the copy by
// the fence in it (after a barrier where they are other threads').
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define SC_BULK_COPY 1
__device__ __forceinline__ void bulk_bar_init(unsigned long long* bar) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_addr(bar)) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void bulk_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_addr(bar)), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_addr(dst)),
                 "l"(src), "r"(bytes), "r"(smem_addr(bar))
                 : "memory");
}
// The bulk copy the other way (bulk_store: one thread; bytes a multiple of 16, both addresses 16-byte aligned; after
// bulk_fence, which makes the block's generic writes of the source visible to it, and a barrier), and the wait of the
// thread that issued it until its copies have read their sources (bulk_store_wait_read).
__device__ __forceinline__ void bulk_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void bulk_store(void* dst, const void* src, unsigned bytes) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" ::"l"(dst), "r"(smem_addr(src)),
                 "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
}
__device__ __forceinline__ void bulk_store_wait_read() {
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
}
__device__ __forceinline__ void bulk_wait(unsigned long long* bar, unsigned phase) {
    asm volatile(
        "{\n .reg .pred p;\n WAIT_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n @!p bra WAIT_%=;\n}" ::"r"(
            smem_addr(bar)),
        "r"(phase)
        : "memory");
}
#else  // (never called where SC_BULK_COPY is 0)
#define SC_BULK_COPY 0
__device__ __forceinline__ void bulk_bar_init(unsigned long long*) {}
__device__ __forceinline__ void bulk_load(void*, const void*, unsigned, unsigned long long*) {}
__device__ __forceinline__ void bulk_wait(unsigned long long*, unsigned) {}
__device__ __forceinline__ void bulk_fence() {}
__device__ __forceinline__ void bulk_store(void*, const void*, unsigned) {}
__device__ __forceinline__ void bulk_store_wait_read() {}
#endif
#endif

#endif  // SIGCONV_ASYNC_COPY_CUH
