"""CI checks of what a build produced (used by .ci/run; tests/test_packaging.py tests it).

    python .ci/check_build.py sdist dist/pyconvtbc-X.tar.gz [--repo .]   contents of the source distribution
    python .ci/check_build.py wheel dist/pyconvtbc-X-*.whl              contents of the wheel
    python .ci/check_build.py installed --outside DIR                   the installed package, as imported

``sdist``: has LICENSE, README.md, the build files, the Cython sources and the test suite's helpers
(tests/conftest.py, tests/reference.py), every file git tracks when ``--repo`` is a git checkout, and no build
output (Cython's generated .c, compiled objects, caches).
``wheel``: the .py modules, the compiled extensions, py.typed and the licence; no sources (.pyx, .pxd, .c, .h);
extensions without debug info (a release build: setup.py compiles with -g0 and links with --strip-debug).
``installed``: pyconvtbc imports from outside DIR (not a source tree), was built with OpenMP and with the
vector kernels this CPU supports.  Opt-outs, for machines or compilers without them:
PYCONVTBC_CI_ALLOW_NO_OPENMP=1 and PYCONVTBC_CI_ALLOW_PORTABLE=1.

Exit status 0 when every check passes, 1 (with one line per failure on stderr) otherwise.
"""
import argparse
import os
import re
import subprocess
import sys
import tarfile
import zipfile

ISA_RANK = {"portable": 0, "neon": 1, "avx2": 1, "avx512": 2, "amx": 3}   # (amx: avx512 plus tiles for BF16)
# The CPU features each vector kernel needs (pyconvtbc/_kernels/_ukr_select.c, ct_cpu_has: the ISA files are
# compiled for these).
ISA_NEEDS = {
    "avx512": {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma", "f16c", "avx2"},
    "avx2": {"avx2", "fma", "f16c"},
}
BUILD_OUTPUT_EXT = (".c", ".cpp", ".so", ".pyd", ".o", ".pyc", ".html")
SOURCE_EXT = (".pyx", ".pxd", ".c", ".h", ".cpp")
# Hand-written C: the kernel room's ISA files (pyconvtbc/_kernels/_ukr_<isa>.c) and the tests' C harness
# (tests/ukr_check.c): source, not Cython's output.
HAND_WRITTEN_C = re.compile(r"(pyconvtbc/_kernels/_ukr_[a-z0-9]+|tests/[a-z0-9_]+)\.c")


def _opt_out(env, name):
    return env.get(name, "") not in ("", "0")


def expected_isa(cpu_flags):
    """The best kernel the CPU's flags allow ('avx512', 'avx2' or 'portable')."""
    for isa in ("avx512", "avx2"):
        if ISA_NEEDS[isa] <= set(cpu_flags):
            return isa
    return "portable"


def cpu_flags(path="/proc/cpuinfo"):
    """The CPU feature flags from /proc/cpuinfo (an empty set where there is none)."""
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def runtime_problems(have_openmp, isa_supported, flags, env):
    """The failures for a build with these properties on a CPU with these flags (a list of strings)."""
    problems = []
    if not have_openmp and not _opt_out(env, "PYCONVTBC_CI_ALLOW_NO_OPENMP"):
        problems.append("the build has no OpenMP (pyconvtbc.have_openmp() is False): the compiler probe in "
                        "setup.py failed; set PYCONVTBC_CI_ALLOW_NO_OPENMP=1 where that is expected")
    want = expected_isa(flags)
    if ISA_RANK.get(isa_supported, -1) < ISA_RANK[want] and not _opt_out(env, "PYCONVTBC_CI_ALLOW_PORTABLE"):
        problems.append(f"the kernels use {isa_supported!r} but this CPU has {want} "
                        f"({' '.join(sorted(ISA_NEEDS[want]))} in /proc/cpuinfo): the vector kernels were lost; "
                        "set PYCONVTBC_CI_ALLOW_PORTABLE=1 where that is expected")
    return problems


def sdist_problems(names, tracked=()):
    """Problems with an sdist whose members (without the top 'name-version/' folder) are ``names``."""
    names = set(names)
    problems = [f"sdist ships build output {n}" for n in sorted(names)
                if (n.endswith(BUILD_OUTPUT_EXT) and not HAND_WRITTEN_C.fullmatch(n)) or "__pycache__" in n.split("/")]
    required = ["LICENSE", "README.md", "pyproject.toml", "setup.py", "MANIFEST.in", "tests/conftest.py",
                "tests/reference.py", "pyconvtbc/py.typed", "pyconvtbc/_kernels/_conv_gemm.h"]
    problems += [f"sdist lacks {n}" for n in required if n not in names]
    if not any(n.endswith(".pyx") for n in names):
        problems.append("sdist lacks the Cython sources (*.pyx)")
    problems += [f"sdist lacks the tracked file {n}" for n in sorted(tracked)
                 if n not in names and n != ".gitignore"]
    return problems


def wheel_problems(names):
    problems = [f"wheel ships the source {n}" for n in sorted(names) if n.endswith(SOURCE_EXT)]
    if "pyconvtbc/py.typed" not in names:
        problems.append("wheel lacks pyconvtbc/py.typed")
    for mod in ("_openmp", "_conv_tbc", "_codecs"):
        if not any(n.startswith(f"pyconvtbc/_kernels/{mod}.") and n.endswith((".so", ".pyd")) for n in names):
            problems.append(f"wheel lacks the compiled extension pyconvtbc/_kernels/{mod}")
    if not any(n.endswith(".dist-info/licenses/LICENSE") or n.endswith(".dist-info/LICENSE") for n in names):
        problems.append("wheel lacks the LICENSE file")
    return problems


def elf_section_names(data):
    """The section names of an ELF64 shared object (bytes), or None for anything else."""
    import struct
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] != 2:
        return None
    e = "<" if data[5] == 1 else ">"
    shoff, = struct.unpack_from(e + "Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from(e + "HHH", data, 0x3A)
    if shoff == 0 or shnum == 0 or shoff + shnum * shentsize > len(data) or shstrndx >= shnum:
        return None
    headers = [struct.unpack_from(e + "IIQQQQ", data, shoff + i * shentsize) for i in range(shnum)]
    str_off, str_size = headers[shstrndx][4], headers[shstrndx][5]
    table = data[str_off:str_off + str_size]
    return [table[h[0]:table.index(b"\0", h[0])].decode("ascii", "replace") for h in headers]


def debug_info_problems(members):
    """members: {name: bytes} of the wheel's extensions; a problem for each that carries DWARF debug info."""
    return [f"wheel extension {n} carries debug info (.debug_info): a release build strips it"
            for n, data in sorted(members.items()) if ".debug_info" in (elf_section_names(data) or [])]


def _sdist_members(path):
    with tarfile.open(path) as tf:
        names = [m.name for m in tf.getmembers() if m.isfile()]
    return [n.split("/", 1)[1] for n in names if "/" in n]


def _tracked(repo):
    if not repo or not os.path.isdir(os.path.join(repo, ".git")) and not os.path.isfile(os.path.join(repo, ".git")):
        return []
    r = subprocess.run(["git", "ls-files"], cwd=repo, capture_output=True, text=True)
    return r.stdout.split() if r.returncode == 0 else []


def installed_problems(outside):
    import pyconvtbc
    from pyconvtbc._kernels import _conv_tbc

    where = os.path.realpath(os.path.dirname(pyconvtbc.__file__))
    problems = []
    if outside and (where + os.sep).startswith(os.path.realpath(outside) + os.sep):
        problems.append(f"pyconvtbc is imported from {where}, inside {outside}: the source tree shadows the "
                        "installed package")
    problems += runtime_problems(pyconvtbc.have_openmp(), _conv_tbc.isa_supported(), cpu_flags(), os.environ)
    print(f"check_build: pyconvtbc {pyconvtbc.__version__} from {where}; OpenMP {pyconvtbc.have_openmp()}; "
          f"kernels {_conv_tbc.isa_supported()} (CPU: {expected_isa(cpu_flags())})")
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    s = sub.add_parser("sdist")
    s.add_argument("path")
    s.add_argument("--repo", help="a git checkout whose tracked files the sdist must hold")
    w = sub.add_parser("wheel")
    w.add_argument("path")
    i = sub.add_parser("installed")
    i.add_argument("--outside", help="the import must not come from inside this directory")
    a = ap.parse_args(argv)
    if a.what == "sdist":
        names = _sdist_members(a.path)
        problems = sdist_problems(names, _tracked(a.repo))
        print(f"check_build: sdist {os.path.basename(a.path)}: {len(names)} files")
    elif a.what == "wheel":
        with zipfile.ZipFile(a.path) as zf:
            names = zf.namelist()
            exts = {n: zf.read(n) for n in names if n.endswith(".so")}
        problems = wheel_problems(names) + debug_info_problems(exts)
        print(f"check_build: wheel {os.path.basename(a.path)}: {len(names)} files, {os.path.getsize(a.path)} bytes; "
              "extensions " + ", ".join(f"{n.rsplit('/', 1)[-1].split('.')[0]} {len(d)} bytes"
                                        for n, d in sorted(exts.items())))
    else:
        problems = installed_problems(a.outside)
    for p in problems:
        print(f"check_build: FAIL: {p}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
