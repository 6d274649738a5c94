# The autotuner's timing (sigconv.registry.tune._time) of the 32768 tile on 512 and 1024 threads, both orders, host and
# device taps; then `sigconv bench conv1d --variants auto` twice, each with a fresh autotune cache (its choice printed).
import json, os, subprocess, sys
import cupy, numpy as np
from sigconv.registry import tune
from sigconv.backends import overlap_save as os_
x = cupy.random.standard_normal((1, 1 << 26), dtype=cupy.float32)
w = np.random.default_rng(1).standard_normal(7921).astype(np.float32)
wd = cupy.asarray(w)
for taps, name in ((w, "host taps"), (wd, "device taps")):
    run = lambda v, b: os_.launch_fft_fused(x, taps, 3960, 1 << 26, b)
    for order in ((512, 1024), (1024, 512), (512, 1024, 512, 1024)):
        print(name, [(b, round(tune._time(run, "fft_fused", b), 4)) for b in order], flush=True)
for i in range(2):
    d = f"/tmp/tc{i}"
    env = {**os.environ, "SIGCONV_CACHE_DIR": d}
    subprocess.run([sys.executable, "-m", "sigconv", "bench", "conv1d", "--C", "1", "--L", "2^26", "--K", "7921",
                    "--variants", "auto", "--peers", "none", "--out", f"/tmp/b{i}"], env=env, capture_output=True)
    data = json.load(open(f"{d}/autotune.json"))
    print("bench's tuner:", [e for s in data["sections"].values() for e in s.values()], flush=True)
