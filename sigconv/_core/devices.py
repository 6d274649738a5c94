"""What this machine can run: CuPy, a CUDA GPU, torch/cuDNN. Each probe runs once and gives a
one-line reason when something is missing, so ``import sigconv`` never fails for lack of a GPU."""

from __future__ import annotations

import functools
import os
from typing import Optional

from sigconv._core.errors import first_line

__all__ = ["unavailable", "cuda_reason", "cuda_quick_reason", "gpu_name", "resolve_backend", "start_driver"]


@functools.lru_cache(maxsize=None)
def _cupy_reason() -> Optional[str]:
    if os.environ.get("SIGCONV_DISABLE_CUDA"):
        return "CUDA disabled by SIGCONV_DISABLE_CUDA"
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a broken CUDA install raising at import
        return f"CuPy is not installed or not importable ({first_line(exc)}); pip install 'sigconv[cuda]'"
    return None


def cuda_quick_reason() -> Optional[str]:
    """Why CUDA cannot run here, as far as can be seen without importing CuPy or touching the driver (CUDA
    disabled, CuPy not installed); ``None`` when it may run, which :func:`cuda_reason` then decides (it costs
    CuPy's import and the driver's start, a few tenths of a second)."""
    if os.environ.get("SIGCONV_DISABLE_CUDA"):
        return "CUDA disabled by SIGCONV_DISABLE_CUDA"
    import importlib.util

    try:
        found = importlib.util.find_spec("cupy") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else _cupy_reason()


@functools.lru_cache(maxsize=None)
def cuda_reason() -> Optional[str]:
    """``None`` when CuPy can launch kernels on a GPU here, else why not (one line). Where CuPy is installed, the
    driver starts (:func:`start_driver`) before CuPy is imported, so that the two overlap: whoever asks is about
    to use the GPU."""
    if cuda_quick_reason() is None:
        start_driver()
    r = _cupy_reason()
    if r:
        return r
    import cupy

    try:
        n = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return f"no usable CUDA GPU ({first_line(exc)})"
    if n < 1:
        return "no CUDA GPU found"
    return None


@functools.lru_cache(maxsize=None)
def _torch_reason() -> Optional[str]:
    try:
        import torch
    except Exception:
        return "torch is not installed; pip install 'sigconv[bench]'"
    if not torch.cuda.is_available():
        return "torch sees no CUDA GPU"
    if not torch.backends.cudnn.is_available():
        return "cuDNN is not available to torch"
    return None


def unavailable(req: str) -> Optional[str]:
    """Reason why requirement ``req`` (``"cupy"``, ``"gpu"``, ``"torch"``) is unmet, or ``None``."""
    if req == "cupy":
        return _cupy_reason()
    if req == "gpu":
        return cuda_reason()
    if req == "torch":
        return _torch_reason()
    if req == "torch-cpu":
        try:
            import torch  # noqa: F401
        except Exception:
            return "torch is not installed; pip install 'sigconv[bench]'"
        return None
    raise ValueError(f"unknown requirement {req!r}")


_DRIVER_THREAD = None  # the thread of start_driver, once started


def start_driver() -> None:
    """Start the CUDA driver and the device's primary context in a thread, now, so that they overlap CuPy's import
    (both take about a quarter of a second; ``import cupy`` holds the interpreter, the driver does not). CuPy then
    finds the context made. Best effort and once per process: any failure (no driver, no device, not Linux) is left
    for :func:`cuda_reason` to report. The context stays retained until the process ends, as CuPy's does."""
    global _DRIVER_THREAD
    if _DRIVER_THREAD is not None or os.environ.get("SIGCONV_DISABLE_CUDA"):
        return

    def start():
        import ctypes

        try:
            lib = ctypes.CDLL("libcuda.so.1")
            if lib.cuInit(0) != 0:
                return
            dev, ctx = ctypes.c_int(), ctypes.c_void_p()
            if lib.cuDeviceGet(ctypes.byref(dev), 0) == 0:
                lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
        except (OSError, AttributeError):
            pass

    import threading

    _DRIVER_THREAD = threading.Thread(target=start, name="sigconv-cuda-driver", daemon=True)
    _DRIVER_THREAD.start()


@functools.lru_cache(maxsize=None)
def gpu_name() -> Optional[str]:
    """Name of CUDA device 0, or ``None``."""
    if cuda_reason():
        return None
    import cupy

    props = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)
    name = props["name"]
    return name.decode() if isinstance(name, bytes) else str(name)


def resolve_backend(backend: str) -> str:
    """Map ``"auto"`` to ``"cuda"`` when a usable GPU is present, else ``"cpu"``; check the others.

    Raises ``RuntimeError`` with a one-line reason when ``"cuda"`` is asked for and cannot run.
    """
    if backend == "auto":
        return "cuda" if cuda_reason() is None else "cpu"
    if backend == "cpu":
        return "cpu"
    if backend == "cuda":
        r = cuda_reason()
        if r:
            raise RuntimeError(f"backend 'cuda' is not usable here: {r}")
        return "cuda"
    raise ValueError(f"backend must be one of auto, cpu, cuda, got {backend!r}")
