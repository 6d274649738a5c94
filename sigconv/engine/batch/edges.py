"""Edges of the filtered runs of tables and NPY logs, and the exact block feed every path shares.

Edge rules (``BatchSettings.edges``): "odd" (the default) extends each filtered run at both ends by odd
reflection about its edge sample (scipy.signal.filtfilt's default padtype), runs the extension through the
same block filter and keeps only the run's outputs, so a log with an offset (a temperature around 20) gets
no step transient at its ends; "zero" pads with zeros (SciPy "same" semantics, what `denoise` does). Audio
files always use zero padding.

:class:`ExtendedFeed` cuts a run into the blocks a block filter (the engine's contract:
:class:`sigconv.engine.file.BlockFilter`) is fed, the same whether the run arrives whole (:func:`filter_into`)
or in record batches (the streamed tables): overlap-save output depends on the cut in its last bits.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from sigconv.engine.batch.settings import EDGE_RULES

__all__ = ["extension", "odd_extension", "ExtendedFeed", "filter_into", "runs"]


def extension(ntaps: int, delay: int, rule: str) -> tuple[int, int]:
    """(left, right): how many samples of extension a run needs on each side under edge rule ``rule``
    for a block filter of ``ntaps`` taps that drops ``delay`` outputs (its ``delay`` attribute).

    Such a filter's output j is sum_k h[k] x[j + delay - k], k = 0..K-1 (zero phase: delay (K-1)/2
    and ``finish`` feeds ``delay`` zeros, i.e. convolve "same"; linear phase: delay 0, lfilter). It
    reads inputs j + delay - (K-1) .. j + delay, so output 0 reaches K-1-delay samples before the
    run and output n-1 reaches delay samples after it: zero phase K//2 each side, linear phase K-1
    on the left and none on the right. "zero" needs none (the filter's own zero padding)."""
    if rule == "zero":
        return 0, 0
    if rule != "odd":
        raise ValueError(f"edges must be one of {', '.join(EDGE_RULES)}, got {rule!r}")
    return ntaps - 1 - delay, delay


def odd_extension(x: np.ndarray, p: int, side: str) -> np.ndarray:
    """(p, C) float64: the odd reflection of (n, C) ``x`` about its first (side "left") or last
    ("right") sample, as scipy.signal.filtfilt's padtype "odd": left 2*x[0] - x[p:0:-1], right
    2*x[-1] - x[-2:-p-2:-1]. Where ``x`` has fewer than p+1 samples, what there is is reflected and
    the rest holds the outermost reflected value (x[0] / x[-1] itself when n == 1): no step."""
    n = x.shape[0]
    m = min(p, n - 1)  # samples that can be reflected
    if side == "left":
        edge = np.asarray(x[:1], dtype=np.float64)
        refl = 2.0 * edge - np.asarray(x[1:m + 1], dtype=np.float64)[::-1]  # x[m], ..., x[1] mirrored
        hold = refl[:1] if m else edge
        return np.concatenate([np.repeat(hold, p - m, axis=0), refl])
    edge = np.asarray(x[n - 1:n], dtype=np.float64)
    refl = 2.0 * edge - np.asarray(x[n - 1 - m:n - 1], dtype=np.float64)[::-1]  # x[n-2], ..., x[n-1-m] mirrored
    hold = refl[-1:] if m else edge
    return np.concatenate([refl, np.repeat(hold, p - m, axis=0)])


class ExtendedFeed:
    """Feeds block filter ``flt`` one run as the stream [left extension | run | right extension], cut
    into blocks of ``frames`` rows (default ``flt.preferred_frames``) counted from the stream's row 0
    whatever pieces the run arrives in, then ``finish()``; passes ``sink`` only the outputs of the
    run, in order. With ext (0, 0) these are exactly the blocks the plain block loop feeds.

    The in-memory path (``filter_into``: the whole run in one ``push``) and the streamed tables
    (``stream.pump``: one ``push`` per record batch) both feed through this class, so they cut the
    same blocks (overlap-save output depends on the cut in its last bits) and give the same bytes.
    Memory: the first left+1 rows are held until known (the left extension needs them), the last
    right+1 rows are kept for the right extension, and less than one block waits to be fed."""

    def __init__(self, flt, ext: tuple[int, int], sink, frames: Optional[int] = None):
        self.flt, self.sink = flt, sink
        self.left, self.right = (int(v) for v in ext)
        self.bf = int(frames or flt.preferred_frames)
        self.n = 0  # run rows pushed
        self._head: list = []  # the run's first rows while fewer than left+1 are known
        self._head_rows = 0
        self._started = self.left == 0
        self._tail: Optional[np.ndarray] = None  # the run's last right+1 rows (float64)
        self._buf: list = []  # stream rows not yet fed, fewer than bf in all
        self._buf_rows = 0
        self._skip = self.left  # outputs still to drop at the start (they belong to the left extension)
        self._keep: Optional[int] = None  # outputs still to pass on, once the run's length is known
        self._emitted = 0  # outputs passed to sink
        self._closed = False

    def push(self, x: np.ndarray) -> None:
        """The next (rows, C) rows of the run."""
        if x.shape[0] == 0:
            return
        self.n += x.shape[0]
        if self.right:
            t = np.array(x[-(self.right + 1):], dtype=np.float64)  # a copy: x may be a large memmap
            if self._tail is not None and t.shape[0] < self.right + 1:
                t = np.concatenate([self._tail, t])[-(self.right + 1):]
            self._tail = t
        if self._started:
            self._feed(x)
            return
        self._head.append(x)
        self._head_rows += x.shape[0]
        if self._head_rows > self.left:
            self._start()

    def _start(self) -> None:
        head = np.concatenate(self._head) if len(self._head) > 1 else self._head[0]
        self._head, self._head_rows, self._started = [], 0, True
        self._feed(odd_extension(head[:self.left + 1], self.left, "left"))
        self._feed(head)

    def close(self) -> None:
        """The end of the run: feed the right extension, the last partial block and ``finish()``."""
        if self._closed:
            return
        self._closed = True
        if self.n == 0:
            return
        if not self._started:  # the run is shorter than left+1 rows
            self._start()
        self._keep = self.n - self._emitted  # outputs beyond these belong to the right extension
        if self.right:
            self._feed(odd_extension(self._tail, self.right, "right"))
        if self._buf_rows:
            self._run(np.concatenate(self._buf) if len(self._buf) > 1 else self._buf[0])
            self._buf, self._buf_rows = [], 0
        self._out(self.flt.finish())

    def _feed(self, x: np.ndarray) -> None:
        """Append rows to the stream; run every whole block of bf rows (from the stream's row 0)."""
        n, i, bf = x.shape[0], 0, self.bf
        if self._buf_rows:  # complete the waiting block first
            i = min(n, bf - self._buf_rows)
            self._buf.append(x[:i])
            self._buf_rows += i
            if self._buf_rows < bf:
                return
            self._run(np.concatenate(self._buf))
            self._buf, self._buf_rows = [], 0
        while n - i >= bf:  # whole blocks straight from x (no copy of a large run)
            self._run(x[i:i + bf])
            i += bf
        if i < n:
            self._buf, self._buf_rows = [x[i:]], n - i

    def _run(self, block: np.ndarray) -> None:
        self._out(self.flt.process(np.ascontiguousarray(block, dtype=self.flt.read_dtype)))

    def _out(self, y: np.ndarray) -> None:
        if self._skip:
            k = min(self._skip, y.shape[0])
            y, self._skip = y[k:], self._skip - k
        if self._keep is not None:  # after the run's end: drop what belongs to the right extension
            y = y[:self._keep]
            self._keep -= y.shape[0]
        if y.shape[0]:
            self._emitted += y.shape[0]
            self.sink(y)


def filter_into(flt, x, out, frames: Optional[int] = None, ext: tuple[int, int] = (0, 0)) -> None:
    """Run (n, C) ``x`` through block filter ``flt`` into ``out`` (n, C); exact across blocks.
    ``ext`` (left, right): samples of odd-reflection extension fed before and after ``x`` (see
    ``extension``); their outputs are dropped, so ``out`` keeps ``x``'s length and alignment."""
    n = x.shape[0]
    pos = 0

    def sink(y):
        nonlocal pos
        if pos + y.shape[0] > n:
            raise RuntimeError(f"block filter returned more than {n} frames")
        out[pos:pos + y.shape[0]] = y
        pos += y.shape[0]

    feed = ExtendedFeed(flt, ext, sink, frames)
    feed.push(x)
    feed.close()
    if pos != n:  # the engine's contract: output length == input length
        raise RuntimeError(f"block filter returned {pos} frames for {n}")


def runs(valid: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of True in a 1-D mask."""
    v = np.concatenate([[False], valid, [False]]).astype(np.int8)
    d = np.diff(v)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))
