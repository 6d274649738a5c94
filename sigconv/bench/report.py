"""What a run reports: its console lines and summary, the markdown table, and pass/miss verdicts against targets."""

from __future__ import annotations

import platform
import re
import sys
from pathlib import Path
from typing import Optional

import numpy as np

from sigconv._core.blocks import format_block
from sigconv.bench.cases import TAPS_1D

__all__ = ["TARGETS", "verdicts", "markdown", "summary", "row_line", "versions", "sigconv_version", "slug",
           "default_out_dir"]

#: Speed targets of the default sets (checked on GPU rows only): conv1d at C=1 L=2^26, auto's share of the
#: copy bandwidth (short filters; K=63 its own) and its speed-up over the fastest peer; conv2d spectrogram smoothing
#: at 1025x65536 against the fastest peer and the copy (3x3), and the two CNN layers against cuDNN (article A: auto's
#: time at most cuDNN fp32's, level or faster).
TARGETS = {"conv1d_pct_copy": 75, "conv1d_pct_copy_taps": (7, 25), "conv1d_k63_pct_copy": 70, "conv1d_speedup": 2,
           "spec_speedup": 3, "spec3_pct_copy": 70, "B_vs_cudnn": 3, "A_vs_cudnn": 1.0}


def _pf(ok: bool) -> str:
    return "PASS" if ok else "MISS"


def _find(records: list, **kw) -> Optional[dict]:
    for r in records:
        if all(r.get(k) == v for k, v in kw.items()) and r["status"] == "ok" and r["ms_median"]:
            return r
    return None


def _verdicts_1d(recs: list) -> list[str]:
    out = []
    for K in TAPS_1D:
        a = _find(recs, impl="sigconv:auto", C=1, L=1 << 26, K=K)
        tag = f"C=1 L=2^26 K={K}: auto"
        if not a:
            if any(r["C"] == 1 and r["L"] == 1 << 26 and r["K"] == K for r in recs):
                out.append(f"{tag} has no timing (see its row): MISS")
            continue
        if (K in TARGETS["conv1d_pct_copy_taps"] or K == 63) and a["pct_copy"] is not None:
            t = TARGETS["conv1d_pct_copy"] if K != 63 else TARGETS["conv1d_k63_pct_copy"]
            out.append(f"{tag} {a['ms_median']:.3f} ms = {a['pct_copy']:.0f}% of copy (target {t}%): "
                       f"{_pf(a['pct_copy'] >= t)}")
        s = a.get("speedup_vs_best_peer")
        if s:
            t = TARGETS["conv1d_speedup"]
            out.append(f"{tag} {a['ms_median']:.3f} ms vs {a['best_peer']} {a['ms_median'] * s:.3f} ms = {s:.2f}x "
                       f"(target {t}x): {_pf(s >= t)}")
        else:
            out.append(f"{tag} {a['ms_median']:.3f} ms; no peer timed: n/a")
    return out


def _verdicts_spec(r: dict, tag: str) -> list[str]:
    out = []
    s = r.get("speedup_vs_best_peer")
    if s:
        t = TARGETS["spec_speedup"]
        out.append(f"{tag} vs {r['best_peer']} {r['ms_median'] * s:.3f} ms = {s:.2f}x (target {t}x): {_pf(s >= t)}")
    if r["kH"] == 3 and r["pct_copy"] is not None:
        t = TARGETS["spec3_pct_copy"]
        out.append(f"{tag} = {r['pct_copy']:.0f}% of copy (target {t}%): {_pf(r['pct_copy'] >= t)}")
    return out


def _verdict_vs_cudnn(recs: list, r: dict, tag: str) -> str:
    c = _find(recs, impl="cudnn", case=r["case"])
    if not c:
        return f"{tag}; cudnn not timed: n/a"
    if r["group"] == "B":
        s, t = c["ms_median"] / r["ms_median"], TARGETS["B_vs_cudnn"]
        return f"{tag} vs cudnn {c['ms_median']:.3f} ms = {s:.2f}x faster (target {t}x): {_pf(s >= t)}"
    s, t = r["ms_median"] / c["ms_median"], TARGETS["A_vs_cudnn"]
    return f"{tag} vs cudnn {c['ms_median']:.3f} ms = {s:.2f}x cudnn's time (target <= {t}x): {_pf(s <= t)}"


def _verdicts_2d(recs: list) -> list[str]:
    out = []
    for r in recs:
        if r["impl"] != "sigconv:auto" or r["status"] != "ok" or not r["ms_median"]:
            continue
        g = r["group"]
        tag = f"{r['case']}: auto {r['ms_median']:.3f} ms"
        if g == "spec" and r["N"] == 1 and r["H"] == 1025 and r["W"] == 65536:
            out += _verdicts_spec(r, tag)
        elif g in ("B", "A") and (r["Cin"], r["H"], r["W"]) in ((6, 768, 512), (256, 128, 128)):
            out.append(_verdict_vs_cudnn(recs, r, tag))
    return out


def verdicts(run) -> list[str]:
    """One PASS/MISS line per target, for the cases that ran on the GPU."""
    recs = [r for r in run.records if r["backend"] == "cuda"]
    return _verdicts_1d(recs) if run.op == "conv1d" else _verdicts_2d(recs)


# ------------------------------------------------------------------------------------- tables


def _fmt(v, nd=3):
    if v is None:
        return ""
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 1:
            text = f"{v:.{max(0, nd - 1)}f}"
            return text.rstrip("0").rstrip(".") if "." in text else text  # trailing zeros of decimals only
        return f"{v:.{nd}g}"
    return str(v)


def _markdown_row(r: dict) -> str:
    band = f"{_fmt(r.get('p20'))}-{_fmt(r.get('p80'))}" if r.get("p20") is not None else ""
    sp = r.get("speedup_vs_best_peer")
    return "| " + " | ".join([
        r["case"] + ("" if r["backend"] == "cuda" else " (cpu)"), r["impl"],
        format_block(r["block"]) if r["block"] is not None else "", _fmt(r["ms_median"], 4), band, _fmt(r["gbs"], 1),
        _fmt(r["pct_copy"], 1), f"{sp:.2f}" if sp else "", r["status"], r["note"].replace("|", "/")]) + " |"


def _skipped_lines(skipped: dict) -> list[str]:
    lines = ["", "## Skipped", ""]
    for (be, note), items in skipped.items():
        impls = sorted({i for _, i in items})
        cases = sorted({c for c, _ in items})
        where = f"{len(cases)} case(s)" if len(cases) > 1 else cases[0]
        lines.append(f"- {be}: {', '.join(impls)} ({where}): {note}")
    return lines


def markdown(run, verdict_lines: list[str]) -> str:
    """The run as a markdown page: devices and copy bandwidths, one table row per timed row, skipped rows
    grouped by reason, the verdicts."""
    lines = [f"# sigconv bench {run.op} ({run.dtype})", ""]
    for be in ("cuda", "cpu"):
        if run.device.get(be):
            cp = run.copy.get(be)
            cps = f"; copy {cp['gbs']:.0f} GB/s ({cp['method']})" if cp else ""
            lines.append(f"- {be}: {run.device[be]}{cps}")
    lines += [f"- date: {run.date}; sigconv {sigconv_version()}; "
              f"GB/s = (input read once + output written once) / median time", "",
              "| case | impl | block | ms (median) | p20-p80 | GB/s | % copy | x best peer | status | note |",
              "|---|---|---|---:|---:|---:|---:|---:|---|---|"]
    skipped: dict = {}
    for r in run.records:
        if r["status"] == "skipped":
            skipped.setdefault((r["backend"], r["note"]), []).append((r["case"], r["impl"]))
        else:
            lines.append(_markdown_row(r))
    if skipped:
        lines += _skipped_lines(skipped)
    if verdict_lines:
        lines += ["", "## Targets", ""] + [f"- {v}" for v in verdict_lines]
    return "\n".join(lines) + "\n"


def _summary_line(case: str, be: str, rows: list) -> Optional[str]:
    timed = [r for r in rows if r["ms_median"] and r["status"] in ("ok", "flagged")]
    ours = [r for r in timed if r["kind"] == "variant" and r["status"] == "ok"]
    peers = [r for r in timed if r["kind"] == "peer" and r["status"] == "ok"]
    auto = next((r for r in ours if r["impl"] == "sigconv:auto"), None)
    best = min(ours, key=lambda r: r["ms_median"], default=None)
    bp = min(peers, key=lambda r: r["ms_median"], default=None)
    probs = sorted({f"{r['impl']} {r['status']}" for r in rows if r["status"] in ("FAIL", "error", "flagged")})
    if not timed and not probs:
        return None
    a_ms = f"{auto['ms_median']:.4g}" if auto else "-"
    a_pc = f"{auto['pct_copy']:.0f}" if auto and auto["pct_copy"] is not None else "-"
    b_s = f"{best['impl'][8:]}/{format_block(best['block'])} {best['ms_median']:.4g}" if best else "-"
    p_s = f"{bp['impl']} {bp['ms_median']:.4g}" if bp else "-"
    ref = auto or best
    x = f"{bp['ms_median'] / ref['ms_median']:.2f}" if bp and ref else "-"
    return f"{case[:34]:34} {be:4} {a_ms:>9} {a_pc:>5} {b_s[:26]:>26} {p_s[:30]:>30} {x:>6}  " + ", ".join(probs)


def summary(run) -> str:
    """Compact table, one line per case and backend: auto, the best sigconv row, the best peer."""
    head = (f"{'case':34} {'be':4} {'auto ms':>9} {'%copy':>5} {'best sigconv':>26} {'best peer':>30} "
            f"{'x peer':>6}  problems")
    lines = [head, "-" * len(head)]
    seen = list(dict.fromkeys((r["case"], r["backend"]) for r in run.records))
    for case, be in seen:
        line = _summary_line(case, be, [r for r in run.records if r["case"] == case and r["backend"] == be])
        if line is not None:
            lines.append(line)
    return "\n".join(lines)


def row_line(r: dict) -> str:
    """One console line for a row as it is measured."""
    ms = f"{r['ms_median']:.4g} ms" if r["ms_median"] else ""
    gbs = f"{r['gbs']:.0f} GB/s" if r["gbs"] else ""
    pc = f"{r['pct_copy']:.0f}%" if r["pct_copy"] is not None else ""
    b = f"b={format_block(r['block'])}" if r["block"] is not None else ""
    return f"{r['backend']:4} {r['impl']:28} {b:9} {ms:>12} {gbs:>10} {pc:>5} {r['status']:7} {r['note']}"[:220]


# ------------------------------------------------------------------------------------- files


def sigconv_version() -> str:
    try:
        from sigconv._version import __version__

        return __version__
    except Exception:
        return "?"


def versions() -> dict:
    """Versions of Python and the libraries the rows ran on (those already imported)."""
    out = {"python": platform.python_version(), "numpy": np.__version__}
    for mod in ("scipy", "cupy", "torch"):
        m = sys.modules.get(mod)
        if m is not None:
            out[mod] = getattr(m, "__version__", "?")
    try:
        t = sys.modules.get("torch")
        if t is not None and t.backends.cudnn.is_available():
            out["cudnn"] = t.backends.cudnn.version()
    except Exception:
        pass
    return out


def slug(s: str) -> str:
    """``s`` as a file-name part."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "device"


def default_out_dir() -> Path:
    """benchmarks/results/ when run from the sigconv checkout, else the current folder."""
    cwd = Path.cwd()
    pp = cwd / "pyproject.toml"
    try:
        if (cwd / "benchmarks").is_dir() and pp.is_file() and 'name = "sigconv"' in pp.read_text():
            return cwd / "benchmarks" / "results"
    except OSError:
        pass
    return cwd
