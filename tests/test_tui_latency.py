"""The TUI's latency table: the speed-up over the fastest peer, each row's share of the copy bandwidth, the
spectral gate's stages, and their exports; Pilot runs on the cpu backend and, on a GPU machine, on cuda beside
cuDNN and CuPy."""

from __future__ import annotations

import numpy as np
import pytest

import sigconv

from conftest import SAMPLES, write_audio  # noqa: E402
from sigconv.engine.spectral import gate as _gate  # noqa: E402
from tui_support import cpu_only, run_async  # noqa: E402,F401 (a fixture)
from tui_support import settle as _settle  # noqa: E402
from apps.app import make_app  # noqa: E402
from apps.latency import (LATENCY_COLUMNS, SCREEN_COLUMNS, Latency, LatencyRow, export_latency,  # noqa: E402
                          latency_csv, latency_markdown, latency_rows, latency_table, measure_latency, screen_table)
from apps.loading import load_signal  # noqa: E402
from apps.messages import SettingsChanged  # noqa: E402
from apps.running import Settings  # noqa: E402

SIZE = (120, 36)
FAST = dict(latency_budget=0.01, latency_reps=3, latency_frames=4096)
STAGE_IMPLS = [f"gate:{s}" for s in (*_gate.STAGES, "chunk")]


@pytest.fixture
def short_wav(tmp_path, rng):
    """2 s of 8 kHz noise plus a tone, stereo: short enough for the latency rows to take milliseconds."""
    t = np.arange(16000) / 8000
    x = np.stack([0.3 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 1000 * t)], axis=1)
    x += 0.05 * rng.standard_normal(x.shape)
    return write_audio(tmp_path / "short.wav", x, fs=8000)


def _rec(impl, backend, kind, ms, gbs=None, status="ok", **kw):
    return {"impl": impl, "backend": backend, "kind": kind, "block": kw.pop("block", None), "ms_median": ms,
            "gbs": gbs, "pct_copy": kw.pop("pct_copy", None), "status": status, "note": kw.pop("note", ""), **kw}


def _gpu_like_records():
    """What a cuda run gives (fixed numbers): a block sweep, cuDNN, CuPy peers (one flagged), scipy on the cpu."""
    return [
        _rec("sigconv:tiled", "cuda", "variant", 0.05, 400.0, block=256, pct_copy=10.0,
             blocks_ms={"128": 0.08, "256": 0.051, "512": 0.0625}),
        _rec("sigconv:separable", "cuda", "variant", 0.0312, 640.0),
        _rec("cudnn", "cuda", "peer", 0.2, 100.0),
        _rec("cupyx.oaconvolve", "cuda", "peer", 0.1, 200.0),
        _rec("cupyx.convolve-fft", "cuda", "peer", 0.3, 66.7),
        _rec("cupyx.ndimage.convolve1d", "cuda", "peer", 0.01, 2000.0, status="flagged", note="disagrees"),
        _rec("scipy", "cpu", "peer", 45.0, 0.44),
        _rec("cupyx.convolve-direct", "cuda", "peer", None, status="skipped", note="direct summation too slow"),
    ]


# ------------------------------------------------------------------------------ columns


def test_best_peer_speedup_and_copy_share_from_the_records():
    """x best peer divides the fastest timed baseline (a flagged peer is none), for every timed row, peers too;
    % copy is the record's pct_copy, derived for each block of a sweep from that block's GB/s, else from the
    backend's copy bandwidth."""
    rows = latency_rows(_gpu_like_records(), Settings(backend="cuda"), copy={"cuda": 4000.0, "cpu": 20.0})
    by = {(r.impl, r.block): r for r in rows}
    best = 0.1  # cupyx.oaconvolve: faster than cudnn and scipy; the flagged convolve1d does not count
    for r in rows:
        if r.ms and r.status == "ok":
            assert r.speedup["best"] == pytest.approx(best / r.ms)
            assert r.speedup["cudnn"] == pytest.approx(0.2 / r.ms) and r.speedup["scipy"] == pytest.approx(45 / r.ms)
    assert by[("sigconv:tiled", 256)].speedup["best"] == pytest.approx(2.0)
    assert by[("scipy", None)].speedup["best"] == pytest.approx(best / 45.0)
    # the sweep: the best block is the record's full timing; the others are its sweep times, GB/s scaled by time
    assert [r.block for r in rows if r.impl == "sigconv:tiled"] == [256, 512, 128]
    assert by[("sigconv:tiled", 256)].pct_copy == pytest.approx(10.0)
    assert by[("sigconv:tiled", 128)].gbs == pytest.approx(250.0)
    assert by[("sigconv:tiled", 128)].pct_copy == pytest.approx(10.0 * 0.05 / 0.08)
    # no pct_copy in the record: the backend's copy bandwidth
    assert by[("cudnn", None)].pct_copy == pytest.approx(100.0 * 100.0 / 4000.0)
    assert by[("scipy", None)].pct_copy == pytest.approx(100.0 * 0.44 / 20.0)
    assert by[("cupyx.convolve-direct", None)].pct_copy is None and not by[("cupyx.convolve-direct", None)].speedup
    lat = Latency("conv1d", "signal C=2 L=1048576 K=255", rows)
    assert lat.best_peer.impl == "cupyx.oaconvolve"
    assert sum(r.fastest for r in rows) == 1 and by[("cupyx.ndimage.convolve1d", None)].fastest  # fastest, flagged


def test_best_peer_is_scipy_when_only_scipy_ran():
    """On a machine without a GPU scipy is the only baseline: x best peer equals x scipy; no copy bandwidth, no %."""
    recs = [_rec("sigconv:fft", "cpu", "variant", 0.3, 0.4), _rec("scipy", "cpu", "peer", 0.45, 0.3),
            _rec("cudnn", "cuda", "peer", None, status="skipped", note="no usable CUDA GPU")]
    rows = latency_rows(recs, Settings())
    timed = [r for r in rows if r.ms]
    assert timed and all(r.speedup["best"] == r.speedup["scipy"] for r in timed)
    assert "cudnn" not in timed[0].speedup and all(r.pct_copy is None for r in rows)


def test_exports_carry_the_new_columns_the_device_and_the_stage_rows(tmp_path):
    """CSV and markdown: x scipy / x cudnn / x cupy kept, x best peer and % copy added; the markdown header names
    the devices, their copy bandwidth, the date and the best peer; stage rows come last with no speed-ups."""
    rows = latency_rows(_gpu_like_records(), Settings(backend="cuda"), copy={"cuda": 4000.0})
    rows += [LatencyRow(impl, "cuda", "stage", ms=0.1 * (i + 1), note="x% of the chunk")
             for i, impl in enumerate(STAGE_IMPLS)]
    lat = Latency("conv1d", "signal C=2 L=1048576 K=255", rows, date="2026-12-02T10:00:00Z",
                  device={"cuda": "NVIDIA H200", "cpu": "AMD EPYC 9654 (16 threads)"}, copy={"cuda": 4000.0},
                  stage_case="C=2 L=1048576 at 48000 Hz")
    for col in ("x scipy", "x cudnn", "x cupy", "x best peer", "% copy"):
        assert col in LATENCY_COLUMNS
    csv_lines = latency_csv(lat).splitlines()
    assert csv_lines[0] == ",".join(LATENCY_COLUMNS) + ",fastest,chosen"
    assert len(csv_lines) == len(rows) + 1
    table = latency_table(lat)
    col = {c: i for i, c in enumerate(LATENCY_COLUMNS)}
    tiled = next(cells for r, cells in zip(rows, table) if r.impl == "sigconv:tiled" and r.block == 256)
    assert tiled[col["x best peer"]] == "2.00" and tiled[col["% copy"]] == "10"
    stage_cells = table[-len(STAGE_IMPLS):]
    assert [c[col["impl"]] for c in stage_cells] == STAGE_IMPLS
    for c in stage_cells:
        assert c[col["median ms"]] and not any(c[col[k]] for k in ("x scipy", "x cudnn", "x cupy", "x best peer"))
    md = latency_markdown(lat)
    assert "- device: cuda: NVIDIA H200 (copy 4000 GB/s); cpu: AMD EPYC 9654 (16 threads)" in md
    assert "- date: 2026-12-02T10:00:00Z" in md and "(cupyx.oaconvolve/cuda, 0.1 ms)" in md
    assert "| " + " | ".join(LATENCY_COLUMNS) + " |" in md
    assert "C=2 L=1048576 at 48000 Hz" in md and "| gate:overlap-add | cuda |" in md
    out, src = tmp_path / "lat.md", tmp_path / "in.wav"
    src.write_bytes(b"")
    assert "rows" in export_latency(lat, out, source=src)
    assert out.read_text() == md


def test_screen_table_keeps_what_matters_within_80_columns(cpu_only):
    """At 80x24, with a cuda run's long peer names and a gate's stages, each row's name, block, ms, x scipy and
    x best peer fit without scrolling; the names on screen are at most 13 characters (a long one cut with "…")."""
    rows = latency_rows(_gpu_like_records(), Settings(backend="cuda"), copy={"cuda": 4000.0})
    rows += [LatencyRow(impl, "cuda", "stage", ms=0.0123 * (i + 1), note="x% of the chunk")
             for i, impl in enumerate(STAGE_IMPLS)]
    lat = Latency("conv1d", "signal C=2 L=1048576 K=255", rows, date="2026-01-01")
    assert all(len(r.screen_name) <= 13 for r in rows), [r.screen_name for r in rows]
    names = {r.impl: r.screen_name for r in rows}
    assert names["sigconv:separable"] == "separab…/cuda" and names["sigconv:tiled"] == "tiled/cuda"
    assert names["cupyx.convolve-direct"] == "cx.direct" and names["cudnn"] == "cudnn/cuda"
    assert SCREEN_COLUMNS[:5] == ("impl", "block", "ms", "x scipy", "x best")
    cells = screen_table(lat)
    assert [c[0] for c in cells[-len(STAGE_IMPLS):]] == ["g:" + s for s in (*_gate.STAGES, "chunk")]
    assert any(c[0] == "cx.ndi.conv1d" for c in cells) and any(c[0] == "cx.oaconv" for c in cells)

    @run_async
    async def check():
        from textual.widgets import DataTable

        app = make_app(str(SAMPLES / "speech_noisy.wav"), backend="cpu", **FAST, measure=lambda sig, s, **kw: lat)
        async with app.run_test(size=(80, 24)) as pilot:
            await _settle(app, pilot)
            await pilot.press("r")
            await _settle(app, pilot)
            table = app.query_one("#latency-table", DataTable)
            assert table.row_count == len(rows)
            view = table.scrollable_content_region.width
            widths = {str(c.label): c.get_render_width(table) for c in table.ordered_columns}
            assert list(widths) == list(SCREEN_COLUMNS)
            assert sum(widths[c] for c in SCREEN_COLUMNS[:5]) <= view, (widths, view)
            assert table.virtual_size.width > view  # the rest scrolls sideways

    check()


# ------------------------------------------------------------------------------ the gate's stages


@pytest.mark.parametrize("stationary", [True, False])
def test_stage_timer_changes_nothing_and_times_every_stage(rng, stationary):
    """A chunk run with the stage clock equals the chunk run without it, bit for bit; every stage (and the whole
    chunk) is timed once, > 0, and the stages fit inside the chunk."""
    fs, L = 16000, 40000
    x = (0.3 * np.sin(2 * np.pi * 440 * np.arange(L) / fs) + 0.05 * rng.standard_normal((2, L))).astype(np.float32)
    g = _gate.Gate(2, L, fs, stationary=stationary, n_std=1.5, prop_decrease=1.0, freq_smooth_hz=500,
                   time_smooth_ms=50.0, n_fft=512, hop=None, share_mask=False,
                   kernel=sigconv.KernelChoice("conv2d", "cpu", "auto", None), dtype=np.float32)
    get = _gate.array_getter(x, L, np)
    if stationary:
        g.estimate_stats(get)
    for a, b in ((0, L), (5000, 17321)):
        plain = g.run_range(get, a, b)
        clock = _gate.StageClock("cpu")
        with clock("chunk"):
            timed = g.run_range(get, a, b, timer=clock)
        assert np.array_equal(plain, timed)
        assert [m[0] for m in clock.marks] == [*_gate.STAGES, "chunk"]
        t = clock.times()
        assert all(t[s] > 0 for s in t)
        assert sum(t[s] for s in _gate.STAGES) <= t["chunk"]


def test_gate_stage_times_public(rng):
    """sigconv.gate_stage_times: the stages in order and the chunk, medians > 0; reps must be a positive int."""
    x = 0.1 * rng.standard_normal((2, 24000)).astype(np.float32)
    t = sigconv.gate_stage_times(x, 8000, backend="cpu", reps=2, n_fft=256)
    assert list(t) == [*_gate.STAGES, "chunk"] and all(v > 0 for v in t.values())
    with pytest.raises(ValueError, match="reps"):
        sigconv.gate_stage_times(x, 8000, backend="cpu", reps=0)


def test_spectral_latency_has_the_gate_stages(cpu_only, short_wav):
    """The spectral method on the cpu: after the variant and peer rows, one row per gate stage and one for the
    chunk, in order, ms > 0, no speed-ups, never the fastest; exported with the rest."""
    sig = load_signal(short_wav)
    s = Settings(method="spectral", dimension="2d", backend="cpu")
    lat = measure_latency(sig, s, budget=0.01, reps=3, max_frames=4096)
    kinds = [r.kind for r in lat.rows]
    n = len(STAGE_IMPLS)
    assert kinds[-n:] == ["stage"] * n and "stage" not in kinds[:-n]
    assert any(r.kind == "variant" and r.ms for r in lat.rows) and any(r.impl == "scipy" and r.ms for r in lat.rows)
    stages = lat.rows[-n:]
    assert [r.impl for r in stages] == STAGE_IMPLS
    assert all(r.status == "ok" and r.ms > 0 and r.backend == "cpu" and not r.speedup and not r.fastest
               for r in stages)
    assert "C=2 L=4096 at 8000 Hz" in lat.stage_case
    assert "| gate:frames+rfft | cpu |" in latency_markdown(lat)
    assert latency_csv(lat).splitlines()[-1].startswith("gate:chunk,cpu,")


def test_band_latency_has_no_stage_rows_and_a_copy_share(cpu_only, short_wav):
    """The default band-pass on the cpu: no stage rows; timed cpu rows get % copy from the cpu's copy bandwidth."""
    lat = measure_latency(load_signal(short_wav), Settings(backend="cpu"), budget=0.01, reps=3, max_frames=4096)
    assert not any(r.kind == "stage" for r in lat.rows)
    timed = [r for r in lat.rows if r.ms and r.gbs]
    assert timed and all(r.pct_copy and r.pct_copy > 0 for r in timed)
    assert lat.copy.get("cpu", 0) > 0 and "cpu" in lat.device and lat.date


# ------------------------------------------------------------------------------ Pilot


def _cell(table, row_key, column):
    i = [str(c.label) for c in table.ordered_columns].index(column)
    return str(table.get_row(row_key)[i])


@run_async
async def test_pilot_run_shows_best_peer_and_copy_columns(cpu_only, short_wav):
    """The TUI on a short WAV, r: the table has the x best and % copy columns, filled on the timed rows (scipy is
    its own best peer: 1); with the spectral method the gate's stages are the last rows."""
    from textual.widgets import DataTable

    app = make_app(str(short_wav), backend="cpu", **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        await pilot.press("r")
        await _settle(app, pilot)
        table = app.query_one("#latency-table", DataTable)
        labels = [str(c.label) for c in table.ordered_columns]
        assert "x best" in labels and "% copy" in labels
        keys = list(table.rows)
        assert len(keys) == len(app.latency.rows)
        scipy_key = keys[[r.impl for r in app.latency.rows].index("scipy")]
        assert _cell(table, scipy_key, "x best") == "1"
        assert float(_cell(table, scipy_key, "% copy")) > 0
        app.post_message(SettingsChanged("method", "spectral"))
        await pilot.pause()
        assert app.settings.method == "spectral"
        await pilot.press("r")
        await _settle(app, pilot)
        assert [r.impl for r in app.latency.rows[-len(STAGE_IMPLS):]] == STAGE_IMPLS
        names = [str(table.get_row(k)[0]).strip() for k in list(table.rows)[-len(STAGE_IMPLS):]]
        assert names == ["g:" + s for s in (*_gate.STAGES, "chunk")]
        assert "gate's stages" in str(app.query_one("#latency-note").render())


@pytest.mark.gpu
@run_async
async def test_pilot_gpu_latency_with_cudnn_and_cupy(short_wav):
    """On a GPU: the TUI on cuda, r: sigconv's cuda variants at several blocks, cuDNN and a CuPy peer, all ok and
    timed, x best peer on every timed row, % copy on the cuda rows; then the spectral method adds the gate's stages
    on cuda, in order, each > 0."""
    from textual.widgets import DataTable

    app = make_app(str(short_wav), backend="cuda", latency_budget=0.02, latency_reps=5, latency_frames=1 << 14)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        assert app.settings.backend == "cuda"
        await pilot.press("r")
        await _settle(app, pilot)
        lat = app.latency
        assert lat is not None, app.status_text
        ok = [r for r in lat.rows if r.status == "ok" and r.ms and r.ms > 0]
        ours = [r for r in ok if r.impl.startswith("sigconv:") and r.backend == "cuda"]
        assert len({r.impl for r in ours}) >= 2 and len({(r.impl, r.block) for r in ours}) > len({r.impl for r in ours})
        assert any(r.impl == "cudnn" for r in ok), [(r.impl, r.status, r.note) for r in lat.rows]
        assert any(r.impl.startswith("cupyx") for r in ok), [(r.impl, r.status, r.note) for r in lat.rows]
        assert lat.best_peer is not None
        assert all("best" in r.speedup for r in lat.rows if r.ms and r.status in ("ok", "flagged"))
        assert all(r.pct_copy and r.pct_copy > 0 for r in ok if r.backend == "cuda" and r.gbs)
        assert lat.device.get("cuda") and lat.copy.get("cuda", 0) > 0
        table = app.query_one("#latency-table", DataTable)
        assert table.row_count == len(lat.rows)
        cudnn_key = list(table.rows)[[r.impl for r in lat.rows].index("cudnn")]
        assert _cell(table, cudnn_key, "x best") and _cell(table, cudnn_key, "% copy")

        app.post_message(SettingsChanged("method", "spectral"))
        await pilot.pause()
        await pilot.press("r")
        await _settle(app, pilot)
        stages = app.latency.rows[-len(STAGE_IMPLS):]
        assert [r.impl for r in stages] == STAGE_IMPLS, [(r.impl, r.status, r.note) for r in app.latency.rows]
        assert all(r.kind == "stage" and r.backend == "cuda" and r.status == "ok" and r.ms > 0 for r in stages)
        assert any(r.impl.startswith("sigconv:") and r.backend == "cuda" and r.ms for r in app.latency.rows)


@pytest.mark.gpu
def test_stage_timer_on_cuda_changes_nothing(rng):
    """On a GPU: the chunk timed with CUDA events equals the untimed chunk; every stage > 0 ms."""
    import cupy

    fs, L = 48000, 200000
    x = (0.05 * rng.standard_normal((2, L))).astype(np.float32)
    g = _gate.Gate(2, L, fs, stationary=True, n_std=1.5, prop_decrease=1.0, freq_smooth_hz=500, time_smooth_ms=50.0,
                   n_fft=2048, hop=None, share_mask=False,
                   kernel=sigconv.KernelChoice("conv2d", "cuda", "auto", None), dtype=np.float32)
    get = _gate.array_getter(cupy.asarray(x), L, cupy)
    g.estimate_stats(get)
    plain = cupy.asnumpy(g.run_range(get, 0, L))
    clock = _gate.StageClock("cuda")
    with clock("chunk"):
        timed = cupy.asnumpy(g.run_range(get, 0, L, timer=clock))
    np.testing.assert_allclose(timed, plain, rtol=1e-6, atol=1e-7)
    t = clock.times()
    assert list(t) == [*_gate.STAGES, "chunk"] and all(v > 0 for v in t.values())
    times = sigconv.gate_stage_times(x, fs, backend="cuda", reps=3)
    assert list(times) == [*_gate.STAGES, "chunk"] and all(v > 0 for v in times.values())
