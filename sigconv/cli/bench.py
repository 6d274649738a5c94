"""``sigconv bench``: its options, turned into :class:`sigconv.bench.SuiteOptions` and run."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Optional

from sigconv import bench, format_block, parse_block
from sigconv.bench import CASES_2D

__all__ = ["add_bench_arguments", "run_bench"]


def _int_expr(text: str) -> int:
    """An integer written as 67108864, 2^26, 2**26 or 1<<26."""
    t = text.strip().replace("**", "^")
    try:
        if "^" in t:
            a, b = t.split("^")
            return int(a) ** int(b)
        if "<<" in t:
            a, b = t.split("<<")
            return int(a) << int(b)
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer such as 4096 or 2^26, got {text!r}") from None


def _int_list(text: str) -> list[int]:
    return [_int_expr(t) for t in text.split(",") if t.strip()]


def _name_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _block_list(text: str) -> list:
    try:
        return [parse_block(t) for t in _name_list(text)]
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``sigconv bench`` (the CLI's subcommand and the tests build on this)."""
    parser.add_argument("op", choices=("conv1d", "conv2d"), help="operation to benchmark")
    parser.add_argument("--C", type=_int_list, default=None, metavar="LIST",
                        help="conv1d channel counts, comma-separated (default: the target set)")
    parser.add_argument("--L", type=_int_list, default=None, metavar="LIST",
                        help="conv1d signal lengths, e.g. 2^22,2^26")
    parser.add_argument("--K", type=_int_list, default=None, metavar="LIST",
                        help="conv1d tap counts, or conv2d kernel sides of the spectrogram cases")
    parser.add_argument("--shape", action="append", default=None, metavar="N,Cin,H,W,Cout,kH,kW[,s[,p]]",
                        help="conv2d: a custom shape (repeatable); replaces the default set")
    parser.add_argument("--cases", type=_name_list, default=None, metavar="LIST",
                        help=f"conv2d: which default cases ({','.join(CASES_2D)})")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--backend", choices=("auto", "cuda", "cpu", "all"), default="auto",
                        help="whose variants to time: auto = cuda when a GPU is usable, else cpu "
                             "(the SciPy peer always runs on the CPU)")
    parser.add_argument("--variants", type=_name_list, default=None, metavar="LIST",
                        help="sigconv variants to time (default all, 'auto' included)")
    parser.add_argument("--blocks", type=_block_list, default=None, metavar="LIST",
                        help="block sizes to sweep, any multiple of 32 threads up to 1024 (conv1d: 96,256; conv2d: "
                             "8x4,24x4 or 96, laid out per variant); default: each variant's usual grid")
    parser.add_argument("--peers", type=_name_list, default=None, metavar="LIST",
                        help="peers to time (default all; 'none' for none)")
    parser.add_argument("--reps", type=int, default=200, help="most timed runs per row (default 200)")
    parser.add_argument("--budget", type=float, default=0.4,
                        help="seconds of timed runs per row; fewer reps for slow rows (default 0.4)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop starting rows after this many seconds (the rest are listed as skipped)")
    parser.add_argument("--max-direct-macs", type=float, default=4e11,
                        help="skip the cupyx direct peer above this many multiply-adds (default 4e11)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the JSON and markdown files (default benchmarks/results/ in the "
                             "repository, else the current folder)")
    parser.add_argument("--quick", action="store_true", help="a small set that runs in seconds, also on a CPU")
    parser.add_argument("--json-only", action="store_true", help="write only the JSON file; print no table")
    parser.add_argument("--list", action="store_true", help="list the variants and peers that would run, and exit")


def _validate(args: argparse.Namespace) -> Optional[str]:
    for name in ("C", "L", "K"):
        vals = getattr(args, name)
        if vals is not None and (not vals or min(vals) < 1):
            return f"--{name} must list positive integers, got {vals}"
    if args.reps < 1:
        return f"--reps must be >= 1, got {args.reps}"
    if not args.budget > 0:
        return f"--budget must be > 0 seconds, got {args.budget}"
    if args.cases:
        bad = [c for c in args.cases if c not in CASES_2D]
        if bad:
            return f"--cases must be among {','.join(CASES_2D)}, got {','.join(bad)}"
    if args.op == "conv1d":
        for b in args.blocks or ():
            if not isinstance(b, int):
                return f"--blocks for conv1d are integers (threads per block), got {format_block(b)}"
    return None


def _cases(args: argparse.Namespace) -> list:
    if args.op == "conv1d":
        return bench.default_cases_1d(args.quick, args.C, args.L, args.K)
    if args.shape:
        return [bench.parse_shape2d(s) for s in args.shape]
    return bench.default_cases_2d(args.quick, args.K, args.cases)


def _names(names: Optional[list]) -> Optional[tuple]:
    """None (all), or the names given ('none' for none)."""
    if names is None:
        return None
    return () if names == ["none"] else tuple(names)


def _options(args: argparse.Namespace, cases: list) -> "bench.SuiteOptions":
    rows = bench.BenchOptions(variants=_names(args.variants), peers=_names(args.peers), blocks=args.blocks,
                              budget=args.budget, reps=args.reps, seed=args.seed, max_direct_macs=args.max_direct_macs,
                              dtype=args.dtype)
    return bench.SuiteOptions(args.op, tuple(cases), rows, backend=args.backend, out=args.out, quick=args.quick,
                              json_only=args.json_only, max_seconds=args.max_seconds, argv=tuple(sys.argv[1:]))


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark described by parsed ``args``; 0 when every sigconv row that ran was correct,
    1 when one failed its check or errored, 2 on bad options."""
    err = _validate(args)
    if err is None:
        try:
            cases = _cases(args)
        except ValueError as exc:
            err = str(exc)
    if err:
        print(f"sigconv bench: error: {err}", file=sys.stderr)
        return 2
    if args.list:
        for line in bench.entry_lines(args.op):
            print(line)
        return 0
    return bench.run_suite(_options(args, cases))
