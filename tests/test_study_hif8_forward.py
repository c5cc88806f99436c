"""HiFloat8 operands of ascend950's forward in the study (issue 39): --input-dtype hifloat8 with --grads output;
the error checked against an independent float64 forward of the decoded HiFloat8 operands."""
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import study
from pyconvtbc.codecs import hif8_decode, hif8_encode


def _forward64(x, w, b, pad):
    """out[t, b, co] = bias[co] + sum_k sum_ci x[t+k-pad, b, ci] * w[k, ci, co], in float64."""
    T, B, Cin = x.shape
    K, _, Cout = w.shape
    xp = np.zeros((T + 2 * pad, B, Cin))
    xp[pad:pad + T] = x
    T_out = T + 2 * pad - K + 1
    out = np.broadcast_to(b, (T_out, B, Cout)).astype(np.float64).copy()
    for k in range(K):
        out += np.einsum("tbc,cd->tbd", xp[k:k + T_out], w[k])
    return out


def test_hifloat8_forward_rows_match_an_independent_reference():
    shape = "12,3,8,8,3,1"
    res = study.run_study(shape, {"input_dtypes": ["hifloat8"], "socs": ["ascend950"],
                                  "cube_math_types": ["KEEP_DTYPE"]}, grads=["output"])
    (row,) = res.rows
    assert row["status"] == 0 and row["out_format"] == "hifloat8" and row["compute"] == "HIF8"
    d = study.make_data(shape)
    xi, wi = hif8_encode(d["input"]), hif8_encode(d["weight"])
    out = pc.conv_tbc(xi, wi, d["bias"].astype(np.float32), 1, soc="ascend950", hif8_inputs=True)
    ref = _forward64(hif8_decode(xi).astype(np.float64), hif8_decode(wi).astype(np.float64),
                     d["bias"].astype(np.float32).astype(np.float64), 1)
    c = hif8_decode(out).astype(np.float64)
    assert row["rel_fro"] == pytest.approx(np.linalg.norm(c - ref) / np.linalg.norm(ref), rel=1e-12)
    assert row["max_abs"] == pytest.approx(np.abs(c - ref).max(), rel=1e-12)


def test_hifloat8_needs_ascend950_and_the_forward():
    (row,) = study.run_study("8,2,4,4,3,1", {"input_dtypes": ["hif8"], "socs": ["ascend910b"],
                                            "cube_math_types": ["KEEP_DTYPE"]}, grads=["output"]).rows
    assert row["status"] == 161002 and row["compute"] == "n/a"
    with pytest.raises(ValueError, match="forward only"):
        study.run_study("8,2,4,4,3,1", {"input_dtypes": ["hifloat8"], "socs": ["ascend950"]}, grads=["gw", "output"])
    assert "hifloat8" not in study.Grid(input_dtypes="all").input_dtypes       # 'all' stays the backward's


def test_cli_takes_hifloat8_inputs(capsys):
    assert study.cli(["--shape", "8,2,4,4,3,1", "--input-dtype", "hifloat8", "--soc", "ascend950", "--cube",
                      "KEEP_DTYPE", "--grads", "out"]) == 0
    assert "hifloat8" in capsys.readouterr().out
    assert study.cli(["--shape", "8,2,4,4,3,1", "--input-dtype", "hifloat8", "--soc", "ascend950"]) == 2
    assert "--input-dtype: hifloat8 operands exist for the forward only" in capsys.readouterr().err
