"""The operator-neutral core (_twophase, _validation's shared rules, _plan, _numpy_layer) serving an operator
that is not ConvTbcBackward: a toy operator declared the way docs/developer.md ("Operator modules") says gets
both public layers, with the shared rules, executor lifetime, workspace, stream and memory checks for free."""
import ctypes
import inspect

import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import _numpy_layer as nl, _op_conv_tbc_backward as bwd, _twophase, api
from pyconvtbc._handoff import Mode, Problem, Shape
from pyconvtbc._validation import (INVALID, Invalid, check_descriptors, check_dims_nonnegative, check_formats,
                                   check_memory, check_ranks, check_shapes, dtype_seen)
from conftest import acl_problem, device_tensor, make_problem, phase1, read_back


class Double(_twophase.Operator):
    """y = 2 * x for 1-D FLOAT tensors (a test-only operator)."""
    name, phase1, phase2, numpy_name = "Double", "aclnnDoubleGetWorkspaceSize", "aclnnDouble", "double"
    tensors, inputs, outputs = ("x", "y"), ("x",), ("y",)
    numpy_labels = {"x": "array"}

    def check(self, t, scalars, profile, is_descriptor, expected, numpy=False):
        def L(n):
            return self.label(n, numpy)
        check_descriptors(t, self.tensors, is_descriptor, expected, L)
        for n in self.tensors:
            if t[n].data_type != pc.ACL_FLOAT:
                raise Invalid(INVALID, f"{L(n)} {dtype_seen(t[n], numpy)}; expected FLOAT")
        check_formats(t, self.tensors, L)
        check_ranks(t, {"x": 1, "y": 1}, L)
        check_dims_nonnegative(t, self.tensors, L)
        check_shapes(t, {"y": tuple(t["x"].shape)}, L)
        check_memory(t, self.inputs, self.outputs)
        return Problem(Shape(t["x"].shape[0], 1, 1, 1, 1, 0), 0)

    def kernel_dtypes(self, t):
        return (t["x"].data_type, t["y"].data_type)

    def kernel_workspace(self, shape, mode, dtypes, num_threads):
        return 0

    def flops(self, shape):
        return shape.T_in

    def planned_views(self, plan):
        n = plan.shape.T_in
        return {"x": ((n,), pc.ACL_FLOAT, False), "y": ((n,), pc.ACL_FLOAT, True)}

    def run(self, plan, operands, ws_address, ws_size, cancel):
        n = plan.shape.T_in
        if n:
            x = np.ctypeslib.as_array((ctypes.c_float * n).from_address(operands["x"][0]))
            y = np.ctypeslib.as_array((ctypes.c_float * n).from_address(operands["y"][0]))
            y[:] = 2 * x

    def numpy_outputs(self, plan, arrays):
        return [(arrays[0].shape, np.dtype(np.float32))]

    def run_arrays(self, plan, arrays, outputs, ws):
        outputs[0][:] = 2 * arrays[0]


DOUBLE = Double()


def double_phase1(x, y):
    return _twophase.get_workspace_size(DOUBLE, {"x": x, "y": y}, {})


def double_numpy(x):
    def plan_call():
        descs = {"x": nl.as_input(x)}
        descs["y"] = nl.ArrayDesc(descs["x"].array) if isinstance(descs["x"], nl.ArrayDesc) else \
            nl.ArrayDesc(np.empty(0, np.float32))
        profile = nl.profile_for(DOUBLE, None)
        problem = nl.check(DOUBLE, descs, {}, profile)
        options, threads = nl.settings(DOUBLE, profile, {}, None)
        return nl.plan(DOUBLE, problem, DOUBLE.kernel_dtypes(descs), options, threads, True, profile), (x,)
    (y,) = nl.call(DOUBLE, nl.cache_key(DOUBLE, (x,), (), (), None), (x,), plan_call)
    return y


def test_a_second_operator_runs_through_both_phases_on_a_stream():
    x, px = device_tensor(np.arange(5, dtype=np.float32))
    y, py = device_tensor(np.zeros(5, np.float32))
    rc, ws, ex = double_phase1(x, y)
    assert rc == 0 and ws == 0 and "Double" in repr(ex)
    _, stream = pc.aclrtCreateStream()
    assert _twophase.execute(DOUBLE, None, 0, ex, stream) == 0
    assert pc.aclrtSynchronizeStream(stream) == 0
    assert read_back(py, 5, np.float32).tolist() == [0, 2, 4, 6, 8]
    # single use, as for every operator
    assert _twophase.execute(DOUBLE, None, 0, ex, stream) == INVALID
    assert "aclnnDouble: executor was already used" in pc.aclGetRecentErrMsg()
    assert pc.aclrtDestroyStream(stream) == 0


def test_the_shared_rules_speak_with_the_operators_names():
    x, _ = device_tensor(np.zeros(4, np.float32))
    y, _ = device_tensor(np.zeros(3, np.float32))
    assert double_phase1(None, y)[0] == 161001
    assert pc.aclGetRecentErrMsg() == "aclnnDoubleGetWorkspaceSize: x is a null pointer (None); expected a tensor"
    assert double_phase1(x, y)[0] == INVALID
    assert pc.aclGetRecentErrMsg() == "aclnnDoubleGetWorkspaceSize: y has shape [3]; expected [4]"
    assert double_phase1(x, x)[0] == INVALID                                   # the output overlaps the input
    assert "y (bytes 0..16) overlaps x (bytes 0..16)" in pc.aclGetRecentErrMsg()


def test_the_numpy_base_serves_a_second_operator():
    assert double_numpy(np.arange(3, dtype=np.float32)).tolist() == [0, 2, 4]
    assert double_numpy(np.arange(3, dtype=np.float32)).tolist() == [0, 2, 4]   # the cached plan
    with pytest.raises(pc.AclnnError) as e:
        double_numpy(np.arange(3, dtype=np.float64))
    assert e.value.status == INVALID
    assert e.value.message == "double: array has dtype float64 (aclDataType DOUBLE); expected FLOAT"


def test_an_executor_runs_only_under_its_own_operator():
    dy, x, w, b = make_problem()
    t, _ = acl_problem(dy, x, w, b)
    rc, ws, ex = phase1(t)
    assert rc == 0
    rc, wsp = pc.aclrtMalloc(max(ws, 1))
    assert _twophase.execute(DOUBLE, wsp, ws, ex, None) == INVALID
    assert pc.aclGetRecentErrMsg() == ("aclnnDouble: executor was not made by aclnnDoubleGetWorkspaceSize; "
                                       "expected an executor from phase 1")
    assert pc.aclnnConvTbcBackward(wsp, ws, ex, None) == 0 and pc.aclrtSynchronizeStream(None) == 0


def test_typed_hand_offs_reach_the_plan():
    dy, x, w, b = make_problem(T_in=6, B=2, Cin=3, Cout=4, K=3, pad=1)
    t, _ = acl_problem(dy, x, w, b)
    rc, _, ex = phase1(t, 1, 0)
    assert rc == 0
    assert isinstance(ex.plan.shape, Shape) and ex.plan.shape == (6, 2, 3, 4, 3, 1) and ex.plan.shape.T_out == 6
    assert isinstance(ex.plan.mode, Mode) and ex.plan.mode.compute == 0 and ex.plan.mode.hf32_mantissa_bits == 11
    assert ex.plan.op is bwd.BACKWARD


def test_the_facade_re_exports_the_operator_module():
    assert api.conv_tbc_backward is bwd.conv_tbc_backward is pc.conv_tbc_backward
    assert api.aclnnConvTbcBackward is bwd.aclnnConvTbcBackward
    assert api.aclOpExecutor is _twophase.aclOpExecutor is pc.aclOpExecutor
    assert api.memory_limit is nl.memory_limit and api.release_workspace is nl.release_workspace
    assert bwd.BACKWARD.tensors == bwd.BACKWARD.inputs + bwd.BACKWARD.outputs


def _functions(mod):
    for name, obj in vars(mod).items():
        if not name.startswith("_") and inspect.isfunction(obj) and obj.__module__ == mod.__name__:
            yield f"{mod.__name__}.{name}", obj


@pytest.mark.parametrize("name,fn", [f for m in (bwd, _twophase) for f in _functions(m)])
def test_operator_functions_have_type_hints(name, fn):
    sig = inspect.signature(inspect.unwrap(fn))
    assert sig.return_annotation is not inspect.Signature.empty, name
    for p in sig.parameters.values():
        if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            assert p.annotation is not inspect.Parameter.empty, (name, p.name)
