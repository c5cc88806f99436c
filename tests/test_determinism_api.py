"""Determinism through both public layers (issue 5, SEMANTICS.md section 7, docs/reliability.md).

Deterministic mode -- ``aclrtCtxSetSysParamOpt(ACL_OPT_DETERMINISTIC, 1)`` (read at phase 1) in the CANN layer,
``deterministic=True`` in the NumPy layer -- must give bitwise identical results for 1, 2, 3 and 4 threads
(CANN layer: ``PYCONVTBC_NUM_THREADS``, read at phase 1; NumPy layer: ``num_threads=``) and run to run, for
FLOAT / FLOAT16 / BF16 operands and every cubeMathType, on a shape whose reductions are split over threads
(T=300, B=8, C=64, K=5: ~2*10^8 flops, far above the kernels' serial threshold).  ascend950 is deterministic
by default.
"""
import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from conftest import acl_problem, read_back
from reference import abs_products_ref, conv_tbc_backward_ref, gamma

T_IN, B, C, K, PAD = 300, 8, 64, 5, 2          # T_out = 300
DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16}
THREADS = (1, 2, 3, 4)


def problem(dtype, seed=5):
    rng = np.random.default_rng(seed)
    T_out = T_IN + 2 * PAD - K + 1
    mk = lambda *s: rng.standard_normal(s).astype(dtype)
    return mk(T_out, B, C), mk(T_IN, B, C), mk(K, C, C), mk(C)


def bits(arrs):
    return tuple(np.ascontiguousarray(a).view(np.uint8).tobytes() for a in arrs)


def cann_run(tensors, ptrs, p, cube, threads, monkeypatch, expect_det=True):
    """Both phases with PYCONVTBC_NUM_THREADS=threads at phase 1; returns the outputs' bytes."""
    monkeypatch.setenv("PYCONVTBC_NUM_THREADS", str(threads))
    rc, ws_size, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(
        tensors["self"], tensors["input"], tensors["weight"], tensors["bias"], PAD, cube,
        tensors["gradInput"], tensors["gradWeight"], tensors["gradBias"])
    assert rc == 0, pc.aclGetRecentErrMsg()
    monkeypatch.delenv("PYCONVTBC_NUM_THREADS")              # read at phase 1: phase 2 does not look
    assert ex.plan.num_threads == (threads if pc.have_openmp() else 1)
    assert ex.plan.deterministic is expect_det
    rc, ws = pc.aclrtMalloc(ws_size)
    assert rc == 0
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0
    assert pc.aclrtSynchronizeStream(None) == 0, pc.aclGetRecentErrMsg()
    pc.aclrtFree(ws)
    dy, x, w, b = p
    out = (read_back(ptrs["gradInput"], x.shape, x.dtype), read_back(ptrs["gradWeight"], w.shape, w.dtype),
           read_back(ptrs["gradBias"], b.shape, b.dtype))
    for n in ("gradInput", "gradWeight", "gradBias"):       # no stale result can pass for a new one
        z = np.full(ptrs[n].nbytes, 0xFF, np.uint8)
        pc.aclrtMemcpy(ptrs[n], z.size, z, z.size, pc.ACL_MEMCPY_HOST_TO_DEVICE)
    return bits(out)


@pytest.fixture(scope="module")
def problems():
    return {name: problem(dt) for name, dt in DTYPES.items()}


@pytest.mark.parametrize("cube", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", list(DTYPES))
def test_deterministic_mode_bitwise_over_threads_both_layers(dtype, cube, problems, monkeypatch):
    p = problems[dtype]
    # NumPy layer: deterministic=True, num_threads 1..4, and the 4-thread call again (run to run)
    numpy_runs = [bits(pc.conv_tbc_backward(*p, PAD, cube_math_type=cube, deterministic=True, num_threads=n))
                  for n in THREADS + (4, 3)]
    assert len(set(numpy_runs)) == 1, "NumPy layer: deterministic results differ between thread counts / runs"
    # CANN layer: the context option, PYCONVTBC_NUM_THREADS read at phase 1
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0
    tensors, ptrs = acl_problem(*p)
    cann_runs = [cann_run(tensors, ptrs, p, cube, n, monkeypatch) for n in THREADS + (4, 2)]
    assert len(set(cann_runs)) == 1, "CANN layer: deterministic results differ between thread counts / runs"
    assert cann_runs[0] == numpy_runs[0], "the two layers disagree"
    # and the result is the right one (a bitwise-stable wrong answer would pass the checks above)
    gi = np.frombuffer(cann_runs[0][0], p[1].dtype).astype(np.float64).reshape(p[1].shape)
    ref_gi = conv_tbc_backward_ref(*(a.astype(np.float64) for a in p[:3]), PAD)[0]
    assert np.allclose(gi, ref_gi, rtol=0.05, atol=0.5)


@pytest.mark.parametrize("gw_dtype", ["hifloat8", "float8_e4m3fn"])
def test_deterministic_8bit_grad_weight(gw_dtype, problems, monkeypatch):
    p = problems["fp32"]
    runs = {bits(pc.conv_tbc_backward(*p, PAD, grad_weight_dtype=gw_dtype, deterministic=True, num_threads=n))
            for n in THREADS}
    assert len(runs) == 1


def test_ascend950_is_deterministic_by_default(problems, monkeypatch):
    pc.set_soc_version("ascend950")
    for dtype in ("fp32", "bf16"):
        p = problems[dtype]
        assert pc.aclrtCtxGetSysParamOpt(pc.ACL_OPT_DETERMINISTIC) == (0, 1)    # never set: the profile's
        numpy_runs = {bits(pc.conv_tbc_backward(*p, PAD, cube_math_type=1, num_threads=n)) for n in THREADS}
        tensors, ptrs = acl_problem(*p)
        cann_runs = {cann_run(tensors, ptrs, p, 1, n, monkeypatch, expect_det=True) for n in THREADS}
        assert len(numpy_runs) == 1 and cann_runs == numpy_runs


def test_the_option_is_read_at_phase1(problems, monkeypatch):
    """Switching the option or the thread count after phase 1 changes nothing for that executor."""
    p = problems["fp16"]
    tensors, ptrs = acl_problem(*p)
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1) == 0
    monkeypatch.setenv("PYCONVTBC_NUM_THREADS", "3")
    rc, ws_size, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(
        tensors["self"], tensors["input"], tensors["weight"], tensors["bias"], PAD, 0,
        tensors["gradInput"], tensors["gradWeight"], tensors["gradBias"])
    assert pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 0) == 0
    monkeypatch.setenv("PYCONVTBC_NUM_THREADS", "1")
    assert (ex.plan.deterministic, ex.plan.num_threads) == (True, 3 if pc.have_openmp() else 1)


def test_default_mode_within_the_fp32_bound_of_deterministic(problems):
    """The default mode promises less (docs/reliability.md): its reduction order may depend on the thread
    count, so its results may differ from deterministic mode's in the last bits -- never by more than the
    fp32 accumulation bound gamma_n * sum|products| (plus the output rounding)."""
    p = problems["fp32"]
    det = pc.conv_tbc_backward(*p, PAD, deterministic=True, num_threads=1)
    dy, x, w, _ = (a.astype(np.float64) for a in p)
    agi, agw, agb = abs_products_ref(dy, x, w, PAD)
    for n in THREADS:
        got = pc.conv_tbc_backward(*p, PAD, deterministic=False, num_threads=n)
        for g, d, a, terms in zip(got, det, (agi, agw, agb), (K * C, B * T_IN, B * T_IN)):
            assert np.all(np.abs(g.astype(np.float64) - d) <= 2 * gamma(terms) * a + 1e-30)


def test_sequential_form_has_one_fixed_schedule(problems):
    """The "sequential" accumulation form has no pieces to reorder: its non-deterministic mode is bitwise the
    deterministic one, for every thread count (docs/reliability.md, "Determinism")."""
    for dtype in DTYPES:
        p = problems[dtype]
        runs = {bits(pc.conv_tbc_backward(*p, PAD, deterministic=False, num_threads=n,
                                          accumulation="sequential")) for n in THREADS}
        runs.add(bits(pc.conv_tbc_backward(*p, PAD, deterministic=True, num_threads=2, accumulation="sequential")))
        assert len(runs) == 1, dtype
