"""HiFloat8 codec tests against independent references written here from SEMANTICS.md section 4.

The references below use the dot-prefix table of the HiFloat8 paper (restated here, not imported from
pyconvtbc) and exact float64 / Python-int arithmetic.  Nothing expected is copied from the codec's output.
"""
import math
import struct

import numpy as np
import pytest

from pyconvtbc import codecs

# ---- independent reference ---------------------------------------------------------------------------------
# (dot prefix as a bit string, D exponent bits, m mantissa bits); the denormal prefix 0000 is handled apart.
_DOTS = [("11", 4, 1), ("10", 3, 2), ("01", 2, 3), ("001", 1, 3), ("0001", 0, 3)]


def ref_decode(code):
    """Value of a HiFloat8 code from the format definition (float; nan / +-inf for the special codes)."""
    if code == 0x80:
        return math.nan
    sign = -1.0 if code & 0x80 else 1.0
    body = format(code & 0x7F, "07b")                    # dot | exponent | mantissa, 7 bits
    if body.startswith("0000"):                          # denormal: 2^(M-23), M = 0 is zero
        mm = int(body[4:], 2)
        return 0.0 if mm == 0 else sign * 2.0 ** (mm - 23)
    for dot, d, m in _DOTS:
        if body.startswith(dot):
            rest = body[len(dot):]
            assert len(rest) == d + m
            ebits, mbits = rest[:d], rest[d:]
            if d == 0:
                e = 0
            else:
                mag = 2 ** (d - 1) + (int(ebits[1:], 2) if d > 1 else 0)
                e = -mag if ebits[0] == "1" else mag
            v = 2.0 ** e * (1 + int(mbits, 2) / 2 ** m)
            if e == 15 and int(mbits, 2) == 1:           # 1.5 * 2^15 pattern: Inf
                return sign * math.inf
            return sign * v
    raise AssertionError(code)


REF = {c: ref_decode(c) for c in range(256)}
POS = sorted((v, c) for c, v in REF.items() if c < 0x80 and math.isfinite(v))   # 0 and 126 positive values
POS_VALUES = np.array([v for v, _ in POS])
POS_CODES = np.array([c for _, c in POS], dtype=np.uint8)
# nearest-with-ties-away over {0, finite values, 49152 standing for Inf} reproduces every TA rule of the spec
GRID = np.append(POS_VALUES, 49152.0)
GRID_CODES = np.append(POS_CODES, 0x6F).astype(np.uint8)


def ref_encode_ta(x, saturate=False):
    """Vectorised TA reference on float64 values (exact: every grid value and midpoint is a short binary)."""
    x = np.asarray(x, dtype=np.float64)
    a = np.abs(x)
    k = np.clip(np.searchsorted(GRID, a, side="right") - 1, 0, len(GRID) - 2)
    lo, hi = GRID[k], GRID[k + 1]
    up = (a - lo) >= (hi - a)                            # tie -> away from zero
    code = np.where(up, GRID_CODES[k + 1], GRID_CODES[k]).astype(np.uint8)
    code = np.where(a >= 49152.0, 0x6F, code).astype(np.uint8)          # far beyond, and inf
    if saturate:
        code = np.where(code == 0x6F, 0x6E, code).astype(np.uint8)
    code = np.where((code != 0) & np.signbit(x), code | 0x80, code).astype(np.uint8)
    code = np.where(np.isnan(x), 0x00 if saturate else 0x80, code).astype(np.uint8)
    return code


def _f32_bits(v):
    return struct.unpack("<I", struct.pack("<f", v))[0]


def _class_width(e):
    """Mantissa width of the class holding binade exponent e (denormal binades: 0)."""
    a = abs(e)
    if e <= -16:
        return 0
    return 1 if a >= 8 else 2 if a >= 4 else 3


def ref_encode_hybrid(v):
    """HR rule of SEMANTICS.md section 4 on the fp32 pattern of v (a Python float exactly representable in fp32).

    TA when |e| < 4; otherwise keep 23 - d mantissa bits, F = top 14 dropped bits, T = low 14 bits of the
    mantissa field, round up iff F >= T.  Edges as documented in docs/precision.md: underflow (|x| < 2^-22)
    and overflow (|x| >= 40960) as TA; the E = 15 class holds only 32768.
    """
    if math.isnan(v) or abs(v) >= 40960.0 or abs(v) < 2.0 ** -22:
        return int(ref_encode_ta(np.float64(v)))
    b = _f32_bits(v)
    sign, e, mant = b >> 31, ((b >> 23) & 0xFF) - 127, b & 0x7FFFFF
    if abs(e) < 4:
        return int(ref_encode_ta(np.float64(v)))
    if e == 15:
        mag = 32768.0
    else:
        d = 23 - _class_width(e)
        f = (mant >> (d - 14)) & 0x3FFF
        t = mant & 0x3FFF
        q = ((mant | 0x800000) >> d) + (1 if f >= t else 0)
        mag = math.ldexp(q, e - 23 + d)
    code = {val: c for val, c in POS}[mag]
    return code | (0x80 if sign else 0)


def ref_encode_hybrid_vec(x32):
    """Vectorised form of ref_encode_hybrid (same rule, NumPy int64 arithmetic) for large samples."""
    x32 = np.asarray(x32, dtype=np.float32)
    b = x32.view(np.uint32).astype(np.int64)
    e = ((b >> 23) & 0xFF) - 127
    mant = b & 0x7FFFFF
    ae = np.abs(e)
    width = np.select([e <= -16, ae >= 8, ae >= 4], [0, 1, 2], 3)
    d = 23 - width
    f = (mant >> np.maximum(d - 14, 0)) & 0x3FFF
    t = mant & 0x3FFF
    q = ((mant | 0x800000) >> d) + (f >= t)
    mag = np.ldexp(q.astype(np.float64), (e - 23 + d).astype(np.int32))
    mag = np.where(e == 15, 32768.0, mag)
    hr = ref_encode_ta(np.copysign(mag, x32.astype(np.float64)))
    ta = ref_encode_ta(x32)
    a = np.abs(x32.astype(np.float64))
    use_ta = np.isnan(a) | (a >= 40960.0) | (a < 2.0 ** -22) | (ae < 4)
    return np.where(use_ta, ta, hr).astype(np.uint8)


# ---- decode ------------------------------------------------------------------------------------------------
def test_decode_all_codes():
    got = codecs.hif8_decode(np.arange(256, dtype=np.uint8))
    assert got.dtype == np.float32
    for c in range(256):
        want = REF[c]
        if math.isnan(want):
            assert np.isnan(got[c]), hex(c)
        else:
            assert got[c] == want, (hex(c), got[c], want)


def test_decode_spec_examples():
    v = codecs.hif8_decode(np.array([0x41, 0x6E, 0x7E, 0x01, 0x07, 0x6F, 0xEF, 0x00, 0x08], dtype=np.uint8))
    assert v[0] == 20.0 and v[1] == 32768.0 and v[2] == 2.0 ** -15
    assert v[3] == 2.0 ** -22 and v[4] == 2.0 ** -16
    assert v[5] == np.inf and v[6] == -np.inf and v[7] == 0.0 and v[8] == 1.0
    assert len(POS_VALUES) == 127 and POS_VALUES[-1] == 32768.0     # 0 + 126 positive finite values


def test_roundtrip_every_finite_code():
    codes = np.array([c for c in range(256) if math.isfinite(REF[c])], dtype=np.uint8)
    assert len(codes) == 253                            # 256 - NaN - two Inf
    for dt in (np.float32, np.float64):
        vals = codecs.hif8_decode(codes).astype(dt)
        for rounding in ("ta",):
            np.testing.assert_array_equal(codecs.hif8_encode(vals, rounding=rounding), codes)


# ---- TA: midpoints, neighbours, boundaries -----------------------------------------------------------------
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_ta_midpoints_and_neighbours(dt):
    lo, hi = GRID[:-1], GRID[1:]
    mid = (lo + hi) / 2
    m = mid.astype(dt)
    assert np.all(m.astype(np.float64) == mid)          # every midpoint is exact in fp32 and fp64
    below = np.nextafter(m, dt(0))
    above = np.nextafter(m, dt(np.inf))
    code_lo, code_hi = GRID_CODES[:-1], GRID_CODES[1:]
    for sign in (1, -1):
        sb = 0x80 if sign < 0 else 0
        for xs, want in ((m, code_hi), (below, code_lo), (above, code_hi)):
            w = np.where(want == 0, 0, want | sb).astype(np.uint8)
            np.testing.assert_array_equal(codecs.hif8_encode(sign * xs), w)
            np.testing.assert_array_equal(codecs.hif8_encode(sign * xs), ref_encode_ta(sign * xs))


def test_ta_class_boundaries():
    # the last value of a class and the first of the next: the tie goes away from zero into the next class
    pairs = [(7.5, 8.0), (15.0, 16.0), (224.0, 256.0), (1.875 * 2 ** -2, 0.5), (2.0 ** -16, 2.0 ** -15),
             (1.875, 2.0), (1.75 * 2 ** -4, 2.0 ** -3), (1.5 * 2 ** -9, 2.0 ** -8), (24576.0, 32768.0),
             (1.75 * 2 ** 3, 1.875 * 2 ** 3)]
    for a, b in pairs:
        mid = (a + b) / 2
        ca, cb = ref_encode_ta(a), ref_encode_ta(b)
        assert REF[int(ca)] == a and REF[int(cb)] == b
        for dt in (np.float32, np.float64):
            m = dt(mid)
            assert codecs.hif8_encode(m) == cb
            assert codecs.hif8_encode(np.nextafter(m, dt(0))) == ca
            assert codecs.hif8_encode(np.nextafter(m, dt(np.inf))) == cb


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_overflow_boundary(dt):
    t = dt(40960.0)
    xs = np.array([np.nextafter(t, dt(0)), t, np.nextafter(t, dt(np.inf)), dt(32768), dt(49152), dt(1e30)
                   if dt == np.float32 else dt(1e300), dt(np.inf)], dtype=dt)
    for sign, sb in ((1, 0x00), (-1, 0x80)):
        np.testing.assert_array_equal(codecs.hif8_encode(sign * xs),
                                      np.array([0x6E, 0x6F, 0x6F, 0x6E, 0x6F, 0x6F, 0x6F], np.uint8) | sb)
        np.testing.assert_array_equal(codecs.hif8_encode(sign * xs, saturate=True),
                                      np.array([0x6E] * 7, np.uint8) | sb)
        for rounding in ("ta", "hybrid"):
            np.testing.assert_array_equal(codecs.hif8_encode(sign * xs[1:], rounding=rounding),
                                          np.array([0x6F, 0x6F, 0x6E, 0x6F, 0x6F, 0x6F], np.uint8) | sb)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_underflow_boundary(dt):
    a, b = dt(2.0 ** -23), dt(2.0 ** -22)
    xs = np.array([np.nextafter(a, dt(0)), a, np.nextafter(a, dt(1)), np.nextafter(b, dt(0)), b,
                   dt(1.5 * 2 ** -22), np.nextafter(dt(1.5 * 2 ** -22), dt(0)), dt(0), dt(1e-40),
                   np.finfo(dt).smallest_subnormal], dtype=dt)
    want = np.array([0x00, 0x01, 0x01, 0x01, 0x01, 0x02, 0x01, 0x00, 0x00, 0x00], np.uint8)
    neg = np.where(want == 0, 0, want | 0x80).astype(np.uint8)
    for sat in (False, True):
        np.testing.assert_array_equal(codecs.hif8_encode(xs, saturate=sat), want)
        np.testing.assert_array_equal(codecs.hif8_encode(-xs, saturate=sat), neg)
    # hybrid: the same underflow rules below 2^-22 (on the fp32 value: float64 input is rounded to fp32
    # first), the literal HR rule from 2^-22 up (2^-22 itself goes up to 2^-21)
    x32 = xs.astype(np.float32)
    want_h = np.array([ref_encode_hybrid(float(v)) for v in x32], dtype=np.uint8)
    assert want_h[4] == 0x02
    tiny = x32 < np.float32(2.0 ** -22)
    assert tiny.sum() >= 6
    np.testing.assert_array_equal(want_h[tiny], ref_encode_ta(x32)[tiny])
    for sat in (False, True):
        np.testing.assert_array_equal(codecs.hif8_encode(xs, saturate=sat, rounding="hybrid"), want_h)
        np.testing.assert_array_equal(codecs.hif8_encode(-xs, saturate=sat, rounding="hybrid"),
                                      np.where(want_h == 0, 0, want_h | 0x80).astype(np.uint8))


@pytest.mark.parametrize("rounding", ["ta", "hybrid"])
def test_specials(rounding):
    for dt in (np.float32, np.float64):
        xs = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, -np.nan], dtype=dt)
        np.testing.assert_array_equal(codecs.hif8_encode(xs, rounding=rounding),
                                      np.array([0x00, 0x00, 0x6F, 0xEF, 0x80, 0x80], np.uint8))
        np.testing.assert_array_equal(codecs.hif8_encode(xs, rounding=rounding, saturate=True),
                                      np.array([0x00, 0x00, 0x6E, 0xEE, 0x00, 0x00], np.uint8))


def test_ta_random_against_reference():
    rng = np.random.default_rng(20240917)
    n = 200_000
    e = rng.integers(-30, 18, n)
    bits = ((e + 127).astype(np.uint32) << 23) | rng.integers(0, 1 << 23, n).astype(np.uint32)
    bits |= rng.integers(0, 2, n).astype(np.uint32) << 31
    x32 = bits.view(np.float32)
    for sat in (False, True):
        np.testing.assert_array_equal(codecs.hif8_encode(x32, saturate=sat), ref_encode_ta(x32, sat))
    x64 = x32.astype(np.float64) * (1 + rng.uniform(-2.0 ** -30, 2.0 ** -30, n))
    np.testing.assert_array_equal(codecs.hif8_encode(x64), ref_encode_ta(x64))


def test_float64_rounds_directly():
    # a double just below the 16/20 midpoint rounds down; via fp32 it would become 18.0 and go up
    x = np.nextafter(18.0, 0.0)
    assert np.float32(x) == 18.0
    assert codecs.hif8_encode(np.float64(x)) == 0x40
    assert codecs.hif8_encode(np.float32(x)) == 0x41


# ---- hybrid ------------------------------------------------------------------------------------------------
def test_hybrid_literal_examples():
    assert codecs.hif8_encode(np.float32(16.0), rounding="hybrid") == 0x41        # 16 -> 20 (spec)
    assert REF[0x41] == 20.0
    # |e| < 4: plain TA, exact values stay
    np.testing.assert_array_equal(codecs.hif8_encode(np.float32([1.0, 1.125, 7.5, 15.0]), rounding="hybrid"),
                                  ref_encode_ta([1.0, 1.125, 7.5, 15.0]))
    # 32768 stays: E = 15 holds only 32768 (documented)
    assert codecs.hif8_encode(np.float32(32768.0), rounding="hybrid") == 0x6E


def test_hybrid_random_against_reference():
    rng = np.random.default_rng(7)
    n = 20_000
    e = rng.integers(-24, 17, n)
    bits = ((e + 127).astype(np.uint32) << 23) | rng.integers(0, 1 << 23, n).astype(np.uint32)
    bits |= rng.integers(0, 2, n).astype(np.uint32) << 31
    # mantissas whose low 14 bits equal / straddle the top dropped bits, and exact values
    x = np.concatenate([bits.view(np.float32), POS_VALUES[1:].astype(np.float32),
                        -POS_VALUES[1:].astype(np.float32), (GRID[:-1] + GRID[1:]).astype(np.float32) / 2])
    got = codecs.hif8_encode(x, rounding="hybrid")
    want = np.array([ref_encode_hybrid(float(v)) for v in x], dtype=np.uint8)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ref_encode_hybrid_vec(x), want)        # the two references agree
    # and float64 input uses the fp32 pattern
    np.testing.assert_array_equal(codecs.hif8_encode(x.astype(np.float64), rounding="hybrid"), want)


def test_hybrid_large_sample_against_vectorised_reference():
    rng = np.random.default_rng(77)
    n = 1_000_000
    e = rng.integers(-26, 17, n)
    bits = ((e + 127).astype(np.uint32) << 23) | rng.integers(0, 1 << 23, n).astype(np.uint32)
    bits |= rng.integers(0, 2, n).astype(np.uint32) << 31
    x = bits.view(np.float32)
    for sat in (False, True):
        want = ref_encode_hybrid_vec(x)
        if sat:
            want = np.where((want & 0x7F) == 0x6F, want - 1, want).astype(np.uint8)
        np.testing.assert_array_equal(codecs.hif8_encode(x, rounding="hybrid", saturate=sat), want)


# ---- cross-check against en_dtypes -------------------------------------------------------------------------
def test_ta_matches_en_dtypes_fp32():
    en = pytest.importorskip("en_dtypes")
    rng = np.random.default_rng(12345)
    n = 1_000_000
    e = rng.integers(-40, 20, n)                        # log-uniform magnitudes, 2^-40 .. 2^20
    bits = ((e + 127).astype(np.uint32) << 23) | rng.integers(0, 1 << 23, n).astype(np.uint32)
    bits |= rng.integers(0, 2, n).astype(np.uint32) << 31
    mids = ((GRID[:-1] + GRID[1:]) / 2).astype(np.float32)
    extra = np.concatenate([mids, np.nextafter(mids, np.float32(0)), np.nextafter(mids, np.float32(np.inf)),
                            POS_VALUES.astype(np.float32),
                            np.float32([np.inf, 0.0, 1e-45, 3e38, 40960.0, 2.0 ** -23])])
    x = np.concatenate([bits.view(np.float32), extra, -extra])
    ours = codecs.hif8_encode(x)
    theirs = x.astype(en.hifloat8).view(np.uint8)
    np.testing.assert_array_equal(ours, theirs)
    # NaN: both give 0x80; -0.0: both give 0x00
    assert codecs.hif8_encode(np.float32(np.nan)) == np.float32([np.nan]).astype(en.hifloat8).view(np.uint8)[0]
    assert codecs.hif8_encode(np.float32(-0.0)) == np.float32([-0.0]).astype(en.hifloat8).view(np.uint8)[0]


def test_en_dtypes_decode_agrees():
    en = pytest.importorskip("en_dtypes")
    theirs = np.arange(256, dtype=np.uint8).view(en.hifloat8).astype(np.float32)
    ours = codecs.hif8_decode(np.arange(256, dtype=np.uint8))
    np.testing.assert_array_equal(ours, theirs)         # NaN positions compare equal in assert_array_equal


# ---- the public wrappers (all codecs) ----------------------------------------------------------------------
ALL_ENCODERS = [
    lambda a: codecs.hif8_encode(a),
    lambda a: codecs.hif8_encode(a, rounding="hybrid", saturate=True),
    lambda a: codecs.round_to_hf32(a),
    lambda a: codecs.round_to_hf32(a, mantissa_bits=10, rounding="nearest_even"),
    lambda a: codecs.e4m3fn_encode(a),
    lambda a: codecs.round_to_fp16(a),
    lambda a: codecs.round_to_bf16(a),
]


@pytest.mark.parametrize("enc", ALL_ENCODERS)
def test_wrappers_keep_shape_and_accept_strides(enc):
    rng = np.random.default_rng(3)
    base = (rng.standard_normal((6, 5, 8)) * 100).astype(np.float32)
    view = base[::2, ::-1, 1::3].transpose(2, 0, 1)           # non-contiguous, negative strides
    got = enc(view)
    assert got.shape == view.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got.view(np.uint8) if got.dtype.itemsize == 1 else got,
                                  (lambda r: r.view(np.uint8) if r.dtype.itemsize == 1 else r)(
                                      enc(np.ascontiguousarray(view)).reshape(view.shape)))
    flat = enc(view.reshape(-1).copy())
    np.testing.assert_array_equal(np.asarray(got).reshape(-1).view(np.uint8), np.asarray(flat).view(np.uint8))
    # scalars, lists, empty arrays, other input dtypes
    assert enc(1.5).shape == ()
    assert enc([[1.0, 2.0]]).shape == (1, 2)
    assert enc(np.zeros((0, 3), np.float32)).shape == (0, 3)
    for dt in (np.float16, np.float64, np.int32, np.uint8, np.bool_):
        assert enc(np.ones((2, 2), dtype=dt)).shape == (2, 2)


def test_wrappers_convert_input_dtypes():
    import ml_dtypes
    x = np.array([1.0, 18.0, 2.0 ** -20, 3.0], dtype=np.float32)
    for dt in (np.float16, ml_dtypes.bfloat16):
        np.testing.assert_array_equal(codecs.hif8_encode(x.astype(dt)),
                                      codecs.hif8_encode(x.astype(dt).astype(np.float32)))
    np.testing.assert_array_equal(codecs.hif8_encode(np.array([18, 7, -300], np.int64)),
                                  ref_encode_ta([18.0, 7.0, -300.0]))
    np.testing.assert_array_equal(codecs.hif8_encode(np.array([True, False])), [0x08, 0x00])
    codes = np.array([0x41, 0xC1], np.uint8)
    np.testing.assert_array_equal(codecs.hif8_decode(codes.astype(np.int64)), [20.0, -20.0])
    np.testing.assert_array_equal(codecs.hif8_decode(codes.view(np.int8)), [20.0, -20.0])
    np.testing.assert_array_equal(codecs.hif8_decode(codes.reshape(2, 1)[::-1]), [[-20.0], [20.0]])


def test_wrappers_multithreaded_equals_serial():
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(1 << 17) * np.exp2(rng.uniform(-24, 16, 1 << 17))).astype(np.float32)
    for nt in (2, 3):
        np.testing.assert_array_equal(codecs.hif8_encode(x, num_threads=nt), codecs.hif8_encode(x, num_threads=1))
        np.testing.assert_array_equal(codecs.hif8_encode(x.astype(np.float64), num_threads=nt),
                                      codecs.hif8_encode(x.astype(np.float64), num_threads=1))
        np.testing.assert_array_equal(codecs.round_to_hf32(x, num_threads=nt), codecs.round_to_hf32(x, num_threads=1))
    np.testing.assert_array_equal(codecs.hif8_encode(x), ref_encode_ta(x))


@pytest.mark.parametrize("call, pattern", [
    (lambda: codecs.hif8_encode([1.0], rounding="nearest"), r"rounding must be one of 'ta', 'hybrid', got 'nearest'"),
    (lambda: codecs.hif8_encode([1.0], rounding=0), r"rounding must be one of .*got 0"),
    (lambda: codecs.hif8_encode([1.0], saturate="yes"), r"saturate must be a bool.*'yes'"),
    (lambda: codecs.hif8_encode([1.0], saturate=2), r"saturate must be a bool.*got 2"),
    (lambda: codecs.hif8_encode(np.array(["a"])), r"x must be a real numeric array-like.*got dtype <U1"),
    (lambda: codecs.hif8_encode(np.array([1 + 2j])), r"x must be a real numeric.*complex128"),
    (lambda: codecs.hif8_decode(np.array([1.0])), r"codes must be an array of uint8 codes, got dtype float64"),
    (lambda: codecs.hif8_decode(np.array([256])), r"codes must hold 8-bit codes 0\.\.255.*\[256, 256\]"),
    (lambda: codecs.hif8_decode(np.array([-1, 3])), r"codes must hold 8-bit codes 0\.\.255.*\[-1, 3\]"),
    (lambda: codecs.round_to_hf32([1.0], mantissa_bits=0), r"mantissa_bits must be an integer in 1\.\.22.*got 0"),
    (lambda: codecs.round_to_hf32([1.0], rounding="half_even"),
     r"rounding must be one of 'half_away', 'nearest_even', got 'half_even'"),
    (lambda: codecs.e4m3fn_encode([1.0], saturate=None), r"saturate must be a bool.*None"),
    (lambda: codecs.hif8_encode([1.0], num_threads=0), r"num_threads is 0; expected an integer in \[1, "),
])
def test_wrappers_reject_bad_arguments(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()
