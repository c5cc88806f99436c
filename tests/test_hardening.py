"""Hostile and odd input (issue 11): every CANN-layer function returns a status for any Python object; memcpy
copies exactly ``count`` bytes from and to any buffer; device pointers cannot be forged; the NumPy layer names
the caller's arguments and dtypes, refuses masked arrays, bounds its memory; ascend910's BF16 bias rule."""
import array
import ctypes
import gc
import threading
import time
import weakref

import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import _numpy_layer as api
from pyconvtbc.memory import DevicePtr
from conftest import acl_problem, make_problem, phase1, read_back

INVALID, NULLPTR = 161002, 161001
pytestmark = pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # np.matrix on purpose
H2D, D2H, D2D, H2H = (pc.ACL_MEMCPY_HOST_TO_DEVICE, pc.ACL_MEMCPY_DEVICE_TO_HOST, pc.ACL_MEMCPY_DEVICE_TO_DEVICE,
                      pc.ACL_MEMCPY_HOST_TO_HOST)


# ---- hostile Python objects ------------------------------------------------------------------------------
def _boom(*_a, **_k):
    raise RuntimeError("hostile")


class BadRepr:
    __repr__ = __str__ = __format__ = _boom


class BadIter(BadRepr):
    __iter__ = __len__ = __getitem__ = __contains__ = _boom


class BadIndex(BadRepr):
    __index__ = __int__ = __float__ = __complex__ = _boom


class BadEq(BadRepr):
    __eq__ = __ne__ = __hash__ = __bool__ = __lt__ = __le__ = __gt__ = __ge__ = _boom


class BadAttr(BadRepr):
    __getattr__ = _boom  # every missing attribute (destroyed, data_type, ...) raises


class EvilInt(int):
    """An int (so it passes isinstance checks) whose Python-level protocol raises."""
    __repr__ = __str__ = __format__ = __eq__ = __ne__ = __hash__ = __index__ = _boom


class EvilList(list):
    __repr__ = __str__ = __iter__ = __len__ = __getitem__ = __eq__ = _boom


class EvilStr(str):
    __repr__ = __str__ = __format__ = __eq__ = __hash__ = lower = strip = _boom


class EvilIntArith(int):
    """An int whose conversions and comparisons raise (read by value with int's own method, never through them)."""
    __int__ = __index__ = __lt__ = __le__ = __gt__ = __ge__ = __eq__ = __ne__ = __hash__ = __bool__ = _boom


class RegisteredIntegral(BadRepr):
    """Not an int, but registered as numbers.Integral, with an __index__ that raises: not an integer."""
    __index__ = __int__ = _boom


class BadPath(BadRepr):
    """An os.PathLike whose __fspath__ raises."""
    __fspath__ = _boom


import numbers  # noqa: E402  (registering the class above)
numbers.Integral.register(RegisteredIntegral)

HOSTILE = {
    "bad_repr": BadRepr, "bad_iter": BadIter, "bad_index": BadIndex, "bad_eq": BadEq, "bad_attr": BadAttr,
    "evil_int0": lambda: EvilInt(0), "evil_int64": lambda: EvilInt(64), "evil_list": lambda: EvilList([1, 2]),
    "evil_int_arith1": lambda: EvilIntArith(1), "registered_integral": RegisteredIntegral, "bad_path": BadPath,
    "evil_str": lambda: EvilStr("ascend910"), "object_array": lambda: np.array([BadEq(), BadEq()], dtype=object),
}


def _problem():
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy, x, w, b)
    return t


def _phase1_args():
    t = _problem()
    return [t["self"], t["input"], t["weight"], t["bias"], 1, 0, t["gradInput"], t["gradWeight"], t["gradBias"]]


def _executor():
    rc, ws, ex = phase1(_problem())
    assert rc == 0
    ptr = None
    if ws:
        rc, ptr = pc.aclrtMalloc(ws)
        assert rc == 0
    return ptr, ws, ex


def _ptr(n=64):
    rc, p = pc.aclrtMalloc(n)
    assert rc == 0
    return p


def _tensor():
    return pc.aclCreateTensor([4], pc.ACL_FLOAT, [1], 0, pc.ACL_FORMAT_ND, [4], _ptr(16))


# name -> builder of a valid argument list (fresh objects each call)
CANN_FUNCS = {
    "aclInit": lambda: [None],
    "aclrtSetDevice": lambda: [0],
    "aclrtResetDevice": lambda: [0],
    "aclrtCtxSetSysParamOpt": lambda: [0, 1],
    "aclrtCtxGetSysParamOpt": lambda: [0],
    "aclrtMalloc": lambda: [64, 0],
    "aclrtFree": lambda: [_ptr()],
    "aclrtMemcpy": lambda: [_ptr(), 64, np.zeros(64, np.uint8), 64, H2D],
    "aclrtDestroyStream": lambda: [pc.aclrtCreateStream()[1]],
    "aclrtSynchronizeStream": lambda: [None],
    "aclCreateTensor": lambda: [[4], pc.ACL_FLOAT, [1], 0, pc.ACL_FORMAT_ND, [4], _ptr(16)],
    "aclDestroyTensor": lambda: [_tensor()],
    "aclnnConvTbcBackwardGetWorkspaceSize": _phase1_args,
    "aclnnConvTbcBackward": lambda: list(_executor()) + [None],
    "aclSetAclOpExecutorRepeatable": lambda: [_executor()[2]],
    "aclDestroyAclOpExecutor": lambda: [_executor()[2]],
}
NO_ARGS = ["aclFinalize", "aclrtCreateStream", "aclGetRecentErrMsg"]
CASES = [(f, i, h) for f, build in CANN_FUNCS.items() for i in range(len(build())) for h in HOSTILE]
INTERNAL = (pc.ACLNN_ERR_INNER, pc.ACL_ERROR_INTERNAL_ERROR)


def _status_of(result):
    if isinstance(result, tuple):
        return result[0]
    if result is None or isinstance(result, pc.aclTensor):  # aclCreateTensor
        return 0 if result is not None else pc.ACL_ERROR_INVALID_PARAM
    return result


@pytest.mark.parametrize("func,pos,hostile", CASES, ids=[f"{f}-arg{i}-{h}" for f, i, h in CASES])
def test_every_cann_function_returns_a_status_for_any_object(func, pos, hostile):
    args = CANN_FUNCS[func]()
    args[pos] = HOSTILE[hostile]()
    result = getattr(pc, func)(*args)  # must not raise
    status = _status_of(result)
    assert isinstance(status, int)
    if status:
        msg = pc.aclGetRecentErrMsg()
        assert isinstance(msg, str) and msg.startswith(func)
        # a bad value is the caller's fault: a parameter status naming it, never "internal error, a bug"
        assert status not in INTERNAL, msg
    pc.aclrtSynchronizeStream(None)


@pytest.mark.parametrize("func", NO_ARGS)
def test_argument_free_cann_functions(func):
    result = getattr(pc, func)()
    assert result is None or isinstance(result, (int, tuple, str))


def test_wrong_arity_still_raises_type_error():
    with pytest.raises(TypeError):
        pc.aclrtMalloc(1, 2, 3)


def test_bad_soc_environment_is_a_status_everywhere(monkeypatch):
    monkeypatch.setenv("PYCONVTBC_SOC_VERSION", "nope")
    rc, value = pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC)
    assert rc == pc.ACL_ERROR_INVALID_PARAM and value is None
    assert "PYCONVTBC_SOC_VERSION is 'nope'" in pc.aclGetRecentErrMsg()
    monkeypatch.delenv("PYCONVTBC_SOC_VERSION")
    built = {f: b() for f, b in CANN_FUNCS.items()}  # build the arguments under a good setting
    monkeypatch.setenv("PYCONVTBC_SOC_VERSION", "nope")
    for func, args in built.items():
        status = _status_of(getattr(pc, func)(*args))
        assert isinstance(status, int)
        if func == "aclnnConvTbcBackwardGetWorkspaceSize":
            assert status == INVALID and "PYCONVTBC_SOC_VERSION" in pc.aclGetRecentErrMsg()
    for func in NO_ARGS:
        getattr(pc, func)()
    # the NumPy layer raises AclnnError naming the variable
    with pytest.raises(pc.AclnnError, match="PYCONVTBC_SOC_VERSION is 'nope'"):
        pc.conv_tbc_backward(*make_problem(), 1)


# ---- aclrtMemcpy: exactly count bytes, any buffer ---------------------------------------------------------
def _device_with(pattern):
    p = _ptr(len(pattern))
    assert pc.aclrtMemcpy(p, len(pattern), np.frombuffer(pattern, np.uint8), len(pattern), H2D) == 0
    return p


def _device_bytes(p, n):
    out = np.zeros(n, np.uint8)
    assert pc.aclrtMemcpy(out, n, p, n, D2H) == 0
    return out.tobytes()


SRC = bytes(range(1, 49))  # 48 bytes


def _host_buffers():
    """(name, factory) of writable host buffers of 48 bytes, each a different kind of buffer."""
    return [
        ("ndarray_u8", lambda: np.zeros(48, np.uint8)),
        ("matrix_f32", lambda: np.matrix(np.zeros((3, 4), np.float32))),
        ("matrix_f64_row", lambda: np.matrix(np.zeros(6, np.float64))),
        ("masked", lambda: np.ma.MaskedArray(np.zeros(12, np.float32), mask=[True] * 12)),
        ("ndarray_3d_i16", lambda: np.zeros((2, 3, 4), np.int16)),
        ("ndarray_itemsize3", lambda: np.zeros(16, "S3")),
        ("ndarray_struct_odd", lambda: np.zeros(8, np.dtype([("a", "u1"), ("b", "<i4"), ("c", "u1")]))),
        ("bytearray", lambda: bytearray(48)),
        ("array_d", lambda: array.array("d", [0.0] * 6)),
        ("ctypes", lambda: (ctypes.c_uint16 * 24)()),
        ("memoryview_2d", lambda: memoryview(np.zeros((4, 6), np.int16))),
        ("bfloat16", lambda: np.zeros(24, ml_dtypes.bfloat16)),
    ]


def _raw(buf):
    """A buffer's bytes in memory order (any strides: then in logical order, for before/after comparisons)."""
    if isinstance(buf, np.ndarray):
        a = np.ascontiguousarray(buf.view(np.ndarray))
        return a.reshape(-1).view(np.uint8).tobytes() if not a.dtype.hasobject else None
    if isinstance(buf, (bytes, bytearray, memoryview, array.array)) or hasattr(buf, "_type_"):
        return memoryview(buf).tobytes()
    return None


@pytest.mark.parametrize("name,make", _host_buffers(), ids=[n for n, _ in _host_buffers()])
@pytest.mark.parametrize("count", [0, 1, 5, 17, 47, 48])
def test_memcpy_device_to_host_writes_exactly_count_bytes(name, make, count):
    dst = make()
    assert len(_raw(dst)) == 48
    rc = pc.aclrtMemcpy(dst, 48, _device_with(SRC), count, D2H)
    assert rc == 0, pc.aclGetRecentErrMsg()
    assert _raw(dst) == SRC[:count] + bytes(48 - count)  # the first count bytes, nothing past them


@pytest.mark.parametrize("name,make", _host_buffers(), ids=[n for n, _ in _host_buffers()])
@pytest.mark.parametrize("count", [0, 3, 48])
def test_memcpy_host_to_device_reads_exactly_count_bytes(name, make, count):
    src = make()
    assert pc.aclrtMemcpy(src, 48, _device_with(SRC), 48, D2H) == 0  # fill it with SRC
    dev = _device_with(b"\xee" * 64)
    assert pc.aclrtMemcpy(dev, 64, src, count, H2D) == 0, pc.aclGetRecentErrMsg()
    assert _device_bytes(dev, 64) == SRC[:count] + b"\xee" * (64 - count)


def test_memcpy_host_to_host_between_odd_buffers():
    src = np.matrix(np.arange(12, dtype=np.float32).reshape(3, 4))
    dst = array.array("d", [0.0] * 8)  # 64 bytes
    assert pc.aclrtMemcpy(dst, 64, src, 20, H2H) == 0
    raw = bytes(memoryview(dst).cast("B"))
    assert raw == np.asarray(src).tobytes()[:20] + bytes(44)


@pytest.mark.parametrize("dst,why", [
    (lambda: np.zeros(96, np.uint8)[::2], "not C-contiguous"),
    (lambda: memoryview(np.zeros((8, 12), np.uint8)[:, ::2]), "not C-contiguous"),
    (lambda: np.asfortranarray(np.zeros((6, 8), np.uint8)), "not C-contiguous"),
    (lambda: bytes(48), "read-only"),
    (lambda: np.frombuffer(bytes(48), np.uint8), "read-only"),
    (lambda: np.broadcast_to(np.zeros(1, np.uint8), (48,)), "not C-contiguous"),  # zero stride, read-only
    (lambda: np.zeros(6, object), "dtype object"),
    (lambda: [0] * 48, "buffer protocol"),
    (lambda: "x" * 48, "buffer protocol"),
    (lambda: BadRepr(), "buffer protocol"),
])
def test_memcpy_refuses_what_it_cannot_write_exactly(dst, why):
    d = dst()
    before = _raw(d)
    rc = pc.aclrtMemcpy(d, 48, _device_with(SRC), 8, D2H)
    assert rc == pc.ACL_ERROR_INVALID_PARAM
    assert why in pc.aclGetRecentErrMsg()
    if before is not None:
        assert _raw(d) == before


def test_memcpy_count_beyond_the_real_buffer_is_refused():
    dst = np.matrix(np.zeros((2, 2), np.float32))  # 16 bytes
    assert pc.aclrtMemcpy(dst, 1000, _device_with(SRC), 17, D2H) == pc.ACL_ERROR_INVALID_PARAM
    assert "exceeds the 16 bytes of the destination" in pc.aclGetRecentErrMsg()
    assert not np.asarray(dst).any()


def test_runtime_and_executor_messages_say_what_was_expected():
    """Every failure message names the argument, the value seen and what was expected, outside phase 1 too."""
    rc, p = pc.aclrtMalloc(8)
    assert rc == 0 and pc.aclrtFree(p) == 0
    calls = (lambda: pc.aclSetAclOpExecutorRepeatable(None), lambda: pc.aclDestroyAclOpExecutor(None),
             lambda: pc.aclrtFree(p),
             lambda: pc.aclrtMemcpy(np.zeros(4, np.uint8), 8, _device_with(SRC), 8, D2H),
             lambda: pc.aclrtMemcpy(np.zeros(4, np.uint8), 4, _device_with(SRC), 8, D2H),
             lambda: pc.aclrtMemcpy(np.zeros(48, np.uint8)[::2], 24, _device_with(SRC), 8, D2H),
             lambda: pc.aclrtMemcpy(np.zeros(48, np.uint8), 48, _device_with(SRC[:2]), 16, D2H))
    for call in calls:
        assert call() != 0
        msg = pc.aclGetRecentErrMsg()
        assert "expected" in msg.split("; ", 1)[-1], msg


# ---- DevicePtr: only runtime-made pointers -----------------------------------------------------------------
def _forgeries():
    real = _ptr(1 << 12)
    return {
        "none": DevicePtr(None),
        "int": DevicePtr(12345, 0),
        "borrowed_alloc": DevicePtr(real._alloc, 0),   # a real allocation, but not via aclrtMalloc
        "borrowed_far": DevicePtr(real._alloc, 1 << 40),
        "fake_alloc": DevicePtr(type("A", (), {"id": 1, "size": 1 << 40, "mem": np.zeros(8, np.uint8),
                                               "freed": False})(), 0),
    }


@pytest.mark.parametrize("kind", ["none", "int", "borrowed_alloc", "borrowed_far", "fake_alloc"])
def test_forged_device_pointer_is_refused_everywhere(kind):
    p = _forgeries()[kind]
    assert not p.genuine and p.nbytes == 0 and "forged" in repr(p)
    assert pc.aclrtFree(p) == pc.ACL_ERROR_INVALID_PARAM
    assert pc.aclrtMemcpy(p, 64, np.zeros(64, np.uint8), 64, H2D) == pc.ACL_ERROR_INVALID_PARAM
    assert "not made by aclrtMalloc" in pc.aclGetRecentErrMsg()
    assert pc.aclrtMemcpy(np.zeros(64, np.uint8), 64, p, 64, D2H) == pc.ACL_ERROR_INVALID_PARAM
    assert pc.aclCreateTensor([4], pc.ACL_FLOAT, [1], 0, pc.ACL_FORMAT_ND, [4], p) is None
    assert "not made by aclrtMalloc" in pc.aclGetRecentErrMsg()
    # the exported aclTensor class, built directly around it: phase 1 refuses it (rule 1, naming why)
    t = _problem()
    t["input"] = pc.aclTensor([6, 2, 3], pc.ACL_FLOAT, [6, 3, 1], 0, pc.ACL_FORMAT_ND, [36], p)
    rc, _, ex = phase1(t)
    assert rc == INVALID and ex is None and "input is an aclTensor" in pc.aclGetRecentErrMsg()
    # as a workspace
    ws_ptr, ws, ex = _executor()
    if ws:
        assert pc.aclnnConvTbcBackward(p, ws, ex, None) == INVALID


def test_device_pointer_fields_are_read_only_and_arithmetic_stays_genuine():
    p = _ptr(64)
    with pytest.raises(AttributeError):
        p.offset = 10 ** 9
    with pytest.raises(AttributeError):
        p._alloc = None
    q = p + 8
    assert q.genuine and q.offset == 8 and q.nbytes == 56
    assert (8 + p) == q


def test_tampered_allocation_size_cannot_reach_past_the_real_buffer():
    p = _ptr(16)
    p._alloc.size = 1 << 30  # the record lies; the real buffer is 16 bytes
    assert p.nbytes == 16
    t = _problem()
    o = t["input"]
    t["input"] = pc.aclCreateTensor(o.view_dims, o.data_type, o.strides, 0, o.format, o.storage_dims, p)
    rc, _, _ = phase1(t)
    assert rc == INVALID and "holds 16" in pc.aclGetRecentErrMsg()


# ---- aclTensor / aclCreateTensor field types ---------------------------------------------------------------
def test_implied_contiguous_strides_must_fit_int64():
    """strides=None: the contiguous strides the view implies are computed here, and ones past int64 make
    aclCreateTensor return None with a message (not a descriptor that phase 1 refuses for strides the caller
    never passed); ones that fit give a descriptor."""
    assert pc.aclCreateTensor([2**62, 2**62, 4], pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, [1], _ptr(16)) is None
    msg = pc.aclGetRecentErrMsg()
    assert "view_dims [4611686018427387904, 4611686018427387904, 4] with strides=None" in msg
    assert "expected strides within int64" in msg
    t = pc.aclCreateTensor([2**31, 2**31, 4], pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, [1], _ptr(16))
    assert t is not None and list(t.strides) == [2**33, 4, 1]


@pytest.mark.parametrize("field,value", [
    ("strides", [1.0]), ("strides", [True]), ("strides", [np.float32(1)]), ("view_dims", [4.0]),
    ("view_dims", [np.True_]), ("offset", 0.0), ("offset", True), ("storage_dims", [4.5]), ("data_type", 0.0),
    ("format", False), ("strides", "1"), ("view_dims", None),
])
def test_tensor_fields_must_be_integers(field, value):
    args = {"view_dims": [4], "data_type": pc.ACL_FLOAT, "strides": [1], "offset": 0,
            "format": pc.ACL_FORMAT_ND, "storage_dims": [4], "data": _ptr(16)}
    args[field] = value
    order = ["view_dims", "data_type", "strides", "offset", "format", "storage_dims", "data"]
    assert pc.aclCreateTensor(*[args[k] for k in order]) is None
    assert field in pc.aclGetRecentErrMsg() and "int64" in pc.aclGetRecentErrMsg()
    # built directly (the class is exported): a descriptor that names its problem; phase 1 refuses it
    t = pc.aclTensor(*[args[k] for k in order])
    assert field in t.problem()
    assert "invalid" in repr(t)
    prob = _problem()
    prob["bias"] = t
    rc, _, _ = phase1(prob)
    assert rc == INVALID and "bias is an aclTensor; expected a valid tensor descriptor" in pc.aclGetRecentErrMsg()
    assert field in pc.aclGetRecentErrMsg()


def test_tensor_fields_changed_after_creation_are_rechecked():
    prob = _problem()
    prob["weight"].strides = (1.5, 1, 1)
    rc, _, _ = phase1(prob)
    assert rc == INVALID and "weight" in pc.aclGetRecentErrMsg() and "strides" in pc.aclGetRecentErrMsg()


# ---- NumPy layer: caller's names, dtypes, masked arrays -----------------------------------------------------
NP_ARGS = ["grad_output", "input", "weight", "bias"]


def _call(args, pad=1, **kw):
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(*args, pad, **kw)
    return e.value


@pytest.mark.parametrize("i", range(4))
def test_masked_arrays_are_refused_naming_the_argument(i):
    args = list(make_problem())
    args[i] = np.ma.masked_less(args[i], 0)
    e = _call(args)
    assert e.status == INVALID
    assert e.message.startswith(f"conv_tbc_backward: {NP_ARGS[i]} is a MaskedArray; expected a plain NumPy array")
    assert "mask" in e.message


@pytest.mark.parametrize("i", range(4))
def test_unsupported_dtypes_name_the_dtype_seen(i):
    args = list(make_problem())
    args[i] = args[i].astype(np.float64)
    e = _call(args)
    assert e.status == INVALID
    assert (f"{NP_ARGS[i]} has dtype float64 (aclDataType DOUBLE); expected float32, float16 or bfloat16"
            in e.message)
    args = list(make_problem())
    args[i] = args[i].astype(">f4")  # byte-swapped float32: no aclDataType
    e = _call(args)
    assert f"{NP_ARGS[i]} has dtype >f4 (no aclDataType); expected float32, float16 or bfloat16" in e.message
    assert "DT_UNDEFINED" not in e.message and "-1" not in e.message


def test_numpy_messages_use_the_callers_names():
    args = make_problem()
    assert "grad_output has shape" in _call([args[0][:-1]] + list(args[1:])).message
    e = _call(args, cube_math_type=7)
    assert "cube_math_type is 7" in e.message and "cubeMathType" not in e.message
    e = _call(args, grad_weight_dtype="float16")
    assert "grad_weight_dtype is 'float16'" in e.message and "gradWeight" not in e.message
    e = _call(args, grad_weight_dtype=np.float64)
    assert "grad_weight_dtype is" in e.message and "DOUBLE" in e.message
    assert "pad is 300" in _call(args, pad=300).message
    e = _call([None] + list(args[1:]))
    assert e.status == NULLPTR and e.message.startswith("conv_tbc_backward: grad_output is a null pointer")
    for m in (_call(args, pad=300), _call(args, cube_math_type=7)):
        assert "self" not in m.message


def test_cann_layer_keeps_cann_names():
    t = _problem()
    rc, _, _ = phase1(t, cube=7)
    assert rc == INVALID and "cubeMathType is 7" in pc.aclGetRecentErrMsg()


def test_matrix_subclass_is_read_as_a_plain_array():
    dy, x, w, b = make_problem()
    # np.matrix is always 2-D: read as its plain 2-D array, it fails the rank rule like any 2-D array
    e = _call([np.matrix(dy[:, 0, :]), x, w, b])
    assert "grad_output has 2 dims" in e.message
    # np.memmap-like subclasses of the right shape are accepted and give the same result as plain arrays
    sub = type("Sub", (np.ndarray,), {})
    got = pc.conv_tbc_backward(dy.view(sub), x.view(sub), w.view(sub), b.view(sub), 1)
    want = pc.conv_tbc_backward(dy, x, w, b, 1)
    for g, wv in zip(got, want):
        assert type(g) is np.ndarray
        np.testing.assert_array_equal(g, wv)


# ---- NumPy layer: memory ------------------------------------------------------------------------------------
def test_huge_broadcast_problem_fails_fast_naming_the_workspace():
    import time
    T, B, Cin, Cout, K = 1 << 30, 1 << 20, 256, 256, 3

    def z(shape):
        return np.broadcast_to(np.zeros((1,) * len(shape), np.float32), shape)
    t0 = time.perf_counter()
    e = _call([z((T - K + 1, B, Cout)), z((T, B, Cin)), z((K, Cin, Cout)), z((Cout,))], pad=0)
    assert time.perf_counter() - t0 < 5
    assert isinstance(e, pc.AclnnError) and e.status == INVALID
    assert "needs a workspace of" in e.message and "physical memory" in e.message
    from pyconvtbc import memory
    assert str(memory.memory_total()) in e.message


def test_memory_limit_is_at_most_physical_memory():
    import os
    assert 0 < api.memory_limit() <= os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")


def test_scratch_above_the_keep_size_is_dropped_after_the_call(monkeypatch):
    monkeypatch.setattr(api, "WORKSPACE_KEEP_BYTES", 1024)  # any workspace this call needs is "large"
    dy, x, w, b = make_problem(T_in=64, B=8, Cin=32, Cout=32)
    seen = []
    real = api._workspace
    monkeypatch.setattr(api, "_workspace", lambda n: seen.append(n) or real(n))
    pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=2)
    if not seen:
        pytest.skip("this problem needs no workspace with these kernels")
    assert seen[0] > api.WORKSPACE_KEEP_BYTES  # the call did use a larger scratch buffer ...
    assert getattr(api._ws_cache, "buf", None) is None  # ... and dropped it when it returned


def test_small_scratch_is_kept_and_release_workspace_frees_it():
    dy, x, w, b = make_problem(T_in=64, B=8, Cin=32, Cout=32)
    pc.release_workspace()
    pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=2)
    buf = getattr(api._ws_cache, "buf", None)
    if buf is None:
        pytest.skip("this problem needs no workspace with these kernels")
    assert buf.size <= api.WORKSPACE_KEEP_BYTES
    ref = weakref.ref(buf)
    del buf
    pc.release_workspace()
    gc.collect()
    assert ref() is None
    assert "release_workspace" in pc.__all__


def test_scratch_is_freed_when_the_thread_ends():
    dy, x, w, b = make_problem(T_in=64, B=8, Cin=32, Cout=32)
    refs = []

    def work():
        pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=2)
        buf = getattr(api._ws_cache, "buf", None)
        refs.append(None if buf is None else weakref.ref(buf))

    th = threading.Thread(target=work)
    th.start()
    th.join()
    if refs[0] is None:
        pytest.skip("this problem needs no workspace with these kernels")
    del th
    gc.collect()
    assert refs[0]() is None


# ---- ascend910: BF16 bias ----------------------------------------------------------------------------------
def test_ascend910_bf16_bias_is_rejected_at_grad_bias_in_both_layers():
    pc.set_soc_version("ascend910")
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy, x, w, b.astype(ml_dtypes.bfloat16))
    rc, _, _ = phase1(t, cube=1)
    assert rc == INVALID
    assert "gradBias has data type BF16 (27); expected one of FLOAT, FLOAT16 on ascend910" in pc.aclGetRecentErrMsg()
    e = _call([dy, x, w, b.astype(ml_dtypes.bfloat16)], cube_math_type=1)
    assert e.status == INVALID and "grad_bias" in e.message and "bfloat16" in e.message and "ascend910" in e.message
    # fp16 / fp32 bias still fine there
    pc.conv_tbc_backward(dy, x, w, b.astype(np.float16), 1, cube_math_type=1)


# ---- torch bridge ------------------------------------------------------------------------------------------
def _torch_problem(torch, dtype=None):
    g = torch.Generator().manual_seed(3)
    dtype = dtype or torch.float32
    x = torch.randn(7, 2, 3, generator=g).to(dtype).requires_grad_()
    w = torch.randn(3, 3, 4, generator=g).to(dtype).requires_grad_()
    b = torch.randn(4, generator=g).to(dtype).requires_grad_()
    return x, w, b


def test_torch_pad_is_checked_at_the_forward_call():
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import ConvTBC, conv_tbc
    x, w, b = _torch_problem(torch)
    for pad in (256, -1):
        with pytest.raises(pc.AclnnError, match=rf"conv_tbc: pad is {pad}; expected an integer in \[0, 255\]") as e:
            conv_tbc(x, w, b, pad)
        assert e.value.status == INVALID
    with pytest.raises(pc.AclnnError, match="pad is 300"):
        ConvTBC(3, 4, 3, padding=300)(x)


def test_torch_float64_is_refused_at_the_forward_call():
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import conv_tbc
    x, w, b = _torch_problem(torch, torch.float64)
    with pytest.raises(TypeError, match="input has dtype torch.float64; expected torch.float32"):
        conv_tbc(x, w, b, 1)


def test_torch_double_backward_raises():
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import conv_tbc
    x, w, b = _torch_problem(torch)
    gx, = torch.autograd.grad(conv_tbc(x, w, b, 1).sum(), x, create_graph=True)
    assert gx.requires_grad  # not a silently constant gradient
    for target in (w, x):
        with pytest.raises(RuntimeError, match="double backward is not supported"):
            torch.autograd.grad(gx.sum(), target, allow_unused=True)
    # first-order gradients with create_graph=True are still the emulated ones
    plain, = torch.autograd.grad(conv_tbc(x, w, b, 1).sum(), x)
    assert torch.equal(gx.detach(), plain)


def test_torch_any_strides_are_accepted():
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import conv_tbc
    x, w, b = _torch_problem(torch)
    xs = x.detach().transpose(0, 1).contiguous().transpose(0, 1).requires_grad_()    # (T, B, C) with B outermost
    ws = w.detach().permute(2, 1, 0).contiguous().permute(2, 1, 0).requires_grad_()
    bs = b.detach()[:1].expand(4).clone().requires_grad_()
    bz = b.detach()[:1].expand(4).requires_grad_()                                      # zero stride
    assert not xs.is_contiguous() and not ws.is_contiguous() and bz.stride() == (0,)
    gy = torch.randn(7, 2, 4)
    y = conv_tbc(xs, ws, bz, 1)
    y.backward(gy)
    x2, w2, b2 = (t.detach().clone().requires_grad_() for t in (xs, ws, bs))
    y2 = conv_tbc(x2, w2, b2, 1)
    y2.backward(gy)
    assert torch.equal(y, y2)
    assert torch.equal(xs.grad, x2.grad) and torch.equal(ws.grad, w2.grad) and torch.equal(bz.grad, b2.grad)


# ---- public API: type hints and docstrings -----------------------------------------------------------------
def _public_functions():
    import inspect
    from pyconvtbc import memory, runtime, status, tensor
    for mod in (api, runtime, tensor, memory, status):
        for name, obj in vars(mod).items():
            if name.startswith("_") or not inspect.isfunction(obj) or obj.__module__ != mod.__name__:
                continue
            yield f"{mod.__name__}.{name}", obj


@pytest.mark.parametrize("name,fn", list(_public_functions()), ids=[n for n, _ in _public_functions()])
def test_public_functions_have_type_hints(name, fn):
    import inspect
    fn = inspect.unwrap(fn)
    sig = inspect.signature(fn)
    assert sig.return_annotation is not inspect.Signature.empty, name
    for p in sig.parameters.values():
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            assert p.annotation is not inspect.Parameter.empty, (name, p.name)


def test_conv_tbc_backward_documents_every_keyword():
    import inspect
    import pydoc
    text = pydoc.render_doc(pc.conv_tbc_backward, renderer=pydoc.plaintext)
    for section in ("Parameters", "Returns", "Raises"):
        assert f"{section}\n    ---" in text, section
    for p in inspect.signature(pc.conv_tbc_backward).parameters:
        assert f"    {p} :" in text, p


def test_torch_bridge_docstrings():
    pytest.importorskip("torch")
    import inspect
    from pyconvtbc.torch import ConvTBC, conv_tbc
    for obj in (conv_tbc, ConvTBC):
        doc = inspect.getdoc(obj)
        for section in ("Parameters", "Raises"):
            assert f"{section}\n---" in doc, (obj, section)
    assert "Returns\n---" in inspect.getdoc(conv_tbc)
    for p in ("input", "weight", "bias", "pad"):
        assert f"{p} :" in inspect.getdoc(conv_tbc)
    assert inspect.signature(conv_tbc).return_annotation is not inspect.Signature.empty


# ---- NumPy layer: hostile values in every argument ---------------------------------------------------------
NP_KEYWORDS = ["pad", "cube_math_type", "grad_weight_dtype", "soc", "deterministic", "num_threads",
               "hf32_rounding", "hf32_mantissa_bits", "hif8_rounding", "saturate", "accumulation", "block_size",
               "order_seed"]
NP_CASES = [(a, h) for a in NP_ARGS + NP_KEYWORDS for h in HOSTILE]


@pytest.mark.parametrize("arg,hostile", NP_CASES, ids=[f"{a}-{h}" for a, h in NP_CASES])
def test_numpy_layer_raises_only_aclnn_error_for_any_object(arg, hostile):
    args, kw = list(make_problem()), {}
    pad = 1
    if arg in NP_ARGS:
        args[NP_ARGS.index(arg)] = HOSTILE[hostile]()
    elif arg == "pad":
        pad = HOSTILE[hostile]()
    else:
        kw[arg] = HOSTILE[hostile]()
    try:
        pc.conv_tbc_backward(*args, pad, **kw)  # an int subclass holding a valid value may pass
    except pc.AclnnError as e:
        assert e.status == INVALID
        if not hostile.startswith("evil_int"):  # an int subclass is a valid int: a later rule may fail instead
            assert e.message.startswith(f"conv_tbc_backward: {arg} ") or f" {arg} is" in e.message, e.message


# ---- executors: only phase 1 makes them, and what it captured cannot change ---------------------------------
def test_hand_built_executor_is_refused():
    ws_ptr, ws, real = _executor()
    fake = pc.aclOpExecutor(real.plan, real.tensors)  # the exported class, built by hand from a real plan
    assert not fake.genuine and real.genuine
    assert pc.aclnnConvTbcBackward(ws_ptr, ws, fake, None) == INVALID
    assert "not made by aclnnConvTbcBackwardGetWorkspaceSize" in pc.aclGetRecentErrMsg()
    assert pc.aclSetAclOpExecutorRepeatable(fake) == INVALID
    assert pc.aclDestroyAclOpExecutor(fake) == INVALID
    assert pc.aclnnConvTbcBackward(ws_ptr, ws, real, None) == 0 and pc.aclrtSynchronizeStream(None) == 0


def test_executor_captured_fields_cannot_be_changed():
    dy, x, w, b = make_problem()
    t, ptrs = acl_problem(dy, x, w, b)
    rc, ws, ex = phase1(t)
    assert rc == 0
    with pytest.raises(AttributeError):
        ex._plan = None
    # a view shrunk after phase 1 (with strides that would reach far past the buffer for the planned shape)
    ex.tensors["input"].view_dims = (1, 1, 1)
    ex.tensors["input"].strides = (10 ** 9, 1, 1)
    t["input"].strides = (10 ** 9, 1, 1)  # the caller's own descriptor changed too: phase 1 copied its fields
    ws_ptr = _ptr(ws) if ws else None
    assert pc.aclnnConvTbcBackward(ws_ptr, ws, ex, None) == 0
    assert pc.aclrtSynchronizeStream(None) == 0, pc.aclGetRecentErrMsg()
    gi = read_back(ptrs["gradInput"], x.shape, np.float32)  # computed on the views phase 1 captured
    np.testing.assert_array_equal(gi, pc.conv_tbc_backward(dy, x, w, b, 1)[0])


def test_torch_bridge_passes_the_accumulation_keywords():
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import conv_tbc
    x, w, b = _torch_problem(torch)
    gy = torch.ones(7, 2, 4)
    conv_tbc(x, w, b, 1, accumulation="sequential", block_size=4, order_seed=3).backward(gy)
    gi, gw, gb = pc.conv_tbc_backward(gy.numpy(), x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), 1,
                                      accumulation="sequential", block_size=4, order_seed=3)
    np.testing.assert_array_equal(x.grad.numpy(), gi)
    np.testing.assert_array_equal(w.grad.numpy(), gw)
    with pytest.raises(pc.AclnnError, match="block_size is 0"):
        conv_tbc(x, w, b, 1, block_size=0).sum().backward()


# ---- found by the adversarial review of 2026-12-05 ---------------------------------------------------------
def _misaligned_scalar(value):
    """A float32 scalar at an odd byte offset (flags.aligned is False)."""
    raw = np.zeros(5, np.uint8)
    raw[1:5] = np.frombuffer(np.float32(value).tobytes(), np.uint8)
    a = np.frombuffer(raw.tobytes(), np.float32, count=1, offset=1)
    assert not a.flags.aligned
    return a


def test_misaligned_broadcast_operand_is_not_expanded():
    """A misaligned broadcast grad_output used to be copied whole (np.array of the broadcast view): 256 MiB
    here, 4 TiB in the review's case (a bare MemoryError).  Only its distinct elements are copied now."""
    import tracemalloc
    T, B, Cout = 4096, 64, 256
    dy = np.broadcast_to(_misaligned_scalar(0.5), (T, B, Cout))
    assert not dy.flags.aligned
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 5, (T, B, 1)).astype(np.float32)
    w = rng.integers(-4, 5, (1, 1, Cout)).astype(np.float32)
    tracemalloc.start()
    try:
        gi, gw, gb = pc.conv_tbc_backward(dy, x, w, np.zeros(Cout, np.float32), 0, num_threads=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < dy.nbytes // 2, peak                       # the expanded copy alone would be dy.nbytes
    # grid values: every sum below is exact in fp32
    np.testing.assert_array_equal(gi[..., 0], np.full((T, B), 0.5 * float(w.astype(np.float64).sum()), np.float32))
    np.testing.assert_array_equal(gw[0, 0], np.full(Cout, 0.5 * float(x.astype(np.float64).sum()), np.float32))
    np.testing.assert_array_equal(gb, np.full(Cout, 0.5 * T * B, np.float32))


def test_misaligned_broadcast_of_an_invalid_call_gets_its_status():
    dy = np.broadcast_to(_misaligned_scalar(1.0), (1 << 20, 1024, 1024))      # 4 TiB if it were expanded
    x = np.broadcast_to(np.zeros(1, np.float32), (1 << 20, 1024, 1))
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, np.zeros((1, 1, 1024), np.float32),
                             np.zeros(1024, np.float32), -1)
    assert e.value.status == INVALID and "pad is -1" in str(e.value)


@pytest.mark.parametrize("pad", [np.int64(2**62), np.uint64(2**64 - 1), np.int64(-2**63), np.int16(256)])
def test_numpy_integer_pad_is_checked_before_any_arithmetic(pad):
    """conv_tbc computed T_out with the caller's NumPy integer before checking pad: overflow warnings leaked
    (a RuntimeWarning under -W error instead of 161002)."""
    import warnings
    x, w, b = np.zeros((4, 2, 3), np.float32), np.zeros((3, 3, 4), np.float32), np.zeros(4, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(pc.AclnnError) as e:
            pc.conv_tbc(x, w, b, pad)
    assert e.value.status == INVALID and "pad is" in str(e.value)


def test_numpy_unsigned_pad_of_a_valid_call_does_not_wrap():
    import warnings
    x, w, b = np.zeros((0, 5, 3), np.float32), np.zeros((3, 3, 4), np.float32), np.zeros(4, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert pc.conv_tbc(x, w, b, np.uint64(1)).shape == (0, 5, 4)


def test_deterministic_accepts_numpy_integers_as_saturate_does():
    x, w, b = np.ones((5, 1, 2), np.float32), np.ones((1, 2, 2), np.float32), np.ones(2, np.float32)
    ref = pc.conv_tbc_backward(x, x, w, b, 0, deterministic=True)
    for v in (np.int64(1), np.int8(1), np.uint8(1)):
        for r, o in zip(ref, pc.conv_tbc_backward(x, x, w, b, 0, deterministic=v)):
            np.testing.assert_array_equal(r, o)
    with pytest.raises(pc.AclnnError, match=r"deterministic is np.int64\(2\); expected None, True or False"):
        pc.conv_tbc_backward(x, x, w, b, 0, deterministic=np.int64(2))


def test_too_many_threads_message_says_what_is_wrong():
    x, w, b = np.ones((5, 1, 2), np.float32), np.ones((1, 2, 2), np.float32), np.ones(2, np.float32)
    with pytest.raises(pc.AclnnError, match=r"num_threads is 1025; expected an integer in \[1, 1024\]"):
        pc.conv_tbc_backward(x, x, w, b, 0, num_threads=1025)


def test_a_call_from_a_signal_handler_does_not_share_the_outer_calls_scratch():
    """The kernels run Python signal handlers in the calling thread while they work.  A handler that called
    conv_tbc_backward reused the outer call's scratch buffer and silently corrupted its results."""
    import signal
    if not hasattr(signal, "setitimer"):
        pytest.skip("no setitimer")
    rng = np.random.default_rng(0)
    T, B, C, K = 8192, 8, 128, 3            # about 0.1-0.3 s: the kernels poll for signals every 50 ms
    x, w = rng.standard_normal((T, B, C), dtype=np.float32), rng.standard_normal((K, C, C), dtype=np.float32)
    dy, b = rng.standard_normal((T, B, C), dtype=np.float32), np.zeros(C, np.float32)
    kw = dict(deterministic=True, num_threads=2)
    ref, ref2 = pc.conv_tbc_backward(dy, x, w, b, 1, **kw), pc.conv_tbc_backward(3 * dy, -x, w, b, 1, **kw)
    ran = []

    def handler(signum, frame):
        inside = False                     # did the signal land while the outer call's kernels run?
        while frame is not None:
            inside |= frame.f_code.co_name == "run_arrays"
            frame = frame.f_back
        ran.append((inside, pc.conv_tbc_backward(3 * dy, -x, w, b, 1, **kw)))
    old = signal.signal(signal.SIGALRM, handler)
    try:
        for attempt in range(10):
            signal.setitimer(signal.ITIMER_REAL, 0.01)
            out = pc.conv_tbc_backward(dy, x, w, b, 1, **kw)
            signal.setitimer(signal.ITIMER_REAL, 0)
            time.sleep(0.02)               # an alarm that fired after the call runs its handler now
            for r, o in zip(ref, out):
                np.testing.assert_array_equal(r, o)
            ran[:] = [r for r in ran if r[0]]
            if ran:
                break
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    if not ran:
        pytest.skip("the signal never landed inside a call")
    for r, o in zip(ref2, ran[0][1]):
        np.testing.assert_array_equal(r, o)


# ---- codecs and format helpers: argument handling ------------------------------------------------------------
def test_codec_arguments_are_checked_and_named():
    """The public codecs (docs/precision.md, docs/numpy.md): num_threads is checked even for an empty input; an
    empty list decodes to an empty array; an object that cannot become an array, or a ragged list, is a
    ValueError naming the argument; Python ints past int64 read as the floats they round to; formats.hf32 and
    ulp / ulp_distance refuse what is not an integer / not real numeric, naming it."""
    from pyconvtbc import codecs as C, formats as F
    empty = np.ones(0, np.float32)
    for fn, arg in ((C.hif8_encode, empty), (C.hif8_decode, np.ones(0, np.uint8)), (C.round_to_hf32, empty),
                    (C.e4m3fn_encode, empty), (C.e4m3fn_decode, np.ones(0, np.uint8)), (C.round_to_fp16, empty),
                    (C.round_to_bf16, empty)):
        for bad in (0, -5, "two", 1.5, 10**6):
            with pytest.raises(ValueError, match="num_threads"):
                fn(arg, num_threads=bad)
        with pytest.raises(ValueError, match=r"must be .*converting .* failed \(RuntimeError"):
            fn(_ArrayRaises())
    for dec in (C.hif8_decode, C.e4m3fn_decode):
        out = dec([])
        assert out.shape == (0,) and out.dtype == np.float32
    with pytest.raises(ValueError, match=r"^x must be a real numeric array-like; converting \[\[1, 2\], \[3\]\]"):
        C.hif8_encode([[1, 2], [3]])
    for big in (2**64, -2**63 - 1, 10**30, 10**400, -10**400):
        as_float = float(big) if abs(big) < 10**300 else (np.inf if big > 0 else -np.inf)
        assert C.hif8_encode(big) == C.hif8_encode(np.float64(as_float))
    for bad in (11.9, "11", True, 1.0, None, 0, 23):
        with pytest.raises(ValueError, match="mantissa_bits must be an integer in 1..22"):
            F.hf32(bad)
    assert F.hf32(np.int64(10)).mantissa_bits == 10
    with pytest.raises(ValueError, match="mantissa_bits must be an integer in 1..22"):
        F.hf32(RegisteredIntegral())
    for bad in (None, np.array([1 + 2j]), "1000", np.array([BadEq()], dtype=object)):
        with pytest.raises(ValueError, match="x must be a real numeric array-like"):
            F.ulp("float32", bad)
        with pytest.raises(ValueError, match="b must be a real numeric array-like"):
            F.ulp_distance("float32", 1.0, bad)
    assert F.ulp("float16", [1, 2.5]).tolist() == [2.0 ** -10, 2.0 ** -9]
    assert F.ulp("bfloat16", np.array([1], ml_dtypes.bfloat16)).tolist() == [2.0 ** -7]


class _ArrayRaises:
    def __array__(self, *a, **k):
        raise RuntimeError("hostile")
