"""``variant="auto"``: one chooser per operation, the only place where its rules live.

:func:`choose_conv1d` and :func:`choose_conv2d` answer (variant, block) for a job's shape. The backends,
the streaming filters and the file engine ask them and run what they answer, so the variant reported to
the user is the one that ran. On the CPU the answer is a rule of thumb. On the GPU the chooser lists
candidates, favourite first, keeps those the registry marks as ``auto`` candidates that apply to the job
(:meth:`~sigconv.registry.table.Variant.applies`) and, given a ``runner`` and a job big enough to time,
lets the autotuner (:mod:`sigconv.registry.tune`) time them once per shape class; otherwise the favourite
runs. :func:`fill_autotune_cache` (``sigconv tune``) asks the chooser for common shape classes ahead of time.
"""

from __future__ import annotations

import functools

from typing import Callable, Optional

import numpy as np

from sigconv._core.blocks import as_block
from sigconv.registry import table
from sigconv.registry.table import Conv1dJob, Conv2dJob

__all__ = ["choose_conv1d", "choose_conv2d", "conv1d_candidates", "conv2d_candidates", "conv1d_shape_key",
           "conv2d_shape_key", "rank1_factors", "host_rank1", "separable_worth_checking", "fill_autotune_cache",
           "DIRECT_MAX_TAPS", "AUTOTUNE_MIN_OUTPUTS", "cpu_fft_library", "prefer_cpu", "CPU_FASTER_BELOW",
           "HOST_CPU_BELOW", "host_job_on_cpu",
           "CPU_SCIPY_FFT_MIN_SAMPLES", "SEP_RTOL", "TUNE_2D"]

# ------------------------------------------------------------------------------------------------ cpu

#: cpu conv1d: direct summation for this many taps or fewer, or for signals (blocks) this short...
DIRECT_MAX_TAPS = 48
#: ... or when the whole job is this many multiply-adds or fewer per channel (L * K): below both, the
#: FFT's fixed cost outweighs its O(log K) work.
DIRECT_MAX_WORK = 1 << 15
#: cpu conv2d: the FFT above this many kernel taps (kH * kW), at stride 1 only.
FFT2D_MIN_TAPS = 64

#: cpu FFTs of a whole file: scipy.fft (pocketfft vectorised across the batch, on WORKERS threads) from this many
#: samples (frames x channels) on; numpy.fft, loaded with NumPy, below, where importing scipy.fft (0.25-0.4 s: SciPy's
#: array-API layer) would cost more than every transform of the file. On a 2-core VM (2026-12-03), a float32 rfft and
#: irfft of 256 rows of 16384 took 33-51 ms with numpy.fft and 16-22 ms with scipy.fft on one thread: at 2^24
#: samples numpy.fft's extra time is about 0.1 s on one core.
CPU_SCIPY_FFT_MIN_SAMPLES = 1 << 24


def cpu_fft_library(samples: Optional[int]) -> str:
    """"numpy" or "scipy": the library of the cpu backend's FFTs for a job of ``samples`` samples in all (a whole
    file, every channel); "scipy" when that is not known (a stream, the array API)."""
    return "numpy" if samples is not None and samples < CPU_SCIPY_FFT_MIN_SAMPLES else "scipy"


# ------------------------------------------------------------------------------------------------ backends

#: ``backend="auto"`` for a whole file: below this many samples (frames x channels) the cpu backend finishes first,
#: because the cuda backend's start-up (CuPy's import, the CUDA context, loading the kernels) costs more than its
#: faster filtering saves. Measured on a 16-core host with one H200, whole ``sigconv denoise`` commands
#: (benchmarks/startup.py), per operation: conv1d is the FIR filter (the default 7921 taps), conv2d the spectral
#: gate's mask smoothing.
CPU_FASTER_BELOW = {"conv1d": 24_000_000, "conv2d": 2_000_000}
#: The cores of the host that measured CPU_FASTER_BELOW: the cpu path's transforms are threaded, so the crossover
#: scales with the cores of the host at hand.
_CROSSOVER_CORES = 16


def prefer_cpu(op: str, samples: Optional[int], cores: Optional[int] = None) -> bool:
    """Whether ``backend="auto"`` should run a whole-file job of ``samples`` samples (frames x channels) of ``op``
    on the cpu although a GPU may be there: below :data:`CPU_FASTER_BELOW` scaled by ``cores`` (default: this
    host's) over 16, and only while this process has not imported CuPy. Once it has (the terminal UI, a session
    that already used the GPU) the GPU's start-up is paid and cuda is the faster from the first sample. Asked
    before the GPU is probed, so a short file never pays CuPy's import. ``samples`` None (not known): False."""
    import os
    import sys

    if samples is None or op not in CPU_FASTER_BELOW or "cupy" in sys.modules:
        return False
    n = cores if cores is not None else (os.cpu_count() or 1)
    return samples < CPU_FASTER_BELOW[op] * n / _CROSSOVER_CORES


#: ``backend="auto"`` in the array API with NumPy inputs (a whole job in host memory, its result wanted there): below
#: this many samples (the larger input's size) the cpu returns first even with CuPy loaded and the kernels warm, as
#: the cuda call pays its copies both ways and 0.3-0.9 ms of launches; a process that stays below it never imports
#: CuPy (0.3-0.4 s and about 200 MB). Measured NumPy in and out on a 16-core host with one H200, 2026-12-04
#: (benchmarks/api_auto.py; benchmarks/results/api-auto-NVIDIA-H200-2026-12-04.md), warm calls: conv1d, cuda faster
#: from 16384 samples for K = 1023 and 7921, 65536 for K = 255, 262144 for K = 7 (1024 for K = 63, where the cpu's
#: threaded path costs 0.35 ms); 2-D, from 16384 pixels for 9 x 9 and 65536 for 3 x 3 (a tie at 16384); the
#: spectral gate, from 131072 samples. 1-D takes 65536, between the filters' crossovers: on either side of it the
#: wrong backend costs at most 0.27 ms a call. Up to 16384 samples the cpu's times on 2 cores are those on 16.
HOST_CPU_BELOW = {"conv1d": 1 << 16, "conv2d": 1 << 14, "spectral": 1 << 17}


def host_job_on_cpu(job: str, samples: int) -> bool:
    """Whether ``backend="auto"`` runs an array-API job of ``samples`` samples (NumPy inputs) on the cpu although
    a GPU may be there: below :data:`HOST_CPU_BELOW` for ``job`` ("conv1d", "conv2d" or "spectral"). Asked before
    the GPU is probed."""
    return samples < HOST_CPU_BELOW[job]


# ------------------------------------------------------------------------------------------------ cuda

#: Below this many outputs (C * out_len) nothing is timed: the favourite runs.
AUTOTUNE_MIN_OUTPUTS = 1 << 16
#: float32: up to this many taps the tiled kernel, compiled for the exact K and unrolled, is the favourite...
TILED_FAVOURITE_MAX_K = 64
#: ... from this many the FFT joins its candidates ...
FFT_CANDIDATE_MIN_K = 48
#: ... and above this many tiled is no candidate at all: the overlap-save FFT's cost barely grows with K.
TILED_MAX_K = 1024
#: float32: from this many taps up to ffa's own limit (its registry ``max_taps``) the fast FIR algorithm (nine
#: sub-filters of K/4 taps per four outputs) is the favourite, at :data:`_FFA_BLOCKS`; below it tiled is, and ffa is no
#: candidate (short filters are memory-bound: ffa's extra additions do not pay). On an H200, L=2^26, each at its best
#: block in one run (benchmarks/results/H200-2026-12-03-ffa): K=25 tiled 0.163 ms against ffa 0.165; K=33 ffa 0.156
#: against tiled 0.211; K=63 ffa 0.166 against tiled 0.267; K=125 ffa 0.282 against fft_fused 0.369 and tiled 0.446.
FFA_FAVOURITE_MIN_K = 33
_FFA_BLOCKS = (64, 128, 32)
#: float32: the fused overlap-save kernel (fft_fused) is the FFT favourite wherever it applies (up to half its largest
#: tile), at :func:`fused_block` threads, then at the neighbouring block; cuFFT's overlap-save (fft) is timed after
#: them and is the favourite above. On an H200, L=2^26, each at its best tile and block in one run
#: (benchmarks/fused_tiles.py, benchmarks/results/H200-2026-12-03-fused-inplace): K=255 0.335 ms against 0.998,
#: K=1023 0.378 against 1.007, K=4095 0.507 against 1.210, K=7921 0.697 against 1.439.
#: fft_fused's tile for K taps is the power of two nearest above 16x K up to this length (a longer tile's transform
#: costs more per output than its tiles' overlap saves) ...
_FUSED_SHARED_TILE_MAX = 4096
#: ... or, where the overlap (K - 1 samples) would be this share of that tile or more, the shortest tile whose
#: transforms run as columns (2^SIGCONV_FFT_FUSED_COLS_MIN_LOGN samples: kernels/fft_fused.cuh, ff_tile_cols), which is
#: faster per output than the 8192 tile at every K it takes. On an H200 (benchmarks/fused_tiles.py, L=2^26, C=1,
#: each tile at its block of N/32 threads, benchmarks/results/H200-2026-12-04-fused-columns): K=511 0.231 ms with 4096
#: against 0.254 with 8192; K=1023 0.264 with 4096 against 0.270 with 8192 and 0.268 with 16384; K=1500 0.280 with
#: 16384 against 0.287 with 8192; K=2047 0.284 against 0.308.
_FUSED_MAX_OVERLAP = 1 / 4
#: From this many taps on, fft_fused's tile is the longest, 2^15 samples, which only blocks of 512 threads (two
#: butterflies a thread, :func:`fused_wide`: its default) and 1024 take, as 16 columns of 1024 points: one block per
#: multiprocessor, but three quarters of each tile valid at K=8192 against half. On an H200 (benchmarks/fused_tiles.py,
#: L=2^26, one channel, benchmarks/results/H200-2026-12-05-fused-columns32/), the 32768 tile on 512 threads against
#: the 16384 tile on 512: K=4095 0.305 ms against 0.304, K=4501 0.333 against 0.320, K=4801 0.317 against 0.321,
#: K=5001 0.316 against 0.330, K=6001 0.330 against 0.358, K=6399 0.328 against 0.367.
FUSED_ONE_TILE_MIN_K = 4800


def fused_tile(K: int, block: Optional[int] = None) -> int:
    """fft_fused's tile length N for K taps: the power of two nearest above 16x K, from 2^SIGCONV_FFT_FUSED_MIN_LOGN
    (kernels/limits.cuh) to :data:`_FUSED_SHARED_TILE_MAX`; where K - 1 is :data:`_FUSED_MAX_OVERLAP` of that or
    more, the shortest column tile (2^SIGCONV_FFT_FUSED_COLS_MIN_LOGN); at least the one above 2x K (up to
    2^SIGCONV_FFT_FUSED_MAX_LOGN); from :data:`FUSED_ONE_TILE_MIN_K` taps on 2^SIGCONV_FFT_FUSED_ONE_MAX_LOGN, the
    tile only blocks of N/64 = 512 threads (:func:`fused_wide`) and N/32 = 1024 take (``block`` None or either). On an
    H200 (benchmarks/fused_tiles.py, L=2^26, C=1, each tile at its best block;
    benchmarks/results/H200-2026-12-04-fused-columns/): K=255 0.219 ms with 4096 against 0.249 with 8192 and 0.330 with
    2048; K=1023 0.264 with 4096 against 0.268 with 16384; K=2047 0.284 with 16384 against 0.308 with 8192; K=4095 0.325
    with 16384 against 0.449 with 8192 (and 0.381 with 32768 in columns:
    benchmarks/results/H200-2026-12-04-fused-columns-32768/); K=7921 0.395 with 32768 against 0.444 with 16384.
    ValueError for K above half the largest tile that every block takes."""
    from sigconv import _kernels

    lim = _kernels.constants()
    lo, hi = 1 << lim["SIGCONV_FFT_FUSED_MIN_LOGN"], 1 << lim["SIGCONV_FFT_FUSED_MAX_LOGN"]
    if not 1 <= K <= hi // 2:
        raise ValueError(f"fft_fused takes 1 to {hi // 2} taps, got K={K}")
    one = 1 << lim["SIGCONV_FFT_FUSED_ONE_MAX_LOGN"]
    if K >= FUSED_ONE_TILE_MIN_K and (block is None or 32 * int(block) >= one or fused_wide(one, block)):
        return one
    n = min(_FUSED_SHARED_TILE_MAX, max(lo, 1 << (16 * K - 1).bit_length()))
    if K - 1 >= n * _FUSED_MAX_OVERLAP:
        n = 1 << lim["SIGCONV_FFT_FUSED_COLS_MIN_LOGN"]
    return min(hi, max(n, 1 << (2 * K - 1).bit_length()))


def fused_wide(N: int, block: int) -> bool:
    """Whether tiles of N samples on ``block`` threads run two butterflies a thread (conv1d_fft_fused<logn, true,
    pairs, true>, kernels/fft_fused.cuh, ff_tile_wide): the longest tile (2^SIGCONV_FFT_FUSED_ONE_MAX_LOGN) on N/64 =
    512 threads, each with twice the registers of a thread of 1024, in place in one buffer as on N/32."""
    from sigconv import _kernels

    return N == 1 << _kernels.constants()["SIGCONV_FFT_FUSED_ONE_MAX_LOGN"] and 64 * int(block) == N


def fused_block(K: int, tile: Optional[int] = None) -> int:
    """fft_fused's block for K taps: one thread per 32 samples of its tile (``tile``, else :func:`fused_tile`), 64
    at least: the fewest threads that hold a transform's pass in registers, so that it runs in place in one buffer
    (kernels/fft_fused.cuh); on the longest tile one per 64 samples, two butterflies a thread (:func:`fused_wide`),
    whose columns run as 32 x 32. On an H200 (benchmarks/fused_ab.py, L=2^26, one channel,
    benchmarks/results/H200-2026-12-05-fused-columns32/): K=7921 0.345 ms on 512 threads against 0.373 on 1024, K=8000
    0.346 against 0.373."""
    n = fused_tile(K) if tile is None else int(tile)
    return n // 64 if fused_wide(n, n // 64) else max(64, n // 32)


def _fft_f32(K: int) -> list:
    """The float32 FFT candidates, favourite first: fft_fused at :func:`fused_block` and at the next block (twice
    as many threads, or half as many at 1024), where it applies (:func:`fused_tile`'s taps), then cuFFT's."""
    try:
        b = fused_block(K)
    except ValueError:  # more taps than the fused kernel takes
        return [("fft", 256)]
    return [("fft_fused", b), ("fft_fused", 2 * b if b < 1024 else b // 2), ("fft", 256)]


#: float64: direct kernels are candidates up to this many taps; the FFT is the favourite above.
F64_DIRECT_MAX_K = 32
#: Tiled blocks in the order they are tried: small blocks (more blocks per multiprocessor) tend to win at
#: short K, so 64 is timed although 256 is the favourite.
_TILED_BLOCKS = (256, 128, 64, 512)

#: regblock blocks of 6 and 10 thread rows (tiles of 12 and 20 output rows), candidates for single-channel jobs: on
#: an H200 the 3x3 spectrogram (1025 x 65536) took 0.157 and 0.160 ms with them against 0.228 ms with 8 rows (16 or
#: 4 rows: 0.299, 0.250).
_REGBLOCK_NPOT = ((16, 6), (16, 10))

#: Separability test: s[1] <= SEP_RTOL * s[0] for every (co, ci) pair.
SEP_RTOL = 1e-7
#: conv2d: from this many taps (kH * kW) on, the separable passes come before the strip kernel.
SEP_BEFORE_STRIP_TAPS = 81
#: conv2d: prefetch's one-warp blocks come before regblock for this many output channels or fewer.
PREFETCH_FIRST_MAX_COUT = 8
#: conv2d: the implicit GEMM (igemm) comes first for multi-channel layers with at least this many output channels
#: and this many taps per output (Cin * kH * kW); its tile is up to 128 channels by 128 pixels, which a narrower layer
#: leaves mostly idle. Below either it is timed after the direct kernels.
IGEMM_FIRST_MIN_COUT = 32
IGEMM_FIRST_MIN_DEPTH = 64
#: igemm blocks in the order they are tried (tiles of 128 x 128, 64 x 128 and 32 x 256 channels x pixels).
_IGEMM_BLOCKS = ((16, 16), (16, 8), (32, 4))


def _job1d(C, L, K, dtype) -> Conv1dJob:
    return Conv1dJob(int(C), int(L), int(K), np.dtype(dtype).name)


def _keep_user_block(op: str, backend: str, best: tuple, block) -> tuple:
    """``best`` with the caller's ``block`` instead of the chosen one when the chosen variant accepts it."""
    if block is None:
        return best
    try:
        return best[0], table.get(op, backend, best[0]).launch_block(as_block(block))
    except ValueError:  # a block the chosen variant does not take
        return best


def _applicable(op: str, backend: str, cands: list, job) -> list:
    """``cands`` without repeats, keeping only registered ``auto`` candidates that apply to ``job``."""
    out, seen, fits = [], set(), {}
    for name, block in cands:
        if (name, block) in seen:
            continue
        seen.add((name, block))
        if name not in fits:  # once per variant: the candidates list several blocks of each
            v = table.get(op, backend, name)
            fits[name] = v.auto and v.applies(job) is None
        if fits[name]:
            out.append((name, block))
    return out


def _sources(op: str, backend: str, cands: list) -> tuple:
    """Kernel files whose hash keys the autotuner's cache for these candidates."""
    return tuple(sorted({table.get(op, backend, n).source for n, _ in cands} - {None}))


def _tuned(op: str, backend: str, key: tuple, cands: list, runner: Optional[Callable], outputs: int,
           sources: Optional[tuple] = None) -> tuple:
    if runner is None or outputs < AUTOTUNE_MIN_OUTPUTS:
        return cands[0]
    from sigconv.registry import tune

    return tune.pick(op, key, cands, runner, sources=_sources(op, backend, cands) if sources is None else sources)


# ---------------------------------------------------------------------------------------------- conv1d


def conv1d_shape_key(C: int, L: int, K: int, dtype) -> tuple:
    """Autotuner shape class: (C bucket, log2 L bucket, K class, dtype); the K class is K itself up to 64, else the
    next power of two or :data:`FUSED_ONE_TILE_MIN_K` - 1 (where fft_fused's tile and block change), whichever is
    nearer above K."""
    cb = 1 << max(0, (int(C) - 1).bit_length())
    lb = max(0, int(L).bit_length() - 1)
    K = int(K)
    kb = K if K <= 64 else min(b for b in (1 << (K - 1).bit_length(), FUSED_ONE_TILE_MIN_K - 1) if b >= K)
    return (cb, lb, kb, np.dtype(dtype).name)


def conv1d_candidates(backend: str, C: int, L: int, K: int, dtype) -> list:
    """(variant, block) pairs ``auto`` may run, favourite first (tiled for short filters, ffa up to 125 taps, fft for
    long)."""
    return list(_conv1d_candidates(backend, int(C), int(L), int(K), np.dtype(dtype).name))


@functools.lru_cache(maxsize=512)
def _conv1d_candidates(backend: str, C: int, L: int, K: int, dtype: str) -> tuple:
    """:func:`conv1d_candidates`, once per shape (the launch path asks on every call; the registry is fixed once
    the backends are imported)."""
    job = _job1d(C, L, K, dtype)
    if backend == "cpu":
        direct = K <= DIRECT_MAX_TAPS or L <= DIRECT_MAX_TAPS or L * K <= DIRECT_MAX_WORK
        return [("direct" if direct else "fft", None)]
    if job.dtype == "float32":
        ffa = [("ffa", b) for b in _FFA_BLOCKS] if K >= FFA_FAVOURITE_MIN_K else []  # none above ffa's max_taps
        if K <= TILED_FAVOURITE_MAX_K:
            cands = ffa + [("tiled", b) for b in _TILED_BLOCKS] + (_fft_f32(K) if K >= FFT_CANDIDATE_MIN_K else [])
        elif K <= TILED_MAX_K:
            cands = ffa + _fft_f32(K) + [("tiled", 256), ("tiled", 128)]
        else:
            cands = _fft_f32(K) + [("fft", 512)]
    elif K <= F64_DIRECT_MAX_K:
        cands = [("shared", 256), ("l2", 256), ("naive", 256), ("fft", 256)]
    else:
        cands = [("fft", 256), ("shared", 256)]
    return tuple(_applicable("conv1d", backend, cands, job))


def choose_conv1d(backend: str, C: int, L: int, K: int, dtype, *, out_len: Optional[int] = None, block=None,
                  runner: Optional[Callable] = None) -> tuple:
    """(variant, block) that ``variant="auto"`` runs for C channels of L samples and K taps.

    Parameters
    ----------
    backend : {"cpu", "cuda"}
    out_len : int, optional
        Outputs per channel (default L): jobs of fewer than :data:`AUTOTUNE_MIN_OUTPUTS` are not timed.
    block : optional
        The caller's block: kept when the chosen variant accepts it.
    runner : callable(variant, block), optional
        Launches the job once on representative, allocated data (cuda): with it the candidates are timed
        (once per shape class, see :func:`sigconv.registry.tune.pick`); without it the favourite wins.
        The cpu block is None.
    """
    cands = conv1d_candidates(backend, C, L, K, dtype)
    if backend == "cpu":
        return cands[0]
    outputs = int(C) * int(L if out_len is None else out_len)
    best = _tuned("conv1d", backend, conv1d_shape_key(C, L, K, dtype), cands, runner, outputs)
    return _keep_user_block("conv1d", backend, best, block)


# ---------------------------------------------------------------------------------------------- conv2d


def rank1_factors(w):
    """(u, v, None) with w[co, ci] ~= outer(u[co, ci], v[co, ci]) for every pair, or (None, None, reason).

    ``w`` is (Cout, Cin, kH, kW) in host memory (an array with ``.get()`` is read back); u and v are
    float64 arrays of shape (Cout, Cin, kH) and (Cout, Cin, kW). Rank-1 means s[1] <= SEP_RTOL * s[0].
    """
    wn = np.asarray(w.get() if hasattr(w, "get") else w, dtype=np.float64)
    U, s, Vt = np.linalg.svd(wn, full_matrices=False)  # batched over (co, ci)
    s0 = s[..., 0]
    s1 = s[..., 1] if s.shape[-1] > 1 else np.zeros_like(s0)
    bad = s1 > SEP_RTOL * s0
    if np.any(bad):
        co, ci = (int(v) for v in np.argwhere(bad)[0])
        ratio = s1[co, ci] / s0[co, ci] if s0[co, ci] else np.inf
        return None, None, (f"the kernel is not rank-1 (separable): pair (co={co}, ci={ci}) has singular values "
                            f"s1/s0 = {ratio:.3g} > {SEP_RTOL:g}")
    root = np.sqrt(s0)
    u = U[..., :, 0] * root[..., None]
    v = Vt[..., 0, :] * root[..., None]
    return u, v, None


def separable_worth_checking(w_shape) -> bool:
    """Separability can only win with one channel in and out and a kernel of 5x5 or more."""
    Cout, Cin, kH, kW = w_shape
    return Cout == 1 and Cin == 1 and min(kH, kW) > 1 and kH * kW >= 25


def host_rank1(variant: str, w_shape, host_weights) -> tuple:
    """(rank1, factors) from the caller's host copy of the weights, or (None, None) without one.

    Checked only where it can matter: for ``separable`` (whose launcher then needs no read-back) and for
    ``auto`` where :func:`separable_worth_checking`. Device weights are never read back for this: that would
    stall the GPU queue on every call; pass ``variant="separable"`` to run the separable passes on them.
    """
    if host_weights is None or not (variant == "separable"
                                    or (variant == "auto" and separable_worth_checking(w_shape))):
        return None, None
    u, v, why = rank1_factors(np.asarray(host_weights, dtype=np.float64).reshape(w_shape))
    return (True, (u, v)) if why is None else (False, None)


def _bucket(n: int) -> int:
    """Power-of-two size class."""
    return 1 << max(0, int(n) - 1).bit_length()


def conv2d_shape_key(job: Conv2dJob, separable: bool) -> tuple:
    """The autotuner's shape class of ``job``; the border is part of it (a variant's cost under wrap or symm is
    not its cost with zeros)."""
    N, Cin, H, W = job.x_shape
    Cout, _, kH, kW = job.w_shape
    return (job.dtype, _bucket(N), int(Cin), int(Cout), int(kH), int(kW), int(job.stride[0]), int(job.stride[1]),
            int(job.pad[1]) % 4, _bucket(job.out_hw[0]), _bucket(job.out_hw[1]), int(W % 4 == 0), bool(separable),
            job.border)


def _separable(job: Conv2dJob) -> bool:
    return bool(job.rank1) and separable_worth_checking(job.w_shape)


def conv2d_candidates(backend: str, job: Conv2dJob) -> list:
    """(variant, block) pairs ``auto`` may run for ``job``, favourite first."""
    kH, kW = job.w_shape[2], job.w_shape[3]
    if backend == "cpu":
        fft = kH * kW > FFT2D_MIN_TAPS and tuple(job.stride) == (1, 1)
        return [("fft" if fft else "direct", None)]
    sep = _separable(job)
    strip = table.get("conv2d", backend, "strip").applies(job) is None
    cands = []
    if sep and (not strip or kH * kW >= SEP_BEFORE_STRIP_TAPS):
        cands += [("separable", (32, 8)), ("separable", (32, 4))]
    if strip:
        cands += [("strip", b) for b in ((64, 1), (128, 1), (32, 4), (256, 1))]
    if sep and strip and kH * kW < SEP_BEFORE_STRIP_TAPS:
        cands += [("separable", (32, 8))]
    pre = [("prefetch", b) for b in ((8, 4), (16, 4), (8, 8), (16, 8))]
    reg = [("regblock", b) for b in ((16, 8), (32, 4), (16, 16), (32, 8))
           + (_REGBLOCK_NPOT if job.single_channel else ())]
    direct = pre + reg if job.w_shape[0] <= PREFETCH_FIRST_MAX_COUT else reg + pre
    ig = [] if job.single_channel else [("igemm", b) for b in _IGEMM_BLOCKS]
    Cout, depth = job.w_shape[0], job.w_shape[1] * kH * kW
    cands += ig + direct if Cout >= IGEMM_FIRST_MIN_COUT and depth >= IGEMM_FIRST_MIN_DEPTH else direct + ig
    cands += [("shared", (32, 8)), ("naive", (32, 8))]
    return _applicable("conv2d", backend, cands, job)


#: (backend, job, registry generation) -> (candidates, their kernel sources, shape key, outputs): what the chooser
#: derives from a job, memoised so that a repeated call (a launch's host path) costs a lookup. Bounded.
_PLANS: dict = {}
_PLANS_MAX = 1024


def _conv2d_plan(backend: str, job: Conv2dJob) -> tuple:
    key = (backend, job, table.generation())
    plan = _PLANS.get(key)
    if plan is None:
        cands = tuple((v, as_block(b)) for v, b in conv2d_candidates(backend, job))
        outputs = int(job.x_shape[0]) * int(job.w_shape[0]) * int(job.out_hw[0]) * int(job.out_hw[1])
        plan = (cands, _sources("conv2d", backend, cands), conv2d_shape_key(job, _separable(job)), outputs)
        if len(_PLANS) >= _PLANS_MAX:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def choose_conv2d(backend: str, job: Conv2dJob, *, block=None, runner: Optional[Callable] = None) -> tuple:
    """(variant, block) that ``variant="auto"`` runs for ``job``.

    ``job.rank1`` is what the caller knows from a host copy of the weights (:func:`host_rank1`); None (device
    weights) never chooses ``separable``. ``job.border`` is part of the autotuner's shape class, so the
    ``runner`` should launch the job with its border. ``block`` and ``runner`` as for :func:`choose_conv1d`; the
    cpu block is None.
    """
    cands, sources, key, outputs = _conv2d_plan(backend, job)
    if backend == "cpu":
        return cands[0]
    best = _tuned("conv2d", backend, key, cands, runner, outputs, sources)
    return _keep_user_block("conv2d", backend, best, block)


# ------------------------------------------------------------------------------------ sigconv tune

#: 2-D shape classes ``sigconv tune`` fills: (N, Cin, H, W, Cout, k, pad), stride 1, k x k kernels: the
#: spectral gate's mask smoothing at two spectrogram sizes, then the two articles' layers.
TUNE_2D = tuple([(1, 1, 1025, 65536, 1, k, k // 2) for k in (3, 5, 9, 15)]
                + [(1, 1, 257, 16384, 1, k, k // 2) for k in (3, 5, 9, 15)]
                + [(1, 6, 768, 512, 6, 6, 0), (16, 256, 128, 128, 256, 3, 1)])


def _registered_runner(op: str, args: tuple, out):
    """runner(variant, block) launching the registered cuda variant of ``op`` on ``args`` into ``out``."""

    def runner(variant, block):
        table.get(op, "cuda", variant).run(*args, block, out=out)

    return runner


def fill_autotune_cache(channels=(1, 2, 8), lengths=(1 << 16, 1 << 20, 1 << 23),
                        taps=(7, 15, 25, 31, 63, 127, 255, 511, 1023, 2047, 4095, 8191), *, conv2d: bool = True,
                        echo=print) -> list:
    """Time ``auto``'s candidates for common shape classes now, so that later calls find the winners cached.

    conv1d: every (channels, lengths, taps) combination in float32, "same" window; conv2d (unless
    ``conv2d=False``): the shapes of :data:`TUNE_2D`. Each choice is passed to ``echo`` as one line.
    Returns the list of ((op, shape), (variant, block)). ``RuntimeError`` when no GPU is usable.
    """
    from sigconv._core import devices as _devices

    reason = _devices.cuda_reason()
    if reason:
        raise RuntimeError(f"no usable GPU ({reason})")
    import cupy

    from sigconv.registry import tune

    if not tune.enabled():
        echo("sigconv tune: SIGCONV_AUTOTUNE=0 disables timing; nothing to do")
        return []
    echo(f"sigconv tune: cache {tune.cache_path()}")
    done = []
    rng = cupy.random.default_rng(0)
    for L in lengths:
        for C in channels:
            x = rng.standard_normal((C, L), dtype=cupy.float32)
            out = cupy.empty((C, L), dtype=cupy.float32)
            for K in taps:
                w = rng.standard_normal(K, dtype=cupy.float32)
                runner = _registered_runner("conv1d", (x, w, K // 2, L), out)
                choice = choose_conv1d("cuda", C, L, K, "float32", runner=runner)
                key = conv1d_shape_key(C, L, K, "float32")
                echo(f"conv1d C={C:<3d} L={L:<9d} K={K:<5d} key={key} -> {choice[0]} block={choice[1]}")
                done.append((("conv1d", (C, L, K)), choice))
            del x, out
            cupy.get_default_memory_pool().free_all_blocks()
    for N, Cin, H, W, Cout, k, pad in TUNE_2D if conv2d else ():
        x = rng.standard_normal((N, Cin, H, W), dtype=cupy.float32)
        w = rng.standard_normal((Cout, Cin, k, k), dtype=cupy.float32)
        out_hw = (H + 2 * pad - k + 1, W + 2 * pad - k + 1)
        out = cupy.empty((N, Cout) + out_hw, dtype=cupy.float32)
        job = Conv2dJob((N, Cin, H, W), (Cout, Cin, k, k), "float32", (1, 1), (pad, pad), out_hw)
        runner = _registered_runner("conv2d", (x, w, None, (1, 1), (pad, pad), out_hw), out)
        choice = choose_conv2d("cuda", job, runner=runner)
        echo(f"conv2d {N}x{Cin}x{H}x{W} Cout={Cout} k={k} pad={pad} -> {choice[0]} block={choice[1]}")
        done.append((("conv2d", (N, Cin, H, W, Cout, k, pad)), choice))
        del x, w, out
        cupy.get_default_memory_pool().free_all_blocks()
    return done
