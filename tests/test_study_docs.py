"""docs/studies.md cannot go stale: every generated block is what its workflow prints now, and every figure the
page shows is produced by docs/make_studies.py."""
import os
import re

import pytest

from conftest import load_repo_module
from study_tables import tables

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _generator():
    return load_repo_module("docs/make_studies.py")


def test_every_figure_and_block_of_the_page_has_a_producer():
    gen = _generator()
    with open(gen.PAGE) as fh:
        page = fh.read()
    assert set(gen.page_blocks(page)) == set(gen.BLOCKS)
    shown = set(re.findall(r"!\[[^\]]*\]\(img/([^)]+)\)", page))
    produced = {dst for _, _, figs, _ in gen.BLOCKS.values() for dst in figs.values()}
    assert shown and shown <= produced, shown - produced
    # no console block outside the generated ones
    outside = re.sub(r"<!-- generated: (\w+) -->.*?<!-- end: \1 -->", "", page, flags=re.S)
    assert "```console" not in outside and "```text" not in outside


def test_generated_blocks_match_what_the_workflows_print():
    gen = _generator()
    names = [n for n in gen.BLOCKS if n not in gen._TIMED]
    diffs, skipped = gen.check(names)
    assert not diffs, "docs/studies.md is stale (run python docs/make_studies.py):\n" + "\n".join(diffs)
    needs = {m for n in skipped for m in gen.BLOCKS[n][3]}
    assert all(gen._available(m) is False for m in needs)


@pytest.mark.slow
def test_training_example_block_matches_its_script():
    gen = _generator()
    diffs, skipped = gen.check(list(gen._TIMED))
    if skipped:
        pytest.skip("needs torch and matplotlib")
    assert not diffs, "\n".join(diffs)


def test_the_22_bit_what_if_sentence_quotes_its_tables():
    """§2 once said "at 22 bits the error is KEEP_DTYPE's" while its own table showed 1.75 times that: the
    sentence now quotes the two tables' numbers, and they must be the tables' (fails when a table moves)."""
    gen = _generator()
    with open(gen.PAGE) as fh:
        page = fh.read()
    blocks = gen.page_blocks(page)
    row22 = next(r for r in tables(blocks["hf32_whatif"])[0] if r["hf32 bits"] == "22 (what-if)")
    keep = next(r for r in tables(blocks["modes"])[0]
                if r["cubeMathType"] == "KEEP_DTYPE" and "ascend910b" in r["soc"] and r["grad"] == "gradWeight")
    prose = page[page.index("<!-- end: hf32_whatif -->"):page.index("## 3. 8-bit gradWeight")]
    prose = " ".join(prose.split())
    assert "the error is KEEP_DTYPE's" not in prose
    rel22, med22 = row22["rel Frob"], row22["ULP med"]
    relk, medk = keep["rel Frob"], keep["ULP med"]
    assert f"`rel Frob` {rel22} against {relk}" in prose, (rel22, relk, prose)
    assert f"`ULP med` {med22} against {medk}" in prose, (med22, medk, prose)
    assert float(rel22) > float(relk)          # "still above it"
