"""Spectral-gating denoiser (issue 5): STFT, a noise profile per frequency, a gate mask smoothed by
sigconv's own 2-D kernels, inverse STFT; streamed exactly over long files.

Geometry (one frame grid for the array function, the file engine and the statistics pass):

* periodic Hann window ``w`` of ``n_fft`` samples, hop ``H <= n_fft/2``;
* frame ``t`` covers samples ``[s_t, s_t + n_fft)`` with ``s_t = t*H - P`` and
  ``P = (ceil(n_fft/H) - 1) * H``: frame 0 is the first frame that overlaps sample 0, frame
  ``T - 1 = ceil((L + P)/H) - 1`` the last that overlaps sample ``L - 1``; samples outside ``[0, L)`` are zero;
* synthesis: weighted overlap-add of ``w * irfft(gain * S)`` divided by ``sum_t w[n - s_t]^2``, which is the same
  periodic pattern of ``(n + P) mod H`` at every sample of ``[0, L)`` (no frame outside ``[0, T)`` touches the
  signal), so with the gate open the output equals the input up to rounding.

Gate: the power of each cell, in dB (normalised so that a full-scale sine reads about 0 dB), against a threshold
per frequency ``thr = noise_mean + n_std * noise_std``:

* stationary, with a noise clip (or a range of the input): mean and std of the clip's cell dB, as noisereduce;
* stationary, estimated from the input: a low quantile (:data:`EST_QUANTILE`) of each frequency's cell dB over the
  whole signal (a histogram per frequency, so a streaming pass gives the same counts), turned into a noise power by
  the quantile of an exponential distribution (the power of Gaussian noise in one cell), and the dB mean/std of that
  Rayleigh model (:data:`RAYLEIGH_MEAN_DB`, :data:`RAYLEIGH_STD_DB`). The histogram is linearly binned (a cell
  splits its count between the two nearest grid points) and the quantile is read by linear interpolation, so it
  moves continuously with the cells' dB: the cpu and cuda FFTs round differently, and with hard bin edges a cell
  that crosses one could move a frequency's threshold by a whole bin (0.1 dB) between backends;
* non-stationary: a moving noise floor per cell: power averaged over :data:`NS_AVG_MS`, then the minimum over
  +-:data:`NS_WINDOW_S` (minimum statistics, bias-corrected by a calibration on white noise through the same STFT),
  with the Rayleigh model's mean/std. Its lookahead is bounded, so streaming is exact.

The mask ``sigmoid((dB - thr) / SLOPE_DB)`` is smoothed by a separable kernel built from ``freq_smooth_hz`` (total
width in Hz) and ``time_smooth_ms`` (total width in ms): ``p`` passes of a box (p = 2: a triangle), each pass one
``sigconv.conv2d`` call (kernel at most 31 x 31) on the chosen backend; edges replicate the nearest mask value.
``gain = 1 - prop_decrease * (1 - mask)``.

Streaming (:class:`_Gate`): output samples ``[a, b)`` need the frames that overlap them, whose gains need raw masks
``r_s`` frames around (smoothing) and those need spectra ``r_f`` frames further (non-stationary floor). A chunk
computes exactly those frames from the samples it needs, so a chunk boundary changes nothing but rounding.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache
from pathlib import Path

import numpy as np

from sigconv._core.checks import LAST_AXIS, check_axis, check_orientation

__all__ = ["spectral_denoise", "SpectralFileFilter", "file_filter_factory"]

#: Power floor (relative to full scale) before taking dB: -160 dB.
POWER_FLOOR = 1e-16
#: Histogram of cell dB for the estimated statistics: range and step; grid point j is at LO + j * STEP dB.
HIST_LO_DB, HIST_HI_DB, HIST_STEP_DB = -160.0, 40.0, 0.1
HIST_BINS = int(round((HIST_HI_DB - HIST_LO_DB) / HIST_STEP_DB))
#: Quantile of each frequency's cell dB that estimates the noise level when no noise clip is given.
EST_QUANTILE = 0.2
#: Mean and std of 10*log10(E) for E ~ Exp(1): the dB of one STFT cell of Gaussian noise relative to its power.
RAYLEIGH_MEAN_DB = -10.0 * 0.5772156649015329 / math.log(10.0)
RAYLEIGH_STD_DB = 10.0 / math.log(10.0) * math.pi / math.sqrt(6.0)
#: Width (dB) of the sigmoid gate: mask = 1 / (1 + exp(-(dB - thr) / SLOPE_DB)).
SLOPE_DB = 1.0
#: Cells this many dB above the threshold stay open whatever the smoothing says (None: off): the smoothing
#: kernel averages, so a narrow harmonic (a few bins wide) would otherwise be diluted by the closed cells
#: around it; isolated noise cells reach this level with probability ~1e-7 (Rayleigh), so it adds no musical noise.
STRONG_DB = 6.0
#: Non-stationary floor: power averaged over this many ms (centred), then the minimum over +- this many seconds.
NS_AVG_MS = 50.0
NS_WINDOW_S = 1.0
#: Largest box side per smoothing pass (sigconv.conv2d takes kernels up to 31 x 31).
MAX_BOX = 31
#: Largest time smoothing half width in frames.
MAX_SMOOTH_FRAMES = 256
#: Samples per chunk of the array function (cpu, cuda) and frames per block of the file engine.
ARRAY_CHUNK = {"cpu": 1 << 20, "cuda": 1 << 23}
#: At most this many frame samples (STFT frames x n_fft x channels) per chunk: a small hop multiplies the
#: frames of a chunk of samples (hop 1 with n_fft 2048 would make a 1 M-sample chunk 16 GB of spectra), so
#: chunks shrink to keep memory bounded; the defaults (hop n_fft/4, up to 2 channels) stay within it.
FRAME_BUDGET = {"cpu": 1 << 23, "cuda": 1 << 26}
FILE_BLOCK = 1 << 19


# ------------------------------------------------------------------------------------------ helpers


def _xp_of(backend):
    if backend == "cuda":
        import cupy

        return cupy
    return np


def _fft(backend):
    if backend == "cuda":
        import cupy.fft

        return cupy.fft
    import scipy.fft

    return scipy.fft


def sliding_min(xp, a, size: int, axis: int):
    """``scipy.ndimage.minimum_filter1d(a, size, axis, mode="nearest")``, exactly, by log-step doubling:
    about log2(size) elementwise minimums over slices along ``axis`` (contiguous rows stay contiguous)
    instead of ``size`` comparisons per element, which is what cupyx's filter does (a 189-frame window
    on an hour of 48 kHz audio: 65 G comparisons against 8 passes). Used on the cuda backend."""
    size = int(size)
    if size <= 1:
        return a.copy()
    nd = a.ndim
    ax = axis % nd

    def sl(s):
        idx = [slice(None)] * nd
        idx[ax] = s
        return tuple(idx)

    left = size // 2  # SciPy's centring: window [i - size//2, i + size - 1 - size//2]
    n = a.shape[ax]
    widths = [(0, 0)] * nd
    widths[ax] = (left, size - 1 - left)
    p = xp.pad(a, widths, mode="edge")  # n + size - 1 along ax
    span = 1
    while 2 * span <= size:  # p[i] = min of the padded input over [i, i + 2*span)
        p = xp.minimum(p[sl(slice(None, -span))], p[sl(slice(span, None))])
        span *= 2
    return xp.minimum(p[sl(slice(0, n))], p[sl(slice(size - span, size - span + n))])


def _ndimage(backend):
    if backend == "cuda":
        import cupyx.scipy.ndimage

        return cupyx.scipy.ndimage
    import scipy.ndimage

    return scipy.ndimage


def _check_real(value, name, lo=None, hi=None, lo_open=False):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")
    v = float(value)
    if lo is not None and (v < lo or (lo_open and v == lo)):
        rng = f"> {lo:g}" if lo_open else f">= {lo:g}"
        if hi is not None:
            rng = f"in ({lo:g}, {hi:g}]" if lo_open else f"in [{lo:g}, {hi:g}]"
        raise ValueError(f"{name} must be {rng}, got {value!r}")
    if hi is not None and v > hi:
        raise ValueError(f"{name} must be in [{lo:g}, {hi:g}], got {value!r}")
    return v


def _check_int(value, name, lo, hi=None):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo or (hi is not None
                                                                                            and value > hi):
        rng = f"in [{lo}, {hi}]" if hi is not None else f">= {lo}"
        raise ValueError(f"{name} must be an integer {rng}, got {value!r}")
    return int(value)


@lru_cache(maxsize=32)
def _window(n_fft: int) -> np.ndarray:
    """Periodic Hann (float64)."""
    return 0.5 - 0.5 * np.cos(2.0 * np.pi * np.arange(n_fft) / n_fft)


def _smooth_plan(freq_smooth_hz, time_smooth_ms, fs, n_fft, hop):
    """(passes, box_t, box_f): the smoothing kernel is ``passes`` boxes of box_t frames x box_f bins (odd sides).

    The half widths (total width / 2) in frames and bins are split over the passes; two passes make a triangle,
    more (only when a half width exceeds 2 * 15) a smoother bell of the same support.
    """
    hf = min(n_fft // 2, int(round(freq_smooth_hz / 2.0 / (fs / n_fft))))  # beyond the band changes nothing
    ht = int(round(time_smooth_ms * 1e-3 * fs / 2.0 / hop))
    if ht > MAX_SMOOTH_FRAMES:
        limit = MAX_SMOOTH_FRAMES * 2.0 * hop / fs * 1e3
        raise ValueError(f"time_smooth_ms must be in [0, {limit:.6g}] for fs={fs:g} and hop={hop} "
                         f"(at most {MAX_SMOOTH_FRAMES} frames each side), got {time_smooth_ms!r}")
    half_box = (MAX_BOX - 1) // 2
    passes = max(2, -(-max(hf, ht) // half_box))
    kf, kt = int(round(hf / passes)), int(round(ht / passes))
    return passes, 2 * kt + 1, 2 * kf + 1


@lru_cache(maxsize=16)
def _ns_bias(n_fft: int, hop: int, avg: int, win: int) -> float:
    """Mean noise power / mean of the non-stationary floor (min over 2*win+1 of an avg-frame mean) on white noise
    through this STFT (deterministic seed). Divides out the minimum's downward bias."""
    rng = np.random.default_rng(12345)
    frames = max(8 * (2 * win + 1), 512)
    x = rng.standard_normal(frames * hop + n_fft)
    w = _window(n_fft)
    fr = np.lib.stride_tricks.as_strided(x, shape=(frames, n_fft), strides=(hop * 8, 8))
    pw = np.abs(np.fft.rfft(fr * w, axis=-1))[:, 1:-1] ** 2
    import scipy.ndimage as ndi

    sm = ndi.uniform_filter1d(pw, avg, axis=0, mode="nearest")
    fl = ndi.minimum_filter1d(sm, 2 * win + 1, axis=0, mode="nearest")
    core = slice(win + avg, frames - win - avg)
    return float(pw.mean() / fl[core].mean())


class _Gate:
    """The gate's parameters, statistics and chunk processor (backend-generic through ``xp``)."""

    def __init__(self, C, L, fs, *, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop,
                 share_mask, backend, variant, block, dtype):
        self.C, self.L, self.fs = int(C), int(L), float(fs)
        self.stationary, self.n_std, self.prop = bool(stationary), float(n_std), float(prop_decrease)
        self.N, self.H = int(n_fft), int(hop)
        self.P = (-(-self.N // self.H) - 1) * self.H
        self.T = -(-(self.L + self.P) // self.H)
        self.F = self.N // 2 + 1
        self.share = bool(share_mask) and self.C > 1
        self.Cm = 1 if self.share else self.C
        self.backend, self.variant, self.block = backend, variant, block
        self.dtype = np.dtype(dtype)
        self.xp = _xp_of(backend)
        self.fft = _fft(backend)
        w = _window(self.N)
        self.w = self.xp.asarray(w, dtype=self.dtype)
        # sum_t w[n - s_t]^2 depends on (n + P) mod H only (see the module docstring)
        wsum = np.zeros(self.H)
        for r in range(0, self.N, self.H):
            seg = w[r:r + self.H] ** 2
            wsum[:seg.size] += seg
        self.wsum = wsum
        self.pscale = (2.0 / w.sum()) ** 2  # |S|^2 * pscale: a full-scale sine reads ~1 (0 dB)
        self.passes, self.box_t, self.box_f = _smooth_plan(freq_smooth_hz, time_smooth_ms, self.fs, self.N, self.H)
        self.r_s = self.passes * (self.box_t // 2)  # smoothing half-support in frames
        if self.stationary:
            self.avg, self.win, self.r_f = 0, 0, 0
        else:
            self.avg = max(1, int(round(NS_AVG_MS * 1e-3 * self.fs / self.H))) | 1  # odd
            self.win = max(1, int(round(NS_WINDOW_S * self.fs / self.H)))
            self.r_f = self.avg // 2 + self.win
            self.ns_offset = 10.0 * math.log10(_ns_bias(self.N, self.H, self.avg, self.win))
        self.R = self.r_s + self.r_f
        self.thr = None  # (Cm, 1, F) dB threshold (stationary), on the backend
        kern = np.ones((1, 1, self.box_t, self.box_f)) / (self.box_t * self.box_f)
        self.kern = kern.astype(self.dtype)
        self.kern_t = (np.ones((1, 1, self.box_t, 1)) / self.box_t).astype(self.dtype)
        self.kern_f = (np.ones((1, 1, 1, self.box_f)) / self.box_f).astype(self.dtype)

    # ---------------------------------------------------------------- frames

    def s(self, t):
        return t * self.H - self.P

    def frame_power(self, xs, nfr):
        """xs: (C, (nfr-1)*H + N) samples on the backend -> (spectra (C, nfr, F), power (Cm, nfr, F) normalised)."""
        xp = self.xp
        xs = xp.ascontiguousarray(xs)
        st = xs.strides
        fr = xp.lib.stride_tricks.as_strided(xs, shape=(self.C, nfr, self.N), strides=(st[0], self.H * st[1], st[1]))
        S = self.fft.rfft(fr * self.w, axis=-1)
        pw = S.real ** 2 + S.imag ** 2
        pw *= self.pscale
        if self.share:
            pw = pw.mean(axis=0, keepdims=True)
        return S, pw

    def chunk_samples(self, base: int) -> int:
        """Samples per chunk: ``base``, or fewer when its frames would exceed :data:`FRAME_BUDGET` (a multiple
        of the hop, at least one hop)."""
        frames = max(1, FRAME_BUDGET[self.backend] // (self.N * self.C))
        return int(max(self.H, min(int(base), frames * self.H)))

    def db(self, pw):
        return 10.0 * self.xp.log10(pw + POWER_FLOOR)

    # ---------------------------------------------------------------- statistics

    def stats_from_noise_chunks(self, chunks):
        """Mean/std of cell dB over the full frames of a noise signal, given as an iterator of (C, n) host arrays
        covering it in order. Sets the threshold."""
        xp = self.xp
        acc = np.zeros((2, self.Cm, self.F))
        count = 0
        carry = np.zeros((self.C, 0), self.dtype)
        for c in chunks:
            buf = np.concatenate([carry, np.asarray(c, self.dtype)], axis=1)
            nfr = (buf.shape[1] - self.N) // self.H + 1 if buf.shape[1] >= self.N else 0
            batch = max(1, self.chunk_samples(ARRAY_CHUNK[self.backend]) // self.H)  # frames at a time
            for f0 in range(0, nfr, batch):
                nb = min(batch, nfr - f0)
                s0 = f0 * self.H
                _, pw = self.frame_power(xp.asarray(buf[:, s0:s0 + (nb - 1) * self.H + self.N]), nb)
                d = self.db(pw).astype(xp.float64)
                acc[0] += _host(d.sum(axis=1))
                acc[1] += _host((d * d).sum(axis=1))
            count += nfr
            carry = buf[:, nfr * self.H:]
        if count == 0:
            return False
        mean = acc[0] / count
        std = np.sqrt(np.maximum(acc[1] / count - mean * mean, 0.0))
        self.set_threshold(mean + self.n_std * std)
        return True

    def hist_init(self):
        # float64 weights (linear binning); per (channel, frequency) they sum to the number of frames counted
        self.hist = self.xp.zeros(self.Cm * self.F * HIST_BINS, dtype=self.xp.float64)

    def hist_add(self, get, f0, f1):
        """Count the cell dB of frames [f0, f1) into the per-(channel, frequency) histogram, linearly binned: a cell
        at grid position p (in steps from HIST_LO_DB, clipped to the grid) adds 1 - (p - j) at j = floor(p) and
        p - j at j + 1, so the counts are continuous in p (no hard bin edge to cross)."""
        xp = self.xp
        nfr = f1 - f0
        _, pw = self.frame_power(get(self.s(f0), self.s(f1 - 1) + self.N), nfr)
        p = (self.db(pw).astype(xp.float64) - HIST_LO_DB) * (1.0 / HIST_STEP_DB)
        p = xp.clip(p, 0.0, HIST_BINS - 1.0)
        j = xp.minimum(xp.floor(p), HIST_BINS - 2.0)  # p = HIST_BINS - 1 goes to (j, j+1) with weight 1 at j+1
        frac = (p - j).ravel()
        base = (xp.arange(self.Cm)[:, None, None] * self.F + xp.arange(self.F)[None, None, :]) * HIST_BINS
        idx = (j.astype(xp.int64) + base).ravel()  # (Cm, nfr, F) -> flat bin of grid point j
        self.hist += xp.bincount(idx, weights=1.0 - frac, minlength=self.hist.size)
        self.hist += xp.bincount(idx + 1, weights=frac, minlength=self.hist.size)

    def hist_finish(self):
        self.set_threshold(self.noise_db_from_hist(_host(self.hist).reshape(self.Cm, self.F, HIST_BINS)))
        del self.hist

    def noise_db_from_hist(self, h):
        """(Cm, F) noise dB (the threshold) from linearly binned counts ``h`` (Cm, F, HIST_BINS).

        The cumulative weight C_j at the grid points, joined linearly, is a continuous CDF; the quantile is where it
        reaches ``floor(q * n) + 1/2`` (n: cells counted). That level is never an integer, and C is flat only at
        integer levels (a flat stretch means no cell near it, so every cell is counted wholly or not at all), so
        the crossing point moves continuously with the cells' dB; the segment it crosses holds more than half a
        cell of weight, so a cell moving by d steps moves the quantile by less than 2 d. C_j counts the cells up to
        about half a step above grid point j, hence the + 0.5 step.
        """
        cum = np.cumsum(h, axis=-1)
        n = np.rint(cum[..., -1:])  # an integer up to rounding: frames counted
        target = np.floor(EST_QUANTILE * n) + 0.5
        k = np.argmax(cum >= target, axis=-1)[..., None]  # first grid point at or above the target
        c_hi = np.take_along_axis(cum, k, -1)
        c_lo = np.where(k > 0, np.take_along_axis(cum, np.maximum(k - 1, 0), -1), 0.0)
        pos = np.where(k > 0, (k - 1) + (target - c_lo) / np.maximum(c_hi - c_lo, 1e-300), 0.0)[..., 0]
        q_db = HIST_LO_DB + (pos + 0.5) * HIST_STEP_DB
        # Exp(1) power: P(E <= e) = q at e = -ln(1 - q); noise power = quantile / e
        noise_db = q_db - 10.0 * math.log10(-math.log1p(-EST_QUANTILE))
        return noise_db + RAYLEIGH_MEAN_DB + self.n_std * RAYLEIGH_STD_DB

    def set_threshold(self, thr):
        self.thr = self.xp.asarray(np.asarray(thr, np.float64).reshape(self.Cm, 1, self.F), dtype=self.dtype)

    def estimate_stats(self, get):
        """Stationary statistics from the signal itself: one pass over all frames."""
        self.hist_init()
        step = max(1, self.chunk_samples(ARRAY_CHUNK[self.backend]) // self.H)
        for f0 in range(0, self.T, step):
            self.hist_add(get, f0, min(self.T, f0 + step))
        self.hist_finish()

    # ---------------------------------------------------------------- masks

    def raw_mask(self, pw):
        """(Cm, nfr, F) power of frames [f0, f0+nfr) -> sigmoid gate of the same frames (needs thr or floor)."""
        xp = self.xp
        d = self.db(pw)
        if self.stationary:
            thr = self.thr
        else:
            ndi = _ndimage(self.backend)
            sm = ndi.uniform_filter1d(pw, self.avg, axis=1, mode="nearest")
            if self.backend == "cuda":
                fl = sliding_min(xp, sm, 2 * self.win + 1, axis=1)  # = minimum_filter1d, in log2(size) passes
            else:
                fl = ndi.minimum_filter1d(sm, 2 * self.win + 1, axis=1, mode="nearest")
            thr = self.db(fl) + (self.ns_offset + RAYLEIGH_MEAN_DB + self.n_std * RAYLEIGH_STD_DB)
        e = d - thr  # dB above the threshold
        raw = 1.0 / (1.0 + xp.exp(xp.clip(e * (-1.0 / SLOPE_DB), -60.0, 60.0)))
        strong = 1.0 / (1.0 + xp.exp(xp.clip((e - STRONG_DB) * (-1.0 / SLOPE_DB), -60.0, 60.0)))
        return raw.astype(self.dtype, copy=False), strong.astype(self.dtype, copy=False)

    def smooth(self, m, lo_pad, hi_pad):
        """m: (Cm, n, F) raw masks; lo_pad/hi_pad frames of edge replication in time are added before the
        ``passes`` valid box passes; returns (Cm, n + lo_pad + hi_pad - 2*r_s, F)."""
        from sigconv._conv2d import conv2d

        xp = self.xp
        rf = self.passes * (self.box_f // 2)
        m = xp.pad(m, ((0, 0), (lo_pad, hi_pad), (rf, rf)), mode="edge")[:, None]
        variant = self.variant
        if self.backend == "cuda" and variant == "auto":
            variant = "separable"  # rank-1 by construction
        if self.box_t == 1 and self.box_f == 1:
            return m[:, 0]
        if self.backend == "cuda":
            kernels = [self.kern]  # one rank-1 kernel: the separable variant does the row and column passes
        else:  # the cpu conv2d has no separable path: a column box then a row box (box_t + box_f taps, not the product)
            kernels = [k for k in (self.kern_t, self.kern_f) if k.size > 1]
        for _ in range(self.passes):
            for k in kernels:
                m = conv2d(m, k, padding="valid", backend=self.backend, variant=variant, block=self.block)
        return m[:, 0]

    # ---------------------------------------------------------------- chunk

    def run_range(self, get, a, b):
        """Output samples [a, b) (0 <= a < b <= L); ``get(lo, hi)`` returns (C, hi - lo) input samples on the
        backend (zeros outside [0, L))."""
        xp = self.xp
        H, N, T = self.H, self.N, self.T
        tA = (a + self.P - N) // H + 1  # first frame with s_t + N > a
        tB = (b - 1 + self.P) // H  # last frame with s_t <= b - 1
        g0, g1 = max(0, tA - self.r_s), min(T - 1, tB + self.r_s)  # raw masks needed
        f0, f1 = max(0, g0 - self.r_f), min(T - 1, g1 + self.r_f)  # spectra needed
        nfr = f1 - f0 + 1
        S, pw = self.frame_power(get(self.s(f0), self.s(f1) + N), nfr)
        raw, strong = self.raw_mask(pw)
        m = self.smooth(raw[:, g0 - f0:g1 - f0 + 1], (g0 - (tA - self.r_s)), (tB + self.r_s) - g1)  # [tA, tB]
        if STRONG_DB is not None:
            m = xp.maximum(m, strong[:, tA - f0:tB - f0 + 1])
        gain = 1.0 - self.prop * (1.0 - m) if self.prop != 1.0 else m
        Sg = S[:, tA - f0:tB - f0 + 1] * gain.astype(self.dtype, copy=False)
        y = self.fft.irfft(Sg, n=N, axis=-1).astype(self.dtype, copy=False) * self.w
        nt = tB - tA + 1
        # overlap-add: frame j of the chunk starts at (j * H) in a local buffer beginning at s_tA
        Np = -(-N // H) * H
        if Np != N:
            y = xp.pad(y, ((0, 0), (0, 0), (0, Np - N)))
        out = xp.zeros((self.C, (nt - 1) * H + Np), self.dtype)
        for r in range(0, Np, H):
            out[:, r:r + nt * H] += y[:, :, r:r + H].reshape(self.C, nt * H)
        lo = a - self.s(tA)
        ws = self.wsum[(np.arange(a, b) + self.P) % H]
        return out[:, lo:lo + (b - a)] * xp.asarray(1.0 / ws, dtype=self.dtype)


def _host(a):
    return a.get() if hasattr(a, "get") else np.asarray(a)


def _getter(x2, L, xp):
    """get(lo, hi) over an in-memory (C, L) array on the backend, zeros outside [0, L)."""

    def get(lo, hi):
        a, b = max(lo, 0), min(hi, L)
        if lo >= 0 and hi <= L:
            return x2[:, lo:hi]
        out = xp.zeros((x2.shape[0], hi - lo), x2.dtype)
        if b > a:
            out[:, a - lo:b - lo] = x2[:, a:b]
        return out

    return get


def _validate(fs, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop):
    """Checked (fs, n_fft, hop); ValueError naming the argument and its range."""
    fs = _check_real(fs, "fs", 0.0, lo_open=True)
    _check_real(n_std, "n_std", 0.0)
    _check_real(prop_decrease, "prop_decrease", 0.0, 1.0)
    _check_real(freq_smooth_hz, "freq_smooth_hz", 0.0)
    _check_real(time_smooth_ms, "time_smooth_ms", 0.0)
    n_fft = _check_int(n_fft, "n_fft", 16, 1 << 16)
    hop = n_fft // 4 if hop is None else _check_int(hop, "hop", 1, n_fft // 2)
    return fs, n_fft, hop


def _make_gate(C, L, fs, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop, share_mask,
               backend, variant, block, dtype):
    fs, n_fft, hop = _validate(fs, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop)
    return _Gate(C, L, fs, stationary=stationary, n_std=n_std, prop_decrease=prop_decrease,
                 freq_smooth_hz=freq_smooth_hz, time_smooth_ms=time_smooth_ms, n_fft=n_fft, hop=hop,
                 share_mask=share_mask, backend=backend, variant=variant, block=block, dtype=dtype)


# ------------------------------------------------------------------------------------------ public


def spectral_denoise(x, fs, noise=None, stationary=True, n_std=1.5, prop_decrease=1.0, freq_smooth_hz=500,
                     time_smooth_ms=50, n_fft=2048, hop=None, *, axis=LAST_AXIS, share_mask=False,
                     backend="auto", variant="auto", block=None):
    """Spectral-gating noise reduction: attenuate time-frequency cells that are not clearly above the noise floor.

    Parameters
    ----------
    x : array_like (numpy or cupy)
        Signal: 1-D, or N-D with time along ``axis`` (each other index is one channel).
    fs : float
        Sample rate in Hz.
    noise : array_like, optional
        A recording of the noise alone (same channels as ``x``, time along ``axis``, at least ``n_fft`` samples):
        the stationary threshold per frequency is its mean + ``n_std`` std of cell dB. Without it the noise
        level is estimated from ``x`` (a low quantile of each frequency's cell power). Stationary mode only.
    stationary : bool
        True: one threshold per frequency. False: follow a slowly varying noise floor (minimum of the
        50 ms-averaged power over +-1 s, bias-corrected).
    n_std : float
        Threshold in noise standard deviations (dB) above the noise mean; >= 0.
    prop_decrease : float
        How much of the gated energy is removed, in [0, 1] (0: output equals input).
    freq_smooth_hz, time_smooth_ms : float
        Total widths of the mask smoothing kernel across frequency (Hz) and time (ms); >= 0.
    n_fft : int
        STFT size, in [16, 65536].
    hop : int, optional
        STFT hop in [1, n_fft/2]; default n_fft/4.
    axis : int
        Time axis (default last). A 2-D input whose time axis is much shorter than the other is refused unless
        ``axis`` is given (it looks like (frames, channels) data).
    share_mask : bool
        One mask for all channels, from their mean power (keeps the stereo image).
    backend : {"auto", "cpu", "cuda"}
        Where the STFT and the mask smoothing run (cupy.fft and sigconv's CUDA conv2d kernels on cuda).
    variant, block
        Passed to :func:`sigconv.conv2d` for the mask smoothing; on cuda "auto" means "separable"
        (the kernel is rank-1).

    Returns
    -------
    ndarray
        Same shape as ``x``; float32 when ``x`` is float32, else float64; same array type as ``x``.

    Raises
    ------
    ValueError
        Bad values (named with their range), a noise clip with other channels or shorter than ``n_fft``, a
        noise clip in non-stationary mode, a smoothing kernel too wide for this ``fs``/``n_fft``, a
        transposed-looking input, non-finite samples.
    RuntimeError
        ``backend="cuda"`` where it cannot run.

    See Also
    --------
    noisereduce.reduce_noise : the method this follows (stationary and non-stationary modes).
    sigconv.apply_fir : band-limited FIR filtering.

    Notes
    -----
    Long inputs are processed in chunks with exact seams (the same code streams files: ``sigconv denoise
    --method spectral``), so memory stays bounded. With the gate fully open the output equals the input to
    float rounding.

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> fs = 16000
    >>> t = np.arange(2 * fs) / fs
    >>> clean = 0.5 * np.sin(2 * np.pi * 440 * t)
    >>> rng = np.random.default_rng(0)
    >>> noisy = clean + 0.05 * rng.standard_normal(t.size)
    >>> noise_clip = 0.05 * rng.standard_normal(fs)  # a second of the noise alone
    >>> y = sigconv.spectral_denoise(noisy, fs, noise=noise_clip, backend="cpu")
    >>> snr = lambda y: 10 * np.log10(np.sum(clean ** 2) / np.sum((y - clean) ** 2))
    >>> bool(snr(y) > snr(noisy) + 10)
    True
    >>> float(np.max(np.abs(sigconv.spectral_denoise(noisy, fs, prop_decrease=0, backend="cpu") - noisy))) < 1e-9
    True
    """
    from sigconv._core.xp import array_namespace as _xp, is_cupy as _is_cupy, like as _like, to_backend as _to_backend
    from sigconv.engine.ops import backend_for as _backend_for
    from sigconv._core.checks import float_dtype

    xp_in = _xp(x)
    x = xp_in.asarray(x)
    if x.ndim == 0:
        raise ValueError("x must be at least 1-D, got a scalar")
    explicit = axis is not LAST_AXIS
    ax = check_axis(x.ndim, axis)
    check_orientation(x.shape, ax, explicit)
    L = int(x.shape[ax])
    if L == 0:
        raise ValueError(f"x must hold at least one sample along axis {ax}, got shape {tuple(x.shape)}")
    dtype = float_dtype(x)
    xm = xp_in.moveaxis(x, ax, -1)
    lead = xm.shape[:-1]
    x2 = xm.reshape(-1, L)
    C = int(x2.shape[0])
    be = _backend_for(backend, x) if noise is None else _backend_for(backend, x, noise)
    if not stationary and noise is not None:
        raise ValueError("noise applies to stationary mode only (non-stationary follows a moving noise floor); "
                         "pass stationary=True or leave noise out")
    gate = _make_gate(C, L, fs, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop,
                      share_mask, be, variant, block, dtype)
    xp = gate.xp
    xb = xp.ascontiguousarray(_to_backend(x2, be).astype(dtype, copy=False))
    if not bool(xp.all(xp.isfinite(xb))):
        raise ValueError("x must be finite (it holds NaN or inf)")
    get = _getter(xb, L, xp)
    if stationary:
        if noise is not None:
            nz = _xp(noise).asarray(noise)
            nz_shape = tuple(nz.shape)  # noise may be a list: no .shape of its own
            nz = nz[None] if nz.ndim == 1 else _xp(nz).moveaxis(nz, ax, -1).reshape(-1, nz.shape[ax])
            if int(nz.shape[0]) != C:
                raise ValueError(f"noise must have the channels of x ({C}), got {int(nz.shape[0])} "
                                 f"(shape {nz_shape})")
            nz = _host(nz).astype(dtype, copy=False) if _is_cupy(nz) else np.asarray(nz, dtype)
            if not np.all(np.isfinite(nz)):
                raise ValueError("noise must be finite (it holds NaN or inf)")
            step = gate.chunk_samples(ARRAY_CHUNK["cpu"])
            if not gate.stats_from_noise_chunks(nz[:, i:i + step] for i in range(0, nz.shape[1], step)):
                raise ValueError(f"noise must hold at least n_fft = {gate.N} samples, got {nz.shape[1]}")
        else:
            gate.estimate_stats(get)
    y = xp.empty((C, L), dtype)
    step = gate.chunk_samples(ARRAY_CHUNK[be])
    for a in range(0, L, step):
        b = min(L, a + step)
        y[:, a:b] = gate.run_range(get, a, b)
    y = _like(y, x).reshape(lead + (L,))
    return _xp(y).moveaxis(y, -1, ax)


# ------------------------------------------------------------------------------------------ files


def _make_file_filter_class():
    from sigconv.engine.file import BlockFilter

    class SpectralFileFilter(BlockFilter):
        """Spectral gate for the file engine: a fixed delay of ``n_fft + R*hop`` samples (R: the frames of context
        the gains need), so every ``process`` returns as many frames as it got and the output equals
        :func:`spectral_denoise` on the whole file.

        ``stats``: ``"estimate"`` (a first streaming pass over ``path`` on the first block), or None when the
        gate's threshold is already set (noise clip / range) or the mode is non-stationary.
        """

        def __init__(self, gate: _Gate, spec, path=None, estimate: bool = False, block_frames: int = FILE_BLOCK):
            super().__init__(gate.C, gate.N + gate.R * gate.H, spec)
            self.gate, self.path, self.estimate = gate, path, estimate
            self.preferred_frames = gate.chunk_samples(block_frames)
            self.buf = np.zeros((gate.C, 0), spec.work_dtype)
            self.buf0 = 0  # global index of buf[:, 0]
            self.have = 0  # input samples received within [0, L)
            self.consumed = 0  # samples received, including the delay zeros of finish()
            self.done = 0  # outputs computed: [0, done)
            self.pending = np.zeros((gate.C, 0), spec.work_dtype)  # computed outputs [done - pending, done)
            self.variant = "separable" if gate.backend == "cuda" and gate.variant == "auto" else gate.variant

        def _get(self, lo, hi):
            g, xp = self.gate, self.gate.xp
            out = np.zeros((g.C, hi - lo), self.spec.work_dtype)
            a, b = max(lo, self.buf0), min(hi, self.buf0 + self.buf.shape[1])
            if b > a:
                out[:, a - lo:b - lo] = self.buf[:, a - self.buf0:b - self.buf0]
            return xp.asarray(out)

        def _stats_pass(self):
            import soundfile as sf

            g = self.gate
            with sf.SoundFile(str(self.path)) as f:
                data = f.read(dtype=self.spec.read_dtype, always_2d=True) if g.L <= self.preferred_frames else None
            if data is not None:  # small file: one array
                x = np.ascontiguousarray(data.T, dtype=self.spec.work_dtype)
                g.estimate_stats(_getter(g.xp.asarray(x), g.L, g.xp))
                return
            # stream: frames [f0, f1) need samples [s_f0, s_(f1-1) + N); a sliding buffer from s_f0 on
            g.hist_init()
            step = max(1, self.preferred_frames // g.H)
            with sf.SoundFile(str(self.path)) as f:
                buf, buf0 = np.zeros((g.C, g.P), self.spec.work_dtype), -g.P  # samples [-P, 0) are zeros
                for f0 in range(0, g.T, step):
                    f1 = min(g.T, f0 + step)
                    need = g.s(f1 - 1) + g.N
                    while buf0 + buf.shape[1] < need:
                        blk = f.read(self.preferred_frames, dtype=self.spec.read_dtype, always_2d=True)
                        if blk.shape[0] == 0:  # past the end: zeros
                            blk = np.zeros((need - buf0 - buf.shape[1], g.C))
                        buf = np.concatenate([buf, np.ascontiguousarray(blk.T, dtype=self.spec.work_dtype)], 1)

                    def get(a, b, buf=buf, buf0=buf0):
                        return g.xp.asarray(buf[:, a - buf0:b - buf0])

                    g.hist_add(get, f0, f1)
                    keep = g.s(f1) - buf0
                    buf, buf0 = buf[:, keep:], buf0 + keep
            g.hist_finish()

        def _filter_block(self, x):
            g = self.gate
            if self.estimate:
                self.estimate = False
                self._stats_pass()
            n = x.shape[1]
            take = max(0, min(n, g.L - self.have))
            if take:
                self.buf = np.concatenate([self.buf, x[:, :take]], axis=1)
                self.have += take
            self.consumed += n
            # outputs [done, b) are final once the frames they need are complete
            if self.have >= g.L:
                b = g.L
            else:
                t_avail = (self.have - g.N + g.P) // g.H  # last frame whose samples are all here
                tB = t_avail - g.R
                b = min(g.L, g.s(tB + 1)) if tB >= 0 else 0
            if b > self.done:
                y = _host(g.run_range(self._get, self.done, b)).astype(self.spec.work_dtype, copy=False)
                self.pending = np.concatenate([self.pending, y], axis=1) if self.pending.shape[1] else y
                self.done = b
                # drop samples no later chunk needs: the next chunk starts at frame tA(done) - R
                tA = (self.done + g.P - g.N) // g.H + 1
                keep_from = max(0, g.s(max(0, tA - g.R)))
                if keep_from > self.buf0:
                    self.buf = self.buf[:, keep_from - self.buf0:]
                    self.buf0 = keep_from
            # return outputs [consumed - n - D, consumed - D); negative indices are the dropped delay
            lo, hi = self.consumed - n - self.delay, self.consumed - self.delay
            res = np.zeros((g.C, n), self.spec.work_dtype)
            p0 = self.done - self.pending.shape[1]  # global index of pending[:, 0]
            a, b2 = max(lo, 0), hi
            if b2 > a:
                if b2 > self.done:
                    raise RuntimeError(f"spectral gate: output {b2} requested before it is final ({self.done})")
                res[:, a - lo:b2 - lo] = self.pending[:, a - p0:b2 - p0]
                self.pending = self.pending[:, b2 - p0:]
            return res

    return SpectralFileFilter


def __getattr__(name):  # SpectralFileFilter is built on first use so that importing _spectral stays light
    if name == "SpectralFileFilter":
        cls = _make_file_filter_class()
        globals()["SpectralFileFilter"] = cls
        return cls
    raise AttributeError(name)


def _read_range(path, lo, hi, dtype, step=1 << 20):
    """(C, n) chunks of frames [lo, hi) of a sound file."""
    import soundfile as sf

    with sf.SoundFile(str(path)) as f:
        f.seek(lo)
        pos = lo
        while pos < hi:
            blk = f.read(min(step, hi - pos), dtype=dtype, always_2d=True)
            if blk.shape[0] == 0:
                break
            pos += blk.shape[0]
            yield np.ascontiguousarray(blk.T)


def file_filter_factory(args, info, backend):
    """``(make, description)`` for ``sigconv denoise --method spectral``.

    ``make(info, spec)`` returns a :class:`SpectralFileFilter`. Bad values raise ``ValueError`` (exit 2); data
    problems (the noise clip's rate or channels, an unreadable clip, an empty range or one beyond the file, a
    noise source shorter than one STFT frame) raise ``sigconv.InputError`` with one line.
    """
    from sigconv._core.errors import InputError
    from sigconv.engine.audio import pcm_spec, probe

    fs = info.samplerate
    clip, rng = getattr(args, "noise_clip", None), getattr(args, "noise_from", None)
    if not args.stationary and (clip or rng):
        raise ValueError(f"{'--noise-clip' if clip else '--noise-from'} applies to --stationary only "
                         "(--non-stationary follows a moving noise floor)")
    spec = pcm_spec(info.subtype)
    kw = dict(stationary=args.stationary, n_std=args.n_std, prop_decrease=args.strength,
              freq_smooth_hz=args.freq_smooth, time_smooth_ms=args.time_smooth, n_fft=args.n_fft, hop=args.hop,
              share_mask=args.share_mask, backend=backend, variant=args.variant, block=args.block)
    if args.variant != "auto":  # one line listing the valid names, before any work
        from sigconv.registry.table import get

        get("conv2d", backend, args.variant)

    def new_gate(dtype):
        return _make_gate(info.channels, info.frames, fs, dtype=dtype, **kw)

    gate0 = new_gate(spec.work_dtype)  # ValueError on bad values, before any reading
    thr = None
    if clip:
        cinfo = probe(clip)
        if cinfo.samplerate != fs:
            raise InputError(f"{cinfo.path}: noise clip has sample rate {cinfo.samplerate} Hz, the input "
                             f"{fs} Hz; resample it or use --noise-from")
        if cinfo.channels != info.channels:
            raise InputError(f"{cinfo.path}: noise clip has {cinfo.channels} channel(s), the input "
                             f"{info.channels}")
        try:
            ok = gate0.stats_from_noise_chunks(_read_range(cinfo.path, 0, cinfo.frames, spec.read_dtype))
        except Exception as exc:  # noqa: BLE001 (libsndfile errors midway)
            raise InputError(f"{cinfo.path}: cannot read the noise clip ({exc})") from None
        if not ok:
            raise InputError(f"{cinfo.path}: noise clip holds {cinfo.frames} frames, fewer than one STFT frame "
                             f"(n_fft = {gate0.N})")
        source = f"noise from {Path(clip).name}"
    elif rng:
        start, end = float(rng[0]), float(rng[1])
        if end <= start:
            raise InputError(f"{info.path}: --noise-from range {start:g}-{end:g} s is empty (END must be after "
                             "START)")
        lo, hi = int(round(start * fs)), int(round(end * fs))
        if hi > info.frames:
            raise InputError(f"{info.path}: --noise-from range {start:g}-{end:g} s is beyond the file "
                             f"({info.duration:.6g} s)")
        if hi - lo < gate0.N:
            raise InputError(f"{info.path}: --noise-from range {start:g}-{end:g} s holds {hi - lo} frames, fewer "
                             f"than one STFT frame (n_fft = {gate0.N})")
        gate0.stats_from_noise_chunks(_read_range(info.path, lo, hi, spec.read_dtype))
        source = f"noise from {start:g}-{end:g} s"
    else:
        source = "noise estimated from the input" if args.stationary else "moving noise floor"
    if clip or rng:
        thr = _host(gate0.thr)

    def make(info2, spec2):
        g = new_gate(spec2.work_dtype)
        if thr is not None:
            g.set_threshold(thr)
        return __getattr__("SpectralFileFilter")(g, spec2, path=info2.path, estimate=args.stationary and thr is None)

    mode = "stationary" if args.stationary else "non-stationary"
    desc = (f"spectral gate ({mode}, {source}, strength {args.strength:g}, n_fft {gate0.N}, hop {gate0.H}"
            + (", shared mask" if gate0.share else "") + ")")
    return make, desc
