"""The study command line's usage errors and edge cases found by the audit of 2027-01 (tmp/audit_study): every bad
value is a one-line exit-2 error naming the option typed, refused before any computing where it can be; nothing
is silently ignored; a failed write names its file; a closed stdout ends the run quietly."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

from pyconvtbc import study
from study_tables import comments
from pyconvtbc.study import command

SMALL = ["--shape", "8,2,4,4,3,1", "--cube", "KEEP_DTYPE", "--grads", "gw", "--no-progress"]
_STUDIES = ("run_study", "error_growth", "scale_window", "reduction_order_spread")


def _fail_if_run(*a, **k):
    raise AssertionError("computing started")


@pytest.fixture
def no_computing(monkeypatch):
    for name in _STUDIES:
        monkeypatch.setattr(command, name, _fail_if_run)


def _err(capsys, args):
    """(exit status, stderr, stdout) of ``study.cli(args)``."""
    rc = study.cli(args)
    cap = capsys.readouterr()
    return rc, cap.err, cap.out


def _one_line_error(err):
    return err.startswith("study: error: ") and err.count("\n") == 1 and "Traceback" not in err \
        and "usage:" not in err


def _npz(path, pad=1):
    rng = np.random.default_rng(0)
    np.savez(path, grad_output=rng.standard_normal((8, 2, 3)), input=rng.standard_normal((8, 2, 2)),
             weight=rng.standard_normal((3, 2, 3)), pad=pad)
    return str(path)


# ---- 1. --threads above the kernels' 1024 ---------------------------------------------------------------------
@pytest.mark.parametrize("sub", [[], ["spread"], ["window"], ["growth"]])
def test_threads_above_1024_is_a_usage_error(sub, capsys, no_computing):
    rc, err, out = _err(capsys, sub + SMALL + ["--threads", "1025"])
    assert rc == 2 and out == ""
    assert "--threads: 1025; expected an integer in [1, 1024]" in err and _one_line_error(err), err


def test_threads_checked_by_the_api():
    with pytest.raises(ValueError, match=r"num_threads: 1025; expected an integer in \[1, 1024\]"):
        study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"]}, num_threads=1025)
    with pytest.raises(ValueError, match=r"num_threads: 0"):
        study.reduction_order_spread("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"]}, num_threads=0)


# ---- 2. --pad: only with a file, and a bad one is named -----------------------------------------------------------
@pytest.mark.parametrize("args", [SMALL + ["--pad", "7"], SMALL + ["--pad", "-5"], ["growth", "--pad", "1"],
                                  ["spread"] + SMALL + ["--pad", "0"]])
def test_pad_with_generated_data_is_refused(args, capsys, no_computing):
    rc, err, _ = _err(capsys, args)
    assert rc == 2 and _one_line_error(err), err
    assert "--pad:" in err and "only applies with --npz or --data" in err and "--shape" in err


def test_a_bad_pad_with_a_file_names_pad(tmp_path, capsys):
    path = _npz(tmp_path / "x.npz")
    for flag in ("--npz", "--data"):
        rc, err, _ = _err(capsys, [flag, path, "--pad", "300", "--no-progress"])
        assert rc == 2 and "--pad: 300; expected an integer in [0, 255]" in err, err
        rc, err, _ = _err(capsys, [flag, path, "--pad", "3", "--cube", "0", "--no-progress"])
        assert rc == 2 and _one_line_error(err), err
        assert err.startswith("study: error: --pad: 3 does not fit") and "need pad 1" in err, err
    # the right pad, given, is accepted
    assert study.cli(["--data", path, "--pad", "1", "--cube", "0", "--grads", "gw", "--no-progress"]) == 0
    with pytest.raises(ValueError, match=r"^pad: 2 does not fit"):
        study.load_data(path, pad=2)


# ---- 3. empty values --------------------------------------------------------------------------------------------
def test_empty_grads_is_refused_like_empty_cube(capsys, no_computing):
    for opt in ("--grads", "--cube"):
        args = [a for a in SMALL if a not in ("--grads", "gw")] + [opt, ""]
        rc, err, _ = _err(capsys, args)
        assert rc == 2 and f"{opt}: '' is empty; expected a comma-separated list" in err, err


def test_empty_out_is_refused_and_nothing_is_written(tmp_path, monkeypatch, capsys, no_computing):
    monkeypatch.chdir(tmp_path)
    rc, err, _ = _err(capsys, SMALL + ["--out", ""])
    assert rc == 2 and "--out: '' is empty; expected a directory path" in err, err
    assert list(tmp_path.iterdir()) == []


def test_empty_out_is_refused_by_train_too(tmp_path, monkeypatch, capsys):
    pytest.importorskip("torch")
    from pyconvtbc.study import train
    monkeypatch.setattr(train, "train_modes", _fail_if_run)
    monkeypatch.chdir(tmp_path)
    rc, err, _ = _err(capsys, ["train", "--steps", "1", "--out", ""])
    assert rc == 2 and "study train: error: --out: '' is empty; expected a directory path" in err, err
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("args, opt", [
    (["--cube", "KEEP_DTYPE,,USE_HF32"], "--cube"), (["--soc", "ascend910b,"], "--soc"),
    (["--scale", "1,,2"], "--scale"), (["--grads", "gi,,gw"], "--grads"), (["--input-dtype", ",float32"],
                                                                          "--input-dtype"),
    (["--shape", "16,4,,16,3,1"], "--shape"), (["window", "--exponents", "1,,2"], "--exponents"),
    (["growth", "--values", "16,,64"], "--values")])
def test_an_empty_item_of_a_list_is_refused(args, opt, capsys, no_computing):
    rc, err, _ = _err(capsys, args + ["--no-progress"])
    assert rc == 2 and _one_line_error(err), err
    assert f"{opt}: " in err and "has an empty item" in err, err


def test_an_empty_item_of_train_modes_is_refused(capsys):
    pytest.importorskip("torch")
    rc, err, _ = _err(capsys, ["train", "--modes", "torch,,keep"])
    assert rc == 2 and "--modes: 'torch,,keep' has an empty item" in err, err


# ---- 4. --permutations: a bound and a size check, before computing -------------------------------------------------
def test_permutations_bounded(capsys, no_computing):
    rc, err, _ = _err(capsys, ["spread"] + SMALL + ["--permutations", "100000000"])
    assert rc == 2 and "--permutations: 100000000; expected an integer in [1, 10000]" in err, err
    with pytest.raises(ValueError, match=r"permutations: 10001; expected an integer in \[1, 10000\]"):
        study.permuted_gradients(np.zeros((2, 1, 1)), np.zeros((2, 1, 1)), np.zeros((1, 1, 1)), permutations=10001)


def test_permutations_that_do_not_fit_are_refused_before_computing(capsys, monkeypatch):
    from pyconvtbc.study import spread
    monkeypatch.setattr(spread, "_sweep", _fail_if_run)
    # the default shape: gradInput has 64*8*64 = 32768 elements, 10000 orders of it would be 2.4 GiB
    rc, err, _ = _err(capsys, ["spread", "--cube", "KEEP_DTYPE", "--permutations", "10000", "--no-progress"])
    assert rc == 2 and _one_line_error(err), err
    assert "--permutations: 10000 orders of gradInput" in err and "expected at most 2048 orders" in err, err


# ---- 5. a failed write names its file --------------------------------------------------------------------------
@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def _full_disk_for(module, name, monkeypatch):
    """``open`` in ``module`` gives a file whose writes fail with ENOSPC (no file name, as from write() or
    close()) when the path ends with ``name``.  (A link to /dev/full would do it, but --out refuses links.)"""
    import builtins

    class Full:
        def __init__(self, fh):
            self.fh = fh

        def write(self, *a):
            raise OSError(28, "No space left on device")

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.fh.close()

    def fake_open(path, *a, **k):
        fh = builtins.open(path, *a, **k)
        return Full(fh) if str(path).endswith(name) else fh
    monkeypatch.setattr(module, "open", fake_open, raising=False)


def test_a_full_disk_names_the_file(tmp_path, capsys, monkeypatch):
    from pyconvtbc.study import report
    out = tmp_path / "o"
    _full_disk_for(report, "study.csv", monkeypatch)
    rc, err, _ = _err(capsys, SMALL + ["--out", str(out), "--no-plots"])
    assert rc == 2 and _one_line_error(err), err
    assert f"writing '{out / 'study.csv'}' failed (No space left on device)" in err and "None" not in err, err


def test_a_failed_plot_write_names_the_plot(tmp_path, capsys, monkeypatch):
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure

    def full(self, *a, **k):
        raise OSError(28, "No space left on device")      # as from write() / close(): no file name
    monkeypatch.setattr(Figure, "savefig", full)
    rc, err, _ = _err(capsys, SMALL + ["--out", str(tmp_path)])
    assert rc == 2 and "plots/study_error_by_mode.png' failed (No space left on device)" in err, err


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_full_disk_names_the_file_in_train(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    from pyconvtbc.study import train
    out = tmp_path / "o"
    _full_disk_for(train, "train.json", monkeypatch)
    rc, err, _ = _err(capsys, ["train", "--steps", "1", "--modes", "torch", "--out", str(out), "--no-plots"])
    assert rc == 2 and f"writing '{out / 'train.json'}' failed" in err and "None" not in err, err


# ---- 6. amax within the compute precision's range; NaN / Inf results flagged --------------------------------------
def test_amax_keeps_grad_output_inside_the_compute_precision():
    res = study.run_study("16,4,16,16,3,1", {"cube_math_types": ["USE_FP16"]}, scales=["amax"], grads=["gw"])
    (r,) = res.rows
    dy_max = np.abs(study.make_data("16,4,16,16,3,1")["grad_output"]).max()
    assert r["dy_scale"] * dy_max <= 0.5 * 65504           # fp16 operands: no overflow
    assert r["n_nan"] == 0 and r["n_inf"] == 0 and r["n_ulp"] == r["n"]
    # KEEP_DTYPE (fp32 operands) still takes the large scale an fp32 gradWeight asks for
    (k,) = study.run_study("16,4,16,16,3,1", {"cube_math_types": ["KEEP_DTYPE"]}, scales=["amax"], grads=["gw"]).rows
    assert k["dy_scale"] > 2.0 ** 100


def test_non_finite_results_are_warned_about(capsys):
    rc, err, out = _err(capsys, SMALL + ["--scale", "1e300"])
    assert rc == 0 and "NaN" in out
    assert "study: warning: 1 of 1 rows have NaN / Inf results that ovf% does not count (1 with no finite" in err
    rc, err, _ = _err(capsys, SMALL)                       # a clean run: no warning
    assert rc == 0 and err == ""


# ---- 7. options that would change nothing ---------------------------------------------------------------------
def test_fixed_order_spread_says_so_in_its_title(capsys):
    rc, _, out = _err(capsys, ["spread"] + SMALL + ["--permutations", "3", "--fixed-order", "--order-source",
                                                    "operator"])
    assert rc == 0 and "spread (3 deterministic calls of the operator)" in out and "from the operator" not in out
    rc, _, out = _err(capsys, ["spread"] + SMALL + ["--permutations", "3", "--fixed-order"])
    assert rc == 0 and "spread (3 runs in one fixed order)" in out


@pytest.mark.parametrize("sub", ["spread", "window", "growth"])
def test_magnitudes_refused_where_there_is_none(sub, capsys, no_computing):
    rc, err, _ = _err(capsys, [sub] + SMALL + ["--magnitudes"])
    assert rc == 2 and f"--magnitudes: {sub} has no magnitude view" in err and _one_line_error(err), err


@pytest.mark.parametrize("extra, opt", [(["--dist", "uniform"], "--dist"), (["--seed", "3"], "--seed")])
def test_dist_and_seed_refused_with_a_file(tmp_path, extra, opt, capsys, no_computing):
    path = _npz(tmp_path / "x.npz")
    for flag in ("--npz", "--data"):
        rc, err, _ = _err(capsys, [flag, path] + extra)
        assert rc == 2 and f"{opt}: the data come from {flag}" in err and _one_line_error(err), err


def test_seed_with_a_file_kept_for_the_spread_model_orders(tmp_path, capsys):
    path = _npz(tmp_path / "x.npz")
    args = ["spread", "--data", path, "--cube", "0", "--grads", "gw", "--permutations", "2", "--no-progress"]
    assert study.cli(args + ["--seed", "3"]) == 0
    rc, err, _ = _err(capsys, args + ["--seed", "3", "--order-source", "operator"])
    assert rc == 2 and "--seed: the data come from --data" in err


# ---- 8. a plot's file name taken by a directory: refused before computing --------------------------------------
@pytest.mark.parametrize("sub, name", [([], "study_magnitudes.png"), ([], "study_ulp_hist_gradWeight.png"),
                                       (["spread"], "spread_spread_vs_error.png"), (["growth"], "growth_growth.png"),
                                       (["window"], "window_window.png")])
def test_a_plot_name_taken_by_a_directory_is_refused_before_computing(tmp_path, sub, name, capsys, no_computing):
    (tmp_path / "plots" / name).mkdir(parents=True)
    rc, err, out = _err(capsys, sub + SMALL + ["--out", str(tmp_path)])
    assert rc == 2 and out == "" and f"plots/{name}' is a directory" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plots"]
    # without plots the directory is in no one's way (computing would start: the fixture says so)
    with pytest.raises(AssertionError, match="computing started"):
        study.cli(sub + SMALL + ["--out", str(tmp_path), "--no-plots"])


def test_train_plot_name_taken_by_a_directory_is_refused_before_training(tmp_path, capsys, monkeypatch):
    pytest.importorskip("torch")
    from pyconvtbc.study import train
    monkeypatch.setattr(train, "train_modes", _fail_if_run)
    (tmp_path / "plots" / "train_loss.png").mkdir(parents=True)
    rc, err, out = _err(capsys, ["train", "--steps", "1", "--out", str(tmp_path)])
    assert rc == 2 and out == "" and "plots/train_loss.png' is a directory" in err, err


# ---- 9. messages name the option typed ----------------------------------------------------------------------------
@pytest.mark.parametrize("args, start", [
    (["--data", "nonexistent.npz"], "--data: 'nonexistent.npz' does not exist"),
    (["spread", "--order-source", "foo"], "--order-source: 'foo' is not a valid order source"),
    (["growth", "--axis", "foo"], "--axis: 'foo' is not a valid size to sweep"),
    (["growth", "--values", "0"], "--values: '0'; expected integers >= 1"),
    (["growth", "--metric", "foo"], "--metric: 'foo' is not a valid metric"),
    (["spread", "--grads", "output"], "--grads: 'output': the forward has one accumulation order"),
    (["window", "--grads", "output"], "--grads: 'output': the forward does not read grad_output"),
    (["growth", "--axis", "K", "--values", "20", "--shape", "8,2,4,4,3,1"],
     "--values (K=20): 'T=8,B=2,Cin=4,Cout=4,K=20,pad=1' gives T_out"),
    (["--shape", "-16,4,16,16,3,1"], "--shape: T=-16 in '-16,4,16,16,3,1'; expected >= 1"),
])
def test_messages_name_the_option_typed(args, start, capsys):
    rc, err, _ = _err(capsys, args + ["--no-progress"])
    assert rc == 2 and _one_line_error(err), err
    assert err.startswith("study: error: " + start), err
    assert "{" not in err                                  # no Python dict


def test_an_empty_data_file_names_data_not_npz(tmp_path, capsys):
    f = tmp_path / "afile"
    f.write_bytes(b"")
    rc, err, _ = _err(capsys, ["--data", str(f)])
    assert rc == 2 and err.startswith(f"study: error: --data: '{f}' is empty"), err


def test_an_unreadable_pt_file_is_one_short_line(tmp_path, capsys):
    pytest.importorskip("torch")
    f = tmp_path / "bad.pt"
    f.write_bytes(b"garbage\n")
    rc, err, _ = _err(capsys, ["--data", str(f)])
    assert rc == 2 and _one_line_error(err), err
    assert "is not a readable torch file" in err and "weights_only" not in err and len(err) < 400, err


def test_negative_looking_values_reach_their_own_check(capsys):
    rc, err, _ = _err(capsys, ["window"] + SMALL + ["--exponents", "-2:1"])    # no '=' needed any more
    assert rc == 0, err
    rc, err, _ = _err(capsys, SMALL + ["--pad", "-1"])
    assert rc == 2 and "--pad: -1" in err


# ---- 10. help ---------------------------------------------------------------------------------------------------
def test_prefix_help_lists_every_default(capsys):
    assert study.cli(["window", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: study for modes, else the sub-command: spread, growth, window)" in text


# ---- 11. stdout closed early -----------------------------------------------------------------------------------
def test_closed_stdout_exits_quietly():
    r, w = os.pipe()
    os.close(r)                                        # the reader is gone before the first write: EPIPE
    p = subprocess.Popen([sys.executable, "-m", "pyconvtbc", "study"] + SMALL, stdout=w, stderr=subprocess.PIPE,
                         text=True)
    os.close(w)
    _, err = p.communicate(timeout=120)
    assert p.returncode == 1 and err == "", err


def test_broken_pipe_inside_the_process(monkeypatch):
    class Closed:
        def write(self, s):
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self):
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Closed())
    assert study.cli(SMALL) == 1


# ---- 12. intervals of non-negative metrics stay non-negative ----------------------------------------------------
def test_intervals_are_cut_at_the_metric_bounds():
    m, lo, hi = study.mean_interval([0.0, 0.0, 0.0, 0.0, 10.0], bounds=(0.0, None))
    assert m == 2.0 and lo == 0.0 and hi > 2 * m
    m, lo, hi = study.mean_interval([1.0, 1.0, 1.0, 0.0], bounds=(0.0, 1.0))
    assert hi == 1.0 and lo < m
    assert study.mean_interval([0.0, 0.0, 10.0])[1] < 0          # unbounded: the plain t-interval


def test_repeated_rows_never_show_a_negative_bound():
    from pyconvtbc.study.repeat import _REPEATED
    res = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE", "USE_FP16"]}, repeat=4)
    for r in res.rows:
        for k in _REPEATED:
            if r.get(f"{k}_lo") is not None:
                assert r[f"{k}_lo"] >= 0, (k, r[f"{k}_lo"])
                if k.startswith("frac_"):
                    assert r[f"{k}_hi"] <= 1
    # an interval that was cut is shown as [lo, hi], not as a symmetric +-
    from pyconvtbc.study.table import _fmt_interval
    row = {"ulp_p99": 54.1, "ulp_p99_lo": 0.0, "ulp_p99_hi": 122.1}
    assert _fmt_interval("ulp_p99", row) == "54.1 [0, 1.2e+02]"
    assert _fmt_interval("ulp_p99", {"ulp_p99": 54.1, "ulp_p99_lo": 40.1, "ulp_p99_hi": 68.1}) == "54.1 ±14"


def test_growth_header_says_when_an_interval_was_cut():
    # the largest ULP error of 3 seeds varies a lot (cancellation): its t-interval would reach below 0
    res = study.error_growth("8,2,4,4,3,1", [8, 16], grid={"cube_math_types": ["KEEP_DTYPE"]}, metric="ulp_max",
                             repeat=3)
    cut = [r for r in res.rows if r["ulp_max_lo"] == 0 and r["ulp_max"] < r["ulp_max_hi"] - r["ulp_max"]]
    assert cut and all(r["ulp_max_lo"] >= 0 for r in res.rows)
    text = res.table()
    assert "[lo, hi]: an interval cut at 0" in " ".join(comments(text)) and re.search(r"\[0, [\d.e+]+\]", text)
    # rel_fro's intervals stay clear of 0 here: the plain header, mean +-half
    res = study.error_growth("8,2,4,4,3,1", [8, 16], grid={"cube_math_types": ["KEEP_DTYPE"]}, grads=["gw"],
                             repeat=3)
    assert "cut at 0" not in res.table() and "±" in res.table()
