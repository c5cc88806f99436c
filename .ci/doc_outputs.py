"""Console outputs shown in the documentation, regenerated from the commands that produce them.

A block in README.md or docs/*.md is tied to its command by a marker line just above its code fence:

    <!-- output: python -m pyconvtbc demo -->
    ```text
    ...exactly what the command prints...
    ```

    python .ci/doc_outputs.py            check: exit 1 and show a diff when a block differs from the output
    python .ci/doc_outputs.py --write    rewrite every marked block with the command's current output

``python`` in a command means the running interpreter; commands run from a temporary directory (so a source
tree cannot shadow the installed package) and must exit 0.  Only deterministic outputs belong here: timings
and other measurements are produced by the bench/ scripts and shown as dated records instead.
tests/test_docs_outputs.py runs the check.
"""
import argparse
import difflib
import re
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MARKED = re.compile(r"^<!-- output: (?P<cmd>.+?) -->\n```[a-z]*\n(?P<body>.*?)^```$", re.M | re.S)


def doc_files(root=ROOT):
    return [p for p in [root / "README.md", *sorted((root / "docs").glob("*.md"))] if p.exists()]


def marked_blocks(text):
    """[(command, shown output, match)] for every marked block of ``text``."""
    return [(m.group("cmd"), m.group("body"), m) for m in MARKED.finditer(text)]


def run(cmd, timeout=600):
    """The stdout of ``cmd`` (a documented command line), run from an empty temporary directory."""
    argv = shlex.split(cmd)
    if argv[0] in ("python", "python3"):
        argv[0] = sys.executable
    with tempfile.TemporaryDirectory(prefix="pyconvtbc-doc-") as cwd:
        r = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    if r.returncode != 0:
        raise RuntimeError(f"{cmd!r} exited {r.returncode}: {r.stderr[-2000:]}")
    return r.stdout


def check(paths, write=False):
    """Problems (one string each, with a diff) for blocks that differ; rewrite them when ``write``."""
    problems = []
    for path in paths:
        text = path.read_text()
        new = text
        for cmd, shown, m in reversed(marked_blocks(text)):
            out = run(cmd)
            if out != shown:
                diff = "".join(difflib.unified_diff(shown.splitlines(True), out.splitlines(True),
                                                    f"{path.name} (shown)", f"{cmd} (now)"))
                problems.append(f"{path.relative_to(ROOT) if ROOT in path.parents else path}: the output of "
                                f"{cmd!r} changed:\n{diff}")
                new = new[:m.start("body")] + out + new[m.end("body"):]
        if write and new != text:
            path.write_text(new)
    return problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", action="store_true", help="rewrite the blocks that differ")
    a = ap.parse_args(argv)
    problems = check(doc_files(), write=a.write)
    for p in problems:
        print(p, file=sys.stderr)
    if problems and a.write:
        print(f"doc_outputs: rewrote {len(problems)} block(s)")
        return 0
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
