"""Host-side logic of the cuda backend that needs no GPU, run on the CPU with NumPy standing in for CuPy
where only array maths is involved: the fft variant's filter spectrum and its cache."""

from __future__ import annotations

import sys
import types

import numpy as np
import pytest


@pytest.fixture
def numpy_as_cupy(monkeypatch):
    fake = types.SimpleNamespace(
        fft=np.fft, ascontiguousarray=np.ascontiguousarray, float32=np.float32, float64=np.float64,
        complex64=np.complex64, complex128=np.complex128, ndarray=np.ndarray, ldexp=np.ldexp, int32=np.int32,
        cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0)),
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    from sigconv.backends import overlap_save

    overlap_save._SPECTRA.clear()
    yield overlap_save
    overlap_save._SPECTRA.clear()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_filter_spectrum_values_and_cache(numpy_as_cupy, dtype, rng):
    c = numpy_as_cupy
    w = rng.standard_normal(1023).astype(dtype)
    N = c.fft_size(w.size)
    w = np.ldexp(w, 90).astype(dtype)  # huge taps: the spectrum is that of the taps divided by 2^tap_shift
    tap_shift = np.frexp(np.abs(w.astype(np.float64)).max())[1]
    want = np.fft.rfft(np.ldexp(w[::-1].astype(np.float64), -tap_shift), N) / N
    H, shift = c._filter_spectrum(w, N)  # no key: computed, not cached
    assert H.dtype == (np.complex64 if dtype == np.float32 else np.complex128) and H.shape == (N // 2 + 1,)
    assert shift.tolist() == [tap_shift] and tap_shift > 90  # the taps of peak ~2^91 are divided by 2^tap_shift
    tol = 1e-7 if dtype == np.float32 else 1e-15
    assert np.abs(H - want).max() <= tol * np.abs(want).max()
    assert not c._SPECTRA
    key = c.host_taps_key(w)
    H1 = c._filter_spectrum(w, N, key)
    assert c._filter_spectrum(w, N, key) is H1 and len(c._SPECTRA) == 1  # computed once, then cached
    w2 = w.copy()
    w2[7] *= 2
    assert c.host_taps_key(w2) != key and c.host_taps_key(w.astype(np.float64 if dtype == np.float32 else
                                                                      np.float32)) != key
    assert c._filter_spectrum(w2, N, c.host_taps_key(w2)) is not H1 and len(c._SPECTRA) == 2
    for i in range(c._SPECTRA_MAX + 3):  # bounded
        c._filter_spectrum(w, 1024 * (i + 2), key)
    assert len(c._SPECTRA) == c._SPECTRA_MAX
