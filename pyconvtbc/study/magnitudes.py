"""The magnitude view: where a problem's values lie against each format's limits.

For each operand (grad_output, input, weight, as passed to the operator) and each exact gradient, the share of
its values in each range of a format: flushed (|x| below half the smallest subnormal: rounds to zero),
subnormal (below the smallest normal: fewer significant bits), normal, and overflowing (at or past the overflow
threshold).  Operands are set against the compute precisions of the study's modes (FP32/HF32 share float32's
range; FP16, BF16), gradients against their output formats.
"""
from __future__ import annotations

import numpy as np

from ..formats import get_format
from .metrics import _OVERFLOW, format_limits

OPERANDS = ("grad_output", "input", "weight")
_COMPUTE_FORMAT = {"FP32": "float32", "HF32": "float32", "FP16": "float16", "BF16": "bfloat16"}
MAGNITUDE_KEYS = ("n", "n_zero", "min_nonzero", "median", "max", "frac_flushed", "frac_subnormal", "frac_normal",
                  "frac_overflow", "frac_below_normal")


def magnitude_profile(values, fmt):
    """Where |values| lie against format ``fmt``'s limits (shares of the finite non-zero values; see the module
    docstring).  HiFloat8 flushes below 2^-23 (half its smallest subnormal 2^-22), like the IEEE formats."""
    a = np.abs(np.asarray(values, dtype=np.float64).reshape(-1))
    a = a[np.isfinite(a)]
    nz = a[a != 0]
    out = dict.fromkeys(MAGNITUDE_KEYS)
    out.update(n=int(a.size), n_zero=int(a.size - nz.size))
    if not nz.size:
        return out
    lim = format_limits(fmt)
    thr, inclusive = _OVERFLOW[get_format(fmt).name if not isinstance(fmt, str) else fmt]
    flushed = nz < lim["smallest_subnormal"] / 2
    sub = (nz < lim["smallest_normal"]) & ~flushed
    over = (nz >= thr) if inclusive else (nz > thr)
    n = nz.size
    out.update(min_nonzero=float(nz.min()), median=float(np.median(nz)), max=float(nz.max()),
               frac_flushed=float(flushed.sum()) / n, frac_subnormal=float(sub.sum()) / n,
               frac_overflow=float(over.sum()) / n, frac_normal=float((~flushed & ~sub & ~over).sum()) / n,
               frac_below_normal=float((nz < lim["smallest_normal"]).sum()) / n)
    return out


def magnitude_rows(problems, cells, grads, reference):
    """One row per (problem, tensor, format): the operands against each compute precision's range, the exact
    gradients against each of their output formats among ``cells``; with the tensor's |values| for the plot."""
    rows, values = [], []
    for p in problems:
        for dt in dict.fromkeys(c.input_dtype for c in cells):
            x = p.input_values(dt)
            ref = p.reference(dt, reference)
            mine = [c for c in cells if c.input_dtype == dt]
            tensors = [(t, x[t], sorted({_COMPUTE_FORMAT[c.compute] for c in mine if c.compute in _COMPUTE_FORMAT}
                                        or {dt})) for t in OPERANDS]
            tensors += [(g, p.forward_reference(dt, reference) if g == "output" else ref[g],
                         sorted({c.out_format(g) for c in mine})) for g in grads]
            for name, arr, fmts in tensors:
                for f in fmts:
                    rows.append({**p.context(), "input_dtype": dt, "tensor": name, "format": f,
                                 **magnitude_profile(arr, f)})
                values.append(((p.context()["distribution"], p.context()["scale"], p.context()["shape"], dt, name),
                               fmts, np.abs(np.asarray(arr, dtype=np.float64)).reshape(-1)))
    return rows, values
