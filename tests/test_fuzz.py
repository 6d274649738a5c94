"""Fuzzing sigconv's data-safety contract: damaged recordings for `denoise`, broken sensor logs for `batch`, and
random (often extreme) argument sets for both.

For every generated case: one ``sigconv: error:`` line on stderr (batch: its report lines), never a traceback or a
leaked warning; exit code 0, 1 or 2; no crash or hang; no ``*.part`` file left; no pre-existing file changed (inputs,
a sentinel beside the output); no non-finite sample written; all within a memory cap and a time limit. The cases
run in one long-lived child process (tests/fuzz_cases.py: ``sigconv.cli.main(argv)`` per case), plus a few real
``python -m sigconv`` subprocesses for the process-level contract. A failing case is listed with the command line
and a reproducer (``python tests/fuzz_cases.py --replay CASE``); the draws replay with the printed
SIGCONV_TEST_SEED.
"""

from __future__ import annotations

import re
import struct

import pytest
from hypothesis import HealthCheck, given, seed, settings

import fuzz_cases as fc
from conftest import SEED, run_cli

#: Cases per property in the default run (an in-process case takes ~0.1 s, a subprocess one ~2 s) and behind
#: --runslow.
N_DENOISE, N_BATCH, N_PROCESS = 140, 110, 4
N_DENOISE_SLOW, N_BATCH_SLOW, N_PROCESS_SLOW = 2500, 2000, 60


@pytest.fixture(scope="module")
def runner():
    r = fc.Runner()
    yield r
    r.close()


def _cause(violation: str) -> str:
    """A violation without its particulars (names, numbers, quoted text), to group failures by cause."""
    v = re.sub(r"'[^']*'|\"[^\"]*\"", "'…'", violation)
    v = re.sub(r"\b[\w.-]*\d[\w.-]*\b", "N", v)
    return v[:110]


def _summary(failures) -> str:
    groups: dict = {}
    for case, res, bad in failures:
        for v in bad:
            groups.setdefault(_cause(v), []).append((case, res, v))
    out = [f"{len(failures)} case(s) broke the contract, {len(groups)} distinct cause(s) "
           f"(replay the draws with SIGCONV_TEST_SEED={SEED}):"]
    for cause, items in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        case, res, v = items[0]
        out += [f"\n[{len(items)}x] {cause}", f"  e.g. {v}", f"  $ {fc.command_line(case)}",
                f"  exit {res.get('rc')}; stderr: {res.get('stderr', '')[:400]!r}", f"  reproduce: {fc.reproducer(case)}"]
    return "\n".join(out)


def _fuzz(strategy, n: int, run_one) -> None:
    """Run ``n`` drawn cases through ``run_one(case, index) -> (result, violations)``; assert none broke the
    contract, listing the failures grouped by cause."""
    failures, count = [], [0]

    @seed(SEED)
    @settings(max_examples=n, deadline=None, database=None, suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def draw(case):
        count[0] += 1
        res, bad = run_one(case, count[0])
        if bad:
            failures.append((case, res, bad))

    draw()
    assert count[0] >= min(n, 20), f"only {count[0]} cases drawn"
    assert not failures, _summary(failures)


def _in_process(runner, base):
    return lambda case, i: fc.run_case(runner, case, base, i)


def _subprocess(base):
    def run_one(case, i):
        work = base / f"p{i:04d}"
        work.mkdir()
        fc.materialize(case, work)
        before = fc.snapshot(work)
        try:
            r = run_cli(*case["argv"], cwd=work, timeout=120)
            res = {"rc": r.returncode, "stderr": r.stderr, "stdout": r.stdout, "warnings": []}
        except Exception as exc:  # subprocess.TimeoutExpired
            res = {"rc": None, "hang": True, "stderr": str(exc), "stdout": "", "warnings": []}
        if res["rc"] is not None and res["rc"] < 0:
            res = {**res, "crash": res["rc"]}
        return res, fc.check(case, res, before, fc.snapshot(work), work)

    return run_one


# ------------------------------------------------------------------------------------ the harness itself


def test_harness_passes_a_valid_case_and_flags_planted_damage(runner, tmp_path):
    """A valid recording with usual options holds the contract in the runner (so the cap and the time limit leave
    room for real work); the checker flags a planted temporary file, a changed input and a traceback."""
    spec = {"kind": "audio", "name": "in.wav", "fmt": "WAV", "subtype": "PCM_16", "ch": 2, "frames": 4000,
            "fs": 16000, "seed": 1, "extreme": None, "mut": []}
    case = {"files": [spec, {"kind": "raw", "name": "out/keep.txt", "data": "x"}],
            "argv": ["denoise", "in.wav", "-o", "out/o.wav", "--lowpass", "3000", "--taps", "63", "-q",
                     "--backend", "cpu"], "output": "out/o.wav", "inputs": ["in.wav"]}
    res, bad = fc.run_case(runner, case, tmp_path, 0)
    assert bad == [] and res["rc"] == 0, (bad, res)
    assert res["seconds"] < fc.CASE_TIMEOUT_S / 4, res
    assert runner.cap >= fc.MEM_CAP

    work = tmp_path / "c00000"
    before = fc.snapshot(work)
    (work / "out" / ".o.wav.abcdefgh.part").write_bytes(b"x")
    (work / "in.wav").write_bytes(b"clobbered")
    bad = fc.check(case, {"rc": 1, "stderr": "Traceback (most recent call last):\n  boom\n", "warnings": []},
                   before, fc.snapshot(work), work)
    text = "\n".join(bad)
    for needle in ("temporary file left", "pre-existing file changed: in.wav", "traceback on stderr",
                   "not one 'sigconv: error:' line"):
        assert needle in text, bad


def test_runner_answers_each_case_and_runs_on(runner, tmp_path):
    """A usage error comes back as its one line and exit 2, and the same child answers the next case."""
    case = {"files": [], "argv": ["tune", "--no-such-option-for-the-runner-check"], "inputs": []}
    res, bad = fc.run_case(runner, case, tmp_path, 1)
    assert res["rc"] == 2 and res["stderr"].startswith("sigconv: error:"), res
    res = runner.run(["--version"], tmp_path)
    assert res["rc"] == 0 and "sigconv" in res["stdout"], res


def test_header_rewrites_reach_the_fields():
    """The header mutations change what libsndfile reads (rate, channels) in WAV, AIFF and FLAC files."""
    import io

    import soundfile as sf

    for fmt in ("WAV", "AIFF", "FLAC"):
        spec = {"kind": "audio", "name": "x", "fmt": fmt, "subtype": "PCM_16", "ch": 2, "frames": 100,
                "fs": 8000, "seed": 0, "mut": [["hdr", "rate", 22050]]}
        assert sf.info(io.BytesIO(fc.audio_bytes(spec))).samplerate == 22050, fmt
    b = fc.npy_bytes({"kind": "npy", "shape": [5], "dtype": "float64", "header_edit": ["'descr': '<f8'",
                                                                                        "'descr': '<f2'"]})
    (hl,) = struct.unpack("<H", b[8:10])
    assert b"'<f2'" in b[10:10 + hl] and (10 + hl) % 64 == 0


# ------------------------------------------------------------------------------------ the fuzz properties


def test_denoise_damaged_recordings(runner, tmp_path):
    _fuzz(fc.denoise_case(), N_DENOISE, _in_process(runner, tmp_path))


def test_batch_broken_logs(runner, tmp_path):
    _fuzz(fc.batch_case(), N_BATCH, _in_process(runner, tmp_path))


def test_process_contract(tmp_path):
    """Real `python -m sigconv` processes (batch with its worker processes too): exit code, one-line stderr."""
    _fuzz(fc.any_case(jobs=False), N_PROCESS, _subprocess(tmp_path))


@pytest.mark.slow
def test_denoise_damaged_recordings_many(runner, tmp_path):
    _fuzz(fc.denoise_case(), N_DENOISE_SLOW, _in_process(runner, tmp_path))


@pytest.mark.slow
def test_batch_broken_logs_many(runner, tmp_path):
    _fuzz(fc.batch_case(), N_BATCH_SLOW, _in_process(runner, tmp_path))


@pytest.mark.slow
def test_process_contract_many(tmp_path):
    _fuzz(fc.any_case(jobs=False), N_PROCESS_SLOW, _subprocess(tmp_path))
