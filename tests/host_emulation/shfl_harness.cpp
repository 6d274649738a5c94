// shfl_harness.cpp: runs conv2d_shfl (kernels/conv2d_shfl.cuh) on the host, one OS thread per CUDA thread and
// the warp shuffles emulated (cuda_shim_threads.h). Compile with the -DSHFL_KH/KW/PX/ROWS (and -DC2D_BOUNDARY) the launcher
// prepends (sigconv.backends.cuda2d.launch_shfl).
//   shfl_harness GX GY GZ BX BY  N H W py Ho Wo has_bias vec_in vec_out FILL  FILE_X FILE_TAPS FILE_BIAS FILE_Y
// Float32 arrays, raw; FILE_Y is read first (the test poisons it with NaN) and rewritten after the launch.
// Buffers are 256-byte aligned (as CuPy's pool allocations are) and exactly as long as the data.
#include "cuda_shim_threads.h"
#include "conv2d_shfl.cuh"

static float* load(const char* path, size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, n ? n * sizeof(float) : 1) != 0) std::exit(2);
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(p, sizeof(float), n, f) != n) { std::fprintf(stderr, "cannot read %s\n", path); std::exit(2); }
    std::fclose(f);
    return static_cast<float*>(p);
}

int main(int argc, char** argv) {
    if (argc != 20) { std::fprintf(stderr, "shfl_harness: expected 19 arguments, got %d\n", argc - 1); return 2; }
    auto I = [&](int k) { return std::atoi(argv[k]); };
    dim3 g, b;
    g.x = I(1); g.y = I(2); g.z = I(3);
    b.x = I(4); b.y = I(5);
    const int N = I(6), H = I(7), W = I(8), py = I(9), Ho = I(10), Wo = I(11);
    const int has_bias = I(12), vec_in = I(13), vec_out = I(14);
    const float fill = (float)std::atof(argv[15]);
    float* x = load(argv[16], (size_t)N * H * W);
    float* taps = load(argv[17], SHFL_KH * SHFL_KW);
    std::memcpy(c_taps_shfl, taps, sizeof(c_taps_shfl));  // the launcher's copy into __constant__ memory
    float* bias = load(argv[18], 1);
    float* y = load(argv[19], (size_t)N * Ho * Wo);
    static unsigned char no_smem[16];
    emu_launch_threads(g, b, no_smem, sizeof(no_smem), 0,
                       [&] { conv2d_shfl(x, y, N, H, W, py, Ho, Wo, bias, has_bias, vec_in, vec_out, fill); });
    FILE* f = std::fopen(argv[19], "wb");
    if (!f || std::fwrite(y, sizeof(float), (size_t)N * Ho * Wo, f) != (size_t)N * Ho * Wo) return 2;
    std::fclose(f);
    return 0;
}
