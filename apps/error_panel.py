"""A red panel that shows the last error until dismissed; the rest of the app stays usable."""

from __future__ import annotations

from textual.widgets import Static


class ErrorPanel(Static):
    """Hidden until :meth:`show_error`; Escape (or the next successful action) hides it."""

    def show_error(self, title: str, message: str) -> None:
        self.border_title = title
        self.update(f"{message}\n[dim](Esc to dismiss)[/dim]")
        self.display = True

    def clear(self) -> None:
        self.display = False

    @property
    def message(self) -> str:
        return str(self.render())
