"""Compile the modules that ship pre-built (``sigconv.backends.prebuilt_modules``) for the common GPU architectures
into ``kernels/prebuilt``: one cubin per module and architecture, xz-compressed, named
``<module key>.sm_<arch>.cubin.xz``, and ``index.json`` (what each key holds, the names NVRTC lowered its template instantiations to, the compiler).

    python tools/prebuild_kernels.py                 # build (NVRTC from the nvidia-cuda-nvrtc wheel or CUDA_HOME)
    python tools/prebuild_kernels.py --check         # exit 1 when the index does not match the sources
    python tools/prebuild_kernels.py --nvrtc /usr/local/cuda/lib64/libnvrtc.so --archs 90

It compiles with NVRTC, as CuPy does at run time, with the options CuPy adds (``sigconv._kernels.CUPY_ADDED_OPTIONS``),
so a pre-built binary is the code CuPy would have compiled for that GPU; a build in which ptxas spills registers for
sm_90 (NO_SPILLS_ARCH) is refused, and reported for the others (NVRTC's code and nvcc's differ: a kernel that nvcc
compiles without spills may spill here). Run it after editing anything under
``kernels/``: the keys cover the exact code, and ``tests/test_kernel_build.py`` fails while the index is stale.
No GPU is needed.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import glob
import json
import lzma
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from sigconv import _kernels  # noqa: E402
from sigconv.backends import prebuilt_modules  # noqa: E402

#: Ampere (A100; A10, RTX 30), Ada (L4, L40, RTX 40), Hopper (H100, H200), Blackwell (B200; RTX 50). A cubin also
#: runs on later minor versions of its major (sm_80's on sm_87), see sigconv._kernels.prebuilt_arch.
ARCHS = ("80", "86", "89", "90", "100", "120")
#: The architecture the kernels are tuned for, on which a build that spills registers is refused (others: reported).
NO_SPILLS_ARCH = "90"
_KERNEL = re.compile(r'extern\s+"C"\s+__global__\s+void\s+(\w+)')


def find_nvrtc(explicit: str | None) -> str:
    """The NVRTC library: ``explicit``, $NVRTC_LIBRARY, the nvidia-cuda-nvrtc wheel, $CUDA_HOME, the loader's path."""
    cands = [explicit, os.environ.get("NVRTC_LIBRARY")]
    for site in sys.path:
        cands += sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "lib", "libnvrtc.so.*[0-9]")))
        cands += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so.*[0-9]")))
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home:
            cands += sorted(glob.glob(os.path.join(home, "lib64", "libnvrtc.so*")))
    cands.append(ctypes.util.find_library("nvrtc"))
    for c in cands:
        if c and (os.path.isfile(c) or c == ctypes.util.find_library("nvrtc")):
            return c
    raise SystemExit("NVRTC not found: pip install nvidia-cuda-nvrtc (or pass --nvrtc PATH / set CUDA_HOME)")


class NVRTC:
    """The few NVRTC calls a build needs, through ctypes."""

    def __init__(self, path: str):
        self.path = path
        # NVRTC dlopens its builtins library by name: load the one beside it first (a wheel's folder is on no path)
        for b in sorted(glob.glob(os.path.join(os.path.dirname(path), "libnvrtc-builtins.so.*[0-9]"))):
            ctypes.CDLL(b, mode=ctypes.RTLD_GLOBAL)
            break
        self.lib = ctypes.CDLL(path)
        self.lib.nvrtcGetErrorString.restype = ctypes.c_char_p

    def _ok(self, status: int, what: str, prog=None) -> None:
        if status:
            log = self._log(prog) if prog is not None else ""
            raise RuntimeError(f"NVRTC {what}: {self.lib.nvrtcGetErrorString(status).decode()}\n{log[-4000:]}")

    def version(self) -> str:
        major, minor = ctypes.c_int(), ctypes.c_int()
        self._ok(self.lib.nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "version")
        return f"{major.value}.{minor.value}"

    def _log(self, prog) -> str:
        n = ctypes.c_size_t()
        self.lib.nvrtcGetProgramLogSize(prog, ctypes.byref(n))
        buf = ctypes.create_string_buffer(n.value)
        self.lib.nvrtcGetProgramLog(prog, buf)
        return buf.value.decode(errors="replace")

    def compile(self, code: str, options, exprs, log: list | None = None) -> tuple[bytes, dict]:
        """(cubin, {name expression: lowered name}) of ``code``; ``options`` must hold an ``-arch=sm_XX``. ``log``:
        a list the compiler's log is appended to."""
        prog = ctypes.c_void_p()
        self._ok(self.lib.nvrtcCreateProgram(ctypes.byref(prog), code.encode(), b"sigconv.cu", 0, None, None),
                 "create")
        try:
            for e in exprs:
                self._ok(self.lib.nvrtcAddNameExpression(prog, e.encode()), f"name expression {e!r}")
            opts = (ctypes.c_char_p * len(options))(*[o.encode() for o in options])
            self._ok(self.lib.nvrtcCompileProgram(prog, len(options), opts), "compile", prog)
            if log is not None:
                log.append(self._log(prog))
            n = ctypes.c_size_t()
            self._ok(self.lib.nvrtcGetCUBINSize(prog, ctypes.byref(n)), "cubin size")
            buf = ctypes.create_string_buffer(n.value)
            self._ok(self.lib.nvrtcGetCUBIN(prog, buf), "cubin")
            lowered = {}
            for e in exprs:
                p = ctypes.c_char_p()
                self._ok(self.lib.nvrtcGetLoweredName(prog, e.encode(), ctypes.byref(p)), f"lowered name of {e!r}")
                lowered[e] = p.value.decode()
            return buf.raw, lowered
        finally:
            self.lib.nvrtcDestroyProgram(ctypes.byref(prog))


def ptxas_report(log: str) -> dict:
    """{function: (spill store bytes, spill load bytes)} from ptxas -v's report (nvcc's or NVRTC's): entry functions
    and the device functions compiled apart (__noinline__). tests/test_kernel_build.py reads nvcc's with it."""
    out, fn = {}, None
    for line in log.splitlines():
        m = re.search(r"Compiling entry function '([^']+)'|Function properties for (\S+)", line)
        if m:
            fn = m.group(1) or m.group(2)
            continue
        m = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line)
        if m and fn:
            out[fn] = (int(m.group(1)), int(m.group(2)))
    return out


def spills(log: str) -> dict:
    """The functions of :func:`ptxas_report` that spill."""
    return {f: s for f, s in ptxas_report(log).items() if s != (0, 0)}


def _entry(spec: dict) -> dict:
    defines, exprs, options = _kernels._spec(spec["name"], spec.get("defines"), spec.get("name_expressions", ()),
                                             spec.get("options", ()))
    return {"source": spec["name"], "defines": {k: defines[k] for k in sorted(defines)}, "name_expressions": list(exprs),
            "options": list(options), "code": _kernels._code(spec["name"], defines)}


def build(nvrtc: NVRTC, archs, out: Path) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    modules, keep = {}, {_kernels.PREBUILT_INDEX}
    for spec in prebuilt_modules():
        key = _kernels.module_key(**spec)
        ent = _entry(spec)
        code = ent.pop("code")
        sizes = {}
        for arch in archs:
            opts = _kernels.cupy_compile_options(arch, spec.get("options", ()))
            log = []  # (ptxas's report: a kernel that spills on the architecture it is tuned for is not shipped)
            cubin, lowered = nvrtc.compile(code, opts + ["--ptxas-options=-v"], ent["name_expressions"], log)
            spilled = spills(log[0])
            if spilled:
                what = (f"register spills in {spec['name']} {list(ent['name_expressions'])} for sm_{arch} (NVRTC, as "
                        f"CuPy compiles it): {spilled}")
                if arch == NO_SPILLS_ARCH:
                    raise SystemExit(what)
                print(what, flush=True)
            name = f"{key}.sm_{arch}.cubin.xz"
            (out / name).write_bytes(lzma.compress(cubin, preset=9))
            keep.add(name)
            sizes[arch] = len(cubin)
        probe = next(iter(lowered.values()), None) or next(
            (m for m in _KERNEL.findall(code) if b"\0" + m.encode() + b"\0" in cubin), None)
        if probe is None:
            raise SystemExit(f"no kernel found to probe in {spec}")
        modules[key] = dict(ent, lowered=lowered, probe=probe, bytes=sizes)
        packed = sum((out / f"{key}.sm_{a}.cubin.xz").stat().st_size for a in archs)
        print(f"{key}  {spec['name']:<10} {len(ent['name_expressions']):>3} expressions  "
              f"{sum(sizes.values()) / 1e6:.2f} MB ({packed / 1e6:.2f} MB packed)", flush=True)
    for f in out.iterdir():
        if f.name not in keep:
            f.unlink()
    index = {"compiler": f"NVRTC {nvrtc.version()}", "archs": list(archs),
             "added_options": list(_kernels.CUPY_ADDED_OPTIONS), "modules": modules}
    (out / _kernels.PREBUILT_INDEX).write_text(json.dumps(index, indent=1, sort_keys=True) + "\n")
    return index


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--nvrtc", help="path of libnvrtc.so")
    ap.add_argument("--archs", nargs="+", default=list(ARCHS))
    ap.add_argument("--check", action="store_true", help="only check that the index matches the sources")
    args = ap.parse_args(argv)
    if args.check:
        problems = _kernels.prebuilt_problems(prebuilt_modules())
        print("\n".join(problems) or "pre-built kernels match the sources")
        return 1 if problems else 0
    nvrtc = NVRTC(find_nvrtc(args.nvrtc))
    print(f"NVRTC {nvrtc.version()} ({nvrtc.path}); architectures {' '.join(args.archs)}")
    index = build(nvrtc, args.archs, _kernels.kernel_dir() / _kernels.PREBUILT_DIR)
    total = sum(sum(m["bytes"].values()) for m in index["modules"].values())
    print(f"{len(index['modules'])} modules, {total / 1e6:.1f} MB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
