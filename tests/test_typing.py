"""The typed API: the constants and lists written out for type checkers match the run-time enums, each Literal
of pyconvtbc.typing holds exactly the names the calls accept, and mypy (when installed) passes the documentation's
code and a typed user script, and flags a misspelled option."""
import ast
import importlib.util
import subprocess
import sys
import typing
from pathlib import Path

import numpy as np
import pytest

import pyconvtbc as pc
from pyconvtbc import enums, formats, profiles, status
from pyconvtbc import typing as pt

ROOT = Path(__file__).resolve().parents[1]


def _module_assignments(module):
    """{name: source of the value} of the module's top-level ``NAME = ...`` statements."""
    tree = ast.parse(Path(module.__file__).read_text())
    return {t.id: ast.unparse(node.value) for node in tree.body if isinstance(node, ast.Assign)
            for t in node.targets if isinstance(t, ast.Name)}


@pytest.mark.parametrize("module, enum_classes", [(enums, enums.ALL_ENUMS), (status, (status.aclnnStatus,
                                                                                       status.aclError))])
def test_every_enum_member_is_a_constant_written_out_in_its_module(module, enum_classes):
    assigned = _module_assignments(module)
    for e in enum_classes:
        for m in e:
            assert assigned.get(m.name) == f"{e.__name__}.{m.name}", m.name
            assert getattr(module, m.name) is m
    names = [e.__name__ for e in enum_classes] + [m.name for e in enum_classes for m in e]
    assert set(names) <= set(module.__all__)


def test_the_lists_type_checkers_read_are_the_run_time_ones():
    assert enums.__all__ == [e.__name__ for e in enums.ALL_ENUMS] + [m.name for e in enums.ALL_ENUMS for m in e]
    assert set(status.__all__) == {"aclnnStatus", "aclError", "AclnnError", "AclnnTypeError", "aclGetRecentErrMsg"} \
        | {m.name for m in status.aclnnStatus} | {m.name for m in status.aclError}
    own = {n for n in pc.__all__ if n not in enums.__all__ and n not in status.__all__}
    assert pc.__all__ == sorted(own | set(enums.__all__) | set(status.__all__))
    for n in pc.__all__:
        assert hasattr(pc, n), n


def test_the_static_acl_data_type_class_is_the_registry():
    tree = ast.parse(Path(enums.__file__).read_text())
    cls = [n for node in tree.body if isinstance(node, ast.If) for n in node.body
           if isinstance(n, ast.ClassDef) and n.name == "aclDataType"]
    assert len(cls) == 1
    static = {s.targets[0].id: ast.literal_eval(s.value) for s in cls[0].body if isinstance(s, ast.Assign)}
    assert static == {t.acl: t.code for t in formats.DATA_TYPES} == {m.name: m.value for m in enums.aclDataType}


def _args(alias):
    out = []
    for a in typing.get_args(alias):
        out += _args(a) if typing.get_args(a) else [a]
    return out


def test_each_literal_is_exactly_what_the_calls_accept():
    assert set(_args(pt.SocName)) == set(profiles.PROFILES)
    assert set(_args(pt.Accumulation)) == set(profiles.ACCUMULATIONS)
    assert set(_args(pt.HF32Rounding)) == set(formats.HF32_ROUNDINGS)
    assert set(_args(pt.HiF8Rounding)) == set(formats.HIF8_ROUNDINGS)
    names = {m.name for m in enums.CubeMathType}
    assert set(_args(pt.CubeMathTypeName)) == names | {n.lower() for n in names}
    assert "torch_npu" in _args(pt.TorchCubeMathType)
    assert list(pt.EmulationOptions.__annotations__) == list(pc.get_emulation_options())


@pytest.mark.parametrize("name", _args(pt.GradWeightDtypeName))
def test_every_grad_weight_dtype_name_is_accepted_for_a_weight_of_that_dtype(name):
    import ml_dtypes
    wdt = {"float16": np.float16, "bfloat16": ml_dtypes.bfloat16}.get(name, np.float32)
    x = np.ones((4, 1, 2), wdt)
    w = np.ones((2, 2, 3), wdt)
    b = np.zeros(3, wdt)
    dy = np.ones((3, 1, 3), wdt)
    gw = pc.conv_tbc_backward(dy, x, w, b, 0, grad_weight_dtype=name).grad_weight
    assert gw.shape == w.shape and gw.dtype.itemsize == (1 if "8" in name else np.dtype(wdt).itemsize)


# ---- mypy ------------------------------------------------------------------------------------------------------
def _need_mypy():
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (pip install mypy)")


def _mypy_env():
    """mypy cannot follow the import hook of a setuptools editable install: point MYPYPATH at the source tree's
    root then (never at a site-packages folder, which mypy refuses there)."""
    import os
    root = Path(pc.__file__).resolve().parent.parent
    env = dict(os.environ)
    if root.name not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = str(root)
    return env


def _mypy(tmp_path, code):
    f = tmp_path / "user.py"
    f.write_text(code)
    env = _mypy_env()
    silent = ["--follow-imports=silent"] if "MYPYPATH" in env else []   # the package's own code: not the user's
    return subprocess.run([sys.executable, "-m", "mypy", *silent, "--strict", "--no-incremental", "--cache-dir",
                           str(tmp_path / "cache"), str(f)], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600, env=env)


MISSPELT = '''\
import numpy as np
from pyconvtbc import conv_tbc_backward, set_soc_version
x = np.ones((4, 1, 2), np.float32); w = np.ones((2, 2, 3), np.float32); b = np.zeros(3, np.float32)
dy = np.ones((3, 1, 3), np.float32)
conv_tbc_backward(dy, x, w, b, 0, soc="ascend910b", accumulation="cube", cube_math_type="USE_HF32")
conv_tbc_backward(dy, x, w, b, 0, soc="ascend91Ob")
conv_tbc_backward(dy, x, w, b, 0, accumulation="seq")
conv_tbc_backward(dy, x, w, b, 0, cube_math_type="USE_HF33")
set_soc_version("ascend-950")
'''


def test_mypy_flags_a_misspelled_soc_accumulation_or_cube_math_type(tmp_path):
    _need_mypy()
    r = _mypy(tmp_path, MISSPELT)
    flagged = {int(line.split(":")[1]) for line in r.stdout.splitlines() if ": error:" in line}
    assert flagged == {6, 7, 8, 9}, r.stdout            # line 5 (correct spellings) passes
    by_line = {int(line.split(":")[1]): line for line in r.stdout.splitlines() if ": error:" in line}
    assert '"soc"' in by_line[6] and '"accumulation"' in by_line[7] and '"cube_math_type"' in by_line[8]


def test_the_documentation_and_a_typed_user_script_pass_mypy():
    _need_mypy()
    r = subprocess.run([sys.executable, str(ROOT / ".ci" / "typecheck.py")], capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Success: no issues found" in r.stdout


def test_the_typed_user_script_runs():
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "typed_usage.py")], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    assert "status 161002" in r.stdout and "CANN status 0" in r.stdout


def _static_signatures(path, name):
    """The keyword-only parameter names of each ``def name`` inside an ``if TYPE_CHECKING:`` block of a file."""
    found = []
    for node in ast.walk(ast.parse(Path(path).read_text())):
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for d in node.body:
                if isinstance(d, ast.FunctionDef) and d.name == name:
                    found.append([a.arg for a in d.args.kwonlyargs])
    return found


def test_the_static_signatures_list_every_option_the_calls_take():
    assert _static_signatures(profiles.__file__, "set_emulation_options") == [sorted(
        profiles.get_emulation_options(), key=list(profiles._DEFAULT_OPTIONS).index)]
    torch_py = Path(pc.__file__).parent / "torch.py"
    sigs = _static_signatures(torch_py, "conv_tbc") + _static_signatures(torch_py, "__init__")
    src = Path(torch_py).read_text()
    keywords = ast.literal_eval(src.split("EMULATION_KEYWORDS = ", 1)[1].split(")", 1)[0] + ")")
    assert len(sigs) == 2 and all(s == list(keywords) for s in sigs), sigs


def test_mypy_flags_misspelled_options_of_the_torch_bridge(tmp_path):
    _need_mypy()
    pytest.importorskip("torch")
    r = _mypy(tmp_path, '''\
import torch
from pyconvtbc.torch import ConvTBC, conv_tbc
x = torch.zeros(6, 2, 3); w = torch.zeros(3, 3, 4); b = torch.zeros(4)
y: torch.Tensor = conv_tbc(x, w, b, 1, cube_math_type="torch_npu", soc="ascend950", accumulation="cube")
layer = ConvTBC(3, 4, 3, padding=1, cube_math_type="USE_HF32", grad_weight_dtype="hifloat8")
conv_tbc(x, w, b, 1, soc="ascend91Ob")
ConvTBC(3, 4, 3, accumulation="seq")
''')
    flagged = {int(line.split(":")[1]) for line in r.stdout.splitlines() if ": error:" in line}
    assert flagged == {6, 7}, r.stdout
