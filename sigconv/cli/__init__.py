"""The ``sigconv`` command line.

Exit codes: 0 ok, 1 bad data or I/O error (or the asked-for backend cannot run), 2 usage error,
130 interrupted. Every user error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

from sigconv._version import __version__

EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

#: Default band for noisy recordings (speech band), capped below Nyquist.
DEFAULT_BAND = (80.0, 8000.0)
#: Below this duration no progress bar is drawn.
PROGRESS_MIN_SECONDS = 5.0


class UsageError(Exception):
    """A bad command line (exit 2)."""


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of the usage block."""

    def error(self, message):  # noqa: D401
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _err(msg: str) -> None:
    print(f"sigconv: error: {msg}", file=sys.stderr)


# ------------------------------------------------------------------------------------ filters


def _describe(kind: str, edges) -> str:
    if kind == "bandpass":
        return f"band-pass {edges[0]:g}-{edges[1]:g} Hz"
    if kind == "bandstop":
        return f"band-stop {edges[0]:g}-{edges[1]:g} Hz"
    if kind == "lowpass":
        return f"low-pass {edges:g} Hz"
    return f"high-pass {edges:g} Hz"


def build_taps(args, fs: float):
    """Taps for the FIR options on a file of rate ``fs``; returns (taps, description, note-or-None).

    --band, --lowpass/--highpass (both together make a band) and --notch combine by cascading
    (convolving the taps). With none of them, the default band for noisy recordings.
    """
    import numpy as np

    from sigconv.engine.design import design_fir, design_notch

    nyq = fs / 2
    note = None
    parts, descs = [], []
    main = None
    if args.band is not None:
        main = ("bandpass", tuple(args.band))
    elif args.lowpass is not None and args.highpass is not None:
        main = ("bandpass", (args.highpass, args.lowpass))
    elif args.lowpass is not None:
        main = ("lowpass", args.lowpass)
    elif args.highpass is not None:
        main = ("highpass", args.highpass)
    elif not args.notch:
        lo, hi = DEFAULT_BAND
        hi = min(hi, 0.9 * nyq)
        if lo >= hi:
            raise UsageError(f"the default band ({DEFAULT_BAND[0]:g}-{DEFAULT_BAND[1]:g} Hz) does not fit a "
                             f"{fs:g} Hz file; choose --lowpass, --highpass or --band")
        main = ("bandpass", (lo, hi))
        note = f"no filter option given: using the default {_describe('bandpass', (lo, hi))} for noisy recordings"
    if main is not None:
        kind, edges = main
        try:
            taps = design_fir(kind, edges, fs, numtaps=args.taps, transition=args.transition)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        parts.append(taps)
        descs.append(_describe(kind, edges))
    if args.notch:
        try:
            parts.append(design_notch(args.notch, fs, width=args.notch_width))
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        descs.append("notch " + ", ".join(f"{f:g}" for f in args.notch) + f" Hz (width {args.notch_width:g} Hz)")
    taps = parts[0]
    for p in parts[1:]:
        taps = np.convolve(taps, p)
    return taps, " + ".join(descs), note


# ------------------------------------------------------------------------------------ denoise


def _positive_float(name):
    def conv(s):
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number in Hz, got {s!r}") from None
        if not math.isfinite(v) or v <= 0:
            raise argparse.ArgumentTypeError(f"{name} must be a positive frequency in Hz, got {s}")
        return v

    return conv


def _positive_int(name):
    def conv(s):
        try:
            v = int(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {s!r}") from None
        if v < 1:
            raise argparse.ArgumentTypeError(f"{name} must be a positive integer, got {v}")
        return v

    return conv


def _block(s):
    from sigconv._core.blocks import check_block

    try:
        return check_block(int(s), "--block")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_filter_arguments(p) -> None:
    """The FIR filter options shared by `denoise` and `batch`."""
    g = p.add_argument_group("FIR filter (method fir)")
    g.add_argument("--lowpass", type=_positive_float("--lowpass"), metavar="HZ", help="low-pass cutoff")
    g.add_argument("--highpass", type=_positive_float("--highpass"), metavar="HZ", help="high-pass cutoff")
    g.add_argument("--band", type=_positive_float("--band"), nargs=2, metavar=("LO", "HI"), help="band-pass edges")
    g.add_argument("--notch", type=_positive_float("--notch"), nargs="+", metavar="HZ",
                   help="remove these frequencies (e.g. 50 100 150)")
    g.add_argument("--notch-width", type=_positive_float("--notch-width"), default=5.0, metavar="HZ",
                   help="width of each notch (default 5 Hz)")
    g.add_argument("--taps", type=_positive_int("--taps"), metavar="N",
                   help="filter length (default: from the transition width)")
    g.add_argument("--transition", type=_positive_float("--transition"), metavar="HZ",
                   help="transition width (default: 25%% of the lowest edge)")
    g.add_argument("--phase", choices=("zero", "linear"), default="zero",
                   help="zero: centred, no delay (default); linear: causal, delayed by (taps-1)/2")


def _fraction(name):
    def conv(s):
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} must be a number between 0 and 1, got {s!r}") from None
        if not 0 <= v <= 1:
            raise argparse.ArgumentTypeError(f"{name} must be between 0 and 1, got {v:g}")
        return v

    return conv


def _seconds(name):
    def conv(s):
        try:
            v = float(s)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{name} takes times in seconds, got {s!r}") from None
        if not math.isfinite(v) or v < 0:
            raise argparse.ArgumentTypeError(f"{name} takes non-negative times in seconds, got {s}")
        return v

    return conv


def add_spectral_arguments(p) -> None:
    """The spectral-gate options shared by `denoise` and `batch` (method spectral)."""
    g = p.add_argument_group("spectral gate (method spectral)")
    src = g.add_mutually_exclusive_group()
    src.add_argument("--noise-clip", metavar="FILE", help="a recording of the noise alone (same rate and channels)")
    src.add_argument("--noise-from", type=_seconds("--noise-from"), nargs=2, metavar=("START", "END"),
                     help="a time range of the input (seconds) that holds only noise")
    g.add_argument("--strength", type=_fraction("--strength"), default=1.0, metavar="0..1",
                   help="how much of the gated energy is removed (prop_decrease; default 1)")
    g.add_argument("--stationary", dest="stationary", action="store_true", default=True,
                   help="one noise floor per frequency (default)")
    g.add_argument("--non-stationary", dest="stationary", action="store_false",
                   help="follow a slowly varying noise floor")
    g.add_argument("--n-std", type=_positive_float("--n-std"), default=1.5, metavar="X",
                   help="gate threshold in standard deviations above the noise mean (default 1.5)")
    g.add_argument("--freq-smooth", type=_positive_float("--freq-smooth"), default=500.0, metavar="HZ",
                   help="mask smoothing across frequency (default 500 Hz)")
    g.add_argument("--time-smooth", type=_positive_float("--time-smooth"), default=50.0, metavar="MS",
                   help="mask smoothing across time (default 50 ms)")
    g.add_argument("--n-fft", type=_positive_int("--n-fft"), default=2048, metavar="N", help="STFT size (default 2048)")
    g.add_argument("--hop", type=_positive_int("--hop"), default=None, metavar="N", help="STFT hop (default n_fft/4)")
    g.add_argument("--share-mask", action="store_true", help="one mask for all channels (keeps the stereo image)")


def add_backend_arguments(p) -> None:
    p.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto")
    p.add_argument("--variant", default="auto", help="kernel variant (see 'sigconv variants')")
    p.add_argument("--block", type=_block, metavar="N", help="CUDA threads per block (multiple of 32, <= 1024)")


def _add_denoise(sub):
    p = sub.add_parser("denoise", help="filter a recording (FIR band/low/high/notch, or a spectral gate)",
                       description="Filter a sound file without loading it whole. With no filter option: "
                                   "band-pass 80-8000 Hz (capped below Nyquist).")
    p.add_argument("input", help="sound file (anything libsndfile reads: WAV, FLAC, OGG, AIFF, ...)")
    p.add_argument("-o", "--output", help="output file (default: <stem>.denoised<suffix> beside the input)")
    p.add_argument("--method", choices=("fir", "spectral"), default="fir", help="denoising method (default fir)")
    add_filter_arguments(p)
    add_spectral_arguments(p)
    add_backend_arguments(p)
    p.add_argument("--allow-truncated", action="store_true", help="filter what a truncated file holds")
    p.add_argument("-f", "--force", action="store_true", help="overwrite an existing output")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar and no summary")
    p.set_defaults(func=cmd_denoise)


def _default_output(inp: Path) -> Path:
    return inp.with_name(f"{inp.stem}.denoised{inp.suffix}")


def make_file_filter(backend: str, taps, args):
    """``make(info, spec) -> block filter`` for the FIR ``taps`` on ``backend`` ("cpu" or "cuda"), with
    ``args.phase``, ``args.variant`` and ``args.block``; shared by denoise, batch and the TUI."""
    from sigconv.engine.file import CPUFileFilter

    if backend == "cpu":
        from sigconv.registry.table import get

        if args.variant != "auto":
            get("conv1d", "cpu", args.variant)  # ValueError listing the valid names

        def make(info, spec):
            return CPUFileFilter(taps, info.channels, spec, phase=args.phase, variant=args.variant)

        return make

    from sigconv.backends.cuda1d import FileFilter

    def make(info, spec):
        # raw integer samples travel to the GPU (half the bytes of float32 for PCM_16) and are
        # converted there; 24-bit travels as int32 (libsndfile keeps the top 24 bits on write)
        if spec.out_dtype == "int16":
            read = "int16"
        elif spec.out_dtype == "int32":
            read = "int32"
        else:
            read = "float32"
        out = spec.out_dtype if spec.out_dtype != "float64" else "float32"
        f = FileFilter(taps, info.channels, read_dtype=read, phase=args.phase, out_dtype=out, clip=spec.clip,
                       variant=args.variant, block=args.block)
        f.variant = getattr(f, "variant", None) or ("fft" if taps.size > 1024 else args.variant)
        return f

    return make


def _check_writable(folder: Path) -> None:
    """Fail before any work when the output folder does not take files (os.access is no help for root)."""
    import tempfile

    from sigconv._core.errors import OutputError

    try:
        fd, name = tempfile.mkstemp(prefix=".sigconv-probe-", dir=folder)
    except OSError as exc:
        raise OutputError(f"{folder}: output folder is not writable ({exc.strerror})") from None
    os.close(fd)
    os.unlink(name)


def cmd_denoise(args) -> int:
    from sigconv._core import devices as _devices
    from sigconv._core.errors import InputError, OutputError
    from sigconv.engine.audio import probe
    from sigconv.engine.file import filter_file

    inp = Path(args.input)
    info = probe(inp, allow_truncated=args.allow_truncated)
    out = Path(args.output) if args.output else _default_output(inp)
    if out.exists() and out.resolve() == inp.resolve():
        raise UsageError(f"{out}: output would overwrite the input; choose another -o")
    if out.is_dir():
        raise UsageError(f"{out}: output is a directory; give a file name")
    if out.exists() and not args.force:
        raise OutputError(f"{out}: already exists (pass --force to overwrite)")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise OutputError(f"{folder}: output folder does not exist")
    _check_writable(folder)
    try:
        backend = _devices.resolve_backend(args.backend)
    except RuntimeError as exc:
        raise InputError(str(exc)) from None
    note = None
    if args.method == "spectral":
        from sigconv.engine.spectral import file_filter_factory  # one-line InputError / ValueError on bad options

        make, desc = file_filter_factory(args, info, backend)
    else:
        taps, desc, note = build_taps(args, float(info.samplerate))
        if args.phase == "zero" and taps.size % 2 == 0:
            raise UsageError(f"--phase zero needs an odd number of taps, got {taps.size}; use an odd --taps")
        if taps.size > info.frames:
            raise InputError(f"{inp}: the filter ({taps.size} taps, {taps.size / info.samplerate:.3g} s) is longer "
                             f"than the file ({info.frames} frames, {info.duration:.3g} s); use fewer --taps or a "
                             "wider --transition")
        desc = f"{desc} ({taps.size} taps, {args.phase} phase)"
        make = make_file_filter(backend, taps, args)
    if backend == "cpu" and args.block is not None:
        note = (note + "; " if note else "") + "--block applies to the cuda backend only and is ignored on cpu"
    if note and not args.quiet:
        print(note, file=sys.stderr)

    show = not args.quiet and info.duration >= PROGRESS_MIN_SECONDS and sys.stderr.isatty()
    progress_cb, bar = None, None
    if show:
        from rich.console import Console
        from rich.progress import BarColumn, Progress, TimeRemainingColumn

        bar = Progress("[progress.description]{task.description}", BarColumn(), "{task.percentage:>3.0f}%",
                       TimeRemainingColumn(), console=Console(stderr=True), transient=True)
        task = bar.add_task(f"filtering {inp.name}", total=info.frames)

        def progress_cb(done):
            bar.update(task, completed=done)

    try:
        if bar:
            bar.start()
        res = filter_file(info, out, make, overwrite=args.force, progress=progress_cb)
    finally:
        if bar:
            bar.stop()
    if not args.quiet:
        variant = res.variant or args.variant
        speed = info.duration / res.seconds if res.seconds > 0 else float("inf")
        print(f"{inp.name} -> {out}: {info.duration:.2f} s, {info.channels} ch, {info.samplerate} Hz, "
              f"{info.subtype}; {desc}; backend {backend} "
              f"(variant {variant}); {res.seconds:.2f} s, {speed:.0f}x real time; "
              f"{res.clipped} samples clipped")
    return EXIT_OK


# ------------------------------------------------------------------------------------ others


def _add_variants(sub):
    p = sub.add_parser("variants", help="list the convolution kernel variants and whether they run here")
    p.add_argument("op", nargs="?", choices=("conv1d", "conv2d"), default=None)
    p.set_defaults(func=cmd_variants)


def cmd_variants(args) -> int:
    from sigconv.registry.table import OPS, variants

    for op in [args.op] if args.op else OPS:
        print(f"{op}:")
        for v in variants(op):
            blocks = ",".join("x".join(map(str, b)) if isinstance(b, (tuple, list)) else str(b)
                              for b in v["blocks"]) or "-"
            state = "available" if v["available"] else f"unavailable: {v['reason']}"
            print(f"  {v['backend']:4} {v['name']:10} blocks {blocks:32} {state}\n       {v['description']}")
    return EXIT_OK


def _add_optional(sub, name, module, add_fn, run_fn, help_):
    """Subcommands whose arguments live with their code (bench, tune)."""
    import importlib

    try:
        mod = importlib.import_module(module)
        add, run = getattr(mod, add_fn), getattr(mod, run_fn)
    except (ImportError, AttributeError):
        return
    p = sub.add_parser(name, help=help_)
    add(p)
    p.set_defaults(func=run)


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sigconv", description="Audio and time-series filtering on hand-written CUDA kernels.")
    p.add_argument("--version", action="version", version=f"sigconv {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    _add_denoise(sub)
    _add_variants(sub)
    _add_optional(sub, "bench", "sigconv.bench", "add_bench_arguments", "run_bench",
                  "time sigconv's kernels against cuDNN, CuPy and SciPy")
    _add_optional(sub, "tune", "sigconv.registry.tune", "add_tune_arguments", "run_tune",
                  "fill the autotuner cache ahead of time")
    _add_optional(sub, "batch", "sigconv.cli.batch", "add_batch_arguments", "run_batch",
                  "filter folders of sensor logs and recordings (CSV, Parquet, NPY, audio)")
    _add_optional(sub, "tui", "sigconv.cli.tui", "add_tui_arguments", "run_tui",
                  "interactive terminal UI: load, choose kernel and block, run, compare latency")
    return p


def main(argv=None) -> int:
    from sigconv._core.errors import InputError, OutputError

    parser = make_parser()
    try:
        args = parser.parse_args(argv)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return int(args.func(args) or 0)
    except UsageError as exc:
        _err(str(exc))
        return EXIT_USAGE
    except (InputError, OutputError) as exc:
        _err(str(exc))
        return EXIT_DATA
    except KeyboardInterrupt:
        _err("interrupted; no output written")
        return EXIT_INTERRUPTED
    except MemoryError:
        _err("out of memory")
        return EXIT_DATA
    except ValueError as exc:  # bad argument values found by the library (variant names, block sizes)
        _err(str(exc).splitlines()[0])
        return EXIT_USAGE
    except RuntimeError as exc:  # e.g. GPU out of memory after retries, backend not usable
        _err(str(exc).splitlines()[0])
        return EXIT_DATA
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    sys.exit(main())
