"""PyTorch bridge: ``conv_tbc`` and ``ConvTBC`` whose forward AND backward are pyconvtbc's emulated NPU operators.

torch is optional: ``import pyconvtbc`` never imports it; this module does (and raises ImportError with a hint
when it is missing)::

    from pyconvtbc.torch import conv_tbc, ConvTBC
    y = conv_tbc(x, w, b, pad=1, cube_math_type="USE_HF32")        # autograd function
    layer = ConvTBC(16, 32, 3, padding=1, cube_math_type="torch_npu", grad_weight_dtype="hifloat8")

The forward runs ``pyconvtbc.conv_tbc`` (CANN's aclnnConvTbc) and the backward ``pyconvtbc.conv_tbc_backward``
(aclnnConvTbcBackward), as torch_npu runs ``torch.conv_tbc`` on the NPU.  The emulation keywords:
``cube_math_type`` (0-3, a name such as ``"USE_HF32"``, or ``"torch_npu"``: what torch_npu passes on the emulated
chip, USE_HF32 on ascend910b / ascend950 and ALLOW_FP32_DOWN_PRECISION on ascend910), ``soc``, ``num_threads``,
``hf32_rounding``, ``hf32_mantissa_bits``, ``hif8_rounding``, ``saturate``, ``accumulation``, ``block_size``
(both passes), and ``grad_weight_dtype``, ``deterministic``, ``order_seed`` (the backward only; the forward is
always deterministic).  An 8-bit ``grad_weight_dtype`` (``"hifloat8"``, ``"float8_e4m3fn"``) is decoded back to
the weight's dtype, so ``weight.grad`` holds exactly the values the NPU's 8-bit gradWeight represents.  Tensors on
another device are computed on the CPU and moved back; tensors of any strides are accepted.  Inside a
``torch.autocast`` region the operands are first cast to the region's dtype, as autocast does for
``torch.conv_tbc`` (and as on the NPU).  ``pad`` (and the rest of the forward's checks) and the tensor dtypes
(float32, float16, bfloat16; not float64) are checked when the forward is called.  The backward is not itself
differentiable: differentiating it (double backward, after ``create_graph=True``) raises RuntimeError.
"""
from __future__ import annotations

try:
    import torch as _torch
except ImportError as e:  # pragma: no cover - exercised only without torch
    from ._hints import TORCH_INSTALL
    raise ImportError(f"pyconvtbc.torch needs PyTorch (tested with 2.13.0): {TORCH_INSTALL}") from e

import numpy as np

import ml_dtypes

from typing import TYPE_CHECKING, Any, Dict, Optional

from ._validation import PAD_MAX
from ._op_conv_tbc import conv_tbc as _np_conv_tbc
from .api import conv_tbc_backward
from . import codecs, formats as _formats
from .enums import CubeMathType
from .status import ACLNN_ERR_PARAM_INVALID, AclnnError, AclnnTypeError, int_value, is_int, safe_repr
from .typing import AccumulationOption, BoolOption, HF32RoundingOption, HiF8RoundingOption, IntOption, Accumulation, GradWeightDtype, HF32Rounding, HiF8Rounding, SocName, TorchCubeMathType

__all__ = ["conv_tbc", "ConvTBC", "EMULATION_KEYWORDS"]

EMULATION_KEYWORDS = ("cube_math_type", "grad_weight_dtype", "soc", "deterministic", "num_threads",
                      "hf32_rounding", "hf32_mantissa_bits", "hif8_rounding", "saturate", "accumulation",
                      "block_size", "order_seed")
BACKWARD_ONLY = ("grad_weight_dtype", "deterministic", "order_seed")
TORCH_NPU = "torch_npu"     # cube_math_type: what torch_npu passes on the emulated chip


def _check_emulation(emulation: Dict[str, Any]) -> Dict[str, Any]:
    """Validated copy of the emulation keywords (names checked; cube_math_type names resolved)."""
    unknown = sorted(set(emulation) - set(EMULATION_KEYWORDS))
    if unknown:
        raise TypeError(f"unknown emulation keyword(s) {unknown}; expected some of {list(EMULATION_KEYWORDS)}")
    out = dict(emulation)
    cube = out.get("cube_math_type", 0)
    if isinstance(cube, str) and cube.strip().lower() == TORCH_NPU:
        cube = TORCH_NPU          # resolved per call, from the emulated chip (see _resolve_cube)
    elif isinstance(cube, str):
        try:
            cube = int(CubeMathType[cube.strip().upper()])
        except KeyError:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"conv_tbc: cube_math_type is {cube!r}; expected 0-3, "
                             f"'torch_npu' or one of {[m.name for m in CubeMathType]}") from None
    out["cube_math_type"] = cube
    return out


def _to_numpy(t):
    t = t.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    if t.dtype == _torch.bfloat16:
        return t.view(_torch.int16).numpy().view(ml_dtypes.bfloat16)
    if t.dtype not in (_torch.float32, _torch.float16):
        raise AclnnTypeError(ACLNN_ERR_PARAM_INVALID, f"conv_tbc: tensor of dtype {t.dtype}; expected torch.float32, "
                             "float16 or bfloat16")
    return t.numpy()


def _to_torch(a, like):
    """A NumPy result as a tensor of ``like``'s dtype and device (8-bit gradWeight decoded first)."""
    if _formats.is_en_hifloat8(a):             # (grad_weight_dtype=en_dtypes.hifloat8): its uint8 codes
        a = a.view(np.uint8)
    if a.dtype.itemsize == 1:
        for t in _formats.types_with_role(_formats.GRAD_WEIGHT):  # an 8-bit gradWeight format (registry)
            if a.dtype == t.storage:
                a = getattr(codecs, t.decode)(a) if t.decode else a.astype(np.float32)
                break
    if a.dtype == _BF16:
        t = _torch.from_numpy(np.ascontiguousarray(a).view(np.int16)).view(_torch.bfloat16)
    else:
        t = _torch.from_numpy(np.ascontiguousarray(a))
    if t.dtype == like.dtype and like.device.type == "cpu":
        return t
    # 8-bit values are exact in float16 / bfloat16 / float32, so this cast never rounds them
    return t.to(dtype=like.dtype, device=like.device)


_BF16 = np.dtype(ml_dtypes.bfloat16)


_DOUBLE_BACKWARD = (b"pyconvtbc.torch.conv_tbc: double backward is not supported: the emulated NPU backward is "
                    b"not differentiable (its gradients were computed outside autograd), so a gradient of them "
                    b"would silently lack the second-order terms; differentiate torch.conv_tbc for that")


def _resolve_cube(emulation: Dict[str, Any]) -> Dict[str, Any]:
    """The keywords with cube_math_type="torch_npu" replaced by the value torch_npu passes on the chip emulated
    now (the soc keyword, else get_soc_version()): USE_HF32 (3) on ascend910b / ascend950 (torch_npu's
    allow_hf32 defaults to true there), ALLOW_FP32_DOWN_PRECISION (1) on ascend910."""
    if emulation.get("cube_math_type") != TORCH_NPU:
        return emulation
    from .profiles import get_profile
    out = dict(emulation)
    out["cube_math_type"] = 1 if get_profile(out.get("soc")).name == "ascend910" else 3
    return out


class _ConvTBCFunction(_torch.autograd.Function):
    @staticmethod
    def forward(ctx, input, weight, bias, pad, emulation):
        emulation = _resolve_cube(emulation)
        ctx.save_for_backward(input, weight, bias)
        ctx.pad = pad
        ctx.emulation = emulation
        fwd = {k: v for k, v in emulation.items() if k not in BACKWARD_ONLY}
        out = _np_conv_tbc(_to_numpy(input), _to_numpy(weight), _to_numpy(bias), pad, **fwd)
        return _to_torch(out, input)

    @staticmethod
    def backward(ctx, grad_output):
        input, weight, bias = ctx.saved_tensors
        gi, gw, gb = conv_tbc_backward(_to_numpy(grad_output), _to_numpy(input), _to_numpy(weight),
                                       _to_numpy(bias), ctx.pad, **ctx.emulation)
        need = ctx.needs_input_grad
        grads = [_to_torch(gi, input) if need[0] else None, _to_torch(gw, weight) if need[1] else None,
                 _to_torch(gb, bias) if need[2] else None]
        # create_graph=True runs this with grad mode on: these gradients then depend on grad_output, input,
        # weight and bias, but not through autograd.  Hand them out behind a node that raises when differentiated
        # (as torch.autograd.function.once_differentiable does), never as silently constant values.
        sources = [t for t in (grad_output, input, weight, bias) if t.requires_grad]
        live = [g for g in grads if g is not None]
        if _torch.is_grad_enabled() and sources and live:
            # the node's inputs include the tensors the gradients depend on, so differentiating a gradient with
            # respect to any of them reaches the node (and raises) instead of reading as "unused"
            err = _torch._C._functions.DelayedError(_DOUBLE_BACKWARD, len(live) + len(sources))
            wrapped = err(*[g.detach().requires_grad_() for g in live], *sources)
            wrapped = list(wrapped) if isinstance(wrapped, (tuple, list)) else [wrapped]
            grads = [wrapped.pop(0) if g is not None else None for g in grads]
        return grads[0], grads[1], grads[2], None, None


_DTYPES = (_torch.float32, _torch.float16, _torch.bfloat16)


def _check_forward(input, weight, bias, pad):
    for name, t in (("input", input), ("weight", weight), ("bias", bias)):
        if not isinstance(t, _torch.Tensor):
            raise AclnnTypeError(ACLNN_ERR_PARAM_INVALID, f"conv_tbc: {name} is a {type(t).__name__}; expected a "
                                 "torch.Tensor")
        if t.dtype not in _DTYPES:   # (a TypeError as before, and the NumPy layer's AclnnError 161002)
            hint = " (the NPU operator has no float64 path: convert with .float())" if t.dtype == _torch.float64 else ""
            raise AclnnTypeError(ACLNN_ERR_PARAM_INVALID, f"conv_tbc: {name} has dtype {t.dtype}; expected "
                                 f"torch.float32, torch.float16 or torch.bfloat16{hint}")
    if not is_int(pad):   # a Python or NumPy integer, as the NumPy and CANN layers take
        raise AclnnTypeError(ACLNN_ERR_PARAM_INVALID, f"conv_tbc: pad is {safe_repr(pad)}; expected an integer in "
                             f"[0, {PAD_MAX}]")
    pad = int_value(pad)
    if not 0 <= pad <= PAD_MAX:
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"conv_tbc: pad is {pad}; expected an integer in [0, {PAD_MAX}]")
    return int(pad)


if TYPE_CHECKING:  # what type checkers see: the emulation keywords by name and type (the same call at run time)
    def conv_tbc(input: _torch.Tensor, weight: _torch.Tensor, bias: _torch.Tensor, pad: int = 0, *,
                 cube_math_type: TorchCubeMathType = 0, grad_weight_dtype: GradWeightDtype = None,
                 soc: Optional[SocName] = None, deterministic: Optional[bool] = None,
                 num_threads: Optional[int] = None, hf32_rounding: Optional[HF32RoundingOption] = None,
                 hf32_mantissa_bits: Optional[IntOption] = None, hif8_rounding: Optional[HiF8RoundingOption] = None,
                 saturate: Optional[BoolOption] = None, accumulation: Optional[AccumulationOption] = None,
                 block_size: Optional[IntOption] = None, order_seed: Optional[IntOption] = None) -> _torch.Tensor: ...


def conv_tbc(input: "_torch.Tensor", weight: "_torch.Tensor", bias: "_torch.Tensor",  # type: ignore[no-redef]
             pad: int = 0, **emulation: Any) -> "_torch.Tensor":
    """``torch.conv_tbc(input, weight, bias, pad)`` as the emulated NPU computes it, both ways.

    The forward is ``pyconvtbc.conv_tbc`` (aclnnConvTbc), the backward ``pyconvtbc.conv_tbc_backward``
    (aclnnConvTbcBackward), with the same emulation keywords.

    Parameters
    ----------
    input : torch.Tensor
        (T, B, Cin), float32, float16 or bfloat16, any strides, any device (both passes run on the CPU).
    weight : torch.Tensor
        (K, Cin, Cout), same dtype as ``input`` (after autocast, inside an autocast region).
    bias : torch.Tensor
        (Cout,), float32, float16 or bfloat16.
    pad : int, optional
        Zero padding at both ends of the time axis, in [0, 255]; T + pad >= K (the operator's check).  Default 0.
    **emulation
        ``cube_math_type`` (0-3, a name such as ``"USE_HF32"``, or ``"torch_npu"``), ``soc``, ``num_threads``,
        ``hf32_rounding``, ``hf32_mantissa_bits``, ``hif8_rounding``, ``saturate``, ``accumulation``,
        ``block_size`` (both passes); ``grad_weight_dtype``, ``deterministic``, ``order_seed`` (backward only).

    Returns
    -------
    torch.Tensor
        (T + 2*pad - K + 1, B, Cout) in input's dtype, from the emulated forward.  Its backward gives
        ``input.grad``, ``weight.grad`` and ``bias.grad`` as the emulated NPU computes them (an 8-bit
        ``grad_weight_dtype`` decoded to the weight's dtype).

    Raises
    ------
    TypeError
        An unknown emulation keyword (a plain TypeError); a non-int ``pad``, a non-tensor or a tensor of another
        dtype (float64): ``pyconvtbc.AclnnTypeError``, status 161002, also an AclnnError (as in the NumPy layer).
    pyconvtbc.AclnnError
        (a ValueError) A bad argument of the forward (``pad`` outside [0, 255], T + pad < K, weight's dtype not
        input's, a ``cube_math_type`` name that does not exist, a bad emulation value: status 161002), here; a bad
        backward-only value from the backward pass.
    RuntimeError
        From a double backward (differentiating the gradients after ``create_graph=True``): not supported.
    """
    emulation = _check_emulation(emulation)
    pad = _check_forward(input, weight, bias, pad)
    input, weight, bias = _autocast(input, weight, bias)
    return _ConvTBCFunction.apply(input, weight, bias, pad, emulation)


def _autocast(*tensors):
    """Inside a torch.autocast region for the tensors' device type, cast them to the region's dtype, as autocast
    does for torch.conv_tbc (a lower-precision op on CPU and CUDA): the NPU then computes in that dtype."""
    device = tensors[0].device.type
    try:
        if not _torch.is_autocast_enabled(device):
            return tensors
        dtype = _torch.get_autocast_dtype(device)
    except (RuntimeError, TypeError, AttributeError):  # a device type autocast does not know
        return tensors
    return tuple(t.to(dtype) if t.is_floating_point() and t.dtype != dtype else t for t in tensors)


class ConvTBC(_torch.nn.Module):
    """fairseq's ``ConvTBC`` (1-D convolution over (T, B, C) input), forward and backward emulated as on the NPU.

    Weight (K, Cin, Cout) with Xavier-normal initialisation and a zero bias, as fairseq.

    Parameters
    ----------
    in_channels : int
        Cin, >= 1.
    out_channels : int
        Cout, >= 1.
    kernel_size : int
        K, >= 1.
    padding : int, optional
        Zero padding at both ends of the time axis, in [0, 255] (checked at the forward call).  Default 0.
    **emulation
        As for ``conv_tbc``; change them later through the ``emulation`` attribute (a dict).

    Raises
    ------
    pyconvtbc.AclnnError
        (a ValueError, status 161002) A size out of range, or a ``cube_math_type`` name that does not exist; a size
        that is not an int raises ``pyconvtbc.AclnnTypeError`` (also a TypeError).
    TypeError
        An unknown emulation keyword.
    """

    if TYPE_CHECKING:  # as for conv_tbc: the emulation keywords by name and type
        def __init__(self, in_channels: int, out_channels: int, kernel_size: int, padding: int = 0, *,
                     cube_math_type: TorchCubeMathType = 0, grad_weight_dtype: GradWeightDtype = None,
                     soc: Optional[SocName] = None, deterministic: Optional[bool] = None,
                     num_threads: Optional[int] = None, hf32_rounding: Optional[HF32RoundingOption] = None,
                     hf32_mantissa_bits: Optional[IntOption] = None, hif8_rounding: Optional[HiF8RoundingOption] = None,
                     saturate: Optional[BoolOption] = None, accumulation: Optional[AccumulationOption] = None,
                     block_size: Optional[IntOption] = None, order_seed: Optional[IntOption] = None) -> None: ...

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int,  # type: ignore[no-redef]
                 padding: int = 0, **emulation: Any) -> None:
        super().__init__()
        for name, v, lo in (("in_channels", in_channels, 1), ("out_channels", out_channels, 1),
                            ("kernel_size", kernel_size, 1), ("padding", padding, 0)):
            if not is_int(v) or int_value(v) < lo:
                cls = AclnnError if is_int(v) else AclnnTypeError     # (both ValueErrors, as before)
                raise cls(ACLNN_ERR_PARAM_INVALID, f"ConvTBC: {name} is {safe_repr(v)}; expected an int >= {lo}")
        in_channels, out_channels, kernel_size, padding = (int_value(v) for v in (in_channels, out_channels,
                                                                                    kernel_size, padding))
        self.in_channels = in_channels
        self.out_channels = out_channels
        self.kernel_size = (kernel_size,)
        self.padding = (padding,)
        self.emulation = _check_emulation(emulation)
        self.weight = _torch.nn.Parameter(_torch.empty(kernel_size, in_channels, out_channels))
        self.bias = _torch.nn.Parameter(_torch.empty(out_channels))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Xavier-normal weight, zero bias (fairseq's initialisation)."""
        _torch.nn.init.xavier_normal_(self.weight)
        _torch.nn.init.zeros_(self.bias)

    def conv_tbc(self, input: "_torch.Tensor") -> "_torch.Tensor":
        """``conv_tbc(input, self.weight, self.bias, padding, **self.emulation)``; see ``conv_tbc``."""
        return conv_tbc(input, self.weight, self.bias, self.padding[0], **self.emulation)

    def forward(self, input: "_torch.Tensor") -> "_torch.Tensor":
        """input (T, B, Cin) -> (T + 2*padding - K + 1, B, Cout).  Raises as ``conv_tbc``."""
        return self.conv_tbc(input)

    def extra_repr(self) -> str:
        emu = ", ".join(f"{k}={v!r}" for k, v in self.emulation.items())
        return (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, padding={self.padding}"
                + (f", {emu}" if emu else ""))
