"""SoC profile selection (set_soc_version, $PYCONVTBC_SOC_VERSION, soc=) and the emulation options."""
import numpy as np
import pytest

import pyconvtbc as pc
from conftest import acl_problem, make_problem, phase1


def test_default_profile(monkeypatch):
    monkeypatch.delenv("PYCONVTBC_SOC_VERSION", raising=False)
    assert pc.get_soc_version() == "ascend910b"


def test_environment_sets_the_default(monkeypatch):
    monkeypatch.setenv("PYCONVTBC_SOC_VERSION", "ascend950")
    assert pc.get_soc_version() == "ascend950"
    pc.set_soc_version("ascend910")          # an explicit choice wins over the environment
    assert pc.get_soc_version() == "ascend910"


def test_bad_environment_value_is_a_161002(monkeypatch):
    monkeypatch.setenv("PYCONVTBC_SOC_VERSION", "ascend999")
    t, _ = acl_problem(*make_problem())
    rc, ws, ex = phase1(t)
    assert rc == 161002 and ex is None
    assert "PYCONVTBC_SOC_VERSION is 'ascend999'" in pc.aclGetRecentErrMsg()


@pytest.mark.parametrize("bad", ["ascend", "", None, 910])
def test_set_soc_version_rejects(bad):
    with pytest.raises(ValueError, match="expected one of"):
        pc.set_soc_version(bad)


def test_profile_decides_hf32_width_and_determinism():
    assert pc.PROFILES["ascend910b"].hf32_mantissa_bits == 11
    assert pc.PROFILES["ascend950"].hf32_mantissa_bits == 10
    assert pc.PROFILES["ascend950"].deterministic_default is True
    assert pc.PROFILES["ascend910b"].deterministic_default is False
    t, _ = acl_problem(*make_problem())
    pc.set_soc_version("ascend950")
    rc, _, ex = phase1(t, cube=3)
    assert rc == 0 and ex.plan.deterministic is True and ex.plan.mode[1] == 10


def test_soc_keyword_overrides_process_setting():
    pc.set_soc_version("ascend910")
    dy, x, w, b = make_problem()
    with pytest.raises(pc.AclnnError):
        pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=0)          # FP32 KEEP_DTYPE: error on ascend910
    gi, _, _ = pc.conv_tbc_backward(dy, x, w, b, 1, cube_math_type=0, soc="ascend910b")
    assert gi.dtype == np.float32


class _BadRepr:
    def __repr__(self):
        raise RuntimeError("no repr")

    __hash__ = None


@pytest.mark.parametrize("name", ["hf32_rounding", "hif8_rounding", "hf32_mantissa_bits", "saturate",
                                  "accumulation", "block_size", "order_seed"])
@pytest.mark.parametrize("bad", [[1], {}, np.array(["ta"]), _BadRepr()], ids=["list", "dict", "array", "badrepr"])
def test_unhashable_or_unprintable_option_values_are_161002_in_both_places(name, bad):
    """set_emulation_options and the NumPy keywords give the same AclnnError 161002 for values that cannot
    be hashed, compared or printed (not a bare TypeError from a lookup)."""
    before = pc.get_emulation_options()
    with pytest.raises(pc.AclnnError) as e:
        pc.set_emulation_options(**{name: bad})
    assert e.value.status == pc.ACLNN_ERR_PARAM_INVALID and f"{name} is " in str(e.value)
    assert pc.get_emulation_options() == before
    x = np.ones((4, 1, 2), np.float32)
    with pytest.raises(pc.AclnnError) as e:
        pc.conv_tbc(x, np.ones((3, 2, 2), np.float32), np.zeros(2, np.float32), 1, **{name: bad})
    assert e.value.status == pc.ACLNN_ERR_PARAM_INVALID and f"{name} is " in str(e.value)


def test_set_soc_version_with_an_unprintable_name_is_a_value_error():
    with pytest.raises(ValueError, match="soc is <"):
        pc.set_soc_version(_BadRepr())


def test_emulation_options_round_trip_and_reset():
    assert pc.get_emulation_options() == {"hf32_rounding": "half_away", "hf32_mantissa_bits": None,
                                          "hif8_rounding": "ta", "saturate": False, "accumulation": "cube",
                                          "block_size": None, "order_seed": None}
    pc.set_emulation_options(hif8_rounding="hybrid", hf32_mantissa_bits=10)
    assert pc.get_emulation_options()["hif8_rounding"] == "hybrid"
    with pytest.raises(ValueError, match="saturate is 'yes'"):
        pc.set_emulation_options(saturate="yes", hif8_rounding="ta")
    assert pc.get_emulation_options()["hif8_rounding"] == "hybrid"   # nothing changed on error
    pc.reset_emulation_options()
    assert pc.get_emulation_options()["hf32_mantissa_bits"] is None
