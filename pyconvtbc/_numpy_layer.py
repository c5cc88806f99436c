"""The NumPy layer's shared base: array intake, keyword checks, the plan cache, scratch memory, execution.

An operator's NumPy function (``conv_tbc_backward`` in ``_op_conv_tbc_backward``) builds descriptors of its
arrays with ``as_input`` / ``ArrayDesc``, runs its rules through ``check``, resolves the keywords with
``profile_for`` / ``settings`` and plans with ``plan``; ``call`` caches that plan and ``execute`` allocates the
outputs (within ``memory_limit()``) and runs the operator's kernel on a reused per-thread workspace.  Errors
raise ``AclnnError`` with the status and message the CANN layer would record, prefixed by the function's name.
"""
import math
import os
import threading

from typing import Any, Callable, Optional, Tuple

import numpy as np

from ._handoff import Problem
from ._kernels._openmp import omp_max_threads
from ._plan import Plan, make_plan
from ._twophase import Operator, threads as _threads
from ._validation import Invalid, wrong_type
from .enums import CubeMathType, aclFormat, acl_dtype_of_numpy
from .formats import is_en_hifloat8
from .memory import memory_limit, too_large as memory_too_large
from .profiles import (OPTION_EXPECTED, PROFILES, SocProfile, check_option, get_profile, resolve_options,
                       settings_key)
from .status import ACLNN_ERR_PARAM_INVALID, AclnnError, exc_text, safe_repr


# ---- array intake ---------------------------------------------------------------------------------
class ArrayDesc:
    """A NumPy array seen as a descriptor by the validation rules (always a valid view)."""
    __slots__ = ("array", "shape", "data_type", "format", "np_dtype", "given")

    def __init__(self, array, data_type=None, shape=None):
        if array.size and not array.flags.aligned:
            array = _aligned_copy(array)
        self.array = array
        self.shape = tuple(array.shape) if shape is None else tuple(shape)
        if data_type is None:
            self.data_type = acl_dtype_of_numpy(array.dtype)
            self.np_dtype = array.dtype
        else:
            self.data_type = data_type
        self.format = int(aclFormat.ACL_FORMAT_ND)


def _aligned_copy(array: np.ndarray) -> np.ndarray:
    """An aligned copy of a misaligned view (rare: frombuffer at an odd offset) holding only its distinct
    elements: a broadcast (zero-stride) axis is copied once and broadcast again, so a misaligned broadcast
    operand costs what an aligned one does (no expansion)."""
    one = tuple(slice(0, 1) if st == 0 else slice(None) for st in array.strides)
    return np.broadcast_to(np.array(array[one]), array.shape)


def is_array_desc(obj: Any) -> bool:
    return isinstance(obj, ArrayDesc)


def expected_array(obj: Any) -> str:
    if isinstance(obj, np.ma.MaskedArray):
        return "a plain NumPy array (a masked array's mask would be ignored: pass np.ma.filled(a, value) or a.data)"
    try:  # (a type's __module__ may be anything: this is only a hint)
        from_torch = str.split(type(obj).__module__, ".")[0] == "torch"
    except Exception:
        from_torch = False
    if from_torch:
        return "a NumPy array (a torch tensor: pass t.detach().numpy(), or use pyconvtbc.torch.conv_tbc)"
    return "a NumPy array"


def as_input(a: Any) -> Any:
    """What the validation rules see for one array argument: a descriptor, or the object itself when it is
    not an array the layer accepts (rule 1 then names it).  Masked arrays are refused (their mask would be
    ignored); other ndarray subclasses (np.matrix, np.memmap, ...) are read as the plain arrays they hold."""
    if a is None or not isinstance(a, np.ndarray) or isinstance(a, np.ma.MaskedArray):
        return a
    if type(a) is not np.ndarray:
        a = np.ndarray.view(a, np.ndarray)  # ndarray's own view: no method the subclass overrides runs
    if is_en_hifloat8(a.dtype):             # en_dtypes.hifloat8: the kernels read its bytes, HiFloat8 codes
        d = ArrayDesc(a.view(np.uint8), acl_dtype_of_numpy(a.dtype))
        d.np_dtype = a.dtype
        return d
    return ArrayDesc(a)


# ---- keywords -------------------------------------------------------------------------------------


def guarded(op: Operator, name: str, value: Any, fn: Callable[[], Any], expected: str) -> Any:
    """fn() with any failure an AclnnError 161002 naming ``name`` (a value whose __eq__, __hash__, __repr__
    or __index__ raises reads as a bad value, never as another exception)."""
    try:
        return fn()
    except ValueError as e:
        op.numpy_error(ACLNN_ERR_PARAM_INVALID, e, wrong_type(name, value))
    except Exception:
        op.numpy_error(ACLNN_ERR_PARAM_INVALID, f"{name} is {safe_repr(value)}; expected {expected}",
                       wrong_type(name, value))


def cube_math_type_value(value: Any) -> Any:
    """The NumPy layer's cube_math_type: an int (or a CubeMathType), or its name as a string, any case
    ("USE_HF32", "use_hf32"); other values come back unchanged for rule 6 to refuse, naming them."""
    if isinstance(value, str):
        # str's own methods (a str subclass may override them with anything): a plain str comes back
        member = CubeMathType.__members__.get(str.upper(str.strip(value)))
        if member is not None:
            return int(member)
    return value


def profile_for(op: Operator, soc: Optional[str]) -> SocProfile:
    """The profile ``soc`` names (None: the process's chip); a bad name is an AclnnError naming ``soc``."""
    return guarded(op, "soc", soc, lambda: get_profile(soc), f"None or one of {sorted(PROFILES)}")


def check(op: Operator, descs: dict, scalars: dict, profile: SocProfile) -> Problem:
    """The operator's rules on the array descriptors, failures raised as AclnnError."""
    try:
        return op.check(descs, scalars, profile, is_array_desc, expected_array, numpy=True)
    except Invalid as e:
        op.numpy_error(e.status, e.message, e.wrong_type)
    except Exception as e:  # pragma: no cover - the rules read values through safe comparisons and reprs
        op.numpy_error(ACLNN_ERR_PARAM_INVALID, f"an argument could not be read ({exc_text(e)})")


def settings(op: Operator, profile: SocProfile, overrides: dict, num_threads: Any) -> Tuple[dict, int]:
    """(options, threads) of one call: the emulation-option keywords (None = the process setting) checked and
    resolved, and the thread count."""
    for name, value in overrides.items():
        if value is not None:
            guarded(op, name, value, lambda: check_option(name, value), OPTION_EXPECTED[name])
    options = guarded(op, "an emulation option", None, lambda: resolve_options(profile, **overrides), "valid options")
    n = guarded(op, "num_threads", num_threads, lambda: _threads(num_threads), "None or an integer in [1, 1024]")
    return options, n


def plan(op: Operator, problem: Problem, dtypes: tuple, options: dict, num_threads: int, deterministic: bool,
         profile: SocProfile) -> Plan:
    """``make_plan`` with the operator's determinism; a problem too large to plan is an AclnnError."""
    try:
        return make_plan(op, problem, dtypes, options, num_threads, op.deterministic(profile, deterministic), profile)
    except AclnnError:                                     # refused with its own reason (make_plan)
        raise
    except (ValueError, OverflowError, MemoryError) as e:  # sizes beyond what the kernels can address
        s = problem.shape
        op.numpy_error(ACLNN_ERR_PARAM_INVALID, f"the problem is too large to plan (T_in={s.T_in}, B={s.B}, "
                       f"Cin={s.Cin}, Cout={s.Cout}, K={s.K}): {exc_text(e)}")


# ---- the plan cache -------------------------------------------------------------------------------
# A plan depends only on what the key below holds, never on the data or the strides; a call that validated
# once is valid again with the same key, so repeated calls (sweeps, training loops) skip validation and
# planning.  Only calls with plain, aligned ndarrays and hashable arguments are cached.
_PLAN_CACHE_SIZE = 256
_plan_cache = {}


_UNCACHED = object()
_PLAIN = (type(None), bool, str, float, type)   # types whose == and hash cannot lie (exact types only)


def _key_value(v: Any) -> Any:
    """An argument as the cache key holds it: the value validation reads, in a form whose == and hash are the
    built-in ones -- every integer as a plain int (an int subclass by int's own value, whatever its ``__eq__`` or
    ``__hash__`` say), NumPy booleans as bool, exact builtin types and dtypes as they are -- or ``_UNCACHED``
    for anything else (a call with such an argument is validated afresh every time)."""
    t = type(v)
    if t in _PLAIN:
        return (t, v)
    if isinstance(v, int):                       # int subclasses (IntEnum members too): int's own value
        return (int, int.__int__(v))
    if t.__module__ == "numpy" and isinstance(v, (np.integer, np.bool_)):
        return (int, int(v)) if isinstance(v, np.integer) else (bool, bool(v))
    if isinstance(v, np.dtype):
        return (np.dtype, v)
    return _UNCACHED


def cache_key(op: Operator, arrays: tuple, scalars: tuple, options: tuple, num_threads: Any) -> Optional[tuple]:
    """The plan-cache key of one call, or None when it cannot be cached.  scalars: the other arguments (num_threads
    included) and options: the emulation-option keywords, each as given; the key holds the values read
    (``_key_value``), so an argument whose ``==`` or ``hash`` lies cannot select another call's plan."""
    for a in arrays:
        if type(a) is not np.ndarray or not a.flags.aligned:
            return None
    values = tuple(map(_key_value, scalars + options))
    if any(v is _UNCACHED for v in values):
        return None
    environ = os.environ
    try:
        key = (op, tuple([(a.shape, a.dtype) for a in arrays]), values, settings_key(),
               environ.get("PYCONVTBC_SOC_VERSION"), environ.get("PYCONVTBC_NUM_THREADS"),
               omp_max_threads() if num_threads is None else None)
        hash(key)
    except Exception:  # unhashable arguments (or a __hash__ that raises): no caching
        return None
    return key


def call(op: Operator, key: Optional[tuple], arrays: tuple, plan_call: Callable[[], Tuple[Plan, tuple]]) -> tuple:
    """Run one NumPy-layer call: the cached plan for ``key`` (not None), else ``plan_call()`` -> (plan, the
    arrays to read), cached; then ``execute``."""
    hit = _plan_cache.get(key) if key is not None else None
    if hit is not None:
        p = hit
    else:
        p, arrays = plan_call()
        if key is not None:
            if len(_plan_cache) >= _PLAN_CACHE_SIZE:
                _plan_cache.clear()
            _plan_cache[key] = p
    return execute(op, p, arrays)


# ---- scratch memory and execution -----------------------------------------------------------------
_ws_cache = threading.local()
WORKSPACE_KEEP_BYTES = 256 << 20  # per-thread scratch above this is dropped when the call returns


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

    ``conv_tbc_backward`` keeps at most ``WORKSPACE_KEEP_BYTES`` (256 MiB) of scratch per thread between calls
    (a larger workspace is freed when the call returns), and a thread's scratch is freed when the thread ends;
    this frees the rest at once.  The next call allocates again as needed.
    """
    _ws_cache.buf = None


def _gib(n):
    return f"{n} bytes ({n / 2**30:.3g} GiB)"


def execute(op: Operator, plan: Plan, arrays: tuple) -> tuple:
    """Allocate the outputs and run the operator's kernel (GIL released inside); returns the outputs."""
    specs = op.numpy_outputs(plan, arrays)
    out_bytes = sum(math.prod(shape) * dt.itemsize for shape, dt in specs)
    need = plan.workspace_size + out_bytes

    def too_large(why):
        op.numpy_error(ACLNN_ERR_PARAM_INVALID, f"the problem needs a workspace of {_gib(plan.workspace_size)} "
                       f"and outputs of {_gib(out_bytes)}; {why}")
    why = memory_too_large(need)
    if why:
        too_large(why)
    # A call made while another runs in this thread (from a Python signal handler, which the kernels run while
    # they work) must not share the outer call's scratch: it gets its own, dropped when it returns.
    nested = getattr(_ws_cache, "busy", False)
    try:
        outputs = [np.empty(shape, dt) for shape, dt in specs]
        ws = None
        if plan.workspace_size:
            ws = np.empty(plan.workspace_size, np.uint8) if nested else _workspace(plan.workspace_size)
    except (MemoryError, ValueError) as e:
        too_large(f"the allocation failed ({type(e).__name__})")
    _ws_cache.busy = True
    try:
        op.run_arrays(plan, arrays, outputs, ws)
    finally:
        _ws_cache.busy = nested
        del ws
        if not nested:
            _trim_workspace()
    return tuple(outputs)
