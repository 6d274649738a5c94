"""The command-line options shared by `denoise`, `batch` and `tune`, and the typed settings they become.

argparse lives here and in the command modules only: :func:`fir_spec_from_args`, :func:`gate_spec_from_args` and
:func:`kernel_from_args` turn parsed options into the engine's frozen settings. The filter options default to None
(not given): the defaults live in :class:`sigconv.FirSpec` and :class:`sigconv.GateSpec` alone, and
:func:`check_method_options` can refuse an option of the other method (it would have no effect).
"""

from __future__ import annotations

import argparse
import math
import re

from sigconv import FirSpec, GateSpec, KernelChoice, parse_block
from sigconv.cli.errors import UsageError

__all__ = ["positive_float", "positive_int", "add_filter_arguments", "add_spectral_arguments",
           "add_backend_arguments", "fir_spec_from_args", "gate_spec_from_args", "kernel_from_args",
           "check_method_options"]

#: Options of the FIR method and of the spectral gate: argparse dest -> the flag as typed.
FIR_OPTIONS = {"lowpass": "--lowpass", "highpass": "--highpass", "band": "--band", "notch": "--notch",
               "notch_width": "--notch-width", "taps": "--taps", "transition": "--transition", "phase": "--phase"}
SPECTRAL_OPTIONS = {"noise_clip": "--noise-clip", "noise_from": "--noise-from", "strength": "--strength",
                    "stationary": "--stationary/--non-stationary", "n_std": "--n-std", "freq_smooth": "--freq-smooth",
                    "time_smooth": "--time-smooth", "n_fft": "--n-fft", "hop": "--hop", "share_mask": "--share-mask"}


def _number(name: str, cast, ok, not_a_number: str, out_of_range: str, show=None):
    """An argparse type: ``cast`` the text, then ``ok(value)``; the messages name the option and the text as
    given (or ``show(value)``)."""
    def conv(s):
        try:
            v = cast(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} {not_a_number}, got {s!r}") from None
        if not ok(v):
            raise argparse.ArgumentTypeError(f"{name} {out_of_range}, got {s if show is None else show(v)}")
        return v

    return conv


def positive_float(name):
    return _number(name, float, lambda v: math.isfinite(v) and v > 0, "must be a number in Hz",
                   "must be a positive frequency in Hz")


def positive_int(name):
    return _number(name, int, lambda v: v >= 1, "must be a positive integer", "must be a positive integer",
                   show=lambda v: v)


def _block(s):
    try:
        return parse_block(s)  # checked against the variant's rules where the KernelChoice is made
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_filter_arguments(p) -> None:
    """The FIR filter options shared by `denoise` and `batch`."""
    g = p.add_argument_group("FIR filter (method fir)")
    g.add_argument("--lowpass", type=positive_float("--lowpass"), metavar="HZ", help="low-pass cutoff")
    g.add_argument("--highpass", type=positive_float("--highpass"), metavar="HZ", help="high-pass cutoff")
    g.add_argument("--band", type=positive_float("--band"), nargs=2, metavar=("LO", "HI"), help="band-pass edges")
    g.add_argument("--notch", type=positive_float("--notch"), nargs="+", metavar="HZ",
                   help="remove these frequencies (e.g. 50 100 150)")
    g.add_argument("--notch-width", type=positive_float("--notch-width"), metavar="HZ",
                   help=f"width of each notch (default {FirSpec.notch_width:g} Hz)")
    g.add_argument("--taps", type=positive_int("--taps"), metavar="N",
                   help="filter length (default: from the transition width)")
    g.add_argument("--transition", type=positive_float("--transition"), metavar="HZ",
                   help="transition width (default: 25%% of the lowest edge)")
    g.add_argument("--phase", choices=("zero", "linear"),
                   help=f"zero: centred, no delay; linear: causal, delayed by (taps-1)/2 (default {FirSpec.phase})")


def _fraction(name):
    return _number(name, float, lambda v: 0 <= v <= 1, "must be a number between 0 and 1",
                   "must be between 0 and 1", show=lambda v: f"{v:g}")


def _seconds(name):
    return _number(name, float, lambda v: math.isfinite(v) and v >= 0, "takes times in seconds",
                   "takes non-negative times in seconds")


def add_spectral_arguments(p) -> None:
    """The spectral-gate options shared by `denoise` and `batch` (method spectral)."""
    g = p.add_argument_group("spectral gate (method spectral)")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--noise-clip", metavar="FILE", help="a recording of the noise alone (same rate and channels)")
    src.add_argument("--noise-from", type=_seconds("--noise-from"), nargs=2, metavar=("START", "END"),
                     help="a time range of the input (seconds) that holds only noise")
    g.add_argument("--strength", type=_fraction("--strength"), metavar="0..1",
                   help=f"how much of the gated energy is removed (prop_decrease; default {GateSpec.strength:g})")
    g.add_argument("--stationary", dest="stationary", action="store_const", const=True,
                   help="one noise floor per frequency (default)")
    g.add_argument("--non-stationary", dest="stationary", action="store_const", const=False,
                   help="follow a slowly varying noise floor")
    g.add_argument("--n-std", type=positive_float("--n-std"), metavar="X",
                   help=f"gate threshold in standard deviations above the noise mean (default {GateSpec.n_std:g})")
    g.add_argument("--freq-smooth", type=positive_float("--freq-smooth"), metavar="HZ",
                   help=f"mask smoothing across frequency (default {GateSpec.freq_smooth_hz:g} Hz)")
    g.add_argument("--time-smooth", type=positive_float("--time-smooth"), metavar="MS",
                   help=f"mask smoothing across time (default {GateSpec.time_smooth_ms:g} ms)")
    g.add_argument("--n-fft", type=positive_int("--n-fft"), metavar="N", help=f"STFT size (default {GateSpec.n_fft})")
    g.add_argument("--hop", type=positive_int("--hop"), metavar="N", help="STFT hop (default n_fft/4)")
    g.add_argument("--share-mask", action="store_const", const=True,
                   help="one mask for all channels (keeps the stereo image)")


def add_backend_arguments(p) -> None:
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto",
                   help="where the filter runs (default auto: the GPU when one is usable; for sigconv denoise, the "
                        "CPU for a recording too short to repay the GPU's start-up)")
    p.add_argument("--variant", default="auto", help="kernel variant (see 'sigconv variants')")
    p.add_argument("--block", type=_block, metavar="N", help="CUDA threads per block (multiple of 32, <= 1024)")


def _given(args, names: dict) -> dict:
    """``{field: value}`` of the options given on the command line (not None), ``names`` mapping dest -> field."""
    return {field: getattr(args, dest) for dest, field in names.items() if getattr(args, dest, None) is not None}


def check_method_options(args) -> None:
    """Refuse an option of the method not chosen (it would be silently ignored): UsageError, exit 2."""
    other, theirs = ("spectral", SPECTRAL_OPTIONS) if args.method == "fir" else ("fir", FIR_OPTIONS)
    given = [flag for dest, flag in theirs.items() if getattr(args, dest, None) is not None]
    if given:
        which = " and ".join(given) if len(given) <= 2 else f"{', '.join(given[:-1])} and {given[-1]}"
        raise UsageError(f"{which} {'is an option' if len(given) == 1 else 'are options'} of --method {other} and "
                         f"would have no effect with --method {args.method}; drop "
                         f"{'it' if len(given) == 1 else 'them'} or pass --method {other}")


def fir_spec_from_args(args) -> FirSpec:
    """The FIR options as a FirSpec (a value that cannot fit: UsageError, exit 2)."""
    kw = _given(args, {d: d for d in FIR_OPTIONS})
    for name in ("band", "notch"):
        if name in kw:
            kw[name] = tuple(kw[name])
    try:
        return FirSpec(**kw)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def gate_spec_from_args(args) -> GateSpec:
    """The spectral-gate options as a GateSpec (ValueError, exit 2, on options that do not combine)."""
    kw = _given(args, {**{d: d for d in SPECTRAL_OPTIONS}, "freq_smooth": "freq_smooth_hz",
                       "time_smooth": "time_smooth_ms"})
    if "noise_from" in kw:
        kw["noise_from"] = tuple(kw["noise_from"])
    return GateSpec(**kw)


def kernel_from_args(args, op: str = "conv1d") -> KernelChoice:
    """--backend, --variant and --block as a KernelChoice for ``op``; a value it refuses is a UsageError (exit 2)
    naming the option (``--variant must be one of ...``)."""
    try:
        return KernelChoice(op=op, backend=args.backend, variant=args.variant, block=args.block)
    except ValueError as exc:
        raise UsageError(re.sub(r"^(backend|variant|block)\b", r"--\1", str(exc))
                         + f" (see 'sigconv {args.command} --help')") from None
