"""The spectral gate as a block filter of the file engine (:class:`SpectralFileFilter`)."""

from __future__ import annotations

import numpy as np
import soundfile as sf

from sigconv._core.xp import to_host
from sigconv.engine.file import BlockFilter
from sigconv.engine.spectral.gate import Gate, array_getter

__all__ = ["SpectralFileFilter", "FILE_BLOCK"]

#: Frames per block of the file engine (fewer when the gate's frame budget asks for it).
FILE_BLOCK = 1 << 19


class SpectralFileFilter(BlockFilter):
    """Spectral gate for the file engine: a fixed delay of ``n_fft + R*hop`` samples (R: the frames of context
    the gains need), so every ``process`` returns as many frames as it got and the output equals
    :func:`sigconv.spectral_denoise` on the whole file.

    ``estimate``: True for a first streaming pass over ``path`` (on the first block) that estimates the
    stationary statistics; False when the gate's threshold is already set (noise clip or range) or the mode is
    non-stationary.
    """

    def __init__(self, gate: Gate, spec, path=None, estimate: bool = False, block_frames: int = FILE_BLOCK):
        super().__init__(gate.C, gate.N + gate.R * gate.H, spec)
        self.gate, self.path, self.estimate = gate, path, estimate
        self.preferred_frames = gate.chunk_samples(block_frames)
        self.buf = np.zeros((gate.C, 0), spec.work_dtype)
        self.buf0 = 0  # global index of buf[:, 0]
        self.have = 0  # input samples received within [0, L)
        self.consumed = 0  # samples received, including the delay zeros of finish()
        self.done = 0  # outputs computed: [0, done)
        self.pending = np.zeros((gate.C, 0), spec.work_dtype)  # computed outputs [done - pending, done)
        self.variant = gate.variant

    def _get(self, lo, hi):
        g = self.gate
        out = np.zeros((g.C, hi - lo), self.spec.work_dtype)
        a, b = max(lo, self.buf0), min(hi, self.buf0 + self.buf.shape[1])
        if b > a:
            out[:, a - lo:b - lo] = self.buf[:, a - self.buf0:b - self.buf0]
        return g.xp.asarray(out)

    def _stats_pass(self):
        g = self.gate
        with sf.SoundFile(str(self.path)) as f:
            data = f.read(dtype=self.spec.read_dtype, always_2d=True) if g.L <= self.preferred_frames else None
        if data is not None:  # small file: one array
            x = np.ascontiguousarray(data.T, dtype=self.spec.work_dtype)
            g.estimate_stats(array_getter(g.xp.asarray(x), g.L, g.xp))
            return
        # stream: frames [f0, f1) need samples [s_f0, s_(f1-1) + N); a sliding buffer from s_f0 on
        g.hist_init()
        step = max(1, self.preferred_frames // g.H)
        with sf.SoundFile(str(self.path)) as f:
            buf, buf0 = np.zeros((g.C, g.P), self.spec.work_dtype), -g.P  # samples [-P, 0) are zeros
            for f0 in range(0, g.T, step):
                f1 = min(g.T, f0 + step)
                need = g.s(f1 - 1) + g.N
                while buf0 + buf.shape[1] < need:
                    blk = f.read(self.preferred_frames, dtype=self.spec.read_dtype, always_2d=True)
                    if blk.shape[0] == 0:  # past the end: zeros
                        blk = np.zeros((need - buf0 - buf.shape[1], g.C))
                    buf = np.concatenate([buf, np.ascontiguousarray(blk.T, dtype=self.spec.work_dtype)], 1)

                def get(a, b, buf=buf, buf0=buf0):
                    return g.xp.asarray(buf[:, a - buf0:b - buf0])

                g.hist_add(get, f0, f1)
                keep = g.s(f1) - buf0
                buf, buf0 = buf[:, keep:], buf0 + keep
        g.hist_finish()

    def _filter_block(self, x):
        g = self.gate
        if self.estimate:
            self.estimate = False
            self._stats_pass()
        n = x.shape[1]
        take = max(0, min(n, g.L - self.have))
        if take:
            self.buf = np.concatenate([self.buf, x[:, :take]], axis=1)
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
            y = to_host(g.run_range(self._get, self.done, b)).astype(self.spec.work_dtype, copy=False)
            self.pending = np.concatenate([self.pending, y], axis=1) if self.pending.shape[1] else y
            self.done = b
            # drop samples no later chunk needs: the next chunk starts at frame tA(done) - R
            tA = (self.done + g.P - g.N) // g.H + 1
            keep_from = max(0, g.s(max(0, tA - g.R)))
            if keep_from > self.buf0:
                self.buf = self.buf[:, keep_from - self.buf0:]
                self.buf0 = keep_from
        # return outputs [consumed - n - D, consumed - D); negative indices are the dropped delay
        lo, hi = self.consumed - n - self.delay, self.consumed - self.delay
        res = np.zeros((g.C, n), self.spec.work_dtype)
        p0 = self.done - self.pending.shape[1]  # global index of pending[:, 0]
        a, b2 = max(lo, 0), hi
        if b2 > a:
            if b2 > self.done:
                raise RuntimeError(f"spectral gate: output {b2} requested before it is final ({self.done})")
            res[:, a - lo:b2 - lo] = self.pending[:, a - p0:b2 - p0]
            self.pending = self.pending[:, b2 - p0:]
        return res
