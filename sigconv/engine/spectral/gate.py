"""The spectral gate's maths: STFT, a threshold per cell, a smoothed gate mask, inverse STFT, one chunk at a time.

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
* stationary, estimated from the input: a quantile of each frequency's cell dB (see :mod:`.noise`);
* non-stationary: a moving noise floor per cell: power averaged over :data:`NS_AVG_MS`, then the minimum over
  +-:data:`NS_WINDOW_S` (minimum statistics, bias-corrected by a calibration on white noise through the same STFT),
  with the Rayleigh model's mean/std. Its lookahead is bounded, so streaming is exact.

The mask ``sigmoid((dB - thr) / SLOPE_DB)`` is smoothed by a separable kernel built from ``freq_smooth_hz`` (total
width in Hz) and ``time_smooth_ms`` (total width in ms): ``p`` passes of a box (p = 2: a triangle), each pass one
2-D correlation (kernel at most 31 x 31) on the chosen backend; edges replicate the nearest mask value.
``gain = 1 - prop_decrease * (1 - mask)``.

Streaming (:class:`Gate`): output samples ``[a, b)`` need the frames that overlap them, whose gains need raw masks
``r_s`` frames around (smoothing) and those need spectra ``r_f`` frames further (non-stationary floor). A chunk
computes exactly those frames from the samples it needs, so a chunk boundary changes nothing but rounding.
"""

from __future__ import annotations

import math
import numbers
from functools import lru_cache

import numpy as np

from sigconv._core.xp import namespace_of_backend, to_backend, to_host
from sigconv.engine.ops import corr2d
from sigconv.engine.spectral import noise
from sigconv.engine.spectral.noise import RAYLEIGH_MEAN_DB, RAYLEIGH_STD_DB

__all__ = ["Gate", "array_getter", "ARRAY_CHUNK", "FRAME_BUDGET", "POWER_FLOOR"]

#: Power floor (relative to full scale) before taking dB: -160 dB.
POWER_FLOOR = 1e-16
#: Width (dB) of the sigmoid gate: mask = 1 / (1 + exp(-(dB - thr) / SLOPE_DB)).
SLOPE_DB = 1.0
#: Cells this many dB above the threshold stay open whatever the smoothing says (None: off): the smoothing
#: kernel averages, so a narrow harmonic (a few bins wide) would otherwise be diluted by the closed cells
#: around it; isolated noise cells reach this level with probability ~1e-7 (Rayleigh), so it adds no musical noise.
STRONG_DB = 6.0
#: Non-stationary floor: power averaged over this many ms (centred), then the minimum over +- this many seconds.
NS_AVG_MS = 50.0
NS_WINDOW_S = 1.0
#: Largest box side per smoothing pass (the 2-D kernels take up to 31 x 31).
MAX_BOX = 31
#: Largest time smoothing half width in frames.
MAX_SMOOTH_FRAMES = 256
#: Samples per chunk of the array function and of the statistics passes (cpu, cuda).
ARRAY_CHUNK = {"cpu": 1 << 20, "cuda": 1 << 23}
#: At most this many frame samples (STFT frames x n_fft x channels) per chunk: a small hop multiplies the
#: frames of a chunk of samples (hop 1 with n_fft 2048 would make a 1 M-sample chunk 16 GB of spectra), so
#: chunks shrink to keep memory bounded; the defaults (hop n_fft/4, up to 2 channels) stay within it.
FRAME_BUDGET = {"cpu": 1 << 23, "cuda": 1 << 26}


def _fft_and_ndimage(backend):
    """The FFT and ndimage modules a backend computes with: cupy's on cuda, SciPy's on the cpu."""
    if backend == "cuda":
        import cupy.fft
        import cupyx.scipy.ndimage

        return cupy.fft, cupyx.scipy.ndimage
    import scipy.fft
    import scipy.ndimage

    return scipy.fft, scipy.ndimage


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


class Gate:
    """The gate's parameters, statistics and chunk processor (backend-generic through ``xp``).

    ``C`` channels of ``L`` samples at ``fs`` Hz, computed in ``dtype``; ``kernel`` is a resolved conv2d
    :class:`~sigconv.engine.settings.KernelChoice` (backend "cpu" or "cuda"): where the STFT and the mask
    smoothing run. The values are checked here, for the array function and the file pipeline alike
    (``ValueError`` naming the argument and its range); the other arguments mean what they mean in
    :func:`sigconv.spectral_denoise`.
    """

    def __init__(self, C, L, fs, *, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop,
                 share_mask, kernel, dtype):
        fs = _check_real(fs, "fs", 0.0, lo_open=True)
        _check_real(n_std, "n_std", 0.0)
        _check_real(prop_decrease, "prop_decrease", 0.0, 1.0)
        _check_real(freq_smooth_hz, "freq_smooth_hz", 0.0)
        _check_real(time_smooth_ms, "time_smooth_ms", 0.0)
        n_fft = _check_int(n_fft, "n_fft", 16, 1 << 16)
        hop = n_fft // 4 if hop is None else _check_int(hop, "hop", 1, n_fft // 2)
        self.C, self.L, self.fs = int(C), int(L), fs
        self.stationary, self.n_std, self.prop = bool(stationary), float(n_std), float(prop_decrease)
        self.N, self.H = int(n_fft), int(hop)
        self.P = (-(-self.N // self.H) - 1) * self.H
        self.T = -(-(self.L + self.P) // self.H)
        self.F = self.N // 2 + 1
        self.share = bool(share_mask) and self.C > 1
        self.Cm = 1 if self.share else self.C
        self.kernel, self.backend = kernel, kernel.backend
        # the smoothing is a box, separable by construction, and the gate runs it as such: on cuda as one rank-1
        # kernel through the separable variant (a row and a column pass), on the cpu as a column then a row box
        # (below); a variant the caller names replaces it
        self.variant = "separable" if self.backend == "cuda" and kernel.variant == "auto" else kernel.variant
        self.dtype = np.dtype(dtype)
        self.xp = namespace_of_backend(self.backend)
        self.fft, self.ndi = _fft_and_ndimage(self.backend)
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
        if self.backend == "cuda":  # one rank-1 kernel: the separable variant does the row and column passes
            boxes = [(self.box_t, self.box_f)]
        else:  # the cpu 2-D path has no separable variant: a column box then a row box (box_t + box_f taps)
            boxes = [b for b in ((self.box_t, 1), (1, self.box_f)) if b != (1, 1)]
        # (host copy, backend copy) of each pass's kernel; the host copy lets cuda factor it without a read-back
        self.kernels = []
        for bt, bf in boxes:
            k = (np.ones((1, 1, bt, bf)) / (bt * bf)).astype(self.dtype)
            self.kernels.append((k, to_backend(k, self.backend)))

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
                acc[0] += to_host(d.sum(axis=1))
                acc[1] += to_host((d * d).sum(axis=1))
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
        self.hist = self.xp.zeros(self.Cm * self.F * noise.HIST_BINS, dtype=self.xp.float64)

    def hist_add(self, get, f0, f1):
        """Count the cell dB of frames [f0, f1) into the per-(channel, frequency) histogram."""
        _, pw = self.frame_power(get(self.s(f0), self.s(f1 - 1) + self.N), f1 - f0)
        noise.hist_add(self.xp, self.hist, self.db(pw))

    def hist_finish(self):
        h = to_host(self.hist).reshape(self.Cm, self.F, noise.HIST_BINS)
        self.set_threshold(noise.noise_db_from_hist(h, self.n_std))
        del self.hist

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
            sm = self.ndi.uniform_filter1d(pw, self.avg, axis=1, mode="nearest")
            if self.backend == "cuda":
                fl = noise.sliding_min(xp, sm, 2 * self.win + 1, axis=1)  # = minimum_filter1d, in log2(size) passes
            else:
                fl = self.ndi.minimum_filter1d(sm, 2 * self.win + 1, axis=1, mode="nearest")
            thr = self.db(fl) + (self.ns_offset + RAYLEIGH_MEAN_DB + self.n_std * RAYLEIGH_STD_DB)
        e = d - thr  # dB above the threshold
        raw = 1.0 / (1.0 + xp.exp(xp.clip(e * (-1.0 / SLOPE_DB), -60.0, 60.0)))
        strong = 1.0 / (1.0 + xp.exp(xp.clip((e - STRONG_DB) * (-1.0 / SLOPE_DB), -60.0, 60.0)))
        return raw.astype(self.dtype, copy=False), strong.astype(self.dtype, copy=False)

    def smooth(self, m, lo_pad, hi_pad):
        """m: (Cm, n, F) raw masks; lo_pad/hi_pad frames of edge replication in time are added before the
        ``passes`` valid box passes; returns (Cm, n + lo_pad + hi_pad - 2*r_s, F)."""
        xp = self.xp
        rf = self.passes * (self.box_f // 2)
        m = xp.pad(m, ((0, 0), (lo_pad, hi_pad), (rf, rf)), mode="edge")[:, None]
        if self.box_t == 1 and self.box_f == 1:
            return m[:, 0]
        for _ in range(self.passes):
            for host, dev in self.kernels:
                (h, w), (kh, kw) = m.shape[2:], host.shape[2:]
                m = corr2d(xp.ascontiguousarray(m), dev, None, (1, 1), (0, 0), (h - kh + 1, w - kw + 1),
                           backend=self.backend, variant=self.variant, block=self.kernel.block, host_weights=host)
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


def array_getter(x2, L, xp):
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
