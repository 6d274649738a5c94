"""One registry of convolution implementations that everything loops over.

Each entry is a :class:`Variant`: sigconv's own kernels (``kind="variant"``, selectable with
``variant=NAME``) and the peers they are measured against (``kind="peer"``: SciPy, cuDNN, CuPy).
Tests, ``sigconv bench``, the autotuner and the TUI all iterate this one list, so a new kernel is
registered once and shows up everywhere.

Launchers are given as ``"module:function"`` strings and imported on first use, so that
``import sigconv`` never imports CuPy or torch.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

__all__ = ["Variant", "register", "get", "entries", "variants", "OPS"]

#: Operations that have variants.
OPS = ("conv1d", "conv2d")

#: Launch block sizes (threads per block) a 1-D CUDA variant may accept: multiples of 32 up to 1024.
BLOCKS_1D = (32, 64, 128, 256, 512, 1024)


@dataclass(frozen=True)
class Variant:
    """A registered implementation of one operation.

    Attributes
    ----------
    name : str
        What users pass as ``variant=`` (``"tiled"``) or, for peers, the label in benchmark tables
        (``"cudnn"``, ``"cupyx.oaconvolve"``).
    op : str
        ``"conv1d"`` or ``"conv2d"``.
    backend : str
        ``"cpu"`` or ``"cuda"``.
    description : str
        One line, shown by :func:`sigconv.variants`, the CLI and the TUI.
    launcher : str
        ``"module:function"`` of the callable that runs it (imported lazily).
    blocks : tuple
        Accepted launch block sizes (ints for 1-D, ``(bx, by)`` pairs for 2-D); empty when the
        implementation takes no block size (CPU code, library peers).
    default_block : Any
        Block used when the caller passes ``block=None``.
    dtypes : tuple of str
        Supported floating dtypes.
    max_taps : int or None
        Largest kernel length (1-D) or side (2-D) it accepts; ``None`` for no limit.
    kind : str
        ``"variant"`` (sigconv's own) or ``"peer"`` (a baseline to compare with).
    requires : tuple of str
        What must be importable/usable: ``"cupy"``, ``"torch"``, ``"gpu"``.
    """

    name: str
    op: str
    backend: str
    description: str
    launcher: str
    blocks: tuple = ()
    default_block: Any = None
    dtypes: tuple = ("float32", "float64")
    max_taps: Optional[int] = None
    kind: str = "variant"
    requires: tuple = ()
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def load(self) -> Callable:
        """Import and return the launcher callable."""
        mod, _, fn = self.launcher.partition(":")
        return getattr(importlib.import_module(mod), fn)

    def availability(self) -> Optional[str]:
        """``None`` when usable on this machine, else the one-line reason why not."""
        from sigconv._core import devices as _devices

        for req in self.requires:
            reason = _devices.unavailable(req)
            if reason:
                return reason
        return None

    @property
    def available(self) -> bool:
        return self.availability() is None


_REGISTRY: dict[tuple[str, str, str], Variant] = {}


def register(v: Variant) -> Variant:
    """Add (or replace) an entry, keyed by (op, backend, name)."""
    if v.op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {v.op!r}")
    _REGISTRY[(v.op, v.backend, v.name)] = v
    return v


def entries(op: Optional[str] = None, backend: Optional[str] = None, kind: Optional[str] = None) -> list[Variant]:
    """All entries matching the filters, in registration order."""
    _ensure_loaded()
    return [
        v
        for v in _REGISTRY.values()
        if (op is None or v.op == op) and (backend is None or v.backend == backend) and (kind is None or v.kind == kind)
    ]


def get(op: str, backend: str, name: str) -> Variant:
    """The entry for ``name``; ``ValueError`` listing the valid names when it does not exist."""
    _ensure_loaded()
    try:
        return _REGISTRY[(op, backend, name)]
    except KeyError:
        names = [v.name for v in entries(op, backend, kind="variant")] + ["auto"]
        raise ValueError(
            f"variant must be one of {', '.join(names)} for {op} on the {backend} backend, got {name!r}"
        ) from None


def variants(op: str = "conv1d") -> list[dict]:
    """List sigconv's kernel variants for ``op`` (``"conv1d"`` or ``"conv2d"``).

    Returns
    -------
    list of dict
        One dict per variant with ``name``, ``backend``, ``description``, ``blocks`` (the launch
        block sizes it accepts), ``default_block``, ``dtypes``, ``max_taps``, ``available`` and
        ``reason`` (why it is unavailable here, or ``None``).

    Examples
    --------
    >>> import sigconv
    >>> [v["name"] for v in sigconv.variants("conv1d") if v["backend"] == "cpu"]
    ['direct', 'fft']
    """
    if op not in OPS:
        raise ValueError(f"op must be one of {', '.join(OPS)}, got {op!r}")
    out = []
    for v in entries(op, kind="variant"):
        reason = v.availability()
        out.append(
            dict(
                name=v.name,
                backend=v.backend,
                description=v.description,
                blocks=list(v.blocks),
                default_block=v.default_block,
                dtypes=list(v.dtypes),
                max_taps=v.max_taps,
                available=reason is None,
                reason=reason,
            )
        )
    return out


_LOADED = False


def _ensure_loaded() -> None:
    """Import the modules that register entries (they only declare records, no heavy imports)."""
    global _LOADED
    if _LOADED:
        return
    _LOADED = True
    from sigconv.backends import _entries  # noqa: F401  (registers on import)
