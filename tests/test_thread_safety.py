"""Thread safety (issue 5, docs/reliability.md "Thread safety"): both phases from many Python threads at once,
the per-thread last error message, and the per-context (per-device) sys-param option."""
import threading

import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from conftest import acl_problem, make_problem, phase1, read_back

TIMEOUT = 60
N_THREADS = 8


def run_threads(fn, n=N_THREADS):
    """Start n threads on fn(i) together (a barrier), join them with a bound, re-raise the first error."""
    barrier = threading.Barrier(n)
    errors, results = [], [None] * n

    def body(i):
        try:
            barrier.wait(TIMEOUT)
            results[i] = fn(i)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,), daemon=True) for i in range(n)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(TIMEOUT)
    assert not any(th.is_alive() for th in threads), "a thread did not finish (hang)"
    if errors:
        raise errors[0]
    return results


def bits(arrs):
    return [np.ascontiguousarray(a).view(np.uint8).tobytes() for a in arrs]


def outputs(ptrs, x, w, b):
    return (read_back(ptrs["gradInput"], x.shape, x.dtype), read_back(ptrs["gradWeight"], w.shape, w.dtype),
            read_back(ptrs["gradBias"], b.shape, b.dtype))


@pytest.fixture
def deterministic():
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0


DTYPES = (np.float32, np.float16, ml_dtypes.bfloat16)


def test_both_phases_from_many_threads(deterministic):
    """8 threads x 30 iterations of phase 1 + phase 2 + synchronize, mixed sizes, dtypes, cubeMathTypes and
    streams (the default one shared by all threads, or the thread's own), with invalid calls interleaved:
    every valid call gives bitwise the single-threaded result, every invalid one its status."""
    problems = {}
    for i in range(N_THREADS):
        for j in range(30):
            seed = i * 30 + j
            shape = dict(T_in=40, B=4, Cin=40, Cout=48, K=3, pad=1) if seed % 4 == 0 else \
                dict(T_in=4 + seed % 9, B=1 + seed % 3, Cin=1 + seed % 6, Cout=2 + seed % 5, K=1 + seed % 3,
                     pad=seed % 3)
            problems[(i, j)] = (make_problem(seed=seed, dtype=DTYPES[seed % 3], **shape), shape["pad"], seed % 4)
    want = {k: bits(pc.conv_tbc_backward(*p, pad, cube_math_type=cube, deterministic=True))
            for k, (p, pad, cube) in problems.items()}

    def work(i):
        own = pc.aclrtCreateStream()[1]
        for j in range(30):
            p, pad, cube = problems[(i, j)]
            t, ptrs = acl_problem(*p)
            if j % 7 == 3:                      # an invalid call between the valid ones
                rc, ws_size, ex = phase1(t, 256 + i, cube)
                assert (rc, ws_size, ex) == (pc.ACLNN_ERR_PARAM_INVALID, 0, None)
                assert f"pad is {256 + i};" in pc.aclGetRecentErrMsg()
            rc, ws_size, ex = phase1(t, pad, cube)
            assert rc == 0, pc.aclGetRecentErrMsg()
            ws = pc.aclrtMalloc(ws_size)[1] if ws_size else None
            stream = own if j % 2 else None
            assert pc.aclnnConvTbcBackward(ws, ws_size, ex, stream) == 0, pc.aclGetRecentErrMsg()
            assert pc.aclrtSynchronizeStream(stream) == 0, pc.aclGetRecentErrMsg()
            assert bits(outputs(ptrs, *p[1:])) == want[(i, j)], (i, j)
            pc.aclrtFree(ws) if ws is not None else None
        assert pc.aclrtDestroyStream(own) == 0

    run_threads(work)


def test_phase1_on_shared_descriptors_from_many_threads(deterministic):
    """Descriptors are only read by phase 1: many threads planning the same seven descriptors at once all get
    an executor; run one after the other, each gives the same bits."""
    p = make_problem(T_in=32, B=4, Cin=24, Cout=24, K=3, pad=1)
    t, ptrs = acl_problem(*p)
    execs = run_threads(lambda i: phase1(t, 1, i % 4))
    assert all(rc == 0 and ex is not None for rc, _, ex in execs)
    for i, (rc, ws_size, ex) in enumerate(execs):
        ws = pc.aclrtMalloc(ws_size)[1] if ws_size else None
        assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0
        assert pc.aclrtSynchronizeStream(None) == 0
        assert bits(outputs(ptrs, *p[1:])) == bits(pc.conv_tbc_backward(*p, 1, cube_math_type=i % 4,
                                                                        deterministic=True))


def test_single_use_executor_raced_by_many_threads():
    """Eight threads call phase 2 with the same single-use executor at once: exactly one runs it."""
    p = make_problem(T_in=32, B=4, Cin=24, Cout=24, K=3, pad=1)
    t, ptrs = acl_problem(*p)
    rc, ws_size, ex = phase1(t, 1)
    wss = [pc.aclrtMalloc(ws_size)[1] for _ in range(N_THREADS)]

    def go(i):
        rc = pc.aclnnConvTbcBackward(wss[i], ws_size, ex, None)
        return rc, pc.aclGetRecentErrMsg() if rc else None

    results = run_threads(go)
    assert pc.aclrtSynchronizeStream(None) == 0
    assert sorted(rc for rc, _ in results) == [0] + [pc.ACLNN_ERR_PARAM_INVALID] * (N_THREADS - 1)
    assert all("already used" in msg for rc, msg in results if rc)


def test_numpy_layer_from_many_threads():
    problems = [make_problem(seed=s, T_in=48, B=4, Cin=32, Cout=32, K=3, pad=1, dtype=DTYPES[s % 3])
                for s in range(N_THREADS)]
    want = [bits(pc.conv_tbc_backward(*p, 1, deterministic=True, num_threads=1)) for p in problems]

    def work(i):
        for r in range(10):
            got = pc.conv_tbc_backward(*problems[(i + r) % N_THREADS], 1, deterministic=True, num_threads=1 + r % 2)
            assert bits(got) == want[(i + r) % N_THREADS]
        with pytest.raises(pc.AclnnError) as e:
            pc.conv_tbc_backward(*problems[i], 300 + i)
        assert f"pad is {300 + i};" in str(e.value)

    run_threads(work)


def test_memory_calls_from_many_threads():
    def work(i):
        host = np.arange(1000, dtype=np.float32) * (i + 1)
        for _ in range(50):
            rc, d = pc.aclrtMalloc(host.nbytes)
            assert rc == 0
            assert pc.aclrtMemcpy(d, host.nbytes, host, host.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
            back = np.zeros_like(host)
            assert pc.aclrtMemcpy(back, back.nbytes, d, host.nbytes, pc.ACL_MEMCPY_DEVICE_TO_HOST) == 0
            assert np.array_equal(back, host)
            assert pc.aclrtFree(d) == 0
            assert pc.aclrtFree(d) == pc.ACL_ERROR_INVALID_PARAM

    run_threads(work)


# ---- the last error message is per thread -----------------------------------------------------------------
def test_last_error_message_is_per_thread():
    """Each thread fails with its own arguments, in lock step with the others; each reads back only its own
    message, every round; a thread that never failed reads None; success does not clear a message."""
    p = make_problem()
    t, _ = acl_problem(*p)
    rounds = 20
    step = threading.Barrier(N_THREADS)

    def work(i):
        if i == 0:
            for _ in range(rounds):
                step.wait(TIMEOUT)
                assert pc.aclrtMalloc(16)[0] == 0
                step.wait(TIMEOUT)
                assert pc.aclGetRecentErrMsg() is None
            return
        for r in range(rounds):
            step.wait(TIMEOUT)
            kind = (i + r) % 3
            if kind == 0:
                assert phase1(t, 256 + 100 * i + r)[0] == pc.ACLNN_ERR_PARAM_INVALID
                mine = f"pad is {256 + 100 * i + r};"
            elif kind == 1:
                assert pc.aclrtSetDevice(1000 + 100 * i + r) == pc.ACL_ERROR_INVALID_PARAM
                mine = f"device_id is {1000 + 100 * i + r}"
            else:
                assert pc.aclrtMalloc(-(100 * i + r) - 1)[0] == pc.ACL_ERROR_INVALID_PARAM
                mine = f"size is {-(100 * i + r) - 1};"
            step.wait(TIMEOUT)                 # every thread has failed now: read back our own message
            assert mine in pc.aclGetRecentErrMsg(), (i, r, pc.aclGetRecentErrMsg())
            assert phase1(t, 1)[0] == 0         # a success leaves the message in place
            assert mine in pc.aclGetRecentErrMsg()

    run_threads(work)


def test_stream_failure_message_goes_to_the_synchronising_thread():
    rc, stream = pc.aclrtCreateStream()
    t, ptrs = acl_problem(*make_problem(T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1))
    ev = threading.Event()
    stream.enqueue(lambda: ev.wait(TIMEOUT))
    rc, ws_size, ex = phase1(t, 1)
    ws = pc.aclrtMalloc(ws_size)[1]
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, stream) == 0
    pc.aclrtFree(ptrs["weight"])
    ev.set()
    before = pc.aclGetRecentErrMsg()
    (rc, msg), = run_threads(lambda i: (pc.aclrtSynchronizeStream(stream), pc.aclGetRecentErrMsg()), n=1)
    assert rc == pc.ACL_ERROR_RT_INTERNAL_ERROR and "weight" in msg and "161002" in msg
    assert pc.aclGetRecentErrMsg() == before          # this thread's message did not change
    assert pc.aclrtDestroyStream(stream) == 0


# ---- the sys-param option is per context (= per device) ---------------------------------------------------
def test_deterministic_option_is_per_context():
    """docs/cann.md "Contexts": a context is per device; aclrtSetDevice picks the calling thread's device
    (0 until set); the option set on a device's context is seen by every thread using that device, by no
    other device, and phase 1 reads it from the calling thread's context."""
    p = make_problem(T_in=16, B=2, Cin=8, Cout=8, K=3, pad=1)
    t, _ = acl_problem(*p)
    set_on_1 = threading.Event()

    def setter(_):
        assert pc.aclrtSetDevice(1) == 0
        assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0
        set_on_1.set()
        return pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC), phase1(t, 1)[2].plan.deterministic

    def reader(device):
        def f(_):
            assert set_on_1.wait(TIMEOUT)
            if device is not None:
                assert pc.aclrtSetDevice(device) == 0
            return pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC), phase1(t, 1)[2].plan.deterministic
        return f

    (r_set,) = run_threads(setter, n=1)
    assert r_set == ((0, 1), True)
    (r1,) = run_threads(reader(1), n=1)             # another thread on device 1: shares the context
    (r0,) = run_threads(reader(None), n=1)          # a thread that never set a device: device 0
    (r2,) = run_threads(reader(2), n=1)
    assert r1 == ((0, 1), True)
    assert r0 == ((0, 0), False) and r2 == ((0, 0), False)
    assert pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC) == (0, 0)   # this thread: device 0
    # the value is read at phase 1: an executor keeps what its phase 1 saw
    rc, _, ex_off = phase1(t, 1)
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0
    rc, _, ex_on = phase1(t, 1)
    assert (ex_off.plan.deterministic, ex_on.plan.deterministic) == (False, True)
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 0) == 0
    assert phase1(t, 1)[2].plan.deterministic is False
    # many threads switching devices and options at once: each sees its own device's value
    def flip(i):
        dev = 3 + i % 4
        assert pc.aclrtSetDevice(dev) == 0
        for r in range(50):
            if i < 4:
                assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, (dev + r) % 2) == 0
            rc, v = pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC)
            assert rc == 0 and v in (0, 1)
        return dev

    run_threads(flip)
    for dev in range(3, 7):                          # the last value each device's setter wrote
        (v,) = run_threads(lambda i, dev=dev: (pc.aclrtSetDevice(dev), pc.aclrtCtxGetSysParamOpt(0)[1])[1], n=1)
        assert v == (dev + 49) % 2


def test_profile_default_applies_to_unset_contexts():
    pc.set_soc_version("ascend950")
    p = make_problem()
    t, _ = acl_problem(*p)

    def read(dev):
        assert pc.aclrtSetDevice(dev) == 0
        return pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC)[1], phase1(t, 1)[2].plan.deterministic

    assert run_threads(lambda i: read(i % 8)) == [(1, True)] * N_THREADS
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 0) == 0      # device 0 opts out
    assert phase1(t, 1)[2].plan.deterministic is False
    assert run_threads(lambda i: read(5), n=1) == [(1, True)]
