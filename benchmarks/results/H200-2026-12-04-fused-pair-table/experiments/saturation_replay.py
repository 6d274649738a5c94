"""Replays test_cuda_file_equals_cpu_file[False-PCM_24] with the failing seed and prints the saturation masks."""
import sys, zlib, tempfile
from pathlib import Path
import numpy as np, soundfile as sf
sys.path.insert(0, "tests"); sys.path.insert(0, ".")
import conftest  # noqa
from test_spectral import harmonic, FS
from conftest import write_audio
from sigconv.engine.audio import probe
from sigconv.engine.file import filter_file
from sigconv.engine.settings import GateSpec, KernelChoice
from sigconv.engine.spectral import spectral_file_filter

for stationary, subtype, seed in ((False, "PCM_24", 2298067042), (True, "PCM_24", 2298067042), (False, "PCM_24", 1), (False, "PCM_24", 2), (False, "PCM_16", 2298067042)):
    nodeid = f"tests/test_spectral.py::test_cuda_file_equals_cpu_file[{stationary}-{subtype}]"
    rng = np.random.default_rng((seed, zlib.crc32(nodeid.encode())))
    tmp = Path(tempfile.mkdtemp())
    n = 5 * FS + 77
    s = harmonic(n, rng=rng)
    x = np.stack([3.5 * s + 0.05 * rng.standard_normal(n), s + 0.05 * rng.standard_normal(n)]).T
    path = write_audio(tmp / "in.wav", np.clip(x, -1, 1), fs=FS, subtype=subtype)
    info = probe(path)
    outs = {}
    for be in ("cpu", "cuda"):
        outs[be] = tmp / f"{be}.wav"
        make, _ = spectral_file_filter(GateSpec(stationary=stationary), KernelChoice(op="conv2d", backend=be), info)
        filter_file(info, outs[be], make)
    a = sf.read(str(outs["cpu"]), dtype="int32")[0].astype(np.int64)
    b = sf.read(str(outs["cuda"]), dtype="int32")[0].astype(np.int64)
    step = 1 << (16 if subtype == "PCM_16" else 8)
    most = 1 if subtype == "PCM_16" else 84
    T = (1 << 31) - most * step
    d = np.abs(a - b)
    ma, mb = np.abs(a) >= T, np.abs(b) >= T
    edge = (1 << 31) - step
    print(stationary, subtype, seed, "max diff steps", d.max() / step, "band mism", int((ma != mb).sum()),
          "at band:", [(int(a[i]), int(b[i])) for i in zip(*np.nonzero(ma != mb))][:5],
          "int32 min a/b", int((a == -(1 << 31)).sum()), int((b == -(1 << 31)).sum()),
          "sat a/b", int((np.abs(a) >= edge).sum()), int((np.abs(b) >= edge).sum()), flush=True)
