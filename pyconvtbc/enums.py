"""CANN enumerations (values from CANN's headers; docs/semantics.md, section 10).

Each enumeration is an ``IntEnum``; every member is also exported as a module-level constant
(``ACL_FLOAT``, ``ACL_FORMAT_ND``, ``KEEP_DTYPE``, ...), as C code spells them.
"""
from enum import IntEnum

import numpy as np

from . import formats as _formats


# aclDataType: built from the format registry (pyconvtbc/formats.py, ``DATA_TYPES``), its one description.
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
# The public names (the package re-exports them); ITEMSIZE, NUMPY_DTYPE and the helpers stay internal.
__all__ = [e.__name__ for e in ALL_ENUMS] + [m.name for e in ALL_ENUMS for m in e]
