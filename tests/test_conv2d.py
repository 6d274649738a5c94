"""conv2d / convolve2d / correlate2d on the CPU backend against independent float64 references (CI, fast)."""

import numpy as np
import pytest
import scipy.signal
from hypothesis import given, settings
from hypothesis import strategies as st

import sigconv
from sigconv._conv2d import conv2d_geometry

TOL = {np.float32: 1e-5, np.float64: 1e-10}


def ref_conv2d(x, w, bias=None, stride=(1, 1), pad=(0, 0), out_hw=None):
    """Explicit-loop float64 reference of torch's conv2d (cross-correlation, zero padding)."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    N, Cin, H, W = x.shape
    Cout, _, kH, kW = w.shape
    sy, sx = stride
    py, px = pad
    if out_hw is None:
        out_hw = ((H + 2 * py - kH) // sy + 1, (W + 2 * px - kW) // sx + 1)
    Ho, Wo = out_hw
    canvas = np.zeros((N, Cin, (Ho - 1) * sy + kH, (Wo - 1) * sx + kW))
    for r in range(canvas.shape[2]):
        for c in range(canvas.shape[3]):
            gr, gc = r - py, c - px
            if 0 <= gr < H and 0 <= gc < W:
                canvas[:, :, r, c] = x[:, :, gr, gc]
    y = np.zeros((N, Cout, Ho, Wo))
    for r in range(Ho):
        for c in range(Wo):
            patch = canvas[:, :, r * sy:r * sy + kH, c * sx:c * sx + kW]  # (N, Cin, kH, kW)
            y[:, :, r, c] = np.einsum("nchw,ochw->no", patch, w)
    if bias is not None:
        y += np.asarray(bias, np.float64)[None, :, None, None]
    return y


def assert_close(y, ref, dtype):
    y = np.asarray(y, np.float64)
    assert y.shape == ref.shape, (y.shape, ref.shape)
    err = np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-300)
    if not err <= TOL[dtype]:
        bad = np.argwhere(~np.isclose(y, ref, rtol=TOL[dtype] * 10, atol=TOL[dtype] * np.abs(ref).max()))
        idx = tuple(bad[0]) if len(bad) else None
        pytest.fail(f"rel err {err:.3g} > {TOL[dtype]}; first mismatch at {idx}: "
                    f"{y[idx] if idx else None} vs {ref[idx] if idx else None}")


CASES = [
    # (N, Cin, H, W, Cout, kH, kW, stride, padding)
    (1, 1, 7, 11, 1, 3, 3, 1, 0),
    (2, 3, 13, 17, 4, 3, 3, 1, 1),
    (1, 2, 11, 1, 3, 3, 1, 1, 0),        # W = 1
    (1, 1, 29, 31, 2, 4, 2, 1, "same"),  # even kernel, torch's asymmetric same pad
    (2, 2, 17, 19, 3, 5, 5, 2, 2),
    (1, 3, 23, 13, 2, 3, 4, (3, 2), (1, 0)),
    (1, 1, 5, 5, 1, 6, 6, 1, 1),         # kernel larger than the input, fits the padded one
    (3, 1, 1, 9, 2, 1, 3, (1, 4), (0, 3)),
]


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("variant", ["direct", "fft"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_conv2d_cpu_matches_reference(case, variant, dtype, rng):
    """conv2d on the cpu backend equals the loop reference for awkward shapes, strides and pads."""
    N, Cin, H, W, Cout, kH, kW, stride, padding = case
    x = rng.standard_normal((N, Cin, H, W)).astype(dtype)
    w = rng.standard_normal((Cout, Cin, kH, kW)).astype(dtype)
    b = rng.standard_normal(Cout).astype(dtype)
    s = stride if isinstance(stride, tuple) else (stride, stride)
    if variant == "fft" and s != (1, 1):
        pass  # cpu fft subsamples a stride-1 result: still valid, exercised too
    pad, out_hw, _ = conv2d_geometry((H, W), (kH, kW), stride, padding)
    ref = ref_conv2d(x, w, b, s, pad, out_hw)
    y = sigconv.conv2d(x, w, b, stride=stride, padding=padding, backend="cpu", variant=variant)
    assert y.dtype == dtype
    assert_close(y, ref, dtype)


def test_conv2d_unbatched_and_dtype_rules(rng):
    """A 3-D input gives a 3-D output; mixed dtypes give float64, all-float32 stays float32."""
    x = rng.standard_normal((2, 9, 8)).astype(np.float32)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    y = sigconv.conv2d(x, w, padding=1, backend="cpu")
    assert y.shape == (3, 9, 8) and y.dtype == np.float32
    assert_close(y, ref_conv2d(x[None], w, pad=(1, 1))[0], np.float32)
    y64 = sigconv.conv2d(x, w.astype(np.float64), backend="cpu")
    assert y64.dtype == np.float64
    yi = sigconv.conv2d(np.arange(16).reshape(1, 1, 4, 4), np.ones((1, 1, 2, 2), int), backend="cpu")
    assert yi.dtype == np.float64 and yi[0, 0, 0, 0] == 0 + 1 + 4 + 5


def test_same_padding_matches_torch_split(rng):
    """padding='same' pads (k-1)//2 on the top/left and the rest on the bottom/right (torch's rule)."""
    x = rng.standard_normal((1, 1, 6, 7))
    for k in (1, 2, 3, 4, 5, 6):
        w = rng.standard_normal((1, 1, k, k))
        y = sigconv.conv2d(x, w, padding="same", backend="cpu")
        full = scipy.signal.correlate2d(x[0, 0], w[0, 0], mode="full")
        lo = k - 1 - (k - 1) // 2  # offset of the same window inside the full correlation
        assert_close(y[0, 0], full[lo:lo + 6, lo:lo + 7], np.float64)


@pytest.mark.parametrize("kwargs, match", [
    (dict(x=np.ones((1, 2, 5, 5)), w=np.ones((1, 3, 3, 3))), "input channels mismatch"),
    (dict(x=np.ones((1, 2, 5, 5)), w=np.ones((4, 2, 3, 3)), bias=np.ones(3)), "bias must have shape"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 7, 3))), "larger than the padded input"),
    (dict(x=np.ones((1, 1, 40, 40)), w=np.ones((1, 1, 32, 3))), "at most 31x31"),
    (dict(x=np.ones((5, 5)), w=np.ones((1, 1, 3, 3))), "x must be 4-D"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((3, 3))), "w must be 4-D"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), stride=5), "stride must be"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), stride=0), "stride must be"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), stride=(1, 2, 3)), "stride must be"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), padding=-1), "padding must be"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), padding="full"), "padding must be"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), padding="same", stride=2), "needs stride 1"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.full((1, 1, 3, 3), np.nan)), "w must be finite"),
    (dict(x=np.ones((1, 0, 5, 5)), w=np.ones((1, 0, 3, 3))), "non-empty"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), block=(3, 3)), "block"),
    (dict(x=np.ones((1, 1, 5, 5)), w=np.ones((1, 1, 3, 3)), variant="nope"), "variant must be one of"),
])
def test_conv2d_invalid(kwargs, match):
    """Every invalid argument raises ValueError naming the problem."""
    with pytest.raises(ValueError, match=match):
        sigconv.conv2d(backend="cpu", **kwargs)


SCIPY_SHAPES = [((7, 11), (3, 3)), ((13, 1), (4, 1)), ((5, 6), (7, 9)), ((1, 1), (3, 2)), ((17, 19), (2, 5)),
                ((4, 9), (4, 9)), ((6, 3), (2, 8))]


@pytest.mark.parametrize("xs, ks", SCIPY_SHAPES)
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fn", ["convolve2d", "correlate2d"])
def test_2d_modes_match_scipy(xs, ks, mode, fn, rng):
    """convolve2d / correlate2d on the cpu backend equal scipy.signal's, including kernels larger than x."""
    x = rng.standard_normal(xs)
    k = rng.standard_normal(ks)
    ref_fn = getattr(scipy.signal, fn)
    try:
        ref = ref_fn(x, k, mode=mode)
    except ValueError:
        with pytest.raises(ValueError):
            getattr(sigconv, fn)(x, k, mode=mode, backend="cpu")
        return
    y = getattr(sigconv, fn)(x, k, mode=mode, backend="cpu")
    assert_close(y, ref, np.float64)


@settings(max_examples=40, deadline=None)
@given(N=st.integers(1, 2), Cin=st.integers(1, 3), Cout=st.integers(1, 3), H=st.integers(1, 12),
       W=st.integers(1, 12), kH=st.integers(1, 5), kW=st.integers(1, 5), sy=st.integers(1, 4),
       sx=st.integers(1, 4), py=st.integers(0, 3), px=st.integers(0, 3), seed=st.integers(0, 2**31))
def test_conv2d_property(N, Cin, Cout, H, W, kH, kW, sy, sx, py, px, seed):
    """Random small shapes: conv2d cpu == loop reference (or a ValueError when the kernel does not fit)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((N, Cin, H, W))
    w = rng.standard_normal((Cout, Cin, kH, kW))
    if kH > H + 2 * py or kW > W + 2 * px:
        with pytest.raises(ValueError, match="larger than the padded input"):
            sigconv.conv2d(x, w, stride=(sy, sx), padding=(py, px), backend="cpu")
        return
    y = sigconv.conv2d(x, w, stride=(sy, sx), padding=(py, px), backend="cpu")
    assert_close(y, ref_conv2d(x, w, None, (sy, sx), (py, px)), np.float64)


def test_cuda2d_registry_and_block_lists():
    """The cuda conv2d variants are registered with their block grids; no cupy import needed to list them."""
    names = [v["name"] for v in sigconv.variants("conv2d") if v["backend"] == "cuda"]
    assert names == ["naive", "shared", "regblock", "prefetch", "strip", "shfl", "separable", "igemm", "igemm_tf32"]
    for v in sigconv.variants("conv2d"):
        if v["backend"] == "cuda":
            assert v["default_block"] in [tuple(b) for b in v["blocks"]]
            assert v["block_rule"].startswith("any bx x by of a multiple of 32 threads up to 1024")


def test_every_multiple_of_32_is_a_block_of_every_variant():
    """Every cuda variant, 1-D and 2-D, takes any multiple of 32 up to 1024 as its block; a 2-D integer is laid out
    in a block the variant accepts (bx a multiple of its step) and whose tiles fit in shared memory for the largest
    kernel; 2-D pairs of a multiple of 32 threads are accepted where bx suits the variant, and each refusal names the
    rule it breaks."""
    from sigconv.backends import cuda2d
    from sigconv.registry import table

    for op in table.OPS:
        for v in table.entries(op, "cuda", kind="variant"):
            for n in range(32, 1025, 32):
                assert sigconv.block_refusal(op, "cuda", v.name, n) is None, (op, v.name, n)
                b = v.launch_block(n)
                if op == "conv1d":
                    assert b == n
                    continue
                assert b[0] * b[1] == n and b[0] % v.block_step == 0 and v.block_refusal(b) is None, (v.name, n, b)
                if v.name in ("regblock", "prefetch"):
                    plan = cuda2d.tiled_plan(b, 31, 31, (1, 1), 15, 64, v.name == "prefetch")
                    assert plan["smem"] <= 200 * 1024, (v.name, n, plan["smem"])
                if v.name == "shared":
                    assert cuda2d.shared_geometry(b, 31, 31, (1, 1), 8)[1] <= 100 * 1024, (n, b)
                if v.name.startswith("igemm"):
                    assert cuda2d.igemm_plan(b, 31, 31, (1, 1), v.name == "igemm_tf32")["smem"] <= 200 * 1024, (n, b)
            pairs = ((((7, 3), "multiple of 32 threads"), ((64, 32), "at most 1024")) if op == "conv2d" else
                     (((32, 1), "must be an integer"),))
            for bad, why in ((48, "multiple of 32"), (2048, "between 32 and 1024")) + pairs:
                assert why in sigconv.block_refusal(op, "cuda", v.name, bad), (op, v.name, bad)
    for name, step in (("regblock", 4), ("prefetch", 4), ("shfl", 32)):
        pair = (2, 48) if step == 4 else (24, 4)
        assert f"needs bx a multiple of {step}" in sigconv.block_refusal("conv2d", "cuda", name, pair)
        assert sigconv.block_refusal("conv2d", "cuda", name, (step * 3, 32 // step)) is None
    for name in ("naive", "shared", "strip", "separable"):
        assert sigconv.block_refusal("conv2d", "cuda", name, (3, 32)) is None
    assert "takes no block size" in sigconv.block_refusal("conv2d", "cpu", "direct", 64)


def test_igemm_plans_fit_every_block():
    """The implicit GEMM takes every (bx, by) pair of a multiple of 32 threads up to 1024 (none is refused for shared
    memory), with a thread tile whose accumulators fit the block's share of the registers; the tile is TM*by channels
    by TN*bx pixels (blocks of more than 512 threads, and of other shapes than 8..64 x 2 or more: 16 x n/16), and the
    TF32 build's warps cover the block."""
    from sigconv.backends import cuda2d

    for n in range(32, 1025, 32):
        for bx in sorted({d for d in range(1, n + 1) if n % d == 0}):
            for tf32 in (False, True):
                plan = cuda2d.igemm_plan((bx, n // bx), 3, 3, (1, 1), tf32)
                d = plan["defines"]
                assert plan["smem"] <= 200 * 1024 and d["IG_STAGES"] in (2, 3, 4), (bx, n, tf32)
                assert d["IG_STAGES"] < 4 or plan["smem"] <= cuda2d.IGEMM_FOUR_STAGES_MAX
                assert plan["launch"][0] * plan["launch"][1] == n, (bx, n, tf32)
                if tf32:
                    assert d["IG_WARPS_M"] * d["IG_WARPS_N"] * 32 == n
                    acc = d["IG_MT"] * d["IG_NT8"] * 4
                    assert plan["tile"] == (16 * d["IG_MT"] * d["IG_WARPS_M"], 8 * d["IG_NT8"] * d["IG_WARPS_N"])
                else:
                    acc = d["IG_TM"] * d["IG_TN"]
                    assert plan["tile"] == (d["IG_TM"] * d["BY"], d["IG_TN"] * d["BX"])
                    kept = 8 <= bx <= 64 and n // bx >= 2 and n <= 512
                    assert (d["BX"], d["BY"]) == ((bx, n // bx) if kept else (16, n // 16)), (bx, n)
                assert 2 * acc <= cuda2d.block_reg_cap(n), (bx, n, tf32, acc)
    wide = cuda2d.igemm_plan((1024, 1), 3, 3, (1, 1), False)
    assert (wide["defines"]["BX"], wide["defines"]["BY"]) == (16, 64) and wide["tile"] == (256, 64)
    assert cuda2d.igemm_grid(cuda2d.igemm_plan((16, 16), 3, 3, (1, 1), False), 16, 256, 128, 128) == (2 * 2048, 1, 1)


def test_oversized_block_is_refused_in_one_line():
    """An explicit prefetch block whose double-buffered tile of a 31x31 kernel cannot fit in shared memory has no plan
    that fits, nor has shared's float64 tile of a 1024x1 block; the launchers' check says so in one line (an integer
    block of the same threads fits)."""
    from sigconv.backends import cuda2d

    plan = cuda2d.tiled_plan((1024, 1), 31, 31, (1, 1), 15, 1, True)
    assert plan["smem"] > 227 * 1024
    msg = cuda2d.smem_refusal("prefetch", (1024, 1), (31, 31), plan["smem"], 227 * 1024)
    assert "1024x1" in msg and "31x31" in msg and "\n" not in msg and "8 x n/8" in msg
    assert cuda2d.smem_refusal("prefetch", (8, 128), (31, 31), cuda2d.tiled_plan(
        (8, 128), 31, 31, (1, 1), 15, 1, True)["smem"], 227 * 1024) is None
    need = cuda2d.shared_geometry((1024, 1), 31, 31, (1, 1), 8)[1]  # shared, float64: one tile of 31 x 1054
    assert need > 227 * 1024 and "32 x n/32" in cuda2d.smem_refusal("shared", (1024, 1), (31, 31), need, 227 * 1024)


def test_separable_detection(rng):
    """Rank-1 kernels factor exactly; a random kernel is refused with the offending pair named."""
    from sigconv.backends.cuda2d import separable_factors

    u, v = rng.standard_normal((2, 3, 5)), rng.standard_normal((2, 3, 7))
    w = np.einsum("oci,ocj->ocij", u, v)
    fu, fv, why = separable_factors(w)
    assert why is None
    assert np.allclose(np.einsum("oci,ocj->ocij", fu, fv), w, rtol=1e-12, atol=1e-12)
    w[1, 2] = rng.standard_normal((5, 7))
    _, _, why = separable_factors(w)
    assert "co=1, ci=2" in why


def test_tiled_plan_fits_and_aligns():
    """The regblock/prefetch plan keeps shared memory in bounds and float4 alignment (pitch % 4, bx % 4)."""
    from sigconv.backends.cuda2d import _BLOCKS_TILED, tiled_plan

    for blk in _BLOCKS_TILED:
        for k in (1, 2, 3, 6, 15, 31):
            for s in (1, 2, 4):
                for pf in (False, True):
                    p = tiled_plan(blk, k, k, (s, s), 3, 256, pf)
                    d = p["defines"]
                    assert p["smem"] <= 200 * 1024 and d["PITCH"] % 4 == 0 and d["BX"] % 4 == 0
                    assert d["PITCH"] >= d["SH"] + (p["tile"][1] - 1) * s + k
                    assert d["TX"] * d["TY"] * d["COB"] <= 64


def _emulate_strip(x, w, py, px, Ho, Wo, rows=4):
    """NumPy port of conv2d_strip's ring of accumulators (both loop forms), to check its index maths."""
    H, W = x.shape
    KH, KW = w.shape
    SH = (-px) % 4
    NV = -(-(SH + 3 + KW) // 4) * 4
    y = np.full((Ho, Wo), np.nan)
    for cx in range(0, Wo, 4):
        ca = cx - px - SH
        assert ca % 4 == 0
        for r0 in range(0, Ho, rows):
            nout = min(rows, Ho - r0)
            nin = nout + KH - 1
            acc = np.zeros((KH, 4))
            for s in range(nin):
                u = s % KH
                gr = r0 - py + s
                v = np.array([x[gr, c] if 0 <= gr < H and 0 <= c < W else 0.0 for c in range(ca, ca + NV)])
                for i in range(KH):
                    slot = (u - i + KH) % KH
                    for j in range(KW):
                        acc[slot] += w[i, j] * v[SH + np.arange(4) + j]
                done = (u + 1) % KH
                o = s - (KH - 1)
                if o >= 0:
                    for b in range(4):
                        if cx + b < Wo:
                            y[r0 + o, cx + b] = acc[done][b]
                acc[done] = 0
    return y


@pytest.mark.parametrize("H, W, k, mode", [(9, 13, 3, "same"), (7, 5, 4, "full"), (10, 6, 5, "valid"),
                                            (3, 2, 5, "full")])
def test_strip_index_maths_emulated(H, W, k, mode, rng):
    """The strip kernel's ring/slot/alignment maths, emulated in NumPy, reproduce scipy's correlate2d."""
    from sigconv.engine.ops import window_2d

    x = rng.standard_normal((H, W))
    w = rng.standard_normal((k, k))
    (py, px), (Ho, Wo) = window_2d(mode, (H, W), (k, k))
    y = _emulate_strip(x, w, py, px, Ho, Wo)
    assert_close(y, scipy.signal.correlate2d(x, w, mode=mode), np.float64)
