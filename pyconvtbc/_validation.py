"""The rules every operator shares (docs/semantics.md section 2), and the words their messages use.

An operator's own rules (its data types, ranks and shapes, in its order) live in its module
(``_op_conv_tbc_backward``); they call the shared rules below at the right places.  Rules read descriptors
through three attributes (``shape``, ``data_type``, ``format``), so the CANN layer's aclTensor and the NumPy
layer's array descriptors share every rule.  The memory rules apply to descriptors that have
``memory_problem`` / ``byte_span`` (CANN tensors); NumPy arrays are valid views by construction and the NumPy
layer allocates its outputs itself.  A failed rule raises ``Invalid(status, message)``.
"""
import numpy as np

from . import formats as _reg
from .enums import aclFormat, dtype_name, format_name
from .profiles import compute_precision
from .status import ACLNN_ERR_PARAM_INVALID as INVALID, ACLNN_ERR_PARAM_NULLPTR as NULLPTR, int_value, is_int, safe_repr

FLOATS = _reg.codes_with_role(_reg.OPERAND)          # FLOAT, FLOAT16, BF16 (the registry's operand formats)
EIGHT_BIT = _reg.codes_with_role(_reg.GRAD_WEIGHT)    # HIFLOAT8, FLOAT8_E4M3FN (gradWeight-only outputs)
FORMATS = (int(aclFormat.ACL_FORMAT_ND), int(aclFormat.ACL_FORMAT_NCL))
PAD_MAX = 255
INT64_MAX = 2 ** 63 - 1
CUBE_MATH_TYPES = "0 (KEEP_DTYPE), 1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)"


class Invalid(Exception):
    """A failed rule.  wrong_type: the argument is of the wrong Python type (the NumPy layer raises AclnnTypeError)."""

    def __init__(self, status, message, wrong_type=False):
        super().__init__(message)
        self.status = status
        self.message = message
        self.wrong_type = wrong_type


# The Python types each keyword of the NumPy layer takes (None aside): a value of another type is a TypeError
# there (AclnnTypeError), a value of the right type that is not accepted a ValueError (AclnnError).
_INTS = ("num_threads", "block_size", "order_seed", "hf32_mantissa_bits")
_STRS = ("soc", "accumulation", "hf32_rounding", "hif8_rounding")
_BOOLS = ("saturate", "deterministic", "hif8_inputs")


def wrong_type(name, value):
    """True when keyword ``name`` has a value of a Python type it never takes (see _INTS, _STRS, _BOOLS)."""
    if value is None:
        return False
    if name in _INTS:
        return not is_int(value)
    if name in _STRS:
        return not isinstance(value, str)
    if name in _BOOLS:
        return not isinstance(value, (bool, int, np.bool_, np.integer))
    return False


def or_list(words):
    """'a, b or c'."""
    words = list(words)
    return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]


def dtype_names(codes, numpy=False):
    """The data types as a message lists them: 'FLOAT, FLOAT16, BF16' (CANN) or 'float32, float16 or bfloat16'."""
    if numpy:
        return or_list(_reg.data_type(c).name for c in codes)
    return ", ".join(dtype_name(c).split(" ")[0] for c in codes)


def dtype_seen(desc, numpy):
    """How a descriptor's data type reads in a message: 'has data type DOUBLE (11)' (CANN layer), 'has dtype
    float64 (aclDataType DOUBLE)' or 'is 'float64' (aclDataType DOUBLE)' for a dtype argument (NumPy layer)."""
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


# ---- descriptor rules (every operator, first) ----------------------------------------------------------------
def check_descriptors(t, names, is_descriptor, expected, label):
    """Rule 1: None -> 161001 (in the order of ``names``), then a non-descriptor or destroyed one -> 161002."""
    for n in names:
        if t[n] is None:
            raise Invalid(NULLPTR, f"{label(n)} is a null pointer (None); expected a tensor")
    for n in names:
        if not is_descriptor(t[n]):
            obj = t[n]
            try:
                destroyed = getattr(obj, "destroyed", False) is True
            except Exception:  # an object whose attributes raise: still just "not a descriptor"
                destroyed = False
            name = type(obj).__name__
            what = "a destroyed aclTensor" if destroyed else f"{'an' if name[:1] in 'aeiouAEIOU' else 'a'} {name}"
            raise Invalid(INVALID, f"{label(n)} is {what}; expected {expected(obj) if callable(expected) else expected}",
                          wrong_type=not destroyed)


def check_formats(t, names, label, allowed=FORMATS):
    """Each descriptor's format in ``allowed`` (aclFormat codes; default ND, NCL)."""
    for n in names:
        if t[n].format not in allowed:
            expected = or_list(format_name(f).split(" ")[0] for f in allowed)
            raise Invalid(INVALID, f"{label(n)} has format {format_name(t[n].format)}; expected {expected}")


def check_ranks(t, ranks, label):
    """ranks: name -> the number of dims it must have."""
    for n, r in ranks.items():
        if len(t[n].shape) != r:
            raise Invalid(INVALID, f"{label(n)} has {len(t[n].shape)} dims {list(t[n].shape)}; expected {r}")


def check_dims_nonnegative(t, names, label):
    for n in names:
        if any(d < 0 for d in t[n].shape):
            raise Invalid(INVALID, f"{label(n)} has shape {list(t[n].shape)} with a negative dim; expected dims >= 0")


def check_shapes(t, expect, label):
    """expect: name -> the shape it must have (in order)."""
    for n, shape in expect.items():
        if tuple(t[n].shape) != tuple(shape):
            raise Invalid(INVALID, f"{label(n)} has shape {list(t[n].shape)}; expected {list(shape)}")


# ---- scalar rules shared by the TBC operators -----------------------------------------------------------------
def check_pad(pad, T_in):
    """pad in [0, PAD_MAX], and T_in + 2*pad + 1 within int64 (the kernels compute T_out in int64)."""
    n = int_value(pad)
    if n is None or not 0 <= n <= PAD_MAX:
        raise Invalid(INVALID, f"pad is {safe_repr(pad)}; expected an integer in [0, {PAD_MAX}]", wrong_type=n is None)
    pad = n
    if T_in + 2 * pad + 1 > INT64_MAX:  # the kernels compute T_in + 2*pad - K + 1 in int64, left to right
        raise Invalid(INVALID, f"T_in + 2*pad + 1 = {T_in} + 2*{pad} + 1 overflows int64; expected a smaller "
                      "input (an input this long can only be empty)")
    return pad


def check_cube_math_type(cube_math_type, profile, promoted, label, numpy=False):
    """cubeMathType in 0..3 and allowed for ``promoted`` operands on ``profile``; returns the compute precision.
    numpy: the message names the data type as NumPy does ('float32', not 'FLOAT (0)')."""
    n = int_value(cube_math_type)
    if n is None or not 0 <= n <= 3:
        names = ", or one of those names" if numpy else ""
        raise Invalid(INVALID, f"{label('cubeMathType')} is {safe_repr(cube_math_type)}; expected {CUBE_MATH_TYPES}"
                      f"{names}", wrong_type=n is None and not (numpy and isinstance(cube_math_type, str)))
    cube_math_type = n
    C = compute_precision(profile, promoted, cube_math_type)
    if C is None:
        ok = [c for c in range(4) if compute_precision(profile, promoted, c) is not None]
        raise Invalid(INVALID, f"{label('cubeMathType')} {int(cube_math_type)} is not supported for "
                      f"{dtype_names([promoted], numpy) if numpy else dtype_name(promoted)} operands on "
                      f"{profile.name}; expected one of {ok}")
    return C


# ---- memory rules (ours, beyond CANN; every operator, last) ---------------------------------------------------
def span_overlap(a, b):
    """Whether two byte spans (allocation, start, end) share a byte."""
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


_TooHard = getattr(getattr(np, "exceptions", np), "TooHardError")  # NumPy >= 1.25 moved it


def share_elements(a, b, max_work=1 << 20):
    """Whether two descriptors whose byte spans overlap share a byte of an element: exact (NumPy's
    ``shares_memory``) unless deciding it would take more than ``max_work`` steps, when the overlapping spans
    count (interleaved views that share no element, such as the even and the odd elements of one buffer, pass)."""
    try:
        va, vb = a.element_view(), b.element_view()
        return va is not None and vb is not None and bool(np.shares_memory(va, vb, max_work=max_work))
    except (_TooHard, ValueError, TypeError, AttributeError):
        return True


def memory_problem(t, names):
    """'name: why' for the first descriptor whose view left its storage (or whose buffer was freed), else None."""
    for n in names:
        problem = getattr(t[n], "memory_problem", None)
        if problem is not None:
            msg = problem()
            if msg:
                return f"{n}: {msg}"
    return None


def check_memory(t, inputs, outputs, contiguous_outputs=True):
    """Every view inside its storage; outputs contiguous (when required); no output overlapping another output
    or an input."""
    problem = memory_problem(t, inputs + outputs)
    if problem:
        raise Invalid(INVALID, problem)
    if contiguous_outputs:
        for n in outputs:
            if hasattr(t[n], "is_contiguous") and not t[n].is_contiguous():
                raise Invalid(INVALID, f"{n} has strides {list(t[n].strides)} for dims {list(t[n].shape)}; "
                              "expected a contiguous output (non-contiguous outputs are not supported)")
    spans = {n: t[n].byte_span() for n in inputs + outputs if hasattr(t[n], "byte_span")}
    for i, a in enumerate(outputs):
        for b in outputs[:i] + inputs:
            sa, sb = spans.get(a), spans.get(b)
            if span_overlap(sa, sb) and share_elements(t[a], t[b]):
                raise Invalid(INVALID, f"{a} (bytes {sa[1]}..{sa[2]}) overlaps {b} (bytes {sb[1]}..{sb[2]}) "
                              "in the same device buffer; expected outputs that overlap nothing")
