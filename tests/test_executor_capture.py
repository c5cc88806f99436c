"""An executor holds exactly the descriptor fields phase 1 validated, immutably, and phase 2 hands the kernels
only views that fit the plan (docs/reliability.md, "Memory safety").

The race and the tampering cases run in a subprocess with a time limit: on a library without these guards
they end in an overrun of another buffer (the process may abort with "double free or corruption").
"""
import subprocess
import sys
import textwrap

import numpy as np

from child_python import NEUTRAL_CWD, child_env

LIMIT_S = 120

_SETUP = """
import os, sys, threading, time
import numpy as np
import pyconvtbc as pc

T, B, C, K = 64, 4, 32, 3
rng = np.random.default_rng(0)

def dev(host, view=None, strides=None, offset=0):
    host = np.ascontiguousarray(host, np.float32)
    rc, p = pc.aclrtMalloc(host.nbytes)
    assert rc == 0
    assert pc.aclrtMemcpy(p, host.nbytes, host, host.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    dims = list(host.shape) if view is None else view
    st = [s // 4 for s in host.strides] if strides is None else strides
    return pc.aclCreateTensor(dims, pc.ACL_FLOAT, st, offset, pc.ACL_FORMAT_ND, [host.size], p), p

x = rng.standard_normal((T, B, C)).astype(np.float32)
w = rng.standard_normal((K, C, C)).astype(np.float32)
dy = rng.standard_normal((T - K + 1, B, C)).astype(np.float32)
b = np.zeros(C, np.float32)
ins = [dev(a)[0] for a in (dy, x, w, b)]
gi, gi_ptr = dev(np.zeros_like(x))
gw, gb = dev(np.zeros_like(w))[0], dev(np.zeros_like(b))[0]
FULL = ((T, B, C), (B * C, C, 1), 0)
ONE_AT_END = ((1, 1, 1), (1, 1, 1), T * B * C - 1)      # a valid view too, but not gradInput's shape
"""


def _run(body):
    code = _SETUP + textwrap.dedent(body)
    env = child_env()
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=LIMIT_S, env=env,
                       cwd=NEUTRAL_CWD)
    return p.returncode, p.stdout, p.stderr


def test_phase1_captures_the_fields_it_validated_under_a_racing_writer():
    """A second thread flips gradInput's view between its full view and a one-element view at the end of its
    storage while phase 1 runs.  Every executor must hold a view phase 1 accepted (the full one), so no phase 2
    enqueues a gradInput-sized write at the last element of the storage.  (Before the fix phase 1 checked the
    live descriptor and copied it afterwards: within a few hundred calls an executor held the one-element view,
    phase 2 returned 0 and the kernels wrote a whole gradInput from the storage's last element on.)"""
    rc, out, err = _run("""
        sys.setswitchinterval(1e-6)
        stop = threading.Event()
        def flip():
            while not stop.is_set():
                for dims, strides, offset in (ONE_AT_END, FULL):
                    gi.view_dims = dims; gi.strides = strides; gi.offset = offset
        rc, s = pc.aclrtCreateStream()
        gate = threading.Event()
        s.enqueue(lambda: gate.wait(60))             # the stream never runs what phase 2 queues
        ws_ptr = None
        ok = refused = bad_capture = unsafe = 0
        th = threading.Thread(target=flip, daemon=True)
        th.start()
        t0 = time.monotonic()
        while time.monotonic() - t0 < 8 and ok + refused < 4000:
            rc, n, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(*ins, 0, 0, gi, gw, gb)
            if rc != 0:
                refused += 1
                continue
            ok += 1
            if n and ws_ptr is None:
                ws_ptr = pc.aclrtMalloc(n)[1]
            cap = ex.tensors["gradInput"]
            captured = (tuple(cap.view_dims), tuple(cap.strides), cap.offset)
            if captured != FULL:
                bad_capture += 1
            if pc.aclnnConvTbcBackward(ws_ptr, n, ex, s) == 0 and captured != FULL:
                unsafe += 1
        stop.set()
        print(ok, refused, bad_capture, unsafe, flush=True)
        os._exit(0)                                   # the queued work never runs
    """)
    assert rc == 0, err[-2000:]
    ok, refused, bad_capture, unsafe = map(int, out.split())
    assert ok > 0 and refused > 0, (ok, refused)    # the race was exercised: both outcomes occurred
    assert bad_capture == 0 and unsafe == 0, (ok, refused, bad_capture, unsafe)


def test_executor_state_cannot_be_replaced_and_phase2_checks_views_against_the_plan():
    """The captured fields are immutable (replacing an entry used to be possible: a plain dict, and a
    one-element view at the end of the storage then made the kernels overrun it and abort the process); and
    a view that does not fit the plan (forced in with object.__setattr__) is refused by phase 2 with 161002
    naming the tensor, as is an output that is no longer contiguous."""
    rc, out, err = _run("""
        rc, n, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(*ins, 0, 0, gi, gw, gb)
        assert rc == 0, pc.aclGetRecentErrMsg()
        assert pc.aclSetAclOpExecutorRepeatable(ex) == 0
        ws = pc.aclrtMalloc(n)[1] if n else None
        orig = ex._fields
        one_t = ((1, 1, 1), pc.ACL_FLOAT, (1, 1, 1), T * B * C - 1, pc.ACL_FORMAT_ND, (T * B * C,), gi_ptr)
        try:
            ex._fields["gradInput"] = one_t
            print("mutable", flush=True)
        except TypeError:
            print("immutable", flush=True)
        try:
            ex._fields = {}
            print("replaceable", flush=True)
        except AttributeError:
            print("read-only", flush=True)
        # phase 2 still checks the views against the plan, whatever the executor holds
        def forced(name, f):
            d = dict(orig)
            d[name] = f
            object.__setattr__(ex, "_fields", d if isinstance(orig, dict) else tuple(d.items()))
            rc = pc.aclnnConvTbcBackward(ws, n, ex, None)
            pc.aclrtSynchronizeStream(None)
            msg = pc.aclGetRecentErrMsg()
            object.__setattr__(ex, "_fields", orig)
            return rc, msg
        rc1, m1 = forced("gradInput", one_t)
        print(rc1, "gradInput" in m1 and "planned" in m1, flush=True)
        # gradInput's elements in another order (a transposed view of the same storage): not contiguous
        tr = ((T, B, C), pc.ACL_FLOAT, (1, T, T * B), 0, pc.ACL_FORMAT_ND, (T * B * C,), gi_ptr)
        rc2, m2 = forced("gradInput", tr)
        print(rc2, "contiguous" in m2, flush=True)
        half = ((T, B, C), pc.ACL_FLOAT16, (B * C, C, 1), 0, pc.ACL_FORMAT_ND, (T * B * C,), gi_ptr)
        rc3, m3 = forced("gradInput", half)
        print(rc3, "data type" in m3, flush=True)
        # the genuine executor still runs and computes
        assert pc.aclnnConvTbcBackward(ws, n, ex, None) == 0 and pc.aclrtSynchronizeStream(None) == 0
        out = np.zeros_like(x)
        pc.aclrtMemcpy(out, out.nbytes, gi_ptr, out.nbytes, pc.ACL_MEMCPY_DEVICE_TO_HOST)
        ref = np.zeros((T, B, C))
        for k in range(K):
            ref[k:k + T - K + 1] += np.einsum("tbo,co->tbc", dy.astype(np.float64), w[k].astype(np.float64))
        print(float(np.max(np.abs(out - ref)) / np.max(np.abs(ref))), flush=True)
    """)
    assert rc == 0, err[-2000:]
    lines = out.split("\n")
    assert lines[0] == "immutable" and lines[1] == "read-only", out
    assert lines[2] == "161002 True", out
    assert lines[3] == "161002 True", out
    assert lines[4] == "161002 True", out
    # fp32 operands under KEEP_DTYPE: a K*Cout-term fp32 sum, relative error within a few hundred ulps
    assert float(lines[5]) < 96 * np.finfo(np.float32).eps, out

