"""Study 3: each mode's error against the reduction length, sweeping one size (``study growth``)."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from .choices import GRADS, _as_list, _as_whole, _normalise
from .data import Shape, _problems, check_size
from .grid import _as_grid
from .report import StudyResult
from .repeat import aggregate
from .sweep import _check_common, _meta, _seeds, _sweep

GROWTH_AXES = ("T", "B", "Cin", "Cout", "K")
_GROWTH_METRICS = ("rel_fro", "max_rel", "max_abs", "ulp_median", "ulp_p99", "ulp_max")


def error_growth(base_shape=None, values=(16, 64, 256, 1024), axis="T", grid=None, *, distribution="normal",
                 scale=1.0, seed=0, repeat=1, grads=GRADS, reference="inputs", metric="rel_fro", deterministic=True,
                 num_threads=None, progress=False, scale_operands="grad_output"):
    """Each mode's error as one size grows: ``axis`` of ``base_shape`` takes each of ``values``.

    Sweeping T grows gradWeight's and gradBias's reduction length B*T_out; sweeping Cout (or K) grows
    gradInput's K*Cout.  ``meta['slopes']`` holds, per mode and gradient, the least-squares slope of
    log(metric) against log(reduction length) (0.5: random-walk growth, 1: linear; 0: no growth).  With
    ``repeat`` = N > 1 every size runs on N seeds; rows hold means with 95 % intervals and slopes use the means.
    """
    base = Shape.parse(base_shape if base_shape is not None else Shape(16, 8, 32, 32, 3, 1), "base_shape")
    axis = _normalise("axis", axis, GROWTH_AXES, what="size to sweep")
    metric = _normalise("metric", metric, _GROWTH_METRICS, what="metric")
    vals = []
    for v in _as_list("values", values):
        iv = _as_whole(v)
        if iv is None or iv < 1:
            raise ValueError(f"values: {v!r}; expected integers >= 1 for {axis}")
        vals.append(iv)
    vals = sorted(set(vals))
    shapes = [check_size(Shape.parse({**asdict(base), axis: v}, f"values ({axis}={v})"), f"values ({axis}={v})")
              for v in vals]
    grid = _as_grid(grid)
    grads, reference, deterministic = _check_common(grads, reference, deterministic, num_threads)
    cells = grid.cells()
    seeds = _seeds(seed, repeat, False)
    problems = _problems(shapes, None, distribution, [scale], seeds, scale_operands=scale_operands)
    rows, samples = _sweep("growth", problems, cells, grads, reference, deterministic, num_threads, progress)
    if len(seeds) > 1:
        rows, samples = aggregate(rows, samples)
    slopes = [{"cell": asdict(c), "grad": g, "slope": _slope(rows, asdict(c), g, metric)}
              for c in cells for g in grads]
    meta = _meta("growth", grid, problems, grads, reference, deterministic, axis=axis, values=vals, metric=metric,
                 base_shape=base.label, slopes=slopes, repeats=len(seeds), scale_operands=scale_operands)
    return StudyResult("growth", rows, meta, samples)


def _slope(rows, cell, grad, metric):
    """Least-squares slope of log(metric) against log(reduction length) over one mode's valid rows of ``grad``
    (None with fewer than two reduction lengths)."""
    pts = [(r["reduction_length"], r[metric]) for r in rows
           if r["grad"] == grad and r["status"] == 0 and all(r[k] == v for k, v in cell.items())
           and r[metric] is not None and r[metric] > 0]
    if len({n for n, _ in pts}) < 2:
        return None
    return float(np.polyfit(np.log([n for n, _ in pts]), np.log([e for _, e in pts]), 1)[0])
