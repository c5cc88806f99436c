"""Every line a study sub-command prints fits TABLE_WIDTH (120) characters (issue 39: the tables were 216-226
characters wide), and nothing is lost for it: a wider table is printed as stacked tables that share its row
labels, which read back to the very cells of the one wide table that --width 0 prints."""
import contextlib
import io
import re

import pytest

from pyconvtbc import study
from study_tables import comments, parts, tables

WIDTH = 120                                   # the width docs/studies.md states (table.TABLE_WIDTH)
SHAPE = ["--shape", "8,2,4,4,3,1", "--no-progress"]
TRAIN = ["--steps", "4", "--batch", "4", "--length", "8", "--dim", "8", "--layers", "1", "--no-progress"]

# One command per sub-command, each with a grid that made its table wider than a terminal.
CASES = {
    "modes": ["modes", *SHAPE, "--soc", "all", "--input-dtype", "all", "--grads", "gi,gw,gb", "--magnitudes"],
    "modes_repeat": ["modes", *SHAPE, "--cube", "KEEP_DTYPE,USE_FP16", "--grad-weight-dtype", "same,hifloat8",
                     "--repeat", "2", "--grads", "gw"],
    "spread": ["spread", *SHAPE, "--cube", "KEEP_DTYPE,USE_HF32", "--grad-weight-dtype", "same,hifloat8",
               "--permutations", "3"],
    "growth": ["growth", *SHAPE, "--values", "8,16,32,64", "--repeat", "2"],
    "window": ["window", *SHAPE, "--cube", "KEEP_DTYPE,USE_FP16", "--grad-weight-dtype",
               "float32,bfloat16,hifloat8,float8_e4m3fn", "--exponents=-4:4"],
    "train": ["train", "--modes", "torch,KEEP_DTYPE", *TRAIN],
    "train_seeds": ["train", "--modes", "torch,KEEP_DTYPE", "--seeds", "2", *TRAIN],
}


def _run(argv):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = study.cli(argv)
    assert rc == 0, argv
    return out.getvalue()


def _items(text):
    """The settings the comment lines list (a line continued after '#   ' joined to the one above)."""
    joined = []
    for l in comments(text):
        if l.startswith("#   ") and joined:
            joined[-1] += " " + l[4:]
        else:
            joined.append(l[2:])
    return [p for l in joined for p in l.replace("; ", " | ").split(" | ")]


def _untimed(tabs):
    """The tables with the training's times (ms/step, x torch) masked: two runs never take the same time."""
    timed = re.compile(r"^\d+\.\d+ ms$|^\d+\.\dx$")
    return [[{k: "TIME" if timed.match(v) else v for k, v in r.items()} for r in t] for t in tabs]


@pytest.mark.parametrize("name", list(CASES))
def test_every_line_fits_and_the_stacked_tables_hold_every_cell(name, tmp_path):
    argv = CASES[name]
    if argv[0] == "train":
        pytest.importorskip("torch")
    if name == "modes":                   # the 'wrote N files to DIR: ...' line too
        argv = argv + ["--out", str(tmp_path / ("o" * 40))]
    text = _run(argv)
    wide = [l for l in text.splitlines() if len(l) > WIDTH]
    assert not wide, f"{len(wide)} lines over {WIDTH} characters, the longest {max(map(len, wide))}:\n" + \
        "\n".join(wide[:3])
    one = _run([a for a in CASES[name]] + ["--width", "0"])
    assert len(parts(one)) <= len(parts(text))
    assert _untimed(tables(text)) == _untimed(tables(one))  # every cell, under its heading, in its row
    assert _items(text) == _items(one)                       # every setting of the comment lines


def test_a_wide_table_repeats_narrow_labels_and_numbers_rows_under_wide_ones():
    from pyconvtbc.study.table import TABLE_WIDTH, _render
    assert TABLE_WIDTH == WIDTH
    heads = ["mode", "grad"] + [f"metric {i}" for i in range(20)]
    cells = [["KEEP_DTYPE", "gradWeight"] + [f"{i}.5e-07" for i in range(20)],
             ["USE_FP16", "gradInput"] + ["n/a (161002)"] + [""] * 19]
    text = _render(heads, cells, width=80, keys=2)
    assert max(map(len, text.splitlines())) <= 80
    ps = parts(text)
    assert len(ps) > 1 and all(p[0][:2] == ["mode", "grad"] for p in ps)       # the labels in every part
    assert all(p[1][1][2] == "n/a" for p in ps[1:])                             # a rejected row says so
    assert tables(text) == tables(_render(heads, cells, width=0, keys=2))
    wide = [["ALLOW_FP32_DOWN_PRECISION,USE_HF32", "gradWeight"] + c[2:] for c in cells]
    text = _render(heads, wide, width=80, keys=2)
    ps = parts(text)
    assert all(p[0][0] == "row" for p in ps) and [r[0] for r in ps[-1][1]] == ["1", "2"]
    assert max(map(len, text.splitlines())) <= 80
    assert tables(text) == tables(_render(heads, wide, width=None, keys=2))
    assert _render(heads, cells, markdown=True, width=80).count("\n") == 3     # Markdown: never split


def test_comment_lines_break_between_settings():
    from pyconvtbc.study.table import _comment
    items = [f"setting {i}: value {i}" for i in range(12)]
    lines = _comment(items, 60)
    assert all(len(l) <= 60 and l.startswith("# ") for l in lines) and len(lines) > 1
    assert " | ".join(l[2:] for l in lines) == " | ".join(items)
    assert _comment(items, 0) == ["# " + " | ".join(items)]


def test_width_option_is_checked(capsys):
    assert study.cli(["modes", *SHAPE, "--width", "10"]) == 2
    err = capsys.readouterr().err
    assert "--width: 10" in err and "expected 0 (no limit) or an integer in [40, 100000]" in err
