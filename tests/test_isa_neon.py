"""The AArch64 NEON kernels (pyconvtbc/_kernels/_ukr_neon.c): offered on every AArch64 build, and both operators'
outputs under them bit-identical to the portable kernels' on the same machine, across the accumulation forms, the
compute precisions, the chips' paths (ascend950's pieces, the narrow-channel kernels) and the kernel hooks.

Skipped where NEON does not run (x86 builds); run under AArch64 hardware or qemu-user (tools/aarch64_test.sh).
tests/test_ukr_tables.py checks the table entry by entry.
"""
import platform

import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import _numpy_layer as NL
from pyconvtbc._kernels import _conv_tbc as K

AARCH64 = platform.machine().lower() in ("aarch64", "arm64")
HAVE_NEON = "neon" in K.isas()
needs_neon = pytest.mark.skipif(not HAVE_NEON, reason="the NEON kernels run only on AArch64")

BF16 = ml_dtypes.bfloat16
# (T_in, B, Cin, Cout, K, pad): tails of every vector width, DY / weight panels past 32 channels, B = 1 with pad,
# narrow channels with B >= 8 (the narrow kernels), and Cin > 16 (two 16-column slices of a 32-wide panel)
SHAPES = [(11, 3, 5, 7, 3, 1), (9, 4, 3, 37, 3, 2), (20, 1, 9, 20, 2, 0), (33, 9, 8, 2, 5, 2), (40, 16, 4, 4, 3, 1),
          (13, 2, 45, 70, 3, 1)]
# (operand dtype, cubeMathType, gradWeight dtype): fp32 (KEEP / HF32), fp16, bf16, and an 8-bit gradWeight
MODES = [(np.float32, 0, None), (np.float32, 1, None), (np.float16, 0, None), (BF16, 0, None),
         (np.float32, 0, "float8_e4m3fn")]
FORMS = ["cube", "cube_wide", "cube_rz", "sequential"]
HOOKS = [{}, {"gi_rows": 4}, {"narrow": False}, {"stream_rows": 37}]


def _data(shape, dtype, seed, specials):
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in ((T_out, B, Cout), (T_in, B, Cin), (K_, Cin, Cout),
                                                                (Cout,))]
    if specials:                     # a NaN, +-Inf and a subnormal in each operand
        for a in arrs[:3]:
            f = a.reshape(-1)
            idx = rng.choice(f.size, size=min(f.size, 4), replace=False)
            for i, v in zip(idx, (np.nan, np.inf, -np.inf, 1e-40)):
                f[i] = v
    return [a.astype(dtype) for a in arrs]


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[a.dtype.itemsize]).copy()


def _run(op, shape, mode, soc, form, threads, specials, seed):
    dtype, cmt, gwd = mode
    dy, x, w, b = _data(shape, dtype, seed, specials)
    NL._plan_cache.clear()           # (the hooks change workspace sizes: plan every call)
    try:
        if op == "bwd":
            out = pc.conv_tbc_backward(dy, x, w, b, shape[5], cube_math_type=cmt, grad_weight_dtype=gwd, soc=soc,
                                       deterministic=True, num_threads=threads, accumulation=form)
        else:
            out = (pc.conv_tbc(x, w, b, shape[5], cube_math_type=cmt, soc=soc, num_threads=threads,
                               accumulation=form),)
    except pc.AclnnError as e:
        return f"refused:{e.status}"
    return [_bits(o) for o in out]


def _same(a, b):
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return len(a) == len(b) and all(x.shape == y.shape and np.array_equal(x, y) for x, y in zip(a, b))


@pytest.mark.skipif(not AARCH64, reason="AArch64 only")
def test_neon_offered_on_aarch64():
    """Every AArch64 CPU has Advanced SIMD with FMA: the build offers the NEON table and picks it by default."""
    assert "neon" in K.isas(), K.isas()
    assert K.isa_supported() == "neon"


@needs_neon
@pytest.mark.parametrize("op", ["bwd", "fwd"])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("form", FORMS)
def test_neon_matches_portable(op, soc, form):
    """Both operators, every shape and mode: NEON (1 and 2 threads, each hook) gives the portable kernels' bits."""
    n = 0
    for si, shape in enumerate(SHAPES):
        for mi, mode in enumerate(MODES):
            if op == "fwd" and mode[2] is not None:
                continue
            seed = 100 * si + mi
            specials = (si + mi) % 2 == 1
            with K.hooks.override(isa="portable"):
                want = _run(op, shape, mode, soc, form, 1, specials, seed)
            for hk in (HOOKS if (si + mi) % 3 == 0 else HOOKS[:1]):
                for th in (1, 2):
                    with K.hooks.override(isa="neon", parallel_min=0, **hk):
                        got = _run(op, shape, mode, soc, form, th, specials, seed)
                    assert _same(got, want), (op, shape, mode, soc, form, hk, th)
                    n += 1
    assert n > 0
