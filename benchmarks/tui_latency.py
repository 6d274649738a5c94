"""The TUI's latency table on a GPU machine, exported: what `sigconv tui` shows after r, without the screen.

    python benchmarks/tui_latency.py [--out benchmarks/results] [--seconds 60] [--formats md csv]

For each file (samples/speech_noisy.wav, and a synthetic stereo 48 kHz WAV of --seconds written to a temporary
folder) and each method (the default band-pass, and the spectral gate), on the cuda backend: the file loaded with
apps.loading.load_signal, the table measured with apps.latency.measure_latency and the TUI's defaults (budget 0.2 s
a row, at most 50 runs, the first 2^20 frames), written with apps.latency.export_latency to
<out>/tui-latency-<device>-<date>-<file>-<method>.md (and .csv): every sigconv variant and block next to scipy,
cuDNN and CuPy, the speed-up over the fastest of them, the share of the copy bandwidth, and for the spectral method
the gate's stages. A few minutes at most on an H200. Without a usable GPU: one line, exit status 2.
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def synthetic_wav(folder: Path, seconds: float, fs: int = 48000) -> Path:
    """A stereo PCM_16 WAV of ``seconds``: a tone sweep and speech-band noise bursts over a noise floor."""
    import soundfile as sf

    rng = np.random.default_rng(0)
    n = int(seconds * fs)
    t = np.arange(n) / fs
    tone = 0.2 * np.sin(2 * np.pi * (300 + 200 * np.sin(2 * np.pi * 0.05 * t)) * t)
    bursts = (np.sin(2 * np.pi * 0.5 * t) > 0.3) * 0.1 * rng.standard_normal(n)
    x = np.stack([tone + bursts, 0.7 * tone - bursts], axis=1) + 0.02 * rng.standard_normal((n, 2))
    path = folder / f"synthetic-stereo-48k-{int(seconds)}s.wav"
    sf.write(str(path), x.astype(np.float32), fs, subtype="PCM_16")
    return path


def device_tag(name: str) -> str:
    """``NVIDIA H200`` -> ``H200``: the GPU's name without the vendor, safe in a file name."""
    return re.sub(r"[^A-Za-z0-9]+", "-", name.replace("NVIDIA", "")).strip("-") or "gpu"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "results"), help="folder for the tables")
    p.add_argument("--seconds", type=float, default=60.0, help="length of the synthetic stereo 48 kHz WAV")
    p.add_argument("--formats", nargs="+", choices=("md", "csv"), default=["md", "csv"])
    p.add_argument("--methods", nargs="+", choices=("band", "spectral"), default=["band", "spectral"])
    p.add_argument("--budget", type=float, default=0.2, help="seconds of timed runs a row (the TUI's default)")
    p.add_argument("--reps", type=int, default=50, help="most timed runs a row (the TUI's default)")
    p.add_argument("--frames", type=int, default=1 << 20, help="frames timed (the TUI's default)")
    a = p.parse_args(argv)
    for path in (str(ROOT),):
        if path not in sys.path:
            sys.path.insert(0, path)
    import sigconv

    why = sigconv.cuda_reason()
    if why:
        print(f"tui_latency: no GPU: {why}")
        return 2
    from sigconv._core.devices import gpu_name
    from sigconv.cli.tui import apps_package

    apps_package()
    from apps.latency import export_latency, measure_latency
    from apps.loading import load_signal
    from apps.running import Settings

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    tag = f"{device_tag(gpu_name() or 'gpu')}-{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d}"
    settings = {"band": Settings(backend="cuda"),  # the TUI's start on a GPU machine: the default band-pass
                "spectral": Settings(backend="cuda", method="spectral", dimension="2d")}  # as choosing it sets
    t_all = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        files = [ROOT / "samples" / "speech_noisy.wav", synthetic_wav(Path(tmp), a.seconds)]
        for path in files:
            sig = load_signal(path)
            print(f"== {sig.summary()}", flush=True)
            for method in a.methods:
                t0 = time.perf_counter()
                lat = measure_latency(sig, settings[method], budget=a.budget, reps=a.reps, max_frames=a.frames)
                for fmt in a.formats:
                    dest = out / f"tui-latency-{tag}-{path.stem}-{method}.{fmt}"
                    print(export_latency(lat, dest, source=path, overwrite=True))
                _summary(lat, method, time.perf_counter() - t0)
    print(f"tui_latency: done in {time.perf_counter() - t_all:.0f} s")
    return 0


def _summary(lat, method: str, seconds: float) -> None:
    """A few lines: the fastest row, the best peer, the fastest sigconv row against it, the gate's stages."""
    timed = [r for r in lat.rows if r.ms and r.kind != "stage" and r.status == "ok"]
    ours = [r for r in timed if r.kind == "variant"]
    best = lat.best_peer
    print(f"   {method}: {lat.op} on {lat.case}, {len(timed)} timed rows in {seconds:.0f} s")
    if ours:
        r = min(ours, key=lambda r: r.ms)
        vs = f", x{r.speedup['best']:.2f} over {best.short} ({best.ms:.4g} ms)" if best and "best" in r.speedup else ""
        pct = f", {r.pct_copy:.3g}% of copy" if r.pct_copy else ""
        print(f"   fastest sigconv: {r.short_label} {r.ms:.4g} ms{pct}{vs}")
    stages = [r for r in lat.rows if r.kind == "stage"]
    if stages:
        print("   gate stages (ms): " + ", ".join(f"{r.impl.removeprefix('gate:')} {r.ms:.3g}" if r.ms else
                                                   f"{r.impl} {r.status}: {r.note}" for r in stages))


if __name__ == "__main__":
    sys.exit(main())
