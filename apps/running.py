"""Filter the loaded signal as the control panel says, in memory for the views, and save the result.

The panel's :class:`Settings` turn into sigconv's typed settings (``KernelChoice``, ``FirSpec``, ``GateSpec``),
so the TUI designs and runs exactly what ``sigconv denoise`` does; audio is saved by ``sigconv.prepare_denoise``
(the pipeline behind that command). No Textual import here: the screens call these functions from worker
threads.
"""

from __future__ import annotations

import csv
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Callable, Optional

import numpy as np

import sigconv

from .loading import Signal

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
        return sigconv.GateSpec(strength=self.strength)


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
    d = s.fir.design(float(fs), sigconv.signal_kind(fs))
    return d.taps, f"{d.labelled} ({d.taps.size} taps)"


def block_refusal(s: Settings, block) -> Optional[tuple[str, str]]:
    """(short, full): why ``block`` cannot be chosen with the settings' variant, or None when it can. The short
    reason fits beside the block in the picker; the full one names the blocks that can be chosen."""
    if block is None:
        return None
    b = sigconv.format_block(block)
    if s.variant == "auto":
        return "auto picks", f"block {b}: auto picks the variant and its block; choose a variant to choose a block"
    v = next((v for v in sigconv.variants(s.op) if v["name"] == s.variant and v["backend"] == s.backend), None)
    if v is None or block in v["blocks"]:
        return None
    if not v["blocks"]:
        return "no blocks", f"block {b} is not valid for {v['name']} ({v['backend']}): it takes no block size"
    ok = ", ".join(sigconv.format_block(x) for x in v["blocks"])
    return f"not for {v['name']}", f"block {b} is not valid for {v['name']} ({v['backend']}); valid: {ok}"


def check_choice(s: Settings) -> Optional[str]:
    """Why these variant/block choices cannot run (None when they can)."""
    if s.variant != "auto":
        try:
            s.kernel
        except ValueError as exc:
            return str(exc)
        v = next(v for v in sigconv.variants(s.op) if v["name"] == s.variant and v["backend"] == s.backend)
        if not v["available"]:
            return f"variant {v['name']} ({v['backend']}) is not available: {v['reason']}"
    why = block_refusal(s, s.block)
    return why[1] if why else None


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
    before: np.ndarray  # (C, L) or (F, T)
    after: np.ndarray
    desc: str
    taps: Optional[np.ndarray] = None
    spec_before: Optional[np.ndarray] = None  # (F, T) of channel 0
    spec_after: Optional[np.ndarray] = None
    seconds: float = 0.0
    settings: Optional[Settings] = None


def _check_cancel(cancel: Optional[threading.Event]) -> None:
    if cancel is not None and cancel.is_set():
        raise CancelledError


def run_filter(sig: Signal, s: Settings, *, progress: Optional[Callable[[float], None]] = None,
               cancel: Optional[threading.Event] = None, chunk_frames: int = 1 << 16,
               chunk_delay: float = 0.0) -> RunResult:
    """Filter the loaded signal in memory with the chosen backend/variant/block.

    1-D FIR: ``sigconv.FIRStream`` chunk by chunk (progress and cancel between chunks), centred to
    zero phase as ``sigconv denoise`` does. 2-D: the spectrogram of channel 0 smoothed by a k x k
    Gaussian with ``sigconv.correlate2d``. Spectral gate: ``sigconv.spectral_denoise`` per channel.
    """
    progress = progress or (lambda f: None)
    why = check_choice(s)
    if why:
        raise ValueError(why)
    t0 = time.perf_counter()
    k = s.kernel
    if s.method == "spectral":
        g = s.gate
        out = []
        for c in range(sig.channels):
            _check_cancel(cancel)
            y = sigconv.spectral_denoise(sig.data[c], sig.fs, prop_decrease=g.strength, backend=k.backend,
                                         variant=k.variant, block=k.block)
            out.append(np.asarray(y, dtype=np.float32))
            progress((c + 1) / sig.channels)
        after = np.stack(out)
        return RunResult(sig.data, after, f"spectral gate, strength {g.strength:g}",
                         spec_before=spectrogram(sig.data[0]), spec_after=spectrogram(after[0]),
                         seconds=time.perf_counter() - t0, settings=s)
    if s.dimension == "2d":
        S = spectrogram(sig.data[0])
        progress(0.3)
        _check_cancel(cancel)
        Y = np.asarray(sigconv.correlate2d(S, gauss_kernel(s.smooth), "same", backend=k.backend,
                                           variant=k.variant, block=k.block))
        progress(1.0)
        return RunResult(S, Y, f"spectrogram smoothing, {s.smooth}x{s.smooth} Gaussian", spec_before=S,
                         spec_after=Y, seconds=time.perf_counter() - t0, settings=s)
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
        parts.append(np.asarray(st.process(sig.data[:, a:a + chunk_frames])))
        progress(min(1.0, (a + chunk_frames) / L))
        if chunk_delay:
            time.sleep(chunk_delay)
    parts.append(np.asarray(st.flush()).reshape(sig.channels, -1))
    y = np.concatenate(parts, axis=1)[:, delay:delay + L]
    return RunResult(sig.data, np.ascontiguousarray(y, dtype=np.float32), desc, taps=taps,
                     spec_before=spectrogram(sig.data[0]), spec_after=spectrogram(y[0]),
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
                progress: Optional[Callable[[float], None]] = None,
                cancel: Optional[threading.Event] = None) -> str:
    """Write the filtered output; returns a one-line summary.

    Audio: ``sigconv.prepare_denoise`` (the whole file, streamed, atomic). CSV logs: the in-memory result
    with the timestamp column. 2-D smoothing: the smoothed spectrogram as .npy. Both through
    ``sigconv.atomic_output``.
    """
    out = Path(out)
    if s.dimension == "2d" and s.method != "spectral":
        check_output(sig, out, overwrite=overwrite)
        if result is None or result.spec_after is None or result.settings != s:
            result = run_filter(sig, s, cancel=cancel)
        with sigconv.atomic_output(out) as tmp, open(tmp, "wb") as f:
            np.save(f, result.after)
        return f"wrote {out} (smoothed spectrogram {result.after.shape[0]}x{result.after.shape[1]})"
    if sig.kind == "csv":
        check_output(sig, out, overwrite=overwrite)
        if result is None or result.settings != s or result.after.shape != sig.data.shape:
            result = run_filter(sig, s, cancel=cancel, progress=progress)
        with sigconv.atomic_output(out) as tmp, open(tmp, "w", newline="") as f:
            w = csv.writer(f)
            w.writerow([sig.time_name, *sig.names])
            for i in range(sig.frames):
                w.writerow([repr(float(sig.timestamps[i])), *(f"{v:.9g}" for v in result.after[:, i])])
        return f"wrote {out} ({sig.frames} rows, {sig.channels} channels; {result.desc})"
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
