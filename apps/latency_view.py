"""The latency view: sigconv's variants x block sizes beside scipy, cuDNN and CuPy (and, for the spectral method,
the gate's stages), and a bar chart."""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Static
from textual_plotext import PlotextPlot

from .latency import SCREEN_COLUMNS, Latency, screen_table


class LatencyView(Vertical):
    """Fastest row in bold green, the chosen variant marked with ●; missing baselines as
    "not available: <reason>" rows; the gate's stage rows (spectral method) last, in blue, out of the bar chart.
    The table scrolls sideways where the terminal is narrower than its columns."""

    def compose(self) -> ComposeResult:
        yield Static("Run (r) to time every variant and block on the loaded data.", id="latency-note")
        yield DataTable(id="latency-table", zebra_stripes=True, cursor_type="row")
        yield PlotextPlot(id="latency-bars")

    def on_mount(self) -> None:
        t = self.query_one(DataTable)
        t.add_columns(*SCREEN_COLUMNS)
        self.query_one(PlotextPlot).plt.title("median latency (ms)")

    def show(self, lat: Latency) -> None:
        self.latency = lat
        t = self.query_one(DataTable)
        t.clear()
        for r, cells in zip(lat.rows, screen_table(lat)):
            style = "bold green" if r.fastest else ("dim" if r.status == "not available" else
                                                    "cyan" if r.kind == "stage" else "")
            mark = "●" if r.chosen else " "
            t.add_row(*[Text(mark + cells[0], style=style)] + [Text(c, style=style) for c in cells[1:]])
        fastest = next((r for r in lat.rows if r.fastest), None)
        timed = [r for r in lat.rows if r.ms and r.kind != "stage"]
        note = f"{lat.op} on {lat.case}: {len(timed)} timed rows"
        if fastest:
            note += f"; fastest {fastest.short_label} {fastest.ms:.4g} ms"
        best = lat.best_peer
        if best:
            note += f"; best peer {best.short} {best.ms:.4g} ms"
        if any(r.kind == "stage" for r in lat.rows):
            note += "; the gate's stages last (g:*)"
        self.query_one("#latency-note", Static).update(note + "  [dim](e: export, ←/→: columns)[/dim]")
        p = self.query_one(PlotextPlot)
        plt = p.plt
        plt.clear_data()
        plt.clear_figure()
        timed = timed[:16]
        if timed:
            plt.bar([r.short_label for r in timed], [r.ms for r in timed],
                    orientation="horizontal", width=0.3)
            plt.title("median latency (ms), shorter is faster")
        p.refresh()
