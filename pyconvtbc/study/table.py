"""The columns of a study's tables: their headings, how each value is written, and the table layouts."""
from __future__ import annotations

import math

import numpy as np

from .metrics import _METRIC_KEYS

_MODE_FIELDS = ("input_dtype", "cube_math_type", "soc", "grad_weight_dtype", "compute", "hf32_rounding",
                "hf32_mantissa_bits", "hif8_rounding", "saturate")
_PROBLEM_FIELDS = ("shape", "distribution", "scale", "seed")
_METRICS = _METRIC_KEYS[1:]
_HEAD = {"shape": "shape", "distribution": "data", "scale": "scale", "seed": "seed", "input_dtype": "in",
         "cube_math_type": "cubeMathType", "soc": "soc", "grad_weight_dtype": "gw dtype", "compute": "C",
         "hf32_rounding": "hf32 rnd", "hf32_mantissa_bits": "hf32 bits", "hif8_rounding": "hif8 rnd",
         "saturate": "sat", "grad": "grad", "out_format": "out fmt", "reduction_length": "n_red",
         "max_abs": "max abs", "max_rel": "max rel", "rel_fro": "rel Frob", "ulp_median": "ULP med",
         "ulp_p99": "ULP p99", "ulp_max": "ULP max", "n_overflow": "ovf", "n_underflow": "unf", "n_nan": "NaN",
         "n_inf": "Inf", "permutations": "perms", "order": "order", "spread_median": "spread med",
         "spread_p99": "spread p99", "spread_max": "spread max", "frac_varying": "varying"}


def _fmt_value(key, v):
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "on" if v else "off"
    if key == "frac_varying":
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if key.startswith("ulp") or key.startswith("spread"):
            return f"{v:.0f}" if v == round(v) and abs(v) < 1e7 else f"{v:.3g}"
        if key == "scale":
            return f"{v:g}"
        return f"{v:.3g}"
    return str(v)


def _render(headers, cells, markdown=False):
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(c) + " |" for c in cells]
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
