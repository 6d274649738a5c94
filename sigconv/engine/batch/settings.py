"""The settings of a batch: :class:`BatchSettings`, one frozen value that travels to every worker.

It holds the filter (``fir`` or the spectral ``gate``), the kernel that runs it and the options for sensor
logs (rate, time column, channels, gaps, edges). It is validated once, where it is made (``ValueError`` with
one line), and pickles as it is, for the local process pool and for Dask.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field, replace
from typing import Optional

from sigconv.engine.design import RATE_RANGE, rate_problem
from sigconv.engine.settings import FirSpec, GateSpec, KernelChoice, _positive

__all__ = ["BatchSettings", "METHODS", "GAP_RULES", "EDGE_RULES", "RATE_RANGE", "rate_problem"]

#: Filtering methods: a FIR filter (every format) or the spectral gate (audio files only).
METHODS = ("fir", "spectral")
#: Missing values in logs: "split" filters each run between gaps on its own, "interpolate" fills them first.
GAP_RULES = ("split", "interpolate")
#: Edges of each filtered run of a table or NPY log: odd reflection (the default) or zero padding.
EDGE_RULES = ("odd", "zero")
#: The kernel's operation for each method.
_OPS = {"fir": "conv1d", "spectral": "conv2d"}


def _choice(value, name: str, choices) -> str:
    if value not in choices:
        raise ValueError(f"{name} must be one of {', '.join(choices)}, got {value!r}")
    return value


@dataclass(frozen=True)
class BatchSettings:
    """How every file of a batch is filtered.

    Parameters
    ----------
    method : {"fir", "spectral"}
        ``fir`` applies ``fir`` to every format; ``spectral`` applies ``gate`` to audio files (logs fail).
    fir : FirSpec
        The FIR filter; with no filter option, each file gets the default for its rate (see ``FirSpec.design``).
    gate : GateSpec
        The spectral gate (method "spectral"). A ``noise_clip`` is made absolute, so that workers find it.
    kernel : KernelChoice
        Backend, variant and block; its ``op`` follows the method (conv1d for fir, conv2d for the gate).
    fs : float, optional
        Sample rate of logs (default: from the time column; NPY: from ``NAME.npy.json``).
    time_column : str, optional
        The time column of tables (default: detected by name or type).
    columns : sequence of str, optional
        The channels of tables (default: every numeric column but time); other columns pass through.
    gaps : {"split", "interpolate"}
        Missing values in logs: filter each run between gaps on its own (gaps stay), or fill them linearly.
    edges : {"odd", "zero"}
        How each filtered run of a table or NPY log is extended at its ends; audio always uses zero padding.
    allow_truncated : bool
        Filter what a truncated audio file holds (its header promises more frames than it has) instead of failing it.
    """

    method: str = "fir"
    fir: FirSpec = field(default_factory=FirSpec)
    gate: GateSpec = field(default_factory=GateSpec)
    kernel: KernelChoice = field(default_factory=KernelChoice)
    fs: Optional[float] = None
    time_column: Optional[str] = None
    columns: Optional[tuple] = None
    gaps: str = "split"
    edges: str = "odd"
    allow_truncated: bool = False

    def __post_init__(self):
        _choice(self.method, "method", METHODS)
        _choice(self.gaps, "gaps", GAP_RULES)
        _choice(self.edges, "edges", EDGE_RULES)
        for name, typ in (("fir", FirSpec), ("gate", GateSpec), ("kernel", KernelChoice)):
            if not isinstance(getattr(self, name), typ):
                raise ValueError(f"{name} must be a {typ.__name__}, got {type(getattr(self, name)).__name__}")
        op = _OPS[self.method]
        if self.kernel.op != op:
            object.__setattr__(self, "kernel", replace(self.kernel, op=op))
        if self.gate.noise_clip is not None:
            object.__setattr__(self, "gate", replace(self.gate, noise_clip=os.path.abspath(self.gate.noise_clip)))
        if self.fs is not None:
            object.__setattr__(self, "fs", _positive(self.fs, "fs"))
            problem = rate_problem(self.fs)
            if problem:
                raise ValueError(f"fs {problem}")
        if self.time_column is not None and not isinstance(self.time_column, str):
            raise ValueError(f"time_column must be a column name, got {self.time_column!r}")
        if self.columns is not None:
            cols = (self.columns,) if isinstance(self.columns, str) else tuple(self.columns)
            if not cols or not all(isinstance(c, str) and c for c in cols):
                raise ValueError(f"columns must be column names, got {self.columns!r}")
            object.__setattr__(self, "columns", cols)
        if not isinstance(self.allow_truncated, bool):
            raise ValueError(f"allow_truncated must be True or False, got {self.allow_truncated!r}")

    def manifest_dict(self) -> dict:
        """The options as the manifest hashes them (``manifest.settings_hash``): a plain dict whose keys and values
        are those the batch has always recorded, so that a manifest written before still skips its done files.
        The gate's options count for the spectral method only (they do not change a FIR output).
        ``allow_truncated`` counts only when set (a truncated file is then filtered instead of failed, so what is
        done depends on it); left out when off, the hash is the one from before the option existed."""
        f, g, k = self.fir, self.gate, self.kernel
        d = {"method": self.method, "band": list(f.band) if f.band else None, "lowpass": f.lowpass,
             "highpass": f.highpass, "notch": list(f.notch) if f.notch else None, "notch_width": f.notch_width,
             "taps": f.taps, "transition": f.transition, "phase": f.phase, "fs": self.fs,
             "time_column": self.time_column, "columns": list(self.columns) if self.columns else None,
             "gaps": self.gaps, "edges": self.edges, "backend": k.backend, "variant": k.variant, "block": k.block}
        spectral = self.method == "spectral"
        gate = {"noise_clip": g.noise_clip, "noise_from": list(g.noise_from) if g.noise_from else None,
                "strength": float(g.strength), "stationary": g.stationary, "n_std": float(g.n_std),
                "freq_smooth": float(g.freq_smooth_hz), "time_smooth": float(g.time_smooth_ms), "n_fft": g.n_fft,
                "hop": g.hop, "share_mask": g.share_mask}
        d.update({key: value if spectral else None for key, value in gate.items()})
        if self.allow_truncated:
            d["allow_truncated"] = True
        return d
