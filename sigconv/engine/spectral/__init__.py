"""Spectral-gating denoiser: STFT, a noise profile per frequency, a gate mask smoothed by sigconv's own 2-D
kernels, inverse STFT; streamed exactly over long files.

* :mod:`.gate`: the maths (frame geometry, STFT, masks and their smoothing, one chunk at a time);
* :mod:`.noise`: the noise statistics (histogram quantile, Rayleigh model, running minimum);
* :mod:`.arrays`: :func:`spectral_denoise`, the public array function, and :func:`gate_stage_times`, its stages'
  times;
* :mod:`.factory`: :func:`spectral_file_filter`, the gate for the file pipeline from a ``GateSpec``;
* :mod:`.files`: :class:`~.files.SpectralFileFilter`, the file engine's block filter (loads soundfile).
"""

from sigconv.engine.spectral.arrays import gate_stage_times, spectral_denoise
from sigconv.engine.spectral.factory import spectral_file_filter

__all__ = ["spectral_denoise", "gate_stage_times", "spectral_file_filter"]
