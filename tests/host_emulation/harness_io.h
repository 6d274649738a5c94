// harness_io.h: raw array files of the host harnesses (the tests write them with numpy's tofile and read the
// results back with fromfile).
#pragma once
#include <cstdio>
#include <cstdlib>

// n elements of T from `path`, 256-byte aligned (as a cupy allocation would be); exits 2 when it cannot.
template <typename T> static T* load(const char* path, size_t n) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, n * sizeof(T) + (n == 0)) != 0) std::exit(2);
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(p, sizeof(T), n, f) != n) { std::fprintf(stderr, "cannot read %s\n", path); std::exit(2); }
    std::fclose(f);
    return static_cast<T*>(p);
}
