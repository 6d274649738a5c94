"""Exit codes and the usage error of the command line."""

from __future__ import annotations

import sys

EXIT_OK, EXIT_DATA, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A bad command line (exit 2)."""


def print_error(msg: str) -> None:
    """One line on stderr: ``sigconv: error: MSG``."""
    print(f"sigconv: error: {msg}", file=sys.stderr)
