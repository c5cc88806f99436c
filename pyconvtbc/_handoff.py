"""The typed values handed from validation through the plan to the kernel call.

``Shape`` and ``Mode`` are NamedTuples, so the kernels (which take tuples) receive them field for field in the
documented order; ``Problem`` is what an operator's rules return once every rule has passed.  Pure Python.
"""
from typing import NamedTuple


class Shape(NamedTuple):
    """The sizes of one TBC convolution (the forward and the backward share them); the kernels' shape tuple."""

    T_in: int
    B: int
    Cin: int
    Cout: int
    K: int
    pad: int

    @property
    def T_out(self) -> int:
        return self.T_in + 2 * self.pad - self.K + 1


class Mode(NamedTuple):
    """How to compute: the kernels' mode tuple (codes from the registry, pyconvtbc/formats.py)."""

    compute: int              # compute precision C (formats.COMPUTE_PRECISIONS)
    hf32_mantissa_bits: int
    hf32_rounding: int        # formats.HF32_ROUNDINGS
    hif8_rounding: int        # formats.HIF8_ROUNDINGS
    saturate: bool
    accumulation: int         # profiles.ACCUMULATIONS
    k0: int                   # products per cube block
    layout: int               # the profile's order of partial sums (profiles.SocProfile.sum_layout)
    geometry: tuple = ()      # layout 1: the profile's pieces and segments (profiles.SumGeometry), else ()
    pre: int = 0              # the forward: the rounding of the fp32 sums before the output cast (a compute
                              # precision: FP16 / BF16, or FP32 for none); the backward rounds gi by ``compute``


class Problem(NamedTuple):
    """What an operator's rules found: the sizes and the compute precision, and what else its kernel call
    needs decided at phase 1 (``extra``: the operator's own record; the plan carries it unread)."""

    shape: Shape
    compute: int              # compute precision C
    extra: tuple = ()
