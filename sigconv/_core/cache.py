"""Where sigconv keeps what it can recompute (autotune winners, the TUI's file overviews): one folder, never
beside the user's files. ``$SIGCONV_CACHE_DIR``, else ``$XDG_CACHE_HOME/sigconv``, else ``~/.cache/sigconv``."""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["cache_dir"]


def cache_dir() -> Path:
    """sigconv's cache folder (it may not exist yet; whoever writes there creates it)."""
    d = os.environ.get("SIGCONV_CACHE_DIR")
    if d:
        return Path(d)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "sigconv"
