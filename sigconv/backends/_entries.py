"""Imports the modules whose top level registers variants and peers (they import nothing heavy)."""

from . import cpu  # noqa: F401
from . import cuda1d  # noqa: F401
from . import cuda2d  # noqa: F401
from . import peers  # noqa: F401
