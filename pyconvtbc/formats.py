"""One record per numeric format that pyconvtbc reads, computes in or writes.

Pure Python (plus NumPy for the vectorised ``ulp`` helpers); nothing here imports compiled code, so these
records are an independent statement of the formats (the codecs live in ``_kernels/_fpround.pxd``).
Limits are written as hexadecimal floats with the arithmetic beside them, in the manner of ml_dtypes'
``_finfo.py``.  See docs/precision.md for the rounding rules.

Formats: ``HIFLOAT8``, ``FLOAT8_E4M3FN``, ``HF32`` (11 mantissa bits, ascend910b), ``HF32_10`` (10 bits,
ascend950), ``FLOAT16``, ``BFLOAT16``, ``FLOAT32``; ``FORMATS`` maps their names to the records and
``hf32(n)`` builds the HF32 record for any 1 <= n <= 22.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Tuple

import numpy as np

__all__ = [
    "HiF8DotClass",
    "FloatFormat",
    "HIF8_DOT_CLASSES",
    "HIFLOAT8",
    "FLOAT8_E4M3FN",
    "HF32",
    "HF32_10",
    "FLOAT16",
    "BFLOAT16",
    "FLOAT32",
    "FORMATS",
    "hf32",
    "get_format",
    "representable_values",
    "ulp",
    "ulp_distance",
]


@dataclass(frozen=True)
class HiF8DotClass:
    """One row of the HiFloat8 dot-prefix table (HiFloat8 paper, Tables 1-4; docs/precision.md, "HiFloat8").

    Code (S = 0) = dot prefix | exponent field (D bits) | mantissa (m bits).  For D >= 1 the first exponent bit
    is the sign of E (1 = negative) and the other D - 1 bits are |E| - 2^(D-1) (an implicit leading 1):
    |E| = 2^(D-1) + bits.  The denormal class (dot ``0000``) has no exponent: value 2^(M - 23), M = 1..7.
    """

    dot: str                 # prefix bits as written in the paper
    exponent_bits: int       # D (0 for dot 0001; None-like 0 for the denormal class too)
    mantissa_bits: int       # m: explicit mantissa bits of a normal value (3-bit M field for denormals)
    e_abs_min: int           # smallest |E| in the class
    e_abs_max: int           # largest |E| in the class
    code_first: int          # first code with S = 0
    code_last: int           # last code with S = 0
    denormal: bool = False

    @property
    def e_range(self) -> Tuple[int, ...]:
        """Every exponent E of the class, ascending (empty for the denormal class)."""
        if self.denormal:
            return ()
        es = set()
        for a in range(self.e_abs_min, self.e_abs_max + 1):
            es.add(a)
            es.add(-a)
        return tuple(sorted(es))


HIF8_DOT_CLASSES: Tuple[HiF8DotClass, ...] = (
    #            dot    D  m  |E|     codes (S=0)
    HiF8DotClass("11", 4, 1, 8, 15, 0b0_11_0000_0, 0b0_11_1111_1),    # 0x60-0x7F, |E| = 8 + 3 bits
    HiF8DotClass("10", 3, 2, 4, 7, 0b0_10_000_00, 0b0_10_111_11),     # 0x40-0x5F, |E| = 4 + 2 bits
    HiF8DotClass("01", 2, 3, 2, 3, 0b0_01_00_000, 0b0_01_11_111),     # 0x20-0x3F, |E| = 2 + 1 bit
    HiF8DotClass("001", 1, 3, 1, 1, 0b0_001_0_000, 0b0_001_1_111),    # 0x10-0x1F, |E| = 1
    HiF8DotClass("0001", 0, 3, 0, 0, 0b0_0001_000, 0b0_0001_111),     # 0x08-0x0F, E = 0
    HiF8DotClass("0000", 0, 3, 0, 0, 0b0_0000_000, 0b0_0000_111, denormal=True),  # 0x00 zero, 0x01-0x07
)


@dataclass(frozen=True)
class FloatFormat:
    """Limits and codes of one format (values are Python floats; codes are bit patterns)."""

    name: str
    bits: int                     # storage width of the format itself (HF32: 1 + 8 + N, held in an fp32)
    exponent_bits: Optional[int]  # None for HiFloat8 (tapered: 0..4 exponent bits)
    mantissa_bits: int            # explicit mantissa bits (HiFloat8: the widest class, 3)
    bias: Optional[int]
    max: float                    # largest finite value
    min_normal: float             # smallest positive normal
    min_subnormal: float          # smallest positive value
    eps: float                    # 1.0's successor minus 1.0
    has_inf: bool
    has_negative_zero: bool
    nan_codes: Tuple[int, ...]    # canonical NaN patterns (+, - where both exist)
    inf_codes: Tuple[int, ...] = ()   # (+inf, -inf) patterns
    max_code: Optional[int] = None    # pattern of +max
    rounding: str = "nearest_even"
    notes: str = ""
    dot_classes: Tuple[HiF8DotClass, ...] = field(default=(), repr=False)

    @property
    def is_tapered(self) -> bool:
        return bool(self.dot_classes)

    @property
    def min_exponent(self) -> int:
        """Exponent of min_normal (IEEE-like formats)."""
        return int(np.frexp(self.min_normal)[1]) - 1


# ---- HiFloat8 ------------------------------------------------------------------------------------------
HIFLOAT8 = FloatFormat(
    name="hifloat8",
    bits=8,
    exponent_bits=None,
    mantissa_bits=3,
    bias=None,
    max=float.fromhex("0x1p15"),            # 0x6E = 0|11|0111|0: E = +(8+7) = 15, M = 0 -> 2^15 = 32768
    min_normal=float.fromhex("0x1p-15"),    # 0x7E = 0|11|1111|0: E = -(8+7) = -15 -> 2^-15
    min_subnormal=float.fromhex("0x1p-22"),  # 0x01 = 0|0000|001: 2^(1-23) = 2^-22
    eps=float.fromhex("0x0.2p0"),           # E = 0 class has m = 3: 1 + 2^-3 = 1.125 -> eps = 0.125
    has_inf=True,
    has_negative_zero=False,                # 0x80 is NaN, 0x00 the only zero
    nan_codes=(0x80,),
    inf_codes=(0x6F, 0xEF),                 # the patterns of +-1.5 * 2^15 = +-49152
    max_code=0x6E,
    rounding="ta",
    notes="overflow: |x| >= 40960 = 0x1.4p15 (midpoint of 32768 and 49152, ties away) -> +-Inf or +-32768",
    dot_classes=HIF8_DOT_CLASSES,
)
HIF8_OVERFLOW = float.fromhex("0x1.4p15")   # 40960 = 1.25 * 2^15
HIF8_UNDERFLOW = float.fromhex("0x1p-23")   # |x| < 2^-23 -> 0; [2^-23, 2^-22) -> 2^-22

# ---- FLOAT8_E4M3FN (OCP) ---------------------------------------------------------------------------------
FLOAT8_E4M3FN = FloatFormat(
    name="float8_e4m3fn",
    bits=8,
    exponent_bits=4,
    mantissa_bits=3,
    bias=7,
    max=float.fromhex("0x1.cp8"),            # S.1111.110 = 0b1.110 * 2^(15-7) = 1.75 * 256 = 448
    min_normal=float.fromhex("0x1p-6"),      # S.0001.000 = 2^(1-7)
    min_subnormal=float.fromhex("0x1p-9"),   # S.0000.001 = 2^-3 * 2^(1-7) = 2^-9
    eps=float.fromhex("0x0.2p0"),            # 2^-3 = 0.125
    has_inf=False,
    has_negative_zero=True,
    nan_codes=(0x7F, 0xFF),                  # S.1111.111
    max_code=0x7E,
    notes="default overflow: |x| > 464 = 0x1.dp8 (464 itself ties to even 448) -> NaN; saturate: +-448",
)


# ---- HF32 -------------------------------------------------------------------------------------------------
def hf32(mantissa_bits: int = 11) -> FloatFormat:
    """HF32 with fp32's 8-bit exponent and ``mantissa_bits`` explicit mantissa bits (11: ascend910b, 10: 950)."""
    n = int(mantissa_bits)
    if not 1 <= n <= 22:
        raise ValueError(f"mantissa_bits must be an integer in 1..22, got {mantissa_bits!r}")
    return FloatFormat(
        name="hf32" if n == 11 else f"hf32_{n}",
        bits=1 + 8 + n,
        exponent_bits=8,
        mantissa_bits=n,
        bias=127,
        max=(2.0 - 2.0 ** -n) * 2.0 ** 127,    # 0b1.11..1 (n ones) * 2^127
        min_normal=2.0 ** -126,               # as fp32
        min_subnormal=2.0 ** (-126 - n),      # fp32 subnormal field keeps its top n bits: 2^-126 * 2^-n
        eps=2.0 ** -n,
        has_inf=True,
        has_negative_zero=True,
        nan_codes=(0x7FC00000, 0xFFC00000),   # held in fp32
        inf_codes=(0x7F800000, 0xFF800000),
        max_code=(0xFF << 23) - (1 << (23 - n)),  # 0x7F7FF000 for n = 11
        rounding="half_away",
        notes="default rounding: ((bits >> (22-n)) + 1) >> 1 << (23-n) (Huawei golden), i.e. round half away "
              "from zero on the magnitude; nearest_even optional",
    )


HF32 = hf32(11)      # max = (2 - 2^-11) * 2^127 = 0x1.ffep127, pattern 0x7F7FF000
HF32_10 = hf32(10)   # max = (2 - 2^-10) * 2^127 = 0x1.ffcp127, pattern 0x7F7FE000

# ---- IEEE formats -----------------------------------------------------------------------------------------
FLOAT16 = FloatFormat(
    name="float16",
    bits=16,
    exponent_bits=5,
    mantissa_bits=10,
    bias=15,
    max=float.fromhex("0x1.ffcp15"),         # (2 - 2^-10) * 2^15 = 65504
    min_normal=float.fromhex("0x1p-14"),
    min_subnormal=float.fromhex("0x1p-24"),  # 2^-10 * 2^-14
    eps=float.fromhex("0x1p-10"),
    has_inf=True,
    has_negative_zero=True,
    nan_codes=(0x7E00, 0xFE00),
    inf_codes=(0x7C00, 0xFC00),
    max_code=0x7BFF,
    notes="overflow: |x| >= 65520 = 0x1.ffep15 (tie above 65504 goes to even = inf) -> +-inf",
)
BFLOAT16 = FloatFormat(
    name="bfloat16",
    bits=16,
    exponent_bits=8,
    mantissa_bits=7,
    bias=127,
    max=float.fromhex("0x1.fep127"),         # (2 - 2^-7) * 2^127
    min_normal=float.fromhex("0x1p-126"),
    min_subnormal=float.fromhex("0x1p-133"),  # 2^-7 * 2^-126
    eps=float.fromhex("0x1p-7"),
    has_inf=True,
    has_negative_zero=True,
    nan_codes=(0x7FC0, 0xFFC0),
    inf_codes=(0x7F80, 0xFF80),
    max_code=0x7F7F,
)
FLOAT32 = FloatFormat(
    name="float32",
    bits=32,
    exponent_bits=8,
    mantissa_bits=23,
    bias=127,
    max=float.fromhex("0x1.fffffep127"),     # (2 - 2^-23) * 2^127
    min_normal=float.fromhex("0x1p-126"),
    min_subnormal=float.fromhex("0x1p-149"),  # 2^-23 * 2^-126
    eps=float.fromhex("0x1p-23"),
    has_inf=True,
    has_negative_zero=True,
    nan_codes=(0x7FC00000, 0xFFC00000),
    inf_codes=(0x7F800000, 0xFF800000),
    max_code=0x7F7FFFFF,
)

FORMATS = {f.name: f for f in (HIFLOAT8, FLOAT8_E4M3FN, HF32, HF32_10, FLOAT16, BFLOAT16, FLOAT32)}


def get_format(fmt) -> FloatFormat:
    """A FloatFormat from a record or a name (``"hifloat8"``, ``"hf32"``, ``"hf32_10"``, ...)."""
    if isinstance(fmt, FloatFormat):
        return fmt
    if isinstance(fmt, str) and fmt.lower() in FORMATS:
        return FORMATS[fmt.lower()]
    raise ValueError(f"fmt must be a FloatFormat or one of {sorted(FORMATS)}, got {fmt!r}")


# ---- HiFloat8 value set, straight from the dot-class table ------------------------------------------------
def _hif8_positive_values() -> np.ndarray:
    """Every positive finite HiFloat8 value, ascending (126 values; 1.5 * 2^15 is the Inf pattern)."""
    vals = set()
    for cls in HIF8_DOT_CLASSES:
        if cls.denormal:
            vals.update(2.0 ** (mm - 23) for mm in range(1, 8))
            continue
        for e in cls.e_range:
            for mm in range(1 << cls.mantissa_bits):
                vals.add(2.0 ** e * (1.0 + mm / (1 << cls.mantissa_bits)))
    vals.discard(1.5 * 2.0 ** 15)
    return np.array(sorted(vals), dtype=np.float64)


_HIF8_POS = _hif8_positive_values()


def representable_values(fmt) -> np.ndarray:
    """All non-negative finite values of an 8- or 16-bit format, ascending, as float64 (0 first)."""
    f = get_format(fmt)
    if f.is_tapered:
        return np.concatenate(([0.0], _HIF8_POS))
    if f.bits > 16:
        raise ValueError(f"fmt {f.name!r} has too many values to list (bits={f.bits}); expected <= 16 bits")
    m, emin = f.mantissa_bits, f.min_exponent
    sub = np.arange(0, 1 << m, dtype=np.float64) * f.min_subnormal
    binades = []
    e = emin
    while 2.0 ** e <= f.max:
        binades.append(2.0 ** e * (1.0 + np.arange(1 << m) / (1 << m)))
        e += 1
    v = np.concatenate([sub] + binades)
    return v[v <= f.max]


# ---- ulp / ulp_distance -----------------------------------------------------------------------------------
def _ordinal(f: FloatFormat, x: np.ndarray) -> np.ndarray:
    """Signed, piecewise-linear position of x among the format's finite values (0 -> 0, k-th value -> k).

    Between two consecutive values the position is interpolated linearly; past the largest finite value it
    continues with the last gap.  +-inf -> +-inf, NaN -> NaN.
    """
    a = np.abs(x)
    if f.is_tapered:
        vals = np.concatenate(([0.0], _HIF8_POS))
        k = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, len(vals) - 2)
        lo, hi = vals[k], vals[k + 1]
        pos = k + (a - lo) / (hi - lo)
    else:
        m, emin = f.mantissa_bits, f.min_exponent
        with np.errstate(invalid="ignore", divide="ignore"):
            # subnormals: a / 2^(emin-m) in [0, 2^m); binade e >= emin starts at ordinal (e - emin + 1) * 2^m
            # and a / 2^(e-m) runs over [2^m, 2^(m+1)) inside it.  Past max: continue with the last step.
            top = f.max
            top_e = int(np.frexp(top)[1]) - 1
            top_step = 2.0 ** (top_e - m)
            top_pos = (top_e - emin + 1) * 2.0 ** m + (top / top_step - 2.0 ** m)
            _, ex = np.frexp(np.minimum(a, top))
            e = np.maximum(ex.astype(np.float64) - 1, emin)
            step = np.exp2(e - m)
            pos = np.where(a >= 2.0 ** emin, (e - emin + 1) * 2.0 ** m + (a / step - 2.0 ** m), a / step)
            pos = np.where(a > top, top_pos + (a - top) / top_step, pos)
    pos = np.where(np.isinf(a), np.inf, pos)
    pos = np.where(np.isnan(a), np.nan, pos)
    return np.copysign(pos, x)


def ulp(fmt, x) -> np.ndarray:
    """Width of the gap between the two consecutive finite values of ``fmt`` that bracket |x| (float64).

    For a representable x that is the distance to the next value away from zero (like ``np.spacing``);
    HiFloat8's ulp is tapered (the gap in value order among finite codes).  At and beyond the largest
    finite value the last gap is used; +-inf -> inf, NaN -> NaN.
    """
    f = get_format(fmt)
    a = np.abs(np.asarray(x, dtype=np.float64))
    if f.is_tapered:
        vals = np.concatenate(([0.0], _HIF8_POS))
        k = np.clip(np.searchsorted(vals, a, side="right") - 1, 0, len(vals) - 2)
        out = vals[k + 1] - vals[k]
    else:
        m, emin = f.mantissa_bits, f.min_exponent
        with np.errstate(divide="ignore", invalid="ignore"):
            _, ex = np.frexp(np.minimum(a, f.max))
            e = np.where(a < 2.0 ** emin, emin, np.maximum(ex.astype(np.float64) - 1, emin))
            out = np.exp2(e - m)
    out = np.where(np.isinf(a), np.inf, out)
    out = np.where(np.isnan(a), np.nan, out)
    return out[()] if out.ndim == 0 else out


def ulp_distance(fmt, a, b) -> np.ndarray:
    """How many steps of ``fmt`` lie between a and b (float64; an integer when both are representable).

    Positions are counted among the format's finite values in value order (for HiFloat8 that is its
    tapered code order), interpolated linearly inside a gap, sign-symmetric around 0 (+0 and -0 coincide).
    Infinite when exactly one side is infinite (0 when both are the same infinity), NaN when either is NaN.
    """
    f = get_format(fmt)
    pa = _ordinal(f, np.asarray(a, dtype=np.float64))
    pb = _ordinal(f, np.asarray(b, dtype=np.float64))
    with np.errstate(invalid="ignore"):
        d = np.abs(pa - pb)
        d = np.where(np.isinf(pa) & np.isinf(pb) & (pa == pb), 0.0, d)
    return d[()] if d.ndim == 0 else d
