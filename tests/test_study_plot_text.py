"""No text of a study figure covers another (issue 39: overlapping tick and limit labels): measured on the drawn
figure, from the window extents of its text artists.  The growth plot labelled the minor ticks of a log axis
over less than a decade (2x10^1, 3x10^1, 4x10^1 side by side, overlapping), and the legends of the ULP
histograms, growth and window plots, set at a fixed fraction of the axes' height below it, covered the x-axis
label."""
import itertools

import pytest

from pyconvtbc import study

pytest.importorskip("matplotlib")
from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

SHAPE = "8,2,8,8,3,1"


def _drawn_ticklabels(axis):
    """The tick labels ``axis`` draws: a label text, of a tick inside the view."""
    lo, hi = sorted(axis.get_view_interval())
    tol = 1e-9 * (hi - lo)
    out = []
    for minor in (False, True):
        locs = axis.get_minorticklocs() if minor else axis.get_majorticklocs()
        ticks = axis.get_minor_ticks(len(locs)) if minor else axis.get_major_ticks(len(locs))
        out += [t.label1 for loc, t in zip(locs, ticks)
                if lo - tol <= loc <= hi + tol and t.label1.get_visible() and t.label1.get_text()]
    return out


def _overlaps(fig):
    """(tick labels of one axis that overlap, other texts that overlap), on the drawn figure."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    r = canvas.get_renderer()
    ticks, tick_ids = [], set()
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            labels = _drawn_ticklabels(axis)
            boxes = [(t.get_text(), t.get_window_extent(r)) for t in labels]
            ticks += [(a[0], b[0]) for a, b in itertools.combinations(boxes, 2) if a[1].overlaps(b[1])]
            tick_ids |= {id(t) for t in labels}
    every_tick = {id(t) for ax in fig.axes for axis in (ax.xaxis, ax.yaxis)
                  for t in axis.get_ticklabels(which="both")}
    texts = [t for t in fig.findobj(Text)
             if t.get_visible() and t.get_text().strip() and (id(t) in tick_ids or id(t) not in every_tick)]
    boxes = [(t.get_text(), t.get_window_extent(r), id(t) in tick_ids) for t in texts]
    # two tick labels of one axis are the first check's; any other pair of texts here
    others = [(a[0], b[0]) for a, b in itertools.combinations(boxes, 2)
              if not (a[2] and b[2]) and a[1].overlaps(b[1])]
    return ticks, others


def _figures():
    from pyconvtbc.study import plots
    res = study.run_study(SHAPE, {"socs": ["ascend910b", "ascend950", "ascend910"]},
                          grads=["gradInput", "gradWeight"])
    varying, _ = res._context_columns()
    for name, fig in plots._mode_figures(Figure, res, varying, ["gradInput", "gradWeight"]):
        yield f"modes {name}", fig
    yield "magnitudes", plots._magnitude_figure(Figure, res)
    sp = study.reduction_order_spread(SHAPE, {"cube_math_types": ["KEEP_DTYPE", "USE_HF32", "USE_FP16"],
                                              "grad_weight_dtypes": ["same", "hifloat8"]}, permutations=3)
    varying, _ = sp._context_columns()
    for name, fig in plots._mode_figures(Figure, sp, varying, ["gradInput", "gradWeight"]):
        yield f"spread {name}", fig
    gr = study.error_growth(SHAPE, [8, 32, 128], grid={"cube_math_types": "all",
                                                      "socs": ["ascend910b", "ascend950"]})
    varying, _ = gr._context_columns()
    yield "growth", plots._growth_figure(Figure, gr, varying, ["gradInput", "gradWeight", "gradBias"])
    wi = study.scale_window(SHAPE, {"cube_math_types": ["KEEP_DTYPE", "USE_FP16"],
                                    "grad_weight_dtypes": ["float32", "bfloat16", "hifloat8", "float8_e4m3fn"]},
                            exponents=list(range(-6, 7)))
    varying, _ = wi._context_columns()
    yield "window", plots._window_figure(Figure, wi, varying, ["gradWeight"])


def test_no_text_of_a_study_figure_overlaps_another():
    found = {}
    for name, fig in _figures():
        ticks, others = _overlaps(fig)
        if ticks or others:
            found[name] = (ticks[:3], others[:3])
    assert not found, "\n".join(f"{n}: tick labels {t}, other texts {o}" for n, (t, o) in found.items())


def test_thinning_keeps_the_decades_and_the_figure_draws_as_checked():
    """A log axis over less than a decade, 4.8 inches wide: minor labels that would overlap are dropped, the
    decade labels kept, and a second draw (as savefig does) keeps it so."""
    from pyconvtbc.study.plot_layout import readable
    fig = Figure(figsize=(2.0, 2.0))
    ax = fig.add_subplot(1, 1, 1)
    ax.plot([15, 95], [1, 2])
    ax.set_xscale("log")
    fig.tight_layout()
    before, _ = _overlaps(fig)
    assert before                                   # the premise: matplotlib's labels overlap here
    readable(fig)
    after, _ = _overlaps(fig)
    assert not after
    shown = [t.get_text() for t in _drawn_ticklabels(ax.xaxis)]
    assert any("10^{1}" in s for s in shown) and len(shown) >= 2
