"""Sound files as the engine sees them: what a file holds (:func:`probe`), and how its samples travel
(:func:`pcm_spec`: read, arithmetic and write dtypes) and are written back (:func:`quantise`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import soundfile as sf

from sigconv._core.errors import InputError

__all__ = ["AudioInfo", "probe", "PCMSpec", "pcm_spec", "quantise"]


@dataclass
class AudioInfo:
    path: Path
    frames: int
    samplerate: int
    channels: int
    format: str
    subtype: str
    endian: str

    @property
    def duration(self) -> float:
        return self.frames / self.samplerate if self.samplerate else 0.0


def probe(path, allow_truncated: bool = False) -> AudioInfo:
    """Open ``path`` and check it is audio worth filtering; ``InputError`` with one line otherwise."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not an audio file")
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise InputError(f"{p}: cannot read ({exc.strerror})") from None
    if size == 0:
        raise InputError(f"{p}: file is empty")
    try:
        with sf.SoundFile(str(p)) as f:
            info = AudioInfo(p, f.frames, f.samplerate, f.channels, f.format, f.subtype, f.endian)
            log = f.extra_info
    except sf.LibsndfileError as exc:
        msg = str(exc).split(":", 1)[-1].strip() if ":" in str(exc) else str(exc)
        raise InputError(f"{p}: not an audio file sigconv can read ({msg})") from None
    except (OSError, RuntimeError) as exc:
        raise InputError(f"{p}: cannot read ({exc})") from None
    if info.channels < 1:
        raise InputError(f"{p}: has zero channels")
    if info.frames < 1:
        raise InputError(f"{p}: holds no audio frames")
    if info.samplerate < 1:
        raise InputError(f"{p}: invalid sample rate {info.samplerate}")
    if "should be" in log and not allow_truncated:
        promised = _promised_frames(log, info)
        extra = f" (the header promises {promised} frames, the file holds {info.frames})" if promised else ""
        raise InputError(f"{p}: truncated {info.format} file{extra}; pass --allow-truncated to filter what is there")
    return info


def _promised_frames(log: str, info: AudioInfo) -> Optional[int]:
    for line in log.splitlines():
        if line.startswith(("data", "SSND")) and "should be" in line:
            try:
                nbytes = int(line.split(":", 1)[1].split("(")[0])
            except ValueError:
                return None
            width = {"PCM_16": 2, "PCM_24": 3, "PCM_32": 4, "FLOAT": 4, "DOUBLE": 8, "PCM_U8": 1, "PCM_S8": 1}
            w = width.get(info.subtype)
            return nbytes // (w * info.channels) if w else None
    return None


@dataclass(frozen=True)
class PCMSpec:
    """How samples travel: what to read, the arithmetic dtype, and how to write them back."""

    read_dtype: str  # what soundfile reads: float32 / float64 (libsndfile scales PCM to [-1, 1))
    work_dtype: str  # float32 or float64 arithmetic
    out_dtype: str  # what is handed to soundfile.write: int16, int32, float32, float64
    scale: float  # full scale of out_dtype when integer (32768 for int16), else 0
    lo: float  # clip range in out units (integers), or in float units for clipped float formats
    hi: float
    clip: bool


def pcm_spec(subtype: str) -> PCMSpec:
    """Read/work/write dtypes for a libsndfile subtype; integer outputs are rounded and clipped by sigconv
    (identically on every backend), so 16-bit stays 16-bit and 24-bit stays 24-bit."""
    if subtype in ("PCM_16", "PCM_S8", "PCM_U8", "DPCM_16", "DPCM_8", "DWVW_16", "DWVW_12", "ALAW", "ULAW",
                   "IMA_ADPCM", "MS_ADPCM", "GSM610", "G721_32", "G723_24", "G723_40", "VOX_ADPCM", "NMS_ADPCM_16",
                   "NMS_ADPCM_24", "NMS_ADPCM_32"):
        return PCMSpec("float32", "float32", "int16", 32768.0, -32768.0, 32767.0, True)
    if subtype in ("PCM_24", "DWVW_24", "ALAC_16", "ALAC_20", "ALAC_24"):
        # 24-bit: quantise to 2^23 steps and shift into the top of an int32 (libsndfile keeps the top 24 bits)
        return PCMSpec("float32", "float32", "int32", 8388608.0, -8388608.0, 8388607.0, True)
    if subtype in ("PCM_32", "ALAC_32"):
        return PCMSpec("float64", "float64", "int32", 2147483648.0, -2147483648.0, 2147483647.0, True)
    if subtype == "DOUBLE":
        return PCMSpec("float64", "float64", "float64", 0.0, 0.0, 0.0, False)
    if subtype == "FLOAT":
        return PCMSpec("float32", "float32", "float32", 0.0, 0.0, 0.0, False)
    # lossy/other codecs (VORBIS, OPUS, MPEG layers, ...): float in/out, clipped to [-1, 1]
    return PCMSpec("float32", "float32", "float32", 0.0, -1.0, 1.0, True)


def quantise(y: np.ndarray, spec: PCMSpec) -> tuple[np.ndarray, int]:
    """(frames, C) float -> what soundfile writes, and how many samples were clipped."""
    if not spec.clip:
        return y.astype(spec.out_dtype, copy=False), 0
    if spec.scale:
        q = np.rint(y * spec.scale)
        clipped = int(np.count_nonzero((q < spec.lo) | (q > spec.hi)))
        np.clip(q, spec.lo, spec.hi, out=q)
        q = q.astype(spec.out_dtype)
        if spec.out_dtype == "int32" and spec.scale == 8388608.0:
            q <<= 8
        return q, clipped
    clipped = int(np.count_nonzero((y < spec.lo) | (y > spec.hi)))
    return np.clip(y, spec.lo, spec.hi).astype(spec.out_dtype, copy=False), clipped
