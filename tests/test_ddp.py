"""Scale-out with torch.distributed: examples/ddp_conv_tbc.py runs 2 processes (DDP, gloo) on this machine; the
emulated layers' gradients after the all-reduce equal the single-process ones, and each process's kernels use the
thread count the user set.

What "equal" means here, exactly:

1. Each rank's local gradients (recorded by a DDP communication hook before the all-reduce) are bitwise equal to a
   single-process run on the same shard: the emulated backward is deterministic (``deterministic=True``) and a
   sample's forward and backward do not depend on the other samples of the batch.
2. The averaged gradient (param.grad after DDP's all-reduce, on both ranks) is bitwise equal to the fp32 average
   ``g0 / 2 + g1 / 2`` of those single-process gradients: DDP's default hook divides each rank's gradient by the
   world size (2: exact, a power of two) and gloo sums the two halves (one fp32 addition, commutative, so both
   ranks get the same bits).
3. Against ONE process over the full batch the gradients differ only in how the fp32 sums over the batch are
   grouped (the full batch's mean loss gives each sample exactly half the shard's grad_output, a power-of-two
   scale that commutes with every rounding; the test checks this for the first layer's grad_output), so
   |averaged - full| <= (gamma(n) + gamma(n/2)) * S + u * |averaged|, with u the unit roundoff of an fp32
   addition (2^-23, allowing rounding toward zero), gamma(m) = m*u / (1 - m*u) the classic bound of a sum of m
   terms in any order, n = B * T_out the terms of each gradWeight / gradBias element over the full batch, and
   S the sum of the terms' magnitudes (float64, from the captured operands; operands rounded to HF32 are at most
   (1 + 2^-11) times larger in magnitude).
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import load_repo_module

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")
if not (dist.is_available() and dist.is_gloo_available()):
    pytest.skip("torch.distributed with the gloo backend is not available", allow_module_level=True)

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "examples" / "ddp_conv_tbc.py"

# Loaded at start-up by every Python process of the run (PYTHONPATH): records the thread count of each emulated
# kernel call (the plan's num_threads, which the kernel's parallel region uses), one file per process.
_PROBE = '''
import os
_LOG = os.environ.get("PYCONVTBC_TEST_THREAD_LOG")
if _LOG:
    from pyconvtbc._op_conv_tbc import ConvTbc as _Fwd
    from pyconvtbc._op_conv_tbc_backward import ConvTbcBackward as _Bwd

    def _wrap(cls, kind):
        real = cls.run_arrays                     # the NumPy layer's kernel call of the operator

        def recorded(self, plan, *a, **k):
            with open(os.path.join(_LOG, f"{os.getpid()}.txt"), "a") as fh:
                fh.write(f"{kind} {plan.num_threads}\\n")
            return real(self, plan, *a, **k)
        cls.run_arrays = recorded
    _wrap(_Bwd, "backward")
    _wrap(_Fwd, "forward")
'''


@pytest.fixture(scope="module")
def ddp_run(tmp_path_factory):
    if not SCRIPT.exists():
        pytest.skip("examples/ddp_conv_tbc.py is not in this tree")
    tmp = tmp_path_factory.mktemp("ddp")
    probe, log, dump = tmp / "probe", tmp / "threads", tmp / "dump"
    probe.mkdir()
    log.mkdir()
    (probe / "sitecustomize.py").write_text(_PROBE)
    env = {k: v for k, v in os.environ.items() if k not in ("PYCONVTBC_NUM_THREADS", "OMP_NUM_THREADS")}
    # the probe only: pyconvtbc is the one the tests import (editable or installed), never the source tree itself
    # (an unbuilt tree shadows an installed wheel)
    env["PYTHONPATH"] = os.pathsep.join([str(probe)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["PYCONVTBC_TEST_THREAD_LOG"] = str(log)
    # fork where the platform has it: the workers then do not import torch again (half the time of spawn, the
    # example's default); what is compared does not depend on how the processes start
    import multiprocessing
    start = "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"
    r = subprocess.run([sys.executable, str(SCRIPT), "--world-size", "2", "--steps", "2", "--threads", "1",
                        "--cube", "USE_HF32", "--dump", str(dump), "--start-method", start], cwd=tmp, env=env,
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and ("gloo" in r.stderr.lower() and "not available" in r.stderr.lower()):
        pytest.skip(f"gloo cannot run here: {r.stderr[-500:]}")
    assert r.returncode == 0, r.stderr[-4000:]
    ranks = [torch.load(dump / f"rank{i}.pt", weights_only=False) for i in range(2)]
    return {"stdout": r.stdout, "ranks": ranks, "log": log, "example": load_repo_module("examples/ddp_conv_tbc.py")}


def _single(example, x, y, capture=False):
    """Gradients of one process on (x, y), and the captured backward operands when asked."""
    from pyconvtbc import study
    model = example.make_model("USE_HF32", num_threads=1)
    if capture:
        with study.capture(model) as cap:
            example.loss_fn(model(x), y).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}, cap.records
    example.loss_fn(model(x), y).backward()
    return {n: p.grad.clone() for n, p in model.named_parameters()}


def test_each_rank_computes_the_single_process_gradients_of_its_shard(ddp_run):
    ex = ddp_run["example"]
    x, y = ex.make_batch(0)
    for rank, rec in enumerate(ddp_run["ranks"]):
        first = rec["first_step"]
        assert torch.equal(first["x"], ex.shard(x, rank, 2)) and torch.equal(first["y"], ex.shard(y, rank, 2))
        single = _single(ex, first["x"], first["y"])
        assert set(single) == set(first["local"]) == {"0.weight", "0.bias", "2.weight", "2.bias"}
        for name, g in single.items():
            assert torch.equal(first["local"][name], g), (rank, name)


def test_the_all_reduced_gradient_is_the_fp32_average_of_the_shards(ddp_run):
    ex = ddp_run["example"]
    g = [_single(ex, rec["first_step"]["x"], rec["first_step"]["y"]) for rec in ddp_run["ranks"]]
    for name in g[0]:
        expected = g[0][name] / 2 + g[1][name] / 2            # fp32, as DDP: divide by the world size, then sum
        for rec in ddp_run["ranks"]:
            assert torch.equal(rec["first_step"]["averaged"][name], expected), name
        assert not torch.equal(g[0][name], g[1][name])        # the shards really differ


def test_the_all_reduced_gradient_matches_one_process_on_the_full_batch(ddp_run):
    ex = ddp_run["example"]
    from pyconvtbc.study import reference_gradients
    x, y = ex.make_batch(0)
    full, records = _single(ex, x, y, capture=True)
    shard_records = [_single(ex, ex.shard(x, r, 2), ex.shard(y, r, 2), capture=True)[1] for r in range(2)]
    # each sample's grad_output in the full batch is exactly half its grad_output in its shard (every layer)
    for rec in records:
        for r in range(2):
            (twin,) = [s for s in shard_records[r] if s["name"] == rec["name"]]
            np.testing.assert_array_equal(2 * ex.shard(torch.from_numpy(rec["grad_output"]), r, 2).numpy(),
                                          twin["grad_output"])
    u = 2.0 ** -23
    averaged = ddp_run["ranks"][0]["first_step"]["averaged"]
    for rec in records:                                       # one per ConvTBC layer: "0" and "2"
        dy, xin, w = (np.abs(rec[k].astype(np.float64)) for k in ("grad_output", "input", "weight"))
        n = dy.shape[0] * dy.shape[1]                         # B * T_out terms per gradWeight / gradBias element
        gamma = lambda m: m * u / (1 - m * u)                 # noqa: E731
        S = {"weight": reference_gradients(dy, xin, w, rec["pad"])[1] * (1 + 2.0 ** -11) ** 2,
             "bias": dy.reshape(-1, dy.shape[2]).sum(axis=0)}
        for kind in ("weight", "bias"):
            name = f"{rec['name']}.{kind}"
            a = averaged[name].double().numpy()
            tol = (gamma(n) + gamma(n // 2)) * S[kind] + u * np.abs(a)
            diff = np.abs(a - full[name].double().numpy())
            assert (diff <= tol).all(), (name, float(diff.max()), float(tol.min()))
            assert tol.max() < 1e-3 * np.abs(a).max()          # the bound is tight enough to mean something


def test_each_process_uses_the_thread_count_the_user_set(ddp_run):
    files = sorted(Path(ddp_run["log"]).glob("*.txt"))
    calls = {f.stem: f.read_text().split("\n")[:-1] for f in files}
    assert len(calls) == 2                                     # the two workers (the launcher runs no kernel)
    for pid, lines in calls.items():
        kinds = {ln.split()[0] for ln in lines}
        assert kinds == {"forward", "backward"}, (pid, lines)
        assert all(ln.split()[1] == "1" for ln in lines), (pid, lines)
    for rec in ddp_run["ranks"]:
        assert rec["threads_env"] == "1" and rec["torch_threads"] == 1
    assert "2 processes, gloo, 1 kernel thread(s) each" in ddp_run["stdout"]
