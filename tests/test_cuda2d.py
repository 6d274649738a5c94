"""Every cuda conv2d variant x block x shape against float64 references on the GPU (NaN-poisoned outputs)."""

import numpy as np
import pytest
import scipy.signal

import sigconv
from sigconv._core import devices as _devices
from sigconv.registry import table as _registry
from sigconv.registry.table import Conv2dJob
from sigconv.engine.ops import window_2d
from sigconv._conv2d import conv2d_geometry

pytestmark = pytest.mark.gpu

_REASON = _devices.cuda_reason()
if _REASON:
    pytest.skip(f"no GPU: {_REASON}", allow_module_level=True)

import cupy  # noqa: E402

TOL = {"float32": 1e-5, "float64": 1e-10}
VARIANTS = [v for v in _registry.entries("conv2d", "cuda", kind="variant")]

# (label, N, Cin, H, W, Cout, kH, kW, stride, padding)
SHAPES = [
    ("tiny", 1, 1, 5, 7, 1, 3, 3, 1, 1),
    ("prime", 2, 3, 37, 41, 5, 3, 3, 1, "same"),
    ("w1", 1, 2, 19, 1, 3, 3, 1, 1, (1, 0)),
    ("even_k", 1, 2, 23, 29, 3, 4, 6, 1, "same"),
    ("stride2", 2, 3, 31, 37, 4, 5, 5, 2, 2),
    ("stride3x4", 1, 2, 29, 43, 9, 3, 7, (3, 4), (1, 3)),
    ("k31", 1, 1, 45, 47, 1, 31, 31, 1, 15),
    ("k15_s2", 1, 2, 40, 36, 2, 15, 13, 2, (7, 0)),
    ("k_gt_img", 1, 1, 4, 5, 1, 7, 9, 1, (6, 8)),   # "full" mode of a kernel larger than the input
    ("w4_aligned", 2, 1, 33, 64, 1, 5, 5, 1, 2),
    ("artB", 1, 6, 768, 512, 6, 6, 6, 1, 0),
    ("artA_n2", 2, 256, 128, 128, 256, 3, 3, 1, 1),
    ("spec", 1, 1, 1025, 4099, 1, 9, 9, 1, "same"),
]
ALL_BLOCKS = {"prime", "stride3x4", "k_gt_img"}


def _torch_ref(x, w, b, stride, pad, out_hw):
    """float64 reference: torch on the GPU when importable, else the cpu backend in float64."""
    try:
        import torch
        import torch.nn.functional as F

        if not torch.cuda.is_available():
            raise ImportError
    except ImportError:
        from sigconv.backends import cpu

        return cpu.corr2d_direct(x.get().astype(np.float64), w.get().astype(np.float64),
                                 None if b is None else b.get().astype(np.float64), stride, pad, out_hw)
    tx = torch.as_tensor(x.astype(cupy.float64), device="cuda")
    tw = torch.as_tensor(w.astype(cupy.float64), device="cuda")
    tb = None if b is None else torch.as_tensor(b.astype(cupy.float64), device="cuda")
    py, px = pad
    Hn = (out_hw[0] - 1) * stride[0] + w.shape[2]
    Wn = (out_hw[1] - 1) * stride[1] + w.shape[3]
    # explicit pad (bottom/right from out_hw; may be negative = crop) then an unpadded conv
    tx = F.pad(tx, (px, Wn - x.shape[3] - px, py, Hn - x.shape[2] - py))
    y = F.conv2d(tx, tw, tb, stride=stride)
    return y[:, :, :out_hw[0], :out_hw[1]].cpu().numpy()


def _check(y, ref, dtype, label, variant=None):
    """y equals the float64 ``ref`` to the dtype's tolerance, or the looser one ``variant``'s registry entry states
    (igemm_tf32: TF32 inputs)."""
    tol = TOL[dtype]
    if variant not in (None, "auto"):
        tol = _registry.get("conv2d", "cuda", variant).extra.get("tol", tol)
    y = cupy.asnumpy(y).astype(np.float64)
    assert not np.isnan(y).any(), f"{label}: unwritten outputs (NaN) at {tuple(np.argwhere(np.isnan(y))[0])}"
    err = np.linalg.norm(y - ref) / max(np.linalg.norm(ref), 1e-300)
    if not err <= tol:
        d = np.abs(y - ref)
        idx = tuple(np.argwhere(d > tol * 10 * max(np.abs(ref).max(), 1e-300))[0]) if d.max() else None
        pytest.fail(f"{label}: rel err {err:.3g} > {tol}; first mismatch {idx}: {y[idx]} vs {ref[idx]}")


def _jobs():
    for v in VARIANTS:
        for dtype in v.dtypes:
            for shp in SHAPES:
                for blk in v.blocks:
                    # every block on two small shapes, the default block on the rest (compile time: the
                    # tiled kernels are specialised per block, kernel size, stride and pad)
                    if shp[0] not in ALL_BLOCKS and blk != v.default_block:
                        continue
                    yield pytest.param(v.name, dtype, shp, blk, id=f"{v.name}-{dtype}-{shp[0]}-{blk[0]}x{blk[1]}")


#: Blocks outside the grids (any multiple of 32 threads is a block): 3 and 31 warps as integers (laid out by the
#: variant), and a pair of 3 warps whose bx is no power of two, per variant.
ODD_PAIRS = {"regblock": (12, 8), "prefetch": (24, 4), "strip": (96, 1), "shfl": (96, 1)}
ODD_SHAPES = {"prime", "k_gt_img", "k31", "w4_aligned"}


def _odd_block_jobs():
    for v in VARIANTS:
        for shp in SHAPES:
            if shp[0] in ODD_SHAPES:
                for blk in (96, 992, ODD_PAIRS.get(v.name, (3, 32))):
                    yield pytest.param(v.name, v.dtypes[0], shp, blk, id=f"{v.name}-{shp[0]}-{blk}")


@pytest.mark.parametrize("name, dtype, shp, block", list(_jobs()) + list(_odd_block_jobs()))
def test_variant_matches_reference(rng, name, dtype, shp, block):
    """Each variant/block/dtype equals a float64 reference; outputs pre-filled with NaN must all be written."""
    label, N, Cin, H, W, Cout, kH, kW, stride, padding = shp
    if dtype == "float64" and label == "artA_n2" and name == "naive":
        pytest.skip("float64 naive on article A is slow and adds nothing over float32")
    v = _registry.get("conv2d", "cuda", name)
    pad, out_hw, s = conv2d_geometry((H, W), (kH, kW), stride, padding)
    separable = name == "separable"
    why = v.applies(Conv2dJob((N, Cin, H, W), (Cout, Cin, kH, kW), dtype, s, pad, out_hw, rank1=separable))
    if why:
        pytest.skip(f"{name} does not apply to {label}: {why}")
    if separable:  # rank-1 kernels per (co, ci) pair
        w = rng.standard_normal((Cout, Cin, kH, 1)) * rng.standard_normal((Cout, Cin, 1, kW))
    else:
        w = rng.standard_normal((Cout, Cin, kH, kW))
    w = cupy.asarray(w, dtype=dtype)
    x = cupy.asarray(rng.standard_normal((N, Cin, H, W)), dtype=dtype)
    b = cupy.asarray(rng.standard_normal(Cout), dtype=dtype)
    out = cupy.full((N, Cout) + out_hw, cupy.nan, dtype=dtype)
    y = v.run(x, w, b, s, pad, out_hw, block=block, out=out)
    assert y is out
    _check(y, _torch_ref(x, w, b, s, pad, out_hw), dtype, f"{name} {dtype} {label} block {block}", name)


@pytest.mark.slow
@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_every_block_of_a_multiple_of_32(rng, name):
    """Every multiple of 32 up to 1024 threads as the block (an integer, laid out by the variant) on an odd shape of
    several channels (single-channel variants: one), float32, against the float64 reference."""
    v = _registry.get("conv2d", "cuda", name)
    single = v.applies(Conv2dJob((2, 3, 37, 41), (5, 3, 3, 3), "float32", (1, 1), (1, 1), (37, 41))) is not None
    N, Cin, Cout = (2, 1, 1) if single else (2, 3, 5)
    x = cupy.asarray(rng.standard_normal((N, Cin, 37, 41)), dtype=cupy.float32)
    w = rng.standard_normal((Cout, Cin, 3, 1)) * rng.standard_normal((Cout, Cin, 1, 5))
    w = cupy.asarray(w, dtype=cupy.float32)
    ref = _torch_ref(x, w, None, (1, 1), (1, 2), (37, 41))
    for n in range(32, 1025, 32):
        out = cupy.full((N, Cout, 37, 41), cupy.nan, dtype=cupy.float32)
        _check(v.run(x, w, None, (1, 1), (1, 2), (37, 41), block=n, out=out), ref, "float32", f"{name} block {n}",
               name)


@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("fn", ["convolve2d", "correlate2d"])
@pytest.mark.parametrize("xs, ks", [((37, 41), (5, 3)), ((1025, 4099), (15, 15)), ((4, 5), (7, 9)),
                                    ((19, 1), (4, 1)), ((33, 64), (2, 2))])
@pytest.mark.parametrize("variant", ["auto", "naive", "shared", "regblock", "prefetch", "strip", "shfl"])
def test_single_channel_modes_vs_scipy(rng, monkeypatch, variant, xs, ks, fn, mode):
    """convolve2d/correlate2d on the cuda backend equal scipy.signal's for every mode (float32). auto times its
    candidates on the small shapes; on the large one it runs its favourite untimed (timing would compile every
    candidate's 15x15 builds for each mode's padding, a minute of NVRTC on a fresh machine; the variants are
    checked one by one on it here)."""
    if variant == "auto" and xs == (1025, 4099):
        monkeypatch.setenv("SIGCONV_AUTOTUNE", "0")
    if variant != "auto":
        try:
            (py, px), out_hw = window_2d(mode, xs, ks, correlate=fn == "correlate2d")
        except ValueError:
            pytest.skip("scipy refuses this mode/shape pair")
        why = _registry.get("conv2d", "cuda", variant).applies(Conv2dJob((1, 1) + xs, (1, 1) + ks, "float32",
                                                                          (1, 1), (py, px), out_hw))
        if why:
            pytest.skip(f"{variant} does not apply: {why}")
    if xs == (1025, 4099) and variant in ("naive", "shared") and mode != "same":
        pytest.skip("big case: same mode is enough for the slow variants")
    x = rng.standard_normal(xs).astype(np.float32)
    k = rng.standard_normal(ks).astype(np.float32)
    try:
        ref = getattr(scipy.signal, fn)(x.astype(np.float64), k.astype(np.float64), mode=mode)
    except ValueError:
        pytest.skip("scipy refuses this mode/shape pair")
    y = getattr(sigconv, fn)(cupy.asarray(x), cupy.asarray(k), mode=mode, backend="cuda", variant=variant)
    assert isinstance(y, cupy.ndarray) and y.dtype == cupy.float32
    _check(y, ref, "float32", f"{variant} {fn} {mode} {xs} {ks}", variant)


def test_conv2d_api_cuda_auto_numpy_roundtrip(rng):
    """sigconv.conv2d with numpy in on the cuda backend returns numpy; auto equals the reference."""
    x = rng.standard_normal((2, 3, 21, 22)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    y = sigconv.conv2d(x, w, b, stride=2, padding=1, backend="cuda")
    assert isinstance(y, np.ndarray) and y.dtype == np.float32
    from sigconv.backends import cpu

    ref = cpu.corr2d_direct(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), (2, 2), (1, 1),
                            y.shape[2:])
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert err <= 1e-5, err


def test_separable_refuses_non_separable(rng):
    """variant='separable' refuses a random kernel, naming the pair and the singular-value ratio."""
    x = cupy.ones((1, 1, 16, 16), cupy.float32)
    w = cupy.asarray(rng.standard_normal((1, 1, 5, 5)), dtype=cupy.float32)
    v = _registry.get("conv2d", "cuda", "separable")
    with pytest.raises(ValueError, match="not rank-1"):
        v.run(x, w, None, (1, 1), (2, 2), (16, 16))


def test_strip_refuses_multichannel():
    v = _registry.get("conv2d", "cuda", "strip")
    x = cupy.ones((1, 2, 16, 16), cupy.float32)
    w = cupy.ones((1, 2, 3, 3), cupy.float32)
    with pytest.raises(ValueError, match="one input and one output channel"):
        v.run(x, w, None, (1, 1), (1, 1), (16, 16))


@pytest.mark.parametrize("v", VARIANTS, ids=lambda v: v.name)
def test_invalid_block_rejected(v):
    """A block that is not a multiple of 32 threads, or whose bx does not suit the variant, is refused in one line
    naming the rule."""
    x = cupy.ones((1, 1, 16, 16), cupy.float32)
    w = cupy.ones((1, 1, 3, 3), cupy.float32)
    with pytest.raises(ValueError, match="multiple of 32 threads"):
        v.run(x, w, None, (1, 1), (1, 1), (16, 16), block=(7, 3))
    if v.block_step > 1:
        with pytest.raises(ValueError, match=f"bx a multiple of {v.block_step}"):
            v.run(x, w, None, (1, 1), (1, 1), (16, 16), block=(v.block_step // 2, 64))


@pytest.mark.parametrize("fn", ["convolve2d", "correlate2d"])
@pytest.mark.parametrize("variant", ["separable", "auto"])
def test_asymmetric_rank1_kernel_through_the_api(rng, fn, variant):
    """A rank-1 kernel that is not symmetric (outer of two ramps), host weights: the separable path takes its
    factors from the host copy, which must be the flipped one for convolve2d; equals scipy.signal."""
    x = rng.standard_normal((67, 301)).astype(np.float32)
    k = np.outer(np.arange(1.0, 8.0), np.arange(1.0, 6.0) ** 2).astype(np.float32)  # 7 x 5, rank 1
    ref = getattr(scipy.signal, fn)(x.astype(np.float64), k.astype(np.float64), mode="same")
    y = getattr(sigconv, fn)(cupy.asarray(x), k, mode="same", backend="cuda", variant=variant)
    _check(y, ref, "float32", f"{variant} {fn} rank-1 7x5", variant)


# ------------------------------------------------------------------ boundaries: wrap, symm, a fill constant
# Every variant reads the extended image in its own loads (regblock, prefetch, strip and shfl with the boundary
# compiled in, naive and shared by argument, separable in its row pass); with extend=True conv2d_extend copies the
# extended image first, which the variant reads with zero padding. Every variant, through its own loads and through
# the copy, against the float64 correlation of the image extended by numpy.pad.

BOUNDARIES = [("fill", 0.0), ("fill", 2.5), ("wrap", 0.0), ("symm", 0.0)]
_NP_MODE = {"fill": "constant", "wrap": "wrap", "symm": "symmetric"}
#: (label, H, W, kH, kW): an odd width and height, square / even / 1-row / 1-column kernels, and a kernel larger
#: than the image in both axes (every output a border one); widths that are multiples of 4 (the fused kernels'
#: 16-byte loads), one with a kernel larger than the image.
BORDER_SHAPES = [("37x1823-3x3", 37, 1823, 3, 3), ("37x1823-5x4", 37, 1823, 5, 4), ("37x1823-1x7", 37, 1823, 1, 7),
                 ("37x1823-7x1", 37, 1823, 7, 1), ("3x5-7x9", 3, 5, 7, 9), ("45x1024-7x7", 45, 1024, 7, 7),
                 ("5x8-7x9", 5, 8, 7, 9)]


def _windows(H, W, kH, kW):
    """(mode, pad, out_hw) in correlation form: full, correlate2d's same, convolve2d's same, valid (if it fits)."""
    yield "full", (kH - 1, kW - 1), (H + kH - 1, W + kW - 1)
    yield "same", ((kH - 1) // 2, (kW - 1) // 2), (H, W)
    if kH % 2 == 0 or kW % 2 == 0:
        yield "same_conv", (kH // 2, kW // 2), (H, W)
    if H >= kH and W >= kW:
        yield "valid", (0, 0), (H - kH + 1, W - kW + 1)


def _extended(x, kH, kW, pad, out_hw, boundary, fill):
    """x extended by the boundary rule to the (Ho + kH - 1) x (Wo + kW - 1) input the outputs read."""
    (py, px), (Ho, Wo) = pad, out_hw
    widths = ((py, Ho + kH - 1 - x.shape[0] - py), (px, Wo + kW - 1 - x.shape[1] - px))
    kw = {"constant_values": fill} if boundary == "fill" else {}
    return np.pad(x, widths, mode=_NP_MODE[boundary], **kw)


@pytest.fixture
def _quiet_autotune(tmp_path, monkeypatch):
    """auto takes its favourite (no timing, nothing written to the user's cache)."""
    monkeypatch.setenv("SIGCONV_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("SIGCONV_AUTOTUNE", "0")


#: The shapes of the default GPU run (the rest with --runslow): an odd width with an even kernel, 16-byte rows, and
#: kernels larger than the image with and without 16-byte rows. Each kernel size compiles the specialised variants'
#: builds for every boundary (NVRTC), which sets the suite's time: they (regblock, prefetch, strip, shfl) take the
#: first and the last by default, and so does auto (its favourite is one of them); their loaders are also run on the
#: host (tests/test_kernel_build.py).
BORDER_SHAPES_DEFAULT = ("37x1823-5x4", "45x1024-7x7", "3x5-7x9", "5x8-7x9")
BORDER_SHAPES_SPECIALISED = ("37x1823-5x4", "5x8-7x9")
_GENERIC = ("auto", "naive", "shared", "separable")


def _boundary_params():
    for name in ("auto",) + tuple(v.name for v in VARIANTS):
        default = BORDER_SHAPES_DEFAULT if name in _GENERIC and name != "auto" else BORDER_SHAPES_SPECIALISED
        for s in BORDER_SHAPES:
            marks = () if s[0] in default else (pytest.mark.slow,)
            yield pytest.param(name, s, id=f"{name}-{s[0]}", marks=marks)


@pytest.mark.usefixtures("_quiet_autotune")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name, shape", list(_boundary_params()))
def test_boundary_every_variant(rng, name, dtype, shape):
    """Each variant (and auto) with boundary fill 0 / fill 2.5 / wrap / symm, full/same/valid windows, equals the
    float64 correlation of the numpy.pad-extended image; outputs poisoned with NaN must all be written."""
    from sigconv.backends import cuda2d

    label, H, W, kH, kW = shape
    v = None if name == "auto" else _registry.get("conv2d", "cuda", name)
    if v is not None and dtype not in v.dtypes:
        pytest.skip(f"{name} supports {', '.join(v.dtypes)}")
    if name == "separable":
        wh = rng.standard_normal((kH, 1)) * rng.standard_normal((1, kW))
    else:
        wh = rng.standard_normal((kH, kW))
    xh = rng.standard_normal((H, W))
    x = cupy.asarray(xh.reshape(1, 1, H, W), dtype=dtype)
    w = cupy.asarray(wh.reshape(1, 1, kH, kW), dtype=dtype)
    x64, w64 = cupy.asnumpy(x)[0, 0].astype(np.float64), cupy.asnumpy(w)[0, 0].astype(np.float64)
    ran = 0
    for mode, pad, out_hw in _windows(H, W, kH, kW):
        if v is not None:
            why = v.applies(Conv2dJob((1, 1, H, W), (1, 1, kH, kW), dtype, (1, 1), pad, out_hw, rank1=True))
            if why:
                continue
        if mode == "valid" and name not in _GENERIC:
            continue  # (no window leaves the image; the specialised variants' wrap/symm builds cost NVRTC time)
        # the variant's own loads, and for a named variant the copy (where the variant still applies to it, read with
        # zero padding)
        paths = [False]
        if v is not None and not v.applies(Conv2dJob((1, 1, out_hw[0] + kH - 1, out_hw[1] + kW - 1), (1, 1, kH, kW),
                                                     dtype, (1, 1), (0, 0), out_hw, rank1=True)):
            paths = [False, True]
        for boundary, fill in BOUNDARIES:
            ref = scipy.signal.correlate2d(_extended(x64, kH, kW, pad, out_hw, boundary, fill), w64, "valid")
            for extend in paths if (boundary, fill) != ("fill", 0.0) else [False]:
                out = cupy.full((1, 1) + out_hw, cupy.nan, dtype=dtype)
                y = cuda2d.corr2d(x, w, None, (1, 1), pad, out_hw, variant=name, out=out, boundary=boundary,
                                  fillvalue=fill, extend=extend)
                assert y is out
                _check(y[0, 0], ref, dtype, f"{name} {dtype} {label} {mode} {boundary} fill={fill} extend={extend}",
                       name)
                ran += 1
    if not ran:
        pytest.skip(f"{name} applies to no window of {label}")


@pytest.mark.slow
@pytest.mark.parametrize("name", [v.name for v in VARIANTS])
def test_boundary_every_block(rng, name):
    """Every accepted block of each variant under wrap, symm and fill 2.5, full and same windows, float32."""
    from sigconv.backends import cuda2d

    v = _registry.get("conv2d", "cuda", name)
    H, W, kH, kW = 37, 1823, 5, 4
    wh = rng.standard_normal((kH, 1)) * rng.standard_normal((1, kW)) if name == "separable" else \
        rng.standard_normal((kH, kW))
    x = cupy.asarray(rng.standard_normal((1, 1, H, W)), dtype=cupy.float32)
    w = cupy.asarray(wh.reshape(1, 1, kH, kW), dtype=cupy.float32)
    x64, w64 = cupy.asnumpy(x)[0, 0].astype(np.float64), cupy.asnumpy(w)[0, 0].astype(np.float64)
    for mode, pad, out_hw in list(_windows(H, W, kH, kW))[:2]:
        if v.applies(Conv2dJob((1, 1, H, W), (1, 1, kH, kW), "float32", (1, 1), pad, out_hw, rank1=True)):
            continue
        for boundary, fill in BOUNDARIES[1:]:
            ref = scipy.signal.correlate2d(_extended(x64, kH, kW, pad, out_hw, boundary, fill), w64, "valid")
            for block in v.blocks:
                out = cupy.full((1, 1) + out_hw, cupy.nan, dtype=cupy.float32)
                cuda2d.corr2d(x, w, None, (1, 1), pad, out_hw, variant=name, block=block, out=out,
                              boundary=boundary, fillvalue=fill)
                _check(out[0, 0], ref, "float32", f"{name} {block} {mode} {boundary} fill={fill}", name)


def test_boundaries_run_in_one_launch_unless_the_copy_is_asked_for(rng, monkeypatch):
    """No variant launches a second kernel for a boundary: on 20 x 32 with 3x3 each variant, and on 24 x 24 with
    15x15 (every output's window leaving the image) naive, shared and separable (the others' builds for that kernel
    are checked by test_boundary_every_variant's kernels larger than the image), run fill 2.5, wrap and symm as one
    launch of their own kernel (naive: conv2d_naive for fill, conv2d_naive_ext for wrap and symm; separable: its row
    pass and column pass, as under zero fill), the copy (conv2d_extend) only with extend=True (checked with the
    generic variants: the copy is the same for every variant, which then runs its zero-fill build). Every result
    checked against the float64 reference."""
    from sigconv.backends import cuda2d

    copies, launches = [], []
    real_copy, real_generic = cuda2d.launch_extend, cuda2d._generic
    monkeypatch.setattr(cuda2d, "launch_extend", lambda *a, **k: copies.append(a[5:7]) or real_copy(*a, **k))
    monkeypatch.setattr(cuda2d, "_generic",
                        lambda kernel, dtype: launches.append(kernel) or real_generic(kernel, dtype))
    for (H, W, k), extend in (((20, 32, 3), False), ((24, 24, 15), False), ((20, 32, 3), True)):
        x = cupy.asarray(rng.standard_normal((1, 1, H, W)), dtype=cupy.float32)
        wh = np.outer(rng.standard_normal(k), rng.standard_normal(k))
        w = cupy.asarray(wh.reshape(1, 1, k, k), dtype=cupy.float32)
        pad = ((k - 1) // 2,) * 2
        for variant in cuda2d.VARIANTS:
            why = _registry.get("conv2d", "cuda", variant).applies(
                Conv2dJob((1, 1, H, W), (1, 1, k, k), "float32", (1, 1), pad, (H, W), rank1=True))
            if why or ((k > 3 or extend) and variant not in ("naive", "shared", "separable")):
                continue
            copies.clear()
            for boundary, fill in BOUNDARIES:
                launches.clear()
                y = cuda2d.corr2d(x, w, None, (1, 1), pad, (H, W), variant=variant, boundary=boundary, fillvalue=fill,
                                  extend=extend)
                ref = scipy.signal.correlate2d(_extended(cupy.asnumpy(x)[0, 0].astype(np.float64), k, k, pad, (H, W),
                                                         boundary, fill), cupy.asnumpy(w)[0, 0].astype(np.float64),
                                               "valid")
                _check(y[0, 0], ref, "float32", f"{variant} {H}x{W} k{k} {boundary} fill={fill} extend={extend}",
                       variant)
                own = [n for n in launches if n != "conv2d_extend"]  # the generic kernels looked up by the call
                if variant in ("naive", "shared"):
                    kernel = "conv2d_naive_ext" if variant == "naive" and boundary != "fill" and not extend \
                        else f"conv2d_{variant}"
                    assert own == [kernel], (variant, H, W, k, boundary, fill, extend, launches)
                else:  # (separable looks up its row and column passes; the others are specialised builds)
                    allowed = {"conv2d_sep_rows", "conv2d_sep_rows_ext", "conv2d_sep_cols"} if variant == "separable" \
                        else set()
                    assert set(own) <= allowed, (variant, H, W, k, boundary, fill, extend, launches)
            want = [("fill", 2.5), ("wrap", 0.0), ("symm", 0.0)] if extend else []
            assert copies == want, (variant, H, W, k, extend)


def test_boundary_refusals():
    """Extended boundaries need a single-channel, stride-1, bias-free job; an unknown rule is named."""
    from sigconv.backends import cuda2d

    x = cupy.ones((1, 2, 16, 16), cupy.float32)
    w = cupy.ones((1, 2, 3, 3), cupy.float32)
    with pytest.raises(ValueError, match="one image, one channel in and out.*Cin=2"):
        cuda2d.corr2d(x, w, None, (1, 1), (1, 1), (16, 16), boundary="wrap")
    x1, w1 = x[:, :1].copy(), w[:, :1].copy()
    with pytest.raises(ValueError, match=r"stride 1 .*stride \(2, 2\)"):
        cuda2d.corr2d(x1, w1, None, (2, 2), (1, 1), (8, 8), boundary="symm")
    with pytest.raises(ValueError, match="non-zero fillvalue.*bias"):
        cuda2d.corr2d(x1, w1, cupy.ones(1, cupy.float32), (1, 1), (1, 1), (16, 16), fillvalue=1.0)
    with pytest.raises(ValueError, match="boundary must be one of fill, wrap, symm"):
        cuda2d.corr2d(x1, w1, None, (1, 1), (1, 1), (16, 16), boundary="reflect")
    cuda2d.corr2d(x, w, None, (1, 1), (1, 1), (16, 16), boundary="fill", fillvalue=0)  # the default: any job


# ------------------------------------------------------------------ exact integers (uint64, sums mod 2^64)


def _int64_corr_valid(xe, w, out_hw):
    """int64 shift-and-add (NumPy's integer arithmetic wraps mod 2^64)."""
    Ho, Wo = out_hw
    y = np.zeros(out_hw, np.int64)
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            y += w[i, j] * xe[i:i + Ho, j:j + Wo]
    return y


@pytest.mark.parametrize("variant", ["auto", "naive"])
@pytest.mark.parametrize("shape", [BORDER_SHAPES[0], BORDER_SHAPES[1], BORDER_SHAPES[4]], ids=lambda s: s[0])
def test_exact_uint64_every_boundary(rng, variant, shape):
    """int64 values near 2^62 (products wrap) passed as uint64: equal bit for bit to NumPy's int64 correlation of
    the extended image, for every boundary (a fill constant near -2^62) and window."""
    from sigconv.backends import cuda2d

    label, H, W, kH, kW = shape
    xh = rng.integers(-(2**62), 2**62, (H, W), dtype=np.int64)
    wh = rng.integers(-(2**62), 2**62, (kH, kW), dtype=np.int64)
    x = cupy.asarray(xh.view(np.uint64).reshape(1, 1, H, W))
    w = cupy.asarray(wh.view(np.uint64).reshape(1, 1, kH, kW))
    big = int(rng.integers(-(2**62), -(2**61)))
    for mode, pad, out_hw in _windows(H, W, kH, kW):
        for boundary, fill in [("fill", 0), ("fill", big), ("wrap", 0), ("symm", 0)]:
            out = cupy.full((1, 1) + out_hw, np.uint64(0xA5A5A5A5A5A5A5A5), dtype=cupy.uint64)  # poison
            y = cuda2d.corr2d(x, w, None, (1, 1), pad, out_hw, variant=variant, out=out, boundary=boundary,
                              fillvalue=fill)
            assert y is out and y.dtype == cupy.uint64
            ref = _int64_corr_valid(_extended(xh, kH, kW, pad, out_hw, boundary, fill), wh, out_hw)
            got = cupy.asnumpy(y)[0, 0].view(np.int64)
            bad = got != ref
            assert not bad.any(), (f"{label} {mode} {boundary} fill={fill}: first mismatch at "
                                   f"{np.argwhere(bad)[0].tolist()}")


def test_exact_uint64_refusals():
    """uint64 runs on naive only: another variant, or floating weights, is refused in one line naming uint64."""
    from sigconv.backends import cuda2d

    x = cupy.ones((1, 1, 16, 16), cupy.uint64)
    w = cupy.ones((1, 1, 3, 3), cupy.uint64)
    for v in VARIANTS:
        if v.name in cuda2d.EXACT_VARIANTS:
            continue
        with pytest.raises(ValueError, match=f"{v.name}.*uint64") as e:
            cuda2d.corr2d(x, w, None, (1, 1), (1, 1), (16, 16), variant=v.name)
        assert "\n" not in str(e.value)
        with pytest.raises(ValueError, match="uint64"):  # the launcher itself, through its registry entry
            v.run(x, w, None, (1, 1), (1, 1), (16, 16))
    with pytest.raises(ValueError, match="integer arrays for uint64"):
        cuda2d.corr2d(x, cupy.ones((1, 1, 3, 3), cupy.float64), None, (1, 1), (1, 1), (16, 16))
    with pytest.raises(ValueError, match="fillvalue must be an integer"):
        cuda2d.corr2d(x, w, None, (1, 1), (1, 1), (16, 16), fillvalue=2.5)


@pytest.mark.parametrize("variant", ["strip", "shfl"])
def test_constant_memory_taps_apart_on_two_streams(variant, rng):
    """strip and shfl read their taps from __constant__ memory (one array per module and device, shared by every
    stream): a spectrogram's 3x3 filtering queued on one stream with another 3x3's right behind it on a second
    stream gives each output bit for bit what its filter gives alone."""
    v = _registry.get("conv2d", "cuda", variant)
    x = cupy.asarray(rng.standard_normal((1, 1, 1025, 65536)), dtype=cupy.float32)
    ws = [cupy.asarray(rng.standard_normal((1, 1, 3, 3)), dtype=cupy.float32) for _ in range(2)]
    alone = [v.run(x, w, None, (1, 1), (1, 1), (1025, 65536)) for w in ws]
    cupy.cuda.Device().synchronize()
    streams = [cupy.cuda.Stream(non_blocking=True) for _ in range(2)]
    bad = []
    for rnd in range(3):
        ys = [None, None]
        for i in (0, 1):
            with streams[i]:
                ys[i] = v.run(x, ws[i], None, (1, 1), (1, 1), (1025, 65536))
        for s in streams:
            s.synchronize()
        bad += [f"round {rnd}, stream {i}" for i in (0, 1) if not bool((ys[i] == alone[i]).all())]
    assert not bad, bad
