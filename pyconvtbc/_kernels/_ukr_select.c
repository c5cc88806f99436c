/* _ukr_select.c: which instruction sets this CPU and build can run, and the micro-kernel table of each (_ukr.h).
 *
 * The only place in the kernel room that compares ISA codes: one row per ISA in ct_cpu_has and ct_ukr_select.
 */
#include "_ukr.h"

static int ct_amd = -1;
int ct_isa_runs(int isa);

/* the fastest ISA with a table of its own (not over another) that runs here */
static int ct_isa_plain(void) {
    static const int pref[] = {CT_ISA_AVX512, CT_ISA_AVX2, CT_ISA_NEON};
    for (int i = 0; i < (int)(sizeof(pref) / sizeof(pref[0])); i++)
        if (ct_isa_runs(pref[i])) return pref[i];
    return CT_ISA_PORTABLE;
}

/* whether the CPU has the extensions an ISA's file is compiled for */
static int ct_cpu_has(int isa) {
    switch (isa) {
        case CT_ISA_PORTABLE: return 1;
#if defined(__x86_64__) && defined(__GNUC__)
        case CT_ISA_AVX2:
            return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
        case CT_ISA_AVX512:
            return ct_cpu_has(CT_ISA_AVX2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                   __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq");
#endif
#if defined(__aarch64__)
        case CT_ISA_NEON: return 1;                 /* Advanced SIMD with FMA: every AArch64 CPU */
#endif
        case CT_ISA_AMX: return ct_cpu_has(CT_ISA_AVX512);     /* the tiles themselves: ct_ukr_init_amx */
        case CT_ISA_AMX_SW: return 1;
        default: return 0;
    }
}

int ct_cpu_is_amd(void) {
    if (ct_amd < 0) {
#if defined(__x86_64__) && defined(__GNUC__)
        __builtin_cpu_init();
        ct_amd = __builtin_cpu_is("amd") ? 1 : 0;
#else
        ct_amd = 0;
#endif
    }
    return ct_amd;
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
        case CT_ISA_NEON: return ct_ukr_init_neon(U, &r);
        case CT_ISA_AMX: {
            ct_ukr base;
            return ct_ukr_select(&base, CT_ISA_AVX512, &r) == 0 ? ct_ukr_init_amx(U, &base, 1, r.amx_pack >= 0) : -1;
        }
        case CT_ISA_AMX_SW: {                       /* the stand-in, over the best plain table */
            ct_ukr base;
            return ct_ukr_select(&base, ct_isa_plain(), &r) == 0
                   ? ct_ukr_init_amx(U, &base, 0, r.amx_pack >= 0 && ct_cpu_has(CT_ISA_AVX512)) : -1;
        }
        default: return -1;
    }
}

/* 1 when this CPU and build run isa's kernels */
int ct_isa_runs(int isa) {
    ct_ukr U;
    ct_ukr_opts o = {1, 0, 0};
    if (isa < 0 || isa >= CT_ISA_N || !ct_cpu_has(isa)) return 0;
    return ct_ukr_select(&U, isa, &o) == 0;
}

/* the fastest ISA that runs here (AMX first: its table serves BF16 and hands every other call to AVX-512's) */
int ct_isa_supported(void) {
    return ct_isa_runs(CT_ISA_AMX) ? CT_ISA_AMX : ct_isa_plain();
}
