"""The kernel room's generated and shared sources: the 8-bit lookup tables are exactly what tools/gen_tables.py
computes from the format definitions, the codes of _codes.h are the Python layers' values, no bare dtype or
compute literal is left in the kernels, and the codec loops' Tempita template renders the module's functions."""
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_repo_module

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "pyconvtbc" / "_kernels"


def _source(name):
    path = KERNELS / name
    if not path.exists():
        pytest.skip(f"{name} is not in this tree (tests run outside a source checkout)")
    return path.read_text(encoding="utf-8")


# ---- tables ---------------------------------------------------------------------------------------------
def test_tables_header_is_what_the_generator_writes():
    gen = load_repo_module("tools/gen_tables.py")
    committed = (KERNELS / "_fptables.h").read_bytes()
    assert gen.render().encode("utf-8") == committed, "rerun: python tools/gen_tables.py"


def test_generator_reads_the_hif8_definition_as_documented():
    """Spot checks of the generator's format model against docs/precision.md's worked values (the tables are
    built from this model; the codec tests check the tables' behaviour against en_dtypes and ml_dtypes)."""
    from fractions import Fraction

    gen = load_repo_module("tools/gen_tables.py")
    v = gen.hif8_value
    assert v(0x41) == 20 and v(0xC1) == -20 and v(0x40) == 16 and v(0x2F) == 15   # 0|01|01|111: E = +3
    assert v(0x3F) == Fraction(15, 64)                                              # 0|01|11|111: E = -3
    assert v(0x7E) == Fraction(1, 2 ** 15) and v(0x6E) == 32768
    assert v(0x01) == Fraction(1, 2 ** 22) and v(0x07) == Fraction(1, 2 ** 16)
    assert (v(0x6F), v(0xEF), v(0x80), v(0x00)) == ("inf", "-inf", "nan", 0)
    finite = [c for c in range(256) if v(c) not in ("inf", "-inf", "nan")]
    assert len(finite) == 253 and len({v(c) for c in finite if v(c) > 0}) == 126
    # the E4M3FN tables: code = BASE[b] + the significand rounded to 4 bits (normal binades)
    shift, base = gen.e4m3_tables()
    assert shift[127] == 20 and base[127] == (7 - 1) << 3        # 1.0 = 0x38 = base + 8
    assert shift[127 - 9] == 23 and shift[127 - 10] == 24 and shift[127 - 11] == 31
    assert shift[127 + 9] == 31


# ---- codes ----------------------------------------------------------------------------------------------
def _c_enums(text):
    return {m.group(1): int(m.group(2)) for m in re.finditer(r"\b(CT_\w+)\s*=\s*(-?\d+)", text)}


def test_codes_header_equals_the_python_values():
    from pyconvtbc import enums, profiles
    from pyconvtbc._kernels import _conv_tbc

    c = _c_enums(_source("_codes.h"))
    dt = enums.aclDataType
    want = {
        "CT_DT_F32": dt.ACL_FLOAT, "CT_DT_F16": dt.ACL_FLOAT16, "CT_DT_BF16": dt.ACL_BF16,
        "CT_DT_HIF8": dt.ACL_HIFLOAT8, "CT_DT_E4M3": dt.ACL_FLOAT8_E4M3FN,
        "CT_C_FP32": profiles.COMPUTE_FP32, "CT_C_HF32": profiles.COMPUTE_HF32,
        "CT_C_FP16": profiles.COMPUTE_FP16, "CT_C_BF16": profiles.COMPUTE_BF16,
        "CT_HF32_HALF_AWAY": profiles.HF32_ROUNDINGS["half_away"],
        "CT_HF32_NEAREST_EVEN": profiles.HF32_ROUNDINGS["nearest_even"],
        "CT_HIF8_TA": profiles.HIF8_ROUNDINGS["ta"], "CT_HIF8_HYBRID": profiles.HIF8_ROUNDINGS["hybrid"],
        "CT_ACC_SEQ": profiles.ACCUMULATIONS["sequential"], "CT_ACC_CUBE": profiles.ACCUMULATIONS["cube"],
        "CT_ACC_WIDE": profiles.ACCUMULATIONS["cube_wide"], "CT_ACC_RZ": profiles.ACCUMULATIONS["cube_rz"],
    }
    assert c == {k: int(v) for k, v in want.items()}
    # and the compiled module was built from them
    assert _conv_tbc._IN_DTYPES == (dt.ACL_FLOAT, dt.ACL_FLOAT16, dt.ACL_BF16)
    assert _conv_tbc._GW_DTYPES == _conv_tbc._IN_DTYPES + (dt.ACL_HIFLOAT8, dt.ACL_FLOAT8_E4M3FN)
    assert (_conv_tbc.ACC_SEQUENTIAL, _conv_tbc.ACC_CUBE, _conv_tbc.ACC_CUBE_WIDE, _conv_tbc.ACC_CUBE_RZ) == (
        want["CT_ACC_SEQ"], want["CT_ACC_CUBE"], want["CT_ACC_WIDE"], want["CT_ACC_RZ"])


def test_codes_are_defined_only_in_codes_header():
    """Each code is written once: no other kernel source defines a CT_DT_ / CT_C_ / rounding / accumulation
    enum, and _codes.pxd declares exactly the header's names."""
    names = set(_c_enums(_source("_codes.h")))
    for path in sorted(KERNELS.glob("*")):
        if path.suffix in (".h", ".c", ".pyx", ".pxd", ".tp") and path.name != "_codes.h" and path.name in KERNEL_SOURCES:
            assert not set(_c_enums(path.read_text(encoding="utf-8"))) & names, path.name
    declared = set(re.findall(r"^\s+(CT_\w+)\s*$", _source("_codes.pxd"), re.M))
    assert declared == names


BARE_LITERALS = [
    r"\bcompute\s*[=!<>]=?\s*\d", r"\bdt\s*[=!]=\s*\d", r"_dt\s*[=!]=\s*\d", r"\bdt\s+in\s*\(\s*\d",
    r"\((?:0|1), 1, 27\b", r"(?<![\w.(])(?:27|34|36)(?![\w.])", r"\b(?:hrnd|rounding|rnd)\s*==\s*\d",
    r"\bacc\s*[=!<>]=?\s*\d", r"\bform\s*[=!]=\s*\d",
]


KERNEL_SOURCES = sorted(p.name for p in KERNELS.glob("*") if p.suffix in (".h", ".c", ".pyx", ".pxd", ".tp")
                        and p.name not in ("_codes.h", "_fptables.h") and not p.name.endswith(("_codecs.pyx",))
                        and not (p.suffix == ".c" and not p.name.startswith("_ukr")))


@pytest.mark.parametrize("name", KERNEL_SOURCES)
def test_no_bare_dtype_or_compute_literal_in_the_kernels(name):
    text = _source(name)
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)            # C comments
    code = re.sub(r'""".*?"""|#[^\n]*', "", code, flags=re.S) if name.endswith((".pyx", ".pxd", ".tp")) else code
    hits = [(p, m.group(0)) for p in BARE_LITERALS for m in re.finditer(p, code)]
    assert not hits, f"{name}: use the names of _codes.h: {hits}"


# ---- codec loops ----------------------------------------------------------------------------------------
def test_codec_template_renders_the_module_functions():
    tempita = pytest.importorskip("Cython.Tempita")
    from pyconvtbc._kernels import _codecs

    text = tempita.Template(_source("_codecs.pyx.tp")).substitute()
    defs = re.findall(r"^def (\w+)\(", text, re.M)
    assert len(defs) == len(set(defs)) == 12
    public = {n for n in dir(_codecs) if callable(getattr(_codecs, n)) and not n.startswith("_")}
    assert set(defs) == public
    assert "GENERATED" in text and "{{" not in text


def test_kernel_room_shape_limits():
    """tools/kernel_metrics.py: no kernel function over 80 lines, no record over 40 fields, no ISA comparison outside
    the selector (_ukr_select.c)."""
    tool = ROOT / "tools" / "kernel_metrics.py"
    if not tool.exists() or not (KERNELS / "_ukr.h").exists():
        pytest.skip("the kernel sources are not in this tree")
    r = subprocess.run([sys.executable, str(tool)], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr


# Drivers shared by the two operators, and the record in GEMM roles (_conv_roles.h) each takes instead of a plan
SHARED_DRIVERS = {"ct_gic_rows": "ct_red", "ct_gic_edge": "ct_red", "ct_gin_rows_out": "ct_red",
                  "ct_decode_rows": "ct_pk", "ct_pack_rows": "ct_pk", "ct_window_pack": "ct_pk",
                  "ct_nar_rows": "ct_pk", "ct_nar_pack_src": "ct_pk"}


def test_each_operator_its_own_plan():
    """Issue 35: the forward's code names no backward plan (no role-swapped ct_plan view), and the drivers it shares
    with the backward take the records in GEMM roles (_conv_roles.h) as their first argument, never a ct_plan."""
    fwd = re.sub(r"/\*.*?\*/", "", _source("_conv_fwd.h"), flags=re.S)
    assert not re.findall(r"\bct_plan\b.*", fwd), "the forward uses the backward's plan"
    text = "".join(_source(n) for n in ("_conv_pack.h", "_conv_cube.h", "_conv_narrow.h"))
    for name, record in SHARED_DRIVERS.items():
        m = re.search(r"static (?:inline )?void " + name + r"\(const (\w+) \*", text)
        assert m, f"{name} not found"
        assert m.group(1) == record, f"{name} takes a {m.group(1)}, not a {record}"
