"""What keeps a study figure's text from overlapping: legends set below an axes' tick labels and axis label (not
at a fraction of the axes' height, which the axis label can pass), and numeric tick labels thinned where two
would overlap (a log axis over less than a decade labels 2x10^2, 3x10^2, ... side by side).  Both need the
drawn sizes of the text, so ``readable`` runs once the figure is laid out."""
from __future__ import annotations

_BELOW = "legend below the axes"     # the gid of a legend that ``readable`` places under its axes' labels
_GAP_PT = 4.0                         # between an axis label and a legend below it, in points


def legend_below(ax, **kw):
    """A legend under ``ax``'s x tick labels and axis label (placed there by ``readable``; until then a guess,
    so that the layout leaves room for it)."""
    from matplotlib.transforms import offset_copy
    guess = offset_copy(ax.transAxes, fig=ax.figure, y=-44, units="points")
    leg = ax.legend(loc="upper left", bbox_to_anchor=(0.0, 0.0), bbox_transform=guess, **kw)
    leg.set_gid(_BELOW)
    return leg


def _renderer(fig):
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    canvas = fig.canvas if isinstance(fig.canvas, FigureCanvasAgg) else FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def readable(fig):
    """Place the legends of ``legend_below`` under their axes' labels, then drop the numeric tick labels that
    overlap one kept before them (decades first), and fix each axis' ticks and limits as drawn, so that saving
    the figure draws the same.  Category labels (a bar chart's) are never dropped."""
    r = _renderer(fig)
    inv = fig.transFigure.inverted()
    for ax in fig.axes:
        leg = ax.get_legend()
        if leg is None or leg.get_gid() != _BELOW:
            continue
        under = [ax.xaxis.get_tightbbox(r), ax.bbox]
        bottom = min(b.y0 for b in under if b is not None) - _GAP_PT * fig.dpi / 72
        leg.set_bbox_to_anchor(tuple(inv.transform((ax.bbox.x0, bottom))), transform=fig.transFigure)
    r = _renderer(fig)
    for ax in fig.axes:
        for axis, get_lim, set_lim in ((ax.xaxis, ax.get_xlim, ax.set_xlim), (ax.yaxis, ax.get_ylim, ax.set_ylim)):
            if _is_category_axis(axis):
                continue
            _thin(axis, r)
            set_lim(*get_lim())


def _is_category_axis(axis):
    from matplotlib.ticker import FixedFormatter
    return isinstance(axis.get_major_formatter(), FixedFormatter)


def _drawn(axis, minor):
    """(location, label text, label artist) of the ticks ``axis`` draws (inside its view)."""
    lo, hi = sorted(axis.get_view_interval())
    tol = 1e-9 * (hi - lo)
    locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
    ticks = axis.get_minor_ticks(len(locs)) if minor else axis.get_major_ticks(len(locs))
    return [(loc, t.label1.get_text() if t.label1.get_visible() else "", t.label1)
            for loc, t in zip(locs, ticks) if lo - tol <= loc <= hi + tol]


def _thin(axis, r):
    major, minor = _drawn(axis, False), _drawn(axis, True)
    kept = []

    def keep(entries):
        out = []
        for loc, text, artist in entries:
            if not text:
                out.append("")
                continue
            box = artist.get_window_extent(r)
            if any(box.overlaps(k) for k in kept):
                out.append("")
            else:
                kept.append(box)
                out.append(text)
        return out
    major_labels, minor_labels = keep(major), keep(minor)
    if all(m[1] == l for m, l in zip(major, major_labels)) and all(m[1] == l for m, l in zip(minor, minor_labels)):
        return                                              # nothing overlaps: the axis as it is
    axis.set_ticks([m[0] for m in major], labels=major_labels)
    axis.set_ticks([m[0] for m in minor], labels=minor_labels, minor=True)
