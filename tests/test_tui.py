"""The terminal UI, driven by Textual's pilot on the cpu backend at a fixed size; GPU
variants appear disabled. Snapshot tests compare SVG screenshots (pytest-textual-snapshot)."""

from __future__ import annotations

import shutil
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

import sigconv

from conftest import SAMPLES, write_audio  # noqa: E402
from tui_support import cpu_only_module, run_async  # noqa: E402,F401 (an autouse fixture)
from tui_support import settle as _settle  # noqa: E402
from apps.latency import Latency, latency_rows, latency_table  # noqa: E402
from apps.app import make_app  # noqa: E402
from apps.dialogs import ConfirmScreen, PathScreen  # noqa: E402
from apps.error_panel import ErrorPanel  # noqa: E402
from apps.messages import SettingsChanged  # noqa: E402
from apps.running import Settings, design, freq_response  # noqa: E402

SIZE = (80, 24)


FAST = dict(backend="cpu", latency_budget=0.01, latency_reps=3, latency_frames=4096)


@pytest.fixture
def short_wav(tmp_path, rng):
    """2 s of 8 kHz noise plus a tone: short enough for the latency rows to take milliseconds."""
    t = np.arange(16000) / 8000
    x = 0.3 * np.sin(2 * np.pi * 440 * t) + 0.05 * rng.standard_normal(t.size)
    return write_audio(tmp_path / "short.wav", x, fs=8000)


@run_async
async def test_load_choose_run_latency(short_wav):
    """Load a sample, choose a variant and block with the keyboard, run: the latency table has scipy and the chosen variant."""
    app = make_app(str(short_wav), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        assert app.signal is not None and app.signal.fs == 8000
        assert "2.00 s, 8000 Hz, 1 ch" in str(app.query_one("#file-info").render())
        variants = app.query_one("#variants")
        variants.focus()
        ids = [variants.get_option_at_index(i).id for i in range(variants.option_count)]
        variants.highlighted = ids.index("cpu:fft")
        await pilot.press("enter")
        await pilot.pause()
        assert app.settings.variant == "fft"
        blocks = app.query_one("#blocks")
        blocks.focus()
        blocks.highlighted = 0  # "default": the only block a cpu variant takes
        await pilot.press("enter")
        await pilot.pause()
        assert app.settings.block is None
        await pilot.press("tab", "tab")  # leave the list and the block box below it so "r" reaches the app
        await pilot.press("r")
        await _settle(app, pilot)
        after = app.result.after
        assert (after.channels, after.frames) == (app.signal.channels, app.signal.frames)
        impls = {(r.impl, r.backend) for r in app.latency.rows if r.ms}
        assert ("scipy", "cpu") in impls and ("sigconv:fft", "cpu") in impls
        chosen = [r for r in app.latency.rows if r.chosen]
        assert chosen and all(r.impl == "sigconv:fft" for r in chosen)
        assert sum(r.fastest for r in app.latency.rows) == 1
        table = app.query_one("#latency-table")
        assert table.row_count == len(app.latency.rows)
        # GPU rows are listed as not available, with the reason, not crashed on
        assert any(r.status == "not available" and r.backend == "cuda" for r in app.latency.rows)
        assert any("not available: " in " ".join(c) for c in latency_table(app.latency))


@run_async
async def test_filter_matches_cli_engine(tmp_path, short_wav):
    """A recording's run is the engine of `sigconv denoise`: its file is byte for byte what prepare_denoise writes,
    and equals sigconv.apply_fir with the CLI's taps (zero phase) within half an LSB of PCM_16."""
    app = make_app(str(short_wav), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        await pilot.press("r")
        await _settle(app, pilot)
        res = app.result
        assert res.output.parent == app.scratch_dir() and res.output.parent != short_wav.parent
        cli = tmp_path / "cli.wav"
        sigconv.prepare_denoise(short_wav, cli, kernel=sigconv.KernelChoice(backend="cpu")).run()
        assert res.output.read_bytes() == cli.read_bytes()
        ref = sigconv.apply_fir(app.signal.read().astype(np.float64), res.taps, backend="cpu")
        err = np.abs(res.after.read() - ref).max()
        assert err <= 0.5 / 32768 + 1e-6, err


@run_async
async def test_invalid_block_refused(short_wav):
    """A block the variant does not take is marked ✗ with the reason in the list; highlighting it shows the full
    reason, and choosing it (Enter, or asked for directly) is refused with that reason."""
    app = make_app(str(short_wav), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        assert app.choose_variant("fft")
        blocks = app.query_one("#blocks")
        prompts = [str(blocks.get_option_at_index(i).prompt) for i in range(blocks.option_count)]
        assert "default" in prompts[0] and "✗" not in prompts[0]
        assert len(prompts) > 1 and all("✗ no blocks" in p for p in prompts[1:])  # a cpu variant takes none
        blocks.focus()
        await pilot.press("down")  # the first ✗ block can be highlighted
        await pilot.pause()
        desc = str(app.query_one("#kernel-desc").render())
        assert blocks.highlighted == 1 and "not valid for fft (cpu): it takes no block size" in desc, desc
        await pilot.press("enter")
        await pilot.pause()
        assert app.settings.block is None and "not valid for fft (cpu)" in app.status_text
        assert any("it takes no block size" in n.message for n in app._notifications)
        assert not app.choose_block(128)
        assert app.settings.block is None
        assert "not valid for fft" in app.status_text
        await pilot.pause()
        assert any("not valid" in n.message for n in app._notifications)
        # a cuda variant cannot be chosen at all, and says why
        variants = app.query_one("#variants")
        opt = variants.get_option("cuda:tiled")
        assert opt.disabled and "CUDA disabled by SIGCONV_DISABLE_CUDA" in str(opt.prompt)
        assert not app.choose_variant("tiled") and app.settings.variant == "fft"


def test_block_reasons_name_the_blocks_a_variant_takes():
    """The picker's ✗ marks and the refusal share one rule (running.block_refusal, on sigconv.block_refusal):
    a cuda variant takes any block it launches, listed or not; one it does not launch is marked with the short
    reason, and the full one says which blocks it takes; auto says it picks its own."""
    from apps.kernel_picker import block_options
    from apps.running import block_refusal, check_choice

    s = Settings(backend="cuda", dimension="2d", variant="shfl")
    opts = {b: (prompt, why) for b, prompt, why in block_options(s)}
    assert opts[(32, 4)] == ("32x4", None) and opts[None][1] is None
    prompt, why = opts[(8, 4)]
    assert prompt == "8x4 ✗ not for shfl"
    rule = next(v["block_rule"] for v in sigconv.variants("conv2d") if v["name"] == "shfl")
    assert why == f"{sigconv.block_refusal('conv2d', 'cuda', 'shfl', (8, 4))}; shfl (cuda) takes {rule}"
    assert "bx a multiple of 32" in why
    assert block_refusal(s, 256) is None and block_refusal(s, (96, 2)) is None  # not in the list
    assert block_refusal(replace(s, variant="prefetch"), (16, 16)) is None  # nor in prefetch's
    fft = Settings(variant="fft", block=256)
    assert check_choice(fft) == block_refusal(fft, 256)[1] == ("block 256 is not valid for fft (cpu): it takes no "
                                                              "block size")
    auto = block_refusal(Settings(backend="cuda", dimension="2d"), (16, 8))
    assert auto[0] == "auto picks" and "choose a variant to choose a block" in auto[1]
    assert block_refusal(s, None) is None


def test_block_refusal_of_a_1d_cuda_variant():
    """A 1-D cuda variant takes any multiple of 32 threads up to 1024 (96 is not in the list); 48 is refused with
    sigconv's reason and the blocks it takes, by the run's check too (not the kernel choice's bare reason)."""
    from apps.running import block_refusal, check_choice

    s = Settings(backend="cuda", variant="tiled")
    assert 96 not in next(v["blocks"] for v in sigconv.variants() if v["name"] == "tiled")
    assert block_refusal(s, 96) is None
    short, full = block_refusal(s, 48)
    assert short == "not for tiled"
    assert full == ("block must be a multiple of 32 between 32 and 1024, got 48; tiled (cuda) takes any multiple of "
                    "32 threads up to 1024")
    assert check_choice(replace(s, block=48)) == full


@pytest.fixture
def gpu_listed(monkeypatch):
    """sigconv.variants as on a GPU machine (every variant available), so that the app takes the cuda backend and
    its variants; nothing runs on them."""
    real = sigconv.variants
    monkeypatch.setattr(sigconv, "variants",
                        lambda op="conv1d": [{**v, "available": True, "reason": None} for v in real(op)])


@run_async
async def test_typed_block(gpu_listed):
    """Below the block list, the variant's rule and a box for any block: Enter chooses a block the variant takes
    (96 for a 1-D cuda variant: the list then shows it chosen), refuses one it does not take with the reason and
    the blocks it takes (48; 24x4 for conv2d shfl, whose bx must be a multiple of 32) and text that is no block
    with the parse error, both keeping the block."""
    app = make_app(None, **FAST)
    async with app.run_test(size=SIZE) as pilot:
        app.gpu_reason = None  # the cuda backend can be chosen, as on a GPU machine (gpu_listed)
        app.on_settings_changed(SettingsChanged("backend", "cuda"))
        assert app.choose_variant("tiled")
        await pilot.pause()
        assert str(app.query_one("#block-rule").render()) == "tiled takes any multiple of 32 threads up to 1024"
        box = app.query_one("#block-input")
        blocks = app.query_one("#blocks")

        async def submit(text):
            box.focus()
            box.value = ""
            await pilot.press(*text, "enter")
            await pilot.pause()

        await submit("96")
        assert app.settings.block == 96 and box.value == ""
        assert "● 96" in str(blocks.get_option_at_index(blocks.highlighted).prompt)
        await submit("48")
        assert app.settings.block == 96 and box.value == "48"
        assert app.status_text.startswith("block must be a multiple of 32 between 32 and 1024, got 48; tiled (cuda) "
                                          "takes any multiple of 32")
        await submit("abc")
        assert app.settings.block == 96
        assert app.status_text == "block must be an integer such as 256 or a pair such as 32x8, got 'abc'"
        assert any("got 'abc'" in n.message for n in app._notifications)
        app.on_settings_changed(SettingsChanged("dimension", "2d"))
        assert app.choose_variant("shfl")
        await pilot.pause()
        assert "shfl takes any bx x by" in str(app.query_one("#block-rule").render())
        await submit("24x4")
        assert app.settings.block is None
        assert "needs bx a multiple of 32" in app.status_text and "shfl (cuda) takes any bx x by" in app.status_text
        await submit("256")  # an integer: the variant lays the threads out
        assert app.settings.block == 256


@run_async
async def test_latency_table_fits_and_scrolls(size=(80, 24)):
    """At 80x24 the latency table shows each row's implementation, block, time and speed-up over scipy without
    scrolling; the other columns are reached with the arrow keys in the table; the footer keys stay on screen."""
    from textual.widgets import DataTable, Footer

    app = make_app(str(SAMPLES / "speech_noisy.wav"), **FAST, measure=_fixed_latency)
    async with app.run_test(size=size) as pilot:
        await _settle(app, pilot)
        await pilot.press("r")
        await _settle(app, pilot)
        assert app.query_one("#tabs").active == "latency"
        table = app.query_one("#latency-table", DataTable)
        view = table.scrollable_content_region.width
        widths = {str(c.label): c.get_render_width(table) for c in table.ordered_columns}
        shown = list(widths)[:list(widths).index("x scipy") + 1]
        assert shown == ["impl", "block", "ms", "x scipy"]
        assert sum(widths[c] for c in shown) <= view, (widths, view)
        footer = app.query_one(Footer)
        assert footer.region.height == 1 and footer.region.bottom == size[1]
        assert "Quit" in str(app.export_screenshot()).replace("\xa0", " ")
        table.focus()
        await pilot.press("right", "right", "right")
        await pilot.pause()
        if table.virtual_size.width > view:  # the keys scroll it sideways, as far as the last column
            assert 0 < table.scroll_x <= table.max_scroll_x == table.virtual_size.width - view
        else:
            assert table.scroll_x == 0


@run_async
async def test_broken_file_shows_error_and_app_stays_usable(tmp_path, short_wav):
    """A broken file shows the error panel; loading a good file afterwards works and hides it."""
    bad = tmp_path / "broken.wav"
    bad.write_bytes(b"RIFF\x10\x00\x00\x00WAVEjunkjunkjunk")
    app = make_app(str(bad), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        panel = app.query_one(ErrorPanel)
        assert panel.display and "broken.wav" in panel.message and "cannot load" in str(panel.border_title)
        assert app.signal is None
        await pilot.press("r")  # refused politely: nothing loaded
        await pilot.pause()
        assert "load a file first" in app.status_text
        app.load(str(short_wav))
        await _settle(app, pilot)
        assert app.signal is not None and not panel.display


@run_async
async def test_csv_sensor_log_loads_and_filters():
    """The CSV sensor log loads through sigconv.read_log (rate from the timestamps) and gets the sensor-log default
    that `sigconv batch` and `sigconv denoise` apply (one rule, sigconv.default_band): the same taps, the rule
    named on screen. Setting an edge makes the band the user's."""
    from sigconv.engine.batch.filters import taps_for

    app = make_app(str(SAMPLES / "sensor_log.csv"), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        sig = app.signal
        assert sig.kind == "csv" and sig.channels == 6 and abs(sig.fs - 100) < 1e-6
        assert (app.settings.low, app.settings.high) == sigconv.default_band(sig.fs) == (0.5, 40.0)
        assert app.query_one("#low").value == "0.5" and app.query_one("#high").value == "40"
        assert "the default band-pass 0.5-40 Hz for sensor logs (rates below 8000 Hz)" in app.status_text
        await pilot.press("r")
        await _settle(app, pilot)
        assert app.result.after.read().shape == sig.values.shape and app.latency is not None
        batch_taps, batch_desc = taps_for(sigconv.FirSpec(), sig.fs)
        assert np.array_equal(app.result.taps, batch_taps)
        assert "[default for sensor logs" in app.result.desc and "[default for sensor logs" in batch_desc
        app.on_settings_changed(SettingsChanged("high", "30"))
        assert not app.settings.default_band and app.settings.fir == sigconv.FirSpec(band=(0.5, 30.0))


def test_one_default_filter_rule_for_every_front_end(tmp_path):
    """denoise (CLI and API), batch and the TUI design the same default for a low-rate recording (a sensor log by
    its rate) and for audio, and say which rule they applied."""
    from apps.running import design, filter_rule
    from sigconv.engine.batch.filters import taps_for

    for fs, kind in ((360, "log"), (16000, "recording")):
        src = write_audio(tmp_path / f"x{fs}.wav", np.sin(np.arange(4 * fs) * 0.3), fs=fs)
        job = sigconv.prepare_denoise(src, tmp_path / f"y{fs}.wav", kernel=sigconv.KernelChoice(backend="cpu"))
        want = sigconv.FirSpec().design(fs, kind)
        assert job.note == want.note and sigconv.default_rule(kind) in job.note
        tui_taps, tui_desc = design(Settings(), fs)
        assert np.array_equal(tui_taps, want.taps) and np.array_equal(taps_for(sigconv.FirSpec(), fs)[0], want.taps)
        lo, hi = sigconv.default_band(fs)
        assert f"band-pass {lo:g}-{hi:g} Hz" in job.description and f"band-pass {lo:g}-{hi:g} Hz" in tui_desc
        assert sigconv.default_rule(kind) in filter_rule(Settings(), fs)


@run_async
async def test_cancel_stops_the_run(tmp_path, rng):
    """x cancels a running filter: no result, no file left in the scratch folder, the status says cancelled and
    the app is idle again."""
    path = write_audio(tmp_path / "long.wav", 0.1 * rng.standard_normal((48000 * 30, 2)), fs=48000)
    app = make_app(str(path), **FAST, chunk_delay=0.2)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        await pilot.press("r")
        assert app.busy == "filtering", app.status_text
        await pilot.press("x")
        await _settle(app, pilot)
        assert app.result is None and app.busy is None, (app.status_text, app.busy)
        assert "cancelled" in app.status_text
        assert not list(app.scratch_dir().iterdir())


@run_async
async def test_save_refuses_overwrite_without_confirmation(tmp_path, short_wav):
    """Saving onto an existing file asks first; 'n' keeps the file, 'y' replaces it with the filtered audio."""
    import soundfile as sf

    out = tmp_path / "out.wav"
    out.write_bytes(b"keep me")
    app = make_app(str(short_wav), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        for answer in ("n", "y"):
            await pilot.press("s")
            await pilot.pause()
            assert isinstance(app.screen, PathScreen)
            app.screen.query_one("#path-input").value = str(out)
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen)
            await pilot.press(answer)
            await _settle(app, pilot)
            if answer == "n":
                assert out.read_bytes() == b"keep me"
                assert "not saved" in app.status_text
        y, fs = sf.read(str(out))
        assert fs == 8000 and y.shape[0] == 16000
        assert not list(tmp_path.glob(".out.wav.*"))  # no temporary left behind


async def _browser_listed(pilot, count: int):
    """Wait until the open browser's tree lists ``count`` entries under its root (its folder loader is a worker
    that never completes, so _settle does not apply)."""
    from textual.widgets import DirectoryTree

    tree = pilot.app.screen.query_one(DirectoryTree)
    for _ in range(200):
        if len(tree.root.children) == count:
            break
        await pilot.pause(0.02)
    await pilot.pause()
    return tree


def _browser_folder(root: Path) -> None:
    """A folder as a user has it: a recording, a sensor log, a text file, a hidden file and a subfolder."""
    shutil.copy(SAMPLES / "speech_noisy.wav", root / "speech.wav")
    shutil.copy(SAMPLES / "sensor_log.csv", root / "log.csv")
    (root / "notes.txt").write_text("not a signal")
    (root / ".hidden.wav").write_bytes(b"")
    (root / "more").mkdir()


@run_async
async def test_file_browser_lists_signals_and_opens_one(tmp_path, monkeypatch):
    """o opens the browser on the app's folder, shown under ~ for the home folder; it lists folders, audio and
    CSV logs only (no text or hidden files); Enter on a file loads it; Backspace goes up a folder; Esc closes."""
    from apps.file_browser import FileBrowserScreen

    home = tmp_path / "home"
    (home / "rec").mkdir(parents=True)
    _browser_folder(home / "rec")
    monkeypatch.setenv("HOME", str(home))
    app = make_app(None, root=str(home / "rec"), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("o")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, FileBrowserScreen)
        tree = await _browser_listed(pilot, 3)
        assert str(tree.root.label) == "~/rec" and "under ~/rec" in str(screen.query_one("#browser-title").render())
        assert sorted(str(n.label) for n in tree.root.children) == ["log.csv", "more", "speech.wav"]
        tree.cursor_line = next(n for n in tree.root.children if str(n.label) == "log.csv").line
        await pilot.press("enter")
        await pilot.pause()
        assert not isinstance(app.screen, FileBrowserScreen)
        await app.workers.wait_for_complete([w for w in app.workers if w.group == "load"])
        await pilot.pause()
        assert app.signal is not None and app.signal.kind == "csv" and app.signal.path.name == "log.csv"
        await pilot.press("o")  # again, from the same folder
        await pilot.pause()
        screen = app.screen
        tree = await _browser_listed(pilot, 3)
        await pilot.press("backspace")
        await _browser_listed(pilot, 1)
        assert str(tree.root.label) == "~" and "under ~" in str(screen.query_one("#browser-title").render())
        assert [str(n.label) for n in tree.root.children] == ["rec"]
        await pilot.press("backspace")  # above home: shown in full
        await _browser_listed(pilot, 1)
        assert str(tree.root.label) == str(tmp_path)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, FileBrowserScreen) and app.signal.path.name == "log.csv"


#: The TUI as `sigconv tui` runs it (sigconv.cli's stop signals around cli.tui.run_app), headless, saving a
#: recording whose progress callback is slowed so that the save is still writing when the test stops the process.
_SAVE_THEN_WAIT = """
import sys, time
from pathlib import Path
sys.path[:0] = [{root!r}]
from sigconv import cli
from sigconv.cli import tui
tui.apps_package()
from apps.app import make_app

app = make_app({src!r}, backend="cpu")
app._progress = lambda task: (lambda f: time.sleep(0.1))  # a slow disk: each block of the save takes 100 ms

async def pilot(p):
    await app.workers.wait_for_complete()
    await p.pause()
    app._save(Path({out!r}), False)
    print("saving", flush=True)
    while True:
        await p.pause(0.1)

with cli._stop_signals():
    try:
        tui.run_app(app, headless=True, auto_pilot=pilot)
    except KeyboardInterrupt as exc:
        print("stopped by", exc.signum, flush=True)
        sys.exit(128 + exc.signum)
"""


@pytest.mark.skipif(sys.platform == "win32", reason="SIGTERM: POSIX")
def test_sigterm_while_saving_leaves_no_output(tmp_path, rng):
    """SIGTERM while the TUI saves a recording: the process stops within seconds, the save is cancelled through
    its atomic output: no temporary file left, and no output file either (not a finished one after the stop)."""
    import os
    import signal
    import subprocess
    import time

    src = write_audio(tmp_path / "long.wav", 0.1 * rng.standard_normal((48000 * 90, 2)), fs=48000)  # 17 blocks
    out = tmp_path / "long.denoised.wav"
    driver = tmp_path / "drive.py"
    driver.write_text(_SAVE_THEN_WAIT.format(root=str(Path(__file__).resolve().parents[1]), src=str(src),
                                             out=str(out)))
    env = {**os.environ, "SIGCONV_DISABLE_CUDA": "1"}
    p = subprocess.Popen([sys.executable, str(driver)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         env=env)
    try:
        assert p.stdout.readline().strip() == "saving"
        deadline = time.monotonic() + 30
        while not list(tmp_path.glob(".long.denoised.wav.*.part")) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert list(tmp_path.glob(".long.denoised.wav.*.part")), "the save never started writing"
        p.send_signal(signal.SIGTERM)
        t0 = time.monotonic()
        rest, _ = p.communicate(timeout=30)
        stopped_in = time.monotonic() - t0
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == 128 + signal.SIGTERM, rest
    assert "stopped by 15" in rest
    assert stopped_in < 5, f"took {stopped_in:.1f} s to stop"
    assert not out.exists(), "the save finished after the stop"
    assert not list(tmp_path.glob(".long.denoised.wav.*")), "a temporary output was left behind"


@run_async
async def test_quit_when_idle_exits_at_once():
    app = make_app(None, **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert not app.is_running and not isinstance(app.screen, ConfirmScreen)


def test_quit_while_saving_asks_and_cancels(tmp_path, rng):
    """q during a save asks first: n keeps it saving; q then y cancels it and quits, and no output (nor a
    temporary file) is left once the app has ended."""
    import asyncio
    import time

    src = write_audio(tmp_path / "long.wav", 0.1 * rng.standard_normal((48000 * 90, 2)), fs=48000)
    out = tmp_path / "long.denoised.wav"
    app = make_app(str(src), **FAST)
    # a slow disk: each block of the save takes 250 ms, 4 s in all, far longer than the keys below take even on a
    # busy machine
    app._progress = lambda task: (lambda f: time.sleep(0.25))

    async def drive():
        async with app.run_test(size=SIZE) as pilot:
            await _settle(app, pilot)
            app._save(out, False)
            await pilot.pause()
            assert app.busy == "saving"
            await pilot.press("q")
            await pilot.pause()
            assert isinstance(app.screen, ConfirmScreen) and "saving is running" in app.screen.question
            await pilot.press("n")
            await pilot.pause()
            assert app.busy == "saving" and app.is_running and "not quitting" in app.status_text
            await pilot.press("q")
            await pilot.pause()
            await pilot.press("y")
            await pilot.pause()
            assert not app.is_running

    asyncio.run(drive())  # (returns once the save's worker thread has let go)
    assert not out.exists(), "the save finished after quitting"
    assert not list(tmp_path.glob(".long.denoised.wav.*")), "a temporary output was left behind"


@run_async
async def test_export_latency_csv_and_markdown(tmp_path, short_wav):
    """The latency table exports as CSV and markdown with the same rows."""
    app = make_app(str(short_wav), **FAST)
    async with app.run_test(size=SIZE) as pilot:
        await _settle(app, pilot)
        await pilot.press("r")
        await _settle(app, pilot)
        for name in ("lat.csv", "lat.md"):
            await pilot.press("e")
            await pilot.pause()
            app.screen.query_one("#path-input").value = str(tmp_path / name)
            await pilot.press("enter")
            await pilot.pause()
        csv_text = (tmp_path / "lat.csv").read_text().splitlines()
        assert csv_text[0].startswith("impl,backend,block,median ms")
        assert len(csv_text) == len(app.latency.rows) + 1
        md = (tmp_path / "lat.md").read_text()
        assert "| scipy | cpu |" in md or "| **scipy** | **cpu** |" in md


# ------------------------------------------------------------------------------ snapshots


def _fixed_latency(sig, s, **kw):
    """Deterministic latency rows (what a run would give), so the latency snapshot does not depend on timing."""
    recs = [
        {"impl": "sigconv:direct", "backend": "cpu", "kind": "variant", "block": None, "ms_median": 0.9,
         "gbs": 0.14, "status": "ok", "note": ""},
        {"impl": "sigconv:fft", "backend": "cpu", "kind": "variant", "block": None, "ms_median": 0.3,
         "gbs": 0.42, "status": "ok", "note": ""},
        {"impl": "scipy", "backend": "cpu", "kind": "peer", "block": None, "ms_median": 0.45, "gbs": 0.28,
         "status": "ok", "note": ""},
        {"impl": "sigconv:tiled", "backend": "cuda", "kind": "variant", "block": None, "ms_median": None,
         "gbs": None, "status": "skipped", "note": "no usable CUDA GPU"},
        {"impl": "cudnn", "backend": "cuda", "kind": "peer", "block": None, "ms_median": None, "gbs": None,
         "status": "skipped", "note": "torch is not installed"},
    ]
    return Latency("conv1d", "signal C=1 L=4096 K=33", latency_rows(recs, s), date="2026-01-01")


def _steady(pilot):
    """Cursor blink off and focus on the tab bar, so the screenshot does not depend on timing (focusing a widget
    of another tab would bring that tab to the front); every spectrogram shown as the same ramp of its own shape,
    so that it does not depend on the machine: its cells are FFT and gate results, whose last bits differ between
    CPUs and library builds and move a cell's colour by one step (the tests above check those values)."""
    from textual.widgets import Tabs

    from apps.signal_view import Spectrogram

    for w in pilot.app.query("Input"):
        w.cursor_blink = False
    for sp in pilot.app.query(Spectrogram):
        if sp.S is not None:
            F, T = sp.S.shape
            sp.set_data(np.add.outer(np.linspace(0.0, 0.5, F), np.linspace(0.0, 0.5, T)), (0.0, 1.0))
    pilot.app.query_one("#tabs").query_one(Tabs).focus()


@pytest.mark.parametrize("method", ["band", "low", "high"])
def test_frequency_response_shows_the_whole_filter(method):
    """The response the signal view plots, for the default settings at 48 kHz (the band-pass has 7,921 taps):
    0 dB within 0.1 dB across the passband, below -40 dB in the stopband, the edges marked where they are."""
    s = Settings(method=method)
    fs = 48000.0
    taps, _ = design(s, fs)
    f, db = freq_response(taps, fs)
    tw = 0.25 * min(s.edges)  # the design's transition width: 25% of the lowest edge
    lo, hi = {"band": (s.low, s.high), "low": (-np.inf, s.high), "high": (s.low, np.inf)}[method]
    passband = (f >= lo + tw) & (f <= hi - tw)
    stopband = (f <= lo - tw) | (f >= hi + tw)
    assert passband.sum() >= 100 and stopband.sum() >= 20, (passband.sum(), stopband.sum())
    assert np.abs(db[passband]).max() <= 0.1, f"passband gain off 0 dB by {np.abs(db[passband]).max():.3f} dB"
    assert db[stopband].max() < -40, f"stopband reaches {db[stopband].max():.1f} dB"
    if method == "band":
        assert taps.size == 7921
    assert s.edges == {"band": (s.low, s.high), "low": (s.high,), "high": (s.low,)}[method]
    assert np.all(np.diff(np.log(f)) > 0) and f[-1] == fs / 2


# the 80-column screen by default (the tighter layout); the wide one with --runslow
SNAP_SIZES = [pytest.param((80, 24), id="80x24"), pytest.param((120, 36), id="120x36", marks=pytest.mark.slow)]


@pytest.mark.parametrize("size", SNAP_SIZES)
def test_snapshot_kernel_screen(snap_compare, size):
    """Snapshot: the main screen after loading a sample (controls, kernel picker with the ✗ blocks and their
    reasons, footer)."""
    app = make_app(str(SAMPLES / "speech_noisy.wav"), **FAST)

    async def run_before(pilot):
        await _settle(pilot.app, pilot)
        _steady(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SNAP_SIZES)
def test_snapshot_signal_screen(snap_compare, size):
    """Snapshot: the signal view after a run, zoomed in once: the whole file with the window marked, the window's
    waveform and spectrograms before and after, the frequency response below (scrolled to)."""
    app = make_app(str(SAMPLES / "speech_noisy.wav"), **FAST, measure=_fixed_latency)

    async def run_before(pilot):
        await _settle(pilot.app, pilot)
        await pilot.press("r")
        await _settle(pilot.app, pilot)
        await pilot.press("plus")
        await _settle(pilot.app, pilot)
        assert pilot.app.query_one("#tabs").active == "signal"
        _steady(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SNAP_SIZES)
def test_snapshot_spectral_gate_with_noise_clip(snap_compare, size):
    """Snapshot: the signal view after the spectral gate, its noise clip the first quarter of the file (n on a
    zoomed window, marked on the overview), scrolled to the gate's gain view."""
    app = make_app(str(SAMPLES / "speech_noisy.wav"), **FAST, measure=_fixed_latency)

    async def run_before(pilot):
        await _settle(pilot.app, pilot)
        pilot.app.query_one("#method").value = "spectral"  # as the Method list does
        await pilot.pause()
        assert pilot.app.settings.method == "spectral"
        await pilot.press("plus", "plus", *["left_square_bracket"] * 4, "n")
        await _settle(pilot.app, pilot)
        assert pilot.app.settings.noise_from == (0.0, 2.5)
        await pilot.press("r")
        await _settle(pilot.app, pilot)
        await pilot.press("0")
        await _settle(pilot.app, pilot)
        gain = pilot.app.query_one("#spec-gain")
        assert gain.display
        gain.scroll_visible(animate=False)
        _steady(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SNAP_SIZES)
def test_snapshot_latency_screen(snap_compare, size):
    """Snapshot: the latency table and bar chart (fixed timings), fastest highlighted, missing baselines listed;
    at 80x24 the table's first columns and the footer on screen."""
    app = make_app(str(SAMPLES / "speech_noisy.wav"), **FAST, measure=_fixed_latency)

    async def run_before(pilot):
        await _settle(pilot.app, pilot)
        await pilot.press("r")
        await _settle(pilot.app, pilot)
        _steady(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SNAP_SIZES)
def test_snapshot_error_panel(snap_compare, tmp_path, monkeypatch, size):
    """Snapshot: the error panel after loading a broken file (a relative path, so the message is stable)."""
    monkeypatch.chdir(tmp_path)
    Path("broken.wav").write_bytes(b"not audio at all")
    app = make_app("broken.wav", **FAST)

    async def run_before(pilot):
        await _settle(pilot.app, pilot)
        _steady(pilot)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SNAP_SIZES)
def test_snapshot_file_browser(snap_compare, tmp_path, monkeypatch, size):
    """Snapshot: the file browser on a folder under the home folder (shown as ~): folders, audio and CSV logs."""
    _browser_folder(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    app = make_app(None, root=str(tmp_path), **FAST)

    async def run_before(pilot):
        await pilot.press("o")
        await pilot.pause()
        await _browser_listed(pilot, 4)

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("dialog", ["save", "overwrite"])
@pytest.mark.parametrize("size", SNAP_SIZES)
def test_snapshot_dialogs(snap_compare, tmp_path, monkeypatch, size, dialog):
    """Snapshot: the save dialog with its default path, and the overwrite question when that file exists
    (the sample copied under a relative path, so both texts are stable)."""
    monkeypatch.chdir(tmp_path)
    shutil.copy(SAMPLES / "speech_noisy.wav", "speech_noisy.wav")
    if dialog == "overwrite":
        Path("speech_noisy.denoised.wav").write_bytes(b"keep me")
    app = make_app("speech_noisy.wav", **FAST)

    async def run_before(pilot):
        await _settle(pilot.app, pilot)
        await pilot.press("s")
        await pilot.pause()
        assert isinstance(pilot.app.screen, PathScreen)
        assert pilot.app.screen.query_one("#path-input").value == "speech_noisy.denoised.wav"
        pilot.app.screen.query_one("#path-input").cursor_blink = False
        if dialog == "overwrite":
            await pilot.press("enter")
            await pilot.pause()
            assert isinstance(pilot.app.screen, ConfirmScreen)
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)
    if dialog == "overwrite":
        assert Path("speech_noisy.denoised.wav").read_bytes() == b"keep me"  # only asked, nothing written
