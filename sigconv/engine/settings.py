"""Typed settings that cross the layers: which kernel runs (:class:`KernelChoice`), which FIR filter
(:class:`FirSpec`) and which spectral gate (:class:`GateSpec`).

Each is a frozen dataclass validated once, where it is made (``ValueError`` with one line naming the
field); below that, code trusts the values. The command line, the batch runner and the terminal UI build
them; nothing under them sees argparse, argv strings or namespaces.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import Optional

import numpy as np

from sigconv._core import devices
from sigconv._core.checks import DefaultValue
from sigconv._core.errors import InputError
from sigconv._core.blocks import check_block_for
from sigconv.registry import auto as _auto
from sigconv.registry import table

__all__ = ["BACKENDS", "PHASES", "SIGNAL_KINDS", "KernelChoice", "FirSpec", "FirDesign", "GateSpec",
           "signal_kind", "default_band", "default_rule", "phase_delay", "check_filter_fits", "RECORDING_BAND",
           "AUDIO_MIN_RATE"]

#: What ``backend=`` accepts; "auto" is the GPU when one is usable, else the CPU.
BACKENDS = ("auto", "cpu", "cuda")
#: FIR phase: "zero" is centred and delay-free (convolve "same"), "linear" is causal (lfilter).
PHASES = ("zero", "linear")
#: What a signal is, for the default filter: a recording (audio) or a sensor log.
SIGNAL_KINDS = ("recording", "log")
#: The default band for noisy recordings (speech band), capped at 90% of Nyquist.
RECORDING_BAND = (80.0, 8000.0)
#: Sample rates at or above this are recordings; below, sensor logs.
AUDIO_MIN_RATE = 8000.0
#: The sensor-log default: high-pass edge, low-pass edge and transition as fractions of fs.
LOG_HIGHPASS, LOG_LOWPASS, LOG_TRANSITION = 1 / 200, 0.4, 1 / 200


def phase_delay(ntaps: int, phase: str) -> int:
    """Outputs a FIR of ``ntaps`` taps lags its input by, and so drops, for ``phase``: "zero" centres it
    ((K-1)/2, SciPy's "same"), "linear" keeps the causal output (0)."""
    return (int(ntaps) - 1) // 2 if phase == "zero" else 0


def signal_kind(fs: float) -> str:
    """"recording" at audio rates (>= :data:`AUDIO_MIN_RATE`), else "log"."""
    return "recording" if fs >= AUDIO_MIN_RATE else "log"


def default_rule(kind: str) -> str:
    """The default filter of a kind of signal (:func:`signal_kind`), in words ("for sensor logs (rates below
    8000 Hz): band-pass fs/200 to 0.4 fs, ..."): what every front end (the CLI's denoise and batch, the TUI) says
    when it applies it."""
    if kind == "log":
        return (f"for sensor logs (rates below {AUDIO_MIN_RATE:g} Hz): band-pass fs/{1 / LOG_HIGHPASS:g} "
                f"to {LOG_LOWPASS:g} fs, which removes drift and the band near Nyquist")
    if kind == "recording":
        return (f"for recordings (rates of {AUDIO_MIN_RATE:g} Hz and up): band-pass "
                f"{RECORDING_BAND[0]:g}-{RECORDING_BAND[1]:g} Hz, capped at 90% of Nyquist")
    raise ValueError(f"signal must be one of {', '.join(SIGNAL_KINDS)}, got {kind!r}")


def default_band(fs: float, kind: Optional[str] = None) -> tuple:
    """(low, high) Hz of the default band-pass for rate ``fs`` and ``kind`` (default: :func:`signal_kind` of
    ``fs``); :func:`default_rule` says it in words. ``ValueError`` when a recording's band does not fit ``fs``."""
    kind = signal_kind(fs) if kind is None else kind
    if kind == "log":
        return LOG_HIGHPASS * fs, LOG_LOWPASS * fs
    default_rule(kind)  # (an unknown kind is refused)
    lo, hi = RECORDING_BAND[0], min(RECORDING_BAND[1], 0.9 * fs / 2)
    if lo >= hi:
        raise ValueError(f"the default band ({RECORDING_BAND[0]:g}-{RECORDING_BAND[1]:g} Hz) does not fit a "
                         f"{fs:g} Hz file; choose --lowpass, --highpass or --band")
    return lo, hi


def _positive(value, name: str, unit: str = "Hz") -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a positive {'frequency in Hz' if unit == 'Hz' else unit}, got {value!r}")
    return float(value)


@dataclass(frozen=True)
class KernelChoice:
    """Where and how a convolution runs.

    Parameters
    ----------
    op : {"conv1d", "conv2d"}
        The operation (FIR filters are conv1d; the spectral gate's mask smoothing is conv2d).
    backend : {"auto", "cpu", "cuda"}
    variant : str
        A registered variant of ``op`` (``sigconv variants``), or "auto".
    block : int or (int, int) or None
        Launch block (threads for conv1d, (bx, by) for conv2d); None for the variant's default.
    """

    op: str = "conv1d"
    backend: str = "auto"
    variant: str = "auto"
    block: object = None

    def __post_init__(self):
        if self.op not in table.OPS:
            raise ValueError(f"op must be one of {', '.join(table.OPS)}, got {self.op!r}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(BACKENDS)}, got {self.backend!r}")
        object.__setattr__(self, "block", check_block_for(self.op, self.block))
        if self.variant != "auto":
            backends = (self.backend,) if self.backend != "auto" else ("cuda", "cpu")
            for i, be in enumerate(backends):
                try:
                    table.get(self.op, be, self.variant)
                    break
                except ValueError:
                    if i == len(backends) - 1:
                        raise

    def resolve(self, samples: Optional[int] = None) -> "KernelChoice":
        """This choice on the backend that runs here: "auto" becomes "cuda" or "cpu", and the variant is
        checked against that backend. ``samples``: the whole job's samples (a file's frames x channels), when
        it is one run in a process of its own; "auto" then takes the cpu for a job too short to repay the GPU's
        start-up (:func:`sigconv.registry.auto.prefer_cpu`), unless a cuda-only variant or a block was asked
        for. ``RuntimeError`` (one line) when "cuda" is asked for and cannot run; ``ValueError`` listing the
        valid names when the variant does not exist there."""
        if self.backend == "auto" and self.block is None and _auto.prefer_cpu(self.op, samples):
            if self.variant == "auto" or any(v.name == self.variant for v in table.entries(self.op, "cpu")):
                return replace(self, backend="cpu")
        be = devices.resolve_backend(self.backend)
        if self.variant != "auto":
            table.get(self.op, be, self.variant)
        return self if be == self.backend else replace(self, backend=be)


@dataclass(frozen=True)
class FirDesign:
    """A designed FIR: ``taps`` (float64), a ``description`` ("band-pass 80-8000 Hz + notch 50 Hz (width 5 Hz)"),
    and, when no filter option was given, ``default``: the kind of signal whose default it is."""

    taps: np.ndarray = field(repr=False)
    description: str
    default: Optional[str] = None

    @property
    def note(self) -> Optional[str]:
        """What to tell the user when the default was chosen for them: the filter and the rule that chose it."""
        if self.default:
            return f"no filter option given: using the default {self.description} {default_rule(self.default)}"
        return None

    @property
    def labelled(self) -> str:
        """The description with the default named: "band-pass 80-8000 Hz [default for recordings]"."""
        if self.default == "recording":
            return f"{self.description} [default for recordings]"
        if self.default == "log":
            return f"{self.description} [default for sensor logs: removes drift and the band near Nyquist]"
        return self.description


def _describe(kind: str, edges) -> str:
    if kind == "bandpass":
        return f"band-pass {edges[0]:g}-{edges[1]:g} Hz"
    if kind == "lowpass":
        return f"low-pass {edges:g} Hz"
    return f"high-pass {edges:g} Hz"


@dataclass(frozen=True)
class FirSpec:
    """A FIR filter, independent of the sample rate: :meth:`design` makes the taps for a rate.

    ``band`` (lo, hi), ``lowpass``/``highpass`` (both together make a band) and ``notch`` frequencies combine
    by cascading. With none of them, :meth:`design` gives the default for the kind of signal. ``taps`` fixes
    the length, else it follows from ``transition`` (default: 25% of the lowest edge). ``notch_width`` is each
    notch's width in Hz.
    """

    band: Optional[tuple] = None
    lowpass: Optional[float] = None
    highpass: Optional[float] = None
    notch: tuple = ()
    notch_width: float = 5.0
    taps: Optional[int] = None
    transition: Optional[float] = None
    phase: str = "zero"

    def __post_init__(self):
        if self.band is not None:
            try:
                lo, hi = self.band
            except (TypeError, ValueError):
                raise ValueError(f"band must be a pair (low, high) in Hz, got {self.band!r}") from None
            object.__setattr__(self, "band", (_positive(lo, "band"), _positive(hi, "band")))
        for name in ("lowpass", "highpass", "transition"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, _positive(getattr(self, name), name))
        notch = (self.notch,) if isinstance(self.notch, numbers.Real) else tuple(self.notch or ())
        object.__setattr__(self, "notch", tuple(_positive(f, "notch") for f in notch))
        object.__setattr__(self, "notch_width", _positive(self.notch_width, "notch_width"))
        if self.taps is not None and (isinstance(self.taps, bool) or not isinstance(self.taps, numbers.Integral)
                                      or self.taps < 1):
            raise ValueError(f"taps must be a positive integer, got {self.taps!r}")
        if self.phase not in PHASES:
            raise ValueError(f"phase must be one of {', '.join(PHASES)}, got {self.phase!r}")

    @property
    def is_default(self) -> bool:
        """True when no filter option was given (the default for the signal's kind applies)."""
        return self.band is None and self.lowpass is None and self.highpass is None and not self.notch

    def length(self, fs: float, signal: str = "recording") -> int:
        """How many taps :meth:`design` gives for rate ``fs``, found (and the options checked against the rate,
        with the same ``ValueError``) without designing anything: cheap for any length."""
        return self._plan(float(fs), signal)[0]

    def design(self, fs: float, signal: str = "recording", frames: Optional[int] = None,
               source: object = None) -> FirDesign:
        """The taps for sample rate ``fs``. ``signal`` ("recording" or "log", see :func:`signal_kind`) picks the
        default when no filter option was given: recordings a band-pass 80-8000 Hz capped at 90% of Nyquist
        (the usual clean-up for noisy speech); sensor logs a band-pass fs/200 .. 0.4 fs with a transition of
        fs/200 (removes drift and offsets, and the band near Nyquist where a mains line aliases).
        ``ValueError`` (one line) when the options do not fit this rate, give zero phase an even length, or need
        more memory to design than is free. With ``frames`` (the length of the signal to filter, ``source`` its
        name for the message), :func:`check_filter_fits` refuses a filter longer than that; every check runs on
        the tap count, before any tap is designed."""
        n, steps, descs, default, origin = self._plan(float(fs), signal)
        if frames is not None:
            check_filter_fits(n, frames, fs, source, origin=origin)
        from sigconv.engine.design import check_design_memory

        check_design_memory(n)  # the size first: what a too-long filter hears, whatever its parity
        if self.phase == "zero" and n % 2 == 0 and default != "log":
            raise ValueError(f"--phase zero needs an odd number of taps, got {n}; use an odd --taps")
        parts = [make() for make in steps]
        taps = parts[0]
        for p in parts[1:]:
            taps = _cascade(taps, p)
        return FirDesign(taps, " + ".join(descs), default)

    def _plan(self, fs: float, signal: str):
        """(tap count, the designs to make, their descriptions, the default's kind, the option that set the
        count): every check of :meth:`design` that needs no taps."""
        from functools import partial

        from sigconv.engine.design import check_fs, design_fir, design_notch, fir_length, notch_length

        fs = check_fs(fs)  # a rate whose derived sizes are absurd is named before anything is sized by it
        if signal not in SIGNAL_KINDS:
            raise ValueError(f"signal must be one of {', '.join(SIGNAL_KINDS)}, got {signal!r}")
        if self.is_default and signal == "log":
            lo, hi = default_band(fs, "log")
            args = ("bandpass", (lo, hi), fs, self.taps, None if self.taps else LOG_TRANSITION * fs)
            n = fir_length(*args)
            origin = "--taps" if self.taps else f"the sensor-log default transition ({LOG_TRANSITION * fs:g} Hz)"
            return n, [partial(design_fir, *args)], [_describe("bandpass", (lo, hi))], "log", origin
        main = None
        if self.band is not None:
            main = ("bandpass", self.band)
        elif self.lowpass is not None and self.highpass is not None:
            main = ("bandpass", (self.highpass, self.lowpass))
        elif self.lowpass is not None:
            main = ("lowpass", self.lowpass)
        elif self.highpass is not None:
            main = ("highpass", self.highpass)
        elif not self.notch:
            main = ("bandpass", default_band(fs, "recording"))
        lengths, steps, descs, origins = [], [], [], []
        if main is not None:
            kind, edges = main
            args = (kind, edges, fs, self.taps, self.transition)
            lengths.append(fir_length(*args))
            steps.append(partial(design_fir, *args))
            descs.append(_describe(kind, edges))
            origins.append("--taps" if self.taps else f"--transition {self.transition:g} Hz" if self.transition
                           else "the default transition of the band's edges")
        if self.notch:
            origins.append(f"--notch-width {self.notch_width:g} Hz")
            lengths.append(notch_length(list(self.notch), fs, width=self.notch_width))
            steps.append(partial(design_notch, list(self.notch), fs, width=self.notch_width))
            descs.append("notch " + ", ".join(f"{f:g}" for f in self.notch) + f" Hz (width {self.notch_width:g} Hz)")
        n = sum(lengths) - (len(lengths) - 1)  # a cascade of filters is as long as their full convolution
        origin = origins[max(range(len(lengths)), key=lengths.__getitem__)]
        return n, steps, descs, "recording" if self.is_default else None, origin


def _cascade(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The full convolution of two filters; through FFTs when the direct sum would take long (same values to
    rounding; the short filters of everyday use keep np.convolve's exact bits)."""
    if a.size * b.size <= 1 << 30:  # about a second of direct summation
        return np.convolve(a, b)
    n = a.size + b.size - 1
    m = 1 << (n - 1).bit_length()
    return np.fft.irfft(np.fft.rfft(a, m) * np.fft.rfft(b, m), m)[:n]


def check_filter_fits(taps: int, frames: int, fs: float, source: object = None, unit: str = "frames",
                      origin: Optional[str] = None) -> None:
    """``InputError`` (one line naming ``source``, and ``origin``, the option that set the length, when given) when a
    filter of ``taps`` taps is longer than the ``frames`` it is to filter: the one home of that rule and its
    message, for denoise and batch. Checked on the count alone, before anything is designed."""
    if taps > frames:
        from sigconv.engine.design import count_text

        name = f"{source}: " if source is not None else ""
        seconds = float(taps) / fs if taps < 10**300 else math.inf
        by = f", from {origin}" if origin else ""
        raise InputError(f"{name}the filter ({count_text(taps)} taps, {seconds:.3g} s{by}) is longer than the file "
                         f"({frames} {unit}, {frames / fs:.3g} s); use fewer --taps or a wider --transition")


@dataclass(frozen=True)
class GateSpec:
    """The spectral gate's options (see :func:`sigconv.spectral_denoise` for their meaning).

    ``noise_clip`` (a file of the noise alone) and ``noise_from`` ((start, end) seconds of the input holding
    only noise) set the noise floor; with neither it is estimated from the input. Both apply to the stationary
    gate only.
    """

    noise_clip: Optional[str] = None
    noise_from: Optional[tuple] = None
    strength: float = 1.0
    stationary: bool = True
    n_std: float = 1.5
    freq_smooth_hz: float = 500.0
    time_smooth_ms: float = DefaultValue(50.0)  # not given: shortened where the rate allows no 50 ms
    n_fft: int = 2048
    hop: Optional[int] = None
    share_mask: bool = False

    def __post_init__(self):
        if self.noise_clip is not None and self.noise_from is not None:
            raise ValueError("give noise_clip or noise_from, not both")
        if self.noise_from is not None:
            try:
                start, end = (float(v) for v in self.noise_from)
            except (TypeError, ValueError):
                raise ValueError(f"noise_from must be (start, end) in seconds, got {self.noise_from!r}") from None
            if not (math.isfinite(start) and math.isfinite(end)) or start < 0 or end < 0:
                raise ValueError(f"noise_from takes non-negative times in seconds, got {self.noise_from!r}")
            object.__setattr__(self, "noise_from", (start, end))
        if not self.stationary and (self.noise_clip or self.noise_from):
            raise ValueError(f"{'--noise-clip' if self.noise_clip else '--noise-from'} applies to --stationary only "
                             "(--non-stationary follows a moving noise floor)")
        if isinstance(self.strength, bool) or not isinstance(self.strength, numbers.Real) \
                or not 0 <= self.strength <= 1:
            raise ValueError(f"strength must be between 0 and 1, got {self.strength!r}")
