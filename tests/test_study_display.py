"""What a study prints never flatters (issue 39): no metric is a number for an empty, all-flushed or all-NaN /
Inf population (a '-', with the unf% / NaN / Inf columns on the same row), the magnitude table's sub% means the
error table's, amax scaling is refused where it changes nothing, --non-deterministic says the order is not
fixed, and identical rows are printed once with their labels merged."""
import numpy as np
import pytest

from pyconvtbc import study
from pyconvtbc.study.metrics import _spread_stats
from study_tables import comments, tables


def test_all_flushed_spread_prints_no_number():
    runs = np.zeros((4, 10))                          # every order gives 0: a flushed tensor
    assert all(v is None for v in _spread_stats(runs, "float8_e4m3fn").values())
    runs[1, 3] = 2.0 ** -9                            # one live element: a spread over that one
    s = _spread_stats(runs, "float8_e4m3fn")
    assert s["frac_varying"] == 1.0 and s["spread_max"] > 0


def test_spread_table_of_a_flushed_gradweight_shows_dashes_and_the_flush_share():
    r = study.reduction_order_spread("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"],
                                                       "grad_weight_dtypes": ["float8_e4m3fn"]},
                                     permutations=4, scales=[1e-9], grads=["gradWeight"])
    (row,) = tables(r.table())[0]
    assert list(row)[-7:] == ["spread med", "spread p99", "spread max", "varying", "unf%", "NaN", "Inf"]
    # spread med / p99 / max / varying: '-' (they read 0 0 0 0%), then the flush share and the counts
    assert list(row.values())[-7:] == ["-", "-", "-", "-", "100%", "0", "0"]


def test_repeat_keeps_nan_and_inf_columns():
    r = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["USE_FP16"]}, scales=[1e5], repeat=2,
                        grads=["gradWeight"])
    head = tables(r.table())[0][0]
    assert "NaN" in head and "Inf" in head
    row = r.rows[0]
    assert row["n_nan"] > 0 or row["n_inf"] > 0


def test_magnitude_sub_share_matches_the_error_table():
    r = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["float8_e4m3fn"]},
                        scales=[1e-9], grads=["gradWeight"])
    err_sub = r.rows[0]["frac_subnormal"]
    mag = [m for m in r.meta["magnitudes"] if m["tensor"] == "gradWeight" and m["format"] == "float8_e4m3fn"][0]
    assert err_sub == 1.0 and mag["frac_below_normal"] == err_sub
    line = [l for l in r.magnitude_table().splitlines() if "gradWeight" in l][0]
    head = r.magnitude_table().splitlines()[0].split()
    assert head[head.index("sub%") - len(head)] and line.split()[head.index("sub%") + 1 - len(head)] == "100%"


def test_amax_with_only_the_forward_is_refused():
    with pytest.raises(ValueError, match="amax"):
        study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"]}, scales=["amax"], grads=["output"])


def test_forward_rows_carry_no_grad_output_scale():
    r = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["float8_e4m3fn"]},
                        scales=["amax"], grads=["gradWeight", "output"])
    by = {row["grad"]: row for row in r.rows}
    assert by["gradWeight"]["dy_scale"] != 1.0 and by["output"]["dy_scale"] == 1.0


def test_non_deterministic_header_says_the_order_is_not_fixed():
    r = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"]}, deterministic=None)
    assert "order: the chip's default" in " ".join(comments(r.table()))
    r = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"]})
    assert "order:" not in " ".join(comments(r.table()))


def test_identical_rows_are_printed_once_with_merged_labels():
    r = study.run_study("8,2,4,4,3,1", {"input_dtypes": ["float16"]}, grads=["gradInput"])
    (body,) = tables(r.table())
    assert len(r.rows) == 4 and len(body) == 1 and "(all)" in body[0].values()
    from pyconvtbc.study.report import _merge_identical
    cells = [["a", "x", "1"], ["b", "x", "1"], ["c", "y", "1"]]
    assert _merge_identical(cells, [1, 1, 1], [0]) == [["a,b", "x", "1"], ["c", "y", "1"]]
    assert _merge_identical(cells, [1, 2, 1], [0]) == cells          # different results are never merged


def test_plots_write_what_a_missing_bar_stands_for():
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    from pyconvtbc.study.plots import _mode_figures
    r = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"],
                                        "grad_weight_dtypes": ["float32", "float8_e4m3fn"]},
                        scales=[1e-9], grads=["gradWeight"], scale_operands="all")
    name, fig = next(_mode_figures(Figure, r, ["grad_weight_dtype"], ["gradWeight"]))
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert any(t.startswith("- (unf 100%") for t in texts)        # the flushed E4M3FN row: said, not hidden
    lo = ax.get_xlim()[0]
    assert all(p.get_width() >= lo for p in ax.patches)           # every bar drawn is on the axis
    runs = study.reduction_order_spread("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"],
                                                         "grad_weight_dtypes": ["float32", "hifloat8"]},
                                        permutations=3, grads=["gradWeight"])
    figs = list(_mode_figures(Figure, runs, ["grad_weight_dtype"], ["gradWeight"]))
    for ax in figs[0][1].axes:
        lo = ax.get_xlim()[0]
        assert all(p.get_width() >= lo for p in ax.patches)       # 0 drawn at 1e-3 stays visible


def test_magnitude_plot_limit_labels_do_not_overlap():
    pytest.importorskip("matplotlib")
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure
    from pyconvtbc.study.plots import _magnitude_figure
    r = study.run_study("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"],
                                        "grad_weight_dtypes": ["hifloat8", "float8_e4m3fn"]}, grads=["gradWeight"])
    fig = _magnitude_figure(Figure, r)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    for ax in fig.axes:
        boxes = [t.get_window_extent(renderer) for t in ax.texts if "\n" in t.get_text()]   # the limit labels
        for i, a in enumerate(boxes):
            for b in boxes[i + 1:]:
                assert not a.overlaps(b), "two limit labels overlap"


def test_bar_figures_wrap_into_rows():
    """Three panels side by side made a 2240x322 strip; two a row keep the figure readable when scaled."""
    pytest.importorskip("matplotlib")
    from matplotlib.figure import Figure
    from pyconvtbc.study.plots import _mode_figures
    r = study.reduction_order_spread("8,2,4,4,3,1", {"cube_math_types": ["KEEP_DTYPE"],
                                                      "grad_weight_dtypes": ["float32", "hifloat8"]},
                                     permutations=3, grads=["gradInput", "gradWeight"])
    name, fig = next(_mode_figures(Figure, r, ["grad_weight_dtype"], ["gradInput", "gradWeight"]))
    w, h = fig.get_size_inches()
    assert len(fig.axes) == 3 and w / h <= 3.5
