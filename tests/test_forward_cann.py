"""The forward operator's CANN layer: aclnnConvTbcGetWorkspaceSize / aclnnConvTbc (docs/semantics.md section 11,
docs/cann.md "The forward operator")."""
import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from conftest import device_tensor, read_back
from reference import conv_tbc_ref, fp32_bound

F32, F16, BF16 = np.float32, np.float16, ml_dtypes.bfloat16
ACL = {np.dtype(F32): pc.ACL_FLOAT, np.dtype(F16): pc.ACL_FLOAT16, np.dtype(BF16): pc.ACL_BF16}


def _problem(T_in=6, B=2, Cin=3, Cout=4, K=3, pad=1, dtype=F32, bias_dtype=None, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((T_in, B, Cin)).astype(dtype)
    w = rng.standard_normal((K, Cin, Cout)).astype(dtype)
    b = rng.standard_normal(Cout).astype(bias_dtype or dtype)
    return x, w, b


def _tensors(x, w, b, pad, out_dtype=None, **out_kw):
    T_out = x.shape[0] + 2 * pad - w.shape[0] + 1
    t, p = {}, {}
    for n, a in (("self", x), ("weight", w), ("bias", b)):
        t[n], p[n] = device_tensor(a, ACL[a.dtype])
    od = out_dtype or x.dtype
    t["out"], p["out"] = device_tensor(np.zeros((T_out, x.shape[1], w.shape[2]), od), ACL[np.dtype(od)], **out_kw)
    return t, p


def _run(t, pad, cube=0, stream=None, repeat=1):
    rc, ws_size, ex = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], pad, t["out"], cube)
    if rc:
        return rc
    ws = None
    if ws_size:
        rc, ws = pc.aclrtMalloc(ws_size)
        assert rc == 0
    if repeat > 1:
        assert pc.aclSetAclOpExecutorRepeatable(ex) == 0
    for _ in range(repeat):
        rc = pc.aclnnConvTbc(ws, ws_size, ex, stream)
        if rc:
            return rc
    return pc.aclrtSynchronizeStream(stream)


def test_huawei_example_ported_line_by_line(capsys):
    from pyconvtbc._demo import aclnnConvTbcTest, Finalize
    results = {}
    ret, stream = aclnnConvTbcTest(0, results)
    assert ret == 0
    Finalize(0, stream)
    out = results["result"]
    assert out.shape == (2, 2, 4)
    np.testing.assert_array_equal(out, np.full((2, 2, 4), 7.0, np.float32))   # 1 + 2 taps x 3 channels
    printed = capsys.readouterr().out.splitlines()
    assert printed == [f"result[{i}] is: 7.000000" for i in range(10)]


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_cann_layer_equals_numpy_layer_and_reference(dtype):
    x, w, b = _problem(T_in=9, Cin=5, Cout=6, dtype=dtype, bias_dtype=F32, seed=1)
    t, p = _tensors(x, w, b, 2)
    assert _run(t, 2) == 0
    got = read_back(p["out"], (9 + 4 - 3 + 1, 2, 6), dtype)
    np.testing.assert_array_equal(got, pc.conv_tbc(x, w, b, 2))
    if dtype is F32:
        ref = conv_tbc_ref(x, w, b, 2)
        absp = conv_tbc_ref(np.abs(x.astype(np.float64)), np.abs(w.astype(np.float64)), np.abs(b), 2)
        assert (np.abs(got - ref) <= fp32_bound(3 * 5 + 1, absp)).all()


def test_non_contiguous_out_is_written_through_its_strides():
    x, w, b = _problem(seed=2)
    T_out = 6 + 2 - 3 + 1
    # out (T_out, B, Cout) viewed inside a (T_out, Cout, B) storage (transposed): strides [2*4, 1, 4]
    t, p = _tensors(x, w, b, 1)
    storage = np.full((T_out, 4, 2), -5.0, F32)
    t["out"], p["out"] = device_tensor(storage, pc.ACL_FLOAT, view=[T_out, 2, 4], strides=[8, 1, 2])
    assert _run(t, 1) == 0
    got = read_back(p["out"], (T_out, 4, 2), F32).transpose(0, 2, 1)
    np.testing.assert_array_equal(got, pc.conv_tbc(x, w, b, 1))


def test_strided_inputs_read_in_place():
    x, w, b = _problem(T_in=8, Cin=4, Cout=3, seed=3)
    big = np.zeros((8, 2, 9), F32)
    big[:, :, ::2][:, :, :4] = x                            # x inside every other channel of a wider buffer
    t, p = _tensors(x, w, b, 1)
    t["self"], p["self"] = device_tensor(big, pc.ACL_FLOAT, view=[8, 2, 4], strides=[18, 9, 2])
    assert _run(t, 1) == 0
    np.testing.assert_array_equal(read_back(p["out"], (8, 2, 3), F32), pc.conv_tbc(x, w, b, 1))


def test_repeatable_executor_reads_current_data_and_streams():
    x, w, b = _problem(seed=4)
    t, p = _tensors(x, w, b, 1)
    rc, s = pc.aclrtCreateStream()
    assert rc == 0
    assert _run(t, 1, stream=s, repeat=3) == 0
    np.testing.assert_array_equal(read_back(p["out"], (6, 2, 4), F32), pc.conv_tbc(x, w, b, 1))
    assert pc.aclrtDestroyStream(s) == 0


def test_executors_belong_to_their_operator():
    x, w, b = _problem(seed=5)
    t, p = _tensors(x, w, b, 1)
    rc, ws_size, ex = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], 1, t["out"], 0)
    assert rc == 0
    rc, ws = pc.aclrtMalloc(max(ws_size, 1))
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 161002
    assert "aclnnConvTbcBackwardGetWorkspaceSize" in pc.aclGetRecentErrMsg()
    assert pc.aclnnConvTbc(ws, ws_size, ex, None) == 0           # still unused: the backward refused it
    assert pc.aclrtSynchronizeStream(None) == 0
    assert pc.aclnnConvTbc(ws, ws_size, ex, None) == 161002       # single use
    assert pc.aclnnConvTbc(ws, ws_size, None, None) == 161001


def test_phase2_workspace_checks():
    x, w, b = _problem(T_in=40, Cin=40, Cout=40, seed=6)
    t, p = _tensors(x, w, b, 1)
    rc, ws_size, ex = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], 1, t["out"], 0)
    assert rc == 0 and ws_size > 0
    assert pc.aclnnConvTbc(None, ws_size, ex, None) == 161001
    rc, ws_size, ex = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], 1, t["out"], 0)
    rc, small = pc.aclrtMalloc(ws_size)
    assert pc.aclnnConvTbc(small, ws_size - 1, ex, None) == 161002
    assert "expected at least" in pc.aclGetRecentErrMsg()


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950", "ascend910"])
def test_phase1_rules_in_order_on_every_profile(soc):
    pc.set_soc_version(soc)
    x, w, b = _problem(seed=7)
    t, _ = _tensors(x, w, b, 1)

    def p1(**kw):
        a = dict(self=t["self"], weight=t["weight"], bias=t["bias"], pad=1, out=t["out"], cube=0 if soc != "ascend910"
                 else 1)
        a.update(kw)
        rc, size, ex = pc.aclnnConvTbcGetWorkspaceSize(a["self"], a["weight"], a["bias"], a["pad"], a["out"],
                                                       a["cube"])
        return rc, pc.aclGetRecentErrMsg() if rc else ""

    assert p1()[0] == 0
    # 1. None first (self, weight, bias, out), before anything else
    assert p1(bias=None, out="junk") == (161001, p1(bias=None, out="junk")[1])
    rc, msg = p1(bias=None, out="junk")
    assert rc == 161001 and "bias" in msg
    rc, msg = p1(out="junk")
    assert rc == 161002 and "out is a str" in msg
    # 2. dtypes: weight must equal self's; a data-type error wins over a rank error
    w16, _ = device_tensor(w.astype(F16)[0], pc.ACL_FLOAT16)
    rc, msg = p1(weight=w16)
    assert rc == 161002 and "weight has data type FLOAT16" in msg
    d64, _ = device_tensor(np.zeros(4), 11)                 # DOUBLE bias
    rc, msg = p1(bias=d64)
    assert rc == 161002 and "bias has data type DOUBLE" in msg
    # bias of another float type is fine on every chip
    b16, _ = device_tensor(b.astype(F16), pc.ACL_FLOAT16)
    assert p1(bias=b16)[0] == 0
    # 3. ranks before formats
    b2, _ = device_tensor(np.zeros((4, 1), F32), pc.ACL_FLOAT, fmt=pc.ACL_FORMAT_NCHW)
    rc, msg = p1(bias=b2)
    assert rc == 161002 and "bias has 2 dims" in msg
    # 4. formats: self NCHW rejected; bias NCL fine except on ascend950
    xs, _ = device_tensor(x, pc.ACL_FLOAT, fmt=pc.ACL_FORMAT_NCHW)
    rc, msg = p1(self=xs)
    assert rc == 161002 and "self has format NCHW" in msg
    bn, _ = device_tensor(b, pc.ACL_FLOAT, fmt=pc.ACL_FORMAT_NCL)
    assert p1(bias=bn)[0] == (161002 if soc == "ascend950" else 0)
    # 5. shapes, in order
    rc, msg = p1(pad=256)
    assert rc == 161002 and "pad is 256" in msg
    x1, _ = device_tensor(x[:1], pc.ACL_FLOAT)
    o1, _ = device_tensor(np.zeros((1, 2, 4), F32), pc.ACL_FLOAT)
    rc, msg = p1(self=x1, out=o1)                           # T_in + pad = 2 < K = 3 (torch would accept it)
    assert rc == 161002 and "T_in + pad" in msg
    o_bad, _ = device_tensor(np.zeros((5, 2, 4), F32), pc.ACL_FLOAT)
    rc, msg = p1(out=o_bad)
    assert rc == 161002 and "out has shape [5, 2, 4]" in msg
    # 6. cubeMathType: 4 is CANN's alias of 0, rejected here with a note
    rc, msg = p1(cube=4)
    assert rc == 161002 and "computes it as 0" in msg
    rc, msg = p1(cube=0)
    assert rc == (161002 if soc == "ascend910" else 0)     # FLOAT KEEP_DTYPE is an error cell on ascend910
    # 7. out overlapping an input
    rc_, shared = pc.aclrtMalloc(4 * 200)
    xo = pc.aclCreateTensor([6, 2, 3], pc.ACL_FLOAT, [6, 3, 1], 0, pc.ACL_FORMAT_ND, [200], shared)
    oo = pc.aclCreateTensor([6, 2, 4], pc.ACL_FLOAT, [8, 4, 1], 10, pc.ACL_FORMAT_ND, [200], shared)
    rc, msg = p1(self=xo, out=oo)
    assert rc == 161002 and "out (bytes" in msg and "overlaps self" in msg


def test_hifloat8_through_the_cann_layer_on_ascend950():
    pc.set_soc_version("ascend950")
    x, w, b = _problem(T_in=7, Cin=5, Cout=3, seed=8)
    xc, wc = pc.hif8_encode(x), pc.hif8_encode(w)
    t, p = {}, {}
    t["self"], p["self"] = device_tensor(xc, pc.ACL_HIFLOAT8)
    t["weight"], p["weight"] = device_tensor(wc, pc.ACL_HIFLOAT8)
    t["bias"], p["bias"] = device_tensor(b, pc.ACL_FLOAT)
    t["out"], p["out"] = device_tensor(np.zeros((7, 2, 3), np.uint8), pc.ACL_HIFLOAT8)
    assert _run(t, 1, cube=3) == 0
    got = read_back(p["out"], (7, 2, 3), np.uint8)
    np.testing.assert_array_equal(got, pc.conv_tbc(xc, wc, b, 1, hif8_inputs=True, soc="ascend950"))
    pc.set_soc_version("ascend910b")                         # HIFLOAT8 self does not exist there
    rc, _, _ = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], 1, t["out"], 0)
    assert rc == 161002 and "self has data type HIFLOAT8" in pc.aclGetRecentErrMsg()


def test_empty_out_and_empty_input():
    x, w, b = _problem(T_in=6, B=0, seed=9)
    t, _ = _tensors(x, w, b, 1)
    assert _run(t, 1) == 0                                  # nothing to write
    x, w, b = _problem(T_in=6, Cin=0, seed=10)
    t, p = _tensors(x, w, b, 1)
    assert _run(t, 1) == 0
    np.testing.assert_array_equal(read_back(p["out"], (6, 2, 4), F32), np.broadcast_to(b, (6, 2, 4)))


def test_out_whose_elements_overlap_is_rejected():
    x, w, b = _problem(seed=11)
    t, _ = _tensors(x, w, b, 1)
    rc_, ptr = pc.aclrtMalloc(4 * 64)
    o = pc.aclCreateTensor([6, 2, 4], pc.ACL_FLOAT, [4, 0, 1], 0, pc.ACL_FORMAT_ND, [64], ptr)   # B stride 0
    rc, _, _ = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], 1, o, 0)
    assert rc == 161002 and "elements are distinct" in pc.aclGetRecentErrMsg()


def test_non_contiguous_out_staging_is_inside_the_workspace():
    x, w, b = _problem(seed=12)
    t, p = _tensors(x, w, b, 1)
    rc, ws_contig, _ = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], 1, t["out"], 0)
    storage = np.zeros((6, 4, 2), F32)
    t["out"], p["out"] = device_tensor(storage, pc.ACL_FLOAT, view=[6, 2, 4], strides=[8, 1, 2])
    rc, ws_strided, _ = pc.aclnnConvTbcGetWorkspaceSize(t["self"], t["weight"], t["bias"], 1, t["out"], 0)
    assert rc == 0 and ws_strided >= ws_contig + 6 * 2 * 4 * 4       # the staging copy is part of the workspace


def test_interleaved_out_that_shares_no_element_with_self_is_accepted():
    """'out must not overlap an input' is about elements: self on the even floats of one buffer and out on the
    odd ones overlap in their byte spans but share no byte, so the call runs (and writes only the odd floats);
    moved by one element, out shares self's elements and is refused."""
    x, w, b = _problem(T_in=6, B=2, Cin=4, Cout=4, K=3, pad=1, seed=13)
    t, _ = _tensors(x, w, b, 1)
    host = np.zeros(98, F32)
    host[0:96:2] = x.ravel()
    rc_, ptr = pc.aclrtMalloc(host.nbytes)
    assert pc.aclrtMemcpy(ptr, host.nbytes, host, host.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    self_ = pc.aclCreateTensor([6, 2, 4], pc.ACL_FLOAT, [16, 8, 2], 0, pc.ACL_FORMAT_ND, [98], ptr)
    out = pc.aclCreateTensor([6, 2, 4], pc.ACL_FLOAT, [16, 8, 2], 1, pc.ACL_FORMAT_ND, [98], ptr)
    t["self"], t["out"] = self_, out
    assert _run(t, 1) == 0, pc.aclGetRecentErrMsg()
    got = read_back(ptr, (98,), F32)
    assert np.array_equal(got[0:96:2], x.ravel()) and got[97] == 0       # self and the last float untouched
    want = pc.conv_tbc(x, w, b, 1)
    assert np.array_equal(got[1:96:2].reshape(6, 2, 4), want)
    shifted = pc.aclCreateTensor([6, 2, 4], pc.ACL_FLOAT, [16, 8, 2], 2, pc.ACL_FORMAT_ND, [98], ptr)
    rc, _, _ = pc.aclnnConvTbcGetWorkspaceSize(self_, t["weight"], t["bias"], 1, shifted, 0)
    assert rc == 161002 and "out" in pc.aclGetRecentErrMsg() and "overlaps self" in pc.aclGetRecentErrMsg()
    from pyconvtbc._validation import share_elements
    assert not share_elements(self_, out) and share_elements(self_, shifted)
    assert share_elements(self_, out, max_work=0)      # undecided within the work limit: the spans count
