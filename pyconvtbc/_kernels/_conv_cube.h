/* _conv_cube.h: the cube accumulation model (docs/precision.md, "Accumulation model").
 *
 * Included by _conv_gemm.h after its pack/sequential kernels.  The NPU's cube does not add one product at a
 * time: it adds a BLOCK of up to k0 products per step into an fp32 accumulator, and pieces of a reduction
 * computed apart are added into the fp32 output afterwards.  The forms (ct_plan.acc):
 *   CT_ACC_CUBE  block = fp32 FMA chain from +0 (products in order); accumulator = accumulator + block (RNE)
 *   CT_ACC_WIDE  accumulator = fp32_RNE(float64(accumulator) + p0 + p1 + ...)   (products exact in float64)
 *   CT_ACC_RZ    as WIDE, the final rounding toward zero
 * A CHAIN is an accumulator started at +0 that takes the blocks of a range in order.  Where several chains
 * make a result they are added into their destination (the output, or a piece's sum, started at +0) with one
 * fp32 addition each; a lone chain (gradInput without segments) is the result itself, so under WIDE / RZ a
 * chain that underflows to -0 stays -0 there (docs/precision.md).  The forward's chain starts at the bias.
 *
 *   gradWeight[k,ci,co], reduction over positions (t, b):
 *     ct_plan.layout 0 (ascend910b / ascend910): one chain per batch item b over t (blocks of k0 t's aligned at
 *       t = 0), the B chains added into the output in the order perm[] (b order when perm is NULL).
 *     layout 1 (ascend950): positions r = t*B + b; blocks of k0 positions aligned at r = 0; P pieces of whole
 *       blocks (piece i: blocks [i*nB/P, (i+1)*nB/P)), each piece cut into segments of gw_seg blocks, each
 *       segment a chain added into the piece's sum; P > 1 pieces combined by a pairwise tree (ct_tree).
 *   gradInput[t,b,ci], reduction over (k, co): blocks (g, k) = (channel group of k0, tap), g outer, k inner,
 *     taps whose DY row lies outside the sequence skipped; one chain, or (gi_seg > 0) segments of gi_seg blocks
 *     chained and added into the output in order.
 * Positions outside the sequence (padding) contribute nothing (they are skipped, not multiplied by 0).
 * Each output element is computed by one task in this order, so no result depends on the thread count, the
 * blocking or the instruction set: the AVX2 and AVX-512 "cube" kernels below and the generic ones (portable
 * builds, and the float64 forms) perform the same operations in the same order
 * (tests/test_accumulation.py checks every path against an independent model).
 */
#ifndef PYCONVTBC_CONV_CUBE_H
#define PYCONVTBC_CONV_CUBE_H

#include "_codes.h"

/* blocks per pass of the cube gi / forward tasks: about CT_KCB reduction rows, so that a 16-column half of the
 * weight rows of a pass (CT_KCB x 64 bytes) stays in L1.  Cache blocking only: no result depends on it. */
#define CT_KCB 256
static inline int64_t ct_gic_step(int64_t k0) { return ct_max(1, CT_KCB / k0); }

/* The vector gi kernels' unrolled passes: the run of blocks from jb (before jb1, at most CT_KCB / 8 of them)
 * that are whole blocks of k0 = 8 or 16 channels in DY panels of one width *W (the full panels: CT_PO; the last
 * one: the rest of Cout), with their DY offsets aoff[] from a tile's first row (row i0 + rowoff, read in a
 * panel of width *W).  Returns the run's end, or jb when block jb is not whole (its group cut short by Cout). */
static inline int64_t ct_gic_run(int64_t k0, int64_t K, int64_t jb, int64_t jb1, int64_t Cout, int64_t RO,
                                 int64_t dk, int64_t *W, int64_t *aoff) {
    if (!(k0 == 8 || k0 == 16) || K < 1) return jb;
    int64_t g = jb / K, kk = jb % K, q = g * k0 / CT_PO;
    if (g * k0 + k0 > Cout) return jb;
    *W = ct_min(CT_PO, Cout - q * CT_PO);
    /* whole groups in panels of width *W: the full panels (all of them, one after the other), or the last one;
     * either way up to the last whole group of Cout */
    int64_t gend = ct_min(*W == CT_PO ? (Cout / CT_PO) * CT_PO / k0 : Cout / k0, Cout / k0);
    int64_t je = ct_min(ct_min(jb1, gend * K), jb + CT_KCB / 8);
    for (int64_t j = 0; j < je - jb; j++) {
        int64_t lo = g * k0, qj = lo / CT_PO;     /* the full panels: qj from q on; the last one: q */
        aoff[j] = qj * RO * CT_PO + kk * dk * *W + (lo - qj * CT_PO);
        if (++kk == K) { kk = 0; g++; }
    }
    return je;
}

/* float64 -> fp32 rounding toward zero: RNE, then one step toward zero when RNE went away from zero (then f is
 * not 0, and its bit pattern minus one is the next float toward zero: FLT_MAX for an infinity) */
static inline float ct_f64_to_f32_rz(double d) {
    float f = (float)d;
    if (fabs((double)f) > fabs(d)) {
        uint32_t u;
        memcpy(&u, &f, 4);
        u -= 1;
        memcpy(&f, &u, 4);
    }
    return f;
}
static inline float ct_wide_round(int form, double d) { return form == CT_ACC_RZ ? ct_f64_to_f32_rz(d) : (float)d; }

/* Prefetch (into L2) of the DY rows that gradWeight's next ybuf copy reads (ct_gwc_chunk): rows [q0, q1) of each
 * of the n items whose bases are ybs[] (row ybs[j] + u*sty of panel pb, wq channels), from item j, row u on.
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

/* ------------------------------------------------------------------------------------------------ */
/* generic (any ISA, every form)                                                                     */
/* ------------------------------------------------------------------------------------------------ */
/* gw: a chain over rows q < nr of A[q*lda + i] * B[q*ldb + j]  (i < m <= 8, j < n <= 32); blocks: the first has
 * `first` rows, then k0 each.  The chain starts at 0, or (Cc != NULL) continues from Cc[i*ldc + j]; it ends with
 * D[i*ldd + j] += chain (D != NULL), or is saved in Cc to be continued (a chain cut into row chunks). */
static void ct_gwc_gen(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                       int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc, int64_t ldc,
                       int cin) {
    float c[CT_PX * CT_PO], s[CT_PX * CT_PO];
    double d[CT_PX * CT_PO];
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) c[i * CT_PO + j] = cin ? Cc[i * ldc + j] : 0.0f;
    int64_t p = 0, blen = first;
    while (p < nr) {
        int64_t e1 = ct_min(nr, p + blen);
        if (form == CT_ACC_CUBE) {
            for (int64_t e = 0; e < m * CT_PO; e++) s[e] = 0.0f;
            for (int64_t q = p; q < e1; q++)
                for (int64_t i = 0; i < m; i++) {
                    float a = A[q * lda + i];
                    for (int64_t j = 0; j < n; j++) s[i * CT_PO + j] = fmaf(a, B[q * ldb + j], s[i * CT_PO + j]);
                }
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) c[i * CT_PO + j] = c[i * CT_PO + j] + s[i * CT_PO + j];
        } else {
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) d[i * CT_PO + j] = (double)c[i * CT_PO + j];
            for (int64_t q = p; q < e1; q++)
                for (int64_t i = 0; i < m; i++) {
                    double a = (double)A[q * lda + i];
                    for (int64_t j = 0; j < n; j++) d[i * CT_PO + j] = d[i * CT_PO + j] + a * (double)B[q * ldb + j];
                }
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) c[i * CT_PO + j] = ct_wide_round(form, d[i * CT_PO + j]);
        }
        p = e1;
        blen = k0;
    }
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            if (D) D[i * ldd + j] = D[i * ldd + j] + c[i * CT_PO + j];
            else Cc[i * ldc + j] = c[i * CT_PO + j];
        }
}

/* gi: the chain values C[i*ldc + j] (i < m rows, j < n <= 32 ci) continue with the blocks jb in [jb0, jb1)
 * (g = jb / K, tap kk = jb % K): block = sum over co in [g*k0, min(Cout, g*k0 + k0)) of
 * DY(row0 + i + kk*dk, co) * Bp[(ct_wblk(lo, hi, K, kk) + co - lo)*n + j] (Bp: a weight panel in block
 * order, ct_wblk).  The caller guarantees every row is valid for every tap. */
static void ct_gic_gen(int form, int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk,
                       int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout, const float *Bp, float *C,
                       int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        float s[CT_PO];
        double d[CT_PO];
        float *c = C + i * ldc;
        for (int64_t jb = jb0; jb < jb1; jb++) {
            int64_t g = jb / K, kk = jb % K, row = row0 + i + kk * dk;
            int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
            const float *Bk = Bp + (ct_wblk(lo, hi, K, kk) - lo) * n;      /* row co of the block at Bk + co*n */
            if (form == CT_ACC_CUBE) for (int64_t j = 0; j < n; j++) s[j] = 0.0f;
            else for (int64_t j = 0; j < n; j++) d[j] = (double)c[j];
            for (int64_t co = lo; co < hi; co++) {
                int64_t q = co / CT_PO, wq = ct_min(CT_PO, Cout - q * CT_PO);
                float a = DYp[q * RO * CT_PO + row * wq + (co - q * CT_PO)];
                const float *b = Bk + co * n;
                if (form == CT_ACC_CUBE) for (int64_t j = 0; j < n; j++) s[j] = fmaf(a, b[j], s[j]);
                else for (int64_t j = 0; j < n; j++) d[j] = d[j] + (double)a * (double)b[j];
            }
            if (form == CT_ACC_CUBE) for (int64_t j = 0; j < n; j++) c[j] = c[j] + s[j];
            else for (int64_t j = 0; j < n; j++) c[j] = ct_wide_round(form, d[j]);
        }
    }
}

#if CT_X86
/* ------------------------------------------------------------------------------------------------ */
/* AVX2 + FMA, form CT_ACC_CUBE: block sums in registers, chains in memory (AVX-512 CPUs: the kernels below) */
/* ------------------------------------------------------------------------------------------------ */
/* (ct_ld8 / ct_st8: _conv_gemm.h) */
/* chains += block sums: cm[16*i + 8*v] += s[i][v] for M rows of NV vectors (the chains' L1 tile, 16 floats a row) */
CT_I256 void ct_chains_add(const int M, const int NV, float *cm, __m256 s[6][2]) {
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
        _mm256_store_ps(cm + 16 * i, _mm256_add_ps(_mm256_load_ps(cm + 16 * i), s[i][0]));
        if (NV == 2) _mm256_store_ps(cm + 16 * i + 8, _mm256_add_ps(_mm256_load_ps(cm + 16 * i + 8), s[i][1]));
    }
}

/* gw: M (<= 6) ci x NV*8 (<= 16) co; block sums s in registers, chains in an L1 tile (cm: one load / add /
 * store per block).  Every block sum is an FMA chain from +0, as the model says (s = a*b + 0, not a*b: the two
 * differ in the sign of a zero sum, which the forward's chain, started at a -0 bias, would show). */
CT_I256 void ct_gwc_body_256(const int M, const int NV, int64_t n, const float *A, int64_t lda, const float *B,
                             int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
                             int64_t ldc, int cin, ct_gw_pf *F) {
    __m256 s[6][2];
    float cm[6 * 16] __attribute__((aligned(32)));
    __m256i m0 = ct_mask8(n), m1 = ct_mask8(n - 8);
    if (D)   /* the output tile that the chains end in (L2 at best): fetched while the blocks run */
        _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) __builtin_prefetch(D + i * ldd, 1);
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
        _mm256_store_ps(cm + 16 * i, cin ? ct_ld8(Cc + i * ldc, n, m0) : _mm256_setzero_ps());
        if (NV == 2) _mm256_store_ps(cm + 16 * i + 8, cin ? ct_ld8(Cc + i * ldc + 8, n - 8, m1) : _mm256_setzero_ps());
    }
    int64_t p = 0, blen = first;
    while (p < nr) {
        int64_t e1 = ct_min(nr, p + blen);
        const float *Aq = A + p * lda, *Bq = B + p * ldb;
        {
            __m256 b0 = ct_ld8(Bq, n, m0), b1 = _mm256_setzero_ps();
            if (NV == 2) b1 = ct_ld8(Bq + 8, n - 8, m1);
            _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
                __m256 av = _mm256_broadcast_ss(Aq + i);
                s[i][0] = _mm256_fmadd_ps(av, b0, _mm256_setzero_ps());
                if (NV == 2) s[i][1] = _mm256_fmadd_ps(av, b1, _mm256_setzero_ps());
            }
            Aq += lda;
            Bq += ldb;
        }
        for (int64_t q = p + 1; q < e1; q++) {
            __m256 b0 = ct_ld8(Bq, n, m0), b1 = _mm256_setzero_ps();
            if (NV == 2) b1 = ct_ld8(Bq + 8, n - 8, m1);
            _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
                __m256 av = _mm256_broadcast_ss(Aq + i);
                s[i][0] = _mm256_fmadd_ps(av, b0, s[i][0]);
                if (NV == 2) s[i][1] = _mm256_fmadd_ps(av, b1, s[i][1]);
            }
            Aq += lda;
            Bq += ldb;
        }
        ct_chains_add(M, NV, cm, s);
        if (F && ct_gw_pf_left(F)) ct_gw_pf_rows(F, 1);
        p = e1;
        blen = k0;
    }
    if (!D) {
        _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
            ct_st8(Cc + i * ldc, n, m0, _mm256_load_ps(cm + 16 * i));
            if (NV == 2) ct_st8(Cc + i * ldc + 8, n - 8, m1, _mm256_load_ps(cm + 16 * i + 8));
        }
        return;
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
        ct_st8(D + i * ldd, n, m0, _mm256_add_ps(ct_ld8(D + i * ldd, n, m0), _mm256_load_ps(cm + 16 * i)));
        if (NV == 2)
            ct_st8(D + i * ldd + 8, n - 8, m1,
                   _mm256_add_ps(ct_ld8(D + i * ldd + 8, n - 8, m1), _mm256_load_ps(cm + 16 * i + 8)));
    }
}

#define CT_GWC256(MM) \
    case MM: { if (nv == 2) ct_gwc_body_256(MM, 2, nn, Ai, lda, Bj, ldb, nr, first, k0, Di, ldd, Ci, ldc, cin, F); \
               else ct_gwc_body_256(MM, 1, nn, Ai, lda, Bj, ldb, nr, first, k0, Di, ldd, Ci, ldc, cin, F); } break;

static CT_T256 void ct_gwc_ukr_256(int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                                   int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
                                   int64_t ldc, int cin, ct_gw_pf *F) {
    for (int64_t i0 = 0; i0 < m; i0 += 4) {       /* 4 ci x 16 co per pass: 8 independent chains */
        const float *Ai = A + i0;
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t nn = ct_min(16, n - j0);
            int nv = nn > 8 ? 2 : 1;
            const float *Bj = B + j0;
            float *Di = D ? D + i0 * ldd + j0 : NULL, *Ci = Cc ? Cc + i0 * ldc + j0 : NULL;
            switch (ct_min(4, m - i0)) {
                CT_GWC256(1) CT_GWC256(2) CT_GWC256(3) CT_GWC256(4)
                default: break;
            }
        }
    }
}

/* gi, the common case: one block of L (8 or 16, a compile-time constant) products for M rows x 16 ci, the
 * block's channels inside one DY panel of width W (A rows W floats apart: 32, or a last panel of 16) and a weight
 * panel of LD (32 or 16) columns (B rows LD floats apart), all compile-time constants.  Fully unrolled with
 * constant offsets: no scalar work between the FMAs.  Same operations, same order as the general block below
 * (s from +0 by FMAs in channel order, then chain = chain + s). */
CT_I256 void ct_gic_blk_256(const int M, const int L, const int W, const int LD, const float *Ar, const float *Bb,
                            float *cm) {
    __m256 s[6][2];
    {
        __m256 b0 = _mm256_loadu_ps(Bb), b1 = _mm256_loadu_ps(Bb + 8);
        _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
            __m256 av = _mm256_broadcast_ss(Ar + i * W);
            s[i][0] = _mm256_fmadd_ps(av, b0, _mm256_setzero_ps());
            s[i][1] = _mm256_fmadd_ps(av, b1, _mm256_setzero_ps());
        }
    }
    _Pragma("GCC unroll 16") for (int l = 1; l < L; l++) {
        __m256 b0 = _mm256_loadu_ps(Bb + l * LD), b1 = _mm256_loadu_ps(Bb + l * LD + 8);
        _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
            __m256 av = _mm256_broadcast_ss(Ar + i * W + l);
            s[i][0] = _mm256_fmadd_ps(av, b0, s[i][0]);
            s[i][1] = _mm256_fmadd_ps(av, b1, s[i][1]);
        }
    }
    ct_chains_add(M, 2, cm, s);
}

/* gi: M (<= 6) rows x NV*8 (<= 16) ci; the chains are copied from the tile C into an L1 tile (cm), take one
 * load/add/store per block there, and go back to C at the end. */
CT_I256 void ct_gic_body_256(const int M, const int NV, int64_t n, const float *DYp, int64_t RO, int64_t row0,
                             int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
                             const float *Bp, int64_t ldb, float *C, int64_t ldc) {
    float cm[6 * 16] __attribute__((aligned(32)));
    __m256i m0 = ct_mask8(n), m1 = ct_mask8(n - 8);
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
        _mm256_store_ps(cm + 16 * i, ct_ld8(C + i * ldc, n, m0));
        if (NV == 2) _mm256_store_ps(cm + 16 * i + 8, ct_ld8(C + i * ldc + 8, n - 8, m1));
    }
    /* the unrolled block applies when the tile is whole and the blocks are 8 or 16 channels of full panels */
    int fast = NV == 2 && n == 16 && ldb == CT_PO && (k0 == 8 || k0 == 16);
    int64_t full = (Cout / CT_PO) * CT_PO;           /* channels [0, full) lie in full panels */
    int64_t g = jb0 / K, kk = jb0 % K;
    for (int64_t jb = jb0; jb < jb1; jb++) {
        int64_t lo = g * k0, hi = ct_min(Cout, lo + k0), row = row0 + kk * dk;
        const float *Bb = Bp + ct_wblk(lo, hi, K, kk) * ldb;
        if (fast && hi == lo + k0 && hi <= full && lo / CT_PO == (hi - 1) / CT_PO) {
            int64_t q = lo / CT_PO;
            const float *Ar = DYp + q * RO * CT_PO + row * CT_PO + (lo - q * CT_PO);
            if (k0 == 8) ct_gic_blk_256(M, 8, CT_PO, CT_PO, Ar, Bb, cm);
            else ct_gic_blk_256(M, 16, CT_PO, CT_PO, Ar, Bb, cm);
        } else {
            __m256 s[6][2];
            _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
                s[i][0] = _mm256_setzero_ps();
                if (NV == 2) s[i][1] = _mm256_setzero_ps();
            }
            int64_t co = lo;
            while (co < hi) {   /* the group's channels, split where they cross a DY panel */
                int64_t q = co / CT_PO, qb = q * CT_PO, wq = ct_min(CT_PO, Cout - qb);
                int64_t cend = ct_min(hi, qb + wq);
                const float *Ar = DYp + q * RO * CT_PO + row * wq + (co - qb);
                for (int64_t l = 0; l < cend - co; l++) {
                    __m256 b0 = ct_ld8(Bb, n, m0), b1 = _mm256_setzero_ps();
                    if (NV == 2) b1 = ct_ld8(Bb + 8, n - 8, m1);
                    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
                        __m256 av = _mm256_broadcast_ss(Ar + i * wq + l);
                        s[i][0] = _mm256_fmadd_ps(av, b0, s[i][0]);
                        if (NV == 2) s[i][1] = _mm256_fmadd_ps(av, b1, s[i][1]);
                    }
                    Bb += ldb;
                }
                co = cend;
            }
            ct_chains_add(M, NV, cm, s);
        }
        if (++kk == K) { kk = 0; g++; }
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
        ct_st8(C + i * ldc, n, m0, _mm256_load_ps(cm + 16 * i));
        if (NV == 2) ct_st8(C + i * ldc + 8, n - 8, m1, _mm256_load_ps(cm + 16 * i + 8));
    }
}

#define CT_GIC256(MM, JA, JZ) \
    case MM: { if (nv == 2) ct_gic_body_256(MM, 2, nn, DYp, RO, i + rowoff, dk, K, JA, JZ, k0, Cout, Bp + j0, n, \
                                            Ci + j0, ldc); \
               else ct_gic_body_256(MM, 1, nn, DYp, RO, i + rowoff, dk, K, JA, JZ, k0, Cout, Bp + j0, n, \
                                    Ci + j0, ldc); } break;

/* gi, a pass of whole blocks (each k0 = L channels inside one DY panel of width W, weight panel rows LD floats
 * apart, blocks one after the other in it): M rows x 16 ci over nb blocks, block jb's DY at A0 + aoff[jb] (the
 * offsets are the same for every tile of the pass: computed once, ct_gic_run), its weight rows at
 * Bb + jb*L*LD.  Same operations, same order as ct_gic_body_256. */
CT_I256 void ct_gic_pass_256(const int M, const int L, const int W, const int LD, int64_t nb, const float *A0,
                             const int64_t *aoff, const float *Bb, float *C, int64_t ldc) {
    float cm[6 * 16] __attribute__((aligned(32)));
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
        _mm256_store_ps(cm + 16 * i, _mm256_loadu_ps(C + i * ldc));
        _mm256_store_ps(cm + 16 * i + 8, _mm256_loadu_ps(C + i * ldc + 8));
    }
    for (int64_t jb = 0; jb < nb; jb++) ct_gic_blk_256(M, L, W, LD, A0 + aoff[jb], Bb + jb * L * LD, cm);
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
        _mm256_storeu_ps(C + i * ldc, _mm256_load_ps(cm + 16 * i));
        _mm256_storeu_ps(C + i * ldc + 8, _mm256_load_ps(cm + 16 * i + 8));
    }
}

/* rows [i0, i1) of a panel of n columns over blocks [jb0, jb1): each run of whole blocks in DY panels of one
 * width (ct_gic_run: 32, or a last panel of 16) takes the unrolled passes for the whole tiles, when the panel
 * is 32 or 16 columns (16-column halves); the rest take the general body.  Each 16-column half outer, tiles of M
 * rows inner, so that the half's weight rows for the blocks stay in L1 while the rows go by.  M (4 or 6:
 * ct_gic256_m) is cache and register blocking only: no result depends on it. */
CT_I256 void ct_gic_rows_m_256(const int M, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,
                               int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0,
                               int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    for (int64_t jb = jb0; jb < jb1;) {
        int64_t aoff[CT_KCB / 8], W = 0, iz = i0;
        int64_t je = (n == CT_PO || n == 16) ? ct_gic_run(k0, K, jb, jb1, Cout, RO, dk, &W, aoff) : jb;
        if (je == jb) je = jb1;                       /* not a whole block: the general body for the rest */
        else if (W == CT_PO || W == 16) {
            const float *Bb = Bp + jb * k0 * n;      /* whole groups before block jb: jb*k0 weight rows */
            int64_t nb = je - jb;
            iz = i0 + (i1 - i0) / M * M;
            for (int64_t j0 = 0; j0 < n; j0 += 16) {
                for (int64_t i = i0; i < iz; i += M) {
                    const float *A0 = DYp + (i + rowoff) * W;
                    float *Ci = C + (i - i0) * ldc + j0;
                    #define CT_GICP256(L, WW, LD) ct_gic_pass_256(M, L, WW, LD, nb, A0, aoff, Bb + j0, Ci, ldc)
                    if (n == CT_PO) {
                        if (W == CT_PO) { if (k0 == 8) CT_GICP256(8, 32, 32); else CT_GICP256(16, 32, 32); }
                        else { if (k0 == 8) CT_GICP256(8, 16, 32); else CT_GICP256(16, 16, 32); }
                    } else {
                        if (W == CT_PO) { if (k0 == 8) CT_GICP256(8, 32, 16); else CT_GICP256(16, 32, 16); }
                        else { if (k0 == 8) CT_GICP256(8, 16, 16); else CT_GICP256(16, 16, 16); }
                    }
                    #undef CT_GICP256
                }
            }
        }
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t nn = ct_min(16, n - j0);
            int nv = nn > 8 ? 2 : 1;
            for (int64_t i = iz; i < i1; i += M) {
                float *Ci = C + (i - i0) * ldc;
                switch (ct_min(M, i1 - i)) {
                    CT_GIC256(1, jb, je) CT_GIC256(2, jb, je) CT_GIC256(3, jb, je) CT_GIC256(4, jb, je)
                    CT_GIC256(5, jb, je) CT_GIC256(6, jb, je)
                    default: break;
                }
            }
        }
        jb = je;
    }
}
/* one function per tile height, not inlined into each other: inlined together, the compiler allocated the
 * registers of both worse (block sums spilled: 1.1-2x the time on Zen 1) */
static CT_T256 __attribute__((noinline)) void ct_gic_rows4_256(int64_t i0, int64_t i1, int64_t n, const float *DYp,
        int64_t RO, int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
        const float *Bp, float *C, int64_t ldc) {
    ct_gic_rows_m_256(4, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}
static CT_T256 __attribute__((noinline)) void ct_gic_rows6_256(int64_t i0, int64_t i1, int64_t n, const float *DYp,
        int64_t RO, int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
        const float *Bp, float *C, int64_t ldc) {
    ct_gic_rows_m_256(6, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}
static inline void ct_gic_rows_256(int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO, int64_t rowoff,
                                   int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
                                   const float *Bp, float *C, int64_t ldc) {
    if (ct_gic256_m() == 4) ct_gic_rows4_256(i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
    else ct_gic_rows6_256(i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}
/* ------------------------------------------------------------------------------------------------ */
/* AVX-512, form CT_ACC_CUBE: the same operations in the same order as the AVX2 kernels above, on      */
/* 16-lane vectors (32 registers hold 24 block sums and the operands)                               */
/* ------------------------------------------------------------------------------------------------ */
/* acc + broadcast(*a) * b: one fp32 FMA per lane.  BC = 1: the broadcast is the FMA's memory operand ({1to16});
 * BC = 0: a vbroadcastss, which the compiler shares between the FMAs of a row that use the same value.  The
 * result is the same.  On AMD's Zen 4 a separate broadcast competes with the cube form's block adds for an FP
 * pipe.  Over L1-resident operands, this made the cube kernels take 1.04-1.07x the sequential ones' time.  With
 * BC = 1 they took 0.99-1.01x.  Intel's cores broadcast on a load port, where BC = 0 needs fewer loads
 * (ct_bcast_fma picks). */
CT_I512 __m512 ct_fma_bc512(const int BC, const float *a, __m512 b, __m512 acc) {
    if (BC) {
        __asm__("vfmadd231ps %1%{1to16%}, %2, %0" : "+v"(acc) : "m"(*a), "v"(b));
        return acc;
    }
    return _mm512_fmadd_ps(_mm512_set1_ps(*a), b, acc);
}

/* chains += block sums: cm[32*i + 16*v] += s[i][v] for M rows of NV vectors (the chains' L1 tile, 32 floats a row) */
CT_I512 void ct_chains_add_512(const int M, const int NV, float *cm, __m512 s[12][2]) {
    _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
        _mm512_store_ps(cm + 32 * i, _mm512_add_ps(_mm512_load_ps(cm + 32 * i), s[i][0]));
        if (NV == 2) _mm512_store_ps(cm + 32 * i + 16, _mm512_add_ps(_mm512_load_ps(cm + 32 * i + 16), s[i][1]));
    }
}

/* gw: M (<= 8) ci x NV*16 (<= 32) co: 16 block sums in registers, chains in an L1 tile.  As ct_gwc_body_256. */
CT_I512 void ct_gwc_body_512(const int BC, const int M, const int NV, int64_t n, const float *A, int64_t lda,
                             const float *B, int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D,
                             int64_t ldd, float *Cc, int64_t ldc, int cin, ct_gw_pf *F) {
    __m512 s[12][2];
    float cm[8 * 32] __attribute__((aligned(64)));
    __mmask16 m0 = ct_mask16(n), m1 = ct_mask16(n - 16 > 0 ? n - 16 : 0);
    if (D)   /* the output tile that the chains end in (L2 at best): fetched while the blocks run */
        _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
            __builtin_prefetch(D + i * ldd, 1);
            if (NV == 2) __builtin_prefetch(D + i * ldd + 16, 1);
        }
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
        _mm512_store_ps(cm + 32 * i, cin ? _mm512_maskz_loadu_ps(m0, Cc + i * ldc) : _mm512_setzero_ps());
        if (NV == 2)
            _mm512_store_ps(cm + 32 * i + 16, cin ? _mm512_maskz_loadu_ps(m1, Cc + i * ldc + 16) : _mm512_setzero_ps());
    }
    int64_t p = 0, blen = first;
    while (p < nr) {
        int64_t e1 = ct_min(nr, p + blen);
        const float *Aq = A + p * lda, *Bq = B + p * ldb;
        {
            __m512 b0 = _mm512_maskz_loadu_ps(m0, Bq), b1 = _mm512_setzero_ps();
            if (NV == 2) b1 = _mm512_maskz_loadu_ps(m1, Bq + 16);
            _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
                s[i][0] = ct_fma_bc512(BC, Aq + i, b0, _mm512_setzero_ps());
                if (NV == 2) s[i][1] = ct_fma_bc512(BC, Aq + i, b1, _mm512_setzero_ps());
            }
            Aq += lda;
            Bq += ldb;
        }
        for (int64_t q = p + 1; q < e1; q++) {
            __m512 b0 = _mm512_maskz_loadu_ps(m0, Bq), b1 = _mm512_setzero_ps();
            if (NV == 2) b1 = _mm512_maskz_loadu_ps(m1, Bq + 16);
            _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
                s[i][0] = ct_fma_bc512(BC, Aq + i, b0, s[i][0]);
                if (NV == 2) s[i][1] = ct_fma_bc512(BC, Aq + i, b1, s[i][1]);
            }
            Aq += lda;
            Bq += ldb;
        }
        ct_chains_add_512(M, NV, cm, s);
        if (F && ct_gw_pf_left(F)) ct_gw_pf_rows(F, 1);
        p = e1;
        blen = k0;
    }
    if (!D) {
        _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
            _mm512_mask_storeu_ps(Cc + i * ldc, m0, _mm512_load_ps(cm + 32 * i));
            if (NV == 2) _mm512_mask_storeu_ps(Cc + i * ldc + 16, m1, _mm512_load_ps(cm + 32 * i + 16));
        }
        return;
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
        _mm512_mask_storeu_ps(D + i * ldd, m0,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m0, D + i * ldd), _mm512_load_ps(cm + 32 * i)));
        if (NV == 2)
            _mm512_mask_storeu_ps(D + i * ldd + 16, m1, _mm512_add_ps(_mm512_maskz_loadu_ps(m1, D + i * ldd + 16),
                                                                      _mm512_load_ps(cm + 32 * i + 16)));
    }
}

#define CT_GWC512(MM) \
    case MM: { if (nv == 2) ct_gwc_body_512(BC, MM, 2, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F); \
               else ct_gwc_body_512(BC, MM, 1, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F); } break;

CT_I512 void ct_gwc_ukr_bc512(const int BC, int64_t m, int64_t n, const float *A, int64_t lda, const float *B,
                              int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
                              int64_t ldc, int cin, ct_gw_pf *F) {
    int nv = n > 16 ? 2 : 1;                    /* m <= 8 ci (an X panel), n <= 32 co (a DY panel) */
    switch (m) {
        CT_GWC512(1) CT_GWC512(2) CT_GWC512(3) CT_GWC512(4) CT_GWC512(5) CT_GWC512(6) CT_GWC512(7) CT_GWC512(8)
        default: break;
    }
}
static CT_T512 void ct_gwc_ukr_512(int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                                   int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
                                   int64_t ldc, int cin, ct_gw_pf *F) {
    if (ct_bcast_fma()) ct_gwc_ukr_bc512(1, m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);
    else ct_gwc_ukr_bc512(0, m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);
}

/* gw with at most 16 co (one vector): two X panels at once, 8 ci of A and M2 (<= 8) of A2 (rows lda2 apart),
 * so that 8 + M2 block sums hide the FMA latency (one panel's 8 sums leave no slack).  Row i < 8 of the tile
 * is A's ci i, row 8 + i A2's ci i; D and Cc rows as in ct_gwc_body_512 (the second panel's 8 rows further
 * on).  Same operations, same order as ct_gwc_body_512 for each element. */
CT_I512 void ct_gwc_pair_body_512(const int BC, const int M2, int64_t n, const float *A, int64_t lda, const float *A2,
                                  int64_t lda2, const float *B, int64_t ldb, int64_t nr, int64_t first, int64_t k0,
                                  float *D, int64_t ldd, float *Cc, int64_t ldc, int cin, ct_gw_pf *F) {
    const int M = 8 + M2;
    __m512 s[16];
    float cm[16 * 16] __attribute__((aligned(64)));
    __mmask16 m0 = ct_mask16(n);
    if (D)
        _Pragma("GCC unroll 16") for (int i = 0; i < M; i++) __builtin_prefetch(D + i * ldd, 1);
    _Pragma("GCC unroll 16") for (int i = 0; i < M; i++)
        _mm512_store_ps(cm + 16 * i, cin ? _mm512_maskz_loadu_ps(m0, Cc + i * ldc) : _mm512_setzero_ps());
    int64_t p = 0, blen = first;
    while (p < nr) {
        int64_t e1 = ct_min(nr, p + blen);
        const float *Aq = A + p * lda, *A2q = A2 + p * lda2, *Bq = B + p * ldb;
        {
            __m512 b0 = _mm512_maskz_loadu_ps(m0, Bq);
            _Pragma("GCC unroll 16") for (int i = 0; i < M; i++)
                s[i] = ct_fma_bc512(BC, i < 8 ? Aq + i : A2q + (i - 8), b0, _mm512_setzero_ps());
            Aq += lda;
            A2q += lda2;
            Bq += ldb;
        }
        for (int64_t q = p + 1; q < e1; q++) {
            __m512 b0 = _mm512_maskz_loadu_ps(m0, Bq);
            _Pragma("GCC unroll 16") for (int i = 0; i < M; i++)
                s[i] = ct_fma_bc512(BC, i < 8 ? Aq + i : A2q + (i - 8), b0, s[i]);
            Aq += lda;
            A2q += lda2;
            Bq += ldb;
        }
        _Pragma("GCC unroll 16") for (int i = 0; i < M; i++)
            _mm512_store_ps(cm + 16 * i, _mm512_add_ps(_mm512_load_ps(cm + 16 * i), s[i]));
        if (F && ct_gw_pf_left(F)) ct_gw_pf_rows(F, 1);
        p = e1;
        blen = k0;
    }
    if (!D) {
        _Pragma("GCC unroll 16") for (int i = 0; i < M; i++)
            _mm512_mask_storeu_ps(Cc + i * ldc, m0, _mm512_load_ps(cm + 16 * i));
        return;
    }
    _Pragma("GCC unroll 16") for (int i = 0; i < M; i++)
        _mm512_mask_storeu_ps(D + i * ldd, m0,
                              _mm512_add_ps(_mm512_maskz_loadu_ps(m0, D + i * ldd), _mm512_load_ps(cm + 16 * i)));
}

#define CT_GWCP512(MM) \
    case MM: ct_gwc_pair_body_512(BC, MM, n, A, lda, A2, lda2, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F); break;
CT_I512 void ct_gwc_pair_bc512(const int BC, int64_t m2, int64_t n, const float *A, int64_t lda, const float *A2,
                               int64_t lda2, const float *B, int64_t ldb, int64_t nr, int64_t first, int64_t k0,
                               float *D, int64_t ldd, float *Cc, int64_t ldc, int cin, ct_gw_pf *F) {
    switch (m2) {
        CT_GWCP512(1) CT_GWCP512(2) CT_GWCP512(3) CT_GWCP512(4) CT_GWCP512(5) CT_GWCP512(6) CT_GWCP512(7)
        CT_GWCP512(8)
        default: break;
    }
}
static CT_T512 void ct_gwc_pair_512(int64_t m2, int64_t n, const float *A, int64_t lda, const float *A2,
                                    int64_t lda2, const float *B, int64_t ldb, int64_t nr, int64_t first, int64_t k0,
                                    float *D, int64_t ldd, float *Cc, int64_t ldc, int cin, ct_gw_pf *F) {
    if (ct_bcast_fma()) ct_gwc_pair_bc512(1, m2, n, A, lda, A2, lda2, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);
    else ct_gwc_pair_bc512(0, m2, n, A, lda, A2, lda2, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);
}
#undef CT_GWCP512

/* gi: M (<= CT_GIC512_M) rows x NV*16 (<= 32) ci; chains in registers for the whole call (M*NV block sums + as
 * many chains + 2 weight vectors fit the 32 registers), as ct_gic_body_256 otherwise. */
#define CT_GIC512_M 6
CT_I512 void ct_gic_body_512(const int M, const int NV, int64_t n, const float *DYp, int64_t RO, int64_t row0,
                             int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
                             const float *Bp, int64_t ldb, float *C, int64_t ldc) {
    __m512 c[CT_GIC512_M][2], s[CT_GIC512_M][2];
    __mmask16 m0 = ct_mask16(n), m1 = ct_mask16(n - 16 > 0 ? n - 16 : 0);
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
        c[i][0] = _mm512_maskz_loadu_ps(m0, C + i * ldc);
        c[i][1] = NV == 2 ? _mm512_maskz_loadu_ps(m1, C + i * ldc + 16) : _mm512_setzero_ps();
    }
    int fast = NV == 2 && n == 32 && ldb == CT_PO && (k0 == 8 || k0 == 16);
    int64_t full = (Cout / CT_PO) * CT_PO;
    int64_t g = jb0 / K, kk = jb0 % K;
    for (int64_t jb = jb0; jb < jb1; jb++) {
        int64_t lo = g * k0, hi = ct_min(Cout, lo + k0), row = row0 + kk * dk;
        const float *Bb = Bp + ct_wblk(lo, hi, K, kk) * ldb;
        if (fast && hi == lo + k0 && hi <= full && lo / CT_PO == (hi - 1) / CT_PO) {
            /* the block's channels inside one full DY panel and a full W panel: constant offsets */
            int64_t q = lo / CT_PO;
            const float *Ar = DYp + q * RO * CT_PO + row * CT_PO + (lo - q * CT_PO);
            {
                __m512 b0 = _mm512_loadu_ps(Bb), b1 = _mm512_loadu_ps(Bb + 16);
                _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
                    __m512 av = _mm512_set1_ps(Ar[i * CT_PO]);
                    s[i][0] = _mm512_fmadd_ps(av, b0, _mm512_setzero_ps());
                    s[i][1] = _mm512_fmadd_ps(av, b1, _mm512_setzero_ps());
                }
            }
            if (k0 == 8) {
                _Pragma("GCC unroll 8") for (int l = 1; l < 8; l++) {
                    __m512 b0 = _mm512_loadu_ps(Bb + l * CT_PO), b1 = _mm512_loadu_ps(Bb + l * CT_PO + 16);
                    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
                        __m512 av = _mm512_set1_ps(Ar[i * CT_PO + l]);
                        s[i][0] = _mm512_fmadd_ps(av, b0, s[i][0]);
                        s[i][1] = _mm512_fmadd_ps(av, b1, s[i][1]);
                    }
                }
            } else {
                for (int64_t l = 1; l < k0; l++) {
                    __m512 b0 = _mm512_loadu_ps(Bb + l * CT_PO), b1 = _mm512_loadu_ps(Bb + l * CT_PO + 16);
                    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
                        __m512 av = _mm512_set1_ps(Ar[i * CT_PO + l]);
                        s[i][0] = _mm512_fmadd_ps(av, b0, s[i][0]);
                        s[i][1] = _mm512_fmadd_ps(av, b1, s[i][1]);
                    }
                }
            }
        } else {
            _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) s[i][0] = s[i][1] = _mm512_setzero_ps();
            int64_t co = lo;
            while (co < hi) {   /* the group's channels, split where they cross a DY panel */
                int64_t q = co / CT_PO, qb = q * CT_PO, wq = ct_min(CT_PO, Cout - qb);
                int64_t cend = ct_min(hi, qb + wq);
                const float *Ar = DYp + q * RO * CT_PO + row * wq + (co - qb);
                for (int64_t l = 0; l < cend - co; l++) {
                    __m512 b0 = _mm512_maskz_loadu_ps(m0, Bb), b1 = _mm512_setzero_ps();
                    if (NV == 2) b1 = _mm512_maskz_loadu_ps(m1, Bb + 16);
                    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
                        __m512 av = _mm512_set1_ps(Ar[i * wq + l]);
                        s[i][0] = _mm512_fmadd_ps(av, b0, s[i][0]);
                        if (NV == 2) s[i][1] = _mm512_fmadd_ps(av, b1, s[i][1]);
                    }
                    Bb += ldb;
                }
                co = cend;
            }
        }
        _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
            c[i][0] = _mm512_add_ps(c[i][0], s[i][0]);
            if (NV == 2) c[i][1] = _mm512_add_ps(c[i][1], s[i][1]);
        }
        if (++kk == K) { kk = 0; g++; }
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < M; i++) {
        _mm512_mask_storeu_ps(C + i * ldc, m0, c[i][0]);
        if (NV == 2) _mm512_mask_storeu_ps(C + i * ldc + 16, m1, c[i][1]);
    }
}

#define CT_GIC512(MM, JA, JZ) \
    case MM: { if (nv == 2) ct_gic_body_512(MM, 2, n, DYp, RO, i + rowoff, dk, K, JA, JZ, k0, Cout, Bp, n, Ci, ldc); \
               else ct_gic_body_512(MM, 1, n, DYp, RO, i + rowoff, dk, K, JA, JZ, k0, Cout, Bp, n, Ci, ldc); \
             } break;

/* gi, a pass of whole blocks in DY panels of width W (rows W floats apart; blocks one after the other in the
 * weight panel, its rows ldb floats apart): M rows x NV*16 ci over nb blocks, block jb's DY at A0 + aoff[jb]
 * (the same offsets for every tile of the pass: computed once by the caller, ct_gic_run), its weight rows at
 * Bb + jb*L*ldb.  NV = 2 needs n == 32 (ldb == CT_PO); NV = 1 takes n <= 16 columns (mask m0) and up to 12
 * rows, so that 12 independent block sums hide the FMA latency.  The chains in registers; same operations,
 * same order as ct_gic_body_512. */
#define CT_GICP1_M 12
CT_I512 void ct_gic_passw_512(const int BC, const int M, const int L, const int NV, const int W, int64_t nb,
                              const float *A0, const int64_t *aoff, const float *Bb, int64_t ldb, __mmask16 m0,
                              float *C, int64_t ldc) {
    __m512 c[CT_GICP1_M][2], s[CT_GICP1_M][2];
    const int64_t ld = NV == 2 ? CT_PO : ldb;      /* a constant for the full panels */
    _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
        if (NV == 2) {
            c[i][0] = _mm512_loadu_ps(C + i * ldc);
            c[i][1] = _mm512_loadu_ps(C + i * ldc + 16);
        } else {
            c[i][0] = _mm512_maskz_loadu_ps(m0, C + i * ldc);
        }
    }
    for (int64_t jb = 0; jb < nb; jb++, Bb += L * ld) {
        const float *Ar = A0 + aoff[jb];
        /* the next row tile's DY rows of this block (from L3 or memory) into L2 while this tile computes: 1-3%
         * off the cube gradInput and forward on a Zen 4 EPYC (32 KiB L1, 1 MiB L2).  Measured on AMD only, so
         * taken with the AMD broadcast form (BC) only; the Xeon's 2 MiB L2 mostly holds these rows already */
        if (BC)
            _Pragma("GCC unroll 12") for (int i = 0; i < M; i++)
                _mm_prefetch((const char *)(Ar + (M + i) * W), _MM_HINT_T1);
        {
            __m512 b0 = NV == 2 ? _mm512_loadu_ps(Bb) : _mm512_maskz_loadu_ps(m0, Bb);
            __m512 b1 = NV == 2 ? _mm512_loadu_ps(Bb + 16) : _mm512_setzero_ps();
            _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
                s[i][0] = ct_fma_bc512(BC, Ar + i * W, b0, _mm512_setzero_ps());
                if (NV == 2) s[i][1] = ct_fma_bc512(BC, Ar + i * W, b1, _mm512_setzero_ps());
            }
        }
        _Pragma("GCC unroll 16") for (int l = 1; l < L; l++) {
            __m512 b0 = NV == 2 ? _mm512_loadu_ps(Bb + l * ld) : _mm512_maskz_loadu_ps(m0, Bb + l * ld);
            __m512 b1 = NV == 2 ? _mm512_loadu_ps(Bb + l * ld + 16) : _mm512_setzero_ps();
            _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
                s[i][0] = ct_fma_bc512(BC, Ar + i * W + l, b0, s[i][0]);
                if (NV == 2) s[i][1] = ct_fma_bc512(BC, Ar + i * W + l, b1, s[i][1]);
            }
        }
        _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
            c[i][0] = _mm512_add_ps(c[i][0], s[i][0]);
            if (NV == 2) c[i][1] = _mm512_add_ps(c[i][1], s[i][1]);
        }
    }
    _Pragma("GCC unroll 12") for (int i = 0; i < M; i++) {
        if (NV == 2) {
            _mm512_storeu_ps(C + i * ldc, c[i][0]);
            _mm512_storeu_ps(C + i * ldc + 16, c[i][1]);
        } else {
            _mm512_mask_storeu_ps(C + i * ldc, m0, c[i][0]);
        }
    }
}

/* rows [i0, i1) of one run of pass blocks (ct_gic_run) in tiles: NV = 2, CT_GIC512_M rows; NV = 1, 12, then
 * 8 and 4.  Returns the first row not done (the rest go to ct_gic_body_512). */
CT_I512 int64_t ct_gic_passrows_512(const int BC, const int NV, const int L, const int W, int64_t i0, int64_t i1,
                                    int64_t nb, const float *DYp, int64_t rowoff, const int64_t *aoff,
                                    const float *Bb, int64_t ldb, __mmask16 m0, float *C, int64_t ldc) {
    const int M = NV == 2 ? CT_GIC512_M : CT_GICP1_M;
    int64_t i = i0;
    for (; i + M <= i1; i += M)
        ct_gic_passw_512(BC, M, L, NV, W, nb, DYp + (i + rowoff) * W, aoff, Bb, ldb, m0, C + (i - i0) * ldc, ldc);
    if (NV == 1 && i + 8 <= i1) {
        ct_gic_passw_512(BC, 8, L, NV, W, nb, DYp + (i + rowoff) * W, aoff, Bb, ldb, m0, C + (i - i0) * ldc, ldc);
        i += 8;
    }
    if (NV == 1 && i + 4 <= i1) {
        ct_gic_passw_512(BC, 4, L, NV, W, nb, DYp + (i + rowoff) * W, aoff, Bb, ldb, m0, C + (i - i0) * ldc, ldc);
        i += 4;
    }
    return i;
}
/* one function per (NV, L, W), not inlined into each other (register allocation: see ct_gic_rows4_256) */
#define CT_GICPR512(NV, L, W) \
    static CT_T512 __attribute__((noinline)) int64_t ct_gic_pr512_##NV##_##L##_##W( \
        int64_t i0, int64_t i1, int64_t nb, const float *DYp, int64_t rowoff, const int64_t *aoff, const float *Bb, \
        int64_t ldb, __mmask16 m0, float *C, int64_t ldc) { \
        const int bc = ct_bcast_fma(); \
        return bc ? ct_gic_passrows_512(1, NV, L, W, i0, i1, nb, DYp, rowoff, aoff, Bb, ldb, m0, C, ldc) \
                  : ct_gic_passrows_512(0, NV, L, W, i0, i1, nb, DYp, rowoff, aoff, Bb, ldb, m0, C, ldc); }
CT_GICPR512(2, 8, 32) CT_GICPR512(2, 16, 32) CT_GICPR512(2, 8, 16) CT_GICPR512(2, 16, 16)
CT_GICPR512(1, 8, 32) CT_GICPR512(1, 16, 32) CT_GICPR512(1, 8, 16) CT_GICPR512(1, 16, 16)
#undef CT_GICPR512

/* rows [i0, i1) of a panel of n (<= 32) columns over blocks [jb0, jb1): each run of whole blocks in panels of
 * one width (ct_gic_run) takes the unrolled passes for its row tiles, the rest the general body; the panel's
 * weight rows for the blocks (at most CT_KCB x 128 bytes) stay in L1 while the rows go by.  Every row adds its
 * blocks in order either way. */
static CT_T512 void ct_gic_rows_512(int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,
                                    int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0,
                                    int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    int nv = n > 16 ? 2 : 1;
    __mmask16 m0 = ct_mask16(n);
    for (int64_t jb = jb0; jb < jb1;) {
        int64_t aoff[CT_KCB / 8], W = 0, iz = i0;
        int64_t je = (n == CT_PO || n <= 16) ? ct_gic_run(k0, K, jb, jb1, Cout, RO, dk, &W, aoff) : jb;
        if (je == jb) je = jb1;                       /* not a whole block: the general body for the rest */
        else if (W == CT_PO || W == 16) {
            const float *Bb = Bp + jb * k0 * n;      /* whole groups before block jb: jb*k0 weight rows */
            int64_t nb = je - jb;
            #define CT_GICPR(NV, L, WW) ct_gic_pr512_##NV##_##L##_##WW(i0, i1, nb, DYp, rowoff, aoff, Bb, n, m0, C, ldc)
            if (nv == 2) {
                if (k0 == 8) iz = W == CT_PO ? CT_GICPR(2, 8, 32) : CT_GICPR(2, 8, 16);
                else iz = W == CT_PO ? CT_GICPR(2, 16, 32) : CT_GICPR(2, 16, 16);
            } else {
                if (k0 == 8) iz = W == CT_PO ? CT_GICPR(1, 8, 32) : CT_GICPR(1, 8, 16);
                else iz = W == CT_PO ? CT_GICPR(1, 16, 32) : CT_GICPR(1, 16, 16);
            }
            #undef CT_GICPR
        }
        for (int64_t i = iz; i < i1; i += CT_GIC512_M) {
            float *Ci = C + (i - i0) * ldc;
            switch (ct_min(CT_GIC512_M, i1 - i)) {
                CT_GIC512(1, jb, je) CT_GIC512(2, jb, je) CT_GIC512(3, jb, je) CT_GIC512(4, jb, je)
                CT_GIC512(5, jb, je) CT_GIC512(6, jb, je)
                default: break;
            }
        }
        jb = je;
    }
}
#endif /* CT_X86 */

/* ------------------------------------------------------------------------------------------------ */
/* dispatch                                                                                         */
/* ------------------------------------------------------------------------------------------------ */
static inline void ct_gwc_ukr(const ct_plan *P, int64_t m, int64_t n, const float *A, int64_t lda, const float *B,
                              int64_t ldb, int64_t nr, int64_t first, float *D, int64_t ldd, float *Cc, int64_t ldc,
                              int cin, ct_gw_pf *F) {
#if CT_X86
    if (P->isa == CT_ISA_AVX512 && P->acc == CT_ACC_CUBE) {
        ct_gwc_ukr_512(m, n, A, lda, B, ldb, nr, first, P->k0, D, ldd, Cc, ldc, cin, F);
        return;
    }
    if (P->isa != CT_ISA_PORTABLE && P->acc == CT_ACC_CUBE) {
        ct_gwc_ukr_256(m, n, A, lda, B, ldb, nr, first, P->k0, D, ldd, Cc, ldc, cin, F);
        return;
    }
#endif
    ct_gwc_gen(P->acc, m, n, A, lda, B, ldb, nr, first, P->k0, D, ldd, Cc, ldc, cin);
}

/* Blocks [jb0, jb1) of the gi (or forward) chains of rows [i0, i1) of a panel of n columns: row i reads DY
 * row i + rowoff for tap 0, tap k at + k*dk; row i's chains are at C + (i - i0)*ldc. */
static inline void ct_gic_rows(const ct_plan *P, int64_t i0, int64_t i1, int64_t n, int64_t rowoff, int64_t dk,
                               int64_t jb0, int64_t jb1, const float *Bp, float *C, int64_t ldc) {
#if CT_X86
    if (P->isa == CT_ISA_AVX512 && P->acc == CT_ACC_CUBE) {
        ct_gic_rows_512(i0, i1, n, P->DYp, P->dy_ps, rowoff, dk, P->K, jb0, jb1, P->k0, P->Cout, Bp, C, ldc);
        return;
    }
    if (P->isa != CT_ISA_PORTABLE && P->acc == CT_ACC_CUBE) {
        ct_gic_rows_256(i0, i1, n, P->DYp, P->dy_ps, rowoff, dk, P->K, jb0, jb1, P->k0, P->Cout, Bp, C, ldc);
        return;
    }
#endif
    for (int64_t i = i0; i < i1; i += 8)
        ct_gic_gen(P->acc, ct_min(8, i1 - i), n, P->DYp, P->dy_ps, i + rowoff, dk, P->K, jb0, jb1, P->k0, P->Cout, Bp,
                   C + (i - i0) * ldc, ldc);
}

/* Rows [u, v) of blocks [jb0, jb1) where some rows lack some taps (the sequence's first and last time steps).
 * Row t*B + b has taps [max(0, sgn*t + alo), min(K-1, sgn*t + ahi)] (gradInput: sgn = 1, forward: sgn = -1).
 * With B >= CT_EDGE_B the rows go one time step at a time: its taps of a channel group are a run of consecutive
 * blocks, summed in one call with the chains in registers.  Otherwise (few rows per time step) one block at a
 * time over the rows that have its tap.  Either way every row adds its blocks in the chain's order: the result
 * is the same.  C: row u's chains. */
#define CT_EDGE_B 6
static void ct_gic_edge(const ct_plan *P, int64_t u, int64_t v, int64_t n, int64_t rowoff, int64_t dk,
                        int64_t jb0, int64_t jb1, int sgn, int64_t alo, int64_t ahi, const float *Bp, float *C,
                        int64_t ldc) {
    int64_t K = P->K, B = P->B;
    if (u >= v || B < 1) return;
    if (B >= CT_EDGE_B) {
        for (int64_t t = u / B; t * B < v; t++) {
            int64_t a = ct_max(u, t * B), b = ct_min(v, (t + 1) * B);
            int64_t klo = ct_max(0, sgn * t + alo), khi = ct_min(K - 1, sgn * t + ahi);
            for (int64_t g = jb0 / K; g * K < jb1 && klo <= khi; g++) {
                int64_t s = ct_max(jb0, g * K + klo), e = ct_min(jb1, g * K + khi + 1);
                if (s < e) ct_gic_rows(P, a, b, n, rowoff, dk, s, e, Bp, C + (a - u) * ldc, ldc);
            }
        }
        return;
    }
    for (int64_t jb = jb0; jb < jb1; jb++) {
        /* rows with tap k: sgn*t + alo <= k <= sgn*t + ahi */
        int64_t k = jb % K, tlo, thi;                               /* t in [tlo, thi) */
        if (sgn > 0) { tlo = k - ahi; thi = k - alo + 1; }
        else { tlo = alo - k; thi = ahi - k + 1; }
        int64_t a = ct_max(u, tlo * B), b = ct_min(v, thi * B);
        if (a < b) ct_gic_rows(P, a, b, n, rowoff, dk, jb, jb + 1, Bp, C + (a - u) * ldc, ldc);
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* tasks                                                                                            */
/* ------------------------------------------------------------------------------------------------ */
static inline void ct_tile_zero(float *t, int64_t rows, int64_t cols, int64_t ld) {
    if (cols == ld) memset(t, 0, (size_t)(rows * ld) * 4);
    else for (int64_t r = 0; r < rows; r++) memset(t + r * ld, 0, (size_t)cols * 4);
}
static inline void ct_tile_add(float *dst, int64_t ldd, const float *src, int64_t lds, int64_t rows, int64_t cols) {
    for (int64_t r = 0; r < rows; r++)
        for (int64_t j = 0; j < cols; j++) dst[r * ldd + j] = dst[r * ldd + j] + src[r * lds + j];
}

/* gi task (cube model): rows [R0, R1) x ci [J0, J1), rows r = t*B + b.  cb: the task's fp32 tile(s) in the
 * thread's buffer. */
static void ct_gic_task(const ct_plan *P, int64_t task, float *cb) {
    int64_t rb = task / P->n_gi_jb, jbk = task % P->n_gi_jb;
    int64_t R0 = rb * CT_MCI, R1 = ct_min(P->RI, R0 + CT_MCI);
    int64_t J0 = jbk * CT_NCI, J1 = ct_min(P->Cin, J0 + CT_NCI), nc = J1 - J0;
    int64_t ld = P->gi_ld, rows = R1 - R0;
    int pre = (P->compute == CT_C_FP16 || P->compute == CT_C_BF16) ? P->compute : CT_C_FP32;
    int direct = P->gi_dt == CT_DT_F32 && pre == CT_C_FP32;
    /* ch: the chain; out: where finished segments are added (only with segments) */
    float *ch = cb, *out = NULL;
    int64_t lch = ld, lout = ld;
    if (P->gi_seg > 0) {
        out = cb + P->gi_tile;
        if (direct) { out = (float *)P->gi + R0 * P->Cin + J0; lout = P->Cin; }
    } else if (direct) {
        ch = (float *)P->gi + R0 * P->Cin + J0;
        lch = P->Cin;
    }
    ct_tile_zero(ch, rows, nc, lch);
    if (out) ct_tile_zero(out, rows, nc, lout);
    if (P->Wp && P->K > 0) {
        int64_t K = P->K, nblk = ct_cdiv(P->Cout, P->k0) * K;
        int64_t step = ct_gic_step(P->k0);                               /* blocks per pass (cache blocking) */
        for (int64_t j0b = 0; j0b < nblk;) {
            int64_t j1b = ct_min(nblk, j0b + step);
            if (P->gi_seg > 0) j1b = ct_min(j1b, (j0b / P->gi_seg + 1) * P->gi_seg);
            /* rows where every tap is valid; row r reads DY row r + dyoff for tap 0, one time step (B rows) less
             * per tap */
            int64_t B = P->B, dyoff = P->pad * B - P->dy_r0;
            int64_t ia = ct_max(R0, ct_max(0, K - 1 - P->pad) * B);
            int64_t ib = ct_min(R1, ct_min(P->T_in, P->T_out - P->pad) * B);
            if (ia >= ib) ia = ib = R1;
            for (int64_t j0 = J0; j0 < J1; j0 += CT_PO) {
                int64_t wj = ct_min(CT_PO, P->Cin - j0);
                const float *Bp0 = P->Wp + j0 * P->K * P->Cout;        /* this ci panel, in block order */
                float *cj = ch + (j0 - J0);
                /* rows missing some taps: row t has taps t + pad - (T_out - 1) .. t + pad */
                for (int side = 0; side < 2; side++) {
                    int64_t u = side ? ib : R0, v = side ? R1 : ia;
                    ct_gic_edge(P, u, v, wj, dyoff, -B, j0b, j1b, 1, P->pad - (P->T_out - 1), P->pad, Bp0,
                                cj + (u - R0) * lch, lch);
                }
                if (ia < ib) ct_gic_rows(P, ia, ib, wj, dyoff, -B, j0b, j1b, Bp0, cj + (ia - R0) * lch, lch);
            }
            if (out && (j1b % P->gi_seg == 0 || j1b == nblk)) {   /* a segment ends: add it, start a new chain */
                ct_tile_add(out, lout, ch, lch, rows, nc);
                ct_tile_zero(ch, rows, nc, lch);
            }
            j0b = j1b;
        }
    }
    if (direct) return;
    float *res = out ? out : ch;
    int64_t lres = out ? lout : lch, es = ct_dt_size(P->gi_dt);
    pre = ct_round_for(P->gi_dt, pre);
    for (int64_t r = R0; r < R1; r++)
        ct_store_row(P->isa, res + (r - R0) * lres, nc, P->gi + (r * P->Cin + J0) * es, P->gi_dt, pre, CT_HIF8_TA, 0);
}

/* The part of a gw task that one row chunk [q0, q1) of its chains makes, for ni items (ni > 1: whole per-item
 * chains of layout 0, several items to a chunk): for every (co panel, tap k, ci panel, item), the chain of tap k
 * over its rows in the chunk.  Row u of a chain (a t for layout 0, a position r for layout 1; the chain spans
 * [cs0, cs1)) is DY panel row ybs[j] + u*sty for item j; tap k reads X panel row xbs[j] + (u + (k-pad)*U)*stx,
 * U being the rows per time step (1, or B).  A chain's value is carried in the chain tile cc from chunk to chunk
 * (ni == 1 only) and added into the task tile at its last row.  The items of a chunk are added into each task
 * tile element one after the other, in their order: with several items, a task tile is read from L2 once per
 * chunk instead of once per item.  The next copy's rows (nn items nybs[], rows [nq0, nq1)) are prefetched. */
typedef struct {
    int64_t k0, G, I0, I1, C0, C1;   /* the task */
    float *cb, *cc;                  /* task tile (ld, tile) and chain tile (lcc, tcc; NULL: chains fit a chunk) */
    int64_t ld, tile, lcc, tcc;
} ct_gw_tile;

#define CT_GW_ITEMS 32   /* items per chunk at most */
static void ct_gwc_chunk(const ct_plan *P, const ct_gw_tile *T, int64_t q0, int64_t q1, int64_t cs0, int64_t cs1,
                         int64_t U, int64_t stx, int64_t sty, int64_t ni, const int64_t *xbs, const int64_t *ybs,
                         float *ybuf, int64_t nn, const int64_t *nybs, int64_t nq0, int64_t nq1) {
    int64_t k0b = P->k0, span = q1 - q0, yoff[CT_GW_ITEMS];
    for (int64_t j = 0; j < ni && ybuf; j++) yoff[j] = j * span - q0;   /* item j's rows in ybuf */
    for (int64_t co = T->C0; co < T->C1; co += CT_PO) {
        int64_t wq = ct_min(CT_PO, P->Cout - co);
        const float *Bq = P->DYp + (co / CT_PO) * P->dy_ps * CT_PO;
        /* item j's row u: Bq + (yr[j] + u*ys)*wq */
        const int64_t *yr = ybs;
        int64_t ys = sty;
        /* the rows of the next copy (the next co panel's, else the next chunk's first panel), from DY rows far
         * apart (L3 or memory): fetched into L2 by the micro-kernels, one row per block, while this panel
         * computes (ct_gw_pf) */
        ct_gw_pf F = {NULL, NULL, 0, 0, 0, 0, 0, 0, 0};
        if (ybuf) {
            int last = co + CT_PO >= T->C1;
            int64_t cn = last ? T->C0 : co + CT_PO;
            F.ybs = last ? nybs : ybs;
            F.n = last ? nn : ni;
            F.q0 = F.u = last ? nq0 : q0;
            F.q1 = last ? nq1 : q1;
            F.wq = ct_min(CT_PO, P->Cout - cn);
            F.pb = P->DYp + (cn / CT_PO) * P->dy_ps * CT_PO;
            F.sty = sty;
            /* the chunk's DY rows (ybs[j] + u*sty), item after item, contiguous in ybuf: every k and ci panel
             * reads them */
            float *dst = ybuf;
            for (int64_t j = 0; j < ni; j++) {
                const float *src = Bq + (ybs[j] + q0 * sty) * wq;
                /* rows B*128 bytes apart: fetch ahead (8 rows, into the next item), or the copy waits on each */
                int64_t jn = j, un = q0 + 8;
                if (un >= q1) { jn = j + 1; un = q0 + (un - q1); }
                const float *pf = jn < ni && un < q1 ? Bq + (ybs[jn] + un * sty) * wq : NULL;
                if (wq == CT_PO) {   /* a constant size: inlined */
                    for (int64_t u = q0; u < q1; u++, src += sty * CT_PO, dst += CT_PO) {
                        if (pf) {
                            __builtin_prefetch(pf);
                            __builtin_prefetch(pf + 16);
                            pf += sty * CT_PO;
                            if (++un == q1) { un = q0; pf = ++jn < ni ? Bq + (ybs[jn] + q0 * sty) * CT_PO : NULL; }
                        }
                        memcpy(dst, src, CT_PO * 4);
                    }
                } else {
                    for (int64_t u = q0; u < q1; u++, src += sty * wq, dst += wq) memcpy(dst, src, (size_t)wq * 4);
                }
            }
            Bq = ybuf;
            yr = yoff;
            ys = 1;
        }
        for (int64_t k = T->k0; k < T->k0 + T->G; k++) {
            int64_t ca = ct_max(cs0, ct_max(0, P->pad - k) * U);              /* the chain's rows for tap k */
            int64_t cz = ct_min(cs1, ct_min(P->T_out, P->T_in + P->pad - k) * U);
            int64_t a = ct_max(q0, ca), z = ct_min(q1, cz);
            if (a >= z) continue;
            int64_t first = ct_min(z - a, k0b - a % k0b);                   /* blocks aligned at row 0 */
            int cin = a > ca, fin = z == cz || !T->cc;
            for (int64_t ci = T->I0; ci < T->I1; ci += CT_PX) {
                int64_t wi = ct_min(CT_PX, P->Cin - ci);
                const float *Xq = P->Xp + (ci / CT_PX) * P->RI * CT_PX;
                int64_t kt = k - T->k0, o = (ci - T->I0) * T->ld + (co - T->C0);
#if CT_X86
                /* at most 16 co: two full-or-last X panels to a call (ct_gwc_pair_512) */
                if (P->isa == CT_ISA_AVX512 && P->acc == CT_ACC_CUBE && wq <= 16 && wi == CT_PX &&
                    ci + CT_PX < T->I1) {
                    int64_t wi2 = ct_min(CT_PX, P->Cin - ci - CT_PX);
                    const float *Xq2 = Xq + P->RI * CT_PX;
                    for (int64_t j = 0; j < ni; j++) {
                        int64_t xr = xbs[j] + (a + (k - P->pad) * U) * stx;
                        ct_gwc_pair_512(wi2, wq, Xq + xr * wi, stx * wi, Xq2 + xr * wi2, stx * wi2,
                                        Bq + (yr[j] + a * ys) * wq, ys * wq, z - a, first, k0b,
                                        fin ? T->cb + kt * T->tile + o : NULL, T->ld,
                                        T->cc ? T->cc + kt * T->tcc + (ci - T->I0) * T->lcc + (co - T->C0) : NULL,
                                        T->lcc, cin, F.pb ? &F : NULL);
                    }
                    ci += CT_PX;
                    continue;
                }
#endif
                for (int64_t j = 0; j < ni; j++)
                    ct_gwc_ukr(P, wi, wq, Xq + (xbs[j] + (a + (k - P->pad) * U) * stx) * wi, stx * wi,
                               Bq + (yr[j] + a * ys) * wq, ys * wq, z - a, first, fin ? T->cb + kt * T->tile + o : NULL,
                               T->ld,
                               T->cc ? T->cc + kt * T->tcc + (ci - T->I0) * T->lcc + (co - T->C0) : NULL, T->lcc,
                               cin, F.pb ? &F : NULL);
            }
        }
    }
}

/* gw task (cube model): k in [k0, k0+G) x ci [I0, I1) x co [C0, C1), and (layout 1 with pieces) one piece. */
static void ct_gwc_task(const ct_plan *P, int64_t task, float *cb) {
    float *cbase = cb;                           /* the thread's buffer: task tile, then the chain tile */
    int64_t piece = 0;
    if (P->gw_pieces > 1) { piece = task / P->n_gw1; task %= P->n_gw1; }
    int64_t per_k = P->n_gw_ib * P->n_gw_ob;
    int64_t kg = task / per_k, rem = task % per_k;
    int64_t ib = rem / P->n_gw_ob, ob = rem % P->n_gw_ob;
    ct_gw_tile T;
    T.k0 = kg * P->gw_kg; T.G = ct_min(P->gw_kg, P->K - T.k0);
    T.I0 = ib * P->gw_mc; T.I1 = ct_min(P->Cin, T.I0 + P->gw_mc);
    T.C0 = ob * P->gw_nc; T.C1 = ct_min(P->Cout, T.C0 + P->gw_nc);
    int64_t nc = T.C1 - T.C0;
    T.cb = cb; T.ld = P->gw_ld; T.tile = (T.I1 - T.I0) * T.ld;
    int direct = P->gw_dt == CT_DT_F32;
    if (P->gw_pieces > 1 || (P->win && !direct)) {   /* this piece's sums (streamed: gw's fp32 sums), at pcb */
        T.cb = P->pcb + piece * P->K * P->Cin * P->Cout + (T.k0 * P->Cin + T.I0) * P->Cout + T.C0;
        T.ld = P->Cout;
        T.tile = P->Cin * P->Cout;
    } else if (direct) {
        T.cb = (float *)P->gw + (T.k0 * P->Cin + T.I0) * P->Cout + T.C0;
        T.ld = P->Cout;
        T.tile = P->Cin * P->Cout;
    }
    if (!P->win)                                 /* (streamed DY: zeroed once, before the first window) */
        for (int64_t kk = 0; kk < T.G; kk++) ct_tile_zero(T.cb + kk * T.tile, T.I1 - T.I0, nc, T.ld);
    if (P->Xp) {
        /* Chains are cut into chunks of CH rows (whole blocks) so that a chunk's rows stay in cache while every
         * (co, k, ci) of the task reads them. */
        int64_t B = P->B, k0b = P->k0, CH = ct_max(1, CT_KCW / k0b) * k0b;
        T.cc = P->cbuf ? cbase + P->gw_ctile_off : NULL;
        T.lcc = P->gw_ld;
        T.tcc = P->gw_mc * P->gw_ld;
        if (P->win) {                            /* streamed DY: chains carried from window to window */
            T.cc = P->gwc + piece * P->K * P->Cin * P->Cout + (T.k0 * P->Cin + T.I0) * P->Cout + T.C0;
            T.lcc = P->Cout;
            T.tcc = P->Cin * P->Cout;
        }
        if (P->layout == 0) {                    /* one chain per batch item, over t, in the order perm */
            /* streamed: the window's items [w_b0, w_b1) and t's [w_t0, w_t1), packed item after item */
            int64_t bi0 = P->win ? P->w_b0 : 0, bi1 = P->win ? P->w_b1 : B;
            int64_t ta = P->win ? P->w_t0 : 0, tz = P->win ? P->w_t1 : P->T_out;
            /* whole chains of at most half a chunk: several items to a chunk (ct_gwc_chunk) */
            int64_t ni = 1;
            if (ta == 0 && tz == P->T_out && tz > 0 && 2 * tz <= CH) ni = ct_min(CT_GW_ITEMS, CH / tz);
            int64_t stx = P->bmajor ? 1 : B, sty = P->win ? 1 : B;
            float *yv = P->bmajor && !P->win ? cbase + P->gw_ybuf_off : NULL;
            int64_t xbs[CT_GW_ITEMS], ybs[2][CT_GW_ITEMS], cur = 0;
            /* item bi's X base (b-major rows b*T_in + t when B > 1, else t) and DY base (t-major rows t*B + b,
             * copied chunk by chunk into ybuf when B > 1; the streamed window's item-major rows) */
            #define CT_GW_ITEM(bi) (P->perm ? P->perm[bi] : (bi))      /* the item taken bi-th */
            #define CT_GW_YB(bi) (P->win ? ((bi) - bi0) * (tz - ta) - ta : CT_GW_ITEM(bi))
            for (int64_t j = 0; j < ct_min(ni, bi1 - bi0); j++) ybs[cur][j] = CT_GW_YB(bi0 + j);
            for (int64_t bi = bi0; bi < bi1; bi += ni) {
                int64_t nb = ct_min(ni, bi1 - bi), nx = ct_min(ni, bi1 - bi - nb);
                for (int64_t j = 0; j < nb; j++) xbs[j] = CT_GW_ITEM(bi + j) * (P->bmajor ? P->T_in : 1);
                for (int64_t j = 0; j < nx; j++) ybs[!cur][j] = CT_GW_YB(bi + nb + j);
                for (int64_t t0 = ta; t0 < tz; t0 += CH) {
                    if (ct_stop(P)) return;
                    /* the next chunk (for the prefetch of its DY rows): these items' next t's, or the next items' */
                    int64_t nn = nb, nq0 = t0 + CH, nq1 = ct_min(tz, t0 + 2 * CH);
                    const int64_t *nybs = ybs[cur];
                    if (nq0 >= tz) {
                        nn = nx;
                        nybs = ybs[!cur];
                        nq0 = ta;
                        nq1 = ct_min(tz, ta + CH);
                    }
                    ct_gwc_chunk(P, &T, t0, ct_min(tz, t0 + CH), 0, P->T_out, 1, stx, sty, nb, xbs, ybs[cur], yv, nn,
                                 nybs, nq0, nq1);
                }
                cur = !cur;
            }
            #undef CT_GW_YB
            #undef CT_GW_ITEM
        } else {                                 /* positions t*B + b: this piece's segments, each a chain */
            int64_t nB = ct_cdiv(P->RO, k0b), Pn = P->gw_pieces;
            int64_t r0 = (piece * nB / Pn) * k0b, r1 = ct_min(P->RO, ((piece + 1) * nB / Pn) * k0b);
            int64_t seg = P->gw_seg * k0b;                               /* rows per segment */
            for (int64_t s0 = r0; s0 < r1; s0 += seg) {
                int64_t s1 = ct_min(r1, s0 + seg);
                int64_t qa = P->win ? ct_max(s0, P->w_r0) : s0, qz = P->win ? ct_min(s1, P->w_r1) : s1;
                for (int64_t q0 = qa; q0 < qz; q0 += CH) {
                    if (ct_stop(P)) return;
                    int64_t zero = 0, ry = -P->dy_r0;
                    ct_gwc_chunk(P, &T, q0, ct_min(qz, q0 + CH), s0, s1, B, 1, 1, 1, &zero, &ry, NULL, 0, NULL, 0, 0);
                }
            }
        }
    }
    if (direct || P->gw_pieces > 1 || P->win) return;    /* (cast by ct_tree_task) */
    int64_t es = ct_dt_size(P->gw_dt);
    for (int64_t kk = 0; kk < T.G; kk++) {
        int64_t k = T.k0 + kk;
        for (int64_t ci = T.I0; ci < T.I1; ci++)
            ct_store_row(P->isa, T.cb + kk * T.tile + (ci - T.I0) * T.ld, nc,
                         P->gw + ((k * P->Cin + ci) * P->Cout + T.C0) * es, P->gw_dt, CT_C_FP32, P->hif8_rnd,
                         P->saturate);
    }
}

/* Pairwise tree over the P piece sums of gw elements [e0, e0 + n): (0+1), (2+3), ..., an odd last one carried
 * up unchanged; again until one is left.  Then cast to gradWeight's dtype. */
static void ct_tree_task(const ct_plan *P, int64_t task) {
    int64_t total = P->K * P->Cin * P->Cout, e0 = task * CT_TREE_CHUNK, n = ct_min(CT_TREE_CHUNK, total - e0);
    float t[32][CT_TREE_CHUNK];
    int64_t cnt = P->gw_pieces;
    for (int64_t i = 0; i < cnt; i++) memcpy(t[i], P->pcb + i * total + e0, (size_t)n * 4);
    while (cnt > 1) {
        int64_t h = cnt / 2;
        for (int64_t i = 0; i < h; i++)
            for (int64_t j = 0; j < n; j++) t[i][j] = t[2 * i][j] + t[2 * i + 1][j];
        if (cnt & 1) memcpy(t[h], t[cnt - 1], (size_t)n * 4);
        cnt = h + (cnt & 1);
    }
    int64_t es = ct_dt_size(P->gw_dt);
    ct_store_row(P->isa, t[0], n, P->gw + e0 * es, P->gw_dt, CT_C_FP32, P->hif8_rnd, P->saturate);
}

#endif /* PYCONVTBC_CONV_CUBE_H */
