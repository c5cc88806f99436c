"""docs/semantics.md section 2: the operator's checks, in order; the first failure wins.

``validate`` reads descriptors through three attributes (``shape``, ``data_type``, ``format``), so the
CANN layer's aclTensor and the NumPy layer's array descriptors share every rule.  Rule 8 (memory)
applies to descriptors that have ``memory_problem`` (CANN tensors); NumPy arrays are valid views by
construction and the NumPy layer allocates its outputs itself.
"""
from . import formats as _reg
from .enums import aclDataType as DT, aclFormat, dtype_name, format_name
from .profiles import compute_precision, promote
from .status import ACLNN_ERR_PARAM_INVALID as INVALID, ACLNN_ERR_PARAM_NULLPTR as NULLPTR, safe_repr

NAMES = ("self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias")
INPUTS = NAMES[:4]
OUTPUTS = NAMES[4:]
FLOATS = _reg.codes_with_role(_reg.OPERAND)          # FLOAT, FLOAT16, BF16 (the registry's operand formats)
EIGHT_BIT = _reg.codes_with_role(_reg.GRAD_WEIGHT)    # HIFLOAT8, FLOAT8_E4M3FN (gradWeight-only outputs)
FORMATS = (int(aclFormat.ACL_FORMAT_ND), int(aclFormat.ACL_FORMAT_NCL))
RANKS = {"self": 3, "input": 3, "weight": 3, "bias": 1, "gradInput": 3, "gradWeight": 3, "gradBias": 1}
PAD_MAX = 255
INT64_MAX = 2 ** 63 - 1


class Invalid(Exception):
    def __init__(self, status, message):
        super().__init__(message)
        self.status = status
        self.message = message


# The NumPy layer's wording: its argument names and NumPy dtype names (the CANN layer keeps CANN's).
NUMPY_LABELS = {"self": "grad_output", "gradInput": "grad_input (the output, in input's dtype)",
                "gradWeight": "grad_weight_dtype", "gradBias": "grad_bias (the output, in bias's dtype)",
                "cubeMathType": "cube_math_type"}


def _or_list(words):
    """'a, b or c'."""
    words = list(words)
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]


def _names(codes, numpy=False):
    if numpy:
        return _or_list(_reg.data_type(c).name for c in codes)
    return ", ".join(dtype_name(c).split(" ")[0] for c in codes)


def _dtype_seen(desc, numpy):
    """How a descriptor's data type reads in a message: 'has data type DOUBLE (11)' (CANN layer), 'has dtype
    float64 (aclDataType DOUBLE)' or 'is 'float64' (aclDataType DOUBLE)' for grad_weight_dtype (NumPy layer)."""
    if not numpy:
        return f"has data type {dtype_name(desc.data_type)}"
    code = dtype_name(desc.data_type)
    acl = "no aclDataType" if code.startswith(("unknown", "DT_UNDEFINED")) else f"aclDataType {code.split(' ')[0]}"
    if hasattr(desc, "given"):
        return f"is {safe_repr(desc.given)} ({acl})"
    np_dtype = getattr(desc, "np_dtype", None)
    if np_dtype is not None:
        return f"has dtype {np_dtype} ({acl})"
    return f"has data type {code}"


def _allowed_dtypes(name, profile, t):
    allowed = list(FLOATS)
    # without BF16 (ascend910) only bias may still be BF16; gradBias takes the chip's list, and as it must
    # equal bias's dtype (rule 7), a BF16 bias fails here, at gradBias
    if not profile.has_bf16 and name != "bias":
        allowed.remove(int(DT.ACL_BF16))
    if name == "gradWeight":
        allowed += EIGHT_BIT
    return allowed


def _is_int(v):
    import numpy as np
    return isinstance(v, (int, np.integer)) and not isinstance(v, bool)


def check(t, pad, cube_math_type, profile, is_descriptor, expected="a live tensor descriptor", numpy=False):
    """Raise Invalid(status, message) at the first failed rule; return the problem's sizes otherwise.

    t: dict name -> descriptor (or None); is_descriptor(obj) -> bool says whether obj is a live one.
    numpy: word messages for the NumPy layer (its argument names, NumPy dtype names); the rules are the same.
    """
    labels = NUMPY_LABELS if numpy else {}

    def L(n):
        return labels.get(n, n)

    # 1. null pointers, then things that are not (live) descriptors
    for n in NAMES:
        if t[n] is None:
            raise Invalid(NULLPTR, f"{L(n)} is a null pointer (None); expected a tensor")
    for n in NAMES:
        if not is_descriptor(t[n]):
            obj = t[n]
            try:
                destroyed = getattr(obj, "destroyed", False) is True
            except Exception:  # an object whose attributes raise: still just "not a descriptor"
                destroyed = False
            what = "a destroyed aclTensor" if destroyed else f"a {type(obj).__name__}"
            raise Invalid(INVALID, f"{L(n)} is {what}; expected {expected(obj) if callable(expected) else expected}")
    # 2. data types
    for n in NAMES:
        allowed = _allowed_dtypes(n, profile, t)
        if t[n].data_type not in allowed:
            extra = "" if profile.has_bf16 else f" on {profile.name}"
            raise Invalid(INVALID, f"{L(n)} {_dtype_seen(t[n], numpy)}; expected "
                          f"{'' if numpy else 'one of '}{_names(allowed, numpy)}{extra}")
    # 3. formats
    for n in NAMES:
        if t[n].format not in FORMATS:
            raise Invalid(INVALID, f"{L(n)} has format {format_name(t[n].format)}; expected ND or NCL")
    # 4. ranks
    for n in NAMES:
        if len(t[n].shape) != RANKS[n]:
            raise Invalid(INVALID, f"{L(n)} has {len(t[n].shape)} dims {list(t[n].shape)}; expected {RANKS[n]}")
    # 5. shapes
    for n in NAMES:
        if any(d < 0 for d in t[n].shape):
            raise Invalid(INVALID, f"{L(n)} has shape {list(t[n].shape)} with a negative dim; expected dims >= 0")
    T_in, B, Cin = t["input"].shape
    K, wCin, Cout = t["weight"].shape
    if Cin != wCin:
        raise Invalid(INVALID, f"input's third dim is {Cin} but weight's second dim is {wCin}; expected equal (Cin)")
    if t["bias"].shape[0] != Cout:
        raise Invalid(INVALID, f"bias has shape {list(t['bias'].shape)}; expected [{Cout}] (weight's third dim, Cout)")
    if not _is_int(pad) or not 0 <= pad <= PAD_MAX:
        raise Invalid(INVALID, f"pad is {safe_repr(pad)}; expected an integer in [0, {PAD_MAX}]")
    pad = int(pad)
    if T_in + 2 * pad + 1 > INT64_MAX:  # the kernels compute T_in + 2*pad - K + 1 in int64, left to right
        raise Invalid(INVALID, f"T_in + 2*pad + 1 = {T_in} + 2*{pad} + 1 overflows int64; expected a smaller "
                      "input (an input this long can only be empty)")
    T_out = T_in + 2 * pad - K + 1
    if T_out < 0:
        raise Invalid(INVALID, f"T_out = T_in + 2*pad - K + 1 = {T_in} + 2*{pad} - {K} + 1 = {T_out}; "
                      "expected T_out >= 0")
    expect = {"self": (T_out, B, Cout), "gradInput": tuple(t["input"].shape),
              "gradWeight": tuple(t["weight"].shape), "gradBias": tuple(t["bias"].shape)}
    for n in ("self", "gradInput", "gradWeight", "gradBias"):
        if tuple(t[n].shape) != expect[n]:
            raise Invalid(INVALID, f"{L(n)} has shape {list(t[n].shape)}; expected {list(expect[n])}")
    # 6. cubeMathType
    P = promote(t["self"].data_type, t["input"].data_type, t["weight"].data_type)
    if not _is_int(cube_math_type) or not 0 <= cube_math_type <= 3:
        raise Invalid(INVALID, f"{L('cubeMathType')} is {safe_repr(cube_math_type)}; expected 0 (KEEP_DTYPE), "
                      "1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)")
    C = compute_precision(profile, P, cube_math_type)
    if C is None:
        raise Invalid(INVALID, f"{L('cubeMathType')} {int(cube_math_type)} is not supported for {dtype_name(P)} "
                      f"operands on {profile.name}")
    # 7. output data types
    if t["gradInput"].data_type != t["input"].data_type:
        raise Invalid(INVALID, f"{L('gradInput')} has data type {dtype_name(t['gradInput'].data_type)}; expected "
                      f"input's, {dtype_name(t['input'].data_type)}")
    if t["gradBias"].data_type != t["bias"].data_type:
        raise Invalid(INVALID, f"{L('gradBias')} has data type {dtype_name(t['gradBias'].data_type)}; expected "
                      f"bias's, {dtype_name(t['bias'].data_type)}")
    gw = t["gradWeight"].data_type
    if gw != t["weight"].data_type and gw not in EIGHT_BIT and numpy:
        raise Invalid(INVALID, f"grad_weight_dtype {_dtype_seen(t['gradWeight'], True)}; expected None or "
                      f"weight's dtype ({_names([t['weight'].data_type], True)}), {_names(EIGHT_BIT, True)}")
    if gw != t["weight"].data_type and gw not in EIGHT_BIT:
        raise Invalid(INVALID, f"{L('gradWeight')} has data type {dtype_name(gw)}; expected weight's "
                      f"({dtype_name(t['weight'].data_type)}), {_or_list(_reg.data_type(c).short for c in EIGHT_BIT)}")
    # 8. memory (ours, beyond CANN)
    for n in NAMES:
        problem = getattr(t[n], "memory_problem", None)
        if problem is not None:
            msg = problem()
            if msg:
                raise Invalid(INVALID, f"{n}: {msg}")
    for n in OUTPUTS:
        if hasattr(t[n], "is_contiguous") and not t[n].is_contiguous():
            raise Invalid(INVALID, f"{n} has strides {list(t[n].strides)} for dims {list(t[n].shape)}; "
                          "expected a contiguous output (non-contiguous outputs are not supported)")
    spans = {n: t[n].byte_span() for n in NAMES if hasattr(t[n], "byte_span")}
    for i, a in enumerate(OUTPUTS):
        for b in OUTPUTS[:i] + INPUTS:
            sa, sb = spans.get(a), spans.get(b)
            if sa and sb and sa[0] == sb[0] and sa[1] < sb[2] and sb[1] < sa[2]:
                raise Invalid(INVALID, f"{a} (bytes {sa[1]}..{sa[2]}) overlaps {b} (bytes {sb[1]}..{sb[2]}) "
                              "in the same device buffer; expected outputs that overlap nothing")
    return {"T_in": T_in, "B": B, "Cin": Cin, "Cout": Cout, "K": K, "pad": pad, "T_out": T_out,
            "promoted": P, "compute": C}
