"""study.capture under a bf16 autocast region keeps what the layer saw: bfloat16 operands (in the records, in a
saved .pt, and as the default input dtype of cap.study) and the qualified name of the module that made the
call (issue 39)."""
import numpy as np
import pytest

from pyconvtbc import study

torch = pytest.importorskip("torch")


def _net():
    from pyconvtbc.torch import ConvTBC

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.convs = torch.nn.ModuleList([ConvTBC(4, 4, 3, padding=1), ConvTBC(4, 2, 3, padding=1)])

        def forward(self, x):
            return self.convs[1](torch.relu(self.convs[0](x)))
    torch.manual_seed(0)
    return Net()


def test_bf16_autocast_capture_keeps_dtype_and_qualified_names(tmp_path):
    from pyconvtbc.torch import _ConvTBCFunction
    net = _net()
    x = torch.randn(6, 2, 4)
    fwd, bwd = _ConvTBCFunction.__dict__["forward"], _ConvTBCFunction.__dict__["backward"]
    with study.capture(net) as cap:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            y = net(x)
        y.float().sum().backward()
    assert _ConvTBCFunction.__dict__["forward"] is fwd and _ConvTBCFunction.__dict__["backward"] is bwd
    assert [r["name"] for r in cap.records] == ["convs.1", "convs.0"]            # was conv_tbc#0, conv_tbc#1
    assert all(r["dtype"] == "bfloat16" for r in cap.records)
    assert all(r[k].dtype.name == "bfloat16" for r in cap.records for k in ("grad_output", "input", "weight"))
    path = str(tmp_path / "l.pt")
    cap.save(path)
    saved = torch.load(path, weights_only=True)
    assert [t["input"].dtype for t in saved] == [torch.bfloat16, torch.bfloat16]     # was float32
    assert [t["dtype"] for t in saved] == ["bfloat16", "bfloat16"]
    assert [n for n, _, _ in study.load_data(path)] == ["convs.1", "convs.0"]
    res = cap.study({"cube_math_types": ["KEEP_DTYPE"]}, grads=["gw"])
    assert {r["input_dtype"] for r in res.rows} == {"bfloat16"}


def test_fp32_capture_records_float32_and_the_names():
    net = _net()
    with study.capture(net) as cap:
        net(torch.randn(6, 2, 4)).sum().backward()
    assert [(r["name"], r["dtype"]) for r in cap.records] == [("convs.1", "float32"), ("convs.0", "float32")]
