"""The NumPy layer's emulation keywords mean one thing each (docs/numpy.md, "Emulation keywords"): None is the
process-wide value (set_emulation_options), "default" the built-in default whatever the process-wide value is.

Before, the backward's docstring said block_size=None / hf32_mantissa_bits=None give the precision's / chip's
default while the code took the process-wide value, and no call could ask for the defaults once a process-wide
value was set.
"""
import numpy as np
import pytest

import pyconvtbc as pc


@pytest.fixture(scope="module")
def problem():
    rng = np.random.default_rng(3)
    T, B, Cin, Cout, K = 40, 3, 48, 40, 3
    x = rng.standard_normal((T, B, Cin)).astype(np.float32)
    w = rng.standard_normal((K, Cin, Cout)).astype(np.float32)
    dy = rng.standard_normal((T - K + 1, B, Cout)).astype(np.float32)
    return dy, x, w, np.zeros(Cout, np.float32)


# option -> (a non-default value that changes the backward's bits for this problem, the cubeMathType it needs)
CHANGING = {"block_size": (3, 0), "hf32_mantissa_bits": (10, 3), "accumulation": ("sequential", 0),
            "hf32_rounding": ("nearest_even", 3)}


def _bits(out):
    return [a.view(np.uint8).tobytes() for a in out]


@pytest.mark.parametrize("name", sorted(CHANGING))
def test_default_asks_for_the_builtin_default_despite_a_process_setting(problem, name):
    value, cmt = CHANGING[name]
    kw = dict(cube_math_type=cmt, deterministic=True)
    builtin = pc.conv_tbc_backward(*problem, 0, **kw)                  # nothing set: the built-in default
    pc.set_emulation_options(**{name: value})
    try:
        process = pc.conv_tbc_backward(*problem, 0, **kw)              # None: the process-wide value
        asked = pc.conv_tbc_backward(*problem, 0, **kw, **{name: "default"})
        forward_none = pc.conv_tbc(problem[1], problem[2], problem[3], 0, cube_math_type=cmt)
        forward_default = pc.conv_tbc(problem[1], problem[2], problem[3], 0, cube_math_type=cmt, **{name: "default"})
    finally:
        pc.reset_emulation_options()
    assert _bits(process) != _bits(builtin)            # the setting matters for this problem ...
    assert _bits(asked) == _bits(builtin)              # ... and "default" asks for the built-in value
    assert _bits(process) == _bits(pc.conv_tbc_backward(*problem, 0, **kw, **{name: value}))
    assert _bits([forward_default]) == _bits([pc.conv_tbc(problem[1], problem[2], problem[3], 0,
                                                          cube_math_type=cmt)])
    assert _bits([forward_none]) == _bits([pc.conv_tbc(problem[1], problem[2], problem[3], 0, cube_math_type=cmt,
                                                       **{name: value})])


def test_default_for_hf32_mantissa_bits_is_the_chips(problem):
    """On ascend950 the built-in default is 10 bits, on ascend910b 11, whatever the process-wide value."""
    kw = dict(cube_math_type=3, deterministic=True)
    pc.set_emulation_options(hf32_mantissa_bits=11)
    try:
        for soc, bits in (("ascend910b", 11), ("ascend950", 10)):
            got = pc.conv_tbc_backward(*problem, 0, soc=soc, hf32_mantissa_bits="default", **kw)
            want = pc.conv_tbc_backward(*problem, 0, soc=soc, hf32_mantissa_bits=bits, **kw)
            assert _bits(got) == _bits(want), soc
    finally:
        pc.reset_emulation_options()


@pytest.mark.parametrize("name", ["block_size", "hf32_mantissa_bits", "order_seed", "saturate", "hif8_rounding"])
def test_bad_values_name_the_keyword_and_list_default(problem, name):
    with pytest.raises(pc.AclnnError) as ei:
        pc.conv_tbc_backward(*problem, 0, **{name: "defaults"})
    assert ei.value.status == 161002
    assert f"{name} is 'defaults'" in ei.value.message and "'default'" in ei.value.message


def test_set_emulation_options_takes_default_too():
    pc.set_emulation_options(block_size=5, accumulation="sequential")
    pc.set_emulation_options(block_size="default", accumulation="default")
    try:
        opts = pc.get_emulation_options()
        assert opts["block_size"] is None and opts["accumulation"] == "cube"
    finally:
        pc.reset_emulation_options()


def test_docstrings_and_docs_say_the_same():
    import inspect
    from pathlib import Path
    doc = inspect.getdoc(pc.conv_tbc_backward)
    assert "``None`` (the default) takes the process-wide value" in doc
    assert "None: the chip's (11" not in doc and "None: the compute precision's k0" not in doc
    text = (Path(__file__).resolve().parents[1] / "docs" / "numpy.md").read_text()
    assert "`None` (the default): the **process-wide value**" in text
    assert "`\"default\"`: the **built-in default**" in text
