"""The fused kernel's time after other launches: what the launch queued before it (the spectrum kernel that device taps
run first, or anything else) does to the kernel itself.

    python benchmarks/fused_after.py [--K 7921 4095] [--L 26] [--blocks 512 1024] [--out DIR]

For each K ("same" window, one channel of 2^L samples, float32) and block, the kernel as its launcher plans it (its
table from host taps, so that nothing else runs) timed alone and after each of these, launched before it every call:
  add1            a one-element add (cupy)
  add16M          an add over 16 MiB (cupy): every multiprocessor, 32 MiB through memory
  empty-smem      an empty kernel of the spectrum kernel's block (max(32, N/32) threads) and shared memory
  compare-copy    a kernel of the same block and shared memory that compares the taps with a record of them, as the
                  spectrum kernel's first lines do (they are the same: it returns)
  compare-big-code  the same comparison with some 100 KB of code after it, which it skips
  spectrum        the spectrum kernel (overlap_save's device-taps path; the taps the same as the last call's, so it
                  compares them and returns)
  spectrum-smem0  the same kernel launched without dynamic shared memory (its comparison path touches none)
  spectrum-32-registers  the spectrum kernel built with at most 32 registers a thread (it takes 58)
  spectrum-same-module  the spectrum kernel and the kernel compiled into one module by NVRTC, the one after the other
then the kernel launched to start while the spectrum kernel runs (programmatic dependent launch,
sigconv._kernels.launch_after) after it, and the launcher's calls (overlap_save.launch_fft_fused) with host taps,
with device taps launched plainly (SIGCONV_PDL=0) and with device taps so; then the kernel alone under each
shared-memory carveout preference of --carveouts (percent of the most; the driver's
choice is the default). CUDA-event medians of 40 back-to-back calls, the best of 3 rounds; a row's extra is its time
less the kernel alone's (the earlier launch's own time is in it: printed beside it, timed alone the same way, which
for a launch shorter than Python's time to issue it measures the host). With torch installed, the kernels' own durations as CUPTI records them
(torch.profiler) for the kernel alone and after the spectrum kernel. --out writes fused-after-<device>-<date>.json
and .md. Needs a GPU.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

COMPARE_SRC = r"""
extern "C" __global__ void __launch_bounds__(1024) compare_taps(const float* w, int K, int tag, const int* last,
                                                                int* flag) {
    extern __shared__ float unused[];
    if (last[0] == tag) {
        int differ = 0;
        for (int j = threadIdx.x; j < K; j += blockDim.x) differ |= __float_as_int(w[j]) != last[1 + j];
        if (!__syncthreads_or(differ)) return;
    }
    if (threadIdx.x == 0) flag[0] = 1;
}
// the same comparison with some 100 KB of code after it that the comparison skips (the spectrum kernel's size)
extern "C" __global__ void __launch_bounds__(1024) compare_taps_big(const float* w, int K, int tag, const int* last,
                                                                    int* flag) {
    extern __shared__ float smem[];
    if (last[0] == tag) {
        int differ = 0;
        for (int j = threadIdx.x; j < K; j += blockDim.x) differ |= __float_as_int(w[j]) != last[1 + j];
        if (!__syncthreads_or(differ)) return;
    }
    float a = w[threadIdx.x], b = w[threadIdx.x + 1];
BIG_BODY
    if (threadIdx.x == 0) flag[0] = 1 + (a + b == 12345.0f);
}
extern "C" __global__ void empty(int* flag) {
    extern __shared__ float unused[];
    if (threadIdx.x == 0 && blockIdx.x == 0x7fffffff) flag[0] = unused[0];
}
""".replace("BIG_BODY", "".join(f"    a = fmaf(a, smem[{(37 * i) % 1021}], b); b = fmaf(b, a, smem[{(53 * i + 7) % 1019}]);\n"
                                 for i in range(3000)))


def _time(fn, n: int = 40, rounds: int = 3) -> float:
    """Best of ``rounds`` CUDA-event medians of ``n`` back-to-back calls (ms)."""
    import cupy

    best = float("inf")
    for _ in range(rounds):
        for i in range(3):
            fn(i)
        ev = [(cupy.cuda.Event(), cupy.cuda.Event()) for _ in range(n)]
        for i, (a, b) in enumerate(ev):
            a.record()
            fn(i)
            b.record()
        ev[-1][1].synchronize()
        best = min(best, float(np.median([cupy.cuda.get_elapsed_time(a, b) for a, b in ev])))
    return best


def _cupti(fn, calls: int = 10) -> dict:
    """{kernel name: median microseconds} of ``calls`` calls as CUPTI records them (torch.profiler), or {}."""
    try:
        import torch
        from torch.profiler import ProfilerActivity, profile
    except ImportError:
        return {}
    import cupy

    torch.cuda.init()
    for i in range(3):
        fn(i)
    cupy.cuda.Device().synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for i in range(calls):
            fn(i)
        cupy.cuda.Device().synchronize()
    by: dict = {}
    for e in prof.events():
        if e.device_type.name == "CUDA":
            by.setdefault(e.name.split("(")[0], []).append(e.time_range.end - e.time_range.start)
    return {k: float(np.median(v)) for k, v in by.items()}


def main(argv=None) -> int:
    sys.path.insert(0, str(ROOT))
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--K", type=int, nargs="+", default=[7921, 4095])
    p.add_argument("--L", type=int, default=26, help="log2 of the signal length")
    p.add_argument("--blocks", type=int, nargs="+", default=[512, 1024], help="the kernel's blocks (where they apply)")
    p.add_argument("--carveouts", type=int, nargs="*", default=[60, 75, 100])
    p.add_argument("--out", type=Path, default=None, help="folder for the JSON and markdown files")
    a = p.parse_args(argv)
    from sigconv._core import devices as _devices

    if _devices.cuda_reason():
        print("fused_after: no GPU:", _devices.cuda_reason())
        return 2
    import cupy

    from sigconv import _kernels
    from sigconv.backends import cuda1d
    from sigconv.backends import overlap_save as os_

    L = 1 << a.L
    rng = np.random.default_rng(1)
    xs = [cupy.asarray(rng.standard_normal((1, L), dtype=np.float32)) for _ in range(2)]
    out = cupy.empty((1, L), cupy.float32)
    one_a, one_b = cupy.ones(1, cupy.float32), cupy.empty(1, cupy.float32)
    big_a, big_b = cupy.ones(1 << 22, cupy.float32), cupy.empty(1 << 22, cupy.float32)
    aux = cupy.RawModule(code=COMPARE_SRC)
    flag = cupy.zeros(1, cupy.int32)
    device = cupy.cuda.runtime.getDeviceProperties(cupy.cuda.Device().id)["name"].decode()
    rows = []
    for K in a.K:
        wh = (rng.standard_normal(K) / np.sqrt(K)).astype(np.float32)
        w = cupy.asarray(wh)
        pad = (K - 1) // 2
        key = cuda1d.host_taps_key(wh)
        for block in a.blocks:
            try:
                N = os_.fused_plan(K, L, 1, block)["N"]
            except ValueError as exc:
                print(f"K={K} block={block}: {exc}")
                continue
            z, d = os_.fused_alignment(K, pad, N)
            pairs = os_.fused_pairs(N, block, K + z + d, pad + z, L, True)
            plan = os_.fused_plan(K + z + d, L, 1, block, tile=N, pairs=pairs)
            G, ts = os_._fused_spectrum(w, N, key, d)
            tw = os_._device_twiddles(N)
            spec_expr = f"conv1d_fft_fused_spectrum<{N.bit_length() - 1}>"
            ssmem, sblock = os_._fused_smem(N, 1), max(32, N // 32)
            fn = os_._fused_function(plan["expr"], plan["smem"])
            one_mod = _kernels.module(cuda1d.SOURCE, defines={"SIGCONV_FUSED_AFTER_ONE_MODULE": 1},
                                      name_expressions=(plan["expr"], spec_expr))
            fn1, spec1 = one_mod.get_function(plan["expr"]), one_mod.get_function(spec_expr)
            spec32 = _kernels.module(cuda1d.SOURCE, name_expressions=(spec_expr,),
                                     options=("--maxrregcount=32",)).get_function(spec_expr)
            spec32.max_dynamic_shared_size_bytes = ssmem
            fn1.max_dynamic_shared_size_bytes = plan["smem"]
            spec1.max_dynamic_shared_size_bytes = ssmem
            Gd = cupy.empty((N // 2, 4), cupy.float32)
            tsd = cupy.empty(1, cupy.int32)
            last = cupy.zeros(N // 2 + 1, cupy.int32)
            spec_args = (w, np.int32(K), np.int32(d), tw, Gd, tsd, last)
            spec1((1,), (sblock,), spec_args, shared_mem=ssmem)  # (the record: every later call compares and returns)
            cupy.cuda.Device().synchronize()
            tag = np.int32(int(last[0]))
            spec = os_._fused_function(spec_expr, ssmem)
            compare, empty = aux.get_function("compare_taps"), aux.get_function("empty")
            compare_big = aux.get_function("compare_taps_big")
            for f in (compare, compare_big, empty):
                f.max_dynamic_shared_size_bytes = ssmem

            def kernel(i, f=fn):
                f(plan["grid"], (block,),
                  (xs[i % 2], out, G, tw, tw, np.int32(1), np.int64(L), np.int32(K + z + d), np.int64(pad + z),
                   np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"])),
                  shared_mem=plan["smem"])

            before = {
                "add1": lambda i: cupy.add(one_a, one_a, out=one_b),
                "add16M": lambda i: cupy.add(big_a, big_a, out=big_b),
                "empty-smem": lambda i: empty((1,), (sblock,), (flag,), shared_mem=ssmem),
                "compare-copy": lambda i: compare((1,), (sblock,), (w, np.int32(K), tag, last, flag), shared_mem=ssmem),
                "compare-big-code": lambda i: compare_big((1,), (sblock,), (w, np.int32(K), tag, last, flag),
                                                          shared_mem=ssmem),
                "spectrum": lambda i: spec((1,), (sblock,), spec_args, shared_mem=ssmem),
                "spectrum-smem0": lambda i: spec((1,), (sblock,), spec_args, shared_mem=0),
                "spectrum-32-registers": lambda i: spec32((1,), (sblock,), spec_args, shared_mem=ssmem),
                "spectrum-same-module": lambda i: spec1((1,), (sblock,), spec_args, shared_mem=ssmem),
            }
            alone = _time(kernel)
            row = {"K": K, "block": block, "tile": N, "expr": plan["expr"], "kernel_ms": alone, "after": {},
                   "carveout": {}}
            print(f"K={K} block={block} tile={N} {plan['expr']}: kernel alone {alone:.4f} ms", flush=True)
            for name, g in before.items():
                own = _time(g)
                if name == "spectrum-same-module":
                    both = _time(lambda i, g=g: (g(i), kernel(i, fn1)))
                    base = _time(lambda i: kernel(i, fn1))
                else:
                    both, base = _time(lambda i, g=g: (g(i), kernel(i))), alone
                row["after"][name] = {"ms": both, "before_alone_ms": own, "kernel_alone_ms": base,
                                      "extra_ms": both - base}
                print(f"  after {name:22s} {both:.4f} ms (that launch alone {own:.4f}; kernel alone {base:.4f}): "
                      f"+{(both - base) * 1e3:.1f} us", flush=True)
            assert int(flag[0]) == 0, "the comparison copy found the taps changed"
            # the kernel launched to start while the spectrum kernel runs (programmatic dependent launch), and the
            # launcher's three paths: host taps (no spectrum kernel), device taps with the plain launch and with that
            kargs = (xs[0], out, G, tw, tw, np.int32(1), np.int64(L), np.int32(K + z + d), np.int64(pad + z),
                     np.int64(L), np.int64(plan["ntiles"]), ts, np.int32(os_.FFT_SAFE_EXPONENT["float32"]))

            def pdl(i):
                if not _kernels.launch_after(fn, plan["grid"], (block,), kargs, plan["smem"]):
                    raise RuntimeError("no programmatic dependent launch here (compute capability 9.0 and "
                                       "cuda-bindings needed, SIGCONV_PDL not 0)")

            def launcher(env, taps_key=None):
                def call(i):
                    os.environ[_kernels.PDL_ENV] = env
                    os_.launch_fft_fused(xs[i % 2], w, pad, L, block, out=out, taps_key=taps_key)
                return call

            row["paths"] = {}
            paths = {"spectrum, then the kernel (PDL)": lambda i: (spec((1,), (sblock,), spec_args, shared_mem=ssmem),
                                                                    pdl(i)),
                     "launcher, host taps": launcher("1", key), "launcher, device taps (plain)": launcher("0"),
                     "launcher, device taps (PDL)": launcher("1")}
            for name, g in paths.items():
                try:
                    row["paths"][name] = _time(g)
                except RuntimeError as exc:
                    print(f"  {name}: {exc}", flush=True)
                    continue
                print(f"  {name:34s} {row['paths'][name]:.4f} ms: +{(row['paths'][name] - alone) * 1e3:.1f} us "
                      f"over the kernel alone", flush=True)
            os.environ.pop(_kernels.PDL_ENV, None)
            for pc in a.carveouts:
                fn.preferred_shared_memory_carveout = pc
                row["carveout"][pc] = _time(kernel)
                print(f"  carveout {pc}%: kernel alone {row['carveout'][pc]:.4f} ms", flush=True)
            fn.preferred_shared_memory_carveout = -1
            row["cupti_us"] = {"alone": _cupti(kernel),
                               "after spectrum": _cupti(lambda i: (before["spectrum"](i), kernel(i)))}
            for k, v in row["cupti_us"].items():
                print(f"  CUPTI, {k}: " + ", ".join(f"{n} {t:.1f} us" for n, t in v.items()), flush=True)
            rows.append(row)
    if a.out is not None:
        a.out.mkdir(parents=True, exist_ok=True)
        stem = f"fused-after-{device.replace(' ', '-')}-{datetime.date.today().isoformat()}"
        (a.out / f"{stem}.json").write_text(json.dumps({"device": device, "L": L, "rows": rows}, indent=1))
        names = list(rows[0]["after"]) if rows else []
        md = [f"# The fused kernel after other launches ({device}, L = 2^{a.L}, one channel)", "",
              "| K | block | alone (ms) | " + " | ".join(f"+us after {n}" for n in names) + " |",
              "|---:|---:|---:|" + "---:|" * len(names)]
        for r in rows:
            md.append(f"| {r['K']} | {r['block']} | {r['kernel_ms']:.4f} | "
                      + " | ".join(f"{r['after'][n]['extra_ms'] * 1e3:.1f}" for n in names) + " |")
        pnames = sorted({n for r in rows for n in r["paths"]}, key=[n for r in rows for n in r["paths"]].index)
        md += ["", "Whole calls (ms; PDL: the kernel starts while the spectrum kernel runs, sigconv._kernels."
               "launch_after):", "", "| K | block | alone | " + " | ".join(pnames) + " |",
               "|---:|---:|---:|" + "---:|" * len(pnames)]
        for r in rows:
            md.append(f"| {r['K']} | {r['block']} | {r['kernel_ms']:.4f} | "
                      + " | ".join(f"{r['paths'][n]:.4f}" if n in r["paths"] else "-" for n in pnames) + " |")
        (a.out / f"{stem}.md").write_text("\n".join(md) + "\n")
        print(f"wrote {a.out / stem}.json and .md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
