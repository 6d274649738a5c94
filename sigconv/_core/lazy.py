"""Public names that load on first use: a package's ``__getattr__`` and ``__dir__`` (PEP 562) over a table of
name -> the module that holds it, so that importing the package imports none of those modules."""

from __future__ import annotations

from importlib import import_module

__all__ = ["lazy_names"]


def lazy_names(package: str, home: dict, namespace: dict):
    """(``__getattr__``, ``__dir__``) for ``package`` (its ``__name__``) whose names in ``home`` (name -> module)
    load on first use into ``namespace`` (its ``globals()``); any other missing name is an AttributeError."""

    def __getattr__(name):
        module = home.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(import_module(module), name)
        namespace[name] = value
        return value

    def __dir__():
        return sorted(set(namespace) | set(home))

    return __getattr__, __dir__
