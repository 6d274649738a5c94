"""GPU tests of the cuda conv1d backend. Skipped, with the reason, without a usable GPU.

Every registered cuda conv1d variant x dtype it supports, against float64 references, through its launcher
(output poisoned with NaN, correlation form) and through sigconv.convolve/correlate (backend="cuda"), for
full/same/valid windows. By default:
- L in {1, 7, 1823} x K in {1, 2, 3, 7, 24, 25, 63, 64, 255, 1024, 4095} x C in {1, 3}, for the variant's
  default block and the smallest and largest it accepts;
- a long signal, L = 2^17 + 3, C = 2, K in {7, 255, 4095}, default block.
- blocks of 3 and 31 warps (96, 992) at L = 1823 and 2^17 + 3.
With --runslow (``-m slow``) the exhaustive grids: every multiple of 32 up to 1024 as the block x C in {1, 2, 8} at
L in {1, 7, 1000},
and L = 2^20 + 3 for the default and largest blocks.
References: float64 scipy.signal.oaconvolve, computed once per (L, K, C) and shared by the variants of a test.
Failures are collected and reported together (variant, dtype, block, K, L, C, mode, first bad index).
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.signal

import sigconv
from sigconv._core import devices as _devices
from sigconv.registry import table as _registry
from sigconv.registry.table import Conv1dJob
from sigconv.engine.ops import window_1d
from sigconv.backends.cpu import _window_from_full
from sigconv.engine.gpu_file import GPUFileFilter

pytestmark = pytest.mark.gpu
_REASON = _devices.cuda_reason()
if _REASON:
    pytest.skip(f"no usable CUDA GPU: {_REASON}", allow_module_level=True)

import cupy  # noqa: E402

from sigconv import _kernels

from sigconv.registry import tune as _autotune  # noqa: E402
from sigconv.backends import cuda1d  # noqa: E402

KS = (1, 2, 3, 7, 24, 25, 63, 64, 255, 1024, 4095)
CS = (1, 2, 8)
MODES = ("full", "same", "valid")
TOL = {"float32": 1e-5, "float64": 1e-10}
BIG_L = (1 << 20) + 3
LONG_L = (1 << 17) + 3
VARIANTS = [v for v in _registry.entries("conv1d", "cuda", kind="variant")]


@pytest.fixture(autouse=True)
def _private_cache(tmp_path, monkeypatch):
    """Autotune cache in a temporary folder, fresh memo for each test."""
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SIGCONV_AUTOTUNE", raising=False)  # the autotune tests need timing on
    _autotune.clear_memo()
    yield
    _autotune.clear_memo()


def _rel_err(y, ref):
    y = np.asarray(y, dtype=np.float64)
    if y.shape != ref.shape:
        return np.inf, f"shape {y.shape} != {ref.shape}"
    bad = ~np.isfinite(y)
    if bad.any():
        i = np.argwhere(bad)[0]
        return np.inf, f"non-finite (unwritten?) output at {tuple(i)}"
    den = np.linalg.norm(ref)
    err = np.linalg.norm(y - ref) / (den if den > 0 else 1.0)
    if den == 0 and np.linalg.norm(y) == 0:
        return 0.0, ""
    i = np.unravel_index(np.argmax(np.abs(y - ref)), y.shape) if y.size else ()
    return err, f"worst at {tuple(int(v) for v in i)}: got {y[i] if y.size else None}, want {ref[i] if y.size else None}"


def _cases(L, K):
    """(label, taps index flip, pad, out_len) of every mode for correlate and convolve."""
    for mode in MODES:
        pad, out_len = window_1d(mode, L, K)
        yield mode, pad, out_len


def _run_grid(rng, L, blocks_for, only=None, ks=KS, cs=CS):
    """Every K x C x dtype x block x mode x {launcher, correlate, convolve} for the variants named ``only``."""
    failures, n_checked = [], 0
    for K in ks:
        for C in cs:
            x32 = rng.standard_normal((C, L)).astype(np.float32)
            h32 = rng.standard_normal(K).astype(np.float32)
            x64, h64 = x32.astype(np.float64), h32.astype(np.float64)
            full_conv = scipy.signal.oaconvolve(x64, h64[None, :], axes=-1)  # convolve(x, h)
            full_corr = scipy.signal.oaconvolve(x64, h64[::-1][None, :], axes=-1)  # correlate(x, h)
            for dtype in ("float32", "float64"):
                xg = cupy.asarray(x32 if dtype == "float32" else x64)
                hh = h32 if dtype == "float32" else h64
                wg = cupy.asarray(hh)  # correlation taps of correlate(x, h)
                for v in VARIANTS:
                    if only is not None and v.name != only:
                        continue
                    if v.applies(Conv1dJob(C, L, K, dtype)):
                        continue
                    launch = v.load()
                    for block in blocks_for(v):
                        for mode, pad, out_len in _cases(L, K):
                            ref_corr = _window_from_full(full_corr, K, pad, out_len)
                            ref_conv = _window_from_full(full_conv, K, pad, out_len)
                            tag = f"{v.name} {dtype} block={block} K={K} L={L} C={C} mode={mode}"
                            # 1) launcher, output poisoned with NaN: every element must be written
                            out = cupy.full((C, out_len), np.nan, dtype=dtype)
                            y = launch(xg, wg, pad, out_len, block, out=out)
                            assert y is out or y.data.ptr == out.data.ptr, f"{tag}: launcher ignored out="
                            checks = [("launcher", out, ref_corr)]
                            # 2) public API, both operations
                            checks.append(("correlate", sigconv.correlate(xg, hh, mode, axis=-1, backend="cuda",
                                                                          variant=v.name, block=block), ref_corr))
                            checks.append(("convolve", sigconv.convolve(xg, hh, mode, axis=-1, backend="cuda",
                                                                        variant=v.name, block=block), ref_conv))
                            for what, yy, ref in checks:
                                err, where = _rel_err(cupy.asnumpy(yy), ref)
                                n_checked += 1
                                if not err <= TOL[dtype]:
                                    failures.append(f"{tag} {what}: rel err {err:.3g} > {TOL[dtype]} ({where})")
    return failures, n_checked


def _assert_grid(failures, n):
    assert n > 0
    assert not failures, f"{len(failures)} of {n} checks failed:\n" + "\n".join(failures[:40])


# one test per (variant, L) so that pytest-xdist can spread the grid over workers
@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
@pytest.mark.parametrize("L", [1, 7, 1823])
def test_grid(rng, L, name):
    """Awkward lengths, every K, the default, smallest and largest block of each variant."""
    _assert_grid(*_run_grid(rng, L, lambda v: sorted({v.default_block, min(v.blocks), max(v.blocks)}), only=name,
                            cs=(1, 3)))


@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_long_signal(rng, name):
    """A long signal (many blocks and overlap-save segments per channel), a short, a long and a very long filter."""
    _assert_grid(*_run_grid(rng, LONG_L, lambda v: [v.default_block], only=name, ks=(7, 255, 4095), cs=(2,)))


#: Blocks outside the powers of two (every multiple of 32 up to 1024 is a block): 3 and 31 warps.
ODD_BLOCKS = (96, 992)


@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_blocks_of_any_warp_count(rng, name):
    """Blocks of 3 and 31 warps: awkward lengths and a long signal (many blocks per channel), K below and above
    each variant's tile, against the float64 reference."""
    f, n = _run_grid(rng, 1823, lambda v: ODD_BLOCKS, only=name, ks=(1, 7, 25, 64, 255, 4095), cs=(3,))
    f2, n2 = _run_grid(rng, LONG_L, lambda v: ODD_BLOCKS, only=name, ks=(7, 1024), cs=(2,))
    _assert_grid(f + f2, n + n2)


@pytest.mark.slow
@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
@pytest.mark.parametrize("L", [1, 7, 1000])
def test_grid_all_blocks(rng, L, name):
    """Every multiple of 32 up to 1024 as the block."""
    _assert_grid(*_run_grid(rng, L, lambda v: range(32, 1025, 32), only=name))


@pytest.mark.slow
@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_grid_long_signal(rng, name):
    _assert_grid(*_run_grid(rng, BIG_L, lambda v: sorted({v.default_block, max(v.blocks)}), only=name))


@pytest.mark.parametrize("offset", [1, 2, 3])
@pytest.mark.parametrize("K", [7, 64, 301])
def test_tiled_unaligned_start(rng, offset, K):
    """x and y not 16-byte aligned (views at a float offset): the loader's shift path and scalar stores."""
    L = 50_001
    base = cupy.asarray(rng.standard_normal((1, L + offset)).astype(np.float32))
    x = base[:, offset:]
    assert x.flags.c_contiguous and x.data.ptr % 16 != 0
    w = rng.standard_normal(K).astype(np.float32)
    for mode in MODES:
        pad, out_len = window_1d(mode, L, K)
        outb = cupy.full((1, out_len + offset), np.nan, dtype=np.float32)
        out = outb[:, offset:]
        cuda1d.launch_tiled(x, cupy.asarray(w), pad, out_len, 128, out=out)
        full = np.convolve(cupy.asnumpy(x)[0].astype(np.float64), w[::-1].astype(np.float64))
        ref = _window_from_full(full[None], K, pad, out_len)
        err, where = _rel_err(cupy.asnumpy(out), ref)
        assert err <= 1e-5, f"offset {offset} K={K} {mode}: {err} {where}"


@pytest.mark.parametrize("K", [7, 63, 1023])
def test_auto_matches_reference_and_is_timed(rng, K):
    x = rng.standard_normal((2, 300_001)).astype(np.float32)
    h = rng.standard_normal(K).astype(np.float32)
    y = sigconv.convolve(cupy.asarray(x), h, "same", axis=-1, backend="cuda", variant="auto")
    ref = scipy.signal.oaconvolve(x.astype(np.float64), h.astype(np.float64)[None], mode="same", axes=-1)
    err, where = _rel_err(cupy.asnumpy(y), ref)
    assert err <= 1e-5, where
    assert _autotune.cache_path().is_file(), "auto on a large input should have stored an autotune winner"


# ----------------------------------------------------------------------------------- streaming


@pytest.mark.parametrize("variant", ["auto", "tiled", "fft", "naive", "shared"])
@pytest.mark.parametrize("K", [1, 7, 255, 1023])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_firstream_cuda_equals_lfilter(rng, variant, K, dtype):
    v = None if variant == "auto" else _registry.get("conv1d", "cuda", variant)
    if v is not None and np.dtype(dtype).name not in v.dtypes:
        pytest.skip(f"{variant} does not support {np.dtype(dtype).name}")
    C, n = 2, 40_000
    x = rng.standard_normal((C, n)).astype(dtype)
    taps = rng.standard_normal(K).astype(dtype)
    s = sigconv.FIRStream(taps, channels=C, dtype=dtype, backend="cuda", variant=variant)
    cuts = np.sort(rng.choice(np.arange(1, n), size=25, replace=False))
    cuts = np.concatenate([[0], cuts[:5], cuts[5:6], cuts[5:], [n]])  # includes an empty packet
    ys = []
    for a, b in zip(cuts[:-1], cuts[1:]):
        p = x[:, a:b]
        ys.append(s.process(cupy.asarray(p) if a % 2 else p))
    y = np.concatenate([cupy.asnumpy(v_) for v_ in ys], axis=1)
    tail = cupy.asnumpy(s.flush())
    ref_full = np.stack([np.convolve(x[c].astype(np.float64), taps.astype(np.float64)) for c in range(C)])
    tol = TOL[np.dtype(dtype).name] * 10
    err, where = _rel_err(y, ref_full[:, :n])
    assert err <= tol, where
    tail = tail.reshape(C, -1)
    err, where = _rel_err(tail, ref_full[:, n:])
    assert err <= tol, where


_SCALE = {"int16": 32768.0, "int32": 2147483648.0, "float32": 1.0}
_RANGE = {"int16": (-32768, 32767), "int32": (-2147483648, 2147483647)}


def _through_engine_hooks(ff, block):
    """What the file engine does with a block: read into the filter's page-locked buffer, staged on the device in
    the reader's place, processed, fetched back in the writer's (a copy: the fetched view is reused)."""
    buf = ff.read_buffer(max(ff.preferred_frames, block.shape[0]))
    buf[:block.shape[0]] = block
    staged = ff.stage(buf[:block.shape[0]])
    buf[:block.shape[0]] = 0  # the buffer is the next read's once stage returns
    return np.array(ff.fetch(ff.process(staged)))


@pytest.mark.parametrize("read_dtype", ["int16", "int32", "float32"])
@pytest.mark.parametrize("phase", ["zero", "linear"])
@pytest.mark.parametrize("K", [301, 1455])
@pytest.mark.parametrize("staged", [False, True], ids=["host", "staged"])
def test_filefilter_equals_cpu(rng, read_dtype, phase, K, staged):
    """Blocks of awkward sizes through the GPU file filter, called directly (host arrays) or as the file engine
    drives it (page-locked buffers, staged on the device, fetched back), against the float64 reference."""
    C, n = 2, 200_003
    xf = np.clip(rng.standard_normal((n, C)) * 0.3, -1, 1)
    if read_dtype == "float32":
        raw = xf.astype(np.float32)
    else:
        raw = np.round(xf * _SCALE[read_dtype] * 0.999).astype(read_dtype)
    out_dtype = read_dtype
    taps = scipy.signal.firwin(K, [0.05, 0.4], pass_zero=False) * 1.8  # gain > 1 so that some samples clip
    ff = GPUFileFilter(taps, C, read_dtype=read_dtype, phase=phase, out_dtype=out_dtype, clip=True,
                       chunk_frames=50_000)
    assert ff.preferred_frames == 50_000
    outs, pos = [], 0
    step = _through_engine_hooks if staged else (lambda f, b: f.process(b))
    for size in (1, 999, 50_000, 3, 70_000):
        outs.append(step(ff, raw[pos:pos + size]))
        pos += size
    outs.append(step(ff, raw[pos:]))
    outs.append(ff.finish())
    got = np.concatenate(outs, axis=0)
    assert got.shape == (n, C) and got.dtype == np.dtype(out_dtype)
    xin = raw.astype(np.float64) / _SCALE[read_dtype]
    if phase == "zero":
        ref = np.stack([scipy.signal.convolve(xin[:, c], taps, mode="same") for c in range(C)], axis=1)
    else:
        ref = np.stack([scipy.signal.lfilter(taps, 1, xin[:, c]) for c in range(C)], axis=1)
    if out_dtype in _RANGE:
        lo, hi = _RANGE[out_dtype]
        v = np.rint(ref * _SCALE[out_dtype])
        n_clip = int(((v < lo) | (v > hi)).sum())
        refq = np.clip(v, lo, hi)
        diff = np.abs(got.astype(np.float64) - refq)
        # float32 GPU arithmetic vs a float64 reference: a few ulps of the full scale
        assert diff.max() <= (1 if out_dtype == "int16" else 2 ** 12), f"max diff {diff.max()}"
        assert abs(ff.clipped - n_clip) <= max(2, n_clip // 100), (ff.clipped, n_clip)
        err, where = _rel_err(got.astype(np.float64), refq)
        assert err <= 1e-5, where
    else:
        refc = np.clip(ref, -1, 1)
        err, where = _rel_err(got, refc)
        assert err <= 1e-5, where


def test_file_engine_on_cuda_equals_the_direct_filter_and_the_cpu(rng, tmp_path, monkeypatch):
    """A PCM_16 stereo file through the file engine on cuda in blocks of 50,000 frames goes through the filter's
    page-locked buffers (every block read into one, staged, fetched) and writes exactly what the filter called
    directly on the same blocks as host arrays gives, within 1 LSB of the cpu engine, and counts the clipped
    samples as both do."""
    import soundfile as sf

    from sigconv.engine.audio import pcm_spec, probe
    from sigconv.engine.file import filter_file, fir_block_filter
    from sigconv.engine.settings import KernelChoice

    monkeypatch.setenv("SIGCONV_AUTOTUNE", "0")  # the same variant for every run: the chooser's favourite
    n, C = 230_017, 2
    x = np.clip(rng.standard_normal((n, C)) * 0.35, -1, 1)
    sf.write(tmp_path / "in.wav", x, 48000, subtype="PCM_16")
    info = probe(tmp_path / "in.wav")
    taps = scipy.signal.firwin(1455, [0.01, 0.3], pass_zero=False) * 1.7  # some samples clip
    calls = {"read_buffer": 0, "stage": 0, "fetch": 0}
    for name in calls:
        real = getattr(GPUFileFilter, name)

        def spy(self, *a, _real=real, _name=name):
            calls[_name] += 1
            return _real(self, *a)

        monkeypatch.setattr(GPUFileFilter, name, spy)

    def run(backend, out):
        kernel = KernelChoice(op="conv1d", backend=backend)
        return filter_file(info, out, lambda i, spec: fir_block_filter(taps, i.channels, spec, kernel=kernel),
                           block_frames=50_000)

    r_cuda = run("cuda", tmp_path / "cuda.wav")
    assert calls["read_buffer"] >= 5 and calls["stage"] >= 5 and calls["fetch"] >= 5, calls
    r_cpu = run("cpu", tmp_path / "cpu.wav")
    got, _ = sf.read(tmp_path / "cuda.wav", dtype="int16")
    ref, _ = sf.read(tmp_path / "cpu.wav", dtype="int16")
    raw, _ = sf.read(tmp_path / "in.wav", dtype="int16")
    ff = GPUFileFilter(taps, C, read_dtype="int16", phase="zero", out_dtype="int16", clip=True)
    direct = np.concatenate([ff.process(raw[i:i + 50_000]) for i in range(0, n, 50_000)] + [ff.finish()])
    assert got.shape == (n, C) and np.array_equal(got, direct)
    assert np.abs(got.astype(np.int32) - ref).max() <= 1
    assert r_cuda.clipped == ff.clipped > 0 and abs(r_cuda.clipped - r_cpu.clipped) <= 2, (r_cuda.clipped,
                                                                                           r_cpu.clipped)


def test_file_engine_on_cuda_rounds_24_bit_samples_as_the_cpu_does(rng, tmp_path):
    """A PCM_24 file halved on cuda and on the cpu: the odd samples fall half a 2^-23 step between two, and both
    backends round them to 2^23 steps (half to even) into the top of an int32: the same file, sample for sample
    (libsndfile left to cut a 2^31-step value would floor them instead)."""
    import soundfile as sf

    from sigconv.engine.audio import pcm_spec, probe
    from sigconv.engine.file import filter_file, fir_block_filter
    from sigconv.engine.settings import KernelChoice

    n, C = 40_001, 2
    x = np.round(np.clip(rng.standard_normal((n, C)) * 0.3, -1, 1 - 2.0**-23) * 2.0**23) / 2.0**23
    sf.write(tmp_path / "in.wav", x, 48000, subtype="PCM_24")
    info = probe(tmp_path / "in.wav")
    raw, _ = sf.read(tmp_path / "in.wav", dtype="int32")
    assert np.count_nonzero((raw >> 8) & 1) > n // 4  # odd 24-bit samples: halves that must round
    out = {}
    for backend in ("cuda", "cpu"):
        kernel = KernelChoice(op="conv1d", backend=backend)
        filter_file(info, tmp_path / f"{backend}.wav",
                    lambda i, spec: fir_block_filter(np.array([0.5]), i.channels, spec, kernel=kernel),
                    block_frames=10_000)
        out[backend], _ = sf.read(tmp_path / f"{backend}.wav", dtype="int32")
    assert pcm_spec(sf.info(str(tmp_path / "cuda.wav")).subtype).align == 256
    assert np.array_equal(out["cuda"], out["cpu"])
    assert np.array_equal(out["cpu"] >> 8, np.rint((raw >> 8) / 2).astype(np.int32))


def test_filefilter_oom_retry_then_clear_error(rng, monkeypatch):
    taps = scipy.signal.firwin(31, 0.2)
    ff = GPUFileFilter(taps, 1, read_dtype="float32", phase="linear", out_dtype="float32", clip=False)
    calls = []
    real = ff._process_device

    def flaky(block):
        calls.append(block.shape[0])
        if block.shape[0] > 40_000:
            raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0)
        return real(block)

    monkeypatch.setattr(ff, "_process_device", flaky)
    x = rng.standard_normal((100_000, 1)).astype(np.float32)
    y = ff.process(x)
    ref = scipy.signal.lfilter(taps, 1, x[:, 0].astype(np.float64))
    err, where = _rel_err(y[:, 0], ref)
    assert err <= 1e-5 and len(calls) > 1, where

    def always(block):
        raise cupy.cuda.memory.OutOfMemoryError(1 << 40, 0)

    monkeypatch.setattr(ff, "_process_device", always)
    with pytest.raises(RuntimeError, match="GPU out of memory filtering a block of"):
        ff.process(x)


@pytest.mark.parametrize("K, want", [(31, "tiled"), (1455, "fft_fused"), (8193, "fft")])
def test_filefilter_runs_and_reports_one_variant(rng, monkeypatch, K, want):
    """auto is resolved once, on the first block, by the chooser; every launch of the file (history correction
    and tail included) runs that variant, and ``variant`` names it."""
    monkeypatch.setenv("SIGCONV_AUTOTUNE", "0")  # the chooser's favourite, without timing
    ran = []
    real = cuda1d.corr1d

    def spy(*args, **kw):
        ran.append(kw.get("variant"))
        return real(*args, **kw)

    monkeypatch.setattr(cuda1d, "corr1d", spy)
    ff = GPUFileFilter(scipy.signal.firwin(K, 0.2), 2, read_dtype="float32", phase="zero", out_dtype="float32",
                       clip=False)
    assert ff.variant == "auto"
    x = rng.standard_normal((70_001, 2)).astype(np.float32)
    got = np.concatenate([ff.process(x[:50_000]), ff.process(x[50_000:]), ff.finish()])
    assert got.shape == x.shape and set(ran) == {want} and ff.variant == want


# ----------------------------------------------------------------------------------- refusals


def test_block_rejections():
    x = cupy.zeros((1, 100), np.float32)
    w = cupy.ones(3, np.float32)
    for bad in (48, 2048, 0):
        with pytest.raises(ValueError, match="block"):
            sigconv.convolve(x, w, axis=-1, backend="cuda", variant="tiled", block=bad)
    for v in VARIANTS:
        for bad, why in ((48, "multiple of 32"), ((32, 1), "must be an integer"), (1056, "between 32 and 1024")):
            with pytest.raises(ValueError, match=why):
                v.load()(x, w, 1, 100, bad)


def test_constant_tap_limit_refused():
    x32 = cupy.zeros((1, 10_000), np.float32)
    with pytest.raises(ValueError, match="8192"):
        cuda1d.launch_constant(x32, cupy.ones(8193, np.float32), 0, 100, 256)
    x64 = cupy.zeros((1, 10_000), np.float64)
    with pytest.raises(ValueError, match="4096"):
        cuda1d.launch_constant(x64, cupy.ones(4097, np.float64), 0, 100, 256)
    cuda1d.launch_constant(x32, cupy.ones(8192, np.float32), 0, 100, 256)  # the limit itself is fine


def test_float64_on_float32_only_variant_refused():
    x = cupy.zeros((1, 100), np.float64)
    with pytest.raises(ValueError, match="float32"):
        sigconv.convolve(x, np.ones(3), axis=-1, backend="cuda", variant="tiled")


def test_unknown_variant_refused():
    with pytest.raises(ValueError, match="variant must be one of"):
        sigconv.convolve(cupy.zeros(10, np.float32), np.ones(3, np.float32), backend="cuda", variant="nope")


# ----------------------------------------------------------------------------------- caches


def test_autotune_corrupt_cache_rebuilt_and_not_retimed():
    path = _autotune.cache_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{ this is not json")
    calls = []
    a = cupy.zeros(1 << 16, np.float32)

    def runner(variant, block):
        calls.append((variant, block))
        if variant == "bad":
            raise ValueError("refused")
        a[: block * (1 if variant == "fast" else 64)] += 1  # "slow" touches more memory

    cands = [("slow", 256), ("bad", 128), ("fast", 512)]
    got = _autotune.pick("conv1d", (1, 20, 7, "float32"), cands, runner)
    assert got[0] in ("fast", "slow")
    n = len(calls)
    assert n >= 2 * (_autotune.WARMUP + _autotune.REPS)
    import json

    data = json.loads(path.read_text())  # rewritten, valid
    assert data["sections"]
    assert _autotune.pick("conv1d", (1, 20, 7, "float32"), cands, runner) == got
    assert len(calls) == n, "memo hit must not re-time"
    _autotune.clear_memo()
    assert _autotune.pick("conv1d", (1, 20, 7, "float32"), cands, runner) == got
    assert len(calls) == n, "disk hit must not re-time"


def test_autotune_disabled_and_unwritable(monkeypatch, tmp_path):
    calls = []
    monkeypatch.setenv("SIGCONV_AUTOTUNE", "0")
    assert _autotune.pick("conv1d", (9,), [("a", 32), ("b", 64)], lambda v, b: calls.append(v)) == ("a", 32)
    assert not calls
    monkeypatch.setenv("SIGCONV_AUTOTUNE", "1")
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(blocker / "sub"))  # cannot be created
    got = _autotune.pick("conv1d", (10,), [("a", 32)], lambda v, b: calls.append(v))
    assert got == ("a", 32)


def test_compiled_modules_cached(rng):
    x = cupy.asarray(rng.standard_normal((2, 5000)).astype(np.float32))
    w = cupy.ones(25, np.float32)
    for name in ("tiled", "constant", "fft"):
        cuda1d.corr1d(x, w, 12, 5000, variant=name)
        n = len(_kernels._MODULES)
        cuda1d.corr1d(x, w, 12, 5000, variant=name)
        assert len(_kernels._MODULES) == n, f"{name}: second call compiled a new module"


#: fft_fused on its own path (problems above the float64 fallback): taps around each tile length's limits (the tile
#: is the power of two above 16x K from 1024 to 4096, 16384 from 1025 taps, 32768 from 4800:
#: sigconv.registry.auto.fused_tile), the default filter, the largest; lengths that end inside a tile, just after one,
#: or within the overlap.
FUSED_TAPS = (1, 2, 64, 65, 128, 129, 1024, 1025, 4799, 4800, 7921, 8192)


@pytest.mark.parametrize("K", FUSED_TAPS)
def test_fft_fused_tiles_and_taps(rng, K):
    """fft_fused against the float64 reference: every mode, convolve and correlate, the default block (transforms
    in place), 3 warps (two buffers from the 4096-sample tile up) and 1024 threads (in place, threads past a pass's
    last butterfly), one and three channels, lengths around its tile boundaries; poisoned outputs must all be
    written. The launcher is the fused kernel itself (not the float64 fallback of small problems)."""
    from sigconv.backends import overlap_save
    from sigconv.registry import auto

    N = auto.fused_tile(K)
    V = N - K + 1
    launch = _registry.get("conv1d", "cuda", "fft_fused").load()
    failures, n = [], 0
    for C, L in ((1, 7 * V + 1), (3, max(3 * V - 1, (1 << 16) // 3 + K)), (1, (1 << 16) + K + 5)):
        x = rng.standard_normal((C, L)).astype(np.float32)
        h = rng.standard_normal(K).astype(np.float32)
        x64, h64 = x.astype(np.float64), h.astype(np.float64)
        full_conv = scipy.signal.oaconvolve(x64, h64[None, :], axes=-1)
        full_corr = scipy.signal.oaconvolve(x64, h64[::-1][None, :], axes=-1)
        xg = cupy.asarray(x)
        for block in (None, 96, 1024):  # None: the tile's own (auto.fused_block)
            for mode, pad, out_len in _cases(L, K):
                if C * (out_len + K) <= overlap_save._FFT_F64_BELOW:
                    continue
                tag = f"K={K} C={C} L={L} block={block} {mode}"
                out = cupy.full((C, out_len), np.nan, dtype=np.float32)
                assert launch(xg, cupy.asarray(h), pad, out_len, block, out=out) is out
                checks = [("launcher", out, _window_from_full(full_corr, K, pad, out_len)),
                          ("convolve", sigconv.convolve(xg, h, mode, axis=-1, backend="cuda", variant="fft_fused",
                                                        block=block), _window_from_full(full_conv, K, pad, out_len))]
                for what, yy, ref in checks:
                    err, where = _rel_err(cupy.asnumpy(yy), ref)
                    n += 1
                    if not err <= TOL["float32"]:
                        failures.append(f"{tag} {what}: rel err {err:.3g} ({where})")
    _assert_grid(failures, n)


@pytest.mark.parametrize("K", (4800, 7921, 8192))
def test_fft_fused_longest_tile_on_512_threads(rng, K):
    """The 32768 tile on 512 threads (two butterflies a thread: overlap_save.fused_wide) against the float64
    reference and against the same tile on 1024 threads: every mode, one and two channels, an even length (8-byte
    loads; 16-byte ones on the tiles wholly inside x) and an odd one (float loads), x one float off, last tiles of
    1, 2 and 3 outputs ("same" on 3 V + 1 to 3 V + 3 samples: fewer than a 16-byte store's four); poisoned outputs
    must all be written."""
    V = 32768 - K + 1
    failures, n = [], 0
    for C, L, off in ((1, 5 * V, 0), (2, 3 * V + 1, 0), (2, 3 * V + 2, 0), (2, 3 * V + 3, 0), (1, 4 * V, 1)):
        x0 = rng.standard_normal((C, L + off)).astype(np.float32)
        h = rng.standard_normal(K).astype(np.float32)
        full_corr = scipy.signal.oaconvolve(x0[:, off:].astype(np.float64), h.astype(np.float64)[::-1][None, :],
                                            axes=-1)
        xg = cupy.asarray(x0)[:, off:]
        for mode, pad, out_len in _cases(L, K):
            n += 1
            failures += _wide_against_1024(xg, h, pad, out_len, _window_from_full(full_corr, K, pad, out_len),
                                           f"K={K} C={C} L={L} off={off} {mode}")
    _assert_grid(failures, n)


def _wide_against_1024(xg, h, pad, out_len, ref, tag, yoff=0):
    """The 32768 tile on 512 threads against the float64 reference ``ref`` and the same tile on 1024 threads, each
    into poisoned outputs ``yoff`` floats past an allocation's start: a list of the failure, or none."""
    from sigconv.backends import overlap_save

    C = xg.shape[0]
    outs = {}
    for block in (512, 1024):
        buf = cupy.full(C * out_len + yoff, np.nan, dtype=np.float32)
        outs[block] = buf[yoff:].reshape(C, out_len)  # (contiguous)
        overlap_save.launch_fft_fused(xg, cupy.asarray(h), pad, out_len, block, out=outs[block], tile=32768)
    err, where = _rel_err(cupy.asnumpy(outs[512]), ref)
    diff = float(cupy.abs(outs[512] - outs[1024]).max() / cupy.abs(outs[1024]).max())
    ok = err <= TOL["float32"] and diff <= TOL["float32"]
    return [] if ok else [f"{tag}: rel err {err:.3g} ({where}), against 1024 threads {diff:.3g}"]


@pytest.mark.parametrize("K, C, off, yoff", [(7921, 1, 0, 0), (7922, 3, 2, 1), (8000, 2, 0, 3), (5001, 4, 2, 2)])
def test_fft_fused_longest_tile_on_one_block_a_multiprocessor(rng, K, C, off, yoff):
    """The launcher's grid of one block a multiprocessor for more tiles than multiprocessors (overlap_save.
    fused_persistent: compute capability 9.0), each block prefetching its next tile and writing its outputs through
    bulk copies, against the float64 reference and the same tiles on a block a tile (1024 threads): tiles of several
    channels in one sequence, x two floats off a 16-byte boundary (every other tile prefetched where the stride is 2
    mod 4 floats), outputs 1 to 3 floats off one (the bulk copies' head and tail floats); poisoned outputs must all be
    written."""
    from sigconv.backends import overlap_save

    sms, optin, cc = overlap_save._device_geometry()
    V = 32768 - K + 1
    L = 2 * (-(-(sms + 37) * V // C) // 2)  # (even: 8-byte loads)
    x = rng.standard_normal((C, L)).astype(np.float32)
    h = rng.standard_normal(K).astype(np.float32)
    full_corr = scipy.signal.oaconvolve(x.astype(np.float64), h.astype(np.float64)[::-1][None, :], axes=-1)
    xg = cupy.concatenate([cupy.zeros(off, np.float32), cupy.asarray(x).ravel()])[off:].reshape(C, L)  # (contiguous)
    failures, n = [], 0
    for mode, pad, out_len in _cases(L, K):
        z, d = overlap_save.fused_alignment(K, pad, 32768)
        pairs = overlap_save.fused_pairs(32768, 512, K + z + d, pad + z, L, xg.data.ptr % 8 == 0)
        plan = overlap_save.fused_plan(K + z + d, out_len, C, 512, tile=32768, pairs=pairs,
                                       device=(sms, optin, cc))
        assert plan["persistent"] == (cc == 90), plan
        n += 1
        failures += _wide_against_1024(xg, h, pad, out_len, _window_from_full(full_corr, K, pad, out_len),
                                       f"K={K} C={C} L={L} {mode}", yoff)
    _assert_grid(failures, n)


def test_fft_fused_device_taps_kept_and_changed(rng):
    """Taps that exist only on the device: the launcher keeps the table made from the last taps and skips the
    transform for taps bit for bit the same; the same array changed in place, another array one tap apart, the
    previous taps again, another stream and another thread each get their own filter. Every output against the
    float64 reference."""
    import threading

    K, L = 1023, (1 << 16) + 5
    launch = _registry.get("conv1d", "cuda", "fft_fused").load()
    x = rng.standard_normal((1, L)).astype(np.float32)
    xg, x64 = cupy.asarray(x), x.astype(np.float64)
    pad, out_len = window_1d("same", L, K)
    failures = []

    def check(tag, wd):
        ref = _window_from_full(scipy.signal.oaconvolve(x64, cupy.asnumpy(wd).astype(np.float64)[None, ::-1],
                                                        axes=-1), K, pad, out_len)
        y = launch(xg, wd, pad, out_len, None)
        err, where = _rel_err(cupy.asnumpy(y), ref)
        if not err <= TOL["float32"]:
            failures.append(f"{tag}: rel err {err:.3g} ({where})")

    w = cupy.asarray(rng.standard_normal(K).astype(np.float32))
    check("first", w)
    check("the same taps", w)
    w[5] += 1.0
    check("changed in place", w)
    w2 = w.copy()
    w2[-1] = -w2[-1]
    check("one tap apart", w2)
    check("the previous taps again", w)
    with cupy.cuda.Stream():
        check("another stream", w2)
        check("another stream, other taps", w)
    check("back on the first stream", w2)
    t = threading.Thread(target=check, args=("another thread", w))
    t.start()
    t.join()
    check("after the thread", w2)
    _assert_grid(failures, 10)


@pytest.mark.parametrize("K, C, block", [(100, 1, None), (255, 2, 96), (2047, 1, None), (7921, 1, None),
                                         (7921, 2, 1024)])
@pytest.mark.parametrize("pdl", ["on", "off"])
def test_fft_fused_tiles_start_while_the_spectrum_kernel_runs(rng, monkeypatch, K, C, block, pdl):
    """Taps on the device: the tile kernel goes out right after the spectrum kernel with programmatic stream
    serialization (compute capability 9.0 and later, with cuda-bindings: sigconv._kernels.launch_after), its first
    tiles loading and taking their first pass while the spectrum kernel runs (the 2048 tile in place, the 4096 tile
    through two buffers, the 16384 and 32768 column tiles, the last on 512 and 1024 threads). New taps on every call
    but one, which the spectrum kernel transforms for far longer than a first pass takes: each call's outputs must be
    its own filter's, against the float64 reference. SIGCONV_PDL=0: the plain launch, the same outputs."""
    from sigconv.backends import overlap_save

    if pdl == "off":
        monkeypatch.setenv(_kernels.PDL_ENV, "0")
    else:
        monkeypatch.delenv(_kernels.PDL_ENV, raising=False)
    # (a driver that refused the launch, here or earlier in this process, fails the test: on compute capability 9.0
    # with cuda-bindings it must take it)
    expect = (pdl == "on" and int(cupy.cuda.Device().compute_capability) >= 90
              and _kernels._cuda_driver() is not None)
    print(f"programmatic launch expected: {expect}; devices that refused it: {sorted(_kernels._PDL_OFF)}")
    got, real = [], _kernels.launch_after

    def spy(*args, **kw):
        got.append(real(*args, **kw))
        return got[-1]

    monkeypatch.setattr(_kernels, "launch_after", spy)
    L = 40 * (overlap_save.fused_plan(K, 1 << 20, C, block)["N"] - K + 1) + 3
    x = rng.standard_normal((C, L)).astype(np.float32)
    xg, x64 = cupy.asarray(x), x.astype(np.float64)
    pad, out_len = window_1d("same", L, K)
    failures = []
    taps = [rng.standard_normal(K).astype(np.float32) for _ in range(3)]
    for i, h in enumerate(taps + [taps[-1]]):  # (the last call: the same taps, the table kept)
        y = overlap_save.launch_fft_fused(xg, cupy.asarray(h), pad, out_len, block)
        ref = _window_from_full(scipy.signal.oaconvolve(x64, h.astype(np.float64)[None, ::-1], axes=-1), K, pad,
                                out_len)
        err, where = _rel_err(cupy.asnumpy(y), ref)
        if not err <= TOL["float32"]:
            failures.append(f"call {i} (K={K} C={C} block={block} pdl={pdl}): rel err {err:.3g} ({where})")
    _assert_grid(failures, 4)
    assert got == [expect] * 4


@pytest.mark.parametrize("variant, dtype, mags, K", [("fft", "float32", (120, -100), 1023),
                                                      ("fft", "float64", (1000, -1000), 1023),
                                                      ("fft_fused", "float32", (120, -100), 1023),
                                                      ("fft_fused", "float32", (116, -100), 4095),
                                                      ("fft_fused", "float32", (116, -100), 7921)])
def test_fft_variants_keep_huge_and_tiny_signals_exact_in_scale(variant, dtype, mags, K, rng):
    """The fft variants' kernels scale each segment of extreme magnitude by a power of two: a signal whose parts
    lie at 2^mag for mag in {0, huge, tiny} (one part per stretch of a channel, so segments of each kind and
    segments mixing them) filters as accurately, relative to each part's own scale, as an ordinary one (away from
    the segments that mix parts: an FFT's error is relative to its segment's peak), with every output finite; long
    enough that float32 runs its own transforms. (4095 taps at 2^116, not 2^120: the true outputs of 2^120 reach
    float32's largest values, 2^120 times some 2^8.)"""
    from sigconv.backends.overlap_save import fft_size
    from sigconv.registry.auto import fused_tile

    N = fused_tile(K) if variant == "fft_fused" else fft_size(K)
    C, L = 2, max((1 << 17) + 3, 24 * N + 3)  # each of the six parts more than two segments long
    base = rng.standard_normal((C, L))
    h = rng.standard_normal(K)
    parts = np.array_split(np.arange(L), 6)
    scale = np.zeros(L)
    for k, idx in enumerate(parts):
        scale[idx] = ((0,) + mags)[k % 3]
    x = np.ldexp(base, scale.astype(int)).astype(dtype)
    y = cupy.asnumpy(sigconv.convolve(cupy.asarray(x), h.astype(dtype), "same", axis=-1, backend="cuda",
                                      variant=variant))
    assert np.isfinite(y).all()
    # the reference of an output away from the parts' borders involves one part's samples only: the convolution of
    # the signal brought back to unit scale, times that part's power of two (exact)
    unit = np.ldexp(x.astype(np.float64), -scale.astype(int))
    ref = np.stack([scipy.signal.oaconvolve(r, h, "same") for r in unit])
    for k, idx in enumerate(parts):
        inner = idx[N:-N]  # outputs whose overlap-save segment holds this part's samples only
        got = np.ldexp(y[:, inner].astype(np.float64), -int(scale[inner[0]]))
        err = np.linalg.norm(got - ref[:, inner]) / np.linalg.norm(ref[:, inner])
        assert err <= TOL[dtype] * 10, f"part {k} (2^{int(scale[inner[0]])}): rel err {err:.2e}"


def test_device_peak_exponents_and_float64_copies_keep_float32_subnormals(rng):
    """CuPy builds every kernel with -ftz=true, where a float32 subnormal converted to float64 becomes zero (its own
    astype does so): the device's peak exponents and exact_float64 keep them, equal to NumPy's."""
    from sigconv._core.xp import exact_float64, peak_exponents

    a = np.ldexp(rng.standard_normal((4, 257)), np.array([[-130], [-146], [-126], [0]])).astype(np.float32)
    assert np.count_nonzero(np.abs(a) < np.finfo(np.float32).tiny) > 500  # (mostly subnormal rows)
    d = cupy.asarray(a)
    assert np.array_equal(cupy.asnumpy(exact_float64(d)), a.astype(np.float64))
    assert np.array_equal(cupy.asnumpy(peak_exponents(d)), peak_exponents(a))


@pytest.mark.parametrize("variant, K", [("fft", 1023), ("fft_fused", 1023), ("fft_fused", 4095),
                                        ("fft_fused", 7921)])
def test_fft_variants_keep_outputs_below_the_normal_range(variant, K, rng):
    """Taps of some 2^-130 on a signal of unit scale: the outputs lie below float32's normal range (2^-126), where
    the kernels' scaling by a power of two (2^tap_shift, not a normal float) must round each output once rather than
    flush it to zero. Brought back by 2^130 they are the float64 reference's to the subnormals' precision (2^-149 on
    outputs of some 2^-130). The longest tile on its 512 threads (7921 taps), the column tile (4095) and the in-place
    one (1023)."""
    C, L = 2, 3 * 32768 + 5
    x = rng.standard_normal((C, L)).astype(np.float32)
    h = np.ldexp(rng.standard_normal(K) / np.sqrt(K), -130).astype(np.float32)  # (subnormal taps, exact inputs)
    y = cupy.asnumpy(sigconv.convolve(cupy.asarray(x), h, "same", axis=-1, backend="cuda", variant=variant))
    ref = np.stack([scipy.signal.oaconvolve(r, h.astype(np.float64), "same") for r in x.astype(np.float64)])
    assert np.count_nonzero(y) >= 0.99 * y.size, f"{y.size - np.count_nonzero(y)} outputs flushed to zero"
    got, want = np.ldexp(y.astype(np.float64), 130), np.ldexp(ref, 130)
    err = np.linalg.norm(got - want) / np.linalg.norm(want)
    assert err <= TOL["float32"], f"rel err {err:.2e} (K={K}, {variant})"


# ----------------------------------------------------------------------------------- exact integers


@pytest.mark.parametrize("variant", ["auto", "naive"])
@pytest.mark.parametrize("K", [1, 7, 64, 301])
def test_exact_uint64_bit_for_bit(rng, variant, K):
    """int64 values near 2^62 (products wrap) passed as uint64: every window equals np.convolve's int64 result bit
    for bit (both wrap mod 2^64); poisoned outputs must all be written."""
    C, L = 2, 1823
    x = rng.integers(-(2**62), 2**62, (C, L), dtype=np.int64)
    h = rng.integers(-(2**62), 2**62, K, dtype=np.int64)  # correlation taps
    full = np.stack([np.convolve(r, h[::-1]) for r in x])  # full[n] = sum_j h[j] x[n + j - (K-1)]
    xg, wg = cupy.asarray(x.view(np.uint64)), cupy.asarray(h.view(np.uint64))
    for mode, pad, out_len in ((m,) + window_1d(m, L, K) for m in MODES):
        out = cupy.full((C, out_len), np.uint64(0xA5A5A5A5A5A5A5A5), dtype=cupy.uint64)
        y = cuda1d.corr1d(xg, wg, pad, out_len, variant=variant, out=out)
        assert y is out
        ref = full[:, K - 1 - pad:K - 1 - pad + out_len]
        bad = cupy.asnumpy(y).view(np.int64) != ref
        assert not bad.any(), f"K={K} {mode}: first mismatch at {np.argwhere(bad)[0].tolist()}"


def test_exact_uint64_refused_by_other_variants():
    """uint64 runs on naive only: every other variant refuses it in one line naming the dtype."""
    x = cupy.ones((1, 100), cupy.uint64)
    w = cupy.ones(3, cupy.uint64)
    for v in VARIANTS:
        if v.name in cuda1d.EXACT_VARIANTS:
            continue
        with pytest.raises(ValueError, match=f"{v.name}.*uint64") as e:
            cuda1d.corr1d(x, w, 1, 100, variant=v.name)
        assert "\n" not in str(e.value)
        with pytest.raises(ValueError, match="uint64"):  # the launcher itself, through its registry entry
            v.run(x, w, 1, 100, v.default_block)
    with pytest.raises(ValueError, match="integer array for uint64"):
        cuda1d.corr1d(x, cupy.ones(3, cupy.float64), 1, 100)
    y = cuda1d.corr1d(x, cupy.full(3, -1, cupy.int64), 1, 100)  # signed taps, taken mod 2^64
    assert cupy.asnumpy(y).view(np.int64)[0, 1:-1].tolist() == [-3] * 98


@pytest.mark.parametrize("method", ["fir", "spectral"])
def test_a_cuda_denoise_imports_neither_cupyx_nor_scipy_fft(tmp_path, method):
    """`sigconv denoise --backend cuda` of a few seconds, in a process of its own (its filter's tail is a problem
    small enough for the float64 overlap-save path, with cuFFT's inverse): the run imports CuPy but not cupyx, whose
    package pulls in scipy.sparse and SciPy's array-API layer (a third of a second or more of a short run). (``import
    cupy`` leaves a lazy ``cupyx`` in sys.modules; its package body, which imports cupyx.scipy and cupyx.linalg, runs
    on first use.)"""
    import os
    import subprocess
    import sys

    import soundfile as sf

    from conftest import ROOT

    t = np.arange(3 * 48000) / 48000.0
    sf.write(tmp_path / "in.wav", np.stack([0.3 * np.sin(2 * np.pi * 440 * t), 0.2 * np.sin(2 * np.pi * 97 * t)], 1),
             48000, subtype="PCM_16")
    code = ("import sys, sigconv; job = sigconv.prepare_denoise(sys.argv[1], sys.argv[2], method=sys.argv[3], "
            "kernel=sigconv.KernelChoice(backend='cuda')); job.run(); "
            "print(job.kernel.backend, 'cupy' in sys.modules, 'cupyx.scipy' in sys.modules, "
            "'cupyx.linalg' in sys.modules, 'scipy.fft' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "in.wav"), str(tmp_path / "out.wav"), method],
                         capture_output=True, text=True, timeout=300, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["cuda", "True", "False", "False", "False"]
    assert sf.info(str(tmp_path / "out.wav")).frames == t.size


@pytest.mark.parametrize("variant, K", [("constant", 7), ("tiled", 25), ("tiled", 200), ("ffa", 63)])
def test_constant_memory_taps_apart_on_two_streams(variant, K, rng):
    """Variants whose taps sit in __constant__ memory (one array per module and device, shared by every stream): a
    long filtering queued on one stream with another filter's right behind it on a second stream, and the same from
    two host threads, give each output bit for bit what its filter gives alone (which the grids above check against
    float64)."""
    import threading

    L = 1 << 26
    launch = _registry.get("conv1d", "cuda", variant).load()
    xg = cupy.asarray(rng.standard_normal((1, L)).astype(np.float32))
    pad, out_len = window_1d("same", L, K)
    taps = [cupy.asarray(rng.standard_normal(K).astype(np.float32)) for _ in range(2)]
    alone = [launch(xg, w, pad, out_len, None) for w in taps]
    cupy.cuda.Device().synchronize()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    failures = []
    for rnd in range(3):
        ys = [None, None]
        for i in (0, 1):
            with streams[i]:
                ys[i] = launch(xg, taps[i], pad, out_len, None)
        for s in streams:
            s.synchronize()
        failures += [f"round {rnd}, stream {i}" for i in (0, 1) if not bool((ys[i] == alone[i]).all())]

    def on_thread(i, out):
        with streams[i]:
            out[i] = launch(xg, taps[i], pad, out_len, None)
        streams[i].synchronize()

    ys = [None, None]
    threads = [threading.Thread(target=on_thread, args=(i, ys)) for i in (0, 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failures += [f"thread {i}" for i in (0, 1) if not bool((ys[i] == alone[i]).all())]
    _assert_grid(failures, 8)
