"""The study measures the forward's output (aclnnConvTbc's out, ``--grads output``) per mode against a float64
reference, alongside the gradients; bounds derived from the formats and the reduction length K*Cin."""
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import study
from pyconvtbc.study.reference import reference_forward

U32 = 2.0 ** -24


def _naive_forward(x, w, b, pad):
    T, B, Cin = x.shape
    K, _, Cout = w.shape
    out = np.zeros((T + 2 * pad - K + 1, B, Cout))
    for t in range(out.shape[0]):
        for k in range(K):
            s = t + k - pad
            if 0 <= s < T:
                out[t] += x[s].astype(np.float64) @ w[k].astype(np.float64)
    return out + b


@pytest.mark.parametrize("shape", [(7, 2, 3, 4, 3, 1), (5, 3, 2, 2, 1, 0), (4, 1, 2, 3, 5, 2), (3, 2, 2, 2, 4, 2)])
def test_reference_forward_is_the_convolution(shape):
    T, B, Cin, Cout, K, pad = shape
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((T, B, Cin)), rng.standard_normal((K, Cin, Cout)), rng.standard_normal(Cout)
    np.testing.assert_allclose(reference_forward(x, w, b, pad), _naive_forward(x, w, b, pad), rtol=1e-13, atol=1e-13)


def _rows(res, grad="output"):
    return {(r["cube_math_type"], r["soc"], r["input_dtype"]): r for r in res.rows if r["grad"] == grad}


def _gamma(n, u):
    return n * u / (1 - n * u)


def test_output_error_per_mode_within_the_bounds_of_its_precision():
    shape = study.Shape(12, 3, 16, 8, 3, 1)
    res = study.run_study(shape, {"cube_math_types": "all"}, grads=["output"])
    rows = _rows(res)
    assert len(rows) == 4 and all(r["status"] == 0 for r in rows.values())
    data = study.make_data(shape)
    x, w, b = (data[k].astype(np.float32) for k in ("input", "weight", "bias"))
    # S: the sum of the magnitudes of each output's terms (the bias included)
    S = reference_forward(np.abs(x), np.abs(w), np.abs(b), shape.pad)
    n = shape.K * shape.Cin                                  # products per output element
    assert all(r["reduction_length"] == n and r["out_format"] == "float32" for r in rows.values())
    fp32 = rows[("KEEP_DTYPE", "ascend910b", "float32")]
    # fp32 products and an fp32 sum of n + 1 terms (the bias-initialised accumulator) in any order
    assert 0 < fp32["max_abs"] <= (_gamma(n + 1, U32) * S).max()
    hf32 = rows[("USE_HF32", "ascend910b", "float32")]
    # operands rounded to 11 bits (|rel| <= 2^-12 each), exact products, fp32 sum
    eps = (1 + 2.0 ** -12) ** 2 - 1
    assert fp32["max_abs"] < hf32["max_abs"] <= ((eps + _gamma(n + 1, U32) * (1 + eps)) * S).max()
    assert rows[("ALLOW_FP32_DOWN_PRECISION", "ascend910b", "float32")]["max_abs"] == hf32["max_abs"]
    fp16 = rows[("USE_FP16", "ascend910b", "float32")]
    # operands and bias in fp16 (2^-11 each), the result through fp16 (2^-11 of |out|)
    eps16 = (1 + 2.0 ** -11) ** 2 - 1
    bound = (eps16 + _gamma(n + 1, U32) * (1 + eps16)) * S * (1 + 2.0 ** -11) + 2.0 ** -11 * S
    assert hf32["max_abs"] < fp16["max_abs"] <= bound.max()


def test_output_row_is_the_numpy_layers_error_and_ignores_grad_output_scaling():
    shape = study.Shape(10, 2, 8, 4, 3, 1)
    res = study.run_study(shape, {"cube_math_types": ["USE_HF32"]}, scales=[1, "amax"], grads=["gw", "out"])
    out_rows = [r for r in res.rows if r["grad"] == "output"]
    assert len(out_rows) == 2
    data = study.make_data(shape)
    x, w, b = (data[k].astype(np.float32) for k in ("input", "weight", "bias"))
    got = pc.conv_tbc(x, w, b, shape.pad, cube_math_type=3)
    expected = study.error_metrics(got, reference_forward(x, w, b, shape.pad), "float32")
    for r in out_rows:                       # the amax rule scales grad_output only: the forward is unchanged
        assert r["rel_fro"] == expected["rel_fro"] and r["max_abs"] == expected["max_abs"]
    assert [r for r in res.rows if r["grad"] == "gradWeight" and r["dy_scale"] != 1]


def test_rejected_and_what_if_cells():
    shape = study.Shape(8, 2, 16, 4, 3, 1)
    res = study.run_study(shape, {"cube_math_types": ["KEEP_DTYPE"], "socs": ["ascend910"]}, grads=["output"])
    (row,) = res.rows
    assert row["status"] == 161002 and row["rel_fro"] is None
    res = study.run_study(shape, {"cube_math_types": ["USE_HF32"], "hf32_mantissa_bits": [4, 11, 18]},
                          grads=["output"])
    err = {r["hf32_mantissa_bits"]: r["rel_fro"] for r in res.rows}
    assert err[4] > err[11] > err[18] > 0          # narrower operands, larger error
    # 4 bits: each operand within 2^-5 relative, so ||c - r|| <= ((1 + 2^-5)^2 - 1 + fp32 sums) * ||S||
    data = study.make_data(shape)
    x, w, b = (data[k].astype(np.float32).astype(np.float64) for k in ("input", "weight", "bias"))
    S = np.linalg.norm(reference_forward(np.abs(x), np.abs(w), np.abs(b), shape.pad))
    r = np.linalg.norm(reference_forward(x, w, b, shape.pad))
    assert err[4] <= ((1 + 2.0 ** -5) ** 2 - 1 + _gamma(49, U32) * 1.07) * S / r


def test_bfloat16_output_is_rounded_once_to_bf16_in_its_own_mode():
    res = study.run_study(study.Shape(8, 2, 16, 8, 3, 1), {"input_dtypes": ["bfloat16"],
                                                           "cube_math_types": ["KEEP_DTYPE"]}, grads=["out"])
    (row,) = res.rows
    # fp32 accumulation of exact bf16 products, then one rounding to bf16: within half a bf16 ulp and a bit
    assert row["out_format"] == "bfloat16" and row["ulp_max"] <= 0.5 + 2 ** -6


def test_magnitudes_and_growth_include_the_output():
    res = study.run_study(study.Shape(8, 2, 4, 4, 3, 1), {"cube_math_types": ["KEEP_DTYPE"]}, grads=["output"])
    assert "output" in {r["tensor"] for r in res.meta["magnitudes"]}
    g = study.error_growth(study.Shape(8, 2, 4, 4, 3, 1), [4, 16, 64], axis="Cin",
                           grid={"cube_math_types": ["KEEP_DTYPE"]}, grads=["output"])
    assert sorted(r["reduction_length"] for r in g.rows) == [12, 48, 192]
    assert "output" in g.table()


def test_spread_and_window_refuse_the_output_naming_it(capsys):
    with pytest.raises(ValueError, match="grads: 'output'.*deterministic"):
        study.reduction_order_spread("8,2,4,4,3,1", grads=["output"])
    with pytest.raises(ValueError, match="grads: 'output'.*grad_output"):
        study.scale_window("8,2,4,4,3,1", grads=["output"])
    assert study.cli(["spread", "--shape", "8,2,4,4,3,1", "--grads", "out"]) == 2
    assert "grads: 'output'" in capsys.readouterr().err
    assert study.cli(["--shape", "8,2,4,4,3,1", "--cube", "USE_HF32", "--grads", "gi,output"]) == 0
    text = capsys.readouterr().out
    assert "output" in text and "gradInput" in text and "gradWeight" not in text
