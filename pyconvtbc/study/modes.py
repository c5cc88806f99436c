"""Study 1: the per-mode error table (``python -m pyconvtbc study`` / ``study modes``)."""
from __future__ import annotations

from .choices import GRADS
from .data import _problems
from .grid import _as_grid
from .report import StudyResult
from .magnitudes import magnitude_rows
from .repeat import aggregate
from .sweep import _check_amax_grads, _check_common, _meta, _seeds, _sweep


def run_study(shapes=None, grid=None, *, npz=None, data=None, pad=None, distribution="normal", scales=(1.0,),
              seed=0, repeat=1, grads=GRADS, reference="inputs", deterministic=True, num_threads=None,
              progress=False, scale_operands="grad_output"):
    """Per-mode error table: every cell of ``grid`` on every problem (shape x scale, or the arrays of a file).

    shapes: Shape / 'T,B,Cin,Cout,K[,pad]' / tuples, one or a list (default 64,8,64,64,3,1); npz: an .npz file of
    arrays instead (``load_npz``); data: a file (``load_data``: .npz, a directory of .npy, .pt), a ``capture``
    or a list of dicts of arrays, one problem per record (a captured model: one per layer call); scales: numbers
    (multiply grad_output, or every operand with scale_operands='all') and / or 'amax[:FRAC]' (per mode,
    grad_output times the power of two that puts the exact gradWeight's largest magnitude in (FRAC/2, FRAC] of
    its format's largest finite value; FRAC by default 2^-11 for HiFloat8 and 0.5 otherwise; lowered where
    grad_output itself would pass FRAC of the input dtype's or the compute precision's range) and / or 'best'
    (per mode, the power of two of grad_output with the smallest gradWeight rel Frob, scanned over 25 octaves
    from the amax rule at FRAC 1 down); scale_operands: what a numeric scale multiplies, 'grad_output'
    (default) or 'all' (every operand); repeat: the number of seeds (seed, seed+1, ...) whose results are
    averaged, with 95 % intervals;
    grid: a ``Grid`` or a dict of its axes; deterministic: passed to the operator (None: the profile's
    default); progress: True / False / 'auto' (stderr is a terminal).
    Returns a ``StudyResult`` (``.table()``, ``.save(dir)``, ``.rows``).
    """
    grid = _as_grid(grid)
    grads, reference, deterministic = _check_common(grads, reference, deterministic, num_threads)
    seeds = _seeds(seed, repeat, npz is not None or data is not None)
    problems = _problems(shapes, npz, distribution, scales, seeds, pad, data, scale_operands)
    _check_amax_grads(grads, [p.scale for p in problems], scale_operands)
    rows, samples = _sweep("study", problems, grid.cells(), grads, reference, deterministic, num_threads, progress)
    if len(seeds) > 1:
        rows, samples = aggregate(rows, samples)
    mags, values = magnitude_rows(_magnitude_problems(problems, seeds[0]), grid.cells(), grads, reference)
    meta = _meta("modes", grid, problems, grads, reference, deterministic, repeats=len(seeds), magnitudes=mags,
                 scale_operands=scale_operands)
    return StudyResult("modes", rows, meta, samples, values)


def _magnitude_problems(problems, seed):
    """The problems of the magnitude view: the first seed's; an amax problem only when no plain problem holds
    the same data (its data are the unscaled ones)."""
    plain = {(p.shape, p.distribution) for p in problems if not isinstance(p.scale, str)}
    return [p for p in problems if p.seed in (None, seed)
            and not (isinstance(p.scale, str) and (p.shape, p.distribution) in plain)]
