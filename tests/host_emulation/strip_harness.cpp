// strip_harness.cpp: runs conv2d_strip (kernels/conv2d_strip.cuh) on the host. Compile with the same
// -DSTRIP_KH/KW/SH/ROWS (and -DC2D_BOUNDARY) the launcher prepends (sigconv.backends.cuda2d.launch_strip).
//   strip_harness GX GY GZ BX BY  N H W py px Ho Wo has_bias vec_in vec_out FILL  FILE_X FILE_TAPS FILE_BIAS FILE_Y
// Float32 arrays, raw; FILE_Y is read first (the test poisons it with NaN) and rewritten after the launch.
// Buffers are 256-byte aligned (as CuPy's pool allocations are) and exactly as long as the data.
#include "cuda_shim.h"
#include "conv2d_strip.cuh"

#include <cstring>

static float* load(const char* path, size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, n ? n * sizeof(float) : 1) != 0) { std::fprintf(stderr, "out of memory\n"); std::exit(2); }
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(p, sizeof(float), n, f) != n) { std::fprintf(stderr, "cannot read %s\n", path); std::exit(2); }
    std::fclose(f);
    return static_cast<float*>(p);
}

int main(int argc, char** argv) {
    if (argc != 21) { std::fprintf(stderr, "strip_harness: expected 20 arguments, got %d\n", argc - 1); return 2; }
    auto I = [&](int k) { return std::atoi(argv[k]); };
    dim3 g, b;
    g.x = I(1); g.y = I(2); g.z = I(3);
    b.x = I(4); b.y = I(5);
    const int N = I(6), H = I(7), W = I(8), py = I(9), px = I(10), Ho = I(11), Wo = I(12);
    const int has_bias = I(13), vec_in = I(14), vec_out = I(15);
    const float fill = (float)std::atof(argv[16]);
    float* x = load(argv[17], (size_t)N * H * W);
    float* taps = load(argv[18], STRIP_KH * STRIP_KW);
    std::memcpy(c_taps, taps, sizeof(c_taps));  // the launcher's copy into __constant__ memory
    float* bias = load(argv[19], 1);
    float* y = load(argv[20], (size_t)N * Ho * Wo);
    emu_launch(g, b, [&] { conv2d_strip(x, y, N, H, W, py, px, Ho, Wo, bias, has_bias, vec_in, vec_out, fill); });
    FILE* f = std::fopen(argv[20], "wb");
    if (!f || std::fwrite(y, sizeof(float), (size_t)N * Ho * Wo, f) != (size_t)N * Ho * Wo) return 2;
    std::fclose(f);
    std::free(x); std::free(taps); std::free(bias); std::free(y);
    return 0;
}
