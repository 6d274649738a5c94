"""FIR design: checked equivalents of scipy.signal.firwin with automatic tap counts.

``firwin`` here is SciPy's algorithm (windowed ideal band filter, scaled to unit gain at the
centre of the first pass band) for the common windows; it exists because importing
``scipy.signal`` costs over a second, which every ``sigconv denoise`` call would pay. Other windows
are taken from ``scipy.signal.get_window`` (imported only then). Tests check equality with SciPy.
"""

from __future__ import annotations

import math
import numbers
from typing import Optional

import numpy as np

__all__ = ["design_fir", "design_notch", "taps_for_transition"]

KINDS = ("lowpass", "highpass", "bandpass", "bandstop")


def _window(window, n: int) -> np.ndarray:
    """Symmetric window of length n (as scipy.signal.get_window(window, n, fftbins=False))."""
    if n == 1:
        return np.ones(1)
    k = np.arange(n)
    if window in ("hamming", "hamm", "ham"):
        return 0.54 - 0.46 * np.cos(2 * np.pi * k / (n - 1))
    if window in ("hann", "han"):
        return 0.5 - 0.5 * np.cos(2 * np.pi * k / (n - 1))
    if window in ("boxcar", "box", "ones", "rect", "rectangular"):
        return np.ones(n)
    import scipy.signal  # slow import, only for the less common windows

    return scipy.signal.get_window(window, n, fftbins=False)


def firwin(numtaps: int, cutoff, window="hamming", pass_zero: str = "lowpass", fs: float = 2.0) -> np.ndarray:
    """scipy.signal.firwin(numtaps, cutoff, window=window, pass_zero=pass_zero, fs=fs), checked inputs."""
    cutoff = np.atleast_1d(np.asarray(cutoff, dtype=float)) / (0.5 * fs)
    pz = pass_zero in ("lowpass", "bandstop")
    pass_nyquist = bool(cutoff.size & 1) ^ pz
    edges = np.hstack(([0.0] * pz, cutoff, [1.0] * pass_nyquist))
    bands = edges.reshape(-1, 2)
    m = np.arange(numtaps) - 0.5 * (numtaps - 1)
    h = 0
    for left, right in bands:
        h = h + right * np.sinc(right * m)
        h = h - left * np.sinc(left * m)
    h = h * _window(window, numtaps)
    left, right = bands[0]
    scale_frequency = 0.0 if left == 0 else (1.0 if right == 1 else 0.5 * (left + right))
    gain = np.sum(h * np.cos(np.pi * m * scale_frequency))
    if not np.isfinite(gain) or gain == 0 or not np.all(np.isfinite(h)):
        raise ValueError(f"numtaps={numtaps} with window {window!r} gives a filter with zero gain; use more taps")
    return h / gain


#: The sample rates (Hz) the engine filters: from one sample in about 30 years to a terahertz. Outside it the
#: sizes derived from the rate (a filter's taps, its band edges, a file's duration, an STFT's frames per second)
#: overflow, fall into the subnormals or are absurd, so such a rate is refused before anything is sized by it.
RATE_RANGE = (1e-9, 1e12)


def rate_problem(fs) -> Optional[str]:
    """What is wrong with ``fs`` as a sample rate, as a phrase to put after its name or source ("must be a rate in
    Hz (a number), got True"), or None: a boolean, a non-number, a non-finite or non-positive number, or a rate
    outside :data:`RATE_RANGE`. The one home of that rule: :func:`check_fs`, the settings, the spectral gate, and
    the batch's ``--fs``, NPY sidecars and rates inferred from timestamps."""
    if isinstance(fs, bool) or not isinstance(fs, numbers.Real):
        return f"must be a rate in Hz (a number), got {fs!r}"
    fs = float(fs)
    if not math.isfinite(fs) or fs <= 0:
        return f"must be a positive rate in Hz, got {fs:g}"
    lo, hi = RATE_RANGE
    if not lo <= fs <= hi:
        return f"{fs:g} Hz is outside the sample rates sigconv filters ({lo:g} to {hi:g} Hz)"
    return None


def check_fs(fs, name: str = "fs") -> float:
    """``fs`` as a float; ``ValueError`` naming ``name`` and the rate when :func:`rate_problem` finds one."""
    why = rate_problem(fs)
    if why:
        raise ValueError(f"{name} {why}")
    return float(fs)


#: No filter is designed with more taps than this (2^40: 8 TB of float64 taps); a count beyond it is not
#: a filter anyone can hold, and is refused as such before any other check.
MAX_TAPS = 1 << 40


def count_text(n: int) -> str:
    """A tap count for a message: the digits up to 10^15, beyond that 3 significant figures."""
    return str(int(n)) if n < 10**15 else f"{float(n):.3g}"


def taps_for_transition(transition: float, fs: float, what: str = "transition", fix: str = "use a wider transition"
                        ) -> int:
    """Hamming-window length for a transition band (MNE's rule): about 3.3 / (transition / fs), odd.
    ``ValueError`` when the band is so narrow that the length is beyond :data:`MAX_TAPS`: ``what`` names where the
    width came from (an option, or the default), ``fix`` says what to change."""
    q = transition / fs
    n = 3.3 / q if q > 0 else math.inf
    if not n <= MAX_TAPS:
        count = "more taps than can be counted" if not math.isfinite(n) else f"{n:.3g} taps"
        raise ValueError(f"{what} {transition:g} Hz is too narrow for {fs:g} Hz: it needs {count}, at most "
                         f"{MAX_TAPS:.3g} can be designed; {fix}")
    n = int(math.ceil(n))
    return n + 1 if n % 2 == 0 else n


#: Bytes per tap that designing a filter takes at its peak (float64 temporaries of firwin's windowed sincs).
DESIGN_BYTES_PER_TAP = 56
#: Most memory one design may take, whatever is free (about 77 million taps: a filter of half an hour at
#: 44.1 kHz, far beyond any use; designing it takes tens of seconds).
DESIGN_BUDGET = 4 << 30


def check_design_memory(numtaps: int) -> None:
    """``ValueError`` (one line) when designing a ``numtaps`` filter would take more than :data:`DESIGN_BUDGET` or
    more memory than this process can still have: refused at once rather than swapping or being killed midway.
    Designs under 256 MB pass unchecked."""
    need = DESIGN_BYTES_PER_TAP * int(numtaps)
    if need < 256 << 20:
        return
    gib = need / 2**30
    what = f"a filter of {count_text(numtaps)} taps needs about {gib:.1f} GiB to design" if gib < 1e6 else \
        f"a filter of {count_text(numtaps)} taps needs about {gib:.3g} GiB to design"
    fix = "use fewer --taps or a wider --transition"
    free = available_memory()
    if free is not None and need > free and free < DESIGN_BUDGET:
        raise ValueError(f"{what}, more than the {free / 2**30:.1f} GiB of memory free; {fix}")
    if need > DESIGN_BUDGET:
        raise ValueError(f"{what}, more than the {DESIGN_BUDGET / 2**30:.0f} GiB a design may take; {fix}")


def available_memory():
    """Bytes this process can still allocate, or None when nothing says: the least of the system's available
    memory, its cgroup's limit less its use, and its address-space and data limits less what it has mapped."""
    found = []
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as fh:
            cap = fh.read().strip()
        if cap != "max":
            with open("/sys/fs/cgroup/memory.current") as fh:
                found.append(int(cap) - int(fh.read().strip()))
    except (OSError, ValueError):
        pass
    try:
        import resource

        status = {}
        with open("/proc/self/status") as fh:
            for line in fh:
                key, _, rest = line.partition(":")
                if key in ("VmSize", "VmData"):
                    status[key] = int(rest.split()[0]) * 1024
        for limit, used in ((resource.RLIMIT_AS, "VmSize"), (resource.RLIMIT_DATA, "VmData")):
            soft = resource.getrlimit(limit)[0]
            if soft != resource.RLIM_INFINITY and used in status:
                found.append(soft - status[used])
    except (ImportError, OSError, ValueError, IndexError):
        pass
    return max(min(found), 0) if found else None


def design_fir(kind: str, cutoff, fs: float, numtaps: int | None = None, transition: float | None = None,
               window: str = "hamming") -> np.ndarray:
    """Design a linear-phase FIR filter.

    Parameters
    ----------
    kind : {"lowpass", "highpass", "bandpass", "bandstop"}
    cutoff : float or (float, float)
        Edge frequency in Hz (a pair for bandpass/bandstop), strictly between 0 and fs/2.
    fs : float
        Sample rate in Hz.
    numtaps : int, optional
        Filter length. When omitted it follows from ``transition`` by MNE's rule for the Hamming
        window, ``ceil(3.3 / (transition / fs))``, forced odd.
    transition : float, optional
        Transition width in Hz. Default: 25% of the lowest edge, at least 2 Hz, capped by the
        distance from every edge to 0 and Nyquist (and, for bands, by the bandwidth).
    window : str
        Any window ``scipy.signal.firwin`` accepts.

    Returns
    -------
    ndarray, float64, shape (numtaps,)
        Identical to ``scipy.signal.firwin(numtaps, cutoff, window=window, pass_zero=kind, fs=fs)``.

    Raises
    ------
    ValueError
        Unknown kind, cutoff outside (0, fs/2), unordered band, non-positive numtaps/transition,
        an even numtaps where the filter must pass Nyquist (highpass, bandstop).

    See Also
    --------
    scipy.signal.firwin

    Examples
    --------
    >>> import sigconv
    >>> sigconv.design_fir("lowpass", 1000, fs=48000, transition=250).size
    635
    """
    numtaps, c = _fir_plan(kind, cutoff, fs, numtaps, transition)
    check_design_memory(numtaps)
    return firwin(numtaps, c, window=window, pass_zero=kind, fs=fs)


def fir_length(kind: str, cutoff, fs: float, numtaps: int | None = None, transition: float | None = None) -> int:
    """The length :func:`design_fir` gives for these arguments, checked as it checks them, without designing
    (``ValueError`` where it would raise one)."""
    return _fir_plan(kind, cutoff, fs, numtaps, transition)[0]


def _fir_plan(kind: str, cutoff, fs, numtaps, transition):
    """(numtaps, cutoff as firwin takes it) after :func:`design_fir`'s checks."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {', '.join(KINDS)}, got {kind!r}")
    fs = check_fs(fs)
    nyq = fs / 2
    edges = np.atleast_1d(np.asarray(cutoff, dtype=float))
    want = 2 if kind in ("bandpass", "bandstop") else 1
    if edges.size != want or edges.ndim != 1:
        raise ValueError(f"cutoff for a {kind} filter must be {'a pair (low, high)' if want == 2 else 'one frequency'} "
                         f"in Hz, got {cutoff!r}")
    for e in edges:
        if not math.isfinite(e) or not 0 < e < nyq:
            raise ValueError(f"cutoff must be strictly between 0 and Nyquist ({nyq:g} Hz for fs={fs:g}), got {e:g} Hz")
    if want == 2 and not edges[0] < edges[1]:
        raise ValueError(f"cutoff band must satisfy low < high, got ({edges[0]:g}, {edges[1]:g}) Hz")
    if numtaps is None:
        what, fix = "transition", "use a wider transition"
        if transition is None:
            room = min(min(edges), nyq - max(edges))
            if want == 2:
                room = min(room, edges[1] - edges[0])
            transition = min(max(0.25 * min(edges), 2.0), room)
            what = "the default transition (a quarter of the lowest edge, at most its distance to 0 Hz and Nyquist)"
            fix = "move the edges or give the transition (or the number of taps)"
        if isinstance(transition, bool) or not isinstance(transition, numbers.Real) or not transition > 0:
            raise ValueError(f"transition must be a positive width in Hz, got {transition!r}")
        numtaps = taps_for_transition(float(transition), fs, what, fix)
    elif transition is not None:
        if isinstance(transition, bool) or not isinstance(transition, numbers.Real) or not transition > 0:
            raise ValueError(f"transition must be a positive width in Hz, got {transition!r}")
    if isinstance(numtaps, bool) or not isinstance(numtaps, numbers.Integral) or numtaps < 1:
        raise ValueError(f"numtaps must be a positive integer, got {numtaps!r}")
    numtaps = int(numtaps)
    if kind in ("highpass", "bandstop") and numtaps % 2 == 0:
        raise ValueError(f"numtaps must be odd for a {kind} filter (an even length has a zero at Nyquist), got {numtaps}")
    return numtaps, (float(edges[0]) if want == 1 else edges)


def design_notch(freqs, fs: float, width: float = 2.0, numtaps: int | None = None,
                 window: str = "hamming") -> np.ndarray:
    """Linear-phase FIR notch filter removing each frequency in ``freqs``.

    Parameters
    ----------
    freqs : float or sequence of float
        Frequencies to remove, in Hz, strictly between 0 and Nyquist (e.g. 50, 100, 150).
    fs : float
        Sample rate in Hz.
    width : float
        Width of each stop band in Hz (the band is freq +- width/2). Also the transition width
        used to choose ``numtaps`` when that is omitted.
    numtaps : int, optional
        Odd filter length; default from ``width`` by the Hamming rule.

    Returns
    -------
    ndarray, float64, odd length: ``firwin`` band-stop with edges freq +- width/2 for every freq.

    See Also
    --------
    scipy.signal.iirnotch : the IIR equivalent (not linear phase).

    Examples
    --------
    >>> import sigconv
    >>> sigconv.design_notch([50, 100], fs=1000, width=4).size % 2
    1
    """
    numtaps, edges = _notch_plan(freqs, fs, width, numtaps)
    check_design_memory(numtaps)
    return firwin(numtaps, edges, window=window, pass_zero="bandstop", fs=fs)


def notch_length(freqs, fs: float, width: float = 2.0, numtaps: int | None = None) -> int:
    """The length :func:`design_notch` gives for these arguments, checked as it checks them, without designing."""
    return _notch_plan(freqs, fs, width, numtaps)[0]


def _notch_plan(freqs, fs, width, numtaps):
    """(numtaps, band-stop edges) after :func:`design_notch`'s checks."""
    fs = check_fs(fs)
    nyq = fs / 2
    f = np.atleast_1d(np.asarray(freqs, dtype=float))
    if f.size == 0 or f.ndim != 1:
        raise ValueError(f"freqs must be one or more frequencies in Hz, got {freqs!r}")
    if isinstance(width, bool) or not isinstance(width, numbers.Real) or not math.isfinite(width) or width <= 0:
        raise ValueError(f"width must be a positive bandwidth in Hz, got {width!r}")
    f = np.sort(f)
    for v in f:
        if not math.isfinite(v) or not width / 2 < v < nyq - width / 2:
            raise ValueError(f"notch frequency must lie between width/2 and Nyquist - width/2 "
                             f"({width / 2:g} to {nyq - width / 2:g} Hz), got {v:g} Hz")
    if np.any(np.diff(f) <= width):
        raise ValueError(f"notch frequencies must be more than width ({width:g} Hz) apart, got {list(f)}")
    if numtaps is None:
        numtaps = taps_for_transition(width, fs, "notch width", "use a wider notch width")
    if isinstance(numtaps, bool) or not isinstance(numtaps, numbers.Integral) or numtaps < 1 or numtaps % 2 == 0:
        raise ValueError(f"numtaps must be a positive odd integer for a notch filter, got {numtaps!r}")
    edges = np.ravel([(v - width / 2, v + width / 2) for v in f])
    return int(numtaps), edges
