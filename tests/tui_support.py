"""What the terminal UI's test modules share: the `apps` package on the path, a way to run Textual's async pilot
without an asyncio plugin, waiting for the app's workers, and switching CUDA off for screens that must look the
same on every machine. Importing it skips the importing module where Textual is missing."""

from __future__ import annotations

import asyncio
import functools
import sys
from pathlib import Path

import pytest

pytest.importorskip("textual")
pytest.importorskip("textual_plotext")

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sigconv._core import devices as _devices  # noqa: E402
from sigconv.cli.tui import apps_package  # noqa: E402

apps_package()


def run_async(fn):
    """Run an async pilot test without an asyncio plugin for pytest."""

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


async def settle(app, pilot):
    """Until the app's workers are done and the messages they posted are handled."""
    for _ in range(2):
        await app.workers.wait_for_complete()
        await pilot.pause()


def clear_device_probes():
    for probe in (_devices._cupy_reason, _devices.cuda_reason, _devices._torch_reason, _devices.gpu_name):
        probe.cache_clear()


def cuda_off(monkeypatch):
    """CUDA disabled with one fixed reason text (the probes forgotten); undo with :func:`clear_device_probes`."""
    monkeypatch.setenv("SIGCONV_DISABLE_CUDA", "1")
    clear_device_probes()


def _cuda_disabled(monkeypatch):
    cuda_off(monkeypatch)
    yield
    clear_device_probes()


#: A fixture, imported by a test module: the tests that name ``cpu_only`` see CUDA disabled.
cpu_only = pytest.fixture(_cuda_disabled, name="cpu_only")
#: A fixture, imported by a test module: every test of that module sees CUDA disabled, so the GPU variants are
#: disabled with the same words in the screens and the snapshots on every machine.
cpu_only_module = pytest.fixture(_cuda_disabled, autouse=True, name="_cpu_only_machine")
