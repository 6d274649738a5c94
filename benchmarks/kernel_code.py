"""The fused kernels' code as NVRTC builds it, no GPU needed: instructions, bytes, registers and spills of each, and
with --lines the source lines its instructions come from; for this tree, and another commit's kernels beside it.

    python benchmarks/kernel_code.py [--expr E ...] [--arch 90] [--define NAME=V ...] [--old REV|DIR]
                                     [--lines N] [--out DIR]

Each name expression (default: the fused tile kernels of 2^12 to 2^15 samples the launchers run on their default
blocks, and the spectrum kernel) is compiled alone from conv1d.cu with the options CuPy adds
(sigconv._kernels.cupy_compile_options), as tools/prebuild_kernels.py builds it. Its code's bytes are its .text
section's in the cubin (16 bytes an instruction); registers and spills are ptxas's report. A kernel's code beyond
the instruction cache costs a tile fetches of code from L2 (Nsight Compute's "no instruction" stalls), and code that
every tile runs is what a tile issues.

--old REV (a commit: git archive REV kernels) or DIR (a folder holding that kernels/) adds the same for those
sources. --lines N lists, for the working tree's first expression, the N source lines with the most instructions
(inlined calls attributed to the line of the kernel's code that calls them, one level below the kernel and one
more), and each one's instruction classes; it needs nvdisasm (pip install nvidia-cuda-nvdisasm, or CUDA's;
--nvdisasm PATH). --out writes kernel-code-sm_<arch>-<date>.json and .md. Needs NVRTC (pip install
nvidia-cuda-nvrtc) and, for --old REV, git.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import glob
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_EXPRS = ("conv1d_fft_fused<15, true, true, true>", "conv1d_fft_fused<15, true, false, true>",
                 "conv1d_fft_fused<15, true, true>", "conv1d_fft_fused<14, true>", "conv1d_fft_fused<13, true>",
                 "conv1d_fft_fused<12, true>", "conv1d_fft_fused_spectrum<15>")


def text_sections(cubin: bytes) -> dict:
    """{section name: bytes} of the .text.* sections of an ELF64 cubin (a function's code is .text.<its name>)."""
    shoff, = struct.unpack_from("<Q", cubin, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    strtab = headers[shstrndx][4]  # (sh_offset of the section names)
    out = {}
    for name_off, _, _, _, _, size, *_ in headers:
        name = cubin[strtab + name_off:cubin.index(b"\0", strtab + name_off)].decode()
        if name.startswith(".text."):
            out[name[len(".text."):]] = size
    return out


def find_nvdisasm(explicit: str | None) -> str | None:
    """nvdisasm: ``explicit``, on PATH, in the nvidia-cuda-nvdisasm wheel, under $CUDA_HOME."""
    cands = [explicit, shutil.which("nvdisasm")]
    for site in sys.path:
        cands += sorted(glob.glob(os.path.join(site, "nvidia", "cu*", "bin", "nvdisasm")))
        cands += sorted(glob.glob(os.path.join(site, "nvidia", "cuda_nvdisasm", "bin", "nvdisasm")))
    if os.environ.get("CUDA_HOME"):
        cands.append(os.path.join(os.environ["CUDA_HOME"], "bin", "nvdisasm"))
    return next((c for c in cands if c and os.path.isfile(c)), None)


def build(nvrtc, pk, code: str, expr: str, arch: str, defines) -> dict:
    """One expression compiled alone: its cubin, lowered name, code bytes, registers and spill bytes."""
    from sigconv import _kernels

    log = []
    opts = _kernels.cupy_compile_options(arch, ["--ptxas-options=-v", "-lineinfo", *(f"-D{d}" for d in defines)])
    cubin, lowered = nvrtc.compile(code, opts, (expr,), log)
    name = lowered[expr]
    report = log[0]
    at = report.index(f"Compiling entry function '{name}'")
    regs = int(re.search(r"Used (\d+) registers", report[at:]).group(1))
    spills = pk.spills(report).get(name, (0, 0))
    size = text_sections(cubin)[name]
    return {"expr": expr, "name": name, "bytes": size, "instructions": size // 16, "registers": regs,
            "spill_bytes": list(spills), "cubin": cubin}


def line_attribution(cubin: bytes, name: str, code: str, nvdisasm: str, depth: int = 2) -> list:
    """[(source lines of the call chain below the kernel, up to ``depth``, instructions, {class: count})], most
    instructions first: nvdisasm's inline line info of ``name``'s code, lines of ``code``."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "k.cubin"
        path.write_bytes(cubin)
        sass = subprocess.run([nvdisasm, "-c", "-gi", str(path)], capture_output=True, text=True, check=True).stdout
    counts, classes = collections.Counter(), collections.defaultdict(collections.Counter)
    inside, chain, pending, fresh = False, (), [], True
    for line in sass.splitlines():
        if ".section" in line and ".text." in line:
            inside = f".text.{name}," in line
            continue
        if not inside:
            continue
        m = re.match(r'\s*//## File ".*?", line (\d+)', line)
        if m:
            if fresh:
                pending, fresh = [], False
            pending.append(int(m.group(1)))
            continue
        m = re.match(r"\s+/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", line)
        if m:
            if not fresh:
                chain, fresh = tuple(reversed(pending)), True  # (outermost first: the kernel's own line)
            key = chain[:depth + 1]
            counts[key] += 1
            classes[key][m.group(1)] += 1
    lines = code.splitlines()

    def text(n: int) -> str:
        return lines[n - 1].strip() if 0 < n <= len(lines) else "?"

    return [(" > ".join(text(n)[:60] for n in key[1:]) or text(key[0])[:60], n, dict(classes[key].most_common(5)))
            for key, n in counts.most_common()]


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--expr", nargs="+", default=list(DEFAULT_EXPRS), help="name expressions (default: %(default)s)")
    p.add_argument("--arch", default="90", help="compute capability, as sm_<arch> (default: %(default)s)")
    p.add_argument("--define", nargs="*", default=[], metavar="NAME=V", help="defines in front (experiments)")
    p.add_argument("--old", default=None, help="a commit whose kernels/ to build beside, or a folder holding it")
    p.add_argument("--lines", type=int, default=0, metavar="N", help="the N source lines with the most instructions")
    p.add_argument("--nvdisasm", default=None, help="nvdisasm's path (default: PATH, its wheel, $CUDA_HOME)")
    p.add_argument("--out", type=Path, default=None, help="folder for the JSON and markdown files")
    a = p.parse_args(argv)
    from sigconv import _kernels

    sys.path.insert(0, str(ROOT / "tools"))
    import prebuild_kernels as pk

    try:
        nvrtc = pk.NVRTC(pk.find_nvrtc(None))
    except (SystemExit, OSError) as e:
        print(f"kernel_code: no NVRTC ({e})")
        return 2

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from fused_ab import conv1d_source  # (this folder)

    sides = {"tree": conv1d_source()}
    if a.old:
        sides["old"] = conv1d_source(a.old)
    rows, builds = [], {}
    for expr in a.expr:
        for side, code in sides.items():
            try:
                b = build(nvrtc, pk, code, expr, a.arch, a.define)
            except RuntimeError as e:  # (an expression the other side does not have)
                print(f"{side:>4} {expr}: not built ({str(e).splitlines()[0]})")
                continue
            builds[(side, expr)] = b
            rows.append({k: v for k, v in b.items() if k != "cubin"} | {"side": side})
            print(f"{side:>4} {expr:42s} {b['instructions']:6d} instructions {b['bytes'] / 1024:6.1f} KB "
                  f"{b['registers']:4d} registers, spills {b['spill_bytes'][0]}/{b['spill_bytes'][1]} B", flush=True)
    lines = []
    if a.lines and ("tree", a.expr[0]) in builds:
        nvdisasm = find_nvdisasm(a.nvdisasm)
        if nvdisasm is None:
            print("kernel_code: --lines needs nvdisasm (pip install nvidia-cuda-nvdisasm, or --nvdisasm PATH)")
            return 2
        b = builds[("tree", a.expr[0])]
        lines = line_attribution(b["cubin"], b["name"], sides["tree"], nvdisasm)[:a.lines]
        print(f"\n{a.expr[0]}: the source lines with the most instructions")
        for where, n, cls in lines:
            print(f"{n:6d}  {where}  {cls}")
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        stem = f"kernel-code-sm_{a.arch}-{datetime.date.today().isoformat()}"
        meta = {"arch": a.arch, "defines": a.define, "old": a.old, "compiler": nvrtc.version(),
                "options": _kernels.cupy_compile_options(a.arch, ["-lineinfo"]),
                "date": datetime.date.today().isoformat()}
        (a.out / f"{stem}.json").write_text(json.dumps({**meta, "kernels": rows,
                                                        "lines": [{"where": w, "instructions": n, "classes": c}
                                                                  for w, n, c in lines]}, indent=1))
        md = [f"# Code of the fused kernels (sm_{a.arch}, NVRTC {meta['compiler']}, {meta['date']})", "",
              "| kernel | side | instructions | KB | registers | spill bytes (stores/loads) |",
              "|---|---|---:|---:|---:|---|"]
        md += [f"| `{r['expr']}` | {r['side']} | {r['instructions']} | {r['bytes'] / 1024:.1f} | {r['registers']} | "
               f"{r['spill_bytes'][0]}/{r['spill_bytes'][1]} |" for r in rows]
        if lines:
            md += ["", f"`{a.expr[0]}`: the source lines with the most instructions", "",
                   "| instructions | where | classes |", "|---:|---|---|"]
            md += [f"| {n} | `{w}` | {', '.join(f'{k} {v}' for k, v in c.items())} |" for w, n, c in lines]
        (a.out / f"{stem}.md").write_text("\n".join(md) + "\n")
        print(f"wrote {a.out / stem}.json and .md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
