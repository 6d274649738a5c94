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
#endif

#endif  // SIGCONV_ASYNC_COPY_CUH
