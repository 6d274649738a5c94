"""Finding, specialising and compiling the CUDA C sources in ``kernels/``.

The sources sit at the top of the repository (``kernels/``) and, in an installed wheel, inside the
package (``sigconv/kernels``). :func:`module` prepends ``#define``s to specialise a source (CuPy's
ndimage does the same), inlines ``#include "common.cuh"`` so that the source hash covers every
byte that is compiled, and memoises the compiled module per device and per parameter set. CuPy
keeps compiled binaries in its on-disk cache (``~/.cupy/kernel_cache``, keyed by source and
options), so a second process does not recompile either.
"""

from __future__ import annotations

import functools
import re
import threading
from pathlib import Path
from typing import Iterable, Mapping

__all__ = ["kernel_dir", "source", "source_hash", "module", "constants", "NVRTC_OPTIONS", "LIMITS"]

#: Options for every NVRTC compile. No fast-math: results are checked against float64 references.
NVRTC_OPTIONS = ("-std=c++17",)

#: The header holding the numbers that kernels and launchers share (read by :func:`constants`).
LIMITS = "limits.cuh"

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*(//.*)?$', re.M)
_DEFINE = re.compile(r"^\s*#\s*define\s+(SIGCONV_[A-Z0-9_]+)\s+(-?\d+)\s*(//.*)?$", re.M)


def kernel_dir() -> Path:
    """Folder holding the ``.cu`` sources: inside the installed package, else the checkout's ``kernels/``."""
    here = Path(__file__).resolve().parent
    for cand in (here / "kernels", here.parent / "kernels"):
        if (cand / "common.cuh").is_file():
            return cand
    raise FileNotFoundError(
        f"sigconv's CUDA sources were not found (looked in {here / 'kernels'} and {here.parent / 'kernels'}); "
        "reinstall sigconv"
    )


@functools.lru_cache(maxsize=None)
def source(name: str) -> str:
    """Text of ``kernels/<name>`` with local ``#include "..."`` lines inlined (once each)."""
    kdir = kernel_dir()
    seen: set[str] = set()

    def expand(fname: str) -> str:
        text = (kdir / fname).read_text()

        def repl(m: re.Match) -> str:
            inc = m.group(1)
            if inc in seen:
                return f"// {inc} already included"
            seen.add(inc)
            return f"// ---- begin {inc}\n{expand(inc)}\n// ---- end {inc}"

        return _INCLUDE.sub(repl, text)

    return expand(name)


@functools.lru_cache(maxsize=None)
def constants(name: str = LIMITS) -> dict:
    """``{NAME: int}`` of the ``#define SIGCONV_NAME <integer>`` lines of ``kernels/<name>``: the one home of
    every number a launcher needs to agree with its kernel (tap buffer sizes, chunk lengths, halo widths)."""
    return {m.group(1): int(m.group(2)) for m in _DEFINE.finditer((kernel_dir() / name).read_text())}


def source_hash(*names: str) -> str:
    """Short SHA-256 of the expanded sources: part of every on-disk cache key (autotuner)."""
    import hashlib

    h = hashlib.sha256()
    for n in names:
        h.update(source(n).encode())
    return h.hexdigest()[:16]


_LOCK = threading.Lock()
_MODULES: dict = {}


def _defines_text(defines: Mapping[str, object]) -> str:
    return "".join(f"#define {k} {v}\n" for k, v in sorted(defines.items()))


def module(name: str, defines: Mapping[str, object] | None = None, name_expressions: Iterable[str] = (),
           options: Iterable[str] = ()):
    """Compiled ``cupy.RawModule`` for ``kernels/<name>`` specialised by ``defines``.

    Memoised per (device, source, defines, name expressions, options): calling it on a hot path
    costs a dict lookup. ``name_expressions`` lists template instantiations to compile (for
    example ``"conv1d_tiled<float, 25>"``); fetch them with ``mod.get_function(expr)``.
    """
    import cupy

    dev = cupy.cuda.Device().id
    defines = dict(defines or {})
    name_expressions = tuple(name_expressions)
    options = tuple(NVRTC_OPTIONS) + tuple(options)
    key = (dev, name, tuple(sorted(defines.items())), name_expressions, options)
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    with _LOCK:
        mod = _MODULES.get(key)
        if mod is None:
            code = _defines_text(defines) + source(name)
            mod = cupy.RawModule(code=code, options=options, name_expressions=name_expressions or None)
            mod.compile()
            _MODULES[key] = mod
    return mod
