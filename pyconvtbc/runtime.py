"""The emulated runtime: init, devices, contexts, device memory, memcpy and streams.

Streams are real: each stream owns one worker thread (started on first use) that runs its tasks in
order; ``aclnnConvTbcBackward`` enqueues and returns, and the kernels run with the GIL released.
``aclrtSynchronizeStream`` waits for the queue to drain and reports the first failure that happened
on the stream since the last synchronisation.  ``None`` names the default stream.

A *context* here is the per-device state CANN keeps in its default context: the sys-param options
(ACL_OPT_DETERMINISTIC).  ``aclrtSetDevice`` selects the calling thread's current device (0 until
set); ``aclrtCtxSetSysParamOpt`` writes the current device's context, shared by all threads using it.
"""
import collections
import os
import threading
from typing import Callable, Optional, Tuple, Union

import numpy as np

from . import memory
from .enums import aclrtMemcpyKind, aclSysParamOpt
from .memory import DevicePtr, is_device_ptr
from .status import (ACL_ERROR_BAD_ALLOC, ACL_ERROR_INTERNAL_ERROR, ACL_ERROR_INVALID_PARAM,
                     ACL_ERROR_RT_INTERNAL_ERROR, ACL_SUCCESS, int_value, never_raises, safe_repr, set_error)

NUM_DEVICES = 8
MAX_ALLOC = 2**40  # 1 TiB: larger requests are ACL_ERROR_BAD_ALLOC without trying

_lock = threading.RLock()
_state = {"initialized": False, "contexts": {}, "streams": set(), "default_stream": None}
_tls = threading.local()


_guard = never_raises(ACL_ERROR_INTERNAL_ERROR)                          # functions returning a status
_guard2 = never_raises(ACL_ERROR_INTERNAL_ERROR, lambda rc: (rc, None))  # functions returning (status, value)


def _bad(msg):
    return set_error(ACL_ERROR_INVALID_PARAM, msg)


# ---- init / devices / contexts --------------------------------------------------------------------
@_guard
def aclInit(config_path: Union[str, os.PathLike, None] = None) -> int:
    """Record initialisation.  ``config_path`` may be None or a path to an existing file."""
    try:  # (an os.PathLike's __fspath__ may raise: then it names no file)
        is_file = isinstance(config_path, (str, os.PathLike)) and os.path.isfile(config_path)
    except Exception:
        is_file = False
    if config_path is not None and not is_file:
        return _bad(f"aclInit: config_path is {safe_repr(config_path)}; expected None or an existing file")
    with _lock:
        _state["initialized"] = True
    return ACL_SUCCESS


@_guard
def aclFinalize() -> int:
    """Synchronise and destroy every stream, free all device memory.  Safe to call repeatedly."""
    # Every stream is first marked destroyed (new work refused), then drained, and forgotten only once drained:
    # an interrupt (Ctrl-C) in a wait leaves the rest still known, and a later aclFinalize finishes the job.
    # (The default stream joins the known streams until it is drained; a call after this one gets a new one.)
    with _lock:
        if _state["default_stream"] is not None:
            _state["streams"].add(_state["default_stream"])
            _state["default_stream"] = None
        streams = list(_state["streams"])
        _state["initialized"] = False
        _state["contexts"].clear()
    for s in streams:
        s._claim_destroy()
    for s in streams:
        s._destroy()
        with _lock:
            _state["streams"].discard(s)
    memory.free_all()
    return ACL_SUCCESS


def _check_device(device_id, fn):
    n = int_value(device_id)
    if n is None or not 0 <= n < NUM_DEVICES:
        return _bad(f"{fn}: device_id is {safe_repr(device_id)}; expected an integer in [0, {NUM_DEVICES})")
    return ACL_SUCCESS


@_guard
def aclrtSetDevice(device_id: int) -> int:
    rc = _check_device(device_id, "aclrtSetDevice")
    if rc == ACL_SUCCESS:
        _tls.device = int_value(device_id)
    return rc


@_guard
def aclrtResetDevice(device_id: int) -> int:
    return _check_device(device_id, "aclrtResetDevice")


def current_device() -> int:
    return getattr(_tls, "device", 0)


@_guard
def aclrtCtxSetSysParamOpt(opt: int, value: int) -> int:
    """Set a sys-param option on the current device's context (ACL_OPT_DETERMINISTIC: 0 or 1)."""
    o, v = int_value(opt), int_value(value)
    if o is None or o not in set(aclSysParamOpt):
        return _bad(f"aclrtCtxSetSysParamOpt: opt is {safe_repr(opt)}; expected ACL_OPT_DETERMINISTIC (0)")
    if v is None or v not in (0, 1):
        return _bad(f"aclrtCtxSetSysParamOpt: value is {safe_repr(value)}; expected 0 or 1")
    with _lock:
        _state["contexts"].setdefault(current_device(), {})[o] = v
    return ACL_SUCCESS


def ctx_option(opt: int) -> Optional[int]:
    """The value set on the current context, or None when never set."""
    with _lock:
        return _state["contexts"].get(current_device(), {}).get(int(opt))


@_guard2
def aclrtCtxGetSysParamOpt(opt: int) -> Tuple[int, Optional[int]]:
    """(status, value).  An option never set reads as the emulated profile's default."""
    o = int_value(opt)
    if o is None or o not in set(aclSysParamOpt):
        return _bad(f"aclrtCtxGetSysParamOpt: opt is {safe_repr(opt)}; expected ACL_OPT_DETERMINISTIC (0)"), None
    value = ctx_option(o)
    if value is None:
        from .profiles import get_profile
        try:
            value = int(get_profile().deterministic_default)
        except ValueError as e:  # a bad $PYCONVTBC_SOC_VERSION
            return _bad(f"aclrtCtxGetSysParamOpt: the emulated chip's default is unknown: {e}"), None
    return ACL_SUCCESS, value


# ---- memory ------------------------------------------------------------------------------------
@_guard2
def aclrtMalloc(size: int, policy: int = 0) -> Tuple[int, Optional[DevicePtr]]:
    """(status, device_ptr).  size must be a positive integer; memory starts zeroed."""
    n, pol = int_value(size), int_value(policy)
    if n is None or n <= 0:
        return _bad(f"aclrtMalloc: size is {safe_repr(size)}; expected a positive number of bytes"), None
    if pol is None or pol not in (0, 1, 2):
        return _bad(f"aclrtMalloc: policy is {safe_repr(policy)}; expected an aclrtMemMallocPolicy (0, 1 or 2)"), None
    size = n
    if size > MAX_ALLOC:
        return set_error(ACL_ERROR_BAD_ALLOC, f"aclrtMalloc: cannot allocate {size} bytes"), None
    try:
        return ACL_SUCCESS, memory.malloc(int(size))
    except (MemoryError, ValueError) as e:
        why = f" ({e})" if str(e) else ""
        return set_error(ACL_ERROR_BAD_ALLOC, f"aclrtMalloc: cannot allocate {size} bytes{why}"), None


@_guard
def aclrtFree(device_ptr: Optional[DevicePtr]) -> int:
    if not is_device_ptr(device_ptr):
        return _bad(f"aclrtFree: device_ptr is {safe_repr(device_ptr)}; expected a pointer from aclrtMalloc")
    if device_ptr.offset != 0:
        return _bad(f"aclrtFree: {safe_repr(device_ptr)} is not the start of an allocation")
    if device_ptr.freed:
        return _bad(f"aclrtFree: {safe_repr(device_ptr)} was already freed; "
                    "expected a live pointer from aclrtMalloc")
    memory.free(device_ptr)
    return ACL_SUCCESS


_KIND_SIDES = {  # kind -> (dst is device, src is device)
    aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_HOST: (False, False),
    aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE: (True, False),
    aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST: (False, True),
    aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE: (True, True),
}


def _side(obj, is_device, writable, what):
    if is_device:
        if not is_device_ptr(obj):
            what_is = "a DevicePtr not made by aclrtMalloc" if isinstance(obj, DevicePtr) else f"a {type(obj).__name__}"
            raise ValueError(f"{what} is {what_is}; the memcpy kind expects a device pointer from aclrtMalloc")
        return obj.array()
    return memory.host_bytes(obj, writable)


@_guard
def aclrtMemcpy(dst: object, dst_max: int, src: object, count: int, kind: int) -> int:
    """Copy ``count`` bytes.  Every size is checked against both real buffers: never an overrun."""
    k, n, m = int_value(kind), int_value(count), int_value(dst_max)
    if k is None or k not in _KIND_SIDES:
        return _bad(f"aclrtMemcpy: kind is {safe_repr(kind)}; expected one of {[k.name for k in aclrtMemcpyKind]}")
    if n is None or n < 0:
        return _bad(f"aclrtMemcpy: count is {safe_repr(count)}; expected a non-negative number of bytes")
    if m is None or m < 0:
        return _bad(f"aclrtMemcpy: dst_max is {safe_repr(dst_max)}; expected a non-negative number of bytes")
    count, dst_max = n, m
    if count > dst_max:
        return _bad(f"aclrtMemcpy: count {count} exceeds dst_max {dst_max}; expected at most dst_max bytes")
    dst_dev, src_dev = _KIND_SIDES[aclrtMemcpyKind(k)]
    try:
        d = _side(dst, dst_dev, True, "dst")
        s = _side(src, src_dev, False, "src")
    except ValueError as e:
        return _bad(f"aclrtMemcpy ({aclrtMemcpyKind(int(kind)).name}): {e}")
    if count > d.size:
        return _bad(f"aclrtMemcpy: count {count} exceeds the {d.size} bytes of the destination; "
                    f"expected at most {d.size}")
    if count > s.size:
        return _bad(f"aclrtMemcpy: count {count} exceeds the {s.size} bytes of the source; "
                    f"expected at most {s.size}")
    if count:
        d[:count] = s[:count]  # flat uint8 views: exactly count bytes (NumPy handles overlap: memmove semantics)
    return ACL_SUCCESS


# ---- streams -----------------------------------------------------------------------------------
class aclrtStream:
    """An in-order task queue served by one worker thread."""

    def __init__(self, name: str = "stream") -> None:
        self.name = name
        self._cv = threading.Condition()
        self._queue = collections.deque()
        self._busy = False
        self._inline = None     # the thread whose call is running a task inline (it may be interrupted)
        self._error = None
        self._destroyed = False
        self._thread = None
        # the running task's kernels poll this flag: nonzero stops them (aclrtSynchronizeStream interrupted)
        self.cancel_flag = np.zeros(1, np.int32)

    @property
    def destroyed(self) -> bool:
        return self._destroyed

    def idle(self) -> bool:
        with self._cv:
            return not self._queue and not self._busy

    def enqueue(self, task: Callable[[], Optional[tuple]], inline_if_idle: bool = False) -> None:
        """Queue ``task`` (a callable returning (status, message) or None).  With ``inline_if_idle`` a task
        on an idle stream runs at once in the caller's thread (same order, no thread hand-off)."""
        with self._cv:
            if self._destroyed:
                raise RuntimeError("stream was destroyed")
            run_now = inline_if_idle and not self._queue and not self._busy
            if run_now:
                self._inline = threading.get_ident()   # (first: a signal handler may run between the two)
                self._busy = True
            else:
                self._queue.append(task)
                if self._thread is None:
                    self._thread = threading.Thread(target=self._worker, name=f"pyconvtbc-{self.name}", daemon=True)
                    self._thread.start()
                self._cv.notify_all()
        if run_now:
            self._run(task)

    def _run(self, task):
        interrupted = None
        inline = self._inline == threading.get_ident()
        try:
            result = task()
            err = result if isinstance(result, tuple) and result and result[0] else None
        except KeyboardInterrupt as e:  # only a task run inline, in the main thread: record it, then re-raise
            err, interrupted = (ACL_ERROR_RT_INTERNAL_ERROR, "interrupted (KeyboardInterrupt); outputs partly "
                                "written"), e
        except BaseException as e:  # a task must never kill the worker
            err = (ACL_ERROR_RT_INTERNAL_ERROR, f"{type(e).__name__}: {e}")
            if inline and not isinstance(e, Exception):   # SystemExit from a signal handler: the caller's
                interrupted = e                            # thread exits as it asked, after the bookkeeping
        with self._cv:
            if err is not None and self._error is None:
                self._error = err
            self._busy = False
            self._inline = None
            self.cancel_flag[0] = 0     # a cancellation stops the task it was made for, never a later one
            self._cv.notify_all()
        if interrupted is not None:
            raise interrupted

    def _cancel(self):
        """Drop the queued tasks and stop the running one at its next kernel boundary (after an interrupt in
        synchronize); record the cancellation as the stream's failure, reported by the next synchronize.

        The flag is cleared when the cancelled task ends (``_run``), and here in ``finally`` when no task runs:
        a second interrupt while this waits leaves the stream cancelling only the task it was meant for."""
        with self._cv:
            try:
                dropped = len(self._queue)
                self._queue.clear()
                if self._busy:
                    self.cancel_flag[0] = 1
                if self._error is None and (dropped or self._busy):
                    self._error = (ACL_ERROR_RT_INTERNAL_ERROR, f"cancelled by an interrupt ({dropped} queued "
                                   "task(s) dropped, the running one stopped); their outputs are partly written")
                while self._busy:
                    self._cv.wait()
            finally:
                if not self._busy:
                    self.cancel_flag[0] = 0

    def _worker(self):
        while True:
            with self._cv:
                # one task at a time: also wait while a task runs inline in a caller's thread
                while self._busy or (not self._queue and not self._destroyed):
                    self._cv.wait()
                if not self._queue:
                    return
                task = self._queue.popleft()
                self._busy = True
            self._run(task)

    def in_own_task(self) -> bool:
        """True when the calling thread is inside this stream's running task: a Python signal handler (or other
        callback) runs on top of a task that its own call runs inline.  Waiting for the stream there would wait
        for a frame below the waiter: it never returns."""
        return self._busy and self._inline == threading.get_ident()

    def synchronize(self) -> Optional[tuple]:
        """Wait until every queued task has run; return and clear the first recorded failure.  An interrupt
        (KeyboardInterrupt) while waiting cancels the stream's work (``_cancel``) and is re-raised.  (The
        caller checks ``in_own_task`` first: waiting there would never return.)"""
        try:
            with self._cv:
                while self._queue or self._busy:
                    self._cv.wait()
                err, self._error = self._error, None
        except KeyboardInterrupt:
            self._cancel()
            raise
        return err

    def _claim_destroy(self) -> bool:
        """Mark the stream destroyed (new work is refused from now on); False when it already was: of two
        threads destroying one stream, exactly one gets True."""
        with self._cv:
            if self._destroyed:
                return False
            self._destroyed = True
            self._cv.notify_all()
            return True

    def _destroy(self):
        """Refuse new work, let the queued work run, stop the worker; return the first recorded failure.
        Called from inside the stream's own running task (``in_own_task``: a signal handler), it refuses new
        work and returns at once: the running task ends when the handler returns, the worker then runs what
        is queued and stops (a failure there is not reported)."""
        with self._cv:
            self._destroyed = True          # from now on enqueue raises: no task can slip in after the drain
            self._cv.notify_all()
            if self.in_own_task():
                return None
            while self._queue or self._busy:
                self._cv.wait()
            err, self._error = self._error, None
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()
        return err

    def __repr__(self):
        return f"<aclrtStream {self.name}{' destroyed' if self._destroyed else ''}>"


_stream_ids = iter(range(1, 2**62))


def default_stream() -> "aclrtStream":
    with _lock:
        if _state["default_stream"] is None:
            _state["default_stream"] = aclrtStream("default")
        return _state["default_stream"]


def resolve_stream(stream: object) -> Optional["aclrtStream"]:
    """The stream object for ``stream`` (None = default), or None if it is not a live stream."""
    if stream is None:
        return default_stream()
    if isinstance(stream, aclrtStream) and not stream.destroyed:
        return stream
    return None


@_guard2
def aclrtCreateStream() -> Tuple[int, Optional["aclrtStream"]]:
    s = aclrtStream(f"stream{next(_stream_ids)}")
    with _lock:
        _state["streams"].add(s)
    return ACL_SUCCESS, s


@_guard
def aclrtDestroyStream(stream: Optional["aclrtStream"]) -> int:
    """Waits for the stream's pending work, then destroys it (a failure on it is reported here)."""
    if not isinstance(stream, aclrtStream) or not stream._claim_destroy():   # (atomic: one destroy wins)
        return _bad(f"aclrtDestroyStream: stream is {safe_repr(stream)}; expected a live stream from aclrtCreateStream")
    err = stream._destroy()         # (an interrupt here leaves it known: aclFinalize still drains it)
    with _lock:
        _state["streams"].discard(stream)
    if err is not None:
        return set_error(ACL_ERROR_RT_INTERNAL_ERROR, f"aclrtDestroyStream: a task on the stream failed "
                         f"with status {err[0]}: {err[1]}")
    return ACL_SUCCESS


@_guard
def aclrtSynchronizeStream(stream: Optional["aclrtStream"]) -> int:
    """Wait for all work on ``stream`` (None = default); report a failure that happened on it."""
    s = resolve_stream(stream)
    if s is None:
        return _bad(f"aclrtSynchronizeStream: stream is {safe_repr(stream)}; expected a live stream or None")
    if s.in_own_task():
        return _bad("aclrtSynchronizeStream: the stream's running task belongs to this thread's interrupted call "
                    "(this is a signal handler or callback running on top of it), so waiting for it here would "
                    "never return; expected a call after the handler returns")
    err = s.synchronize()
    if err is not None:
        return set_error(ACL_ERROR_RT_INTERNAL_ERROR, f"aclrtSynchronizeStream: a task on the stream failed "
                         f"with status {err[0]}: {err[1]}")
    return ACL_SUCCESS
