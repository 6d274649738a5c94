// border_harness.cpp: runs kernels/conv2d.cu's boundary kernels on the host: the generic variants with a boundary
// (conv2d_naive and conv2d_naive_ext, conv2d_shared), separable's boundary passes, the extended copy, and the rule
// c2d_extend on its own.
//   border_harness extend n boundary lo hi FILE                     int32 c2d_extend(i, n, boundary), lo <= i < hi
//   border_harness run VARIANT DTYPE GX GY BX BY PITCH SMEM  H W kH kW py px Ho Wo boundary FILL
//                      FILE_X FILE_W FILE_Y
// run: VARIANT naive (DTYPE f32, f64 or u64) or shared (f32, f64; PITCH and SMEM bytes: the launcher's
// cuda2d.shared_geometry) on grid GX x GY of BX x BY blocks, one image, one channel, stride 1, no bias, one OS
// thread per device thread (shared's barriers). FILE_Y is read first (poisoned by the test) and rewritten.
//   border_harness image DTYPE GX GY BX BY  H W He We oy ox boundary FILL  FILE_X FILE_XE
// image: conv2d_extend<T> on grid GX x GY of BX x BY blocks (the launcher's cuda2d.launch_extend), x (H, W) ->
// xe (He, We), FILE_XE read first (poisoned) and rewritten.
//   border_harness sep DTYPE BX BY  H W kH kW py px Ho Wo boundary FILL  FILE_X FILE_U FILE_V FILE_Y
// sep: separable's boundary passes, conv2d_sep_rows_ext<T> then conv2d_sep_cols<T> on BX x BY blocks over the
// scratch's Ho + kH - 1 rows and the output's Ho rows (the launcher's grids), w = u v^T; DTYPE f32 or f64.
// Arrays raw, 256-byte aligned and exactly as long as the data.
#include "cuda_shim_threads.h"
#include "conv2d.cu"
#include "harness_io.h"

#include <string>
#include <type_traits>

// Shared memory of the shared kernel (starts as NaN for every block); the tiled kernels (not run here) refer to smem.
constexpr size_t SMEM_CAP = 1 << 16;
alignas(256) unsigned char smem_raw[SMEM_CAP];
alignas(256) float smem[4];

static int save(const char* path, const void* p, size_t bytes) {
    FILE* f = std::fopen(path, "wb");
    if (!f || (bytes && std::fwrite(p, 1, bytes, f) != bytes)) return 2;  // (no outputs: an empty file)
    std::fclose(f);
    return 0;
}

template <typename T> static T parse_fill(const char* s);
template <> float parse_fill<float>(const char* s) { return (float)std::strtod(s, nullptr); }
template <> double parse_fill<double>(const char* s) { return std::strtod(s, nullptr); }
template <> unsigned long long parse_fill<unsigned long long>(const char* s) { return std::strtoull(s, nullptr, 10); }

template <typename T> static int run(const std::string& v, char** a) {
    auto I = [&](int k) { return std::atoi(a[k]); };
    dim3 g, b;
    g.x = I(0); g.y = I(1); b.x = I(2); b.y = I(3);
    const int pitch = I(4);
    const size_t sm = (size_t)std::atoll(a[5]);
    const int H = I(6), W = I(7), kH = I(8), kW = I(9), py = I(10), px = I(11), Ho = I(12), Wo = I(13);
    const int boundary = I(14);
    const T fill = parse_fill<T>(a[15]);
    T* x = load<T>(a[16], (size_t)H * W);
    T* w = load<T>(a[17], (size_t)kH * kW);
    T* y = load<T>(a[18], (size_t)Ho * Wo);
    int rc = 0;
    if (v == "naive") {
        emu_launch_threads(g, b, smem_raw, SMEM_CAP, 0, [&] {
            if (boundary == SIGCONV_BOUNDARY_FILL)
                conv2d_naive<T>(x, w, x, y, 1, 1, H, W, 1, kH, kW, 1, 1, py, px, Ho, Wo, 0, fill);
            else
                conv2d_naive_ext<T>(x, w, x, y, 1, 1, H, W, 1, kH, kW, 1, 1, py, px, Ho, Wo, 0, boundary);
        });
    } else if constexpr (std::is_integral_v<T>) {  // (no shared kernel for integers)
        rc = 2;
    } else if (v == "shared" && sm <= SMEM_CAP) {
        emu_launch_threads(g, b, smem_raw, SMEM_CAP, sm, [&] {
            conv2d_shared<T>(x, w, x, y, 1, 1, H, W, 1, kH, kW, 1, 1, py, px, Ho, Wo, 0, pitch, boundary, fill);
        });
    } else {
        rc = 2;
    }
    if (rc == 0) rc = save(a[18], y, (size_t)Ho * Wo * sizeof(T));
    std::free(x); std::free(w); std::free(y);
    return rc;
}

template <typename T> static int image(char** a) {
    auto I = [&](int k) { return std::atoi(a[k]); };
    dim3 g, b;
    g.x = I(0); g.y = I(1); b.x = I(2); b.y = I(3);
    const int H = I(4), W = I(5), He = I(6), We = I(7), oy = I(8), ox = I(9), boundary = I(10);
    const T fill = parse_fill<T>(a[11]);
    T* x = load<T>(a[12], (size_t)H * W);
    T* xe = load<T>(a[13], (size_t)He * We);
    emu_launch(g, b, [&] { conv2d_extend<T>(x, xe, H, W, He, We, oy, ox, boundary, fill); });
    const int rc = save(a[13], xe, (size_t)He * We * sizeof(T));
    std::free(x); std::free(xe);
    return rc;
}

template <typename T> static int sep(char** a) {
    auto I = [&](int k) { return std::atoi(a[k]); };
    dim3 b, g1, g2;
    b.x = I(0); b.y = I(1);
    const int H = I(2), W = I(3), kH = I(4), kW = I(5), py = I(6), px = I(7), Ho = I(8), Wo = I(9), boundary = I(10);
    const T fill = parse_fill<T>(a[11]);
    const int Hn = Ho + kH - 1;
    g1.x = g2.x = (Wo + b.x - 1) / b.x;
    g1.y = (Hn + b.y - 1) / b.y;
    g2.y = (Ho + b.y - 1) / b.y;
    T* x = load<T>(a[12], (size_t)H * W);
    T* u = load<T>(a[13], (size_t)kH);
    T* v = load<T>(a[14], (size_t)kW);
    T* y = load<T>(a[15], (size_t)Ho * Wo);
    T* tmp = static_cast<T*>(std::malloc((size_t)Hn * Wo * sizeof(T) + 1));
    emu_launch(g1, b, [&] { conv2d_sep_rows_ext<T>(x, v, tmp, H, W, kW, py, px, Hn, Wo, boundary, fill); });
    emu_launch(g2, b, [&] { conv2d_sep_cols<T>(tmp, u, x, y, 0, 1, 1, 1, kH, 1, Hn, Ho, Wo, 0); });
    const int rc = save(a[15], y, (size_t)Ho * Wo * sizeof(T));
    std::free(x); std::free(u); std::free(v); std::free(y); std::free(tmp);
    return rc;
}

int main(int argc, char** argv) {
    const std::string op = argc > 1 ? argv[1] : "";
    auto I = [&](int k) { return std::atoi(argv[k]); };
    if (op == "extend" && argc == 7) {
        const int n = I(2), boundary = I(3);
        const int lo = std::atoi(argv[4]), hi = std::atoi(argv[5]);
        std::vector<int> out;
        for (int i = lo; i < hi; ++i) out.push_back(c2d_extend(i, n, boundary));
        return save(argv[6], out.data(), out.size() * sizeof(int));
    }
    if (op == "run" && argc == 23) {
        const std::string v = argv[2], dt = argv[3];
        if (dt == "f32") return run<float>(v, argv + 4);
        if (dt == "f64") return run<double>(v, argv + 4);
        if (dt == "u64") return run<unsigned long long>(v, argv + 4);
    }
    if (op == "sep" && argc == 19) {
        const std::string dt = argv[2];
        if (dt == "f32") return sep<float>(argv + 3);
        if (dt == "f64") return sep<double>(argv + 3);
    }
    if (op == "image" && argc == 17) {
        const std::string dt = argv[2];
        if (dt == "f32") return image<float>(argv + 3);
        if (dt == "f64") return image<double>(argv + 3);
        if (dt == "u64") return image<unsigned long long>(argv + 3);
    }
    std::fprintf(stderr, "border_harness: bad arguments (see the header comment)\n");
    return 2;
}
