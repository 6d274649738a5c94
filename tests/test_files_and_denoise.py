"""Sound files in and out of `sigconv denoise`: which files are accepted (truncation judged from the container's
own chunk sizes), filter lengths refused before any design, a full disk, Ctrl-C while the threads start, and the
progress bar."""

from __future__ import annotations

import errno
import io
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

import sigconv
from sigconv._core.atomic import atomic_output
from sigconv._core.errors import InputError, OutputError
from sigconv.engine import design as design_mod
from sigconv.engine.audio import audio_extent, probe
from sigconv.engine.batch import filters as batch_filters
from sigconv.engine.file import CPUFileFilter, filter_file, fir_block_filter
from sigconv.engine.settings import FirSpec, KernelChoice
from conftest import ROOT, write_audio

CPU = KernelChoice(backend="cpu")
SMOOTH = np.array([0.25, 0.5, 0.25])


def _only_files(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir())


# ------------------------------------------------------------------------------- every subtype, odd and even

FORMATS = {"WAV": "wav", "FLAC": "flac", "AIFF": "aiff"}


def _subtype_cases():
    """(format, subtype, channels) that soundfile writes here, and those it writes but cannot read back."""
    ok, unreadable = [], []
    with tempfile.TemporaryDirectory() as d:
        for fmt, ext in FORMATS.items():
            for sub in sf.available_subtypes(fmt):
                if not sf.check_format(fmt, sub):
                    continue
                for ch in (1, 2):
                    p = os.path.join(d, f"t.{ext}")
                    try:
                        sf.write(p, np.zeros((5, ch)), 8000, subtype=sub, format=fmt)
                    except sf.LibsndfileError:
                        continue  # e.g. GSM610 stereo, MPEG in WAV: libsndfile writes no such file
                    try:
                        sf.read(p, frames=5)
                        ok.append((fmt, sub, ch))
                    except sf.LibsndfileError:
                        unreadable.append((fmt, sub, ch))  # DWVW: libsndfile's own reads fail ("psf_fseek")
    return ok, unreadable


WRITABLE, UNREADABLE = _subtype_cases()


def test_the_subtype_list_is_not_empty():
    """Guards the parametrisation below: the formats' ordinary subtypes are all there, at both channel counts."""
    for fmt, sub in (("WAV", "PCM_24"), ("WAV", "PCM_U8"), ("AIFF", "PCM_S8"), ("FLAC", "PCM_24")):
        assert (fmt, sub, 1) in WRITABLE and (fmt, sub, 2) in WRITABLE


@pytest.mark.parametrize("frames", [101, 100])
@pytest.mark.parametrize("fmt, subtype, channels", WRITABLE)
def test_every_subtype_is_accepted_and_round_trips(tmp_path, rng, fmt, subtype, channels, frames):
    """Odd and even lengths, mono and stereo: probe accepts (an odd-sized data chunk and its pad byte are not
    truncation), and filtering keeps frames, channels, format and subtype; sigconv's own output is accepted too."""
    src = tmp_path / f"in.{FORMATS[fmt]}"
    sf.write(str(src), 0.3 * rng.uniform(-1, 1, (frames, channels)), 8000, subtype=subtype, format=fmt)
    info = probe(src)
    with sf.SoundFile(str(src)) as f:
        assert (info.frames, info.channels, info.subtype) == (f.frames, channels, subtype)
    out = tmp_path / f"out.{FORMATS[fmt]}"
    filter_file(info, out, lambda i, s: fir_block_filter(SMOOTH, i.channels, s, kernel=CPU.resolve()))
    back = probe(out)
    assert (back.frames, back.channels, back.format, back.subtype) == (info.frames, channels, info.format, subtype)
    assert _only_files(tmp_path) == sorted([src.name, out.name])


@pytest.mark.parametrize("fmt, subtype, channels", UNREADABLE)
def test_a_subtype_libsndfile_cannot_read_back_is_refused_up_front(tmp_path, fmt, subtype, channels):
    src = tmp_path / f"in.{FORMATS[fmt]}"
    sf.write(str(src), np.zeros((101, channels)), 8000, subtype=subtype, format=fmt)
    with pytest.raises(InputError, match=f"in.{FORMATS[fmt]}: cannot read its {subtype} audio"):
        probe(src)


def test_odd_mono_24_bit_through_the_command_line(tmp_path, rng):
    """The reported case: a valid mono 24-bit WAV of odd length (and its 24-bit output) is filtered, not refused."""
    from conftest import run_cli

    src = write_audio(tmp_path / "odd.wav", 0.1 * rng.standard_normal(48001), subtype="PCM_24")
    out = tmp_path / "o.wav"
    r = run_cli("denoise", src, "-o", out, "--lowpass", "3000", "--taps", "101", "--quiet")
    assert r.returncode == 0 and r.stderr == "", r.stderr
    r = run_cli("denoise", out, "-o", tmp_path / "o2.wav", "--lowpass", "3000", "--taps", "101", "--quiet")
    assert r.returncode == 0 and sf.info(str(tmp_path / "o2.wav")).frames == 48001, r.stderr


# ------------------------------------------------------------------------------------------ truncation facts

STATED = [("WAV", "wav"), ("AIFF", "aiff"), ("W64", "w64"), ("AU", "au"), ("CAF", "caf"), ("RF64", "rf64")]


@pytest.mark.parametrize("fmt, ext, subtype, channels, frames", [
    (fmt, ext, sub, ch, n) for fmt, ext in STATED
    for sub, ch, n in (("PCM_24", 1, 4801), ("PCM_U8", 1, 4801), ("PCM_16", 2, 4800), ("FLOAT", 1, 4801))
    if sf.check_format(fmt, sub)])
def test_truncation_is_judged_from_the_chunk_sizes(tmp_path, rng, fmt, ext, subtype, channels, frames):
    """A file cut short is refused, by one byte or by a third (a CAF cut by a third libsndfile itself refuses to
    open); cutting only the pad byte after an odd-sized data chunk (other writers omit it) is not truncation."""
    full = tmp_path / f"full.{ext}"
    sf.write(str(full), 0.2 * rng.uniform(-1, 1, (frames, channels)), 8000, subtype=subtype, format=fmt)
    data = full.read_bytes()
    promised, held = audio_extent(full, None, {"PCM_24": 3, "PCM_U8": 1, "PCM_16": 2, "FLOAT": 4}[subtype] * channels)
    assert held - promised in (0, 1)  # the audio is all there; 1: the pad byte after an odd-sized chunk
    whole = probe(full).frames
    cut = tmp_path / f"cut.{ext}"
    if held > promised:  # drop the pad byte alone: still whole
        cut.write_bytes(data[:-1])
        assert probe(cut).frames == whole
    cut.write_bytes(data[:promised - held - 1])  # one byte of audio lost
    with pytest.raises(InputError, match=rf"^{cut}: truncated {fmt} file \(the header promises {whole} frames, "
                                         rf"the file holds {whole - 1}\); pass --allow-truncated"):
        probe(cut)
    assert probe(cut, allow_truncated=True).frames == whole - 1
    cut.write_bytes(data[:-(len(data) // 3)])
    with pytest.raises(InputError, match=rf"^{cut}: (truncated {fmt} file \(the header promises|not an audio file)"):
        probe(cut)


def test_truncation_message_names_what_was_promised_and_held(tmp_path, rng):
    full = write_audio(tmp_path / "full.wav", 0.1 * rng.standard_normal((48000, 2)))
    cut = tmp_path / "cut.wav"
    cut.write_bytes(full.read_bytes()[:100_000])
    with pytest.raises(InputError) as exc:
        probe(cut)
    assert str(exc.value) == (f"{cut}: truncated WAV file (the header promises 48000 frames, the file holds 24989); "
                              "pass --allow-truncated to filter what is there")


def test_a_warning_alone_is_not_truncation(tmp_path, rng):
    """libsndfile's log warns about every odd-sized data chunk; the decision no longer reads the log."""
    src = write_audio(tmp_path / "odd.wav", 0.1 * rng.standard_normal(101), subtype="PCM_24")
    with sf.SoundFile(str(src)) as f:
        assert "should be" in f.extra_info  # the warning that used to refuse this file
    assert probe(src).frames == 101


# --------------------------------------------------------------------------------- filter length, up front

def _one_second(tmp_path, rng) -> Path:
    return write_audio(tmp_path / "one_second.wav", 0.1 * rng.standard_normal(48000))


def _capped(*args, limit=1536 << 20):
    """`python -m sigconv ARGS` with its address space capped, so that a regression cannot eat the machine."""
    import resource
    import subprocess

    def cap():
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "sigconv", *map(str, args)], capture_output=True, text=True, env=env,
                       preexec_fn=cap, timeout=60)
    return r, time.perf_counter() - t0


@pytest.mark.parametrize("options, taps", [(["--taps", "1000000000"], 1000000000),
                                           (["--taps", "10000001"], 10000001),
                                           (["--transition", "0.001"], 158400001),
                                           (["--band", "0.0001", "7999"], 1584000001)])
def test_a_filter_longer_than_the_file_is_refused_at_once(tmp_path, rng, options, taps):
    src = _one_second(tmp_path, rng)
    r, seconds = _capped("denoise", src, *options)
    assert r.returncode == 1, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    assert lines[0].startswith(f"sigconv: error: {src}: the filter ({taps} taps"), lines[0]
    assert "longer than the file (48000 frames, 1 s)" in lines[0], lines[0]
    assert seconds < 2.0, seconds
    assert _only_files(tmp_path) == ["one_second.wav"]


@pytest.fixture
def no_design(monkeypatch):
    """Any filter actually designed fails the test (the checks must come first)."""
    def firwin(numtaps, *a, **k):
        raise AssertionError(f"designed {numtaps} taps")

    monkeypatch.setattr(design_mod, "firwin", firwin)


@pytest.mark.parametrize("spec, count", [(FirSpec(taps=1_000_000_001), 1_000_000_001),
                                         (FirSpec(band=(0.0001, 7999)), 1_584_000_001),
                                         (FirSpec(lowpass=3000, notch=(50,), notch_width=0.001), 158_400_213),
                                         (FirSpec(lowpass=3000, transition=0.001), 158_400_001)])
def test_fir_spec_counts_taps_and_refuses_before_designing(no_design, spec, count):
    assert spec.length(48000) == count
    with pytest.raises(InputError, match=rf"^x\.wav: the filter \({count} taps, .* longer than the file \(48000 "
                                         r"frames, 1 s\); use fewer --taps or a wider --transition$"):
        spec.design(48000, "recording", frames=48000, source="x.wav")


def test_even_taps_are_reported_as_too_long_before_the_phase_rule(no_design):
    """--taps 1000000000 is even as well as too long: the length, naming the file, is what the user hears."""
    with pytest.raises(InputError, match="1000000000 taps"):
        FirSpec(taps=1_000_000_000).design(48000, frames=48000, source="x.wav")


def test_batch_taps_for_checks_the_length_before_designing(no_design):
    fir = FirSpec(lowpass=3000, taps=100_000_001)
    with pytest.raises(InputError, match=r"log\.csv: the filter \(100000001 taps.*\(48000 samples"):
        batch_filters.taps_for(fir, 48000.0, None, frames=48000, source="log.csv")


def test_batch_taps_for_checks_a_memoised_filter_against_each_file():
    fir = FirSpec(lowpass=30, taps=101)
    taps, _ = batch_filters.taps_for(fir, 1000.0, None, frames=5000, source="long.csv")
    assert taps.size == 101
    with pytest.raises(InputError, match=r"short\.csv: the filter \(101 taps"):
        batch_filters.taps_for(fir, 1000.0, None, frames=50, source="short.csv")
    with pytest.raises(InputError, match=r"short\.csv: the filter \(101 taps, .*\(50 samples"):
        batch_filters.check_length(taps, 50, 1000.0, "short.csv")


def test_a_design_larger_than_free_memory_is_refused(no_design, monkeypatch):
    monkeypatch.setattr(design_mod, "available_memory", lambda: 100 << 20)
    with pytest.raises(ValueError, match=r"a filter of 20000001 taps needs about 1\.0 GiB to design, more than the "
                                         r"0\.1 GiB of memory free"):
        FirSpec(lowpass=3000, taps=20_000_001).design(48000, frames=10**9, source="long.wav")
    with pytest.raises(ValueError, match="needs about"):
        sigconv.design_fir("lowpass", 3000, 48000, numtaps=20_000_001)


def test_available_memory_is_a_plausible_number():
    free = design_mod.available_memory()
    assert free is None or 0 <= free < 1 << 50


def test_a_transition_too_narrow_to_count_is_a_clear_error():
    with pytest.raises(ValueError, match="too narrow"):
        FirSpec(lowpass=3000, transition=1e-320).length(48000)


def test_long_cascades_go_through_ffts_and_short_ones_keep_their_bits(rng):
    """A band with a very narrow notch is a cascade of millions of taps: long cascades go through FFTs rather
    than minutes of direct summation; everyday cascades keep np.convolve's exact values (reference outputs
    unchanged)."""
    import scipy.signal as ss

    from sigconv.engine.settings import _cascade

    a, b = rng.standard_normal(40001), rng.standard_normal(30001)  # past the direct sum's limit
    ref = ss.fftconvolve(a, b)
    assert np.max(np.abs(_cascade(a, b) - ref)) <= 1e-12 * np.max(np.abs(ref))
    spec = FirSpec(band=(80, 8000), notch=(50,))
    band = sigconv.design_fir("bandpass", (80, 8000), 48000)
    notch = sigconv.design_notch([50], 48000, width=5.0)
    assert np.array_equal(spec.design(48000).taps, np.convolve(band, notch))


# ---------------------------------------------------------------------------------------------- disk full

@pytest.fixture
def src(tmp_path, rng):
    return write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal((4800, 2)))


def _statvfs(free_blocks):
    real = os.statvfs

    def fake(path):
        st = real(path)
        return os.statvfs_result((st.f_bsize, st.f_frsize, st.f_blocks, free_blocks, free_blocks, st.f_files,
                                  st.f_ffree, st.f_favail, st.f_flag, st.f_namemax))

    return fake


def _denoise_into(src, out):
    return filter_file(probe(src), out, lambda i, s: fir_block_filter(SMOOTH, i.channels, s, kernel=CPU.resolve()))


@pytest.mark.parametrize("failure, said", [
    (lambda: sf.LibsndfileError(2, prefix="Write failed: "), "no space left on device"),  # libsndfile: System error.
    (lambda: OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), "no space left on device"),
    (lambda: OSError(errno.EDQUOT, os.strerror(errno.EDQUOT)), "disk quota exceeded"),
])
def test_a_full_disk_says_so_and_leaves_nothing(tmp_path, src, monkeypatch, failure, said):
    def write(self, data):
        raise failure()

    monkeypatch.setattr(sf.SoundFile, "write", write)
    monkeypatch.setattr(os, "statvfs", _statvfs(0))
    out = tmp_path / "out.wav"
    with pytest.raises(OutputError) as exc:
        _denoise_into(src, out)
    assert str(exc.value) == f"{said} writing {out} (in {tmp_path}); no output written"
    assert _only_files(tmp_path) == ["in.wav"]


def test_a_system_error_with_room_left_is_not_called_a_full_disk(tmp_path, src, monkeypatch):
    def write(self, data):
        raise sf.LibsndfileError(2)

    monkeypatch.setattr(sf.SoundFile, "write", write)
    monkeypatch.setattr(os, "statvfs", _statvfs(10**6))
    out = tmp_path / "out.wav"
    with pytest.raises(OutputError, match=r"out\.wav: write failed \(System error\.\)"):
        _denoise_into(src, out)
    assert _only_files(tmp_path) == ["in.wav"]


def test_a_full_disk_from_the_command_line(tmp_path, src, monkeypatch, capsys):
    from sigconv.cli import main

    def write(self, data):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(sf.SoundFile, "write", write)
    out = tmp_path / "o.wav"
    assert main(["denoise", str(src), "-o", str(out), "--taps", "101", "--lowpass", "3000", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err == f"sigconv: error: no space left on device writing {out} (in {tmp_path}); no output written\n"
    assert _only_files(tmp_path) == ["in.wav"]


def test_atomic_output_says_a_full_disk_for_any_writer(tmp_path):
    out = tmp_path / "table.csv"
    with pytest.raises(OutputError, match=f"no space left on device writing {out}"):
        with atomic_output(out) as tmp:
            tmp.write_text("a,b\n")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert _only_files(tmp_path) == []


@pytest.mark.parametrize("signame", ["SIGINT", "SIGTERM"])
def test_a_stop_signal_taken_by_another_thread_while_the_temporary_file_is_made(tmp_path, monkeypatch, signame):
    """A stop signal that arrives while atomic_output makes its temporary file, delivered to another thread (the
    kernel gives a process's signal to any thread that does not block it: a reader, FFT or BLAS worker), still
    leaves no file: its handler runs in the main thread once the clean-up is in place, and the interruption goes
    on from there."""
    import signal
    import tempfile

    from sigconv._core import atomic
    from sigconv._core.errors import raise_terminated

    sig = getattr(signal, signame)
    wait = threading.Event()
    other = threading.Thread(target=wait.wait, daemon=True)  # (started before the hold: the signal open in it)
    other.start()
    real = tempfile.mkstemp
    sent = []

    def mkstemp(*args, **kw):
        made = real(*args, **kw)
        signal.pthread_kill(other.ident, sig)  # (its C handler runs there; the Python one waits for the main thread)
        time.sleep(0.2)
        sent.append(made[1])
        return made

    monkeypatch.setattr(atomic.tempfile, "mkstemp", mkstemp)
    before = signal.signal(sig, signal.default_int_handler if signame == "SIGINT" else raise_terminated)
    try:
        with pytest.raises(KeyboardInterrupt):
            with atomic_output(tmp_path / "out.bin"):
                pytest.fail("the block ran: the signal was lost")
    finally:
        signal.signal(sig, before)
        wait.set()
    assert _only_files(tmp_path) == [] and len(sent) == 1, sent


# --------------------------------------------------------------------------------- Ctrl-C between the starts

def _interrupt_second_start(monkeypatch, how: str):
    """The engine's second thread start is interrupted: before the thread is handed to the OS ("before"), after
    it runs ("after"), or with its ident set but never marked started ("ident", as an interrupt inside start()
    can leave it)."""
    real = threading.Thread.start
    seen = []

    def start(self):
        target = getattr(self, "_target", None)
        if target is None or not getattr(target, "__qualname__", "").startswith("_filter_into"):
            return real(self)
        seen.append(self)
        if len(seen) < 2:
            return real(self)
        if how == "after":
            real(self)
        elif how == "ident":
            self._ident = 1  # noqa: SLF001 (what a half-done start leaves)
        raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start)
    return seen


@pytest.mark.parametrize("how", ["before", "after", "ident"])
def test_ctrl_c_between_the_thread_starts(tmp_path, src, monkeypatch, how):
    seen = _interrupt_second_start(monkeypatch, how)
    with pytest.raises(KeyboardInterrupt):
        _denoise_into(src, tmp_path / "out.wav")
    assert len(seen) == 2
    for t in seen:
        t.join(timeout=5) if t.is_alive() else None
    assert _only_files(tmp_path) == ["in.wav"]


def test_ctrl_c_between_the_thread_starts_exits_130(tmp_path, src, monkeypatch, capsys):
    from sigconv.cli import main

    _interrupt_second_start(monkeypatch, "ident")
    assert main(["denoise", str(src), "-o", str(tmp_path / "o.wav"), "--taps", "101", "--lowpass", "3000"]) == 130
    assert capsys.readouterr().err.strip().splitlines()[-1] == "sigconv: error: interrupted; no output written"
    assert _only_files(tmp_path) == ["in.wav"]


# ------------------------------------------------------------------------------------------------ progress

@pytest.fixture
def terminal(monkeypatch):
    """stderr is a terminal; the bar is drawn into the returned buffer."""
    from rich.console import Console

    import sigconv.cli.denoise as cli_denoise

    buf = io.StringIO()
    monkeypatch.setattr(cli_denoise, "_console", lambda: Console(file=buf, force_terminal=True, width=100))
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    return buf


@pytest.fixture
def slow(monkeypatch):
    """Each block takes 0.3 s; the bar is due after 0.2 s."""
    import sigconv.cli.denoise as cli_denoise

    real = CPUFileFilter._filter_block

    def slow_block(self, x):
        time.sleep(0.3)
        return real(self, x)

    monkeypatch.setattr(CPUFileFilter, "_filter_block", slow_block)
    monkeypatch.setattr(cli_denoise, "PROGRESS_DELAY_S", 0.2)


def _denoise_cli(src, tmp_path, *more):
    from sigconv.cli import main

    return main(["denoise", str(src), "-o", str(tmp_path / "o.wav"), "--taps", "101", "--lowpass", "3000",
                 "--backend", "cpu", "-f", *more])


def test_a_slow_run_draws_the_bar(tmp_path, src, terminal, slow):
    assert _denoise_cli(src, tmp_path) == 0
    assert "filtering in.wav" in terminal.getvalue() and "%" in terminal.getvalue(), terminal.getvalue()


def test_quiet_draws_no_bar(tmp_path, src, terminal, slow, capsys):
    assert _denoise_cli(src, tmp_path, "--quiet") == 0
    assert terminal.getvalue() == "" and capsys.readouterr().err == ""


def test_no_bar_when_stderr_is_not_a_terminal(tmp_path, src, terminal, slow, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False, raising=False)
    assert _denoise_cli(src, tmp_path) == 0
    assert terminal.getvalue() == ""


def test_a_fast_run_draws_no_bar(tmp_path, src, terminal):
    t0 = time.perf_counter()
    assert _denoise_cli(src, tmp_path) == 0
    assert time.perf_counter() - t0 < 1.0  # else the bar would be due
    assert terminal.getvalue() == ""
