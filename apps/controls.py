"""The control panel: method, cutoffs, strength, backend, dimension, smoothing size."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Input, Label, Select

from .messages import SettingsChanged
from .running import DIMENSIONS, METHODS, Settings

FIELDS = (  # (setting, label, kind)
    ("low", "Low Hz", "number"),
    ("high", "High Hz", "number"),
    ("notch", "Notch Hz", "number"),
    ("strength", "Strength", "number"),
    ("smooth", "2D k", "integer"),
)


def _row(label: str, widget) -> Horizontal:
    return Horizontal(Label(label, classes="field-label"), widget, classes="field")


class ControlPanel(VerticalScroll):
    """Posts :class:`SettingsChanged` when a value changes; bad numbers are refused by the app."""

    def __init__(self, settings: Settings, backends: list[tuple[str, str]], **kw) -> None:
        super().__init__(**kw)
        self.settings = settings
        self.backends = backends

    def compose(self) -> ComposeResult:
        s = self.settings
        methods = [(label, key) for key, label in METHODS]
        yield _row("Method", Select(methods, value=s.method, allow_blank=False, compact=True, id="method"))
        for name, label, kind in FIELDS:
            yield _row(label, Input(f"{getattr(s, name):g}", type=kind, compact=True, id=name))
        yield _row("Backend", Select(self.backends, value=s.backend, allow_blank=False, compact=True, id="backend"))
        yield _row("Dim", Select([(label, key) for key, label in DIMENSIONS], value=s.dimension,
                                 allow_blank=False, compact=True, id="dimension"))

    def set_value(self, name: str, value) -> None:
        """Show ``value`` in the widget for ``name`` without posting a change."""
        w = self.query_one(f"#{name}")
        with w.prevent(Select.Changed, Input.Changed, Input.Submitted):
            if isinstance(w, Select):
                w.value = value
            else:
                w.value = f"{value:g}"

    def on_select_changed(self, event: Select.Changed) -> None:
        event.stop()
        if event.value is not Select.BLANK:
            self.post_message(SettingsChanged(event.select.id, event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.post_message(SettingsChanged(event.input.id, event.value))

    def on_descendant_blur(self, event) -> None:
        w = event.widget
        if isinstance(w, Input) and w.id in {f[0] for f in FIELDS}:
            self.post_message(SettingsChanged(w.id, w.value))
