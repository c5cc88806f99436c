"""`cube_wide` and `cube_rz` are the exact-block-sum forms (docs/precision.md, "Accumulation model"): one cube
step is accumulator + the block's products summed EXACTLY, rounded once to fp32 (to nearest even, or toward zero).

The reference here is exact rational arithmetic (``fractions.Fraction``), independent of any float64 sum; the
data are built so that a float64 sum left to right rounds inside the block ([1, 2^-60, -1] -> 0 instead of
2^-60), or a float64 sum rounded again toward zero rounds twice; the kernels (ct_xsum in _ukr_generic.h) sum
exactly and round once."""
from fractions import Fraction

import numpy as np
import pytest

import pyconvtbc as pc



def round_f32(q, mode):
    """The float32 nearest to the rational q (ties to even; mode 'rne'), or toward zero (mode 'rz')."""
    if q == 0:
        return np.float32(0.0)
    s, a = (-1 if q < 0 else 1), abs(q)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    e = max(e, -126)                             # below the smallest normal: the subnormal spacing 2^-149
    ulp = Fraction(2) ** (e - 23)
    m = a / ulp
    n = m.numerator // m.denominator
    rem = m - n
    if mode == "rne" and (rem > Fraction(1, 2) or (rem == Fraction(1, 2) and n % 2 == 1)):
        n += 1
    v = n * ulp
    if v >= Fraction(2) ** 128:
        return np.float32(s * np.inf) if mode == "rne" else np.float32(s * np.finfo(np.float32).max)
    return np.float32(s * float(v))


def exact_block(acc, a, b, mode):
    """One cube step of the wide forms: round(acc + sum a[i]*b[i]) with the sum exact."""
    q = Fraction(float(acc)) + sum(Fraction(float(x)) * Fraction(float(y)) for x, y in zip(a, b))
    return round_f32(q, mode)


def test_reference_rounds_like_ieee():
    one = np.float32(1)
    assert round_f32(Fraction(1) + Fraction(2) ** -24, "rne") == one                      # tie to even
    assert round_f32(Fraction(1) + 3 * Fraction(2) ** -24, "rne") == np.float32(1 + 2.0 ** -22)
    assert round_f32(Fraction(1) + Fraction(2) ** -23 - Fraction(2) ** -80, "rz") == one
    assert round_f32(Fraction(2) ** -150, "rne") == 0 and round_f32(Fraction(3, 2) * Fraction(2) ** -149, "rne") \
        == np.float32(2.0 ** -148)
    assert exact_block(0, [1, 2.0 ** -30, -1], [1, 2.0 ** -30, 1], "rne") == np.float32(2.0 ** -60)


def _gw_block(dy_col, x_col, form):
    """gradWeight of K = Cin = Cout = B = 1 over len(dy_col) <= k0 rows: one block of products dy*x."""
    n = len(dy_col)
    dy = np.asarray(dy_col, np.float32).reshape(n, 1, 1)
    x = np.asarray(x_col, np.float32).reshape(n, 1, 1)
    w = np.ones((1, 1, 1), np.float32)
    _, gw, _ = pc.conv_tbc_backward(dy, x, w, np.zeros(1, np.float32), 0, soc="ascend910b", accumulation=form)
    return gw.reshape(())


def _gi_block(dy_row, w_row, form):
    """gradInput of T = B = K = Cin = 1 over Cout = len(dy_row) <= k0 channels: one block."""
    n = len(dy_row)
    dy = np.asarray(dy_row, np.float32).reshape(1, 1, n)
    w = np.asarray(w_row, np.float32).reshape(1, 1, n)
    x = np.ones((1, 1, 1), np.float32)
    gi, _, _ = pc.conv_tbc_backward(dy, x, w, np.zeros(n, np.float32), 0, soc="ascend910b", accumulation=form)
    return gi.reshape(())


CANCEL = ([1, 2.0 ** -30, -1], [1, 2.0 ** -30, 1])              # products 1, 2^-60, -1: exact sum 2^-60
DOUBLE_ROUND = ([1, 2.0 ** -23, -(2.0 ** -40)], [1, 1, 2.0 ** -40])  # 1 + 2^-23 - 2^-80: RZ gives 1


def test_the_data_separate_exact_from_float64():
    d = 0.0
    for a, b in zip(*CANCEL):
        d += a * b
    assert d == 0 and exact_block(0, *CANCEL, "rne") == np.float32(2.0 ** -60)
    d = 0.0
    for a, b in zip(*DOUBLE_ROUND):
        d += a * b
    assert d == 1 + 2.0 ** -23 and exact_block(0, *DOUBLE_ROUND, "rz") == np.float32(1)


@pytest.mark.parametrize("which", [_gw_block, _gi_block])
def test_cube_wide_sums_a_block_exactly(which):
    assert which(*CANCEL, "cube_wide") == exact_block(0, *CANCEL, "rne")


@pytest.mark.parametrize("which", [_gw_block, _gi_block])
def test_cube_rz_rounds_once(which):
    assert which(*DOUBLE_ROUND, "cube_rz") == exact_block(0, *DOUBLE_ROUND, "rz")
