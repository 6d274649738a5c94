"""A/B, run from the repository root at 029dc7c: fft_fused with three twiddle reads per radix-8 butterfly (then)
against seven (13b4fcb's kernels/fft_fused.cuh), at blocks 128/256/512, and the fft variant; the copy ceiling."""
import subprocess, sys, numpy as np, cupy
sys.path.insert(0, '.')
from sigconv import _kernels
from sigconv.backends import overlap_save as os_
from sigconv.backends import cuda1d as _c1

def t_ms(f, reps=20):
    f(); cupy.cuda.Device().synchronize()
    s, e = cupy.cuda.Event(), cupy.cuda.Event()
    ts = []
    for _ in range(reps):
        s.record(); f(); e.record(); e.synchronize()
        ts.append(cupy.cuda.get_elapsed_time(s, e))
    return float(np.median(ts))

src = _kernels.source('conv1d.cu')
old = subprocess.run(['git', 'show', '13b4fcb:kernels/fft_fused.cuh'], capture_output=True, text=True, check=True).stdout
b0 = src.index('// ---- begin fft_fused.cuh'); b1 = src.index('// ---- end fft_fused.cuh')
old_inl = old.replace('#include "common.cuh"', '').replace('#include "limits.cuh"  // SIGCONV_FFT_FUSED_*_LOGN', '').replace('#include "overlap_save.cuh"', '')
src_old = src[:b0] + old_inl + src[b1:]
mods = {}
def fn_old(logn):
    if logn not in mods:
        m = cupy.RawModule(code=src_old, options=_kernels.NVRTC_OPTIONS, name_expressions=[f"conv1d_fft_fused<{logn}>"])
        mods[logn] = m.get_function(f"conv1d_fft_fused<{logn}>")
    return mods[logn]

L = 1 << 26
rng = np.random.default_rng(0)
for C in (1, 8):
    Lc = L // C if C > 1 else L   # same total samples
    x = cupy.random.standard_normal((C, Lc), dtype=cupy.float32)
    y = cupy.empty_like(x)
    cp = t_ms(lambda: cupy.copyto(y, x))
    gbs = 2 * x.nbytes / cp / 1e6
    print(f"C={C} Lc={Lc} copy {cp:.3f} ms ({gbs:.0f} GB/s)")
    for K in (255, 1023, 4095, 7921):
        w = cupy.asarray(rng.standard_normal(K).astype(np.float32))
        pad = (K - 1) // 2
        out = cupy.empty((C, Lc), cupy.float32)
        tf = t_ms(lambda: os_.launch_fft_fused(x, w, pad, Lc, 256, out=out, taps_key=('k', K)))
        ref = out.copy()
        tf512 = t_ms(lambda: os_.launch_fft_fused(x, w, pad, Lc, 512, out=out, taps_key=('k', K)))
        tf128 = t_ms(lambda: os_.launch_fft_fused(x, w, pad, Lc, 128, out=out, taps_key=('k', K)))
        plan = os_.fused_plan(K, Lc, C)
        H, ts = os_._filter_spectrum(w, plan['N'], ('k', K))
        f = fn_old(plan['logn'])
        if plan['smem'] > 48 * 1024:
            f.max_dynamic_shared_size_bytes = plan['smem']
        tw = os_._device_twiddles(plan['N'])
        args = (x, out, H, tw, np.int32(C), np.int64(Lc), np.int32(K), np.int64(pad), np.int64(Lc),
                np.int64(plan['ntiles']), ts, np.int32(os_.FFT_SAFE_EXPONENT['float32']))
        to = t_ms(lambda: f(plan['grid'], (256,), args, shared_mem=plan['smem']))
        d = float(cupy.abs(out - ref).max() / cupy.abs(ref).max())
        tfft = t_ms(lambda: os_.launch_fft(x, w, pad, Lc, 256, out=out, taps_key=('k', K)))
        print(f"  K={K:5d} N={plan['N']:5d} fused256 {tf:.3f} fused512 {tf512:.3f} fused128 {tf128:.3f} old256 {to:.3f} fft {tfft:.3f} ms; "
              f"fused = {cp / tf * 100:.0f}% of copy; old-new maxdiff {d:.1e}")
