"""sigconv's convolve, correlate, convolve2d and correlate2d against SciPy's, call for call: every real dtype pair
(result dtype and values), every method, boundary and fill value, exact integers where SciPy's sums would
overflow, 0-D and Python scalars, and the same error types. CPU here; the ``gpu`` cases run the same on cuda."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import scipy.signal as ss

import sigconv
from sigconv import _scipy_rules

DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "float16", "float32",
          "float64"]
MODES = ["full", "same", "valid"]
BACKENDS = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def _data(rng, dtype, n):
    """Random values that every dtype holds: 0/1 for bool and unsigned, small signed integers, normal floats."""
    d = np.dtype(dtype)
    if d.kind == "b":
        return rng.integers(0, 2, n).astype(bool)
    if d.kind == "u":
        return rng.integers(0, 6, n).astype(d)
    if d.kind == "i":
        return rng.integers(-5, 6, n).astype(d)
    return rng.standard_normal(n).astype(d)


def _check(y, ref, dtype_pair):
    """Same dtype and shape; integers and bool equal exactly, floats within the result type's rounding."""
    assert y.dtype == ref.dtype, dtype_pair
    assert y.shape == ref.shape, dtype_pair
    if ref.dtype.kind in "biu":
        np.testing.assert_array_equal(y, ref, err_msg=str(dtype_pair))
    else:
        tol = {2: 2e-3, 4: 2e-5, 8: 1e-12}[ref.dtype.itemsize]
        np.testing.assert_allclose(np.asarray(y, np.float64), np.asarray(ref, np.float64), rtol=tol, atol=tol * 8,
                                   err_msg=str(dtype_pair))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("method", ["auto", "direct", "fft"])
def test_every_real_dtype_pair_1d(rng, backend, method):
    """All 144 real dtype pairs x 3 modes, convolve and correlate: SciPy's result dtype and SciPy's values."""
    for t1, t2 in itertools.product(DTYPES, DTYPES):
        a, b = _data(rng, t1, 37), _data(rng, t2, 8)
        for mode, (fn, ref_fn) in itertools.product(MODES, ((sigconv.convolve, ss.convolve),
                                                            (sigconv.correlate, ss.correlate))):
            ref = ref_fn(a, b, mode, method="direct")
            _check(fn(a, b, mode, method, backend=backend), ref, (t1, t2, mode, fn.__name__))


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_real_dtype_pair_2d(rng, backend):
    """convolve2d/correlate2d for every dtype pair SciPy's convolve2d takes (it refuses bool and float16, which
    sigconv computes): SciPy's dtype and values, boundaries included."""
    for t1, t2 in itertools.product(DTYPES, DTYPES):
        a, b = _data(rng, t1, 9 * 11).reshape(9, 11), _data(rng, t2, 3 * 4).reshape(3, 4)
        for fn, ref_fn in ((sigconv.convolve2d, ss.convolve2d), (sigconv.correlate2d, ss.correlate2d)):
            for mode, boundary in (("full", "fill"), ("same", "wrap"), ("valid", "fill"), ("same", "symm")):
                y = fn(a, b, mode, boundary, backend=backend)
                if "bool" in (t1, t2) and np.result_type(a, b) == bool or np.result_type(a, b) == np.float16:
                    ref = ref_fn(a.astype(np.float64), b.astype(np.float64), mode, boundary)
                    ref = (ref != 0) if y.dtype == bool else ref.astype(np.float16)
                else:
                    ref = ref_fn(a, b, mode, boundary)
                _check(y, ref, (t1, t2, mode, boundary, fn.__name__))


def _ref_pad_2d(x, k, mode, boundary, fillvalue, conv):
    """float64 reference: SciPy's own function (the definition)."""
    fn = ss.convolve2d if conv else ss.correlate2d
    return fn(x, k, mode, boundary, fillvalue)


# the aliases (pad, circular, symmetric) map to their rule in the public layer, the same for both backends: on cpu
_AWKWARD = [(b, "cpu") for b in ("fill", "pad", "wrap", "circular", "symm", "symmetric")] + \
    [pytest.param(b, "cuda", marks=pytest.mark.gpu) for b in ("fill", "wrap", "symm")]


@pytest.mark.parametrize("boundary,backend", _AWKWARD)
def test_boundaries_on_awkward_shapes(rng, backend, boundary):
    """Every boundary and alias, with fill values, on shapes where the kernel is larger than the image in one or
    both axes (extension by several periods), even and odd sides, 1-row and 1-column images: SciPy's values
    exactly (integer-valued float data, so every sum is exact)."""
    shapes = [((1, 1), (1, 1)), ((1, 4), (1, 21)), ((5, 3), (7, 9)), ((9, 13), (4, 2)), ((13, 1), (3, 1)),
              ((6, 7), (6, 7)), ((2, 17), (5, 4)), ((31, 23), (3, 3)), ((3, 29), (8, 1))]
    # float32 on cuda runs the specialised kernels, one build per kernel size, padding and rule (NVRTC, seconds
    # each on a fresh machine): there on two shapes, a kernel larger than the image and one inside it (every
    # variant is checked on such shapes under each rule by tests/test_cuda2d.py); float64 on every shape
    f32_shapes = shapes if backend == "cpu" else [((5, 3), (7, 9)), ((31, 23), (3, 3))]
    for (xs, ks), conv, mode in itertools.product(shapes, (True, False), MODES):
        x = rng.integers(-9, 10, xs).astype(np.float64)
        k = rng.integers(-4, 5, ks).astype(np.float64)
        for fill in (0, 2.5) if boundary in ("fill", "pad") else (0,):
            fn = sigconv.convolve2d if conv else sigconv.correlate2d
            try:
                ref = _ref_pad_2d(x, k, mode, boundary, fill, conv)
            except ValueError:
                with pytest.raises(ValueError):
                    fn(x, k, mode, boundary, fill, backend=backend)
                continue
            y = fn(x, k, mode, boundary, fill, backend=backend)
            np.testing.assert_array_equal(y, ref, err_msg=str((xs, ks, conv, mode, boundary, fill)))
            if (xs, ks) not in f32_shapes:
                continue
            y32 = fn(x.astype(np.float32), k.astype(np.float32), mode, boundary, fill, backend=backend)
            assert y32.dtype == np.float32
            np.testing.assert_allclose(y32, ref, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("backend", BACKENDS)
def test_integers_exact_where_float64_would_round(rng, backend):
    """int64 and uint64 values whose sums pass 2^53 (and wrap past 2^63) equal NumPy's integer arithmetic bit
    for bit, as SciPy's direct method gives; so do int8 sums that overflow, and SciPy's 2^52 bound is honoured
    for method='fft' too."""
    x = rng.integers(-2**62, 2**62, 257, dtype=np.int64)
    h = rng.integers(-2**40, 2**40, 31, dtype=np.int64)
    for method, mode in itertools.product(("auto", "direct", "fft"), MODES):
        np.testing.assert_array_equal(sigconv.convolve(x, h, mode, method, backend=backend),
                                      np.convolve(x, h, mode) if mode != "same" else ss.convolve(x, h, mode,
                                                                                                 "direct"))
        np.testing.assert_array_equal(sigconv.correlate(x, h, mode, method, backend=backend),
                                      ss.correlate(x, h, mode, "direct"))
    u = rng.integers(0, 2**63, 100, dtype=np.uint64)
    g = rng.integers(0, 2**20, 9, dtype=np.uint64)
    np.testing.assert_array_equal(sigconv.convolve(u, g, backend=backend), np.convolve(u, g))
    i8 = rng.integers(-128, 128, 50).astype(np.int8)
    np.testing.assert_array_equal(sigconv.convolve(i8, i8[:7], backend=backend), np.convolve(i8, i8[:7]))
    x2 = rng.integers(-2**62, 2**62, (7, 9), dtype=np.int64)
    k2 = rng.integers(-2**30, 2**30, (3, 2), dtype=np.int64)
    for boundary in ("fill", "wrap", "symm"):
        np.testing.assert_array_equal(sigconv.convolve2d(x2, k2, "same", boundary, 7, backend=backend),
                                      ss.convolve2d(x2, k2, "same", boundary, 7))


def test_integer_arithmetic_chooses_by_bound():
    """Below 2^32 any variant; below 2^52 float64 on the direct kernels; beyond, 64-bit integer arithmetic."""
    small = _scipy_rules.arithmetic(np.full(10, 100), np.full(10, 100))
    assert (small.compute, small.modular, small.direct_only) == (np.float64, False, False)
    mid = _scipy_rules.arithmetic(np.full(10, 2**20), np.full(10, 2**20))
    assert (mid.compute, mid.modular, mid.direct_only) == (np.float64, False, True)
    big = _scipy_rules.arithmetic(np.full(10, 2**30), np.full(10, 2**30))
    assert (big.compute, big.modular, big.result) == (np.uint64, True, np.int64)
    i8 = _scipy_rules.arithmetic(np.array([-128], np.int8), np.array([-128], np.int8))
    assert i8.result == np.int8 and not i8.modular  # |int8 min| counted as 128, not -128
    f16 = _scipy_rules.arithmetic(np.ones(2, np.float16), np.ones(2, np.float16))
    assert (f16.result, f16.compute) == (np.float16, np.float32)


@pytest.mark.parametrize("backend", BACKENDS)
def test_zero_rank_and_python_scalars(backend):
    """0-D arrays and Python numbers give their product (SciPy's dtype), before any other check."""
    assert sigconv.convolve(3, 4, backend=backend) == 12
    assert sigconv.convolve(np.int8(100), np.int8(3), backend=backend) == ss.convolve(np.int8(100), np.int8(3))
    y = sigconv.correlate(np.array(2.0), np.array(3), backend=backend)
    assert y == 6.0 and np.asarray(y).dtype == np.float64
    np.testing.assert_array_equal(sigconv.convolve([1, 2], [3], backend=backend), [3, 6])  # lists as SciPy


@pytest.mark.parametrize("backend", BACKENDS)
def test_nan_and_inf_propagate_as_in_scipy(backend):
    """Non-finite values in either input are taken as SciPy takes them (direct method: where they reach)."""
    x = np.arange(8.0)
    h = np.array([1.0, np.nan, 2.0])
    for mode in MODES:
        np.testing.assert_array_equal(sigconv.convolve(x, h, mode, "direct", backend=backend),
                                      ss.convolve(x, h, mode, "direct"))
        np.testing.assert_array_equal(sigconv.convolve(h, x, mode, "direct", backend=backend),
                                      ss.convolve(h, x, mode, "direct"))
    np.testing.assert_array_equal(sigconv.convolve2d(np.ones((3, 3)), np.ones((2, 2)), fillvalue=np.inf,
                                                     backend=backend),
                                  ss.convolve2d(np.ones((3, 3)), np.ones((2, 2)), fillvalue=np.inf))


# ------------------------------------------------------------------------------------------------- errors


def _bad_calls():
    ones5, ones3 = np.ones(5), np.ones(3)
    e2 = np.ones((2, 2))
    return [
        ("convolve", (ones5, ones3), {"mode": "spam"}),
        ("convolve", (ones5, ones3), {"mode": "eggs", "method": "fft"}),
        ("convolve", (ones5, ones3), {"method": "bacon"}),
        ("correlate", (ones5, ones3), {"mode": "same", "method": "bacon"}),
        ("convolve", ([1], 2), {"method": "direct"}),
        ("correlate", (1, [2]), {"method": "fft"}),
        ("convolve", ([1], [[2]]), {}),
        ("convolve", ([], []), {}),
        ("convolve", ([5, 6], []), {}),
        ("convolve", (np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2)), {"mode": "valid"}),
        ("convolve2d", (3, 4), {}),
        ("convolve2d", ([3], [4]), {}),
        ("convolve2d", ([[[3]]], [[[4]]]), {}),
        ("correlate2d", (np.arange(6).reshape(2, 3), np.arange(6).reshape(3, 2)), {"mode": "valid"}),
        ("convolve2d", (e2, e2), {"mode": "wide"}),
        ("convolve2d", (e2, e2), {"boundary": "reflect"}),
        ("convolve2d", (e2, e2), {"boundary": "edge"}),
        ("convolve2d", ([[1]], [[1, 2]]), {"fillvalue": 1j}),
        ("convolve2d", ([[1]], [[1, 2]]), {"fillvalue": [1, 2]}),
        ("convolve2d", ([[1]], [[1, 2]]), {"fillvalue": []}),
        ("convolve2d", ([[1]], [[1, 2]]), {"fillvalue": np.nan}),
        ("convolve2d", (np.ones((2, 2), np.uint8), np.ones((1, 2), np.uint8)), {"fillvalue": 300}),
        ("convolve2d", (np.ones((2, 2), np.uint8), np.ones((1, 2), np.uint8)), {"fillvalue": -1}),
    ]


@pytest.mark.parametrize("name, args, kwargs", _bad_calls())
def test_errors_have_scipys_types(name, args, kwargs):
    """What SciPy refuses, sigconv refuses with the same exception type (and a message naming the argument)."""
    with pytest.raises(Exception) as ref, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SciPy warns on its way to some of these errors
        getattr(ss, name)(*args, **kwargs)
    with pytest.raises(ref.type):
        getattr(sigconv, name)(*args, backend="cpu", **kwargs)


def test_fillvalue_converts_as_scipy():
    """Fill values SciPy converts (1.5 to an integer output, a one-element list, True, a numeric string) give
    SciPy's result."""
    a = np.array([[1, 2, 3], [3, 4, 5]])
    b = np.array([[2, 3, 4], [4, 5, 6]])
    for fv in (1.5, [7], True, "3", -1):
        np.testing.assert_array_equal(sigconv.convolve2d(a, b, "full", "fill", fv, backend="cpu"),
                                      ss.convolve2d(a, b, "full", "fill", fv))
    np.testing.assert_array_equal(sigconv.convolve2d(a * 1.0, b, "full", "fill", None, backend="cpu"),
                                  ss.convolve2d(a * 1.0, b, "full", "fill", None))


def test_positional_arguments_in_scipys_order():
    """mode, method (1-D) and mode, boundary, fillvalue (2-D) by position; sigconv's own options keyword-only."""
    a = np.arange(10.0)
    b = np.array([1.0, -2.0, 0.5])
    np.testing.assert_allclose(sigconv.convolve(a, b, "same", "fft", backend="cpu"), ss.convolve(a, b, "same", "fft"),
                               atol=1e-12)
    x = np.arange(20.0).reshape(4, 5)
    k = np.array([[1.0, 2.0], [0.0, -1.0]])
    np.testing.assert_array_equal(sigconv.correlate2d(x, k, "same", "wrap", 0, backend="cpu"),
                                  ss.correlate2d(x, k, "same", "wrap", 0))
    with pytest.raises(TypeError):
        sigconv.convolve2d(x, k, "same", "fill", 0, "cpu")


# ------------------------------------------------------------------------------------------ 2-D via convolve


@pytest.mark.parametrize("backend", BACKENDS)
def test_convolve_of_2d_inputs_is_scipys_2d_convolution(rng, backend):
    """convolve/correlate with two 2-D inputs: SciPy's N-D result (whose "same" centring for correlate differs
    from correlate2d's on even kernels), also for one-row and one-column kernels, which take the 1-D kernels."""
    for xs, ks in (((7, 9), (3, 4)), ((5, 40), (1, 33)), ((40, 3), (12, 1)), ((1, 30), (1, 50)), ((6, 6), (2, 2))):
        x = rng.integers(-9, 10, xs).astype(np.float64)
        k = rng.integers(-4, 5, ks).astype(np.float64)
        for mode, name in itertools.product(MODES, ("convolve", "correlate")):
            try:
                ref = getattr(ss, name)(x, k, mode, "direct")
            except ValueError:
                with pytest.raises(ValueError):
                    getattr(sigconv, name)(x, k, mode, backend=backend)
                continue
            y = getattr(sigconv, name)(x, k, mode, backend=backend)
            np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-9, err_msg=str((xs, ks, mode, name)))


@pytest.mark.parametrize("backend", BACKENDS)
def test_kernels_of_any_size_in_2d(rng, backend):
    """2-D kernels with sides beyond the tiled kernels' 31 (SciPy takes any size): SciPy's values, every boundary."""
    x = rng.integers(-9, 10, (45, 70)).astype(np.float64)
    k = rng.integers(-3, 4, (37, 33)).astype(np.float64)
    for boundary, mode in itertools.product(("fill", "wrap", "symm"), MODES):
        np.testing.assert_array_equal(sigconv.correlate2d(x, k, mode, boundary, backend=backend),
                                      ss.correlate2d(x, k, mode, boundary), err_msg=f"{boundary} {mode}")
    np.testing.assert_allclose(sigconv.convolve(x, k, "same", backend=backend), ss.convolve(x, k, "same"),
                               rtol=1e-12, atol=1e-8)


def test_one_row_kernel_takes_the_1d_path(monkeypatch, rng):
    """A (1, K) kernel in a 2-D convolve runs the 1-D contract (the long-filter kernels), not the 2-D one."""
    from sigconv import _api

    def refuse(*a, **k):
        raise AssertionError("2-D path taken")

    monkeypatch.setattr(_api, "corr2d", refuse)
    x = rng.standard_normal((4, 500))
    k = rng.standard_normal((1, 301))
    np.testing.assert_allclose(sigconv.convolve(x, k, "same", backend="cpu"), ss.convolve(x, k, "same"),
                               rtol=1e-10, atol=1e-10)
