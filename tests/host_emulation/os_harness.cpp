// os_harness.cpp: runs the overlap-save helper kernels of kernels/overlap_save.cuh on the host.
//   os_harness OP DTYPE GX GY GZ BLOCK P1 P2 ... FILE_IN FILE_INOUT
// OP gather: P = C L pad M N nseg            FILE_IN = x (C*L),        FILE_INOUT = shift (C*nseg int32), segs (C*nseg*N)
// OP rescale:P = C N nseg safe                FILE_IN = shift,          FILE_INOUT = segs
// OP cmul:   P = rows NF                      FILE_IN = H (NF complex), FILE_INOUT = X (rows*NF complex)
// OP scatter:P = C out_len M N nseg K safe    FILE_IN = Ys (C*nseg*N) shift tap_shift (1 int32),
//                                             FILE_INOUT = y (C*out_len)
// A shift file named "-" is a null pointer (no exponents, no scaling).
// DTYPE f32 | f64. Arrays are raw little-endian; FILE_INOUT is read first (the test poisons it with
// NaN) and rewritten after the launch. Buffers are 256-byte aligned, as CuPy's pool allocations are.
#include "cuda_shim.h"
#include "overlap_save.cuh"

#include <cstring>
#include <string>
#include <vector>

static void* load(const char* path, size_t bytes) {
    void* p = nullptr;  // exactly `bytes` (no rounding), so the sanitizer sees one element past the end
    if (posix_memalign(&p, 256, bytes ? bytes : 1) != 0) { std::fprintf(stderr, "out of memory\n"); std::exit(2); }
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(p, 1, bytes, f) != bytes) { std::fprintf(stderr, "cannot read %zu bytes of %s\n", bytes, path); std::exit(2); }
    std::fclose(f);
    return p;
}
static void save(const char* path, const void* p, size_t bytes) {
    FILE* f = std::fopen(path, "wb");
    if (!f || std::fwrite(p, 1, bytes, f) != bytes) { std::fprintf(stderr, "cannot write %s\n", path); std::exit(2); }
    std::fclose(f);
}

static int* load_shift(const char* path, size_t n) {
    return std::strcmp(path, "-") == 0 ? nullptr : (int*)load(path, sizeof(int) * n);
}

template <typename T, typename T2> static int run(const std::string& op, dim3 g, dim3 b, char** p, int np) {
    auto I = [&](int k) { return std::atoll(p[k]); };
    if (op == "gather" && np == 9) {
        int C = (int)I(0); long long L = I(1), pad = I(2), M = I(3); int N = (int)I(4); long long nseg = I(5);
        T* x = (T*)load(p[6], sizeof(T) * C * L);
        int* shift = load_shift(p[7], C * nseg);
        T* segs = (T*)load(p[8], sizeof(T) * C * nseg * N);
        emu_launch(g, b, [&] { os_gather_body<T>(x, segs, C, L, pad, M, N, nseg, shift); });
        if (shift) save(p[7], shift, sizeof(int) * C * nseg);
        save(p[8], segs, sizeof(T) * C * nseg * N);
        std::free(x); std::free(shift); std::free(segs);
        return 0;
    }
    if (op == "rescale" && np == 6) {
        int C = (int)I(0); int N = (int)I(1); long long nseg = I(2); int safe = (int)I(3);
        int* shift = load_shift(p[4], C * nseg);
        T* segs = (T*)load(p[5], sizeof(T) * C * nseg * N);
        emu_launch(g, b, [&] { os_rescale_body<T>(segs, shift, C, N, nseg, safe); });
        save(p[5], segs, sizeof(T) * C * nseg * N);
        std::free(shift); std::free(segs);
        return 0;
    }
    if (op == "cmul" && np == 4) {
        long long rows = I(0); int NF = (int)I(1);
        T2* H = (T2*)load(p[2], sizeof(T2) * NF);
        T2* X = (T2*)load(p[3], sizeof(T2) * rows * NF);
        emu_launch(g, b, [&] { os_cmul_body<T2>(X, H, rows, NF); });
        save(p[3], X, sizeof(T2) * rows * NF);
        std::free(H); std::free(X);
        return 0;
    }
    if (op == "scatter" && np == 11) {
        int C = (int)I(0); long long out_len = I(1), M = I(2); int N = (int)I(3); long long nseg = I(4);
        int K = (int)I(5), safe = (int)I(6);
        T* Ys = (T*)load(p[7], sizeof(T) * C * nseg * N);
        int* shift = load_shift(p[8], C * nseg);
        int* tap_shift = load_shift(p[9], 1);
        T* y = (T*)load(p[10], sizeof(T) * C * out_len);
        emu_launch(g, b, [&] { os_scatter_body<T>(Ys, y, C, out_len, M, N, nseg, K, shift, tap_shift, safe); });
        save(p[10], y, sizeof(T) * C * out_len);
        std::free(Ys); std::free(shift); std::free(tap_shift); std::free(y);
        return 0;
    }
    std::fprintf(stderr, "bad arguments for %s\n", op.c_str());
    return 2;
}

int main(int argc, char** argv) {
    if (argc < 7) { std::fprintf(stderr, "usage: os_harness OP DTYPE GX GY GZ BLOCK ...\n"); return 2; }
    std::string op = argv[1], dt = argv[2];
    dim3 g, b;
    g.x = (unsigned)std::atoi(argv[3]); g.y = (unsigned)std::atoi(argv[4]); g.z = (unsigned)std::atoi(argv[5]);
    b.x = (unsigned)std::atoi(argv[6]);
    if (dt == "f32") return run<float, float2>(op, g, b, argv + 7, argc - 7);
    if (dt == "f64") return run<double, double2>(op, g, b, argv + 7, argc - 7);
    std::fprintf(stderr, "bad dtype %s\n", dt.c_str());
    return 2;
}
