"""The ``sigconv`` command line: argparse, one-line errors and exit codes, over sigconv's public API.

Exit codes: 0 ok, 1 bad data or I/O error (or the asked-for backend cannot run), 2 usage error,
130 interrupted (Ctrl-C), 143 terminated (SIGTERM), 129 hung up (SIGHUP): SIGTERM and SIGHUP stop a command as
Ctrl-C does, leaving no temporary file. Every user error is one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import sys
import threading

from sigconv import InputError, OutputError, __version__, format_block, raise_terminated, variants
from sigconv.cli import batch as cli_batch
from sigconv.cli import bench as cli_bench
from sigconv.cli import tui as cli_tui
from sigconv.cli import tune as cli_tune
from sigconv.cli.denoise import add_denoise
from sigconv.cli.errors import EXIT_DATA, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UsageError, print_error

__all__ = ["main", "run", "make_parser", "UsageError"]


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors (exit 2) instead of the usage block."""

    def error(self, message):  # noqa: D401
        raise UsageError(f"{message} (see '{self.prog} --help')")


def _add_variants(sub):
    p = sub.add_parser("variants", help="list the convolution kernel variants and whether they run here")
    p.add_argument("op", nargs="?", choices=("conv1d", "conv2d"), default=None)
    p.set_defaults(func=cmd_variants)


def cmd_variants(args) -> int:
    for op in [args.op] if args.op else ("conv1d", "conv2d"):
        print(f"{op}:")
        for v in variants(op):
            blocks = ",".join(format_block(b) for b in v["blocks"]) or "-"
            state = "available" if v["available"] else f"unavailable: {v['reason']}"
            print(f"  {v['backend']:4} {v['name']:10} blocks {blocks:32} {state}\n       {v['description']}")
            if v["blocks"]:
                print(f"       accepts {v['block_rule']}")
    return EXIT_OK


def _add_command(sub, name: str, help_: str, add, run) -> None:
    p = sub.add_parser(name, help=help_)
    add(p)
    p.set_defaults(func=run)


def make_parser() -> argparse.ArgumentParser:
    p = _Parser(prog="sigconv", description="Audio and time-series filtering on hand-written CUDA kernels.")
    p.add_argument("--version", action="version", version=f"sigconv {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    add_denoise(sub)
    _add_variants(sub)
    _add_command(sub, "bench", "time sigconv's kernels against cuDNN, CuPy and SciPy",
                 cli_bench.add_bench_arguments, cli_bench.run_bench)
    _add_command(sub, "tune", "fill the autotuner cache ahead of time", cli_tune.add_tune_arguments,
                 cli_tune.run_tune)
    _add_command(sub, "batch", "filter folders of sensor logs and recordings (CSV, Parquet, NPY, audio)",
                 cli_batch.add_batch_arguments, cli_batch.run_batch)
    _add_command(sub, "tui", "interactive terminal UI: load, choose kernel and block, run, compare latency",
                 cli_tui.add_tui_arguments, cli_tui.run_tui)
    return p


@contextlib.contextmanager
def _stop_signals():
    """SIGTERM and SIGHUP raise ``sigconv.Terminated`` (a KeyboardInterrupt) in the main thread while a command
    runs; the handlers before are put back after. A signal ignored when the command starts stays ignored
    (``nohup sigconv ...`` keeps running when its terminal closes)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    names = [n for n in ("SIGTERM", "SIGHUP")
             if hasattr(signal, n) and signal.getsignal(getattr(signal, n)) is not signal.SIG_IGN]
    before = {n: signal.signal(getattr(signal, n), raise_terminated) for n in names}
    try:
        yield
    finally:
        for n, h in before.items():
            signal.signal(getattr(signal, n), h)


def main(argv=None) -> int:
    with _stop_signals():
        return _main(argv)


#: Commands after which the program ends without Python's teardown (see :func:`run`); the TUI ends the usual way.
QUICK_EXIT_COMMANDS = frozenset({"batch", "denoise", "variants"})
_command = None  # the command the last main() ran


def run() -> None:
    """The ``sigconv`` program (``python -m sigconv`` too): :func:`main` on the command line's arguments, then the
    process ends with its exit code.

    After a batch or denoise run, Python's teardown costs 0.1-0.2 s that a user waits for and nothing needs:
    freeing every module the run imported, and multiprocessing's wait for a batch's GPU process, which releases its
    CUDA context after its last answer. Those commands have closed and synced every file by the time main returns,
    so the process then flushes the standard streams and logging and ends at once (``os._exit``). Any other command,
    or a run that leaves a thread of its own running, ends the usual way."""
    rc = main()
    if _command in QUICK_EXIT_COMMANDS and all(t.daemon for t in threading.enumerate()
                                               if t is not threading.main_thread()):
        import logging
        import os

        logging.shutdown()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # a closed pipe (| head): nothing more to say
                pass
        os._exit(rc)
    sys.exit(rc)


def _main(argv) -> int:
    global _command
    parser = make_parser()
    try:
        args = parser.parse_args(argv)
        _command = getattr(args, "command", None)
        if not getattr(args, "func", None):
            parser.print_help(sys.stderr)
            return EXIT_USAGE
        return int(args.func(args) or 0)
    except UsageError as exc:
        print_error(str(exc))
        return EXIT_USAGE
    except (InputError, OutputError) as exc:
        print_error(str(exc))
        return EXIT_DATA
    except KeyboardInterrupt as exc:
        signum = getattr(exc, "signum", None)
        if signum is None:
            print_error("interrupted; no output written")
            return EXIT_INTERRUPTED
        print_error(f"stopped by {signal.Signals(signum).name}; no output written")
        return 128 + signum
    except MemoryError:
        print_error("out of memory")
        return EXIT_DATA
    except ValueError as exc:  # bad argument values found by the library (variant names, block sizes)
        print_error(str(exc).splitlines()[0])
        return EXIT_USAGE
    except RuntimeError as exc:  # e.g. GPU out of memory after retries, backend not usable
        print_error(str(exc).splitlines()[0])
        return EXIT_DATA
    except BrokenPipeError:
        return EXIT_OK


if __name__ == "__main__":
    run()
