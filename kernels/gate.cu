// gate.cu: the spectral gate's elementwise stages (sigconv/backends/cuda_gate.py), one kernel per stage.
//
// Each kernel is the device form of a host rule in sigconv/engine/spectral/gate.py (HostOps) or noise.py, computed
// per element in T (float or double: the data's precision), with index arithmetic in IT (int when every index of the
// job fits, else long long). Kernels, in the order a chunk of the gate runs them:
//   gate_frames      fr[c, t, k] = x[c, t*H + k] * w[k]: windowed STFT frames (C, nfr, N) from samples (C, M)
//   gate_power       pw = |S|^2 * scale, averaged over `chans` channels (chans 1: one power per channel)
//   gate_box_time    mean over `size` frames centred on each, the edge frames repeated (uniform_filter1d, "nearest")
//   gate_mask_thr    sigmoid gate and "strong" gate of the cell dB against a threshold per (channel, frequency)
//   gate_mask_floor  the same against a moving floor: its dB plus an offset, one floor value per cell
//   gate_pad_edge    the raw masks with edge replication around them (numpy.pad mode "edge"), before the smoothing
//   gate_gain        S * (1 - prop * (1 - max(m, strong))); channel strides, so 0 broadcasts a shared mask
//   gate_ola         samples [lo, lo + cnt) of the weighted overlap-add of the inverse frames
//   gate_hist        the linearly binned histogram of cell dB (float64 atomics, bin-major as the host's)
// Spectra are float2 / double2 (real, imag), the layout of CuPy's complex64 / complex128. Every kernel is a 1-D
// grid-stride loop over its `items` outputs (cells, for gate_hist); the launcher caps the grid. The launcher
// compiles every instantiation gate_<stage><T, IT> (T float/double, IT int/long long) as one module: the
// name expressions of cuda_gate.GATE_EXPRESSIONS.
//
// Compile alone (checks, register and spill report; SIGCONV_NVCC_CHECK instantiates every kernel):
//   nvcc -std=c++17 -arch=sm_90 -cubin -Xptxas -v -DSIGCONV_NVCC_CHECK -o /dev/null kernels/gate.cu
#include "common.cuh"

// Grid-stride loop over [0, items). The counter is 64-bit whatever IT is, so i + stride cannot overflow an int
// when items is close to INT_MAX; the bodies do their index maths on (IT)i. Not unrolled: most threads run it once.
#define GATE_FOR(i, items)                                                                  \
    _Pragma("unroll 1")                                                                     \
    for (sc_i64 i = (sc_i64)blockIdx.x * blockDim.x + threadIdx.x; i < (sc_i64)(items);     \
         i += (sc_i64)blockDim.x * gridDim.x)

// The complex element of precision T: (real, imag) in .x, .y.
template <typename T> struct gate_cplx;
template <> struct gate_cplx<float> { typedef float2 type; };
template <> struct gate_cplx<double> { typedef double2 type; };

// The gate's sigmoid, shared by the two mask kernels: 1 / (1 + exp(clip(-e / slope, -60, 60))).
template <typename T> __device__ __forceinline__ T sigconv_sig(T e, T inv_slope) {
    T z = -e * inv_slope;
    z = z < (T)-60 ? (T)-60 : (z > (T)60 ? (T)60 : z);
    return (T)1 / ((T)1 + exp(z));
}

// ============================================================================ frames
// x (C, M), w (N,) -> fr (C, nfr, N); items = C * nfr * N. Frame t starts at sample t*H.
template <typename T, typename IT>
__global__ void gate_frames(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ fr, IT items, IT M,
                            IT H, IT nfr, IT N) {
    GATE_FOR(i, items) {
        IT k = (IT)i % N; IT r = (IT)i / N; IT t = r % nfr; IT c = r / nfr;  // i = (c * nfr + t) * N + k
        fr[i] = x[c * M + t * H + k] * w[k];
    }
}

// ============================================================================ power
// S (chans or more, n) complex -> pw (items,): cell i of channel c is S[c * n + i]. chans 1: pw has every
// channel's cells (items = C * n); chans C: their mean over the channels (items = n), summed in channel order.
template <typename T, typename IT>
__global__ void gate_power(const typename gate_cplx<T>::type* __restrict__ S, T* __restrict__ pw, IT items, IT n,
                           IT chans, T scale) {
    typedef typename gate_cplx<T>::type V2;
    GATE_FOR(i, items) {
        T acc = 0;
        for (IT c = 0; c < chans; ++c) {
            V2 s = S[c * n + (IT)i];
            acc += (s.x * s.x + s.y * s.y) * scale;
        }
        pw[i] = chans == 1 ? acc : acc / (T)chans;
    }
}

// ============================================================================ box_time
// a (Cm, n, F) -> out, the mean of frames [t - size/2, t - size/2 + size) of each cell, clamped to [0, n).
template <typename T, typename IT>
__global__ void gate_box_time(const T* __restrict__ a, T* __restrict__ out, IT items, IT n, IT F, IT size) {
    GATE_FOR(i, items) {
        IT f = (IT)i % F; IT r = (IT)i / F; IT t = r % n; IT base = (r - t) * F + f;  // base: frame 0 of the cell
        T acc = 0;
        for (IT j = t - size / 2; j < t - size / 2 + size; ++j) {
            IT u = j < 0 ? 0 : (j >= n ? n - 1 : j);  // edge frames repeated
            acc += a[base + u * F];
        }
        out[i] = acc / (T)size;
    }
}

// ============================================================================ masks
// pw (Cm, n, F), thr (Cm, 1, F) dB: nF = n * F cells per channel. e = cell dB - threshold; raw = sig(e),
// strong = sig(e - strong_db).
template <typename T, typename IT>
__global__ void gate_mask_thr(const T* __restrict__ pw, const T* __restrict__ thr, T* __restrict__ raw,
                              T* __restrict__ strong, IT items, IT nF, IT F, T pfloor, T inv_slope, T strong_db) {
    GATE_FOR(i, items) {
        const T th = thr[((IT)i / nF) * F + (IT)i % F];  // the threshold of the cell's channel and frequency
        T e = (T)10 * log10(pw[i] + pfloor) - th;
        raw[i] = sigconv_sig(e, inv_slope);
        strong[i] = sigconv_sig(e - strong_db, inv_slope);
    }
}

// pw and fl (Cm, n, F): the threshold of each cell is the dB of its floor plus offset.
template <typename T, typename IT>
__global__ void gate_mask_floor(const T* __restrict__ pw, const T* __restrict__ fl, T* __restrict__ raw,
                                T* __restrict__ strong, IT items, T pfloor, T offset, T inv_slope, T strong_db) {
    GATE_FOR(i, items) {
        T thr = (T)10 * log10(fl[i] + pfloor) + offset;
        T e = (T)10 * log10(pw[i] + pfloor) - thr;
        raw[i] = sigconv_sig(e, inv_slope);
        strong[i] = sigconv_sig(e - strong_db, inv_slope);
    }
}

// ============================================================================ pad_edge
// a (Cm, n, F), channel c's n*F cells contiguous from a + c * sc -> out (Cm, n + lo + hi, F + 2 rf), out[c, t, f] =
// a[c, clamp(t - lo, 0, n - 1), clamp(f - rf, 0, F - 1)]; items = Cm * n2 * F2 (n2 = n + lo + hi, F2 = F + 2 rf).
template <typename T, typename IT>
__global__ void gate_pad_edge(const T* __restrict__ a, T* __restrict__ out, IT items, IT sc, IT n, IT F, IT lo, IT rf,
                              IT n2, IT F2) {
    GATE_FOR(i, items) {
        IT f2 = (IT)i % F2; IT r = (IT)i / F2; IT t2 = r % n2; IT c = r / n2;  // i = (c * n2 + t2) * F2 + f2
        IT t = t2 - lo; t = t < 0 ? 0 : (t >= n ? n - 1 : t);
        IT f = f2 - rf; f = f < 0 ? 0 : (f >= F ? F - 1 : f);
        out[i] = a[c * sc + t * F + f];
    }
}

// ============================================================================ gain
// out (C, cells) = S * g, g = max(m, st) (then 1 - prop * (1 - g) unless prop is 1). Each input holds the `cells`
// cells of channel c contiguously from c * (its channel stride): a slice of frames keeps its array's stride, and a
// one-channel mask has stride 0 (shared by every channel of S).
template <typename T, typename IT>
__global__ void gate_gain(const typename gate_cplx<T>::type* __restrict__ S, const T* __restrict__ m,
                          const T* __restrict__ st, typename gate_cplx<T>::type* __restrict__ out, IT items,
                          IT cells, IT sS, IT sM, IT sSt, T prop) {
    typedef typename gate_cplx<T>::type V2;
    GATE_FOR(i, items) {
        IT c = (IT)i / cells; IT r = (IT)i - c * cells;  // channel, cell within it
        T mv = m[c * sM + r]; T sv = st[c * sSt + r];
        T g = mv > sv ? mv : sv;
        if (prop != (T)1) g = (T)1 - prop * ((T)1 - g);
        V2 s = S[c * sS + r];
        V2 o;
        o.x = s.x * g;
        o.y = s.y * g;
        out[i] = o;
    }
}

// ============================================================================ overlap-add
// y (C, nt, N) frames (frame j at local sample j*H), w (N,), iw (H,) -> out (C, cnt): local sample k = lo + i % cnt
// sums y[c, j, k - j*H] * w[k - j*H] over the frames that cover it, last frame first, then times iw[k % H].
template <typename T, typename IT>
__global__ void gate_ola(const T* __restrict__ y, const T* __restrict__ w, const T* __restrict__ iw,
                         T* __restrict__ out, IT items, IT nt, IT N, IT H, IT lo, IT cnt) {
    GATE_FOR(i, items) {
        IT c = (IT)i / cnt; IT k = lo + (IT)i % cnt;
        IT jhi = k / H; if (jhi > nt - 1) jhi = nt - 1;  // last frame starting at or before k
        IT jlo = k >= N ? (k - N) / H + 1 : 0;           // first frame ending after k
        T acc = 0;
        for (IT j = jhi; j >= jlo; --j) {
            IT r = k - j * H;
            acc += y[(c * nt + j) * N + r] * w[r];
        }
        out[i] = acc * iw[k % H];
    }
}

// ============================================================================ histogram
// pw (Cm, n, F) cells (items = Cm * n * F, nF = n * F, CF = Cm * F rows) -> hist (bins * CF,) float64, bin-major:
// grid point j of row c*F + f at j * CF + c*F + f. A cell at grid position p = (dB - lo_db) * inv_step, clipped to
// [0, top], adds 1 - (p - j) at j = floor(p) (at most top - 1) and p - j at j + 1 (noise.hist_add's rule).
template <typename T, typename IT>
__global__ void gate_hist(const T* __restrict__ pw, double* __restrict__ hist, IT items, IT F, IT nF, IT CF,
                          T pfloor, double lo_db, double inv_step, double top) {
    GATE_FOR(i, items) {
        double d = (double)((T)10 * log10(pw[i] + pfloor));  // the cell's dB in T, binned in double
        double p = (d - lo_db) * inv_step;
        p = p < 0.0 ? 0.0 : (p > top ? top : p);
        double j = floor(p); if (j > top - 1.0) j = top - 1.0;
        double fr = p - j;
        IT c = (IT)i / nF; IT f = (IT)i % F;
        long long b = (long long)j * CF + (long long)c * F + f;
        atomicAdd(&hist[b], 1.0 - fr);
        atomicAdd(&hist[b + CF], fr);
    }
}

#ifdef SIGCONV_NVCC_CHECK
// Every instantiation the launcher compiles (cuda_gate.GATE_EXPRESSIONS), referenced so that nvcc emits them.
#define GATE_REFS(T, IT)                                                                                   \
    (void*)&gate_frames<T, IT>, (void*)&gate_power<T, IT>, (void*)&gate_box_time<T, IT>,                   \
        (void*)&gate_mask_thr<T, IT>, (void*)&gate_mask_floor<T, IT>, (void*)&gate_gain<T, IT>,            \
        (void*)&gate_ola<T, IT>, (void*)&gate_hist<T, IT>, (void*)&gate_pad_edge<T, IT>
void* gate_nvcc_check(int k) {
    static void* const refs[] = {GATE_REFS(float, int), GATE_REFS(float, long long), GATE_REFS(double, int),
                                 GATE_REFS(double, long long)};
    return refs[k];
}
#endif
