"""study train --seeds N: per mode the final loss and its deviation from torch over N seeds, as a mean with a
95 % t-interval computed here independently from N separate single-seed runs; the CLI prints the header first
and each row as it finishes."""
import io
import math
from contextlib import redirect_stdout

import numpy as np
import pytest

from pyconvtbc.study import train as tr
from pyconvtbc.study import cli as study_main

torch = pytest.importorskip("torch")
from pyconvtbc.study.train_seeds import train_seeds  # noqa: E402

KW = dict(steps=6, batch=4, length=8, dim=8, layers=1)
T975_DF2 = 4.303          # Student's t, 97.5 %, 2 degrees of freedom


def _ci(v):
    v = np.asarray(v, np.float64)
    half = T975_DF2 * v.std(ddof=1) / math.sqrt(v.size)
    return v.mean(), half


def test_means_and_intervals_over_seeds():
    res = train_seeds(["torch", "hif8_gw"], seeds=3, seed=4, **KW)
    singles = {s: tr.train_modes(["torch", "hif8_gw"], seed=s, **KW).summary_rows() for s in (4, 5, 6)}
    finals = {m: [next(r["final"] for r in singles[s] if r["mode"] == m) for s in (4, 5, 6)]
              for m in ("torch", "hif8_gw")}
    by = {r["mode"]: r for r in res.rows}
    for m in ("torch", "hif8_gw"):
        mean, half = _ci(finals[m])
        assert by[m]["final"] == pytest.approx(mean, rel=1e-12)
        assert (by[m]["final_hi"] - by[m]["final_lo"]) / 2 == pytest.approx(half, rel=1e-9)
    dev = [a / b - 1 for a, b in zip(finals["hif8_gw"], finals["torch"])]     # paired with the same seed
    mean, half = _ci(dev)
    assert by["hif8_gw"]["vs_torch"] == pytest.approx(mean, rel=1e-9, abs=1e-15)
    assert (by["hif8_gw"]["vs_torch_hi"] - by["hif8_gw"]["vs_torch_lo"]) / 2 == pytest.approx(half, rel=1e-9)
    assert by["torch"]["vs_torch"] is None


def test_cli_prints_the_header_first_and_rows_as_they_finish():
    buf = io.StringIO()
    seen = []
    import pyconvtbc.study.train_seeds as ts
    real = ts.train_modes

    def spy(*a, **k):                     # the output so far, at the start of every training run
        seen.append(buf.getvalue())
        return real(*a, **k)
    ts.train_modes = spy
    try:
        with redirect_stdout(buf):
            rc = study_main(["train", "--seeds", "2", "--modes", "torch,KEEP_DTYPE", "--steps", "4", "--batch", "4",
                             "--length", "8", "--dim", "8", "--layers", "1"])
    finally:
        ts.train_modes = real
    assert rc == 0
    lines = buf.getvalue().splitlines()
    head = next(i for i, l in enumerate(lines) if "vs torch (95% CI)" in l)
    assert lines[0].startswith("# training over seeds 0..1") and all(l.startswith("# ") for l in lines[:head])
    assert lines[head + 2].startswith("torch") and lines[head + 3].startswith("KEEP_DTYPE")
    assert seen[0].startswith("# training over seeds")          # the header before the first run
    assert "torch " in seen[2] and "KEEP_DTYPE" not in seen[2]    # torch's row out before KEEP_DTYPE's runs


@pytest.mark.parametrize("args,msg", [(["--seeds", "0"], "--seeds: 0"), (["--seeds", "2", "--markdown"], "--markdown")])
def test_cli_refuses_bad_seeds(args, msg, capsys):
    assert study_main(["train", "--steps", "2", *args]) == 2
    assert msg in capsys.readouterr().err
