"""A typed user script: the NumPy calls, the CANN layer and the options, as a user annotates them.

CI runs ``mypy --strict`` on it (``.ci/typecheck.py``), so the package's types serve annotated code; it also runs
(``python examples/typed_usage.py`` prints the three gradients' shapes and one status).
"""
from typing import List, Optional

import numpy as np
from numpy.typing import NDArray

import pyconvtbc as pc
from pyconvtbc import AclnnError, AclnnTypeError, USE_HF32, conv_tbc, conv_tbc_backward
from pyconvtbc.typing import Accumulation, CubeMathTypeLike, SocName

SOC: SocName = "ascend910b"
MODES: List[CubeMathTypeLike] = [pc.KEEP_DTYPE, USE_HF32, "USE_FP16", "allow_fp32_down_precision"]


def gradients(x: NDArray[np.float32], w: NDArray[np.float32], b: NDArray[np.float32], pad: int,
              mode: CubeMathTypeLike, accumulation: Accumulation = "cube") -> NDArray[np.float32]:
    """grad_weight of a sum-of-outputs loss, in float32."""
    y = conv_tbc(x, w, b, pad, cube_math_type=mode, soc=SOC, accumulation=accumulation)
    dy = np.ones_like(y)
    result = conv_tbc_backward(dy, x, w, b, pad, cube_math_type=mode, soc=SOC, accumulation=accumulation)
    gw: NDArray[np.float32] = result.grad_weight.astype(np.float32)
    return gw


def cann_status() -> int:
    """One CANN-layer call: its status (an int), never an exception."""
    ret, ptr = pc.aclrtMalloc(64, pc.ACL_MEM_MALLOC_HUGE_FIRST)
    if ret != pc.ACL_SUCCESS:
        message: Optional[str] = pc.aclGetRecentErrMsg()
        raise RuntimeError(message)
    status: int = pc.aclrtFree(ptr)
    return status


def main() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((16, 4, 8)).astype(np.float32)
    w = rng.standard_normal((3, 8, 6)).astype(np.float32)
    b = np.zeros(6, np.float32)
    for mode in MODES:
        print(mode, gradients(x, w, b, 1, mode).shape)
    gi, gw, gb = conv_tbc_backward(np.ones((16, 4, 6), np.float32), x, w, b, 1, grad_weight_dtype="hifloat8")
    print(gi.shape, gw.dtype, gb.shape)
    pc.set_emulation_options(accumulation="sequential", hf32_rounding="nearest_even")
    pc.reset_emulation_options()
    try:
        conv_tbc(x, w, b, 300)
    except AclnnTypeError:
        raise
    except AclnnError as e:
        print("status", e.status)
    print("CANN status", int(cann_status()))


if __name__ == "__main__":
    main()
