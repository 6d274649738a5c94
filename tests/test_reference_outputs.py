"""`sigconv denoise` and `sigconv batch` write the same bytes as the reference outputs recorded in
tests/reference_outputs.json (SHA-256 of every output file, recorded from a known-good build).

A change that moves a sample of any output fails here. To record new references after an intended change of
output, run with SIGCONV_RECORD_REFERENCES=1 and commit the JSON with the reason in the message. The references
hold for the numeric libraries they were recorded with (FFT and float formatting differ between versions) and for
the SIMD kernels NumPy dispatches to on the recording CPU: elsewhere the tests skip and name the difference.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from conftest import SAMPLES

REFERENCES = Path(__file__).with_name("reference_outputs.json")
RECORD = os.environ.get("SIGCONV_RECORD_REFERENCES") == "1"

MONO, STEREO, LOG = SAMPLES / "speech_noisy.wav", SAMPLES / "speech_noisy_stereo.wav", SAMPLES / "sensor_log.csv"

DENOISE = {
    "default": (MONO, []),
    "stereo-band-notch-linear": (STEREO, ["--band", "100", "5000", "--notch", "50", "150", "--phase", "linear"]),
    "lowpass-31-taps": (MONO, ["--lowpass", "4000", "--taps", "31"]),
    "highpass-direct": (MONO, ["--highpass", "200", "--taps", "41", "--variant", "direct"]),
    "notch-only-fft": (STEREO, ["--notch", "60", "--notch-width", "3", "--variant", "fft"]),
    "pcm24": ("PCM_24", ["--band", "300", "3000"]),
    "float": ("FLOAT", ["--highpass", "120", "--transition", "40"]),
    "spectral": (MONO, ["--method", "spectral"]),
    "spectral-nonstationary-shared": (STEREO, ["--method", "spectral", "--non-stationary", "--share-mask"]),
    "spectral-noise-from": (MONO, ["--method", "spectral", "--noise-from", "0", "0.5", "--strength", "0.8",
                                   "--n-fft", "1024", "--hop", "200"]),
}

BATCH = {
    "default": ["--edges", "odd"],
    "zero-edges-notch": ["--edges", "zero", "--notch", "10", "--gaps", "interpolate"],
    "lowpass-columns": ["--lowpass", "5", "--columns", "accel_x,temperature", "--taps", "101"],
    "spectral": ["--method", "spectral", "--strength", "0.5"],
}


def _digest(path: Path) -> str:
    if path.suffix == ".parquet":  # the file's bytes carry the writer's version: hash the table instead
        import pyarrow.parquet as pq

        t = pq.read_table(path)
        h = hashlib.sha256(repr(t.schema.names).encode())
        for col in t.columns:
            h.update(np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64).tobytes())
        return h.hexdigest()
    if path.suffix == ".wav" and sf.info(str(path)).subtype in ("FLOAT", "DOUBLE"):
        # libsndfile stamps float WAVs with the time of writing (PEAK chunk): hash the format and the samples
        info = sf.info(str(path))
        data, _ = sf.read(str(path), dtype="float64" if info.subtype == "DOUBLE" else "float32")
        return hashlib.sha256(f"{info.format} {info.subtype} {info.samplerate} {info.channels}".encode()
                              + data.tobytes()).hexdigest()
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _converted(subtype: str, tmp: Path) -> Path:
    """The mono sample re-written with another subtype (deterministic: libsndfile's conversion)."""
    data, fs = sf.read(str(MONO), dtype="float64")
    out = tmp / f"speech_{subtype.lower()}.wav"
    sf.write(str(out), data, fs, subtype=subtype)
    return out


def _environment() -> dict:
    import platform

    import pyarrow
    import scipy

    # NumPy picks its SIMD kernels by CPU at run time (float32 log10/exp and dot products round differently with
    # AVX-512 than with AVX2): the dispatch targets this CPU enables are part of the environment
    umath = np._core._multiarray_umath
    simd = [t for t in getattr(umath, "__cpu_dispatch__", []) if umath.__cpu_features__.get(t)]
    return {"python": ".".join(platform.python_version_tuple()[:2]), "numpy": np.__version__,
            "scipy": scipy.__version__, "pyarrow": pyarrow.__version__, "libsndfile": sf.__libsndfile_version__,
            "simd": " ".join(simd)}


def _check(key: str, digests: dict) -> None:
    refs = json.loads(REFERENCES.read_text()) if REFERENCES.exists() else {}
    env = _environment()
    if RECORD:
        refs[key] = digests
        refs["environment"] = env
        REFERENCES.write_text(json.dumps(refs, indent=1, sort_keys=True) + "\n")
        return
    if refs.get("environment") != env:
        diff = {k: (refs.get("environment", {}).get(k), v) for k, v in env.items()
                if refs.get("environment", {}).get(k) != v}
        pytest.skip(f"references recorded with other library versions (recorded, here): {diff}")
    assert key in refs, f"no reference recorded for {key}"
    assert digests == refs[key], f"{key}: outputs differ from the reference ({sorted(set(digests) ^ set(refs[key]))} " \
                                 f"or changed bytes)"


@pytest.mark.parametrize("case", sorted(DENOISE))
def test_denoise_output_matches_reference(case, tmp_path):
    from sigconv.cli import main

    src, opts = DENOISE[case]
    inp = _converted(src, tmp_path) if isinstance(src, str) else src
    out = tmp_path / f"out{inp.suffix}"
    assert main([str(x) for x in ["denoise", inp, "-o", out, "--backend", "cpu", "-q", *opts]]) == 0
    _check(f"denoise/{case}", {out.name: _digest(out)})


def _batch_inputs(tmp: Path) -> Path:
    """A folder holding the CSV log, the same log as Parquet and as NPY (with its rate), and both recordings."""
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    d = tmp / "in"
    (d / "logs").mkdir(parents=True)
    (d / "audio").mkdir()
    (d / "logs" / "log.csv").write_bytes(LOG.read_bytes())
    t = pcsv.read_csv(LOG)
    pq.write_table(t, d / "logs" / "log.parquet")
    arr = np.stack([t.column(n).to_numpy() for n in t.column_names[1:]], axis=1)
    np.save(d / "logs" / "log_npy.npy", arr)
    (d / "logs" / "log_npy.npy.json").write_text(json.dumps({"fs": 100.0}))
    for s in (MONO, STEREO):
        (d / "audio" / s.name).write_bytes(s.read_bytes())
    return d


@pytest.mark.parametrize("case", sorted(BATCH))
def test_batch_outputs_match_reference(case, tmp_path):
    from sigconv.cli import main

    src, out = _batch_inputs(tmp_path), tmp_path / "out"
    opts = BATCH[case]
    if case == "spectral":
        inputs = [src / "audio"]
    elif "--columns" in opts:
        inputs = [src / "logs" / "log.csv", src / "logs" / "log.parquet"]
    else:
        inputs = [src]
    rc = main([str(x) for x in ["batch", *inputs, "-r", "-o", out, "--backend", "cpu", "-j", "1", "-q", *opts]])
    assert rc == 0
    files = sorted(p for p in out.rglob("*") if p.is_file() and not p.name.startswith((".", "sigconv-batch")))
    assert files, "batch wrote no output"
    _check(f"batch/{case}", {p.relative_to(out).as_posix(): _digest(p) for p in files})
