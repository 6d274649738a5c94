"""sigconv: audio and time-series filtering on hand-written CUDA convolution kernels, with a CPU path.

The public names: the SciPy-compatible array API, filter design, streaming, the spectral gate, the typed
settings (:class:`KernelChoice`, :class:`FirSpec`, :class:`GateSpec`) and the file, log and batch pipelines
that the command line and the terminal UI are built on. ``import sigconv`` never needs a GPU, CuPy or torch;
the pipelines are imported on first use.
"""

from sigconv._version import __version__
from sigconv._api import apply_fir, convolve, convolve2d, correlate, correlate2d
from sigconv._conv2d import conv2d
from sigconv._core.blocks import format_block, parse_block
from sigconv._core.cache import cache_dir
from sigconv._core.devices import cuda_reason, resolve_backend
from sigconv._core.lazy import lazy_names
from sigconv._core.errors import InputError, OutputError, Terminated, raise_terminated
from sigconv.engine.design import design_fir, design_notch
from sigconv.engine.settings import FirDesign, FirSpec, GateSpec, KernelChoice, default_band, default_rule, signal_kind
from sigconv.engine.stream import FIRStream
from sigconv.registry.table import block_refusal, variants

#: Public names whose modules load on first use (the spectral gate, file I/O, logs, batch): name -> module.
_LAZY = {
    "spectral_denoise": "sigconv.engine.spectral",
    "gate_stage_times": "sigconv.engine.spectral",
    "atomic_output": "sigconv._core.atomic",
    "AudioInfo": "sigconv.engine.audio",
    "probe": "sigconv.engine.audio",
    "FilterResult": "sigconv.engine.file",
    "DenoiseJob": "sigconv.engine.denoise",
    "prepare_denoise": "sigconv.engine.denoise",
    "check_output_path": "sigconv.engine.denoise",
    "OutputHints": "sigconv.engine.denoise",
    "LogData": "sigconv.engine.batch.logs",
    "read_log": "sigconv.engine.batch.logs",
    "BatchSettings": "sigconv.engine.batch.settings",
    "BatchRequest": "sigconv.engine.batch.coordinator",
    "run_batch": "sigconv.engine.batch.coordinator",
    "fill_autotune_cache": "sigconv.registry.auto",
}

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
    "variants",
    "block_refusal",
    "KernelChoice",
    "FirSpec",
    "FirDesign",
    "GateSpec",
    "signal_kind",
    "default_band",
    "default_rule",
    "InputError",
    "OutputError",
    "Terminated",
    "raise_terminated",
    "cuda_reason",
    "resolve_backend",
    "format_block",
    "parse_block",
    "cache_dir",
    *_LAZY,
]


__getattr__, __dir__ = lazy_names(__name__, _LAZY, globals())
del lazy_names
