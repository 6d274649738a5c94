"""The spectral gate as a block filter of the file engine (:class:`SpectralFileFilter`).

On cuda the samples live on the device from the moment they are read: the engine reads raw PCM (int16 for 16-bit
files, int32 for 24/32-bit, float32 for float), the device scales it, gates it, rounds and saturates it for the
output subtype and hands back what soundfile writes; the buffers of context stay on the device, so nothing
proportional to the signal is done on the host but the reading and writing. The copies to the device are made in
the engine's reader thread and those back in its writer thread (:meth:`SpectralFileFilter.stage`,
:meth:`SpectralFileFilter.fetch`), so the main thread only launches kernels. The statistics pass (stationary mode
without a noise reference) reads the file once more, a block ahead of the device, in a thread of its own.
"""

from __future__ import annotations

import queue
import threading

import numpy as np
import soundfile as sf

from sigconv.engine.audio import probe, read_block
from sigconv.engine.file import BlockFilter
from sigconv.engine.spectral.gate import Gate

__all__ = ["SpectralFileFilter", "FILE_BLOCK", "FILE_WORK_BYTES"]

#: Frames per block of the file engine on the cpu (fewer when the gate's frame budget asks for it); cuda takes
#: blocks :data:`CUDA_BLOCK_FACTOR` times larger (fewer launches and syncs per second of audio).
FILE_BLOCK = 1 << 19
CUDA_BLOCK_FACTOR = 4
#: Largest block on the cpu, where the default grows to give every thread a chunk.
CPU_MAX_BLOCK = 1 << 20
#: Host memory the cpu threads of one block may hold at once (frames, spectra, masks of the chunks in flight):
#: with the engine's queues, file mode stays within about 300 MB whatever the core count.
FILE_WORK_BYTES = 96 << 20


def _raw_dtype(spec) -> str:
    """What the engine reads for the device: the file's integers as they are (the device scales them), else
    the float type soundfile gives."""
    if spec.out_dtype in ("int16", "int32") and spec.scale:
        return spec.out_dtype
    return spec.read_dtype


class SpectralFileFilter(BlockFilter):
    """Spectral gate for the file engine: a fixed delay of ``n_fft + R*hop`` samples (R: the frames of context
    the gains need), so every ``process`` returns as many frames as it got and the output equals
    :func:`sigconv.spectral_denoise` on the whole file.

    ``estimate``: True for a first streaming pass over ``path`` (on the first block) that estimates the
    stationary statistics; False when the gate's threshold is already set (noise clip or range) or the mode is
    non-stationary.
    """

    def __init__(self, gate: Gate, spec, path=None, estimate: bool = False, block_frames: int = FILE_BLOCK,
                 info=None):
        super().__init__(gate.C, gate.N + gate.R * gate.H, spec)
        self.gate, self.path, self.estimate, self.info = gate, path, estimate, info
        self.xp = gate.xp
        self.device = gate.backend == "cuda"
        self._clipped_dev = []
        if self.device:
            self.read_dtype = _raw_dtype(spec)
            self._cuda_device = self.xp.cuda.Device()  # the current one: the engine's threads use it too
            if block_frames == FILE_BLOCK:
                block_frames *= CUDA_BLOCK_FACTOR
        else:
            # threads for a block's chunks, as many as the memory budget allows, and blocks that give each one
            # a chunk (up to CPU_MAX_BLOCK frames); a thread of the statistics pass holds a histogram and a span
            gate.fit_threads(FILE_WORK_BYTES)
            span = gate.chunk_bytes(gate.frame_step() * gate.H) + gate.hist_bytes()
            gate.max_stats_threads = max(1, (FILE_WORK_BYTES - gate.hist_bytes()) // span)
            if block_frames == FILE_BLOCK:
                block_frames = max(FILE_BLOCK, min(CPU_MAX_BLOCK, gate.cpu_chunk() * gate._threads(1 << 30)))
        self.preferred_frames = gate.chunk_samples(block_frames)
        self.buf = self.xp.zeros((gate.C, 0), spec.work_dtype)
        self.buf0 = 0  # global index of buf[:, 0]
        self.have = 0  # input samples received within [0, L)
        self.consumed = 0  # samples received, including the delay zeros of finish()
        self.done = 0  # outputs computed: [0, done)
        self.pending = self.xp.zeros((gate.C, 0), spec.work_dtype)  # computed outputs [done - pending, done)
        self.variant = gate.variant

    # ---------------------------------------------------------------- samples in and out

    def _put(self, dst, col, src):
        """``dst[:, col:col + w] = src`` ((C, w) arrays of rows laid out contiguously): on the device one 2-D copy,
        with no elementwise kernel to compile on a first run."""
        if self.device:
            from sigconv.backends.cuda1d import put_columns

            put_columns(dst, col, src)
        else:
            dst[:, col:col + src.shape[1]] = src

    def _cat(self, parts):
        """The (C, w_i) ``parts`` side by side (``concatenate`` along the samples), as :meth:`_put` copies them."""
        if not self.device:
            return np.concatenate(parts, axis=1)
        out = self.xp.empty((self.C, sum(p.shape[1] for p in parts)), self.spec.work_dtype)
        col = 0
        for p in parts:
            self._put(out, col, p)
            col += p.shape[1]
        return out

    def stage(self, block):
        """In the engine's reader thread: the raw block goes to the device there, so the copy overlaps the
        gating of the block before it (cpu: unchanged)."""
        if not self.device:
            return block
        with self._cuda_device:
            return self.xp.asarray(block)

    def fetch(self, q):
        """In the engine's writer thread: the samples to write come back from the device there."""
        return q if isinstance(q, np.ndarray) else q.get()

    def _to_work(self, block):
        """(n, C) as read (on the device when staged) -> (C, n) work dtype on the backend."""
        if not self.device:
            return super()._to_work(block)
        from sigconv.engine.gpu_file import to_work_device

        return to_work_device(self.xp.asarray(block), self.spec.work_dtype)

    def _zeros(self, n):
        return self.xp.zeros((self.C, n), self.spec.work_dtype)

    def _quantise(self, y):
        if not self.device:
            q, c = super()._quantise(y)
            return np.ascontiguousarray(q), c
        from sigconv.engine.gpu_file import quantise_device

        q, clipped = quantise_device(y, self.spec)  # stays on the device until the writer fetches it
        if clipped is not None:
            self._clipped_dev.append(clipped)  # counted on the device; read once, at the end
        return q, 0

    def finish(self):
        tail = super().finish()
        if self._clipped_dev:
            self.clipped += sum(int(c) for c in self._clipped_dev)
            self._clipped_dev.clear()
        return tail

    # ---------------------------------------------------------------- statistics

    def _blocks(self, frames):
        """The file's blocks of ``frames`` (n, C), read (and staged) a block ahead in a thread (disk, copies and
        device overlap)."""
        q: queue.Queue = queue.Queue(maxsize=2)
        stop = threading.Event()

        def reader():
            try:
                info = self.info if self.info is not None else probe(self.path)
                with sf.SoundFile(str(self.path)) as f:
                    done = 0
                    while not stop.is_set():
                        blk = read_block(f, frames, self.read_dtype, info, done)
                        if blk.shape[0] == 0:
                            q.put(blk)
                            return
                        done += blk.shape[0]
                        q.put(self.stage(blk))
            except BaseException as exc:  # noqa: BLE001 (handed to the consumer)
                q.put(exc)

        t = threading.Thread(target=reader, daemon=True)
        t.start()
        try:
            while True:
                item = q.get()
                if isinstance(item, BaseException):
                    raise item
                if item.shape[0] == 0:
                    return
                yield item
        finally:
            stop.set()
            while t.is_alive():  # unblock a reader waiting on a full queue
                try:
                    q.get_nowait()
                except queue.Empty:
                    t.join(0.05)

    def _stats_pass(self):
        g, xp = self.gate, self.xp
        # frames [f0, f1) need samples [s_f0, s_(f1-1) + N): a sliding buffer from s_f0 on, samples [-P, 0) zeros
        g.hist_init()
        step = g.frame_step()
        buf, buf0 = xp.zeros((g.C, g.P), self.spec.work_dtype), -g.P
        f0 = 0
        blocks = self._blocks(self.preferred_frames)
        while f0 < g.T:
            blk = next(blocks, None)
            parts = [buf]
            if blk is None:  # past the end: zeros for the last frames
                short = max(0, g.s(g.T - 1) + g.N - buf0 - buf.shape[1])
                parts.append(xp.zeros((g.C, short), self.spec.work_dtype))
            else:
                parts.append(self._to_work(blk))
            buf = self._cat(parts)
            f1 = g.T if blk is None else min(g.T, (buf0 + buf.shape[1] - g.N + g.P) // g.H + 1)
            if f1 > f0:
                get = (lambda a, b, buf=buf, buf0=buf0: buf[:, a - buf0:b - buf0])
                g.hist_spans(get, [(s, min(f1, s + step)) for s in range(f0, f1, step)])
                keep = g.s(f1) - buf0
                buf, buf0 = buf[:, keep:], buf0 + keep
                f0 = f1
        blocks.close()
        g.hist_finish()

    # ---------------------------------------------------------------- blocks

    def _get(self, lo, hi):
        g, xp = self.gate, self.xp
        a, b = max(lo, self.buf0), min(hi, self.buf0 + self.buf.shape[1])
        if a == lo and b == hi:
            return self.buf[:, a - self.buf0:b - self.buf0]
        out = xp.zeros((g.C, hi - lo), self.spec.work_dtype)
        if b > a:
            self._put(out, a - lo, self.buf[:, a - self.buf0:b - self.buf0])
        return out

    def _filter_block(self, x):
        g, xp = self.gate, self.xp
        if self.estimate:
            self.estimate = False
            self._stats_pass()
        n = x.shape[1]
        take = max(0, min(n, g.L - self.have))
        if take:
            self.buf = self._cat([self.buf, x[:, :take]])
            self.have += take
        self.consumed += n
        # outputs [done, b) are final once the frames they need are complete
        if self.have >= g.L:
            b = g.L
        else:
            t_avail = (self.have - g.N + g.P) // g.H  # last frame whose samples are all here
            tB = t_avail - g.R
            b = min(g.L, g.s(tB + 1)) if tB >= 0 else 0
        if b > self.done:
            parts = [self.pending] if self.pending.shape[1] else []
            parts += [y.astype(self.spec.work_dtype, copy=False) for _, y in g.run(self._get, self.done, b)]
            self.pending = self._cat(parts) if len(parts) > 1 else parts[0]
            self.done = b
            # drop samples no later chunk needs: the next chunk starts at frame tA(done) - R
            tA = (self.done + g.P - g.N) // g.H + 1
            keep_from = max(0, g.s(max(0, tA - g.R)))
            if keep_from > self.buf0:
                self.buf = self.buf[:, keep_from - self.buf0:]
                self.buf0 = keep_from
        # return outputs [consumed - n - D, consumed - D); negative indices are the dropped delay
        lo, hi = self.consumed - n - self.delay, self.consumed - self.delay
        res = xp.zeros((g.C, n), self.spec.work_dtype)
        p0 = self.done - self.pending.shape[1]  # global index of pending[:, 0]
        a, b2 = max(lo, 0), hi
        if b2 > a:
            if b2 > self.done:
                raise RuntimeError(f"spectral gate: output {b2} requested before it is final ({self.done})")
            self._put(res, a - lo, self.pending[:, a - p0:b2 - p0])
            self.pending = self.pending[:, b2 - p0:]
        return res
