"""The command line (``python -m pyconvtbc`` / ``pyconvtbc``): exit statuses, usage errors, --help, --version.

Conventions checked here (argparse's, as documented in pyconvtbc/__main__.py): 0 on success, 2 for a usage
error with the message on stderr and nothing run, 1 when the demo's CANN calls fail, 130 on Ctrl-C.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

import pyconvtbc
from pyconvtbc.__main__ import main


def _cli(*args, tmp_path, exe=None):
    """Run the command line in a fresh process, from a directory with no source tree to shadow the package."""
    cmd = [exe] if exe else [sys.executable, "-m", "pyconvtbc"]
    return subprocess.run(cmd + list(args), cwd=tmp_path, capture_output=True, text=True, timeout=300)


def test_version_flag_prints_the_package_version(tmp_path):
    r = _cli("--version", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"pyconvtbc {pyconvtbc.__version__}"


def test_version_is_single_sourced():
    from pyconvtbc import _version
    assert pyconvtbc.__version__ == _version.__version__
    parts = _version.__version__.split(".")
    assert len(parts) >= 3 and all(p.isdigit() for p in parts[:3]), _version.__version__
    try:
        from importlib.metadata import PackageNotFoundError, version
        installed = version("pyconvtbc")
    except PackageNotFoundError:
        pytest.skip("pyconvtbc is not installed (no distribution metadata)")
    assert installed == pyconvtbc.__version__          # the built metadata reads pyconvtbc/_version.py


def test_help_exits_0_and_lists_the_commands(tmp_path):
    r = _cli("--help", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "demo" in r.stdout and "study" in r.stdout and "--version" in r.stdout


def test_demo_exits_0(tmp_path):
    r = _cli("demo", tmp_path=tmp_path)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("is: 2.000000") == 10 and r.stdout.count("is: 5.000000") == 6
    assert r.stderr == ""


@pytest.mark.parametrize("args, needle", [
    (["demo", "--bogus"], "--bogus"),
    (["demo", "extra"], "extra"),
    (["bogus"], "bogus"),
    (["--bogus"], "--bogus"),
    ([], "command is required"),
])
def test_usage_errors_exit_2_and_run_nothing(args, needle, capsys):
    assert main(args) == 2
    out, err = capsys.readouterr()
    assert out == ""                              # the demo did not run
    assert "usage:" in err and needle in err


def test_usage_error_exit_status_from_a_real_process(tmp_path):
    r = _cli("demo", "--bogus", tmp_path=tmp_path)
    assert r.returncode == 2
    assert "--bogus" in r.stderr and "Result[" not in r.stdout


def test_subcommand_help_exits_0(capsys):
    assert main(["demo", "--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())      # (argparse wraps to the terminal width)
    assert "document examples" in out and "aclnnConvTbc," in out and "aclnnConvTbcBackward" in out
    assert main(["study", "--help"]) == 0         # the study's own parser
    assert "study" in capsys.readouterr().out


def test_demo_failure_exits_1_not_the_status_modulo_256(monkeypatch, capsys):
    from pyconvtbc import _demo
    monkeypatch.setattr(_demo, "demo", lambda: 161002)     # 161002 % 256 == 234
    assert main(["demo"]) == 1


def test_ctrl_c_exits_130(monkeypatch, capsys):
    from pyconvtbc import _demo

    def interrupted():
        raise KeyboardInterrupt

    monkeypatch.setattr(_demo, "demo", interrupted)
    assert main(["demo"]) == 130
    assert "interrupted" in capsys.readouterr().err


def test_console_script(tmp_path):
    exe = Path(sys.executable).with_name("pyconvtbc" + (".exe" if os.name == "nt" else ""))
    if not exe.exists():
        pytest.skip("the pyconvtbc console script is not installed next to this Python")
    r = _cli("--version", tmp_path=tmp_path, exe=str(exe))
    assert r.returncode == 0 and r.stdout.strip() == f"pyconvtbc {pyconvtbc.__version__}"
    r = _cli("--help", tmp_path=tmp_path, exe=str(exe))
    assert r.returncode == 0 and r.stdout.startswith("usage: pyconvtbc ")
    r = _cli("demo", "--bogus", tmp_path=tmp_path, exe=str(exe))
    assert r.returncode == 2 and "usage: pyconvtbc" in r.stderr
    for sub in (["study"], ["study", "train"]):       # the study's own parsers name the program the same way
        r = _cli(*sub, "--help", tmp_path=tmp_path, exe=str(exe))
        assert r.returncode == 0 and r.stdout.startswith(f"usage: pyconvtbc {' '.join(sub)} "), r.stdout[:80]
