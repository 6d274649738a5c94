"""Stopping a batch midway, in whatever runs the files (the coordinating process, its threads, a pool worker).

One flag per process, :data:`STOP`. The runner sets it when the batch is stopped (Ctrl-C in the coordinator; in
a pool worker, the SIGTERM the coordinator sends). A file checks it with :func:`check` before it starts, between
the blocks it streams, and once more after its output is written and before that output is moved into place:
:class:`Cancelled` then unwinds through the atomic output, which removes the temporary file. So a stopped file
leaves nothing, and a file whose output was moved into place finishes and is reported as done.
"""

from __future__ import annotations

import threading

__all__ = ["STOP", "Cancelled", "check", "stop_batch", "running"]

#: Set when the batch is being stopped.
STOP = threading.Event()
#: Batches stopped in this process by their coordinator (a Dask worker serves many batches over its life).
_STOPPED: set = set()
_CURRENT = threading.local()


def stop_batch(batch_id: str) -> None:
    """Stop the files of batch ``batch_id`` that run in this process (run on Dask workers by the coordinator)."""
    _STOPPED.add(batch_id)


class running:
    """``with running(batch_id):`` around one file, so that :func:`check` also sees :func:`stop_batch`."""

    def __init__(self, batch_id):
        self.batch_id = batch_id

    def __enter__(self):
        self.prev = getattr(_CURRENT, "batch", None)
        _CURRENT.batch = self.batch_id

    def __exit__(self, *exc):
        _CURRENT.batch = self.prev


class Cancelled(Exception):
    """The batch was stopped before this file's output was moved into place; nothing of it remains."""


def check() -> None:
    """Raise :class:`Cancelled` when the batch is being stopped."""
    if STOP.is_set() or (_STOPPED and getattr(_CURRENT, "batch", None) in _STOPPED):
        raise Cancelled
