"""The kernels' test and profiling knobs, all behind one interface (pyconvtbc._kernels._conv_tbc.hooks)."""
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc._kernels import _conv_tbc as K

DEFAULTS = dict(K.hooks.get())


@pytest.fixture(autouse=True)
def _restore():
    yield
    K.hooks.set(**{k: None for k in K.hooks.names})
    assert K.hooks.get() == DEFAULTS


def test_defaults():
    assert set(DEFAULTS) == set(K.hooks.names)
    assert DEFAULTS["isa"] == K.isa_supported() and DEFAULTS["parallel_min"] == K.PARALLEL_MIN_FLOPS
    assert DEFAULTS["gw_pairs"] is True and DEFAULTS["phase_mask"] == 7 and len(DEFAULTS["blocking"]) == 6
    assert DEFAULTS["gi_rows"] is None and DEFAULTS["bcast_fma"] is None


def test_set_returns_the_old_values_and_none_restores_the_default():
    old = K.hooks.set(isa="portable", parallel_min=0, gw_pairs=False)
    assert old == {k: DEFAULTS[k] for k in ("isa", "parallel_min", "gw_pairs")}
    assert K.isa() == "portable" and K.hooks.get()["parallel_min"] == 0 and K.hooks.get()["gw_pairs"] is False
    K.hooks.set(**old)
    assert K.hooks.get() == DEFAULTS
    K.hooks.set(isa="portable")
    K.hooks.set(isa=None)
    assert K.isa() == K.isa_supported()


def test_override_restores_after_the_block_even_on_error():
    blk = DEFAULTS["blocking"]
    with pytest.raises(RuntimeError):
        with K.hooks.override(isa="portable", blocking=(blk[0] * 2, None, None, None, None, None)):
            assert K.isa() == "portable" and K.hooks.get()["blocking"][0] == blk[0] * 2
            assert K.hooks.get()["blocking"][1:] == blk[1:]
            raise RuntimeError
    assert K.hooks.get() == DEFAULTS


def test_bad_values_change_nothing():
    with pytest.raises(TypeError):
        K.hooks.set(isa="portable", threads=3)
    with pytest.raises(ValueError):
        K.hooks.set(isa="portable", blocking=(43, None, None, None, None, None))   # mci: a multiple of 42
    with pytest.raises(ValueError):
        K.hooks.set(blocking=(None,) * 5)
    with pytest.raises(ValueError):
        K.hooks.set(gw_pairs=False, parallel_min="many")
    for bad in (5, 0, True, "4"):
        with pytest.raises(ValueError, match="gi_rows"):
            K.hooks.set(gi_rows=bad, gw_pairs=False)
    for bad in (1, 0, "yes"):
        with pytest.raises(ValueError, match="bcast_fma"):
            K.hooks.set(bcast_fma=bad, gw_pairs=False)
    assert K.hooks.get() == DEFAULTS


def test_the_one_knob_spellings_still_work():
    assert K._set_parallel_min(0) == DEFAULTS["parallel_min"]
    assert K._set_parallel_min(None) == 0
    assert K._set_gw_pairs(False) is True and K._set_gw_pairs(True) is False
    assert K._set_phase_mask(1) == 7 and K._set_phase_mask() == 1
    assert K._set_blocking() == DEFAULTS["blocking"]
    K._set_isa("portable")
    assert K.isa() == "portable"
    K._set_isa(None)
    assert K.hooks.get() == DEFAULTS


def test_a_call_reads_the_knobs_it_started_with():
    """Knobs change the code path and the schedule, never the bits (kci aside): a forced path, a parallel
    threshold of 0 and another blocking give the default call's results."""
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((40, 3, 33), dtype=np.float32)
    x = rng.standard_normal((40, 3, 17), dtype=np.float32)
    w = rng.standard_normal((3, 17, 33), dtype=np.float32)
    b = np.zeros(33, np.float32)
    ref = pc.conv_tbc_backward(dy, x, w, b, 1, num_threads=2, deterministic=True)
    blk = DEFAULTS["blocking"]
    with K.hooks.override(isa="portable", parallel_min=0, gw_pairs=False, gi_rows=4, bcast_fma=True,
                          blocking=(42, 32, None, 8, 32, 16)):
        got = pc.conv_tbc_backward(dy, x, w, b, 1, num_threads=2, deterministic=True)
    assert K.hooks.get()["blocking"] == blk
    for r, g in zip(ref, got):
        assert np.array_equal(r.view(np.uint32), g.view(np.uint32))
    assert len(K.hooks.last_stamps()) == 4
