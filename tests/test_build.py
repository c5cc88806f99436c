"""The package as a new user gets it: the README's two commands, CI running the same test command, no build
outputs in git, and the serial (no-OpenMP) fallback build computing the same results."""
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, re.S)
    return [line for b in blocks for line in b.strip().splitlines() if "python3 -m venv" in line]


def test_readme_has_exactly_two_setup_commands():
    cmds = _readme_commands()
    assert len(cmds) == 2, cmds
    demo, tests = cmds
    assert demo.endswith("-m pyconvtbc demo")
    assert '".[test]"' in tests and "pytest" in tests


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    test_cmd = _readme_commands()[1].split("&& ", 1)[1]   # after creating the venv
    assert ci[-1].strip() == test_cmd


def test_no_build_outputs_tracked():
    if not (ROOT / ".git").exists() or shutil.which("git") is None:
        pytest.skip("not a git checkout")
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    # (the kernel room's hand-written translation units, pyconvtbc/_kernels/_ukr_*.c, are sources)
    bad = [f for f in files if re.search(r"\.(so|pyd|o)$|^pyconvtbc/.*\.c$|\.egg-info/|(^|/)build/", f)
           and not re.fullmatch(r"pyconvtbc/_kernels/_ukr_\w+\.c", f)]
    assert not bad


def test_no_march_native_in_default_build():
    assert "-march=native" not in (ROOT / "setup.py").read_text().split('"""', 2)[2]


def _without_build_outputs(folder, names):
    """copytree's ignore: compiled modules, Cython's generated C, caches (not the hand-written _ukr_*.c)."""
    return [n for n in names if n.endswith((".so", ".html")) or n == "__pycache__"
            or (n.endswith(".c") and n[:-2] + ".pyx" in names)]


@pytest.mark.slow
def test_serial_fallback_build_gives_the_same_results(tmp_path):
    """The serial build, made with fast-math flags in the environment (which setup.py must drop: they would
    flush subnormals to zero for the whole process), gives the normal build's bits, subnormal results included."""
    pytest.importorskip("Cython")
    pytest.importorskip("setuptools")
    if shutil.which("cc") is None and shutil.which("gcc") is None:
        pytest.skip("no C compiler")
    src = tmp_path / "src"
    shutil.copytree(ROOT / "pyconvtbc", src / "pyconvtbc",
                    ignore=_without_build_outputs)
    shutil.copy(ROOT / "setup.py", src / "setup.py")
    shutil.copy(ROOT / "pyproject.toml", src / "pyproject.toml")
    shutil.copy(ROOT / "README.md", src / "README.md")
    env = dict(os.environ, PYCONVTBC_DISABLE_OPENMP="1", CFLAGS="-Ofast -ffast-math", LDFLAGS="-ffast-math")
    r = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=src, env=env,
                       capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    assert "OpenMP off" in r.stderr
    assert "ignoring -Ofast -ffast-math" in r.stderr
    script = textwrap.dedent("""
        import numpy as np, pyconvtbc as pc
        assert pc.have_openmp() is False
        assert np.float32(1e-39) * np.float32(1) != 0            # no flush-to-zero after the import
        rng = np.random.default_rng(0)
        dy = rng.standard_normal((40, 3, 17)).astype(np.float32)
        x = rng.standard_normal((40, 3, 13)).astype(np.float32)
        w = rng.standard_normal((3, 13, 17)).astype(np.float32)
        b = np.zeros(17, np.float32)
        out = pc.conv_tbc_backward(dy, x, w, b, 1, num_threads=4, deterministic=True)
        tiny = pc.conv_tbc_backward(dy * np.float32(2.0 ** -70), x * np.float32(2.0 ** -60), w, b, 1,
                                    deterministic=True)
        np.savez(OUT, *out, *tiny)
    """)
    out_serial = tmp_path / "serial.npz"
    r = subprocess.run([sys.executable, "-c", f"OUT={str(out_serial)!r}\n" + script], cwd=src, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    # the same deterministic call through the normal build
    import numpy as np
    import pyconvtbc as pc
    rng = np.random.default_rng(0)
    dy = rng.standard_normal((40, 3, 17)).astype(np.float32)
    x = rng.standard_normal((40, 3, 13)).astype(np.float32)
    w = rng.standard_normal((3, 13, 17)).astype(np.float32)
    ref = pc.conv_tbc_backward(dy, x, w, np.zeros(17, np.float32), 1, num_threads=2, deterministic=True)
    tiny = pc.conv_tbc_backward(dy * np.float32(2.0 ** -70), x * np.float32(2.0 ** -60), w, np.zeros(17, np.float32),
                                1, deterministic=True)
    assert np.count_nonzero((tiny[1] != 0) & (np.abs(tiny[1]) < 2.0 ** -126)) > tiny[1].size // 2   # subnormals
    ref = tuple(ref) + tuple(tiny)
    got = np.load(out_serial)
    for i, r_ in enumerate(ref):
        np.testing.assert_array_equal(got[f"arr_{i}"], r_)
