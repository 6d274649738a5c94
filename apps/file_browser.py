"""The file browser: a DirectoryTree that shows folders, audio files and CSV sensor logs only."""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import DirectoryTree, Label

from .loading import is_viewable


def shown(path: Path) -> str:
    """``path`` as the browser shows it: under the home folder as ``~/...``, else in full."""
    try:
        rel = path.relative_to(Path.home())
    except (ValueError, RuntimeError):  # not under home, or no home folder known
        return str(path)
    return "~" if rel == Path(".") else f"~/{rel.as_posix()}"


class SignalTree(DirectoryTree):
    """Folders (not hidden ones) and the files sigconv reads."""

    def filter_paths(self, paths: Iterable[Path]) -> Iterable[Path]:
        return [p for p in paths if not p.name.startswith(".") and (p.is_dir() or is_viewable(p))]

    async def watch_path(self) -> None:
        await super().watch_path()  # (repopulates the tree, its root labelled by the tree)
        self.root.set_label(shown(Path(self.path)))


class FileBrowserScreen(ModalScreen[str | None]):
    """Pick a file with the arrow keys and Enter; Backspace goes up a folder, Escape closes."""

    BINDINGS = [Binding("escape", "close", "Close"), Binding("backspace", "up", "Up a folder")]

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = Path(root).resolve()

    def compose(self) -> ComposeResult:
        with Vertical(id="browser", classes="dialog"):
            yield Label(self._title(), id="browser-title")
            yield SignalTree(self.root, id="tree")
            yield Label("[dim]arrows: move  Enter: open/expand  Backspace: up  Esc: close[/dim]")

    def _title(self) -> str:
        return f"Open: audio files and CSV sensor logs under {shown(self.root)}"

    def on_mount(self) -> None:
        self.query_one(SignalTree).focus()

    def on_directory_tree_file_selected(self, event: DirectoryTree.FileSelected) -> None:
        self.dismiss(str(event.path))

    def action_up(self) -> None:
        tree = self.query_one(SignalTree)
        self.root = self.root.parent
        tree.path = self.root
        self.query_one("#browser-title", Label).update(self._title())

    def action_close(self) -> None:
        self.dismiss(None)
