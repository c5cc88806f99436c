"""Interrupts in the runtime's waits leave no stream wedged or untracked (docs/reliability.md, "Interrupts" and
"Streams"): a second Ctrl-C during a stream's cancel wait, Ctrl-C during aclFinalize.

Each case runs in a subprocess with a time limit and Python's SIGINT handler installed (a process started as a
background job inherits SIGINT ignored).  The stream's running task there is a plain Python task blocked on an
event: it ignores the cancel flag, so the waits last as long as the test wants.
"""
import subprocess
import sys
import textwrap

from child_python import NEUTRAL_CWD, child_env

LIMIT_S = 120

_SETUP = """
import os, signal, sys, threading, time
import numpy as np
import pyconvtbc as pc
signal.signal(signal.SIGINT, signal.default_int_handler)

def dev(host):
    host = np.ascontiguousarray(host, np.float32)
    rc, p = pc.aclrtMalloc(host.nbytes)
    assert rc == 0
    assert pc.aclrtMemcpy(p, host.nbytes, host, host.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    return pc.aclCreateTensor(list(host.shape), pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, None, p), p

def backward_on(stream):
    \"\"\"Enqueue a real backward (about 2*10^8 flops: queued, and its kernels poll the cancel flag) on stream;
    returns (phase-2 status, gradInput's device pointer, the float64 reference of gradInput).\"\"\"
    rng = np.random.default_rng(1)
    T, B, C, K = 256, 4, 64, 3
    x = rng.standard_normal((T, B, C)).astype(np.float32)
    w = rng.standard_normal((K, C, C)).astype(np.float32)
    dy = rng.standard_normal((T - K + 1, B, C)).astype(np.float32)
    ins = [dev(a)[0] for a in (dy, x, w, np.zeros(C, np.float32))]
    gi, gi_ptr = dev(np.zeros_like(x))
    outs = [gi, dev(np.zeros_like(w))[0], dev(np.zeros(C, np.float32))[0]]
    rc, n, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(*ins, 0, 0, *outs)
    assert rc == 0, pc.aclGetRecentErrMsg()
    ws = pc.aclrtMalloc(n)[1] if n else None
    ref = np.zeros((T, B, C))
    for k in range(K):
        ref[k:k + T - K + 1] += np.einsum("tbo,co->tbc", dy.astype(np.float64), w[k].astype(np.float64))
    return pc.aclnnConvTbcBackward(ws, n, ex, stream), gi_ptr, ref

def rel_err(gi_ptr, ref):
    out = np.zeros(ref.shape, np.float32)
    assert pc.aclrtMemcpy(out, out.nbytes, gi_ptr, out.nbytes, pc.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    return float(np.max(np.abs(out - ref)) / np.max(np.abs(ref)))

def blocked(stream):
    \"\"\"Queue a task that runs until the returned event is set (it ignores the cancel flag).\"\"\"
    gate, started = threading.Event(), threading.Event()
    def task():
        started.set()
        gate.wait(60)
    stream.enqueue(task)
    assert started.wait(30)
    return gate

def sigint_at(*delays):
    \"\"\"SIGINT to this process at each delay (seconds from now); returns the list of send times.\"\"\"
    sent = []
    def kick():
        t0 = time.monotonic()
        for d in delays:
            time.sleep(max(0.0, t0 + d - time.monotonic()))
            sent.append(time.monotonic())
            os.kill(os.getpid(), signal.SIGINT)
    threading.Thread(target=kick, daemon=True).start()
    return sent
"""


def _run(body):
    code = _SETUP + textwrap.dedent(body)
    env = child_env()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=LIMIT_S, env=env,
                       cwd=NEUTRAL_CWD)
    assert p.returncode == 0, p.stderr[-3000:]
    return p.stdout.split("\n")


def test_second_sigint_during_the_cancel_wait_does_not_wedge_the_stream():
    """Ctrl-C in aclrtSynchronizeStream cancels the stream's work and waits for the running task to stop; a second
    Ctrl-C during that wait must still raise promptly and leave the stream usable: the cancellation applies to
    the task it was made for only.  (Before the fix the interrupt escaped before the cancel flag was reset: every
    later task on the stream stopped at its first poll and each synchronize returned 507000 "Cancelled".)"""
    out = _run("""
        rc, s = pc.aclrtCreateStream()
        gate = blocked(s)
        sent = sigint_at(0.2, 0.5)                 # the first in synchronize, the second in the cancel wait
        try:
            pc.aclrtSynchronizeStream(s)
            print("no interrupt")
        except KeyboardInterrupt:
            latency = time.monotonic() - sent[-1]
            print(len(sent), round(latency, 3))
        gate.set()
        while not s.idle():
            time.sleep(0.01)
        rc = pc.aclrtSynchronizeStream(s)          # the cancellation is reported once
        print(rc, "cancelled" in (pc.aclGetRecentErrMsg() or ""))
        for _ in range(2):                         # later work runs to its end and is right
            rc, gi_ptr, ref = backward_on(s)
            assert rc == 0, pc.aclGetRecentErrMsg()
            rc = pc.aclrtSynchronizeStream(s)
            print(rc, rel_err(gi_ptr, ref) if rc == 0 else pc.aclGetRecentErrMsg())
    """)
    n_signals, latency = out[0].split()
    assert n_signals == "2", out                   # the KeyboardInterrupt came from the second signal
    assert float(latency) < 0.2, out
    assert out[1] == "507000 True", out
    for line in out[2:4]:
        rc, err = line.split(maxsplit=1)
        assert rc == "0", out
        assert float(err) < 64 * 2.0 ** -23, out   # fp32 sums of 192 terms: a few ulps of the largest


def test_interrupted_finalize_leaves_no_live_untracked_stream():
    """Ctrl-C while aclFinalize waits for a stream: every stream that existed must still be destroyed -- either
    already (new work refused) or by the next aclFinalize, which drains it and stops its worker.  (Before the fix
    aclFinalize forgot its streams before destroying them: the interrupted call left the others live and untracked,
    a second aclFinalize returned 0 and they still accepted and ran work.)"""
    out = _run("""
        streams = [pc.aclrtCreateStream()[1] for _ in range(3)]
        gates = [blocked(s) for s in streams]
        sent = sigint_at(0.3)
        try:
            pc.aclFinalize()
            print("no interrupt")
        except KeyboardInterrupt:
            print("interrupted", round(time.monotonic() - sent[0], 3))
        print(*[int(s.destroyed) for s in streams])     # all refuse new work at once
        for g in gates:
            g.set()
        print(pc.aclFinalize())
        print(*[int(s.destroyed) for s in streams])
        print(*[int(s._thread is None or not s._thread.is_alive()) for s in streams])
        print(*[backward_on(s)[0] for s in streams])      # phase 2 on a destroyed stream: 161002
        rc, gi_ptr, ref = backward_on(None)               # a new default stream works
        print(rc, pc.aclrtSynchronizeStream(None))
    """)
    word, latency = out[0].split()
    assert word == "interrupted" and float(latency) < 0.2, out
    assert out[1] == "1 1 1", out
    assert out[2] == "0", out
    assert out[3] == "1 1 1", out
    assert out[4] == "1 1 1", out                        # the workers have stopped
    assert out[5] == "161002 161002 161002", out
    assert out[6] == "0 0", out
