"""The built wheel carries kernels/ and apps/ and works from a fresh virtual environment, outside the checkout."""

from __future__ import annotations

import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from conftest import ROOT, SAMPLES


def _site_dirs() -> list[str]:
    """The folders this interpreter imports installed packages from, in its own order: its site-packages (a
    virtual environment's when the suite runs in one, the base interpreter's otherwise) and the user site if on."""
    dirs = [*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if site.ENABLE_USER_SITE:
        dirs.append(site.getusersitepackages())
    dirs = [d for d in dict.fromkeys(os.path.realpath(d) for d in dirs) if os.path.isdir(d)]
    on_path = [os.path.realpath(p) for p in sys.path if p]
    return sorted(dirs, key=lambda d: on_path.index(d) if d in on_path else len(on_path))


def _venv_seeing_this_interpreter(venv):
    """A fresh virtual environment that sees the packages this interpreter sees (numpy, scipy, pip ...), offline.

    ``--system-site-packages`` would not do: it exposes the BASE interpreter's site-packages, not those of the
    virtual environment the suite may be running in. So the new one gets no system site packages and a .pth file
    listing this interpreter's site folders; they come after its own site-packages on sys.path, so what is
    installed into it (the wheel) shadows a sigconv installed here."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
    own = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                         capture_output=True, text=True, check=True, timeout=60).stdout.strip()
    (Path(own) / "_sigconv_test_parent_site.pth").write_text("".join(d + "\n" for d in _site_dirs()))
    return py


def test_wheel_installs_and_runs_outside_checkout(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(dist), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    wheel = next(dist.glob("sigconv-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "sigconv/kernels/common.cuh" in names and "sigconv/kernels/conv1d.cu" in names
    assert "sigconv/apps/__init__.py" in names
    # the pre-built kernels travel too: the index and one binary per module and architecture
    assert "sigconv/kernels/prebuilt/index.json" in names
    index = json.loads(zipfile.ZipFile(wheel).read("sigconv/kernels/prebuilt/index.json"))
    assert {f"sigconv/kernels/prebuilt/{k}.sm_{a}.cubin.xz" for k in index["modules"] for a in index["archs"]} <= \
        set(names)
    venv = tmp_path / "venv"
    py = _venv_seeing_this_interpreter(venv)
    # the venv imports the dependencies (and pip) from where this interpreter does, not from the base interpreter
    import numpy
    import scipy

    r = subprocess.run([str(py), "-c", "import os, numpy, scipy; print(os.path.realpath(numpy.__file__)); "
                        "print(os.path.realpath(scipy.__file__))"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == [os.path.realpath(numpy.__file__), os.path.realpath(scipy.__file__)], r.stdout
    # --ignore-installed: CI installs sigconv itself into the interpreter whose site-packages this venv sees; without
    # it pip reports "already satisfied" and puts nothing (no bin/sigconv) in the venv
    r = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--ignore-installed",
                        str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    work = tmp_path / "elsewhere"
    work.mkdir()
    shutil.copy(SAMPLES / "speech_noisy.wav", work / "speech.wav")
    exe = venv / "bin" / "sigconv"
    assert exe.is_file(), f"the wheel installed no console script into the venv: {r.stdout} {r.stderr}"
    r = subprocess.run([str(exe), "--version"], cwd=work, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stdout.startswith("sigconv "), r.stderr
    r = subprocess.run([str(exe), "denoise", "speech.wav"], cwd=work, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert (work / "speech.denoised.wav").stat().st_size > 900_000
    r = subprocess.run([str(py), "-c", "import sigconv, sigconv._kernels as k; print(sigconv.__file__); "
                        "print(k.kernel_dir()); from sigconv.cli.tui import apps_package; p = apps_package(); "
                        "print(p.__file__); import importlib; app = importlib.import_module(p.__name__ + '.app')"
                        ".make_app('speech.wav'); print(type(app).__name__)"],
                       cwd=work, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    mod_file, kdir, apps_file, app_type = r.stdout.split()
    assert str(venv) in mod_file and str(venv) in kdir and str(venv) in apps_file, r.stdout
    assert "sigconv/apps" in apps_file and app_type.endswith("App")


def test_suite_imports_the_checkout():
    """Run in-process, the tests exercise this checkout's sigconv, not one installed into the interpreter."""
    import sigconv

    assert os.path.realpath(sigconv.__file__) == str(ROOT / "sigconv" / "__init__.py")


def test_suite_tests_the_checkout_wherever_pytest_starts(tmp_path):
    """Started from another directory (so the checkout is not the current one on sys.path), pytest still imports
    sigconv from the checkout (pyproject's pythonpath), whether or not a sigconv is installed."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        f"{ROOT / 'tests' / 'test_wheel.py'}::test_suite_imports_the_checkout"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout[-2000:] + r.stderr[-2000:]
