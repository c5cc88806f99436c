"""CANN enumerations (values from CANN's headers; docs/semantics.md, section 10).

Each enumeration is an ``IntEnum``; every member is also exported as a module-level constant
(``ACL_FLOAT``, ``ACL_FORMAT_ND``, ``KEEP_DTYPE``, ...), as C code spells them.
"""
from enum import IntEnum
from typing import TYPE_CHECKING

import numpy as np

from . import formats as _formats


# aclDataType: built from the format registry (pyconvtbc/formats.py, ``DATA_TYPES``), its one description.  Type
# checkers read the class below instead (the same members: tests/test_typing.py checks it).
if TYPE_CHECKING:
    class aclDataType(IntEnum):
        ACL_DT_UNDEFINED = -1
        ACL_FLOAT = 0
        ACL_FLOAT16 = 1
        ACL_INT8 = 2
        ACL_INT32 = 3
        ACL_UINT8 = 4
        ACL_INT16 = 6
        ACL_UINT16 = 7
        ACL_UINT32 = 8
        ACL_INT64 = 9
        ACL_UINT64 = 10
        ACL_DOUBLE = 11
        ACL_BOOL = 12
        ACL_STRING = 13
        ACL_COMPLEX64 = 16
        ACL_COMPLEX128 = 17
        ACL_BF16 = 27
        ACL_INT4 = 29
        ACL_UINT1 = 30
        ACL_COMPLEX32 = 33
        ACL_HIFLOAT8 = 34
        ACL_FLOAT8_E5M2 = 35
        ACL_FLOAT8_E4M3FN = 36
        ACL_FLOAT8_E8M0 = 37
else:
    aclDataType = IntEnum("aclDataType", [(t.acl, t.code) for t in _formats.DATA_TYPES], module=__name__)


class aclFormat(IntEnum):
    ACL_FORMAT_UNDEFINED = -1
    ACL_FORMAT_NCHW = 0
    ACL_FORMAT_NHWC = 1
    ACL_FORMAT_ND = 2
    ACL_FORMAT_NC1HWC0 = 3
    ACL_FORMAT_FRACTAL_Z = 4
    ACL_FORMAT_HWCN = 16
    ACL_FORMAT_NDHWC = 27
    ACL_FORMAT_FRACTAL_NZ = 29
    ACL_FORMAT_NCDHW = 30
    ACL_FORMAT_NC = 35
    ACL_FORMAT_NCL = 47


class CubeMathType(IntEnum):
    KEEP_DTYPE = 0
    ALLOW_FP32_DOWN_PRECISION = 1
    USE_FP16 = 2
    USE_HF32 = 3


class aclrtMemcpyKind(IntEnum):
    ACL_MEMCPY_HOST_TO_HOST = 0
    ACL_MEMCPY_HOST_TO_DEVICE = 1
    ACL_MEMCPY_DEVICE_TO_HOST = 2
    ACL_MEMCPY_DEVICE_TO_DEVICE = 3


class aclrtMemMallocPolicy(IntEnum):
    ACL_MEM_MALLOC_HUGE_FIRST = 0
    ACL_MEM_MALLOC_HUGE_ONLY = 1
    ACL_MEM_MALLOC_NORMAL_ONLY = 2


class aclSysParamOpt(IntEnum):
    ACL_OPT_DETERMINISTIC = 0


ALL_ENUMS = (aclDataType, aclFormat, CubeMathType, aclrtMemcpyKind, aclrtMemMallocPolicy, aclSysParamOpt)

# Bytes per element, and the NumPy storage of the data types that have one (HIFLOAT8: its uint8 bit patterns);
# both from the registry.
ITEMSIZE = {aclDataType(t.code): t.itemsize for t in _formats.DATA_TYPES}
NUMPY_DTYPE = {aclDataType(t.code): t.storage for t in _formats.DATA_TYPES
               if t.storage is not None and t.code != -1}


def dtype_name(code) -> str:
    """'FLOAT (0)' for a known code, 'unknown (99)' otherwise: the spelling used in messages."""
    try:
        return f"{aclDataType(code).name[4:]} ({int(code)})"
    except (ValueError, TypeError):
        return f"unknown ({code!r})"


def format_name(code) -> str:
    try:
        return f"{aclFormat(code).name[len('ACL_FORMAT_'):]} ({int(code)})"
    except (ValueError, TypeError):
        return f"unknown ({code!r})"


def acl_dtype_of_numpy(dtype) -> int:
    """The aclDataType of a NumPy dtype (uint8 maps to UINT8; en_dtypes.hifloat8 to HIFLOAT8), or
    ACL_DT_UNDEFINED."""
    dtype = np.dtype(dtype)
    if _formats.is_en_hifloat8(dtype):
        return int(aclDataType.ACL_HIFLOAT8)
    for code, npdt in NUMPY_DTYPE.items():
        if npdt == dtype and code != aclDataType.ACL_HIFLOAT8:
            return int(code)
    return int(aclDataType.ACL_DT_UNDEFINED)


# Every member also as a module constant, as C spells them (written out so that type checkers and IDEs see them;
# tests/test_typing.py checks that the list is complete).
ACL_DT_UNDEFINED = aclDataType.ACL_DT_UNDEFINED
ACL_FLOAT = aclDataType.ACL_FLOAT
ACL_FLOAT16 = aclDataType.ACL_FLOAT16
ACL_INT8 = aclDataType.ACL_INT8
ACL_INT32 = aclDataType.ACL_INT32
ACL_UINT8 = aclDataType.ACL_UINT8
ACL_INT16 = aclDataType.ACL_INT16
ACL_UINT16 = aclDataType.ACL_UINT16
ACL_UINT32 = aclDataType.ACL_UINT32
ACL_INT64 = aclDataType.ACL_INT64
ACL_UINT64 = aclDataType.ACL_UINT64
ACL_DOUBLE = aclDataType.ACL_DOUBLE
ACL_BOOL = aclDataType.ACL_BOOL
ACL_STRING = aclDataType.ACL_STRING
ACL_COMPLEX64 = aclDataType.ACL_COMPLEX64
ACL_COMPLEX128 = aclDataType.ACL_COMPLEX128
ACL_BF16 = aclDataType.ACL_BF16
ACL_INT4 = aclDataType.ACL_INT4
ACL_UINT1 = aclDataType.ACL_UINT1
ACL_COMPLEX32 = aclDataType.ACL_COMPLEX32
ACL_HIFLOAT8 = aclDataType.ACL_HIFLOAT8
ACL_FLOAT8_E5M2 = aclDataType.ACL_FLOAT8_E5M2
ACL_FLOAT8_E4M3FN = aclDataType.ACL_FLOAT8_E4M3FN
ACL_FLOAT8_E8M0 = aclDataType.ACL_FLOAT8_E8M0
ACL_FORMAT_UNDEFINED = aclFormat.ACL_FORMAT_UNDEFINED
ACL_FORMAT_NCHW = aclFormat.ACL_FORMAT_NCHW
ACL_FORMAT_NHWC = aclFormat.ACL_FORMAT_NHWC
ACL_FORMAT_ND = aclFormat.ACL_FORMAT_ND
ACL_FORMAT_NC1HWC0 = aclFormat.ACL_FORMAT_NC1HWC0
ACL_FORMAT_FRACTAL_Z = aclFormat.ACL_FORMAT_FRACTAL_Z
ACL_FORMAT_HWCN = aclFormat.ACL_FORMAT_HWCN
ACL_FORMAT_NDHWC = aclFormat.ACL_FORMAT_NDHWC
ACL_FORMAT_FRACTAL_NZ = aclFormat.ACL_FORMAT_FRACTAL_NZ
ACL_FORMAT_NCDHW = aclFormat.ACL_FORMAT_NCDHW
ACL_FORMAT_NC = aclFormat.ACL_FORMAT_NC
ACL_FORMAT_NCL = aclFormat.ACL_FORMAT_NCL
KEEP_DTYPE = CubeMathType.KEEP_DTYPE
ALLOW_FP32_DOWN_PRECISION = CubeMathType.ALLOW_FP32_DOWN_PRECISION
USE_FP16 = CubeMathType.USE_FP16
USE_HF32 = CubeMathType.USE_HF32
ACL_MEMCPY_HOST_TO_HOST = aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_HOST
ACL_MEMCPY_HOST_TO_DEVICE = aclrtMemcpyKind.ACL_MEMCPY_HOST_TO_DEVICE
ACL_MEMCPY_DEVICE_TO_HOST = aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_HOST
ACL_MEMCPY_DEVICE_TO_DEVICE = aclrtMemcpyKind.ACL_MEMCPY_DEVICE_TO_DEVICE
ACL_MEM_MALLOC_HUGE_FIRST = aclrtMemMallocPolicy.ACL_MEM_MALLOC_HUGE_FIRST
ACL_MEM_MALLOC_HUGE_ONLY = aclrtMemMallocPolicy.ACL_MEM_MALLOC_HUGE_ONLY
ACL_MEM_MALLOC_NORMAL_ONLY = aclrtMemMallocPolicy.ACL_MEM_MALLOC_NORMAL_ONLY
ACL_OPT_DETERMINISTIC = aclSysParamOpt.ACL_OPT_DETERMINISTIC
# The public names (the package re-exports them); ITEMSIZE, NUMPY_DTYPE and the helpers stay internal.
# (a list literal: the form type checkers read; tests/test_typing.py checks it is every enum and member)
__all__ = [
    "aclDataType", "aclFormat", "CubeMathType", "aclrtMemcpyKind", "aclrtMemMallocPolicy", "aclSysParamOpt",
    "ACL_DT_UNDEFINED", "ACL_FLOAT", "ACL_FLOAT16", "ACL_INT8", "ACL_INT32", "ACL_UINT8", "ACL_INT16", "ACL_UINT16",
    "ACL_UINT32", "ACL_INT64", "ACL_UINT64", "ACL_DOUBLE", "ACL_BOOL", "ACL_STRING", "ACL_COMPLEX64",
    "ACL_COMPLEX128", "ACL_BF16", "ACL_INT4", "ACL_UINT1", "ACL_COMPLEX32", "ACL_HIFLOAT8", "ACL_FLOAT8_E5M2",
    "ACL_FLOAT8_E4M3FN", "ACL_FLOAT8_E8M0", "ACL_FORMAT_UNDEFINED", "ACL_FORMAT_NCHW", "ACL_FORMAT_NHWC",
    "ACL_FORMAT_ND", "ACL_FORMAT_NC1HWC0", "ACL_FORMAT_FRACTAL_Z", "ACL_FORMAT_HWCN", "ACL_FORMAT_NDHWC",
    "ACL_FORMAT_FRACTAL_NZ", "ACL_FORMAT_NCDHW", "ACL_FORMAT_NC", "ACL_FORMAT_NCL", "KEEP_DTYPE",
    "ALLOW_FP32_DOWN_PRECISION", "USE_FP16", "USE_HF32", "ACL_MEMCPY_HOST_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE",
    "ACL_MEMCPY_DEVICE_TO_HOST", "ACL_MEMCPY_DEVICE_TO_DEVICE", "ACL_MEM_MALLOC_HUGE_FIRST",
    "ACL_MEM_MALLOC_HUGE_ONLY", "ACL_MEM_MALLOC_NORMAL_ONLY", "ACL_OPT_DETERMINISTIC"
]
