"""sigconv batch: formats, failures recorded per file, resume after a crash, output-path safety, exit
codes, pool / Dask LocalCluster equal to one process, GPU assignment (faked device counts)."""

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

from conftest import ROOT, SAMPLES, cli_peak_rss, rel_err, run_cli, terminal_signals, write_audio

pa = pytest.importorskip("pyarrow")
import pyarrow.csv as pcsv  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

import sigconv  # noqa: E402
from sigconv.cli import main  # noqa: E402
from sigconv.engine.batch import edges, filters, runners  # noqa: E402
from sigconv.engine.batch.manifest import NAME as MANIFEST  # noqa: E402

CPU = ("--backend", "cpu")
#: On PYTHONPATH for CLI subprocesses: a sitecustomize that faults the atomic rename ($SIGCONV_TEST_AT_REPLACE).
SHIMS = Path(__file__).with_name("shims")


def log_frame(rng, n=1500, fs=100.0, channels=3):
    t = np.arange(n) / fs
    x = rng.standard_normal((n, channels)) + np.sin(2 * np.pi * 16.7 * t)[:, None] + 0.01 * t[:, None] + 5.0
    return t, x


def write_csv(path, t, x, names=None, extra=None, tfmt="{:.2f}"):
    names = names or [f"ch{i}" for i in range(x.shape[1])]
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as f:
        f.write(",".join(["timestamp", *names, *(extra or {}).keys()]) + "\n")
        for i in range(len(t)):
            vals = ["" if np.isnan(v) else repr(float(v)) for v in x[i]]
            f.write(",".join([tfmt.format(t[i]), *vals, *[str(col[i]) for col in (extra or {}).values()]]) + "\n")
    return path


def read_csv(path):
    return pcsv.read_csv(path, convert_options=pcsv.ConvertOptions(column_types={"timestamp": pa.string()}))


def manifest(outdir):
    return [json.loads(line) for line in (Path(outdir) / MANIFEST).read_text().splitlines() if line.strip()]


def default_log_taps(fs):
    return sigconv.design_fir("bandpass", (fs / 200, 0.4 * fs), fs, transition=fs / 200)


def odd_padded(x, p):
    """x (axis 0) extended by p samples of odd reflection each side, written out independently of sigconv:
    scipy.signal.filtfilt's padtype "odd" (left 2*x[0] - x[p:0:-1], right 2*x[-1] - x[-2:-p-2:-1]); where x
    has fewer than p+1 samples, what there is is reflected and the outermost reflected value is held."""
    x = np.asarray(x, dtype=np.float64)
    if p == 0:
        return x
    m = min(p, len(x) - 1)
    left = 2 * x[0] - x[m:0:-1] if m else x[:1]
    right = 2 * x[-1] - x[-2:-m - 2:-1] if m else x[-1:]
    left = np.concatenate([np.repeat(left[:1], p - m, axis=0), left]) if m else np.repeat(left, p, axis=0)
    right = np.concatenate([right, np.repeat(right[-1:], p - m, axis=0)]) if m else np.repeat(right, p, axis=0)
    return np.concatenate([left, x, right])


def odd_ref(x, h, phase="zero"):
    """The --edges odd output for x (filtered along axis 0): x extended explicitly (odd_padded), filtered by
    scipy.signal (convolve "full" for zero phase, lfilter for linear) and sliced back to x's samples."""
    import scipy.signal

    x = np.asarray(x, dtype=np.float64)
    n, K = x.shape[0], len(h)
    hh = np.reshape(h, (K,) + (1,) * (x.ndim - 1))
    if phase == "zero":  # centred: K//2 each side; output i = full[i + K//2 + K//2] (assumes K odd)
        p = K // 2
        return scipy.signal.convolve(odd_padded(x, p), hh, "full")[2 * p:2 * p + n]
    xe = odd_padded(x, K - 1)[: n + K - 1]  # causal: K-1 on the left only
    return scipy.signal.lfilter(h, 1.0, xe, axis=0)[K - 1:]


def first_bad(y, ref, tol):
    d = np.abs(np.asarray(y, float) - ref) > tol * np.abs(ref).max()
    return np.argwhere(d)[:1].tolist()


# ------------------------------------------------------------------------------------ formats


def test_mixed_formats_equal_apply_fir(tmp_path, rng, capsys):
    """CSV, Parquet (timestamp-typed time), NPY (+sidecar, 1-D), WAV and FLAC in a tree: outputs mirror the
    tree in the same format and equal the per-rate default filter (logs: odd-reflected edges, odd_ref; audio:
    sigconv.apply_fir, zero padding); other columns and the time column pass through unchanged."""
    src = tmp_path / "in"
    t, x = log_frame(rng)
    status = np.array(["ok", "warn"] * (len(t) // 2))
    write_csv(src / "a.csv", t, x, extra={"status": status})
    t2, x2 = log_frame(rng, n=2000, fs=200.0, channels=2)
    ts = pa.array((t2 * 1e9).astype("int64")).cast(pa.timestamp("ns"))
    pq.write_table(pa.table({"when": ts, "p": x2[:, 0], "q": x2[:, 1].astype(np.float32),
                             "flag": np.arange(2000) % 3 == 0}), (src / "sub").mkdir(parents=True) or src / "sub" / "b.parquet")
    np.save(src / "sub" / "c.npy", x[:, :2])
    (src / "sub" / "c.npy.json").write_text('{"fs": 100}')
    np.save(src / "d.npy", x[:, 0].astype(np.float32))
    (src / "d.npy.json").write_text('{"fs": 100}')
    audio = rng.uniform(-0.3, 0.3, (16000, 2)).astype(np.float32)
    write_audio(src / "e.wav", audio, fs=16000, subtype="FLOAT")
    write_audio(src / "deep" / "f.flac", audio[:, 0], fs=16000, subtype="PCM_16") if (src / "deep").mkdir() is None \
        else None
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-r", "-o", str(out), *CPU, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 0, err
    assert "100 Hz: band-pass 0.5-40 Hz" in err and "200 Hz: band-pass 1-80 Hz" in err
    assert "16000 Hz: band-pass 80-7200 Hz" in err, err
    assert "6 done, 0 skipped, 0 failed" in err

    h100 = default_log_taps(100.0)
    a = read_csv(out / "a.csv")
    for c in range(3):
        ref = odd_ref(x[:, c], h100)
        y = a.column(f"ch{c}").to_numpy()
        assert rel_err(y, ref) < 1e-10, first_bad(y, ref, 1e-10)
    src_lines = (src / "a.csv").read_text().splitlines()
    out_lines = (out / "a.csv").read_text().splitlines()
    assert out_lines[0] == src_lines[0]
    assert [ln.split(",")[0] for ln in out_lines] == [ln.split(",")[0] for ln in src_lines]  # time text as is
    assert a.column("status").to_pylist() == status.tolist()

    b = pq.read_table(out / "sub" / "b.parquet")
    h200 = default_log_taps(200.0)
    assert b.column("when").equals(pq.read_table(src / "sub" / "b.parquet").column("when"))
    assert b.column("flag").to_pylist() == (np.arange(2000) % 3 == 0).tolist()  # not numeric: passes through
    assert rel_err(b.column("p").to_numpy(), odd_ref(x2[:, 0], h200)) < 1e-10
    assert b.schema.field("q").type == pa.float32()
    assert rel_err(b.column("q").to_numpy(), odd_ref(x2[:, 1].astype(np.float32), h200)) < 1e-6

    c = np.load(out / "sub" / "c.npy")
    assert c.shape == (1500, 2) and rel_err(c, odd_ref(x[:, :2], h100)) < 1e-10
    assert json.loads((out / "sub" / "c.npy.json").read_text()) == {"fs": 100}
    d = np.load(out / "d.npy")
    assert d.shape == (1500,) and d.dtype == np.float32
    assert rel_err(d, odd_ref(x[:, 0].astype(np.float32), h100)) < 1e-6

    import soundfile as sf

    e, fs = sf.read(out / "e.wav", dtype="float64")
    assert fs == 16000 and sf.info(str(out / "e.wav")).subtype == "FLOAT"
    ha = sigconv.design_fir("bandpass", (80.0, 7200.0), 16000.0)
    assert rel_err(e, sigconv.apply_fir(audio.astype(float), ha, axis=0, backend="cpu")) < 1e-5  # zero padding
    assert sf.info(str(out / "deep" / "f.flac")).format == "FLAC"
    recs = manifest(out)
    assert len(recs) == 6 and {r["status"] for r in recs} == {"done"}
    assert all({"input", "size", "mtime_ns", "settings", "status", "output"} <= r.keys() for r in recs)
    assert all(r["backend"] == "cpu" and "gpu" not in r for r in recs)  # where each file ran


def test_default_filter_on_sample_log(tmp_path, capsys):
    """The sensor-log default on samples/sensor_log.csv: the 50 Hz (Nyquist) line and the drift are removed,
    the 16.7 Hz vibration kept."""
    out = tmp_path / "out"
    assert main(["batch", str(SAMPLES / "sensor_log.csv"), "-o", str(out), *CPU, "-q"]) == 0
    x = read_csv(SAMPLES / "sensor_log.csv").column("accel_x").to_numpy()
    y = read_csv(out / "sensor_log.csv").column("accel_x").to_numpy()
    mid = slice(1000, -1000)  # away from the edges (the filter is 6.6 s long)
    X, Y = np.abs(np.fft.rfft(x[mid])), np.abs(np.fft.rfft(y[mid]))
    f = np.fft.rfftfreq(x[mid].size, 0.01)
    band = lambda a, lo, hi: float(np.sqrt((a[(f >= lo) & (f <= hi)] ** 2).sum()))  # noqa: E731
    assert band(Y, 49, 50) < 1e-2 * band(X, 49, 50)  # Nyquist line: -40 dB
    assert band(Y, 0, 0.2) < 1e-2 * band(X, 0, 0.2)  # drift and offset
    assert 0.9 < band(Y, 16.5, 16.9) / band(X, 16.5, 16.9) < 1.1  # vibration kept


def test_bad_files_recorded_batch_goes_on(tmp_path, rng, capsys):
    """A corrupt CSV, an empty file, a header-only CSV, a non-numeric --columns, a non-numeric column passed
    through: each failure is one line with its reason, the others are done, exit code 1."""
    src = tmp_path / "in"
    t, x = log_frame(rng, n=800)
    write_csv(src / "good.csv", t, x, extra={"label": ["x"] * 800})
    write_csv(src / "words.csv", t, x[:, :1], names=["v"], extra={"label": ["y"] * 800})
    (src / "corrupt.csv").write_text("timestamp,a,b\n0.0,1,2\n0.01,3\n0.02,1,2,3,4\n")
    (src / "garbage.csv").write_bytes(os.urandom(3000))
    (src / "empty.csv").write_bytes(b"")
    (src / "header.csv").write_text("timestamp,a\n")
    (src / "notnpy.npy").write_text("hello")
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-o", str(out), *CPU, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 1
    fails = {ln.split(":")[1].strip(): ln for ln in err.splitlines() if ln.startswith("failed:")}
    assert set(fails) == {"corrupt.csv", "garbage.csv", "empty.csv", "header.csv", "notnpy.npy"}, err
    assert "empty" in fails["empty.csv"] and "no data rows" in fails["header.csv"]
    assert "not a readable CSV file" in fails["corrupt.csv"]
    assert "2 done, 0 skipped, 5 failed" in err
    assert read_csv(out / "good.csv").column("label").to_pylist() == ["x"] * 800
    assert not (out / "corrupt.csv").exists() and not (out / "empty.csv").exists()
    recs = {Path(r["input"]).name: r for r in manifest(out)}
    assert recs["corrupt.csv"]["status"] == "failed" and recs["corrupt.csv"]["reason"]
    rc = main(["batch", str(src / "words.csv"), "-o", str(tmp_path / "o2"), *CPU, "--columns", "v,label"])
    err = capsys.readouterr().err
    assert rc == 1 and "column 'label' is not numeric" in err


def test_irregular_and_nonmonotonic_timestamps(tmp_path, rng, capsys):
    """Irregular spacing: filtered at the median rate with a warning; non-monotonic: failed unless --fs."""
    src = tmp_path / "in"
    t, x = log_frame(rng, n=900)
    t_irr = t.copy()
    t_irr[300:] += 0.5  # a 0.5 s hole
    write_csv(src / "irregular.csv", t_irr, x, tfmt="{:.3f}")
    t_back = t.copy()
    t_back[[400, 401]] = t_back[[401, 400]]
    write_csv(src / "backwards.csv", t_back, x)
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-o", str(out), *CPU, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "warning: irregular.csv: irregular timestamps: 1 of 899 steps" in err, err
    assert "failed: backwards.csv: non-monotonic timestamps" in err and "pass --fs" in err
    y = read_csv(out / "irregular.csv").column("ch0").to_numpy()
    assert rel_err(y, odd_ref(x[:, 0], default_log_taps(100.0))) < 1e-10
    rc = main(["batch", str(src / "backwards.csv"), "-o", str(out), *CPU, "--fs", "100"])
    err = capsys.readouterr().err
    assert rc == 0 and "warning: backwards.csv: non-monotonic timestamps" in err


@pytest.mark.parametrize("gaps", ["split", "interpolate"])
def test_nan_gaps(tmp_path, rng, gaps, capsys):
    """split: gaps stay (empty stays empty, NaN stays NaN), each run equals the odd-extended filter of the
    run; interpolate: equals that of the linearly filled signal, no gaps left. NaN never spreads."""
    t, x = log_frame(rng, n=2400, channels=2)
    x[700:760, 0] = np.nan  # written as empty fields (nulls)
    x[1500, 0] = np.nan
    src = write_csv(tmp_path / "gappy.csv", t, x)
    lines = src.read_text().splitlines()
    row = lines[1901].split(",")
    row[1] = "nan"  # one literal NaN (stays NaN, not null)
    lines[1901] = ",".join(row)
    src.write_text("\n".join(lines) + "\n")
    x[1900, 0] = np.nan
    out = tmp_path / "out"
    rc = main(["batch", str(src), "-o", str(out), *CPU, "--gaps", gaps, "--taps", "101"])
    err = capsys.readouterr().err
    assert rc == 0, err
    h = sigconv.design_fir("bandpass", (0.5, 40.0), 100.0, numtaps=101)
    tab = read_csv(out / "gappy.csv")
    y0 = tab.column("ch0").to_numpy(zero_copy_only=False)
    assert rel_err(tab.column("ch1").to_numpy(), odd_ref(x[:, 1], h)) < 1e-10
    bad = np.isnan(x[:, 0])
    if gaps == "split":
        assert np.array_equal(np.isnan(y0), bad)  # not one NaN more
        assert tab.column("ch0").null_count == 62  # gaps stay gaps (pyarrow reads "nan" as null too)
        assert "gappy.csv: column 'ch0': 62 missing sample(s) left as gaps; 4 run(s)" in err
        for a, e in edges.runs(~bad):
            ref = odd_ref(x[a:e, 0], h)
            assert rel_err(y0[a:e], ref) < 1e-10, (a, e, first_bad(y0[a:e], ref, 1e-10))
    else:
        assert np.isfinite(y0).all() and tab.column("ch0").null_count == 0
        idx = np.arange(len(t))
        filled = x[:, 0].copy()
        filled[bad] = np.interp(idx[bad], idx[~bad], x[~bad, 0])
        assert rel_err(y0, odd_ref(filled, h)) < 1e-10
        assert "62 missing sample(s) interpolated" in err


# ------------------------------------------------------------------------------------ edges (--edges odd|zero)


def test_offset_log_has_no_edge_transient(tmp_path, rng, capsys):
    """A 60 s, 100 Hz log at an offset of 20 (a temperature) with a 0.5-amplitude 3 Hz sine and noise, default
    filter (band-pass 0.5-40 Hz, 661 taps = 6.6 s). --edges zero: the zero padding is a step of 20 that the
    band-pass turns into a transient of 0.58 x 20 = 11.5 (its step response peaks at 0.58), 16-19x the
    interior's peak of about 0.6; asserted over 10x. --edges odd (the default): the offset never steps (the
    reflection keeps the edge value and slope); the worst case is an edge at a crest of the sine, where the
    reflected part's mean sits 2A = 1 above the signal's: a step of 2A, transient <= 0.58 x 2A on top of the
    sine's A, so the first and last 5 s peak at most about 2.2x the interior; asserted <= 2.5x (measured
    0.95-1.48x over 25 phases)."""
    fs, n = 100.0, 6000
    t = np.arange(n) / fs
    x = 20.0 + 0.5 * np.sin(2 * np.pi * 3.0 * t + rng.uniform(0, 2 * np.pi)) + 0.05 * rng.standard_normal(n)
    src = write_csv(tmp_path / "in" / "temp.csv", t, x[:, None], names=["temp"])
    np.save(tmp_path / "in" / "temp2.npy", x)
    (tmp_path / "in" / "temp2.npy.json").write_text('{"fs": 100}')
    e = int(5 * fs)
    ratio, desc = {}, {}
    for rule in ("odd", "zero"):
        out = tmp_path / rule
        argv = ["batch", str(src.parent), "-o", str(out), *CPU, "-j", "1"]
        assert main(argv + (["--edges", rule] if rule == "zero" else [])) == 0  # odd: the default
        err = capsys.readouterr().err
        desc[rule] = [ln for ln in err.splitlines() if ln.strip().startswith("100 Hz:")]
        y = read_csv(out / "temp.csv").column("temp").to_numpy()
        np.testing.assert_array_equal(np.load(out / "temp2.npy"), y)  # NPY: the same rule, the same values
        ratio[rule] = np.abs(np.r_[y[:e], y[-e:]]).max() / np.abs(y[e:-e]).max()
    with capsys.disabled():
        print(f"\nedge peak / interior peak: --edges odd {ratio['odd']:.2f}, --edges zero {ratio['zero']:.2f}")
    assert ratio["odd"] <= 2.5, ratio
    assert ratio["zero"] >= 10, ratio
    assert "(661 taps, zero phase, odd-reflected edges)" in desc["odd"][0], desc
    assert "(661 taps, zero phase, zero-padded edges)" in desc["zero"][0], desc


def _flt(h, C, phase):
    from sigconv.engine.audio import pcm_spec
    from sigconv.engine.file import CPUFileFilter

    return CPUFileFilter(h, C, pcm_spec("DOUBLE"), phase=phase)


def _check(y, ref, what):
    assert np.isfinite(y).all(), (what, "unwritten", np.argwhere(~np.isfinite(y))[:1].tolist())
    assert rel_err(y, ref) <= 1e-10, (what, rel_err(y, ref), first_bad(y, ref, 1e-10))


@pytest.mark.parametrize("phase", ["zero", "linear"])
def test_filter_into_odd_edges_equals_scipy(rng, phase):
    """filter_into with the odd extension equals odd_ref (explicit reflection, scipy.signal convolve "full" /
    lfilter, sliced) to 1e-10 relative: random odd K (and even K for linear phase), random lengths, 1-2
    channels, blocks shorter than K (down to 1 row), runs shorter than the extension (n = 1, 2, 5 with K = 31,
    reflected where they can be, then held); outputs poisoned with NaN first. Pushing the run in random pieces
    (as the streamed tables do) gives the same bits as one push."""
    import scipy.signal

    cases = [(31, n, C, f) for n in (1, 2, 5, 15, 16, 17, 31, 32) for C in (1, 2) for f in (1, 7, 30, 31, 1 << 18)]
    for _ in range(40):
        K = 2 * int(rng.integers(0, 60)) + 1 + (phase == "linear" and rng.random() < 0.3)
        frames = int(rng.choice([max(1, K // 4), max(1, K - 1), K + 5, 333, 1 << 18]))  # often shorter than K
        cases.append((K, int(rng.integers(1, 2500)), int(rng.integers(1, 3)), frames))
    for K, n, C, frames in cases:
        h = rng.standard_normal(K)
        x = 20.0 + rng.standard_normal((n, C))
        flt = _flt(h, C, phase)
        ext = edges.extension(K, flt.delay, "odd")
        assert ext == ((K // 2, K // 2) if phase == "zero" else (K - 1, 0))
        y = np.full((n, C), np.nan)
        edges.filter_into(flt, x, y, frames=frames, ext=ext)
        _check(y, odd_ref(x, h, phase), (K, n, C, frames))
        pieces, cut = [], np.sort(rng.integers(0, n + 1, size=int(rng.integers(0, 6))))
        feed = edges.ExtendedFeed(_flt(h, C, phase), ext, pieces.append, frames)
        for a, b in zip(np.r_[0, cut], np.r_[cut, n]):
            feed.push(x[a:b])
        feed.close()
        assert np.array_equal(np.concatenate(pieces), y), (K, n, C, frames, cut)
        z = np.full((n, C), np.nan)  # --edges zero: no extension, the filter's own zero padding (SciPy semantics)
        assert edges.extension(K, flt.delay, "zero") == (0, 0)
        edges.filter_into(_flt(h, C, phase), x, z, frames=frames, ext=(0, 0))
        _check(z, scipy.signal.convolve(x, h[:, None], "same") if phase == "zero" else
               scipy.signal.lfilter(h, 1.0, x, axis=0), ("zero", K, n, C, frames))


@pytest.mark.parametrize("gaps", ["split", "interpolate"])
def test_column_without_finite_values_is_written_as_gaps(rng, gaps):
    """A column of nothing but NaN and inf comes out as NaN (gaps, as every gap is written: an output never holds
    inf), with a warning naming it; the other columns are filtered as usual."""
    h = rng.standard_normal(31)
    x = rng.standard_normal((80, 2))
    x[:, 1] = np.inf
    x[::3, 1] = -np.inf
    x[5, 1] = np.nan
    s = sigconv.BatchSettings(gaps=gaps, edges="odd", kernel=sigconv.KernelChoice(backend="cpu"))
    warnings = []
    y = filters.filter_columns(x.copy(), h, s, warnings, ["a", "b"])
    assert np.isnan(y[:, 1]).all()
    _check(y[:, 0], odd_ref(x[:, 0], h), "finite column")
    assert "column 'b' holds no finite values; written as gaps (NaN)" in warnings, warnings


@pytest.mark.parametrize("gaps", ["split", "interpolate"])
def test_short_runs_between_gaps_odd_edges(rng, gaps):
    """--gaps split: runs of 1, 2, 5 and 40 samples between NaN gaps (K = 31) each get their own extension
    (odd_ref of the run), never a crash, and the warning says what happens; interpolate: the filled column is
    extended as a whole."""
    h = rng.standard_normal(31)
    x = 20.0 + rng.standard_normal(80)
    x[[1, 4, 5, 11, 12, 13, 19]] = np.nan  # runs [0,1) [2,4) [6,11) [14,19) [20,80)
    s = sigconv.BatchSettings(gaps=gaps, edges="odd", kernel=sigconv.KernelChoice(backend="cpu"))
    warnings = []
    y = filters.filter_columns(x[:, None].copy(), h, s, warnings, ["v"])[:, 0]
    bad = np.isnan(x)
    if gaps == "split":
        assert np.array_equal(np.isnan(y), bad)
        rr = edges.runs(~bad)
        assert [e - a for a, e in rr] == [1, 2, 5, 5, 60]
        for a, e in rr:
            _check(y[a:e], odd_ref(x[a:e], h), (a, e))
        assert any("4 run(s) between gaps are shorter than the filter (31 taps): their ends are extended by odd "
                   "reflection" in w for w in warnings), warnings
    else:
        idx = np.arange(80)
        filled = x.copy()
        filled[bad] = np.interp(idx[bad], idx[~bad], x[~bad])
        _check(y, odd_ref(filled, h), "interpolate")


def test_rerun_with_other_edges_redoes_tables_only(tmp_path, rng, capsys):
    """--edges is part of the settings hash of tables and NPY logs: a rerun with another --edges redoes them,
    the same --edges skips them; audio files (always zero padding) are not redone for --edges alone."""
    src = _tree(tmp_path, rng, n=2, rows=700)
    write_audio(src / "r.wav", rng.uniform(-0.3, 0.3, (9000, 1)).astype(np.float32), fs=8000,
                subtype="FLOAT")
    out = tmp_path / "out"
    base = ["batch", str(src), "-o", str(out), *CPU, "-j", "1", "--taps", "101"]
    assert main(base) == 0 and "3 done, 0 skipped" in capsys.readouterr().err
    odd = (out / "c0.csv").read_bytes()
    assert main(base + ["--edges", "odd"]) == 0 and "0 done, 3 skipped" in capsys.readouterr().err
    assert main(base + ["--edges", "zero"]) == 0 and "2 done, 1 skipped" in capsys.readouterr().err
    assert (out / "c0.csv").read_bytes() != odd
    assert main(base + ["--edges", "zero"]) == 0 and "0 done, 3 skipped" in capsys.readouterr().err
    assert main(base) == 0 and "2 done, 1 skipped" in capsys.readouterr().err
    assert (out / "c0.csv").read_bytes() == odd
    assert len(manifest(out)) == 3


# ------------------------------------------------------------------------------------ resume, crash, Ctrl-C


def _tree(tmp_path, rng, n=6, rows=700):
    src = tmp_path / "in"
    for i in range(n):
        t, x = log_frame(rng, n=rows, channels=2)
        write_csv(src / f"c{i}.csv", t, x)
    return src


def _fault_env(spec: str) -> dict:
    """The environment of a CLI subprocess whose atomic renames are faulted (tests/shims/sitecustomize.py)."""
    return {"PYTHONPATH": os.pathsep.join([str(SHIMS), str(ROOT), os.environ.get("PYTHONPATH", "")]),
            "SIGCONV_TEST_AT_REPLACE": spec}


def _outputs(out):
    return sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()
                  and p.name != MANIFEST and not p.name.startswith(".sigconv-batch.lock"))


@pytest.mark.parametrize("jobs", ["2", "1"], ids=["worker-killed", "coordinator-killed"])
def test_rerun_after_crash(tmp_path, rng, jobs):
    """SIGKILL mid-file (a pool worker with --jobs 2, the whole batch with --jobs 1), right before c3.csv's
    finished output is moved into place: finished files are intact, nothing partial is visible, the rerun does
    only the rest, no duplicates anywhere."""
    src = _tree(tmp_path, rng)
    out = tmp_path / "out"
    args = ["batch", src, "-o", out, *CPU, "-j", jobs, "--taps", "51"]
    r = run_cli(*args, env=_fault_env("kill:c3.csv"))
    assert r.returncode == (1 if jobs == "2" else -signal.SIGKILL), r.stderr
    assert not (out / "c3.csv").exists()
    visible = [p for p in _outputs(out) if not p.startswith(".")]
    if jobs == "2":
        assert "failed: c3.csv: a worker process died" in r.stderr
    done_before = {Path(rec["output"]).name for rec in manifest(out) if rec["status"] == "done"}
    # a file finished by a surviving worker while the pool broke has its output but is recorded as failed
    # (its result was lost with the pool): it is redone, and the rerun writes the same bytes
    assert done_before <= set(visible) and "c3.csv" not in done_before and len(done_before) >= 1
    before = {name: (out / name).read_bytes() for name in visible}
    r2 = run_cli(*args)
    assert r2.returncode == 0, r2.stderr
    assert f"{6 - len(done_before)} done, {len(done_before)} skipped, 0 failed" in r2.stderr
    assert _outputs(out) == [f"c{i}.csv" for i in range(6)]  # no .part left, no duplicates
    for name, data in before.items():
        assert (out / name).read_bytes() == data
    recs = manifest(out)
    assert len(recs) == 6 and len({rec["input"] for rec in recs}) == 6 and {rec["status"] for rec in recs} == {"done"}


def test_ctrl_c_leaves_no_partial_files(tmp_path, rng):
    """SIGINT while a file is in flight (c2.csv waits 30 s before its output is moved into place): exit 130,
    finished files complete and recorded, no partial file; the rerun finishes the batch."""
    src = _tree(tmp_path, rng, n=5)
    out = tmp_path / "out"
    env = dict(os.environ, **_fault_env("sleep:c2.csv:30"))
    p = subprocess.Popen([sys.executable, "-m", "sigconv", "batch", str(src), "-o", str(out), *CPU, "-j", "2",
                          "--taps", "51"], env=env, stderr=subprocess.PIPE, text=True, preexec_fn=terminal_signals)
    deadline = time.time() + 60
    while time.time() < deadline:
        if (out / MANIFEST).exists() and len(manifest(out)) >= 3:
            break
        time.sleep(0.1)
    p.send_signal(signal.SIGINT)
    err = p.communicate(timeout=60)[1]
    assert p.returncode == 130, err
    assert "interrupted" in err and "run the same command again" in err and "Traceback" not in err
    assert not any(n.startswith(".") and n.endswith(".part") for n in (x.name for x in out.rglob("*")))
    assert not (out / "c2.csv").exists()
    for rec in manifest(out):
        assert rec["status"] == "done" and Path(rec["output"]).exists()
    r = run_cli("batch", src, "-o", out, *CPU, "-j", "2", "--taps", "51")
    assert r.returncode == 0 and _outputs(out) == [f"c{i}.csv" for i in range(5)]


def test_rerun_skips_and_redoes_changed(tmp_path, rng, capsys):
    """A rerun skips unchanged files, redoes a file whose mtime/size changed, and redoes all when the filter
    settings change; --force redoes all; the manifest keeps one record per input."""
    src = _tree(tmp_path, rng, n=3)
    out = tmp_path / "out"
    base = ["batch", str(src), "-o", str(out), *CPU, "-j", "1", "-q"]
    assert main(base) == 0
    assert main(base[:-1]) == 0 and "0 done, 3 skipped" in capsys.readouterr().err
    os.utime(src / "c1.csv", ns=(time.time_ns(), time.time_ns()))
    assert main(base[:-1]) == 0 and "1 done, 2 skipped" in capsys.readouterr().err
    assert main([*base[:-1], "--lowpass", "20"]) == 0 and "3 done, 0 skipped" in capsys.readouterr().err
    assert main([*base[:-1], "--lowpass", "20", "--force"]) == 0 and "3 done, 0 skipped" in capsys.readouterr().err
    assert len(manifest(out)) == 3


# ------------------------------------------------------------------------------------ output safety, usage


def test_output_path_escapes_refused(tmp_path, rng, capsys):
    """Names with '..', a symlinked folder in OUTDIR pointing outside, OUTDIR equal to the input folder,
    two inputs with one output name: refused; inputs inside OUTDIR are never picked up; nothing is written
    outside OUTDIR."""
    src = _tree(tmp_path, rng, n=2)
    (src / "sub").mkdir()
    (src / "sub" / "s.csv").write_text((src / "c0.csv").read_text())
    other = tmp_path / "other"
    other.mkdir()
    (other / "c1.csv").write_text((src / "c0.csv").read_text())
    outside = tmp_path / "outside"
    outside.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").symlink_to(outside)
    rc = main(["batch", str(src / "*" / ".." / "c0.csv"), str(src / "sub"), str(src / "c1.csv"),
               str(other / "c1.csv"), "-o", str(out), *CPU, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 1
    assert "holds '..'" in err
    assert "collides with the output of" in err
    assert list(outside.iterdir()) == []
    # the symlinked folder: sub/s.csv mirrored under the link is refused
    rc = main(["batch", str(src), "-r", "-o", str(out), *CPU, "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "would land outside OUTDIR" in err and list(outside.iterdir()) == []
    rc = main(["batch", str(src), "-o", str(src), *CPU])
    assert rc == 2 and "outputs would overwrite the inputs" in capsys.readouterr().err
    inner = src / "cleaned"
    assert main(["batch", str(src), "-o", str(inner), *CPU, "-q"]) == 0
    assert main(["batch", str(src), "-r", "-o", str(inner), *CPU, "-j", "1"]) == 0
    err = capsys.readouterr().err
    assert "cleaned/" not in "".join(p.relative_to(inner).as_posix() for p in inner.rglob("*.csv")), err


@pytest.mark.parametrize("argv,needle", [
    (["batch", "IN"], "the following arguments are required: -o/--output-dir"),
    (["batch", "NOPE/x.csv", "-o", "OUT"], "no such file or folder"),
    (["batch", "IN/*.parquet", "-o", "OUT"], "the pattern matches no files"),
    (["batch", "IN", "-o", "OUT", "--jobs", "0"], "--jobs must be a positive integer"),
    (["batch", "IN", "-o", "OUT", "--gaps", "zero"], "invalid choice: 'zero'"),
    (["batch", "IN", "-o", "OUT", "--columns", "a,,b"], "--columns takes comma-separated column names"),
    (["batch", "IN", "-o", "IN/c0.csv"], "OUTDIR exists and is not a folder"),
    (["batch", "IN", "-o", "OUT", "--fs", "-3"], "--fs must be a positive frequency"),
    (["batch", "IN", "-o", "OUT", "--edges", "even"], "argument --edges: invalid choice: 'even'"),
])
def test_usage_errors_exit_2_one_line(tmp_path, rng, capsys, argv, needle):
    """Usage mistakes: exit 2 and one line on stderr, nothing written."""
    src = _tree(tmp_path, rng, n=1, rows=10)
    argv = [a.replace("IN", str(src)).replace("OUT", str(tmp_path / "out")) for a in argv]
    rc = main(argv)
    err = capsys.readouterr().err
    assert rc == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("sigconv: error: ") and needle in err, err


def test_spectral_guarded_and_per_rate_failures(tmp_path, rng, capsys):
    """--method spectral needs sigconv.engine.spectral (else exit 2, one line); a cutoff above a file's Nyquist
    fails that file only, with the rate in the reason."""
    import importlib.util

    src = _tree(tmp_path, rng, n=1, rows=800)
    write_audio(src / "r.wav", np.zeros((4000, 1), np.float32) + 0.01, fs=8000, subtype="FLOAT")
    if importlib.util.find_spec("sigconv.engine.spectral") is None:
        assert main(["batch", str(src), "-o", str(tmp_path / "o"), "--method", "spectral"]) == 2
        assert "--method spectral is not available" in capsys.readouterr().err
    else:  # spectral on audio files; logs are refused per file
        rc = main(["batch", str(src), "-o", str(tmp_path / "o"), *CPU, "--method", "spectral", "--n-fft", "256", "--noise-from", "0",
                   "0.2", "-j", "1"])
        err = capsys.readouterr().err
        assert rc == 1 and "8000 Hz: spectral gate" in err and "failed: c0.csv: --method spectral applies to audio" in err
    rc = main(["batch", str(src), "-o", str(tmp_path / "o2"), *CPU, "--lowpass", "1000", "-j", "1"])
    err = capsys.readouterr().err
    assert rc == 1 and "failed: c0.csv: at 100 Hz: cutoff must be strictly between 0 and Nyquist" in err
    assert "1 done" in err


# ------------------------------------------------------------------------------------ parallel runs


def test_pool_and_local_cluster_equal_single_process(tmp_path, rng):
    """--jobs 2 (process pool) and --scheduler local with 2 Dask workers give byte-identical outputs to
    one process, and the same manifest statuses."""
    src = _tree(tmp_path, rng, n=6, rows=900)
    np.save(src / "n.npy", rng.standard_normal((900, 2)))
    (src / "n.npy.json").write_text('{"fs": 100}')
    (src / "broken.csv").write_text("timestamp,a\n0,1\n0.01\n")
    runs = {}
    for name, extra in {"one": ["-j", "1"], "pool": ["-j", "2"], "dask": ["--scheduler", "local", "-j", "2"]}.items():
        out = tmp_path / name
        r = run_cli("batch", src, "-o", out, *CPU, "--taps", "101", *extra)
        assert r.returncode == 1, r.stderr
        assert "7 done, 0 skipped, 1 failed" in r.stderr, r.stderr
        runs[name] = {p: (out / p).read_bytes() for p in _outputs(out)}
        if name == "dask":
            assert "local Dask cluster, 2 worker(s)" in r.stderr
    assert runs["one"].keys() == runs["pool"].keys() == runs["dask"].keys()
    for p in runs["one"]:
        assert runs["one"][p] == runs["pool"][p] == runs["dask"][p], p


# ------------------------------------------------------------------------------------ GPU assignment (faked)


def test_gpu_count_without_cuda(tmp_path):
    """GPUs are counted from CUDA_VISIBLE_DEVICES or /proc (no CUDA context in the coordinator)."""
    proc = tmp_path / "gpus"
    proc.mkdir()
    for i in range(2):
        (proc / f"0000:0{i}:00.0").mkdir()
    assert runners.visible_gpu_count({}, str(proc)) == 2
    assert runners.visible_gpu_count({}, str(tmp_path / "none")) == 0
    assert runners.visible_gpu_count({"CUDA_VISIBLE_DEVICES": "1,3,5"}, str(proc)) == 3
    assert runners.visible_gpu_count({"CUDA_VISIBLE_DEVICES": ""}, str(proc)) == 0
    assert runners.visible_gpu_count({"CUDA_VISIBLE_DEVICES": "0,-1,2"}, str(proc)) == 1
    assert runners.visible_gpu_count({"SIGCONV_DISABLE_CUDA": "1"}, str(proc)) == 0


def test_gpu_plans():
    """Pool: round robin over the GPUs; LocalCluster: one worker per GPU with its own CUDA_VISIBLE_DEVICES
    and a GPU resource (more with --jobs, shared round robin); without GPUs, CPU workers."""
    assert runners.pool_gpu_plan(4, 0) == [None] * 4
    assert runners.pool_gpu_plan(5, 2, env={}) == ["0", "1", "0", "1", "0"]
    assert runners.pool_gpu_plan(3, 2, env={"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3", "2"]
    specs = runners.local_cluster_plan(2, 16, None, env={})
    assert [s["env"] for s in specs] == [{"CUDA_VISIBLE_DEVICES": "0"}, {"CUDA_VISIBLE_DEVICES": "1"}]
    assert all(s["resources"] == {"GPU": 1} and s["nthreads"] == 1 for s in specs)
    assert [s["env"]["CUDA_VISIBLE_DEVICES"] for s in runners.local_cluster_plan(2, 16, 4, env={})] == \
        ["0", "1", "0", "1"]
    cpu = runners.local_cluster_plan(0, 3, None)
    assert len(cpu) == 3 and all(s["env"] == {} and not s["resources"] for s in cpu)
    assert len(runners.local_cluster_plan(0, 16, 2)) == 2


def _gpu_tasks(tmp_path, rng, n):
    src = _tree(tmp_path, rng, n=n, rows=300)
    from sigconv.engine.batch.manifest import settings_hash

    s = sigconv.BatchSettings(fir=sigconv.FirSpec(taps=31), kernel=sigconv.KernelChoice(backend="cpu"))
    out = tmp_path / "out"
    return [{"input": str(p), "rel": p.name, "output": str(out / p.name), "outdir": str(out), "kind": "csv",
             "size": 0, "mtime_ns": 0, "hash": settings_hash(s.manifest_dict()), "settings": s}
            for p in sorted(src.iterdir())]


def test_pool_pins_one_gpu_per_worker_faked(tmp_path, rng):
    """With a faked count of 2 GPUs each pool worker gets CUDA_VISIBLE_DEVICES 0 or 1 before any task."""
    res = [r for _, r in runners.run_pool(_gpu_tasks(tmp_path, rng, 6), jobs=2, n_gpus=2)]
    assert all(r["status"] == "done" for r in res), res
    by_pid = {}
    for r in res:
        by_pid.setdefault(r["pid"], set()).add(r["gpu"])
    assert all(len(v) == 1 for v in by_pid.values()) and set().union(*by_pid.values()) <= {"0", "1"}


def test_local_cluster_one_worker_per_gpu_faked(tmp_path, rng):
    """--scheduler local with a faked count of 2 GPUs: 2 Dask workers, one pinned to each GPU (the tasks
    run on the cpu backend and report the CUDA_VISIBLE_DEVICES they saw)."""
    pytest.importorskip("distributed")
    info = {}
    res = [r for _, r in runners.run_dask(_gpu_tasks(tmp_path, rng, 8), "local", None, 2, info)]
    assert info["workers"] == 2 and "GPUs 0, 1" in info["cluster"]
    assert all(r["status"] == "done" for r in res), res
    by_pid = {}
    for r in res:
        by_pid.setdefault(r["pid"], set()).add(r["gpu"])
    assert all(len(v) == 1 for v in by_pid.values())
    assert set().union(*by_pid.values()) <= {"0", "1"} and len(by_pid) <= 2


# ------------------------------------------------------------------------------------ progress


def test_progress_bar_files_bytes_throughput(tmp_path, rng):
    """The bar shows files M/N, bytes and a transfer rate; with stderr not a TTY (run_cli) nothing is drawn."""
    import io

    from rich.console import Console

    from sigconv.cli.batch import _Progress
    from sigconv.engine.batch.coordinator import BatchProgress

    buf = io.StringIO()
    con = Console(file=buf, force_terminal=True, width=150)
    with _Progress(True, console=con) as bar:
        bar.advance(BatchProgress("a.csv", 1_000_000, "done", 3, 3_000_000))
        time.sleep(0.2)
        bar.advance(BatchProgress("b.csv", 1_000_000, "failed", 3, 3_000_000))
        bar.bar.refresh()
    text = buf.getvalue()
    assert "2/3" in text and "MB/s" in text and "2.0/3.0 MB" in text
    src = _tree(tmp_path, rng, n=2, rows=100)
    r = run_cli("batch", src, "-o", tmp_path / "o", *CPU, "--taps", "11")
    assert r.returncode == 0 and "\x1b[" not in r.stderr and "━" not in r.stderr


@pytest.mark.gpu
def test_gpu_batch_matches_cpu(tmp_path, rng):
    """On a GPU: --backend cuda (float32 on the device) matches the cpu run within float32 tolerance; the manifest
    records the GPU each file ran on."""
    src = _tree(tmp_path, rng, n=4, rows=5000)
    rc = run_cli("batch", src, "-o", tmp_path / "cpu", *CPU, "-j", "1")
    rg = run_cli("batch", src, "-o", tmp_path / "gpu", "--backend", "cuda", "-j", "2")
    assert rc.returncode == 0 and rg.returncode == 0, rg.stderr
    for i in range(4):
        a = read_csv(tmp_path / "cpu" / f"c{i}.csv")
        b = read_csv(tmp_path / "gpu" / f"c{i}.csv")
        for c in ("ch0", "ch1"):
            assert rel_err(b.column(c).to_numpy(), a.column(c).to_numpy()) < 1e-5
    recs = manifest(tmp_path / "gpu")
    assert all(r["backend"] == "cuda" and r.get("gpu") is not None for r in recs), recs


def test_cuda_backend_without_gpu_fails_early(tmp_path, rng, capsys):
    """--backend cuda where CUDA cannot run: exit 1 with one line, before any file is touched."""
    from sigconv._core import devices as _devices

    if _devices.cuda_reason() is None:
        pytest.skip("a GPU is usable here")
    src = _tree(tmp_path, rng, n=1, rows=10)
    assert main(["batch", str(src), "-o", str(tmp_path / "o"), "--backend", "cuda"]) == 1
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "backend 'cuda' is not usable here" in err
    assert not (tmp_path / "o" / MANIFEST).exists()


# ------------------------------------------------------------------------------------ streamed tables


@pytest.fixture
def small_blocks(monkeypatch):
    """Filter blocks of 777 rows (instead of ~2^18) in both paths, so that small files cross block edges."""
    from sigconv.engine.batch import stream

    orig = filters.block_filter

    def make(*a, **k):
        f = orig(*a, **k)
        f.preferred_frames = 777
        return f

    monkeypatch.setattr(filters, "block_filter", make)
    calls = []
    orig_do = stream.do_table

    def spy(*a, **k):
        calls.append(orig_do(*a, **k))
        return calls[-1]

    monkeypatch.setattr(stream, "do_table", spy)
    return calls


def _stream_tree(tmp_path, rng, n=3000):
    src = tmp_path / "in"
    t, x = log_frame(rng, n=n, channels=2)
    k = np.arange(n) % 7
    label = np.array([f"w{i % 3}" for i in range(n)])
    write_csv(src / "a.csv", t, x, extra={"k": k, "label": label})
    # a string that needs quoting, late in the file: every string is quoted ("needed" style), as in memory
    write_csv(src / "q.csv", t, x[:, :1], extra={"note": np.array(['"a,b"' if i == n - 5 else "x" for i in range(n)])})
    ts = pa.array((t * 1e9).astype("int64")).cast(pa.timestamp("ns"))
    pq.write_table(pa.table({"when": ts, "p": x[:, 0], "q": x[:, 1].astype(np.float32), "k": k,
                             "flag": k % 3 == 0, "s": label}), src / "b.parquet")
    return src


def _run_both(tmp_path, monkeypatch, src, extra=(), block=1 << 20, rows=1 << 16, capsys=None, backend=CPU):
    from sigconv.engine.batch import stream

    outs = {}
    for name, thr in (("mem", 1 << 60), ("st", 0)):
        monkeypatch.setattr(stream, "STREAM_MIN_BYTES", thr)
        monkeypatch.setattr(stream, "CSV_BLOCK_BYTES", block)
        monkeypatch.setattr(stream, "PARQUET_BATCH_ROWS", rows)
        out = tmp_path / f"{name}-{block}-{rows}"
        rc = main(["batch", str(src), "-o", str(out), *backend, "-j", "1", "--taps", "101", *extra])
        err = capsys.readouterr().err if capsys else ""
        assert rc == 0, err
        outs[name] = (out, err)
    return outs


@pytest.mark.parametrize("block,rows", [(200, 3), (2000, 40), (50_000, 1000), (1 << 20, 1 << 16)],
                         ids=["batches-shorter-than-delay", "small", "medium", "default"])
def test_streamed_table_equals_in_memory(tmp_path, rng, monkeypatch, small_blocks, capsys, block, rows):
    """Streamed CSV is byte-identical and streamed Parquet value-identical (schema included) to the in-memory
    path, for batches shorter than the filter delay (50 rows) up to the defaults; time, pass-through and
    quoted columns unchanged; int channels become float64, float32 stays float32."""
    src = _stream_tree(tmp_path, rng)
    outs = _run_both(tmp_path, monkeypatch, src, block=block, rows=rows, capsys=capsys)
    assert small_blocks == [True, True, True]  # every table streamed (none fell back)
    assert "(101 taps, zero phase, odd-reflected edges)" in outs["st"][1]  # the new default
    mem, st = outs["mem"][0], outs["st"][0]
    for name in ("a.csv", "q.csv"):
        assert (st / name).read_bytes() == (mem / name).read_bytes(), name
    a = read_csv(st / "a.csv")
    assert a.schema.field("k").type == pa.float64() and a.column("label").to_pylist()[:3] == ["w0", "w1", "w2"]
    src_lines = (src / "a.csv").read_text().splitlines()
    out_lines = (st / "a.csv").read_text().splitlines()
    assert [ln.split(",")[0] for ln in out_lines] == [ln.split(",")[0] for ln in src_lines]  # time text as is
    assert '"a,b"' in (st / "q.csv").read_text()
    b_mem, b_st = pq.read_table(mem / "b.parquet"), pq.read_table(st / "b.parquet")
    assert b_st.schema.equals(b_mem.schema, check_metadata=True) and b_st.equals(b_mem)
    assert b_st.schema.field("q").type == pa.float32() and b_st.schema.field("k").type == pa.float64()
    assert b_st.column("when").equals(pq.read_table(src / "b.parquet").column("when"))
    h = sigconv.design_fir("bandpass", (0.5, 40.0), 100.0, numtaps=101)
    y = b_st.column("p").to_numpy()
    ref = odd_ref(pq.read_table(src / "b.parquet").column("p").to_numpy(), h)
    assert rel_err(y, ref) < 1e-10, first_bad(y, ref, 1e-10)


@pytest.mark.parametrize("extra", [("--phase", "linear"), ("--edges", "zero")], ids=["linear-phase", "edges-zero"])
def test_streamed_equals_in_memory_other_edges(tmp_path, rng, monkeypatch, small_blocks, capsys, extra):
    """Linear phase (left extension K-1 = 100 rows, none on the right) and --edges zero (no extension) stream
    byte-identically too, with record batches of 3 rows (the stream waits for the 101 rows it reflects)."""
    src = _stream_tree(tmp_path, rng, n=1500)
    outs = _run_both(tmp_path, monkeypatch, src, extra=extra, block=200, rows=3, capsys=capsys)
    assert small_blocks == [True, True, True]
    mem, st = outs["mem"][0], outs["st"][0]
    for name in ("a.csv", "q.csv"):
        assert (st / name).read_bytes() == (mem / name).read_bytes(), name
    assert pq.read_table(st / "b.parquet").equals(pq.read_table(mem / "b.parquet"))
    h = sigconv.design_fir("bandpass", (0.5, 40.0), 100.0, numtaps=101)
    x = pq.read_table(src / "b.parquet").column("p").to_numpy()
    ref = odd_ref(x, h, "linear") if extra[0] == "--phase" else sigconv.apply_fir(x, h, backend="cpu")
    y = pq.read_table(st / "b.parquet").column("p").to_numpy()
    assert rel_err(y, ref) < 1e-10, first_bad(y, ref, 1e-10)


def test_streamed_warnings_and_fs(tmp_path, rng, monkeypatch, small_blocks, capsys):
    """The time pass reports irregular timestamps as the in-memory path does; --fs without a time column
    streams too (no time pass), and --columns leaves the other numeric columns as they were."""
    src = tmp_path / "in"
    t, x = log_frame(rng, n=2500, channels=3)
    t[1200:] += 0.5
    write_csv(src / "irr.csv", t, x, tfmt="{:.3f}")
    (src / "notime.csv").write_text("ch0,ch1\n" + "".join(f"{a!r},{b!r}\n" for a, b in x[:, :2].tolist()))
    outs = _run_both(tmp_path, monkeypatch, src, extra=("--fs", "100", "--columns", "ch1"), block=3000,
                     capsys=capsys)
    assert small_blocks == [True, True]
    for name in ("irr.csv", "notime.csv"):
        assert (outs["st"][0] / name).read_bytes() == (outs["mem"][0] / name).read_bytes(), name
    assert "irregular timestamps: 1 of 2499 steps" in outs["st"][1]
    assert [ln for ln in outs["st"][1].splitlines() if ln.startswith("warning")] == \
        [ln for ln in outs["mem"][1].splitlines() if ln.startswith("warning")]


@pytest.mark.parametrize("gaps", ["split", "interpolate"])
def test_streamed_gap_falls_back_to_memory(tmp_path, rng, monkeypatch, small_blocks, capsys, gaps):
    """A gap late in a filtered channel abandons the stream (no temporary file left) and the file is redone
    in memory: the same bytes and the same warnings as the in-memory path. An integer column turning
    decimal after the first block (read_csv unifies the blocks' types) falls back likewise."""
    src = tmp_path / "in"
    t, x = log_frame(rng, n=3000, channels=2)
    x[2500:2510, 1] = np.nan
    write_csv(src / "gap.csv", t, x)
    k = [str(i % 9) for i in range(3000)]
    k[2900] = "2.5"
    write_csv(src / "types.csv", t, x[:, :1], extra={"k": k})
    pq.write_table(pa.table({"t": t, "v": x[:, 1]}), src / "g.parquet")
    outs = _run_both(tmp_path, monkeypatch, src, extra=("--gaps", gaps), block=4000, rows=500, capsys=capsys)
    assert small_blocks == [False, False, False]
    g_st, g_mem = (pq.read_table(outs[k][0] / "g.parquet") for k in ("st", "mem"))
    assert g_st.schema.equals(g_mem.schema)
    for c in g_st.column_names:  # NaN stays NaN (not null) in Parquet: compared with NaN == NaN
        np.testing.assert_array_equal(g_st.column(c).to_numpy(), g_mem.column(c).to_numpy())
    for name in ("gap.csv", "types.csv"):
        assert (outs["st"][0] / name).read_bytes() == (outs["mem"][0] / name).read_bytes(), name
    assert read_csv(outs["st"][0] / "types.csv").schema.field("k").type == pa.float64()
    assert outs["st"][1].count("10 missing sample(s)") == 2
    assert [ln for ln in outs["st"][1].splitlines() if ln.startswith("warning")] == \
        [ln for ln in outs["mem"][1].splitlines() if ln.startswith("warning")]
    assert not [p for p in outs["st"][0].iterdir() if p.name.endswith(".part")]


def test_streamed_csv_peak_memory_bounded(tmp_path, rng):
    """A 159 MB CSV (1.5 M rows, 5 channels) is filtered with a peak RSS under 400 MB (measured about 275 MB on
    the 2-core machine; the in-memory path peaks at about 680 MB on this file). What grows with the file is
    the time pass (about 40 bytes per row: the time column and its spacings); the filtering pass holds a few
    filter blocks. The output equals the odd-extended reference."""
    from sigconv.engine.batch import stream

    src = tmp_path / "big.csv"
    rows, step = 1_500_000, 250_000
    with open(src, "wb") as f:
        w = None
        for s0 in range(0, rows, step):
            i = np.arange(s0, s0 + step)
            tab = pa.table({"timestamp": i / 100.0, **{f"ch{c}": rng.standard_normal(step) + np.sin(i * (0.3 + c))
                                                        for c in range(5)}})
            w = w or pcsv.CSVWriter(f, tab.schema)
            w.write_table(tab)
        w.close()
    size = src.stat().st_size
    assert size > 2 * stream.STREAM_MIN_BYTES
    out = tmp_path / "out"
    rc, peak_kb, err = cli_peak_rss("batch", src, "-o", out, "--backend", "cpu", "-q", timeout=300)
    assert rc == 0, err
    print(f"peak RSS {peak_kb / 1024:.0f} MB for a {size / 1e6:.0f} MB CSV")
    assert peak_kb < 400 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
    y = pcsv.read_csv(out / "big.csv", convert_options=pcsv.ConvertOptions(include_columns=["ch0", "timestamp"],
                                                                          column_types={"timestamp": pa.string()}))
    assert y.num_rows == rows
    x0 = pcsv.read_csv(src, convert_options=pcsv.ConvertOptions(include_columns=["ch0"])).column(0).to_numpy()
    ref = odd_ref(x0, default_log_taps(100.0))
    assert rel_err(y.column("ch0").to_numpy(), ref) < 1e-10


@pytest.mark.gpu
def test_gpu_streamed_equals_in_memory(tmp_path, rng, monkeypatch, small_blocks, capsys):
    """On a GPU: the cuda block filter streams too (same blocks as in memory): equal within float32 rounding
    (equal bits unless the kernels reduce in a varying order)."""
    src = _stream_tree(tmp_path, rng, n=5000)
    outs = _run_both(tmp_path, monkeypatch, src, block=3000, rows=300, capsys=capsys, backend=("--backend", "cuda"))
    assert small_blocks == [True, True, True]
    mem, st = outs["mem"][0], outs["st"][0]
    for name, read in (("a.csv", read_csv), ("b.parquet", pq.read_table)):
        a, b = read(st / name), read(mem / name)
        assert a.schema.equals(b.schema)
        for c in a.column_names:
            if pa.types.is_floating(a.schema.field(c).type):
                assert rel_err(a.column(c).to_numpy(), b.column(c).to_numpy()) < 1e-6, (name, c)
            else:
                assert a.column(c).equals(b.column(c)), (name, c)


def test_timestamp_column_with_a_missing_value():
    """Epoch-nanosecond timestamps with a null: seconds relative to the first row, NaN where missing, exact."""
    import pyarrow as pa

    from sigconv.engine.batch.logs import time_seconds

    col = pa.array([1_700_000_000_000_000_000, None, 1_700_000_000_010_000_001], type=pa.timestamp("ns"))
    t = time_seconds(col, "t", "x.parquet")
    assert t[0] == 0.0 and np.isnan(t[1]) and t[2] == 0.010000001


# ------------------------------------------------------------------------------------ engine API: settings, logs, run_batch


@pytest.mark.parametrize("settings,kind,digest", [
    ({}, "csv", "a39e5ba5c1fdb2a0"),
    ({}, "audio", "4bb49997f363f6b3"),
    ({"edges": "zero"}, "csv", "80f594fc56b10203"),
    ({"edges": "zero"}, "audio", "4bb49997f363f6b3"),
    ({"fir": {"band": (1, 30), "notch": (50, 100), "notch_width": 3}}, "csv", "c78a548f044eb13c"),
    ({"fs": 100, "time_column": "t", "columns": ("a", "b")}, "csv", "57a927d7ebafbade"),
    ({"fs": 100}, "audio", "d20922f4a0dcdf48"),
    ({"kernel": {"backend": "cpu", "block": 128}}, "csv", "a39e5ba5c1fdb2a0"),
    ({"method": "spectral"}, "audio", "7f34b01b19266a70"),
    ({"method": "spectral", "gate": {"noise_from": (0, 0.5), "share_mask": True, "n_std": 2, "freq_smooth_hz": 300,
                                     "time_smooth_ms": 20}}, "csv", "b0a5cae278e95505"),
])
def test_settings_hash_matches_existing_manifests(settings, kind, digest):
    """BatchSettings.manifest_dict hashes to the digests manifests already hold for the same options (recorded
    from `sigconv batch` before the settings were typed), so a rerun still skips the files they have as done;
    backend, variant and block never count, the edge rule not for audio."""
    from sigconv.engine.batch.manifest import settings_hash

    types = {"fir": sigconv.FirSpec, "gate": sigconv.GateSpec, "kernel": sigconv.KernelChoice}
    s = sigconv.BatchSettings(**{k: types[k](**v) if k in types else v for k, v in settings.items()})
    assert settings_hash(s.manifest_dict(), kind) == digest


@pytest.mark.parametrize("bad,needle", [
    ({"gaps": "zero"}, "gaps must be one of split, interpolate"),
    ({"edges": "even"}, "edges must be one of odd, zero"),
    ({"method": "iir"}, "method must be one of fir, spectral"),
    ({"fs": 0}, "fs must be a positive frequency"),
    ({"columns": ()}, "columns must be column names"),
    ({"fir": "bandpass"}, "fir must be a FirSpec"),
])
def test_batch_settings_validated_once(bad, needle):
    """BatchSettings refuses bad values with one line; good ones travel to workers as they are (pickled)."""
    import pickle

    with pytest.raises(ValueError, match=needle):
        sigconv.BatchSettings(**bad)
    s = sigconv.BatchSettings(method="spectral", gate=sigconv.GateSpec(noise_clip="noise.wav"), columns="a")
    assert s.kernel.op == "conv2d" and os.path.isabs(s.gate.noise_clip) and s.columns == ("a",)
    assert pickle.loads(pickle.dumps(s)) == s


def test_read_log_csv_parquet_and_errors(tmp_path, rng):
    """read_log (what the TUI loads logs with): the time column found by the batch's rule, timestamps in
    seconds (numbers as written, timestamp types from the first row), NaN where a value is missing, the rate from the median spacing (or fs); one-line
    InputError for a missing file, a table without numeric channels or without a time column and fs."""
    t, x = log_frame(rng, n=400, channels=2)
    x[10, 1] = np.nan
    write_csv(tmp_path / "a.csv", t + 5.0, x)
    d = sigconv.read_log(tmp_path / "a.csv")
    assert d.names == ["ch0", "ch1"] and d.time_name == "timestamp" and d.fs == 100.0 and d.warnings == []
    assert d.values.dtype == np.float64 and d.values.shape == (400, 2) and np.isnan(d.values[10, 1])
    np.testing.assert_allclose(d.timestamps, t + 5.0, atol=1e-9)
    np.testing.assert_array_equal(d.values[:, 0], x[:, 0])
    ts = pa.array((1_700_000_000_000_000_000 + np.arange(400) * 5_000_000).astype("int64")).cast(pa.timestamp("ns"))
    pq.write_table(pa.table({"when": ts, "p": x[:, 0], "label": ["a"] * 400}), tmp_path / "b.parquet")
    d = sigconv.read_log(tmp_path / "b.parquet")
    assert d.time_name == "when" and d.names == ["p"] and d.fs == 200.0 and d.timestamps[1] == 0.005
    (tmp_path / "c.csv").write_text("Time (s),v\n0,1\n0.5,2\n1.0,3\n")
    assert sigconv.read_log(tmp_path / "c.csv").time_name == "Time (s)"
    (tmp_path / "n.csv").write_text("a,b\n1,2\n3,4\n")
    d = sigconv.read_log(tmp_path / "n.csv", fs=10)
    assert d.time_name is None and d.timestamps is None and d.fs == 10.0 and d.names == ["a", "b"]
    for path, kw, needle in [("none.csv", {}, "no such file"), ("b.parquet", {"columns": ["label"]}, "not numeric"),
                             ("n.csv", {}, "no time column found")]:
        with pytest.raises(sigconv.InputError, match=needle) as e:
            sigconv.read_log(tmp_path / path, **kw)
        assert "\n" not in str(e.value)


def test_run_batch_api_reports_and_calls_back(tmp_path, rng):
    """sigconv.run_batch with a typed request: the report counts what the CLI prints, on_result sees every file
    run with the totals, and a rerun skips; a request that cannot work raises ValueError with one line."""
    src = _tree(tmp_path, rng, n=3, rows=300)
    (src / "bad.csv").write_text("timestamp,a\n")
    seen = []
    settings = sigconv.BatchSettings(fir=sigconv.FirSpec(taps=31), kernel=sigconv.KernelChoice(backend="cpu"))
    req = sigconv.BatchRequest([src], tmp_path / "out", settings, jobs=1)
    rep = sigconv.run_batch(req, on_result=seen.append)
    assert sorted(rep.done) == ["c0.csv", "c1.csv", "c2.csv"] and rep.skipped == 0 and not rep.interrupted
    assert rep.failed == [("bad.csv", "holds no data rows")] and rep.where == "in this process"
    assert set(rep.filters) == {100.0} and "(31 taps, zero phase, odd-reflected edges)" in rep.filters[100.0]
    assert rep.bytes == sum((src / n).stat().st_size for n in rep.done) and rep.manifest == tmp_path / "out" / MANIFEST
    assert [p.files_total for p in seen] == [4] * 4 and {p.rel for p in seen} == {"c0.csv", "c1.csv", "c2.csv",
                                                                                  "bad.csv"}
    rep = sigconv.run_batch(req)
    assert rep.done == [] and rep.skipped == 3 and len(rep.failed) == 1
    with pytest.raises(ValueError, match="no such file or folder"):
        sigconv.run_batch(sigconv.BatchRequest([tmp_path / "nope"], tmp_path / "out", settings))
