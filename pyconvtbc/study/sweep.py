"""What the three studies share: running every cell of a grid on every problem, and the result's metadata."""
from __future__ import annotations

import datetime
import math
from dataclasses import asdict

import numpy as np

from .._op_conv_tbc import conv_tbc as conv_tbc_forward
from ..api import conv_tbc_backward
from ..codecs import round_to_hf32
from ..status import AclnnError
from .choices import (CUBE_MATH_TYPES, FORWARD, GRADS, REFERENCES, _norm_bool, _norm_grads, _norm_threads,
                      FORWARD_ONLY_INPUTS, _normalise, amax_fraction)
from .metrics import _METRIC_KEYS, error_metrics, format_limits
from .progress import _Progress

_SAMPLE_MAX = 20000


# The format whose range bounds a compute precision's operands (FP32 and HF32 share float32's exponent range).
_COMPUTE_RANGE = {"FP32": "float32", "HF32": "float32", "FP16": "float16", "BF16": "bfloat16"}


def _amax_scale(problem, cell, reference):
    """The power-of-two grad_output scale of an 'amax:FRAC' problem for ``cell``: the largest 2^e with
    2^e * max|exact gradWeight| <= FRAC * (largest finite value of gradWeight's output format), and 2^e *
    max|grad_output| <= FRAC * (largest finite value of the input dtype and of the compute precision C: under
    USE_FP16 the operands are fp16, so an fp32 gradWeight's ~2^120 would make them overflow); 1 without amax."""
    frac = problem.amax
    if frac is None:
        return 1.0
    if frac == "best":
        return _best_scale(problem, cell, reference)
    if frac == "format":
        frac = amax_fraction(cell.out_format("gradWeight"))
    ref = problem.reference(cell.input_dtype, reference)["gradWeight"]
    ref = np.abs(ref[np.isfinite(ref)])
    amax = float(ref.max()) if ref.size else 0.0
    if amax == 0:
        return 1.0
    e = math.floor(math.log2(frac * format_limits(cell.out_format("gradWeight"))["largest_finite"] / amax))
    # never past FRAC of the input dtype's range for grad_output itself (an fp32 gradWeight would ask for ~2^120)
    dy = np.abs(problem.source["grad_output"])
    dy_max = float(dy[np.isfinite(dy)].max()) if dy.size else 0.0
    if dy_max > 0:
        fmts = [cell.input_dtype] + ([_COMPUTE_RANGE[cell.compute]] if cell.compute in _COMPUTE_RANGE else [])
        for f in fmts:
            e = min(e, math.floor(math.log2(frac * format_limits(f)["largest_finite"] / dy_max)))
    return 2.0 ** e


BEST_OCTAVES = 24    # 'best' tries 2^e for e = the amax rule's exponent at FRAC 1 down to 24 octaves below it


def _best_scale(problem, cell, reference, deterministic=True):
    """'best': the power of two 2^e of grad_output, from the amax rule's at FRAC 1 down ``BEST_OCTAVES`` octaves,
    whose gradWeight has the smallest rel Frob (over 2^e with a rel Frob and no NaN / Inf; the largest e among
    equals); 1 when gradWeight's exact values are all 0 or the operator rejects the cell."""
    top = _amax_scale(problem._replace_scale("amax:1"), cell, reference)
    best = None
    for k in range(BEST_OCTAVES + 1):
        sc = top * 2.0 ** -k
        x = problem.scaled_inputs(cell.input_dtype, sc)
        try:
            gw = _run_cell(x, problem.shape.pad, cell, deterministic, None)[1]
        except AclnnError:
            return 1.0
        m = error_metrics(gw, problem.reference(cell.input_dtype, reference, sc)["gradWeight"],
                          cell.out_format("gradWeight"))
        if m["rel_fro"] is None or m["n_nan"] or m["n_inf"]:
            continue
        if best is None or m["rel_fro"] < best[0]:
            best = (m["rel_fro"], sc)
    return 1.0 if best is None else best[1]


def _run_cell(x, pad, cell, deterministic, num_threads, order_seed=None):
    """The operator's three gradients for one cell; an HF32 width beyond the chips (``Cell.what_if``) runs as
    FP32 (KEEP_DTYPE) on operands rounded to that width first (HF32 products of up to 12-bit significands are
    exact in fp32, so this is the HF32 path with another width), gradBias from the unrounded grad_output as in
    every mode."""
    kw = cell.kwargs(deterministic, num_threads)
    if order_seed is not None:
        kw["order_seed"] = order_seed
    if not cell.what_if:
        return conv_tbc_backward(x["grad_output"], x["input"], x["weight"], x["bias"], pad, **kw)
    kw.update(cube_math_type=CUBE_MATH_TYPES["KEEP_DTYPE"], hf32_mantissa_bits=None)
    rnd = dict(mantissa_bits=cell.hf32_mantissa_bits, rounding=cell.hf32_rounding)
    dy, xi, w = (round_to_hf32(x[k], **rnd) for k in ("grad_output", "input", "weight"))
    gi, gw, _ = conv_tbc_backward(dy, xi, w, x["bias"], pad, **kw)
    gb = conv_tbc_backward(x["grad_output"], x["input"], x["weight"], x["bias"], pad, **kw)[2]
    return gi, gw, gb


def _run_forward(x, pad, cell, num_threads):
    """The forward's output for one cell; an HF32 width beyond the chips runs as FP32 (KEEP_DTYPE) on input and
    weight rounded to that width first (the bias is never HF32-rounded, as in the operator)."""
    kw = cell.forward_kwargs(num_threads)
    xi, w = x["input"], x["weight"]
    if cell.what_if:
        kw.update(cube_math_type=CUBE_MATH_TYPES["KEEP_DTYPE"], hf32_mantissa_bits=None)
        rnd = dict(mantissa_bits=cell.hf32_mantissa_bits, rounding=cell.hf32_rounding)
        xi, w = round_to_hf32(xi, **rnd), round_to_hf32(w, **rnd)
    return conv_tbc_forward(xi, w, x["bias"], pad, **kw)


def _measure(problem, cell, grads, reference, deterministic, num_threads, rng, dy_scale=None):
    """Rows (one per gradient) for one cell on one problem, plus ULP samples for the histograms.

    ``dy_scale``: grad_output is multiplied by it before the cast to the input dtype (default: the problem's
    amax rule, else 1); the metrics then compare the scaled result with the scaled exact value in the output
    format (so ULPs, underflow and overflow are those of the stored values) and report ``max_abs`` unscaled.
    """
    if dy_scale is None:
        dy_scale = _amax_scale(problem, cell, reference)
    base = {**problem.context(), **asdict(cell), "dy_scale": dy_scale}
    x = problem.scaled_inputs(cell.input_dtype, dy_scale)
    rows, samples = [], []
    results = {}                 # "backward" / "forward": (outputs or None, status, message)
    for kind, wanted, run in (("backward", any(g in GRADS for g in grads),
                               lambda: _run_cell(x, problem.shape.pad, cell, deterministic, num_threads)),
                              ("forward", FORWARD in grads, lambda: _run_forward(x, problem.shape.pad, cell,
                                                                                  num_threads))):
        if wanted:
            try:
                results[kind] = (run(), 0, "")
            except AclnnError as e:
                results[kind] = (None, e.status, str(e.message))
    for g in grads:
        outs, status, message = results["forward" if g == FORWARD else "backward"]
        row = dict(base)
        row.update(grad=g, out_format=cell.out_format(g), reduction_length=problem.shape.reduction_length(g),
                   status=status, message=message)
        if g == FORWARD:          # the forward never reads grad_output: no scale of it applies to this row
            row["dy_scale"] = 1.0
        if outs is None:
            row.update(dict.fromkeys(_METRIC_KEYS))
            samples.append(None)
        else:
            if g == FORWARD:      # grad_output (and its scale) plays no part in the forward
                m, ulps = error_metrics(outs, problem.forward_reference(cell.input_dtype, reference),
                                        row["out_format"], return_ulps=True)
            else:
                m, ulps = error_metrics(outs[GRADS.index(g)], problem.reference(cell.input_dtype, reference,
                                                                                 dy_scale)[g],
                                        row["out_format"], return_ulps=True)
            if m["max_abs"] is not None and g != FORWARD:
                m["max_abs"] /= dy_scale
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
    eight = sorted({c.input_dtype for c in cells if c.input_dtype in FORWARD_ONLY_INPUTS})
    if eight and any(g != FORWARD for g in grads):
        raise ValueError(f"input_dtypes: {', '.join(eight)} operands exist for the forward only (ascend950's "
                         "aclnnConvTbc); expected grads ['output'] (--grads output) with them")
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


def _no_forward(grads, why):
    """ValueError when ``grads`` asks for the forward's output in a study that cannot measure it (``why``)."""
    if FORWARD in grads:
        raise ValueError(f"grads: {FORWARD!r}: {why}; expected gradInput, gradWeight or gradBias")


def _check_amax_grads(grads, scales, scale_operands="grad_output"):
    """ValueError when every measured result is the forward's output and a scale would change nothing: 'amax' /
    'best' scale grad_output, which the forward does not read, and so does a number unless scale_operands is
    'all'."""
    if not grads or not all(g == FORWARD for g in grads):
        return
    if any(isinstance(s, str) for s in scales or ()):
        raise ValueError("scales: amax and best scale grad_output, which the forward's output (grads 'output') "
                         "does not read; expected numbers, or a gradient among grads")
    if scale_operands != "all" and any(s != 1 for s in scales or ()):
        raise ValueError("scales: a number scales grad_output alone by default, which the forward's output "
                         "(grads 'output') does not read; expected scale_operands 'all' (--scale-operands all)")


def _check_common(grads, reference, deterministic, num_threads=None):
    _norm_threads(num_threads)
    grads = _norm_grads(grads)
    reference = _normalise("reference", reference, REFERENCES, what="reference")
    if deterministic is not None:
        deterministic = _norm_bool("deterministic", deterministic)
    return grads, reference, deterministic


def _seeds(seed, repeat, from_file):
    """The seeds of a study: [seed] or, with ``repeat`` = N > 1, seed .. seed + N - 1."""
    if isinstance(repeat, bool) or not isinstance(repeat, (int, np.integer)) or not 1 <= repeat <= 1000:
        raise ValueError(f"repeat: {repeat!r}; expected an integer 1..1000 (the number of seeds)")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: {seed!r}; expected an integer >= 0")
    if repeat > 1 and from_file:
        raise ValueError(f"repeat: {repeat}; repeats draw new random data, expected 1 with data from a file")
    return [int(seed) + i for i in range(int(repeat))]
