"""The accumulation model as study axes, and the spread of the operator's own non-deterministic mode."""
import numpy as np
import pytest

import pyconvtbc
from pyconvtbc import study

SHAPE = "32,8,4,4,3,1"


def test_accumulation_axes_reach_the_operator():
    grid = {"cube_math_types": ["KEEP_DTYPE"], "accumulations": ["sequential", "cube"], "block_sizes": [None, 4]}
    res = study.run_study(SHAPE, grid, grads=["gw"])
    cells = [(r["accumulation"], r["block_size"]) for r in res.rows]
    assert cells == [("sequential", None), ("cube", None), ("cube", 4)]      # k0 collapsed for sequential
    d = study.make_data(SHAPE)
    x = {k: v.astype(np.float32) for k, v in d.items()}
    ref = study.reference_gradients(x["grad_output"], x["input"], x["weight"], 1)[1]
    for r in res.rows:
        kw = {"accumulation": r["accumulation"]}
        if r["block_size"] is not None:
            kw["block_size"] = r["block_size"]
        gw = pyconvtbc.conv_tbc_backward(x["grad_output"], x["input"], x["weight"], x["bias"], 1, cube_math_type=0,
                                         deterministic=True, **kw)[1]
        assert r["max_abs"] == float(np.abs(gw.astype(np.float64) - ref).max())
    assert "accum" in res.table() and "k0" in res.table()


@pytest.mark.parametrize("bad, needle", [(["--accumulation", "tree"], "is not a valid accumulation form"),
                                         (["--block-size", "65"], "is not a block size")])
def test_accumulation_options_checked(capsys, bad, needle):
    assert study.cli(bad + ["--shape", "8,2,2,2,3,1"]) == 2
    assert needle in capsys.readouterr().err


def test_operator_spread_varies_only_where_the_order_can():
    grid = {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["same"]}
    kw = dict(grid=grid, permutations=6, source="operator", grads=["gi", "gw"])
    res = study.reduction_order_spread(SHAPE, **kw)
    gi, gw = res.rows
    # ascend910b, not deterministic: the batch items of gradWeight are added in a per-call order; gradInput's
    # order is fixed
    assert gi["spread_max"] == 0 and gi["frac_varying"] == 0
    assert gw["spread_max"] > 0 and gw["frac_varying"] > 0
    again = study.reduction_order_spread(SHAPE, **kw).rows[1]
    assert again["spread_max"] == gw["spread_max"] and again["frac_varying"] == gw["frac_varying"]   # order seeds
    fixed = study.reduction_order_spread(SHAPE, deterministic=True, **kw).rows[1]
    assert fixed["spread_max"] == 0
    assert "from the operator" in res.table()


def test_operator_spread_from_the_cli(capsys):
    assert study.cli(["spread", "--shape", SHAPE, "--cube", "KEEP_DTYPE", "--grads", "gw", "--permutations", "3",
                      "--order-source", "operator"]) == 0
    assert "from the operator" in capsys.readouterr().out
    assert study.cli(["spread", "--order-source", "hardware"]) == 2
    # the common --non-deterministic flag would change nothing here: refused, naming the option to use
    assert study.cli(["spread", "--shape", SHAPE, "--permutations", "2", "--non-deterministic"]) == 2
    assert "--order-source operator" in capsys.readouterr().err
