"""sigconv batch inputs: the sample rate of rounded timestamps."""


from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

import sigconv  # noqa: E402
from sigconv._core.errors import InputError  # noqa: E402
from sigconv.cli import main  # noqa: E402
from sigconv.engine.batch import logs  # noqa: E402
from sigconv.engine.batch.manifest import NAME as MANIFEST  # noqa: E402

CPU = ("--backend", "cpu")


def records(outdir) -> dict:
    lines = (Path(outdir) / MANIFEST).read_text().splitlines()
    return {Path(r["input"]).name: r for r in map(json.loads, filter(str.strip, lines))}



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
