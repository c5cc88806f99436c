# The only place OpenMP is touched (after scikit-learn's _openmp_helpers.pxd).
# Built without OpenMP, the fallbacks below make every kernel run serially and prange a plain loop.
cdef extern from *:
    """
    #ifdef _OPENMP
    #include <omp.h>
    #define PYCONVTBC_HAVE_OPENMP 1
    #else
    #define PYCONVTBC_HAVE_OPENMP 0
    static inline int omp_get_max_threads(void) { return 1; }
    static inline int omp_get_thread_num(void) { return 0; }
    static inline int omp_get_num_threads(void) { return 1; }
    static inline int omp_get_num_procs(void) { return 1; }
    #endif
    """
    bint PYCONVTBC_HAVE_OPENMP
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
    int omp_get_num_threads() noexcept nogil
    int omp_get_num_procs() noexcept nogil
