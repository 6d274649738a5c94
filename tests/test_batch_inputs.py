"""sigconv batch inputs: truncated recordings (--allow-truncated), every audio format libsndfile reads, files left
out of a folder walk counted, symbolic links followed without loops, the sample rate of rounded timestamps, and a
--help that names no internal module."""

from __future__ import annotations

import json
import re
import warnings as warnings_module
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from conftest import write_audio

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import sigconv  # noqa: E402
from sigconv._core.errors import InputError  # noqa: E402
from sigconv.cli import main  # noqa: E402
from sigconv.engine.batch import discovery, logs  # noqa: E402
from sigconv.engine.batch.manifest import NAME as MANIFEST  # noqa: E402
from sigconv.engine.batch.manifest import settings_hash  # noqa: E402

CPU = ("--backend", "cpu")
#: A short filter, so that tiny files are long enough and the runs stay fast.
SHORT = ("--lowpass", "3000", "--taps", "63")


def records(outdir) -> dict:
    lines = (Path(outdir) / MANIFEST).read_text().splitlines()
    return {Path(r["input"]).name: r for r in map(json.loads, filter(str.strip, lines))}


def failed_lines(err: str) -> dict:
    return {ln.split(":")[1].strip(): ln for ln in err.splitlines() if ln.startswith("failed:")}


# ------------------------------------------------------------------------------------ truncated recordings


def truncated_wav(path: Path, rng, frames=6000, cut=1001) -> int:
    """A valid 16-bit stereo WAV with ``cut`` bytes cut off its end; returns the frames it still holds."""
    write_audio(path, 0.1 * rng.standard_normal((frames, 2)), fs=16000, subtype="PCM_16")
    data = path.read_bytes()
    path.write_bytes(data[:-cut])
    with sf.SoundFile(str(path)) as f:
        assert "should be" in f.extra_info and f.frames < frames  # really truncated, as libsndfile sees it
        return f.frames


def test_allow_truncated_filters_a_truncated_wav(tmp_path, rng, capsys):
    """Without --allow-truncated a truncated WAV fails with a reason that names the option; the option exists in
    batch and filters what the file holds (the header's frame count is not trusted)."""
    src = tmp_path / "in"
    src.mkdir()
    held = truncated_wav(src / "cut.wav", rng)
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-o", str(out), *CPU, *SHORT, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 1, err
    assert "truncated WAV file" in failed_lines(err)["cut.wav"] and "--allow-truncated" in err
    assert not (out / "cut.wav").exists()
    rc = main(["batch", str(src), "-o", str(out), *CPU, *SHORT, "-j", "1", "--allow-truncated"])
    err = capsys.readouterr().err
    assert rc == 0, err
    with sf.SoundFile(str(out / "cut.wav")) as f:
        assert (f.frames, f.channels, f.samplerate, f.subtype) == (held, 2, 16000, "PCM_16")
    assert records(out)["cut.wav"]["status"] == "done"


def test_allow_truncated_in_settings_and_hash():
    """allow_truncated is a checked BatchSettings field; it counts in the settings hash only when set (a truncated
    file is then done instead of failed), so manifests written without it keep their hash."""
    off, on = sigconv.BatchSettings(), sigconv.BatchSettings(allow_truncated=True)
    assert "allow_truncated" not in off.manifest_dict() and on.manifest_dict()["allow_truncated"] is True
    assert settings_hash(off.manifest_dict(), "audio") == "4bb49997f363f6b3"  # the digest from before the option
    assert settings_hash(on.manifest_dict(), "audio") != settings_hash(off.manifest_dict(), "audio")
    with pytest.raises(ValueError, match="allow_truncated must be True or False"):
        sigconv.BatchSettings(allow_truncated="yes")


# ------------------------------------------------------------------------------------ --help


def test_batch_help_names_no_internal_module(capsys):
    """batch --help is for users: no dotted sigconv module path, no private module name."""
    with pytest.raises(SystemExit) as exc:
        main(["batch", "--help"])
    text = capsys.readouterr().out
    assert exc.value.code == 0 and "--allow-truncated" in text
    assert not re.search(r"\bsigconv\.\w", text), re.search(r".{40}\bsigconv\.\w.{20}", text, re.S).group()
    assert "_spectral" not in text and "engine" not in text


# ------------------------------------------------------------------------------------ audio formats


def _audio_fixtures():
    """(format, suffix) of every suffix the batch takes as audio here, from its format table."""
    here = discovery.supported_suffixes()
    return [(fmt, sfx) for fmt, sfxs in discovery.AUDIO_SUFFIXES.items() for sfx in sfxs
            if here.get(sfx) == "audio" and fmt in sf.available_formats()]


def _write_each_format(folder: Path, rng) -> dict:
    """A tiny file of each writable format under each of its suffixes: name -> (format, subtype)."""
    folder.mkdir(parents=True, exist_ok=True)
    made = {}
    x = 0.1 * rng.standard_normal((3000, 1))
    for fmt, sfx in _audio_fixtures():
        subtype = "OPUS" if sfx == ".opus" else None
        fs = 8000 if fmt == "WVE" else 48000  # WVE (Psion) is 8 kHz only
        name = f"{fmt.lower()}{sfx}"
        sf.write(str(folder / name), x, fs, format=fmt, subtype=subtype)
        made[name] = (fmt, sf.info(str(folder / name)).subtype)
    return made


def test_every_readable_audio_format_is_an_input(tmp_path, rng, capsys):
    """Each format the libsndfile here reads and writes is taken by its usual suffixes (.ogg, .opus, .aiff, .mp3
    where libsndfile has MPEG, ...), filtered, and written back in its own format and encoding."""
    here = discovery.supported_suffixes()
    for sfx in (".wav", ".flac", ".ogg", ".oga", ".aif", ".aiff", ".au", ".caf", ".w64", ".rf64"):
        assert here[sfx] == "audio", sfx
    assert (here.get(".mp3") == "audio") == ("MP3" in sf.available_formats())
    for sfx in (".raw", ".sd2", ".mpc", ".txt", ".mat"):
        assert sfx not in here
    src = tmp_path / "in"
    made = _write_each_format(src, rng)
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-o", str(out), *CPU, *SHORT, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 0, err
    recs = records(out)
    assert sorted(recs) == sorted(made) and all(r["status"] == "done" for r in recs.values())
    for name, (fmt, subtype) in made.items():
        info = sf.info(str(out / name))
        assert (info.format, info.subtype, info.frames) == (fmt, subtype, 3000), name


def test_unsupported_suffixes_counted_in_folders_refused_by_name(tmp_path, rng, capsys):
    """Files of another suffix found in a folder (or by a pattern) are not inputs: they are counted for one
    note line; a file of another suffix named on the command line is refused with the reason; a folder with
    nothing to filter is a usage error that says what is supported and what was skipped."""
    src = tmp_path / "in"
    (src / "sub").mkdir(parents=True)
    write_audio(src / "a.ogg", 0.1 * rng.standard_normal((3000, 1)), fs=48000, format="OGG", subtype="VORBIS")
    for name in ("notes.txt", "x.xyz", "sub/y.XYZ", "README", ".hidden.xyz"):
        (src / name).write_text("not data")
    got = discovery.find_inputs([str(src)], tmp_path / "out", recursive=True)
    assert [f.rel for f in got.found] == ["a.ogg"] and got.found[0].kind == "audio"
    assert got.unsupported == {".xyz": 2, ".txt": 1, "(no suffix)": 1}  # hidden files are not looked at
    assert got.skipped_note() == "skipped 4 files with unsupported suffixes (.xyz: 2, (no suffix): 1, .txt: 1)"
    got = discovery.find_inputs([str(src / "*")], tmp_path / "out")
    assert [f.rel for f in got.found] == ["a.ogg"] and got.unsupported == {".xyz": 1, ".txt": 1, "(no suffix)": 1}

    out = tmp_path / "out"
    rc = main(["batch", str(src / "x.xyz"), str(src / "a.ogg"), "-o", str(out), *CPU, *SHORT, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 1, err
    why = failed_lines(err)["x.xyz"]
    assert "unsupported file type '.xyz'" in why and ".ogg" in why and ".flac" in why, why
    assert records(out)["a.ogg"]["status"] == "done"

    only_text = tmp_path / "text"
    only_text.mkdir()
    (only_text / "a.txt").write_text("x")
    (only_text / "b.txt").write_text("x")
    rc = main(["batch", str(only_text), "-o", str(tmp_path / "o2"), *CPU])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
    assert "no supported input files found (supported: CSV, Parquet" in err and ".ogg" in err, err
    assert "skipped 2 files with unsupported suffixes (.txt: 2)" in err, err


# ------------------------------------------------------------------------------------ symbolic links


def _csv(path: Path, rng, n=400, fs=100.0):
    path.parent.mkdir(parents=True, exist_ok=True)
    x = rng.standard_normal(n)
    path.write_text("timestamp,v\n" + "".join(f"{i / fs:.2f},{v!r}\n" for i, v in enumerate(x.tolist())))
    return path


def test_symlinked_folders_followed_once(tmp_path, rng, capsys):
    """A symlink to a folder given as input, and symlinked subfolders with -r, are walked; a link back to a
    folder above (a loop) and a second link to one folder are not walked again."""
    data = tmp_path / "data"
    _csv(data / "a.csv", rng)
    _csv(data / "sub" / "b.csv", rng)
    _csv(tmp_path / "elsewhere" / "c.csv", rng)
    (data / "linked").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    (data / "sub" / "loop").symlink_to(data, target_is_directory=True)  # back to an ancestor
    (data / "again").symlink_to(data / "sub", target_is_directory=True)  # a second way into sub/
    (tmp_path / "link").symlink_to(data, target_is_directory=True)
    out = tmp_path / "out"

    top = discovery.find_inputs([str(tmp_path / "link")], out)
    assert [f.rel for f in top.found] == ["a.csv"]
    deep = discovery.find_inputs([str(tmp_path / "link")], out, recursive=True)
    assert [f.rel for f in deep.found] == ["a.csv", "linked/c.csv", "sub/b.csv"]  # sub/ where it is, once
    assert all(str(f.path).startswith(str(tmp_path / "link")) for f in deep.found)  # named as found

    only_links = tmp_path / "only_links"  # a folder of links to folders: nothing found before links were followed
    only_links.mkdir()
    (only_links / "day1").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    rc = main(["batch", str(only_links), "-r", "-o", str(out), *CPU, "-j", "1", "--taps", "31"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert (out / "day1" / "c.csv").is_file()


# ------------------------------------------------------------------------------------ sample rate of timestamps


def _ticks(fs: float, n: int) -> np.ndarray:
    return np.arange(n) / fs


@pytest.mark.parametrize("decimals", [6, 3])
def test_rate_of_rounded_timestamps_is_the_span_rate(decimals):
    """A 360 Hz log with timestamps printed to 6 decimals steps by 0.002777 or 0.002778 s (median: 359.971 Hz);
    to 3 decimals by 2 or 3 ms (median: 333 Hz). Both are regular once rounding is allowed for, and give 360 Hz
    by the span."""
    t = np.array([float(f"{v:.{decimals}f}") for v in _ticks(360.0, 3600)])
    assert abs(1 / np.median(np.diff(t)) - 360) > 0.02  # what the median gave
    fs, warnings = logs.infer_rate(t, "log.csv")
    assert abs(fs - 360) <= 1e-6 * 360 and warnings == []
    assert logs.time_resolution(t) == 10.0 ** -decimals and logs.time_resolution(_ticks(360.0, 100)) == 0
    fs, warnings = logs.infer_rate(t, "log.csv", fs=330.0)  # asked for: the warning names the span rate
    assert fs == 330 and warnings == ["--fs 330 Hz differs from the rate of the timestamps (360 Hz)"]


def test_irregular_timestamps_still_warned_and_refused():
    """Rounding is no excuse for a real irregularity: a dropped sample among 2-decimal 100 Hz timestamps, a hole,
    and jitter over 1% are warned about (the rate from the median step); steps going back are refused."""
    t = np.round(_ticks(100.0, 1000), 2)
    dropped = np.delete(t, 500)
    fs, warnings = logs.infer_rate(dropped, "log.csv")
    assert fs == 100 and warnings and warnings[0].startswith("irregular timestamps: 1 of 998 steps")
    holed = np.round(np.concatenate([_ticks(360.0, 500), 3 + _ticks(360.0, 500)]), 6)
    fs, warnings = logs.infer_rate(holed, "log.csv")
    assert fs == 360 and warnings[0].startswith("irregular timestamps: 1 of 999 steps")
    assert "rounded to" in warnings[0]
    jitter = _ticks(100.0, 1000)
    jitter[::10] += 0.0003  # 3% of a step (1% plus the 0.0001 s these timestamps are rounded to: 2%)
    fs, warnings = logs.infer_rate(jitter, "log.csv")
    assert warnings and warnings[0].startswith("irregular timestamps: 199 of 999 steps")
    back = t.copy()
    back[[10, 11]] = back[[11, 10]]
    with pytest.raises(InputError, match="non-monotonic timestamps.*pass --fs"):
        logs.infer_rate(back, "log.csv")


def test_nonfinite_timestamps_are_reported_without_numpy_warnings():
    """Infinite and missing timestamps (inf - inf between neighbours) are the error or the warning that names them,
    and no NumPy RuntimeWarning reaches the user's stderr."""
    t = _ticks(100.0, 20)
    t[[3, 4]] = np.inf
    t[[9, 10]] = -np.inf
    t[15] = np.nan
    with warnings_module.catch_warnings():
        warnings_module.simplefilter("error")
        with pytest.raises(InputError, match="5 missing timestamp\\(s\\), first at row 3; cannot infer the rate"):
            logs.infer_rate(t, "log.csv")
        fs, warned = logs.infer_rate(t, "log.csv", fs=100.0)
    assert fs == 100 and warned[0] == "5 missing timestamp(s), first at row 3"


@pytest.mark.parametrize("n", [1, 2, 3, 4, 999, 1000])
def test_median_step_as_numpy_gives_it(rng, n):
    """The median step is NumPy's median (odd and even counts, repeated values) without NumPy's NaN check."""
    a = rng.standard_normal(n)
    assert logs._median(a) == float(np.median(a))
    steps = np.round(rng.uniform(0.0027, 0.0029, n), 4)  # few distinct values: ties around the middle
    assert logs._median(steps) == float(np.median(steps))


def test_rate_of_a_first_log_imports_nothing_more():
    """A batch worker's first log infers its rate with what the worker has imported: ``np.median`` imported
    ``numpy.ma`` there (40-70 ms in every worker at once, before its first file could go on)."""
    import subprocess
    import sys

    code = ("import sys, numpy as np\n"
            "from sigconv.engine.batch import logs\n"
            "before = set(sys.modules)\n"
            "t = np.round(np.arange(6000) / 100.0, 2)\n"
            "assert logs.infer_rate(t, 'log.csv') == (100.0, [])\n"
            "print(sorted(set(sys.modules) - before))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout


def _write_360_logs(src: Path, rng, n=3600):
    """The same 360 Hz log three ways: 6-decimal seconds (CSV), ISO datetimes with microseconds (CSV), a
    timestamp[us] column (Parquet)."""
    src.mkdir(parents=True, exist_ok=True)
    t = _ticks(360.0, n)
    x = rng.standard_normal(n) + np.sin(2 * np.pi * 60 * t)
    (src / "secs.csv").write_text("time,ecg\n" + "".join(f"{a:.6f},{b!r}\n" for a, b in zip(t, x.tolist())))
    us = np.round(t * 1e6).astype("int64") + 1_700_000_000_000_000
    iso = np.datetime_as_string(us.astype("datetime64[us]"), unit="us")
    (src / "iso.csv").write_text("timestamp,ecg\n" + "".join(f"{a},{b!r}\n" for a, b in zip(iso, x.tolist())))
    pq.write_table(pa.table({"when": pa.array(us, pa.timestamp("us")), "ecg": x}), src / "when.parquet")
    return x


@pytest.mark.parametrize("streamed", [False, True], ids=["in-memory", "streamed"])
def test_batch_records_the_span_rate(tmp_path, rng, monkeypatch, capsys, streamed):
    """Both table paths (in memory, streamed) infer 360 Hz by one rule, record it in the manifest and design the
    filter for it: the output is the 360 Hz low-pass."""
    from sigconv.engine.batch import stream

    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 0 if streamed else 1 << 60)
    src = tmp_path / "in"
    x = _write_360_logs(src, rng)
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-o", str(out), *CPU, "-j", "1", "--lowpass", "40", "--taps", "101",
               "--edges", "zero"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "warning" not in err and "360 Hz: low-pass 40 Hz" in err, err
    recs = records(out)
    assert sorted(recs) == ["iso.csv", "secs.csv", "when.parquet"]
    for name, r in recs.items():
        assert r["status"] == "done" and abs(r["fs"] - 360) <= 1e-6 * 360, (name, r["fs"])
    ref = sigconv.apply_fir(x, sigconv.design_fir("lowpass", 40.0, 360.0, numtaps=101), backend="cpu")
    y = pq.read_table(out / "when.parquet").column("ecg").to_numpy()
    assert np.max(np.abs(y - ref)) <= 1e-9 * np.max(np.abs(ref))
