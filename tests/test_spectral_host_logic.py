"""The cuda path of the spectral gate (sigconv/engine/spectral/) run on the CPU: every Python line of it, with a
NumPy-backed stand-in for CuPy that refuses what CuPy refuses, and the cuda conv2d replaced by a NumPy emulation
of the separable kernel (row pass then column pass, as kernels/conv2d.cu). Results must equal the cpu backend's.

The stand-in mirrors CuPy 13/14, checked against its source (and, where CuPy is importable here, against its
signatures by ``test_stand_in_mirrors_cupy``):

* a device array is not a NumPy array: ``np.asarray(dev)`` raises TypeError ("Implicit conversion to a NumPy
  array is not allowed", ``cupy.ndarray.__array__``); a NumPy array as an operand of a device ufunc raises
  TypeError ("Unsupported type", ``_kernel.pyx: _preprocess_arg``); ``dev[...] = numpy_array`` raises
  (``_routines_indexing.pyx: _scatter_op`` calls ``fill`` for a non-cupy value, which refuses non-scalar NumPy
  arrays); ``cupy.ascontiguousarray`` takes device arrays only (``cpdef ndarray ascontiguousarray(ndarray a, ..)``);
* reductions and integer indexing return 0-d device arrays, not scalars; ``float()``/``bool()`` of them are allowed;
* ``cupy.fft`` keeps single precision (float32 -> complex64, ``_fft.py: _output_dtype``) and computes with
  another algorithm than pocketfft: emulated by a float64 FFT rounded to single precision, so cuda and cpu
  spectra differ by rounding, as they will on a GPU;
* ``cupy.bincount`` refuses float input (TypeError) and negative values (ValueError); returns intp, or float64
  with weights (``_statistics/histogram.py``);
* ``cupyx.scipy.ndimage.uniform_filter1d``/``minimum_filter1d`` take SciPy's arguments and keep the input dtype.
"""

from __future__ import annotations

import inspect
import sys
import types

import numpy as np
import pytest
import scipy.ndimage
from numpy.lib.mixins import NDArrayOperatorsMixin

from sigconv._core.xp import to_host
from sigconv.engine.settings import GateSpec, KernelChoice
from sigconv.engine.spectral import gate as _gate
from sigconv.engine.spectral import noise as _noise
from sigconv.engine.spectral import spectral_denoise, spectral_file_filter
from sigconv.engine.spectral.factory import gate_for

from conftest import rel_err, write_audio

FS = 16000


# ------------------------------------------------------------------------------------ the stand-in


class DevArray(NDArrayOperatorsMixin):
    """A 'device' array: NumPy storage, CuPy's rules at the host/device boundary."""

    __module__ = "cupy"  # sigconv._core.xp.is_cupy() looks at the type's module
    __array_priority__ = 100

    def __init__(self, a):
        assert isinstance(a, np.ndarray), type(a)
        self._a = a

    # -- attributes CuPy's ndarray has
    shape = property(lambda self: self._a.shape)
    ndim = property(lambda self: self._a.ndim)
    dtype = property(lambda self: self._a.dtype)
    size = property(lambda self: self._a.size)
    strides = property(lambda self: self._a.strides)
    nbytes = property(lambda self: self._a.nbytes)
    itemsize = property(lambda self: self._a.itemsize)
    flags = property(lambda self: self._a.flags)
    real = property(lambda self: DevArray(self._a.real))
    imag = property(lambda self: DevArray(self._a.imag))
    T = property(lambda self: DevArray(self._a.T))

    def get(self, stream=None, order="C", out=None, blocking=True):
        return np.array(self._a, order=order)

    def astype(self, dtype, order="K", casting=None, subok=None, copy=True):
        return DevArray(self._a.astype(dtype, order=order, copy=copy))

    def reshape(self, *shape, order="C", copy=None):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return DevArray(self._a.reshape(shape, order=order))

    def ravel(self, order="C"):
        return DevArray(self._a.ravel(order))

    def copy(self, order="C"):
        return DevArray(self._a.copy(order))

    def sum(self, axis=None, dtype=None, out=None, keepdims=False):
        assert out is None
        return _wrap(self._a.sum(axis=axis, dtype=dtype, keepdims=keepdims))

    def mean(self, axis=None, dtype=None, out=None, keepdims=False):
        assert out is None
        return _wrap(self._a.mean(axis=axis, dtype=dtype, keepdims=keepdims))

    def __len__(self):
        return len(self._a)

    def __getitem__(self, key):
        return _wrap(self._a[_index(key)])

    def __setitem__(self, key, value):
        if isinstance(value, DevArray):
            self._a[_index(key)] = value._a
        elif isinstance(value, np.ndarray) and value.ndim > 0:
            raise ValueError("non-scalar numpy.ndarray cannot be used for fill")  # CuPy's fill()
        elif isinstance(value, (list, tuple)):
            raise TypeError(f"Unsupported type {type(value)}")
        else:
            self._a[_index(key)] = value

    # -- implicit conversions: the scalar ones are allowed (they synchronise), the array one is not
    def __array__(self, dtype=None, copy=None):
        raise TypeError("Implicit conversion to a NumPy array is not allowed. Please use `.get()` to construct a "
                        "NumPy array explicitly.")

    def __bool__(self):
        return bool(self._a)

    def __float__(self):
        return float(self._a)

    def __int__(self):
        return int(self._a)

    def __index__(self):
        return self._a.__index__()

    def __repr__(self):
        return f"DevArray({self._a!r})"

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        args = [_dev_operand(a) for a in inputs]
        outs = kwargs.get("out")
        if outs is not None:
            kwargs["out"] = tuple(_dev_operand(o, out=True) for o in outs)
        res = getattr(ufunc, method)(*args, **kwargs)
        if outs is not None:  # in place (a += b): the caller's device arrays
            return outs[0] if len(outs) == 1 else outs
        return _wrap(res)

    def __array_function__(self, func, types_, args, kwargs):
        # CuPy dispatches NumPy's functions to its own (same name); mixing in NumPy arrays fails there.
        mod = _FAKE["cupy"]
        if not hasattr(mod, func.__name__):
            return NotImplemented
        return getattr(mod, func.__name__)(*args, **kwargs)


def _dev_operand(a, out=False):
    if isinstance(a, DevArray):
        return a._a
    if isinstance(a, np.ndarray) or out:
        raise TypeError(f"Unsupported type {type(a)}")  # _kernel.pyx: _preprocess_arg
    if isinstance(a, (bool, int, float, complex, np.generic)):
        return a
    raise TypeError(f"Unsupported type {type(a)}")


def _index(key):
    def one(k):
        return k._a if isinstance(k, DevArray) else k

    return tuple(one(k) for k in key) if isinstance(key, tuple) else one(key)


def _wrap(r):
    if isinstance(r, np.ndarray):
        return DevArray(r)
    if isinstance(r, np.generic):  # CuPy returns 0-d arrays, never scalars
        return DevArray(np.asarray(r))
    return r


def _dev(a, name="a"):
    if not isinstance(a, DevArray):
        raise TypeError(f"Argument '{name}' has incorrect type (expected cupy._core.core._ndarray_base, got "
                        f"{type(a).__module__}.{type(a).__name__})")
    return a._a


def _host_value(a):
    """What cupy.asarray accepts: device arrays, NumPy arrays, scalars, sequences."""
    return a._a if isinstance(a, DevArray) else a


def make_fake_cupy():
    """{module name: module} for cupy, cupy.fft, cupy.lib(.stride_tricks), cupyx.scipy.ndimage."""
    cp = types.ModuleType("cupy")
    cp.ndarray = DevArray
    for name in ("float32", "float64", "int64", "int32", "intp", "complex64", "complex128", "bool_"):
        setattr(cp, name, getattr(np, name))

    def asarray(a, dtype=None, order=None, *, copy=None, blocking=False):
        v = _host_value(a)
        if isinstance(v, np.ndarray) and v.dtype.kind not in "?biufc":
            raise ValueError(f"Unsupported dtype {v.dtype}")
        return DevArray(np.asarray(v, dtype=dtype, order=order))

    def ascontiguousarray(a, dtype=None):
        return DevArray(np.ascontiguousarray(_dev(a), dtype=dtype))

    def zeros(shape, dtype=float, order="C"):
        return DevArray(np.zeros(shape, dtype, order))

    def empty(shape, dtype=float, order="C"):
        return DevArray(np.full(shape, np.nan, dtype, order) if np.dtype(dtype).kind in "fc"
                        else np.empty(shape, dtype, order))  # poisoned: every element must be written

    def arange(start, stop=None, step=1, dtype=None):
        return DevArray(np.arange(start, stop, step, dtype=dtype) if stop is not None
                        else np.arange(start, dtype=dtype))

    def pad(array, pad_width, mode="constant", **kwargs):
        if mode not in ("constant", "edge", "linear_ramp", "maximum", "minimum", "mean", "reflect", "symmetric",
                        "wrap", "empty"):
            raise ValueError(f"mode '{mode}' is not supported")
        return DevArray(np.pad(_dev(array, "array"), pad_width, mode=mode, **kwargs))

    def clip(a, a_min, a_max, out=None):
        assert out is None
        return DevArray(np.clip(_dev(a), _dev_operand(a_min), _dev_operand(a_max)))

    def all(a, axis=None, out=None, keepdims=False):  # noqa: A001
        assert out is None
        return _wrap(np.all(_dev(a), axis=axis, keepdims=keepdims))

    def moveaxis(a, source, destination):
        return DevArray(np.moveaxis(_dev(a), source, destination))

    def bincount(x, weights=None, minlength=None):
        xa = _dev(x, "x")
        if xa.ndim != 1:
            raise ValueError("object too deep for desired array")
        if xa.dtype.kind == "f":
            raise TypeError("x must be int array")
        if (xa < 0).any():
            raise ValueError("The first argument of bincount must be non-negative")
        w = None if weights is None else _dev(weights, "weights")
        return DevArray(np.bincount(xa, w, 0 if minlength is None else int(minlength)))

    def concatenate(arrays, axis=0, out=None, *, dtype=None, casting="same_kind"):
        assert out is None
        return DevArray(np.concatenate([_dev(a, "tup") for a in arrays], axis=axis, dtype=dtype, casting=casting))

    def count_nonzero(a, axis=None):
        return _wrap(np.asarray(np.count_nonzero(_dev(a), axis=axis)))

    for name, f in dict(asarray=asarray, ascontiguousarray=ascontiguousarray, zeros=zeros, empty=empty,
                        arange=arange, pad=pad, clip=clip, all=all, moveaxis=moveaxis, bincount=bincount,
                        concatenate=concatenate, count_nonzero=count_nonzero).items():
        setattr(cp, name, f)
    for name in ("floor", "log10", "exp", "maximum", "minimum", "isfinite", "sqrt", "abs", "rint"):
        setattr(cp, name, getattr(np, name))  # NumPy ufuncs route DevArray operands through __array_ufunc__

    def as_strided(x, shape=None, strides=None):
        # cupy: ndarray(shape, dtype, memptr=x.data, strides): a view from x's first element, as NumPy's
        return DevArray(np.lib.stride_tricks.as_strided(_dev(x, "x"), shape=shape, strides=strides,
                                                        writeable=False))

    st = types.ModuleType("cupy.lib.stride_tricks")
    st.as_strided = as_strided
    lib = types.ModuleType("cupy.lib")
    lib.stride_tricks = st
    cp.lib = lib

    def _single(a):  # cupy.fft keeps single precision (float16/32 -> complex64 -> float32), like scipy.fft
        return _dev(a).dtype in (np.float16, np.float32, np.complex64)

    def rfft(a, n=None, axis=-1, norm=None):  # another FFT than the cpu's: float64, rounded to the result dtype
        y = np.fft.rfft(_dev(a).astype(np.float64), n=n, axis=axis, norm=norm)
        return DevArray(y.astype(np.complex64 if _single(a) else np.complex128))

    def irfft(a, n=None, axis=-1, norm=None):
        y = np.fft.irfft(_dev(a).astype(np.complex128), n=n, axis=axis, norm=norm)
        return DevArray(y.astype(np.float32 if _single(a) else np.float64))

    fft = types.ModuleType("cupy.fft")
    fft.rfft, fft.irfft = rfft, irfft
    cp.fft = fft

    class Device:  # cupy.cuda.Device(): the current device, a context manager that makes it current
        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

    cuda = types.ModuleType("cupy.cuda")
    cuda.Device = Device
    cp.cuda = cuda

    def uniform_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):  # noqa: A002
        assert output is None
        a = _dev(input, "input")
        return DevArray(scipy.ndimage.uniform_filter1d(a, size, axis, None, mode, cval, origin).astype(a.dtype))

    def minimum_filter1d(input, size, axis=-1, output=None, mode="reflect", cval=0.0, origin=0):  # noqa: A002
        assert output is None
        a = _dev(input, "input")
        return DevArray(scipy.ndimage.minimum_filter1d(a, size, axis, None, mode, cval, origin).astype(a.dtype))

    ndi = types.ModuleType("cupyx.scipy.ndimage")
    ndi.uniform_filter1d, ndi.minimum_filter1d = uniform_filter1d, minimum_filter1d
    cpx = types.ModuleType("cupyx")
    cpx_sp = types.ModuleType("cupyx.scipy")
    cpx_sp.ndimage = ndi
    cpx.scipy = cpx_sp
    return {"cupy": cp, "cupy.fft": fft, "cupy.cuda": cuda, "cupy.lib": lib, "cupy.lib.stride_tricks": st, "cupyx": cpx,
            "cupyx.scipy": cpx_sp, "cupyx.scipy.ndimage": ndi}


_FAKE: dict = {}


def fake_corr2d(calls):
    """sigconv.backends.cuda2d.corr2d on DevArrays: 'separable' emulates kernels/conv2d.cu's row pass then column
    pass with the SVD factors of the real launcher; the other variants run the cpu backend."""
    from sigconv.backends import cpu, cuda2d

    def corr2d(x, w, bias, stride, pad, out_hw, *, variant="auto", block=None, out=None, separable=None,
               factors=None):
        cp = _FAKE["cupy"]
        x = cp.ascontiguousarray(x)
        w = cp.ascontiguousarray(w, dtype=x.dtype)
        calls.append((variant, tuple(x.shape), tuple(w.shape), factors is not None))
        assert bias is None and tuple(stride) == (1, 1) and tuple(pad) == (0, 0), (bias, stride, pad)
        if variant == "auto":
            variant = "separable" if separable else "naive"
        if variant not in cuda2d.VARIANTS:
            raise ValueError(f"variant must be one of {', '.join(cuda2d.VARIANTS)}, auto, got {variant!r}")
        xa, wa = x._a, w._a
        N, Cin, H, W = xa.shape
        Cout, _, kH, kW = wa.shape
        Ho, Wo = out_hw
        assert (Ho, Wo) == (H - kH + 1, W - kW + 1)
        if variant != "separable":
            return DevArray(cpu.corr2d(xa, wa, None, (1, 1), (0, 0), out_hw, variant="direct"))
        if factors is not None:  # from the caller's host copy, as the real corr2d passes them on
            u, v = factors
        else:
            u, v, why = cuda2d.separable_factors(w)  # calls w.get(), as the real launcher does
            if why:
                raise ValueError(f"conv2d variant 'separable' does not apply: {why}")
        assert Cin == Cout == 1
        u, v = u.astype(xa.dtype)[0, 0], v.astype(xa.dtype)[0, 0]
        tmp = np.zeros((N, H, Wo), xa.dtype)
        for j in range(kW):  # conv2d_sep_rows: acc += v[j] * x[r, c + j]
            tmp += v[j] * xa[:, 0, :, j:j + Wo]
        y = np.zeros((N, 1, Ho, Wo), xa.dtype)
        for i in range(kH):  # conv2d_sep_cols: acc += u[i] * tmp[r + i, c]
            y[:, 0] += u[i] * tmp[:, i:i + Ho]
        return DevArray(y)

    return corr2d


def fake_gate_ops(monkeypatch):
    """sigconv.backends.cuda_gate's fused kernels on DevArrays: the host rules (HostOps) on the arrays' NumPy
    storage, refusing host arrays where the kernels take device arrays."""
    from sigconv.backends import cuda_gate
    from sigconv.engine.spectral.gate import HostOps

    def device(f, name):
        def run(*args, **kwargs):
            un = [_dev(a, name) if isinstance(a, (DevArray, np.ndarray)) else a for a in args]
            kw = {k: (_dev(v, k) if isinstance(v, (DevArray, np.ndarray)) else v) for k, v in kwargs.items()}
            res = f(*un, **kw)
            if isinstance(res, tuple):
                return tuple(None if r is None else DevArray(np.ascontiguousarray(r)) for r in res)
            return None if res is None else DevArray(np.ascontiguousarray(res))
        return run

    for name in cuda_gate.__all__:
        monkeypatch.setattr(cuda_gate, name, device(getattr(HostOps, name), name))

    from sigconv.engine import audio, gpu_file

    def quantise_device(y, spec):  # the device quantiser's kernel: the host rule on the array's storage
        q, clipped = audio.quantise(_dev(y, "y").T, spec)
        return DevArray(np.ascontiguousarray(q)), (_wrap(np.asarray(clipped)) if spec.clip else None)

    def to_work_device(raw, dtype="float32"):  # the device conversion kernel: raw samples scaled, (n, C) -> (C, n)
        a = _dev(raw, "raw")
        scale = np.dtype(dtype).type(gpu_file._READ_SCALE.get(a.dtype.name, 1.0))
        return DevArray(np.ascontiguousarray(a.T).astype(dtype) * scale)

    monkeypatch.setattr(gpu_file, "quantise_device", quantise_device)
    monkeypatch.setattr(gpu_file, "to_work_device", to_work_device)

    from sigconv.backends import overlap_save

    def irfft_destroying(X, N):  # cuFFT's inverse, unscaled: N times NumPy's
        return DevArray(np.fft.irfft(_dev(X, "X"), n=N, axis=-1) * N)

    monkeypatch.setattr(overlap_save, "irfft_destroying", irfft_destroying)

    from sigconv.backends import cuda1d

    def put_columns(dst, col, src):  # the 2-D copy: dst[:, col:col + w] = src, device arrays of one dtype
        d, a = _dev(dst, "dst"), _dev(src, "src")
        assert d.dtype == a.dtype and a.ndim == d.ndim == 2 and 0 <= col <= d.shape[1] - a.shape[1]
        d[:, col:col + a.shape[1]] = a

    monkeypatch.setattr(cuda1d, "put_columns", put_columns)


@pytest.fixture
def fake_cuda(monkeypatch):
    """Install the stand-in; yields the list of cuda conv2d calls (variant, x shape, w shape, factors given)."""
    mods = make_fake_cupy()
    _FAKE.clear()
    _FAKE.update(mods)
    for name, mod in mods.items():
        monkeypatch.setitem(sys.modules, name, mod)
    from sigconv._core import devices as _devices
    from sigconv.backends import cuda2d

    monkeypatch.setattr(_devices, "cuda_reason", lambda: None)
    calls = []
    monkeypatch.setattr(cuda2d, "corr2d", fake_corr2d(calls))
    fake_gate_ops(monkeypatch)
    yield calls
    _FAKE.clear()


# ------------------------------------------------------------------------------------ the stand-in's honesty


def test_stand_in_mirrors_cupy():
    """Every function of the stand-in exists in CuPy with the keyword arguments the stand-in accepts."""
    cupy = pytest.importorskip("cupy")
    import cupyx.scipy.ndimage

    mods = make_fake_cupy()
    real = {"cupy": cupy, "cupy.fft": cupy.fft, "cupy.lib.stride_tricks": cupy.lib.stride_tricks,
            "cupyx.scipy.ndimage": cupyx.scipy.ndimage}
    for modname, fake in mods.items():
        if modname not in real:
            continue
        for name, f in vars(fake).items():
            if name.startswith("_") or isinstance(f, types.ModuleType):
                continue
            assert hasattr(real[modname], name), f"{modname}.{name} does not exist in CuPy"
            r = getattr(real[modname], name)
            if inspect.isfunction(f) and inspect.isfunction(r):
                assert list(inspect.signature(f).parameters) == list(inspect.signature(r).parameters), name
    for meth in ("get", "astype", "reshape", "ravel", "copy", "sum", "mean"):
        doc = getattr(cupy.ndarray, meth).__doc__.splitlines()[0]
        params = [p for p in inspect.signature(getattr(DevArray, meth)).parameters if p != "self"]
        for p in params:
            assert p in doc, (meth, p, doc)
    # the refusals the stand-in copies are CuPy's (checked without a GPU: they happen before any launch)
    with pytest.raises(TypeError):
        cupy.ascontiguousarray(np.zeros(3))


def test_stand_in_refuses_what_cupy_refuses(fake_cuda):
    import cupy  # the stand-in

    d = cupy.asarray(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError):
        np.asarray(d)
    with pytest.raises(TypeError):
        d + np.ones(3)
    with pytest.raises(TypeError):
        np.ones(3) * d
    with pytest.raises(ValueError):
        d[:, 1:] = np.ones((2, 2))
    with pytest.raises(TypeError):
        cupy.ascontiguousarray(np.ones(3))
    with pytest.raises(TypeError):
        cupy.bincount(cupy.asarray(np.ones(3)))
    assert isinstance(d.sum(), cupy.ndarray) and float(d.sum()) == 15.0
    d[:, :1] += 1.0
    assert d.get()[:, 0].tolist() == [1.0, 4.0]
    assert cupy.fft.rfft(cupy.asarray(np.ones(8, np.float32))).dtype == np.complex64


# ------------------------------------------------------------------------------------ cuda path == cpu path


def signal(rng, C, n):
    t = np.arange(n) / FS
    f = 440 * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    ph = 2 * np.pi * np.cumsum(f) / FS
    s = sum(np.sin(k * ph + k) / k for k in range(1, 10)) * np.sin(np.pi * t / 0.4) ** 2
    s = 0.3 * s / np.max(np.abs(s))
    return np.stack([s + 0.05 * rng.standard_normal(n) for _ in range(C)]).astype(np.float32)


CASES = [  # (stationary, share, noise clip)
    (True, False, False), (True, False, True), (True, True, False), (True, True, True),
    (False, False, False), (False, True, False),
]


@pytest.mark.parametrize("stationary,share,clip", CASES)
def test_cuda_path_equals_cpu(fake_cuda, rng, stationary, share, clip):
    C, n = 2, FS + 777
    x = signal(rng, C, n)
    kw = dict(stationary=stationary, share_mask=share, n_fft=512)
    if clip:
        kw["noise"] = (0.05 * rng.standard_normal((C, FS // 2))).astype(np.float32)
    ref = spectral_denoise(x, FS, backend="cpu", **kw)
    y = spectral_denoise(x, FS, backend="cuda", **kw)
    assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == x.shape
    err = rel_err(y, ref)
    assert err <= 1e-5, f"rel err {err:.2e}; first mismatch {np.argwhere(np.abs(y - ref) > 1e-4)[:1].tolist()}"
    assert fake_cuda and all(v == "separable" for v, _, _, _ in fake_cuda)  # the smoothing ran on 'cuda'
    Cm = 1 if share else C
    assert all(xs[:2] == (Cm, 1) for _, xs, _, _ in fake_cuda)
    # factored on the host from the mask kernel sigconv built there: the launcher reads nothing back
    assert all(has_factors for _, _, _, has_factors in fake_cuda)


def test_cuda_path_device_in_device_out(fake_cuda, rng):
    """A device input (backend auto) gives a device output of the same shape; 3-D input, time on axis 1."""
    import cupy

    x = signal(rng, 4, 9000).reshape(2, 2, 9000).transpose(0, 2, 1).copy()  # (2, 9000, 2)
    ref = spectral_denoise(x, FS, n_fft=256, axis=1, backend="cpu")
    y = spectral_denoise(cupy.asarray(x), FS, n_fft=256, axis=1)
    assert isinstance(y, cupy.ndarray) and y.shape == x.shape
    assert rel_err(y.get(), ref) <= 1e-5
    yn = spectral_denoise(cupy.asarray(x), FS, noise=cupy.asarray(x[:, :3000]), n_fft=256, axis=1)
    refn = spectral_denoise(x, FS, noise=x[:, :3000], n_fft=256, axis=1, backend="cpu")
    assert rel_err(yn.get(), refn) <= 1e-5


def test_cuda_path_gate_open_float64_and_variants(fake_cuda, rng):
    x = rng.standard_normal((2, 7001))
    y = spectral_denoise(x, FS, prop_decrease=0, n_fft=256, backend="cuda")
    assert y.dtype == np.float64 and rel_err(y, x) <= 1e-10
    x32 = x.astype(np.float32)
    ref = spectral_denoise(x32, FS, n_fft=256, backend="cpu")
    for variant in ("separable", "naive", "shared"):
        fake_cuda.clear()
        y = spectral_denoise(x32, FS, n_fft=256, backend="cuda", variant=variant)
        assert rel_err(y, ref) <= 1e-5, variant
        assert {v for v, _, _, _ in fake_cuda} == {variant}
    # no smoothing at all (1 x 1 box): no conv2d call
    fake_cuda.clear()
    y = spectral_denoise(x32, FS, n_fft=256, freq_smooth_hz=0, time_smooth_ms=0, backend="cuda")
    ref = spectral_denoise(x32, FS, n_fft=256, freq_smooth_hz=0, time_smooth_ms=0, backend="cpu")
    assert not fake_cuda and rel_err(y, ref) <= 1e-5
    # smoothing in one direction only (box 1 x k and k x 1), still 'separable'
    for fz, tm in ((0, 60), (800, 0)):
        y = spectral_denoise(x32, FS, n_fft=256, freq_smooth_hz=fz, time_smooth_ms=tm, backend="cuda")
        ref = spectral_denoise(x32, FS, n_fft=256, freq_smooth_hz=fz, time_smooth_ms=tm, backend="cpu")
        assert rel_err(y, ref) <= 1e-5, (fz, tm)


def test_cuda_path_chunks_and_stats_stream(fake_cuda, rng, monkeypatch):
    """Several array chunks on cuda (ARRAY_CHUNK['cuda'] small): seams and the streamed histogram."""
    x = signal(rng, 1, 20000)
    ref = spectral_denoise(x, FS, n_fft=256, backend="cpu")
    monkeypatch.setitem(_gate.ARRAY_CHUNK, "cuda", 3001)
    for stationary in (True, False):
        ref = spectral_denoise(x, FS, n_fft=256, stationary=stationary, backend="cpu")
        y = spectral_denoise(x, FS, n_fft=256, stationary=stationary, backend="cuda")
        assert rel_err(y, ref) <= 1e-5, stationary


# ------------------------------------------------------------------------------------ files on cuda


def _file_run(tmp_path, x, block_frames, backend, **kw):
    """SpectralFileFilter through the file engine, made the way `sigconv denoise --method spectral` makes it."""
    from sigconv.engine.audio import probe
    from sigconv.engine.file import filter_file

    import soundfile as sf

    path = tmp_path / "in.wav"
    if not path.exists():
        write_audio(path, x.T, fs=FS, subtype="FLOAT")
    info = probe(path)
    gate = GateSpec(stationary=kw.get("stationary", True), n_fft=256, share_mask=kw.get("share", False),
                    noise_clip=kw.get("noise_clip"), noise_from=kw.get("noise_from"))
    make, desc = spectral_file_filter(gate, KernelChoice(op="conv2d", backend=backend), info)

    def make_small(info, spec):  # blocks of block_frames; the statistics pass streams when the file is longer
        flt = make(info, spec)
        flt.preferred_frames = block_frames
        return flt

    out = tmp_path / f"out_{backend}_{block_frames}.wav"
    filter_file(info, out, make_small, overwrite=True)
    return sf.read(str(out), dtype="float64", always_2d=True)[0].T


@pytest.mark.parametrize("case", ["estimated", "clip", "range", "nonstationary", "shared"])
def test_cuda_file_filter_equals_cpu(fake_cuda, tmp_path, rng, monkeypatch, case):
    x = signal(rng, 2, FS + 555)
    kw = {}
    if case == "clip":
        kw["noise_clip"] = str(write_audio(tmp_path / "clip.wav", 0.05 * rng.standard_normal((FS // 2, 2)), fs=FS,
                                           subtype="FLOAT"))
    elif case == "range":
        kw["noise_from"] = ("0.1", "0.5")
    elif case == "nonstationary":
        kw["stationary"] = False
    elif case == "shared":
        kw["share"] = True
    ref = _file_run(tmp_path, x, 1 << 19, "cpu", **kw)
    bfs = (4096,) if case != "estimated" else (4096, 1 << 19)
    for bf in bfs:
        # small blocks also stream the statistics pass (a file longer than one block)
        y = _file_run(tmp_path, x, bf, "cuda", **kw)
        assert rel_err(y, ref) <= 1e-5, (case, bf, rel_err(y, ref))
    assert fake_cuda


# ------------------------------------------------------------------------------------ estimated statistics


@pytest.mark.parametrize("backend", ["cpu", "cuda"])
def test_estimated_threshold_is_continuous(request, rng, backend):
    """The quantile read from the histogram moves continuously with the cells' dB. Every cell sits half a
    micro-dB below a grid point, then half a micro-dB above it: with hard bins every count would move to the next
    bin and every threshold would jump by a whole step (0.1 dB); the cpu and cuda FFTs round differently, so such
    a jump made cuda != cpu (2.6e-5 relative on one of twelve 3-s inputs)."""
    if backend == "cuda":
        request.getfixturevalue("fake_cuda")
    g = gate_for(GateSpec(n_fft=256, hop=64), KernelChoice(op="conv2d", backend=backend), 2, 40 * 64, FS, np.float64)
    T, F = g.T, g.F
    grid = rng.integers(900, 1100, size=(2, T, F))  # dB = LO + grid * STEP, about -70 to -50 dB
    delta = 1e-6
    thr = []
    for sign in (-0.5, 0.5):
        db = _noise.HIST_LO_DB + grid * _noise.HIST_STEP_DB + sign * delta
        pw = g.xp.asarray(10.0 ** (db / 10.0) - _gate.POWER_FLOOR)
        g.frame_power = lambda xs, nfr, pw=pw: (None, pw[:, g_f0[0]:g_f0[0] + nfr])
        g_f0 = [0]
        g.hist_init()
        for f0 in range(0, T, 7):  # in chunks, as estimate_stats does
            g_f0[0] = f0
            g.hist_add(lambda a, b: None, f0, min(T, f0 + 7))
        g.hist_finish()
        thr.append(to_host(g.thr).reshape(2, F))
    assert np.abs(thr[1] - thr[0]).max() <= 1e-4, np.abs(thr[1] - thr[0]).max()
    # and it is the quantile: between the order statistics floor(q*T) and floor(q*T) + 1 (1-based), +-1 step
    offset = -10.0 * np.log10(-np.log1p(-_noise.EST_QUANTILE)) + _noise.RAYLEIGH_MEAN_DB + 1.5 * _noise.RAYLEIGH_STD_DB
    q_db = thr[0] - offset
    srt = np.sort(_noise.HIST_LO_DB + grid * _noise.HIST_STEP_DB, axis=1)
    r = int(np.floor(_noise.EST_QUANTILE * T))
    assert np.all(q_db >= srt[:, r - 1] - _noise.HIST_STEP_DB) and np.all(q_db <= srt[:, r] + _noise.HIST_STEP_DB)


# ------------------------------------------------------------------------------------ the rest of the cuda lines


def test_cuda_path_hop_not_dividing_n_fft_and_errors(fake_cuda, rng):
    import cupy

    x = signal(rng, 2, 6007)
    for kw in (dict(n_fft=256, hop=100), dict(n_fft=256, hop=100, stationary=False)):
        ref = spectral_denoise(x, FS, backend="cpu", **kw)
        y = spectral_denoise(x, FS, backend="cuda", **kw)
        assert rel_err(y, ref) <= 1e-5, kw
    bad = x.copy()
    bad[1, 77] = np.nan
    with pytest.raises(ValueError, match="x must be finite"):
        spectral_denoise(bad, FS, n_fft=256, backend="cuda")
    with pytest.raises(ValueError, match="at least n_fft = 256"):
        spectral_denoise(x, FS, noise=cupy.asarray(x[:, :200]), n_fft=256)
    with pytest.raises(ValueError, match="channels of x"):
        spectral_denoise(x, FS, noise=cupy.asarray(x[0]), n_fft=256)
    with pytest.raises(ValueError, match="channels of x"):
        spectral_denoise(x, FS, noise=[0.0] * 300, n_fft=256, backend="cuda")
    nz = x[:, :3000].copy()
    nz[0, 5] = np.inf
    with pytest.raises(ValueError, match="noise must be finite"):
        spectral_denoise(x, FS, noise=cupy.asarray(nz), n_fft=256)


def test_cuda_file_filter_variant_and_short_clip(fake_cuda, tmp_path, rng):
    """`--variant naive` on cuda (checked in the registry first), and a noise clip in blocks shorter than a frame."""
    from sigconv._core.errors import InputError

    x = signal(rng, 1, 7001)
    ref = spectral_denoise(x, FS, n_fft=256, backend="cpu", variant="direct")
    from sigconv.engine.audio import probe
    from sigconv.engine.file import filter_file

    import soundfile as sf

    path = write_audio(tmp_path / "in.wav", x.T, fs=FS, subtype="FLOAT")
    info = probe(path)
    make, _ = spectral_file_filter(GateSpec(n_fft=256), KernelChoice(op="conv2d", backend="cuda", variant="naive"),
                                   info)
    filter_file(info, tmp_path / "o.wav", make)
    y = sf.read(str(tmp_path / "o.wav"), dtype="float64", always_2d=True)[0].T
    assert rel_err(y, ref) <= 1e-5
    assert {v for v, _, _, _ in fake_cuda} == {"naive"}
    short = write_audio(tmp_path / "short.wav", 0.05 * rng.standard_normal((200, 1)), fs=FS, subtype="FLOAT")
    cuda = KernelChoice(op="conv2d", backend="cuda")
    with pytest.raises(InputError, match="fewer than one STFT frame"):
        spectral_file_filter(GateSpec(n_fft=256, noise_clip=str(short)), cuda, info)
    # a clip read in blocks shorter than one frame: the carried samples make the same statistics
    clip = 0.05 * rng.standard_normal((1, 3000))
    g1, g2 = (gate_for(GateSpec(n_fft=256), cuda, 1, 7001, FS, np.float32) for _ in range(2))
    assert g1.stats_from_noise_chunks([clip]) and g2.stats_from_noise_chunks(clip[:, i:i + 50]
                                                                             for i in range(0, 3000, 50))
    assert np.abs(g1.thr.get() - g2.thr.get()).max() <= 1e-4
