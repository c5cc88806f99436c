"""A long call returns to Python soon after SIGINT (KeyboardInterrupt), on every accumulation form and thread
count; a cancel flag set from another thread stops a kernel call the same way (docs/reliability.md,
"Interrupts")."""
import os
import signal
import threading
import time

import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc._kernels import _conv_tbc as K

DELAY = 0.25      # seconds before the signal
BOUND = 0.5       # the promise: back in Python within about this much after the signal


@pytest.fixture(scope="module")
def long_problem():
    """~480 GFLOP of backward work (~270 forward) in small arrays (wide taps): seconds on 2 cores even with the
    AVX-512 kernels (200-300 GFLOP/s), far longer than DELAY + BOUND; a call only runs until it is interrupted."""
    rng = np.random.default_rng(0)
    T, B, C, Kt = 2048, 16, 256, 64
    x = rng.standard_normal((T, B, C), dtype=np.float32)
    w = rng.standard_normal((Kt, C, C), dtype=np.float32)
    dy = rng.standard_normal((T - Kt + 1, B, C), dtype=np.float32)
    return dy, x, w, np.zeros(C, np.float32)


@pytest.fixture(autouse=True)
def sigint_raises():
    """Python's own SIGINT handler for the test: a process started as a background job of a non-interactive shell
    (`pytest ... &`) inherits SIGINT ignored, and Python then leaves it ignored, so no KeyboardInterrupt could come."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, old)


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
@pytest.mark.parametrize("accumulation", ["cube", "sequential"])
@pytest.mark.parametrize("threads", [1, 2])
def test_sigint_interrupts_a_long_call(long_problem, accumulation, threads):
    timer = threading.Timer(DELAY, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pc.conv_tbc_backward(*long_problem, 0, num_threads=threads, accumulation=accumulation)
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < DELAY + BOUND
    # the library is usable afterwards
    small = [a[:, :2] if a.ndim == 3 else a for a in long_problem]
    pc.conv_tbc_backward(small[0][:8], small[1][:8 + 63], long_problem[2], long_problem[3], 0)


def test_cancel_flag_stops_a_kernel_call(long_problem):
    dy, x, w, b = long_problem
    shape = (x.shape[0], x.shape[1], x.shape[2], w.shape[2], w.shape[0], 0)
    mode = (0, 11, 0, 0, False, 1, 8, 0)
    n = K.workspace_size(shape, mode, (0,) * 6, 2)
    ws = np.zeros(n, np.uint8)
    outs = [np.zeros(x.shape, np.float32), np.zeros(w.shape, np.float32), np.zeros(w.shape[2], np.float32)]
    flag = np.zeros(1, np.int32)
    threading.Timer(DELAY, lambda: flag.__setitem__(0, 1)).start()
    t0 = time.perf_counter()
    with pytest.raises(K.Cancelled):
        K.run_arrays(dy, x, w, *outs, (0,) * 6, shape, mode, ws, 2, None, flag)
    assert time.perf_counter() - t0 < DELAY + BOUND
    with pytest.raises(ValueError):
        K.run_arrays(dy, x, w, *outs, (0,) * 6, shape, mode, ws, 2, None, np.zeros(1, np.float64))


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
def test_sigint_in_synchronize_cancels_the_stream_work(long_problem):
    """CANN layer: Ctrl-C while aclrtSynchronizeStream waits stops the running task at its next kernel boundary,
    drops the queued ones, re-raises KeyboardInterrupt; the next synchronize reports the cancellation, and the
    stream is usable again."""
    from conftest import device_tensor
    dy, x, w, b = long_problem
    ins = [device_tensor(a)[0] for a in (dy, x, w, b)]
    outs = [device_tensor(np.zeros_like(a))[0] for a in (x, w, b)]
    rc, ws_size, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(*ins, 0, 0, *outs)
    assert rc == 0, pc.aclGetRecentErrMsg()
    assert pc.aclSetAclOpExecutorRepeatable(ex) == 0
    rc, ws = pc.aclrtMalloc(ws_size)
    rc, stream = pc.aclrtCreateStream()
    for _ in range(2):                       # one running, one queued
        assert pc.aclnnConvTbcBackward(ws, ws_size, ex, stream) == 0
    timer = threading.Timer(DELAY, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pc.aclrtSynchronizeStream(stream)
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < DELAY + BOUND
    assert stream.idle()
    assert pc.aclrtSynchronizeStream(stream) != 0 and "cancelled" in pc.aclGetRecentErrMsg()
    assert pc.aclrtSynchronizeStream(stream) == 0
    # usable again: a small problem on the same stream
    sdy, sx = dy[:4, :1, :3].copy(), x[:67, :1, :2].copy()       # T_in 67, K 64: T_out 4
    sw, sb = w[:, :2, :3].copy(), b[:3].copy()
    sins = [device_tensor(a)[0] for a in (sdy, sx, sw, sb)]
    souts = [device_tensor(np.zeros_like(a))[0] for a in (sx, sw, sb)]
    rc, n2, ex2 = pc.aclnnConvTbcBackwardGetWorkspaceSize(*sins, 0, 0, *souts)
    assert rc == 0, pc.aclGetRecentErrMsg()
    ws2 = pc.aclrtMalloc(n2)[1] if n2 else None
    assert pc.aclnnConvTbcBackward(ws2, n2, ex2, stream) == 0
    assert pc.aclrtSynchronizeStream(stream) == 0
    assert pc.aclrtDestroyStream(stream) == 0


@pytest.mark.skipif(threading.current_thread() is not threading.main_thread(), reason="signals need the main thread")
@pytest.mark.parametrize("accumulation", ["cube", "sequential"])
def test_sigint_interrupts_a_long_forward_call(long_problem, accumulation):
    _, x, w, b = long_problem
    timer = threading.Timer(DELAY, lambda: os.kill(os.getpid(), signal.SIGINT))
    t0 = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            pc.conv_tbc(x, w, b, 0, num_threads=2, accumulation=accumulation)
    finally:
        timer.cancel()
    assert time.perf_counter() - t0 < DELAY + BOUND
    np.testing.assert_array_equal(pc.conv_tbc(x[:64, :1], w, b, 0).shape, (1, 1, 256))   # usable afterwards
