"""Study 1: the per-mode error table (``python -m pyconvtbc study`` / ``study modes``)."""
from __future__ import annotations

from .choices import GRADS
from .data import _problems
from .grid import _as_grid
from .report import StudyResult
from .sweep import _check_common, _meta, _sweep


def run_study(shapes=None, grid=None, *, npz=None, pad=None, distribution="normal", scales=(1.0,), seed=0,
              grads=GRADS, reference="inputs", deterministic=True, num_threads=None, progress=False):
    """Per-mode error table: every cell of ``grid`` on every problem (shape x scale, or the npz arrays).

    shapes: Shape / 'T,B,Cin,Cout,K[,pad]' / tuples, one or a list (default 64,8,64,64,3,1); npz: a file of
    arrays instead (``load_npz``); grid: a ``Grid`` or a dict of its axes; deterministic: passed to the
    operator (None: the profile's default); progress: True / False / 'auto' (stderr is a terminal).
    Returns a ``StudyResult`` (``.table()``, ``.save(dir)``, ``.rows``).
    """
    grid = _as_grid(grid)
    grads, reference, deterministic = _check_common(grads, reference, deterministic)
    problems = _problems(shapes, npz, distribution, scales, seed, pad)
    rows, samples = _sweep("study", problems, grid.cells(), grads, reference, deterministic, num_threads, progress)
    return StudyResult("modes", rows, _meta("modes", grid, problems, grads, reference, deterministic), samples)
