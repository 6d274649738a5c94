// conv2d_harness.cpp: runs kernels/conv2d.cu's shared-memory kernels on the host, one OS thread per CUDA
// thread (cuda_shim_threads.h): `tiled` (the regblock / prefetch variants; compile with the #defines that
// sigconv.backends.cuda2d.tiled_plan gives) and `shared` (float32 / float64).
//   conv2d_harness VARIANT DTYPE GX GY GZ BX BY SMEM  N Cin H W Cout kH kW sy sx py px Ho Wo has_bias pitch
//                  vec_in vec_out FILL  FILE_X FILE_W FILE_B FILE_Y
// FILL: tiled's fill constant (its boundary is compiled in: -DC2D_BOUNDARY); shared runs zero fill (its boundaries
// run in border_harness.cpp).
// Arrays raw, 256-byte aligned and exactly as long as the data; FILE_Y is read first (NaN-poisoned by the
// test) and rewritten after the launch. Shared memory starts as NaN for every block.
#include "cuda_shim_threads.h"
#include "conv2d.cu"
#include "harness_io.h"

#include <string>

constexpr size_t SMEM_CAP = SC_EMU_SMEM_CAP;
alignas(256) unsigned char smem_raw[SMEM_CAP];
alignas(256) float smem[SMEM_CAP / sizeof(float)];

template <typename T> static int run(const std::string& v, dim3 g, dim3 b, size_t sm, char** a) {
    int p[17];
    for (int i = 0; i < 17; ++i) p[i] = std::atoi(a[i]);
    const float fill = (float)std::atof(a[17]);
    const int N = p[0], Cin = p[1], H = p[2], W = p[3], Cout = p[4], kH = p[5], kW = p[6], sy = p[7], sx = p[8];
    const int py = p[9], px = p[10], Ho = p[11], Wo = p[12], hb = p[13], pitch = p[14], vin = p[15], vout = p[16];
    T* x = load<T>(a[18], (size_t)N * Cin * H * W);
    T* w = load<T>(a[19], (size_t)Cout * Cin * kH * kW);
    T* bias = load<T>(a[20], Cout);
    T* y = load<T>(a[21], (size_t)N * Cout * Ho * Wo);
    if (v == "shared") {
        emu_launch_threads(g, b, smem_raw, SMEM_CAP, sm, [&] {
            conv2d_shared<T>(x, w, bias, y, N, Cin, H, W, Cout, kH, kW, sy, sx, py, px, Ho, Wo, hb, pitch,
                             SIGCONV_BOUNDARY_FILL, T(0));
        });
    } else if constexpr (sizeof(T) == 4) {
        if (v != "tiled" || kH != KH || kW != KW || sy != SY || sx != SX) {
            std::fprintf(stderr, "this harness was built for tiled %dx%d stride %dx%d\n", KH, KW, SY, SX);
            return 2;
        }
        emu_launch_threads(g, b, smem, SMEM_CAP, sm, [&] {
            conv2d_tiled(x, w, bias, y, N, Cin, H, W, Cout, py, px, Ho, Wo, hb, vin, vout, fill);
        });
    } else {
        return 2;
    }
    FILE* f = std::fopen(a[21], "wb");
    const size_t ny = (size_t)N * Cout * Ho * Wo;
    if (!f || std::fwrite(y, sizeof(T), ny, f) != ny) return 2;
    std::fclose(f);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 31) { std::fprintf(stderr, "conv2d_harness: expected 30 arguments, got %d\n", argc - 1); return 2; }
    const std::string v = argv[1], dt = argv[2];
    dim3 g, b;
    g.x = std::atoi(argv[3]); g.y = std::atoi(argv[4]); g.z = std::atoi(argv[5]);
    b.x = std::atoi(argv[6]); b.y = std::atoi(argv[7]);
    const size_t sm = (size_t)std::atoll(argv[8]);
    if (dt == "f32") return run<float>(v, g, b, sm, argv + 9);
    if (dt == "f64") return run<double>(v, g, b, sm, argv + 9);
    return 2;
}
