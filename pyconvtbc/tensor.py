"""aclTensor: the tensor descriptor of the CANN layer, and the memory rules it must satisfy.

A descriptor carries view dims, data type, element strides, element offset, format, storage dims and
a device buffer (a ``DevicePtr``).  It does not own or copy data: the operator reads the buffer when
phase 2 runs.  ``memory_problem`` implements rule 8 of docs/semantics.md section 2 for one tensor.
"""

from typing import Optional, Sequence

import numpy as np

from .enums import ITEMSIZE
from .memory import DevicePtr, is_device_ptr
from .status import ACL_ERROR_INVALID_PARAM, ACLNN_ERR_INNER, never_raises, safe_repr, set_error

INT64_MAX = 2**63 - 1


def _as_int(v):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
        raise TypeError
    v = int(v)
    if not -INT64_MAX - 1 <= v <= INT64_MAX:
        raise OverflowError
    return v


def _int_tuple(seq):
    if isinstance(seq, (str, bytes)):
        raise TypeError
    try:
        return tuple(_as_int(v) for v in seq)
    except (TypeError, OverflowError):
        raise
    except Exception:  # an object whose __iter__ / __len__ / items raise: not a sequence of int64
        raise TypeError from None


def _field_problem(view_dims, data_type, strides, offset, format, storage_dims, data):
    """Why these descriptor fields are not a descriptor at all (non-integers, bools, floats, mismatched
    lengths, a buffer that is not a pointer from aclrtMalloc), or None.  Shared by aclCreateTensor and the
    aclTensor constructor, and re-checked whenever an operator is handed the descriptor."""
    for name, value in (("view_dims", view_dims), ("strides", strides), ("storage_dims", storage_dims)):
        if type(value) is not tuple:
            return f"{name} is {safe_repr(value)}; expected a sequence of int64"
        for v in value:
            if type(v) is not int or not -INT64_MAX - 1 <= v <= INT64_MAX:
                return f"{name} is {safe_repr(value)}; expected a sequence of int64"
    if len(strides) != len(view_dims):
        return f"strides has {len(strides)} entries for {len(view_dims)} view dims; expected one stride per dim"
    for name, value in (("data_type", data_type), ("offset", offset), ("format", format)):
        if type(value) is not int or not -INT64_MAX - 1 <= value <= INT64_MAX:
            return f"{name} is {safe_repr(value)}; expected an int64 value"
    if data is not None and not is_device_ptr(data):
        what = "a DevicePtr not made by aclrtMalloc" if isinstance(data, DevicePtr) else f"a {type(data).__name__}"
        return f"tensor_data is {what}; expected a device pointer from aclrtMalloc (or None)"
    return None


class aclTensor:
    """A tensor descriptor.  Create with ``aclCreateTensor``; free with ``aclDestroyTensor``.

    Built directly, the fields are normalised as ``aclCreateTensor`` does (sequences of integers become tuples
    of int); fields that make no descriptor (float or bool strides, non-integer dims or offset, a buffer that
    is not from aclrtMalloc) are kept as given and reported by ``problem()``: an operator handed such a
    descriptor returns 161002 naming the field, never crashes.
    """
    __slots__ = ("view_dims", "data_type", "strides", "offset", "format", "storage_dims", "data",
                 "destroyed", "__weakref__")

    def __init__(self, view_dims: Sequence[int], data_type: int, strides: Sequence[int], offset: int,
                 format: int, storage_dims: Sequence[int], data: Optional[DevicePtr]) -> None:
        def norm_seq(v):
            try:
                return _int_tuple(v)
            except Exception:
                return v

        def norm_int(v):
            try:
                return _as_int(v)
            except Exception:
                return v
        self.view_dims = norm_seq(view_dims)
        self.data_type = norm_int(data_type)
        self.strides = norm_seq(strides)
        self.offset = norm_int(offset)
        self.format = norm_int(format)
        self.storage_dims = norm_seq(storage_dims)
        self.data = data
        self.destroyed = False

    def snapshot(self) -> "aclTensor":
        """A copy holding the fields as they are now, each read once (the values themselves, not normalised).

        Phase 1 validates the snapshot and captures it, never the live descriptor: another thread changing the
        descriptor meanwhile cannot make the executor hold fields other than those validated.  The fields that
        pass ``problem()`` are immutable (tuples of ints, ints, a read-only DevicePtr)."""
        copy = aclTensor.__new__(aclTensor)
        for name in aclTensor.__slots__[:-1]:          # every field and ``destroyed``; not __weakref__
            # the slot itself (a subclass's property of that name is not what the kernels would be given)
            setattr(copy, name, getattr(aclTensor, name).__get__(self, aclTensor))
        return copy

    def fields(self) -> tuple:
        """(view_dims, data_type, strides, offset, format, storage_dims, data): the constructor's arguments."""
        return (self.view_dims, self.data_type, self.strides, self.offset, self.format, self.storage_dims, self.data)

    def problem(self) -> Optional[str]:
        """Why the current fields make no descriptor (see the class docstring), or None."""
        return _field_problem(self.view_dims, self.data_type, self.strides, self.offset, self.format,
                              self.storage_dims, self.data)

    # the attributes validation reads (shared with the NumPy layer's descriptors)
    @property
    def shape(self) -> tuple:
        return self.view_dims

    @property
    def numel(self) -> int:
        n = 1
        for d in self.view_dims:
            n *= d
        return n

    @property
    def itemsize(self) -> int:
        return ITEMSIZE.get(self.data_type, 1)

    def extent(self) -> int:
        """Elements from the storage start to one past the view's last element (0 if the view is empty)."""
        if any(d <= 0 for d in self.view_dims):
            return 0
        return self.offset + sum((d - 1) * s for d, s in zip(self.view_dims, self.strides)) + 1

    def memory_problem(self) -> Optional[str]:
        """Why this view cannot be read or written safely, or None.  (Rule 8, one tensor.)"""
        bad = self.problem()
        if bad:
            return bad
        dims, strides = self.view_dims, self.strides
        if any(s < 0 for s in strides):
            return f"strides {list(strides)} contain a negative value; expected strides >= 0"
        if self.offset < 0:
            return f"offset {self.offset} is negative; expected offset >= 0"
        if any(d < 0 for d in self.storage_dims):
            return f"storage dims {list(self.storage_dims)} contain a negative value; expected >= 0"
        storage_elems = 1
        for d in self.storage_dims:
            storage_elems *= d
        storage_bytes = storage_elems * self.itemsize
        if storage_bytes > INT64_MAX:
            return f"storage dims {list(self.storage_dims)} hold {storage_bytes} bytes; expected at most 2^63-1"
        if self.data is not None and self.data.freed:
            return f"its device buffer {self.data!r} was freed; expected live memory from aclrtMalloc"
        if self.data is not None and self.data.offset % self.itemsize:
            # allocations are 64-byte aligned and strides/offset count elements, so only pointer
            # arithmetic by a byte count can misalign a tensor; the kernels load whole elements
            return (f"its device address {self.data!r} is {self.data.offset} bytes into its allocation; expected "
                    f"a multiple of the element size ({self.itemsize} bytes)")
        for s in strides:  # the kernels take byte strides as int64
            if s * self.itemsize > INT64_MAX:
                return (f"strides {list(strides)} reach {s * self.itemsize} bytes per step; expected byte strides "
                        "within int64")
        if self.numel * self.itemsize > INT64_MAX:
            return (f"view dims {list(dims)} hold {self.numel * self.itemsize} bytes; expected a byte size "
                    "within int64")
        if any(d == 0 for d in dims):
            return None  # an empty view reads and writes nothing (docs/decisions.md)
        if self.offset >= storage_elems:
            return (f"offset {self.offset} is past the end of its storage of {storage_elems} elements "
                    f"(storage dims {list(self.storage_dims)}); expected an offset below {storage_elems}")
        if self.data is not None and storage_bytes > self.data.nbytes:
            return (f"its storage needs {storage_bytes} bytes but its device buffer {self.data!r} holds "
                    f"{self.data.nbytes}; expected the storage inside the buffer")
        extent = self.extent()
        if extent * self.itemsize > INT64_MAX:
            return (f"view dims {list(dims)} with strides {list(strides)} and offset {self.offset} reach "
                    f"{extent * self.itemsize} bytes; expected a byte size within int64")
        if extent > storage_elems:
            return (f"view dims {list(dims)} with strides {list(strides)} and offset {self.offset} reach element "
                    f"{extent - 1}; expected the view inside its storage of {storage_elems} elements "
                    f"(storage dims {list(self.storage_dims)})")
        if self.data is None:
            return "it has no device buffer (tensor_data is None); expected a buffer holding its storage"
        return None

    def byte_span(self) -> Optional[tuple]:
        """(allocation id, first byte, one past last byte) of the view, or None if it touches no memory."""
        if self.data is None or self.numel == 0:
            return None
        first = self.data.offset + self.offset * self.itemsize
        return (self.data.allocation_id, first, first + (self.extent() - self.offset) * self.itemsize)

    def element_view(self) -> Optional[np.ndarray]:
        """The view's elements as a NumPy array of opaque ``itemsize``-byte items over its device memory (None if
        it touches no memory), for exact overlap tests.  The memory rules must have passed."""
        if self.data is None or self.numel == 0:
            return None
        return np.ndarray(tuple(self.view_dims), dtype=np.dtype((np.void, self.itemsize)), buffer=self.data.array(),
                          offset=self.offset * self.itemsize, strides=tuple(s * self.itemsize for s in self.strides))

    def is_contiguous(self) -> bool:
        if self.numel == 0:
            return True  # an empty view has no element to be out of place
        expected = 1
        for d, s in zip(reversed(self.view_dims), reversed(self.strides)):
            if d != 1 and s != expected:
                return False
            expected *= d
        return True

    def kernel_operand(self) -> tuple:
        """(address of element [0,...], byte strides..., dtype) for the kernels.  The memory rules
        must have passed; the caller keeps ``self.data``'s array alive while the kernel runs."""
        base = self.data.array() if self.data is not None and self.numel else None
        addr = 0 if base is None else base.ctypes.data + self.offset * self.itemsize
        return (addr,) + tuple(s * self.itemsize for s in self.strides) + (int(self.data_type),)

    def __repr__(self):
        state = " destroyed" if self.destroyed else ""
        if self.problem():
            return f"<aclTensor{state} invalid>"
        from .enums import dtype_name, format_name
        return (f"<aclTensor{state} dims={list(self.view_dims)} dtype={dtype_name(self.data_type)} "
                f"strides={list(self.strides)} offset={self.offset} format={format_name(self.format)}>")


def _contiguous_strides(dims):
    strides, acc = [], 1
    for d in reversed(dims):
        strides.append(acc)
        acc *= max(d, 1)
    return tuple(reversed(strides))


class _Bad(Exception):
    """An aclCreateTensor argument that makes the descriptor meaningless (the message names it)."""


def _storage(dims, dt, strides, off, fmt, storage_dims):
    if storage_dims is not None:
        return _int_tuple(storage_dims)
    storage = (aclTensor(dims, dt, strides, off, fmt, (), None).extent(),)   # just big enough for the view
    _as_int(storage[0])
    return storage


@never_raises(ACL_ERROR_INVALID_PARAM, lambda rc: None)
def aclCreateTensor(view_dims: Sequence[int], data_type: int, strides: Optional[Sequence[int]], offset: int,
                    format: int, storage_dims: Optional[Sequence[int]],
                    tensor_data: Optional[DevicePtr]) -> Optional[aclTensor]:
    """Create a descriptor.  Returns an aclTensor, or None (and records a message) for bad arguments.

    strides and offset count elements; ``strides=None`` means contiguous; ``storage_dims=None`` means
    just big enough for the view.  Values are checked when an operator uses the tensor, not here,
    except what makes a descriptor meaningless (non-integers, bools, floats, mismatched lengths, a buffer
    that is not a pointer from aclrtMalloc).
    """
    def read(fn, what):
        """fn(), or a _Bad naming the argument(s) when it is not int64 values."""
        try:
            return fn()
        except (TypeError, OverflowError):
            raise _Bad(what()) from None

    try:
        dims = read(lambda: _int_tuple(view_dims),
                    lambda: f"view_dims is {safe_repr(view_dims)}; expected a sequence of int64")
        strides_t = read(lambda: _contiguous_strides(dims) if strides is None else _int_tuple(strides),
                         lambda: f"strides is {safe_repr(strides)}; expected a sequence of int64")
        if len(strides_t) != len(dims):
            raise _Bad(f"strides has {len(strides_t)} entries for {len(dims)} view dims; expected one stride "
                       "per dim")
        if strides is None and any(st > INT64_MAX for st in strides_t):
            raise _Bad(f"view_dims {list(dims)} with strides=None imply contiguous strides {list(strides_t)}; "
                       "expected strides within int64")
        off, dt, fmt = read(lambda: (_as_int(offset), _as_int(data_type), _as_int(format)),
                            lambda: f"data_type {safe_repr(data_type)}, offset {safe_repr(offset)} and format "
                                    f"{safe_repr(format)} must be int64 values")
        storage = read(lambda: _storage(dims, dt, strides_t, off, fmt, storage_dims),
                       lambda: f"storage_dims is {safe_repr(storage_dims)}; expected a sequence of int64")
        if tensor_data is not None and not is_device_ptr(tensor_data):
            what = ("a DevicePtr not made by aclrtMalloc" if isinstance(tensor_data, DevicePtr)
                    else f"a {type(tensor_data).__name__}")
            raise _Bad(f"tensor_data is {what}; expected a device pointer from aclrtMalloc (or None)")
    except _Bad as e:
        set_error(ACL_ERROR_INVALID_PARAM, f"aclCreateTensor: {e}")
        return None
    return aclTensor(dims, dt, strides_t, off, fmt, storage, tensor_data)


@never_raises(ACLNN_ERR_INNER)
def aclDestroyTensor(tensor: Optional[aclTensor]) -> int:
    """Mark a descriptor destroyed.  None -> 161001; a non-descriptor or a second destroy -> 161002."""
    from .status import ACLNN_ERR_PARAM_INVALID, ACLNN_ERR_PARAM_NULLPTR
    if tensor is None:
        return set_error(ACLNN_ERR_PARAM_NULLPTR, "aclDestroyTensor: tensor is None; expected an aclTensor")
    if not isinstance(tensor, aclTensor):
        return set_error(ACLNN_ERR_PARAM_INVALID,
                         f"aclDestroyTensor: tensor is a {type(tensor).__name__}; expected an aclTensor")
    if tensor.destroyed:
        return set_error(ACLNN_ERR_PARAM_INVALID, "aclDestroyTensor: tensor was already destroyed")
    tensor.destroyed = True
    tensor.data = None
    return 0
