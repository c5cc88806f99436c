"""Error metrics of a computed gradient against its float64 reference, in steps of the output format."""
from __future__ import annotations

import math

import numpy as np

from ..codecs import hif8_decode
from ..formats import HIF8_OVERFLOW, get_format, ulp_distance
from .choices import _FORMAT_ALIASES

# Overflow threshold of each output format: (value, inclusive).  A finite exact value at or past it cannot be
# represented: it rounds to Inf / NaN (or saturates).
#   IEEE formats: max + half its ulp; max has an odd significand, so the tie rounds (to even) up -> inclusive.
#   HiFloat8: 40960 = 1.25 * 2^15, ties away from zero -> inclusive (docs/semantics.md, section 5).
#   E4M3FN: 464 = 448 + 16 ties to even 448 (significand 1.110) -> exclusive.
_OVERFLOW = {
    "float32": (float.fromhex("0x1.fffffep127") + 2.0 ** (127 - 24), True),
    "float16": (65504.0 + 16.0, True),
    "bfloat16": (float.fromhex("0x1.fep127") + 2.0 ** (127 - 8), True),
    "hifloat8": (HIF8_OVERFLOW, True),
    "float8_e4m3fn": (464.0, False),
}

# The keys of ``error_metrics`` and ``_spread_stats``, in order (every one None on a row the operator rejected).
_METRIC_KEYS = ("n", "max_abs", "max_rel", "rel_fro", "ulp_median", "ulp_p99", "ulp_max", "n_overflow",
                "n_underflow", "n_nan", "n_inf")
_SPREAD_KEYS = ("spread_median", "spread_p99", "spread_max", "frac_varying")


def _values(computed, fmt):
    a = np.asarray(computed)
    if fmt == "hifloat8" and a.dtype == np.uint8:
        return hif8_decode(a).astype(np.float64)
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


def error_metrics(computed, reference, fmt, *, return_ulps=False):
    """Error of ``computed`` (values, or HiFloat8 codes) against the float64 ``reference``, in format ``fmt``.

    Returns a dict: n, max_abs, max_rel, rel_fro, ulp_median, ulp_p99, ulp_max (over the elements where both
    are finite; None when there are none), n_overflow, n_underflow, n_nan, n_inf (see the module docstring).
    With ``return_ulps`` returns (dict, per-element ULP errors of the measured elements).
    """
    fmt = _fmt_name(fmt)
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
    out["n_overflow"] = int((rfin & (np.isinf(c) | past | (np.isnan(c) & (ar > get_format(fmt).max)))).sum())
    out["n_underflow"] = int((rfin & (r != 0) & (c == 0)).sum())
    m = np.isfinite(c) & rfin
    ulps = np.zeros(0)
    if m.any():
        cm, rm = c[m], r[m]
        d = np.abs(cm - rm)
        out["max_abs"] = float(d.max())
        nz = rm != 0
        out["max_rel"] = float((d[nz] / np.abs(rm[nz])).max()) if nz.any() else None
        nr = float(np.linalg.norm(rm))
        nd = float(np.linalg.norm(d))
        out["rel_fro"] = nd / nr if nr > 0 else (0.0 if nd == 0 else math.inf)
        ulps = np.asarray(ulp_distance(fmt, cm, rm), dtype=np.float64)
        out.update(_ulp_summary(ulps, "ulp"))
    return (out, ulps) if return_ulps else out


def _spread_stats(runs, fmt):
    """Per element, the distance in steps of ``fmt`` between the largest and smallest of ``runs``: its median,
    p99, max and the fraction of elements where it is not 0 (None each when no distance is finite)."""
    with np.errstate(invalid="ignore"):
        hi, lo = runs.max(axis=0).reshape(-1), runs.min(axis=0).reshape(-1)
        d = np.asarray(ulp_distance(fmt, hi, lo), dtype=np.float64)
    d = d[np.isfinite(d)]
    if not d.size:
        return dict.fromkeys(_SPREAD_KEYS)
    return {**_ulp_summary(d, "spread"), "frac_varying": float((d > 0).mean())}
