# cython: language_level=3
"""Python view of the OpenMP shim: is OpenMP compiled in, and how many threads to use."""
import os

from ._openmp cimport PYCONVTBC_HAVE_OPENMP, omp_get_num_procs


def have_openmp():
    """True when the extension was compiled with OpenMP."""
    return bool(PYCONVTBC_HAVE_OPENMP)


def cpu_count():
    """Usable cores: the process's CPU affinity where the OS tells it, else OpenMP's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, omp_get_num_procs() if PYCONVTBC_HAVE_OPENMP else (os.cpu_count() or 1))


def effective_threads(requested=None):
    """The thread count a kernel will use: ``requested``, else $PYCONVTBC_NUM_THREADS, else all cores.

    Always 1 without OpenMP.  Raises ValueError for a non-positive or non-integer request.
    """
    if requested is None:
        env = os.environ.get("PYCONVTBC_NUM_THREADS", "").strip()
        requested = int(env) if env else cpu_count()
    if isinstance(requested, bool) or int(requested) != requested or requested < 1:
        raise ValueError(f"num_threads must be a positive integer, got {requested!r}")
    return int(requested) if PYCONVTBC_HAVE_OPENMP else 1
