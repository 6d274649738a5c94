"""``sigconv denoise``: one sound file through a FIR filter or the spectral gate, streamed, atomic."""

from __future__ import annotations

import sys
import threading
from typing import Optional

import sigconv
from sigconv.cli.errors import EXIT_OK
from sigconv.cli.options import (add_backend_arguments, add_filter_arguments, add_spectral_arguments,
                                 check_method_options, fir_spec_from_args, gate_spec_from_args, kernel_from_args)

#: A run still going after this many seconds of wall time gets a progress bar (shorter runs print nothing extra).
PROGRESS_DELAY_S = 1.0


def add_denoise(sub) -> None:
    p = sub.add_parser("denoise", help="filter a recording (FIR band/low/high/notch, or a spectral gate)",
                       description="Filter a sound file without loading it whole. With no filter option, the "
                                   "default for the file's rate (as batch and the TUI apply it): band-pass 80-8000 Hz "
                                   "(capped below Nyquist) from 8000 Hz up, fs/200 to 0.4 fs below.")
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


def _console():
    """Where the progress bar is drawn: stderr."""
    from rich.console import Console

    return Console(stderr=True)


class _LazyProgress:
    """A transient rich progress bar on stderr that appears only once the run has lasted ``delay`` seconds.

    Call it with the frames done (the engine's ``progress`` callback, from its writer thread); use it as a
    context manager around the run. A timer starts the bar, so a run that is slow before its first block is
    written shows it too."""

    def __init__(self, name: str, frames: int, delay: Optional[float] = None):
        self.name, self.frames, self.done = name, frames, 0
        self._bar = self._task = None
        self._lock = threading.Lock()
        self._over = False
        self._timer = threading.Timer(PROGRESS_DELAY_S if delay is None else delay, self._show)
        self._timer.daemon = True

    def _show(self) -> None:
        from rich.progress import BarColumn, Progress, TimeRemainingColumn

        with self._lock:
            if self._over:
                return
            self._bar = Progress("[progress.description]{task.description}", BarColumn(),
                                 "{task.percentage:>3.0f}%", TimeRemainingColumn(), console=_console(),
                                 transient=True)
            self._task = self._bar.add_task(f"filtering {self.name}", total=self.frames, completed=self.done)
            self._bar.start()

    def __call__(self, done: int) -> None:
        self.done = done
        bar = self._bar
        if bar is not None:
            bar.update(self._task, completed=done)

    def __enter__(self):
        self._timer.start()
        return self

    def __exit__(self, *exc) -> None:
        self._timer.cancel()
        with self._lock:
            self._over = True
            if self._bar is not None:
                self._bar.stop()


def cmd_denoise(args) -> int:
    check_method_options(args)
    spectral = args.method == "spectral"
    job = sigconv.prepare_denoise(
        args.input, args.output, method=args.method, fir=None if spectral else fir_spec_from_args(args),
        gate=gate_spec_from_args(args) if spectral else None,
        kernel=kernel_from_args(args, "conv2d" if spectral else "conv1d"), overwrite=args.force,
        allow_truncated=args.allow_truncated)
    info = job.info
    if not args.quiet and sys.stderr.isatty():
        with _LazyProgress(info.path.name, info.frames) as progress:
            res = job.run(progress=progress)
    else:
        res = job.run()
    if not args.quiet:
        if job.note:  # after the run: a command that fails prints its one error line and nothing else
            print(job.note, file=sys.stderr)
        speed = info.duration / res.seconds if res.seconds > 0 else float("inf")
        print(f"{info.path.name} -> {job.output}: {info.duration:.2f} s, {info.channels} ch, {info.samplerate} Hz, "
              f"{info.subtype}; {job.description}; backend {job.kernel.backend} "
              f"(variant {res.variant}); {res.seconds:.2f} s, {speed:.0f}x real time; "
              f"{res.clipped} samples clipped")
    return EXIT_OK
