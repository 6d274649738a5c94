"""Turn the command line's inputs (files, folders, glob patterns) into tasks with output paths.

The output of an input is ``OUTDIR / rel`` where ``rel`` is its path relative to the folder it was
found in (a folder argument, or the fixed prefix of a glob pattern; a plain file keeps its name).
A ``rel`` that is absolute or holds ``..`` is refused, and so is an output whose real path (after
symbolic links) leaves OUTDIR or equals the input: the batch never writes outside OUTDIR and never
overwrites an input.
"""

from __future__ import annotations

import glob
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePath
from typing import Iterator, Optional

from sigconv._core.atomic import atomic_output
from sigconv._core.errors import OutputError

#: Suffix -> format name. Anything else found in a folder is ignored (not an input).
SUFFIXES = {".csv": "csv", ".parquet": "parquet", ".pq": "parquet", ".npy": "npy", ".wav": "audio",
            ".flac": "audio"}


class DiscoveryError(Exception):
    """An input argument that matches nothing (a usage error)."""


@dataclass
class Found:
    path: Path  # the input as found (absolute)
    rel: str  # path under OUTDIR (posix form)
    kind: Optional[str]  # format, or None when the suffix is not supported
    refused: Optional[str] = None  # why this input cannot be processed (recorded as a failure)


def kind_of(path) -> Optional[str]:
    return SUFFIXES.get(Path(path).suffix.lower())


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


def prepare_output(inp: Path, out: Path, outdir: Path) -> None:
    """Check ``out`` (``output_problem``: OutputError) and create its folder."""
    why = output_problem(inp, out, outdir)
    if why:
        raise OutputError(why)
    out.parent.mkdir(parents=True, exist_ok=True)


@contextmanager
def safe_output(inp: Path, out: Path, outdir: Path) -> Iterator[Path]:
    """``sigconv._core.atomic.atomic_output`` for ``out``, checked before and again just before the rename
    (a link may have appeared meanwhile)."""
    prepare_output(inp, out, outdir)

    def recheck():
        why = output_problem(inp, out, outdir)
        if why:
            raise OutputError(why)

    with atomic_output(out, before_replace=recheck) as tmp:
        yield tmp


def discover(inputs, outdir, recursive: bool = False) -> list[Found]:
    """Expand ``inputs`` in order (duplicates dropped); files inside OUTDIR are never inputs."""
    outdir_real = Path(os.path.realpath(outdir))
    found: list[Found] = []
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
            return
        refused = None if kind else f"unsupported file type {path.suffix or '(no suffix)'!r} " \
                                    f"(supported: {', '.join(sorted(SUFFIXES))})"
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
            walker = sorted(p.rglob("*")) if recursive else sorted(p.iterdir())
            n0 = len(found)
            for f in walker:
                if f.is_file() and not any(part.startswith(".") for part in f.relative_to(p).parts):
                    add(f, f.relative_to(p).as_posix(), explicit=False)
            if len(found) == n0 and not recursive and any(c.is_dir() for c in p.iterdir()):
                raise DiscoveryError(f"{arg}: no supported files at the top of this folder "
                                     "(pass --recursive to look in subfolders)")
        elif p.exists():
            add(p, p.name, explicit=True)
        else:
            raise DiscoveryError(f"{arg}: no such file or folder")
    return found
