"""Launch blocks: what a valid block is, and how one is written and read ("256", "32x8", "-" for none).

1-D variants take threads per block (an int); 2-D variants take (bx, by), or an int of threads that the variant
lays out (``sigconv.registry.table.Variant.block_layout``). Every layer checks, formats and parses blocks through
these functions; what one variant accepts beyond them is ``Variant.block_refusal``.
"""

from __future__ import annotations

import numbers

__all__ = ["check_block", "check_block2d", "check_block_for", "format_block", "parse_block", "as_block"]


def check_block(block, name: str = "block"):
    """``None`` or a multiple of 32 in [32, 1024] (1-D launch block)."""
    if block is None:
        return None
    if isinstance(block, bool) or not isinstance(block, numbers.Integral):
        raise ValueError(f"{name} must be an integer multiple of 32 between 32 and 1024, got {block!r}")
    b = int(block)
    if b < 32 or b > 1024 or b % 32:
        raise ValueError(f"{name} must be a multiple of 32 between 32 and 1024, got {b}")
    return b


def check_block2d(block, name: str = "block"):
    """``None``, a (bx, by) launch block of 32 to 1024 threads in a multiple of 32, or such a number of threads (an
    int, returned as one: each variant lays it out its own way)."""
    if block is None:
        return None
    if isinstance(block, numbers.Integral) and not isinstance(block, bool):
        return check_block(block, name)
    try:
        bx, by = block
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (bx, by) or an integer, got {block!r}") from None
    if not all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and v > 0 for v in (bx, by)):
        raise ValueError(f"{name} must be a pair of positive integers (bx, by), got {block!r}")
    n = int(bx) * int(by)
    if n % 32 or n > 1024:
        raise ValueError(f"{name} (bx, by) must hold a multiple of 32 threads, at most 1024; got {bx}x{by} = {n}")
    return (int(bx), int(by))


def check_block_for(op: str, block, name: str = "block"):
    """The block check of operation ``op`` ("conv1d": threads, "conv2d": (bx, by))."""
    return check_block2d(block, name) if op == "conv2d" else check_block(block, name)


def as_block(b):
    """A block as stored in JSON (a list for 2-D) back to its Python form (a tuple)."""
    return tuple(b) if isinstance(b, list) else b


def format_block(b) -> str:
    """``256``, ``32x8``, or ``-`` for no block."""
    if b is None:
        return "-"
    return "x".join(map(str, b)) if isinstance(b, (tuple, list)) else str(b)


def parse_block(text: str):
    """The inverse of :func:`format_block` (values are not checked: see :func:`check_block_for`)."""
    text = text.strip()
    if text in ("-", ""):
        return None
    try:
        if "x" in text:
            a, b = text.split("x")
            return (int(a), int(b))
        return int(text)
    except ValueError:
        raise ValueError(f"block must be an integer such as 256 or a pair such as 32x8, got {text!r}") from None
