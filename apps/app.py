"""The sigconv TUI application and its factory, ``make_app`` (shared by ``sigconv tui`` and the tests)."""

from __future__ import annotations

import tempfile
import threading
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from pathlib import Path
from typing import Callable, Optional

from rich.markup import escape
from textual import work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.css.query import NoMatches
from textual.widgets import Footer, ProgressBar, Static, TabbedContent, TabPane

import sigconv

from .controls import ControlPanel
from .dialogs import ConfirmScreen, PathScreen
from .error_panel import ErrorPanel
from .file_browser import FileBrowserScreen
from .kernel_picker import KernelPicker
from .latency import Latency, export_latency, measure_latency
from .latency_view import LatencyView
from .loading import Signal, load_signal
from .messages import (FileLoaded, JobCancelled, JobFailed, LatencyReady, LoadFailed, Progress, RunFinished, Saved,
                       SettingsChanged, ViewReady)
from .overview import Cancelled as OverviewCancelled
from .running import (CancelledError, RunResult, Settings, check_choice, check_output, default_output, filter_rule,
                      fit_band, run_filter, save_output)
from .signal_view import SignalView
from .viewport import READ_LIMIT, Viewport, window_view

TABS = ("kernel", "signal", "latency")


class SigconvApp(App):
    """Load a recording, pick method / backend / variant / block, run, compare latency, save."""

    CSS_PATH = "sigconv.tcss"
    TITLE = "sigconv"
    BINDINGS = [
        Binding("o", "open", "Open"),
        Binding("r", "run", "Run"),
        Binding("x", "cancel", "Cancel"),
        Binding("s", "save", "Save"),
        Binding("e", "export", "Export"),
        Binding("t", "next_tab", "Tab"),
        # the signal view's window (its keys are named there: the footer keeps to what fits in 80 columns)
        Binding("plus,equals_sign", "zoom(2)", "Zoom in", show=False),
        Binding("minus", "zoom(0.5)", "Zoom out", show=False),
        Binding("left_square_bracket", "pan(-0.5)", "Pan left", show=False),
        Binding("right_square_bracket", "pan(0.5)", "Pan right", show=False),
        Binding("0", "view_whole", "Whole file", show=False),
        Binding("n", "noise_clip", "Noise clip", show=False),
        Binding("N", "noise_clip(False)", "No noise clip", show=False),
        Binding("escape", "dismiss_error", "Dismiss", show=False),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(self, path: Optional[str] = None, *, backend: str = "auto", root: Optional[str] = None,
                 latency_budget: float = 0.2, latency_reps: int = 50, latency_frames: int = 1 << 20,
                 chunk_frames: int = 1 << 16, chunk_delay: float = 0.0,
                 measure: Optional[Callable] = None) -> None:
        super().__init__()
        # the file starts streaming now, while the GPU probe below imports CuPy (a second on a GPU machine)
        self._preload: Optional[tuple] = self._start_preload(path) if path else None
        self.gpu_reason = sigconv.cuda_reason()
        if backend == "auto":
            backend = "cpu" if self.gpu_reason else "cuda"
        self.settings = Settings(backend=backend)
        self.initial_path = path
        self.root = Path(root) if root else (Path(path).resolve().parent if path else Path.cwd())
        self.latency_opts = dict(budget=latency_budget, reps=latency_reps, max_frames=latency_frames)
        self.chunk_frames, self.chunk_delay = chunk_frames, chunk_delay
        self.measure = measure or measure_latency
        self.signal: Optional[Signal] = None
        self.result: Optional[RunResult] = None
        self.latency: Optional[Latency] = None
        self.cancel_event = threading.Event()
        self.busy: Optional[str] = None  # task running now
        self.status_text = ""
        self.viewport: Optional[Viewport] = None  # the signal view's window
        self._scratch: Optional[tempfile.TemporaryDirectory] = None  # runs of a recording write their file there

    # ------------------------------------------------------------------ layout

    def compose(self) -> ComposeResult:
        yield Static("No file loaded: press o to open one.", id="file-info")
        yield ErrorPanel(id="error-panel")
        with Horizontal(id="main"):
            backends = [("cpu", "cpu"),
                        ("cuda" if not self.gpu_reason else "cuda (not available)", "cuda")]
            yield ControlPanel(self.settings, backends, id="controls")
            with TabbedContent(id="tabs", initial="kernel"):
                with TabPane("Kernel", id="kernel"):
                    yield KernelPicker(self.settings, self.gpu_reason, id="picker")
                with TabPane("Signal", id="signal"):
                    yield SignalView(id="signal-view")
                with TabPane("Latency", id="latency"):
                    yield LatencyView(id="latency-view")
        with Horizontal(id="status-bar"):
            yield ProgressBar(total=1.0, show_eta=False, id="progress")
            yield Static("ready", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(ErrorPanel).display = False
        if self.gpu_reason:
            self.set_status(f"cpu backend (no GPU: {self.gpu_reason.split('(')[0].strip()})")
        if self.initial_path:
            self.load(self.initial_path)

    # ------------------------------------------------------------------ helpers

    def set_status(self, text: str) -> None:
        self.status_text = text
        self.query_one("#status", Static).update(escape(text))

    def show_error(self, title: str, message: str) -> None:
        self.query_one(ErrorPanel).show_error(title, message)
        self.set_status(f"{title}: {message}")

    def refuse(self, message: str) -> None:
        """A choice that cannot be made: say why, keep the previous choice."""
        self.notify(message, title="refused", severity="warning")
        self.set_status(message)

    def _start(self, task: str) -> bool:
        if self.busy:
            self.refuse(f"{self.busy} is running; cancel it (x) first")
            return False
        self.busy = task
        self.cancel_event = threading.Event()
        self.query_one("#progress", ProgressBar).update(progress=0)
        self.set_status(f"{task}...")
        return True

    def _progress(self, task: str) -> Callable[[float], None]:
        """A worker's progress callback: posts at most one Progress a percent (and the end), so that a stream of
        small blocks does not keep the screen redrawing while the worker needs the cores."""
        last = [-1.0]
        lock = threading.Lock()

        def report(f: float) -> None:
            f = float(f)
            with lock:  # (a load's parts report from several threads)
                if f < 1.0 and f - last[0] < 0.01:
                    return
                last[0] = f
            self.post_message(Progress(task, f))

        return report

    # ------------------------------------------------------------------ loading

    def load(self, path: str) -> None:
        if self._start("loading"):
            self._load_worker(path)

    def _start_preload(self, path: str) -> tuple:
        """Load ``path`` in a thread of its own from the app's construction on; the first load of that path takes
        its result (:meth:`_load_worker`). Returns (path, future, cancel event, [fraction done])."""
        fut: Future = Future()
        cancel, done = threading.Event(), [0.0]

        def run() -> None:
            try:
                fut.set_result(load_signal(path, progress=lambda f: done.__setitem__(0, f), cancel=cancel))
            except BaseException as exc:  # noqa: BLE001 (handed to the load worker)
                fut.set_exception(exc)

        threading.Thread(target=run, name="sigconv-preload", daemon=True).start()
        return path, fut, cancel, done

    def _preloaded(self, path: str, cancel: threading.Event, progress: Callable[[float], None]) -> Optional[Signal]:
        """The preloaded signal of ``path`` once it is ready (progress relayed, cancel passed on); None when the
        preload was of another path (or already taken)."""
        pre, self._preload = self._preload, None
        if pre is None or pre[0] != path:
            if pre is not None:
                pre[2].set()
            return None
        _, fut, pre_cancel, done = pre
        while True:
            if cancel.is_set():
                pre_cancel.set()
            try:
                return fut.result(timeout=0.05)
            except FutureTimeout:
                progress(done[0])

    @work(thread=True, exclusive=True, group="load")
    def _load_worker(self, path: str) -> None:
        try:
            progress = self._progress("loading")
            sig = self._preloaded(path, self.cancel_event, progress)
            if sig is None:
                sig = load_signal(path, progress=progress, cancel=self.cancel_event)
            self.post_message(FileLoaded(sig))
        except OverviewCancelled:
            self.post_message(JobCancelled("loading"))
        except sigconv.InputError as exc:
            self.post_message(LoadFailed(path, str(exc)))
        except Exception as exc:  # noqa: BLE001 (anything else: one line, app stays up)
            self.post_message(LoadFailed(path, f"{type(exc).__name__}: {exc}".splitlines()[0]))

    def on_file_loaded(self, msg: FileLoaded) -> None:
        self.busy = None
        sig = msg.signal
        self._drop_result()
        self.signal, self.latency = sig, None
        self.viewport = Viewport.whole(sig.frames)
        self.query_one(ErrorPanel).clear()
        self.query_one("#file-info", Static).update(escape(sig.summary()))
        s = fit_band(self.settings, sig.fs)
        if s != self.settings:
            self.settings = s
            panel = self.query_one(ControlPanel)
            for name in ("low", "high", "notch"):
                panel.set_value(name, getattr(s, name))
        self.query_one(SignalView).show_signal(sig)
        self._update_view()
        self.query_one("#progress", ProgressBar).update(progress=1.0)
        self.set_status(f"loaded {sig.path.name}; {filter_rule(self.settings, sig.fs)}")

    def on_load_failed(self, msg: LoadFailed) -> None:
        self.busy = None
        self.query_one("#progress", ProgressBar).update(progress=0)
        self.show_error("cannot load", msg.error)

    # ------------------------------------------------------------------ settings

    def on_settings_changed(self, msg: SettingsChanged) -> None:
        name, value = msg.name, msg.value
        s = self.settings
        try:
            if name in ("low", "high", "notch", "strength"):
                v = float(value)
                if name == "strength" and not 0 <= v <= 1:
                    raise ValueError("strength must be between 0 and 1")
                if name != "strength" and not v > 0:
                    raise ValueError(f"{name} must be a positive frequency in Hz")
                if self.signal is not None and name != "strength" and not v < self.signal.fs / 2:
                    raise ValueError(f"{name} must be below Nyquist ({self.signal.fs / 2:g} Hz)")
                new = replace(s, **{name: v})
                if name in ("low", "high") and v != getattr(s, name):
                    new = replace(new, default_band=False)  # the user's band from now on
            elif name == "smooth":
                k = int(value)
                if not 1 <= k <= 31 or k % 2 == 0:
                    raise ValueError("2D k must be an odd integer from 1 to 31")
                new = replace(s, smooth=k)
            elif name == "method":
                new = replace(s, method=value)
                if value == "spectral" and s.dimension != "2d":  # its mask is smoothed by conv2d
                    new = replace(new, dimension="2d", variant="auto", block=None)
            elif name == "backend":
                if value == "cuda" and self.gpu_reason:
                    raise ValueError(f"cuda backend not available: {self.gpu_reason}")
                new = replace(s, backend=value, variant="auto", block=None)
            elif name == "dimension":
                new = replace(s, dimension=value, variant="auto", block=None)
            elif name == "variant":
                be, _, vname = str(value).partition(":")
                if be != s.backend:
                    raise ValueError(f"variant {vname} runs on the {be} backend; the backend is {s.backend}")
                new = replace(s, variant=vname, block=None)
            elif name == "block":  # a block of the picker's list, or the text typed below it ("96", "24x4")
                new = replace(s, block=sigconv.parse_block(value) if isinstance(value, str) else value)
            else:
                return
            why = check_choice(new)
            if why:
                raise ValueError(why)
        except ValueError as exc:
            self.refuse(str(exc).splitlines()[0])
            panel = self.query_one(ControlPanel)
            if name in ("low", "high", "notch", "strength", "smooth", "method", "backend", "dimension"):
                panel.set_value(name, getattr(s, name))
            return
        if new != s:
            self._apply(new)

    def _apply(self, new: Settings) -> None:
        old, self.settings = self.settings, new
        panel = self.query_one(ControlPanel)
        if new.dimension != old.dimension:
            panel.set_value("dimension", new.dimension)
        self.query_one(KernelPicker).refresh_lists(new)
        self.set_status(f"{new.op}: variant {new.variant} ({new.backend}), block {sigconv.format_block(new.block)}"
                        + ("; n takes the visible window as the noise clip" if new.method == "spectral"
                           and old.method != "spectral" else ""))

    def choose_variant(self, name: str) -> bool:
        """Choose a variant of the current backend (the picker does this on Enter); False if refused."""
        before = self.settings
        self.on_settings_changed(SettingsChanged("variant", f"{self.settings.backend}:{name}"))
        return self.settings != before or name == before.variant

    def choose_block(self, block) -> bool:
        """Choose a block size; refused with a message when the variant does not accept it."""
        before = self.settings
        self.on_settings_changed(SettingsChanged("block", block))
        return self.settings.block == block and (self.settings != before or before.block == block)

    # ------------------------------------------------------------------ run

    def action_run(self) -> None:
        if self.signal is None:
            self.refuse("load a file first (o)")
            return
        if self._start("filtering"):
            self.query_one(ErrorPanel).clear()
            self._run_worker(self.signal, self.settings, self.cancel_event, self._span())

    @work(thread=True, exclusive=True, group="run")
    def _run_worker(self, sig, s, cancel, span) -> None:
        try:
            res = run_filter(sig, s, scratch=self.scratch_dir(), span=span, progress=self._progress("filtering"),
                             cancel=cancel, chunk_frames=self.chunk_frames, chunk_delay=self.chunk_delay)
            self.post_message(RunFinished(res))
            self.post_message(Progress("timing", 0.0))
            lat = self.measure(sig, s, cancel=cancel, **self.latency_opts)
            self.post_message(LatencyReady(lat))
        except CancelledError:
            self.post_message(JobCancelled("run"))
        except Exception as exc:  # noqa: BLE001
            self.post_message(JobFailed("run", f"{type(exc).__name__}: {exc}".splitlines()[0]
                                        if not isinstance(exc, ValueError) else str(exc).splitlines()[0]))

    def on_progress(self, msg: Progress) -> None:
        if self.busy:
            self.query_one("#progress", ProgressBar).update(progress=msg.fraction)
            if msg.task == "timing":
                self.busy = "timing"
                self.set_status("timing every variant and block (x to cancel)...")

    def on_run_finished(self, msg: RunFinished) -> None:
        if self.result is not None and self.result.output is not None and self.result.output != msg.result.output:
            self.result.output.unlink(missing_ok=True)
        self.result = msg.result
        if self.signal is not None:
            self.query_one(SignalView).show_result(self.signal, msg.result)
            self._update_view()
        self.set_status(f"filtered: {msg.result.desc}; timing...")

    def on_latency_ready(self, msg: LatencyReady) -> None:
        self.busy = None
        self.latency = msg.latency
        self.query_one(LatencyView).show(msg.latency)
        self.query_one("#progress", ProgressBar).update(progress=1.0)
        self.query_one(TabbedContent).active = "latency"
        fastest = next((r for r in msg.latency.rows if r.fastest), None)
        self.set_status(f"done: {self.result.desc if self.result else ''}"
                        + (f"; fastest {fastest.short_label}" if fastest else ""))

    def on_job_failed(self, msg: JobFailed) -> None:
        if msg.task != "view":  # a window that could not be read stops nothing
            self.busy = None
        self.show_error(f"{msg.task} failed", msg.error)

    def on_job_cancelled(self, msg: JobCancelled) -> None:
        self.busy = None
        self.query_one("#progress", ProgressBar).update(progress=0)
        self.set_status(f"{msg.task} cancelled")
        self.notify(f"{msg.task} cancelled")

    async def action_quit(self) -> None:
        """q: quit; while a job runs, ask first. Yes cancels it (a save leaves no output) and quits (the process
        ends once its worker thread has let go); No keeps it running."""
        if not self.busy:
            self.exit()
            return
        task = self.busy

        def answer(yes: Optional[bool]) -> None:
            if yes:
                self.cancel_running()
                self.exit()
            else:
                self.set_status(f"still {task}: not quitting")

        self.push_screen(ConfirmScreen(f"{task} is running. Cancel it and quit?"), answer)

    def cancel_running(self) -> None:
        """Tell the running job (run, save) to stop, as ``x`` does; for the process's way out (SIGTERM or SIGHUP,
        see ``sigconv.cli.tui.run_app``): its worker thread unwinds at its next block, a save through its atomic
        output (the temporary file removed, nothing written). Safe from a signal handler: it sets an event."""
        if self.busy and self.cancel_event is not None:
            self.cancel_event.set()

    def action_cancel(self) -> None:
        if not self.busy:
            self.set_status("nothing to cancel")
            return
        self.cancel_event.set()
        self.set_status(f"cancelling {self.busy}...")

    # ------------------------------------------------------------------ save / export

    def action_save(self) -> None:
        if self.signal is None:
            self.refuse("load a file first (o)")
            return
        if self.busy:
            self.refuse(f"{self.busy} is running; cancel it (x) first")
            return
        default = default_output(self.signal, self.settings)
        self.push_screen(PathScreen("Save the filtered output to:", str(default)), self._save_to)

    def _save_to(self, path: Optional[str]) -> None:
        if not path:
            self.set_status("save cancelled")
            return
        out = Path(path).expanduser()
        try:
            check_output(self.signal, out)
        except (ValueError, sigconv.OutputError) as exc:
            self.show_error("cannot save", str(exc))
            return
        if out.exists():
            def answer(yes: Optional[bool]) -> None:
                if yes:
                    self._save(out, True)
                else:
                    self.set_status(f"not saved: {out} exists and was kept")
                    self.notify(f"{out.name} exists: not overwritten", severity="warning")

            self.push_screen(ConfirmScreen(f"{out} exists. Overwrite it?"), answer)
        else:
            self._save(out, False)

    def _save(self, out: Path, overwrite: bool) -> None:
        if self._start("saving"):
            self._save_worker(self.signal, self.settings, out, overwrite, self.result, self.cancel_event,
                              self._span())

    @work(thread=True, exclusive=True, group="save")
    def _save_worker(self, sig, s, out, overwrite, result, cancel, span) -> None:
        try:
            msg = save_output(sig, s, out, overwrite=overwrite, result=result, span=span,
                              progress=self._progress("saving"), cancel=cancel)
            self.post_message(Saved(msg))
        except CancelledError:
            self.post_message(JobCancelled("save"))
        except (sigconv.InputError, sigconv.OutputError, ValueError) as exc:
            self.post_message(JobFailed("save", str(exc).splitlines()[0]))
        except Exception as exc:  # noqa: BLE001
            self.post_message(JobFailed("save", f"{type(exc).__name__}: {exc}".splitlines()[0]))

    def on_saved(self, msg: Saved) -> None:
        self.busy = None
        self.query_one("#progress", ProgressBar).update(progress=1.0)
        self.set_status(msg.summary)
        self.notify(msg.summary, title="saved")

    def action_export(self) -> None:
        if self.latency is None:
            self.refuse("no latency table yet: run first (r)")
            return
        stem = self.signal.path.stem if self.signal else "sigconv"
        default = (self.signal.path.parent if self.signal else Path.cwd()) / f"{stem}.latency.md"
        self.push_screen(PathScreen("Export the latency table (.csv or .md):", str(default)), self._export_to)

    def _export_to(self, path: Optional[str]) -> None:
        if not path:
            return
        out = Path(path).expanduser()

        def write(overwrite: bool) -> None:
            try:
                self.set_status(export_latency(self.latency, out, source=self.signal.path, overwrite=overwrite))
            except (ValueError, sigconv.OutputError) as exc:
                self.show_error("cannot export", str(exc))

        if out.exists() and not out.is_dir():
            self.push_screen(ConfirmScreen(f"{out} exists. Overwrite it?"),
                             lambda yes: write(True) if yes else self.set_status(f"not exported: {out} kept"))
        else:
            write(False)

    # ------------------------------------------------------------------ the signal view's window

    def _span(self) -> Optional[tuple]:
        """The frames a 2-D smoothing run takes: the window's first READ_LIMIT."""
        if self.viewport is None:
            return None
        vp = self.viewport
        return vp.start, min(vp.stop, vp.start + READ_LIMIT)

    def action_zoom(self, factor: float) -> None:
        self._move(lambda vp: vp.zoomed(factor), "zoom in" if factor > 1 else "zoom out")

    def action_pan(self, fraction: float) -> None:
        self._move(lambda vp: vp.panned(fraction), "pan")

    def action_view_whole(self) -> None:
        self._move(lambda vp: Viewport.whole(vp.frames), "show the whole file")

    def action_noise_clip(self, use: bool = True) -> None:
        """n: the visible window is the spectral gate's noise clip (it should hold only noise); N: none, the
        noise estimated from the whole signal."""
        if self.signal is None or self.viewport is None:
            self.refuse("load a file first (o)")
            return
        vp, fs = self.viewport, self.signal.fs
        clip = (round(vp.start / fs, 6), round(vp.stop / fs, 6)) if use else None
        if use and vp.is_whole:
            self.refuse("zoom in (+) to a stretch of noise alone first: n makes the window the noise clip")
            return
        self._apply(replace(self.settings, noise_from=clip))
        self.set_status(f"noise clip {vp.describe(fs)}; the spectral gate's floor comes from it (N: none)" if use
                        else "no noise clip: the spectral gate estimates the noise from the whole signal")
        self._update_view()

    def _move(self, how: Callable[[Viewport], Viewport], what: str) -> None:
        if self.signal is None or self.viewport is None:
            self.refuse("load a file first (o)")
            return
        self.query_one(TabbedContent).active = "signal"
        vp = how(self.viewport)
        if vp == self.viewport:
            self.set_status(f"cannot {what}: the window is {self.viewport.describe(self.signal.fs)}")
            return
        self.viewport = vp
        self.set_status(f"window {vp.describe(self.signal.fs)}")
        self._update_view()

    def _update_view(self) -> None:
        if self.signal is None or self.viewport is None:
            return
        after = self.result.after if self.result is not None else None
        self._view_worker(self.signal, self.viewport, after)

    @work(thread=True, exclusive=True, group="view")
    def _view_worker(self, sig, vp, after) -> None:
        try:
            self.post_message(ViewReady(sig, window_view(sig, vp, after)))
        except sigconv.InputError as exc:
            self.post_message(JobFailed("view", str(exc).splitlines()[0]))

    def on_view_ready(self, msg: ViewReady) -> None:
        if msg.signal is not self.signal or msg.view.viewport != self.viewport:
            return  # a window the user has moved on from
        try:
            view = self.query_one(SignalView)
        except NoMatches:  # the app is closing: nothing to draw on
            return
        view.show_window(msg.signal, msg.view, self.result, self.settings.noise_from)

    def scratch_dir(self) -> Path:
        """A private folder for the runs' filtered files (removed when the app exits)."""
        if self._scratch is None:  # (also removed at interpreter exit, whatever the way out)
            self._scratch = tempfile.TemporaryDirectory(prefix="sigconv-tui-", ignore_cleanup_errors=True)
        return Path(self._scratch.name)

    def _drop_result(self) -> None:
        if self.result is not None and self.result.output is not None:
            self.result.output.unlink(missing_ok=True)
        self.result = None

    def on_unmount(self) -> None:
        if self._scratch is not None:
            self._scratch.cleanup()

    # ------------------------------------------------------------------ misc

    def action_open(self) -> None:
        def chosen(path: Optional[str]) -> None:
            if path:
                self.load(path)

        self.push_screen(FileBrowserScreen(self.root), chosen)

    def action_next_tab(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = TABS[(TABS.index(tabs.active) + 1) % len(TABS)]

    def action_dismiss_error(self) -> None:
        self.query_one(ErrorPanel).clear()


def make_app(path: Optional[str] = None, **kw) -> SigconvApp:
    """The TUI for ``path`` (optional). Keywords: ``backend`` (auto/cpu/cuda), ``root`` (browser
    folder), ``latency_budget``/``latency_reps``/``latency_frames`` (size of the latency run),
    ``chunk_frames``/``chunk_delay`` (run granularity), ``measure`` (replaces the latency function)."""
    return SigconvApp(path, **kw)
