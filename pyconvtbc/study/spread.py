"""Study 2: the run-to-run spread from the fp32 accumulation order (``study spread``), on a NumPy model of the
cube that adds the terms of each output element in a chosen order."""
from __future__ import annotations

import numpy as np

from .. import codecs, formats as _reg
from ..codecs import round_to_hf32
from .choices import (_COMPUTE_BY_NAME, _GRAD_ALIASES, GRADS, INPUT_DTYPES, _norm_bool, _norm_permutations,
                      _normalise)
from .data import MAX_ELEMENTS, Shape, _problems
from .grid import _as_grid
from .metrics import _SPREAD_KEYS, _fmt_name, _spread_stats
from .report import StudyResult
from .sweep import _check_common, _meta, _no_forward, _sweep


def _round_to_compute(a32, compute, bits, rounding):
    """fp32 operands rounded to the compute precision (the values the cube multiplies)."""
    if compute == "FP32":
        return a32
    if compute == "HF32":
        return round_to_hf32(a32, mantissa_bits=bits, rounding=rounding)
    storage = next(c.storage for c in _reg.COMPUTE_PRECISIONS if c.name == compute)   # FP16 / BF16
    with np.errstate(over="ignore"):
        return a32.astype(_reg.by_name(storage).storage).astype(np.float32)


def _cast_out(acc, fmt, hif8_rounding, saturate):
    """fp32 accumulators -> values (float64) of the output format (its registry codecs, else a NumPy cast)."""
    t = _reg.by_name(fmt)
    with np.errstate(over="ignore", invalid="ignore"):
        if t.encode:
            given = {"rounding": hif8_rounding, "saturate": saturate}
            coded = getattr(codecs, t.encode)(acc, **{k: given[k] for k in t.encode_keywords})
            return getattr(codecs, t.decode)(coded).astype(np.float64)
        return acc.astype(t.storage).astype(np.float64)


_CHUNK = 1 << 22   # products held at once (16 MiB of fp32)


def _term_chunks(grad, dy, x, w, pad):
    """Yield (output slice, products) with products of shape (n_terms, n_outputs_in_chunk), float32.

    Term j of every output element is the j-th product of its sum (zero where the formula's index is out of
    range); the products are float32 multiplies of float32 operands (exact for HF32/FP16/BF16 operands,
    correctly rounded for FP32 operands).
    """
    T_out, B, Cout = dy.shape
    T, _, Cin = x.shape
    K = w.shape[0]
    if grad == "gradBias":
        yield slice(0, Cout), dy.reshape(T_out * B, Cout)
    elif grad == "gradWeight":
        # gw[k, ci, co] = sum_(t,b) x[t+k-pad, b, ci] * dy[t, b, co]; chunk over ci
        step = max(1, _CHUNK // max(1, K * Cout * T_out * B))
        for c0 in range(0, Cin, step):
            c1 = min(Cin, c0 + step)
            P = np.zeros((T_out * B, K, c1 - c0, Cout), np.float32)
            for k in range(K):
                s0, s1 = max(0, pad - k), min(T_out, T + pad - k)
                if s1 > s0:
                    xs = x[s0 + k - pad:s1 + k - pad, :, c0:c1]
                    P[s0 * B:s1 * B, k] = (xs[:, :, :, None] * dy[s0:s1, :, None, :]).reshape((s1 - s0) * B,
                                                                                            c1 - c0, Cout)
            yield slice(c0, c1), P.reshape(T_out * B, -1)
    else:
        # gi[t, b, ci] = sum_(k,co) dy[t+pad-k, b, co] * w[k, ci, co]; chunk over t
        step = max(1, _CHUNK // max(1, K * Cout * B * Cin))
        for t0 in range(0, T, step):
            t1 = min(T, t0 + step)
            P = np.zeros((K, Cout, t1 - t0, B, Cin), np.float32)
            for k in range(K):
                lo, hi = max(t0, k - pad), min(t1, T_out + k - pad)     # t with 0 <= t+pad-k < T_out
                if hi > lo:
                    d = dy[lo + pad - k:hi + pad - k]                     # (hi-lo, B, Cout)
                    P[k, :, lo - t0:hi - t0] = np.moveaxis(d[:, :, None, :] * w[k][None, None, :, :], 3, 0)
            yield slice(t0, t1), P.reshape(K * Cout, -1)


def _check_runs_fit(permutations, shape, grad, argname="permutations"):
    """ValueError naming ``argname`` when ``permutations`` results of ``grad`` (and the orders of its terms) would
    not fit in memory: at most ``MAX_ELEMENTS`` values, as for each array of a study."""
    elems = {"gradInput": shape.T * shape.B * shape.Cin, "gradWeight": shape.K * shape.Cin * shape.Cout,
             "gradBias": shape.Cout}[grad]
    n = max(elems, shape.reduction_length(grad))
    if permutations * n > MAX_ELEMENTS:
        raise ValueError(f"{argname}: {permutations} orders of {grad} at {shape.label} hold {permutations * n} "
                         f"values ({permutations * n * 8 / 2 ** 30:.3g} GiB in float64); expected at most "
                         f"{max(1, MAX_ELEMENTS // n)} orders at this shape")


def permuted_gradients(grad_output, input, weight, pad=0, *, grad="gradWeight", compute="FP32", permutations=1,
                       seed=0, deterministic=False, out_format=None, hf32_mantissa_bits=11,
                       hf32_rounding="half_away", hif8_rounding="ta", saturate=False):
    """One gradient computed ``permutations`` times, each with its own fp32 accumulation order.

    NumPy model of the cube on already-rounded operands: the operands are rounded to ``compute`` (FP32, HF32,
    FP16, BF16; gradBias uses the original grad_output), every product is a float32 multiply, and the terms
    of each output element are added one by one into a float32 accumulator in the order of a seeded random
    permutation of the terms (one permutation per run, shared by all output elements).  With
    ``deterministic=True`` every run uses the natural order (the formula's), so all runs agree.  The
    accumulator then goes through the output path (gradInput: rounded to C when C is FP16/BF16) and the cast to
    ``out_format`` (default: the input dtype, or float32).

    Returns float64 values of the output format, shape (permutations, *gradient shape).
    """
    grad = _normalise("grad", grad, GRADS, _GRAD_ALIASES, what="gradient")
    compute = _normalise("compute", compute, tuple(_COMPUTE_BY_NAME), what="compute precision")
    _norm_permutations(permutations)
    in_dt = np.asarray(input).dtype
    default_fmt = {dt: name for name, dt in INPUT_DTYPES.items()}.get(in_dt, "float32")
    fmt = _fmt_name(out_format) if out_format is not None else default_fmt
    dy = np.asarray(grad_output).astype(np.float32)
    x = np.asarray(input).astype(np.float32)
    w = np.asarray(weight).astype(np.float32)
    if grad != "gradBias":
        dy, x, w = (_round_to_compute(a, compute, hf32_mantissa_bits, hf32_rounding) for a in (dy, x, w))
    shape = {"gradInput": x.shape, "gradWeight": w.shape, "gradBias": (w.shape[2],)}[grad]
    shp = Shape(x.shape[0], x.shape[1], x.shape[2], w.shape[2], w.shape[0], pad)
    _check_runs_fit(permutations, shp, grad)
    n_terms = shp.reduction_length(grad)
    rng = np.random.default_rng(seed)
    orders = [np.arange(n_terms) if deterministic else rng.permutation(n_terms) for _ in range(permutations)]
    out = np.empty((permutations,) + tuple(shape), np.float64)
    for sl, P in _term_chunks(grad, dy, x, w, pad):
        for i, order in enumerate(orders):
            acc = np.zeros(P.shape[1], np.float32)
            with np.errstate(over="ignore", invalid="ignore"):
                for j in order:
                    acc += P[j]
            if grad == "gradInput" and compute in ("FP16", "BF16"):
                acc = _round_to_compute(acc, compute, 0, "")
            vals = _cast_out(acc, fmt, hif8_rounding, saturate)
            if grad == "gradWeight":    # chunk over ci: P columns are (k, ci_chunk, co)
                out[i][:, sl, :] = vals.reshape(shape[0], sl.stop - sl.start, shape[2])
            elif grad == "gradInput":
                out[i, sl] = vals.reshape(sl.stop - sl.start, shape[1], shape[2])
            else:
                out[i] = vals
    return out


ORDER_SOURCES = ("model", "operator")


def _operator_runs(x, pad, cell, grad, fmt, permutations, deterministic, num_threads):
    """``permutations`` calls of the operator itself, not deterministic (unless ``deterministic``), with order
    seeds 0..N-1: float64 values of the output format, shape (N, *gradient shape)."""
    from .metrics import _values
    from .sweep import _run_cell
    runs = []
    for i in range(permutations):
        out = _run_cell(x, pad, cell, deterministic, num_threads, order_seed=None if deterministic else i)
        runs.append(_values(out[GRADS.index(grad)], fmt))
    return np.stack(runs)


def reduction_order_spread(shapes=None, grid=None, *, permutations=20, deterministic=False, npz=None, data=None,
                           pad=None,
                           distribution="normal", scales=(1.0,), seed=0, grads=("gradInput", "gradWeight"),
                           reference="inputs", num_threads=None, progress=False, source="model",
                           scale_operands="grad_output"):
    """For each cell: the mode's error (from the operator) and the spread of ``permutations`` accumulation
    orders, both in ULPs of the output format.

    ``source="model"``: the orders are sampled in a NumPy model (``permuted_gradients``: every sum's terms added
    one by one in a random order); ``source="operator"``: the operator's own non-deterministic mode, called
    ``permutations`` times with ``deterministic=False`` and order seeds 0..N-1 (each call one of the orders the
    accumulation model allows the hardware; repeatable).  ``deterministic=True`` models deterministic hardware:
    every run uses the same order, the spread is 0.
    """
    grid = _as_grid(grid)
    grads, reference, _ = _check_common(grads, reference, True, num_threads)
    _no_forward(grads, "the forward has one accumulation order (always deterministic), so no spread")
    _norm_permutations(permutations)
    deterministic = _norm_bool("deterministic", deterministic)
    source = _normalise("source", source, ORDER_SOURCES, what="order source")
    order = "fixed" if deterministic else "random"
    problems = _problems(shapes, npz, distribution, scales, seed, pad, data, scale_operands)
    for p in problems:                    # before any computing: the N results of each gradient must fit
        for g in grads:
            _check_runs_fit(permutations, p.shape, g)

    def add_spread(p, c, rows):
        for row in rows:
            row.update(permutations=int(permutations), order=order, order_source=source)
            if row["status"]:
                row.update(dict.fromkeys(_SPREAD_KEYS))
                continue
            x = p.scaled_inputs(c.input_dtype, row["dy_scale"])
            if source == "operator":
                runs = _operator_runs(x, p.shape.pad, c, row["grad"], row["out_format"], permutations,
                                      deterministic, num_threads)
                row.update(_spread_stats(runs, row["out_format"]))
                continue
            runs = permuted_gradients(
                x["grad_output"], x["input"], x["weight"], p.shape.pad, grad=row["grad"], compute=c.compute,
                permutations=permutations, seed=seed, deterministic=deterministic,
                out_format=row["out_format"], hf32_mantissa_bits=c.hf32_mantissa_bits or 11,
                hf32_rounding=c.hf32_rounding or "half_away", hif8_rounding=c.hif8_rounding or "ta",
                saturate=bool(c.saturate))
            row.update(_spread_stats(runs, row["out_format"]))

    rows, samples = _sweep("spread", problems, grid.cells(), grads, reference, True, num_threads, progress,
                           add_spread)
    meta = _meta("spread", grid, problems, grads, reference, True, permutations=int(permutations), order=order,
                 order_source=source, scale_operands=scale_operands)
    return StudyResult("spread", rows, meta, samples)
