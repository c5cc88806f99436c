/* _ukr_select.c: which instruction set this CPU and build can run, and its micro-kernel table (_ukr.h).
 *
 * The only place in the kernel room that compares ISA codes: one row per ISA in ct_ukr_select.
 */
#include "_ukr.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PYCONVTBC_NO_SIMD)
#define CT_X86 1
#else
#define CT_X86 0
#endif

static int ct_amd = -1;

int ct_cpu_is_amd(void) {
    if (ct_amd < 0) ct_isa_supported();
    return ct_amd;
}

int ct_isa_supported(void) {
    int best = CT_ISA_PORTABLE;
#if CT_X86
    __builtin_cpu_init();
    ct_amd = __builtin_cpu_is("amd") ? 1 : 0;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        best = CT_ISA_AVX2;
    if (best == CT_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        best = CT_ISA_AVX512;
#else
    ct_amd = 0;
#endif
    return best;
}

/* Fills *U with isa's table, the knobs resolved (0 = by CPU); -1 when this build has no such kernels. */
int ct_ukr_select(ct_ukr *U, int isa, const ct_ukr_opts *o) {
    ct_ukr_opts r = *o;
    int amd = ct_cpu_is_amd();
    if (r.gi_rows == 0) r.gi_rows = amd ? 4 : 6;
    if (r.bcast == 0) r.bcast = amd ? 1 : -1;
    switch (isa) {
        case CT_ISA_PORTABLE: return ct_ukr_init_portable(U, &r);
        case CT_ISA_AVX2: return ct_ukr_init_avx2(U, &r);
        case CT_ISA_AVX512: return ct_ukr_init_avx512(U, &r);
        default: return -1;
    }
}
