"""The signal view: waveform and spectrogram before/after (downsampled for the terminal) and the
filter's frequency response."""

from __future__ import annotations

import numpy as np
from rich.color import Color
from rich.markup import escape
from rich.segment import Segment
from rich.style import Style
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.strip import Strip
from textual.widget import Widget
from textual.widgets import Static
from textual_plotext import PlotextPlot

from .running import freq_response
from .viewport import clock


def downsample_2d(S: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """Mean-pool (F, T) down to at most (rows, cols); low frequencies last (row 0 = top = Nyquist)."""
    F, T = S.shape
    r_edges = np.linspace(0, F, min(rows, F) + 1).astype(int)
    c_edges = np.linspace(0, T, min(cols, T) + 1).astype(int)
    A = np.add.reduceat(S, r_edges[:-1], axis=0) / np.diff(r_edges)[:, None]
    A = np.add.reduceat(A, c_edges[:-1], axis=1) / np.diff(c_edges)[None, :]
    return A[::-1]


# a viridis-like ramp, dark (quiet) to bright (loud)
_RAMP = np.array([(68, 1, 84), (59, 82, 139), (33, 145, 140), (94, 201, 98), (253, 231, 37)], dtype=float)


def _colour(v: float) -> Color:
    p = min(max(v, 0.0), 1.0) * (len(_RAMP) - 1)
    i = min(int(p), len(_RAMP) - 2)
    c = _RAMP[i] + (p - i) * (_RAMP[i + 1] - _RAMP[i])
    return Color.from_rgb(*c)


class Spectrogram(Widget):
    """A (F, T) log-power image drawn with half blocks (two rows of cells per line), high frequencies on top."""

    DEFAULT_CSS = "Spectrogram { height: 8; }"

    def __init__(self, title: str, **kw) -> None:
        super().__init__(**kw)
        self.border_title = title
        self.S = None
        self.range = (0.0, 1.0)
        self._img = None

    def set_data(self, S, vrange=None) -> None:
        self.S = None if S is None else np.asarray(S, dtype=np.float32)
        if self.S is not None:
            lo, hi = vrange or (float(np.percentile(self.S, 5)), float(self.S.max()))
            self.range = (lo, hi if hi > lo else lo + 1)
        self._img = None
        self.refresh()

    def on_resize(self) -> None:
        self._img = None

    def _image(self, w: int, h: int):
        if self._img is None or self._img.shape[1] != w:
            A = downsample_2d(self.S, 2 * h, w)
            lo, hi = self.range
            self._img = (A - lo) / (hi - lo)
        return self._img

    def render_line(self, y: int) -> Strip:
        w, h = self.content_size.width, self.content_size.height
        if self.S is None or w < 1 or h < 1:
            return Strip([Segment(" " * w)]) if y == 0 and self.S is None else Strip.blank(w)
        img = self._image(w, h)
        r0, r1 = 2 * y, 2 * y + 1
        if r0 >= img.shape[0]:
            return Strip.blank(w)
        segs = []
        for x in range(img.shape[1]):
            top = _colour(img[r0, x])
            bot = _colour(img[r1, x]) if r1 < img.shape[0] else None
            segs.append(Segment("▀", Style(color=top, bgcolor=bot)))
        return Strip(segs).adjust_cell_length(w)


class SignalView(VerticalScroll):
    """Everything about the loaded signal and the last run, one panel under the other (scroll with the arrows):
    the whole file's envelope with the visible window marked, the window's waveform and spectrograms before and
    after filtering, and the filter's frequency response."""

    def compose(self) -> ComposeResult:
        yield Static("Load a file (o) and run (r) to see the signal before and after filtering.", id="signal-note")
        yield PlotextPlot(id="overview")
        yield PlotextPlot(id="wave")
        yield Spectrogram("spectrogram before", id="spec-before")
        yield Spectrogram("spectrogram after", id="spec-after")
        yield Spectrogram("gate gain: after / before (dark: removed)", id="spec-gain")
        yield PlotextPlot(id="response")

    def on_mount(self) -> None:
        self.query_one("#spec-gain", Spectrogram).display = False
        for pid, title in (("overview", "whole file"), ("wave", "waveform"), ("response", "frequency response")):
            self.query_one(f"#{pid}", PlotextPlot).plt.title(title)

    def show_signal(self, sig) -> None:
        """A new signal: its summary; the window's plots follow (:meth:`show_window`)."""
        self.query_one("#signal-note", Static).update(escape(sig.summary()))
        self.query_one("#spec-after", Spectrogram).set_data(None)
        self._response(None, sig.fs)

    def show_result(self, sig, res) -> None:
        """A finished run: its description and filter response; a 2-D run's spectrograms (of the frames it
        smoothed). The window's after-traces of a 1-D run follow with :meth:`show_window`."""
        self.result_desc = res.desc
        self._response(res.taps, sig.fs, res.settings.edges if res.settings is not None else ())
        if res.spec_after is not None:
            before = self.query_one("#spec-before", Spectrogram)
            before.set_data(res.spec_before)
            self.query_one("#spec-after", Spectrogram).set_data(res.spec_after, before.range)
            a, b = res.span
            before.border_title = f"spectrogram before, {clock(a / sig.fs)}-{clock(b / sig.fs)}"

    def show_window(self, sig, wv, res=None, noise_from=None) -> None:
        """Draw the window ``wv`` (an ``apps.viewport.WindowView``): the overview with the window (and the noise
        clip ``noise_from``, seconds) marked, the window's waveform before/after and its spectrograms (unless
        ``res`` is a 2-D run, whose spectrograms stay); after the spectral gate, the gain it applied."""
        vp = wv.viewport
        how = "" if wv.before.exact else " (from the overview)"
        clip = (f"; noise clip {clock(noise_from[0], sig.duration)}-{clock(noise_from[1], sig.duration)}"
                if noise_from else "")
        lines = [escape(sig.summary()), f"window: {vp.describe(sig.fs)}{how}{clip}"]
        if res is not None:
            lines.append(escape(res.desc))
        self.query_one("#signal-note", Static).update("\n".join(lines))
        self._overview(wv, sig.fs, noise_from)
        self._wave(wv.before, wv.after)
        gain = self.query_one("#spec-gain", Spectrogram)
        spectral = res is not None and res.settings is not None and res.settings.method == "spectral"
        gain.display = spectral and wv.after is not None
        if gain.display:
            g = wv.after.spec - wv.before.spec  # log10 of the power ratio, cell by cell
            gain.set_data(np.minimum(g, 0.0), (-3.0, 0.0))
        if res is None or res.spec_after is None:
            before = self.query_one("#spec-before", Spectrogram)
            before.border_title = "spectrogram before" + ("" if wv.before.exact else " (sampled)")
            before.set_data(wv.before.spec)
            after = self.query_one("#spec-after", Spectrogram)
            after.set_data(wv.after.spec if wv.after is not None else None, before.range)

    def _overview(self, wv, fs: float, noise_from=None) -> None:
        p = self.query_one("#overview", PlotextPlot)
        plt = p.plt
        plt.clear_data()
        plt.clear_figure()
        tr = wv.overview
        t = tr.t.tolist()
        plt.plot(t, tr.hi.tolist(), color="gray", marker="braille")
        plt.plot(t, tr.lo.tolist(), color="gray", marker="braille")
        vp = wv.viewport
        if not vp.is_whole:
            for x in (vp.start / fs, vp.stop / fs):
                plt.vline(float(x), color="red")
        for x in noise_from or ():
            plt.vline(float(x), color="green")
        plt.title("whole file  (+/- zoom, [ ] pan, 0 all)")
        p.refresh()

    def _wave(self, before, after) -> None:
        p = self.query_one("#wave", PlotextPlot)
        plt = p.plt
        plt.clear_data()
        plt.clear_figure()
        for tr, label, colour in ((before, "before", "gray"), (after, "after", "cyan")):
            if tr is None:
                continue
            t = tr.t.tolist()
            plt.plot(t, tr.hi.tolist(), label=label, color=colour, marker="braille")
            plt.plot(t, tr.lo.tolist(), color=colour, marker="braille")
        plt.title("the window, channel 0 (min/max)")
        plt.xlabel("s")
        p.refresh()

    def _response(self, taps, fs: float, edges=()) -> None:
        """The FIR's gain in dB on a log-frequency axis, its band edges (``edges``, Hz) as vertical lines."""
        p = self.query_one("#response", PlotextPlot)
        plt = p.plt
        plt.clear_data()
        plt.clear_figure()
        if taps is None:
            plt.title("frequency response (FIR runs only)")
        else:
            f, db = freq_response(taps, fs)
            plt.xscale("log")
            plt.plot(f.tolist(), np.maximum(db, -100).tolist(), marker="braille", color="green")
            for e in edges:
                if f[0] < e < f[-1]:
                    plt.vline(float(e), color="red")
            marked = ", ".join(f"{e:g}" for e in edges)
            plt.title(f"frequency response, {taps.size} taps (dB)" + (f"; edges {marked} Hz" if marked else ""))
            plt.xlabel("Hz (log)")
        p.refresh()
