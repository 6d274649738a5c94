"""CPU-side checks of the CUDA sources and the cuda conv1d registry (run on CI, no GPU needed).

- every kernels/*.cu compiles for sm_90 with nvcc (when nvcc exists) and no kernel spills registers;
- every cuda conv1d variant is registered with a description and block sizes, without a GPU;
- NumPy emulations of the tiled kernel's and the overlap-save kernels' index maths.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.signal

from sigconv import _registry
from sigconv._api import window_1d
from sigconv.backends import cpu as cpu_backend

KDIR = Path(__file__).resolve().parent.parent / "kernels"
CU_FILES = sorted(KDIR.glob("*.cu"))
NVCC = shutil.which("nvcc")


def _ptxas(cu: Path) -> str:
    cmd = [NVCC, "-std=c++17", "-arch=sm_90", "-cubin", "-Xptxas", "-v", "-DSIGCONV_NVCC_CHECK", f"-I{KDIR}",
           "-o", "/dev/null", str(cu)]
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"nvcc failed on {cu.name}:\n{res.stderr[-4000:]}"
    return res.stderr + res.stdout


def _spill_report(text: str) -> dict:
    """{entry function: (spill store bytes, spill load bytes)} from ptxas -v output."""
    out, fn = {}, None
    for line in text.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'", line)
        if m:
            fn = m.group(1)
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and fn:
            out[fn] = (int(m.group(1)), int(m.group(2)))
    return out


@pytest.mark.skipif(NVCC is None, reason="nvcc not found on PATH: kernel compile check skipped")
@pytest.mark.parametrize("cu", CU_FILES, ids=[p.name for p in CU_FILES])
def test_kernel_compiles_without_spills(cu):
    report = _spill_report(_ptxas(cu))
    assert report, f"ptxas reported no entry functions for {cu.name}"
    spilled = {f: s for f, s in report.items() if s != (0, 0)}
    assert not spilled, f"register spills in {cu.name}: {spilled}"
    if cu.name == "conv1d.cu":
        tiled = [f for f in report if "conv1d_tiled" in f]
        assert any("conv1d_tiled_rt" in f for f in tiled) and len(tiled) >= 5, \
            f"tiled kernels were not instantiated (SIGCONV_NVCC_CHECK): {sorted(report)}"


def test_conv1d_cu_exists():
    assert (KDIR / "conv1d.cu").is_file() and (KDIR / "common.cuh").is_file()


EXPECTED = ("naive", "constant", "shared", "l2", "tiled", "fft")


def test_cuda_conv1d_variants_registered_without_gpu():
    vs = {v.name: v for v in _registry.entries("conv1d", "cuda", kind="variant")}
    assert set(EXPECTED) <= set(vs), f"missing variants: {set(EXPECTED) - set(vs)}"
    for name in EXPECTED:
        v = vs[name]
        assert v.description and len(v.description.splitlines()) == 1
        assert v.blocks and set(v.blocks) <= set(_registry.BLOCKS_1D) and v.default_block in v.blocks
        assert "gpu" in v.requires
        mod, _, fn = v.launcher.partition(":")
        assert fn == f"launch_{name}"
        import importlib

        assert callable(getattr(importlib.import_module(mod), fn))
    from sigconv import _devices

    listed = {d["name"]: d for d in __import__("sigconv").variants("conv1d") if d["backend"] == "cuda"}
    reason = _devices.cuda_reason()
    for name in EXPECTED:
        assert listed[name]["available"] == (reason is None)
        if reason:
            assert listed[name]["reason"]


def test_import_sigconv_does_not_import_cupy():
    code = "import sys, sigconv, sigconv.backends.cuda1d, sigconv._autotune; print('cupy' in sys.modules)"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                         cwd=str(KDIR.parent))
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == "False"


# ----------------------------------------------------------------- emulation of the kernels' index maths


def _pad32(q):
    return q + ((q >> 5) << 2)


def _emulate_tiled(x, w, pad, out_len, B, misalign):
    """NumPy port of conv1d_tiled / conv1d_tiled_rt (one channel): loader, reads and stores."""
    from sigconv.backends.cuda1d import _pad32_words, tiled_geometry

    L, K = x.size, w.size
    g = tiled_geometry(K, B)
    R, S = g["R"], g["S"]
    words = _pad32_words(S)
    assert 4 * words == g["smem"]
    y = np.full(out_len, np.nan)
    T = B * R
    wpad = np.zeros(4 * -(-K // 4))
    wpad[:K] = w
    for n0 in range(0, out_len, T):
        gs = n0 - pad
        mis = (misalign + gs) % 4  # (addr/4 + start) & 3
        ga = gs - mis
        NV = (mis + S + 3) >> 2
        s = np.full(words, np.nan)
        for m in range(NV):
            gi = ga + 4 * m
            v = [x[i] if 0 <= i < L else 0.0 for i in range(gi, gi + 4)]
            q = 4 * m - mis
            if mis == 0:
                assert q < S and _pad32(q) + 3 < words
                s[_pad32(q):_pad32(q) + 4] = v
            else:
                for e in range(4):
                    if 0 <= q + e < S:
                        s[_pad32(q + e)] = v[e]
        for t in range(B):
            qb = t * R
            acc = np.zeros(R)
            if g["static"]:
                NW = (R + K - 1 + 3) // 4
                for p4 in range(NW):
                    q = qb + 4 * p4
                    assert q + 3 < S, "static read beyond S"
                    vv = s[_pad32(q):_pad32(q) + 4]
                    for e in range(4):
                        for r in range(R):
                            j = 4 * p4 + e - r
                            if 0 <= j < K:
                                acc[r] += w[j] * vv[e]
            else:
                win = list(np.concatenate([s[_pad32(qb + 4 * k):_pad32(qb + 4 * k) + 4] for k in range(R // 4)]))
                for j0 in range(0, K, 4):
                    q = qb + R + j0
                    assert q + 3 < S, "runtime read beyond S"
                    win = win[:R] + list(s[_pad32(q):_pad32(q) + 4])
                    for e in range(4):
                        for r in range(R):
                            acc[r] += wpad[j0 + e] * win[r + e]
                    win = win[4:]
            n = n0 + qb
            for r in range(R):
                if n + r < out_len:
                    y[n + r] = acc[r]
    return y


@pytest.mark.parametrize("K,L,B,mode,mis", [
    (7, 53, 32, "full", 0), (7, 53, 32, "same", 3), (25, 301, 32, "valid", 1), (3, 2, 32, "full", 2),
    (33, 90, 32, "same", 1), (40, 10, 32, "valid", 2), (257, 300, 32, "full", 3), (301, 700, 32, "same", 0),
])
def test_tiled_index_maths_emulated(K, L, B, mode, mis):
    rng = np.random.default_rng(K * 1000 + L)
    x, w = rng.standard_normal(L), rng.standard_normal(K)
    pad, out_len = window_1d(mode, L, K)
    y = _emulate_tiled(x, w, pad, out_len, B, mis)
    ref = cpu_backend.corr1d_direct(x[None], w, pad, out_len)[0]
    assert not np.isnan(y).any(), f"unwritten outputs at {np.flatnonzero(np.isnan(y))[:5]}"
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("K,L,mode", [(1, 5, "full"), (7, 3000, "same"), (300, 5000, "valid"), (1023, 20, "full"),
                                      (4095, 9000, "same"), (200, 150, "valid")])
def test_overlap_save_index_maths_emulated(K, L, mode):
    """gather -> rfft -> product (1/N folded in) -> unscaled irfft -> scatter, as launch_fft does."""
    from sigconv.backends.cuda1d import fft_size

    rng = np.random.default_rng(K + L)
    C = 2
    x, w = rng.standard_normal((C, L)), rng.standard_normal(K)
    pad, out_len = window_1d(mode, L, K)
    N = fft_size(K)
    M = N - K + 1
    nseg = -(-out_len // M)
    idx = np.arange(nseg)[:, None] * M - pad + np.arange(N)[None, :]  # x index of segs[b, i]
    ok = (idx >= 0) & (idx < L)
    segs = np.where(ok[None], x[:, np.clip(idx, 0, L - 1)], 0.0)  # (C, nseg, N)
    H = np.fft.rfft(w[::-1], N) / N
    Ys = np.fft.irfft(np.fft.rfft(segs, axis=-1) * H, N, axis=-1, norm="forward")
    n = np.arange(out_len)
    y = Ys[:, n // M, (K - 1) + n % M]
    ref = cpu_backend._window_from_full(np.stack([np.convolve(x[c], w[::-1]) for c in range(C)]), K, pad, out_len)
    np.testing.assert_allclose(y, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())
