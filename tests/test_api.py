"""sigconv.convolve/correlate/convolve2d/correlate2d/apply_fir equal SciPy on the cpu backend."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal as ss
from hypothesis import given, settings
from hypothesis import strategies as st

import sigconv
from conftest import TOL, rel_err

MODES = ["full", "same", "valid"]


def _ref1d(fn, x, h, mode):
    """SciPy reference per channel (scipy.signal.convolve has no axis argument), in float64."""
    x64, h64 = np.asarray(x, np.float64), np.asarray(h, np.float64)
    if x64.ndim == 1:
        return fn(x64, h64, mode=mode, method="direct")
    return np.stack([fn(row, h64, mode=mode, method="direct") for row in x64])


@settings(max_examples=150, deadline=None)
@given(
    L=st.integers(1, 300),
    K=st.integers(1, 80),
    C=st.integers(0, 3),
    mode=st.sampled_from(MODES),
    corr=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]),
    variant=st.sampled_from(["auto", "direct", "fft"]),
    seed=st.integers(0, 2**32 - 1),
)
def test_matches_scipy_property(L, K, C, mode, corr, dtype, variant, seed):
    """Every mode, odd/even K, K > L, 1-D and C x L, both dtypes and both cpu variants equal SciPy."""
    rng = np.random.default_rng(seed)
    shape = (L,) if C == 0 else (C, L)
    x = rng.standard_normal(shape).astype(dtype)
    h = rng.standard_normal(K).astype(dtype)
    fn, ref_fn = (sigconv.correlate, ss.correlate) if corr else (sigconv.convolve, ss.convolve)
    y = fn(x, h, mode, axis=-1, backend="cpu", variant=variant)
    ref = _ref1d(ref_fn, x, h, mode)
    assert y.dtype == dtype
    scale = np.linalg.norm(_ref1d(ref_fn, np.abs(x), np.abs(h), mode))  # error bound of a float sum
    assert rel_err(y, ref, scale) <= TOL[np.dtype(dtype)]


@pytest.mark.parametrize("mode", MODES)
def test_axis0_multichannel(rng, mode):
    """(L, C) data filtered along axis 0 equals filtering each column."""
    x = rng.standard_normal((500, 3))
    h = rng.standard_normal(31)
    y = sigconv.convolve(x, h, mode, axis=0, backend="cpu")
    ref = _ref1d(ss.convolve, x.T, h, mode).T
    assert rel_err(y, ref) <= 1e-10


def test_three_d_input_axis1(rng):
    x = rng.standard_normal((2, 400, 3))
    h = rng.standard_normal(9)
    y = sigconv.correlate(x, h, "same", axis=1, backend="cpu")
    ref = np.stack([np.stack([ss.correlate(x[i, :, j], h, "same") for j in range(3)], -1) for i in range(2)])
    assert rel_err(y, ref) <= 1e-10


def test_integers_stay_integers_as_in_scipy():
    y = sigconv.convolve(np.array([1, 2, 3], dtype=np.int16), np.array([1, 1], dtype=np.int32), backend="cpu")
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [1, 3, 5, 3])


def test_mixed_float32_float64_is_float64(rng):
    y = sigconv.convolve(rng.standard_normal(10).astype(np.float32), rng.standard_normal(3), backend="cpu")
    assert y.dtype == np.float64


def test_long_signal_fft_path(rng):
    """A long signal and long kernel (the fft path) stays within float32/float64 tolerance."""
    x = rng.standard_normal((2, 200_003))
    h = rng.standard_normal(1001)
    for dt in (np.float32, np.float64):
        y = sigconv.convolve(x.astype(dt), h.astype(dt), "same", axis=-1, backend="cpu", variant="fft")
        ref = np.stack([ss.oaconvolve(r, h, "same") for r in x])
        assert rel_err(y, ref) <= TOL[np.dtype(dt)]


@pytest.mark.parametrize("K", [1, 2, 31, 32, 101])
def test_apply_fir_zero_and_linear(rng, K):
    x = rng.standard_normal((2, 1823))
    taps = rng.standard_normal(K)
    lin = sigconv.apply_fir(x, taps, phase="linear", backend="cpu")
    assert rel_err(lin, ss.lfilter(taps, 1, x, axis=-1)) <= 1e-10
    if K % 2:
        zero = sigconv.apply_fir(x, taps, fs=1000, phase="zero", backend="cpu")
        assert rel_err(zero, _ref1d(ss.convolve, x, taps, "same")) <= 1e-10
    else:
        with pytest.raises(ValueError, match="odd number of taps"):
            sigconv.apply_fir(x, taps, phase="zero", backend="cpu")


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("xs,ks", [((7, 9), (3, 3)), ((13, 5), (4, 2)), ((3, 4), (5, 6)), ((1, 17), (1, 4)),
                                   ((11, 1), (3, 1)), ((6, 6), (6, 6))])
def test_2d_matches_scipy(rng, mode, xs, ks):
    """convolve2d / correlate2d equal scipy.signal's (boundary fill) for every mode, incl. kernel > input."""
    x = rng.standard_normal(xs)
    k = rng.standard_normal(ks)
    for fn, ref_fn in ((sigconv.convolve2d, ss.convolve2d), (sigconv.correlate2d, ss.correlate2d)):
        try:
            ref = ref_fn(x, k, mode=mode)
        except ValueError:
            with pytest.raises(ValueError):
                fn(x, k, mode, backend="cpu")
            continue
        for variant in ("direct", "fft"):
            y = fn(x, k, mode, backend="cpu", variant=variant)
            assert rel_err(y, ref) <= 1e-10, (fn.__name__, variant)
            y32 = fn(x.astype(np.float32), k.astype(np.float32), mode, backend="cpu", variant=variant)
            scale = np.linalg.norm(ref_fn(np.abs(x), np.abs(k), mode=mode))  # float32 rounding bound
            assert y32.dtype == np.float32 and rel_err(y32, ref, scale) <= 1e-5


# ------------------------------------------------------------------------------ errors


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), "middle", backend="cpu"), "mode must be one of"),
        (lambda: sigconv.convolve(np.ones(0), np.ones(3), backend="cpu"), "must not be empty"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(0), backend="cpu"), "must not be empty"),
        (lambda: sigconv.convolve(np.ones((2, 0)), np.ones(3), axis=1, backend="cpu"), "must not be empty"),
        (lambda: sigconv.apply_fir(np.ones(5), np.array([1.0, np.nan]), backend="cpu"), "taps must be finite"),
        (lambda: sigconv.apply_fir(np.ones((2, 0)), np.ones(3), axis=1, backend="cpu"),
         r"^x must hold at least one sample along axis 1, got shape \(2, 0\)$"),
        (lambda: sigconv.spectral_denoise(np.ones((2, 0)), 48000, axis=1, backend="cpu"),
         r"^x must hold at least one sample along axis 1, got shape \(2, 0\)$"),
        (lambda: sigconv.convolve(np.ones(5), np.ones((2, 2)), backend="cpu"), "same dimensionality"),
        (lambda: sigconv.convolve(np.ones((5, 3)), np.ones(2), backend="cpu"), "pass axis="),
        (lambda: sigconv.convolve(np.ones((5, 3)), np.ones((2, 2)), axis=0, backend="cpu"), "1-D in2 only"),
        (lambda: sigconv.convolve(np.ones((2, 2, 2)), np.ones((2, 2, 2)), backend="cpu"), "more than 2 dim"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), method="fast", backend="cpu"), "method must be one of"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), method="fft", variant="direct", backend="cpu"),
         "disagree"),
        (lambda: sigconv.convolve2d(np.ones((5, 5)), np.ones((2, 2)), boundary="reflect", backend="cpu"),
         "boundary must be"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), backend="cpu", block=48), "multiple of 32"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), backend="cpu", block=2048), "between 32 and 1024"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), backend="cpu", block=0), "between 32 and 1024"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), backend="gpu"), "backend must be one of"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), axis=3, backend="cpu"), "axis must be"),
        (lambda: sigconv.convolve(np.ones(5), np.ones(3), backend="cpu", variant="warp"), "variant must be one of"),
        (lambda: sigconv.apply_fir(np.ones(5), np.ones(3), phase="min", backend="cpu"), "phase must be"),
        (lambda: sigconv.apply_fir(np.ones(5), np.ones(3), fs=-1, backend="cpu"), "fs must be"),
        (lambda: sigconv.convolve2d(np.ones((5, 5)), np.ones((2, 2)), "wide", backend="cpu"), "mode must be"),
        (lambda: sigconv.convolve2d(np.ones((5, 2)), np.ones((2, 5)), "valid", backend="cpu"), "at least as large"),
        (lambda: sigconv.convolve2d(np.ones(5), np.ones((2, 2)), backend="cpu"), "2-D"),
        (lambda: sigconv.convolve2d(np.ones((5, 5)), np.ones((2, 2)), backend="cpu", block=(7, 3)), "multiple of 32"),
    ],
)
def test_bad_arguments_raise_valueerror_naming_them(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_transposed_input_refused_unless_axis_given(rng):
    """(frames, channels) data filtered along the channels is refused with a hint; explicit axis allowed. The
    SciPy functions need ``axis`` for an N-D in1 with 1-D taps anyway (SciPy refuses the pair)."""
    x = rng.standard_normal((48000, 2))
    with pytest.raises(ValueError, match=r"looks like \(frames, channels\).*axis=0"):
        sigconv.apply_fir(x, np.ones(3), backend="cpu")
    with pytest.raises(ValueError, match="same dimensionality.*pass axis="):
        sigconv.convolve(x, np.ones(3), backend="cpu")
    y = sigconv.convolve(x, np.ones(3), axis=-1, backend="cpu")  # explicit: allowed
    assert y.shape == (48000, 4)
    assert sigconv.convolve(x, np.ones(3), axis=0, backend="cpu").shape == (48002, 2)


def test_cuda_backend_without_gpu_gives_one_line_reason(monkeypatch):
    from sigconv._core import devices as _devices

    monkeypatch.setenv("SIGCONV_DISABLE_CUDA", "1")
    _devices._cupy_reason.cache_clear()
    _devices.cuda_reason.cache_clear()
    try:
        with pytest.raises(RuntimeError) as ei:
            sigconv.convolve(np.ones(5), np.ones(3), backend="cuda")
        assert "backend 'cuda' is not usable here" in str(ei.value) and "\n" not in str(ei.value)
        assert sigconv.convolve(np.ones(5), np.ones(3), backend="auto").dtype == np.float64  # falls back to cpu
    finally:
        _devices._cupy_reason.cache_clear()
        _devices.cuda_reason.cache_clear()


def test_auto_keeps_small_host_jobs_on_the_cpu_without_probing_the_gpu(monkeypatch, rng):
    """backend="auto" with NumPy inputs below HOST_CPU_BELOW (the larger input's size) runs on the cpu and never
    asks for the GPU (so CuPy is not imported); at the threshold, with cupy inputs, or with a variant or block
    named, it asks as before. The probe answers "cpu" here, so every call runs and its values are checked."""
    from sigconv._core import devices
    from sigconv.registry import auto

    probes = []

    def probe(backend):
        probes.append(backend)
        return "cpu"

    monkeypatch.setattr(devices, "resolve_backend", probe)
    lim = auto.HOST_CPU_BELOW
    x = rng.standard_normal(lim["conv1d"] - 1)
    h = rng.standard_normal(31)
    y = sigconv.convolve(x, h, "same")
    assert probes == [] and rel_err(y, ss.convolve(x, h, "same", method="direct")) <= TOL[np.dtype(np.float64)]
    sigconv.correlate(h, x, "full")  # the larger input decides, whichever it is
    sigconv.apply_fir(np.stack([x, x]), h, axis=-1)  # 2 x (lim - 1) samples: over the limit
    assert probes == ["auto"]
    sigconv.convolve(rng.standard_normal(lim["conv1d"]), h)
    sigconv.convolve(x, h, variant="direct")
    sigconv.convolve(x, h, block=64)
    assert probes == ["auto"] * 4
    probes.clear()
    n = int(np.sqrt(lim["conv2d"] - 1))
    img, k = rng.standard_normal((n, n)), rng.standard_normal((3, 3))
    assert rel_err(sigconv.convolve2d(img, k, "same"), ss.convolve2d(img, k, "same")) <= TOL[np.dtype(np.float64)]
    sigconv.correlate2d(img, k, boundary="wrap")
    sigconv.convolve(img, k[:1])  # a one-row kernel: the 1-D path, below its own limit
    assert probes == []
    sigconv.convolve2d(rng.standard_normal((n + 1, n + 1)), k)
    assert probes == ["auto"]
    probes.clear()
    sig = 0.1 * rng.standard_normal((2, (lim["spectral"] - 1) // 2))
    sigconv.spectral_denoise(sig, 48000, n_fft=256)
    sigconv.spectral_denoise(sig[0], 48000, noise=sig[1, :4096].tolist(), n_fft=256)  # a noise clip as a list
    assert probes == []
    sigconv.spectral_denoise(np.concatenate([sig, sig], axis=1), 48000, n_fft=256)
    assert probes == ["auto"]


def test_import_does_not_pull_gpu_or_heavy_modules():
    import subprocess
    import sys

    code = ("import sys, sigconv; bad=[m for m in ('cupy','torch','scipy.signal','textual') if m in sys.modules];"
            "print(bad); sys.exit(1 if bad else 0)")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr


def test_variants_lists_cpu_entries():
    v = {(e["backend"], e["name"]): e for e in sigconv.variants("conv1d")}
    assert v[("cpu", "direct")]["available"] and v[("cpu", "fft")]["description"]
    with pytest.raises(ValueError, match="op must be one of"):
        sigconv.variants("conv3d")
