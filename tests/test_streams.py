"""Streams that are streams (issue 5, docs/reliability.md "Streams").

Everything asynchronous is observed, not assumed: a stream is blocked with a gated task (``stream.enqueue``)
so that the state "enqueued but not run" can be inspected, and concurrency is shown by tasks on two streams
that can only finish if they run at the same time.  Every wait is bounded, so a hang fails instead of
blocking the suite.
"""
import os
import threading
import time

import numpy as np
import pytest

import pyconvtbc as pc
from conftest import acl_problem, make_problem, phase1, read_back

TIMEOUT = 60
SENTINEL = 0xFF           # output bytes pre-filled with this: all-ones is a NaN in every float format


def bounded(fn, timeout=TIMEOUT):
    """Run fn() in a helper thread; fail (instead of hanging) if it does not return within ``timeout``.
    The helper thread's last error message (messages are per thread) is left in ``bounded.msg``."""
    box = {}

    def run():
        try:
            box["value"] = fn()
        except BaseException as e:  # re-raised in the test's thread
            box["error"] = e
        bounded.msg = pc.aclGetRecentErrMsg()

    th = threading.Thread(target=run, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), f"{getattr(fn, '__name__', fn)} did not return within {timeout} s"
    if "error" in box:
        raise box["error"]
    return box.get("value")


def gate(stream):
    """Block ``stream`` (an aclrtStream) with a task that waits for the returned event."""
    ev, started = threading.Event(), threading.Event()

    def blocker():
        started.set()
        ev.wait(TIMEOUT)

    stream.enqueue(blocker)
    assert started.wait(TIMEOUT), "the gate task never started"
    return ev


def stream_obj(stream):
    return pc.runtime.resolve_stream(stream)


def enqueue(t, pad, stream, cube=0):
    """Phase 1 + workspace + phase 2 (no synchronisation).  Returns the workspace pointer."""
    rc, ws_size, ex = phase1(t, pad, cube)
    assert rc == 0, pc.aclGetRecentErrMsg()
    ws = None
    if ws_size:
        rc, ws = pc.aclrtMalloc(ws_size)
        assert rc == 0
    rc = pc.aclnnConvTbcBackward(ws, ws_size, ex, stream)
    assert rc == 0, pc.aclGetRecentErrMsg()
    return ws


def fill(ptr, nbytes, value=SENTINEL):
    assert pc.aclrtMemcpy(ptr, nbytes, np.full(nbytes, value, np.uint8), nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0


def outputs(ptrs, dy, x, w, b):
    return (read_back(ptrs["gradInput"], x.shape, x.dtype), read_back(ptrs["gradWeight"], w.shape, w.dtype),
            read_back(ptrs["gradBias"], b.shape, b.dtype))


def expected(dy, x, w, b, pad, cube=0):
    return pc.conv_tbc_backward(dy, x, w, b, pad, cube_math_type=cube, deterministic=True)


def same_bits(got, want):
    return all(np.array_equal(np.ascontiguousarray(g).view(np.uint8), np.ascontiguousarray(e).view(np.uint8))
               for g, e in zip(got, want))


def untouched(ptrs, names=("gradInput", "gradWeight", "gradBias")):
    for n in names:
        size = ptrs[n].nbytes
        host = np.zeros(size, np.uint8)
        assert pc.aclrtMemcpy(host, size, ptrs[n], size, pc.ACL_MEMCPY_DEVICE_TO_HOST) == 0
        if not (host == SENTINEL).all():
            return False
    return True


def sentinel_problem(seed=0, **kw):
    dy, x, w, b = make_problem(seed=seed, **kw)
    t, ptrs = acl_problem(dy, x, w, b)
    for n in ("gradInput", "gradWeight", "gradBias"):
        fill(ptrs[n], ptrs[n].nbytes)
    return (dy, x, w, b), t, ptrs


@pytest.fixture
def deterministic():
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0
    yield


# ---- asynchronous enqueue --------------------------------------------------------------------------------
@pytest.mark.parametrize("which", ["created", "default"])
def test_call_returns_before_its_work_runs(which, deterministic):
    """Observed: after aclnnConvTbcBackward returns 0 the outputs are untouched (the stream is blocked by
    an earlier task); aclrtSynchronizeStream then completes the work."""
    if which == "created":
        rc, stream = pc.aclrtCreateStream()
        assert rc == 0
    else:
        stream = None                                     # None is the default stream
    (dy, x, w, b), t, ptrs = sentinel_problem(T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1)
    ev = gate(stream_obj(stream))
    enqueue(t, 1, stream)
    assert not stream_obj(stream).idle()
    assert untouched(ptrs), "the work ran before the stream reached it"
    ev.set()
    assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == 0
    assert same_bits(outputs(ptrs, dy, x, w, b), expected(dy, x, w, b, 1))
    if which == "created":
        assert pc.aclrtDestroyStream(stream) == 0


def test_large_call_returns_before_it_completes(deterministic):
    """Observed without a gate: a large call (~10^10 flops) returns at once, and right after the return the
    outputs are not yet the result; synchronisation completes them.  (A stalled test machine could run the
    whole call before this thread looks: three attempts, one observation is enough.)"""
    os.environ["PYCONVTBC_NUM_THREADS"] = "2"
    try:
        rc, stream = pc.aclrtCreateStream()
        (dy, x, w, b), t, ptrs = sentinel_problem(T_in=128, B=32, Cin=384, Cout=384, K=3, pad=1)
        want = expected(dy, x, w, b, 1)
        observed = []
        for attempt in range(3):
            for n in ("gradInput", "gradWeight", "gradBias"):
                fill(ptrs[n], ptrs[n].nbytes)
            t0 = time.perf_counter()
            enqueue(t, 1, stream)
            returned = time.perf_counter() - t0
            early = outputs(ptrs, dy, x, w, b)
            assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == 0
            total = time.perf_counter() - t0
            assert same_bits(outputs(ptrs, dy, x, w, b), want)
            observed.append((returned, total, not same_bits(early, want)))
            if observed[-1][2]:
                break
        assert any(o[2] for o in observed), f"never saw an incomplete result right after the return: {observed}"
        assert pc.aclrtDestroyStream(stream) == 0
    finally:
        os.environ.pop("PYCONVTBC_NUM_THREADS", None)


def test_tiny_call_on_idle_stream_runs_inline_and_on_busy_stream_queues(deterministic):
    rc, stream = pc.aclrtCreateStream()
    (dy, x, w, b), t, ptrs = sentinel_problem()          # a few hundred flops
    enqueue(t, 1, stream)
    assert stream._thread is None                         # ran in this thread: no worker was ever started
    assert same_bits(outputs(ptrs, dy, x, w, b), expected(dy, x, w, b, 1))   # complete before any sync
    # the same tiny call on a busy stream waits its turn
    (dy, x, w, b), t, ptrs = sentinel_problem(seed=1)
    ev = gate(stream)
    enqueue(t, 1, stream)
    assert untouched(ptrs)
    ev.set()
    assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == 0
    assert same_bits(outputs(ptrs, dy, x, w, b), expected(dy, x, w, b, 1))
    assert pc.aclrtDestroyStream(stream) == 0


def test_kernels_run_without_the_gil():
    """While a stream runs a long call, another Python thread keeps running (no long gap between its ticks)."""
    os.environ["PYCONVTBC_NUM_THREADS"] = "1"
    try:
        rc, stream = pc.aclrtCreateStream()
        dy, x, w, b = make_problem(T_in=128, B=32, Cin=256, Cout=256, K=3, pad=1)
        t, ptrs = acl_problem(dy, x, w, b)
        ticks, stop = [], threading.Event()

        def ticker():
            while not stop.is_set():
                ticks.append(time.perf_counter())
                time.sleep(0.0005)

        th = threading.Thread(target=ticker, daemon=True)
        th.start()
        t0 = time.perf_counter()
        for _ in range(3):
            enqueue(t, 1, stream)
        assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == 0
        duration = time.perf_counter() - t0
        stop.set()
        th.join(TIMEOUT)
        window = [tk for tk in ticks if t0 <= tk <= t0 + duration]
        gaps = np.diff(window) if len(window) > 1 else np.array([duration])
        assert len(window) > 10 and gaps.max() < max(0.5 * duration, 0.05), (duration, len(window), gaps.max())
        assert pc.aclrtDestroyStream(stream) == 0
    finally:
        os.environ.pop("PYCONVTBC_NUM_THREADS", None)


# ---- order and concurrency -------------------------------------------------------------------------------
def test_work_on_one_stream_runs_in_order(deterministic):
    """Ten calls write the same outputs from different inputs; a task queued between two of them records the
    outputs: it sees exactly the earlier call's result, and the final state is the last call's."""
    rc, stream = pc.aclrtCreateStream()
    shape = dict(T_in=40, B=4, Cin=32, Cout=32, K=3, pad=1)
    problems = [make_problem(seed=s, **shape) for s in range(10)]
    t0, ptrs0 = acl_problem(*problems[0])
    outs = {n: t0[n] for n in ("gradInput", "gradWeight", "gradBias")}
    ev = gate(stream)
    seen = {}
    for i, (dy, x, w, b) in enumerate(problems):
        t, _ = acl_problem(dy, x, w, b) if i else (t0, ptrs0)
        t.update(outs)
        enqueue(t, 1, stream, cube=i % 4)
        if i == 4:
            stream.enqueue(lambda: seen.update(mid=outputs(ptrs0, dy, x, w, b)))
    assert untouched_state_is_initial(ptrs0)
    ev.set()
    assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == 0
    assert same_bits(seen["mid"], expected(*problems[4], 1, cube=4 % 4))
    assert same_bits(outputs(ptrs0, *problems[9]), expected(*problems[9], 1, cube=9 % 4))
    assert pc.aclrtDestroyStream(stream) == 0


def untouched_state_is_initial(ptrs):
    """acl_problem zero-fills outputs: nothing has been written yet."""
    for n in ("gradInput", "gradWeight", "gradBias"):
        host = np.ones(ptrs[n].nbytes, np.uint8)
        pc.aclrtMemcpy(host, host.size, ptrs[n], host.size, pc.ACL_MEMCPY_DEVICE_TO_HOST)
        if host.any():
            return False
    return True


def test_streams_run_concurrently_rendezvous():
    """Two tasks on two streams that each wait for the other to have started: they can only both finish if
    the streams run at the same time."""
    streams = [pc.aclrtCreateStream()[1] for _ in range(2)]
    started = [threading.Event(), threading.Event()]
    met = []

    def task(i):
        started[i].set()
        met.append(started[1 - i].wait(TIMEOUT))

    for i, s in enumerate(streams):
        s.enqueue(lambda i=i: task(i))
    for s in streams:
        assert bounded(lambda s=s: pc.aclrtSynchronizeStream(s)) == 0
    assert met == [True, True]
    for s in streams:
        assert pc.aclrtDestroyStream(s) == 0


def test_a_blocked_stream_does_not_block_another(deterministic):
    """Stream A is blocked until a task on stream B (queued after a real call) releases it: B's call runs
    and completes while A is blocked."""
    rc, a = pc.aclrtCreateStream()
    rc, b_stream = pc.aclrtCreateStream()
    (dy, x, w, b), t, ptrs = sentinel_problem(T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1)
    release, a_blocked = threading.Event(), threading.Event()
    a.enqueue(lambda: (a_blocked.set(), release.wait(TIMEOUT)))
    assert a_blocked.wait(TIMEOUT)
    gb = gate(b_stream)
    enqueue(t, 1, b_stream)
    state = {}
    b_stream.enqueue(lambda: (state.update(a_busy=not a.idle(), out=outputs(ptrs, dy, x, w, b)), release.set()))
    gb.set()
    assert bounded(lambda: pc.aclrtSynchronizeStream(a)) == 0
    assert bounded(lambda: pc.aclrtSynchronizeStream(b_stream)) == 0
    assert state["a_busy"], "stream A was not blocked while stream B ran"
    assert same_bits(state["out"], expected(dy, x, w, b, 1))
    for s in (a, b_stream):
        assert pc.aclrtDestroyStream(s) == 0


def test_8_threads_4_streams_25_calls_each_match_sequential(deterministic):
    """8 Python threads each enqueue 25 calls on each of 4 shared streams (800 calls, mixed sizes, dtypes and
    cubeMathTypes, tiny ones inline when a stream happens to be idle): bitwise the sequential results."""
    import ml_dtypes
    streams = [pc.aclrtCreateStream()[1] for _ in range(4)]
    dtypes = (np.float32, np.float16, ml_dtypes.bfloat16)
    jobs = {}
    for th in range(8):
        for si in range(4):
            for j in range(25):
                seed = (th * 4 + si) * 25 + j
                big = seed % 5 == 0
                shape = dict(T_in=48, B=4, Cin=48, Cout=40, K=3, pad=1) if big else \
                    dict(T_in=5 + seed % 7, B=1 + seed % 3, Cin=2 + seed % 5, Cout=3 + seed % 4, K=1 + seed % 3,
                         pad=seed % 2)
                problem = make_problem(seed=seed, dtype=dtypes[seed % 3], **shape)
                jobs[(th, si, j)] = (problem, shape["pad"], seed % 4, acl_problem(*problem))
    barrier = threading.Barrier(8)
    errors = []

    def worker(th):
        try:
            barrier.wait(TIMEOUT)
            for j in range(25):
                for si in range(4):
                    problem, pad, cube, (t, _) = jobs[(th, si, j)]
                    enqueue(t, pad, streams[si], cube)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(TIMEOUT)
    assert not any(th.is_alive() for th in threads) and not errors, errors
    for s in streams:
        assert bounded(lambda s=s: pc.aclrtSynchronizeStream(s)) == 0
    for key, (problem, pad, cube, (t, ptrs)) in jobs.items():           # sequential, one call at a time
        assert same_bits(outputs(ptrs, *problem), expected(*problem, pad, cube)), key
    for s in streams:
        assert pc.aclrtDestroyStream(s) == 0


# ---- failures on a stream ----------------------------------------------------------------------------------
@pytest.mark.parametrize("what", ["gradInput", "self", "workspace"])
def test_buffer_freed_before_the_work_runs(what):
    """A buffer freed between enqueue and execution: the task fails without touching memory and
    aclrtSynchronizeStream reports 507000 once, with the task's 161002 in the message."""
    rc, stream = pc.aclrtCreateStream()
    dy, x, w, b = make_problem(T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1)
    t, ptrs = acl_problem(dy, x, w, b)
    ev = gate(stream)
    ws = enqueue(t, 1, stream)
    views = {n: ptrs[n].array() for n in ("gradInput", "gradWeight", "gradBias")}   # keep the memory
    ws_view = ws.array()
    assert pc.aclrtFree(ws if what == "workspace" else ptrs[what]) == 0
    ev.set()
    assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == pc.ACL_ERROR_RT_INTERNAL_ERROR
    msg = bounded.msg
    assert "161002" in msg and "freed" in msg and "aclrtSynchronizeStream" in msg, msg
    for n, v in views.items():
        assert not v.any(), f"{n} was written by a task that found a freed buffer"
    assert not ws_view.any(), "the workspace was written by a task that found a freed buffer"
    assert pc.aclrtSynchronizeStream(stream) == 0                    # reported once
    # the stream is still usable
    dy, x, w, b = make_problem(seed=3)
    t, ptrs = acl_problem(dy, x, w, b)
    enqueue(t, 1, stream)
    assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == 0
    assert pc.aclrtDestroyStream(stream) == 0


def test_a_failing_task_does_not_stop_later_work(deterministic):
    rc, stream = pc.aclrtCreateStream()
    ev = gate(stream)
    dy, x, w, b = make_problem(T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1)
    t1, p1 = acl_problem(dy, x, w, b)
    enqueue(t1, 1, stream)
    t2, p2 = acl_problem(dy, x, w, b)
    enqueue(t2, 1, stream)
    pc.aclrtFree(p1["gradBias"])
    ev.set()
    assert bounded(lambda: pc.aclrtSynchronizeStream(stream)) == pc.ACL_ERROR_RT_INTERNAL_ERROR
    assert same_bits(outputs(p2, dy, x, w, b), expected(dy, x, w, b, 1))
    assert pc.aclrtDestroyStream(stream) == 0


# ---- destroy and finalize --------------------------------------------------------------------------------
def test_destroy_stream_with_pending_work_runs_it_first(deterministic):
    rc, stream = pc.aclrtCreateStream()
    ev = gate(stream)
    problems = [make_problem(seed=s, T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1) for s in range(3)]
    acl = [acl_problem(*p) for p in problems]
    for t, _ in acl:
        enqueue(t, 1, stream)
    threading.Timer(0.05, ev.set).start()
    assert bounded(lambda: pc.aclrtDestroyStream(stream)) == 0
    for p, (t, ptrs) in zip(problems, acl):
        assert same_bits(outputs(ptrs, *p), expected(*p, 1))
    # a destroyed stream is an error status everywhere, never a crash
    t, _ = acl_problem(*problems[0])
    rc, ws_size, ex = phase1(t, 1)
    rc, ws = pc.aclrtMalloc(ws_size)
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, stream) == pc.ACLNN_ERR_PARAM_INVALID
    assert pc.aclrtSynchronizeStream(stream) == pc.ACL_ERROR_INVALID_PARAM
    assert pc.aclrtDestroyStream(stream) == pc.ACL_ERROR_INVALID_PARAM


def test_destroy_stream_reports_a_pending_failure():
    rc, stream = pc.aclrtCreateStream()
    ev = gate(stream)
    t, ptrs = acl_problem(*make_problem(T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1))
    enqueue(t, 1, stream)
    pc.aclrtFree(ptrs["input"])
    ev.set()
    assert bounded(lambda: pc.aclrtDestroyStream(stream)) == pc.ACL_ERROR_RT_INTERNAL_ERROR
    assert "aclrtDestroyStream" in bounded.msg and "161002" in bounded.msg, bounded.msg


def test_two_threads_destroying_one_stream_exactly_one_succeeds(monkeypatch):
    """reliability.md: a destroyed stream gets 100000 from destroy, and destroy may come from any thread.  Two
    threads destroying one stream with pending work at the same moment: one gets 0 (after the work ran), the
    other 100000 (the check and the marking are one step).  The drain is slowed down, so that the second call
    comes while the first is still inside it."""
    from pyconvtbc import runtime
    real = runtime.aclrtStream._destroy

    def slow_destroy(self):
        time.sleep(0.02)
        return real(self)

    monkeypatch.setattr(runtime.aclrtStream, "_destroy", slow_destroy)
    for _ in range(5):
        rc, stream = pc.aclrtCreateStream()
        ev = gate(stream)
        barrier, out = threading.Barrier(2), []

        def destroy():
            barrier.wait(TIMEOUT)
            out.append(pc.aclrtDestroyStream(stream))

        threads = [threading.Thread(target=destroy, daemon=True) for _ in range(2)]
        for th in threads:
            th.start()
        threading.Timer(0.005, ev.set).start()
        for th in threads:
            th.join(TIMEOUT)
        assert sorted(out) == [0, pc.ACL_ERROR_INVALID_PARAM], out


def test_destroy_while_other_threads_enqueue():
    """Destroying a stream that other threads are enqueueing on: every call returns 0 (ran) or 161002
    (stream destroyed), nothing raises or hangs, and the destroy returns."""
    rc, stream = pc.aclrtCreateStream()
    problems = [acl_problem(*make_problem(seed=s, T_in=32, B=4, Cin=32, Cout=32, K=3, pad=1)) for s in range(40)]
    codes, errors = [], []
    go = threading.Event()

    def worker(k):
        try:
            go.wait(TIMEOUT)
            for t, _ in problems[k::4]:
                rc, ws_size, ex = phase1(t, 1)
                ws = pc.aclrtMalloc(ws_size)[1] if ws_size else None
                codes.append(pc.aclnnConvTbcBackward(ws, ws_size, ex, stream))
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in range(4)]
    for th in threads:
        th.start()
    go.set()
    time.sleep(0.002)
    assert bounded(lambda: pc.aclrtDestroyStream(stream)) in (0, pc.ACL_ERROR_RT_INTERNAL_ERROR)
    for th in threads:
        th.join(TIMEOUT)
    assert not errors and not any(th.is_alive() for th in threads)
    assert set(codes) <= {0, pc.ACLNN_ERR_PARAM_INVALID} and len(codes) == 40


def test_finalize_with_live_streams_and_pending_work(deterministic):
    """aclFinalize runs the pending work of every stream (the default one too), destroys the streams and frees
    all device memory; afterwards the old handles give error statuses and new ones work."""
    streams = [pc.aclrtCreateStream()[1] for _ in range(3)]
    gates = [gate(s) for s in streams] + [gate(stream_obj(None))]
    problems = [make_problem(seed=s, T_in=64, B=8, Cin=64, Cout=64, K=3, pad=1) for s in range(4)]
    acl = [acl_problem(*p) for p in problems]
    views = []
    for (t, ptrs), s in zip(acl, streams + [None]):
        enqueue(t, 1, s)
        views.append({n: ptrs[n].array() for n in ("gradInput", "gradWeight", "gradBias")})
    rc, ws_size, leftover = phase1(acl[0][0], 1)            # an executor whose buffers will be freed
    for ev in gates:
        threading.Timer(0.05, ev.set).start()
    assert bounded(pc.aclFinalize) == 0
    for p, v in zip(problems, views):                       # the queued work ran before the memory went
        got = (v["gradInput"].view(p[1].dtype).reshape(p[1].shape), v["gradWeight"].view(p[2].dtype).reshape(
            p[2].shape), v["gradBias"].view(p[3].dtype).reshape(p[3].shape))
        assert same_bits(got, expected(*p, 1))
    for s in streams:
        assert s.destroyed
        assert pc.aclrtSynchronizeStream(s) == pc.ACL_ERROR_INVALID_PARAM
        assert pc.aclrtDestroyStream(s) == pc.ACL_ERROR_INVALID_PARAM
    assert all(ptrs["self"].freed for _, ptrs in acl)
    rc, ws = pc.aclrtMalloc(max(ws_size, 1))
    assert pc.aclnnConvTbcBackward(ws, ws_size, leftover, None) == pc.ACLNN_ERR_PARAM_INVALID
    assert "freed" in pc.aclGetRecentErrMsg()
    assert pc.aclFinalize() == 0                            # again: fine
    # a fresh start works
    assert pc.aclInit(None) == 0 and pc.aclrtSetDevice(0) == 0
    rc, s = pc.aclrtCreateStream()
    p = make_problem(seed=7)
    t, ptrs = acl_problem(*p)
    enqueue(t, 1, s)
    assert bounded(lambda: pc.aclrtSynchronizeStream(s)) == 0
    assert np.allclose(outputs(ptrs, *p)[0], expected(*p, 1)[0], rtol=1e-5, atol=1e-5)
    assert pc.aclrtDestroyStream(s) == 0


def test_queued_task_waits_for_an_inline_task_and_synchronize_waits_for_both():
    """Regression: a task run inline on an idle stream (caller's thread) and a task queued meanwhile by another
    thread must not overlap, and synchronize must not return while the queued one is still pending/running."""
    import threading
    rc, s = pc.aclrtCreateStream()
    inline_started, release_inline = threading.Event(), threading.Event()
    log = []

    def inline_task():
        log.append("inline start")
        inline_started.set()
        release_inline.wait(10)
        log.append("inline end")

    def queued_task():
        log.append("queued run")

    th = threading.Thread(target=lambda: s.enqueue(inline_task, inline_if_idle=True))
    th.start()
    assert inline_started.wait(10)
    s.enqueue(queued_task)                  # the stream is busy: this one is queued for the worker
    done = []
    syncer = threading.Thread(target=lambda: done.append(s.synchronize()))
    syncer.start()
    syncer.join(0.2)
    assert syncer.is_alive() and log == ["inline start"]   # nothing overlapped, synchronize still waiting
    release_inline.set()
    th.join(10)
    syncer.join(10)
    assert not syncer.is_alive() and done == [None]
    assert log == ["inline start", "inline end", "queued run"]
    assert pc.aclrtDestroyStream(s) == 0


def _callback_on_top_of_an_inline_task(stream, callback):
    """Run ``callback`` from inside a task that ``stream`` runs inline in this thread: what a Python signal
    handler does when its signal lands while a small call runs in the caller's thread."""
    got = []
    stream.enqueue(lambda: got.append(callback()), inline_if_idle=True)
    return got[0]


def test_synchronize_from_inside_the_streams_own_inline_task_refuses_instead_of_hanging():
    """Regression (review): a signal handler calling aclrtSynchronizeStream while the interrupted call runs a
    task inline on that stream waited for its own frame forever.  It now returns 100000 at once, naming why;
    the stream goes on working and synchronizes normally afterwards."""
    rc, s = pc.aclrtCreateStream()
    t0 = time.perf_counter()
    status = _callback_on_top_of_an_inline_task(s, lambda: pc.aclrtSynchronizeStream(s))
    assert time.perf_counter() - t0 < 5
    assert status == 100000
    assert "signal handler" in pc.aclGetRecentErrMsg()
    # the default stream is not the one running the task: it synchronizes
    assert _callback_on_top_of_an_inline_task(s, lambda: pc.aclrtSynchronizeStream(None)) == 0
    assert pc.aclrtSynchronizeStream(s) == 0
    assert pc.aclrtDestroyStream(s) == 0


def test_destroy_and_finalize_from_inside_the_streams_own_inline_task_return():
    """aclrtDestroyStream / aclFinalize from a callback on top of the stream's own inline task refuse new work
    and return without waiting for it (it ends when the callback returns); nothing hangs."""
    rc, s = pc.aclrtCreateStream()
    t0 = time.perf_counter()
    assert _callback_on_top_of_an_inline_task(s, lambda: pc.aclrtDestroyStream(s)) == 0
    assert s.destroyed and s.idle()
    rc, s2 = pc.aclrtCreateStream()
    assert _callback_on_top_of_an_inline_task(s2, pc.aclFinalize) == 0
    assert s2.destroyed and s2.idle()
    assert time.perf_counter() - t0 < 5
    assert pc.aclInit(None) == 0


def test_system_exit_from_a_handler_inside_an_inline_task_is_not_swallowed():
    """A signal handler that calls sys.exit() while the interrupted call runs a task inline: the SystemExit
    reaches the caller (the task's failure is recorded for the stream, like KeyboardInterrupt's)."""
    import sys
    rc, s = pc.aclrtCreateStream()
    with pytest.raises(SystemExit):
        s.enqueue(lambda: sys.exit(0), inline_if_idle=True)
    assert s.idle()
    assert pc.aclrtSynchronizeStream(s) == 507000
    assert "SystemExit" in pc.aclGetRecentErrMsg()
    assert pc.aclrtDestroyStream(s) == 0
