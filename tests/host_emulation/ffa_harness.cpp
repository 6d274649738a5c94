// ffa_harness.cpp: runs one launch of kernels/conv1d_ffa.cu (the ffa variant) on the host, one OS thread per CUDA
// thread (cuda_shim_threads.h), as sigconv.backends.cuda1d.ffa_launches describes it. Compile with -DFFA_KQ, -DFFA_RQ
// and -DFFA_MAXT (the instantiation conv1d_ffa<KQ, RQ, MAXT> of that launch).
//   ffa_harness GX GY BLOCK SMEM  C c0 cstep L K shift start out_len S ntiles XOFF  FILE_X FILE_W FILE_Y
// The taps are prepared first by conv1d_ffa_taps (one block of 9 KQ threads rounded up to a warp, into a buffer of
// exactly 9 KQ floats) and copied into __constant__ memory, whose other entries hold NaN. XOFF: x starts XOFF floats
// after a 256-byte boundary. FILE_Y is read first (the test poisons it with NaN, or an earlier launch of another
// channel class wrote part of it) and rewritten after the launch. Shared memory starts as NaN for every block; the
// copies into it (cp.async) are synchronous here.
#include "cuda_shim_threads.h"
#include "conv1d_ffa.cu"
#include "harness_io.h"

#include <limits>

constexpr size_t SMEM_CAP = SC_EMU_SMEM_CAP;
alignas(256) float4 sc_smem4[SMEM_CAP / sizeof(float4)];

int main(int argc, char** argv) {
    if (argc != 19) {
        std::fprintf(stderr, "ffa_harness: expected 18 arguments, got %d\n", argc - 1);
        return 2;
    }
    dim3 g, b;
    g.x = (unsigned)std::atoi(argv[1]);
    g.y = (unsigned)std::atoi(argv[2]);
    b.x = (unsigned)std::atoi(argv[3]);
    const size_t smem = (size_t)std::atoll(argv[4]);
    const int C = std::atoi(argv[5]), c0 = std::atoi(argv[6]), cstep = std::atoi(argv[7]);
    const long long L = std::atoll(argv[8]);
    const int K = std::atoi(argv[9]), shift = std::atoi(argv[10]);
    const long long start = std::atoll(argv[11]), out_len = std::atoll(argv[12]);
    const int S = std::atoi(argv[13]), ntiles = std::atoi(argv[14]);
    const size_t xoff = (size_t)std::atoi(argv[15]);
    float* x = load<float>(argv[16], (size_t)C * L, xoff);
    float* w = load<float>(argv[17], K);
    float* y = load<float>(argv[18], (size_t)C * out_len);
    const int n = 9 * FFA_KQ;
    float* taps = static_cast<float*>(std::malloc(n * sizeof(float)));
    dim3 tg, tb;
    tb.x = 32 * ((n + 31) / 32);
    emu_launch_threads(tg, tb, sc_smem4, SMEM_CAP, 0, [&] { conv1d_ffa_taps(w, K, shift, FFA_KQ, taps); });
    const int cap = (int)(sizeof(c_ffa_taps) / sizeof(float));
    for (int j = 0; j < cap; ++j) c_ffa_taps[j] = j < n ? taps[j] : std::numeric_limits<float>::quiet_NaN();
    emu_launch_threads(g, b, sc_smem4, SMEM_CAP, smem, [&] {
        conv1d_ffa<FFA_KQ, FFA_RQ, FFA_MAXT>(x, y, C, c0, cstep, L, start, out_len, S, ntiles);
    });
    FILE* f = std::fopen(argv[18], "wb");
    if (!f || std::fwrite(y, sizeof(float), (size_t)C * out_len, f) != (size_t)C * out_len) return 2;
    std::fclose(f);
    return 0;
}
