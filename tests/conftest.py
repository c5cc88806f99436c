"""Shared fixtures: CANN-layer tensor factories, and a clean process state around every test."""
import os

import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import runtime

try:
    from hypothesis import settings

    settings.register_profile("ci", max_examples=200, deadline=None)
    settings.register_profile("long", max_examples=100_000, deadline=None)
    settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))
except ImportError:  # hypothesis is in the test extra; tests that need it importorskip
    pass


# The emulation subset (marker `emulation`): what tools/aarch64_test.sh runs on the aarch64 build under qemu-user,
# where everything is 10-30x slower.  Every kernel path at small sizes: the kernels and micro-tiles against the
# portable kernels and the independent model, the accumulation model (narrow channels included), the forward,
# the streamed DY, every cubeMathType cell, the codecs, gradBias's order, the exact wide forms, the piece
# geometry, and the NaN contract (whose grid also runs every case on two threads against one).
# File -> tests of it left out, by name, or by name[parameters] for one case.
EMULATION_SUBSET = {
    "test_kernels.py": (
        "test_releases_the_gil",                   # Cython's nogil: nothing of the architecture; 19 s emulated
        # threads: f32-keep stays (9 s); the other five cost 60 s and add compute formats the grid covers
        "test_determinism_threads[f32-hf32]", "test_determinism_threads[f32-fp16]",
        "test_determinism_threads[f32-bf16]", "test_determinism_threads[f16]", "test_determinism_threads[bf16]",
    ),
    "test_micro_tiles.py": (),
    "test_accumulation.py": (),
    "test_forward.py": (),
    # the broadcast tests check memory use on large broadcast operands (350 s emulated); the streamed path
    # itself is test_streamed_gradients_match_the_model's
    "test_streamed.py": ("test_broadcast_grad_output_is_not_expanded",
                         "test_broadcast_grad_output_through_the_cann_layer",
                         "test_broadcast_forward_input_is_not_expanded"),
    "test_conv_tbc.py": (),
    "test_precision_modes.py": (),
    "test_hooks.py": (),
    "test_codecs_fp8_fp16_bf16.py": (),
    "test_codecs_hf32.py": (),
    "test_codecs_hif8.py": (),
    "test_nan_contract.py": (),
    "test_gradbias_order.py": (),                  # gradBias's ReduceSum order (its own C kernel)
    "test_wide_exact.py": (),                      # cube_wide / cube_rz's exact fixed-point block sums
    "test_sum_geometry.py": ("test_no_chip_number_in_the_kernels",),   # (a source check: no architecture in it)
    "test_isa_neon.py": (),                        # the NEON table: offered on AArch64, bit-identical to portable
    "test_ukr_tables.py": (),                      # every vector table entry against the portable table (C harness)
}


def _emulation_run(config):
    """True when the run selects the emulation subset (-m "emulation ..."): then only its files are collected
    (importing the others costs seconds each under emulation)."""
    return (config.getoption("markexpr", "") or "").startswith("emulation")


def pytest_ignore_collect(collection_path, config):
    if (_emulation_run(config) and collection_path.suffix == ".py" and collection_path.name.startswith("test_")
            and collection_path.name not in EMULATION_SUBSET):
        return True
    return None


def pytest_collection_modifyitems(config, items):
    for item in items:
        left_out = EMULATION_SUBSET.get(item.path.name)
        if left_out is not None and item.name not in left_out and getattr(item, "originalname", None) not in left_out:
            item.add_marker(pytest.mark.emulation)


@pytest.fixture(autouse=True)
def _clean_state():
    yield
    pc.profiles._reset_soc_version()
    pc.reset_emulation_options()
    with runtime._lock:
        runtime._state["contexts"].clear()


def device_tensor(host, dtype=pc.ACL_FLOAT, *, view=None, strides=None, offset=0, fmt=pc.ACL_FORMAT_ND,
                  storage=None):
    """Copy ``host`` (any array) into fresh device memory and describe it.

    By default the descriptor is the contiguous view of the whole array; ``view``/``strides``/``offset``
    (elements) describe another view of the same storage.  Returns (tensor, device_ptr).
    """
    host = np.ascontiguousarray(host)
    nbytes = max(host.nbytes, 1)
    rc, ptr = pc.aclrtMalloc(nbytes)
    assert rc == 0
    if host.nbytes:
        assert pc.aclrtMemcpy(ptr, nbytes, host, host.nbytes, pc.ACL_MEMCPY_HOST_TO_DEVICE) == 0
    dims = list(host.shape) if view is None else list(view)
    if strides is None and view is None:
        strides = [s // host.itemsize for s in host.strides]
    storage = [host.size] if storage is None else storage
    t = pc.aclCreateTensor(dims, dtype, strides, offset, fmt, storage, ptr)
    assert t is not None, pc.aclGetRecentErrMsg()
    return t, ptr


def read_back(ptr, shape, np_dtype):
    out = np.zeros(shape, np_dtype)
    if out.nbytes:
        assert pc.aclrtMemcpy(out, out.nbytes, ptr, out.nbytes, pc.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    return out


ACL_OF = {np.dtype(np.float32): pc.ACL_FLOAT, np.dtype(np.float16): pc.ACL_FLOAT16}


def acl_code(np_dtype):
    import ml_dtypes
    np_dtype = np.dtype(np_dtype)
    if np_dtype == np.dtype(ml_dtypes.bfloat16):
        return pc.ACL_BF16
    return ACL_OF[np_dtype]


def make_problem(T_in=6, B=2, Cin=3, Cout=4, K=3, pad=1, dtype=np.float32, seed=0):
    """Random host arrays (dy, x, w, b) of a consistent problem."""
    rng = np.random.default_rng(seed)
    T_out = T_in + 2 * pad - K + 1
    dy = rng.standard_normal((T_out, B, Cout)).astype(dtype)
    x = rng.standard_normal((T_in, B, Cin)).astype(dtype)
    w = rng.standard_normal((K, Cin, Cout)).astype(dtype)
    b = rng.standard_normal(Cout).astype(dtype)
    return dy, x, w, b


def acl_problem(dy, x, w, b, gw_dtype=None):
    """Device tensors for the seven operator arguments; returns (dict name -> tensor, dict name -> ptr)."""
    names = ("self", "input", "weight", "bias")
    tensors, ptrs = {}, {}
    for n, a in zip(names, (dy, x, w, b)):
        tensors[n], ptrs[n] = device_tensor(a, acl_code(a.dtype))
    outs = (("gradInput", x.shape, acl_code(x.dtype), x.dtype),
            ("gradWeight", w.shape, gw_dtype if gw_dtype is not None else acl_code(w.dtype), w.dtype),
            ("gradBias", b.shape, acl_code(b.dtype), b.dtype))
    for n, shape, code, npdt in outs:
        tensors[n], ptrs[n] = device_tensor(np.zeros(shape, npdt), code)
    return tensors, ptrs


def phase1(t, pad=1, cube=0):
    return pc.aclnnConvTbcBackwardGetWorkspaceSize(t["self"], t["input"], t["weight"], t["bias"], pad, cube,
                                                   t["gradInput"], t["gradWeight"], t["gradBias"])


def run_acl(t, pad=1, cube=0, stream=None):
    """Both phases plus synchronisation; returns the status of the first failing step."""
    rc, ws_size, ex = phase1(t, pad, cube)
    if rc:
        return rc
    ws = None
    if ws_size:
        rc, ws = pc.aclrtMalloc(ws_size)
        assert rc == 0
    rc = pc.aclnnConvTbcBackward(ws, ws_size, ex, stream)
    if rc:
        return rc
    return pc.aclrtSynchronizeStream(stream)


def load_repo_module(relpath):
    """Import a script of the repository that is not part of the package (.ci/, docs/) by its path; skip the
    test when this tree does not have it (e.g. tests run from an sdist)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / relpath
    if not path.exists():
        pytest.skip(f"{relpath} is not in this tree")
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
