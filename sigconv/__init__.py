"""sigconv: audio and time-series filtering on hand-written CUDA convolution kernels, with a CPU path.

``import sigconv`` never needs a GPU, CuPy or torch; they are imported where used.
"""

from sigconv._version import __version__
from sigconv._api import apply_fir, convolve, convolve2d, correlate, correlate2d
from sigconv._conv2d import conv2d
from sigconv.engine.design import design_fir, design_notch
from sigconv.registry.table import variants
from sigconv.engine.spectral import spectral_denoise
from sigconv.engine.stream import FIRStream

__all__ = [
    "__version__",
    "convolve",
    "correlate",
    "convolve2d",
    "correlate2d",
    "conv2d",
    "apply_fir",
    "design_fir",
    "design_notch",
    "FIRStream",
    "spectral_denoise",
    "variants",
]
