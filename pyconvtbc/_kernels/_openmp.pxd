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
    static inline void omp_set_num_threads(int n) { (void)n; }
    #endif
    /* An orphaned barrier: called from inside a parallel region (e.g. between two prange loops of one
     * Cython `parallel()` block, whose loops end without one) it binds to that region; serially a no-op. */
    static inline void pyconvtbc_omp_barrier(void) {
    #ifdef _OPENMP
        _Pragma("omp barrier")
    #endif
    }
    """
    bint PYCONVTBC_HAVE_OPENMP
    int omp_get_max_threads() noexcept nogil
    int omp_get_thread_num() noexcept nogil
    int omp_get_num_threads() noexcept nogil
    int omp_get_num_procs() noexcept nogil
    void omp_set_num_threads(int n) noexcept nogil
    void pyconvtbc_omp_barrier() noexcept nogil
