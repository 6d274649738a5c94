"""Only regular files are ever replaced: an output that is a device, a FIFO, a socket or a folder (directly or
through a symbolic link) is refused before any work, and again just before the rename; a link to a regular file
is written through (its target replaced, the link kept)."""

from __future__ import annotations

import os
import socket
import stat

import numpy as np
import pytest

import sigconv
from conftest import run_cli, write_audio


def _fifo(path):
    os.mkfifo(path)
    return path


def _socket(path):
    s = socket.socket(socket.AF_UNIX)
    s.bind(str(path))
    return s


def _device(path):
    """A copy of /dev/null's node (needs root: mknod)."""
    if os.geteuid() != 0:
        pytest.skip("making a device node needs root")
    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    return path


@pytest.mark.parametrize("kind, says", [("fifo", "is a FIFO"), ("device", "is a character device"),
                                        ("folder", "is a folder"), ("socket", "is a socket")])
@pytest.mark.parametrize("through_link", [False, True])
def test_atomic_output_never_replaces_a_special_file(tmp_path, kind, says, through_link):
    """atomic_output refuses, with one line naming the path and what it is, and leaves the node as it was and no
    temporary file."""
    node = tmp_path / "node"
    keep = None
    if kind == "fifo":
        _fifo(node)
    elif kind == "device":
        _device(node)
    elif kind == "folder":
        node.mkdir()
    else:
        keep = _socket(node)
    before = os.lstat(node)
    out = node
    if through_link:
        out = tmp_path / "link"
        out.symlink_to(node)
    try:
        with pytest.raises(sigconv.OutputError) as e:
            with sigconv.atomic_output(out) as tmp:
                tmp.write_bytes(b"x")
        msg = str(e.value)
        assert says in msg and str(out) in msg and "\n" not in msg
        assert ("through a symbolic link" in msg) == through_link
        after = os.lstat(node)
        assert (after.st_mode, after.st_ino) == (before.st_mode, before.st_ino)
        assert not [p for p in tmp_path.iterdir() if p.name.endswith(".part")]
    finally:
        if keep is not None:
            keep.close()


def test_a_special_file_appearing_during_the_write_is_not_replaced(tmp_path):
    """The check runs again just before the rename: a FIFO made at the output meanwhile stays, the temporary file
    goes."""
    out = tmp_path / "out.bin"
    with pytest.raises(sigconv.OutputError, match="is a FIFO"):
        with sigconv.atomic_output(out) as tmp:
            tmp.write_bytes(b"data")
            _fifo(out)
    assert stat.S_ISFIFO(os.lstat(out).st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.bin"]


def test_a_broken_link_is_refused(tmp_path):
    out = tmp_path / "dangling"
    out.symlink_to(tmp_path / "missing.wav")
    with pytest.raises(sigconv.OutputError, match="symbolic link to a missing file"):
        with sigconv.atomic_output(out):
            pass
    assert out.is_symlink() and not (tmp_path / "missing.wav").exists()


def test_a_link_to_a_regular_file_is_written_through(tmp_path):
    target = tmp_path / "real.bin"
    target.write_bytes(b"old")
    link = tmp_path / "link.bin"
    link.symlink_to(target)
    with sigconv.atomic_output(link) as tmp:
        tmp.write_bytes(b"new")
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert target.read_bytes() == b"new"


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_denoise_with_force_refuses_a_device_or_fifo_output(tmp_path, rng, kind):
    """`denoise -o NODE --force` where NODE is a FIFO or a character device: exit 1, one line, the node kept."""
    src = write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal(48001))
    node = tmp_path / "node.wav"
    (_fifo if kind == "fifo" else _device)(node)
    before = os.lstat(node)
    r = run_cli("denoise", src, "-o", node, "--force", "--quiet", timeout=120)
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.splitlines()) == 1 and "not a regular file" in r.stderr and str(node) in r.stderr
    after = os.lstat(node)
    assert (after.st_mode, after.st_ino, after.st_rdev) == (before.st_mode, before.st_ino, before.st_rdev)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.wav", "node.wav"]


@pytest.mark.parametrize("method", ["fir", pytest.param("spectral", marks=pytest.mark.slow), "noise-from"])
def test_a_damaged_flac_fails_naming_the_file(tmp_path, rng, method):
    """A FLAC whose middle is overwritten makes the decoder give up mid-file: one line naming the file, where and
    libsndfile's words; exit 1; nothing written."""
    import soundfile as sf

    src = tmp_path / "rec.flac"
    sf.write(str(src), (0.3 * rng.standard_normal((48000 * 3, 2))).astype(np.float32), 48000, subtype="PCM_16")
    data = bytearray(src.read_bytes())
    mid = len(data) // 2
    data[mid:mid + 4096] = bytes(4096)
    src.write_bytes(bytes(data))
    extra = ("--method", "spectral", "--noise-from", "1", "2") if method == "noise-from" else ("--method", method)
    r = run_cli("denoise", src, "-o", tmp_path / "out.flac", *extra, "-q", timeout=120)
    assert r.returncode == 1, r.stderr
    line = r.stderr.strip()
    assert len(r.stderr.splitlines()) == 1 and line.startswith(f"sigconv: error: {src}: cannot decode its ")
    assert "past frame" in line and "the file is damaged" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rec.flac"]


@pytest.mark.parametrize("mode", ["--stationary", "--non-stationary"])
def test_a_huge_gate_threshold_saturates_without_a_warning(tmp_path, rng, mode):
    """--n-std 1e300 asks for a gate that never opens: the output is silence, exit 0, nothing on stderr (a float32
    threshold is the largest float, not an overflow warning)."""
    import soundfile as sf

    src = write_audio(tmp_path / "in.wav", 0.3 * rng.standard_normal(16000), fs=16000)
    out = tmp_path / "out.wav"
    r = run_cli("denoise", src, "-o", out, "--method", "spectral", "--n-std", "1e300", "-q", mode,
                env={"PYTHONWARNINGS": "error"})
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert np.abs(sf.read(str(out))[0]).max() == 0.0


@pytest.mark.parametrize("extra", [("--share-mask",), pytest.param(("--non-stationary",), marks=pytest.mark.slow)])
def test_a_float64_sample_near_the_limit_through_the_spectral_gate(tmp_path, rng, extra):
    """A DOUBLE recording holding -1e308 overflows the gate's power: one line, exit 1, nothing written (the
    statistics' histogram counts an overflowed cell as the loudest instead of failing on its NaN)."""
    import soundfile as sf

    x = 0.3 * rng.standard_normal(1974)
    x[700] = -1e308
    src = tmp_path / "in.aiff"
    sf.write(str(src), x, 8000, subtype="DOUBLE")
    r = run_cli("denoise", src, "-o", tmp_path / "out.aiff", "--method", "spectral", "--backend", "cpu", *extra,
                env={"PYTHONWARNINGS": "error"})
    assert r.returncode == 1, r.stderr
    assert len(r.stderr.splitlines()) == 1 and r.stderr.startswith(f"sigconv: error: {src}: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.aiff"]


def test_a_failing_denoise_prints_its_error_line_only(tmp_path, rng):
    """The note about the default filter comes with the summary of a run that worked: a run that fails prints its
    one error line and nothing else."""
    src = write_audio(tmp_path / "in.wav", 0.1 * rng.standard_normal(4801))
    r = run_cli("denoise", src, "-o", tmp_path / "out.wav")
    assert r.returncode == 1 and len(r.stderr.splitlines()) == 1 and "longer than the file" in r.stderr
    ok = write_audio(tmp_path / "ok.wav", 0.1 * rng.standard_normal(48000))
    r = run_cli("denoise", ok, "-o", tmp_path / "ok.out.wav")
    assert r.returncode == 0
    assert r.stderr.splitlines()[0].startswith("no filter option given") and "ok.wav ->" in r.stdout + r.stderr
