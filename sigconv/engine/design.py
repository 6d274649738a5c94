"""FIR design: checked equivalents of scipy.signal.firwin with automatic tap counts.

``firwin`` here is SciPy's algorithm (windowed ideal band filter, scaled to unit gain at the
centre of the first pass band) for the common windows; it exists because importing
``scipy.signal`` costs over a second, which every ``sigconv denoise`` call would pay. Other windows
are taken from ``scipy.signal.get_window`` (imported only then). Tests check equality with SciPy.
"""

from __future__ import annotations

import math
import numbers

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


def _check_fs(fs) -> float:
    if isinstance(fs, bool) or not isinstance(fs, numbers.Real) or not math.isfinite(fs) or fs <= 0:
        raise ValueError(f"fs must be a positive sample rate in Hz, got {fs!r}")
    return float(fs)


def taps_for_transition(transition: float, fs: float) -> int:
    """Hamming-window length for a transition band (MNE's rule): about 3.3 / (transition / fs), odd.
    ``ValueError`` when the band is so narrow that the length is not a number at all."""
    q = transition / fs
    n = 3.3 / q if q > 0 else math.inf
    if not math.isfinite(n):
        raise ValueError(f"transition {transition:g} Hz is too narrow for {fs:g} Hz (no filter has that many taps)")
    n = int(math.ceil(n))
    return n + 1 if n % 2 == 0 else n


#: Bytes per tap that designing a filter takes at its peak (float64 temporaries of firwin's windowed sincs).
DESIGN_BYTES_PER_TAP = 56


def check_design_memory(numtaps: int) -> None:
    """``ValueError`` (one line) when designing a ``numtaps`` filter would take more memory than this process can
    still have: refused at once rather than swapping or being killed midway. Designs under 256 MB pass unchecked."""
    need = DESIGN_BYTES_PER_TAP * int(numtaps)
    if need < 256 << 20:
        return
    free = available_memory()
    if free is not None and need > free:
        raise ValueError(f"a filter of {numtaps} taps needs about {need / 2**30:.1f} GiB to design, more than the "
                         f"{free / 2**30:.1f} GiB of memory free; use fewer --taps or a wider --transition")


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
    fs = _check_fs(fs)
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
        if transition is None:
            room = min(min(edges), nyq - max(edges))
            if want == 2:
                room = min(room, edges[1] - edges[0])
            transition = min(max(0.25 * min(edges), 2.0), room)
        if isinstance(transition, bool) or not isinstance(transition, numbers.Real) or not transition > 0:
            raise ValueError(f"transition must be a positive width in Hz, got {transition!r}")
        numtaps = taps_for_transition(float(transition), fs)
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
    fs = _check_fs(fs)
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
        numtaps = taps_for_transition(width, fs)
    if isinstance(numtaps, bool) or not isinstance(numtaps, numbers.Integral) or numtaps < 1 or numtaps % 2 == 0:
        raise ValueError(f"numtaps must be a positive odd integer for a notch filter, got {numtaps!r}")
    edges = np.ravel([(v - width / 2, v + width / 2) for v in f])
    return int(numtaps), edges
