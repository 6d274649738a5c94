// igemm_harness.cpp: runs conv2d_igemm (kernels/conv2d_igemm.cuh, the igemm and igemm_tf32 variants) on the host,
// one OS thread per CUDA thread (cuda_shim_threads.h: barriers, synchronous cp.async, the TF32 mma as a warp
// collective). Compile with the #defines of sigconv.backends.cuda2d.igemm_plan (C2D_PART among them) and, for wrap or
// symm, C2D_BOUNDARY.
//   igemm_harness GX BX BY SMEM  N Cin H W Cout kH kW sy sx py px Ho Wo has_bias co_tiles vec_out FILL XOFF
//                 FILE_X FILE_W FILE_TAB FILE_B FILE_Y
// The weights are transposed first by conv2d_igemm_wt (a grid of 3 blocks of 64 threads: its grid-stride loop runs),
// into Ktp x Coutp (Cin*kH*kW and Cout rounded up to 16 and 4) as the launcher allocates it. FILE_TAB: the gather's
// table (sigconv.backends.cuda2d.igemm_table, int32 pairs). XOFF: x starts XOFF floats after a 256-byte boundary.
// FILE_Y is read first (the test poisons it with NaN) and rewritten after the launch. Shared memory starts as NaN for every block; bytes past SMEM are poisoned under
// AddressSanitizer.
#include "cuda_shim_threads.h"
#include "conv2d.cu"
#include "harness_io.h"

constexpr size_t SMEM_CAP = SC_EMU_SMEM_CAP;
alignas(256) float smem[SMEM_CAP / sizeof(float)];

int main(int argc, char** argv) {
    if (argc != 28) {
        std::fprintf(stderr, "igemm_harness: expected 27 arguments, got %d\n", argc - 1);
        return 2;
    }
    int a[21];
    for (int i = 0; i < 21; ++i) a[i] = std::atoi(argv[1 + i]);
    dim3 g, b;
    g.x = (unsigned)a[0];
    b.x = (unsigned)a[1];
    b.y = (unsigned)a[2];
    const size_t sm = (size_t)a[3];
    const int N = a[4], Cin = a[5], H = a[6], W = a[7], Cout = a[8], kH = a[9], kW = a[10], sy = a[11], sx = a[12];
    const int py = a[13], px = a[14], Ho = a[15], Wo = a[16], hb = a[17], co_tiles = a[18], vout = a[19];
    const float fill = (float)std::atof(argv[21]);
    const size_t xoff = (size_t)std::atoi(argv[22]);
    if (kH != KH || kW != KW || sy != SY || sx != SX) {
        std::fprintf(stderr, "this harness was built for %dx%d stride %dx%d\n", KH, KW, SY, SX);
        return 2;
    }
    const int Ktot = Cin * kH * kW, Coutp = (Cout + 3) / 4 * 4, Ktp = (Ktot + IG_BK - 1) / IG_BK * IG_BK;
    float* x = load<float>(argv[23], (size_t)N * Cin * H * W, xoff);
    float* w = load<float>(argv[24], (size_t)Cout * Ktot);
    int2* tab = load<int2>(argv[25], (size_t)(IG_MASK ? (Ktot + 15) / 16 * 16 : Ktot));  // (masked: padded rows)
    float* bias = load<float>(argv[26], (size_t)Cout);
    float* y = load<float>(argv[27], (size_t)N * Cout * Ho * Wo);
    float* wt = nullptr;
    if (posix_memalign(reinterpret_cast<void**>(&wt), 256, (size_t)Ktp * Coutp * sizeof(float)) != 0) return 2;
    for (size_t i = 0; i < (size_t)Ktp * Coutp; ++i) wt[i] = std::numeric_limits<float>::quiet_NaN();
    emu_launch_threads(dim3{3, 1, 1}, dim3{64, 1, 1}, smem, SMEM_CAP, 0,
                       [&] { conv2d_igemm_wt(w, wt, Cout, Ktot, Coutp, Ktp); });
    emu_launch_threads(g, b, smem, SMEM_CAP, sm, [&] {
        conv2d_igemm(x, wt, tab, bias, y, N, Cin, H, W, Cout, Coutp, py, px, Ho, Wo, hb, co_tiles, vout, fill);
    });
    const size_t ny = (size_t)N * Cout * Ho * Wo;
    FILE* f = std::fopen(argv[27], "wb");
    if (!f || std::fwrite(y, sizeof(float), ny, f) != ny) return 2;
    std::fclose(f);
    std::free(x - xoff);
    std::free(w);
    std::free(wt);
    std::free(tab);
    std::free(bias);
    std::free(y);
    return 0;
}
