"""pyconvtbc: Huawei CANN's aclnnConvTbcBackward on the CPU, with the NPU's precision paths emulated.

Two layers over one implementation (see docs/):
* the CANN layer, a line-by-line port target of the C API: aclInit, aclrtMalloc, aclCreateTensor,
  aclnnConvTbcBackwardGetWorkspaceSize, aclnnConvTbcBackward, ... (status-returning);
* the NumPy layer: ``conv_tbc_backward(grad_output, input, weight, bias, pad, ...)``.

The top-level namespace is the documented API (``__all__``); internals stay in their modules.
"""
from .api import (ConvTbcBackwardResult, aclDestroyAclOpExecutor, aclnnConvTbcBackward,
                  aclnnConvTbcBackwardGetWorkspaceSize, aclOpExecutor, aclSetAclOpExecutorRepeatable, conv_tbc_backward,
                  release_workspace)
from ._op_conv_tbc import aclnnConvTbc, aclnnConvTbcGetWorkspaceSize, conv_tbc
from .codecs import hif8_decode, hif8_encode, round_to_hf32
from .enums import *  # noqa: F401,F403  ACL_* constants, KEEP_DTYPE ... USE_HF32 and the IntEnums
from .memory import DevicePtr
from .profiles import (PROFILES, get_emulation_options, get_soc_version, reset_emulation_options,
                       set_emulation_options, set_soc_version)
from .runtime import (aclFinalize, aclInit, aclrtCreateStream, aclrtCtxGetSysParamOpt, aclrtCtxSetSysParamOpt,
                      aclrtDestroyStream, aclrtFree, aclrtMalloc, aclrtMemcpy, aclrtResetDevice, aclrtSetDevice,
                      aclrtStream, aclrtSynchronizeStream)
from .status import *  # noqa: F401,F403  status codes, AclnnError, aclGetRecentErrMsg
from .tensor import aclCreateTensor, aclDestroyTensor, aclTensor

from ._version import __version__  # set in one place: pyconvtbc/_version.py


def have_openmp() -> bool:
    """True when the kernels were compiled with OpenMP (else they run serially)."""
    from ._kernels._openmp import have_openmp as _h
    return _h()


# The API, sorted: this module's names and every name of enums.__all__ and status.__all__, written out as a list
# literal, the form type checkers read (tests/test_typing.py checks it against the modules).
__all__ = [
    "ACLNN_ERR_INNER", "ACLNN_ERR_INNER_CREATE_EXECUTOR", "ACLNN_ERR_INNER_NULLPTR", "ACLNN_ERR_PARAM_INVALID",
    "ACLNN_ERR_PARAM_NULLPTR", "ACLNN_ERR_RUNTIME_ERROR", "ACLNN_SUCCESS", "ACL_BF16", "ACL_BOOL", "ACL_COMPLEX128",
    "ACL_COMPLEX32", "ACL_COMPLEX64", "ACL_DOUBLE", "ACL_DT_UNDEFINED", "ACL_ERROR_BAD_ALLOC",
    "ACL_ERROR_INTERNAL_ERROR", "ACL_ERROR_INVALID_PARAM", "ACL_ERROR_RT_INTERNAL_ERROR", "ACL_FLOAT",
    "ACL_FLOAT16", "ACL_FLOAT8_E4M3FN", "ACL_FLOAT8_E5M2", "ACL_FLOAT8_E8M0", "ACL_FORMAT_FRACTAL_NZ",
    "ACL_FORMAT_FRACTAL_Z", "ACL_FORMAT_HWCN", "ACL_FORMAT_NC", "ACL_FORMAT_NC1HWC0", "ACL_FORMAT_NCDHW",
    "ACL_FORMAT_NCHW", "ACL_FORMAT_NCL", "ACL_FORMAT_ND", "ACL_FORMAT_NDHWC", "ACL_FORMAT_NHWC",
    "ACL_FORMAT_UNDEFINED", "ACL_HIFLOAT8", "ACL_INT16", "ACL_INT32", "ACL_INT4", "ACL_INT64", "ACL_INT8",
    "ACL_MEMCPY_DEVICE_TO_DEVICE", "ACL_MEMCPY_DEVICE_TO_HOST", "ACL_MEMCPY_HOST_TO_DEVICE",
    "ACL_MEMCPY_HOST_TO_HOST", "ACL_MEM_MALLOC_HUGE_FIRST", "ACL_MEM_MALLOC_HUGE_ONLY",
    "ACL_MEM_MALLOC_NORMAL_ONLY", "ACL_OPT_DETERMINISTIC", "ACL_STRING", "ACL_SUCCESS", "ACL_UINT1", "ACL_UINT16",
    "ACL_UINT32", "ACL_UINT64", "ACL_UINT8", "ALLOW_FP32_DOWN_PRECISION", "AclnnError", "AclnnTypeError",
    "ConvTbcBackwardResult", "CubeMathType", "DevicePtr", "KEEP_DTYPE", "PROFILES", "USE_FP16", "USE_HF32",
    "__version__", "aclCreateTensor", "aclDataType", "aclDestroyAclOpExecutor", "aclDestroyTensor", "aclError",
    "aclFinalize", "aclFormat", "aclGetRecentErrMsg", "aclInit", "aclOpExecutor", "aclSetAclOpExecutorRepeatable",
    "aclSysParamOpt", "aclTensor", "aclnnConvTbc", "aclnnConvTbcBackward", "aclnnConvTbcBackwardGetWorkspaceSize",
    "aclnnConvTbcGetWorkspaceSize", "aclnnStatus", "aclrtCreateStream", "aclrtCtxGetSysParamOpt",
    "aclrtCtxSetSysParamOpt", "aclrtDestroyStream", "aclrtFree", "aclrtMalloc", "aclrtMemMallocPolicy",
    "aclrtMemcpy", "aclrtMemcpyKind", "aclrtResetDevice", "aclrtSetDevice", "aclrtStream", "aclrtSynchronizeStream",
    "conv_tbc", "conv_tbc_backward", "get_emulation_options", "get_soc_version", "have_openmp", "hif8_decode",
    "hif8_encode", "release_workspace", "reset_emulation_options", "round_to_hf32", "set_emulation_options",
    "set_soc_version"
]

# The public submodules (``pyconvtbc.codecs``, ``pyconvtbc.torch``, ...) are imported by name; dir() lists the
# API and them, not the package's private modules.
_SUBMODULES = ("api", "codecs", "enums", "formats", "memory", "profiles", "runtime", "status", "study", "tensor",
               "torch")


def __dir__():
    import sys
    return sorted(set(__all__) | {m for m in _SUBMODULES if f"{__name__}.{m}" in sys.modules})
