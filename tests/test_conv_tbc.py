"""Both public layers on random shapes, pads and non-contiguous views, against the float64 reference and
PyTorch's conv_tbc_backward (float64) when torch is installed, within the fp32 accumulation bound."""
import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from conftest import acl_code, read_back
from reference import abs_products_ref, conv_tbc_backward_ref, fp32_bound

try:
    import torch
except ImportError:  # the cross-check is optional
    torch = None

OUT_U = {np.dtype(np.float32): 0.0, np.dtype(np.float16): 2.0 ** -11, np.dtype(ml_dtypes.bfloat16): 2.0 ** -8}


def _view(rng, a, kind):
    """The same values as ``a`` (T, B, C) seen through a non-contiguous NumPy view of kind ``kind``."""
    if kind == "contiguous":
        return a
    if kind == "transposed":      # storage (C, B, T), viewed as (T, B, C)
        return np.ascontiguousarray(a.transpose(2, 1, 0)).transpose(2, 1, 0)
    if kind == "gaps":            # every other element of a bigger buffer, plus an offset
        big = np.zeros((a.shape[0] * 2 + 1, a.shape[1] + 1, a.shape[2] * 3), a.dtype)
        v = big[1::2, 1:, ::3]
        v[...] = a
        return v
    if kind == "reversed":        # negative strides
        big = a[::-1, :, ::-1].copy()
        return big[::-1, :, ::-1]
    if kind == "broadcast":       # zero stride along B: every batch row equal
        return np.broadcast_to(a[:, :1, :], a.shape)
    raise ValueError(kind)


def _check(gi, gw, gb, dy, x, w, pad):
    n_gi = w.shape[0] * w.shape[2]
    n_gw = dy.shape[0] * dy.shape[1]
    rgi, rgw, rgb = conv_tbc_backward_ref(dy, x, w, pad)
    agi, agw, agb = abs_products_ref(dy, x, w, pad)
    for got, ref, ab, n, dt in ((gi, rgi, agi, n_gi, x.dtype), (gw, rgw, agw, n_gw, w.dtype),
                                (gb, rgb, agb, n_gw, dy.dtype)):
        err = np.abs(got.astype(np.float64) - ref)
        assert np.all(err <= fp32_bound(n, ab, OUT_U[np.dtype(dt)], ref)), float(err.max())
    if torch is not None:
        t = lambda a: torch.from_numpy(np.ascontiguousarray(a.astype(np.float64)))
        tgi, tgw, tgb = torch.ops.aten.conv_tbc_backward(t(dy), t(x), t(w), t(np.zeros(w.shape[2])), pad)
        for got, ref, ab, n, dt in ((gi, tgi, agi, n_gi, x.dtype), (gw, tgw, agw, n_gw, w.dtype),
                                    (gb, tgb, agb, n_gw, dy.dtype)):
            ref = ref.numpy()
            assert np.all(np.abs(got.astype(np.float64) - ref) <= fp32_bound(n, ab, OUT_U[np.dtype(dt)], ref))


CASES = [(seed, kind) for seed in range(6) for kind in ("contiguous", "transposed", "gaps", "reversed", "broadcast")]


def _random_problem(seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    K = int(rng.integers(1, 6))
    pad = int(rng.integers(0, 4))
    T_in = int(rng.integers(max(0, K - 2 * pad - 1), 20))
    B, Cin, Cout = (int(v) for v in rng.integers(1, 9, size=3))
    T_out = T_in + 2 * pad - K + 1
    mk = lambda *s: rng.standard_normal(s).astype(np.float32).astype(dtype)
    return rng, mk(T_out, B, Cout), mk(T_in, B, Cin), mk(K, Cin, Cout), mk(Cout), pad


@pytest.mark.parametrize("dtype", [np.float32, np.float16, ml_dtypes.bfloat16], ids=["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("seed,kind", CASES)
def test_numpy_layer_random_views(seed, kind, dtype):
    rng, dy, x, w, b, pad = _random_problem(seed, dtype)
    vdy, vx, vw = (_view(rng, a, kind) for a in (dy, x, w))
    for a, v in ((dy, vdy), (x, vx), (w, vw)):
        if kind != "broadcast":
            np.testing.assert_array_equal(a, v)
    gi, gw, gb = pc.conv_tbc_backward(vdy, vx, vw, b, pad, num_threads=1 + seed % 2)
    assert gi.flags.c_contiguous and gw.flags.c_contiguous and gb.flags.c_contiguous
    _check(gi, gw, gb, np.asarray(vdy), np.asarray(vx), np.asarray(vw), pad)


def _acl_strided(a, kind):
    """Device tensor viewing ``a`` through storage laid out as ``kind``: returns the tensor."""
    T, B, C = a.shape
    code = acl_code(a.dtype)
    if kind == "transposed":            # storage (C, B, T)
        store = np.ascontiguousarray(a.transpose(2, 1, 0))
        strides, offset = [1, T, B * T], 0
    elif kind == "gaps":                # storage (2T+1, B+1, 3C), view at [1::2, 1:, ::3]
        big = np.zeros((2 * T + 1, B + 1, 3 * C), a.dtype)
        big[1::2, 1:, ::3] = a
        store = big
        strides, offset = [2 * (B + 1) * 3 * C, 3 * C, 3], (B + 1) * 3 * C + 3 * C
    elif kind == "broadcast":           # zero stride along B
        store = np.ascontiguousarray(a[:, 0, :])
        strides, offset = [C, 0, 1], 0
    else:
        store = np.ascontiguousarray(a)
        strides, offset = [B * C, C, 1], 0
    nbytes = max(store.nbytes, 1)
    rc, ptr = pc.aclrtMalloc(nbytes)
    if store.nbytes:
        assert pc.aclrtMemcpy(ptr, nbytes, store, store.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    t = pc.aclCreateTensor(list(a.shape), code, strides, offset, pc.ACL_FORMAT_ND, [store.size], ptr)
    assert t is not None
    return t


@pytest.mark.parametrize("seed,kind", [c for c in CASES if c[1] != "reversed"])
def test_cann_layer_random_strided_descriptors(seed, kind):
    rng, dy, x, w, b, pad = _random_problem(100 + seed)
    if kind == "broadcast":
        dy = np.broadcast_to(dy[:, :1, :], dy.shape).copy()
        x = np.broadcast_to(x[:, :1, :], x.shape).copy()
        w = np.broadcast_to(w[:, :1, :], w.shape).copy()
    tensors = [_acl_strided(a, kind) for a in (dy, x, w)]
    outs = []
    for shape in (x.shape, w.shape, b.shape):
        n = int(np.prod(shape))
        rc, ptr = pc.aclrtMalloc(max(4 * n, 1))
        outs.append((pc.aclCreateTensor(list(shape), pc.ACL_FLOAT, None, 0, pc.ACL_FORMAT_ND, [n], ptr), ptr))
    rc, bptr = pc.aclrtMalloc(4 * b.size)
    bias = pc.aclCreateTensor([b.size], pc.ACL_FLOAT, [1], 0, pc.ACL_FORMAT_ND, [b.size], bptr)
    rc, ws_size, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(*tensors, bias, pad, 0, *(o[0] for o in outs))
    assert rc == 0, pc.aclGetRecentErrMsg()
    ws = pc.aclrtMalloc(ws_size)[1] if ws_size else None
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0
    assert pc.aclrtSynchronizeStream(None) == 0
    gi, gw, gb = (read_back(p, s, np.float32) for (_, p), s in zip(outs, (x.shape, w.shape, b.shape)))
    _check(gi, gw, gb, dy, x, w, pad)


@pytest.mark.parametrize("shape", [
    # (T_in, B, Cin, Cout, K, pad)
    (5, 0, 3, 4, 3, 1), (0, 2, 3, 4, 1, 0), (0, 2, 3, 4, 3, 1), (5, 2, 0, 4, 3, 1), (5, 2, 3, 0, 3, 1),
    (5, 2, 3, 4, 0, 0), (2, 2, 3, 4, 3, 0),
])
def test_empty_tensors_both_layers(shape):
    T_in, B, Cin, Cout, K, pad = shape
    T_out = T_in + 2 * pad - K + 1
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((T_out, B, Cout)).astype(np.float32)
    x = rng.standard_normal((T_in, B, Cin)).astype(np.float32)
    w = rng.standard_normal((K, Cin, Cout)).astype(np.float32)
    b = np.zeros(Cout, np.float32)
    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, pad)
    assert gi.shape == x.shape and gw.shape == w.shape and gb.shape == b.shape
    rgi, rgw, rgb = conv_tbc_backward_ref(dy, x, w, pad)
    np.testing.assert_allclose(gi, rgi, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gw, rgw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(gb, dy.astype(np.float64).sum(axis=(0, 1)), rtol=1e-5, atol=1e-6)  # true sum
    from conftest import acl_problem, run_acl
    t, p = acl_problem(dy, x, w, b)
    assert run_acl(t, pad=pad) == 0, pc.aclGetRecentErrMsg()
    np.testing.assert_array_equal(read_back(p["gradBias"], b.shape, np.float32), gb)
    np.testing.assert_array_equal(read_back(p["gradWeight"], w.shape, np.float32), gw)
