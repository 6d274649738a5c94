"""Turn the command line's inputs (files, folders, glob patterns) into tasks with output paths.

Inputs are tables (CSV, Parquet), NPY arrays and recordings: every format the libsndfile here reads, by its
usual suffixes (:func:`supported_suffixes`). A file named on the command line with another suffix is refused
with the reason; files with another suffix found in a folder are not inputs, only counted
(:attr:`Inputs.unsupported`, :meth:`Inputs.skipped_note`). Folders are walked through symbolic links, each
real folder once (a link back to a folder above is not followed again).

The output of an input is ``OUTDIR / rel`` where ``rel`` is its path relative to the folder it was
found in (a folder argument, or the fixed prefix of a glob pattern; a plain file keeps its name).
A ``rel`` that is absolute or holds ``..`` is refused, and so is an output whose real path (after
symbolic links) leaves OUTDIR or equals the input: the batch never writes outside OUTDIR and never
overwrites an input.

Nor does it replace a file it did not write: an output path that already holds a file is replaced only when the
manifest records that file as the batch's own (same size and mtime), or with ``--force``; one that holds anything
but a regular file (a folder, FIFO, device, socket, or a symbolic link to one) is never replaced
(:func:`overwrite_problem`). The file being filtered in a thread says which output may be replaced
(:func:`replacing`); the rule is checked before its folder is made and again just before the rename.
"""

from __future__ import annotations

import collections
import functools
import glob
import os
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePath
from typing import Iterator, Optional

from sigconv._core.atomic import atomic_output, replace_problem
from sigconv._core.errors import OutputError
from sigconv.engine.batch import cancel

__all__ = ["Found", "Inputs", "DiscoveryError", "find_inputs", "discover", "kind_of", "supported_suffixes",
           "supported_text", "rel_problem", "output_problem", "overwrite_problem", "replacing", "check_output",
           "prepare_output", "safe_output"]

#: Suffix -> format name of the tables and arrays.
TABLE_SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".npy": "npy"}
#: libsndfile major format -> the suffixes its files usually carry; a format counts where the libsndfile here
#: reads and writes it (``soundfile.available_formats()``; MP3 from libsndfile 1.1). Left out: RAW (no header),
#: SD2 (its header lives in a resource fork, lost on rename) and MPC2K (".mpc" is mostly Musepack, which
#: libsndfile does not read).
AUDIO_SUFFIXES = {
    "WAV": (".wav", ".wave"), "WAVEX": (".wav", ".wave"), "RF64": (".rf64",), "W64": (".w64",), "FLAC": (".flac",),
    "OGG": (".ogg", ".oga", ".opus"), "MP3": (".mp3",), "AIFF": (".aif", ".aiff", ".aifc"), "AU": (".au", ".snd"),
    "CAF": (".caf",), "IRCAM": (".sf", ".ircam"), "NIST": (".nist", ".sph"), "VOC": (".voc",), "PAF": (".paf",),
    "SVX": (".svx", ".8svx"), "MAT4": (".mat4",), "MAT5": (".mat5",), "PVF": (".pvf",), "XI": (".xi",),
    "HTK": (".htk",), "SDS": (".sds",), "AVR": (".avr",), "WVE": (".wve",),
}


@functools.lru_cache(maxsize=None)
def supported_suffixes() -> dict:
    """Suffix (lower case, with the dot) -> format name ("csv", "parquet", "npy" or "audio") of every input
    the batch filters: the tables and arrays, and the recordings of each format the libsndfile here reads."""
    import soundfile as sf

    here = sf.available_formats()
    audio = {sfx: "audio" for fmt, sfxs in AUDIO_SUFFIXES.items() if fmt in here for sfx in sfxs}
    return {**TABLE_SUFFIXES, **dict(sorted(audio.items()))}


def supported_text() -> str:
    """The supported inputs in words, for messages: "CSV, Parquet (.parquet, .pq), NPY, audio (.aif, ...)"."""
    audio = [s for s, k in supported_suffixes().items() if k == "audio"]
    return f"CSV, Parquet (.parquet, .pq), NPY, audio ({', '.join(audio)})"


class DiscoveryError(Exception):
    """An input argument that matches nothing, or no input at all (a usage error)."""


@dataclass
class Found:
    path: Path  # the input as found (absolute)
    rel: str  # path under OUTDIR (posix form)
    kind: Optional[str]  # format, or None when the suffix is not supported
    refused: Optional[str] = None  # why this input cannot be processed (recorded as a failure)


@dataclass
class Inputs:
    """What :func:`find_inputs` found: the inputs, and the count per suffix of the files found in folders (or by
    patterns) that are not inputs (``unsupported``: ".txt" -> 3, "(no suffix)" -> 1)."""

    found: list = field(default_factory=list)
    unsupported: dict = field(default_factory=dict)

    def skipped_note(self) -> Optional[str]:
        """One line about the files left out for their suffix, most frequent first, or None."""
        if not self.unsupported:
            return None
        n = sum(self.unsupported.values())
        top = sorted(self.unsupported.items(), key=lambda kv: (-kv[1], kv[0]))
        shown = ", ".join(f"{sfx}: {k}" for sfx, k in top[:8]) + (", ..." if len(top) > 8 else "")
        return f"skipped {n} file{'s' if n != 1 else ''} with unsupported suffixes ({shown})"


def kind_of(path) -> Optional[str]:
    """The format of an input by its suffix ("csv", "parquet", "npy", "audio"), or None when not supported."""
    return supported_suffixes().get(Path(path).suffix.lower())


def _suffix_label(path: Path) -> str:
    return path.suffix.lower() or "(no suffix)"


def _glob_root(pattern: str) -> str:
    """The leading components of a pattern without glob magic ('data/*/x.csv' -> 'data')."""
    parts = PurePath(pattern).parts
    fixed = []
    for p in parts:
        if glob.has_magic(p):
            break
        fixed.append(p)
    return str(PurePath(*fixed)) if fixed else "."


def _inside(path: Path, folder: Path) -> bool:
    try:
        path.relative_to(folder)
        return True
    except ValueError:
        return False


def rel_problem(rel: str) -> Optional[str]:
    """Why ``rel`` cannot name an output under OUTDIR, or None."""
    p = PurePath(rel)
    if p.is_absolute() or rel.startswith(("/", "\\")):
        return f"output name {rel!r} is an absolute path"
    if ".." in p.parts:
        return f"output name {rel!r} holds '..'"
    if not p.parts or rel in (".", ""):
        return "empty output name"
    return None


def output_problem(inp: Path, out: Path, outdir: Path) -> Optional[str]:
    """Why writing ``out`` is unsafe (leaves OUTDIR through a link, or is the input), or None.
    Checked by the coordinator and again by the worker right before it creates folders."""
    real_out = Path(os.path.realpath(out))
    real_dir = Path(os.path.realpath(outdir))
    if not _inside(real_out, real_dir) or real_out == real_dir:
        return f"output {out} would land outside OUTDIR ({real_out}); refusing"
    if real_out == Path(os.path.realpath(inp)):
        return f"output {out} would overwrite the input; refusing"
    return None


def overwrite_problem(out: Path, may_replace) -> Optional[str]:
    """Why the batch must not replace what is at ``out`` now, or None (nothing there, or a file it may replace).

    Anything but a regular file (or a symbolic link to one) is never replaced (``atomic.replace_problem``).
    ``may_replace``: True (``--force``: any regular file), the (size, mtime_ns) the manifest records for the file
    the batch wrote there (its own output: replaced, also when edited since, so that a rerun redoes an edited
    output), or None (no file may be replaced)."""
    why = replace_problem(out)
    if why or may_replace is not None:
        return why
    try:
        os.stat(out)
    except FileNotFoundError:
        return None
    except OSError as exc:
        return f"{out}: cannot check the output path ({exc.strerror})"
    return f"output {out} exists and was not written by sigconv batch; pass --force to replace it (or remove it)"


_GUARD = threading.local()


@contextmanager
def replacing(out: Path, may_replace) -> Iterator[None]:
    """While one file runs in this thread: :func:`prepare_output` and :func:`safe_output` replace what is at its
    output ``out`` only as :func:`overwrite_problem` allows with ``may_replace``. Other outputs written meanwhile
    (an NPY log's sidecar) and outputs written outside such a block follow the rule for non-regular files only."""
    prev = getattr(_GUARD, "rule", None)
    _GUARD.rule = (os.path.abspath(out), may_replace)
    try:
        yield
    finally:
        _GUARD.rule = prev


def check_output(inp: Path, out: Path, outdir: Path) -> None:
    """OutputError (one line) when writing ``out`` now is unsafe: :func:`output_problem`, or what is there
    already may not be replaced (:func:`overwrite_problem`, with the rule :func:`replacing` set)."""
    why = output_problem(inp, out, outdir)
    if not why:
        rule = getattr(_GUARD, "rule", None)
        may_replace = rule[1] if rule is not None and rule[0] == os.path.abspath(out) else True
        why = overwrite_problem(out, may_replace)
    if why:
        raise OutputError(why)


def prepare_output(inp: Path, out: Path, outdir: Path) -> None:
    """Check ``out`` (:func:`check_output`) and create its folder."""
    check_output(inp, out, outdir)
    out.parent.mkdir(parents=True, exist_ok=True)


@contextmanager
def safe_output(inp: Path, out: Path, outdir: Path) -> Iterator[Path]:
    """``sigconv._core.atomic.atomic_output`` for ``out``, checked before and again just before the rename
    (a link, or a file the batch may not replace, may have appeared meanwhile; the batch may have been stopped:
    :class:`.cancel.Cancelled`)."""
    prepare_output(inp, out, outdir)

    def last_look():
        cancel.check()
        check_output(inp, out, outdir)

    with atomic_output(out, before_replace=last_look) as tmp:
        yield tmp


def _walk(folder: Path, recursive: bool) -> list[Path]:
    """The files of ``folder`` (sorted; with ``recursive`` those of its subfolders too), skipping hidden
    names. Symbolic links to files and folders are followed, each real folder walked once: a link back to a
    folder above is not followed again, and a folder reached both directly and through a link is walked
    where it is (the links to folders are walked after the tree without them)."""
    files: list[Path] = []
    visited: set = set()
    links: list[Path] = []

    def walk(d: Path):
        real = os.path.realpath(d)
        if real in visited:
            return
        visited.add(real)
        try:
            with os.scandir(d) as it:
                entries = sorted(it, key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.name.startswith("."):
                continue
            try:
                is_dir = e.is_dir()  # follows links
                is_file = not is_dir and e.is_file()
                is_link = e.is_symlink()
            except OSError:
                continue
            if is_dir and recursive:
                if is_link:
                    links.append(Path(e.path))
                else:
                    walk(Path(e.path))
            elif is_file:
                files.append(Path(e.path))

    walk(folder)
    while links:
        walk(links.pop(0))
    return sorted(files, key=lambda f: f.relative_to(folder).parts)


def find_inputs(inputs, outdir, recursive: bool = False) -> Inputs:
    """Expand ``inputs`` in order (duplicates dropped); files inside OUTDIR are never inputs. DiscoveryError
    when an argument matches nothing, or when no input is found at all."""
    outdir_real = Path(os.path.realpath(outdir))
    result = Inputs()
    found = result.found
    unsupported: collections.Counter = collections.Counter()
    seen: set[str] = set()

    def add(path: Path, rel: str, explicit: bool):
        ap = Path(os.path.abspath(path))
        real = Path(os.path.realpath(path))
        if _inside(real, outdir_real) and not explicit:
            return  # our own outputs (OUTDIR inside an input folder)
        key = str(real)
        if key in seen:
            return
        seen.add(key)
        kind = kind_of(path)
        if kind is None and not explicit:
            unsupported[_suffix_label(path)] += 1
            return
        refused = None if kind else f"unsupported file type {path.suffix or '(no suffix)'!r} " \
                                    f"(supported: {supported_text()})"
        refused = refused or rel_problem(rel)
        found.append(Found(ap, rel, kind, refused))

    for arg in inputs:
        arg = str(arg)
        p = Path(arg)
        if glob.has_magic(arg):
            root = _glob_root(arg)
            matches = sorted(glob.glob(arg, recursive=recursive))
            files = [m for m in matches if os.path.isfile(m)]
            if not files:
                raise DiscoveryError(f"{arg}: the pattern matches no files")
            for m in files:
                rel = os.path.relpath(m, root) if root != "." else m
                # relpath normalises 'a/../b'; keep the '..' visible so that such names are refused
                if ".." in PurePath(m).parts[len(PurePath(root).parts):]:
                    rel = str(PurePath(*PurePath(m).parts[len(PurePath(root).parts):]))
                add(Path(m), PurePath(rel).as_posix(), explicit=False)
        elif p.is_dir():
            if Path(os.path.realpath(p)) == outdir_real:
                raise DiscoveryError(f"{arg}: is OUTDIR itself; outputs would overwrite the inputs")
            n0 = len(found)
            for f in _walk(p, recursive):
                add(f, f.relative_to(p).as_posix(), explicit=False)
            if len(found) == n0 and not recursive and any(c.is_dir() for c in p.iterdir()):
                raise DiscoveryError(f"{arg}: no supported files at the top of this folder "
                                     "(pass --recursive to look in subfolders)")
        elif p.exists():
            add(p, p.name, explicit=True)
        else:
            raise DiscoveryError(f"{arg}: no such file or folder")
    result.unsupported = dict(unsupported)
    if not found:
        note = result.skipped_note()
        raise DiscoveryError(f"no supported input files found (supported: {supported_text()})"
                             + (f"; {note}" if note else ""))
    return result


def discover(inputs, outdir, recursive: bool = False) -> list[Found]:
    """The inputs :func:`find_inputs` finds (its DiscoveryError included)."""
    return find_inputs(inputs, outdir, recursive).found
