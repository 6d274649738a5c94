"""FIRStream: any packetisation gives lfilter of the concatenated signal; flush gives the tail."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss
from hypothesis import given, settings
from hypothesis import strategies as st

import sigconv
from conftest import rel_err


def _split(x, sizes):
    out, i = [], 0
    for s in sizes:
        out.append(x[..., i:i + s])
        i += s
    out.append(x[..., i:])
    return out


@settings(max_examples=60, deadline=None)
@given(K=st.integers(1, 300), sizes=st.lists(st.integers(0, 700), max_size=12), seed=st.integers(0, 2**32 - 1),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_any_packetisation_equals_lfilter(K, sizes, seed, dtype):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(sum(sizes) + int(rng.integers(0, 50))).astype(dtype)
    taps = rng.standard_normal(K).astype(dtype)
    s = sigconv.FIRStream(taps, backend="cpu")
    y = np.concatenate([s.process(p) for p in _split(x, sizes)])
    tol = 1e-5 if dtype == np.float32 else 1e-10
    assert y.dtype == dtype
    tail = s.flush()
    if x.size == 0:  # an empty stream: no output, and a tail of zeros (scipy's lfilter refuses empty input)
        assert y.size == 0 and tail.shape == (K - 1,) and not np.any(tail)
        return
    assert rel_err(y, ss.lfilter(taps.astype(float), 1, x.astype(float))) <= tol
    full = np.convolve(x.astype(float), taps.astype(float))
    assert rel_err(np.concatenate([y, tail]), full) <= tol


def test_long_filter_short_packets_and_long_packets(rng):
    """7921 taps (the fft path) fed 64-sample packets, then one 200k packet."""
    taps = sigconv.design_fir("bandpass", (80, 8000), 48000)
    x = rng.standard_normal(20_000 + 200_000)
    s = sigconv.FIRStream(taps, fs=48000, backend="cpu")
    parts = [s.process(p) for p in np.array_split(x[:20_000], 20_000 // 64)] + [s.process(x[20_000:])]
    assert rel_err(np.concatenate(parts), ss.oaconvolve(x, taps)[:x.size]) <= 1e-10


@pytest.mark.parametrize("axis", [-1, 0])
def test_multichannel_both_orientations(rng, axis):
    taps = rng.standard_normal(101)
    x = rng.standard_normal((3, 5000))
    s = sigconv.FIRStream(taps, channels=3, axis=axis, backend="cpu")
    packets = np.array_split(np.arange(5000), 9)
    outs = [s.process(x[:, p] if axis == -1 else x[:, p].T) for p in packets]
    y = np.concatenate(outs, axis=-1 if axis == -1 else 0)
    y = y if axis == -1 else y.T
    assert rel_err(y, ss.lfilter(taps, 1, x, axis=-1)) <= 1e-10


def test_reset_starts_a_new_stream(rng):
    taps, x = rng.standard_normal(9), rng.standard_normal(100)
    s = sigconv.FIRStream(taps, backend="cpu")
    s.process(rng.standard_normal(50))
    s.reset()
    assert rel_err(s.process(x), ss.lfilter(taps, 1, x)) <= 1e-10


def test_errors():
    with pytest.raises(ValueError, match="channels must be"):
        sigconv.FIRStream(np.ones(3), channels=0, backend="cpu")
    with pytest.raises(ValueError, match="at least one tap"):
        sigconv.FIRStream(np.ones(0), backend="cpu")
    with pytest.raises(ValueError, match="taps must be finite"):
        sigconv.FIRStream(np.array([1.0, np.inf]), backend="cpu")
    s = sigconv.FIRStream(np.ones(3), channels=2, backend="cpu")
    with pytest.raises(ValueError, match="look transposed"):
        s.process(np.ones((100, 2)))
    with pytest.raises(ValueError, match="2 channel"):
        s.process(np.ones((3, 10)))


@pytest.mark.parametrize("axis, expected", [(-1, "(2, n) (channels, frames)"), (0, "(n, 2) (frames, channels)")])
def test_wrong_rank_packet_names_the_expected_shape(axis, expected):
    """A 1-D packet for a 2-channel stream: the message gives the shape the stream takes, in its orientation."""
    s = sigconv.FIRStream(np.ones(3), channels=2, axis=axis, backend="cpu")
    with pytest.raises(ValueError) as e:
        s.process(np.zeros(100))
    assert str(e.value) == (f"packet must be {expected} for a 2-channel stream with axis={axis}, "
                            "got shape (100,)")
    one = sigconv.FIRStream(np.ones(3), axis=axis, backend="cpu")
    with pytest.raises(ValueError, match=r"must be 1-D \(n,\) or .* 1-channel stream.*got shape \(2, 2, 2\)"):
        one.process(np.zeros((2, 2, 2)))


@pytest.mark.parametrize("sizes", [[100_000, 50_000], [3000, 7, 65_536], [1]])
def test_overlap_save_on_numpy_fft_matches_float64_and_scipy_fft(rng, sizes):
    """The cpu filter's two FFT libraries: each block, long or shorter than the filter (its transform then shrinks),
    within float32 rounding of the float64 lfilter, and numpy.fft within rounding of scipy.fft."""
    from sigconv.backends.cpu import OverlapSave

    K, C = 2047, 2
    h = rng.standard_normal(K).astype(np.float32)
    x = rng.standard_normal((C, sum(sizes))).astype(np.float32)
    outs = {}
    for lib in ("scipy", "numpy"):
        f = OverlapSave(h, C, np.float32, method="fft", fft=lib)
        outs[lib] = np.concatenate([f.process(p) for p in _split(x, sizes)], axis=1)
    ref = ss.lfilter(h.astype(np.float64), 1.0, x.astype(np.float64), axis=1)
    # the rounding of a float32 transform of the whole filter scales with ||h|| ||x||, not with the few products a short
    # output sums (one sample: |h[0] x[0]|, which a small h[0] makes far smaller)
    scale = max(np.linalg.norm(ss.lfilter(np.abs(h).astype(np.float64), 1.0, np.abs(x).astype(np.float64), axis=1)),
                np.linalg.norm(h.astype(np.float64)) * np.linalg.norm(x.astype(np.float64)))
    assert rel_err(outs["numpy"], ref, scale) < 1e-6
    assert rel_err(outs["numpy"], outs["scipy"], scale) < 1e-6


def test_overlap_save_refuses_an_unknown_fft_library():
    from sigconv.backends.cpu import OverlapSave

    with pytest.raises(ValueError, match="fft must be 'scipy' or 'numpy', got 'fftw'"):
        OverlapSave(np.ones(3), 1, fft="fftw")
