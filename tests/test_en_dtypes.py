"""Interop with the dtypes users already hold 8-bit data in: en_dtypes.hifloat8 wherever HiFloat8 is accepted
(grad_weight_dtype, ascend950's forward operands, the codecs), results in that dtype when asked in it, and
ml_dtypes.float8_e4m3fn as grad_weight_dtype.  Every one of the 256 HiFloat8 codes goes through each path."""
import numpy as np
import pytest

import pyconvtbc as pc

en_dtypes = pytest.importorskip("en_dtypes")
ml_dtypes = pytest.importorskip("ml_dtypes")
HIF8 = np.dtype(en_dtypes.hifloat8)
CODES = np.arange(256, dtype=np.uint8)
NAN_CODE = 0x80            # HiFloat8 has one NaN code (and one zero, 0x00)


def _codes_agree():
    """The premise of the interop: every code means the same in both libraries, and pyconvtbc's encoder maps each
    value back to its code (NaN to the one NaN code)."""
    ours = pc.hif8_decode(CODES)
    theirs = CODES.view(HIF8).astype(np.float32)
    assert np.array_equal(ours, theirs, equal_nan=True) and np.array_equal(np.signbit(ours), np.signbit(theirs))
    assert np.array_equal(pc.hif8_decode(CODES.view(HIF8)), ours, equal_nan=True)
    assert np.array_equal(pc.hif8_encode(theirs), CODES) and np.isnan(theirs[NAN_CODE])


def _identity_weights(dtype_codes=True):
    one = pc.hif8_encode(np.ones((1, 1, 1), np.float32))
    return one.view(HIF8) if dtype_codes else one


def test_every_code_round_trips_through_the_forward_as_en_dtypes_hifloat8():
    """out[t] = 0 + x[t] * 1.0: one exact product per output, so every code (zero, inf, NaN included) comes back
    as itself, in the en_dtypes dtype it went in as."""
    _codes_agree()
    x = CODES.reshape(256, 1, 1).view(HIF8)
    y = pc.conv_tbc(x, _identity_weights(), np.zeros(1, np.float32), 0, soc="ascend950")
    assert y.dtype == HIF8 and y.shape == (256, 1, 1)
    assert np.array_equal(y.view(np.uint8).ravel(), CODES)
    # the same call with the uint8 codes and hif8_inputs=True gives the same bytes, as uint8
    y8 = pc.conv_tbc(CODES.reshape(256, 1, 1), _identity_weights(False), np.zeros(1, np.float32), 0,
                     soc="ascend950", hif8_inputs=True)
    assert y8.dtype == np.uint8 and np.array_equal(y8, y.view(np.uint8))
    # again through the plan cache (a second identical call)
    y2 = pc.conv_tbc(x, _identity_weights(), np.zeros(1, np.float32), 0, soc="ascend950")
    assert y2.dtype == HIF8 and np.array_equal(y2.view(np.uint8).ravel(), CODES)
    # where HiFloat8 operands do not exist (ascend910b; the backward's inputs), they are refused as uint8 codes are
    x6 = CODES[:6].reshape(6, 1, 1).view(HIF8)
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc(x6, _identity_weights(), np.zeros(1, np.float32), 0, soc="ascend910b")
    assert e.value.status == 161002 and "hifloat8 (aclDataType HIFLOAT8)" in str(e.value)
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(np.zeros((6, 1, 1), np.float32), x6, _identity_weights(), np.zeros(1, np.float32), 0)
    assert e.value.status == 161002 and "hifloat8 (aclDataType HIFLOAT8)" in str(e.value)


def _problem(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4)).astype(np.float32)
    b = np.zeros(4, np.float32)
    dy = rng.standard_normal((8, 2, 4)).astype(np.float32)
    return dy, x, w, b


@pytest.mark.parametrize("asked", [en_dtypes.hifloat8, HIF8], ids=["scalar type", "dtype"])
def test_grad_weight_dtype_en_dtypes_hifloat8_gives_the_same_codes_in_that_dtype(asked):
    dy, x, w, b = _problem()
    gw = pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype=asked, order_seed=3).grad_weight
    codes = pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype="hifloat8", order_seed=3).grad_weight
    assert gw.dtype == HIF8 and codes.dtype == np.uint8
    assert np.array_equal(gw.view(np.uint8), codes)
    # and the values are the gradient rounded to HiFloat8: within half the gap between the two HiFloat8 values
    # around a float64 reference (plus the fp32 sums' error, 16 terms: 16 * 2^-24 relative to the sum of |terms|)
    ref = np.einsum("tbo,tbi->io", dy.astype(np.float64), x.astype(np.float64))   # k = 1 (pad 1): x[t] meets dy[t]
    mag = np.einsum("tbo,tbi->io", np.abs(dy.astype(np.float64)), np.abs(x.astype(np.float64)))
    grid = np.unique(pc.hif8_decode(CODES)[np.isfinite(pc.hif8_decode(CODES))].astype(np.float64))
    hi = np.clip(np.searchsorted(grid, ref), 1, len(grid) - 1)
    half_gap = (grid[hi] - grid[hi - 1]) / 2
    got = gw.astype(np.float32)[1].astype(np.float64)
    assert np.all(np.abs(got - ref) <= half_gap + 16 * 2 ** -24 * mag)
    # ml_dtypes' FP8 likewise (accepted before en_dtypes was): its dtype in, the same bytes as by name, that dtype out
    e4 = pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype=ml_dtypes.float8_e4m3fn).grad_weight
    by_name = pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype="float8_e4m3fn").grad_weight
    assert e4.dtype == np.dtype(ml_dtypes.float8_e4m3fn) == by_name.dtype
    assert np.array_equal(e4.view(np.uint8), by_name.view(np.uint8))


def test_torch_bridge_takes_en_dtypes_hifloat8_as_grad_weight_dtype():
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import conv_tbc
    dy, x, w, b = _problem(2)
    grads = []
    for asked in (en_dtypes.hifloat8, "hifloat8"):
        wt = torch.from_numpy(w.copy()).requires_grad_()
        y = conv_tbc(torch.from_numpy(x), wt, torch.from_numpy(b), 1, grad_weight_dtype=asked, order_seed=5)
        y.backward(torch.from_numpy(dy))
        grads.append(wt.grad.numpy().copy())
    assert np.array_equal(grads[0], grads[1])
    assert np.array_equal(pc.hif8_decode(pc.hif8_encode(grads[0])), grads[0])     # HiFloat8 values
