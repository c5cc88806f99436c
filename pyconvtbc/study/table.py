"""The columns of a study's tables: their headings, how each value is written, and the table layouts."""
from __future__ import annotations

import math
import textwrap

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


# The width of every text table and comment line a study prints (a terminal of 120 columns; --width changes
# it, 0 lifts it).  A table wider than that is printed as stacked tables that share its row labels (the leading
# label columns, repeated in each; or, when those take more than half the width, a row number 'row' that
# the first tables set beside the labels); nothing is dropped.  Markdown tables are never split.
TABLE_WIDTH = 120


def _span(widths):
    return sum(widths) + 2 * (len(widths) - 1)


def _render(headers, cells, markdown=False, width=TABLE_WIDTH, keys=1):
    """``cells`` under ``headers`` as aligned text (or Markdown), at most ``width`` characters a line when it
    can be (``_stack``: the first ``keys`` columns are the row labels); ``width`` None or 0: one table."""
    if markdown:
        esc = lambda v: str(v).replace("|", "\\|")  # noqa: E731  ("max |x|": a literal bar, not a column)
        lines = ["| " + " | ".join(map(esc, headers)) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(map(esc, c)) + " |" for c in cells]
        return "\n".join(lines)
    headers, cells = list(headers), [list(c) for c in cells]
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    if not width or _span(widths) <= width:
        return _block(headers, cells, range(len(headers)))
    return "\n\n".join(_stack(headers, cells, widths, width, min(max(keys, 0), len(headers))))


def _stack(headers, cells, widths, width, keys):
    """The stacked tables of a table wider than ``width``: the label columns (the first ``keys``) repeated in
    each when they take at most half the width, else a row number 'row' in each (the labels then go into the
    first tables like any column); the other columns packed in order, as many as fit beside them."""
    if keys and _span(widths[:keys]) <= width // 2:
        key_cols, rest = list(range(keys)), list(range(keys, len(headers)))
    else:
        headers = ["row"] + headers
        cells = [[str(i + 1)] + c for i, c in enumerate(cells)]
        widths = [max(3, len(str(len(cells))))] + widths
        key_cols, rest = [0], list(range(1, len(headers)))
    parts, cur = [], []
    for j in rest:
        if cur and _span([widths[i] for i in key_cols + cur + [j]]) > width:
            parts.append(cur)
            cur = []
        cur.append(j)
    parts.append(cur)
    out = []
    for part in parts:
        # a rejected row ('n/a (161002)' then blanks) reads 'n/a' in the tables its note is not in
        shown = []
        for c in cells:
            row = list(c)
            if all(c[j] == "" for j in part) and any(v.startswith("n/a (") for v in c):
                row[part[0]] = "n/a"
            shown.append(row)
        out.append(_block(headers, shown, key_cols + part))
    return out


def _block(headers, cells, cols):
    """The columns ``cols`` of a table as aligned text: numbers right-aligned, text left-aligned."""
    cols = list(cols)
    widths = {i: max(len(headers[i]), *(len(c[i]) for c in cells)) if cells else len(headers[i]) for i in cols}
    num = {i: all(_looks_numeric(c[i]) for c in cells) for i in cols}

    def line(vals):
        return "  ".join(vals[i].rjust(widths[i]) if num[i] else vals[i].ljust(widths[i]) for i in cols).rstrip()
    return "\n".join([line(headers), line({i: "-" * widths[i] for i in cols})] + [line(c) for c in cells])


def _comment(parts, width=TABLE_WIDTH, sep=" | "):
    """Comment lines ('# ...') holding ``parts`` joined by ``sep``, a new line where the next part would pass
    ``width`` (a part longer than that is wrapped at its spaces, continued after '#   ')."""
    lines, cur = [], None
    for p in parts:
        if cur is not None and width and len("# " + cur + sep + p) > width:
            lines.append(cur)
            cur = p
        else:
            cur = p if cur is None else cur + sep + p
    lines.append("" if cur is None else cur)
    out = []
    for text in lines:
        if not width or len("# " + text) <= width:
            out.append("# " + text)
        else:
            out += textwrap.wrap(text, width, initial_indent="# ", subsequent_indent="#   ",
                                 break_long_words=False, break_on_hyphens=False)
    return out


def _looks_numeric(s):
    try:
        float(s.rstrip("%"))
        return True
    except ValueError:
        return s in ("-", "", "n/a") or s.startswith("n/a (")
