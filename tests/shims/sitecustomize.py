"""A test shim for batch subprocesses: tests/test_batch.py puts this folder on PYTHONPATH, so Python imports it at
start-up in the command and in every pool worker (they start from a fresh interpreter).

With $SIGCONV_TEST_AT_REPLACE set, ``os.replace`` onto a file named NAME (the atomic rename of a finished output)
first does what it says: "kill:NAME" SIGKILLs the process (a crash mid-file), "sleep:NAME:SECONDS" waits (a file
that stays in flight). Without it, nothing is changed.
"""

import os

_SPEC = os.environ.get("SIGCONV_TEST_AT_REPLACE")

if _SPEC:
    import signal
    import time

    _ACTION, _NAME, *_ARGS = _SPEC.split(":")
    _replace = os.replace

    def _replace_with_fault(src, dst, *args, **kwargs):
        if os.path.basename(os.fspath(dst)) == _NAME:
            if _ACTION == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            elif _ACTION == "sleep":  # in slices, as a file at work runs Python between its native calls
                end = time.monotonic() + float(_ARGS[0])
                while time.monotonic() < end:
                    time.sleep(0.05)
        return _replace(src, dst, *args, **kwargs)

    os.replace = _replace_with_fault
