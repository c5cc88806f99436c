"""Planning: from validated sizes and settings to what the kernels need, and the executor object.

A ``Plan`` is immutable and holds everything decided at phase 1: sizes, dtype codes, the compute
precision and rounding modes, thread count, determinism and the workspace size.  ``run_plan`` is the
single place both layers call the kernels from.
"""
from dataclasses import dataclass

import threading

import numpy as np

from ._kernels import _conv_tbc
from .profiles import HF32_ROUNDINGS, HIF8_ROUNDINGS, accumulation_mode

WS_ALIGN = 64  # the kernels get a 64-byte-aligned workspace; phase 1 asks for this much slack
INLINE_FLOPS = 1 << 21  # below this, work on an idle stream runs in the caller's thread (no hand-off)


@dataclass(frozen=True)
class Plan:
    shape: tuple          # (T_in, B, Cin, Cout, K, pad)
    T_out: int
    dtypes: tuple         # aclDataType codes of (self, input, weight, gradInput, gradWeight, gradBias)
    promoted: int
    compute: int
    mode: tuple           # (compute, hf32_mantissa_bits, hf32_rounding, hif8_rounding, saturate, acc, k0, layout)
    num_threads: int
    deterministic: bool
    kernel_workspace: int
    options: tuple        # the emulation options used, for reports: ((name, value), ...)
    order_seed: object = None   # None: a fresh gradWeight order per call (when the order is not deterministic)

    @property
    def permutes(self):
        """Whether the per-item gradWeight chains are added in a per-call order (docs/precision.md)."""
        acc, _, layout = self.mode[5:]
        return acc != 0 and layout == 0 and not self.deterministic and self.shape[1] > 1

    def order(self):
        """The batch order for this execution: None (b order), or a permutation of range(B) drawn now (from
        order_seed when set, else fresh)."""
        if not self.permutes:
            return None
        if self.order_seed is not None:
            return np.random.default_rng(self.order_seed).permutation(self.shape[1])
        rng = getattr(_rng, "gen", None)
        if rng is None:
            rng = _rng.gen = np.random.default_rng()
        return rng.permutation(self.shape[1])

    @property
    def workspace_size(self):
        return self.kernel_workspace + WS_ALIGN if self.kernel_workspace else 0

    @property
    def flops(self):
        T_in, B, Cin, Cout, K, _ = self.shape
        return 4 * self.T_out * B * Cin * Cout * K


_rng = threading.local()   # per-thread generators for the fresh per-call orders


def make_plan(info, dtypes, options, num_threads, deterministic, profile):
    shape = (info["T_in"], info["B"], info["Cin"], info["Cout"], info["K"], info["pad"])
    mode = (info["compute"], int(options["hf32_mantissa_bits"]), HF32_ROUNDINGS[options["hf32_rounding"]],
            HIF8_ROUNDINGS[options["hif8_rounding"]], bool(options["saturate"]))
    mode += accumulation_mode(profile, info["compute"], options)
    ws = int(_conv_tbc.workspace_size(shape, mode, tuple(int(d) for d in dtypes), int(num_threads)))
    return Plan(shape, info["T_out"], tuple(int(d) for d in dtypes), info["promoted"], info["compute"], mode,
                int(num_threads), bool(deterministic), ws, tuple(sorted(options.items())), options["order_seed"])


def run_plan(plan, dy, x, w, gi, gw, gb, ws_address, ws_size, cancel=None):
    """Call the kernels.  dy/x/w: (address, bs0, bs1, bs2, dtype); gi/gw/gb: (address, dtype).

    ws_address may be unaligned: it is rounded up here, within the WS_ALIGN slack phase 1 asked for.
    cancel: None, or an int32 array of one element; nonzero stops the kernels (they then raise).
    """
    if plan.kernel_workspace:
        aligned = (ws_address + WS_ALIGN - 1) // WS_ALIGN * WS_ALIGN
        ws_size -= aligned - ws_address
        ws_address = aligned
    else:
        ws_address, ws_size = 0, 0
    _conv_tbc.run(dy, x, w, gi, gw, gb, plan.shape, plan.mode, ws_address, ws_size,
                  plan.num_threads, plan.order(), cancel)


def run_plan_arrays(plan, dy, x, w, gi, gw, gb, ws):
    """run_plan for NumPy arrays (the NumPy layer): the kernels read addresses and strides themselves.

    dy/x/w: arrays of the planned shapes and dtypes (any strides, element-aligned); gi/gw/gb: new C-contiguous
    outputs; ws: a uint8 array of at least plan.workspace_size bytes, or None when that is 0.
    """
    _conv_tbc.run_arrays(dy, x, w, gi, gw, gb, plan.dtypes, plan.shape, plan.mode,
                         ws if plan.kernel_workspace else None, plan.num_threads,
                         plan.order())
