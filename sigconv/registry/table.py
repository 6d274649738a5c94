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
import math
import numbers
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

from sigconv._core import blocks as _blocks

__all__ = ["Variant", "Conv1dJob", "Conv2dJob", "register", "get", "entries", "variants", "block_refusal",
           "dtype_name", "OPS", "BLOCKS_1D"]

#: Operations that have variants.
OPS = ("conv1d", "conv2d")

#: The launch blocks (threads per block) that the benchmark, the autotuner and the TUI's list offer for a 1-D CUDA
#: variant; each accepts any multiple of 32 up to 1024 (:meth:`Variant.block_refusal`).
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
        The launch blocks that the benchmark, the autotuner and the TUI offer (ints for 1-D, ``(bx, by)`` pairs
        for 2-D); empty when the implementation takes no block size (CPU code, library peers). A variant with
        blocks accepts any block of a multiple of 32 threads up to 1024 (:meth:`block_refusal`), not only these.
    default_block : Any
        Block used when the caller passes ``block=None``.
    block_step : int
        2-D: the multiple of which bx must be (4: 16-byte tile loads; 32: a warp is one row of threads).
    block_step_reason : str
        Why, in a few words (shown when a block is refused).
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
    method : str
        How it computes, in SciPy's words: ``"direct"`` sums or ``"fft"`` transforms (``method=`` of the array API
        maps onto it; the cuda FFT variants take the host taps' key, under which they cache the filter's spectrum).
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
    block_step: int = 1
    block_step_reason: str = ""
    method: str = "direct"

    def block_layout(self, threads: int) -> tuple:
        """2-D: the (bx, by) launch block of ``threads`` threads (a multiple of 32) given as one integer: (threads,
        1) for a variant whose default block is one row of threads (strip, shfl), else the default block's width
        by as many rows as the threads fill. Every such layout is one the variant accepts."""
        dbx, dby = self.default_block
        if dby == 1:
            return (threads, 1)
        bx = math.gcd(dbx, threads)
        return (bx, threads // bx)

    def block_layout_words(self) -> str:
        """:meth:`block_layout` in words: "n x 1" or "16 x n/16"."""
        dbx, dby = self.default_block
        return "n x 1" if dby == 1 else f"{dbx} x n/{dbx}"

    def block_refusal(self, block) -> Optional[str]:
        """``None`` when this variant launches ``block`` (``None``: its default), else why not (one line).

        1-D variants take any multiple of 32 up to 1024 threads; 2-D ones any (bx, by) of a multiple of 32 threads
        up to 1024 whose bx is a multiple of :attr:`block_step`, or one such integer (laid out by
        :meth:`block_layout`)."""
        try:
            self.launch_block(block)
        except ValueError as exc:
            return str(exc)
        return None

    def launch_block(self, block):
        """The block a launch uses for ``block``: the default for ``None``, an integer of a 2-D variant laid out by
        :meth:`block_layout`; ``ValueError`` (one line, naming the variant) when the variant does not take it."""
        if block is None:
            return self.default_block
        what = f"{self.op} variant {self.name!r} ({self.backend})"
        if not self.blocks:
            raise ValueError(f"{what} takes no block size; got block {_blocks.format_block(block)}")
        if self.op != "conv2d":
            return _blocks.check_block(block)
        if isinstance(block, numbers.Integral) and not isinstance(block, bool):
            return self.block_layout(_blocks.check_block(block))
        bx, by = _blocks.check_block2d(block)
        if bx % self.block_step:
            why = f" ({self.block_step_reason})" if self.block_step_reason else ""
            raise ValueError(f"{what} needs bx a multiple of {self.block_step}{why}; got block {bx}x{by}")
        return (bx, by)

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
        block sizes the benchmark and the autotuner try), ``block_rule`` (the blocks it accepts, in words;
        :func:`block_refusal` tests one), ``default_block``, ``dtypes``, ``max_taps``, ``auto`` (whether
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
                block_rule=_block_rule(v),
                default_block=v.default_block,
                dtypes=list(v.dtypes),
                max_taps=v.max_taps,
                auto=v.auto,
                available=reason is None,
                reason=reason,
            )
        )
    return out


def _block_rule(v: Variant) -> str:
    """The blocks ``v`` accepts, in words."""
    if not v.blocks:
        return "takes no block size"
    if v.op != "conv2d":
        return "any multiple of 32 threads up to 1024"
    step = f", bx a multiple of {v.block_step}" if v.block_step > 1 else ""
    return f"any bx x by of a multiple of 32 threads up to 1024{step}; an integer n: {v.block_layout_words()}"


def block_refusal(op: str, backend: str, name: str, block) -> Optional[str]:
    """``None`` when variant ``name`` of ``op`` on ``backend`` launches ``block`` (an int, a (bx, by) pair or
    ``None`` for its default), else why not, in one line.

    Examples
    --------
    >>> import sigconv
    >>> sigconv.block_refusal("conv1d", "cuda", "tiled", 96) is None
    True
    >>> sigconv.block_refusal("conv1d", "cuda", "tiled", 48)
    'block must be a multiple of 32 between 32 and 1024, got 48'
    """
    return get(op, backend, name).block_refusal(block)
