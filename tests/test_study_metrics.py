"""pyconvtbc.study metrics and grid on hand-made cases whose answers follow from the format definitions.

Expected values come from the formats themselves (SEMANTICS.md section 4, IEEE 754), never from running the code.
"""
import math
import sys

import numpy as np
import pytest

import ml_dtypes

from pyconvtbc import study
from reference import abs_products_ref, conv_tbc_backward_ref, gamma

H = float.fromhex


# ---- ULP error in the output format -------------------------------------------------------------------------
@pytest.mark.parametrize("fmt, ref, comp", [
    ("float32", 1.0, 1.0 + 2.0 ** -23),          # fp32 spacing in [1, 2) is 2^-23
    ("float32", 2.0, 2.0 - 2.0 ** -23),          # below 2 the spacing is still 2^-23
    ("float16", 1.0, 1.0 + 2.0 ** -10),          # fp16: 10 mantissa bits
    ("float16", 2.0, 2.0 - 2.0 ** -10),          # across a binade boundary: one step
    ("float16", 2.0 ** -24, 2.0 * 2.0 ** -24),   # subnormals: 2^-24 apart
    ("bfloat16", 1.0, 1.0 + 2.0 ** -7),          # bf16: 7 mantissa bits
    ("bfloat16", -3.0, -3.0 - 2.0 ** -6),        # [2, 4): spacing 2^-6, sign-symmetric
    ("float8_e4m3fn", 1.0, 1.125),               # e4m3: 3 mantissa bits
    ("float8_e4m3fn", 416.0, 448.0),             # 1.625*256 -> 1.75*256, the largest finite value
    ("hifloat8", 1.0, 1.125),                    # E = 0 class (dot 0001) has 3 mantissa bits
])
def test_one_ulp_off_is_one(fmt, ref, comp):
    m = study.error_metrics(np.array([comp]), np.array([ref]), fmt)
    assert m["ulp_median"] == m["ulp_p99"] == m["ulp_max"] == 1.0
    assert m["max_abs"] == abs(comp - ref)
    assert (m["n_overflow"], m["n_underflow"], m["n_nan"], m["n_inf"]) == (0, 0, 0, 0)


def test_half_ulp_is_half():
    # the exact value halfway between 1 and fp16's next value 1 + 2^-10
    assert study.ulp_errors(np.array([1.0], np.float16), [1.0 + 2.0 ** -11], "float16")[0] == 0.5


def test_hifloat8_ulp_is_distance_in_code_order():
    # Codes from the dot-prefix table: 0x09 = 0|0001|001 = 1.125; 0x41 = 0|10|000|01 = 2^4 * 1.25 = 20;
    # 0x4F = 0|10|011|11 = 2^(4+3) * 1.75 = 224 (exponent sign bit 0: positive); 0x60 = 0|11|0000|0 = 2^8 = 256;
    # 0x61 = 2^8 * 1.5 = 384.
    # Neighbours in code order: 1 -> 1.125, 16 -> 20, 256 -> 384 (one step each, though the gaps are
    # 0.125, 4 and 128), and 224 -> 256 -> 384 are two steps.
    codes = np.array([0x09, 0x41, 0x61, 0x4F], np.uint8)
    ref = np.array([1.0, 16.0, 256.0, 384.0])
    e = study.ulp_errors(codes, ref, "hifloat8")
    assert e.tolist() == [1.0, 1.0, 1.0, 2.0]
    m = study.error_metrics(codes, ref, "hifloat8")
    assert m["ulp_max"] == 2.0 and m["ulp_median"] == 1.0
    assert m["max_abs"] == 160.0                   # |224 - 384|


def test_abs_rel_frobenius():
    ref = np.array([1.0, 2.0, -4.0])
    comp = np.array([1.5, 2.0, -4.0])
    m = study.error_metrics(comp, ref, "float32")
    assert m["max_abs"] == 0.5 and m["max_rel"] == 0.5
    assert m["rel_fro"] == pytest.approx(0.5 / math.sqrt(21.0), rel=1e-15)
    # max_rel skips exact zeros of the reference; max_abs does not
    m = study.error_metrics(np.array([0.125, 2.0]), np.array([0.0, 2.0]), "float32")
    assert m["max_abs"] == 0.125 and m["max_rel"] == 0.0


def test_p99_is_nearest_rank():
    ref = np.ones(1000)
    comp = np.ones(1000, np.float16)
    comp[:15] = 1.0 + 2 * 2.0 ** -10               # 15 elements two fp16 ULPs off: 98.5 % are exact
    m = study.error_metrics(comp, ref, "float16")
    assert (m["ulp_median"], m["ulp_p99"], m["ulp_max"]) == (0.0, 2.0, 2.0)
    comp[5:15] = 1.0                               # 5 off: 99.5 % exact -> the 99th percentile is 0
    m = study.error_metrics(comp, ref, "float16")
    assert (m["ulp_median"], m["ulp_p99"], m["ulp_max"]) == (0.0, 0.0, 2.0)


# ---- overflow, underflow, NaN, Inf ---------------------------------------------------------------------------
def test_overflow_to_inf_counted():
    # fp16's largest finite value is 65504; 65520 is the midpoint to the next power of two and ties go to
    # even = inf.  70000 -> inf is an overflow; 65519 rounding to 65504 is not.
    ref = np.array([70000.0, 65519.0, 65520.0, 1.0])
    comp = np.array([np.inf, 65504.0, np.inf, 1.0], np.float16)
    m = study.error_metrics(comp, ref, "float16")
    assert (m["n_overflow"], m["n_inf"], m["n_nan"], m["n_underflow"]) == (2, 2, 0, 0)
    assert m["max_abs"] == 15.0                    # only the finite results are measured


def test_saturated_overflow_counted():
    # HiFloat8 saturating mode writes 32768 (code 0x6E) for |x| >= 40960: overflow without Inf
    m = study.error_metrics(np.array([0x6E], np.uint8), np.array([50000.0]), "hifloat8")
    assert (m["n_overflow"], m["n_inf"], m["n_nan"]) == (1, 0, 0)
    # 40000 is below the threshold (it rounds to 32768 legitimately): no overflow
    assert study.error_metrics(np.array([0x6E], np.uint8), np.array([40000.0]), "hifloat8")["n_overflow"] == 0


def test_e4m3_overflow_is_nan_and_counted():
    # E4M3FN has no Inf: |x| > 464 gives NaN (464 itself ties to even 448)
    comp = np.array([np.nan, 448.0, 448.0], np.float32).astype(ml_dtypes.float8_e4m3fn)
    m = study.error_metrics(comp, np.array([500.0, 464.0, 460.0]), "float8_e4m3fn")
    assert (m["n_overflow"], m["n_nan"], m["n_inf"]) == (1, 1, 0)


def test_nan_counted_not_as_overflow():
    m = study.error_metrics(np.array([np.nan, 2.0], np.float32), np.array([1.0, 2.0]), "float32")
    assert (m["n_nan"], m["n_overflow"], m["n_inf"]) == (1, 0, 0)
    assert m["max_abs"] == 0.0                     # the NaN is counted, not measured
    m = study.error_metrics(np.array([np.inf], np.float32), np.array([1.0]), "float32")
    assert (m["n_inf"], m["n_overflow"]) == (1, 1)  # infinite result of a finite exact value: overflowed inside
    assert m["max_abs"] is None and m["ulp_max"] is None


def test_underflow_to_zero_counted():
    # HiFloat8: |x| < 2^-23 -> 0 (code 0x00); fp16: anything below half of 2^-24 -> 0
    m = study.error_metrics(np.array([0x00, 0x00, 0x08], np.uint8), np.array([1e-8, 0.0, 1.0]), "hifloat8")
    assert (m["n_underflow"], m["n_overflow"]) == (1, 0)
    m = study.error_metrics(np.array([0.0, 2.0 ** -24], np.float16), np.array([1e-9, 2.0 ** -24]), "float16")
    assert m["n_underflow"] == 1


def test_bad_format_named():
    with pytest.raises(ValueError, match="fmt.*'int8'.*expected"):
        study.error_metrics([1.0], [1.0], "int8")


# ---- reference and grid ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(6, 2, 3, 4, 3, 1), (5, 1, 2, 2, 4, 0), (3, 2, 2, 3, 5, 3), (7, 2, 1, 1, 2, 2)])
def test_reference_matches_the_loop_reference(shape):
    d = study.make_data(shape, seed=3)
    ours = study.reference_gradients(d["grad_output"], d["input"], d["weight"], shape[5])
    theirs = conv_tbc_backward_ref(d["grad_output"], d["input"], d["weight"], shape[5])
    for a, b in zip(ours, theirs):
        np.testing.assert_allclose(a, b, rtol=1e-13, atol=1e-13)


def test_make_data_scales_the_same_samples():
    a = study.make_data("8,2,3,4,3,1", "lognormal:2", 1.0, seed=1)
    b = study.make_data("8,2,3,4,3,1", "lognormal:2", 1e-3, seed=1)
    for k in a:
        np.testing.assert_array_equal(b[k], a[k] * 1e-3)
    assert a["grad_output"].shape == (8, 2, 4)     # T_out = 8 + 2 - 3 + 1


def test_grid_collapses_settings_that_cannot_matter():
    g = study.Grid(cube_math_types=["KEEP_DTYPE"], hf32_roundings=["half_away", "nearest_even"],
                   hf32_mantissa_bits=[10, 11], hif8_roundings=["ta", "hybrid"], saturate=[False, True])
    assert len(g.cells()) == 1                     # FP32 compute, gradWeight float32: nothing else matters
    g = study.Grid(cube_math_types=["USE_HF32"], hf32_roundings=["half_away", "nearest_even"],
                   hf32_mantissa_bits=[10, 11])
    assert len(g.cells()) == 4
    g = study.Grid(cube_math_types=[0], grad_weight_dtypes=["hifloat8", "float8_e4m3fn"],
                   hif8_roundings=["ta", "hybrid"], saturate=[False, True])
    assert len(g.cells()) == 4 + 2                 # e4m3 ignores the HiFloat8 rounding


def test_invalid_cells_are_rows_not_crashes():
    res = study.run_study("8,2,4,4,3,1", {"socs": ["ascend910"], "cube_math_types": ["KEEP_DTYPE", "USE_FP16"],
                                          "input_dtypes": ["float32", "bfloat16"]})
    by = {(r["input_dtype"], r["cube_math_type"]): r["status"] for r in res.rows}
    # SEMANTICS.md section 3: ascend910 has no FP32 cube path and no BF16
    assert by == {("float32", "KEEP_DTYPE"): 161002, ("float32", "USE_FP16"): 0,
                  ("bfloat16", "KEEP_DTYPE"): 161002, ("bfloat16", "USE_FP16"): 161002}
    assert "n/a (161002)" in res.table()


def test_keep_dtype_error_within_fp32_accumulation_bound():
    shape = (16, 4, 8, 8, 3, 1)
    res = study.run_study(shape, {"cube_math_types": ["KEEP_DTYPE"]}, seed=5)
    d = study.make_data(shape, seed=5)
    x = {k: v.astype(np.float32) for k, v in d.items()}
    absgi, absgw, absgb = abs_products_ref(x["grad_output"], x["input"], x["weight"], 1)
    # Higham: an n-term fp32 sum of fp32 products is within gamma_n * sum |a*b| of the exact value
    bounds = {"gradInput": (gamma(3 * 8) * absgi).max(), "gradWeight": (gamma(4 * 16) * absgw).max(),
              "gradBias": (gamma(4 * 16) * absgb).max()}
    for r in res.rows:
        assert r["status"] == 0 and 0 < r["max_abs"] <= bounds[r["grad"]]


def test_bad_api_input_named():
    with pytest.raises(ValueError, match=r"cube_math_types: 'FAST' is not a cubeMathType; expected .*KEEP_DTYPE"):
        study.Grid(cube_math_types=["FAST"])
    with pytest.raises(ValueError, match=r"shapes: .*T_out .* = 0; expected >= 1"):
        study.run_study("2,1,1,1,3,0")
    with pytest.raises(ValueError, match=r"scales: -1.*> 0"):
        study.run_study("8,2,2,2,3,1", scales=[-1])
    with pytest.raises(ValueError, match=r"distribution: 'cauchy'.*normal, uniform, lognormal"):
        study.run_study("8,2,2,2,3,1", distribution="cauchy")


def test_study_import_does_not_import_torch_or_matplotlib():
    import subprocess
    code = ("import sys, pyconvtbc, pyconvtbc.study; "
            "assert 'torch' not in sys.modules and 'matplotlib' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
