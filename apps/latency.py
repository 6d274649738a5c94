"""Time the loaded signal's filter with every variant and block beside scipy, cuDNN and CuPy, and export the table.

The measurement is ``sigconv.bench.measure`` (float64 correctness check first, warm-up, median of many runs) on
the loaded data and the designed taps rather than random data; each row's speed-up over every baseline and over
the fastest one, and its share of its backend's copy bandwidth. For the spectral method, the gate's stages
(``sigconv.gate_stage_times``) follow. No Textual import here: the screens call these functions from worker
threads.
"""

from __future__ import annotations

import csv
import io
import threading
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Optional

import numpy as np

import sigconv
from sigconv import bench

from .loading import Signal
from .running import TUI_HINTS, CancelledError, Settings, design, gauss_kernel, spectrogram

#: The exported table: "x <baseline>" = the baseline's ms / the row's ms; "x best peer" against the fastest baseline
#: timed; "% copy" = the row's GB/s over the copy bandwidth of its backend.
LATENCY_COLUMNS = ("impl", "backend", "block", "median ms", "GB/s", "% copy", "x scipy", "x cudnn", "x cupy",
                   "x best peer", "status")
#: The table on screen: the same cells, narrower (implementation and backend in one column, the speed-ups next to
#: the time), so that at 80 columns what a row is, its block, its time and its speed-ups over scipy and over the
#: fastest peer show without scrolling; the rest scrolls sideways.
SCREEN_COLUMNS = ("impl", "block", "ms", "x scipy", "x best", "x cudnn", "x cupy", "% copy", "GB/s", "status")
#: Longest name on screen: with the chosen mark, a block, 3 significant digits of ms and the two speed-ups it
#: fits the latency pane of an 80-column terminal (48 cells beside the controls, with a scrollbar).
SCREEN_NAME_MAX = 13
#: The export's column behind each screen column.
_SCREEN_SOURCE = {"ms": "median ms", "x best": "x best peer"}


@dataclass
class LatencyRow:
    impl: str  # "sigconv:tiled", "scipy", "cudnn", "gate:mask"
    backend: str
    kind: str  # "variant" | "peer" | "stage" (a stage of the spectral gate: no speed-ups)
    block: object = None
    ms: Optional[float] = None
    gbs: Optional[float] = None
    pct_copy: Optional[float] = None  # gbs as a percentage of the backend's copy bandwidth
    status: str = "ok"  # ok | flagged | FAIL | error | not available
    note: str = ""
    speedup: dict = field(default_factory=dict)  # baseline ("best": the fastest baseline) -> baseline ms / this ms
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
    def screen_name(self) -> str:
        """What the table on screen calls it, in at most :data:`SCREEN_NAME_MAX` characters: :attr:`short`; a CuPy
        peer as ``cx.oaconv`` (cupyx.scipy's names shortened; CuPy runs on cuda only); a gate stage as ``g:mask``;
        a longer name cut with an ellipsis before its backend (``separab…/cuda``)."""
        if self.kind == "stage":
            name = "g:" + self.impl.removeprefix("gate:")
        elif self.impl.startswith("cupyx."):
            name = "cx." + (self.impl.removeprefix("cupyx.").replace("ndimage.", "ndi.").replace("convolve-", "")
                            .replace("convolve", "conv"))
        else:
            name = self.short
        if len(name) <= SCREEN_NAME_MAX:
            return name
        head, sep, be = name.rpartition("/")
        if not sep or len(be) > 5:
            return name[:SCREEN_NAME_MAX - 1] + "…"
        return head[:SCREEN_NAME_MAX - len(be) - 2] + "…/" + be

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
    device: dict = field(default_factory=dict)  # backend -> device name ("NVIDIA H200", the CPU's model)
    copy: dict = field(default_factory=dict)  # backend -> copy bandwidth (GB/s) the "% copy" column divides by
    stage_case: str = ""  # what the gate's stage rows timed

    @property
    def best_peer(self) -> Optional[LatencyRow]:
        """The fastest baseline row timed (what "x best peer" divides), or None."""
        peers = [r for r in self.rows if r.kind == "peer" and r.status == "ok" and r.ms and _baseline(r.impl)]
        return min(peers, key=lambda r: r.ms) if peers else None


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
        x = sig.read(0, max(max_frames, 4 * taps.size))  # at least a few filter lengths
        # the loaded data as it is: on a log with a large offset (accel_z ~ 9.8) under a band-pass, the
        # bench's check accepts float32 results that are within the rounding of their terms
        if taps.size > x.shape[1]:
            raise ValueError(f"the filter ({taps.size} taps) is longer than the signal ({x.shape[1]} frames)")
        case = signal_case_1d(x, taps)
    else:
        case = signal_case_2d(spectrogram(sig.read(0, max_frames)[0]), s.smooth)
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
    copy = {be: gbs for be in sorted({r["backend"] for r in records if r.get("gbs")}) if (gbs := copy_gbs(be))}
    lat = Latency(op, case.label, latency_rows(records, s, copy=copy), date=meta["date"],
                  device={be: name for be, name in (("cuda", meta.get("cuda")), ("cpu", bench.cpu_name())) if name},
                  copy=copy)
    if s.method == "spectral":
        x = sig.read(0, max_frames)  # the chunk the gate's stages are timed on
        lat.rows += gate_stage_rows(x, sig.fs, s, reps=max(1, min(reps, 20)))
        lat.stage_case = f"C={x.shape[0]} L={x.shape[1]} at {sig.fs:g} Hz"
        if should_stop():
            raise CancelledError
    return lat


def gate_stage_rows(x: np.ndarray, fs: float, s: Settings, *, reps: int = 10) -> list:
    """One row (kind "stage") per stage of the spectral gate on ``x`` (C, L) and one for its whole chunk, as the
    run gates (strength, backend, variant, block of the settings): ``sigconv.gate_stage_times``. A failure is one
    "error" row."""
    k = s.kernel
    try:
        times = sigconv.gate_stage_times(x, fs, prop_decrease=s.gate.strength, backend=k.backend,
                                         variant=k.variant, block=k.block, reps=reps)
    except Exception as exc:  # noqa: BLE001 (a row that says why, as the bench's rows do)
        note = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
        return [LatencyRow("gate:chunk", k.backend, "stage", status="error", note=note)]
    chunk = times["chunk"]
    return [LatencyRow(f"gate:{name}", k.backend, "stage", ms=ms,
                       note=f"{100 * ms / chunk:.0f}% of the chunk" if name != "chunk" else "the whole chunk")
            for name, ms in times.items()]


@lru_cache(maxsize=4)
def copy_gbs(backend: str) -> Optional[float]:
    """The copy bandwidth of ``backend`` (GB/s read + written; ``sigconv.bench``'s measurement, once a process), or
    None where it cannot be measured."""
    try:
        return float((bench.gpu_copy_gbs() if backend == "cuda" else bench.cpu_copy_gbs(1 << 26))["gbs"])
    except Exception:  # noqa: BLE001 (no GPU memory to spare: the column stays empty)
        return None


def _record_rows(r: dict, copy: Optional[float] = None) -> list:
    """The rows of one bench record: one per timed block of a block sweep, else one. ``copy``: the backend's copy
    bandwidth (GB/s) for "% copy" where the record has no ``pct_copy`` of its own."""
    row = dict(impl=r["impl"], backend=r["backend"], kind=r["kind"], note=r["note"])
    st = r["status"]
    if st == "skipped":
        return [LatencyRow(**row, status="not available")]
    best = sigconv.parse_block(sigconv.format_block(r["block"]))
    if st in ("FAIL", "error"):
        return [LatencyRow(**row, block=best, status=st)]
    if r.get("pct_copy") and r.get("gbs"):
        copy = 100.0 * r["gbs"] / r["pct_copy"]  # the bandwidth the record was measured against

    def pct(gbs):
        return 100.0 * gbs / copy if gbs and copy else None

    sweep = r.get("blocks_ms") or {}
    if not sweep:
        return [LatencyRow(**row, block=best, ms=r["ms_median"], gbs=r["gbs"], pct_copy=pct(r["gbs"]), status=st)]
    nbytes = r["gbs"] * r["ms_median"] * 1e-3 * 1e9 if r.get("gbs") else None
    rows = []
    for text, ms in sweep.items():
        b = sigconv.parse_block(text)
        if b == best:
            ms = r["ms_median"]
        gbs = nbytes / (ms * 1e-3) / 1e9 if nbytes and ms else None
        rows.append(LatencyRow(**row, block=b, ms=ms, gbs=gbs, pct_copy=pct(gbs), status=st))
    return rows


def _baseline(impl: str) -> Optional[str]:
    """The baseline a peer stands for: scipy (cpu), cudnn (torch), cupy (any cupyx peer); None for the others."""
    if impl in ("scipy", "cudnn"):
        return impl
    return "cupy" if impl.startswith("cupyx") else None


def latency_rows(records: list, s: Settings, *, copy: Optional[dict] = None) -> list:
    """Table rows from bench records: one per variant x timed block, peers, unavailable ones. ``copy``: backend ->
    copy bandwidth (GB/s), for the "% copy" of records without a ``pct_copy``."""
    copy = copy or {}
    rows: list[LatencyRow] = [row for r in records for row in _record_rows(r, copy.get(r["backend"]))]

    # baselines: scipy (cpu), cudnn (torch), the fastest CuPy peer; "best": the fastest of those timed
    base = {}
    for r in rows:
        name = _baseline(r.impl) if r.kind == "peer" and r.status == "ok" and r.ms else None
        if name:
            base[name] = min(base.get(name, r.ms), r.ms)
    if base:
        base["best"] = min(base.values())
    timed = [r for r in rows if r.ms and r.status in ("ok", "flagged")]
    for r in timed:
        r.speedup = {k: v / r.ms for k, v in base.items()}
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


def _compact(v: float) -> str:
    """The screen's ms and speed-ups in 6 characters up to 10^6: whole from 100, 3 significant digits from 0.01,
    2 below."""
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}" if v >= 0.01 else f"{v:.2g}"


def _cells(lat: Latency, r: LatencyRow, screen: bool = False) -> dict:
    """One row's cells by export column (``screen``: its numbers shorter, the name :attr:`LatencyRow.screen_name`)."""
    status = r.status if r.status != "not available" else f"not available: {r.note}"
    if r.status in ("FAIL", "error", "flagged") or (r.kind == "stage" and r.note):
        status = f"{r.status}: {r.note}"
    cells = {"impl": r.impl, "backend": r.backend,
             "block": sigconv.format_block(r.block) if r.kind == "variant" else "",
             "median ms": f"{r.ms:.4g}" if r.ms else "", "GB/s": f"{r.gbs:.3g}" if r.gbs else "",
             "% copy": f"{r.pct_copy:.3g}" if r.pct_copy else "", "status": status}
    for k in (*lat.baselines, "best"):
        v = r.speedup.get(k)
        text = "" if v is None else _compact(v) if screen else f"{v:.2f}"
        cells["x best peer" if k == "best" else f"x {k}"] = text
    if screen:
        cells.update(impl=r.screen_name, **{"median ms": _compact(r.ms) if r.ms else ""})
    return cells


def latency_table(lat: Latency) -> list[list[str]]:
    """Rows of strings in LATENCY_COLUMNS order (what the CSV and the markdown show)."""
    return [[_cells(lat, r)[c] for c in LATENCY_COLUMNS] for r in lat.rows]


def screen_table(lat: Latency) -> list[list[str]]:
    """:func:`latency_table`'s cells in :data:`SCREEN_COLUMNS` order, narrower: the names of
    :attr:`LatencyRow.screen_name` (``fft/cpu``, ``scipy/cpu``, ``cx.oaconv``, ``g:mask``), ms and speed-ups in 3
    significant digits."""
    out = []
    for r in lat.rows:
        cells = _cells(lat, r, screen=True)
        out.append([cells[_SCREEN_SOURCE.get(c, c)] for c in SCREEN_COLUMNS])
    return out


def latency_csv(lat: Latency) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([*LATENCY_COLUMNS, "fastest", "chosen"])
    for r, cells in zip(lat.rows, latency_table(lat)):
        w.writerow([*cells, int(r.fastest), int(r.chosen)])
    return buf.getvalue()


def latency_markdown(lat: Latency) -> str:
    devices = "; ".join(f"{be}: {name}" + (f" (copy {lat.copy[be]:.4g} GB/s)" if lat.copy.get(be) else "")
                        for be, name in lat.device.items()) or "not recorded"
    best = lat.best_peer
    lines = [f"# sigconv latency: {lat.op}, {lat.case} ({lat.dtype})", "",
             f"- device: {devices}", f"- date: {lat.date}",
             "- median of timed runs after a float64 correctness check (sigconv.bench); speed-up = baseline ms / "
             "row ms; x best peer: over the fastest of scipy, cuDNN and CuPy"
             + (f" ({best.impl}/{best.backend}, {best.ms:.4g} ms)" if best else " (none timed)")
             + "; % copy: GB/s (input read + output written) over the copy bandwidth of the row's backend; "
             "**bold** = fastest"]
    if any(r.kind == "stage" for r in lat.rows):
        lines.append(f"- gate:* rows: the spectral gate's stages on one chunk of {lat.stage_case or 'the signal'} "
                     "(sigconv.gate_stage_times: median of timed runs after warm-up, CUDA events on cuda)")
    lines += ["", "| " + " | ".join(LATENCY_COLUMNS) + " |", "|" + "---|" * len(LATENCY_COLUMNS)]
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
