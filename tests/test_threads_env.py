"""Thread count when num_threads is None: $PYCONVTBC_NUM_THREADS, then OpenMP's own count (which
$OMP_NUM_THREADS and threadpoolctl set), then every usable core.  Environment variables read by the OpenMP
runtime at load time are tested in subprocesses."""
import json
import os
import subprocess
import sys

import pytest

import pyconvtbc as pc
from pyconvtbc import _op_conv_tbc_backward as api
from pyconvtbc._kernels import _openmp
from child_python import NEUTRAL_CWD, child_env
from conftest import acl_problem, make_problem, phase1

needs_openmp = pytest.mark.skipif(not pc.have_openmp(), reason="built without OpenMP: always one thread")

PROBE = r"""
import json, sys
import pyconvtbc as pc
from pyconvtbc import _op_conv_tbc_backward as api
from pyconvtbc._kernels._openmp import effective_threads
out = {"effective": effective_threads()}
seen = []
real = api.run_plan_arrays
api.run_plan_arrays = lambda plan, *a: seen.append(plan.num_threads) or real(plan, *a)
import numpy as np
rng = np.random.default_rng(0)
pc.conv_tbc_backward(rng.standard_normal((6, 2, 4), dtype=np.float32), rng.standard_normal((6, 2, 3), dtype=np.float32),
                     rng.standard_normal((3, 3, 4), dtype=np.float32), np.zeros(4, np.float32), 1)
out["numpy_layer"] = seen[0]
out["cpu_count"] = __import__("pyconvtbc._kernels._openmp", fromlist=["x"]).cpu_count()
print(json.dumps(out))
"""


def _probe(**env):
    e = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "PYCONVTBC_NUM_THREADS")}
    r = subprocess.run([sys.executable, "-c", PROBE], env=child_env(e, **env), capture_output=True, text=True,
                       timeout=120, cwd=NEUTRAL_CWD)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_omp_num_threads_1_gives_one_thread():
    out = _probe(OMP_NUM_THREADS="1")
    assert out["effective"] == 1 and out["numpy_layer"] == 1


@needs_openmp
def test_omp_num_threads_is_followed():
    out = _probe(OMP_NUM_THREADS="3")
    assert out["effective"] == 3 and out["numpy_layer"] == 3


@needs_openmp
def test_pyconvtbc_num_threads_wins_over_omp_num_threads():
    out = _probe(OMP_NUM_THREADS="1", PYCONVTBC_NUM_THREADS="2")
    assert out["effective"] == 2 and out["numpy_layer"] == 2


@needs_openmp
def test_default_is_every_usable_core():
    out = _probe()
    assert out["effective"] == out["numpy_layer"] == out["cpu_count"]


@needs_openmp
def test_explicit_argument_wins(monkeypatch):
    monkeypatch.setenv("PYCONVTBC_NUM_THREADS", "3")
    assert _openmp.effective_threads(2) == 2
    assert _openmp.effective_threads() == 3


@pytest.mark.parametrize("value", ["0", "-1", "1.5", "two", "1e3", "1025"])
def test_bad_environment_value_is_named(monkeypatch, value):
    monkeypatch.setenv("PYCONVTBC_NUM_THREADS", value)
    with pytest.raises(ValueError, match="PYCONVTBC_NUM_THREADS"):
        _openmp.effective_threads()
    with pytest.raises(pc.AclnnError, match="PYCONVTBC_NUM_THREADS") as e:
        pc.conv_tbc_backward(*make_problem(), 1)
    assert e.value.status == 161002


@pytest.mark.parametrize("value", ["\u00b2", "\u0661\u0662", "\uff13", "4\u00b2"])
def test_non_ascii_digits_in_the_environment_are_named(monkeypatch, value):
    """Characters str.isdigit accepts but that are not ASCII digits ('²', Arabic-Indic or full-width digits):
    refused with the variable, the value and the range named (before: int()'s "invalid literal" for '²', and
    '١٢' read as 12), in both layers."""
    monkeypatch.setenv("PYCONVTBC_NUM_THREADS", value)
    expected = f"PYCONVTBC_NUM_THREADS is {value!r}; expected an integer in [1, 1024]"
    with pytest.raises(ValueError) as e:
        _openmp.effective_threads()
    assert str(e.value) == expected
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(*make_problem(), 1)
    assert e.value.status == 161002 and expected in e.value.message
    rc, _, ex = phase1(acl_problem(*make_problem())[0])
    assert rc == 161002 and ex is None and expected in pc.aclGetRecentErrMsg()


@pytest.mark.parametrize("value", [0, -1, 1.5, "2", True, 1025, 10 ** 30])
def test_bad_argument_is_named(value):
    with pytest.raises(pc.AclnnError, match="num_threads") as e:
        pc.conv_tbc_backward(*make_problem(), 1, num_threads=value)
    assert e.value.status == 161002 and "PYCONVTBC_NUM_THREADS" not in e.value.message


@needs_openmp
def test_omp_set_num_threads_is_followed_and_not_cached(monkeypatch):
    monkeypatch.delenv("PYCONVTBC_NUM_THREADS", raising=False)
    seen = []
    real = api.run_plan_arrays
    monkeypatch.setattr(api, "run_plan_arrays", lambda plan, *a: seen.append(plan.num_threads) or real(plan, *a))
    before = _openmp.omp_max_threads()
    args = make_problem()
    try:
        _openmp._set_omp_max_threads(1)
        pc.conv_tbc_backward(*args, 1)
        _openmp._set_omp_max_threads(2)
        pc.conv_tbc_backward(*args, 1)  # same shapes: a cached plan must not keep the old count
    finally:
        _openmp._set_omp_max_threads(before)
    assert seen == [1, 2]


def test_threadpoolctl_sees_and_limits_our_pool():
    threadpoolctl = pytest.importorskip("threadpoolctl")
    if not pc.have_openmp():
        pytest.skip("built without OpenMP")
    code = r"""
import json, threadpoolctl, pyconvtbc as pc
from pyconvtbc import _op_conv_tbc_backward as api
from pyconvtbc._kernels._openmp import effective_threads
info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "openmp"]
seen = []
real = api.run_plan_arrays
api.run_plan_arrays = lambda plan, *a: seen.append(plan.num_threads) or real(plan, *a)
import numpy as np
args = [np.ones(s, np.float32) for s in ((6, 2, 4), (6, 2, 3), (3, 3, 4), (4,))]
pc.conv_tbc_backward(*args, 1)
with threadpoolctl.threadpool_limits(limits=1, user_api="openmp"):
    inside = effective_threads()
    pc.conv_tbc_backward(*args, 1)
after = effective_threads()
pc.conv_tbc_backward(*args, 1)
print(json.dumps({"openmp": len(info), "inside": inside, "after": after, "seen": seen}))
"""
    e = {k: v for k, v in os.environ.items() if k not in ("OMP_NUM_THREADS", "PYCONVTBC_NUM_THREADS")}
    e["OMP_NUM_THREADS"] = "2"
    r = subprocess.run([sys.executable, "-c", code], env=e, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["openmp"] >= 1               # threadpoolctl finds the OpenMP runtime our kernels use
    assert out["inside"] == 1 and out["after"] == 2
    assert out["seen"] == [2, 1, 2]         # the kernels ran with 2, then 1 under the limit, then 2 again
