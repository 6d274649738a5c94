"""ncu target: the fft_fused kernel at K=4095 (C=1, L=2^26), the working tree's source with FF_COLS and without."""
import sys, os
from pathlib import Path
sys.path.insert(0, str(Path(__file__).resolve().parents[3]))
import numpy as np
import cupy
from sigconv import _kernels
from sigconv.backends import overlap_save as os_
L = 1 << 26
K = 4095
x = cupy.random.default_rng(0).standard_normal((1, L), dtype=cupy.float32)
out = cupy.empty_like(x)
src = _kernels.source("conv1d.cu")
w = np.random.default_rng(1).standard_normal(K).astype(np.float32)
plan = os_.fused_plan(K, L, 1, None)
N = plan["N"]; b = N // 32
H, ts = os_.host_spectrum(w, N)
ts = cupy.asarray(ts)
tw = os_._device_twiddles(N)
for name, pre in [("base", ""), ("cols", "#define FF_COLS\n")]:
    if name == "cols":
        os.environ["SIGCONV_FFX_COLS"] = "1"
    tab = cupy.asarray(os_.fused_table(H, N))
    os.environ.pop("SIGCONV_FFX_COLS", None)
    f = cupy.RawModule(code=pre + src, options=_kernels.NVRTC_OPTIONS, name_expressions=(plan["expr"],)).get_function(plan["expr"])
    f.max_dynamic_shared_size_bytes = plan["smem"]
    f(plan["grid"], (b,), (x, out, tab, tw, tw, np.int32(1), np.int64(L), np.int32(K), np.int64((K - 1) // 2),
                           np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])),
      shared_mem=plan["smem"])
    cupy.cuda.Device().synchronize()
    print(name, "done", flush=True)
