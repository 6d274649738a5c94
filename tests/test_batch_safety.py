"""What a batch may do to OUTDIR: it replaces no file it did not write (unless --force) and never anything but a
regular file; its manifest knows its outputs by size and mtime; SIGTERM and SIGHUP stop it as Ctrl-C does, leaving
no temporary file; it reports the workers it started; it records the columns a log had filtered."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, terminal_signals

import sigconv  # noqa: E402
from sigconv.cli import main  # noqa: E402
from sigconv.engine.batch import formats, gpu_service, runners  # noqa: E402
from sigconv.engine.batch.manifest import NAME as MANIFEST  # noqa: E402

CPU = ("--backend", "cpu")


def _logs(folder: Path, rng, names, rows: int = 1000) -> Path:
    """CSV logs at 100 Hz: a time column and two numeric channels, a and b."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        t = np.arange(rows) / 100.0
        with open(folder / name, "w") as f:
            f.write("time,a,b\n")
            np.savetxt(f, np.column_stack([t, rng.standard_normal((rows, 2))]), fmt="%.6f", delimiter=",")
    return folder


def _records(out: Path) -> dict:
    """The manifest's records by output name (every line must parse)."""
    lines = (out / MANIFEST).read_text().splitlines()
    return {Path(r["input"]).name: r for r in map(json.loads, lines)}


def _parts(out: Path) -> list:
    return sorted(str(p.relative_to(out)) for p in out.rglob("*.part"))


def _request(src, out, jobs=1, force=False):
    return sigconv.BatchRequest([src], out, sigconv.BatchSettings(kernel=sigconv.KernelChoice(backend="cpu")),
                                jobs=jobs, force=force)


# ------------------------------------------------------------------------------------ files it did not write


def test_a_file_the_batch_did_not_write_is_replaced_only_with_force(tmp_path, rng, capsys):
    """A file already at an output path, not the batch's (no manifest records it): that file fails with one line
    naming the output and --force, the file stays as it was, the other files run (exit 1); a rerun refuses it
    again and skips the rest; --force replaces it."""
    src = _logs(tmp_path / "in", rng, ["a.csv", "b.csv"])
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.csv").write_text("precious\n")
    args = ["batch", str(src), "-o", str(out), *CPU, "-j", "1"]
    assert main(args) == 1
    err = capsys.readouterr().err
    why = f"output {out / 'a.csv'} exists and was not written by sigconv batch; pass --force to replace it " \
          "(or remove it)"
    assert f"failed: a.csv: {why}\n" in err and "1 done, 0 skipped, 1 failed" in err, err
    assert (out / "a.csv").read_text() == "precious\n" and (out / "b.csv").read_text().startswith("time,a,b")
    recs = _records(out)
    assert recs["a.csv"]["status"] == "failed" and recs["a.csv"]["reason"] == why and recs["b.csv"]["status"] == "done"
    assert main(args) == 1
    assert "0 done, 1 skipped, 1 failed" in capsys.readouterr().err and (out / "a.csv").read_text() == "precious\n"
    assert main([*args, "--force"]) == 0
    assert "2 done, 0 skipped, 0 failed" in capsys.readouterr().err
    assert (out / "a.csv").read_text().startswith("time,a,b") and not _parts(out)


def test_a_file_that_appears_at_the_output_during_the_run_is_not_replaced(tmp_path, rng, monkeypatch):
    """The check holds at the rename too: while a.csv is being written, a file appears at its output path: a.csv
    fails, that file stays as it is, no temporary file is left, and the manifest does not count it as the
    batch's."""
    src = _logs(tmp_path / "in", rng, ["a.csv", "b.csv"])
    out = tmp_path / "out"
    real = formats.write_table

    def write_then_meddle(table, kind, tmp):
        real(table, kind, tmp)
        if Path(tmp).name.startswith(".a.csv."):
            (out / "a.csv").write_text("precious\n")

    monkeypatch.setattr(formats, "write_table", write_then_meddle)
    rep = sigconv.run_batch(_request(src, out))
    assert [rel for rel, _ in rep.failed] == ["a.csv"], rep.failed
    assert rep.failed[0][1] == (f"output {out / 'a.csv'} exists and was not written by sigconv batch; "
                                "pass --force to replace it (or remove it)")
    assert (out / "a.csv").read_text() == "precious\n" and not _parts(out) and rep.done == ["b.csv"]
    monkeypatch.setattr(formats, "write_table", real)
    assert [rel for rel, _ in sigconv.run_batch(_request(src, out)).failed] == ["a.csv"]  # still not the batch's


def test_a_folder_fifo_or_link_to_one_at_an_output_path_is_never_replaced(tmp_path, rng, capsys):
    """Not even with --force: a folder, a FIFO and a symbolic link to a FIFO at output paths each fail that file
    with the reason; they stay as they were; the other file runs."""
    import stat

    src = _logs(tmp_path / "in", rng, ["a.csv", "b.csv", "c.csv", "d.csv"])
    out = tmp_path / "out"
    (out / "a.csv").mkdir(parents=True)
    os.mkfifo(out / "b.csv")
    os.mkfifo(out / "fifo")
    (out / "c.csv").symlink_to(out / "fifo")
    assert main(["batch", str(src), "-o", str(out), *CPU, "-j", "1", "--force"]) == 1
    err = capsys.readouterr().err
    never = "not a regular file; sigconv replaces regular files only"
    assert f"failed: a.csv: {out / 'a.csv'}: is a folder, {never}" in err, err
    assert f"failed: b.csv: {out / 'b.csv'}: is a FIFO, {never}" in err, err
    assert f"failed: c.csv: {out / 'c.csv'}: is a FIFO (through a symbolic link), {never}" in err, err
    assert "1 done, 0 skipped, 3 failed" in err and "Traceback" not in err
    assert (out / "a.csv").is_dir() and stat.S_ISFIFO(os.stat(out / "b.csv").st_mode)
    assert (out / "c.csv").is_symlink() and stat.S_ISFIFO(os.stat(out / "c.csv").st_mode)
    assert (out / "d.csv").read_text().startswith("time,a,b")


# ------------------------------------------------------------------------------------ the manifest knows its outputs


def test_an_edited_output_is_redone_and_a_removed_one_too(tmp_path, rng):
    """The manifest records each output's size and mtime: a rerun skips only outputs still as written. An output
    edited since (same size, or not) is redone, the same bytes as the first run; so is a removed one; the unchanged
    one stays skipped."""
    src = _logs(tmp_path / "in", rng, ["a.csv", "b.csv", "c.csv"])
    out = tmp_path / "out"
    assert len(sigconv.run_batch(_request(src, out)).done) == 3
    for name, rec in _records(out).items():
        st = os.stat(out / name)
        assert (rec["output_size"], rec["output_mtime_ns"]) == (st.st_size, st.st_mtime_ns)
    first = {n: (out / n).read_bytes() for n in ("a.csv", "b.csv", "c.csv")}
    same_size = first["b.csv"].replace(b"time", b"TIME", 1)
    (out / "b.csv").write_bytes(same_size)
    st = os.stat(out / "b.csv")
    os.utime(out / "b.csv", ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000))  # a coarse clock: mtime moved
    (out / "c.csv").write_bytes(first["c.csv"] + b"0,0,0\n")
    rep = sigconv.run_batch(_request(src, out))
    assert rep.skipped == 1 and sorted(rep.done) == ["b.csv", "c.csv"] and not rep.failed
    assert {n: (out / n).read_bytes() for n in first} == first
    (out / "c.csv").unlink()
    rep = sigconv.run_batch(_request(src, out))
    assert rep.done == ["c.csv"] and rep.skipped == 2 and not rep.failed
    assert {n: (out / n).read_bytes() for n in first} == first


def test_a_manifest_without_output_sizes_redoes_its_files(tmp_path, rng):
    """Records of an older sigconv (no output_size, output_mtime_ns): every file is redone, an output modified since
    too (the record names it: it is the batch's own)."""
    src = _logs(tmp_path / "in", rng, ["a.csv", "b.csv"])
    out = tmp_path / "out"
    sigconv.run_batch(_request(src, out))
    old = [{k: v for k, v in r.items() if k not in ("output_size", "output_mtime_ns")} for r in _records(out).values()]
    (out / MANIFEST).write_text("".join(json.dumps(r) + "\n" for r in old))
    later = time.time_ns() + 60_000_000_000
    os.utime(out / "b.csv", ns=(later, later))
    rep = sigconv.run_batch(_request(src, out))
    assert sorted(rep.done) == ["a.csv", "b.csv"] and rep.skipped == 0 and not rep.failed
    assert "output_size" in _records(out)["a.csv"]


# ------------------------------------------------------------------------------------ SIGTERM, SIGHUP


@pytest.mark.parametrize("how", ["SIGTERM", "SIGHUP", "SIGTERM to the group"])
def test_sigterm_and_sighup_stop_a_batch_as_ctrl_c_does(tmp_path, rng, how):
    """A real batch (-j 2, files of a few hundred ms) gets SIGTERM, SIGHUP, or SIGTERM sent to its whole process
    group (as systemd does: the pool workers get it too): it exits 128 + the signal, one summary and no traceback,
    no temporary file anywhere under OUTDIR, every manifest line parses, and the outputs there are exactly those
    the manifest has as done."""
    src = _logs(tmp_path / "in", rng, ["c00.csv"], rows=40_000)
    for i in range(1, 8):
        shutil.copy(src / "c00.csv", src / f"c{i:02d}.csv")
    out = tmp_path / "out"
    sig = signal.SIGHUP if how == "SIGHUP" else signal.SIGTERM
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-m", "sigconv", "batch", str(src), "-o", str(out), *CPU, "-j", "2"],
                         env=env, stderr=subprocess.PIPE, text=True, start_new_session=True,
                         preexec_fn=terminal_signals)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not ((out / MANIFEST).exists() and _parts(out)):
            time.sleep(0.01)  # a file done and one in flight
        assert p.poll() is None, "finished before it could be stopped"
        if how.endswith("group"):
            os.killpg(p.pid, sig)
        else:
            p.send_signal(sig)
        err = p.communicate(timeout=60)[1]
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
    assert p.returncode == 128 + sig, err
    assert "Traceback" not in err and "batch: interrupted;" in err, err
    assert not _parts(out), _parts(out)
    done = {n for n, r in _records(out).items() if r["status"] == "done"}
    outputs = {q.name for q in out.iterdir() if q.suffix == ".csv"}
    assert outputs == done and len(done) < 8, (outputs, done)
    assert not any(q.name.startswith(".sigconv-batch") for q in out.iterdir())


def test_a_program_calling_run_batch_keeps_its_signal_handling(tmp_path, rng):
    """run_batch in a program of its own: SIGHUP ignored there (nohup) is ignored by the batch too; SIGTERM, left to
    its default action, still ends the program (-SIGTERM), but only after the batch cleaned up: no temporary file,
    no lock, the outputs exactly those the manifest has as done."""
    files = 64
    src = _logs(tmp_path / "in", rng, ["c00.csv"], rows=40_000)
    for i in range(1, files):
        shutil.copy(src / "c00.csv", src / f"c{i:02d}.csv")
    out = tmp_path / "out"
    code = ("import signal, sys, sigconv\n"
            "signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
            "s = sigconv.BatchSettings(kernel=sigconv.KernelChoice(backend='cpu'))\n"
            "rep = sigconv.run_batch(sigconv.BatchRequest([sys.argv[1]], sys.argv[2], s, jobs=2))\n"
            "print('returned', len(rep.done))\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    p = subprocess.Popen([sys.executable, "-c", code, str(src), str(out)], env=env, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 120
        while time.time() < deadline and not (out / MANIFEST).exists():
            time.sleep(0.005)
        p.send_signal(signal.SIGHUP)
        time.sleep(0.2)
        assert p.poll() is None, "SIGHUP stopped it, or it finished before SIGTERM came"
        while time.time() < deadline and not _parts(out) and p.poll() is None:
            time.sleep(0.002)
        p.send_signal(signal.SIGTERM)
        stdout, err = p.communicate(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode == -signal.SIGTERM and "returned" not in stdout and "Traceback" not in err, err
    assert not _parts(out), _parts(out)
    done = {n for n, r in _records(out).items() if r["status"] == "done"}
    assert {q.name for q in out.iterdir() if q.suffix == ".csv"} == done and len(done) < files
    assert not any(q.name.startswith(".sigconv-batch") for q in out.iterdir())


def test_the_gpu_process_outlives_a_group_sigterm_and_still_closes(monkeypatch):
    """The GPU's process writes nothing and is the coordinator's to end: SIGTERM sent to the whole group leaves it
    running (no traceback from it), and close() ends it."""
    import multiprocessing as mp

    monkeypatch.setenv("SIGCONV_DISABLE_CUDA", "1")
    service = gpu_service.GPUService.start(mp.get_context("fork"))
    service.status(timeout=30)
    os.kill(service._proc.pid, signal.SIGTERM)
    os.kill(service._proc.pid, signal.SIGHUP)
    time.sleep(0.2)
    assert service._proc.is_alive()
    service.close(timeout=5)
    assert not service._proc.is_alive()


# ------------------------------------------------------------------------------------ what the report says


def test_jobs_beyond_the_files_start_one_worker_per_file(tmp_path, rng, monkeypatch, capsys):
    """-j 1000 with two files starts two worker processes, and the summary says two."""
    src = _logs(tmp_path / "in", rng, ["a.csv", "b.csv"])
    started = []
    real = runners.run_pool
    monkeypatch.setattr(runners, "run_pool", lambda tasks, jobs, *a, **k: started.append(jobs) or real(tasks, jobs,
                                                                                                       *a, **k))
    assert main(["batch", str(src), "-o", str(tmp_path / "out"), *CPU, "-j", "1000"]) == 0
    err = capsys.readouterr().err
    assert started == [2] and "2 done, 0 skipped, 0 failed" in err and "; 2 worker processes)" in err, err
    assert "1000 worker" not in err


def test_the_manifest_records_the_columns_filtered(tmp_path, rng):
    """A CSV log with two numeric channels beside its time column: the manifest's record names both."""
    src = _logs(tmp_path / "in", rng, ["a.csv"])
    rep = sigconv.run_batch(_request(src, tmp_path / "out"))
    assert rep.done == ["a.csv"]
    assert _records(tmp_path / "out")["a.csv"]["columns"] == ["a", "b"]
