"""CI: the package's types against the code users write (used by .ci/run; tests/test_typing.py runs it too).

    python .ci/typecheck.py [--keep DIR]

1. every runnable ```python block of README.md and docs/*.md (the blocks tests/test_docs_code.py runs: no
   ``<!-- code: ... -->`` mark), a page's blocks joined into one program as that test runs them, under
   ``mypy --strict`` except that the pages' own helper functions may be unannotated (--allow-untyped-defs,
   --allow-untyped-calls: the study functions and torch's autograd calls are untyped); a page whose code imports
   torch or matplotlib is skipped when that is not installed;
2. examples/typed_usage.py, a typed user script, under ``mypy --strict`` with no exception.

pyconvtbc is imported from wherever ``python`` finds it (the installed wheel in CI).  Exit status 0 when mypy
finds no error, 1 otherwise (its report on stdout), 2 when mypy is not installed.
"""
import argparse
import importlib.util
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# (tests/test_docs_code.py reads the blocks with the same pattern)
BLOCK = re.compile(r"(?:^<!-- code: ([\w-]+) -->\n)?^```python\n(.*?)^```", re.S | re.M)
OPTIONAL = ("torch", "matplotlib")
STRICT = ["--strict", "--no-incremental", "--show-error-codes", "--python-version",
          f"{sys.version_info[0]}.{sys.version_info[1]}"]
DOCS_RELAX = ["--allow-untyped-defs", "--allow-untyped-calls"]


def page_programs(out_dir):
    """Write each page's runnable blocks as one program into out_dir; returns [(path, skipped reason or None)]."""
    written = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = page.read_text(encoding="utf-8")
        parts = [f"# ---- {page.name}, line {text.count(chr(10), 0, m.start()) + 1}\n{m.group(2)}"
                 for m in BLOCK.finditer(text) if (m.group(1) or "run") == "run"]
        if not parts:
            continue
        code = "\n".join(parts)
        missing = [m for m in OPTIONAL if re.search(rf"^\s*(import|from) {m}\b", code, re.M)
                   and importlib.util.find_spec(m) is None]
        path = Path(out_dir) / f"doc_{page.stem.replace('-', '_')}.py"
        path.write_text(code, encoding="utf-8")
        written.append((path, f"needs {', '.join(missing)}" if missing else None))
    return written


def _env():
    """mypy cannot follow the import hook of a setuptools editable install: with one, point MYPYPATH at the source
    tree (never at a site-packages folder, which mypy refuses there)."""
    spec = importlib.util.find_spec("pyconvtbc")
    env = dict(os.environ)
    if spec is not None and spec.origin:
        root = Path(spec.origin).resolve().parent.parent
        if root.name not in ("site-packages", "dist-packages"):
            env["MYPYPATH"] = str(root)
    return env


def mypy(args, cwd):
    env = _env()
    silent = ["--follow-imports=silent"] if "MYPYPATH" in env else []   # the package's own code: not the user's
    return subprocess.run([sys.executable, "-m", "mypy", *silent, *args], cwd=cwd, capture_output=True, text=True,
                          env=env)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--keep", metavar="DIR", help="write the page programs here (default: a temporary directory)")
    a = ap.parse_args(argv)
    if importlib.util.find_spec("mypy") is None:
        print("typecheck: mypy is not installed", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="pyconvtbc-typecheck-") as tmp:
        out = a.keep or tmp
        os.makedirs(out, exist_ok=True)
        programs = page_programs(out)
        checked = [str(p) for p, why in programs if why is None]
        for p, why in programs:
            if why:
                print(f"typecheck: {p.name} skipped ({why})")
        runs = [("docs", STRICT + DOCS_RELAX + ["--cache-dir", os.path.join(tmp, "c1")] + checked),
                ("typed user script", STRICT + ["--cache-dir", os.path.join(tmp, "c2"),
                                                str(ROOT / "examples" / "typed_usage.py")])]
        failed = False
        for what, args in runs:
            r = mypy(args, out)
            print(f"typecheck: {what}: {r.stdout.strip().splitlines()[-1] if r.stdout.strip() else r.stderr.strip()}")
            if r.returncode != 0:
                failed = True
                print(r.stdout + r.stderr)
        print(f"typecheck: {len(checked)} documentation pages and examples/typed_usage.py "
              f"{'FAILED' if failed else 'pass mypy --strict'}")
        return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
