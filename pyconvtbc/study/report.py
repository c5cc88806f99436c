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
from .table import (_HEAD, _METRICS, _MODE_FIELDS, _PROBLEM_FIELDS, _REPEAT_METRICS, TABLE_WIDTH, _clipped,
                    _comment, _fmt_interval, _fmt_value, _render)

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


def _check_prefix(prefix, argname="prefix"):
    """ValueError unless ``prefix`` is a plain file name (no directory part, not '.' or '..')."""
    if (not isinstance(prefix, str) or not prefix or prefix in (".", "..") or "\0" in prefix
            or os.path.basename(prefix) != prefix or os.path.isabs(prefix)
            or (os.altsep and os.altsep in prefix) or "/" in prefix or "\\" in prefix):
        raise ValueError(f"{argname}: {prefix!r} is not a plain file name; expected a name without a directory "
                         "part (the files are written inside --out)")
    return prefix


def _writing(write, path, *args):
    """``write(path, *args)``, with ``path`` on an OSError that names no file (ENOSPC and the like are raised by
    write() or close(), whose errors carry no file name)."""
    try:
        return write(path, *args)
    except OSError as e:
        if e.filename is None:
            e.filename = os.fspath(path)
        raise


def default_prefix(kind):
    """The output files' name without --prefix: 'study' for the modes table, else the study's kind."""
    return "study" if kind == "modes" else kind


def _merge_identical(cells, raw, columns):
    """Rows that differ in one mode column only and have identical results (``raw``: each row's metric values)
    are printed once, that column listing every value they stand for ('(all)' when that is every value the
    column takes in the table).  Columns are merged one after another, in order."""
    rows = list(zip(cells, raw))
    for col in columns:
        every = {c[col] for c, _ in rows}
        groups, order = {}, []
        for c, r in rows:
            key = (tuple(v for j, v in enumerate(c) if j != col), r)
            if key not in groups:
                groups[key] = []
                order.append(key)
            groups[key].append((c, r))
        merged = []
        for key in order:
            members = groups[key]
            c = list(members[0][0])
            if len(members) > 1:
                vals = list(dict.fromkeys(m[0][col] for m in members))
                c[col] = "(all)" if set(vals) == every and len(vals) > 2 else ",".join(vals)
            merged.append((c, members[0][1]))
        rows = merged
    return [c for c, _ in rows]


@dataclass
class StudyResult:
    """Rows (one dict per cell x gradient) of a study, with writers for every output."""

    kind: str                    # "modes" | "spread" | "growth"
    rows: list
    meta: dict
    samples: list = field(default_factory=list, repr=False)   # per row: ULP errors (subsampled) or None
    magnitude_values: list = field(default_factory=list, repr=False)   # (key, formats, |values|) per tensor

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
            elif vals and vals[0] is not None and k != "out_format" and not (k == "dy_scale" and vals[0] == 1):
                constant[k] = vals[0]
        if self.kind == "growth":
            varying = [k for k in varying if k != "shape"]
        if self.kind == "window":
            varying = [k for k in varying if k != "dy_scale"]
            constant.pop("dy_scale", None)
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
                parts.append(f"x{v:g}" if isinstance(v, float) else str(v))
            elif k == "dy_scale":
                parts.append(f"gO*{_fmt_value(k, v)}")
            elif k == "grad_weight_dtype":
                parts.append(f"gw={v}")
            elif k == "block_size":
                parts.append(f"k0={v}")
            else:
                parts.append(str(v))
        return " ".join(parts) if parts else "default"

    # -- text outputs
    def header_lines(self):
        _, constant = self._context_columns()
        lines = []
        if self.meta.get("repeats", 1) > 1:
            shown = [self.meta.get("metric", "rel_fro")] if self.kind == "growth" else list(_REPEAT_METRICS)
            cut = any(_clipped(r, k) for r in self.rows for k in shown)
            lines.append(f"repeats: {self.meta['repeats']} seeds, mean ±half-width of the 95 % interval (t)"
                         + ("; [lo, hi]: an interval cut at 0 (or 100 %)" if cut else ""))
        if self.kind == "window":
            ex = self.meta.get("exponents", [])
            lines.append(f"scales: 2^{ex[0]}..2^{ex[-1]}" if ex else "scales: none")
        if self.kind == "growth":
            m = self.meta
            lines.append(f"sweep: {m.get('axis')} in {m.get('values')} (base {m.get('base_shape')})")
        for k, v in constant.items():
            if k == "shape" and self.kind == "growth":
                continue
            lines.append(f"{_HEAD.get(k, k)}: {_fmt_value(k, v)}")
        numeric = [p.get("scale") for p in self.meta.get("problems", []) if not isinstance(p.get("scale"), str)]
        if any(s != 1 for s in numeric if s is not None) and self.meta.get("scale_operands"):
            lines.append("scale multiplies: " + ("every operand" if self.meta["scale_operands"] == "all"
                                                 else "grad_output"))
        if self.kind != "spread" and "deterministic" in self.meta and self.meta["deterministic"] is None:
            # --non-deterministic: the seed fixes the data, not the order
            lines.append("order: the chip's default (ascend910b / ascend910: a fresh gradWeight order per call, "
                         "results vary run to run; the seed fixes the data only)")
        return lines

    def _window_cells(self):
        varying, _ = self._context_columns()
        cols = [k for k in varying if k not in ("out_format",)]
        headers = [_HEAD[c] for c in cols] + ["grad", "out fmt", "window (gO scale)", "octaves", "best rel Frob",
                                                "at", "worst rel Frob"]
        cells = []
        for w in self.meta.get("windows", []):
            ctx = [_fmt_value(c, w.get(c)) for c in cols] + [w["grad"], str(w["out_format"])]
            if w["status"]:
                cells.append(ctx + [f"n/a ({w['status']})"] + [""] * 4)
            elif w["lo"] is None:
                cells.append(ctx + ["none", "-", "-", "-", "-"])
            else:
                cells.append(ctx + [f"2^{w['lo']}..2^{w['hi']}", str(w["octaves"]), _fmt_value("rel_fro", w["best"]),
                                    f"2^{w['best_at']}", _fmt_value("rel_fro", w["worst"])])
        return headers, cells, len(cols) + 2

    def _table_cells(self):
        """(headers, cells, the number of leading label columns) of the result's table."""
        if self.kind == "growth":
            return self._growth_pivot(self.meta.get("metric", "rel_fro"))
        if self.kind == "window":
            return self._window_cells()
        varying, _ = self._context_columns()
        cols = varying + ["grad"]
        if "out_format" not in cols:
            cols.append("out_format")
        repeated = self.meta.get("repeats", 1) > 1
        if self.kind == "modes":
            metrics = list(_REPEAT_METRICS if repeated else _METRICS)
        else:
            metrics = ["n_ulp", "ulp_median", "ulp_p99", "ulp_max", *_SPREAD_KEYS, "frac_underflow", "n_nan",
                       "n_inf"]
        headers = [_HEAD[c] for c in cols + metrics]
        cells, raw = [], []
        fmt = (lambda m, r: _fmt_interval(m, r)) if repeated else (lambda m, r: _fmt_value(m, r.get(m)))
        for r in self.rows:
            ctx = [_fmt_value(c, r.get(c)) for c in cols]
            if r["status"]:
                cells.append(ctx + [f"n/a ({r['status']})"] + [""] * (len(metrics) - 1))
            else:
                cells.append(ctx + [fmt(m, r) for m in metrics])
            raw.append(tuple(repr(r.get(k)) for k in r if k in metrics or k.endswith(("_lo", "_hi"))
                             or k == "status"))
        mergeable = [i for i, c in enumerate(cols) if c in _MODE_FIELDS]
        return headers, _merge_identical(cells, raw, mergeable), len(cols)

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
                elif self.meta.get("repeats", 1) > 1:
                    vals.append(_fmt_interval(metric, r))
                else:
                    vals.append(_fmt_value(metric, r.get(metric)))
            sl = slopes.get((mode, grad))
            cells.append([_fmt_value(k, present[0].get(k)) for k in mode_cols] +
                         [grad, present[0]["out_format"], nred_s] + vals + ["-" if sl is None else f"{sl:.2f}"])
        return headers, cells, len(mode_cols) + 3

    def table(self, width=TABLE_WIDTH):
        """The result as a plain-text table (constant settings on the comment lines above it), every line at
        most ``width`` characters where it can be (a wider table is stacked, see ``TABLE_WIDTH``; None or 0: one
        table, lines as long as they come)."""
        headers, cells, keys = self._table_cells()
        title = {"modes": "per-mode error vs float64 reference",
                 "spread": f"reduction-order spread ({self._spread_runs()}) next to the mode's error, in ULPs of "
                           "the output format",
                 "growth": f"{self.meta.get('metric', 'rel_fro')} vs {self.meta.get('axis', 'T')} "
                           "(slope: d log(error) / d log(reduction length))",
                 "window": f"scale window: grad_output scales 2^e where overflow and sub-normal fractions are both "
                           f"<= {self.meta.get('threshold', 0):g}"}[self.kind]
        return "\n".join(_comment([title], width) + _comment(self.header_lines(), width)
                         + [_render(headers, cells, width=width, keys=keys)])

    def _spread_runs(self):
        """What the spread compares: N orders (sampled, or the operator's), or N runs in one fixed order."""
        n, m = self.meta.get("permutations"), self.meta
        operator = m.get("order_source") == "operator"
        if m.get("order") == "fixed":
            return f"{n} deterministic calls of the operator" if operator else f"{n} runs in one fixed order"
        return f"{n} orders{', from the operator' if operator else ''}"

    def magnitude_table(self, markdown=False, width=TABLE_WIDTH):
        """Where each operand's and exact gradient's values lie against each format's limits (modes only; ''
        when the study has no magnitude view); ``width`` as for ``table``."""
        mags = self.meta.get("magnitudes") or []
        if not mags:
            return ""
        ctx = [k for k in ("shape", "distribution", "scale", "input_dtype") if len(_uniq(m[k] for m in mags)) > 1]
        # sub%: every non-zero value below the smallest normal, the flushed ones included (the error table's
        # sub%); flushed%: the part of it that rounds to zero
        headers = [_HEAD[k] for k in ctx] + ["tensor", "format", "min |x|>0", "median |x|", "max |x|", "zero",
                                             "sub%", "flushed%", "normal%", "ovf%"]
        cells = []
        for m in mags:
            num = ([_fmt_value("x", m[k]) for k in ("min_nonzero", "median", "max")] if m["max"] is not None
                   else ["-"] * 3)
            fr = [_fmt_value(k, m.get(k)) for k in ("frac_below_normal", "frac_flushed", "frac_normal",
                                                     "frac_overflow")]
            cells.append([_fmt_value(k, m[k]) for k in ctx] + [m["tensor"], m["format"], *num, str(m["n_zero"]),
                                                              *fr])
        return _render(headers, cells, markdown=markdown, width=width, keys=len(ctx) + 2)

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
        headers, cells, _ = self._table_cells()
        title = {"modes": "Per-mode error of the emulated NPU gradients",
                 "spread": "Reduction-order spread next to each mode's error",
                 "growth": "Error growth with the reduction length",
                 "window": "Scale window of each mode"}[self.kind]
        m = self.meta
        lines = [f"# pyconvtbc precision study: {title}", "",
                 f"pyconvtbc {m.get('version')}, {m.get('date')}.", ""]
        if m.get("command"):
            lines += ["```", m["command"], "```", ""]
        lines += ["## Setup", ""] + [f"- {l}" for l in self.header_lines()]
        lines += [f"- reference: {m.get('reference_text', '')}", f"- deterministic: {m.get('deterministic')}", ""]
        lines += ["## Results", "", _render(headers, cells, markdown=True), ""]
        if self.meta.get("magnitudes"):
            lines += ["## Magnitudes", "", "Where the values lie against each format's limits (operands: against "
                      "the compute precisions; gradients: the exact values against their output formats).", "",
                      self.magnitude_table(markdown=True), ""]
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
        prefix = prefix or default_prefix(self.kind)
        _check_prefix(prefix)
        os.makedirs(outdir, exist_ok=True)
        made = {"csv": _writing(self.to_csv, os.path.join(outdir, f"{prefix}.csv")),
                "json": _writing(self.to_json, os.path.join(outdir, f"{prefix}.json"))}
        pngs = self.plot(os.path.join(outdir, "plots"), prefix) if plots else []    # (names its file on error)
        made["plots"] = pngs
        made["md"] = _writing(self.to_markdown, os.path.join(outdir, f"{prefix}.md"), pngs)
        return made
