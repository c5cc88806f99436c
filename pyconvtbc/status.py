"""Status codes, the per-thread "most recent error message", and AclnnError.

CANN functions return a status and record a message; ``aclGetRecentErrMsg()`` returns the message of
the most recent failure *in the calling thread* (it stays until the next failure in that thread).
"""
import functools
import inspect
import numbers
import operator
import threading
from enum import IntEnum
from typing import Any, Callable, Optional, TypeVar, cast

_F = TypeVar("_F", bound=Callable[..., Any])


class aclnnStatus(IntEnum):
    ACLNN_SUCCESS = 0
    ACLNN_ERR_PARAM_NULLPTR = 161001
    ACLNN_ERR_PARAM_INVALID = 161002
    ACLNN_ERR_RUNTIME_ERROR = 361001
    ACLNN_ERR_INNER = 561000
    ACLNN_ERR_INNER_CREATE_EXECUTOR = 561101
    ACLNN_ERR_INNER_NULLPTR = 561103


class aclError(IntEnum):
    """Runtime (aclrt*) return codes."""
    ACL_SUCCESS = 0
    ACL_ERROR_INVALID_PARAM = 100000
    ACL_ERROR_BAD_ALLOC = 200000
    ACL_ERROR_RT_INTERNAL_ERROR = 507000  # a task enqueued on a stream failed (the message says why)
    ACL_ERROR_INTERNAL_ERROR = 500000


# Every member also as a module constant, as C spells them (written out so that type checkers and IDEs see them;
# tests/test_typing.py checks that the list is complete).
ACLNN_SUCCESS = aclnnStatus.ACLNN_SUCCESS
ACLNN_ERR_PARAM_NULLPTR = aclnnStatus.ACLNN_ERR_PARAM_NULLPTR
ACLNN_ERR_PARAM_INVALID = aclnnStatus.ACLNN_ERR_PARAM_INVALID
ACLNN_ERR_RUNTIME_ERROR = aclnnStatus.ACLNN_ERR_RUNTIME_ERROR
ACLNN_ERR_INNER = aclnnStatus.ACLNN_ERR_INNER
ACLNN_ERR_INNER_CREATE_EXECUTOR = aclnnStatus.ACLNN_ERR_INNER_CREATE_EXECUTOR
ACLNN_ERR_INNER_NULLPTR = aclnnStatus.ACLNN_ERR_INNER_NULLPTR
ACL_SUCCESS = aclError.ACL_SUCCESS
ACL_ERROR_INVALID_PARAM = aclError.ACL_ERROR_INVALID_PARAM
ACL_ERROR_BAD_ALLOC = aclError.ACL_ERROR_BAD_ALLOC
ACL_ERROR_RT_INTERNAL_ERROR = aclError.ACL_ERROR_RT_INTERNAL_ERROR
ACL_ERROR_INTERNAL_ERROR = aclError.ACL_ERROR_INTERNAL_ERROR

_local = threading.local()


def int_value(v: object) -> Optional[int]:
    """An integer argument (Python or NumPy, never a bool) as a plain int, else None; never raises.

    The one integer reading of every layer.  An int subclass is read with int's own method (its overrides of
    __int__, __index__ or the comparisons never run); another numbers.Integral through operator.index, and one
    whose __index__ raises or returns a non-int is not an integer."""
    if isinstance(v, bool):
        return None
    try:
        if isinstance(v, int):
            return int.__int__(v)
        if isinstance(v, numbers.Integral):
            r = operator.index(v)
            return int.__int__(r) if isinstance(r, int) and not isinstance(r, bool) else None
    except Exception:
        return None
    return None


def is_int(v: object) -> bool:
    """True for an integer argument (Python or NumPy), never for a bool (see int_value, which gives its value)."""
    return int_value(v) is not None


def safe_repr(value: object, limit: int = 120) -> str:
    """``repr(value)`` for a message, never raising (an object whose ``__repr__`` raises, or a huge one)."""
    try:
        text = repr(value)
        if not isinstance(text, str):
            raise TypeError
    except Exception:
        try:
            text = f"<{type(value).__name__} object>"
        except Exception:  # pragma: no cover - type() and __name__ of any object are plain
            text = "<object>"
    if len(text) > limit:
        text = text[:limit - 5] + " ...>" if text.startswith("<") else text[:limit - 4] + " ..."
    return text


def set_error(status: int, message: object) -> int:
    """Record ``message`` as the calling thread's most recent error and return ``status``."""
    _local.message = str(message)
    return int(status)


def exc_text(e: BaseException) -> str:
    """``'TypeError: text'`` for an exception, never raising (its text may come from a hostile object)."""
    try:
        return f"{type(e).__name__}: {e}"
    except Exception:
        return type(e).__name__


def never_raises(status: int, failure: Callable[[int], Any] = lambda rc: rc) -> Callable[[_F], _F]:
    """Decorator for a CANN-layer function: any exception escaping it becomes ``status`` (with a message saying
    it is a pyconvtbc bug) and the call returns ``failure(status)``.  Calls with arguments that do not fit the
    signature still raise TypeError, as for any Python function.  (KeyboardInterrupt is not caught.)"""
    def deco(fn: _F) -> _F:
        sig = inspect.signature(fn)

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                try:
                    sig.bind(*args, **kwargs)
                except TypeError:
                    raise e from None  # a wrong call, not a bad value
                rc = set_error(status, f"{fn.__name__}: internal error ({exc_text(e)}); this is a pyconvtbc "
                               "bug, please report it")
                return failure(rc)
        return cast(_F, wrapper)      # the same signature (type checkers see fn's own)
    return deco


def aclGetRecentErrMsg() -> Optional[str]:
    """The message of the most recent failure in this thread, or None if there was none."""
    return getattr(_local, "message", None)


class AclnnError(ValueError):
    """Raised by the NumPy layer: carries the CANN status code and the message, which also becomes the calling
    thread's most recent error (``aclGetRecentErrMsg()``), as a CANN-layer failure's does.  The rules, their order
    and the codes are the CANN layer's; the message names the NumPy function and its arguments."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"[{int(status)}] {message}")
        self.status = int(status)
        self.message = message
        set_error(status, message)


class AclnnTypeError(AclnnError, TypeError):
    """The AclnnError of an argument of the wrong Python type: a float or a str for ``pad``, a list or a tensor
    where a NumPy array is required, a non-integer ``num_threads``.  It is also a TypeError (as Python and NumPy
    raise for such a mistake), and still an AclnnError with its ``.status`` (and so a ValueError), so that
    ``except AclnnError`` and ``except ValueError`` code keeps working.  A wrong value of the right type (``pad=300``,
    ``soc="ascend999"``) and an array whose dtype, shape or layout is refused raise the plain AclnnError."""


# The public names (the package re-exports them); set_error stays internal.
# (a list literal: the form type checkers read; tests/test_typing.py checks it is complete)
__all__ = [
    "aclnnStatus", "aclError", "AclnnError", "AclnnTypeError", "aclGetRecentErrMsg", "ACLNN_SUCCESS",
    "ACLNN_ERR_PARAM_NULLPTR", "ACLNN_ERR_PARAM_INVALID", "ACLNN_ERR_RUNTIME_ERROR", "ACLNN_ERR_INNER", "ACLNN_ERR_INNER_CREATE_EXECUTOR",
    "ACLNN_ERR_INNER_NULLPTR", "ACL_SUCCESS", "ACL_ERROR_INVALID_PARAM", "ACL_ERROR_BAD_ALLOC",
    "ACL_ERROR_RT_INTERNAL_ERROR", "ACL_ERROR_INTERNAL_ERROR"
]
