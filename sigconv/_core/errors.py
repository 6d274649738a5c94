"""The two user-facing error types the CLI turns into one line and exit code 1."""


class InputError(Exception):
    """Bad input data (exit code 1); the message is one line naming the file and the problem."""


class OutputError(Exception):
    """The output cannot be written (exit code 1)."""
