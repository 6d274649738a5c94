import sys, numpy as np, cupy, scipy.signal
import sigconv
from sigconv.backends import overlap_save as os_
print("sigconv from", sigconv.__file__)
rng = np.random.default_rng(0)
C, L = 2, 3 * 32768 + 5
x = rng.standard_normal((C, L)).astype(np.float32)
for K in (1023, 7921):
    h = np.ldexp(rng.standard_normal(K) / np.sqrt(K), -130).astype(np.float32)
    ref = np.stack([scipy.signal.oaconvolve(r, h.astype(np.float64), "same") for r in x.astype(np.float64)])
    for variant in ("fft", "fft_fused"):
        for taps in ("host", "device"):
            hh = h if taps == "host" else cupy.asarray(h)
            try:
                y = cupy.asnumpy(sigconv.convolve(cupy.asarray(x), hh, "same", axis=-1, backend="cuda", variant=variant))
                nz = np.count_nonzero(y) / y.size
                err = np.linalg.norm(np.ldexp(y.astype(np.float64), 130) - np.ldexp(ref, 130)) / np.linalg.norm(np.ldexp(ref, 130))
                print(f"K={K} {variant:9s} {taps:6s} nonzero {nz:.4f} err {err:.2e}")
            except Exception as e:
                print(f"K={K} {variant} {taps} ERROR {e!r}")
hd = cupy.asarray(np.ldexp(np.ones(8), -130).astype(np.float32))
print("cupy astype(float64) of 2^-130 floats: nonzero", int(cupy.count_nonzero(hd.astype(cupy.float64))))
try:
    from sigconv._core.xp import peak_exponents
    print("device peak_exponents of 2^-130:", peak_exponents(hd[None]), "host:", peak_exponents(cupy.asnumpy(hd)[None]))
except Exception as e:
    print("peak_exponents", e)
try:
    H, ts = os_.host_spectrum(np.ldexp(rng.standard_normal(1023), -130).astype(np.float32), 2048)
    print("host_spectrum tap_shift", ts, "max|H|", np.abs(H).max())
except Exception as e:
    print("host_spectrum", e)
