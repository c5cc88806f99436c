"""FP16 / BF16 / FLOAT8_E4M3FN codecs against NumPy's float16 and ml_dtypes' casts (independent oracles)."""
import numpy as np
import pytest

import ml_dtypes
from pyconvtbc import codecs
from pyconvtbc._kernels import _codecs as K

E4M3 = ml_dtypes.float8_e4m3fn


def u32(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


@pytest.fixture(autouse=True)
def _quiet_overflow():
    with np.errstate(over="ignore"):                    # NumPy warns when its own float16 cast overflows
        yield


def same_f32(a, b):
    """Bitwise equal, except that any NaN matches any NaN."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    nan = np.isnan(a)
    np.testing.assert_array_equal(nan, np.isnan(b))
    np.testing.assert_array_equal(u32(a)[~nan], u32(b)[~nan])


def random_f32(rng, n, emin=0, emax=255):
    e = rng.integers(emin, emax, n).astype(np.uint32)
    m = rng.integers(0, 1 << 23, n).astype(np.uint32)
    s = rng.integers(0, 2, n).astype(np.uint32)
    return ((s << 31) | (e << 23) | m).view(np.float32)


def midpoints_and_neighbours(values_f32):
    """For sorted, non-negative values: the midpoints of adjacent pairs and their fp32 neighbours, both signs."""
    v = values_f32.astype(np.float64)
    mid = ((v[:-1] + v[1:]) / 2).astype(np.float32)
    assert np.all(mid.astype(np.float64) == (v[:-1] + v[1:]) / 2)          # exact in fp32
    xs = np.concatenate([mid, np.nextafter(mid, np.float32(0)), np.nextafter(mid, np.float32(np.inf))])
    return np.concatenate([xs, -xs])


SPECIALS = np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan, 1e-45, -1e-45, 3.4e38, -3.4e38,
                       65504, 65519.996, 65520, 65536, 2.0 ** -24, 2.0 ** -25, 3 * 2.0 ** -26, 1e-8])


# ---- FP16 ------------------------------------------------------------------------------------------------
def test_fp16_decode_all_codes():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    out = np.empty(65536, np.float32)
    K.f16_decode(h, out, 1)
    same_f32(out, h.view(np.float16).astype(np.float32))


def test_fp16_random_against_numpy():
    rng = np.random.default_rng(16)
    x = np.concatenate([random_f32(rng, 300_000), random_f32(rng, 300_000, 100, 145), SPECIALS])
    same_f32(codecs.round_to_fp16(x), x.astype(np.float16).astype(np.float32))
    out = np.empty(x.size, np.uint16)
    K.f16_encode_f32(x, out, 1)
    ref = x.astype(np.float16).view(np.uint16)
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(out[finite], ref[finite])
    assert np.all((out[~finite] & 0x7C00) == 0x7C00) and np.all(out[~finite] & 0x3FF)


def test_fp16_every_midpoint():
    codes = np.arange(0x7C01, dtype=np.uint16)          # 0 .. max finite, then +inf as the last neighbour
    vals = codes.view(np.float16).astype(np.float32)
    vals[-1] = 65536.0                                  # midpoint of max and "2^16": the overflow threshold
    x = midpoints_and_neighbours(vals)
    assert x.size == 6 * 0x7C00
    same_f32(codecs.round_to_fp16(x), x.astype(np.float16).astype(np.float32))


# ---- BF16 ------------------------------------------------------------------------------------------------
def test_bf16_decode_all_codes():
    h = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    out = np.empty(65536, np.float32)
    K.bf16_decode(h, out, 1)
    same_f32(out, h.view(ml_dtypes.bfloat16).astype(np.float32))


def test_bf16_random_against_ml_dtypes():
    rng = np.random.default_rng(27)
    x = np.concatenate([random_f32(rng, 600_000), SPECIALS])
    same_f32(codecs.round_to_bf16(x), x.astype(ml_dtypes.bfloat16).astype(np.float32))
    out = np.empty(x.size, np.uint16)
    K.bf16_encode_f32(x, out, 1)
    finite = ~np.isnan(x)
    np.testing.assert_array_equal(out[finite], x.astype(ml_dtypes.bfloat16).view(np.uint16)[finite])


def test_bf16_every_midpoint():
    codes = np.arange(0x7F80, dtype=np.uint16)          # 0 .. max finite
    v = codes.view(ml_dtypes.bfloat16).astype(np.float32)
    x = midpoints_and_neighbours(v)
    # overflow edge: max + half a step is the tie that goes to inf (even)
    top = np.float64(v[-1]) + 2.0 ** (127 - 8)
    x = np.concatenate([x, np.float32([top, np.nextafter(np.float32(top), np.float32(0))])])
    same_f32(codecs.round_to_bf16(x), x.astype(ml_dtypes.bfloat16).astype(np.float32))


# ---- FLOAT8_E4M3FN ---------------------------------------------------------------------------------------
def test_e4m3fn_decode_all_codes():
    codes = np.arange(256, dtype=np.uint8)
    same_f32(codecs.e4m3fn_decode(codes), codes.view(E4M3).astype(np.float32))
    same_f32(codecs.e4m3fn_decode(codes.view(E4M3)), codes.view(E4M3).astype(np.float32))


def _e4m3_ref(x):
    return np.asarray(x, np.float32).astype(E4M3).view(np.uint8)


def test_e4m3fn_midpoints_against_ml_dtypes():
    pos = np.arange(0x7F, dtype=np.uint8).view(E4M3).astype(np.float32)    # 0 .. 448
    vals = np.append(pos, np.float32(480.0))            # 480 = the NaN pattern's value: 464 is the edge
    x = np.concatenate([midpoints_and_neighbours(vals), np.float32([500, 1e6, np.inf, -np.inf, 0.0, -0.0])])
    got = codecs.e4m3fn_encode(x)
    assert got.dtype == E4M3
    np.testing.assert_array_equal(got.view(np.uint8), _e4m3_ref(x))


def test_e4m3fn_random_against_ml_dtypes():
    rng = np.random.default_rng(8)
    x = np.concatenate([random_f32(rng, 200_000), random_f32(rng, 300_000, 110, 140), SPECIALS])
    got = codecs.e4m3fn_encode(x).view(np.uint8)
    ref = _e4m3_ref(x)
    nan = np.isnan(x)
    np.testing.assert_array_equal(got[~nan], ref[~nan])
    np.testing.assert_array_equal(got[nan] & 0x7F, 0x7F)


def test_e4m3fn_overflow_edge_and_saturation():
    t = np.float32(464.0)
    x = np.float32([448, np.nextafter(t, np.float32(0)), t, np.nextafter(t, np.float32(np.inf)), 1e9, np.inf])
    np.testing.assert_array_equal(codecs.e4m3fn_encode(x).view(np.uint8), [0x7E, 0x7E, 0x7E, 0x7F, 0x7F, 0x7F])
    np.testing.assert_array_equal(codecs.e4m3fn_encode(-x).view(np.uint8), [0xFE, 0xFE, 0xFE, 0xFF, 0xFF, 0xFF])
    np.testing.assert_array_equal(codecs.e4m3fn_encode(x, saturate=True).view(np.uint8), [0x7E] * 6)
    np.testing.assert_array_equal(codecs.e4m3fn_encode(-x, saturate=True).view(np.uint8), [0xFE] * 6)
    nan = np.float32([np.nan, -np.nan])
    np.testing.assert_array_equal(codecs.e4m3fn_encode(nan, saturate=True).view(np.uint8), [0, 0])
    assert np.all(np.isnan(codecs.e4m3fn_encode(nan).astype(np.float32)))
    # saturating mode changes nothing below the overflow edge
    rng = np.random.default_rng(3)
    y = random_f32(rng, 50_000, 100, 135)
    np.testing.assert_array_equal(codecs.e4m3fn_encode(y, saturate=True).view(np.uint8), _e4m3_ref(y))


# ---- fp16 subnormal walk-through (independent of NumPy) -------------------------------------------------
def test_fp16_subnormal_grid():
    k = np.arange(0, 1025, dtype=np.float64)
    x = (k * 2.0 ** -24).astype(np.float32)             # every subnormal multiple, and 2^-14 itself
    np.testing.assert_array_equal(codecs.round_to_fp16(x), x)
    half = ((k[:-1] + 0.5) * 2.0 ** -24).astype(np.float32)   # ties: to the even multiple
    even = np.where(k[:-1] % 2 == 0, k[:-1], k[:-1] + 1) * 2.0 ** -24
    np.testing.assert_array_equal(codecs.round_to_fp16(half), even.astype(np.float32))
