"""The long-signal engine: filter a sound file block by block, never holding the whole signal.

Reading, filtering and writing run in three threads linked by short queues, so disk and compute
overlap (libsndfile via cffi and pocketfft / CuPy release the GIL). A block filter carries the
filter overlap across block boundaries (overlap-save), so the output is identical to filtering the
whole array at once, for any block size. The output is written to a temporary file in the target
folder and renamed at the end: an error or Ctrl-C midway leaves no partial output.

A block filter is any object with ``read_dtype``, ``preferred_frames``, ``process(block)``,
``finish()`` and ``clipped`` (see :class:`BlockFilter`), and optionally ``read_buffer(frames)`` (the (frames, C)
array of ``read_dtype`` the reader reads the next block into, in the reader thread: a device filter's page-locked
buffer, which its ``stage`` has finished with), ``stage(block)`` (run in the reader thread on each block read: a
device filter copies it to the device there) and ``fetch(out)`` (run in the writer thread on each block to write: a
device filter copies it back there); the cpu one is here, the cuda one is ``sigconv.engine.gpu_file.GPUFileFilter``.

libsndfile syncs the output to disk when it is closed (before the rename); the writer starts the write-back of
each block as it goes (``posix_fadvise``), so that sync has only the last blocks left to wait for.
"""

from __future__ import annotations

import os
import queue
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np
import soundfile as sf

from sigconv._core.atomic import atomic_output, write_error
from sigconv._core.errors import InputError, OutputError
from sigconv.backends.cpu import OverlapSave
from sigconv.engine.audio import AudioInfo, PCMSpec, pcm_spec, quantise, read_block
from sigconv.engine.settings import phase_delay
from sigconv.registry.auto import choose_conv1d, cpu_fft_library

__all__ = ["BlockFilter", "CPUFileFilter", "fir_block_filter", "filter_file", "FilterResult"]


class BlockFilter:
    """Base of the block filters the engine drives; subclasses override :meth:`_filter_block`.

    Handles what every method shares: the zero-phase delay (the first ``delay`` outputs of the
    causal filter are dropped and :meth:`finish` feeds ``delay`` zeros, so output length equals
    input length) and quantisation for the output subtype. ``_filter_block`` gets (C, n) float
    and returns (C, n) of the causal filter; ``_tail`` returns the outputs for ``delay`` zeros.
    """

    read_dtype = "float32"
    preferred_frames = 1 << 18

    def __init__(self, channels: int, delay: int, spec: PCMSpec):
        self.C, self.delay, self.spec = channels, delay, spec
        self.read_dtype = spec.read_dtype
        self._to_drop = delay
        self.clipped = 0

    def _filter_block(self, x: np.ndarray) -> np.ndarray:  # (C, n) -> (C, n)
        raise NotImplementedError

    def _to_work(self, block: np.ndarray):
        """(n, C) as read -> (C, n) in the work dtype, where ``_filter_block`` computes."""
        return np.ascontiguousarray(block.T, dtype=self.spec.work_dtype)

    def _quantise(self, y) -> tuple[np.ndarray, int]:
        """(C, m) filtered -> ((m, C) host samples to write, samples clipped)."""
        return quantise(y.T, self.spec)

    def _zeros(self, n: int):
        return np.zeros((self.C, n), self.spec.work_dtype)

    def _emit(self, y) -> np.ndarray:
        if self._to_drop:
            k = min(self._to_drop, y.shape[1])
            y = y[:, k:]
            self._to_drop -= k
        q, c = self._quantise(y)
        self.clipped += c
        return q

    def stage(self, block):
        """In the engine's reader thread, on each block read; what it returns is what ``process`` gets."""
        return block

    def fetch(self, out):
        """In the engine's writer thread, on each block ``process`` or ``finish`` returned: the host array to
        write."""
        return out

    def process(self, block: np.ndarray) -> np.ndarray:
        """(n, C) samples as read -> (m, C) ready to write (m < n only at the start, by the delay)."""
        return self._emit(self._filter_block(self._to_work(block)))

    def finish(self) -> np.ndarray:
        if not self.delay:
            return np.zeros((0, self.C), self.spec.out_dtype)
        return self._emit(self._filter_block(self._zeros(self.delay)))


class CPUFileFilter(BlockFilter):
    """FIR on the CPU: overlap-save with batched multithreaded real FFTs (``OverlapSave``)."""

    def __init__(self, taps, channels: int, spec: PCMSpec, phase: str = "zero", variant: str = "auto",
                 frames: Optional[int] = None):
        taps = np.asarray(taps, dtype=np.float64)
        super().__init__(channels, phase_delay(taps.size, phase), spec)
        fft = cpu_fft_library(None if frames is None else int(frames) * int(channels))
        self.ols = OverlapSave(taps.astype(spec.work_dtype), channels, spec.work_dtype, method=variant, fft=fft)
        step = self.ols.nfft - taps.size + 1
        # read whole overlap-save segments: about 2^18 frames, at least 4 segments
        self.preferred_frames = step * max(4, -(-(1 << 18) // step))

    @property
    def variant(self) -> str:
        """The method that filtered the most samples (``auto`` asks the chooser block by block); before any
        block, the one it chooses for a full block."""
        ran = self.ols.ran
        if any(ran.values()):
            return max(ran, key=ran.get)
        if self.ols.method != "auto":
            return self.ols.method
        return choose_conv1d("cpu", self.C, self.preferred_frames, self.ols.K, self.spec.work_dtype)[0]

    def _filter_block(self, x):
        return self.ols.process(x)


def fir_block_filter(taps, channels: int, spec: PCMSpec, *, kernel, phase: str = "zero",
                     frames: Optional[int] = None):
    """The block filter for the FIR ``taps`` on ``kernel``'s backend (a resolved
    :class:`~sigconv.engine.settings.KernelChoice`: "cpu" or "cuda"), for samples that travel as ``spec`` says;
    ``frames``: the length of the whole file, when known (the cpu picks its FFT library by it).

    On the GPU (:class:`~sigconv.engine.gpu_file.GPUFileFilter`) raw integer samples travel to the device
    (half the bytes of float32 for PCM_16) and are converted there; 24-bit travels as int32 (libsndfile keeps
    the top 24 bits on write); float64 data is filtered in float32. Either filter's ``variant`` names the
    kernel that ran.
    """
    if kernel.backend == "cpu":
        return CPUFileFilter(taps, channels, spec, phase=phase, variant=kernel.variant, frames=frames)
    from sigconv.engine.gpu_file import GPUFileFilter

    read = spec.out_dtype if spec.out_dtype in ("int16", "int32") else "float32"
    out = spec.out_dtype if spec.out_dtype != "float64" else "float32"
    return GPUFileFilter(taps, channels, read_dtype=read, phase=phase, out_dtype=out, clip=spec.clip,
                         variant=kernel.variant, block=kernel.block, out_spec=replace(spec, out_dtype=out))


@dataclass
class FilterResult:
    frames: int
    seconds: float
    clipped: int
    output: Path
    info: AudioInfo
    variant: Optional[str] = None


_STOP = object()
_MALLOC_TUNED = False


def _keep_freed_memory() -> None:
    """Ask glibc to serve large blocks from the heap and keep freed memory (M_MMAP_THRESHOLD,
    M_TRIM_THRESHOLD). Block-sized arrays are freed and reallocated for every block; by default each
    one is a fresh mmap whose pages fault in again, which on a small VM costs more than the FFTs.
    Peak memory is unchanged: the same blocks are reused. A no-op where glibc is absent."""
    global _MALLOC_TUNED
    if _MALLOC_TUNED:
        return
    _MALLOC_TUNED = True
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6")
        libc.mallopt(-3, 256 << 20)  # M_MMAP_THRESHOLD: blocks below 256 MB come from the heap
        libc.mallopt(-1, 512 << 20)  # M_TRIM_THRESHOLD: keep up to 512 MB of freed heap
    except (OSError, AttributeError):
        pass


#: Bytes written between two starts of write-back (tiny blocks would otherwise pay a system call each).
WRITEBACK_BYTES = 4 << 20


def _start_writeback(fd: int, start: int) -> int:
    """Start writing bytes ``start`` up to the file position of ``fd`` to disk, without waiting (Linux:
    POSIX_FADV_DONTNEED starts the write-back of dirty pages and drops clean ones), once at least
    :data:`WRITEBACK_BYTES` are waiting; returns where the next call starts. A no-op where it is not available."""
    try:
        end = os.lseek(fd, 0, os.SEEK_CUR)
        if end - start < WRITEBACK_BYTES:
            return start
        os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_DONTNEED)
        return end
    except (AttributeError, OSError):
        return start


def _first_unwritable(out: np.ndarray, offset: int, info: AudioInfo) -> str:
    """The one-line refusal of a filtered block that holds inf or NaN (the input held none: the reader refuses
    those): the filter's result there is beyond what the output's samples can hold."""
    bad = np.argwhere(~np.isfinite(out))[0]
    frame, ch = int(bad[0]) + offset, int(bad[1])
    return (f"{info.path}: the filtered sample at frame {frame} (t={frame / info.samplerate:.6f} s), channel {ch} "
            f"is beyond the range of {out.dtype} samples ({info.subtype} output; the input peaks too close to it); "
            "scale the input down first; no output written")


def filter_file(info: AudioInfo, out_path, make_filter: Callable[[AudioInfo, PCMSpec], object], *,
                overwrite: bool = False, progress: Optional[Callable[[int], None]] = None,
                cancel: Optional[threading.Event] = None, block_frames: Optional[int] = None,
                before_replace: Optional[Callable[[], None]] = None) -> FilterResult:
    """Filter ``info.path`` into ``out_path`` with the block filter from ``make_filter(info, spec)``.

    The output keeps the input's sample rate, channels, format and subtype. It is written to a
    temporary file beside ``out_path`` and renamed when complete; any exception (including
    KeyboardInterrupt) removes the temporary file. ``progress(frames_done)`` is called as blocks
    are written; setting ``cancel`` stops the run with ``KeyboardInterrupt``; ``before_replace`` is
    atomic_output's last check before the rename (the batch's: the output is still one it may replace).
    """
    out_path = Path(out_path)
    spec = pcm_spec(info.subtype)
    if out_path.exists() and not overwrite:
        raise OutputError(f"{out_path}: already exists (pass --force to overwrite)")
    folder = out_path.parent if str(out_path.parent) else Path(".")
    if not folder.is_dir():
        raise OutputError(f"{folder}: output folder does not exist")
    with atomic_output(out_path, before_replace=before_replace) as tmp:  # renamed into place only when complete
        return _filter_into(info, tmp, spec, make_filter, progress, cancel, block_frames, out_path)


def _filter_into(info, tmp, spec, make_filter, progress, cancel, block_frames, out_path) -> FilterResult:
    """Filter into ``tmp`` (atomic_output moves it into place); the result names the final ``out_path``."""
    _keep_freed_memory()
    t0 = time.perf_counter()
    flt = make_filter(info, spec)
    bf = int(block_frames or flt.preferred_frames)
    read_buffer = getattr(flt, "read_buffer", None)
    stage = getattr(flt, "stage", None)
    fetch = getattr(flt, "fetch", None)
    q_in: queue.Queue = queue.Queue(maxsize=3)
    q_out: queue.Queue = queue.Queue(maxsize=3)
    errors: list[BaseException] = []
    stop = threading.Event()

    def put(q, item):
        while not stop.is_set():
            try:
                q.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def get(q):
        """Next item, or None once ``stop`` is set and nothing is waiting."""
        while True:
            try:
                return q.get(timeout=0.1)
            except queue.Empty:
                if stop.is_set():
                    return None

    def reader():
        if stop.is_set():
            return
        try:
            with sf.SoundFile(str(info.path)) as f:
                offset = 0
                while not stop.is_set():
                    # a buffer for what is left, up to a block (a short file's is small, quick to page-lock);
                    # past the end, a frame's, to see the end
                    buf = read_buffer(min(bf, max(info.frames - offset, 1))) if read_buffer is not None else None
                    blk = read_block(f, bf, flt.read_dtype, info, offset, out=buf)
                    if blk.shape[0] == 0:
                        break
                    offset += blk.shape[0]
                    if stage is not None:
                        blk = stage(blk)
                    if not put(q_in, blk):
                        return
                if offset != info.frames and not stop.is_set():
                    raise InputError(f"{info.path}: read {offset} frames but the header says {info.frames}; "
                                     "the file is damaged")
        except BaseException as exc:  # noqa: BLE001 (handed to the main thread)
            errors.append(exc)
            stop.set()
        finally:
            put(q_in, _STOP) if not stop.is_set() else None

    def writer():
        done = 0
        if stop.is_set():  # started late, after a Ctrl-C: the temporary file may be gone; do not make it again
            return
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_TRUNC)  # by descriptor: the writer starts its write-back
            try:
                out = sf.SoundFile(fd, "w", samplerate=info.samplerate, channels=info.channels, format=info.format,
                                   subtype=info.subtype, endian=info.endian, closefd=True)
            except BaseException:
                os.close(fd)
                raise
            synced = 0
            with out as f:
                while True:
                    item = get(q_out)
                    if item is None:
                        return
                    if item is _STOP:
                        break
                    if fetch is not None:
                        item = fetch(item)
                    if item.dtype.kind == "f" and not np.isfinite(item).all():  # never inf/NaN with success
                        raise InputError(_first_unwritable(item, done, info))
                    f.write(item)
                    synced = _start_writeback(fd, synced)
                    done += item.shape[0]
                    if progress:
                        progress(done)
        except BaseException as exc:  # noqa: BLE001
            errors.append(write_error(exc, out_path))  # a full disk says so, while the disk is still full
            stop.set()

    threads = [threading.Thread(target=reader, daemon=True), threading.Thread(target=writer, daemon=True)]
    try:
        for t in threads:
            t.start()
        while True:
            if cancel is not None and cancel.is_set():
                raise KeyboardInterrupt
            blk = get(q_in)
            if blk is None:
                break
            if blk is _STOP:
                tail = flt.finish()
                if tail.shape[0]:
                    put(q_out, tail)
                put(q_out, _STOP)
                break
            y = flt.process(blk)
            if y.shape[0]:
                if not put(q_out, y):
                    break
        while True:  # the writer drains the last blocks; a cancel until it is done still stops the run
            threads[1].join(timeout=0.1)
            if cancel is not None and cancel.is_set():
                raise KeyboardInterrupt
            if not threads[1].is_alive():
                break
        if errors:
            raise errors[0]
    except BaseException:
        stop.set()
        for t in threads:
            # An interrupt may land inside a start(): that thread may never run, or run later (it then sees
            # ``stop`` and returns at once). Only a thread that is running can be joined.
            if t.is_alive():
                t.join(timeout=5)
        raise
    threads[0].join()
    return FilterResult(info.frames, time.perf_counter() - t0, int(flt.clipped), out_path, info,
                        getattr(flt, "variant", None))
