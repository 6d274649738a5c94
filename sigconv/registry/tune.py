"""Autotuner: time candidate (variant, block) pairs once per shape class, remember the winner.

``pick(op, key, candidates, runner)`` is what the ``auto`` chooser (:mod:`sigconv.registry.auto`) calls. The first
time an (op, key) is seen it times every candidate with CUDA events (warm-up, then rounds that take the
candidates in turn, median), skipping candidates that raise ``ValueError``, and stores the winner in
``autotune.json`` under the cache folder ($SIGCONV_CACHE_DIR, else $XDG_CACHE_HOME/sigconv, else ~/.cache/sigconv),
in a section keyed by GPU name, driver version and the kernel source hash, so a new GPU, driver or kernel source
re-times. An in-process memo sits in front. A corrupt or unreadable file is ignored and rewritten
(atomically: temp file + rename); an unwritable folder only means no persistence.
``SIGCONV_AUTOTUNE=0`` disables timing: the first (heuristic) candidate is used.

``sigconv tune`` fills the cache ahead of time through the chooser
(:func:`sigconv.registry.auto.fill_autotune_cache`).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from sigconv._core.blocks import as_block
from sigconv._core.cache import cache_dir

__all__ = ["pick", "cache_path", "clear_memo", "enabled", "WARMUP", "REPS"]

WARMUP = 2
REPS = 7       # launches per timed round at most
ROUNDS = 5     # timed rounds per candidate, the candidates in turn (the median is kept)
ROUND_MS = 4.0  # about this much GPU work per round
_FORMAT = 1

_MEMO: dict = {}
_LOCK = threading.Lock()


def cache_path() -> Path:
    """Where the winners are stored (the folder may not exist yet)."""
    return cache_dir() / "autotune.json"


def clear_memo() -> None:
    """Forget the in-process memo (the disk cache stays)."""
    with _LOCK:
        _MEMO.clear()


def enabled() -> bool:
    """False when SIGCONV_AUTOTUNE is 0 (or false, no, off): nothing is timed, the favourite runs."""
    return os.environ.get("SIGCONV_AUTOTUNE", "1").strip().lower() not in ("0", "false", "no", "off")


def _section(sources) -> str:
    """GPU name | driver version | kernel source hash: entries are valid only for this triple."""
    import cupy

    from sigconv import _kernels

    dev = cupy.cuda.Device()
    props = cupy.cuda.runtime.getDeviceProperties(dev.id)
    name = props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"])
    drv = cupy.cuda.runtime.driverGetVersion()
    return f"{name}|driver {drv}|src {_kernels.source_hash(*sources)}"


def _entry_key(op: str, key) -> str:
    import json

    return op + ":" + json.dumps(list(key), separators=(",", ":"), default=str)


def _load() -> dict:
    """The cache file's contents, or an empty cache when missing, unreadable or malformed."""
    import json

    try:
        data = json.loads(cache_path().read_text())
    except (OSError, ValueError, UnicodeDecodeError):
        return {"format": _FORMAT, "sections": {}}
    if not isinstance(data, dict) or data.get("format") != _FORMAT or not isinstance(data.get("sections"), dict):
        return {"format": _FORMAT, "sections": {}}
    return data


def _save(data: dict) -> None:
    """Atomic write (temp file in the same folder, then rename); silently gives up when it cannot."""
    import json

    from sigconv._core.atomic import atomic_output
    from sigconv._core.errors import OutputError

    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as tmp:
            tmp.write_text(json.dumps(data, indent=1, sort_keys=True))
    except (OSError, OutputError):
        pass


def _time_all(runner, candidates, *, skip: bool = True) -> list:
    """[(ms, variant, block)] of the candidates that run, each the median over ROUNDS of the mean ms per launch of
    back-to-back launches (CUDA events around each round), the regime of use: the bench, the file engine and array
    calls queue launches without waiting. Timing single launches, each after a sync, ranks candidates differently (it
    once preferred strip for the 3x3 spectrogram, which is slower than regblock back to back). A round holds up to
    REPS launches, fewer for slow candidates (about ROUND_MS of work per round). Every candidate is warmed up (WARMUP
    launches) and probed before the first round, and the rounds take the candidates in turn, each round starting one
    candidate later: a slowdown of the device while tuning (clocks still rising, a filter's spectrum computed on the
    first call) then falls on every candidate's rounds alike, not on all of the first one's. Timed one after the
    other, the 512-thread fft_fused (0.398 ms for 7921 taps on an H100) lost to the 1024-thread one (0.410 ms) in two
    of seven fresh tunings. A candidate that refuses the job (:func:`_skippable`) is left out (``skip``; else its
    error propagates)."""
    import statistics

    import cupy

    stream = cupy.cuda.get_current_stream()

    def round_ms(variant, block, n):
        start, end = cupy.cuda.Event(), cupy.cuda.Event()
        start.record(stream)
        for _ in range(n):
            runner(variant, block)
        end.record(stream)
        end.synchronize()
        return cupy.cuda.get_elapsed_time(start, end) / n

    def attempt(fn):
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001
            if not (skip and _skippable(exc)):
                raise
            return None

    reps = {}
    for variant, block in candidates:
        def probe(variant=variant, block=block):
            for _ in range(WARMUP):
                runner(variant, block)
            return round_ms(variant, block, 1)

        one = attempt(probe)
        if one is not None:
            reps[(variant, block)] = max(1, min(REPS, int(ROUND_MS / max(one, 1e-3))))
    times = {c: [] for c in reps}
    order = list(reps)
    for r in range(ROUNDS if order else 0):
        for c in order[r % len(order):] + order[: r % len(order)]:
            if c in times:
                ms = attempt(lambda c=c: round_ms(c[0], c[1], reps[c]))
                if ms is None:
                    del times[c]
                else:
                    times[c].append(ms)
    return [(statistics.median(t), v, b) for (v, b), t in times.items()]


def _time(runner, variant, block) -> float:
    """One candidate's time (:func:`_time_all`); a refusal raises."""
    return _time_all(runner, [(variant, block)], skip=False)[0][0]


def _skippable(exc) -> bool:
    if isinstance(exc, ValueError):
        return True
    try:
        import cupy

        return isinstance(exc, cupy.cuda.memory.OutOfMemoryError)
    except Exception:  # pragma: no cover
        return False


def pick(op: str, key: tuple, candidates: list, runner, *, sources=("conv1d.cu",)) -> tuple:
    """Best (variant, block) among ``candidates`` for shape class ``key`` of ``op``.

    Parameters
    ----------
    op : str
        "conv1d" or "conv2d".
    key : tuple
        Shape class (JSON-serialisable values).
    candidates : list of (variant, block)
        In heuristic order: the first is used when timing is disabled or everything fails.
    runner : callable(variant, block)
        Launches once on representative, already allocated data.
    sources : tuple of str
        Kernel files whose hash keys the disk cache.

    Returns
    -------
    (variant, block)
    """
    if candidates and enabled():  # a repeated call (the launch path) with the chooser's normalised candidates
        hit = _MEMO.get((op, tuple(key), tuple(sources), tuple(candidates)))
        if hit is not None:
            return hit
    cands = [(v, as_block(b)) for v, b in candidates]
    if not cands:
        raise ValueError("candidates must hold at least one (variant, block) pair")
    if not enabled():
        return cands[0]
    memo_key = (op, tuple(key), tuple(sources), tuple(cands))
    with _LOCK:
        hit = _MEMO.get(memo_key)
    if hit is not None:
        return hit
    section = _section(sources)
    ekey = _entry_key(op, key)
    data = _load()
    entry = data["sections"].get(section, {}).get(ekey) if isinstance(data["sections"].get(section), dict) else None
    if isinstance(entry, dict) and isinstance(entry.get("variant"), str):
        got = (entry["variant"], as_block(entry.get("block")))
        if got in cands:
            with _LOCK:
                _MEMO[memo_key] = got
            return got
    results = _time_all(runner, cands)
    if results:
        ms, v, b = min(results, key=lambda r: r[0])
        best = (v, b)
    else:
        ms, best = None, cands[0]
    data = _load()  # re-read: another process may have written meanwhile
    gpu = section.split("|", 1)[0]
    # entries of this GPU under another driver or source hash are stale: drop them
    data["sections"] = {s: e for s, e in data["sections"].items()
                        if isinstance(e, dict) and (s == section or s.split("|", 1)[0] != gpu)}
    data["sections"].setdefault(section, {})[ekey] = {
        "variant": best[0], "block": list(best[1]) if isinstance(best[1], tuple) else best[1], "ms": ms,
        "timed": {f"{v}@{b}": round(t, 5) for t, v, b in results}}
    _save(data)
    with _LOCK:
        _MEMO[memo_key] = best
    return best
