"""The AMX path: the cube form's BF16 blocks on tile steps (pyconvtbc/_kernels/_ukr_amx.c; docs/performance.md,
"AMX for BF16").

Every test runs on the software stand-in ('amx_standin': the tiles' measured semantics in C, two even / odd
chains, DAZ / FTZ), which every CPU has, and on the tiles themselves ('amx') where this CPU has AMX-BF16; there
the cases skip with the reason otherwise.  What is checked:
- one tile step does what the research measured (not Intel's pseudocode), including the subnormal flushing that
  makes the guard necessary;
- the whole operators equal the plain FMA kernels and the independent model (tests/accum_reference.py) bit for
  bit, on data that passes the guard, fails it, and mixes both (one tiny, subnormal, Inf or NaN value; exponents
  at the guard's edges), on every chip, every form, the shape classes and 1-3 threads; the counters show which
  blocks took the tiles;
- the start-up self-test catches a faulty engine and turns the path off.
"""
import ml_dtypes
import numpy as np
import pytest

import accum_reference as R
import pyconvtbc as pc
from pyconvtbc._kernels import _conv_tbc as K

BF16 = ml_dtypes.bfloat16
STATUS = K.amx_status()
PLAIN = [i for i in K.isas() if i not in ("amx", "amx_standin")][-1]     # the FMA kernels the engines sit on
# (the hook's ISA, its packing): the stand-in with the packing this CPU gets (AVX-512 where it runs) and with the
# generic C packing; the tiles where they are on
ENGINES = [pytest.param(("amx_standin", None), id="standin"),
           pytest.param(("amx_standin", False), id="standin-cpack"),
           pytest.param(("amx", None), id="tiles", marks=pytest.mark.skipif(
               not STATUS["amx"], reason=f"no AMX tiles here: {STATUS['amx_why']}"))]
SOCS = ("ascend910b", "ascend950", "ascend910")
# (T_in, B, Cin, Cout, K, pad): T_out not a multiple of 16, channels not multiples of 16, B = 1, K = 1, narrow
SHAPES = [(37, 3, 40, 48, 3, 1), (20, 1, 33, 17, 5, 2), (16, 2, 16, 16, 1, 0), (30, 8, 4, 6, 3, 1),
          (9, 2, 70, 35, 4, 3)]


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[a.dtype.itemsize])


def bf16_values(rng, shape, emin, emax, zeros=0.1):
    """Random bf16 values: random sign and 8-bit significand, exponent uniform in [emin, emax], some zeros."""
    sig = 1.0 + rng.integers(0, 128, shape) / 128.0
    v = np.ldexp(sig * rng.choice([-1.0, 1.0], shape), rng.integers(emin, emax + 1, shape))
    v[rng.random(shape) < zeros] = 0.0
    return v.astype(BF16)


def operands(shape, rng, emin=-6, emax=2):
    T_in, B, Cin, Cout, Kw, pad = shape
    T_out = T_in + 2 * pad - Kw + 1
    return (bf16_values(rng, (T_out, B, Cout), emin, emax), bf16_values(rng, (T_in, B, Cin), emin, emax),
            bf16_values(rng, (Kw, Cin, Cout), emin, emax), bf16_values(rng, (Cout,), emin, emax))


def _hooks(engine):
    isa, pack = engine if isinstance(engine, tuple) else (engine, None)
    return K.hooks.override(isa=isa, parallel_min=0, amx_vector_pack=pack)


def backward(engine, dy, x, w, b, pad, threads=1, **kw):
    with _hooks(engine):
        gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, pad, deterministic=True, num_threads=threads, **kw)
    return gi, gw, gb


def forward(engine, x, w, b, pad, threads=1, **kw):
    with _hooks(engine):
        return pc.conv_tbc(x, w, b, pad, num_threads=threads, **kw)


def is_hw(engine):
    return engine[0] == "amx"


def engine_counts(engine):
    return K.amx_counts(hw=is_hw(engine))


def same_as_plain(engine, dy, x, w, b, pad, threads=1, **kw):
    """The backward and forward on the engine equal the plain FMA kernels bit for bit; returns the engine's
    (tile steps, guard-failing blocks)."""
    engine_counts(engine)                                               # reset
    got = backward(engine, dy, x, w, b, pad, threads, **kw)
    out = forward(engine, x, w, b, pad, threads, **kw)
    counts = engine_counts(engine)
    ref = backward(PLAIN, dy, x, w, b, pad, threads, **kw)
    rout = forward(PLAIN, x, w, b, pad, threads, **kw)
    for name, g, r in zip(("gradInput", "gradWeight", "gradBias", "forward"), got + (out,), ref + (rout,)):
        assert g.dtype == r.dtype and (bits(g) == bits(r)).all(), (name, engine, PLAIN)
    return counts


# ---- one tile step -------------------------------------------------------------------------------------------

def model_step(c, a, b):
    """The cube model's steps, exact: per block an fp32 FMA chain from +0 (products of bf16 values and a chain
    of few bits stay exact in float64 for the probes' data), then one fp32 add."""
    c = np.array(c, np.float32)
    for k in range(a.shape[0]):
        s = np.zeros((16, 32), np.float32)
        for d in range(16):
            s = (a[k][:, d][:, None].astype(np.float64) * b[k][d][None, :] + s).astype(np.float32)
        c = (c + s).astype(np.float32)
    return c


@pytest.mark.parametrize("engine", ENGINES)
def test_one_tile_step_is_the_models_block_not_the_pseudocode(engine):
    """C = 2^24 and products 1, 1: the block's chain gives 2 first, so 2^24 + 2 (Intel's pseudocode, one chain
    from C, gives 2^24: each +1 is a tie that rounds to even); a tie inside the chain rounds to even; each step
    of the chain rounds to fp32 (2^30 + 1 - 2^30 gives 0, where a wide accumulator would keep the 1)."""
    hw = is_hw(engine)
    c = np.zeros((16, 32), np.float32)
    a = np.zeros((1, 16, 16), np.float32)
    b = np.zeros((1, 16, 32), np.float32)
    c[0, 0] = 2.0 ** 24
    a[0, 0, :2] = 1.0
    b[0, :2, 0] = 1.0
    a[0, 1, :2] = [1.0, 2.0 ** -24]                  # 1 + 2^-24: a tie, to 1
    b[0, :2, 1] = 1.0
    a[0, 2, :3] = [2.0 ** 30, 1.0, -(2.0 ** 30)]     # 2^30 + 1 rounds to 2^30 in the chain: 0, not 1
    b[0, :3, 2] = 1.0
    with _hooks(engine):
        got = K._amx_tile_dot(hw, c, a, b)
    assert got[0, 0] == 2.0 ** 24 + 2 and got[1, 1] == 1.0 and got[2, 2] == 0.0
    assert (bits(got) == bits(model_step(c, a, b))).all()


@pytest.mark.parametrize("engine", ENGINES)
def test_tile_steps_equal_the_model_on_guard_passing_blocks(engine):
    hw = is_hw(engine)
    rng = np.random.default_rng(5)
    for emin, emax, nb in ((-3, 3, 1), (-20, 20, 2), (-56, -50, 3), (10, 40, 4)):
        a = bf16_values(rng, (nb, 16, 16), emin, emax).astype(np.float32)
        b = bf16_values(rng, (nb, 16, 32), emin, emax).astype(np.float32)
        c = bf16_values(rng, (16, 32), emin, emax).astype(np.float32)
        with _hooks(engine):
            got = K._amx_tile_dot(hw, c, a, b)
        assert (bits(got) == bits(exact_model(c, a, b))).all(), (emin, emax, nb)


def exact_model(c, a, b):
    """The model with exact fp32 FMAs (rationals, each step rounded once): slow, for 16 x 32 tiles only."""
    from fractions import Fraction

    def fma32(x, y, s):
        v = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(s))
        return round_f32(v)
    out = np.array(c, np.float32)
    for k in range(a.shape[0]):
        for m in range(16):
            for n in range(32):
                s = np.float32(0.0)
                for d in range(16):
                    s = fma32(a[k, m, d], b[k, d, n], s)
                out[m, n] = round_f32(Fraction(float(out[m, n])) + Fraction(float(s)))
    return out


def round_f32(v):
    """An exact rational to float32, round to nearest, ties to even (normal range and zero: the tests' data)."""
    from fractions import Fraction
    if v == 0:
        return np.float32(0.0)
    f = np.float32(float(v))                 # within one ulp of the answer (float(v) is rounded once)
    cands = (np.nextafter(f, np.float32(-np.inf)), f, np.nextafter(f, np.float32(np.inf)))
    return min(cands, key=lambda g: (abs(Fraction(float(g)) - v), int(np.float32(g).view(np.uint32)) & 1))


@pytest.mark.parametrize("engine", ENGINES)
def test_tiles_flush_subnormals_which_is_why_the_guard_exists(engine):
    """A subnormal operand is read as zero, a subnormal product or sum is flushed to zero, a subnormal C is read
    as zero: where IEEE fp32 (the model) keeps them.  The guard keeps such blocks off the tiles."""
    hw = is_hw(engine)
    c = np.zeros((16, 32), np.float32)
    a = np.zeros((1, 16, 16), np.float32)
    b = np.zeros((1, 16, 32), np.float32)
    a[0, 0, 0], b[0, 0, 0] = 2.0 ** -130, 2.0 ** 100      # a bf16 subnormal operand: IEEE 2^-30
    a[0, 1, 0], b[0, 0, 1] = 2.0 ** -70, 2.0 ** -70       # (row 1 x column 1) a subnormal product: IEEE 2^-140
    c[2, 2] = 2.0 ** -140                                 # a subnormal accumulator, no products
    model = model_step(c, a, b)
    assert model[0, 0] == 2.0 ** -30 and model[1, 1] == np.float32(2.0 ** -140) and model[2, 2] > 0
    with _hooks(engine):
        got = K._amx_tile_dot(hw, c, a, b)
    assert got[0, 0] == 0 and got[1, 1] == 0 and got[2, 2] == 0


# ---- the operators ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("soc", SOCS)
@pytest.mark.parametrize("shape", SHAPES)
def test_bf16_operators_equal_the_fma_kernels_and_the_model(engine, soc, shape):
    rng = np.random.default_rng(sum(shape))
    dy, x, w, b = operands(shape, rng)
    try:
        counts = same_as_plain(engine, dy, x, w, b, shape[5], soc=soc)
    except pc.AclnnError as e:                       # a chip without BF16
        assert soc == "ascend910", e
        pytest.skip(f"{soc}: {e}")
    narrow = shape[2] <= 8 and shape[3] <= 8
    assert counts[1] == 0, counts                    # every block passed the guard
    # the narrow kernels (the forward on every chip, the backward in ascend910b's order) make no tile steps
    assert (counts[0] > 0) != (narrow and soc == "ascend910b"), counts
    gi, gw, _ = backward(engine, dy, x, w, b, shape[5], soc=soc)
    f32 = [a.astype(np.float32) for a in (dy, x, w)]
    rgw = R.grad_weight(f32[1], f32[0], shape[4], shape[5], "cube", 16, soc)
    rgi = R.grad_input(f32[0], f32[2], shape[0], shape[5], "cube", 16, soc)
    assert (bits(gw) == bits(rgw.astype(BF16))).all() and (bits(gi) == bits(rgi.astype(BF16))).all()
    out = forward(engine, x, w, b, shape[5], soc=soc)
    rout = R.forward(f32[1], f32[2], b.astype(np.float32), shape[5], "cube", 16)
    assert (bits(out) == bits(rout.astype(BF16))).all()


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_thread_counts(engine, threads):
    shape = (45, 4, 48, 40, 3, 1)
    dy, x, w, b = operands(shape, np.random.default_rng(threads))
    steps, falls = same_as_plain(engine, dy, x, w, b, 1, threads=threads)
    assert steps > 0 and falls == 0


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("form", ["sequential", "cube_wide", "cube_rz"])
def test_other_forms_and_block_sizes_never_take_the_tiles(engine, form):
    shape = (37, 3, 40, 48, 3, 1)
    dy, x, w, b = operands(shape, np.random.default_rng(1))
    assert same_as_plain(engine, dy, x, w, b, 1, accumulation=form) == (0, 0)
    assert same_as_plain(engine, dy, x, w, b, 1, accumulation="cube", block_size=8) == (0, 0)


@pytest.mark.parametrize("engine", ENGINES)
def test_other_compute_precisions_never_take_the_tiles(engine):
    """fp16 and fp32 operands (every cubeMathType) run on the plain table: their products do not fit bf16."""
    shape = (37, 3, 40, 48, 3, 1)
    dy, x, w, b = operands(shape, np.random.default_rng(2))
    for dt in (np.float16, np.float32):
        for cmt in ("KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32"):
            args = [a.astype(dt) for a in (dy, x, w, b)]
            try:
                assert same_as_plain(engine, *args, 1, cube_math_type=cmt) == (0, 0), (dt, cmt)
            except pc.AclnnError:                    # a combination the operator refuses
                continue


def put(a, idx, v):
    a = a.copy()
    a[idx] = v
    return a


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("case", ["subnormal", "tiny", "inf", "nan", "huge"])
def test_one_bad_value_sends_only_its_blocks_to_the_fma_kernels(engine, case):
    """One value the guard rejects in grad_output (a bf16 subnormal; 2^-110, whose products with the data,
    exponents -6 and up, need not be multiples of 2^-126; Inf; NaN; 2^120, whose products could overflow a
    chain): the blocks it is in run on the FMA kernels, the others on the tiles, and the results equal the FMA
    kernels' bit for bit."""
    shape = (64, 2, 48, 64, 3, 1)
    dy, x, w, b = operands(shape, np.random.default_rng(3))
    v = {"subnormal": 2.0 ** -130, "tiny": 2.0 ** -110, "inf": np.inf, "nan": np.nan, "huge": 2.0 ** 120}[case]
    dy = put(dy, (30, 1, 20), v)
    steps, falls = same_as_plain(engine, dy, x, w, b, 1)
    # (after an Inf or NaN block its chains are not finite: their later blocks stay on the FMA kernels too)
    assert falls > 0 and steps > (10 if case in ("subnormal", "tiny") else 2) * falls, (steps, falls)


@pytest.mark.parametrize("engine", ENGINES)
def test_guard_edges(engine):
    """emin(A) + emin(B) = -112 passes (every product a multiple of 2^-126); -113 fails.  Exponents near the top
    of the range fail the overflow bound.  The results equal the FMA kernels' either way."""
    shape = (33, 2, 32, 32, 2, 0)
    rng = np.random.default_rng(4)
    dy, x, w, b = operands(shape, rng, emin=-56, emax=-50)
    steps, falls = same_as_plain(engine, dy, x, w, b, 0)
    assert steps > 0 and falls == 0
    w1 = put(w, (1, 3, 5), -(2.0 ** -57))                  # gradInput's blocks with this weight: -57 + -56 < -112
    x1 = put(x, (10, 1, 7), 2.0 ** -57)                    # gradWeight's and the forward's blocks with this x
    steps, falls = same_as_plain(engine, dy, x1, w1, b, 0)
    assert falls > 0 and steps > falls
    big = operands(shape, rng, emin=55, emax=60)
    steps, falls = same_as_plain(engine, *big, 0)
    assert falls > 0


# ---- safety ------------------------------------------------------------------------------------------------------

def test_the_self_test_turns_a_faulty_engine_off():
    """The fault hook flips one output bit of every engine result: the self-test, run again, sees it, the path
    leaves isas() with the reason in amx_status(), and calls fall back to the FMA kernels; clearing the fault
    brings it back."""
    assert K.amx_selftest(False) == (True, "")
    try:
        isas = K._amx_fault(True)
        assert "amx_standin" not in isas and "amx" not in isas
        st = K.amx_status()
        assert not st["amx_standin"] and "self-test" in st["amx_standin_why"], st
        ok, why = K.amx_selftest(False)
        assert not ok and "differ from the model" in why
        with pytest.raises(ValueError, match="amx_standin"):
            K.hooks.set(isa="amx_standin")
    finally:
        isas = K._amx_fault(False)
    assert "amx_standin" in isas and K.amx_status()["amx_standin"]


def test_the_stand_in_is_never_the_default_and_amx_is_where_it_runs():
    assert K.isa_supported() != "amx_standin"
    assert (K.isa_supported() == "amx") == STATUS["amx"]
    if not STATUS["amx"]:
        assert STATUS["amx_why"], "the reason the tiles are off must be given"
