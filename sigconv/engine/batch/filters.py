"""The filter a file gets, and how a log's channels run through it.

Taps per rate come from ``FirSpec.design`` (with no filter option: the default for the signal's kind, by
its rate), memoised per process. Logs run through the engine's block filter
(:func:`sigconv.engine.file.fir_block_filter`) as float64 samples: float64 on the CPU, float32 on the GPU.
Each filtered run of a table or NPY log is extended at its ends per ``BatchSettings.edges``
(:mod:`.edges`); gaps per ``BatchSettings.gaps``. A wide log (hundreds of channels and more) is filtered in
shorter blocks and, where its channels times the filter's length are many, by groups of channels
(:func:`block_filter`), so that a block's working memory stays bounded whatever the column count.
Outputs that are not finite where the input was (samples too large for the arithmetic) fail the file
(:func:`check_finite`); the arithmetic's overflow warnings never reach the user.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Optional

import numpy as np

from sigconv._core.errors import InputError
from sigconv.engine.batch import gpu_service
from sigconv.engine.batch.edges import extension, filter_into, odd_extension, runs
from sigconv.engine.batch.settings import BatchSettings
from sigconv.engine.settings import FirSpec, KernelChoice, check_filter_fits, phase_delay, signal_kind
from sigconv.registry import table

__all__ = ["kernel_here", "computed_dtype", "taps_for", "block_filter", "filter_run", "filter_columns",
           "check_length", "check_finite", "quiet", "ColumnGroups"]

_EDGE_TEXT = {"odd": "odd-reflected edges", "zero": "zero-padded edges"}
_TAPS: dict = {}
_KERNELS: dict = {}


def kernel_here(kernel: KernelChoice) -> KernelChoice:
    """``kernel`` resolved in this process, once (a GPU context is made only by the first GPU file).
    InputError (one line) when its backend cannot run here."""
    remote = gpu_service.client()
    if remote is not None and kernel.backend != "cpu":
        return _served_kernel(kernel, remote)
    hit = _KERNELS.get(kernel)
    if hit is None:
        try:
            hit = _KERNELS[kernel] = kernel.resolve()
        except RuntimeError as exc:
            raise InputError(str(exc)) from None
    return hit


def computed_dtype(settings: BatchSettings) -> np.dtype:
    """The precision the settings' kernel filters in here: float32 on the GPU, float64 on the CPU."""
    return np.dtype(np.float32 if kernel_here(settings.kernel).backend == "cuda" else np.float64)


def _served_kernel(kernel: KernelChoice, remote) -> KernelChoice:
    """In a worker whose GPU filtering goes to the service: "cuda" (its variant checked against the registry, no
    CUDA here); on "auto", "cpu" once the service said that CUDA did not start."""
    if remote.unavailable is not None:
        if kernel.backend == "cuda":
            raise InputError(f"backend 'cuda' is not usable here: {remote.unavailable}")
        key = ("cpu", kernel)
        if key not in _KERNELS:
            _KERNELS[key] = replace(kernel, backend="cpu").resolve()
        return _KERNELS[key]
    key = ("served", kernel)
    if key not in _KERNELS:
        if kernel.variant != "auto":
            import sigconv.backends  # noqa: F401 - fills the registry (no CUDA is touched)

            table.get(kernel.op, "cuda", kernel.variant)  # ValueError naming the valid variants
        _KERNELS[key] = replace(kernel, backend="cuda")
    return _KERNELS[key]


def taps_for(fir: FirSpec, fs: float, edges=None, frames=None, source=None):
    """(taps, description) for rate ``fs``, memoised per process. ValueError (one line) when the options do
    not fit this rate (e.g. a cutoff above its Nyquist). ``edges`` (an edge rule) is named in the description.
    With ``frames`` (the samples of the file ``source``), a filter longer than that is refused by
    :func:`check_length` before it is designed."""
    key = (fir, float(fs), edges)
    hit = _TAPS.get(key)
    if hit is None:
        try:
            if frames is not None:
                check_length(fir.length(fs, signal_kind(fs)), frames, fs, source)
            d = fir.design(fs, signal_kind(fs))
        except (ValueError, OverflowError) as exc:
            raise ValueError(f"at {fs:g} Hz: {exc}") from None
        except MemoryError:
            raise ValueError(f"at {fs:g} Hz: the filter needs more memory to design than there is") from None
        taps = d.taps
        more = f", {_EDGE_TEXT[edges]}" if edges else ""
        hit = _TAPS[key] = (taps, f"{d.labelled} ({taps.size} taps, {fir.phase} phase{more})")
    elif frames is not None:
        check_length(hit[0], frames, fs, source)
    return hit


#: Samples (frames x channels) of a wide log's filter block.
BLOCK_SAMPLES = 1 << 20
#: Logs of at most this many channels keep the engine's block length (about 2^18 frames).
NARROW_CHANNELS = 8
#: The fewest frames in a block of a wide log.
MIN_BLOCK_FRAMES = 256


class ColumnGroups:
    """Block filters over consecutive groups of channels, driven as one block filter (``process``, ``finish``,
    ``delay``, ``preferred_frames``, ``read_dtype``): each block is cut into its groups' columns and the outputs
    put side by side. A channel's outputs are those its group's filter gives alone."""

    def __init__(self, parts: list, frames: int):
        self.parts = parts
        self.bounds = np.cumsum([0] + [p.C for p in parts]).tolist()
        self.C = self.bounds[-1]
        self.delay, self.read_dtype = parts[0].delay, parts[0].read_dtype
        self.preferred_frames = frames

    @property
    def variant(self) -> str:
        return self.parts[0].variant

    def process(self, block: np.ndarray) -> np.ndarray:
        return np.concatenate([p.process(block[:, a:b]) for p, a, b in zip(self.parts, self.bounds, self.bounds[1:])],
                              axis=1)

    def finish(self) -> np.ndarray:
        return np.concatenate([p.finish() for p in self.parts], axis=1)


def block_filter(taps, channels: int, settings: BatchSettings, kernel: Optional[KernelChoice] = None):
    """A block filter for float64 (frames, channels) samples on the settings' kernel (or ``kernel``, resolved).

    A block of the engine's length (about 2^18 frames) over all channels of a wide log would take gigabytes (a
    20,000 x 700 CSV ran out of memory): beyond ``NARROW_CHANNELS`` channels a block has ``BLOCK_SAMPLES`` samples
    at most (``MIN_BLOCK_FRAMES`` frames at least), and where the channels times (block + filter) length exceed it too the
    channels go to several filters (:class:`ColumnGroups`). Both ways the same for a log read whole or streamed,
    since both feed the filter this returns (the block cut decides an output's last bits)."""
    from sigconv.engine.audio import pcm_spec
    from sigconv.engine.file import fir_block_filter

    kernel = kernel or kernel_here(settings.kernel)

    def make(c: int):
        return fir_block_filter(taps, c, pcm_spec("DOUBLE"), kernel=kernel, phase=settings.fir.phase)

    flt = make(channels)
    pf = int(flt.preferred_frames)
    if channels <= NARROW_CHANNELS:
        return flt
    frames = max(MIN_BLOCK_FRAMES, min(pf, BLOCK_SAMPLES // channels))
    group = max(1, BLOCK_SAMPLES // (frames + len(taps)))
    if group >= channels:
        flt.preferred_frames = frames
        return flt
    del flt
    return ColumnGroups([make(min(group, channels - a)) for a in range(0, channels, group)], frames)


def quiet():
    """NumPy's floating-point warnings off, while filtering: samples too large for the arithmetic overflow, and
    :func:`check_finite` says so in one line instead."""
    return np.errstate(over="ignore", invalid="ignore", divide="ignore", under="ignore")


def check_finite(y: np.ndarray, path, labels, unit: str, first: int = 0, x: Optional[np.ndarray] = None,
                 dtype=np.float64) -> None:
    """InputError (one line) naming the first output of (n, C) ``y`` that is not finite, or not finite once written
    as ``dtype`` (one, or one per channel: float32 outputs overflow sooner), where the input ``x`` was (``x`` None:
    the input had no gaps). ``labels[c]`` names channel c ("column 'x'"), ``unit`` its rows ("data row"), ``first``
    the number of y's row 0. Such an output comes from finite samples too large for the filter's arithmetic; the
    caller never writes it."""
    if isinstance(dtype, (list, tuple)):
        limit = np.array([np.finfo(d).max for d in dtype], np.float64)
    else:
        limit = float(np.finfo(dtype).max)
    with quiet():
        ok = np.abs(y) <= limit
        if ok.all():
            return
        bad = ~ok if x is None else ~ok & np.isfinite(x)
    if not bad.any():
        return
    r, c = (int(v) for v in np.argwhere(bad)[0])
    raise InputError(f"{path}: {labels[c]} {unit} {first + r}: the filtered value is not finite ({int(bad.sum())} "
                     f"such value(s)): the samples are too large for the filter's arithmetic; scale the channel down")


def run_extension(flt, taps, settings: BatchSettings) -> tuple[int, int]:
    """``filter_into``'s ``ext`` for block filter ``flt`` under the settings' edge rule."""
    return extension(len(taps), int(flt.delay), settings.edges)


#: Runs of at most this many samples (frames x channels) filter on the GPU in one go (``gpu_file.filter_span``:
#: one transfer each way, one kernel) rather than through the block filter; larger ones stream in blocks.
GPU_WHOLE_RUN_SAMPLES = 1 << 24


def filter_run(taps, x, out, settings: BatchSettings) -> None:
    """Filter (n, C) run ``x`` into ``out``, extended per ``settings.edges``. On the GPU a run of at most
    ``GPU_WHOLE_RUN_SAMPLES`` goes in one piece, and in a pool worker served by the GPU's process (:mod:`.gpu_service`)
    every run goes in pieces of at most that size; else through a fresh block filter. The outputs are the same either
    way (float32 on the device)."""
    with quiet():
        _filter_run(taps, x, out, settings)


def _filter_run(taps, x, out, settings: BatchSettings) -> None:
    kernel = kernel_here(settings.kernel)
    n, C = x.shape
    if kernel.backend == "cuda":
        remote = gpu_service.client()
        if remote is not None or n * C <= GPU_WHOLE_RUN_SAMPLES:
            try:
                _whole_run(taps, x, out, settings, kernel, remote)
                return
            except gpu_service.Unavailable:
                kernel = kernel_here(settings.kernel)  # "auto": the CPU; "cuda": InputError
    flt = block_filter(taps, C, settings, kernel)
    if kernel.backend == "cuda":
        from sigconv.engine.gpu_file import DEVICE_LOCK

        with DEVICE_LOCK:
            filter_into(flt, x, out, ext=run_extension(flt, taps, settings))
        return
    filter_into(flt, x, out, ext=run_extension(flt, taps, settings))


def _whole_run(taps, x, out, settings: BatchSettings, kernel: KernelChoice, remote) -> None:
    """``filter_run`` on the GPU without a block filter: the run and its edge extensions (never concatenated for more
    than one piece) in pieces of at most ``GPU_WHOLE_RUN_SAMPLES`` outputs, each one ``filter_span``: here, or on the
    service's GPU (``remote``)."""
    if remote is not None:
        span = remote.filter_span
    else:
        from sigconv.engine.gpu_file import filter_span as span
    n, C = x.shape
    K = len(taps)
    delay = phase_delay(K, settings.fir.phase)
    left, right = extension(K, delay, settings.edges)
    ends = (odd_extension(x, left, "left") if left else x[:0], odd_extension(x, right, "right") if right else x[:0])
    total = left + n + right
    step = max(1, GPU_WHOLE_RUN_SAMPLES // C)
    for o in range(0, n, step):
        m = min(step, n - o)
        a = max(0, left + o + delay - (K - 1))  # the extended samples outputs o .. o + m - 1 read
        b = min(total, left + o + m + delay)
        xe = _extended_rows(x, ends, left, a, b)
        out[o:o + m] = span(xe, taps, m, offset=left + o - a, delay=delay, variant=kernel.variant, block=kernel.block)


def _extended_rows(x, ends, left: int, a: int, b: int) -> np.ndarray:
    """Rows ``a .. b - 1`` of ``x`` with ``ends`` (its left and right extensions, ``left`` rows on the left)
    around it."""
    n = x.shape[0]
    parts = [ends[0][a:min(b, left)], x[max(a - left, 0):max(min(b - left, n), 0)],
             ends[1][max(a - left - n, 0):max(b - left - n, 0)]]
    parts = [p for p in parts if len(p)]
    if len(parts) == 1:
        return np.asarray(parts[0])
    return np.concatenate(parts) if parts else x[:0]


def filter_columns(x: np.ndarray, taps, settings: BatchSettings, warnings: list, names) -> np.ndarray:
    """Filter (n, C) float64 ``x`` whose gaps (NaN / inf) are handled per ``settings.gaps``:
    interpolate: linear across each gap (edges held), then filter; the output has no gaps.
    split: each run of finite samples is filtered on its own; gaps stay NaN in the output.
    Each filtered run (the filled column with interpolate) is extended at its ends per ``settings.edges``."""
    n, C = x.shape
    bad = ~np.isfinite(x)
    out = np.empty_like(x)
    if not bad.any():
        filter_run(taps, x, out, settings)
        return out
    K = len(taps)
    short = 0
    for c in range(C):
        b = bad[:, c]
        col = x[:, c]
        if b.all():
            warnings.append(f"column {names[c]!r} holds no finite values; written as gaps (NaN)")
            out[:, c] = np.nan  # as every gap: an output never holds inf
            continue
        if not b.any():
            filter_run(taps, col[:, None], out[:, c:c + 1], settings)
            continue
        if settings.gaps == "interpolate":
            idx = np.arange(n)
            filled = col.copy()
            filled[b] = np.interp(idx[b], idx[~b], col[~b])
            filter_run(taps, filled[:, None], out[:, c:c + 1], settings)
            warnings.append(f"column {names[c]!r}: {int(b.sum())} missing sample(s) interpolated")
        else:
            out[:, c] = np.nan
            rr = runs(~b)
            for a, e in rr:
                short += (e - a) < K
                filter_run(taps, col[a:e, None], out[a:e, c:c + 1], settings)
            warnings.append(f"column {names[c]!r}: {int(b.sum())} missing sample(s) left as gaps; "
                            f"{len(rr)} run(s) filtered separately")
    if short:
        how = ("their ends are extended by odd reflection (and, beyond what a run can reflect, its outermost "
               "reflected value held), so their outputs rest largely on that extension"
               if settings.edges == "odd" else "filtered with zero padding at their edges")
        warnings.append(f"{short} run(s) between gaps are shorter than the filter ({K} taps): {how}")
    return out


def check_length(taps, frames: int, fs: float, path) -> None:
    """InputError when the filter (its taps, or their count) is longer than the file."""
    check_filter_fits(taps if isinstance(taps, int) else len(taps), frames, fs, path, unit="samples")
