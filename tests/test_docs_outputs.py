"""The documentation against the code: console outputs shown in docs/ equal what the commands print now
(.ci/doc_outputs.py), docs name no file outside the repository, their links resolve, and examples never
overwrite files the repository tracks."""
import hashlib
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import load_repo_module

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _doc_outputs():
    return load_repo_module(".ci/doc_outputs.py")


def test_documented_console_outputs_match_the_commands():
    mod = _doc_outputs()
    commands = [cmd for p in mod.doc_files(ROOT) for cmd, _, _ in mod.marked_blocks(p.read_text())]
    assert "python -m pyconvtbc demo" in commands          # getting-started.md shows the demo's output
    problems = mod.check(mod.doc_files(ROOT))
    assert not problems, "\n".join(problems) + "\n(regenerate: python .ci/doc_outputs.py --write)"


def test_the_output_check_catches_a_stale_block_and_rewrites_it(tmp_path):
    mod = _doc_outputs()
    page = tmp_path / "page.md"
    page.write_text("intro\n\n<!-- output: python -m pyconvtbc --version -->\n```text\npyconvtbc 0.0.0\n```\n"
                    "\nafter\n")
    (problem,) = mod.check([page])
    assert "-pyconvtbc 0.0.0" in problem
    import pyconvtbc
    assert f"+pyconvtbc {pyconvtbc.__version__}" in problem
    assert mod.check([page], write=True)
    assert mod.check([page]) == []
    assert page.read_text() == ("intro\n\n<!-- output: python -m pyconvtbc --version -->\n```text\n"
                                f"pyconvtbc {pyconvtbc.__version__}\n```\n\nafter\n")


def test_the_output_check_reports_a_failing_command(tmp_path):
    mod = _doc_outputs()
    page = tmp_path / "page.md"
    page.write_text("<!-- output: python -m pyconvtbc demo --bogus -->\n```text\n```\n")
    with pytest.raises(RuntimeError, match="exited 2"):
        mod.check([page])


def test_docs_name_no_file_outside_the_repository():
    pattern = re.compile(r"SEMANTICS\.md|API\.md|LAYOUT\.md|FORWARD\.md|\.\./shared|SEMANTICS section")
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in DOCS
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert not hits, "\n".join(hits)


def test_relative_links_in_the_docs_resolve():
    missing = []
    for p in DOCS:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", p.read_text()):
            if re.match(r"[a-z]+:", target):                 # http:, https:, mailto:
                continue
            if not (p.parent / target).exists():
                missing.append(f"{p.relative_to(ROOT)} -> {target}")
    assert not missing, missing


def _digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def test_example_writes_its_plot_outside_the_repository_by_default(tmp_path):
    pytest.importorskip("torch")
    script = ROOT / "examples" / "train_tiny_convtbc.py"
    figure = ROOT / "docs" / "img" / "train_tiny_convtbc.png"
    before = _digest(figure), figure.stat().st_mtime_ns if figure.exists() else None
    env = dict(os.environ, TMPDIR=str(tmp_path))          # the default output folder's parent
    r = subprocess.run([sys.executable, str(script), "--steps", "2"], cwd=tmp_path, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (_digest(figure), figure.stat().st_mtime_ns if figure.exists() else None) == before
    out = tmp_path / "pyconvtbc-examples" / "train_tiny_convtbc.png"
    if "matplotlib is not installed" in r.stdout:
        assert not out.exists()
    else:
        assert out.is_file() and out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert "wrote " in r.stdout

