"""The spectral gate's elementwise stages on the GPU, each one fused kernel (``kernels/gate.cu``) over device arrays.

Every function here is the device form of a host rule in ``sigconv.engine.spectral.gate`` (the constants of the
rule come from there as arguments), and computes it in the input's precision (float32 or float64), so the cuda
and cpu gates differ only by rounding:

* :func:`frames`: windowed STFT frames ``x[c, t*H + k] * w[k]`` (one pass, no strided copy);
* :func:`power`: ``|S|^2 * scale``, averaged over the channels for a shared mask;
* :func:`box_time`: the running mean over frames of the non-stationary floor;
* :func:`masks`: cell dB against a threshold (per frequency, or from a moving floor), the sigmoid gate and the
  "strong" gate, in one pass;
* :func:`pad_edge`: the masks with their edge frames and bins repeated around them (``numpy.pad``'s "edge");
* :func:`apply_gain`: ``S * (1 - prop * (1 - max(mask, strong)))``;
* :func:`overlap_add`: weighted overlap-add of the inverse frames, window and normaliser included;
* :func:`hist_add`: the linearly binned histogram of cell dB (float64 atomics, no temporaries).

The kernels are templates over the precision and the index type; every instantiation (:data:`GATE_EXPRESSIONS`) is
compiled as one module, whatever the data, so that one binary serves every call. Index arithmetic is 32-bit when
every index fits (most chunks), else 64-bit. Inputs of shapes other than those documented raise ``ValueError``;
other memory layouts are copied to C order first (the gain's inputs may also be slices of frames). CuPy is imported
on first use.
"""

from __future__ import annotations

import numpy as np

from sigconv import _kernels

__all__ = ["frames", "power", "box_time", "masks", "pad_edge", "apply_gain", "overlap_add", "hist_add"]

SOURCE = "gate.cu"
#: The kernels of ``kernels/gate.cu``, one per stage: ``gate_<stage><T, IT>``.
_STAGES = ("frames", "power", "box_time", "mask_thr", "mask_floor", "gain", "ola", "hist", "pad_edge")
#: C types of the data (T) and of the indices (IT).
_CTYPES = {"float32": "float", "float64": "double"}
_ITYPES = {"int32": "int", "int64": "long long"}
#: Every instantiation the gate launches, compiled as one module (its cache key never depends on the data).
GATE_EXPRESSIONS = tuple(f"gate_{s}<{t}, {i}>" for s in _STAGES for t in _CTYPES.values() for i in _ITYPES.values())
#: Threads per block, and the most blocks of a launch (the kernels' grid-stride loops do the rest).
_BLOCK = 256
_GRID_MAX = 4 * 65535


def prebuilt_modules() -> list[dict]:
    """:func:`sigconv._kernels.module`'s arguments of the module here (see ``sigconv.backends.prebuilt_modules``):
    every instantiation of the gate's kernels, in one module."""
    return [dict(name=SOURCE, name_expressions=GATE_EXPRESSIONS)]


def _expr(stage: str, dtype, itype) -> str:
    """The name expression of ``stage`` for data of ``dtype`` and indices of ``itype``."""
    return f"gate_{stage}<{_CTYPES[np.dtype(dtype).name]}, {_ITYPES[np.dtype(itype).name]}>"


def _launch(stage: str, dtype, itype, items: int, args: tuple) -> None:
    """Run ``gate_<stage><T, IT>`` over ``items`` items (none: no launch). ``args`` are the kernel's parameters in
    order: cupy arrays for its pointers, NumPy scalars of exactly its T, IT and double for the rest."""
    if items <= 0:
        return
    fn = _kernels.module(SOURCE, name_expressions=GATE_EXPRESSIONS).get_function(_expr(stage, dtype, itype))
    fn((min(-(-items // _BLOCK), _GRID_MAX),), (_BLOCK,), args)


def _itype(*sizes):
    """int32 when every index of the job fits, else int64."""
    return np.int32 if max(int(s) for s in sizes) < (1 << 31) - 1 else np.int64


def _real(dtype, what: str) -> np.dtype:
    """``dtype`` if float32 or float64, else ``ValueError``."""
    dtype = np.dtype(dtype)
    if dtype.name not in _CTYPES:
        raise ValueError(f"{what} must be float32 or float64, got {dtype}")
    return dtype


def _spectra(S) -> np.dtype:
    """The real dtype of complex64 / complex128 spectra ``S`` (C, n, F), else ``ValueError``."""
    if S.ndim != 3 or S.dtype.name not in ("complex64", "complex128"):
        raise ValueError(f"S must be complex64 or complex128 of shape (C, n, F), got {S.dtype} {S.shape}")
    return np.dtype(np.float32 if S.dtype.name == "complex64" else np.float64)


def _cells(a, what: str):
    """``a`` as a C-contiguous (c, n, F) array of float32/float64, else ``ValueError``."""
    import cupy

    a = cupy.ascontiguousarray(a)
    if a.ndim != 3:
        raise ValueError(f"{what} must have shape (channels, frames, bins), got {a.shape}")
    _real(a.dtype, what)
    return a


def _rows(a):
    """(a, channel stride in elements) of a (c, n, F) array whose n*F cells of each channel lie contiguously (a
    C-contiguous array, or a slice of its frames) for gate_gain; any other layout is copied to C order first. One
    channel gets stride 0: the kernel reads it for every channel of S (broadcasting)."""
    import cupy

    _, n, F = a.shape
    isz = a.itemsize
    st = a.strides
    if not ((F <= 1 or st[2] == isz) and (n <= 1 or st[1] == F * isz) and st[0] >= 0 and st[0] % isz == 0):
        a = cupy.ascontiguousarray(a)
        st = a.strides
    return a, (st[0] // isz if a.shape[0] > 1 else 0)


def frames(xs, w, H: int, nfr: int):
    """(C, M) samples -> (C, nfr, N) frames times the window ``w`` (N,): frame t starts at sample t*H."""
    import cupy

    w = cupy.ascontiguousarray(w)
    if xs.ndim != 2 or w.ndim != 1:
        raise ValueError(f"frames takes samples (C, M) and a window (N,), got {xs.shape} and {w.shape}")
    isz = xs.itemsize
    if not ((xs.shape[1] <= 1 or xs.strides[1] == isz) and xs.strides[0] >= 0 and xs.strides[0] % isz == 0):
        xs = cupy.ascontiguousarray(xs)  # rows spaced apart (a slice of a wider buffer) are read in place
    ld = xs.strides[0] // isz if xs.shape[0] > 1 else xs.shape[1]
    dt = _real(xs.dtype, "xs")
    if w.dtype != dt:
        raise ValueError(f"the window must have the samples' dtype {dt}, got {w.dtype}")
    C, M = xs.shape
    N = int(w.shape[0])
    H, nfr = int(H), int(nfr)
    if H < 0 or nfr < 0 or (nfr and N and (nfr - 1) * H + N > M):
        raise ValueError(f"{nfr} frames of {N} samples every {H} need {(nfr - 1) * H + N} samples, got {M}")
    fr = cupy.empty((C, nfr, N), dt)
    it = _itype(fr.size, C * max(M, ld))
    _launch("frames", dt, it, fr.size, (xs, w, fr, it(fr.size), it(ld), it(H), it(nfr), it(N)))
    return fr


def power(S, scale: float, share: bool):
    """(C, nfr, F) spectra -> (Cm, nfr, F) power times ``scale``; with ``share``, the mean over the channels."""
    import cupy

    S = cupy.ascontiguousarray(S)
    real = _spectra(S)
    C, nfr, F = S.shape
    pw = cupy.empty((1 if share else C, nfr, F), real)
    it = _itype(S.size)
    _launch("power", real, it, pw.size, (S, pw, it(pw.size), it(nfr * F), it(C if share else 1), real.type(scale)))
    return pw


def masks(pw, *, thr=None, floor_power=None, offset=0.0, power_floor, slope_db, strong_db):
    """(raw, strong) sigmoid gates of the cells ``pw`` (Cm, n, F): ``thr`` (Cm, 1, F) dB, or a moving floor
    ``floor_power`` (like pw) whose dB plus ``offset`` is the threshold."""
    import cupy

    pw = _cells(pw, "pw")
    Cm, n, F = pw.shape
    t = pw.dtype.type
    raw, strong = cupy.empty(pw.shape, pw.dtype), cupy.empty(pw.shape, pw.dtype)
    tail = (t(1.0 / slope_db), t(strong_db if strong_db is not None else 0.0))
    it = _itype(pw.size)
    if thr is not None:
        thr = cupy.ascontiguousarray(thr.astype(pw.dtype, copy=False))
        if thr.shape != (Cm, 1, F):
            raise ValueError(f"thr must have shape {(Cm, 1, F)} (a threshold per channel and bin), got {thr.shape}")
        _launch("mask_thr", pw.dtype, it, pw.size,
                (pw, thr, raw, strong, it(pw.size), it(n * F), it(F), t(power_floor), *tail))
    elif floor_power is not None:
        fl = cupy.ascontiguousarray(floor_power.astype(pw.dtype, copy=False))
        if fl.shape != pw.shape:
            raise ValueError(f"floor_power must have the shape of pw {pw.shape}, got {fl.shape}")
        _launch("mask_floor", pw.dtype, it, pw.size,
                (pw, fl, raw, strong, it(pw.size), t(power_floor), t(offset), *tail))
    else:
        raise ValueError("masks needs a threshold thr or a floor floor_power")
    return raw, (strong if strong_db is not None else None)


def pad_edge(m, lo: int, hi: int, rf: int):
    """(Cm, n, F) masks -> (Cm, n + lo + hi, F + 2 rf): ``lo`` frames before and ``hi`` after, ``rf`` bins each side,
    each the nearest of m's (``numpy.pad(m, ((0, 0), (lo, hi), (rf, rf)), mode="edge")``); m may be a slice of
    frames."""
    import cupy

    if m.ndim != 3 or min(m.shape[1:]) < 1 or min(lo, hi, rf) < 0:
        raise ValueError(f"pad_edge takes masks (Cm, n, F) with n, F >= 1 and pads >= 0, got {m.shape}, "
                         f"{(lo, hi, rf)}")
    dt = _real(m.dtype, "m")
    m, sc = _rows(m)
    Cm, n, F = m.shape
    n2, F2 = n + int(lo) + int(hi), F + 2 * int(rf)
    out = cupy.empty((Cm, n2, F2), dt)
    it = _itype(out.size, m.size + (Cm - 1) * sc)
    _launch("pad_edge", dt, it, out.size, (m, out, it(out.size), it(sc if Cm > 1 else n * F), it(n), it(F), it(lo),
                                             it(rf), it(n2), it(F2)))
    return out


def apply_gain(S, m, strong, prop: float):
    """S (C, n, F) times ``1 - prop * (1 - max(m, strong))`` (m and strong: (Cm, n, F), broadcast over C; strong
    None: m alone)."""
    import cupy

    real = _spectra(S)
    C, n, F = S.shape
    strong = m if strong is None else strong
    m, strong = m.astype(real, copy=False), strong.astype(real, copy=False)
    for a, name in ((m, "m"), (strong, "strong")):
        if a.ndim != 3 or a.shape[1:] != (n, F) or a.shape[0] not in (1, C):
            raise ValueError(f"{name} must have shape ({C} or 1, {n}, {F}) against S {S.shape}, got {a.shape}")
    out = cupy.empty(S.shape, S.dtype)
    if out.size:
        cells = n * F
        (S, sS), (m, sM), (strong, sSt) = _rows(S), _rows(m), _rows(strong)
        it = _itype(out.size, *((a.shape[0] - 1) * s + cells for a, s in ((S, sS), (m, sM), (strong, sSt))))
        _launch("gain", real, it, out.size,
                (S, m, strong, out, it(out.size), it(cells), it(sS), it(sM), it(sSt), real.type(prop)))
    return out


def overlap_add(y, w, inv_wsum, lo: int, count: int):
    """Samples [lo, lo + count) of the weighted overlap-add of frames ``y`` (C, nt, N) (frame j at j*H, local
    to the first frame), each times the window ``w`` and the periodic normaliser ``inv_wsum`` (H,)."""
    import cupy

    y = _cells(y, "y")
    C, nt, N = y.shape
    w, inv_wsum = cupy.ascontiguousarray(w), cupy.ascontiguousarray(inv_wsum)
    if w.shape != (N,) or inv_wsum.ndim != 1 or inv_wsum.size < 1 or w.dtype != y.dtype or inv_wsum.dtype != y.dtype:
        raise ValueError(f"overlap_add takes a window ({N},) and a normaliser (H,) of dtype {y.dtype}, got "
                         f"{w.dtype} {w.shape} and {inv_wsum.dtype} {inv_wsum.shape}")
    lo, count = int(lo), int(count)
    if lo < 0 or count < 0:
        raise ValueError(f"overlap_add's samples start at lo >= 0 and number count >= 0, got {lo} and {count}")
    H = int(inv_wsum.shape[0])
    out = cupy.empty((C, count), y.dtype)
    it = _itype(y.size, out.size, lo + count)
    _launch("ola", y.dtype, it, out.size, (y, w, inv_wsum, out, it(out.size), it(nt), it(N), it(H), it(lo), it(count)))
    return out


def box_time(a, size: int):
    """Mean of ``a`` (Cm, n, F) over ``size`` frames centred on each (``size // 2`` before), the edge frames
    repeated: SciPy's ``uniform_filter1d(a, size, axis=1, mode="nearest")``."""
    import cupy

    a = _cells(a, "a")
    size = int(size)
    if size < 1:
        raise ValueError(f"box_time's window must be at least 1 frame, got {size}")
    out = cupy.empty(a.shape, a.dtype)
    it = _itype(a.size, a.shape[1] + size)
    _launch("box_time", a.dtype, it, a.size, (a, out, it(a.size), it(a.shape[1]), it(a.shape[2]), it(size)))
    return out


def hist_add(hist, pw, *, power_floor, lo_db, step_db, bins):
    """Count the dB of the cells ``pw`` (Cm, n, F) into ``hist`` (flat float64, bin-major), linearly binned as
    :func:`sigconv.engine.spectral.noise.hist_add` does on the host."""
    import cupy

    pw = _cells(pw, "pw")
    Cm, n, F = pw.shape
    bins = int(bins)
    if (not isinstance(hist, cupy.ndarray) or hist.dtype != np.float64 or not hist.flags.c_contiguous
            or bins < 2 or hist.size != bins * Cm * F):
        raise ValueError(f"hist must be a C-contiguous float64 cupy array of {bins} bins x {Cm * F} rows (bins >= 2), "
                         f"got {type(hist).__name__} {getattr(hist, 'dtype', '')} {getattr(hist, 'shape', '')}")
    it = _itype(pw.size, n * F, hist.size)
    _launch("hist", pw.dtype, it, pw.size, (pw, hist, it(pw.size), it(F), it(n * F), it(Cm * F),
                                            pw.dtype.type(power_floor), np.float64(lo_db), np.float64(1.0 / step_db),
                                            np.float64(bins - 1)))
