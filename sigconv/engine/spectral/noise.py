"""Noise statistics of the spectral gate, backend-generic (``xp`` is numpy or cupy).

* Estimated stationary floor: a low quantile (:data:`EST_QUANTILE`) of each frequency's cell dB over the whole
  signal, from a histogram per frequency (so a streaming pass gives the same counts), turned into a noise power by
  the quantile of an exponential distribution (the power of Gaussian noise in one cell), plus the dB mean/std of
  that Rayleigh model (:data:`RAYLEIGH_MEAN_DB`, :data:`RAYLEIGH_STD_DB`). The histogram is linearly binned (a cell
  splits its count between the two nearest grid points) and the quantile is read by linear interpolation, so it
  moves continuously with the cells' dB: the cpu and cuda FFTs round differently, and with hard bin edges a cell
  that crosses one could move a frequency's threshold by a whole bin (0.1 dB) between backends.
* Non-stationary floor: a running minimum over time (:func:`sliding_min` on cuda, SciPy's filter on the cpu).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["HIST_LO_DB", "HIST_HI_DB", "HIST_STEP_DB", "HIST_BINS", "EST_QUANTILE", "RAYLEIGH_MEAN_DB",
           "RAYLEIGH_STD_DB", "hist_add", "hist_view", "noise_db_from_hist", "sliding_min"]

#: Histogram of cell dB for the estimated statistics: range and step; grid point j is at LO + j * STEP dB.
HIST_LO_DB, HIST_HI_DB, HIST_STEP_DB = -160.0, 40.0, 0.1
HIST_BINS = int(round((HIST_HI_DB - HIST_LO_DB) / HIST_STEP_DB))
#: Quantile of each frequency's cell dB that estimates the noise level when no noise clip is given.
EST_QUANTILE = 0.2
#: Mean and std of 10*log10(E) for E ~ Exp(1): the dB of one STFT cell of Gaussian noise relative to its power.
RAYLEIGH_MEAN_DB = -10.0 * 0.5772156649015329 / math.log(10.0)
RAYLEIGH_STD_DB = 10.0 / math.log(10.0) * math.pi / math.sqrt(6.0)


def hist_add(hist, d, row, rows: int, *, runs: bool = False):
    """Count cell dB ``d`` into ``hist`` (flat float64, bin-major: grid point j of row r at ``j * rows + r``, see
    :func:`hist_view`; a row is one channel and frequency, ``r = c * F + f``; ``row`` gives each cell's row,
    broadcast against ``d``), linearly binned: a cell at grid position p (in steps from HIST_LO_DB, clipped to the
    grid) adds 1 - (p - j) at j = floor(p) and p - j at j + 1, so the counts are continuous in p (no hard bin
    edge to cross). The host rule; the cuda backend's kernel does the same with atomics.

    Two ways to add, the same counts: ``runs=False``, ``np.add.at`` (fastest on one thread, but it holds the GIL,
    so threads running it take turns); ``runs=True`` for ``d`` given as (rows, n) with each row in ascending
    order: the cells of a row that share a grid point are then neighbours, each such run is summed
    (``reduceat``) and added once through indices that are unique, by fancy indexing, which releases the GIL
    (about 2.5x the time of add.at on one thread, but threads scale).
    """
    p = d.astype(np.float64)
    p -= HIST_LO_DB
    p *= 1.0 / HIST_STEP_DB
    np.maximum(p, 0.0, out=p)
    np.fmin(p, HIST_BINS - 1.0, out=p)  # fmin: a NaN cell (a power that overflowed the transform) counts as loudest
    j = np.floor(p)
    np.minimum(j, HIST_BINS - 2.0, out=j)  # p = HIST_BINS - 1 goes to (j, j+1) with weight 1 at j+1
    p -= j  # the weight at j + 1
    key = j.astype(np.int64)
    key *= rows
    key += row
    key, frac = key.ravel(), p.ravel()
    if not runs:
        np.add.at(hist, key, 1.0 - frac)
        key += rows
        np.add.at(hist, key, frac)
        return
    first = np.empty(key.size, bool)
    first[:1] = True
    np.not_equal(key[1:], key[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    hi = np.add.reduceat(frac, starts) if key.size else frac[:0]
    lo = np.diff(starts, append=key.size) - hi  # sum of 1 - frac over a run
    u = key[starts]
    hist[u] += lo
    u += rows
    hist[u] += hi


def hist_view(hist: np.ndarray, Cm: int, F: int) -> np.ndarray:
    """The flat bin-major histogram of :func:`hist_add` (rows = Cm * F) as (Cm, F, HIST_BINS) (a view)."""
    return hist.reshape(HIST_BINS, Cm, F).transpose(1, 2, 0)


def noise_db_from_hist(h: np.ndarray, n_std: float) -> np.ndarray:
    """(Cm, F) threshold dB (noise mean + ``n_std`` std) from linearly binned counts ``h`` (Cm, F, HIST_BINS).

    The cumulative weight C_j at the grid points, joined linearly, is a continuous CDF; the quantile is where it
    reaches ``floor(q * n) + 1/2`` (n: cells counted). That level is never an integer, and C is flat only at
    integer levels (a flat stretch means no cell near it, so every cell is counted wholly or not at all), so
    the crossing point moves continuously with the cells' dB; the segment it crosses holds more than half a
    cell of weight, so a cell moving by d steps moves the quantile by less than 2 d. C_j counts the cells up to
    about half a step above grid point j, hence the + 0.5 step.
    """
    cum = np.cumsum(h, axis=-1)
    n = np.rint(cum[..., -1:])  # an integer up to rounding: frames counted
    target = np.floor(EST_QUANTILE * n) + 0.5
    k = np.argmax(cum >= target, axis=-1)[..., None]  # first grid point at or above the target
    c_hi = np.take_along_axis(cum, k, -1)
    c_lo = np.where(k > 0, np.take_along_axis(cum, np.maximum(k - 1, 0), -1), 0.0)
    pos = np.where(k > 0, (k - 1) + (target - c_lo) / np.maximum(c_hi - c_lo, 1e-300), 0.0)[..., 0]
    q_db = HIST_LO_DB + (pos + 0.5) * HIST_STEP_DB
    # Exp(1) power: P(E <= e) = q at e = -ln(1 - q); noise power = quantile / e
    noise_db = q_db - 10.0 * math.log10(-math.log1p(-EST_QUANTILE))
    return noise_db + RAYLEIGH_MEAN_DB + n_std * RAYLEIGH_STD_DB


def sliding_min(xp, a, size: int, axis: int):
    """``scipy.ndimage.minimum_filter1d(a, size, axis, mode="nearest")``, exactly, by log-step doubling:
    about log2(size) elementwise minimums over slices along ``axis`` (contiguous rows stay contiguous)
    instead of ``size`` comparisons per element, which is what cupyx's filter does (a 189-frame window
    on an hour of 48 kHz audio: 65 G comparisons against 8 passes). Used on the cuda backend."""
    size = int(size)
    if size <= 1:
        return a.copy()
    nd = a.ndim
    ax = axis % nd

    def sl(s):
        idx = [slice(None)] * nd
        idx[ax] = s
        return tuple(idx)

    left = size // 2  # SciPy's centring: window [i - size//2, i + size - 1 - size//2]
    n = a.shape[ax]
    widths = [(0, 0)] * nd
    widths[ax] = (left, size - 1 - left)
    p = xp.pad(a, widths, mode="edge")  # n + size - 1 along ax
    span = 1
    while 2 * span <= size:  # p[i] = min of the padded input over [i, i + 2*span)
        p = xp.minimum(p[sl(slice(None, -span))], p[sl(slice(span, None))])
        span *= 2
    return xp.minimum(p[sl(slice(0, n))], p[sl(slice(size - span, size - span + n))])
