"""Independent float64 reference of the three formulas (SEMANTICS.md section 1), and tolerance helpers.

Written straight from the formulas with NumPy float64 arithmetic; shares no code with pyconvtbc.
"""
import numpy as np

U32 = 2.0 ** -24  # unit roundoff of fp32


def conv_tbc_backward_ref(dy, x, w, pad):
    """float64 gradients (gi, gw, gb) of conv_tbc; dy (T_out,B,Cout), x (T_in,B,Cin), w (K,Cin,Cout)."""
    dy = np.asarray(dy, np.float64)
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    T_in, B, Cin = x.shape
    K, _, Cout = w.shape
    T_out = T_in + 2 * pad - K + 1
    assert dy.shape == (T_out, B, Cout)
    gi = np.zeros((T_in, B, Cin))
    gw = np.zeros((K, Cin, Cout))
    for k in range(K):
        for t in range(T_in):          # gi[t] += dy[t+pad-k] @ w[k]^T
            s = t + pad - k
            if 0 <= s < T_out:
                gi[t] += dy[s] @ w[k].T
        for t in range(T_out):         # gw[k] += x[t+k-pad]^T @ dy[t]
            s = t + k - pad
            if 0 <= s < T_in:
                gw[k] += x[s].T @ dy[t]
    gb = dy.sum(axis=(0, 1)) if T_out * B else np.zeros(Cout)
    return gi, gw, gb


def conv_tbc_ref(x, w, b, pad):
    """float64 forward of conv_tbc: out[t,b,co] = b[co] + sum_k sum_ci x[t+k-pad,b,ci] * w[k,ci,co]."""
    x = np.asarray(x, np.float64)
    w = np.asarray(w, np.float64)
    T_in, B, Cin = x.shape
    K, _, Cout = w.shape
    T_out = T_in + 2 * pad - K + 1
    out = np.zeros((T_out, B, Cout)) + np.asarray(b, np.float64)
    for k in range(K):
        for t in range(T_out):
            s = t + k - pad
            if 0 <= s < T_in:
                out[t] += x[s] @ w[k]
    return out


def abs_products_ref(dy, x, w, pad):
    """The same sums over |a*b|: the scale of the rounding-error bound of each output element."""
    return conv_tbc_backward_ref(np.abs(np.asarray(dy, np.float64)), np.abs(np.asarray(x, np.float64)),
                                 np.abs(np.asarray(w, np.float64)), pad)


def gamma(n, u=U32):
    """Higham's gamma_n = n*u / (1 - n*u): bound on the relative error of an n-term fp32 dot product."""
    n = max(int(n), 1)
    return n * u / (1 - n * u)


def fp32_bound(n, absprod, out_eps=0.0, exact=None):
    """|computed - exact| bound for an n-term fp32-accumulated sum with scale ``absprod``, then a final
    cast to a format of unit roundoff ``out_eps`` (half its epsilon) relative to the result."""
    b = gamma(n) * absprod
    if exact is not None:
        b = b + out_eps * (np.abs(exact) + b)
    return b + 1e-45  # fp32's smallest subnormal: a sum of zeros can still be exactly zero


# ---- independent operand rounding (SEMANTICS.md section 3), written from the rules, not from pyconvtbc ----
def hf32_ref(x, mantissa_bits=11, rounding="half_away"):
    """fp32 -> HF32 on the bit pattern with exact integer arithmetic: keep the exponent and
    ``mantissa_bits`` explicit bits.  half_away: Huawei's golden ``((bits >> (22-N)) + 1) >> 1 << (23-N)``
    applied to the magnitude; nearest_even: ties to an even kept mantissa.  NaN stays NaN."""
    x = np.asarray(x, np.float32)
    bits = x.view(np.uint32).astype(np.int64)
    sign = bits & 0x80000000
    mag = bits & 0x7FFFFFFF
    drop = 23 - mantissa_bits
    if rounding == "half_away":
        r = ((mag >> (drop - 1)) + 1) >> 1 << drop
    else:
        kept = mag >> drop
        rem = mag & ((1 << drop) - 1)
        half = 1 << (drop - 1)
        up = (rem > half) | ((rem == half) & ((kept & 1) == 1))
        r = (kept + up) << drop
    out = (sign | r).astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), x, out)


def round_operand(a, compute, soc="ascend910b", hf32_rounding="half_away"):
    """Decode to fp32 and round to the compute precision: 'FP32', 'HF32', 'FP16' or 'BF16'."""
    import ml_dtypes
    a = np.asarray(a).astype(np.float32)
    if compute == "FP32":
        return a
    if compute == "HF32":
        return hf32_ref(a, 10 if soc == "ascend950" else 11, hf32_rounding)
    if compute == "FP16":
        return a.astype(np.float16).astype(np.float32)
    if compute == "BF16":
        return a.astype(ml_dtypes.bfloat16).astype(np.float32)
    raise ValueError(compute)


def fp_cast(a, fmt):
    """Round float32 values to the format 'FP32', 'FP16' or 'BF16' (RNE; fp16 overflow -> +-inf) and widen back
    to float32 (exact)."""
    import ml_dtypes
    a = np.asarray(a).astype(np.float32)
    if fmt == "FP32":
        return a
    with np.errstate(over="ignore"):      # fp16 overflow -> +-inf is the rule, not an accident
        return a.astype({"FP16": np.float16, "BF16": ml_dtypes.bfloat16}[fmt]).astype(np.float32)


# Unit roundoff (half the epsilon) and half the smallest subnormal of the formats, for tolerance bounds.
UNIT_ROUNDOFF = {"FP32": 0.0, "HF32": 0.0, "FP16": 2.0 ** -11, "BF16": 2.0 ** -8}
HALF_TINY = {"FP32": 0.0, "HF32": 0.0, "FP16": 2.0 ** -25, "BF16": 2.0 ** -134}


def quantum(a):
    """The smallest power of two every non-zero value of ``a`` is an integer multiple of (inf when all zero)."""
    a = np.abs(np.asarray(a, np.float64)).ravel()
    a = a[(a != 0) & np.isfinite(a)]
    if not a.size:
        return np.inf
    m, e = np.frexp(a)                        # a = m * 2**e, m in [0.5, 1)
    M = (m * 2.0 ** 53).astype(np.int64)      # an integer: m has at most 53 significant bits
    low = M & -M                              # the lowest set bit
    return float(np.min(np.ldexp(low.astype(np.float64), e - 53)))


def sums_exact_in_float64(x, w, bias, pad):
    """True when every partial sum of the forward's products (and the bias) is exact in float64: each value is a
    multiple of the smallest quantum q, and |value| <= the sum of |terms|, so < 2**52 * q suffices."""
    q = min(quantum(x) * quantum(w), quantum(bias))
    if not np.isfinite(q):
        return True
    scale = conv_tbc_ref(np.abs(np.asarray(x, np.float64)), np.abs(np.asarray(w, np.float64)),
                         np.abs(np.asarray(bias, np.float64)), pad)
    return (scale.max(initial=0.0) * (1 + 2.0 ** -20)) / q < 2.0 ** 52


# The cubeMathType table of SEMANTICS.md section 3, as (promoted dtype name, soc) -> compute per cube value.
CUBE_TABLE = {
    ("float32", "ascend910b"): ("FP32", "HF32", "FP16", "HF32"),
    ("float32", "ascend950"): ("FP32", "HF32", "FP16", "HF32"),
    ("float32", "ascend910"): (None, "FP16", "FP16", None),
    ("float16", "ascend910b"): ("FP16",) * 4,
    ("float16", "ascend950"): ("FP16",) * 4,
    ("float16", "ascend910"): ("FP16",) * 4,
    ("bfloat16", "ascend910b"): ("BF16", "BF16", "FP16", "BF16"),
    ("bfloat16", "ascend950"): ("BF16", "BF16", "FP16", "BF16"),
}
