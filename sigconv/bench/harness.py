"""The measuring harness: the rows of one case on one backend, each checked against float64, then timed.

``run_group`` runs every selected sigconv variant (every accepted block, the best one timed fully, ``auto``
as its own row) and every peer on the same inputs; ``measure`` does the same for one case on several backends
for callers other than the command line (the TUI). Options arrive as a :class:`BenchOptions`.
"""

from __future__ import annotations

import dataclasses
import datetime
import math
import time
from dataclasses import dataclass, field
from typing import Callable, Optional

import numpy as np

from sigconv import backends as _backends  # noqa: F401  (importing the backends fills the registry)
from sigconv._core import devices as _devices
from sigconv._core.blocks import as_block, format_block
from sigconv._core.xp import namespace_of_backend
from sigconv.bench.check import TOL, check_result, rounding_scale
from sigconv.bench.timing import stats, sync, time_calls
from sigconv.registry import table as _registry

__all__ = ["L2_FACTOR", "BenchOptions", "Run", "run_group", "measure", "ratios", "one_line"]

#: Rotation buffers hold at least this many times the L2 size in inputs.
L2_FACTOR = 2


@dataclass(frozen=True)
class BenchOptions:
    """Which rows run and how long each is timed.

    ``variants``/``peers``: names to run (None: all, ``auto`` included; empty: none); ``blocks``: block sizes
    to sweep (None: every block a variant accepts); ``budget``: seconds of timed runs per row; ``reps``: most
    timed runs per row; ``max_direct_macs``: the cupyx direct peer is skipped above this many multiply-adds.
    """

    variants: Optional[tuple] = None
    peers: Optional[tuple] = None
    blocks: Optional[tuple] = None
    budget: float = 0.4
    reps: int = 200
    seed: int = 0
    max_direct_macs: float = 4e11
    dtype: str = "float32"

    def __post_init__(self):
        for name in ("variants", "peers", "blocks"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, tuple(as_block(b) for b in v))


@dataclass
class Run:
    """The rows measured so far, and the devices and copy bandwidths they are measured against."""

    op: str
    dtype: str
    date: str = field(default_factory=lambda: utc_now().strftime("%Y-%m-%dT%H:%M:%SZ"))
    deadline: Optional[float] = None  # perf_counter time after which no row starts
    start: float = field(default_factory=time.perf_counter)
    copy: dict = field(default_factory=dict)  # "cuda"/"cpu" -> copy measurement
    device: dict = field(default_factory=dict)  # "cuda"/"cpu" -> device name
    records: list = field(default_factory=list)
    failed: int = 0

    def time_left(self) -> bool:
        return self.deadline is None or time.perf_counter() < self.deadline

    def record(self, case, backend: str, impl: str, kind: str, **kw) -> dict:
        """A new row (status ok, untimed unless ``kw`` says otherwise), appended to the records."""
        r = {"op": self.op, **case.fields(), "impl": impl, "block": None, "ms_median": None, "gbs": None,
             "pct_copy": None, "device": self.device.get(backend), "date": self.date, "backend": backend,
             "kind": kind, "dtype": self.dtype, "case": case.label, "group": case.group, "status": "ok", "note": ""}
        if self.op == "conv1d":
            r["mode"] = "same"
        if getattr(case, "reduced_from", None):
            r["note"] = case.reduced_note
        r.update(kw)
        self.records.append(r)
        return r


def utc_now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


def one_line(exc: BaseException) -> str:
    s = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {s[0] if s else ''}"[:300]


def _add_note(r: dict, note: str) -> None:
    if note:
        r["note"] = f"{r['note']}; {note}" if r["note"] else note


# ------------------------------------------------------------------------------------- one group


@dataclass
class _Group:
    """One case on one backend: the rows' shared inputs, reference and timing settings."""

    run: Run
    opts: BenchOptions
    case: object
    backend: str
    xp: object = None
    inp: Optional[list] = None
    ref: object = None
    rounding: Optional[Callable] = None
    nbuf: int = 2

    @property
    def gpu(self) -> bool:
        return self.backend == "cuda"

    @property
    def budget(self) -> float:
        return self.opts.budget if self.gpu else min(self.opts.budget, 2.0)

    def record(self, impl: str, kind: str, **kw) -> dict:
        return self.run.record(self.case, self.backend, impl, kind, **kw)

    def time(self, call: Callable[[int], object], budget_s: float, min_reps: int, max_reps: int) -> list:
        return time_calls(call, self.nbuf, self.xp, budget_s=budget_s, min_reps=min_reps, max_reps=max_reps)

    def time_row(self, call: Callable[[int], object]) -> list:
        """The full timing of one row: the row budget, at least 5 runs on a GPU (2 on a CPU)."""
        return self.time(call, self.budget, 5 if self.gpu else 2, self.opts.reps)

    def tol(self, entry=None) -> float:
        tol = TOL[self.run.dtype]
        return tol if entry is None else float(entry.extra.get("tol", tol))


def _impl(entry) -> str:
    """Row name: ``sigconv:<variant>`` (``sigconv:auto`` for None), or the peer's name."""
    if entry is None or entry.kind == "variant":
        return f"sigconv:{entry.name if entry is not None else 'auto'}"
    return entry.name


def _kind(entry) -> str:
    return "variant" if entry is None else entry.kind


def _selected(names: Optional[tuple], name: str) -> bool:
    return names is None or name in names


def _rows_for(op: str, backend: str, opts: BenchOptions) -> list:
    """Sigconv variants (None standing for ``auto``), then peers, of one backend, as the options select."""
    ours = _registry.entries(op, backend, kind="variant")
    rows = [v for v in ours if _selected(opts.variants, v.name)]
    if _selected(opts.variants, "auto") and ours:
        rows.append(None)
    return rows + [p for p in _registry.entries(op, backend, kind="peer") if _selected(opts.peers, p.name)]


def _runnable(g: _Group, rows: list) -> list:
    """The rows that can run on this machine; the others are recorded as skipped, with the reason."""
    reason = _devices.cuda_reason() if g.gpu else None
    out = []
    for e in rows:
        why = (e.availability() if e is not None else None) or reason
        if why:
            g.record(_impl(e), _kind(e), status="skipped", note=why)
        else:
            out.append(e)
    return out


def _record_all(g: _Group, rows: list, status: str, note: str) -> None:
    for e in rows:
        g.record(_impl(e), _kind(e), status=status, note=note)


def _prepare(g: _Group) -> None:
    """Rotation buffers of inputs (together over L2_FACTOR x the L2 size), the float64 reference of the first."""
    xp, dtype = g.xp, g.run.dtype
    g.inp = g.case.inputs(xp, dtype, np.random.default_rng(g.opts.seed), g.nbuf)
    g.ref = g.case.reference(xp, g.inp[0])
    g.rounding = rounding_scale(xp, g.case, g.inp[0], g.ref, dtype)
    sync(xp)


def _buffers(g: _Group) -> int:
    if g.gpu:
        l2 = int(g.xp.cuda.Device().attributes.get("L2CacheSize", 60 << 20))
    else:
        l2 = 64 << 20  # a generous last-level cache
    in_bytes = g.case.in_bytes(np.dtype(g.run.dtype).itemsize)
    return int(min(64, max(2, math.ceil(L2_FACTOR * l2 / max(1, in_bytes)))))


def run_group(run: Run, case, backend: str, opts: BenchOptions) -> None:
    """All rows of one backend for one case: inputs, reference, then check + time each row."""
    g = _Group(run, opts, case, backend)
    rows = _runnable(g, _rows_for(run.op, backend, opts))
    if not rows:
        return
    if not g.gpu:
        g.case = case.cpu_version()
        if g.case is None:
            g.case = case
            _record_all(g, rows, "skipped", "too large for a CPU row")
            return
    g.xp = namespace_of_backend(backend)
    g.nbuf = _buffers(g)
    try:
        _prepare(g)
    except Exception as exc:  # OOM or a broken device: every row of the group is an error
        _record_all(g, rows, "error", f"inputs/reference: {one_line(exc)}")
        run.failed += 1
        _free(g.xp)
        return
    for e in rows:
        if _out_of_time(g, e):
            continue
        (_run_variant if _kind(e) == "variant" else _run_peer)(g, e)
    g.inp = g.ref = g.rounding = None  # drop the buffers before freeing the pools
    _free(g.xp)


def _out_of_time(g: _Group, entry) -> bool:
    if g.run.time_left():
        return False
    g.record(_impl(entry), _kind(entry), status="skipped", note="time limit (--max-seconds) reached")
    return True


def _skip_reason(g: _Group, entry) -> Optional[str]:
    """Why this variant or peer does not take this case (dtype, taps, shape: its registry entry says), or None."""
    return entry.applies(g.case.job(g.run.dtype))


def _free(xp) -> None:
    from sigconv.backends import peers

    peers.clear_caches()
    if xp is not np:
        import gc

        gc.collect()
        xp.get_default_memory_pool().free_all_blocks()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass


def _finish_timing(g: _Group, r: dict, ms: list) -> None:
    """Median, percentiles, GB/s and the share of the copy bandwidth into row ``r``."""
    r.update(stats(ms))
    sec = r["ms_median"] * 1e-3
    r["gbs"] = g.case.nbytes(np.dtype(g.run.dtype).itemsize) / sec / 1e9 if sec > 0 else None
    cp = g.run.copy.get(g.backend)
    if cp and r["gbs"] is not None:
        r["pct_copy"] = 100.0 * r["gbs"] / cp["gbs"]


# ------------------------------------------------------------------------------------- sigconv variants


def _blocks(opts: BenchOptions, v) -> list:
    """The blocks to check and time: those of the options' blocks this variant accepts (as it launches them: a
    2-D integer laid out), else its usual grid (:attr:`Variant.blocks`)."""
    if not v.blocks:
        return [None]
    if not opts.blocks:
        return list(v.blocks)
    out = []
    for b in opts.blocks:
        try:
            lb = v.launch_block(b)
        except ValueError:  # a block this variant does not take
            continue
        if lb not in out:
            out.append(lb)
    return out


def _check_blocks(g: _Group, name: str, blocks: list) -> tuple[list, list, list]:
    """Run and check variant ``name`` at every block: ([(block, err, note)] passing, failing, [(block, error)])."""
    passing, failing, errors = [], [], []
    tol = g.tol(None if name == "auto" else _registry.get(g.case.op, g.backend, name))
    for b in blocks:
        try:
            y = g.case.run_variant(g.backend, name, b, g.inp[0])
            ok, err, note = check_result(g.xp, y, g.ref, tol, g.rounding)
            del y
        except ValueError as exc:  # the launcher refuses this shape/block: not a wrong answer
            errors.append((b, "refused: " + one_line(exc)))
            continue
        except Exception as exc:
            errors.append((b, one_line(exc)))
            continue
        (passing if ok else failing).append((b, err, note))
    return passing, failing, errors


def _errors_note(errors: list) -> str:
    return "; ".join(f"block {format_block(b)}: {e}" for b, e in errors[:3])


def _time_variant(g: _Group, name: str, passing: list) -> tuple:
    """(best block, {block: median ms of a short sweep}, ms of the full timing at the best block)."""
    def call(b):
        return lambda i: g.case.run_variant(g.backend, name, b, g.inp[i])

    sweep = {}
    if len(passing) > 1:
        for b, _, _ in passing:
            if not g.run.time_left():
                break
            sweep[b] = float(np.median(g.time(call(b), min(0.15, g.budget), 3, 20)))
    best = min(sweep, key=sweep.get) if sweep else passing[0][0]
    return best, sweep, g.time_row(call(best))


def _auto_choice(g: _Group) -> Optional[str]:
    """What ``auto`` picked (variant/block), when the backend says."""
    try:
        v, b = g.case.resolve_auto(g.inp[0])
        return f"{v}/{format_block(b)}"
    except Exception:
        return None


def _run_variant(g: _Group, v) -> None:
    """Check every block, sweep the passing ones, time the best fully; failing blocks get their own rows."""
    impl, name = _impl(v), v.name if v is not None else "auto"
    blocks = [None] if v is None else _blocks(g.opts, v)
    why = None if v is None else _skip_reason(g, v) or (None if blocks else "none of --blocks accepted")
    if why:
        g.record(impl, "variant", status="skipped", note=why)
        return
    passing, failing, errors = _check_blocks(g, name, blocks)
    for b, err, note in failing:
        g.record(impl, "variant", status="FAIL", block=b, rel_err=err, note=f"block {format_block(b)}: {note}")
        g.run.failed += 1
    if errors and not passing and not failing:
        refused = all(e.startswith("refused: ") for _, e in errors)
        g.record(impl, "variant", status="skipped" if refused else "error", note=_errors_note(errors))
        if not refused:
            g.run.failed += 1
        return
    if not passing:
        return
    try:
        best, sweep, ms = _time_variant(g, name, passing)
    except Exception as exc:
        g.record(impl, "variant", status="error", note=f"while timing: {one_line(exc)}")
        g.run.failed += 1
        return
    err, cnote = {b: (e, n) for b, e, n in passing}[best]
    r = g.record(impl, "variant", block=best, rel_err=err)
    _add_note(r, cnote)
    if v is not None and "tol" in v.extra:
        _add_note(r, f"checked at tolerance {v.extra['tol']:g}")
    if sweep:
        r["blocks_ms"] = {format_block(b): round(t, 5) for b, t in sweep.items()}
    choice = _auto_choice(g) if v is None and g.gpu else None
    if choice:
        r["auto_choice"] = choice
        _add_note(r, f"auto -> {choice}")
    if failing:
        _add_note(r, f"blocks {', '.join(format_block(b) for b, _, _ in failing)} FAIL (own rows)")
    if errors:
        _add_note(r, _errors_note(errors))
    _finish_timing(g, r, ms)
    sync(g.xp)


# ------------------------------------------------------------------------------------- peers


def _direct_too_slow(g: _Group, p) -> Optional[str]:
    if g.gpu and p.name.startswith("cupyx.convolve-direct") and g.case.macs() > g.opts.max_direct_macs:
        return f"direct summation of {g.case.macs():.2g} MACs would take seconds (--max-direct-macs)"
    return None


def _run_peer(g: _Group, p) -> None:
    """Check (flag on disagreement), then time."""
    from sigconv.backends.peers import NotSupported

    why = _skip_reason(g, p) or _direct_too_slow(g, p)
    if why:
        g.record(p.name, "peer", status="skipped", note=why)
        return
    try:
        fn = p.load()
        y = g.case.run_peer(fn, g.inp[0])
        ok, err, note = check_result(g.xp, y, g.ref, g.tol(p), g.rounding)
        del y
        ms = g.time_row(lambda i: g.case.run_peer(fn, g.inp[i]))
    except NotSupported as exc:
        g.record(p.name, "peer", status="skipped", note=str(exc))
        return
    except Exception as exc:
        g.record(p.name, "peer", status="error", note=one_line(exc))
        return
    r = g.record(p.name, "peer", rel_err=err)
    if not ok:
        r["status"] = "flagged"
        _add_note(r, f"disagrees with the float64 reference: {note}")
    elif note:
        _add_note(r, note)
    elif "tol" in p.extra:
        _add_note(r, f"checked at tolerance {p.extra['tol']:g}")
    _finish_timing(g, r, ms)


# ------------------------------------------------------------------------------------- several backends


def ratios(records: list) -> None:
    """speedup_vs_best_peer = fastest timed peer's ms / this row's ms, among rows of the same shape
    and backend class (GPU rows against GPU peers; CPU rows against CPU peers at the same size)."""
    def key(r):
        return r["case"], r["backend"], r.get("L"), r.get("W"), r.get("N")

    best: dict = {}
    for r in records:
        if r["kind"] == "peer" and r["status"] == "ok" and r["ms_median"]:
            k = key(r)
            if k not in best or r["ms_median"] < best[k][0]:
                best[k] = (r["ms_median"], r["impl"])
    for r in records:
        b = best.get(key(r))
        if b and r["ms_median"]:
            r["best_peer"] = b[1]
            r["speedup_vs_best_peer"] = b[0] / r["ms_median"]


def measure(op: str, case, backends=("cuda", "cpu"), *, variants_for: Optional[Callable] = None,
            budget: float = 0.4, reps: int = 200, dtype: str = "float32",
            should_stop: Optional[Callable[[], bool]] = None) -> tuple[list, dict]:
    """Time one case with `sigconv bench`'s method, for callers other than the command line (the TUI).

    ``case`` is a Case1D / Case2D (or an object with their interface, such as one built on real data);
    ``variants_for(backend)`` gives the sigconv variant names to run on that backend (None: all, []:
    none, so only the peers run). Every row is checked against float64 before it is timed, as in the
    command. ``should_stop()`` is asked between backends. Returns (records with the speed-up ratios
    filled in, {"date": ..., backend: device name}).
    """
    opts = BenchOptions(budget=budget, reps=reps, dtype=dtype)
    run = Run(op, dtype, device={"cpu": "cpu", "cuda": _devices.gpu_name()})
    for be in backends:
        if should_stop is not None and should_stop():
            break
        names = variants_for(be) if variants_for is not None else None
        run_group(run, case, be, dataclasses.replace(opts, variants=names))
    ratios(run.records)
    return run.records, {"date": run.date, **run.device}
