"""Sound files as the engine sees them: what a file holds (:func:`probe`), and how its samples travel
(:func:`pcm_spec`: read, arithmetic and write dtypes) and are written back (:func:`quantise`)."""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import numpy as np
import soundfile as sf

from sigconv._core.errors import InputError
from sigconv._core.xp import array_namespace

__all__ = ["AudioInfo", "probe", "audio_extent", "PCMSpec", "pcm_spec", "quantise", "read_failure", "check_finite",
           "read_block"]


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
    """Open ``path`` and check it is audio worth filtering; ``InputError`` with one line otherwise.

    A file is truncated when its header promises more audio than the file holds (see :func:`audio_extent`);
    the pad byte after an odd-sized chunk, and warnings libsndfile logs about it, do not count."""
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
            if info.frames > 0 and info.channels > 0:
                try:  # an encoding libsndfile opens but cannot read back (e.g. DWVW) fails here, not midway
                    f.read(1, dtype="float32")
                except sf.LibsndfileError as exc:
                    raise InputError(f"{p}: cannot read its {info.subtype} audio ({_reason(exc)})") from None
    except sf.LibsndfileError as exc:
        raise InputError(f"{p}: not an audio file sigconv can read ({_reason(exc)})") from None
    except (OSError, RuntimeError) as exc:
        raise InputError(f"{p}: cannot read ({exc})") from None
    if info.channels < 1:
        raise InputError(f"{p}: has zero channels")
    if info.frames < 1:
        raise InputError(f"{p}: holds no audio frames")
    if info.samplerate < 1:
        raise InputError(f"{p}: invalid sample rate {info.samplerate}")
    if not allow_truncated:
        width = _SAMPLE_BYTES.get(info.subtype)
        extent = audio_extent(p, size, width * info.channels if width else None)
        if extent is not None and extent[0] > extent[1]:
            raise InputError(f"{p}: truncated {info.format} file ({_shortfall(extent, info)}); "
                             "pass --allow-truncated to filter what is there")
    return info


def check_finite(block: np.ndarray, offset: int, info: AudioInfo) -> None:
    """InputError (one line) naming the first sample of ``block`` ((n, C) as read, frames from ``offset``) that is
    inf or NaN: a float file holding one, or a float64 value beyond the float32 range it was read in. Every reader
    of samples applies it (the file engine, the spectral gate's statistics and noise passes), so none filters,
    or sorts into a histogram, a sample that is not a number."""
    if block.dtype.kind != "f" or np.isfinite(block).all():
        return
    bad = np.argwhere(~np.isfinite(block))[0]
    frame, ch = int(bad[0]) + offset, int(bad[1])
    where = f"at frame {frame} (t={frame / info.samplerate:.6f} s), channel {ch}"
    v = block[bad[0], bad[1]]
    if np.isinf(v) and info.subtype == "DOUBLE" and block.dtype == np.float32:
        raise InputError(f"{info.path}: sample {where} is beyond the float32 range this filter works in "
                         "(|x| > 3.4e38); refusing to filter")
    raise InputError(f"{info.path}: non-finite sample ({v}) {where}; refusing to filter")


def read_block(f, frames: int, dtype: str, info: AudioInfo, offset: int,
               out: Optional[np.ndarray] = None) -> np.ndarray:
    """The next (n, C) block of the open SoundFile ``f`` of ``info`` (its frames from ``offset`` on; n = 0 at the
    end). A decoder that gives up is :func:`read_failure`'s one line, a float sample that is not a number
    :func:`check_finite`'s. The one way sigconv reads samples: the file engine, the spectral gate's statistics
    pass, its noise range and noise clip. ``out``: a C-contiguous (frames, C) array of ``dtype`` to read into (the
    block returned is its first n rows)."""
    try:
        blk = f.read(frames, dtype=dtype, always_2d=True, out=out)
    except (sf.LibsndfileError, RuntimeError) as exc:  # "flac decoder lost sync", ...
        raise read_failure(info.path, exc, offset, info.subtype) from None
    check_finite(blk, offset, info)
    return blk


def read_failure(path, exc: BaseException, frame: int, subtype: str = "") -> InputError:
    """The one-line InputError for a decoding error met while reading ``path`` in a block starting at ``frame``
    (libsndfile's "flac decoder lost sync", "Internal psf_fseek() failed", ...): the file, where, and libsndfile's
    words."""
    what = f"its {subtype} audio" if subtype else "its audio"
    return InputError(f"{path}: cannot decode {what} past frame {frame} ({_reason(exc).rstrip('.')}); "
                      "the file is damaged")


def _reason(exc) -> str:
    """libsndfile's own words, without soundfile's "Error opening '...'" prefix."""
    return str(exc).split(":", 1)[-1].strip() if ":" in str(exc) else str(exc)


#: Bytes per sample of the uncompressed subtypes (a frame is this times the channels).
_SAMPLE_BYTES = {"PCM_S8": 1, "PCM_U8": 1, "PCM_16": 2, "PCM_24": 3, "PCM_32": 4, "FLOAT": 4, "DOUBLE": 8,
                 "ULAW": 1, "ALAW": 1}


def _shortfall(extent: tuple[int, int], info: AudioInfo) -> str:
    """"the header promises 48000 frames, the file holds 24989" (bytes for compressed subtypes)."""
    promised, held = extent
    width = _SAMPLE_BYTES.get(info.subtype)
    if width:
        return f"the header promises {promised // (width * info.channels)} frames, the file holds {info.frames}"
    return f"the header promises {promised} bytes of audio, the file holds {held}"


def audio_extent(path, size: Optional[int] = None, frame_bytes: Optional[int] = None) -> Optional[tuple[int, int]]:
    """(bytes of audio the header promises, bytes the file holds from where the audio starts), read from the
    container's own chunk headers, for the containers that state their audio's length: WAV (RIFF, RIFX, RF64),
    Wave64, AIFF/AIFC, AU and CAF. None for other containers (FLAC, Ogg, ...), a length left open (streamed
    files) or a header this cannot follow. The pad byte after an odd-sized chunk is not audio, so a file that
    ends without it is not short. ``frame_bytes`` (bytes per frame of uncompressed audio) lets AIFF's frame count
    state the promise."""
    p = Path(path)
    size = p.stat().st_size if size is None else size
    try:
        with open(p, "rb") as fh:
            head = fh.read(12)
            if head[:4] in (b"RIFF", b"RIFX", b"RF64", b"BW64") and head[8:12] == b"WAVE":
                return _riff_extent(fh, size, ">" if head[:4] == b"RIFX" else "<")
            if head[:4] == b"FORM" and head[8:12] in (b"AIFF", b"AIFC"):
                return _iff_extent(fh, size, frame_bytes)
            if head[:4] == b"riff" and len(head) == 12:
                return _w64_extent(fh, size)
            if head[:4] in (b".snd", b"dns."):
                return _au_extent(head, size, ">" if head[:4] == b".snd" else "<")
            if head[:4] == b"caff":
                return _caf_extent(fh, size)
    except (OSError, struct.error):
        return None
    return None


def _chunks(fh, start: int, size: int, endian: str, *, align: int = 2, id_bytes: int = 4, size_fmt: str = "I",
            size_counts_header: bool = False):
    """(id, payload offset, payload size) of each chunk from ``start`` until the file or the headers end."""
    head = id_bytes + struct.calcsize(size_fmt)
    pos = start
    while pos + head <= size:
        fh.seek(pos)
        raw = fh.read(head)
        if len(raw) < head:
            return
        cid = raw[:4]
        (n,) = struct.unpack(endian + size_fmt, raw[id_bytes:])
        if size_counts_header:
            if n < head:
                return
            n -= head
        yield cid, pos + head, n
        pos += head + n
        pos += -pos % align if align > 1 else 0


def _riff_extent(fh, size: int, endian: str):
    ds64 = None
    for cid, at, n in _chunks(fh, 12, size, endian):
        if cid == b"ds64" and n >= 16:
            fh.seek(at + 8)
            (ds64,) = struct.unpack("<Q", fh.read(8))  # RF64: the real data size
        elif cid == b"data":
            if n == 0xFFFFFFFF:
                n = ds64
            if not n:  # a streamed file whose length was never written: libsndfile reads to the end
                return None
            return n, size - at
    return None


def _iff_extent(fh, size: int, frame_bytes: Optional[int]):
    frames = None
    for cid, at, n in _chunks(fh, 12, size, ">"):
        if cid == b"COMM" and n >= 6:
            fh.seek(at + 2)
            (frames,) = struct.unpack(">I", fh.read(4))
        elif cid == b"SSND":
            if n < 8:
                return None
            fh.seek(at)
            (offset,) = struct.unpack(">I", fh.read(4))
            start = at + 8 + offset
            promised = max(n - 8 - offset, 0)
            if frames is not None and frame_bytes:
                # the COMM chunk's frame count is the promise (libsndfile counts a pad byte into SSND's size)
                promised = min(promised, frames * frame_bytes)
            return promised, max(size - start, 0)
    return None


def _w64_extent(fh, size: int):
    # Sony Wave64: 16-byte GUID ids whose first four bytes spell the chunk, 64-bit sizes counting the 24-byte
    # header, chunks aligned to 8 bytes; the file opens with riff (24 bytes) and the wave GUID (16)
    for cid, at, n in _chunks(fh, 40, size, "<", align=8, id_bytes=16, size_fmt="Q", size_counts_header=True):
        if cid == b"data":
            return (n, size - at) if n else None
    return None


def _caf_extent(fh, size: int):
    # Core Audio: 8-byte header, chunks with a signed 64-bit size; the data chunk opens with a 4-byte edit count
    for cid, at, n in _chunks(fh, 8, size, ">", align=1, size_fmt="q"):
        if cid == b"data":
            return (n - 4, size - at - 4) if n >= 4 else None  # -1: up to the end of the file
        if n < 0:
            return None
    return None


def _au_extent(head: bytes, size: int, endian: str):
    offset, n = struct.unpack(endian + "II", head[4:12])
    if n == 0xFFFFFFFF or n == 0:  # length left open
        return None
    return n, max(size - offset, 0)


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

    @property
    def align(self) -> int:
        """What a rounded value is multiplied by to sit where ``out_dtype`` keeps it: 256 for 24-bit samples in
        the top of an int32 (libsndfile keeps the top 24 bits), else 1."""
        return 256 if self.out_dtype == "int32" and self.scale == 8388608.0 else 1


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
    """(frames, C) float -> what soundfile writes, and how many samples were clipped (numpy or cupy: a device
    array is quantised on the device; :func:`sigconv.engine.gpu_file.quantise_device` is the same rule in one
    kernel)."""
    xp = array_namespace(y)
    if not spec.clip:
        return y.astype(spec.out_dtype, copy=False), 0
    if spec.scale:
        q = xp.rint(y * spec.scale)
        clipped = int(xp.count_nonzero((q < spec.lo) | (q > spec.hi)))
        xp.clip(q, spec.lo, spec.hi, out=q)
        q = q.astype(spec.out_dtype)
        if spec.align != 1:
            q *= spec.align
        return q, clipped
    clipped = int(xp.count_nonzero((y < spec.lo) | (y > spec.hi)))
    return xp.clip(y, spec.lo, spec.hi).astype(spec.out_dtype, copy=False), clipped
