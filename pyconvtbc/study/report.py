"""A study's result (``StudyResult``) and its reports: the text table, CSV, JSON and Markdown."""
from __future__ import annotations

import csv
import json
import math
import os
from dataclasses import dataclass, field

import numpy as np

from .choices import _uniq
from .metrics import _SPREAD_KEYS
from .plots import plot_result
from .table import _HEAD, _METRICS, _MODE_FIELDS, _PROBLEM_FIELDS, _fmt_value, _render

_DEFINITIONS = """\
- error of each gradient against a float64 reference; `max abs` = max |c - r|, `max rel` = max |c - r| / |r|
  (r != 0), `rel Frob` = ||c - r||_F / ||r||_F, over the elements where c and r are finite;
- `ULP med/p99/max`: distance from c to r in steps of the output format (`out fmt`; HiFloat8: tapered, in code
  order; fractional inside a gap); p99 is nearest-rank;
- `ovf` overflow (r finite, c infinite or r past the format's overflow threshold), `unf` underflow to zero
  (r != 0, c == 0), `NaN` / `Inf`: counts of such c;
- `n/a (161002)`: the operator rejects this mode (for example FLOAT KEEP_DTYPE / USE_HF32 on ascend910, BF16
  on ascend910);
- `-`: a setting that cannot change this row (HF32 settings unless C is HF32, HiFloat8 rounding unless gradWeight
  is HIFLOAT8, saturation unless gradWeight is 8-bit)."""

_SPREAD_DEFINITION = ("- `spread`: for each output element, the distance (in output-format steps) between the largest "
                      "and smallest of the results obtained with the different fp32 accumulation orders; `varying`: "
                      "the fraction of elements whose result depends on the order.")


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return _json_safe(float(v))
    return v


@dataclass
class StudyResult:
    """Rows (one dict per cell x gradient) of a study, with writers for every output."""

    kind: str                    # "modes" | "spread" | "growth"
    rows: list
    meta: dict
    samples: list = field(default_factory=list, repr=False)   # per row: ULP errors (subsampled) or None

    # -- selection helpers
    def valid_rows(self):
        return [r for r in self.rows if r["status"] == 0]

    def _context_columns(self):
        """(columns that vary, {column: value} that are constant) among the problem and mode fields."""
        varying, constant = [], {}
        for k in _PROBLEM_FIELDS + _MODE_FIELDS + ("out_format",):
            vals = _uniq(r.get(k) for r in self.rows)
            if len(vals) > 1:
                varying.append(k)
            elif vals and vals[0] is not None and k != "out_format":
                constant[k] = vals[0]
        if self.kind == "growth":
            varying = [k for k in varying if k != "shape"]
        return varying, constant

    def _mode_label(self, row, varying):
        """A short label of ``row``'s values of the ``varying`` problem and mode fields."""
        parts = []
        for k in _PROBLEM_FIELDS + _MODE_FIELDS:
            v = row.get(k)
            if k not in varying or v is None:
                continue
            if k == "saturate":
                parts.append("sat" if v else "nosat")
            elif k == "hf32_mantissa_bits":
                parts.append(f"{v}b")
            elif k == "scale":
                parts.append(f"x{v:g}")
            elif k == "grad_weight_dtype":
                parts.append(f"gw={v}")
            else:
                parts.append(str(v))
        return " ".join(parts) if parts else "default"

    # -- text outputs
    def header_lines(self):
        _, constant = self._context_columns()
        lines = []
        if self.kind == "growth":
            m = self.meta
            lines.append(f"sweep: {m.get('axis')} in {m.get('values')} (base {m.get('base_shape')})")
        for k, v in constant.items():
            if k == "shape" and self.kind == "growth":
                continue
            lines.append(f"{_HEAD.get(k, k)}: {_fmt_value(k, v)}")
        return lines

    def _table_cells(self):
        if self.kind == "growth":
            return self._growth_pivot(self.meta.get("metric", "rel_fro"))
        varying, _ = self._context_columns()
        cols = varying + ["grad"]
        if "out_format" not in cols:
            cols.append("out_format")
        metrics = list(_METRICS) if self.kind == "modes" else ["ulp_median", "ulp_p99", "ulp_max", *_SPREAD_KEYS]
        headers = [_HEAD[c] for c in cols + metrics]
        cells = []
        for r in self.rows:
            ctx = [_fmt_value(c, r.get(c)) for c in cols]
            if r["status"]:
                cells.append(ctx + [f"n/a ({r['status']})"] + [""] * (len(metrics) - 1))
            else:
                cells.append(ctx + [_fmt_value(m, r.get(m)) for m in metrics])
        return headers, cells

    def _growth_pivot(self, metric):
        axis = self.meta.get("axis", "T")
        values = list(self.meta.get("values", []))
        varying, _ = self._context_columns()
        mode_cols = [k for k in _MODE_FIELDS if k in varying]
        groups = {}
        for r in self.rows:
            key = (tuple(r.get(k) for k in _MODE_FIELDS), r["grad"])
            groups.setdefault(key, {})[r[axis]] = r
        headers = [_HEAD[k] for k in mode_cols] + ["grad", "out fmt", "n_red"] + \
            [f"{axis}={v}" for v in values] + ["slope"]
        slopes = {(tuple(s["cell"][k] for k in _MODE_FIELDS), s["grad"]): s["slope"]
                  for s in self.meta.get("slopes", [])}
        cells = []
        for (mode, grad), byv in groups.items():
            rows = [byv.get(v) for v in values]
            present = [r for r in rows if r is not None]
            nred = _uniq(r["reduction_length"] for r in present)
            nred_s = str(nred[0]) if len(nred) == 1 else f"{nred[0]}..{nred[-1]}"
            vals = []
            for r in rows:
                if r is None:
                    vals.append("")
                elif r["status"]:
                    vals.append(f"n/a ({r['status']})")
                else:
                    vals.append(_fmt_value(metric, r.get(metric)))
            sl = slopes.get((mode, grad))
            cells.append([_fmt_value(k, present[0].get(k)) for k in mode_cols] +
                         [grad, present[0]["out_format"], nred_s] + vals + ["-" if sl is None else f"{sl:.2f}"])
        return headers, cells

    def table(self):
        """The result as a plain-text table (constant settings on the lines above it)."""
        headers, cells = self._table_cells()
        title = {"modes": "per-mode error vs float64 reference",
                 "spread": f"reduction-order spread ({self.meta.get('permutations')} orders) next to the mode's "
                           "error, in ULPs of the output format",
                 "growth": f"{self.meta.get('metric', 'rel_fro')} vs {self.meta.get('axis', 'T')} "
                           "(slope: d log(error) / d log(reduction length))"}[self.kind]
        return "\n".join([f"# {title}", "# " + " | ".join(self.header_lines()), _render(headers, cells)])

    def to_csv(self, path):
        keys = list(self.rows[0]) if self.rows else []
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            for r in self.rows:
                w.writerow({k: ("" if v is None else v) for k, v in r.items()})
        return path

    def to_json(self, path):
        doc = {"kind": self.kind, "meta": {k: _json_safe(v) for k, v in self.meta.items()},
               "rows": [{k: _json_safe(v) for k, v in r.items()} for r in self.rows]}
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
        return path

    def to_markdown(self, path, plots=()):
        headers, cells = self._table_cells()
        title = {"modes": "Per-mode error of the emulated NPU gradients",
                 "spread": "Reduction-order spread next to each mode's error",
                 "growth": "Error growth with the reduction length"}[self.kind]
        m = self.meta
        lines = [f"# pyconvtbc precision study: {title}", "",
                 f"pyconvtbc {m.get('version')}, {m.get('date')}.", ""]
        if m.get("command"):
            lines += ["```", m["command"], "```", ""]
        lines += ["## Setup", ""] + [f"- {l}" for l in self.header_lines()]
        lines += [f"- reference: {m.get('reference_text', '')}", f"- deterministic: {m.get('deterministic')}", ""]
        lines += ["## Results", "", _render(headers, cells, markdown=True), ""]
        if plots:
            lines += ["## Plots", ""]
            base = os.path.dirname(os.path.abspath(path))
            for p in plots:
                rel = os.path.relpath(os.path.abspath(p), base)
                lines += [f"![{os.path.splitext(os.path.basename(p))[0]}]({rel})", ""]
        lines += ["## Definitions", "", _DEFINITIONS, ""]
        if self.kind == "spread":
            lines += [_SPREAD_DEFINITION, ""]
        with open(path, "w") as fh:
            fh.write("\n".join(lines))
        return path

    def plot(self, outdir, prefix=None):
        """PNG plots into ``outdir``; returns their paths, or [] when matplotlib is not installed."""
        return plot_result(self, outdir, prefix)

    def save(self, outdir, prefix=None, plots=True):
        """Write <prefix>.csv, .json, .md (and PNG plots when asked and possible); returns {kind: path(s)}."""
        prefix = prefix or ("study" if self.kind == "modes" else self.kind)
        os.makedirs(outdir, exist_ok=True)
        made = {"csv": self.to_csv(os.path.join(outdir, f"{prefix}.csv")),
                "json": self.to_json(os.path.join(outdir, f"{prefix}.json"))}
        pngs = self.plot(os.path.join(outdir, "plots"), prefix) if plots else []
        made["plots"] = pngs
        made["md"] = self.to_markdown(os.path.join(outdir, f"{prefix}.md"), pngs)
        return made
