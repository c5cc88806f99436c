"""One record per numeric format that pyconvtbc reads, computes in or writes.

Pure Python (plus NumPy for the vectorised ``ulp`` helpers); nothing here imports compiled code, so these
records are an independent statement of the formats (the codecs live in ``_kernels/_fpround.pxd``).
Limits are written as hexadecimal floats with the arithmetic beside them, in the manner of ml_dtypes'
``_finfo.py``.  See docs/precision.md for the rounding rules.

Formats: ``HIFLOAT8``, ``FLOAT8_E4M3FN``, ``HF32`` (11 mantissa bits, ascend910b), ``HF32_10`` (10 bits,
ascend950), ``FLOAT16``, ``BFLOAT16``, ``FLOAT32``; ``FORMATS`` maps their names to the records and
``hf32(n)`` builds the HF32 record for any 1 <= n <= 22.

The registry (end of this file) is the one place that describes each CANN data type: ``DATA_TYPES`` holds a
``DataType`` record per aclDataType (code, NumPy storage dtype, item size, names and aliases, the roles it may
play in an operator, its overflow limit and its codec functions); ``HF32_ROUNDINGS``, ``HIF8_ROUNDINGS`` and
``COMPUTE_PRECISIONS`` declare the rounding modes and compute precisions beside it.  Every layer reads these:
``enums`` builds ``aclDataType`` from them, the validation, the NumPy layer, the torch bridge, the codecs,
the profiles and the study take their lists from the helpers here (docs/developer.md, "Adding a format").
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, FrozenSet, Optional, Tuple

import numbers
import operator

import ml_dtypes
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
    "DataType",
    "DATA_TYPES",
    "OPERAND",
    "BIAS",
    "GRAD_WEIGHT",
    "EIGHT_BIT_OPERAND",
    "data_type",
    "codes_with_role",
    "by_name",
    "data_type_named",
    "HF32_ROUNDINGS",
    "HIF8_ROUNDINGS",
    "ComputePrecision",
    "COMPUTE_PRECISIONS",
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
    # (this module imports nothing of the package's: the registry loads first, so the checks are local)
    n = None
    if isinstance(mantissa_bits, numbers.Integral) and not isinstance(mantissa_bits, bool):
        try:
            n = int(operator.index(mantissa_bits))
        except Exception:
            n = None
    if n is None or not 1 <= n <= 22:
        raise ValueError(f"mantissa_bits must be an integer in 1..22, got {_shown(mantissa_bits)}")
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


def _shown(value) -> str:
    """repr(value) for a message, never raising."""
    try:
        return repr(value)[:120]
    except Exception:
        return f"<{type(value).__name__} object>"


def is_en_hifloat8(dt: object) -> bool:
    """True for en_dtypes' ``hifloat8`` (the dtype, its scalar type or an array of it): HiFloat8 codes held as
    their own NumPy dtype, bit for bit the ``uint8`` codes pyconvtbc uses (``arr.view(np.uint8)``).  en_dtypes is
    not imported here: a value from it can only exist if the user has it."""
    try:
        d = np.dtype(getattr(dt, "dtype", dt))
        return d.kind == "V" and d.itemsize == 1 and d.name == "hifloat8" \
            and d.type.__module__.split(".")[0] == "en_dtypes"
    except Exception:
        return False


def is_float_like(dt: np.dtype) -> bool:
    """NumPy floats, and ml_dtypes / en_dtypes float types of at most 4 bytes (bfloat16, float8, ...)."""
    if dt.kind == "f":
        return True
    return dt.kind == "V" and dt.type.__module__.split(".")[0] in ("ml_dtypes", "en_dtypes") and dt.itemsize <= 4


def _real_f64(name, x) -> np.ndarray:
    """x as a float64 array, when it is real numeric (floats of any width, ml_dtypes' floats, integers,
    booleans); otherwise a ValueError naming the argument (complex, strings, None, objects)."""
    try:
        arr = np.asarray(x)
    except Exception as e:
        raise ValueError(f"{name} must be a real numeric array-like; converting {_shown(x)} failed "
                         f"({type(e).__name__})") from None
    dt = arr.dtype
    if not (dt.kind in "iub" or is_float_like(dt)):
        raise ValueError(f"{name} must be a real numeric array-like, got dtype {dt}")
    return arr.astype(np.float64)


def ulp(fmt, x) -> np.ndarray:
    """Width of the gap between the two consecutive finite values of ``fmt`` that bracket |x| (float64).

    For a representable x that is the distance to the next value away from zero (like ``np.spacing``);
    HiFloat8's ulp is tapered (the gap in value order among finite codes).  At and beyond the largest
    finite value the last gap is used; +-inf -> inf, NaN -> NaN.
    """
    f = get_format(fmt)
    a = np.abs(_real_f64("x", x))
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
    pa = _ordinal(f, _real_f64("a", a))
    pb = _ordinal(f, _real_f64("b", b))
    with np.errstate(invalid="ignore"):
        d = np.abs(pa - pb)
        d = np.where(np.isinf(pa) & np.isinf(pb) & (pa == pb), 0.0, d)
    return d[()] if d.ndim == 0 else d


# =========================================================================================================
# The registry: one record per CANN data type, and the rounding modes and compute precisions beside it.
# =========================================================================================================
OPERAND = "operand"          # self / input / weight / gradInput (and the forward's self / weight / out)
BIAS = "bias"                # bias / gradBias (any profile, BF16 included)
GRAD_WEIGHT = "grad_weight"  # an extra output format of gradWeight only (8-bit; never an input of the backward)
EIGHT_BIT_OPERAND = "eight_bit_operand"   # the forward's self / weight / out on chips with 8-bit operands


@dataclass(frozen=True)
class DataType:
    """One aclDataType: what every layer needs to know about it.

    acl / code: the aclDataType member name and value (CANN's headers).  storage: the NumPy dtype that holds
    its elements (HiFloat8: its uint8 codes), None when there is none.  itemsize: bytes per element (sub-byte
    types and STRING are given 1 so a descriptor can still be made and described; the operators reject them).
    name: the NumPy layer's word for it ('' for a type no operator takes); aliases: other spellings the study
    accepts, the short name first ('fp32', 'hif8').  roles: which tensors of an operator may hold it (OPERAND, BIAS,
    GRAD_WEIGHT).  values: the FloatFormat record of its limits.  overflow: (threshold, inclusive): a finite
    exact value at (inclusive) or past the threshold cannot be represented (it rounds to Inf / NaN or
    saturates).  encode / decode: the ``pyconvtbc.codecs`` functions fp32 -> storage and storage -> fp32
    (None: a NumPy ``astype`` is exact / correctly rounded); encode_keywords: which of ``rounding`` and
    ``saturate`` that encoder takes (the HiFloat8 rounding option applies where ``rounding`` is listed).
    """

    acl: str
    code: int
    storage: Optional[np.dtype] = None
    itemsize: int = 1
    name: str = ""
    aliases: Tuple[str, ...] = ()
    roles: FrozenSet[str] = frozenset()
    values: Optional[FloatFormat] = None
    overflow: Optional[Tuple[float, bool]] = None
    encode: Optional[str] = None
    decode: Optional[str] = None
    encode_keywords: Tuple[str, ...] = ()

    @property
    def short(self) -> str:
        """The CANN spelling in messages: 'FLOAT' for ACL_FLOAT."""
        return self.acl[4:]


def _dt(acl, code, storage=None, itemsize=None, **kw):
    st = None if storage is None else np.dtype(storage)
    return DataType(acl, code, st, itemsize if itemsize is not None else (st.itemsize if st is not None else 1),
                    **kw)


_FLOATS = frozenset({OPERAND, BIAS})
DATA_TYPES: Tuple[DataType, ...] = (
    _dt("ACL_DT_UNDEFINED", -1),
    # IEEE-like formats: overflow at max + half its ulp; max has an odd significand, so the tie rounds (to even)
    # up -> inclusive
    _dt("ACL_FLOAT", 0, np.float32, name="float32", aliases=("fp32", "float"), roles=_FLOATS, values=FLOAT32,
        overflow=(float.fromhex("0x1.fffffep127") + 2.0 ** (127 - 24), True)),
    _dt("ACL_FLOAT16", 1, np.float16, name="float16", aliases=("fp16", "half"), roles=_FLOATS, values=FLOAT16,
        overflow=(65504.0 + 16.0, True)),
    _dt("ACL_INT8", 2, np.int8),
    _dt("ACL_INT32", 3, np.int32),
    _dt("ACL_UINT8", 4, np.uint8),
    _dt("ACL_INT16", 6, np.int16),
    _dt("ACL_UINT16", 7, np.uint16),
    _dt("ACL_UINT32", 8, np.uint32),
    _dt("ACL_INT64", 9, np.int64),
    _dt("ACL_UINT64", 10, np.uint64),
    _dt("ACL_DOUBLE", 11, np.float64),
    _dt("ACL_BOOL", 12, np.bool_),
    _dt("ACL_STRING", 13),
    _dt("ACL_COMPLEX64", 16, np.complex64),
    _dt("ACL_COMPLEX128", 17, np.complex128),
    _dt("ACL_BF16", 27, ml_dtypes.bfloat16, name="bfloat16", aliases=("bf16",), roles=_FLOATS, values=BFLOAT16,
        overflow=(float.fromhex("0x1.fep127") + 2.0 ** (127 - 8), True)),
    _dt("ACL_INT4", 29),
    _dt("ACL_UINT1", 30),
    _dt("ACL_COMPLEX32", 33, itemsize=4),
    # HiFloat8: 40960 = 1.25 * 2^15, ties away from zero -> inclusive (docs/semantics.md, section 5)
    _dt("ACL_HIFLOAT8", 34, np.uint8, name="hifloat8", aliases=("hif8",), roles=frozenset({GRAD_WEIGHT, EIGHT_BIT_OPERAND}),
        values=HIFLOAT8, overflow=(HIF8_OVERFLOW, True), encode="hif8_encode", decode="hif8_decode",
        encode_keywords=("rounding", "saturate")),
    _dt("ACL_FLOAT8_E5M2", 35, ml_dtypes.float8_e5m2),
    # E4M3FN: 464 = 448 + 16 ties to even 448 (significand 1.110) -> exclusive
    _dt("ACL_FLOAT8_E4M3FN", 36, ml_dtypes.float8_e4m3fn, name="float8_e4m3fn", aliases=("e4m3fn", "e4m3"),
        roles=frozenset({GRAD_WEIGHT}), values=FLOAT8_E4M3FN, overflow=(464.0, False), encode="e4m3fn_encode",
        decode="e4m3fn_decode", encode_keywords=("saturate",)),
    _dt("ACL_FLOAT8_E8M0", 37),
)

_BY_CODE: Dict[int, DataType] = {}
_BY_NAME: Dict[str, DataType] = {}


def _index():
    _BY_CODE.clear()
    _BY_NAME.clear()
    for t in DATA_TYPES:
        _BY_CODE[t.code] = t
        if t.name:
            _BY_NAME[t.name] = t
            for a in t.aliases:
                _BY_NAME.setdefault(a, t)


_index()


def data_type(code) -> Optional[DataType]:
    """The record of an aclDataType code, or None for an unknown code (never raises)."""
    try:
        return _BY_CODE.get(int(code))
    except (TypeError, ValueError, OverflowError):
        return None


def by_name(name) -> Optional[DataType]:
    """The record a name or alias ('float32', 'fp32', 'hifloat8', ...) names, case-insensitive; or None."""
    return _BY_NAME.get(name.lower()) if isinstance(name, str) else None


def data_type_named(name) -> Optional[DataType]:
    """The record whose NumPy-layer name (no alias) is ``name``, case-insensitive; or None."""
    t = by_name(name)
    return t if t is not None and t.name == name.lower() else None


def codes_with_role(role) -> Tuple[int, ...]:
    """The aclDataType codes that may play ``role``, in code order."""
    return tuple(t.code for t in DATA_TYPES if role in t.roles)


def types_with_role(role) -> Tuple[DataType, ...]:
    return tuple(t for t in DATA_TYPES if role in t.roles)


def _register(record: DataType) -> None:
    """Add (or replace, by code) a record; for tests that show what a new format touches."""
    global DATA_TYPES
    DATA_TYPES = tuple(sorted([t for t in DATA_TYPES if t.code != record.code] + [record], key=lambda t: t.code))
    _index()


# ---- rounding modes (names -> the codes the kernels take) ---------------------------------------------------
HF32_ROUNDINGS = {"half_away": 0, "nearest_even": 1}    # HF32_HALF_AWAY, HF32_NEAREST_EVEN
HIF8_ROUNDINGS = {"ta": 0, "hybrid": 1}                 # HIF8_TA, HIF8_HYBRID


# ---- compute precisions (the cube's operand precision C, docs/precision.md) ---------------------------------
@dataclass(frozen=True)
class ComputePrecision:
    """code: the value the kernels take; name: 'FP32', ...; k0: products per cube step (block size);
    storage: the data type whose values C holds (HF32: held in an fp32)."""

    code: int
    name: str
    k0: int
    storage: str


COMPUTE_PRECISIONS: Tuple[ComputePrecision, ...] = (
    ComputePrecision(0, "FP32", 8, "float32"),
    ComputePrecision(1, "HF32", 8, "float32"),
    ComputePrecision(2, "FP16", 16, "float16"),
    ComputePrecision(3, "BF16", 16, "bfloat16"),
)
K0_8BIT = 32                 # products per cube step for 8-bit operands (the forward's HiFloat8 inputs)
