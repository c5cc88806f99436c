"""The NumPy layer's plan cache is keyed on the values validation reads, not on what an argument's ``==`` and
``hash`` claim (docs/cann.md: int subclasses are read by value, whatever they override).

Before, the key held the arguments as given: an int subclass whose ``__eq__`` / ``__hash__`` lie made
``conv_tbc(x, w, b, P(2))`` reuse the pad-0 plan and return an output of the wrong shape.
"""
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import _numpy_layer as nl


class LyingInt(int):
    """Equal to, and hashed as, 0 whatever its value."""

    def __eq__(self, other):
        return other == 0

    def __ne__(self, other):
        return not self.__eq__(other)

    def __hash__(self):
        return hash(0)


class LyingStr(str):
    def __eq__(self, other):
        return True

    def __hash__(self):
        return hash("ascend910b")


@pytest.fixture
def arrays():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((6, 2, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 4)).astype(np.float32)
    return x, w, np.zeros(4, np.float32)


def _reference(x, w, b, pad):
    T, B, _ = x.shape
    K = w.shape[0]
    xp = np.zeros((T + 2 * pad, B, x.shape[2]))
    xp[pad:pad + T] = x
    T_out = T + 2 * pad - K + 1
    return b + sum(np.einsum("tbc,co->tbo", xp[k:k + T_out], w[k].astype(np.float64)) for k in range(K))


def test_lying_int_pad_does_not_reuse_the_pad0_plan(arrays):
    x, w, b = arrays
    nl._plan_cache.clear()
    assert pc.conv_tbc(x, w, b, LyingInt(0)).shape == (4, 2, 4)  # caches the pad-0 plan
    out = pc.conv_tbc(x, w, b, LyingInt(2))                        # equal and hashed alike, read by value: pad 2
    assert out.shape == (8, 2, 4)
    ref = _reference(x, w, b, 2)
    # fp32 operands, KEEP_DTYPE: sums of 9 products, a few ulps of the largest magnitude
    assert np.max(np.abs(out - ref)) <= 16 * np.finfo(np.float32).eps * np.max(np.abs(ref))
    dy = np.ones((8, 2, 4), np.float32)
    gi, gw, gb = pc.conv_tbc_backward(dy, x, w, b, LyingInt(2))   # caches the backward's pad-2 plan
    assert gi.shape == x.shape
    with pytest.raises(pc.AclnnError):                             # T_out 8 needs pad 2, not 0
        pc.conv_tbc_backward(dy, x, w, b, LyingInt(0))


def test_key_holds_plain_values():
    assert nl._key_value(LyingInt(2)) == (int, 2) and nl._key_value(LyingInt(2)) != nl._key_value(0)
    assert nl._key_value(np.int16(3)) == (int, 3)
    assert nl._key_value(pc.USE_HF32) == (int, 3)
    assert nl._key_value(True) != nl._key_value(1)
    assert nl._key_value(LyingStr("ascend950")) is nl._UNCACHED      # validated afresh every call


def test_lying_str_is_validated_every_call(arrays):
    x, w, b = arrays
    nl._plan_cache.clear()
    pc.conv_tbc(x, w, b, 0, soc="ascend910b")
    before = len(nl._plan_cache)
    pc.conv_tbc(x, w, b, 0, soc=LyingStr("ascend910b"))
    assert len(nl._plan_cache) == before
