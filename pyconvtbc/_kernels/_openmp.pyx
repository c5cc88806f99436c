# cython: language_level=3
"""Python view of the OpenMP shim: is OpenMP compiled in, and how many threads to use.

The thread count of a call, first match wins (docs/numpy.md, "Threads"):

1. an explicit ``num_threads`` argument;
2. ``$PYCONVTBC_NUM_THREADS`` (read at every call);
3. OpenMP's ``omp_get_max_threads()`` in the calling thread, which follows ``$OMP_NUM_THREADS`` (read by the
   OpenMP runtime when it loads) and ``threadpoolctl.threadpool_limits`` / ``omp_set_num_threads``; without
   either it is the number of cores the process may run on.

Built without OpenMP every kernel runs serially, whatever was asked.
"""
import os

from ._openmp cimport PYCONVTBC_HAVE_OPENMP, omp_get_max_threads, omp_get_num_procs, omp_set_num_threads

MAX_THREADS = 1024  # an explicit count above this is an error (a typo, not a machine)
ENV = "PYCONVTBC_NUM_THREADS"


def have_openmp():
    """True when the extension was compiled with OpenMP."""
    return bool(PYCONVTBC_HAVE_OPENMP)


def cpu_count():
    """Usable cores: the process's CPU affinity where the OS tells it, else OpenMP's count."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, omp_get_num_procs() if PYCONVTBC_HAVE_OPENMP else (os.cpu_count() or 1))


def omp_max_threads():
    """``omp_get_max_threads()`` of the calling thread (1 without OpenMP)."""
    return max(1, omp_get_max_threads()) if PYCONVTBC_HAVE_OPENMP else 1


def _set_omp_max_threads(int n):
    """``omp_set_num_threads(n)`` in the calling thread (for tests; threadpoolctl does the same)."""
    omp_set_num_threads(n)


def _bad(what, value):
    return f"{what} is {value!r}; expected an integer in [1, {MAX_THREADS}]"


def _count(value, what):
    if isinstance(value, str) and what == ENV:  # an argument must be an int; only the variable is text
        text = value.strip()
        # ASCII digits only: no sign, no '1.5', no '1e3', and none of the other characters str.isdigit accepts
        # ('²', which int() refuses with a message naming neither the variable nor the range)
        if not (text.isascii() and text.isdigit()):
            raise ValueError(_bad(what, value))
        value = int(text)
    if isinstance(value, bool) or not hasattr(value, "__index__"):
        raise ValueError(_bad(what, value))
    try:
        n = value.__index__()
    except Exception:
        raise ValueError(_bad(what, value)) from None
    if not 1 <= n <= MAX_THREADS:
        raise ValueError(_bad(what, value))
    return n


def requested_threads(requested=None):
    """The count the caller asked for (argument, then $PYCONVTBC_NUM_THREADS), or None for "not set".

    Raises ValueError naming the argument or the variable for a bad value.
    """
    if requested is not None:
        return _count(requested, "num_threads")
    env = os.environ.get(ENV, "")
    if env.strip():
        return _count(env, ENV)
    return None


def effective_threads(requested=None):
    """The thread count a kernel will use: ``requested``, else $PYCONVTBC_NUM_THREADS, else
    ``omp_get_max_threads()`` (which $OMP_NUM_THREADS and threadpoolctl drive; all usable cores by default).

    Always 1 without OpenMP.  Raises ValueError (naming the argument or the variable) for a value that is not
    an integer in [1, MAX_THREADS].
    """
    n = requested_threads(requested)
    if not PYCONVTBC_HAVE_OPENMP:
        return 1
    if n is None:
        n = min(omp_max_threads(), MAX_THREADS)
    return n
