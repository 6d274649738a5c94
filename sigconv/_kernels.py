"""Finding, specialising and compiling the CUDA C sources in ``kernels/``.

The sources sit at the top of the repository (``kernels/``) and, in an installed wheel, inside the
package (``sigconv/kernels``). :func:`module` prepends ``#define``s to specialise a source (CuPy's
ndimage does the same), inlines ``#include "common.cuh"`` so that the source hash covers every
byte that is compiled, and memoises the compiled module per device and per parameter set. CuPy
keeps compiled binaries in its on-disk cache (``~/.cupy/kernel_cache``, keyed by source and
options), so a second process does not recompile either.

Pre-built binaries: the modules that ``sigconv denoise`` loads (each backend's ``prebuilt_modules()``, gathered by
``sigconv.backends.prebuilt_modules``) ship compiled for the common GPU architectures in ``kernels/prebuilt``
(``<key>.sm_<arch>.cubin.xz``, expanded into sigconv's cache folder on first use; ``python
tools/prebuild_kernels.py`` writes them: NVRTC with the options CuPy would add, so they are the code
CuPy would compile). :func:`module` loads one when its key (:func:`module_key`: the exact code, options and name
expressions) and the GPU's architecture match, and compiles as before otherwise (another GPU, a source changed
since the build, a driver that refuses the binary, or ``SIGCONV_PREBUILT=0``): the first run after an install
then compiles nothing of sigconv's own.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import threading
from pathlib import Path
from typing import Iterable, Mapping

__all__ = ["kernel_dir", "source", "source_hash", "module", "module_key", "constants", "prebuilt_index",
           "prebuilt_arch", "prebuilt_problems", "origins", "constant_memory", "NVRTC_OPTIONS", "CUPY_ADDED_OPTIONS",
           "cupy_compile_options", "LIMITS", "PREBUILT_DIR", "launch_after", "kernel_params", "PDL_ENV"]

#: Options for every NVRTC compile. No fast-math: results are checked against float64 references.
NVRTC_OPTIONS = ("-std=c++17",)

#: What CuPy adds to the options of every RawModule compile (cupy.cuda.compiler: ``-ftz=true`` in its cached
#: compile, ``--device-as-default-execution-space`` in its NVRTC call; ``-arch`` comes from the device). The pre-built
#: binaries are compiled with the same, so that they hold the code CuPy would compile.
CUPY_ADDED_OPTIONS = ("-ftz=true", "--device-as-default-execution-space")


def cupy_compile_options(arch: str, options: Iterable[str] = ()) -> list:
    """The NVRTC options of CuPy's compile for sm_``arch`` of a module with ``options`` (:data:`NVRTC_OPTIONS`, the
    module's own, :data:`CUPY_ADDED_OPTIONS`, ``-arch``): what tools/prebuild_kernels.py builds with, and the kernel
    build checks."""
    return [*NVRTC_OPTIONS, *options, *CUPY_ADDED_OPTIONS, f"-arch=sm_{arch}"]

#: The folder of ``kernel_dir()`` holding the pre-built binaries and their index.
PREBUILT_DIR = "prebuilt"
PREBUILT_INDEX = "index.json"

#: The header holding the numbers that kernels and launchers share (read by :func:`constants`).
LIMITS = "limits.cuh"

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"\s*(//.*)?$', re.M)
_DEFINE = re.compile(r"^\s*#\s*define\s+(SIGCONV_[A-Z0-9_]+)\s+(-?\d+)\s*(//.*)?$", re.M)


def kernel_dir() -> Path:
    """Folder holding the ``.cu`` sources: inside the installed package, else the checkout's ``kernels/``."""
    here = Path(__file__).resolve().parent
    for cand in (here / "kernels", here.parent / "kernels"):
        if (cand / "common.cuh").is_file():
            return cand
    raise FileNotFoundError(
        f"sigconv's CUDA sources were not found (looked in {here / 'kernels'} and {here.parent / 'kernels'}); "
        "reinstall sigconv"
    )


@functools.lru_cache(maxsize=None)
def source(name: str) -> str:
    """Text of ``kernels/<name>`` with local ``#include "..."`` lines inlined (once each)."""
    kdir = kernel_dir()
    seen: set[str] = set()

    def expand(fname: str) -> str:
        text = (kdir / fname).read_text()

        def repl(m: re.Match) -> str:
            inc = m.group(1)
            if inc in seen:
                return f"// {inc} already included"
            seen.add(inc)
            return f"// ---- begin {inc}\n{expand(inc)}\n// ---- end {inc}"

        return _INCLUDE.sub(repl, text)

    return expand(name)


@functools.lru_cache(maxsize=None)
def constants(name: str = LIMITS) -> dict:
    """``{NAME: int}`` of the ``#define SIGCONV_NAME <integer>`` lines of ``kernels/<name>``: the one home of
    every number a launcher needs to agree with its kernel (tap buffer sizes, chunk lengths, halo widths)."""
    return {m.group(1): int(m.group(2)) for m in _DEFINE.finditer((kernel_dir() / name).read_text())}


def source_hash(*names: str) -> str:
    """Short SHA-256 of the expanded sources: part of every on-disk cache key (autotuner)."""
    h = hashlib.sha256()
    for n in names:
        h.update(source(n).encode())
    return h.hexdigest()[:16]


def _spec(name: str, defines, name_expressions, options) -> tuple:
    """(defines as a dict, name expressions, the full NVRTC options) of a :func:`module` call."""
    return dict(defines or {}), tuple(name_expressions), tuple(NVRTC_OPTIONS) + tuple(options)


def _code(name: str, defines: Mapping[str, object]) -> str:
    return _defines_text(defines) + source(name)


def module_key(name: str, defines: Mapping[str, object] | None = None, name_expressions: Iterable[str] = (),
               options: Iterable[str] = ()) -> str:
    """The identity of a :func:`module` call's binary (arguments as there): SHA-256 of the exact code compiled
    (defines and expanded source), the full NVRTC options and the name expressions, 24 hex digits. The pre-built
    binaries are filed under it, so a source edited since they were built never matches a stale one."""
    defines, name_expressions, options = _spec(name, defines, name_expressions, options)
    h = hashlib.sha256(_code(name, defines).encode())
    for part in (options, name_expressions):
        h.update(b"\0\1" + "\0".join(part).encode())
    return h.hexdigest()[:24]


@functools.lru_cache(maxsize=None)
def prebuilt_index() -> dict:
    """``kernels/prebuilt/index.json``: {"archs": [...], "modules": {key: {"source", "defines",
    "name_expressions", "options", "lowered", "probe"}}, ...}; empty when absent."""
    path = kernel_dir() / PREBUILT_DIR / PREBUILT_INDEX
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return {}


def prebuilt_arch(cc: str, archs: Iterable[str]) -> str | None:
    """The pre-built architecture a GPU of compute capability ``cc`` ("90", "86", "120") runs: its own, else the
    newest of the same major version and no newer minor (a cubin runs on later minor versions of its major:
    sm_80's on an sm_86 or sm_89 GPU), else None."""
    cc = str(cc)
    archs = [str(a) for a in archs]
    if cc in archs:
        return cc
    major, minor = divmod(int(cc), 10)
    same = [a for a in archs if int(a) // 10 == major and int(a) % 10 <= minor]
    return max(same, key=int) if same else None


def prebuilt_problems(specs: Iterable[Mapping]) -> list[str]:
    """What keeps ``kernels/prebuilt`` from matching ``specs`` (:func:`module`'s keyword arguments, one dict per
    module) and the current sources, a line each; empty when they match. A source edited since the binaries were
    built changes its modules' keys, so they show up here as not pre-built."""
    folder = kernel_dir() / PREBUILT_DIR
    index = prebuilt_index()
    fix = "run python tools/prebuild_kernels.py"
    if not index:
        return [f"{folder / PREBUILT_INDEX} is missing: {fix}"]
    mods, archs = index.get("modules", {}), [str(a) for a in index.get("archs", ())]
    out, want = [], {}
    for spec in specs:
        want[module_key(**spec)] = spec
    for key, spec in want.items():
        what = f"{spec['name']} {dict(spec.get('defines') or {})} {list(spec.get('name_expressions', ()))[:2]}"
        ent = mods.get(key)
        if ent is None:
            out.append(f"{what}: no pre-built binary of the current source (key {key})")
            continue
        out += [f"{what}: {key}.sm_{a}.cubin.xz is missing" for a in archs
                if not (folder / f"{key}.sm_{a}.cubin.xz").is_file()]
        out += [f"{what}: no lowered name for {e!r}" for e in spec.get("name_expressions", ()) if e not in
                ent.get("lowered", {})]
    out += [f"{ent.get('source')} {key}: pre-built but no longer asked for" for key, ent in mods.items()
            if key not in want]
    files = {f"{k}.sm_{a}.cubin.xz" for k in mods for a in archs}
    out += [f"{f.name}: not in the index" for f in sorted(folder.glob("*.cubin*")) if f.name not in files]
    return out + [fix] if out else out


_LOCK = threading.Lock()
_MODULES: dict = {}
#: (source, module_key) -> "prebuilt" or "compiled", for every module this process loaded (:func:`origins`)
_ORIGINS: dict = {}


def origins() -> dict:
    """{(source name, module key): "prebuilt" | "compiled"} of every module this process has loaded: how the
    start-up checks and the GPU tests see whether a run compiled anything of sigconv's own."""
    return dict(_ORIGINS)


def _defines_text(defines: Mapping[str, object]) -> str:
    return "".join(f"#define {k} {v}\n" for k, v in sorted(defines.items()))


class _Prebuilt:
    """A pre-built module: CuPy's ``RawModule`` of the binary, with the name expressions it was built for mapped to
    the names NVRTC lowered them to, as ``RawModule(code=..., name_expressions=...)`` maps them."""

    __slots__ = ("raw", "lowered")

    def __init__(self, raw, lowered: Mapping[str, str]):
        self.raw, self.lowered = raw, dict(lowered)

    def get_function(self, name: str):
        return self.raw.get_function(self.lowered.get(name, name))

    def get_global(self, name: str):
        return self.raw.get_global(self.lowered.get(name, name))


def _expanded(packed: Path) -> Path | None:
    """The cubin of ``packed`` (``<key>.sm_<arch>.cubin.xz``), expanded once into sigconv's cache folder
    (``kernels/``; written atomically, so a half-written file is never read); None when that cannot be written."""
    from sigconv._core.atomic import atomic_output
    from sigconv._core.cache import cache_dir

    path = cache_dir() / "kernels" / packed.name[: -len(".xz")]
    if path.is_file():
        return path
    try:
        import lzma

        data = lzma.decompress(packed.read_bytes())
        path.parent.mkdir(parents=True, exist_ok=True)
        with atomic_output(path) as tmp:
            tmp.write_bytes(data)
    except Exception:  # noqa: BLE001 - a read-only or full cache, a damaged file: the caller compiles instead
        return None
    return path


def _load_prebuilt(cupy, key: str):
    """The pre-built module filed under ``key`` for the current GPU, loaded; None when there is none or the driver
    refuses it (the caller then compiles)."""
    if os.environ.get("SIGCONV_PREBUILT", "1") == "0":
        return None
    index = prebuilt_index()
    entry = index.get("modules", {}).get(key)
    if entry is None:
        return None
    arch = prebuilt_arch(cupy.cuda.Device().compute_capability, index.get("archs", ()))
    packed = kernel_dir() / PREBUILT_DIR / f"{key}.sm_{arch}.cubin.xz"
    path = _expanded(packed) if arch is not None and packed.is_file() else None
    if path is None:
        return None
    try:
        mod = _Prebuilt(cupy.RawModule(path=str(path)), entry.get("lowered", {}))
        mod.get_function(entry["probe"])  # loads the binary now: a refusal surfaces here, not at a launch
    except cupy.cuda.driver.CUDADriverError:
        return None
    return mod


def module(name: str, defines: Mapping[str, object] | None = None, name_expressions: Iterable[str] = (),
           options: Iterable[str] = ()):
    """Compiled module for ``kernels/<name>`` specialised by ``defines``: the pre-built binary when one matches
    (see the module's doc), else a ``cupy.RawModule`` compiled now (or loaded from CuPy's cache).

    Memoised per (device, source, defines, name expressions, options): calling it on a hot path
    costs a dict lookup. ``name_expressions`` lists template instantiations to compile (for
    example ``"conv1d_tiled<float, 25>"``); fetch them with ``mod.get_function(expr)``; ``get_global`` reads a
    ``__device__``/``__constant__`` symbol.
    """
    import cupy

    dev = cupy.cuda.Device().id
    user_options = tuple(options)
    defines, name_expressions, options = _spec(name, defines, name_expressions, user_options)
    key = (dev, name, tuple(sorted(defines.items())), name_expressions, options)
    mod = _MODULES.get(key)
    if mod is not None:
        return mod
    with _LOCK:
        mod = _MODULES.get(key)
        if mod is None:
            mkey = module_key(name, defines, name_expressions, user_options)
            mod = _load_prebuilt(cupy, mkey)
            _ORIGINS[(name, mkey)] = "compiled" if mod is None else "prebuilt"
            if mod is None:
                mod = cupy.RawModule(code=_code(name, defines), options=options,
                                     name_expressions=name_expressions or None)
                mod.compile()
            _MODULES[key] = mod
    return mod


# ------------------------------------------------------------------------------------ __constant__ arrays
_CONST_LOCK = threading.Lock()
_CONST_READERS: dict = {}  # (device, address of a __constant__ array) -> the stream its last kernels went on


class constant_memory:
    """``with constant_memory(ptr):`` around filling a module's ``__constant__`` array (``ptr``, from
    ``mod.get_global``) and launching the kernels that read it, on the current stream; ``as`` gives ``ptr``.

    A module's constant memory is one per device, shared by every stream: a second stream's upload, queued while
    the kernels of a first still run, would change the values under them (streams run concurrently). So the
    array's users take turns: one thread at a time uploads and launches, and a stream other than the one the last
    kernels went on first waits for everything queued there so far (an event recorded on it), which orders its
    upload after them. On one stream, the usual case, nothing waits: the stream's own order suffices. (A class,
    not a generator function: on an H200 host a small call's host time is the same with it as without, within
    1 us; as a generator it added 2-5 us.)"""

    __slots__ = ("ptr",)

    def __init__(self, ptr):
        self.ptr = ptr

    def __enter__(self):
        import cupy

        stream = cupy.cuda.get_current_stream()
        _CONST_LOCK.acquire()
        try:
            _order_after_readers(_CONST_READERS, (self.ptr.device_id, self.ptr.ptr), stream)
        except BaseException:
            _CONST_LOCK.release()
            raise
        return self.ptr

    def __exit__(self, *exc) -> None:
        _CONST_LOCK.release()


def _order_after_readers(readers: dict, key, stream) -> None:
    """``stream`` made to wait for the work queued so far on the last stream recorded for ``key`` where that is
    another stream, and recorded in its place (the stream object is held: its handle is not reused meanwhile)."""
    prev = readers.get(key)
    if prev is not None and prev.ptr != stream.ptr:
        stream.wait_event(prev.record())
    readers[key] = stream


# ------------------------------------------------------------------------- launches that start before the last ends

#: The environment variable that turns launch_after off (``SIGCONV_PDL=0``): every kernel then waits for the one
#: before it to end, as a plain launch does.
PDL_ENV = "SIGCONV_PDL"
_PDL_OFF: set = set()  # devices whose driver refused a launch with the attribute (plain launches from then on)


def kernel_params(args) -> tuple:
    """CUDA's kernel parameters of ``args`` as a plain CuPy launch takes them (device arrays, NumPy scalars, None
    for a null pointer), in cuda-bindings' form: (values, ctypes types)."""
    kinds = _param_kinds()
    values, types = [], []
    for a in args:
        kind = kinds.get(type(a))
        if kind is not None:
            values.append(0 if a is None else a.item())
            types.append(kind)
            continue
        ptr = getattr(getattr(a, "data", None), "ptr", None)  # (a device array)
        if ptr is None:
            raise TypeError(f"kernel argument of type {type(a).__name__}: give a device array, a NumPy scalar of a "
                            f"fixed size or None")
        values.append(int(ptr))
        types.append(kinds["pointer"])
    return tuple(values), tuple(types)


@functools.lru_cache(maxsize=None)
def _param_kinds() -> dict:
    """{Python type: ctypes type} of :func:`kernel_params` ("pointer": a device array's)."""
    import ctypes

    import numpy as np

    return {np.int32: ctypes.c_int, np.int64: ctypes.c_longlong, np.uint32: ctypes.c_uint,
            np.uint64: ctypes.c_ulonglong, np.float32: ctypes.c_float, np.float64: ctypes.c_double,
            type(None): ctypes.c_void_p, "pointer": ctypes.c_void_p}


@functools.lru_cache(maxsize=None)
def device_attributes(device: int) -> dict:
    """CuPy's ``Device(device).attributes``, memoised per device: the property queries every attribute of the device,
    tens of microseconds of a launch's host path."""
    import cupy

    return dict(cupy.cuda.Device(device).attributes)


def launch_after(fn, grid, block, args, shared_mem: int = 0) -> bool:
    """Launch CuPy's kernel ``fn`` on the current stream with programmatic stream serialization (CUDA's
    programmatic dependent launch, compute capability 9.0 and later, through cuda-bindings' cuLaunchKernelEx): its
    blocks may start while the kernel before it on the stream still runs, once every block of that one has executed
    ``sc_launch_dependents`` (kernels/common.cuh), and must call ``sc_grid_wait`` before reading what that kernel
    writes. Everything queued before that kernel has ended by then (it started only after), so ``fn`` may read it
    before the wait. The launcher calls this only right after launching such a kernel on the same stream. False,
    with nothing launched, where it cannot: no cuda-bindings, an older GPU, ``SIGCONV_PDL=0``, or a driver that
    refuses the launch or that the bindings cannot use (then never again on that device); the caller launches ``fn``
    as usual."""
    if os.environ.get(PDL_ENV, "1") == "0":
        return False
    import cupy

    dev = cupy.cuda.Device()
    if dev.id in _PDL_OFF or int(dev.compute_capability) < 90:
        return False
    cu = _cuda_driver()
    if cu is None:
        return False
    config = cu.CUlaunchConfig()
    config.gridDimX, config.gridDimY, config.gridDimZ = (tuple(int(g) for g in grid) + (1, 1))[:3]
    config.blockDimX, config.blockDimY, config.blockDimZ = (tuple(int(b) for b in block) + (1, 1))[:3]
    config.sharedMemBytes = int(shared_mem)
    config.hStream = cu.CUstream(cupy.cuda.get_current_stream().ptr)
    config.attrs = [_serialization_attribute()]
    config.numAttrs = 1
    params, func = kernel_params(args), cu.CUfunction(fn.kernel.ptr)
    try:
        err, = cu.cuLaunchKernelEx(config, func, params, 0)
    except Exception:  # noqa: BLE001 - bindings that cannot use this driver (another CUDA major): nothing launched
        err = None
    if err != cu.CUresult.CUDA_SUCCESS:
        _PDL_OFF.add(dev.id)
        return False
    return True


@functools.lru_cache(maxsize=None)
def _serialization_attribute():
    """The launch attribute of :func:`launch_after` (made once, only read: a launch copies it into its config)."""
    cu = _cuda_driver()
    attr = cu.CUlaunchAttribute()
    attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    attr.value.programmaticStreamSerializationAllowed = 1
    return attr


@functools.lru_cache(maxsize=None)
def _cuda_driver():
    """cuda-bindings' driver module, or None where it is not installed (the ``cuda`` extras install it)."""
    try:
        from cuda.bindings import driver
    except ImportError:
        return None
    return driver
