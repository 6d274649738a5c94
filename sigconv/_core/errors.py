"""The user-facing error types: the CLI turns InputError and OutputError into one line and exit code 1, and
Terminated (like Ctrl-C's KeyboardInterrupt) into exit 128 + the signal's number."""

import signal
from typing import Optional


class InputError(Exception):
    """Bad input data (exit code 1); the message is one line naming the file and the problem."""


class OutputError(Exception):
    """The output cannot be written (exit code 1)."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP (what ``timeout``, systemd, job schedulers and a closed terminal send), raised in the main
    thread like Ctrl-C's KeyboardInterrupt, so every clean-up path that handles Ctrl-C handles these too (no
    temporary file left). ``signum`` is the signal; a command exits with 128 + ``signum`` (143, 129)."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def name(self) -> str:
        return signal.Signals(self.signum).name


#: The signals that stop sigconv as Ctrl-C does: SIGINT raises KeyboardInterrupt, the others Terminated.
STOP_SIGNALS = tuple(getattr(signal, n) for n in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, n))


def first_line(exc: BaseException, empty: Optional[str] = None) -> str:
    """The first line of ``exc``'s message, for a one-line error; ``empty`` (default: the exception's type name)
    when it has none."""
    text = str(exc).strip()
    if text:
        return text.splitlines()[0]
    return type(exc).__name__ if empty is None else empty


def raise_terminated(signum, frame):
    """Signal handler for SIGTERM / SIGHUP: raise :class:`Terminated` in the main thread."""
    raise Terminated(signum)
