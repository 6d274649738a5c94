// border_harness.cpp: runs kernels/conv2d.cu's boundary pass (conv2d_border, after conv2d_naive's zero-padded
// pass) on the host, and its two index helpers from conv2d_common.cuh on their own.
//   border_harness enum Ho Wo top bot left right count FILE_RC      int32 (r, c) of border elements 0..count-1
//   border_harness extend n boundary lo hi FILE                     int32 c2d_extend(i, n, boundary), lo <= i < hi
//   border_harness run DTYPE NGX NGY NBX NBY GX BX  H W kH kW py px Ho Wo top bot left right count boundary FILL
//                      FILE_X FILE_W FILE_Y G
//   border_harness image DTYPE GX GY BX BY  H W He We oy ox boundary FILL  FILE_X FILE_XE
// image: conv2d_extend<T> on grid GX x GY of BX x BY blocks (the launcher's cuda2d.launch_extend), x (H, W) ->
// xe (He, We), FILE_XE read first (poisoned) and rewritten.
//   border_harness sep DTYPE BX BY  H W kH kW py px Ho Wo boundary FILL  FILE_X FILE_U FILE_V FILE_Y
// sep: separable's boundary passes, conv2d_sep_rows_ext<T> then conv2d_sep_cols<T> on BX x BY blocks over the
// scratch's Ho + kH - 1 rows and the output's Ho rows (the launcher's grids), w = u v^T; DTYPE f32 or f64.
// run: DTYPE f32, f64 or u64; conv2d_naive<T> on grid NGX x NGY of NBX x NBY blocks (NGX 0: skipped), then
// conv2d_border<T> on GX blocks of BX threads with G lanes per border element (the launcher's cuda2d.border_grid
// and border_lanes). Arrays raw, 256-byte aligned
// and exactly as long as the data; FILE_Y is read first (poisoned by the test) and rewritten after the launch.
#include "cuda_shim_threads.h"
#include "conv2d.cu"
#include "harness_io.h"

#include <string>

// The shared-memory kernels of conv2d.cu (not run here) refer to these; the border pass uses none.
alignas(256) unsigned char smem_raw[16];
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

template <typename T> static int run(char** a) {
    auto I = [&](int k) { return std::atoi(a[k]); };
    dim3 ng, nb, g, b;
    ng.x = I(0); ng.y = I(1); nb.x = I(2); nb.y = I(3);
    g.x = I(4); b.x = I(5);
    const int H = I(6), W = I(7), kH = I(8), kW = I(9), py = I(10), px = I(11), Ho = I(12), Wo = I(13);
    const int top = I(14), bot = I(15), left = I(16), right = I(17);
    const i64 count = std::atoll(a[18]);
    const int boundary = I(19);
    const T fill = parse_fill<T>(a[20]);
    T* x = load<T>(a[21], (size_t)H * W);
    T* w = load<T>(a[22], (size_t)kH * kW);
    T* y = load<T>(a[23], (size_t)Ho * Wo);
    const int G = I(24);
    if (ng.x) emu_launch(ng, nb, [&] { conv2d_naive<T>(x, w, x, y, 1, 1, H, W, 1, kH, kW, 1, 1, py, px, Ho, Wo, 0); });
    // one host thread per device thread (the pass's lanes meet in xor shuffles)
    emu_launch_threads(g, b, smem, sizeof(smem), 0, [&] {
        conv2d_border<T>(x, w, y, H, W, kH, kW, py, px, Ho, Wo, top, bot, left, right, count, boundary, fill, G);
    });
    const int rc = save(a[23], y, (size_t)Ho * Wo * sizeof(T));
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
    if (op == "enum" && argc == 10) {
        const i64 count = std::atoll(argv[8]);
        std::vector<int> rc(2 * (size_t)count);
        for (i64 e = 0; e < count; ++e) c2d_border_rc(e, I(2), I(3), I(4), I(5), I(6), I(7), rc[2 * e], rc[2 * e + 1]);
        return save(argv[9], rc.data(), rc.size() * sizeof(int));
    }
    if (op == "extend" && argc == 7) {
        const int n = I(2), boundary = I(3);
        const i64 lo = std::atoll(argv[4]), hi = std::atoll(argv[5]);
        std::vector<int> out;
        for (i64 i = lo; i < hi; ++i) out.push_back(c2d_extend(i, n, boundary));
        return save(argv[6], out.data(), out.size() * sizeof(int));
    }
    if (op == "run" && argc == 28) {
        const std::string dt = argv[2];
        if (dt == "f32") return run<float>(argv + 3);
        if (dt == "f64") return run<double>(argv + 3);
        if (dt == "u64") return run<unsigned long long>(argv + 3);
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
