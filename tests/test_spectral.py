"""Spectral-gating denoiser: reconstruction identity, exact seams of the file engine, SNR gain, clean
input untouched, CLI behaviour and errors, shared masks; cuda == cpu on a GPU."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf

from sigconv.engine.audio import pcm_spec, probe
from sigconv.engine.file import filter_file
from sigconv.engine.settings import GateSpec, KernelChoice
from sigconv.engine.spectral import gate as _gate
from sigconv.engine.spectral import spectral_denoise
from sigconv.engine.spectral.factory import gate_for
from sigconv.engine.spectral.files import SpectralFileFilter

from conftest import rel_err, run_cli, write_audio

FS = 16000
CPU2D = KernelChoice(op="conv2d", backend="cpu")


def harmonic(n, fs=FS, f0=440.0, rng=None, gaps=True):
    """Speech-like: harmonic syllables with vibrato and pauses, peak 0.3."""
    t = np.arange(n) / fs
    f = f0 * (1 + 0.05 * np.sin(2 * np.pi * 3 * t))
    ph = 2 * np.pi * np.cumsum(f) / fs
    y = sum(np.sin(k * ph + k) / k for k in range(1, 12) if k * f0 * 1.05 < fs / 2)
    if gaps:
        y *= np.sin(np.pi * t / 0.4) ** 2  # 0.4 s syllables
    return 0.3 * y / np.max(np.abs(y))


def snr_db(y, ref):
    return 10 * np.log10(np.sum(ref ** 2) / np.sum((y - ref) ** 2))


# ------------------------------------------------------------------------------------ identity


@pytest.mark.parametrize("n_fft,hop", [(2048, None), (512, 128), (256, 100), (300, 150), (64, 7)])
@pytest.mark.parametrize("channels", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_gate_open_is_identity(rng, n_fft, hop, channels, dtype):
    x = rng.standard_normal((channels, 7919)).astype(dtype)
    x = x[0] if channels == 1 else x
    for stationary in (True, False):
        y = spectral_denoise(x, FS, prop_decrease=0, stationary=stationary, n_fft=n_fft, hop=hop, backend="cpu")
        assert y.shape == x.shape and y.dtype == x.dtype
        assert rel_err(y, x) <= 1e-5


def test_identity_axis_and_orientation(rng):
    x = rng.standard_normal((5000, 2)).astype(np.float32)  # (frames, channels)
    with pytest.raises(ValueError, match="axis"):
        spectral_denoise(x, FS, backend="cpu")
    y = spectral_denoise(x, FS, prop_decrease=0, axis=0, backend="cpu")
    assert rel_err(y, x) <= 1e-5


def test_short_input_shorter_than_frame(rng):
    x = rng.standard_normal(100)
    y = spectral_denoise(x, FS, prop_decrease=0, backend="cpu")
    assert rel_err(y, x) <= 1e-10


@pytest.mark.parametrize("kw,name", [
    (dict(n_fft=8), "n_fft"), (dict(hop=2000), "hop"), (dict(prop_decrease=1.5), "prop_decrease"),
    (dict(n_std=-1), "n_std"), (dict(freq_smooth_hz=-5), "freq_smooth_hz"), (dict(time_smooth_ms=1e6), "time_smooth"),
    (dict(fs=0), "fs"),
])
def test_bad_values(kw, name):
    args = dict(fs=FS)
    args.update(kw)
    fs = args.pop("fs")
    with pytest.raises(ValueError, match=name):
        spectral_denoise(np.zeros(4000), fs, backend="cpu", **args)


def test_noise_errors(rng):
    x = rng.standard_normal((2, 8000))
    with pytest.raises(ValueError, match="channels"):
        spectral_denoise(x, FS, noise=rng.standard_normal((3, 8000)), backend="cpu")
    with pytest.raises(ValueError, match="n_fft"):
        spectral_denoise(x, FS, noise=rng.standard_normal((2, 100)), backend="cpu")
    with pytest.raises(ValueError, match="stationary"):
        spectral_denoise(x, FS, noise=rng.standard_normal((2, 8000)), stationary=False, backend="cpu")


# ------------------------------------------------------------------------------------ quality


def test_snr_gain_white_noise_0db(rng):
    n = 4 * FS
    s = harmonic(n, rng=rng)
    z = rng.standard_normal(n)
    z *= np.sqrt(np.sum(s ** 2) / np.sum(z ** 2))  # 0 dB
    x = s + z
    clip = z.std() * rng.standard_normal(FS)
    for kw in (dict(), dict(noise=clip), dict(stationary=False)):
        y = spectral_denoise(x, FS, backend="cpu", **kw)
        gain = snr_db(y, s) - snr_db(x, s)
        assert gain > 6.0, f"{kw.keys()}: SNR gain {gain:.2f} dB"


@pytest.mark.parametrize("stationary", [True, False])
def test_clean_input_nearly_untouched(rng, stationary):
    s = harmonic(3 * FS, rng=rng)
    y = spectral_denoise(s, FS, stationary=stationary, backend="cpu")
    err = -snr_db(y, s)
    assert err < -20.0, f"clean input error {err:.1f} dB"


def test_share_mask_same_gain_across_channels(rng):
    n = 2 * FS
    s = harmonic(n, rng=rng)
    x = np.stack([s + 0.1 * rng.standard_normal(n), 0.5 * s + 0.1 * rng.standard_normal(n)])
    g = gate_for(GateSpec(n_fft=512, share_mask=True), CPU2D, 2, n, FS, np.float64)
    g.estimate_stats(_gate.array_getter(x, n, np))
    assert g.thr.shape[0] == 1
    # the gain applied to both channels is one array: check by gating a scaled copy of one channel
    y = spectral_denoise(x, FS, share_mask=True, n_fft=512, backend="cpu")
    lin = spectral_denoise(np.stack([x[0], 3.0 * x[0]]), FS, share_mask=True, n_fft=512, backend="cpu")
    assert rel_err(lin[1], 3.0 * lin[0]) <= 1e-10  # same gains on both channels
    y_sep = spectral_denoise(x, FS, share_mask=False, n_fft=512, backend="cpu")
    assert rel_err(y, y_sep) > 1e-6  # the shared mask is a different mask


# ------------------------------------------------------------------------------------ seams


def _whole_and_file(tmp_path, x, fs, subtype, block_frames, noise=None, noise_range=None, **kw):
    path = write_audio(tmp_path / "in.wav", x.T, fs=fs, subtype=subtype)
    info = probe(path)
    spec = pcm_spec(info.subtype)
    xr = sf.read(str(path), dtype=spec.read_dtype, always_2d=True)[0].T.astype(spec.work_dtype)
    if noise_range is not None:
        noise = xr[:, noise_range[0]:noise_range[1]]
    ref = spectral_denoise(xr, fs, noise=noise, backend="cpu", **kw)

    def make(info, spec):
        g = gate_for(GateSpec(**kw), CPU2D, info.channels, info.frames, fs, spec.work_dtype)
        if noise is not None:
            assert g.stats_from_noise_chunks([np.asarray(noise)])
        return SpectralFileFilter(g, spec, path=info.path, estimate=kw.get("stationary", True) and noise is None,
                                  block_frames=block_frames)

    out = tmp_path / f"out{block_frames}.wav"
    filter_file(info, out, make, block_frames=block_frames)
    y = sf.read(str(out), dtype="float64", always_2d=True)[0].T
    return y, ref


@pytest.mark.parametrize("case", ["estimated", "clip", "range", "nonstationary", "shared"])
def test_file_seams_exact(tmp_path, rng, case):
    n = 3 * FS + 123
    s = harmonic(n, rng=rng)
    x = np.stack([s + 0.05 * rng.standard_normal(n), s + 0.05 * rng.standard_normal(n)]).astype(np.float32)
    kw = dict(n_fft=512, time_smooth_ms=60)
    extra = {}
    if case == "clip":
        extra["noise"] = (0.05 * rng.standard_normal((2, FS))).astype(np.float32)
    elif case == "range":
        extra["noise_range"] = (1000, 6000)
    elif case == "nonstationary":
        kw["stationary"] = False
    elif case == "shared":
        kw["share_mask"] = True
    # several block sizes, including tiny ones (fewer frames than one hop)
    for bf in (37, 1000, 4096, 1 << 19):
        if case != "estimated" and bf == 37:
            continue  # one tiny-block run per file is enough for the time budget
        y, ref = _whole_and_file(tmp_path, x, FS, "FLOAT", bf, **extra, **kw)
        assert rel_err(y, ref) <= 1e-5, f"{case}, block {bf}: {rel_err(y, ref):.2e}"


def test_file_seams_stats_pass_streams(tmp_path, rng, monkeypatch):
    """The estimated statistics come from a streaming pass when the file is longer than one block."""
    monkeypatch.setitem(_gate.ARRAY_CHUNK, "cpu", 3000)
    n = 2 * FS + 77
    x = (harmonic(n, rng=rng) + 0.05 * rng.standard_normal(n)).astype(np.float32)[None]
    y, ref = _whole_and_file(tmp_path, x, FS, "FLOAT", 2048, n_fft=256)
    assert rel_err(y, ref) <= 1e-5


def test_spectral_file_filter_descriptions_and_errors(tmp_path, rng):
    """spectral_file_filter: the description names the mode, the noise source, strength, n_fft and hop; the
    filters it makes estimate the statistics only without a noise reference; bad values raise ValueError and
    data problems InputError, before any filter is made."""
    from sigconv import InputError
    from sigconv.engine.spectral import spectral_file_filter

    x = 0.05 * rng.standard_normal((FS, 2))
    info = probe(write_audio(tmp_path / "in.wav", x, fs=FS, subtype="FLOAT"))
    clip = write_audio(tmp_path / "clip.wav", 0.05 * rng.standard_normal((FS // 2, 2)), fs=FS, subtype="FLOAT")
    cases = [
        (GateSpec(), "stationary, noise estimated from the input, strength 1, n_fft 2048, hop 512"),
        (GateSpec(stationary=False, strength=0.5, n_fft=512, hop=100, share_mask=True),
         "non-stationary, moving noise floor, strength 0.5, n_fft 512, hop 100, shared mask"),
        (GateSpec(noise_clip=str(clip)), "stationary, noise from clip.wav, strength 1, n_fft 2048, hop 512"),
        (GateSpec(noise_from=(0.1, 0.5), n_fft=256), "stationary, noise from 0.1-0.5 s, strength 1, n_fft 256, hop 64"),
    ]
    for gate, want in cases:
        make, desc = spectral_file_filter(gate, CPU2D, info)
        assert desc == f"spectral gate ({want})"
        flt = make(info, pcm_spec(info.subtype))
        assert isinstance(flt, SpectralFileFilter) and flt.variant == "auto"
        assert flt.estimate == (gate.stationary and not (gate.noise_clip or gate.noise_from))
    for gate, kernel, err, what in [
        (GateSpec(n_fft=8), CPU2D, ValueError, "n_fft"),
        (GateSpec(hop=4000), CPU2D, ValueError, "hop"),
        (GateSpec(time_smooth_ms=1e6), CPU2D, ValueError, "time_smooth_ms"),
        (GateSpec(), KernelChoice(op="conv2d"), ValueError, "resolved conv2d"),
        (GateSpec(noise_from=(0.5, 9)), CPU2D, InputError, "beyond the file"),
        (GateSpec(noise_from=(0.5, 0.5)), CPU2D, InputError, "empty"),
        (GateSpec(noise_clip=str(tmp_path / "missing.wav")), CPU2D, InputError, "no such file"),
    ]:
        with pytest.raises(err, match=what):
            spectral_file_filter(gate, kernel, info)


# ------------------------------------------------------------------------------------ CLI


@pytest.fixture
def noisy_wav(tmp_path, rng):
    n = 2 * FS
    s = harmonic(n, rng=rng)
    x = np.stack([s + 0.05 * rng.standard_normal(n), s + 0.05 * rng.standard_normal(n)]).T
    return write_audio(tmp_path / "noisy.wav", x, fs=FS, subtype="PCM_24")


def test_cli_spectral_keeps_format(tmp_path, noisy_wav, rng):
    clip = write_audio(tmp_path / "clip.wav", 0.05 * rng.standard_normal((FS, 2)), fs=FS)
    for i, extra in enumerate(([], ["--noise-clip", clip], ["--noise-from", "0", "0.2"], ["--non-stationary"],
                               ["--share-mask", "--strength", "0.5"])):
        out = tmp_path / f"o{i}.wav"
        r = run_cli("denoise", noisy_wav, "--method", "spectral", "--backend", "cpu", "-o", out, *extra)
        assert r.returncode == 0, r.stderr
        assert "spectral gate" in r.stdout
        a, b = sf.info(str(noisy_wav)), sf.info(str(out))
        assert (b.format, b.subtype, b.samplerate, b.channels, b.frames) == (a.format, a.subtype, a.samplerate,
                                                                             a.channels, a.frames)


def test_cli_spectral_errors(tmp_path, noisy_wav, rng, capsys):
    """Each bad spectral option or noise source: its exit code and one line naming the problem, no output and no
    temporary file (in process: the command line's main(), as `sigconv` runs it)."""
    from sigconv.cli import main

    other_rate = write_audio(tmp_path / "r.wav", 0.05 * rng.standard_normal((FS, 2)), fs=8000)
    mono = write_audio(tmp_path / "m.wav", 0.05 * rng.standard_normal(FS), fs=FS)
    short = write_audio(tmp_path / "s.wav", 0.05 * rng.standard_normal((100, 2)), fs=FS)
    junk = tmp_path / "junk.wav"
    junk.write_bytes(b"not audio at all" * 10)
    cases = [
        (["--noise-clip", other_rate], 1, "sample rate"),
        (["--noise-clip", mono], 1, "channel"),
        (["--noise-clip", short], 1, "STFT frame"),
        (["--noise-clip", junk], 1, "junk.wav"),
        (["--noise-clip", tmp_path / "missing.wav"], 1, "no such file"),
        (["--noise-from", "1", "1"], 1, "empty"),
        (["--noise-from", "1", "0.5"], 1, "empty"),
        (["--noise-from", "1", "9"], 1, "beyond the file"),
        (["--hop", "4000"], 2, "hop"),
        (["--n-fft", "8"], 2, "n_fft"),
        (["--non-stationary", "--noise-from", "0", "1"], 2, "--noise-from"),
        (["--variant", "nope"], 2, "variant"),
    ]
    for i, (extra, code, what) in enumerate(cases):
        out = tmp_path / f"e{i}.wav"
        rc = main(["denoise", str(noisy_wav), "--method", "spectral", "--backend", "cpu", "-o", str(out),
                   *map(str, extra)])
        err = capsys.readouterr().err
        assert rc == code, (extra, rc, err)
        lines = err.strip().splitlines()
        assert len(lines) == 1 and what.lower() in lines[0].lower(), (extra, err)
        assert not out.exists()
        assert not list(tmp_path.glob(f".e{i}.wav.*")), "temporary output left behind"


# ------------------------------------------------------------------------------------ GPU


@pytest.mark.gpu
@pytest.mark.parametrize("stationary", [True, False])
@pytest.mark.parametrize("share", [False, True])
def test_cuda_equals_cpu(rng, stationary, share):
    import cupy

    n = 3 * FS + 5
    s = harmonic(n, rng=rng)
    x = np.stack([s + 0.05 * rng.standard_normal(n), s + 0.05 * rng.standard_normal(n)]).astype(np.float32)
    ref = spectral_denoise(x, FS, stationary=stationary, share_mask=share, backend="cpu")
    y = spectral_denoise(x, FS, stationary=stationary, share_mask=share, backend="cuda")
    assert isinstance(y, np.ndarray)
    assert rel_err(y, ref) <= 1e-5
    yd = spectral_denoise(cupy.asarray(x), FS, stationary=stationary, share_mask=share)
    assert isinstance(yd, cupy.ndarray) and rel_err(yd.get(), ref) <= 1e-5
    clip = (0.05 * rng.standard_normal((2, FS))).astype(np.float32)
    if stationary:
        ref = spectral_denoise(x, FS, noise=clip, share_mask=share, backend="cpu")
        y = spectral_denoise(x, FS, noise=clip, share_mask=share, backend="cuda")
        assert rel_err(y, ref) <= 1e-5


@pytest.mark.gpu
def test_cuda_gate_open_identity_and_variants(rng):
    x = rng.standard_normal((2, 30011)).astype(np.float32)
    y = spectral_denoise(x, FS, prop_decrease=0, backend="cuda")
    assert rel_err(y, x) <= 1e-5
    ref = spectral_denoise(x, FS, backend="cpu")
    for variant in ("separable", "naive", "shared"):
        y = spectral_denoise(x, FS, backend="cuda", variant=variant)
        assert rel_err(y, ref) <= 1e-5, variant


@pytest.mark.gpu
def test_cuda_file_seams(tmp_path, rng):
    n = 2 * FS + 321
    x = (harmonic(n, rng=rng) + 0.05 * rng.standard_normal(n)).astype(np.float32)[None]
    path = write_audio(tmp_path / "in.wav", x.T, fs=FS, subtype="FLOAT")
    ref = spectral_denoise(x, FS, backend="cpu")
    out = tmp_path / "o.wav"
    r = run_cli("denoise", path, "--method", "spectral", "--backend", "cuda", "-o", out)
    assert r.returncode == 0, r.stderr
    y = sf.read(str(out), dtype="float64", always_2d=True)[0].T
    assert rel_err(y, ref) <= 1e-5


def test_long_file_streams_with_bounded_memory(tmp_path, rng):
    """Ten minutes at 48 kHz through `denoise --method spectral`: peak RSS stays under 300 MB (the whole-array
    STFT alone would take about 470 MB of complex64), and the output has every frame."""
    import soundfile as sf

    from conftest import cli_peak_rss

    src = tmp_path / "ten_min.wav"
    block = (rng.standard_normal(48000 * 60) * 2000).astype(np.int16)
    with sf.SoundFile(str(src), "w", 48000, 1, subtype="PCM_16") as f:
        for m in range(10):
            f.write(np.roll(block, m * 977))
    out = tmp_path / "out.wav"
    rc, peak_kb, err = cli_peak_rss("denoise", src, "-o", out, "--method", "spectral", "--quiet")
    assert rc == 0, err
    assert sf.info(str(out)).frames == 48000 * 600
    assert peak_kb < 300 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"


@pytest.mark.parametrize("shape,axis", [((3, 400, 5), 1), ((50,), 0), ((7, 9), 0), ((2, 3, 1), 1), ((4, 2), 1)])
@pytest.mark.parametrize("size", [1, 2, 3, 4, 5, 8, 17, 64, 189, 257])
def test_sliding_min_equals_minimum_filter1d(rng, shape, axis, size):
    """The cuda path's log-step sliding minimum is scipy.ndimage.minimum_filter1d(mode="nearest") exactly,
    windows longer than the axis included."""
    import scipy.ndimage

    from sigconv.engine.spectral.noise import sliding_min

    a = rng.standard_normal(shape).astype(np.float32)
    want = scipy.ndimage.minimum_filter1d(a, size, axis=axis, mode="nearest")
    got = sliding_min(np, a, size, axis)
    assert got.dtype == a.dtype and got.shape == a.shape and np.array_equal(got, want)


def test_small_hop_keeps_chunks_bounded(monkeypatch, rng):
    """A small hop multiplies the STFT frames of a chunk of samples: chunks shrink so that frames x n_fft x
    channels stays within the budget, and the result does not depend on the chunking (seams exact)."""
    fs = 8000
    x = (np.sin(2 * np.pi * 440 * np.arange(3 * fs) / fs) + 0.1 * rng.standard_normal(3 * fs)).astype(np.float32)
    noise = (0.1 * rng.standard_normal(fs)).astype(np.float32)
    kw = dict(n_fft=256, hop=4, backend="cpu", time_smooth_ms=20, freq_smooth_hz=200)
    whole = spectral_denoise(x, fs, noise=noise, **kw)  # budget: 2^23 frame samples, no split here
    seen = []
    real = _gate.Gate.frame_power

    def spy(self, xs, nfr):
        seen.append(nfr * self.N * self.C)
        return real(self, xs, nfr)

    monkeypatch.setattr(_gate.Gate, "frame_power", spy)
    monkeypatch.setitem(_gate.FRAME_BUDGET, "cpu", 1 << 16)  # 256 frames of 256 samples per chunk
    small = spectral_denoise(x, fs, noise=noise, **kw)
    # a chunk's own frames (budget / n_fft) plus the frames overlapping its edges (n_fft / hop) and the
    # smoothing / floor context on each side (gate.R): bounded, where one 24000-sample chunk was 6000 frames
    g = gate_for(GateSpec(freq_smooth_hz=200, time_smooth_ms=20, n_fft=256, hop=4), CPU2D, 1, x.size, fs,
                 np.float32)
    bound = (1 << 16) + (256 // 4 + 2 * g.R + 1) * 256
    assert seen and max(seen) <= bound < 6000 * 256, (max(seen), bound)
    assert np.linalg.norm(small - whole) <= 1e-5 * np.linalg.norm(whole)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("freq_hz,time_ms,hop,fft_axes", [
    (2000, 50, 16, False),  # 2 passes of 25 frames x 17 bins: running means
    (4000, 50, 16, False),  # 3 passes of 17 x 23
    (6000, 50, 16, True),  # 4 passes of 13 x 25: by FFT
    (1e9, 0, 64, True),  # 9 passes along bins only (the whole band)
    (500, 30, 2, True),  # 8 passes along frames only
])
def test_cpu_smoothing_equals_box_passes(rng, dtype, freq_hz, time_ms, hop, fft_axes):
    """The cpu's mask smoothing, by running means for few passes and by one FFT convolution an axis for more,
    equals the passes of boxes convolved directly in float64 over the edge-padded masks, valid part only."""
    C, L = 2, 9000
    g = gate_for(GateSpec(freq_smooth_hz=freq_hz, time_smooth_ms=time_ms, n_fft=256, hop=hop), CPU2D, C, L, FS,
                 dtype)
    assert (g.passes >= _gate.SMOOTH_FFT_MIN_PASSES) == fft_axes, (g.passes, g.box_t, g.box_f)
    n, lo, hi = 97, 5, 2 * g.r_s  # an odd frame count; padding unlike on each side
    m = rng.random((C, n, g.F)).astype(dtype)
    got = g.smooth(m, lo, hi)
    rf = g.passes * (g.box_f // 2)
    ref = np.pad(m.astype(np.float64), ((0, 0), (lo, hi), (rf, rf)), mode="edge")
    for axis, box in ((1, g.box_t), (2, g.box_f)):
        k = np.ones(1)
        for _ in range(g.passes):
            k = np.convolve(k, np.full(box, 1.0 / box))
        ref = np.apply_along_axis(np.convolve, axis, ref, k, mode="valid")
    assert got.dtype == dtype and got.shape == ref.shape == (C, n + lo + hi - 2 * g.r_s, g.F)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    assert np.abs(got - ref).max() <= tol, np.abs(got - ref).max()


# ------------------------------------------------------------------------------------ GPU: the fused stages


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("C,n_fft,hop", [(1, 2048, 512), (2, 300, 150), (3, 64, 7), (1, 17, 8)])
def test_cuda_gate_stages_equal_host_rules(rng, dtype, C, n_fft, hop):
    """Each fused kernel of sigconv.backends.cuda_gate against its host rule (HostOps) computed in float64,
    over awkward shapes: odd bin counts, a hop that does not divide n_fft, three channels, a shared mask, an
    overlap-add window that starts mid-frame."""
    import cupy

    from sigconv.backends import cuda_gate
    from sigconv.engine.spectral.gate import HostOps

    tol = 2e-5 if dtype == np.float32 else 1e-12
    nfr = 37
    w = _gate._window(n_fft)
    x = rng.standard_normal((C, (nfr - 1) * hop + n_fft))
    fr_ref = HostOps.frames(x, w, hop, nfr)
    fr = cuda_gate.frames(cupy.asarray(x, dtype), cupy.asarray(w, dtype), hop, nfr)
    assert fr.dtype == dtype and rel_err(fr.get(), fr_ref) <= tol
    wide = cupy.asarray(np.pad(x, ((0, 0), (0, 9))), dtype)[:, :x.shape[1]]  # rows spaced wider than they are long
    assert wide.strides[0] == (x.shape[1] + 9) * wide.itemsize
    assert cupy.array_equal(cuda_gate.frames(wide, cupy.asarray(w, dtype), hop, nfr), fr)
    mm = rng.uniform(0, 1, (C, nfr + 4, 7))
    for lo, hi, rf in ((0, 0, 0), (3, 5, 2), (40, 1, 9)):  # pads wider than the masks repeat the edge
        want = HostOps.pad_edge(mm[:, 2:nfr + 2], lo, hi, rf)
        got = cuda_gate.pad_edge(cupy.asarray(mm, dtype)[:, 2:nfr + 2], lo, hi, rf)  # a slice of frames
        assert got.shape == want.shape and np.array_equal(got.get(), want.astype(dtype))
    S = np.fft.rfft(fr_ref, axis=-1)
    Sd = cupy.asarray(S.astype(np.complex64 if dtype == np.float32 else np.complex128))
    for share in (False, True):
        p_ref = HostOps.power(S, 3.5, share)
        p = cuda_gate.power(Sd, 3.5, share)
        assert p.shape == p_ref.shape and rel_err(p.get(), p_ref) <= tol
    pw = HostOps.power(S, 1.0, False)
    for size in (1, 5, 2 * nfr + 1):  # windows longer than the frames repeat the edges
        b = cuda_gate.box_time(cupy.asarray(pw, dtype), size)
        assert rel_err(b.get(), HostOps.box_time(pw, size)) <= tol
    thr = rng.uniform(-20, 10, (C, 1, S.shape[-1]))
    const = dict(power_floor=_gate.POWER_FLOOR, slope_db=_gate.SLOPE_DB, strong_db=_gate.STRONG_DB)
    fl = pw * rng.uniform(0.1, 2.0, pw.shape)
    for kw, kwd in (({"thr": thr}, {"thr": cupy.asarray(thr, dtype)}),
                    ({"floor_power": fl, "offset": 3.0}, {"floor_power": cupy.asarray(fl, dtype), "offset": 3.0})):
        raw_ref, strong_ref = HostOps.masks(pw, **kw, **const)
        raw, strong = cuda_gate.masks(cupy.asarray(pw, dtype), **kwd, **const)
        assert np.max(np.abs(raw.get() - raw_ref)) <= 1e-4 and np.max(np.abs(strong.get() - strong_ref)) <= 1e-4
    m = rng.uniform(0, 1, (1, nfr, S.shape[-1]))
    st = rng.uniform(0, 1, m.shape)
    for prop in (1.0, 0.7):
        g_ref = HostOps.apply_gain(S[:, 3:], m[:, 3:], st[:, 3:], prop)
        g = cuda_gate.apply_gain(Sd[:, 3:], cupy.asarray(m[:, 3:], dtype), cupy.asarray(st[:, 3:], dtype), prop)
        assert rel_err(g.get(), g_ref) <= tol
    y = rng.standard_normal((C, nfr, n_fft))
    iw = 1.0 / rng.uniform(0.5, 1.5, hop)
    total = (nfr - 1) * hop + n_fft
    for lo, count in ((0, total), (hop // 2 + 1, total - hop - 3), (5, 1)):
        o_ref = HostOps.overlap_add(y.copy(), w, iw, lo, count)
        o = cuda_gate.overlap_add(cupy.asarray(y, dtype), cupy.asarray(w, dtype), cupy.asarray(iw, dtype), lo, count)
        assert o.shape == (C, count) and rel_err(o.get(), o_ref) <= tol
    from sigconv.engine.spectral import noise

    h_ref = np.zeros(C * S.shape[-1] * noise.HIST_BINS)
    h = cupy.zeros_like(cupy.asarray(h_ref))
    pw_t = pw.astype(dtype)  # the same cell values on both sides: the histogram is float64 in both
    kw = dict(power_floor=_gate.POWER_FLOOR, lo_db=noise.HIST_LO_DB, step_db=noise.HIST_STEP_DB,
              bins=noise.HIST_BINS)
    HostOps.hist_add(h_ref, pw_t, **kw)
    cuda_gate.hist_add(h, cupy.asarray(pw_t), **kw)
    assert np.allclose(h.get(), h_ref, rtol=0, atol=1e-9 if dtype == np.float64 else 1e-3)
    assert abs(float(h.sum()) - pw.size) <= 1e-6 * pw.size


@pytest.mark.gpu
@pytest.mark.parametrize("subtype", ["PCM_16", "PCM_24", "FLOAT"])
@pytest.mark.parametrize("stationary", [True, False])
def test_cuda_file_equals_cpu_file(tmp_path, rng, subtype, stationary):
    """The spectral file filter on cuda (raw PCM to the device, rounding and saturation there) writes what the
    cpu one writes, to the last bit or within one step of the subtype; stereo, loud enough to clip."""
    n = 5 * FS + 77
    s = harmonic(n, rng=rng)
    x = np.stack([3.5 * s + 0.05 * rng.standard_normal(n), s + 0.05 * rng.standard_normal(n)]).T
    from sigconv.engine.spectral import spectral_file_filter

    path = write_audio(tmp_path / "in.wav", np.clip(x, -1, 1), fs=FS, subtype=subtype)
    info = probe(path)
    outs = {}
    for be in ("cpu", "cuda"):
        outs[be] = tmp_path / f"{be}.wav"
        make, _ = spectral_file_filter(GateSpec(stationary=stationary), KernelChoice(op="conv2d", backend=be), info)
        filter_file(info, outs[be], make)
    a = sf.read(str(outs["cpu"]), dtype="int32" if subtype != "FLOAT" else "float64")[0]
    b = sf.read(str(outs["cuda"]), dtype="int32" if subtype != "FLOAT" else "float64")[0]
    assert a.shape == b.shape == x.shape
    assert rel_err(b, a) <= 1e-5
    if subtype != "FLOAT":
        # float32 rounding moves a sample by a step where it lies near a rounding edge: often at 24 bits (a step is
        # 2^-23, float32's spacing near 0.3 is 3e-8), rarely at 16 (and the threshold estimates differ by rounding
        # too: at 24 bits 1e-5 of full scale is 84 steps)
        step = 1 << (16 if subtype == "PCM_16" else 8)  # one step of the subtype, in int32 units
        diff = np.abs(a.astype(np.int64) - b)
        most = 1 if subtype == "PCM_16" else 84
        assert np.max(diff) <= most * step, (np.max(diff) / step, np.mean(diff > 0))
        if subtype == "PCM_16":
            assert np.mean(diff > 0) < 0.01
        # both saturate the clipped samples at full scale (a wrap-around would differ by about 2^32 above; magnitudes
        # in int64, where the negative full scale -2^31 has one)
        full = (1 << 31) - step
        assert (np.abs(a.astype(np.int64)) >= full).any() and (np.abs(b.astype(np.int64)) >= full).any()


@pytest.mark.gpu
def test_cuda_file_device_memory_is_bounded(tmp_path, rng):
    """File mode streams: with CuPy's pool capped at 1 GiB, a 12-minute stereo file is gated (the whole file at
    once would need over 4 GiB: its samples, frames, spectra and masks), and the pool never held more."""
    import cupy

    from sigconv.engine.spectral import spectral_file_filter

    fs, minutes = 48000, 12
    x = (0.1 * rng.standard_normal((fs * 60, 2)) * 32767).astype(np.int16)
    path = tmp_path / "in.wav"
    with sf.SoundFile(str(path), "w", fs, 2, subtype="PCM_16") as f:
        for m in range(minutes):
            f.write(np.roll(x, 977 * m, axis=0))
    info = probe(path)
    pool = cupy.get_default_memory_pool()
    pool.free_all_blocks()
    limit = 1 << 30
    pool.set_limit(size=limit)
    try:
        make, _ = spectral_file_filter(GateSpec(), KernelChoice(op="conv2d", backend="cuda"), info)
        filter_file(info, tmp_path / "out.wav", make)
        held = pool.total_bytes()
    finally:
        pool.set_limit(size=0)
        pool.free_all_blocks()
    assert sf.info(str(tmp_path / "out.wav")).frames == fs * 60 * minutes
    frames = fs * 60 * minutes // 512
    whole = 2 * (fs * 60 * minutes * 4 + frames * 2048 * 4 + frames * 1025 * (8 + 4 * 4))
    assert held <= limit < whole, (held, whole)


# ------------------------------------------------------------------------------------ cpu threads


@pytest.mark.parametrize("shape", [(1, 700, 257), (2, 300, 129), (1, 1, 3), (2, 5, 1)])
def test_histogram_ways_count_the_same(rng, shape):
    """The statistics histogram's two ways of adding on the cpu (np.add.at in frame order, and sorted runs by
    fancy indexing, which scales with threads) give the same counts: cells at both ends of the grid, exact zeros,
    repeated values (long runs) and levels that change from frame to frame."""
    from sigconv.engine.spectral import noise
    from sigconv.engine.spectral.gate import HostOps, POWER_FLOOR

    Cm, T, F = shape
    pw = (rng.exponential(1.0, shape) * 10.0 ** rng.uniform(-20, 5, (1, T, 1))).astype(np.float32)
    pw[:, : max(1, T // 3), :1] = 0.0  # below the grid
    pw[:, -1:, -1:] = 1e8  # above it
    pw[:, :, F // 2] = pw[:, :1, F // 2]  # one frequency with the same value in every frame: one run
    kw = dict(power_floor=POWER_FLOOR, lo_db=noise.HIST_LO_DB, step_db=noise.HIST_STEP_DB, bins=noise.HIST_BINS)
    h_at, h_runs = np.zeros(Cm * F * noise.HIST_BINS), np.zeros(Cm * F * noise.HIST_BINS)
    HostOps.hist_add(h_at, pw, **kw)
    HostOps.hist_add(h_runs, pw, runs=True, **kw)
    assert np.allclose(h_runs, h_at, rtol=0, atol=1e-9)
    assert abs(h_runs.sum() - pw.size) <= 1e-9 * pw.size
    counts = noise.hist_view(h_runs, Cm, F).sum(axis=-1)  # every (channel, frequency) row counts its T frames
    assert np.allclose(counts, T, rtol=0, atol=1e-9)


@pytest.mark.parametrize("stationary", [True, False])
def test_cpu_threads_equal_one_thread(monkeypatch, rng, stationary):
    """The cpu backend's chunks run in threads (statistics and gating): the result is the one-thread result, bit
    for bit (each chunk computes its own frames, and the threads' histogram, added in sorted runs, gives the
    one thread's np.add.at threshold), with chunks small enough that every thread gets several."""
    n = 6 * FS + 321
    x = np.stack([harmonic(n, rng=rng) + 0.05 * rng.standard_normal(n),
                  0.05 * rng.standard_normal(n)]).astype(np.float32)
    monkeypatch.setattr(_gate, "CPU_CHUNK", 4096)
    monkeypatch.setattr(_gate, "NS_WINDOW_S", 0.1)  # a short floor window: short non-stationary chunks
    monkeypatch.setattr(_gate, "WORKERS", 1)
    one = spectral_denoise(x, FS, stationary=stationary, n_fft=512, backend="cpu")
    monkeypatch.setattr(_gate, "WORKERS", 4)
    monkeypatch.setattr(_gate, "HIST_RUNS_THREADS", 1)  # 4 threads count the histogram in sorted runs
    seen = set()
    real = _gate.Gate.run_range

    def spy(self, get, a, b):
        import threading

        seen.add(threading.current_thread().name)
        return real(self, get, a, b)

    monkeypatch.setattr(_gate.Gate, "run_range", spy)
    many = spectral_denoise(x, FS, stationary=stationary, n_fft=512, backend="cpu")
    assert len(seen) > 1  # the chunks did run in several threads
    assert np.array_equal(one, many)


def test_cpu_file_threads_fit_the_memory_budget(tmp_path, rng):
    """In file mode the cpu threads of a block are capped so that their chunks fit FILE_WORK_BYTES, and the
    default block gives each thread a chunk."""
    from sigconv.engine.spectral import files as _files

    x = 0.05 * rng.standard_normal((FS, 2))
    info = probe(write_audio(tmp_path / "in.wav", x, fs=FS, subtype="PCM_16"))
    spec = pcm_spec(info.subtype)
    for kw in (dict(), dict(stationary=False), dict(n_fft=8192)):
        g = gate_for(GateSpec(**kw), CPU2D, 2, info.frames, FS, spec.work_dtype)
        flt = SpectralFileFilter(g, spec, path=info.path)
        chunk = g.cpu_chunk()
        assert g.max_threads >= 1 and (g.max_threads == 1 or g.max_threads * g.chunk_bytes(chunk)
                                       <= _files.FILE_WORK_BYTES)
        assert flt.preferred_frames <= _files.CPU_MAX_BLOCK
        assert flt.preferred_frames >= min(g.chunk_samples(_files.CPU_MAX_BLOCK), chunk * g._threads(1 << 30))
