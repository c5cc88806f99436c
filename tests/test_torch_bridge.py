"""The torch bridge: pyconvtbc's forward (conv_tbc) and backward (conv_tbc_backward) under autograd."""
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import pyconvtbc as pc  # noqa: E402
from pyconvtbc.torch import ConvTBC, conv_tbc  # noqa: E402
from reference import abs_products_ref, gamma  # noqa: E402

T, B, CIN, COUT, K, PAD = 12, 3, 5, 6, 3, 1


def _tensors(seed=0, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, B, CIN, generator=g).to(dtype)
    w = torch.randn(K, CIN, COUT, generator=g).to(dtype)
    b = torch.randn(COUT, generator=g).to(dtype)
    return [t.requires_grad_() for t in (x, w, b)]


def test_import_pyconvtbc_does_not_import_torch():
    code = "import sys, pyconvtbc, pyconvtbc.study; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_bridge_equals_numpy_layer_and_torch_autograd_keep_dtype():
    x, w, b = _tensors()
    y = conv_tbc(x, w, b, PAD, cube_math_type="KEEP_DTYPE", deterministic=True, num_threads=1)
    # the forward is the NumPy layer's conv_tbc, bit for bit, and within fp32 rounding of torch's
    fwd = pc.conv_tbc(x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), PAD, num_threads=1)
    np.testing.assert_array_equal(y.detach().numpy(), fwd)
    ref = torch.conv_tbc(x.double(), w.double(), b.double(), PAD).detach().numpy()
    absprod = torch.conv_tbc(x.double().abs(), w.double().abs(), b.double().abs(), PAD).detach().numpy()
    assert (np.abs(fwd - ref) <= gamma(K * CIN + 1) * absprod + 1e-45).all()
    gy = torch.randn(y.shape, generator=torch.Generator().manual_seed(7))
    y.backward(gy)
    # 1. the NumPy layer on the same arrays, bit for bit
    gi, gw, gb = pc.conv_tbc_backward(gy.numpy(), x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), PAD,
                                      cube_math_type=0, deterministic=True, num_threads=1)
    np.testing.assert_array_equal(x.grad.numpy(), gi)
    np.testing.assert_array_equal(w.grad.numpy(), gw)
    np.testing.assert_array_equal(b.grad.numpy(), gb)
    # 2. torch's own autograd: both are fp32 sums of fp32 products of the same numbers, so each is within
    #    gamma_n * sum|a*b| of the exact value, and they are within twice that of each other
    x2, w2, b2 = (t.detach().clone().requires_grad_() for t in (x, w, b))
    torch.conv_tbc(x2, w2, b2, PAD).backward(gy)
    agi, agw, agb = abs_products_ref(gy.numpy(), x.detach().numpy(), w.detach().numpy(), PAD)
    T_out = T + 2 * PAD - K + 1
    for ours, theirs, absprod, n in ((x.grad, x2.grad, agi, K * COUT), (w.grad, w2.grad, agw, B * T_out),
                                     (b.grad, b2.grad, agb, B * T_out)):
        bound = 2 * gamma(n) * absprod + 1e-45
        assert (np.abs(ours.numpy().astype(np.float64) - theirs.numpy()) <= bound).all()


def test_bridge_emulates_the_chosen_mode():
    x, w, b = _tensors(1)
    conv_tbc(x, w, b, PAD, cube_math_type="USE_HF32", grad_weight_dtype="hifloat8").sum().backward()
    gy = np.ones((T + 2 * PAD - K + 1, B, COUT), np.float32)
    gi, gw, gb = pc.conv_tbc_backward(gy, x.detach().numpy(), w.detach().numpy(), b.detach().numpy(), PAD,
                                      cube_math_type=3, grad_weight_dtype="hifloat8")
    np.testing.assert_array_equal(x.grad.numpy(), gi)
    np.testing.assert_array_equal(w.grad.numpy(), pc.hif8_decode(gw))     # decoded back to float for torch
    assert w.grad.dtype == torch.float32
    # every value of weight.grad is a HiFloat8 value: encoding it again changes nothing
    g = w.grad.numpy()
    np.testing.assert_array_equal(pc.hif8_decode(pc.hif8_encode(g)), g)


def test_convtbc_module_forward_backward():
    torch.manual_seed(0)
    m = ConvTBC(CIN, COUT, K, padding=PAD, cube_math_type="USE_FP16")
    assert m.weight.shape == (K, CIN, COUT) and m.bias.shape == (COUT,)
    assert (m.bias == 0).all()
    x = torch.randn(T, B, CIN, requires_grad=True)
    y = m(x)
    fwd = pc.conv_tbc(x.detach().numpy(), m.weight.detach().numpy(), m.bias.detach().numpy(), PAD,
                      cube_math_type=2)
    np.testing.assert_array_equal(y.detach().numpy(), fwd)       # the forward is emulated too (through fp16)
    np.testing.assert_array_equal(fwd.astype(np.float16).astype(np.float32), fwd)
    y.pow(2).sum().backward()
    assert m.weight.grad.shape == m.weight.shape and x.grad.shape == x.shape
    # USE_FP16 with FLOAT input: gradInput passes through fp16 (SEMANTICS.md section 3)
    gi = x.grad.numpy()
    np.testing.assert_array_equal(gi.astype(np.float16).astype(np.float32), gi)
    assert "cube_math_type=2" in repr(m)


def test_convtbc_bfloat16():
    m = ConvTBC(CIN, COUT, K, padding=PAD).to(torch.bfloat16)
    x = torch.randn(T, B, CIN).to(torch.bfloat16).requires_grad_()
    m(x).sum().backward()
    assert x.grad.dtype == m.weight.grad.dtype == m.bias.grad.dtype == torch.bfloat16


def test_bad_emulation_keywords():
    x, w, b = _tensors()
    with pytest.raises(TypeError, match=r"unknown emulation keyword\(s\) \['cube'\]"):
        conv_tbc(x, w, b, PAD, cube=3)
    with pytest.raises(ValueError, match=r"cube_math_type is 'FAST'"):
        ConvTBC(2, 2, 3, cube_math_type="FAST")
    y = conv_tbc(x, w, b, PAD, grad_weight_dtype="int8")
    with pytest.raises(pc.AclnnError) as e:
        y.sum().backward()
    assert e.value.status == 161002
