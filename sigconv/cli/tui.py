"""``sigconv tui [FILE]``: the interactive terminal UI (Textual). The app lives in ``apps/``
(installed as ``sigconv.apps``); this module only parses the command line and starts it."""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
import threading
from pathlib import Path

__all__ = ["add_tui_arguments", "run_tui", "run_app", "apps_package"]


def apps_package():
    """``sigconv.apps`` when installed from a wheel, else ``apps`` from the checkout root."""
    try:
        return importlib.import_module("sigconv.apps")
    except ImportError:
        root = str(Path(__file__).resolve().parents[1])
        if root not in sys.path:
            sys.path.insert(0, root)
        return importlib.import_module("apps")


def add_tui_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", nargs="?", default=None, help="recording or CSV sensor log to load at start")
    parser.add_argument("--backend", choices=("auto", "cpu", "cuda"), default="auto",
                        help="backend to start with (auto: cuda when a GPU is usable, else cpu)")
    parser.add_argument("--root", default=None, help="folder the file browser starts in (default: FILE's folder)")


def run_tui(args: argparse.Namespace) -> int:
    try:
        pkg = apps_package()
        make_app = importlib.import_module(pkg.__name__ + ".app").make_app
    except ImportError as exc:
        print(f"sigconv: error: the TUI needs textual and textual-plotext ({exc}); "
              "pip install 'sigconv[tui]'", file=sys.stderr)
        return 1
    if args.file is not None and not Path(args.file).exists():
        print(f"sigconv: error: {args.file}: no such file", file=sys.stderr)
        return 1
    run_app(make_app(args.file, backend=args.backend, root=args.root))
    return 0


def run_app(app, **run_kw) -> None:
    """Run the TUI ``app`` (``run_kw``: Textual's ``App.run`` keywords) with its running job cancelled on SIGTERM
    and SIGHUP, ahead of the handler already there (``sigconv.cli`` raises ``sigconv.Terminated``). The job runs
    in a worker thread that the event loop waits for on its way out, so without the cancel a save in progress
    would finish after the stop; cancelled, it leaves no output (its atomic output removes the temporary file)."""
    chained = {}
    for name in ("SIGTERM", "SIGHUP") if threading.current_thread() is threading.main_thread() else ():
        signum = getattr(signal, name, None)
        before = signal.getsignal(signum) if signum is not None else None
        if callable(before):  # (SIG_DFL ends the process outright; SIG_IGN keeps it running: nothing to add)
            chained[signum] = before
            signal.signal(signum, lambda s, f, before=before: (app.cancel_running(), before(s, f)))
    try:
        app.run(**run_kw)
    finally:
        for signum, before in chained.items():
            signal.signal(signum, before)
