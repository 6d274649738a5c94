"""Generated damaged inputs and argument sets for the data-safety fuzz suite (tests/test_fuzz.py), the in-process
case runner and the contract check.

A case is a JSON-able dict: the files to create in an empty work folder (each described by a small spec whose
sample values come from a seed) and the ``sigconv`` argument list, run with the work folder as the current
directory. :func:`materialize` builds the files, :class:`Runner` runs cases in one long-lived child process
(``python tests/fuzz_cases.py --serve``: it imports ``sigconv.cli`` once and calls ``main(argv)`` per case under
a memory cap and a time limit), :func:`check` lists the ways a finished case broke the contract:

* stderr: no traceback; an error is one line ``sigconv: error: MSG`` (batch: one line per failed file);
* exit code 0, 1 or 2; no crash, no hang, no escaped exception, no leaked Python warning;
* no ``*.part`` file left anywhere in the work folder;
* no pre-existing file changed or removed (inputs, sentinels), no file left behind by a failed ``denoise``;
* no non-finite sample written to an output that the input did not already hold as a gap.

Replay one case from a report: ``python tests/fuzz_cases.py --replay 'CASE-JSON'`` builds its files in a new
temporary folder and runs ``python -m sigconv`` there in a subprocess, printing the exit code and stderr.
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import shlex
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]

#: Address-space cap of the runner child (RLIMIT_AS): at least this, or what it holds after its imports plus
#: MEM_HEADROOM, whichever is larger (pyarrow and BLAS reserve address space they never touch).
MEM_CAP = 4 << 30
MEM_HEADROOM = 3 << 30
#: Wall-time limit of one case in the runner (its own timer), and the parent's hard limit on top of it.
CASE_TIMEOUT_S = 20.0
HARD_GRACE_S = 25.0

#: stderr lines a batch run may print besides ``sigconv: error:`` (its summary, warnings, per-file failures).
BATCH_PREFIXES = ("failed: ", "warning: ", "note: ", "batch: ", "filters used", "  ", "removed ")

AUDIO_FORMATS = {
    "WAV": ("PCM_U8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"),
    "FLAC": ("PCM_S8", "PCM_16", "PCM_24"),
    "AIFF": ("PCM_S8", "PCM_16", "PCM_24", "PCM_32", "FLOAT", "DOUBLE"),
}
AUDIO_EXT = {"WAV": ".wav", "FLAC": ".flac", "AIFF": ".aiff"}
AUDIO_READ_EXT = {".wav", ".flac", ".aiff", ".aif", ".ogg", ".au", ".caf", ".w64", ".rf64", ".mp3", ".opus"}


# ===================================================================================================== file builders


def _rng(spec) -> np.random.Generator:
    return np.random.default_rng(int(spec.get("seed", 0)))


def _ext80(x: float) -> bytes:
    """An IEEE 754 80-bit extended float, big-endian (the sample rate of an AIFF COMM chunk)."""
    if x == 0:
        return bytes(10)
    if math.isnan(x):
        return b"\x7f\xff" + b"\xc0" + bytes(7)
    if math.isinf(x):
        return (b"\xff\xff" if x < 0 else b"\x7f\xff") + b"\x80" + bytes(7)
    sign = 0x8000 if x < 0 else 0
    m, e = math.frexp(abs(x))  # x = m * 2**e, 0.5 <= m < 1
    exp = e - 1 + 16383
    mant = int(m * (1 << 64))
    return struct.pack(">HQ", sign | exp, mant)


def _riff_chunks(b: bytes, start: int, big: bool):
    """(id, offset of the size field, offset of the body, size) of each chunk from ``start``."""
    pos, fmt = start, ">I" if big else "<I"
    while pos + 8 <= len(b):
        cid, size = b[pos:pos + 4], struct.unpack(fmt, b[pos + 4:pos + 8])[0]
        yield cid, pos + 4, pos + 8, size
        pos += 8 + size + (size & 1)


def _int(v) -> int:
    try:
        return int(v)
    except (ValueError, OverflowError):
        return 0xFFFFFFFF


def _rewrite_header(b: bytearray, fmt: str, field: str, value) -> None:
    """Set a header field of a WAV, AIFF or FLAC file in place (no-op when the field is not found)."""
    if field != "rate" or fmt != "AIFF":
        value = _int(value)
    if fmt == "WAV":
        for cid, szo, body, size in _riff_chunks(bytes(b), 12, False):
            if cid == b"fmt " and body + 16 <= len(b):
                spots = {"channels": (body + 2, "<H"), "rate": (body + 4, "<I"), "byterate": (body + 8, "<I"),
                         "blockalign": (body + 12, "<H"), "bits": (body + 14, "<H"), "format": (body, "<H")}
                if field in spots:
                    off, f = spots[field]
                    b[off:off + struct.calcsize(f)] = struct.pack(f, int(value) & (2 ** (8 * struct.calcsize(f)) - 1))
            if cid == b"data" and field == "datasize":
                b[szo:szo + 4] = struct.pack("<I", int(value) & 0xFFFFFFFF)
        if field == "riffsize":
            b[4:8] = struct.pack("<I", int(value) & 0xFFFFFFFF)
    elif fmt == "AIFF":
        for cid, szo, body, size in _riff_chunks(bytes(b), 12, True):
            if cid == b"COMM" and body + 18 <= len(b):
                if field == "channels":
                    b[body:body + 2] = struct.pack(">H", int(value) & 0xFFFF)
                elif field == "frames":
                    b[body + 2:body + 6] = struct.pack(">I", int(value) & 0xFFFFFFFF)
                elif field == "bits":
                    b[body + 6:body + 8] = struct.pack(">H", int(value) & 0xFFFF)
                elif field == "rate":
                    b[body + 8:body + 18] = _ext80(float(value))
            if cid == b"SSND" and field == "datasize":
                b[szo:szo + 4] = struct.pack(">I", int(value) & 0xFFFFFFFF)
    elif fmt == "FLAC" and b[:4] == b"fLaC" and len(b) >= 26:
        (word,) = struct.unpack(">Q", bytes(b[18:26]))
        rate, ch, bps, total = word >> 44, (word >> 41) & 7, (word >> 36) & 31, word & ((1 << 36) - 1)
        if field == "rate":
            rate = int(value) & 0xFFFFF
        elif field == "channels":
            ch = (int(value) - 1) & 7
        elif field == "bits":
            bps = (int(value) - 1) & 31
        elif field in ("frames", "datasize"):
            total = int(value) & ((1 << 36) - 1)
        b[18:26] = struct.pack(">Q", (rate << 44) | (ch << 41) | (bps << 36) | total)


def _mutate(data: bytes, muts, fmt: str) -> bytes:
    b = bytearray(data)
    for m in muts:
        op = m[0]
        if op == "trunc":
            b = b[:int(m[1] * len(b))]
        elif op == "flip" and b:
            pos = int(m[1] * min(len(b), 64)) if m[3] else int(m[1] * len(b))
            b[min(pos, len(b) - 1)] ^= m[2]
        elif op == "hdr":
            _rewrite_header(b, fmt, m[1], m[2])
        elif op == "append":
            b += bytes([m[1]]) * m[2]
        elif op == "empty":
            b = bytearray()
    return bytes(b)


def audio_bytes(spec) -> bytes:
    """A small valid recording as the spec says (format, subtype, channels, frames, rate, extreme samples), then
    mutated by ``spec['mut']``."""
    import soundfile as sf

    rng = _rng(spec)
    x = 0.3 * rng.standard_normal((spec["frames"], spec["ch"]))
    ext = spec.get("extreme")
    if ext is not None and x.size:
        idx = rng.choice(x.size, size=max(1, x.size // 7), replace=False)
        x.flat[idx] = float(ext)
    buf = io.BytesIO()
    sf.write(buf, x, spec["fs"], subtype=spec["subtype"], format=spec["fmt"])
    return _mutate(buf.getvalue(), spec.get("mut", ()), spec["fmt"])


def _cell(rng, kind: str, t: float) -> str:
    if kind == "time":
        return repr(t)
    if kind == "float":
        return repr(float(rng.standard_normal()))
    if kind == "int":
        return str(int(rng.integers(-1000, 1000)))
    if kind == "offset":
        return repr(20.0 + 0.1 * float(rng.standard_normal()))
    if kind == "text":
        return rng.choice(["abc", "x y", "on", "", "N/A", "1,5", "0x10", "--"])
    if kind == "mixed":
        return repr(float(rng.standard_normal())) if rng.random() < 0.8 else rng.choice(["?", "", "err", "1e", "--1"])
    if kind == "nonfinite":
        return rng.choice(["nan", "inf", "-inf", "NaN", repr(float(rng.standard_normal()))])
    if kind == "huge":
        return rng.choice(["1e308", "-1.7e308", "1e300", "3.4e38"])
    if kind == "tiny":
        return rng.choice(["1e-320", "5e-324", "-1e-310", "0"])
    if kind == "bool":
        return rng.choice(["true", "false"])
    if kind == "quoted":
        return '"' + repr(float(rng.standard_normal())) + '"'
    if kind == "empty":
        return ""
    return "?"


def csv_bytes(spec) -> bytes:
    """A sensor-log CSV: a time column (start t0, step dt, maybe jittered or out of order) and value columns of
    the kinds in the spec; with a BOM, quotes, ragged rows, duplicate names or no header as the spec says."""
    rng = _rng(spec)
    cols, names = spec["cols"], list(spec["names"])
    rows = []
    t0, dt = spec["t0"], spec["dt"]
    for i in range(spec["rows"]):
        t = t0 + i * dt
        if spec.get("jitter") and rng.random() < 0.2:
            t += dt * float(rng.uniform(-2, 2))
        row = [_cell(rng, k, t) for k in cols]
        if spec.get("ragged") and rng.random() < 0.15:
            row = row[:-1] if rng.random() < 0.5 and len(row) > 1 else row + ["1"]
        rows.append(",".join(row))
    lines = ([",".join(names)] if spec.get("header", True) else []) + rows
    eol = "\r\n" if spec.get("crlf") else "\n"
    text = eol.join(lines) + (eol if spec.get("final_eol", True) else "")
    data = text.encode()
    if spec.get("bom"):
        data = b"\xef\xbb\xbf" + data
    return _mutate(data, spec.get("mut", ()), "CSV")


def parquet_bytes(spec) -> bytes:
    """A Parquet table with columns of the types in the spec (numbers, bools, strings, timestamps, dates,
    decimals, lists, structs, dictionaries, nulls), maybe with nulls, then mutated."""
    import decimal

    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = _rng(spec)
    n = spec["rows"]
    arrays, names = [], []
    for name, typ in zip(spec["names"], spec["types"]):
        null = rng.random(n) < spec.get("nulls", 0.0)
        mask = null if null.any() else None
        v = rng.standard_normal(n)
        if typ == "time_f64":
            a = pa.array(spec["t0"] + spec["dt"] * np.arange(n), type=pa.float64())
        elif typ == "ts_ns":
            a = pa.array((1_700_000_000_000_000_000 + np.arange(n) * 10_000_000).astype("datetime64[ns]"))
        elif typ == "ts_s_tz":
            a = pa.array(np.arange(n).astype("datetime64[s]"), type=pa.timestamp("s", tz="UTC"))
        elif typ == "date32":
            a = pa.array(np.arange(n).astype("datetime64[D]"), type=pa.date32())
        elif typ in ("float64", "float32", "float16"):
            a = pa.array(v.astype(typ), mask=mask)
        elif typ in ("int8", "int64", "uint64", "uint8"):
            info = np.iinfo(typ)
            a = pa.array(rng.integers(info.min, info.max, n, dtype=typ, endpoint=True), mask=mask)
        elif typ == "huge":
            a = pa.array(np.full(n, 1e308) * np.sign(v), mask=mask)
        elif typ == "nonfinite":
            a = pa.array(np.where(rng.random(n) < 0.3, np.inf, v), mask=mask)
        elif typ == "bool":
            a = pa.array(v > 0, mask=mask)
        elif typ == "string":
            a = pa.array([f"s{i}" for i in range(n)], mask=mask)
        elif typ == "decimal":
            a = pa.array([decimal.Decimal(f"{x:.3f}") for x in v], type=pa.decimal128(10, 3))
        elif typ == "list":
            a = pa.array([[float(x)] for x in v])
        elif typ == "struct":
            a = pa.array([{"a": float(x)} for x in v])
        elif typ == "dict":
            a = pa.array([f"k{i % 3}" for i in range(n)]).dictionary_encode()
        elif typ == "null":
            a = pa.nulls(n)
        elif typ == "duration":
            a = pa.array(np.arange(n).astype("timedelta64[ms]"))
        else:
            a = pa.array(v)
        arrays.append(a)
        names.append(name)
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_arrays(arrays, names=names), buf)
    return _mutate(buf.getvalue(), spec.get("mut", ()), "PARQUET")


def npy_bytes(spec) -> bytes:
    """An NPY array of the spec's shape, dtype and values (normal, with NaN/inf, huge), in C or Fortran order,
    then mutated (its header too)."""
    rng = _rng(spec)
    shape, dt = tuple(spec["shape"]), spec["dtype"]
    v = rng.standard_normal(shape) if shape else np.float64(rng.standard_normal())
    vals = spec.get("values", "normal")
    v = np.asarray(v)
    if vals == "nonfinite" and v.size:
        v.flat[rng.choice(v.size, max(1, v.size // 5), replace=False)] = rng.choice([np.nan, np.inf, -np.inf])
    elif vals == "huge":
        v = v * 1e307 if dt in ("float64", ">f8") else v * 3e37
    if dt == "object":
        a = np.empty(shape, dtype=object)
        a[...] = 1.5
    elif dt == "structured":
        a = np.zeros(shape, dtype=[("a", "f8"), ("b", "f8")])
    elif dt == "str":
        a = v.astype("U8")
    elif dt == "datetime64":
        a = np.zeros(shape, dtype="datetime64[s]")
    elif dt.startswith(("int", "uint")):
        info = np.iinfo(dt)
        with np.errstate(all="ignore"):
            a = np.nan_to_num(np.clip(v * info.max / 3, info.min, info.max)).astype(dt)
    else:
        with np.errstate(all="ignore"):
            a = v.astype(dt)
    if spec.get("fortran") and a.ndim > 1:
        a = np.asfortranarray(a)
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=True)
    b = buf.getvalue()
    hdr = spec.get("header_edit")
    if hdr and b[:6] == b"\x93NUMPY" and b[6] == 1:
        old, new = hdr
        (hl,) = struct.unpack("<H", b[8:10])
        head = b[10:10 + hl].replace(old.encode(), new.encode(), 1)
        body = head.rstrip(b" \n")
        if len(body) + 1 <= hl:  # keep the header length (and the data's alignment): pad with spaces
            head = body + b" " * (hl - len(body) - 1) + b"\n"
        b = b[:8] + struct.pack("<H", len(head)) + head + b[10 + hl:]
    return _mutate(b, spec.get("mut", ()), "NPY")


SIDECARS = {
    "ok": '{"fs": 100}', "bool": '{"fs": true}', "negative": '{"fs": -5}', "string": '{"fs": "100"}',
    "huge": '{"fs": 1e308}', "overflow": '{"fs": 1e999}', "zero": '{"fs": 0}', "nan": '{"fs": NaN}',
    "null": '{"fs": null}', "empty": "{}", "list": "[]", "garbage": "{fs: ", "tiny": '{"fs": 1e-300}',
    "nested": '{"fs": {"hz": 100}}', "big_int": '{"fs": ' + "9" * 400 + "}", "ghz": '{"fs": 1e9}',
}


def file_bytes(spec) -> bytes:
    kind = spec["kind"]
    if kind == "audio":
        return audio_bytes(spec)
    if kind == "csv":
        return csv_bytes(spec)
    if kind == "parquet":
        return parquet_bytes(spec)
    if kind == "npy":
        return npy_bytes(spec)
    if kind == "raw":
        return bytes(spec["data"], "latin-1")
    raise ValueError(kind)


def materialize(case, work: Path) -> None:
    """Create the case's files (and folders) in ``work``."""
    for d in case.get("dirs", ()):
        (work / d).mkdir(parents=True, exist_ok=True)
    for f in case["files"]:
        p = work / f["name"]
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(file_bytes(f))
        if f.get("sidecar"):
            p.with_name(p.name + ".json").write_text(SIDECARS[f["sidecar"]])


# ===================================================================================================== strategies

from hypothesis import strategies as st  # noqa: E402

NAMES = ["in", "a b", "line\nbreak", "ünï", "semi;colon", "quote'd", "tab\tname", "-dash"]
#: Frequencies: usual ones (drawn most of the time) and extreme or invalid ones.
FREQS_OK = ["20", "50", "100", "300", "1000", "3000"]
FREQS_EXTREME = ["0", "-1", "1e-9", "0.5", "1", "3999.9", "4000", "7999", "8000", "20000", "24000", "1e9", "1e308",
                 "nan", "inf", "abc", ""]
FREQS = FREQS_OK + FREQS_EXTREME
TAPS_OK = ["3", "31", "63", "64", "255"]
TAPS_EXTREME = ["1", "2", "4", "1001", "100001", "1000000000", "99999999999999999999", "0", "-5", "1.5"]
HDR_VALUES = {"rate": [0, 1, 7, 1_000_000_000, 0xFFFFFFFF, 192000, "inf", "nan", 1e-300, 1e300],
              "channels": [0, 1000, 65535, 3], "datasize": [0, 0xFFFFFFFF, 1 << 31, 12345],
              "bits": [0, 7, 64, 65535], "frames": [0, 0xFFFFFFFF, 10 ** 9], "blockalign": [0, 1, 65535],
              "byterate": [0, 0xFFFFFFFF], "format": [0, 2, 0xFFFE, 3], "riffsize": [0, 0xFFFFFFFF, 8]}


def _mutation(header_fields=True):
    ops = [st.tuples(st.just("trunc"), st.floats(0.02, 0.999)),
           st.tuples(st.just("flip"), st.floats(0, 1, exclude_max=True), st.integers(1, 255), st.booleans()),
           st.tuples(st.just("append"), st.integers(0, 255), st.integers(1, 4000))]
    if header_fields:
        ops.append(st.sampled_from(sorted(HDR_VALUES)).flatmap(
            lambda f: st.tuples(st.just("hdr"), st.just(f), st.sampled_from(HDR_VALUES[f]))))
    return st.one_of(*ops).map(list)


def _name(ext: str, weird=True):
    """in.EXT, or (one time in three) an odd name: spaces, a newline, a tab, quotes, non-ASCII, a leading dash."""
    base = st.integers(1, 3).flatmap(lambda k: st.sampled_from(NAMES) if weird and k == 3 else st.just("in"))
    return base.map(lambda b: b + ext)


@st.composite
def audio_spec(draw, name=None, damaged=True, folder=""):
    fmt = draw(st.sampled_from(sorted(AUDIO_FORMATS)))
    subtype = draw(st.sampled_from(AUDIO_FORMATS[fmt]))
    extreme = None
    if subtype in ("FLOAT", "DOUBLE") and draw(st.booleans()):
        extreme = draw(st.sampled_from([1e35, 3e38, 1e-40, "nan", "inf", "-inf"]
                                       + ([1e308, -1e308] if subtype == "DOUBLE" else [])))
    muts = draw(st.lists(_mutation(), min_size=1, max_size=2)) if damaged and draw(st.booleans()) else []
    ext = AUDIO_EXT[fmt]
    if damaged and _chance(draw, 10):
        ext = draw(st.sampled_from([".flac", ".wav", ".aiff", ".csv", ".npy", ".txt", "", ".WAV", ".ogg"]))
    if damaged and _chance(draw, 20):
        muts = [["empty"]]
    if name is None:
        name = draw(_name(ext, weird=damaged))
    return {"kind": "audio", "name": folder + name, "fmt": fmt, "subtype": subtype,
            "ch": draw(st.sampled_from([1, 1, 2, 2, 3])),
            "frames": draw(st.one_of(_uniform(2000, 30000), _uniform(9, 2000), st.integers(0, 8))),
            "fs": draw(st.sampled_from([8000, 16000, 44100, 48000, 100, 1000])),
            "seed": draw(st.integers(0, 2 ** 31)), "extreme": extreme, "mut": muts}


def _uniform(lo: int, hi: int):
    """An integer in [lo, hi] spread evenly (Hypothesis alone favours the smallest)."""
    return st.integers(0, 2 ** 32 - 1).map(lambda v: lo + v % (hi - lo + 1))


def _chance(draw, k: int) -> bool:
    """True about one time in ``k`` (Hypothesis's simplest draw, 1, gives False: the benign branch)."""
    return draw(st.integers(1, k)) == k


def _opt(flag, values, extreme=()):
    """[flag, value]: a value from ``values``, or (one time in four) from ``extreme``."""
    v = st.sampled_from(values)
    if extreme:
        v = st.integers(0, 3).flatmap(lambda k: st.sampled_from(list(extreme)) if k == 3 else st.sampled_from(values))
    return v.map(lambda x: [flag, x])


def _freq():
    return st.integers(0, 3).flatmap(lambda k: st.sampled_from(FREQS_EXTREME if k == 3 else FREQS_OK))


def fir_args():
    return st.lists(st.one_of(
        _opt("--lowpass", FREQS_OK, FREQS_EXTREME), _opt("--highpass", FREQS_OK, FREQS_EXTREME),
        _opt("--notch-width", ["5", "10"], FREQS_EXTREME), _opt("--transition", FREQS_OK, FREQS_EXTREME),
        _opt("--taps", TAPS_OK, TAPS_EXTREME), _opt("--phase", ["zero", "linear"]),
        st.tuples(_freq(), _freq()).map(lambda t: ["--band", *t]),
        st.lists(_freq(), min_size=1, max_size=3).map(lambda v: ["--notch", *v]),
    ), max_size=3).map(lambda groups: [a for g in groups for a in g])


def spectral_args(clip_names=()):
    secs = ["0", "0.01", "0.05", "0.5", "10", "1e300", "nan", "-1"]
    groups = [_opt("--n-fft", ["1", "2", "3", "16", "255", "2048", "65536", "10000000"]),
              _opt("--hop", ["1", "3", "512", "100000000", "0"]),
              _opt("--n-std", ["1e-300", "0.5", "1e300", "0"]),
              _opt("--strength", ["0", "0.5", "1", "nan", "1.5"]),
              _opt("--freq-smooth", ["1e-9", "500", "1e9"]), _opt("--time-smooth", ["1e-9", "50", "1e9"]),
              st.tuples(st.sampled_from(secs), st.sampled_from(secs)).map(lambda t: ["--noise-from", *t]),
              st.sampled_from([["--stationary"], ["--non-stationary"], ["--share-mask"]])]
    if clip_names:
        groups.append(_opt("--noise-clip", list(clip_names)))
    return st.lists(st.one_of(*groups), max_size=3).map(lambda gs: ["--method", "spectral"]
                                                                  + [a for g in gs for a in g])


def backend_args():
    return st.one_of(
        st.just(["--backend", "cpu"]), st.just(["--backend", "cpu"]), st.just([]),
        st.sampled_from([["--backend", "cuda"], ["--backend", "auto"], ["--variant", "direct"], ["--variant", "fft"],
                         ["--variant", "bogus"], ["--variant", ""], ["--block", "32"], ["--block", "33"],
                         ["--block", "0"], ["--block", "2048"], ["--block", "x"], ["--backend", "cpu", "--variant",
                                                                                   "tiled"]]))


def _default_output(name: str) -> str:
    p = Path(name)
    return str(p.with_name(p.stem + ".denoised" + p.suffix))


@st.composite
def denoise_case(draw):
    src = draw(audio_spec())
    files = [src, {"kind": "raw", "name": "out/keep.txt", "data": "unrelated\n"}]
    clip = None
    if _chance(draw, 5):
        clip = draw(audio_spec(name="noise.wav"))
        files.append(clip)
    out_choice = "new"
    if _chance(draw, 3):
        out_choice = draw(st.sampled_from(["ext", "default", "missing_dir", "dir", "existing", "input", "sentinel"]))
    argv = ["denoise", src["name"]]
    output = None
    if out_choice == "new":
        output = "out/o" + (Path(src["name"]).suffix or ".wav")
    elif out_choice == "ext":
        output = "out/o" + draw(st.sampled_from([".wav", ".flac", ".aiff", ".ogg", ".xyz", "", ".csv"]))
    elif out_choice == "missing_dir":
        output = "nodir/o.wav"
    elif out_choice == "dir":
        output = "out"
    elif out_choice == "existing":
        output = "out/exists.wav"
        files.append({"kind": "raw", "name": output, "data": "an earlier result\n"})
    elif out_choice == "input":
        output = src["name"]
    elif out_choice == "sentinel":
        output = "out/keep.txt"
    if output is not None:
        argv += ["-o", output]
    else:
        output = _default_output(src["name"])
    spectral = _chance(draw, 4)
    clips = ["noise.wav"] * (clip is not None) + ["missing.wav", src["name"]]
    argv += draw(spectral_args(clips)) if spectral else draw(fir_args())
    argv += draw(backend_args())
    if _chance(draw, 5):
        argv.append("--allow-truncated")
    if _chance(draw, 4):
        argv.append("--force")
    if not _chance(draw, 10):
        argv.append("-q")
    return {"files": files, "argv": argv, "output": output, "inputs": [src["name"]]}


def _pick(draw, benign, extreme, k: int = 3):
    """A value from ``benign``, or (one time in ``k``) from ``extreme``."""
    return draw(st.sampled_from(list(extreme) if _chance(draw, k) else list(benign)))


CSV_KINDS = ["float", "int", "offset", "text", "mixed", "nonfinite", "huge", "tiny", "bool", "quoted", "empty"]


@st.composite
def csv_spec(draw, folder="in/"):
    ncol = draw(st.integers(1, 3))
    has_time = not _chance(draw, 5)
    kinds = (["time"] if has_time else []) + [_pick(draw, ["float", "int", "offset"], CSV_KINDS, 4)
                                              for _ in range(ncol)]
    names = [_pick(draw, ["time"], ["t", "timestamp", "x", "time"], 4) if k == "time"
             else _pick(draw, ["abcd"[i]], ["a", "b", "", "x y", '"q"', "time"], 6) for i, k in enumerate(kinds)]
    return {"kind": "csv", "name": folder + draw(_name(".csv")), "cols": kinds, "names": names,
            "rows": draw(st.one_of(_uniform(50, 400), _uniform(4, 50), st.integers(0, 3))),
            "t0": _pick(draw, [0.0, 1.7e9], [-1e15, 1e300, 1e-300], 4),
            "dt": _pick(draw, [0.01, 0.01, 1.0], [1e-9, 1e-300, 0.0, -0.01, 1e300, 3600.0], 4),
            "jitter": _chance(draw, 4), "ragged": _chance(draw, 8), "bom": _chance(draw, 4),
            "crlf": _chance(draw, 4), "header": not _chance(draw, 8), "final_eol": not _chance(draw, 4),
            "seed": draw(st.integers(0, 2 ** 31)),
            "mut": draw(st.lists(_mutation(False), min_size=1, max_size=1)) if _chance(draw, 8) else []}


PARQUET_TYPES = ["float64", "float32", "float16", "int8", "int64", "uint64", "uint8", "huge", "nonfinite",
                 "bool", "string", "decimal", "list", "struct", "dict", "null", "duration", "ts_ns", "date32"]


@st.composite
def parquet_spec(draw, folder="in/"):
    first = _pick(draw, ["time_f64", "ts_ns"], ["ts_s_tz", "float64", "date32"], 4)
    types = [first] + [_pick(draw, ["float64", "float32", "int64"], PARQUET_TYPES) for _ in range(draw(st.integers(1, 3)))]
    names = [("time" if t.startswith(("time", "ts")) else "d") if i == 0
             else _pick(draw, ["abcd"[i - 1]], ["a", "b", "time"], 6) for i, t in enumerate(types)]
    return {"kind": "parquet", "name": folder + draw(_name(".parquet")), "types": types, "names": names,
            "rows": draw(st.one_of(_uniform(50, 300), _uniform(4, 50), st.integers(0, 3))),
            "nulls": _pick(draw, [0.0], [0.1, 1.0]),
            "t0": _pick(draw, [0.0], [1e300, -5.0], 5), "dt": _pick(draw, [0.01], [0.0, 1e-300, -1.0], 5),
            "seed": draw(st.integers(0, 2 ** 31)),
            "mut": draw(st.lists(_mutation(False), min_size=1, max_size=1)) if _chance(draw, 8) else []}


NPY_DTYPES = ["float16", "int16", "int64", "uint8", "bool", "complex128", "object", "str", "structured", "datetime64",
              ">f8"]
NPY_HEADER_EDITS = [["'descr': '<f8'", "'descr': '|O'"], ["'shape': (", "'shape': (99999999999, "],
                    ["'fortran_order': False", "'fortran_order': True"], ["{", "["], ["'descr': '<f8'", "'descr': '<f2'"],
                    ["'shape': (", "'shape': (-1, "], ["'descr'", "'desc'"]]


@st.composite
def npy_spec(draw, folder="in/"):
    n = draw(st.one_of(_uniform(50, 400), st.integers(1, 50)))
    c = draw(st.integers(1, 3))
    shape = _pick(draw, [[n], [n, c]], [[], [0], [0, 3], [2, 3, 4], [1], [n, 1], [c, n]], 4)
    return {"kind": "npy", "name": folder + draw(_name(".npy")), "shape": shape,
            "dtype": _pick(draw, ["float64", "float32"], NPY_DTYPES, 4),
            "values": _pick(draw, ["normal"], ["nonfinite", "huge"], 4),
            "fortran": draw(st.booleans()), "header_edit": _pick(draw, [None], NPY_HEADER_EDITS, 6),
            "sidecar": _pick(draw, ["ok"], [None] + sorted(SIDECARS), 3),
            "seed": draw(st.integers(0, 2 ** 31)),
            "mut": draw(st.lists(_mutation(False), min_size=1, max_size=1)) if _chance(draw, 8) else []}


def log_args():
    return st.lists(st.one_of(
        _opt("--fs", ["100", "1000"], ["0.001", "1", "1e9", "1e308", "nan", "0", "-1", "inf"]),
        _opt("--time-column", ["time", "t", "nope", "", "a\nb"]),
        _opt("--columns", ["a", "a,b", "nope", "a,a", ",", "time", "d"]),
        _opt("--gaps", ["split", "interpolate"]), _opt("--edges", ["odd", "zero"]),
        st.sampled_from([["--allow-truncated"], ["--force"], ["-r"]]),
    ), max_size=3).map(lambda gs: [a for g in gs for a in g])


def batch_fir_args():
    """FIR options for logs: mostly sensible values for a 100 Hz log, sometimes extreme ones."""
    sensible = st.tuples(_opt("--taps", ["3", "31", "63"]), st.lists(st.one_of(
        _opt("--lowpass", ["10", "40"]), _opt("--highpass", ["0.1", "1"]), _opt("--notch", ["50", "10"])),
        max_size=1)).map(lambda t: t[0] + [a for g in t[1] for a in g])
    return st.integers(1, 4).flatmap(lambda k: fir_args() if k == 4 else sensible)


@st.composite
def batch_case(draw, jobs=True):
    n = draw(st.integers(1, 3))
    kinds = st.sampled_from(["csv", "parquet", "npy", "audio"])
    files = []
    for _ in range(n):
        k = draw(kinds)
        spec = {"csv": csv_spec(), "parquet": parquet_spec(), "npy": npy_spec(),
                "audio": audio_spec(folder="in/")}[k]
        f = draw(spec)
        if any(g["name"] == f["name"] for g in files):
            continue
        files.append(f)
    files.append({"kind": "raw", "name": "in/notes.txt", "data": "not an input\n"})
    outdir = _pick(draw, ["out"], ["in", "in/sub", "in/notes.txt"], 5)
    if outdir in ("out",):
        files.append({"kind": "raw", "name": "out/keep.txt", "data": "unrelated\n"})
    sel = _pick(draw, ["folder", "files", "glob"], ["missing"], 8)
    if sel == "folder":
        inputs = ["in"]
    elif sel == "files":
        inputs = [f["name"] for f in files if f["kind"] != "raw"]
    elif sel == "glob":
        inputs = ["in/*.*"]
    else:
        inputs = ["in", "in/nope.csv"]
    argv = ["batch", *inputs, "-o", outdir]
    if _chance(draw, 6):
        argv += draw(spectral_args())
    else:
        argv += draw(batch_fir_args())
    argv += draw(log_args())
    argv += draw(backend_args())
    if jobs:
        argv += ["-j", "1"]
    else:
        argv += draw(st.sampled_from([["-j", "2"], [], ["-j", "1"]]))
    if not _chance(draw, 10):
        argv.append("-q")
    return {"files": files, "argv": argv, "outdir": outdir, "inputs": [f["name"] for f in files]}


def any_case(jobs=True):
    return st.one_of(denoise_case(), batch_case(jobs=jobs))


# ===================================================================================================== the runner child


class _CaseTimeout(BaseException):
    pass


def _serve() -> None:  # pragma: no cover - runs in the child
    """Read one case per line on stdin ({"argv", "cwd"}), run ``sigconv.cli.main(argv)`` in this process with
    stdout/stderr captured (Python and file-descriptor level), warnings recorded and a per-case timer; answer
    one JSON line per case on the original stdout."""
    import resource
    import signal
    import threading
    import traceback
    import warnings

    sys.path.insert(0, str(ROOT))
    import pyarrow.csv  # noqa: F401  (imported before the cap: the readers the product uses)
    import pyarrow.parquet  # noqa: F401
    import soundfile  # noqa: F401

    import sigconv.cli

    # a warm-up: the lazy imports of a denoise run happen before the cap
    proto_in = os.fdopen(os.dup(0), "r")
    proto_out = os.fdopen(os.dup(1), "w", buffering=1)
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)

    vm = 0
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmSize:"):
                vm = int(line.split()[1]) * 1024
    cap = max(MEM_CAP, vm + MEM_HEADROOM)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))

    def on_alarm(signum, frame):
        raise _CaseTimeout()

    signal.signal(signal.SIGALRM, on_alarm)
    base_threads = {t.ident for t in threading.enumerate()}
    proto_out.write(json.dumps({"ready": True, "cap": cap}) + "\n")

    for line in proto_in:
        if not line.strip():
            continue
        req = json.loads(line)
        res = {"rc": None, "exc": None, "timeout": False, "warnings": [], "restart": False}
        err_f = tempfile.TemporaryFile()
        out_f = tempfile.TemporaryFile()
        saved = os.dup(1), os.dup(2)
        os.dup2(out_f.fileno(), 1)
        os.dup2(err_f.fileno(), 2)
        py_err, py_out = io.StringIO(), io.StringIO()
        old_streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = py_out, py_err
        t0 = time.monotonic()
        try:
            os.chdir(req["cwd"])
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for cat in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
                    warnings.filterwarnings("ignore", category=cat)
                signal.setitimer(signal.ITIMER_REAL, float(req.get("timeout", CASE_TIMEOUT_S)))
                try:
                    rc = sigconv.cli.main(req["argv"])
                    res["rc"] = rc
                except SystemExit as exc:  # argparse --help/--version; the process would exit with this
                    code = exc.code
                    res["rc"] = 0 if code is None else (code if isinstance(code, int) else 1)
                    if isinstance(code, str):
                        py_err.write(code + "\n")
                finally:
                    signal.setitimer(signal.ITIMER_REAL, 0)
            res["warnings"] = [f"{w.category.__name__}: {w.message} ({w.filename}:{w.lineno})" for w in caught]
        except _CaseTimeout:
            res["timeout"] = True
            res["restart"] = True
        except MemoryError:
            res["exc"] = "MemoryError escaped main()"
            res["restart"] = True
        except BaseException:  # noqa: BLE001 - whatever escapes main() is a finding
            res["exc"] = traceback.format_exc()
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            sys.stdout, sys.stderr = old_streams
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        res["seconds"] = round(time.monotonic() - t0, 3)
        # a non-daemon thread still running after main() returned would keep the real process from exiting
        deadline = time.monotonic() + 5.0
        left = [t for t in threading.enumerate() if t.ident not in base_threads and not t.daemon and t.is_alive()]
        for t in left:
            t.join(max(0.0, deadline - time.monotonic()))
        left = [t.name for t in left if t.is_alive()]
        if left:
            res["threads_left"] = left
            res["restart"] = True
        err_f.seek(0)
        out_f.seek(0)
        res["stderr"] = py_err.getvalue() + err_f.read().decode("utf-8", "replace")
        res["stdout"] = py_out.getvalue() + out_f.read().decode("utf-8", "replace")
        err_f.close()
        out_f.close()
        res["maxrss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        proto_out.write(json.dumps(res) + "\n")
        if res["restart"]:
            os._exit(0)
    os._exit(0)


class Runner:
    """The parent's side of the runner child: ``run(argv, cwd)`` -> the child's result dict, or one that says the
    child crashed (killed by a signal, e.g. the memory cap's SIGSEGV/SIGKILL) or hung past the hard limit; the
    child is restarted for the next case either way."""

    def __init__(self):
        self.proc = None
        self.cap = None
        self.log = tempfile.TemporaryFile()

    def _start(self):
        env = dict(os.environ)
        env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        env.pop("CI", None)
        self.proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--serve"],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, env=env,
                                     text=True, bufsize=1)
        first = self._read(120.0)
        if not first or not first.get("ready"):
            raise RuntimeError(f"fuzz runner did not start: {first!r}; {self._log_tail()}")
        self.cap = first["cap"]

    def _log_tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode("utf-8", "replace")[-2000:]

    def _read(self, timeout: float):
        import selectors

        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        try:
            if not sel.select(timeout):
                return None
            line = self.proc.stdout.readline()
        finally:
            sel.close()
        return json.loads(line) if line.strip() else {}

    def _kill(self):
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None

    def run(self, argv, cwd, timeout: float = CASE_TIMEOUT_S) -> dict:
        if self.proc is None or self.proc.poll() is not None:
            self._kill()
            self._start()
        t0 = time.monotonic()
        try:
            self.proc.stdin.write(json.dumps({"argv": list(argv), "cwd": str(cwd), "timeout": timeout}) + "\n")
            self.proc.stdin.flush()
        except BrokenPipeError:
            pass
        res = self._read(timeout + HARD_GRACE_S)
        if res is None:
            self._kill()
            return {"rc": None, "hang": True, "stderr": "", "stdout": "", "warnings": [],
                    "seconds": round(time.monotonic() - t0, 3)}
        if not res:  # EOF: the child died
            code = self.proc.wait()
            self.proc = None
            return {"rc": None, "crash": code, "stderr": self._log_tail()[-600:], "stdout": "", "warnings": [],
                    "seconds": round(time.monotonic() - t0, 3)}
        if res.get("restart"):
            self._kill()
        return res

    def close(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
                self.proc.wait(10)
            except Exception:  # noqa: BLE001
                pass
        self._kill()
        self.log.close()


# ===================================================================================================== the contract


def snapshot(work: Path) -> dict:
    """{relative path: sha256} of every file under ``work``."""
    out = {}
    for dirpath, _dirs, files in os.walk(work):
        for f in files:
            p = Path(dirpath) / f
            if p.is_symlink() or not p.is_file():
                continue
            out[str(p.relative_to(work))] = hashlib.sha256(p.read_bytes()).hexdigest()
    return out


def _nonfinite_count(a: np.ndarray) -> tuple[int, int]:
    """(NaN count, inf count) of a numeric array (0, 0 for other kinds)."""
    if a.dtype.kind not in "fc":
        return 0, 0
    return int(np.isnan(a).sum()), int(np.isinf(a).sum())


def _read_table(path: Path):
    import pyarrow.csv as pcsv
    import pyarrow.parquet as pq

    if path.suffix.lower() == ".csv":
        return pcsv.read_csv(str(path))
    return pq.read_table(str(path))


def _table_missing(table) -> dict:
    """{column: (missing = nulls + NaN, inf)} for the numeric columns of an Arrow table."""
    import pyarrow as pa

    out = {}
    for name, col in zip(table.column_names, table.columns):
        if not (pa.types.is_floating(col.type) or pa.types.is_integer(col.type)):
            continue
        a = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)  # nulls become NaN
        nan, inf = _nonfinite_count(a)
        prev = out.get(name, (0, 0))
        out[name] = (prev[0] + nan, prev[1] + inf)
    return out


def check_output(out: Path, src, audio: bool = False) -> list[str]:
    """The ways an output file breaks the contract: unreadable, or non-finite values the input did not hold.
    ``src``: the input it came from (None when unknown); ``audio``: a recording whatever its suffix."""
    problems = []
    sfx = out.suffix.lower()
    try:
        if audio or sfx in AUDIO_READ_EXT:
            import soundfile as sf

            y, _ = sf.read(str(out), dtype="float64", always_2d=True)
            nan, inf = _nonfinite_count(y)
            if nan or inf:
                problems.append(f"{out.name}: {nan} NaN and {inf} inf samples written")
        elif sfx in (".csv", ".parquet", ".pq"):
            got = _table_missing(_read_table(out))
            try:
                had = _table_missing(_read_table(src)) if src is not None else None
            except Exception:  # noqa: BLE001 - an input pyarrow cannot read: only inf is checked
                had = None
            for name, (miss, inf) in got.items():
                if inf:
                    problems.append(f"{out.name}: column {name!r} holds {inf} inf values")
                if had is not None and name in had and miss > sum(had[name]):
                    problems.append(f"{out.name}: column {name!r} holds {miss} missing/NaN values, the input "
                                    f"{sum(had[name])}")
        elif sfx == ".npy":
            y = np.load(str(out), allow_pickle=False)
            nan, inf = _nonfinite_count(y)
            try:
                x = np.load(str(src), allow_pickle=False) if src is not None else None
            except Exception:  # noqa: BLE001
                x = None
            had = sum(_nonfinite_count(x)) if x is not None else nan
            if inf or nan > had:
                problems.append(f"{out.name}: {nan} NaN and {inf} inf values written (input: {had} non-finite)")
    except Exception as exc:  # noqa: BLE001
        problems.append(f"{out.name}: output cannot be read back ({type(exc).__name__}: {exc})")
    return problems


def check(case, res, before: dict, after: dict, work: Path) -> list[str]:
    """The contract violations of one finished case (empty: it held)."""
    bad = []
    argv = case["argv"]
    cmd = argv[0] if argv else ""
    if res.get("hang"):
        return [f"hang: no answer within {CASE_TIMEOUT_S + HARD_GRACE_S:.0f} s"]
    if res.get("crash") is not None:
        return [f"crash: the process died (exit {res['crash']}): {res.get('stderr', '')[-300:]}"]
    if res.get("timeout"):
        bad.append(f"time limit: still running after {CASE_TIMEOUT_S:.0f} s")
    if res.get("exc"):
        bad.append("exception escaped main(): " + res["exc"].strip().splitlines()[-1])
    if res.get("threads_left"):
        bad.append(f"non-daemon threads still running after main() returned: {res['threads_left']}")
    rc = res.get("rc")
    err = res.get("stderr", "")
    if rc is not None and rc not in (0, 1, 2):
        bad.append(f"exit code {rc}")
    if "Traceback" in err:
        bad.append("traceback on stderr")
    leaked = [w for w in res.get("warnings", ())] + [ln for ln in err.splitlines() if "Warning:" in ln
                                                     and not ln.startswith(("warning: ", "sigconv: error:"))]
    if leaked:
        bad.append(f"leaked warning: {leaked[0]}")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    quiet = "-q" in argv or "--quiet" in argv
    if rc in (1, 2) or (rc is None and not bad):
        errors = [ln for ln in lines if ln.startswith("sigconv: error: ")]
        if cmd == "batch" and rc == 1 and not errors:
            odd = [ln for ln in lines if not ln.startswith(BATCH_PREFIXES)]
            if odd:
                bad.append(f"stderr line outside the batch report: {odd[0]!r}")
            if not any(ln.startswith("failed: ") for ln in lines):
                bad.append("batch exit 1 without a failed file or an error line")
        elif not (len(lines) == 1 and errors):
            bad.append(f"error is not one 'sigconv: error:' line: {err[:300]!r}")
    elif rc == 0:
        if cmd == "batch":
            odd = [ln for ln in lines if not ln.startswith(BATCH_PREFIXES) or ln.startswith("failed: ")]
            if odd:
                bad.append(f"stderr line outside the batch report: {odd[0]!r}")
        elif quiet and lines and cmd == "denoise":
            bad.append(f"stderr output with --quiet: {err[:200]!r}")
    parts = [str(p.relative_to(work)) for p in work.rglob("*") if ".part" in p.name]
    if parts:
        bad.append(f"temporary file left: {parts[0]}")
    # pre-existing files: unchanged unless they are the output of a successful --force denoise
    forced_out = None
    if cmd == "denoise" and rc == 0 and ("--force" in argv or "-f" in argv):
        forced_out = case.get("output")
    for rel, h in before.items():
        if rel == forced_out and rel not in case.get("inputs", ()):
            continue
        if rel not in after:
            bad.append(f"pre-existing file removed: {rel}")
        elif after[rel] != h:
            bad.append(f"pre-existing file changed: {rel}")
    new = [rel for rel in after if rel not in before]
    if cmd == "denoise" and rc != 0 and new:
        bad.append(f"file left by a failed run: {new[0]}")
    if cmd == "denoise" and rc == 0:
        out = case.get("output")
        if out and (work / out).is_file():
            bad += check_output(work / out, None, audio=True)
        elif out:
            bad.append(f"exit 0 but no output at {out}")
    if cmd == "batch":
        outdir = case.get("outdir", "out")
        srcs = {f["name"]: f for f in case["files"]}
        for rel in new:
            p = Path(rel)
            if p.parts[:1] != (outdir,) or p.suffix == ".json" or p.name.endswith(".jsonl"):
                continue
            # outputs mirror the input tree below the folder given: out/x.csv comes from in/x.csv
            tail = str(Path(*p.parts[1:]))
            match = [n for n in srcs if n == tail or n.endswith("/" + tail)]
            src = srcs[match[0]] if len(match) == 1 else None
            bad += check_output(work / rel, work / src["name"] if src else None,
                                audio=bool(src) and src["kind"] == "audio")
    return bad


def command_line(case) -> str:
    return "sigconv " + " ".join(shlex.quote(a) for a in case["argv"])


def reproducer(case) -> str:
    return f"python tests/fuzz_cases.py --replay {shlex.quote(json.dumps(case, separators=(',', ':')))}"


def run_case(runner: Runner, case, base: Path, index: int) -> tuple[dict, list[str]]:
    """Build the case in a fresh folder under ``base``, run it, check it: (result, violations)."""
    work = base / f"c{index:05d}"
    work.mkdir()
    materialize(case, work)
    before = snapshot(work)
    res = runner.run(case["argv"], work)
    after = snapshot(work)
    return res, check(case, res, before, after, work)


def replay(case) -> int:
    """Build the case in a temporary folder and run ``python -m sigconv`` on it in a subprocess."""
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        materialize(case, work)
        before = snapshot(work)
        env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
        print("$", command_line(case), f"   (in {work}: {sorted(before)})")
        r = subprocess.run([sys.executable, "-m", "sigconv", *case["argv"]], cwd=work, env=env,
                           capture_output=True, text=True, timeout=300)
        after = snapshot(work)
        res = {"rc": r.returncode, "stderr": r.stderr, "stdout": r.stdout, "warnings": []}
        print(f"exit {r.returncode}\n--- stderr ---\n{r.stderr}--- end ---")
        for v in check(case, res, before, after, work):
            print("VIOLATION:", v)
        return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["--serve"]:
        _serve()
    elif sys.argv[1:2] == ["--replay"]:
        sys.exit(replay(json.loads(sys.argv[2])))
    else:
        print(__doc__)
