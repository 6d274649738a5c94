"""design_fir / design_notch: SciPy-identical taps, MNE's tap-count rule, clear errors."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss

import sigconv


@pytest.mark.parametrize("window", ["hamming", "hann", "blackman", "boxcar", ("kaiser", 8.0)])
@pytest.mark.parametrize(
    "kind, cutoff, numtaps",
    [("lowpass", 1000, 101), ("lowpass", 1000, 100), ("highpass", 300, 51), ("bandpass", (80, 8000), 7921),
     ("bandpass", (300, 3400), 64), ("bandstop", (45, 55), 301)],
)
def test_taps_match_firwin(kind, cutoff, numtaps, window):
    fs = 48000
    taps = sigconv.design_fir(kind, cutoff, fs, numtaps=numtaps, window=window)
    ref = ss.firwin(numtaps, cutoff, window=window, pass_zero=kind, fs=fs)
    np.testing.assert_allclose(taps, ref, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize("transition, fs, expected", [(20, 48000, 7921), (250, 48000, 635), (1, 100, 331),
                                                      (0.5, 100, 661)])
def test_numtaps_from_transition_mne_rule(transition, fs, expected):
    """numtaps = ceil(3.3 / (transition / fs)), forced odd."""
    taps = sigconv.design_fir("lowpass", min(fs / 4, 1000), fs, transition=transition)
    assert taps.size == expected and taps.size % 2 == 1


def test_default_transition_is_quarter_of_lowest_edge():
    """80-8000 Hz at 48 kHz: transition 20 Hz -> 7921 taps (the SoX comparison's length)."""
    assert sigconv.design_fir("bandpass", (80, 8000), 48000).size == 7921
    assert sigconv.design_fir("highpass", 1000, 48000).size == sigconv.design_fir("highpass", 1000, 48000,
                                                                                   transition=250).size


def test_default_transition_capped_near_nyquist():
    taps = sigconv.design_fir("lowpass", 23990, 48000)  # room to Nyquist is 10 Hz
    assert taps.size == int(np.ceil(3.3 / (10 / 48000))) | 1


def test_frequency_response_of_bandpass():
    fs = 48000
    taps = sigconv.design_fir("bandpass", (300, 3000), fs)
    w, h = ss.freqz(taps, worN=[50, 1000, 2000, 10000], fs=fs)
    mag = 20 * np.log10(np.abs(h))
    assert mag[1] > -0.1 and mag[2] > -0.1  # pass band
    assert mag[0] < -40 and mag[3] < -40  # stop bands


def test_notch_removes_its_frequencies_and_keeps_others():
    fs = 1000
    taps = sigconv.design_notch([50, 100], fs, width=4)
    assert taps.size % 2 == 1
    _, h = ss.freqz(taps, worN=[50, 100, 75, 200], fs=fs)
    mag = 20 * np.log10(np.abs(h) + 1e-20)
    assert mag[0] < -20 and mag[1] < -20
    assert abs(mag[2]) < 0.5 and abs(mag[3]) < 0.5
    edges = [48, 52, 98, 102]
    ref = ss.firwin(taps.size, edges, pass_zero="bandstop", fs=fs)
    np.testing.assert_allclose(taps, ref, rtol=1e-12, atol=1e-15)


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sigconv.design_fir("lowpass", 24000, 48000), "between 0 and Nyquist"),
        (lambda: sigconv.design_fir("lowpass", 30000, 48000), "between 0 and Nyquist"),
        (lambda: sigconv.design_fir("lowpass", 0, 48000), "between 0 and Nyquist"),
        (lambda: sigconv.design_fir("bandpass", (8000, 80), 48000), "low < high"),
        (lambda: sigconv.design_fir("bandpass", 80, 48000), "pair"),
        (lambda: sigconv.design_fir("comb", 80, 48000), "kind must be one of"),
        (lambda: sigconv.design_fir("lowpass", 100, 0), "fs must be a positive"),
        (lambda: sigconv.design_fir("lowpass", 100, 1000, numtaps=0), "numtaps must be a positive"),
        (lambda: sigconv.design_fir("lowpass", 100, 1000, numtaps=-5), "numtaps must be a positive"),
        (lambda: sigconv.design_fir("highpass", 100, 1000, numtaps=10), "numtaps must be odd"),
        (lambda: sigconv.design_fir("lowpass", 100, 1000, transition=0), "transition must be a positive"),
        (lambda: sigconv.design_fir("lowpass", 100, 1000, transition=-3), "transition must be a positive"),
        (lambda: sigconv.design_notch([], 1000), "freqs must be"),
        (lambda: sigconv.design_notch(499, 1000), "between width/2 and Nyquist"),
        (lambda: sigconv.design_notch(50, 1000, width=0), "width must be"),
        (lambda: sigconv.design_notch([50, 52], 1000, width=4), "apart"),
        (lambda: sigconv.design_notch(50, 1000, numtaps=100), "odd"),
    ],
)
def test_bad_design_arguments(call, match):
    with pytest.raises(ValueError, match=match):
        call()
