"""The spectral gate on arrays: :func:`spectral_denoise` (numpy or cupy in, the same out)."""

from __future__ import annotations

import numpy as np

from sigconv._core.checks import LAST_AXIS, check_numeric, check_time_axis, float_dtype
from sigconv._core.xp import array_namespace, like, to_backend, to_host
from sigconv.engine.ops import backend_for
from sigconv.engine.settings import GateSpec, KernelChoice
from sigconv.engine.spectral.gate import ARRAY_CHUNK, Gate, array_getter

__all__ = ["spectral_denoise", "gate_stage_times"]


def spectral_denoise(x, fs, noise=None, stationary=True, n_std=1.5, prop_decrease=1.0, freq_smooth_hz=500,
                     time_smooth_ms=GateSpec.time_smooth_ms, n_fft=2048, hop=None, *, axis=LAST_AXIS, share_mask=False,
                     backend="auto", variant="auto", block=None):
    """Spectral-gating noise reduction: attenuate time-frequency cells that are not clearly above the noise floor.

    Parameters
    ----------
    x : array_like (numpy or cupy)
        Signal: 1-D, or N-D with time along ``axis`` (each other index is one channel).
    fs : float
        Sample rate in Hz.
    noise : array_like, optional
        A recording of the noise alone (same channels as ``x``, time along ``axis``, at least ``n_fft`` samples):
        the stationary threshold per frequency is its mean + ``n_std`` std of cell dB. Without it the noise
        level is estimated from ``x`` (a low quantile of each frequency's cell power). Stationary mode only.
    stationary : bool
        True: one threshold per frequency. False: follow a slowly varying noise floor (minimum of the
        50 ms-averaged power over +-1 s, bias-corrected).
    n_std : float
        Threshold in noise standard deviations (dB) above the noise mean; >= 0.
    prop_decrease : float
        How much of the gated energy is removed, in [0, 1] (0: output equals input).
    freq_smooth_hz, time_smooth_ms : float
        Total widths of the mask smoothing kernel across frequency (Hz) and time (ms); >= 0. Left at its default,
        the time width is shortened to what ``fs``/``hop`` allow (at most 256 frames each side) at extreme rates.
    n_fft : int
        STFT size, in [16, 65536].
    hop : int, optional
        STFT hop in [1, n_fft/2]; default n_fft/4.
    axis : int
        Time axis (default last). A 2-D input whose time axis is much shorter than the other is refused unless
        ``axis`` is given (it looks like (frames, channels) data).
    share_mask : bool
        One mask for all channels, from their mean power (keeps the stereo image).
    backend : {"auto", "cpu", "cuda"}
        Where the STFT and the mask smoothing run (cupy.fft and sigconv's CUDA conv2d kernels on cuda). "auto":
        cuda for cupy inputs, and for NumPy inputs of ``sigconv.registry.auto.HOST_CPU_BELOW["spectral"]``
        samples or more when a usable GPU is present (and ``variant`` and ``block`` are left at their defaults).
    variant, block
        The 2-D kernel variant (``sigconv.variants("conv2d")``) and launch block of the mask smoothing; on cuda
        "auto" means "separable" (the kernel is rank-1).

    Returns
    -------
    ndarray
        Same shape as ``x``; float32 when ``x`` is float32, else float64; same array type as ``x``.

    Raises
    ------
    ValueError
        Bad values (named with their range), a noise clip with other channels or shorter than ``n_fft``, a
        noise clip in non-stationary mode, a smoothing kernel too wide for this ``fs``/``n_fft``, a
        transposed-looking input, non-finite samples, an unknown ``variant`` or a bad ``block``.
    RuntimeError
        ``backend="cuda"`` where it cannot run.

    See Also
    --------
    noisereduce.reduce_noise : the method this follows (stationary and non-stationary modes).
    sigconv.apply_fir : band-limited FIR filtering.

    Notes
    -----
    Long inputs are processed in chunks with exact seams (the same code streams files: ``sigconv denoise
    --method spectral``), so memory stays bounded. With the gate fully open the output equals the input to
    float rounding.

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> fs = 16000
    >>> t = np.arange(2 * fs) / fs
    >>> clean = 0.5 * np.sin(2 * np.pi * 440 * t)
    >>> rng = np.random.default_rng(0)
    >>> noisy = clean + 0.05 * rng.standard_normal(t.size)
    >>> noise_clip = 0.05 * rng.standard_normal(fs)  # a second of the noise alone
    >>> y = sigconv.spectral_denoise(noisy, fs, noise=noise_clip, backend="cpu")
    >>> snr = lambda y: 10 * np.log10(np.sum(clean ** 2) / np.sum((y - clean) ** 2))
    >>> bool(snr(y) > snr(noisy) + 10)
    True
    >>> float(np.max(np.abs(sigconv.spectral_denoise(noisy, fs, prop_decrease=0, backend="cpu") - noisy))) < 1e-9
    True
    """
    gate, get, (ax, lead) = _prepared_gate(x, fs, noise, stationary, n_std, prop_decrease, freq_smooth_hz,
                                           time_smooth_ms, n_fft, hop, axis, share_mask, backend, variant, block)
    xp, C, L, dtype = gate.xp, gate.C, gate.L, gate.dtype
    y = xp.empty((C, L), dtype)
    for (a, b), part in gate.run(get, 0, L):
        y[:, a:b] = part
    y = like(y, x).reshape(lead + (L,))
    return array_namespace(y).moveaxis(y, -1, ax)


def gate_stage_times(x, fs, noise=None, stationary=True, n_std=1.5, prop_decrease=1.0, freq_smooth_hz=500,
                     time_smooth_ms=GateSpec.time_smooth_ms, n_fft=2048, hop=None, *, axis=LAST_AXIS,
                     share_mask=False, backend="auto", variant="auto", block=None, reps=10):
    """Where the time of :func:`spectral_denoise` goes: each stage of one chunk of its gate, timed alone.

    Parameters
    ----------
    x, fs, noise, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop, axis, share_mask, \
backend, variant, block
        As in :func:`spectral_denoise`; the statistics pass runs first, untimed.
    reps : int
        Timed runs of the chunk (after two untimed ones); each stage's median is returned.

    Returns
    -------
    dict
        Median milliseconds by stage, in order: ``"frames+rfft"`` (framing, window, forward FFT and the cells'
        power), ``"mask"`` (the raw gate mask), ``"smooth"`` (its 2-D smoothing), ``"gain"``, ``"irfft"``,
        ``"overlap-add"``, then ``"chunk"`` (the whole chunk, stages and what lies between them).

    Raises
    ------
    ValueError, RuntimeError
        As :func:`spectral_denoise`; ``reps`` not a positive integer.

    Notes
    -----
    The chunk is the first one :func:`spectral_denoise` computes (the whole signal when it is short), run by the
    same code with a timer around each stage: CUDA events on the current stream on cuda (nothing waits for the
    device between stages), ``time.perf_counter`` on the cpu.

    Examples
    --------
    >>> import numpy as np, sigconv
    >>> x = np.random.default_rng(0).standard_normal(16000).astype(np.float32)
    >>> t = sigconv.gate_stage_times(x, 16000, backend="cpu", reps=3)
    >>> list(t)
    ['frames+rfft', 'mask', 'smooth', 'gain', 'irfft', 'overlap-add', 'chunk']
    >>> all(ms > 0 for ms in t.values())
    True
    """
    gate, get, _ = _prepared_gate(x, fs, noise, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms,
                                  n_fft, hop, axis, share_mask, backend, variant, block)
    a, b = gate.ranges(0, gate.L)[0]
    return gate.stage_times(get, a, b, reps=reps)


def _prepared_gate(x, fs, noise, stationary, n_std, prop_decrease, freq_smooth_hz, time_smooth_ms, n_fft, hop, axis,
                   share_mask, backend, variant, block):
    """The checked input on the backend as a getter, and its gate with the statistics set:
    (gate, get(lo, hi), (time axis, leading shape))."""
    xp_in = array_namespace(x)
    x = xp_in.asarray(x)
    check_numeric(x, "x")
    if x.ndim == 0:
        raise ValueError("x must be at least 1-D, got a scalar")
    ax, L = check_time_axis(tuple(x.shape), axis, "x")
    dtype = float_dtype(x)
    xm = xp_in.moveaxis(x, ax, -1)
    lead = xm.shape[:-1]
    x2 = xm.reshape(-1, L)
    C = int(x2.shape[0])
    job = "spectral" if variant == "auto" and block is None else None  # a cuda variant or block keeps the GPU
    be = backend_for(backend, x, job=job) if noise is None else backend_for(backend, x, noise, job=job)
    kernel = KernelChoice(op="conv2d", backend=be, variant=variant, block=block)
    if not stationary and noise is not None:
        raise ValueError("noise applies to stationary mode only (non-stationary follows a moving noise floor); "
                         "pass stationary=True or leave noise out")
    gate = Gate(C, L, fs, stationary=stationary, n_std=n_std, prop_decrease=prop_decrease,
                freq_smooth_hz=freq_smooth_hz, time_smooth_ms=time_smooth_ms, n_fft=n_fft, hop=hop,
                share_mask=share_mask, kernel=kernel, dtype=dtype)
    xp = gate.xp
    xb = xp.ascontiguousarray(to_backend(x2, be).astype(dtype, copy=False))
    if not bool(xp.all(xp.isfinite(xb))):
        raise ValueError("x must be finite (it holds NaN or inf)")
    get = array_getter(xb, L, xp)
    if noise is not None:
        _noise_stats(gate, noise, ax, dtype)
    elif stationary:
        gate.estimate_stats(get)
    return gate, get, (ax, lead)


def _noise_stats(gate: Gate, noise, ax: int, dtype) -> None:
    """The stationary threshold from a noise recording (time along ``ax``, the channels of the input)."""
    nz = array_namespace(noise).asarray(noise)
    check_numeric(nz, "noise")
    nz_shape = tuple(nz.shape)  # noise may be a list: no .shape of its own
    nz = nz[None] if nz.ndim == 1 else array_namespace(nz).moveaxis(nz, ax, -1).reshape(-1, nz.shape[ax])
    if int(nz.shape[0]) != gate.C:
        raise ValueError(f"noise must have the channels of x ({gate.C}), got {int(nz.shape[0])} (shape {nz_shape})")
    nz = to_host(nz).astype(dtype, copy=False)
    if not np.all(np.isfinite(nz)):
        raise ValueError("noise must be finite (it holds NaN or inf)")
    step = gate.chunk_samples(ARRAY_CHUNK["cpu"])
    if not gate.stats_from_noise_chunks(nz[:, i:i + step] for i in range(0, nz.shape[1], step)):
        raise ValueError(f"noise must hold at least n_fft = {gate.N} samples, got {nz.shape[1]}")
