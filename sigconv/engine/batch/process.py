"""One file in, one file out: what a batch worker runs (in the coordinator, a pool process or a
Dask worker). ``process_task`` never raises for a bad file: it returns a result whose status is
"failed" with a one-line reason. Only KeyboardInterrupt / SystemExit escape, after removing the
temporary output.

Filter choice per rate, when no filter option is given (``default_filter``):
- audio rates (>= ``AUDIO_MIN_RATE``): the `denoise` default, band-pass 80-8000 Hz capped below Nyquist;
- sensor logs (lower rates): band-pass fs/200 .. 0.4*fs with a transition of fs/200 (661 taps at any
  rate): removes drift and offsets (below 0.5 Hz at 100 Hz) and the band near Nyquist where a
  mains line aliases (a 50 Hz line in a 100 Hz log), keeps what lies between (0.5-40 Hz at 100 Hz).

Edges of tables and NPY logs (``--edges``, ``filter_into``'s ``ext``): "odd" (default) extends each
filtered run at both ends by odd reflection about its edge sample (scipy.signal.filtfilt's default
padtype), runs the extension through the same block filter and keeps only the run's outputs, so a
log with an offset (a temperature around 20) gets no step transient at its ends; "zero" pads with
zeros (SciPy "same" semantics, what `denoise` does). Audio files always use zero padding.
"""

from __future__ import annotations

import os
import signal
import time
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import numpy as np

from sigconv._core.errors import InputError, OutputError

#: Rates at or above this are recordings (audio default band); below, sensor logs.
AUDIO_MIN_RATE = 8000.0
#: Sensor-log default: high-pass edge, low-pass edge and transition as fractions of fs.
LOG_HIGHPASS, LOG_LOWPASS, LOG_TRANSITION = 1 / 200, 0.4, 1 / 200
#: ``--edges`` choices (tables and NPY logs); the first is the default.
EDGE_RULES = ("odd", "zero")
_EDGE_TEXT = {"odd": "odd-reflected edges", "zero": "zero-padded edges"}
#: Test hook (never set in normal use): "kill:NAME" makes the worker SIGKILL itself right before it
#: moves NAME's finished output into place (a crash mid-file); "sleep:NAME:SECONDS" slows NAME down.
TEST_HOOK_ENV = "_SIGCONV_BATCH_TEST"

_TAPS_CACHE: dict = {}
_BACKEND: Optional[str] = None


def _hook(name: str, stage: str) -> None:
    spec = os.environ.get(TEST_HOOK_ENV)
    if not spec:
        return
    parts = spec.split(":")
    if parts[0] == "kill" and stage == "rename" and parts[1] == name:
        os.kill(os.getpid(), signal.SIGKILL)
    if parts[0] == "sleep" and stage == "start" and parts[1] == name:
        time.sleep(float(parts[2]))


def backend_here(asked: str) -> str:
    """The backend of this process, resolved once (a GPU context is made only by the first GPU file)."""
    global _BACKEND
    if _BACKEND is None:
        from sigconv._core import devices as _devices

        try:
            _BACKEND = _devices.resolve_backend(asked)
        except RuntimeError as exc:
            raise InputError(str(exc)) from None
    return _BACKEND


def default_filter(s: SimpleNamespace, fs: float):
    """(taps, description) for a file of rate ``fs`` when no filter option was given."""
    from sigconv.cli import build_taps

    if fs >= AUDIO_MIN_RATE:
        taps, desc, _ = build_taps(s, fs)
        return taps, f"{desc} [default for recordings]"
    from sigconv.engine.design import design_fir

    lo, hi = LOG_HIGHPASS * fs, LOG_LOWPASS * fs
    taps = design_fir("bandpass", (lo, hi), fs, numtaps=s.taps, transition=None if s.taps else LOG_TRANSITION * fs)
    return taps, f"band-pass {lo:g}-{hi:g} Hz [default for sensor logs: removes drift and the band near Nyquist]"


def edge_rule(s: SimpleNamespace) -> str:
    """The edge rule for tables and NPY logs: ``s.edges`` (settings without it: the default, "odd")."""
    rule = getattr(s, "edges", None) or EDGE_RULES[0]
    if rule not in EDGE_RULES:
        raise ValueError(f"edges must be one of {', '.join(EDGE_RULES)}, got {rule!r}")
    return rule


def taps_for(s: SimpleNamespace, fs: float, edges: Optional[str] = None):
    """(taps, description) for rate ``fs``, memoised per process. ValueError (one line) when the
    options do not fit this rate (e.g. a cutoff above its Nyquist). ``edges`` (an edge rule) is
    named in the description."""
    key = (float(fs), edges,
           repr(sorted((k, v) for k, v in vars(s).items() if k not in ("columns", "time_column"))))
    hit = _TAPS_CACHE.get(key)
    if hit is None:
        from sigconv.cli import UsageError, build_taps

        try:
            if s.band is None and s.lowpass is None and s.highpass is None and not s.notch:
                taps, desc = default_filter(s, fs)
            else:
                taps, desc, _ = build_taps(s, fs)
        except UsageError as exc:
            raise ValueError(f"at {fs:g} Hz: {exc}") from None
        if s.phase == "zero" and taps.size % 2 == 0:
            raise ValueError(f"--phase zero needs an odd number of taps, got {taps.size}; use an odd --taps")
        more = f", {_EDGE_TEXT[edges]}" if edges else ""
        hit = (taps, f"{desc} ({taps.size} taps, {s.phase} phase{more})")
        _TAPS_CACHE[key] = hit
    return hit


def make_block_filter(taps, channels: int, s: SimpleNamespace):
    """A block filter (the engine's contract) for float64 (frames, channels) data: CPU in float64,
    GPU through the cuda FileFilter in float32."""
    backend = backend_here(s.backend)
    if backend == "cpu":
        from sigconv.engine.audio import pcm_spec
        from sigconv.engine.file import CPUFileFilter

        return CPUFileFilter(taps, channels, pcm_spec("DOUBLE"), phase=s.phase, variant=s.variant)
    from sigconv.backends.cuda1d import FileFilter

    return FileFilter(taps, channels, read_dtype="float32", phase=s.phase, out_dtype="float32", clip=False,
                      variant=s.variant, block=s.block)


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
    (``stream._pump``: one ``push`` per record batch) both feed through this class, so they cut the
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


def run_extension(flt, taps, s: SimpleNamespace) -> tuple[int, int]:
    """``filter_into``'s ``ext`` for block filter ``flt`` under the settings' edge rule."""
    return extension(len(taps), int(flt.delay), edge_rule(s))


def filter_run(taps, x, out, s: SimpleNamespace) -> None:
    """Filter (n, C) run ``x`` into ``out`` with a fresh block filter, extended per ``s.edges``."""
    flt = make_block_filter(taps, x.shape[1], s)
    filter_into(flt, x, out, ext=run_extension(flt, taps, s))


def runs(valid: np.ndarray) -> list[tuple[int, int]]:
    """[start, stop) of each run of True in a 1-D mask."""
    v = np.concatenate([[False], valid, [False]]).astype(np.int8)
    d = np.diff(v)
    return list(zip(np.flatnonzero(d == 1).tolist(), np.flatnonzero(d == -1).tolist()))


def filter_columns(x: np.ndarray, taps, s: SimpleNamespace, warnings: list, names) -> np.ndarray:
    """Filter (n, C) float64 ``x`` whose gaps (NaN / inf) are handled per ``s.gaps``:
    interpolate: linear across each gap (edges held), then filter; the output has no gaps.
    split: each run of finite samples is filtered on its own; gaps stay NaN in the output.
    Each filtered run (the filled column with interpolate) is extended at its ends per ``s.edges``."""
    n, C = x.shape
    bad = ~np.isfinite(x)
    out = np.empty_like(x)
    if not bad.any():
        filter_run(taps, x, out, s)
        return out
    K = len(taps)
    short = 0
    for c in range(C):
        b = bad[:, c]
        col = x[:, c]
        if b.all():
            warnings.append(f"column {names[c]!r} holds no finite values; left as it is")
            out[:, c] = col
            continue
        if not b.any():
            filter_run(taps, col[:, None], out[:, c:c + 1], s)
            continue
        if s.gaps == "interpolate":
            idx = np.arange(n)
            filled = col.copy()
            filled[b] = np.interp(idx[b], idx[~b], col[~b])
            filter_run(taps, filled[:, None], out[:, c:c + 1], s)
            warnings.append(f"column {names[c]!r}: {int(b.sum())} missing sample(s) interpolated")
        else:
            out[:, c] = np.nan
            rr = runs(~b)
            for a, e in rr:
                short += (e - a) < K
                filter_run(taps, col[a:e, None], out[a:e, c:c + 1], s)
            warnings.append(f"column {names[c]!r}: {int(b.sum())} missing sample(s) left as gaps; "
                            f"{len(rr)} run(s) filtered separately")
    if short:
        how = ("their ends are extended by odd reflection (and, beyond what a run can reflect, its outermost "
               "reflected value held), so their outputs rest largely on that extension"
               if edge_rule(s) == "odd" else "filtered with zero padding at their edges")
        warnings.append(f"{short} run(s) between gaps are shorter than the filter ({K} taps): {how}")
    return out


@contextmanager
def atomic_output(out: Path, outdir: Path, inp: Path):
    """Yield a temporary path beside ``out``; rename it onto ``out`` on success, remove it on any error
    (KeyboardInterrupt included). The output path is checked before and again just before the rename."""
    from sigconv._core.atomic import atomic_output as _atomic_output
    from sigconv.engine.batch.discovery import output_problem

    why = output_problem(inp, out, outdir)
    if why:
        raise OutputError(why)
    out.parent.mkdir(parents=True, exist_ok=True)

    def recheck():
        why = output_problem(inp, out, outdir)  # again: a link may have appeared meanwhile
        if why:
            raise OutputError(why)
        _hook(inp.name, "rename")

    with _atomic_output(out, before_replace=recheck) as tmp:
        yield tmp


def _check_length(taps, frames, fs, path):
    if len(taps) > frames:
        raise InputError(f"{path}: the filter ({len(taps)} taps, {len(taps) / fs:.3g} s) is longer than the file "
                         f"({frames} samples, {frames / fs:.3g} s); use fewer --taps or a wider --transition")


def _do_table(task, s, inp, out, outdir, res):
    from sigconv.engine.batch import formats, stream

    if stream.wanted(inp, task["kind"]) and stream.do_table(task, s, inp, out, outdir, res):
        return  # streamed (large files); else redone here, in memory
    table, tc = formats.read_table(inp, task["kind"], s.time_column)
    warnings = res["warnings"]
    fs, w = formats.file_rate(tc, lambda: table.column(tc), s.fs, inp)
    warnings.extend(w)
    chans = formats.choose_channels(table, tc, s.columns, inp)
    taps, desc = taps_for(s, fs, edge_rule(s))
    _check_length(taps, table.num_rows, fs, inp)
    cols = [formats.column_values(table, c) for c in chans]
    x = np.stack([v for v, _ in cols], axis=1)
    y = filter_columns(x, taps, s, warnings, chans)
    for j, (c, (_, nulls)) in enumerate(zip(chans, cols)):
        keep = nulls if s.gaps == "split" else np.zeros_like(nulls)
        table = formats.replace_column(table, c, y[:, j], keep)
    with atomic_output(out, outdir, inp) as tmp:
        formats.write_table(table, task["kind"], tmp)
    res.update(fs=fs, filter=desc, frames=table.num_rows, channels=chans, time_column=tc)


def _do_npy(task, s, inp, out, outdir, res):
    from sigconv.engine.batch import formats

    a, fs, was_1d = formats.read_npy(inp, s.fs)
    n, C = a.shape
    taps, desc = taps_for(s, fs, edge_rule(s))
    _check_length(taps, n, fs, inp)
    odt = formats.npy_out_dtype(a.dtype)
    step = 1 << 20
    finite = all(np.isfinite(a[i:i + step]).all() for i in range(0, n, step))
    side = formats.sidecar_path(inp)
    with atomic_output(out, outdir, inp) as tmp:
        y = np.lib.format.open_memmap(tmp, mode="w+", dtype=odt, shape=(n,) if was_1d else (n, C))
        y2 = y[:, None] if was_1d else y
        if finite:  # streamed: memory-mapped in, memory-mapped out
            filter_run(taps, a, y2, s)
        else:
            y2[...] = filter_columns(np.asarray(a, dtype=np.float64), taps, s, res["warnings"],
                                     [f"channel {c}" for c in range(C)])
        y.flush()
        del y, y2
        if side.exists() and s.fs is None:
            with atomic_output(formats.sidecar_path(out), outdir, side) as tmp_side:
                tmp_side.write_bytes(side.read_bytes())
    res.update(fs=fs, filter=desc, frames=n, channels=C)


def _do_audio(task, s, inp, out, outdir, res):
    from sigconv.engine.audio import probe
    from sigconv.engine.file import filter_file
    from sigconv.cli import make_file_filter

    info = probe(inp)
    fs = float(info.samplerate)
    backend = backend_here(s.backend)
    if s.method == "spectral":
        from sigconv.engine.spectral import file_filter_factory

        make, desc = file_filter_factory(s, info, backend)
    else:
        taps, desc = taps_for(s, fs, "zero")  # audio: zero padding, as `sigconv denoise`
        _check_length(taps, info.frames, fs, inp)
        make = make_file_filter(backend, taps, s)
    from sigconv.engine.batch.discovery import output_problem

    why = output_problem(inp, out, outdir)
    if why:
        raise OutputError(why)
    out.parent.mkdir(parents=True, exist_ok=True)
    r = filter_file(info, out, make, overwrite=True)  # its own temp + rename
    res.update(fs=fs, filter=desc, frames=info.frames, channels=info.channels, clipped=r.clipped)


def process_task(task: dict) -> dict:
    """Filter one file. ``task``: input, output, outdir, kind, settings (the batch options)."""
    t0 = time.perf_counter()
    inp, out, outdir = Path(task["input"]), Path(task["output"]), Path(task["outdir"])
    s = SimpleNamespace(**task["settings"])
    res = {"input": task["input"], "rel": task["rel"], "status": "failed", "output": None, "reason": None,
           "warnings": [], "fs": None, "filter": None, "pid": os.getpid(),
           "gpu": os.environ.get("CUDA_VISIBLE_DEVICES")}
    try:
        _hook(inp.name, "start")
        if s.method == "spectral" and task["kind"] != "audio":
            raise InputError(f"{inp}: --method spectral applies to audio files only")
        {"csv": _do_table, "parquet": _do_table, "npy": _do_npy, "audio": _do_audio}[task["kind"]](
            task, s, inp, out, outdir, res)
        res["status"], res["output"] = "done", str(out)
        res["backend"] = _BACKEND
    except (KeyboardInterrupt, SystemExit):
        raise
    except (InputError, OutputError, ValueError) as exc:
        res["reason"] = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    except MemoryError:
        res["reason"] = f"{inp}: out of memory"
    except Exception as exc:  # noqa: BLE001 - one bad file must not stop the batch
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        res["reason"] = f"{inp}: {type(exc).__name__}: {first}"
    if res["reason"] and res["reason"].startswith(f"{inp}: "):
        res["reason"] = res["reason"][len(f"{inp}: "):]  # the summary names the file
    res["seconds"] = time.perf_counter() - t0
    return res
