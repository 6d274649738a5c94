// fft_fused_harness.cpp: runs conv1d_fft_fused<LOGN> (kernels/fft_fused.cuh) on the host, one OS thread per CUDA
// thread (cuda_shim_threads.h: barriers for __syncthreads, warp shuffles), with the launch that
// sigconv.backends.overlap_save.fused_plan computes.
//   fft_fused_harness LOGN GX GY BLOCK SMEM  C L K pad out_len ntiles safe XOFF  FILE_X FILE_G FILE_TW FILE_TAPSHIFT FILE_Y
//                     [DELAY [PAIRS [AFTER]]]
// PAIRS 1: conv1d_fft_fused<LOGN, true, true> (a point's two samples as one 8-byte load), after checking the launcher's
// promise that every tile of every channel starts on an 8-byte boundary of x and L is even. The longest tile on N/64
// threads runs conv1d_fft_fused<LOGN, true, PAIRS, true> (ff_tile_wide).
// FILE_G: the coefficient table, N/2 rows of 4 float32 (sigconv.backends.overlap_save.fused_table), or
// "taps:FILE_W" (float32 taps, as many as the file holds): G and the tap shift computed first by
// conv1d_fft_fused_spectrum<LOGN> with DELAY (default 0; one block of max(32, N/32) threads; FILE_TAPSHIFT then
// unused; "taps:FILE_W:FILE_PREV[:poison]" runs it on the taps of FILE_PREV first, see below); K and pad are the tile
// kernel's (the launcher's, with the zero taps it adds: overlap_save.fused_alignment); FILE_TW:
// ff_twiddle_count(LOGN - 1) complex64 twiddles (fft_fused.cuh);
// FILE_TAPSHIFT: one int32, or "-" for a null pointer.
// AFTER 1: the tile kernel launched as the launcher launches it after the spectrum kernel (programmatic dependent
// launch): G and the tap shift unreadable in each block until all its threads have called sc_grid_wait
// (cuda_shim_threads.h, emu_after_writer); 2: unreadable all through (the control, which must fail); 0 (default): a
// plain launch.
// XOFF: x starts XOFF floats after a 256-byte boundary (a misaligned view). FILE_Y is read first (the test poisons it
// with NaN) and rewritten after the launch; the harness prints the bytes the tile kernel copied into shared memory
// ("cp.async bytes N") and out of it by bulk copies ("bulk store bytes N"). Shared memory starts filled with NaN for every block; the bytes past
// SMEM are poisoned under AddressSanitizer.
#include "cuda_shim_threads.h"
#include "fft_fused.cuh"
#include "harness_io.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <limits>

constexpr size_t SMEM_CAP = SC_EMU_SMEM_CAP;
alignas(256) float4 sc_smem4[SMEM_CAP / sizeof(float4)];

int main(int argc, char** argv) {
    if (argc < 19 || argc > 22) {
        std::fprintf(stderr, "fft_fused_harness: expected 18 to 21 arguments, got %d\n", argc - 1);
        return 2;
    }
    const int delay = argc >= 20 ? std::atoi(argv[19]) : 0;
    const bool pairs = argc >= 21 && std::atoi(argv[20]) != 0;
    const int after = argc >= 22 ? std::atoi(argv[21]) : 0;
    auto I = [&](int k) { return std::atoll(argv[k]); };
    const int logn = (int)I(1);
    dim3 g, b;
    g.x = (unsigned)I(2);
    g.y = (unsigned)I(3);
    b.x = (unsigned)I(4);
    const size_t smem = (size_t)I(5);
    const int C = (int)I(6), K = (int)I(8), safe = (int)I(12), xoff = (int)I(13);
    const sc_i64 L = I(7), pad = I(9), out_len = I(10), ntiles = I(11);
    const size_t N = (size_t)1 << logn;
    float* x = load<float>(argv[14], (size_t)C * L, (size_t)xoff);
    float2* tw = load<float2>(argv[16], (size_t)ff_twiddle_count(logn - 1));
    const bool device_spectrum = std::strncmp(argv[15], "taps:", 5) == 0;
    float4* G;
    int* tap_shift;
    if (device_spectrum) {
        // "taps:W[:PREV[:poison][:flip]]": with PREV (its taps, any count), the kernel first runs on PREV and then on W
        // with the same G, tap shift and record of the last taps (zeroed: none yet); "poison" refills G and the tap
        // shift with NaN and -12345 between the two runs (what a run that keeps them leaves); "flip": the run on PREV
        // with the other delay (1 - DELAY)
        std::string spec_arg(argv[15] + 5), prev_path;
        bool poison = false, flip = false;
        if (size_t c = spec_arg.find(':'); c != std::string::npos) {
            prev_path = spec_arg.substr(c + 1);
            spec_arg.resize(c);
            if (size_t d = prev_path.find(':'); d != std::string::npos) {
                const std::string opts = prev_path.substr(d) + ":";
                poison = opts.find(":poison:") != std::string::npos;
                flip = opts.find(":flip:") != std::string::npos;
                prev_path.resize(d);
            }
        }
        auto count = [](const char* path) {  // float32 values in the file
            FILE* f = std::fopen(path, "rb");
            if (!f || std::fseek(f, 0, SEEK_END) != 0) {
                std::fprintf(stderr, "cannot read %s\n", path);
                std::exit(2);
            }
            const int n = (int)(std::ftell(f) / (long)sizeof(float));
            std::fclose(f);
            return n;
        };
        const int kw = count(spec_arg.c_str());
        float* w = load<float>(spec_arg.c_str(), (size_t)kw);
        G = static_cast<float4*>(std::malloc((N / 2) * sizeof(float4)));
        tap_shift = static_cast<int*>(std::malloc(sizeof(int)));
        const float nan = std::numeric_limits<float>::quiet_NaN();
        auto fill = [&] {
            for (size_t i = 0; i < N / 2; ++i) G[i] = make_float4(nan, nan, nan, nan);
            *tap_shift = -12345;
        };
        fill();
        int* last = nullptr;
        if (!prev_path.empty()) last = static_cast<int*>(std::calloc(N / 2 + 1, sizeof(int)));
        dim3 g1(1), b1((unsigned)std::max<size_t>(32, N / 32));
        const size_t smem1 = 8 * (size_t)ff_pad((int)(N / 2)) + 128;
        auto run = [&](const float* taps, int k, int dl) {
            auto spec = [&](auto kern) {
                emu_launch_threads(g1, b1, sc_smem4, SMEM_CAP, smem1,
                                   [&] { kern(taps, k, dl, tw, G, tap_shift, last); });
            };
            switch (logn) {
                case 10: spec(conv1d_fft_fused_spectrum<10>); break;
                case 11: spec(conv1d_fft_fused_spectrum<11>); break;
                case 12: spec(conv1d_fft_fused_spectrum<12>); break;
                case 13: spec(conv1d_fft_fused_spectrum<13>); break;
                case 14: spec(conv1d_fft_fused_spectrum<14>); break;
                case 15: spec(conv1d_fft_fused_spectrum<15>); break;
                default: std::fprintf(stderr, "no tile of 2^%d samples\n", logn); std::exit(2);
            }
        };
        if (last != nullptr) {
            const int kp = count(prev_path.c_str());
            float* prev = load<float>(prev_path.c_str(), (size_t)kp);
            run(prev, kp, flip ? 1 - delay : delay);
            std::free(prev);
            if (poison) fill();
        }
        run(w, kw, delay);
        std::free(w);
        std::free(last);
    } else {
        G = load<float4>(argv[15], N / 2);
        tap_shift = std::strcmp(argv[17], "-") == 0 ? nullptr : load<int>(argv[17], 1);
    }
    float* y = load<float>(argv[18], (size_t)C * out_len);
    auto go = [&](auto kern) {
        if (after) {
            std::vector<EmuRegion> written{{G, (N / 2) * sizeof(float4)}};
            if (tap_shift) written.push_back({tap_shift, sizeof(int)});
            emu_after_writer(written, after == 1);
        }
        emu_launch_threads(g, b, sc_smem4, SMEM_CAP, smem,
                           [&] { kern(x, y, G, tw, tw, C, L, K, pad, out_len, ntiles, tap_shift, safe); });
    };
    // as the launcher picks (sigconv.backends.overlap_save): in place on N/32 threads or more; the longest tile's
    // two butterflies a thread (ff_tile_wide) on N/64
    const bool wide = logn == SIGCONV_FFT_FUSED_ONE_MAX_LOGN && (size_t)b.x * 32 == N / 2;
    const bool one = wide || (size_t)b.x * 16 >= N / 2;
    if (pairs) {
        const sc_i64 V = (sc_i64)N - K + 1;
        if (!one || logn != SIGCONV_FFT_FUSED_PAIRS_LOGN || reinterpret_cast<uintptr_t>(x) % 8 != 0 || L % 2 != 0 ||
            pad % 2 != 0 || V % 2 != 0) {
            std::fprintf(stderr, "PAIRS launch whose tiles do not all start on an 8-byte boundary\n");
            return 2;
        }
        if (wide) go(conv1d_fft_fused<SIGCONV_FFT_FUSED_PAIRS_LOGN, true, true, true>);
        else go(conv1d_fft_fused<SIGCONV_FFT_FUSED_PAIRS_LOGN, true, true>);
    } else if (wide) {
        go(conv1d_fft_fused<SIGCONV_FFT_FUSED_ONE_MAX_LOGN, true, false, true>);
    } else switch (logn * 2 + (one ? 1 : 0)) {
        case 20: go(conv1d_fft_fused<10, false>); break;
        case 21: go(conv1d_fft_fused<10, true>); break;
        case 22: go(conv1d_fft_fused<11, false>); break;
        case 23: go(conv1d_fft_fused<11, true>); break;
        case 24: go(conv1d_fft_fused<12, false>); break;
        case 25: go(conv1d_fft_fused<12, true>); break;
        case 26: go(conv1d_fft_fused<13, false>); break;
        case 27: go(conv1d_fft_fused<13, true>); break;
        case 28: go(conv1d_fft_fused<14, false>); break;
        case 29: go(conv1d_fft_fused<14, true>); break;
        case 31: go(conv1d_fft_fused<15, true>); break;  // (in place only)
        default: std::fprintf(stderr, "no tile of 2^%d samples\n", logn); return 2;
    }
    // (ff_tile_wide's prefetch of next tiles, and its outputs through bulk copies)
    std::printf("cp.async bytes %llu\nbulk store bytes %llu\n", sc_emu_cp_async_bytes.load(),
                sc_emu_bulk_store_bytes.load());
    FILE* f = std::fopen(argv[18], "wb");
    if (!f || std::fwrite(y, sizeof(float), (size_t)C * out_len, f) != (size_t)C * out_len) return 2;
    std::fclose(f);
    std::free(x - xoff);
    std::free(G); std::free(tw); std::free(tap_shift); std::free(y);
    return 0;
}
