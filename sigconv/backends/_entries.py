"""Imports the modules whose top level registers variants and peers (they import nothing heavy)."""

from sigconv.backends import cpu  # noqa: F401
from sigconv.backends import cuda1d  # noqa: F401
from sigconv.backends import cuda2d  # noqa: F401
from sigconv.backends import peers  # noqa: F401
