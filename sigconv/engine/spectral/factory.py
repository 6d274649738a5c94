"""The spectral gate for the file pipeline: :func:`spectral_file_filter` checks a :class:`GateSpec` against one
input, reads the noise reference (a clip or a range of the input) and returns the block-filter factory.

Importing this module stays light (no soundfile, no file engine): they load when a file is gated.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

import numpy as np

from sigconv._core.errors import InputError
from sigconv._core.xp import to_host
from sigconv.engine.spectral.gate import Gate

if TYPE_CHECKING:
    from sigconv.engine.audio import AudioInfo
    from sigconv.engine.settings import GateSpec, KernelChoice

__all__ = ["spectral_file_filter", "gate_for"]


def gate_for(gate: GateSpec, kernel: KernelChoice, channels: int, frames: int, fs: float, dtype) -> Gate:
    """The :class:`Gate` of ``gate`` (a :class:`~sigconv.engine.settings.GateSpec`) on ``kernel``'s backend for a
    signal of ``channels`` x ``frames`` at ``fs`` Hz; ``ValueError`` naming a bad value and its range."""
    return Gate(channels, frames, fs, stationary=gate.stationary, n_std=gate.n_std, prop_decrease=gate.strength,
                freq_smooth_hz=gate.freq_smooth_hz, time_smooth_ms=gate.time_smooth_ms, n_fft=gate.n_fft,
                hop=gate.hop, share_mask=gate.share_mask, kernel=kernel, dtype=dtype)


def _read_range(info, lo, hi, dtype, step=1 << 20):
    """(C, n) chunks of frames [lo, hi) of the sound file ``info`` (a sample that is not a number: InputError)."""
    import soundfile as sf

    from sigconv.engine.audio import read_block, read_failure

    with sf.SoundFile(str(info.path)) as f:
        try:
            f.seek(lo)
        except (sf.LibsndfileError, RuntimeError) as exc:  # "Internal psf_fseek() failed." in a damaged file
            raise read_failure(info.path, exc, lo, info.subtype) from None
        pos = lo
        while pos < hi:
            blk = read_block(f, min(step, hi - pos), dtype, info, pos)
            if blk.shape[0] == 0:
                break
            pos += blk.shape[0]
            yield np.ascontiguousarray(blk.T)


def _clip_threshold(g: Gate, clip: str, info: AudioInfo, read_dtype: str) -> None:
    """Set ``g``'s threshold from the noise clip file ``clip`` (same rate and channels as the input)."""
    from sigconv.engine.audio import probe

    cinfo = probe(clip)
    if cinfo.samplerate != info.samplerate:
        raise InputError(f"{cinfo.path}: noise clip has sample rate {cinfo.samplerate} Hz, the input "
                         f"{info.samplerate} Hz; resample it or use --noise-from")
    if cinfo.channels != info.channels:
        raise InputError(f"{cinfo.path}: noise clip has {cinfo.channels} channel(s), the input {info.channels}")
    try:
        ok = g.stats_from_noise_chunks(_read_range(cinfo, 0, cinfo.frames, read_dtype))
    except Exception as exc:  # noqa: BLE001 (libsndfile errors midway)
        raise InputError(f"{cinfo.path}: cannot read the noise clip ({exc})") from None
    if not ok:
        raise InputError(f"{cinfo.path}: noise clip holds {cinfo.frames} frames, fewer than one STFT frame "
                         f"(n_fft = {g.N})")


def _range_threshold(g: Gate, noise_from: tuple, info: AudioInfo, read_dtype: str) -> None:
    """Set ``g``'s threshold from the seconds ``noise_from`` = (start, end) of the input."""
    start, end = noise_from
    fs = info.samplerate
    if end <= start:
        raise InputError(f"{info.path}: --noise-from range {start:g}-{end:g} s is empty (END must be after START)")
    lo, hi = int(round(start * fs)), int(round(end * fs))
    if hi > info.frames:
        raise InputError(f"{info.path}: --noise-from range {start:g}-{end:g} s is beyond the file "
                         f"({info.duration:.6g} s)")
    if hi - lo < g.N:
        raise InputError(f"{info.path}: --noise-from range {start:g}-{end:g} s holds {hi - lo} frames, fewer "
                         f"than one STFT frame (n_fft = {g.N})")
    g.stats_from_noise_chunks(_read_range(info, lo, hi, read_dtype))


def spectral_file_filter(gate: GateSpec, kernel: KernelChoice, info: AudioInfo) -> tuple[Callable, str]:
    """``(make, description)`` for gating the sound file ``info`` (an :class:`~sigconv.engine.audio.AudioInfo`).

    ``gate`` is a :class:`~sigconv.engine.settings.GateSpec`, ``kernel`` a resolved conv2d
    :class:`~sigconv.engine.settings.KernelChoice` (backend "cpu" or "cuda"). ``make(info, spec)`` returns a
    :class:`~sigconv.engine.spectral.files.SpectralFileFilter` for samples that travel as ``spec`` (a
    ``PCMSpec``) says. The noise reference (``gate.noise_clip`` or ``gate.noise_from``) is read here, once.

    Bad values raise ``ValueError``; data problems (the noise clip's rate or channels, an unreadable clip, an
    empty range or one beyond the file, a noise source shorter than one STFT frame) raise
    ``sigconv.InputError`` with one line.
    """
    from sigconv.engine.audio import pcm_spec
    from sigconv.engine.spectral.files import SpectralFileFilter

    if kernel.op != "conv2d" or kernel.backend not in ("cpu", "cuda"):
        raise ValueError(f"kernel must be a resolved conv2d choice (backend cpu or cuda), got {kernel!r}")
    fs = info.samplerate
    spec = pcm_spec(info.subtype)
    gate0 = gate_for(gate, kernel, info.channels, info.frames, fs, spec.work_dtype)  # bad values: before reading
    if gate.noise_clip:
        _clip_threshold(gate0, gate.noise_clip, info, spec.read_dtype)
        source = f"noise from {Path(gate.noise_clip).name}"
    elif gate.noise_from:
        _range_threshold(gate0, gate.noise_from, info, spec.read_dtype)
        source = f"noise from {gate.noise_from[0]:g}-{gate.noise_from[1]:g} s"
    else:
        source = "noise estimated from the input" if gate.stationary else "moving noise floor"
    thr = to_host(gate0.thr) if gate0.thr is not None else None

    def make(info2, spec2):
        g = gate_for(gate, kernel, info.channels, info.frames, fs, spec2.work_dtype)
        if thr is not None:
            g.set_threshold(thr)
        return SpectralFileFilter(g, spec2, path=info2.path, estimate=gate.stationary and thr is None,
                                  info=info2)

    mode = "stationary" if gate.stationary else "non-stationary"
    desc = (f"spectral gate ({mode}, {source}, strength {gate.strength:g}, n_fft {gate0.N}, hop {gate0.H}"
            + (", shared mask" if gate0.share else "") + (f"; {gate0.smooth_note}" if gate0.smooth_note else "")
            + ")")
    return make, desc

