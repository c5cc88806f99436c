"""PNG plots of a study's result; written only when matplotlib (the ``plot`` extra) is installed."""
from __future__ import annotations

import os

import numpy as np

from .choices import _uniq
from .table import _HEAD, _MODE_FIELDS, _PROBLEM_FIELDS


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
    else:
        figures = _mode_figures(Figure, result, varying, grads)
    paths = []
    for name, fig in figures:
        FigureCanvasAgg(fig)
        p = os.path.join(outdir, f"{prefix}_{name}.png")
        fig.savefig(p, dpi=110, bbox_inches="tight")
        paths.append(p)
    return paths


def _mode_key(row):
    return tuple(row.get(k) for k in _PROBLEM_FIELDS + _MODE_FIELDS)


def _mode_figures(Figure, result, varying, grads):
    """Yield (name, figure): each mode's error (modes) or error next to spread (spread) as bars, then (modes)
    the ULP error histogram of each gradient."""
    valid = result.valid_rows()
    if not valid:
        return
    keys = list(_uniq(_mode_key(r) for r in valid))
    pos = {k: i for i, k in enumerate(keys)}
    labels = {}
    for r in valid:
        labels.setdefault(_mode_key(r), result._mode_label(r, varying))
    fig = Figure(figsize=(2.5 + 3.0 * len(grads), 0.3 * max(4, len(keys)) + 1.2))
    first = None
    for gi, g in enumerate(grads):
        ax = fig.add_subplot(1, len(grads), gi + 1, sharey=first)
        first = first or ax
        rs = [r for r in valid if r["grad"] == g]
        y = np.array([pos[_mode_key(r)] for r in rs], dtype=float)
        if result.kind == "modes":
            ax.barh(y, [max(r["rel_fro"] or 0.0, 1e-17) for r in rs], color="tab:blue")
            ax.set_xlabel("relative Frobenius error")
        else:
            ax.barh(y - 0.2, [max(r["ulp_p99"] or 0, 1e-3) for r in rs], 0.4, label="error p99")
            ax.barh(y + 0.2, [max(r["spread_p99"] or 0, 1e-3) for r in rs], 0.4, label="spread p99")
            ax.set_xlabel("output-format ULPs (0 at 1e-3)")
            if gi == 0:
                fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8,
                           bbox_to_anchor=(0.5, 1.0))
        ax.set_xscale("log")
        ax.set_title(f"{g} ({rs[0]['out_format']})" if len({r['out_format'] for r in rs}) == 1 else g,
                     fontsize=10)
        ax.grid(axis="x", alpha=0.3)
        if gi:
            ax.tick_params(labelleft=False)
    first.set_yticks(range(len(keys)))
    first.set_yticklabels([labels[k] for k in keys], fontsize=7)
    first.set_ylim(len(keys) - 0.5, -0.5)
    fig.tight_layout()
    yield ("error_by_mode" if result.kind == "modes" else "spread_vs_error"), fig
    if result.kind == "modes":
        for g in grads:
            fig = _ulp_histogram(Figure, result, varying, g)
            if fig is not None:
                yield f"ulp_hist_{g}", fig


def _ulp_histogram(Figure, result, varying, g):
    """The ULP error histogram of gradient ``g``, one curve per distinct result (None without samples)."""
    rows, samples = result.rows, result.samples
    idx = [i for i, r in enumerate(rows)
           if r["grad"] == g and r["status"] == 0 and samples and samples[i] is not None and samples[i].size]
    if not idx:
        return None
    groups = []                      # identical results share one curve
    for i in idx:
        for grp in groups:
            if np.array_equal(samples[grp[0]], samples[i]):
                grp.append(i)
                break
        else:
            groups.append([i])
    fig = Figure(figsize=(7.5, 3.8))
    ax = fig.add_subplot(1, 1, 1)
    allv = np.concatenate([samples[i] for i in idx])
    hi = max(float(allv.max()), 1.0)
    bins = np.concatenate(([0.0], np.geomspace(1e-3, hi * 1.01, 60)))
    for gno, grp in enumerate(groups):
        s_ = np.maximum(samples[grp[0]], 1e-3 * 1.0000001)
        lab = result._mode_label(rows[grp[0]], varying)
        if len(grp) > 1:
            lab += f" (= {len(grp) - 1} more)"
        ax.hist(s_, bins=bins, histtype="step", lw=1.3, label=lab, linestyle=("-", "--", ":", "-.")[gno % 4])
    ax.set_xscale("log")
    ax.set_xlabel("ULP error in the output format (exact results drawn at 1e-3)")
    ax.set_ylabel("elements" + (" (sampled)" if any(rows[i]["n"] > samples[i].size for i in idx) else ""))
    ax.set_title(f"{g}: ULP error histogram", fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def _growth_figure(Figure, result, varying, grads):
    """The metric against the reduction length, one panel per gradient, one line per mode."""
    axis = result.meta.get("axis", "T")
    metric = result.meta.get("metric", "rel_fro")
    fig = Figure(figsize=(4.5 * len(grads), 4))
    for gi, g in enumerate(grads):
        ax = fig.add_subplot(1, len(grads), gi + 1)
        groups = {}
        for r in result.valid_rows():
            if r["grad"] == g and r.get(metric) is not None:
                groups.setdefault(tuple(r.get(k) for k in varying), []).append(r)
        for rs in groups.values():
            rs = sorted(rs, key=lambda r: r["reduction_length"])
            ax.plot([r["reduction_length"] for r in rs], [max(r[metric], 1e-17) for r in rs], "o-",
                    label=result._mode_label(rs[0], varying))
        if len({r["reduction_length"] for r in result.rows if r["grad"] == g}) == 1:
            ax.text(0.5, 0.5, f"the reduction length of {g}\ndoes not change with {axis}", ha="center",
                    va="center", transform=ax.transAxes, fontsize=8, color="0.4")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel(f"reduction length (sweeping {axis})")
        ax.set_ylabel(_HEAD.get(metric, metric))
        ax.set_title(g)
        ax.legend(fontsize=7)
    fig.tight_layout()
    return fig
