"""`sigconv denoise` and friends: behaviour, exit codes, one-line errors, no partial or clobbered output."""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
import soundfile as sf

import sigconv
from conftest import SAMPLES, run_cli, write_audio


def _one_line_error(r, code, needle):
    assert r.returncode == code, (r.returncode, r.stdout, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("sigconv: error:") and needle in lines[0], lines[0]
    assert "Traceback" not in r.stderr


def _wav_header(channels: int, frames: int, fs: int = 48000, bits: int = 16) -> bytes:
    block = channels * bits // 8
    data = frames * block
    return (b"RIFF" + struct.pack("<I", 36 + data) + b"WAVEfmt " + struct.pack("<IHHIIHH", 16, 1, channels, fs,
                                                                               fs * block, block, bits)
            + b"data" + struct.pack("<I", data))


@pytest.fixture
def noisy(tmp_path, rng):
    x = 0.2 * rng.standard_normal((48000 * 2, 2))
    return write_audio(tmp_path / "noisy.wav", x)


def test_version():
    r = run_cli("--version")
    assert r.returncode == 0 and r.stdout.strip() == f"sigconv {sigconv.__version__}"


def test_default_filter_default_output_and_summary(noisy):
    r = run_cli("denoise", noisy)
    assert r.returncode == 0, r.stderr
    out = noisy.with_name("noisy.denoised.wav")
    assert out.exists()
    assert "default band-pass 80-8000 Hz" in r.stderr
    s = r.stdout
    for piece in ("2.00 s", "2 ch", "48000 Hz", "PCM_16", "band-pass 80-8000 Hz", "7921 taps", "backend cpu",
                  "x real time", "0 samples clipped"):
        assert piece in s, (piece, s)
    info = sf.info(str(out))
    assert (info.samplerate, info.channels, info.subtype, info.frames) == (48000, 2, "PCM_16", 96000)


def test_output_equals_library_call(noisy, tmp_path):
    out = tmp_path / "o.wav"
    r = run_cli("denoise", noisy, "-o", out, "--lowpass", "3000", "--taps", "201", "--quiet")
    assert r.returncode == 0 and r.stdout == "" and r.stderr == ""
    x, fs = sf.read(noisy, dtype="float64")
    taps = sigconv.design_fir("lowpass", 3000, fs, numtaps=201)
    ref = sigconv.apply_fir(x, taps, axis=0, backend="cpu")
    y, _ = sf.read(out, dtype="float64")
    assert np.max(np.abs(y - ref)) <= 0.5 / 32768 + 1e-7


def test_default_band_capped_below_nyquist(tmp_path, rng):
    src = write_audio(tmp_path / "phone.wav", 0.1 * rng.standard_normal(16000), fs=8000)
    r = run_cli("denoise", src)
    assert r.returncode == 0, r.stderr
    assert "band-pass 80-3600 Hz" in r.stderr


def test_band_notch_cascade_and_highpass(noisy, tmp_path):
    r = run_cli("denoise", noisy, "-o", tmp_path / "a.wav", "--band", "100", "5000", "--notch", "50", "150",
                "--taps", "1001")
    assert r.returncode == 0, r.stderr
    assert "band-pass 100-5000 Hz + notch 50, 150 Hz" in r.stdout
    r = run_cli("denoise", noisy, "-o", tmp_path / "b.wav", "--highpass", "200", "--phase", "linear")
    assert r.returncode == 0 and "high-pass 200 Hz" in r.stdout and "linear phase" in r.stdout


def test_existing_output_needs_force(noisy, tmp_path):
    out = tmp_path / "exists.wav"
    out.write_bytes(b"keep me")
    r = run_cli("denoise", noisy, "-o", out)
    _one_line_error(r, 1, "already exists (pass --force")
    assert out.read_bytes() == b"keep me"
    r = run_cli("denoise", noisy, "-o", out, "--force", "--quiet")
    assert r.returncode == 0 and sf.info(str(out)).frames == 96000


def test_refuses_to_overwrite_input(noisy):
    before = noisy.read_bytes()
    r = run_cli("denoise", noisy, "-o", noisy, "--force")
    _one_line_error(r, 2, "would overwrite the input")
    assert noisy.read_bytes() == before


def test_python_dash_m_and_samples_work(tmp_path):
    for name in ("speech_noisy.wav", "speech_noisy_stereo.wav"):
        r = run_cli("denoise", SAMPLES / name, "-o", tmp_path / name)
        assert r.returncode == 0, r.stderr
        assert sf.info(str(tmp_path / name)).frames == sf.info(str(SAMPLES / name)).frames


def test_clipping_reported(tmp_path):
    src = write_audio(tmp_path / "loud.wav", np.full(48000, 0.95))
    r = run_cli("denoise", src, "-o", tmp_path / "o.wav", "--lowpass", "1000", "--taps", "3")
    assert r.returncode == 0
    # a 3-tap low-pass of a constant 0.95 has gain ~1: nothing clips; a band stop of DC at gain > 1 would.
    assert "0 samples clipped" in r.stdout
    src2 = write_audio(tmp_path / "square.wav", np.where(np.arange(48000) % 96 < 48, 0.99, -0.99))
    r = run_cli("denoise", src2, "-o", tmp_path / "o2.wav", "--lowpass", "2000", "--taps", "101")
    assert r.returncode == 0
    clipped = int(r.stdout.split(" samples clipped")[0].rsplit(" ", 1)[-1])
    assert clipped > 0  # Gibbs overshoot of a near-full-scale square wave


# ------------------------------------------------------------------------------ bad inputs


def test_missing_file(tmp_path):
    _one_line_error(run_cli("denoise", tmp_path / "nope.wav"), 1, "no such file")


def test_directory(tmp_path):
    _one_line_error(run_cli("denoise", tmp_path), 1, "is a directory")


def test_empty_file(tmp_path):
    p = tmp_path / "empty.wav"
    p.write_bytes(b"")
    _one_line_error(run_cli("denoise", p), 1, "file is empty")


def test_not_audio(tmp_path):
    p = tmp_path / "notes.wav"
    p.write_text("this is not audio\n" * 100)
    _one_line_error(run_cli("denoise", p), 1, "not an audio file")


def test_truncated_wav(tmp_path, rng):
    full = write_audio(tmp_path / "full.wav", 0.1 * rng.standard_normal((48000, 2)))
    p = tmp_path / "cut.wav"
    p.write_bytes(full.read_bytes()[: 100_000])
    r = run_cli("denoise", p)
    _one_line_error(r, 1, "truncated WAV file (the header promises 48000 frames, the file holds 24989)")
    assert not (tmp_path / "cut.denoised.wav").exists()
    r = run_cli("denoise", p, "--allow-truncated", "--quiet")
    assert r.returncode == 0 and sf.info(str(tmp_path / "cut.denoised.wav")).frames == 24989


def test_truncated_header(tmp_path, rng):
    full = write_audio(tmp_path / "full.wav", 0.1 * rng.standard_normal(4800))
    p = tmp_path / "hdr.wav"
    p.write_bytes(full.read_bytes()[:30])
    _one_line_error(run_cli("denoise", p), 1, "not an audio file")


def test_zero_frames(tmp_path):
    p = tmp_path / "zero.wav"
    p.write_bytes(_wav_header(2, 0))
    _one_line_error(run_cli("denoise", p), 1, "holds no audio frames")


def test_zero_channels(tmp_path):
    p = tmp_path / "nochan.wav"
    p.write_bytes(_wav_header(0, 0) + b"\0" * 64)
    r = run_cli("denoise", p)
    assert r.returncode == 1 and "Traceback" not in r.stderr
    line = r.stderr.strip()
    assert line.count("\n") == 0 and ("zero channels" in line or "not an audio file" in line), line


@pytest.mark.parametrize("bad, name", [(np.nan, "nan"), (np.inf, "inf"), (-np.inf, "-inf")])
def test_non_finite_samples_refused_naming_frame(tmp_path, rng, bad, name):
    x = 0.1 * rng.standard_normal((300_000, 2)).astype(np.float32)
    x[123_457, 1] = bad
    p = write_audio(tmp_path / "nan.wav", x, subtype="FLOAT")
    r = run_cli("denoise", p, "--lowpass", "1000")
    _one_line_error(r, 1, f"non-finite sample ({name}) at frame 123457")
    assert "channel 1" in r.stderr
    assert [q.name for q in tmp_path.iterdir()] == ["nan.wav"]


def test_output_folder_not_writable(noisy, tmp_path):
    _one_line_error(run_cli("denoise", noisy, "-o", "/sys/out.wav"), 1, "not writable")
    _one_line_error(run_cli("denoise", noisy, "-o", tmp_path / "missing" / "o.wav"), 1, "does not exist")
    if os.geteuid() != 0:  # root writes anywhere: covered by /sys above
        ro = tmp_path / "ro"
        ro.mkdir()
        ro.chmod(0o555)
        _one_line_error(run_cli("denoise", noisy, "-o", ro / "o.wav"), 1, "not writable")


def test_filter_longer_than_file(tmp_path, rng):
    p = write_audio(tmp_path / "short.wav", 0.1 * rng.standard_normal(1000))
    _one_line_error(run_cli("denoise", p), 1, "is longer than the file (1000 frames")


@pytest.mark.parametrize(
    "args, needle",
    [
        (["--lowpass", "30000"], "between 0 and Nyquist"),
        (["--band", "8000", "80"], "low < high"),
        (["--taps", "0"], "--taps must be a positive integer"),
        (["--taps", "many"], "--taps must be a positive integer"),
        (["--lowpass", "-5"], "--lowpass must be a positive frequency"),
        (["--block", "48"], "multiple of 32"),
        (["--backend", "tpu"], "invalid choice"),
        (["--variant", "warp"], "variant must be one of"),
        (["--taps", "100"], "odd number of taps"),
        (["--frobnicate"], "unrecognized arguments"),
    ],
)
def test_usage_errors_exit_2(noisy, tmp_path, args, needle):
    r = run_cli("denoise", noisy, "-o", tmp_path / "o.wav", *args)
    _one_line_error(r, 2, needle)
    assert not (tmp_path / "o.wav").exists()


def test_cuda_backend_without_gpu(noisy, tmp_path):
    r = run_cli("denoise", noisy, "-o", tmp_path / "o.wav", "--backend", "cuda", env={"SIGCONV_DISABLE_CUDA": "1"})
    _one_line_error(r, 1, "backend 'cuda' is not usable here")


def test_variants_command():
    r = run_cli("variants", "conv1d")
    assert r.returncode == 0 and "cpu  fft" in r.stdout


@pytest.mark.parametrize("signame, code, method", [("SIGINT", 130, "fir"), ("SIGTERM", 143, "fir"),
                                                    pytest.param("SIGHUP", 129, "fir", marks=pytest.mark.slow),
                                                    ("SIGTERM", 143, "spectral")])
def test_stop_signal_midway_leaves_no_output(tmp_path, rng, signame, code, method):
    """Ctrl-C, SIGTERM (timeout, systemd, job schedulers) or SIGHUP while filtering: exit 128 + the signal, one
    line, neither the output nor a temporary file is left."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT, terminal_signals

    src = tmp_path / "long.wav"
    block = (0.1 * rng.standard_normal((48000 * 10, 2))).astype(np.float32)
    with sf.SoundFile(str(src), "w", 48000, 2, subtype="PCM_16") as f:
        for _ in range(60):  # 10 minutes: long enough to be interrupted midway
            f.write(block)
    out = tmp_path / "long.out.wav"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "sigconv", "denoise", str(src), "-o", str(out), "--quiet",
                          "--method", method], stderr=subprocess.PIPE, text=True, env=env, preexec_fn=terminal_signals)
    deadline = time.time() + 60
    while time.time() < deadline and not any(q.name.endswith(".part") for q in tmp_path.iterdir()):
        time.sleep(0.01)  # wait until the temporary output exists: filtering has started
    assert p.poll() is None, "finished before it could be interrupted"
    p.send_signal(getattr(signal, signame))
    _, err = p.communicate(timeout=60)
    assert p.returncode == code, err
    said = "interrupted" if signame == "SIGINT" else f"stopped by {signame}"
    assert err.strip() == f"sigconv: error: {said}; no output written"
    assert sorted(q.name for q in tmp_path.iterdir()) == ["long.wav"]


def test_progress_bar_on_a_terminal(tmp_path, rng):
    """On a real terminal, a run still going after about a second draws a rich progress bar on stderr (this one is
    held back for 2 s before its output is moved into place: tests/shims/sitecustomize.py)."""
    import pty
    import subprocess
    import sys
    from pathlib import Path

    from conftest import ROOT

    src = write_audio(tmp_path / "ten.wav", 0.1 * rng.standard_normal(48000 * 8))
    master, slave = pty.openpty()
    shims = Path(__file__).with_name("shims")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(shims), str(ROOT)]), COLUMNS="100", TERM="xterm",
               SIGCONV_TEST_AT_REPLACE="sleep:o.wav:2")
    p = subprocess.Popen([sys.executable, "-m", "sigconv", "denoise", str(src), "-o", str(tmp_path / "o.wav")],
                         stdout=subprocess.PIPE, stderr=slave, env=env)
    os.close(slave)
    chunks = []
    while True:
        try:
            data = os.read(master, 65536)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    p.wait(timeout=120)
    os.close(master)
    shown = b"".join(chunks).decode(errors="replace")
    assert p.returncode == 0
    assert "filtering ten.wav" in shown and "%" in shown, shown[-500:]
    # short inputs draw no bar
    short = write_audio(tmp_path / "short.wav", 0.1 * rng.standard_normal(48000))
    r = run_cli("denoise", short, "-o", tmp_path / "s.wav")
    assert "filtering" not in r.stderr


@pytest.mark.parametrize("args, names", [
    (("--noise-from", "0", "1"), "--noise-from is an option of --method spectral"),
    (("--strength", "0.5", "--hop", "128"), "--strength and --hop are options of --method spectral"),
    (("--non-stationary",), "--stationary/--non-stationary is an option of --method spectral"),
    (("--method", "spectral", "--lowpass", "100"), "--lowpass is an option of --method fir"),
    (("--method", "spectral", "--notch-width", "3"), "--notch-width is an option of --method fir"),
    (("--method", "spectral", "--phase", "linear"), "--phase is an option of --method fir"),
])
def test_an_option_of_the_other_method_is_refused(tmp_path, rng, args, names, capsys):
    """An option that the chosen method would ignore: exit 2, one line naming it and the fix, nothing written."""
    from sigconv.cli import main

    src = write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal(4801))
    rc = main(["denoise", str(src), "-o", str(tmp_path / "out.wav"), *args])
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.splitlines()) == 1 and names in err and "drop" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.wav"]


def test_options_not_given_take_the_settings_defaults():
    """Filter options default to 'not given'; the values then come from FirSpec and GateSpec alone."""
    from sigconv.cli import make_parser
    from sigconv.cli.options import fir_spec_from_args, gate_spec_from_args

    args = make_parser().parse_args(["denoise", "x.wav", "--method", "spectral"])
    assert gate_spec_from_args(args) == sigconv.GateSpec()
    args = make_parser().parse_args(["denoise", "x.wav", "--strength", "0.25", "--non-stationary", "--method",
                                     "spectral", "--time-smooth", "20"])
    assert gate_spec_from_args(args) == sigconv.GateSpec(strength=0.25, stationary=False, time_smooth_ms=20.0)
    args = make_parser().parse_args(["denoise", "x.wav", "--notch", "50", "60"])
    assert fir_spec_from_args(args) == sigconv.FirSpec(notch=(50.0, 60.0))


def test_a_file_name_with_a_newline_stays_on_one_line(tmp_path):
    """A newline or an escape sequence in a file name is shown escaped: the error is still one line."""
    bad = tmp_path / "two\nlines\x1b[31m.wav"
    bad.write_bytes(b"not audio at all")
    r = run_cli("denoise", bad, "-o", tmp_path / "out.wav")
    assert r.returncode == 1
    assert len(r.stderr.splitlines()) == 1 and "two\\nlines\\x1b[31m.wav" in r.stderr and "\x1b" not in r.stderr


def test_batch_refuses_an_option_of_the_other_method(tmp_path, capsys):
    """batch shares denoise's rule: a FIR option with --method spectral (or the reverse) is exit 2, one line."""
    from sigconv.cli import main

    (tmp_path / "log.csv").write_text("time,a\n0,1\n0.01,2\n")
    rc = main(["batch", str(tmp_path / "log.csv"), "-o", str(tmp_path / "out"), "--method", "spectral", "--notch",
               "50"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1 and "--notch is an option of --method fir" in err
    assert not (tmp_path / "out").exists()


def test_nohup_keeps_a_command_running_when_its_terminal_closes(tmp_path, rng):
    """A SIGHUP ignored when the command starts (nohup) stays ignored; SIGTERM still stops it (exit 143)."""
    import signal
    import subprocess
    import sys
    import time

    from conftest import ROOT

    src = write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal(48000 * 400))
    out = tmp_path / "out.wav"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "sigconv", "denoise", str(src), "-o", str(out), "--quiet",
                          "--method", "spectral"],
                         stderr=subprocess.PIPE, text=True, env=env,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    deadline = time.time() + 60
    while time.time() < deadline and not any(q.name.endswith(".part") for q in tmp_path.iterdir()):
        time.sleep(0.01)
    assert p.poll() is None, "finished before the signals"
    p.send_signal(signal.SIGHUP)
    time.sleep(0.2)
    hup_ignored = p.poll() is None
    p.send_signal(signal.SIGTERM)
    _, err = p.communicate(timeout=60)
    assert hup_ignored, err
    assert p.returncode == 143 and err.strip() == "sigconv: error: stopped by SIGTERM; no output written"
    assert sorted(q.name for q in tmp_path.iterdir()) == ["in.wav"]


@pytest.mark.parametrize("fs", ["1e-320", "1e300"])
def test_batch_refuses_an_absurd_rate(tmp_path, fs, capsys):
    """--fs must be a rate whose derived sizes make sense: a subnormal or a huge one is exit 2, one line naming --fs."""
    from sigconv.cli import main

    (tmp_path / "log.csv").write_text("a\n1\n2\n")
    rc = main(["batch", str(tmp_path / "log.csv"), "-o", str(tmp_path / "out"), "--fs", fs])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.splitlines()) == 1
    assert "--fs" in err and "outside the sample rates sigconv filters" in err
    assert not (tmp_path / "out").exists()


def _program(argv, tmp_path, env=None):
    """The ``sigconv`` program (``sigconv.cli.run``) on ``argv`` in a subprocess whose interpreter says, at its
    teardown (an atexit handler), that it ran one."""
    import subprocess
    import sys

    from conftest import ROOT

    code = ("import atexit, sys\n"
            "atexit.register(lambda: print('teardown', file=sys.stderr, flush=True))\n"
            f"sys.argv = ['sigconv'] + {list(map(str, argv))!r}\n"
            "from sigconv.cli import run\n"
            "run()\n")
    e = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), **(env or {}))
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=e,
                          timeout=120)


def test_program_ends_without_teardown_after_its_work(tmp_path, rng):
    """After batch (and denoise, variants) the program skips Python's teardown: its exit code, its last lines on
    both streams and its outputs are all there. A usage error, or a command not in the list, ends the usual way."""
    src = tmp_path / "logs"
    src.mkdir()
    t = np.arange(3000) / 100.0
    x = rng.standard_normal(3000).tolist()
    (src / "ok.csv").write_text("time,x\n" + "".join(f"{a:.2f},{b!r}\n" for a, b in zip(t, x)))
    (src / "bad.csv").write_text("time,x\n0,1\n0,2\n")  # steps that do not increase: fails, the batch goes on
    r = _program(["batch", src, "-o", tmp_path / "out", "--backend", "cpu", "-j", "1"], tmp_path)
    assert r.returncode == 1, r.stderr
    assert "teardown" not in r.stderr
    assert "failed: bad.csv" in r.stderr and r.stderr.rstrip().splitlines()[-1].startswith("batch: 1 done"), r.stderr
    assert (tmp_path / "out" / "ok.csv").stat().st_size > 0
    r = _program(["variants", "conv1d"], tmp_path)
    assert r.returncode == 0 and "teardown" not in r.stderr
    assert r.stdout.startswith("conv1d:") and r.stdout.endswith("\n") and len(r.stdout.splitlines()) >= 4
    r = _program(["batch"], tmp_path)
    assert r.returncode == 2 and "teardown" in r.stderr
    r = _program(["tui", "--help"], tmp_path)
    assert r.returncode == 0 and "teardown" in r.stderr
