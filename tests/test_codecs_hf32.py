"""HF32 rounding (SEMANTICS.md section 3) against an exact integer reference written here."""
import numpy as np
import pytest

from pyconvtbc import codecs

ROUNDINGS = ("half_away", "nearest_even")


def ref_hf32_bits(x, n, rounding):
    """Exact reference on the fp32 pattern: int64 arithmetic on the 31-bit magnitude, sign kept.

    Drop d = 23 - n bits: q, r = divmod(mag, 2^d); half away: up iff r >= 2^(d-1); nearest even: up iff
    r > 2^(d-1), or r == 2^(d-1) and q is odd.  Result (q + up) * 2^d (a carry into the exponent is kept,
    so FLT_MAX -> inf).  inf and NaN patterns are returned unchanged.
    """
    b = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.int64)
    sign = b & 0x80000000
    mag = b & 0x7FFFFFFF
    d = 23 - n
    q, r = mag >> d, mag & ((1 << d) - 1)
    half = 1 << (d - 1)
    if rounding == "half_away":
        up = r >= half
    else:
        up = (r > half) | ((r == half) & ((q & 1) == 1))
    out = sign | ((q + up.astype(np.int64)) << d)
    out = np.where(mag >= 0x7F800000, b, out)              # inf, NaN unchanged
    return out.astype(np.uint32)


def bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def random_f32(rng, n):
    e = rng.integers(0, 255, n).astype(np.uint32)          # every exponent incl. subnormals, not inf/nan
    m = rng.integers(0, 1 << 23, n).astype(np.uint32)
    s = rng.integers(0, 2, n).astype(np.uint32)
    return ((s << 31) | (e << 23) | m).view(np.float32)


@pytest.mark.parametrize("n", [11, 10])
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_random_against_reference(n, rounding):
    rng = np.random.default_rng(n * 7 + len(rounding))
    x = random_f32(rng, 200_000)
    got = codecs.round_to_hf32(x, mantissa_bits=n, rounding=rounding)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(bits(got), ref_hf32_bits(x, n, rounding))


@pytest.mark.parametrize("n", [11, 10])
def test_every_tie_pattern(n):
    """Dropped bits 100..0 (tie), 100..01 (above), 011..1 (below), for kept parity 0 and 1, all exponents."""
    d = 23 - n
    rng = np.random.default_rng(99 + n)
    exps = np.arange(0, 255, dtype=np.uint32)
    cases = []
    for parity in (0, 1):
        kept = (rng.integers(0, 1 << (n - 1), exps.size).astype(np.uint32) << 1) | parity
        for drop in ((1 << (d - 1)), (1 << (d - 1)) | 1, (1 << (d - 1)) - 1):
            for s in (0, 1):
                cases.append((np.uint32(s) << 31) | (exps << 23) | (kept << d) | np.uint32(drop))
    x = np.concatenate(cases).view(np.float32)
    for rounding in ROUNDINGS:
        got = bits(codecs.round_to_hf32(x, mantissa_bits=n, rounding=rounding))
        np.testing.assert_array_equal(got, ref_hf32_bits(x, n, rounding))
    # the two roundings differ exactly on ties with even kept part
    tie_even = np.concatenate([cases[0], cases[1]]).view(np.float32)
    ha = bits(codecs.round_to_hf32(tie_even, mantissa_bits=n))
    ne = bits(codecs.round_to_hf32(tie_even, mantissa_bits=n, rounding="nearest_even"))
    np.testing.assert_array_equal(ha - ne, np.uint32(1 << d))


@pytest.mark.parametrize("n", [11, 10])
def test_matches_huawei_golden_formula(n):
    """((bits >> (22-n)) + 1) >> 1 << (23-n) on the signed int32 pattern (NumPy arithmetic shifts)."""
    rng = np.random.default_rng(5 + n)
    x = random_f32(rng, 100_000)
    i = x.view(np.int32)
    golden = (((i >> (22 - n)) + 1) >> 1) << (23 - n)
    got = codecs.round_to_hf32(x, mantissa_bits=n, rounding="half_away")
    np.testing.assert_array_equal(got.view(np.int32), golden)


def test_worked_example():
    # 1 + 2^-12: 11 kept bits 000..0, dropped 1000..0 -> tie; half away -> 1 + 2^-11, even -> 1
    x = np.float32([1 + 2.0 ** -12, -(1 + 2.0 ** -12), 1 + 3 * 2.0 ** -12])
    np.testing.assert_array_equal(codecs.round_to_hf32(x), np.float32([1 + 2.0 ** -11, -(1 + 2.0 ** -11),
                                                                       1 + 2 * 2.0 ** -11]))
    np.testing.assert_array_equal(codecs.round_to_hf32(x, rounding="nearest_even"),
                                  np.float32([1.0, -1.0, 1 + 2 * 2.0 ** -11]))
    # n = 10 ties at 2^-11
    assert codecs.round_to_hf32(np.float32(1 + 2.0 ** -11), mantissa_bits=10) == np.float32(1 + 2.0 ** -10)


@pytest.mark.parametrize("n", [11, 10])
@pytest.mark.parametrize("rounding", ROUNDINGS)
def test_specials(n, rounding):
    fmax = np.finfo(np.float32).max
    x = np.float32([np.inf, -np.inf, 0.0, -0.0, fmax, -fmax, 2.0 ** -149, 2.0 ** -126, 1.5 * 2.0 ** -130])
    got = codecs.round_to_hf32(x, mantissa_bits=n, rounding=rounding)
    np.testing.assert_array_equal(bits(got), ref_hf32_bits(x, n, rounding))
    assert got[0] == np.inf and got[1] == -np.inf
    assert bits(got[2]) == 0 and bits(got[3]) == 0x80000000
    assert got[4] == np.inf and got[5] == -np.inf          # carry out of the top binade: kept (formula)
    assert got[6] == 0.0                                    # smallest subnormal rounds to 0 (dropped bits only)
    assert got[7] == 2.0 ** -126
    # NaN stays NaN (including payloads that live only in the dropped bits)
    nans = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0x7FFFFFFF, 0xFF800FFF], np.uint32).view(np.float32)
    assert np.all(np.isnan(codecs.round_to_hf32(nans, mantissa_bits=n, rounding=rounding)))


def test_float64_input_rounds_to_fp32_first():
    x = np.float64(1.0) + 2.0 ** -12 - 2.0 ** -40        # below the tie in fp64, the tie itself in fp32
    assert np.float32(x) == np.float32(1 + 2.0 ** -12)
    assert codecs.round_to_hf32(x) == np.float32(1 + 2.0 ** -11)


def test_arguments():
    with pytest.raises(ValueError, match=r"mantissa_bits.*1\.\.22.*23"):
        codecs.round_to_hf32([1.0], mantissa_bits=23)
    with pytest.raises(ValueError, match="mantissa_bits.*True"):
        codecs.round_to_hf32([1.0], mantissa_bits=True)
    with pytest.raises(ValueError, match="mantissa_bits.*11.0"):
        codecs.round_to_hf32([1.0], mantissa_bits=11.0)
    with pytest.raises(ValueError, match="rounding.*'half_away'.*'nearest_even'.*'ta'"):
        codecs.round_to_hf32([1.0], rounding="ta")
    with pytest.raises(ValueError, match="x must be a real numeric.*complex"):
        codecs.round_to_hf32(np.array([1j]))
    # other widths are accepted
    assert codecs.round_to_hf32(np.float32(1.0 + 2.0 ** -3), mantissa_bits=2) == np.float32(1.25)
