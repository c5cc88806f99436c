/* _ukr.h: the micro-kernel interface of the kernel room, the one seam between the drivers and the instruction sets.
 *
 * Design (after BLIS): every instruction set (ISA) is one C file, _ukr_<isa>.c, its own translation unit, that fills
 * one table, ct_ukr: the row codecs, the micro-kernels of the sequential and cube forms, the narrow-channel kernels,
 * gradBias's partial sums, and the block sizes the drivers tile with.  The drivers (_conv_*.h: planning, packing,
 * task loops, threads) call only through the table and know no instruction set; _ukr_select.c is the one place
 * that compares ISA codes (CPU detection and the choice of table).  Kernels take panels, leading dimensions and
 * sizes: never a plan.  Adding an ISA is one file here plus one row in ct_ukr_select.  A table may sit over another
 * (_ukr_amx.c: AVX-512's with the cube entries on AMX tiles for BF16 compute): it names the compute precision it
 * serves and the table every other call takes (ct_ukr_for).
 *
 * Every entry computes exactly what the generic C in _ukr_generic.h computes (one fp32 FMA chain per element in
 * the documented order, or the cube form's blocks): no result depends on the table (tests/test_accumulation.py,
 * tests/test_micro_tiles.py, bench/bitid.py).
 */
#ifndef PYCONVTBC_UKR_H
#define PYCONVTBC_UKR_H

#include <stddef.h>
#include <stdint.h>

#include "_codes.h"

/* AMX and its software stand-in are tables over a base table (_ukr_amx.c): the cube form's BF16 blocks on tiles */
enum { CT_ISA_PORTABLE = 0, CT_ISA_AVX2 = 1, CT_ISA_AVX512 = 2, CT_ISA_NEON = 3, CT_ISA_AMX = 4, CT_ISA_AMX_SW = 5,
       CT_ISA_N = 6 };

/* ---- panel geometry shared by the drivers and the kernels (a property of the packed layouts, not of an ISA) ---- */
#define CT_PO 32          /* lanes of a DYp panel (co) and of a Wp panel (ci) */
#define CT_PX 8           /* lanes of an Xp panel (ci) */
#define CT_NW 8           /* narrow channels: Cin and Cout up to this take the narrow kernels, */
#define CT_NB 16          /* with CT_NB items per gw task (the lanes of one AVX-512 vector) */
#define CT_NR 512         /* and CT_NR rows per gi task */
#define CT_PR 2048        /* pack: rows per task */
#define CT_GBR 256        /* gb: rows per partial sum (fixed: part of gb's summation order) */
#define CT_KCB 256        /* cube gi / forward: reduction rows per pass (cache blocking only) */

static inline int64_t ct_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ct_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ct_cdiv(int64_t a, int64_t b) { return b > 0 ? a / b + (a % b != 0) : 0; }  /* no a+b-1 overflow */
static inline int64_t ct_up(int64_t a, int64_t b) { return ct_cdiv(a, b) * b; }

/* Weight panels of the cube forms (gradInput and the forward) hold their rows in the order the chains take the
 * blocks: block (g, k) = the reduction channels [lo, hi) = [g*k0, min(C, g*k0 + k0)) of tap k starts at row
 * ct_wblk(lo, hi, K, k) of the panel (the groups before g are whole: lo*K rows), its channel c at row
 * ct_wblk + c - lo.  A pass of blocks is then one run of memory; in tap-major panels the taps of one group lie
 * Cin*Cout floats apart, on the same L1 sets, and a pass over many taps evicted its own weights. */
static inline int64_t ct_wblk(int64_t lo, int64_t hi, int64_t K, int64_t k) { return lo * K + k * (hi - lo); }

/* Dtype classes: how the row codecs read and write a format.  A code outside every class is refused by the plans
 * (ct_plan_init, ct_fwd_init): no decode or store path guesses a format by a default branch. */
enum { CT_CLS_NONE = 0, CT_CLS_F32 = 1, CT_CLS_16 = 2, CT_CLS_8 = 3 };
static inline int ct_dt_class(int dt) {
    switch (dt) { case CT_DT_F32: return CT_CLS_F32; case CT_DT_F16: case CT_DT_BF16: return CT_CLS_16;
                  case CT_DT_HIF8: case CT_DT_E4M3: return CT_CLS_8; default: return CT_CLS_NONE; }
}
/* The one NaN of every output, whatever the operands' NaN payloads and the CPU's default NaN (x86's is negative,
 * AArch64's positive): the positive quiet NaN with an empty payload in each format (docs/precision.md, "NaN").
 * HiFloat8 has a single NaN code (0x80); FLOAT8_E4M3FN's two (0x7F, 0xFF: a NaN sum, or an overflow without
 * saturation, which the format has no infinity for) become 0x7F. */
#define CT_NAN_F32 0x7FC00000u
#define CT_NAN_F16 0x7E00u
#define CT_NAN_BF16 0x7FC0u
#define CT_NAN_E4M3 0x7Fu

/* element sizes; 0 for a code the kernels do not know */
static inline int ct_dt_size(int dt) {
    switch (ct_dt_class(dt)) { case CT_CLS_F32: return 4; case CT_CLS_16: return 2; case CT_CLS_8: return 1;
                               default: return 0; }
}

/* Prefetch (into L2) of the DY rows that gradWeight's next ybuf copy reads (the cube gw driver): rows [q0, q1) of
 * each of the n items whose bases are ybs[] (row ybs[j] + u*sty of panel pb, wq channels), from item j, row u on.
 * The vector micro-kernels fetch one row per block, spread over the FMAs; rows still left when the co panel
 * ends are not fetched.  (Fetching a call's share in one burst before each call, and the rest at the panel's
 * end, stalled the core on full fill buffers: with narrow channels, few calls share a copy, and the cube
 * gradWeight of (512,32,32,32,3,1) ran 20% slower.) */
typedef struct { const float *pb; const int64_t *ybs; int64_t sty, wq, q0, q1, n, j, u; } ct_gw_pf;
static inline int ct_gw_pf_left(const ct_gw_pf *F) { return F->j < F->n; }
static inline void ct_gw_pf_rows(ct_gw_pf *F, int64_t cnt) {
    for (; cnt > 0 && F->j < F->n; cnt--) {
        const char *r = (const char *)(F->pb + (F->ybs[F->j] + F->u * F->sty) * F->wq);
        for (int64_t o = 0; o < F->wq * 4; o += 64) __builtin_prefetch(r + o, 0, 2);
        if (++F->u == F->q1) { F->u = F->q0; F->j++; }
    }
}

/* The narrow gradInput (and forward) kernels' view of their reduction: output rows r = t*B + b, lanes along the
 * rows; operand DYc channel-major (channel c at DYc + c*nlo); weights Wp in block order (ct_wblk), Cin output
 * channels a row; chains start at gin_start[c] (NULL: +0).  Tap k of row r reads operand row r + (pad - k)*B
 * (gradInput: valid while 0 <= t + pad - k < T_out), or r + (k - pad)*B with gin_fwd (the forward: valid while
 * 0 <= t + k - pad < T_in). */
typedef struct {
    const float *Wp, *DYc, *gin_start;
    int64_t T_in, T_out, B, Cin, Cout, K, pad, k0, nlo;
    int gin_fwd;
} ct_nar_gi;

/* Knobs that pick between equivalent kernel variants (test and profiling hooks; none changes a result). */
typedef struct {
    int gw_pairs;      /* AVX-512: the co-pair gw kernel for narrow channels on / off */
    int gi_rows;       /* AVX2 cube gradInput / forward rows per tile: 4 or 6 (0: by CPU, 4 on AMD) */
    int bcast;         /* AVX-512 cube kernels: 1 broadcast as each FMA's memory operand, -1 shared, 0 by CPU */
    int amx_pack;      /* the AMX tables' packing: 0 by CPU (AVX-512 where it runs), -1 the generic C */
} ct_ukr_opts;

typedef struct ct_ukr {
    const char *name;
    /* a table that serves one compute precision only (AMX: CT_C_BF16) names it, and the table every other call
     * takes (other != NULL); ct_ukr_for picks */
    int serves;
    const struct ct_ukr *other;
    /* ---- block sizes: the drivers' tiling for this ISA ---- */
    int64_t gi_mr_narrow, gi_mr_wide;  /* sequential gradInput rows per micro-tile, panels of <= 16 / > 16 columns */
    int64_t gwn_mh, gwn_mw;            /* narrow gradWeight register tile: ci x co */
    int64_t narrow_gi_max_cin;         /* ascend950 "cube": the narrow gradInput kernels up to this many gi channels */
    int64_t gwc_pair_n;                /* the most co columns one gwc_pair call takes (0: no gwc_pair) */
    /* ---- rows: decode to fp32, round to the compute precision, cast and store; gradBias partial sums ---- */
    void (*decode_row)(const char *src, int64_t stride, int dt, int64_t n, float *out);
    /* rows of n <= 16 contiguous fp32 channels, row i at base + t*s0 + b*s1, (t, b) walking t fastest from the
     * given start (t wraps at T into the next b), copied to d as [nr][n] */
    void (*walk_rows)(const char *base, int64_t s0, int64_t s1, int64_t T, int64_t t, int64_t b, int64_t nr,
                      int64_t n, float *d);
    void (*round_row)(float *v, int64_t n, int compute, int hbits, int hrnd);
    /* out[i] = cast(acc[i]) to dt; pre (CT_C_FP16/BF16) rounds the accumulator to C first */
    void (*store_row)(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd, int sat);
    /* every NaN among n elements of dtype dt at dst replaced by the format's canonical quiet NaN (CT_NAN_*) */
    void (*canon_nan)(char *dst, int64_t n, int dt);
    /* one partial sum per CT_GBR rows of v[nr][wq] (rows in order, from 0.0f), to out + s*ostride */
    void (*gb_partials)(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride);
    /* ---- sequential form ---- */
    /* C[i][j] += sum_{kk<nk} sum_{c=c0}^{c1-1} DY(row0 + kk*dk + i, c) * Bp[kk*bk + (c-c0)*n + j] */
    void (*gi_seq)(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk, int64_t nk,
                   int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t bk, float *C, int64_t ldc);
    /* C[kk*ck + i*ldc + j] += sum_{p<kc} A[kk*ak + p*lda + i] * B[p*ldb + j] */
    void (*gw_seq)(int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, int64_t ak,
                   const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck);
    /* ---- cube forms (form: CT_ACC_CUBE / WIDE / RZ) ---- */
    /* gw: a chain over rows q < nr of A[q*lda + i] * B[q*ldb + j] (i < m <= 8, j < n <= 32); blocks: the first
     * has `first` rows, then k0 each; starts at 0 or (cin) continues from Cc; ends with D += chain (D != NULL)
     * or is saved in Cc */
    void (*gwc)(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc, int64_t ldc, int cin,
                ct_gw_pf *F);
    /* the same for two X panels at once (8 ci of A, m2 of A2), n <= gwc_pair_n, form CT_ACC_CUBE; NULL: not
     * offered */
    void (*gwc_pair)(int64_t m2, int64_t n, const float *A, int64_t lda, const float *A2, int64_t lda2,
                     const float *B, int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd,
                     float *Cc, int64_t ldc, int cin, ct_gw_pf *F);
    /* gi / forward: blocks [jb0, jb1) of the chains of rows [i0, i1) (row i reads DY row i + rowoff for tap 0,
     * + k*dk for tap k; its chains at C + (i - i0)*ldc) */
    void (*gic_rows)(int form, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO, int64_t rowoff,
                     int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout, const float *Bp,
                     float *C, int64_t ldc);
    /* ---- narrow channels ---- */
    /* [nr][C] -> d[c*ld + i] (to = 1), or d[c*ld + i] -> [nr][C] (to = 0), 2 <= C <= CT_NW */
    void (*nar_transpose)(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld);
    /* n rows of 16 items of dense fp32 x, row i at v + i*rs, to d[c*ld + 16*i + l]; NULL: not offered */
    void (*gwn_px)(const float *v, int64_t rs, int64_t n, int64_t C, float *d, int64_t ld);
    /* per-item gw chains of nb items for mi ci x mo co, t in [ta, tz) (blocks of k0 t's aligned at t = 0) */
    void (*gwn)(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D, int64_t ldi,
                int64_t ldo);
    /* rows [r0, r0 + nr), every output channel: chain (c, row r) to D[c*ldd + r - r0] */
    void (*gin)(const ct_nar_gi *G, int64_t r0, int64_t nr, float *D, int64_t ldd);
} ct_ukr;

/* the table a call of compute precision `compute` runs on, given the ISA's table U */
static inline const ct_ukr *ct_ukr_for(const ct_ukr *U, int compute) {
    return U->other && compute != U->serves ? U->other : U;
}

/* One initialiser per ISA file: fills *U, returns 0, or -1 where this build has no such kernels. */
int ct_ukr_init_portable(ct_ukr *U, const ct_ukr_opts *o);
int ct_ukr_init_avx2(ct_ukr *U, const ct_ukr_opts *o);
int ct_ukr_init_avx512(ct_ukr *U, const ct_ukr_opts *o);
int ct_ukr_init_neon(ct_ukr *U, const ct_ukr_opts *o);
/* _ukr_amx.c: the tiles' (hw = 1) or the stand-in's table over *base (-1: the path is off, ct_amx_why says why),
 * vec = 1 where the CPU has AVX-512 (the packing's vector code); the self-test on demand; test hooks */
int ct_ukr_init_amx(ct_ukr *U, const ct_ukr *base, int hw, int vec);
const char *ct_amx_why(int hw);
int ct_amx_check(int hw, char *why, size_t nwhy);
void ct_amx_set_fault(int fault);
void ct_amx_counts(int hw, int reset, int64_t *steps, int64_t *falls);
int ct_amx_tile_dot(int hw, float *C, const float *a, const float *b, int nb);

/* _ukr_select.c: whether this CPU and build run an ISA, the best of them (and whether the CPU is AMD's), and the
 * table of an ISA */
int ct_isa_runs(int isa);
int ct_isa_supported(void);
int ct_cpu_is_amd(void);
int ct_ukr_select(ct_ukr *U, int isa, const ct_ukr_opts *o);

#endif /* PYCONVTBC_UKR_H */
