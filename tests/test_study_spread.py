"""Reduction-order spread: the NumPy model of the fp32 accumulation order."""
import numpy as np
import pytest

from pyconvtbc import study


def _problem(shape, dist="normal", seed=0, dtype=np.float32):
    d = study.make_data(shape, dist, 1.0, seed)
    return {k: v.astype(dtype) for k, v in d.items()}


def test_natural_order_is_a_plain_sequential_fp32_sum():
    # Written straight from the formulas: terms in (t, b) order for gradWeight, (k, co) for gradInput,
    # each product rounded to fp32 and added to a float32 accumulator one at a time.
    T, B, Cin, Cout, K, pad = 7, 3, 2, 3, 3, 1
    p = _problem((T, B, Cin, Cout, K, pad), "lognormal:2", seed=4)
    dy, x, w = p["grad_output"], p["input"], p["weight"]
    T_out = T + 2 * pad - K + 1
    gw = study.permuted_gradients(dy, x, w, pad, grad="gradWeight", deterministic=True)[0]
    gi = study.permuted_gradients(dy, x, w, pad, grad="gradInput", deterministic=True)[0]
    for k in range(K):
        for ci in range(Cin):
            for co in range(Cout):
                acc = np.float32(0)
                for t in range(T_out):
                    for b in range(B):
                        if 0 <= t + k - pad < T:
                            acc = np.float32(acc + np.float32(x[t + k - pad, b, ci] * dy[t, b, co]))
                assert gw[k, ci, co] == acc
    for t in range(T):
        for b in range(B):
            for ci in range(Cin):
                acc = np.float32(0)
                for k in range(K):
                    for co in range(Cout):
                        if 0 <= t + pad - k < T_out:
                            acc = np.float32(acc + np.float32(dy[t + pad - k, b, co] * w[k, ci, co]))
                assert gi[t, b, ci] == acc


@pytest.mark.parametrize("kw", [dict(permutations=1), dict(permutations=6, deterministic=True)])
def test_spread_is_zero_for_one_order(kw):
    p = _problem((64, 4, 4, 4, 3, 1), "lognormal:2")
    runs = study.permuted_gradients(p["grad_output"], p["input"], p["weight"], 1, grad="gradWeight", **kw)
    assert runs.shape[0] == kw["permutations"]
    assert (runs == runs[0]).all()


def test_spread_is_nonzero_for_several_orders_when_order_matters():
    # lognormal magnitudes over ~6 decades and 256 terms per sum: fp32 sums depend on the order
    p = _problem((64, 4, 4, 4, 3, 1), "lognormal:2")
    runs = study.permuted_gradients(p["grad_output"], p["input"], p["weight"], 1, grad="gradWeight",
                                    permutations=8, seed=1)
    assert (runs.max(axis=0) > runs.min(axis=0)).any()


def test_spread_is_zero_when_every_partial_sum_is_exact():
    # integers in [-3, 3]: every product and partial sum is a small integer, exact in fp32 in any order
    rng = np.random.default_rng(0)
    dy = rng.integers(-3, 4, (30, 4, 5)).astype(np.float32)
    x = rng.integers(-3, 4, (30, 4, 2)).astype(np.float32)
    w = rng.integers(-3, 4, (1, 2, 5)).astype(np.float32)
    runs = study.permuted_gradients(dy, x, w, 0, grad="gradWeight", permutations=10, seed=2)
    assert (runs == runs[0]).all()
    np.testing.assert_array_equal(runs[0], np.einsum("tbi,tbo->io", x.astype(np.float64),
                                                     dy.astype(np.float64))[None])


def test_spread_study_rows():
    grid = {"cube_math_types": ["KEEP_DTYPE"]}
    kw = dict(distribution="lognormal:2", grads=["gw"], permutations=6)
    rnd = study.reduction_order_spread("64,4,4,4,3,1", grid, **kw)
    fixed = study.reduction_order_spread("64,4,4,4,3,1", grid, deterministic=True, **kw)
    (r,), (f,) = rnd.rows, fixed.rows
    assert r["spread_max"] > 0 and 0 < r["frac_varying"] <= 1 and r["order"] == "random"
    assert f["spread_max"] == 0 and f["frac_varying"] == 0 and f["order"] == "fixed"
    assert r["ulp_max"] == f["ulp_max"]            # the mode's own error does not depend on the model's order
    assert "spread p99" in rnd.table()


def test_permutations_argument_checked():
    p = _problem((8, 2, 2, 2, 3, 1))
    with pytest.raises(ValueError, match=r"permutations: 0; expected an integer >= 1"):
        study.permuted_gradients(p["grad_output"], p["input"], p["weight"], 1, permutations=0)
