"""One GPU filtering for a pool of worker processes.

With one GPU, a batch of logs runs in a process pool, where each worker parses its file, works out the rate,
extends the edges and writes the output, with no interpreter lock shared with the others. One more process, the
GPU's (:class:`GPUService`), holds the CUDA context and does the filtering: a worker's whole-run filter
(``filters.filter_run`` on the cuda backend) sends its samples there over a local socket and gets the filtered
samples back. The GPU runs one log at a time, each in one transfer each way and one kernel
(:func:`sigconv.engine.gpu_file.correlate_span`); the host's halves run in the workers
(:func:`sigconv.engine.gpu_file.span_operands`).

The GPU's process starts first, so that CUDA's start (CuPy's import, the driver) overlaps the pool's start and the
first files' parsing; requests wait until it is up. Neither the coordinator nor the workers touch CUDA. Should it fail
to start, every request is answered with the reason (:class:`Unavailable`): the batch stops on "cuda", and on "auto"
the workers filter on the CPU.
"""

from __future__ import annotations

import mmap
import os
import secrets
import threading
from typing import Optional

import numpy as np

__all__ = ["GPUService", "Unavailable", "connect", "client", "served"]


class Unavailable(RuntimeError):
    """CUDA could not start in the process that serves the GPU; the message says why."""


def served(task: dict, streamed: bool) -> bool:
    """Whether a task's filtering can be served to a pool worker: logs read whole (every NPY; CSV and Parquet that
    are not ``streamed``, as ``stream.streamed`` judges: a streamed table keeps a block filter's state between blocks,
    so it runs where the GPU is)."""
    kind = task["kind"]
    return kind == "npy" or (kind in ("csv", "parquet") and not streamed)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


class GPUService:
    """The GPU's process, started by the coordinator (:meth:`start`) before it forks its pool: it makes the CUDA
    context, listens on a local socket (``address``, ``authkey`` for the workers' :func:`connect`) and answers each
    worker's requests in turn, one thread serving them all. The coordinator never touches CUDA meanwhile.

    ``status()`` tells what CUDA said (None: it runs; else why not), once it is known; :meth:`close` ends the
    process and returns the number of requests it served."""

    def __init__(self, proc, control, address, authkey: bytes):
        self._proc, self._control = proc, control
        self.address, self.authkey = address, authkey
        self._status = _UNKNOWN

    @classmethod
    def start(cls, ctx) -> "GPUService":
        """Start the GPU's process from multiprocessing context ``ctx``; returns once it listens."""
        here, there = ctx.Pipe()
        authkey = secrets.token_bytes(32)
        proc = ctx.Process(target=_serve, args=(there, authkey), name="sigconv-gpu", daemon=True)
        proc.start()
        there.close()
        try:
            address = here.recv()
        except EOFError:
            proc.join(5)
            raise RuntimeError(f"the GPU process ended at start (exit code {proc.exitcode})") from None
        return cls(proc, here, address, authkey)

    def status(self, timeout: Optional[float] = 0.0):
        """``_UNKNOWN`` until CUDA has started (or failed) in the GPU's process; then None, or the reason it cannot
        run. Waits up to ``timeout`` seconds (None: until it is known)."""
        if self._status is _UNKNOWN:
            try:
                if self._control.poll(timeout):
                    self._status = self._control.recv()
            except (EOFError, OSError):
                self._status = f"the GPU process ended (exit code {self._proc.exitcode})"
        return self._status

    def close(self, timeout: float = 2.0) -> int:
        """End the GPU's process; the number of requests it served (0 when it could not say)."""
        served = 0
        try:
            self.status(timeout)
            self._control.send("stop")
            if self._control.poll(timeout):
                served = self._control.recv()
        except (EOFError, OSError):
            pass
        self._control.close()
        if not served:  # it said nothing: make sure it ends (after "stop" it ends by itself, CUDA's teardown and all)
            self._proc.join(timeout)
            if self._proc.is_alive():
                self._proc.kill()  # it ignores SIGTERM (see _serve)
                self._proc.join(timeout)
        return served


_UNKNOWN = object()


def _serve(control, authkey: bytes) -> None:
    """The GPU's process: listen, start CUDA, then answer requests until the coordinator says stop (or ends)."""
    import signal
    from multiprocessing.connection import Listener, wait

    # Ctrl-C, and SIGTERM or SIGHUP sent to the whole group (systemd, a closed terminal), are the coordinator's to
    # handle: it stops the batch, then this process (``GPUService.close``), which writes no file
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    from sigconv._core import devices

    devices.start_driver()  # the driver starts while CuPy imports (_start_cuda)
    listener = Listener(family="AF_UNIX", authkey=authkey)
    control.send(listener.address)
    conns: list = []
    wake_r, wake_w = os.pipe()
    lock = threading.Lock()

    def accept():
        while True:
            try:
                c = listener.accept()
            except OSError:  # the listener closed
                return
            except Exception:  # noqa: BLE001 - a peer that failed the handshake
                continue
            with lock:
                conns.append(c)
            os.write(wake_w, b"x")

    threading.Thread(target=accept, daemon=True, name="sigconv-gpu-accept").start()
    error = _start_cuda()
    control.send(error)
    arenas: dict = {}
    served = 0
    try:
        while True:
            with lock:
                watch = list(conns)
            for ready in wait(watch + [control, wake_r]):
                if ready is wake_r:
                    os.read(wake_r, 4096)
                elif ready is control:
                    try:
                        control.recv()  # "stop"
                    except EOFError:  # the coordinator ended
                        return
                    control.send(served)
                    return
                else:
                    done = _answer(ready, error, arenas)
                    served += bool(done)
                    if done is None:  # the worker ended
                        with lock:
                            conns.remove(ready)
                        ready.close()
                        _unmap(arenas.pop(ready, None))
    finally:
        listener.close()


def _unmap(arena) -> None:
    """Unmap a worker's shared samples once it has gone; while something still holds a view of them (CuPy may, of
    its last request's copy) they are freed with that view instead."""
    if arena is None:
        return
    try:
        arena.close()
    except BufferError:
        pass


def _start_cuda() -> Optional[str]:
    """Make this process's CUDA context; None, or why CUDA cannot run here."""
    from sigconv._core import devices

    reason = devices.cuda_reason()
    if reason:
        return reason
    try:
        import cupy

        cupy.cuda.Device().use()
        cupy.empty(1, dtype=cupy.float32)  # the context, made now rather than at the first log
    except Exception as exc:  # noqa: BLE001
        return _first_line(exc)
    try:
        from sigconv.engine.gpu_file import warm_up

        warm_up()  # the direct kernels' modules, loaded before the first log rather than at it
    except Exception:  # noqa: BLE001 - the first log's filter says what is wrong
        pass
    return None


def _answer(conn, error: Optional[str], arenas: dict) -> Optional[bool]:
    """Read one request from ``conn`` and answer it: True when it was filtered, False when it was answered with an
    error, None when the worker has gone. ``arenas``: each connection's shared samples (see ``_Client``)."""
    from multiprocessing import BufferTooShort

    from sigconv.engine.gpu_file import correlate_span

    try:
        size, (C, m), pad, n, variant, block = conn.recv()
        if size is None:  # the samples follow on the socket
            xh = np.frombuffer(conn.recv_bytes(), dtype=np.float32).reshape(C, m)
            arena = None
        else:  # in the worker's shared memory; a new (larger) one comes as a file descriptor
            arena = arenas.get(conn)
            if arena is None or len(arena) != size:
                from multiprocessing.reduction import recv_handle

                fd = recv_handle(conn)
                try:
                    arena = arenas[conn] = mmap.mmap(fd, size)
                finally:
                    os.close(fd)
            xh = np.frombuffer(arena, dtype=np.float32, count=C * m).reshape(C, m)
        wh = np.frombuffer(conn.recv_bytes(), dtype=np.float32)
        if error is not None:
            conn.send(("unavailable", error))
            return False
        try:
            y = correlate_span(xh, wh, pad, n, variant=variant, block=block)
        except Exception as exc:  # noqa: BLE001 - the worker's file fails with it
            conn.send(("error", _first_line(exc)))
            return False
        del xh
        if arena is None:
            conn.send(("ok", y.shape))
            conn.send_bytes(np.ascontiguousarray(y, dtype=np.float32))
        else:  # over the samples, which are on the device by now
            np.copyto(np.frombuffer(arena, dtype=np.float32, count=C * n).reshape(C, n), y)
            conn.send(("ok", y.shape))
        return True
    except (EOFError, OSError, ValueError, BufferTooShort):  # the worker ended (or was stopped) mid-request
        return None


class _Client:
    """A worker's end: its connection to the GPU's process, opened on first use. The samples go through an arena
    of shared memory (a memfd, passed to the GPU's process once, replaced by a larger one when a log needs it): the
    request itself is a few bytes, and the filtered samples come back in the same place. Where memfds do not exist,
    the samples go over the socket."""

    def __init__(self, address, authkey: bytes):
        self.address, self.authkey = address, authkey
        self._conn = None
        self._arena = None
        self._new_fd: Optional[int] = None
        self.unavailable: Optional[str] = None

    def _arena_for(self, nbytes: int):
        """This worker's arena, of at least ``nbytes``; None where there is no memfd."""
        if not hasattr(os, "memfd_create"):
            return None
        if self._arena is None or len(self._arena) < nbytes:
            size = 1 << max(20, (nbytes - 1).bit_length())
            fd = os.memfd_create("sigconv-gpu", os.MFD_CLOEXEC)
            try:
                os.ftruncate(fd, size)
                arena = mmap.mmap(fd, size)
            except OSError:
                os.close(fd)
                return None
            if self._new_fd is not None:
                os.close(self._new_fd)
            if self._arena is not None:
                self._arena.close()
            self._arena, self._new_fd = arena, fd
        return self._arena

    def _drop(self) -> None:
        """Forget the connection (and the arena the GPU's process knew) after a request that did not end."""
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()
        if self._arena is not None:
            self._arena.close()
        if self._new_fd is not None:
            os.close(self._new_fd)
        self._arena = self._new_fd = None

    def filter_span(self, x: np.ndarray, taps, n: int, *, offset: int, delay: int, variant: str = "auto",
                    block=None) -> np.ndarray:
        """``gpu_file.filter_span`` on the GPU's process: the same arguments and (n, C) float64 outputs.
        Raises :class:`Unavailable` when CUDA did not start there, RuntimeError with its reason when the filter
        failed there."""
        from sigconv.engine.gpu_file import span_operands

        if self.unavailable is not None:
            raise Unavailable(self.unavailable)
        xh, wh, pad = span_operands(x, taps, n, offset=offset, delay=delay)
        C, m = xh.shape
        if self._conn is None:
            from multiprocessing.connection import Client

            self._conn = Client(self.address, family="AF_UNIX", authkey=self.authkey)
        conn = self._conn
        try:
            arena = self._arena_for(4 * C * max(m, n))
            if arena is None:
                conn.send((None, (C, m), pad, n, variant, block))
                conn.send_bytes(xh)
            else:
                np.copyto(np.frombuffer(arena, dtype=np.float32, count=C * m).reshape(C, m), xh)
                conn.send((len(arena), (C, m), pad, n, variant, block))
                if self._new_fd is not None:
                    from multiprocessing.reduction import send_handle

                    send_handle(conn, self._new_fd, None)
                    os.close(self._new_fd)
                    self._new_fd = None
            conn.send_bytes(wh)
            status, detail = conn.recv()
            if status == "ok":
                if arena is None:
                    y = np.frombuffer(conn.recv_bytes(), dtype=np.float32).reshape(detail)
                else:
                    y = np.frombuffer(arena, dtype=np.float32, count=C * n).reshape(detail)
                return y.T.astype(np.float64)
        except BaseException:  # a stop (SIGTERM) or a lost service mid-request: the stream is out of step
            self._drop()
            raise
        if status == "unavailable":
            self.unavailable = detail
            raise Unavailable(detail)
        raise RuntimeError(f"filtering on the GPU failed: {detail}")


_CLIENT: Optional[_Client] = None


def connect(address, authkey: bytes) -> None:
    """Make this process's cuda filtering go to the service at ``address`` (a pool worker's initializer)."""
    global _CLIENT
    _CLIENT = _Client(address, authkey)


def client() -> Optional[_Client]:
    """This process's connection to a service, or None where the GPU is filtered here."""
    return _CLIENT
