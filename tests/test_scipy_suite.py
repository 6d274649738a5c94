"""SciPy's own tests of ``convolve``, ``correlate``, ``convolve2d`` and ``correlate2d`` (the test classes of the
installed SciPy's ``scipy/signal/tests/test_signaltools.py``), run unchanged against sigconv's functions on the cpu
backend and, marked ``gpu``, on the cuda backend.

Each SciPy test function is rebuilt with a copy of its module's globals in which the four names, and the four
attributes of ``signal`` that some tests call through the module, are sigconv's (with the backend fixed); test
parameters that are SciPy's functions are swapped the same way. Every argument reaches sigconv unchanged. The
tests outside sigconv's contract (complex values, more than two dimensions) are deselected by name below, each
with its reason, and nothing else.
"""

from __future__ import annotations

import functools
import types

import numpy as np
import pytest
import scipy.signal

import sigconv

_scipy_tests = pytest.importorskip("scipy.signal.tests.test_signaltools",
                                   reason="the installed SciPy ships without its tests")

NAMES = ("convolve", "correlate", "convolve2d", "correlate2d")
CLASSES = ("TestConvolve", "TestConvolve2d", "TestCorrelateReal", "TestCorrelate2d")

#: Tests outside sigconv's contract, by name: complex inputs and inputs of more than two dimensions.
OUTSIDE = {
    "TestConvolve.test_complex": "complex inputs",
    "TestConvolve.test_broadcastable": "3-D inputs",
    "TestConvolve.test_input_swapping": "3-D complex inputs",
    "TestConvolve.test_valid_mode2": "its second half convolves complex inputs (the real half is the same check "
                                     "as TestConvolve2d.test_valid_mode and test_same_mode)",
    "TestConvolve.test_convolve_method": "its dtype sweep includes complex64 and complex128 (the real pairs are "
                                         "swept in tests/test_scipy_semantics.py)",
    "TestConvolve2d.test_valid_mode_complx": "complex inputs",
    "TestConvolve2d.test_valid_mode2": "its second half convolves complex inputs",
    "TestCorrelateReal.test_method": "3-D inputs",
    "TestCorrelateReal.test_rank3_valid": "3-D inputs",
    "TestCorrelateReal.test_rank3_same": "3-D inputs",
    "TestCorrelateReal.test_rank3_all": "3-D inputs",
    "TestCorrelate2d.test_complex_input": "complex inputs",
}


@pytest.fixture
def xp():
    """SciPy's array-namespace fixture: numpy (sigconv's cuda backend takes numpy arrays and returns them)."""
    return np


def _patched(backend: str) -> dict:
    """SciPy's function -> sigconv's, with the backend fixed."""
    return {getattr(scipy.signal, n): functools.wraps(getattr(sigconv, n))(
        functools.partial(getattr(sigconv, n), backend=backend)) for n in NAMES}


def _swap(value, table: dict):
    """``value`` with SciPy's functions replaced by sigconv's (inside tuples and lists too)."""
    if isinstance(value, (tuple, list)):
        return type(value)(_swap(v, table) for v in value)
    try:
        return table.get(value, value)
    except TypeError:  # unhashable parameter values
        return value


def _marks(marks, table: dict):
    out = []
    for m in marks:
        if m.name == "parametrize" and len(m.args) >= 2:
            m = pytest.mark.parametrize(m.args[0], _swap(list(m.args[1]), table), *m.args[2:], **m.kwargs).mark
        out.append(m)
    return out


def _suite(backend: str) -> dict:
    """SciPy's four test classes, rebuilt against sigconv on ``backend``: {name: class}."""
    table = _patched(backend)
    by_name = {f.__name__: f for f in table.values()}
    signal = types.ModuleType("signal")  # scipy.signal with the four names replaced
    signal.__dict__.update(by_name)
    signal.__getattr__ = lambda name: getattr(scipy.signal, name)
    ns = dict(vars(_scipy_tests), signal=signal, **by_name)
    classes = {}
    for cname in CLASSES:
        cls = getattr(_scipy_tests, cname)
        body = {}
        for attr, value in vars(cls).items():
            if isinstance(value, types.FunctionType):
                f = types.FunctionType(value.__code__, ns, value.__name__, value.__defaults__, value.__closure__)
                f.__dict__.update(value.__dict__)
                f.__qualname__ = value.__qualname__
                if hasattr(value, "pytestmark"):
                    f.pytestmark = _marks(value.pytestmark, table)
                reason = OUTSIDE.get(f"{cname}.{attr}")
                if reason:
                    f = pytest.mark.skip(reason=f"outside sigconv's contract: {reason}")(f)
                body[attr] = f
            elif attr not in ("__dict__", "__weakref__"):
                body[attr] = value
        marks = list(getattr(cls, "pytestmark", []))
        if backend == "cuda":
            marks.append(pytest.mark.gpu.mark)
        body["pytestmark"] = _marks(marks, table)
        name = f"{cname}{backend.capitalize()}"
        body["__qualname__"] = name
        classes[name] = type(name, (), body)
    return classes


for _backend in ("cpu", "cuda"):
    globals().update(_suite(_backend))


def test_every_deselected_test_exists():
    """The deselection list names real tests of the installed SciPy (a renamed test must not silently run)."""
    for key in OUTSIDE:
        cname, attr = key.split(".")
        assert callable(getattr(getattr(_scipy_tests, cname), attr, None)), key


def test_the_suite_calls_sigconv():
    """The rebuilt tests see sigconv's functions, not SciPy's: a probe through the patched globals."""
    suite = _suite("cpu")
    test = suite["TestConvolveCpu"].test_basic
    assert test.__globals__["convolve"].func is sigconv.convolve
    assert test.__globals__["signal"].convolve.func is sigconv.convolve
    assert test.__globals__["signal"].lfilter is scipy.signal.lfilter
