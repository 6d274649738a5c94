"""Filter the loaded signal as the control panel says, in memory for the views, and save the result.

The panel's :class:`Settings` turn into sigconv's typed settings (``KernelChoice``, ``FirSpec``, ``GateSpec``),
so the TUI designs and runs exactly what ``sigconv denoise`` does; audio is saved by ``sigconv.prepare_denoise``
(the pipeline behind that command). No Textual import here: the screens call these functions from worker
threads.
"""

from __future__ import annotations

import csv
import os
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

import sigconv

from . import overview as _overview
from .loading import Signal, array_signal, audio_signal

#: How the TUI's user fixes an output problem (its dialogs, not the command line's options).
TUI_HINTS = sigconv.OutputHints(overwrite="confirm to overwrite", rename="choose another name")

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


# ---------------------------------------------------------------------------------- settings


@dataclass(frozen=True)
class Settings:
    """What the control panel holds; :attr:`kernel`, :attr:`fir` and :attr:`gate` are sigconv's typed settings."""

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
    #: (start, end) seconds of the signal holding only noise, for the spectral gate (None: estimated from it all)
    noise_from: Optional[tuple] = None
    # The band-pass is the default for the loaded signal's kind (sigconv.default_band / default_rule, what the
    # CLI's denoise and batch apply) until the user sets an edge; low/high then show its edges.
    default_band: bool = True

    @property
    def op(self) -> str:
        return "conv2d" if self.dimension == "2d" else "conv1d"

    @property
    def kernel(self) -> sigconv.KernelChoice:
        """Backend, variant and block (ValueError listing the valid names for an unknown variant)."""
        return sigconv.KernelChoice(self.op, self.backend, self.variant, self.block)

    @property
    def fir(self) -> sigconv.FirSpec:
        """The FIR filter of the chosen method (the default filter for the spectral gate, which has none)."""
        if self.method == "band":
            return sigconv.FirSpec() if self.default_band else sigconv.FirSpec(band=(self.low, self.high))
        if self.method == "low":
            return sigconv.FirSpec(lowpass=self.high)
        if self.method == "high":
            return sigconv.FirSpec(highpass=self.low)
        if self.method == "notch":
            return sigconv.FirSpec(notch=self.notch)
        return sigconv.FirSpec()

    @property
    def edges(self) -> tuple:
        """The frequencies (Hz) the chosen FIR turns on: band edges, cutoff or notch (none for the gate)."""
        return {"band": (self.low, self.high), "low": (self.high,), "high": (self.low,),
                "notch": (self.notch,)}.get(self.method, ())

    @property
    def gate(self) -> sigconv.GateSpec:
        return sigconv.GateSpec(strength=self.strength, noise_from=self.noise_from)


def fit_band(s: Settings, fs: float) -> Settings:
    """The settings for a signal at rate ``fs``: the default band's edges for its kind while the band is the
    default (:func:`sigconv.default_band`), else the user's cutoffs capped below Nyquist (a sensor log at 100 Hz
    cannot take 8000 Hz); the notch likewise."""
    nyq = fs / 2
    if s.default_band:
        low, high = sigconv.default_band(fs)
    else:
        high = min(s.high, 0.9 * nyq)
        low = min(s.low, 0.5 * high)
    notch = s.notch if s.notch < 0.9 * nyq else round(0.25 * nyq, 3)
    return replace(s, low=round(low, 3), high=round(high, 3), notch=notch)


def filter_rule(s: Settings, fs: float) -> str:
    """Which filter the settings apply to a signal at ``fs``, and why (the default's rule, in the engine's words)."""
    if s.method == "band" and s.default_band:
        kind = sigconv.signal_kind(fs)
        lo, hi = sigconv.default_band(fs, kind)
        return f"filter: the default band-pass {lo:g}-{hi:g} Hz {sigconv.default_rule(kind)}"
    what = {"band": f"band-pass {s.low:g}-{s.high:g} Hz", "low": f"low-pass {s.high:g} Hz",
            "high": f"high-pass {s.low:g} Hz", "notch": f"notch {s.notch:g} Hz"}.get(s.method, "spectral gate")
    return f"filter: {what}, as set"


def design(s: Settings, fs: float):
    """(taps, description) exactly as ``sigconv denoise`` designs them (ValueError when they do not fit ``fs``)."""
    return described(s.fir.design(float(fs), sigconv.signal_kind(fs)))


def described(d) -> tuple:
    """(taps, description) of a designed filter (``sigconv.FirDesign``)."""
    return d.taps, f"{d.labelled} ({d.taps.size} taps)"


def block_refusal(s: Settings, block) -> Optional[tuple[str, str]]:
    """(short, full): why ``block`` cannot be chosen with the settings' variant, or None when it can
    (:func:`sigconv.block_refusal`: any block the variant launches, not only the picker's list). The short reason
    fits beside the block in the picker; the full one says which blocks the variant takes."""
    if block is None:
        return None
    b = sigconv.format_block(block)
    if s.variant == "auto":
        return "auto picks", f"block {b}: auto picks the variant and its block; choose a variant to choose a block"
    v = next((v for v in sigconv.variants(s.op) if v["name"] == s.variant and v["backend"] == s.backend), None)
    if v is None:
        return None  # an unknown variant: check_choice names the valid ones
    why = sigconv.block_refusal(s.op, s.backend, s.variant, block)
    if why is None:
        return None
    if not v["blocks"]:
        return "no blocks", f"block {b} is not valid for {v['name']} ({v['backend']}): it takes no block size"
    return f"not for {v['name']}", f"{why}; {v['name']} ({v['backend']}) takes {v['block_rule']}"


def check_choice(s: Settings) -> Optional[str]:
    """Why these variant/block choices cannot run (None when they can); a refused block says which blocks the
    variant takes."""
    why = block_refusal(s, s.block)
    if why:
        return why[1]
    if s.variant != "auto":
        try:
            s.kernel
        except ValueError as exc:
            return str(exc)
        v = next(v for v in sigconv.variants(s.op) if v["name"] == s.variant and v["backend"] == s.backend)
        if not v["available"]:
            return f"variant {v['name']} ({v['backend']}) is not available: {v['reason']}"
    return None


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


#: Decades below Nyquist that the frequency response shows (log-frequency axis).
RESPONSE_DECADES = 4


def freq_response(taps: np.ndarray, fs: float, n: int = 512):
    """(Hz, dB) of the FIR at ``n`` log-spaced frequencies from Nyquist / 10^RESPONSE_DECADES to Nyquist: the
    response of every tap, evaluated at those frequencies (``scipy.signal.freqz``), so a filter of any length
    shows its true passband and stopband."""
    from scipy.signal import freqz  # (here, not at import: the TUI starts without scipy.signal)

    nyq = fs / 2
    f = np.geomspace(nyq * 10.0 ** -RESPONSE_DECADES, nyq, n)
    _, h = freqz(np.asarray(taps, dtype=np.float64), worN=f, fs=fs)
    return f, 20 * np.log10(np.maximum(np.abs(h), 1e-8))


@dataclass
class RunResult:
    """A finished run. FIR and spectral gate: ``after``, the filtered signal (a recording's is the file
    :attr:`output`, written by the engine and read on demand; a log's sits in memory). 2-D smoothing: the
    spectrogram of channel 0 over frames ``span`` before and after."""

    desc: str
    after: Optional[Signal] = None
    output: Optional[Path] = None
    taps: Optional[np.ndarray] = None
    spec_before: Optional[np.ndarray] = None  # (F, T), 2-D smoothing
    spec_after: Optional[np.ndarray] = None
    span: tuple = (0, 0)  # frames smoothed (2-D)
    seconds: float = 0.0
    settings: Optional[Settings] = None


def _check_cancel(cancel: Optional[threading.Event]) -> None:
    if cancel is not None and cancel.is_set():
        raise CancelledError


def run_filter(sig: Signal, s: Settings, *, scratch: Optional[Path] = None, span: Optional[tuple] = None,
               progress: Optional[Callable[[float], None]] = None, cancel: Optional[threading.Event] = None,
               chunk_frames: int = 1 << 16, chunk_delay: float = 0.0) -> RunResult:
    """Filter the loaded signal with the chosen backend/variant/block.

    A recording (FIR or spectral gate): the whole file streams through ``sigconv.prepare_denoise``, the engine of
    ``sigconv denoise``, into a file in the folder ``scratch`` (progress and cancel per block; ``chunk_delay``
    seconds of pause after each, for tests), which the views then read. A sensor log: in memory, 1-D FIR through
    ``sigconv.FIRStream`` chunk by chunk (``chunk_frames``), centred to zero phase as ``sigconv denoise`` does;
    the gate through ``sigconv.spectral_denoise`` per channel. 2-D: the spectrogram of channel 0 over the frames
    ``span`` (a, b) smoothed by a k x k Gaussian with ``sigconv.correlate2d``.
    """
    progress = progress or (lambda f: None)
    why = check_choice(s)
    if why:
        raise ValueError(why)
    t0 = time.perf_counter()
    k = s.kernel
    if s.dimension == "2d" and s.method != "spectral":
        a, b = span if span is not None else (0, sig.frames)
        S = spectrogram(sig.read(a, b)[0])
        progress(0.3)
        _check_cancel(cancel)
        Y = np.asarray(sigconv.correlate2d(S, gauss_kernel(s.smooth), "same", backend=k.backend,
                                           variant=k.variant, block=k.block))
        progress(1.0)
        return RunResult(f"spectrogram smoothing, {s.smooth}x{s.smooth} Gaussian", spec_before=S, spec_after=Y,
                         span=(a, b), seconds=time.perf_counter() - t0, settings=s)
    if sig.values is None:
        return _run_file(sig, s, scratch, progress, cancel, chunk_delay, t0)
    if s.method == "spectral":
        g = s.gate
        out = []
        a, b = (int(round(t * sig.fs)) for t in g.noise_from) if g.noise_from else (0, 0)
        for c in range(sig.channels):
            _check_cancel(cancel)
            y = sigconv.spectral_denoise(sig.values[c], sig.fs, noise=sig.values[c, a:b] if b > a else None,
                                         prop_decrease=g.strength, backend=k.backend, variant=k.variant,
                                         block=k.block)
            out.append(np.asarray(y, dtype=np.float32))
            progress((c + 1) / sig.channels)
        noise = f", noise from {g.noise_from[0]:g}-{g.noise_from[1]:g} s" if g.noise_from else ""
        return RunResult(f"spectral gate, strength {g.strength:g}{noise}", after=array_signal(sig, np.stack(out)),
                         seconds=time.perf_counter() - t0, settings=s)
    taps, desc = design(s, sig.fs)
    if taps.size > sig.frames:
        raise ValueError(f"the filter ({taps.size} taps) is longer than the signal ({sig.frames} frames); "
                         "widen the band or load a longer file")
    st = sigconv.FIRStream(taps.astype(np.float32), sig.channels, sig.fs, backend=k.backend, variant=k.variant,
                           block=k.block)
    delay = (taps.size - 1) // 2  # zero phase: drop the first (K-1)/2 causal outputs
    parts = []
    L = sig.frames
    for a in range(0, L, chunk_frames):
        _check_cancel(cancel)
        parts.append(np.asarray(st.process(sig.values[:, a:a + chunk_frames])))
        progress(min(1.0, (a + chunk_frames) / L))
        if chunk_delay:
            time.sleep(chunk_delay)
    parts.append(np.asarray(st.flush()).reshape(sig.channels, -1))
    y = np.concatenate(parts, axis=1)[:, delay:delay + L]
    return RunResult(desc, after=array_signal(sig, y), taps=taps, seconds=time.perf_counter() - t0, settings=s)


#: Share of a recording's run's progress bar for the filtering (the rest: the output's overview).
FILTER_SHARE = 0.9


def scratch_output(sig: Signal, scratch: Path) -> Path:
    """Where a run of the recording ``sig`` writes its filtered file in the folder ``scratch``."""
    return Path(scratch) / f"{sig.path.stem}.filtered{sig.path.suffix}"


def _run_file(sig, s, scratch, progress, cancel, chunk_delay, t0) -> RunResult:
    if scratch is None:
        raise ValueError("a recording is filtered into a file: give a scratch folder")
    out = scratch_output(sig, scratch)
    job = sigconv.prepare_denoise(sig.path, out, method="spectral" if s.method == "spectral" else "fir",
                                  fir=s.fir, gate=s.gate, kernel=s.kernel, overwrite=True, hints=TUI_HINTS)
    frames = max(1, job.info.frames)

    def done(n):
        progress(FILTER_SHARE * n / frames)
        if chunk_delay:
            time.sleep(chunk_delay)

    try:
        job.run(progress=done, cancel=cancel)
    except KeyboardInterrupt:
        raise CancelledError from None
    taps, desc = described(job.fir_design) if s.method != "spectral" else (None, job.description)
    info = sigconv.probe(out)
    try:
        ov = _overview.compute(info, progress=lambda f: progress(FILTER_SHARE + (1 - FILTER_SHARE) * f),
                               cancel=cancel)
    except _overview.Cancelled:
        raise CancelledError from None
    return RunResult(desc, after=audio_signal(info, ov), output=out, taps=taps,
                     seconds=time.perf_counter() - t0, settings=s)


# ---------------------------------------------------------------------------------- saving


def default_output(sig: Signal, s: Settings) -> Path:
    if s.dimension == "2d" and s.method != "spectral":
        return sig.path.with_name(f"{sig.path.stem}.smoothed-spectrogram.npy")
    return sig.path.with_name(f"{sig.path.stem}.denoised{sig.path.suffix}")


def check_output(sig: Signal, out: Path, *, overwrite: bool = True) -> None:
    """``sigconv.check_output_path`` with the TUI's hint: ValueError or ``sigconv.OutputError``, one line."""
    sigconv.check_output_path(sig.path, out, overwrite=overwrite, hints=TUI_HINTS)


def save_output(sig: Signal, s: Settings, out, *, overwrite: bool = False, result: Optional[RunResult] = None,
                span: Optional[tuple] = None, progress: Optional[Callable[[float], None]] = None,
                cancel: Optional[threading.Event] = None) -> str:
    """Write the filtered output; returns a one-line summary. Everything goes through ``sigconv.atomic_output``:
    a cancel or an error leaves no output.

    A recording: the run's file when ``result`` is a finished run of these settings (copied, block by block),
    else ``sigconv.prepare_denoise`` (the whole file, streamed). A sensor log: the in-memory result with the
    timestamp column. 2-D smoothing: the smoothed spectrogram of the frames ``span`` (the result's) as .npy.
    """
    out = Path(out)
    fresh = result is not None and result.settings == s
    if s.dimension == "2d" and s.method != "spectral":
        check_output(sig, out, overwrite=overwrite)
        if not fresh or result.spec_after is None or (span is not None and tuple(span) != result.span):
            result = run_filter(sig, s, span=span, cancel=cancel)
        a, b = result.span
        with sigconv.atomic_output(out) as tmp, open(tmp, "wb") as f:
            np.save(f, result.spec_after)
        return (f"wrote {out} (smoothed spectrogram {result.spec_after.shape[0]}x{result.spec_after.shape[1]}, "
                f"frames {a}-{b})")
    if sig.kind == "csv":
        check_output(sig, out, overwrite=overwrite)
        if not fresh or result.after is None:
            result = run_filter(sig, s, cancel=cancel, progress=progress)
        y = result.after.read()
        with sigconv.atomic_output(out) as tmp, open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow([sig.time_name, *sig.names])
            for i in range(sig.frames):
                w.writerow([repr(float(sig.timestamps[i])), *(f"{v:.9g}" for v in y[:, i])])
        return f"wrote {out} ({sig.frames} rows, {sig.channels} channels; {result.desc})"
    if fresh and result.output is not None and result.output.is_file():
        check_output(sig, out, overwrite=overwrite)
        _copy(result.output, out, progress, cancel)
        return (f"wrote {out}: {sig.duration:.2f} s, {result.desc}; backend {s.backend} "
                f"(the run's output, {result.seconds:.2f} s)")
    job = sigconv.prepare_denoise(sig.path, out, method="spectral" if s.method == "spectral" else "fir",
                                  fir=s.fir, gate=s.gate, kernel=s.kernel, overwrite=overwrite,
                                  hints=TUI_HINTS)
    info = job.info
    cb = (lambda done: progress(done / info.frames)) if progress else None
    try:
        res = job.run(progress=cb, cancel=cancel)
    except KeyboardInterrupt:
        raise CancelledError from None
    return (f"wrote {out}: {info.duration:.2f} s, {job.description}; backend {job.kernel.backend} "
            f"(variant {res.variant}); {res.clipped} samples clipped")


#: Bytes per step of a copy (progress and cancel between steps).
COPY_STEP = 8 << 20


def _copy(src: Path, out: Path, progress, cancel) -> None:
    """``src`` to ``out`` through ``sigconv.atomic_output`` (synced before the rename); CancelledError leaves
    nothing."""
    total = max(1, src.stat().st_size)
    with sigconv.atomic_output(out) as tmp, open(src, "rb") as fi, open(tmp, "wb") as fo:
        done = 0
        while True:
            _check_cancel(cancel)
            chunk = fi.read(COPY_STEP)
            if not chunk:
                break
            try:
                fo.write(chunk)
            except OSError as exc:
                raise sigconv.OutputError(f"{out}: write failed ({exc.strerror})") from None
            done += len(chunk)
            if progress is not None:
                progress(done / total)
        fo.flush()
        os.fsync(fo.fileno())
