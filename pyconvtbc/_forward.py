"""The forward operator aclnnConvTbc: its rules (docs/semantics.md, "The forward operator"), its plan and its
kernel call.  ``check_forward`` reads descriptors through ``shape``, ``data_type``, ``format`` (and, for CANN
tensors, their memory checks), so the CANN layer and the NumPy layer share every rule, as for the backward.

    out[t,b,co] = bias[co] + sum_k sum_ci self[t+k-pad, b, ci] * weight[k, ci, co]
"""
from dataclasses import dataclass

import ml_dtypes
import numpy as np

from ._kernels import _conv_tbc
from .enums import aclDataType as DT, aclFormat, dtype_name, format_name
from .profiles import (ACCUMULATIONS, COMPUTE_BF16, COMPUTE_FP16, COMPUTE_FP32, HF32_ROUNDINGS, HIF8_ROUNDINGS, K0,
                       K0_8BIT, compute_precision)
from .status import ACLNN_ERR_PARAM_INVALID as INVALID, ACLNN_ERR_PARAM_NULLPTR as NULLPTR, safe_repr
from ._validation import Invalid, PAD_MAX, INT64_MAX, _is_int

NAMES = ("self", "weight", "bias", "out")
INPUTS = NAMES[:3]
_F, _H, _B, _HIF8 = int(DT.ACL_FLOAT), int(DT.ACL_FLOAT16), int(DT.ACL_BF16), int(DT.ACL_HIFLOAT8)
FLOATS = (_F, _H, _B)
BIAS_DTYPES = FLOATS                       # on every profile, whatever self's dtype
FORMATS = (int(aclFormat.ACL_FORMAT_ND), int(aclFormat.ACL_FORMAT_NCL))
RANKS = {"self": 3, "weight": 3, "bias": 1, "out": 3}
WS_ALIGN = 64

# The NumPy layer's wording (its argument names, NumPy dtype names)
NUMPY_LABELS = {"self": "input", "out": "the output (in input's dtype)", "cubeMathType": "cube_math_type"}
NUMPY_DTYPE_NAMES = {_F: "float32", _H: "float16", _B: "bfloat16", _HIF8: "hifloat8 (uint8 codes, hif8_inputs=True)"}


def self_dtypes(profile):
    """The data types self (and weight, out) may have on ``profile``."""
    allowed = [_F, _H] + ([_B] if profile.has_bf16 else [])
    if profile.name == "ascend950":
        allowed.append(_HIF8)
    return allowed


def _names(codes, numpy):
    if numpy:
        words = [NUMPY_DTYPE_NAMES.get(c, dtype_name(c)) for c in codes]
        return ", ".join(words[:-1]) + " or " + words[-1] if len(words) > 1 else words[0]
    return "one of " + ", ".join(dtype_name(c).split(" ")[0] for c in codes)


def _seen(desc, numpy):
    code = dtype_name(desc.data_type)
    np_dtype = getattr(desc, "np_dtype", None)
    if numpy and np_dtype is not None:
        acl = "no aclDataType" if code.startswith(("unknown", "DT_UNDEFINED")) else f"aclDataType {code.split(' ')[0]}"
        return f"has dtype {np_dtype} ({acl})"
    return f"has data type {code}"


def check_forward(t, pad, cube_math_type, profile, is_descriptor, expected="a live tensor descriptor", numpy=False,
                  dtype_rule=None):
    """Raise Invalid(status, message) at the first failed rule (in the operator's order); return the sizes.

    t: dict name -> descriptor (or None) for self, weight, bias, out; is_descriptor(obj) says whether obj is a
    live descriptor.  numpy: messages in the NumPy layer's words.  dtype_rule: a callable run first among the
    data-type rules (the NumPy layer's hif8_inputs check).
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
            except Exception:
                destroyed = False
            what = "a destroyed aclTensor" if destroyed else f"a {type(obj).__name__}"
            raise Invalid(INVALID, f"{L(n)} is {what}; expected {expected(obj) if callable(expected) else expected}")
    # 2. data types: self in the chip's list; weight and out equal to self's (no promotion); bias any float
    if dtype_rule is not None:
        dtype_rule()
    s_dt = t["self"].data_type
    allowed = self_dtypes(profile)
    if s_dt not in allowed:
        raise Invalid(INVALID, f"{L('self')} {_seen(t['self'], numpy)}; expected {_names(allowed, numpy)} on "
                      f"{profile.name}")
    for n in ("weight", "out"):
        if t[n].data_type != s_dt:
            raise Invalid(INVALID, f"{L(n)} {_seen(t[n], numpy)}; expected {L('self')}'s, "
                          f"{NUMPY_DTYPE_NAMES.get(s_dt) if numpy else dtype_name(s_dt)}")
    if t["bias"].data_type not in BIAS_DTYPES:
        raise Invalid(INVALID, f"{L('bias')} {_seen(t['bias'], numpy)}; expected {_names(BIAS_DTYPES, numpy)}")
    # 3. ranks
    for n in NAMES:
        if len(t[n].shape) != RANKS[n]:
            raise Invalid(INVALID, f"{L(n)} has {len(t[n].shape)} dims {list(t[n].shape)}; expected {RANKS[n]}")
    # 4. formats: self, weight, out ND or NCL; bias any format, except ND only on ascend950
    for n in NAMES:
        fmt = t[n].format
        if n == "bias":
            if profile.name == "ascend950" and fmt != int(aclFormat.ACL_FORMAT_ND):
                raise Invalid(INVALID, f"{L(n)} has format {format_name(fmt)}; expected ND on {profile.name}")
        elif fmt not in FORMATS:
            raise Invalid(INVALID, f"{L(n)} has format {format_name(fmt)}; expected ND or NCL")
    # 5. shapes
    for n in NAMES:
        if any(d < 0 for d in t[n].shape):
            raise Invalid(INVALID, f"{L(n)} has shape {list(t[n].shape)} with a negative dim; expected dims >= 0")
    T_in, B, Cin = t["self"].shape
    K, wCin, Cout = t["weight"].shape
    if Cin != wCin:
        raise Invalid(INVALID, f"{L('self')}'s third dim is {Cin} but weight's second dim is {wCin}; expected "
                      "equal (Cin)")
    if t["bias"].shape[0] != Cout:
        raise Invalid(INVALID, f"bias has shape {list(t['bias'].shape)}; expected [{Cout}] (weight's third dim, "
                      "Cout)")
    if K < 1:
        raise Invalid(INVALID, f"weight has shape {list(t['weight'].shape)}: kernel size K = {K}; expected K >= 1")
    if not _is_int(pad) or not 0 <= pad <= PAD_MAX:
        raise Invalid(INVALID, f"pad is {safe_repr(pad)}; expected an integer in [0, {PAD_MAX}]")
    pad = int(pad)
    if T_in + 2 * pad + 1 > INT64_MAX:
        raise Invalid(INVALID, f"T_in + 2*pad + 1 = {T_in} + 2*{pad} + 1 overflows int64; expected a smaller "
                      "input")
    empty_self = T_in * B * Cin == 0
    if not empty_self and T_in + pad < K:
        raise Invalid(INVALID, f"T_in + pad = {T_in} + {pad} = {T_in + pad} is less than the kernel size K = {K}; "
                      "expected T_in + pad >= K (the operator counts pad once here, although the output would "
                      "have T_in + 2*pad - K + 1 positions)")
    T_out = T_in + 2 * pad - K + 1
    if T_out < 0:
        raise Invalid(INVALID, f"T_out = T_in + 2*pad - K + 1 = {T_in} + 2*{pad} - {K} + 1 = {T_out}; expected "
                      "T_out >= 0")
    if tuple(t["out"].shape) != (T_out, B, Cout):
        raise Invalid(INVALID, f"{L('out')} has shape {list(t['out'].shape)}; expected {[T_out, B, Cout]} "
                      "(T_out = T_in + 2*pad - K + 1, B, Cout)")
    # 6. cubeMathType
    cmt_words = ("0 (KEEP_DTYPE), 1 (ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32)")
    if not _is_int(cube_math_type) or not 0 <= cube_math_type <= 3:
        note = ("; CANN's forward also takes 4 and computes it as 0: pass 0" if _is_int(cube_math_type)
                and int(cube_math_type) == 4 else "")
        raise Invalid(INVALID, f"{L('cubeMathType')} is {safe_repr(cube_math_type)}; expected {cmt_words}{note}")
    cmt = int(cube_math_type)
    if s_dt == _HIF8:
        C = COMPUTE_FP32                   # HiFloat8 operands are used as they are (exact in fp32)
    else:
        C = compute_precision(profile, s_dt, cmt)
        if C is None:
            ok = [c for c in range(4) if compute_precision(profile, s_dt, c) is not None]
            what = NUMPY_DTYPE_NAMES.get(s_dt) if numpy else dtype_name(s_dt).split(" ")[0]
            raise Invalid(INVALID, f"{L('cubeMathType')} {cmt} is not supported for {what} operands on "
                          f"{profile.name}; expected one of {ok}")
    # 7. memory (ours, beyond CANN): views inside their storage, strides >= 0, out overlapping no input
    for n in NAMES:
        problem = getattr(t[n], "memory_problem", None)
        if problem is not None:
            msg = problem()
            if msg:
                raise Invalid(INVALID, f"{n}: {msg}")
    if hasattr(t["out"], "strides") and not _distinct_elements(t["out"].shape, t["out"].strides):
        raise Invalid(INVALID, f"out has strides {list(t['out'].strides)} for dims {list(t['out'].shape)}, which "
                      "make some of its elements the same memory; expected an output whose elements are distinct")
    spans = {n: t[n].byte_span() for n in NAMES if hasattr(t[n], "byte_span")}
    so = spans.get("out")
    for n in INPUTS:
        sb = spans.get(n)
        if so and sb and so[0] == sb[0] and so[1] < sb[2] and sb[1] < so[2]:
            raise Invalid(INVALID, f"out (bytes {so[1]}..{so[2]}) overlaps {n} (bytes {sb[1]}..{sb[2]}) in the "
                          "same device buffer; expected an output that overlaps no input")
    return {"T_in": T_in, "B": B, "Cin": Cin, "Cout": Cout, "K": K, "pad": pad, "T_out": T_out,
            "dtype": s_dt, "bias_dtype": int(t["bias"].data_type), "cube_math_type": cmt, "compute": C}


def _distinct_elements(dims, strides):
    """Whether a view's elements are distinct memory: with the dims of size > 1 sorted by stride, each stride
    passes the span of the smaller ones (sufficient; every layout of a real array passes)."""
    if any(d == 0 for d in dims):
        return True
    span = 0
    for d, s in sorted(((d, s) for d, s in zip(dims, strides) if d > 1), key=lambda p: p[1]):
        if s <= span:
            return False
        span += (d - 1) * s
    return True


def bias_dtype_bc(profile, s_dt, cmt):
    """Bc, the format the bias is cast to before it starts the fp32 accumulator (docs/precision.md)."""
    if profile.name == "ascend910":
        return _H
    if s_dt == _HIF8:
        return _F
    if cmt == 2 or s_dt == _H:
        return _H
    if s_dt == _B:
        return _B if profile.name == "ascend950" else _F
    return _F


_NP_OF = {_F: np.dtype(np.float32), _H: np.dtype(np.float16), _B: np.dtype(ml_dtypes.bfloat16)}


def bias_start(bias_values, bc):
    """The accumulator's start values: bias (any float array) cast to Bc (RNE; fp16 overflow -> inf), widened
    exactly to fp32, as a new C-contiguous float32 array."""
    v = np.asarray(bias_values)
    if v.dtype != np.float32:
        v = v.astype(np.float32)          # fp16 / bf16 -> fp32 is exact
    if bc != _F:
        with np.errstate(over="ignore", invalid="ignore"):      # fp16 overflow -> inf is the rule, not a warning
            v = v.astype(_NP_OF[bc]).astype(np.float32)
    return np.ascontiguousarray(v, dtype=np.float32)


@dataclass(frozen=True)
class ForwardPlan:
    """Everything phase 1 decides for one forward problem."""
    shape: tuple            # (T_in, B, Cin, Cout, K, pad)
    T_out: int
    dtype: int              # self's = weight's = out's aclDataType
    bias_dtype: int
    bias_bc: int            # Bc
    compute: int
    mode: tuple             # (compute, hf32_bits, hf32_rounding, hif8_rounding, saturate, acc, k0, pre)
    num_threads: int
    kernel_workspace: int
    options: tuple
    out_staging: int = 0    # bytes of a contiguous copy of out (CANN layer, non-contiguous out), in the workspace

    @property
    def workspace_size(self):
        kernel = self.kernel_workspace + WS_ALIGN if self.kernel_workspace else 0
        return kernel + (self.out_staging + WS_ALIGN if self.out_staging else 0)

    @property
    def flops(self):
        T_in, B, Cin, Cout, K, _ = self.shape
        return 2 * self.T_out * B * Cin * Cout * K

    @property
    def hif8(self):
        return self.dtype == _HIF8

    @property
    def out_code(self):
        return self.dtype


def make_forward_plan(info, options, num_threads, profile, out_contiguous=True):
    """The plan of a validated problem; out_contiguous False (a CANN out with other strides) adds a staging
    copy of out to the workspace: the kernel writes it, phase 2 then scatters it through out's strides."""
    C = info["compute"]
    s_dt = info["dtype"]
    acc = ACCUMULATIONS[options["accumulation"]]
    k0 = options["block_size"] if options["block_size"] is not None else (K0_8BIT if s_dt == _HIF8 else K0[C])
    pre = C if C in (COMPUTE_FP16, COMPUTE_BF16) else COMPUTE_FP32
    mode = (C, int(options["hf32_mantissa_bits"]), HF32_ROUNDINGS[options["hf32_rounding"]],
            HIF8_ROUNDINGS[options["hif8_rounding"]], bool(options["saturate"]), acc, int(k0), pre)
    shape = (info["T_in"], info["B"], info["Cin"], info["Cout"], info["K"], info["pad"])
    ws = int(_conv_tbc.forward_workspace_size(shape, mode, s_dt, int(num_threads)))
    keep = {k: v for k, v in options.items() if k != "order_seed"}
    staging = 0 if out_contiguous else info["T_out"] * info["B"] * info["Cout"] * out_numpy_dtype(s_dt).itemsize
    return ForwardPlan(shape, info["T_out"], s_dt, info["bias_dtype"],
                       bias_dtype_bc(profile, s_dt, info["cube_math_type"]), C, mode, int(num_threads), ws,
                       tuple(sorted(keep.items())), staging)


def run_forward_plan(plan, x, w, bias_start_values, out, ws_address, ws_size, cancel=None):
    """Call the kernel.  x, w: (address, bs0, bs1, bs2, dtype) (FLOAT / FLOAT16 / BF16; HiFloat8 operands are
    decoded by the caller); bias_start_values: a C-contiguous float32 array (Cout,) (see ``bias_start``);
    out: (address, dtype) of a C-contiguous output.  ws_address may be unaligned (phase 1 asked for slack)."""
    if plan.kernel_workspace:
        aligned = (ws_address + WS_ALIGN - 1) // WS_ALIGN * WS_ALIGN
        ws_size -= aligned - ws_address
        ws_address = aligned
    else:
        ws_address, ws_size = 0, 0
    b = bias_start_values.ctypes.data if bias_start_values.size else 0
    _conv_tbc.run_forward(x, w, b, out, plan.shape, plan.mode, ws_address, ws_size, plan.num_threads, cancel)


def array_operand(a, hif8=False):
    """(address, bs0, bs1, bs2, dtype code) of a 3-D float32 / float16 / bfloat16 NumPy array, or of uint8
    HiFloat8 codes (hif8=True)."""
    code = _HIF8 if hif8 else {np.dtype(np.float32): _F, np.dtype(np.float16): _H,
                               np.dtype(ml_dtypes.bfloat16): _B}[a.dtype]
    addr = a.__array_interface__["data"][0] if a.size else 0
    return (addr, *a.strides, code)


# ---- NumPy layer -----------------------------------------------------------------------------------------
def conv_tbc(input, weight, bias, pad=0, *, cube_math_type=0, soc=None, num_threads=None, hf32_rounding=None,
             hf32_mantissa_bits=None, hif8_inputs=False, hif8_rounding=None, saturate=None, accumulation=None,
             block_size=None):
    """The forward of the TBC convolution as the emulated NPU computes it (CANN's aclnnConvTbc).

    ``out[t, b, co] = bias[co] + sum_k sum_ci input[t+k-pad, b, ci] * weight[k, ci, co]``, as ``torch.conv_tbc``.

    Parameters
    ----------
    input : numpy.ndarray
        (T_in, B, Cin): float32, float16 or ``ml_dtypes.bfloat16``, any strides (read in place); with
        ``hif8_inputs=True`` (ascend950 only), uint8 HiFloat8 codes.
    weight : numpy.ndarray
        (K, Cin, Cout), in input's dtype (no promotion: mixed dtypes are an error, as in CANN).
    bias : numpy.ndarray
        (Cout,): float32, float16 or bfloat16, whatever input's dtype.  It is cast to the chip's bias format
        and starts each output's fp32 sum (docs/precision.md, "The forward operator").
    pad : int, optional
        Zero padding at both ends of the time axis, in [0, 255]; T_in + pad must be at least K (the operator
        counts pad once in that check).  Default 0.
    cube_math_type : int, optional
        0 KEEP_DTYPE (default), 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32, as in the backward.
    soc : str, optional
        ``"ascend910b"``, ``"ascend950"`` or ``"ascend910"``.  None: ``get_soc_version()``.
    num_threads : int, optional
        Kernel threads in [1, 1024].  None: as ``conv_tbc_backward``.
    hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation, block_size : optional
        The emulation options, as in ``conv_tbc_backward`` (None: ``get_emulation_options()``'s).  hif8_rounding
        and saturate apply to HiFloat8 outputs.  The forward is always deterministic (no order_seed).
    hif8_inputs : bool, optional
        input and weight are uint8 HiFloat8 codes and the result is uint8 HiFloat8 codes (ascend950 only).

    Returns
    -------
    numpy.ndarray
        (T_out, B, Cout), T_out = T_in + 2*pad - K + 1, in input's dtype (uint8 HiFloat8 codes with
        ``hif8_inputs``), new and C-contiguous.

    Raises
    ------
    AclnnError
        (a ValueError) with ``.status`` 161001 for a ``None`` array and 161002 for every other bad argument; the
        message names it with this function's argument names, the value seen and what was expected.
    """
    from . import api
    from .profiles import PROFILES, check_option, get_profile, resolve_options
    from .status import AclnnError, exc_text

    def err(status, msg):
        raise AclnnError(status, f"conv_tbc: {msg}")

    def guarded(name, value, fn, expected):
        try:
            return fn()
        except ValueError as e:
            err(INVALID, e)
        except Exception:
            err(INVALID, f"{name} is {safe_repr(value)}; expected {expected}")

    if not isinstance(hif8_inputs, (bool, np.bool_)):
        err(INVALID, f"hif8_inputs is {safe_repr(hif8_inputs)}; expected True or False")
    arrays = (input, weight, bias)
    descs = {n: api._as_input(a) for n, a in zip(INPUTS, arrays)}
    if hif8_inputs:
        for n in ("self", "weight"):
            d = descs[n]
            if isinstance(d, api._ArrayDesc) and d.array.dtype == np.uint8:
                d.data_type = _HIF8
    if all(isinstance(d, api._ArrayDesc) for d in descs.values()):
        s = descs["self"]
        T_in, B = (s.shape + (0, 0))[:2]
        wshape = descs["weight"].shape
        K, Cout = (wshape[0], wshape[2]) if len(wshape) == 3 else (0, 0)
        T_out = T_in + 2 * pad - K + 1 if (len(s.shape) == 3 and _is_int(pad)) else 0
        descs["out"] = _OutDesc((max(T_out, 0), B, Cout) if len(s.shape) == 3 and len(wshape) == 3 else (),
                                s.data_type)
    else:
        descs["out"] = _OutDesc((), _F)
    profile = guarded("soc", soc, lambda: get_profile(soc), f"None or one of {sorted(PROFILES)}")
    def hif8_rule():
        if not hif8_inputs:
            return
        if profile.name != "ascend950":
            raise Invalid(INVALID, f"hif8_inputs is True on {profile.name}; expected False (HiFloat8 operands "
                          "exist only on ascend950)")
        for n in ("self", "weight"):
            if descs[n].data_type != _HIF8:
                raise Invalid(INVALID, f"{NUMPY_LABELS.get(n, n)} has dtype {descs[n].array.dtype}; expected uint8 "
                              "HiFloat8 codes (hif8_inputs=True)")
    try:
        info = check_forward(descs, pad, cube_math_type, profile, lambda d: isinstance(d, (api._ArrayDesc, _OutDesc)),
                             api._expected_array, numpy=True, dtype_rule=hif8_rule)
    except Invalid as e:
        err(e.status, e.message)
    overrides = {"hf32_rounding": hf32_rounding, "hf32_mantissa_bits": hf32_mantissa_bits,
                 "hif8_rounding": hif8_rounding, "saturate": saturate, "accumulation": accumulation,
                 "block_size": block_size}
    for name, value in overrides.items():
        if value is not None:
            guarded(name, value, lambda: check_option(name, value), api._OPTION_EXPECTED[name])
    options = guarded("an emulation option", None, lambda: resolve_options(profile, **overrides), "valid options")
    threads = guarded("num_threads", num_threads, lambda: api._threads(num_threads),
                      "None or an integer in [1, 1024]")
    try:
        plan = make_forward_plan(info, options, threads, profile)
    except (ValueError, OverflowError, MemoryError) as e:
        err(INVALID, f"the problem is too large to plan (T_in={info['T_in']}, B={info['B']}, Cin={info['Cin']}, "
            f"Cout={info['Cout']}, K={info['K']}): {exc_text(e)}")
    x, w, b = (descs[n].array for n in INPUTS)
    return _execute_numpy(plan, x, w, b, err)


class _OutDesc:
    """The NumPy layer's output, seen by the rules before it exists: its shape and data type."""
    __slots__ = ("shape", "data_type", "format", "np_dtype")

    def __init__(self, shape, data_type):
        self.shape = tuple(shape)
        self.data_type = data_type
        self.format = int(aclFormat.ACL_FORMAT_ND)
        self.np_dtype = None


def out_numpy_dtype(code):
    return np.dtype(np.uint8) if code == _HIF8 else _NP_OF[code]


def _execute_numpy(plan, x, w, b, err):
    from . import api
    out_dtype = out_numpy_dtype(plan.dtype)
    out_bytes = plan.T_out * plan.shape[1] * plan.shape[3] * out_dtype.itemsize
    need, limit = plan.workspace_size + out_bytes, api.memory_limit()
    if need > limit:
        err(INVALID, f"the problem needs a workspace of {api._gib(plan.workspace_size)} and an output of "
            f"{api._gib(out_bytes)}; expected at most {api._gib(limit)} in all (this machine's physical memory)")
    try:
        out = np.empty((plan.T_out, plan.shape[1], plan.shape[3]), out_dtype)
        ws = api._workspace(plan.workspace_size) if plan.workspace_size else None
    except (MemoryError, ValueError) as e:
        err(INVALID, f"the problem needs a workspace of {api._gib(plan.workspace_size)} and an output of "
            f"{api._gib(out_bytes)}; the allocation failed ({type(e).__name__})")
    try:
        xo, wo = array_operand(x, plan.hif8), array_operand(w, plan.hif8)
        start = bias_start(b, plan.bias_bc)
        run_forward_plan(plan, xo, wo, start, (out.__array_interface__["data"][0] if out.size else 0, plan.dtype),
                         0 if ws is None else ws.__array_interface__["data"][0], 0 if ws is None else ws.size)
    finally:
        del ws
        api._trim_workspace()
    return out


# ---- CANN layer: reading and writing descriptors' device memory ------------------------------------------
def device_view(t, base):
    """A NumPy view of descriptor t's elements in device memory (``base``: its buffer's uint8 array, kept alive
    by the caller): its dtype (HiFloat8 as uint8), shape and strides.  The memory rules must have passed."""
    dt = np.dtype(np.uint8) if t.data_type == _HIF8 else _NP_OF[t.data_type]
    isz = dt.itemsize
    return np.ndarray(tuple(t.shape), dtype=dt, buffer=base, offset=t.offset * isz,
                      strides=tuple(s * isz for s in t.strides))


def launch_cann(plan, tensors, bases, ws_arr, ws_size, cancel=None):
    """Phase 2's work for the forward: tensors name -> aclTensor, bases name -> its buffer's uint8 array (None
    for an empty view); ws_arr the workspace's uint8 array (None when the plan needs none).  self and weight are
    read in place (HiFloat8 ones are decoded by the kernel as it packs them); out is written in place, or, when
    it is not contiguous, through a contiguous staging copy in the workspace (as CANN's code does)."""
    x, w = tensors["self"].kernel_operand(), tensors["weight"].kernel_operand()
    b = tensors["bias"]
    start = bias_start(device_view(b, bases["bias"]) if bases["bias"] is not None else np.zeros(0, np.float32),
                       plan.bias_bc)
    out = tensors["out"]
    target = None
    if not plan.out_staging:
        out_op = (out.kernel_operand()[0], plan.dtype)
    else:                       # the staging copy: the workspace's last out_staging (+ alignment) bytes
        start_at = plan.workspace_size - plan.out_staging - WS_ALIGN
        addr = ws_arr.__array_interface__["data"][0] + start_at
        skip = -addr % WS_ALIGN
        target = np.ndarray((plan.T_out, plan.shape[1], plan.shape[3]), out_numpy_dtype(plan.dtype),
                            buffer=ws_arr, offset=start_at + skip)
        out_op = (addr + skip, plan.dtype)
    ws_addr = 0 if ws_arr is None else ws_arr.__array_interface__["data"][0]
    run_forward_plan(plan, x, w, start, out_op, ws_addr, plan.workspace_size - plan.out_staging - WS_ALIGN
                     if plan.out_staging else (0 if ws_arr is None else int(ws_size)), cancel)
    if target is not None:
        device_view(out, bases["out"])[...] = target


# ---- CANN layer: the two phases ---------------------------------------------------------------------------
import weakref as _weakref

from .status import (ACLNN_ERR_INNER, ACLNN_SUCCESS, never_raises, set_error)

PHASE1 = "aclnnConvTbcGetWorkspaceSize"
PHASE2 = "aclnnConvTbc"
_fwd_executors = _weakref.WeakSet()     # executors made by this operator's phase 1


@never_raises(ACLNN_ERR_INNER, lambda rc: (rc, 0, None))
def aclnnConvTbcGetWorkspaceSize(self, weight, bias, pad, out, cube_math_type):
    """Phase 1 of the forward: validate, plan, size the workspace.  Returns (status, workspace_size, executor)."""
    from . import api
    from .profiles import get_profile, resolve_options
    tensors = dict(zip(NAMES, (self, weight, bias, out)))
    try:
        profile = get_profile()
        info = check_forward(tensors, pad, cube_math_type, profile, api._is_live_tensor, api._expected_tensor)
        options = resolve_options(profile)
        plan = make_forward_plan(info, options, api._threads(None), profile, out.is_contiguous())
        executor = api.aclOpExecutor(plan, tensors)
        _fwd_executors.add(executor)
        api._executors.add(executor)       # genuine: aclSetAclOpExecutorRepeatable / aclDestroyAclOpExecutor take it
    except Invalid as e:
        return set_error(e.status, f"{PHASE1}: {e.message}"), 0, None
    except ValueError as e:
        return set_error(INVALID, f"{PHASE1}: {e}"), 0, None
    except Exception as e:
        return api._internal(PHASE1, e), 0, None
    return ACLNN_SUCCESS, plan.workspace_size, executor


@never_raises(ACLNN_ERR_INNER)
def aclnnConvTbc(workspace, workspace_size, executor, stream) -> int:
    """Phase 2 of the forward: check the workspace and executor, enqueue the work on ``stream``, return."""
    from . import api
    try:
        return _phase2(workspace, workspace_size, executor, stream)
    except Exception as e:
        if isinstance(executor, api.aclOpExecutor) and not executor.repeatable:
            executor.state = "used"
        return api._internal(PHASE2, e)


def _memory_problem(tensors):
    for n in NAMES:
        msg = tensors[n].memory_problem()
        if msg:
            return f"{n}: {msg}"
    return None


def _phase2(workspace, workspace_size, executor, stream):
    from . import api, runtime
    from .memory import is_device_ptr
    from ._plan import INLINE_FLOPS

    def fail(status, msg, release=True):
        if release and isinstance(executor, api.aclOpExecutor) and not executor.repeatable:
            executor.state = "used"
        return set_error(status, f"{PHASE2}: {msg}")

    if executor is None:
        return fail(NULLPTR, "executor is a null pointer (None); expected one from phase 1")
    if not isinstance(executor, api.aclOpExecutor):
        return fail(INVALID, f"executor is a {type(executor).__name__}; expected an aclOpExecutor")
    if executor not in _fwd_executors:
        return fail(INVALID, f"executor was not made by {PHASE1}; expected an executor from phase 1", release=False)
    with executor._lock:
        if executor.state != "ready":
            return fail(INVALID, f"executor was already {executor.state}; a single-use executor runs once (call "
                        "aclSetAclOpExecutorRepeatable after phase 1 to reuse it)", release=False)
        if not executor.repeatable:
            executor.state = "used"
    plan = executor.plan
    required = plan.workspace_size
    if isinstance(workspace_size, bool) or not isinstance(workspace_size, (int, np.integer)) or workspace_size < 0:
        return fail(INVALID, f"workspace_size is {safe_repr(workspace_size)}; expected a byte count >= 0")
    workspace_size = int(workspace_size)
    if workspace_size > 0 and workspace is None:
        return fail(NULLPTR, f"workspace is None but workspace_size is {workspace_size}; expected a device buffer")
    if workspace_size < required:
        return fail(INVALID, f"workspace_size is {workspace_size}; expected at least {required} (from phase 1)")
    if required and (not is_device_ptr(workspace) or workspace.freed or workspace.nbytes < workspace_size):
        return fail(INVALID, f"workspace is {safe_repr(workspace)}; expected a live device buffer from aclrtMalloc "
                    f"of at least workspace_size = {workspace_size} bytes")
    s = runtime.resolve_stream(stream)
    if s is None:
        return fail(INVALID, f"stream is {safe_repr(stream)}; expected a live stream or None (default)")
    tensors = executor.tensors
    problem = _memory_problem(tensors)
    if problem:
        return fail(INVALID, problem)
    if required:
        ws_span = (workspace.allocation_id, workspace.offset, workspace.offset + required)
        for n in NAMES:
            span = tensors[n].byte_span()
            if api._span_overlap(ws_span, span):
                return fail(INVALID, f"workspace (bytes {ws_span[1]}..{ws_span[2]}) overlaps {n} (bytes "
                            f"{span[1]}..{span[2]}) in the same device buffer; expected a workspace that overlaps "
                            "no tensor")
    try:
        bases = {n: (t.data.array() if t.data is not None and t.numel else None) for n, t in tensors.items()}
        ws_arr = workspace.array() if required else None
    except ValueError as e:
        return fail(INVALID, f"a device buffer was freed while the call was being made: {e}")

    def task():
        problem = _memory_problem(tensors)
        if problem:
            return INVALID, f"{PHASE2}: {problem}"
        if ws_arr is not None and workspace.freed:
            return INVALID, (f"{PHASE2}: the workspace {workspace!r} was freed; expected live memory from "
                             "aclrtMalloc until the work has run")
        launch_cann(plan, tensors, bases, ws_arr, workspace_size, s.cancel_flag)
        bases.clear()
        return None

    try:
        s.enqueue(task, inline_if_idle=plan.flops < INLINE_FLOPS)
    except RuntimeError as e:
        return fail(INVALID, f"stream {safe_repr(stream)}: {e}")
    return ACLNN_SUCCESS
