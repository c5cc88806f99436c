"""Underflow-honest metrics, the magnitude view, amax scaling, the scale window, HF32 what-if widths and repeats.

Expected values follow from the format definitions (E4M3FN: smallest subnormal 2^-9, smallest normal 2^-6,
largest 448, overflow past 464; HiFloat8: smallest subnormal 2^-22, smallest normal 2^-15), from the float64
reference of tests/reference.py, or from textbook statistics; never from running the study code.
"""
import math

import numpy as np
import pytest

import pyconvtbc
from pyconvtbc import study
from reference import conv_tbc_backward_ref
from study_tables import comments

E4M3_MIN_SUB, E4M3_MIN_NORMAL, E4M3_MAX = 2.0 ** -9, 2.0 ** -6, 448.0


# ---- metrics that cannot look good when a tensor underflowed ----------------------------------------------------
def test_flushed_elements_are_counted_and_left_out_of_ulps():
    # 3 exact values below half of E4M3FN's smallest subnormal (flushed to 0) and one exactly representable
    ref = np.array([2.0 ** -12, -2.0 ** -13, 2.0 ** -11, 1.0])
    comp = np.array([0.0, 0.0, 0.0, 1.0])
    m = study.error_metrics(comp, ref, "float8_e4m3fn")
    assert m["n_ulp"] == 1 and m["ulp_median"] == 0.0 and m["ulp_max"] == 0.0
    assert m["frac_underflow"] == 0.75 and m["n_underflow"] == 3
    assert m["frac_subnormal"] == 0.75          # the three are below 2^-6 too
    assert m["rel_median"] == 1.0               # median of (1, 1, 1, 0)
    assert m["frac_overflow"] == 0.0


def test_a_fully_underflowed_tensor_has_no_error_statistics():
    ref = np.full(100, 2.0 ** -11)              # every value flushes in E4M3FN
    m = study.error_metrics(np.zeros(100), ref, "float8_e4m3fn")
    assert m["n_ulp"] == 0 and m["ulp_median"] is None and m["ulp_p99"] is None
    # no metric is a number for an all-flushed population (|0 - r| would read as a tiny error); unf% says why
    assert m["frac_underflow"] == 1.0 and m["rel_median"] is None and m["rel_fro"] is None
    assert m["max_abs"] is None and m["max_rel"] is None


def test_subnormal_share_against_the_smallest_normal():
    # HiFloat8's smallest normal is 2^-15: 2^-16 and 2^-20 lie below it, 2^-15 and 1 do not
    ref = np.array([2.0 ** -16, 2.0 ** -20, 2.0 ** -15, 1.0])
    m = study.error_metrics(ref.astype(np.float32), ref, "float32")     # exact results
    assert m["frac_subnormal"] == 0.0             # none is below fp32's 2^-126
    codes = np.array([0x00, 0x00, 0x00, 0x08], np.uint8)               # any codes: the share is of r
    assert study.error_metrics(codes, ref, "hifloat8")["frac_subnormal"] == 0.5


def test_percentages_never_round_to_0_or_100():
    from pyconvtbc.study.table import _fmt_value
    assert _fmt_value("frac_underflow", 24573 / 24576) == "99.99%"
    assert _fmt_value("frac_underflow", 99999 / 100000) == ">99.99%"
    assert _fmt_value("frac_underflow", 1 / 1e6) == "<0.01%"
    assert _fmt_value("frac_underflow", 1.0) == "100%" and _fmt_value("frac_overflow", 0.0) == "0%"


# ---- the magnitude view -----------------------------------------------------------------------------------------
def test_magnitude_profile_against_e4m3_limits():
    vals = [0.0, 2.0 ** -11, -2.0 ** -8, 1.0, 500.0]     # zero, flushed, subnormal, normal, overflow
    p = study.magnitude_profile(vals, "float8_e4m3fn")
    assert (p["n"], p["n_zero"]) == (5, 1)
    assert (p["frac_flushed"], p["frac_subnormal"], p["frac_normal"], p["frac_overflow"]) == (0.25,) * 4
    assert (p["min_nonzero"], p["max"]) == (2.0 ** -11, 500.0)
    lim = study.format_limits("float8_e4m3fn")
    assert lim == {"smallest_subnormal": E4M3_MIN_SUB, "smallest_normal": E4M3_MIN_NORMAL,
                   "largest_finite": E4M3_MAX, "overflow_threshold": 464.0}


def test_study_rows_and_magnitude_table_carry_the_fractions():
    res = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["float8_e4m3fn"]},
                          scales=[1e-4], grads=["gw"])
    (row,) = res.rows
    assert row["frac_underflow"] == 1.0 and row["n_ulp"] == 0        # ~1e-7 gradients: all flushed
    text = res.table()
    for head in ("ovf%", "sub%", "unf%", "rel med", "ULP n"):
        assert head in text
    mags = {(m["tensor"], m["format"]): m for m in res.meta["magnitudes"]}
    assert mags[("gradWeight", "float8_e4m3fn")]["frac_flushed"] == 1.0
    assert "gradWeight" in res.magnitude_table() and "flushed%" in res.magnitude_table()


# ---- amax scaling -----------------------------------------------------------------------------------------------
def _exact_gw(shape, scale, seed=0):
    d = study.make_data(shape, scale=scale, seed=seed)
    f32 = {k: v.astype(np.float32) for k, v in d.items()}
    return conv_tbc_backward_ref(f32["grad_output"], f32["input"], f32["weight"], study.Shape.parse(shape).pad)[1]


@pytest.mark.parametrize("fmt, fmax", [("float8_e4m3fn", 448.0), ("hifloat8", 32768.0)])
def test_amax_recovers_an_underflowing_gradient(fmt, fmax):
    shape, data_scale = "16,4,8,8,3,1", 1e-3
    grid = {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": [fmt]}
    plain, scaled = study.run_study(shape, grid, scales=[data_scale, "amax"], grads=["gw"],
                                    scale_operands="all").rows
    if fmt == "float8_e4m3fn":
        assert plain["frac_underflow"] > 0.9          # unscaled: |gw| ~ 1e-5 << 2^-10
    s = scaled["dy_scale"]
    assert math.frexp(s)[0] == 0.5                    # a power of two
    # amax lands in (FRAC/2, FRAC] of the format's max, FRAC the format's default (0.5; HiFloat8: 2^-11); the
    # data are the unscaled ones (amax problems carry the data at scale 1)
    frac = 2.0 ** -11 if fmt == "hifloat8" else 0.5
    amax = np.abs(_exact_gw(shape, 1.0)).max()
    assert frac / 2 * fmax < amax * s <= frac * fmax
    assert scaled["frac_underflow"] == 0 and scaled["frac_overflow"] == 0 and scaled["n_nan"] == 0
    assert scaled["ulp_max"] <= 0.5 and scaled["n_ulp"] == scaled["n"]
    if fmt == "float8_e4m3fn" and scaled["frac_subnormal"] == 0:
        assert scaled["max_rel"] <= 2.0 ** -4      # 3 mantissa bits: half a ULP is at most 2^-4 of a normal value
    assert scaled["scale"] == "amax"


def test_amax_fraction_is_parsed_and_checked(capsys):
    res = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["float8_e4m3fn"]},
                          scales=["amax:0.125"], grads=["gw"])
    amax = np.abs(_exact_gw("8,2,4,4,3,1", 1.0)).max()
    assert 0.0625 * 448 < amax * res.rows[0]["dy_scale"] <= 0.125 * 448
    assert study.cli(["--shape", "8,2,4,4,3,1", "--scale", "amax:2"]) == 2
    assert "FRAC of amax:FRAC must be a number in (0, 1]" in capsys.readouterr().err


# ---- the scale window ------------------------------------------------------------------------------------------
def test_window_matches_the_format_limits():
    shape, thr = "16,4,8,8,3,1", 0.05
    r = np.abs(_exact_gw(shape, 1.0)).reshape(-1)
    r = r[r != 0]
    exps = list(range(-12, 16))
    # expected from the limits alone: sub share (below 2^-6) and overflow share (past 464) of the scaled values
    ok = [np.mean(r * 2.0 ** e < E4M3_MIN_NORMAL) <= thr and np.mean(r * 2.0 ** e > 464.0) <= thr for e in exps]
    runs, cur = [], []
    for e, good in zip(exps, ok):
        cur = cur + [e] if good else []
        if len(cur) > sum(len(x) for x in runs[-1:]):
            runs = [list(cur)]
    res = study.scale_window(shape, {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["float8_e4m3fn"]},
                             exponents=exps, threshold=thr)
    (w,) = res.meta["windows"]
    assert (w["lo"], w["hi"]) == (runs[0][0], runs[0][-1])
    assert w["octaves"] == w["hi"] - w["lo"] and w["best"] <= w["worst"]
    assert "2^%d..2^%d" % (w["lo"], w["hi"]) in res.table()
    assert len(res.rows) == len(exps)


def test_window_of_a_rejected_mode_is_shown_with_its_status():
    res = study.scale_window("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["bfloat16"]},
                             exponents=[0, 1])
    assert res.meta["windows"][0]["status"] == 161002 and "n/a (161002)" in res.table()


# ---- HF32 what-if widths ------------------------------------------------------------------------------------------
def test_prerounding_is_the_hf32_path_for_the_chip_widths():
    # the what-if rests on: HF32 compute == operands rounded to HF32, then FP32 compute (products exact)
    d = study.make_data("16,4,8,8,3,1", seed=3)
    dy, x, w, b = (d[k].astype(np.float32) for k in ("grad_output", "input", "weight", "bias"))
    for bits, soc in ((11, "ascend910b"), (10, "ascend950")):
        hf = pyconvtbc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=3, soc=soc, deterministic=True)
        r = [pyconvtbc.round_to_hf32(a, mantissa_bits=bits) for a in (dy, x, w)]
        fp = pyconvtbc.conv_tbc_backward(*r, b, 1, cube_math_type=0, soc=soc, deterministic=True)
        np.testing.assert_array_equal(hf[0], fp[0])
        np.testing.assert_array_equal(hf[1], fp[1])


def test_what_if_widths_shrink_the_error_and_are_labelled():
    widths = [2, 4, 7, 11, 14, 18]
    res = study.run_study("16,4,8,8,3,1", {"cube_math_types": ["USE_HF32"], "hf32_mantissa_bits": widths},
                          grads=["gw", "gb"])
    gw = {r["hf32_mantissa_bits"]: r for r in res.rows if r["grad"] == "gradWeight"}
    errs = [gw[n]["rel_fro"] for n in widths]
    assert all(a > b for a, b in zip(errs, errs[1:]))
    # operand rounding dominates: each width's error is near 2^-(N+1) times a constant of order 1
    assert 2.0 ** -(4 + 3) < gw[4]["rel_fro"] < 2.0 ** -(4 - 1)
    gb = [r["rel_fro"] for r in res.rows if r["grad"] == "gradBias"]
    assert len(set(gb)) == 1                       # gradBias never rounds its operand
    text = res.table()
    assert "14 (what-if)" in text and "2 (what-if)" in text and "11 (what-if)" not in text


def test_what_if_width_checked():
    with pytest.raises(ValueError, match="1..22"):
        study.Grid(hf32_mantissa_bits=[0])


# ---- repeats with 95 % intervals ------------------------------------------------------------------------------------
def test_mean_interval_is_students_t():
    m, lo, hi = study.mean_interval([1.0, 2.0, 3.0])
    half = 4.303 * 1.0 / math.sqrt(3)              # t(0.975, df 2) * s / sqrt(n), s = 1
    assert m == 2.0 and lo == pytest.approx(2.0 - half) and hi == pytest.approx(2.0 + half)
    assert study.mean_interval([5.0]) == (5.0, 5.0, 5.0)
    assert study.mean_interval([None]) == (None, None, None)


def test_repeats_average_the_seeds():
    grid = {"cube_math_types": ["USE_FP16"]}
    rep = study.run_study("8,2,4,4,3,1", grid, grads=["gw"], repeat=3, seed=4)
    singles = [study.run_study("8,2,4,4,3,1", grid, grads=["gw"], seed=s).rows[0]["rel_fro"] for s in (4, 5, 6)]
    (row,) = rep.rows
    assert row["repeats"] == 3 and row["seed"] == "4..6"
    assert row["rel_fro"] == pytest.approx(np.mean(singles), rel=1e-12)
    assert row["rel_fro_lo"] < row["rel_fro"] < row["rel_fro_hi"]
    assert "±" in rep.table() and "95 % interval" in rep.table()


def test_growth_repeats_and_bad_repeat(tmp_path):
    res = study.error_growth("8,2,4,4,3,1", [8, 16], grid={"cube_math_types": ["KEEP_DTYPE"]}, grads=["gw"],
                             repeat=2)
    assert all(r["repeats"] == 2 and r["rel_fro_lo"] <= r["rel_fro"] <= r["rel_fro_hi"] for r in res.rows)
    with pytest.raises(ValueError, match="repeat"):
        study.run_study("8,2,4,4,3,1", repeat=0)
    np.savez(tmp_path / "a.npz", grad_output=np.ones((8, 2, 3)), input=np.ones((8, 2, 2)),
             weight=np.ones((3, 2, 3)), pad=1)
    with pytest.raises(ValueError, match="repeats draw new random data"):
        study.run_study(data=str(tmp_path / "a.npz"), repeat=2)


def test_best_picks_the_smallest_error_of_the_scanned_powers_of_two():
    """'best' = the power of two of grad_output with the smallest gradWeight rel Frob among 2^(e1 - k), k = 0..24,
    e1 the amax rule's exponent at FRAC 1: the same scales as amax:2^-k, which are measured here one by one."""
    grid = {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["hifloat8"]}
    fr = [f"amax:{2.0 ** -k:g}" for k in range(25)]
    rows = study.run_study("8,2,8,8,3,1", grid, scales=["best"] + fr, grads=["gw"]).rows
    best, scan = rows[0], rows[1:]
    assert [r["dy_scale"] for r in scan] == [scan[0]["dy_scale"] * 2.0 ** -k for k in range(25)]
    want = min(scan, key=lambda r: (r["rel_fro"], -r["dy_scale"]))
    assert best["scale"] == "best" and best["dy_scale"] == want["dy_scale"] and best["rel_fro"] == want["rel_fro"]


def test_amax_default_fraction_is_per_format():
    from pyconvtbc.study.choices import amax_fraction
    assert amax_fraction("hifloat8") == 2.0 ** -11 and amax_fraction("float8_e4m3fn") == 0.5
    # an explicit FRAC still wins: amax:0.5 on HiFloat8 puts the largest value at the top of the format
    grid = {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["hifloat8"]}
    a, b = study.run_study("16,4,8,8,3,1", grid, scales=["amax", "amax:0.5"], grads=["gw"]).rows
    assert b["dy_scale"] == a["dy_scale"] * 2.0 ** 10 and a["rel_fro"] < b["rel_fro"]


def test_a_number_scales_grad_output_only_by_default():
    from pyconvtbc.study.data import _problems
    shape = "8,2,4,4,3,1"
    d = study.make_data(shape)
    (p_dy,) = _problems(shape, None, "normal", [4.0], 0)
    (p_all,) = _problems(shape, None, "normal", [4.0], 0, scale_operands="all")
    np.testing.assert_array_equal(p_dy.source["grad_output"], 4.0 * d["grad_output"])
    for k in ("input", "weight"):
        np.testing.assert_array_equal(p_dy.source[k], d[k])                    # left alone by default
        np.testing.assert_array_equal(p_all.source[k], 4.0 * d[k])             # scaled with 'all'
    grid = {"cube_math_types": ["KEEP_DTYPE"]}
    res = study.run_study(shape, grid, scales=[4.0], grads=["gw"])
    assert "scale multiplies: grad_output" in " ".join(comments(res.table()))
    with pytest.raises(ValueError, match="scale_operands"):
        study.run_study(shape, grid, scales=[4.0], grads=["output"])         # the forward never reads it
    with pytest.raises(ValueError, match="scale_operands"):
        study.run_study(shape, grid, scales=[4.0], grads=["gw"], scale_operands="some")
