"""Streamed DY: a grad_output whose packed copy would be large (a broadcast one above all) is packed one window of
rows at a time, and the results are bit for bit those of the whole copy and of the independent model.

The hook ``stream_rows`` forces windows of about that many rows on small problems, so that every window edge is
exercised: gi row blocks with the K-1 time steps their taps reach, gradWeight chains carried from window to window
(per batch item in the permuted order on ascend910b / ascend910, positions with pieces and segments on ascend950,
one chain for the sequential form), k0-aligned t ranges within an item, and several whole items per window.
"""
import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import _numpy_layer as NL
from pyconvtbc._kernels import _conv_tbc as K
from pyconvtbc.profiles import ACCUMULATIONS

import accum_reference as R
from test_forward import assert_same_bits

ISAS = K.isas()                  # every instruction set this CPU and build run, portable first


@pytest.fixture(autouse=True)
def _fresh_plans():
    """The window size is part of the plan (its workspace): plan every call afresh, and restore the hooks."""
    NL._plan_cache.clear()
    old = K.hooks.set(stream_rows=None, parallel_min=0)
    yield
    K.hooks.set(**old)
    NL._plan_cache.clear()


def _call(rows, *args, **kw):
    NL._plan_cache.clear()
    with K.hooks.override(stream_rows=rows):
        return pc.conv_tbc_backward(*args, **kw)


def _workspace(rows, *args, **kw):
    """The workspace bytes the NumPy layer asks for in this call."""
    seen = []
    real = NL._workspace
    NL._workspace = lambda n: seen.append(n) or real(n)
    try:
        out = _call(rows, *args, **kw)
    finally:
        NL._workspace = real
    return (seen[0] if seen else 0), out


def _problem(shape, seed):
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(seed)
    dy = R.grid(rng, (T_out, B, Cout), 6, emin=-6, emax=6)
    x = R.grid(rng, (T_in, B, Cin), 6, emin=-6, emax=6)
    w = R.grid(rng, (K_, Cin, Cout), 6, emin=-6, emax=6)
    b = np.zeros(Cout, np.float32)
    return dy, x, w, b, pad


# (T_in, B, Cin, Cout, K, pad): pad > 0, B = 1, T_out not a multiple of k0, Cout not a multiple of k0 or of 32
SHAPES = [(40, 8, 12, 40, 3, 1), (400, 1, 9, 20, 4, 2), (70, 5, 33, 9, 2, 3), (60, 12, 5, 70, 5, 0)]
FORMS = ["cube", "cube_wide", "cube_rz", "sequential"]


@pytest.mark.parametrize("rows", [1, 37, 300])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("shape", SHAPES)
def test_streamed_gradients_match_the_model(shape, soc, form, rows):
    dy, x, w, b, pad = _problem(shape, seed=sum(shape))
    k0 = 8
    want_gw = R.grad_weight(x, dy, shape[4], pad, form, k0, soc)
    want_gi = R.grad_input(dy, w, shape[0], pad, form, k0, soc)
    ws_whole, whole = _workspace(0, dy, x, w, b, pad, soc=soc, accumulation=form, deterministic=True)
    ws, (gi, gw, gb) = _workspace(rows, dy, x, w, b, pad, soc=soc, accumulation=form, deterministic=True,
                                  num_threads=2)
    assert_same_bits(gw, want_gw)
    assert_same_bits(gi, want_gi)
    assert_same_bits(gb, whole[2])
    mode = (0, 0, 0, 0, 0, ACCUMULATIONS[form], k0, int(soc == "ascend950"))
    with K.hooks.override(stream_rows=rows):
        n1, n2 = K.stream_windows(shape, mode if form != "sequential" else 0, (0,) * 6, 2)
    assert n1 >= 1 and n2 >= 2                    # it did stream, in several windows
    if soc == "ascend910b" and form == "sequential":
        assert ws < ws_whole                      # a window is smaller than the whole packed DY


@pytest.mark.parametrize("block_size", [None, 12, 16])
@pytest.mark.parametrize("dn,gwd", [("float32", None), ("float16", None), ("bfloat16", None),
                                    ("float16", "hifloat8"), ("float32", "float8_e4m3fn")])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950", "ascend910"])
def test_streamed_equals_whole_for_every_dtype_and_chip(soc, dn, gwd, block_size):
    if soc == "ascend910" and dn == "bfloat16":
        pytest.skip("ascend910 has no bfloat16")
    dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[dn]
    dy, x, w, b, pad = _problem((33, 6, 20, 44, 3, 1), seed=7)
    dy, x, w, b = (a.astype(dt) for a in (dy, x, w, b))
    kw = dict(soc=soc, deterministic=True, block_size=block_size, grad_weight_dtype=gwd,
              cube_math_type=1 if (soc == "ascend910" and dn == "float32") else 0)
    if gwd == "hifloat8" and soc != "ascend950":
        kw["grad_weight_dtype"] = None
    if gwd == "float8_e4m3fn" and soc != "ascend950":
        kw["grad_weight_dtype"] = None
    try:
        want = _call(0, dy, x, w, b, pad, **kw)
    except pc.AclnnError as e:
        pytest.skip(f"not a valid cell: {e.message}")
    for rows in (1, 50):
        for n in (1, 3):
            got = _call(rows, dy, x, w, b, pad, num_threads=n, **kw)
            for g, r in zip(got, want):
                assert_same_bits(g, r)


@pytest.mark.parametrize("soc", ["ascend910b", "ascend910"])
def test_streamed_non_deterministic_order_follows_the_seed(soc):
    """Non-deterministic gradWeight: the per-item chains in a permuted order; streamed windows take the items in
    that order, so a seed gives the same bits streamed or whole (and the model's, given the order)."""
    shape = (26, 9, 16, 24, 3, 1)
    dy, x, w, b, pad = _problem(shape, seed=3)
    kw = dict(soc=soc, deterministic=False, order_seed=1234)
    if soc == "ascend910":
        dy, x, w, b = (a.astype(np.float16) for a in (dy, x, w, b))
    want = _call(0, dy, x, w, b, pad, **kw)
    for rows in (1, 30, 100):
        got = _call(rows, dy, x, w, b, pad, num_threads=2, **kw)
        for g, r in zip(got, want):
            assert_same_bits(g, r)
    other = _call(1, dy, x, w, b, pad, soc=soc, deterministic=False, order_seed=99)
    assert other[1].tobytes() != want[1].tobytes() or dy.dtype == np.float16


def test_streamed_on_every_isa():
    dy, x, w, b, pad = _problem((35, 4, 40, 72, 3, 1), seed=9)
    want = _call(0, dy, x, w, b, pad, deterministic=True)
    old = K.hooks.get()["isa"]
    try:
        for isa in ISAS:
            K.hooks.set(isa=isa)
            for n in (1, 2):
                got = _call(20, dy, x, w, b, pad, deterministic=True, num_threads=n)
                for g, r in zip(got, want):
                    assert_same_bits(g, r)
    finally:
        K.hooks.set(isa=old)


def test_broadcast_grad_output_is_not_expanded():
    """The gradient of out.sum(): grad_output is one value broadcast to (T_out, B, Cout), 1 GiB if expanded.
    The call asks for a workspace far smaller than that, and its results are exact (integer sums)."""
    T_in, B, Cin, Cout, K_, pad = 4096, 256, 4, 256, 3, 1
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(0)
    dy = np.broadcast_to(np.float32(1.0), (T_out, B, Cout))
    x = rng.integers(-3, 4, size=(T_in, B, Cin)).astype(np.float32)
    w = rng.integers(-3, 4, size=(K_, Cin, Cout)).astype(np.float32)
    b = np.zeros(Cout, np.float32)
    expanded = T_out * B * Cout * 4
    assert expanded >= 1 << 30
    K.hooks.set(stream_rows=None)
    ws, (gi, gw, gb) = _workspace(None, dy, x, w, b, pad)
    assert ws < expanded // 8, (ws, expanded)
    # gb = T_out*B; gw[k, ci, co] = sum of x over the rows tap k reads; gi[t, b, ci] = sum over valid taps of
    # sum_co w[k, ci, co]: all small integers, exact in fp32 whatever the order
    assert (gb == T_out * B).all()
    xs = x.astype(np.float64).sum(axis=1)                  # (T_in, Cin)
    for k in range(K_):
        lo, hi = max(0, k - pad), min(T_in, T_out + k - pad)
        np.testing.assert_array_equal(gw[k], np.broadcast_to(xs[lo:hi].sum(axis=0)[:, None], (Cin, Cout)))
    ws_k = w.astype(np.float64).sum(axis=2)                # (K, Cin)
    t = np.arange(T_in)
    want = np.zeros((T_in, Cin))
    for k in range(K_):
        ok = (t + pad - k >= 0) & (t + pad - k < T_out)
        want[ok] += ws_k[k]
    np.testing.assert_array_equal(gi, np.broadcast_to(want[:, None, :], gi.shape))


def test_broadcast_grad_output_through_the_cann_layer():
    """An aclTensor over one 4-byte device value with strides (0, 0, 0): phase 1 sizes the workspace for a
    window, not for the 512 MiB the expanded tensor would pack to, and phase 2's results are exact."""
    from conftest import acl_problem, phase1, read_back
    T_in, B, Cin, Cout, K_ = 2048, 128, 8, 512, 3
    T_out = T_in - K_ + 1
    x = np.ones((T_in, B, Cin), np.float32)
    w = np.ones((K_, Cin, Cout), np.float32)
    b = np.zeros(Cout, np.float32)
    t, p = acl_problem(np.zeros((1, 1, 1), np.float32), x, w, b)
    rc, one = pc.aclrtMalloc(4)
    assert rc == 0
    assert pc.aclrtMemcpy(one, 4, np.array([0.5], np.float32), 4, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    t["self"] = pc.aclCreateTensor([T_out, B, Cout], pc.ACL_FLOAT, [0, 0, 0], 0, pc.ACL_FORMAT_ND, [1], one)
    assert t["self"] is not None, pc.aclGetRecentErrMsg()
    rc, ws_size, ex = phase1(t, pad=0)
    assert rc == 0, pc.aclGetRecentErrMsg()
    expanded = T_out * B * Cout * 4
    assert ws_size < expanded // 4, (ws_size, expanded)
    rc, ws = pc.aclrtMalloc(ws_size)
    assert rc == 0
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0, pc.aclGetRecentErrMsg()
    assert pc.aclrtSynchronizeStream(None) == 0
    gw = read_back(p["gradWeight"], w.shape, np.float32)
    gb = read_back(p["gradBias"], b.shape, np.float32)
    gi = read_back(p["gradInput"], x.shape, np.float32)
    assert (gb == 0.5 * T_out * B).all() and (gw == 0.5 * T_out * B).all()
    taps = np.minimum(np.arange(T_in) + 1, K_) - np.maximum(0, np.arange(T_in) - T_out + 1)   # valid taps of t
    np.testing.assert_array_equal(gi, np.broadcast_to((0.5 * Cout * taps)[:, None, None], gi.shape))


def test_streamed_call_can_be_cancelled():
    """The window loops stop at the next task when the call is interrupted (the cancel flag of ``run``)."""
    import threading
    import time
    T_in, B, Cin, Cout, K_ = 3000, 64, 64, 256, 9           # ~110 GFLOP: far longer than the 0.05 s timer
    T_out = T_in - K_ + 1
    dy = np.broadcast_to(np.float32(1.0), (T_out, B, Cout))
    x = np.broadcast_to(np.float32(1.0), (T_in, B, Cin))
    w = np.ones((K_, Cin, Cout), np.float32)
    gi = np.empty((T_in, B, Cin), np.float32)
    gw = np.empty((K_, Cin, Cout), np.float32)
    gb = np.empty(Cout, np.float32)
    shape = (T_in, B, Cin, Cout, K_, 0)
    mode = (0, 0, 0, 0, 0, 1, 8, 0)
    with K.hooks.override(stream_rows=2000):
        n = K.workspace_size(shape, mode, (0,) * 6, 2)
        ws = np.zeros(n, np.uint8)
        flag = np.zeros(1, np.int32)
        threading.Timer(0.05, lambda: flag.__setitem__(0, 1)).start()
        t0 = time.perf_counter()
        with pytest.raises(K.Cancelled):
            K.run((dy.ctypes.data, 0, 0, 0, 0), (x.ctypes.data, 0, 0, 0, 0), (w.ctypes.data, *w.strides, 0),
                  (gi.ctypes.data, 0), (gw.ctypes.data, 0), (gb.ctypes.data, 0), shape, mode,
                  ws.ctypes.data, ws.size, 2, cancel=flag)
        assert time.perf_counter() - t0 < 2.0


# ---- the forward: x streamed the same way -------------------------------------------------------------------
FWD_SHAPES = [(300, 3, 40, 20, 3, 1), (400, 1, 9, 33, 4, 2), (90, 7, 33, 9, 2, 0)]


def _fwd(rows, *args, **kw):
    NL._plan_cache.clear()
    with K.hooks.override(stream_rows=rows):
        return pc.conv_tbc(*args, **kw)


@pytest.mark.parametrize("rows", [1, 200])
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("dn,soc,cmt", [("float32", "ascend910b", 0), ("float16", "ascend910b", 0),
                                        ("bfloat16", "ascend950", 0), ("float32", "ascend910b", 3)])
@pytest.mark.parametrize("shape", FWD_SHAPES)
def test_streamed_forward_matches_the_model(shape, dn, soc, cmt, form, rows):
    from test_forward import grid_problem, model
    x, w, b = grid_problem(shape, dn, seed=sum(shape))
    pad = shape[5]
    want = model(x, w, b, pad, dn, soc, cmt, form)
    for n in (1, 3):
        got = _fwd(rows, x, w, b, pad, cube_math_type=cmt, soc=soc, accumulation=form, num_threads=n)
        assert_same_bits(got, want)


def test_broadcast_forward_input_is_not_expanded():
    """x broadcast along time and batch (one row of Cin values), 1 GiB if expanded: the workspace stays small and
    the output is exact (integer sums)."""
    T_in, B, Cin, Cout, K_, pad = 8192, 128, 256, 4, 3, 1
    rng = np.random.default_rng(2)
    row = rng.integers(-3, 4, size=Cin).astype(np.float32)
    x = np.broadcast_to(row, (T_in, B, Cin))
    w = rng.integers(-3, 4, size=(K_, Cin, Cout)).astype(np.float32)
    b = np.zeros(Cout, np.float32)
    seen = []
    real = NL._workspace
    NL._workspace = lambda n: seen.append(n) or real(n)
    try:
        out = _fwd(None, x, w, b, pad)
    finally:
        NL._workspace = real
    assert seen and seen[0] < T_in * B * Cin * 4 // 8
    per_tap = (row.astype(np.float64)[None, :, None] * w).sum(axis=1)       # (K, Cout)
    T_out = T_in + 2 * pad - K_ + 1
    t = np.arange(T_out)
    want = np.zeros((T_out, Cout))
    for k in range(K_):
        ok = (t + k - pad >= 0) & (t + k - pad < T_in)
        want[ok] += per_tap[k]
    np.testing.assert_array_equal(out, np.broadcast_to(want[:, None, :], out.shape))


@pytest.mark.parametrize("form", ["cube", "sequential"])
def test_streamed_forward_hifloat8_inputs_equal_whole(form):
    """ascend950's HiFloat8 operands (uint8 codes in, codes out) are decoded while a window is packed, as when x
    is packed whole: the same codes."""
    from test_forward import hif8_codes
    rng = np.random.default_rng(8)
    T_in, B, Cin, Cout, K_, pad = 300, 3, 45, 20, 3, 1
    x = hif8_codes(rng, (T_in, B, Cin))
    w = hif8_codes(rng, (K_, Cin, Cout))
    b = R.grid(rng, (Cout,), bits=10, emin=-8, emax=-2)
    kw = dict(soc="ascend950", hif8_inputs=True, accumulation=form)
    seen = []
    real = NL._workspace
    NL._workspace = lambda n: seen.append(n) or real(n)
    try:
        want = _fwd(0, x, w, b, pad, **kw)
        for rows in (1, 200):
            got = _fwd(rows, x, w, b, pad, num_threads=2, **kw)
            assert got.dtype == np.uint8
            np.testing.assert_array_equal(got, want)
    finally:
        NL._workspace = real
    assert seen[1] < seen[0] and seen[2] < seen[0]        # the windows are smaller than the whole packed x
