"""The cube accumulation model (docs/precision.md, "Accumulation model"), checked bit for bit against the
independent model in accum_reference.py on grid-valued data (float64 sums exact), for every form, profile,
compute precision and block size, through the public NumPy layer and the CANN layer."""
import itertools

import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import _numpy_layer as NL
from pyconvtbc._kernels import _conv_tbc as K

import accum_reference as R

BF16 = ml_dtypes.bfloat16
FORMS = ["cube", "cube_wide", "cube_rz", "sequential"]
SOCS = ["ascend910b", "ascend950", "ascend910"]
# (T_in, B, Cin, Cout, K, pad): pad > 0, B = 1, T_out not a multiple of k0, Cout not a multiple of k0, Cout
# across DY panels (> 32), ascend950 with 32, 16 and fewer pieces (nb = ceil(Cout/128) * ceil(Cin*K/256))
SHAPES = [(11, 3, 5, 7, 3, 1), (20, 1, 9, 20, 2, 0), (9, 4, 3, 37, 3, 2), (6, 2, 40, 3, 1, 0), (10, 3, 20, 64, 3, 1),
          (13, 2, 90, 130, 3, 1)]
ISAS = K.isas()                  # every instruction set this CPU and build run, portable first


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[a.dtype.itemsize])


def problem(shape, dtype=np.float32, seed=0, bits_=6):
    """Grid data (exact float64 sums); for the 16-bit formats a range whose sums stay finite in fp16."""
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(seed)
    er = dict(emin=-6, emax=6) if np.dtype(dtype) == np.float32 else dict(emin=-5, emax=1)
    dy = R.grid(rng, (T_out, B, Cout), bits_, **er)
    x = R.grid(rng, (T_in, B, Cin), bits_, **er)
    w = R.grid(rng, (K_, Cin, Cout), bits_, **er)
    b = R.grid(rng, (Cout,), bits_, **er)
    return tuple(a.astype(dtype) for a in (dy, x, w, b))


def reference(dy, x, w, pad, form, k0, soc, order=None, compute_round=None):
    """(gi, gw) fp32 accumulators of the model, on the operands rounded to the compute precision."""
    f = (lambda a: a.astype(np.float32)) if compute_round is None else compute_round
    dy32, x32, w32 = f(dy), f(x), f(w)
    gw = R.grad_weight(x32, dy32, w.shape[0], pad, form, k0, soc, order)
    gi = R.grad_input(dy32, w32, x.shape[0], pad, form, k0, soc)
    return gi, gw


@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("shape", SHAPES)
def test_fp32_matches_the_model_bit_for_bit(form, soc, shape):
    dy, x, w, b = problem(shape, seed=sum(shape))
    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, shape[5], soc=soc, deterministic=True, accumulation=form)
    rgi, rgw = reference(dy, x, w, shape[5], form, 8, soc)
    assert (bits(gw) == bits(rgw)).all()
    assert (bits(gi) == bits(rgi)).all()
    # gradBias keeps its own order: every form gives the same bits
    gb_seq = pc.conv_tbc_backward(dy, x, w, b, shape[5], soc=soc, accumulation="sequential")[2]
    assert (bits(gb) == bits(gb_seq)).all()


@pytest.mark.parametrize("block_size", [1, 3, 5, 16, 64])
@pytest.mark.parametrize("form", ["cube", "cube_wide", "cube_rz"])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_block_size_override(block_size, form, soc):
    shape = (19, 3, 7, 21, 3, 1)
    dy, x, w, b = problem(shape, seed=block_size)
    gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 1, soc=soc, deterministic=True, accumulation=form,
                                     block_size=block_size)
    rgi, rgw = reference(dy, x, w, 1, form, block_size, soc)
    assert (bits(gw) == bits(rgw)).all() and (bits(gi) == bits(rgi)).all()


@pytest.mark.parametrize("dtype,k0", [(np.float16, 16), (BF16, 16)])
@pytest.mark.parametrize("form", ["cube", "cube_wide"])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_half_precisions_use_k0_16_and_round_outputs(dtype, k0, form, soc):
    """FP16 / BF16 compute: blocks of 16; gi written in the compute format, gw cast from the fp32 sum."""
    shape = (37, 2, 6, 35, 3, 1)
    dy, x, w, b = problem(shape, dtype, seed=7, bits_=5)
    gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 1, soc=soc, deterministic=True, accumulation=form)
    rgi, rgw = reference(dy, x, w, 1, form, k0, soc)
    assert np.isfinite(rgw).all() and np.isfinite(rgi.astype(dtype).astype(np.float32)).all()
    assert (bits(gw) == bits(rgw.astype(dtype))).all()
    assert (bits(gi) == bits(rgi.astype(dtype))).all()


def test_hf32_and_fp16_compute_of_float32_inputs():
    """USE_HF32: operands rounded to HF32, blocks of 8; USE_FP16: operands to fp16, blocks of 16, gi via fp16."""
    shape = (21, 3, 5, 18, 3, 1)
    rng = np.random.default_rng(3)
    T_out = shape[0] + 2 - 3 + 1
    # 13 significant bits: HF32 (11 explicit bits) and fp16 rounding both change the operands
    dy, x, w = (R.grid(rng, s, bits=12, emin=-12, emax=-8) for s in
                ((T_out, 3, 18), (21, 3, 5), (3, 5, 18)))
    b = np.zeros(18, np.float32)
    gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=pc.USE_HF32, deterministic=True)
    rgi, rgw = reference(dy, x, w, 1, "cube", 8, "ascend910b",
                         compute_round=lambda a: pc.round_to_hf32(a, mantissa_bits=11))
    assert (bits(gw) == bits(rgw)).all() and (bits(gi) == bits(rgi)).all()
    gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=pc.USE_FP16, deterministic=True)
    rgi, rgw = reference(dy, x, w, 1, "cube", 16, "ascend910b",
                         compute_round=lambda a: a.astype(np.float16).astype(np.float32))
    assert (bits(gw) == bits(rgw)).all()
    assert (bits(gi) == bits(rgi.astype(np.float16).astype(np.float32))).all()


def test_ascend910_uses_the_per_item_order():
    shape = (11, 3, 4, 9, 3, 1)
    dy, x, w, b = problem(shape, np.float16, seed=11, bits_=5)
    gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 1, soc="ascend910", deterministic=True)
    rgi, rgw = reference(dy, x, w, 1, "cube", 16, "ascend910")
    assert (bits(gw) == bits(rgw.astype(np.float16))).all() and (bits(gi) == bits(rgi.astype(np.float16))).all()


def _order_sensitive(B=3, T_out=5, seed=0):
    """Data whose per-item gradWeight chains round differently depending on the order they are added in."""
    rng = np.random.default_rng(seed)
    x = np.zeros((T_out, B, 1), np.float32)
    dy = np.zeros((T_out, B, 1), np.float32)
    x[0, :, 0] = 1.0
    dy[0, :, 0] = [2.0 ** 24, 1.0, -(2.0 ** 24)] + list(rng.integers(1, 4, B - 3)) if B > 3 else \
        [2.0 ** 24, 1.0, -(2.0 ** 24)][:B]
    w = np.ones((1, 1, 1), np.float32)
    return dy, x, w, np.zeros(1, np.float32)


def test_non_deterministic_order_is_a_permutation_and_varies():
    """Non-deterministic ascend910b: the B per-item chains are added in some order of b, drawn per call; the
    result is the model's for one of the B! orders, and different calls give different results."""
    dy, x, w, b = _order_sensitive()
    possible = {bits(R.grad_weight(x, dy, 1, 0, "cube", 8, "ascend910b", list(p))).tobytes()
                for p in itertools.permutations(range(3))}
    assert len(possible) > 1                        # the order matters for these data
    seen = set()
    for _ in range(60):
        gw = pc.conv_tbc_backward(dy, x, w, b, 0, deterministic=False)[1]
        seen.add(bits(gw).tobytes())
    assert seen <= possible and len(seen) > 1
    # deterministic: b order
    det = pc.conv_tbc_backward(dy, x, w, b, 0, deterministic=True)[1]
    assert bits(det).tobytes() == bits(R.grad_weight(x, dy, 1, 0, "cube", 8, "ascend910b")).tobytes()


def test_order_seed_repeats_the_order():
    dy, x, w, b = _order_sensitive(B=8, seed=4)
    for seed in range(5):
        runs = {bits(pc.conv_tbc_backward(dy, x, w, b, 0, deterministic=False, order_seed=seed,
                                          num_threads=n)[1]).tobytes() for n in (1, 2, 3, 4)}
        assert len(runs) == 1
    # and as a process setting
    pc.set_emulation_options(order_seed=3)
    a = pc.conv_tbc_backward(dy, x, w, b, 0, deterministic=False)[1]
    b2 = pc.conv_tbc_backward(dy, x, w, b, 0, deterministic=False)[1]
    assert (bits(a) == bits(b2)).all()


def test_ascend950_is_deterministic_whatever_the_switch():
    shape = (13, 3, 6, 11, 3, 1)
    dy, x, w, b = problem(shape, seed=5)
    runs = {tuple(bits(o).tobytes() for o in pc.conv_tbc_backward(dy, x, w, b, 1, soc="ascend950",
                                                                   deterministic=d, num_threads=n))
            for d in (False, True) for n in (1, 3)}
    assert len(runs) == 1


@pytest.mark.parametrize("form", ["cube", "cube_wide", "cube_rz"])
@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_threads_and_instruction_sets_never_change_a_result(form, soc):
    shape = (40, 4, 70, 45, 3, 1)
    dy, x, w, b = problem(shape, seed=9)
    outs = set()
    try:
        for isa in ISAS:
            K._set_isa(isa)
            old = K._set_parallel_min(0)
            try:
                for bc in ((False, True) if isa == "avx512" else (None,)):   # the AVX-512 broadcast forms
                    K.hooks.set(bcast_fma=bc)
                    for n in (1, 2, 3, 4):
                        r = pc.conv_tbc_backward(dy, x, w, b, 1, soc=soc, deterministic=True, accumulation=form,
                                                 num_threads=n)
                        outs.add(tuple(bits(o).tobytes() for o in r))
            finally:
                K._set_parallel_min(old)
                K.hooks.set(bcast_fma=None)
    finally:
        K._set_isa(None)
    assert len(outs) == 1


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
def test_strided_and_zero_copy_operands(soc):
    """The panels' zero-copy paths (fp32 single panels read in place) and odd strides give the model's bits."""
    shape = (17, 3, 6, 12, 3, 2)
    dy, x, w, b = problem(shape, seed=13)
    rgi, rgw = reference(dy, x, w, 2, "cube", 8, soc)
    views = [(dy, x, w), (np.asfortranarray(dy), x[:, :, ::-1].copy()[:, :, ::-1], w.transpose(0, 2, 1).copy()
                          .transpose(0, 2, 1))]
    for vdy, vx, vw in views:
        gi, gw, _ = pc.conv_tbc_backward(vdy, vx, vw, b, 2, soc=soc, deterministic=True)
        assert (bits(gw) == bits(rgw)).all() and (bits(gi) == bits(rgi)).all()


@pytest.mark.parametrize("cin", [1, 2, 8, 16, 17])
def test_b_major_pack_of_narrow_inputs(cin):
    """ascend910b's per-item chains read X b-major: the pack copies narrow fp32 rows one vector each (and
    decodes the rest); every layout, dtype and code path gives the model's bits."""
    shape = (23, 5, cin, 3, 3, 1)
    dy, x, w, b = problem(shape, seed=cin)
    rgi, rgw = reference(dy, x, w, 1, "cube", 8, "ascend910b")
    big = np.zeros((23, 10, 2 * cin + 1), np.float32)
    big[:, ::2, 1:2 * cin + 1:2] = x
    views = [x, big[:, ::2, 1:2 * cin + 1:2], np.asfortranarray(x), x.transpose(1, 0, 2).copy().transpose(1, 0, 2)]
    # a float32 view 2 bytes off a 4-byte boundary
    raw = np.zeros(x.size * 4 + 2, np.uint8)
    odd = raw[2:].view(np.float32).reshape(x.shape)
    odd[...] = x
    views.append(odd)
    try:
        for isa in ISAS:
            K._set_isa(isa)
            for vx in views:
                gi, gw, _ = pc.conv_tbc_backward(dy, vx, w, b, 1, soc="ascend910b", deterministic=True)
                assert (bits(gw) == bits(rgw)).all() and (bits(gi) == bits(rgi)).all()
    finally:
        K._set_isa(None)
    # half-precision X goes through the decode path, then rounds
    dyh, xh, wh, bh = problem(shape, np.float16, seed=cin)
    f16 = lambda a: a.astype(np.float32)  # noqa: E731  (fp16 operands are exact in fp32)
    rgi, rgw = reference(dyh, xh, wh, 1, "cube", 16, "ascend910b", compute_round=f16)
    gi, gw, _ = pc.conv_tbc_backward(dyh, xh, wh, bh, 1, soc="ascend910b", deterministic=True)
    assert (bits(gw) == bits(rgw.astype(np.float16))).all()


def test_empty_and_tiny_problems():
    for shape in [(3, 0, 2, 2, 3, 1), (0, 2, 2, 2, 1, 0), (4, 2, 0, 3, 2, 0), (4, 2, 3, 0, 2, 0), (1, 1, 1, 1, 3, 1)]:
        dy, x, w, b = problem(shape, seed=1)
        for soc in ("ascend910b", "ascend950"):
            gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, shape[5], soc=soc, deterministic=False)
            rgi, rgw = reference(dy, x, w, shape[5], "cube", 8, soc)
            assert (bits(gw) == bits(rgw)).all() and (bits(gi) == bits(rgi)).all()


def test_cube_beats_one_long_chain_on_long_reductions():
    """The point of the model: fp32 error of a long gradWeight reduction (B*T_out = 8192 terms) is smaller in
    blocks and per-item chains than in one sequential chain (measured against float64)."""
    rng = np.random.default_rng(0)
    T, B, C = 1024, 8, 8
    x = rng.standard_normal((T, B, C)).astype(np.float32) + 1.0      # a mean makes the chain grow
    dy = rng.standard_normal((T, B, C)).astype(np.float32) + 1.0
    w = np.zeros((1, C, C), np.float32)
    exact = np.einsum("tbi,tbo->io", x.astype(np.float64), dy.astype(np.float64))
    err = {f: np.abs(pc.conv_tbc_backward(dy, x, w, np.zeros(C, np.float32), 0, accumulation=f,
                                          deterministic=True)[1][0] - exact).max() for f in FORMS}
    assert err["cube"] < err["sequential"] / 2
    assert err["cube_wide"] <= err["cube"] * 1.01 + 1e-30
    assert err["cube_rz"] > err["cube_wide"]          # truncation is biased


# ---- options: names, values, errors --------------------------------------------------------------------
@pytest.mark.parametrize("kw,bad", [("accumulation", "fast"), ("accumulation", 1), ("block_size", 0),
                                    ("block_size", 65), ("block_size", 2.0), ("block_size", True),
                                    ("order_seed", -1), ("order_seed", "x"), ("order_seed", 1.5)])
def test_bad_option_values_are_161002_naming_the_option(kw, bad):
    dy, x, w, b = problem((5, 1, 2, 2, 1, 0))
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc_backward(dy, x, w, b, 0, **{kw: bad})
    assert e.value.status == pc.ACLNN_ERR_PARAM_INVALID and kw in str(e.value) and repr(bad) in str(e.value)
    before = pc.get_emulation_options()
    with pytest.raises(pc.AclnnError, match=kw) as e:          # a ValueError carrying the status
        pc.set_emulation_options(**{kw: bad})
    assert e.value.status == pc.ACLNN_ERR_PARAM_INVALID and repr(bad) in str(e.value)
    assert pc.get_emulation_options() == before                  # nothing changed


def test_setting_an_option_to_none_restores_its_default():
    defaults = pc.get_emulation_options()
    pc.set_emulation_options(accumulation="sequential", block_size=4, order_seed=7, hf32_rounding="nearest_even",
                             hf32_mantissa_bits=np.int64(10), hif8_rounding="hybrid", saturate=np.True_)
    assert pc.get_emulation_options()["hf32_mantissa_bits"] == 10 and pc.get_emulation_options()["saturate"] is True
    pc.set_emulation_options(**{k: None for k in defaults})
    assert pc.get_emulation_options() == defaults


def test_options_are_process_settings_read_at_phase_1():
    from conftest import device_tensor
    dy, x, w, b = problem((11, 3, 5, 7, 3, 1), seed=2)
    rgi_c, rgw_c = reference(dy, x, w, 1, "cube", 8, "ascend910b")
    rgi_s, rgw_s = reference(dy, x, w, 1, "sequential", 8, "ascend910b")
    assert not (bits(rgw_c) == bits(rgw_s)).all()       # the forms differ on these data
    pc.aclrtCtxSetSysParamOpt(pc.ACL_OPT_DETERMINISTIC, 1)
    pc.set_emulation_options(accumulation="sequential")
    ins = [device_tensor(a) for a in (dy, x, w, b)]
    outs = [device_tensor(np.zeros_like(a)) for a in (x, w, b)]
    rc, ws_size, ex = pc.aclnnConvTbcBackwardGetWorkspaceSize(*[t for t, _ in ins], 1, 0, *[t for t, _ in outs])
    assert rc == 0, pc.aclGetRecentErrMsg()
    pc.set_emulation_options(accumulation="cube")          # too late for this executor
    ws = pc.aclrtMalloc(ws_size)[1] if ws_size else None
    assert pc.aclnnConvTbcBackward(ws, ws_size, ex, None) == 0
    assert pc.aclrtSynchronizeStream(None) == 0
    gw = np.zeros_like(w)
    assert pc.aclrtMemcpy(gw, gw.nbytes, outs[1][1], gw.nbytes, pc.ACL_MEMCPY_DEVICE_TO_HOST) == 0
    assert (bits(gw) == bits(rgw_s)).all()
    assert dict(ex.plan.options)["accumulation"] == "sequential"


@pytest.mark.parametrize("soc,shape", [("ascend910b", (600, 2, 3, 5, 3, 1)),     # per-item chains > 256 rows
                                       ("ascend950", (4200, 2, 2, 3, 2, 0)),     # 32 pieces of ~262 positions
                                       ("ascend910b", (300, 1, 9, 17, 2, 1))])
@pytest.mark.parametrize("form", ["cube", "cube_wide"])
def test_long_chains_cut_into_row_chunks(soc, shape, form):
    """Chains longer than the kernels' row chunk carry their value from chunk to chunk: still the model's bits."""
    dy, x, w, b = problem(shape, seed=21, bits_=4)
    gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, shape[5], soc=soc, deterministic=True, accumulation=form)
    rgi, rgw = reference(dy, x, w, shape[5], form, 8, soc)
    assert (bits(gw) == bits(rgw)).all() and (bits(gi) == bits(rgi)).all()


# (T_in, B, Cin, Cout, K, pad), ascend910b: per-item chains shorter than half the kernels' row chunk, so several
# items share a chunk: T_out = 100 (2 items a chunk: groups 2, 2, 1), T_out = 9 (28 items a chunk: 28, 28, 14),
# with a second DY panel of 8 channels (Cout = 40) and the block sizes that change the chunk (k0 = 3: 255 rows)
@pytest.mark.parametrize("shape", [(100, 5, 3, 7, 3, 1), (9, 70, 5, 40, 3, 1)])
@pytest.mark.parametrize("k0", [8, 3])
def test_several_items_per_row_chunk(shape, k0):
    """Items that share a row chunk are still added into each gradWeight element one after the other, in b
    order, or in the order drawn from order_seed (NumPy's default_rng(seed).permutation(B), docs/precision.md),
    for every thread count and instruction set."""
    dy, x, w, b = problem(shape, seed=23, bits_=4)
    pad, B = shape[5], shape[1]
    rgw = R.grad_weight(x, dy, shape[4], pad, "cube", k0, "ascend910b")
    order = list(np.random.default_rng(5).permutation(B))
    rgw_p = R.grad_weight(x, dy, shape[4], pad, "cube", k0, "ascend910b", order)
    assert (bits(rgw) != bits(rgw_p)).any()          # the order matters for these data
    try:
        for isa in ISAS:
            K._set_isa(isa)
            old = K._set_parallel_min(0)
            try:
                for n in (1, 2, 3):
                    gw = pc.conv_tbc_backward(dy, x, w, b, pad, deterministic=True, block_size=k0, num_threads=n)[1]
                    assert (bits(gw) == bits(rgw)).all(), (isa, n)
                    gw = pc.conv_tbc_backward(dy, x, w, b, pad, deterministic=False, order_seed=5, block_size=k0,
                                              num_threads=n)[1]
                    assert (bits(gw) == bits(rgw_p)).all(), (isa, n)
            finally:
                K._set_parallel_min(old)
    finally:
        K._set_isa(None)


# (T_in, B, Cin, Cout, K, pad) with at least 6 rows per time step, where the kernels take the rows that lack
# taps one time step at a time: pad = K - 1 (the first and last rows see one tap); K = 25 (a channel group's
# taps cut by the kernels' passes of 32 blocks); every row lacking some tap (T_in < K); Cout across DY panels
EDGE_SHAPES = [(9, 7, 20, 70, 5, 2), (7, 6, 9, 12, 4, 3), (40, 6, 9, 12, 25, 12), (5, 13, 10, 40, 7, 4)]


@pytest.mark.parametrize("soc", ["ascend910b", "ascend950"])
@pytest.mark.parametrize("shape", EDGE_SHAPES)
def test_rows_missing_taps_many_rows_per_step(shape, soc):
    """gradInput of the rows that lack taps (B >= 6: summed a time step at a time) keeps the model's order:
    every instruction set, 1 and 3 threads."""
    dy, x, w, b = problem(shape, seed=sum(shape) + 5)
    rgi, rgw = reference(dy, x, w, shape[5], "cube", 8, soc)
    try:
        for isa in ISAS:
            K._set_isa(isa)
            old = K._set_parallel_min(0)
            try:
                for n in (1, 3):
                    gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, shape[5], soc=soc, deterministic=True,
                                                     accumulation="cube", num_threads=n)
                    assert (bits(gi) == bits(rgi)).all(), (isa, n)
                    assert (bits(gw) == bits(rgw)).all(), (isa, n)
            finally:
                K._set_parallel_min(old)
    finally:
        K._set_isa(None)


def test_ascend950_segments_with_rows_missing_taps():
    """ascend950 gradInput segments (K*Cout >= 32768) on rows that lack taps, 6 rows per time step."""
    shape = (4, 6, 2, 11000, 3, 1)
    dy, x, w, b = problem(shape, seed=12, bits_=4)
    gi = pc.conv_tbc_backward(dy, x, w, b, 1, soc="ascend950", accumulation="cube")[0]
    rgi = R.grad_input(dy, w, 4, 1, "cube", 8, "ascend950")
    assert (bits(gi) == bits(rgi)).all()


def test_ascend950_grad_input_segments():
    """ascend950, K*Cout >= 32768: gradInput's chain is cut into segments of 32768 reduction elements, each
    started at 0 and added into the output in order."""
    shape = (3, 1, 2, 32768 + 40, 1, 0)
    dy, x, w, b = problem(shape, seed=8, bits_=4)
    gi = pc.conv_tbc_backward(dy, x, w, b, 0, soc="ascend950", accumulation="cube")[0]
    rgi = R.grad_input(dy, w, 3, 0, "cube", 8, "ascend950")
    no_seg = R.grad_input(dy, w, 3, 0, "cube", 8, "ascend910b")
    assert not (bits(rgi) == bits(no_seg)).all()       # the segments change the sums on these data
    assert (bits(gi) == bits(rgi)).all()


@pytest.mark.parametrize("form", ["cube_wide", "cube_rz", "cube"])
def test_zero_sign_of_a_lone_chain_and_of_segments(form):
    """docs/precision.md: a lone gradInput chain is the result; segments are added into an output that starts at
    +0.  A negative exact sum that underflows rounds to -0 in the wide forms' chain: -0 without segments, +0
    once added into the output (ascend950, K*Cout >= 32768).  Under "cube" a chain is never -0."""
    tiny = np.float32(2.0 ** -100)
    for Cout, soc in ((8, "ascend910b"), (8, "ascend950"), (32768, "ascend950")):
        dy = np.full((1, 1, Cout), -tiny, np.float32)
        w = np.full((1, 1, Cout), tiny, np.float32)
        x = np.zeros((1, 1, 1), np.float32)
        for isa in ISAS:
            K._set_isa(isa)
            try:
                gi, gw, _ = pc.conv_tbc_backward(dy, x, w, np.zeros(Cout, np.float32), 0, soc=soc,
                                                 accumulation=form)
            finally:
                K._set_isa(None)
            lone = Cout < 32768
            assert gi[0, 0, 0] == 0 and np.signbit(gi[0, 0, 0]) == (lone and form != "cube"), (Cout, soc, isa)
            assert not np.signbit(gw).any()       # gradWeight: chains added into an output that starts at +0


def test_cube_rz_rounds_only_its_steps_toward_zero():
    """docs/precision.md: under "cube_rz" a step (accumulator + block) rounds toward zero; the chains' results
    are added into the output with round to nearest even.  Two batch items whose chains are exact (1 and
    3 * 2^-24): their sum 1 + 1.5 ulp is a tie, to even 1 + 2^-22 (toward zero it would be 1 + 2^-23)."""
    x = np.ones((1, 2, 1), np.float32)
    w = np.ones((1, 1, 1), np.float32)
    dy = np.array([1.0, 3 * 2.0 ** -24], np.float32).reshape(1, 2, 1)
    gw = pc.conv_tbc_backward(dy, x, w, np.zeros(1, np.float32), 0, soc="ascend910b", deterministic=True,
                              accumulation="cube_rz")[1]
    assert gw[0, 0, 0] == np.float32(1 + 2.0 ** -22)
    # within one chain the same sum is one step: toward zero
    x1 = np.ones((2, 1, 1), np.float32)
    dy1 = dy.reshape(2, 1, 1)
    gw1 = pc.conv_tbc_backward(dy1, x1, w, np.zeros(1, np.float32), 0, soc="ascend910b", accumulation="cube_rz")[1]
    assert gw1[0, 0, 0] == np.float32(1 + 2.0 ** -23)


# Narrow channels (Cin, Cout <= 8, B >= 8, ascend910b / ascend910 "cube"): kernels with lanes along the items
# (gradWeight) and the rows (gradInput).  (T_in, B, Cin, Cout, K, pad): B below, at and past the 16 lanes,
# taps missing at both ends (pad 0, 1, 3 with K = 3, 5), T_out not a multiple of k0, rows not a multiple of 16.
# gradWeight runs item blocks of 16 in chunks of 32 t's, each chunk's x rows copied by the task (8 channels of
# 16 items by permutes, other widths by gathers, a partial block row by row): the last three shapes have several
# chunks, whole and partial blocks, 8 and 7 channels, K = 1 and K = 6 with pad 3; the last has 4 channels on
# both sides (the 2- and 4-channel copies both ways are permutes too).
NARROW = [(23, 8, 1, 1, 3, 1), (40, 16, 2, 2, 3, 1), (19, 17, 3, 5, 5, 3), (12, 33, 8, 8, 3, 0),
          (9, 10, 8, 3, 4, 2), (70, 12, 5, 8, 2, 1), (3, 9, 2, 2, 5, 1),
          (75, 48, 8, 8, 3, 1), (50, 40, 8, 4, 6, 3), (66, 64, 7, 2, 1, 0), (40, 32, 4, 4, 3, 1)]


def _narrow_paths_match(dy, x, w, b, pad, soc, rgi, rgw, threads):
    """gi and gw of every code path and thread count, and of the general cube kernels (hook narrow=False), have
    the bits of the model's (rgi, rgw); gradBias is the same on all of them."""
    assert K.hooks.get()["narrow"]
    outs = set()
    try:
        for isa in ISAS:
            K._set_isa(isa)
            for n in threads:
                with K.hooks.override(parallel_min=0):
                    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, pad, soc=soc, deterministic=True, num_threads=n)
                assert (bits(gw) == bits(rgw)).all(), (isa, n)
                assert (bits(gi) == bits(rgi)).all(), (isa, n)
                outs.add(bits(gb).tobytes())
        NL._plan_cache.clear()                    # (the hook changes the workspace layout: plan again)
        try:
            with K.hooks.override(narrow=False):     # the general cube kernels: the same bits
                gi2, gw2, gb2 = pc.conv_tbc_backward(dy, x, w, b, pad, soc=soc, deterministic=True)
        finally:
            NL._plan_cache.clear()
        assert (bits(gw2) == bits(rgw)).all() and (bits(gi2) == bits(rgi)).all()
        outs.add(bits(gb2).tobytes())
    finally:
        K._set_isa(None)
    assert len(outs) == 1


@pytest.mark.parametrize("shape", NARROW)
def test_narrow_channels_match_the_model_on_every_path(shape):
    dy, x, w, b = problem(shape, seed=sum(shape) + 3)
    pad = shape[5]
    rgi, rgw = reference(dy, x, w, pad, "cube", 8, "ascend910b")
    # gw tasks: one (1-3 threads); two or three, each of every second or third item block (4, 6 threads)
    _narrow_paths_match(dy, x, w, b, pad, "ascend910b", rgi, rgw, (1, 2, 3, 4, 6))


@pytest.mark.parametrize("block_size", [1, 3, 16, 64])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
def test_narrow_channels_block_sizes_dtypes_and_orders(block_size, dtype):
    shape = (70, 19, 3, 6, 3, 1)      # gradWeight's chunks: 32 t's (block sizes 1, 16), 30 (3), 64 (64)
    dy, x, w, b = problem(shape, dtype, seed=block_size)
    f32 = lambda a: a.astype(np.float32)  # noqa: E731  (16-bit operands are exact in fp32)
    rgi, rgw = reference(dy, x, w, 1, "cube", block_size, "ascend910b", compute_round=f32)
    with np.errstate(over="ignore"):         # sums beyond fp16's range are inf in the output, as in the model
        rgi, rgw = rgi.astype(dtype), rgw.astype(dtype)
    # a non-deterministic call adds the item chains in numpy.random.default_rng(order_seed).permutation(B)
    order = list(np.random.default_rng(5).permutation(shape[1]))
    _, rgw_perm = reference(dy, x, w, 1, "cube", block_size, "ascend910b", order=order, compute_round=f32)
    with np.errstate(over="ignore"):
        rgw_perm = rgw_perm.astype(dtype)
    try:
        for isa in ISAS:
            K._set_isa(isa)
            gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, 1, soc="ascend910b", deterministic=True,
                                             block_size=block_size)
            assert (bits(gw) == bits(rgw)).all()
            assert (bits(gi) == bits(rgi)).all()
            gw = pc.conv_tbc_backward(dy, x, w, b, 1, soc="ascend910b", deterministic=False, block_size=block_size,
                                      order_seed=5)[1]
            assert (bits(gw) == bits(rgw_perm)).all()
    finally:
        K._set_isa(None)


# ascend950 with narrow channels: its gradWeight order (t outer, pieces, a pairwise tree) stays on the general
# kernels; gradInput's order is ascend910b's, so the narrow gradInput kernels run it, from a channel-major copy of
# DY made beside the row-major panels.  B = 1 and B = 3 too (no item lanes are involved).
NARROW_950 = [(23, 8, 1, 1, 3, 1), (19, 17, 3, 5, 5, 3), (75, 48, 8, 8, 3, 1), (40, 1, 2, 2, 3, 1),
              (9, 3, 8, 3, 4, 2), (70, 12, 5, 8, 2, 1), (30, 16, 4, 2, 3, 1)]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("shape", NARROW_950)
def test_narrow_gradinput_on_ascend950(shape, dtype):
    dy, x, w, b = problem(shape, dtype, seed=sum(shape) + 5)
    pad = shape[5]
    rgi, rgw = reference(dy, x, w, pad, "cube", 8 if dtype == np.float32 else 16, "ascend950")
    with np.errstate(over="ignore"):
        rgi, rgw = rgi.astype(dtype), rgw.astype(dtype)
    _narrow_paths_match(dy, x, w, b, pad, "ascend950", rgi, rgw, (1, 2, 3))


@pytest.mark.parametrize("layout", ["dense", "strided"])
def test_narrow_channels_hf32_and_fp16_compute(layout):
    """USE_HF32 / USE_FP16 on float32 inputs with narrow channels: a dense fp32 operand is read in place and its
    channel-major copy rounded; a strided one is decoded, rounded, then copied.  Both give the model's bits."""
    shape = (37, 12, 3, 7, 3, 1)
    T_in, B, Cin, Cout, K_, pad = shape
    rng = np.random.default_rng(11)
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = (R.grid(rng, s, bits=12, emin=-12, emax=-8) for s in
                ((T_out, B, Cout), (T_in, B, Cin), (K_, Cin, Cout)))
    b = np.zeros(Cout, np.float32)
    if layout == "strided":
        dy, x = np.asfortranarray(dy), x.transpose(1, 0, 2).copy().transpose(1, 0, 2)
    cases = [(pc.USE_HF32, 8, lambda a: pc.round_to_hf32(a, mantissa_bits=11)),
             (pc.USE_FP16, 16, lambda a: a.astype(np.float16).astype(np.float32))]
    try:
        for isa in ISAS:
            K._set_isa(isa)
            for cmt, k0, rnd in cases:
                gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, pad, cube_math_type=cmt, deterministic=True)
                rgi, rgw = reference(dy, x, w, pad, "cube", k0, "ascend910b", compute_round=rnd)
                if cmt == pc.USE_FP16:
                    rgi = rgi.astype(np.float16).astype(np.float32)
                assert (bits(gw) == bits(rgw)).all() and (bits(gi) == bits(rgi)).all(), (isa, cmt)
    finally:
        K._set_isa(None)
