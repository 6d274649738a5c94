"""Generate sigconv's sample inputs, deterministically (same bytes on every run and machine).

    python samples/make_samples.py [OUTDIR]      (default: the folder of this script)

- speech_noisy.wav         10 s, 48 kHz, mono PCM_16: a speech-like harmonic signal (gliding pitch
                           110-220 Hz, 30 harmonics shaped by two moving formants, syllable envelope)
                           plus 50 Hz mains hum with harmonics, 20 Hz rumble and broadband hiss.
- speech_noisy_stereo.wav  the same idea in stereo: two voices panned apart, shared noise.
- sensor_log.csv           2 minutes at 100 Hz: a `timestamp` column (seconds) and 6 numeric channels
                           (accelerometer/temperature-like signals) with drift, white noise and
                           power-line interference (50 Hz, which sits at Nyquist for 100 Hz sampling)
                           plus a 16.7 Hz vibration line.

Every file stays under 2 MB. The output depends only on NumPy's PCG64 generator with fixed seeds
and on float64 arithmetic, and PCM_16 quantisation is done here (round half to even), not by
libsndfile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

FS = 48_000
DURATION = 10.0


def _voice(rng: np.random.Generator, t: np.ndarray, f_lo: float, f_hi: float, syllable_hz: float) -> np.ndarray:
    """Harmonic 'speech': gliding f0, formant-shaped harmonics, on/off syllable envelope."""
    f0 = f_lo + (f_hi - f_lo) * (0.5 + 0.5 * np.sin(2 * np.pi * 0.21 * t + rng.uniform(0, 6.28)))
    phase = 2 * np.pi * np.cumsum(f0) / FS
    f1 = 500 + 300 * np.sin(2 * np.pi * 0.7 * t + rng.uniform(0, 6.28))  # first formant track
    f2 = 1500 + 700 * np.sin(2 * np.pi * 0.43 * t + rng.uniform(0, 6.28))  # second formant track
    sig = np.zeros_like(t)
    for k in range(1, 31):
        fk = k * f0
        amp = np.exp(-(((fk - f1) / 250) ** 2)) + 0.6 * np.exp(-(((fk - f2) / 400) ** 2)) + 0.02
        sig += amp * np.sin(k * phase) * (fk < 0.45 * FS)
    env = np.clip(np.sin(2 * np.pi * syllable_hz * t + rng.uniform(0, 6.28)), 0, None) ** 0.7
    sig *= env
    return sig / np.max(np.abs(sig))


def _noise(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    hum = sum(0.08 / k * np.sin(2 * np.pi * 50 * k * t + k) for k in (1, 2, 3, 5))
    rumble = 0.15 * np.sin(2 * np.pi * 20 * t)
    hiss = 0.06 * rng.standard_normal(t.size)
    return hum + rumble + hiss


def _pcm16(x: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(x * 32768.0), -32768, 32767).astype(np.int16)


def _write_wav(path: Path, pcm: np.ndarray) -> None:
    import soundfile as sf

    sf.write(str(path), pcm, FS, subtype="PCM_16", format="WAV")


def make_speech(outdir: Path) -> Path:
    rng = np.random.default_rng(20261130)
    t = np.arange(int(FS * DURATION)) / FS
    x = 0.45 * _voice(rng, t, 110, 220, 2.3) + _noise(rng, t)
    p = outdir / "speech_noisy.wav"
    _write_wav(p, _pcm16(0.8 * x / np.max(np.abs(x))))
    return p


def make_stereo(outdir: Path) -> Path:
    rng = np.random.default_rng(20261131)
    t = np.arange(int(FS * DURATION)) / FS
    a = _voice(rng, t, 100, 180, 2.1)
    b = _voice(rng, t, 170, 260, 3.1)
    n = _noise(rng, t)
    left = 0.4 * a + 0.15 * b + n + 0.03 * rng.standard_normal(t.size)
    right = 0.15 * a + 0.4 * b + 0.9 * n + 0.03 * rng.standard_normal(t.size)
    x = np.stack([left, right], axis=1)
    p = outdir / "speech_noisy_stereo.wav"
    _write_wav(p, _pcm16(0.8 * x / np.max(np.abs(x))))
    return p


def make_sensor_log(outdir: Path) -> Path:
    rng = np.random.default_rng(20261201)
    fs, minutes = 100.0, 2
    n = int(fs * 60 * minutes)
    t = np.arange(n) / fs
    mains = np.cos(np.pi * np.arange(n) + 0.3)  # 50 Hz sampled at 100 Hz: the Nyquist line
    vib = np.sin(2 * np.pi * 16.7 * t)
    cols = {}
    for i, name in enumerate(("accel_x", "accel_y", "accel_z")):
        motion = np.sin(2 * np.pi * (0.5 + 0.3 * i) * t) + 0.3 * np.sin(2 * np.pi * 3.1 * t + i)
        drift = 0.002 * t * (i + 1) + np.cumsum(rng.standard_normal(n)) * 0.002
        cols[name] = motion + drift + 0.2 * mains + 0.15 * vib + 0.1 * rng.standard_normal(n) + (9.81 if i == 2 else 0)
    for i, name in enumerate(("gyro_x", "gyro_y")):
        cols[name] = 0.5 * np.sin(2 * np.pi * 1.3 * t + i) + 0.05 * t / 60 + 0.1 * mains + 0.05 * rng.standard_normal(n)
    cols["temperature"] = 21.5 + 0.8 * t / t[-1] + 0.05 * np.sin(2 * np.pi * t / 40) + 0.02 * rng.standard_normal(n) \
        + 0.05 * mains
    p = outdir / "sensor_log.csv"
    with open(p, "w", newline="\n") as f:
        f.write("timestamp," + ",".join(cols) + "\n")
        data = np.column_stack([t] + list(cols.values()))
        for row in data:
            f.write(f"{row[0]:.2f}," + ",".join(f"{v:.6f}" for v in row[1:]) + "\n")
    return p


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    outdir = Path(argv[0]) if argv else Path(__file__).resolve().parent
    outdir.mkdir(parents=True, exist_ok=True)
    for p in (make_speech(outdir), make_stereo(outdir), make_sensor_log(outdir)):
        print(f"{p} ({p.stat().st_size / 1e6:.2f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
