"""The public facade of the two layers (the implementation is in the operator modules and the shared core).

* CANN layer: ``aclnnConvTbcBackwardGetWorkspaceSize`` (phase 1) and ``aclnnConvTbcBackward`` (phase 2),
  status-returning, never raising for bad arguments; the executor functions are operator-neutral.
* NumPy layer: ``conv_tbc_backward``, raising ``AclnnError`` with the same status and message;
  ``memory_limit()``, ``WORKSPACE_KEEP_BYTES`` and ``release_workspace()`` describe and free its scratch memory.

docs/developer.md draws the modules: ``_twophase`` (executor, phases, streams), ``_numpy_layer`` (the NumPy
base), ``_op_conv_tbc_backward`` (this operator's tensors, rules and kernel calls).
"""
from ._numpy_layer import WORKSPACE_KEEP_BYTES, memory_limit, release_workspace
from ._op_conv_tbc_backward import (ConvTbcBackwardResult, aclnnConvTbcBackward, aclnnConvTbcBackwardGetWorkspaceSize,
                                    conv_tbc_backward)
from ._twophase import aclDestroyAclOpExecutor, aclOpExecutor, aclSetAclOpExecutorRepeatable

__all__ = ["aclnnConvTbcBackwardGetWorkspaceSize", "aclnnConvTbcBackward", "aclSetAclOpExecutorRepeatable",
           "aclDestroyAclOpExecutor", "aclOpExecutor", "conv_tbc_backward", "ConvTbcBackwardResult",
           "release_workspace", "memory_limit",
           "WORKSPACE_KEEP_BYTES"]
