"""The piece layout's geometry (ascend950's pieces and segments) lives in the SoC profile only: a test-only chip
with other numbers, registered in pyconvtbc.profiles.PROFILES, makes the kernels cut their sums its way, bit for
bit as the independent model does with the same numbers."""
import dataclasses

import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import profiles
from pyconvtbc._kernels import _conv_tbc as K

import accum_reference as R

# small numbers so that a small problem has several pieces and segments of both kinds
GEOMETRY = profiles.SumGeometry(piece_co=8, piece_red=16, pieces=16, gw_segment=24, gi_segment=24)


@pytest.fixture
def test_chip(monkeypatch):
    chip = dataclasses.replace(profiles.PROFILES["ascend950"], name="test950", sum_geometry=GEOMETRY)
    monkeypatch.setitem(profiles.PROFILES, "test950", chip)
    return "test950"


def bits(a):
    return np.ascontiguousarray(a).view(np.uint32)


def grid_problem(shape, seed):
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(seed)
    return [R.grid(rng, s, 6).astype(np.float32) for s in ((T_out, B, Cout), (T_in, B, Cin), (K_, Cin, Cout),
                                                          (Cout,))]


@pytest.mark.parametrize("isa", K.isas())
@pytest.mark.parametrize("form", ["cube", "cube_wide"])
@pytest.mark.parametrize("shape", [(13, 3, 5, 9, 3, 1), (20, 2, 9, 20, 2, 0)])
def test_a_test_only_geometry_is_followed(test_chip, shape, form, isa):
    dy, x, w, b = grid_problem(shape, seed=sum(shape))
    k0 = 8
    nb = -(-shape[3] // GEOMETRY.piece_co) * -(-(shape[2] * shape[4]) // GEOMETRY.piece_red)
    assert 1 < GEOMETRY.pieces // nb          # several pieces ...
    assert shape[4] * shape[3] >= GEOMETRY.gi_segment   # ... and gradInput segments
    with K.hooks.override(isa=isa):
        gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, shape[5], soc=test_chip, accumulation=form, block_size=k0)
    rgw = R.grad_weight(x, dy, shape[4], shape[5], form, k0, soc=test_chip, geometry=tuple(GEOMETRY))
    rgi = R.grad_input(dy, w, shape[0], shape[5], form, k0, soc=test_chip, geometry=tuple(GEOMETRY))
    assert (bits(gw) == bits(rgw)).all()
    assert (bits(gi) == bits(rgi)).all()


def test_the_test_geometry_changes_the_sums(test_chip):
    """The same call on ascend950 (its own geometry) gives other bits somewhere: the kernel read the numbers."""
    shape = (40, 4, 9, 20, 3, 1)
    rng = np.random.default_rng(5)
    dy, x, w = (rng.standard_normal(s).astype(np.float32) for s in ((40, 4, 20), (40, 4, 9), (3, 9, 20)))
    b = np.zeros(20, np.float32)
    ours = pc.conv_tbc_backward(dy, x, w, b, 1, soc=test_chip, accumulation="cube")
    real = pc.conv_tbc_backward(dy, x, w, b, 1, soc="ascend950", accumulation="cube")
    assert not all((bits(a) == bits(c)).all() for a, c in zip(ours[:2], real[:2]))
    rgw = R.grad_weight(x, dy, shape[4], shape[5], "cube", 8, soc=test_chip, geometry=tuple(GEOMETRY))
    assert (bits(ours[1]) == bits(rgw)).all()


def test_no_chip_number_in_the_kernels():
    """ascend950's numbers are not written in the kernel room's C (they come from the profile)."""
    import pathlib
    import re
    root = pathlib.Path(K.__file__).parent
    src = [p for p in root.glob("*") if p.suffix in (".h", ".c") and p.name.startswith(("_conv", "_ukr"))
           and not p.name.endswith("_conv_tbc.c")]
    if not src:
        pytest.skip("the kernel sources are not in this tree")
    for p in src:
        code = re.sub(r"/\*.*?\*/", "", p.read_text(encoding="utf-8"), flags=re.S)
        assert not re.search(r"\b(65536|32768)\b", code), p.name
