"""Write pyconvtbc/_kernels/_fptables.h: the lookup tables of the 8-bit scalar codecs (_fpround.h).

    python tools/gen_tables.py            rewrite the header
    python tools/gen_tables.py --check    exit 1 if the committed header differs from what this script writes

The tables are computed here from the definitions of the two 8-bit formats (docs/precision.md, "HiFloat8" and
"FLOAT8_E4M3FN"), in plain Python integers and fractions: nothing is read from the C code or from the built
package, so the script runs on a fresh checkout.  tests/test_generated.py checks that the committed header is
exactly what this script writes, and the codec tests check the tables' behaviour against independent oracles.

Every encoder table is indexed by the fp32 biased exponent b of |x| (the binade [2^(b-127), 2^(b-126))).
"""
import argparse
import os
import struct
import sys
from fractions import Fraction

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "pyconvtbc", "_kernels", "_fptables.h")

F32_BIAS = 127
F32_MANT = 23


def f32_bits(value):
    """The fp32 pattern of an exactly representable number (a Fraction or int; 'inf' / 'nan' strings)."""
    if value == "inf":
        return 0x7F800000
    if value == "nan":
        return 0x7FC00000
    (bits,) = struct.unpack("<I", struct.pack("<f", float(value)))
    assert Fraction(struct.unpack("<f", struct.pack("<I", bits))[0]) == value, value
    return bits


# ---- HiFloat8: S | dot | exponent (D bits) | mantissa (m bits) ------------------------------------------
# (dot prefix, D exponent bits, m mantissa bits, |E| range) per class; the exponent is sign-magnitude without a
# bias: its first bit is the sign of E (1 = negative), the other D-1 bits are |E| below an implicit leading 1.
HIF8_CLASSES = [
    ("11", 4, 1, range(8, 16)),
    ("10", 3, 2, range(4, 8)),
    ("01", 2, 3, range(2, 4)),
    ("001", 1, 3, range(1, 2)),
    ("0001", 0, 3, range(0, 1)),
]
HIF8_DENORMAL_DOT = "0000"          # then 3 bits M: value 2^(M - 23), M = 1..7
HIF8_DENORMAL_MIN_EXP = -22         # 2^-22, the smallest magnitude
HIF8_INF_CODE = 0x6F                # the pattern of 1.5 * 2^15 is +Inf (0xEF: -Inf)
HIF8_NAN_CODE = 0x80                # the only NaN (the pattern of "-0")


def hif8_value(code):
    """The value of a HiFloat8 code: a Fraction, or 'inf' / '-inf' / 'nan'."""
    if code == HIF8_NAN_CODE:
        return "nan"
    sign = -1 if code & 0x80 else 1
    if code & 0x7F == HIF8_INF_CODE:
        return "inf" if sign > 0 else "-inf"
    bits = format(code & 0x7F, "07b")
    if bits.startswith(HIF8_DENORMAL_DOT):
        m = int(bits[4:], 2)
        return Fraction(0) if m == 0 else sign * Fraction(2) ** (m - 23)
    for dot, d, m, _ in HIF8_CLASSES:
        if bits.startswith(dot):
            ebits = bits[len(dot):len(dot) + d]
            mant = int(bits[len(dot) + d:], 2)
            e = 0 if d == 0 else (1 << (d - 1)) + int(ebits[1:] or "0", 2)
            if d and ebits[0] == "1":
                e = -e
            return sign * Fraction(2) ** e * (1 + Fraction(mant, 1 << m))
    raise AssertionError(code)


def hif8_mantissa_bits(e):
    """Mantissa bits of the HiFloat8 values in the binade 2^e (0: the powers of two of the denormal range),
    or None where the binade holds no HiFloat8 value."""
    for _, _, m, exps in HIF8_CLASSES:
        if abs(e) in exps:
            return m
    if HIF8_DENORMAL_MIN_EXP <= e < -15:
        return 0
    return None


def hif8_tables():
    rnd, shift = [0] * 256, [31] * 256
    for b in range(256):
        e = b - F32_BIAS
        m = hif8_mantissa_bits(e)
        if m is not None:
            d = F32_MANT - m                             # fp32 mantissa bits dropped
            mask = (0xFFFFFFFF << d) & 0xFFFFFFFF
            rnd[b] = mask << 32 | 1 << (d - 1)           # TA: add half a step, keep the top bits
            shift[b] = d
        elif e == HIF8_DENORMAL_MIN_EXP - 1:             # [2^-23, 2^-22) rounds up to 2^-22 (ties away)
            rnd[b] = 0xFF800000 << 32 | 1 << F32_MANT    # a whole binade: the exponent steps, mantissa 0
            shift[b] = F32_MANT
    decode = []
    code_of = [0] * 4096
    for c in range(256):
        v = hif8_value(c)
        if v == "nan":
            decode.append(f32_bits("nan"))
        elif v in ("inf", "-inf"):
            decode.append(f32_bits("inf") | (0x80000000 if v == "-inf" else 0))
        else:
            bits = f32_bits(abs(v)) | (0x80000000 if v < 0 else 0)
            decode.append(bits)
            if v != 0:                                   # zero keeps code 0x00 for both signs
                code_of[(bits >> 31) << 11 | (bits & 0x7FFFFFFF) >> 20] = c
    return rnd, shift, code_of, decode


# ---- FLOAT8_E4M3FN: S | EEEE | MMM, bias 7, subnormals down to 2^-9, max 448 -------------------------------
E4M3_BIAS = 7
E4M3_MANT = 3
E4M3_MIN_NORMAL_EXP = 1 - E4M3_BIAS                        # 2^-6
E4M3_MAX_EXP = 8                                           # 448 = 1.75 * 2^8


def e4m3_tables():
    """Per binade: bits dropped from the 24-bit fp32 significand, and the code of the binade's first value less
    the significand's leading part (code = base + the rounded significand)."""
    shift, base = [31] * 256, [0] * 256
    for b in range(256):
        e = b - F32_BIAS
        if E4M3_MIN_NORMAL_EXP <= e <= E4M3_MAX_EXP:
            shift[b] = F32_MANT - E4M3_MANT
            base[b] = (e + E4M3_BIAS - 1) << E4M3_MANT     # + k = 8..16 (the implicit bit, a carry steps up)
        elif E4M3_MIN_NORMAL_EXP - E4M3_MANT - 1 <= e < E4M3_MIN_NORMAL_EXP:
            # subnormal results: code = value / 2^-9 = significand * 2^(e - 23 + 9)
            shift[b] = F32_MANT - (e - (E4M3_MIN_NORMAL_EXP - E4M3_MANT))
    return shift, base


# ---- output ---------------------------------------------------------------------------------------------
def _c_array(ctype, name, values, per_line, fmt, sparse=False, sep=", "):
    """A C array definition; sparse: only the nonzero entries, as designated initializers (C99)."""
    if sparse:
        width = len(f"{len(values) - 1:X}")
        items = [f"[0x{i:0{width}X}] = {fmt(v)}" for i, v in enumerate(values) if v]
    else:
        items = [fmt(v) for v in values]
    rows = [sep.join(items[i:i + per_line]) for i in range(0, len(items), per_line)]
    return f"static const {ctype} {name}[{len(values)}] = {{\n    " + ",\n    ".join(rows) + "\n};\n"


def render():
    rnd, hshift, code_of, decode = hif8_tables()
    eshift, ebase = e4m3_tables()
    hex2, hex8, hex16 = (lambda v: f"0x{v:02X}"), (lambda v: f"0x{v:08X}u"), (lambda v: f"0x{v:016X}ULL")
    tables = [  # (comment, C type, name, values, entries per line, format[, sparse: nonzero entries only, sep])
        ("HiFloat8, per fp32 biased exponent b: TA increment (low 32 bits) | keep-mask (high 32 bits); 0 elsewhere",
         "uint64_t", "PCT_HIF8_RND", rnd, 3, hex16, True),
        ("HiFloat8, per b: fp32 mantissa bits dropped (31: the binade holds no HiFloat8 value)",
         "uint8_t", "PCT_HIF8_SHIFT", hshift, 32, str, False, ","),
        ("HiFloat8: the code of the rounded magnitude r with sign s, at [s << 11 | r >> 20]; 0 elsewhere",
         "uint8_t", "PCT_HIF8_CODE", code_of, 7, hex2, True),
        ("HiFloat8 decode: the fp32 pattern of each code", "uint32_t", "PCT_HIF8_DECODE", decode, 8, hex8),
        ("FLOAT8_E4M3FN, per b: bits dropped from the 24-bit significand (31: below 2^-10 or above 2^9)",
         "uint8_t", "PCT_E4M3_SHIFT", eshift, 32, str, False, ","),
        ("FLOAT8_E4M3FN, per b: the code added to the rounded significand (normal binades); 0 elsewhere",
         "uint8_t", "PCT_E4M3_BASE", ebase, 8, str, True),
    ]
    head = ("/* _fptables.h: lookup tables of the 8-bit scalar codecs in _fpround.h.\n"
            " * GENERATED by tools/gen_tables.py from the format definitions: do not edit; rerun the script.\n"
            " * tests/test_generated.py checks that this file is what the script writes. */\n"
            "#ifndef PYCONVTBC_FPTABLES_H\n#define PYCONVTBC_FPTABLES_H\n\n#include <stdint.h>\n\n")
    body = "".join(f"/* {comment} */\n" + _c_array(*rest) for comment, *rest in tables)
    return head + body + "\n#endif /* PYCONVTBC_FPTABLES_H */\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed header, write nothing")
    ap.add_argument("--out", default=OUT, help="where to write (default: the package's _fptables.h)")
    a = ap.parse_args(argv)
    text = render()
    if a.check:
        with open(a.out, encoding="utf-8") as f:
            same = f.read() == text
        print(f"{a.out}: {'up to date' if same else 'DIFFERS from tools/gen_tables.py: rerun it'}")
        return 0 if same else 1
    with open(a.out, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    print(f"wrote {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
