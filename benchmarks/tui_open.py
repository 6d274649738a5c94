"""The terminal UI on an hour-long recording: open, filter the whole file, save; wall time and peak memory.

    python benchmarks/tui_open.py [--seconds 3600] [--backend cpu|cuda] [--warmup] [--steps ...] [--out DIR]

Writes one stereo 48 kHz PCM_16 WAV of --seconds (an hour: 691 MB) to a temporary folder, then runs each step in a
fresh process driving `sigconv tui` headless (Textual's pilot, 120x36), so that each peak RSS is the step's own:
- open, cold: the overview streamed from the file (an empty cache folder); the time from creating the app to the
  overview and the window drawn, and the whole process's wall time (interpreter start and imports included: their
  bytecode written before the steps, untimed, as an installed package has it);
- open, warm: the same with the overview in the cache;
- run: the default band-pass (7,921 taps) and the spectral gate over the whole file, on --backend, streamed through
  the engine of `sigconv denoise` into the app's scratch folder (the latency table replaced by a stub: it times
  a 2^20-frame excerpt, not the file);
- save: the run's file copied to an output beside the recording;
- cli: the same two filters by `sigconv denoise` in a process of its own, for reference.
Targets: open in 2 s or less, peak RSS under 500 MB. Writes tui-open-<machine>-<backend>-<date>.json and .md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from denoise_vs_sox import child_env  # this folder

ROOT = Path(__file__).resolve().parents[1]
TARGET_OPEN_S = 2.0
TARGET_RSS_MB = 500.0
STEPS = ("open-cold", "open-warm", "run-band-pass", "cli-band-pass", "run-spectral", "cli-spectral", "save")


def write_recording(path: Path, seconds: int, fs: int = 48000) -> None:
    """A minute at a time: a tone whose pitch and loudness change, plus noise (never the whole in memory)."""
    import numpy as np
    import soundfile as sf

    rng = np.random.default_rng(0)
    with sf.SoundFile(str(path), "w", fs, 2, "PCM_16") as f:
        for m in range(0, seconds, 60):
            n = min(60, seconds - m) * fs
            t = np.arange(n) / fs
            x = 0.2 * np.sin(2 * np.pi * (220 + m % 400) * t)[:, None] * np.array([[1.0, 0.6]])
            f.write((x + 0.05 * rng.standard_normal((n, 2))).astype(np.float32))


# ---------------------------------------------------------------------------------- one step, in its own process


def _child(step: str, path: str, backend: str, out: str) -> dict:
    t_start = time.perf_counter()
    sys.path.insert(0, str(ROOT))
    if step.startswith("cli-"):  # the same filter by `sigconv denoise`, for reference
        from sigconv.cli import main as cli

        method = "spectral" if step == "cli-spectral" else "fir"
        rc = cli(["denoise", path, "-o", out, "--method", method, "--backend", backend, "--quiet"])
        Path(out).unlink(missing_ok=True)
        return {"step": step, "rc": rc, "run_s": time.perf_counter() - t_start, "desc": f"sigconv denoise --method "
                f"{method} --backend {backend} (process, for reference)",
                "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
    from sigconv.cli.tui import apps_package

    apps_package()
    from apps.app import make_app
    from apps.latency import Latency
    from apps.messages import SettingsChanged

    def no_latency(sig, s, **kw):
        return Latency(s.op, "not timed", [], date="")

    res: dict = {"step": step}

    async def drive():
        t0 = time.perf_counter()
        app = make_app(path, backend=backend, measure=no_latency)
        async with app.run_test(size=(120, 36)) as pilot:
            while app.signal is None or app.busy or "window:" not in str(app.query_one("#signal-note").render()):
                if app.busy is None and app.signal is None and "cannot" in app.status_text:
                    raise SystemExit(app.status_text)
                await pilot.pause(0.02)
            res["open_s"] = time.perf_counter() - t0
            if step.startswith("run") or step == "save":
                if "spectral" in step:
                    app.on_settings_changed(SettingsChanged("method", "spectral"))
                t1 = time.perf_counter()
                await pilot.press("r")
                while app.busy or app.result is None:  # (polled slowly: each pause redraws the screen)
                    if "failed" in app.status_text:
                        raise SystemExit(app.status_text)
                    await pilot.pause(0.25)
                res["run_s"] = time.perf_counter() - t1
                res["desc"] = app.result.desc
            if step == "save":
                t2 = time.perf_counter()
                app._save(Path(out), True)
                while app.busy:
                    await pilot.pause(0.1)
                res["save_s"] = time.perf_counter() - t2
                res["saved"] = app.status_text
        res["in_process_s"] = time.perf_counter() - t_start

    asyncio.run(drive())
    res["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return res


def run_step(step: str, path: Path, backend: str, cache: Path, out: Path, pycache: Path) -> dict:
    """One step in a process of its own: sigconv's cache in ``cache``, Python's bytecode in ``pycache``
    (denoise_vs_sox.child_env: as an installed package's, not compiled again by every run)."""
    env = dict(child_env(pycache), SIGCONV_CACHE_DIR=str(cache))
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, __file__, "--child", step, str(path), backend, str(out)], env=env,
                       capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise SystemExit(f"{step} failed: {(p.stderr or p.stdout).strip().splitlines()[-1:]}")
    r = json.loads(p.stdout.strip().splitlines()[-1])
    r["process_wall_s"] = wall
    return r


# ---------------------------------------------------------------------------------- report


def machine(backend: str) -> str:
    if backend == "cuda":
        sys.path.insert(0, str(ROOT))
        from sigconv._core import devices

        return (devices.gpu_name() or "gpu").replace("NVIDIA ", "").replace(" ", "-")
    return f"{platform.node() or 'cpu'}-{os.cpu_count()}cores"


def markdown(meta: dict, rows: list) -> str:
    lines = [f"# sigconv tui on a {meta['seconds'] / 60:g}-minute stereo recording ({meta['backend']})", "",
             f"- {meta['date']}; {meta['machine']}; {meta['cpus']} CPUs; file {meta['file_mb']:.0f} MB, "
             f"48 kHz stereo PCM_16; Python {meta['python']}; "
             + ("after a warm-up run of both filters on 10 s (kernels compiled)" if meta.get("warmup") else
                "no warm-up: on a fresh machine the first cuda run compiles its kernels"),
             f"- targets: open in {TARGET_OPEN_S:g} s or less, peak RSS under {TARGET_RSS_MB:g} MB (the page cache "
             "holds the file: it was just written); the run and save rows have no target: they stream, and "
             "the cli rows are `sigconv denoise` on the same file for comparison", "",
             "| step | in the app (s) | process wall (s) | peak RSS (MB) | verdict | what |",
             "|---|---:|---:|---:|---|---|"]
    for r in rows:
        s = r["step"]
        if s.startswith("open"):
            secs, ok = r["open_s"], r["open_s"] <= TARGET_OPEN_S and r["peak_rss_mb"] < TARGET_RSS_MB
            what = "overview + window drawn"
        else:  # the whole-file steps stream (no target of their own): their memory beside the command line's
            secs, ok = (r["save_s"], None) if s == "save" else (r["run_s"], None)
            what = r.get("saved", "") if s == "save" else r.get("desc", "")
        verdict = "" if ok is None else ("PASS" if ok else "MISS")
        lines.append(f"| {s} | {secs:.2f} | {r['process_wall_s']:.2f} | {r['peak_rss_mb']:.0f} | {verdict} | "
                     f"{what.replace('|', '/')} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=int, default=3600)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    ap.add_argument("--steps", nargs="+", default=list(STEPS), choices=STEPS)
    ap.add_argument("--warmup", action="store_true", help="first run both filters on 10 s (compiles the kernels: "
                    "the steps then time a machine in use, not the first run after install)")
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.child:
        print(json.dumps(_child(*a.child)))
        return 0
    with tempfile.TemporaryDirectory(prefix="sigconv-tui-open-") as tmp:
        tmp = Path(tmp)
        rec = tmp / "hour.wav"
        t0 = time.perf_counter()
        write_recording(rec, a.seconds)
        print(f"wrote {rec} ({rec.stat().st_size / 1e6:.0f} MB) in {time.perf_counter() - t0:.1f} s", flush=True)
        cache, pycache = tmp / "cache", tmp / "pycache"
        # the bytecode of every module the steps import, written once, untimed (an installed package's is)
        subprocess.run([sys.executable, "-c", "import sigconv.engine.denoise, apps.app"], env=child_env(pycache),
                       check=True, timeout=600)
        if a.warmup:  # kernels compiled and imports cached by a short run of each filter, not reported
            short = tmp / "short.wav"
            write_recording(short, 10)
            for step in ("cli-band-pass", "cli-spectral"):
                run_step(step, short, a.backend, tmp / "warm-cache", tmp / "warm.wav", pycache)
        rows = []
        for step in a.steps:
            r = run_step(step, rec, a.backend, cache, tmp / "out.wav", pycache)
            print(json.dumps(r), flush=True)
            rows.append(r)
        meta = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    machine=machine(a.backend), cpus=os.cpu_count(), backend=a.backend, seconds=a.seconds,
                    file_mb=rec.stat().st_size / 1e6, python=platform.python_version(), warmup=a.warmup)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"tui-open-{meta['machine']}-{a.backend}-{meta['date'][:10]}"
    (out / f"{stem}.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1) + "\n")
    md = markdown(meta, rows)
    (out / f"{stem}.md").write_text(md)
    print(md)
    return 0


if __name__ == "__main__":
    sys.exit(main())
