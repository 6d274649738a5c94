"""Long recordings in the terminal UI: the overview streamed once (bounded memory, exact at its resolution, cached
in sigconv's cache folder and nowhere else), zoom and pan with the window read on demand, the whole file filtered
through the engine of `sigconv denoise` into a scratch file, saved from it, cancelled cleanly."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

import sigconv

from conftest import write_audio  # noqa: E402
from tui_support import clear_device_probes, cuda_off, run_async  # noqa: E402
from tui_support import settle as _settle  # noqa: E402
from apps import overview as ov_mod  # noqa: E402
from apps.app import make_app  # noqa: E402
from apps.loading import load_signal  # noqa: E402
from apps.running import Settings, run_filter  # noqa: E402
from apps.viewport import MIN_FRAMES, READ_LIMIT, Viewport, trace, window_view  # noqa: E402

FAST = dict(backend="cpu", latency_budget=0.01, latency_reps=3, latency_frames=4096)
SIZE = (120, 36)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    """CUDA off (the same screens everywhere) and a cache folder of the test's own."""
    cuda_off(monkeypatch)
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(tmp_path / "cache"))
    yield
    clear_device_probes()


def _long_wav(path: Path, rng, seconds: int, fs: int = 48000, channels: int = 2, subtype: str = "PCM_16") -> Path:
    """A tone whose loudness changes every second, plus noise, written a minute at a time."""
    import soundfile as sf

    with sf.SoundFile(str(path), "w", fs, channels, subtype) as f:
        for s0 in range(0, seconds, 60):
            n = min(60, seconds - s0) * fs
            t = (np.arange(n) + s0 * fs) / fs
            amp = 0.1 + 0.3 * ((t.astype(int) * 7919) % 11) / 10
            x = (amp * np.sin(2 * np.pi * 440 * t))[:, None] * np.linspace(1, 0.5, channels)[None]
            f.write((x + 0.01 * rng.standard_normal((n, channels))).astype(np.float32))
    return path


@pytest.fixture
def three_minutes(tmp_path, rng):
    """3 minutes of 48 kHz stereo: 8.6 M frames, four times the longest window the views read."""
    return _long_wav(tmp_path / "long.wav", rng, 180)


# ------------------------------------------------------------------------------ the overview


def test_overview_is_exact_and_streamed(three_minutes):
    """The envelope is the min/max of every bin of the file (PCM_16 read as integers, scaled as libsndfile scales
    them), computed in blocks, in parallel parts: the peak of Python allocations is about four read blocks (4 MiB
    of PCM_16 stereo each) a thread, far below the file's 66 MiB as float32, and does not grow with the file."""
    import scipy.fft  # noqa: F401 (its import is not the overview's memory)
    import soundfile as sf

    info = sigconv.probe(three_minutes)
    tracemalloc.start()
    try:
        ov = ov_mod.compute(info)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    x, _ = sf.read(str(three_minutes), dtype="float32", always_2d=True)
    threads = len(ov_mod._parts(info.frames, ov_mod.READ_BLOCK, info.format))
    assert peak < (2 + 16 * threads) * 2**20, f"overview peak {peak / 2**20:.1f} MiB ({threads} threads)"
    B = ov.bin
    assert B == ov_mod.BIN and ov.lo.shape == (2, -(-info.frames // B))
    edges = np.arange(0, info.frames, B)
    assert np.array_equal(ov.lo, np.minimum.reduceat(x, edges, axis=0).T)
    assert np.array_equal(ov.hi, np.maximum.reduceat(x, edges, axis=0).T)
    # the envelope of any range at the bins' resolution covers the samples' extremes there
    a, b = 1_000_000, 5_000_000
    t0, lo, hi = ov.envelope(a, b, 100)
    assert lo.shape == (2, 100) and t0[0] <= a
    assert lo.min() <= x[a:b].min() and hi.max() >= x[a:b].max()
    assert ov.spec.shape == (ov_mod.N_FFT // 2 + 1, -(-info.frames // ov_mod.SPEC_STEP)) and ov.spec_step == 8192
    # the 440 Hz tone is the loudest bin of the coarse spectrogram
    f_peak = np.argmax(ov.spec.mean(axis=1)) * 48000 / ov_mod.N_FFT
    assert abs(f_peak - 440) < 48000 / ov_mod.N_FFT


def test_bin_grows_for_very_long_files():
    """At most MAX_BINS bins whatever the length: a day at 192 kHz still fits a few MB."""
    day = 192000 * 86400
    b = ov_mod.bin_size(day)
    assert -(-day // b) <= ov_mod.MAX_BINS and b // 2 >= ov_mod.BIN and -(-day // (b // 2)) > ov_mod.MAX_BINS


def test_overview_cache_lives_in_the_cache_folder(tmp_path, rng, monkeypatch):
    """The second open reads the cache (nothing recomputed), stored under sigconv.cache_dir() and nothing beside
    the recording; a changed file is computed afresh."""
    rec = tmp_path / "rec"
    rec.mkdir()
    path = write_audio(rec / "a.wav", 0.1 * rng.standard_normal((48000, 2)), fs=48000)
    before = sorted(rec.iterdir())
    first = load_signal(path)
    assert sorted(rec.iterdir()) == before, "the overview wrote beside the recording"
    cached = list((sigconv.cache_dir() / "overview").glob("*.npz"))
    assert len(cached) == 1 and sigconv.cache_dir() == tmp_path / "cache"

    def boom(*a, **k):
        raise AssertionError("recomputed a cached overview")

    monkeypatch.setattr(ov_mod, "compute", boom)
    again = load_signal(path)
    assert np.array_equal(again.overview.lo, first.overview.lo)
    monkeypatch.undo()
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(tmp_path / "cache"))
    write_audio(path, 0.5 * rng.standard_normal((48000, 2)), fs=48000)
    changed = load_signal(path)
    assert changed.overview.hi.max() > first.overview.hi.max()
    assert len(list((sigconv.cache_dir() / "overview").glob("*.npz"))) == 2


def test_overview_cancel_and_bad_samples(tmp_path, rng):
    """Cancel stops the streaming; a float file holding a NaN is refused with one line naming where."""
    import threading

    path = write_audio(tmp_path / "x.wav", 0.1 * rng.standard_normal((100_000, 1)), fs=8000)
    stop = threading.Event()
    stop.set()
    with pytest.raises(ov_mod.Cancelled):
        ov_mod.compute(sigconv.probe(path), cancel=stop)
    x = 0.1 * rng.standard_normal((100_000, 1))
    x[70_000] = np.nan
    bad = write_audio(tmp_path / "nan.wav", x, fs=8000, subtype="FLOAT")
    with pytest.raises(sigconv.InputError, match=r"nan\.wav: holds non-finite samples \(the first near frame 69632\)"):
        load_signal(bad)


# ------------------------------------------------------------------------------ the window


def test_viewport_zoom_and_pan():
    vp = Viewport.whole(1_000_000)
    assert vp.is_whole and vp.describe(1000) == "whole file, 16:40.000"
    z = vp.zoomed(2)
    assert (z.start, z.length) == (250_000, 500_000)
    assert z.panned(-1).start == 0 and z.panned(1).stop == 1_000_000  # stops at the ends
    assert z.zoomed(0.5) == vp and vp.zoomed(0.5) == vp  # no further out than the file
    tiny = vp
    for _ in range(40):
        tiny = tiny.zoomed(2)
    assert tiny.length == MIN_FRAMES and 0 <= tiny.start <= 1_000_000 - MIN_FRAMES
    hour = Viewport.whole(3600 * 48000).zoomed(4)
    assert hour.describe(48000) == "0:22:30.000-0:37:30.000 of 1:00:00.000"
    assert Viewport.whole(100).zoomed(2).length == 100  # shorter than the shortest window: all of it


def test_window_traces_read_on_demand_or_from_the_overview(three_minutes):
    """A window of at most READ_LIMIT frames is read and drawn exactly; a longer one comes from the overview."""
    sig = load_signal(three_minutes)
    vp = Viewport.whole(sig.frames)
    wide = trace(sig, vp)
    assert not wide.exact and wide.t[0] == 0
    while vp.length > READ_LIMIT:
        vp = vp.zoomed(2)
    vp = vp.panned(-0.5)
    near = trace(sig, vp, columns=50)
    x = sig.read(vp.start, vp.stop)[0]
    assert near.exact and near.lo.size == 50
    assert near.lo.min() == x.min() and near.hi.max() == x.max()
    assert abs(near.t[0] - vp.start / sig.fs) < 1e-9
    wv = window_view(sig, vp)
    assert wv.after is None and not wv.overview.exact and wv.overview.t[-1] < sig.frames / sig.fs


def test_2d_smoothing_takes_the_window(three_minutes):
    """The 2-D run smooths the spectrogram of the frames it is given (the window), not the whole file."""
    sig = load_signal(three_minutes)
    s = Settings(dimension="2d")
    res = run_filter(sig, s, span=(48000, 96000))
    assert res.span == (48000, 96000) and res.spec_before.shape == res.spec_after.shape
    assert res.spec_before.shape[1] == 1 + (48000 - 512) // 128


def test_a_recording_run_designs_its_filter_once(tmp_path, rng, monkeypatch):
    """A recording's FIR run designs the filter once (in sigconv.prepare_denoise, as `sigconv denoise` does) and
    shows those taps and their description."""
    sig = load_signal(_long_wav(tmp_path / "two.wav", rng, 2))
    assert sig.values is None  # (a recording: it streams through the engine into a scratch file)
    designs = []
    real = sigconv.FirSpec.design

    def counted(self, *args, **kwargs):
        d = real(self, *args, **kwargs)
        designs.append(d)
        return d

    monkeypatch.setattr(sigconv.FirSpec, "design", counted)
    res = run_filter(sig, Settings(), scratch=tmp_path)
    assert len(designs) == 1 and res.taps is designs[0].taps
    assert res.desc == f"{designs[0].labelled} ({designs[0].taps.size} taps)"
    assert res.output.exists()


# ------------------------------------------------------------------------------ the app


@run_async
async def test_long_recording_zoom_pan_run_save(tmp_path, three_minutes):
    """Open a long recording: the overview, then zoom and pan to a window read from the file; run: the whole file
    streams through the engine into a scratch file (not beside the recording), the window shows before and
    after; save: the scratch file's bytes, which are what `sigconv denoise` writes. The scratch folder goes with
    the app."""
    app = make_app(str(three_minutes), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        sig = app.signal
        assert sig.values is None and sig.frames == 180 * 48000
        assert app.viewport.is_whole and "(from the overview)" in str(app.query_one("#signal-note").render())
        for _ in range(3):
            await pilot.press("plus")
            await _settle(app, pilot)
        vp = app.viewport
        assert vp.length == sig.frames // 8 and vp.length <= READ_LIMIT
        note = str(app.query_one("#signal-note").render())
        assert vp.describe(sig.fs) in note and "from the overview" not in note
        await pilot.press("right_square_bracket")
        await _settle(app, pilot)
        assert app.viewport.start == vp.start + vp.length // 2
        assert app.query_one("#tabs").active == "signal"
        await pilot.press("0")
        await _settle(app, pilot)
        assert app.viewport.is_whole
        await pilot.press("minus")  # already the whole file: says so
        await pilot.pause()
        assert "cannot zoom out" in app.status_text
        await pilot.press("plus", "plus", "plus")
        await _settle(app, pilot)
        await pilot.press("r")
        await _settle(app, pilot)
        res = app.result
        scratch = app.scratch_dir()
        assert res.output.parent == scratch and scratch != three_minutes.parent
        assert (res.after.frames, res.after.channels) == (sig.frames, sig.channels)
        assert sorted(p.name for p in three_minutes.parent.iterdir()) == ["cache", "long.wav"]
        view = app.query_one("#spec-after")
        assert view.S is not None
        cli = tmp_path / "cli.wav"
        sigconv.prepare_denoise(three_minutes, cli, kernel=sigconv.KernelChoice(backend="cpu")).run()
        assert res.output.read_bytes() == cli.read_bytes()
        out = tmp_path / "saved.wav"
        await pilot.press("s")
        await pilot.pause()
        app.screen.query_one("#path-input").value = str(out)
        await pilot.press("enter")
        await _settle(app, pilot)
        assert "the run's output" in app.status_text, app.status_text
        assert out.read_bytes() == cli.read_bytes()
    assert not scratch.exists(), "the scratch folder outlived the app"


@run_async
async def test_cancel_while_loading(tmp_path, rng, monkeypatch):
    """x while a long file's overview streams: the load stops, nothing is loaded, the app is idle."""
    import threading

    path = write_audio(tmp_path / "x.wav", 0.1 * rng.standard_normal((48000 * 4, 2)), fs=48000)
    started = threading.Event()
    real = ov_mod.compute

    def slow(info, *, progress=None, cancel=None):
        def step(f):
            started.set()
            cancel.wait(5)  # until x
            progress(f)
        return real(info, progress=step, cancel=cancel)

    monkeypatch.setattr(ov_mod, "compute", slow)
    monkeypatch.setattr(ov_mod, "READ_BLOCK", 1 << 16)
    app = make_app(str(path), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        while not started.is_set():
            await pilot.pause(0.01)
        assert app.busy == "loading"
        await pilot.press("x")
        await _settle(app, pilot)
        assert app.signal is None and app.busy is None and "loading cancelled" in app.status_text


@run_async
async def test_noise_clip_from_the_window_and_the_gate_gain_view(tmp_path, three_minutes):
    """n takes the visible window as the spectral gate's noise clip (marked on the overview, named in the note),
    N drops it; the whole-file run is what `sigconv denoise --noise-from` writes, and the gain it applied shows
    as a view of its own (never above 0 dB)."""
    from apps.messages import SettingsChanged

    app = make_app(str(three_minutes), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        await pilot.press("n")  # the whole file is no noise clip
        await pilot.pause()
        assert app.settings.noise_from is None and "zoom in" in app.status_text
        app.on_settings_changed(SettingsChanged("method", "spectral"))
        assert "n takes the visible window as the noise clip" in app.status_text
        for _ in range(5):
            await pilot.press("plus")
        await pilot.press("left_square_bracket")
        await _settle(app, pilot)
        vp = app.viewport
        await pilot.press("n")
        await _settle(app, pilot)
        clip = (round(vp.start / 48000, 6), round(vp.stop / 48000, 6))
        assert app.settings.noise_from == clip and app.settings.gate.noise_from == clip
        assert "noise clip" in str(app.query_one("#signal-note").render())
        assert not app.query_one("#spec-gain").display  # no run yet
        await pilot.press("r")
        await _settle(app, pilot)
        assert "noise from" in app.result.desc, app.result.desc
        gain = app.query_one("#spec-gain")
        assert gain.display and gain.S is not None and gain.S.max() <= 0 and gain.S.min() < -0.5
        ref = tmp_path / "ref.wav"
        sigconv.prepare_denoise(three_minutes, ref, method="spectral", gate=sigconv.GateSpec(noise_from=clip),
                                kernel=sigconv.KernelChoice(backend="cpu")).run()
        assert app.result.output.read_bytes() == ref.read_bytes()
        await pilot.press("N")
        await pilot.pause()
        assert app.settings.noise_from is None and "estimates the noise" in app.status_text
