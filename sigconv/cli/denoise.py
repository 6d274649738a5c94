"""``sigconv denoise``: one sound file through a FIR filter or the spectral gate, streamed, atomic."""

from __future__ import annotations

import sys

import sigconv
from sigconv.cli.errors import EXIT_OK
from sigconv.cli.options import (add_backend_arguments, add_filter_arguments, add_spectral_arguments,
                                 fir_spec_from_args, gate_spec_from_args, kernel_from_args)

#: Below this duration no progress bar is drawn.
PROGRESS_MIN_SECONDS = 5.0


def add_denoise(sub) -> None:
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


def _progress_bar(name: str, frames: int):
    """A transient rich progress bar on stderr and its callback."""
    from rich.console import Console
    from rich.progress import BarColumn, Progress, TimeRemainingColumn

    bar = Progress("[progress.description]{task.description}", BarColumn(), "{task.percentage:>3.0f}%",
                   TimeRemainingColumn(), console=Console(stderr=True), transient=True)
    task = bar.add_task(f"filtering {name}", total=frames)
    return bar, lambda done: bar.update(task, completed=done)


def cmd_denoise(args) -> int:
    spectral = args.method == "spectral"
    job = sigconv.prepare_denoise(
        args.input, args.output, method=args.method, fir=None if spectral else fir_spec_from_args(args),
        gate=gate_spec_from_args(args) if spectral else None,
        kernel=kernel_from_args(args, "conv2d" if spectral else "conv1d"), overwrite=args.force,
        allow_truncated=args.allow_truncated)
    info = job.info
    if job.note and not args.quiet:
        print(job.note, file=sys.stderr)
    bar, progress = None, None
    if not args.quiet and info.duration >= PROGRESS_MIN_SECONDS and sys.stderr.isatty():
        bar, progress = _progress_bar(info.path.name, info.frames)
        bar.start()
    try:
        res = job.run(progress=progress)
    finally:
        if bar:
            bar.stop()
    if not args.quiet:
        speed = info.duration / res.seconds if res.seconds > 0 else float("inf")
        print(f"{info.path.name} -> {job.output}: {info.duration:.2f} s, {info.channels} ch, {info.samplerate} Hz, "
              f"{info.subtype}; {job.description}; backend {job.kernel.backend} "
              f"(variant {res.variant}); {res.seconds:.2f} s, {speed:.0f}x real time; "
              f"{res.clipped} samples clipped")
    return EXIT_OK
