"""The autotuner's timing and selection logic on the CPU, with a stand-in for CuPy's events and device
queries (a fake clock that each launch advances by its candidate's cost). The GPU tests
(tests/test_cuda1d.py) run the same code on a real device."""

from __future__ import annotations

import json
import sys
import types

import pytest

from sigconv.registry import tune as _autotune


class _FakeCupy:
    """Just what sigconv.registry.tune touches: events on a stream, elapsed time, device properties."""

    def __init__(self):
        self.clock = 0.0  # ms of GPU work queued so far
        fake = self

        class Event:
            def record(self, stream=None):
                self.t = fake.clock

            def synchronize(self):
                pass

        self.cuda = types.SimpleNamespace(
            Event=Event,
            get_current_stream=lambda: object(),
            get_elapsed_time=lambda a, b: b.t - a.t,
            Device=lambda: types.SimpleNamespace(id=0),
            runtime=types.SimpleNamespace(getDeviceProperties=lambda i: {"name": b"Fake GPU"},
                                          driverGetVersion=lambda: 13000),
        )


@pytest.fixture
def fake_cupy(monkeypatch, tmp_path):
    fc = _FakeCupy()
    monkeypatch.setitem(sys.modules, "cupy", fc)
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("SIGCONV_AUTOTUNE", raising=False)
    _autotune.clear_memo()
    yield fc
    _autotune.clear_memo()


def test_time_is_the_per_launch_cost_of_back_to_back_rounds(fake_cupy):
    calls = []
    cost = {"a": 0.2, "b": 50.0}

    def runner(v, b):
        calls.append(v)
        fake_cupy.clock += cost[v]

    assert _autotune._time(runner, "a", 64) == pytest.approx(0.2)
    # fast kernel: warm-up, one probe launch, then ROUNDS rounds of REPS launches
    assert len(calls) == _autotune.WARMUP + 1 + _autotune.ROUNDS * _autotune.REPS
    calls.clear()
    assert _autotune._time(runner, "b", 64) == pytest.approx(50.0)
    # slow kernel (50 ms > ROUND_MS): one launch per round, so tuning stays short
    assert len(calls) == _autotune.WARMUP + 1 + _autotune.ROUNDS


def test_pick_takes_the_fastest_skips_refused_and_caches(fake_cupy):
    cost = {("tiled", 256): 0.169, ("tiled", 64): 0.161, ("fft", 256): 0.9}
    calls = []

    def runner(v, b):
        calls.append((v, b))
        if v == "bad":
            raise ValueError("this launcher refuses the shape")
        fake_cupy.clock += cost[(v, b)]

    cands = [("tiled", 256), ("bad", 128), ("tiled", 64), ("fft", 256)]
    key = (1, 26, 25, "float32")
    got = _autotune.pick("conv1d", key, cands, runner, sources=("conv1d.cu",))
    assert got == ("tiled", 64)
    entry = next(iter(json.loads(_autotune.cache_path().read_text())["sections"].values()))
    (rec,) = entry.values()
    assert rec["variant"] == "tiled" and rec["block"] == 64 and rec["ms"] == pytest.approx(0.161)
    assert set(rec["timed"]) == {"tiled@256", "tiled@64", "fft@256"}
    n = len(calls)
    assert _autotune.pick("conv1d", key, cands, runner, sources=("conv1d.cu",)) == got and len(calls) == n
    _autotune.clear_memo()  # from the disk cache, not re-timed
    assert _autotune.pick("conv1d", key, cands, runner, sources=("conv1d.cu",)) == got and len(calls) == n
