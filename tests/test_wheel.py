"""The built wheel carries kernels/ and apps/ and works from a fresh virtual environment, outside the checkout."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile

from conftest import ROOT, SAMPLES


def test_wheel_installs_and_runs_outside_checkout(tmp_path):
    dist = tmp_path / "dist"
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                        str(dist), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    wheel = next(dist.glob("sigconv-*.whl"))
    names = zipfile.ZipFile(wheel).namelist()
    assert "sigconv/kernels/common.cuh" in names and "sigconv/kernels/conv1d.cu" in names
    assert "sigconv/apps/__init__.py" in names
    venv = tmp_path / "venv"
    # system site packages supply numpy/scipy/soundfile/textual already installed here (no network needed)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True, timeout=120)
    py = venv / "bin" / "python"
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
