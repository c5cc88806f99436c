"""What the three studies share: running every cell of a grid on every problem, and the result's metadata."""
from __future__ import annotations

import datetime
from dataclasses import asdict

import numpy as np

from ..api import conv_tbc_backward
from ..status import AclnnError
from .choices import GRADS, REFERENCES, _norm_bool, _norm_grads, _normalise
from .metrics import _METRIC_KEYS, error_metrics
from .progress import _Progress

_SAMPLE_MAX = 20000


def _measure(problem, cell, grads, reference, deterministic, num_threads, rng):
    """Rows (one per gradient) for one cell on one problem, plus ULP samples for the histograms."""
    base = {**problem.context(), **asdict(cell)}
    x = problem.inputs(cell.input_dtype)
    rows, samples = [], []
    try:
        outs = conv_tbc_backward(x["grad_output"], x["input"], x["weight"], x["bias"], problem.shape.pad,
                                 **cell.kwargs(deterministic, num_threads))
        status, message = 0, ""
    except AclnnError as e:
        outs, status, message = None, e.status, str(e.message)
    ref = problem.reference(cell.input_dtype, reference)
    for g in grads:
        row = dict(base)
        row.update(grad=g, out_format=cell.out_format(g), reduction_length=problem.shape.reduction_length(g),
                   status=status, message=message)
        if outs is None:
            row.update(dict.fromkeys(_METRIC_KEYS))
            samples.append(None)
        else:
            m, ulps = error_metrics(outs[GRADS.index(g)], ref[g], row["out_format"], return_ulps=True)
            row.update(m)
            if ulps.size > _SAMPLE_MAX:
                ulps = rng.choice(ulps, _SAMPLE_MAX, replace=False)
            samples.append(ulps)
        rows.append(row)
    return rows, samples


def _sweep(label, problems, cells, grads, reference, deterministic, num_threads, progress, extend=None):
    """Rows and ULP samples of every cell on every problem (``_measure``), with a progress bar.

    ``extend(problem, cell, rows)``, when given, adds to each cell's rows before the bar moves on.
    """
    rows, samples = [], []
    rng = np.random.default_rng(0)
    bar = _Progress(len(problems) * len(cells), label, progress)
    for p in problems:
        for c in cells:
            r, s = _measure(p, c, grads, reference, deterministic, num_threads, rng)
            if extend is not None:
                extend(p, c, r)
            rows += r
            samples += s
            bar.update()
    bar.close()
    return rows, samples


def _meta(kind, grid, problems, grads, reference, deterministic, **extra):
    from .. import __version__
    ref_text = ("float64, from the operator's inputs (the values in the input dtype, not rounded to the compute "
                "precision)" if reference == "inputs" else
                "float64, from the source data before the cast to the input dtype")
    return {"kind": kind, "version": __version__, "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "grid": {k: list(v) for k, v in asdict(grid).items()},
            "problems": [p.context() for p in problems], "grads": list(grads), "reference": reference,
            "reference_text": ref_text, "deterministic": deterministic, **extra}


def _check_common(grads, reference, deterministic):
    grads = _norm_grads(grads)
    reference = _normalise("reference", reference, REFERENCES, what="reference")
    if deterministic is not None:
        deterministic = _norm_bool("deterministic", deterministic)
    return grads, reference, deterministic
