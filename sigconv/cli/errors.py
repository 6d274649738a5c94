"""Exit codes and the usage error of the command line."""

from __future__ import annotations

import sys

EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad command line (exit 2)."""


def one_line(text: str) -> str:
    """``text`` as one printable line: control characters (a newline or an escape sequence in a file name) are
    shown escaped, as Python writes them (``\\n``, ``\\x1b``), so they can neither split the line nor drive the
    terminal."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))


def print_error(msg: str) -> None:
    """One line on stderr: ``sigconv: error: MSG``."""
    print(f"sigconv: error: {one_line(msg)}", file=sys.stderr)
