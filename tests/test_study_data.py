"""Real operands for a study (.npz, a directory of .npy, .pt, a torch capture) and the CLI's contract
(exit 0 on success; --out / --prefix / sizes refused before any computing)."""
import os
import subprocess
import sys
import time

import numpy as np
import pytest

from pyconvtbc import study


def _arrays(seed=0, T=8, B=2, Cin=2, Cout=3, K=3, pad=1):
    rng = np.random.default_rng(seed)
    return {"grad_output": rng.integers(-4, 5, (T + 2 * pad - K + 1, B, Cout)).astype(np.float32),
            "input": rng.integers(-4, 5, (T, B, Cin)).astype(np.float32),
            "weight": rng.integers(-4, 5, (K, Cin, Cout)).astype(np.float32),
            "bias": rng.integers(-4, 5, (Cout,)).astype(np.float32)}


def _same(loaded, arrays):
    for k, v in arrays.items():
        np.testing.assert_array_equal(loaded[k], v.astype(np.float64))


def test_load_npz_npy_dir_and_pt(tmp_path):
    a = _arrays()
    np.savez(tmp_path / "one.npz", pad=1, **a)
    d = tmp_path / "dir"
    d.mkdir()
    for k, v in a.items():
        np.save(d / f"{k}.npy", v)
    np.save(d / "pad.npy", np.array(1))
    for path in (tmp_path / "one.npz", d):
        ((name, arrays, shape),) = study.load_data(str(path))
        _same(arrays, a)
        assert (shape.T, shape.B, shape.Cin, shape.Cout, shape.K, shape.pad) == (8, 2, 2, 3, 3, 1)
    assert study.load_data(str(d))[0][0] == "dir"


def test_load_pt_one_dict_and_a_list(tmp_path):
    torch = pytest.importorskip("torch")
    a, b = _arrays(0), _arrays(1, pad=0, T=7)
    torch.save({k: torch.from_numpy(v) for k, v in a.items()} | {"pad": 1}, tmp_path / "one.pt")
    torch.save([{**{k: torch.from_numpy(v) for k, v in a.items()}, "pad": 1, "name": "enc.0"},
                {**{k: torch.from_numpy(v) for k, v in b.items()}, "pad": 0, "name": "enc.1"}], tmp_path / "two.pt")
    ((_, arrays, shape),) = study.load_data(str(tmp_path / "one.pt"))
    _same(arrays, a)
    recs = study.load_data(str(tmp_path / "two.pt"))
    assert [r[0] for r in recs] == ["enc.0", "enc.1"] and recs[1][2].pad == 0
    _same(recs[1][1], b)


@pytest.mark.parametrize("make, needle", [
    (lambda p: np.savez(p / "x.npz", input=np.ones((4, 1, 1)), weight=np.ones((3, 1, 1))), "no 'grad_output' array"),
    (lambda p: np.savez(p / "x.npz", grad_output=np.ones((5, 1, 1)), input=np.ones((4, 1, 1)),
                        weight=np.ones((3, 1, 1))), r"expected weight \(K, 1, Cout\) and grad_output \(2, 1, 1\)"),
    (lambda p: np.save(p / "x.npz", np.ones(3)), "not a readable .npz file|holds one array"),
])
def test_bad_files_are_named_errors(tmp_path, make, needle):
    make(tmp_path)
    path = tmp_path / "x.npz"
    if not path.exists():
        path = tmp_path / "x.npz.npy"
        os.rename(path, tmp_path / "x.npz")
        path = tmp_path / "x.npz"
    with pytest.raises(ValueError, match=needle):
        study.load_data(str(path))


def test_cli_runs_on_a_file_and_integer_data_is_exact(tmp_path, capsys):
    d = tmp_path / "dir"
    d.mkdir()
    for k, v in _arrays().items():
        np.save(d / f"{k}.npy", v)
    assert study.cli(["--data", str(d), "--pad", "1", "--no-progress", "--out", str(tmp_path / "o"),
                      "--no-plots"]) == 0
    import json
    rows = json.loads((tmp_path / "o" / "study.json").read_text())["rows"]
    assert len(rows) == 12 and all(r["max_abs"] == 0 for r in rows)     # small integers: exact in every mode


# ---- capture --------------------------------------------------------------------------------------------------
def test_capture_records_each_backward_and_changes_nothing():
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import ConvTBC, _ConvTBCFunction

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = ConvTBC(3, 4, 3, padding=1)
            self.b = ConvTBC(4, 2, 2, padding=0)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    torch.manual_seed(0)
    net = Net()
    x = torch.randn(6, 2, 3)
    g = torch.randn(5, 2, 2)                   # (T_out of b, B, Cout): d(sum(y*g))/dy = g
    net(x).mul(g).sum().backward()
    before = [p.grad.clone() for p in net.parameters()]
    net.zero_grad()
    orig = _ConvTBCFunction.__dict__["backward"]
    with study.capture(net) as cap:
        hidden = torch.relu(net.a(x))
        net.b(hidden).mul(g).sum().backward()
    assert _ConvTBCFunction.__dict__["backward"] is orig          # restored
    for p, q in zip(net.parameters(), before):
        assert torch.equal(p.grad, q)                              # the backward is unchanged
    assert [r["name"] for r in cap.records] == ["b", "a"]          # backward order, named after the layers
    rb, ra = cap.records
    np.testing.assert_array_equal(rb["grad_output"], g.numpy())
    np.testing.assert_array_equal(rb["input"], hidden.detach().numpy())
    np.testing.assert_array_equal(rb["weight"], net.b.weight.detach().numpy())
    assert (rb["pad"], ra["pad"]) == (0, 1) and ra["input"].shape == (6, 2, 3)
    res = cap.study({"cube_math_types": ["KEEP_DTYPE"]}, grads=["gw"])
    assert [r["distribution"] for r in res.rows] == ["b", "a"] and all(r["status"] == 0 for r in res.rows)


def test_capture_save_and_reload(tmp_path):
    torch = pytest.importorskip("torch")
    from pyconvtbc.torch import conv_tbc
    x, w, b = torch.randn(5, 2, 3), torch.randn(3, 3, 4, requires_grad=True), torch.zeros(4, requires_grad=True)
    with study.capture() as cap:
        conv_tbc(x, w, b, 1).sum().backward()
        conv_tbc(x, w, b, 0).sum().backward()
    assert [r["name"] for r in cap.records] == ["conv_tbc#0", "conv_tbc#1"]
    cap.save(str(tmp_path / "l.pt"))
    recs = study.load_data(str(tmp_path / "l.pt"))
    assert [(n, s.pad) for n, _, s in recs] == [("conv_tbc#0", 1), ("conv_tbc#1", 0)]
    np.testing.assert_array_equal(recs[0][1]["grad_output"], np.ones((5, 2, 4)))
    with pytest.raises(RuntimeError, match="another capture is open"):
        with study.capture():
            with study.capture():
                pass


# ---- the command line's contract ---------------------------------------------------------------------------------
def _fail_if_run(*a, **k):
    raise AssertionError("computing started")


@pytest.mark.parametrize("args, needle", [
    (["--prefix", "../x"], "--prefix: '../x' is not a plain file name"),
    (["--prefix", "/tmp/x"], "is not a plain file name"),
    (["--prefix", "a/b"], "is not a plain file name"),
    (["--prefix", ".."], "is not a plain file name"),
    (["--shape", "100000,100000,100,100,3"], r"--shape: .* elements .* expected at most 67108864"),
    (["growth", "--values", "16,100000000"], r"values \(T=100000000\): .* elements"),
    (["--repeat", "0"], "--repeat: 0; expected an integer 1..1000"),
    (["window", "--exponents=5:1"], "--exponents: '5:1'; expected LO <= HI"),
    (["window", "--threshold", "2"], "--threshold: '2'; expected a fraction"),
])
def test_usage_errors_before_any_computing(tmp_path, monkeypatch, capsys, args, needle):
    import re
    from pyconvtbc.study import command
    for name in ("run_study", "error_growth", "scale_window", "reduction_order_spread"):
        monkeypatch.setattr(command, name, _fail_if_run)
    assert study.cli(args + ["--no-progress", "--out", str(tmp_path / "o")]) == 2
    assert re.search(needle, capsys.readouterr().err)


def test_out_that_is_a_file_fails_at_once(tmp_path, monkeypatch, capsys):
    from pyconvtbc.study import command
    f = tmp_path / "file"
    f.write_text("keep me")
    monkeypatch.setattr(command, "run_study", _fail_if_run)
    t = time.monotonic()
    assert study.cli(["--out", str(f)]) == 2
    assert time.monotonic() - t < 1.0
    assert f"--out: '{f}' is an existing file; expected a directory" in capsys.readouterr().err
    assert f.read_text() == "keep me"


def test_every_subcommand_exits_0(tmp_path, capsys):
    small = ["--shape", "6,1,2,2,3,1", "--cube", "KEEP_DTYPE", "--grads", "gw", "--no-progress"]
    for sub, extra in (("modes", []), ("spread", ["--permutations", "2"]), ("growth", ["--values", "6,8"]),
                       ("window", ["--exponents", "0:2"])):
        assert study.cli([sub] + small + extra) == 0, sub
    # and through the module entry point: the process's exit status
    base = [sys.executable, "-m", "pyconvtbc", "study"]
    r = subprocess.run(base + ["window"] + small + ["--exponents", "0:2"], capture_output=True, text=True,
                       cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(base + ["--shape", "1,1,1"], capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2 and "Traceback" not in r.stderr
