"""sigconv: audio and time-series filtering on hand-written CUDA convolution kernels, with a CPU path.

``import sigconv`` never needs a GPU, CuPy or torch; they are imported where used.
"""

from ._version import __version__
from ._api import apply_fir, convolve, convolve2d, correlate, correlate2d
from ._conv2d import conv2d
from ._design import design_fir, design_notch
from ._registry import variants
from ._spectral import spectral_denoise
from ._stream import FIRStream

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
