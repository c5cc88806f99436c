"""The rules every study figure follows: no ULP axis mixes output formats, identical results are merged with
every label listed, rejected modes keep their place with their status, series are told apart without colour."""
import pytest

from pyconvtbc import study

pytest.importorskip("matplotlib")
from matplotlib.figure import Figure  # noqa: E402

from pyconvtbc.study import plots  # noqa: E402

FORMATS = ("float32", "float16", "bfloat16", "hifloat8", "float8_e4m3fn")


@pytest.fixture(scope="module")
def modes_figs():
    res = _modes()
    return res, _figures(res)


def _modes():
    # ascend910 rejects FLOAT KEEP_DTYPE / USE_HF32; ALLOW_FP32_DOWN_PRECISION == USE_HF32 on ascend910b
    grid = {"socs": ["ascend910b", "ascend910"], "cube_math_types": ["KEEP_DTYPE", "ALLOW_FP32_DOWN_PRECISION",
                                                                       "USE_HF32"],
            "grad_weight_dtypes": ["same", "hifloat8", "float8_e4m3fn"]}
    return study.run_study("8,2,4,4,3,1", grid, grads=["gw", "gi"])


def _figures(res):
    varying, _ = res._context_columns()
    return dict(plots._mode_figures(Figure, res, varying, list(dict.fromkeys(r["grad"] for r in res.rows))))


def _formats_named(text):
    return {f for f in FORMATS if f in text}


def test_ulp_histograms_never_mix_formats(modes_figs):
    res, figs = modes_figs
    hist = figs["ulp_hist_gradWeight"]
    fmts = [a.get_xlabel() for a in hist.axes]
    assert len(hist.axes) == 3                                  # float32, hifloat8, float8_e4m3fn
    assert all(len(_formats_named(x)) == 1 for x in fmts)
    assert {next(iter(_formats_named(x))) for x in fmts} == {"float32", "hifloat8", "float8_e4m3fn"}
    for ax in hist.axes:                                        # every curve's label is a mode of that format
        (fmt,) = _formats_named(ax.get_xlabel())
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert labels and all(("gw=" + fmt) in lab or fmt == "float32" for lab in labels)


def test_identical_results_merged_with_every_label(modes_figs):
    res, figs = modes_figs
    bars = figs["error_by_mode"]
    for ax in bars.axes:
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        # ALLOW_FP32_DOWN_PRECISION and USE_HF32 give identical results on ascend910b: one bar, both names
        merged = [t for t in ticks if "ALLOW_FP32_DOWN_PRECISION ascend910b" in t]
        assert merged and all("USE_HF32 ascend910b" in t for t in merged)
        # every valid mode is named on exactly one tick
        for r in res.rows:
            if r["status"] == 0 and r["grad"] in ax.get_title():
                lab = res._mode_label(r, res._context_columns()[0])
                assert sum(lab in t.split("\n= ") or ("= " + lab) in t for t in ticks) == 1, lab
    hist = figs["ulp_hist_gradInput"]
    labels = [t.get_text() for ax in hist.axes for t in ax.get_legend().get_texts()]
    assert any("\n= " in lab for lab in labels)                 # the same merge rule in the histograms


def test_rejected_modes_keep_their_place_with_their_status(modes_figs):
    res, figs = modes_figs
    bars = figs["error_by_mode"]
    for ax in bars.axes:
        texts = [t.get_text() for t in ax.texts]
        assert texts.count("n/a (161002)") == 6                 # 2 rejected cubes x 3 gradWeight dtypes
        ticks = [t.get_text() for t in ax.get_yticklabels()]
        assert any(t.startswith("KEEP_DTYPE ascend910 ") for t in ticks)


def test_spread_panels_one_format_each_and_black_and_white():
    res = study.reduction_order_spread("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"],
                                                       "grad_weight_dtypes": ["same", "hifloat8"]}, permutations=2)
    fig = _figures(res)["spread_vs_error"]
    for ax in fig.axes:
        assert len(_formats_named(ax.get_xlabel())) == 1
        hatches = {p.get_hatch() for p in ax.patches}
        assert len(hatches) == 2                                # error and spread bars differ by hatching


def test_growth_curves_differ_by_style_and_show_intervals():
    res = study.error_growth("8,2,4,4,3,1", [8, 16, 32], grid={"cube_math_types": "all"}, grads=["gw"], repeat=2)
    varying, _ = res._context_columns()
    fig = plots._growth_figure(Figure, res, varying, ["gradWeight"])
    (ax,) = fig.axes
    lines = [ln for ln in ax.get_lines() if len(ln.get_xdata())]
    styles = {(ln.get_linestyle(), ln.get_marker()) for ln in lines}
    assert len(styles) == len(lines) == 3                       # ALLOW_FP32_DOWN = USE_HF32 merged
    assert ax.collections                                       # the 95 % bands
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any("ALLOW_FP32_DOWN_PRECISION" in lab and "USE_HF32" in lab for lab in labels)


def test_magnitude_figure_marks_the_limits():
    res = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["hifloat8"]},
                          grads=["gw"])
    fig = plots._magnitude_figure(Figure, res)
    gw = [ax for ax in fig.axes if ax.get_title().startswith("gradWeight")][0]
    assert {ln.get_linestyle() for ln in gw.get_lines()} >= {":", "--", "-", "-."}   # the four HiFloat8 limits
