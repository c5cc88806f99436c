"""The operator aclnnConvTbcBackward: its tensors, its rules, its kernel calls, and its two public layers.

Everything operator-neutral lives in ``_twophase`` (executor, phases, streams, memory checks), ``_validation``
(shared rules), ``_plan`` and ``_numpy_layer``; this module declares what is particular to this operator
(docs/developer.md, "Adding an operator").
"""
from typing import Any, NamedTuple, Optional, Tuple

import numpy as np

from . import _numpy_layer as nl
from . import _twophase
from . import formats as _reg
from ._gradbias import apply_reducesum_gradbias, geometry as gradbias_geometry
from ._handoff import Problem, Shape
from ._kernels import _conv_tbc
from ._plan import Plan, aligned_workspace
from ._validation import (EIGHT_BIT, FLOATS, INVALID, Invalid, check_cube_math_type, check_descriptors,
                          check_dims_nonnegative, check_formats, check_memory, check_pad, check_ranks, check_shapes,
                          dtype_names, dtype_seen, or_list)
from .enums import NUMPY_DTYPE, aclDataType as DT, acl_dtype_of_numpy, dtype_name
from .memory import DevicePtr
from .profiles import promote
from .runtime import aclrtStream
from .status import ACLNN_ERR_INNER, never_raises, safe_repr
from .tensor import aclTensor
from .typing import (AccumulationOption, BoolOption, HF32RoundingOption, HiF8RoundingOption, IntOption, Accumulation, Array, CubeMathTypeLike, GradWeightDtype, HF32Rounding, HiF8Rounding,
                     SocName)

NAMES = ("self", "input", "weight", "bias", "gradInput", "gradWeight", "gradBias")
INPUTS = NAMES[:4]
OUTPUTS = NAMES[4:]
RANKS = {"self": 3, "input": 3, "weight": 3, "bias": 1, "gradInput": 3, "gradWeight": 3, "gradBias": 1}
KERNEL_DTYPES = ("self", "input", "weight", "gradInput", "gradWeight", "gradBias")   # the kernels' order


class ConvTbcBackward(_twophase.Operator):
    name = "ConvTbcBackward"
    phase1 = "aclnnConvTbcBackwardGetWorkspaceSize"
    phase2 = "aclnnConvTbcBackward"
    numpy_name = "conv_tbc_backward"
    tensors = NAMES
    inputs = INPUTS
    outputs = OUTPUTS
    # The NumPy layer's wording: its argument names (the CANN layer keeps CANN's)
    numpy_labels = {"self": "grad_output", "gradInput": "grad_input (the output, in input's dtype)",
                    "gradWeight": "grad_weight_dtype", "gradBias": "grad_bias (the output, in bias's dtype)",
                    "cubeMathType": "cube_math_type"}

    # ---- rules (docs/semantics.md section 2), in order; the first failure wins ----
    def check(self, t, scalars, profile, is_descriptor, expected, numpy=False):
        def L(n):
            return self.label(n, numpy)

        check_descriptors(t, NAMES, is_descriptor, expected, L)                       # 1
        for n in NAMES:                                                              # 2. data types
            allowed = _allowed_dtypes(n, profile)
            if t[n].data_type not in allowed:
                if numpy and n == "gradWeight":    # the keyword: what it may be for this weight (rule 7's list)
                    raise Invalid(INVALID, f"{L(n)} {dtype_seen(t[n], True)}; expected None or weight's dtype "
                                  f"({dtype_names([t['weight'].data_type], True)}), {dtype_names(EIGHT_BIT, True)}")
                extra = "" if profile.has_bf16 else f" on {profile.name}"
                raise Invalid(INVALID, f"{L(n)} {dtype_seen(t[n], numpy)}; expected "
                              f"{'' if numpy else 'one of '}{dtype_names(allowed, numpy)}{extra}")
        check_formats(t, NAMES, L)                                                   # 3
        check_ranks(t, RANKS, L)                                                     # 4
        check_dims_nonnegative(t, NAMES, L)                                          # 5. shapes
        T_in, B, Cin = t["input"].shape
        K, wCin, Cout = t["weight"].shape
        if Cin != wCin:
            raise Invalid(INVALID, f"input's third dim is {Cin} but weight's second dim is {wCin}; expected equal "
                          "(Cin)")
        if t["bias"].shape[0] != Cout:
            raise Invalid(INVALID, f"bias has shape {list(t['bias'].shape)}; expected [{Cout}] (weight's third "
                          "dim, Cout)")
        shape = Shape(T_in, B, Cin, Cout, K, check_pad(scalars["pad"], T_in))
        T_out = shape.T_out
        if T_out < 0:
            raise Invalid(INVALID, f"{L('input')} has T_in = {T_in} time steps and {L('weight')} K = {K}: "
                          f"T_out = T_in + 2*pad - K + 1 = {T_in} + 2*{shape.pad} - {K} + 1 = {T_out}; "
                          "expected T_out >= 0")
        check_shapes(t, {"self": (T_out, B, Cout), "gradInput": tuple(t["input"].shape),
                         "gradWeight": tuple(t["weight"].shape), "gradBias": tuple(t["bias"].shape)}, L)
        P = promote(t["self"].data_type, t["input"].data_type, t["weight"].data_type)
        C = check_cube_math_type(scalars["cube_math_type"], profile, P, L, numpy)    # 6
        if t["gradInput"].data_type != t["input"].data_type:                         # 7. output data types
            raise Invalid(INVALID, f"{L('gradInput')} has data type {dtype_name(t['gradInput'].data_type)}; "
                          f"expected input's, {dtype_name(t['input'].data_type)}")
        if t["gradBias"].data_type != t["bias"].data_type:
            raise Invalid(INVALID, f"{L('gradBias')} has data type {dtype_name(t['gradBias'].data_type)}; "
                          f"expected bias's, {dtype_name(t['bias'].data_type)}")
        gw = t["gradWeight"].data_type
        if gw != t["weight"].data_type and gw not in EIGHT_BIT:
            if numpy:
                raise Invalid(INVALID, f"grad_weight_dtype {dtype_seen(t['gradWeight'], True)}; expected None or "
                              f"weight's dtype ({dtype_names([t['weight'].data_type], True)}), "
                              f"{dtype_names(EIGHT_BIT, True)}")
            raise Invalid(INVALID, f"gradWeight has data type {dtype_name(gw)}; expected weight's "
                          f"({dtype_name(t['weight'].data_type)}), "
                          f"{or_list(_reg.data_type(c).short for c in EIGHT_BIT)}")
        check_memory(t, INPUTS, OUTPUTS)                                             # 8. memory (ours)
        gb_order = gradbias_geometry(profile.name, T_out * B, Cout, t["self"].data_type)
        return Problem(shape, C, () if gb_order is None else gb_order)

    # ---- kernel calls ----
    def kernel_dtypes(self, t):
        return tuple(t[n].data_type for n in KERNEL_DTYPES)

    def kernel_workspace(self, problem, mode, dtypes, num_threads):
        return _conv_tbc.workspace_size(tuple(problem.shape), mode, dtypes, num_threads)

    def flops(self, shape):
        return 4 * shape.T_out * shape.B * shape.Cin * shape.Cout * shape.K

    def planned_views(self, plan):
        s, (dy, x, w, gi, gw, gb) = plan.shape, plan.dtypes
        return {"self": ((s.T_out, s.B, s.Cout), dy, False), "input": ((s.T_in, s.B, s.Cin), x, False),
                "weight": ((s.K, s.Cin, s.Cout), w, False), "bias": ((s.Cout,), None, False),
                "gradInput": ((s.T_in, s.B, s.Cin), gi, True), "gradWeight": ((s.K, s.Cin, s.Cout), gw, True),
                "gradBias": ((s.Cout,), gb, True)}

    def run(self, plan, operands, ws_address, ws_size, cancel):
        o = operands
        run_plan(plan, o["self"], o["input"], o["weight"], (o["gradInput"][0], o["gradInput"][-1]),
                 (o["gradWeight"][0], o["gradWeight"][-1]), (o["gradBias"][0], o["gradBias"][-1]),
                 ws_address, ws_size, cancel)
        apply_reducesum_gradbias(plan, o["self"], (o["gradBias"][0], o["gradBias"][-1]))   # gradBias's order

    def numpy_outputs(self, plan, arrays):
        _, x, w, b = arrays
        return [(a.shape, NUMPY_DTYPE[c]) for a, c in zip((x, w, b), plan.dtypes[3:])]   # int keys: no enum built

    def run_arrays(self, plan, arrays, outputs, ws):
        dy, x, w, _ = arrays          # bias: only its dtype and shape matter
        run_plan_arrays(plan, dy, x, w, *outputs, ws)
        gb = outputs[2]
        apply_reducesum_gradbias(plan, (dy.__array_interface__["data"][0], *dy.strides, plan.dtypes[0]),
                                 (gb.__array_interface__["data"][0], plan.dtypes[5]))   # gradBias's order


def _allowed_dtypes(name, profile):
    allowed = list(FLOATS)
    # without BF16 (ascend910) only bias may still be BF16; gradBias takes the chip's list, and as it must
    # equal bias's dtype (rule 7), a BF16 bias fails here, at gradBias
    if not profile.has_bf16 and name != "bias":
        allowed.remove(int(DT.ACL_BF16))
    if name == "gradWeight":
        allowed += EIGHT_BIT
    return allowed


def run_plan(plan: Plan, dy: tuple, x: tuple, w: tuple, gi: tuple, gw: tuple, gb: tuple, ws_address: int,
             ws_size: int, cancel: Optional[np.ndarray] = None) -> None:
    """Call the kernels.  dy/x/w: (address, bs0, bs1, bs2, dtype); gi/gw/gb: (address, dtype).

    ws_address may be unaligned: it is rounded up here, within the WS_ALIGN slack phase 1 asked for.
    cancel: None, or an int32 array of one element; nonzero stops the kernels (they then raise).
    """
    ws_address, ws_size = aligned_workspace(plan, ws_address, ws_size)
    _conv_tbc.run(dy, x, w, gi, gw, gb, plan.kernel_shape, plan.kernel_mode, ws_address, ws_size,
                  plan.num_threads, plan.order(), cancel)


def run_plan_arrays(plan: Plan, dy: np.ndarray, x: np.ndarray, w: np.ndarray, gi: np.ndarray, gw: np.ndarray,
                    gb: np.ndarray, ws: Optional[np.ndarray]) -> None:
    """run_plan for NumPy arrays (the NumPy layer): the kernels read addresses and strides themselves.

    dy/x/w: arrays of the planned shapes and dtypes (any strides, element-aligned); gi/gw/gb: new C-contiguous
    outputs; ws: a uint8 array of at least plan.workspace_size bytes, or None when that is 0.
    """
    _conv_tbc.run_arrays(dy, x, w, gi, gw, gb, plan.dtypes, plan.kernel_shape, plan.kernel_mode,
                         ws if plan.kernel_workspace else None, plan.num_threads, plan.order())


BACKWARD = ConvTbcBackward()


# ---- CANN layer ----------------------------------------------------------------------------------
@never_raises(ACLNN_ERR_INNER, lambda rc: (rc, 0, None))
def aclnnConvTbcBackwardGetWorkspaceSize(self: Optional[aclTensor], input: Optional[aclTensor],
                                         weight: Optional[aclTensor], bias: Optional[aclTensor], pad: int,
                                         cube_math_type: int, grad_input: Optional[aclTensor],
                                         grad_weight: Optional[aclTensor], grad_bias: Optional[aclTensor]
                                         ) -> Tuple[int, int, Optional["_twophase.aclOpExecutor"]]:
    """Phase 1: validate, plan, size the workspace.  Returns (status, workspace_size, executor)."""
    tensors = dict(zip(NAMES, (self, input, weight, bias, grad_input, grad_weight, grad_bias)))
    return _twophase.get_workspace_size(BACKWARD, tensors, {"pad": pad, "cube_math_type": cube_math_type})


@never_raises(ACLNN_ERR_INNER)
def aclnnConvTbcBackward(workspace: Optional[DevicePtr], workspace_size: int,
                         executor: Optional["_twophase.aclOpExecutor"],
                         stream: Optional[aclrtStream]) -> int:
    """Phase 2: check the workspace and executor, enqueue the work on ``stream``, return at once."""
    return _twophase.execute(BACKWARD, workspace, workspace_size, executor, stream)


# ---- NumPy layer ---------------------------------------------------------------------------------
def _grad_weight_code(value, weight_desc):
    """The aclDataType for grad_weight_dtype, or the value itself (rejected by validation, named)."""
    if value is None:
        return weight_desc.data_type if weight_desc is not None else int(DT.ACL_DT_UNDEFINED)
    if isinstance(value, str):
        rec = _reg.data_type_named(value)
        if rec is not None:
            return rec.code
        try:  # another dtype name ('float64'): its code, so the message names it
            code = acl_dtype_of_numpy(np.dtype(value))
        except Exception:
            return value
        return value if code == int(DT.ACL_DT_UNDEFINED) else code
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return int(value)
    if not isinstance(value, bool):
        try:
            return acl_dtype_of_numpy(np.dtype(value))
        except Exception:  # not a dtype: validation rejects it, naming it
            pass
    return _NotADtype(value)


class _NotADtype:
    """A grad_weight_dtype that names no data type: compares equal to no code, prints as the value given."""
    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __repr__(self):
        try:
            return repr(self.value)
        except Exception:
            return f"<{type(self.value).__name__}>"


class ConvTbcBackwardResult(NamedTuple):
    """``conv_tbc_backward``'s three gradients, by name or unpacked: ``gi, gw, gb = conv_tbc_backward(...)``."""
    grad_input: Array
    grad_weight: Array
    grad_bias: Array


def conv_tbc_backward(grad_output: Array, input: Array, weight: Array, bias: Array,
                      pad: int = 0, *, cube_math_type: CubeMathTypeLike = 0, grad_weight_dtype: GradWeightDtype = None,
                      soc: Optional[SocName] = None, deterministic: Optional[bool] = None,
                      num_threads: Optional[int] = None, hf32_rounding: Optional[HF32RoundingOption] = None,
                      hf32_mantissa_bits: Optional[IntOption] = None, hif8_rounding: Optional[HiF8RoundingOption] = None,
                      saturate: Optional[BoolOption] = None, accumulation: Optional[AccumulationOption] = None,
                      block_size: Optional[IntOption] = None, order_seed: Optional[IntOption] = None
                      ) -> ConvTbcBackwardResult:
    """Gradients of conv_tbc as the emulated NPU computes them (CANN's aclnnConvTbcBackward).

    Parameters
    ----------
    grad_output : numpy.ndarray
        (T_out, B, Cout), the gradient of the forward's output; T_out = T_in + 2*pad - K + 1.
    input : numpy.ndarray
        (T_in, B, Cin), the forward's input.
    weight : numpy.ndarray
        (K, Cin, Cout), the forward's weight.
    bias : numpy.ndarray
        (Cout,), the forward's bias (only its dtype and shape are used).
        The four arrays are float32, float16 or ``ml_dtypes.bfloat16`` (mixed dtypes are promoted as in PyTorch),
        with any strides (slices, transposes, negative or zero strides); they are read in place.  Masked arrays
        are refused; other ndarray subclasses (``np.matrix``, ``np.memmap``) are read as plain arrays.
    pad : int, optional
        Zero padding at both ends of the time axis, in [0, 255].  Default 0.
    cube_math_type : int or str, optional
        0 KEEP_DTYPE (default), 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32 (the value or its name, any
        case): with the operands' dtype and the chip it selects the compute precision (docs/precision.md); an
        error cell is 161002.
    grad_weight_dtype : optional
        grad_weight's dtype: None (weight's dtype, the default), weight's own dtype, ``"hifloat8"`` (uint8
        HiFloat8 codes; decode with ``hif8_decode``) or ``"float8_e4m3fn"``; names, NumPy dtypes or the
        matching aclDataType values.  ``en_dtypes.hifloat8`` gives the HiFloat8 codes in that dtype.
    soc : str, optional
        The emulated chip, ``"ascend910b"``, ``"ascend950"`` or ``"ascend910"``.  None: ``get_soc_version()``.
    deterministic : bool, optional
        Combine gradWeight's partial sums in a fixed order.  None: the chip's default (on for ascend950).
    num_threads : int, optional
        Kernel threads, an integer in [1, 1024].  None: ``$PYCONVTBC_NUM_THREADS``, else OpenMP's count (which
        ``$OMP_NUM_THREADS`` and ``threadpoolctl.threadpool_limits`` set), else every usable core.
    hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation, block_size, order_seed : optional
        The emulation options.  For each, ``None`` (the default) takes the process-wide value
        (``set_emulation_options``; the built-in default until that is called) and ``"default"`` the built-in
        default whatever the process-wide value is (docs/numpy.md, "Emulation keywords").
    hf32_rounding : str, optional
        HF32 rounding, ``"half_away"`` (built-in default) or ``"nearest_even"``.
    hf32_mantissa_bits : int, optional
        HF32 explicit mantissa bits, 10 or 11.  Built-in default: the chip's (11 on ascend910b, 10 on ascend950).
    hif8_rounding : str, optional
        HiFloat8 rounding of grad_weight, ``"ta"`` (built-in default) or ``"hybrid"``.
    saturate : bool, optional
        Saturate 8-bit grad_weight overflow to the largest finite value (and NaN to 0) instead of inf/NaN.
        Built-in default: False.
    accumulation : str, optional
        How the fp32 sums are formed: ``"cube"`` (built-in default: the NPU's blocks of k0 products and chains),
        ``"cube_wide"``, ``"cube_rz"`` or ``"sequential"`` (one fp32 chain per output).  See docs/numpy.md.
    block_size : int, optional
        Products summed per block, an integer in [1, 64].  Built-in default: the compute precision's k0.
    order_seed : int, optional
        An integer >= 0 fixing the order in which non-deterministic partial sums are combined, so repeated
        calls agree.  Built-in default: a fresh order per call, as on the hardware.

    Returns
    -------
    ConvTbcBackwardResult
        A named tuple of the three gradients (``gi, gw, gb = ...`` unpacks it):
    grad_input : numpy.ndarray
        (T_in, B, Cin) in input's dtype, new and C-contiguous.
    grad_weight : numpy.ndarray
        (K, Cin, Cout) in ``grad_weight_dtype``, new and C-contiguous.
    grad_bias : numpy.ndarray
        (Cout,) in bias's dtype: the sum of grad_output over T_out and B.

    Raises
    ------
    AclnnError
        (a ValueError) with ``.status`` 161001 for a ``None`` array and 161002 for every other bad argument or
        keyword (the message names it with the caller's names, the value seen and what was expected), and for a
        problem whose workspace and outputs exceed this machine's physical memory (``memory_limit()``; the
        message gives the sizes).  See docs/numpy.md and docs/status-codes.md.
    AclnnTypeError
        (an AclnnError 161002 that is also a TypeError) for an argument of the wrong Python type: a float or str
        ``pad``, a non-array where an array is required, a non-integer ``num_threads``, a non-str ``soc``.
    """
    arrays = (grad_output, input, weight, bias)
    scalars = (pad, cube_math_type, grad_weight_dtype, soc, deterministic, num_threads)
    options = (hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation, block_size, order_seed)
    key = nl.cache_key(BACKWARD, arrays, scalars, options, num_threads)
    gi, gw, gb = nl.call(BACKWARD, key, arrays, lambda: _plan_numpy_call(*arrays, *scalars, *options))
    if grad_weight_dtype is not None and not isinstance(grad_weight_dtype, (str, int)) \
            and _reg.is_en_hifloat8(grad_weight_dtype):
        gw = gw.view(np.dtype(grad_weight_dtype))       # asked for as en_dtypes.hifloat8: the codes as that dtype
    return ConvTbcBackwardResult(gi, gw, gb)


def _plan_numpy_call(grad_output, input, weight, bias, pad, cube_math_type, grad_weight_dtype, soc, deterministic,
                     num_threads, hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation=None,
                     block_size=None, order_seed=None):
    """Validate and plan one NumPy call (raising AclnnError); returns the plan and the arrays to read."""
    cube_math_type = nl.cube_math_type_value(cube_math_type)
    descs = {n: nl.as_input(a) for n, a in zip(INPUTS, (grad_output, input, weight, bias))}
    try:
        gw_code = _grad_weight_code(grad_weight_dtype,
                                    descs["weight"] if isinstance(descs["weight"], nl.ArrayDesc) else None)
    except Exception:  # a value that cannot even be compared: validation names it
        gw_code = _NotADtype(grad_weight_dtype)
    if all(isinstance(d, nl.ArrayDesc) for d in descs.values()):
        descs["gradInput"] = nl.ArrayDesc(descs["input"].array, descs["input"].data_type)
        descs["gradWeight"] = nl.ArrayDesc(descs["weight"].array, gw_code)
        if grad_weight_dtype is not None:
            descs["gradWeight"].given = grad_weight_dtype
        descs["gradBias"] = nl.ArrayDesc(descs["bias"].array, descs["bias"].data_type)
        descs["gradBias"].np_dtype = descs["bias"].np_dtype
    else:  # rule 1 reports the first missing or non-array input before it looks at outputs
        for n in OUTPUTS:
            descs[n] = nl.ArrayDesc(np.empty(0, np.float32))
    profile = nl.profile_for(BACKWARD, soc)
    problem = nl.check(BACKWARD, descs, {"pad": pad, "cube_math_type": cube_math_type}, profile)
    overrides = {"hf32_rounding": hf32_rounding, "hf32_mantissa_bits": hf32_mantissa_bits,
                 "hif8_rounding": hif8_rounding, "saturate": saturate, "accumulation": accumulation,
                 "block_size": block_size, "order_seed": order_seed}
    options, threads = nl.settings(BACKWARD, profile, overrides, num_threads)

    def det():
        if deterministic is None:
            return profile.deterministic_default
        if not isinstance(deterministic, (bool, np.bool_, int, np.integer)) or deterministic not in (0, 1):
            raise ValueError(f"deterministic is {safe_repr(deterministic)}; expected None, True or False")
        return bool(deterministic)
    det = nl.guarded(BACKWARD, "deterministic", deterministic, det, "None, True or False")
    plan = nl.plan(BACKWARD, problem, BACKWARD.kernel_dtypes(descs), options, threads, bool(det), profile)
    return plan, tuple(descs[n].array for n in INPUTS)
