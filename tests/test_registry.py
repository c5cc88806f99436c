"""The format registry (pyconvtbc/formats.py): one record per data type that every layer reads.

The records are checked against the independent facts they encode (CANN's aclDataType values, the formats'
limits), and a test-only 8-bit output format registered before the package is imported shows which layers
pick a new format up from the registry alone (docs/developer.md, "Adding a format").
"""
import json
import subprocess
import sys
from pathlib import Path

import ml_dtypes
import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import formats as F
from pyconvtbc.enums import ITEMSIZE, NUMPY_DTYPE, aclDataType


def test_acl_codes_are_cann_values():
    # values from CANN's acl_base.h
    cann = {"ACL_FLOAT": 0, "ACL_FLOAT16": 1, "ACL_INT8": 2, "ACL_INT32": 3, "ACL_UINT8": 4, "ACL_BF16": 27,
            "ACL_HIFLOAT8": 34, "ACL_FLOAT8_E5M2": 35, "ACL_FLOAT8_E4M3FN": 36, "ACL_DOUBLE": 11}
    for acl, code in cann.items():
        assert aclDataType[acl] == code and F.data_type(code).acl == acl


def test_enums_tables_come_from_the_registry():
    assert [int(m) for m in aclDataType] == [t.code for t in F.DATA_TYPES]
    for t in F.DATA_TYPES:
        assert ITEMSIZE[aclDataType(t.code)] == t.itemsize
        if t.storage is not None and t.code >= 0:
            assert NUMPY_DTYPE[aclDataType(t.code)] == t.storage
            assert t.itemsize == t.storage.itemsize
    assert NUMPY_DTYPE[aclDataType.ACL_HIFLOAT8] == np.uint8            # HiFloat8 is held as its codes
    assert NUMPY_DTYPE[aclDataType.ACL_BF16] == np.dtype(ml_dtypes.bfloat16)


def test_roles():
    assert F.codes_with_role(F.OPERAND) == (0, 1, 27)        # FLOAT, FLOAT16, BF16
    assert F.codes_with_role(F.BIAS) == (0, 1, 27)
    assert F.codes_with_role(F.GRAD_WEIGHT) == (34, 36)      # HIFLOAT8, FLOAT8_E4M3FN: gradWeight only


@pytest.mark.parametrize("name", ["float32", "float16", "bfloat16"])
def test_ieee_overflow_is_max_plus_half_an_ulp(name):
    t = F.data_type_named(name)
    v = t.values
    # the largest finite value has an all-ones significand; the midpoint to 2^(emax+1) ties to even -> up
    assert t.overflow == (v.max + 2.0 ** (np.frexp(v.max)[1] - 1 - v.mantissa_bits) / 2, True)


def test_8bit_overflow():
    assert F.data_type_named("hifloat8").overflow == (40960.0, True)           # 1.25 * 2^15, ties away
    assert F.data_type_named("float8_e4m3fn").overflow == (464.0, False)       # ties to even 448


def test_names_and_aliases():
    assert F.data_type_named("FLOAT32").code == 0
    assert F.data_type_named("fp32") is None                  # the NumPy layer takes names only
    assert F.by_name("fp32").code == 0 and F.by_name("hif8").code == 34 and F.by_name("e4m3").code == 36
    assert F.data_type(12345) is None and F.data_type("x") is None


def test_rounding_modes_and_compute_precisions_declared_once():
    from pyconvtbc import codecs, profiles
    assert codecs.HF32_ROUNDINGS is F.HF32_ROUNDINGS and codecs.HIF8_ROUNDINGS is F.HIF8_ROUNDINGS
    assert profiles.COMPUTE_NAMES == {0: "FP32", 1: "HF32", 2: "FP16", 3: "BF16"}
    assert profiles.K0 == {0: 8, 1: 8, 2: 16, 3: 16}


def test_internals_do_not_leak_to_the_top_level():
    for name in ("set_error", "ITEMSIZE", "NUMPY_DTYPE", "dtype_name", "format_name", "acl_dtype_of_numpy"):
        assert name not in pc.__all__ and not hasattr(pc, name), name


# ---- a new 8-bit output format, registered before the package is imported ---------------------------------
DRY_RUN = r"""
import dataclasses, importlib.util, json, sys
import numpy as np, ml_dtypes
spec = importlib.util.spec_from_file_location("pyconvtbc.formats", sys.argv[1])
F = importlib.util.module_from_spec(spec)
sys.modules["pyconvtbc.formats"] = F
spec.loader.exec_module(F)
# FLOAT8_E5M2 (aclDataType 35) as a gradWeight output: the one record a new format needs on the Python side
F._register(dataclasses.replace(F.data_type(35), name="float8_e5m2", aliases=("e5m2",),
                                roles=frozenset({F.GRAD_WEIGHT}), overflow=(61440.0, True)))
import pyconvtbc as pc
from pyconvtbc import _validation, _op_conv_tbc_backward as api
from pyconvtbc.study import choices, metrics
out = {}
out["eight_bit"] = list(_validation.EIGHT_BIT)
out["numpy_code"] = api._grad_weight_code("float8_e5m2", None)
rng = np.random.default_rng(0)
dy, x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 2, 4), (6, 2, 3), (3, 3, 4), (4,)))
try:
    pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype="float64")
except pc.AclnnError as e:
    out["numpy_message"] = e.message
out["study_gw"] = list(choices.GW_DTYPES)
out["study_alias"] = choices._GW_ALIASES.get("e5m2")
out["overflow"] = metrics._OVERFLOW.get("float8_e5m2")
try:
    from pyconvtbc import torch as bridge
    import torch
    t = bridge._to_torch(np.array([1.5, -57344.0], dtype=ml_dtypes.float8_e5m2), torch.zeros(1))
    out["torch"] = t.tolist()
except ImportError:
    out["torch"] = None
print(json.dumps(out))
"""


def test_a_new_gradweight_format_reaches_every_python_layer_from_its_record():
    path = Path(F.__file__)
    r = subprocess.run([sys.executable, "-c", DRY_RUN, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["eight_bit"] == [34, 35, 36]                                  # validation's gradWeight list
    assert out["numpy_code"] == 35                                           # NumPy layer's grad_weight_dtype
    assert "hifloat8, float8_e5m2 or float8_e4m3fn" in out["numpy_message"]  # messages name it
    assert "float8_e5m2" in out["study_gw"] and out["study_alias"] == "float8_e5m2"
    assert out["overflow"] == [61440.0, True]
    if out["torch"] is not None:
        assert out["torch"] == [1.5, -57344.0]                               # torch bridge decodes it


# ---- the same format reaches the kernels: refused at plan time, on every instruction set --------------------
KERNEL_RUN = DRY_RUN.split("import pyconvtbc as pc")[0] + r"""
import pyconvtbc as pc
from pyconvtbc._kernels import _conv_tbc as K
rng = np.random.default_rng(0)
dy, x, w, b = (rng.standard_normal(s).astype(np.float32) for s in ((6, 2, 4), (6, 2, 3), (3, 3, 4), (4,)))
out = {}
for isa in K.isas():
    with K.hooks.override(isa=isa):
        try:
            pc.conv_tbc_backward(dy, x, w, b, 1, grad_weight_dtype="float8_e5m2")
            out[isa] = "ran"
        except pc.AclnnError as e:
            out[isa] = [e.status, e.message]
try:
    K.workspace_size((6, 2, 3, 4, 3, 1), (0, 11, 0, 0, False), (0, 0, 0, 0, 35, 0), 1)
    out["kernel"] = "planned"
except K.UnsupportedDtype as e:
    out["kernel"] = str(e)
print(json.dumps(out))
"""


def test_a_format_without_a_kernel_codec_is_refused_at_plan_time():
    """A registered 1-byte format that no row codec handles (FLOAT8_E5M2 as gradWeight) is refused when the call
    is planned, on every instruction set, with a status and the format's name: never written as another format."""
    path = Path(F.__file__)
    r = subprocess.run([sys.executable, "-c", KERNEL_RUN, str(path)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out.pop("kernel") == "gw: unsupported dtype code 35"
    assert out, "no instruction set ran"
    for isa, got in out.items():
        assert got != "ran", isa
        status, message = got
        assert status == 161002 and "float8_e5m2" in message and "gw" in message, (isa, got)
