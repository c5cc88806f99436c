"""``python -m pyconvtbc study`` end to end on small grids, writing every output file."""
import csv
import json
import subprocess
import sys

import numpy as np
import pytest

from pyconvtbc import study

SMALL = ["--shape", "8,2,4,4,3,1", "--no-progress"]


def _have_matplotlib():
    try:
        import matplotlib  # noqa: F401
        return True
    except ImportError:
        return False


def _is_png(path):
    with open(path, "rb") as fh:
        return fh.read(8) == b"\x89PNG\r\n\x1a\n"


def test_modes_writes_every_output(tmp_path, capsys):
    out = tmp_path / "o"
    rc = study.cli(SMALL + ["--soc", "ascend910b,ascend910", "--cube", "all", "--out", str(out)])
    assert rc == 0
    text = capsys.readouterr().out
    # 2 SoCs x 4 cubeMathTypes x 3 gradients; on ascend910 FLOAT KEEP_DTYPE and USE_HF32 are rejected
    with open(out / "study.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24
    bad = {(r["soc"], r["cube_math_type"]) for r in rows if r["status"] == "161002"}
    assert bad == {("ascend910", "KEEP_DTYPE"), ("ascend910", "USE_HF32")}
    assert sum(r["status"] == "161002" for r in rows) == 6
    assert all(r["ulp_max"] == "" for r in rows if r["status"] == "161002")
    assert all(float(r["rel_fro"]) >= 0 for r in rows if r["status"] == "0")
    doc = json.loads((out / "study.json").read_text())
    assert doc["kind"] == "modes" and len(doc["rows"]) == 24
    md = (out / "study.md").read_text()
    assert "n/a (161002)" in md and "| cubeMathType |" in md
    assert "n/a (161002)" in text and "USE_HF32" in text
    plots = sorted(p.name for p in (out / "plots").glob("*.png")) if (out / "plots").exists() else []
    if _have_matplotlib():
        assert plots == ["study_error_by_mode.png", "study_magnitudes.png", "study_ulp_hist_gradBias.png",
                         "study_ulp_hist_gradInput.png", "study_ulp_hist_gradWeight.png"]
        assert all(_is_png(out / "plots" / p) for p in plots)
        assert "plots/study_error_by_mode.png" in md
    else:
        assert plots == []


def test_plots_skipped_cleanly_without_matplotlib(tmp_path, capsys, monkeypatch):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "matplotlib", None)      # import matplotlib -> ImportError
    rc = study.cli(SMALL + ["--cube", "KEEP_DTYPE", "--out", str(tmp_path)])
    assert rc == 0
    assert "plots skipped: matplotlib is not installed" in capsys.readouterr().out
    assert {p.name for p in tmp_path.iterdir()} == {"study.csv", "study.json", "study.md"}


def test_npz_integer_data_is_exact_in_every_mode(tmp_path, capsys):
    # small integers: operands exact in HF32 / FP16, products and sums exact in fp32 -> zero error everywhere
    rng = np.random.default_rng(0)
    path = tmp_path / "case.npz"
    np.savez(path, grad_output=rng.integers(-4, 5, (8, 2, 3)).astype(np.float32),
             input=rng.integers(-4, 5, (8, 2, 2)).astype(np.float32),
             weight=rng.integers(-4, 5, (3, 2, 3)).astype(np.float32), pad=1)
    rc = study.cli(["--npz", str(path), "--no-progress", "--out", str(tmp_path / "o"), "--no-plots"])
    assert rc == 0
    rows = json.loads((tmp_path / "o" / "study.json").read_text())["rows"]
    assert len(rows) == 12
    assert all(r["max_abs"] == 0 and r["ulp_max"] == 0 for r in rows)
    assert rows[0]["T"] == 8 and rows[0]["pad"] == 1


def test_spread_and_growth_write_their_files(tmp_path, capsys):
    rc = study.cli(["spread", "--shape", "32,2,3,3,3,1", "--cube", "KEEP_DTYPE,USE_HF32", "--permutations", "4",
                    "--dist", "lognormal:2", "--no-progress", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "spread.json").read_text())
    assert len(doc["rows"]) == 4 and all(r["permutations"] == 4 for r in doc["rows"])
    rc = study.cli(["growth", "--shape", "8,2,3,3,3,1", "--values", "8,32", "--cube", "KEEP_DTYPE", "--grads", "gw",
                    "--no-progress", "--out", str(tmp_path)])
    assert rc == 0
    doc = json.loads((tmp_path / "growth.json").read_text())
    assert [r["reduction_length"] for r in doc["rows"]] == [2 * 8, 2 * 32]    # B * T_out, T_out = T
    for name in ("spread.csv", "spread.md", "growth.csv", "growth.md"):
        assert (tmp_path / name).stat().st_size > 0
    if _have_matplotlib():
        assert _is_png(tmp_path / "plots" / "spread_spread_vs_error.png")
        assert _is_png(tmp_path / "plots" / "growth_growth.png")
    text = capsys.readouterr().out
    assert "T=8" in text and "T=32" in text and "slope" in text


@pytest.mark.parametrize("args, needle", [
    (["--cube", "FAST"], r"--cube: 'FAST' is not a cubeMathType; expected one of KEEP_DTYPE"),
    (["--soc", "ascend999"], r"--soc: 'ascend999' is not a valid SoC profile; expected one of ascend910b"),
    (["--shape", "8,2,4"], r"--shape: '8,2,4' has 3 sizes; expected T,B,Cin,Cout,K"),
    (["--scale", "0"], r"--scale: '0' is not a scale; expected a finite number > 0"),
    (["--grad-weight-dtype", "int8"], r"--grad-weight-dtype: 'int8' is not a valid gradWeight dtype"),
    (["--saturate", "maybe"], r"--saturate: 'maybe' is not a boolean"),
    (["--hf32-mantissa-bits", "23"], r"--hf32-mantissa-bits: '23' is not an HF32 mantissa width"),
    (["growth", "--axis", "Q"], r"axis: 'Q' is not a valid size to sweep; expected one of T, B, Cin, Cout, K"),
    (["--npz", "/nonexistent.npz"], r"npz: '/nonexistent.npz' is not a file"),
    (["growth", "--scale", "all"], r"--scale: 'all' names no scale; expected positive numbers"),
])
def test_bad_input_is_a_named_error(args, needle, capsys):
    import re
    assert study.cli(args + ["--no-progress"]) == 2
    err = capsys.readouterr().err
    assert re.search(needle, err), err


def test_unknown_option_and_help(capsys):
    assert study.cli(["--frobnicate"]) == 2
    assert study.cli(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("modes", "spread", "growth", "examples:"):
        assert word in out
    assert study.cli(["modes", "--help"]) == 0
    assert "--grad-weight-dtype" in capsys.readouterr().out


def test_progress_bar_drawn_on_stderr():
    import io
    buf = io.StringIO()
    bar = study._Progress(4, "study", enabled=True, delay=0.0, stream=buf)
    for _ in range(4):
        bar.update()
    bar.close()
    assert "4/4" in buf.getvalue() and "#" * 30 in buf.getvalue()
    quiet = io.StringIO()
    bar = study._Progress(4, "study", enabled="auto", delay=0.0, stream=quiet)   # not a terminal: silent
    bar.update()
    bar.close()
    assert quiet.getvalue() == ""


def test_module_entry_point():
    r = subprocess.run([sys.executable, "-m", "pyconvtbc", "study", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "python -m pyconvtbc study" in r.stdout


# ---- found by the review of 2026-12-05 ------------------------------------------------------------------------
@pytest.mark.parametrize("flag", ["--npz", "--data"])
def test_empty_or_junk_data_file_is_a_usage_error(tmp_path, flag, capsys):
    empty, junk = tmp_path / "empty.npz", tmp_path / "junk.npz"
    empty.write_bytes(b"")
    junk.write_bytes(b"not numpy at all\n" * 4)
    for path, why in ((empty, "is empty or truncated"), (junk, "not a NumPy file")):
        assert study.cli([flag, str(path), "--cube", "KEEP_DTYPE", "--no-progress"]) == 2
        err = capsys.readouterr().err
        assert why in err and "Traceback" not in err, err


def test_output_names_taken_are_refused_before_computing(tmp_path, capsys):
    (tmp_path / "o1").mkdir()
    (tmp_path / "o1" / "plots").write_text("a file where the plots directory goes")
    (tmp_path / "o2" / "study.csv").mkdir(parents=True)
    for out, needle in ((tmp_path / "o1", "plots' is an existing file"),
                        (tmp_path / "o2", "study.csv' is a directory")):
        assert study.cli(SMALL + ["--cube", "KEEP_DTYPE", "--out", str(out)]) == 2
        cap = capsys.readouterr()
        assert needle in cap.err and cap.out == "", cap      # refused before any computing: no table printed
    assert sorted(p.name for p in (tmp_path / "o1").iterdir()) == ["plots"]


def test_a_write_that_fails_after_computing_is_a_usage_error(tmp_path, capsys, monkeypatch):
    from pyconvtbc.study import report

    def full_disk(self, path):
        raise OSError(28, "No space left on device", path)
    monkeypatch.setattr(report.StudyResult, "to_json", full_disk)
    assert study.cli(SMALL + ["--cube", "KEEP_DTYPE", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "No space left on device" in err and "study.json" in err and "Traceback" not in err, err


def test_markdown_tables_escape_bars_in_their_cells():
    """'max |x|' and 'max |dev|' headers: a Markdown table needs the bars escaped, or it gains columns and
    stops being a table."""
    from pyconvtbc.study.table import _render
    text = _render(["tensor", "max |x|"], [["dy", "|1|"]], markdown=True)
    head, sep, row = text.splitlines()
    bars = lambda line: len(line.replace("\\|", "")) - len(line.replace("\\|", "").replace("|", ""))  # noqa: E731
    assert bars(head) == bars(sep) == bars(row) == 3
    assert head == "| tensor | max \\|x\\| |"
