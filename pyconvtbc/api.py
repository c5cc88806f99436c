"""The two public layers over one pipeline: descriptor -> validate -> plan -> kernels.

* CANN layer: ``aclnnConvTbcBackwardGetWorkspaceSize`` (phase 1) and ``aclnnConvTbcBackward`` (phase 2),
  status-returning, never raising for bad arguments.
* NumPy layer: ``conv_tbc_backward``, raising ``AclnnError`` with the same status and message.
"""
import functools
import math
import os
import threading
import weakref
from typing import Any, Optional, Tuple

import numpy as np

from . import formats as _reg, runtime
from ._kernels._openmp import effective_threads, omp_max_threads
from ._plan import INLINE_FLOPS, make_plan, run_plan, run_plan_arrays
from ._validation import NAMES, Invalid, check
from .enums import NUMPY_DTYPE, aclDataType as DT, aclFormat, acl_dtype_of_numpy
from .enums import ACL_OPT_DETERMINISTIC
from .profiles import PROFILES, check_option, get_profile, resolve_options, settings_key
from .status import (ACLNN_ERR_INNER, ACLNN_ERR_INNER_NULLPTR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR,
                     ACLNN_SUCCESS, AclnnError, exc_text, never_raises, safe_repr, set_error)
from .memory import DevicePtr, is_device_ptr
from .tensor import aclTensor

PHASE1 = "aclnnConvTbcBackwardGetWorkspaceSize"
PHASE2 = "aclnnConvTbcBackward"


def _threads(requested):
    """The kernels' thread count for one call (``effective_threads``: the argument, $PYCONVTBC_NUM_THREADS,
    then OpenMP's count, which $OMP_NUM_THREADS and threadpoolctl drive); a bad value is a ValueError naming it."""
    try:
        return effective_threads(requested)
    except (TypeError, OverflowError) as e:  # defensive: effective_threads raises ValueError itself
        raise ValueError(f"num_threads is not valid ({e})") from None


def _internal(fn, e):
    """Last resort: an unexpected exception is a bug; report it as a status, never raise (CANN layer)."""
    return set_error(ACLNN_ERR_INNER, f"{fn}: internal error ({exc_text(e)}); this is a pyconvtbc bug, "
                     "please report it")


# ---- executor ------------------------------------------------------------------------------------
_executors = weakref.WeakSet()  # every executor phase 1 made: a hand-built one is refused


class aclOpExecutor:
    """What phase 1 captured: the plan and the seven descriptors' fields (not the data).

    Only phase 1 makes executors that phase 2 accepts; the plan and the captured fields cannot be changed
    afterwards (``tensors`` hands out fresh copies), so phase 2 never runs a plan on views it was not made for.
    """
    __slots__ = ("_plan", "_fields", "repeatable", "state", "_lock", "__weakref__")

    def __init__(self, plan: Any, tensors: dict) -> None:
        object.__setattr__(self, "_plan", plan)
        object.__setattr__(self, "_fields", {n: (t.view_dims, t.data_type, t.strides, t.offset, t.format,
                                                 t.storage_dims, t.data) for n, t in tensors.items()})
        self.repeatable = False
        self.state = "ready"        # "ready" -> "used" (single use) | "destroyed"
        self._lock = threading.Lock()

    def __setattr__(self, name, value):
        if name in ("_plan", "_fields"):
            raise AttributeError(f"aclOpExecutor.{name} is read-only")
        object.__setattr__(self, name, value)

    @property
    def plan(self) -> Any:
        return self._plan

    @property
    def tensors(self) -> dict:
        """name -> a fresh aclTensor with the captured fields (sharing the DevicePtr, not the data)."""
        return {n: aclTensor(*f) for n, f in self._fields.items()}

    @property
    def genuine(self) -> bool:
        """True for an executor made by phase 1."""
        return self in _executors

    @property
    def workspace_size(self) -> int:
        return self._plan.workspace_size

    def __repr__(self):
        return f"<aclOpExecutor ConvTbcBackward {self.state}{' repeatable' if self.repeatable else ''}>"


def _is_live_tensor(obj):
    return isinstance(obj, aclTensor) and not obj.destroyed and obj.problem() is None


def _expected_tensor(obj):
    if isinstance(obj, aclTensor) and not obj.destroyed:
        return f"a valid tensor descriptor (its fields are not: {obj.problem()})"
    return "a live tensor descriptor"


def _effective_deterministic(profile):
    opt = runtime.ctx_option(ACL_OPT_DETERMINISTIC)
    return profile.deterministic_default if opt is None else bool(opt)


@never_raises(ACLNN_ERR_INNER, lambda rc: (rc, 0, None))
def aclnnConvTbcBackwardGetWorkspaceSize(self: aclTensor, input: aclTensor, weight: aclTensor, bias: aclTensor,
                                         pad: int, cube_math_type: int, grad_input: aclTensor,
                                         grad_weight: aclTensor, grad_bias: aclTensor
                                         ) -> Tuple[int, int, Optional["aclOpExecutor"]]:
    """Phase 1: validate, plan, size the workspace.  Returns (status, workspace_size, executor)."""
    tensors = dict(zip(NAMES, (self, input, weight, bias, grad_input, grad_weight, grad_bias)))
    try:
        profile = get_profile()
        info = check(tensors, pad, cube_math_type, profile, _is_live_tensor, _expected_tensor)
        options = resolve_options(profile)
        plan = make_plan(info, [tensors[n].data_type for n in ("self", "input", "weight", "gradInput",
                                                                "gradWeight", "gradBias")],
                         options, _threads(None), _effective_deterministic(profile), profile)
        executor = aclOpExecutor(plan, tensors)
        _executors.add(executor)
    except Invalid as e:
        return set_error(e.status, f"{PHASE1}: {e.message}"), 0, None
    except ValueError as e:  # a bad process setting (environment variable, option), or a shape too large
        return set_error(ACLNN_ERR_PARAM_INVALID, f"{PHASE1}: {e}"), 0, None
    except Exception as e:  # never raise out of the CANN layer
        return _internal(PHASE1, e), 0, None
    return ACLNN_SUCCESS, plan.workspace_size, executor


@never_raises(ACLNN_ERR_INNER)
def aclSetAclOpExecutorRepeatable(executor: "aclOpExecutor") -> int:
    if executor is None:
        return set_error(ACLNN_ERR_INNER_NULLPTR, "aclSetAclOpExecutorRepeatable: executor is None")
    if not isinstance(executor, aclOpExecutor) or not executor.genuine or executor.state != "ready":
        return set_error(ACLNN_ERR_PARAM_INVALID, f"aclSetAclOpExecutorRepeatable: executor is {safe_repr(executor)}; "
                         "expected an executor from phase 1 that has not been used or destroyed")
    executor.repeatable = True
    return ACLNN_SUCCESS


@never_raises(ACLNN_ERR_INNER)
def aclDestroyAclOpExecutor(executor: "aclOpExecutor") -> int:
    if executor is None:
        return set_error(ACLNN_ERR_INNER_NULLPTR, "aclDestroyAclOpExecutor: executor is None")
    if not isinstance(executor, aclOpExecutor) or not executor.genuine or executor.state == "destroyed":
        return set_error(ACLNN_ERR_PARAM_INVALID, f"aclDestroyAclOpExecutor: executor is {safe_repr(executor)}; "
                         "expected a live executor")
    with executor._lock:
        executor.state = "destroyed"
    return ACLNN_SUCCESS


def _memory_problem(tensors):
    for n in NAMES:
        msg = tensors[n].memory_problem()
        if msg:
            return f"{n}: {msg}"
    return None


@never_raises(ACLNN_ERR_INNER)
def aclnnConvTbcBackward(workspace: Optional[DevicePtr], workspace_size: int, executor: "aclOpExecutor",
                         stream: Optional[runtime.aclrtStream]) -> int:
    """Phase 2: check the workspace and executor, enqueue the work on ``stream``, return at once."""
    try:
        return _phase2(workspace, workspace_size, executor, stream)
    except Exception as e:  # never raise out of the CANN layer
        if isinstance(executor, aclOpExecutor) and not executor.repeatable:
            executor.state = "used"
        return _internal(PHASE2, e)


def _span_overlap(a, b):
    return a is not None and b is not None and a[0] == b[0] and a[1] < b[2] and b[1] < a[2]


def _phase2(workspace, workspace_size, executor, stream):
    def fail(status, msg, release=True):
        if release and isinstance(executor, aclOpExecutor) and not executor.repeatable:
            executor.state = "used"
        return set_error(status, f"{PHASE2}: {msg}")

    if executor is None:
        return fail(ACLNN_ERR_PARAM_NULLPTR, "executor is a null pointer (None); expected one from phase 1")
    if not isinstance(executor, aclOpExecutor):
        return fail(ACLNN_ERR_PARAM_INVALID, f"executor is a {type(executor).__name__}; expected an aclOpExecutor")
    if not executor.genuine:
        return fail(ACLNN_ERR_PARAM_INVALID, "executor was not made by aclnnConvTbcBackwardGetWorkspaceSize; "
                    "expected an executor from phase 1", release=False)
    with executor._lock:
        if executor.state != "ready":
            return fail(ACLNN_ERR_PARAM_INVALID, f"executor was already {executor.state}; a single-use executor "
                        "runs once (call aclSetAclOpExecutorRepeatable after phase 1 to reuse it)", release=False)
        if not executor.repeatable:
            executor.state = "used"
    plan = executor.plan
    required = plan.workspace_size
    if isinstance(workspace_size, bool) or not isinstance(workspace_size, (int, np.integer)) or workspace_size < 0:
        return fail(ACLNN_ERR_PARAM_INVALID, f"workspace_size is {safe_repr(workspace_size)}; expected a byte count >= 0")
    workspace_size = int(workspace_size)
    if workspace_size > 0 and workspace is None:
        return fail(ACLNN_ERR_PARAM_NULLPTR, f"workspace is None but workspace_size is {workspace_size}; "
                    "expected a device buffer")
    if workspace_size < required:
        return fail(ACLNN_ERR_PARAM_INVALID, f"workspace_size is {workspace_size}; expected at least {required} "
                    "(from phase 1)")
    if required and (not is_device_ptr(workspace) or workspace.freed or workspace.nbytes < workspace_size):
        return fail(ACLNN_ERR_PARAM_INVALID, f"workspace is {safe_repr(workspace)}; expected a live device buffer "
                    f"from aclrtMalloc of at least workspace_size = {workspace_size} bytes")
    s = runtime.resolve_stream(stream)
    if s is None:
        return fail(ACLNN_ERR_PARAM_INVALID, f"stream is {safe_repr(stream)}; expected a live stream or None (default)")
    tensors = executor.tensors
    problem = _memory_problem(tensors)
    if problem:
        return fail(ACLNN_ERR_PARAM_INVALID, problem)
    if required:
        ws_span = (workspace.allocation_id, workspace.offset, workspace.offset + required)
        for n in NAMES:
            span = tensors[n].byte_span()
            if _span_overlap(ws_span, span):
                return fail(ACLNN_ERR_PARAM_INVALID, f"workspace (bytes {ws_span[1]}..{ws_span[2]}) overlaps {n} "
                            f"(bytes {span[1]}..{span[2]}) in the same device buffer; expected a workspace that "
                            "overlaps no tensor")
    # Resolve addresses now; the task holds the arrays, so freed memory is never touched.  A buffer freed by
    # another thread since the check above makes array() raise: report it like the check would have.
    try:
        keep = [t.data.array() for t in tensors.values() if t.data is not None and t.numel]
        ws_arr = workspace.array() if required else None
        ops = {n: tensors[n].kernel_operand() for n in NAMES}
    except ValueError as e:
        return fail(ACLNN_ERR_PARAM_INVALID, f"a device buffer was freed while the call was being made: {e}")

    def task():
        problem = _memory_problem(tensors)  # freed between enqueue and execution?
        if problem:
            return ACLNN_ERR_PARAM_INVALID, f"{PHASE2}: {problem}"
        if ws_arr is not None and workspace.freed:
            return ACLNN_ERR_PARAM_INVALID, (f"{PHASE2}: the workspace {workspace!r} was freed; expected live "
                                             "memory from aclrtMalloc until the work has run")
        run_plan(plan, ops["self"], ops["input"], ops["weight"],
                 (ops["gradInput"][0], ops["gradInput"][-1]), (ops["gradWeight"][0], ops["gradWeight"][-1]),
                 (ops["gradBias"][0], ops["gradBias"][-1]),
                 0 if ws_arr is None else ws_arr.ctypes.data, 0 if ws_arr is None else int(workspace_size),
                 s.cancel_flag)
        del keep[:]
        return None

    try:
        s.enqueue(task, inline_if_idle=plan.flops < INLINE_FLOPS)
    except RuntimeError as e:
        return fail(ACLNN_ERR_PARAM_INVALID, f"stream {safe_repr(stream)}: {e}")
    return ACLNN_SUCCESS


# ---- NumPy layer ---------------------------------------------------------------------------------
class _ArrayDesc:
    """A NumPy array seen as a descriptor by the validation rules (always a valid view)."""
    __slots__ = ("array", "shape", "data_type", "format", "np_dtype", "given")

    def __init__(self, array, data_type=None, shape=None):
        if array.size and not array.flags.aligned:
            array = np.array(array)  # a misaligned view (rare: frombuffer at an odd offset): read an aligned copy
        self.array = array
        self.shape = tuple(array.shape) if shape is None else tuple(shape)
        if data_type is None:
            self.data_type = acl_dtype_of_numpy(array.dtype)
            self.np_dtype = array.dtype
        else:
            self.data_type = data_type
        self.format = int(aclFormat.ACL_FORMAT_ND)


def _expected_array(obj):
    if isinstance(obj, np.ma.MaskedArray):
        return "a plain NumPy array (a masked array's mask would be ignored: pass np.ma.filled(a, value) or a.data)"
    return "a NumPy array"


def _as_input(a):
    """What the validation rules see for one array argument: a descriptor, or the object itself when it is
    not an array the layer accepts (rule 1 then names it).  Masked arrays are refused (their mask would be
    ignored); other ndarray subclasses (np.matrix, np.memmap, ...) are read as the plain arrays they hold."""
    if a is None or not isinstance(a, np.ndarray) or isinstance(a, np.ma.MaskedArray):
        return a
    if type(a) is not np.ndarray:
        a = np.ndarray.view(a, np.ndarray)  # ndarray's own view: no method the subclass overrides runs
    return _ArrayDesc(a)


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


_OPTION_EXPECTED = {"hf32_rounding": "None, 'half_away' or 'nearest_even'", "hf32_mantissa_bits": "None, 10 or 11",
                    "hif8_rounding": "None, 'ta' or 'hybrid'", "saturate": "None, True or False",
                    "accumulation": "None, 'cube', 'cube_wide', 'cube_rz' or 'sequential'",
                    "block_size": "None or an integer in [1, 64]", "order_seed": "None or an integer >= 0"}

_ws_cache = threading.local()
WORKSPACE_KEEP_BYTES = 64 << 20  # per-thread scratch above this is dropped when the call returns


def _workspace(nbytes):
    """The calling thread's scratch buffer of at least ``nbytes`` (reused: no large allocation per call)."""
    buf = getattr(_ws_cache, "buf", None)
    if buf is None or buf.size < nbytes:
        _ws_cache.buf = None  # drop the old one before allocating the larger one
        buf = np.empty(max(nbytes, 4096), dtype=np.uint8)
        _ws_cache.buf = buf
    return buf


def _trim_workspace():
    buf = getattr(_ws_cache, "buf", None)
    if buf is not None and buf.size > WORKSPACE_KEEP_BYTES:
        _ws_cache.buf = None


def release_workspace() -> None:
    """Free the calling thread's NumPy-layer scratch buffer now.

    ``conv_tbc_backward`` keeps at most ``WORKSPACE_KEEP_BYTES`` (64 MiB) of scratch per thread between calls
    (a larger workspace is freed when the call returns), and a thread's scratch is freed when the thread ends;
    this frees the rest at once.  The next call allocates again as needed.
    """
    _ws_cache.buf = None


@functools.lru_cache(maxsize=None)
def memory_limit() -> int:
    """The most bytes one NumPy-layer call may ask for (workspace plus outputs): this machine's physical memory,
    ``os.sysconf('SC_PHYS_PAGES') * os.sysconf('SC_PAGE_SIZE')`` (1 TiB where the OS does not say)."""
    try:
        n = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        if n > 0:
            return int(n)
    except (AttributeError, ValueError, OSError):
        pass
    return 1 << 40


def _gib(n):
    return f"{n} bytes ({n / 2**30:.3g} GiB)"


# A plan depends only on what the key below holds, never on the data or the strides; a call that validated
# once is valid again with the same key, so repeated calls (sweeps, training loops) skip validation and
# planning.  Only calls with plain, aligned ndarrays and hashable arguments are cached.
_PLAN_CACHE_SIZE = 256
_plan_cache = {}


def _cache_key(grad_output, input, weight, bias, pad, cube, gw_dtype, soc, deterministic, num_threads, *options):
    for a in (grad_output, input, weight, bias):
        if type(a) is not np.ndarray or not a.flags.aligned:
            return None
    environ = os.environ
    try:
        key = (grad_output.shape, grad_output.dtype, input.shape, input.dtype, weight.shape, weight.dtype,
               bias.shape, bias.dtype, type(pad), pad, type(cube), cube, type(gw_dtype), gw_dtype, type(soc), soc,
               type(deterministic), deterministic, type(num_threads), num_threads,
               tuple(map(type, options)), options, settings_key(),
               environ.get("PYCONVTBC_SOC_VERSION"), environ.get("PYCONVTBC_NUM_THREADS"),
               omp_max_threads() if num_threads is None else None)
        hash(key)
    except Exception:  # unhashable arguments (or a __hash__ that raises): no caching
        return None
    return key


def _execute(plan, arrays):
    """Allocate the outputs and run the kernels (GIL released inside)."""
    dy, x, w, b = arrays
    codes = plan.dtypes
    dts = [NUMPY_DTYPE[DT(c)] for c in codes[3:]]
    out_bytes = sum(math.prod(a.shape) * dt.itemsize for a, dt in zip((x, w, b), dts))
    need, limit = plan.workspace_size + out_bytes, memory_limit()

    def too_large(why):
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"conv_tbc_backward: the problem needs a workspace of "
                         f"{_gib(plan.workspace_size)} and outputs of {_gib(out_bytes)}; {why}")
    if need > limit:
        too_large(f"expected at most {_gib(limit)} in all (this machine's physical memory)")
    try:
        gi = np.empty(x.shape, dts[0])
        gw = np.empty(w.shape, dts[1])
        gb = np.empty(b.shape, dts[2])
        ws = _workspace(plan.workspace_size) if plan.workspace_size else None
    except (MemoryError, ValueError) as e:
        too_large(f"the allocation failed ({type(e).__name__})")
    try:
        run_plan_arrays(plan, dy, x, w, gi, gw, gb, ws)
    finally:
        del ws
        _trim_workspace()
    return gi, gw, gb


def conv_tbc_backward(grad_output: np.ndarray, input: np.ndarray, weight: np.ndarray, bias: np.ndarray,
                      pad: int = 0, *, cube_math_type: int = 0, grad_weight_dtype: Any = None,
                      soc: Optional[str] = None, deterministic: Optional[bool] = None,
                      num_threads: Optional[int] = None, hf32_rounding: Optional[str] = None,
                      hf32_mantissa_bits: Optional[int] = None, hif8_rounding: Optional[str] = None,
                      saturate: Optional[bool] = None, accumulation: Optional[str] = None,
                      block_size: Optional[int] = None, order_seed: Optional[int] = None
                      ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
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
    cube_math_type : int, optional
        0 KEEP_DTYPE (default), 1 ALLOW_FP32_DOWN_PRECISION, 2 USE_FP16, 3 USE_HF32: with the operands' dtype and
        the chip it selects the compute precision (docs/precision.md); an error cell is 161002.
    grad_weight_dtype : optional
        grad_weight's dtype: None (weight's dtype, the default), weight's own dtype, ``"hifloat8"`` (uint8
        HiFloat8 codes; decode with ``hif8_decode``) or ``"float8_e4m3fn"``; names, NumPy dtypes or the
        matching aclDataType values.
    soc : str, optional
        The emulated chip, ``"ascend910b"``, ``"ascend950"`` or ``"ascend910"``.  None: ``get_soc_version()``.
    deterministic : bool, optional
        Combine gradWeight's partial sums in a fixed order.  None: the chip's default (on for ascend950).
    num_threads : int, optional
        Kernel threads, an integer in [1, 1024].  None: ``$PYCONVTBC_NUM_THREADS``, else OpenMP's count (which
        ``$OMP_NUM_THREADS`` and ``threadpoolctl.threadpool_limits`` set), else every usable core.
    hf32_rounding : str, optional
        HF32 rounding, ``"half_away"`` or ``"nearest_even"``.  None: ``get_emulation_options()``'s.
    hf32_mantissa_bits : int, optional
        HF32 explicit mantissa bits, 10 or 11.  None: the chip's (11 on ascend910b, 10 on ascend950).
    hif8_rounding : str, optional
        HiFloat8 rounding of grad_weight, ``"ta"`` or ``"hybrid"``.  None: ``get_emulation_options()``'s.
    saturate : bool, optional
        Saturate 8-bit grad_weight overflow to the largest finite value (and NaN to 0) instead of inf/NaN.
        None: ``get_emulation_options()``'s.
    accumulation : str, optional
        How the fp32 sums are formed: ``"cube"`` (the default: the NPU's blocks of k0 products and chains),
        ``"cube_wide"``, ``"cube_rz"`` or ``"sequential"`` (one fp32 chain per output).
        None: ``get_emulation_options()``'s.  See docs/numpy.md.
    block_size : int, optional
        Products summed per block, an integer in [1, 64].  None: the compute precision's k0.
    order_seed : int, optional
        An integer >= 0 fixing the order in which non-deterministic partial sums are combined, so repeated
        calls agree.  None: ``get_emulation_options()``'s (by default a fresh order per call, as on the hardware).

    Returns
    -------
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
    """
    key = _cache_key(grad_output, input, weight, bias, pad, cube_math_type, grad_weight_dtype, soc, deterministic,
                     num_threads, hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation,
                     block_size, order_seed)
    hit = _plan_cache.get(key) if key is not None else None
    if hit is not None:
        plan, arrays = hit, (grad_output, input, weight, bias)
    else:
        plan, arrays = _plan_numpy_call(grad_output, input, weight, bias, pad, cube_math_type, grad_weight_dtype,
                                        soc, deterministic, num_threads, hf32_rounding, hf32_mantissa_bits,
                                        hif8_rounding, saturate, accumulation, block_size, order_seed)
        if key is not None:
            if len(_plan_cache) >= _PLAN_CACHE_SIZE:
                _plan_cache.clear()
            _plan_cache[key] = plan
    return _execute(plan, arrays)


def _plan_numpy_call(grad_output, input, weight, bias, pad, cube_math_type, grad_weight_dtype, soc, deterministic,
                     num_threads, hf32_rounding, hf32_mantissa_bits, hif8_rounding, saturate, accumulation=None,
                     block_size=None, order_seed=None):
    """Validate and plan one NumPy call (raising AclnnError); returns the plan and the arrays to read."""
    def err(status, msg):
        raise AclnnError(status, f"conv_tbc_backward: {msg}")

    def guarded(name, value, fn, expected):
        """fn() with any failure an AclnnError 161002 naming ``name`` (a value whose __eq__, __hash__, __repr__
        or __index__ raises reads as a bad value, never as another exception)."""
        try:
            return fn()
        except ValueError as e:
            err(ACLNN_ERR_PARAM_INVALID, e)
        except Exception:
            err(ACLNN_ERR_PARAM_INVALID, f"{name} is {safe_repr(value)}; expected {expected}")

    arrays = (grad_output, input, weight, bias)
    descs = {n: _as_input(a) for n, a in zip(NAMES[:4], arrays)}
    try:
        gw_code = _grad_weight_code(grad_weight_dtype,
                                    descs["weight"] if isinstance(descs["weight"], _ArrayDesc) else None)
    except Exception:  # a value that cannot even be compared: validation names it
        gw_code = _NotADtype(grad_weight_dtype)
    valid_inputs = all(isinstance(d, _ArrayDesc) for d in descs.values())
    if valid_inputs:
        descs["gradInput"] = _ArrayDesc(descs["input"].array, descs["input"].data_type)
        descs["gradWeight"] = _ArrayDesc(descs["weight"].array, gw_code)
        if grad_weight_dtype is not None:
            descs["gradWeight"].given = grad_weight_dtype
        descs["gradBias"] = _ArrayDesc(descs["bias"].array, descs["bias"].data_type)
        descs["gradBias"].np_dtype = descs["bias"].np_dtype
    else:  # rule 1 reports the first missing or non-array input before it looks at outputs
        for n in NAMES[4:]:
            descs[n] = _ArrayDesc(np.empty(0, np.float32))
    profile = guarded("soc", soc, lambda: get_profile(soc), f"None or one of {sorted(PROFILES)}")
    try:
        info = check(descs, pad, cube_math_type, profile, lambda d: isinstance(d, _ArrayDesc),
                     _expected_array, numpy=True)
    except Invalid as e:
        err(e.status, e.message)
    except Exception as e:  # pragma: no cover - check() reads values through safe comparisons and reprs
        err(ACLNN_ERR_PARAM_INVALID, f"an argument could not be read ({exc_text(e)})")
    overrides = {"hf32_rounding": hf32_rounding, "hf32_mantissa_bits": hf32_mantissa_bits,
                 "hif8_rounding": hif8_rounding, "saturate": saturate, "accumulation": accumulation,
                 "block_size": block_size, "order_seed": order_seed}
    for name, value in overrides.items():
        if value is not None:
            guarded(name, value, lambda: check_option(name, value), _OPTION_EXPECTED[name])
    options = guarded("an emulation option", None, lambda: resolve_options(profile, **overrides), "valid options")
    threads = guarded("num_threads", num_threads, lambda: _threads(num_threads), "None or an integer in [1, 1024]")

    def det():
        if deterministic is None:
            return profile.deterministic_default
        if not isinstance(deterministic, (bool, np.bool_, int)) or deterministic not in (0, 1):
            raise ValueError(f"deterministic is {safe_repr(deterministic)}; expected None, True or False")
        return bool(deterministic)
    deterministic = guarded("deterministic", deterministic, det, "None, True or False")
    codes = [descs[n].data_type for n in ("self", "input", "weight")] + [descs["input"].data_type, gw_code,
                                                                           descs["bias"].data_type]
    try:
        plan = make_plan(info, codes, options, threads, bool(deterministic), profile)
    except (ValueError, OverflowError, MemoryError) as e:  # sizes beyond what the kernels can address
        err(ACLNN_ERR_PARAM_INVALID, f"the problem is too large to plan (T_in={info['T_in']}, B={info['B']}, "
            f"Cin={info['Cin']}, Cout={info['Cout']}, K={info['K']}): {exc_text(e)}")
    return plan, tuple(descs[n].array for n in NAMES[:4])
