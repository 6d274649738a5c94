"""Spectral gate vs noisereduce: quality (SNR improvement, clean-input distortion) and speed
(target: an hour of 48 kHz mono).

    python benchmarks/spectral_bench.py                       # quality + speed (1 h of 48 kHz mono)
    python benchmarks/spectral_bench.py --duration 60         # shorter speed run (label says so)
    python benchmarks/spectral_bench.py --gpu                 # add sigconv cuda and noisereduce's TorchGate
    python benchmarks/spectral_bench.py --skip-speed          # quality only
    python benchmarks/spectral_bench.py --skip-quality --stereo-duration 1800   # speed only, 30 min of stereo too

Quality: synthetic speech-like signals (harmonic syllables with gliding pitch and formant-like envelopes, pauses)
plus white, pink and hum-plus-hiss noise at 0 and 5 dB SNR, 16 kHz, 3 seeds. Two settings, the same inputs for
every method: "blind" (no noise reference: sigconv estimates it from the input, noisereduce's stationary mode uses
the input itself, as its defaults do) and "clip" (a separate recording of the noise: sigconv noise=..., noisereduce
y_noise=...). Non-stationary modes take no noise reference. Clean input: each method on the clean signal (blind).
Targets: SNR improvement >= noisereduce's (same setting, same mode) on every case; clean-input error <= -20 dB.

Speed, each sigconv row beside its peer in the same run: in memory, sigconv cuda against noisereduce's TorchGate
(target 5x) and sigconv cpu against noisereduce on the CPU with n_jobs=-1 (target: faster), mono and stereo, both
modes; file to file, whole `sigconv denoise --method spectral` commands on PCM_16 WAVs (wall time with start-up,
peak RSS; target on cuda: 1500x real time, an hour in 2.4 s).

Writes JSON and markdown to --out (default benchmarks/results/) named spectral-<machine>-<date>.
"""

from __future__ import annotations

import argparse
import datetime as _dt
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
sys.path.insert(0, str(ROOT))

import sigconv  # noqa: E402

FS = 16000


# ------------------------------------------------------------------------------------------ signals


def speech_like(dur, fs, rng):
    """Harmonic syllables (f0 100-220 Hz with vibrato/glide, two formant-like bumps), 50-300 ms pauses; peak 0.3."""
    n = int(dur * fs)
    t = np.arange(n) / fs
    y = np.zeros(n)
    pos = 0.2
    while pos < dur - 0.4:
        sd = rng.uniform(0.12, 0.35)
        i0, i1 = int(pos * fs), int((pos + sd) * fs)
        tt = t[i0:i1] - pos
        f0 = rng.uniform(100, 220) * (1 + 0.15 * np.sin(2 * np.pi * rng.uniform(2, 5) * tt)) * (1 + 0.2 * tt)
        ph = 2 * np.pi * np.cumsum(f0) / fs
        env = np.sin(np.pi * tt / sd) ** 2
        fm1, fm2 = rng.uniform(400, 900), rng.uniform(1000, 2500)
        s = np.zeros_like(tt)
        for k in range(1, 40):
            if k * f0.max() >= 0.45 * fs:
                break
            amp = np.exp(-((k * f0 - fm1) / 300) ** 2) + 0.5 * np.exp(-((k * f0 - fm2) / 400) ** 2) + 0.05
            s += amp * np.sin(k * ph) / k ** 0.3
        y[i0:i1] += env * s
        pos += sd + rng.uniform(0.05, 0.3)
    return 0.3 * y / np.max(np.abs(y))


def noise(kind, n, fs, rng):
    if kind == "white":
        return rng.standard_normal(n)
    if kind == "pink":
        X = np.fft.rfft(rng.standard_normal(n))
        f = np.arange(X.size, dtype=float)
        f[0] = 1.0
        return np.fft.irfft(X / np.sqrt(f), n)
    if kind == "hum+hiss":
        t = np.arange(n) / fs
        ph = rng.uniform(0, 2 * np.pi)
        hum = sum(np.sin(2 * np.pi * 50 * k * t + k * ph) / k for k in range(1, 8))
        return hum + 0.3 * rng.standard_normal(n)
    raise ValueError(kind)


def snr_db(y, ref):
    return float(10 * np.log10(np.sum(ref ** 2) / np.sum((y - ref) ** 2)))


# ------------------------------------------------------------------------------------------ methods


def methods(backend):
    import noisereduce as nr

    return {
        "sigconv stationary": lambda x, clip: sigconv.spectral_denoise(x, FS, noise=clip, backend=backend),
        "sigconv non-stationary": lambda x, clip: sigconv.spectral_denoise(x, FS, stationary=False, backend=backend),
        "noisereduce stationary": lambda x, clip: nr.reduce_noise(y=x, sr=FS, y_noise=clip, stationary=True),
        "noisereduce non-stationary": lambda x, clip: nr.reduce_noise(y=x, sr=FS, stationary=False),
    }


PAIRS = [("sigconv stationary", "noisereduce stationary"), ("sigconv non-stationary", "noisereduce non-stationary")]


def quality(seeds, dur, backend):
    meth = methods(backend)
    rows = []
    for kind in ("white", "pink", "hum+hiss"):
        for snr_in in (0, 5):
            for setting in ("blind", "clip"):
                acc = {m: [] for m in meth}
                for seed in range(seeds):
                    rng = np.random.default_rng(1000 + seed)
                    s = speech_like(dur, FS, rng)
                    n = s.size
                    z = noise(kind, n + 2 * FS, FS, rng)
                    g = np.sqrt(np.sum(s ** 2) / np.sum(z[:n] ** 2) / 10 ** (snr_in / 10))
                    x, clip = s + g * z[:n], g * z[n:]
                    base = snr_db(x, s)
                    for m, f in meth.items():
                        if setting == "clip" and "non-stationary" in m:
                            continue
                        acc[m].append(snr_db(np.asarray(f(x, clip if setting == "clip" else None)), s) - base)
                row = {"noise": kind, "snr_in_db": snr_in, "setting": setting}
                row.update({m: float(np.mean(v)) for m, v in acc.items() if v})
                rows.append(row)
    clean = {}
    for m, f in meth.items():
        errs = []
        for seed in range(seeds):
            s = speech_like(dur, FS, np.random.default_rng(1000 + seed))
            errs.append(-snr_db(np.asarray(f(s, None)), s))
        clean[m] = float(np.max(errs))  # worst seed
    return rows, clean


def verdicts(rows, clean):
    out = []
    for r in rows:
        for ours, theirs in PAIRS:
            if ours in r and theirs in r:
                d = r[ours] - r[theirs]
                out.append({"case": f"{r['noise']} {r['snr_in_db']} dB {r['setting']}: {ours} vs {theirs}",
                            "margin_db": d, "pass": bool(d >= 0)})
    for m in ("sigconv stationary", "sigconv non-stationary"):
        out.append({"case": f"clean input error, {m}", "error_db": clean[m], "pass": bool(clean[m] <= -20)})
    return out


# ------------------------------------------------------------------------------------------ speed


def _time(fn, reps=1):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


#: A small parent for each measured command: it times its only child and reads that child's peak RSS
#: (RUSAGE_CHILDREN; a child forked from this large process would inherit its high-water mark instead).
_PARENT = ("import resource, subprocess, sys, time; t = time.perf_counter();"
           "r = subprocess.run([sys.executable, '-m', 'sigconv', *sys.argv[1:]], stdout=subprocess.DEVNULL);"
           "print(r.returncode, time.perf_counter() - t, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def _command(args, reps):
    """Best wall time (s) and that run's peak RSS (MB) of a whole ``python -m sigconv ...`` process, start-up
    included, run from the repository's folder. The output (``-o``) is removed before each run: every run writes
    a new file, as a first run does (replacing one adds the file system's cost of freeing the old file: 0.2 s
    for an hour of stereo on the H200 host)."""
    best, rss = float("inf"), 0.0
    out = Path(ROOT, args[args.index("-o") + 1]) if "-o" in args else None
    for _ in range(reps):
        if out is not None:
            out.unlink(missing_ok=True)
        p = subprocess.run([sys.executable, "-c", _PARENT, *args], cwd=ROOT, capture_output=True, text=True)
        try:
            rc, secs, kb = p.stdout.split()
        except ValueError:
            raise RuntimeError(f"sigconv {' '.join(args)}: {p.stderr.strip()[-500:]}") from None
        if int(rc):
            raise RuntimeError(f"sigconv {' '.join(args)}: exit {rc}: {p.stderr.strip()[-500:]}")
        if float(secs) < best:
            best, rss = float(secs), int(kb) / 1024
    return best, rss


def _pcm16(path, x, fs):
    import soundfile as sf

    sf.write(str(path), np.clip(x, -1, 1).T, fs, subtype="PCM_16")


def speed(duration, gpu, stereo_duration, reps, partial=None, cpu_files=True):
    """Each sigconv row beside its peer, same input, same run. In memory: one hour (``duration``) of 48 kHz mono
    float32 noise (noise is the worst case: every cell near the threshold); stereo: ``stereo_duration`` of two
    channels. File to file: whole ``sigconv denoise`` commands on PCM_16 WAVs of the same signals."""
    import noisereduce as nr

    fs = 48000
    rng = np.random.default_rng(7)
    n = int(duration * fs)
    x = (0.1 * rng.standard_normal(n)).astype(np.float32)
    n2 = int(stereo_duration * fs)
    x2 = (0.1 * rng.standard_normal((2, n2))).astype(np.float32)
    res = {"duration_s": duration, "stereo_duration_s": stereo_duration, "fs": fs, "rows": []}

    def add(name, secs, kind, dur, peer=None, rss_mb=None):
        row = {"method": name, "kind": kind, "audio_s": dur, "seconds": secs, "x_real_time": dur / secs}
        if peer is not None:
            row["vs_peer"] = peer / secs
        if rss_mb is not None:
            row["peak_rss_mb"] = rss_mb
        res["rows"].append(row)
        extra = (f"  {peer / secs:5.2f}x the peer" if peer is not None else "") + (
            f"  peak RSS {rss_mb:.0f} MB" if rss_mb is not None else "")
        print(f"  {name:52s} {kind:13s} {secs:9.3f} s  {dur / secs:8.0f}x real time{extra}", flush=True)
        if partial is not None:  # the rows so far survive a run cut short
            partial.write_text(json.dumps(res, indent=1))
        return secs

    for mode, st in (("stationary", True), ("non-stationary", False)):
        peer = add(f"noisereduce cpu n_jobs=-1 {mode}",
                   _time(lambda: nr.reduce_noise(y=x, sr=fs, stationary=st, n_jobs=-1)), "in memory", duration)
        add(f"sigconv cpu {mode}", _time(lambda: sigconv.spectral_denoise(x, fs, stationary=st, backend="cpu"), reps),
            "in memory", duration, peer)
    if stereo_duration:
        for mode, st in (("stationary", True), ("non-stationary", False)):
            peer = add(f"noisereduce cpu n_jobs=-1 {mode}, stereo",
                       _time(lambda: nr.reduce_noise(y=x2, sr=fs, stationary=st, n_jobs=-1)), "in memory",
                       stereo_duration)
            add(f"sigconv cpu {mode}, stereo",
                _time(lambda: sigconv.spectral_denoise(x2, fs, stationary=st, backend="cpu"), reps), "in memory",
                stereo_duration, peer)
    if gpu:
        import cupy

        xd = cupy.asarray(x)
        for mode, st in (("stationary", True), ("non-stationary", False)):
            sigconv.spectral_denoise(xd[: fs * 10], fs, stationary=st)  # warm-up (compile, plans)
            cupy.cuda.Device().synchronize()
            peer = None
            try:
                import torch
                from noisereduce.torchgate import TorchGate

                tg = TorchGate(sr=fs, nonstationary=not st).to("cuda")
                xt = torch.from_numpy(x)[None].to("cuda")
                with torch.no_grad():
                    tg(xt[:, : fs * 10])
                    torch.cuda.synchronize()

                    def run_tg():
                        tg(xt)
                        torch.cuda.synchronize()

                    peer = add(f"noisereduce TorchGate cuda {mode}", _time(run_tg, 3), "in memory", duration)
                del tg, xt
                torch.cuda.empty_cache()
            except Exception as exc:  # noqa: BLE001 (torch missing or out of memory: say so)
                print(f"  TorchGate {mode}: not run ({str(exc).splitlines()[0]})")

            def run_gpu():
                sigconv.spectral_denoise(xd, fs, stationary=st)
                cupy.cuda.Device().synchronize()

            add(f"sigconv cuda {mode}", _time(run_gpu, 3), "in memory", duration, peer)
        del xd
        cupy.get_default_memory_pool().free_all_blocks()
    with tempfile.TemporaryDirectory() as d:
        # 10 s: the start-up floor (imports, CUDA context) that every command pays, in time and memory
        files = {"10 s mono": (Path(d) / "short.wav", 10.0), "mono": (Path(d) / "mono.wav", duration)}
        _pcm16(files["10 s mono"][0], x[None, :10 * fs], fs)
        _pcm16(files["mono"][0], x[None], fs)
        if stereo_duration:
            files["stereo"] = (Path(d) / "stereo.wav", stereo_duration)
            _pcm16(files["stereo"][0], x2, fs)
        out = Path(d) / "out.wav"
        for be in (["cuda"] if gpu else []) + (["cpu"] if cpu_files else []):
            for name, (inp, dur) in files.items():
                for flag in ("--stationary", "--non-stationary"):
                    args = ["denoise", str(inp), "--method", "spectral", flag, "--backend", be, "-o", str(out),
                            "-f", "-q"]
                    if be == "cuda":
                        _command(args, 1)  # warm: CuPy's kernel cache on disk, the page cache
                    secs, rss = _command(args, reps if be == "cuda" else 1)
                    add(f"sigconv denoise --backend {be} {flag[2:]}, {name} PCM_16", secs,
                        "file to file", dur, rss_mb=rss)
    return res


# ------------------------------------------------------------------------------------------ report


def machine():
    name = platform.node() or "host"
    try:
        import cupy

        name = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode().replace(" ", "_")
    except Exception:  # noqa: BLE001
        name = f"cpu{os.cpu_count()}"
    return name


def markdown(meta, rows, clean, ver, spd):
    L = [f"# Spectral gate vs noisereduce ({meta['machine']}, {meta['date']})", ""]
    names = list(methods("cpu"))
    if rows:
        L += [f"sigconv backend {meta['backend']}, noisereduce {meta['noisereduce']}; quality: {meta['seeds']} seeds "
              f"x {meta['quality_duration_s']} s at {FS} Hz, mean SNR improvement (dB).", ""]
        L += ["| noise | SNR in | setting | " + " | ".join(names) + " |", "|---|---|---|" + "---|" * len(names)]
        for r in rows:
            L.append(f"| {r['noise']} | {r['snr_in_db']} dB | {r['setting']} | "
                     + " | ".join(f"{r[m]:.2f}" if m in r else "-" for m in names) + " |")
        L += ["", "Clean input error (dB, worst seed; target <= -20 for sigconv):", "",
              "| " + " | ".join(names) + " |", "|" + "---|" * len(names),
              "| " + " | ".join(f"{clean[m]:.1f}" for m in names) + " |", "", "Verdicts:", ""]
        for v in ver:
            val = f"margin {v['margin_db']:+.2f} dB" if "margin_db" in v else f"{v['error_db']:.1f} dB"
            L.append(f"- {'PASS' if v['pass'] else 'FAIL'}: {v['case']} ({val})")
    if spd:
        L += ["", f"## Speed: {spd['duration_s']:g} s of {spd['fs']} Hz mono"
              + (f", {spd['stereo_duration_s']:g} s of stereo" if spd.get("stereo_duration_s") else "")
              + ("" if spd["duration_s"] >= 3600 else " (shorter than the one-hour target: --duration)"), "",
              f"{meta['cpus']} CPUs. In memory: best of {meta.get('reps', 1)} (sigconv), of 1 (noisereduce on the CPU) "
              f"and of 3 (TorchGate, sigconv cuda). File to file: the whole command's wall time, start-up "
              f"included; cuda: best of {meta.get('reps', 1)} after a warm-up run, cpu: one run.", "",
              "| method | kind | audio s | seconds | x real time | vs peer | peak RSS MB |", "|---|---|---:|---:|---:|---:|---:|"]
        for r in spd["rows"]:
            vs = f"{r['vs_peer']:.2f}x" if "vs_peer" in r else ""
            rss = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else ""
            L.append(f"| {r['method']} | {r['kind']} | {r['audio_s']:g} | {r['seconds']:.3f} | "
                     f"{r['x_real_time']:.0f} | {vs} | {rss} |")
    return "\n".join(L) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--duration", type=float, default=3600.0, help="speed test length in seconds (default 1 h)")
    p.add_argument("--gpu", action="store_true", help="sigconv cuda and noisereduce TorchGate too")
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--quality-duration", type=float, default=8.0)
    p.add_argument("--stereo-duration", type=float, default=1800.0,
                   help="stereo rows' length in seconds (default 30 min; 0: none)")
    p.add_argument("--reps", type=int, default=3, help="runs per sigconv timing (best is kept)")
    p.add_argument("--skip-cpu-files", action="store_true", help="no cpu file-to-file rows (the slowest)")
    p.add_argument("--skip-speed", action="store_true")
    p.add_argument("--skip-quality", action="store_true")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"))
    a = p.parse_args(argv)
    import noisereduce

    backend = "cuda" if a.gpu else "cpu"
    meta = {"machine": machine(), "date": _dt.date.today().isoformat(), "backend": backend, "seeds": a.seeds,
            "quality_duration_s": a.quality_duration, "cpus": os.cpu_count(), "reps": a.reps,
            "noisereduce": getattr(noisereduce, "__version__", "3.x")}
    rows, clean, ver = [], {}, []
    if not a.skip_quality:
        print("quality (mean SNR improvement, dB):", flush=True)
        rows, clean = quality(a.seeds, a.quality_duration, backend)
        names = list(methods("cpu"))
        print(f"  {'case':28s}" + "".join(f"{m:>28s}" for m in names))
        for r in rows:
            print(f"  {r['noise'] + ' ' + str(r['snr_in_db']) + ' dB ' + r['setting']:28s}"
                  + "".join(f"{r[m]:28.2f}" if m in r else f"{'-':>28s}" for m in names))
        print(f"  {'clean input error (dB)':28s}" + "".join(f"{clean[m]:28.1f}" for m in names))
        ver = verdicts(rows, clean)
        for v in ver:
            if not v["pass"]:
                print("  FAIL:", v)
        print(f"  verdicts: {sum(v['pass'] for v in ver)}/{len(ver)} pass")
    spd = None
    if not a.skip_speed:
        print(f"speed ({a.duration:g} s of 48 kHz mono, {a.stereo_duration:g} s of stereo):", flush=True)
        Path(a.out).mkdir(parents=True, exist_ok=True)
        spd = speed(a.duration, a.gpu, a.stereo_duration, a.reps, Path(a.out) / "spectral-speed-partial.json",
                    cpu_files=not a.skip_cpu_files)
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = f"spectral-{meta['machine']}-{meta['date']}"
    (out / f"{stem}.json").write_text(json.dumps({"meta": meta, "quality": rows, "clean_error_db": clean,
                                                  "verdicts": ver, "speed": spd}, indent=1))
    (out / f"{stem}.md").write_text(markdown(meta, rows, clean, ver, spd))
    (out / "spectral-speed-partial.json").unlink(missing_ok=True)
    print(f"wrote {out / stem}.json and .md")
    return 0 if all(v["pass"] for v in ver) else 1


if __name__ == "__main__":
    sys.exit(main())
