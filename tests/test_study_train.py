"""The training workflow (``python -m pyconvtbc study train``, ``pyconvtbc.study.train``): a small fairseq-style
ConvTBC model trained in each mode from the same weights on the same batches, its loss curves and step times."""
import csv
import json
import math

import numpy as np
import pytest

from pyconvtbc import study
from pyconvtbc.codecs import hif8_decode, hif8_encode
from pyconvtbc.study import train as tr

torch = pytest.importorskip("torch")


def test_batches_follow_the_rule_and_do_not_depend_on_the_number_of_steps():
    a = tr.make_batches(3, batch=4, length=10, vocab=8, noise=0.0, seed=5)
    b = tr.make_batches(5, batch=4, length=10, vocab=8, noise=0.0, seed=5)
    assert a.shape == (3, 11, 4) and np.array_equal(a, b[:3])
    # noise 0: every token from the third on is the same function of the two before it
    pairs = {}
    for seq in b.transpose(0, 2, 1).reshape(-1, 11):
        for t in range(2, 11):
            assert pairs.setdefault((seq[t - 2], seq[t - 1]), seq[t]) == seq[t]
    assert not np.array_equal(a, tr.make_batches(3, batch=4, length=10, vocab=8, noise=0.0, seed=6))


def test_noise_floor_is_the_entropy_of_the_task():
    # noise 0: only the first target (uniform over the vocabulary) is uncertain
    assert tr._noise_floor(0.0, 16, 32) == pytest.approx(math.log(16) / 32)
    # noise 1: every token uniform
    assert tr._noise_floor(1.0, 16, 32) == pytest.approx(math.log(16))


def test_every_mode_starts_from_the_same_weights_and_the_layers_are_the_right_kind():
    from pyconvtbc.torch import ConvTBC
    ref = tr.build_model("torch").state_dict()
    for mode in tr.TRAIN_MODES:
        m = tr.build_model(mode)
        sd = m.state_dict()
        assert sd.keys() == ref.keys() and all(torch.equal(sd[k], ref[k]) for k in sd)
        conv = m.convs[0]
        assert isinstance(conv, ConvTBC)
        emulation = tr.TRAIN_MODES[mode][0]
        if emulation is None:                          # the reference runs torch.conv_tbc itself
            assert type(conv) is not ConvTBC
        else:
            assert type(conv) is ConvTBC and conv.emulation["num_threads"] == 1
            assert conv.emulation["deterministic"] is True


def test_hif8_mode_gives_hifloat8_weight_gradients_and_bf16_mode_runs_the_operator_in_bf16():
    seq = torch.from_numpy(tr.make_batches(1, batch=4, length=8)[0])
    m = tr.build_model("hif8_gw")
    torch.nn.functional.cross_entropy(m(seq[:-1]).reshape(-1, 16), seq[1:].reshape(-1)).backward()
    g = m.convs[0].weight.grad.numpy()
    assert np.array_equal(hif8_decode(hif8_encode(g)), g) and np.any(g != 0)
    m = tr.build_model("bf16")
    with study.capture(m) as cap:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            out = m(seq[:-1])
        torch.nn.functional.cross_entropy(out.float().reshape(-1, 16), seq[1:].reshape(-1)).backward()
    assert len(cap.records) == 2 and all(r["input"].dtype.name == "bfloat16" for r in cap.records)


def test_training_runs_every_mode_and_the_curves_follow_the_reference():
    res = tr.train_modes(["torch", "KEEP_DTYPE", "USE_HF32", "bf16"], steps=6)
    assert list(res.curves) == ["torch", "KEEP_DTYPE", "USE_HF32", "bf16"]
    for mode, losses in res.curves.items():
        assert len(losses) == 6 and len(res.times[mode]) == 6 and all(t > 0 for t in res.times[mode])
        assert losses[-1] < losses[0] < math.log(16) + 0.5      # it learns, from about log(vocab)
    ref = res.curves["torch"]
    # the first step sees the same weights and batch: the loss differs only by each mode's forward rounding
    # (fp32: a few ulps; HF32: operands to 11 bits, |rel| <= 2^-12 each; bf16: 8 bits, <= 2^-9)
    assert abs(res.curves["KEEP_DTYPE"][0] / ref[0] - 1) < 1e-5
    assert abs(res.curves["USE_HF32"][0] / ref[0] - 1) < 2.0 ** -9
    assert abs(res.curves["bf16"][0] / ref[0] - 1) < 2.0 ** -5
    again = tr.train_modes(["KEEP_DTYPE"], steps=6)
    assert again.curves["KEEP_DTYPE"] == res.curves["KEEP_DTYPE"]          # deterministic: bit for bit
    rows = {r["mode"]: r for r in res.summary_rows()}
    assert rows["torch"]["final_vs_ref"] == 0 and rows["torch"]["max_dev"] == 0
    assert rows["USE_HF32"]["max_dev"] == max(abs(a / b - 1) for a, b in zip(res.curves["USE_HF32"], ref))
    table = res.table()
    assert "vs torch" in table and "ms/step" in table and "bf16" in table
    assert "| mode |" in res.table(markdown=True)


def test_cli_writes_every_step_and_reports_rejected_modes(tmp_path, capsys):
    out = tmp_path / "o"
    assert study.cli(["train", "--steps", "3", "--modes", "torch,keep", "--out", str(out), "--no-plots"]) == 0
    text = capsys.readouterr().out
    assert "KEEP_DTYPE" in text and "wrote 2 files" in text
    with open(out / "train.csv") as fh:
        rows = list(csv.reader(fh))
    assert rows[0] == ["step", "loss[torch]", "loss[KEEP_DTYPE]", "seconds[torch]", "seconds[KEEP_DTYPE]"]
    assert [r[0] for r in rows[1:]] == ["1", "2", "3"]
    data = json.loads((out / "train.json").read_text())
    assert data["meta"]["steps"] == 3 and [float(r[1]) for r in rows[1:]] == data["curves"]["torch"]
    # FLOAT KEEP_DTYPE does not exist on ascend910: an n/a row, not a crash
    assert study.cli(["train", "--steps", "1", "--modes", "torch,keep", "--soc", "ascend910"]) == 0
    assert "n/a (161002)" in capsys.readouterr().out


@pytest.mark.parametrize("args, word", [
    (["--steps", "0"], "--steps"), (["--modes", "fp64"], "--modes"), (["--noise", "1"], "--noise"),
    (["--lr", "-1"], "--lr"), (["--soc", "ascend999"], "--soc"), (["--threads", "0"], "--threads"),
    (["--torch-threads", "0"], "--torch-threads"), (["--prefix", "a/b"], "--prefix")])
def test_cli_bad_input_exits_2_naming_the_option(args, word, capsys):
    assert study.cli(["train"] + args) == 2
    err = capsys.readouterr().err
    assert f"error: {word}" in err
