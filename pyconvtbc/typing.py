"""Types of pyconvtbc's string options and arrays, for annotations (as ``numpy.typing`` is for NumPy's).

Every string option is a ``Literal`` of the names the call accepts, so a type checker flags a misspelling
(``soc="ascend91Ob"``, ``accumulation="seq"``) before the call refuses it at run time.  A name kept in a
variable must be annotated with the alias (``soc: SocName = "ascend950"``), or a type checker widens it to
``str``.  The calls also accept other spellings at run time (``cube_math_type`` in any case, ``soc`` in upper
case): the Literals list the spellings the documentation uses.  tests/test_typing.py checks that each Literal
holds exactly the names the run-time checks accept.
"""
from typing import Any, Literal, Optional, Type, TypedDict, Union

import numpy as np
from numpy.typing import NDArray

__all__ = ["SocName", "Accumulation", "HF32Rounding", "HiF8Rounding", "CubeMathTypeName", "CubeMathTypeLike",
           "TorchCubeMathType", "GradWeightDtypeName", "GradWeightDtype", "Array", "EmulationOptions"]

SocName = Literal["ascend910b", "ascend950", "ascend910"]
"""The emulated chip (``soc=``, ``set_soc_version``)."""

Accumulation = Literal["cube", "cube_wide", "cube_rz", "sequential"]
"""How the fp32 sums are formed (``accumulation=``)."""

HF32Rounding = Literal["half_away", "nearest_even"]
"""Rounding of fp32 operands to HF32 (``hf32_rounding=``)."""

HiF8Rounding = Literal["ta", "hybrid"]
"""Rounding to HiFloat8 (``hif8_rounding=``, ``hif8_encode(rounding=)``)."""

CubeMathTypeName = Literal["KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32",
                           "keep_dtype", "allow_fp32_down_precision", "use_fp16", "use_hf32"]
"""A cubeMathType by name (the NumPy layer and the torch bridge take names in any case)."""

CubeMathTypeLike = Union[int, CubeMathTypeName]
"""``cube_math_type=``: 0-3 (``KEEP_DTYPE`` ... ``USE_HF32``, the ``CubeMathType`` members) or a name."""

TorchCubeMathType = Union[int, CubeMathTypeName, Literal["torch_npu"]]
"""The torch bridge's ``cube_math_type=``: as ``CubeMathTypeLike``, or ``"torch_npu"``."""

GradWeightDtypeName = Literal["hifloat8", "float8_e4m3fn", "float32", "float16", "bfloat16"]
"""``grad_weight_dtype=`` by name (weight's own dtype, or one of the two 8-bit formats)."""

GradWeightDtype = Optional[Union[GradWeightDtypeName, int, "np.dtype[Any]", Type[Any]]]
"""``grad_weight_dtype=``: None (weight's dtype), a name, an ``aclDataType`` value, a NumPy dtype or scalar type
(``ml_dtypes.float8_e4m3fn``, ``en_dtypes.hifloat8``)."""

Array = NDArray[Any]
#: the emulation keywords also take "default": the built-in default, whatever set_emulation_options says
#: (None: the process-wide value)
Default = Literal["default"]
IntOption = Union[int, Default]
BoolOption = Union[bool, Default]
AccumulationOption = Union[Accumulation, Default]
HF32RoundingOption = Union[HF32Rounding, Default]
HiF8RoundingOption = Union[HiF8Rounding, Default]
"""An array argument or result of the NumPy layer (float32, float16, bfloat16, 8-bit codes)."""


class EmulationOptions(TypedDict):
    """What ``get_emulation_options()`` returns (a plain dict at run time)."""
    hf32_rounding: HF32Rounding
    hf32_mantissa_bits: Optional[int]
    hif8_rounding: HiF8Rounding
    saturate: bool
    accumulation: Accumulation
    block_size: Optional[int]
    order_seed: Optional[int]
