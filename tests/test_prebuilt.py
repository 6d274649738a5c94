"""The kernels that ship pre-built (kernels/prebuilt) and what the first run after an install compiles.

CPU: the index matches the current sources (a kernel edited without rebuilding fails here), the architecture rule,
the module key, and the loader's choices against a stand-in CuPy (a matching binary is loaded; another GPU, a
refusing driver or SIGCONV_PREBUILT=0 compile instead). GPU: every pre-built module loads on this GPU and the
conversions and copies that replaced CuPy's elementwise kernels on the file path agree with their host rules; a
first `sigconv denoise` with empty caches compiles nothing of sigconv's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import numpy as np
import pytest

from sigconv import _kernels
from sigconv._core import devices as _devices
from sigconv.backends import prebuilt_modules

_GPU_REASON = None


def _gpu():
    global _GPU_REASON
    if _GPU_REASON is None:
        _GPU_REASON = _devices.cuda_reason() or ""
    if _GPU_REASON:
        pytest.skip(f"no usable CUDA GPU: {_GPU_REASON}")
    import cupy

    return cupy


# ------------------------------------------------------------------------------------------------ CPU


def test_prebuilt_binaries_match_the_sources():
    problems = _kernels.prebuilt_problems(prebuilt_modules())
    assert not problems, "\n".join(problems)


def test_the_index_names_every_architecture_and_the_compiler():
    index = _kernels.prebuilt_index()
    assert {"80", "86", "89", "90", "100", "120"} <= set(index["archs"])
    assert index["compiler"].startswith("NVRTC ")
    assert index["added_options"] == list(_kernels.CUPY_ADDED_OPTIONS)
    for key, ent in index["modules"].items():
        assert ent["probe"], key
        assert set(ent["lowered"]) == set(ent["name_expressions"]), key


@pytest.mark.parametrize("cc,want", [("90", "90"), ("86", "86"), ("87", "86"), ("80", "80"), ("89", "89"),
                                     ("103", "100"), ("121", "120"), ("75", None), ("70", None), ("110", None)])
def test_architecture_rule(cc, want):
    assert _kernels.prebuilt_arch(cc, ["80", "86", "89", "90", "100", "120"]) == want


def test_module_key_covers_code_options_and_expressions():
    base = _kernels.module_key("conv1d.cu")
    assert base == _kernels.module_key("conv1d.cu", {}, (), ())
    others = [_kernels.module_key("conv1d.cu", {"X": 1}), _kernels.module_key("conv1d.cu", options=("-G",)),
              _kernels.module_key("conv1d.cu", name_expressions=("conv1d_tiled_rt<8>",)),
              _kernels.module_key("conv2d.cu")]
    assert len({base, *others}) == 5


def test_a_stale_source_shows_up(monkeypatch):
    spec = dict(name="pcm.cu", name_expressions=("pcm_to_work<short, float>",))
    problems = _kernels.prebuilt_problems([spec])
    assert any("no pre-built binary of the current source" in p for p in problems)
    assert any("no longer asked for" in p for p in problems)
    assert problems[-1] == "run python tools/prebuild_kernels.py"


class _DriverError(Exception):
    pass


def _fake_cupy(cc: str, refuse: bool = False):
    """A stand-in for the CuPy calls :func:`sigconv._kernels.module` makes: records what it loads and compiles."""
    log = []

    class RawModule:
        def __init__(self, code=None, path=None, options=(), name_expressions=None):
            self.code, self.path = code, path
            log.append(("path", path) if path else ("compile", name_expressions))

        def compile(self):
            pass

        def get_function(self, name):
            if self.path and refuse:
                raise _DriverError("CUDA_ERROR_NO_BINARY_FOR_GPU")
            return name

        get_global = get_function

    class Device:
        id = 0
        compute_capability = cc

    cuda = types.SimpleNamespace(Device=Device, driver=types.SimpleNamespace(CUDADriverError=_DriverError))
    return types.SimpleNamespace(RawModule=RawModule, cuda=cuda), log


@pytest.mark.parametrize("cc,refuse,env,origin", [("90", False, None, "prebuilt"), ("86", False, None, "prebuilt"),
                                                 ("75", False, None, "compiled"), ("90", True, None, "compiled"),
                                                 ("90", False, "0", "compiled")])
def test_loader_takes_the_binary_or_compiles(monkeypatch, tmp_path, cc, refuse, env, origin):
    fake, log = _fake_cupy(cc, refuse)
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_kernels, "_MODULES", {})
    monkeypatch.setattr(_kernels, "_ORIGINS", {})
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(tmp_path))
    if env is None:
        monkeypatch.delenv("SIGCONV_PREBUILT", raising=False)
    else:
        monkeypatch.setenv("SIGCONV_PREBUILT", env)
    spec = prebuilt_modules()[-1]
    mod = _kernels.module(**spec)
    key = _kernels.module_key(**spec)
    assert _kernels.origins() == {(spec["name"], key): origin}
    expr = spec["name_expressions"][0]
    if origin == "prebuilt":
        assert log == [("path", str(tmp_path / "kernels" / f"{key}.sm_{cc}.cubin"))]
        # the binary was expanded once into the cache folder; a template is fetched by its lowered name
        assert (tmp_path / "kernels" / f"{key}.sm_{cc}.cubin").stat().st_size > 1000
        assert mod.get_function(expr) == _kernels.prebuilt_index()["modules"][key]["lowered"][expr]
    else:
        assert log[-1] == ("compile", tuple(spec["name_expressions"]))
    assert _kernels.module(**spec) is mod  # memoised


def test_loader_compiles_when_the_cache_cannot_be_written(monkeypatch, tmp_path):
    fake, log = _fake_cupy("90")
    monkeypatch.setitem(sys.modules, "cupy", fake)
    monkeypatch.setattr(_kernels, "_MODULES", {})
    monkeypatch.setattr(_kernels, "_ORIGINS", {})
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(blocker))
    monkeypatch.delenv("SIGCONV_PREBUILT", raising=False)
    _kernels.module(**prebuilt_modules()[0])
    assert list(_kernels.origins().values()) == ["compiled"]
    assert log[-1][0] == "compile"


def test_the_builder_checks_the_index():
    from conftest import ROOT

    res = subprocess.run([sys.executable, str(ROOT / "tools" / "prebuild_kernels.py"), "--check"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "match the sources" in res.stdout


# ------------------------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
def test_every_prebuilt_module_loads_on_this_gpu():
    cupy = _gpu()
    cc = cupy.cuda.Device().compute_capability
    if _kernels.prebuilt_arch(cc, _kernels.prebuilt_index()["archs"]) is None:
        pytest.skip(f"no pre-built binaries for sm_{cc}")
    for spec in prebuilt_modules():
        mod = _kernels.module(**spec)
        key = _kernels.module_key(**spec)
        assert _kernels.origins()[(spec["name"], key)] == "prebuilt", spec
        for expr in spec.get("name_expressions", ()):
            assert mod.get_function(expr).num_regs > 0


def _quantise_ref(y, out_dtype, scale, lo, hi, mult, clip):
    v = y.astype(np.float64)
    if scale:
        v = np.rint(v * scale)
    n = int(np.count_nonzero((v < lo) | (v > hi))) if clip else 0
    if clip:
        v = np.fmin(np.fmax(v, lo), hi)
    return (v * mult).astype(out_dtype).T, n


@pytest.mark.gpu
@pytest.mark.parametrize("work", ["float32", "float64"])
@pytest.mark.parametrize("out,scale,lo,hi,mult,clip", [
    ("int16", 32768.0, -32768.0, 32767.0, 1.0, True), ("int32", 8388608.0, -8388608.0, 8388607.0, 256.0, True),
    ("int32", 2147483648.0, -2147483648.0, 2147483647.0, 1.0, True), ("float32", 0.0, -1.0, 1.0, 1.0, True),
    ("float64", 0.0, -1.0, 1.0, 1.0, False)])
def test_quantise_kernel_matches_the_host_rule(rng, work, out, scale, lo, hi, mult, clip):
    cupy = _gpu()
    from sigconv.backends import cuda_pcm

    C, n, drop = 3, 70001, 17  # odd length; a column slice: rows spaced wider than they are long
    y = (rng.standard_normal((C, n + drop)) * 0.7).astype(work)
    y[0, 5:9] = [np.inf, -np.inf, np.nan, 1.0 - 2.0 ** -30]
    q, count = cuda_pcm.quantise(cupy.asarray(y)[:, drop:], out, scale=scale, lo=lo, hi=hi, mult=mult, clip=clip)
    ref, nref = _quantise_ref(y[:, drop:], out, scale, lo, hi, mult, clip)
    np.testing.assert_array_equal(cupy.asnumpy(q), ref)
    assert (count is None) == (not clip)
    if clip:
        assert count.dtype == np.uint64 and int(count) == nref and nref > 0


@pytest.mark.gpu
@pytest.mark.parametrize("raw", ["int16", "int32", "float32", "float64"])
@pytest.mark.parametrize("work", ["float32", "float64"])
def test_to_work_kernel_matches_the_host_rule(rng, raw, work):
    cupy = _gpu()
    from sigconv.backends import cuda_pcm

    n, C = 4099, 5
    if raw.startswith("int"):
        info = np.iinfo(raw)
        x = rng.integers(info.min, info.max, size=(n, C), endpoint=True, dtype=raw)
        scale = 2.0 ** -(info.bits - 1)
    else:
        x, scale = rng.standard_normal((n, C)).astype(raw), 1.0
    got = cupy.asnumpy(cuda_pcm.to_work(cupy.asarray(x), work, scale))
    np.testing.assert_array_equal(got, (x.T.astype(np.float64) * scale).astype(work))
    assert cuda_pcm.to_work(cupy.empty((0, 2), np.int16), "float32", 1.0).shape == (2, 0)


@pytest.mark.gpu
def test_put_columns_and_casts(rng):
    cupy = _gpu()
    from sigconv.backends import cuda1d, overlap_save

    a = cupy.asarray(rng.standard_normal((3, 50)).astype(np.float32))
    dst = cupy.zeros((3, 80), np.float32)
    cuda1d.put_columns(dst, 7, a[:, 5:36])
    ref = np.zeros((3, 80), np.float32)
    ref[:, 7:38] = cupy.asnumpy(a)[:, 5:36]
    np.testing.assert_array_equal(cupy.asnumpy(dst), ref)
    one = cupy.zeros((1, 10), np.float32)
    cuda1d.put_columns(one, 2, a[1:2, :8])
    np.testing.assert_array_equal(cupy.asnumpy(one)[0, 2:], cupy.asnumpy(a)[1, :8])
    with pytest.raises(ValueError, match="does not fit"):
        cuda1d.put_columns(dst, 60, a)
    with pytest.raises(ValueError, match="contiguous rows"):
        cuda1d.put_columns(dst, 0, a[:, ::2])
    d = overlap_save._cast(a, np.float64)
    assert d.dtype == np.float64 and cupy.array_equal(d, a.astype(np.float64))
    back = cupy.empty_like(a)
    assert overlap_save._cast(d, np.float32, out=back) is back and cupy.array_equal(back, a)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_host_spectrum_matches_the_device_one(rng, dtype):
    cupy = _gpu()
    from sigconv.backends import overlap_save

    w = (rng.standard_normal(301) * 3e-7).astype(dtype)  # a small peak: the exponent shift matters
    H, s = overlap_save.host_spectrum(w, 4096)
    Hd, sd = overlap_save._filter_spectrum(cupy.asarray(w), 4096)  # no key: computed on the device
    assert H.dtype == (np.complex64 if dtype == np.float32 else np.complex128)
    assert s.tolist() == cupy.asnumpy(sd).tolist()
    tol = 1e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(H, cupy.asnumpy(Hd), rtol=0, atol=tol * np.abs(H).max())


@pytest.mark.gpu
@pytest.mark.parametrize("method", ["fir", "spectral"])
def test_a_first_denoise_compiles_nothing_of_its_own(tmp_path, method):
    """A first run after an install (empty CuPy and sigconv caches), in a process of its own: every sigconv module
    it loads is pre-built (on a GPU they are built for), and CuPy compiles few kernels of its own (cached, counted)."""
    cupy = _gpu()
    import soundfile as sf

    from conftest import ROOT

    if _kernels.prebuilt_arch(cupy.cuda.Device().compute_capability, _kernels.prebuilt_index()["archs"]) is None:
        pytest.skip("no pre-built binaries for this GPU")
    t = np.arange(3 * 48000) / 48000.0
    sf.write(tmp_path / "in.wav", np.stack([0.3 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 97 * t)], 1),
             48000, subtype="PCM_16")
    code = ("import sys, json, sigconv; from sigconv import _kernels; job = sigconv.prepare_denoise(sys.argv[1], "
            "sys.argv[2], method=sys.argv[3], kernel=sigconv.KernelChoice(backend='cuda')); job.run(); "
            "print(json.dumps(sorted(set(_kernels.origins().values()))))")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
               CUPY_CACHE_DIR=str(tmp_path / "cupy"), SIGCONV_CACHE_DIR=str(tmp_path / "sigconv"))
    env.pop("SIGCONV_PREBUILT", None)
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "in.wav"), str(tmp_path / "out.wav"), method],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert json.loads(res.stdout.splitlines()[-1]) == ["prebuilt"]
    cupy_compiled = sorted(p.name for p in (tmp_path / "cupy").glob("*.cubin")) if (tmp_path / "cupy").is_dir() else []
    print(f"{method}: CuPy compiled {len(cupy_compiled)} kernels of its own")
    assert len(cupy_compiled) <= 12, cupy_compiled
    assert sf.info(str(tmp_path / "out.wav")).frames == t.size
