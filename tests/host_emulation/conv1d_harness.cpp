// conv1d_harness.cpp: runs the direct 1-D kernels of kernels/conv1d.cu (naive, constant, shared, l2, tiled)
// on the host, one OS thread per CUDA thread (cuda_shim_threads.h), with the launch the Python launcher
// computes (sigconv.backends.cuda1d.launch_config).
//   conv1d_harness VARIANT DTYPE GX GY BLOCK SMEM TAPS C L K pad out_len S XOFF  FILE_X FILE_W FILE_Y
// VARIANT: naive constant shared l2, tiled8 / tiled16 (conv1d_tiled<K, R> for the K instantiated below),
// tiled_rt8 / tiled_rt16 (conv1d_tiled_rt<R>, runtime K). DTYPE f32 | f64 (tiled: f32). TAPS: taps uploaded to __constant__
// memory (zero-padded up to TAPS; the rest of the constant buffer holds NaN). XOFF: x starts XOFF elements
// after a 256-byte boundary (a misaligned view, as x[:, 1:] would be). FILE_Y is read first (NaN-poisoned
// by the test) and rewritten after the launch. Shared memory starts filled with NaN for every block.
#include "cuda_shim_threads.h"
#include "conv1d.cu"
#include "harness_io.h"

#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

constexpr size_t SMEM_CAP = SC_EMU_SMEM_CAP;
alignas(256) double sc_smem_d[SMEM_CAP / sizeof(double)];
alignas(256) float4 sc_smem4[SMEM_CAP / sizeof(float4)];

template <int V> using IC = std::integral_constant<int, V>;

template <typename T> static int run(const std::string& v, dim3 g, dim3 b, size_t smem, int taps, char** a) {
    const int C = std::atoi(a[0]);
    const long long L = std::atoll(a[1]);
    const int K = std::atoi(a[2]);
    const long long pad = std::atoll(a[3]), out_len = std::atoll(a[4]);
    const int S = std::atoi(a[5]);
    const int xoff = std::atoi(a[6]);
    T* x = load<T>(a[7], (size_t)C * L, xoff);
    T* w = load<T>(a[8], K);
    T* y = load<T>(a[9], (size_t)C * out_len);
    // __constant__ taps: the launcher's upload (taps, zero-padded to TAPS), NaN beyond
    {
        T* ct = reinterpret_cast<T*>(c_taps_raw);
        const int cap = (int)(sizeof(c_taps_raw) / sizeof(T));
        for (int j = 0; j < cap; ++j) ct[j] = std::numeric_limits<T>::quiet_NaN();
        for (int j = 0; j < taps; ++j) ct[j] = j < K ? w[j] : T(0);
    }
    void* sm = (v == "tiled" || v.rfind("tiled_rt", 0) == 0) ? (void*)sc_smem4 : (void*)sc_smem_d;
    auto go = [&](auto body) { emu_launch_threads(g, b, sm, SMEM_CAP, smem, body); };
    constexpr bool f32 = sizeof(T) == 4;
    if (v == "naive") {
        if constexpr (f32) go([&] { conv1d_naive_f32(x, w, y, C, L, K, pad, out_len); });
        else go([&] { conv1d_naive_f64(x, w, y, C, L, K, pad, out_len); });
    } else if (v == "constant") {
        if constexpr (f32) go([&] { conv1d_constant_f32(x, y, C, L, K, pad, out_len); });
        else go([&] { conv1d_constant_f64(x, y, C, L, K, pad, out_len); });
    } else if (v == "shared") {
        if constexpr (f32) go([&] { conv1d_shared_f32(x, w, y, C, L, K, pad, out_len); });
        else go([&] { conv1d_shared_f64(x, w, y, C, L, K, pad, out_len); });
    } else if (v == "l2") {
        if constexpr (f32) go([&] { conv1d_l2_f32(x, w, y, C, L, K, pad, out_len); });
        else go([&] { conv1d_l2_f64(x, w, y, C, L, K, pad, out_len); });
    } else if constexpr (f32) {
        if (v == "tiled_rt8") go([&] { conv1d_tiled_rt<8>(x, y, C, L, K, pad, out_len, S); });
        else if (v == "tiled_rt16") go([&] { conv1d_tiled_rt<16>(x, y, C, L, K, pad, out_len, S); });
        else if (v == "tiled8" || v == "tiled16") {
            const int R = v == "tiled8" ? 8 : 16;
            bool ran = false;
            auto one = [&](auto kc, auto rc) {
                constexpr int KK = decltype(kc)::value, RR = decltype(rc)::value;
                if (K == KK && R == RR) { go([&] { conv1d_tiled<KK, RR>(x, y, C, L, pad, out_len, S); }); ran = true; }
            };
            // the static-K instances the tests use (R = 8 up to K = 32, else 16: cuda1d.tiled_geometry)
            one(IC<1>{}, IC<8>{}); one(IC<2>{}, IC<8>{}); one(IC<3>{}, IC<8>{}); one(IC<7>{}, IC<8>{});
            one(IC<24>{}, IC<8>{}); one(IC<25>{}, IC<8>{}); one(IC<33>{}, IC<16>{}); one(IC<63>{}, IC<16>{});
            one(IC<64>{}, IC<16>{});
            if (!ran) { std::fprintf(stderr, "tiled<%d, %d> is not instantiated in this harness\n", K, R); return 2; }
        }
        else { std::fprintf(stderr, "variant %s not built into this harness\n", v.c_str()); return 2; }
    } else {
        std::fprintf(stderr, "variant %s has no float64 kernel\n", v.c_str());
        return 2;
    }
    FILE* f = std::fopen(a[9], "wb");
    if (!f || std::fwrite(y, sizeof(T), (size_t)C * out_len, f) != (size_t)C * out_len) return 2;
    std::fclose(f);
    return 0;
}

int main(int argc, char** argv) {
    if (argc != 18) { std::fprintf(stderr, "conv1d_harness: expected 17 arguments, got %d\n", argc - 1); return 2; }
    const std::string v = argv[1], dt = argv[2];
    dim3 g, b;
    g.x = (unsigned)std::atoi(argv[3]);
    g.y = (unsigned)std::atoi(argv[4]);
    b.x = (unsigned)std::atoi(argv[5]);
    const size_t smem = (size_t)std::atoll(argv[6]);
    const int taps = std::atoi(argv[7]);
    if (dt == "f32") return run<float>(v, g, b, smem, taps, argv + 8);
    if (dt == "f64") return run<double>(v, g, b, smem, taps, argv + 8);
    return 2;
}
