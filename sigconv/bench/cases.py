"""Benchmark cases: one shape each, with its random inputs, its float64 reference and its default sets.

A case knows how to run a sigconv variant (``run_variant``) and a peer (``run_peer``) on its inputs, how many
bytes a call moves (``nbytes``: input read once, output written once) and how to shrink itself for a CPU row.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Optional

import numpy as np

from sigconv.registry.table import Conv1dJob, Conv2dJob

__all__ = ["Case1D", "Case2D", "CASES_2D", "CPU_MAX_ELEMS", "CPU_MAX_MACS", "default_cases_1d", "default_cases_2d",
           "parse_shape2d"]

#: Work limits for CPU rows: elements per input and multiply-adds per call.
CPU_MAX_ELEMS = 1 << 22
CPU_MAX_MACS = 1 << 31


def p2(n: int) -> str:
    """2^k for powers of two, else the number."""
    return f"2^{n.bit_length() - 1}" if n > 0 and n & (n - 1) == 0 else str(n)


def _randn(xp, rng, shape, dtype):
    """Standard normal samples of ``shape``: drawn on the device for CuPy (fast at 2^26), seeded from rng."""
    if xp is np:
        return rng.standard_normal(shape, dtype=np.float32).astype(dtype, copy=False)
    seed = int(rng.integers(0, 2**31 - 1))
    return xp.random.RandomState(seed).standard_normal(shape, dtype=np.float32).astype(dtype, copy=False)


def _pow2_floor(n: float) -> int:
    return 1 << max(0, int(math.floor(math.log2(max(n, 1)))))


@dataclass
class Case1D:
    """One conv1d shape: (C, L) signal, K taps, SciPy's "same" window (pad K//2, L outputs)."""

    C: int
    L: int
    K: int
    reduced_from: Optional[int] = None  # the L this CPU case stands in for

    op = "conv1d"

    @property
    def label(self) -> str:
        return f"C={self.C} L={p2(self.L)} K={self.K}"

    @property
    def group(self) -> str:
        return f"C={self.C} L={p2(self.reduced_from or self.L)}"

    @property
    def reduced_note(self) -> str:
        """What a shrunk CPU row says about its size."""
        return f"CPU row at L={p2(self.L)} (case has L={p2(self.reduced_from)})"

    def fields(self) -> dict:
        return {"C": self.C, "L": self.L, "K": self.K}

    def window(self) -> tuple[int, int]:
        return self.K // 2, self.L

    def nbytes(self, itemsize: int) -> int:
        """Input read once plus output written once."""
        return (self.C * self.L + self.C * self.window()[1]) * itemsize

    def in_bytes(self, itemsize: int) -> int:
        return self.C * self.L * itemsize

    def macs(self) -> int:
        return self.C * self.L * self.K

    def cpu_version(self) -> Optional["Case1D"]:
        """This case, or a shorter one that a CPU finishes in seconds (None: can't be shrunk)."""
        L = self.L
        if self.C * L <= CPU_MAX_ELEMS and self.macs() <= CPU_MAX_MACS:
            return self
        L = min(L, _pow2_floor(CPU_MAX_ELEMS / self.C), _pow2_floor(CPU_MAX_MACS / (self.C * self.K)))
        if L < 4 * self.K:
            return None
        return Case1D(self.C, L, self.K, reduced_from=self.L)

    def inputs(self, xp, dtype, rng, nbuf: int):
        w = xp.asarray(rng.standard_normal(self.K) / math.sqrt(self.K), dtype=dtype)
        return [(xp.ascontiguousarray(_randn(xp, rng, (self.C, self.L), dtype)), w) for _ in range(nbuf)]

    def run_variant(self, backend, variant, block, inp):
        from sigconv.engine.ops import corr1d

        x, w = inp
        pad, n = self.window()
        return corr1d(x, w, pad, n, backend=backend, variant=variant, block=block)

    def run_peer(self, fn, inp):
        x, w = inp
        pad, n = self.window()
        return fn(x, w, pad, n)

    def resolve_auto(self, inp):
        """(variant, block) that the cuda backend's ``auto`` runs on ``inp``."""
        from sigconv.backends import cuda1d

        pad, n = self.window()
        return cuda1d.resolve_auto(inp[0], inp[1], pad, n)

    def reference(self, xp, inp):
        """float64 correlation by FFT (scipy or cupyx oaconvolve), windowed to (pad, out_len)."""
        x, w = inp
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        pad, n = self.window()
        if xp is np:
            import scipy.signal as sig
        else:
            import cupyx.scipy.signal as sig
        full = sig.oaconvolve(x64, w64[::-1][None, :], mode="full", axes=-1)
        s = self.K - 1 - pad  # y[n] = full[n + K-1-pad]
        out = xp.zeros((self.C, n), dtype=np.float64)
        lo, hi = max(0, -s), min(n, full.shape[1] - s)
        out[:, lo:hi] = full[:, lo + s:hi + s]
        return out

    def job(self, dtype: str) -> Conv1dJob:
        """The shape the registry's entries are asked about (:meth:`Variant.applies`)."""
        return Conv1dJob(self.C, self.L, self.K, dtype)


def _gauss(k: int) -> np.ndarray:
    """A sampled Gaussian of k points, sigma k/4, summing to 1."""
    t = np.arange(k) - (k - 1) / 2
    v = np.exp(-0.5 * (t / max(k / 4, 0.5)) ** 2)
    return v / v.sum()


@dataclass
class Case2D:
    """One conv2d shape (NCHW, torch.nn.functional.conv2d's correlation)."""

    name: str  # spec, gauss, B, A, custom
    N: int
    Cin: int
    H: int
    W: int
    Cout: int
    kH: int
    kW: int
    stride: tuple = (1, 1)
    pad: tuple = (0, 0)
    kernel: str = "random"  # random | gauss (rank-1)
    reduced_from: Optional[tuple] = None  # (N, W) this CPU case stands in for

    op = "conv2d"

    @property
    def label(self) -> str:
        s = f"{self.name} {self.N}x{self.Cin}x{self.H}x{self.W} {self.kH}x{self.kW}->{self.Cout}"
        if self.kernel != "random":
            s += f" {self.kernel}"
        if self.stride != (1, 1):
            s += f" s{self.stride[0]},{self.stride[1]}"
        return s + f" p{self.pad[0]},{self.pad[1]}"

    @property
    def group(self) -> str:
        return self.name

    @property
    def reduced_note(self) -> str:
        """What a shrunk CPU row says about its size."""
        N, W = self.reduced_from
        return f"CPU row at N={self.N} W={self.W} (case has N={N} W={W})"

    def out_hw(self) -> tuple[int, int]:
        return ((self.H + 2 * self.pad[0] - self.kH) // self.stride[0] + 1,
                (self.W + 2 * self.pad[1] - self.kW) // self.stride[1] + 1)

    def fields(self) -> dict:
        return {"C": self.Cin, "L": self.H * self.W, "K": self.kH * self.kW, "N": self.N, "Cin": self.Cin,
                "H": self.H, "W": self.W, "Cout": self.Cout, "kH": self.kH, "kW": self.kW,
                "stride": list(self.stride), "pad": list(self.pad), "kernel": self.kernel}

    def nbytes(self, itemsize: int) -> int:
        Ho, Wo = self.out_hw()
        return (self.N * self.Cin * self.H * self.W + self.N * self.Cout * Ho * Wo) * itemsize

    def in_bytes(self, itemsize: int) -> int:
        return self.N * self.Cin * self.H * self.W * itemsize

    def macs(self) -> int:
        Ho, Wo = self.out_hw()
        return self.N * self.Cout * self.Cin * Ho * Wo * self.kH * self.kW

    def _small(self) -> bool:
        return self.in_bytes(1) <= CPU_MAX_ELEMS and self.macs() <= CPU_MAX_MACS

    def cpu_version(self) -> Optional["Case2D"]:
        """Shrink N to 1, then W by halves (>= 16 and >= 2 kW), until a CPU does it in seconds."""
        if self._small():
            return self
        c = dataclasses.replace(self, N=1, reduced_from=(self.N, self.W))
        while not c._small():
            W = c.W // 2
            if W < max(16, 2 * c.kW):
                return None
            c = dataclasses.replace(c, W=W)
        return c

    def inputs(self, xp, dtype, rng, nbuf: int):
        if self.kernel == "gauss":  # rank-1: outer product of two sampled Gaussians
            w = np.tile(np.outer(_gauss(self.kH), _gauss(self.kW)), (self.Cout, self.Cin, 1, 1))
        else:
            w = rng.standard_normal((self.Cout, self.Cin, self.kH, self.kW)) / math.sqrt(self.Cin * self.kH * self.kW)
        w = xp.asarray(w, dtype=dtype)
        shape = (self.N, self.Cin, self.H, self.W)
        return [(xp.ascontiguousarray(_randn(xp, rng, shape, dtype)), w) for _ in range(nbuf)]

    def _geometry(self) -> tuple:
        """(bias, stride, pad, out_hw): the contract's arguments after the data."""
        return None, tuple(self.stride), tuple(self.pad), self.out_hw()

    def run_variant(self, backend, variant, block, inp):
        from sigconv.engine.ops import corr2d

        x, w = inp
        return corr2d(x, w, *self._geometry(), backend=backend, variant=variant, block=block)

    def run_peer(self, fn, inp):
        x, w = inp
        return fn(x, w, *self._geometry())

    def resolve_auto(self, inp):
        """(variant, block) that the cuda backend's ``auto`` runs on ``inp``."""
        from sigconv.backends import cuda2d

        return cuda2d.resolve_auto(inp[0], inp[1], *self._geometry())

    def reference(self, xp, inp):
        """float64 shift-and-add over taps (one GEMM over input channels per tap)."""
        from sigconv.backends.peers import canvas_2d

        x, w = inp
        x64, w64 = x.astype(np.float64), w.astype(np.float64)
        (sy, sx), (Ho, Wo) = self.stride, self.out_hw()
        cv = canvas_2d(xp, x64, self.pad, (Ho - 1) * sy + self.kH, (Wo - 1) * sx + self.kW)
        y = xp.zeros((self.N, self.Cout, Ho, Wo), dtype=np.float64)
        for i in range(self.kH):
            for j in range(self.kW):
                patch = cv[:, :, i:i + (Ho - 1) * sy + 1:sy, j:j + (Wo - 1) * sx + 1:sx]
                if self.Cin == 1 and self.Cout == 1:
                    y += float(w64[0, 0, i, j]) * patch
                else:  # (Cout, Cin) x (N, Cin, Ho, Wo) -> (Cout, N, Ho, Wo)
                    y += xp.tensordot(w64[:, :, i, j], patch, axes=([1], [1])).transpose(1, 0, 2, 3)
        return y

    def job(self, dtype: str) -> Conv2dJob:
        """The shape the registry's entries are asked about (:meth:`Variant.applies`); whether the weights are
        rank-1 is left to the launcher, which checks the weights themselves."""
        return Conv2dJob((self.N, self.Cin, self.H, self.W), (self.Cout, self.Cin, self.kH, self.kW), dtype,
                         tuple(self.stride), tuple(self.pad), self.out_hw())


#: Tap counts of the default conv1d set.
TAPS_1D = (7, 25, 63, 255, 1023, 4095)


def default_cases_1d(quick: bool, Cs=None, Ls=None, Ks=None) -> list:
    """The default conv1d set, or the product of the channel counts, lengths and tap counts given."""
    if quick:
        return [Case1D(C, L, K) for C in (Cs or [1, 2]) for L in (Ls or [1 << 16]) for K in (Ks or [7, 63])]
    if Cs or Ls or Ks:
        return [Case1D(C, L, K) for C in (Cs or [1]) for L in (Ls or [1 << 26]) for K in (Ks or TAPS_1D)]
    return ([Case1D(1, 1 << 26, K) for K in TAPS_1D] + [Case1D(8, 1 << 23, K) for K in TAPS_1D]
            + [Case1D(1, 1 << 22, 25)])


#: Names of the default conv2d cases: spectrogram smoothing (random and Gaussian kernels), two CNN layers.
CASES_2D = ("spec", "gauss", "B", "A")


def default_cases_2d(quick: bool, Ks=None, names=None) -> list:
    """The default conv2d cases named in ``names`` (all of CASES_2D by default); ``Ks``: spectrogram kernel sides."""
    names = names or CASES_2D
    if quick:
        H, W, ks, B, A = 65, 1024, Ks or [3, 5], (1, 3, 96, 64, 4, 6, 0), (2, 8, 32, 32, 8, 3, 1)
    else:
        H, W, ks, B, A = 1025, 65536, Ks or [3, 5, 9, 15], (1, 6, 768, 512, 6, 6, 0), (16, 256, 128, 128, 256, 3, 1)
    out = []
    for kernel in ("random", "gauss"):
        name = "spec" if kernel == "random" else kernel
        if name in names:
            out += [Case2D(name, 1, 1, H, W, 1, k, k, pad=(k // 2, k // 2), kernel=kernel) for k in ks]
    for name, (N, Ci, Hc, Wc, Co, k, p) in (("B", B), ("A", A)):
        if name in names:
            out.append(Case2D(name, N, Ci, Hc, Wc, Co, k, k, pad=(p, p)))
    return out


def parse_shape2d(text: str) -> Case2D:
    """``N,Cin,H,W,Cout,kH,kW[,stride[,pad]]`` -> Case2D("custom", ...)."""
    try:
        v = [int(t) for t in text.split(",")]
    except ValueError:
        v = []
    if len(v) not in (7, 8, 9) or min(v) < 0 or min(v[:7]) < 1:
        raise ValueError(f"--shape must be N,Cin,H,W,Cout,kH,kW[,stride[,pad]] with positive integers, got {text!r}")
    s = v[7] if len(v) > 7 else 1
    p = v[8] if len(v) > 8 else 0
    if s < 1:
        raise ValueError(f"--shape stride must be >= 1, got {s}")
    c = Case2D("custom", *v[:7], stride=(s, s), pad=(p, p))
    if min(c.out_hw()) < 1:
        raise ValueError(f"--shape {text!r} gives an empty output {c.out_hw()}")
    return c
