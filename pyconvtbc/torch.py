"""PyTorch bridge: ``torch.conv_tbc`` forward, pyconvtbc's emulated NPU backward.

torch is optional: ``import pyconvtbc`` never imports it; this module does (and raises ImportError with a hint
when it is missing)::

    from pyconvtbc.torch import conv_tbc, ConvTBC
    y = conv_tbc(x, w, b, pad=1, cube_math_type="USE_HF32")        # autograd function
    layer = ConvTBC(16, 32, 3, padding=1, grad_weight_dtype="hifloat8")  # fairseq-style module

The emulation keywords are those of ``pyconvtbc.conv_tbc_backward``: ``cube_math_type`` (0-3 or a name such
as ``"USE_HF32"``), ``grad_weight_dtype``, ``soc``, ``deterministic``, ``num_threads``, ``hf32_rounding``,
``hf32_mantissa_bits``, ``hif8_rounding``, ``saturate``.  An 8-bit ``grad_weight_dtype`` (``"hifloat8"``,
``"float8_e4m3fn"``) is decoded back to the weight's dtype, so ``weight.grad`` holds exactly the values the
NPU's 8-bit gradWeight represents.  Tensors on another device are computed on the CPU and moved back.
The backward is not itself differentiable (no double backward).
"""
from __future__ import annotations

try:
    import torch as _torch
except ImportError as e:  # pragma: no cover - exercised only without torch
    raise ImportError("pyconvtbc.torch needs PyTorch: pip install 'pyconvtbc[torch]' (torch==2.13.0)") from e

import numpy as np

import ml_dtypes

from .api import conv_tbc_backward
from .codecs import hif8_decode
from .enums import CubeMathType

__all__ = ["conv_tbc", "ConvTBC", "EMULATION_KEYWORDS"]

EMULATION_KEYWORDS = ("cube_math_type", "grad_weight_dtype", "soc", "deterministic", "num_threads",
                      "hf32_rounding", "hf32_mantissa_bits", "hif8_rounding", "saturate")


def _check_emulation(emulation):
    """Validated copy of the emulation keywords (names checked; cube_math_type names resolved)."""
    unknown = sorted(set(emulation) - set(EMULATION_KEYWORDS))
    if unknown:
        raise TypeError(f"unknown emulation keyword(s) {unknown}; expected some of {list(EMULATION_KEYWORDS)}")
    out = dict(emulation)
    cube = out.get("cube_math_type", 0)
    if isinstance(cube, str):
        try:
            cube = int(CubeMathType[cube.strip().upper()])
        except KeyError:
            raise ValueError(f"cube_math_type is {cube!r}; expected 0-3 or one of "
                             f"{[m.name for m in CubeMathType]}") from None
    out["cube_math_type"] = cube
    return out


def _to_numpy(t):
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype not in (_torch.float32, _torch.float16):
        raise TypeError(f"conv_tbc: tensor of dtype {t.dtype}; expected torch.float32, float16 or bfloat16")
    return t.numpy()


def _to_torch(a, like):
    """A NumPy result as a tensor of ``like``'s dtype and device (8-bit gradWeight decoded first)."""
    if a.dtype == np.uint8:                                  # HiFloat8 codes
        a = hif8_decode(a)
    elif a.dtype == np.dtype(ml_dtypes.float8_e4m3fn):
        a = a.astype(np.float32)
    if a.dtype == np.dtype(ml_dtypes.bfloat16):
        t = _torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(_torch.bfloat16)
    else:
        t = _torch.from_numpy(np.ascontiguousarray(a))
    # 8-bit values are exact in float16 / bfloat16 / float32, so this cast never rounds them
    return t.to(dtype=like.dtype, device=like.device)


class _ConvTBCFunction(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, pad, emulation):
        ctx.save_for_backward(input, weight, bias)
        ctx.pad = pad
        ctx.emulation = emulation
        return _torch.conv_tbc(input, weight, bias, pad)

    @staticmethod
    @_torch.autograd.function.once_differentiable
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi, gw, gb = conv_tbc_backward(_to_numpy(grad_output), _to_numpy(input), _to_numpy(weight),
                                       _to_numpy(bias), ctx.pad, **ctx.emulation)
        need = ctx.needs_input_grad
        return (_to_torch(gi, input) if need[0] else None, _to_torch(gw, weight) if need[1] else None,
                _to_torch(gb, bias) if need[2] else None, None, None)


def conv_tbc(input, weight, bias, pad=0, **emulation):
    """``torch.conv_tbc(input, weight, bias, pad)`` whose backward is pyconvtbc's emulated NPU backward.

    input (T, B, Cin), weight (K, Cin, Cout), bias (Cout,); ``emulation``: keywords of
    ``pyconvtbc.conv_tbc_backward`` (see the module docstring).  Bad emulation values raise
    ``pyconvtbc.AclnnError`` (a ValueError) from the backward pass, with the operator's message.
    """
    if isinstance(pad, bool) or not isinstance(pad, int):
        raise TypeError(f"pad is {pad!r}; expected an int")
    return _ConvTBCFunction.apply(input, weight, bias, pad, _check_emulation(emulation))


class ConvTBC(_torch.nn.Module):
    """fairseq's ``ConvTBC`` (1-D convolution over (T, B, C) input) with an emulated NPU backward.

    ``ConvTBC(in_channels, out_channels, kernel_size, padding=0, **emulation)``: weight (K, Cin, Cout) with
    Xavier-normal initialisation and a zero bias, as fairseq.  ``emulation`` as for ``conv_tbc``; change it
    later through the ``emulation`` attribute (a dict).
    """

    def __init__(self, in_channels, out_channels, kernel_size, padding=0, **emulation):
        super().__init__()
        for name, v, lo in (("in_channels", in_channels, 1), ("out_channels", out_channels, 1),
                            ("kernel_size", kernel_size, 1), ("padding", padding, 0)):
            if isinstance(v, bool) or not isinstance(v, int) or v < lo:
                raise ValueError(f"{name} is {v!r}; expected an int >= {lo}")
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = (kernel_size,)
        self.padding = (padding,)
        self.emulation = _check_emulation(emulation)
        self.weight = _torch.nn.Parameter(_torch.empty(kernel_size, in_channels, out_channels))
        self.bias = _torch.nn.Parameter(_torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self):
        _torch.nn.init.xavier_normal_(self.weight)
        _torch.nn.init.zeros_(self.bias)

    def conv_tbc(self, input):
        return conv_tbc(input.contiguous(), self.weight, self.bias, self.padding[0], **self.emulation)

    def forward(self, input):
        return self.conv_tbc(input)

    def extra_repr(self):
        emu = ", ".join(f"{k}={v!r}" for k, v in self.emulation.items())
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, padding={self.padding}"
                + (f", {emu}" if emu else ""))
