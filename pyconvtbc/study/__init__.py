"""Precision studies: what does each NPU mode do to the gradients of conv_tbc?

Four studies over one grid of emulation modes, each measured against an exact (float64) reference:

* ``run_study``               per-mode error table (``python -m pyconvtbc study`` / ``study modes``)
* ``scale_window``            the grad_output scales at which each output format neither underflows nor
                              overflows, with the error inside that window (``study window``)
* ``reduction_order_spread``  run-to-run spread from the fp32 accumulation order (``study spread``)
* ``error_growth``            error against the reduction length, sweeping T (or another size) (``study growth``)
* ``train_modes``             a small ConvTBC model trained in each mode: loss curves, time per step
                              (``study train``; needs torch)

Besides the gradients, ``grads=["output"]`` (``--grads output``) measures the forward's result (aclnnConvTbc's
out, reduction length K*Cin) in ``run_study`` and ``error_growth``.

A *cell* of the grid is one choice of input dtype x cubeMathType x SoC profile x gradWeight dtype x HF32
rounding / mantissa width x HiFloat8 rounding x saturation.  Axes that cannot change a cell's result are
collapsed (shown as ``-``): the HF32 settings unless the compute precision is HF32, the HiFloat8 rounding unless
gradWeight is HIFLOAT8, saturation unless gradWeight is an 8-bit format.  A cell the operator rejects (for
example ascend910 with FLOAT KEEP_DTYPE, or BF16 on ascend910) becomes an ``n/a (161002)`` row.  HF32 widths
other than the chips' 10 and 11 bits (1..22) are what-ifs beyond the chips: the operands are rounded to that
width and the operator runs in FP32.

Data: seeded random problems (``shapes``, ``distribution``, ``scales``; ``repeat`` seeds give means with 95 %
intervals), or real operands (``data``: an .npz file, a directory of .npy files, a .pt file, or the records of
``capture(model)``, which records every ConvTBC backward of ``pyconvtbc.torch`` run inside it).  A scale is a
number (it multiplies grad_output, or every operand with ``scale_operands="all"``), ``"amax[:FRAC]"`` (per mode,
grad_output times the power of two that puts the exact gradWeight's largest magnitude in (FRAC/2, FRAC] of its
output format's largest finite value; FRAC by default per format, ``study.choices.amax_fraction``: 2^-11 for
HiFloat8, 0.5 otherwise) or ``"best"`` (per mode, the power of two of grad_output with the smallest gradWeight
rel Frob).

Metrics (``error_metrics``), per gradient, of the computed result c against the float64 reference r:

* ``max_abs``, ``max_rel``, ``rel_median`` (median |c - r| / |r|: 1 for an element flushed to zero) and
  ``rel_fro`` (||c - r||_F / ||r||_F), over the elements where c and r are finite;
* ``ulp_median`` / ``ulp_p99`` / ``ulp_max`` over the ``n_ulp`` elements whose exact value the output format
  can represent (smallest subnormal <= |r| <= largest finite): the distance from c to r in steps of the OUTPUT
  format (``pyconvtbc.formats.ulp_distance``; HiFloat8: its tapered code order), so an underflowed tensor has
  few or no ULP statistics instead of good ones;
* ``frac_overflow``, ``frac_subnormal`` (|r| below the smallest normal), ``frac_underflow`` (r != 0, c == 0)
  and the counts ``n_overflow``, ``n_underflow``, ``n_nan``, ``n_inf``.

``magnitude_profile`` / ``StudyResult.magnitude_table`` place each operand and exact gradient against each
format's limits (``format_limits``).

The reference is computed from the operator's inputs as they are passed (``reference="inputs"``: the values in
the input dtype, not rounded to the compute precision), so the error is the operator's own; with
``reference="source"`` it is computed from the float64 data before the cast to the input dtype, so the input
quantisation is part of the error.

Nothing here imports torch or matplotlib at import time; plots are written only when matplotlib is installed
(the ``plot`` extra), and ``capture`` imports torch when it is entered.
"""
from __future__ import annotations

from .choices import (CUBE_MATH_TYPES, DISTRIBUTIONS, GRADS, GW_DTYPES, HF32_ROUNDINGS, HIF8_ROUNDINGS,
                      INPUT_DTYPES, REFERENCES, SOCS)
from .capture import capture
from .command import cli
from .data import DEFAULT_SHAPE, Shape, load_data, load_npz, make_data
from .grid import Cell, Grid
from .growth import GROWTH_AXES, error_growth
from .magnitudes import magnitude_profile
from .metrics import error_metrics, format_limits, ulp_errors
from .modes import run_study
from .progress import _Progress
from .reference import reference_forward, reference_gradients
from .report import StudyResult
from .repeat import mean_interval
from .spread import permuted_gradients, reduction_order_spread
from .train import TRAIN_MODES, TrainResult, train_modes
from .window import scale_window

__all__ = [
    "Shape", "Cell", "Grid", "StudyResult", "GRADS", "DISTRIBUTIONS",
    "make_data", "load_npz", "load_data", "reference_gradients", "reference_forward", "ulp_errors", "error_metrics",
    "format_limits",
    "magnitude_profile", "mean_interval", "permuted_gradients", "run_study", "reduction_order_spread",
    "error_growth", "scale_window", "capture", "cli", "train_modes", "TrainResult", "TRAIN_MODES",
]
