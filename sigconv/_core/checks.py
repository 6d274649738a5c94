"""Argument checks shared by the API, the engine and the CLI. Each raises ``ValueError`` with a
message that names the argument and the allowed range."""

from __future__ import annotations

import numbers

import numpy as np

MODES = ("full", "same", "valid")


class _DefaultAxis(int):
    """``-1`` that remembers it was not given explicitly (for the orientation check)."""

    def __repr__(self) -> str:
        return "-1"


LAST_AXIS = _DefaultAxis(-1)


class DefaultValue(float):
    """A float default that remembers it was not given: where the default does not fit the input (a time in ms
    at an extreme sample rate, say) it may be adapted, and the user is not told about an option they never set."""

    def __repr__(self) -> str:
        return repr(float(self))


def is_default(value) -> bool:
    """True for a :class:`DefaultValue` (a default nobody gave explicitly)."""
    return isinstance(value, DefaultValue)

#: A 2-D input whose filtered axis is this many times shorter than the other is refused unless
#: ``axis`` was given: (frames, channels) data filtered along the channels is a costly mistake.
ORIENTATION_FACTOR = 32


def check_mode(mode: str) -> str:
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    return mode


def check_positive_int(value, name: str, minimum: int = 1):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return int(value)


#: dtype kinds the array functions take: booleans, signed and unsigned integers, real floats.
NUMERIC_KINDS = "biuf"


def check_numeric(a, name: str) -> None:
    """``TypeError`` (one line naming ``name`` and its dtype) unless ``a`` holds real numbers; complex data is a
    ``ValueError`` (a supported type, but not what a real filter takes). Object, string, bytes, datetime,
    timedelta and structured arrays would otherwise fail deep inside NumPy with a message about ufuncs."""
    d = np.dtype(a.dtype)
    if d.kind == "c":
        raise ValueError(f"{name}: complex inputs are not supported (got dtype {d}); filter the real and "
                         "imaginary parts separately")
    if d.kind not in NUMERIC_KINDS or d.fields is not None:
        raise TypeError(f"{name} must be a real numeric array (bool, integer or float), got dtype {d}; convert it "
                        "with numpy.asarray(..., dtype=float) first")


def check_finite_array(a: np.ndarray, name: str) -> None:
    check_numeric(a, name)
    if a.size and not np.all(np.isfinite(a)):
        bad = np.flatnonzero(~np.isfinite(np.asarray(a).ravel()))[0]
        raise ValueError(f"{name} must be finite; element {bad} is {np.asarray(a).ravel()[bad]}")


def float_dtype(*arrays) -> np.dtype:
    """float32 only when every input is float32 (or float16); integers and float64 give float64."""
    kinds = [np.dtype(a.dtype) for a in arrays]
    for a in arrays:
        check_numeric(a, "inputs")
    if all(d.kind == "f" and d.itemsize <= 4 for d in kinds):
        return np.dtype(np.float32)
    return np.dtype(np.float64)


def check_axis(ndim: int, axis) -> int:
    if isinstance(axis, bool) or not isinstance(axis, numbers.Integral) or not -ndim <= axis < ndim:
        raise ValueError(f"axis must be an integer in [{-ndim}, {ndim - 1}] for a {ndim}-D input, got {axis!r}")
    return int(axis) % ndim


def check_time_axis(shape: tuple, axis, name: str) -> tuple:
    """(axis, length) of the time axis ``axis`` of an input of ``shape`` named ``name``: an integer in range
    (check_axis), not a transposed-looking 2-D input where the axis was left to its default (check_orientation),
    and at least one sample long."""
    ax = check_axis(len(shape), axis)
    check_orientation(shape, ax, axis is not LAST_AXIS)
    L = int(shape[ax])
    if L == 0:
        raise ValueError(f"{name} must hold at least one sample along axis {ax}, got shape {tuple(shape)}")
    return ax, L


def check_orientation(shape: tuple, axis, explicit: bool) -> None:
    """Refuse a 2-D input that looks transposed: (frames, channels) filtered along the channels."""
    if explicit or len(shape) != 2:
        return
    ax = axis % 2
    n_filt, n_other = shape[ax], shape[1 - ax]
    if n_filt * ORIENTATION_FACTOR <= n_other:
        raise ValueError(
            f"input has shape {tuple(shape)}: filtering along axis {ax} ({n_filt} samples) while axis "
            f"{1 - ax} holds {n_other}; this looks like (frames, channels) data. Pass axis={1 - ax} "
            f"(or transpose to (channels, frames)); pass axis={ax} explicitly if this is intended"
        )
