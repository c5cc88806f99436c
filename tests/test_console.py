"""Output while the user waits (pyconvtbc/_console.py): progress on stderr (a bar on a terminal, plain lines with
--progress, nothing when piped unless asked) and a quiet end when stdout's reader has gone."""
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from child_python import child_env
from pyconvtbc._console import BROKEN_PIPE_STATUS, Progress

ROOT = Path(__file__).resolve().parents[1]


class _Stream(io.StringIO):
    def __init__(self, tty):
        super().__init__()
        self.tty = tty

    def isatty(self):
        return self.tty


def _run(progress_mode, tty, steps=20):
    s = _Stream(tty)
    with Progress(steps, "work", progress_mode, stream=s) as p:
        for _ in range(steps):
            p.update(1, "mode-x")
    return s.getvalue()


def test_terminal_gets_a_bar_redrawn_in_place_ending_with_a_newline():
    out = _run("auto", tty=True)
    assert out.startswith("\rwork [") and out.endswith("\n") and out.count("\n") == 1
    assert "20/20" in out and "#" * 30 in out and "mode-x" in out


def test_a_pipe_gets_nothing_unless_asked():
    assert _run("auto", tty=False) == ""
    assert _run(False, tty=True) == ""


def test_progress_when_piped_is_plain_lines_one_per_tenth():
    out = _run(True, tty=False)
    lines = out.splitlines()
    assert "\r" not in out and "\033" not in out
    assert len(lines) == 10, lines                    # 2/20, 4/20, ... 20/20
    assert lines[-1].startswith("work: 20/20 (100%)")
    assert all(line.startswith("work: ") and "elapsed" in line for line in lines)


def test_a_bad_mode_is_refused():
    with pytest.raises(ValueError, match="mode"):
        Progress(3, "x", "sometimes")


def _pyconvtbc_env():
    return child_env()


def test_demo_into_a_closed_pipe_ends_quietly(tmp_path):
    """The reader is gone before the demo writes: no BrokenPipeError traceback, status 141 (128 + SIGPIPE)."""
    r, w = os.pipe()
    os.close(r)
    try:
        p = subprocess.run([sys.executable, "-m", "pyconvtbc", "demo"], stdout=w, stderr=subprocess.PIPE,
                           cwd=tmp_path, env=_pyconvtbc_env(), timeout=300)
    finally:
        os.close(w)
    assert p.stderr.decode() == ""
    assert p.returncode == BROKEN_PIPE_STATUS


def test_demo_piped_into_head_prints_three_lines_and_no_traceback(tmp_path):
    if not os.path.exists("/bin/sh"):
        pytest.skip("no /bin/sh")
    cmd = f"'{sys.executable}' -m pyconvtbc demo | head -3"
    p = subprocess.run(["/bin/sh", "-c", cmd], capture_output=True, text=True, cwd=tmp_path, env=_pyconvtbc_env(),
                       timeout=300)
    assert len(p.stdout.splitlines()) == 3
    assert "Traceback" not in p.stderr and "BrokenPipeError" not in p.stderr, p.stderr


# ---- study train: the command users wait on ------------------------------------------------------------------
TRAIN = ["study", "train", "--steps", "3", "--modes", "torch,KEEP_DTYPE", "--batch", "2", "--length", "4",
         "--dim", "4", "--vocab", "4", "--no-plots"]


def _need_torch():
    pytest.importorskip("torch")


@pytest.mark.parametrize("extra, expect_lines", [([], False), (["--progress"], True)])
def test_study_train_piped_is_quiet_unless_asked(tmp_path, extra, expect_lines):
    _need_torch()
    p = subprocess.run([sys.executable, "-m", "pyconvtbc"] + TRAIN + extra, capture_output=True, text=True,
                       cwd=tmp_path, env=_pyconvtbc_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if ln.startswith("study train: ")]
    if expect_lines:
        assert lines and lines[-1].startswith("study train: 6/6 (100%)"), p.stderr
        assert "\r" not in p.stderr
    else:
        assert lines == [] and "\r" not in p.stderr, p.stderr
    assert "KEEP_DTYPE" in p.stdout                  # the table still goes to stdout


def test_study_train_on_a_terminal_draws_a_bar(tmp_path):
    _need_torch()
    pty = pytest.importorskip("pty")
    try:
        master, slave = pty.openpty()
    except OSError as e:       # a container without pseudo-terminals
        pytest.skip(f"no pseudo-terminal: {e}")
    try:
        p = subprocess.Popen([sys.executable, "-m", "pyconvtbc"] + TRAIN, stdout=subprocess.PIPE, stderr=slave,
                             cwd=tmp_path, env=_pyconvtbc_env())
        os.close(slave)
        slave = None
        chunks = []
        while True:
            try:
                data = os.read(master, 4096)
            except OSError:          # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        out, _ = p.communicate(timeout=300)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    err = b"".join(chunks).decode(errors="replace")
    assert p.returncode == 0, err
    assert "\rstudy train [" in err and "6/6" in err, err
    assert b"KEEP_DTYPE" in out


def test_bench_help_names_no_internal_issue_and_offers_progress(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "bench" / "run.py"), "--help"], capture_output=True, text=True,
                       cwd=tmp_path, env=_pyconvtbc_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    assert "issue" not in p.stdout.lower() and "--progress" in p.stdout and "--no-progress" in p.stdout
