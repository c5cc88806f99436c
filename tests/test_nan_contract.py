"""The NaN contract (docs/precision.md, "NaN outputs"): every NaN an operator writes is the output format's one
canonical NaN, and outputs are bit-identical on every instruction set and thread count, NaN, Inf and subnormal
inputs included.

The grid is tests/nan_grid.py (shapes x chips x cubeMathTypes x forms x dtypes, both operators, with clean,
Inf / subnormal and NaN inputs).  Each case runs under every instruction set this CPU has (one thread) and the
best one with two threads forced parallel; the NaN positions are checked against an independent float64 model
(tests/reference.py): an output is NaN exactly when a term of its sum is NaN (a NaN operand, or Inf x 0 after
the operands' rounding to the compute format) or its terms hold both +Inf and -Inf; FLOAT8_E4M3FN, which has no
Inf, also turns an overflow into NaN.
"""
import itertools

import numpy as np
import pytest

from pyconvtbc._kernels import _conv_tbc as K

import nan_grid as G
from reference import conv_tbc_backward_ref, conv_tbc_ref, round_operand

ISAS = K.isas()                  # every instruction set this CPU and build run, portable first
# (isa, threads): every ISA serially, the best one with two threads (parallel_min=0 forces the parallel path)
RUNS = [(isa, 1) for isa in ISAS] + [(ISAS[-1], 2)]

CASES = list(G.cases())
GROUPS = sorted({(c.op, c.dtype, c.gw_dtype or "-", c.soc) for c in CASES})


def _hif8_placeholder(codes):
    """HiFloat8 codes as values with the same NaN / Inf / zero / sign classes (0x80 NaN, 0x6F / 0xEF +-Inf,
    0x00 zero, anything else a finite non-zero value of its sign): enough for where NaNs arise, since no
    finite HiFloat8 product or short sum of them overflows."""
    c = np.asarray(codes, np.uint8)
    v = np.where(c & 0x80, -1.0, 1.0)
    v = np.where(c == 0x00, 0.0, v)
    v = np.where(c == 0x6F, np.inf, v)
    v = np.where(c == 0xEF, -np.inf, v)
    return np.where(c == 0x80, np.nan, v)


def expected_nan(case, arrays):
    """Output name -> boolean mask of the elements that must be NaN, from the float64 model."""
    pad = case.shape[5]
    C = case.compute()
    with np.errstate(invalid="ignore", over="ignore"):
        if case.op == "forward":
            x, w, b = arrays
            if C == "HIF8":
                rx, rw = _hif8_placeholder(x), _hif8_placeholder(w)
            else:
                rx, rw = round_operand(x, C, case.soc), round_operand(w, C, case.soc)
            # the bias is cast to its format (NaN stays NaN, Inf stays Inf, N(0,1) values stay finite)
            return {"out": np.isnan(conv_tbc_ref(rx, rw, np.asarray(b, np.float64), pad))}
        dy, x, w, _ = arrays
        r = [round_operand(a, C, case.soc) for a in (dy, x, w)]
        gi, gw, _ = conv_tbc_backward_ref(*r, pad)
        gb = np.asarray(dy, np.float64).sum(axis=(0, 1))        # gradBias: the original self values
        gw_nan = np.isnan(gw)
        if case.gw_dtype == "float8_e4m3fn":                     # no Inf: an overflow is NaN
            gw_nan |= np.abs(gw) > 464
        return {"gradInput": np.isnan(gi), "gradWeight": gw_nan, "gradBias": np.isnan(gb)}


def is_nan(fmt, a):
    """The elements of an output (as the package returns it) that are NaN in its format."""
    if fmt == "hifloat8":
        return a == 0x80
    if fmt == "float8_e4m3fn":
        return (np.asarray(a).view(np.uint8) & 0x7F) == 0x7F
    return np.isnan(a.astype(np.float32))


def bits(a):
    a = np.ascontiguousarray(a)
    return a.view(G.UINT[a.dtype.itemsize])


def test_grid_size():
    """The grid is what docs/precision.md says it is: 2,340 cases (both operators)."""
    n_cells = sum(1 for d, s in itertools.product(G.DTYPES, G.SOCS) for c in range(4)
                  if G.CUBE_TABLE.get((d, s), (None,) * 4)[c] is not None)
    per = len(G.FORMS) * len(G.SHAPES) * len(G.VARIANTS)
    assert len(CASES) == len({c.id for c in CASES}) == 2 * n_cells * per + 2 * 2 * per + per == 2340


@pytest.mark.parametrize("op,dtype,gw_dtype,soc", GROUPS, ids=["-".join(g) for g in GROUPS])
def test_nan_contract(op, dtype, gw_dtype, soc):
    group = [c for c in CASES if (c.op, c.dtype, c.gw_dtype or "-", c.soc) == (op, dtype, gw_dtype, soc)]
    differ, not_canonical, misplaced, with_nan = [], [], [], 0
    for case in group:
        arrays = G.operands(case)
        runs = {}
        for isa, threads in RUNS:
            with K.hooks.override(isa=isa, parallel_min=0):
                runs[(isa, threads)] = G.run(case, arrays, num_threads=threads)
        ref_key = RUNS[0]
        ref = runs[ref_key]
        diffs = [f"{name} {key}" for key, outs in runs.items() for name in ref
                 if not np.array_equal(bits(outs[name]), bits(ref[name]))]
        if diffs:
            differ.append(f"{case.id}: {', '.join(diffs)} != {ref_key}")
        want = expected_nan(case, arrays)
        any_nan, wrong_pos, wrong_bits = False, [], []
        for name, a in ref.items():
            fmt = G.output_format(case, name)
            nan = is_nan(fmt, a)
            any_nan |= bool(nan.any())
            if not np.array_equal(nan, want[name]):
                wrong_pos.append(f"{name} at {np.argwhere(nan != want[name])[:3].tolist()} "
                                 f"(model NaN: {want[name][nan != want[name]][:3].tolist()})")
            wrong = np.unique(bits(a)[nan])
            wrong = wrong[wrong != G.CANONICAL_NAN[fmt]]
            if wrong.size:
                wrong_bits.append(f"{name} {[hex(int(v)) for v in wrong[:4]]}")
        if wrong_pos:
            misplaced.append(f"{case.id}: {', '.join(wrong_pos)}")
        if wrong_bits:
            not_canonical.append(f"{case.id}: {', '.join(wrong_bits)}")
        with_nan += any_nan
        if case.variant == "clean":
            assert not any_nan, case.id
    # the grid does what it is for: NaN outputs in most of the cases with specials
    n_special = sum(c.variant != "clean" for c in group)
    assert with_nan >= n_special // 2, (with_nan, n_special)
    report = []
    for title, items in (("NaN where the model has none, or none where it has one", misplaced),
                         ("outputs differ between instruction sets / threads", differ),
                         ("NaNs that are not the canonical encoding", not_canonical)):
        if items:
            report.append(f"{len(items)} x {title} (of {len(group)} cases): " + "; ".join(items[:4]))
    assert not report, "\n".join(report)
