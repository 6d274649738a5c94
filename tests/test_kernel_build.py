"""CPU-side checks of the CUDA sources and the cuda conv1d registry (run on CI, no GPU needed).

- every kernels/*.cu compiles for sm_90 and no kernel spills registers: built by NVRTC with CuPy's options, as the
  product builds them (the nvidia-cuda-nvrtc wheel of the test extras), else by nvcc where only it is found;
- the spectral gate's module (kernels/gate.cu) compiles every name expression its launcher uses, without spills;
- the numbers kernels and launchers share have one home (kernels/limits.cuh);
- every cuda conv1d variant is registered with a description and block sizes, without a GPU;
- a NumPy emulation of the tiled kernel's index maths;
- the overlap-save kernels' own source compiled for the host (g++, AddressSanitizer) and run block by block.
"""

from __future__ import annotations

import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from sigconv.registry import table as _registry
from sigconv.engine.ops import window_1d
from sigconv.backends import cpu as cpu_backend

KDIR = Path(__file__).resolve().parent.parent / "kernels"
CU_FILES = sorted(KDIR.glob("*.cu"))
NVCC = shutil.which("nvcc")


def _grid(cases, slow):
    """``cases`` as pytest parameters, those at the indices ``slow`` marked slow: the default run keeps one case
    of each feature, --runslow runs the whole grid."""
    return [pytest.param(*c, marks=pytest.mark.slow) if i in slow else c for i, c in enumerate(cases)]



def _tools():
    """tools/prebuild_kernels.py as a module: the one reading of ptxas's report, and its NVRTC."""
    sys.path.insert(0, str(KDIR.parent / "tools"))
    try:
        import prebuild_kernels
    finally:
        sys.path.pop(0)
    return prebuild_kernels


def _find_nvrtc():
    """The NVRTC the pre-build uses (the nvidia-cuda-nvrtc wheel of the test extras, $CUDA_HOME's), or None."""
    pk = _tools()
    try:
        return pk.NVRTC(pk.find_nvrtc(None))
    except (SystemExit, OSError):
        return None


NVRTC = _find_nvrtc()
#: The compiler of the build checks: NVRTC with the options CuPy adds, the compiler and the code the product runs
#: (nvcc's code differs: a build nvcc compiled without spills spilled 8 bytes under NVRTC), else nvcc.
COMPILER = "NVRTC" if NVRTC is not None else "nvcc" if NVCC is not None else None
needs_compiler = pytest.mark.skipif(
    COMPILER is None, reason="neither NVRTC (pip install nvidia-cuda-nvrtc) nor nvcc found: kernel build check skipped")


def _sm90(src, defines=None, exprs=(), maxrreg: int | None = None) -> str:
    """ptxas's report (-v) of ``src`` (a kernels/ path, or source text whose includes are in kernels/) built for sm_90
    with ``defines`` ({name: value}) and ``maxrreg`` (--maxrregcount), the template instantiations ``exprs`` (name
    expressions, as the launchers ask for them) compiled: by NVRTC with CuPy's added options where it is installed,
    else by nvcc with -ftz=true. A build that fails fails the test with the compiler's log."""
    text = src.read_text() if isinstance(src, Path) else src
    flags = [f"-D{k}={v}" for k, v in (defines or {}).items()]
    if maxrreg:
        flags.append(f"--maxrregcount={maxrreg}")
    if NVRTC is not None:
        from sigconv import _kernels

        log = []
        opts = _kernels.cupy_compile_options("90", ["--ptxas-options=-v", f"--include-path={KDIR}", *flags])
        NVRTC.compile(text, opts, tuple(exprs), log)
        return log[0]
    if exprs:  # (referenced from a host function, so that nvcc emits them)
        refs = ", ".join(f"(void*)&{e}" for e in exprs)
        text += f"\nvoid* sc_build_refs(int k) {{\n    static void* const r[] = {{{refs}}};\n    return r[k];\n}}\n"
    with tempfile.TemporaryDirectory() as d:
        cu = Path(d) / (src.name if isinstance(src, Path) else "build.cu")
        cu.write_text(text)
        cmd = [NVCC, "-std=c++17", "-arch=sm_90", "-cubin", "-ftz=true", "-Xptxas", "-v", f"-I{KDIR}", *flags,
               "-o", "/dev/null", str(cu)]
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, f"nvcc failed:\n{res.stderr[-4000:]}"
    return res.stderr + res.stdout


def _spill_report(text: str) -> dict:
    """{function: (spill store bytes, spill load bytes)} from ptxas -v output (tools/prebuild_kernels.py's reading,
    which refuses a pre-built module that spills)."""
    return _tools().ptxas_report(text)


@needs_compiler
@pytest.mark.parametrize("cu", CU_FILES, ids=[p.name for p in CU_FILES])
def test_kernel_compiles_without_spills(cu):
    """Each kernels/*.cu with the instantiations the launchers ask for most (SIGCONV_NVCC_CHECK; gate.cu: its
    launcher's name expressions, the test below) builds for sm_90 with no spills."""
    from sigconv.backends import cuda_gate

    if cu.name == cuda_gate.SOURCE:
        report = _spill_report(_sm90(cu, exprs=cuda_gate.GATE_EXPRESSIONS))
    else:
        report = _spill_report(_sm90(cu, {"SIGCONV_NVCC_CHECK": 1}))
    assert report, f"ptxas reported no entry functions for {cu.name}"
    spilled = {f: s for f, s in report.items() if s != (0, 0)}
    assert not spilled, f"register spills in {cu.name} ({COMPILER}): {spilled}"
    if cu.name == "conv1d.cu":
        tiled = [f for f in report if "conv1d_tiled" in f]
        assert any("conv1d_tiled_rt" in f for f in tiled) and len(tiled) >= 5, \
            f"tiled kernels were not instantiated (SIGCONV_NVCC_CHECK): {sorted(report)}"
        wide = [f for f in report if re.search(r"conv1d_fft_fusedILi15ELb1ELb[01]ELb1E", f)]
        assert len(wide) == 2, f"the 32768 tile on 512 threads was not instantiated, both ways: {sorted(report)}"
    if cu.name == "conv1d_ffa.cu":  # the three thread shapes (RQ 8, 4, 2), the longest filter
        ffa = [f for f in report if "conv1d_ffaI" in f]
        assert all(any(p in f for f in ffa) for p in ("Li8ELi256E", "Li4ELi512E", "Li2ELi1024E", "ILi32ELi4ELi512E")), \
            f"ffa kernels were not instantiated (SIGCONV_NVCC_CHECK): {sorted(report)}"


_MANGLED_ARGS = {"float": "f", "double": "d", "int": "i", "long long": "x"}


@needs_compiler
def test_gate_module_compiles_every_expression_without_spills():
    """The spectral gate's module as the launcher builds it: the expanded gate.cu with every name expression of
    cuda_gate.GATE_EXPRESSIONS compiled, each to its own entry function, none spilling; and the launcher launches
    exactly the stages those expressions cover."""
    from sigconv import _kernels
    from sigconv.backends import cuda_gate

    exprs = cuda_gate.GATE_EXPRESSIONS
    assert len(set(exprs)) == len(exprs) == 4 * len(cuda_gate._STAGES)
    launched = set(re.findall(r'_launch\("(\w+)"', Path(cuda_gate.__file__).read_text()))
    assert launched == set(cuda_gate._STAGES), f"launched {sorted(launched)}, compiled {cuda_gate._STAGES}"
    report = _spill_report(_sm90(_kernels.source(cuda_gate.SOURCE), exprs=exprs))
    want = set()
    for e in exprs:  # gate_power<float, long long> -> _Z10gate_powerIfxE...
        m = re.fullmatch(r"(\w+)<(float|double), (int|long long)>", e)
        assert m, f"unexpected name expression {e!r}"
        want.add(f"_Z{len(m.group(1))}{m.group(1)}I{_MANGLED_ARGS[m.group(2)]}{_MANGLED_ARGS[m.group(3)]}E")
    got = {(re.match(r"_Z\d+\w+?I[fd][ix]E", f) or re.match(".*", f)).group(0) for f in report}
    assert got == want and len(report) == len(exprs), f"entry functions {sorted(report)}, expected {sorted(want)}"
    spilled = {f: s for f, s in report.items() if s != (0, 0)}
    assert not spilled, f"register spills in gate.cu ({COMPILER}): {spilled}"


# The wrap/symm builds of strip and shfl, as the launcher compiles them (cuda2d._fused): held to the occupancy of
# the zero-fill build, with no spills in the kernel or in its edge functions (strip: one, the loader of the threads
# the chunk map does not serve; shfl: one, the strips whose rows reach beyond one period). (kernel, kH, kW, pad)
#: What strip's edge functions (the W % 4 != 0 and kernel-larger-than-the-image threads) may spill under the cap:
#: 9x9's symm build spills 56 bytes in the one for rows within a period (168 registers), 11x11's 8 bytes in the other
#: (240), and those builds ran at 0.98-1.02 x (9x9) and 1.01-1.03 x (11x11) the fill build on an H100 on 1024 x 1023
#: and 1025 x 65535. The kernel itself may not spill.
STRIP_EDGE_SPILL_BYTES = 56
EDGE_BUILDS = [("strip", 3, 3, 1), ("shfl", 3, 3, 1), ("strip", 5, 5, 2), ("shfl", 5, 5, 2), ("strip", 7, 7, 3),
               ("shfl", 7, 7, 3), ("strip", 9, 9, 4), ("strip", 11, 11, 5), ("strip", 15, 15, 7), ("shfl", 9, 9, 4)]
_EDGE_PARAMS = _grid(EDGE_BUILDS, {2, 4, 5, 6, 7, 8, 9})
_EDGE_PARAMS[1] = pytest.param(*EDGE_BUILDS[1], marks=[pytest.mark.slow, pytest.mark.xfail(strict=True, reason=(
    "shfl's __launch_bounds__(1024) for kernels of up to 12 taps takes precedence over --maxrregcount: its wrap/symm "
    "builds use 64 registers where the zero-fill build uses 52 (the cap is 56)"))])


@needs_compiler
@pytest.mark.parametrize("kernel,kH,kW,px", _EDGE_PARAMS, ids=[f"{c[0]}-{c[1]}x{c[2]}" for c in EDGE_BUILDS])
def test_boundary_builds_keep_occupancy_without_spills(kernel, kH, kW, px):
    from sigconv.backends import cuda2d

    if kernel == "strip":
        defines = dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-px) % 4)
    else:
        defines = dict(SHFL_KH=kH, SHFL_KW=kW, SHFL_PX=px)

    def build(boundary: int, cap: int | None = None) -> str:
        return _sm90(f'#include "conv2d_{kernel}.cuh"\n', {"C2D_BOUNDARY": boundary, **defines}, maxrreg=cap)

    def regs(text: str) -> int:
        return int(re.search(rf"Compiling entry function 'conv2d_{kernel}'.*?Used (\d+) registers", text,
                             re.S).group(1))

    fill = build(0)
    # strip's rotating builds go uncapped (cuda2d._fused)
    cap = cuda2d.occupancy_regs(regs(fill)) if kernel == "shfl" or cuda2d.strip_ring(kH, kW) else None
    with ThreadPoolExecutor(2) as pool:  # the two builds at once
        texts = list(pool.map(lambda code: build(code, cap), (1, 2)))
    for name, text in zip(("wrap", "symm"), texts):
        report = _spill_report(text)
        edge = [f for f in report if f"{kernel}_edge" in f or f"{kernel}_far" in f]
        assert edge, \
            f"{name}: the edge loaders were not compiled apart: {sorted(report)}"
        if cap:
            assert regs(text) <= cap, f"{kernel} {kH}x{kW} {name}: {regs(text)} registers, above the cap of {cap}"
        spilled = {f: s for f, s in report.items() if s != (0, 0)
                   and not (kernel == "strip" and f in edge and max(s) <= STRIP_EDGE_SPILL_BYTES)}
        assert not spilled, f"{kernel} {kH}x{kW} {name} spills under --maxrregcount={cap}: {spilled}"


def _demangled_name(symbol: str) -> str:
    """The function name of a mangled template instance (_Z12conv2d_naiveIfEv... -> conv2d_naive); others as they
    are."""
    m = re.match(r"_Z(\d+)", symbol)
    return symbol[m.end():m.end() + int(m.group(1))] if m else symbol


@needs_compiler
def test_conv2d_parts_compile_their_kernels_alone():
    """A build of one C2D_PART of conv2d.cu (what cuda2d asks for: _PARTS for the fused kernels, GENERIC for the
    templates), from the source as the launcher expands it, compiles that part's entry functions and no others."""
    from sigconv import _kernels
    from sigconv.backends import cuda2d

    c = cuda2d._CODES
    parts = {
        c["SIGCONV_C2D_PART_TILED"]: ({"conv2d_tiled"}, cuda2d.tiled_plan((16, 8), 5, 5, (1, 1), 2, 1, True)["defines"]),
        c["SIGCONV_C2D_PART_STRIP"]: ({"conv2d_strip"}, dict(STRIP_KH=5, STRIP_KW=4, STRIP_SH=2)),
        c["SIGCONV_C2D_PART_SHFL"]: ({"conv2d_shfl"}, dict(SHFL_KH=5, SHFL_KW=4, SHFL_PX=2)),
        c["SIGCONV_C2D_PART_GENERIC"]: ({"conv2d_naive", "conv2d_naive_ext", "conv2d_shared", "conv2d_sep_rows",
                                         "conv2d_sep_rows_ext", "conv2d_sep_cols", "conv2d_extend"}, {}),
        c["SIGCONV_C2D_PART_IGEMM"]: ({"conv2d_igemm", "conv2d_igemm_wt"},
                                      {k: v for k, v in cuda2d.igemm_plan((16, 16), 3, 3, (1, 1), False)["defines"].items()
                                       if k != "C2D_PART"}),
    }
    assert set(cuda2d._PARTS.values()) | {c["SIGCONV_C2D_PART_GENERIC"], c["SIGCONV_C2D_PART_IGEMM"]} == set(parts)

    src = _kernels.source("conv2d.cu")  # (the text NVRTC compiles: headers inlined once each)

    def entries(part: int) -> set:
        _, defines = parts[part]
        text = _sm90(src, {"C2D_PART": part, **defines})
        return {_demangled_name(n) for n in re.findall(r"Compiling entry function '(\w+)'", text)}

    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(parts, pool.map(entries, parts)))
    for part, (want, _) in parts.items():
        assert got[part] == want, f"part {part}: compiled {sorted(got[part])}, expected {sorted(want)}"


# The implicit GEMM's builds as the launcher plans them (cuda2d.igemm_plan): the thread tile shrinks with the block so
# that the accumulators fit a large block's share of the registers (64 each at 1024 threads); a build that spills
# under the bound of two 256-thread blocks per multiprocessor is rebuilt without it (cuda2d._igemm_module), and that one
# spills nothing. The default run checks a few plans, --runslow every distinct one (144 builds).
# (tf32, block, kH, kW, boundary)
IGEMM_BUILDS = [(False, (16, 16), 3, 3, 0), (False, (32, 16), 3, 3, 0), (False, (32, 32), 6, 6, 0),
                (True, (32, 8), 3, 3, 0), (True, (32, 16), 3, 3, 0), (True, (32, 32), 3, 3, 0),
                (False, (16, 6), 5, 5, 1), (True, (32, 3), 3, 3, 2), (False, (8, 8), 3, 3, 0)]


def _igemm_build_regs(defines: dict, boundary: int = 0) -> tuple:
    """(spilled bytes, registers) of conv2d_igemm built with ``defines``."""
    text = _sm90(KDIR / "conv2d.cu", {"C2D_BOUNDARY": boundary, **defines})
    m = re.search(r"Compiling entry function 'conv2d_igemm'.*?(\d+) bytes spill stores.*?Used (\d+) registers", text,
                  re.S)
    return int(m.group(1)), int(m.group(2))


def _check_igemm_plan(defines: dict, threads: int, boundary: int = 0) -> None:
    from sigconv.backends import cuda2d

    spill, regs = _igemm_build_regs(defines, boundary)
    if spill:  # the launcher's fallback
        spill, regs = _igemm_build_regs({**defines, "IG_MINB": 1}, boundary)
    assert spill == 0, f"conv2d_igemm spills {spill} bytes with {defines}"
    assert regs <= cuda2d.block_reg_cap(threads), f"{regs} registers: a block of {threads} threads cannot launch"


@needs_compiler
@pytest.mark.parametrize("tf32,block,kH,kW,boundary", _grid(IGEMM_BUILDS, {1, 4, 5, 6, 7, 8}),
                         ids=[f"{'tf32' if c[0] else 'f32'}-{c[1][0]}x{c[1][1]}-{c[2]}x{c[3]}-b{c[4]}"
                              for c in IGEMM_BUILDS])
def test_igemm_builds_compile_without_spills(tf32, block, kH, kW, boundary):
    from sigconv.backends import cuda2d

    defines = dict(cuda2d.igemm_plan(block, kH, kW, (1, 1), tf32)["defines"])
    if boundary == 0 and cuda2d.igemm_masked(kH, kW, "fill"):
        defines["IG_MASK"] = 1  # (as the launcher builds it)
    _check_igemm_plan(defines, block[0] * block[1], boundary)


@needs_compiler
@pytest.mark.slow
def test_every_igemm_plan_compiles_without_spills():
    from sigconv.backends import cuda2d

    plans = {}
    for n in range(32, 1025, 32):
        for bx in (d for d in range(1, n + 1) if n % d == 0):
            for tf32 in (False, True):
                d = {**cuda2d.igemm_plan((bx, n // bx), 3, 3, (1, 1), tf32)["defines"], "IG_MASK": 1}
                plans[tuple(sorted(d.items()))] = (d, n)
    with ThreadPoolExecutor(os.cpu_count() or 2) as pool:
        list(pool.map(lambda dn: _check_igemm_plan(*dn), plans.values()))


# regblock/prefetch (conv2d_tiled) wrap/symm builds as the launcher compiles them: --maxrregcount at the zero-fill
# build's occupancy, which holds only because those builds carry no __launch_bounds__ (its limit wins over the
# option: uncapped, prefetch 16x8 with 9x9 on 1025 x 65535 took 102 registers against 86, 4 blocks per SM instead
# of 5, and 1.29 x the zero-fill time under wrap on an H200). (variant, block, kH, kW, pad)
TILED_EDGE_BUILDS = [("prefetch", (16, 8), 9, 9, 4), ("regblock", (16, 8), 7, 7, 3), ("regblock", (32, 8), 5, 5, 2)]
#: What a capped build may spill, by (variant, kH, boundary): NVRTC's wrap build of prefetch 16x8 with 9x9 stores
#: and loads 4 bytes under the cap of 88 registers (and of 96; none from 104, where a multiprocessor holds 4 blocks of
#: 128 threads instead of 5); nvcc's spilled none. The capped wrap build (88 registers, 5 blocks) measured 564 us
#: against the zero-fill build's 575 (H200, 2026-12-03: benchmarks/results/H200-2026-12-03-one-launch/
#: ncu-H200-prefetch-k9odd-after.txt; that run recorded no spill counts).
TILED_EDGE_SPILL_BYTES = {("prefetch", 9, "wrap"): 4}


@needs_compiler
@pytest.mark.slow  # nine builds of conv2d_tiled (about 10 s on two cores); the fused kernels' check runs by default
@pytest.mark.parametrize("variant,block,kH,kW,px", TILED_EDGE_BUILDS,
                         ids=[f"{c[0]}-{c[2]}x{c[3]}" for c in TILED_EDGE_BUILDS])
def test_tiled_boundary_builds_hold_the_fill_builds_occupancy(variant, block, kH, kW, px):
    from sigconv.backends import cuda2d

    defines = cuda2d.tiled_plan(block, kH, kW, (1, 1), px, 1, variant == "prefetch")["defines"]

    def regs(boundary: int, cap: int | None = None) -> int:
        text = _sm90(KDIR / "conv2d.cu", {"C2D_BOUNDARY": boundary, "C2D_PART": cuda2d._PARTS["conv2d_tiled"],
                                          **defines}, maxrreg=cap)
        spills = _spill_report(text).get("conv2d_tiled")
        name = next((n for n, code in cuda2d.BOUNDARIES.items() if code == boundary), str(boundary))
        allowed = TILED_EDGE_SPILL_BYTES.get((variant, kH, name), 0) if COMPILER == "NVRTC" else 0
        assert spills is not None and max(spills) <= allowed, \
            f"conv2d_tiled spills (boundary {name}, cap {cap}): {spills}, {allowed} bytes allowed"
        return int(re.search(r"Compiling entry function 'conv2d_tiled'.*?Used (\d+) registers", text,
                             re.S).group(1))

    cap = cuda2d.occupancy_regs(regs(0))
    with ThreadPoolExecutor(2) as pool:  # the two builds at once
        used = list(pool.map(lambda code: regs(code, cap), (cuda2d.BOUNDARIES["wrap"], cuda2d.BOUNDARIES["symm"])))
    assert all(u <= cap for u in used), (used, cap)


def test_conv1d_cu_exists():
    assert (KDIR / "conv1d.cu").is_file() and (KDIR / "common.cuh").is_file()


def test_shared_numbers_have_one_home():
    """Every number the launchers read from kernels/limits.cuh is defined there only, and they use it."""
    from sigconv import _kernels
    from sigconv.backends import cuda1d, cuda2d

    lim = _kernels.constants()
    assert lim and all(isinstance(v, int) for v in lim.values())
    for f in (p for p in KDIR.iterdir() if p.is_file()):
        if f.name != _kernels.LIMITS:
            again = [n for n in lim if re.search(rf"#\s*define\s+{n}\b", f.read_text())]
            assert not again, f"{f.name} defines {again} again"
    assert cuda1d.CONST_TAPS == {"float32": 2 * lim["SIGCONV_CONST_TAP_DOUBLES"],
                                 "float64": lim["SIGCONV_CONST_TAP_DOUBLES"]}
    assert cuda1d.SHARED_KCH == {"float32": lim["SIGCONV_SHARED_KCH_F32"], "float64": lim["SIGCONV_SHARED_KCH_F64"]}
    assert (cuda2d.STRIP_ROWS, cuda2d.SHFL_ROWS, cuda2d.SHFL_HALO) == (
        lim["SIGCONV_STRIP_ROWS"], lim["SIGCONV_SHFL_ROWS"], lim["SIGCONV_SHFL_MAX_HALO"])


EXPECTED = ("naive", "constant", "shared", "l2", "tiled", "ffa", "fft")


def test_cuda_conv1d_variants_registered_without_gpu():
    from sigconv.backends import cuda1d, overlap_save

    vs = {v.name: v for v in _registry.entries("conv1d", "cuda", kind="variant")}
    assert set(EXPECTED) <= set(vs), f"missing variants: {set(EXPECTED) - set(vs)}"
    for name in EXPECTED:
        v = vs[name]
        assert v.description and len(v.description.splitlines()) == 1
        assert v.blocks and set(v.blocks) <= set(_registry.BLOCKS_1D) and v.default_block in v.blocks
        assert "gpu" in v.requires and v.source == ("conv1d_ffa.cu" if name == "ffa" else "conv1d.cu")
        assert v.run is getattr(overlap_save if name == "fft" else cuda1d, f"launch_{name}")
    from sigconv._core import devices as _devices

    listed = {d["name"]: d for d in __import__("sigconv").variants("conv1d") if d["backend"] == "cuda"}
    reason = _devices.cuda_reason()
    for name in EXPECTED:
        assert listed[name]["available"] == (reason is None)
        if reason:
            assert listed[name]["reason"]


def test_import_sigconv_does_not_import_cupy():
    code = ("import sys, sigconv, sigconv.backends, sigconv.registry.tune, sigconv.engine.gpu_file, sigconv.cli.tune; "
            "print('cupy' in sys.modules or 'torch' in sys.modules)")
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
def test_tiled_index_maths_emulated(K, L, B, mode, mis, rng):
    x, w = rng.standard_normal(L), rng.standard_normal(K)
    pad, out_len = window_1d(mode, L, K)
    y = _emulate_tiled(x, w, pad, out_len, B, mis)
    ref = cpu_backend.corr1d_direct(x[None], w, pad, out_len)[0]
    assert not np.isnan(y).any(), f"unwritten outputs at {np.flatnonzero(np.isnan(y))[:5]}"
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10)


# --------------------------------------------- the overlap-save kernels' own source, run on the host (g++)
# tests/host_emulation/os_harness.cpp compiles kernels/overlap_save.cuh (the bodies the GPU runs) as host C++
# under AddressSanitizer and runs every block and thread of a launch, with the grid that the launcher
# (sigconv.backends.overlap_save.os_grid) computes. This checks the kernels' index maths, their grid-stride loops,
# the 16-byte alignment of their vector stores and their bounds, on CI, without a GPU.

CXX = shutil.which("g++") or shutil.which("c++")
EMU = Path(__file__).resolve().parent / "host_emulation"
NICE = shutil.which("nice")


def _build_key(harness: str, defines: dict | None = None, std: str = "c++17") -> tuple:
    return harness, std, tuple(sorted((defines or {}).items()))


class _HostBuilds:
    """Host builds of the emulation harnesses (tests/host_emulation/<harness> with kernels/ on the include path,
    under AddressSanitizer and UBSan where the compiler has them), memoised. The builds that the session's
    selected tests need start in the background as soon as those tests are known (``prefetch``, from
    conftest's pytest_collection_finish), at low priority on the spare cores, so the compiler runs while the
    earlier test modules do; a test waits only for the build it needs."""

    def __init__(self):
        self.futures: dict = {}
        self.pool = None
        self.root = None

    def _compile(self, key):
        """(exe, skip reason, error) of one build."""
        harness, std, defines = key
        exe = self.root / (Path(harness).stem + "".join(f"_{k}{v}" for k, v in defines))
        # -O0: the emulations run about as fast as at -O1 (threads and barriers dominate), and the builds take
        # a third of the compiler's time; at -O1 they kept the kernel tests waiting on two cores
        base = [CXX, f"-std={std}", "-O0", "-g", f"-I{KDIR}", f"-I{EMU}", *(f"-D{k}={v}" for k, v in defines),
                "-o", str(exe), str(EMU / harness), "-pthread"]
        nice = [NICE, "-n", "10"] if NICE else []  # not preexec_fn: these run in threads
        res = subprocess.run(nice + base[:1] + ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"] + base[1:],
                             capture_output=True, text=True, timeout=600)
        if res.returncode != 0:  # a compiler without the sanitizer runtimes: still run, unsanitized
            res = subprocess.run(nice + base, capture_output=True, text=True, timeout=600)
        if res.returncode != 0 and "barrier" in res.stderr:
            return None, "the C++ compiler lacks C++20 <barrier>: threaded host emulation skipped", None
        if res.returncode != 0:
            return None, None, f"host build of {harness} failed:\n{res.stderr[-4000:]}"
        return exe, None, None

    def submit(self, key):
        if key not in self.futures:
            if self.pool is None:
                self.root = Path(tempfile.mkdtemp(prefix="sigconv-emu-"))
                atexit.register(shutil.rmtree, self.root, True)
                self.pool = ThreadPoolExecutor(max(1, (os.cpu_count() or 2) - 1))
            self.futures[key] = self.pool.submit(self._compile, key)
        return self.futures[key]

    def get(self, harness: str, defines: dict | None = None, std: str = "c++17") -> Path:
        if CXX is None:
            pytest.skip("no C++ compiler (g++/c++) on PATH: host emulation of the kernels skipped")
        exe, skip, error = self.submit(_build_key(harness, defines, std)).result()
        if skip:
            pytest.skip(skip)
        assert error is None, error
        return exe


_BUILDS = _HostBuilds()


def prefetch(items) -> None:
    """Start the host builds that the selected, not skipped ``items`` of this module will ask for."""
    if CXX is None:
        return
    for item in items:
        if item.get_closest_marker("skip") is not None or not hasattr(item, "callspec"):
            continue
        key = _KEYS.get(item.originalname)
        if key is not None:
            _BUILDS.submit(key(**item.callspec.params))


@pytest.fixture(scope="session")
def host_build():
    """build(harness, defines=None, std="c++17") -> path of the harness compiled for the host (see _HostBuilds)."""
    return _BUILDS.get


def _channel_errors(y, ref) -> list:
    """The relative error of each channel (rows of y against the float64 rows of ref), with each row first divided by
    its peak: norms of 2^120 (2^1000) values would overflow float32 (float64)."""
    errs = []
    for c in range(ref.shape[0]):
        s = max(float(np.abs(ref[c]).max()), np.finfo(np.float64).tiny)
        errs.append(np.linalg.norm((y[c] - ref[c]) / s) / max(np.linalg.norm(ref[c] / s), 1e-300))
    return errs


def _emu_run(cmd: list, what: str) -> str:
    """Run an emulation harness; any sanitizer report, misalignment or bad argument fails the test. Returns what it
    printed."""
    res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=600,
                         env={"ASAN_OPTIONS": "detect_leaks=0", "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, f"{what} failed under emulation (rc {res.returncode}):\n{res.stderr[-3000:]}"
    return res.stdout


@pytest.fixture(scope="module")
def os_harness(host_build):
    return host_build(*_OS_BUILD)


def _emu(exe, tmp, op, dtype, grid, block, params, a_in, a_inout):
    """Run one harness op: ``a_in`` an input array or a list of them (None for a null pointer), ``a_inout``
    rewritten by the launch and returned."""
    ins = []
    for k, a in enumerate(a_in if isinstance(a_in, list) else [a_in]):
        if a is None:
            ins.append("-")
            continue
        ins.append(tmp / f"{op}_in{k}.bin")
        np.ascontiguousarray(a).tofile(ins[-1])
    fio = tmp / f"{op}_io.bin"
    a_inout.tofile(fio)
    _emu_run([exe, op, "f32" if dtype == np.float32 else "f64", *grid, block, *params, *ins, fio], op)
    return np.fromfile(fio, dtype=a_inout.dtype).reshape(a_inout.shape)


def _os_reference_geometry(K, L, mode):
    from sigconv.backends.overlap_save import fft_size

    pad, out_len = window_1d(mode, L, K)
    N = fft_size(K)
    M = N - K + 1
    return pad, out_len, N, M, -(-out_len // M)


def _first_bad(a, ref, rtol):
    bad = ~np.isclose(a, ref, rtol=rtol, atol=rtol * max(1.0, float(np.abs(ref).max(initial=0))))
    return np.argwhere(bad | np.isnan(a))[:3].tolist()


# (K, L, mode, C, block, cap_y, cap_z): awkward lengths, every mode, blocks from 32 to 1024, 96 and 992 (for N = 1024
# a block of 1024 leaves 3/4 of the gather's threads idle), and caps of 1-3 that force the grid-stride loops.
OS_CASES = [
    (1, 1, "full", 1, 256, None, None),
    (2, 7, "same", 2, 32, None, None),
    (7, 3001, "same", 3, 96, 2, 2),
    (25, 1000, "valid", 2, 1024, None, 1),
    (128, 5000, "full", 1, 64, 3, None),
    (300, 5000, "valid", 2, 992, None, None),
    (1023, 20, "full", 2, 256, 1, 1),
    (4095, 9000, "same", 1, 512, 2, None),
]


#: Channel magnitudes (powers of two) by dtype, cycled over channels: ordinary, beyond what an unscaled float
#: transform survives, and deep in the small numbers; the kernels' power-of-two scaling must keep all exact (the
#: last two lie outside FFT_SAFE_EXPONENT, so rescale and scatter scale them).
_OS_MAGNITUDES = {np.float32: (0, 120, -100), np.float64: (0, 1000, -1000)}
_NO_PEAK, _NONFINITE = np.iinfo(np.int32).min, np.iinfo(np.int32).max


def _segment_exponents(x, pad, M, N, nseg):
    """NumPy definition of the exponents gather notes: per (channel, segment) the largest frexp exponent of its
    samples, _NONFINITE when one is inf/NaN, _NO_PEAK when all are zero; and the segments themselves."""
    C, L = x.shape
    idx = np.arange(nseg)[:, None] * M - pad + np.arange(N)[None, :]
    ok = (idx >= 0) & (idx < L)
    win = np.where(ok[None], x[:, np.clip(idx, 0, L - 1)], 0)
    with np.errstate(invalid="ignore"):
        peak = np.abs(win).max(axis=-1)
    e = np.where(peak > 0, np.frexp(np.where(np.isfinite(peak), peak, 1))[1], _NO_PEAK)
    return np.where(np.isfinite(peak), e, _NONFINITE).astype(np.int32).reshape(C * nseg), win


def _effective(e, dtype):
    """The exponent each segment is scaled by (os_exponent): 0 inside +-FFT_SAFE_EXPONENT or for a special slot."""
    from sigconv._core.xp import FFT_SAFE_EXPONENT

    safe = FFT_SAFE_EXPONENT[np.dtype(dtype).name]
    return np.where((e == _NO_PEAK) | (e == _NONFINITE) | (np.abs(e) <= safe), 0, e)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize("K,L,mode,C,block,cap_y,cap_z", OS_CASES)
def test_overlap_save_kernels_run_on_host(os_harness, tmp_path, dtype, K, L, mode, C, block, cap_y, cap_z, rng):
    """gather -> rescale -> rfft (NumPy) -> cmul -> irfft (NumPy) -> scatter, the kernels being the real source:
    each stage equals its NumPy definition exactly (gather and its exponents, rescale, scatter: the power-of-two
    scaling is exact) or to rounding (cmul), every element is written (outputs poisoned with NaN), and the whole
    equals the float64 reference convolution per channel, for channels of ordinary, huge and tiny magnitude."""
    from sigconv._core.xp import FFT_SAFE_EXPONENT
    from sigconv.backends.overlap_save import os_grid

    caps = {k: v for k, v in (("cap_y", cap_y), ("cap_z", cap_z)) if v is not None}
    mags = _OS_MAGNITUDES[dtype]
    x = np.ldexp(rng.standard_normal((C, L)), np.array([mags[c % 3] for c in range(C)])[:, None]).astype(dtype)
    w = rng.standard_normal(K)
    pad, out_len, N, M, nseg = _os_reference_geometry(K, L, mode)
    cdt = np.complex64 if dtype == np.float32 else np.complex128
    rtol = 1e-5 if dtype == np.float32 else 1e-10

    # gather: segs[c, b, i] = x[c, b*M - pad + i], zero outside [0, L); shift[c, b] = its largest exponent
    shift = np.full(C * nseg, _NO_PEAK, np.int32)
    segs = _emu(os_harness, tmp_path, "gather", dtype, os_grid("gather", block, N=N, C=C, nseg=nseg, **caps), block,
                (C, L, pad, M, N, nseg), [x, shift], np.full((C, nseg, N), np.nan, dtype))
    shift = np.fromfile(tmp_path / "gather_in1.bin", np.int32)  # written back by the harness
    want_shift, win = _segment_exponents(x, pad, M, N, nseg)
    assert np.array_equal(shift, want_shift), f"exponents differ at {np.argwhere(shift != want_shift)[:3].tolist()}"
    assert np.array_equal(segs, win.astype(dtype)), f"gather differs at {np.argwhere(segs != win)[:3].tolist()}"
    e = _effective(shift, dtype).reshape(C, nseg)
    safe = FFT_SAFE_EXPONENT[np.dtype(dtype).name]
    assert (e != 0).any() == any(abs(mags[c % 3]) > safe for c in range(C))

    # rescale: the segments outside the safe range divided by 2^e[c, b], the others untouched
    segs = _emu(os_harness, tmp_path, "rescale", dtype, os_grid("rescale", block, N=N, C=C, nseg=nseg, **caps),
                block, (C, N, nseg, safe), shift, segs.copy())
    want = np.ldexp(win, -e[..., None]).astype(dtype)
    assert np.array_equal(segs, want), f"rescale differs at {np.argwhere(segs != want)[:3].tolist()}"

    # cmul: X[row, k] *= H[k], H of the taps divided by 2^tap_shift
    tap_shift = np.frexp(np.abs(w).max())[1]
    H = (np.fft.rfft(np.ldexp(w[::-1], -tap_shift), N) / N).astype(cdt)
    X0 = np.fft.rfft(segs.astype(np.float64), axis=-1).astype(cdt).reshape(C * nseg, N // 2 + 1)
    X = _emu(os_harness, tmp_path, "cmul", dtype, os_grid("cmul", block, N=N, rows=C * nseg, **caps), block,
             (C * nseg, N // 2 + 1), H, X0.copy())
    want = X0.astype(np.complex128) * H.astype(np.complex128)
    assert not np.isnan(X).any() and not _first_bad(X, want, rtol), _first_bad(X, want, rtol)

    # scatter: y[c, b*M + r] = Ys[c, b, K-1+r] * 2^(e[c, b] + tap_shift)
    Ys = np.fft.irfft(X.astype(np.complex128), N, axis=-1, norm="forward").astype(dtype).reshape(C, nseg, N)
    y = _emu(os_harness, tmp_path, "scatter", dtype, os_grid("scatter", block, N=N, C=C, nseg=nseg, M=M, **caps),
             block, (C, out_len, M, N, nseg, K, safe), [Ys, shift, np.array([tap_shift], np.int32)],
             np.full((C, out_len), np.nan, dtype))
    n = np.arange(out_len)
    want = np.ldexp(Ys[:, n // M, (K - 1) + n % M], e[:, n // M] + tap_shift).astype(dtype)
    assert np.array_equal(y, want), "scatter differs from its definition"

    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)
    for c, err in enumerate(_channel_errors(y, ref)):
        assert err <= (2e-5 if dtype == np.float32 else 1e-10), \
            f"overlap-save channel {c} (2^{mags[c % 3]}) off by {err:.2e} (K={K}, L={L})"


def test_overlap_save_exponents_of_zero_and_non_finite_segments(os_harness, tmp_path):
    """gather leaves an all-zero segment's exponent unset and marks one holding inf or NaN; rescale then leaves
    both as they are, and a null exponent pointer means no exponents and no scaling."""
    from sigconv._core.xp import FFT_SAFE_EXPONENT
    from sigconv.backends.overlap_save import os_grid

    K, L, mode, block = 7, 3001, "same", 64
    pad, out_len, N, M, nseg = _os_reference_geometry(K, L, mode)
    assert nseg >= 3
    x = np.zeros((1, L), np.float32)
    x[0, M + 5] = np.inf  # segment 1 (and 2, whose window reaches back K-1 samples, if it does)
    x[0, -1] = np.float32(3e-40)  # a subnormal in the last segment: outside the safe range, so rescaled
    shift = np.full(nseg, _NO_PEAK, np.int32)
    segs = _emu(os_harness, tmp_path, "gather", np.float32, os_grid("gather", block, N=N, nseg=nseg), block,
                (1, L, pad, M, N, nseg), [x, shift], np.full((1, nseg, N), np.nan, np.float32))
    shift = np.fromfile(tmp_path / "gather_in1.bin", np.int32)
    want, win = _segment_exponents(x, pad, M, N, nseg)
    assert np.array_equal(shift, want) and shift[0] == _NO_PEAK and shift[1] == _NONFINITE
    assert shift[-1] == np.frexp(np.float64(np.float32(3e-40)))[1]
    assert np.array_equal(segs, win.astype(np.float32))
    safe = FFT_SAFE_EXPONENT["float32"]
    scaled = _emu(os_harness, tmp_path, "rescale", np.float32, os_grid("rescale", block, N=N, nseg=nseg), block,
                  (1, N, nseg, safe), shift, segs.copy())
    assert np.array_equal(scaled[0, :-1], segs[0, :-1], equal_nan=True)
    assert scaled[0, -1].max() == np.ldexp(np.float32(3e-40), -int(shift[-1]))
    plain = _emu(os_harness, tmp_path, "gather", np.float32, os_grid("gather", block, N=N, nseg=nseg), block,
                 (1, L, pad, M, N, nseg), [x, None], np.full((1, nseg, N), np.nan, np.float32))
    assert np.array_equal(plain, segs)


def test_overlap_save_exponent_of_every_float32_magnitude(os_harness, tmp_path):
    """gather's segment exponent is frexp's for a peak in every binade of float32, each subnormal one included, at
    its bottom and its top, either sign (the kernels read it from the bits: under CuPy's -ftz=true, frexpf takes a
    subnormal for zero)."""
    from sigconv.backends.overlap_save import os_grid

    one = np.float32(1.0)
    low = [np.ldexp(one, k) for k in range(-149, 128)]
    high = [np.nextafter(np.ldexp(one, k), np.float32(0)) for k in range(-148, 128)] + [np.finfo(np.float32).max]
    vals = np.array([v if i % 2 else -v for i, v in enumerate(low + high)], np.float32)
    K, block = 1, 256
    _, _, N, M, _ = _os_reference_geometry(K, 1, "valid")
    L = len(vals) * M
    pad, out_len, N, M, nseg = _os_reference_geometry(K, L, "valid")
    assert nseg == len(vals) and M == N
    x = np.zeros((1, L), np.float32)
    x[0, np.arange(nseg) * M + 7] = vals  # (segment b's only sample)
    shift = np.full(nseg, _NO_PEAK, np.int32)
    _emu(os_harness, tmp_path, "gather", np.float32, os_grid("gather", block, N=N, nseg=nseg), block,
         (1, L, pad, M, N, nseg), [x, shift], np.full((1, nseg, N), np.nan, np.float32))
    shift = np.fromfile(tmp_path / "gather_in1.bin", np.int32)
    want = np.frexp(np.abs(vals).astype(np.float64))[1]
    bad = np.flatnonzero(shift != want)
    assert not bad.size, f"{bad.size} exponents differ, first {vals[bad[0]]!r}: {shift[bad[0]]} not {want[bad[0]]}"


def test_os_grid_caps_and_hardware_limits():
    from sigconv.backends.overlap_save import os_grid

    # 2^26 samples, K=1023: 9363 segments of M = 7170
    g = os_grid("gather", 256, N=8192, C=1, nseg=9363)
    assert g[0] == 8 and 1 <= g[1] <= 9363 and g[2] == 1 and g[0] * g[1] * g[2] <= 1 << 16
    g = os_grid("scatter", 256, N=8192, C=64, nseg=200_000, M=7170)
    assert g[0] == 29 and g[1] <= 65535 and g[2] == 64
    g = os_grid("cmul", 1024, N=1024, rows=10**7)
    assert g == (1, 65535, 1)
    g = os_grid("gather", 32, N=1024, C=100_000, nseg=1)
    assert g[2] == 65535 and g[1] == 1
    with pytest.raises(ValueError, match="unknown"):
        os_grid("gatherx", 256, N=1024)


# ------------------------------------------------- the strip kernel's own source, run on the host (g++)
# kernels/conv2d_strip.cuh compiled for the host with the defines launch_strip prepends, launched on the grid
# cuda2d.strip_grid computes; ASan catches out-of-bounds loads (the halo columns and rows), the shim refuses
# misaligned 16-byte loads and stores, and NaN-poisoned outputs catch unwritten elements.

_NP_MODE = {"fill": "constant", "wrap": "wrap", "symm": "symmetric"}


def _corr2d_ref(x, w, bias, pad, out_hw, boundary="fill", fill=0.0):
    """float64 y[n, r, c] = bias + sum_ij w[i, j] xe[n, r + i - py, c + j - px], xe the planes extended by
    ``boundary`` as numpy.pad does it (fill: the constant ``fill``; wrap; symm: numpy's "symmetric")."""
    N, H, W = x.shape
    kH, kW = w.shape
    (py, px), (Ho, Wo) = pad, out_hw
    widths = ((py, Ho + kH - 1 - H - py), (px, Wo + kW - 1 - W - px))  # negative: the window is cut inside
    kw = {"constant_values": fill} if boundary == "fill" else {}
    y = np.full((N, Ho, Wo), float(bias))
    for n in range(N):
        e = np.pad(x[n], [(max(a, 0), max(b, 0)) for a, b in widths], mode=_NP_MODE[boundary], **kw)
        e = e[max(-widths[0][0], 0):, max(-widths[1][0], 0):]
        for i in range(kH):
            for j in range(kW):
                y[n] += w[i, j] * e[i:i + Ho, j:j + Wo]
    return y


# (N, H, W, kH, kW, pad, out_hw or None for torch's, block, rows, bias, z cap): W % 4 == 0 (vector loads and
# stores) and not; even, odd, rectangular, 1x1 and 15x15 kernels (>= 11: the rotating-accumulator path);
# "full" (pads k-1, larger output) and "same"-like windows; several strips per column; planes beyond grid.z.
STRIP_CASES = [
    (1, 37, 64, 3, 3, (1, 1), None, (64, 1), 32, 0.0, None),
    (2, 33, 61, 3, 3, (1, 1), None, (32, 4), 8, 0.5, None),
    (1, 70, 20, 5, 5, (2, 2), None, (96, 1), 16, 0.0, None),
    (1, 9, 13, 4, 4, (1, 2), None, (32, 1), 32, 0.0, None),
    (1, 1, 1, 3, 7, (1, 3), None, (32, 1), 32, -1.0, None),
    (1, 5, 6, 12, 12, (11, 11), (16, 17), (32, 1), 4, 0.0, None),
    (3, 40, 36, 15, 15, (7, 7), None, (32, 4), 8, 0.0, 2),
    (1, 5, 9, 1, 1, (0, 0), None, (32, 8), 2, 0.0, None),
    (1, 12, 8, 3, 3, (2, 2), (14, 10), (224, 1), 32, 0.0, None),
]


def _single_channel_on_host(rng, exe, tmp, kernel, N, H, W, kH, kW, pad, out_hw, block, rows, bias, zcap,
                            boundary="fill", fill=0.0):
    """Run a single-channel stencil harness (strip or shfl, built for ``boundary``) on random data with the
    launcher's grid (cuda2d.strip_grid, grid.z optionally capped to force the plane loop) and check it against
    float64 over the extended image."""
    from sigconv.backends.cuda2d import strip_grid

    py, px = pad
    Ho, Wo = out_hw or (H + 2 * py - kH + 1, W + 2 * px - kW + 1)
    x = rng.standard_normal((N, H, W)).astype(np.float32)
    w = rng.standard_normal((kH, kW)).astype(np.float32)
    grid = list(strip_grid(N, Ho, Wo, block, rows=rows))
    if zcap:
        grid[2] = min(grid[2], zcap)
    files = [tmp / n for n in ("x.bin", "w.bin", "b.bin", "y.bin")]
    for f, a in zip(files, (x, w, np.array([bias], np.float32), np.full((N, Ho, Wo), np.nan, np.float32))):
        a.tofile(f)
    vec_in, vec_out = int(W % 4 == 0), int(Wo % 4 == 0)  # the launchers' rule (buffers are aligned here)
    pads = (py, px) if kernel == "strip" else (py,)  # conv2d_shfl has px compiled in
    _emu_run([exe, *grid, *block, N, H, W, *pads, Ho, Wo, int(bias != 0), vec_in, vec_out, repr(fill), *files],
             f"conv2d_{kernel}")
    y = np.fromfile(files[3], dtype=np.float32).reshape(N, Ho, Wo)
    assert not np.isnan(y).any(), f"unwritten outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    ref = _corr2d_ref(x.astype(np.float64), w.astype(np.float64), bias, pad, (Ho, Wo), boundary, fill)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= 1e-5, f"{kernel} {boundary} fill={fill} off by {err:.2e}; first mismatch at " \
                        f"{np.argwhere(~np.isclose(y, ref, rtol=1e-4, atol=1e-4))[:3].tolist()}"


@pytest.mark.parametrize("N,H,W,kH,kW,pad,out_hw,block,rows,bias,zcap", STRIP_CASES)
def test_strip_kernel_runs_on_host(host_build, tmp_path, N, H, W, kH, kW, pad, out_hw, block, rows, bias, zcap, rng):
    exe = host_build(*_strip_build(kH=kH, kW=kW, pad=pad, rows=rows))
    _single_channel_on_host(rng, exe, tmp_path, "strip", N, H, W, kH, kW, pad, out_hw, block, rows, bias, zcap)


# ------------------------------------- the direct 1-D kernels' own source, run on the host (threads + barriers)
# tests/host_emulation/conv1d_harness.cpp compiles kernels/conv1d.cu itself for the host: each block runs as
# blockDim OS threads meeting at a barrier for every __syncthreads, shared memory starts as NaN for every
# block and is poisoned past the launch's requested size, __constant__ taps past the upload are NaN, x may
# start off a 16-byte boundary, and AddressSanitizer guards every global array. The launch (grid, shared
# memory, taps) is cuda1d.launch_config's, as on the GPU.


@pytest.fixture(scope="module")
def conv1d_harness(host_build):
    return host_build(*_CONV1D_BUILD)


def _run_conv1d_emu(exe, tmp, variant, dtype, x, w, pad, out_len, block, xoff):
    from sigconv.backends.cuda1d import launch_config

    C, L = x.shape
    K = w.size
    cfg = launch_config(variant, dtype, C, K, out_len, block)
    name = variant
    if variant == "tiled":
        name = ("tiled" if cfg["static"] else "tiled_rt") + str(cfg["R"])
    files = [tmp / n for n in ("x.bin", "w.bin", "y.bin")]
    x.astype(dtype).tofile(files[0])
    w.astype(dtype).tofile(files[1])
    np.full((C, out_len), np.nan, dtype).tofile(files[2])
    _emu_run([exe, name, "f32" if dtype == np.float32 else "f64", *cfg["grid"][:2], block, cfg["smem"], cfg["taps"],
              C, L, K, pad, out_len, cfg.get("S", 0), xoff, *files], name)
    return np.fromfile(files[2], dtype=dtype).reshape(C, out_len)


# (variant, dtype, K, L, C, mode, block, xoff): every variant, odd/even K, K > L, several blocks per channel,
# channels over grid.y, both dtypes where the variant has them, x misaligned by 1-3 floats for tiled,
# tiled's static (K <= 64) and runtime (K > 64) kernels, R = 8 and 16, blocks of 32 to 1024 threads (powers of two
# and not).
C1D_CASES = [
    ("naive", np.float32, 7, 1000, 2, "same", 256, 0),
    ("naive", np.float64, 24, 5, 1, "full", 32, 0),
    ("constant", np.float32, 25, 777, 2, "valid", 160, 0),
    ("constant", np.float64, 2, 1, 3, "full", 64, 0),
    ("shared", np.float32, 63, 1000, 2, "same", 224, 0),
    ("shared", np.float64, 3000, 4100, 1, "full", 64, 0),  # K beyond one shared chunk of 1024 taps
    ("l2", np.float32, 255, 700, 2, "same", 64, 0),
    ("l2", np.float64, 7, 300, 1, "valid", 480, 0),
    ("tiled", np.float32, 1, 100, 1, "same", 32, 0),
    ("tiled", np.float32, 7, 5000, 2, "same", 256, 1),
    ("tiled", np.float32, 24, 3001, 1, "full", 96, 2),
    ("tiled", np.float32, 25, 4099, 2, "valid", 128, 3),
    ("tiled", np.float32, 33, 20, 1, "full", 32, 1),
    ("tiled", np.float32, 64, 2000, 1, "same", 1024, 0),
    ("tiled", np.float32, 255, 3000, 2, "same", 64, 3),
    ("tiled", np.float32, 1023, 600, 1, "full", 128, 2),
]


@pytest.mark.parametrize("variant,dtype,K,L,C,mode,block,xoff",
                         _grid(C1D_CASES, {1, 2, 4, 7, 8, 10, 11, 13, 14}),
                         ids=[f"{c[0]}-{np.dtype(c[1]).name}-K{c[2]}-L{c[3]}-C{c[4]}-{c[5]}-b{c[6]}-o{c[7]}"
                              for c in C1D_CASES])
def test_conv1d_kernels_run_on_host(conv1d_harness, tmp_path, variant, dtype, K, L, C, mode, block, xoff, rng):
    x, w = rng.standard_normal((C, L)), rng.standard_normal(K)
    pad, out_len = window_1d(mode, L, K)
    y = _run_conv1d_emu(conv1d_harness, tmp_path, variant, dtype, x, w, pad, out_len, block, xoff)
    assert not np.isnan(y).any(), f"unwritten or NaN outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    ref = cpu_backend.corr1d_direct(x.astype(dtype).astype(np.float64), w.astype(dtype).astype(np.float64), pad,
                                    out_len)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    tol = 1e-5 if dtype == np.float32 else 1e-10
    assert err <= tol, f"{variant} off by {err:.2e}; first mismatch at " \
                       f"{np.argwhere(~np.isclose(y, ref, rtol=10 * tol, atol=10 * tol))[:3].tolist()}"


# ------------------------------------------------- the fast FIR algorithm (conv1d_ffa.cu, ffa) on the host
# ffa_harness.cpp compiles kernels/conv1d_ffa.cu for the host with one instantiation conv1d_ffa<KQ, RQ, MAXT> and runs
# one launch of cuda1d.ffa_launches (its tap preparation kernel first); a job whose channel rows start at different
# 16-byte phases is one launch per class, each on the output the previous one wrote.

def _ffa_build(expr: str) -> tuple:
    kq, rq, maxt = map(int, re.fullmatch(r"conv1d_ffa<(\d+), (\d+), (\d+)>", expr).groups())
    return "ffa_harness.cpp", {"FFA_KQ": kq, "FFA_RQ": rq, "FFA_MAXT": maxt}, "c++20"


def _ffa_launches(K, L, C, mode, block, xoff):
    from sigconv.backends.cuda1d import ffa_launches

    pad, out_len = window_1d(mode, L, K)
    return ffa_launches(64 + xoff, C, L, K, pad, out_len, block), pad, out_len  # x: xoff floats past 256 bytes


# (K, L, C, mode, block, xoff): the benchmark's K = 63 'same' (shift 1, 16 taps a sub-filter) over many tiles per
# block, K = 64 on rows of odd length (three channel classes, shifts 2, 3, 0, sub-filters of 17 and 16 taps), K = 1,
# two classes (L = 2 mod 4), the longest filter (125 taps: 32 a sub-filter), K above L with blocks of 1024 and 992
# threads (8 outputs a thread), blocks of 512 and 3 warps, x misaligned by 1-3 floats: each thread shape (32, 16 and
# 8 outputs a thread).
FFA_CASES = [
    (63, 20000, 1, "same", 32, 0),
    (64, 2001, 3, "full", 96, 1),
    (1, 100, 1, "same", 32, 0),
    (7, 5000, 2, "valid", 64, 2),
    (125, 7000, 1, "full", 64, 3),
    (33, 20, 1, "full", 1024, 0),
    (25, 50000, 2, "same", 992, 1),
    (120, 90, 1, "same", 512, 0),
]


@pytest.mark.parametrize("K,L,C,mode,block,xoff", _grid(FFA_CASES, {2, 3, 5, 7}),
                         ids=[f"K{c[0]}-L{c[1]}-C{c[2]}-{c[3]}-b{c[4]}-o{c[5]}" for c in FFA_CASES])
def test_ffa_kernel_runs_on_host(host_build, tmp_path, K, L, C, mode, block, xoff, rng):
    launches, pad, out_len = _ffa_launches(K, L, C, mode, block, xoff)
    x, w = rng.standard_normal((C, L)).astype(np.float32), rng.standard_normal(K).astype(np.float32)
    files = [tmp_path / n for n in ("x.bin", "w.bin", "y.bin")]
    for f, a in zip(files, (x, w, np.full((C, out_len), np.nan, np.float32))):
        a.tofile(f)
    for g in launches:
        exe = host_build(*_ffa_build(g["expr"]))
        _emu_run([exe, *g["grid"], block, g["smem"], C, g["c0"], g["cstep"], L, K, g["shift"], g["start"], out_len,
                  g["S"], g["ntiles"], xoff, *files], g["expr"])
    y = np.fromfile(files[2], dtype=np.float32).reshape(C, out_len)
    assert not np.isnan(y).any(), f"unwritten or NaN outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w.astype(np.float64), pad, out_len)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= 1e-6, f"ffa off by {err:.2e}; first mismatch at " \
                        f"{np.argwhere(~np.isclose(y, ref, rtol=1e-4, atol=1e-4))[:3].tolist()}"


def test_ffa_launches_align_every_block_and_cover_every_channel():
    """Each class's shift puts every block's first input on a 16-byte boundary, the classes partition the channels,
    and the sub-filters hold the shifted filter (4 KQ >= K + shift > 4 KQ - 4)."""
    from sigconv.backends.cuda1d import ffa_geometry, ffa_launches

    for x_word, C, L, K, pad in [(64, 1, 1000, 63, 31), (65, 5, 2001, 64, 63), (66, 4, 50, 7, 0), (67, 3, 4096, 125, 3),
                                 (64, 9, 7, 1, 0)]:
        launches = ffa_launches(x_word, C, L, K, pad, 100000, 128)
        chans = sorted(c for g in launches for c in range(g["c0"], C, g["cstep"]))
        assert chans == list(range(C)), (x_word, C, L, chans)
        for g in launches:
            for c in range(g["c0"], C, g["cstep"]):
                for n0 in (0, g["outputs_per_block"], 7 * g["outputs_per_block"]):
                    assert (x_word + c * L + n0 + g["start"]) % 4 == 0, (x_word, C, L, K, pad, g)
            assert 4 * g["KQ"] - 4 < K + g["shift"] <= 4 * g["KQ"], g
            assert g["R"] == (32 if g["KQ"] <= 16 else 16), g
            assert g["grid"][0] * 4 >= g["ntiles"] > 4 * (g["grid"][0] - 1), g
    assert ffa_geometry(63, 256, 1)["R"] == 32 and ffa_geometry(63, 288, 1)["R"] == ffa_geometry(63, 512, 1)["R"] == 16
    assert ffa_geometry(63, 1024, 1)["R"] == ffa_geometry(63, 544, 1)["R"] == 8


# ---------------------------------------------- the fused overlap-save kernel (fft_fused.cuh) on the host
# fft_fused_harness.cpp compiles kernels/fft_fused.cuh for the host (threads and barriers as above, warp shuffles
# for the block's exponent reduction) and launches it with sigconv.backends.overlap_save.fused_plan's geometry;
# the table is the launcher's from host taps (fused_host_table: fused_table of the fft variant's spectrum, the taps
# reversed and divided by their peak's power of two, rfft / N, times that power of two where it is small).

def _fft_fused_on_host(exe, tmp, x, w, pad, out_len, block, xoff=0, device_spectrum=False, prev=None,
                       poison=False, flip=False, align=True, after=0, smem_extra=0, **caps):
    """``device_spectrum``: the coefficient table from the float32 taps by conv1d_fft_fused_spectrum (the launcher's
    path for taps without a host copy), else from the host's float64 spectrum (fused_host_table). ``prev`` (with
    ``device_spectrum``): taps the spectrum kernel runs on first, with the same table and record of its last taps
    (``flip``: with the other delay); ``poison``: the table refilled with NaN between the two runs. ``align``: the
    launcher's zero taps around the filter (fused_alignment) and its choice of the kernel that reads pairs of samples
    (fused_pairs: x starts xoff floats after a 256-byte boundary), else the taps as they are and float loads.
    ``after``: 1, the tile kernel launched as after the kernel that writes the table (programmatic dependent launch:
    the table and tap shift unreadable in a block until all its threads have called sc_grid_wait); 2, unreadable
    throughout (the control). ``smem_extra``: bytes of shared memory beyond the plan's (the longest tile's prefetch
    rows). The plan returned holds the bytes the tile kernel copied into shared memory (``cp_async``) and out of it by
    bulk copies (``bulk_store``)."""
    from sigconv._core.xp import FFT_SAFE_EXPONENT
    from sigconv.backends.overlap_save import fused_alignment, fused_host_table, fused_pairs, fused_plan, fused_twiddles

    C, L = x.shape
    K = w.size
    N = fused_plan(K, out_len, C, block, **caps)["N"]
    z, d = fused_alignment(K, pad, N) if align else (0, 0)
    pairs = align and fused_pairs(N, block, K + z + d, pad + z, L, xoff % 2 == 0)
    plan = fused_plan(K + z + d, out_len, C, block, **{**caps, "tile": N}, pairs=pairs)
    table, tap_shift = fused_host_table(np.concatenate([w, np.zeros(d)]), N)  # (the taps, d zeros after them)
    table.tofile(tmp / "G.bin")
    w.astype(np.float32).tofile(tmp / "w.bin")
    fused_twiddles(N).tofile(tmp / "tw.bin")
    tap_shift.astype(np.int32).tofile(tmp / "tap_shift.bin")
    x.astype(np.float32).tofile(tmp / "x.bin")
    np.full((C, out_len), np.nan, np.float32).tofile(tmp / "y.bin")
    spectrum = f"taps:{tmp / 'w.bin'}" if device_spectrum else tmp / "G.bin"
    if device_spectrum and prev is not None:
        np.asarray(prev, np.float32).tofile(tmp / "prev.bin")
        spectrum += f":{tmp / 'prev.bin'}" + (":poison" if poison else "") + (":flip" if flip else "")
    out = _emu_run([exe, plan["logn"], *plan["grid"], block, plan["smem"] + smem_extra, C, L, K + z + d, pad + z,
                    out_len, plan["ntiles"], FFT_SAFE_EXPONENT["float32"], xoff, tmp / "x.bin", spectrum,
                    tmp / "tw.bin", tmp / "tap_shift.bin", tmp / "y.bin", d, int(pairs), after], "conv1d_fft_fused")
    copied = int(re.search(r"cp\.async bytes (\d+)", out).group(1))
    stored = int(re.search(r"bulk store bytes (\d+)", out).group(1))
    return (np.fromfile(tmp / "y.bin", np.float32).reshape(C, out_len),
            {**plan, "z": z, "d": d, "pairs": pairs, "cp_async": copied, "bulk_store": stored})


# (K, L, mode, C, block, xoff, caps): every tile length (K of 1 to 8000: N = 1024 to 32768; 2047 taps on 32768 too,
# caps' "tile"), K above L, every mode,
# blocks of 32 to 1024 threads (96, 992: not powers of two), transforms in place (N/32 threads or more; 992 and 1024:
# threads past a pass's last butterfly) and through two buffers (300 taps at 128 threads, 4095 at 256: the longest
# tile's 139 KB), misaligned x, caps of 1-2 that force the grid-stride loops over tiles and channels, tiles wholly
# inside x (read without predicates: 63 taps, 1024 samples; 1023 taps, 8192) between a channel's first and last.
FFT_FUSED_CASES = [
    (1, 1, "full", 1, 32, 0, {}),
    (2, 7, "same", 2, 96, 1, {}),
    (63, 3001, "same", 3, 64, 3, {"cap_x": 2, "cap_y": 2}),
    (127, 3001, "same", 2, 64, 1, {}),
    (255, 5000, "full", 2, 992, 0, {}),
    (300, 5000, "valid", 3, 128, 2, {"cap_x": 1, "cap_y": 1}),
    (1023, 20, "full", 2, 256, 1, {}),
    (4095, 9000, "same", 3, 1024, 0, {}),
    (7921, 9000, "same", 1, 512, 1, {}),
    (4095, 5000, "valid", 1, 256, 0, {}),
    (7921, 40000, "same", 1, 1024, 1, {}),
    (1023, 30000, "same", 1, 256, 1, {}),
    (8000, 60000, "same", 2, 1024, 1, {}),
    (2047, 70000, "full", 1, 1024, 3, {"tile": 32768}),
]


@pytest.mark.parametrize("K,L,mode,C,block,xoff,caps", _grid(FFT_FUSED_CASES, {0, 1, 3, 5, 6, 10, 11, 12}),
                         ids=[f"K{c[0]}-L{c[1]}-{c[2]}-C{c[3]}-b{c[4]}-o{c[5]}"
                              + ("-capped" if "cap_x" in c[6] else "") + (f"-N{c[6]['tile']}" if "tile" in c[6] else "")
                              for c in FFT_FUSED_CASES])
def test_fft_fused_kernel_runs_on_host(host_build, tmp_path, K, L, mode, C, block, xoff, caps, rng):
    """Every output written and equal to the float64 reference convolution per channel, for channels of ordinary,
    huge (2^120: an unscaled float32 transform overflows) and tiny (2^-100) magnitude: the block's power-of-two
    scaling keeps them exact. (Taps of unit norm: the outputs of 2^120 stay within float32 for every K.)"""
    exe = host_build(*_FUSED_BUILD)
    mags = _OS_MAGNITUDES[np.float32]
    x = np.ldexp(rng.standard_normal((C, L)), np.array([mags[c % 3] for c in range(C)])[:, None]).astype(np.float32)
    w = rng.standard_normal(K) / np.sqrt(K)
    pad, out_len = window_1d(mode, L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, block, xoff, **caps)
    assert not np.isnan(y).any(), f"unwritten or NaN outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)
    for c, err in enumerate(_channel_errors(y, ref)):
        assert err <= 2e-6, f"channel {c} (2^{mags[c % 3]}) off by {err:.2e} (K={K}, N={plan['N']}, L={L})"


@pytest.mark.parametrize("K,L,mode,C,xoff,pairs", [(7921, 40000, "same", 1, 0, True), (8000, 60000, "same", 2, 0, True),
                                                   (2047, 70000, "full", 1, 0, True), (7921, 40001, "same", 1, 0, False),
                                                   (7921, 40000, "same", 1, 1, False)])
def test_fft_fused_pairs_kernel_on_host(host_build, tmp_path, K, L, mode, C, xoff, pairs, rng):
    """On the 32768 tile the launcher runs the kernel that reads a point's two samples as one 8-byte load where every
    tile starts on an 8-byte boundary (x aligned, L even; the zero taps make pad and the stride even: 8000 taps
    "same" get one before them), and the float loads where not (L odd, x one float off); outputs equal to the
    float64 reference either way. (The harness refuses a pairs launch whose tiles do not all start aligned.)"""
    exe = host_build(*_FUSED_BUILD)
    x = rng.standard_normal((C, L)).astype(np.float32)
    w = rng.standard_normal(K) / np.sqrt(K)
    pad, out_len = window_1d(mode, L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, 1024, xoff, tile=32768)
    assert plan["pairs"] == pairs and plan["N"] == 32768
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert not np.isnan(y).any() and err <= 2e-6, f"off by {err:.2e} (K={K}, L={L}, pairs {pairs})"


# (K, L, mode, C, xoff, pairs, ex, ew): the longest tile on 512 threads, two butterflies a thread (ff_tile_wide): 8-byte
# loads of a point's samples (x aligned, L even) and 16-byte ones of a thread's two points where a tile lies wholly
# inside x (60000 samples: the second tile of 7921 taps), float loads (L odd, x one float off), two channels, every
# mode; x of 2^ex (a second channel 2^120: the tile's scaling), taps of 2^ew (-130: outputs scaled by a power of two
# that is not a normal float); last tiles of 1, 2 and 3 outputs whose place in y is 16-byte aligned (3 V + 1 to 3 V + 3
# samples "same", V = 24848: fewer outputs than a 16-byte store's four), channel 1 of them at each alignment.
FFT_FUSED_WIDE_CASES = _grid([(7921, 60000, "same", 1, 0, True, 0, 0), (8000, 60000, "same", 2, 0, True, -100, 0),
                              (7921, 40001, "same", 1, 0, False, 0, -130), (7921, 40000, "full", 1, 1, False, 120, 0),
                              (2047, 70000, "valid", 1, 0, True, 0, 0), (7921, 74545, "same", 2, 0, False, 0, 0),
                              (7921, 74546, "same", 2, 0, True, 0, 0), (7921, 74547, "same", 2, 0, False, 0, 0)],
                             {6, 7})


@pytest.mark.parametrize("K,L,mode,C,xoff,pairs,ex,ew", FFT_FUSED_WIDE_CASES)
def test_fft_fused_wide_kernel_on_host(host_build, tmp_path, K, L, mode, C, xoff, pairs, ex, ew, rng):
    """The 32768 tile on 512 threads (conv1d_fft_fused<15, true, PAIRS, true>): every output written and equal to the
    float64 reference, with and without 8-byte loads, with 16-byte loads and stores where a tile lies inside x and y is
    aligned, on channels of ordinary, huge and tiny magnitude and taps whose outputs scale outside float32's normals."""
    exe = host_build(*_FUSED_BUILD)
    x = np.ldexp(rng.standard_normal((C, L)), np.array([ex, 120][:C])[:, None]).astype(np.float32)
    w = np.ldexp(rng.standard_normal(K) / np.sqrt(K), ew).astype(np.float32).astype(np.float64)
    pad, out_len = window_1d(mode, L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, 512, xoff, tile=32768)
    assert plan["pairs"] == pairs and plan["N"] == 32768 and plan["expr"].endswith(", true>")
    assert not np.isnan(y).any(), f"unwritten or NaN outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)
    for c, err in enumerate(_channel_errors(y, ref)):
        assert err <= 2e-6, f"channel {c} off by {err:.2e} (K={K}, L={L}, pairs {pairs})"


# (K, L, mode, C, gx, extra, xoff): the longest tile on a grid of gx blocks in one row, each walking several tiles of
# every channel as one sequence (item c * tiles + t), with `extra` bytes of shared memory past its buffer: an mbarrier
# and 11 rows of the next tile need 11 * 8192 + 16 (none with 16 fewer, or none at all). A block's next tile is
# prefetched where it lies wholly inside x, 16-byte aligned: not the first and last of a channel, and with x two
# floats off a 16-byte boundary (7922 taps: a stride V of 2 mod 4 floats) only every other tile.
_PREFETCH = 11 * 8192 + 16
FFT_FUSED_PREFETCH_CASES = [(7921, 180000, "same", 2, 3, _PREFETCH, 0), (7921, 150002, "full", 1, 2, _PREFETCH - 16, 0),
                            (7922, 160000, "same", 2, 5, _PREFETCH + 1000, 2), (7921, 120000, "valid", 1, 1, 0, 0),
                            (7921, 130000, "valid", 1, 1, _PREFETCH, 0)]


@pytest.mark.parametrize("K,L,mode,C,gx,extra,xoff", FFT_FUSED_PREFETCH_CASES)
def test_fft_fused_wide_kernel_prefetches_next_tiles_on_host(host_build, tmp_path, K, L, mode, C, gx, extra, xoff,
                                                              rng):
    """The 32768 tile's prefetch of a block's next tile into the shared memory past its buffer (ff_prefetch_on) and
    its outputs through one bulk copy a tile (ff_outputs_bulk, on a block of several tiles): every output equal to the
    float64 reference, exactly the rows of the tiles that qualify copied, and the 16-byte groups of outputs that lie
    on y's 16-byte boundaries stored by bulk copies where y and the tile's floats share their alignment."""
    exe = host_build(*_FUSED_BUILD)
    x = rng.standard_normal((C, L)).astype(np.float32)
    w = (rng.standard_normal(K) / np.sqrt(K)).astype(np.float32).astype(np.float64)
    pad, out_len = window_1d(mode, L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, 512, xoff, tile=32768, cap_x=gx, cap_y=1,
                                 smem_extra=extra)
    assert plan["pairs"] and plan["grid"] == (gx, 1) and plan["ntiles"] * C > 2 * gx
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)
    assert not np.isnan(y).any(), f"unwritten or NaN outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    for c, err in enumerate(_channel_errors(y, ref)):
        assert err <= 2e-6, f"channel {c} off by {err:.2e} (K={K}, L={L}, grid {gx}, {extra} bytes more)"
    nt, N, V, padp = plan["ntiles"], plan["N"], plan["V"], pad + plan["z"]
    qualify = {c * nt + t for c in range(C) for t in range(nt)
               if t * V - padp >= 0 and L - (t * V - padp) >= N and (xoff + c * L + t * V - padp) % 4 == 0}
    copies = sum(1 for i in range(C * nt) if i + gx < C * nt and i + gx in qualify)
    expect = copies * 11 * 8192 if extra >= _PREFETCH else 0
    assert plan["cp_async"] == expect, f"copied {plan['cp_async']} bytes, expected {expect}"
    assert copies > 0
    Kp = plan["N"] - V + 1
    stores = 0  # (y 256-byte aligned, channel c at c * out_len floats)
    for c in range(C):
        for t in range(nt):
            nv = min(V, out_len - t * V)
            a = -(c * out_len + t * V) % 4
            if (Kp - 1 + a) % 4 == 0 and nv - a >= 4:
                stores += 16 * ((nv - a) // 4)
    assert plan["bulk_store"] == stores and stores > 0, f"bulk stores {plan['bulk_store']}, expected {stores}"


@pytest.mark.parametrize("K,L,mode,C,block,xoff", [(4095, 9000, "same", 2, 512, 1), (2048, 7001, "same", 1, 256, 0),
                                                   (7921, 20000, "full", 1, 1024, 0), (255, 3000, "valid", 3, 128, 2)])
def test_fft_fused_kernel_runs_its_taps_as_given_on_host(host_build, tmp_path, K, L, mode, C, block, xoff, rng):
    """The tile kernel with the taps as they are (no zero taps around them: tiles that start on odd samples and odd
    strides), as the launcher runs it where fused_alignment adds none: outputs equal to the float64 reference."""
    exe = host_build(*_FUSED_BUILD)
    x = rng.standard_normal((C, L)).astype(np.float32)
    w = rng.standard_normal(K) / np.sqrt(K)
    pad, out_len = window_1d(mode, L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, block, xoff, align=False)
    assert plan["z"] == plan["d"] == 0 and not np.isnan(y).any()
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= 2e-6, f"off by {err:.2e} (K={K}, N={plan['N']}, L={L})"


@pytest.mark.parametrize("K,scale", [(1, 0), (127, 100), (255, 0), (1023, -130), (4095, 0), (4095, -130), (5000, -3),
                                     (7921, 3), (8192, 0)])
def test_fft_fused_spectrum_kernel_on_host(host_build, tmp_path, K, scale, rng):
    """conv1d_fft_fused_spectrum (the spectrum from taps on the device, in float32) feeds the tile kernel as the
    host's float64 spectrum does: outputs equal to the float64 reference for every tile length (K of 1 to 7921), taps
    of ordinary, huge (2^100) and subnormal-range (2^-130) magnitude (on the 16384 tile, whose outputs scale by one
    multiply where 2^(tile shift + tap shift) is a normal float, both ways)."""
    from sigconv.registry.auto import fused_block

    exe = host_build(*_FUSED_BUILD)
    L = 3 * K + 5000
    x = rng.standard_normal((1, L)).astype(np.float32)
    w = np.ldexp(rng.standard_normal(K), scale).astype(np.float32).astype(np.float64)
    pad, out_len = window_1d("same", L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, fused_block(K), device_spectrum=True)
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)[0]
    s = float(np.abs(ref).max())
    err = np.linalg.norm((y[0] - ref) / s) / np.linalg.norm(ref / s)
    assert err <= 4e-6, f"off by {err:.2e} (K={K}, N={plan['N']}, taps 2^{scale})"


def test_fft_fused_spectrum_kernel_keeps_its_table_for_the_same_taps(host_build, tmp_path, rng):
    """With the record of its last taps, the spectrum kernel leaves the table alone for taps bit for bit the same (a
    table poisoned after the first run stays poisoned: every output NaN) and recomputes it for taps that differ in one
    bit of one tap, in their count, in the sign of a zero, or in the delay (the zero taps after them): outputs equal to
    the float64 reference."""
    exe = host_build(*_FUSED_BUILD)
    L, K = 6000, 255
    x = rng.standard_normal((1, L)).astype(np.float32)
    w = rng.standard_normal(K).astype(np.float32)
    w[7] = 0.0
    pad, out_len = window_1d("same", L, K)
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w.astype(np.float64), pad, out_len)[0]
    y, _ = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, 128, device_spectrum=True, prev=w, poison=True)
    assert np.isnan(y).all(), "the same taps recomputed the table"
    one_bit = w.copy()
    one_bit.view(np.int32)[100] ^= 1
    last_bit = w.copy()  # (the last tap: another of a thread's loads than tap 100's)
    last_bit.view(np.int32)[K - 1] ^= 1
    negative_zero = w.copy()
    negative_zero[7] = -0.0
    for name, prev in (("one bit", one_bit), ("last tap's bit", last_bit), ("fewer taps", w[:-1]),
                       ("-0.0", negative_zero), ("the other delay", w),
                       ("the same, not poisoned", w)):
        y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, 128, device_spectrum=True, prev=prev,
                                     poison=name != "the same, not poisoned", flip=name == "the other delay")
        err = np.linalg.norm(y[0] - ref) / np.linalg.norm(ref)
        assert err <= 4e-6, f"{name}: off by {err:.2e}"
    assert plan["d"] == 1  # (255 taps, "same": one zero before them, one after)


def test_fft_fused_spectrum_kernel_zero_and_nonfinite_taps(host_build, tmp_path, rng):
    """All-zero taps give zero outputs (tap shift 0, no NaN from a zero peak); a NaN tap makes every output NaN."""
    exe = host_build(*_FUSED_BUILD)
    L, K = 5000, 63
    x = rng.standard_normal((1, L)).astype(np.float32)
    pad, out_len = window_1d("same", L, K)
    y, _ = _fft_fused_on_host(exe, tmp_path, x, np.zeros(K), pad, out_len, 64, device_spectrum=True)
    assert np.array_equal(y, np.zeros_like(y))
    w = rng.standard_normal(K)
    w[5] = np.nan
    y, _ = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, 64, device_spectrum=True)
    assert np.isnan(y).all()


# The tile kernels launched as the launcher launches them after the spectrum kernel of device taps (programmatic
# dependent launch, sigconv._kernels.launch_after): what that kernel writes (the table G and the tap shift) is
# unreadable in each block until every thread has called sc_grid_wait. (K, L, mode, C, block, xoff, device spectrum):
# ff_tile_one, the two-buffer tile (its wait before the tile loop; the host's table, with its tap shift), ff_tile_wide
# with pairs; ff_tile_one on the host's table, ff_tile_cols on 16384 and on 32768 (float loads), ff_tile_wide with
# floats, the 4096 tile in place.
FUSED_AFTER_CASES = [
    (127, 3001, "same", 2, 64, 1, True),
    (4095, 5000, "valid", 1, 256, 0, False),
    (7921, 40000, "same", 1, 512, 0, True),
    (300, 5000, "valid", 3, 128, 2, False),
    (4095, 9000, "same", 2, 1024, 0, True),
    (7921, 40000, "same", 1, 1024, 1, True),
    (7921, 30000, "full", 2, 512, 1, True),
    (1023, 30000, "same", 1, 256, 1, True),
]


@pytest.mark.parametrize("K,L,mode,C,block,xoff,device", _grid(FUSED_AFTER_CASES, {3, 4, 5, 6, 7}),
                         ids=[f"K{c[0]}-{c[2]}-C{c[3]}-b{c[4]}-o{c[5]}" + ("-spectrum" if c[6] else "-host")
                              for c in FUSED_AFTER_CASES])
def test_fft_fused_tiles_read_the_table_only_after_the_grid_wait_on_host(host_build, tmp_path, K, L, mode, C, block,
                                                                         xoff, device, rng):
    """Launched as the kernel after the one that writes its table, every tile kernel reads the table and the tap shift
    only after sc_grid_wait (any read before it meets AddressSanitizer's poison, or NaN) and its outputs equal the
    float64 reference."""
    exe = host_build(*_FUSED_BUILD)
    x = rng.standard_normal((C, L)).astype(np.float32)
    w = rng.standard_normal(K)
    if device:
        w = w.astype(np.float32).astype(np.float64)
    pad, out_len = window_1d(mode, L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, block, xoff, device_spectrum=device, after=1)
    ref = cpu_backend.corr1d_direct(x.astype(np.float64), w, pad, out_len)
    errs = _channel_errors(y, ref)
    assert max(errs) <= 4e-6, f"off by {max(errs):.2e} (N={plan['N']}, grid {plan['grid']}, pairs {plan['pairs']})"


@pytest.mark.parametrize("K,block,device", [(127, 64, True), (4095, 256, False), (7921, 512, True)],
                         ids=["one", "two-buffer", "wide"])
def test_fft_fused_table_kept_from_a_tile_kernel_fails_it_on_host(host_build, tmp_path, K, block, device, rng):
    """The control of the test above: with the table unreadable all through the launch, the tile kernel's first read
    of it is AddressSanitizer's use-after-poison (a sanitized build) or its outputs are NaN."""
    exe = host_build(*_FUSED_BUILD)
    L = K + 3000
    x = rng.standard_normal((1, L)).astype(np.float32)
    w = rng.standard_normal(K).astype(np.float32).astype(np.float64)
    pad, out_len = window_1d("same", L, K)
    if b"__asan_init" in Path(exe).read_bytes():
        with pytest.raises(AssertionError, match="use-after-poison"):
            _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, block, device_spectrum=device, after=2)
    else:
        y, _ = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, block, device_spectrum=device, after=2)
        assert np.isnan(y).all(), "outputs from a table that was never readable"


def test_fft_fused_nan_stays_in_its_tiles(host_build, tmp_path, rng):
    """A NaN sample makes the outputs of the tiles that read it NaN (an FFT mixes a tile's samples) and no others."""
    exe = host_build(*_FUSED_BUILD)
    K, L = 63, 5000
    x = rng.standard_normal((1, L)).astype(np.float32)
    x[0, 2500] = np.nan
    w = rng.standard_normal(K)
    pad, out_len = window_1d("same", L, K)
    y, plan = _fft_fused_on_host(exe, tmp_path, x, w, pad, out_len, 128)
    V = plan["V"]
    start = np.arange(plan["ntiles"]) * V - pad - plan["z"]  # tile t reads x[start[t] : start[t] + N]
    reads = (start <= 2500) & (2500 < start + plan["N"])
    nan_tiles = np.isnan(y[0]).reshape(-1)
    tile_of = np.arange(out_len) // V
    assert np.array_equal(nan_tiles, reads[tile_of]), "NaN outputs outside the tiles that read the NaN sample"
    ok = ~reads[tile_of]
    ref = cpu_backend.corr1d_direct(np.nan_to_num(x).astype(np.float64), w, pad, out_len)[0]
    assert ok.any() and np.allclose(y[0, ok], ref[ok], rtol=1e-5, atol=1e-5 * np.abs(ref).max())


# --------------------------------- conv2d.cu's shared-memory kernels (regblock, prefetch, shared) on the host
# conv2d_harness.cpp compiles kernels/conv2d.cu with the #defines of cuda2d.tiled_plan (cp.async replaced by
# synchronous copies with the device's alignment rules), threads and barriers as for 1-D above; the grid and
# shared memory size are cuda2d.tiled_grid / tiled_plan / shared_geometry's, as on the GPU.

def _conv2d_ref(x, w, bias, stride, pad, out_hw):
    """float64 NCHW cross-correlation, torch.nn.functional.conv2d's definition, zero outside the input."""
    N, Cin, H, W = x.shape
    Cout, _, kH, kW = w.shape
    (sy, sx), (py, px), (Ho, Wo) = stride, pad, out_hw
    cv = np.zeros((N, Cin, (Ho - 1) * sy + kH, (Wo - 1) * sx + kW))
    hh, ww = min(H, cv.shape[2] - py), min(W, cv.shape[3] - px)
    cv[:, :, py:py + hh, px:px + ww] = x[:, :, :hh, :ww]
    y = np.zeros((N, Cout, Ho, Wo)) + bias[None, :, None, None]
    for i in range(kH):
        for j in range(kW):
            patch = cv[:, :, i:i + (Ho - 1) * sy + 1:sy, j:j + (Wo - 1) * sx + 1:sx]
            y += np.einsum("oc,nchw->nohw", w[:, :, i, j], patch)
    return y


# (variant, dtype, N, Cin, H, W, Cout, (kH, kW), stride, pad, out_hw or None, block, bias): the 3x3 spectrogram
# kernel with W % 4 != 0 (scalar cp.async) and == 0 (16-byte cp.async), article B's 6x6 -> 6 channels with
# double buffering, stride 2 with a partial group of output channels, rectangular kernels with stride (1, 3),
# a "full" window larger than the input, and the shared kernel in both dtypes with stride.
C2D_CASES = [
    ("regblock", np.float32, 1, 1, 37, 70, 1, (3, 3), (1, 1), (1, 1), None, (32, 4), False),
    ("prefetch", np.float32, 1, 1, 21, 64, 1, (3, 3), (1, 1), (1, 1), None, (24, 4), False),
    ("prefetch", np.float32, 1, 6, 20, 24, 6, (6, 6), (1, 1), (0, 0), None, (8, 4), True),
    ("regblock", np.float32, 2, 3, 17, 19, 10, (3, 3), (2, 2), (1, 1), None, (20, 8), True),
    ("regblock", np.float32, 1, 2, 13, 29, 3, (5, 3), (1, 3), (2, 1), None, (12, 8), False),
    ("regblock", np.float32, 1, 1, 9, 9, 2, (7, 7), (1, 1), (6, 6), (15, 15), (8, 8), False),
    ("shared", np.float64, 2, 2, 11, 13, 3, (4, 4), (1, 2), (1, 2), None, (12, 8), True),
    ("shared", np.float32, 1, 1, 40, 33, 1, (3, 3), (1, 1), (1, 1), None, (3, 32), False),
]


@pytest.mark.parametrize("variant,dtype,N,Cin,H,W,Cout,k,stride,pad,out_hw,block,bias",
                         _grid(C2D_CASES, {1, 4, 5, 7}),
                         ids=[f"{c[0]}-{np.dtype(c[1]).name}-{c[2]}x{c[3]}x{c[4]}x{c[5]}-co{c[6]}-k{c[7][0]}x{c[7][1]}"
                              f"-s{c[8][0]}{c[8][1]}" for c in C2D_CASES])
def test_conv2d_kernels_run_on_host(host_build, tmp_path_factory, variant, dtype, N, Cin, H, W, Cout, k, stride, pad,
                                    out_hw, block, bias, rng):
    from sigconv.backends import cuda2d

    kH, kW = k
    (sy, sx), (py, px) = stride, pad
    Ho, Wo = out_hw or ((H + 2 * py - kH) // sy + 1, (W + 2 * px - kW) // sx + 1)
    x = rng.standard_normal((N, Cin, H, W))
    w = rng.standard_normal((Cout, Cin, kH, kW))
    b = rng.standard_normal(Cout) if bias else np.zeros(Cout)
    itemsize = np.dtype(dtype).itemsize
    if variant == "shared":
        pitch, smem = cuda2d.shared_geometry(block, kH, kW, stride, itemsize)
        grid = cuda2d.generic_grid(N * Cout, Ho, Wo, block)
        name = "shared"
    else:
        plan = cuda2d.tiled_plan(block, kH, kW, stride, px, Cout, variant == "prefetch")
        pitch, smem, name = 0, plan["smem"], "tiled"
        grid = cuda2d.tiled_grid(plan, N, Cout, Ho, Wo)
    exe = host_build(*_conv2d_build(variant=variant, k=k, stride=stride, pad=pad, block=block, Cout=Cout))
    tmp = tmp_path_factory.mktemp("c2d")
    files = [tmp / n for n in ("x.bin", "w.bin", "b.bin", "y.bin")]
    for f, a in zip(files, (x, w, b, np.full((N, Cout, Ho, Wo), np.nan))):
        a.astype(dtype).tofile(f)
    _emu_run([exe, name, "f32" if dtype == np.float32 else "f64", *grid, *block, smem, N, Cin, H, W, Cout, kH, kW,
              sy, sx, py, px, Ho, Wo, int(bias), pitch, int(W % 4 == 0), int(Wo % 4 == 0), "0", *files], variant)
    y = np.fromfile(files[3], dtype=dtype).reshape(N, Cout, Ho, Wo)
    assert not np.isnan(y).any(), f"unwritten outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    ref = _conv2d_ref(x.astype(dtype).astype(np.float64), w.astype(dtype).astype(np.float64),
                      b.astype(dtype).astype(np.float64), stride, pad, (Ho, Wo))
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    tol = 1e-5 if dtype == np.float32 else 1e-10
    assert err <= tol, f"{variant} off by {err:.2e}"


# ------------------------------------------ the implicit GEMM (igemm, igemm_tf32) on the host, threads per CUDA thread
# igemm_harness.cpp compiles kernels/conv2d_igemm.cuh with cuda2d.igemm_plan's #defines; grid and shared memory are
# igemm_plan / igemm_grid's, as on the GPU. The cases reach: pixel tiles that span images and pass the end; channel
# tiles past Cout; k steps past Cin*kH*kW and more of them than the pipeline's stages; odd Ho*Wo (scalar stores)
# and multiples of 4 (float4 stores); blocks narrower than the tile (several pixels per thread), wider (k rows split
# among threads), of 3 warps, 1 x 32 and 1024 x 1 (laid out again); stride and asymmetric pad; a misaligned x; kernels
# of up to 31 taps (the taps tested by the pixel's bit mask) and of more (by bounds); the fill constant, wrap and symm
# compiled in; and the TF32 kernel's fragment layout at 3 and 8 warps. TF32 results are
# checked against the float64 correlation of the TF32-rounded inputs, to float32 accuracy: a wrong fragment index
# fails by far more than the rounding allows.
IGEMM_CASES = [
    # (tf32, N, Cin, H, W, Cout, (kH, kW), stride, pad, block, bias, boundary, fill, xoff)
    (False, 2, 3, 9, 11, 10, (3, 3), (1, 1), (1, 1), (16, 16), True, "fill", 0.0, 0),
    (False, 1, 20, 8, 12, 50, (3, 3), (2, 1), (1, 0), (16, 6), False, "fill", 0.0, 1),
    (False, 2, 2, 5, 7, 3, (2, 4), (1, 3), (0, 2), (1, 32), True, "fill", 0.0, 0),
    (False, 1, 3, 10, 30, 7, (5, 5), (1, 1), (2, 2), (32, 3), True, "fill", 0.0, 0),
    (False, 1, 2, 6, 6, 5, (3, 3), (1, 1), (1, 1), (1024, 1), False, "fill", 0.0, 0),
    (False, 1, 1, 7, 9, 1, (3, 5), (1, 1), (1, 2), (16, 8), False, "fill", 2.5, 0),
    (False, 1, 1, 5, 6, 1, (7, 9), (1, 1), (6, 8), (16, 8), False, "wrap", 0.0, 0),
    (False, 1, 1, 7, 9, 1, (3, 5), (1, 1), (1, 2), (32, 4), False, "symm", 0.0, 3),
    (False, 2, 3, 9, 10, 5, (6, 6), (1, 1), (2, 3), (16, 8), True, "fill", 0.0, 0),
    (False, 1, 1, 8, 9, 1, (7, 5), (1, 1), (3, 2), (16, 8), False, "fill", -1.5, 0),
    (True, 2, 5, 9, 13, 20, (3, 3), (1, 1), (1, 1), (32, 8), True, "fill", 0.0, 0),
    (True, 1, 3, 11, 20, 70, (5, 3), (1, 2), (2, 1), (32, 3), False, "fill", 0.0, 2),
    (True, 1, 1, 6, 7, 1, (3, 3), (1, 1), (2, 2), (32, 2), False, "symm", 0.0, 0),
]


def _tf32_round(a):
    """numpy stand-in of cvt.rna.tf32.f32: float32 to 10 mantissa bits, to nearest, ties away from zero."""
    u = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32)
    return ((u + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def _igemm_build(tf32, k, stride, block, boundary="fill", fill=0.0, **_):
    from sigconv.backends import cuda2d

    defines = dict(cuda2d.igemm_plan(block, k[0], k[1], stride, tf32)["defines"])
    defines.update(_boundary_define(boundary))
    if boundary == "fill" and fill != 0:
        defines["IG_FILLC"] = 1  # (as the launcher builds it for a non-zero constant)
    if cuda2d.igemm_masked(k[0], k[1], boundary):
        defines["IG_MASK"] = 1
    return "igemm_harness.cpp", defines, "c++20"


@pytest.mark.parametrize("tf32,N,Cin,H,W,Cout,k,stride,pad,block,bias,boundary,fill,xoff",
                         _grid(IGEMM_CASES, {2, 3, 4, 7, 9, 11, 12}),
                         ids=[f"{'tf32' if c[0] else 'f32'}-{c[1]}x{c[2]}x{c[3]}x{c[4]}-co{c[5]}-k{c[6][0]}x{c[6][1]}"
                              f"-b{c[9][0]}x{c[9][1]}-{c[11]}" for c in IGEMM_CASES])
def test_igemm_kernel_runs_on_host(host_build, tmp_path, tf32, N, Cin, H, W, Cout, k, stride, pad, block, bias,
                                   boundary, fill, xoff, rng):
    from sigconv.backends import cuda2d

    kH, kW = k
    (sy, sx), (py, px) = stride, pad
    Ho, Wo = (H + 2 * py - kH) // sy + 1, (W + 2 * px - kW) // sx + 1
    plan = cuda2d.igemm_plan(block, kH, kW, stride, tf32)
    grid = cuda2d.igemm_grid(plan, N, Cout, Ho, Wo)
    exe = host_build(*_igemm_build(tf32, k, stride, block, boundary, fill))
    x = rng.standard_normal((N, Cin, H, W)).astype(np.float32)
    w = rng.standard_normal((Cout, Cin, kH, kW)).astype(np.float32)
    b = (rng.standard_normal(Cout) if bias else np.zeros(Cout)).astype(np.float32)
    files = [tmp_path / n for n in ("x.bin", "w.bin", "tab.bin", "b.bin", "y.bin")]
    for f, a in zip(files, (x, w, cuda2d.igemm_table(Cin, H, W, kH, kW, cuda2d.igemm_masked(kH, kW, boundary)), b,
                            np.full((N, Cout, Ho, Wo), np.nan, np.float32))):
        a.tofile(f)
    co_tiles = -(-Cout // plan["tile"][0])
    _emu_run([exe, grid[0], *plan["launch"][:2], plan["smem"], N, Cin, H, W, Cout, kH, kW, sy, sx, py, px, Ho, Wo,
              int(bias), co_tiles, int(Ho * Wo % 4 == 0), fill, xoff, *files], "igemm")
    y = np.fromfile(files[4], dtype=np.float32).reshape(N, Cout, Ho, Wo)
    assert not np.isnan(y).any(), f"unwritten outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    xr, wr = (_tf32_round(x), _tf32_round(w)) if tf32 else (x, w)
    xr, wr = xr.astype(np.float64), wr.astype(np.float64)
    if boundary == "fill" and fill == 0.0:
        ref = _conv2d_ref(xr, wr, b.astype(np.float64), stride, pad, (Ho, Wo))
    else:  # single channel: the numpy.pad extension, then a valid correlation
        Hn, Wn = (Ho - 1) * sy + kH, (Wo - 1) * sx + kW
        widths = ((py, Hn - H - py), (px, Wn - W - px))
        mode = {"fill": "constant", "wrap": "wrap", "symm": "symmetric"}[boundary]
        xe = np.pad(xr[0, 0], widths, mode, **({"constant_values": fill} if mode == "constant" else {}))
        ref = _conv2d_ref(xe[None, None], wr, b.astype(np.float64), stride, (0, 0), (Ho, Wo))
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= 1e-5, f"igemm{'_tf32' if tf32 else ''} off by {err:.2e}"


# ---------------------------------------- the shfl kernel (warp shuffles) on the host, threads per CUDA thread
# Same cases as strip where the halos allow (<= 4 columns each side), plus warps cut by the last column, blocks
# of several warps and thread rows, blocks of 3 and 5 warps; the shuffles are emulated per warp and a
# shuffle after a lane has returned fails the run.
SHFL_CASES = [
    (1, 37, 64, 3, 3, (1, 1), None, (128, 1), 32, 0.0, None),
    (2, 33, 61, 3, 3, (1, 1), None, (32, 4), 8, 0.5, None),
    (1, 70, 20, 5, 5, (2, 2), None, (32, 1), 16, 0.0, None),
    (1, 9, 13, 4, 4, (1, 2), None, (96, 1), 32, 0.0, None),
    (1, 1, 1, 3, 7, (1, 3), None, (32, 1), 32, -1.0, None),
    (1, 5, 6, 9, 5, (8, 4), (12, 10), (32, 1), 4, 0.0, None),
    (3, 40, 140, 15, 9, (7, 4), None, (64, 4), 8, 0.0, 2),
    (1, 5, 9, 1, 1, (0, 0), None, (32, 8), 2, 0.0, None),
    (1, 12, 8, 3, 3, (2, 2), (14, 10), (256, 1), 32, 0.0, None),
    (1, 20, 517, 3, 3, (1, 1), None, (160, 1), 32, 0.0, None),
]


@pytest.mark.parametrize("N,H,W,kH,kW,pad,out_hw,block,rows,bias,zcap", _grid(SHFL_CASES, {2, 3, 4, 5, 7, 9}))
def test_shfl_kernel_runs_on_host(host_build, tmp_path, N, H, W, kH, kW, pad, out_hw, block, rows, bias, zcap, rng):
    exe = host_build(*_shfl_build(kH=kH, kW=kW, pad=pad, rows=rows))
    _single_channel_on_host(rng, exe, tmp_path, "shfl", N, H, W, kH, kW, pad, out_hw, block, rows, bias, zcap)


# ------------------------------------------- boundaries compiled into the fast kernels (strip, shfl, tiled)
# C2D_BOUNDARY makes every load of these kernels read the extended image (wrap, symm through c2d_extend; fill with
# the kernel's constant argument): vector (W % 4 == 0) and scalar loads, rows and columns of both edges, a kernel
# larger than the image (windows several periods out), the shfl halos of the edge lanes and of lanes past the last
# column; warps (shfl) whose window lies inside the image, which take the plain loads, next to those whose window
# leaves it; strip's threads all load through the rule's chunk map, or (rows beyond one period, W % 4 != 0) through
# its edge function. fill with a constant runs the zero-fill builds (the constant is an argument).
# (kernel, boundary, fill, N, H, W, kH, kW, pad, out_hw or None, block, rows)
FUSED_CASES = [
    ("strip", "wrap", 0.0, 1, 37, 64, 3, 3, (1, 1), None, (64, 1), 8),
    ("strip", "wrap", 0.0, 2, 33, 61, 3, 3, (1, 1), None, (32, 4), 8),
    ("strip", "symm", 0.0, 1, 5, 6, 12, 12, (11, 11), (16, 17), (32, 1), 4),
    ("strip", "fill", 1.5, 1, 37, 64, 3, 3, (1, 1), None, (64, 1), 32),
    ("strip", "fill", -2.0, 2, 33, 61, 3, 3, (1, 1), None, (32, 4), 8),
    ("shfl", "symm", 0.0, 1, 37, 520, 3, 3, (1, 1), None, (64, 1), 8),
    ("shfl", "symm", 0.0, 2, 33, 61, 3, 3, (1, 1), None, (32, 4), 8),
    ("shfl", "wrap", 0.0, 1, 5, 6, 9, 5, (8, 4), (12, 10), (32, 1), 4),
    ("shfl", "fill", 1.5, 1, 20, 517, 3, 3, (1, 1), None, (128, 1), 32),
    # (from index 9, and the kernels larger than the image above: slow) the other rule of each kernel and shape
    ("strip", "symm", 0.0, 1, 37, 64, 3, 3, (1, 1), None, (64, 1), 32),
    ("strip", "wrap", 0.0, 1, 5, 6, 12, 12, (11, 11), (16, 17), (32, 1), 4),
    ("strip", "wrap", 0.0, 1, 70, 20, 5, 5, (2, 2), None, (32, 1), 16),
    ("shfl", "wrap", 0.0, 1, 37, 64, 3, 3, (1, 1), None, (128, 1), 32),
    ("shfl", "symm", 0.0, 1, 5, 6, 9, 5, (8, 4), (12, 10), (32, 1), 4),
    ("shfl", "symm", 0.0, 1, 70, 20, 5, 5, (2, 2), None, (32, 1), 16),
    # (from index 15: default) wide enough for inside threads (warps) between edge ones on every strip, with 2-D
    # blocks
    ("strip", "symm", 0.0, 1, 70, 136, 5, 5, (2, 2), None, (32, 2), 8),
    ("shfl", "wrap", 0.0, 1, 40, 1032, 7, 7, (3, 3), None, (64, 2), 8),
    # kernels above the ring's height (rotating accumulators), 16-byte rows and (W = 70) the scalar fallback
    ("strip", "symm", 0.0, 1, 41, 64, 15, 15, (7, 7), None, (32, 1), 8),
    ("strip", "wrap", 0.0, 2, 30, 72, 13, 13, (6, 6), None, (32, 2), 16),
    ("strip", "symm", 0.0, 1, 33, 70, 13, 15, (6, 7), None, (64, 1), 8),
    # the ring's tallest kernel
    ("strip", "wrap", 0.0, 1, 40, 64, 11, 11, (5, 5), None, (32, 2), 16),
]


@pytest.mark.parametrize("kernel,boundary,fill,N,H,W,kH,kW,pad,out_hw,block,rows",
                         _grid(FUSED_CASES, {2, 7} | set(range(9, 15))),
                         ids=[f"{c[0]}-{c[1]}{c[2]:g}-{c[4]}x{c[5]}-k{c[6]}x{c[7]}" for c in FUSED_CASES])
def test_fused_boundaries_run_on_host(host_build, tmp_path, kernel, boundary, fill, N, H, W, kH, kW, pad, out_hw,
                                      block, rows, rng):
    build = _strip_build if kernel == "strip" else _shfl_build
    exe = host_build(*build(kH=kH, kW=kW, pad=pad, rows=rows, boundary=boundary))
    _single_channel_on_host(rng, exe, tmp_path, kernel, N, H, W, kH, kW, pad, out_hw, block, rows, 0.0, None,
                            boundary, fill)


# (variant, boundary, fill, H, W, (kH, kW), pad, out_hw or None, block): one image, one channel, as the API runs
# them: scalar (W = 70, 71) and 16-byte (W = 64) tile loads, 7x7 "full" windows over 5x8 and 5x7 images (tiles
# beyond one period of the image).
TILED_BOUNDARY_CASES = [
    ("regblock", "wrap", 0.0, 37, 70, (3, 3), (1, 1), None, (32, 4)),
    ("regblock", "symm", 0.0, 21, 64, (5, 5), (2, 2), None, (16, 8)),
    ("prefetch", "fill", 1.5, 21, 64, (3, 3), (1, 1), None, (16, 8)),
    ("regblock", "symm", 0.0, 37, 70, (3, 3), (1, 1), None, (32, 4)),
    ("prefetch", "wrap", 0.0, 21, 64, (3, 3), (1, 1), None, (16, 8)),
    ("regblock", "wrap", 0.0, 5, 8, (7, 7), (6, 6), (11, 14), (8, 8)),
    ("prefetch", "wrap", 0.0, 29, 71, (9, 9), (4, 4), None, (16, 8)),
    ("prefetch", "symm", 0.0, 5, 7, (7, 7), (6, 6), (11, 13), (8, 8)),
]


@pytest.mark.parametrize("variant,boundary,fill,H,W,k,pad,out_hw,block", _grid(TILED_BOUNDARY_CASES, {0, 3, 4, 5, 7}),
                         ids=[f"{c[0]}-{c[1]}{c[2]:g}-{c[3]}x{c[4]}-k{c[5][0]}x{c[5][1]}" for c in TILED_BOUNDARY_CASES])
def test_tiled_boundaries_run_on_host(host_build, tmp_path, variant, boundary, fill, H, W, k, pad, out_hw, block,
                                      rng):
    from sigconv.backends import cuda2d

    kH, kW = k
    (py, px) = pad
    Ho, Wo = out_hw or (H + 2 * py - kH + 1, W + 2 * px - kW + 1)
    plan = cuda2d.tiled_plan(block, kH, kW, (1, 1), px, 1, variant == "prefetch")
    exe = host_build(*_conv2d_build(variant=variant, k=k, stride=(1, 1), pad=pad, block=block, Cout=1,
                                    boundary=boundary))
    x = rng.standard_normal((1, 1, H, W)).astype(np.float32)
    w = rng.standard_normal((1, 1, kH, kW)).astype(np.float32)
    files = [tmp_path / n for n in ("x.bin", "w.bin", "b.bin", "y.bin")]
    for f, a in zip(files, (x, w, np.zeros(1, np.float32), np.full((1, 1, Ho, Wo), np.nan, np.float32))):
        a.tofile(f)
    _emu_run([exe, "tiled", "f32", *cuda2d.tiled_grid(plan, 1, 1, Ho, Wo), *block, plan["smem"], 1, 1, H, W, 1, kH,
              kW, 1, 1, py, px, Ho, Wo, 0, 0, int(W % 4 == 0), int(Wo % 4 == 0), repr(fill), *files], variant)
    y = np.fromfile(files[3], dtype=np.float32).reshape(1, Ho, Wo)
    assert not np.isnan(y).any(), f"unwritten outputs, first at {np.argwhere(np.isnan(y))[:3].tolist()}"
    ref = _corr2d_ref(x[0].astype(np.float64), w[0, 0].astype(np.float64), 0.0, pad, (Ho, Wo), boundary, fill)
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= 1e-5, f"{variant} {boundary} fill={fill} off by {err:.2e}; first mismatch at " \
                        f"{np.argwhere(~np.isclose(y, ref, rtol=1e-4, atol=1e-4))[:3].tolist()}"


def test_shfl_applies_only_within_its_halos():
    from sigconv.backends.cuda2d import shfl_applies

    x = np.zeros((1, 1, 8, 8), np.float32)
    assert shfl_applies(x, np.zeros((1, 1, 9, 9), np.float32), (1, 1), (4, 4)) is None
    assert "halo" in shfl_applies(x, np.zeros((1, 1, 3, 11), np.float32), (1, 1), (1, 5))
    assert "halo" in shfl_applies(x, np.zeros((1, 1, 3, 3), np.float32), (1, 1), (1, 5))
    assert "stride" in shfl_applies(x, np.zeros((1, 1, 3, 3), np.float32), (2, 1), (1, 1))
    assert "float32" in shfl_applies(x.astype(np.float64), np.zeros((1, 1, 3, 3)), (1, 1), (1, 1))


# ------------------------------------------------------------------ the host build each emulation test needs

_OS_BUILD = ("os_harness.cpp", None, "c++17")
_CONV1D_BUILD = ("conv1d_harness.cpp", None, "c++20")
_FUSED_BUILD = ("fft_fused_harness.cpp", None, "c++20")


def _boundary_define(boundary: str) -> dict:
    """The define a fused launcher adds for ``boundary`` (none for fill: its constant is an argument)."""
    from sigconv.backends import cuda2d

    return {} if boundary == "fill" else {"C2D_BOUNDARY": cuda2d.BOUNDARIES[boundary]}


def _strip_build(kH, kW, pad, rows, boundary="fill", **_):
    return "strip_harness.cpp", dict(STRIP_KH=kH, STRIP_KW=kW, STRIP_SH=(-pad[1]) % 4, STRIP_ROWS=rows,
                                     **_boundary_define(boundary)), "c++17"


def _shfl_build(kH, kW, pad, rows, boundary="fill", **_):
    return "shfl_harness.cpp", dict(SHFL_KH=kH, SHFL_KW=kW, SHFL_PX=pad[1], SHFL_ROWS=rows,
                                    **_boundary_define(boundary)), "c++20"


def _conv2d_build(variant, k, stride, pad, block, Cout, boundary="fill", **_):
    from sigconv.backends import cuda2d

    defines = {}
    if variant != "shared":
        defines = cuda2d.tiled_plan(block, k[0], k[1], stride, pad[1], Cout, variant == "prefetch")["defines"]
        defines.update(_boundary_define(boundary))
    return "conv2d_harness.cpp", defines, "c++20"


#: test function -> its build's key, from the test's parameters (for prefetch)
_KEYS = {
    "test_overlap_save_kernels_run_on_host": lambda **_: _build_key(*_OS_BUILD),
    "test_conv1d_kernels_run_on_host": lambda **_: _build_key(*_CONV1D_BUILD),
    "test_fft_fused_kernel_runs_on_host": lambda **_: _build_key(*_FUSED_BUILD),
    "test_ffa_kernel_runs_on_host": lambda **p: _build_key(*_ffa_build(_ffa_launches(**p)[0][0]["expr"])),
    "test_fft_fused_nan_stays_in_its_tiles": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_tiles_read_the_table_only_after_the_grid_wait_on_host": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_table_kept_from_a_tile_kernel_fails_it_on_host": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_spectrum_kernel_on_host": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_kernel_runs_its_taps_as_given_on_host": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_pairs_kernel_on_host": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_wide_kernel_on_host": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_spectrum_kernel_zero_and_nonfinite_taps": lambda **_: _build_key(*_FUSED_BUILD),
    "test_fft_fused_spectrum_kernel_keeps_its_table_for_the_same_taps": lambda **_: _build_key(*_FUSED_BUILD),
    "test_strip_kernel_runs_on_host": lambda **p: _build_key(*_strip_build(**p)),
    "test_shfl_kernel_runs_on_host": lambda **p: _build_key(*_shfl_build(**p)),
    "test_conv2d_kernels_run_on_host": lambda **p: _build_key(*_conv2d_build(**p)),
    "test_igemm_kernel_runs_on_host": lambda **p: _build_key(*_igemm_build(**p)),
    "test_fused_boundaries_run_on_host": lambda **p: _build_key(*(_strip_build if p["kernel"] == "strip"
                                                                   else _shfl_build)(**p)),
    "test_tiled_boundaries_run_on_host": lambda **p: _build_key(*_conv2d_build(stride=(1, 1), Cout=1, **p)),
}
