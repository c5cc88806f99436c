"""The two-phase API: executors, workspaces, streams, and the document's example ported line by line."""
import numpy as np
import pytest

import pyconvtbc as pc
from conftest import acl_problem, make_problem, phase1, read_back, run_acl
from reference import abs_products_ref, conv_tbc_backward_ref, fp32_bound


def _ws(size):
    if not size:
        return None
    rc, ws = pc.aclrtMalloc(size)
    assert rc == 0
    return ws


def test_document_example_ported_line_by_line(capsys):
    from pyconvtbc import _demo
    results = {}
    rc, stream = _demo.aclnnConvTbcBackwardTest(0, results)
    assert rc == 0, pc.aclGetRecentErrMsg()
    _demo.Finalize(0, stream)
    np.testing.assert_array_equal(results["gradInput"], np.full((5, 1, 2), 2.0, np.float32))
    np.testing.assert_array_equal(results["gradWeight"], np.full((1, 2, 2), 5.0, np.float32))
    np.testing.assert_array_equal(results["gradBias"], np.full(2, 5.0, np.float32))
    out = capsys.readouterr().out
    assert "gradInputResult[9] is: 2.000000" in out
    assert "gradWeightResult[3] is: 5.000000" in out
    assert "gradBiasResult[1] is: 5.000000" in out


def test_demo_command(capsys):
    from pyconvtbc.__main__ import main
    assert main(["demo"]) == 0
    out = capsys.readouterr().out
    assert out.count("is: 2.000000") == 10 and out.count("is: 5.000000") == 6
    assert "gradWeight = [5.000000 5.000000 5.000000 5.000000]" in out


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_cann_layer_matches_reference_and_numpy_layer(dtype):
    dy, x, w, b = make_problem(T_in=9, B=3, Cin=5, Cout=4, K=3, pad=2, dtype=dtype, seed=3)
    t, p = acl_problem(dy, x, w, b)
    # the default (non-deterministic) mode adds the per-item gradWeight chains in a per-call order: compare the
    # deterministic modes of both layers
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0
    try:
        assert run_acl(t, pad=2) == 0, pc.aclGetRecentErrMsg()
    finally:
        pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 0)
    gi = read_back(p["gradInput"], x.shape, dtype)
    gw = read_back(p["gradWeight"], w.shape, dtype)
    gb = read_back(p["gradBias"], b.shape, dtype)
    ngi, ngw, ngb = pc.conv_tbc_backward(dy, x, w, b, 2, deterministic=True)
    for a, c in ((gi, ngi), (gw, ngw), (gb, ngb)):
        np.testing.assert_array_equal(a, c)
    rgi, rgw, rgb = conv_tbc_backward_ref(dy, x, w, 2)
    agi, agw, agb = abs_products_ref(dy, x, w, 2)
    eps = 0.0 if dtype == np.float32 else 2.0 ** -11
    T_out = dy.shape[0]
    assert np.all(np.abs(gi - rgi) <= fp32_bound(3 * 4, agi, eps, rgi))
    assert np.all(np.abs(gw - rgw) <= fp32_bound(3 * T_out, agw, eps, rgw))
    assert np.all(np.abs(gb - rgb) <= fp32_bound(3 * T_out, agb, eps, rgb))


def test_phase1_captures_descriptors_phase2_reads_data():
    dy, x, w, b = make_problem(seed=5)
    t, p = acl_problem(dy, x, w, b)
    rc, ws_size, ex = phase1(t)
    assert rc == 0
    # change the data after phase 1: phase 2 must see the new values
    x2 = (x * 2).astype(np.float32)
    pc.aclrtMemcpy(p["input"], x2.nbytes, x2, x2.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE)
    # and destroying the caller's descriptor does not affect the captured one
    pc.aclDestroyTensor(t["input"])
    assert pc.aclnnConvTbcBackward(_ws(ws_size), ws_size, ex, None) == 0
    assert pc.aclrtSynchronizeStream(None) == 0
    gw = read_back(p["gradWeight"], w.shape, np.float32)
    _, rgw, _ = conv_tbc_backward_ref(dy, x2, w, 1)
    _, agw, _ = abs_products_ref(dy, x2, w, 1)
    assert np.all(np.abs(gw - rgw) <= fp32_bound(2 * dy.shape[0], agw))


def test_executor_single_use():
    t, _ = acl_problem(*make_problem())
    rc, ws_size, ex = phase1(t)
    ws = _ws(ws_size)
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
    assert "already used" in pc.aclGetRecentErrMsg()


def test_single_use_executor_destroy_and_repeatable_calls():
    t, _ = acl_problem(*make_problem())
    for run_first in (False, True):
        rc, ws_size, ex = phase1(t)
        ws = _ws(ws_size)
        if run_first:
            assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0
            assert pc.aclSetAclOpExecutorRepeatable(ex) == pc.ACLNN_ERR_PARAM_INVALID   # too late: it ran
        assert pc.aclDestroyAclOpExecutor(ex) == 0
        assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
        assert pc.aclSetAclOpExecutorRepeatable(ex) == pc.ACLNN_ERR_PARAM_INVALID
    rc, ws_size, ex = phase1(t)
    assert pc.aclSetAclOpExecutorRepeatable(ex) == 0
    assert pc.aclSetAclOpExecutorRepeatable(ex) == 0                                   # twice is fine
    assert pc.aclDestroyAclOpExecutor(ex) == 0
    # a destroyed repeatable executor: the message says destroyed, not the single-use hint
    ws = _ws(ws_size)
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
    msg = pc.aclGetRecentErrMsg()
    assert "executor was already destroyed" in msg and "expected a live executor" in msg
    assert "single-use" not in msg


def test_repeatable_executor():
    dy, x, w, b = make_problem(seed=7)
    t, p = acl_problem(dy, x, w, b)
    rc, ws_size, ex = phase1(t)
    assert pc.aclSetAclOpExecutorRepeatable(ex) == 0
    ws = _ws(ws_size)
    results = []
    for scale in (1, 3):
        d = (dy * scale).astype(np.float32)
        pc.aclrtMemcpy(p["self"], d.nbytes, d, d.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE)
        assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0
        assert pc.aclrtSynchronizeStream(None) == 0
        results.append(read_back(p["gradBias"], b.shape, np.float32))
    np.testing.assert_allclose(results[1], 3 * results[0], rtol=1e-5)
    assert pc.aclDestroyAclOpExecutor(ex) == 0
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
    assert pc.aclDestroyAclOpExecutor(ex) == pc.ACLNN_ERR_PARAM_INVALID


def test_executor_none_codes():
    assert pc.aclSetAclOpExecutorRepeatable(None) == pc.ACLNN_ERR_INNER_NULLPTR
    assert pc.aclDestroyAclOpExecutor(None) == pc.ACLNN_ERR_INNER_NULLPTR
    assert pc.aclnnConvTbcBackward(None, 0, None, None) == pc.ACLNN_ERR_PARAM_NULLPTR
    assert "executor" in pc.aclGetRecentErrMsg()
    assert pc.aclnnConvTbcBackward(None, 0, "executor", None) == pc.ACLNN_ERR_PARAM_INVALID


def _needs_workspace():
    t, _ = acl_problem(*make_problem(T_in=20, B=4, Cin=8, Cout=8, K=3, pad=1))
    rc, ws_size, ex = phase1(t)
    assert rc == 0
    if ws_size == 0:
        pytest.skip("this plan needs no workspace")
    return ws_size, ex


def test_missing_workspace_releases_executor():
    ws_size, ex = _needs_workspace()
    assert pc.aclnnConvTbcBackward(None, ws_size, ex, None) == pc.ACLNN_ERR_PARAM_NULLPTR
    assert "workspace is None" in pc.aclGetRecentErrMsg()
    assert pc.aclnnConvTbcBackward(_ws(ws_size), ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
    # the retry's message says why: released by the failed call (it never ran), not "already used"
    msg = pc.aclGetRecentErrMsg()
    assert "released when an earlier phase-2 call with it failed" in msg and "aclnnConvTbcBackwardGetWorkspaceSize" in msg
    assert "already used" not in msg
    assert pc.aclSetAclOpExecutorRepeatable(ex) == pc.ACLNN_ERR_PARAM_INVALID    # too late for that too
    assert pc.aclDestroyAclOpExecutor(ex) == 0


def test_failure_after_the_executor_is_taken_releases_it():
    """A check late in phase 2 (a stream that is not a stream) fails after the call took the executor: the retry
    still reports the release, not a run."""
    ws_size, ex = _needs_workspace()
    assert pc.aclnnConvTbcBackward(_ws(ws_size), ws_size, ex, "stream") == pc.ACLNN_ERR_PARAM_INVALID
    assert "stream" in pc.aclGetRecentErrMsg()
    _, stream = pc.aclrtCreateStream()
    assert pc.aclnnConvTbcBackward(_ws(ws_size), ws_size, ex, stream) == pc.ACLNN_ERR_PARAM_INVALID
    assert "released when an earlier phase-2 call with it failed" in pc.aclGetRecentErrMsg()
    assert pc.aclrtDestroyStream(stream) == 0


def test_small_workspace_rejected():
    ws_size, ex = _needs_workspace()
    assert pc.aclnnConvTbcBackward(_ws(ws_size - 1), ws_size - 1, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
    assert f"expected at least {ws_size}" in pc.aclGetRecentErrMsg()


def test_workspace_shorter_than_claimed_rejected():
    ws_size, ex = _needs_workspace()
    small = _ws(ws_size - 1)
    assert pc.aclnnConvTbcBackward(small, ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
    assert "workspace" in pc.aclGetRecentErrMsg()


def test_workspace_not_a_device_buffer():
    ws_size, ex = _needs_workspace()
    host = np.zeros(ws_size, np.uint8)
    assert pc.aclnnConvTbcBackward(host, ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID


def test_freed_buffer_between_phases():
    t, p = acl_problem(*make_problem())
    rc, ws_size, ex = phase1(t)
    pc.aclrtFree(p["gradWeight"])
    assert pc.aclnnConvTbcBackward(_ws(ws_size), ws_size, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
    assert "gradWeight" in pc.aclGetRecentErrMsg() and "freed" in pc.aclGetRecentErrMsg()


def test_bad_stream():
    t, _ = acl_problem(*make_problem())
    rc, ws_size, ex = phase1(t)
    rc2, s = pc.aclrtCreateStream()
    pc.aclrtDestroyStream(s)
    assert pc.aclnnConvTbcBackward(_ws(ws_size), ws_size, ex, s) == pc.ACLNN_ERR_PARAM_INVALID
    assert "stream" in pc.aclGetRecentErrMsg()


def test_deterministic_option_read_at_phase1():
    t, _ = acl_problem(*make_problem())
    rc, _, ex = phase1(t)
    assert ex.plan.deterministic is False
    pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1)
    rc, _, ex2 = phase1(t)
    assert ex2.plan.deterministic is True and ex.plan.deterministic is False


def test_emulation_options_read_at_phase1():
    t, _ = acl_problem(*make_problem())
    pc.set_emulation_options(hf32_rounding="nearest_even", saturate=True)
    rc, _, ex = phase1(t, cube=3)
    pc.set_emulation_options(hf32_rounding="half_away", saturate=False)
    assert dict(ex.plan.options)["hf32_rounding"] == "nearest_even"
    assert ex.plan.mode[2] == 1 and ex.plan.mode[4] is True
    with pytest.raises(ValueError):
        pc.set_emulation_options(hf32_mantissa_bits=12)
    with pytest.raises(ValueError):
        pc.set_emulation_options(rounding="ta")


def test_a_claimed_workspace_must_be_real_even_when_none_is_needed():
    """cann.md: a workspace that is not a live device buffer of at least workspace_size bytes is 161002, also
    where phase 1 asked for none (an empty problem) but the call claims one; a claim of 0 ignores it."""
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy[:, :0], x[:, :0], w, b)              # B = 0: nothing to compute, no workspace
    rc, ws_size, ex = phase1(t)
    assert rc == 0 and ws_size == 0
    assert pc.aclSetAclOpExecutorRepeatable(ex) == 0
    _, freed = pc.aclrtMalloc(128)
    assert pc.aclrtFree(freed) == 0
    for bogus in (bytearray(128), freed, "workspace", _ws(64)):
        assert pc.aclnnConvTbcBackward(bogus, 100, ex, None) == pc.ACLNN_ERR_PARAM_INVALID
        assert "expected a live device buffer" in pc.aclGetRecentErrMsg()
    assert pc.aclnnConvTbcBackward(_ws(128), 100, ex, None) == 0
    assert pc.aclnnConvTbcBackward("ignored", 0, ex, None) == 0
    assert pc.aclrtSynchronizeStream(None) == 0
    assert pc.aclDestroyAclOpExecutor(ex) == 0
