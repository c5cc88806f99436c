"""The columns of a study's tables: their headings, how each value is written, and the table layouts."""
from __future__ import annotations

import math

import numpy as np

from .metrics import _METRIC_KEYS

_MODE_FIELDS = ("input_dtype", "cube_math_type", "soc", "grad_weight_dtype", "compute", "hf32_rounding",
                "hf32_mantissa_bits", "hif8_rounding", "saturate", "accumulation", "block_size")
_PROBLEM_FIELDS = ("shape", "distribution", "scale", "seed", "dy_scale")
# The metric columns of a table of repeats (each as mean +- the half-width of its 95 % interval).
_REPEAT_METRICS = ("rel_median", "rel_fro", "n_ulp", "ulp_median", "ulp_p99", "frac_overflow", "frac_subnormal",
                   "frac_underflow", "n_nan", "n_inf")
# The metric columns of the per-mode table (the CSV / JSON rows hold every key of ``_METRIC_KEYS``).
_METRICS = ("max_abs", "max_rel", "rel_median", "rel_fro", "n_ulp", "ulp_median", "ulp_p99", "ulp_max",
            "frac_overflow", "frac_subnormal", "frac_underflow", "n_nan", "n_inf")
_FRACTIONS = ("frac_varying", "frac_overflow", "frac_subnormal", "frac_underflow", "frac_flushed",
              "frac_normal", "frac_below_normal")
_HEAD = {"shape": "shape", "distribution": "data", "dy_scale": "gO scale", "repeats": "runs", "scale": "scale",
         "seed": "seed", "input_dtype": "in",
         "cube_math_type": "cubeMathType", "soc": "soc", "grad_weight_dtype": "gw dtype", "compute": "C",
         "hf32_rounding": "hf32 rnd", "hf32_mantissa_bits": "hf32 bits", "hif8_rounding": "hif8 rnd",
         "saturate": "sat", "accumulation": "accum", "block_size": "k0", "grad": "grad", "out_format": "out fmt",
         "reduction_length": "n_red",
         "max_abs": "max abs", "max_rel": "max rel", "rel_median": "rel med", "rel_fro": "rel Frob",
         "n_ulp": "ULP n", "frac_overflow": "ovf%", "frac_subnormal": "sub%", "frac_underflow": "unf%",
         "ulp_median": "ULP med",
         "ulp_p99": "ULP p99", "ulp_max": "ULP max", "n_overflow": "ovf", "n_underflow": "unf", "n_nan": "NaN",
         "n_inf": "Inf", "permutations": "perms", "order": "order", "spread_median": "spread med",
         "spread_p99": "spread p99", "spread_max": "spread max", "frac_varying": "varying"}


def _fmt_value(key, v):
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "on" if v else "off"
    if key in _FRACTIONS:
        return _percent(v)
    if key == "hf32_mantissa_bits" and v not in (10, 11):
        return f"{v} (what-if)"
    if key == "dy_scale":
        e = math.log2(v) if v > 0 else 0.5
        return f"2^{int(e)}" if e == int(e) else f"{v:g}"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if key.startswith("ulp") or key.startswith("spread"):
            return f"{v:.0f}" if v == round(v) and abs(v) < 1e7 else f"{v:.3g}"
        if key == "scale":
            return f"{v:g}"
        return f"{v:.3g}"
    return str(v)


def _clipped(row, key):
    """Whether the 95 % interval of ``key`` in ``row`` was cut at the metric's bound (0, or 1 for a share): it is
    then not symmetric about the mean."""
    m, lo, hi = row.get(key), row.get(f"{key}_lo"), row.get(f"{key}_hi")
    if m is None or lo is None or hi is None:
        return False
    return not math.isclose(m - lo, hi - m, rel_tol=1e-6, abs_tol=1e-300)


def _fmt_interval(key, row):
    """A repeated metric as 'mean +-half' (half the width of its 95 % interval), or 'mean [lo, hi]' when the
    interval was cut at the metric's bound (0, or 1 for a share); '-' when missing."""
    m, lo, hi = row.get(key), row.get(f"{key}_lo"), row.get(f"{key}_hi")
    if m is None:
        return "-"
    if lo is None or hi is None:
        return _fmt_value(key, m)
    if _clipped(row, key):
        if key in _FRACTIONS:
            return f"{_percent(m)} [{_percent(lo)}, {_percent(hi)}]"
        if key == "n_ulp":
            return f"{m:.0f} [{lo:.2g}, {hi:.2g}]"
        return f"{_fmt_value(key, float(m))} [{lo:.2g}, {hi:.2g}]"
    half = (hi - lo) / 2
    if key in _FRACTIONS:
        return f"{_percent(m)} ±{_percent(min(half, 1.0))}"
    if key == "n_ulp":
        return f"{m:.0f} ±{half:.2g}"
    return f"{_fmt_value(key, float(m))} ±{half:.2g}"


def _percent(v):
    """A fraction as a percentage that never reads 0 % or 100 % unless it is exactly that."""
    if v == 0 or v == 1:
        return f"{100 * v:.0f}%"
    t = f"{100 * v:.2f}%"
    if t == "0.00%":
        return "<0.01%"
    if t == "100.00%":
        return ">99.99%"
    return t


def _render(headers, cells, markdown=False):
    if markdown:
        esc = lambda v: str(v).replace("|", "\\|")  # noqa: E731  ("max |x|": a literal bar, not a column)
        lines = ["| " + " | ".join(map(esc, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(map(esc, c)) + " |" for c in cells]
        return "\n".join(lines)
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    num = [all(_looks_numeric(c[i]) for c in cells) for i in range(len(headers))]

    def line(vals):
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(vals, widths, num)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(c) for c in cells])


def _looks_numeric(s):
    try:
        float(s.rstrip("%"))
        return True
    except ValueError:
        return s in ("-", "") or s.startswith("n/a (")
