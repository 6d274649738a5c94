"""`sigconv batch` on wide tables: 3-row Parquet and CSV logs of many columns, against pyarrow's own read and write
of the same file (the floor: no filtering), each a fresh process, timed and measured for peak RSS in one run.

    python benchmarks/wide_tables.py                         # 5,000, 20,000 and 100,000 columns
    python benchmarks/wide_tables.py --columns 20000 --formats csv

Batch time was quadratic in the column count (each filtered column rebuilt the whole output table); it is now
linear, and at 100,000 columns close to the floor, which pyarrow's per-column work sets. Each column is filtered
by a 3-tap low-pass at 100 Hz (`--taps 3 --lowpass 10 --fs 100`). Results go to
benchmarks/results/wide_tables_<machine>_<date>.json and .md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

_FLOOR = {
    "csv": "import pyarrow.csv as c, sys; c.write_csv(c.read_csv(sys.argv[1]), sys.argv[2])",
    "parquet": "import pyarrow.parquet as q, sys; q.write_table(q.read_table(sys.argv[1]), sys.argv[2])",
}


def _make(path: Path, fmt: str, columns: int, rows: int = 3) -> None:
    rng = np.random.default_rng(columns)
    data = rng.standard_normal((rows, columns))
    t = np.arange(rows) / 100.0
    if fmt == "csv":
        with open(path, "w") as f:
            f.write("time," + ",".join(f"c{i}" for i in range(columns)) + "\n")
            for r in range(rows):
                f.write(f"{t[r]:.2f}," + ",".join(f"{v:.6f}" for v in data[r]) + "\n")
        return
    import pyarrow as pa
    import pyarrow.parquet as pq

    cols = {"time": pa.array(t)}
    cols.update({f"c{i}": pa.array(data[:, i]) for i in range(columns)})
    pq.write_table(pa.table(cols), path)


def _timed(cmd: list) -> dict:
    """Run ``cmd`` under a fresh parent whose only child it is: wall seconds, peak RSS (MB) and exit code."""
    code = ("import resource, subprocess, sys, time; t = time.perf_counter(); r = subprocess.run(sys.argv[1:]); "
            "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sys.executable, "-c", code, *cmd], capture_output=True, text=True, env=env).stdout.split()
    return {"rc": int(out[0]), "wall_s": round(float(out[1]), 3), "peak_rss_mb": round(int(out[2]) / 1024, 1)}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--columns", type=int, nargs="+", default=[5000, 20000, 100000])
    p.add_argument("--formats", nargs="+", choices=("csv", "parquet"), default=["parquet", "csv"])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    a = p.parse_args(argv)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for fmt in a.formats:
            for n in a.columns:
                src = tmp / f"w{n}.{fmt}"
                _make(src, fmt, n)
                floor = _timed([sys.executable, "-c", _FLOOR[fmt], str(src), str(tmp / f"copy.{fmt}")])
                batch = _timed([sys.executable, "-m", "sigconv", "batch", str(src), "-o", str(tmp / f"out{n}{fmt}"),
                                "--taps", "3", "--lowpass", "10", "--fs", "100", "-q", "-j", "1"])
                row = {"format": fmt, "columns": n, "rows": 3, "file_mb": round(src.stat().st_size / 1e6, 2),
                       "batch": batch, "floor": floor,
                       "batch_over_floor": round(batch["wall_s"] / floor["wall_s"], 2)}
                rows.append(row)
                print(f"{fmt:8} {n:7d} columns: batch {batch['wall_s']:7.2f} s ({batch['peak_rss_mb']:.0f} MB), "
                      f"pyarrow read+write {floor['wall_s']:7.2f} s ({floor['peak_rss_mb']:.0f} MB), "
                      f"{row['batch_over_floor']:.2f}x", flush=True)
    bad = [r for r in rows if r["batch"]["rc"] or r["floor"]["rc"]]
    date = time.strftime("%Y-%m-%d")
    machine = f"{platform.processor() or platform.machine()}-{os.cpu_count()}cpu".replace(" ", "_")
    stem = Path(a.out) / f"wide_tables_{machine}_{date}"
    res = {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "machine": platform.platform(),
           "cpus": os.cpu_count(), "rows": rows}
    stem.with_suffix(".json").write_text(json.dumps(res, indent=1) + "\n")
    md = [f"# sigconv batch on wide tables ({res['date']}, {res['cpus']} CPUs, {res['machine']})", "",
          "| format | columns | file MB | batch s | batch peak MB | pyarrow read+write s | floor peak MB | x floor |",
          "|---|---:|---:|---:|---:|---:|---:|---:|"]
    md += [f"| {r['format']} | {r['columns']} | {r['file_mb']} | {r['batch']['wall_s']} | {r['batch']['peak_rss_mb']} "
           f"| {r['floor']['wall_s']} | {r['floor']['peak_rss_mb']} | {r['batch_over_floor']} |" for r in rows]
    stem.with_suffix(".md").write_text("\n".join(md) + "\n")
    print(f"wrote {stem}.json and .md")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
