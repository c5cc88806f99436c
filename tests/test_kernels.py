"""The compute kernels (_kernels/_conv_tbc.pyx) called directly on NumPy views.

Each operand is passed as (address of element [0,0,0], byte strides, dtype code), exactly what the planner
hands over, so these tests exercise the kernels' strided reads without the API layers.

Reference: the three formulas of SEMANTICS.md section 1, written below in float64 NumPy on operands pre-rounded
to the compute precision with independent NumPy / ml_dtypes casts (HF32 with an integer formula of its own),
and cross-checked with torch.ops.aten.conv_tbc_backward in float64 when torch is importable.

Tolerances are derived, not tuned (Higham, "Accuracy and Stability of Numerical Algorithms", 3.1): an n-term
sum accumulated in fp32 from exact products (FP16/BF16/HF32 operands; for FP32 operands an FMA chain rounds
once per term as well) is within gamma_n * sum|a_i b_i| of the exact sum, gamma_n = n u / (1 - n u),
u = 2^-24.  Each later rounding to a format of unit roundoff u_f (2^-11 fp16, 2^-8 bf16) adds
u_f * |value| plus, below the format's normal range, half its smallest subnormal.
"""
import zlib

import ml_dtypes
import numpy as np
import pytest

from pyconvtbc._kernels import _conv_tbc as K

try:
    import torch
except Exception:  # torch is an optional peer
    torch = None

BF16 = np.dtype(ml_dtypes.bfloat16)
F16 = np.dtype(np.float16)
F32 = np.dtype(np.float32)
E4M3 = np.dtype(ml_dtypes.float8_e4m3fn)
CODE = {F32: 0, F16: 1, BF16: 27}
FP32, HF32, FP16C, BF16C = 0, 1, 2, 3          # compute precision codes
KEEP = {F32: FP32, F16: FP16C, BF16: BF16C}    # KEEP_DTYPE compute precision of each dtype
U = 2.0 ** -24
UNIT = {F32: 0.0, F16: 2.0 ** -11, BF16: 2.0 ** -8}           # unit roundoff of a final cast
TINY = {F32: 0.0, F16: 2.0 ** -25, BF16: 2.0 ** -134}         # half the smallest subnormal
ISAS = K.isas()                  # every instruction set this CPU and build run, portable first


@pytest.fixture(autouse=True)
def _parallel_always():
    """Let the small test problems really run on several threads (the default serial threshold is large)."""
    old = K._set_parallel_min(0)
    yield
    K._set_parallel_min(old)
    K._set_isa(None)


# ---------------------------------------------------------------------------------------------------------
# reference
# ---------------------------------------------------------------------------------------------------------
def hf32_round(a, bits=11, rounding=0):
    """fp32 -> HF32 (sign, exponent, `bits` mantissa bits) on the magnitude; 0 = half away, 1 = half even."""
    a = np.ascontiguousarray(a, np.float32)
    u = a.view(np.uint32).astype(np.uint64)
    s = u & 0x80000000
    m = u & 0x7FFFFFFF
    d = 23 - bits
    half = 1 << (d - 1)
    if rounding == 1:
        add = (half - 1) + ((m >> d) & 1)
    else:
        add = half
    r = ((m + add) >> d) << d
    r = np.where(m > 0x7F800000, m, r)
    return ((s | r) & 0xFFFFFFFF).astype(np.uint32).view(np.float32)


def round_to(a, compute, bits=11, rounding=0):
    """Operand rounding to the compute precision, with NumPy / ml_dtypes casts (RNE)."""
    a = np.asarray(a).astype(np.float32)
    if compute == HF32:
        return hf32_round(a, bits, rounding)
    if compute == FP16C:
        return a.astype(np.float16).astype(np.float32)
    if compute == BF16C:
        return a.astype(BF16).astype(np.float32)
    return a


def ref_grads(dy, x, w, pad):
    """float64 (gi, gw, gb) straight from the formulas; dy (T_out,B,Cout), x (T_in,B,Cin), w (K,Cin,Cout)."""
    dy, x, w = (np.asarray(a, np.float64) for a in (dy, x, w))
    T_in, B, Cin = x.shape
    KK, _, Cout = w.shape
    T_out = dy.shape[0]
    gi = np.zeros((T_in, B, Cin))
    gw = np.zeros((KK, Cin, Cout))
    for k in range(KK):
        for t in range(T_in):
            s = t + pad - k
            if 0 <= s < T_out:
                gi[t] += dy[s] @ w[k].T
        for t in range(T_out):
            s = t + k - pad
            if 0 <= s < T_in:
                gw[k] += x[s].T @ dy[t]
    gb = dy.sum(axis=(0, 1))
    return gi, gw, gb


def gamma(n):
    n = max(int(n), 1)
    return n * U / (1 - n * U)


def bounds(dy, dyr, xr, wr, pad, gi_dt, gw_dt, gb_dt, gi_c_unit=0.0, gi_c_tiny=0.0):
    """Elementwise error bounds for (gi, gw, gb) from the derived formula; *r are the rounded operands."""
    T_out, B, Cout = dyr.shape
    KK = wr.shape[0]
    egi, egw, _ = ref_grads(np.abs(dyr), np.abs(xr), np.abs(wr), pad)
    egb = np.abs(np.asarray(dy, np.float64)).sum(axis=(0, 1))
    gi_ref, gw_ref, _ = ref_grads(dyr, xr, wr, pad)
    gb_ref = np.asarray(dy, np.float64).sum(axis=(0, 1))
    e_gi = gamma(KK * Cout) * egi
    if gi_c_unit:                                  # accumulator rounded to C first
        e_gi = e_gi + gi_c_unit * (np.abs(gi_ref) + e_gi) + gi_c_tiny
    b_gi = e_gi + UNIT[gi_dt] * (np.abs(gi_ref) + e_gi) + TINY[gi_dt]
    e_gw = gamma(T_out * B) * egw
    b_gw = e_gw + UNIT[gw_dt] * (np.abs(gw_ref) + e_gw) + TINY[gw_dt]
    e_gb = gamma(T_out * B) * egb
    b_gb = e_gb + UNIT[gb_dt] * (np.abs(gb_ref) + e_gb) + TINY[gb_dt]
    return (gi_ref, gw_ref, gb_ref), (b_gi, b_gw, b_gb)


# ---------------------------------------------------------------------------------------------------------
# calling the kernel on NumPy views
# ---------------------------------------------------------------------------------------------------------
def operand(a):
    return (a.ctypes.data, *a.strides, CODE[a.dtype])


GUARD = 64  # bytes of canary around every output and after the workspace


class Out:
    """A C-contiguous output with canaries on both sides (checks that nothing is written outside it)."""

    def __init__(self, shape, dtype):
        dtype = np.dtype(dtype)
        n = int(np.prod(shape)) * dtype.itemsize
        self.buf = np.full(n + 2 * GUARD, 0xA5, np.uint8)
        self.arr = self.buf[GUARD:GUARD + n].view(dtype).reshape(shape)

    @property
    def address(self):
        return self.arr.ctypes.data if self.arr.size else 0

    def check(self):
        assert (self.buf[:GUARD] == 0xA5).all() and (self.buf[-GUARD:] == 0xA5).all(), "write outside output"


def run_kernel(dy, x, w, pad, *, gi_dt=None, gw_dt=None, gw_code=None, gb_dt=None, compute=None, bits=11,
               rounding=0, hif8_rounding=0, saturate=False, threads=1, deterministic=False):
    T_in, B, Cin = x.shape
    KK, _, Cout = w.shape
    gi_dt = np.dtype(gi_dt or x.dtype)
    gw_dt = np.dtype(gw_dt or w.dtype)
    gb_dt = np.dtype(gb_dt or dy.dtype)
    if compute is None:
        compute = KEEP[np.dtype(np.result_type(*(a.dtype for a in (dy, x, w))))] \
            if len({dy.dtype, x.dtype, w.dtype}) == 1 else FP32
    shape = (T_in, B, Cin, Cout, KK, pad)
    gwc = gw_code if gw_code is not None else CODE[gw_dt]
    dtypes = (CODE[dy.dtype], CODE[x.dtype], CODE[w.dtype], CODE[gi_dt], gwc, CODE[gb_dt])
    n = K.workspace_size(shape, compute, dtypes, threads)
    ws = np.full(n + GUARD, 0x5A, np.uint8)
    gi, gw, gb = Out(x.shape, gi_dt), Out(w.shape, gw_dt), Out((Cout,), gb_dt)
    K.run(operand(dy), operand(x), operand(w), (gi.address, CODE[gi_dt]), (gw.address, gwc),
          (gb.address, CODE[gb_dt]), shape, (compute, bits, rounding, hif8_rounding, saturate),
          ws.ctypes.data if n else 0, n, threads)
    for o in (gi, gw, gb):
        o.check()
    assert (ws[n:] == 0x5A).all(), "write past the workspace"
    return gi.arr, gw.arr, gb.arr


# ---------------------------------------------------------------------------------------------------------
# layouts: the same values seen through different strides
# ---------------------------------------------------------------------------------------------------------
LAYOUTS = ["contiguous", "transposed", "gaps", "offset", "zero_stride", "negative"]


def with_layout(a, layout):
    """A view with a's values (for zero_stride: a's first batch entry broadcast) in the given storage."""
    if layout == "contiguous":
        return a.copy()
    if layout == "transposed":                    # storage (C, T, B), viewed as (T, B, C)
        return np.ascontiguousarray(a.transpose(2, 0, 1)).transpose(1, 2, 0)
    if layout == "gaps":                          # every other T, a padded B, every third C
        big = np.zeros((2 * a.shape[0] + 1, a.shape[1] + 2, 3 * a.shape[2] + 1), a.dtype)
        v = big[1::2, 1:a.shape[1] + 1, ::3][:a.shape[0], :, :a.shape[2]]
        v[...] = a
        return v
    if layout == "offset":                        # starts 13 elements into its buffer
        buf = np.zeros(a.size + 13, a.dtype)
        v = buf[13:].reshape(a.shape)
        v[...] = a
        return v
    if layout == "zero_stride":                   # batch axis broadcast (byte stride 0)
        return np.broadcast_to(a[:, :1, :], a.shape)
    if layout == "negative":                      # T and C reversed in storage
        return np.ascontiguousarray(a[::-1, :, ::-1])[::-1, :, ::-1]
    raise AssertionError(layout)


def rand(rng, shape, dtype, scale=1.0):
    return (rng.standard_normal(shape) * scale).astype(np.float32).astype(dtype)


def check(dy, x, w, pad, got, *, compute=None, bits=11, rounding=0, gi_dt=None, gw_dt=None, gb_dt=None):
    """Compare kernel outputs with the float64 reference within the derived bounds (+ torch when present)."""
    gi_dt = np.dtype(gi_dt or x.dtype)
    gw_dt = np.dtype(gw_dt or w.dtype)
    gb_dt = np.dtype(gb_dt or dy.dtype)
    if compute is None:
        compute = KEEP[dy.dtype] if len({dy.dtype, x.dtype, w.dtype}) == 1 else FP32
    dyr, xr, wr = (round_to(a, compute, bits, rounding) for a in (dy, x, w))
    c_unit = {FP16C: UNIT[F16], BF16C: UNIT[BF16]}.get(compute, 0.0)
    c_tiny = {FP16C: TINY[F16], BF16C: TINY[BF16]}.get(compute, 0.0)
    refs, bnds = bounds(dy, dyr, xr, wr, pad, gi_dt, gw_dt, gb_dt, c_unit, c_tiny)
    for name, g, r, b in zip(("gi", "gw", "gb"), got, refs, bnds):
        err = np.abs(np.asarray(g, np.float64) - r)
        assert np.all(err <= b), f"{name}: max err {err.max()} > bound {b.flat[np.argmax(err - b)]}"
    if torch is not None and dy.shape[0] * dy.shape[1] * dy.shape[2] and x.size and w.size:
        t = torch.ops.aten.conv_tbc_backward(
            torch.from_numpy(np.ascontiguousarray(dyr, np.float64)), torch.from_numpy(np.ascontiguousarray(xr, np.float64)),
            torch.from_numpy(np.ascontiguousarray(wr, np.float64)), torch.zeros(w.shape[2], dtype=torch.float64), pad)
        tg = (t[0].numpy(), t[1].numpy(), np.asarray(dy, np.float64).sum(axis=(0, 1)))
        for name, g, r, b in zip(("gi", "gw", "gb"), got, tg, bnds):
            err = np.abs(np.asarray(g, np.float64) - r)
            # torch's float64 result is itself within ~n*2^-53*sum|ab| of the exact value: negligible
            assert np.all(err <= b * (1 + 1e-6) + 1e-300), f"{name} vs torch: max err {err.max()}"


# ---------------------------------------------------------------------------------------------------------
# the main sweep: dtype x layout x threads x pad x K
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("K_", [1, 3, 5])
@pytest.mark.parametrize("pad", [0, 1, 3])
@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", [F32, F16, BF16], ids=["float32", "float16", "bfloat16"])
def test_sweep(dtype, layout, threads, pad, K_):
    rng = np.random.default_rng(zlib.crc32(f"{dtype}{layout}{threads}{pad}{K_}".encode()))
    T_in, B, Cin, Cout = 9, 4, 37, 35          # 2 DY panels, 2 W panels, 5 X panels, partial tiles
    T_out = T_in + 2 * pad - K_ + 1
    dy = with_layout(rand(rng, (T_out, B, Cout), dtype), layout)
    x = with_layout(rand(rng, (T_in, B, Cin), dtype), layout)
    w = with_layout(rand(rng, (K_, Cin, Cout), dtype), layout)
    got = run_kernel(dy, x, w, pad, threads=threads)
    check(dy, x, w, pad, got)


@pytest.mark.parametrize("shape", [
    (40, 5, 70, 45, 3, 1),      # rows > one gi row block, partial panels everywhere
    (12, 3, 300, 290, 2, 0),    # more than one gi ci block, gw ci/co block, gi reduction block
    (700, 3, 4, 5, 3, 2),       # more rows than one gb chunk and one gw row block
    (5, 1, 2, 2, 1, 0),         # the document's example size
    (3, 2, 6, 7, 5, 4),         # pad > K - 1: every k valid everywhere, T_out > T_in
])
@pytest.mark.parametrize("threads", [1, 2, 3])
def test_block_edges(shape, threads):
    rng = np.random.default_rng(sum(shape) + threads)
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = rand(rng, (T_out, B, Cout), F32), rand(rng, (T_in, B, Cin), F32), rand(rng, (K_, Cin, Cout), F32)
    check(dy, x, w, pad, run_kernel(dy, x, w, pad, threads=threads))


@pytest.mark.parametrize("shape", [
    (700, 3, 5, 32, 3, 2),      # both operands single-panel: read in place; more rows than one gb chunk
    (50, 4, 8, 2, 4, 1),        # Cin = one full X panel
    (40, 1, 3, 17, 2, 0),       # B = 1
    (1, 6, 8, 9, 1, 0),         # T = 1
    (30, 2, 40, 30, 3, 1),      # only DY single-panel
    (30, 2, 7, 40, 3, 1),       # only X single-panel
])
@pytest.mark.parametrize("threads", [1, 2])
def test_in_place_panels(shape, threads):
    """Single-panel fp32 operands are read in place (no pack pass): the same bits as when a strided copy
    of the same values is packed, on every code path, the reference bound holds, and the inputs are
    left untouched."""
    rng = np.random.default_rng(sum(shape))
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = rand(rng, (T_out, B, Cout), F32), rand(rng, (T_in, B, Cin), F32), rand(rng, (K_, Cin, Cout), F32)
    keep = dy.copy(), x.copy()
    gaps = [with_layout(a, "gaps") for a in (dy, x, w)]
    for isa in ISAS:
        K._set_isa(isa)
        dense = run_kernel(dy, x, w, pad, threads=threads)
        assert _bits(dense) == _bits(run_kernel(*gaps, pad, threads=threads)), isa
        check(dy, x, w, pad, dense)
    assert np.array_equal(dy, keep[0]) and np.array_equal(x, keep[1])


@pytest.mark.parametrize("shape", [
    (512, 4, 8, 8, 3, 1),       # 3 k share each DY row (NK = 3), 4 co pairs
    (70, 3, 8, 5, 5, 2),        # odd Cout: the last pair is half empty; K = 5 -> k passes of 3 + 2
    (40, 2, 16, 1, 2, 0),       # one co; two full X panels
    (40, 2, 12, 7, 1, 0),       # a full panel and a 4-wide one (the plain kernel)
    (300, 1, 24, 8, 4, 3),      # pad > K - 1
])
@pytest.mark.parametrize("layout", ["contiguous", "gaps"])
def test_gw_co_pair_kernel(shape, layout):
    """The AVX-512 co-pair gw kernel (8 ci x 2 co per vector, narrow channels) gives the plain kernel's bits,
    for X read in place (contiguous) and packed (gaps), and the reference bound holds."""
    if "avx512" not in ISAS:
        pytest.skip("no AVX-512 on this CPU")
    rng = np.random.default_rng(sum(shape))
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = (with_layout(rand(rng, s, F32), layout) for s in ((T_out, B, Cout), (T_in, B, Cin), (K_, Cin, Cout)))
    K._set_isa("avx512")
    old = K._set_gw_pairs(False)
    try:
        plain = run_kernel(dy, x, w, pad, threads=2)
        K._set_gw_pairs(True)
        pairs = run_kernel(dy, x, w, pad, threads=2)
    finally:
        K._set_gw_pairs(old)
    assert _bits(pairs) == _bits(plain)
    check(dy, x, w, pad, pairs)


def widen_exact(a):
    """fp16 / bf16 -> fp32 on the bit patterns, signalling NaNs and payloads kept.  (NumPy's float16 cast quiets
    signalling NaNs on aarch64, whose conversion instruction does, and keeps them on x86.)"""
    h = np.ascontiguousarray(a).view(np.uint16).astype(np.uint32)
    if a.dtype == BF16:
        return (h << 16).view(np.float32)
    sign, e, m = (h & 0x8000) << 16, (h >> 10) & 0x1F, h & 0x3FF
    out = np.where(e == 31, 0x7F800000 | (m << 13), ((e + 112) << 23) | (m << 13))   # Inf / NaN, normal
    sub = (m.astype(np.float64) * 2.0 ** -24).astype(np.float32).view(np.uint32)     # subnormal: exact
    out = np.where(e == 0, sub, out) | sign
    return out.astype(np.uint32).view(np.float32)


def test_widen_exact():
    """widen_exact gives the value of every finite fp16 / bf16 pattern, and NaN patterns bit for bit."""
    codes = np.arange(65536, dtype=np.uint32).astype(np.uint16)
    for dt in (F16, BF16):
        v = codes.view(dt)
        got = widen_exact(v)
        fin = np.isfinite(v.astype(np.float32))
        assert np.array_equal(got[fin], v[fin].astype(np.float64).astype(np.float32))
        assert np.array_equal(np.isinf(got), np.isinf(v.astype(np.float32)))
    assert widen_exact(np.array([0x7C01, 0xFE03], np.uint16).view(F16)).view(np.uint32).tolist() == \
        [0x7F802000, 0xFFC06000]
    assert widen_exact(np.array([0x7F81], np.uint16).view(BF16)).view(np.uint32).tolist() == [0x7F810000]


@pytest.mark.parametrize("dtype,compute", [(F16, FP16C), (BF16, BF16C)], ids=["f16", "bf16"])
def test_no_rounding_pass_for_compute_format_data(dtype, compute):
    """fp16 data with FP16 compute (bf16 with BF16) is packed without a rounding pass: the results are the bits
    of the same values given as fp32 and rounded to the compute format, signalling NaNs, infinities and
    subnormals included, on every code path.  NaN outputs are the one canonical NaN (docs/precision.md): without
    it the two would differ on aarch64, whose FMA returns a signalling NaN operand (quieted) before a quiet one
    and the addend's NaN before the multiplicands', where x86 returns the first operand's."""
    rng = np.random.default_rng(3)
    T_in, B, Cin, Cout, K_, pad = 40, 3, 19, 21, 3, 1
    T_out = T_in + 2 * pad - K_ + 1
    bits16 = {F16: [0x7C01, 0xFC02, 0x7E03, 0x7C00, 0x0001, 0x83FF],       # sNaN, sNaN, qNaN, inf, subnormals
              BF16: [0x7F81, 0xFF82, 0x7FC3, 0x7F80, 0x0001, 0x807F]}[dtype]
    arrs = []
    for s in ((T_out, B, Cout), (T_in, B, Cin), (K_, Cin, Cout)):
        a = rand(rng, s, dtype)
        flat = a.reshape(-1).view(np.uint16)
        flat[rng.choice(flat.size, len(bits16), replace=False)] = bits16
        arrs.append(a)
    as32 = [widen_exact(a) for a in arrs]           # the same values, signalling NaNs included, on every CPU
    assert np.isnan(as32[1]).any()
    outs = dict(gi_dt=dtype, gw_dt=dtype, gb_dt=dtype)
    for isa in ISAS:
        K._set_isa(isa)
        direct = run_kernel(*arrs, pad, compute=compute)
        rounded = run_kernel(*as32, pad, compute=compute, **outs)
        assert _bits(direct) == _bits(rounded), isa


def test_document_example_values():
    x = np.ones((5, 1, 2), np.float32)
    w = np.ones((1, 2, 2), np.float32)
    dy = np.ones((5, 1, 2), np.float32)
    gi, gw, gb = run_kernel(dy, x, w, 0)
    assert (gi == 2).all() and (gw == 5).all() and (gb == 5).all()


# ---------------------------------------------------------------------------------------------------------
# precision modes and output dtypes
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("compute,bits,rounding", [
    (HF32, 11, 0), (HF32, 11, 1), (HF32, 10, 0), (FP16C, 11, 0), (BF16C, 11, 0), (FP32, 11, 0)])
@pytest.mark.parametrize("threads", [1, 2])
def test_compute_modes_fp32_inputs(compute, bits, rounding, threads):
    rng = np.random.default_rng(compute * 100 + bits + rounding)
    T_in, B, Cin, Cout, K_, pad = 11, 3, 20, 33, 3, 1
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = rand(rng, (T_out, B, Cout), F32), rand(rng, (T_in, B, Cin), F32), rand(rng, (K_, Cin, Cout), F32)
    got = run_kernel(dy, x, w, pad, compute=compute, bits=bits, rounding=rounding, threads=threads)
    check(dy, x, w, pad, got, compute=compute, bits=bits, rounding=rounding)


def test_gi_rounded_to_compute_precision():
    """FLOAT inputs with FP16 compute: gi passes through fp16 (values exactly representable in fp16)."""
    rng = np.random.default_rng(5)
    T_in, B, Cin, Cout, K_, pad = 8, 2, 5, 6, 3, 1
    dy, x, w = rand(rng, (T_in, B, Cout), F32), rand(rng, (T_in, B, Cin), F32), rand(rng, (K_, Cin, Cout), F32)
    for compute, dt in ((FP16C, np.float16), (BF16C, BF16)):
        gi, gw, gb = run_kernel(dy, x, w, pad, compute=compute)
        assert np.array_equal(gi, gi.astype(dt).astype(np.float32))
        gi32, _, _ = run_kernel(round_to(dy, compute), round_to(x, compute), round_to(w, compute), pad)
        assert np.array_equal(gi, gi32.astype(dt).astype(np.float32))   # same fp32 sums, then one rounding
        _, _, gb32 = run_kernel(dy, x, w, pad)
        assert np.array_equal(gb, gb32)                                  # gb: original dy, not rounded


def test_mixed_dtypes():
    rng = np.random.default_rng(7)
    T_in, B, Cin, Cout, K_, pad = 10, 3, 9, 17, 3, 1
    T_out = T_in + 2 * pad - K_ + 1
    dy = with_layout(rand(rng, (T_out, B, Cout), F16), "transposed")
    x = with_layout(rand(rng, (T_in, B, Cin), BF16), "gaps")
    w = rand(rng, (K_, Cin, Cout), F32)
    for threads in (1, 2):
        got = run_kernel(dy, x, w, pad, compute=FP32, gi_dt=F32, gw_dt=F32, gb_dt=F32, threads=threads)
        check(dy, x, w, pad, got, compute=FP32, gi_dt=F32, gw_dt=F32, gb_dt=F32)
        got = run_kernel(dy, x, w, pad, compute=FP32, gi_dt=BF16, gw_dt=F16, gb_dt=F16, threads=threads)
        check(dy, x, w, pad, got, compute=FP32, gi_dt=BF16, gw_dt=F16, gb_dt=F16)


@pytest.mark.parametrize("saturate", [False, True])
@pytest.mark.parametrize("hif8_rounding", [0, 1])
def test_gw_8bit_outputs(saturate, hif8_rounding):
    from pyconvtbc._kernels import _codecs
    rng = np.random.default_rng(11)
    T_in, B, Cin, Cout, K_, pad = 30, 4, 6, 9, 3, 1
    T_out = T_in + 2 * pad - K_ + 1
    dy = rand(rng, (T_out, B, Cout), F32, 30.0)     # large enough to reach HiF8 / E4M3 overflow
    x, w = rand(rng, (T_in, B, Cin), F32, 30.0), rand(rng, (K_, Cin, Cout), F32)
    _, gw32, _ = run_kernel(dy, x, w, pad)
    _, h8, _ = run_kernel(dy, x, w, pad, gw_dt=np.uint8, gw_code=34, hif8_rounding=hif8_rounding,
                          saturate=saturate)
    want = np.empty(gw32.size, np.uint8)
    _codecs.hif8_encode_f32(np.ascontiguousarray(gw32).ravel(), want, hif8_rounding, saturate, 1)
    assert np.array_equal(h8.ravel(), want)
    _, e8, _ = run_kernel(dy, x, w, pad, gw_dt=np.uint8, gw_code=36, saturate=saturate)
    if saturate:
        ref = np.clip(gw32, -448, 448).astype(E4M3).view(np.uint8)
    else:
        ref = gw32.astype(E4M3).view(np.uint8)
        # ml_dtypes keeps the sign of a NaN (overflow of a negative sum: 0xFF); an output NaN is the one
        # canonical 0x7F (docs/precision.md, "NaN outputs")
        ref = np.where((ref & 0x7F) == 0x7F, np.uint8(0x7F), ref)
        assert (ref == 0x7F).any()
    assert np.array_equal(e8, ref)


# ---------------------------------------------------------------------------------------------------------
# empty problems: zero sums, no null-pointer access
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [
    (0, 2, 3, 4, 1, 0),   # T_in = 0 (T_out = 0)
    (0, 2, 3, 4, 1, 1),   # T_in = 0, T_out = 2: gw, gi empty-ish, gb real
    (4, 0, 3, 4, 3, 1),   # B = 0
    (4, 2, 3, 4, 0, 1),   # K = 0: T_out = T_in + 3
    (4, 2, 0, 4, 3, 1),   # Cin = 0
    (4, 2, 3, 0, 3, 1),   # Cout = 0
    (2, 2, 3, 4, 3, 0),   # T_out = 0
    (0, 0, 0, 0, 0, 0),
])
@pytest.mark.parametrize("threads", [1, 2])
def test_empty(shape, threads):
    rng = np.random.default_rng(3)
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = rand(rng, (T_out, B, Cout), F32), rand(rng, (T_in, B, Cin), F32), rand(rng, (K_, Cin, Cout), F32)
    gi, gw, gb = run_kernel(dy, x, w, pad, threads=threads)
    ref = ref_grads(dy, x, w, pad)
    for g, r in zip((gi, gw, gb), ref):
        assert g.shape == r.shape
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------------------------
# determinism: bitwise identical for 1-4 threads (and every instruction set), every dtype and mode
# ---------------------------------------------------------------------------------------------------------
DET_SHAPE = (300, 8, 64, 64, 5, 2)


def _det_inputs(dtype):
    rng = np.random.default_rng(42)
    T_in, B, Cin, Cout, K_, pad = DET_SHAPE
    T_out = T_in + 2 * pad - K_ + 1
    return rand(rng, (T_out, B, Cout), dtype), rand(rng, (T_in, B, Cin), dtype), rand(rng, (K_, Cin, Cout), dtype)


def _bits(arrs):
    return [np.ascontiguousarray(a).view(np.uint8).tobytes() for a in arrs]


@pytest.mark.parametrize("dtype,compute", [(F32, FP32), (F32, HF32), (F32, FP16C), (F32, BF16C),
                                           (F16, FP16C), (BF16, BF16C)],
                         ids=["f32-keep", "f32-hf32", "f32-fp16", "f32-bf16", "f16", "bf16"])
def test_determinism_threads(dtype, compute):
    dy, x, w = _det_inputs(dtype)
    pad = DET_SHAPE[5]
    K._set_parallel_min(None)                  # the real threshold: this shape is above it
    first = _bits(run_kernel(dy, x, w, pad, compute=compute, threads=1, deterministic=True))
    for threads in (2, 3, 4):
        assert _bits(run_kernel(dy, x, w, pad, compute=compute, threads=threads, deterministic=True)) == first
    # the default (non-deterministic) mode uses the same schedule: also identical
    assert _bits(run_kernel(dy, x, w, pad, compute=compute, threads=2, deterministic=False)) == first


@pytest.mark.parametrize("shape", [(40, 5, 45, 38, 3, 1), (60, 7, 11, 9, 5, 1), (50, 3, 2, 3, 4, 3),
                                   (60, 5, 8, 6, 3, 1)])
@pytest.mark.parametrize("dtype,compute", [(F32, FP32), (F32, HF32), (F16, FP16C), (BF16, BF16C)])
def test_determinism_isa(dtype, compute, shape):
    """Every code path computes the same FMA chains in the same order: bitwise identical results
    (narrow shapes take the fused multi-k kernels on AVX-512 and the per-k loops elsewhere)."""
    rng = np.random.default_rng(9)
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = (with_layout(rand(rng, s, dtype), "gaps") for s in
                ((T_out, B, Cout), (T_in, B, Cin), (K_, Cin, Cout)))
    out = {}
    for isa in ISAS:
        K._set_isa(isa)
        out[isa] = _bits(run_kernel(dy, x, w, pad, compute=compute, threads=2, deterministic=True))
    K._set_isa(None)
    for isa in ISAS:
        assert out[isa] == out[ISAS[0]], isa


# ---------------------------------------------------------------------------------------------------------
# the vector row codecs agree bit for bit with the scalar codecs of _fpround.pxd
# ---------------------------------------------------------------------------------------------------------
def _codec_values():
    rng = np.random.default_rng(1)
    special = np.array([0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0x7F800001, 0xFFFFFFFF, 0x7F7FFFFF,
                        0x477FEFFF, 0x477FF000, 0x477FE000, 0x33000000, 0x33000001, 0x38800000, 0x387FFFFF, 1,
                        0x00800000, 0x7F7FF000, 0x7F7FF800, 0x3F800800, 0x3F801000, 0x3F800FFF], np.uint32)
    # every fp16 value, and the midpoints and their neighbours (the rounding ties)
    h = np.arange(65536, dtype=np.uint16).view(np.float16).astype(np.float32).view(np.uint32)
    ties = np.concatenate([h + 0x1000, h + 0xFFF, h + 0x1001, h + 0x8000, h + 0x7FFF, h + 0x8001, h + 0x800,
                           h + 0x7FF, h + 0x801])
    rnd = rng.integers(0, 2**32, 1 << 18, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([special, h, ties, rnd]).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("isa", ISAS)
def test_vector_codecs_match_scalar(isa):
    v = _codec_values()
    for bits, rnd in ((11, 0), (11, 1), (10, 0), (10, 1), (1, 0), (22, 1)):
        want_h, want_f16, want_bf16 = K._scalar_codecs(v, bits, rnd)
        got, f16, bf16 = K._codec_rows(v, HF32, bits, rnd, isa)
        assert np.array_equal(got.view(np.uint32), want_h.view(np.uint32)), (isa, bits, rnd)
    assert np.array_equal(f16, want_f16)
    assert np.array_equal(bf16, want_bf16)
    got16, _, _ = K._codec_rows(v, FP16C, 11, 0, isa)
    assert np.array_equal(got16.view(np.uint32),
                          np.array([K._decode_rows(want_f16, 1, "portable")]).ravel().view(np.uint32))
    gotb, _, _ = K._codec_rows(v, BF16C, 11, 0, isa)
    assert np.array_equal(gotb.view(np.uint32), want_bf16.astype(np.uint32) << 16)
    # and the scalar codecs agree with NumPy / ml_dtypes on everything but NaN payloads
    fin = ~np.isnan(v)
    with np.errstate(over="ignore"):
        assert np.array_equal(want_f16[fin], v[fin].astype(np.float16).view(np.uint16))
        assert np.array_equal(want_bf16[fin], v[fin].astype(BF16).view(np.uint16))
    codes = np.arange(65536, dtype=np.uint16)
    for dt, npdt in ((1, np.float16), (27, BF16)):
        dec = K._decode_rows(codes, dt, isa)
        assert np.array_equal(dec.view(np.uint32), K._decode_rows(codes, dt, "portable").view(np.uint32))
        ok = ~np.isnan(dec)
        assert np.array_equal(dec[ok], codes.view(npdt).astype(np.float32)[ok])


# ---------------------------------------------------------------------------------------------------------
# argument checks and the workspace contract
# ---------------------------------------------------------------------------------------------------------
def test_workspace_within_budget():
    """Workspace <= 1.5 x the fp32 bytes of self + input + weight on the benchmark shapes."""
    for (T_in, B, Cin, Cout, K_, pad) in [(64, 64, 256, 512, 3, 1), (128, 32, 512, 1024, 3, 1),
                                          (256, 16, 512, 512, 5, 2), (4096, 8, 256, 256, 3, 1),
                                          (256, 16, 256, 256, 25, 12), (512, 32, 2, 2, 3, 1),
                                          (512, 32, 8, 8, 3, 1), (512, 32, 32, 32, 3, 1)]:
        T_out = T_in + 2 * pad - K_ + 1
        budget = 1.5 * 4 * (T_out * B * Cout + T_in * B * Cin + K_ * Cin * Cout)
        for threads in (1, 2):
            assert K.workspace_size((T_in, B, Cin, Cout, K_, pad), 0, (0,) * 6, threads) <= budget


def test_rejects_small_workspace_and_bad_codes():
    rng = np.random.default_rng(0)
    dy, x, w = rand(rng, (6, 2, 4), F32), rand(rng, (6, 2, 3), F32), rand(rng, (3, 3, 4), F32)
    shape = (6, 2, 3, 4, 3, 1)
    n = K.workspace_size(shape, 0, (0,) * 6, 1)
    ws = np.zeros(n, np.uint8)
    gi, gw, gb = np.zeros(x.shape, np.float32), np.zeros(w.shape, np.float32), np.zeros(4, np.float32)
    outs = ((gi.ctypes.data, 0), (gw.ctypes.data, 0), (gb.ctypes.data, 0))
    with pytest.raises(ValueError):
        K.run(operand(dy), operand(x), operand(w), *outs, shape, (0, 11, 0, 0, False), ws.ctypes.data, n - 65, 1)
    with pytest.raises(ValueError):
        K.run(operand(dy), operand(x), operand(w), (gi.ctypes.data, 34), outs[1], outs[2], shape,
              (0, 11, 0, 0, False), ws.ctypes.data, n, 1)
    with pytest.raises(ValueError):
        K.run(operand(dy), operand(x), operand(w), *outs, shape, (7, 11, 0, 0, False), ws.ctypes.data, n, 1)
    with pytest.raises(ValueError):
        K.workspace_size((2, 2, 2, 2, 9, 0), 0, (0,) * 6, 1)   # T_out < 0


def test_run_arrays_matches_run_and_checks_the_plan():
    """The NumPy layer's entry (arrays in, addresses read in C) gives run's bits and rejects arrays that do not
    match the plan instead of reading past them."""
    rng = np.random.default_rng(1)
    dy, x, w = rand(rng, (6, 2, 4), F32), rand(rng, (6, 2, 3), F32), rand(rng, (3, 3, 4), F32)
    dy = with_layout(dy, "gaps")
    shape, mode, codes = (6, 2, 3, 4, 3, 1), (0, 11, 0, 0, False), (0,) * 6
    n = K.workspace_size(shape, 0, codes, 1)
    ws = np.zeros(n, np.uint8)
    outs = [np.zeros(x.shape, np.float32), np.zeros(w.shape, np.float32), np.zeros(4, np.float32)]
    K.run_arrays(dy, x, w, *outs, codes, shape, mode, ws, 1)
    assert _bits(outs) == _bits(run_kernel(dy, x, w, 1))
    bad = [((dy[:-1], x, w, *outs), codes, ws),                                # dy shape
           ((dy, x, w.astype(np.float16), *outs), codes, ws),                  # w itemsize
           ((dy, x, w, outs[0][:, :, :2], outs[1], outs[2]), codes, ws),       # gi size
           ((dy, x, w, outs[0].transpose(1, 0, 2), outs[1], outs[2]), codes, ws),  # gi not C-contiguous
           ((dy, x, w, *outs), codes, ws[:n - 65]),                            # workspace too small
           ((dy, x, w, *outs), codes, None),                                   # no workspace
           ((dy, x, w, *outs), (0, 0, 0, 0, 2, 0), ws)]                        # gw dtype code
    for arrays, c, wsb in bad:
        with pytest.raises(ValueError):
            K.run_arrays(*arrays, c, shape, mode, wsb, 1)


def test_run_forward_arrays_matches_run_forward_and_checks_the_plan():
    """The forward's NumPy-layer entry (arrays in, addresses read in C) gives run_forward's bits, on strided
    operands too, and rejects arrays that do not match the plan instead of reading past them."""
    rng = np.random.default_rng(2)
    x, w = with_layout(rand(rng, (6, 2, 3), F32), "gaps"), rand(rng, (3, 3, 4), F32)
    start = rand(rng, (4,), F32)
    shape, mode = (6, 2, 3, 4, 3, 1), (0, 11, 0, 0, False, 1, 8, 0)      # the "cube" form, k0 = 8
    n = K.forward_workspace_size(shape, mode, 0, 1)
    ws = np.zeros(n + 64, np.uint8)
    out = np.zeros((6, 2, 4), np.float32)
    K.run_forward_arrays(x, w, start, out, 0, 0, shape, mode, ws, 1)
    want = np.zeros_like(out)
    K.run_forward(operand(x), operand(w), start.ctypes.data, (want.ctypes.data, 0), shape, mode,
                  ws.ctypes.data, ws.size, 1)
    assert out.tobytes() == want.tobytes() and np.isfinite(out).all()
    bad = [(x[:-1], w, start, out, 0, ws),                           # x shape
           (x, w.astype(np.float16), start, out, 0, ws),             # w itemsize
           (x, w, start.astype(np.float64), out, 0, ws),             # start dtype
           (x, w, start[:3], out, 0, ws),                            # start size
           (x, w, start, out[:, :, :2], 0, ws),                      # out size
           (x, w, start, out.transpose(1, 0, 2), 0, ws),             # out not C-contiguous
           (x, w, start, out, 7, ws),                                # out dtype code
           (x, w, start, out, 0, ws[:n - 65]),                       # workspace too small
           (x, w, start, out, 0, None)]                              # no workspace
    for xa, wa, sa, oa, code, wsb in bad:
        with pytest.raises(ValueError):
            K.run_forward_arrays(xa, wa, sa, oa, 0, code, shape, mode, wsb, 1)


def test_releases_the_gil():
    """A long call in one thread lets another Python thread run meanwhile."""
    import threading
    import time
    rng = np.random.default_rng(0)
    T_in, B, Cin, Cout, K_, pad = 64, 16, 128, 128, 3, 1
    dy, x, w = rand(rng, (T_in, B, Cout), F32), rand(rng, (T_in, B, Cin), F32), rand(rng, (K_, Cin, Cout), F32)
    ticks = []
    done = threading.Event()

    def spin():
        while not done.is_set():
            ticks.append(time.perf_counter())
            time.sleep(0)

    th = threading.Thread(target=spin)
    th.start()
    try:
        for _ in range(5):
            run_kernel(dy, x, w, pad, threads=1)
    finally:
        done.set()
        th.join()
    assert len(ticks) > 5


@pytest.mark.parametrize("shape", [(40, 9, 3, 5, 3, 1), (64, 16, 4, 4, 3, 1)])   # general and narrow kernels
def test_run_arrays_batch_order(shape):
    """The per-call batch order of the item chains (non-deterministic mode): any integer sequence that is a
    permutation of range(B) is taken (read in place when it is an int64 C-contiguous array, converted
    otherwise), the identity gives b order's bits, a reversal changes them, and anything else is refused
    before a byte is written."""
    T_in, B, Cin, Cout, K_, pad = shape
    rng = np.random.default_rng(3)
    T_out = T_in + 2 * pad - K_ + 1
    dy, x, w = rand(rng, (T_out, B, Cout), F32), rand(rng, (T_in, B, Cin), F32), rand(rng, (K_, Cin, Cout), F32)
    mode, codes = (0, 11, 0, 0, False, 1, 8, 0), (0,) * 6     # "cube", k0 = 8, the ascend910b order
    ws = np.zeros(K.workspace_size(shape, mode, codes, 1), np.uint8)

    def gw_with(perm):
        outs = [np.full(x.shape, np.nan, np.float32), np.full(w.shape, np.nan, np.float32),
                np.full(Cout, np.nan, np.float32)]
        K.run_arrays(dy, x, w, *outs, codes, shape, mode, ws, 1, perm)
        return outs[1]

    b_order = gw_with(None).view(np.uint32)
    rev = np.arange(B)[::-1]
    assert (gw_with(np.arange(B)).view(np.uint32) == b_order).all()
    assert (gw_with(list(range(B))).view(np.uint32) == b_order).all()
    reversed_bits = gw_with(rev.copy()).view(np.uint32)
    assert (reversed_bits != b_order).any()          # the order matters on these data (full-precision values)
    for same in (rev, rev.astype(np.int32), [int(v) for v in rev], np.asarray(rev, order="C").copy()):
        assert (gw_with(same).view(np.uint32) == reversed_bits).all()
    for bad in ([0] * B, list(range(B - 1)), list(range(B + 1)), [-1] + list(range(1, B)),
                list(range(1, B + 1)), np.arange(B).reshape(1, B)):
        outs = [np.full(x.shape, np.nan, np.float32), np.full(w.shape, np.nan, np.float32),
                np.full(Cout, np.nan, np.float32)]
        with pytest.raises(ValueError, match="permutation of range"):
            K.run_arrays(dy, x, w, *outs, codes, shape, mode, ws, 1, bad)
        assert all(np.isnan(o).all() for o in outs)
