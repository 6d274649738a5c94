"""Atomic file output, shared by every writer in sigconv (engine, batch, manifest, autotune cache, TUI).

Only regular files are ever replaced: an output path that is a folder, a device (``/dev/null`` included), a FIFO
or a socket is refused (:func:`replace_problem`), before any work and again just before the rename. An output
that is a symbolic link to a regular file is written through: the link's target is replaced, the link kept.

``with atomic_output(path) as tmp:`` yields a temporary file beside ``path`` (same folder, so the final
rename is atomic); when the block completes the file gets an ordinary mode (0666 less the umask) and
replaces ``path``; when it raises, KeyboardInterrupt (and :class:`Terminated`) included, the temporary file is removed. Ctrl-C,
SIGTERM and SIGHUP are held back (recorded, not lost) from before the temporary file is created until the clean-up is in
place, then handled, so no interruption can leave one behind.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import signal
import stat
import tempfile
import threading
from pathlib import Path
from typing import Callable, Iterator, Optional

from sigconv._core.errors import STOP_SIGNALS, OutputError

__all__ = ["atomic_output", "write_error", "replace_problem", "PART_SUFFIX", "PART_NAME"]

#: Suffix of sigconv's temporary outputs (``.<name>.<random>.part``).
PART_SUFFIX = ".part"
#: The name of a temporary output (mkstemp's 8 random characters); group 1 is the final output's name.
PART_NAME = re.compile(r"^\.(.+)\.[A-Za-z0-9_]{8}" + re.escape(PART_SUFFIX) + "$")


#: What a write that ran out of room says, by errno.
_NO_ROOM = {errno.ENOSPC: "no space left on device", errno.EDQUOT: "disk quota exceeded"}


def _folder_is_full(folder: Path) -> bool:
    """True when the file system holding ``folder`` has (next to) no room left for this user: under 1 MiB, as a
    write that ran out of room leaves it."""
    try:
        st = os.statvfs(folder)
    except (OSError, AttributeError):
        return False
    blocks = st.f_bfree if hasattr(os, "geteuid") and os.geteuid() == 0 else st.f_bavail
    return blocks * st.f_frsize < 1 << 20


def write_error(exc: BaseException, out) -> BaseException:
    """The one-line :class:`OutputError` for ``exc``, raised while writing ``out``; other exceptions unchanged.

    A full disk or quota says so and names the output (an OSError's errno ENOSPC / EDQUOT, or libsndfile's bare
    "System error." when the output's file system has no free block left); any other OSError or libsndfile
    error is "write failed" with its reason."""
    out = Path(out)
    folder = out.parent if str(out.parent) else Path(".")
    code = getattr(exc, "errno", None)
    if code in _NO_ROOM:
        return OutputError(f"{_NO_ROOM[code]} writing {out} (in {folder}); no output written")
    libsndfile = type(exc).__name__ == "LibsndfileError"
    if libsndfile and "System error" in str(exc) and _folder_is_full(folder):
        return OutputError(f"no space left on device writing {out} (in {folder}); no output written")
    if isinstance(exc, OSError) or libsndfile:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return OutputError(f"{out}: write failed ({reason})")
    return exc


_KINDS = ((stat.S_ISDIR, "folder"), (stat.S_ISCHR, "character device"), (stat.S_ISBLK, "block device"),
          (stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"))


def replace_problem(out) -> Optional[str]:
    """Why a finished output may not replace ``out`` (one line), or None when ``out`` is absent or a regular file
    (or a symbolic link to one). Anything else (a folder, a device, a FIFO, a socket, a link to one, a broken
    link) is never replaced."""
    out = Path(out)
    try:
        st = os.stat(out)
    except FileNotFoundError:
        if os.path.islink(out):
            return f"{out}: is a symbolic link to a missing file; remove the link or choose another output"
        return None
    except OSError as exc:
        return f"{out}: cannot check the output path ({exc.strerror})"
    if stat.S_ISREG(st.st_mode):
        return None
    kind = next((name for test, name in _KINDS if test(st.st_mode)), "special file")
    via = " (through a symbolic link)" if os.path.islink(out) else ""
    return f"{out}: is a {kind}{via}, not a regular file; sigconv replaces regular files only, choose another output"


class _Held:
    """The stop signals (SIGINT, SIGTERM, SIGHUP) held back in the main thread: while held, each one that arrives is
    recorded instead of handled. (Blocking them in the main thread would not do: the kernel gives a process's signal
    to any thread that does not block it, a reader, an FFT or BLAS worker, whose C handler has Python run the handler
    in the main thread all the same, at its next bytecode.) Elsewhere than the main thread nothing is held (a handler
    can only be set there; a signal's handler never runs in another thread)."""

    def __init__(self):
        self.before: dict = {}
        self.got: list = []
        if threading.current_thread() is not threading.main_thread():
            return
        try:
            for sig in STOP_SIGNALS:
                h = signal.getsignal(sig)
                if h is None or h is signal.SIG_IGN:  # (a handler set outside Python: left as it is; ignored: nothing)
                    continue
                self.before[sig] = signal.signal(sig, self._record)
        except BaseException:  # (a signal whose handler was not yet swapped: the others put back before it goes on)
            self.release()
            raise

    def _record(self, signum, frame) -> None:
        self.got.append(signum)

    def release(self) -> None:
        """Put the handlers back (once) and handle what arrived meanwhile, the first signal as its handler would
        have: a Python handler is called here (KeyboardInterrupt, :class:`Terminated`), the default action is
        taken."""
        before, self.before = self.before, {}
        for sig, h in before.items():
            signal.signal(sig, h)
        if not self.got:
            return
        sig = self.got[0]
        self.got = []
        h = before.get(sig)
        if callable(h):
            h(sig, None)
        elif h is signal.SIG_DFL:
            signal.raise_signal(sig)


def _read_umask() -> int:
    """The process's umask, read once, when this module is imported: reading it means setting it, and a umask of 0
    set by one thread while another creates a folder (a batch runs files in threads) would make that folder
    world-writable."""
    umask = os.umask(0)
    os.umask(umask)
    return umask


_UMASK = _read_umask()


def _ordinary_mode(path: Path) -> None:
    """mkstemp creates 0600; give the output the mode any new file would get."""
    os.chmod(path, 0o666 & ~_UMASK)


@contextlib.contextmanager
def atomic_output(out, *, before_replace: Optional[Callable[[], None]] = None) -> Iterator[Path]:
    """Write ``out`` through a temporary file beside it; see the module docstring.

    ``before_replace`` runs after the block and before the rename (a last check that may raise).
    Raises :class:`OutputError` (one line) when ``out`` is not a regular file (:func:`replace_problem`), the
    folder takes no files or the rename fails.
    """
    given = Path(out)
    why = replace_problem(given)
    if why:
        raise OutputError(why)
    out = Path(os.path.realpath(given)) if os.path.islink(given) else given  # a link: write its target
    folder = out.parent if str(out.parent) else Path(".")
    held = _Held()
    try:
        try:
            fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=PART_SUFFIX, dir=folder)
            os.close(fd)
        except OSError as exc:
            raise OutputError(f"{folder}: output folder is not writable ({exc.strerror})") from None
        tmp = Path(name)
        try:
            held.release()
            yield tmp
            if before_replace is not None:
                before_replace()
            why = replace_problem(out)  # again: something other than a file may have appeared meanwhile
            if why:
                raise OutputError(why)
            _ordinary_mode(tmp)
            try:
                os.replace(tmp, out)
            except OSError as exc:
                raise OutputError(f"{out}: cannot move the finished output into place ({exc.strerror})") from None
        except BaseException as exc:
            tmp.unlink(missing_ok=True)
            if getattr(exc, "errno", None) in _NO_ROOM:  # any writer's full disk, said once
                raise write_error(exc, out) from None
            raise
    finally:
        held.release()
