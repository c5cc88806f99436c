"""Study 4: the window of grad_output scales in which each mode's outputs neither underflow nor overflow
(``study window``)."""
from __future__ import annotations

from dataclasses import asdict

import numpy as np

from .choices import _as_list, _as_whole
from .data import _problems
from .grid import _as_grid
from .progress import _Progress
from .report import StudyResult
from .sweep import _check_common, _measure, _meta, _no_forward

DEFAULT_EXPONENTS = tuple(range(-32, 33))


def _norm_threshold(t, argname="threshold"):
    try:
        v = float(t)
    except (TypeError, ValueError):
        v = float("nan")
    if isinstance(t, bool) or not 0 <= v < 1:
        raise ValueError(f"{argname}: {t!r}; expected a fraction in [0, 1)")
    return v


def _norm_exponents(exponents, argname="exponents"):
    out = []
    for e in _as_list(argname, exponents):
        w = _as_whole(e)
        if w is None or not -126 <= w <= 127:
            raise ValueError(f"{argname}: {e!r}; expected integers in -126..127 (the scales 2^e)")
        out.append(w)
    return sorted(set(out))


def scale_window(shapes=None, grid=None, *, exponents=DEFAULT_EXPONENTS, threshold=0.01, npz=None, data=None,
                 pad=None, distribution="normal", seed=0, grads=("gradWeight",), reference="inputs",
                 deterministic=True, num_threads=None, progress=False):
    """For each mode: the results with grad_output scaled by 2^e for each e in ``exponents`` (the gradients scale
    with it, as under loss scaling; the metrics compare the scaled result with the scaled exact value), and the
    window of e where neither ``frac_overflow`` nor ``frac_subnormal`` (exact values below the output format's
    smallest normal, where it loses precision or flushes to zero) exceeds ``threshold`` and no result is NaN
    (an unsaturated FLOAT8_E4M3FN output overflows to NaN: there any overflow ends the window).

    Returns a StudyResult of kind 'window': ``rows`` one per (problem, mode, gradient, e) (``exponent`` holds e);
    ``meta['windows']`` one per (problem, mode, gradient): ``lo`` / ``hi`` (the widest run of consecutive
    exponents that pass; None when none does), ``octaves`` (hi - lo), ``best`` (the smallest rel_fro inside)
    at ``best_at``, ``worst`` (the largest rel_fro inside).
    """
    grid = _as_grid(grid)
    grads, reference, deterministic = _check_common(grads, reference, deterministic, num_threads)
    _no_forward(grads, "the forward does not read grad_output, whose scale the window sweeps")
    exps = _norm_exponents(exponents)
    thr = _norm_threshold(threshold)
    problems = _problems(shapes, npz, distribution, [1.0], seed, pad, data)
    cells = grid.cells()
    rows, samples = [], []
    rng = np.random.default_rng(0)
    bar = _Progress(len(problems) * len(cells) * len(exps), "window", progress)
    windows = []
    for p in problems:
        for c in cells:
            per = []
            for e in exps:
                r, s = _measure(p, c, grads, reference, deterministic, num_threads, rng, dy_scale=2.0 ** e)
                for row in r:
                    row["exponent"] = e
                rows += r
                samples += s
                per += r
                bar.update()
            for g in grads:
                windows.append(_window([r for r in per if r["grad"] == g], thr, p.context(), asdict(c), g))
        p._cache.clear()
    bar.close()
    meta = _meta("window", grid, problems, grads, reference, deterministic, exponents=exps, threshold=thr,
                 windows=windows)
    return StudyResult("window", rows, meta, samples)


def _passes(r, thr):
    return (r["status"] == 0 and r["frac_overflow"] is not None and r["frac_overflow"] <= thr
            and (r["frac_subnormal"] or 0.0) <= thr and not r["n_nan"])


def _window(rows, thr, problem, cell, grad):
    """The widest run of consecutive exponents whose rows pass, and the error inside it."""
    best_run, run = [], []
    for r in rows:                     # rows are in ascending exponent order
        if _passes(r, thr) and (not run or r["exponent"] == run[-1]["exponent"] + 1):
            run.append(r)
        elif _passes(r, thr):
            run = [r]
        else:
            run = []
        if len(run) > len(best_run):
            best_run = list(run)
    out = {**problem, **cell, "grad": grad, "out_format": rows[0]["out_format"] if rows else None,
           "status": rows[0]["status"] if rows else None, "lo": None, "hi": None, "octaves": None, "best": None,
           "best_at": None, "worst": None}
    errs = [(r["rel_fro"], r["exponent"]) for r in best_run if r["rel_fro"] is not None]
    if best_run:
        out.update(lo=best_run[0]["exponent"], hi=best_run[-1]["exponent"],
                   octaves=best_run[-1]["exponent"] - best_run[0]["exponent"])
    if errs:
        b = min(errs)
        out.update(best=b[0], best_at=b[1], worst=max(errs)[0])
    return out
