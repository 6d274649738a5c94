"""The spectral gate's elementwise stages on the GPU, each one fused kernel over device arrays.

Every function here is the device form of a host rule in ``sigconv.engine.spectral.gate`` (the constants of the
rule come from there as arguments), and computes it in the input's precision (float32 or float64), so the cuda
and cpu gates differ only by rounding:

* :func:`frames`: windowed STFT frames ``x[c, t*H + k] * w[k]`` (one pass, no strided copy);
* :func:`power`: ``|S|^2 * scale``, averaged over the channels for a shared mask;
* :func:`box_time`: the running mean over frames of the non-stationary floor;
* :func:`masks`: cell dB against a threshold (per frequency, or from a moving floor), the sigmoid gate and the
  "strong" gate, in one pass;
* :func:`apply_gain`: ``S * (1 - prop * (1 - max(mask, strong)))``;
* :func:`overlap_add`: weighted overlap-add of the inverse frames, window and normaliser included;
* :func:`hist_add`: the linearly binned histogram of cell dB (float64 atomics, no temporaries).

Index arithmetic is 32-bit when every index fits (most chunks), else 64-bit. CuPy is imported on first use.
"""

from __future__ import annotations

import numpy as np

__all__ = ["frames", "power", "box_time", "masks", "apply_gain", "overlap_add", "hist_add"]

_K: dict = {}

# the sigmoid of the gate, shared by the two mask kernels: 1 / (1 + exp(clip(-e / slope, -60, 60)))
_SIGMOID = """
template <typename T> __device__ __forceinline__ T sigconv_sig(T e, T inv_slope) {
    T z = -e * inv_slope;
    z = z < (T)-60 ? (T)-60 : (z > (T)60 ? (T)60 : z);
    return (T)1 / ((T)1 + exp(z));
}
"""


def _kernel(name, itype=np.int32):
    """The kernel ``name`` with indices of ``itype`` (int32 or int64; ``IT`` in its source)."""
    key = (name, np.dtype(itype).name)
    k = _K.get(key)
    if k is not None:
        return k
    import cupy

    ptype = np.dtype(itype).name
    ctype = "int" if ptype == "int32" else "long long"

    def ElementwiseKernel(params, outs, body, kname, **kw):  # noqa: N802 (CuPy's name)
        return cupy.ElementwiseKernel(params.replace("IT ", f"{ptype} "), outs,
                                      f"typedef {ctype} IT; " + body, f"{kname}_{ptype}", **kw)

    if name == "frames":
        k = ElementwiseKernel(
            "raw T x, raw T w, IT M, IT H, IT nfr, IT N", "T fr",
            "IT k = (IT)i % N; IT r = (IT)i / N; IT t = r % nfr; IT c = r / nfr; fr = x[c * M + t * H + k] * w[k];",
            "sigconv_gate_frames")
    elif name == "power":
        k = ElementwiseKernel(
            "raw C S, IT n, IT chans, T scale", "T pw",
            "T acc = 0; for (IT c = 0; c < chans; ++c) { C s = S[c * n + (IT)i]; "
            "acc += (s.real() * s.real() + s.imag() * s.imag()) * scale; } pw = chans == 1 ? acc : acc / (T)chans;",
            "sigconv_gate_power")
    elif name == "mask_thr":
        k = ElementwiseKernel(
            "T pw, T thr, T pfloor, T inv_slope, T strong_db", "T raw, T strong",
            "T e = (T)10 * log10(pw + pfloor) - thr; raw = sigconv_sig(e, inv_slope); "
            "strong = sigconv_sig(e - strong_db, inv_slope);",
            "sigconv_gate_mask_thr", preamble=_SIGMOID)
    elif name == "mask_floor":
        k = ElementwiseKernel(
            "T pw, T fl, T pfloor, T offset, T inv_slope, T strong_db", "T raw, T strong",
            "T thr = (T)10 * log10(fl + pfloor) + offset; T e = (T)10 * log10(pw + pfloor) - thr; "
            "raw = sigconv_sig(e, inv_slope); strong = sigconv_sig(e - strong_db, inv_slope);",
            "sigconv_gate_mask_floor", preamble=_SIGMOID)
    elif name == "gain":
        k = ElementwiseKernel(
            "C S, T m, T st, T prop", "C out",
            "T g = m > st ? m : st; if (prop != (T)1) g = (T)1 - prop * ((T)1 - g); out = S * g;",
            "sigconv_gate_gain")
    elif name == "ola":
        k = ElementwiseKernel(
            "raw T y, raw T w, raw T iw, IT nt, IT N, IT H, IT lo, IT cnt", "T out",
            """
            IT c = (IT)i / cnt; IT k = lo + (IT)i % cnt;
            IT jhi = k / H; if (jhi > nt - 1) jhi = nt - 1;
            IT jlo = k >= N ? (k - N) / H + 1 : 0;
            T acc = 0;
            for (IT j = jhi; j >= jlo; --j) { IT r = k - j * H; acc += y[(c * nt + j) * N + r] * w[r]; }
            out = acc * iw[k % H];
            """,
            "sigconv_gate_ola")
    elif name == "box_time":
        k = ElementwiseKernel(
            "raw T a, IT n, IT F, IT size", "T out",
            """
            IT f = (IT)i % F; IT r = (IT)i / F; IT t = r % n; IT base = (r - t) * F + f;
            T acc = 0;
            for (IT j = t - size / 2; j < t - size / 2 + size; ++j) {
                IT u = j < 0 ? 0 : (j >= n ? n - 1 : j); acc += a[base + u * F];
            }
            out = acc / (T)size;
            """,
            "sigconv_gate_box_time")
    elif name == "hist":
        k = ElementwiseKernel(
            "T pw, IT F, IT nF, IT CF, T pfloor, float64 lo_db, float64 inv_step, float64 top", "raw float64 hist",
            """
            double d = (double)((T)10 * log10(pw + pfloor));
            double p = (d - lo_db) * inv_step;
            p = p < 0.0 ? 0.0 : (p > top ? top : p);
            double j = floor(p); if (j > top - 1.0) j = top - 1.0;
            double fr = p - j;
            IT c = (IT)i / nF; IT f = (IT)i % F;
            long long b = (long long)j * CF + (long long)c * F + f;  // bin-major, as the host's
            atomicAdd(&hist[b], 1.0 - fr);
            atomicAdd(&hist[b + CF], fr);
            """,
            "sigconv_gate_hist")
    else:  # pragma: no cover
        raise KeyError(name)
    _K[key] = k
    return k


def _itype(*sizes):
    """int32 when every index of the job fits, else int64."""
    return np.int32 if max(int(s) for s in sizes) < (1 << 31) - 1 else np.int64


def frames(xs, w, H: int, nfr: int):
    """(C, M) samples -> (C, nfr, N) frames times the window ``w`` (N,): frame t starts at sample t*H."""
    import cupy

    C, M = xs.shape
    N = int(w.shape[0])
    xs = cupy.ascontiguousarray(xs)
    fr = cupy.empty((C, nfr, N), xs.dtype)
    if fr.size:
        it = _itype(fr.size, C * M)
        _kernel("frames", it)(xs, w, it(M), it(H), it(nfr), it(N), fr)
    return fr


def power(S, scale: float, share: bool):
    """(C, nfr, F) spectra -> (Cm, nfr, F) power times ``scale``; with ``share``, the mean over the channels."""
    import cupy

    S = cupy.ascontiguousarray(S)
    C, nfr, F = S.shape
    real = S.real.dtype
    pw = cupy.empty((1 if share else C, nfr, F), real)
    if pw.size:
        it = _itype(S.size)
        _kernel("power", it)(S, it(nfr * F), it(C if share else 1), real.type(scale), pw)
    return pw


def masks(pw, *, thr=None, floor_power=None, offset=0.0, power_floor, slope_db, strong_db):
    """(raw, strong) sigmoid gates of the cells ``pw`` (Cm, n, F): ``thr`` (Cm, 1, F) dB, or a moving floor
    ``floor_power`` (like pw) whose dB plus ``offset`` is the threshold."""
    t = pw.dtype.type
    args = (t(power_floor),)
    tail = (t(1.0 / slope_db), t(strong_db if strong_db is not None else 0.0))
    if thr is not None:
        raw, strong = _kernel("mask_thr")(pw, thr.astype(pw.dtype, copy=False), *args, *tail)
    else:
        raw, strong = _kernel("mask_floor")(pw, floor_power, *args, t(offset), *tail)
    return raw, (strong if strong_db is not None else None)


def apply_gain(S, m, strong, prop: float):
    """S (C, n, F) times ``1 - prop * (1 - max(m, strong))`` (m and strong: (Cm, n, F), broadcast over C; strong
    None: m alone)."""
    import cupy

    real = S.real.dtype
    strong = m if strong is None else strong
    out = cupy.empty(S.shape, S.dtype)
    _kernel("gain")(S, m.astype(real, copy=False), strong.astype(real, copy=False), real.type(prop), out)
    return out


def overlap_add(y, w, inv_wsum, lo: int, count: int):
    """Samples [lo, lo + count) of the weighted overlap-add of frames ``y`` (C, nt, N) (frame j at j*H, local
    to the first frame), each times the window ``w`` and the periodic normaliser ``inv_wsum`` (H,)."""
    import cupy

    y = cupy.ascontiguousarray(y)
    C, nt, N = y.shape
    H = int(inv_wsum.shape[0])
    out = cupy.empty((C, count), y.dtype)
    if out.size:
        it = _itype(y.size, out.size, lo + count)
        _kernel("ola", it)(y, w, inv_wsum, it(nt), it(N), it(H), it(lo), it(count), out)
    return out


def box_time(a, size: int):
    """Mean of ``a`` (Cm, n, F) over ``size`` frames centred on each (``size // 2`` before), the edge frames
    repeated: SciPy's ``uniform_filter1d(a, size, axis=1, mode="nearest")``."""
    import cupy

    a = cupy.ascontiguousarray(a)
    out = cupy.empty_like(a)
    if a.size:
        it = _itype(a.size)
        _kernel("box_time", it)(a, it(a.shape[1]), it(a.shape[2]), it(size), out)
    return out


def hist_add(hist, pw, *, power_floor, lo_db, step_db, bins):
    """Count the dB of the cells ``pw`` (Cm, n, F) into ``hist`` (flat float64, bin-major), linearly binned as
    :func:`sigconv.engine.spectral.noise.hist_add` does on the host."""
    import cupy

    pw = cupy.ascontiguousarray(pw)
    Cm, n, F = pw.shape
    if pw.size:
        it = _itype(pw.size, n * F, hist.size)
        _kernel("hist", it)(pw, it(F), it(n * F), it(Cm * F), pw.dtype.type(power_floor), float(lo_db),
                            1.0 / step_db, float(bins - 1), hist)
