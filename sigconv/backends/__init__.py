"""Backends: ``cpu`` (NumPy/SciPy) and ``cuda`` (sigconv's own kernels through CuPy).

The contract every 1-D implementation meets (the engine and the public API only call this)::

    corr1d(x, w, pad, out_len, *, variant, block) -> y
        x : (C, L) C-contiguous float32/float64 array (numpy for cpu, cupy for cuda)
        w : (K,) taps of the same dtype (a correlation: convolution callers pass h[::-1])
        y[c, n] = sum_{j<K} w[j] * x[c, n + j - pad]   for 0 <= n < out_len, x = 0 outside [0, L)

and every 2-D one::

    corr2d(x, w, bias, stride, pad, out_hw, *, variant, block) -> y
        x : (N, Cin, H, W), w : (Cout, Cin, kH, kW), bias : (Cout,) or None
        y[n, co, r, c] = bias[co] + sum_{ci,i,j} w[co, ci, i, j] * x[n, ci, r*sy + i - py, c*sx + j - px]
        for 0 <= r < out_hw[0], 0 <= c < out_hw[1], x = 0 outside the image.

Every mode of convolve/correlate (full, same, valid, causal) is a choice of ``pad`` and
``out_len`` (see ``sigconv.engine.ops.window_1d``).

Importing this package registers every variant and peer in :mod:`sigconv.registry` (each module does at
its bottom); the engine imports it, the registry never does. None of them imports CuPy, torch or SciPy
at module level.
"""

from sigconv.backends import cpu, cuda1d, overlap_save, cuda2d, peers  # noqa: F401  (they register on import)


def prebuilt_modules() -> list[dict]:
    """Every module that ships pre-built for the common GPUs (``kernels/prebuilt``, written by
    ``tools/prebuild_kernels.py``), as :func:`sigconv._kernels.module`'s keyword arguments: what ``sigconv denoise``
    loads on its default paths (the FIR's direct, overlap-save and fused kernels, the spectral gate's kernels and
    its mask smoothing, the sample conversions). Others compile on first use."""
    from sigconv.backends import cuda_gate, cuda_pcm

    return [*cuda1d.prebuilt_modules(), *overlap_save.prebuilt_modules(), *cuda2d.prebuilt_modules(),
            *cuda_pcm.prebuilt_modules(), *cuda_gate.prebuilt_modules()]
