"""The engine's array operations: which backend runs, SciPy's output windows, and the backend contracts.

Every 1-D mode is one call of the backend contract ``corr1d(x, w, pad, out_len)`` (see ``sigconv.backends``):
convolution passes the reversed taps, and ``pad``/``out_len`` select the window of the full result that
SciPy's ``mode`` names. The 2-D operations are one call of ``corr2d``.
"""

from __future__ import annotations

from typing import Optional

import numpy as np

from sigconv._core import devices
from sigconv._core.checks import check_finite_array
from sigconv._core.xp import array_namespace, is_cupy
from sigconv.backends import cpu, cuda1d, cuda2d  # importing the package fills the registry
from sigconv.registry import auto

__all__ = ["backend_for", "check_taps", "corr1d", "corr2d", "window_1d", "window_2d"]


def backend_for(backend: str, *arrays, job: Optional[str] = None) -> str:
    """The backend that runs: "auto" is cuda when any input is a cupy array, else as resolve_backend; with
    ``job`` (the array API's "conv1d", "conv2d" or "spectral", when the caller fixed no variant or block), the
    cpu for host inputs too small to repay the GPU (:func:`sigconv.registry.auto.host_job_on_cpu`), without
    probing it."""
    if backend == "auto" and any(is_cupy(a) for a in arrays):
        return "cuda"
    if backend == "auto" and job is not None and auto.host_job_on_cpu(job, max(int(np.size(a)) for a in arrays)):
        return "cpu"
    return devices.resolve_backend(backend)


def corr1d(x2, w, pad: int, out_len: int, *, backend: str, variant: str = "auto", block=None, host_taps=None):
    """Run the 1-D backend contract on (C, L) data already in the backend's memory.

    ``host_taps``: the caller's numpy copy of ``w`` (same values and dtype), if it has one; with it the
    cuda fft variant caches the filter spectrum without reading the taps back from the device."""
    if backend == "cpu":
        return cpu.corr1d(x2, w, pad, out_len, variant=variant, block=block)
    key = cuda1d.host_taps_key(host_taps) if host_taps is not None else None
    return cuda1d.corr1d(x2, w, pad, out_len, variant=variant, block=block, taps_key=key)


def corr2d(x4, w4, bias, stride, pad, out_hw, *, backend: str, variant: str = "auto", block=None,
           host_weights=None, boundary: str = "fill", fillvalue=0):
    """Run the 2-D backend contract on NCHW data already in the backend's memory.

    ``host_weights``: the caller's numpy copy of the weights, if it had one; with it the chooser knows whether
    they are rank-1, and the separable variant gets their factors, from the host (no device sync).
    ``boundary`` ("fill", "wrap", "symm") and ``fillvalue``: what the windows read beyond the image (SciPy's
    convolve2d rule; single-channel, stride-1 jobs only when not the default zero fill).
    """
    extended = {} if boundary == "fill" and fillvalue == 0 else {"boundary": boundary, "fillvalue": fillvalue}
    if backend == "cpu":
        return cpu.corr2d(x4, w4, bias, stride, pad, out_hw, variant=variant, block=block, **extended)
    sep, factors = auto.host_rank1(variant, tuple(w4.shape), host_weights)
    return cuda2d.corr2d(x4, w4, bias, stride, pad, out_hw, variant=variant, block=block, separable=sep,
                         factors=factors, **extended)


def window_1d(mode: str, L: int, K: int) -> tuple[int, int]:
    """(pad, out_len) of SciPy's ``mode`` for a length-L signal and K taps (correlation form)."""
    if mode == "full":
        return K - 1, L + K - 1
    if mode == "same":
        return K // 2, L
    # valid: convolution commutes, so when the kernel is longer the roles swap (as in SciPy)
    if L >= K:
        return 0, L - K + 1
    return K - L, K - L + 1


def window_2d(mode: str, shape: tuple, kshape: tuple, correlate: bool = False) -> tuple[tuple, tuple]:
    """((py, px), (Ho, Wo)) of scipy.signal.convolve2d's (or, with ``correlate``, correlate2d's)
    ``mode``, in the correlation form of the contract.

    Note SciPy centres "same" differently for the two with even kernel sides: convolve2d's output
    starts at k//2 into the padded input, correlate2d's at (k-1)//2 (unlike 1-D correlate, which
    is convolve with the reversed kernel).
    """
    (H, W), (kH, kW) = shape, kshape
    if mode == "full":
        return (kH - 1, kW - 1), (H + kH - 1, W + kW - 1)
    if mode == "same":
        if correlate:
            return ((kH - 1) // 2, (kW - 1) // 2), (H, W)
        return (kH // 2, kW // 2), (H, W)
    if H >= kH and W >= kW:
        return (0, 0), (H - kH + 1, W - kW + 1)
    if H <= kH and W <= kW:
        return (kH - H, kW - W), (kH - H + 1, kW - W + 1)
    raise ValueError(
        f"mode 'valid' needs one input at least as large as the other in every dimension; got input "
        f"{tuple(shape)} and kernel {tuple(kshape)}"
    )


def check_taps(h, name: str):
    xp = array_namespace(h)
    h = xp.asarray(h)
    if h.ndim != 1:
        raise ValueError(f"{name} must be 1-D (for 2-D kernels use convolve2d/correlate2d), got shape {h.shape}")
    if h.size == 0:
        raise ValueError(f"{name} must hold at least one tap, got an empty array")
    if xp is np:  # device taps are not checked: reading them back would wait for the GPU on every call
        check_finite_array(h, name)
    return h
