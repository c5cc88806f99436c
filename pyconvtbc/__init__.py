"""pyconvtbc: Huawei CANN's aclnnConvTbcBackward on the CPU, with the NPU's precision paths emulated.

Two layers over one implementation (see docs/):
* the CANN layer, a line-by-line port target of the C API: aclInit, aclrtMalloc, aclCreateTensor,
  aclnnConvTbcBackwardGetWorkspaceSize, aclnnConvTbcBackward, ... (status-returning);
* the NumPy layer: ``conv_tbc_backward(grad_output, input, weight, bias, pad, ...)``.

The top-level namespace is the documented API (``__all__``); internals stay in their modules.
"""
from . import enums as _enums
from . import status as _status
from .api import (aclDestroyAclOpExecutor, aclnnConvTbcBackward, aclnnConvTbcBackwardGetWorkspaceSize,
                  aclOpExecutor, aclSetAclOpExecutorRepeatable, conv_tbc_backward, release_workspace)
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


# A list literal, extended by the two modules' lists: the form type checkers read as the package's exports.
__all__ = ["conv_tbc_backward", "conv_tbc", "release_workspace", "hif8_encode", "hif8_decode", "round_to_hf32",
     "aclInit", "aclFinalize", "aclrtSetDevice", "aclrtResetDevice", "aclrtCreateStream", "aclrtDestroyStream",
     "aclrtSynchronizeStream", "aclrtMalloc", "aclrtFree", "aclrtMemcpy", "aclrtCtxSetSysParamOpt",
     "aclrtCtxGetSysParamOpt", "aclCreateTensor", "aclDestroyTensor", "aclTensor",
     "aclnnConvTbcBackwardGetWorkspaceSize", "aclnnConvTbcBackward", "aclnnConvTbcGetWorkspaceSize", "aclnnConvTbc",
     "aclSetAclOpExecutorRepeatable",
     "aclDestroyAclOpExecutor", "aclOpExecutor", "aclrtStream", "DevicePtr",
     "set_soc_version", "get_soc_version", "set_emulation_options", "get_emulation_options",
     "reset_emulation_options", "PROFILES", "have_openmp", "__version__"]
__all__ += _enums.__all__
__all__ += _status.__all__
__all__.sort()

# The public submodules (``pyconvtbc.codecs``, ``pyconvtbc.torch``, ...) are imported by name; dir() lists the
# API and them, not the package's private modules.
_SUBMODULES = ("api", "codecs", "enums", "formats", "memory", "profiles", "runtime", "status", "study", "tensor",
               "torch")


def __dir__():
    import sys
    return sorted(set(__all__) | {m for m in _SUBMODULES if f"{__name__}.{m}" in sys.modules})
