"""Time the loaded signal's filter with every variant and block beside scipy, cuDNN and CuPy, and export the table.

The measurement is ``sigconv.bench.measure`` (float64 correctness check first, warm-up, median of many runs) on
the loaded data and the designed taps rather than random data. No Textual import here: the screens call these
functions from worker threads.
"""

from __future__ import annotations

import csv
import io
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

import numpy as np

import sigconv
from sigconv import bench

from .loading import Signal
from .running import TUI_HINTS, CancelledError, Settings, design, gauss_kernel, spectrogram

LATENCY_COLUMNS = ("impl", "backend", "block", "median ms", "GB/s", "x scipy", "x cudnn", "x cupy", "status")
#: The table on screen: the same cells, narrower (implementation and backend in one column, the speed-ups next to
#: the time), so that at 80 columns what a row is, its block, its time and its speed-up over scipy show without
#: scrolling; the rest scrolls sideways.
SCREEN_COLUMNS = ("impl", "block", "ms", "x scipy", "x cudnn", "x cupy", "GB/s", "status")


@dataclass
class LatencyRow:
    impl: str  # "sigconv:tiled", "scipy", "cudnn"
    backend: str
    kind: str  # "variant" | "peer"
    block: object = None
    ms: Optional[float] = None
    gbs: Optional[float] = None
    status: str = "ok"  # ok | flagged | FAIL | error | not available
    note: str = ""
    speedup: dict = field(default_factory=dict)  # baseline -> baseline ms / this ms
    chosen: bool = False
    fastest: bool = False

    @property
    def label(self) -> str:
        b = f" b={sigconv.format_block(self.block)}" if self.block is not None else ""
        return f"{self.impl}{b}"

    @property
    def short(self) -> str:
        """What the screen calls it: ``fft/cpu``, ``scipy/cpu`` (sigconv's prefix dropped, the backend added)."""
        return f"{self.impl.removeprefix('sigconv:')}/{self.backend}"

    @property
    def short_label(self) -> str:
        """:attr:`short` with the block: ``tiled/cuda b=256``."""
        return self.short + (f" b={sigconv.format_block(self.block)}" if self.block is not None else "")


@dataclass
class Latency:
    op: str
    case: str
    rows: list
    baselines: tuple = ("scipy", "cudnn", "cupy")
    date: str = ""
    dtype: str = "float32"


def signal_case_1d(x: np.ndarray, taps: np.ndarray) -> bench.Case1D:
    """A bench case whose inputs are the loaded signal (C, L) and the designed taps (not random data)."""

    class SignalCase1D(bench.Case1D):
        def inputs(self, xp, dtype, rng, nbuf):
            w = xp.asarray(taps[::-1].copy(), dtype=dtype)  # correlation with reversed taps = convolution
            xs = xp.ascontiguousarray(xp.asarray(x, dtype=dtype))
            return [(xs if i == 0 or xp is np else xs.copy(), w) for i in range(nbuf)]

        @property
        def label(self):
            return f"signal C={self.C} L={self.L} K={self.K}"

    return SignalCase1D(int(x.shape[0]), int(x.shape[1]), int(taps.size))


def signal_case_2d(S: np.ndarray, k: int) -> bench.Case2D:
    """A bench case smoothing the spectrogram ``S`` (F, T) with the k x k Gaussian of the 2-D run."""

    class SignalCase2D(bench.Case2D):
        def inputs(self, xp, dtype, rng, nbuf):
            w = xp.asarray(gauss_kernel(k)[None, None], dtype=dtype)
            xs = xp.ascontiguousarray(xp.asarray(S[None, None], dtype=dtype))
            return [(xs if i == 0 or xp is np else xs.copy(), w) for i in range(nbuf)]

    F, T = S.shape
    return SignalCase2D("spectrogram", 1, 1, F, T, 1, k, k, pad=(k // 2, k // 2), kernel="gauss")


def measure_latency(sig: Signal, s: Settings, *, budget: float = 0.2, reps: int = 50,
                    max_frames: int = 1 << 20, cancel: Optional[threading.Event] = None) -> Latency:
    """Time sigconv's variants (every accepted block) and the peers on the loaded data with the
    benchmark harness (GB/s = input read + output written). Variants of the chosen backend run; peers
    of both backends run where they can; what cannot run here is a "not available: <reason>" row."""
    op = s.op
    if op == "conv1d":
        taps, _ = design(s, sig.fs) if s.method != "spectral" else (gauss_kernel(s.smooth)[0], "")
        x = sig.data[:, :max(max_frames, 4 * taps.size)]  # at least a few filter lengths
        # the loaded data as it is: on a log with a large offset (accel_z ~ 9.8) under a band-pass, the
        # bench's check accepts float32 results that are within the rounding of their terms
        if taps.size > x.shape[1]:
            raise ValueError(f"the filter ({taps.size} taps) is longer than the signal ({x.shape[1]} frames)")
        case = signal_case_1d(x, taps)
    else:
        case = signal_case_2d(spectrogram(sig.data[0, :max_frames]), s.smooth)
    gpu_ok = sigconv.cuda_reason() is None

    def variants_for(be):
        # the chosen backend's variants; the other's only when they cannot run (listed with why)
        return None if (be == s.backend or (be == "cuda" and not gpu_ok)) else []

    def should_stop():
        return cancel is not None and cancel.is_set()

    records, meta = bench.measure(op, case, ("cuda", "cpu"), variants_for=variants_for, budget=budget, reps=reps,
                                  should_stop=should_stop)
    if should_stop():
        raise CancelledError
    return Latency(op, case.label, latency_rows(records, s), date=meta["date"])


def _record_rows(r: dict) -> list:
    """The rows of one bench record: one per timed block of a block sweep, else one."""
    row = dict(impl=r["impl"], backend=r["backend"], kind=r["kind"], note=r["note"])
    st = r["status"]
    if st == "skipped":
        return [LatencyRow(**row, status="not available")]
    best = sigconv.parse_block(sigconv.format_block(r["block"]))
    if st in ("FAIL", "error"):
        return [LatencyRow(**row, block=best, status=st)]
    sweep = r.get("blocks_ms") or {}
    if not sweep:
        return [LatencyRow(**row, block=best, ms=r["ms_median"], gbs=r["gbs"], status=st)]
    nbytes = r["gbs"] * r["ms_median"] * 1e-3 * 1e9 if r.get("gbs") else None
    rows = []
    for text, ms in sweep.items():
        b = sigconv.parse_block(text)
        if b == best:
            ms = r["ms_median"]
        rows.append(LatencyRow(**row, block=b, ms=ms, gbs=nbytes / (ms * 1e-3) / 1e9 if nbytes and ms else None,
                               status=st))
    return rows


def latency_rows(records: list, s: Settings) -> list:
    """Table rows from bench records: one per variant x timed block, peers, unavailable ones."""
    rows: list[LatencyRow] = [row for r in records for row in _record_rows(r)]

    # baselines: scipy (cpu), cudnn (torch), the fastest CuPy peer
    def best_of(pred):
        ms = [r.ms for r in rows if r.kind == "peer" and r.status == "ok" and r.ms and pred(r.impl)]
        return min(ms) if ms else None

    base = {"scipy": best_of(lambda n: n == "scipy"), "cudnn": best_of(lambda n: n == "cudnn"),
            "cupy": best_of(lambda n: n.startswith("cupyx"))}
    timed = [r for r in rows if r.ms and r.status in ("ok", "flagged")]
    for r in timed:
        r.speedup = {k: v / r.ms for k, v in base.items() if v}
    if timed:
        min(timed, key=lambda r: r.ms).fastest = True
    # timed rows fastest first, then failures, then what cannot run here
    order = {"ok": 0, "flagged": 0, "FAIL": 1, "error": 1, "not available": 2}
    rows.sort(key=lambda r: (order.get(r.status, 1), r.ms if r.ms else float("inf")))
    want = f"sigconv:{s.variant}"
    for r in rows:
        if r.impl == want and r.backend == s.backend and (s.block is None or r.block is None or r.block == s.block):
            r.chosen = True
    return rows


def latency_table(lat: Latency) -> list[list[str]]:
    """Rows of strings in LATENCY_COLUMNS order (what the table, the CSV and the markdown show)."""
    out = []
    for r in lat.rows:
        status = r.status if r.status != "not available" else f"not available: {r.note}"
        if r.status in ("FAIL", "error", "flagged"):
            status = f"{r.status}: {r.note}"
        out.append([r.impl, r.backend, sigconv.format_block(r.block) if r.kind == "variant" else "",
                    f"{r.ms:.4g}" if r.ms else "", f"{r.gbs:.3g}" if r.gbs else "",
                    *(f"{r.speedup[k]:.2f}" if k in r.speedup else "" for k in lat.baselines), status])
    return out


def screen_table(lat: Latency) -> list[list[str]]:
    """:func:`latency_table`'s cells in :data:`SCREEN_COLUMNS` order (``fft/cpu``, ``scipy/cpu``: the implementation
    without sigconv's prefix, over its backend)."""
    out = []
    for r, (_impl, _backend, block, ms, gbs, *speedups, status) in zip(lat.rows, latency_table(lat)):
        out.append([r.short, block, ms, *speedups, gbs, status])
    return out


def latency_csv(lat: Latency) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*LATENCY_COLUMNS, "fastest", "chosen"])
    for r, cells in zip(lat.rows, latency_table(lat)):
        w.writerow([*cells, int(r.fastest), int(r.chosen)])
    return buf.getvalue()


def latency_markdown(lat: Latency) -> str:
    lines = [f"# sigconv latency: {lat.op}, {lat.case} ({lat.dtype})", "",
             f"- date: {lat.date}; median of timed runs after a float64 correctness check (sigconv.bench); "
             "speed-up = baseline ms / row ms; **bold** = fastest", "",
             "| " + " | ".join(LATENCY_COLUMNS) + " |", "|" + "---|" * len(LATENCY_COLUMNS)]
    for r, cells in zip(lat.rows, latency_table(lat)):
        cells = [c.replace("|", "/") for c in cells]
        if r.fastest:
            cells = [f"**{c}**" if c else c for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def export_latency(lat: Latency, out, *, source: Path, overwrite: bool = False) -> str:
    """CSV or markdown by the suffix (.csv / .md), atomic, never onto ``source`` (the loaded file), no overwrite
    unless asked. ValueError or ``sigconv.OutputError`` with one line."""
    out = Path(out)
    if out.suffix.lower() not in (".csv", ".md", ".markdown"):
        raise sigconv.OutputError(f"{out}: export to a .csv or .md file")
    sigconv.check_output_path(source, out, overwrite=overwrite, hints=TUI_HINTS)
    text = latency_csv(lat) if out.suffix.lower() == ".csv" else latency_markdown(lat)
    with sigconv.atomic_output(out) as tmp:
        tmp.write_text(text)
    return f"wrote {out} ({len(lat.rows)} rows)"
