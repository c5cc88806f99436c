"""The operator aclnnConvTbc (the forward): its tensors, its rules, its kernel calls, and its two public layers.

    out[t,b,co] = bias[co] + sum_k sum_ci self[t+k-pad, b, ci] * weight[k, ci, co]

Everything operator-neutral lives in ``_twophase`` (executor, phases, streams, memory checks), ``_validation``
(shared rules), ``_plan`` and ``_numpy_layer``; this module declares what is particular to the forward
(docs/semantics.md section 11, docs/precision.md "The forward operator").  Its kernel entry is
``_conv_tbc.run_forward`` (``_kernels/_conv_fwd.h``: gradInput's packing and micro-kernels).
"""
import ctypes
from typing import NamedTuple, Optional, Tuple

import numpy as np

from . import _numpy_layer as nl
from . import _twophase
from . import formats as _reg
from ._handoff import Problem, Shape
from ._kernels import _conv_tbc
from ._plan import WS_ALIGN, aligned_workspace
from ._validation import (FLOATS, INVALID, Invalid, check_cube_math_type, check_descriptors, check_dims_nonnegative,
                          check_memory, check_pad, check_ranks, dtype_names, dtype_seen, wrong_type)
from .enums import NUMPY_DTYPE, aclDataType as DT, aclFormat, dtype_name, format_name
from .memory import DevicePtr
from .formats import K0_8BIT
from .profiles import COMPUTE_BF16, COMPUTE_FP16, COMPUTE_FP32
from .runtime import aclrtStream
from .status import ACLNN_ERR_INNER, int_value, is_int, never_raises, safe_repr
from .tensor import aclTensor
from .typing import AccumulationOption, BoolOption, HF32RoundingOption, HiF8RoundingOption, IntOption, Accumulation, Array, CubeMathTypeLike, HF32Rounding, HiF8Rounding, SocName

NAMES = ("self", "weight", "bias", "out")
INPUTS = NAMES[:3]
OUTPUTS = ("out",)
RANKS = {"self": 3, "weight": 3, "bias": 1, "out": 3}
FORMATS = (int(aclFormat.ACL_FORMAT_ND), int(aclFormat.ACL_FORMAT_NCL))
EIGHT_BIT_OPERANDS = _reg.codes_with_role(_reg.EIGHT_BIT_OPERAND)     # HIFLOAT8
_F, _H, _B = int(DT.ACL_FLOAT), int(DT.ACL_FLOAT16), int(DT.ACL_BF16)


class Decisions(NamedTuple):
    """The forward's own phase-1 decisions (Problem.extra / Plan.extra)."""
    bias_format: int          # Bc: the aclDataType the bias is cast to before it starts the fp32 sums
    staging: int              # bytes of a contiguous staging copy of out in the workspace (0: none needed)
    k0: Optional[int]         # the cube's block size for 8-bit operands (K0_8BIT); None: the compute precision's


def self_dtypes(profile):
    """The data types self (and so weight and out) may have on ``profile``."""
    allowed = [c for c in FLOATS if profile.has_bf16 or c != _B]
    return allowed + (list(EIGHT_BIT_OPERANDS) if profile.eight_bit_operands else [])


def bias_format(profile, self_dtype, compute):
    """Bc (docs/precision.md, "The forward operator"): FLOAT16 on ascend910 and wherever the cube computes in
    FP16 (FLOAT16 self, or USE_FP16); BF16 for BF16 self on ascend950; FLOAT otherwise (FLOAT self, BF16 self on
    ascend910b, HiFloat8 self under every cubeMathType)."""
    if not profile.has_bf16:
        return _H
    if self_dtype in EIGHT_BIT_OPERANDS:
        return _F
    if compute == COMPUTE_FP16:
        return _H
    if self_dtype == _B and profile.eight_bit_operands:      # ascend950 keeps a BF16 bias in BF16
        return _B
    return _F


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


class ConvTbc(_twophase.Operator):
    name = "ConvTbc"
    phase1 = "aclnnConvTbcGetWorkspaceSize"
    phase2 = "aclnnConvTbc"
    numpy_name = "conv_tbc"
    tensors = NAMES
    inputs = INPUTS
    outputs = OUTPUTS
    numpy_labels = {"self": "input", "out": "the output (in input's dtype)", "cubeMathType": "cube_math_type"}

    # ---- rules (docs/semantics.md section 11), in the operator's order; the first failure wins ----
    def check(self, t, scalars, profile, is_descriptor, expected, numpy=False):
        def L(n):
            return self.label(n, numpy)

        def dt_words(c):
            return dtype_names([c], numpy) if _reg.data_type(c) is not None else dtype_name(c)

        check_descriptors(t, NAMES, is_descriptor, expected, L)                       # 1
        extra_rule = scalars.get("dtype_rule")                                       # 2. data types
        if extra_rule is not None:
            extra_rule()
        s_dt = t["self"].data_type
        allowed = self_dtypes(profile)
        if s_dt not in allowed:
            raise Invalid(INVALID, f"{L('self')} {dtype_seen(t['self'], numpy)}; expected "
                          f"{'' if numpy else 'one of '}{dtype_names(allowed, numpy)} on {profile.name}")
        for n in ("weight", "out"):
            if t[n].data_type != s_dt:
                raise Invalid(INVALID, f"{L(n)} {dtype_seen(t[n], numpy)}; expected {L('self')}'s, "
                              f"{dt_words(s_dt)} (no promotion)")
        if t["bias"].data_type not in FLOATS:
            raise Invalid(INVALID, f"{L('bias')} {dtype_seen(t['bias'], numpy)}; expected "
                          f"{'' if numpy else 'one of '}{dtype_names(FLOATS, numpy)}")
        check_ranks(t, RANKS, L)                                                     # 3
        for n in NAMES:                                                              # 4. formats
            fmt = t[n].format
            if n == "bias":
                if profile.eight_bit_operands and fmt != int(aclFormat.ACL_FORMAT_ND):
                    raise Invalid(INVALID, f"{L(n)} has format {format_name(fmt)}; expected ND on {profile.name}")
            elif fmt not in FORMATS:
                raise Invalid(INVALID, f"{L(n)} has format {format_name(fmt)}; expected ND or NCL")
        check_dims_nonnegative(t, NAMES, L)                                          # 5. shapes
        T_in, B, Cin = t["self"].shape
        K, wCin, Cout = t["weight"].shape
        if Cin != wCin:
            raise Invalid(INVALID, f"{L('self')}'s third dim is {Cin} but weight's second dim is {wCin}; expected "
                          "equal (Cin)")
        if t["bias"].shape[0] != Cout:
            raise Invalid(INVALID, f"bias has shape {list(t['bias'].shape)}; expected [{Cout}] (weight's third "
                          "dim, Cout)")
        if K < 1:
            raise Invalid(INVALID, f"weight has shape {list(t['weight'].shape)}: kernel size K = {K}; expected "
                          "K >= 1")
        shape = Shape(T_in, B, Cin, Cout, K, check_pad(scalars["pad"], T_in))
        if T_in * B * Cin and T_in + shape.pad < K:
            raise Invalid(INVALID, f"T_in + pad = {T_in} + {shape.pad} = {T_in + shape.pad} is less than the kernel "
                          f"size K = {K}; expected T_in + pad >= K (the operator counts pad once here, although "
                          "the output would have T_in + 2*pad - K + 1 positions)")
        T_out = shape.T_out
        if T_out < 0:
            raise Invalid(INVALID, f"{L('self')} has T_in = {T_in} time steps and {L('weight')} K = {K}: "
                          f"T_out = T_in + 2*pad - K + 1 = {T_in} + 2*{shape.pad} - {K} + 1 = {T_out}; "
                          "expected T_out >= 0")
        if tuple(t["out"].shape) != (T_out, B, Cout):
            raise Invalid(INVALID, f"{L('out')} has shape {list(t['out'].shape)}; expected {[T_out, B, Cout]} "
                          "(T_out = T_in + 2*pad - K + 1, B, Cout)")
        cmt = scalars["cube_math_type"]                                              # 6. cubeMathType
        if int_value(cmt) == 4:
            raise Invalid(INVALID, f"{L('cubeMathType')} is 4; expected 0 (KEEP_DTYPE), 1 "
                          "(ALLOW_FP32_DOWN_PRECISION), 2 (USE_FP16) or 3 (USE_HF32) (CANN's forward also takes 4 "
                          "and computes it as 0: pass 0)")
        if s_dt in EIGHT_BIT_OPERANDS:          # 8-bit operands are used as they are, under any cubeMathType
            check_cube_math_type(cmt, profile, _F, L, numpy)   # (0..3: every cell of FLOAT exists where they do)
            C = COMPUTE_FP32
        else:
            C = check_cube_math_type(cmt, profile, s_dt, L, numpy)
        check_memory(t, INPUTS, OUTPUTS, contiguous_outputs=False)                   # 7. memory (ours)
        out = t["out"]
        if hasattr(out, "strides") and not _distinct_elements(out.shape, out.strides):
            raise Invalid(INVALID, f"out has strides {list(out.strides)} for dims {list(out.shape)}, which make "
                          "some of its elements the same memory; expected an output whose elements are distinct")
        staging = 0
        if hasattr(out, "is_contiguous") and not out.is_contiguous():
            staging = T_out * B * Cout * _out_dtype(s_dt).itemsize
        k0 = K0_8BIT if s_dt in EIGHT_BIT_OPERANDS else None
        return Problem(shape, C, Decisions(bias_format(profile, s_dt, C), staging, k0))

    # ---- kernel calls ----
    def kernel_dtypes(self, t):
        return (t["self"].data_type, t["bias"].data_type)

    def default_k0(self, problem):
        return problem.extra.k0

    def kernel_workspace(self, problem, mode, dtypes, num_threads):
        n = _kernel_bytes(problem.shape, mode, dtypes[0], num_threads)
        staging = problem.extra.staging
        return n + (staging + WS_ALIGN if staging else 0)

    def deterministic(self, profile, requested):
        return True          # one chain per output element: the forward is always deterministic

    def flops(self, shape):
        return 2 * shape.T_out * shape.B * shape.Cin * shape.Cout * shape.K

    def planned_views(self, plan):
        s, (x, b) = plan.shape, plan.dtypes
        return {"self": ((s.T_in, s.B, s.Cin), x, False), "weight": ((s.K, s.Cin, s.Cout), x, False),
                "bias": ((s.Cout,), b, False), "out": ((s.T_out, s.B, s.Cout), x, not plan.extra.staging)}

    def run(self, plan, operands, ws_address, ws_size, cancel):
        o = operands
        shape = plan.shape
        start = bias_start(_view_at(o["bias"], (shape.Cout,)), plan.extra.bias_format)
        kernel = _kernel_bytes(shape, plan.mode, plan.dtypes[0], plan.num_threads)
        address, size = aligned_workspace(plan, ws_address, ws_size)
        staged = None
        if plan.extra.staging:                 # out is not contiguous: the kernel writes a staging copy
            at = (address + kernel + WS_ALIGN - 1) // WS_ALIGN * WS_ALIGN    # after the kernel's part
            staged = _view_at((at, shape.B * shape.Cout, shape.Cout, 1, plan.dtypes[0]),
                              (shape.T_out, shape.B, shape.Cout), element_strides=True)
            out = (at, plan.dtypes[0])
        else:
            out = (o["out"][0], plan.dtypes[0])
        _run(plan, o["self"], o["weight"], start, out, address if kernel else 0, kernel if kernel else 0, cancel)
        if staged is not None:
            _view_at(o["out"], (shape.T_out, shape.B, shape.Cout))[...] = staged

    def numpy_outputs(self, plan, arrays):
        s = plan.shape
        return [((s.T_out, s.B, s.Cout), _out_dtype(plan.dtypes[0]))]

    def run_arrays(self, plan, arrays, outputs, ws):
        x, w, b = arrays
        (out,) = outputs
        code = plan.dtypes[0]
        _conv_tbc.run_forward_arrays(x, w, bias_start(b, plan.extra.bias_format), out, code, code,
                                     plan.kernel_shape, _kernel_mode(plan.mode),
                                     ws if plan.kernel_workspace else None, plan.num_threads)


def _out_dtype(code):
    return np.dtype(np.uint8) if code in EIGHT_BIT_OPERANDS else NUMPY_DTYPE[code]


def _kernel_mode(mode):
    """The kernel's ``Mode``, with ``pre``: the rounding of the fp32 sums before the output cast (the compute
    precision when it is FP16 / BF16, else none).  Made once per distinct mode (the NumPy layer's calls ask for
    it every time)."""
    km = _KERNEL_MODES.get(mode)
    if km is None:
        pre = mode.compute if mode.compute in (COMPUTE_FP16, COMPUTE_BF16) else COMPUTE_FP32
        km = _KERNEL_MODES[mode] = mode._replace(pre=pre)
    return km


_KERNEL_MODES = {}


def _kernel_bytes(shape, mode, self_dtype, num_threads):
    return int(_conv_tbc.forward_workspace_size(tuple(shape), _kernel_mode(mode), int(self_dtype),
                                                int(num_threads)))


def _run(plan, x, w, start, out, ws_address, ws_size, cancel):
    """Call the kernel: x, w (address, byte strides..., dtype), start the fp32 bias values, out (address,
    dtype) of a C-contiguous output, the aligned kernel workspace."""
    b = start.__array_interface__["data"][0] if start.size else 0
    _conv_tbc.run_forward(x, w, b, out, plan.kernel_shape, _kernel_mode(plan.mode), ws_address, ws_size,
                          plan.num_threads, cancel)


def _view_at(operand, shape, element_strides=False):
    """A NumPy view of memory the kernels address: operand (address, strides..., dtype code), strides in bytes
    (or in elements with element_strides)."""
    addr, *strides, code = operand
    dt = _out_dtype(code)
    if element_strides:
        strides = [s * dt.itemsize for s in strides]
    if addr == 0 or any(d == 0 for d in shape):
        return np.zeros(shape, dt)
    extent = dt.itemsize + sum((d - 1) * s for d, s in zip(shape, strides))
    buf = (ctypes.c_char * extent).from_address(addr)
    return np.ndarray(shape, dtype=dt, buffer=buf, strides=tuple(strides))


def bias_start(bias_values, bc):
    """The accumulator's start values: bias (any float array) cast to Bc (round to nearest even; fp16 overflow
    gives inf, by the rule, without NumPy's warning), widened exactly to fp32; a new C-contiguous float32 array."""
    v = np.asarray(bias_values)
    if v.dtype != np.float32:
        v = v.astype(np.float32)          # fp16 / bf16 -> fp32 is exact
    if bc != _F:
        with np.errstate(over="ignore", invalid="ignore"):
            v = v.astype(NUMPY_DTYPE[bc]).astype(np.float32)
    return np.ascontiguousarray(v, dtype=np.float32)


FORWARD = ConvTbc()


# ---- CANN layer ----------------------------------------------------------------------------------
@never_raises(ACLNN_ERR_INNER, lambda rc: (rc, 0, None))
def aclnnConvTbcGetWorkspaceSize(self: Optional[aclTensor], weight: Optional[aclTensor], bias: Optional[aclTensor],
                                 pad: int, out: Optional[aclTensor],
                                 cube_math_type: int) -> Tuple[int, int, Optional["_twophase.aclOpExecutor"]]:
    """Phase 1 of the forward: validate, plan, size the workspace.  Returns (status, workspace_size, executor)."""
    tensors = dict(zip(NAMES, (self, weight, bias, out)))
    return _twophase.get_workspace_size(FORWARD, tensors, {"pad": pad, "cube_math_type": cube_math_type})


@never_raises(ACLNN_ERR_INNER)
def aclnnConvTbc(workspace: Optional[DevicePtr], workspace_size: int, executor: Optional["_twophase.aclOpExecutor"],
                 stream: Optional[aclrtStream]) -> int:
    """Phase 2 of the forward: check the workspace and executor, enqueue the work on ``stream``, return."""
    return _twophase.execute(FORWARD, workspace, workspace_size, executor, stream)


# ---- NumPy layer ---------------------------------------------------------------------------------
def _out_desc(shape, data_type):
    """The NumPy layer's output, seen by the rules before it exists: its shape and data type."""
    return nl.ArrayDesc(np.empty(0, np.uint8), data_type, shape)


def conv_tbc(input: Array, weight: Array, bias: Array, pad: int = 0, *, cube_math_type: CubeMathTypeLike = 0,
             soc: Optional[SocName] = None, num_threads: Optional[int] = None,
             hf32_rounding: Optional[HF32RoundingOption] = None, hf32_mantissa_bits: Optional[IntOption] = None,
             hif8_inputs: bool = False, hif8_rounding: Optional[HiF8RoundingOption] = None, saturate: Optional[BoolOption] = None,
             accumulation: Optional[AccumulationOption] = None, block_size: Optional[IntOption] = None,
             order_seed: Optional[IntOption] = None) -> Array:
    """The forward of the TBC convolution as the emulated NPU computes it (CANN's aclnnConvTbc).

    ``out[t, b, co] = bias[co] + sum_k sum_ci input[t+k-pad, b, ci] * weight[k, ci, co]``, as ``torch.conv_tbc``.

    Parameters
    ----------
    input : numpy.ndarray
        (T_in, B, Cin): float32, float16 or ``ml_dtypes.bfloat16``, any strides (read in place); with
        ``hif8_inputs=True`` (ascend950 only), uint8 HiFloat8 codes; ``en_dtypes.hifloat8`` arrays are HiFloat8
        codes by their dtype (ascend950 only; the result is then ``en_dtypes.hifloat8`` too).
    weight : numpy.ndarray
        (K, Cin, Cout), in input's dtype (no promotion: mixed dtypes are an error, as in CANN).
    bias : numpy.ndarray
        (Cout,): float32, float16 or bfloat16, whatever input's dtype.  It is cast to the chip's bias format
        and starts each output's fp32 sum (docs/precision.md, "The forward operator").
    pad : int, optional
        Zero padding at both ends of the time axis, in [0, 255]; T_in + pad must be at least K (the operator
        counts pad once in that check).  Default 0.
    cube_math_type : int or str, optional
        0 KEEP_DTYPE (default), 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32 (the value or its name), as
        in the backward.
    soc : str, optional
        ``"ascend910b"``, ``"ascend950"`` or ``"ascend910"``.  None: ``get_soc_version()``.
    num_threads : int, optional
        Kernel threads in [1, 1024].  None: as ``conv_tbc_backward``.
    hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation, block_size : optional
        The emulation options, as in ``conv_tbc_backward`` (None: the process-wide value; ``"default"``: the
        built-in default).  hif8_rounding and saturate apply to HiFloat8 outputs.
    order_seed : int, optional
        Accepted and checked like ``conv_tbc_backward``'s (None or an integer >= 0; else 161002), so that one
        set of emulation keywords serves both calls; it changes nothing here: the forward's sums have no
        run-to-run order (always deterministic).
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
        message names it with this function's argument names, the value seen and what was expected; also for a
        problem whose workspace and output exceed this machine's physical memory (``memory_limit()``).
    AclnnTypeError
        (an AclnnError 161002 that is also a TypeError) for an argument of the wrong Python type, as in
        ``conv_tbc_backward``.
    """
    arrays = (input, weight, bias)
    scalars = (pad, cube_math_type, soc, num_threads, hif8_inputs)
    options = (hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation, block_size, order_seed)
    key = nl.cache_key(FORWARD, arrays, scalars, options, num_threads)
    out = nl.call(FORWARD, key, arrays, lambda: _plan_numpy_call(*arrays, *scalars, *options))[0]
    if _reg.is_en_hifloat8(input):              # en_dtypes.hifloat8 operands: the result in that dtype too
        out = out.view(input.dtype)
    return out


def _plan_numpy_call(input, weight, bias, pad, cube_math_type, soc, num_threads, hif8_inputs, hf32_rounding,
                     hf32_mantissa_bits, hif8_rounding, saturate, accumulation, block_size, order_seed):
    """Validate and plan one NumPy call (raising AclnnError); returns the plan and the arrays to read."""
    cube_math_type = nl.cube_math_type_value(cube_math_type)
    descs = {n: nl.as_input(a) for n, a in zip(INPUTS, (input, weight, bias))}
    hif8 = int(DT.ACL_HIFLOAT8)
    # a boolean keyword, like deterministic and saturate: True / False, 0 / 1, NumPy booleans and integers
    flag = isinstance(hif8_inputs, (bool, int, np.bool_, np.integer)) and hif8_inputs in (0, 1)
    if flag and hif8_inputs:
        for n in ("self", "weight"):
            d = descs[n]
            if isinstance(d, nl.ArrayDesc) and d.array.dtype == np.uint8:
                d.data_type = hif8
    if all(isinstance(d, nl.ArrayDesc) for d in descs.values()):
        s, w = descs["self"].shape, descs["weight"].shape
        # (pad is not checked yet: Python ints, so that a NumPy integer pad cannot overflow or warn here)
        p = int_value(pad)
        T_out = int(s[0]) + 2 * p - int(w[0]) + 1 if len(s) == 3 and len(w) == 3 and p is not None else 0
        descs["out"] = _out_desc((max(T_out, 0), s[1], w[2]) if len(s) == 3 and len(w) == 3 else (),
                                 descs["self"].data_type)
    else:  # rule 1 reports the first missing or non-array input before it looks at the output
        descs["out"] = _out_desc((), _F)
    profile = nl.profile_for(FORWARD, soc)

    def hif8_rule():           # runs first among the data-type rules
        if not flag:
            raise Invalid(INVALID, f"hif8_inputs is {safe_repr(hif8_inputs)}; expected True or False",
                          wrong_type=wrong_type("hif8_inputs", hif8_inputs))
        if not hif8_inputs:
            return
        if not profile.eight_bit_operands:
            raise Invalid(INVALID, f"hif8_inputs is True on {profile.name}; expected False (HiFloat8 operands "
                          "exist only on ascend950)")
        for n in ("self", "weight"):
            if descs[n].data_type != hif8:
                raise Invalid(INVALID, f"{FORWARD.label(n, True)} has dtype {descs[n].array.dtype}; expected uint8 "
                              "HiFloat8 codes (hif8_inputs=True)")
    problem = nl.check(FORWARD, descs, {"pad": pad, "cube_math_type": cube_math_type, "dtype_rule": hif8_rule},
                       profile)
    overrides = {"hf32_rounding": hf32_rounding, "hf32_mantissa_bits": hf32_mantissa_bits,
                 "hif8_rounding": hif8_rounding, "saturate": saturate, "accumulation": accumulation,
                 "block_size": block_size, "order_seed": order_seed}
    options, threads = nl.settings(FORWARD, profile, overrides, num_threads)
    plan = nl.plan(FORWARD, problem, FORWARD.kernel_dtypes(descs), options, threads, True, profile)
    return plan, tuple(descs[n].array for n in INPUTS)

