"""What SciPy's 2-D boundaries cost on the GPU: cuda2d.corr2d with fill(0), fill(1.5), wrap and symm, per variant.

    python benchmarks/boundary2d.py [--reps 50] [--cases spec3 spec5 img7 k31] [--variants auto strip ...] [--out DIR]

Every variant reads the extended image in its own loads, in one launch: regblock, prefetch, strip and shfl with the
boundary compiled in, naive and shared with it as an argument, separable in its row pass. Cases, float32, "same"
windows: the spectrogram 1025 x 65536 with 3x3 and 5x5 kernels, a 4096 x 4096 image with 7x7, 512 x 512 with 31x31;
on request (``--cases``) 2048 x 2048 and 1024 x 1024 with 15x15 (``img15``, ``k15``), 1024 x 1024 with 11x11
(``k11``: the tallest kernel of strip's accumulator ring), 4096 x 4096 with 31x31 (``k31big``) and, on widths that
are not a multiple of 4 (no 16-byte rows), 1024 x 1023 and 1025 x 65535 with 9x9 (``odd9``, ``spec9odd``). For auto
and every registered variant that applies (separable on a rank-1 kernel
of the same size): each boundary's result is first checked against a float64 reference of the image extended by
numpy.pad (the top, bottom and a middle band of rows, every column), then timed with CUDA events (warm-up, then
``--reps`` calls queued before one synchronisation; median, p20, p80), inputs pre-allocated and rotated over
twice the L2 size. With ``--paths`` wrap and symm are also checked and timed (GPU) through the extended copy
(conv2d_extend, then the variant with zero padding: corr2d's ``extend``); the table says whether the variant's own
loads are the faster way. Target: every boundary within 10% of fill(0) (ratio <= 1.10) on the GPU (the kernels
alone), PASS or MISS per row; the wall column (what a caller sees) is judged on the large cases (>= 2^24 outputs),
where the host's launch path does not set it. Writes ``boundary2d-<device>-<date>.json`` and ``.md`` into
``--out`` (default $OUT, else the current folder). ``--warm JOBS`` compiles every build first, in parallel processes.
Exit status 1 when a result is wrong, 2 without a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import math
import os
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
#: name -> (H, W, kH, kW); pads are "same" (correlate2d's: (k-1)//2)
CASES = {"spec3": (1025, 65536, 3, 3), "spec5": (1025, 65536, 5, 5), "img7": (4096, 4096, 7, 7),
         "img15": (2048, 2048, 15, 15), "k15": (1024, 1024, 15, 15), "k11": (1024, 1024, 11, 11),
         "k31": (512, 512, 31, 31),
         "k31big": (4096, 4096, 31, 31), "odd9": (1024, 1023, 9, 9), "spec9odd": (1025, 65535, 9, 9)}
#: The default run (each case takes about a minute on an H200 for every variant; --paths doubles the boundaries timed)
DEFAULT_CASES = ("spec3", "spec5", "img7", "k31")
#: The boundaries timed through both paths with --paths.
PATH_BOUNDARIES = (("wrap", 0.0), ("symm", 0.0))
BOUNDARIES = (("fill", 0.0), ("fill", 1.5), ("wrap", 0.0), ("symm", 0.0))
#: The target (ratio to fill(0)) and the cases it applies to (outputs).
TARGET_RATIO = 1.10
LARGE_OUTPUTS = 1 << 24
#: Rows of each output band checked against the float64 reference.
CHECK_ROWS = 8


def _label(boundary, fill) -> str:
    return f"fill({fill:g})" if boundary == "fill" else boundary


def _slug(s: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", s).strip("-")[:60] or "device"


def _extend_index(n: int, lo: int, hi: int, boundary: str) -> np.ndarray:
    """Indices i in [lo, hi) of the extended axis -> the sample they repeat (numpy.pad's rule), -1 for fill."""
    before, after = max(0, -lo), max(0, hi - n)
    if boundary == "fill":
        idx = np.pad(np.arange(n), (before, after), mode="constant", constant_values=-1)
    else:
        idx = np.pad(np.arange(n), (before, after), mode={"wrap": "wrap", "symm": "symmetric"}[boundary])
    return idx[lo + before:hi + before]


def _border_fraction(H: int, W: int, kH: int, kW: int, pad, out_hw) -> float:
    """The share of the outputs whose window leaves the H x W image (stride 1)."""
    (py, px), (Ho, Wo) = pad, out_hw
    rows = np.clip(np.minimum(np.arange(Ho) - py + kH, H) - np.maximum(np.arange(Ho) - py, 0), 0, None) == kH
    cols = np.clip(np.minimum(np.arange(Wo) - px + kW, W) - np.maximum(np.arange(Wo) - px, 0), 0, None) == kW
    return 1.0 - float(rows.sum()) * float(cols.sum()) / max(Ho * Wo, 1)


def _check_rows(Ho: int) -> list:
    """Output row ranges checked: the top rows, a middle band, the bottom rows."""
    k = min(CHECK_ROWS, Ho)
    mid = max(0, Ho // 2 - k // 2)
    return sorted({(0, k), (mid, mid + k), (Ho - k, Ho)})


def _reference_rows(xh, wh, pad, out_hw, boundary, fill, r0, r1):
    """float64 outputs rows [r0, r1), all columns, of the image extended by the boundary rule."""
    import scipy.signal

    H, W = xh.shape
    kH, kW = wh.shape
    (py, px), Wo = pad, out_hw[1]
    ri = _extend_index(H, r0 - py, r1 - py + kH - 1, boundary)
    ci = _extend_index(W, -px, Wo - px + kW - 1, boundary)
    xe = xh[np.ix_(np.maximum(ri, 0), np.maximum(ci, 0))].astype(np.float64)
    xe[ri < 0, :] = fill
    xe[:, ci < 0] = fill
    return scipy.signal.correlate2d(xe, wh.astype(np.float64), "valid")


def _time(fn, reps: int, warmup: int) -> tuple:
    """(median, p20, p80) ms of fn() with CUDA events, all calls queued before one synchronisation."""
    import cupy

    for _ in range(warmup):
        fn()
    cupy.cuda.get_current_stream().synchronize()
    ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    ev[-1][1].synchronize()
    t = np.array([cupy.cuda.get_elapsed_time(a, b) for a, b in ev])
    return float(np.median(t)), float(np.percentile(t, 20)), float(np.percentile(t, 80))


def _graph_time(call_on, copies: int, reps: int) -> tuple:
    """(median, p20, p80) ms of the GPU work of one call, its kernels only: the call is captured once per input
    copy into a CUDA graph (stream capture), and the graphs are replayed back to back between CUDA events, so the
    host's Python launch path (which can take longer than the kernels of a small job) never leaves the GPU idle.
    ``call_on(i)`` runs the call on input copy ``i``; its allocations come from the stream-ordered pool, which
    a graph can hold. Raises what the capture raises (a host copy inside the call)."""
    import cupy

    stream = cupy.cuda.Stream(non_blocking=True)
    graphs = []
    # a scratch allocation inside the call becomes a node of the graph from the stream-ordered pool
    with stream, cupy.cuda.using_allocator(cupy.cuda.MemoryAsyncPool().malloc):
        for i in range(copies):
            stream.begin_capture()
            try:
                call_on(i)
            finally:
                graph = stream.end_capture()
            graphs.append(graph)
        for g in graphs[:3]:  # warm-up replays
            g.launch(stream)
        stream.synchronize()
        ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(reps)]
        for r, (a, b) in enumerate(ev):
            a.record(stream)
            graphs[r % copies].launch(stream)
            b.record(stream)
        ev[-1][1].synchronize()
    t = np.array([cupy.cuda.get_elapsed_time(a, b) for a, b in ev])
    return float(np.median(t)), float(np.percentile(t, 20)), float(np.percentile(t, 80))


def _warm(a) -> None:
    """Compile what the run needs in parallel processes (see ``--warm``); a part that fails is reported, not fatal."""
    import subprocess
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from sigconv.registry import table as _registry

    names = a.variants or ["auto"] + [v.name for v in _registry.entries("conv2d", "cuda", kind="variant")]
    parts = [(c, v) for c in a.cases for v in names]
    t0 = datetime.datetime.now()
    with tempfile.TemporaryDirectory(prefix="boundary2d-warm-") as tmp:
        def run(part):
            c, v = part
            d = Path(tmp) / f"{c}-{v}"
            env = {**os.environ, "SIGCONV_CACHE_DIR": str(d)}
            cmd = [sys.executable, str(Path(__file__).resolve()), "--cases", c, "--variants", v, "--reps", "30",
                   "--warmup", "1", "--out", str(d)] + (["--paths"] if a.paths else [])
            return part, subprocess.run(cmd, env=env, capture_output=True, text=True).returncode

        with ThreadPoolExecutor(a.warm) as pool:
            failed = [part for part, rc in pool.map(run, parts) if rc not in (0, 1)]
    print(f"boundary2d: {len(parts)} warm-up runs in {(datetime.datetime.now() - t0).total_seconds():.0f} s, "
          f"{a.warm} at a time" + (f"; failed: {failed}" if failed else ""))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=50, help="timed calls per row (at least 30)")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--cases", nargs="+", default=list(DEFAULT_CASES), choices=list(CASES))
    p.add_argument("--paths", action=argparse.BooleanOptionalAction, default=False,
                   help="also check and time wrap and symm through the extended copy")
    p.add_argument("--variants", nargs="+", default=None, help="auto and/or registered variant names (default all)")
    p.add_argument("--out", type=Path, default=None, help="folder for the JSON and markdown (default $OUT or .)")
    p.add_argument("--warm", type=int, default=0, metavar="JOBS",
                   help="first compile every build the run needs: one short run per (case, variant) in JOBS parallel "
                        "processes, each with an autotuner cache of its own (their timings are discarded; the "
                        "compiled kernels land in CuPy's disk cache). NVRTC builds otherwise dominate a first run")
    a = p.parse_args(argv)
    if a.reps < 30:
        p.error("--reps must be at least 30")
    sys.path.insert(0, str(ROOT))  # the checkout's sigconv
    from sigconv._core import devices as _devices

    reason = _devices.cuda_reason()
    if reason:
        print(f"boundary2d: no usable GPU ({reason})")
        return 2
    if a.warm > 0:
        _warm(a)
    import cupy

    from sigconv.backends import cuda2d
    from sigconv.registry import table as _registry
    from sigconv.registry.table import Conv2dJob

    device = _devices.gpu_name() or "gpu"
    now = datetime.datetime.now(datetime.timezone.utc)
    try:
        l2 = int(cupy.cuda.Device().attributes.get("L2CacheSize", 60 << 20))
    except Exception:  # pragma: no cover
        l2 = 64 << 20
    names = ["auto"] + [v.name for v in _registry.entries("conv2d", "cuda", kind="variant")]
    if a.variants:
        names = [n for n in names if n in a.variants]
    rng = np.random.default_rng(0)
    records, rows, wrong = [], [], 0
    print(f"boundary2d: {device}, {now:%Y-%m-%d %H:%M} UTC, float32, {a.reps} timed calls per boundary")
    for case in a.cases:
        H, W, kH, kW = CASES[case]
        pad, out_hw = ((kH - 1) // 2, (kW - 1) // 2), (H, W)
        outputs = out_hw[0] * out_hw[1]
        frac = _border_fraction(H, W, kH, kW, pad, out_hw)
        nbytes = H * W * 4
        copies = int(min(64, max(1, math.ceil(2 * l2 / nbytes))))
        xs = [cupy.asarray(rng.standard_normal((1, 1, H, W), dtype=np.float32)) for _ in range(copies)]
        xh = cupy.asnumpy(xs[0])[0, 0]
        out = cupy.empty((1, 1) + out_hw, cupy.float32)
        weights = {"random": rng.standard_normal((kH, kW)).astype(np.float32),
                   "rank-1": np.outer(rng.standard_normal(kH), rng.standard_normal(kW)).astype(np.float32)}
        print(f"\n{case}: {H}x{W}, {kH}x{kW} kernel, pad {pad}; border outputs {100 * frac:.2f}%; "
              f"{copies} input cop{'y' if copies == 1 else 'ies'}")
        for name in names:
            kind = "rank-1" if name == "separable" else "random"
            wh = weights[kind]
            w = cupy.asarray(wh.reshape(1, 1, kH, kW))
            # the host factors, as the API passes them (the launcher would otherwise read w back on every call)
            kw = {"factors": cuda2d.separable_factors(wh.reshape(1, 1, kH, kW))[:2]} if name == "separable" else {}
            # captured (GPU time): separable's factors already on the device (a host copy cannot be captured), and
            # its scratch from the stream-ordered pool (_graph_time captures under it)
            kwg = {"factors": tuple(cupy.asarray(f, dtype=cupy.float32) for f in kw["factors"])} if kw else {}
            if name != "auto":
                why = _registry.get("conv2d", "cuda", name).applies(
                    Conv2dJob((1, 1, H, W), (1, 1, kH, kW), "float32", (1, 1), pad, out_hw, rank1=kind == "rank-1"))
                if why:
                    print(f"  {name:10s} skipped: {why}")
                    continue
            row = {"case": case, "H": H, "W": W, "kH": kH, "kW": kW, "pad": list(pad), "variant": name,
                   "weights": kind, "border_fraction": frac, "ms": {}, "ratio": {}, "gpu_ms": {}, "gpu_ratio": {}}
            if name == "auto":  # auto chooses per border (each timed as it runs under that boundary)
                picks = {_label(b, f): cuda2d.resolve_auto(xs[0], w, None, (1, 1), pad, out_hw, boundary=b,
                                                           fillvalue=f) for b, f in BOUNDARIES}
                said = {lab: f"{v} {'x'.join(map(str, blk)) if blk else ''}".strip() for lab, (v, blk) in picks.items()}
                row["auto_choice"] = (said["fill(0)"] if len(set(said.values())) == 1
                                      else ", ".join(f"{lab} {c}" for lab, c in said.items()))
            row["path"] = "fused"
            # the other path (--paths): the copy, where the variant applies to it
            other = None
            if a.paths and name != "auto" and not _registry.get("conv2d", "cuda", name).applies(
                    Conv2dJob((1, 1, H + kH - 1, W + kW - 1), (1, 1, kH, kW), "float32", (1, 1), (0, 0), out_hw,
                              rank1=kind == "rank-1")):
                other = True
            row["other_path"] = "extend" if other else None
            ok = True
            todo = [(b, f, False) for b, f in BOUNDARIES]
            if other is not None:
                todo += [(b, f, other) for b, f in PATH_BOUNDARIES]
            for boundary, fill, extend in todo:
                lab = _label(boundary, fill) + (f" via {row['other_path']}" if extend else "")
                k = [0]

                def call():
                    x = xs[k[0] % copies]
                    k[0] += 1
                    return cuda2d.corr2d(x, w, None, (1, 1), pad, out_hw, variant=name, out=out, boundary=boundary,
                                         fillvalue=fill, extend=extend, **kw)

                out.fill(cupy.nan)
                y = cuda2d.corr2d(xs[0], w, None, (1, 1), pad, out_hw, variant=name, out=out, boundary=boundary,
                                  fillvalue=fill, extend=extend, **kw)
                err = 0.0
                for r0, r1 in _check_rows(out_hw[0]):
                    ref = _reference_rows(xh, wh, pad, out_hw, boundary, fill, r0, r1)
                    got = cupy.asnumpy(y[0, 0, r0:r1]).astype(np.float64)
                    e = np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-300) if np.isfinite(got).all() \
                        else np.inf
                    err = max(err, e)
                rec = {"case": case, "variant": name, "boundary": boundary, "fillvalue": fill, "rel_err": err,
                       "weights": kind, "path": row["other_path"] if extend else row["path"],
                       "device": device, "date": now.strftime("%Y-%m-%dT%H:%M:%SZ")}
                if not err <= 1e-5:
                    ok = False
                    wrong += 1
                    rec["status"] = "FAIL"
                    print(f"  {name:10s} {lab:9s} FAIL: rel err {err:.3g} > 1e-05 (not timed)")
                    records.append(rec)
                    continue
                if not extend:  # wall time for its own loads (the copy: GPU time only, below)
                    med, p20, p80 = _time(call, a.reps, a.warmup)
                    rec.update(status="ok", ms_median=med, p20=p20, p80=p80, reps=a.reps)
                    row["ms"][lab] = med
                else:
                    rec.update(status="ok", reps=a.reps)
                try:
                    g = _graph_time(lambda i: cuda2d.corr2d(xs[i], w, None, (1, 1), pad, out_hw, variant=name,
                                                            out=out, boundary=boundary, fillvalue=fill, extend=extend,
                                                            **kwg),
                                    copies, a.reps)
                    rec.update(gpu_ms_median=g[0], gpu_p20=g[1], gpu_p80=g[2])
                    row["gpu_ms"][lab] = g[0]
                except Exception as exc:  # not capturable (an allocation inside the call): wall time only
                    rec["gpu_ms_error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
                records.append(rec)
            fill_ms = row["ms"].get("fill(0)")
            for lab, ms in row["ms"].items():
                if fill_ms and lab != "fill(0)":
                    row["ratio"][lab] = ms / fill_ms
            gfill = row["gpu_ms"].get("fill(0)")
            for lab, ms in row["gpu_ms"].items():
                if gfill and lab != "fill(0)":
                    row["gpu_ratio"][lab] = ms / gfill
            own = {lab: r for lab, r in row["gpu_ratio"].items() if " via " not in lab}
            gworst = max(own.values(), default=float("nan"))
            row["gpu_verdict"] = ("n/a" if not own else "PASS" if gworst <= TARGET_RATIO else "MISS")
            if other is not None:
                # are the variant's own loads the faster way? (the worst of wrap and symm through each)
                theirs = [row["gpu_ratio"].get(f"{_label(b, f)} via {row['other_path']}") for b, f in PATH_BOUNDARIES]
                mine = [row["gpu_ratio"].get(_label(b, f)) for b, f in PATH_BOUNDARIES]
                if None not in theirs and None not in mine:
                    row["other_gpu_worst"] = max(theirs)
                    row["own_faster"] = max(mine) <= max(theirs)
            large = outputs >= LARGE_OUTPUTS
            worst = max(row["ratio"].values(), default=float("nan"))
            if not ok or not fill_ms:
                row["verdict"] = "FAIL"
            elif not large:
                row["verdict"] = "no target (small case)"
            else:
                row["verdict"] = "PASS" if worst <= TARGET_RATIO else "MISS"
            rows.append(row)
            print(f"  {name:10s} [{row['path']}]" + "".join(f" {lab} {ms:7.3f} ms" for lab, ms in row["ms"].items())
                  + f"  worst ratio {worst:.3f}  {row['verdict']}; GPU only worst {gworst:.3f} {row['gpu_verdict']}"
                  + (f" (auto ran {row['auto_choice']})" if name == "auto" else "")
                  + (f"; via {row['other_path']} GPU worst {row['other_gpu_worst']:.3f}, its own loads "
                     f"{'faster' if row['own_faster'] else 'SLOWER'}" if "own_faster" in row else ""))
        xs = out = y = None  # free the case's buffers before the next one
        cupy.get_default_memory_pool().free_all_blocks()

    labs = [_label(b, f) for b, f in BOUNDARIES]
    md = ["# 2-D boundaries: cost over fill(0)", "",
          f"{device}, {now:%Y-%m-%d %H:%M} UTC; float32, \"same\" windows; median of {a.reps} calls (p20-p80 in the "
          f"JSON); target: every boundary <= {TARGET_RATIO:.2f} x fill(0), on the GPU for every case, on the wall for "
          f"cases of >= 2^24 outputs. Every variant reads the extension in its own loads, in one launch "
          f"(fused).", "",
          "Two measures per call, each between CUDA events: **wall**, the calls queued back to back from Python (what "
          "a caller sees; when the host's launch path takes longer than the kernels, this is host time), and **GPU**, "
          "the same call captured into a CUDA graph and replayed back to back (the kernels alone).", "",
          "| case | variant | " + f"{labs[0]} ms wall / GPU | "
          + " | ".join(f"{lab} wall (x) / GPU (x)" for lab in labs[1:]) + " | verdict wall / GPU |",
          "|---|---|" + "---:|" * len(labs) + "---|"]
    for r in rows:
        g0 = r["gpu_ms"].get(labs[0])
        cells = [(f"{r['ms'][labs[0]]:.3f} / " + (f"{g0:.3f}" if g0 else "n/a")) if labs[0] in r["ms"] else "FAIL"]
        for lab in labs[1:]:
            if lab not in r["ratio"]:
                cells.append("FAIL")
                continue
            gpu = (f"{r['gpu_ms'][lab]:.3f} ({r['gpu_ratio'][lab]:.3f})" if lab in r["gpu_ratio"] else "n/a")
            cells.append(f"{r['ms'][lab]:.3f} ({r['ratio'][lab]:.3f}) / {gpu}")
        v = r["variant"] + (f" ({r['auto_choice']})" if "auto_choice" in r else "") \
            + (" rank-1" if r["weights"] == "rank-1" else "") + f" [{r['path']}]"
        md.append(f"| {r['case']} {r['H']}x{r['W']} k{r['kH']}x{r['kW']} | {v} | " + " | ".join(cells)
                  + f" | {r['verdict']} / {r.get('gpu_verdict', 'n/a')} |")
    both = [r for r in rows if r.get("other_path")]
    if both:
        plabs = [_label(b, f) for b, f in PATH_BOUNDARIES]
        md += ["", "## Both paths (GPU, kernels only; ratio to fill(0))", "",
               "Each variant through its own loads, and through the extended copy (conv2d_extend, then the variant "
               "with zero padding: corr2d's extend).", "",
               "| case | border outputs | variant | " + " | ".join(f"{lab}: own loads (x)" for lab in plabs)
               + " | " + " | ".join(f"{lab}: copy (x)" for lab in plabs) + " | own loads faster |",
               "|---|---:|---|" + "---:|" * (2 * len(plabs)) + "---|"]
        for r in both:
            mine = [f"{r['path']} {r['gpu_ratio'][lab]:.3f}" if lab in r["gpu_ratio"] else "n/a" for lab in plabs]
            theirs = [f"{r['other_path']} {r['gpu_ratio'][k]:.3f}" if (k := f"{lab} via {r['other_path']}")
                      in r["gpu_ratio"] else "n/a" for lab in plabs]
            verdict = "n/a" if "own_faster" not in r else "yes" if r["own_faster"] else "NO"
            md.append(f"| {r['case']} | {100 * r['border_fraction']:.2f}% | {r['variant']} | "
                      + " | ".join(mine) + " | " + " | ".join(theirs) + f" | {verdict} |")
    text = "\n".join(md) + "\n"
    print()
    print(text)
    out_dir = a.out or Path(os.environ.get("OUT") or Path.cwd())
    out_dir.mkdir(parents=True, exist_ok=True)
    stem = f"boundary2d-{_slug(device)}-{now:%Y-%m-%d}"
    meta = {"device": device, "date": now.strftime("%Y-%m-%dT%H:%M:%SZ"), "dtype": "float32", "reps": a.reps,
            "warmup": a.warmup, "target_ratio": TARGET_RATIO, "large_outputs": LARGE_OUTPUTS,
            "cupy": cupy.__version__, "l2_bytes": l2}
    (out_dir / f"{stem}.json").write_text(json.dumps({"meta": meta, "rows": rows, "records": records}, indent=1)
                                          + "\n")
    (out_dir / f"{stem}.md").write_text(text)
    print(f"wrote {out_dir / (stem + '.json')}\nwrote {out_dir / (stem + '.md')}")
    misses = [f"{r['case']} {r['variant']}" for r in rows if r["verdict"] == "MISS"]
    gmisses = [f"{r['case']} {r['variant']}" for r in rows if r.get("gpu_verdict") == "MISS"]
    slower = [f"{r['case']} {r['variant']}" for r in rows if r.get("own_faster") is False]
    if both:
        print("paths: the variants' own loads are faster than the copy " + ("everywhere" if not slower else
                                                           f"except on {', '.join(slower)}"))
    print(f"verdict (wall): boundaries within {TARGET_RATIO:.2f} x fill(0) on the large cases: "
          + ("PASS" if not misses else f"MISS ({', '.join(misses)})") + (f"; {wrong} wrong results" if wrong else ""))
    print("verdict (GPU, kernels only, every case): " + ("PASS" if not gmisses else f"MISS ({', '.join(gmisses)})"))
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
