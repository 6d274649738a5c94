"""sigconv batch on sensor-log tables and NPY arrays that are damaged, extreme or wide: a damaged cell, duplicate
names, a damaged NPY header, absurd or non-numeric rates and 64-bit integers each fail their file alone with one
line naming it (no output, no temporary file); huge samples never give a non-finite output; wide tables take time
linear in their columns and bounded memory; every result names the channels it filtered."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest

from conftest import cli_peak_rss, run_cli

pa = pytest.importorskip("pyarrow")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import sigconv  # noqa: E402
from sigconv.engine.batch import filters, stream  # noqa: E402
from sigconv.engine.batch.manifest import NAME as MANIFEST  # noqa: E402

SETTINGS = sigconv.BatchSettings(fir=sigconv.FirSpec(taps=31), kernel=sigconv.KernelChoice(backend="cpu"))


def csv_log(path: Path, rng, n=400, names=("x", "y"), cells=None) -> Path:
    """A 100 Hz CSV log with a timestamp column and random channels; ``cells`` {(row, name): text} overrides cells
    (row: 1-based data row)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    x = rng.standard_normal((n, len(names)))
    lines = ["timestamp," + ",".join(names)]
    for i in range(n):
        vals = [repr(float(v)) for v in x[i]]
        for j, name in enumerate(names):
            vals[j] = (cells or {}).get((i + 1, name), vals[j])
        lines.append(f"{i / 100:.2f}," + ",".join(vals))
    path.write_text("\n".join(lines) + "\n")
    return path


def npy_log(path: Path, x, fs=100.0, sidecar=None) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    np.save(path, x)
    path.with_name(path.name + ".json").write_text(json.dumps({"fs": fs}) if sidecar is None else sidecar)
    return path


def run(src, out, settings=SETTINGS, **kw):
    return sigconv.run_batch(sigconv.BatchRequest([src], out, settings, jobs=1, force=True, **kw))


def failed(report) -> dict:
    return dict(report.failed)


def records(out) -> dict:
    lines = (Path(out) / MANIFEST).read_text().splitlines()
    return {Path(r["input"]).name: r for r in map(json.loads, filter(str.strip, lines))}


def no_leftovers(out, *names):
    """No output for ``names`` and no temporary file anywhere in ``out``."""
    left = [p.name for p in Path(out).rglob("*") if p.name.endswith(".part")]
    assert not left, left
    for n in names:
        assert not (Path(out) / n).exists(), n


def one_line(reason: str) -> str:
    assert reason and "\n" not in reason and "Traceback" not in reason, reason
    return reason


def test_damaged_cell_fails_the_file_naming_row_and_column(tmp_path, rng):
    """A CSV channel with one cell 'abc' is not passed through unfiltered: the file fails with the cell's column, data
    row and line; the other files of the batch are filtered, and their results name the channels filtered. A text
    column (labels) still passes through, and --columns naming a damaged channel names the cell too."""
    src = tmp_path / "in"
    csv_log(src / "log.csv", rng, cells={(17, "x"): "abc"})
    good = csv_log(src / "good.csv", rng)
    lines = good.read_text().splitlines()  # a label column appended to every line: text, passed through
    good.write_text("\n".join([lines[0] + ",label"] + [ln + f",w{i % 3}" for i, ln in enumerate(lines[1:])]) + "\n")
    npy_log(src / "a.npy", rng.standard_normal((300, 2)))
    out = tmp_path / "out"
    rep = run(src, out)
    reason = one_line(failed(rep)["log.csv"])
    assert reason == ("column 'x' data row 17 (line 18): 'abc' is not a number; fix or empty the cell "
                      "(an empty cell is a gap)"), reason
    no_leftovers(out, "log.csv")
    assert sorted(rep.done) == ["a.npy", "good.csv"]
    rec = records(out)
    assert rec["good.csv"]["status"] == "done"
    got = pcsv.read_csv(out / "good.csv", convert_options=pcsv.ConvertOptions(column_types={"timestamp": pa.string()}))
    assert got.column("label").to_pylist()[:3] == ["w0", "w1", "w2"]
    rep = run(src / "log.csv", tmp_path / "o2", sigconv.BatchSettings(
        fir=sigconv.FirSpec(taps=31), kernel=sigconv.KernelChoice(backend="cpu"), columns=("x",)))
    assert "column 'x' data row 17 (line 18): 'abc'" in failed(rep)["log.csv"]


def test_results_name_the_filtered_columns(tmp_path, rng):
    """Each table or NPY result carries ``columns``: the channels actually filtered (in memory and streamed)."""
    from sigconv.engine.batch.process import process_task

    src = tmp_path / "in"
    csv_log(src / "log.csv", rng, names=("a", "b", "c"))
    npy_log(src / "v.npy", rng.standard_normal(300))
    for name, want in (("log.csv", ["a", "b", "c"]), ("v.npy", ["channel 0"])):
        kind = "npy" if name.endswith(".npy") else "csv"
        res = process_task({"input": str(src / name), "rel": name, "output": str(tmp_path / "out" / name),
                            "outdir": str(tmp_path / "out"), "kind": kind, "settings": SETTINGS})
        assert res["status"] == "done" and res["columns"] == want, res


@pytest.mark.parametrize("streamed", [False, True], ids=["in-memory", "streamed"])
def test_huge_samples_never_give_non_finite_output(tmp_path, rng, monkeypatch, streamed):
    """Finite samples near the float64 limit: each file is either filtered to finite values or fails with one line
    naming the column and row (no output, no temporary file); never a non-finite output, never a NumPy warning. A
    column whose odd-reflected edge overflows (2 * 1.7e308) surely fails."""
    import warnings

    monkeypatch.setattr(stream, "STREAM_MIN_BYTES", 0 if streamed else 1 << 60)
    src = tmp_path / "in"
    csv_log(src / "cell.csv", rng, cells={(40, "x"): "1.797e308"})
    csv_log(src / "edge.csv", rng, cells={(1, "y"): "1.7e308", (2, "y"): "-1.7e308"})
    spike = rng.standard_normal(2000)
    spike[500] = 1e308
    npy_log(src / "spike.npy", spike)
    out = tmp_path / "out"
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        rep = run(src, out)
    fails = failed(rep)
    for name in ("cell.csv", "edge.csv", "spike.npy"):
        if name in fails:
            reason = one_line(fails[name])
            where = "channel 0 sample index" if name.endswith(".npy") else "column '"
            assert where in reason and "the filtered value is not finite" in reason, reason
            no_leftovers(out, name)
        else:
            y = np.load(out / name) if name.endswith(".npy") else \
                np.stack([pcsv.read_csv(out / name).column(c).to_numpy() for c in ("x", "y")])
            assert np.isfinite(y).all(), name
    assert "column 'y' data row 1:" in fails["edge.csv"], fails
    no_leftovers(out)


def test_check_finite_names_the_first_bad_output():
    """check_finite: the first output not finite where the input was (gaps in the input excused), and a float32
    output beyond float32's range, named by channel and row."""
    y = np.zeros((5, 2))
    y[3, 1] = np.inf
    with pytest.raises(sigconv.InputError, match=r"^f.csv: column 'b' data row 4: the filtered value is not finite"):
        filters.check_finite(y, "f.csv", ["column 'a'", "column 'b'"], "data row", 1)
    x = np.zeros((5, 2))
    x[3, 1] = np.nan
    filters.check_finite(y, "f.csv", ["column 'a'", "column 'b'"], "data row", 1, x=x)  # a gap: excused
    y = np.full((4, 2), 1e39)
    filters.check_finite(y, "f.npy", ["channel 0", "channel 1"], "sample index", 0)
    with pytest.raises(sigconv.InputError, match="channel 1 sample index 10:"):
        filters.check_finite(y, "f.npy", ["channel 0", "channel 1"], "sample index", 10,
                             dtype=[np.float64, np.float32])


def _wide_parquet(path: Path, rng, cols: int, rows=3):
    data = {"t": np.arange(rows) / 100.0}
    data.update({f"c{i}": rng.standard_normal(rows) for i in range(cols)})
    pq.write_table(pa.table(data), path)


def _wide_csv(path: Path, rng, cols: int, rows=3):
    vals = rng.integers(0, 10, (rows, cols))
    with open(path, "w") as f:
        f.write(",".join(["timestamp"] + [f"c{i}" for i in range(cols)]) + "\n")
        for r in range(rows):
            f.write(f"{r / 100:.2f}," + ",".join(map(str, vals[r])) + "\n")


@pytest.mark.parametrize("kind,cols", [("parquet", 10_000), ("csv", 10_000)])
def test_wide_table_time_is_linear(tmp_path, rng, kind, cols):
    """A 3-row table of 10,000 channels is filtered in a few seconds (the output table was rebuilt once per column:
    46 s for 10,000 Parquet columns; benchmarks/wide_tables.py measures up to 100,000 beside pyarrow's own read and
    write), each channel as a 3-tap filter alone gives it."""
    src = tmp_path / "in"
    src.mkdir()
    path = src / f"w.{kind}"
    (_wide_parquet if kind == "parquet" else _wide_csv)(path, rng, cols)
    settings = sigconv.BatchSettings(fir=sigconv.FirSpec(taps=3, lowpass=10.0), fs=100.0,
                                     kernel=sigconv.KernelChoice(backend="cpu"))
    t0 = time.perf_counter()
    rep = run(src, tmp_path / "out", settings)
    took = time.perf_counter() - t0
    assert rep.done == [path.name], rep.failed
    print(f"{kind}: {cols} columns in {took:.1f} s")
    assert took < 20, f"{took:.1f} s"
    read = pq.read_table if kind == "parquet" else pcsv.read_csv
    x, y = read(path), read(tmp_path / "out" / path.name)
    assert y.num_columns == cols + 1
    h = sigconv.design_fir("lowpass", 10.0, 100.0, numtaps=3)
    for c in ("c0", f"c{cols // 2}", f"c{cols - 1}"):
        xc = x.column(c).to_numpy().astype(np.float64)
        ext = np.concatenate([[2 * xc[0] - xc[1]], xc, [2 * xc[-1] - xc[-2]]])
        np.testing.assert_allclose(y.column(c).to_numpy(), np.convolve(ext, h, mode="valid"), rtol=1e-12, atol=1e-12)


def _wide_tall_csv(path: Path, rng, rows: int, cols: int):
    with open(path, "w") as f:
        f.write(",".join(["timestamp"] + [f"c{i}" for i in range(cols)]) + "\n")
        for r0 in range(0, rows, 1000):
            vals = rng.integers(0, 10, (min(1000, rows - r0), cols))
            f.write("".join(f"{(r0 + i) / 100:.2f}," + ",".join(map(str, v)) + "\n" for i, v in enumerate(vals)))


@pytest.mark.parametrize("rows", [pytest.param(3000, id="3000x700"),
                                  pytest.param(20_000, id="20000x700", marks=pytest.mark.slow)])
def test_wide_csv_memory_bounded(tmp_path, rng, rows):
    """A CSV of 700 small-integer columns streams in column-bounded blocks: peak RSS under 300 MB (a 20,000 x 700
    file, 28 MB, ran out of memory after 2.98 GB), the output that of the in-memory path."""
    src = tmp_path / "in"
    src.mkdir()
    _wide_tall_csv(src / "w.csv", rng, rows, 700)
    out = tmp_path / "out"
    t0 = time.perf_counter()
    rc, peak_kb, err = cli_peak_rss("batch", src, "-o", out, "--backend", "cpu", "-j", "1", "-q", timeout=600)
    took = time.perf_counter() - t0
    assert rc == 0, err
    print(f"{rows} x 700: peak RSS {peak_kb / 1024:.0f} MB, {took:.1f} s")
    assert peak_kb < 300 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
    y = pcsv.read_csv(out / "w.csv", convert_options=pcsv.ConvertOptions(include_columns=["c0", "c699"]))
    assert y.num_rows == rows and np.isfinite(y.column("c699").to_numpy()).all()


def test_duplicate_column_names(tmp_path, rng):
    """Two columns of one name fail the file with one line naming both positions (was: KeyError)."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "dup.csv").write_text("timestamp,x,x\n" + "".join(f"{i / 100:.2f},{i % 5},{i % 3}\n" for i in range(300)))
    csv_log(src / "ok.csv", rng)
    rep = run(src, tmp_path / "out")
    assert one_line(failed(rep)["dup.csv"]) == "columns 2 and 3 are both named 'x'; give each column its own name"
    assert rep.done == ["ok.csv"]
    no_leftovers(tmp_path / "out", "dup.csv")


def test_damaged_npy_header(tmp_path, rng):
    """An NPY whose header is damaged fails with one line (was: TokenError)."""
    src = tmp_path / "in"
    raw = npy_log(src / "d.npy", rng.standard_normal(300)).read_bytes()
    (src / "d.npy").write_bytes(raw[:20] + b"(((" + raw[23:])
    rep = run(src, tmp_path / "out")
    assert one_line(failed(rep)["d.npy"]) == "not a readable NPY file (its header is damaged)"
    no_leftovers(tmp_path / "out", "d.npy")


def test_absurd_rates_refused_before_design(tmp_path, rng):
    """Timestamps 1e-300 s apart and a sidecar of 1e300 Hz are refused with one line before any filter is designed
    (was: Maximum allowed size exceeded); so are a boolean, a negative and a non-number sidecar rate (true was taken
    as 1 Hz), and --fs beyond the range."""
    src = tmp_path / "in"
    src.mkdir()
    (src / "tiny.csv").write_text("timestamp,x\n" + "".join(f"{i * 1e-300!r},{i % 5}\n" for i in range(300)))
    sidecars = {"huge": '{"fs": 1e300}', "bool": '{"fs": true}', "neg": '{"fs": -5}', "text": '{"fs": "fast"}',
                "nokey": '{"rate": 100}'}
    for name, side in sidecars.items():
        npy_log(src / f"{name}.npy", rng.standard_normal(300), sidecar=side)
    npy_log(src / "ok.npy", rng.standard_normal(300), sidecar='{"fs": "100"}')
    rep = run(src, tmp_path / "out")
    f = failed(rep)
    assert one_line(f["tiny.csv"]) == ("the timestamps' rate: 1e+300 Hz is outside the sample rates sigconv filters "
                                       "(1e-09 to 1e+12 Hz); pass --fs")
    assert one_line(f["huge.npy"]).endswith("huge.npy.json: 'fs' 1e+300 Hz is outside the sample rates sigconv filters "
                                            "(1e-09 to 1e+12 Hz)")
    assert one_line(f["bool.npy"]).endswith("bool.npy.json: 'fs' must be a rate in Hz (a number), got True")
    assert one_line(f["neg.npy"]).endswith("neg.npy.json: 'fs' must be a positive rate in Hz, got -5")
    assert one_line(f["text.npy"]).endswith("text.npy.json: 'fs' must be a rate in Hz (a number), got 'fast'")
    assert "nokey.npy.json: not a sidecar JSON holding" in one_line(f["nokey.npy"])
    assert rep.done == ["ok.npy"]
    no_leftovers(tmp_path / "out", *f)
    with pytest.raises(ValueError, match=r"^fs 1e\+300 Hz is outside the sample rates sigconv filters"):
        sigconv.BatchSettings(fs=1e300)


@pytest.mark.parametrize("cols", [pytest.param(18_000, id="18000-long-names"),
                                  pytest.param(1_000_000, id="1000000", marks=pytest.mark.slow)])
def test_header_longer_than_a_block(tmp_path, rng, cols):
    """A valid CSV whose header is longer than pyarrow's default block (1 MB: 18,000 long names, or a million) is
    read and filtered (was: CSV parse error: Empty CSV file or block). The million columns took 210 s on 2 shared
    cores."""
    src = tmp_path / "in"
    src.mkdir()
    with open(src / "m.csv", "w") as f:
        f.write("timestamp," + ",".join(f"sensor_{i:08d}_" + "_" * 50 * (cols < 100_000) for i in range(cols)) + "\n")
        for r in range(3):
            f.write(f"{r / 100:.2f}," + ",".join(["1"] * cols) + "\n")
    assert len((src / "m.csv").read_text().splitlines()[0]) > 1 << 20
    settings = sigconv.BatchSettings(fir=sigconv.FirSpec(taps=1, lowpass=10.0), fs=100.0,
                                     kernel=sigconv.KernelChoice(backend="cpu"))
    t0 = time.perf_counter()
    rep = run(src, tmp_path / "out", settings)
    print(f"{cols} columns in {time.perf_counter() - t0:.1f} s")
    assert rep.done == ["m.csv"], rep.failed
    y = pcsv.read_csv(tmp_path / "out" / "m.csv", read_options=pcsv.ReadOptions(block_size=64 << 20))
    assert y.num_columns == cols + 1 and y.column(cols).to_pylist() == pytest.approx([1.0] * 3)


def test_int64_extremes_are_filtered(tmp_path, rng):
    """An int64 channel holding 2**63 - 1 is filtered as float64 (was: Integer value 9223372036854775807 not in
    range, naming no column)."""
    src = tmp_path / "in"
    src.mkdir()
    n = 300
    big = np.arange(n, dtype=np.int64)
    big[0] = np.iinfo(np.int64).max
    pq.write_table(pa.table({"t": np.arange(n) / 100.0, "big": big}), src / "int.parquet")
    rep = run(src, tmp_path / "out")
    assert rep.done == ["int.parquet"], rep.failed
    y = pq.read_table(tmp_path / "out" / "int.parquet").column("big")
    assert y.type == pa.float64() and np.isfinite(y.to_numpy()).all()


def test_cli_damaged_cell_one_line_exit_1(tmp_path, rng):
    """Through the CLI: the damaged cell is one 'failed:' line, exit 1, no traceback or warning, the good file done."""
    src = tmp_path / "in"
    csv_log(src / "log.csv", rng, cells={(5, "y"): "abc"})
    csv_log(src / "good.csv", rng)
    r = run_cli("batch", src, "-o", tmp_path / "out", "--backend", "cpu", "-j", "1", "--taps", "31")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr and "Warning" not in r.stderr
    lines = [ln for ln in r.stderr.splitlines() if ln.startswith("failed:")]
    assert lines == ["failed: log.csv: column 'y' data row 5 (line 6): 'abc' is not a number; fix or empty the cell "
                     "(an empty cell is a gap)"], r.stderr
    assert (tmp_path / "out" / "good.csv").exists()
    no_leftovers(tmp_path / "out", "log.csv")
