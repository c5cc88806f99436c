"""The documentation's Python code against the package: every ```python block of README.md and docs/*.md runs,
or, where an HTML comment on the line before marks it, is a listing checked another way:

- no mark: runnable.  A page's runnable blocks run in order as one program (a later block may use what an
  earlier one made), in a fresh interpreter, in a scratch directory;
- ``<!-- code: signatures -->``: call signatures ``name(params) -> result``, one per statement; each name must
  be public (top-level ``pyconvtbc``, or imported by the block's own ``from ... import`` lines) and its
  parameters, their order, the keyword-only marker and the defaults must be the function's own;
- ``<!-- code: sketch -->``: an outline that is not meant to run (it is only parsed for the marks).
"""
import inspect
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import pyconvtbc

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:^<!-- code: ([\w-]+) -->\n)?^```python\n(.*?)^```", re.S | re.M)
KINDS = ("run", "signatures", "sketch")


def blocks(path):
    """[(kind, code, line)] of a page's python blocks."""
    text = path.read_text()
    return [(m.group(1) or "run", m.group(2), text.count("\n", 0, m.start()) + 1) for m in BLOCK.finditer(text)]


def test_every_python_block_is_parsed_and_every_mark_is_known():
    seen = 0
    for p in DOCS:
        text = p.read_text()
        assert text.count("```python\n") == len(blocks(p)), p.name
        for kind, _, line in blocks(p):
            assert kind in KINDS, f"{p.name}:{line}: unknown mark {kind!r}, expected one of {KINDS}"
            seen += 1
    assert seen >= 10   # the docs hold about a dozen python blocks today


RUN_PAGES = [p for p in DOCS if any(k == "run" for k, _, _ in blocks(p))]


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda p: p.name)
def test_the_runnable_blocks_of_a_page_run(page, tmp_path):
    code = "\n".join(f"# ---- {page.name}, line {line}\n{src}" for kind, src, line in blocks(page) if kind == "run")
    for mod in ("torch", "matplotlib"):
        if re.search(rf"^\s*(import|from) {mod}\b", code, re.M):
            pytest.importorskip(mod)
    env = dict(os.environ, PYCONVTBC_NUM_THREADS="2")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env=env)
    assert r.returncode == 0, f"{page.name}: the page's code exited {r.returncode}:\n{r.stderr[-3000:]}"


def _split_top(s):
    """Split on commas outside brackets and quotes."""
    parts, depth, cur, quote = [], 0, "", None
    for ch in s:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "\"'":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
            continue
        cur += ch
    if cur.strip():
        parts.append(cur)
    return [p.strip() for p in parts]


def signatures(code):
    """[(name, function or None, [(param, default text or None, keyword_only)])] of a signatures block (its
    ``from ... import`` statements run first; a signature starts a line, an import's continuation does not)."""
    ns = {}
    for stmt in re.findall(r"^from [\w.]+ import (?:\(.*?\)|[^\n]*)$", code, re.S | re.M):
        exec(stmt, ns)
    body, out = code, []
    for m in re.finditer(r"^(\w+)\(", body, re.M):
        i, depth = m.end(), 1
        while depth:
            depth += {"(": 1, ")": -1}.get(body[i], 0)
            i += 1
        params, kwonly = [], False
        for item in _split_top(body[m.end():i - 1]):
            if item == "*":
                kwonly = True
                continue
            name, _, default = item.partition("=")
            params.append((name.strip(), default.strip() or None, kwonly))
        out.append((m.group(1), ns.get(m.group(1), getattr(pyconvtbc, m.group(1), None)), params))
    return out


SIG_BLOCKS = [(p, line, code) for p in DOCS for kind, code, line in blocks(p) if kind == "signatures"]


@pytest.mark.parametrize("page,line,code", SIG_BLOCKS, ids=[f"{p.name}:{ln}" for p, ln, _ in SIG_BLOCKS])
def test_documented_signatures_are_the_functions_own(page, line, code):
    sigs = signatures(code)
    assert sigs, f"{page.name}:{line}: no signature found"
    for name, fn, params in sigs:
        where = f"{page.name}:{line}: {name}"
        assert fn is not None and callable(fn), f"{where}: not a public function"
        actual = list(inspect.signature(fn).parameters.values())
        assert [p for p, _, _ in params] == [a.name for a in actual], f"{where}: parameters"
        for (pname, default, kwonly), a in zip(params, actual):
            assert kwonly == (a.kind is inspect.Parameter.KEYWORD_ONLY), f"{where}: {pname} keyword-only"
            if default is None:
                assert a.default is inspect.Parameter.empty, f"{where}: {pname} has a default"
                continue
            # "a" | "b" lists the accepted values; the first one is the default
            expected = eval(default.split("|")[0], vars(pyconvtbc))
            assert a.default == expected, f"{where}: {pname} default {a.default!r}, documented {default}"


def test_the_signature_check_catches_a_wrong_listing():
    good = "conv_tbc(input, weight, bias, pad=0, *, cube_math_type=KEEP_DTYPE"
    ((_, fn, params),) = signatures("conv_tbc(input, weight, bias, pad=0, *, cube_math_type=KEEP_DTYPE)\n")
    assert fn is pyconvtbc.conv_tbc and params[4] == ("cube_math_type", "KEEP_DTYPE", True)
    with pytest.raises(AssertionError, match="parameters"):
        test_documented_signatures_are_the_functions_own(Path("x.md"), 1, good + ", soc=None) -> output\n")
    with pytest.raises(AssertionError, match="not a public function"):
        test_documented_signatures_are_the_functions_own(Path("x.md"), 1, "conv_tbc_nope(x) -> y\n")
