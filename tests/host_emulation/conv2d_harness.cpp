// conv2d_harness.cpp: runs kernels/conv2d.cu's 2-D kernels on the host, one OS thread per CUDA thread where they
// use shared memory and barriers (cuda_shim_threads.h): `tiled` (the regblock / prefetch variants; compile with
// the #defines that sigconv.backends.cuda2d.tiled_plan gives), `shared` (float32 / float64), `naive` (float32,
// float64, uint64) and `separable` (its row pass into scratch, then its column pass; float32 / float64). The
// boundary is compiled in (-DC2D_BOUNDARY, as the launcher does); FILL is the kernels' fill constant.
//   conv2d_harness VARIANT DTYPE GX GY GZ BX BY SMEM  N Cin H W Cout kH kW sy sx py px Ho Wo has_bias pitch
//                  vec_in vec_out FILL  FILE_X FILE_W FILE_B FILE_Y
//   conv2d_harness extend n boundary lo hi FILE        int32 c2d_extend(i, n, boundary) for lo <= i < hi
// DTYPE f32, f64 or u64 (FILL then an unsigned decimal). GX GY GZ: the grid of naive, shared and tiled (the
// launcher's); separable computes its two grids as the launcher does from BX BY. FILE_W holds w, or for
// separable its factors u (Cout*Cin*kH) then v (Cout*Cin*kW). Arrays raw, 256-byte aligned and exactly as long
// as the data; FILE_Y is read first (poisoned by the test) and rewritten after the launch. Shared memory starts
// as NaN for every block.
#include "cuda_shim_threads.h"
#include "conv2d.cu"
#include "harness_io.h"

#include <string>
#include <vector>

constexpr size_t SMEM_CAP = 232448;
alignas(256) unsigned char smem_raw[SMEM_CAP];
alignas(256) float smem[SMEM_CAP / sizeof(float)];

template <typename T> static T parse_fill(const char* s);
template <> float parse_fill<float>(const char* s) { return (float)std::strtod(s, nullptr); }
template <> double parse_fill<double>(const char* s) { return std::strtod(s, nullptr); }
template <> unsigned long long parse_fill<unsigned long long>(const char* s) { return std::strtoull(s, nullptr, 10); }

static unsigned cdiv(long long a, long long b) { return (unsigned)((a + b - 1) / b); }
static unsigned zcap(long long n) { return (unsigned)(n < 1 ? 1 : (n > 65535 ? 65535 : n)); }

template <typename T> static int run(const std::string& v, dim3 g, dim3 b, size_t sm, char** a) {
    int p[17];
    for (int i = 0; i < 17; ++i) p[i] = std::atoi(a[i]);
    const T fill = parse_fill<T>(a[17]);
    const int N = p[0], Cin = p[1], H = p[2], W = p[3], Cout = p[4], kH = p[5], kW = p[6], sy = p[7], sx = p[8];
    const int py = p[9], px = p[10], Ho = p[11], Wo = p[12], hb = p[13], pitch = p[14], vin = p[15], vout = p[16];
    const size_t nw = (size_t)Cout * Cin * (v == "separable" ? kH + kW : kH * kW);
    T* x = load<T>(a[18], (size_t)N * Cin * H * W);
    T* w = load<T>(a[19], nw);
    T* bias = load<T>(a[20], Cout);
    T* y = load<T>(a[21], (size_t)N * Cout * Ho * Wo);
    if (v == "naive") {  // no barriers: one host thread runs the grid
        emu_launch(g, b, [&] { conv2d_naive<T>(x, w, bias, y, N, Cin, H, W, Cout, kH, kW, sy, sx, py, px, Ho, Wo, hb,
                                               fill); });
    } else if constexpr (sizeof(T) == 8 && T(-1) > T(0)) {  // uint64: naive only
        return 2;
    } else if (v == "separable") {
        const T* u = w;
        const T* vv = w + (size_t)Cout * Cin * kH;
        const int Hn = (Ho - 1) * sy + kH, nz = N * Cout;
        std::vector<T> tmp((size_t)nz * Cin * Hn * Wo, T(-777));  // poison: every element is written first
        emu_launch(dim3(cdiv(Wo, b.x), cdiv(Hn, b.y), zcap((long long)nz * Cin)), b, [&] {
            conv2d_sep_rows<T>(x, vv, tmp.data(), 0, nz, Cin, H, W, Cout, kW, sx, py, px, Hn, Wo, fill);
        });
        emu_launch(dim3(cdiv(Wo, b.x), cdiv(Ho, b.y), zcap(nz)), b, [&] {
            conv2d_sep_cols<T>(tmp.data(), u, bias, y, 0, nz, Cin, Cout, kH, sy, Hn, Ho, Wo, hb);
        });
    } else if (v == "shared") {
        emu_launch_threads(g, b, smem_raw, SMEM_CAP, sm, [&] {
            conv2d_shared<T>(x, w, bias, y, N, Cin, H, W, Cout, kH, kW, sy, sx, py, px, Ho, Wo, hb, pitch, fill);
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
    if (!f || (ny && std::fwrite(y, sizeof(T), ny, f) != ny)) return 2;
    std::fclose(f);
    std::free(x); std::free(w); std::free(bias); std::free(y);
    return 0;
}

int main(int argc, char** argv) {
    const std::string v = argc > 1 ? argv[1] : "";
    if (v == "extend" && argc == 7) {
        const int n = std::atoi(argv[2]), boundary = std::atoi(argv[3]);
        const int lo = std::atoi(argv[4]), hi = std::atoi(argv[5]);
        std::vector<int> out;
        for (int i = lo; i < hi; ++i) out.push_back(c2d_extend(i, n, boundary));
        FILE* f = std::fopen(argv[6], "wb");
        if (!f || std::fwrite(out.data(), sizeof(int), out.size(), f) != out.size()) return 2;
        std::fclose(f);
        return 0;
    }
    if (argc != 31) { std::fprintf(stderr, "conv2d_harness: expected 30 arguments, got %d\n", argc - 1); return 2; }
    const std::string dt = argv[2];
    dim3 g, b;
    g.x = std::atoi(argv[3]); g.y = std::atoi(argv[4]); g.z = std::atoi(argv[5]);
    b.x = std::atoi(argv[6]); b.y = std::atoi(argv[7]);
    const size_t sm = (size_t)std::atoll(argv[8]);
    if (dt == "f32") return run<float>(v, g, b, sm, argv + 9);
    if (dt == "f64") return run<double>(v, g, b, sm, argv + 9);
    if (dt == "u64") return run<unsigned long long>(v, g, b, sm, argv + 9);
    return 2;
}
