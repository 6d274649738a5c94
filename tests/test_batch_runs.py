"""How a batch runs its files: stopping it (Ctrl-C) tells the truth, the GPU runner (threads of one process sharing
one GPU) gives the outputs of the other runners, and OUTDIR keeps nothing of sigconv's but outputs and manifest."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, terminal_signals

import sigconv  # noqa: E402
from sigconv.engine.batch import cancel, coordinator, filters, process, runners  # noqa: E402
from sigconv.engine.batch.manifest import NAME as MANIFEST  # noqa: E402

SHIMS = Path(__file__).with_name("shims")
CPU = ("--backend", "cpu")


def _logs(folder: Path, rng, n: int, rows: int = 2000) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        t = np.arange(rows) / 100.0
        x = rng.standard_normal((rows, 2))
        with open(folder / f"c{i:02d}.csv", "w") as f:
            f.write("time,a,b\n")
            np.savetxt(f, np.column_stack([t, x]), fmt="%.6f", delimiter=",")
    return folder


def _records(out: Path) -> list:
    man = out / MANIFEST
    return [json.loads(x) for x in man.read_text().splitlines()] if man.exists() else []


def _outputs(out: Path) -> set:
    return {p.name for p in out.iterdir() if p.is_file() and p.name.endswith(".csv") and not p.name.startswith(".")}


def _leftovers(out: Path) -> list:
    """sigconv's own files that must not outlive a batch: temporary outputs and the lock."""
    return [p.name for p in out.rglob(".*") if p.name.endswith(".part") or p.name.startswith(".sigconv-batch")]


# ------------------------------------------------------------------------------------ Ctrl-C


@pytest.mark.parametrize("how", [["-j", "2"], ["-j", "1"], ["--scheduler", "local", "-j", "2"]],
                         ids=["pool", "serial", "dask"])
def test_ctrl_c_stops_at_once_and_the_manifest_and_summary_tell_the_truth(tmp_path, rng, how):
    """Ctrl-C while a file is in flight (c03.csv waits 30 s before its output is moved into place): the batch
    starts nothing more and exits within 2 s with 130; every output in OUTDIR is complete and recorded as done,
    every file recorded as done has its output, the summary counts the same files; nothing temporary is left,
    nor the lock. The rerun finishes the rest."""
    if how[0] == "--scheduler":
        pytest.importorskip("distributed")
    src = _logs(tmp_path / "in", rng, 16)
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(SHIMS), str(ROOT), os.environ.get("PYTHONPATH", "")]),
               SIGCONV_TEST_AT_REPLACE="sleep:c03.csv:30")
    p = subprocess.Popen([sys.executable, "-m", "sigconv", "batch", str(src), "-o", str(out), *CPU, "--taps", "51",
                          *how], env=env, stderr=subprocess.PIPE, text=True, preexec_fn=terminal_signals)
    deadline = time.time() + 120
    while time.time() < deadline and len(_records(out)) < 3:
        time.sleep(0.05)
    assert len(_records(out)) >= 3, "the batch did not start"
    t0 = time.monotonic()
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    took = time.monotonic() - t0
    print(f"{how}: exit {p.returncode} {took:.2f} s after Ctrl-C")
    assert p.returncode == 130, err
    assert took < 2.0, f"took {took:.2f} s to stop"
    assert "Traceback" not in err and "interrupted" in err, err
    done = {Path(r["output"]).name for r in _records(out) if r["status"] == "done"}
    assert _outputs(out) == done and "c03.csv" not in done, (sorted(_outputs(out)), sorted(done))
    assert f"interrupted; {len(done)} done," in err and f"the {len(done)} finished file(s)" in err, err
    assert len(done) < 16
    assert not _leftovers(out), _leftovers(out)
    r = subprocess.run([sys.executable, "-m", "sigconv", "batch", str(src), "-o", str(out), *CPU, "--taps", "51",
                        "-j", "2"], env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
    assert f"{16 - len(done)} done, {len(done)} skipped, 0 failed" in r.stderr
    assert _outputs(out) == {f"c{i:02d}.csv" for i in range(16)} and not _leftovers(out)


def test_ctrl_c_during_a_csv_read_reaches_the_batch_not_pyarrow(tmp_path, rng, monkeypatch):
    """A SIGINT that arrives while pyarrow reads a CSV in the main thread (the serial runner) goes to the Python
    handler (the batch's), and the read finishes: pyarrow's own handler would fail the file as unreadable
    ("Operation cancelled") and could swallow the signal, so that the batch ran on to the end."""
    import threading

    import pyarrow.csv as pcsv

    from sigconv.engine.batch import logs

    path = tmp_path / "big.csv"
    with open(path, "w") as f:
        f.write("a,b,c,d\n")
        np.savetxt(f, rng.standard_normal((400_000, 4)), fmt="%.6f", delimiter=",")
    hits = []
    real = pcsv.read_csv

    took = []

    def read_while_ctrl_c(*args, **kwargs):
        threading.Timer(0.005, os.kill, (os.getpid(), signal.SIGINT)).start()
        t0 = time.perf_counter()
        table = real(*args, **kwargs)
        took.append(time.perf_counter() - t0)
        print(f"read in {took[0]:.3f} s; SIGINT sent 0.005 s after it began")
        return table

    monkeypatch.setattr(pcsv, "read_csv", read_while_ctrl_c)
    before = signal.signal(signal.SIGINT, lambda signum, frame: hits.append(signum))
    try:
        table, _ = logs.read_table(path, "csv", None)
        deadline = time.monotonic() + 5
        while not hits and time.monotonic() < deadline:
            time.sleep(0.01)
    finally:
        signal.signal(signal.SIGINT, before)
    assert took[0] > 0.005, "the read ended before the signal: nothing was checked"
    assert table.num_rows == 400_000
    assert hits == [signal.SIGINT]


def test_lock_is_removed_after_a_run_and_still_excludes_a_second_batch(tmp_path, rng):
    src = _logs(tmp_path / "in", rng, 2, rows=800)
    out = tmp_path / "out"
    request = sigconv.BatchRequest([src], out, sigconv.BatchSettings(kernel=sigconv.KernelChoice(backend="cpu")),
                                   jobs=1)
    rep = sigconv.run_batch(request)
    assert len(rep.done) == 2 and not _leftovers(out)
    held = coordinator._Lock(out)
    try:
        with pytest.raises(ValueError, match="another 'sigconv batch' is writing into this folder"):
            sigconv.run_batch(request)
    finally:
        held.close()
    assert not _leftovers(out)
    assert sigconv.run_batch(request).skipped == 2


# ------------------------------------------------------------------------------------ the GPU runner, on the CPU


@pytest.fixture
def forked(monkeypatch):
    """Pool workers and the GPU's process forked from this process whatever threads it runs, so that they share
    this test's patches."""
    import multiprocessing as mp

    monkeypatch.setattr(runners, "_pool_context", lambda served=False: mp.get_context("fork"))
    monkeypatch.setattr(runners, "_can_fork", lambda: True)


@pytest.fixture
def as_if_one_gpu(monkeypatch, forked):
    """The coordinator believes one GPU filters here: with backend "auto" it takes the GPU runner for files of any
    size (logs: a worker pool and the GPU's process; recordings: threads). CUDA does not start in the GPU's process,
    so "auto" files filter on the cpu backend and the scheduling can be checked on any machine."""
    monkeypatch.setattr(coordinator, "_on_gpu", lambda request, n_gpus: True)
    monkeypatch.setattr(runners, "visible_gpu_count", lambda *a, **k: 1)
    monkeypatch.setattr(coordinator, "_auto_on_gpu", lambda todo: True)  # "auto" takes the GPU for files of any size
    monkeypatch.setenv("SIGCONV_DISABLE_CUDA", "1")  # read where CUDA would start, never by the patched counts


def _significant_digits(text: str) -> int:
    mantissa = text.strip().lstrip("-").split("e")[0].split("E")[0].replace(".", "").lstrip("0")
    return len(mantissa.rstrip("0")) if mantissa else 0


def test_a_channel_computed_in_float32_is_written_as_float32_in_csv_only():
    import pyarrow as pa

    from sigconv.engine.batch.formats import channel_type

    assert channel_type(pa.float64(), "csv", np.float32) == pa.float32()
    assert channel_type(pa.int64(), "csv", np.float32) == pa.float32()
    assert channel_type(pa.float64(), "parquet", np.float32) == pa.float64()  # a Parquet schema does not change
    assert channel_type(pa.float64(), "csv", np.float64) == pa.float64()
    assert channel_type(pa.float32(), "parquet", np.float64) == pa.float32()


def _request(src, out, jobs, backend="cpu"):
    return sigconv.BatchRequest([src], out, sigconv.BatchSettings(kernel=sigconv.KernelChoice(backend=backend)),
                                jobs=jobs)


def test_gpu_runner_gives_the_serial_outputs(tmp_path, rng, as_if_one_gpu, monkeypatch):
    src = _logs(tmp_path / "in", rng, 9, rows=1500)
    ref = sigconv.run_batch(_request(src, tmp_path / "ref", 1))
    assert ref.where == "in this process"
    calls = []
    real = runners.run_gpu
    monkeypatch.setattr(runners, "run_gpu",
                        lambda served, rest, jobs, **kw: calls.append(jobs) or real(served, rest, jobs, **kw))
    rep = sigconv.run_batch(_request(src, tmp_path / "thr", 3, backend="auto"))
    assert calls == [3] and rep.where == "3 worker processes and 1 GPU process"
    assert sorted(rep.done) == sorted(ref.done) and len(rep.done) == 9 and not rep.failed
    for name in ref.done:
        assert (tmp_path / "thr" / name).read_bytes() == (tmp_path / "ref" / name).read_bytes(), name
    assert not _leftovers(tmp_path / "thr")


@pytest.mark.parametrize("through", ["shared memory", "the socket"])
def test_the_gpu_process_filters_every_log_and_the_workers_write_the_cpu_outputs(tmp_path, rng, numpy_gpu, forked,
                                                                              monkeypatch, through):
    """Logs on the GPU runner: the workers parse and write, the GPU's process filters each log once (NumPy standing
    in for CuPy there), the samples going through shared memory (one log needs a larger arena than the first) or,
    without memfds, the socket; the outputs are the cpu run's within float32 rounding and the manifest says cuda."""
    from sigconv._core import devices
    from sigconv.engine.batch import gpu_service

    if through == "the socket":
        monkeypatch.delattr(os, "memfd_create", raising=False)
    elif not hasattr(os, "memfd_create"):
        pytest.skip("no memfd_create here")
    src = _logs(tmp_path / "in", rng, 7, rows=1500)
    _logs(tmp_path / "big", rng, 1, rows=150_000)  # 1.2 MB of float32 samples: past the first 1 MB arena
    (tmp_path / "big" / "c00.csv").rename(src / "c99.csv")
    ref = sigconv.run_batch(_request(src, tmp_path / "ref", 1))
    monkeypatch.setattr(coordinator, "_on_gpu", lambda request, n_gpus: True)
    monkeypatch.setattr(runners, "visible_gpu_count", lambda *a, **k: 1)
    monkeypatch.setattr(devices, "cuda_reason", lambda: None)
    served = []
    real_close = gpu_service.GPUService.close
    monkeypatch.setattr(gpu_service.GPUService, "close", lambda self, *a: served.append(real_close(self, *a))
                        or served[-1])
    rep = sigconv.run_batch(_request(src, tmp_path / "out", 3, backend="cuda"))
    assert rep.where == "3 worker processes and 1 GPU process" and len(rep.done) == 8 and not rep.failed, rep.failed
    assert served == [8]
    assert {r["backend"] for r in _records(tmp_path / "out")} == {"cuda"}
    for name in ref.done:
        a = np.loadtxt(tmp_path / "ref" / name, delimiter=",", skiprows=1)
        b = np.loadtxt(tmp_path / "out" / name, delimiter=",", skiprows=1)
        assert np.abs(a - b).max() <= 1e-5 * np.abs(a).max(), name
        assert np.array_equal(a[:, 0], b[:, 0])  # the time column passes through
        # filtered in float32: written as float32 (the shortest text of the computed value); the cpu run's float64
        digits = [_significant_digits(v) for line in (tmp_path / "out" / name).read_text().splitlines()[1:200]
                  for v in line.split(",")[1:]]
        ref_digits = [_significant_digits(v) for line in (tmp_path / "ref" / name).read_text().splitlines()[1:200]
                      for v in line.split(",")[1:]]
        assert max(digits) <= 9 and max(ref_digits) >= 16, (max(digits), max(ref_digits))
    assert not _leftovers(tmp_path / "out")


def test_the_gpu_process_outlives_a_worker_whose_samples_are_still_referenced(rng, numpy_gpu, monkeypatch, capfd):
    """A worker ends (its connection closes) while something in the GPU's process still holds a view of its shared
    samples (CuPy may, for the copy of its last request): the process cannot unmap them yet. It goes on serving the
    other workers, with no traceback, and frees them with the view."""
    import multiprocessing as mp

    from sigconv._core import devices
    from sigconv.engine import gpu_file
    from sigconv.engine.batch import gpu_service

    if not hasattr(os, "memfd_create"):
        pytest.skip("no memfd_create here")
    monkeypatch.setattr(devices, "cuda_reason", lambda: None)
    kept = []
    real = gpu_file.correlate_span

    def holding(xh, *a, **k):
        kept.append(xh)  # a view of the worker's arena, alive after the answer
        return real(xh, *a, **k)

    monkeypatch.setattr(gpu_file, "correlate_span", holding)
    service = gpu_service.GPUService.start(mp.get_context("fork"))
    try:
        assert service.status(timeout=60) is None
        taps = rng.standard_normal(31)
        x = rng.standard_normal((500, 2))
        first = gpu_service._Client(service.address, service.authkey)
        want = first.filter_span(x, taps, 400, offset=40, delay=15)
        first._drop()  # the worker ends
        second = gpu_service._Client(service.address, service.authkey)
        got = second.filter_span(x, taps, 400, offset=40, delay=15)
        assert np.array_equal(got, want)
        second._drop()
    finally:
        served = service.close(timeout=10)
        service._proc.join(10)
    assert served == 2 and service._proc.exitcode == 0
    assert "Traceback" not in capfd.readouterr().err


def test_tables_that_stream_run_where_the_gpu_is_never_in_a_served_worker(tmp_path, rng, as_if_one_gpu, monkeypatch):
    """A table the streamed path takes (by size, or by its cells: a CSV of 8 MB or more) keeps a block filter's
    state, so it runs in the threads of the process that holds the GPU; a pool worker served by the GPU's process
    would make a CUDA context of its own for it. Only tables read whole go to the pool."""
    from sigconv.engine.batch import gpu_service, stream

    src = _logs(tmp_path / "in", rng, 3, rows=1000)  # about 30 KB
    _logs(tmp_path / "in" / "big", rng, 2, rows=4000)  # about 120 KB: streamed once the cell rule is lowered
    monkeypatch.setattr(stream, "STREAM_MIN_CELLS", 40_000)
    seen = []
    real = process.process_task

    def spy(task):
        r = real(task)
        return r | {"streamed_here": bool(r.get("streamed")), "gpu_worker": gpu_service.client() is not None}

    monkeypatch.setattr(runners, "process_task", spy)
    real_record = coordinator.Manifest.append

    def record(self, t, r):
        seen.append((Path(t["input"]).parent.name, r.get("streamed_here"), r.get("gpu_worker")))
        return real_record(self, t, r)

    monkeypatch.setattr(coordinator.Manifest, "append", record)
    rep = sigconv.run_batch(sigconv.BatchRequest([src], tmp_path / "out", sigconv.BatchSettings(
        kernel=sigconv.KernelChoice(backend="auto")), jobs=2, recursive=True))
    assert len(rep.done) == 5 and not rep.failed, rep.failed
    assert rep.where == "2 worker processes and 1 GPU process then 2 threads sharing 1 GPU", rep.where
    assert sorted(seen) == [("big", True, False)] * 2 + [("in", False, True)] * 3, seen
    assert gpu_service.served({"kind": "npy"}, False) and not gpu_service.served({"kind": "audio"}, False)
    assert gpu_service.served({"kind": "csv"}, False) and not gpu_service.served({"kind": "csv"}, True)


def test_gpu_runner_stops_in_flight_files_and_starts_no_more(tmp_path, rng, as_if_one_gpu):
    """A stop while logs run on the GPU runner: no further file starts, each file in flight either finishes (its
    output complete and recorded) or leaves nothing, the report says how many stopped, and the GPU's process ends."""
    from sigconv.engine.batch import gpu_service

    src = _logs(tmp_path / "in", rng, 40, rows=1500)
    out = tmp_path / "out"
    seen = []

    def stop_on_third(progress):
        seen.append(progress.rel)
        if len(seen) == 3:
            cancel.STOP.set()  # what Ctrl-C does in the coordinator

    procs = []
    real_start = gpu_service.GPUService.start.__func__
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(gpu_service.GPUService, "start", classmethod(
            lambda cls, ctx: procs.append(real_start(cls, ctx)) or procs[-1]))
        rep = sigconv.run_batch(_request(src, out, 3, backend="auto"), on_result=stop_on_third)
    assert rep.where == "3 worker processes and 1 GPU process"
    assert rep.interrupted and not cancel.STOP.is_set()  # the flag is the batch's, cleared when it ends
    done = {Path(r["output"]).name for r in _records(out) if r["status"] == "done"}
    assert _outputs(out) == done == set(rep.done)
    assert 3 <= len(done) < 40 and len(seen) <= 3 + 2 * 3
    assert not rep.failed and not _leftovers(out)
    procs[0]._proc.join(5)
    assert len(procs) == 1 and not procs[0]._proc.is_alive()


@pytest.mark.gpu
def test_cuda_batch_of_logs_runs_in_a_pool_with_one_gpu_process_and_matches_cpu(tmp_path, rng):
    src = _logs(tmp_path / "in", rng, 6, rows=3000)
    cpu = sigconv.run_batch(_request(src, tmp_path / "cpu", 1))
    gpu = sigconv.run_batch(_request(src, tmp_path / "gpu", 3, backend="cuda"))
    assert gpu.where == "3 worker processes and 1 GPU process" and len(gpu.done) == 6 and not gpu.failed
    recs = _records(tmp_path / "gpu")
    assert {r.get("backend") for r in recs} == {"cuda"} and {r.get("gpu") for r in recs} == {"0"}, recs
    import pyarrow.csv as pcsv

    for name in cpu.done:
        a = pcsv.read_csv(tmp_path / "cpu" / name).to_pandas().to_numpy()
        b = pcsv.read_csv(tmp_path / "gpu" / name).to_pandas().to_numpy()
        assert np.abs(a - b).max() <= 1e-5 * np.abs(a).max(), name


@pytest.mark.parametrize("disabled", [False, True])
def test_the_driver_starts_in_one_thread_and_never_fails(disabled):
    """The GPU process starts the CUDA driver in a thread while CuPy imports: one thread however often it is
    asked, none when CUDA is disabled, and it ends quietly where there is no driver (this machine, in CI)."""
    import subprocess

    code = ("import threading, time\n"
            "from sigconv._core import devices\n"
            "devices.start_driver(); first = devices._DRIVER_THREAD\n"
            "devices.start_driver()\n"
            "ts = [first] if first is not None else []\n"
            "print(len(ts), devices._DRIVER_THREAD is first and all(t.daemon for t in ts))\n"
            "[t.join(60) for t in ts]\n"
            "print(sum(t.is_alive() for t in ts))\n")
    env = dict(os.environ, SIGCONV_DISABLE_CUDA="1" if disabled else "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert out.stdout.split() == (["0", "True", "0"] if disabled else ["1", "True", "0"])


@pytest.mark.parametrize("findable", [True, False])
def test_asking_for_cuda_starts_the_driver_before_cupy_imports(monkeypatch, findable):
    """Whoever asks whether CUDA can run is about to use it: the driver's start comes first, so that it overlaps
    CuPy's import; where CuPy cannot be found, nothing is started."""
    from sigconv._core import devices

    calls = []
    monkeypatch.setattr(devices, "cuda_quick_reason", lambda: None if findable else "CuPy is not installed")
    monkeypatch.setattr(devices, "start_driver", lambda: calls.append("driver"))
    monkeypatch.setattr(devices, "_cupy_reason", lambda: calls.append("import cupy") or "no CuPy in this test")
    devices.cuda_reason.cache_clear()
    try:
        assert devices.cuda_reason() == "no CuPy in this test"
    finally:
        devices.cuda_reason.cache_clear()
    assert calls == (["driver", "import cupy"] if findable else ["import cupy"])


@pytest.mark.gpu
def test_warm_up_loads_the_direct_modules_and_spans_stay_right(rng):
    """The GPU process's warm-up loads the direct 1-D kernels' modules before the first log; a span filtered after
    it (fresh taps, the same variants) equals the float64 correlation."""
    from sigconv import _kernels
    from sigconv.backends import cuda1d
    from sigconv.engine import gpu_file

    gpu_file.warm_up()
    loaded = {(k[1], k[3]) for k in _kernels._MODULES}
    assert (cuda1d.SOURCE, ()) in loaded and (cuda1d.SOURCE, cuda1d._RT_EXPRS) in loaded
    x = rng.standard_normal((2, 5003)).astype(np.float32)
    w = rng.standard_normal(301).astype(np.float32)
    n = 4500
    want = np.stack([np.correlate(np.concatenate([np.zeros(7), c.astype(np.float64)]), w.astype(np.float64),
                                  "valid")[:n] for c in x])
    for variant in ("auto", "tiled", "shared"):
        y = gpu_file.correlate_span(x, w, 7, n, variant=variant)
        assert y.shape == (2, n) and np.abs(y - want).max() <= 1e-4 * np.abs(want).max(), variant


@pytest.mark.gpu
def test_cuda_batch_of_recordings_in_threads_matches_cpu(tmp_path, rng):
    """Recordings share the GPU from several threads at once (each its own block filter): the outputs match the
    cpu run within one LSB of 16-bit audio."""
    import soundfile as sf

    src = tmp_path / "in"
    src.mkdir()
    for i in range(6):
        sf.write(src / f"r{i}.wav", 0.3 * rng.standard_normal((48000 + 17 * i, 1 + i % 2)), 16000, subtype="PCM_16")
    cpu = sigconv.run_batch(_request(src, tmp_path / "cpu", 1))
    gpu = sigconv.run_batch(_request(src, tmp_path / "gpu", 3, backend="cuda"))
    assert gpu.where == "3 threads sharing 1 GPU" and len(gpu.done) == 6 and not gpu.failed, gpu.failed
    for name in cpu.done:
        a, _ = sf.read(tmp_path / "cpu" / name, dtype="int16")
        b, _ = sf.read(tmp_path / "gpu" / name, dtype="int16")
        assert a.shape == b.shape and np.abs(a.astype(int) - b.astype(int)).max() <= 1, name


# ------------------------------------------------------------------------------------ a whole run on the GPU, on the CPU


@pytest.fixture
def numpy_gpu(monkeypatch):
    """The GPU's whole-run path (``gpu_file.filter_span``) with NumPy standing in for CuPy and the cuda kernel
    replaced by the correlation contract it implements, y[c, i] = sum_j w[j] x[c, i + j - pad]: the index
    arithmetic (extension, delay, offset, padding) is checked without a GPU."""
    import types

    from sigconv.backends import cuda1d
    from sigconv.engine import gpu_file

    fake = types.SimpleNamespace(asarray=np.asarray, asnumpy=np.asarray, ascontiguousarray=np.ascontiguousarray,
                                 empty=np.empty, float32=np.float32,
                                 cuda=types.SimpleNamespace(Device=lambda *a: types.SimpleNamespace(use=lambda: None)))
    monkeypatch.setitem(sys.modules, "cupy", fake)
    calls = []

    def corr1d(x, w, pad, out_len, *, variant, block, taps_key=None):
        calls.append((variant, x.shape, pad, out_len))
        K = w.size
        y = np.empty((x.shape[0], out_len), x.dtype)
        for c in range(x.shape[0]):
            xp = np.concatenate([np.zeros(pad), x[c].astype(np.float64), np.zeros(K + out_len)])
            y[c] = np.correlate(xp, w.astype(np.float64), "valid")[:out_len]
        return y

    monkeypatch.setattr(cuda1d, "corr1d", corr1d)
    monkeypatch.setattr(cuda1d, "resolve_auto", lambda x, w, pad, n, block, taps_key=None: ("direct", block))
    gpu_file._W.clear()
    yield calls
    gpu_file._W.clear()


@pytest.mark.parametrize("edges", ["odd", "zero"])
@pytest.mark.parametrize("phase", ["zero", "linear"])
@pytest.mark.parametrize("n", [1, 7, 60, 1000])
def test_whole_run_on_the_gpu_equals_the_block_filter(numpy_gpu, monkeypatch, rng, edges, phase, n):
    """Runs shorter than, about and longer than the filter, both phases, both edge rules: the one-piece GPU path
    gives the block filter's outputs (float32 on the device: within 1e-6 of the signal's scale)."""
    from types import SimpleNamespace

    K = 61 if phase == "zero" else 40
    taps = rng.standard_normal(K) / K
    x = rng.standard_normal((n, 2)) + 5.0  # an offset, as in a temperature log
    s = sigconv.BatchSettings(fir=sigconv.FirSpec(phase=phase), edges=edges,
                              kernel=sigconv.KernelChoice(backend="cpu"))
    want = np.empty_like(x)
    filters.filter_run(taps, x, want, s)  # the cpu block filter
    assert not numpy_gpu
    monkeypatch.setattr(filters, "kernel_here", lambda k: SimpleNamespace(backend="cuda", variant="auto", block=None))
    got = np.full_like(x, np.nan)
    filters.filter_run(taps, x, got, s)
    assert len(numpy_gpu) == 1 and numpy_gpu[0][3] == n  # one kernel, the run's outputs only
    assert np.abs(got - want).max() <= 1e-6 * np.abs(x).max(), np.abs(got - want).max()
    monkeypatch.setattr(filters, "GPU_WHOLE_RUN_SAMPLES", n * 2 - 1)  # too large: the block filter (cpu here)
    monkeypatch.setattr(filters, "block_filter", lambda t, c, st, k=None: __import__("sigconv.engine.file", fromlist=["f"])
                        .CPUFileFilter(t, c, __import__("sigconv.engine.audio", fromlist=["a"]).pcm_spec("DOUBLE"),
                                       phase=phase))
    again = np.empty_like(x)
    filters.filter_run(taps, x, again, s)
    assert len(numpy_gpu) == 1 and np.array_equal(again, want)


@pytest.mark.parametrize("edges", ["odd", "zero"])
@pytest.mark.parametrize("phase", ["zero", "linear"])
@pytest.mark.parametrize("n,piece", [(1, 1), (60, 7), (1000, 61), (1000, 999), (200, 200)])
def test_a_run_sent_to_the_gpu_process_in_pieces_equals_the_block_filter(numpy_gpu, monkeypatch, rng, edges, phase,
                                                                        n, piece):
    """A pool worker sends its runs to the GPU's process in pieces of at most GPU_WHOLE_RUN_SAMPLES samples (pieces
    shorter and longer than the filter, a last piece of one row): the block filter's outputs, one request a piece."""
    from types import SimpleNamespace

    from sigconv.engine import gpu_file
    from sigconv.engine.batch import gpu_service

    K = 61 if phase == "zero" else 40
    taps = rng.standard_normal(K) / K
    x = rng.standard_normal((n, 2)) + 5.0
    s = sigconv.BatchSettings(fir=sigconv.FirSpec(phase=phase), edges=edges,
                              kernel=sigconv.KernelChoice(backend="cpu"))
    want = np.empty_like(x)
    filters.filter_run(taps, x, want, s)
    remote = SimpleNamespace(unavailable=None, filter_span=gpu_file.filter_span)
    monkeypatch.setattr(gpu_service, "client", lambda: remote)
    monkeypatch.setattr(filters, "GPU_WHOLE_RUN_SAMPLES", piece * 2)
    s_gpu = sigconv.BatchSettings(fir=sigconv.FirSpec(phase=phase), edges=edges,
                                  kernel=sigconv.KernelChoice(backend="cuda"))
    got = np.full_like(x, np.nan)
    filters.filter_run(taps, x, got, s_gpu)
    assert [c[3] for c in numpy_gpu] == [min(piece, n - o) for o in range(0, n, piece)]
    assert np.abs(got - want).max() <= 1e-6 * np.abs(x).max(), np.abs(got - want).max()


def test_a_worker_falls_back_to_the_cpu_on_auto_when_cuda_did_not_start(monkeypatch, rng):
    """The GPU's process answered that CUDA cannot run: on "auto" the worker filters on the CPU (and says so), on
    "cuda" the file fails with the reason."""
    from sigconv._core.errors import InputError
    from sigconv.engine.batch import gpu_service

    class Remote:
        unavailable = None

        def filter_span(self, *a, **k):
            self.unavailable = "no usable CUDA GPU (driver too old)"
            raise gpu_service.Unavailable(self.unavailable)

    remote = Remote()
    monkeypatch.setattr(gpu_service, "client", lambda: remote)
    taps = rng.standard_normal(21) / 21
    x = rng.standard_normal((300, 2))
    want = np.empty_like(x)
    filters.filter_run(taps, x, want, sigconv.BatchSettings(kernel=sigconv.KernelChoice(backend="cpu")))
    auto = sigconv.BatchSettings(kernel=sigconv.KernelChoice(backend="auto"))
    assert filters.kernel_here(auto.kernel).backend == "cuda"  # served: no CUDA in the worker
    got = np.empty_like(x)
    filters.filter_run(taps, x, got, auto)
    assert np.array_equal(got, want) and filters.kernel_here(auto.kernel).backend == "cpu"
    with pytest.raises(InputError, match=r"^backend 'cuda' is not usable here: no usable CUDA GPU"):
        filters.filter_run(taps, x, got, sigconv.BatchSettings(kernel=sigconv.KernelChoice(backend="cuda")))


def test_files_of_other_suffixes_in_a_folder_are_noted_in_the_summary(tmp_path, rng):
    src = _logs(tmp_path / "in", rng, 2, rows=800)
    (src / "README.txt").write_text("notes\n")
    (src / "plot.png").write_bytes(b"\x89PNG")
    r = subprocess.run([sys.executable, "-m", "sigconv", "batch", str(src), "-o", str(tmp_path / "out"), *CPU,
                        "-j", "1"], env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    notes = [line for line in r.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "2" in notes[0] and ".txt" in notes[0] and ".png" in notes[0], r.stderr
    assert "2 done, 0 skipped, 0 failed" in r.stderr


def test_allow_truncated_redoes_recordings_only():
    from sigconv.engine.batch.manifest import settings_hash

    plain = sigconv.BatchSettings().manifest_dict()
    lenient = sigconv.BatchSettings(allow_truncated=True).manifest_dict()
    for kind in ("csv", "parquet", "npy"):
        assert settings_hash(plain, kind) == settings_hash(lenient, kind)
    assert settings_hash(plain, "audio") != settings_hash(lenient, "audio")


def test_the_gpu_process_starts_from_a_forkserver_where_forking_is_unsound(monkeypatch):
    """Forking is sound only from a process that runs no other thread and has not started CUDA; else the GPU's
    process comes from a forkserver, and still answers (here: why CUDA cannot run, or that it runs)."""
    import threading

    from sigconv.engine.batch import gpu_service

    if "cupy" not in sys.modules:  # (where CuPy was imported, that alone makes forking unsound)
        monkeypatch.setitem(sys.modules, "cupy", object())
        assert not runners._can_fork()
        monkeypatch.delitem(sys.modules, "cupy")
    release = threading.Event()
    other = threading.Thread(target=release.wait)
    other.start()
    try:
        assert not runners._can_fork()
        svc = runners.start_gpu_process()
        status = svc.status(timeout=60)
        assert status is None or (isinstance(status, str) and status), status
        assert status is not gpu_service._UNKNOWN
        assert svc.close() == 0 and not svc._proc.is_alive()
    finally:
        release.set()
        other.join()


def test_cuda_that_fails_to_start_stops_the_batch_with_one_line_and_no_output(tmp_path, rng, monkeypatch, forked):
    """CuPy installed and a GPU visible, but CUDA does not start (a broken driver): the GPU runner finds out while
    the first files are read, stops the batch and run_batch raises the reason; no output is written."""
    from sigconv._core import devices
    from sigconv._core.errors import InputError

    monkeypatch.setattr(devices, "cuda_quick_reason", lambda: None)
    monkeypatch.setattr(devices, "cuda_reason", lambda: "no usable CUDA GPU (driver too old)")
    monkeypatch.setattr(runners, "visible_gpu_count", lambda *a, **k: 1)
    src = _logs(tmp_path / "in", rng, 6, rows=1500)
    out = tmp_path / "out"
    with pytest.raises(InputError, match=r"^backend 'cuda' is not usable here: no usable CUDA GPU \(driver too old\)$"):
        sigconv.run_batch(_request(src, out, 3, backend="cuda"))
    assert not _outputs(out) and not _leftovers(out) and not cancel.STOP.is_set()


# ------------------------------------------------------------------------------------ reading Arrow columns


@pytest.mark.parametrize("dtype", [np.float64, np.int64])
def test_arrow_values_equal_arrows_own_conversion(rng, dtype):
    """Chunked, sliced (a bit offset that is not a whole byte), with and without nulls: the buffers read
    directly give Arrow's own values and nulls."""
    import pyarrow as pa

    from sigconv.engine.batch.logs import arrow_values

    fill = np.nan if dtype == np.float64 else 0
    chunks = []
    for n in (13, 0, 70, 5):
        v = (rng.standard_normal(n) * 1000).astype(dtype)
        m = rng.random(n) < 0.3
        m[n // 2:n // 2 + 1] = True  # at least one null inside the slice below, whatever the seed
        chunks.append(pa.array(v, mask=m if n % 2 else None))
    col = pa.chunked_array(chunks).slice(3, 80)
    vals, nulls = arrow_values(col, dtype, fill)
    want_nulls = np.array([x is None for x in col.to_pylist()])
    want = np.array([fill if x is None else x for x in col.to_pylist()], dtype=dtype)
    assert np.array_equal(nulls, want_nulls) and want_nulls.any()
    assert np.array_equal(vals, want, equal_nan=True) and vals.dtype == dtype
    one = pa.array(np.arange(10, dtype=dtype)).slice(2, 5)  # a plain array with an offset
    assert np.array_equal(arrow_values(one, dtype, fill)[0], np.arange(2, 7, dtype=dtype))


def test_a_batch_of_logs_never_makes_arrow_import_pandas(tmp_path, rng):
    """Arrow imports pandas, where installed, the first time it converts to NumPy: a few tenths of a second of a
    batch's start. A batch of CSV logs never asks it to (checked in a fresh process)."""
    src = _logs(tmp_path / "in", rng, 2, rows=800)
    code = ("import sys\n"
            "tried = []\n"
            "class Spy:\n"  # sees every import, Cython's included
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'pandas':\n"
            "            tried.append(name)\n"
            "sys.meta_path.insert(0, Spy())\n"
            "from sigconv.cli import main\n"
            f"rc = main(['batch', {str(src)!r}, '-o', {str(tmp_path / 'out')!r}, '--backend', 'cpu', '-j', '1', '-q'])\n"
            "print(rc, len(tried))\n")
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.split() == ["0", "0"], (r.stdout, r.stderr)


def test_channel_array_equals_pyarrows_own(rng):
    import pyarrow as pa

    from sigconv.engine.batch.formats import channel_array

    y = rng.standard_normal(37)
    nulls = rng.random(37) < 0.25
    for typ in (pa.float64(), pa.float32()):
        want = pa.array(y.astype(typ.to_pandas_dtype()), type=typ, mask=nulls)
        got = channel_array(y, typ, nulls)
        assert got.equals(want) and got.null_count == int(nulls.sum())
        assert channel_array(y[::3], typ).equals(pa.array(y[::3].astype(typ.to_pandas_dtype()), type=typ))
        assert channel_array(y, typ, np.zeros(37, bool)).null_count == 0


def test_threads_never_see_a_zero_umask(tmp_path, rng, as_if_one_gpu):
    """Files written from the GPU runner's threads get the ordinary mode (0666 less the umask), and folders the
    batch creates never become world-writable (the umask is read once, never set to 0 while threads run)."""
    src = tmp_path / "in"
    for d in range(6):
        _logs(src / f"site{d}", rng, 2, rows=800)
    old = os.umask(0o022)
    try:
        rep = sigconv.run_batch(sigconv.BatchRequest([src], tmp_path / "out", sigconv.BatchSettings(
            kernel=sigconv.KernelChoice(backend="auto")), jobs=4, recursive=True))
    finally:
        os.umask(old)
    assert len(rep.done) == 12 and rep.where == "4 worker processes and 1 GPU process"
    for p in (tmp_path / "out").rglob("*"):
        mode = p.stat().st_mode & 0o777
        assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))


def test_auto_sends_small_logs_to_the_cpu_pool_and_larger_ones_to_the_gpu(tmp_path, rng, forked, monkeypatch):
    """--backend auto with a GPU: logs averaging under AUTO_GPU_LOG_BYTES go to the CPU process pool, on the cpu
    backend (their workers start no CUDA); larger ones to the GPU runner. The outputs are the same."""
    monkeypatch.setattr(coordinator, "_on_gpu", lambda request, n_gpus: True)
    monkeypatch.setattr(runners, "visible_gpu_count", lambda *a, **k: 1)
    monkeypatch.setenv("SIGCONV_DISABLE_CUDA", "1")
    seen = []
    real_pool = runners.run_pool

    def pool(tasks, jobs, n_gpus=0, **kw):
        for t, r in real_pool(tasks, jobs, n_gpus, **kw):
            seen.append((n_gpus, t["settings"].kernel.backend, kw.get("service") is not None))
            yield t, r

    monkeypatch.setattr(runners, "run_pool", pool)
    src = _logs(tmp_path / "in", rng, 4, rows=800)  # about 60 KB each
    for name, bound in (("small", 1 << 20), ("large", 1000)):
        monkeypatch.setattr(coordinator, "AUTO_GPU_LOG_BYTES", bound)
        seen.clear()
        rep = sigconv.run_batch(_request(src, tmp_path / name, 2, backend="auto"))
        assert len(rep.done) == 4, rep.failed
        if name == "large":
            assert rep.where == "2 worker processes and 1 GPU process" and seen == [(0, "auto", True)] * 4
        else:
            assert rep.where == "2 worker processes" and seen == [(0, "cpu", False)] * 4, name
    for name in rep.done:
        assert (tmp_path / "small" / name).read_bytes() == (tmp_path / "large" / name).read_bytes()


def test_auto_rule_by_average_size():
    """The rule itself: logs go to the GPU when all are read whole and they average 1 MB or more (a streamed table
    keeps them on the CPU pool); with a recording among them, from 4 MB."""
    log = {"kind": "csv", "size": 1_500_000, "streamed": False}
    small, streamed = dict(log, size=60_000), dict(log, size=25 << 20, streamed=True)
    wav = {"kind": "audio", "size": 3 << 20}
    assert coordinator._auto_on_gpu([log] * 200) and not coordinator._auto_on_gpu([small] * 1000)
    assert not coordinator._auto_on_gpu([streamed] * 3) and not coordinator._auto_on_gpu([streamed] + [log] * 9)
    assert not coordinator._auto_on_gpu([wav, log]) and coordinator._auto_on_gpu([dict(wav, size=9 << 20), log])
