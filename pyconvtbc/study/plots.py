"""PNG plots of a study's result; written only when matplotlib (the ``plot`` extra) is installed.

Rules every figure follows:

* ULP errors of different output formats never share an axis: one panel per (gradient, output format); the
  bar charts use the relative Frobenius error, which is comparable across formats.
* Modes whose results are identical (same values, so the same bar or curve) are merged into one bar or curve
  whose label lists every mode it stands for ("A = B"), in every figure.
* A mode the operator rejects keeps its place, marked with its status (``n/a (161002)``).
* Readable in black and white: curves differ by line style and marker, bars by hatching, limits by line style,
  and every series is labelled.
"""
from __future__ import annotations

import math
import os

import numpy as np

from .choices import _uniq
from .metrics import format_limits
from .plot_layout import legend_below, readable
from .table import _HEAD, _MODE_FIELDS, _PROBLEM_FIELDS

_STYLES = [("-", "o"), ("--", "s"), (":", "^"), ("-.", "D"), ((0, (5, 1, 1, 1)), "v"), ((0, (1, 3)), "x"),
           ((0, (8, 2)), "P"), ((0, (3, 1, 1, 1, 1, 1)), "*")]
_HATCHES = ["", "////", "....", "xxxx", "\\\\\\\\", "oo", "++", "--"]
_GREYS = ["0.15", "0.45", "0.65", "0.3", "0.55", "0.75", "0.2", "0.5"]
_LIMIT_STYLES = {"smallest_subnormal": ":", "smallest_normal": "--", "largest_finite": "-", "overflow_threshold": "-."}
_LIMIT_NAMES = {"smallest_subnormal": "min sub", "smallest_normal": "min normal", "largest_finite": "max",
                "overflow_threshold": "overflow"}


def plot_result(result, outdir, prefix=None):
    """``StudyResult.plot``: PNG plots into ``outdir``; their paths, or [] when matplotlib is not installed."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        return []
    prefix = prefix or result.kind
    os.makedirs(outdir, exist_ok=True)
    varying, _ = result._context_columns()
    grads = list(_uniq(r["grad"] for r in result.rows))
    if result.kind == "growth":
        figures = [("growth", _growth_figure(Figure, result, varying, grads))]
    elif result.kind == "window":
        figures = [("window", _window_figure(Figure, result, varying, grads))]
    else:
        figures = list(_mode_figures(Figure, result, varying, grads))
        if result.magnitude_values:
            figures.append(("magnitudes", _magnitude_figure(Figure, result)))
    paths = []
    for name, fig in figures:
        if fig is None:
            continue
        FigureCanvasAgg(fig)
        p = os.path.join(outdir, f"{prefix}_{name}.png")
        try:
            fig.savefig(p, dpi=100, bbox_inches="tight", metadata={"Software": None})
        except OSError as e:              # a write / close error names no file: name the plot
            if e.filename is None:
                e.filename = p
            raise
        paths.append(p)
    return paths


def plot_names(kind, grads):
    """The names (``<prefix>_<name>.png``) of the plots a study of ``kind`` with ``grads`` may write, so that the
    command line can check them before computing."""
    if kind == "modes":
        return ["error_by_mode"] + [f"ulp_hist_{g}" for g in grads] + ["magnitudes"]
    return {"spread": ["spread_vs_error"], "growth": ["growth"], "window": ["window"], "train": ["loss"]}[kind]


_LEGEND_LINE_IN = 0.115      # the height of one line of a 6.5-point legend, in inches


def _legend_lines(result, varying):
    """The lines a legend of every mode of ``result`` takes at most (one a mode; merged modes share a line
    each)."""
    return len(_uniq(result._mode_label(r, varying) for r in result.rows)) + 1


def _mode_key(row):
    return tuple(row.get(k) for k in _PROBLEM_FIELDS + _MODE_FIELDS)


def merge_identical(items, same):
    """Groups (lists) of ``items`` in first-seen order, two items sharing a group when ``same(a, b)``."""
    groups = []
    for it in items:
        for grp in groups:
            if same(grp[0], it):
                grp.append(it)
                break
        else:
            groups.append([it])
    return groups


def _merged_label(result, rows, varying, sep=" = "):
    labels = list(_uniq(result._mode_label(r, varying) for r in rows))
    return sep.join(labels)


def _result_sig(row, keys):
    return tuple(row.get(k) for k in keys)


def _no_bar_text(r):
    """What a modes panel writes where a row has no bar: '0 (exact)', or '-' with the share the error leaves out."""
    if r["rel_fro"] == 0:
        return "0 (exact)"
    parts = [f"{k} {100 * r[f]:.0f}%" for k, f in (("unf", "frac_underflow"), ("ovf", "frac_overflow"))
             if r.get(f)]
    parts += [f"{k} {r[c]}" for k, c in (("NaN", "n_nan"), ("Inf", "n_inf")) if r.get(c)]
    return "- (" + ", ".join(parts) + ")" if parts else "-"


def _mode_figures(Figure, result, varying, grads):
    """(name, figure): the error of each mode as bars (modes: relative Frobenius error; spread: error and spread
    p99 in ULPs, one panel per output format), then (modes) the ULP histograms."""
    rows = result.rows
    if not rows:
        return
    panels = []                       # (grad, out_format or None, rows)
    for g in grads:
        rs = [r for r in rows if r["grad"] == g]
        if result.kind == "modes":
            panels.append((g, None, rs))
        else:
            for f in _uniq(r["out_format"] for r in rs):
                panels.append((g, f, [r for r in rs if r["out_format"] == f]))
    sig_keys = (("rel_fro", "max_abs", "ulp_median", "ulp_max", "n_underflow", "n_overflow")
                if result.kind == "modes" else ("ulp_p99", "ulp_max", "spread_p99", "spread_max", "frac_varying"))
    heights = []
    groups_by_panel = []
    for g, f, rs in panels:
        grps = merge_identical(rs, lambda a, b: a["status"] == b["status"] == 0 and
                               _result_sig(a, sig_keys) == _result_sig(b, sig_keys) and
                               a["out_format"] == b["out_format"])
        groups_by_panel.append(grps)
        heights.append(sum(1 + 0.6 * (len(grp) - 1) for grp in grps))
    # at most two panels a row: a strip of three or more side by side is unreadable once scaled to a page
    ncols = min(2, len(panels))
    nrows = math.ceil(len(panels) / ncols)
    fig = Figure(figsize=(7.5 * ncols, (0.32 * max(6, max(heights)) + 1.4) * nrows))
    for pi, ((g, f, rs), grps) in enumerate(zip(panels, groups_by_panel)):
        ax = fig.add_subplot(nrows, ncols, pi + 1)
        y, labels, pos = [], [], 0.0
        for grp in grps:
            y.append(pos + 0.3 * (len(grp) - 1))
            labels.append(_merged_label(result, grp, varying, sep="\n= "))
            pos += 1 + 0.6 * (len(grp) - 1)
        key = "rel_fro" if result.kind == "modes" else "ulp_p99"
        vals = [v for r in rs if not r["status"] for v in (r.get(key), r.get("spread_p99")) if v]
        for yi, grp in zip(y, grps):
            r = grp[0]
            if r["status"]:
                ax.text(0.02, yi, f"n/a ({r['status']})", transform=ax.get_yaxis_transform(), va="center",
                        fontsize=7, style="italic")
                continue
            if result.kind == "modes":
                if not r["rel_fro"]:          # a bar of 0 (or of no error at all) would sit off the log axis
                    ax.text(0.02, yi, _no_bar_text(r), transform=ax.get_yaxis_transform(), va="center",
                            fontsize=7)
                    continue
                ax.barh(yi, r["rel_fro"], 0.7, color="0.55", edgecolor="black")
            else:
                ax.barh(yi - 0.18, max(r["ulp_p99"] or 0, 1e-3), 0.36, color="0.35", edgecolor="black",
                        label="error p99" if yi == y[0] or "error p99" not in
                        [t.get_label() for t in ax.patches] else None)
                ax.barh(yi + 0.18, max(r["spread_p99"] or 0, 1e-3), 0.36, color="white", edgecolor="black",
                        hatch="////", label="spread p99")
        ax.set_xscale("log")
        floor = 1e-17 if result.kind == "modes" else 1e-3
        zero_bar = result.kind != "modes" and any(
            not r["status"] and not (r.get("ulp_p99") and r.get("spread_p99")) for r in rs)
        if vals:   # a spread panel draws 0 at 1e-3: keep that on the axis when a bar is 0
            ax.set_xlim(floor / 2 if zero_bar else max(min(vals) / 4, floor / 2), max(max(vals) * 4, floor * 4))
        elif zero_bar:
            ax.set_xlim(floor / 2, floor * 100)
        ax.set_yticks(y)
        ax.set_yticklabels(labels, fontsize=7)
        ax.set_ylim(pos - 0.5, -0.6)
        ax.grid(axis="x", alpha=0.3, color="0.5")
        if result.kind == "modes":
            ax.set_xlabel("relative Frobenius error")
            fmts = list(_uniq(r["out_format"] for r in rs))
            ax.set_title(f"{g} ({', '.join(fmts)})", fontsize=10)
        else:
            ax.set_xlabel(f"ULPs of {f} (0 drawn at 1e-3)")
            ax.set_title(f"{g} in {f}", fontsize=10)
            h, lab = ax.get_legend_handles_labels()
            seen = {}
            for hh, ll in zip(h, lab):
                seen.setdefault(ll, hh)
            ax.legend(list(seen.values()), list(seen), fontsize=7, loc="lower right")
    fig.tight_layout()
    readable(fig)
    yield ("error_by_mode" if result.kind == "modes" else "spread_vs_error"), fig
    if result.kind == "modes":
        for g in grads:
            fig = _ulp_histogram(Figure, result, varying, g)
            if fig is not None:
                yield f"ulp_hist_{g}", fig


def _ulp_histogram(Figure, result, varying, g):
    """The ULP error histograms of gradient ``g``: one panel per output format, one curve per distinct result
    (over the elements whose exact value the format can represent; the count is in the label)."""
    rows, samples = result.rows, result.samples
    idx = [i for i, r in enumerate(rows)
           if r["grad"] == g and r["status"] == 0 and samples and samples[i] is not None]
    if not idx:
        return None
    fmts = list(_uniq(rows[i]["out_format"] for i in idx))
    panels = []
    for f in fmts:
        mine = [i for i in idx if rows[i]["out_format"] == f]
        panels.append((f, mine, merge_identical(mine, lambda a, b: np.array_equal(samples[a], samples[b]))))
    lines = max(sum(_merged_label(result, [rows[i] for i in grp], varying, sep="\n= ").count("\n") + 1
                    for grp in groups) for _, _, groups in panels)
    fig = Figure(figsize=(6.0 * len(fmts) + 2.5, 3.5 + _LEGEND_LINE_IN * lines))
    for fi, (f, mine, groups) in enumerate(panels):
        ax = fig.add_subplot(1, len(fmts), fi + 1)
        drawn = [s for s in (samples[grp[0]] for grp in groups) if s.size]
        hi = max([float(s.max()) for s in drawn] + [1.0])
        bins = np.concatenate(([0.0], np.geomspace(1e-3, hi * 1.01, 50)))
        for gno, grp in enumerate(groups):
            s_ = samples[grp[0]]
            r = rows[grp[0]]
            lab = (_merged_label(result, [rows[i] for i in grp], varying, sep="\n= ")
                   + f"  [{r['n_ulp']} of {r['n']}]")
            ls, mk = _STYLES[gno % len(_STYLES)]
            if not s_.size:
                ax.plot([], [], linestyle=ls, color="black", label=lab + " (none representable)")
                continue
            counts, edges = np.histogram(np.maximum(s_, 1e-3 * 1.0000001), bins=bins)
            mids = np.sqrt(np.maximum(edges[:-1], 1e-4) * edges[1:])
            ax.plot(mids, counts, linestyle=ls, marker=mk, markevery=max(1, len(mids) // 8), markersize=4,
                    color=_GREYS[gno % len(_GREYS)] if gno else "black", lw=1.3, label=lab, drawstyle="steps-mid")
        ax.set_xscale("log")
        ax.set_xlabel(f"ULP error in {f} (exact results drawn at 1e-3)")
        sampled = any(rows[i]["n_ulp"] > samples[i].size for i in mine)
        ax.set_ylabel("elements" + (" (sampled)" if sampled else ""))
        ax.set_title(f"{g}: ULP error in {f}", fontsize=10)
        legend_below(ax, fontsize=6.5, frameon=False)
    fig.tight_layout()
    readable(fig)
    return fig


def _interval(ax, xs, rows, metric, color):
    lo = [r.get(f"{metric}_lo") for r in rows]
    hi = [r.get(f"{metric}_hi") for r in rows]
    if all(v is not None for v in lo + hi):
        ax.fill_between(xs, [max(v, 1e-17) for v in lo], [max(v, 1e-17) for v in hi], color=color, alpha=0.25,
                        hatch="...", edgecolor="0.4", lw=0)


def _growth_figure(Figure, result, varying, grads):
    """The metric against the reduction length: one panel per gradient (per gradient and output format for a
    ULP metric), one curve per distinct result, its 95 % interval shaded when the study has repeats."""
    axis = result.meta.get("axis", "T")
    metric = result.meta.get("metric", "rel_fro")
    panels = []
    for g in grads:
        rs = [r for r in result.rows if r["grad"] == g]
        if metric.startswith("ulp"):
            panels += [(g, f, [r for r in rs if r["out_format"] == f]) for f in _uniq(r["out_format"] for r in rs)]
        else:
            panels.append((g, None, rs))
    fig = Figure(figsize=(4.8 * len(panels), 3.4 + _LEGEND_LINE_IN * _legend_lines(result, varying)))
    mode_fields = [k for k in varying if k in _MODE_FIELDS]
    for pi, (g, f, rs) in enumerate(panels):
        ax = fig.add_subplot(1, len(panels), pi + 1)
        by_mode = {}
        for r in rs:
            by_mode.setdefault(tuple(r.get(k) for k in mode_fields), []).append(r)
        curves = [sorted(v, key=lambda r: r["reduction_length"]) for v in by_mode.values()]
        groups = merge_identical(curves, lambda a, b: [(r["status"], r.get(metric)) for r in a] ==
                                 [(r["status"], r.get(metric)) for r in b])
        for gno, grp in enumerate(groups):
            c = grp[0]
            lab = _merged_label(result, [cc[0] for cc in grp], varying, sep="\n= ")
            ok = [r for r in c if r["status"] == 0 and r.get(metric) is not None]
            if not ok:
                st = _uniq(r["status"] for r in c)
                ax.plot([], [], " ", label=f"{lab}: n/a ({', '.join(map(str, st))})")
                continue
            ls, mk = _STYLES[gno % len(_STYLES)]
            color = "black" if gno == 0 else _GREYS[gno % len(_GREYS)]
            xs = [r["reduction_length"] for r in ok]
            ax.plot(xs, [max(r[metric], 1e-17) for r in ok], linestyle=ls, marker=mk, color=color, label=lab)
            _interval(ax, xs, ok, metric, color)
        if len({r["reduction_length"] for r in rs}) == 1:
            ax.text(0.5, 0.5, f"the reduction length of {g}\ndoes not change with {axis}", ha="center",
                    va="center", transform=ax.transAxes, fontsize=8, color="0.3")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"reduction length (sweeping {axis})")
        ax.set_ylabel(_HEAD.get(metric, metric) + (f" ({f})" if f else ""))
        ax.set_title(g + (f" in {f}" if f else ""), fontsize=10)
        ax.grid(alpha=0.3, color="0.5")
        legend_below(ax, fontsize=6.5, frameon=False)
    if result.meta.get("repeats", 1) > 1:
        fig.suptitle(f"mean of {result.meta['repeats']} seeds; dotted band: 95 % interval", fontsize=9)
    fig.tight_layout()
    readable(fig)
    return fig


def _window_figure(Figure, result, varying, grads):
    """rel Frob against the grad_output scale 2^e, one panel per gradient, one curve per distinct result; filled
    markers where neither overflow nor sub-normal values pass the threshold (inside the window), hollow outside."""
    from .window import _passes
    thr = result.meta.get("threshold", 0.0)
    fig = Figure(figsize=(6.0 * len(grads), 3.4 + _LEGEND_LINE_IN * _legend_lines(result, varying)))
    mode_fields = [k for k in varying if k in _MODE_FIELDS + ("distribution", "shape")]
    for gi, g in enumerate(grads):
        ax = fig.add_subplot(1, len(grads), gi + 1)
        by_mode = {}
        for r in result.rows:
            if r["grad"] == g:
                by_mode.setdefault(tuple(r.get(k) for k in mode_fields), []).append(r)
        curves = list(by_mode.values())
        groups = merge_identical(curves, lambda a, b: [(r["status"], r.get("rel_fro"), r.get("frac_overflow"),
                                                         r.get("frac_subnormal")) for r in a] ==
                                 [(r["status"], r.get("rel_fro"), r.get("frac_overflow"), r.get("frac_subnormal"))
                                  for r in b])
        for gno, grp in enumerate(groups):
            c = grp[0]
            lab = _merged_label(result, [cc[0] for cc in grp], varying, sep="\n= ")
            ok = [r for r in c if r["status"] == 0 and r.get("rel_fro") is not None]
            if not ok:
                ax.plot([], [], " ", label=f"{lab}: n/a ({c[0]['status']})")
                continue
            ls, mk = _STYLES[gno % len(_STYLES)]
            color = "black" if gno == 0 else _GREYS[gno % len(_GREYS)]
            xs = [r["exponent"] for r in ok]
            ys = [max(min(r["rel_fro"], 10.0), 1e-9) for r in ok]
            ax.plot(xs, ys, linestyle=ls, color=color, label=lab)
            inside = [_passes(r, thr) for r in ok]
            ax.plot([x for x, p in zip(xs, inside) if p], [y for y, p in zip(ys, inside) if p], mk, color=color,
                    markersize=4, linestyle="none")
            ax.plot([x for x, p in zip(xs, inside) if not p], [y for y, p in zip(ys, inside) if not p], mk,
                    markerfacecolor="white", color=color, markersize=4, linestyle="none")
        ax.set_yscale("log")
        ax.set_xlabel("e (grad_output scaled by 2^e)")
        ax.set_ylabel("relative Frobenius error (capped at 10)")
        ax.set_title(f"{g}: filled = inside the window (ovf and sub <= {thr:g})", fontsize=9)
        ax.grid(alpha=0.3, color="0.5")
        legend_below(ax, fontsize=6.5, frameon=False)
    fig.tight_layout()
    readable(fig)
    return fig


def _magnitude_figure(Figure, result, max_panels=12):
    """Histograms of log2 |x| of each operand and exact gradient (first problem of each data source), with each
    relevant format's limits as vertical lines (line style per limit, label per format)."""
    vals = result.magnitude_values[:max_panels]
    if not vals:
        return None
    n = len(vals)
    cols = min(3, n)
    nrows = math.ceil(n / cols)
    fig = Figure(figsize=(4.6 * cols, 3.3 * nrows + 0.6))
    for i, (key, fmts, a) in enumerate(vals):
        ax = fig.add_subplot(nrows, cols, i + 1)
        nz = a[(a != 0) & np.isfinite(a)]
        if nz.size > 200000:
            nz = np.random.default_rng(0).choice(nz, 200000, replace=False)
        if nz.size:
            lo = min(math.floor(np.log2(nz.min())), -10)
            hi = max(math.ceil(np.log2(nz.max())), 1)
            ax.hist(np.log2(nz), bins=np.arange(lo, hi + 1, 0.5), color="0.7", edgecolor="black", lw=0.5)
        shown = [math.log2(v) for f in fmts for v in format_limits(f).values() if abs(math.log2(v)) <= 40]
        xl = ax.get_xlim()
        xl = (min([xl[0]] + [v - 1 for v in shown]), max([xl[1]] + [v + 1 for v in shown]))
        ytop = ax.get_ylim()[1]
        level = 0     # each limit's label one step lower than the last: labels of nearby limits never overlap
        for fno, f in enumerate(fmts):
            lim = format_limits(f)
            for k, v in lim.items():
                lv = math.log2(v)
                if xl[0] <= lv <= xl[1]:
                    ax.axvline(lv, linestyle=_LIMIT_STYLES[k], color="black" if fno == 0 else "0.45", lw=1.1)
                    ax.text(lv, ytop * (0.97 - 0.105 * level), f" {_LIMIT_NAMES[k]}\n {f}", fontsize=5.5,
                            va="top", ha="left" if k != "overflow_threshold" else "right")
                    level += 1
        ax.set_xlim(*xl)
        data, scale, shape, dt, name = key
        ax.set_title(f"{name} ({data}, scale {scale}, {dt})", fontsize=8)
        ax.set_xlabel("log2 |x| (non-zero values)", fontsize=8)
        ax.set_ylabel("values", fontsize=8)
        nzero = int(a.size - nz.size) if a.size <= 200000 else int((a == 0).sum())
        if nzero:
            ax.text(0.98, 0.95, f"{nzero} zeros", transform=ax.transAxes, ha="right", va="top", fontsize=7)
    fig.suptitle("magnitudes against each format's limits (dotted: min subnormal, dashed: min normal, solid: "
                 "max, dash-dot: overflow)", fontsize=8)
    fig.tight_layout()
    readable(fig)
    return fig
