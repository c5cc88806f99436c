"""CANN enumerations (values from CANN's headers; docs/semantics.md, section 10).

Each enumeration is an ``IntEnum``; every member is also exported as a module-level constant
(``ACL_FLOAT``, ``ACL_FORMAT_ND``, ``KEEP_DTYPE``, ...), as C code spells them.
"""
from enum import IntEnum

import ml_dtypes
import numpy as np


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

# Bytes per element.  Sub-byte types (INT4, UINT1) and STRING have no fixed element size; they are
# given 1 so a descriptor can still be created and described.  The operator rejects them anyway.
ITEMSIZE = {
    aclDataType.ACL_DT_UNDEFINED: 1, aclDataType.ACL_FLOAT: 4, aclDataType.ACL_FLOAT16: 2,
    aclDataType.ACL_INT8: 1, aclDataType.ACL_INT32: 4, aclDataType.ACL_UINT8: 1, aclDataType.ACL_INT16: 2,
    aclDataType.ACL_UINT16: 2, aclDataType.ACL_UINT32: 4, aclDataType.ACL_INT64: 8, aclDataType.ACL_UINT64: 8,
    aclDataType.ACL_DOUBLE: 8, aclDataType.ACL_BOOL: 1, aclDataType.ACL_STRING: 1,
    aclDataType.ACL_COMPLEX64: 8, aclDataType.ACL_COMPLEX128: 16, aclDataType.ACL_BF16: 2,
    aclDataType.ACL_INT4: 1, aclDataType.ACL_UINT1: 1, aclDataType.ACL_COMPLEX32: 4,
    aclDataType.ACL_HIFLOAT8: 1, aclDataType.ACL_FLOAT8_E5M2: 1, aclDataType.ACL_FLOAT8_E4M3FN: 1,
    aclDataType.ACL_FLOAT8_E8M0: 1,
}

# NumPy storage for the data types that have one.  HIFLOAT8 is stored as its uint8 bit patterns.
NUMPY_DTYPE = {
    aclDataType.ACL_FLOAT: np.dtype(np.float32),
    aclDataType.ACL_FLOAT16: np.dtype(np.float16),
    aclDataType.ACL_BF16: np.dtype(ml_dtypes.bfloat16),
    aclDataType.ACL_HIFLOAT8: np.dtype(np.uint8),
    aclDataType.ACL_FLOAT8_E4M3FN: np.dtype(ml_dtypes.float8_e4m3fn),
    aclDataType.ACL_FLOAT8_E5M2: np.dtype(ml_dtypes.float8_e5m2),
    aclDataType.ACL_DOUBLE: np.dtype(np.float64),
    aclDataType.ACL_INT8: np.dtype(np.int8),
    aclDataType.ACL_INT16: np.dtype(np.int16),
    aclDataType.ACL_INT32: np.dtype(np.int32),
    aclDataType.ACL_INT64: np.dtype(np.int64),
    aclDataType.ACL_UINT8: np.dtype(np.uint8),
    aclDataType.ACL_UINT16: np.dtype(np.uint16),
    aclDataType.ACL_UINT32: np.dtype(np.uint32),
    aclDataType.ACL_UINT64: np.dtype(np.uint64),
    aclDataType.ACL_BOOL: np.dtype(np.bool_),
    aclDataType.ACL_COMPLEX64: np.dtype(np.complex64),
    aclDataType.ACL_COMPLEX128: np.dtype(np.complex128),
}


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
    """The aclDataType of a NumPy dtype (uint8 maps to UINT8), or ACL_DT_UNDEFINED."""
    dtype = np.dtype(dtype)
    for code, npdt in NUMPY_DTYPE.items():
        if npdt == dtype and code != aclDataType.ACL_HIFLOAT8:
            return int(code)
    return int(aclDataType.ACL_DT_UNDEFINED)


def _export(ns):
    for enum in ALL_ENUMS:
        for member in enum:
            ns[member.name] = member


_export(globals())
__all__ = [e.__name__ for e in ALL_ENUMS] + [m.name for e in ALL_ENUMS for m in e] + [
    "ITEMSIZE", "NUMPY_DTYPE", "dtype_name", "format_name", "acl_dtype_of_numpy"]
