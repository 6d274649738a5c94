"""Messages the TUI's workers and widgets post: small dataclasses, all in one place."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message


@dataclass
class FileLoaded(Message):
    """A file was read; ``signal`` is an ``apps.loading.Signal``."""

    signal: Any


@dataclass
class LoadFailed(Message):
    """A file could not be read; ``error`` is the one-line reason."""

    path: str
    error: str


@dataclass
class Progress(Message):
    """A running job advanced to ``fraction`` (0..1) of ``task``."""

    task: str
    fraction: float


@dataclass
class RunFinished(Message):
    """The filter ran; ``result`` is an ``apps.running.RunResult``."""

    result: Any


@dataclass
class LatencyReady(Message):
    """The latency measurement finished; ``latency`` is an ``apps.latency.Latency``."""

    latency: Any


@dataclass
class JobFailed(Message):
    """A job (run, latency, save, export) failed with a one-line error."""

    task: str
    error: str


@dataclass
class JobCancelled(Message):
    task: str


@dataclass
class Saved(Message):
    """A file was written; ``summary`` says what."""

    summary: str


@dataclass
class SettingsChanged(Message):
    """The control panel or the kernel picker changed a setting (``name`` = ``value``)."""

    name: str
    value: Any


@dataclass
class PathChosen(Message):
    """The file browser chose ``path`` to load."""

    path: str


@dataclass
class ViewReady(Message):
    """The signal view's window was read; ``view`` is an ``apps.viewport.WindowView`` of ``signal``."""

    signal: Any
    view: Any
