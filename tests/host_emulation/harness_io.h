// harness_io.h: raw array files of the host harnesses (the tests write them with numpy's tofile and read the
// results back with fromfile).
#pragma once
#include <cstdio>
#include <cstdlib>
#include <limits>

// n elements of T from `path`, OFF elements after a 256-byte boundary (as a cupy allocation would be; OFF > 0: a
// misaligned view); the OFF elements before them hold NaN (a kernel that reads x[-1] gets NaN out) and the allocation
// ends exactly at the last element (AddressSanitizer's redzone catches any read past it). Exits 2 when it cannot.
// Free with std::free(p - off).
template <typename T> static T* load(const char* path, size_t n, size_t off = 0) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, (n + off) * sizeof(T) + (n + off == 0)) != 0) std::exit(2);
    T* a = static_cast<T*>(p);
    for (size_t i = 0; i < off; ++i) a[i] = std::numeric_limits<T>::quiet_NaN();
    FILE* f = std::fopen(path, "rb");
    if (!f || std::fread(a + off, sizeof(T), n, f) != n) { std::fprintf(stderr, "cannot read %s\n", path); std::exit(2); }
    std::fclose(f);
    return a + off;
}
