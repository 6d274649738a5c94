"""numpy or cupy? Asked once, where an array enters (as SciPy's ``array_namespace``), and answered here only.

CuPy is imported only when a cupy array or the cuda backend is involved, so ``import sigconv`` never needs it.
"""

from __future__ import annotations

import numpy as np

__all__ = ["is_cupy", "array_namespace", "namespace_of_backend", "to_backend", "like", "to_host"]


def is_cupy(a) -> bool:
    """True for a cupy array (checked by type, without importing cupy)."""
    return type(a).__module__.split(".")[0] == "cupy"


def array_namespace(*arrays):
    """cupy when any of ``arrays`` is a cupy array, else numpy."""
    if any(is_cupy(a) for a in arrays):
        import cupy

        return cupy
    return np


def namespace_of_backend(backend: str):
    """The array module a backend computes in: cupy for ``"cuda"``, numpy for ``"cpu"``."""
    if backend == "cuda":
        import cupy

        return cupy
    return np


def to_backend(a, backend: str):
    """``a`` in the backend's memory (numpy for cpu, cupy for cuda)."""
    if backend == "cuda":
        import cupy

        return cupy.asarray(a)
    return to_host(a)


def to_host(a) -> np.ndarray:
    """A numpy array of ``a`` (a device-to-host copy for cupy)."""
    return a.get() if is_cupy(a) else np.asarray(a)


def like(y, template):
    """``y`` as the array type of the caller's input ``template`` (cupy in, cupy out)."""
    if is_cupy(template):
        import cupy

        return cupy.asarray(y)
    return to_host(y) if is_cupy(y) else y
