"""One registry of convolution implementations that everything loops over.

Each entry is a :class:`Variant`: sigconv's own kernels (``kind="variant"``, selectable with
``variant=NAME``) and the peers they are measured against (``kind="peer"``: SciPy, cuDNN, CuPy).
Tests, ``sigconv bench``, the autotuner, the ``auto`` chooser (:mod:`sigconv.registry.auto`) and the
TUI all iterate this one list, so a new kernel is registered once and shows up everywhere.

The backends fill the table when ``sigconv.backends`` is imported (the engine imports it); this module
imports none of them. Each entry holds its callable: the backend modules import CuPy and torch inside
those callables only, so that ``import sigconv`` never imports them.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

__all__ = ["Variant", "Conv1dJob", "Conv2dJob", "register", "get", "entries", "variants", "dtype_name", "OPS",
           "BLOCKS_1D"]

#: Operations that have variants.
OPS = ("conv1d", "conv2d")

#: Launch block sizes (threads per block) a 1-D CUDA variant may accept: multiples of 32 up to 1024.
BLOCKS_1D = (32, 64, 128, 256, 512, 1024)


class Conv1dJob(NamedTuple):
    """The shape of a 1-D job, what :meth:`Variant.applies` and the chooser look at: C channels of L
    samples, K taps, the working dtype's name."""

    C: int
    L: int
    K: int
    dtype: str


#: What a 2-D job reads beyond the image (:attr:`Conv2dJob.border`): zeros, a non-zero constant, SciPy's
#: "wrap" or "symm" boundary.
BORDERS = ("zero", "fill", "wrap", "symm")


class Conv2dJob(NamedTuple):
    """The shape of a 2-D job: x (N, Cin, H, W), w (Cout, Cin, kH, kW), stride, pad, output size, dtype name;
    ``rank1`` is whether the weights are rank-1 per (co, ci) pair (None: not known, as for device weights);
    ``border`` what the job reads beyond the image (:data:`BORDERS`), which sets what each variant costs."""

    x_shape: tuple
    w_shape: tuple
    dtype: str
    stride: tuple = (1, 1)
    pad: tuple = (0, 0)
    out_hw: tuple = (1, 1)
    rank1: Optional[bool] = None
    border: str = "zero"

    @property
    def single_channel(self) -> bool:
        return self.x_shape[1] == 1 and self.w_shape[0] == 1


Job = Union[Conv1dJob, Conv2dJob]


@functools.lru_cache(maxsize=64)
def dtype_name(dtype) -> str:
    """numpy's name of ``dtype`` (a name, a type or a dtype), memoised: ``np.dtype(...).name`` costs microseconds, and
    ``auto`` asks it of every candidate on every call."""
    return np.dtype(dtype).name


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
    run : callable
        What runs it: the backend contract's signature (see ``sigconv.backends``) plus ``block`` (and, for
        cuda variants, ``out=``).
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
    auto : bool
        Whether ``variant="auto"`` may choose it (the chooser still orders and filters the candidates).
    constraint : callable or None
        ``constraint(job) -> None or reason``: what else it needs beyond dtype and size (one channel,
        stride 1, rank-1 weights...); :meth:`applies` calls it.
    source : str or None
        The kernel file it compiles (``kernels/<source>``), whose hash keys the autotuner's cache.
    """

    name: str
    op: str
    backend: str
    description: str
    run: Callable = field(compare=False, hash=False, repr=False)
    blocks: tuple = ()
    default_block: Any = None
    dtypes: tuple = ("float32", "float64")
    max_taps: Optional[int] = None
    kind: str = "variant"
    requires: tuple = ()
    auto: bool = False
    constraint: Optional[Callable[[Job], Optional[str]]] = field(default=None, compare=False, hash=False, repr=False)
    source: Optional[str] = None
    extra: dict = field(default_factory=dict, compare=False, hash=False)

    def load(self) -> Callable:
        """The callable that runs it."""
        return self.run

    def applies(self, job: Job) -> Optional[str]:
        """``None`` when it can run ``job`` (:class:`Conv1dJob` or :class:`Conv2dJob`), else why not (one line)."""
        dt = dtype_name(job.dtype)
        if dt not in self.dtypes:
            return f"it supports dtypes {', '.join(self.dtypes)} (got {dt})"
        if self.max_taps is not None:
            if isinstance(job, Conv1dJob) and job.K > self.max_taps:
                return f"it accepts at most {self.max_taps} taps (got K={job.K})"
            if isinstance(job, Conv2dJob) and max(job.w_shape[2], job.w_shape[3]) > self.max_taps:
                return (f"it supports kernels up to {self.max_taps}x{self.max_taps} "
                        f"(got {job.w_shape[2]}x{job.w_shape[3]})")
        return self.constraint(job) if self.constraint is not None else None

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
_GENERATION = [0]


def register(v: Variant) -> Variant:
    """Add (or replace) an entry, keyed by (op, backend, name)."""
    if v.op not in OPS:
        raise ValueError(f"op must be one of {OPS}, got {v.op!r}")
    if v.blocks and v.default_block not in v.blocks:
        raise ValueError(f"{v.op} variant {v.name!r}: default block {v.default_block!r} is not among its blocks")
    _REGISTRY[(v.op, v.backend, v.name)] = v
    _GENERATION[0] += 1
    return v


def generation() -> int:
    """A number that changes whenever :func:`register` adds or replaces an entry: what is derived from the
    registry (the chooser's candidates) is memoised under it."""
    return _GENERATION[0]


def entries(op: Optional[str] = None, backend: Optional[str] = None, kind: Optional[str] = None) -> list[Variant]:
    """All entries matching the filters, in registration order."""
    return [
        v
        for v in _REGISTRY.values()
        if (op is None or v.op == op) and (backend is None or v.backend == backend) and (kind is None or v.kind == kind)
    ]


def get(op: str, backend: str, name: str) -> Variant:
    """The entry for ``name``; ``ValueError`` listing the valid names when it does not exist."""
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
        block sizes it accepts), ``default_block``, ``dtypes``, ``max_taps``, ``auto`` (whether
        ``variant="auto"`` may choose it), ``available`` and ``reason`` (why it is unavailable here,
        or ``None``).

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
                auto=v.auto,
                available=reason is None,
                reason=reason,
            )
        )
    return out
