"""Every cell of SEMANTICS.md section 3's cubeMathType table: operands rounded to the compute precision C,
fp32 accumulation, gradInput through C when C is FP16/BF16, gradWeight straight from fp32, gradBias from the
original self.  Checked against an independent rounded-operand float64 reference (tests/reference.py)."""
import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from reference import CUBE_TABLE, abs_products_ref, conv_tbc_backward_ref, fp32_bound, round_operand

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
UNIT = {"FP32": 2.0 ** -24, "HF32": 2.0 ** -24, "FP16": 2.0 ** -11, "BF16": 2.0 ** -8}  # unit roundoff of outputs
OUT_U = {np.dtype(np.float32): 2.0 ** -24, np.dtype(np.float16): 2.0 ** -11, np.dtype(ml_dtypes.bfloat16): 2.0 ** -8}
CELLS = [(dt, soc, cube) for (dt, soc) in CUBE_TABLE for cube in range(4)] + \
        [("bfloat16", "ascend910", cube) for cube in range(4)]


def _problem(dtype, T_in=12, B=3, Cin=5, Cout=6, K=3, pad=1, seed=11):
    rng = np.random.default_rng(seed)
    T_out = T_in + 2 * pad - K + 1
    mk = lambda *s: rng.standard_normal(s).astype(np.float32).astype(dtype)
    return mk(T_out, B, Cout), mk(T_in, B, Cin), mk(K, Cin, Cout), mk(Cout)


@pytest.mark.parametrize("dt,soc,cube", CELLS)
def test_cell(dt, soc, cube):
    dtype = DTYPES[dt]
    dy, x, w, b = _problem(dtype)
    C = CUBE_TABLE.get((dt, soc), (None,) * 4)[cube]
    if C is None:  # error cell (ascend910: FP32 KEEP_DTYPE / USE_HF32, and BF16 operands)
        with pytest.raises(pc.AclnnError) as e:
            pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=cube, soc=soc)
        assert e.value.status == 161002
        return
    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=cube, soc=soc)
    assert gi.dtype == x.dtype and gw.dtype == w.dtype and gb.dtype == b.dtype
    r = [round_operand(a, C, soc) for a in (dy, x, w)]
    rgi, rgw, _ = conv_tbc_backward_ref(*r, 1)
    agi, agw, _ = abs_products_ref(*r, 1)
    _, _, rgb = conv_tbc_backward_ref(dy.astype(np.float32), x, w, 1)   # gradBias: original self
    _, _, agb = abs_products_ref(dy.astype(np.float32), x, w, 1)
    T_out, B = dy.shape[:2]
    u_out = OUT_U[np.dtype(dtype)]
    # gi passes through C when C is FP16/BF16: two roundings after the fp32 sum
    u_gi = (1 + u_out) * (1 + (UNIT[C] if C in ("FP16", "BF16") else 0)) - 1
    assert np.all(np.abs(gi.astype(np.float64) - rgi) <= fp32_bound(3 * 6, agi, u_gi, rgi))
    assert np.all(np.abs(gw.astype(np.float64) - rgw) <= fp32_bound(B * T_out, agw, u_out, rgw))
    assert np.all(np.abs(gb.astype(np.float64) - rgb) <= fp32_bound(B * T_out, agb, u_out, rgb))
    if dt == "float32" and C != "FP32":   # the rounding matters: results differ from KEEP_DTYPE's
        kgi, kgw, kgb = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=0, soc="ascend910b")
        assert not np.array_equal(gi, kgi) and not np.array_equal(gw, kgw)
        # gradBias never sees the rounding (same chip: ascend950 sums it in ReduceSum's order)
        same_chip = "ascend910b" if soc == "ascend910" else soc      # ascend910 has no fp32 KEEP_DTYPE cell
        np.testing.assert_array_equal(gb, pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=0,
                                                               soc=same_chip)[2])


def _single_product_problem(dtype, seed=3, Cin=64):
    """T_in=B=K=Cout=1, pad=0: every output element is a single product, exact in fp32 for rounded operands."""
    rng = np.random.default_rng(seed)
    dy = rng.standard_normal((1, 1, 1)).astype(np.float32).astype(dtype)
    x = rng.standard_normal((1, 1, Cin)).astype(np.float32).astype(dtype)
    w = rng.standard_normal((1, Cin, 1)).astype(np.float32).astype(dtype)
    return dy, x, w, np.zeros(1, dtype)


@pytest.mark.parametrize("dt,soc,cube", [c for c in CELLS if CUBE_TABLE.get(c[:2], (None,) * 4)[c[2]]])
@pytest.mark.parametrize("hf32_rounding", ["half_away", "nearest_even"])
def test_cell_bit_exact_single_products(dt, soc, cube, hf32_rounding):
    dtype = DTYPES[dt]
    C = CUBE_TABLE[(dt, soc)][cube]
    dy, x, w, b = _single_product_problem(dtype)
    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=cube, soc=soc, hf32_rounding=hf32_rounding)
    rdy, rx, rw = (round_operand(a, C, soc, hf32_rounding) for a in (dy, x, w))
    prod_gi = (rdy[0, 0, 0] * rw[0, :, 0]).astype(np.float32)            # exact: <= 24 significant bits
    prod_gw = (rx[0, 0, :] * rdy[0, 0, 0]).astype(np.float32)
    if C == "FP32":
        prod_gi = rdy[0, 0, 0] * rw[0, :, 0]                              # fp32 product, rounded once
        prod_gw = rx[0, 0, :] * rdy[0, 0, 0]
    exp_gi = prod_gi
    if C in ("FP16", "BF16"):
        exp_gi = round_operand(exp_gi, C)
    exp_gi = exp_gi.astype(dtype)
    np.testing.assert_array_equal(gi[0, 0, :].view(np.uint8), exp_gi.view(np.uint8))
    np.testing.assert_array_equal(gw[0, :, 0].view(np.uint8), prod_gw.astype(dtype).view(np.uint8))
    np.testing.assert_array_equal(gb.view(np.uint8), dy[0, 0].astype(dtype).view(np.uint8))


def test_hf32_mantissa_width_per_profile():
    # 1 + 2^-11 survives 11 explicit bits (ascend910b) but is a tie at 10 bits (ascend950: half away -> 1 + 2^-10)
    v = np.float32(1 + 2.0 ** -11)
    dy = np.full((1, 1, 1), v, np.float32)
    x = np.ones((1, 1, 1), np.float32)
    w = np.ones((1, 1, 1), np.float32)
    b = np.zeros(1, np.float32)
    _, gw_b, _ = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=3, soc="ascend910b")
    _, gw_9, _ = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=3, soc="ascend950")
    _, gw_ne, _ = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=3, soc="ascend950",
                                       hf32_rounding="nearest_even")
    _, gw_11, _ = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=3, soc="ascend950", hf32_mantissa_bits=11)
    assert gw_b.item() == v
    assert gw_9.item() == 1 + 2.0 ** -10
    assert gw_ne.item() == 1.0          # tie to even
    assert gw_11.item() == v


def test_use_fp16_overflow_and_bf16_operands():
    # bf16 operands beyond fp16's range become inf under USE_FP16 (round to fp16, overflow -> inf)
    big = ml_dtypes.bfloat16(1e5)
    dy = np.full((1, 1, 1), big, ml_dtypes.bfloat16)
    x = np.ones((1, 1, 1), ml_dtypes.bfloat16)
    w = np.ones((1, 1, 1), ml_dtypes.bfloat16)
    b = np.zeros(1, ml_dtypes.bfloat16)
    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=2)
    assert np.isinf(gi.astype(np.float32)).all() and np.isinf(gw.astype(np.float32)).all()
    assert gb.astype(np.float32).item() == float(big)      # gradBias from the original self
    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=0)
    assert gw.astype(np.float32).item() == float(big)


def test_fp32_input_use_fp16_passes_grad_input_through_fp16():
    # a sum that is exact in fp32 but not representable in fp16: 2049 = 2048 + 1
    dy = np.ones((1, 1, 2), np.float32)
    w = np.array([[[2048.0, 1.0]]], np.float32)   # (K=1, Cin=1, Cout=2)
    x = np.ones((1, 1, 1), np.float32)
    b = np.zeros(2, np.float32)
    gi0, _, _ = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=0)
    gi2, _, _ = pc.conv_tbc_backward(dy, x, w, b, 0, cube_math_type=2)
    assert gi0.item() == 2049.0 and gi2.item() == 2048.0   # fp16 spacing at 2048 is 2; tie to even


def test_mixed_dtypes_promote():
    dy, x, w, b = _problem(np.float16)
    xb = x.astype(ml_dtypes.bfloat16)
    # FP16 + BF16 -> FLOAT: KEEP_DTYPE computes in FP32 on the exactly-decoded operands
    gi, gw, gb = pc.conv_tbc_backward(dy, xb, w, b, 1, cube_math_type=0)
    assert gi.dtype == xb.dtype and gw.dtype == w.dtype
    rgi, rgw, _ = conv_tbc_backward_ref(dy, xb, w, 1)
    agi, agw, _ = abs_products_ref(dy, xb, w, 1)
    assert np.all(np.abs(gi.astype(np.float64) - rgi) <= fp32_bound(18, agi, 2.0 ** -8, rgi))
    assert np.all(np.abs(gw.astype(np.float64) - rgw) <= fp32_bound(36, agw, 2.0 ** -11, rgw))


@pytest.mark.parametrize("saturate", [False, True])
def test_float8_e4m3fn_grad_weight(saturate):
    dy, x, w, b = _single_product_problem(np.float32, Cin=200)
    x = (x * 300).astype(np.float32)   # products past 448 occur
    _, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 0, grad_weight_dtype="float8_e4m3fn", saturate=saturate)
    assert gw.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    prod = x[0, 0, :] * dy[0, 0, 0]
    expected = prod.astype(ml_dtypes.float8_e4m3fn).astype(np.float32)       # ml_dtypes: overflow -> NaN
    if saturate:
        expected = np.where(np.abs(prod) > 464, np.sign(prod) * 448, expected)  # past the rounding range
        expected = np.where(np.isnan(expected), np.sign(prod) * 448, expected)
    got = gw[0, :, 0].astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    np.testing.assert_array_equal(got[~np.isnan(got)], expected[~np.isnan(expected)])


def test_hifloat8_grad_weight_against_en_dtypes():
    en = pytest.importorskip("en_dtypes")
    dy, x, w, b = _single_product_problem(np.float32, Cin=512, seed=9)
    x = (x * np.logspace(-8, 6, 512, dtype=np.float32)).astype(np.float32)
    _, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 0, grad_weight_dtype="hifloat8")
    assert gw.dtype == np.uint8
    prod = (x[0, 0, :] * dy[0, 0, 0]).astype(np.float32)
    expected = prod.astype(en.hifloat8).view(np.uint8)
    np.testing.assert_array_equal(gw[0, :, 0], expected)
    # and through the CANN layer the output descriptor's dtype selects it
    from conftest import acl_problem, read_back, run_acl
    t, p = acl_problem(dy, x, w, b, gw_dtype=pc.ACL_HIFLOAT8)
    assert run_acl(t, pad=0) == 0, pc.aclGetRecentErrMsg()
    np.testing.assert_array_equal(read_back(p["gradWeight"], w.shape, np.uint8)[0, :, 0], expected)
