"""Repeats over seeds: each row's metrics as a mean with a 95 % confidence interval (Student's t), cut to the
range the metric cannot leave (>= 0 for every metric, <= 1 for the shares)."""
from __future__ import annotations

import math

import numpy as np

from .metrics import _METRIC_KEYS, _SPREAD_KEYS

# Two-sided 95 % quantiles of Student's t by degrees of freedom (a df between two entries uses the smaller one,
# which gives the wider, conservative interval); beyond 120: the normal 1.96.
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         11: 2.201, 12: 2.179, 13: 2.160, 14: 2.145, 15: 2.131, 16: 2.120, 17: 2.110, 18: 2.101, 19: 2.093,
         20: 2.086, 25: 2.060, 30: 2.042, 40: 2.021, 60: 2.000, 120: 1.980}

# The metrics averaged over repeats (counts are averaged too; every one gets _lo / _hi bounds).
_REPEATED = tuple(k for k in _METRIC_KEYS if k != "n") + _SPREAD_KEYS
# Row fields that differ between the repeats of one row (not part of its identity).
_PER_RUN = ("seed", "dy_scale", "message") + _REPEATED


def t_quantile(df):
    """The 97.5 % quantile of Student's t with ``df`` degrees of freedom (df >= 1)."""
    if df >= 1000:
        return 1.96
    return _T975[max(d for d in _T975 if d <= df)]


def mean_interval(values, bounds=(None, None)):
    """(mean, low, high) of the 95 % t-interval of the mean of ``values`` (None values dropped); low = high =
    mean for one value; (None, None, None) for none.  ``bounds`` = (lo, hi): the range the quantity cannot leave
    (e.g. (0, None) for an error, (0, 1) for a fraction); the interval is cut to it (None: no bound)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if not v.size:
        return None, None, None
    m = float(v.mean())
    if v.size == 1:
        return m, m, m
    half = t_quantile(v.size - 1) * float(v.std(ddof=1)) / math.sqrt(v.size)
    lo, hi = m - half, m + half
    if bounds[0] is not None:
        lo = max(lo, bounds[0])
    if bounds[1] is not None:
        hi = min(hi, bounds[1])
    return m, lo, hi


def _bounds(key):
    """Every repeated metric is >= 0 by definition (errors, ULP distances, counts, spreads); shares are <= 1."""
    return (0.0, 1.0) if key.startswith("frac_") else (0.0, None)


def aggregate(rows, samples):
    """Rows of several seeds -> one row per (everything but the seed): each metric k the mean, with k_lo / k_hi
    its 95 % interval, ``repeats`` the number of seeds and ``seed`` 'a..b'.  Samples: the first seed's."""
    groups, order = {}, []
    for i, r in enumerate(rows):
        key = tuple((k, r[k]) for k in r if k not in _PER_RUN)
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(i)
    out_rows, out_samples = [], []
    for key in order:
        idx = groups[key]
        first = rows[idx[0]]
        row = dict(first)
        seeds = [rows[i]["seed"] for i in idx]
        row["seed"] = f"{min(seeds)}..{max(seeds)}" if len(idx) > 1 else seeds[0]
        row["repeats"] = len(idx)
        scales = {rows[i]["dy_scale"] for i in idx}
        row["dy_scale"] = first["dy_scale"] if len(scales) == 1 else None
        for k in _REPEATED:
            if k not in first:
                continue
            m, lo, hi = mean_interval([rows[i][k] for i in idx], _bounds(k))
            row[k], row[f"{k}_lo"], row[f"{k}_hi"] = m, lo, hi
        out_rows.append(row)
        out_samples.append(samples[idx[0]])
    return out_rows, out_samples
