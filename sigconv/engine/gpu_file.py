"""The file engine's block filter on the GPU: interleaved sample blocks in, ready-to-write blocks out.

Built on the cuda backend's causal filter (``sigconv.backends.cuda1d.StreamFilter``); what files need
on top of it lives here: PCM samples converted on the device (integers scaled to [-1, 1) as they arrive,
results rounded and saturated for the output subtype, clipping counted), the zero-phase delay, the kernel
chosen once per file (so the variant reported is the one that ran), and blocks that no longer fit in GPU
memory split in halves and retried. CuPy is imported on first use.
"""

from __future__ import annotations

import threading

import numpy as np

from sigconv.backends import cuda1d, cuda_pcm
from sigconv.engine.audio import PCMSpec
from sigconv.engine.settings import phase_delay

__all__ = ["GPUFileFilter", "filter_span", "span_operands", "correlate_span", "warm_up", "quantise_device",
           "to_work_device", "DEVICE_LOCK"]

#: Held while one of this process's threads uses the GPU for a batch log (``filter_span``, or a block filter over
#: a log): transfers and kernels of one log at a time; the host's share of the work (edges, conversions) is done
#: outside it, in parallel.
DEVICE_LOCK = threading.RLock()

_READ_SCALE = {"int16": 1.0 / 32768.0, "int32": 1.0 / 2147483648.0, "float32": 1.0, "float64": 1.0}
_OUT_DTYPES = ("int16", "int32", "float32", "float64")

def to_work_device(raw, dtype="float32"):
    """(n, C) raw samples on the device (int16 / int32 as read, or float) -> (C, n) ``dtype`` in [-1, 1):
    deinterleaved and scaled in one pass (the host does ``x.astype(dtype) * scale``; the scales are powers of
    two, so both give the same values)."""
    return cuda_pcm.to_work(raw, dtype, _READ_SCALE.get(raw.dtype.name, 1.0))


def quantise_device(y, spec) -> tuple:
    """(C, n) float samples on the device -> ((n, C) device array of ``spec.out_dtype``, the count of clipped
    samples as a 0-d device array, or None when ``spec`` does not clip): :func:`sigconv.engine.audio.quantise`'s
    rule (round, saturate, align 24-bit in the top of an int32, interleave) in one pass, with no host sync, so
    the caller chooses when the samples and the count travel back."""
    return cuda_pcm.quantise(y, spec.out_dtype, scale=float(spec.scale) if spec.clip else 0.0, lo=float(spec.lo),
                             hi=float(spec.hi), mult=float(spec.align), clip=spec.clip)


def _fir_out_spec(out_dtype: str, clip: bool) -> PCMSpec:
    """What the FIR filter writes: integers rint(y * 2^15) or rint(y * 2^31), always saturated; floats clipped
    to [-1, 1] when ``clip``."""
    if out_dtype == "int16":
        return PCMSpec("int16", "float32", "int16", 32768.0, -32768.0, 32767.0, True)
    if out_dtype == "int32":
        return PCMSpec("int32", "float32", "int32", 2147483648.0, -2147483648.0, 2147483647.0, True)
    return PCMSpec("float32", "float32", out_dtype, 0.0, -1.0, 1.0, bool(clip))


def _to_host(a) -> np.ndarray:
    return a if isinstance(a, np.ndarray) else a.get()


def _is_oom(exc) -> bool:
    import cupy

    if isinstance(exc, cupy.cuda.memory.OutOfMemoryError):
        return True
    return "ALLOC_FAILED" in str(exc) or "out of memory" in str(exc).lower()


class _Pending:
    """A staged block's output on the device (``out``, (m, C) of the output dtype), the event recorded after the
    kernels that made it, and the staged input they read: kept until the writer has passed the event, so that
    neither buffer returns to the memory pool while a kernel may still use it, whichever streams the threads are
    on."""

    __slots__ = ("out", "event", "keep")

    def __init__(self, out, event, keep):
        self.out, self.event, self.keep = out, event, keep

    @property
    def shape(self):
        return self.out.shape


class GPUFileFilter:
    """GPU block filter of ``sigconv denoise --backend cuda`` and the batch runner.

    Parameters
    ----------
    taps : (K,) array
    channels : int
    read_dtype : {"int16", "int32", "float32"}
        What the engine reads (int16 for PCM_16, int32 for PCM_24/32, float32 for float subtypes);
        integers are scaled to [-1, 1) on the GPU (int16 / 32768, int32 / 2^31).
    phase : {"zero", "linear"}
        "zero": centred (scipy.signal.convolve(x, taps, "same") per channel, K odd), the total
        output length equals the input's; "linear": causal lfilter output.
    out_dtype : {"int16", "int32", "float32", "float64"}
        Integers: rint(y * 32768) (int16) or rint(y * 2^31) (int32), saturated to the type's range;
        every saturated sample counts in ``clipped``.
    clip : bool
        For float outputs: clip to [-1, 1] (and count). Integer outputs always saturate.
    out_spec : PCMSpec, optional
        The output rule instead of the two above (the file's, :func:`sigconv.engine.audio.pcm_spec`): its
        scale, saturation range and alignment, so that the file engine writes what the cpu backend writes
        (24-bit samples rounded to 2^23 steps in the top of an int32, not cut there by libsndfile). Its
        ``out_dtype`` must be ``out_dtype``.
    variant, block
        Kernel choice. "auto" is resolved on the first block by the chooser
        (:func:`sigconv.registry.auto.choose_conv1d`, timed on that block) and kept for the whole file;
        ``variant`` then names what runs.
    chunk_frames : int, optional
        Overrides ``preferred_frames``.

    In the file engine the samples travel through page-locked host buffers, one for each direction, reused
    block after block: the reader reads into one (:meth:`read_buffer`) and copies it to the device
    (:meth:`stage`); :meth:`process` then only queues kernels, and the writer copies each result into the other
    (:meth:`fetch`) and writes from there. Called directly, :meth:`process` takes and returns host arrays.
    """

    #: Smallest block (frames) the out-of-memory retry splits down to.
    OOM_FLOOR_FRAMES = 1 << 14

    def __init__(self, taps, channels, *, read_dtype, phase="zero", out_dtype, clip, variant="auto", block=None,
                 chunk_frames=None, out_spec=None):
        h = np.asarray(taps, dtype=np.float64).ravel()
        K = int(h.size)
        if K == 0:
            raise ValueError("taps must hold at least one tap")
        if str(read_dtype) not in _READ_SCALE:
            raise ValueError(f"read_dtype must be one of int16, int32, float32, got {read_dtype!r}")
        if str(out_dtype) not in _OUT_DTYPES:
            raise ValueError(f"out_dtype must be one of {', '.join(_OUT_DTYPES)}, got {out_dtype!r}")
        if phase not in ("zero", "linear"):
            raise ValueError(f"phase must be 'zero' or 'linear', got {phase!r}")
        if phase == "zero" and K % 2 == 0:
            raise ValueError(f"phase='zero' needs an odd number of taps (got {K}); use phase='linear'")
        self.C = int(channels)
        self.K = K
        self.read_dtype, self.out_dtype = str(read_dtype), str(out_dtype)
        self.phase, self.clip = phase, bool(clip)
        if out_spec is not None and out_spec.out_dtype != self.out_dtype:
            raise ValueError(f"out_spec writes {out_spec.out_dtype}, out_dtype is {out_dtype}")
        self._out_spec = out_spec if out_spec is not None else _fir_out_spec(self.out_dtype, self.clip)
        self._core = cuda1d.StreamFilter(h, self.C, np.float32, variant=variant, block=block)
        self.variant = variant
        self.delay = phase_delay(K, phase)
        if chunk_frames is not None:
            self.preferred_frames = int(chunk_frames)
        else:
            self.preferred_frames = max(1 << 22, 1 << (8 * K - 1).bit_length())
        self._clipped = 0
        self._clipped_dev: list = []  # counts still on the device (0-d arrays), read when ``clipped`` is
        self._to_drop = self.delay
        self._host: dict = {}  # page-locked buffers by direction, "in" (reader) and "out" (writer): (memory, bytes)
        import cupy

        self._device = cupy.cuda.Device()  # the current one: the engine's reader and writer threads use it too

    @property
    def clipped(self) -> int:
        """Saturated samples so far (reads the counts still on the device)."""
        if self._clipped_dev:
            self._clipped += sum(int(c) for c in self._clipped_dev)
            self._clipped_dev.clear()
        return self._clipped

    # -- state snapshot for the out-of-memory retry (a failed attempt leaves no trace)
    def _state(self):
        return (self._core.hist, self._to_drop, len(self._clipped_dev))

    def _restore(self, st):
        self._core.hist, self._to_drop, n = st
        del self._clipped_dev[n:]

    # -- the engine's threads: page-locked buffers, copies in the reader and writer
    def _host_buffer(self, kind: str, shape, dtype) -> np.ndarray:
        """The page-locked (rows, C) buffer ``kind`` with room for ``shape[0]`` rows, viewed as ``shape``: made (or
        grown) on first need, then reused. A buffer is its thread's alone: the reader's is free again once
        :meth:`stage` returns, the writer's once the block read from it is written."""
        import cupy

        dtype = np.dtype(dtype)
        need = int(np.prod(shape)) * dtype.itemsize
        mem, size = self._host.get(kind, (None, 0))
        if mem is None or size < need:
            with self._device:
                mem = cupy.cuda.alloc_pinned_memory(max(need, 1))
            self._host[kind] = (mem, need)
        return np.frombuffer(mem, dtype, int(np.prod(shape))).reshape(shape)

    def read_buffer(self, frames: int) -> np.ndarray:
        """In the engine's reader thread: the (frames, C) page-locked array the next block is read into."""
        return self._host_buffer("in", (int(frames), self.C), self.read_dtype)

    def stage(self, block):
        """In the engine's reader thread: the block read goes to the device (at the bus's speed, from the
        page-locked buffer), and the buffer is free for the next read when this returns. Where the device has no
        room for it, a host copy goes on (:meth:`process` splits it)."""
        import cupy

        if not isinstance(block, np.ndarray) or block.shape[0] == 0:
            return block
        with self._device:
            try:
                d = cupy.empty(block.shape, dtype=block.dtype)
                d.set(np.ascontiguousarray(block))
                cupy.cuda.get_current_stream().synchronize()  # the copy is done: the buffer is free again
                return d
            except Exception as exc:  # noqa: BLE001 - only out-of-memory falls back
                if not _is_oom(exc):
                    raise
                return np.array(block)

    def fetch(self, out):
        """In the engine's writer thread: a staged block's output, once its kernels are done, copied into the
        page-locked buffer (the array returned is a view of it, valid until the next fetch); host arrays as
        they are."""
        if not isinstance(out, _Pending):
            return out
        if out.out.size == 0:
            return np.empty(out.out.shape, out.out.dtype)
        with self._device:
            out.event.synchronize()
            host = self._host_buffer("out", out.out.shape, out.out.dtype)
            out.out.get(out=host)
        return host

    def _fix_variant(self, xf) -> None:
        """Resolve "auto" once, on the first block (C, n) as the stream filter will see it."""
        core = self._core
        if core.variant == "auto":
            core.variant, core.block = cuda1d.resolve_auto(xf, core.w, self.K - 1, xf.shape[1], core.block,
                                                           core.taps_key)
            self.variant = core.variant

    def _process_device(self, block):
        """(n, C) block (host or device) -> (m, C) device samples of out_dtype; kernels queued, no host sync."""
        import cupy

        xf = to_work_device(cupy.asarray(block))  # (n, C) interleaved read dtype -> (C, n) float32, scaled
        self._fix_variant(xf)
        y = self._core._filter(xf)
        del xf
        d = min(self._to_drop, y.shape[1])
        if d:
            y = y[:, d:]
            self._to_drop -= d
        out, clipped = quantise_device(y, self._out_spec)  # scale, round, saturate, interleave
        if clipped is not None:
            self._clipped_dev.append(clipped)
            if len(self._clipped_dev) >= 256:  # a long stream of blocks: fold the counts in now and then
                self.clipped  # noqa: B018 - the property reads them
        return out

    def _run(self, block):
        """The device output of ``block``, or, where it had to be split for lack of device memory, the host one."""
        st = self._state()
        try:
            return self._process_device(block)
        except Exception as exc:  # noqa: BLE001 - only out-of-memory is retried
            if not _is_oom(exc):
                raise
            import cupy

            self._restore(st)
            cupy.get_default_memory_pool().free_all_blocks()
            n = block.shape[0]
            if n // 2 < self.OOM_FLOOR_FRAMES:
                raise RuntimeError(f"GPU out of memory filtering a block of {n} frames: {exc}") from None
        half = block.shape[0] // 2
        a = _to_host(self._run(block[:half]))
        b = _to_host(self._run(block[half:]))
        return np.concatenate([a, b], axis=0)

    def process(self, block):
        """Filter the next (n, C) block; returns (m, C) samples of out_dtype ready to write: a host array for a
        host block; for a block :meth:`stage` put on the device, the pending device result that :meth:`fetch`
        turns into one."""
        if isinstance(block, np.ndarray) or not hasattr(block, "__cuda_array_interface__"):
            block = np.asarray(block)
            staged = False
        else:
            staged = True
        if block.ndim == 1 and self.C == 1:
            block = block[:, None]
        if block.ndim != 2 or block.shape[1] != self.C:
            raise ValueError(f"block must have shape (frames, {self.C}), got {block.shape}")
        if block.shape[0] == 0:
            return np.empty((0, self.C), dtype=self.out_dtype)
        if not staged:
            return _to_host(self._run(np.ascontiguousarray(block)))
        import cupy

        out = self._run(block)
        if isinstance(out, np.ndarray):
            return out
        event = cupy.cuda.Event(block=False, disable_timing=True)
        event.record()
        return _Pending(out, event, block)

    def finish(self) -> np.ndarray:
        """Rest of the output: zero phase feeds D = (K-1)/2 zeros; linear phase returns nothing. Resets."""
        if self.delay:
            tail = self.process(np.zeros((self.delay, self.C), dtype=np.float32))
        else:
            tail = np.empty((0, self.C), dtype=self.out_dtype)
        self._core.reset()
        self._to_drop = self.delay
        return tail


#: Device copies of recently used taps (correlation form, float32), by their host key.
_W: dict = {}
_W_KEEP = 16


def span_operands(x: np.ndarray, taps, n: int, *, offset: int, delay: int):
    """The host half of :func:`filter_span`: (xh, wh, pad), the (C, m') float32 samples that outputs
    ``offset .. offset + n - 1`` read (contiguous, as they go to the device), the taps in correlation form (float32)
    and the zeros before the first sample. :func:`correlate_span` is the device half."""
    h = np.asarray(taps, dtype=np.float64).ravel()
    K = int(h.size)
    x = np.asarray(x)
    start = offset + delay - (K - 1)  # the first sample output ``offset`` reads
    pad = max(0, -start)
    xs = x[max(0, start):offset + n + delay]  # the samples outputs offset..offset+n-1 read; zeros beyond
    wh = np.ascontiguousarray(h[::-1]).astype(np.float32)  # correlation form
    xh = np.ascontiguousarray(xs.T, dtype=np.float32)  # (C, m'), as it goes to the device
    return xh, wh, pad


def correlate_span(xh: np.ndarray, wh: np.ndarray, pad: int, n: int, *, variant: str = "auto",
                   block=None) -> np.ndarray:
    """The device half of :func:`filter_span`: y[c, i] = sum_j wh[j] xh[c, i + j - pad] for i < n, as (C, n) float32
    on the host; one transfer each way and one kernel, under :data:`DEVICE_LOCK`."""
    import cupy

    key = cuda1d.host_taps_key(wh)
    with DEVICE_LOCK:
        w = _W.get(key)
        if w is None:
            if len(_W) >= _W_KEEP:
                _W.pop(next(iter(_W)))
            w = _W[key] = cupy.asarray(wh)
        xg = cupy.asarray(xh)
        if variant == "auto":
            variant, block = cuda1d.resolve_auto(xg, w, pad, n, block, key)
        return cupy.asnumpy(cuda1d.corr1d(xg, w, pad, n, variant=variant, block=block, taps_key=key))


def warm_up() -> None:
    """Load now what the first :func:`correlate_span` in this process would otherwise wait for: the direct 1-D kernels'
    modules (from CuPy's cache) and the memory pool. A batch's GPU process runs it while its pool's workers parse
    their first files, so that their first answers do not queue behind it. The ``fft`` variant's cuFFT layer is not
    loaded: it takes half a second, and the direct kernels serve the short filters of sensor logs."""
    import cupy

    cuda1d.load_modules()
    cupy.empty(1 << 20, dtype=cupy.float32)  # the pool's first block


def filter_span(x: np.ndarray, taps, n: int, *, offset: int, delay: int, variant: str = "auto",
                block=None) -> np.ndarray:
    """Outputs ``offset .. offset + n - 1`` of the FIR ``taps`` delayed by ``delay`` over the (m, C) samples ``x``
    (zeros beyond them): y[i] = sum_k taps[k] x[offset + i + delay - k], as (n, C) float64.

    What a :class:`GPUFileFilter` gives for samples that fit in GPU memory at once, in one transfer each way and
    one kernel (float32 on the device, as there): for many short signals (a batch of logs) the per-block
    stream machinery costs more than the filtering. ``variant``/``block`` as in ``GPUFileFilter``.
    """
    xh, wh, pad = span_operands(x, taps, n, offset=offset, delay=delay)
    return correlate_span(xh, wh, pad, n, variant=variant, block=block).T.astype(np.float64)
