"""``study --out DIR`` keeps earlier results and never writes through a symbolic link (docs/studies.md,
"Outputs"): files an earlier run left are refused before any computing unless ``--force``; a link where a
result goes is refused, or with ``--force`` replaced by the file (its target untouched).

Before, a second run silently overwrote the first one's files and followed a link planted in DIR, overwriting
the file it pointed to.
"""
import os

import pytest

from pyconvtbc import study

SMALL = ["--shape", "8,2,4,4,3,1", "--no-progress", "--cube", "KEEP_DTYPE", "--no-plots"]


def test_second_run_into_the_same_directory_is_refused_unless_forced(tmp_path, capsys):
    out = tmp_path / "o"
    assert study.cli(SMALL + ["--out", str(out)]) == 0
    capsys.readouterr()
    first = (out / "study.json").read_text()
    (out / "study.json").write_text("the first run's results, edited")
    assert study.cli(SMALL + ["--seed", "7", "--out", str(out)]) == 2
    cap = capsys.readouterr()
    assert "study.csv' exists" in cap.err and "--force" in cap.err and cap.out == "", cap   # before computing
    assert (out / "study.json").read_text() == "the first run's results, edited"
    assert study.cli(SMALL + ["--seed", "7", "--out", str(out), "--force"]) == 0
    assert (out / "study.json").read_text() not in ("the first run's results, edited", first)
    assert study.cli(SMALL + ["--out", str(out), "--prefix", "other"]) == 0    # another prefix: fresh names


@pytest.mark.parametrize("force", [False, True])
def test_a_link_planted_where_a_result_goes_is_never_written_through(tmp_path, capsys, force):
    out = tmp_path / "o"
    out.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    os.symlink(victim, out / "study.md")
    rc = study.cli(SMALL + ["--out", str(out)] + (["--force"] if force else []))
    cap = capsys.readouterr()
    assert victim.read_text() == "precious"
    if force:
        assert rc == 0 and not os.path.islink(out / "study.md") and (out / "study.md").read_text().startswith("#")
    else:
        assert rc == 2 and "study.md' is a symbolic link" in cap.err and cap.out == "", cap
        assert os.path.islink(out / "study.md")


def test_a_link_planted_after_the_check_is_not_followed(tmp_path, capsys, monkeypatch):
    """The targets are checked again right before writing (a run can take minutes)."""
    from pyconvtbc.study import report
    out = tmp_path / "o"
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    # the table is printed after the computing, before the files are written: plant the link then
    monkeypatch.setattr(report.StudyResult, "table", lambda self, **kw: os.symlink(victim, out / "study.json") or "")
    assert study.cli(SMALL + ["--out", str(out)]) == 2
    assert "study.json' is a symbolic link" in capsys.readouterr().err
    assert victim.read_text() == "precious"


def test_train_refuses_earlier_results_too(tmp_path, capsys):
    pytest.importorskip("torch")
    out = tmp_path / "t"
    out.mkdir()
    (out / "train.csv").write_text("earlier")
    assert study.cli(["train", "--steps", "1", "--modes", "torch", "--out", str(out), "--no-plots"]) == 2
    assert "train.csv' exists" in capsys.readouterr().err
    assert (out / "train.csv").read_text() == "earlier"
