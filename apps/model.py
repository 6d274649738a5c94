"""What the TUI does, without the UI: load a signal, design the filter, run it, time it, save it.

Everything here calls sigconv's public API or the CLI's own helpers (``sigconv.cli.build_taps``, the
file filters of ``sigconv denoise``, ``sigconv.engine.file.filter_file``) and the benchmark harness
(``sigconv.bench``), so the TUI filters and times exactly what the command line does. No Textual
import here: the screens call these functions from worker threads.
"""

from __future__ import annotations

import argparse
import csv
import io
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

#: What the file browser shows: anything libsndfile reads, and CSV sensor logs.
AUDIO_SUFFIXES = frozenset(
    ".wav .wave .flac .ogg .oga .opus .aif .aiff .aifc .au .snd .caf .w64 .rf64 .mp3 .voc .sf .ircam .mat4 .mat5 "
    ".pvf .xi .htk .sds .avr .wve .mpc .sd2".split())
CSV_SUFFIXES = frozenset({".csv"})
#: Longest signal held in memory for viewing (frames per channel); longer files are viewed in part.
MAX_VIEW_FRAMES = 1 << 25

METHODS = (
    ("band", "FIR band-pass"),
    ("low", "FIR low-pass"),
    ("high", "FIR high-pass"),
    ("notch", "FIR notch"),
    ("spectral", "spectral gate"),
)
DIMENSIONS = (("1d", "1D FIR"), ("2d", "2D spectrogram smoothing"))
#: STFT used for viewing and for the 2-D smoothing operation.
N_FFT, HOP = 512, 128


class CancelledError(Exception):
    """The user cancelled a run."""


def is_viewable(path: Path) -> bool:
    return path.suffix.lower() in AUDIO_SUFFIXES | CSV_SUFFIXES


# ---------------------------------------------------------------------------------- loading


@dataclass
class Signal:
    """A loaded recording or sensor log: (C, L) float32 samples at ``fs`` Hz."""

    path: Path
    kind: str  # "audio" | "csv"
    data: np.ndarray  # (C, L) float32
    fs: float
    fmt: str  # "WAV PCM_16", "CSV (pyarrow)"
    names: list = field(default_factory=list)  # channel names
    info: object = None  # sigconv.engine.audio.AudioInfo for audio
    timestamps: Optional[np.ndarray] = None  # CSV timestamp column (seconds)
    time_name: str = "timestamp"
    note: str = ""

    @property
    def channels(self) -> int:
        return int(self.data.shape[0])

    @property
    def frames(self) -> int:
        return int(self.data.shape[1])

    @property
    def duration(self) -> float:
        if self.info is not None:
            return float(self.info.duration)
        return self.frames / self.fs if self.fs else 0.0

    def summary(self) -> str:
        names = f" ({', '.join(self.names)})" if self.kind == "csv" else ""
        s = (f"{self.path.name}: {self.duration:.2f} s, {self.fs:g} Hz, {self.channels} ch{names}, {self.fmt}")
        return s + (f"; {self.note}" if self.note else "")


def load_signal(path) -> Signal:
    """Audio through sigconv's probe (the CLI's checks), CSV sensor logs through pyarrow.csv.
    Raises ``sigconv.InputError`` with one line on anything it cannot read."""
    from sigconv._core.errors import InputError

    p = Path(path)
    if p.suffix.lower() in CSV_SUFFIXES:
        return load_csv(p)
    from sigconv.engine.audio import probe

    import soundfile as sf

    info = probe(p)
    n = min(info.frames, MAX_VIEW_FRAMES)
    try:
        x, fs = sf.read(str(p), frames=n, dtype="float32", always_2d=True)
    except Exception as exc:  # noqa: BLE001 (libsndfile's errors vary)
        raise InputError(f"{p}: cannot read ({exc})") from None
    if not np.isfinite(x).all():
        raise InputError(f"{p}: holds non-finite samples; refusing to filter")
    note = f"viewing the first {n} of {info.frames} frames" if n < info.frames else ""
    return Signal(p, "audio", np.ascontiguousarray(x.T), float(fs), f"{info.format} {info.subtype}",
                  names=[f"ch{i}" for i in range(info.channels)], info=info, note=note)


def load_csv(p: Path) -> Signal:
    """A sensor log: a timestamp column and numeric channels; the rate is 1 / median timestamp spacing."""
    from sigconv._core.errors import InputError

    if not p.exists():
        raise InputError(f"{p}: no such file")
    if p.is_dir():
        raise InputError(f"{p}: is a directory, not a sensor log")
    try:
        import pyarrow as pa
        import pyarrow.csv as pcsv
        import pyarrow.types as pt
    except ImportError:
        raise InputError(f"{p}: reading CSV logs needs pyarrow (pip install pyarrow)") from None
    try:
        table = pcsv.read_csv(str(p))
    except (pa.ArrowInvalid, OSError) as exc:
        raise InputError(f"{p}: not a CSV sensor log sigconv can read ({str(exc).splitlines()[0]})") from None
    if table.num_rows < 2:
        raise InputError(f"{p}: holds {table.num_rows} row(s); a sensor log needs at least 2")
    cols = table.column_names
    tname = next((c for c in cols if c.strip().lower() in ("timestamp", "time", "t", "time_s", "seconds")), cols[0])
    tcol = table.column(tname)
    if pt.is_timestamp(tcol.type):
        ts = tcol.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64)
        unit = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}[tcol.type.unit]
        ts = (ts - ts[0]) * unit
    elif pt.is_integer(tcol.type) or pt.is_floating(tcol.type):
        ts = tcol.to_numpy(zero_copy_only=False).astype(np.float64)
    else:
        raise InputError(f"{p}: timestamp column {tname!r} is {tcol.type}, not numbers or times")
    names, chans = [], []
    for c in cols:
        if c == tname:
            continue
        col = table.column(c)
        if pt.is_integer(col.type) or pt.is_floating(col.type):
            if col.null_count:
                raise InputError(f"{p}: column {c!r} has {col.null_count} empty value(s)")
            names.append(c)
            chans.append(col.to_numpy(zero_copy_only=False).astype(np.float32))
    if not chans:
        raise InputError(f"{p}: no numeric channel columns besides {tname!r}")
    if not np.isfinite(ts).all():
        raise InputError(f"{p}: timestamp column {tname!r} holds empty or non-finite values")
    dt = float(np.median(np.diff(ts)))
    if not dt > 0:
        raise InputError(f"{p}: timestamps in {tname!r} do not increase (median spacing {dt:g})")
    data = np.stack(chans)
    if not np.isfinite(data).all():
        bad = np.argwhere(~np.isfinite(data))[0]
        raise InputError(f"{p}: non-finite value in column {names[bad[0]]!r}, row {int(bad[1])}")
    return Signal(p, "csv", data, 1.0 / dt, "CSV sensor log", names=names, timestamps=ts, time_name=tname)


# ---------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """What the control panel holds; ``denoise_argv`` turns it into ``sigconv denoise`` options."""

    method: str = "band"
    low: float = 80.0
    high: float = 8000.0
    notch: float = 50.0
    strength: float = 1.0
    backend: str = "cpu"
    dimension: str = "1d"
    variant: str = "auto"
    block: object = None  # int (1-D) or (bx, by) (2-D), None for the variant's default
    smooth: int = 5  # 2-D smoothing kernel side

    @property
    def op(self) -> str:
        return "conv2d" if self.dimension == "2d" else "conv1d"


def spectral_reason() -> Optional[str]:
    """None when the spectral gate (issue 5) is importable, else why not."""
    try:
        import sigconv

        if not hasattr(sigconv, "spectral_denoise"):
            from sigconv.engine import spectral as _spectral  # noqa: F401
        return None
    except ImportError:
        return "not available: this installation has no sigconv.spectral_denoise"


def fit_band(s: Settings, fs: float) -> Settings:
    """Cap the cutoffs below Nyquist (a sensor log at 100 Hz cannot take 8000 Hz)."""
    nyq = fs / 2
    high = min(s.high, 0.9 * nyq)
    low = min(s.low, 0.5 * high)
    notch = s.notch if s.notch < 0.9 * nyq else round(0.25 * nyq, 3)
    return replace(s, low=round(low, 3), high=round(high, 3), notch=notch)


def denoise_argv(s: Settings, path="in.wav") -> list[str]:
    argv = ["denoise", str(path), "--backend", s.backend, "--variant", s.variant]
    if s.method == "spectral":
        argv += ["--method", "spectral", "--strength", f"{s.strength:g}"]
    elif s.method == "band":
        argv += ["--band", f"{s.low:g}", f"{s.high:g}"]
    elif s.method == "low":
        argv += ["--lowpass", f"{s.high:g}"]
    elif s.method == "high":
        argv += ["--highpass", f"{s.low:g}"]
    elif s.method == "notch":
        argv += ["--notch", f"{s.notch:g}"]
    if isinstance(s.block, int) and s.dimension == "1d":
        argv += ["--block", str(s.block)]
    return argv


def cli_args(s: Settings, path="in.wav") -> argparse.Namespace:
    """The Namespace ``sigconv denoise`` would parse for these settings (ValueError on bad values)."""
    from sigconv.cli import UsageError, make_parser

    try:
        return make_parser().parse_args(denoise_argv(s, path))
    except UsageError as exc:
        raise ValueError(str(exc)) from None


def design(s: Settings, fs: float):
    """(taps, description) exactly as ``sigconv denoise`` designs them (``sigconv.cli.build_taps``)."""
    from sigconv.cli import UsageError, build_taps

    try:
        taps, desc, _ = build_taps(cli_args(s), float(fs))
    except UsageError as exc:
        raise ValueError(str(exc)) from None
    return taps, f"{desc} ({taps.size} taps)"


def check_choice(s: Settings) -> Optional[str]:
    """Why these variant/block choices cannot run (None when they can)."""
    from sigconv.registry import table as _registry

    if s.variant == "auto":
        return None
    try:
        v = _registry.get(s.op, s.backend, s.variant)
    except ValueError as exc:
        return str(exc)
    why = v.availability()
    if why:
        return f"variant {v.name} ({v.backend}) is not available: {why}"
    if s.block is not None and s.block not in v.blocks:
        ok = ", ".join(fmt_block(b) for b in v.blocks) or "none (it takes no block size)"
        return f"block {fmt_block(s.block)} is not valid for {v.name}; valid: {ok}"
    return None


def fmt_block(b) -> str:
    if b is None:
        return "-"
    return "x".join(map(str, b)) if isinstance(b, (tuple, list)) else str(b)


# ---------------------------------------------------------------------------------- running


def spectrogram(x: np.ndarray, n_fft: int = N_FFT, hop: int = HOP) -> np.ndarray:
    """log10 power (F, T) of one channel, Hann window (numpy only: the view must not need scipy)."""
    x = np.asarray(x, dtype=np.float32)
    if x.size < n_fft:
        x = np.pad(x, (0, n_fft - x.size))
    n = 1 + (x.size - n_fft) // hop
    idx = np.arange(n_fft)[None, :] + hop * np.arange(n)[:, None]
    frames = x[idx] * np.hanning(n_fft).astype(np.float32)
    p = np.abs(np.fft.rfft(frames, axis=1)) ** 2
    return np.log10(p.T + 1e-10).astype(np.float32)


def gauss_kernel(k: int) -> np.ndarray:
    t = np.arange(k) - (k - 1) / 2
    g = np.exp(-0.5 * (t / max(k / 4, 0.5)) ** 2)
    g /= g.sum()
    return np.outer(g, g).astype(np.float32)


def freq_response(taps: np.ndarray, fs: float, n: int = 1024):
    """(Hz, dB) of the FIR on n points from 0 to Nyquist."""
    h = np.fft.rfft(np.asarray(taps, dtype=np.float64), 2 * n)
    f = np.linspace(0, fs / 2, h.size)
    return f, 20 * np.log10(np.maximum(np.abs(h), 1e-8))


@dataclass
class RunResult:
    before: np.ndarray  # (C, L) or (F, T)
    after: np.ndarray
    desc: str
    taps: Optional[np.ndarray] = None
    spec_before: Optional[np.ndarray] = None  # (F, T) of channel 0
    spec_after: Optional[np.ndarray] = None
    seconds: float = 0.0
    settings: Optional[Settings] = None


def run_filter(sig: Signal, s: Settings, *, progress: Optional[Callable[[float], None]] = None,
               cancel: Optional[threading.Event] = None, chunk_frames: int = 1 << 16,
               chunk_delay: float = 0.0) -> RunResult:
    """Filter the loaded signal in memory with the chosen backend/variant/block.

    1-D FIR: ``sigconv.FIRStream`` chunk by chunk (progress and cancel between chunks), centred to
    zero phase as ``sigconv denoise`` does. 2-D: the spectrogram of channel 0 smoothed by a k x k
    Gaussian with ``sigconv.correlate2d``. Spectral gate: ``sigconv.spectral_denoise`` per channel.
    """
    import sigconv

    progress = progress or (lambda f: None)
    why = check_choice(s)
    if why:
        raise ValueError(why)
    t0 = time.perf_counter()
    variant, block = s.variant, s.block
    if s.method == "spectral":
        why = spectral_reason()
        if why:
            raise ValueError(f"spectral gate {why}")
        out = []
        for c in range(sig.channels):
            if cancel is not None and cancel.is_set():
                raise CancelledError
            y = sigconv.spectral_denoise(sig.data[c], sig.fs, prop_decrease=s.strength, backend=s.backend,
                                         variant=variant, block=block)
            out.append(np.asarray(y, dtype=np.float32))
            progress((c + 1) / sig.channels)
        after = np.stack(out)
        return RunResult(sig.data, after, f"spectral gate, strength {s.strength:g}",
                         spec_before=spectrogram(sig.data[0]), spec_after=spectrogram(after[0]),
                         seconds=time.perf_counter() - t0, settings=s)
    if s.dimension == "2d":
        S = spectrogram(sig.data[0])
        progress(0.3)
        if cancel is not None and cancel.is_set():
            raise CancelledError
        k = gauss_kernel(s.smooth)
        Y = np.asarray(sigconv.correlate2d(S, k, "same", backend=s.backend, variant=variant, block=block))
        progress(1.0)
        return RunResult(S, Y, f"spectrogram smoothing, {s.smooth}x{s.smooth} Gaussian", spec_before=S,
                         spec_after=Y, seconds=time.perf_counter() - t0, settings=s)
    taps, desc = design(s, sig.fs)
    if taps.size > sig.frames:
        raise ValueError(f"the filter ({taps.size} taps) is longer than the signal ({sig.frames} frames); "
                         "widen the band or load a longer file")
    st = sigconv.FIRStream(taps.astype(np.float32), sig.channels, sig.fs, backend=s.backend,
                           variant=variant, block=block if isinstance(block, int) else None)
    delay = (taps.size - 1) // 2  # zero phase: drop the first (K-1)/2 causal outputs
    parts = []
    L = sig.frames
    for a in range(0, L, chunk_frames):
        if cancel is not None and cancel.is_set():
            raise CancelledError
        parts.append(np.asarray(st.process(sig.data[:, a:a + chunk_frames])))
        progress(min(1.0, (a + chunk_frames) / L))
        if chunk_delay:
            time.sleep(chunk_delay)
    parts.append(np.asarray(st.flush()).reshape(sig.channels, -1))
    y = np.concatenate(parts, axis=1)[:, delay:delay + L]
    return RunResult(sig.data, np.ascontiguousarray(y, dtype=np.float32), desc, taps=taps,
                     spec_before=spectrogram(sig.data[0]), spec_after=spectrogram(y[0]),
                     seconds=time.perf_counter() - t0, settings=s)


# ---------------------------------------------------------------------------------- latency


@dataclass
class LatencyRow:
    impl: str  # "sigconv:tiled", "scipy", "cudnn"
    backend: str
    kind: str  # "variant" | "peer"
    block: object = None
    ms: Optional[float] = None
    gbs: Optional[float] = None
    status: str = "ok"  # ok | flagged | FAIL | error | not available
    note: str = ""
    speedup: dict = field(default_factory=dict)  # baseline -> baseline ms / this ms
    chosen: bool = False
    fastest: bool = False

    @property
    def label(self) -> str:
        b = f" b={fmt_block(self.block)}" if self.block is not None else ""
        return f"{self.impl}{b}"


@dataclass
class Latency:
    op: str
    case: str
    rows: list
    baselines: tuple = ("scipy", "cudnn", "cupy")
    date: str = ""
    dtype: str = "float32"


def _case_1d(x: np.ndarray, taps: np.ndarray):
    """A bench case whose inputs are the loaded signal and the designed taps (not random data)."""
    from sigconv.bench import Case1D

    class SignalCase1D(Case1D):
        def inputs(self, xp, dtype, rng, nbuf):
            w = xp.asarray(taps[::-1].copy(), dtype=dtype)  # correlation with reversed taps = convolution
            xs = xp.ascontiguousarray(xp.asarray(x, dtype=dtype))
            return [(xs if i == 0 or xp is np else xs.copy(), w) for i in range(nbuf)]

        @property
        def label(self):
            return f"signal C={self.C} L={self.L} K={self.K}"

    return SignalCase1D(int(x.shape[0]), int(x.shape[1]), int(taps.size))


def _case_2d(S: np.ndarray, k: int):
    from sigconv.bench import Case2D

    class SignalCase2D(Case2D):
        def inputs(self, xp, dtype, rng, nbuf):
            w = xp.asarray(gauss_kernel(k)[None, None], dtype=dtype)
            xs = xp.ascontiguousarray(xp.asarray(S[None, None], dtype=dtype))
            return [(xs if i == 0 or xp is np else xs.copy(), w) for i in range(nbuf)]

    F, T = S.shape
    return SignalCase2D("spectrogram", 1, 1, F, T, 1, k, k, pad=(k // 2, k // 2), kernel="gauss")


def measure_latency(sig: Signal, s: Settings, *, budget: float = 0.2, reps: int = 50,
                    max_frames: int = 1 << 20, cancel: Optional[threading.Event] = None) -> Latency:
    """Time sigconv's variants (every accepted block) and the peers on the loaded data with the
    benchmark harness (``sigconv.bench``: correctness check against float64 first, warm-up, median
    of many runs, GB/s = input read + output written). Variants of the chosen backend run; peers of
    both backends run where they can; what cannot run here is a "not available: <reason>" row."""
    from sigconv import bench
    from sigconv._core import devices as _devices

    op = s.op
    if op == "conv1d":
        taps, _ = design(s, sig.fs) if s.method != "spectral" else (gauss_kernel(s.smooth)[0], "")
        x = sig.data[:, :max(max_frames, 4 * taps.size)]  # at least a few filter lengths
        # the loaded data as it is: on a log with a large offset (accel_z ~ 9.8) under a band-pass, the
        # bench's check accepts float32 results that are within the rounding of their terms (bench._check)
        if taps.size > x.shape[1]:
            raise ValueError(f"the filter ({taps.size} taps) is longer than the signal ({x.shape[1]} frames)")
        case = _case_1d(x, taps)
    else:
        S = spectrogram(sig.data[0, :max_frames])
        case = _case_2d(S, s.smooth)
    gpu_ok = _devices.cuda_reason() is None

    def variants_for(be):
        # the chosen backend's variants; the other's only when they cannot run (listed with why)
        return None if (be == s.backend or (be == "cuda" and not gpu_ok)) else []

    def should_stop():
        return cancel is not None and cancel.is_set()

    records, meta = bench.measure(op, case, ("cuda", "cpu"), variants_for=variants_for, budget=budget, reps=reps,
                                  should_stop=should_stop)
    if should_stop():
        raise CancelledError
    return Latency(op, case.label, latency_rows(records, s), date=meta["date"])


def latency_rows(records: list, s: Settings) -> list:
    """Table rows from bench records: one per variant x timed block, peers, unavailable ones."""
    rows: list[LatencyRow] = []
    for r in records:
        st = r["status"]
        if st == "skipped":
            rows.append(LatencyRow(r["impl"], r["backend"], r["kind"], status="not available", note=r["note"]))
            continue
        if st in ("FAIL", "error"):
            rows.append(LatencyRow(r["impl"], r["backend"], r["kind"], block=_block_of(r["block"]), status=st,
                                   note=r["note"]))
            continue
        nbytes = r["gbs"] * r["ms_median"] * 1e-3 * 1e9 if r.get("gbs") else None
        sweep = r.get("blocks_ms") or {}
        best = _block_of(r["block"])
        if sweep:
            for bs, ms in sweep.items():
                b = _parse_block(bs)
                if b == best:
                    ms = r["ms_median"]
                rows.append(LatencyRow(r["impl"], r["backend"], r["kind"], block=b, ms=ms,
                                       gbs=nbytes / (ms * 1e-3) / 1e9 if nbytes and ms else None, status=st,
                                       note=r["note"]))
        else:
            rows.append(LatencyRow(r["impl"], r["backend"], r["kind"], block=best, ms=r["ms_median"], gbs=r["gbs"],
                                   status=st, note=r["note"]))
    # baselines: scipy (cpu), cudnn (torch), the fastest CuPy peer
    def best_of(pred):
        ms = [r.ms for r in rows if r.kind == "peer" and r.status == "ok" and r.ms and pred(r.impl)]
        return min(ms) if ms else None

    base = {"scipy": best_of(lambda n: n == "scipy"), "cudnn": best_of(lambda n: n == "cudnn"),
            "cupy": best_of(lambda n: n.startswith("cupyx"))}
    timed = [r for r in rows if r.ms and r.status in ("ok", "flagged")]
    for r in timed:
        r.speedup = {k: v / r.ms for k, v in base.items() if v}
    if timed:
        min(timed, key=lambda r: r.ms).fastest = True
    # timed rows fastest first, then failures, then what cannot run here
    order = {"ok": 0, "flagged": 0, "FAIL": 1, "error": 1, "not available": 2}
    rows.sort(key=lambda r: (order.get(r.status, 1), r.ms if r.ms else float("inf")))
    want = f"sigconv:{s.variant}"
    for r in rows:
        if r.impl == want and r.backend == s.backend and (s.block is None or r.block is None or r.block == s.block):
            r.chosen = True
    return rows


def _block_of(b):
    return tuple(b) if isinstance(b, list) else b


def _parse_block(text: str):
    if "x" in text:
        a, b = text.split("x")
        return (int(a), int(b))
    return None if text == "-" else int(text)


LATENCY_COLUMNS = ("impl", "backend", "block", "median ms", "GB/s", "x scipy", "x cudnn", "x cupy", "status")


def latency_table(lat: Latency) -> list[list[str]]:
    """Rows of strings in LATENCY_COLUMNS order (what the table, the CSV and the markdown show)."""
    out = []
    for r in lat.rows:
        status = r.status if r.status != "not available" else f"not available: {r.note}"
        if r.status in ("FAIL", "error", "flagged"):
            status = f"{r.status}: {r.note}"
        out.append([r.impl, r.backend, fmt_block(r.block) if r.kind == "variant" else "",
                    f"{r.ms:.4g}" if r.ms else "", f"{r.gbs:.3g}" if r.gbs else "",
                    *(f"{r.speedup[k]:.2f}" if k in r.speedup else "" for k in lat.baselines), status])
    return out


def latency_csv(lat: Latency) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*LATENCY_COLUMNS, "fastest", "chosen"])
    for r, cells in zip(lat.rows, latency_table(lat)):
        w.writerow([*cells, int(r.fastest), int(r.chosen)])
    return buf.getvalue()


def latency_markdown(lat: Latency) -> str:
    lines = [f"# sigconv latency: {lat.op}, {lat.case} ({lat.dtype})", "",
             f"- date: {lat.date}; median of timed runs after a float64 correctness check (sigconv.bench); "
             "speed-up = baseline ms / row ms; **bold** = fastest", "",
             "| " + " | ".join(LATENCY_COLUMNS) + " |", "|" + "---|" * len(LATENCY_COLUMNS)]
    for r, cells in zip(lat.rows, latency_table(lat)):
        cells = [c.replace("|", "/") for c in cells]
        if r.fastest:
            cells = [f"**{c}**" if c else c for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- saving


def default_output(sig: Signal, s: Settings) -> Path:
    if s.dimension == "2d" and s.method != "spectral":
        return sig.path.with_name(f"{sig.path.stem}.smoothed-spectrogram.npy")
    return sig.path.with_name(f"{sig.path.stem}.denoised{sig.path.suffix}")


def check_output(sig: Signal, out: Path) -> Optional[str]:
    """Why ``out`` cannot be written at all (the CLI's rules), None when it can; overwrite is separate."""
    if out.exists() and out.resolve() == sig.path.resolve():
        return f"{out}: output would overwrite the input; choose another name"
    if out.is_dir():
        return f"{out}: output is a directory; give a file name"
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        return f"{folder}: output folder does not exist"
    return None


def _atomic_write(out: Path, write: Callable[[Path], None], overwrite: bool) -> None:
    """Write through a temporary file beside ``out`` and rename (no partial output on failure)."""
    from sigconv._core.atomic import atomic_output
    from sigconv._core.errors import OutputError

    if out.exists() and not overwrite:
        raise OutputError(f"{out}: already exists (confirm to overwrite)")
    with atomic_output(out) as tmp:
        write(tmp)


def save_output(sig: Signal, s: Settings, out, *, overwrite: bool = False, result: Optional[RunResult] = None,
                progress: Optional[Callable[[float], None]] = None,
                cancel: Optional[threading.Event] = None) -> str:
    """Write the filtered output; returns a one-line summary.

    Audio: ``sigconv.engine.file.filter_file`` with the CLI's own block filter (the whole file, streamed,
    atomic). CSV logs: the in-memory result with the timestamp column, atomic. 2-D smoothing: the
    smoothed spectrogram as .npy, atomic.
    """
    from sigconv._core import devices as _devices
    from sigconv._core.errors import OutputError
    from sigconv.engine.file import filter_file

    out = Path(out)
    why = check_output(sig, out)
    if why:
        raise OutputError(why)
    if out.exists() and not overwrite:
        raise OutputError(f"{out}: already exists (confirm to overwrite)")
    if s.dimension == "2d" and s.method != "spectral":
        if result is None or result.spec_after is None or result.settings != s:
            result = run_filter(sig, s, cancel=cancel)
        _atomic_write(out, lambda p: np.save(open(p, "wb"), result.after), overwrite)
        return f"wrote {out} (smoothed spectrogram {result.after.shape[0]}x{result.after.shape[1]})"
    if sig.kind == "csv":
        if result is None or result.settings != s or result.after.shape != sig.data.shape:
            result = run_filter(sig, s, cancel=cancel, progress=progress)

        def write(p):
            with open(p, "w", newline="") as f:
                w = csv.writer(f)
                w.writerow([sig.time_name, *sig.names])
                for i in range(sig.frames):
                    w.writerow([repr(float(sig.timestamps[i])), *(f"{v:.9g}" for v in result.after[:, i])])

        _atomic_write(out, write, overwrite)
        return f"wrote {out} ({sig.frames} rows, {sig.channels} channels; {result.desc})"
    backend = _devices.resolve_backend(s.backend)
    args = cli_args(replace(s, backend=backend), sig.path)
    info = sig.info
    if s.method == "spectral":
        why = spectral_reason()
        if why:
            raise ValueError(f"spectral gate {why}")
        from sigconv.engine.spectral import file_filter_factory

        make, desc = file_filter_factory(args, info, backend)
    else:
        from sigconv.cli import make_file_filter

        taps, desc = design(s, info.samplerate)
        if taps.size > info.frames:
            raise ValueError(f"the filter ({taps.size} taps) is longer than the file ({info.frames} frames)")
        make = make_file_filter(backend, taps, args)
    cb = (lambda done: progress(done / info.frames)) if progress else None
    try:
        res = filter_file(info, out, make, overwrite=overwrite, progress=cb, cancel=cancel)
    except KeyboardInterrupt:
        raise CancelledError from None
    return (f"wrote {out}: {info.duration:.2f} s, {desc}; backend {backend} (variant {res.variant or s.variant}); "
            f"{res.clipped} samples clipped")


def export_latency(lat: Latency, out, *, overwrite: bool = False) -> str:
    """CSV or markdown by the suffix (.csv / .md), atomic, no overwrite unless asked."""
    from sigconv._core.errors import OutputError

    out = Path(out)
    if out.suffix.lower() not in (".csv", ".md", ".markdown"):
        raise OutputError(f"{out}: export to a .csv or .md file")
    if out.is_dir():
        raise OutputError(f"{out}: is a directory; give a file name")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise OutputError(f"{folder}: output folder does not exist")
    text = latency_csv(lat) if out.suffix.lower() == ".csv" else latency_markdown(lat)
    _atomic_write(out, lambda p: p.write_text(text), overwrite)
    return f"wrote {out} ({len(lat.rows)} rows)"


def downsample_minmax(y: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(t index, min, max) envelopes of ``y`` in ``n`` bins, for drawing a long waveform in a terminal."""
    y = np.asarray(y)
    n = max(1, min(n, y.size))
    edges = np.linspace(0, y.size, n + 1).astype(int)
    lo = np.minimum.reduceat(y, edges[:-1])
    hi = np.maximum.reduceat(y, edges[:-1])
    return edges[:-1], lo, hi


def downsample_2d(S: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Mean-pool (F, T) down to at most (rows, cols); low frequencies last (row 0 = top = Nyquist)."""
    F, T = S.shape
    r_edges = np.linspace(0, F, min(rows, F) + 1).astype(int)
    c_edges = np.linspace(0, T, min(cols, T) + 1).astype(int)
    A = np.add.reduceat(S, r_edges[:-1], axis=0) / np.diff(r_edges)[:, None]
    A = np.add.reduceat(A, c_edges[:-1], axis=1) / np.diff(c_edges)[None, :]
    return A[::-1]
