"""The file engine: block-size independent, subtype/format preserving, atomic."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import scipy.signal as ss
import soundfile as sf

import sigconv
from sigconv.engine.audio import pcm_spec, probe
from sigconv.engine.file import CPUFileFilter, filter_file
from conftest import ROOT, rel_err, write_audio


def _run(path, out, taps, block_frames=None, phase="zero", **kw):
    info = probe(path)
    return filter_file(info, out, lambda i, s: CPUFileFilter(taps, i.channels, s, phase=phase), overwrite=True,
                       block_frames=block_frames, **kw)


def _whole(x, taps, phase="zero"):
    """Reference: the whole array at once, float64 (x is (frames, C))."""
    if phase == "zero":
        return np.stack([ss.oaconvolve(x[:, c], taps, "same") for c in range(x.shape[1])], 1)
    return ss.lfilter(taps, 1, x, axis=0)


@pytest.mark.parametrize("K, block", [(K, b) for K in (1, 31, 2001) for b in (7, 1000, 2000, 2001, 2002, 65536, None)]
                         + [(1, 1), (31, 1), (31, 30)])
def test_any_block_size_equals_whole_array(tmp_path, rng, K, block):
    """FLOAT file: streamed output equals whole-array filtering to <= 1e-6 (float32), blocks shorter than the
    filter included (block 1 and 7 against 31 and 2001 taps); block 1 on a shorter signal (every sample a seam)."""
    x = (0.2 * rng.standard_normal((30_011 if block != 1 else 6_007, 2))).astype(np.float32)
    src = write_audio(tmp_path / "in.wav", x, subtype="FLOAT")
    taps = sigconv.design_fir("lowpass", 5000, 48000, numtaps=K) if K > 1 else np.array([0.7])
    _run(src, tmp_path / "out.wav", taps, block_frames=block)
    y, fs = sf.read(tmp_path / "out.wav", dtype="float64")
    assert fs == 48000 and y.shape == x.shape
    assert rel_err(y, _whole(x.astype(float), taps)) <= 1e-6


@pytest.mark.parametrize("phase", ["zero", "linear"])
@pytest.mark.parametrize("subtype, channels", [("PCM_16", 1), ("PCM_16", 2), ("PCM_24", 2), ("FLOAT", 8),
                                               ("PCM_24", 8), ("PCM_16", 8)])
def test_subtypes_and_channels_preserved(tmp_path, rng, subtype, channels, phase):
    x = 0.3 * rng.standard_normal((20_000, channels))
    src = write_audio(tmp_path / "in.wav", x, subtype=subtype)
    taps = sigconv.design_fir("bandpass", (100, 6000), 48000, numtaps=301)
    res = _run(src, tmp_path / "out.wav", taps, block_frames=4096, phase=phase)
    info = sf.info(str(tmp_path / "out.wav"))
    assert (info.subtype, info.channels, info.samplerate, info.frames) == (subtype, channels, 48000, 20_000)
    xin, _ = sf.read(src, dtype="float64", always_2d=True)
    y, _ = sf.read(tmp_path / "out.wav", dtype="float64", always_2d=True)
    ref = _whole(xin, taps, phase)
    lsb = {"PCM_16": 2**-15, "PCM_24": 2**-23, "FLOAT": 0}[subtype]
    assert np.max(np.abs(y - ref)) <= 0.5 * lsb + 1e-6 * np.max(np.abs(ref))
    assert res.clipped == 0


def test_flac_and_ogg_formats_kept(tmp_path, rng):
    x = 0.2 * rng.standard_normal((9000, 2))
    taps = sigconv.design_fir("lowpass", 3000, 48000, numtaps=101)
    for name, fmt, sub in (("a.flac", "FLAC", "PCM_24"), ("a.ogg", "OGG", "VORBIS"), ("a.aiff", "AIFF", "PCM_16")):
        src = write_audio(tmp_path / name, x, subtype=sub, format=fmt)
        out = tmp_path / ("out_" + name)
        _run(src, out, taps)
        info = sf.info(str(out))
        assert (info.format, info.subtype, info.channels) == (fmt, sub, 2)
        assert abs(info.frames - 9000) <= (0 if fmt != "OGG" else 1024)


def test_clipping_is_applied_and_counted(tmp_path):
    x = np.full((5000, 1), 0.9)
    x[::2] = -0.9
    src = write_audio(tmp_path / "in.wav", x, subtype="PCM_16")
    res = _run(src, tmp_path / "out.wav", np.array([2.0]))  # gain 2: every sample clips
    y, _ = sf.read(tmp_path / "out.wav", dtype="int16")
    assert res.clipped == 5000
    assert set(np.unique(y)) == {-32768, 32767}


def test_quantisation_rounds_like_libsndfile():
    spec = pcm_spec("PCM_16")
    from sigconv.engine.audio import quantise

    q, c = quantise(np.array([[0.5], [1.0], [-1.0], [0.99999], [-1.5]], np.float32), spec)
    assert q.ravel().tolist() == [16384, 32767, -32768, 32767, -32768]
    assert c == 3  # 1.0, 0.99999 (rounds to 32768) and -1.5 do not fit


def test_failure_midway_leaves_no_output(tmp_path, rng):
    """An exception in the filter after some blocks were written: no output, no temporary file."""
    src = write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal((50_000, 1)))
    out = tmp_path / "out.wav"
    out_before = b"previous contents"
    out.write_bytes(out_before)

    class Boom(CPUFileFilter):
        n = 0

        def process(self, block):
            Boom.n += 1
            if Boom.n == 4:
                raise RuntimeError("simulated failure")
            return super().process(block)

    with pytest.raises(RuntimeError, match="simulated"):
        filter_file(probe(src), out, lambda i, s: Boom(np.ones(5) / 5, 1, s), overwrite=True, block_frames=1000)
    assert out.read_bytes() == out_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.wav", "out.wav"]


def test_cancel_leaves_no_output(tmp_path, rng):
    src = write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal((100_000, 1)))
    cancel = threading.Event()

    def progress(done):
        if done > 10_000:
            cancel.set()

    with pytest.raises(KeyboardInterrupt):
        filter_file(probe(src), tmp_path / "out.wav", lambda i, s: CPUFileFilter(np.ones(3) / 3, 1, s),
                    progress=progress, cancel=cancel, block_frames=1000)
    assert [p.name for p in tmp_path.iterdir()] == ["in.wav"]


def test_cancel_while_the_writer_drains_leaves_no_output(tmp_path, rng):
    """A cancel after the last block is filtered, while the writer still has queued blocks to write (a slow
    disk), stops the run too: no output, no temporary file."""
    src = write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal((4000, 1)))
    cancel = threading.Event()
    filtered = []

    class Counted(CPUFileFilter):
        def process(self, block):
            filtered.append(block.shape[0])
            return super().process(block)

    def progress(done):  # the writer's callback: it waits until every block is filtered, then cancels
        for _ in range(500):
            if sum(filtered) == 4000:
                break
            threading.Event().wait(0.01)
        cancel.set()

    with pytest.raises(KeyboardInterrupt):
        filter_file(probe(src), tmp_path / "out.wav", lambda i, s: Counted(np.ones(3) / 3, 1, s),
                    progress=progress, cancel=cancel, block_frames=1000)
    assert sum(filtered) == 4000  # the cancel came after the filtering, in the writer's drain
    assert [p.name for p in tmp_path.iterdir()] == ["in.wav"]


# ------------------------------------------------------------------------------- backend "auto" for a whole file


def test_auto_backend_rule_scales_with_cores_and_yields_once_cupy_is_loaded(monkeypatch):
    """registry.auto.prefer_cpu: below the measured crossover (scaled by the host's cores over the 16 that measured
    it) the cpu; at or above it, for an unknown length or an unknown operation, not; and never once CuPy is loaded
    in the process (the GPU's start-up is paid)."""
    import sys

    from sigconv.registry import auto

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    for op, n in auto.CPU_FASTER_BELOW.items():
        assert auto.prefer_cpu(op, n - 1, cores=16) and not auto.prefer_cpu(op, n, cores=16)
        assert auto.prefer_cpu(op, 2 * n - 1, cores=32) and not auto.prefer_cpu(op, n // 4, cores=4)
        assert not auto.prefer_cpu(op, None, cores=16)
        monkeypatch.setitem(sys.modules, "cupy", object())
        assert not auto.prefer_cpu(op, 1, cores=16)
        monkeypatch.delitem(sys.modules, "cupy")
    assert not auto.prefer_cpu("conv3d", 1, cores=16)


def test_cpu_fft_library_by_the_whole_jobs_samples():
    from sigconv.registry import auto

    n = auto.CPU_SCIPY_FFT_MIN_SAMPLES
    assert (auto.cpu_fft_library(n - 1), auto.cpu_fft_library(n), auto.cpu_fft_library(None)) == \
        ("numpy", "scipy", "scipy")


def test_kernel_choice_takes_the_cpu_for_a_short_job_without_probing_the_gpu(monkeypatch):
    """KernelChoice.resolve(samples=...): "auto" and a short job give the cpu before any GPU probe (a probe imports
    CuPy); a block, a cuda-only variant, a long job or no length leave the choice to the GPU probe as before."""
    import sys

    from sigconv._core import devices
    from sigconv.engine.settings import KernelChoice
    from sigconv.registry import auto

    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    probes = []

    def probe(backend):
        probes.append(backend)
        return "cuda"

    monkeypatch.setattr(devices, "resolve_backend", probe)
    monkeypatch.setattr(auto, "CPU_FASTER_BELOW", {"conv1d": 10**6, "conv2d": 10**6})
    monkeypatch.setattr("os.cpu_count", lambda: 16)
    assert KernelChoice().resolve(samples=1000).backend == "cpu" and probes == []
    assert KernelChoice(op="conv2d", variant="direct").resolve(samples=1000).backend == "cpu" and probes == []
    assert KernelChoice(block=128).resolve(samples=1000).backend == "cuda"
    assert KernelChoice(variant="fft_fused").resolve(samples=1000).backend == "cuda"
    assert KernelChoice().resolve(samples=10**6).backend == "cuda"
    assert KernelChoice().resolve().backend == "cuda"
    assert KernelChoice(backend="cuda").resolve(samples=1000).backend == "cuda"
    assert len(probes) == 5


def test_a_short_fir_denoise_imports_neither_scipy_fft_nor_cupy(tmp_path, rng):
    """A 10 s stereo recording through the default filter with backend "auto", in a process of its own: the cpu
    runs it (a GPU's start-up would cost more) on numpy.fft, so neither CuPy nor scipy.fft is imported, and the
    result matches the cpu filter on scipy.fft to a step of the output's 16 bits."""
    import os
    import subprocess
    import sys

    fs = 48000
    x = (0.3 * rng.standard_normal((10 * fs, 2))).clip(-1, 1)
    write_audio(tmp_path / "in.wav", x, fs)
    code = ("import sys, sigconv; job = sigconv.prepare_denoise(sys.argv[1], sys.argv[2]); job.run(); "
            "print(job.kernel.backend, 'cupy' in sys.modules, 'scipy.fft' in sys.modules)")
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    res = subprocess.run([sys.executable, "-c", code, str(tmp_path / "in.wav"), str(tmp_path / "out.wav")],
                         capture_output=True, text=True, timeout=120, env=env)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.split() == ["cpu", "False", "False"]
    from sigconv.engine.file import fir_block_filter

    job = sigconv.prepare_denoise(tmp_path / "in.wav", tmp_path / "unused.wav", kernel=sigconv.KernelChoice(
        backend="cpu"))
    taps = sigconv.FirSpec().design(float(fs), sigconv.signal_kind(float(fs)), frames=10 * fs).taps
    assert np.array_equal(job.fir_design.taps, taps) and f"({taps.size} taps, zero phase)" in job.description
    on_scipy = fir_block_filter(taps, 2, pcm_spec("PCM_16"), kernel=job.kernel)  # no length: scipy.fft
    assert on_scipy.ols.fft == "scipy"
    filter_file(job.info, tmp_path / "ref.wav", lambda info, spec: on_scipy)
    got = sf.read(tmp_path / "out.wav", dtype="int16")[0].astype(int)
    ref = sf.read(tmp_path / "ref.wav", dtype="int16")[0].astype(int)
    assert np.abs(got - ref).max() <= 1
