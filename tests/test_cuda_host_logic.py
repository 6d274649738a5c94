"""Host-side logic of the cuda backend that needs no GPU, run on the CPU with NumPy standing in for CuPy
where only array maths is involved: the fft variant's filter spectrum and its cache; the 2-D boundaries (the rule,
the generic kernels reading the extended image, separable's passes and the extended copy: the kernels' own source
compiled for the host)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import scipy.signal


@pytest.fixture
def numpy_as_cupy(monkeypatch):
    fake = types.SimpleNamespace(
        fft=np.fft, ascontiguousarray=np.ascontiguousarray, float32=np.float32, float64=np.float64,
        complex64=np.complex64, complex128=np.complex128, ndarray=np.ndarray, ldexp=np.ldexp, int32=np.int32,
        asarray=np.asarray, asnumpy=np.asarray,
        cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0)),
    )
    monkeypatch.setitem(sys.modules, "cupy", fake)
    from sigconv.backends import overlap_save

    overlap_save._SPECTRA.clear()
    yield overlap_save
    overlap_save._SPECTRA.clear()


def test_fused_tiles_and_plan(numpy_as_cupy):
    """fft_fused's tile: the power of two above 16K within 1024..4096, 16384 (the column tile) where K - 1 is a
    quarter of that or more, at least the one above 2K, and 32768 for the longest filters on 512 or 1024 threads; its
    block one thread per 32 samples (64 at least), per 64 on 32768 (two butterflies a thread); taps up to half the
    largest tile every block takes; shared memory for one buffer where the block has N/32 threads or more, else two; a
    plan's grid covers every tile and channel up to the caps; a tile asked for must be a power of two in range, >= 2K;
    32768 asked for runs on 512 threads too (two butterflies a thread, one buffer), on no other block below 1024."""
    from sigconv.registry import auto

    c = numpy_as_cupy
    Ks = (1, 64, 65, 128, 129, 256, 257, 1024, 1025, 2049, 4097, 4799, 4800, 7921, 8192)
    assert auto.FUSED_ONE_TILE_MIN_K == 4800
    assert [auto.fused_tile(K) for K in Ks] == \
        [1024, 1024, 2048, 2048, 4096, 4096, 4096, 4096, 16384, 16384, 16384, 16384, 32768, 32768, 32768]
    assert [auto.fused_block(K) for K in Ks] == [64, 64, 64, 64, 128, 128, 128, 128, 512, 512, 512, 512, 512, 512, 512]
    # the longest tile only on 512 and 1024 threads: any other block keeps 16384; the autotuner's K classes part there
    K1 = auto.FUSED_ONE_TILE_MIN_K
    assert [auto.conv1d_shape_key(1, 1 << 26, K, "float32")[2] for K in (64, 65, 4097, K1 - 1, K1, 8192)] == \
        [64, 128, K1 - 1, K1 - 1, 8192, 8192]
    assert [auto.fused_tile(K, b) for K, b in ((K1 - 1, None), (K1, None), (K1, 1024), (K1, 512), (K1, 992),
                                               (K1, 256), (8192, 32))] == \
        [16384, 32768, 32768, 32768, 16384, 16384, 16384]
    longest, wide = 8 * (16384 + 1024) + 128, "conv1d_fft_fused<15, true, false, true>"
    for block, N, smem, expr in ((None, 32768, longest, wide), (512, 32768, longest, wide),
                                 (1024, 32768, longest, "conv1d_fft_fused<15, true>"),
                                 (256, 16384, 2 * 8 * (8192 + 512) + 128, "conv1d_fft_fused<14, false>"),
                                 (96, 16384, 2 * 8 * (8192 + 512) + 128, "conv1d_fft_fused<14, false>")):
        p = c.fused_plan(K1, 1 << 20, 1, block)
        assert (p["N"], p["smem"], p["expr"]) == (N, smem, expr), block
    assert auto.fused_block(K1 - 1, 32768) == 512 and auto.fused_block(7921, 16384) == 512
    assert auto.fused_block(255, 2048) == 64 and auto.fused_block(255, 16384) == 512
    for K in (0, 8193):
        with pytest.raises(ValueError, match="fft_fused takes 1 to 8192 taps"):
            auto.fused_tile(K)
    buffer = 8 * (2048 + 128)  # N/2 float2, one of padding per 16
    for block, smem in ((128, buffer + 128), (1024, buffer + 128), (96, 2 * buffer + 128), (32, 2 * buffer + 128)):
        p = c.fused_plan(255, 1 << 26, 3, block)
        assert (p["N"], p["logn"], p["V"], p["smem"]) == (4096, 12, 3842, smem), block
        one = "true" if smem == buffer + 128 else "false"  # the in-place kernel where one buffer serves
        assert p["expr"] == f"conv1d_fft_fused<12, {one}>", block
    assert p["ntiles"] == -(-(1 << 26) // 3842) and p["grid"] == (p["ntiles"], 3)
    assert c.fused_plan(255, 10 ** 6, 3, 128, cap_x=7, cap_y=2)["grid"] == (7, 2)
    assert c.fused_plan(255, 3842 * ((1 << 31) - 1), 1)["ntiles"] == (1 << 31) - 1  # (the kernel counts in 32 bits)
    with pytest.raises(ValueError, match="more than 2\\^31 - 1"):
        c.fused_plan(255, 3842 * ((1 << 31) - 1) + 1, 1)
    assert c.fused_plan(255, 10 ** 6, 3)["smem"] == buffer + 128  # the tile's own block: in place
    q = c.fused_plan(4095, 1 << 20, 1, 512, tile=16384)
    assert (q["N"], q["V"], q["logn"], q["smem"]) == (16384, 12290, 14, 8 * (8192 + 512) + 128)
    for tile in (4096, 6144, 512, 65536):  # below 2K, not a power of two, outside the range
        with pytest.raises(ValueError, match=f"fft_fused tile {tile} for K=4095"):
            c.fused_plan(4095, 1 << 20, 1, 512, tile=tile)
    assert c.fused_plan(4095, 1 << 20, 1, 1024, tile=32768)["N"] == c.fused_plan(4095, 1 << 20, 1, tile=32768)["N"]
    # the longest tile on 512 threads, two butterflies a thread, in one buffer; on any other block below 1024 refused
    assert [c.fused_wide(N, b) for N, b in ((32768, 512), (32768, 1024), (32768, 544), (16384, 256))] == \
        [True, False, False, False]
    for pairs in (False, True):
        q = c.fused_plan(7921, 1 << 20, 1, 512, tile=32768, pairs=pairs)
        expr = f"conv1d_fft_fused<15, true, {'true' if pairs else 'false'}, true>"
        assert (q["N"], q["smem"], q["expr"]) == (32768, 8 * (16384 + 1024) + 128, expr)
    assert c.fused_pairs(32768, 512, 7921, 3960, 1 << 20, True) and not c.fused_pairs(32768, 544, 7921, 3960, 1 << 20,
                                                                                       True)
    for block in (544, 992, 256):
        with pytest.raises(ValueError, match=f"with {block} threads \\(32768 samples only on 512 or 1024\\)"):
            c.fused_plan(4095, 1 << 20, 1, block, tile=32768)


def test_fused_plan_takes_one_block_a_multiprocessor_for_many_longest_tiles(numpy_as_cupy):
    """The longest tile on 512 threads with 8-byte loads runs on a grid of one block a multiprocessor (in one row,
    every channel's tiles as one sequence) with the shared memory for its prefetch where there are more tiles than
    multiprocessors, on compute capability 9.0 with room for it; a block a tile elsewhere."""
    c = numpy_as_cupy
    h100 = (132, 232448, 90)
    longest = 8 * (16384 + 1024) + 128
    prefetch = 16 + 11 * 8192  # an mbarrier and 11 rows of 8 KB
    V = 32768 - 7921 + 1
    p = c.fused_plan(7921, 1 << 26, 1, 512, tile=32768, pairs=True, device=h100)
    assert (p["grid"], p["smem"], p["persistent"]) == ((132, 1), longest + prefetch, True)
    assert p["expr"] == "conv1d_fft_fused<15, true, true, true>" and p["ntiles"] == -(-(1 << 26) // V)
    p = c.fused_plan(7921, 1 << 23, 8, 512, tile=32768, pairs=True, device=h100)
    assert (p["grid"], p["smem"], p["persistent"]) == ((132, 1), longest + prefetch, True)
    # 66 tiles in each of 2 channels: as many as multiprocessors, a block a tile
    p = c.fused_plan(7921, 66 * V, 2, 512, tile=32768, pairs=True, device=h100)
    assert (p["grid"], p["smem"], p["persistent"]) == ((66, 2), longest, False)
    assert c.fused_plan(7921, 66 * V + 1, 2, 512, tile=32768, pairs=True, device=h100)["grid"] == (132, 1)
    for kw, why in ((dict(pairs=False, device=h100), "float loads"), (dict(pairs=True), "no device"),
                    (dict(pairs=True, device=(132, 232448, 100)), "compute capability 10.0"),
                    (dict(pairs=True, device=(132, longest + prefetch - 1, 90)), "16 bytes short")):
        p = c.fused_plan(7921, 1 << 26, 1, 512, tile=32768, **kw)
        assert (p["grid"], p["smem"], p["persistent"]) == ((p["ntiles"], 1), longest, False), why
    p = c.fused_plan(7921, 1 << 26, 1, 1024, tile=32768, pairs=True, device=h100)  # (not the 512-thread kernel)
    assert (p["grid"][0], p["persistent"]) == (p["ntiles"], False)
    assert c.fused_plan(4095, 1 << 26, 1, device=h100)["persistent"] is False  # (the 16384 tile)


def test_fused_passes_and_twiddle_table(numpy_as_cupy):
    """fft_fused's passes: radix 16 first, the rest of log2(N/2) spread evenly, larger first; the twiddle table is
    exp(-2 pi i k / N) for k < N/2, then per later pass log2(R) rows of NS entries exp(-2 pi i 2^a k / (NS R))."""
    c = numpy_as_cupy
    assert {N: c.fused_radix_bits(N) for N in (1024, 2048, 4096, 8192, 16384)} == {
        1024: [4, 3, 2], 2048: [4, 3, 3], 4096: [4, 4, 3], 8192: [4, 4, 4], 16384: [4, 3, 3, 3]}
    for N in (1024, 16384):
        tw = c.fused_twiddles(N)
        bits = c.fused_radix_bits(N)
        assert sum(bits) == N.bit_length() - 2 and tw.dtype == np.complex64 and not tw.flags.writeable
        want, ns = [np.exp(-2j * np.pi * np.arange(N // 2) / N)], 1 << bits[0]
        for b in bits[1:]:
            want += [np.exp(-2j * np.pi * (1 << a) * np.arange(ns) / (ns << b)) for a in range(b)]
            ns <<= b
        want = np.concatenate(want)
        assert tw.shape == want.shape and np.abs(tw - want).max() <= 6e-8
    assert c.fused_plan(7921, 1 << 20, 1, 32)["smem"] == 2 * 8 * (8192 + 512) + 128 <= 227 * 1024


@pytest.mark.parametrize("N", [1024, 16384])
def test_fused_coefficients_are_the_middle_step(numpy_as_cupy, N, rng):
    """fft_fused's table G = (a, b): a[k] Z[k] + b[k] conj Z[M-k] is the unpack of the half-length spectrum Z of a
    real signal, the product with H and the pack for the inverse, for every k < M; and so it filters: the inverse
    of the packed spectrum is the circular convolution."""
    c = numpy_as_cupy
    M = N // 2
    h = rng.standard_normal(N)
    H = np.fft.rfft(h) / N
    G = c.fused_coefficients(H, N)
    assert G.dtype == np.float32 and G.shape == (M, 4) and G.flags.c_contiguous
    a, b = G[:, 0] + 1j * G[:, 1], G[:, 2] + 1j * G[:, 3]
    x = rng.standard_normal(N)
    Z = np.fft.fft(x[0::2] + 1j * x[1::2])
    Zm = Z[(M - np.arange(M)) % M]
    W = np.exp(-2j * np.pi * np.arange(M) / N)
    E, O = (Z + np.conj(Zm)) / 2, (Z - np.conj(Zm)) / 2j
    Yk, Ym = (E + W * O) * H[:M], np.conj(E - W * O) * H[M:0:-1]
    want = Yk + np.conj(Ym) + 1j * (Yk - np.conj(Ym)) * np.conj(W)
    got = a * Z + b * np.conj(Zm)
    assert np.abs(got - want).max() <= 1e-6 * np.abs(want).max()
    y = np.fft.ifft(got) * M  # the kernel's unscaled inverse: y[2n] + i y[2n+1] (H holds the 1/N)
    circ = np.fft.irfft(np.fft.rfft(x) * np.fft.rfft(h), N)
    assert np.allclose(np.stack([y.real, y.imag], axis=1).ravel(), circ, atol=1e-5 * np.abs(circ).max())


def test_fused_pairs_only_where_every_tile_starts_on_an_8_byte_boundary(numpy_as_cupy):
    """The kernel that reads a point's two samples as one 8-byte load runs on the 32768 tile in place (on 1024 threads,
    or 512: two butterflies a thread), where x's data is 8-byte aligned, L even, and pad and the tile's stride N - K +
    1 even; nowhere else, and its plan says so."""
    c = numpy_as_cupy
    ok = dict(N=32768, block=1024, K=7921, pad=3960, L=1 << 26, aligned=True)
    assert c.fused_pairs(**ok) and c.fused_pairs(**{**ok, "block": 512})
    for change in (dict(N=16384, block=512), dict(block=544), dict(block=256), dict(aligned=False),
                   dict(L=(1 << 26) + 1),
                   dict(pad=3961), dict(K=7922)):
        assert not c.fused_pairs(**{**ok, **change}), change
    assert c.fused_plan(7921, 1 << 26, 1, 1024, tile=32768, pairs=True)["expr"] == "conv1d_fft_fused<15, true, true>"
    assert c.fused_plan(7921, 1 << 26, 1, 1024, tile=32768)["expr"] == "conv1d_fft_fused<15, true>"
    with pytest.raises(ValueError, match="pairs"):
        c.fused_plan(4095, 1 << 26, 1, 512, pairs=True)
    for expr in ("conv1d_fft_fused<15, true, true>", "conv1d_fft_fused<15, true, false, true>",
                 "conv1d_fft_fused<15, true, true, true>"):  # (the longest tile's default block: 512, both loads)
        assert {"name": c._c1.SOURCE, "name_expressions": (expr,)} in c.prebuilt_modules(), expr


def test_fused_alignment_starts_every_tile_on_an_even_sample(numpy_as_cupy):
    """The zero taps the fused launcher adds (z before the taps, d after, 0 or 1 each) make every tile of the padded
    filter start on an even sample (tile t at t (N - K' + 1) - pad'), where the padded filter fits in half the tile;
    none where it would not."""
    c = numpy_as_cupy
    for N in (1024, 16384):
        for K in list(range(1, 40)) + [511, 512, 513, 8190, 8191, 8192]:
            for pad in {0, 1, 2, (K - 1) // 2, K // 2, K - 1, K}:
                z, d = c.fused_alignment(K, pad, N)
                Kp = K + z + d
                if 2 * (K + 2) <= N:
                    assert z in (0, 1) and d in (0, 1) and 2 * Kp <= N
                    starts = np.arange(5) * (N - Kp + 1) - (pad + z)
                    assert not (starts % 2).any(), (N, K, pad, z, d)
                elif 2 * Kp > N:
                    assert (z, d) == (0, 0)


@pytest.mark.parametrize("N", [1024, 8192, 16384, 32768])
def test_fused_table_is_g_below_the_pair_tiles_and_pairs_from_them(numpy_as_cupy, N, rng):
    """The table the fused kernel reads: G (fused_coefficients) on tiles shorter than 2^SIGCONV_FFT_FUSED_H_MIN_LOGN
    samples; on the longer ones the pair table: row s N/64 + c holds (S, D) = (H[k] + conj H[M-k], H[k] - conj
    H[M-k]) of bin k = s + 16 c (c < N/64; H[M] for k = 0), row M/2 that of bin M/2 with itself, zero after it; and
    the coefficients the kernel forms from a row (kernels/fft_fused.cuh, ff_pair_coefs) are G's rows of both bins of
    the pair, which cover every bin."""
    from sigconv import _kernels

    c = numpy_as_cupy
    M = N // 2
    H = np.fft.rfft(rng.standard_normal(N)) / N
    T = c.fused_table(H, N)
    assert T.dtype == np.float32 and T.shape == (M, 4) and T.flags.c_contiguous
    G = c.fused_coefficients(H, N).astype(np.float64)
    if N < 1 << _kernels.constants()["SIGCONV_FFT_FUSED_H_MIN_LOGN"]:
        assert np.array_equal(T, G.astype(np.float32))
        return
    assert not T[M // 2 + 1:].any()
    S, D = T[: M // 2 + 1, 0] + 1j * T[: M // 2 + 1, 1], T[: M // 2 + 1, 2] + 1j * T[: M // 2 + 1, 3]
    k = np.array([s + 16 * cc for s in range(16) for cc in range(M // 32)] + [M // 2])
    assert sorted(k.tolist()) == list(range(M // 2 + 1))  # every bin up to M/2 has its row
    hk, hm = H[k], np.conj(H[M - k])
    assert np.abs(S - (hk + hm)).max() <= 1e-7 * np.abs(H).max()
    assert np.abs(D - (hk - hm)).max() <= 1e-7 * np.abs(H).max()
    # the kernel's coefficients from a row and W = exp(-2 pi i k / N) = (cs, -sn), in float64: G's rows of k and M-k
    W = np.exp(-2j * np.pi * k / N)
    cs, sn = W.real, -W.imag
    gk = np.stack([S - sn * D, 1j * cs * D], axis=1)
    gm = np.stack([np.conj(S + sn * D), -np.conj(1j * cs * D)], axis=1)
    Gc = G[:, 0::2] + 1j * G[:, 1::2]  # (a, b) per bin
    tol = 1e-6 * np.abs(Gc).max()
    assert np.abs(gk[:-1] - Gc[k[:-1]]).max() <= tol
    assert np.abs(gm[1:-1] - Gc[M - k[1:-1]]).max() <= tol  # (k = 0 and M/2 their own partners)
    assert np.abs(gk[-1] - Gc[M // 2]).max() <= tol


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("N", [4096, 32768])
def test_fused_host_table_folds_a_small_tap_shift_into_the_table(numpy_as_cupy, dtype, N, rng):
    """The fused launcher's table from host taps: where the taps' exponent lies within +-SIGCONV_FFT_FUSED_FOLD_MAX,
    the table of their spectrum times that power of two, bit for bit (an exact scaling), and a tap shift of 0;
    beyond it, the table of the spectrum of the taps divided by it, and that tap shift (host_spectrum's)."""
    from sigconv import _kernels

    c = numpy_as_cupy
    fold = _kernels.constants()["SIGCONV_FFT_FUSED_FOLD_MAX"]
    base = rng.standard_normal(301)
    base *= 0.75 / np.abs(base).max()  # (a peak of 0.75: the exponent is 0 before the scaling below)
    for e in (0, -5, 7, fold, -fold, fold + 1, -fold - 1, -130):
        w = np.ldexp(base, e).astype(dtype)
        H, ts = c.host_spectrum(w, N)
        assert int(ts[0]) == e
        table, tap_shift = c.fused_host_table(w, N)
        assert tap_shift.dtype == np.int32 and tap_shift.shape == (1,)
        if abs(e) <= fold:
            assert int(tap_shift[0]) == 0, e
            assert np.array_equal(table, np.ldexp(c.fused_table(H, N), e)), e
        else:
            assert int(tap_shift[0]) == e
            assert np.array_equal(table, c.fused_table(H, N)), e


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_filter_spectrum_values_and_cache(numpy_as_cupy, dtype, rng):
    c = numpy_as_cupy
    w = rng.standard_normal(1023).astype(dtype)
    N = c.fft_size(w.size)
    w = np.ldexp(w, 90).astype(dtype)  # huge taps: the spectrum is that of the taps divided by 2^tap_shift
    tap_shift = np.frexp(np.abs(w.astype(np.float64)).max())[1]
    want = np.fft.rfft(np.ldexp(w[::-1].astype(np.float64), -tap_shift), N) / N
    H, shift = c._filter_spectrum(w, N)  # no key: computed, not cached
    assert H.dtype == (np.complex64 if dtype == np.float32 else np.complex128) and H.shape == (N // 2 + 1,)
    assert shift.tolist() == [tap_shift] and tap_shift > 90  # the taps of peak ~2^91 are divided by 2^tap_shift
    tol = 1e-7 if dtype == np.float32 else 1e-15
    assert np.abs(H - want).max() <= tol * np.abs(want).max()
    assert not c._SPECTRA
    key = c.host_taps_key(w)
    H1 = c._filter_spectrum(w, N, key)
    assert c._filter_spectrum(w, N, key) is H1 and len(c._SPECTRA) == 1  # computed once, then cached
    w2 = w.copy()
    w2[7] *= 2
    assert c.host_taps_key(w2) != key and c.host_taps_key(w.astype(np.float64 if dtype == np.float32 else
                                                                      np.float32)) != key
    assert c._filter_spectrum(w2, N, c.host_taps_key(w2)) is not H1 and len(c._SPECTRA) == 2
    for i in range(c._SPECTRA_MAX + 3):  # bounded
        c._filter_spectrum(w, 1024 * (i + 2), key)
    assert len(c._SPECTRA) == c._SPECTRA_MAX


# ------------------------------------------------------------------ the 2-D boundaries on the host
# c2d_extend (kernels/conv2d_common.cuh) is the one boundary rule; naive and shared read the extended image through
# it in their own loads, separable in its row pass, conv2d_extend into a copy. Checked against numpy.pad;
# tests/host_emulation/border_harness.cpp compiles the kernels' own source for the host (AddressSanitizer) and runs
# them as the launchers would.

#: (H, W, kH, kW): the kernel larger than the image in both axes, in one, 1xN and Nx1 images, even and odd
#: kernels, a single pixel, a 1x1 kernel, and an image wide enough for blocks whose windows lie inside it next to
#: blocks whose windows leave it.
BORDER_SHAPES = [(5, 7, 3, 3), (3, 5, 7, 9), (6, 2, 3, 4), (2, 9, 5, 2), (1, 11, 1, 4), (13, 1, 4, 1), (8, 8, 2, 2),
                 (1, 1, 3, 3), (7, 6, 1, 1), (9, 10, 4, 5), (6, 37, 3, 5)]


def _border_modes(H, W, kH, kW):
    """(name, pad, out_hw) of SciPy's windows in correlation form: full, convolve2d's same, correlate2d's same
    and valid (when the image holds the kernel)."""
    yield "full", (kH - 1, kW - 1), (H + kH - 1, W + kW - 1)
    yield "same_conv", (kH // 2, kW // 2), (H, W)
    yield "same_corr", ((kH - 1) // 2, (kW - 1) // 2), (H, W)
    if H >= kH and W >= kW:
        yield "valid", (0, 0), (H - kH + 1, W - kW + 1)


def _all_border_cases():
    for H, W, kH, kW in BORDER_SHAPES:
        for mode, pad, out_hw in _border_modes(H, W, kH, kW):
            yield pytest.param(H, W, kH, kW, pad, out_hw, id=f"{H}x{W}-k{kH}x{kW}-{mode}")


CXX = shutil.which("g++") or shutil.which("c++")
KDIR = Path(__file__).resolve().parent.parent / "kernels"
EMU = Path(__file__).resolve().parent / "host_emulation"


def _build_border(out_dir: Path) -> tuple:
    """(exe, skip reason, build error) of tests/host_emulation/border_harness.cpp built for the host, under
    AddressSanitizer and UBSan when the compiler has them."""
    exe = out_dir / "border_harness"
    base = [CXX, "-std=c++20", "-O1", "-g", f"-I{KDIR}", f"-I{EMU}", "-o", str(exe), str(EMU / "border_harness.cpp"),
            "-pthread"]
    res = subprocess.run(base[:1] + ["-fsanitize=address,undefined", "-fno-omit-frame-pointer"] + base[1:],
                         capture_output=True, text=True, timeout=600)
    if res.returncode != 0:  # no sanitizer runtimes: still run, unsanitized
        res = subprocess.run(base, capture_output=True, text=True, timeout=600)
    if res.returncode != 0 and "barrier" in res.stderr:
        return None, "the C++ compiler lacks C++20 <barrier>: host emulation skipped", None
    return exe, None, (None if res.returncode == 0 else res.stderr[-4000:])


#: The border harness build, started by :func:`prefetch` while the earlier test modules run.
_BORDER_BUILD: list = []


def prefetch(items) -> None:
    """Start the border harness build at collection when a selected test needs it (conftest calls this)."""
    if CXX is None or _BORDER_BUILD:
        return
    if any("border_harness" in getattr(it, "fixturenames", ()) and it.get_closest_marker("skip") is None
           for it in items):
        import tempfile
        from concurrent.futures import ThreadPoolExecutor

        out = Path(tempfile.mkdtemp(prefix="sigconv-border-"))
        _BORDER_BUILD.append(ThreadPoolExecutor(1, thread_name_prefix="border-build").submit(_build_border, out))


@pytest.fixture(scope="module")
def border_harness(tmp_path_factory):
    """The border harness executable (see :func:`_build_border`)."""
    if CXX is None:
        pytest.skip("no C++ compiler (g++/c++) on PATH: host emulation of the 2-D boundary kernels skipped")
    if _BORDER_BUILD:
        exe, skip, err = _BORDER_BUILD[0].result()
    else:
        exe, skip, err = _build_border(tmp_path_factory.mktemp("border"))
    if skip:
        pytest.skip(skip)
    assert err is None, f"host build of border_harness.cpp failed:\n{err}"
    return exe


def _harness(exe, *args):
    res = subprocess.run([str(exe), *map(str, args)], capture_output=True, text=True, timeout=300,
                         env={"ASAN_OPTIONS": "detect_leaks=0", "UBSAN_OPTIONS": "halt_on_error=1",
                              "PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, f"border_harness {args[0]} failed (rc {res.returncode}):\n{res.stderr[-3000:]}"


_NP_MODE = {"wrap": "wrap", "symm": "symmetric"}


@pytest.mark.parametrize("n", [1, 2, 3, 7])
@pytest.mark.parametrize("boundary", ["fill", "wrap", "symm"])
def test_extend_matches_numpy_pad(border_harness, tmp_path, n, boundary):
    """c2d_extend, the one boundary rule on the device, maps indices several periods out as numpy.pad extends
    (fill: -1 outside, the constant's marker)."""
    from sigconv.backends.cuda2d import BOUNDARIES

    reach = 4 * n + 3
    f = tmp_path / "ext.bin"
    _harness(border_harness, "extend", n, BOUNDARIES[boundary], -reach, n + reach, f)
    got = np.fromfile(f, np.int32)
    if boundary == "fill":
        want = np.pad(np.arange(n), reach, mode="constant", constant_values=-1)
    else:
        want = np.pad(np.arange(n), reach, mode=_NP_MODE[boundary])
    assert got.tolist() == want.tolist()


def test_every_template_kernel_the_launchers_call_is_compiled():
    """Each conv2d.cu template that cuda2d launches by name (_generic) is among the name expressions NVRTC compiles
    (a missing one fails only on a GPU, as "named symbol not found"), in every dtype it is launched with, and each
    has an explicit instance for the nvcc check."""
    import re

    from sigconv.backends import cuda2d

    src = Path(cuda2d.__file__).read_text()
    called = set(re.findall(r'_generic\("(\w+)"', src))
    assert {"conv2d_naive", "conv2d_extend", "conv2d_shared"} <= called
    compiled = {e.split("<")[0] for e in cuda2d._GENERIC_NAMES}
    assert called <= compiled, f"launched but not compiled: {sorted(called - compiled)}"
    cu = (KDIR / "conv2d.cu").read_text()
    for name in called:
        assert re.search(rf"template __global__ void {name}<float>\(", cu), name
        assert f"{name}<float>" in cuda2d._GENERIC_NAMES and f"{name}<double>" in cuda2d._GENERIC_NAMES, name


def test_strip_ring_follows_the_kernel_limits():
    """The launcher's test of strip's accumulator ring (whether its wrap/symm builds are capped) is the kernel's
    own: at most STRIP_RING_MAX_KH rows and STRIP_RING_MAX_TAPS taps (kernels/limits.cuh)."""
    import re

    from sigconv import _kernels
    from sigconv.backends import cuda2d

    src = _kernels.source("conv2d_strip.cuh")
    ring = r"#if STRIP_KH <= SIGCONV_STRIP_RING_MAX_KH && STRIP_KH \* STRIP_KW <= SIGCONV_STRIP_RING_MAX_TAPS"
    assert re.search(ring, src)
    assert (cuda2d.STRIP_RING_MAX_KH, cuda2d.STRIP_RING_MAX_TAPS) == (11, 121)
    assert all(cuda2d.strip_ring(k, k) for k in (1, 3, 5, 7, 9, 11))
    assert not any(cuda2d.strip_ring(k, k) for k in (13, 15))
    assert cuda2d.strip_ring(11, 9) and not cuda2d.strip_ring(9, 15) and not cuda2d.strip_ring(13, 3)


def test_launch_path_resolves_builds_and_device_limits_once(monkeypatch):
    """A repeated launch costs lookups: the wrap/symm build of a fused kernel (its register cap included) and the
    device's shared-memory limit are resolved once per device, and a launch's integer arguments are built once."""
    from sigconv import _kernels
    from sigconv.backends import cuda2d

    asked = {"attributes": 0, "module": []}

    class Device:
        def __init__(self, i=None):
            self.id = 3 if i is None else i

        @property
        def attributes(self):
            asked["attributes"] += 1
            return {"MaxSharedMemoryPerBlockOptin": 232448}

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(Device=Device))
    monkeypatch.setitem(sys.modules, "cupy", fake)

    def module(name, defines=None, name_expressions=(), options=()):
        asked["module"].append((dict(defines or {}), tuple(options)))
        return types.SimpleNamespace(get_function=lambda k: types.SimpleNamespace(num_regs=165))

    monkeypatch.setattr(_kernels, "module", module)
    _kernels.device_attributes.cache_clear()
    cuda2d._boundary_module.cache_clear()
    cuda2d._reg_cap.cache_clear()
    try:
        assert [cuda2d._smem_limit() for _ in range(3)] == [232448] * 3 and asked["attributes"] == 1
        x = np.zeros((1, 1, 8, 12), np.float32)
        d = dict(STRIP_KH=9, STRIP_KW=9, STRIP_SH=0, STRIP_ROWS=32)
        m1, f1 = cuda2d._fused("conv2d_strip", d, "symm", 0.0, x)
        n = len(asked["module"])
        assert n == 2  # the fill build (for its registers), then the capped symm build, each of strip alone
        part = {"C2D_PART": cuda2d._CODES["SIGCONV_C2D_PART_STRIP"]}
        assert asked["module"][0] == ({**d, **part}, ())
        assert asked["module"][1] == ({**d, **part, "C2D_BOUNDARY": cuda2d.BOUNDARIES["symm"]}, ("--maxrregcount=168",))
        m2, f2 = cuda2d._fused("conv2d_strip", dict(reversed(list(d.items()))), "symm", 0.0, x)
        assert m2 is m1 and len(asked["module"]) == n and f2 == f1 == np.float32(0)
        cuda2d._fused("conv2d_strip", d, "wrap", 0.0, x)  # another boundary: its own build
        assert len(asked["module"]) == n + 1
        with pytest.raises(ValueError, match="non-empty image"):  # still refused before any lookup
            cuda2d._fused("conv2d_strip", d, "wrap", 0.0, np.zeros((1, 1, 0, 12), np.float32))
        a = cuda2d._i32(1, 2, 3)
        assert a == (1, 2, 3) and all(v.dtype == np.int32 for v in a) and cuda2d._i32(1, 2, 3) is a
    finally:
        _kernels.device_attributes.cache_clear()
        cuda2d._boundary_module.cache_clear()
        cuda2d._reg_cap.cache_clear()


def test_a_block_of_many_threads_gets_a_build_that_launches_it(monkeypatch):
    """A fused kernel's build that uses more registers than a block of so many threads may hold is rebuilt held to
    the block's share (once per device, build and block size); one that fits, and every block of 256 threads or
    fewer, keeps its usual build."""
    from sigconv import _kernels
    from sigconv.backends import cuda2d

    assert [cuda2d.block_reg_cap(n) for n in (32, 256, 288, 512, 992, 1024)] == [255, 255, 224, 128, 64, 64]
    built = []

    def module(name, defines=None, name_expressions=(), options=()):
        built.append((dict(defines or {}), tuple(options)))
        regs = int(options[0].split("=")[1]) if options else 128  # an uncapped build of 128 registers

        def fn(k):  # a block holds 64K registers, allocated per warp in units of 8 per thread
            return types.SimpleNamespace(num_regs=regs, max_threads_per_block=min(1024, 65536 // regs // 32 * 32))
        return types.SimpleNamespace(get_function=fn)

    monkeypatch.setitem(sys.modules, "cupy", types.SimpleNamespace(
        cuda=types.SimpleNamespace(Device=lambda: types.SimpleNamespace(id=0))))
    monkeypatch.setattr(_kernels, "module", module)
    for f in (cuda2d._module_for_threads, cuda2d._boundary_module, cuda2d._reg_cap):
        f.cache_clear()
    try:
        x = np.zeros((1, 1, 8, 12), np.float32)
        d0 = dict(STRIP_KH=15, STRIP_KW=15, STRIP_SH=0, STRIP_ROWS=32)
        d = {**d0, "C2D_PART": cuda2d._CODES["SIGCONV_C2D_PART_STRIP"]}  # the builds compile strip alone
        cuda2d._fused("conv2d_strip", d0, "fill", 0.0, x, 256)
        cuda2d._fused("conv2d_strip", d0, "fill", 0.0, x, 512)  # 128 registers x 512 threads fit
        assert built == [(d, ())] * 2
        m, _ = cuda2d._fused("conv2d_strip", d0, "fill", 0.0, x, 992)
        assert built[-1] == (d, ("--maxrregcount=64",)) and m.get_function("conv2d_strip").max_threads_per_block >= 992
        n = len(built)
        assert cuda2d._fused("conv2d_strip", d0, "fill", 0.0, x, 992)[0] is m and len(built) == n
        cuda2d._fused("conv2d_strip", d0, "wrap", 0.0, x, 1024)  # strip 15x15 rotates: its wrap build is uncapped
        assert built[-1] == ({**d, "C2D_BOUNDARY": cuda2d.BOUNDARIES["wrap"]}, ("--maxrregcount=64",))
    finally:
        for f in (cuda2d._module_for_threads, cuda2d._boundary_module, cuda2d._reg_cap):
            f.cache_clear()


def test_auto_times_its_candidates_under_the_calls_boundary(monkeypatch):
    """``auto`` asks the chooser for the job with its border and times each candidate the way corr2d runs it
    under that boundary (its own loads, or the copy under extend)."""
    from sigconv.backends import cuda2d
    from sigconv.registry import auto as _auto

    assert [cuda2d._border(b, f) for b, f in (("fill", 0.0), ("fill", 1.5), ("wrap", 0.0), ("symm", 0.0))] == \
        ["zero", "fill", "wrap", "symm"]
    seen, ran = [], []

    def choose(backend, job, block=None, runner=None):
        seen.append(job)
        runner("strip", (64, 1))
        runner("naive", (32, 8))
        return "strip", (64, 1)

    monkeypatch.setattr(_auto, "choose_conv2d", choose)
    monkeypatch.setattr(cuda2d, "_out", lambda out, shape, dtype: ("scratch", shape))
    monkeypatch.setattr(cuda2d, "_run_variant", lambda *a: ran.append(a))
    x, w = np.zeros((1, 1, 30, 41), np.float32), np.zeros((1, 1, 5, 5), np.float32)
    for boundary, fill, border in (("symm", 0.0, "symm"), ("fill", 2.0, "fill"), ("fill", 0.0, "zero")):
        seen.clear(), ran.clear()
        got = cuda2d.resolve_auto(x, w, None, (1, 1), (2, 2), (30, 41), boundary=boundary, fillvalue=fill)
        assert got == ("strip", (64, 1)) and seen[0].border == border
        assert [(a[0], a[1], a[8], a[10], a[11]) for a in ran] == [
            ("strip", (64, 1), ("scratch", (1, 1, 30, 41)), boundary, fill),
            ("naive", (32, 8), ("scratch", (1, 1, 30, 41)), boundary, fill)]


def _padded(x, kH, kW, pad, out_hw, boundary, fill):
    """x extended by the boundary rule to the (Ho + kH - 1) x (Wo + kW - 1) input the outputs read."""
    (py, px), (Ho, Wo) = pad, out_hw
    H, W = x.shape
    widths = ((py, Ho + kH - 1 - H - py), (px, Wo + kW - 1 - W - px))
    if boundary == "fill":
        return np.pad(x, widths, mode="constant", constant_values=fill)
    return np.pad(x, widths, mode=_NP_MODE[boundary])


def _int64_corr_valid(xe, w, out_hw):
    """Exact two's-complement reference: shift and add in int64 (wraps mod 2^64, as the uint64 kernels)."""
    Ho, Wo = out_hw
    y = np.zeros((Ho, Wo), np.int64)
    for i in range(w.shape[0]):
        for j in range(w.shape[1]):
            y += w[i, j] * xe[i:i + Ho, j:j + Wo]
    return y


def _run_generic(exe, tmp, variant, dtype, x, w, pad, out_hw, boundary, fill, y0, block=(8, 4)):
    """``variant`` (naive, shared) under ``boundary`` on the launcher's grid (a block smaller than its default, so
    that these small shapes span several blocks); y0 the poisoned output."""
    from sigconv.backends import cuda2d

    H, W = x.shape
    kH, kW = w.shape
    pitch, smem = cuda2d.shared_geometry(block, kH, kW, (1, 1), x.dtype.itemsize) if variant == "shared" else (0, 0)
    files = [tmp / "x.bin", tmp / "w.bin", tmp / "y.bin"]
    for a, f in zip((x, w, y0), files):
        np.ascontiguousarray(a).tofile(f)
    dt = {np.float32: "f32", np.float64: "f64", np.uint64: "u64"}[dtype]
    _harness(exe, "run", variant, dt, *cuda2d.generic_grid(1, *out_hw, block)[:2], *block, pitch, smem, H, W, kH, kW,
             *pad, *out_hw, cuda2d.BOUNDARIES[boundary], repr(fill), *files)
    return np.fromfile(files[2], dtype).reshape(out_hw)


BOUNDARY_CASES = [("fill", 0.0), ("fill", 2.5), ("wrap", 0.0), ("symm", 0.0)]


def _extend_cases():
    """Every border case in float32; every third also in float64 and in uint64 (a fill constant near -2^62)."""
    for k, case in enumerate(_all_border_cases()):
        yield pytest.param(np.float32, *case.values, id=f"f32-{case.id}")
        if k % 3 == 0:
            yield pytest.param(np.float64, *case.values, id=f"f64-{case.id}")
            yield pytest.param(np.uint64, *case.values, id=f"u64-{case.id}")


@pytest.mark.parametrize("dtype, H, W, kH, kW, pad, out_hw",
                         [pytest.param(np.float32 if k % 3 else np.float64, *c.values, id=c.id)
                          for k, c in enumerate(_all_border_cases())])
def test_separable_boundary_passes_on_host(border_harness, tmp_path, rng, dtype, H, W, kH, kW, pad, out_hw):
    """separable under a boundary: its row pass through the rule (conv2d_sep_rows_ext), then the column pass, on the
    launcher's grids, equal the float64 correlation of the numpy.pad-extended image with u v^T, every output written
    (poisoned first), for fill 0 and a constant, wrap and symm."""
    from sigconv.backends import cuda2d

    x = rng.standard_normal((H, W)).astype(dtype)
    u, v = rng.standard_normal(kH).astype(dtype), rng.standard_normal(kW).astype(dtype)
    files = [tmp_path / n for n in ("x.bin", "u.bin", "v.bin", "y.bin")]
    for a, f in zip((x, u, v), files):
        a.tofile(f)
    dt = {np.float32: "f32", np.float64: "f64"}[dtype]
    block = (8, 4)  # small, so that these shapes span several blocks
    for boundary, fill in BOUNDARY_CASES:
        np.full(out_hw, np.nan, dtype).tofile(files[3])
        _harness(border_harness, "sep", dt, *block, H, W, kH, kW, *pad, *out_hw, cuda2d.BOUNDARIES[boundary],
                 repr(fill), *files)
        y = np.fromfile(files[3], dtype).reshape(out_hw)
        xe = _padded(x.astype(np.float64), kH, kW, pad, out_hw, boundary, fill)
        w = np.outer(u, v).astype(np.float64)
        ref = scipy.signal.correlate2d(xe, w, "valid")
        scale = scipy.signal.correlate2d(np.abs(xe), np.abs(w), "valid")
        tol = {np.float32: 1e-5, np.float64: 1e-10}[dtype]
        assert np.isfinite(y).all(), f"{boundary}: unwritten outputs"
        bad = np.abs(y - ref) > tol * np.maximum(scale, 1e-300)
        assert not bad.any(), f"{boundary} fill={fill}: first mismatch at {np.argwhere(bad)[0].tolist()}"


@pytest.mark.parametrize("dtype, H, W, kH, kW, pad, out_hw", list(_extend_cases()))
def test_extended_copy_on_host(border_harness, tmp_path, rng, dtype, H, W, kH, kW, pad, out_hw):
    """conv2d_extend on the launcher's grid writes every element of the copy (poisoned first) with the image
    extended by numpy.pad, for fill 0 and a constant, wrap and symm, also several periods out (a kernel larger than
    the image) and in the columns that round the rows up to a multiple of 4; nothing outside the arrays is touched
    (AddressSanitizer)."""
    from sigconv.backends import cuda2d

    (py, px), (Ho, Wo) = pad, out_hw
    He, We = Ho + kH - 1, cuda2d._extended_width(Wo, kW)
    if dtype == np.uint64:
        x = rng.integers(-(2**62), 2**62, (H, W), dtype=np.int64).view(np.uint64)
        cases = [("fill", 0), ("fill", int(rng.integers(-(2**62), -(2**61))) % 2**64), ("wrap", 0), ("symm", 0)]
    else:
        x = rng.standard_normal((H, W)).astype(dtype)
        cases = BOUNDARY_CASES
    fx, fe = tmp_path / "x.bin", tmp_path / "xe.bin"
    x.tofile(fx)
    dt = {np.float32: "f32", np.float64: "f64", np.uint64: "u64"}[dtype]
    for boundary, fill in cases:
        poison = np.full((He, We), 0xA5A5A5A5A5A5A5A5 if dtype == np.uint64 else np.nan, dtype)
        poison.tofile(fe)
        _harness(border_harness, "image", dt, *cuda2d.extend_grid(He, We), *cuda2d.EXTEND_BLOCK, H, W, He, We, py, px,
                 cuda2d.BOUNDARIES[boundary], repr(fill) if dtype != np.uint64 else fill, fx, fe)
        got = np.fromfile(fe, dtype).reshape(He, We)
        want = _padded(x, kH, kW + We - (Wo + kW - 1), pad, out_hw, boundary, dtype(fill))
        assert got.shape == want.shape
        assert np.array_equal(got, want), f"{boundary} fill={fill}: first mismatch at " \
            f"{np.argwhere(got != want)[0].tolist()}"


def _generic_cases():
    """Every border case for naive in float32, every third for shared in float64, every sixth also naive in float64
    and shared in float32 (the rest slow: the host emulator runs one OS thread per device thread)."""
    for k, case in enumerate(_all_border_cases()):
        more = () if k % 6 == 0 else (pytest.mark.slow,)
        yield pytest.param("naive", np.float32, *case.values, id=f"naive-f32-{case.id}")
        yield pytest.param("shared", np.float64, *case.values, id=f"shared-f64-{case.id}",
                           marks=() if k % 3 == 1 else (pytest.mark.slow,))
        yield pytest.param("naive", np.float64, *case.values, id=f"naive-f64-{case.id}", marks=more)
        yield pytest.param("shared", np.float32, *case.values, id=f"shared-f32-{case.id}", marks=more)


@pytest.mark.parametrize("variant, dtype, H, W, kH, kW, pad, out_hw", list(_generic_cases()))
def test_generic_kernels_read_the_boundary_on_host(border_harness, tmp_path, rng, variant, dtype, H, W, kH, kW, pad,
                                                   out_hw):
    """naive and shared with a boundary argument (fill 0 and 2.5, wrap, symm), in one launch on the launcher's grid,
    write every output (poisoned first) with the float64 correlation of the image extended by numpy.pad, also
    with a kernel larger than the image (windows several periods out); nothing outside the arrays is touched
    (AddressSanitizer)."""
    x = rng.standard_normal((H, W)).astype(dtype)
    w = rng.standard_normal((kH, kW)).astype(dtype)
    for boundary, fill in BOUNDARY_CASES:
        y = _run_generic(border_harness, tmp_path, variant, dtype, x, w, pad, out_hw, boundary, fill,
                         np.full(out_hw, np.nan, dtype))
        assert np.isfinite(y).all(), f"{boundary} fill={fill}: unwritten outputs"
        xe = _padded(x.astype(np.float64), kH, kW, pad, out_hw, boundary, fill)
        ref = scipy.signal.correlate2d(xe, w.astype(np.float64), "valid")
        tol = {np.float32: 1e-5, np.float64: 1e-10}[dtype]
        scale = scipy.signal.correlate2d(np.abs(xe), np.abs(w.astype(np.float64)), "valid")
        bad = np.abs(y - ref) > tol * np.maximum(scale, 1e-300)
        assert not bad.any(), (f"{boundary} fill={fill}: first mismatch at {np.argwhere(bad)[0].tolist()}: "
                               f"{y[bad][0]} vs {ref[bad][0]}")


@pytest.mark.parametrize("H, W, kH, kW, pad, out_hw",
                         [pytest.param(*c.values, id=c.id, marks=() if k % 2 == 0 else (pytest.mark.slow,))
                          for k, c in enumerate(_all_border_cases())])
def test_exact_integer_boundaries_on_host(border_harness, tmp_path, rng, H, W, kH, kW, pad, out_hw):
    """uint64: conv2d_naive with a boundary, values near 2^62 whose products wrap, equals bit for bit the int64
    shift-and-add of the extended image, every boundary (the fill constant itself near -2^62)."""
    x = rng.integers(-(2**62), 2**62, (H, W), dtype=np.int64)
    w = rng.integers(-(2**62), 2**62, (kH, kW), dtype=np.int64)
    big_fill = int(rng.integers(-(2**62), -(2**61)))
    for boundary, fill in [("fill", 0), ("fill", big_fill), ("wrap", 0), ("symm", 0)]:
        y0 = np.full(out_hw, 0xA5A5A5A5A5A5A5A5, np.uint64)  # poison: a value no output takes here
        y = _run_generic(border_harness, tmp_path, "naive", np.uint64, x.view(np.uint64), w.view(np.uint64), pad,
                         out_hw, boundary, np.uint64(fill % 2**64).item(), y0)
        ref = _int64_corr_valid(_padded(x, kH, kW, pad, out_hw, boundary, fill), w, out_hw)
        bad = y.view(np.int64) != ref
        assert not bad.any(), f"{boundary} fill={fill}: first mismatch at {np.argwhere(bad)[0].tolist()}"


class _FakeStream:
    """A stream's record/wait as CuPy's Stream has them, logged: record() returns an event naming the stream and
    the number of calls queued on it so far."""

    def __init__(self, ptr, log):
        self.ptr, self.log, self.queued = ptr, log, 0

    def record(self):
        ev = (self.ptr, self.queued)
        self.log.append(("record", self.ptr, ev))
        return ev

    def wait_event(self, ev):
        self.log.append(("wait", self.ptr, ev))


def _fake_cupy_streams(monkeypatch, current):
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(get_current_stream=lambda: current[0]))
    monkeypatch.setitem(sys.modules, "cupy", fake)


def test_constant_memory_orders_a_second_stream_after_the_first(monkeypatch):
    """A module's __constant__ array is shared by every stream: a launcher on another stream than the last one's
    waits for an event recorded on that one before it uploads (so the upload cannot overtake kernels still reading
    the old values); on the same stream nothing waits; each array (device, address) keeps its own record."""
    from sigconv import _kernels

    log = []
    a, b = _FakeStream(11, log), _FakeStream(22, log)
    current = [a]
    _fake_cupy_streams(monkeypatch, current)
    monkeypatch.setattr(_kernels, "_CONST_READERS", {})
    taps = types.SimpleNamespace(device_id=0, ptr=0x1000)
    other = types.SimpleNamespace(device_id=0, ptr=0x2000)
    other_dev = types.SimpleNamespace(device_id=1, ptr=0x1000)

    def use(ptr, stream):
        current[0] = stream
        with _kernels.constant_memory(ptr) as got:
            assert got is ptr
            log.append(("launch", stream.ptr, ptr.ptr))
            stream.queued += 1

    use(taps, a)
    use(taps, a)
    assert [e[0] for e in log] == ["launch", "launch"]  # one stream: its own order, no events
    log.clear()
    use(taps, b)
    assert log == [("record", 11, (11, 2)), ("wait", 22, (11, 2)), ("launch", 22, 0x1000)]
    log.clear()
    use(other, a)  # another array: its own last reader (none yet)
    use(other_dev, b)  # the same address on another device: another array
    assert [e[0] for e in log] == ["launch", "launch"]
    log.clear()
    use(taps, a)  # back to the first stream: after the second's kernels
    assert log == [("record", 22, (22, 2)), ("wait", 11, (22, 2)), ("launch", 11, 0x1000)]


def test_constant_memory_lets_one_thread_at_a_time_upload_and_launch(monkeypatch):
    """Two host threads filling the same __constant__ array never interleave their upload and launch."""
    import threading
    import time

    from sigconv import _kernels

    log = []
    current = [_FakeStream(1, log)]
    _fake_cupy_streams(monkeypatch, current)
    monkeypatch.setattr(_kernels, "_CONST_READERS", {})
    taps = types.SimpleNamespace(device_id=0, ptr=0x1000)
    order = []

    def user(name):
        for _ in range(20):
            with _kernels.constant_memory(taps):
                order.append((name, "upload"))
                time.sleep(0.0005)
                order.append((name, "launch"))

    threads = [threading.Thread(target=user, args=(n,)) for n in "xy"]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(order) == 80
    for i in range(0, len(order), 2):
        assert order[i][1] == "upload" and order[i + 1] == (order[i][0], "launch"), order[i:i + 2]


@pytest.mark.parametrize("subtype", ["PCM_16", "PCM_24", "ALAC_20", "PCM_32", "FLOAT", "DOUBLE", "VORBIS"])
def test_the_gpu_file_filter_writes_by_the_files_own_rule(monkeypatch, subtype):
    """On cuda the file engine's FIR filter quantises by the file's rule (pcm_spec), as the cpu backend does:
    24-bit samples rounded to 2^23 steps and put in the top of an int32 (libsndfile would otherwise cut the low
    bits of a 2^31-step value: a floor, not a rounding), float64 files written from float32."""
    from sigconv.engine import file as file_engine, gpu_file
    from sigconv.engine.audio import pcm_spec
    from sigconv.engine.settings import KernelChoice

    made = {}

    class Recorder:
        def __init__(self, taps, channels, **kw):
            made.update(kw)

    monkeypatch.setattr(gpu_file, "GPUFileFilter", Recorder)
    spec = pcm_spec(subtype)
    file_engine.fir_block_filter(np.ones(5), 2, spec, kernel=KernelChoice(backend="cuda", variant="auto"))
    rule = made["out_spec"]
    assert rule.out_dtype == made["out_dtype"] == ("float32" if spec.out_dtype == "float64" else spec.out_dtype)
    assert (rule.scale, rule.lo, rule.hi, rule.clip, rule.align) == (spec.scale, spec.lo, spec.hi, spec.clip,
                                                                     spec.align)
    if subtype == "PCM_24":
        assert (rule.scale, rule.align, rule.hi) == (2.0**23, 256, 2.0**23 - 1)


def _fake_cupy_device(monkeypatch, cc, stream_ptr):
    class Device:
        id = 0
        compute_capability = cc

    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Device=Device, get_current_stream=lambda: types.SimpleNamespace(ptr=stream_ptr)))
    monkeypatch.setitem(sys.modules, "cupy", fake)


def test_kernel_params_are_a_plain_launchs_arguments():
    """Device arrays go as their addresses, NumPy scalars as C values of their own size, None as a null pointer;
    anything else is refused by name."""
    import ctypes

    from sigconv import _kernels

    arr = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0x7F0000001000))
    values, kinds = _kernels.kernel_params((arr, np.int32(-3), np.int64(1 << 40), None, np.float32(0.5),
                                            np.float64(2.0), np.uint32(7)))
    assert values == (0x7F0000001000, -3, 1 << 40, 0, 0.5, 2.0, 7)
    assert kinds == (ctypes.c_void_p, ctypes.c_int, ctypes.c_longlong, ctypes.c_void_p, ctypes.c_float,
                     ctypes.c_double, ctypes.c_uint)
    for bad in (3, 2.5, np.int16(1), "x"):
        with pytest.raises(TypeError, match="kernel argument of type"):
            _kernels.kernel_params((arr, bad))


@pytest.mark.parametrize("cc, env, launched", [("90", None, True), ("100", "1", True), ("89", None, False),
                                               ("80", None, False), ("90", "0", False)])
def test_launch_after_uses_the_driver_where_it_can(monkeypatch, cc, env, launched):
    """launch_after launches through cuda-bindings' cuLaunchKernelEx (the real structures; the driver call itself
    stood in for) with programmatic stream serialization, the grid, block, shared memory, current stream, function
    and parameters of the plain launch, on compute capability 9.0 and later unless SIGCONV_PDL=0; elsewhere it
    launches nothing and says so. A driver that refuses the launch, or bindings that cannot use it, turn it off for
    that device; a wrong argument is an error."""
    driver = pytest.importorskip("cuda.bindings.driver")
    from sigconv import _kernels

    _fake_cupy_device(monkeypatch, cc, 0xABC0)
    monkeypatch.setattr(_kernels, "_PDL_OFF", set())
    if env is None:
        monkeypatch.delenv(_kernels.PDL_ENV, raising=False)
    else:
        monkeypatch.setenv(_kernels.PDL_ENV, env)
    calls, result = [], [driver.CUresult.CUDA_SUCCESS]

    def launch(config, f, params, extra):
        calls.append((config, f, params, extra))
        return (result[0],)

    monkeypatch.setattr(driver, "cuLaunchKernelEx", launch)
    fn = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=0x5000))
    x = types.SimpleNamespace(data=types.SimpleNamespace(ptr=0x9000))
    args = (x, np.int32(4), np.int64(5))
    assert _kernels.launch_after(fn, (7, 2), (512,), args, 139392) is launched
    if not launched:
        assert calls == []
        return
    (config, f, params, extra), = calls
    assert (config.gridDimX, config.gridDimY, config.gridDimZ) == (7, 2, 1)
    assert (config.blockDimX, config.blockDimY, config.blockDimZ) == (512, 1, 1)
    assert config.sharedMemBytes == 139392 and int(config.hStream) == 0xABC0 and config.numAttrs == 1
    attr, = config.attrs
    assert attr.id == driver.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
    assert attr.value.programmaticStreamSerializationAllowed == 1
    assert int(f) == 0x5000 and params == _kernels.kernel_params(args) and extra == 0
    # a refusal: nothing launched, and the device's later launches go the plain way without asking again
    result[0] = driver.CUresult.CUDA_ERROR_NOT_SUPPORTED
    assert _kernels.launch_after(fn, (7,), (512,), args) is False
    assert _kernels.launch_after(fn, (7,), (512,), args) is False
    assert len(calls) == 2
    # bindings that cannot use the driver raise: the same
    monkeypatch.setattr(_kernels, "_PDL_OFF", set())

    def unusable(*a):
        calls.append(a)
        raise RuntimeError("Function \"cuLaunchKernelEx\" not found")

    monkeypatch.setattr(driver, "cuLaunchKernelEx", unusable)
    assert _kernels.launch_after(fn, (7,), (512,), args) is False
    assert _kernels.launch_after(fn, (7,), (512,), args) is False
    assert len(calls) == 3
    # a caller's mistake in the arguments is its own error, not a refusal
    monkeypatch.setattr(_kernels, "_PDL_OFF", set())
    with pytest.raises(TypeError, match="kernel argument"):
        _kernels.launch_after(fn, (7,), (512,), (x, 3))


def test_launch_after_without_cuda_bindings(monkeypatch):
    """Without cuda-bindings (the ``cuda`` extras bring it) launch_after launches nothing: the caller's plain
    launch runs."""
    from sigconv import _kernels

    _fake_cupy_device(monkeypatch, "90", 0)
    monkeypatch.setattr(_kernels, "_PDL_OFF", set())
    monkeypatch.delenv(_kernels.PDL_ENV, raising=False)
    monkeypatch.setattr(_kernels, "_cuda_driver", lambda: None)
    fn = types.SimpleNamespace(kernel=types.SimpleNamespace(ptr=0x5000))
    assert _kernels.launch_after(fn, (1,), (32,), ()) is False
