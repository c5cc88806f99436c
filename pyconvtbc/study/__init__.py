"""Precision studies: what does each NPU mode do to the gradients of conv_tbc?

Three studies over one grid of emulation modes, each measured against an exact (float64) reference:

* ``run_study``               per-mode error table (``python -m pyconvtbc study`` / ``study modes``)
* ``reduction_order_spread``  run-to-run spread from the fp32 accumulation order (``study spread``)
* ``error_growth``            error against the reduction length, sweeping T (or another size) (``study growth``)

A *cell* of the grid is one choice of input dtype x cubeMathType x SoC profile x gradWeight dtype x HF32
rounding / mantissa width x HiFloat8 rounding x saturation.  Axes that cannot change a cell's result are
collapsed (shown as ``-``): the HF32 settings unless the compute precision is HF32, the HiFloat8 rounding unless
gradWeight is HIFLOAT8, saturation unless gradWeight is an 8-bit format.  A cell the operator rejects (for
example ascend910 with FLOAT KEEP_DTYPE, or BF16 on ascend910) becomes an ``n/a (161002)`` row.

Metrics (``error_metrics``), per gradient, of the computed result c against the float64 reference r:

* ``max_abs``  max |c - r|;  ``max_rel``  max |c - r| / |r| over r != 0;
  ``rel_fro``  ||c - r||_F / ||r||_F;  all three over the elements where c and r are finite.
* ``ulp_median`` / ``ulp_p99`` / ``ulp_max``: the distance from c to r counted in steps of the OUTPUT format
  (``pyconvtbc.formats.ulp_distance``: consecutive values are 1 apart, linear inside a gap; for HiFloat8 that is
  its tapered code order).  p99 is the nearest-rank percentile: the smallest error that at least 99 % of the
  elements do not exceed.
* counts: ``n_nan`` (c is NaN), ``n_inf`` (c is +-inf), ``n_overflow`` (r finite and either c is +-inf, or |r| is
  past the format's overflow threshold, or c is NaN with |r| > the format's max: E4M3FN's overflow), and
  ``n_underflow`` (r finite and non-zero, c exactly zero: flushed by operand rounding or the output cast).

The reference is computed from the operator's inputs as they are passed (``reference="inputs"``: the values in
the input dtype, not rounded to the compute precision), so the error is the operator's own; with
``reference="source"`` it is computed from the float64 data before the cast to the input dtype, so the input
quantisation is part of the error.

Nothing here imports torch or matplotlib at import time; plots are written only when matplotlib is installed
(the ``plot`` extra).
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
from .reference import reference_gradients
from .report import StudyResult
from .repeat import mean_interval
from .spread import permuted_gradients, reduction_order_spread
from .window import scale_window

__all__ = [
    "Shape", "Cell", "Grid", "StudyResult", "GRADS", "DISTRIBUTIONS",
    "make_data", "load_npz", "load_data", "reference_gradients", "ulp_errors", "error_metrics", "format_limits",
    "magnitude_profile", "mean_interval", "permuted_gradients", "run_study", "reduction_order_spread",
    "error_growth", "scale_window", "capture", "cli",
]
