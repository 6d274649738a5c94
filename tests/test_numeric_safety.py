"""Numeric safety of the array API and the engine: samples of any finite magnitude give the accuracy of normal ones
(the FFT paths scale by exact powers of two), an output the file cannot hold is refused rather than written, non-
numeric dtypes get one clear line, derived sizes are checked before anything is allocated, and defaults adapt to
extreme rates instead of blaming an option the user never gave. Any RuntimeWarning fails these tests."""

from __future__ import annotations

import re
import time
import tracemalloc

import numpy as np
import pytest
import scipy.signal
import soundfile as sf

import sigconv
from conftest import run_cli, write_audio

pytestmark = pytest.mark.filterwarnings("error")

#: Relative error allowed against a float64 direct sum, relative to the output's peak.
TOL = {np.float32: 2e-6, np.float64: 1e-13}
#: (dtype, power of two) of the huge and the tiny scales tried: each far outside the range the FFT handles
#: unscaled, yet leaving the true result representable.
SCALES = [(np.float32, 120), (np.float32, -120), (np.float64, 1000), (np.float64, -1000)]


def _rel(y, ref):
    y = np.asarray(y, np.float64)
    assert np.all(np.isfinite(y)), f"non-finite outputs at {np.argwhere(~np.isfinite(y))[:3].tolist()}"
    return float(np.max(np.abs(y - ref)) / np.max(np.abs(ref)))


def _operands(rng, dtype, K, shape=(2, 1823)):
    """(x of peak ~1, taps of sum |h| ~ 1) as ``dtype``: an exact power of two scales them without rounding."""
    x = rng.standard_normal(shape).astype(dtype)
    h = (rng.standard_normal(K) / K).astype(dtype)
    return x, h


@pytest.mark.parametrize("dtype, e", SCALES)
@pytest.mark.parametrize("K", [31, 32])
@pytest.mark.parametrize("variant", ["fft", "auto"])
def test_convolve_and_correlate_keep_their_accuracy_at_any_magnitude(rng, dtype, e, K, variant):
    x, h = _operands(rng, dtype, K)
    xs = np.ldexp(x, e).astype(dtype)
    for fn, ref_fn in ((sigconv.convolve, np.convolve), (sigconv.correlate, np.correlate)):
        for mode in ("full", "same", "valid"):
            y = fn(xs, h, mode, axis=-1, backend="cpu", variant=variant)
            assert y.dtype == dtype
            ref = np.stack([ref_fn(r.astype(np.float64), h.astype(np.float64), mode) for r in x])
            if mode == "same" and fn is sigconv.correlate:  # SciPy's "same" centring for correlate
                ref = scipy.signal.correlate(x.astype(np.float64), h.astype(np.float64)[None], "same")
            err = _rel(np.ldexp(y.astype(np.float64), -e), ref)
            assert err < TOL[dtype], (fn.__name__, mode, err)


def test_huge_samples_give_what_the_direct_sum_gives():
    x = np.sin(np.arange(4096) * 0.01) * 1e306
    y = sigconv.convolve(x, np.full(101, 0.01), "same", backend="cpu", variant="fft")
    ref = scipy.signal.convolve(x, np.full(101, 0.01), "same", method="direct")
    assert np.isfinite(ref).all() and _rel(y, ref) < 1e-13


@pytest.mark.parametrize("dtype, e", SCALES)
def test_2d_and_apply_fir_keep_their_accuracy_at_any_magnitude(rng, dtype, e):
    x = rng.standard_normal((37, 41)).astype(dtype)
    k = (rng.standard_normal((5, 4)) / 20).astype(dtype)
    xs = np.ldexp(x, e).astype(dtype)
    for fn, ref_fn in ((sigconv.convolve2d, scipy.signal.convolve2d), (sigconv.correlate2d, scipy.signal.correlate2d)):
        for mode in ("full", "same", "valid"):
            y = fn(xs, k, mode, backend="cpu", variant="fft")
            ref = ref_fn(x.astype(np.float64), k.astype(np.float64), mode)
            assert _rel(np.ldexp(y.astype(np.float64), -e), ref) < 10 * TOL[dtype], (fn.__name__, mode)
    x1, h = _operands(rng, dtype, 31)
    for phase, ref in (("zero", [np.convolve(r, h.astype(np.float64), "same") for r in x1.astype(np.float64)]),
                       ("linear", scipy.signal.lfilter(h.astype(np.float64), 1, x1.astype(np.float64), axis=-1))):
        y = sigconv.apply_fir(np.ldexp(x1, e).astype(dtype), h, phase=phase, backend="cpu", variant="fft")
        assert _rel(np.ldexp(y.astype(np.float64), -e), np.asarray(ref)) < TOL[dtype], phase


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("variant", ["fft", "auto"])
def test_stream_state_crosses_blocks_of_changing_magnitude(rng, dtype, variant):
    """Quiet, huge and tiny stretches in one stream, cut anywhere: every output matches the direct sum relative to
    the stream's peak, the flushed tail included (each block is scaled on its own; the history is kept as it came)."""
    big, tiny = (2.0 ** 120, 2.0 ** -100) if dtype == np.float32 else (2.0 ** 1000, 2.0 ** -1000)
    for K in (31, 32, 301):
        h = (rng.standard_normal(K) / K).astype(dtype)
        x = rng.standard_normal(12000)
        x[3000:7000] *= big
        x[9000:] *= tiny
        x = x.astype(dtype)
        s = sigconv.FIRStream(h, backend="cpu", variant=variant)
        cuts = np.sort(rng.choice(np.arange(1, x.size), 6, replace=False))
        y = np.concatenate([s.process(p) for p in np.split(x, cuts)] + [s.flush()])
        ref = np.convolve(x.astype(np.float64), h.astype(np.float64))
        scale = float(np.max(np.abs(ref)))
        assert np.all(np.isfinite(y)) and np.max(np.abs(y - ref)) / scale < TOL[dtype], K
        # a stream that is huge throughout keeps the accuracy relative to its own scale
        s.reset()
        xs = np.ldexp(x[:3000], 100 if dtype == np.float32 else 1000).astype(dtype)
        ys = np.concatenate([s.process(p) for p in np.array_split(xs, 5)])
        assert _rel(ys, np.convolve(xs.astype(np.float64), h.astype(np.float64))[:3000]) < TOL[dtype]


def test_file_engine_filters_a_float_file_with_a_huge_sample(tmp_path, rng):
    """A 1e35 sample in a float WAV used to overflow the float32 FFTs to inf: now the output is the direct sum."""
    x = (0.1 * rng.standard_normal((6000, 2))).astype(np.float32)
    x[1000, 1] = 1e35
    src = write_audio(tmp_path / "loud.wav", x, fs=48000, subtype="FLOAT")
    fir = sigconv.FirSpec(lowpass=8000, taps=301)
    job = sigconv.prepare_denoise(src, tmp_path / "out.wav", fir=fir, kernel=sigconv.KernelChoice(backend="cpu",
                                                                                                   variant="fft"))
    job.run()
    y, _ = sf.read(str(tmp_path / "out.wav"), dtype="float64", always_2d=True)
    taps = fir.design(48000.0).taps.astype(np.float32).astype(np.float64)
    ref = np.stack([np.convolve(c, taps, "same") for c in x.T.astype(np.float64)], axis=1)
    assert np.isfinite(y).all() and np.max(np.abs(y - ref)) / np.max(np.abs(ref)) < 1e-6


def test_an_output_the_file_cannot_hold_is_refused_naming_the_sample(tmp_path, rng):
    """Samples near the float32 maximum, signed as the filter's taps, make a true result beyond float32: refused
    with one line naming the file, the frame and the channel; nothing is written, and no warning is printed. A NaN
    in the input is refused the same way."""
    taps = sigconv.FirSpec(lowpass=8000, taps=101).design(48000.0).taps
    assert np.abs(taps).sum() * 3e38 > np.finfo(np.float32).max  # the true result is beyond float32 there
    x = (0.1 * rng.standard_normal((4000, 2))).astype(np.float32)
    x[2000:2101, 1] = np.sign(taps[::-1]) * np.float32(3e38)
    src = write_audio(tmp_path / "too_loud.wav", x, fs=48000, subtype="FLOAT")
    r = run_cli("denoise", src, "-o", tmp_path / "out.wav", "--lowpass", "8000", "--taps", "101", "--backend", "cpu")
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 1 and len(lines) == 1, r.stderr
    assert lines[0].startswith(f"sigconv: error: {src}: ") and "channel 1" in lines[0], lines[0]
    frame = int(re.search(r"at frame (\d+) ", lines[0]).group(1))
    assert 2000 <= frame <= 2100, lines[0]  # where the loud stretch lies
    assert "float32" in lines[0] and "Warning" not in r.stderr
    x[123, 0] = np.nan
    nan_src = write_audio(tmp_path / "nan.wav", x, fs=48000, subtype="FLOAT")
    r = run_cli("denoise", nan_src, "-o", tmp_path / "out2.wav", "--lowpass", "8000", "--taps", "101",
                "--backend", "cpu")
    assert r.returncode == 1 and "frame 123" in r.stderr and "channel 0" in r.stderr, r.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nan.wav", "too_loud.wav"]


# ------------------------------------------------------------------------------------------- dtypes

_BAD = {
    "object": np.array([1.0, 2.0, 3.0], dtype=object),
    "str": np.array(["a", "b", "c"]),
    "bytes": np.array([b"a", b"b", b"c"]),
    "datetime": np.array(["2020-01-01"] * 3, dtype="datetime64[D]"),
    "timedelta": np.array([1, 2, 3], dtype="timedelta64[s]"),
    "structured": np.zeros(3, dtype=[("a", "f8")]),
}
_GOOD = np.array([1.0, 2.0, 3.0])
_CALLS = {
    "convolve x": lambda b: sigconv.convolve(b, _GOOD, backend="cpu"),
    "convolve h": lambda b: sigconv.convolve(_GOOD, b, backend="cpu"),
    "correlate h": lambda b: sigconv.correlate(_GOOD, b, backend="cpu"),
    "apply_fir x": lambda b: sigconv.apply_fir(b, _GOOD, backend="cpu"),
    "apply_fir taps": lambda b: sigconv.apply_fir(_GOOD, b, backend="cpu"),
    "convolve2d x": lambda b: sigconv.convolve2d(b[None], _GOOD[None], backend="cpu"),
    "correlate2d k": lambda b: sigconv.correlate2d(_GOOD[None], b[None], backend="cpu"),
    "conv2d x": lambda b: sigconv.conv2d(b.reshape(1, 1, 1, 3), np.ones((1, 1, 1, 1)), backend="cpu"),
    "conv2d w": lambda b: sigconv.conv2d(np.ones((1, 1, 1, 3)), b.reshape(3, 1, 1, 1), backend="cpu"),
    "conv2d bias": lambda b: sigconv.conv2d(np.ones((1, 1, 1, 3)), np.ones((3, 1, 1, 1)), b, backend="cpu"),
    "FIRStream taps": lambda b: sigconv.FIRStream(b, backend="cpu"),
    "FIRStream packet": lambda b: sigconv.FIRStream(_GOOD, backend="cpu").process(b),
    "spectral_denoise x": lambda b: sigconv.spectral_denoise(np.resize(b, 64), 8000, n_fft=16, backend="cpu"),
    "spectral_denoise noise": lambda b: sigconv.spectral_denoise(np.ones(64), 8000, noise=np.resize(b, 64),
                                                                 n_fft=16, backend="cpu"),
}


@pytest.mark.parametrize("call", list(_CALLS))
@pytest.mark.parametrize("kind", list(_BAD))
def test_non_numeric_dtypes_get_one_clear_line(call, kind):
    bad = _BAD[kind]
    with pytest.raises(TypeError) as info:
        _CALLS[call](bad)
    msg = str(info.value)
    assert "\n" not in msg and f"dtype {bad.dtype}" in msg and "bool, integer or float" in msg, msg
    assert "ufunc" not in msg


def test_complex_inputs_stay_a_value_error():
    with pytest.raises(ValueError, match="complex"):
        sigconv.convolve(_GOOD + 1j, _GOOD, backend="cpu")


# ------------------------------------------------------------------------------------------- sizes


def _fast_and_small(fn, match):
    """``fn()`` raises ValueError matching ``match`` in under 2 s with under 50 MB allocated."""
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        with pytest.raises(ValueError, match=match) as info:
            fn()
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert seconds < 2.0 and peak < 50 << 20, (seconds, peak)
    assert "\n" not in str(info.value) and len(str(info.value)) < 400, str(info.value)
    return str(info.value)


def test_filter_sizes_are_refused_before_designing():
    # a transition whose tap count is not a number anyone can hold: named, with a short count
    msg = _fast_and_small(lambda: sigconv.FirSpec(lowpass=3000, transition=1e-300).length(16000), "too narrow")
    assert msg.startswith("transition 1e-300 Hz") and "5.28e+304 taps" in msg
    # the default transition (no option given) is not blamed on an option
    msg = _fast_and_small(lambda: sigconv.FirSpec(band=(1e-300, 7000)).length(16000), "too narrow")
    assert msg.startswith("the default transition") and "--transition" not in msg
    # designs beyond the memory budget, without a signal length to compare with
    _fast_and_small(lambda: sigconv.design_fir("lowpass", 3000, 48000, transition=0.001), "GiB to design")
    _fast_and_small(lambda: sigconv.FirSpec(lowpass=3000, taps=10 ** 30).design(48000), r"1e\+30 taps needs")
    # against the file: the option that set the length is named
    with pytest.raises(sigconv.InputError, match=r"^one\.wav: the filter \(52800001 taps, 3\.3e\+03 s, from "
                                                 r"--transition 0\.001 Hz\) is longer than the file"):
        sigconv.FirSpec(transition=0.001).design(16000.0, frames=16000, source="one.wav")


@pytest.mark.parametrize("shape, fs", [((4096,), 8000), ((2, 2049), 48000)])
def test_spectrogram_sizes_are_refused_before_allocating(shape, fs):
    sigconv.spectral_denoise(np.zeros(64), 8000, n_fft=16, backend="cpu")  # imports out of the timing
    msg = _fast_and_small(lambda: sigconv.spectral_denoise(np.zeros(shape), fs, stationary=False, hop=1,
                                                           backend="cpu"), "hop=1 and n_fft=2048")
    assert "GiB" in msg and "frames x 1025 bins" in msg


def test_a_ghz_recording_gets_the_default_smoothing_shortened(tmp_path, rng):
    src = write_audio(tmp_path / "ghz.aiff", 0.1 * rng.standard_normal(20000), fs=1_000_000_000, format="AIFF")
    kernel = sigconv.KernelChoice(backend="cpu")
    job = sigconv.prepare_denoise(src, tmp_path / "out.aiff", method="spectral", kernel=kernel)
    assert "time smoothing 0.262 ms (the default 50 ms is more than 256 frames" in job.description
    assert job.fir_design is None  # (the gate designs no FIR)
    job.run()
    assert sf.info(str(tmp_path / "out.aiff")).frames == 20000
    with pytest.raises(ValueError, match=r"time_smooth_ms must be in \[0, 0\.262144\].*got 50\.0"):
        sigconv.prepare_denoise(src, tmp_path / "out2.aiff", method="spectral", kernel=kernel,
                                gate=sigconv.GateSpec(time_smooth_ms=50.0))  # given explicitly: refused
    assert sigconv.GateSpec().time_smooth_ms == 50.0 and repr(sigconv.GateSpec().time_smooth_ms) == "50.0"


@pytest.mark.parametrize("fs", [1e-320, 1e-300, 1e-10, 2e12, 1e300])
def test_absurd_rates_are_refused_naming_the_rate(fs):
    calls = [lambda: sigconv.design_fir("lowpass", fs / 4, fs, numtaps=31),
             lambda: sigconv.FirSpec().length(fs, "log"),
             lambda: sigconv.FirSpec(lowpass=fs / 4).design(fs),
             lambda: sigconv.spectral_denoise(np.zeros(64), fs, n_fft=16, backend="cpu"),
             lambda: sigconv.apply_fir(np.zeros(8), [1.0], fs, backend="cpu"),
             lambda: sigconv.FIRStream([1.0], fs=fs, backend="cpu")]
    for call in calls:
        with pytest.raises(ValueError, match=re.escape(f"fs {fs:g} Hz is outside the sample rates sigconv filters")):
            call()
    assert sigconv.FirSpec(lowpass=1e8).length(1e9) > 1 and sigconv.FirSpec().length(1e-9, "log") > 1
