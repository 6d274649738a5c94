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

from sigconv.backends import cuda1d
from sigconv.engine.settings import phase_delay

__all__ = ["GPUFileFilter", "filter_span", "span_operands", "correlate_span", "quantise_device", "DEVICE_LOCK"]

#: Held while one of this process's threads uses the GPU for a batch log (``filter_span``, or a block filter over
#: a log): transfers and kernels of one log at a time; the host's share of the work (edges, conversions) is done
#: outside it, in parallel.
DEVICE_LOCK = threading.RLock()

_READ_SCALE = {"int16": 1.0 / 32768.0, "int32": 1.0 / 2147483648.0, "float32": 1.0, "float64": 1.0}
#: float -> integer: v = rint(y * scale), saturated to [lo, hi].
_INT_OUT = {"int16": (32768.0, -32768.0, 32767.0), "int32": (2147483648.0, -2147483648.0, 2147483647.0)}
_OUT_DTYPES = ("int16", "int32", "float32", "float64")

_EK: dict = {}


def _ek(name):
    """Lazily built elementwise kernels for the conversions."""
    k = _EK.get(name)
    if k is None:
        import cupy

        if name == "to_float":
            k = cupy.ElementwiseKernel("T x, float32 s", "float32 y", "y = (float)x * s", "sigconv_fe_to_float")
        elif name == "to_int":
            k = cupy.ElementwiseKernel(
                "float32 y, float64 scale, float64 lo, float64 hi", "O out, uint8 flag",
                "double v = rint((double)y * scale); flag = (v < lo || v > hi); out = (O)fmin(fmax(v, lo), hi);",
                "sigconv_fe_to_int")
        elif name == "clip_float":
            k = cupy.ElementwiseKernel(
                "float32 y", "O out, uint8 flag",
                "flag = (y < -1.0f || y > 1.0f); out = (O)fminf(fmaxf(y, -1.0f), 1.0f);", "sigconv_fe_clip")
        _EK[name] = k
    return k


def quantise_device(y, spec) -> tuple:
    """(C, n) float samples on the device -> ((n, C) host array of ``spec.out_dtype``, samples clipped): what
    :func:`sigconv.engine.audio.quantise` does on the host, done on the device so that only the samples to write
    travel back. 16-bit output from float32 goes through the FIR path's conversion kernel (round, saturate,
    interleave in one pass; ``cupy.rint`` would import cupyx.scipy.special, and SciPy with it: a quarter of a
    second of every command's start); other subtypes through the host rule on device arrays."""
    import cupy

    C, n = y.shape
    if spec.clip and spec.scale and spec.out_dtype == "int16" and y.dtype == np.float32:
        out = cupy.empty((n, C), dtype=np.int16)
        flag = cupy.empty((n, C), dtype=np.uint8)
        _ek("to_int")(y.T, float(spec.scale), float(spec.lo), float(spec.hi), out, flag)
        return cupy.asnumpy(out), int(cupy.count_nonzero(flag))
    from sigconv.engine.audio import quantise

    q, clipped = quantise(y.T, spec)
    return cupy.asnumpy(cupy.ascontiguousarray(q)), clipped


def _is_oom(exc) -> bool:
    import cupy

    if isinstance(exc, cupy.cuda.memory.OutOfMemoryError):
        return True
    return "ALLOC_FAILED" in str(exc) or "out of memory" in str(exc).lower()


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
    variant, block
        Kernel choice. "auto" is resolved on the first block by the chooser
        (:func:`sigconv.registry.auto.choose_conv1d`, timed on that block) and kept for the whole file;
        ``variant`` then names what runs.
    chunk_frames : int, optional
        Overrides ``preferred_frames``.
    """

    #: Smallest block (frames) the out-of-memory retry splits down to.
    OOM_FLOOR_FRAMES = 1 << 14

    def __init__(self, taps, channels, *, read_dtype, phase="zero", out_dtype, clip, variant="auto", block=None,
                 chunk_frames=None):
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
        self._core = cuda1d.StreamFilter(h, self.C, np.float32, variant=variant, block=block)
        self.variant = variant
        self.delay = phase_delay(K, phase)
        if chunk_frames is not None:
            self.preferred_frames = int(chunk_frames)
        else:
            self.preferred_frames = max(1 << 22, 1 << (8 * K - 1).bit_length())
        self.clipped = 0
        self._to_drop = self.delay

    # -- state snapshot for the out-of-memory retry (a failed attempt leaves no trace)
    def _state(self):
        return (self._core.hist, self._to_drop, self.clipped)

    def _restore(self, st):
        self._core.hist, self._to_drop, self.clipped = st

    def _fix_variant(self, xf) -> None:
        """Resolve "auto" once, on the first block (C, n) as the stream filter will see it."""
        core = self._core
        if core.variant == "auto":
            core.variant, core.block = cuda1d.resolve_auto(xf, core.w, self.K - 1, xf.shape[1], core.block)
            self.variant = core.variant

    def _process_device(self, block: np.ndarray) -> np.ndarray:
        import cupy

        n, C = block.shape
        xg = cupy.asarray(block)  # (n, C) interleaved, read dtype
        xf = cupy.empty((C, n), dtype=np.float32)
        _ek("to_float")(xg.T, np.float32(_READ_SCALE.get(xg.dtype.name, 1.0)), xf)  # deinterleave + scale
        del xg
        self._fix_variant(xf)
        y = self._core._filter(xf)
        del xf
        d = min(self._to_drop, y.shape[1])
        if d:
            y = y[:, d:]
            self._to_drop -= d
        m = y.shape[1]
        out = cupy.empty((m, C), dtype=self.out_dtype)
        if self.out_dtype in _INT_OUT or self.clip:
            flag = cupy.empty((m, C), dtype=np.uint8)
            if self.out_dtype in _INT_OUT:
                _ek("to_int")(y.T, *_INT_OUT[self.out_dtype], out, flag)  # scale, round, saturate, interleave
            else:
                _ek("clip_float")(y.T, out, flag)
            self.clipped += int(cupy.count_nonzero(flag))
        else:
            out[...] = y.T
        return cupy.asnumpy(out)

    def _run(self, block: np.ndarray) -> np.ndarray:
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
        a = self._run(block[:half])
        b = self._run(block[half:])
        return np.concatenate([a, b], axis=0)

    def process(self, block) -> np.ndarray:
        """Filter the next (n, C) block; returns (m, C) samples of out_dtype ready to write."""
        block = np.asarray(block)
        if block.ndim == 1 and self.C == 1:
            block = block[:, None]
        if block.ndim != 2 or block.shape[1] != self.C:
            raise ValueError(f"block must have shape (frames, {self.C}), got {block.shape}")
        if block.shape[0] == 0:
            return np.empty((0, self.C), dtype=self.out_dtype)
        return self._run(np.ascontiguousarray(block))

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
            variant, block = cuda1d.resolve_auto(xg, w, pad, n, block)
        return cupy.asnumpy(cuda1d.corr1d(xg, w, pad, n, variant=variant, block=block, taps_key=key))


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
