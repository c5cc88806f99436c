/* _ukr_amx.c: the cube form's BF16 blocks on Intel AMX tiles (TDPBF16PS), and the same tile operations in
 * software (the stand-in), as two tables over a base table (_ukr.h).
 *
 * What the hardware does (measured on Emerald Rapids; docs/performance.md, "AMX"): TDPBF16PS C += A.B with A's
 * and B's dwords holding bf16 pairs is two fp32 FMA chains from +0, one over the low (even) halves of dwords
 * 0..15 in order, one over the high (odd) halves, each step one rounding (RNE); then t = RN(even + odd) and
 * C = RN(C + t).  Subnormal inputs (A, B, C) are read as zero and subnormal results flushed to zero, whatever
 * MXCSR says.  With a block's 16 operand pairs in the even halves and zeros in the odd ones, the odd chain is
 * +0 and one instruction is the cube model's step at k0 = 16: acc = RN(acc + (fp32 FMA chain of the block's
 * products from +0)), blocks in the order the tiles are fed.
 *
 * The guard (per tile step; where it fails, the base table's FMA kernel makes that block instead):
 *   every operand value is a bf16 value (its fp32 bits' low half zero), none subnormal, Inf or NaN;
 *   emin(A) + emin(B) >= -112 (nonzero values): every product, partial and running sum is then a multiple of
 *     2^-126, so it is 0 or at least 2^-126 in magnitude and DAZ / FTZ never act;
 *   the accumulators (C) are finite multiples of 2^-126 and not -0 when a tile is loaded;
 *   |C| + the sum over the run's blocks of 2^(emax(A) + emax(B) + 6) < 2^126: nothing overflows.
 * Under it the tiles' result equals the model's bit for bit (the research's 4M-output comparison; the start-up
 * self-test below, and tests/test_amx.py on the stand-in everywhere).
 *
 * The drivers here (packing to zero-interleaved tiles, the guard, runs of blocks, the fallback) are written once;
 * an engine runs a sequence of blocks on a 16 x 32 accumulator tile: ct_amx_run_hw (the tiles) or ct_amx_run_sw
 * (the stand-in, the measured semantics in C).  Every other entry of the table, and every call that is not the
 * cube form with k0 = 16, is the base table's: the hardware table sits on AVX-512's, the stand-in on the best
 * table this CPU runs.  ct_ukr_for (in _ukr.h) hands these tables only to calls whose compute precision is BF16.
 */
#define _GNU_SOURCE
#include "_ukr.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PYCONVTBC_NO_SIMD) && defined(__linux__)
#define CT_AMX_HW 1
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#else
#define CT_AMX_HW 0
#endif

#define CT_AMX_RB 16          /* blocks per run: A' 16 KiB, B' 32 KiB of stack per call */
#define CT_AMX_K0 16          /* the one block size a tile step makes */

/* the packed tiles of one block: A' rows m (16 dwords each), B' rows d (32 dwords: two column tiles) */
typedef struct { uint32_t a[16 * 16] __attribute__((aligned(64))); } ct_amx_at;
typedef struct { uint32_t b[16 * 32] __attribute__((aligned(64))); } ct_amx_bt;
/* the guard's facts about one packed operand tile */
typedef struct { uint32_t low; int bad, emin, emax; } ct_amx_st;

/* an engine: C (16 rows x 32 fp32, ld 32) += the blocks of At[0..nb) . Bt[0..nb) (nct column tiles of 16) */
typedef void (*ct_amx_run)(float *C, int nct, const ct_amx_at *At, const ct_amx_bt *Bt, int nb);

/* ---- the stand-in: the measured semantics in C ---- */
static inline float ct_amx_bf(uint32_t h) {        /* a bf16 half, read as the tiles read it (DAZ) */
    uint32_t u = (h & 0xFFFFu) << 16;
    float f;
    if ((u & 0x7F800000u) == 0) u &= 0x80000000u;
    memcpy(&f, &u, 4);
    return f;
}
static inline float ct_amx_ftz(float x) { return fabsf(x) < 0x1p-126f ? copysignf(0.0f, x) : x; }

static int ct_amx_fault = 0;    /* test hook: the engines' results perturbed (the self-test must catch it) */
/* tile steps made on the engines, and blocks the guard sent to the base kernel (all threads; tests read them) */
static int64_t ct_amx_nrun[2], ct_amx_nfall[2];
static inline void ct_amx_count(int64_t *c, int64_t v) { if (v) __atomic_fetch_add(c, v, __ATOMIC_RELAXED); }

/* the fault hook's work: one bit of the first output flipped after a run */
static inline void ct_amx_perturb(float *C, int nb) {
    if (!ct_amx_fault || nb <= 0) return;
    uint32_t u;
    memcpy(&u, C, 4);
    u ^= 1u;
    memcpy(C, &u, 4);
}

static void ct_amx_run_sw(float *C, int nct, const ct_amx_at *At, const ct_amx_bt *Bt, int nb) {
    for (int k = 0; k < nb; k++)
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 16 * nct; n++) {
                float ev = 0.0f, od = 0.0f;
                for (int d = 0; d < 16; d++) {
                    uint32_t a = At[k].a[m * 16 + d], b = Bt[k].b[d * 32 + n];
                    ev = ct_amx_ftz(fmaf(ct_amx_bf(a), ct_amx_bf(b), ev));
                    od = ct_amx_ftz(fmaf(ct_amx_bf(a >> 16), ct_amx_bf(b >> 16), od));
                }
                float c = C[m * 32 + n];
                if (fabsf(c) < 0x1p-126f) c = copysignf(0.0f, c);
                C[m * 32 + n] = ct_amx_ftz(c + ct_amx_ftz(ev + od));
            }
    ct_amx_perturb(C, nb);
}

#if CT_AMX_HW
/* ---- the tiles ---- */
typedef struct __attribute__((packed)) {
    uint8_t palette, start_row, rsv[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} ct_amx_cfg;

#define CT_TAMX __attribute__((target("amx-tile,amx-bf16")))
/* tmm0 / tmm1: the two accumulator column tiles; tmm2: A'; tmm3 / tmm4: B' of the two column tiles */
static CT_TAMX void ct_amx_run_hw(float *C, int nct, const ct_amx_at *At, const ct_amx_bt *Bt, int nb) {
    ct_amx_cfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int t = 0; t < 5; t++) { cfg.rows[t] = 16; cfg.colsb[t] = 64; }
    _tile_loadconfig(&cfg);
    _tile_loadd(0, C, 128);
    if (nct > 1) {
        _tile_loadd(1, C + 16, 128);
        for (int k = 0; k < nb; k++) {
            _tile_loadd(2, At[k].a, 64);
            _tile_loadd(3, Bt[k].b, 128);
            _tile_loadd(4, Bt[k].b + 16, 128);
            _tile_dpbf16ps(0, 2, 3);
            _tile_dpbf16ps(1, 2, 4);
        }
        _tile_stored(1, C + 16, 128);
    } else {
        for (int k = 0; k < nb; k++) {
            _tile_loadd(2, At[k].a, 64);
            _tile_loadd(3, Bt[k].b, 128);
            _tile_dpbf16ps(0, 2, 3);
        }
    }
    _tile_stored(0, C, 128);
    _tile_release();
    ct_amx_perturb(C, nb);
}

/* the CPU has AMX-TILE and AMX-BF16, the OS saves the tile state, and Linux granted this process its use */
static int ct_amx_cpu(void) {
    unsigned a, b, c, d;
    const unsigned amx_bf16 = 0x00400000u, amx_tile = 0x01000000u, osxsave = 0x08000000u;  /* bits 22, 24; 27 */
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !(d & amx_bf16) || !(d & amx_tile)) return 0;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & osxsave)) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return 0;                                 /* XTILECFG, XTILEDATA */
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
}
#endif

/* ---- packing and the guard ---- */
static inline void ct_amx_note(ct_amx_st *s, uint32_t u) {
    uint32_t e = (u >> 23) & 0xFFu;
    s->low |= u & 0xFFFFu;
    if (e == 0xFFu || (e == 0 && (u & 0x7FFFFFFFu))) s->bad = 1;
    if (e) {
        if ((int)e < s->emin) s->emin = (int)e;
        if ((int)e > s->emax) s->emax = (int)e;
    }
}
static inline void ct_amx_st0(ct_amx_st *s) { s->low = 0; s->bad = 0; s->emin = 255; s->emax = 0; }

/* B' of one block: rows d < nk of Bk (ldb apart), n <= 32 columns; the rest zero */
static void ct_amx_pack_b(ct_amx_bt *T, ct_amx_st *s, const float *Bk, int64_t ldb, int64_t nk, int64_t n) {
    ct_amx_st0(s);
    memset(T->b, 0, sizeof T->b);
    for (int64_t d = 0; d < nk; d++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t u;
            memcpy(&u, Bk + d * ldb + j, 4);
            ct_amx_note(s, u);
            T->b[d * 32 + j] = u >> 16;
        }
}

/* A' of one block: A'[m][d] = the value at base + m*rs + d*ds (m < mr, d < nk); rows from 8 on at base2 + (m-8)*rs
 * when base2 != NULL (gradWeight's panel pairs); the rest zero */
static void ct_amx_pack_a(ct_amx_at *T, ct_amx_st *s, const float *base, const float *base2, int64_t rs, int64_t ds,
                          int64_t ds2, int64_t mr, int64_t nk) {
    ct_amx_st0(s);
    memset(T->a, 0, sizeof T->a);
    for (int64_t m = 0; m < mr; m++) {
        const float *r = base2 && m >= 8 ? base2 + (m - 8) * rs : base + m * rs;
        int64_t st = base2 && m >= 8 ? ds2 : ds;
        for (int64_t d = 0; d < nk; d++) {
            uint32_t u;
            memcpy(&u, r + d * st, 4);
            ct_amx_note(s, u);
            T->a[m * 16 + d] = u >> 16;
        }
    }
}

typedef void (*ct_amx_pack_b_fn)(ct_amx_bt *T, ct_amx_st *s, const float *Bk, int64_t ldb, int64_t nk, int64_t n);
typedef void (*ct_amx_pack_a_fn)(ct_amx_at *T, ct_amx_st *s, const float *base, const float *base2, int64_t rs,
                                 int64_t ds, int64_t ds2, int64_t mr, int64_t nk);

#if CT_AMX_HW
/* The same packing with AVX-512 (F, BW, VL, DQ), the guard's facts gathered in vectors: 16 values per step; A' of
 * gradWeight (its values ds apart along a row of A') by gathers.  The table over a base on a CPU with AVX-512
 * (the tiles' always) takes these. */
#define CT_T512A __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#define CT_I512A static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
typedef struct { __m512i low, emin, emax; __mmask16 bad; } ct_amx_vst;
CT_I512A void ct_amx_vst0(ct_amx_vst *v) {
    v->low = v->emax = _mm512_setzero_si512();
    v->emin = _mm512_set1_epi32(255);
    v->bad = 0;
}
CT_I512A __m512i ct_amx_vnote(ct_amx_vst *v, __m512i u) {   /* u: 16 fp32 patterns; returns the bf16 halves */
    __m512i e = _mm512_and_si512(_mm512_srli_epi32(u, 23), _mm512_set1_epi32(0xFF));
    __mmask16 nz = _mm512_test_epi32_mask(u, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 e0 = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512());
    v->bad |= (__mmask16)((e0 & nz) | _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(0xFF)));
    v->low = _mm512_or_si512(v->low, _mm512_and_si512(u, _mm512_set1_epi32(0xFFFF)));
    v->emin = _mm512_mask_min_epu32(v->emin, (__mmask16)~e0, v->emin, e);
    v->emax = _mm512_max_epu32(v->emax, e);
    return _mm512_srli_epi32(u, 16);
}
CT_I512A void ct_amx_vst_end(const ct_amx_vst *v, ct_amx_st *s) {
    s->low = (uint32_t)_mm512_reduce_or_epi32(v->low);
    s->bad = v->bad != 0;
    s->emin = (int)_mm512_reduce_min_epu32(v->emin);
    s->emax = (int)_mm512_reduce_max_epu32(v->emax);
}
CT_I512A __mmask16 ct_amx_k16(int64_t n) {
    return n >= 16 ? (__mmask16)0xFFFF : n <= 0 ? 0 : (__mmask16)((1u << n) - 1u);
}

static CT_T512A void ct_amx_pack_b_512(ct_amx_bt *T, ct_amx_st *s, const float *Bk, int64_t ldb, int64_t nk,
                                       int64_t n) {
    ct_amx_vst v;
    ct_amx_vst0(&v);
    __mmask16 k0 = ct_amx_k16(n), k1 = ct_amx_k16(n - 16);
    for (int64_t d = 0; d < 16; d++) {
        __m512i lo = _mm512_setzero_si512(), hi = _mm512_setzero_si512();
        if (d < nk) {
            lo = ct_amx_vnote(&v, _mm512_maskz_loadu_epi32(k0, Bk + d * ldb));
            if (k1) hi = ct_amx_vnote(&v, _mm512_maskz_loadu_epi32(k1, Bk + d * ldb + 16));
        }
        _mm512_store_si512((void *)(T->b + d * 32), lo);
        _mm512_store_si512((void *)(T->b + d * 32 + 16), hi);
    }
    ct_amx_vst_end(&v, s);
}

static CT_T512A void ct_amx_pack_a_512(ct_amx_at *T, ct_amx_st *s, const float *base, const float *base2, int64_t rs,
                                       int64_t ds, int64_t ds2, int64_t mr, int64_t nk) {
    ct_amx_vst v;
    ct_amx_vst0(&v);
    __mmask16 k = ct_amx_k16(nk);
    int gather = ds != 1 || (base2 && ds2 != 1);
    if (gather && (ds > (INT32_MAX / 16) || ds2 > (INT32_MAX / 16) || ds < 0 || ds2 < 0)) {
        ct_amx_pack_a(T, s, base, base2, rs, ds, ds2, mr, nk);       /* (offsets beyond a 32-bit gather index) */
        return;
    }
    __m512i step = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i ix = _mm512_mullo_epi32(step, _mm512_set1_epi32((int)ds));
    __m512i ix2 = _mm512_mullo_epi32(step, _mm512_set1_epi32((int)ds2));
    for (int64_t m = 0; m < 16; m++) {
        __m512i a = _mm512_setzero_si512();
        if (m < mr) {
            int two = base2 && m >= 8;
            const float *r = two ? base2 + (m - 8) * rs : base + m * rs;
            __m512i u = !gather ? _mm512_maskz_loadu_epi32(k, r)
                                : _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), k, two ? ix2 : ix, r, 4);
            a = ct_amx_vnote(&v, u);
        }
        _mm512_store_si512((void *)(T->a + m * 16), a);
    }
    ct_amx_vst_end(&v, s);
}
#endif

/* whether the accumulators C (mr x n, ldc) may enter a tile: 0 when a value is -0, subnormal, not finite or not a
 * multiple of 2^-126; else 1 with *cb = a bound on every |value| */
static int ct_amx_c_ok(const float *C, int64_t ldc, int64_t mr, int64_t n, double *cb) {
    int ok = 1, emax = 0;
    for (int64_t m = 0; m < mr; m++)
        for (int64_t j = 0; j < n; j++) {
            uint32_t u;
            memcpy(&u, C + m * ldc + j, 4);
            uint32_t e = (u >> 23) & 0xFFu;
            if ((u & 0x7FFFFFFFu) == 0) { ok &= u == 0; continue; }
            if (e == 0xFFu || (e < 24 && (u & ((1u << (24 - e)) - 1u)))) ok = 0;
            if ((int)e > emax) emax = (int)e;
        }
    *cb = ldexp(1.0, emax - 126);
    return ok;
}
/* the accumulator tile (16 x 32, zero outside mr x n) loaded from C; ct_amx_c_ok's verdict */
static int ct_amx_load_c(float *T, const float *C, int64_t ldc, int64_t mr, int64_t n, double *cb) {
    memset(T, 0, 16 * 32 * sizeof(float));
    for (int64_t m = 0; m < mr; m++) memcpy(T + m * 32, C + m * ldc, (size_t)n * sizeof(float));
    return ct_amx_c_ok(T, 32, mr, n, cb);
}
static void ct_amx_store_c(const float *T, float *C, int64_t ldc, int64_t mr, int64_t n) {
    for (int64_t m = 0; m < mr; m++) memcpy(C + m * ldc, T + m * 32, (size_t)n * sizeof(float));
}

/* whether the tile step of A's and B's block may run on the tiles, given the bound *cb on the accumulators
 * (updated when it may) */
static int ct_amx_guard(const ct_amx_st *a, const ct_amx_st *b, double *cb) {
    if (a->low | b->low || a->bad || b->bad) return 0;
    if (a->emax == 0 || b->emax == 0) return 1;                 /* every product +-0: the accumulators unchanged */
    if (a->emin + b->emin < 127 + 127 - 112) return 0;          /* (biased exponents) */
    double nb = *cb + ldexp(1.0, a->emax + b->emax - 254 + 6);
    if (nb >= 0x1p126) return 0;
    *cb = nb;
    return 1;
}

/* ---- the two engines' tables ---- */
typedef struct {
    ct_ukr base;          /* the table every other call and every guard-failing block goes to */
    ct_amx_run run;
    int idx;              /* 0 the tiles, 1 the stand-in */
    ct_amx_pack_a_fn pack_a;
    ct_amx_pack_b_fn pack_b;
    int ok;               /* the self-test's verdict: 1 passed, 0 failed, -1 not run */
    char why[160];        /* why the path is off */
} ct_amx_eng;
static ct_amx_eng ct_amx_e[2] = {{.ok = -1, .idx = 0}, {.ok = -1, .idx = 1}};     /* [0] the tiles, [1] the stand-in */

/* gradInput / forward: the chains of rows [i0, i1) continue with blocks [jb0, jb1) (ct_ukr.gic_rows) */
static inline __attribute__((always_inline)) void ct_amx_gic(
        const ct_amx_eng *E, int form, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO, int64_t rowoff,
        int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout, const float *Bp, float *C,
        int64_t ldc) {
    if (form != CT_ACC_CUBE || k0 != CT_AMX_K0 || n > 32 || n < 1) {
        E->base.gic_rows(form, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
        return;
    }
    if (i0 >= i1) return;
    ct_amx_at At[CT_AMX_RB];
    ct_amx_bt Bt[CT_AMX_RB];
    ct_amx_st sa[CT_AMX_RB], sb[CT_AMX_RB];
    float Ct[16 * 32] __attribute__((aligned(64)));
    int nct = n > 16 ? 2 : 1;
    for (int64_t jc = jb0; jc < jb1; jc += CT_AMX_RB) {
        int nb = (int)ct_min(CT_AMX_RB, jb1 - jc);
        for (int b = 0; b < nb; b++) {
            int64_t jb = jc + b, g = jb / K, kk = jb % K, lo = g * k0, hi = ct_min(Cout, lo + k0);
            E->pack_b(&Bt[b], &sb[b], Bp + ct_wblk(lo, hi, K, kk) * n, n, hi - lo, n);
        }
        for (int64_t i = i0; i < i1; i += 16) {
            int64_t mr = ct_min(16, i1 - i);
            float *Ci = C + (i - i0) * ldc;
            for (int b = 0; b < nb; b++) {
                int64_t jb = jc + b, g = jb / K, kk = jb % K, lo = g * k0, hi = ct_min(Cout, lo + k0);
                int64_t q = lo / CT_PO, wq = ct_min(CT_PO, Cout - q * CT_PO);
                const float *a = DYp + q * RO * CT_PO + (i + rowoff + kk * dk) * wq + (lo - q * CT_PO);
                E->pack_a(&At[b], &sa[b], a, NULL, wq, 1, 0, mr, hi - lo);
            }
            double cb;
            int cok = ct_amx_load_c(Ct, Ci, ldc, mr, n, &cb);
            int b = 0;
            while (b < nb) {
                int e = b;
                while (e < nb && cok && ct_amx_guard(&sa[e], &sb[e], &cb)) e++;
                if (e > b) E->run(Ct, nct, At + b, Bt + b, e - b);
                ct_amx_count(&ct_amx_nrun[E->idx], e - b);
                if (e == nb) break;
                ct_amx_count(&ct_amx_nfall[E->idx], 1);
                /* block e fails the guard: the base kernel makes it on the chains in memory */
                ct_amx_store_c(Ct, Ci, ldc, mr, n);
                E->base.gic_rows(form, i, i + mr, n, DYp, RO, rowoff, dk, K, jc + e, jc + e + 1, k0, Cout, Bp, Ci,
                                 ldc);
                cok = ct_amx_load_c(Ct, Ci, ldc, mr, n, &cb);
                b = e + 1;
            }
            ct_amx_store_c(Ct, Ci, ldc, mr, n);
        }
    }
}

/* gradWeight: a chain over rows q < nr of A[q*lda + i] * B[q*ldb + j] (ct_ukr.gwc), for m <= 16 rows of A (rows
 * from 8 on from A2, lda2 apart, when A2 != NULL: gwc_pair) */
static inline __attribute__((always_inline)) void ct_amx_gw(
        const ct_amx_eng *E, int64_t m, int64_t n, const float *A, int64_t lda, const float *A2, int64_t lda2,
        const float *B, int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
        int64_t ldc, int cin, ct_gw_pf *F) {
    ct_amx_at At[CT_AMX_RB];
    ct_amx_bt Bt[CT_AMX_RB];
    ct_amx_st sa[CT_AMX_RB], sb[CT_AMX_RB];
    int64_t ps[CT_AMX_RB + 1];
    float Ct[16 * 32] __attribute__((aligned(64)));
    int nct = n > 16 ? 2 : 1;
    double cb = 0.0;
    int cok = 1;
    if (cin) cok = ct_amx_load_c(Ct, Cc, ldc, m, n, &cb);
    else memset(Ct, 0, sizeof Ct);
    int64_t p = 0, blen = first;
    while (p < nr) {
        int nb = 0;
        ps[0] = p;
        for (; nb < CT_AMX_RB && p < nr; nb++) {          /* pack a run of blocks */
            int64_t e1 = ct_min(nr, p + blen);
            E->pack_a(&At[nb], &sa[nb], A + p * lda, A2 ? A2 + p * lda2 : NULL, 1, lda, lda2, m, e1 - p);
            E->pack_b(&Bt[nb], &sb[nb], B + p * ldb, ldb, e1 - p, n);
            p = e1;
            blen = k0;
            ps[nb + 1] = p;
        }
        int b = 0;
        while (b < nb) {
            int e = b;
            while (e < nb && cok && ct_amx_guard(&sa[e], &sb[e], &cb)) e++;
            if (e > b) E->run(Ct, nct, At + b, Bt + b, e - b);
            ct_amx_count(&ct_amx_nrun[E->idx], e - b);
            if (F)
                for (int k = b; k < e && ct_gw_pf_left(F); k++) ct_gw_pf_rows(F, 1);
            if (e == nb) break;
            ct_amx_count(&ct_amx_nfall[E->idx], 1);
            /* block e fails the guard: the base kernel continues the chains (in Ct) by that block */
            int64_t q0 = ps[e], q1 = ps[e + 1];
            if (A2) {
                E->base.gwc(CT_ACC_CUBE, 8, n, A + q0 * lda, lda, B + q0 * ldb, ldb, q1 - q0, q1 - q0, k0, NULL, 0,
                            Ct, 32, 1, NULL);
                E->base.gwc(CT_ACC_CUBE, m - 8, n, A2 + q0 * lda2, lda2, B + q0 * ldb, ldb, q1 - q0, q1 - q0, k0,
                            NULL, 0, Ct + 8 * 32, 32, 1, NULL);
            } else {
                E->base.gwc(CT_ACC_CUBE, m, n, A + q0 * lda, lda, B + q0 * ldb, ldb, q1 - q0, q1 - q0, k0, NULL, 0, Ct,
                            32, 1, NULL);
            }
            if (F && ct_gw_pf_left(F)) ct_gw_pf_rows(F, 1);
            cok = ct_amx_c_ok(Ct, 32, m, n, &cb);
            b = e + 1;
        }
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            if (D) D[i * ldd + j] = D[i * ldd + j] + Ct[i * 32 + j];
            else Cc[i * ldc + j] = Ct[i * 32 + j];
        }
}

static inline int ct_amx_gw_takes(int form, int64_t m, int64_t n, int64_t first, int64_t k0) {
    return form == CT_ACC_CUBE && k0 == CT_AMX_K0 && first >= 1 && first <= k0 && m >= 1 && m <= 16 && n >= 1 &&
           n <= 32;
}

/* the table entries of each engine: the driver above inlined with the engine fixed (the tiles' copy compiled
 * with AVX-512 for the packing loops) */
#if CT_AMX_HW
#define CT_TPACK __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx2,fma")))
#else
#define CT_TPACK
#endif
#define CT_AMX_ENTRIES(SUF, IDX, ATTR)                                                                                 \
    static ATTR void ct_gic_rows_##SUF(int form, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,    \
                                       int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0,   \
                                       int64_t Cout, const float *Bp, float *C, int64_t ldc) {                        \
        ct_amx_gic(&ct_amx_e[IDX], form, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);        \
    }                                                                                                                  \
    static ATTR void ct_gwc_##SUF(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B,         \
                                  int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd,           \
                                  float *Cc, int64_t ldc, int cin, ct_gw_pf *F) {                                      \
        if (!ct_amx_gw_takes(form, m, n, first, k0))                                                                   \
            ct_amx_e[IDX].base.gwc(form, m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);               \
        else ct_amx_gw(&ct_amx_e[IDX], m, n, A, lda, NULL, 0, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);         \
    }                                                                                                                  \
    static ATTR void ct_gwc_pair_##SUF(int64_t m2, int64_t n, const float *A, int64_t lda, const float *A2,          \
                                       int64_t lda2, const float *B, int64_t ldb, int64_t nr, int64_t first,          \
                                       int64_t k0, float *D, int64_t ldd, float *Cc, int64_t ldc, int cin,            \
                                       ct_gw_pf *F) {                                                                  \
        if (ct_amx_gw_takes(CT_ACC_CUBE, 8 + m2, n, first, k0))                                                        \
            ct_amx_gw(&ct_amx_e[IDX], 8 + m2, n, A, lda, A2, lda2, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);   \
        else if (ct_amx_e[IDX].base.gwc_pair && n <= ct_amx_e[IDX].base.gwc_pair_n)                                   \
            ct_amx_e[IDX].base.gwc_pair(m2, n, A, lda, A2, lda2, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);     \
        else {                                                                                                         \
            ct_amx_e[IDX].base.gwc(CT_ACC_CUBE, 8, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);         \
            ct_amx_e[IDX].base.gwc(CT_ACC_CUBE, m2, n, A2, lda2, B, ldb, nr, first, k0, D ? D + 8 * ldd : NULL, ldd,   \
                                   Cc ? Cc + 8 * ldc : NULL, ldc, cin, NULL);                                          \
        }                                                                                                              \
    }

CT_AMX_ENTRIES(amx_sw, 1, )
#if CT_AMX_HW
CT_AMX_ENTRIES(amx_hw, 0, CT_TPACK)
#endif

/* ---- the start-up self-test: directed probes and random blocks against the model ---- */
static uint32_t ct_amx_rng(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}
/* a random bf16 value (as fp32) with exponent in [e0, e0 + er) or zero */
static float ct_amx_rval(uint64_t *s, int e0, int er) {
    uint32_t r = ct_amx_rng(s);
    if (r % 11 == 0) return 0.0f;
    uint32_t u = ((r >> 4) & 0x8000u) | ((uint32_t)(e0 + 127 + (int)((r >> 8) % (uint32_t)er)) << 7) | (r & 0x7Fu);
    u <<= 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* one self-test case: C0 (16 x 32) + nb blocks of a (16 x 16 per block) and b (16 x 32 per block) through the
 * engine, against the model (fmaf chain from +0 per block, one add); returns the number of differing outputs */
/* C (16 x 32) through the engine's tile steps of nb <= 4 blocks a[k] (16 x 16) and b[k] (16 x 32), no guard */
static void ct_amx_steps(const ct_amx_eng *E, float *C, const float *a, const float *b, int nb) {
    ct_amx_at At[4];
    ct_amx_bt Bt[4];
    ct_amx_st s;
    for (int k = 0; k < nb; k++) {
        E->pack_a(&At[k], &s, a + k * 256, NULL, 16, 1, 0, 16, 16);
        E->pack_b(&Bt[k], &s, b + k * 512, 32, 16, 32);
    }
    E->run(C, 2, At, Bt, nb);
}

static int ct_amx_case(const ct_amx_eng *E, const float *c0, const float *a, const float *b, int nb) {
    float C[16 * 32], R[16 * 32];
    memcpy(C, c0, sizeof C);
    memcpy(R, c0, sizeof R);
    for (int k = 0; k < nb; k++) {
        for (int m = 0; m < 16; m++)
            for (int n = 0; n < 32; n++) {
                float t = 0.0f;
                for (int d = 0; d < 16; d++) t = fmaf(a[k * 256 + m * 16 + d], b[k * 512 + d * 32 + n], t);
                R[m * 32 + n] = R[m * 32 + n] + t;
            }
    }
    ct_amx_steps(E, C, a, b, nb);
    int bad = 0;
    for (int e = 0; e < 16 * 32; e++) bad += memcmp(&C[e], &R[e], 4) != 0;
    return bad;
}

/* The whole path (packing, guard, runs, the fallback of a block with a subnormal operand) against the base table's
 * FMA kernels on one random gradInput and one gradWeight problem: 0 (and why) when any output bit differs. */
static int ct_amx_selftest_drivers(const ct_amx_eng *E, char *why, size_t nwhy) {
    enum { RO = 40, CO = 48, KT = 2, N = 32, NR = 45 };
    static float dy[2 * RO * 32], bp[CO * KT * N], c1[24 * N], c2[24 * N], xa[NR * 8], yb[NR * N], d1[8 * N], d2[8 * N];
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (int e = 0; e < 2 * RO * 32; e++) dy[e] = ct_amx_rval(&s, -8, 16);
    for (int e = 0; e < CO * KT * N; e++) bp[e] = ct_amx_rval(&s, -8, 16);
    for (int e = 0; e < 24 * N; e++) c1[e] = c2[e] = ct_amx_rval(&s, -4, 8);
    for (int e = 0; e < NR * 8; e++) xa[e] = ct_amx_rval(&s, -8, 16);
    for (int e = 0; e < NR * N; e++) yb[e] = ct_amx_rval(&s, -8, 16);
    for (int e = 0; e < 8 * N; e++) d1[e] = d2[e] = ct_amx_rval(&s, -4, 8);
    dy[5 * 32 + 3] = 0x1p-130f;                                   /* a bf16 subnormal: its blocks fall back */
    xa[17 * 8 + 2] = 0x1p-130f;
    /* rows [0, 24), tap k at DY row i + 4 + 4k, every block of 48 channels x 2 taps (one panel of 32, one of 16) */
    ct_amx_gic(E, CT_ACC_CUBE, 0, 24, N, dy, RO, 4, 4, KT, 0, ct_cdiv(CO, 16) * KT, 16, CO, bp, c1, N);
    E->base.gic_rows(CT_ACC_CUBE, 0, 24, N, dy, RO, 4, 4, KT, 0, ct_cdiv(CO, 16) * KT, 16, CO, bp, c2, N);
    ct_amx_gw(E, 8, N, xa, 8, NULL, 0, yb, N, NR, 5, 16, d1, N, NULL, 0, 0, NULL);
    E->base.gwc(CT_ACC_CUBE, 8, N, xa, 8, yb, N, NR, 5, 16, d2, N, NULL, 0, 0, NULL);
    int bad = 0;
    for (int e = 0; e < 24 * N; e++) bad += memcmp(&c1[e], &c2[e], 4) != 0;
    for (int e = 0; e < 8 * N; e++) bad += memcmp(&d1[e], &d2[e], 4) != 0;
    if (bad) snprintf(why, nwhy, "self-test: %d of %d outputs of the gradInput / gradWeight drivers differ from the "
                      "FMA kernels", bad, 32 * N);
    return bad == 0;
}

static int ct_amx_selftest(const ct_amx_eng *E, char *why, size_t nwhy) {
    static float a[4 * 256], b[4 * 512], c[16 * 32];
    /* directed: (1) C = 2^24, products 1, 1: the model gives 2^24 + 2 (one step after another: 2^24);
     * (2) a tie: 1 + 2^-24 -> 1, and 1 + 2^-24 + 2^-24 in one chain -> 1 + 2^-23 (chained: 1 + 2^-24 rounds
     * first); (3) cancellation inside the chain: 2^30 + 1 - 2^30 = 1; (4) the two column tiles and every row */
    memset(a, 0, sizeof a); memset(b, 0, sizeof b); memset(c, 0, sizeof c);
    c[0] = 0x1p24f; a[0] = 1.0f; a[1] = 1.0f; b[0] = 1.0f; b[32] = 1.0f;
    c[1 * 32 + 17] = 1.0f; a[16] = 0x1p-24f; a[17] = 0x1p-24f; b[17] = 1.0f; b[32 + 17] = 1.0f;
    a[2 * 16] = 0x1p30f; a[2 * 16 + 1] = 1.0f; a[2 * 16 + 2] = -0x1p30f; b[5] = 1.0f; b[32 + 5] = 1.0f;
    b[64 + 5] = 1.0f;
    for (int m = 3; m < 16; m++) { a[m * 16 + 15] = (float)m; c[m * 32 + 31] = 0x1p-126f * (float)(m + 1); }
    b[15 * 32 + 31] = 0.5f;
    int bad = ct_amx_case(E, c, a, b, 1);
    if (bad) {
        snprintf(why, nwhy, "self-test: %d of 512 outputs of the directed probes differ from the model", bad);
        return 0;
    }
    /* random blocks passing the guard, several exponent ranges, runs of 1..4 blocks */
    uint64_t s = 0x9E3779B97F4A7C15ull;
    static const int ranges[][2] = {{-3, 6}, {-50, 100}, {-56, 20}, {20, 30}};
    for (int r = 0; r < 4; r++)
        for (int nb = 1; nb <= 4; nb++) {
            for (int e = 0; e < nb * 256; e++) a[e] = ct_amx_rval(&s, ranges[r][0], ranges[r][1]);
            for (int e = 0; e < nb * 512; e++) b[e] = ct_amx_rval(&s, ranges[r][0], ranges[r][1]);
            for (int e = 0; e < 16 * 32; e++) c[e] = ct_amx_rval(&s, ranges[r][0], ranges[r][1]);
            bad = ct_amx_case(E, c, a, b, nb);
            if (bad) {
                snprintf(why, nwhy, "self-test: %d of 512 outputs of random blocks (exponents %d..%d, %d blocks) "
                         "differ from the model", bad, ranges[r][0], ranges[r][0] + ranges[r][1] - 1, nb);
                return 0;
            }
        }
    return ct_amx_selftest_drivers(E, why, nwhy);
}

/* ---- the tables ---- */
/* Fills *U with the tiles' (hw = 1) or the stand-in's (hw = 0) table over *base; -1 (and the reason in
 * ct_amx_why) when the path is off: no AMX here, no permission, or the self-test failed. */
int ct_ukr_init_amx(ct_ukr *U, const ct_ukr *base, int hw, int vec) {
    ct_amx_eng *E = &ct_amx_e[hw ? 0 : 1];
    E->base = *base;
    E->pack_a = ct_amx_pack_a;
    E->pack_b = ct_amx_pack_b;
#if CT_AMX_HW
    E->run = hw ? ct_amx_run_hw : ct_amx_run_sw;
    if (vec) { E->pack_a = ct_amx_pack_a_512; E->pack_b = ct_amx_pack_b_512; }
#else
    E->run = ct_amx_run_sw;
    (void)vec;
#endif
    if (E->ok < 0) {
        E->why[0] = 0;
#if CT_AMX_HW
        if (hw && !ct_amx_cpu()) {
            snprintf(E->why, sizeof E->why, "this CPU or kernel has no AMX-BF16 tiles for this process");
            E->ok = 0;
        } else
#else
        if (hw) {
            snprintf(E->why, sizeof E->why, "this build has no AMX kernels (x86-64 Linux with GCC only)");
            E->ok = 0;
        } else
#endif
            E->ok = ct_amx_selftest(E, E->why, sizeof E->why);
    }
    if (!E->ok) return -1;
    *U = *base;
    U->name = hw ? "amx" : "amx_standin";
    U->serves = CT_C_BF16;
    U->other = &E->base;
    U->gwc_pair_n = 32;              /* 16 ci x 32 co: two full accumulator tiles a call */
#if CT_AMX_HW
    if (hw) {
        U->gic_rows = ct_gic_rows_amx_hw;
        U->gwc = ct_gwc_amx_hw;
        U->gwc_pair = ct_gwc_pair_amx_hw;
        return 0;
    }
#endif
    U->gic_rows = ct_gic_rows_amx_sw;
    U->gwc = ct_gwc_amx_sw;
    U->gwc_pair = ct_gwc_pair_amx_sw;
    return 0;
}

/* Test hook, no guard: C (16 x 32 fp32) through nb <= 4 tile steps of the tiles (hw = 1; -1 where they are
 * off) or the stand-in; block k's operands a[k] (16 x 16: row m, product d) and b[k] (16 x 32: product d,
 * column n), fp32 values whose bits' low half is dropped (bf16), in the even halves, zeros in the odd ones. */
int ct_amx_tile_dot(int hw, float *C, const float *a, const float *b, int nb) {
    const ct_amx_eng *E = &ct_amx_e[hw ? 0 : 1];
    if (nb < 0 || nb > 4 || E->ok != 1) return -1;
    ct_amx_steps(E, C, a, b, nb);
    return 0;
}

/* why the tiles' (hw = 1) or the stand-in's path is off ("" when it is on or was never tried) */
const char *ct_amx_why(int hw) { return ct_amx_e[hw ? 0 : 1].why; }

/* the counters of tile steps and of guard-failing blocks of the tiles (hw = 1) or the stand-in; reset = 1 zeroes
 * them after reading */
void ct_amx_counts(int hw, int reset, int64_t *steps, int64_t *falls) {
    int i = hw ? 0 : 1;
    *steps = __atomic_load_n(&ct_amx_nrun[i], __ATOMIC_RELAXED);
    *falls = __atomic_load_n(&ct_amx_nfall[i], __ATOMIC_RELAXED);
    if (reset) {
        __atomic_store_n(&ct_amx_nrun[i], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&ct_amx_nfall[i], 0, __ATOMIC_RELAXED);
    }
}

/* Test hook: fault = 1 perturbs every engine result (one output bit) and makes the next init run the self-test
 * again, which must then fail and turn the path off; fault = 0 and a re-init turn it back on. */
void ct_amx_set_fault(int fault) {
    ct_amx_fault = fault;
    ct_amx_e[0].ok = ct_amx_e[1].ok = -1;
}

/* a self-test run on demand (hw: the tiles), the verdict 1 / 0 and the reason in why */
int ct_amx_check(int hw, char *why, size_t nwhy) {
    ct_amx_eng L = ct_amx_e[hw ? 0 : 1];          /* as the last init left it (packers), else generic */
    if (!L.pack_a) { L.pack_a = ct_amx_pack_a; L.pack_b = ct_amx_pack_b; }
    L.run = ct_amx_run_sw;
#if CT_AMX_HW
    if (hw && !ct_amx_cpu()) { snprintf(why, nwhy, "no AMX-BF16 tiles here"); return 0; }
    if (hw) L.run = ct_amx_run_hw;
#else
    if (hw) { snprintf(why, nwhy, "no AMX kernels in this build"); return 0; }
#endif
    return ct_amx_selftest(&L, why, nwhy);
}
