"""Denoise one sound file into another: the pipeline behind ``sigconv denoise`` and the terminal UI's save.

:func:`prepare_denoise` checks everything that can be checked before any sample is read (the input, the
output path, the filter for this rate and length, the kernel choice) and returns a :class:`DenoiseJob`
that says what it will do (``description``, ``note``); :meth:`DenoiseJob.run` streams the file through
the filter into a temporary file that is renamed into place only when complete.
"""

from __future__ import annotations

import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from sigconv._core.errors import InputError, OutputError
from sigconv.engine.audio import AudioInfo, probe
from sigconv.engine.settings import FirDesign, FirSpec, GateSpec, KernelChoice, signal_kind

__all__ = ["DenoiseJob", "prepare_denoise", "check_output_path", "OutputHints", "default_output", "METHODS"]

#: Denoising methods: a FIR filter, or the spectral gate.
METHODS = ("fir", "spectral")


@dataclass(frozen=True)
class OutputHints:
    """How the user fixes an output problem: the command line names its options, the TUI its dialogs."""

    overwrite: str = "pass --force to overwrite"
    rename: str = "choose another -o"


def default_output(inp: Path) -> Path:
    """``<stem>.denoised<suffix>`` beside the input."""
    return inp.with_name(f"{inp.stem}.denoised{inp.suffix}")


def check_output_path(inp: Path, out: Path, *, overwrite: bool, hints: OutputHints = OutputHints()) -> None:
    """Refuse an output that would overwrite the input, is a folder, exists (unless ``overwrite``), or lies in a
    folder that is missing or takes no files. ``ValueError`` for a path that can never work, ``OutputError``
    otherwise; one line each."""
    if out.exists() and out.resolve() == Path(inp).resolve():
        raise ValueError(f"{out}: output would overwrite the input; {hints.rename}")
    if out.is_dir():
        raise ValueError(f"{out}: output is a directory; give a file name")
    if out.exists() and not overwrite:
        raise OutputError(f"{out}: already exists ({hints.overwrite})")
    folder = out.parent if str(out.parent) else Path(".")
    if not folder.is_dir():
        raise OutputError(f"{folder}: output folder does not exist")
    check_writable(folder)


def check_writable(folder: Path) -> None:
    """Fail before any work when ``folder`` does not take files (os.access is no help for root)."""
    try:
        fd, name = tempfile.mkstemp(prefix=".sigconv-probe-", dir=folder)
    except OSError as exc:
        raise OutputError(f"{folder}: output folder is not writable ({exc.strerror})") from None
    os.close(fd)
    os.unlink(name)


@dataclass(frozen=True)
class DenoiseJob:
    """A checked denoising run, ready to go: ``run()`` writes ``output``."""

    info: AudioInfo
    output: Path
    description: str  # "band-pass 80-8000 Hz (7921 taps, zero phase)"
    note: Optional[str]  # what to tell the user before running (the default filter chosen), or None
    kernel: KernelChoice  # resolved: backend "cpu" or "cuda"
    make_filter: Callable
    overwrite: bool
    fir_design: Optional[FirDesign] = None  # the designed filter (method "fir"), None for the spectral gate

    def run(self, progress: Optional[Callable[[int], None]] = None,
            cancel: Optional[threading.Event] = None):
        """Filter the whole file; ``progress(frames_done)``; setting ``cancel`` stops with KeyboardInterrupt and
        leaves no output. Returns a :class:`~sigconv.engine.file.FilterResult` (``variant``: the one that ran)."""
        from sigconv.engine.file import filter_file

        res = filter_file(self.info, self.output, self.make_filter, overwrite=self.overwrite, progress=progress,
                          cancel=cancel)
        if res.variant is None:
            res.variant = self.kernel.variant
        return res


def prepare_denoise(input, output=None, *, method: str = "fir", fir: Optional[FirSpec] = None,
                    gate: Optional[GateSpec] = None, kernel: Optional[KernelChoice] = None, overwrite: bool = False,
                    allow_truncated: bool = False, hints: OutputHints = OutputHints()) -> DenoiseJob:
    """Check a denoising run of ``input`` into ``output`` (default ``<stem>.denoised<suffix>``) and return it.

    ``method`` "fir" applies ``fir`` (default ``FirSpec()``: the default band for recordings); "spectral" the
    gate ``gate`` (default ``GateSpec()``). ``kernel`` (default ``KernelChoice()``: auto) picks backend, variant
    and block; its ``op`` follows the method; backend "auto" takes the cpu for a file too short to repay the GPU's
    start-up (:func:`sigconv.registry.auto.prefer_cpu`). Raises
    ``InputError`` (unreadable input, filter longer than the file, cuda asked for and not usable),
    ``OutputError`` (output exists, folder missing or read-only) or ``ValueError`` (options that cannot work),
    each with one line, before anything is written.
    """
    if method not in METHODS:
        raise ValueError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    inp = Path(input)
    info = probe(inp, allow_truncated=allow_truncated)
    out = Path(output) if output else default_output(inp)
    check_output_path(inp, out, overwrite=overwrite, hints=hints)
    fir, gate, kernel = fir or FirSpec(), gate or GateSpec(), kernel or KernelChoice()
    op = "conv2d" if method == "spectral" else "conv1d"
    if kernel.op != op:
        kernel = KernelChoice(op=op, backend=kernel.backend, variant=kernel.variant, block=kernel.block)
    try:
        kernel = kernel.resolve(samples=info.frames * info.channels)
    except RuntimeError as exc:
        raise InputError(str(exc)) from None
    note, d = None, None
    if method == "spectral":
        from sigconv.engine.spectral import spectral_file_filter

        make, desc = spectral_file_filter(gate, kernel, info)
    else:
        fs = float(info.samplerate)
        d = fir.design(fs, signal_kind(fs), frames=info.frames, source=inp)  # length checked first
        taps, note = d.taps, d.note
        desc = f"{d.description} ({taps.size} taps, {fir.phase} phase)"

        def make(info2, spec, taps=taps):
            from sigconv.engine.file import fir_block_filter

            return fir_block_filter(taps, info2.channels, spec, kernel=kernel, phase=fir.phase, frames=info2.frames)

    if kernel.backend == "cpu" and kernel.block is not None:
        note = (note + "; " if note else "") + "--block applies to the cuda backend only and is ignored on cpu"
    return DenoiseJob(info, out, desc, note, kernel, make, overwrite, d)
