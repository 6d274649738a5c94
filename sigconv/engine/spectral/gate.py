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
import time
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, nullcontext
from functools import lru_cache

import numpy as np

from sigconv._core.checks import is_default
from sigconv._core.xp import namespace_of_backend, to_backend, to_host
from sigconv.backends.cpu import WORKERS
from sigconv.engine.design import check_fs
from sigconv.engine.ops import corr2d
from sigconv.engine.spectral import noise
from sigconv.engine.spectral.noise import RAYLEIGH_MEAN_DB, RAYLEIGH_STD_DB

__all__ = ["Gate", "HostOps", "StageClock", "array_getter", "ARRAY_CHUNK", "FRAME_BUDGET", "POWER_FLOOR", "CPU_CHUNK",
           "SPECTRAL_BUDGET", "STAGES"]

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
#: Smoothing passes from which the cpu convolves each axis with the whole kernel by FFT instead of running means.
#: Measured (2-core host, float64, 2 x 2600 x 1100 cells, ns a cell): running means 3.5 a pass along bins, 11 along
#: frames; the FFT 11-13 along bins, 20 along frames, whatever the passes. Few passes are the rates' defaults.
SMOOTH_FFT_MIN_PASSES = 4
#: Samples per chunk of the array function and of the statistics passes (cpu, cuda).
ARRAY_CHUNK = {"cpu": 1 << 20, "cuda": 1 << 23}
#: Cells whose dB the host histogram bins at a time (its temporaries: about 50 bytes a cell).
HIST_BATCH_CELLS = 1 << 18
#: Threads counting the statistics histogram at once beyond which the cpu takes the way that scales (sorted
#: runs, fancy indexing: the GIL released) over np.add.at (fastest alone, GIL held). On the 16-core H200 host
#: (benchmarks/spectral_hist_threads.py), ns per cell, stereo: add.at 17.7 / 11.6 / 16.4 / 18.0 / 18.6 at 1 / 2 /
#: 4 / 8 / 16 threads, sorted runs 44.7 / 32.0 / 17.4 / 9.6 / 6.6.
HIST_RUNS_THREADS = 4
#: Samples per task when the cpu backend spreads a range over its threads (each task is one chunk: its frames,
#: spectra and masks stay in the CPU caches' reach, and 16 threads have work on a few minutes of audio).
CPU_CHUNK = 1 << 18
#: At most this many frame samples (STFT frames x n_fft x channels) per chunk: a small hop multiplies the
#: frames of a chunk of samples (hop 1 with n_fft 2048 would make a 1 M-sample chunk 16 GB of spectra), so
#: chunks shrink to keep memory bounded; the defaults (hop n_fft/4, up to 2 channels) stay within it.
FRAME_BUDGET = {"cpu": 1 << 23, "cuda": 1 << 26}
#: Most memory (bytes) the gate's spectrogram-sized arrays may take at once (also bounded by the memory free):
#: the defaults need a few hundred MB at most; a hop of 1 or a rate in GHz would need terabytes.
SPECTRAL_BUDGET = 2 << 30


#: The stages of one chunk (:meth:`Gate.run_range`), in order: framing, window and forward FFT (with the cells'
#: power); the raw gate mask; its smoothing (the 2-D convolution); the gain on the spectra; the inverse FFT; the
#: weighted overlap-add.
STAGES = ("frames+rfft", "mask", "smooth", "gain", "irfft", "overlap-add")


def _untimed(stage):
    return nullcontext()


class StageClock:
    """A ``timer`` for :meth:`Gate.run_range`: ``with clock(stage): ...`` times the block, with a pair of CUDA
    events on the current stream (cuda: nothing waits for the device until :meth:`times`) or ``perf_counter``
    (cpu, where every stage is done when it returns)."""

    def __init__(self, backend: str):
        self.cuda = backend == "cuda"
        self.marks = []  # (stage, start, end): events on cuda, seconds on the cpu

    @contextmanager
    def __call__(self, stage):
        if self.cuda:
            import cupy

            start, end = cupy.cuda.Event(), cupy.cuda.Event()
            start.record()
            yield
            end.record()
        else:
            start = time.perf_counter()
            yield
            end = time.perf_counter()
        self.marks.append((stage, start, end))

    def times(self) -> dict:
        """Milliseconds per stage (a stage timed twice: the sum); on cuda, waits for the last event first."""
        out = {}
        if self.cuda and self.marks:
            import cupy

            self.marks[-1][2].synchronize()
            for stage, a, b in self.marks:
                out[stage] = out.get(stage, 0.0) + float(cupy.cuda.get_elapsed_time(a, b))
            return out
        for stage, a, b in self.marks:
            out[stage] = out.get(stage, 0.0) + (b - a) * 1e3
        return out


def _QUIET():
    """NumPy's error state for the gate's arithmetic: samples near the top of float32 overflow a cell's power to
    inf, which the gate handles as a cell far above its threshold (open); no RuntimeWarning reaches the user (the
    file engine refuses an output that is not finite)."""
    return np.errstate(over="ignore", invalid="ignore")


def _fft_and_ndimage(backend):
    """The FFT and ndimage modules a backend computes with: cupy.fft on cuda (no ndimage: the floor's filters are
    :func:`~sigconv.backends.cuda_gate.box_time` and :func:`~.noise.sliding_min`), SciPy's on the cpu."""
    if backend == "cuda":
        import cupy.fft

        return cupy.fft, None
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
    if ht > MAX_SMOOTH_FRAMES and is_default(time_smooth_ms):
        ht = MAX_SMOOTH_FRAMES  # the default, not the user's value: shortened to fit (see smooth_note)
    if ht > MAX_SMOOTH_FRAMES:
        limit = MAX_SMOOTH_FRAMES * 2.0 * hop / fs * 1e3
        raise ValueError(f"time_smooth_ms must be in [0, {limit:.6g}] for fs={fs:g} and hop={hop} "
                         f"(at most {MAX_SMOOTH_FRAMES} frames each side), got {time_smooth_ms!r}")
    half_box = (MAX_BOX - 1) // 2
    passes = max(2, -(-max(hf, ht) // half_box))
    kf, kt = int(round(hf / passes)), int(round(ht / passes))
    return passes, 2 * kt + 1, 2 * kf + 1


@lru_cache(maxsize=16)
def _box_passes_spectrum(box: int, passes: int, n: int, dtype: np.dtype):
    """rfft (length n, computed in float64, kept in ``dtype``'s precision) of ``passes`` boxes of ``box`` taps
    convolved: p*(box-1)+1 taps."""
    k = np.ones(1)
    for _ in range(passes):
        k = np.convolve(k, np.full(box, 1.0 / box))
    return np.fft.rfft(k, n).astype(np.result_type(dtype, np.complex64))


def _box_passes_fft(fft, m, box, passes, axis, workers):
    """``passes`` running means of ``box`` along ``axis`` of m as one convolution by FFT, valid part only (the
    axis shrinks by passes*(box-1)). The transform length is the axis's own (rounded up to a fast size): a
    circular convolution wraps only into the first K-1 outputs, which the valid part drops."""
    n_in = m.shape[axis]
    K = passes * (box - 1) + 1
    n = fft.next_fast_len(n_in, real=True)
    shape = [1] * m.ndim
    shape[axis] = -1
    X = fft.rfft(m, n, axis=axis, workers=workers)
    X *= _box_passes_spectrum(box, passes, n, m.dtype).reshape(shape)
    y = fft.irfft(X, n, axis=axis, workers=workers, overwrite_x=True)
    cut = [slice(None)] * m.ndim
    cut[axis] = slice(K - 1, n_in)
    return y[tuple(cut)]


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
    # SciPy's uniform_filter1d and minimum_filter1d (mode "nearest") in NumPy: the cuda path never imports SciPy
    h = avg // 2
    c = np.cumsum(np.pad(pw, ((h + 1, avg - 1 - h), (0, 0)), mode="edge"), axis=0)
    sm = (c[avg:] - c[:-avg]) / avg
    fl = noise.sliding_min(np, sm, 2 * win + 1, axis=0)
    core = slice(win + avg, frames - win - avg)
    return float(pw.mean() / fl[core].mean())


class HostOps:
    """The gate's elementwise stages in NumPy (the cpu backend), with the signatures of their fused device forms
    in :mod:`sigconv.backends.cuda_gate`; these are the reference the cuda path is tested against."""

    @staticmethod
    def pad_edge(m, lo, hi, rf):
        return np.pad(m, ((0, 0), (lo, hi), (rf, rf)), mode="edge")

    @staticmethod
    def frames(xs, w, H, nfr):
        xs = np.ascontiguousarray(xs)
        st = xs.strides
        fr = np.lib.stride_tricks.as_strided(xs, shape=(xs.shape[0], nfr, w.shape[0]),
                                             strides=(st[0], H * st[1], st[1]))
        return fr * w

    @staticmethod
    def power(S, scale, share):
        pw = S.real ** 2
        pw += S.imag ** 2
        pw *= scale
        return pw.mean(axis=0, keepdims=True) if share else pw

    @staticmethod
    def box_time(a, size):
        import scipy.ndimage

        return scipy.ndimage.uniform_filter1d(a, size, axis=1, mode="nearest")

    @staticmethod
    def masks(pw, *, thr=None, floor_power=None, offset=0.0, power_floor, slope_db, strong_db):
        from scipy.special import expit

        if thr is None:
            thr = np.log10(floor_power + power_floor)
            thr *= 10.0
            thr += offset
        e = np.log10(pw + power_floor)
        e *= 10.0
        e -= thr
        inv = 1.0 / slope_db
        strong = expit((e - strong_db) * inv) if strong_db is not None else None
        e *= inv
        return expit(e, out=e), strong

    @staticmethod
    def apply_gain(S, m, strong, prop):
        g = np.maximum(m, strong) if strong is not None else m
        if prop != 1.0:
            g = 1.0 - prop * (1.0 - g)
        return S * g

    @staticmethod
    def overlap_add(y, w, inv_wsum, lo, count):
        C, nt, N = y.shape
        H = inv_wsum.shape[0]
        y *= w
        out = np.zeros((C, (nt - 1) * H + -(-N // H) * H), y.dtype)
        for r in range(0, N, H):
            h = min(H, N - r)
            out[:, r:r + nt * H].reshape(C, nt, H)[:, :, :h] += y[:, :, r:r + h]
        out.reshape(C, -1, H)[...] *= inv_wsum  # local sample k has (k + s_first + P) mod H = k mod H
        return out[:, lo:lo + count]

    @staticmethod
    def hist_add(hist, pw, *, power_floor, lo_db, step_db, bins, runs=False):
        """``runs``: the way of :func:`noise.hist_add` that scales with threads (the cells of each row sorted
        first: dB is increasing in power, so the cells that share a grid point become neighbours)."""
        Cm, nfr, F = pw.shape
        rows = Cm * F
        step = max(1, HIST_BATCH_CELLS // rows)  # frames at a time: bounded temporaries
        if runs:
            row = np.arange(rows)[:, None]
        else:
            row = np.arange(Cm)[:, None, None] * F + np.arange(F)  # cells in frame order: a frame's bins are near
        for t in range(0, nfr, step):
            if runs:
                q = np.empty((Cm, F, min(step, nfr - t)), pw.dtype)
                np.copyto(q, pw[:, t:t + step].transpose(0, 2, 1))
                q = q.reshape(rows, -1)
                q.sort(axis=1)
                q += power_floor
            else:
                q = pw[:, t:t + step] + power_floor
            d = np.log10(q, out=q)
            d *= 10.0
            noise.hist_add(hist, d, row, rows, runs=runs)


class Gate:
    """The gate's parameters, statistics and chunk processor (backend-generic through ``xp`` and ``ops``).

    ``C`` channels of ``L`` samples at ``fs`` Hz, computed in ``dtype``; ``kernel`` is a resolved conv2d
    :class:`~sigconv.engine.settings.KernelChoice` (backend "cpu" or "cuda"): where the STFT and the mask
    smoothing run. The values are checked here, for the array function and the file pipeline alike
    (``ValueError`` naming the argument and its range); the other arguments mean what they mean in
    :func:`sigconv.spectral_denoise`.

    On cuda every stage is a fused kernel (:mod:`sigconv.backends.cuda_gate`) or cuFFT, and nothing proportional to
    the signal touches the host; on the cpu the chunks of a range run in threads (:meth:`run`,
    :meth:`estimate_stats`).
    """

    def __init__(self, C, L, fs, *, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop,
                 share_mask, kernel, dtype):
        fs = check_fs(fs)
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
        # kernel through the separable variant (a row and a column pass), on the cpu along each axis as running
        # means, or as one FFT convolution when the passes are many (:meth:`smooth`); a variant the caller names
        # replaces it
        self.variant = "separable" if self.backend == "cuda" and kernel.variant == "auto" else kernel.variant
        self.dtype = np.dtype(dtype)
        self.xp = namespace_of_backend(self.backend)
        self.fft, self.ndi = _fft_and_ndimage(self.backend)
        if self.backend == "cuda":
            from sigconv.backends import cuda_gate as ops
        else:
            ops = HostOps
        self.ops = ops
        #: scipy.fft threads of one chunk (1 while the chunks themselves run in threads)
        self.fft_workers = WORKERS
        #: most threads the cpu backend runs chunks in (None: one per core) and samples per task (None: the
        #: default); the file engine sets both by memory (:meth:`fit_threads`)
        self.max_threads = None
        self.cpu_task = None
        #: most threads of the statistics pass (each holds a histogram of its own; None: max_threads)
        self.max_stats_threads = None
        w = _window(self.N)
        self.w = self.xp.asarray(w, dtype=self.dtype)
        # sum_t w[n - s_t]^2 depends on (n + P) mod H only (see the module docstring): one period, kept on the
        # backend, serves every chunk
        wsum = np.zeros(self.H)
        for r in range(0, self.N, self.H):
            seg = w[r:r + self.H] ** 2
            wsum[:seg.size] += seg
        self.wsum = wsum
        self.inv_wsum = self.xp.asarray(1.0 / wsum, dtype=self.dtype)
        # what the overlap-add multiplies by: on cuda the inverse transform runs unscaled (cuFFT's own, in place:
        # no copy of the spectra and no division pass) and its 1/N joins the normaliser
        self.ola_norm = self.inv_wsum if self.backend != "cuda" else self.xp.asarray(1.0 / (wsum * self.N),
                                                                                    dtype=self.dtype)
        self.pscale = (2.0 / w.sum()) ** 2  # |S|^2 * pscale: a full-scale sine reads ~1 (0 dB)
        self.passes, self.box_t, self.box_f = _smooth_plan(freq_smooth_hz, time_smooth_ms, self.fs, self.N, self.H)
        #: what to tell the user about a default that was adapted to this rate (None when none was)
        self.smooth_note = None
        if int(round(time_smooth_ms * 1e-3 * self.fs / 2.0 / self.H)) > MAX_SMOOTH_FRAMES:  # a default, shortened
            self.smooth_note = (f"time smoothing {MAX_SMOOTH_FRAMES * 2.0 * self.H / self.fs * 1e3:.3g} ms (the default "
                                f"{float(time_smooth_ms):g} ms is more than {MAX_SMOOTH_FRAMES} frames each side at "
                                f"{self.fs:g} Hz with hop {self.H})")
        self.r_s = self.passes * (self.box_t // 2)  # smoothing half-support in frames
        if self.stationary:
            self.avg, self.win, self.r_f = 0, 0, 0
        else:
            self.avg = max(1, int(round(NS_AVG_MS * 1e-3 * self.fs / self.H))) | 1  # odd
            self.win = max(1, int(round(NS_WINDOW_S * self.fs / self.H)))
            self.r_f = self.avg // 2 + self.win
        self.R = self.r_s + self.r_f
        self._check_size()
        if not self.stationary:
            self.ns_offset = 10.0 * math.log10(_ns_bias(self.N, self.H, self.avg, self.win))
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

    def _check_size(self) -> None:
        """``ValueError`` naming hop, n_fft and the size, before anything is allocated, when the spectrogram-sized
        arrays the gate needs at once exceed :data:`SPECTRAL_BUDGET` or the memory free: the smallest chunk (one hop
        of output needs its frames plus R frames of context on each side) and, non-stationary, the calibration of
        the floor's bias (white noise through the same STFT over 8 floor windows). A hop of 1, or a rate in GHz,
        makes either reach terabytes."""
        from sigconv.engine.design import available_memory

        sizes = [(self.chunk_bytes(self.H), self.H // self.H + 2 * self.R + -(-self.N // self.H), self.C,
                  "the smallest chunk of the gate")]
        if not self.stationary:
            frames = max(8 * (2 * self.win + 1), 512)
            sizes.append((frames * (16 * self.N + 40 * self.F), frames, 1, "the non-stationary floor's calibration"))
        need, frames, chans, what = max(sizes)
        free = available_memory()
        limit = SPECTRAL_BUDGET if free is None else min(SPECTRAL_BUDGET, free)
        if need > limit:
            floor = (f"; the non-stationary floor spans {self.win} frames each side ({NS_WINDOW_S:g} s)"
                     if not self.stationary else "")
            raise ValueError(
                f"hop={self.H} and n_fft={self.N} at fs={self.fs:g} Hz need {need / 2**30:.3g} GiB for {what} "
                f"({frames} frames x {self.F} bins x {chans} channel(s)), more than the {limit / 2**30:.3g} GiB "
                f"the spectral gate may use{floor}; use a larger hop (or n_fft){'' if self.stationary else ' or the stationary gate'}")

    # ---------------------------------------------------------------- frames

    def s(self, t):
        return t * self.H - self.P

    def _rfft(self, fr):
        if self.backend == "cuda":
            return self.fft.rfft(fr, axis=-1)
        return self.fft.rfft(fr, axis=-1, workers=self.fft_workers, overwrite_x=True)

    def _irfft(self, Sg):
        """The frames of the spectra ``Sg`` (destroyed); on cuda unscaled (times N: :attr:`ola_norm` holds the 1/N)."""
        if self.backend == "cuda":
            from sigconv.backends.overlap_save import irfft_destroying

            y = irfft_destroying(Sg, self.N)
        else:
            y = self.fft.irfft(Sg, n=self.N, axis=-1, workers=self.fft_workers, overwrite_x=True)
        return y.astype(self.dtype, copy=False)

    def frame_power(self, xs, nfr):
        """xs: (C, (nfr-1)*H + N) samples on the backend -> (spectra (C, nfr, F), power (Cm, nfr, F) normalised)."""
        S = self._rfft(self.ops.frames(xs, self.w, self.H, nfr))
        return S, self.ops.power(S, self.pscale, self.share)

    def chunk_samples(self, base: int) -> int:
        """Samples per chunk: ``base``, or fewer when its frames would exceed :data:`FRAME_BUDGET` (a multiple
        of the hop, at least one hop)."""
        frames = max(1, FRAME_BUDGET[self.backend] // (self.N * self.C))
        return int(max(self.H, min(int(base), frames * self.H)))

    def db(self, pw):
        return 10.0 * self.xp.log10(pw + POWER_FLOOR)

    def _threads(self, tasks: int) -> int:
        """Threads for ``tasks`` chunks: the cpu backend spreads them over its cores; cuda runs them in order."""
        if self.backend != "cpu":
            return 1
        return max(1, min(WORKERS, tasks, self.max_threads or WORKERS))

    def cpu_chunk(self) -> int:
        """Samples per cpu task (unless :meth:`fit_threads` chose): a chunk recomputes the R frames of context on
        each side, so it is long enough to keep that under about a tenth of its work."""
        if self.cpu_task is not None:
            return self.cpu_task
        return self.chunk_samples(max(CPU_CHUNK, 16 * self.R * self.H))

    def chunk_bytes(self, samples: int) -> int:
        """About the memory one chunk of ``samples`` holds while it runs (frames, spectra, masks): an upper bound
        of what it allocates (measured with tracemalloc: 0.7-0.9 of this)."""
        nfr = samples // self.H + 2 * self.R + -(-self.N // self.H)
        return int(nfr * self.C * (2 * self.N + 12 * self.F) * self.dtype.itemsize)

    def hist_bytes(self) -> int:
        """The statistics histogram (float64 per channel, frequency and bin); a thread of the statistics pass
        holds one of its own."""
        return self.Cm * self.F * noise.HIST_BINS * 8

    def fit_threads(self, budget: int) -> None:
        """Choose the cpu chunk and thread count so that the chunks in flight fit ``budget`` bytes: of the chunk
        sizes from the default down to a quarter of it, the one whose threads do the most useful work (a chunk's
        work is its own frames plus 2 R of context)."""
        base = self.cpu_chunk()
        best = None
        for chunk in (base, base // 2, base // 4):
            chunk = self.chunk_samples(max(self.H, chunk))
            threads = max(1, min(WORKERS, budget // max(1, self.chunk_bytes(chunk))))
            useful = chunk / self.H
            rate = threads * useful / (useful + 2 * self.R + -(-self.N // self.H))
            if best is None or rate > best[0] * 1.05:
                best = (rate, chunk, threads)
        _, self.cpu_task, self.max_threads = best

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
                with _QUIET():
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

    def hist_add(self, get, f0, f1, hist=None, threads=1):
        """Count the cell dB of frames [f0, f1) into the per-(channel, frequency) histogram (``hist``, or the
        gate's own); ``threads``: how many threads are counting at once (on the cpu, beyond
        :data:`HIST_RUNS_THREADS` the way that scales is taken)."""
        with _QUIET():
            _, pw = self.frame_power(get(self.s(f0), self.s(f1 - 1) + self.N), f1 - f0)
        kw = {"runs": threads > HIST_RUNS_THREADS} if self.ops is HostOps else {}
        self.ops.hist_add(self.hist if hist is None else hist, pw, power_floor=POWER_FLOOR, lo_db=noise.HIST_LO_DB,
                          step_db=noise.HIST_STEP_DB, bins=noise.HIST_BINS, **kw)

    def hist_spans(self, get, spans):
        """Count frames of every ``(f0, f1)`` of ``spans``; on the cpu the spans are shared out between threads,
        each with a histogram of its own (summed at the end: memory stays one histogram per thread)."""
        spans = list(spans)
        n = self._threads(len(spans))
        if self.max_stats_threads is not None:
            n = max(1, min(n, self.max_stats_threads))
        if n == 1:
            for f0, f1 in spans:
                self.hist_add(get, f0, f1)
            return

        def work(group):
            h = np.zeros_like(self.hist)
            for f0, f1 in group:
                self.hist_add(get, f0, f1, hist=h, threads=n)
            return h

        self.fft_workers = 1
        try:
            with ThreadPoolExecutor(n) as ex:
                for h in ex.map(work, [spans[i::n] for i in range(n)]):
                    self.hist += h
        finally:
            self.fft_workers = WORKERS

    def hist_finish(self):
        h = noise.hist_view(to_host(self.hist), self.Cm, self.F)
        self.set_threshold(noise.noise_db_from_hist(h, self.n_std))
        del self.hist

    def set_threshold(self, thr):
        """The per (channel, frequency) threshold in dB, saturated to the work dtype's range (an ``n_std`` of 1e300
        asks for a gate that never opens; its float32 value is the largest one, not an overflow)."""
        big = float(np.finfo(self.dtype).max)
        thr = np.clip(np.asarray(thr, np.float64).reshape(self.Cm, 1, self.F), -big, big)
        self.thr = self.xp.asarray(thr, dtype=self.dtype)

    def frame_step(self) -> int:
        """Frames per statistics chunk."""
        base = CPU_CHUNK if self.backend == "cpu" else ARRAY_CHUNK[self.backend]
        return max(1, self.chunk_samples(base) // self.H)

    def estimate_stats(self, get):
        """Stationary statistics from the signal itself: one pass over all frames."""
        self.hist_init()
        step = self.frame_step()
        self.hist_spans(get, [(f0, min(self.T, f0 + step)) for f0 in range(0, self.T, step)])
        self.hist_finish()

    # ---------------------------------------------------------------- masks

    def raw_mask(self, pw):
        """(Cm, nfr, F) power of frames [f0, f0+nfr) -> (sigmoid gate, strong gate) of the same frames (needs thr
        or the floor); strong is None when :data:`STRONG_DB` is None."""
        const = dict(power_floor=POWER_FLOOR, slope_db=SLOPE_DB, strong_db=STRONG_DB)
        if self.stationary:
            return self.ops.masks(pw, thr=self.thr, **const)
        sm = self.ops.box_time(pw, self.avg)
        if self.backend == "cuda":
            fl = noise.sliding_min(self.xp, sm, 2 * self.win + 1, axis=1)  # = minimum_filter1d, log2(size) passes
        else:
            fl = self.ndi.minimum_filter1d(sm, 2 * self.win + 1, axis=1, mode="nearest")
        offset = self.ns_offset + RAYLEIGH_MEAN_DB + self.n_std * RAYLEIGH_STD_DB
        return self.ops.masks(pw, floor_power=fl, offset=offset, **const)

    def smooth(self, m, lo_pad, hi_pad):
        """m: (Cm, n, F) raw masks; lo_pad/hi_pad frames of edge replication in time are added before the
        ``passes`` valid box passes; returns (Cm, n + lo_pad + hi_pad - 2*r_s, F)."""
        xp = self.xp
        rf = self.passes * (self.box_f // 2)
        m = self.ops.pad_edge(m, lo_pad, hi_pad, rf)
        if self.box_t == 1 and self.box_f == 1:
            return m
        if self.backend == "cpu" and self.variant == "auto":
            # separable: all the passes along one axis, then along the other, each axis cut to its valid part
            for axis, box, r in ((1, self.box_t, self.r_s), (2, self.box_f, rf)):
                if box == 1:
                    continue
                if self.passes < SMOOTH_FFT_MIN_PASSES:
                    # running means (SciPy's uniform filter: a sum carried along the line, O(1) a sample); each
                    # pass is exact where its window lies inside the padded array, and the cut keeps only that
                    for _ in range(self.passes):
                        m = self.ndi.uniform_filter1d(m, box, axis=axis, mode="nearest")
                    m = m[:, r:m.shape[1] - r] if axis == 1 else m[:, :, r:m.shape[2] - r]
                else:
                    m = _box_passes_fft(self.fft, m, box, self.passes, axis, self.fft_workers)
            return m
        m = m[:, None]
        for _ in range(self.passes):
            for host, dev in self.kernels:
                (h, w), (kh, kw) = m.shape[2:], host.shape[2:]
                m = corr2d(xp.ascontiguousarray(m), dev, None, (1, 1), (0, 0), (h - kh + 1, w - kw + 1),
                           backend=self.backend, variant=self.variant, block=self.kernel.block, host_weights=host)
        return m[:, 0]

    # ---------------------------------------------------------------- chunk

    def run_range(self, get, a, b, timer=None):
        """Output samples [a, b) (0 <= a < b <= L); ``get(lo, hi)`` returns (C, hi - lo) input samples on the
        backend (zeros outside [0, L)). ``timer(stage)``, a context manager around each of :data:`STAGES`
        (:class:`StageClock`), times them; None: untimed."""
        with _QUIET():  # in the thread that runs the chunk (NumPy's error state is per thread)
            return self._run_range(get, a, b, timer or _untimed)

    def _run_range(self, get, a, b, timer):
        H, N, T = self.H, self.N, self.T
        tA = (a + self.P - N) // H + 1  # first frame with s_t + N > a
        tB = (b - 1 + self.P) // H  # last frame with s_t <= b - 1
        g0, g1 = max(0, tA - self.r_s), min(T - 1, tB + self.r_s)  # raw masks needed
        f0, f1 = max(0, g0 - self.r_f), min(T - 1, g1 + self.r_f)  # spectra needed
        nfr = f1 - f0 + 1
        with timer("frames+rfft"):
            S, pw = self.frame_power(get(self.s(f0), self.s(f1) + N), nfr)
        with timer("mask"):
            raw, strong = self.raw_mask(pw)
        del pw
        with timer("smooth"):
            m = self.smooth(raw[:, g0 - f0:g1 - f0 + 1], (g0 - (tA - self.r_s)), (tB + self.r_s) - g1)  # [tA, tB]
        del raw
        with timer("gain"):
            st = strong[:, tA - f0:tB - f0 + 1] if strong is not None else None
            Sg = self.ops.apply_gain(S[:, tA - f0:tB - f0 + 1], m, st, self.prop)
        del S, m, strong, st
        with timer("irfft"):
            y = self._irfft(Sg)
        del Sg
        # weighted overlap-add of the frames [tA, tB], in a local buffer that starts at s_tA
        with timer("overlap-add"):
            return self.ops.overlap_add(y, self.w, self.ola_norm, a - self.s(tA), b - a)

    def stage_times(self, get, a, b, reps=10, warmup=2):
        """Median ms of each of :data:`STAGES` and of the whole range (``"chunk"``) over ``reps`` runs of
        :meth:`run_range` on [a, b), after ``warmup`` runs: CUDA events on cuda, ``perf_counter`` on the cpu
        (:class:`StageClock`). The statistics (threshold) must be set, as for :meth:`run_range`."""
        reps, warmup = _check_int(reps, "reps", 1), _check_int(warmup, "warmup", 0)
        runs = []
        for i in range(warmup + reps):
            clock = StageClock(self.backend)
            with clock("chunk"):
                self.run_range(get, a, b, timer=clock)
            if i >= warmup:
                runs.append(clock.times())
        return {k: float(np.median([r[k] for r in runs])) for k in (*STAGES, "chunk")}

    def ranges(self, a, b):
        """[a, b) cut into the chunks :meth:`run` computes one at a time (a task each on the cpu's threads)."""
        step = self.cpu_chunk() if self.backend == "cpu" else self.chunk_samples(ARRAY_CHUNK[self.backend])
        return [(s, min(b, s + step)) for s in range(a, b, step)]

    def run(self, get, a, b):
        """Outputs [a, b) as ``((lo, hi), (C, hi - lo) array)`` per chunk, in order. On the cpu the chunks run in
        threads, at most two per thread ahead of the one consumed, so memory stays bounded."""
        ranges = self.ranges(a, b)
        n = self._threads(len(ranges))
        if n == 1:
            for r in ranges:
                yield r, self.run_range(get, *r)
            return
        self.fft_workers = 1
        try:
            with ThreadPoolExecutor(n) as ex:
                pending = []
                it = iter(ranges)
                for r in it:  # keep 2 chunks per thread in flight: memory stays bounded
                    pending.append((r, ex.submit(self.run_range, get, *r)))
                    if len(pending) >= 2 * n:
                        break
                while pending:
                    r, fut = pending.pop(0)
                    nxt = next(it, None)
                    if nxt is not None:
                        pending.append((nxt, ex.submit(self.run_range, get, *nxt)))
                    yield r, fut.result()
        finally:
            self.fft_workers = WORKERS


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
