"""``sigconv tune``: its options, passed to :func:`sigconv.fill_autotune_cache`."""

from __future__ import annotations

import inspect

import sigconv

__all__ = ["add_tune_arguments", "run_tune"]


def _default(name: str):
    """A default of :func:`sigconv.fill_autotune_cache` (they live only in its signature)."""
    return list(inspect.signature(sigconv.fill_autotune_cache).parameters[name].default)


def add_tune_arguments(parser) -> None:
    """Options of ``sigconv tune``."""
    parser.add_argument("--channels", type=int, nargs="+", default=_default("channels"), metavar="C",
                        help="channel counts to tune (default: %(default)s)")
    parser.add_argument("--lengths", type=int, nargs="+", default=_default("lengths"), metavar="L",
                        help="signal lengths to tune (default: 2^16 2^20 2^23)")
    parser.add_argument("--taps", type=int, nargs="+", default=_default("taps"), metavar="K",
                        help="tap counts to tune (default: %(default)s)")
    parser.add_argument("--no-2d", action="store_true", help="skip the 2-D shape classes")


def run_tune(args) -> int:
    """Fill the autotune cache for common shape classes; print each choice. 1 when no GPU."""
    reason = sigconv.cuda_reason()
    if reason:
        print(f"sigconv tune: no usable GPU ({reason})")
        return 1
    sigconv.fill_autotune_cache(tuple(args.channels), tuple(args.lengths), tuple(args.taps), conv2d=not args.no_2d)
    return 0
