"""Emulated device memory: allocations, device pointers, and bounds-checked copies.

A device allocation is a 64-byte-aligned NumPy uint8 array owned by an ``_Allocation`` record.
``aclrtMalloc`` hands out a ``DevicePtr`` (allocation + byte offset); ``ptr + n`` gives a pointer n
bytes further into the same allocation, as in C.  After ``aclrtFree`` the record is marked freed and
its array dropped; every later use of a pointer into it is an error status, never a crash.  Work
already enqueued on a stream holds its own reference to the array, so it never touches freed memory.
"""
import functools
import itertools
import os
import threading
import weakref
from typing import Optional, Tuple

import numpy as np

ALIGNMENT = 64
# Memory-checker builds (docs/reliability.md): with PYCONVTBC_EXACT_DEVICE_ALLOC=1 each allocation is exactly
# its size (no alignment slack after it), so AddressSanitizer / valgrind see a one-byte overrun of a device
# buffer.  Addresses are then only 16-byte aligned (NumPy's malloc), which the kernels accept.
EXACT = os.environ.get("PYCONVTBC_EXACT_DEVICE_ALLOC", "") not in ("", "0")
_ids = itertools.count(1)
_live_lock = threading.Lock()
_live = {}  # id -> _Allocation, for aclFinalize
_live_bytes = 0  # their sizes' sum


AVAILABILITY_CHECK_BYTES = 64 << 20   # requests from this size on are also checked against memory_available()


def _read(path):
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except (OSError, ValueError):
        return None


def _number(text):
    """An integer file's value; None for 'max', empty or unreadable."""
    text = (text or "").strip()
    return int(text) if text.isascii() and text.isdigit() else None


def cgroup_memory(proc_cgroup: str = "/proc/self/cgroup",
                  root: str = "/sys/fs/cgroup") -> Tuple[Optional[int], Optional[int]]:
    """(limit, working set) in bytes of the tightest memory cgroup this process is in, or (None, None).

    cgroup v2: ``memory.max`` and ``memory.current`` of the process's group (the ``0::`` line of
    /proc/self/cgroup) and of each ancestor under ``root``; v1: ``memory.limit_in_bytes`` and
    ``memory.usage_in_bytes`` under ``root/memory``.  The working set is the usage less the inactive file cache
    (``memory.stat``: ``inactive_file``, v1 ``total_inactive_file``), which the kernel reclaims before it kills.
    A group whose directory is not there (another cgroup namespace) is skipped; 'max' is no limit."""
    text = _read(proc_cgroup) or ""
    candidates = []            # (directory, limit file, usage file, inactive-file key)
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        _, controllers, path = parts
        if controllers == "" and parts[0] == "0":
            base, files = root, ("memory.max", "memory.current", "inactive_file")
        elif "memory" in controllers.split(","):
            base, files = os.path.join(root, "memory"), ("memory.limit_in_bytes", "memory.usage_in_bytes",
                                                         "total_inactive_file")
        else:
            continue
        rel = path.strip().strip("/")
        while True:                                  # the group and each ancestor up to the mount's root
            candidates.append((os.path.join(base, rel) if rel else base,) + files)
            if not rel:
                break
            rel = os.path.dirname(rel)
    best = (None, None)
    for d, limit_file, usage_file, inactive_key in candidates:
        limit = _number(_read(os.path.join(d, limit_file)))
        if limit is None or limit >= 1 << 62:           # no limit ('max', or v1's page-rounded 2^63-1)
            continue
        usage = _number(_read(os.path.join(d, usage_file))) or 0
        inactive = 0
        for line in (_read(os.path.join(d, "memory.stat")) or "").splitlines():
            key, _, value = line.partition(" ")
            if key == inactive_key and _number(value) is not None:
                inactive = _number(value)
        working = max(0, usage - inactive)
        if best[0] is None or limit - working < best[0] - best[1]:
            best = (limit, working)
    return best


def _physical():
    try:
        n = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        if n > 0:
            return int(n)
    except (AttributeError, ValueError, OSError):
        pass
    return None


@functools.lru_cache(maxsize=None)
def memory_total() -> int:
    """The most bytes all live device allocations together may hold: the smaller of this machine's physical memory
    (``SC_PHYS_PAGES * SC_PAGE_SIZE``) and the memory limit of the process's cgroup (v2 ``memory.max``, v1
    ``memory.limit_in_bytes``; ``cgroup_memory``); 1 TiB where neither is known.  Read once per process."""
    known = [n for n in (_physical(), cgroup_memory()[0]) if n]
    return min(known) if known else 1 << 40


def memory_available(meminfo: str = "/proc/meminfo") -> Optional[int]:
    """Bytes that can be had now, read at each call: the smaller of ``MemAvailable`` (/proc/meminfo) and the
    cgroup's limit less its working set (``cgroup_memory``); None where the OS tells neither."""
    known = []
    for line in (_read(meminfo) or "").splitlines():
        if line.startswith("MemAvailable:"):
            fields = line.split()
            if len(fields) >= 2 and _number(fields[1]) is not None:
                known.append(_number(fields[1]) * (1024 if fields[2:3] == ["kB"] else 1))
    limit, working = cgroup_memory()
    if limit is not None:
        known.append(max(0, limit - working))
    return min(known) if known else None


def memory_limit() -> int:
    """The most bytes one NumPy-layer call (workspace plus outputs) may ask for now: ``memory_total()`` (physical
    memory and the cgroup's limit), and no more than ``memory_available()`` (MemAvailable, and the cgroup's limit
    less its working set) at the time of the call.  (``aclrtMalloc`` also counts the live allocations against
    ``memory_total()``: ``too_large``.)"""
    available = memory_available()
    return memory_total() if available is None else min(memory_total(), available)


def too_large(nbytes: int, live: int = 0) -> Optional[str]:
    """Why a request of ``nbytes`` on top of ``live`` bytes already allocated does not fit, or None.  Requests
    below AVAILABILITY_CHECK_BYTES skip the availability reading (small ones cannot be what decides it)."""
    total = memory_total()
    if live + nbytes > total:
        already = f"{live} bytes are allocated already; " if live else ""
        return (f"{already}expected at most {total} bytes in all (memory_total(): physical memory, and the cgroup's "
                "memory limit)")
    if nbytes >= AVAILABILITY_CHECK_BYTES:
        available = memory_available()
        if available is not None and nbytes > available:
            return (f"expected at most the {available} bytes available now (memory_available(): MemAvailable, "
                    "and the cgroup's limit less its usage)")
    return None


class _Allocation:
    __slots__ = ("id", "size", "mem", "freed", "__weakref__")

    def __init__(self, size):
        if EXACT:
            self.mem = np.zeros(size, dtype=np.uint8)
        else:
            raw = np.zeros(size + ALIGNMENT, dtype=np.uint8)
            start = (-raw.ctypes.data) % ALIGNMENT
            self.mem = raw[start:start + size]
        self.size = size
        self.freed = False
        self.id = next(_ids)

    def free(self):
        self.freed = True
        self.mem = None


_TOKEN = object()  # only malloc and pointer arithmetic hold it: a DevicePtr built by hand is never genuine
_made = weakref.WeakSet()  # every allocation malloc made (live or freed)


class DevicePtr:
    """An address in emulated device memory: an allocation and a byte offset into it.

    Only ``aclrtMalloc`` (and ``ptr + n`` on such a pointer) make genuine pointers.  A ``DevicePtr`` built by
    hand is refused by every function that takes one (a status, never a crash); its fields are read-only.
    """
    __slots__ = ("_alloc", "_offset", "_genuine")

    def __init__(self, alloc: object = None, offset: int = 0, _token: object = None) -> None:
        genuine = _token is _TOKEN and type(alloc) is _Allocation and alloc in _made
        if not genuine or isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
            alloc, offset, genuine = _FORGED, 0, False
        object.__setattr__(self, "_alloc", alloc)
        object.__setattr__(self, "_offset", int(offset))
        object.__setattr__(self, "_genuine", genuine)

    def __setattr__(self, name, value):
        raise AttributeError(f"DevicePtr is read-only (cannot set {name!r})")

    def __delattr__(self, name):
        raise AttributeError(f"DevicePtr is read-only (cannot delete {name!r})")

    @property
    def genuine(self) -> bool:
        """True for a pointer made by aclrtMalloc (or arithmetic on one); False for one built by hand."""
        return self._genuine

    @property
    def offset(self) -> int:
        """Bytes from the start of the allocation."""
        return self._offset

    def __add__(self, nbytes):
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            return NotImplemented
        return DevicePtr(self._alloc, self._offset + int(nbytes), _TOKEN if self._genuine else None)

    __radd__ = __add__

    def __eq__(self, other):
        return isinstance(other, DevicePtr) and other._alloc is self._alloc and other._offset == self._offset

    def __hash__(self):
        return hash((self._alloc.id, self._offset))

    @property
    def freed(self) -> bool:
        return self._alloc.freed

    @property
    def allocation_id(self) -> int:
        return self._alloc.id

    def _size(self):
        mem = self._alloc.mem
        return 0 if mem is None else int(mem.size)  # the real buffer, whatever its record says

    @property
    def nbytes(self) -> int:
        """Bytes from this address to the end of its allocation (0 when freed, forged or out of range)."""
        size = self._size()
        if not self._genuine or self._alloc.freed or not 0 <= self._offset <= size:
            return 0
        return size - self._offset

    def array(self) -> np.ndarray:
        """The bytes from this address to the end of the allocation, as a uint8 NumPy view.

        Raises ValueError if the pointer was not made by aclrtMalloc, the allocation was freed or the offset
        lies outside it.
        """
        if not self._genuine:
            raise ValueError(f"{self!r} was not made by aclrtMalloc; expected a device pointer from aclrtMalloc")
        mem = self._alloc.mem
        if mem is None:
            raise ValueError(f"{self!r} points into freed device memory")
        if not 0 <= self._offset <= mem.size:
            raise ValueError(f"{self!r} lies outside its allocation of {mem.size} bytes")
        return mem[self._offset:]

    def __repr__(self):
        if not self._genuine:
            return "<DevicePtr forged (not from aclrtMalloc)>"
        state = "freed" if self._alloc.freed else f"{self._alloc.size} bytes"
        return f"<DevicePtr alloc#{self._alloc.id} ({state}) + {self._offset}>"


class _Forged:
    """The allocation every hand-built DevicePtr points at: no memory, reads as freed."""
    __slots__ = ()
    id = 0
    size = 0
    mem = None
    freed = True


_FORGED = _Forged()


def is_device_ptr(obj: object) -> bool:
    """True for a genuine device pointer (made by aclrtMalloc or arithmetic on one)."""
    return type(obj) is DevicePtr and obj._genuine


def malloc(size: int) -> DevicePtr:
    """A new zeroed allocation; MemoryError when it does not fit (``too_large``: the live allocations past
    ``memory_total()``, or more than ``memory_available()``)
    (the pages are reserved lazily, so an over-large request would otherwise succeed and fail later, when
    written)."""
    global _live_bytes
    with _live_lock:
        why = too_large(size, _live_bytes)
        if why:
            raise MemoryError(why)
        _live_bytes += size
    try:
        alloc = _Allocation(size)
    except BaseException:
        with _live_lock:
            _live_bytes -= size
        raise
    with _live_lock:
        _live[alloc.id] = alloc
        _made.add(alloc)
    return DevicePtr(alloc, 0, _TOKEN)


def free(ptr: DevicePtr) -> None:
    global _live_bytes
    with _live_lock:
        if _live.pop(ptr._alloc.id, None) is not None:
            _live_bytes -= ptr._alloc.size
    ptr._alloc.free()


def free_all() -> None:
    global _live_bytes
    with _live_lock:
        allocs = list(_live.values())
        _live.clear()
        _live_bytes = 0
    for a in allocs:
        a.free()


def host_bytes(obj: object, writable: bool) -> np.ndarray:
    """A flat uint8 view of a host buffer (anything with the buffer protocol), or raise ValueError.

    The view covers exactly the buffer's bytes in memory order, whatever the object's class: an ndarray
    subclass (np.matrix, a masked array) is read as its plain data, so slicing the view by a byte count never
    means anything else.  Non-contiguous buffers are refused, and read-only ones as a destination.
    """
    if isinstance(obj, DevicePtr):
        raise ValueError("expected a host buffer, got a device pointer")
    if isinstance(obj, np.ndarray):  # also dtypes the buffer protocol cannot spell (bfloat16, float8)
        # a subclass is read as the plain array it holds (np.matrix stays 2-D when reshaped; a masked array's mask
        # means nothing to bytes); ndarray.view itself, so no method the subclass overrides runs
        arr = np.ndarray.view(obj, np.ndarray) if type(obj) is not np.ndarray else obj
        if arr.dtype.hasobject:
            raise ValueError("the host buffer holds Python objects (dtype object); expected raw data")
        if not arr.flags.c_contiguous:
            raise ValueError("the host buffer is not C-contiguous; expected a C-contiguous buffer")
        if writable and not arr.flags.writeable:
            raise ValueError("the destination host buffer is read-only; expected a writable buffer")
        flat = arr.reshape(-1).view(np.uint8)
        if flat.ndim != 1 or flat.size != arr.nbytes:  # pragma: no cover - a plain contiguous ndarray always is
            raise ValueError("the host buffer cannot be read as bytes")
        return flat
    try:
        mv = memoryview(obj)
    except Exception:
        raise ValueError(f"expected a host buffer (an object with the buffer protocol), got {_type_name(obj)}") \
            from None
    try:
        if not mv.c_contiguous:
            raise ValueError("the host buffer is not C-contiguous; expected a C-contiguous buffer")
        if writable and mv.readonly:
            raise ValueError("the destination host buffer is read-only; expected a writable buffer")
        flat = np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)
    except ValueError:
        raise
    except Exception as e:
        raise ValueError(f"the host buffer cannot be read as bytes ({type(e).__name__})") from None
    if flat.size != mv.nbytes:  # pragma: no cover - cast("B") of a contiguous buffer covers all of it
        raise ValueError("the host buffer cannot be read as bytes")
    if writable and not flat.flags.writeable:  # pragma: no cover
        raise ValueError("the destination host buffer is read-only; expected a writable buffer")
    return flat


def _type_name(obj):
    try:
        return type(obj).__name__
    except Exception:  # pragma: no cover
        return "object"
