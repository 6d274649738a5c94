"""Atomic file output, shared by every writer in sigconv (engine, batch, manifest, autotune cache, TUI).

``with atomic_output(path) as tmp:`` yields a temporary file beside ``path`` (same folder, so the final
rename is atomic); when the block completes the file gets an ordinary mode (0666 less the umask) and
replaces ``path``; when it raises, KeyboardInterrupt included, the temporary file is removed. Ctrl-C is held
back (blocked, not lost) from the moment the temporary file is created until the clean-up is in place, so
no interruption can leave one behind.
"""

from __future__ import annotations

import contextlib
import os
import signal
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator, Optional

from sigconv._core.errors import OutputError

__all__ = ["atomic_output", "PART_SUFFIX"]

#: Suffix of sigconv's temporary outputs (``.<name>.<random>.part``).
PART_SUFFIX = ".part"


def _hold_sigint() -> bool:
    """Block SIGINT in the main thread (it stays pending); True when it was blocked here."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "pthread_sigmask"):
        return False
    return signal.SIGINT not in signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})


def _release_sigint(held: bool) -> None:
    """Unblock SIGINT if _hold_sigint blocked it; a pending Ctrl-C is raised at the next bytecode."""
    if held:
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _ordinary_mode(path: Path) -> None:
    """mkstemp creates 0600; give the output the mode any new file would get."""
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(path, 0o666 & ~umask)


@contextlib.contextmanager
def atomic_output(out, *, before_replace: Optional[Callable[[], None]] = None) -> Iterator[Path]:
    """Write ``out`` through a temporary file beside it; see the module docstring.

    ``before_replace`` runs after the block and before the rename (a last check that may raise).
    Raises :class:`OutputError` (one line) when the folder takes no files or the rename fails.
    """
    out = Path(out)
    folder = out.parent if str(out.parent) else Path(".")
    held = _hold_sigint()
    try:
        try:
            fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=PART_SUFFIX, dir=folder)
            os.close(fd)
        except OSError as exc:
            raise OutputError(f"{folder}: output folder is not writable ({exc.strerror})") from None
        tmp = Path(name)
        try:
            _release_sigint(held)
            yield tmp
            if before_replace is not None:
                before_replace()
            _ordinary_mode(tmp)
            try:
                os.replace(tmp, out)
            except OSError as exc:
                raise OutputError(f"{out}: cannot move the finished output into place ({exc.strerror})") from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    finally:
        _release_sigint(held)
