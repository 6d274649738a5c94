"""sigconv bench and its peers, on the CPU: records, files, skipped GPU rows, FAIL detection, peer maths."""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.ndimage
import scipy.signal

from sigconv import bench
from sigconv._core import devices as _devices
from sigconv.cli.bench import add_bench_arguments, run_bench
from sigconv.registry import table as _registry
from sigconv.engine.ops import window_1d, window_2d
from sigconv.backends import peers

ROOT = Path(__file__).resolve().parent.parent

REQUIRED = {"op", "C", "L", "K", "impl", "block", "ms_median", "gbs", "pct_copy", "device", "date"}
REQUIRED_2D = {"N", "Cin", "H", "W", "Cout", "kH", "kW", "stride", "pad"}
PEERS_1D = {"cudnn", "cupyx.convolve-direct", "cupyx.convolve-fft", "cupyx.oaconvolve", "cupyx.ndimage.convolve1d",
            "scipy"}
PEERS_2D = {"cudnn", "cudnn-tf32", "cupyx.ndimage.convolve", "cupyx.convolve2d", "scipy"}
GPU = _devices.cuda_reason() is None


def _run(argv, capsys=None):
    p = argparse.ArgumentParser()
    add_bench_arguments(p)
    return run_bench(p.parse_args(argv))


def _load(out_dir):
    files = sorted(out_dir.glob("*.json"))
    assert len(files) == 1, files
    return json.loads(files[0].read_text())


# ------------------------------------------------------------------------------ registry


def test_peers_are_registered_with_kind_peer():
    """Every peer the bench compares with is in the registry as kind 'peer' and its launcher imports."""
    for op, want in (("conv1d", PEERS_1D), ("conv2d", PEERS_2D)):
        got = {p.name: p for p in _registry.entries(op, kind="peer")}
        assert want <= set(got), want - set(got)
        for p in got.values():
            assert p.kind == "peer" and p.backend in ("cpu", "cuda")
            assert callable(p.load())
    assert all(p.name not in PEERS_1D for p in _registry.entries("conv1d", kind="variant") if p.backend == "cuda")


def test_bench_and_peers_import_no_torch_or_cupy():
    """Importing the bench and the peer records pulls in neither torch nor CuPy."""
    code = ("import sys, sigconv.bench, sigconv.backends.peers; "
            "print(','.join(m for m in ('torch', 'cupy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ""


# ------------------------------------------------------------------------------ peer index maths


def _brute1d(x, w, pad, out_len):
    C, L = x.shape
    y = np.zeros((C, out_len))
    for n in range(out_len):
        for j in range(w.size):
            t = n + j - pad
            if 0 <= t < L:
                y[:, n] += w[j] * x[:, t]
    return y


# The cupyx peers call the same helpers with cupyx modules; SciPy has the same API and semantics.
PEER_FNS_1D = {
    "direct": lambda *a: peers.signal_corr1d(lambda p, q, m: scipy.signal.convolve(p, q, m, method="direct"), *a,
                                             axes=False),
    "fft": lambda *a: peers.signal_corr1d(scipy.signal.fftconvolve, *a, axes=True),
    "oa": lambda *a: peers.signal_corr1d(scipy.signal.oaconvolve, *a, axes=True),
    "ndimage": lambda *a: peers.ndimage_corr1d(scipy.ndimage, *a),
    "scipy": peers.run_scipy_1d,
}


@pytest.mark.parametrize("name", sorted(PEER_FNS_1D))
@pytest.mark.parametrize("C,L,K", [(1, 41, 7), (3, 40, 6), (2, 5, 9), (1, 1, 1), (2, 33, 2)])
def test_peer_1d_computes_the_contract(name, C, L, K, rng):
    """Each 1-D peer helper computes y[c,n] = sum_j w[j] x[c, n+j-pad] for every mode and odd windows."""
    x, w = rng.standard_normal((C, L)), rng.standard_normal(K)
    windows = [window_1d(m, L, K) for m in ("full", "same", "valid")] + [(K - 1, L), (2, 3)]
    for pad, n in windows:
        ref = _brute1d(x, w, pad, n)
        y = np.asarray(PEER_FNS_1D[name](x, w, pad, n))
        assert y.shape == ref.shape, (pad, n)
        err = np.abs(y - ref)
        assert err.max() <= 1e-9 * (1 + np.abs(ref).max()), (pad, n, np.unravel_index(err.argmax(), err.shape))


PEER_FNS_2D = {
    "ndimage": lambda *a: peers.ndimage_corr2d(scipy.ndimage, *a),
    "convolve2d": lambda *a: peers.signal_corr2d(scipy.signal.convolve2d, *a),
    "scipy": peers.run_scipy_2d,
}


@pytest.mark.parametrize("name", sorted(PEER_FNS_2D))
@pytest.mark.parametrize("H,W,kH,kW", [(7, 9, 3, 3), (6, 5, 2, 4), (3, 3, 5, 4), (1, 8, 1, 3)])
def test_peer_2d_computes_the_contract(name, H, W, kH, kW, rng):
    """Single-channel 2-D peer helpers match the float64 reference for SciPy's modes and an odd window."""
    from sigconv.backends.cpu import corr2d_direct

    x, w, b = rng.standard_normal((1, 1, H, W)), rng.standard_normal((1, 1, kH, kW)), rng.standard_normal(1)
    windows = []
    for m in ("full", "same", "valid"):
        try:
            windows.append(window_2d(m, (H, W), (kH, kW)))
        except ValueError:
            pass
    windows.append(((1, 0), (2, 3)))
    for pad, ohw in windows:
        for bias in (None, b):
            ref = corr2d_direct(x, w, bias, (1, 1), pad, ohw)
            y = np.asarray(PEER_FNS_2D[name](x, w, bias, (1, 1), pad, ohw))
            assert y.shape == ref.shape and np.abs(y - ref).max() <= 1e-9 * (1 + np.abs(ref).max()), (pad, ohw)


def test_scipy_2d_peer_multichannel_stride(rng):
    """The SciPy conv2d peer handles channels, bias, padding and stride like torch's conv2d."""
    from sigconv.backends.cpu import corr2d_direct

    x, w, b = rng.standard_normal((2, 3, 11, 13)), rng.standard_normal((4, 3, 3, 2)), rng.standard_normal(4)
    for stride, pad in (((1, 1), (1, 1)), ((2, 3), (2, 0))):
        ohw = ((11 + 2 * pad[0] - 3) // stride[0] + 1, (13 + 2 * pad[1] - 2) // stride[1] + 1)
        assert np.allclose(peers.run_scipy_2d(x, w, b, stride, pad, ohw), corr2d_direct(x, w, b, stride, pad, ohw))
    with pytest.raises(peers.NotSupported):
        peers.ndimage_corr2d(scipy.ndimage, x, w, None, (1, 1), (0, 0), (9, 12))


# ------------------------------------------------------------------------------ harness runs

# --backend cpu: sigconv's cpu variants are timed also on a GPU machine (GPU peers still run there)
QUICK_1D = ["conv1d", "--quick", "--C", "1,2", "--L", "3000", "--K", "7,8", "--reps", "3", "--budget", "0.01",
            "--backend", "cpu"]


def test_quick_conv1d_writes_records_and_table(tmp_path, capsys):
    """A quick run writes JSON records with every required field, a markdown table, and prints a summary."""
    rc = _run(QUICK_1D + ["--out", str(tmp_path)])
    assert rc == 0
    data = _load(tmp_path)
    recs = data["records"]
    assert recs and all(REQUIRED <= set(r) for r in recs)
    timed = [r for r in recs if r["ms_median"] and r["backend"] == "cpu"]
    impls = {r["impl"] for r in timed}
    assert {"sigconv:direct", "sigconv:fft", "sigconv:auto", "scipy"} <= impls, impls
    for r in timed:
        assert r["op"] == "conv1d" and r["gbs"] > 0 and r["pct_copy"] > 0 and r["device"] and r["date"]
        assert r["p20"] <= r["ms_median"] <= r["p80"] and r["status"] == "ok"
        assert r["rel_err"] <= 1e-5
    assert {(r["C"], r["L"], r["K"]) for r in timed} == {(1, 3000, 7), (1, 3000, 8), (2, 3000, 7), (2, 3000, 8)}
    # rows of one shape are compared with the fastest peer timed at that shape
    assert all(r["best_peer"] == "scipy" and r["speedup_vs_best_peer"] > 0 for r in timed)
    md = next(tmp_path.glob("*.md")).read_text()
    assert "| case | impl | block | ms (median)" in md and "sigconv:direct" in md
    out = capsys.readouterr().out
    assert "best peer" in out and "wrote " in out


@pytest.mark.skipif(GPU, reason="checks how GPU rows are listed on a machine without a GPU")
def test_missing_gpu_rows_are_skipped_with_reason(tmp_path):
    """Without a GPU the cuda variants and every GPU peer appear as skipped rows that say why."""
    assert _run(QUICK_1D + ["--out", str(tmp_path)]) == 0
    recs = _load(tmp_path)["records"]
    skipped = {r["impl"]: r for r in recs if r["status"] == "skipped"}
    gpu_peers = {p.name for p in _registry.entries("conv1d", "cuda", kind="peer")}
    assert gpu_peers <= set(skipped)
    for r in skipped.values():
        assert r["note"] and r["ms_median"] is None
    cuda_variants = {f"sigconv:{v.name}" for v in _registry.entries("conv1d", "cuda", kind="variant")}
    assert cuda_variants <= set(skipped)
    md = next(tmp_path.glob("*.md")).read_text()
    assert "## Skipped" in md and "cudnn" in md


def test_quick_conv2d_custom_shapes(tmp_path):
    """conv2d records carry the NCHW fields; single-channel-only peers skip multichannel shapes."""
    rc = _run(["conv2d", "--shape", "1,1,20,33,1,3,3,1,1", "--shape", "1,2,9,11,3,2,3,2,0", "--reps", "3",
               "--budget", "0.01", "--backend", "cpu", "--out", str(tmp_path)])
    assert rc == 0
    recs = _load(tmp_path)["records"]
    assert all(REQUIRED <= set(r) and REQUIRED_2D <= set(r) for r in recs)
    timed = [r for r in recs if r["ms_median"] and r["backend"] == "cpu"]
    assert {(r["H"], r["W"], r["kH"], r["kW"], tuple(r["stride"]), tuple(r["pad"])) for r in timed} == {
        (20, 33, 3, 3, (1, 1), (1, 1)), (9, 11, 2, 3, (2, 2), (0, 0))}
    assert {"scipy", "sigconv:direct"} <= {r["impl"] for r in timed}
    for r in timed:
        assert r["C"] == r["Cin"] and r["L"] == r["H"] * r["W"] and r["K"] == r["kH"] * r["kW"]
    if GPU:
        multi = [r for r in recs if r["impl"] == "cupyx.convolve2d" and r["Cin"] == 2]
        assert multi and multi[0]["status"] == "skipped" and "single-channel" in multi[0]["note"]


def test_wrong_variant_is_fail_and_not_timed_and_wrong_peer_flagged(tmp_path, monkeypatch):
    """A variant that disagrees with the float64 reference is FAIL, untimed, and the exit code is 1;
    a peer that disagrees is timed but flagged."""
    from sigconv.backends import cpu

    monkeypatch.setattr(cpu, "corr1d_direct", lambda x, w, pad, out_len, block=None: np.zeros((x.shape[0], out_len),
                                                                                            x.dtype))
    scipy_peer = _registry.get("conv1d", "cpu", "scipy")  # the registry holds the peer's callable itself
    monkeypatch.setitem(_registry._REGISTRY, ("conv1d", "cpu", "scipy"), dataclasses.replace(
        scipy_peer, run=lambda x, w, pad, out_len: np.ones((x.shape[0], out_len), x.dtype)))
    rc = _run(["conv1d", "--quick", "--C", "1", "--L", "2000", "--K", "5", "--reps", "3", "--budget", "0.01",
               "--variants", "direct,fft", "--backend", "cpu", "--peers", "scipy", "--out", str(tmp_path)])
    assert rc == 1
    recs = {r["impl"]: r for r in _load(tmp_path)["records"] if r["backend"] == "cpu"}
    d = recs["sigconv:direct"]
    assert d["status"] == "FAIL" and d["ms_median"] is None and "first mismatch at" in d["note"]
    assert recs["sigconv:fft"]["status"] == "ok" and recs["sigconv:fft"]["ms_median"] > 0
    s = recs["scipy"]
    assert s["status"] == "flagged" and s["ms_median"] > 0 and "disagrees" in s["note"]


def test_bad_options_exit_2(tmp_path, capsys):
    """Bad option values give exit code 2 and one line naming the option."""
    assert _run(["conv1d", "--K", "0", "--out", str(tmp_path)]) == 2
    assert "--K" in capsys.readouterr().err
    assert _run(["conv2d", "--shape", "1,1,4,4", "--out", str(tmp_path)]) == 2
    assert "--shape" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_time_limit_lists_rows_as_skipped(tmp_path):
    """Past --max-seconds the remaining rows are listed as skipped, and results are still written."""
    assert _run(QUICK_1D + ["--max-seconds", "1e-9", "--out", str(tmp_path)]) == 0
    recs = _load(tmp_path)["records"]
    assert any("time limit" in r["note"] for r in recs if r["status"] == "skipped")


def test_cpu_rows_shrink_large_cases():
    """Cases too large for a CPU row are shrunk (and labelled) or refused, never run at full size."""
    c = bench.Case1D(1, 1 << 26, 4095).cpu_version()
    assert c.L < 1 << 26 and c.L >= 4 * 4095 and c.macs() <= bench.CPU_MAX_MACS and c.reduced_from == 1 << 26
    assert bench.Case1D(1, 1 << 16, 7).cpu_version().reduced_from is None
    a = [k for k in bench.default_cases_2d(False) if k.name == "A"][0].cpu_version()
    assert a.N == 1 and a.macs() <= bench.CPU_MAX_MACS and a.reduced_from == (16, 128)
    spec = bench.default_cases_2d(False, Ks=[15], names=["spec"])[0].cpu_version()
    assert spec.W < 65536 and spec.H == 1025


def test_default_sets_are_the_target_shapes():
    """Default conv1d/conv2d sets are the target shapes of the verdicts."""
    c1 = bench.default_cases_1d(False)
    assert [(c.C, c.L, c.K) for c in c1[:6]] == [(1, 1 << 26, k) for k in (7, 25, 63, 255, 1023, 4095)]
    assert (8, 1 << 23, 4095) in [(c.C, c.L, c.K) for c in c1] and (c1[-1].C, c1[-1].L, c1[-1].K) == (1, 1 << 22, 25)
    c2 = {(c.name, c.N, c.Cin, c.H, c.W, c.Cout, c.kH, c.pad) for c in bench.default_cases_2d(False)}
    assert ("spec", 1, 1, 1025, 65536, 1, 9, (4, 4)) in c2 and ("gauss", 1, 1, 1025, 65536, 1, 15, (7, 7)) in c2
    assert ("B", 1, 6, 768, 512, 6, 6, (0, 0)) in c2 and ("A", 16, 256, 128, 128, 256, 3, (1, 1)) in c2


def test_check_scales_rounding_by_the_terms_not_the_result(rng):
    """A log with a large offset (accel_z ~ 9.8) through a high-pass: the result is tiny beside its terms,
    so a correct float32 result differs from float64 by more than 1e-5 of ||ref||; the check must pass it
    (it is within the rounding of its terms) and still fail a wrong tap or an unwritten element."""
    from sigconv.engine.design import design_fir

    x = (9.8 + 1e-4 * rng.standard_normal((1, 1 << 20))).astype(np.float32)
    w = design_fir("highpass", 1.0, 100.0).astype(np.float32)
    case = bench.Case1D(1, x.shape[1], w.size)
    pad, n = case.window()
    xpad = np.zeros(x.shape[1] + w.size, np.float32)
    xpad[pad:pad + x.shape[1]] = x[0]

    def f32_kernel(w):  # what a GPU kernel does: float32 products accumulated in float32, tap by tap
        acc = np.zeros(n, np.float32)
        for j in range(w.size):
            acc += w[j] * xpad[j:j + n]
        return acc[None]

    ref = case.reference(np, (x, w))
    rounding = bench.rounding_scale(np, case, (x, w), ref, "float32")
    assert rounding()[2] == w.size and rounding() is rounding()
    y = f32_kernel(w)
    ok, err, note = bench.check_result(np, y, ref, 1e-5)
    assert not ok and err > 1e-5, f"the data no longer shows the problem (err {err:.1e})"
    ok, err2, note = bench.check_result(np, y, ref, 1e-5, rounding)
    assert ok and err2 == err and "within rounding" in note, note
    bad = y.copy()
    bad[0, 5000] += 0.01 * float(np.abs(ref).max())  # one output off by 1% of the largest output
    assert not bench.check_result(np, bad, ref, 1e-5, rounding)[0]
    w2 = w.copy()
    w2[w.size // 2 + 1] *= 1.01  # one tap next to the centre off by 1%
    assert not bench.check_result(np, f32_kernel(w2), ref, 1e-5, rounding)[0]
    shifted = np.roll(y, 1, axis=1)  # window off by one sample
    assert not bench.check_result(np, shifted, ref, 1e-5, rounding)[0]
    hole = y.copy()
    hole[0, 123] = np.nan
    ok, _, note = bench.check_result(np, hole, ref, 1e-5, rounding)
    assert not ok and "(0, 123)" in note


def test_measure_on_a_log_with_an_offset(rng):
    """The TUI's latency path (bench.measure on the loaded data, not random data) on a log with a large
    offset: every row is checked and timed, none flagged."""
    from apps.latency import signal_case_1d as _case_1d
    from sigconv.engine.design import design_fir

    x = (9.8 + 1e-3 * rng.standard_normal((2, 1 << 16))).astype(np.float32)
    taps = design_fir("highpass", 1.0, 100.0)
    records, _ = bench.measure("conv1d", _case_1d(x, taps), ("cpu",), budget=0.05, reps=3)
    assert records and all(r["status"] == "ok" and r["ms_median"] for r in records), \
        [(r["impl"], r["status"], r["note"]) for r in records]
    assert {"sigconv:auto", "scipy"} <= {r["impl"] for r in records}


def test_table_numbers_keep_their_whole_digits():
    """The markdown table's numbers: whole digits kept (30% of copy is "30", not "3"), trailing zeros of decimals
    dropped, small values to significant digits."""
    from sigconv.bench.report import _fmt

    assert [_fmt(v, 1) for v in (30.4, 20.0, 10.0, 3.0, 47.2, 100.0, 0.06)] == ["30", "20", "10", "3", "47", "100",
                                                                                "0.06"]
    assert [_fmt(v) for v in (30.0, 2.5, 1.0, 12.34, 0.4175, 0.0, None)] == ["30", "2.5", "1", "12.34", "0.417", "0",
                                                                            ""]


def _startup_module():
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module("startup")
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_startup_verdicts_and_table():
    """benchmarks/startup.py's verdicts: the warm and cold 10 s targets, and auto within 10% of the faster backend
    at every duration; the table marks the faster backend."""
    st = _startup_module()
    rows = [{"method": "fir", "duration_s": 10, "cpu_s": 0.95, "cuda_warm_s": 1.58, "cuda_cold_s": 9.3, "auto_s": 1.6,
             "auto_took": "cuda"},
            {"method": "fir", "duration_s": 3600, "cpu_s": 4.9, "cuda_warm_s": 2.5, "auto_s": 2.6, "auto_took": "cuda"},
            {"method": "spectral", "duration_s": 10, "cpu_s": 0.5, "cuda_warm_s": 0.55, "cuda_cold_s": 2.9,
             "auto_s": 0.5, "auto_took": "cpu"}]
    v = st.verdicts(rows)
    assert v == ["fir 10 s: cuda warm 1.58 s (target <= 0.6 s): FAIL",
                 "fir 10 s: cuda first run after install 9.30 s (target <= 3.0 s): FAIL",
                 "fir 10 s: auto 1.60 s (cuda) against the faster backend 0.95 s (target <= 1.1x): FAIL",
                 "fir 3600 s: auto 2.60 s (cuda) against the faster backend 2.50 s (target <= 1.1x): PASS",
                 "spectral 10 s: cuda warm 0.55 s (target <= 0.6 s): PASS",
                 "spectral 10 s: cuda first run after install 2.90 s (target <= 3.0 s): PASS",
                 "spectral 10 s: auto 0.50 s (cpu) against the faster backend 0.50 s (target <= 1.1x): PASS"]
    md = st.markdown({"device": "X", "date": "d", "repeat": 3, "rows": rows, "verdicts": v})
    assert "| fir | 10 | 0.95 | 1.58 | 9.30 | 1.60 | cuda | cpu |" in md
    assert "| fir | 3600 | 4.90 | 2.50 | - | 2.60 | cuda | cuda |" in md and md.count("FAIL") == 3


def test_startup_runs_on_the_cpu(tmp_path):
    """The script end to end on the cpu backend: a row per method and duration, files written, exit 0."""
    res = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "startup.py"), "--durations", "1", "--repeat",
                          "1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    doc = json.loads(next(tmp_path.glob("startup-*.json")).read_text())
    assert [(r["method"], r["duration_s"]) for r in doc["rows"]] == [("fir", 1), ("spectral", 1)]
    assert all(r["cpu_s"] > 0 and "cuda_warm_s" not in r for r in doc["rows"])
    assert next(tmp_path.glob("startup-*.md")).read_text().startswith("# sigconv denoise start-up")


def test_kernel_frontier_verdicts():
    """The benchmark's verdicts for the layer of article A (auto's time at most cuDNN fp32's) and for K=63 (70% of
    the copy bandwidth), from records as a run writes them."""
    from types import SimpleNamespace

    from sigconv.bench import report

    def rec(impl, ms, **kw):
        return {"impl": impl, "backend": "cuda", "status": "ok", "ms_median": ms, **kw}

    layer = dict(case="A", group="A", N=16, Cin=256, H=128, W=128)
    for auto_ms, verdict in ((6.99, "0.97x cudnn's time (target <= 1.0x): PASS"),
                             (7.30, "1.02x cudnn's time (target <= 1.0x): MISS")):
        run = SimpleNamespace(op="conv2d", records=[rec("sigconv:auto", auto_ms, **layer), rec("cudnn", 7.17, **layer)])
        assert report.verdicts(run) == [f"A: auto {auto_ms:.3f} ms vs cudnn 7.170 ms = {verdict}"]
    k63 = dict(C=1, L=1 << 26, K=63)
    run = SimpleNamespace(op="conv1d", records=[rec("sigconv:auto", 0.265, pct_copy=48.0, **k63)])
    assert "C=1 L=2^26 K=63: auto 0.265 ms = 48% of copy (target 70%): MISS" in report.verdicts(run)


def test_fused_timeline_summary_of_recorded_tiles():
    """benchmarks/fused_timeline.py's summary of FF_TIMELINE rows: two multiprocessors at 1000 MHz (1000 clocks a
    microsecond), tiles of known phases, and the gaps between a tile's end and the next tile's start on the same
    multiprocessor only (rows out of order, as blocks finish)."""
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        summarize = importlib.import_module("fused_timeline").summarize
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    rows = []
    for sm, starts in ((3, (0, 12_000, 25_000)), (7, (500, 11_500))):
        for s in starts:  # loads 1 us, first pass 2, columns 6, outputs 3 (1 before the stores): 11 us a tile
            clocks = [s, s + 1000, s + 2000, s + 8000, s + 9000, s + 11_000]
            rows.append(clocks + [sm, 10**9 + s, 10**9 + s + 11_000])  # (the timer in ns: 1 clock a ns)
    t = np.asarray(rows[::-1], dtype=np.int64)
    got = summarize(t)
    assert got["clock_mhz"] == pytest.approx(1000.0)
    assert got["span_us"] == pytest.approx(36.0)  # (0 to 25 + 11 us)
    assert got["busy"] == pytest.approx(5 * 11 / (2 * 36))
    assert got["tile_us"] == {"median": pytest.approx(11.0), "mean": pytest.approx(11.0)}
    # gaps: sm 3: 12 - 11 = 1, 25 - 23 = 2; sm 7: 11.5 - 11.5 = 0
    assert got["gap_us"]["median"] == pytest.approx(1.0) and got["gap_us"]["mean"] == pytest.approx(1.0)
    phases = {k: v["median"] for k, v in got["phases_us"].items()}
    assert phases == {"loads": pytest.approx(1.0), "first pass": pytest.approx(2.0), "columns": pytest.approx(6.0),
                      "outputs": pytest.approx(3.0), "outputs before stores": pytest.approx(1.0)}


def _benchmark_module(name: str):
    import importlib

    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))


def test_kernel_code_reads_each_functions_code_from_the_section_headers():
    """benchmarks/kernel_code.py's size of a function's code: the size of its .text.<name> section, read from an
    ELF64 file's section headers (here one made by hand: a name table, two functions' code and a data section)."""
    import struct

    text_sections = _benchmark_module("kernel_code").text_sections
    names = b"\0.shstrtab\0.text.kernel_a\0.text.kernel_b\0.nv.info\0"
    body = names + bytes(16 * 7 + 16 * 3)  # (the sections' contents: only their sizes are read)
    shoff = 64 + len(body)

    def header(name: str, offset: int, size: int) -> bytes:  # (sh_name, type, flags, addr, offset, size, ...)
        return struct.pack("<IIQQQQIIQQ", names.index(name.encode() + b"\0") if name else 0, 1, 0, 0, offset, size,
                           0, 0, 1, 0)

    sections = [header("", 0, 0), header(".shstrtab", 64, len(names)),
                header(".text.kernel_a", 64 + len(names), 16 * 7), header(".text.kernel_b", 64 + len(names), 16 * 3),
                header(".nv.info", 64, 4)]
    elf = bytearray(64)
    elf[:4] = b"\x7fELF"
    struct.pack_into("<Q", elf, 0x28, shoff)
    struct.pack_into("<HHH", elf, 0x3A, 64, len(sections), 1)
    cubin = bytes(elf) + body + b"".join(sections)
    assert text_sections(cubin) == {"kernel_a": 112, "kernel_b": 48}


def test_kernel_code_builds_a_kernel_as_the_prebuild_does(tmp_path):
    """benchmarks/kernel_code.py on the spectrum kernel of the 4096 tile: its code in whole instructions of 16 bytes,
    the registers ptxas reports for it (the pre-built index's build is the same compile), no spills on sm_90, and
    the JSON and markdown files."""
    kernel_code = _benchmark_module("kernel_code")
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import prebuild_kernels as pk

        pk.NVRTC(pk.find_nvrtc(None))
    except (SystemExit, OSError) as e:
        pytest.skip(f"no NVRTC: {e}")
    finally:
        sys.path.remove(str(ROOT / "tools"))
    expr = "conv1d_fft_fused_spectrum<12>"
    assert kernel_code.main(["--expr", expr, "--out", str(tmp_path)]) == 0
    (js,) = tmp_path.glob("kernel-code-sm_90-*.json")
    (row,) = json.loads(js.read_text())["kernels"]
    assert row["expr"] == expr and row["side"] == "tree" and row["name"].startswith("_Z25conv1d_fft_fused_spectrum")
    assert row["bytes"] > 0 and row["bytes"] % 16 == 0 and row["instructions"] == row["bytes"] // 16
    assert 16 <= row["registers"] <= 255 and row["spill_bytes"] == [0, 0]
    assert f"| `{expr}` | tree | {row['instructions']} |" in js.with_suffix(".md").read_text()


@pytest.mark.parametrize("K", [255, 1023, 4095, 7921])
def test_fused_ab_launches_a_case_on_the_launchers_block(K):
    """benchmarks/fused_ab.py's case without a block runs on the launcher's: the block the plan's kernel was chosen
    for (N/64 on the longest tile, whose kernel is bounded at that; 1024 threads there fail at launch), and the 8-byte
    loads the launcher would take on it."""
    from sigconv.backends import overlap_save as os_
    from sigconv.registry import auto

    fused_ab = _benchmark_module("fused_ab")
    L = 1 << 26
    case = fused_ab.launcher_case(os_, np.ones(K, dtype=np.float32), L)
    N = case["N"]
    assert case["block"] == auto.fused_block(K, N)
    assert case["plan"]["expr"] == os_.fused_plan(case["K"], L, 1, case["block"], tile=N, pairs=case["pairs"])["expr"]
    assert case["pairs"] == os_.fused_pairs(N, case["block"], case["K"], case["pad"], L, True)
    if N == 1 << 15:
        assert case["block"] == N // 64 and case["plan"]["expr"] == "conv1d_fft_fused<15, true, true, true>"


def test_fused_ab_times_several_new_sides_against_one_old(tmp_path):
    """benchmarks/fused_ab.py --new with several folders: the old side first, then one side each, named by its folder
    ("tree" for the working tree's), each holding its own folder's kernels; one --new keeps the name "new"."""
    import shutil

    fused_ab = _benchmark_module("fused_ab")
    ignore = shutil.ignore_patterns("prebuilt")
    for side in ("a", "b"):
        shutil.copytree(ROOT / "kernels", tmp_path / side / "kernels", ignore=ignore)
        with open(tmp_path / side / "kernels" / "fft_fused.cuh", "a") as f:
            f.write(f"\n// side {side}\n")
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    src = fused_ab.side_sources(a, [b, "tree", a + "/"])
    assert list(src) == ["old", "b", "tree", "a"]
    assert "// side a" in src["old"] and "// side a" in src["a"] and "// side b" not in src["a"]
    assert "// side b" in src["b"] and "// side a" not in src["b"]
    assert "// side" not in src["tree"] and "conv1d_fft_fused" in src["tree"]
    assert list(fused_ab.side_sources(a, [b])) == ["old", "new"]
    assert list(fused_ab.side_sources(a, None)) == ["old", "new"]
    assert "// side" not in fused_ab.side_sources(a, None)["new"]
    assert list(fused_ab.side_sources(a, [b, b])) == ["old", "b", "b'"]
