"""The torch bridge's forward: pyconvtbc.conv_tbc under autograd, torch_npu's cubeMathType, autocast."""
import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pyconvtbc as pc  # noqa: E402
from pyconvtbc.torch import ConvTBC, _to_numpy, conv_tbc  # noqa: E402

T, B, CIN, COUT, K, PAD = 10, 2, 7, 5, 3, 1


def _tensors(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(*s, generator=g).to(dtype).requires_grad_() for s in ((T, B, CIN), (K, CIN, COUT), (COUT,))]


def _np(t):
    return t.detach().numpy()


@pytest.mark.parametrize("soc, expected", [("ascend910b", 3), ("ascend950", 3), ("ascend910", 1)])
def test_torch_npu_cube_math_type_is_the_chips_default(soc, expected):
    # torch_npu passes USE_HF32 on Atlas A2/A3 (allow_hf32 defaults to true) and ALLOW_FP32_DOWN_PRECISION on
    # the older Atlas training series
    x, w, b = _tensors(1)
    y = conv_tbc(x, w, b, PAD, cube_math_type="torch_npu", soc=soc)
    want = pc.conv_tbc(_np(x), _np(w), _np(b), PAD, cube_math_type=expected, soc=soc)
    np.testing.assert_array_equal(_np(y), want)
    gy = np.ones(want.shape, np.float32)
    y.backward(torch.from_numpy(gy))
    gi, gw, gb = pc.conv_tbc_backward(gy, _np(x), _np(w), _np(b), PAD, cube_math_type=expected, soc=soc,
                                      deterministic=True)
    np.testing.assert_array_equal(x.grad.numpy(), gi)
    if soc == "ascend950":        # always deterministic: gradWeight is repeatable
        np.testing.assert_array_equal(w.grad.numpy(), gw)


@pytest.mark.parametrize("cube", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_forward_is_the_numpy_layers_in_every_mode(cube, dtype):
    x, w, b = _tensors(2, dtype)
    y = conv_tbc(x, w, b, PAD, cube_math_type=cube)
    assert y.dtype == dtype and y.shape == (T + 2 * PAD - K + 1, B, COUT)
    xn, wn, bn = (_to_numpy(t) for t in (x, w, b))        # the same bits as NumPy arrays
    want = pc.conv_tbc(xn, wn, bn, PAD, cube_math_type=cube)
    np.testing.assert_array_equal(y.detach().float().numpy(), want.astype(np.float32))


def test_any_strides_and_the_gradients_flow():
    x, w, b = _tensors(3)
    xs = x.transpose(0, 1).contiguous().transpose(0, 1)          # same values, other strides
    ws = w.permute(2, 1, 0).contiguous().permute(2, 1, 0)
    y1 = conv_tbc(xs, ws, b, PAD)
    y2 = conv_tbc(x, w, b, PAD)
    np.testing.assert_array_equal(_np(y1), _np(y2))
    (y1.sum() + y2.sum()).backward()
    assert x.grad is not None and w.grad is not None and b.grad is not None


def test_autocast_casts_the_operands_first():
    x, w, b = _tensors(4)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = conv_tbc(x, w, b, PAD)
        # torch's own autocast policy for conv_tbc on CPU: a lower-precision op
        assert torch.conv_tbc(x, w, b, PAD).dtype == torch.bfloat16
    assert y.dtype == torch.bfloat16
    xb, wb, bb = (t.detach().to(torch.bfloat16) for t in (x, w, b))
    np.testing.assert_array_equal(y.detach().float().numpy(), conv_tbc(xb, wb, bb, PAD).detach().float().numpy())
    y.float().sum().backward()                    # gradients reach the fp32 leaves through the casts
    assert x.grad.dtype == w.grad.dtype == b.grad.dtype == torch.float32
    # outside the region nothing is cast
    assert conv_tbc(x, w, b, PAD).dtype == torch.float32


def test_forward_checks_at_the_call():
    x, w, b = _tensors(5)
    with pytest.raises(TypeError, match=r"input has dtype torch.float64.*no float64 path.*\.float\(\)"):
        conv_tbc(x.double(), w.double(), b.double(), PAD)
    for name, args in (("input", (x.int(), w, b)), ("weight", (x, w.to(torch.complex64), b)),
                       ("bias", (x, w, b.to(torch.float8_e4m3fn)))):
        with pytest.raises(TypeError, match=f"{name} has dtype") as e:   # named; no float64 hint for these
            conv_tbc(*args, PAD)
        assert "float64" not in str(e.value)
    with pytest.raises(pc.AclnnError) as e:
        conv_tbc(x, w, b, 256)
    assert e.value.status == 161002 and "pad" in str(e.value)
    with pytest.raises(pc.AclnnError) as e:       # T + pad < K: the operator's check (torch accepts it)
        conv_tbc(x[:1], w, b, 1)
    assert "T_in + pad" in str(e.value)
    # pad: any Python or NumPy integer, as the NumPy layer takes; not a bool or a float
    assert torch.equal(conv_tbc(x, w, b, np.int64(PAD)), conv_tbc(x, w, b, PAD))
    for bad in (True, 1.0, "1"):
        with pytest.raises(TypeError, match="pad"):
            conv_tbc(x, w, b, bad)
    assert ConvTBC(np.int64(4), 4, np.int32(3), padding=np.int64(1)).padding == (1,)
    with pytest.raises(pc.AclnnError) as e:       # no promotion: weight must have input's dtype
        conv_tbc(x, w.half(), b, PAD)
    assert "weight" in str(e.value)
    with pytest.raises(ValueError, match="torch_npu"):
        conv_tbc(x, w, b, PAD, cube_math_type="torch-npu-ish")


def test_double_backward_raises():
    x, w, b = _tensors(6)
    y = conv_tbc(x, w, b, PAD)
    (gx,) = torch.autograd.grad(y.pow(2).sum(), x, create_graph=True)
    with pytest.raises(RuntimeError, match="double backward"):
        gx.sum().backward()


@pytest.mark.parametrize("mode", [dict(cube_math_type=0), dict(cube_math_type="torch_npu"),
                                  dict(cube_math_type=2), dict(cube_math_type=3, grad_weight_dtype="hifloat8",
                                                               soc="ascend950")])
def test_a_small_model_trains_in_each_mode(mode):
    torch.manual_seed(0)
    layer = ConvTBC(4, 4, 3, padding=1, **mode)
    target = ConvTBC(4, 4, 3, padding=1)
    x = torch.randn(16, 4, 4)
    with torch.no_grad():
        y_true = torch.conv_tbc(x, target.weight, target.bias + 0.5, 1)
    opt = torch.optim.SGD(layer.parameters(), lr=0.05)
    losses = []
    for _ in range(30):
        opt.zero_grad()
        loss = (layer(x) - y_true).pow(2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.isfinite(losses).all()
    assert losses[-1] < 0.5 * losses[0]
