"""The operator-neutral core of the CANN layer: the ``Operator`` declaration, the executor and the two phases.

An operator (``_op_conv_tbc_backward``) is a subclass of ``Operator`` that declares its names and tensors, its
rules (``check``) and its kernel calls; its public phase-1 / phase-2 functions are one-line calls of
``get_workspace_size`` / ``execute`` below.  Everything here is shared: executor lifetime (single use,
repeatable, destroyed, hand-built ones refused), the workspace checks, the stream hand-off, the overlap and
freed-buffer checks, and the last-resort internal-error status (the CANN layer never raises).
"""
import threading
import weakref
from typing import Any, Optional, Tuple

from . import runtime
from ._kernels._openmp import effective_threads
from ._plan import INLINE_FLOPS, make_plan
from ._validation import Invalid, memory_problem, span_overlap
from .enums import ACL_OPT_DETERMINISTIC, dtype_name
from .memory import DevicePtr, is_device_ptr
from .profiles import get_profile, resolve_options
from .status import (ACLNN_ERR_INNER, ACLNN_ERR_INNER_NULLPTR, ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR,
                     ACLNN_SUCCESS, AclnnError, AclnnTypeError, exc_text, int_value, is_int, never_raises, safe_repr,
                     set_error)
from .tensor import aclTensor


class Operator:
    """What one operator declares; the two-phase core and the NumPy layer (``_numpy_layer``) do the rest.

    Subclass it, set the class attributes and implement the methods marked "implement"; make one instance.
    """

    name = ""             # CANN operator name, "ConvTbcBackward" (executor repr)
    phase1 = ""           # "aclnnConvTbcBackwardGetWorkspaceSize" (message prefix, phase-2 messages)
    phase2 = ""           # "aclnnConvTbcBackward"
    numpy_name = ""       # the NumPy-layer function, "conv_tbc_backward" (message prefix)
    tensors: Tuple[str, ...] = ()   # CANN names of the tensor arguments, in phase 1's order
    inputs: Tuple[str, ...] = ()    # those it reads (in ``tensors`` order)
    outputs: Tuple[str, ...] = ()   # those it writes
    numpy_labels: dict = {}         # CANN name -> the NumPy layer's word for it in messages

    def label(self, name, numpy):
        """How a message names argument ``name`` (the NumPy layer may use its own words)."""
        return self.numpy_labels.get(name, name) if numpy else name

    def numpy_error(self, status, msg, wrong_type=False):
        raise (AclnnTypeError if wrong_type else AclnnError)(status, f"{self.numpy_name}: {msg}")

    # ---- implement ----
    def check(self, t, scalars, profile, is_descriptor, expected, numpy=False):
        """The operator's rules in its order, the shared ones (``_validation``) at their places: raise
        ``Invalid`` at the first failure, else return a ``_handoff.Problem``.  t: name -> descriptor (or
        None, or anything); scalars: the non-tensor arguments by name; numpy: word messages for the NumPy
        layer (``label``)."""
        raise NotImplementedError

    def kernel_dtypes(self, t):
        """The aclDataType codes the kernel takes, in its order, from validated descriptors."""
        raise NotImplementedError

    def kernel_workspace(self, problem, mode, dtypes, num_threads):
        """Bytes of workspace for the problem (0 for none): the kernel's, and any staging the operator's ``run``
        keeps there (beyond the kernel's part, which ``_plan.aligned_workspace`` locates)."""
        raise NotImplementedError

    def flops(self, shape):
        """Work of one call (decides whether a small call runs inline on an idle stream)."""
        raise NotImplementedError

    def planned_views(self, plan):
        """name -> (dims, aclDataType code or None for any, whether it must be C-contiguous): what each captured
        view must be for the kernels ``run`` calls with ``plan``.  Phase 2 checks the executor's views against it
        before it hands them to the kernels."""
        raise NotImplementedError

    def run(self, plan, operands, ws_address, ws_size, cancel):
        """CANN layer: call the kernel.  operands: name -> ``aclTensor.kernel_operand()`` (address, byte
        strides..., dtype); the workspace is already aligned; cancel: the stream's flag."""
        raise NotImplementedError

    def numpy_outputs(self, plan, arrays):
        """NumPy layer: [(shape, NumPy dtype)] of the outputs to allocate, in the order returned."""
        raise NotImplementedError

    def run_arrays(self, plan, arrays, outputs, ws):
        """NumPy layer: call the kernel on the input arrays and the new C-contiguous outputs; ws: a uint8
        array of at least plan.workspace_size bytes, or None when that is 0."""
        raise NotImplementedError

    # ---- may override ----
    def deterministic(self, profile, requested):
        """The determinism the plan records (an operator that is always deterministic returns True)."""
        return requested

    def default_k0(self, problem):
        """The cube's block size k0 when the block_size option is None (None: the compute precision's)."""
        return None


def threads(requested: Optional[int] = None) -> int:
    """The kernels' thread count for one call: the argument, $PYCONVTBC_NUM_THREADS, then OpenMP's count
    (which $OMP_NUM_THREADS and threadpoolctl drive); a bad value is a ValueError naming it."""
    return effective_threads(requested)


def _internal(fn, e):
    """Last resort: an unexpected exception is a bug; report it as a status, never raise (CANN layer)."""
    return set_error(ACLNN_ERR_INNER, f"{fn}: internal error ({exc_text(e)}); this is a pyconvtbc bug, "
                     "please report it")


# ---- executor ------------------------------------------------------------------------------------
_executors = weakref.WeakSet()  # every executor phase 1 made: a hand-built one is refused


class aclOpExecutor:
    """What phase 1 captured: the plan and the fields of the descriptors it validated (not the data).

    Only phase 1 makes executors that phase 2 accepts.  The plan and the captured fields are immutable: the
    fields are a tuple of (name, field tuple) pairs of ints, tuples and read-only device pointers, and
    ``tensors`` hands out fresh copies.  Phase 2 still checks every view against the plan (``planned_views``)
    before the kernels get it.
    """
    __slots__ = ("_plan", "_fields", "repeatable", "state", "_lock", "__weakref__")

    def __init__(self, plan: Any, tensors: dict) -> None:
        object.__setattr__(self, "_plan", plan)
        object.__setattr__(self, "_fields", tuple((n, t.fields()) for n, t in tensors.items()))
        self.repeatable = False
        self.state = "ready"        # "ready" -> "used" (single use ran) | "released" (its phase 2 failed) | "destroyed"
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
        return {n: aclTensor(*f) for n, f in self._fields}

    @property
    def genuine(self) -> bool:
        """True for an executor made by phase 1."""
        return self in _executors

    @property
    def workspace_size(self) -> int:
        return self._plan.workspace_size

    def __repr__(self):
        return f"<aclOpExecutor {self._plan.op.name} {self.state}{' repeatable' if self.repeatable else ''}>"


def _is_live_tensor(obj):
    return isinstance(obj, aclTensor) and not obj.destroyed and obj.problem() is None


def _expected_tensor(obj):
    if isinstance(obj, aclTensor) and not obj.destroyed:
        return f"a valid tensor descriptor (its fields are not: {obj.problem()})"
    return "a live tensor descriptor"


def _snapshot(obj):
    """What phase 1 validates and captures for one tensor argument: a snapshot of a descriptor (each field read
    once, ``aclTensor.snapshot``), so that a thread changing the descriptor meanwhile cannot make the executor
    capture fields other than those checked; any other object as it is (rule 1 names it)."""
    if isinstance(obj, aclTensor):
        try:
            return aclTensor.snapshot(obj)
        except Exception:   # a slot never set (an object made with __new__): not a descriptor
            return _Unreadable()
    return obj


class _Unreadable:
    """Stands for a descriptor whose fields cannot be read: rule 1 refuses it as not a descriptor."""
    __slots__ = ()

    def __repr__(self):
        return "<aclTensor with unreadable fields>"


def plan_mismatch(op: Operator, plan: Any, tensors: dict) -> Optional[str]:
    """Why a captured view does not fit the plan (dims, data type, contiguity the kernels assume), or None."""
    for n, (dims, dtype, contiguous) in op.planned_views(plan).items():
        t = tensors[n]
        if tuple(t.view_dims) != tuple(dims):
            return f"{n} has dims {list(t.view_dims)}; expected {list(dims)}, the dims phase 1 planned"
        if dtype is not None and t.data_type != dtype:
            return (f"{n} has data type {dtype_name(t.data_type)}; expected {dtype_name(dtype)}, the data type "
                    "phase 1 planned")
        if contiguous and not t.is_contiguous():
            return f"{n} has strides {list(t.strides)} for dims {list(t.view_dims)}; expected a contiguous output"
    return None


def _context_deterministic(profile):
    opt = runtime.ctx_option(ACL_OPT_DETERMINISTIC)
    return profile.deterministic_default if opt is None else bool(opt)


# ---- phase 1 -------------------------------------------------------------------------------------
def get_workspace_size(op: Operator, tensors: dict, scalars: dict) -> Tuple[int, int, Optional[aclOpExecutor]]:
    """Phase 1 of ``op``: validate, plan, size the workspace.  Returns (status, workspace_size, executor).
    tensors: CANN name -> the argument, in ``op.tensors`` order."""
    try:
        tensors = {n: _snapshot(t) for n, t in tensors.items()}    # validate and capture the same fields
        profile = get_profile()
        problem = op.check(tensors, scalars, profile, _is_live_tensor, _expected_tensor)
        options = resolve_options(profile)
        plan = make_plan(op, problem, op.kernel_dtypes(tensors), options, threads(None),
                         op.deterministic(profile, _context_deterministic(profile)), profile)
        executor = aclOpExecutor(plan, tensors)
        _executors.add(executor)
    except Invalid as e:
        return set_error(e.status, f"{op.phase1}: {e.message}"), 0, None
    except ValueError as e:  # a bad process setting (environment variable, option), or a shape too large
        return set_error(ACLNN_ERR_PARAM_INVALID, f"{op.phase1}: {e}"), 0, None
    except Exception as e:  # never raise out of the CANN layer
        return _internal(op.phase1, e), 0, None
    return ACLNN_SUCCESS, plan.workspace_size, executor


@never_raises(ACLNN_ERR_INNER)
def aclSetAclOpExecutorRepeatable(executor: Optional["aclOpExecutor"]) -> int:
    if executor is None:
        return set_error(ACLNN_ERR_INNER_NULLPTR, "aclSetAclOpExecutorRepeatable: executor is None; "
                         "expected an executor from phase 1")
    if not isinstance(executor, aclOpExecutor) or not executor.genuine or executor.state != "ready":
        return set_error(ACLNN_ERR_PARAM_INVALID, f"aclSetAclOpExecutorRepeatable: executor is {safe_repr(executor)}; "
                         "expected an executor from phase 1 that has not been used or destroyed")
    executor.repeatable = True
    return ACLNN_SUCCESS


@never_raises(ACLNN_ERR_INNER)
def aclDestroyAclOpExecutor(executor: Optional["aclOpExecutor"]) -> int:
    if executor is None:
        return set_error(ACLNN_ERR_INNER_NULLPTR, "aclDestroyAclOpExecutor: executor is None; expected a live executor")
    if not isinstance(executor, aclOpExecutor) or not executor.genuine or executor.state == "destroyed":
        return set_error(ACLNN_ERR_PARAM_INVALID, f"aclDestroyAclOpExecutor: executor is {safe_repr(executor)}; "
                         "expected a live executor")
    with executor._lock:
        executor.state = "destroyed"
    return ACLNN_SUCCESS


# ---- phase 2 -------------------------------------------------------------------------------------
def execute(op: Operator, workspace: Optional[DevicePtr], workspace_size: int, executor: Optional[aclOpExecutor],
            stream: Optional[runtime.aclrtStream]) -> int:
    """Phase 2 of ``op``: check the workspace and executor, enqueue the work on ``stream``, return at once."""
    try:
        return _phase2(op, workspace, workspace_size, executor, stream)
    except Exception as e:  # never raise out of the CANN layer
        if isinstance(executor, aclOpExecutor) and not executor.repeatable and executor.state != "destroyed":
            executor.state = "released"
        return _internal(op.phase2, e)


def _phase2(op, workspace, workspace_size, executor, stream):
    def fail(status, msg, release=True):
        # (a failure after the state check below: this call had taken the executor, "ready" -> "used")
        if release and isinstance(executor, aclOpExecutor) and not executor.repeatable:
            executor.state = "released"
        return set_error(status, f"{op.phase2}: {msg}")

    if executor is None:
        return fail(ACLNN_ERR_PARAM_NULLPTR, "executor is a null pointer (None); expected one from phase 1")
    if not isinstance(executor, aclOpExecutor):
        return fail(ACLNN_ERR_PARAM_INVALID, f"executor is a {type(executor).__name__}; expected an aclOpExecutor")
    if not executor.genuine or executor.plan.op is not op:
        return fail(ACLNN_ERR_PARAM_INVALID, f"executor was not made by {op.phase1}; "
                    "expected an executor from phase 1", release=False)
    with executor._lock:
        if executor.state == "destroyed":
            return fail(ACLNN_ERR_PARAM_INVALID, "executor was already destroyed (aclDestroyAclOpExecutor); "
                        f"expected a live executor: call {op.phase1} again", release=False)
        if executor.state == "released":
            return fail(ACLNN_ERR_PARAM_INVALID, "executor was released when an earlier phase-2 call with it failed "
                        "(that call's status and message say why); a single-use executor is not reused after a "
                        f"failure: expected a fresh one from {op.phase1}", release=False)
        if executor.state != "ready":
            return fail(ACLNN_ERR_PARAM_INVALID, f"executor was already {executor.state}; a single-use executor "
                        "runs once (call aclSetAclOpExecutorRepeatable after phase 1 to reuse it)", release=False)
        if not executor.repeatable:
            executor.state = "used"
    plan = executor.plan
    required = plan.workspace_size
    n = int_value(workspace_size)
    if n is None or n < 0:
        return fail(ACLNN_ERR_PARAM_INVALID, f"workspace_size is {safe_repr(workspace_size)}; expected a byte count >= 0")
    workspace_size = n
    if workspace_size > 0 and workspace is None:
        return fail(ACLNN_ERR_PARAM_NULLPTR, f"workspace is None but workspace_size is {workspace_size}; "
                    "expected a device buffer")
    if workspace_size < required:
        return fail(ACLNN_ERR_PARAM_INVALID, f"workspace_size is {workspace_size}; expected at least {required} "
                    "(from phase 1)")
    # (checked whenever a size is claimed, even where phase 1 asked for none: a claim must be true)
    if workspace_size > 0 and (not is_device_ptr(workspace) or workspace.freed or workspace.nbytes < workspace_size):
        return fail(ACLNN_ERR_PARAM_INVALID, f"workspace is {safe_repr(workspace)}; expected a live device buffer "
                    f"from aclrtMalloc of at least workspace_size = {workspace_size} bytes")
    s = runtime.resolve_stream(stream)
    if s is None:
        return fail(ACLNN_ERR_PARAM_INVALID, f"stream is {safe_repr(stream)}; expected a live stream or None (default)")
    tensors = executor.tensors
    names = tuple(tensors)
    problem = memory_problem(tensors, names) or plan_mismatch(op, plan, tensors)
    if problem:
        return fail(ACLNN_ERR_PARAM_INVALID, problem)
    if required:
        ws_span = (workspace.allocation_id, workspace.offset, workspace.offset + required)
        for n in names:
            span = tensors[n].byte_span()
            if span_overlap(ws_span, span):
                return fail(ACLNN_ERR_PARAM_INVALID, f"workspace (bytes {ws_span[1]}..{ws_span[2]}) overlaps {n} "
                            f"(bytes {span[1]}..{span[2]}) in the same device buffer; expected a workspace that "
                            "overlaps no tensor")
    # Resolve addresses now; the task holds the arrays, so freed memory is never touched.  A buffer freed by
    # another thread since the check above makes array() raise: report it like the check would have.
    try:
        keep = [t.data.array() for t in tensors.values() if t.data is not None and t.numel]
        ws_arr = workspace.array() if required else None
        operands = {n: tensors[n].kernel_operand() for n in names}
    except ValueError as e:
        return fail(ACLNN_ERR_PARAM_INVALID, f"a device buffer was freed while the call was being made: {e}")

    def task():
        problem = memory_problem(tensors, names)  # freed between enqueue and execution?
        if problem:
            return ACLNN_ERR_PARAM_INVALID, f"{op.phase2}: {problem}"
        if ws_arr is not None and workspace.freed:
            return ACLNN_ERR_PARAM_INVALID, (f"{op.phase2}: the workspace {workspace!r} was freed; expected live "
                                             "memory from aclrtMalloc until the work has run")
        op.run(plan, operands, 0 if ws_arr is None else ws_arr.ctypes.data,
               0 if ws_arr is None else int(workspace_size), s.cancel_flag)
        del keep[:]
        return None

    try:
        s.enqueue(task, inline_if_idle=plan.flops < INLINE_FLOPS)
    except RuntimeError as e:
        return fail(ACLNN_ERR_PARAM_INVALID, f"stream {safe_repr(stream)}: {e}")
    return ACLNN_SUCCESS
