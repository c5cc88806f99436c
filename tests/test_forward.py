"""The forward operator aclnnConvTbc through the NumPy layer ``pyconvtbc.conv_tbc``, tested from its written
semantics (the forward's layout and formula, its validation order, its precision rules: operands rounded to
the compute precision C, the bias cast to Bc and used as the accumulator's start, the cube accumulation model
over (k, ci), the output rounding through C; its empty tensors), never from the kernels' own output.

Independent references: ``reference.conv_tbc_ref`` (float64 forward), ``reference.round_operand`` /
``hf32_ref`` / ``fp_cast`` (operand and output rounding written from the rules), ``accum_reference.forward``
(the cube model's fp32 sums, exact on grid-valued data).
"""
import itertools

import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc._kernels import _conv_tbc as KERN

import accum_reference as R
from reference import (CUBE_TABLE, HALF_TINY, UNIT_ROUNDOFF, conv_tbc_ref, fp32_bound, fp_cast, gamma, hf32_ref,
                       round_operand, sums_exact_in_float64)

BF16 = ml_dtypes.bfloat16
# fp16 overflow to +-inf is part of the rules tested here: building the test data (the bias values cast to
# float16) makes NumPy warn; the layer itself does not warn
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")
INVALID, NULLPTR = 161002, 161001
SOCS = ("ascend910b", "ascend950", "ascend910")
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
FORMS = ("cube", "cube_wide", "cube_rz", "sequential")
CMTS = (0, 1, 2, 3)
FMT_DTYPE = {"FP32": np.float32, "FP16": np.float16, "BF16": BF16}
DTYPE_FMT = {"float32": "FP32", "float16": "FP16", "bfloat16": "BF16"}


# ---- the precision rules, written from the forward's semantics ------------------------------------------------
def compute_of(dtype_name, soc, cmt):
    """The compute precision C (SEMANTICS section 3's table); None for an error cell (bfloat16 on ascend910 is a
    data-type error, not in the table)."""
    if dtype_name == "hifloat8":
        return "HIF8"
    return CUBE_TABLE.get((dtype_name, soc), (None,) * 4)[cmt]


def bias_format(dtype_name, soc, cmt):
    """Bc: FLOAT for FLOAT self with cmt 0/1/3 and for HiFloat8 self; FLOAT16 for FLOAT16 self and for any self
    with USE_FP16; BF16 self: FLOAT on ascend910b, BF16 on ascend950; always FLOAT16 on ascend910."""
    if soc == "ascend910":
        return "FP16"
    if dtype_name == "hifloat8":
        return "FP32"
    if cmt == 2 or dtype_name == "float16":
        return "FP16"
    if dtype_name == "bfloat16":
        return "FP32" if soc == "ascend910b" else "BF16"
    return "FP32"


def bias_start(bias, dtype_name, soc, cmt):
    """The accumulator's start: bias cast (RNE) to Bc, widened exactly to fp32; never HF32-rounded."""
    return fp_cast(np.asarray(bias).astype(np.float32), bias_format(dtype_name, soc, cmt))


def output_round(acc, dtype_name, compute, hif8_rounding="ta", saturate=False):
    """F3's output rule: the fp32 accumulator rounded to C when C is FP16 / BF16 (to HiFloat8 codes for HiFloat8
    self), else kept; then cast to out's dtype (= self's)."""
    acc = np.asarray(acc, np.float32)
    if dtype_name == "hifloat8":
        return pc.hif8_encode(acc, rounding=hif8_rounding, saturate=saturate)
    with np.errstate(over="ignore"):
        if compute in ("FP16", "BF16"):
            acc = acc.astype(FMT_DTYPE[compute])
        return acc.astype(DTYPES[dtype_name])


def k0_of(compute, block_size=None):
    if block_size is not None:
        return block_size
    return {"FP32": 8, "HF32": 8, "FP16": 16, "BF16": 16, "HIF8": 32}[compute]


def rounded_operands(x, w, dtype_name, soc, cmt, hf32_rounding="half_away"):
    compute = compute_of(dtype_name, soc, cmt)
    if compute == "HIF8":
        return pc.hif8_decode(x), pc.hif8_decode(w)
    return (round_operand(x, compute, soc, hf32_rounding), round_operand(w, compute, soc, hf32_rounding))


def model(x, w, bias, pad, dtype_name, soc, cmt, form="cube", block_size=None, hf32_rounding="half_away",
          hif8_rounding="ta", saturate=False):
    """The expected bits: the cube model on the rounded operands from the cast bias, then the output rounding.
    Asserts its own precondition (every partial sum exact in float64)."""
    compute = compute_of(dtype_name, soc, cmt)
    xr, wr = rounded_operands(x, w, dtype_name, soc, cmt, hf32_rounding)
    b0 = bias_start(bias, dtype_name, soc, cmt)
    assert sums_exact_in_float64(xr, wr, b0, pad), "test data too wide for the exact model"
    acc = R.forward(xr, wr, b0, pad, form, k0_of(compute, block_size))
    return output_round(acc, dtype_name, compute, hif8_rounding, saturate)


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[a.dtype.itemsize])


def assert_same_bits(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype, got.shape, want.shape)
    bad = bits(got) != bits(want)
    assert not bad.any(), (f"{int(bad.sum())} of {bad.size} elements differ; first at "
                           f"{np.argwhere(bad)[0].tolist()}: got {got[bad][:4]}, want {want[bad][:4]}")


def valid_cells():
    for dn, soc, cmt in itertools.product(DTYPES, SOCS, CMTS):
        if compute_of(dn, soc, cmt) is not None:
            yield dn, soc, cmt


def error_cells():
    for dn, soc, cmt in itertools.product(DTYPES, SOCS, CMTS):
        if compute_of(dn, soc, cmt) is None:
            yield dn, soc, cmt


def normal_problem(T_in, B, Cin, Cout, K, dtype, seed, bias_dtype=None):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T_in, B, Cin)).astype(dtype)
    w = rng.standard_normal((K, Cin, Cout)).astype(dtype)
    b = rng.standard_normal(Cout).astype(bias_dtype or dtype)
    return x, w, b


def grid_problem(shape, dtype_name, seed):
    """Grid-valued operands whose float64 sums are exact.  float32: 13-bit significands (so HF32 and FP16
    rounding change them), magnitudes well inside fp16's normal range; 16-bit inputs: 8-bit significands."""
    T_in, B, Cin, Cout, K, _ = shape
    rng = np.random.default_rng(seed)
    er = dict(bits=13, emin=-12, emax=-9) if dtype_name == "float32" else dict(bits=8, emin=-8, emax=-4)
    dt = DTYPES[dtype_name]
    x = R.grid(rng, (T_in, B, Cin), **er).astype(dt)
    w = R.grid(rng, (K, Cin, Cout), **er).astype(dt)
    b = R.grid(rng, (Cout,), bits=13, emin=-12, emax=-6)   # float32 with 13-bit significands: the cast to Bc shows
    return x, w, b


def raises(status, *fragments, **call):
    """Run conv_tbc(**call); assert AclnnError with ``status`` and every fragment in its message."""
    args = call.pop("args")
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc(*args, **call)
    assert isinstance(e.value, ValueError)
    assert e.value.status == status, (e.value.status, e.value.message)
    for f in fragments:
        assert f in e.value.message, (f, e.value.message)
    return e.value.message


# ---- 1. numerics of every cell against the float64 reference of the rounded operands -------------------------
NUM_SHAPES = [(9, 2, 13, 5, 3, 1), (6, 3, 40, 4, 3, 2)]


@pytest.mark.parametrize("dn,soc,cmt", list(valid_cells()))
@pytest.mark.parametrize("shape", NUM_SHAPES)
def test_numerics_every_cell(dn, soc, cmt, shape):
    T_in, B, Cin, Cout, K, pad = shape
    x, w, b = normal_problem(T_in, B, Cin, Cout, K, DTYPES[dn], seed=sum(shape) + cmt)
    out = pc.conv_tbc(x, w, b, pad, cube_math_type=cmt, soc=soc)
    T_out = T_in + 2 * pad - K + 1
    assert out.shape == (T_out, B, Cout) and out.dtype == np.dtype(DTYPES[dn])
    compute = compute_of(dn, soc, cmt)
    xr, wr = rounded_operands(x, w, dn, soc, cmt)
    b0 = bias_start(b, dn, soc, cmt)
    ref = conv_tbc_ref(xr, wr, b0, pad)
    absprod = conv_tbc_ref(np.abs(xr), np.abs(wr), np.abs(b0), pad)
    # fp32 accumulation of K*Cin products plus the bias (any order, blocks or not: gamma_n), then the output
    # rounding to C (FP16 / BF16) and the cast to out's dtype (e.g. BF16 self with USE_FP16: fp16 then bf16)
    o_fmt = compute if compute in ("FP16", "BF16") else "FP32"
    u1, u2 = UNIT_ROUNDOFF[o_fmt], UNIT_ROUNDOFF[DTYPE_FMT[dn]] if DTYPE_FMT[dn] != o_fmt else 0.0
    eps = (1 + u1) * (1 + u2) - 1
    bound = fp32_bound(K * Cin + 1, absprod, eps, ref) + HALF_TINY[o_fmt] + HALF_TINY[DTYPE_FMT[dn]]
    got = out.astype(np.float64)
    assert np.isfinite(got).all()
    err = np.abs(got - ref)
    assert (err <= bound).all(), f"max err/bound {np.max(err / bound)}"
    if compute == "HF32":
        # the test discriminates: the unrounded operands' exact result is outside the bound somewhere
        raw = conv_tbc_ref(x, w, b0, pad)
        assert (np.abs(got - raw) > bound).any()


@pytest.mark.parametrize("dn,soc,cmt", list(error_cells()))
def test_error_cells_rejected(dn, soc, cmt):
    x, w, b = normal_problem(5, 2, 3, 4, 3, DTYPES[dn], seed=1)
    if dn == "bfloat16":   # a data-type error on ascend910, whatever the cubeMathType
        raises(INVALID, "input", "bfloat16", args=(x, w, b, 1), cube_math_type=cmt, soc=soc)
    else:
        raises(INVALID, "cube_math_type", str(cmt), args=(x, w, b, 1), cube_math_type=cmt, soc=soc)


def test_hf32_options_change_the_operand_rounding():
    """hf32_rounding / hf32_mantissa_bits reach the operand rounding (the bias stays unrounded)."""
    shape = (7, 2, 6, 3, 2, 1)
    x, w, b = grid_problem(shape, "float32", seed=5)
    outs = []
    for rounding, mbits in (("half_away", None), ("nearest_even", None), ("half_away", 10), ("nearest_even", 11)):
        out = pc.conv_tbc(x, w, b, 1, cube_math_type=3, soc="ascend910b", hf32_rounding=rounding,
                          hf32_mantissa_bits=mbits)
        nb = 11 if mbits is None else mbits
        xr, wr = hf32_ref(x, nb, rounding), hf32_ref(w, nb, rounding)
        assert sums_exact_in_float64(xr, wr, b, 1)
        assert_same_bits(out, R.forward(xr, wr, b.astype(np.float32), 1, "cube", 8))
        outs.append(out)
    assert not np.array_equal(outs[0], outs[1]) and not np.array_equal(outs[0], outs[2])


# ---- 2. bit for bit against the model on grid data ---------------------------------------------------------
# (T_in, B, Cin, Cout, K, pad): B = 1 with pad > 0; Cin not a multiple of k0 (8, 16, 32); rows missing taps
# (pad = K - 1: the first and last rows see one tap); Cin across several channel groups; K = 1
BIT_SHAPES = [(7, 1, 5, 3, 3, 1), (6, 2, 19, 4, 4, 3), (5, 2, 37, 3, 2, 0), (4, 3, 11, 2, 1, 0)]


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dn,soc,cmt", list(valid_cells()))
def test_model_bit_for_bit_every_cell(dn, soc, cmt, form):
    for i, shape in enumerate(BIT_SHAPES[:2] if form != "cube" else BIT_SHAPES):
        x, w, b = grid_problem(shape, dn, seed=31 * i + cmt)
        pad = shape[5]
        out = pc.conv_tbc(x, w, b, pad, cube_math_type=cmt, soc=soc, accumulation=form)
        assert_same_bits(out, model(x, w, b, pad, dn, soc, cmt, form))


@pytest.mark.parametrize("block_size", [None, 1, 3, 64])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dn,soc,cmt", [("float32", "ascend910b", 0), ("float32", "ascend950", 3),
                                        ("float16", "ascend910", 1), ("bfloat16", "ascend950", 0),
                                        ("float32", "ascend910b", 2)])
def test_model_bit_for_bit_block_sizes(dn, soc, cmt, form, block_size):
    shape = (9, 2, 21, 5, 3, 2)
    x, w, b = grid_problem(shape, dn, seed=7)
    out = pc.conv_tbc(x, w, b, 2, cube_math_type=cmt, soc=soc, accumulation=form, block_size=block_size)
    assert_same_bits(out, model(x, w, b, 2, dn, soc, cmt, form, block_size))


def k0_problem(dt, k0, Cin_extra=3):
    """K = 1: products +2**24, 2*k0 - 1 ones, -2**24, then zeros.  Cube form: the k0 - 1 ones of the first block
    are lost after 2**24 (2**24 + 1 is a tie, to even); the next k0 ones form a block of their own (sum k0, added
    exactly), so the result is exactly k0; a sequential chain loses every one (0)."""
    Cin = 2 * k0 + 1 + Cin_extra
    x = np.zeros((1, 1, Cin), np.float32)
    w = np.zeros((1, Cin, 1), np.float32)
    x[0, 0, 0], w[0, 0, 0] = 2.0 ** 12, 2.0 ** 12
    x[0, 0, 1:2 * k0], w[0, 1:2 * k0, 0] = 1.0, 1.0
    x[0, 0, 2 * k0], w[0, 2 * k0, 0] = -(2.0 ** 12), 2.0 ** 12
    return x.astype(dt), w.astype(dt)


def order_problem(dt, k0):
    """K = 2, Cin = 2*k0: products +2**24 at (k=0, ci=0), -2**24 at (k=1, ci=0), 1 at (k=0, ci=k0).  Blocks in the
    order (group, tap) with the tap inner: 2**24, -2**24, then 1 -> 1.  With the tap outer (or the sequential
    chain: k outer) the 1 meets 2**24 first and is lost -> 0."""
    x = np.zeros((2, 1, 2 * k0), np.float32)      # pad 0, T_out = 1: row 0 for tap 0, row 1 for tap 1
    w = np.zeros((2, 2 * k0, 1), np.float32)
    x[0, 0, 0], w[0, 0, 0] = 2.0 ** 12, 2.0 ** 12
    x[1, 0, 0], w[1, 0, 0] = -(2.0 ** 12), 2.0 ** 12
    x[0, 0, k0], w[0, k0, 0] = 1.0, 1.0
    return x.astype(dt), w.astype(dt)


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dn,soc,cmt", list(valid_cells()))
def test_k0_and_block_order_every_cell(dn, soc, cmt, form):
    """k0 = 8 for FP32 / HF32 compute, 16 for FP16 / BF16; blocks in (channel group outer, tap inner) order."""
    k0 = k0_of(compute_of(dn, soc, cmt))
    b = np.zeros(1, np.float32)
    x, w = k0_problem(DTYPES[dn], k0)
    out = pc.conv_tbc(x, w, b, 0, cube_math_type=cmt, soc=soc, accumulation=form)
    assert_same_bits(out, model(x, w, b, 0, dn, soc, cmt, form))
    if form in ("cube", "sequential"):
        assert float(out[0, 0, 0]) == (k0 if form == "cube" else 0.0)
    x, w = order_problem(DTYPES[dn], k0)
    out = pc.conv_tbc(x, w, b, 0, cube_math_type=cmt, soc=soc, accumulation=form)
    assert_same_bits(out, model(x, w, b, 0, dn, soc, cmt, form))
    assert float(out[0, 0, 0]) == (0.0 if form == "sequential" else 1.0)


def test_fp16_output_overflow_is_inf():
    """Output rounding to FP16 overflows to +-inf (C = FP16); BF16 does not overflow there."""
    x = np.full((1, 1, 1), 256.0, np.float32)
    w = np.array([[[256.0, -256.0]]], np.float32)
    b = np.zeros(2, np.float32)
    assert pc.conv_tbc(x.astype(np.float16), w.astype(np.float16), b, 0)[0, 0].tolist() == [np.inf, -np.inf]
    assert pc.conv_tbc(x, w, b, 0, cube_math_type=2)[0, 0].tolist() == [np.inf, -np.inf]
    assert pc.conv_tbc(x.astype(BF16), w.astype(BF16), b, 0).astype(np.float32)[0, 0].tolist() == [65536.0,
                                                                                                  -65536.0]
    assert pc.conv_tbc(x, w, b, 0, cube_math_type=3)[0, 0].tolist() == [65536.0, -65536.0]


def test_process_settings_are_the_defaults():
    """None keywords take the process settings: soc from set_soc_version, the emulation options from
    set_emulation_options (the conftest fixture resets both)."""
    x, w = k0_problem(np.float32, 8)
    b = np.zeros(1, np.float32)
    assert pc.conv_tbc(x, w, b, 0)[0, 0, 0] == 8.0
    pc.set_emulation_options(accumulation="sequential")
    assert pc.conv_tbc(x, w, b, 0)[0, 0, 0] == 0.0
    assert pc.conv_tbc(x, w, b, 0, accumulation="cube")[0, 0, 0] == 8.0
    pc.set_emulation_options(accumulation="cube", block_size=4)
    assert_same_bits(pc.conv_tbc(x, w, b, 0), model(x, w, b, 0, "float32", "ascend910b", 0, "cube", 4))
    pc.reset_emulation_options()
    pc.set_soc_version("ascend910")
    raises(INVALID, "cube_math_type", args=(x, w, b, 0))       # KEEP_DTYPE for FLOAT on ascend910
    assert pc.conv_tbc(x, w, b, 0, soc="ascend910b")[0, 0, 0] == 8.0


@pytest.mark.parametrize("name,value", [("accumulation", "foo"), ("block_size", 0), ("block_size", 65),
                                        ("hf32_rounding", "up"), ("hif8_rounding", "down"), ("soc", "ascend999"),
                                        ("num_threads", 0), ("hif8_inputs", 2), ("hif8_inputs", "yes"),
                                        ("hif8_inputs", 1.0), ("order_seed", -1),
                                        ("order_seed", 1.5)])
def test_bad_options_rejected(name, value):
    x, w, b = good()
    raises(INVALID, name, str(value), args=(x, w, b, 1), **{name: value})


def test_hif8_inputs_takes_the_boolean_spellings():
    """hif8_inputs, like deterministic and saturate, takes True / False, 0 / 1 and NumPy booleans and integers."""
    x32, w32, b = grid_problem((7, 3, 5, 4, 3, 1), "float32", seed=2)
    x, w = pc.hif8_encode(x32), pc.hif8_encode(w32)
    ref = pc.conv_tbc(x, w, b, 1, soc="ascend950", hif8_inputs=True)
    assert ref.dtype == np.uint8
    for v in (1, np.True_, np.int64(1)):
        assert_same_bits(pc.conv_tbc(x, w, b, 1, soc="ascend950", hif8_inputs=v), ref)
    off = pc.conv_tbc(x32, w32, b, 1, soc="ascend950")
    for v in (0, np.False_, np.uint8(0)):
        assert_same_bits(pc.conv_tbc(x32, w32, b, 1, soc="ascend950", hif8_inputs=v), off)


def test_order_seed_accepted_and_changes_nothing():
    """The forward takes the backward's emulation keywords, order_seed included (one set serves both calls);
    its sums have no run-to-run order, so a seed changes no bit, on the per-item profiles and ascend950."""
    for soc in ("ascend910b", "ascend950"):
        x, w, b = grid_problem((9, 5, 21, 6, 3, 1), "float32", seed=3)
        ref = pc.conv_tbc(x, w, b, 1, soc=soc)
        for seed in (0, 7, 2**40):
            assert_same_bits(pc.conv_tbc(x, w, b, 1, soc=soc, order_seed=seed), ref)


def test_forms_differ_where_the_model_says_so():
    """Sanity of the bit-exact tests: on fp32 data whose sums round, the forms give different results (so the
    model comparison above can tell the forms apart)."""
    shape = (9, 2, 21, 5, 3, 2)
    x, w, b = grid_problem(shape, "float32", seed=7)
    outs = {f: pc.conv_tbc(x, w, b, 2, accumulation=f) for f in FORMS}
    assert not np.array_equal(bits(outs["cube"]), bits(outs["sequential"]))
    assert not np.array_equal(bits(outs["cube_wide"]), bits(outs["cube_rz"]))


def test_accumulation_from_the_bias_not_added_after():
    """The bias is the start of the fp32 chain: with a bias of 2**24 and products of 1 (fp32 KEEP_DTYPE,
    sequential), each 1 is lost (2**24 + 1 rounds back to even); adding the bias at the end would give
    2**24 + Cin."""
    Cin = 6
    x = np.ones((1, 1, Cin), np.float32)
    w = np.ones((1, Cin, 1), np.float32)
    b = np.array([2.0 ** 24], np.float32)
    out = pc.conv_tbc(x, w, b, 0, accumulation="sequential")
    assert out[0, 0, 0] == 2.0 ** 24
    # the cube form sums the block of Cin ones first (6), then adds it to the bias once
    out = pc.conv_tbc(x, w, b, 0, accumulation="cube")
    assert out[0, 0, 0] == np.float32(2.0 ** 24 + 6)


# ---- 3. fp32 KEEP_DTYPE against torch.conv_tbc -------------------------------------------------------------
@pytest.mark.parametrize("shape", [(12, 3, 16, 8, 3, 1), (20, 2, 64, 7, 5, 2), (5, 1, 3, 2, 1, 0)])
def test_fp32_keep_dtype_against_torch(shape):
    torch = pytest.importorskip("torch")
    T_in, B, Cin, Cout, K, pad = shape
    x, w, b = normal_problem(T_in, B, Cin, Cout, K, np.float32, seed=sum(shape))
    out = pc.conv_tbc(x, w, b, pad, cube_math_type=0)
    t = torch.conv_tbc(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), pad).numpy()
    assert out.shape == t.shape and out.dtype == t.dtype
    # both are fp32 evaluations of the same K*Cin-product dot plus bias: each within gamma_n of the exact value
    absprod = conv_tbc_ref(np.abs(x), np.abs(w), np.abs(b), pad)
    bound = 2 * fp32_bound(K * Cin + 1, absprod)
    assert (np.abs(out.astype(np.float64) - t) <= bound).all()


# ---- 4. the bias rule, bit for bit -------------------------------------------------------------------------
# values chosen to show each cast: 1 + 2**-20 (fp32 only; HF32 would give 1), 1 + 2**-9 (fp16 yes, bf16 -> 1),
# 1 + 2**-7 (all three), 1 + 2**-8 and 1 + 3 * 2**-8 (bf16 ties: to even), 1 + 2**-11 and 1 + 3 * 2**-11 (fp16
# ties), +-70000 (fp16 overflow -> +-inf), 3 * 2**-26 (fp16 subnormal -> 2**-24), -2.5, 2**100 (fp16 inf)
BIAS_VALUES = np.array([1 + 2.0 ** -20, 1 + 2.0 ** -9, 1 + 2.0 ** -7, 1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8,
                        1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 70000.0, -70000.0, 3 * 2.0 ** -26, -2.5, 2.0 ** 100],
                       np.float64)


def bias_cells():
    for dn, soc, cmt in valid_cells():
        for bd in DTYPES:
            yield dn, soc, cmt, bd


@pytest.mark.parametrize("dn,soc,cmt,bd", list(bias_cells()))
def test_bias_rule_zero_input(dn, soc, cmt, bd):
    """With zero input the output is exactly cast(bias -> Bc), then the output rounding, for every bias dtype."""
    b = BIAS_VALUES.astype(DTYPES[bd])
    Cout = b.size
    x = np.zeros((4, 2, 3), DTYPES[dn])
    w = np.ones((2, 3, Cout), DTYPES[dn])
    out = pc.conv_tbc(x, w, b, 1, cube_math_type=cmt, soc=soc)
    start = bias_start(b, dn, soc, cmt)
    want = output_round(np.broadcast_to(start, out.shape), dn, compute_of(dn, soc, cmt))
    assert_same_bits(out, want)


def test_bias_table_examples():
    """A few entries of the Bc table spelled out, independent of bias_format."""
    b = np.array([1 + 2.0 ** -20, 70000.0, 1 + 2.0 ** -9], np.float32)
    z32 = np.zeros((2, 1, 1), np.float32)
    w32 = np.ones((1, 1, 3), np.float32)
    # FLOAT self, USE_HF32: Bc = FLOAT, not HF32-rounded
    assert pc.conv_tbc(z32, w32, b, 0, cube_math_type=3)[0, 0].tolist() == [1 + 2.0 ** -20, 70000.0,
                                                                           1 + 2.0 ** -9]
    # FLOAT self, USE_FP16: Bc = FLOAT16 and the output passes through fp16 (70000 -> inf)
    assert pc.conv_tbc(z32, w32, b, 0, cube_math_type=2)[0, 0].tolist() == [1.0, np.inf, 1 + 2.0 ** -9]
    # FLOAT self on ascend910 (ALLOW_FP32_DOWN_PRECISION): FLOAT16
    assert pc.conv_tbc(z32, w32, b, 0, cube_math_type=1, soc="ascend910")[0, 0].tolist() == [1.0, np.inf,
                                                                                            1 + 2.0 ** -9]
    zb, wb = z32.astype(BF16), w32.astype(BF16)
    # BF16 self on ascend910b: Bc = FLOAT, output rounded to bf16: 1+2**-9 -> 1 (tie to even), 70000 -> 70144
    out = pc.conv_tbc(zb, wb, b, 0, soc="ascend910b")
    assert out[0, 0].astype(np.float32).tolist() == [1.0, 70144.0, 1.0]
    # BF16 self on ascend950: Bc = BF16 (same bits here: bf16 twice is bf16 once)
    out = pc.conv_tbc(zb, wb, b, 0, soc="ascend950")
    assert out[0, 0].astype(np.float32).tolist() == [1.0, 70144.0, 1.0]


def test_bias_bf16_self_start_per_profile():
    """BF16 self: Bc = FLOAT on ascend910b, BF16 on ascend950.  bias 1 + 2**-8 + 2**-16 (bf16: 1 + 2**-7, above the
    tie), one product -2**-9: fp32 start 1 + 2**-9 + 2**-16 -> bf16 1.0; bf16 start 1 + 2**-7 - 2**-9 =
    1 + 3 * 2**-9 -> bf16 1 + 2**-7.  USE_FP16: Bc = FLOAT16, 1 + 2**-8 - 2**-9 = 1 + 2**-9 -> fp16 -> bf16 1.0."""
    b = np.array([1 + 2.0 ** -8 + 2.0 ** -16], np.float32)
    x = np.full((1, 1, 1), -(2.0 ** -4), BF16)
    w = np.full((1, 1, 1), 2.0 ** -5, BF16)
    assert float(pc.conv_tbc(x, w, b, 0, soc="ascend910b")[0, 0, 0]) == 1.0
    assert float(pc.conv_tbc(x, w, b, 0, soc="ascend950")[0, 0, 0]) == 1 + 2.0 ** -7
    for soc in ("ascend910b", "ascend950"):
        assert float(pc.conv_tbc(x, w, b, 0, soc=soc, cube_math_type=2)[0, 0, 0]) == 1.0


def test_bias_not_hf32_rounded_with_products():
    """USE_HF32: operands are HF32-rounded, the bias is not.  bias 1 + 2**-20, one product 2**-10 * 2**-10:
    the exact sum 1 + 2**-19 is an fp32 value; an HF32-rounded bias (1.0) would give 1 + 2**-20."""
    for soc in ("ascend910b", "ascend950"):
        x = np.full((1, 1, 1), 2.0 ** -10, np.float32)
        w = np.full((1, 1, 1), 2.0 ** -10, np.float32)
        b = np.array([1 + 2.0 ** -20], np.float32)
        out = pc.conv_tbc(x, w, b, 0, cube_math_type=3, soc=soc)
        assert out[0, 0, 0] == np.float32(1 + 2.0 ** -19)


# ---- 5. HiFloat8 on ascend950 ------------------------------------------------------------------------------
ALL_CODES = np.arange(256, dtype=np.uint8)
ALL_VALUES = pc.hif8_decode(ALL_CODES)


def hif8_codes(rng, shape, lo=2.0 ** -4, hi=2.0 ** 4):
    """Random HiFloat8 codes (and 0x00) whose values lie in [lo, hi] in magnitude."""
    v = np.abs(ALL_VALUES.astype(np.float64))
    pool = ALL_CODES[(np.isfinite(v) & (v >= lo) & (v <= hi)) | (ALL_CODES == 0)]
    return rng.choice(pool, size=shape).astype(np.uint8)


def test_hif8_codec_spot_values():
    """The codec the oracle uses, on the spec's own examples."""
    assert pc.hif8_decode(np.array([0x41, 0x6E, 0x7E, 0x01, 0x00], np.uint8)).tolist() == [
        20.0, 32768.0, 2.0 ** -15, 2.0 ** -22, 0.0]
    assert np.isinf(pc.hif8_decode(np.array([0x6F], np.uint8))[0])


@pytest.mark.parametrize("cmt", CMTS)
@pytest.mark.parametrize("form", FORMS)
def test_hif8_bit_for_bit(form, cmt):
    """HiFloat8 operands are used as they are (any cubeMathType), k0 = 32, the bias cast to FLOAT, the fp32
    result encoded TA."""
    rng = np.random.default_rng(3 + cmt)
    for shape in ((7, 1, 5, 3, 3, 1), (6, 2, 45, 4, 2, 1)):
        T_in, B, Cin, Cout, K, pad = shape
        x = hif8_codes(rng, (T_in, B, Cin))
        w = hif8_codes(rng, (K, Cin, Cout))
        b = R.grid(rng, (Cout,), bits=10, emin=-8, emax=-2)
        out = pc.conv_tbc(x, w, b, pad, cube_math_type=cmt, soc="ascend950", hif8_inputs=True, accumulation=form)
        assert out.dtype == np.uint8 and out.shape == (T_in + 2 * pad - K + 1, B, Cout)
        if cmt == 2:
            # Bc for HiFloat8 self with USE_FP16 is FLOAT ("HiFloat8 self") or FLOAT16 ("any self with
            # USE_FP16"): the grid bias is exact in both, so the bits agree either way
            assert np.array_equal(fp_cast(b, "FP16"), b)
        assert_same_bits(out, model(x, w, b, pad, "hifloat8", "ascend950", cmt, form))


def cancellation_codes(Cin=64):
    """x, w (K=1) HiFloat8 codes whose products are +2**24, 31 ones, -2**24, then zeros: in fp32 the ones are lost
    when they are chained after 2**24 (2**24 + 1 is a tie, to even), kept when summed in a block of their own."""
    big, one, nbig = pc.hif8_encode(np.array([2.0 ** 12, 1.0, -(2.0 ** 12)], np.float32))
    x = np.zeros((1, 1, Cin), np.uint8)
    x[0, 0, 0], x[0, 0, 1:32], x[0, 0, 32] = big, one, nbig
    w = np.zeros((1, Cin, 1), np.uint8)
    w[0, :33, 0] = big
    w[0, 1:32, 0] = one
    return x, w


@pytest.mark.parametrize("cmt", CMTS)
def test_hif8_bias_is_fp32_for_every_cube_math_type(cmt):
    """HiFloat8 self: Bc = FLOAT.  F3 also says "FLOAT16 ... for any self with USE_FP16"; we read the specific
    clause (HiFloat8 self, whose operands are used as they are with any cubeMathType) as winning for USE_FP16 too.
    bias 1.0625 - 2**-20: from fp32, TA gives 1.0 (0x08, below the tie 1.0625); through fp16 it would be the tie
    1.0625 itself, TA away -> 1.125."""
    x = np.zeros((1, 1, 1), np.uint8)
    w = np.zeros((1, 1, 1), np.uint8)
    b = np.array([1.0625 - 2.0 ** -20], np.float32)
    out = pc.conv_tbc(x, w, b, 0, soc="ascend950", hif8_inputs=True, cube_math_type=cmt)
    assert out[0, 0, 0] == 0x08 and pc.hif8_decode(out)[0, 0, 0] == 1.0


@pytest.mark.parametrize("block_size", [None, 1, 3, 16, 32, 64])
@pytest.mark.parametrize("form", FORMS)
def test_hif8_k0_is_32(form, block_size):
    """8-bit operands: k0 = 32.  With the cancellation data the default cube form gives 0 (the 31 ones share the
    first block with 2**24 and are lost), block_size 16 gives 16 (ones 16..31 form a block of their own)."""
    x, w = cancellation_codes()
    b = np.zeros(1, np.float32)
    out = pc.conv_tbc(x, w, b, 0, soc="ascend950", hif8_inputs=True, accumulation=form, block_size=block_size)
    assert_same_bits(out, model(x, w, b, 0, "hifloat8", "ascend950", 0, form, block_size))
    if form == "cube" and block_size in (None, 32):
        assert out[0, 0, 0] == 0x00
    if form == "cube" and block_size == 16:
        assert out[0, 0, 0] == 0x40                        # 16
    if form == "sequential":
        assert out[0, 0, 0] == 0x00


@pytest.mark.parametrize("block_size", [1, 3, 64])
def test_hif8_block_sizes(block_size):
    rng = np.random.default_rng(block_size)
    x = hif8_codes(rng, (8, 2, 40))
    w = hif8_codes(rng, (3, 40, 3))
    b = R.grid(rng, (3,), bits=10, emin=-8, emax=-2)
    out = pc.conv_tbc(x, w, b, 1, soc="ascend950", hif8_inputs=True, block_size=block_size)
    assert_same_bits(out, model(x, w, b, 1, "hifloat8", "ascend950", 0, "cube", block_size))


@pytest.mark.parametrize("saturate", [False, True])
@pytest.mark.parametrize("rounding", ["ta", "hybrid"])
def test_hif8_against_float64_reference(rounding, saturate):
    """Random codes of the whole finite range: the result lies between the encodings of (exact - bound) and
    (exact + bound), the exact value from the float64 reference of the decoded operands (encoding is monotone),
    for each rounding and saturation option."""
    rng = np.random.default_rng(11)
    T_in, B, Cin, Cout, K, pad = 9, 2, 20, 6, 3, 1
    x = hif8_codes(rng, (T_in, B, Cin), 2.0 ** -10, 2.0 ** 9)
    w = hif8_codes(rng, (K, Cin, Cout), 2.0 ** -10, 2.0 ** 9)
    b = rng.standard_normal(Cout).astype(np.float32) * 100
    out = pc.conv_tbc(x, w, b, pad, soc="ascend950", hif8_inputs=True, hif8_rounding=rounding, saturate=saturate)
    xr, wr = pc.hif8_decode(x), pc.hif8_decode(w)
    ref = conv_tbc_ref(xr, wr, b, pad)
    absprod = conv_tbc_ref(np.abs(xr), np.abs(wr), np.abs(b), pad)
    bnd = gamma(K * Cin + 1) * absprod + 1e-45
    # the accumulator is an fp32 value in [ref - bnd, ref + bnd]; widen to the fp32 neighbours of the ends
    lo = np.nextafter((ref - bnd).astype(np.float32), np.float32(-np.inf))
    hi = np.nextafter((ref + bnd).astype(np.float32), np.float32(np.inf))
    got = pc.hif8_decode(out).astype(np.float64)
    if rounding == "ta":
        # TA is monotone: the result lies between the encodings of the interval's ends
        enc = dict(rounding=rounding, saturate=saturate)
        dlo = pc.hif8_decode(pc.hif8_encode(lo, **enc)).astype(np.float64)
        dhi = pc.hif8_decode(pc.hif8_encode(hi, **enc)).astype(np.float64)
    else:
        # hybrid rounds each value to one of its two HiFloat8 neighbours (not monotone): the result lies between
        # the value below lo and the value above hi (+-Inf beyond 32768; +-32768 when saturating)
        top = 32768.0 if saturate else np.inf
        grid_ = np.unique(np.concatenate([ALL_VALUES[np.isfinite(ALL_VALUES)].astype(np.float64), [-top, top]]))
        dlo = grid_[np.maximum(np.searchsorted(grid_, lo.astype(np.float64), side="right") - 1, 0)]
        dhi = grid_[np.minimum(np.searchsorted(grid_, hi.astype(np.float64), side="left"), grid_.size - 1)]
    assert ((dlo <= got) & (got <= dhi)).all()
    assert (np.abs(ref) > 40960).any(), "the data should reach the overflow range"
    if saturate:
        assert np.isfinite(got).all() and (np.abs(got) == 32768).any()
    else:
        assert np.isinf(got).any()


def test_hif8_overflow_saturate_and_hybrid_spot_values():
    """256 * 256 = 65536 >= 40960: +-Inf (0x6F / 0xEF) by default, +-32768 (0x6E / 0xEE) saturating.
    4 * 4 = 16: TA 0x40 (16), hybrid 0x41 (20, the literal HR rule moves exact values up one step)."""
    c = pc.hif8_encode(np.array([256.0, -256.0, 4.0, 1.0], np.float32))
    assert pc.hif8_decode(c).tolist() == [256.0, -256.0, 4.0, 1.0]
    x = np.array([[[c[0]]], [[c[2]]]], np.uint8)          # (T_in=2, B=1, Cin=1): 256, then 4
    w = np.array([[[c[0], c[1]]]], np.uint8)              # (K=1, Cin=1, Cout=2): 256, -256
    w4 = np.array([[[c[2], c[3]]]], np.uint8)             # 4, 1
    b = np.zeros(2, np.float32)
    out = pc.conv_tbc(x, w, b, 0, soc="ascend950", hif8_inputs=True)
    assert out[0, 0].tolist() == [0x6F, 0xEF]
    out = pc.conv_tbc(x, w, b, 0, soc="ascend950", hif8_inputs=True, saturate=True)
    assert out[0, 0].tolist() == [0x6E, 0xEE]
    out = pc.conv_tbc(x, w4, b, 0, soc="ascend950", hif8_inputs=True)
    assert out[1, 0].tolist() == [0x40, pc.hif8_encode(np.array([4.0], np.float32))[0]]
    out = pc.conv_tbc(x, w4, b, 0, soc="ascend950", hif8_inputs=True, hif8_rounding="hybrid")
    assert out[1, 0, 0] == 0x41


def test_none_before_hif8_profile_rule():
    w = np.full((2, 2, 3), 0x08, np.uint8)
    raises(NULLPTR, "input", args=(None, w, np.zeros(3, np.float32), 0), soc="ascend910b", hif8_inputs=True)


@pytest.mark.parametrize("soc", ["ascend910b", "ascend910"])
def test_hif8_inputs_other_profiles_rejected(soc):
    x = np.full((4, 1, 2), 0x08, np.uint8)
    w = np.full((2, 2, 3), 0x08, np.uint8)
    raises(INVALID, args=(x, w, np.zeros(3, np.float32), 0), soc=soc, hif8_inputs=True)


def test_hif8_wrong_arrays():
    """uint8 arrays without hif8_inputs, and float arrays with it, are data-type errors; weight must match."""
    x = np.full((4, 1, 2), 0x08, np.uint8)
    w = np.full((2, 2, 3), 0x08, np.uint8)
    b = np.zeros(3, np.float32)
    raises(INVALID, "input", args=(x, w, b, 0), soc="ascend950")
    raises(INVALID, "weight", args=(x, w.astype(np.float32), b, 0), soc="ascend950", hif8_inputs=True)
    raises(INVALID, "bias", args=(x, w, b.view(np.uint32), 0), soc="ascend950", hif8_inputs=True)


def test_hif8_inputs_with_float_arrays_rejected():
    x = np.ones((4, 1, 2), np.float32)
    w = np.ones((2, 2, 3), np.float32)
    raises(INVALID, "input", args=(x, w, np.zeros(3, np.float32), 0), soc="ascend950", hif8_inputs=True)


# ---- 6. empty tensors ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dn", list(DTYPES))
def test_empty_out_gives_empty_result(dn):
    dt = DTYPES[dn]
    # B = 0 (input and out empty), Cout = 0 (weight, bias and out empty), T_in = 0 with T_out = 0
    for x, w, b, pad, shape in (
            (np.ones((5, 0, 3), dt), np.ones((3, 3, 4), dt), np.ones(4, dt), 1, (5, 0, 4)),
            (np.ones((5, 2, 3), dt), np.ones((3, 3, 0), dt), np.ones(0, dt), 1, (5, 2, 0)),
            (np.ones((0, 2, 3), dt), np.ones((3, 3, 4), dt), np.ones(4, dt), 1, (0, 2, 4))):
        out = pc.conv_tbc(x, w, b, pad)
        assert out.shape == shape and out.dtype == np.dtype(dt) and out.size == 0


@pytest.mark.parametrize("dn,soc,cmt", list(valid_cells()))
def test_empty_input_or_weight_gives_cast_bias(dn, soc, cmt):
    """self or weight empty, out not: the empty sum plus bias, through the same output rounding.  T_in = 0 is
    allowed with any K (the T_in + pad >= K rule only applies to a non-empty self)."""
    dt = DTYPES[dn]
    b = BIAS_VALUES.astype(np.float32)
    Cout = b.size
    cases = ((np.ones((4, 2, 0), dt), np.ones((3, 0, Cout), dt), 1, (4, 2, Cout)),     # Cin = 0
             (np.ones((0, 2, 3), dt), np.ones((3, 3, Cout), dt), 2, (2, 2, Cout)),     # T_in = 0, T_out = 2
             (np.ones((0, 1, 3), dt), np.ones((1, 3, Cout), dt), 1, (2, 1, Cout)))     # T_in = 0, K = 1
    want_row = output_round(bias_start(b, dn, soc, cmt), dn, compute_of(dn, soc, cmt))
    for x, w, pad, shape in cases:
        out = pc.conv_tbc(x, w, b, pad, cube_math_type=cmt, soc=soc)
        assert_same_bits(out, np.broadcast_to(want_row, shape))


def test_empty_hif8_input_gives_encoded_bias():
    b = np.array([1.0, 20.0, 50000.0, 3.3], np.float32)
    x = np.zeros((3, 2, 0), np.uint8)
    w = np.zeros((2, 0, 4), np.uint8)
    out = pc.conv_tbc(x, w, b, 0, soc="ascend950", hif8_inputs=True)
    assert_same_bits(out, np.broadcast_to(pc.hif8_encode(b), (2, 2, 4)))


def test_k_zero_rejected():
    x = np.ones((4, 2, 3), np.float32)
    raises(INVALID, "weight", args=(x, np.ones((0, 3, 4), np.float32), np.ones(4, np.float32), 0))
    raises(INVALID, "weight", args=(x[:0], np.ones((0, 3, 4), np.float32), np.ones(4, np.float32), 0))


def test_negative_t_out_rejected():
    """An empty self with 2*pad < K - 1 gives T_out < 0: no output shape can satisfy out.shape == (T_out, B,
    Cout), so the call is invalid (not an empty result)."""
    raises(INVALID, "input has T_in = 0", "weight K = 3", "T_out", "-2",     # names the arguments
           args=(np.ones((0, 2, 3), np.float32), np.ones((3, 3, 4), np.float32), np.ones(4, np.float32), 0))


# ---- 7. validation rules and their order ---------------------------------------------------------------------
def good(dt=np.float32, T_in=6, B=2, Cin=3, Cout=4, K=3):
    return [np.ones((T_in, B, Cin), dt), np.ones((K, Cin, Cout), dt), np.ones(Cout, dt)]


def test_valid_problem_passes():
    x, w, b = good()
    out = pc.conv_tbc(x, w, b, 1)
    assert out.shape == (6, 2, 4)      # 1 + 3 taps * 3 channels inside, 1 + 2 taps * 3 channels at the edges
    assert (out[1:-1] == 10).all() and (out[0] == 7).all() and (out[-1] == 7).all()


@pytest.mark.parametrize("i,name", [(0, "input"), (1, "weight"), (2, "bias")])
def test_none_each_argument(i, name):
    args = good() + [1]
    args[i] = None
    raises(NULLPTR, name, "None", args=tuple(args))


def test_none_order():
    x, w, b = good()
    raises(NULLPTR, "input", args=(None, None, None, 1))
    raises(NULLPTR, "weight", args=(x, None, None, 1))
    # None is checked before every other rule (a later argument's wrong type, a bad pad, a bad cube)
    raises(NULLPTR, "bias", args=([[[1.0]]], w.astype(np.float64), None, 999), cube_math_type=9)


@pytest.mark.parametrize("i,name", [(0, "input"), (1, "weight"), (2, "bias")])
def test_not_an_array(i, name):
    args = good() + [1]
    args[i] = args[i].tolist()
    raises(INVALID, name, "list", args=tuple(args))


@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("dn", list(DTYPES))
def test_dtypes(soc, dn):
    dt = DTYPES[dn]
    x, w, b = good(dt)
    if (dn, soc) == ("bfloat16", "ascend910"):
        raises(INVALID, "input", "bfloat16", args=(x, w, b, 1), soc=soc)
        return
    cmt = 1 if soc == "ascend910" and dn == "float32" else 0
    pc.conv_tbc(x, w, b, 1, soc=soc, cube_math_type=cmt)
    # bias: any of the three floats, on every profile, whatever the input's dtype
    for bd in DTYPES.values():
        pc.conv_tbc(x, w, b.astype(bd), 1, soc=soc, cube_math_type=cmt)
    # weight must equal input's dtype
    for other in list(DTYPES.values()) + [np.float64]:
        if np.dtype(other) != np.dtype(dt):
            raises(INVALID, "weight", str(np.dtype(other)), args=(x, w.astype(other), b, 1), soc=soc,
                   cube_math_type=cmt)
    for bad in (np.float64, np.int32, np.uint8, np.complex64, ml_dtypes.float8_e4m3fn):
        raises(INVALID, "bias", str(np.dtype(bad)), args=(x, w, b.astype(bad), 1), soc=soc, cube_math_type=cmt)
        raises(INVALID, "input", str(np.dtype(bad)), args=(x.astype(bad), w.astype(bad), b, 1), soc=soc,
               cube_math_type=cmt)


def test_dtype_rule_before_rank_rule():
    x, w, b = good()
    raises(INVALID, "weight", "float64", args=(x, w.astype(np.float64)[0], b, 1))
    raises(INVALID, "bias", "int32", args=(x[0], w, b.astype(np.int32), 1))


@pytest.mark.parametrize("i,name,bad_shape", [(0, "input", (6, 2)), (0, "input", (6, 2, 3, 1)),
                                              (1, "weight", (3, 3)), (1, "weight", (1, 3, 3, 4)),
                                              (2, "bias", (1, 4)), (2, "bias", ())])
def test_ranks(i, name, bad_shape):
    args = good() + [1]
    args[i] = np.ones(bad_shape, np.float32)
    raises(INVALID, name, f"{len(bad_shape)} dims", args=tuple(args))


def test_rank_rule_before_shape_rules():
    x, w, b = good()
    # bias of rank 2 and a Cin mismatch: the rank rule wins
    raises(INVALID, "bias", args=(x, np.ones((3, 5, 4), np.float32), b[None], 1))


def test_shape_rules_in_order():
    x, w, b = good()
    # Cin mismatch (input[2] != weight[1]) before bias length
    msg = raises(INVALID, "input", "weight", "3", "5", args=(x, np.ones((3, 5, 4), np.float32),
                                                              np.ones(7, np.float32), 1))
    assert "bias" not in msg
    # bias length != Cout
    raises(INVALID, "bias", "7", "4", args=(x, w, np.ones(7, np.float32), 1))
    # bias length before K >= 1 (K = 0 with a wrong bias)
    raises(INVALID, "bias", args=(x, np.ones((0, 3, 4), np.float32), np.ones(7, np.float32), 1))
    # K >= 1 before the pad range
    msg = raises(INVALID, "weight", "K", args=(x, np.ones((0, 3, 4), np.float32), b, 256))
    assert "pad" not in msg
    # pad range before T_in + pad >= K
    raises(INVALID, "pad", "256", args=(x[:1], w, b, 256))
    raises(INVALID, "pad", "-1", args=(x[:1], w, b, -1))


@pytest.mark.parametrize("pad", [256, -1, 1000, -300])
def test_pad_out_of_range(pad):
    x, w, b = good()
    raises(INVALID, f"pad is {pad}", "255", args=(x, w, b, pad))


@pytest.mark.parametrize("pad", [1.0, 1.5, "1", True, None, np.float32(1)])
def test_pad_not_an_int(pad):
    x, w, b = good()
    raises(INVALID, f"pad is {pad!r}" if isinstance(pad, str) else "pad is", args=(x, w, b, pad))


def test_pad_range_ends_accepted():
    x, w, b = good(K=3)
    assert pc.conv_tbc(x, w, b, 0).shape == (4, 2, 4)
    assert pc.conv_tbc(x, w, b, 255).shape == (6 + 510 - 2, 2, 4)
    assert pc.conv_tbc(x, w, b, np.int64(2)).shape == (8, 2, 4)


def test_pad_counted_once():
    """CANN checks T_in + pad >= K (pad counted once): T_in=1, K=3, pad=1 is rejected although T_out = 1 and
    torch.conv_tbc accepts it; T_in=1, K=3, pad=2 passes."""
    x, w, b = good(T_in=1, K=3)
    raises(INVALID, "T_in", "pad", "K = 3", args=(x, w, b, 1))
    out = pc.conv_tbc(x, w, b, 2)
    assert out.shape == (3, 2, 4)
    x, w, b = good(T_in=2, K=3)
    assert pc.conv_tbc(x, w, b, 1).shape == (2, 2, 4)
    raises(INVALID, args=(x, w, b, 0))


def test_pad_counted_once_torch_accepts():
    torch = pytest.importorskip("torch")
    x, w, b = good(T_in=1, K=3)
    assert tuple(torch.conv_tbc(torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b), 1).shape) \
        == (1, 2, 4)
    raises(INVALID, args=(x, w, b, 1))


def test_shape_rules_before_cube_math_type():
    x, w, b = good(T_in=1, K=3)
    # T_in + pad < K and a bad cubeMathType: the shape rule wins (it does not name cube_math_type)
    msg = raises(INVALID, args=(x, w, b, 1), cube_math_type=5)
    assert "cube_math_type" not in msg
    x, w, b = good()
    msg = raises(INVALID, "pad", args=(x, w, b, 300), cube_math_type=5)
    assert "cube_math_type" not in msg


@pytest.mark.parametrize("cmt", [4, 5, -1, 100])
def test_cube_math_type_out_of_range(cmt):
    """4 is rejected too (CANN's forward computes it as 0; we reject it)."""
    x, w, b = good()
    raises(INVALID, f"cube_math_type is {cmt}", args=(x, w, b, 1), cube_math_type=cmt)


@pytest.mark.parametrize("cmt", [1.0, "0", None, True, 0.5])
def test_cube_math_type_not_an_int(cmt):
    x, w, b = good()
    raises(INVALID, "cube_math_type", args=(x, w, b, 1), cube_math_type=cmt)


def test_cube_math_type_enum_members_accepted():
    x, w, b = good()
    for c in (pc.KEEP_DTYPE, pc.ALLOW_FP32_DOWN_PRECISION, pc.USE_FP16, pc.USE_HF32):
        assert pc.conv_tbc(x, w, b, 1, cube_math_type=c).shape == (6, 2, 4)


def test_validation_is_side_effect_free_for_the_inputs():
    x, w, b = good()
    x0, w0, b0 = x.copy(), w.copy(), b.copy()
    pc.conv_tbc(x, w, b, 1)
    with pytest.raises(pc.AclnnError):
        pc.conv_tbc(x, w, b, 1, cube_math_type=7)
    assert np.array_equal(x, x0) and np.array_equal(w, w0) and np.array_equal(b, b0)


# ---- 8. non-contiguous inputs -------------------------------------------------------------------------------
def strided_variants(x, w, b):
    """(x', w', b') views holding the same values as x, w, b, with other strides."""
    T_in, B, Cin = x.shape
    K, _, Cout = w.shape
    # slices of larger arrays (step 2 in every dim)
    bigx = np.zeros((2 * T_in, 2 * B, 2 * Cin), x.dtype)
    bigx[::2, ::2, ::2] = x
    bigw = np.zeros((K, 3 * Cin, 2 * Cout), w.dtype)
    bigw[:, 1::3, ::2] = w
    bigb = np.zeros(3 * Cout, b.dtype)
    bigb[::3] = b
    yield bigx[::2, ::2, ::2], bigw[:, 1::3, ::2], bigb[::3]
    # transposes of arrays stored in other orders (Fortran order, B-major, Cout-major)
    yield (np.ascontiguousarray(x.transpose(1, 0, 2)).transpose(1, 0, 2),
           np.asfortranarray(w), np.ascontiguousarray(b))
    yield (np.asfortranarray(x), np.ascontiguousarray(w.transpose(2, 1, 0)).transpose(2, 1, 0), b)
    # negative strides
    yield (np.ascontiguousarray(x[::-1, ::-1, ::-1])[::-1, ::-1, ::-1],
           np.ascontiguousarray(w[:, ::-1])[:, ::-1], np.ascontiguousarray(b[::-1])[::-1])


@pytest.mark.parametrize("dn,soc,cmt", [("float32", "ascend910b", 0), ("float32", "ascend910b", 3),
                                        ("float16", "ascend950", 0), ("bfloat16", "ascend910b", 2)])
def test_non_contiguous_inputs_same_bits(dn, soc, cmt):
    x, w, b = normal_problem(7, 3, 9, 5, 3, DTYPES[dn], seed=4)
    ref = pc.conv_tbc(x, w, b, 1, cube_math_type=cmt, soc=soc)
    assert ref.flags.c_contiguous
    for xv, wv, bv in strided_variants(x, w, b):
        assert np.array_equal(xv, x) and np.array_equal(wv, w) and np.array_equal(bv, b)
        out = pc.conv_tbc(xv, wv, bv, 1, cube_math_type=cmt, soc=soc)
        assert out.flags.c_contiguous
        assert not any(np.shares_memory(out, a) for a in (xv, wv, bv))
        assert_same_bits(out, ref)


def test_zero_stride_inputs_same_bits():
    rng = np.random.default_rng(8)
    row = rng.standard_normal((1, 1, 6)).astype(np.float32)
    xz = np.broadcast_to(row, (5, 3, 6))               # strides (0, 0, 4)
    wrow = rng.standard_normal((2, 6, 1)).astype(np.float32)
    wz = np.broadcast_to(wrow, (2, 6, 4))              # a zero stride in Cout
    bz = np.broadcast_to(np.float32(0.25), (4,))       # a zero stride
    assert 0 in xz.strides and 0 in wz.strides and bz.strides == (0,)
    for cmt in (0, 2):
        out = pc.conv_tbc(xz, wz, bz, 1, cube_math_type=cmt)
        ref = pc.conv_tbc(np.ascontiguousarray(xz), np.ascontiguousarray(wz), np.ascontiguousarray(bz), 1,
                          cube_math_type=cmt)
        assert_same_bits(out, ref)
        assert out.flags.c_contiguous and out.flags.writeable


def test_hif8_non_contiguous_same_bits():
    rng = np.random.default_rng(12)
    x = hif8_codes(rng, (6, 2, 5))
    w = hif8_codes(rng, (2, 5, 3))
    b = np.ones(3, np.float32)
    ref = pc.conv_tbc(x, w, b, 1, soc="ascend950", hif8_inputs=True)
    for xv, wv, bv in strided_variants(x, w, b):
        assert_same_bits(pc.conv_tbc(xv, wv, bv, 1, soc="ascend950", hif8_inputs=True), ref)


def test_misaligned_views_same_bits():
    x, w, b = normal_problem(6, 2, 5, 3, 2, np.float32, seed=9)
    ref = pc.conv_tbc(x, w, b, 1)
    views = []
    for a in (x, w, b):
        raw = np.zeros(a.nbytes + 1, np.uint8)
        raw[1:] = a.view(np.uint8).ravel()
        views.append(np.frombuffer(raw.data, dtype=a.dtype, count=a.size, offset=1).reshape(a.shape))
    assert not any(v.flags.aligned for v in views)
    assert_same_bits(pc.conv_tbc(*views, 1), ref)


def test_result_is_new_each_call():
    x, w, b = good()
    a = pc.conv_tbc(x, w, b, 1)
    c = pc.conv_tbc(x, w, b, 1)
    assert not np.shares_memory(a, c)
    a[...] = 0
    assert (c != 0).all()


# ---- 9. determinism across threads and instruction-set paths -----------------------------------------------
ISAS = KERN.isas()                  # every instruction set this CPU and build run, portable first


@pytest.fixture
def forced_threading():
    old = KERN._set_parallel_min(0)
    yield
    KERN._set_parallel_min(old)
    KERN._set_isa(None)


DET_CELLS = [("float32", "ascend910b", 0, "cube"), ("float32", "ascend950", 3, "cube"),
             ("float32", "ascend910b", 2, "sequential"), ("float16", "ascend910", 0, "cube_wide"),
             ("bfloat16", "ascend950", 1, "cube_rz"), ("hifloat8", "ascend950", 0, "cube")]


# at least 6 rows per time step: the kernels take the rows that lack taps one time step at a time
@pytest.mark.parametrize("shape", [(9, 7, 70, 20, 5, 2), (7, 6, 12, 9, 4, 3), (40, 6, 12, 9, 25, 12),
                                   (5, 13, 40, 10, 7, 4)])
@pytest.mark.parametrize("form", ["cube", "cube_wide"])
def test_rows_missing_taps_many_rows_per_step(forced_threading, shape, form):
    T_in, B, Cin, Cout, K, pad = shape
    x, w, b = grid_problem(shape, "float32", seed=sum(shape))
    want = model(x, w, b, pad, "float32", "ascend910b", 0, form)
    for isa in ISAS:
        KERN._set_isa(isa)
        for n in (1, 3):
            assert_same_bits(pc.conv_tbc(x, w, b, pad, num_threads=n, soc="ascend910b", accumulation=form), want)


@pytest.mark.parametrize("dn,soc,cmt,form", DET_CELLS)
def test_deterministic_across_threads_and_isas(forced_threading, dn, soc, cmt, form):
    rng = np.random.default_rng(21)
    shape = (17, 3, 37, 21, 3, 1)
    T_in, B, Cin, Cout, K, pad = shape
    kw = dict(cube_math_type=cmt, soc=soc, accumulation=form)
    if dn == "hifloat8":
        x, w = hif8_codes(rng, (T_in, B, Cin)), hif8_codes(rng, (K, Cin, Cout))
        b = rng.standard_normal(Cout).astype(np.float32)
        kw["hif8_inputs"] = True
    else:
        x, w, b = normal_problem(T_in, B, Cin, Cout, K, DTYPES[dn], seed=21)
    KERN._set_isa(None)
    ref = pc.conv_tbc(x, w, b, pad, num_threads=1, **kw)
    for isa in ISAS:
        KERN._set_isa(isa)
        for n in (1, 2, 3, 4):
            assert_same_bits(pc.conv_tbc(x, w, b, pad, num_threads=n, **kw), ref)
        assert_same_bits(pc.conv_tbc(x, w, b, pad, **kw), ref)          # the default thread count
    KERN._set_isa(None)
    if dn != "hifloat8":
        # and the bits are the model's on grid data of the same shape
        x, w, b = grid_problem(shape, dn, seed=22)
        for isa in ISAS:
            KERN._set_isa(isa)
            assert_same_bits(pc.conv_tbc(x, w, b, pad, num_threads=3, **kw),
                             model(x, w, b, pad, dn, soc, cmt, form))




# Signed zeros: every product underflows (2^-100 * 2^-100 = 2^-200) or is an exact zero, so each result is a zero
# whose sign the rules decide: a block sum is an FMA chain from +0 (an underflowing negative product makes it
# -0, an exact -0 product does not), then added to the accumulator started at the bias.  Shapes with full
# vector tiles and whole blocks, so the unrolled block kernels run too.
@pytest.mark.parametrize("shape", [(8, 6, 40, 64, 3, 1), (5, 7, 24, 32, 2, 0), (4, 3, 9, 5, 3, 2)])
@pytest.mark.parametrize("dn,soc,cmt", [("float32", "ascend910b", 0), ("float32", "ascend910b", 3),
                                        ("bfloat16", "ascend950", 0)])
@pytest.mark.parametrize("form", ["cube", "cube_wide", "sequential"])
def test_signed_zero_results_on_every_isa(forced_threading, shape, dn, soc, cmt, form):
    T_in, B, Cin, Cout, K, pad = shape
    rng = np.random.default_rng(sum(shape) + cmt)
    tiny = np.float32(2.0 ** -100)

    def draw(*dims):
        return (rng.choice([-1, 1], dims) * (rng.random(dims) < 0.9) * tiny).astype(np.float32)
    x, w = draw(T_in, B, Cin).astype(DTYPES[dn]), draw(K, Cin, Cout).astype(DTYPES[dn])
    b = np.where(rng.random(Cout) < 0.5, np.float32(-0.0), np.float32(0.0)).astype(np.float32)
    b[0] = -0.0
    x[:, :, :] = np.abs(x)              # every product of weight column co = 0 has weight's sign there ...
    w[:, :, 0] = -np.abs(w[:, :, 0])
    w[0, 0, 0] = -tiny                  # ... and at least one underflows negative
    want = model(x, w, b, pad, dn, soc, cmt, form)
    assert (want == 0).all()
    signs = np.signbit(want.astype(np.float32))
    assert signs.any() and not signs.all()                   # both zeros occur: the case is not vacuous
    if form != "sequential":
        # output column 0: a -0 bias plus blocks that are -0 (underflow) or +0 (no product): -0 + -0 = -0 and
        # -0 + +0 = +0, so a row with every block -0 gives -0
        x1 = np.full((T_in, B, Cin), tiny, np.float32).astype(DTYPES[dn])
        w1 = np.full((K, Cin, Cout), -tiny, np.float32).astype(DTYPES[dn])
        got = pc.conv_tbc(x1, w1, np.full(Cout, -0.0, np.float32), 0 if T_in >= K else pad, soc=soc,
                          cube_math_type=cmt, accumulation=form)
        assert np.signbit(got.astype(np.float32)).all()
    for isa in ISAS:
        KERN._set_isa(isa)
        for n in (1, 2):
            assert_same_bits(pc.conv_tbc(x, w, b, pad, num_threads=n, soc=soc, cube_math_type=cmt,
                                         accumulation=form), want)
