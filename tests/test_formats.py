"""pyconvtbc.formats: the records against NumPy / ml_dtypes / en_dtypes and against the codecs."""
import math

import numpy as np
import pytest

import ml_dtypes
from pyconvtbc import codecs, formats as F


@pytest.mark.parametrize("fmt, info", [
    (F.FLOAT16, np.finfo(np.float16)),
    (F.FLOAT32, np.finfo(np.float32)),
    (F.BFLOAT16, ml_dtypes.finfo(ml_dtypes.bfloat16)),
    (F.FLOAT8_E4M3FN, ml_dtypes.finfo(ml_dtypes.float8_e4m3fn)),
])
def test_ieee_limits_match_finfo(fmt, info):
    assert fmt.max == float(info.max)
    assert fmt.min_normal == float(info.smallest_normal)
    assert fmt.min_subnormal == float(info.smallest_subnormal)
    assert fmt.eps == float(info.eps)
    assert fmt.mantissa_bits == info.nmant and fmt.exponent_bits == info.iexp
    assert fmt.bits == info.bits
    assert fmt.min_exponent == info.minexp


def test_codes_match_numpy_and_ml_dtypes():
    assert np.float16(F.FLOAT16.max).view(np.uint16) == F.FLOAT16.max_code
    assert np.array(F.FLOAT16.inf_codes, np.uint16).view(np.float16).tolist() == [np.inf, -np.inf]
    assert np.all(np.isnan(np.array(F.FLOAT16.nan_codes, np.uint16).view(np.float16)))
    bf = np.array([F.BFLOAT16.max_code, *F.BFLOAT16.inf_codes], np.uint16).view(ml_dtypes.bfloat16)
    assert bf.astype(np.float64).tolist() == [F.BFLOAT16.max, np.inf, -np.inf]
    e4 = np.array([F.FLOAT8_E4M3FN.max_code, *F.FLOAT8_E4M3FN.nan_codes], np.uint8).view(ml_dtypes.float8_e4m3fn)
    assert float(e4[0]) == 448.0 and np.all(np.isnan(e4[1:].astype(np.float32)))
    assert np.float32(F.FLOAT32.max).view(np.uint32) == F.FLOAT32.max_code


def test_hifloat8_record():
    h = F.HIFLOAT8
    dec = codecs.hif8_decode(np.array([h.max_code, *h.inf_codes, *h.nan_codes, 0x7E, 0x01], np.uint8))
    assert dec[0] == h.max == 32768.0
    assert dec[1] == np.inf and dec[2] == -np.inf and np.isnan(dec[3])
    assert dec[4] == h.min_normal and dec[5] == h.min_subnormal
    assert F.HIF8_OVERFLOW == (32768 + 49152) / 2 and F.HIF8_UNDERFLOW == h.min_subnormal / 2
    assert h.eps == codecs.hif8_decode(np.uint8(0x09)) - 1.0
    assert not h.has_negative_zero and h.is_tapered


def test_hifloat8_against_en_dtypes_finfo():
    en = pytest.importorskip("en_dtypes")
    fi = en.finfo(en.hifloat8)
    assert (F.HIFLOAT8.max, F.HIFLOAT8.min_normal, F.HIFLOAT8.min_subnormal, F.HIFLOAT8.eps) == (
        float(fi.max), float(fi.smallest_normal), float(fi.smallest_subnormal), float(fi.eps))


def test_dot_class_table():
    covered = []
    for cls in F.HIF8_DOT_CLASSES:
        # codes of the class: prefix bits then D + m free bits (denormals: 3-bit M)
        assert cls.code_last - cls.code_first + 1 == 2 ** (7 - len(cls.dot))
        assert cls.code_first >> (7 - len(cls.dot)) == int(cls.dot, 2)
        assert cls.denormal or len(cls.dot) + cls.exponent_bits + cls.mantissa_bits == 7
        covered += list(range(cls.code_first, cls.code_last + 1))
        if cls.denormal:
            continue
        # every code of the class decodes to 2^E * (1 + M / 2^m) with E in the class's range
        codes = np.arange(cls.code_first, cls.code_last + 1, dtype=np.uint8)
        vals = codecs.hif8_decode(codes).astype(np.float64)
        fin = np.isfinite(vals)
        e = np.floor(np.log2(vals[fin])).astype(int)
        assert set(e.tolist()) == set(cls.e_range)
        frac = vals[fin] / np.exp2(e) - 1
        assert np.all(frac * 2 ** cls.mantissa_bits == np.round(frac * 2 ** cls.mantissa_bits))
    assert sorted(covered) == list(range(0x80))


def test_representable_values():
    codes = np.arange(0x80, dtype=np.uint8)
    v = codecs.hif8_decode(codes).astype(np.float64)
    np.testing.assert_array_equal(F.representable_values("hifloat8"), np.sort(v[np.isfinite(v)]))
    e4 = np.arange(0x7F, dtype=np.uint8).view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    np.testing.assert_array_equal(F.representable_values(F.FLOAT8_E4M3FN), e4)
    f16 = np.arange(0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    np.testing.assert_array_equal(F.representable_values("float16"), f16)
    with pytest.raises(ValueError, match="fmt 'float32'.*bits=32"):
        F.representable_values("float32")


def test_hf32_records():
    for fmt, n in ((F.HF32, 11), (F.HF32_10, 10)):
        assert fmt.mantissa_bits == n and fmt.bits == 9 + n
        mx = np.float32(fmt.max)
        assert mx.view(np.uint32) == fmt.max_code
        assert codecs.round_to_hf32(mx, mantissa_bits=n) == mx
        assert codecs.round_to_hf32(np.nextafter(mx, np.float32(0)), mantissa_bits=n) == mx
        assert codecs.round_to_hf32(np.float32(fmt.min_subnormal), mantissa_bits=n) == fmt.min_subnormal
        assert codecs.round_to_hf32(np.float32(fmt.min_subnormal / 4), mantissa_bits=n) == 0
        assert codecs.round_to_hf32(np.float32(1 + fmt.eps), mantissa_bits=n) == 1 + fmt.eps
        assert codecs.round_to_hf32(np.float32(1 + fmt.eps / 4), mantissa_bits=n) == 1
    assert F.HF32.max_code == 0x7F7FF000 and F.HF32_10.max_code == 0x7F7FE000
    with pytest.raises(ValueError, match="mantissa_bits.*0"):
        F.hf32(0)


def test_get_format():
    assert F.get_format("HiFloat8") is F.HIFLOAT8
    with pytest.raises(ValueError, match="fmt must be.*'nope'"):
        F.get_format("nope")


# ---- ulp / ulp_distance -----------------------------------------------------------------------------------
def test_ulp_matches_spacing():
    x16 = np.arange(0, 0x7BFF, dtype=np.uint16).view(np.float16)          # below max: spacing is finite
    np.testing.assert_array_equal(F.ulp("float16", x16.astype(np.float64)), np.spacing(x16).astype(np.float64))
    rng = np.random.default_rng(0)
    x32 = np.abs(rng.standard_normal(10_000).astype(np.float32) * np.float32(1e3))
    np.testing.assert_array_equal(F.ulp("float32", x32), np.spacing(x32).astype(np.float64))
    assert math.isnan(F.ulp("float16", np.nan)) and F.ulp("float16", np.inf) == np.inf


def test_ulp_hifloat8_is_tapered():
    v = F.representable_values("hifloat8")
    np.testing.assert_array_equal(F.ulp("hifloat8", v[:-1]), np.diff(v))
    assert F.ulp("hifloat8", 16.0) == 4.0 and F.ulp("hifloat8", 1.0) == 0.125 and F.ulp("hifloat8", 3e-5) == 2.0 ** -16


def test_ulp_distance():
    # float32: the classic integer distance on the sign-magnitude-to-two's-complement mapping
    rng = np.random.default_rng(1)
    a = rng.standard_normal(5_000).astype(np.float32)
    b = (a * (1 + rng.integers(-50, 50, a.size).astype(np.float32) * np.float32(2.0 ** -22))).astype(np.float32)

    def ordinal(x):
        i = x.view(np.int32).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFFFFFF), i)

    np.testing.assert_array_equal(F.ulp_distance("float32", a, b), np.abs(ordinal(a) - ordinal(b)).astype(float))
    # every format: consecutive values are one step apart, and +-0 coincide
    for name in ("hifloat8", "float8_e4m3fn", "float16", "bfloat16"):
        v = F.representable_values(name) if name != "bfloat16" else \
            np.arange(0x7F80, dtype=np.uint16).view(ml_dtypes.bfloat16).astype(np.float64)
        np.testing.assert_array_equal(F.ulp_distance(name, v[:-1], v[1:]), np.ones(v.size - 1))
        np.testing.assert_array_equal(F.ulp_distance(name, 0.0, -v), np.arange(v.size, dtype=float))
    assert F.ulp_distance("hifloat8", -32768.0, 32768.0) == 2 * 126
    assert F.ulp_distance("hifloat8", 16.0, 18.0) == 0.5
    assert math.isnan(F.ulp_distance("float16", np.nan, 1.0))
    assert F.ulp_distance("float16", np.inf, 1.0) == np.inf and F.ulp_distance("float16", np.inf, np.inf) == 0
    assert F.ulp_distance("hf32", 1.0, 2.0) == 2048 and F.ulp_distance(F.HF32_10, 1.0, 2.0) == 1024
