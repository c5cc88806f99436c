"""The emulated runtime: malloc/free, memcpy with all four kinds and bounds checks, devices, contexts,
streams, the per-thread error message, descriptors."""
import threading

import numpy as np
import pytest

import pyconvtbc as pc

BAD = pc.ACL_ERROR_INVALID_PARAM


def test_init_finalize_device():
    assert pc.aclInit(None) == 0
    assert pc.aclrtSetDevice(0) == 0
    assert pc.aclrtSetDevice(-1) == BAD and "device_id is -1" in pc.aclGetRecentErrMsg()
    assert pc.aclrtResetDevice(0) == 0
    assert pc.aclInit("/no/such/file.json") == BAD
    assert pc.aclFinalize() == 0
    assert pc.aclFinalize() == 0  # repeatable


@pytest.mark.parametrize("size", [0, -1, 1.5, "8", None, True])
def test_malloc_rejects_bad_sizes(size):
    rc, ptr = pc.aclrtMalloc(size)
    assert rc == BAD and ptr is None
    assert "aclrtMalloc: size is" in pc.aclGetRecentErrMsg()


def test_malloc_too_big_is_bad_alloc():
    rc, ptr = pc.aclrtMalloc(2**50)
    assert rc == pc.ACL_ERROR_BAD_ALLOC and ptr is None


def test_malloc_past_physical_memory_is_bad_alloc_not_a_promise():
    """Emulated device memory is host memory whose pages the OS reserves lazily: without a check, a request
    larger than the machine would succeed and fail later, when written (out-of-memory kill).  So a request
    that would take the live allocations past the physical memory is refused at once, as the NPU's runtime
    refuses more than its HBM."""
    from pyconvtbc import memory
    limit = memory.memory_total()
    rc, ptr = pc.aclrtMalloc(limit + 1)
    assert rc == pc.ACL_ERROR_BAD_ALLOC and ptr is None
    assert f"cannot allocate {limit + 1} bytes" in pc.aclGetRecentErrMsg()
    assert f"expected at most {limit} bytes in all" in pc.aclGetRecentErrMsg()


def test_malloc_counts_the_live_allocations(monkeypatch):
    from pyconvtbc import memory
    pc.aclFinalize()                                   # no allocation left from other tests
    monkeypatch.setattr(memory, "memory_total", lambda: 1 << 20)
    rc, a = pc.aclrtMalloc(600 << 10)
    assert rc == 0
    rc, b = pc.aclrtMalloc(600 << 10)                  # 1200 KiB live > 1 MiB
    assert rc == pc.ACL_ERROR_BAD_ALLOC and b is None
    assert f"{600 << 10} bytes are allocated already" in pc.aclGetRecentErrMsg()
    rc, b = pc.aclrtMalloc(400 << 10)                  # exactly 1000 KiB: fits
    assert rc == 0
    assert pc.aclrtFree(a) == 0                        # freeing gives the bytes back
    rc, c = pc.aclrtMalloc(600 << 10)
    assert rc == 0
    assert pc.aclFinalize() == 0                       # so does aclFinalize
    rc, d = pc.aclrtMalloc(1 << 20)
    assert rc == 0 and pc.aclrtFree(d) == 0


def test_free_rules():
    rc, p = pc.aclrtMalloc(16)
    assert rc == 0
    assert pc.aclrtFree(p + 4) == BAD           # not the start of an allocation
    assert pc.aclrtFree(p) == 0
    assert pc.aclrtFree(p) == BAD and "already freed" in pc.aclGetRecentErrMsg()
    assert pc.aclrtFree(None) == BAD


def test_memcpy_all_four_kinds_round_trip():
    host = np.arange(16, dtype=np.float32)
    rc, d1 = pc.aclrtMalloc(host.nbytes)
    rc, d2 = pc.aclrtMalloc(host.nbytes)
    assert pc.aclrtMemcpy(d1, host.nbytes, host, host.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    assert pc.aclrtMemcpy(d2, host.nbytes, d1, host.nbytes, pc.ACL_MEMCPY_DEVICE_TO_DEVICE) == 0
    out = np.zeros_like(host)
    assert pc.aclrtMemcpy(out, out.nbytes, d2, host.nbytes, pc.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    np.testing.assert_array_equal(out, host)
    out2 = bytearray(host.nbytes)
    assert pc.aclrtMemcpy(out2, len(out2), out, host.nbytes, pc.ACL_MEMCPY_HOST_TO_HOST) == 0
    assert bytes(out2) == host.tobytes()
    # partial copy at an offset, through pointer arithmetic
    part = np.zeros(4, np.float32)
    assert pc.aclrtMemcpy(part, part.nbytes, d2 + 8 * 4, part.nbytes, pc.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    np.testing.assert_array_equal(part, host[8:12])


def test_memcpy_never_overruns():
    rc, d = pc.aclrtMalloc(8)
    big = np.zeros(16, np.uint8)
    small = np.zeros(4, np.uint8)
    assert pc.aclrtMemcpy(d, 8, big, 16, pc.ACL_MEMCPY_HOST_TO_DEVICE) == BAD       # count > dst_max
    assert pc.aclrtMemcpy(d, 16, big, 16, pc.ACL_MEMCPY_HOST_TO_DEVICE) == BAD      # lies about dst_max
    assert "destination" in pc.aclGetRecentErrMsg()
    assert pc.aclrtMemcpy(d, 8, small, 8, pc.ACL_MEMCPY_HOST_TO_DEVICE) == BAD      # short source
    assert "source" in pc.aclGetRecentErrMsg()
    assert pc.aclrtMemcpy(small, 4, d, 8, pc.ACL_MEMCPY_DEVICE_TO_HOST) == BAD      # short host dst
    assert pc.aclrtMemcpy(d + 6, 4, small, 4, pc.ACL_MEMCPY_HOST_TO_DEVICE) == BAD  # past the end
    assert pc.aclrtMemcpy(d + 100, 0, small, 0, pc.ACL_MEMCPY_HOST_TO_DEVICE) == BAD  # outside
    assert pc.aclrtMemcpy(d, 8, small, -1, pc.ACL_MEMCPY_HOST_TO_DEVICE) == BAD


def test_memcpy_wrong_kind_or_buffer():
    rc, d = pc.aclrtMalloc(8)
    h = np.zeros(8, np.uint8)
    assert pc.aclrtMemcpy(h, 8, d, 8, pc.ACL_MEMCPY_HOST_TO_DEVICE) == BAD   # dst is host
    assert "device pointer" in pc.aclGetRecentErrMsg()
    assert pc.aclrtMemcpy(d, 8, h, 8, pc.ACL_MEMCPY_DEVICE_TO_DEVICE) == BAD
    assert pc.aclrtMemcpy(d, 8, h, 8, 7) == BAD and "kind is 7" in pc.aclGetRecentErrMsg()
    assert pc.aclrtMemcpy(b"readonly", 8, d, 8, pc.ACL_MEMCPY_DEVICE_TO_HOST) == BAD
    assert pc.aclrtMemcpy(np.zeros((4, 4), np.uint8)[:, ::2], 8, d, 8, pc.ACL_MEMCPY_DEVICE_TO_HOST) == BAD
    assert pc.aclrtMemcpy(object(), 8, d, 8, pc.ACL_MEMCPY_DEVICE_TO_HOST) == BAD
    pc.aclrtFree(d)
    assert pc.aclrtMemcpy(h, 8, d, 8, pc.ACL_MEMCPY_DEVICE_TO_HOST) == BAD and "freed" in pc.aclGetRecentErrMsg()


def test_memory_starts_zeroed():
    rc, d = pc.aclrtMalloc(64)
    out = np.ones(64, np.uint8)
    pc.aclrtMemcpy(out, 64, d, 64, pc.ACL_MEMCPY_DEVICE_TO_HOST)
    assert not out.any()


def test_error_message_is_per_thread():
    pc.aclrtMalloc(0)
    mine = pc.aclGetRecentErrMsg()
    seen = []

    def other():
        seen.append(pc.aclGetRecentErrMsg())
        pc.aclrtSetDevice(99)
        seen.append(pc.aclGetRecentErrMsg())

    th = threading.Thread(target=other)
    th.start()
    th.join()
    assert seen[0] is None and "device_id is 99" in seen[1]
    assert pc.aclGetRecentErrMsg() == mine


def test_sys_param_option_per_context():
    assert pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC) == (0, 0)   # ascend910b default: off
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0
    assert pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC) == (0, 1)
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 2) == BAD
    assert pc.aclrtCtxSetSysParamOpt(5, 1) == BAD
    # another device has its own context
    assert pc.aclrtSetDevice(1) == 0
    try:
        assert pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC) == (0, 0)
    finally:
        pc.aclrtSetDevice(0)
    pc.set_soc_version("ascend950")
    assert pc.aclrtSetDevice(2) == 0
    try:
        assert pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC) == (0, 1)  # ascend950 default: on
    finally:
        pc.aclrtSetDevice(0)


def test_stream_lifecycle():
    rc, s = pc.aclrtCreateStream()
    assert rc == 0
    assert pc.aclrtSynchronizeStream(s) == 0
    assert pc.aclrtSynchronizeStream(None) == 0      # the default stream
    assert pc.aclrtDestroyStream(s) == 0
    assert pc.aclrtDestroyStream(s) == BAD
    assert pc.aclrtSynchronizeStream(s) == BAD
    assert pc.aclrtDestroyStream(None) == BAD


def test_stream_runs_in_order_and_reports_failures():
    rc, s = pc.aclrtCreateStream()
    order = []
    for i in range(50):
        s.enqueue(lambda i=i: order.append(i))
    s.enqueue(lambda: (161002, "boom"))
    s.enqueue(lambda: order.append("after"))
    rc = pc.aclrtSynchronizeStream(s)
    assert order == list(range(50)) + ["after"]
    assert rc == pc.ACL_ERROR_RT_INTERNAL_ERROR and "161002" in pc.aclGetRecentErrMsg()
    assert pc.aclrtSynchronizeStream(s) == 0          # the failure was reported once
    pc.aclrtDestroyStream(s)


def test_destroy_stream_with_pending_work_waits():
    rc, s = pc.aclrtCreateStream()
    gate = threading.Event()
    done = []
    s.enqueue(lambda: gate.wait(5))
    s.enqueue(lambda: done.append(1))
    threading.Timer(0.05, gate.set).start()
    assert pc.aclrtDestroyStream(s) == 0
    assert done == [1]


def test_finalize_with_live_streams_and_memory():
    rc, s = pc.aclrtCreateStream()
    rc, d = pc.aclrtMalloc(16)
    s.enqueue(lambda: None)
    assert pc.aclFinalize() == 0
    assert s.destroyed and d.freed
    assert pc.aclrtSynchronizeStream(s) == BAD


def test_create_tensor_argument_errors():
    rc, d = pc.aclrtMalloc(64)
    assert pc.aclCreateTensor([2, 3], pc.ACL_FLOAT, [3], 0, pc.ACL_FORMAT_ND, [6], d) is None
    assert "one stride per dim" in pc.aclGetRecentErrMsg()
    assert pc.aclCreateTensor([2, "x"], pc.ACL_FLOAT, [3, 1], 0, pc.ACL_FORMAT_ND, [6], d) is None
    assert pc.aclCreateTensor([2, 3], pc.ACL_FLOAT, [3, 1], 0, pc.ACL_FORMAT_ND, [6], np.zeros(6)) is None
    assert "device pointer" in pc.aclGetRecentErrMsg()
    assert pc.aclCreateTensor([2**64], pc.ACL_FLOAT, [1], 0, pc.ACL_FORMAT_ND, [6], d) is None
    t = pc.aclCreateTensor([2, 3], pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, None, d)
    assert t.strides == (3, 1) and t.storage_dims == (6,)
    assert pc.aclDestroyTensor(t) == 0
    assert pc.aclDestroyTensor(t) == pc.ACLNN_ERR_PARAM_INVALID
    assert pc.aclDestroyTensor(None) == pc.ACLNN_ERR_PARAM_NULLPTR


def test_enums_and_constants():
    assert pc.ACL_FLOAT == 0 and pc.ACL_BF16 == 27 and pc.ACL_HIFLOAT8 == 34 and pc.ACL_FLOAT8_E4M3FN == 36
    assert pc.ACL_FORMAT_ND == 2 and pc.ACL_FORMAT_NCL == 47 and pc.ACL_FORMAT_NCHW == 0
    assert pc.ACLNN_ERR_PARAM_NULLPTR == 161001 and pc.ACLNN_ERR_INNER_NULLPTR == 561103
    assert pc.ACLNN_ERR_RUNTIME_ERROR == 361001 and pc.ACL_SUCCESS == 0 and pc.ACLNN_SUCCESS == 0
    assert (pc.KEEP_DTYPE, pc.ALLOW_FP32_DOWN_PRECISION, pc.USE_FP16, pc.USE_HF32) == (0, 1, 2, 3)
    assert pc.aclDataType.ACL_COMPLEX128 == 17 and pc.aclFormat.ACL_FORMAT_FRACTAL_NZ == 29
    assert pc.ACL_OPT_DETERMINISTIC == 0 and pc.ACL_MEM_MALLOC_HUGE_FIRST == 0
    for name in pc.__all__:
        assert hasattr(pc, name), name
