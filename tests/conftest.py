"""Shared fixtures and markers: `gpu` tests skip (with the reason) without a usable GPU, `slow` tests
run only with --runslow (or -m slow)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# CI runs the property tests on a fixed example sequence (a failing submission does not land, so CI must not
# depend on the draw); elsewhere every run draws new examples and keeps exploring.
settings.register_profile("ci", derandomize=True, deadline=None, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "samples"


def pytest_configure(config):
    """The tests keep sigconv's cache (autotune winners, unpacked kernels, file overviews) in a folder of their own,
    removed at the end: a test run neither reads the user's tuned choices nor leaves its own in their place. The
    pytest-xdist workers inherit the controller's folder."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    import tempfile

    config._sigconv_cache = (tempfile.TemporaryDirectory(prefix="sigconv-test-cache-"),
                             os.environ.get("SIGCONV_CACHE_DIR"))
    os.environ["SIGCONV_CACHE_DIR"] = config._sigconv_cache[0].name


def pytest_unconfigure(config):
    """The folder removed and the caller's $SIGCONV_CACHE_DIR back as it was."""
    cache = getattr(config, "_sigconv_cache", None)
    if cache is not None:
        folder, before = cache
        folder.cleanup()
        if before is None:
            os.environ.pop("SIGCONV_CACHE_DIR", None)
        else:
            os.environ["SIGCONV_CACHE_DIR"] = before


def pytest_addoption(parser):
    parser.addoption("--runslow", action="store_true", default=False, help="also run tests marked slow")


def pytest_collection_modifyitems(config, items):
    run_slow = config.getoption("--runslow") or "slow" in (config.getoption("-m") or "")
    gpu_reason = None
    if any("gpu" in item.keywords for item in items):
        from sigconv._core import devices as _devices

        gpu_reason = _devices.cuda_reason()
    if not run_slow and hasattr(config.option, "warn_unused_snapshots"):
        # the snapshots of the slow snapshot tests (the wide screens) are not compared in the default run: they are
        # unused there, and syrupy would fail the session for it; --runslow still fails on an unused one
        config.option.warn_unused_snapshots = True
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(pytest.mark.skip(reason="slow: run with --runslow"))
        if "gpu" in item.keywords and gpu_reason:
            item.add_marker(pytest.mark.skip(reason=f"no GPU: {gpu_reason}"))


def pytest_collection_finish(session):
    """A test module may start slow preparations for its selected tests at once (its ``prefetch(items)``): the
    kernel host builds compile on a spare core while the earlier modules run. Not in pytest-xdist workers: each
    collects every test but runs a share, and would build them all."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        return
    by_module: dict = {}
    for item in session.items:
        mod = getattr(item, "module", None)
        if mod is not None and callable(getattr(mod, "prefetch", None)):
            by_module.setdefault(mod, []).append(item)
    for mod, items in by_module.items():
        mod.prefetch(items)


#: Seed of every test's random inputs: $SIGCONV_TEST_SEED to replay a failure, else a fresh one for each run.
SEED = int(os.environ.get("SIGCONV_TEST_SEED") or np.random.SeedSequence().entropy % 2**32)


def pytest_report_header(config):
    return f"random inputs: seed {SEED} (replay with SIGCONV_TEST_SEED={SEED})"


@pytest.fixture
def rng(request):
    """The one source of random inputs in the tests: seeded from the session seed and the test's id, so each test
    draws its own stream and a failure replays with SIGCONV_TEST_SEED (the seed is printed with the failure)."""
    import zlib

    seed = (SEED, zlib.crc32(request.node.nodeid.encode()))
    print(f"rng seed: SIGCONV_TEST_SEED={SEED} ({request.node.nodeid})")
    return np.random.default_rng(seed)


def rel_err(y, ref, scale=None) -> float:
    """||y - ref|| / ||ref||, or / ``scale`` when given. For float32 results of short sums pass the norm of
    the same operation on |x| and |h|: rounding error is bounded by that, while ||ref|| can be tiny through
    cancellation (one output value of a few terms), which would make a correct result look wrong."""
    y, ref = np.asarray(y, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    assert y.shape == ref.shape, f"shape {y.shape} != reference {ref.shape}"
    assert np.all(np.isfinite(y)), f"non-finite output at {np.argwhere(~np.isfinite(y))[:3].tolist()}"
    den = np.linalg.norm(ref) if scale is None else scale
    return float(np.linalg.norm(y - ref) / (den if den > 0 else 1.0))


TOL = {np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-10}


def write_audio(path, data, fs=48000, subtype="PCM_16", format=None):
    import soundfile as sf

    sf.write(str(path), data, fs, subtype=subtype, format=format)
    return Path(path)


def run_cli(*args, cwd=None, env=None, timeout=300):
    """Run `python -m sigconv ARGS` in a subprocess; returns CompletedProcess (text). A command still running after
    ``timeout`` seconds is sent SIGABRT, which Python's fault handler (PYTHONFAULTHANDLER, on here) answers by printing
    every thread's stack: the test fails with where the command hung, not a bare timeout."""
    import signal
    import subprocess

    e = dict(os.environ)
    e["PYTHONPATH"] = str(ROOT) + os.pathsep + e.get("PYTHONPATH", "")
    e.setdefault("PYTHONFAULTHANDLER", "1")
    if env:
        e.update(env)
    cmd = [sys.executable, "-m", "sigconv", *map(str, args)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env=e) as p:
        try:
            out, err = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.send_signal(signal.SIGABRT)
            try:
                out, err = p.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                out, err = p.communicate()
            raise AssertionError(f"{' '.join(cmd)}: still running after {timeout} s; its stacks:\n{err[-12000:]}")
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


def terminal_signals() -> None:
    """``preexec_fn`` of a child process that a test stops as a terminal would (Ctrl-C's SIGINT, a closed terminal's
    SIGHUP): both at their default action in the child, whatever this process inherited (``nohup`` ignores SIGHUP, a
    shell's background job SIGINT, and a child inherits what is ignored), so that the test sees sigconv's own
    handling of them."""
    import signal

    for sig in (signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, signal.SIG_DFL)


def cli_peak_rss(*args, timeout=600):
    """Run `python -m sigconv ARGS` under a fresh parent whose only child it is, so that RUSAGE_CHILDREN is that
    child's peak: returns (exit code, peak RSS in kB, parent's stderr)."""
    import subprocess

    code = ("import resource, subprocess, sys, os;"
            "r=subprocess.run([sys.executable,'-m','sigconv',*sys.argv[2:]],env=dict(os.environ,PYTHONPATH=sys.argv[1]));"
            "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    r = subprocess.run([sys.executable, "-c", code, str(ROOT), *map(str, args)], capture_output=True, text=True,
                       timeout=timeout)
    rc, peak_kb = map(int, r.stdout.split())
    return rc, peak_kb, r.stderr
