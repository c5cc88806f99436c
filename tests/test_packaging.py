"""Packaging: the licence and its metadata, what the sdist and the wheel hold, the import guard for an unbuilt
source tree, and the CI's build checks (.ci/check_build.py).

The sdist/wheel checks build from a copy of the source tree (nothing is written into the checkout); CI also
builds the real artifacts with ``python -m build`` and runs the whole suite against the installed wheel
(.ci/run), with PYCONVTBC_EXPECT_INSTALLED=1 so that the last tests here check the installed copy.
"""
import doctest
import importlib.machinery
import inspect
import os
import re
import shutil
import subprocess
import sys
import tarfile
import typing
from pathlib import Path

import pytest

from conftest import load_repo_module

import pyconvtbc

ROOT = Path(__file__).resolve().parents[1]
_SKIP = shutil.ignore_patterns("*.so", "*.pyd", "*.o", "*.html", "__pycache__", ".git", ".venv*",
                               "build", "dist", "*.egg-info", ".pytest_cache", ".hypothesis", "results",
                               "study_out", "*.so.flags")


def SKIP_COPY(folder, names):
    """Build outputs and caches; Cython's generated C (a .c beside its .pyx), not hand-written C sources."""
    return set(_SKIP(folder, names)) | {n for n in names if n.endswith(".c") and n[:-2] + ".pyx" in names}


def _load_check_build():
    return load_repo_module(".ci/check_build.py")


def _pyproject():
    try:
        import tomllib
    except ImportError:
        tomllib = pytest.importorskip("tomli")
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def _need_build_tools():
    pytest.importorskip("Cython")
    setuptools = pytest.importorskip("setuptools")
    if int(setuptools.__version__.split(".")[0]) < 77:
        pytest.skip(f"setuptools {setuptools.__version__} predates SPDX licence metadata (needs >= 77)")


def _source_copy(tmp_path):
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SKIP_COPY)
    return src


# ---- licence --------------------------------------------------------------------------------------------
def test_license_is_the_full_apache_2_text():
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    for heading in ("1. Definitions.", "2. Grant of Copyright License.", "3. Grant of Patent License.",
                    "4. Redistribution.", "5. Submission of Contributions.", "6. Trademarks.",
                    "7. Disclaimer of Warranty.", "8. Limitation of Liability.",
                    "9. Accepting Warranty or Additional Liability.", "END OF TERMS AND CONDITIONS"):
        assert heading in text, heading


def test_pyproject_uses_spdx_licence_and_single_sourced_version():
    meta = _pyproject()
    project = meta["project"]
    assert project["license"] == "Apache-2.0"               # an SPDX expression, not the deprecated table
    assert "LICENSE" in project["license-files"]
    assert "version" not in project and "version" in project["dynamic"]
    assert meta["tool"]["setuptools"]["dynamic"]["version"] == {"attr": "pyconvtbc._version.__version__"}
    assert project["scripts"]["pyconvtbc"] == "pyconvtbc.__main__:main"
    st = [r for r in meta["build-system"]["requires"] if r.startswith("setuptools")]
    assert st and int(re.search(r">=\s*(\d+)", st[0]).group(1)) >= 77   # SPDX `license` needs setuptools 77


def test_installed_metadata_carries_the_licence():
    from importlib.metadata import PackageNotFoundError, metadata
    try:
        md = metadata("pyconvtbc")
    except PackageNotFoundError:
        pytest.skip("pyconvtbc is not installed (no distribution metadata)")
    if md.get("License-Expression") is None and md.get("License") == "Apache-2.0":
        pytest.skip("metadata of an install made before the SPDX licence field: reinstall (pip install -e .)")
    assert md["License-Expression"] == "Apache-2.0"
    assert md.get("License") is None                        # not the deprecated free-text field
    assert md["Version"] == pyconvtbc.__version__


# ---- sdist and wheel contents ---------------------------------------------------------------------------
@pytest.mark.slow
def test_sdist_has_everything_the_tests_need_and_no_generated_files(tmp_path):
    _need_build_tools()
    check = _load_check_build()
    src = _source_copy(tmp_path)
    r = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")], cwd=src,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "Deprecat" not in r.stderr and "warning:" not in r.stderr, r.stderr[-3000:]
    (sdist,) = (tmp_path / "dist").glob("pyconvtbc-*.tar.gz")
    with tarfile.open(sdist) as tf:
        names = {m.name.split("/", 1)[1] for m in tf.getmembers() if m.isfile() and "/" in m.name}
    assert {"tests/conftest.py", "tests/reference.py", "LICENSE", "pyconvtbc/py.typed"} <= names
    assert {p.relative_to(ROOT).as_posix() for p in (ROOT / "tests").glob("*.py")} <= names
    assert not [n for n in names if n.endswith((".c", ".so", ".pyc")) and not check.HAND_WRITTEN_C.fullmatch(n)]
    tracked = check._tracked(str(ROOT)) if shutil.which("git") else []
    tracked = [t for t in tracked if (ROOT / t).exists()]   # files deleted but not yet committed
    assert check.sdist_problems(names, tracked) == []


def test_wheel_file_selection_has_no_sources(tmp_path):
    """What setuptools puts in the wheel from the package folders (build_py; the extensions add only .so)."""
    _need_build_tools()
    src = _source_copy(tmp_path)
    out = tmp_path / "lib"
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_py", "--build-lib", str(out)], cwd=src,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    files = {p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file()}
    assert "pyconvtbc/py.typed" in files
    assert not [f for f in files if f.endswith((".pyx", ".pxd", ".c", ".h"))], files
    py_sources = {p.relative_to(ROOT).as_posix() for p in (ROOT / "pyconvtbc").rglob("*.py")
                  if "__pycache__" not in p.parts}
    assert py_sources <= files
    assert files - py_sources == {"pyconvtbc/py.typed"}


# ---- the import guard -----------------------------------------------------------------------------------
def _python_in(cwd, code):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, env=env,
                          timeout=120)


def test_unbuilt_source_tree_fails_with_a_clear_import_error(tmp_path):
    shutil.copytree(ROOT / "pyconvtbc", tmp_path / "pyconvtbc", ignore=SKIP_COPY)
    for code in ("import pyconvtbc", "import pyconvtbc.codecs", "from pyconvtbc import conv_tbc_backward"):
        r = _python_in(tmp_path, code)
        assert r.returncode == 1, (code, r.stdout, r.stderr)
        msg = r.stderr[r.stderr.index("ImportError:"):]
        assert "source tree" in msg and str(tmp_path) in msg, msg       # names the tree
        assert "another directory" in msg and "pip install -e ." in msg, msg   # and the fixes
        assert "partially initialized" not in r.stderr


def test_extension_that_does_not_load_is_named(tmp_path):
    shutil.copytree(ROOT / "pyconvtbc", tmp_path / "pyconvtbc", ignore=SKIP_COPY)
    bogus = tmp_path / "pyconvtbc" / "_kernels" / ("_openmp" + importlib.machinery.EXTENSION_SUFFIXES[0])
    bogus.write_bytes(b"not a shared object")
    r = _python_in(tmp_path, "import pyconvtbc")
    assert r.returncode == 1
    msg = r.stderr[r.stderr.index("ImportError:"):]
    assert "do not load" in msg and sys.implementation.cache_tag in msg, msg


def test_package_ships_py_typed():
    assert (Path(pyconvtbc.__file__).parent / "py.typed").is_file()


def test_installed_wheel_is_what_the_tests_import():
    """In CI's wheel run: the tests import the installed wheel, which holds no sources."""
    if os.environ.get("PYCONVTBC_EXPECT_INSTALLED", "") in ("", "0"):
        pytest.skip("set PYCONVTBC_EXPECT_INSTALLED=1 when testing an installed wheel (.ci/run does)")
    pkg = Path(pyconvtbc.__file__).resolve().parent
    assert ROOT not in pkg.parents, f"pyconvtbc imported from {pkg}, inside the source tree {ROOT}"
    left = [p.name for p in pkg.rglob("*") if p.suffix in (".pyx", ".pxd", ".c", ".h")]
    assert not left
    assert list((pkg / "_kernels").glob("_conv_tbc.*")), "no compiled kernel next to the installed package"


# ---- the CI's build checks ------------------------------------------------------------------------------
AVX2 = {"sse2", "avx", "avx2", "fma", "f16c"}
AVX512 = AVX2 | {"avx512f", "avx512bw", "avx512vl", "avx512dq"}


def test_check_build_fails_a_build_without_openmp_unless_opted_out():
    check = _load_check_build()
    assert check.runtime_problems(True, "avx2", AVX2, {}) == []
    (msg,) = check.runtime_problems(False, "avx2", AVX2, {})
    assert "OpenMP" in msg and "PYCONVTBC_CI_ALLOW_NO_OPENMP" in msg
    assert check.runtime_problems(False, "avx2", AVX2, {"PYCONVTBC_CI_ALLOW_NO_OPENMP": "1"}) == []
    assert check.runtime_problems(False, "avx2", AVX2, {"PYCONVTBC_CI_ALLOW_NO_OPENMP": "0"}) != []


def test_check_build_fails_lost_vector_kernels_unless_opted_out():
    check = _load_check_build()
    (msg,) = check.runtime_problems(True, "portable", AVX2, {})
    assert "portable" in msg and "avx2" in msg and "PYCONVTBC_CI_ALLOW_PORTABLE" in msg
    assert check.runtime_problems(True, "portable", AVX2, {"PYCONVTBC_CI_ALLOW_PORTABLE": "1"}) == []
    assert check.runtime_problems(True, "avx2", AVX512, {}) != []          # avx512 lost
    assert check.runtime_problems(True, "avx512", AVX512, {}) == []
    assert check.runtime_problems(True, "portable", {"sse2", "avx"}, {}) == []   # nothing better to expect
    assert check.runtime_problems(True, "portable", {"avx2"}, {}) == []    # avx2 without fma/f16c: portable
    assert check.expected_isa(set()) == "portable"


def test_check_build_reads_this_cpu(tmp_path):
    check = _load_check_build()
    fake = tmp_path / "cpuinfo"
    fake.write_text("processor\t: 0\nflags\t\t: fpu sse2 avx avx2 fma f16c\n\nprocessor\t: 1\n")
    assert check.cpu_flags(str(fake)) == {"fpu", "sse2", "avx", "avx2", "fma", "f16c"}
    assert check.cpu_flags(str(tmp_path / "missing")) == set()
    from pyconvtbc._kernels import _conv_tbc
    if Path("/proc/cpuinfo").exists() and os.environ.get("PYCONVTBC_CI_ALLOW_PORTABLE", "") in ("", "0"):
        assert check.ISA_RANK[_conv_tbc.isa_supported()] >= check.ISA_RANK[check.expected_isa(check.cpu_flags())]


def test_check_build_rejects_bad_artifacts():
    check = _load_check_build()
    good_sdist = ["LICENSE", "README.md", "pyproject.toml", "setup.py", "MANIFEST.in", "tests/conftest.py",
                  "tests/reference.py", "tests/test_x.py", "pyconvtbc/__init__.py", "pyconvtbc/py.typed",
                  "pyconvtbc/_kernels/_conv_tbc.pyx", "pyconvtbc/_kernels/_conv_gemm.h"]
    assert check.sdist_problems(good_sdist) == []
    assert check.sdist_problems(good_sdist + ["pyconvtbc/_kernels/_conv_tbc.c"]) != []
    assert check.sdist_problems([n for n in good_sdist if n != "tests/conftest.py"]) != []
    assert check.sdist_problems(good_sdist, tracked=good_sdist + ["docs/new.md"]) == [
        "sdist lacks the tracked file docs/new.md"]
    good_wheel = ["pyconvtbc/__init__.py", "pyconvtbc/py.typed", "pyconvtbc-0.1.0.dist-info/licenses/LICENSE"] + [
        f"pyconvtbc/_kernels/{m}.cpython-311-x86_64-linux-gnu.so" for m in ("_openmp", "_conv_tbc", "_codecs")]
    assert check.wheel_problems(good_wheel) == []
    assert check.wheel_problems(good_wheel + ["pyconvtbc/_kernels/_fpround.pxd"]) != []
    assert check.wheel_problems(good_wheel[1:]) == []                  # __init__.py is not a listed need
    assert check.wheel_problems([n for n in good_wheel if "py.typed" not in n]) != []
    assert check.wheel_problems([n for n in good_wheel if "_codecs" not in n]) != []


# ---- typed, documented public codecs --------------------------------------------------------------------
def test_public_codecs_are_fully_type_hinted():
    from pyconvtbc import codecs
    for name in ("hif8_encode", "hif8_decode", "round_to_hf32", "e4m3fn_encode", "e4m3fn_decode",
                 "round_to_fp16", "round_to_bf16"):
        fn = getattr(codecs, name)
        hints = typing.get_type_hints(fn)                  # the annotations resolve
        params = inspect.signature(fn).parameters
        assert set(params) | {"return"} == set(hints), (name, set(params) ^ (set(hints) - {"return"}))


def test_codec_docstrings_have_numpydoc_sections_and_their_examples_hold():
    from pyconvtbc import codecs
    for fn in (codecs.hif8_encode, codecs.hif8_decode, codecs.round_to_hf32):
        doc = fn.__doc__
        for section in ("Parameters\n    ----------", "Returns\n    -------", "Raises\n    ------"):
            assert section in doc, (fn.__name__, section)
        for p in inspect.signature(fn).parameters:                                   # every parameter is documented
            assert re.search(rf"^    {p} : ", doc, re.M), (fn.__name__, p)
    result = doctest.testmod(codecs, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted >= 4 and result.failed == 0, result


def test_partial_or_foreign_build_is_named(tmp_path):
    """A tree whose extensions exist only for another Python, or only in part, says so (not a bare 'cannot
    import name')."""
    shutil.copytree(ROOT / "pyconvtbc", tmp_path / "pyconvtbc", ignore=SKIP_COPY)
    kern = tmp_path / "pyconvtbc" / "_kernels"
    (kern / "_openmp.cpython-399-x86_64-linux-gnu.so").write_bytes(b"")        # another Python's build
    r = _python_in(tmp_path, "import pyconvtbc")
    assert r.returncode == 1
    msg = r.stderr[r.stderr.index("ImportError:"):]
    assert "incomplete for this Python" in msg and "_openmp.cpython-399" in msg and "pip install -e ." in msg, msg
    # this Python's _openmp built, the rest not
    (kern / "_openmp.cpython-399-x86_64-linux-gnu.so").unlink()
    for name in ("_openmp",):
        src = next(Path(pyconvtbc.__file__).parent.joinpath("_kernels").glob(name + ".*.so"), None)
        if src is None:
            pytest.skip("no compiled _openmp next to the imported package")
        shutil.copy(src, kern / src.name)
    r = _python_in(tmp_path, "import pyconvtbc")
    assert r.returncode == 1
    msg = r.stderr[r.stderr.index("ImportError:"):]
    assert "incomplete for this Python" in msg and "_codecs, _conv_tbc not built" in msg, msg


# ---- release wheels: metadata, debug info, the cibuildwheel table ------------------------------------------------
def test_project_urls_point_at_pages_the_repository_has():
    urls = _pyproject()["project"]["urls"]
    assert {"Homepage", "Documentation", "Source", "Issues"} <= set(urls)
    for name, url in urls.items():
        assert url.startswith("https://"), (name, url)
        m = re.search(r"/(?:blob|tree)/main/(.+)$", url)
        if m:
            assert (ROOT / m.group(1)).exists(), (name, url)


def test_every_python_version_from_requires_python_has_its_classifier():
    project = _pyproject()["project"]
    lowest = int(re.search(r">=\s*3\.(\d+)", project["requires-python"]).group(1))
    versions = {int(c.rsplit(".", 1)[1]) for c in project["classifiers"]
                if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)}
    assert min(versions) == lowest and versions == set(range(lowest, max(versions) + 1)), versions
    assert "Typing :: Typed" in project["classifiers"]


def test_the_cibuildwheel_table_builds_every_version_for_both_linux_arches():
    meta = _pyproject()
    cbw = meta["tool"]["cibuildwheel"]
    classified = sorted(int(c.rsplit(".", 1)[1]) for c in meta["project"]["classifiers"]
                        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c))
    assert cbw["build"].split() == [f"cp3{v}-*" for v in classified]
    assert cbw["linux"]["archs"] == ["x86_64", "aarch64"]
    assert "test-command" in cbw and "{project}/tests" in cbw["test-command"]
    if shutil.which("cibuildwheel") is None:
        return                      # .ci/run installs it and prints the identifiers
    r = subprocess.run(["cibuildwheel", "--platform", "linux", "--print-build-identifiers", str(ROOT)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.split()) == sorted(f"cp3{v}-manylinux_{a}" for v in classified
                                              for a in ("x86_64", "aarch64"))


def _elf(sections):
    """A minimal little-endian ELF64 image whose section names are ``sections`` (plus the string table)."""
    import struct
    names = [""] + list(sections) + [".shstrtab"]
    table = b"".join(n.encode() + b"\0" for n in names)
    offsets = [sum(len(n) + 1 for n in names[:i]) for i in range(len(names))]
    shoff = 64 + len(table)
    head = bytearray(64)
    head[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<Q", head, 0x28, shoff)
    struct.pack_into("<HHH", head, 0x3A, 64, len(names), len(names) - 1)
    shdrs = b"".join(struct.pack("<IIQQQQ", offsets[i], 0, 0, 0, 0, 0) + bytes(24) for i in range(len(names) - 1))
    shdrs += struct.pack("<IIQQQQ", offsets[-1], 3, 0, 0, 64, len(table)) + bytes(24)
    return bytes(head) + table + shdrs


def test_check_build_flags_an_extension_with_debug_info():
    cb = _load_check_build()
    assert cb.elf_section_names(_elf([".text", ".debug_info"])) == ["", ".text", ".debug_info", ".shstrtab"]
    assert cb.debug_info_problems({"pyconvtbc/_kernels/_x.so": _elf([".text", ".debug_info"])})
    assert cb.debug_info_problems({"pyconvtbc/_kernels/_x.so": _elf([".text", ".symtab"])}) == []
    assert cb.elf_section_names(b"not an elf") is None
