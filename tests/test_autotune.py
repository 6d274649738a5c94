"""The autotuner's timing and selection logic and the ``auto`` chooser's rules on the CPU, with a stand-in for
CuPy's events and device queries (a fake clock that each launch advances by its candidate's cost). The GPU
tests (tests/test_cuda1d.py) run the same code on a real device."""

from __future__ import annotations

import json
import sys
import types

import numpy as np
import pytest

from sigconv.registry import auto as _auto
from sigconv.registry import table as _table
from sigconv.registry import tune as _autotune
from sigconv.registry.table import Conv2dJob


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


def test_pick_is_not_decided_by_a_slowdown_while_the_first_candidate_is_timed(fake_cupy):
    """The device 10% slower for its first 10 ms of work (clocks rising, a first call's extra work): the candidates'
    rounds alternate, so the slowdown cannot fall on the first candidate's alone and hand the pick to the second (the
    512-thread fft_fused at 0.398 ms against the 1024-thread one at 0.410 ms for 7921 taps, an H100's figures)."""
    cost = {("fft_fused", 512): 0.398, ("fft_fused", 1024): 0.410}
    order = []

    def runner(v, b):
        order.append((v, b))
        fake_cupy.clock += cost[(v, b)] * (1.1 if fake_cupy.clock < 10.0 else 1.0)

    cands = list(cost)
    assert _autotune.pick("conv1d", (1, 26, 8192, "float32"), cands, runner) == ("fft_fused", 512)
    (rec,) = next(iter(json.loads(_autotune.cache_path().read_text())["sections"].values())).values()
    assert rec["timed"] == {"fft_fused@512": pytest.approx(0.398), "fft_fused@1024": pytest.approx(0.410)}
    # warm-up and probe of each, then rounds in turn, each starting one candidate later
    probes = 2 * (_autotune.WARMUP + 1)
    assert order[:probes] == [cands[0]] * (_autotune.WARMUP + 1) + [cands[1]] * (_autotune.WARMUP + 1)
    firsts = [order[probes + r * 2 * _autotune.REPS] for r in range(_autotune.ROUNDS)]
    assert firsts == [cands[r % 2] for r in range(_autotune.ROUNDS)]
    assert len(order) == probes + _autotune.ROUNDS * 2 * _autotune.REPS


def test_pick_leaves_out_a_candidate_that_refuses_in_a_round(fake_cupy):
    """A candidate whose launch fails with a refusal (ValueError, out of memory) after its probe is dropped from
    the timing, and the others still decide; any other error propagates."""
    launches = {"n": 0}

    def runner(v, b):
        launches["n"] += 1
        if v == "flaky" and launches["n"] > 2 * (_autotune.WARMUP + 1):
            raise ValueError("refused on a later launch")
        fake_cupy.clock += {"flaky": 0.1, "steady": 0.3}[v]

    assert _autotune.pick("conv1d", (1, 20, 9, "float32"), [("flaky", 64), ("steady", 64)], runner) == ("steady", 64)

    def broken(v, b):
        raise RuntimeError("a bug, not a refusal")

    _autotune.clear_memo()
    with pytest.raises(RuntimeError, match="a bug"):
        _autotune.pick("conv1d", (1, 20, 10, "float32"), [("steady", 64)], broken)


# ------------------------------------------------------------------------------------ the auto chooser
# sigconv.registry.auto is the only place where auto's rules live; these check them on the CPU.


@pytest.mark.parametrize("C, L, K, want", [(1, 10_000, 48, "direct"), (2, 10_000, 49, "fft"), (1, 48, 4000, "direct"),
                                           (3, 300, 100, "direct"), (3, 400, 100, "fft")])
def test_cpu_conv1d_rule(C, L, K, want):
    assert _auto.choose_conv1d("cpu", C, L, K, "float64") == (want, None)


def test_cpu_conv2d_rule():
    def job(k, s):
        return Conv2dJob((1, 1, 50, 50), (1, 1, k, k), "float32", (s, s), (0, 0), (10, 10))

    assert _auto.choose_conv2d("cpu", job(9, 1))[0] == "fft"
    assert _auto.choose_conv2d("cpu", job(8, 1))[0] == "direct"
    assert _auto.choose_conv2d("cpu", job(9, 2))[0] == "direct"


def test_cuda_conv1d_candidates_come_from_the_registry():
    """Every candidate is a registered auto candidate that applies; the favourites by dtype and length."""
    for dtype in ("float32", "float64"):
        for K in (1, 7, 48, 64, 65, 1024, 1025, 4095, 9000):
            cands = _auto.conv1d_candidates("cuda", 2, 1 << 20, K, dtype)
            assert cands and len(set(cands)) == len(cands)
            for name, block in cands:
                v = _table.get("conv1d", "cuda", name)
                assert v.auto and block in v.blocks and v.applies(_table.Conv1dJob(2, 1 << 20, K, dtype)) is None
    assert _auto.conv1d_candidates("cuda", 1, 1 << 20, 25, "float32")[0] == ("tiled", 256)
    assert all(n != "ffa" for n, _ in _auto.conv1d_candidates("cuda", 1, 1 << 20, _auto.FFA_FAVOURITE_MIN_K - 1,
                                                                "float32"))
    # the fast FIR algorithm from FFA_FAVOURITE_MIN_K up to its own limit, where the FFT takes over
    ffa_max = _table.get("conv1d", "cuda", "ffa").max_taps
    for K in (_auto.FFA_FAVOURITE_MIN_K, 63, ffa_max):
        assert _auto.conv1d_candidates("cuda", 1, 1 << 20, K, "float32")[0][0] == "ffa", K
    assert all(n != "ffa" for n, _ in _auto.conv1d_candidates("cuda", 1, 1 << 20, ffa_max + 1, "float32"))
    assert _auto.conv1d_candidates("cuda", 1, 1 << 20, ffa_max + 1, "float32")[0][0] == "fft_fused"
    assert ("fft", 256) in _auto.conv1d_candidates("cuda", 1, 1 << 20, 48, "float32")
    assert {n for n, _ in _auto.conv1d_candidates("cuda", 1, 1 << 20, 1025, "float32")} == {"fft", "fft_fused"}
    assert _auto.conv1d_candidates("cuda", 1, 1 << 20, 255, "float32")[0] == ("fft_fused", 128)
    # the fused kernel at its tile's block first, then the neighbouring block, then cuFFT's (from
    # FUSED_ONE_TILE_MIN_K taps: the 32768 tile on 512 threads, then on 1024)
    assert _auto.conv1d_candidates("cuda", 1, 1 << 20, _auto.FUSED_ONE_TILE_MIN_K, "float32")[:3] == \
        [("fft_fused", 512), ("fft_fused", 1024), ("fft", 256)]
    for K in (4095, _auto.FUSED_ONE_TILE_MIN_K - 1):
        assert _auto.conv1d_candidates("cuda", 1, 1 << 20, K, "float32")[:3] == \
            [("fft_fused", 512), ("fft_fused", 1024), ("fft", 256)]
    assert _auto.conv1d_candidates("cuda", 1, 1 << 20, 1023, "float32")[:3] == \
        [("fft_fused", 128), ("fft_fused", 256), ("fft", 256)]
    # the fused kernel's tap limit: longer filters go to cuFFT only, float64 never to the fused kernel
    assert {n for n, _ in _auto.conv1d_candidates("cuda", 1, 1 << 20, 9000, "float32")} == {"fft"}
    assert all(n != "fft_fused" for K in (64, 1025) for n, _ in _auto.conv1d_candidates("cuda", 1, 1 << 20, K,
                                                                                         "float64"))
    assert _auto.conv1d_candidates("cuda", 1, 1 << 20, 33, "float64")[0] == ("fft", 256)
    assert all(n != "constant" for K in (3, 300) for n, _ in _auto.conv1d_candidates("cuda", 1, 1000, K, "float64"))


def test_cuda_conv1d_timing_only_with_a_runner_and_enough_outputs(fake_cupy):
    calls = []

    def runner(v, b):
        calls.append((v, b))
        fake_cupy.clock += {"tiled": 1.0, "ffa": 0.8, "fft": 0.5, "fft_fused": 0.75}[v] * (1 + (b or 0) / 1024)

    assert _auto.choose_conv1d("cuda", 1, 1000, 50, "float32", runner=runner) == ("ffa", 64) and not calls
    assert _auto.choose_conv1d("cuda", 1, 1 << 20, 50, "float32") == ("ffa", 64)
    assert _auto.choose_conv1d("cuda", 1, 1 << 20, 50, "float32", runner=runner) == ("fft", 256) and calls
    # the caller's block is kept when the chosen variant accepts it
    assert _auto.choose_conv1d("cuda", 1, 1 << 20, 50, "float32", runner=runner, block=512) == ("fft", 512)


def test_cuda_conv2d_candidates_and_rank1():
    spec = Conv2dJob((1, 1, 1025, 4096), (1, 1, 9, 9), "float32", (1, 1), (4, 4), (1025, 4096))
    assert _auto.conv2d_candidates("cuda", spec)[0][0] == "strip"
    assert all(n != "separable" for n, _ in _auto.conv2d_candidates("cuda", spec))  # rank unknown: not a candidate
    sep = Conv2dJob(spec.x_shape, spec.w_shape, "float32", spec.stride, spec.pad, spec.out_hw, rank1=True)
    assert _auto.conv2d_candidates("cuda", sep)[0][0] == "separable"
    f64 = Conv2dJob((2, 3, 20, 20), (4, 3, 3, 3), "float64", (1, 1), (1, 1), (20, 20))
    assert {n for n, _ in _auto.conv2d_candidates("cuda", f64)} == {"shared", "naive"}
    names = {n for job in (spec, sep, f64) for n, _ in _auto.conv2d_candidates("cuda", job)}
    assert "shfl" not in names and all(_table.get("conv2d", "cuda", n).auto for n in names)
    # host weights: checked for separable and for auto where it can win, never otherwise
    k = np.outer(np.arange(1.0, 6.0), np.arange(2.0, 7.0))[None, None]
    r1, (u, v) = _auto.host_rank1("auto", k.shape, k)
    assert r1 and np.allclose(np.einsum("oci,ocj->ocij", u, v), k)
    assert _auto.host_rank1("auto", k.shape, k + np.eye(5)) == (False, None)
    assert _auto.host_rank1("naive", k.shape, k) == (None, None)
    assert _auto.host_rank1("auto", k.shape, None) == (None, None)


def test_cuda_conv2d_choice_is_timed_per_border(fake_cupy):
    """The border is part of the shape class: a job under wrap is timed apart from the same job with zeros, and
    each keeps its own winner (a variant fast with zeros can be slow through the boundary rule)."""
    spec = Conv2dJob((1, 1, 1025, 65535), (1, 1, 9, 9), "float32", (1, 1), (4, 4), (1025, 65535))
    wrap = spec._replace(border="wrap")
    assert _auto.conv2d_shape_key(wrap, False) != _auto.conv2d_shape_key(spec, False)
    assert _auto.conv2d_shape_key(wrap, False)[:-1] == _auto.conv2d_shape_key(spec, False)[:-1]
    cost = {"zero": {"prefetch": 1.0, "strip": 1.1}, "wrap": {"prefetch": 1.3, "strip": 1.1}}
    timed = []

    def runner_for(border):
        def runner(v, b):
            timed.append(border)
            fake_cupy.clock += cost[border].get(v, 5.0)
        return runner

    assert _auto.choose_conv2d("cuda", spec, runner=runner_for("zero"))[0] == "prefetch"
    assert _auto.choose_conv2d("cuda", wrap, runner=runner_for("wrap"))[0] == "strip"
    n = len(timed)
    assert "zero" in timed and "wrap" in timed
    assert _auto.choose_conv2d("cuda", wrap, runner=runner_for("wrap"))[0] == "strip" and len(timed) == n  # memo


def test_cuda_conv2d_choice_derives_its_candidates_once_per_job(monkeypatch):
    """A repeated job costs the chooser a lookup (the launch's host path); a registry change lists them again."""
    listed = []
    real = _auto.conv2d_candidates

    def counting(backend, job):
        listed.append(job)
        return real(backend, job)

    monkeypatch.setattr(_auto, "conv2d_candidates", counting)
    job = Conv2dJob((1, 1, 64, 64), (1, 1, 3, 3), "float32", (1, 1), (1, 1), (64, 64), border="symm")
    first = _auto.choose_conv2d("cuda", job)
    assert [_auto.choose_conv2d("cuda", job._replace()) for _ in range(3)] == [first] * 3 and len(listed) == 1
    strip = _table.get("conv2d", "cuda", "strip")
    monkeypatch.setitem(_table._REGISTRY, ("conv2d", "cuda", "strip"), strip)  # restored after the test
    _table.register(strip)
    assert _auto.choose_conv2d("cuda", job) == first and len(listed) == 2


def test_cpu_file_filter_reports_what_ran(rng):
    """The cpu file filter asks the chooser block by block; ``variant`` is the method that filtered most."""
    from sigconv.engine.audio import pcm_spec
    from sigconv.engine.file import CPUFileFilter

    f = CPUFileFilter(np.ones(101) / 101, 1, pcm_spec("DOUBLE"), phase="linear")
    assert f.variant == "fft"  # the chooser's answer for a full block, before any
    f.process(rng.standard_normal((200, 1)))  # 200 x 101 multiply-adds: direct summation is cheaper
    assert f.variant == "direct"
    f.process(rng.standard_normal((100_000, 1)))
    assert f.variant == "fft"


def test_tune_command_without_gpu(monkeypatch, capsys):
    import sigconv
    from sigconv.cli import main

    monkeypatch.setattr(sigconv, "cuda_reason", lambda: "no device in this test")
    assert main(["tune", "--no-2d", "--taps", "7"]) == 1
    assert capsys.readouterr().out.strip() == "sigconv tune: no usable GPU (no device in this test)"
    with pytest.raises(RuntimeError, match="no usable GPU"):
        monkeypatch.setattr("sigconv._core.devices.cuda_reason", lambda: "none")
        _auto.fill_autotune_cache(taps=(7,), conv2d=False)


def test_the_test_run_keeps_its_own_cache_folder():
    """Tuned choices written by the tests land in the run's own folder (tests/conftest.py), never in the user's."""
    from sigconv._core.cache import cache_dir

    d = cache_dir()
    assert d.name.startswith("sigconv-test-cache-") and d.is_dir()
    assert _autotune.cache_path().parent == d
