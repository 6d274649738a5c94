"""The committed samples are what samples/make_samples.py generates, and each is under 2 MB."""

from __future__ import annotations

import subprocess
import sys

import soundfile as sf

from conftest import SAMPLES


def test_samples_regenerate_identically(tmp_path):
    r = subprocess.run([sys.executable, str(SAMPLES / "make_samples.py"), str(tmp_path)], capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    for name in ("speech_noisy.wav", "speech_noisy_stereo.wav", "sensor_log.csv"):
        new, old = (tmp_path / name).read_bytes(), (SAMPLES / name).read_bytes()
        assert new == old, f"{name} differs from the committed sample"
        assert len(old) < 2 * 1024 * 1024


def test_sample_properties():
    mono, stereo = sf.info(str(SAMPLES / "speech_noisy.wav")), sf.info(str(SAMPLES / "speech_noisy_stereo.wav"))
    assert (mono.samplerate, mono.channels, mono.subtype, mono.duration) == (48000, 1, "PCM_16", 10.0)
    assert (stereo.samplerate, stereo.channels, stereo.subtype) == (48000, 2, "PCM_16")
    lines = (SAMPLES / "sensor_log.csv").read_text().splitlines()
    assert lines[0].split(",")[0] == "timestamp" and len(lines[0].split(",")) == 7
    assert float(lines[2].split(",")[0]) - float(lines[1].split(",")[0]) == 0.01
