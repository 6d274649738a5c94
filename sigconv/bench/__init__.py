"""``sigconv bench conv1d|conv2d``: sigconv's kernel variants timed beside their peers, in one process.

Method (issue 3):

- every registered variant and peer (``sigconv.registry.table``) runs on the same inputs in one process;
- each one is first checked against a float64 reference; a sigconv variant that disagrees is reported
  as FAIL and not timed, a peer that disagrees is timed but flagged;
- timing by CUDA events after a warm-up (wall clock for CPU rows), median and 20th/80th percentiles
  of many runs, the number of runs set by a time budget;
- inputs rotated among several buffers whose total exceeds twice the L2 cache, so L2 does not flatter;
- the device copy bandwidth (device-to-device copy of 1 GiB, bytes read + written over time) is
  measured in the same run and every row reports its share of it;
- effective GB/s counts the input read once and the output written once;
- sigconv variants are timed at every accepted block size (or the ``--blocks`` given) and the best
  block is reported; ``auto`` is timed as its own row.

Results: a JSON file ``{"meta", "verdicts", "records"}`` whose records carry
``op, C, L, K, impl, block, ms_median, gbs, pct_copy, device, date`` (conv2d adds
``N, Cin, H, W, Cout, kH, kW, stride, pad``; for conv2d ``C = Cin``, ``L = H*W`` and ``K = kH*kW``)
and a markdown table, both named with the device and date; the table and the verdicts are printed.
CPU rows (sigconv's cpu variants, the SciPy peer) run at a reduced size when the case is larger than
a CPU can do in a few seconds, and say so.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import platform
import re
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import numpy as np

from sigconv._core import devices as _devices

from sigconv.registry import table as _registry

__all__ = ["add_bench_arguments", "run_bench", "Case1D", "Case2D"]

#: Relative error (||y - ref|| / ||ref||) allowed per dtype; peers may carry their own (TF32).
TOL = {"float32": 1e-5, "float64": 1e-10}
#: Rotation buffers hold at least this many times the L2 size in inputs.
L2_FACTOR = 2
#: Work limits for CPU rows: elements per input and multiply-adds per call.
CPU_MAX_ELEMS = 1 << 22
CPU_MAX_MACS = 1 << 31


def _p2(n: int) -> str:
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


# ===================================================================================== cases


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
        return f"C={self.C} L={_p2(self.L)} K={self.K}"

    @property
    def group(self) -> str:
        return f"C={self.C} L={_p2(self.reduced_from or self.L)}"

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

    def taps_ok(self, v: _registry.Variant) -> Optional[str]:
        if v.max_taps is not None and self.K > v.max_taps:
            return f"K={self.K} > max_taps {v.max_taps}"
        return None


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

    def cpu_version(self) -> Optional["Case2D"]:
        """Shrink N to 1, then W by halves (>= 16 and >= 2 kW), until a CPU does it in seconds."""
        c = self
        import dataclasses

        def small(k):
            return k.N * k.Cin * k.H * k.W <= CPU_MAX_ELEMS and k.macs() <= CPU_MAX_MACS

        if small(c):
            return c
        c = dataclasses.replace(c, N=1, reduced_from=(self.N, self.W))
        while not small(c):
            W = c.W // 2
            if W < max(16, 2 * c.kW):
                return None
            c = dataclasses.replace(c, W=W)
        return c

    def inputs(self, xp, dtype, rng, nbuf: int):
        if self.kernel == "gauss":  # rank-1: outer product of two sampled Gaussians
            def g(k):
                t = np.arange(k) - (k - 1) / 2
                v = np.exp(-0.5 * (t / max(k / 4, 0.5)) ** 2)
                return v / v.sum()

            w = np.tile(np.outer(g(self.kH), g(self.kW)), (self.Cout, self.Cin, 1, 1))
        else:
            w = rng.standard_normal((self.Cout, self.Cin, self.kH, self.kW)) / math.sqrt(self.Cin * self.kH * self.kW)
        w = xp.asarray(w, dtype=dtype)
        shape = (self.N, self.Cin, self.H, self.W)
        return [(xp.ascontiguousarray(_randn(xp, rng, shape, dtype)), w) for _ in range(nbuf)]

    def run_variant(self, backend, variant, block, inp):
        from sigconv.engine.ops import corr2d

        x, w = inp
        return corr2d(x, w, None, tuple(self.stride), tuple(self.pad), self.out_hw(), backend=backend,
                      variant=variant, block=block)

    def run_peer(self, fn, inp):
        x, w = inp
        return fn(x, w, None, tuple(self.stride), tuple(self.pad), self.out_hw())

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

    def taps_ok(self, v: _registry.Variant) -> Optional[str]:
        if v.max_taps is not None and max(self.kH, self.kW) > v.max_taps:
            return f"kernel {self.kH}x{self.kW} > max side {v.max_taps}"
        if v.extra.get("single_channel") and not (self.N == self.Cin == self.Cout == 1):
            return "single-channel only"
        if v.extra.get("single_channel") and tuple(self.stride) != (1, 1):
            return "stride 1 only"
        return None


def default_cases_1d(quick: bool, Cs=None, Ls=None, Ks=None) -> list:
    if quick:
        return [Case1D(C, L, K) for C in (Cs or [1, 2]) for L in (Ls or [1 << 16]) for K in (Ks or [7, 63])]
    if Cs or Ls or Ks:
        return [Case1D(C, L, K) for C in (Cs or [1]) for L in (Ls or [1 << 26])
                for K in (Ks or [7, 25, 63, 255, 1023, 4095])]
    Kset = [7, 25, 63, 255, 1023, 4095]
    return ([Case1D(1, 1 << 26, K) for K in Kset] + [Case1D(8, 1 << 23, K) for K in Kset]
            + [Case1D(1, 1 << 22, 25)])


CASES_2D = ("spec", "gauss", "B", "A")


def default_cases_2d(quick: bool, Ks=None, names=None) -> list:
    names = names or CASES_2D
    out = []
    if quick:
        H, W, ks, B, A = 65, 1024, Ks or [3, 5], (1, 3, 96, 64, 4, 6, 0), (2, 8, 32, 32, 8, 3, 1)
    else:
        H, W, ks, B, A = 1025, 65536, Ks or [3, 5, 9, 15], (1, 6, 768, 512, 6, 6, 0), (16, 256, 128, 128, 256, 3, 1)
    if "spec" in names:
        out += [Case2D("spec", 1, 1, H, W, 1, k, k, pad=(k // 2, k // 2)) for k in ks]
    if "gauss" in names:
        out += [Case2D("gauss", 1, 1, H, W, 1, k, k, pad=(k // 2, k // 2), kernel="gauss") for k in ks]
    if "B" in names:
        N, Ci, Hb, Wb, Co, k, p = B
        out.append(Case2D("B", N, Ci, Hb, Wb, Co, k, k, pad=(p, p)))
    if "A" in names:
        N, Ci, Ha, Wa, Co, k, p = A
        out.append(Case2D("A", N, Ci, Ha, Wa, Co, k, k, pad=(p, p)))
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


# ===================================================================================== timing


def _sync(xp):
    if xp is not np:
        xp.cuda.Device().synchronize()


def _time_calls(call: Callable[[int], object], nbuf: int, xp, *, budget_s: float, min_reps: int,
                max_reps: int) -> list[float]:
    """Milliseconds per call after a warm-up; call(i) runs on rotation buffer i % nbuf.

    GPU: one pair of CUDA events per call, all queued before a single synchronisation, so the
    host never stalls the device between calls. CPU: perf_counter around each call.
    """
    # warm-up (the correctness check already ran once) and an estimate of one call
    t0 = time.perf_counter()
    call(1 % nbuf)
    _sync(xp)
    est = time.perf_counter() - t0
    if est < 0.02:  # a few more calls for clocks and caches to settle, and a better estimate
        n = max(2, min(50, int(0.02 / max(est, 1e-6))))
        t0 = time.perf_counter()
        for i in range(n):
            call(i % nbuf)
        _sync(xp)
        est = (time.perf_counter() - t0) / n
    reps = int(max(min_reps, min(max_reps, budget_s / max(est, 1e-7))))
    if xp is np:
        out = []
        for i in range(reps):
            t = time.perf_counter()
            call(i % nbuf)
            out.append((time.perf_counter() - t) * 1e3)
        return out
    ev = [(xp.cuda.Event(), xp.cuda.Event()) for _ in range(reps)]
    for i, (a, b) in enumerate(ev):
        a.record()
        call(i % nbuf)
        b.record()
    ev[-1][1].synchronize()
    return [xp.cuda.get_elapsed_time(a, b) for a, b in ev]


def _stats(ms: list[float]) -> dict:
    a = np.asarray(ms)
    return {"ms_median": float(np.median(a)), "p20": float(np.percentile(a, 20)),
            "p80": float(np.percentile(a, 80)), "reps": int(a.size)}


def gpu_copy_gbs(nbytes: int = 1 << 30, reps: int = 20) -> dict:
    """Device-to-device copy (cudaMemcpyAsync) of ``nbytes``: bytes read + written per second."""
    import cupy

    src = cupy.ones(nbytes // 4, dtype=cupy.float32)
    dst = cupy.empty_like(src)
    for _ in range(5):
        dst.data.copy_from_device_async(src.data, src.nbytes)
    ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
    for a, b in ev:
        a.record()
        dst.data.copy_from_device_async(src.data, src.nbytes)
        b.record()
    ev[-1][1].synchronize()
    ms = float(np.median([cupy.cuda.get_elapsed_time(a, b) for a, b in ev]))
    del src, dst
    cupy.get_default_memory_pool().free_all_blocks()
    return {"gbs": 2 * nbytes / (ms * 1e-3) / 1e9, "ms": ms, "bytes": nbytes,
            "method": f"cudaMemcpyAsync device-to-device, {nbytes / 2**30:.2f} GiB, median of {reps}"}


def cpu_copy_gbs(nbytes: int = 1 << 28, reps: int = 5) -> dict:
    """numpy copy of ``nbytes`` (one thread): bytes read + written per second."""
    src = np.ones(nbytes // 4, dtype=np.float32)
    dst = np.empty_like(src)
    np.copyto(dst, src)
    ts = []
    for _ in range(reps):
        t = time.perf_counter()
        np.copyto(dst, src)
        ts.append(time.perf_counter() - t)
    s = float(np.median(ts))
    return {"gbs": 2 * nbytes / s / 1e9, "ms": s * 1e3, "bytes": nbytes,
            "method": f"numpy.copyto, {nbytes / 2**20:.0f} MiB, median of {reps}"}


def _cpu_name() -> str:
    name = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                name = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{name} ({os.cpu_count()} threads)"


def _host(y):
    """numpy/cupy view of a result that may be a torch tensor (dlpack, no copy on the device)."""
    if type(y).__module__.split(".")[0] == "torch":
        if y.device.type == "cuda":
            import cupy

            return cupy.from_dlpack(y.contiguous())
        return y.numpy()
    return y


def _check(xp, y, ref, tol: float, rounding: Optional[Callable[[], tuple]] = None) -> tuple[bool, float, str]:
    """(ok, relative error ||y - ref|| / ||ref||, note).

    A result passes when its relative error is within ``tol``; or, failing that, when every element's
    error is within what rounding its terms allows: |y - ref| <= 8 eps (sqrt(terms) + log2 n) (|x| * |w|),
    elementwise, with ``rounding()`` giving (|x| * |w|, eps, terms) (:func:`_rounding`, computed only when
    needed). The second test is for data whose result is much smaller than its terms (a log with a large
    offset through a high-pass): a float32 sum of products carries an error proportional to sum |w||x|,
    not to |sum w x|, so the first test would flag a correct kernel. A wrong tap, a shifted window or an
    unwritten element still fails both."""
    y = _host(y)
    if tuple(y.shape) != tuple(ref.shape):
        return False, float("nan"), f"shape {tuple(y.shape)} != expected {tuple(ref.shape)}"
    d = y.astype(np.float64) - ref
    nref = float(xp.linalg.norm(ref))
    err = float(xp.linalg.norm(d)) / (nref if nref > 0 else 1.0)
    if math.isfinite(err) and err <= tol:
        return True, err, ""
    if not ref.size:
        return False, err, f"rel err {err:.2e} > {tol:g}"
    if rounding is not None and math.isfinite(err):
        absref, eps, terms = rounding()
        bound = 8.0 * eps * (math.sqrt(max(1.0, terms)) + math.log2(max(2, ref.shape[-1])))
        if bool((xp.abs(d) <= bound * absref).all()):
            worst = float(xp.max(xp.abs(d) / xp.maximum(absref, np.finfo(np.float64).tiny)))
            return True, err, (f"rel err {err:.1e} > {tol:g}, but every element is within rounding of its terms "
                               f"(|y - ref| <= {worst:.1e} x (|x| * |w|), bound {bound:.1e}): the result is small "
                               "beside its terms, as for an offset through a high-pass")
    amax = float(xp.abs(ref).max())
    bad = ~(xp.abs(d) <= tol * (amax or 1.0))  # NaN counts as bad
    idx = int(xp.argmax(bad.ravel()))
    where = np.unravel_index(idx, ref.shape)
    got, want = float(y[where]), float(ref[where])
    return False, err, (f"rel err {err:.2e} > {tol:g}; first mismatch at {tuple(int(i) for i in where)}: "
                        f"got {got:.6g}, want {want:.6g}")


def _rounding(xp, case, inp, ref, dtype: str) -> Callable[[], tuple]:
    """A memoised () -> (|x| correlated with |w| elementwise, unit roundoff of ``dtype``, products per
    output): the scale of a correct result's rounding error (see :func:`_check`)."""
    memo: list = []

    def get():
        if not memo:
            x, w = inp
            memo.append((case.reference(xp, (xp.abs(x), xp.abs(w))), float(np.finfo(dtype).eps) / 2,
                         case.macs() / max(1, ref.size)))
        return memo[0]

    return get
def _one_line(exc: BaseException) -> str:
    s = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {s[0] if s else ''}"[:300]


# ===================================================================================== the run


@dataclass
class _Ctx:
    args: argparse.Namespace
    op: str
    dtype: str
    date: str
    start: float
    deadline: Optional[float]
    copy: dict = field(default_factory=dict)  # "cuda"/"cpu" -> copy measurement
    device: dict = field(default_factory=dict)  # "cuda"/"cpu" -> device name
    records: list = field(default_factory=list)
    failed: int = 0

    def time_left(self) -> bool:
        return self.deadline is None or time.perf_counter() < self.deadline


def _record(ctx: _Ctx, case, backend: str, impl: str, kind: str, **kw) -> dict:
    r = {"op": ctx.op, **case.fields(), "impl": impl, "block": None, "ms_median": None, "gbs": None,
         "pct_copy": None, "device": ctx.device.get(backend), "date": ctx.date, "backend": backend, "kind": kind,
         "dtype": ctx.dtype, "case": case.label, "group": case.group, "status": "ok", "note": ""}
    if ctx.op == "conv1d":
        r["mode"] = "same"
    if getattr(case, "reduced_from", None):
        rf = case.reduced_from
        r["note"] = (f"CPU row at L={_p2(case.L)} (case has L={_p2(rf)})" if ctx.op == "conv1d"
                     else f"CPU row at N={case.N} W={case.W} (case has N={rf[0]} W={rf[1]})")
    r.update(kw)
    ctx.records.append(r)
    return r


def _add_note(r: dict, note: str) -> None:
    r["note"] = f"{r['note']}; {note}" if r["note"] else note


def _finish_timing(ctx: _Ctx, r: dict, case, backend: str, ms: list[float]) -> None:
    r.update(_stats(ms))
    sec = r["ms_median"] * 1e-3
    itemsize = np.dtype(ctx.dtype).itemsize
    r["gbs"] = case.nbytes(itemsize) / sec / 1e9 if sec > 0 else None
    cp = ctx.copy.get(backend)
    if cp and r["gbs"] is not None:
        r["pct_copy"] = 100.0 * r["gbs"] / cp["gbs"]


def _parse_blocks(ctx: _Ctx, v: _registry.Variant) -> list:
    blocks = list(v.blocks) or [None]
    if ctx.args.blocks:
        want = ctx.args.blocks
        blocks = [b for b in want if not v.blocks or b in v.blocks] if v.blocks else [None]
    return blocks


def _selected(names_arg, name: str) -> bool:
    return names_arg is None or name in names_arg


def _rows_for(ctx: _Ctx, backend: str) -> tuple[list, list]:
    """(sigconv variants incl. an "auto" pseudo-entry, peers) for one backend, after --variants/--peers."""
    vs = [v for v in _registry.entries(ctx.op, backend, kind="variant") if _selected(ctx.args.variants, v.name)]
    if _selected(ctx.args.variants, "auto") and _registry.entries(ctx.op, backend, kind="variant"):
        vs.append(None)  # auto
    ps = [p for p in _registry.entries(ctx.op, backend, kind="peer") if _selected(ctx.args.peers, p.name)]
    return vs, ps


def _free(xp) -> None:
    from sigconv.backends import peers

    peers.clear_caches()
    if xp is not np:
        import gc

        gc.collect()
        xp.get_default_memory_pool().free_all_blocks()
        try:
            import torch

            if torch.cuda.is_available():
                torch.cuda.empty_cache()
        except Exception:
            pass


def _auto_choice(ctx: _Ctx, case, inp) -> Optional[str]:
    """What ``auto`` picked (variant/block), when the backend says."""
    try:
        if ctx.op == "conv1d":
            from sigconv.backends import cuda1d

            fn = getattr(cuda1d, "resolve_auto", None)
            if fn is None:
                return None
            pad, n = case.window()
            v, b = fn(inp[0], inp[1], pad, n)
        else:
            from sigconv.backends import cuda2d

            fn = getattr(cuda2d, "resolve_auto", None) or getattr(cuda2d, "_auto", None)
            if fn is None:
                return None
            v, b = fn(inp[0], inp[1], None, tuple(case.stride), tuple(case.pad), case.out_hw())
        return f"{v}/{'x'.join(map(str, b)) if isinstance(b, (tuple, list)) else b}"
    except Exception:
        return None


def _run_group(ctx: _Ctx, case, backend: str) -> None:
    """All rows of one backend for one case: inputs, reference, then check + time each row."""
    args = ctx.args
    vs, ps = _rows_for(ctx, backend)
    if not vs and not ps:
        return
    gpu = backend == "cuda"
    reason = _devices.cuda_reason() if gpu else None
    # rows that cannot run here at all
    runnable_v, runnable_p = [], []
    for v in vs:
        if v is not None and (v.availability() or reason):
            _record(ctx, case, backend, f"sigconv:{v.name}", "variant", status="skipped",
                    note=v.availability() or reason)
        elif v is None and reason:
            _record(ctx, case, backend, "sigconv:auto", "variant", status="skipped", note=reason)
        else:
            runnable_v.append(v)
    for p in ps:
        why = p.availability() or (reason if gpu else None)
        if why:
            _record(ctx, case, backend, p.name, "peer", status="skipped", note=why)
        else:
            runnable_p.append(p)
    if not runnable_v and not runnable_p:
        return
    if not gpu:
        small = case.cpu_version()
        if small is None:
            for v in runnable_v:
                _record(ctx, case, backend, f"sigconv:{v.name if v else 'auto'}", "variant", status="skipped",
                        note="too large for a CPU row")
            for p in runnable_p:
                _record(ctx, case, backend, p.name, "peer", status="skipped", note="too large for a CPU row")
            return
        case = small
    if gpu:
        import cupy as xp
    else:
        xp = np
    itemsize = np.dtype(ctx.dtype).itemsize
    if gpu:
        l2 = int(xp.cuda.Device().attributes.get("L2CacheSize", 60 << 20))
    else:
        l2 = 64 << 20  # a generous last-level cache
    nbuf = int(min(64, max(2, math.ceil(L2_FACTOR * l2 / max(1, case.in_bytes(itemsize))))))
    rng = np.random.default_rng(args.seed)
    budget = args.budget if gpu else min(args.budget, 2.0)
    max_reps = args.reps
    min_reps = 5 if gpu else 2
    try:
        inp = case.inputs(xp, ctx.dtype, rng, nbuf)
        ref = case.reference(xp, inp[0])
        rounding = _rounding(xp, case, inp[0], ref, ctx.dtype)
        _sync(xp)
    except Exception as exc:  # OOM or a broken device: every row of the group is an error
        for v in runnable_v:
            _record(ctx, case, backend, f"sigconv:{v.name if v else 'auto'}", "variant", status="error",
                    note=f"inputs/reference: {_one_line(exc)}")
        for p in runnable_p:
            _record(ctx, case, backend, p.name, "peer", status="error", note=f"inputs/reference: {_one_line(exc)}")
        ctx.failed += 1
        _free(xp)
        return
    tol = TOL[ctx.dtype]

    def out_of_time(impl, kind):
        if ctx.time_left():
            return False
        _record(ctx, case, backend, impl, kind, status="skipped", note="time limit (--max-seconds) reached")
        return True

    # ---- sigconv variants: check every block, sweep the passing ones, time the best fully
    for v in runnable_v:
        name = v.name if v is not None else "auto"
        impl = f"sigconv:{name}"
        if out_of_time(impl, "variant"):
            continue
        if v is not None:
            if ctx.dtype not in v.dtypes:
                _record(ctx, case, backend, impl, "variant", status="skipped", note=f"{ctx.dtype} not supported")
                continue
            why = case.taps_ok(v)
            if why:
                _record(ctx, case, backend, impl, "variant", status="skipped", note=why)
                continue
            blocks = _parse_blocks(ctx, v)
            if not blocks:
                _record(ctx, case, backend, impl, "variant", status="skipped", note="none of --blocks accepted")
                continue
        else:
            blocks = [None]
        passing, failing, errors = [], [], []
        for b in blocks:
            try:
                y = case.run_variant(backend, name, b, inp[0])
                ok, err, note = _check(xp, y, ref, tol, rounding)
                del y
            except ValueError as exc:  # the launcher refuses this shape/block: not a wrong answer
                errors.append((b, "refused: " + _one_line(exc)))
                continue
            except Exception as exc:
                errors.append((b, _one_line(exc)))
                continue
            (passing if ok else failing).append((b, err, note))
        for b, err, note in failing:
            _record(ctx, case, backend, impl, "variant", status="FAIL", block=_jb(b), rel_err=err,
                    note=f"block {_fb(b)}: {note}")
            ctx.failed += 1
        only_refused = errors and all(e.startswith("refused: ") for _, e in errors)
        if errors and not passing and not failing:
            st = "skipped" if only_refused else "error"
            _record(ctx, case, backend, impl, "variant", status=st, note="; ".join(
                f"block {_fb(b)}: {e}" for b, e in errors[:3]))
            if st == "error":
                ctx.failed += 1
            continue
        if not passing:
            continue
        try:
            sweep = {}
            if len(passing) > 1:
                for b, _, _ in passing:
                    if not ctx.time_left():
                        break
                    ms = _time_calls(lambda i, b=b: case.run_variant(backend, name, b, inp[i]), nbuf, xp,
                                     budget_s=min(0.15, budget), min_reps=3, max_reps=20)
                    sweep[b] = float(np.median(ms))
                best = min(sweep, key=sweep.get) if sweep else passing[0][0]
            else:
                best = passing[0][0]
            ms = _time_calls(lambda i: case.run_variant(backend, name, best, inp[i]), nbuf, xp,
                             budget_s=budget, min_reps=min_reps, max_reps=max_reps)
        except Exception as exc:
            _record(ctx, case, backend, impl, "variant", status="error", note=f"while timing: {_one_line(exc)}")
            ctx.failed += 1
            continue
        err, cnote = {b: (e, n) for b, e, n in passing}[best]
        r = _record(ctx, case, backend, impl, "variant", block=_jb(best), rel_err=err)
        if cnote:
            _add_note(r, cnote)
        if sweep:
            r["blocks_ms"] = {_fb(b): round(t, 5) for b, t in sweep.items()}
        if v is None and gpu:
            choice = _auto_choice(ctx, case, inp[0])
            if choice:
                r["auto_choice"] = choice
                _add_note(r, f"auto -> {choice}")
        if failing:
            _add_note(r, f"blocks {', '.join(_fb(b) for b, _, _ in failing)} FAIL (own rows)")
        if errors:
            _add_note(r, "; ".join(f"block {_fb(b)}: {e}" for b, e in errors[:3]))
        _finish_timing(ctx, r, case, backend, ms)
        _sync(xp)

    # ---- peers: check (flag on disagreement), then time
    for p in runnable_p:
        if out_of_time(p.name, "peer"):
            continue
        if ctx.dtype not in p.dtypes:
            _record(ctx, case, backend, p.name, "peer", status="skipped", note=f"{ctx.dtype} not supported")
            continue
        why = case.taps_ok(p)
        if why:
            _record(ctx, case, backend, p.name, "peer", status="skipped", note=why)
            continue
        if gpu and p.name.startswith("cupyx.convolve-direct") and case.macs() > args.max_direct_macs:
            _record(ctx, case, backend, p.name, "peer", status="skipped",
                    note=f"direct summation of {case.macs():.2g} MACs would take seconds (--max-direct-macs)")
            continue
        from sigconv.backends.peers import NotSupported

        try:
            fn = p.load()
            y = case.run_peer(fn, inp[0])
            ok, err, note = _check(xp, y, ref, float(p.extra.get("tol", tol)), rounding)
            del y
            ms = _time_calls(lambda i: case.run_peer(fn, inp[i]), nbuf, xp, budget_s=budget, min_reps=min_reps,
                             max_reps=max_reps)
        except NotSupported as exc:
            _record(ctx, case, backend, p.name, "peer", status="skipped", note=str(exc))
            continue
        except Exception as exc:
            _record(ctx, case, backend, p.name, "peer", status="error", note=_one_line(exc))
            continue
        r = _record(ctx, case, backend, p.name, "peer", rel_err=err)
        if not ok:
            r["status"] = "flagged"
            _add_note(r, f"disagrees with the float64 reference: {note}")
        elif note:
            _add_note(r, note)
        elif "tol" in p.extra:
            _add_note(r, f"checked at tolerance {p.extra['tol']:g}")
        _finish_timing(ctx, r, case, backend, ms)
    inp = ref = None  # drop the buffers before freeing the pools
    _free(xp)


def _jb(b):
    return list(b) if isinstance(b, tuple) else b


def _fb(b) -> str:
    if b is None:
        return "-"
    return "x".join(map(str, b)) if isinstance(b, (tuple, list)) else str(b)


def _ratios(records: list) -> None:
    """speedup_vs_best_peer = fastest timed peer's ms / this row's ms, among rows of the same shape
    and backend class (GPU rows against GPU peers; CPU rows against CPU peers at the same size)."""
    key = lambda r: (r["case"], r["backend"], r.get("L"), r.get("W"), r.get("N"))  # noqa: E731
    best: dict = {}
    for r in records:
        if r["kind"] == "peer" and r["status"] == "ok" and r["ms_median"]:
            k = key(r)
            if k not in best or r["ms_median"] < best[k][0]:
                best[k] = (r["ms_median"], r["impl"])
    for r in records:
        b = best.get(key(r))
        if b and r["ms_median"]:
            r["best_peer"] = b[1]
            r["speedup_vs_best_peer"] = b[0] / r["ms_median"]


def measure(op: str, case, backends=("cuda", "cpu"), *, variants_for: Optional[Callable] = None,
            budget: float = 0.4, reps: int = 200, dtype: str = "float32",
            should_stop: Optional[Callable[[], bool]] = None) -> tuple[list, dict]:
    """Time one case with `sigconv bench`'s method, for callers other than the command line (the TUI).

    ``case`` is a Case1D / Case2D (or an object with their interface, such as one built on real data);
    ``variants_for(backend)`` gives the sigconv variant names to run on that backend (None: all, []:
    none, so only the peers run). Every row is checked against float64 before it is timed, as in the
    command. ``should_stop()`` is asked between backends. Returns (records with the speed-up ratios
    filled in, {backend: device name}).
    """
    ns = argparse.Namespace(variants=None, peers=None, blocks=None, budget=budget, reps=reps, seed=0,
                            max_direct_macs=4e11)
    now = datetime.datetime.now(datetime.timezone.utc)
    ctx = _Ctx(args=ns, op=op, dtype=dtype, date=now.strftime("%Y-%m-%dT%H:%M:%SZ"), start=time.perf_counter(),
               deadline=None)
    ctx.device["cpu"] = "cpu"
    ctx.device["cuda"] = _devices.gpu_name() if _devices.cuda_reason() is None else None
    for be in backends:
        if should_stop is not None and should_stop():
            break
        ns.variants = variants_for(be) if variants_for is not None else None
        _run_group(ctx, case, be)
    _ratios(ctx.records)
    return ctx.records, {"date": ctx.date, **ctx.device}


def _find(records, **kw):
    for r in records:
        if all(r.get(k) == v for k, v in kw.items()) and r["status"] == "ok" and r["ms_median"]:
            return r
    return None


def _verdicts(ctx: _Ctx) -> list[str]:
    """Issue 3 and 4 targets, one line each, for the cases that ran on the GPU."""
    recs = [r for r in ctx.records if r["backend"] == "cuda"]
    out = []

    def pf(ok):
        return "PASS" if ok else "MISS"

    if ctx.op == "conv1d":
        for K in (7, 25, 63, 255, 1023, 4095):
            a = _find(recs, impl="sigconv:auto", C=1, L=1 << 26, K=K)
            if not a:
                if any(r["C"] == 1 and r["L"] == 1 << 26 and r["K"] == K for r in recs):
                    out.append(f"C=1 L=2^26 K={K}: auto has no timing (see its row): MISS")
                continue
            if K in (7, 25) and a["pct_copy"] is not None:
                out.append(f"C=1 L=2^26 K={K}: auto {a['ms_median']:.3f} ms = {a['pct_copy']:.0f}% of copy "
                           f"(target 75%): {pf(a['pct_copy'] >= 75)}")
            if a.get("speedup_vs_best_peer"):
                s = a["speedup_vs_best_peer"]
                out.append(f"C=1 L=2^26 K={K}: auto {a['ms_median']:.3f} ms vs {a['best_peer']} "
                           f"{a['ms_median'] * s:.3f} ms = {s:.2f}x (target 2x): {pf(s >= 2)}")
            else:
                out.append(f"C=1 L=2^26 K={K}: auto {a['ms_median']:.3f} ms; no peer timed: n/a")
    else:
        for r in recs:
            if r["impl"] != "sigconv:auto" or r["status"] != "ok" or not r["ms_median"]:
                continue
            g = r["group"]
            full = r["N"] == 1 and r["H"] == 1025 and r["W"] == 65536 if g in ("spec", "gauss") else True
            tag = f"{r['case']}: auto {r['ms_median']:.3f} ms"
            if g == "spec" and full:
                s = r.get("speedup_vs_best_peer")
                if s:
                    out.append(f"{tag} vs {r['best_peer']} {r['ms_median'] * s:.3f} ms = {s:.2f}x "
                               f"(target 3x): {pf(s >= 3)}")
                if r["kH"] == 3 and r["pct_copy"] is not None:
                    out.append(f"{tag} = {r['pct_copy']:.0f}% of copy (target 70%): {pf(r['pct_copy'] >= 70)}")
            elif g in ("B", "A") and (r["Cin"], r["H"], r["W"]) in ((6, 768, 512), (256, 128, 128)):
                c = _find(recs, impl="cudnn", case=r["case"])
                if not c:
                    out.append(f"{tag}; cudnn not timed: n/a")
                elif g == "B":
                    s = c["ms_median"] / r["ms_median"]
                    out.append(f"{tag} vs cudnn {c['ms_median']:.3f} ms = {s:.2f}x faster (target 3x): {pf(s >= 3)}")
                else:
                    s = r["ms_median"] / c["ms_median"]
                    out.append(f"{tag} vs cudnn {c['ms_median']:.3f} ms = {s:.2f}x cudnn's time "
                               f"(target <= 1.5x): {pf(s <= 1.5)}")
    return out


# ===================================================================================== output


def _fmt(v, nd=3):
    if v is None:
        return ""
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 1:
            return f"{v:.{max(0, nd - 1)}f}".rstrip("0").rstrip(".") if nd else f"{v:.0f}"
        return f"{v:.{nd}g}"
    return str(v)


def markdown(ctx: _Ctx, verdicts: list[str]) -> str:
    lines = [f"# sigconv bench {ctx.op} ({ctx.dtype})", ""]
    for be in ("cuda", "cpu"):
        if ctx.device.get(be):
            cp = ctx.copy.get(be)
            cps = f"; copy {cp['gbs']:.0f} GB/s ({cp['method']})" if cp else ""
            lines.append(f"- {be}: {ctx.device[be]}{cps}")
    lines += [f"- date: {ctx.date}; sigconv {_version()}; "
              f"GB/s = (input read once + output written once) / median time", ""]
    head = ("| case | impl | block | ms (median) | p20-p80 | GB/s | % copy | x best peer | status | note |",
            "|---|---|---|---:|---:|---:|---:|---:|---|---|")
    lines += list(head)
    skipped = {}
    for r in ctx.records:
        if r["status"] == "skipped":
            skipped.setdefault((r["backend"], r["note"]), []).append((r["case"], r["impl"]))
            continue
        band = f"{_fmt(r.get('p20'))}-{_fmt(r.get('p80'))}" if r.get("p20") is not None else ""
        sp = r.get("speedup_vs_best_peer")
        lines.append("| " + " | ".join([
            r["case"] + ("" if r["backend"] == "cuda" else " (cpu)"), r["impl"],
            _fb(r["block"]) if r["block"] is not None else "", _fmt(r["ms_median"], 4), band, _fmt(r["gbs"], 1),
            _fmt(r["pct_copy"], 1), f"{sp:.2f}" if sp else "", r["status"], r["note"].replace("|", "/")]) + " |")
    if skipped:
        lines += ["", "## Skipped", ""]
        for (be, note), items in skipped.items():
            impls = sorted({i for _, i in items})
            cases = sorted({c for c, _ in items})
            where = f"{len(cases)} case(s)" if len(cases) > 1 else cases[0]
            lines.append(f"- {be}: {', '.join(impls)} ({where}): {note}")
    if verdicts:
        lines += ["", "## Targets", ""] + [f"- {v}" for v in verdicts]
    return "\n".join(lines) + "\n"


def summary(ctx: _Ctx) -> str:
    """Compact table, one line per case and backend: auto, the best sigconv row, the best peer."""
    head = (f"{'case':34} {'be':4} {'auto ms':>9} {'%copy':>5} {'best sigconv':>26} {'best peer':>30} "
            f"{'x peer':>6}  problems")
    lines = [head, "-" * len(head)]
    seen = []
    for r in ctx.records:
        k = (r["case"], r["backend"])
        if k not in seen:
            seen.append(k)
    for case, be in seen:
        rows = [r for r in ctx.records if r["case"] == case and r["backend"] == be]
        timed = [r for r in rows if r["ms_median"] and r["status"] in ("ok", "flagged")]
        ours = [r for r in timed if r["kind"] == "variant" and r["status"] == "ok"]
        peers = [r for r in timed if r["kind"] == "peer" and r["status"] == "ok"]
        auto = next((r for r in ours if r["impl"] == "sigconv:auto"), None)
        best = min(ours, key=lambda r: r["ms_median"], default=None)
        bp = min(peers, key=lambda r: r["ms_median"], default=None)
        probs = sorted({f"{r['impl']} {r['status']}" for r in rows if r["status"] in ("FAIL", "error", "flagged")})
        if not timed and not probs:
            continue
        a_ms = f"{auto['ms_median']:.4g}" if auto else "-"
        a_pc = f"{auto['pct_copy']:.0f}" if auto and auto["pct_copy"] is not None else "-"
        b_s = (f"{best['impl'][8:]}/{_fb(best['block'])} {best['ms_median']:.4g}" if best else "-")
        p_s = f"{bp['impl']} {bp['ms_median']:.4g}" if bp else "-"
        ref = auto or best
        x = f"{bp['ms_median'] / ref['ms_median']:.2f}" if bp and ref else "-"
        lines.append(f"{case[:34]:34} {be:4} {a_ms:>9} {a_pc:>5} {b_s[:26]:>26} {p_s[:30]:>30} {x:>6}  "
                     + ", ".join(probs))
    return "\n".join(lines)


def _version() -> str:
    try:
        from sigconv._version import __version__

        return __version__
    except Exception:
        return "?"


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "device"


def default_out_dir() -> Path:
    """benchmarks/results/ when run from the sigconv checkout, else the current folder."""
    cwd = Path.cwd()
    pp = cwd / "pyproject.toml"
    try:
        if (cwd / "benchmarks").is_dir() and pp.is_file() and 'name = "sigconv"' in pp.read_text():
            return cwd / "benchmarks" / "results"
    except OSError:
        pass
    return cwd


def _versions() -> dict:
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("scipy", "cupy", "torch"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = getattr(m, "__version__", "?")
    try:
        t = sys.modules.get("torch")
        if t is not None and t.backends.cudnn.is_available():
            out["cudnn"] = t.backends.cudnn.version()
    except Exception:
        pass
    return out


# ===================================================================================== CLI


def _int_expr(text: str) -> int:
    """An integer written as 67108864, 2^26, 2**26 or 1<<26."""
    t = text.strip().replace("**", "^")
    try:
        if "^" in t:
            a, b = t.split("^")
            return int(a) ** int(b)
        if "<<" in t:
            a, b = t.split("<<")
            return int(a) << int(b)
        return int(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer such as 4096 or 2^26, got {text!r}") from None


def _int_list(text: str) -> list[int]:
    return [_int_expr(t) for t in text.split(",") if t.strip()]


def _name_list(text: str) -> list[str]:
    return [t.strip() for t in text.split(",") if t.strip()]


def _block_list(text: str) -> list:
    out = []
    for t in _name_list(text):
        if "x" in t:
            a, b = t.split("x", 1)
            out.append((_int_expr(a), _int_expr(b)))
        else:
            out.append(_int_expr(t))
    return out


def add_bench_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``sigconv bench`` (the CLI's subcommand and the tests build on this)."""
    parser.add_argument("op", choices=("conv1d", "conv2d"), help="operation to benchmark")
    parser.add_argument("--C", type=_int_list, default=None, metavar="LIST",
                        help="conv1d channel counts, comma-separated (default: the issue's set)")
    parser.add_argument("--L", type=_int_list, default=None, metavar="LIST",
                        help="conv1d signal lengths, e.g. 2^22,2^26")
    parser.add_argument("--K", type=_int_list, default=None, metavar="LIST",
                        help="conv1d tap counts, or conv2d kernel sides of the spectrogram cases")
    parser.add_argument("--shape", action="append", default=None, metavar="N,Cin,H,W,Cout,kH,kW[,s[,p]]",
                        help="conv2d: a custom shape (repeatable); replaces the default set")
    parser.add_argument("--cases", type=_name_list, default=None, metavar="LIST",
                        help=f"conv2d: which default cases ({','.join(CASES_2D)})")
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    parser.add_argument("--backend", choices=("auto", "cuda", "cpu", "all"), default="auto",
                        help="whose variants to time: auto = cuda when a GPU is usable, else cpu "
                             "(the SciPy peer always runs on the CPU)")
    parser.add_argument("--variants", type=_name_list, default=None, metavar="LIST",
                        help="sigconv variants to time (default all, 'auto' included)")
    parser.add_argument("--blocks", type=_block_list, default=None, metavar="LIST",
                        help="block sizes to sweep (conv1d: 128,256; conv2d: 8x4,16x16); default: all accepted")
    parser.add_argument("--peers", type=_name_list, default=None, metavar="LIST",
                        help="peers to time (default all; 'none' for none)")
    parser.add_argument("--reps", type=int, default=200, help="most timed runs per row (default 200)")
    parser.add_argument("--budget", type=float, default=0.4,
                        help="seconds of timed runs per row; fewer reps for slow rows (default 0.4)")
    parser.add_argument("--max-seconds", type=float, default=None,
                        help="stop starting rows after this many seconds (the rest are listed as skipped)")
    parser.add_argument("--max-direct-macs", type=float, default=4e11,
                        help="skip the cupyx direct peer above this many multiply-adds (default 4e11)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None,
                        help="folder for the JSON and markdown files (default benchmarks/results/ in the "
                             "repository, else the current folder)")
    parser.add_argument("--quick", action="store_true", help="a small set that runs in seconds, also on a CPU")
    parser.add_argument("--json-only", action="store_true", help="write only the JSON file; print no table")
    parser.add_argument("--list", action="store_true", help="list the variants and peers that would run, and exit")


def _validate(args) -> Optional[str]:
    for name in ("C", "L", "K"):
        vals = getattr(args, name)
        if vals is not None and (not vals or min(vals) < 1):
            return f"--{name} must list positive integers, got {vals}"
    if args.reps < 1:
        return f"--reps must be >= 1, got {args.reps}"
    if not args.budget > 0:
        return f"--budget must be > 0 seconds, got {args.budget}"
    if args.cases:
        bad = [c for c in args.cases if c not in CASES_2D]
        if bad:
            return f"--cases must be among {','.join(CASES_2D)}, got {','.join(bad)}"
    if args.peers == ["none"]:
        args.peers = []
    if args.variants == ["none"]:
        args.variants = []
    if args.blocks:
        for b in args.blocks:
            if args.op == "conv1d" and not isinstance(b, int):
                return f"--blocks for conv1d are integers (threads per block), got {_fb(b)}"
    return None


def _cases(args) -> list:
    if args.op == "conv1d":
        return default_cases_1d(args.quick, args.C, args.L, args.K)
    if args.shape:
        return [parse_shape2d(s) for s in args.shape]
    return default_cases_2d(args.quick, args.K, args.cases)


def _backends(args) -> list[str]:
    if args.backend == "all":
        return ["cuda", "cpu"]
    if args.backend == "auto":
        return ["cuda" if _devices.cuda_reason() is None else "cpu"]
    return [args.backend]


def run_bench(args: argparse.Namespace) -> int:
    """Run the benchmark described by parsed ``args``; 0 when every sigconv row that ran was correct,
    1 when one failed its check or errored, 2 on bad options."""
    err = _validate(args)
    if err is None:
        try:
            cases = _cases(args)
        except ValueError as exc:
            err = str(exc)
    if err:
        print(f"sigconv bench: error: {err}", file=sys.stderr)
        return 2
    backends = _backends(args)
    if args.list:
        for be in ("cuda", "cpu"):
            for v in _registry.entries(args.op, be):
                why = v.availability()
                print(f"{v.kind:7} {be:4} {v.name:26} {'available' if why is None else 'unavailable: ' + why}")
        return 0
    now = datetime.datetime.now(datetime.timezone.utc)
    gpu_ok = _devices.cuda_reason() is None
    ctx = _Ctx(args=args, op=args.op, dtype=args.dtype, date=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
               start=time.perf_counter(),
               deadline=time.perf_counter() + args.max_seconds if args.max_seconds else None)
    # sigconv's variants run for the backends asked for; the cuda ones are also listed (as skipped,
    # with the reason) when there is no GPU. Peers of both backends always run where they can.
    with_variants = {"cuda": "cuda" in backends or not gpu_ok, "cpu": "cpu" in backends}
    ctx.device["cpu"] = _cpu_name()
    if gpu_ok:
        ctx.device["cuda"] = _devices.gpu_name()
    else:
        ctx.device["cuda"] = None

    say = (lambda *a: None) if args.json_only else (lambda *a: print(*a, flush=True))
    interrupted = False
    prev = None
    if threading.current_thread() is threading.main_thread():
        def _term(signum, frame):
            raise KeyboardInterrupt

        prev = signal.signal(signal.SIGTERM, _term)
    try:
        if gpu_ok:
            try:
                ctx.copy["cuda"] = gpu_copy_gbs()
                say(f"device: {ctx.device['cuda']}; copy {ctx.copy['cuda']['gbs']:.0f} GB/s "
                    f"({ctx.copy['cuda']['method']})")
            except Exception as exc:
                say(f"device copy bandwidth not measured: {_one_line(exc)}")
        else:
            say(f"no usable GPU ({_devices.cuda_reason()}): GPU rows are skipped")
        ctx.copy["cpu"] = cpu_copy_gbs(1 << 26 if args.quick else 1 << 28)
        for case in cases:
            say(f"-- {case.label}")
            for be in ("cuda", "cpu"):
                n0 = len(ctx.records)
                only_peers = not with_variants[be]
                if only_peers:  # this backend's variants were not asked for: its peers still run
                    saved = args.variants
                    args.variants = []
                try:
                    _run_group(ctx, case, be)
                finally:
                    if only_peers:
                        args.variants = saved
                skipped = {}
                for r in ctx.records[n0:]:
                    if r["status"] == "skipped":
                        skipped.setdefault(r["note"], []).append(r["impl"])
                    else:
                        say("   " + _row_line(r))
                for note, impls in skipped.items():
                    say(f"   {be:4} skipped {', '.join(impls)}: {note}"[:240])
    except KeyboardInterrupt:
        interrupted = True
        print("sigconv bench: interrupted; writing the rows measured so far", file=sys.stderr)
    finally:
        if prev is not None:
            signal.signal(signal.SIGTERM, prev)
    _ratios(ctx.records)
    verdicts = _verdicts(ctx)
    meta = {"op": ctx.op, "dtype": ctx.dtype, "date": ctx.date, "devices": ctx.device, "copy": ctx.copy,
            "versions": _versions(), "sigconv": _version(), "quick": bool(args.quick), "interrupted": interrupted,
            "seconds": round(time.perf_counter() - ctx.start, 1), "argv": sys.argv[1:],
            "tolerance": TOL[ctx.dtype], "method": __doc__.split("Results:")[0].strip()}
    out_dir = Path(args.out) if args.out else default_out_dir()
    dev = ctx.device.get("cuda") if gpu_ok else "cpu"
    stem = f"{ctx.op}-{_slug(dev or 'cpu')}-{now.strftime('%Y-%m-%d')}" + ("-quick" if args.quick else "")
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
        jpath = out_dir / f"{stem}.json"
        jpath.write_text(json.dumps({"meta": meta, "verdicts": verdicts, "records": ctx.records}, indent=1,
                                    default=str) + "\n")
        paths = [jpath]
        md = markdown(ctx, verdicts)
        if not args.json_only:
            mpath = out_dir / f"{stem}.md"
            mpath.write_text(md)
            paths.append(mpath)
    except OSError as exc:
        print(f"sigconv bench: error: cannot write results to {out_dir}: {exc}", file=sys.stderr)
        return 1
    if not args.json_only:
        print()
        print(summary(ctx))
    for v in verdicts:
        print(f"verdict: {v}")
    for p in paths:
        print(f"wrote {p}")
    bad = [r for r in ctx.records if r["kind"] == "variant" and r["status"] in ("FAIL", "error")]
    if bad:
        print(f"sigconv bench: {len(bad)} sigconv row(s) FAILED or errored", file=sys.stderr)
    return 1 if bad or interrupted else 0


def _row_line(r: dict) -> str:
    ms = f"{r['ms_median']:.4g} ms" if r["ms_median"] else ""
    gbs = f"{r['gbs']:.0f} GB/s" if r["gbs"] else ""
    pc = f"{r['pct_copy']:.0f}%" if r["pct_copy"] is not None else ""
    b = f"b={_fb(r['block'])}" if r["block"] is not None else ""
    return f"{r['backend']:4} {r['impl']:28} {b:9} {ms:>12} {gbs:>10} {pc:>5} {r['status']:7} {r['note']}"[:220]
