import json, os, sys, tempfile
import cupy as cp
from sigconv.backends import cuda1d
from sigconv.registry import tune
K = int(sys.argv[1])
C, L = 1, 1 << 26
rng = cp.random.default_rng(int(sys.argv[2]))
x = rng.standard_normal((C, L), dtype=cp.float32)
w = (rng.standard_normal(K, dtype=cp.float32) / K ** 0.5).astype(cp.float32)
got = cuda1d.resolve_auto(x, w, K // 2, L)
data = json.loads(tune.cache_path().read_text())
timed = [e["timed"] for s in data["sections"].values() for e in s.values()]
print(K, "pick", got, timed)
