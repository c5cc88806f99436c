"""Error metrics of a computed gradient against its float64 reference, in steps of the output format."""
from __future__ import annotations

import math

import numpy as np

from .. import codecs
from .. import formats as _reg
from ..formats import get_format, ulp_distance
from .choices import _FORMAT_ALIASES

# Overflow threshold of each output format: (value, inclusive), from the registry (pyconvtbc/formats.py, where
# each value is derived).  A finite exact value at or past it cannot be represented: it rounds to Inf / NaN (or
# saturates).
_OVERFLOW = {t.name: t.overflow for t in _reg.types_with_role(_reg.OPERAND) + _reg.types_with_role(_reg.GRAD_WEIGHT)
             if t.overflow is not None}

# The keys of ``error_metrics`` and ``_spread_stats``, in order (every one None on a row the operator rejected).
_METRIC_KEYS = ("n", "max_abs", "max_rel", "rel_median", "rel_fro", "n_ulp", "ulp_median", "ulp_p99", "ulp_max",
                "frac_overflow", "frac_subnormal", "frac_underflow", "n_overflow", "n_underflow", "n_nan", "n_inf")
_SPREAD_KEYS = ("spread_median", "spread_p99", "spread_max", "frac_varying")


def _values(computed, fmt):
    a = np.asarray(computed)
    t = _reg.by_name(fmt)
    if t is not None and t.decode and t.storage == np.uint8 and a.dtype == np.uint8:   # codes (HiFloat8)
        return getattr(codecs, t.decode)(a).astype(np.float64)
    return a.astype(np.float64)


def _fmt_name(fmt):
    name = get_format(fmt).name if not isinstance(fmt, str) else fmt.lower()
    name = _FORMAT_ALIASES.get(name, name)
    if name not in _OVERFLOW:
        raise ValueError(f"fmt: {fmt!r}; expected an output format, one of {', '.join(_OVERFLOW)}")
    return name


def _ulp_summary(ulps, prefix):
    """{prefix_median, prefix_p99 (nearest-rank), prefix_max} of a non-empty array of ULP distances."""
    return {f"{prefix}_median": float(np.median(ulps)),
            f"{prefix}_p99": float(np.percentile(ulps, 99, method="inverted_cdf")),
            f"{prefix}_max": float(ulps.max())}


def ulp_errors(computed, reference, fmt):
    """Per-element distance from computed to reference in steps of the output format ``fmt`` (float64 array).

    ``computed`` is an array of values (any float dtype) or, for ``fmt='hifloat8'``, of uint8 HiFloat8 codes.
    """
    fmt = _fmt_name(fmt)
    return np.asarray(ulp_distance(fmt, _values(computed, fmt), np.asarray(reference, dtype=np.float64)))


def format_limits(fmt):
    """The limits of an output format that every magnitude view marks: {smallest_subnormal, smallest_normal,
    largest_finite, overflow_threshold} (float values; see ``_OVERFLOW`` for the threshold)."""
    name = _fmt_name(fmt)
    f = get_format(name)
    return {"smallest_subnormal": f.min_subnormal, "smallest_normal": f.min_normal, "largest_finite": f.max,
            "overflow_threshold": _OVERFLOW[name][0]}


def error_metrics(computed, reference, fmt, *, return_ulps=False):
    """Error of ``computed`` (values, or HiFloat8 codes) against the float64 ``reference``, in format ``fmt``.

    Returns a dict (``_METRIC_KEYS``):

    * ``n``; ``max_abs``, ``max_rel``, ``rel_median`` (median |c - r| / |r| over r != 0: an element flushed to
      zero counts 1), ``rel_fro``: over the elements where c and r are finite;
    * ``n_ulp`` elements whose exact value is representable in ``fmt`` (r finite, smallest subnormal <= |r| <=
      largest finite) and whose result is finite; ``ulp_median``, ``ulp_p99``, ``ulp_max`` over those only (None
      when there are none), so a tensor that underflowed cannot look accurate in ULPs;
    * ``frac_overflow`` (of all elements), ``frac_subnormal`` (of the finite non-zero r: |r| below the smallest
      normal, where the format has less precision or none), ``frac_underflow`` (of the finite non-zero r: c == 0,
      flushed to zero by operand rounding or the output cast); None when the denominator is 0;
    * counts ``n_overflow``, ``n_underflow`` (the two fractions' numerators), ``n_nan``, ``n_inf``.

    No error metric is a number for an empty population: with no finite (c, r) pair, or with every non-zero
    exact value flushed to zero, ``max_abs`` .. ``ulp_max`` are None (the counts and shares say why).

    With ``return_ulps`` returns (dict, per-element ULP errors of the ``n_ulp`` elements).
    """
    fmt = _fmt_name(fmt)
    f = get_format(fmt)
    c = _values(computed, fmt).reshape(-1)
    r = np.asarray(reference, dtype=np.float64).reshape(-1)
    if c.shape != r.shape:
        raise ValueError(f"computed has {c.size} elements but reference has {r.size}; expected the same shape")
    thr, inclusive = _OVERFLOW[fmt]
    rfin = np.isfinite(r)
    ar = np.abs(r)
    past = (ar >= thr) if inclusive else (ar > thr)
    out = dict.fromkeys(_METRIC_KEYS)
    out["n"] = int(c.size)
    out["n_nan"] = int(np.isnan(c).sum())
    out["n_inf"] = int(np.isinf(c).sum())
    out["n_overflow"] = int((rfin & (np.isinf(c) | past | (np.isnan(c) & (ar > f.max)))).sum())
    nonzero = rfin & (r != 0)
    n_nonzero = int(nonzero.sum())
    out["n_underflow"] = int((nonzero & (c == 0)).sum())
    out["frac_overflow"] = out["n_overflow"] / c.size if c.size else None
    if n_nonzero:
        out["frac_underflow"] = out["n_underflow"] / n_nonzero
        out["frac_subnormal"] = float((nonzero & (ar < f.min_normal)).sum()) / n_nonzero
    m = np.isfinite(c) & rfin
    ulps = np.zeros(0)
    out["n_ulp"] = 0
    if m.any():
        cm, rm = c[m], r[m]
        d = np.abs(cm - rm)
        out["max_abs"] = float(d.max())
        nz = rm != 0
        if nz.any():
            rel = d[nz] / np.abs(rm[nz])
            out["max_rel"] = float(rel.max())
            out["rel_median"] = float(np.median(rel))
        nr = float(np.linalg.norm(rm))
        nd = float(np.linalg.norm(d))
        out["rel_fro"] = nd / nr if nr > 0 else (0.0 if nd == 0 else math.inf)
        arm = np.abs(rm)
        rep = (arm >= f.min_subnormal) & (arm <= f.max)
        out["n_ulp"] = int(rep.sum())
        if rep.any():
            ulps = np.asarray(ulp_distance(fmt, cm[rep], rm[rep]), dtype=np.float64)
            out.update(_ulp_summary(ulps, "ulp"))
    if n_nonzero and out["n_underflow"] == n_nonzero:
        # every non-zero exact value flushed: no error metric stands for the tensor (|0 - r| would look
        # tiny); the row's unf% (100 %) says why
        out.update(dict.fromkeys(_EMPTY_WHEN_FLUSHED))
        out["n_ulp"] = 0
        ulps = np.zeros(0)
    return (out, ulps) if return_ulps else out


# The error metrics left None (shown '-') when their population is empty: no finite (c, r) pair, or every
# non-zero exact value flushed to zero.  The row's unf%, NaN and Inf columns give the share left out.
_EMPTY_WHEN_FLUSHED = ("max_abs", "max_rel", "rel_median", "rel_fro", "ulp_median", "ulp_p99", "ulp_max")


def _spread_stats(runs, fmt):
    """Per element, the distance in steps of ``fmt`` between the largest and smallest of ``runs``: its median,
    p99, max and the fraction of elements where it is not 0, over the elements some run leaves finite and
    non-zero (None each when there are none: a tensor flushed to zero, or all NaN / Inf, has no spread to show)."""
    with np.errstate(invalid="ignore"):
        hi, lo = runs.max(axis=0).reshape(-1), runs.min(axis=0).reshape(-1)
        d = np.asarray(ulp_distance(fmt, hi, lo), dtype=np.float64)
        live = (np.isfinite(runs) & (runs != 0)).reshape(runs.shape[0], -1).any(axis=0)
    d = d[np.isfinite(d) & live]
    if not d.size:
        return dict.fromkeys(_SPREAD_KEYS)
    return {**_ulp_summary(d, "spread"), "frac_varying": float((d > 0).mean())}
