"""Every micro-kernel path of the gradInput / forward sums, bit for bit against the independent model.

The AVX2 kernels take an unrolled path for the common case (a pass whose blocks are all 8 or 16 channels lying
inside reduction panels of 32 channels or a last panel of 16, over whole 4- or 6-row x 16-channel tiles of an
output panel of 32 or 16 channels) and a general path for the rest (the rows left over, other panel widths,
blocks of other sizes, a block cut by a panel edge).  The AVX-512 kernels take unrolled passes over the same runs
of blocks, on tiles of 6 rows x 32 output channels, or of 12, 8 and 4 rows x at most 16 output channels (a panel
of 16 or fewer), and the general path for the rest. The shapes below put
every output through one or the other, on every instruction set this CPU has and for 1 and 3 threads, and compare
with the model of accum_reference.py on grid data (float64 sums exact). The unrolled path starts each block sum
with a product instead of +0 + product; the signed-zero cases check that this never shows (a -0 bias with -0
products).
"""
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc._kernels import _conv_tbc as K

import accum_reference as R
from test_forward import assert_same_bits, grid_problem, hif8_codes, model

ISAS = K.isas()                  # every instruction set this CPU and build run, portable first
# (T_in, B, Cin, Cout, K, pad).  Forward: rows T_out*B, output channels Cout (tiles of 16, panels of 32),
# reduction channels Cin (groups of k0 in panels of 32).  (1) whole panels only; (2) a narrower last panel on
# both sides, groups of 8 / 16 cut by no panel edge; (3) Cin = 40 with block_size 12: groups cut by panel edges;
# (4) few rows (partial row tiles) and B = 1 with pad; (5) 16 output channels (one 16-lane panel) over reduction
# panels of 32 then 16 channels; (6) a 16-channel reduction panel under output panels of 32 and 16; (7) 16 x 16
# with 30 rows (tiles of 12, then 4, then 2 rows on the general path).
FWD_SHAPES = [(10, 3, 64, 32, 3, 1), (9, 4, 72, 45, 3, 1), (7, 2, 40, 20, 2, 1), (5, 1, 64, 48, 3, 2),
              (9, 4, 48, 16, 3, 1), (8, 5, 16, 48, 2, 1), (10, 3, 16, 16, 3, 1)]


def _each_isa_and_threads(call):
    """call() on every instruction set (AVX2 and NEON with row tiles of 4 and of 6; AVX-512 with the broadcasts
    shared and as each FMA's memory operand) and for 1 and 3 threads (parallel threshold 0); all results."""
    outs = []
    for isa in ISAS:
        variants = ([{"gi_rows": r} for r in (4, 6)] if isa in ("avx2", "neon") else
                    [{"bcast_fma": v} for v in (False, True)] if isa == "avx512" else [{}])
        for knobs in variants:
            with K.hooks.override(isa=isa, parallel_min=0, **knobs):
                for n in (1, 3):
                    outs.append(call(n))
    return outs


@pytest.mark.parametrize("form", ["cube", "cube_wide", "sequential"])
@pytest.mark.parametrize("dn,soc,cmt", [("float32", "ascend910b", 0), ("float16", "ascend910b", 0),
                                        ("bfloat16", "ascend950", 0), ("float32", "ascend910b", 2)])
@pytest.mark.parametrize("shape", FWD_SHAPES)
def test_forward_tiles_bit_for_bit(shape, dn, soc, cmt, form):
    x, w, b = grid_problem(shape, dn, seed=sum(shape))
    pad = shape[5]
    want = model(x, w, b, pad, dn, soc, cmt, form)
    for got in _each_isa_and_threads(lambda n: pc.conv_tbc(x, w, b, pad, cube_math_type=cmt, soc=soc,
                                                           accumulation=form, num_threads=n)):
        assert_same_bits(got, want)


@pytest.mark.parametrize("block_size", [8, 16, 12])
def test_forward_block_sizes_on_whole_tiles(block_size):
    shape = (9, 4, 72, 45, 3, 1)
    x, w, b = grid_problem(shape, "float32", seed=5)
    want = model(x, w, b, 1, "float32", "ascend910b", 0, "cube", block_size)
    for got in _each_isa_and_threads(lambda n: pc.conv_tbc(x, w, b, 1, accumulation="cube",
                                                           block_size=block_size, num_threads=n)):
        assert_same_bits(got, want)


@pytest.mark.parametrize("dn,k0", [("float32", 8), ("float16", 16)])
def test_forward_signed_zeros(dn, k0):
    """bias -0 and rows whose products are all -0 (x = -0, w > 0) or +0: the model gives -0 + (+0) = +0 where a
    row has a tap, and every row has one here.  Rows with nonzero products keep their exact values."""
    dt = {"float32": np.float32, "float16": np.float16}[dn]
    shape = (8, 3, 64, 32, 3, 1)
    x, w, b = grid_problem(shape, dn, seed=11)
    w = np.abs(w).astype(dt)
    x = x.copy()
    x[2:6] = -0.0                          # time steps 2..5: -0 products for every tap reading them
    x[0, 1] = 0.0
    b = np.full(shape[3], -0.0, np.float32)
    want = model(x, w, b, 1, dn, "ascend910b", 0, "cube")
    zero_rows = want[3:5]                  # t = 3, 4 read only x[2..5]
    assert not np.signbit(zero_rows).any() and not zero_rows.astype(np.float32).any()
    for got in _each_isa_and_threads(lambda n: pc.conv_tbc(x, w, b, 1, num_threads=n)):
        assert_same_bits(got, want)


def test_forward_no_tap_keeps_a_negative_zero_bias():
    """Cin = 0: no block at all, so every output is the bias itself, -0 included."""
    x = np.zeros((4, 2, 0), np.float32)
    w = np.zeros((3, 0, 20), np.float32)
    b = np.full(20, -0.0, np.float32)
    out = pc.conv_tbc(x, w, b, 1)
    assert out.shape == (4, 2, 20) and np.signbit(out).all()


# gradInput: rows T_in*B, output channels Cin (tiles of 16), reduction channels Cout (groups in panels of 32)
# (the last three: 16 output channels over reduction panels of 32 and 16; 32 over a 16-channel panel; 32 + 13
# output channels over one 16-channel panel)
GI_SHAPES = [(12, 3, 32, 64, 3, 1), (11, 4, 45, 72, 3, 1), (6, 2, 20, 40, 2, 1), (12, 3, 16, 48, 3, 1),
             (11, 4, 32, 16, 3, 1), (10, 3, 45, 16, 2, 1)]


def _backward_grid(shape):
    """Grid data for a backward call of ``shape`` (float64 sums exact): dy, x, w and a zero bias."""
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(sum(shape))
    dy = R.grid(rng, (T_out, B, Cout), 6, emin=-6, emax=6)
    x = R.grid(rng, (T_in, B, Cin), 6, emin=-6, emax=6)
    w = R.grid(rng, (K_, Cin, Cout), 6, emin=-6, emax=6)
    return dy, x, w, np.zeros(Cout, np.float32)


@pytest.mark.parametrize("block_size", [None, 16, 12])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("shape", GI_SHAPES)
def test_grad_input_tiles_bit_for_bit(shape, soc, block_size):
    T_in, pad = shape[0], shape[5]
    dy, x, w, b = _backward_grid(shape)
    want = R.grad_input(dy, w, T_in, pad, "cube", block_size or 8, soc)
    for gi, _, _ in _each_isa_and_threads(lambda n: pc.conv_tbc_backward(
            dy, x, w, b, pad, soc=soc, deterministic=True, block_size=block_size, num_threads=n)):
        assert_same_bits(gi, want)


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_grad_weight_and_input_signed_zeros(soc):
    """gradWeight's block sums start with a product: with x = -0 (dy > 0) a block's products are all -0, its
    sum from +0 is +0 in the model; the results must not show which start the kernel used.  Same for gradInput
    with w = -0 channels."""
    shape = (16, 3, 40, 48, 3, 1)
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(4)
    dy = np.abs(R.grid(rng, (T_out, B, Cout), 6, emin=-6, emax=6))
    x = R.grid(rng, (T_in, B, Cin), 6, emin=-6, emax=6)
    w = np.abs(R.grid(rng, (K_, Cin, Cout), 6, emin=-6, emax=6))
    x[:, :, :20] = -0.0                   # every product of these ci is -0
    w[:, :, :24] = -0.0                   # and of these co
    b = np.zeros(Cout, np.float32)
    want_gw = R.grad_weight(x, dy, K_, pad, "cube", 8, soc)
    want_gi = R.grad_input(dy, w, T_in, pad, "cube", 8, soc)
    assert not np.signbit(want_gw[:, :20]).any()
    for gi, gw, _ in _each_isa_and_threads(lambda n: pc.conv_tbc_backward(
            dy, x, w, b, pad, soc=soc, deterministic=True, num_threads=n)):
        assert_same_bits(gw, want_gw)
        assert_same_bits(gi, want_gi)


# gradWeight with at most 16 output channels in a panel: the AVX-512 kernel takes two 8-channel X panels per call
# (the second may be narrower, its rows a different distance apart).  Cin = 20: a pair (8 + 8) then a lone panel
# of 4; Cin = 12: a pair of 8 + 4; Cin = 16 with T_out > 256: chains carried across row chunks; short sequences:
# several items to a chunk.  Cout = 48: a last panel of 16 beside a full one.
GW_SHAPES = [(300, 3, 20, 16, 3, 1), (40, 5, 12, 5, 2, 0), (9, 7, 16, 16, 3, 1), (12, 3, 28, 48, 3, 1)]


@pytest.mark.parametrize("block_size", [None, 16])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("shape", GW_SHAPES)
def test_grad_weight_narrow_panels_bit_for_bit(shape, soc, block_size):
    K_, pad = shape[4], shape[5]
    dy, x, w, b = _backward_grid(shape)
    want = R.grad_weight(x, dy, K_, pad, "cube", block_size or 8, soc)
    for _, gw, _ in _each_isa_and_threads(lambda n: pc.conv_tbc_backward(
            dy, x, w, b, pad, soc=soc, deterministic=True, block_size=block_size, num_threads=n)):
        assert_same_bits(gw, want)


# The forward with narrow channels (the "cube" form, Cin and Cout <= 8 (AVX2: Cout <= 4), B >= 8) takes
# gradInput's narrow kernels, lanes along the output rows: tap k reads x row t + k - pad, the chains start at the
# bias.  Rows not a multiple of the lanes (B = 9, 12), Cin / Cout of 1, K = 1 and K = 4 with pad 3 (rows missing
# taps at both ends), and 4 channels both sides (x in and the sums out through the 4-channel permutes).
NARROW_FWD_SHAPES = [(20, 8, 2, 2, 3, 1), (13, 9, 8, 8, 3, 2), (40, 16, 5, 3, 4, 3), (7, 12, 1, 7, 2, 0),
                     (30, 8, 8, 1, 1, 0), (24, 16, 4, 4, 3, 1)]


@pytest.mark.parametrize("dn,soc,cmt", [("float32", "ascend910b", 0), ("float32", "ascend910b", 3),
                                        ("float32", "ascend910", 2), ("float16", "ascend910b", 0),
                                        ("bfloat16", "ascend950", 0)])
@pytest.mark.parametrize("shape", NARROW_FWD_SHAPES)
def test_forward_narrow_channels_bit_for_bit(shape, dn, soc, cmt):
    x, w, b = grid_problem(shape, dn, seed=sum(shape))
    pad = shape[5]
    for block_size in (None, 3):
        want = model(x, w, b, pad, dn, soc, cmt, "cube", block_size)
        for got in _each_isa_and_threads(lambda n: pc.conv_tbc(x, w, b, pad, cube_math_type=cmt, soc=soc,
                                                               block_size=block_size, num_threads=n)):
            assert_same_bits(got, want)
        with K.hooks.override(narrow=False):      # the general kernels: the same bits
            assert_same_bits(pc.conv_tbc(x, w, b, pad, cube_math_type=cmt, soc=soc, block_size=block_size), want)


def test_forward_narrow_channels_hif8_and_signed_zeros():
    """HiFloat8 operands and output on ascend950 through the narrow kernels; and a -0 bias where every product
    of some rows is -0 (the model: -0 + (+0 block sum) = +0 where a row has a tap)."""
    rng = np.random.default_rng(17)
    shape = (11, 8, 6, 5, 3, 1)
    T_in, B, Cin, Cout, K_, pad = shape
    x, w = hif8_codes(rng, (T_in, B, Cin)), hif8_codes(rng, (K_, Cin, Cout))
    b = R.grid(rng, (Cout,), bits=10, emin=-8, emax=-2)
    want = model(x, w, b, pad, "hifloat8", "ascend950", 0, "cube")
    for got in _each_isa_and_threads(lambda n: pc.conv_tbc(x, w, b, pad, soc="ascend950", hif8_inputs=True,
                                                           num_threads=n)):
        assert_same_bits(got, want)
    x, w, b = grid_problem((8, 8, 4, 4, 3, 1), "float32", seed=2)
    w = np.abs(w)
    x = x.copy()
    x[2:6] = -0.0
    b = np.full(4, -0.0, np.float32)
    want = model(x, w, b, 1, "float32", "ascend910b", 0, "cube")
    assert not np.signbit(want[3:5]).any() and not want[3:5].any()
    for got in _each_isa_and_threads(lambda n: pc.conv_tbc(x, w, b, 1, num_threads=n)):
        assert_same_bits(got, want)
