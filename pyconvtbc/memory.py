"""Emulated device memory: allocations, device pointers, and bounds-checked copies.

A device allocation is a 64-byte-aligned NumPy uint8 array owned by an ``_Allocation`` record.
``aclrtMalloc`` hands out a ``DevicePtr`` (allocation + byte offset); ``ptr + n`` gives a pointer n
bytes further into the same allocation, as in C.  After ``aclrtFree`` the record is marked freed and
its array dropped; every later use of a pointer into it is an error status, never a crash.  Work
already enqueued on a stream holds its own reference to the array, so it never touches freed memory.
"""
import itertools
import os
import threading

import numpy as np

ALIGNMENT = 64
# Memory-checker builds (docs/reliability.md): with PYCONVTBC_EXACT_DEVICE_ALLOC=1 each allocation is exactly
# its size (no alignment slack after it), so AddressSanitizer / valgrind see a one-byte overrun of a device
# buffer.  Addresses are then only 16-byte aligned (NumPy's malloc), which the kernels accept.
EXACT = os.environ.get("PYCONVTBC_EXACT_DEVICE_ALLOC", "") not in ("", "0")
_ids = itertools.count(1)
_live_lock = threading.Lock()
_live = {}  # id -> _Allocation, for aclFinalize


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


class DevicePtr:
    """An address in emulated device memory: an allocation and a byte offset into it."""
    __slots__ = ("_alloc", "offset")

    def __init__(self, alloc, offset=0):
        self._alloc = alloc
        self.offset = int(offset)

    def __add__(self, nbytes):
        if isinstance(nbytes, bool) or not isinstance(nbytes, (int, np.integer)):
            return NotImplemented
        return DevicePtr(self._alloc, self.offset + int(nbytes))

    __radd__ = __add__

    def __eq__(self, other):
        return isinstance(other, DevicePtr) and other._alloc is self._alloc and other.offset == self.offset

    def __hash__(self):
        return hash((self._alloc.id, self.offset))

    @property
    def freed(self):
        return self._alloc.freed

    @property
    def allocation_id(self):
        return self._alloc.id

    @property
    def nbytes(self):
        """Bytes from this address to the end of its allocation (0 when freed or out of range)."""
        if self._alloc.freed or not 0 <= self.offset <= self._alloc.size:
            return 0
        return self._alloc.size - self.offset

    def array(self):
        """The bytes from this address to the end of the allocation, as a uint8 NumPy view.

        Raises ValueError if the allocation was freed or the offset lies outside it.
        """
        mem = self._alloc.mem
        if mem is None:
            raise ValueError(f"{self!r} points into freed device memory")
        if not 0 <= self.offset <= self._alloc.size:
            raise ValueError(f"{self!r} lies outside its allocation of {self._alloc.size} bytes")
        return mem[self.offset:]

    def __repr__(self):
        state = "freed" if self._alloc.freed else f"{self._alloc.size} bytes"
        return f"<DevicePtr alloc#{self._alloc.id} ({state}) + {self.offset}>"


def malloc(size):
    alloc = _Allocation(size)
    with _live_lock:
        _live[alloc.id] = alloc
    return DevicePtr(alloc, 0)


def free(ptr):
    with _live_lock:
        _live.pop(ptr._alloc.id, None)
    ptr._alloc.free()


def free_all():
    with _live_lock:
        allocs = list(_live.values())
        _live.clear()
    for a in allocs:
        a.free()


def host_bytes(obj, writable):
    """A flat uint8 view of a host buffer (anything with the buffer protocol), or raise ValueError."""
    if isinstance(obj, DevicePtr):
        raise ValueError("expected a host buffer, got a device pointer")
    if isinstance(obj, np.ndarray):  # also dtypes the buffer protocol cannot spell (bfloat16, float8)
        if obj.dtype.hasobject:
            raise ValueError("the host buffer holds Python objects (dtype object); expected raw data")
        if not obj.flags.c_contiguous:
            raise ValueError("the host buffer is not C-contiguous")
        if writable and not obj.flags.writeable:
            raise ValueError("the destination host buffer is read-only")
        return obj.reshape(-1).view(np.uint8)
    try:
        mv = memoryview(obj)
    except (TypeError, ValueError, BufferError):
        raise ValueError(f"expected a host buffer (an object with the buffer protocol), got {type(obj).__name__}")
    if not mv.c_contiguous:
        raise ValueError("the host buffer is not C-contiguous")
    if writable and mv.readonly:
        raise ValueError("the destination host buffer is read-only")
    try:
        return np.frombuffer(mv.cast("B") if mv.ndim != 1 or mv.format != "B" else mv, dtype=np.uint8)
    except (TypeError, ValueError, BufferError) as e:
        raise ValueError(f"the host buffer cannot be read as bytes ({e})")
