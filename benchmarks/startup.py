"""Start-up and the cpu/cuda crossover: `sigconv denoise` of short to long recordings, whole commands.

    python benchmarks/startup.py                                   # cpu: 10 s and 60 s, FIR and spectral gate
    python benchmarks/startup.py --gpu [--durations 10 60 600 3600] [--repeat 3] [--out DIR]

For each duration, a deterministic 48 kHz stereo PCM_16 WAV (denoise_vs_sox.generate), and for each method (the
default FIR band-pass, 7921 taps; the spectral gate) each command in a fresh child process, wall clock and peak RSS
(denoise_vs_sox.measure): ``python -m sigconv denoise IN -o OUT --method M --backend B --force``

- ``cuda cold`` (with --gpu): the method's first run, at the shortest duration, with empty kernel and autotuner
  caches, as after an install (CUPY_CACHE_DIR and SIGCONV_CACHE_DIR point at new folders, one pair per method:
  the user's caches are left alone);
- ``cuda warm``, ``cpu`` and ``auto``: ``--repeat`` runs each after that, interleaved (cpu, cuda, auto, cpu, ...)
  so that a drift of the host's speed falls on every backend alike, median; ``auto`` reports which backend it took
  (the command's summary line).

Python's bytecode is kept in a folder of the run's own (denoise_vs_sox.child_env: PYTHONPYCACHEPREFIX, and
PYTHONDONTWRITEBYTECODE dropped), filled first by one untimed run per method and backend with throwaway kernel
caches: an installed package has its bytecode compiled at install time, but an environment that forbids writing it
(the device machines' sets PYTHONDONTWRITEBYTECODE) would otherwise compile every module it imports on every run.

Verdicts: 10 s of stereo on cuda with a warm cache in 0.6 s or less; the first run after install in 3 s or less;
``--backend auto`` within 10% of the faster of cpu and cuda at every duration. Writes
startup-<device>-<date>.json and .md to --out (default benchmarks/results/).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import statistics
import sys
import tempfile
from pathlib import Path

from denoise_vs_sox import ROOT, _device, _slug, child_env, generate, measure  # this folder

#: The targets the verdicts check (seconds of wall time; auto's slack over the faster backend).
WARM_10S_CUDA_MAX_S = 0.6
COLD_10S_CUDA_MAX_S = 3.0
AUTO_SLACK = 1.10
_TOOK = re.compile(r"backend (cpu|cuda)\b")


def _run(wav: Path, out: Path, method: str, backend: str, env: dict, timeout: float) -> dict:
    argv = [sys.executable, "-m", "sigconv", "denoise", str(wav), "-o", str(out), "--method", method,
            "--backend", backend, "--force"]
    r = measure(argv, timeout, env)
    m = _TOOK.search(r.get("stdout", "") + r.get("stderr", ""))
    return {"rc": r.get("rc"), "wall_s": r.get("wall_s"), "maxrss_mb": r.get("maxrss_mb"),
            "took": m.group(1) if m else None, "tail": (r.get("stderr") or "")[-300:] if r.get("rc") else ""}


def prime(work: Path, methods: list, backends: list, env: dict, timeout: float) -> None:
    """One untimed run per method and backend on a second of audio, with kernel caches of its own: it compiles the
    bytecode of every module the timed runs import into env's PYTHONPYCACHEPREFIX and leaves the measured
    kernel caches empty."""
    wav = work / "prime.wav"
    generate(wav, 1.0)
    penv = dict(env, CUPY_CACHE_DIR=str(work / "prime-cupy"), SIGCONV_CACHE_DIR=str(work / "prime-sigconv"))
    for m in methods:
        for be in backends:
            r = _run(wav, work / "prime-out.wav", m, be, penv, timeout)
            if r["rc"] != 0:
                print(f"startup: priming {m} {be}: rc {r['rc']}: {r['tail']}", file=sys.stderr)
    wav.unlink()


def _median(runs: list) -> float | None:
    ok = [r["wall_s"] for r in runs if r["rc"] == 0 and r["wall_s"] is not None]
    return statistics.median(ok) if ok else None


def _fmt(v) -> str:
    return "-" if v is None else f"{v:.2f}"


def verdicts(rows: list) -> list[str]:
    """PASS/FAIL lines for the start-up targets and auto's choice, from the table's rows."""
    out = []
    for r in rows:
        tag = f"{r['method']} {r['duration_s']:g} s"
        if r["duration_s"] == 10 and r.get("cuda_warm_s") is not None:
            ok = r["cuda_warm_s"] <= WARM_10S_CUDA_MAX_S
            out.append(f"{tag}: cuda warm {r['cuda_warm_s']:.2f} s (target <= {WARM_10S_CUDA_MAX_S} s): "
                       f"{'PASS' if ok else 'FAIL'}")
        if r["duration_s"] == 10 and r.get("cuda_cold_s") is not None:
            ok = r["cuda_cold_s"] <= COLD_10S_CUDA_MAX_S
            out.append(f"{tag}: cuda first run after install {r['cuda_cold_s']:.2f} s (target <= "
                       f"{COLD_10S_CUDA_MAX_S} s): {'PASS' if ok else 'FAIL'}")
        best = min((v for v in (r.get("cpu_s"), r.get("cuda_warm_s")) if v is not None), default=None)
        if best is not None and r.get("auto_s") is not None and r.get("cuda_warm_s") is not None:
            ok = r["auto_s"] <= AUTO_SLACK * best
            out.append(f"{tag}: auto {r['auto_s']:.2f} s ({r['auto_took']}) against the faster backend "
                       f"{best:.2f} s (target <= {AUTO_SLACK:g}x): {'PASS' if ok else 'FAIL'}")
    return out


def markdown(doc: dict) -> str:
    lines = [f"# sigconv denoise start-up and crossover, {doc['device']}, {doc['date']}", "",
             f"48 kHz stereo PCM_16, whole commands, wall seconds (median of {doc['repeat']}); cold = empty kernel "
             "and autotuner caches.", "",
             "| method | seconds of audio | cpu | cuda warm | cuda cold | auto | auto took | faster |",
             "|---|---:|---:|---:|---:|---:|---|---|"]
    for r in doc["rows"]:
        faster = ""
        if r.get("cpu_s") is not None and r.get("cuda_warm_s") is not None:
            faster = "cpu" if r["cpu_s"] <= r["cuda_warm_s"] else "cuda"
        lines.append(f"| {r['method']} | {r['duration_s']:g} | {_fmt(r.get('cpu_s'))} | {_fmt(r.get('cuda_warm_s'))} "
                     f"| {_fmt(r.get('cuda_cold_s'))} | {_fmt(r.get('auto_s'))} | {r.get('auto_took') or ''} "
                     f"| {faster} |")
    if doc["verdicts"]:
        lines += ["", "## Targets", ""] + [f"- {v}" for v in doc["verdicts"]]
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", action="store_true", help="also the cuda and auto rows (cold and warm)")
    ap.add_argument("--durations", type=float, nargs="+", default=None,
                    help="seconds of audio (default 10 60; with --gpu 10 60 600 3600)")
    ap.add_argument("--methods", nargs="+", default=["fir", "spectral"], choices=["fir", "spectral"])
    ap.add_argument("--repeat", type=int, default=3, help="warm runs per row (median)")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per command")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results")
    a = ap.parse_args(argv)
    if a.repeat < 1:
        ap.error("--repeat must be at least 1")
    durations = a.durations or ([10, 60, 600, 3600] if a.gpu else [10, 60])
    if any(d <= 0 for d in durations):
        ap.error("--durations must be positive")
    device = _device(a.gpu)
    rows = []
    with tempfile.TemporaryDirectory(prefix="sigconv-startup-") as tmp:
        work = Path(tmp)
        base = child_env(work / "pycache")
        envs = {m: dict(base, CUPY_CACHE_DIR=str(work / f"cupy-cache-{m}"),
                        SIGCONV_CACHE_DIR=str(work / f"sigconv-cache-{m}")) for m in a.methods}  # cold per method
        prime(work, a.methods, ["cpu", "cuda"] if a.gpu else ["cpu"], base, a.timeout)
        cold_done = set()
        for d in sorted(durations):
            wav = work / f"in-{d:g}s.wav"
            generate(wav, d)
            for method in a.methods:
                env = envs[method]
                row = {"method": method, "duration_s": d, "runs": {}}
                out = work / "out.wav"
                backends = ["cpu"] + (["cuda", "auto"] if a.gpu else [])
                if a.gpu and method not in cold_done:  # the first cuda run of the method: empty caches
                    cold = _run(wav, out, method, "cuda", env, a.timeout)
                    row["runs"]["cuda_cold"] = [cold]
                    row["cuda_cold_s"] = cold["wall_s"] if cold["rc"] == 0 else None
                    cold_done.add(method)
                    if cold["rc"] != 0:
                        print(f"startup: {method} {d:g} s cuda cold: rc {cold['rc']}: {cold['tail']}",
                              file=sys.stderr)
                warm = {be: [] for be in backends}
                for _ in range(a.repeat):  # interleaved: a drift of the host's speed falls on every backend alike
                    for be in backends:
                        warm[be].append(_run(wav, out, method, be, env, a.timeout))
                for be in backends:
                    runs = warm[be]
                    row["runs"][be] = runs
                    key = {"cpu": "cpu_s", "cuda": "cuda_warm_s", "auto": "auto_s"}[be]
                    row[key] = _median(runs)
                    if be == "auto":
                        row["auto_took"] = runs[-1]["took"]
                    bad = [r for r in runs if r["rc"] != 0]
                    if bad:
                        print(f"startup: {method} {d:g} s {be}: rc {bad[0]['rc']}: {bad[0]['tail']}", file=sys.stderr)
                print(f"{method:8s} {d:7g} s  cpu {_fmt(row.get('cpu_s'))}  cuda warm {_fmt(row.get('cuda_warm_s'))}"
                      f"  cold {_fmt(row.get('cuda_cold_s'))}  auto {_fmt(row.get('auto_s'))}"
                      f" ({row.get('auto_took') or '-'})", flush=True)
                rows.append(row)
            wav.unlink()
    date = datetime.date.today().isoformat()
    doc = {"device": device, "date": date, "cpus": os.cpu_count(), "repeat": a.repeat, "bytecode": "primed",
           "rows": rows}
    doc["verdicts"] = verdicts(rows)
    for v in doc["verdicts"]:
        print("verdict:", v)
    a.out.mkdir(parents=True, exist_ok=True)
    stem = a.out / f"startup-{_slug(device)}-{date}"
    stem.with_suffix(".json").write_text(json.dumps(doc, indent=1))
    stem.with_suffix(".md").write_text(markdown(doc))
    print("wrote", stem.with_suffix(".json"), stem.with_suffix(".md"))
    failed = any(r["rc"] != 0 for row in rows for runs in row["runs"].values() for r in runs)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
