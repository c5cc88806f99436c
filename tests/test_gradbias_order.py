"""gradBias in ReduceSum's order (docs/precision.md, "gradBias: ReduceSum's order"): the C kernel against the
independent NumPy model (tests/gradbias_reference.py) bit for bit, the tiling against worked examples derived by
hand from the tiling's formulas, and the backward's default and "sequential" orders."""
import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as p
from pyconvtbc._gradbias import Geometry, geometry
from pyconvtbc._kernels import _bias
from pyconvtbc.enums import aclDataType as DT, acl_dtype_of_numpy

from gradbias_reference import reduce_sum_order, sequential_order

F32, F16, BF16 = int(DT.ACL_FLOAT), int(DT.ACL_FLOAT16), int(DT.ACL_BF16)


def _kernel(dy, geom, out_dtype=np.float32):
    out = np.zeros(dy.shape[2], out_dtype)
    code = int(acl_dtype_of_numpy(dy.dtype))
    _bias.reduce_sum((dy.__array_interface__["data"][0], *dy.strides, code), dy.shape, tuple(geom),
                     (out.__array_interface__["data"][0], int(acl_dtype_of_numpy(out.dtype))))
    return out


def _cancelling(rng, shape):
    """Values whose sums depend on the order: wide magnitudes, signs, and cancellation."""
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-12, 13, shape))
    return x.astype(np.float32)


GEOMS = [  # (T, B, C, geometry): tiles padded or not; 1, 2, 3, 5, 8, 9 tiles per group; channel tiles whose
    # widths change the fold variant (width 40 -> 40 > 32: groups of 16; 24 -> halving; 128 -> halving)
    (7, 9, 5, Geometry(63, 1, 5, 64, 8)),
    (13, 11, 40, Geometry(10, 3, 40, 64, 8)),
    (20, 17, 70, Geometry(7, 5, 48, 64, 8)),
    (33, 31, 130, Geometry(16, 8, 128, 64, 8)),
    (41, 29, 100, Geometry(13, 9, 96, 64, 8)),
    (9, 1000, 37, Geometry(200, 2, 37, 64, 16)),
    (64, 64, 72, Geometry(64, 1, 72, 64, 8)),       # one tile per group: 64 groups, stage 2 decides
    (300, 7, 3, Geometry(2100, 1, 3, 64, 8)),       # one tile of all rows, 2100 = not a power of two
    (256, 4, 50, Geometry(1024, 1, 50, 64, 8)),     # 1024 rows of a 56-wide UB row: groups of 16 twice, then 4
]


@pytest.mark.parametrize("T,B,C,geom", GEOMS)
def test_kernel_matches_the_model_bit_for_bit(T, B, C, geom):
    rng = np.random.default_rng(T * 1000 + C)
    dy = _cancelling(rng, (T, B, C))
    want = reduce_sum_order(dy.reshape(T * B, C), geom)
    got = _kernel(dy, geom)
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
    # and the order matters on this data: the sequential chain differs somewhere (else the test shows nothing)
    assert not np.array_equal(sequential_order(dy.reshape(T * B, C)), want)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_kernel_widens_fp16_bf16_exactly_and_rounds_the_output(dtype):
    rng = np.random.default_rng(7)
    T, B, C = 37, 23, 70
    dy = rng.standard_normal((T, B, C)).astype(dtype)
    geom = Geometry(11, 4, 48, 64, 16)
    want = reduce_sum_order(dy.astype(np.float32).reshape(T * B, C), geom)
    assert np.array_equal(_kernel(dy, geom).view(np.uint32), want.view(np.uint32))
    assert np.array_equal(_kernel(dy, geom, dtype).view(np.uint16), want.astype(dtype).view(np.uint16))


def test_kernel_reads_strided_views():
    rng = np.random.default_rng(3)
    base = _cancelling(rng, (40, 30, 90))
    dy = base[::-2, 3::3, ::-1]                 # negative and non-unit strides
    geom = Geometry(9, 5, 40, 64, 8)
    want = reduce_sum_order(np.ascontiguousarray(dy).reshape(-1, dy.shape[2]), geom)
    assert np.array_equal(_kernel(dy, geom).view(np.uint32), want.view(np.uint32))


def test_padding_rows_are_plus_zero():
    """A column of -0.0: the padded tail tile's +0.0 rows make the sum +0.0 (a chain of -0.0 stays -0.0)."""
    dy = np.full((5, 3, 8), -0.0, np.float32)
    got = _kernel(dy, Geometry(4, 8, 8, 64, 8))        # 15 rows -> tiles of 4, the last padded with one +0 row
    assert np.all(np.signbit(sequential_order(dy.reshape(15, 8))) == 0)  # the chain from 0.0f: +0 as well
    assert np.all(got == 0) and not np.any(np.signbit(got))


# ---- the tiling: worked examples, each derived by hand from the formulas of docs/precision.md ----
def test_tiling_long_reduce_wide_channels():
    """R = 10^6, Cout = 256, fp32.  Basic block (253952 - 16384 - 2*512) / 4 = 59136 bytes = 14784 floats.
    Channels: cache-line axis is Cout (256 > 64 floats), tile widths 64, 72, ..., 128 keep every core busy
    (rate > 0.95) and 136 passes 512 bytes: 128 channels, 2 tiles.  Rows: 14784 // 128 = 115; 8696 tiles over
    2 channel tiles use 62 of 64 cores (0.97 > 0.95): 115 rows.  Cores: 64 blocks, 32 per channel tile,
    ceil(8696 / 32) = 272 tiles per core."""
    assert geometry("ascend950", 10**6, 256, F32) == Geometry(115, 272, 128, 64, 8)


def test_tiling_cache_line_over_rows():
    """R = 1000, Cout = 64, fp32: the cache line holds one row (64 floats); 231 rows per tile fit, but only
    tiles of <= 16 rows give >= 61 tiles (0.95 of 64 cores): 16 rows, 63 tiles, one per core."""
    assert geometry("ascend950", 1000, 64, F32) == Geometry(16, 1, 64, 64, 8)


def test_tiling_whole_reduce_in_one_tile():
    """R = 50, Cout = 128: 128 * 50 floats fit one basic block: one tile of all 50 rows, one group."""
    g = geometry("ascend950", 50, 128, F32)
    assert (g.tile_rows, g.tiles_per_group) == (50, 1)


def test_no_model_where_the_order_is_not_known():
    assert geometry("ascend910b", 1000, 64, F32) is None      # its ReduceSum kernel is not public
    assert geometry("ascend910", 1000, 64, F32) is None
    assert geometry("ascend950", 1000, 1, F32) is None        # Cout = 1: another pattern of the template
    assert geometry("ascend950", 0, 64, F32) is None


# ---- the backward ----
def _problem(rng, T_out, B, Cout, dtype=np.float32):
    Cin, K = 4, 2
    x = rng.standard_normal((T_out + K - 1, B, Cin)).astype(dtype)
    w = rng.standard_normal((K, Cin, Cout)).astype(dtype)
    dy = _cancelling(rng, (T_out, B, Cout)).astype(dtype)
    return dy, x, w, np.zeros(Cout, dtype)


@pytest.mark.parametrize("T_out,B,Cout", [(60, 40, 96), (500, 20, 40), (30, 70, 3)])
def test_backward_default_is_reducesum_on_ascend950(T_out, B, Cout):
    rng = np.random.default_rng(T_out + Cout)
    dy, x, w, b = _problem(rng, T_out, B, Cout)
    _, _, gb = p.conv_tbc_backward(dy, x, w, b, soc="ascend950")
    want = reduce_sum_order(dy.reshape(-1, Cout), geometry("ascend950", T_out * B, Cout, F32))
    assert np.array_equal(gb.view(np.uint32), want.view(np.uint32))


def test_backward_sequential_and_ascend910b_keep_the_chain():
    rng = np.random.default_rng(11)
    dy, x, w, b = _problem(rng, 60, 40, 96)
    old = sequential_order(dy.reshape(-1, 96))
    _, _, gb_seq = p.conv_tbc_backward(dy, x, w, b, soc="ascend950", accumulation="sequential")
    _, _, gb_910b = p.conv_tbc_backward(dy, x, w, b, soc="ascend910b")
    assert np.array_equal(gb_seq.view(np.uint32), old.view(np.uint32))
    assert np.array_equal(gb_910b.view(np.uint32), old.view(np.uint32))


def test_backward_fp16_grad_output_rounds_the_fp32_sum_once():
    rng = np.random.default_rng(5)
    dy, x, w, b = _problem(rng, 80, 30, 70, np.float16)
    dy = (rng.standard_normal(dy.shape) * 8).astype(np.float16)
    _, _, gb = p.conv_tbc_backward(dy, x, w, b, soc="ascend950")
    want = reduce_sum_order(dy.astype(np.float32).reshape(-1, 70), geometry("ascend950", 2400, 70, F16))
    assert np.array_equal(gb.view(np.uint16), want.astype(np.float16).view(np.uint16))


def test_backward_cann_layer_uses_the_same_order():
    """aclnnConvTbcBackward (device buffers, the run path with addresses) gives the model's bits too."""
    from conftest import acl_problem, read_back, run_acl
    rng = np.random.default_rng(9)
    dy, x, w, b = _problem(rng, 50, 30, 80)
    p.set_soc_version("ascend950")
    t, ptrs = acl_problem(dy, x, w, b)
    assert run_acl(t, pad=0) == 0, p.aclGetRecentErrMsg()
    got = read_back(ptrs["gradBias"], b.shape, np.float32)
    want = reduce_sum_order(dy.reshape(-1, 80), geometry("ascend950", 1500, 80, F32))
    assert np.array_equal(got.view(np.uint32), want.view(np.uint32))
