"""Planning: from a validated problem and the settings to what the kernels need (operator-neutral).

A ``Plan`` is immutable and holds everything decided at phase 1: the operator, the sizes (``Shape``), the dtype
codes, how to compute (``Mode``), the thread count, determinism and the workspace size.  The operator's
``kernel_workspace`` sizes the workspace and its ``run`` / ``run_arrays`` call the kernels with the plan.
"""
import threading
from dataclasses import dataclass, field

import numpy as np

from ._handoff import Mode, Shape
from ._kernels._conv_tbc import UnsupportedDtype
from .formats import HF32_ROUNDINGS, HIF8_ROUNDINGS, data_type
from .profiles import accumulation_mode
from .status import ACLNN_ERR_PARAM_INVALID, AclnnError

WS_ALIGN = 64  # the kernels get a 64-byte-aligned workspace; phase 1 asks for this much slack
INLINE_FLOPS = 1 << 21  # below this, work on an idle stream runs in the caller's thread (no hand-off)


@dataclass(frozen=True)
class Plan:
    op: object            # the operator (an _twophase.Operator) whose kernels run this plan
    shape: Shape
    dtypes: tuple         # aclDataType codes, in the order the operator's kernel takes them
    mode: Mode
    num_threads: int
    deterministic: bool
    kernel_workspace: int
    options: tuple        # the emulation options used, for reports: ((name, value), ...)
    order_seed: object = None   # None: a fresh gradWeight order per call (when the order is not deterministic)
    extra: tuple = ()           # the operator's own phase-1 decisions (Problem.extra)
    # the shape as the plain tuple the Cython entry points take (made once, not per call); the mode is handed
    # over as the Mode record itself, which the kernel entry reads by field name
    kernel_shape: tuple = field(init=False, repr=False, compare=False)
    kernel_mode: Mode = field(init=False, repr=False, compare=False)
    # order_seed's permutation, drawn once (every call with that seed uses the same one); read-only
    _seeded_order: object = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        object.__setattr__(self, "kernel_shape", tuple(self.shape))
        object.__setattr__(self, "kernel_mode", self.mode)
        seeded = None
        if self.permutes and self.order_seed is not None:
            seeded = np.random.default_rng(self.order_seed).permutation(self.shape.B)
            seeded.flags.writeable = False
        object.__setattr__(self, "_seeded_order", seeded)

    @property
    def permutes(self):
        """Whether the per-item gradWeight chains are added in a per-call order (docs/precision.md)."""
        return (self.mode.accumulation != 0 and self.mode.layout == 0 and not self.deterministic
                and self.shape.B > 1)

    def order(self):
        """The batch order for this execution: None (b order), or a permutation of range(B) drawn now (from
        order_seed when set, else fresh)."""
        if not self.permutes:
            return None
        if self.order_seed is not None:
            return self._seeded_order
        rng = getattr(_rng, "gen", None)
        if rng is None:
            rng = _rng.gen = np.random.default_rng()
        return rng.permutation(self.shape.B)

    @property
    def workspace_size(self):
        return self.kernel_workspace + WS_ALIGN if self.kernel_workspace else 0

    @property
    def flops(self):
        return self.op.flops(self.shape)


_rng = threading.local()   # per-thread generators for the fresh per-call orders


def make_plan(op, problem, dtypes, options, num_threads, deterministic, profile):
    """The plan of one call: ``problem`` from the operator's rules, ``dtypes`` in its kernel's order, the
    resolved emulation ``options``."""
    compute = problem.compute
    mode = Mode(compute, int(options["hf32_mantissa_bits"]), HF32_ROUNDINGS[options["hf32_rounding"]],
                HIF8_ROUNDINGS[options["hif8_rounding"]], bool(options["saturate"]),
                *accumulation_mode(profile, compute, options, op.default_k0(problem)))
    dtypes = tuple(int(d) for d in dtypes)
    try:
        ws = int(op.kernel_workspace(problem, mode, dtypes, int(num_threads)))
    except UnsupportedDtype as e:     # a format the registry knows but no kernel row codec handles
        names = sorted({data_type(d).name for d in dtypes if data_type(d) is not None})
        raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"{op.name}: the kernels have no codec for a dtype of this call "
                         f"({', '.join(names)}): {e}") from None
    return Plan(op, problem.shape, dtypes, mode, int(num_threads), bool(deterministic), ws,
                tuple(sorted(options.items())), options["order_seed"], problem.extra)


def aligned_workspace(plan, ws_address, ws_size):
    """(address, size) of the workspace the kernels get: ws_address rounded up to WS_ALIGN, within the slack
    phase 1 asked for; (0, 0) when the plan needs none."""
    if not plan.kernel_workspace:
        return 0, 0
    aligned = (ws_address + WS_ALIGN - 1) // WS_ALIGN * WS_ALIGN
    return aligned, ws_size - (aligned - ws_address)
