"""The whole of a file at a glance, computed by streaming it once: a min/max envelope per channel and a coarse
spectrogram of channel 0, kept in sigconv's cache folder (``sigconv.cache_dir()``), never beside the file.

The file is read in blocks of :data:`READ_BLOCK` frames in its own integer type (libsndfile's float conversion
costs eight times the read), in parallel parts where the container seeks exactly, so memory stays at a few blocks
a thread whatever the length. The envelope has one (min, max) pair per :data:`BIN` frames or more (at most
:data:`MAX_BINS` bins), the spectrogram one column per :data:`SPEC_STEP` frames or more (at most
:data:`MAX_SPEC_COLS` columns, float16): the mean power of :data:`SPEC_FRAMES` Hann frames spread over that step.
An hour of 48 kHz stereo takes 8 MB. A reopened file whose path, size and modification time are unchanged loads
from the cache.

No Textual import here: the screens call these functions from worker threads.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

import numpy as np

import sigconv

#: Frames per envelope bin at least, and the most bins an overview holds (the bin doubles until it fits).
BIN = 1024
MAX_BINS = 1 << 18
#: Frames per read (a multiple of every bin size).
READ_BLOCK = 1 << 20
#: Coarse spectrogram: one column per SPEC_STEP frames or more (doubled until at most MAX_SPEC_COLS columns),
#: the mean power of SPEC_FRAMES frames of N_FFT.
SPEC_STEP = 8192
MAX_SPEC_COLS = 1 << 14
SPEC_FRAMES = 4
N_FFT = 512
#: Overviews kept in the cache (the oldest go first).
CACHE_ENTRIES = 64
#: Bumped when the cached arrays change meaning.
_FORMAT = 1

#: Full scale of the integer types the file is read in.
_SCALE = {"int16": 1.0 / 32768, "int32": 1.0 / 2147483648}


class Cancelled(Exception):
    """The user cancelled the overview (a new file was opened, or the app is quitting)."""


@dataclass
class Overview:
    """``lo``/``hi``: (C, nbins) float32 envelope, bin ``i`` covering frames [i * bin, (i + 1) * bin);
    ``spec``: (N_FFT // 2 + 1, ncols) log10 power of channel 0 (float16), column ``j`` sampled from frames
    [j * spec_step, (j + 1) * spec_step)."""

    frames: int
    bin: int
    lo: np.ndarray
    hi: np.ndarray
    spec_step: int
    spec: np.ndarray

    @property
    def channels(self) -> int:
        return int(self.lo.shape[0])

    def envelope(self, a: int, b: int, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(first frame, min, max) of ``n`` columns over frames [a, b) (at most one column per bin), each column
        the extremes of the bins it overlaps: exact at the bins' resolution."""
        i0, i1 = a // self.bin, max(a // self.bin + 1, -(-b // self.bin))
        i1 = min(i1, self.lo.shape[1])
        n = max(1, min(n, i1 - i0))
        edges = np.linspace(i0, i1, n + 1).astype(np.int64)
        lo = np.minimum.reduceat(self.lo[:, i0:i1], edges[:-1] - i0, axis=1)
        hi = np.maximum.reduceat(self.hi[:, i0:i1], edges[:-1] - i0, axis=1)
        return edges[:-1] * self.bin, lo, hi

    def spectrogram(self, a: int, b: int) -> np.ndarray:
        """The coarse spectrogram's columns over frames [a, b) (at least one)."""
        j0 = min(a // self.spec_step, max(0, self.spec.shape[1] - 1))
        j1 = max(j0 + 1, min(self.spec.shape[1], -(-b // self.spec_step)))
        return self.spec[:, j0:j1].astype(np.float32)


def _grown(step: int, frames: int, most: int) -> int:
    while -(-frames // step) > most:
        step *= 2
    return step


def bin_size(frames: int) -> int:
    """Frames per envelope bin for a file of ``frames``: :data:`BIN`, doubled until at most :data:`MAX_BINS`."""
    return _grown(BIN, frames, MAX_BINS)


def spec_step(frames: int) -> int:
    """Frames per coarse-spectrogram column: :data:`SPEC_STEP`, doubled until at most :data:`MAX_SPEC_COLS`."""
    return _grown(SPEC_STEP, frames, MAX_SPEC_COLS)


def _window() -> np.ndarray:
    return np.hanning(N_FFT).astype(np.float32)


class _Builder:
    """Accumulates an overview from consecutive (n, C) blocks (n a multiple of the bin but for the last)."""

    def __init__(self, frames: int, channels: int) -> None:
        self.frames, self.bin, self.step = frames, bin_size(frames), spec_step(frames)
        #: frames per read: a multiple of the bin and of the column (powers of two)
        self.block = max(READ_BLOCK, self.bin, self.step)
        nb = max(1, -(-frames // self.bin))
        self.lo = np.zeros((channels, nb), np.float32)
        self.hi = np.zeros((channels, nb), np.float32)
        ncols = max(1, -(-frames // self.step))
        self.spec = np.full((N_FFT // 2 + 1, ncols), -10.0, np.float16)
        self.w = _window()

    def add(self, blk: np.ndarray, scale: Optional[float], at: int) -> None:
        """Frames [at, at + n) of the file (``at`` a multiple of :attr:`block`): threads may add disjoint ranges."""
        n = blk.shape[0]
        if n == 0:
            return
        i0 = at // self.bin
        full = n // self.bin
        x = np.ascontiguousarray(blk.T)  # (C, n): reductions along contiguous rows
        if full:
            v = x[:, :full * self.bin].reshape(x.shape[0], full, self.bin)
            self.lo[:, i0:i0 + full] = v.min(axis=2)
            self.hi[:, i0:i0 + full] = v.max(axis=2)
        if n > full * self.bin:
            tail = x[:, full * self.bin:]
            self.lo[:, i0 + full] = tail.min(axis=1)
            self.hi[:, i0 + full] = tail.max(axis=1)
        nb = full + (n > full * self.bin)
        if scale is not None:
            self.lo[:, i0:i0 + nb] *= scale
            self.hi[:, i0:i0 + nb] *= scale
        self._spec(x[0], scale, at)

    def _spec(self, c0: np.ndarray, scale: Optional[float], at: int) -> None:
        step = self.step
        j0 = at // step
        cols = -(-c0.size // step)
        if c0.size < cols * step:  # the file's last block: its last column padded with zeros
            c0 = np.concatenate([c0, np.zeros(cols * step - c0.size, c0.dtype)])
        fr = c0.reshape(cols, SPEC_FRAMES, step // SPEC_FRAMES)[:, :, :N_FFT] * self.w  # (cols, frames, N)
        if scale is not None:
            fr *= np.float32(scale)
        p = np.abs(np.fft.rfft(fr, axis=-1)) ** 2  # (NumPy's: no import while the app starts; parts run in threads)
        self.spec[:, j0:j0 + cols] = np.log10(p.mean(axis=1).T + 1e-10)

    def finish(self) -> Overview:
        return Overview(self.frames, self.bin, self.lo, self.hi, self.step, self.spec)


def from_array(x: np.ndarray) -> Overview:
    """The overview of an in-memory (C, L) signal (a sensor log, a filtered log)."""
    x = np.asarray(x, dtype=np.float32)
    b = _Builder(int(x.shape[1]), int(x.shape[0]))
    for a in range(0, x.shape[1], b.block):
        b.add(x[:, a:a + b.block].T, None, a)
    return b.finish()


def _read_dtype(subtype: str) -> str:
    """The integer type a PCM subtype reads into without loss (libsndfile scales 8-bit to 16), else float32."""
    if subtype in ("PCM_16", "PCM_S8", "PCM_U8", "ULAW", "ALAW", "DWVW_12", "DPCM_8", "DPCM_16"):
        return "int16"
    if subtype in ("PCM_24", "PCM_32", "DWVW_24", "DWVW_16", "ALAC_16", "ALAC_20", "ALAC_24", "ALAC_32"):
        return "int32"
    return "float32"


#: Most threads streaming one file (each reads its own contiguous part through its own handle).
MAX_THREADS = 8
#: Containers whose frames can be sought exactly and cheaply (the parts of a file are read in parallel there).
_SEEKABLE = frozenset({"WAV", "WAVEX", "AIFF", "AU", "W64", "RF64", "CAF", "FLAC", "RAW", "IRCAM", "NIST", "WVE"})


def _parts(frames: int, block: int, fmt: str) -> list[tuple[int, int]]:
    """[a, z) ranges of whole blocks, one per thread: as many as the cores (at most MAX_THREADS) where the container
    seeks exactly and the file has at least two blocks a thread, else one."""
    blocks = -(-frames // block)
    n = min(MAX_THREADS, os.cpu_count() or 1, blocks // 2) if fmt in _SEEKABLE else 1
    n = max(1, n)
    cuts = [round(i * blocks / n) * block for i in range(n + 1)]
    return [(a, min(z, frames)) for a, z in zip(cuts[:-1], cuts[1:]) if a < frames]


def compute(info, *, progress: Optional[Callable[[float], None]] = None,
            cancel: Optional[threading.Event] = None) -> Overview:
    """Stream the file of ``info`` (a ``sigconv.AudioInfo``) once, in parallel parts where it seeks exactly;
    ``progress(fraction)`` as blocks are done; :class:`Cancelled` when ``cancel`` is set. ``sigconv.InputError``
    (one line) for a file that cannot be read to its end or holds non-finite samples."""
    from concurrent.futures import ThreadPoolExecutor

    dtype = _read_dtype(info.subtype)
    scale = _SCALE.get(dtype)
    frames = int(info.frames)
    b = _Builder(frames, int(info.channels))
    lock = threading.Lock()
    done = [0]
    failed = threading.Event()  # one part failed: the others stop too

    def part(a: int, z: int) -> None:
        import soundfile as sf

        at = a
        try:
            with sf.SoundFile(str(info.path)) as f:
                if a:
                    f.seek(a)
                buf = np.empty((b.block, info.channels), dtype)
                while at < z:
                    if cancel is not None and cancel.is_set():
                        raise Cancelled
                    if failed.is_set():
                        return
                    got = f.read(frames=min(b.block, z - at), dtype=dtype, out=buf)
                    if got.shape[0] == 0:
                        break
                    b.add(got, scale, at)
                    at += got.shape[0]
                    with lock:
                        done[0] += got.shape[0]
                        if progress is not None:
                            progress(done[0] / max(1, frames))
        except sf.LibsndfileError as exc:
            failed.set()
            raise sigconv.InputError(f"{info.path}: cannot read frame {at} ({exc})") from None
        except BaseException:
            failed.set()
            raise
        if at < z:
            failed.set()
            raise sigconv.InputError(f"{info.path}: read {at} frames but the header says {frames}; the file is "
                                     "damaged")

    parts = _parts(frames, b.block, info.format)
    if len(parts) == 1:
        part(*parts[0])
    else:
        with ThreadPoolExecutor(len(parts)) as ex:
            futures = [ex.submit(part, a, z) for a, z in parts]
            errors = [f.exception() for f in futures]
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
    ov = b.finish()
    if not (np.isfinite(ov.lo).all() and np.isfinite(ov.hi).all()):
        first = int(np.argmax(~(np.isfinite(ov.lo) & np.isfinite(ov.hi)).all(axis=0))) * ov.bin
        raise sigconv.InputError(f"{info.path}: holds non-finite samples (the first near frame {first}); "
                                 "refusing to filter")
    return ov


# ---------------------------------------------------------------------------------- cache


def cache_folder() -> Path:
    return sigconv.cache_dir() / "overview"


def cache_key(path: Path) -> Optional[str]:
    """Path, size and modification time (a changed file is a new key); None when the file cannot be stat'ed."""
    try:
        p = Path(path).resolve()
        st = p.stat()
    except OSError:
        return None
    text = (f"{_FORMAT}|{p}|{st.st_size}|{st.st_mtime_ns}|{BIN}|{MAX_BINS}|{SPEC_STEP}|{MAX_SPEC_COLS}|"
            f"{SPEC_FRAMES}|{N_FFT}")
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _load_cached(key: str, info) -> Optional[Overview]:
    p = cache_folder() / f"{key}.npz"
    try:
        with np.load(p, allow_pickle=False) as z:
            ov = Overview(int(z["frames"]), int(z["bin"]), z["lo"], z["hi"], int(z["spec_step"]), z["spec"])
    except (OSError, ValueError, KeyError, EOFError):
        return None
    if ov.frames != info.frames or ov.channels != info.channels:
        return None
    try:
        os.utime(p)  # recently used: evicted last
    except OSError:
        pass
    return ov


def _store(key: str, ov: Overview) -> None:
    """Write atomically (a temporary file renamed); an unwritable cache only means no caching."""
    folder = cache_folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{key}.", suffix=".part", dir=folder)
        try:
            with os.fdopen(fd, "wb") as f:
                np.savez(f, frames=ov.frames, bin=ov.bin, lo=ov.lo, hi=ov.hi, spec_step=ov.spec_step, spec=ov.spec)
            os.replace(tmp, folder / f"{key}.npz")
        except BaseException:
            os.unlink(tmp)
            raise
        entries = sorted(folder.glob("*.npz"), key=lambda q: q.stat().st_mtime)
        for old in entries[:-CACHE_ENTRIES]:
            old.unlink(missing_ok=True)
    except OSError:
        pass


def overview(info, *, progress: Optional[Callable[[float], None]] = None,
             cancel: Optional[threading.Event] = None) -> Overview:
    """The cached overview of the file of ``info``, computed (and stored) when there is none."""
    key = cache_key(info.path)
    if key is not None:
        ov = _load_cached(key, info)
        if ov is not None:
            if progress is not None:
                progress(1.0)
            return ov
    ov = compute(info, progress=progress, cancel=cancel)
    if key is not None:
        _store(key, ov)
    return ov
