"""`sigconv batch` throughput: files/s, rows/s and MB/s for many small logs and a few large ones, one process
against the local process pool against a Dask LocalCluster, and on a machine with GPUs the cuda backend (one GPU:
threads of one process; several: a worker per GPU) and `--backend auto`, beside the I/O floor: the same files read
and written with pyarrow in as many threads, no filtering.

    python benchmarks/batch_bench.py                       # 1000 small logs + 3 large, every mode
    python benchmarks/batch_bench.py --small 200 --large 2 --large-rows 200000 --modes single pool
    python benchmarks/batch_bench.py --small 200 --small-rows 60000 --channels 2 --large 0 \
        --modes io-floor pool cuda auto                    # GPU batch against CPU batch

Each run is a fresh `python -m sigconv batch ... -q` into an empty OUTDIR (so start-up and, for Dask,
cluster start are included, as a user sees them); MB are input bytes. Every mode's outputs are compared with
the single-process run's, and each GPU mode lists the GPUs its files ran on (from the manifest); the exit
status is 1 when a run failed, differed, or a GPU mode left a GPU unused. Results go to
benchmarks/results/batch_<machine>_<date>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


#: outputs of each mode against the single-process cpu run: cpu modes are the same float64 arithmetic (the CSV
#: writes 6 decimals either way); the cuda modes filter in float32
TOL_VS_SINGLE = {"single": 0.0, "pool": 1e-12, "dask": 1e-12, "cpu-threads": 0.0, "cuda": 1e-5, "auto": 1e-5,
                 "pool-gpus": 1e-5, "dask-gpus": 1e-5, "io-floor": None}
CHANNELS = ("accel_x", "accel_y", "accel_z", "gyro_x", "gyro_y", "temperature")


def write_log(path: Path, rows: int, fs: float, rng, channels: int = 6) -> None:
    t = np.arange(rows) / fs
    x = rng.standard_normal((rows, channels)) * 0.1 + np.sin(2 * np.pi * 16.7 * t)[:, None] + 1e-3 * t[:, None]
    if channels == 6:
        x[:, 5] += 21.5
    names = CHANNELS[:channels] if channels <= 6 else [f"ch{i}" for i in range(channels)]
    header = ",".join(("timestamp", *names)) + "\n"
    body = np.column_stack([t, x])
    with open(path, "w") as f:
        f.write(header)
        np.savetxt(f, body, fmt=["%.2f"] + ["%.6f"] * channels, delimiter=",")


def _write_one(job) -> None:
    path, rows, seed, channels = job
    path.parent.mkdir(parents=True, exist_ok=True)
    write_log(path, rows, 100.0, np.random.default_rng(seed), channels)


def make_sets(base: Path, n_small: int, small_rows: int, n_large: int, large_rows: int, channels: int = 6) -> dict:
    """The small and large sets under ``base`` (each log from its own seed, written in parallel)."""
    from concurrent.futures import ProcessPoolExecutor

    jobs, sets = [], {}
    if n_small:
        sets["small"] = base / "small"
        jobs += [(sets["small"] / f"site{i % 10}" / f"log{i:04d}.csv", small_rows, i, channels) for i in range(n_small)]
    if n_large:
        sets["large"] = base / "large"
        jobs += [(sets["large"] / f"big{i}.csv", large_rows, 100_000 + i, channels) for i in range(n_large)]
    with ProcessPoolExecutor() as ex:
        list(ex.map(_write_one, jobs, chunksize=8))
    return sets


#: The I/O floor: every CSV under SRC read and written again (same tree under OUT) with pyarrow, in JOBS threads,
#: as the batch reads (time column as text) and writes them; no filtering. A fresh interpreter, as a batch is.
IO_FLOOR = r"""
import sys, os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import pyarrow as pa, pyarrow.csv as pcsv
src, out, jobs = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
files = sorted(src.rglob("*.csv"))
def one(f):
    o = out / f.relative_to(src)
    o.parent.mkdir(parents=True, exist_ok=True)
    t = pcsv.read_csv(f, convert_options=pcsv.ConvertOptions(column_types={"timestamp": pa.string()}))
    with pa.OSFile(str(o), "wb") as w:
        pcsv.write_csv(t, w)
    return t.num_rows
with ThreadPoolExecutor(jobs) as ex:
    print(sum(ex.map(one, files)))
"""


def run_mode(src: Path, outdir: Path, mode: str, jobs: int, timeout: float, rows: int, root: Path = ROOT) -> dict:
    """One mode's run; ``root``: the sigconv checkout that runs it (another one: an earlier version, a baseline)."""
    if outdir.exists():
        shutil.rmtree(outdir)
    if mode == "io-floor":
        t0 = time.perf_counter()
        r = subprocess.run([sys.executable, "-c", IO_FLOOR, str(src), str(outdir), str(jobs)], capture_output=True,
                           text=True, timeout=timeout)
        secs = time.perf_counter() - t0
        files = sorted(src.rglob("*.csv"))
        nbytes = sum(f.stat().st_size for f in files)
        return {"mode": mode, "rc": r.returncode, "seconds": round(secs, 3), "files": len(files), "failed": 0,
                "MB": round(nbytes / 1e6, 3), "files_per_s": round(len(files) / secs, 2),
                "rows_per_s": round(rows / secs), "MB_per_s": round(nbytes / 1e6 / secs, 3), "backends": ["-"],
                "gpus_used": [], "files_per_gpu": {}, "where": f"pyarrow, {jobs} threads",
                "stderr_tail": r.stderr[-300:] if r.returncode else ""}
    args = [sys.executable, "-m", "sigconv", "batch", str(src), "-r", "-o", str(outdir)]
    if mode == "single":
        args += ["--backend", "cpu", "-j", "1"]
    elif mode == "pool":
        args += ["--backend", "cpu", "-j", str(jobs)]
    elif mode == "dask":
        args += ["--backend", "cpu", "--scheduler", "local", "-j", str(jobs)]
    elif mode == "dask-gpus":  # one worker per GPU (LocalCluster plan), cuda backend
        args += ["--backend", "cuda", "--scheduler", "local"]
    elif mode == "pool-gpus":
        args += ["--backend", "cuda", "-j", str(jobs)]
    elif mode == "cuda":  # the default jobs: one GPU -> threads of one process
        args += ["--backend", "cuda"]
    elif mode == "auto":
        args += ["--backend", "auto"]
    env = dict(os.environ, PYTHONPATH=str(root) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    t0 = time.perf_counter()
    # cwd: `python -m` puts the working folder first on sys.path, ahead of PYTHONPATH
    r = subprocess.run(args, capture_output=True, text=True, env=env, timeout=timeout, cwd=str(root))
    secs = time.perf_counter() - t0
    man = outdir / "sigconv-batch.jsonl"
    recs = [json.loads(x) for x in man.read_text().splitlines()] if man.exists() else []
    done = sum(1 for x in recs if x["status"] == "done")
    nbytes = sum(x["size"] for x in recs if x["status"] == "done")
    gpus = sorted({str(x["gpu"]) for x in recs if x.get("gpu") is not None})
    where = next((line.split("; ")[-2][:-1] for line in r.stderr.splitlines() if line.startswith("batch: ")), "")
    return {"mode": mode, "rc": r.returncode, "seconds": round(secs, 3), "files": done,
            "failed": len(recs) - done, "MB": round(nbytes / 1e6, 3), "files_per_s": round(done / secs, 2),
            "rows_per_s": round(rows / secs) if done == len(recs) else None, "where": where,
            "MB_per_s": round(nbytes / 1e6 / secs, 3), "backends": sorted({x.get("backend") or "?" for x in recs}),
            "gpus_used": gpus, "files_per_gpu": {g: sum(1 for x in recs if str(x.get("gpu")) == g) for g in gpus},
            "stderr_tail": r.stderr[-300:] if r.returncode else ""}


def max_rel_diff(ref_dir: Path, out_dir: Path) -> float:
    """Largest relative difference (max |a - b| / max |a| per numeric column) between the CSVs of two runs;
    inf when a file is missing from either."""
    from pyarrow import csv as pcsv

    worst = 0.0
    for fa in sorted(ref_dir.rglob("*.csv")):
        fb = out_dir / fa.relative_to(ref_dir)
        if not fb.exists():
            return float("inf")
        ta, tb = pcsv.read_csv(fa), pcsv.read_csv(fb)
        for name in ta.column_names:
            a = ta.column(name).to_numpy().astype(np.float64)
            b = tb.column(name).to_numpy().astype(np.float64)
            scale = float(np.abs(a).max()) or 1.0
            worst = max(worst, float(np.abs(a - b).max()) / scale)
    return worst


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--small", type=int, default=1000, help="number of small logs (default 1000)")
    p.add_argument("--small-rows", type=int, default=1000, help="rows per small log (10 s at 100 Hz)")
    p.add_argument("--large", type=int, default=3, help="number of large logs")
    p.add_argument("--large-rows", type=int, default=400_000, help="rows per large log")
    p.add_argument("--channels", type=int, default=6, help="signal columns per log (default 6)")
    p.add_argument("--modes", nargs="+", default=None,
                   help="single pool dask io-floor [cuda auto pool-gpus dask-gpus] (default: all that can run here)")
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    p.add_argument("--baseline", metavar="DIR",
                   help="a checkout of an earlier sigconv: its --baseline-modes run too, as MODE@baseline, in the same run")
    p.add_argument("--baseline-modes", nargs="+", default=["pool", "pool-gpus"], metavar="MODE")
    p.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="run each mode N times, in turns (mode by mode, N rounds); report the median (default 1)")
    p.add_argument("--timeout", type=float, default=900)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    a = p.parse_args(argv)
    from sigconv.engine.batch.runners import visible_gpu_count

    gpus = visible_gpu_count()
    modes = a.modes or (["io-floor", "single", "pool", "dask"] + (["cuda", "auto", "dask-gpus"] if gpus else []))
    machine = platform.node() or "machine"
    date = time.strftime("%Y-%m-%d")
    meta = {"machine": machine, "cpus": os.cpu_count(), "gpus": gpus, "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%dT%H:%M:%S"), "jobs": a.jobs, "filter": "default for 100 Hz logs "
            f"(band-pass 0.5-40 Hz, 661 taps, zero phase, odd-reflected edges), {a.channels} channel(s) and a time "
            "column per log, cpu backend unless cuda/auto/*-gpus"}
    results = []
    with tempfile.TemporaryDirectory(prefix="sigconv-batch-bench-") as tmp:
        tmp = Path(tmp)
        t0 = time.perf_counter()
        sets = make_sets(tmp / "in", a.small, a.small_rows, a.large, a.large_rows, a.channels)
        meta["generate_seconds"] = round(time.perf_counter() - t0, 1)
        for name, src in sets.items():
            n = sum(1 for _ in src.rglob("*.csv"))
            size = sum(f.stat().st_size for f in src.rglob("*.csv"))
            rows = n * (a.small_rows if name == "small" else a.large_rows)
            ref, ref_mode = None, None  # the first cpu mode's output (single, else pool): the others are compared with it
            runs = [(m, ROOT) for m in sorted(modes, key=lambda m: (m != "single", m != "pool"))]
            if a.baseline:
                runs += [(m, Path(a.baseline).resolve()) for m in a.baseline_modes]
            rounds = {}  # every round but the last: only the time counts
            for _ in range(max(1, a.repeat) - 1):
                for mode, root in runs:
                    rounds.setdefault((mode, root), []).append(run_mode(src, tmp / "out", mode, a.jobs, a.timeout,
                                                                        rows, root))
            for mode, root in runs:
                r = run_mode(src, tmp / "out", mode, a.jobs, a.timeout, rows, root)
                times = sorted(x["seconds"] for x in rounds.get((mode, root), []) + [r])
                r["runs_s"] = times
                r["rc"] = max([r["rc"]] + [x["rc"] for x in rounds.get((mode, root), [])])
                if len(times) > 1:  # the median run stands for the mode
                    med = times[len(times) // 2] if len(times) % 2 else (times[len(times) // 2 - 1]
                                                                          + times[len(times) // 2]) / 2
                    scale = r["seconds"] / med
                    r["seconds"] = round(med, 3)
                    for k in ("files_per_s", "MB_per_s"):
                        r[k] = round(r[k] * scale, 3)
                    if r["rows_per_s"] is not None:
                        r["rows_per_s"] = round(r["rows_per_s"] * scale)
                if root != ROOT:
                    r["mode"] = mode = f"{mode}@baseline"
                r.update(set=name, set_files=n, set_MB=round(size / 1e6, 2), set_rows=rows)
                if mode in ("single", "pool") and ref is None and r["rc"] == 0:
                    ref_mode = mode
                    ref = tmp / f"ref-{name}"
                    shutil.rmtree(ref, ignore_errors=True)
                    shutil.copytree(tmp / "out", ref)
                tol = TOL_VS_SINGLE.get(mode.split("@")[0])
                compare = ref is not None and tol is not None and mode != ref_mode
                r["max_rel_diff_vs_single"] = max_rel_diff(ref, tmp / "out") if compare else None
                results.append(r)
                d = r["max_rel_diff_vs_single"]
                print(f"{name:5} {n:5d} files {size / 1e6:8.1f} MB  {mode:9} {r['seconds']:8.2f} s  "
                      f"{r['files_per_s']:8.1f} files/s  {(r['rows_per_s'] or 0) / 1e6:6.2f} M rows/s  "
                      f"{r['MB_per_s']:7.2f} MB/s  rc {r['rc']}  gpus {','.join(r['gpus_used']) or '-'}  "
                      f"vs cpu {'-' if d is None else f'{d:.1e}'}  ({r['where']})"
                      + (f"  runs {', '.join(f'{t:.2f}' for t in r['runs_s'])}" if len(r["runs_s"]) > 1 else ""),
                      flush=True)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = out / f"batch_{machine}_{date}"
    # each mode against the CPU pool of the earlier checkout on the same set, in the same run (the GPU batch's target:
    # twice as fast as the CPU batch was)
    base = {r["set"]: r["seconds"] for r in results if r["mode"] == "pool@baseline" and r["rc"] == 0}
    for r in results:
        r["x_vs_pool_baseline"] = round(base[r["set"]] / r["seconds"], 2) if r["set"] in base and r["seconds"] else None
        if r["x_vs_pool_baseline"] is not None:
            print(f"{r['set']:5} {r['mode']:15} {r['x_vs_pool_baseline']:.2f}x the CPU pool of the baseline")
    stem.with_suffix(".json").write_text(json.dumps({"meta": meta, "results": results}, indent=2) + "\n")
    lines = [f"# sigconv batch throughput: {machine}, {date}", "",
             f"{meta['cpus']} CPUs, {gpus} GPU(s), Python {meta['python']}; {meta['filter']}. "
             "Wall time of a whole `sigconv batch` command (start-up and Dask cluster start included).", "",
             "| set | files | MB | mode | where | seconds (median) | runs (s) | files/s | M rows/s | MB/s | "
             "x pool@baseline | rc | GPUs used (files each) | max rel diff vs cpu |",
             "|---|---:|---:|---|---|---:|---|---:|---:|---:|---:|---:|---|---:|"]
    for r in results:
        g = ", ".join(f"{k} ({v})" for k, v in r["files_per_gpu"].items()) or "-"
        d = "-" if r["max_rel_diff_vs_single"] is None else f"{r['max_rel_diff_vs_single']:.1e}"
        rps = "-" if r["rows_per_s"] is None else f"{r['rows_per_s'] / 1e6:.2f}"
        runs_s = ", ".join(f"{t:.2f}" for t in r["runs_s"])
        xb = "-" if r["x_vs_pool_baseline"] is None else f"{r['x_vs_pool_baseline']:.2f}"
        lines.append(f"| {r['set']} | {r['set_files']} | {r['set_MB']} | {r['mode']} | {r['where']} | {r['seconds']} | "
                     f"{runs_s} | {r['files_per_s']} | {rps} | {r['MB_per_s']} | {xb} | {r['rc']} | {g} | {d} |")
    stem.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print(f"wrote {stem}.json and .md")
    # a failure: a command that failed, outputs that differ from the single-process run, or a GPU mode that did
    # not use every GPU (the contract: one worker per GPU) when it had at least as many files as GPUs
    bad = [r for r in results if r["rc"] != 0
           or (r["max_rel_diff_vs_single"] or 0) > (TOL_VS_SINGLE[r["mode"].split("@")[0]] or 0)
           or (r["mode"].endswith("-gpus") and r["set_files"] >= gpus and len(r["gpus_used"]) != gpus)]
    for r in bad:
        print(f"FAILED: {r['set']} {r['mode']}: rc {r['rc']}, max rel diff vs single {r['max_rel_diff_vs_single']}, "
              f"GPUs used {r['gpus_used']} of {gpus}")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
