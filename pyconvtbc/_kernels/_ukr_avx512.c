/* _ukr_avx512.c: the AVX-512 (F, BW, VL, DQ) + FMA + F16C micro-kernels and their table (_ukr.h).
 *
 * Each function carries its target attribute (CT_T512 / CT_I512), so this file compiles with the package's
 * common flags and runs only where ct_ukr_select picks it (the CPU has these extensions).  Other architectures
 * compile it to the stub at the end.
 */
#include "_ukr.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PYCONVTBC_NO_SIMD)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "_fpround.h"
#include "_ukr_generic.h"

/* variant knobs (ct_ukr_opts), set by ct_ukr_init_avx512 (between calls, as every hook) */
static int ct_gw_pairs_on = 1;     /* the co-pair gw kernel for narrow channels */
static int ct_bcast_on = 0;        /* the cube kernels' broadcast: each FMA's memory operand (1), or shared (0) */
static inline int ct_bcast_fma(void) { return ct_bcast_on; }

/* ------------------------------------------------------------------------------------------------ */
/* AVX-512 (F, BW, VL, DQ) + FMA + F16C                                                             */
/* ------------------------------------------------------------------------------------------------ */
#define CT_T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2")))
#define CT_I512 static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2")))

CT_I512 __mmask16 ct_mask16(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }

/* vector RNE fp32 -> fp16 -> fp32 and bf16, HF32 (integer), identical to the pct_* scalar codecs */
CT_I512 __m512 ct_round_f16_512(__m512 v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
CT_I512 __m512i ct_bf16_bits_512(__m512 v) {   /* 32-bit lanes holding the bf16 pattern in the low half */
    __m512i b = _mm512_castps_si512(v);
    __m512i u = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(u, _mm512_set1_epi32(0x7F800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    __m512i qn = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
    return _mm512_and_si512(_mm512_mask_mov_epi32(r, nan, qn), _mm512_set1_epi32(0xFFFF));
}
CT_I512 __m512 ct_round_bf16_512(__m512 v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(ct_bf16_bits_512(v), 16));
}
CT_I512 __m512 ct_round_hf32_512(__m512 v, int d, int hrnd) {   /* d = 23 - mantissa bits, 1..22 */
    __m512i b = _mm512_castps_si512(v);
    __m512i u = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    __m512i s = _mm512_andnot_si512(_mm512_set1_epi32(0x7FFFFFFF), b);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(u, _mm512_set1_epi32(0x7F800000));
    __m512i dv = _mm512_set1_epi32(d);
    __m512i add = _mm512_set1_epi32((int)(1u << (d - 1)));
    if (hrnd == CT_HF32_NEAREST_EVEN) {
        __m512i lsb = _mm512_and_si512(_mm512_srlv_epi32(u, dv), _mm512_set1_epi32(1));
        add = _mm512_add_epi32(_mm512_sub_epi32(add, _mm512_set1_epi32(1)), lsb);
    }
    __m512i r = _mm512_sllv_epi32(_mm512_srlv_epi32(_mm512_add_epi32(u, add), dv), dv);
    r = _mm512_or_si512(r, s);
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, nan, b));
}

static CT_T512 void ct_decode_row_512(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_F32 && stride == 4) { memcpy(out, src, (size_t)n * 4); return; }
    if (stride == 2 && (dt == CT_DT_F16 || dt == CT_DT_BF16)) {
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 k = ct_mask16(n - i);
            __m256i h = _mm256_maskz_loadu_epi16(k, src + 2 * i);
            __m512 f;
            __m512i h32 = _mm512_cvtepu16_epi32(h);
            if (dt == CT_DT_F16) {
                /* vcvtph2ps quiets signalling NaNs; the scalar codec keeps the pattern: patch NaN/Inf lanes */
                f = _mm512_cvtph_ps(h);
                __m512i e = _mm512_and_si512(h32, _mm512_set1_epi32(0x7C00));
                __mmask16 sp = _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(0x7C00));
                if (sp) {
                    __m512i bits = _mm512_or_si512(
                        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(h32, _mm512_set1_epi32(0x8000)), 16),
                                        _mm512_set1_epi32(0x7F800000)),
                        _mm512_slli_epi32(_mm512_and_si512(h32, _mm512_set1_epi32(0x3FF)), 13));
                    f = _mm512_mask_mov_ps(f, sp, _mm512_castsi512_ps(bits));
                }
            } else f = _mm512_castsi512_ps(_mm512_slli_epi32(h32, 16));
            _mm512_mask_storeu_ps(out + i, k, f);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = ct_load1(src + i * stride, dt);
}

static CT_T512 void ct_round_row_512(float *v, int64_t n, int compute, int hbits, int hrnd) {
    if (compute == CT_C_FP32) return;
    if (compute == CT_C_HF32 && (hbits < 1 || hbits > 22)) return;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = ct_mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(k, v + i);
        if (compute == CT_C_HF32) x = ct_round_hf32_512(x, 23 - hbits, hrnd);
        else if (compute == CT_C_FP16) x = ct_round_f16_512(x);
        else x = ct_round_bf16_512(x);
        _mm512_mask_storeu_ps(v + i, k, x);
    }
}

static CT_T512 void ct_store_row_512(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd,
                                     int sat) {
    switch (dt) {                                            /* by class: 4- and 2-byte floats here */
        case CT_DT_F32: case CT_DT_F16: case CT_DT_BF16: break;
        default: ct_store_row_port(acc, n, dst, dt, pre, hif8_rnd, sat); return;   /* 8-bit codes (others: none) */
    }
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = ct_mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(k, acc + i);
        if (pre == CT_C_FP16) x = ct_round_f16_512(x);
        else if (pre == CT_C_BF16) x = ct_round_bf16_512(x);
        if (dt == CT_DT_F32) _mm512_mask_storeu_ps((float *)dst + i, k, x);
        else if (dt == CT_DT_F16)
            _mm256_mask_storeu_epi16((uint16_t *)dst + i, k,
                                     _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        else    /* CT_DT_BF16 */
            _mm256_mask_storeu_epi16((uint16_t *)dst + i, k, _mm512_cvtepi32_epi16(ct_bf16_bits_512(x)));
    }
}

/* gi micro-kernel, M rows x (NV*16 >= n) columns, accumulators in registers.
 * C[i][j] += sum_{kk<nk} sum_{c=c0}^{c1-1} DY(row0 + kk*dk + i, c) * Bp[kk*bk + (c-c0)*n + j]
 * (nk consecutive k: the DY row moves by dk = -B and the weight panel by bk = Cin*Cout per k). */
CT_I512 void ct_gi_body_512(const int M, const int NV, const int WQ, int64_t n, const float *DYp, int64_t RO,
                            int64_t row0, int64_t dk, int64_t nk, int64_t c0, int64_t c1, int64_t Cout,
                            const float *Bp, int64_t bk, float *C, int64_t ldc) {
    /* WQ > 0: the caller guarantees Cout == WQ (one narrow panel), so row addresses are constants */
    __m512 acc[28][2];
    __mmask16 k0 = ct_mask16(n), k1 = ct_mask16(n - 16 > 0 ? n - 16 : 0);
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        acc[i][0] = _mm512_maskz_loadu_ps(k0, C + i * ldc);
        if (NV == 2) acc[i][1] = _mm512_maskz_loadu_ps(k1, C + i * ldc + 16);
    }
    /* channel c0's panel: where each tap's first segment starts (row 0), for the prefetch below */
    const int64_t w0 = ct_min(CT_PO, Cout - c0 / CT_PO * CT_PO);
    const float *D0 = DYp + c0 / CT_PO * RO * CT_PO + c0 % CT_PO;
    for (int64_t kk = 0; kk < nk; kk++) {
        const float *B = Bp + kk * bk;
        int64_t row = row0 + kk * dk;
        int64_t c = c0;
        while (c < c1) {
            int64_t q = c / CT_PO, qb = q * CT_PO;
            int64_t wq = ct_min(CT_PO, Cout - qb);
            int64_t cend = ct_min(c1, qb + wq);
            int64_t cnt = cend - c;
            const float *A = DYp + q * RO * CT_PO + row * wq + (c - qb);
            if (wq == CT_PO) {
                /* The DY rows of the next segment (the next panel, else the next tap, else the next tile's
                 * first) are M <= 32 consecutive rows of one panel, from L2 or L3: fetched into L1 one line per
                 * channel step.  Measured on a Xeon (AVX-512): gradInput 4-9% faster in calls. */
                const float *An;
                if (cend < c1) An = DYp + (q + 1) * RO * CT_PO + row * ct_min(CT_PO, Cout - qb - CT_PO);
                else if (kk + 1 < nk) An = D0 + (row + dk) * w0;
                else An = D0 + (row0 + M) * w0;
                for (int64_t l = 0; l < cnt; l++) {
                    _mm_prefetch((const char *)(An + l * 16), _MM_HINT_T0);
                    __m512 b0 = _mm512_maskz_loadu_ps(k0, B), b1 = _mm512_setzero_ps();
                    if (NV == 2) b1 = _mm512_maskz_loadu_ps(k1, B + 16);
                    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                        __m512 av = _mm512_set1_ps(A[i * CT_PO + l]);
                        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                        if (NV == 2) acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
                    }
                    B += n;
                }
            } else {
                const int64_t W = WQ > 0 ? WQ : wq;
                for (int64_t l = 0; l < cnt; l++) {
                    __m512 b0 = _mm512_maskz_loadu_ps(k0, B), b1 = _mm512_setzero_ps();
                    if (NV == 2) b1 = _mm512_maskz_loadu_ps(k1, B + 16);
                    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                        __m512 av = _mm512_set1_ps(A[i * W + l]);
                        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                        if (NV == 2) acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
                    }
                    B += n;
                }
            }
            c = cend;
        }
    }
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        _mm512_mask_storeu_ps(C + i * ldc, k0, acc[i][0]);
        if (NV == 2) _mm512_mask_storeu_ps(C + i * ldc + 16, k1, acc[i][1]);
    }
}

#define CT_GI512_ARGS n, DYp, RO, row0, dk, nk, c0, c1, Cout, Bp, bk, C, ldc
#define CT_GI512_CASE(MM) \
    case MM: { if (nv == 2) ct_gi_body_512(MM, 2, 0, CT_GI512_ARGS); \
               else ct_gi_body_512(MM, 1, 0, CT_GI512_ARGS); } break;
#define CT_GI512_CASE1(MM) \
    case MM: ct_gi_body_512(MM, 1, 0, CT_GI512_ARGS); break;

static CT_T512 void ct_gi_ukr_512(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk,
                                  int64_t nk, int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t bk,
                                  float *C, int64_t ldc) {
    int nv = n > 16 ? 2 : 1;
    /* full tiles over one narrow panel: constant row strides (no per-row address registers to spill) */
    if (Cout == 2 || Cout == 4 || Cout == 8 || Cout == 16) {
        if (nv == 1 && m == 28) {
            switch (Cout) {
                case 2: ct_gi_body_512(28, 1, 2, CT_GI512_ARGS); return;
                case 4: ct_gi_body_512(28, 1, 4, CT_GI512_ARGS); return;
                case 8: ct_gi_body_512(28, 1, 8, CT_GI512_ARGS); return;
                default: ct_gi_body_512(28, 1, 16, CT_GI512_ARGS); return;
            }
        }
        if (nv == 2 && m == 14) {
            switch (Cout) {
                case 2: ct_gi_body_512(14, 2, 2, CT_GI512_ARGS); return;
                case 4: ct_gi_body_512(14, 2, 4, CT_GI512_ARGS); return;
                case 8: ct_gi_body_512(14, 2, 8, CT_GI512_ARGS); return;
                default: ct_gi_body_512(14, 2, 16, CT_GI512_ARGS); return;
            }
        }
    }
    switch (m) {
        CT_GI512_CASE(1) CT_GI512_CASE(2) CT_GI512_CASE(3) CT_GI512_CASE(4) CT_GI512_CASE(5)
        CT_GI512_CASE(6) CT_GI512_CASE(7) CT_GI512_CASE(8) CT_GI512_CASE(9) CT_GI512_CASE(10)
        CT_GI512_CASE(11) CT_GI512_CASE(12) CT_GI512_CASE(13) CT_GI512_CASE(14)
        /* n <= 16: one vector per row, up to 28 rows (ct_gi_mr) */
        CT_GI512_CASE1(15) CT_GI512_CASE1(16) CT_GI512_CASE1(17) CT_GI512_CASE1(18) CT_GI512_CASE1(19)
        CT_GI512_CASE1(20) CT_GI512_CASE1(21) CT_GI512_CASE1(22) CT_GI512_CASE1(23) CT_GI512_CASE1(24)
        CT_GI512_CASE1(25) CT_GI512_CASE1(26) CT_GI512_CASE1(27) CT_GI512_CASE1(28)
        default: break;
    }
}

/* gw micro-kernel: NK k x M (<= 8) ci x (NV*16 >= n) co, reduction over kc rows.
 * C[kk*ck + i*ldc + j] += sum_{p<kc} A[kk*ak + p*lda + i] * B[p*ldb + j]   (NK consecutive k share the DY rows) */
CT_I512 void ct_gw_body_512(const int NK, const int M, const int NV, int64_t n, int64_t kc, const float *A,
                            int64_t lda, int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc,
                            int64_t ck) {
    __m512 acc[3][8][2];
    __mmask16 k0 = ct_mask16(n), k1 = ct_mask16(n - 16 > 0 ? n - 16 : 0);
    const float *Ak[3];
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
        Ak[kk] = A + kk * ak;
        _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
            acc[kk][i][0] = _mm512_maskz_loadu_ps(k0, C + kk * ck + i * ldc);
            if (NV == 2) acc[kk][i][1] = _mm512_maskz_loadu_ps(k1, C + kk * ck + i * ldc + 16);
        }
    }
    for (int64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_maskz_loadu_ps(k0, B), b1 = _mm512_setzero_ps();
        if (NV == 2) b1 = _mm512_maskz_loadu_ps(k1, B + 16);
        _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
            _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                __m512 av = _mm512_set1_ps(Ak[kk][p * lda + i]);
                acc[kk][i][0] = _mm512_fmadd_ps(av, b0, acc[kk][i][0]);
                if (NV == 2) acc[kk][i][1] = _mm512_fmadd_ps(av, b1, acc[kk][i][1]);
            }
        }
        B += ldb;
    }
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
        _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
            _mm512_mask_storeu_ps(C + kk * ck + i * ldc, k0, acc[kk][i][0]);
            if (NV == 2) _mm512_mask_storeu_ps(C + kk * ck + i * ldc + 16, k1, acc[kk][i][1]);
        }
    }
}

#define CT_GW512_CASE(MM) \
    case MM: { if (nv == 2) ct_gw_body_512(1, MM, 2, n, kc, A, lda, ak, B, ldb, C, ldc, ck); \
               else if (nk == 3) ct_gw_body_512(3, MM, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); \
               else if (nk == 2) ct_gw_body_512(2, MM, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); \
               else ct_gw_body_512(1, MM, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); } break;

/* gw micro-kernel for a full 8-ci panel and at most 8 co (narrow channels): the plain kernel would fill only
 * n of each vector's 16 lanes, so here a vector holds 8 ci x a PAIR of co: lane h*8 + i is (ci i, co 2cq + h).
 * Per row: the X row (8 ci) is broadcast to both halves straight from memory, the DY row is loaded once and
 * spread into the NCQ co pairs by a permute shared by the NK k.  Each lane is still the one fp32 FMA chain of
 * its (k, ci, co) over the rows in ascending order: bitwise the plain kernel's result.
 * C[kk*ck + i*ldc + j] += sum_{p<kc} A[kk*ak + p*lda + i] * B[p*ldb + j]   (i < 8, j < n <= 2*NCQ) */
CT_I512 void ct_gw_pair_512(const int NK, const int NCQ, int64_t n, int64_t kc, const float *A, int64_t lda,
                            int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    __m512 acc[3][4];
    __m512i idx[4], off[4];
    __mmask16 keep[4];
    const __m512i half = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);   /* h of each lane */
    const __m512i ci = _mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0);     /* i of each lane */
    const __mmask16 kn = ct_mask16(n);
    const float *Ak[3];
    _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++) {
        idx[cq] = _mm512_add_epi32(_mm512_set1_epi32(2 * cq), half);                 /* co of each lane */
        keep[cq] = _mm512_cmplt_epi32_mask(idx[cq], _mm512_set1_epi32((int)n));
        off[cq] = _mm512_add_epi32(_mm512_mullo_epi32(ci, _mm512_set1_epi32((int)ldc)), idx[cq]);
    }
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
        Ak[kk] = A + kk * ak;
        _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++)
            acc[kk][cq] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), keep[cq], off[cq], C + kk * ck, 4);
    }
    for (int64_t p = 0; p < kc; p++) {
        __m512 b = _mm512_maskz_loadu_ps(kn, B), bv[4];
        _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++) bv[cq] = _mm512_permutexvar_ps(idx[cq], b);
        _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
            __m512 a = _mm512_broadcast_f32x8(_mm256_loadu_ps(Ak[kk] + p * lda));
            _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++)
                acc[kk][cq] = _mm512_fmadd_ps(a, bv[cq], acc[kk][cq]);
        }
        B += ldb;
    }
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++)
        _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++)
            _mm512_mask_i32scatter_ps(C + kk * ck, keep[cq], off[cq], acc[kk][cq], 4);
}

#define CT_GWP512(NK) \
    switch (ncq) { case 1: ct_gw_pair_512(NK, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; \
                   case 2: ct_gw_pair_512(NK, 2, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; \
                   case 3: ct_gw_pair_512(NK, 3, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; \
                   default: ct_gw_pair_512(NK, 4, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; }

/* m == 8, 1 <= n <= 8, nk in 1..3 */
static CT_T512 void ct_gw_pairs_512(int64_t nk, int64_t n, int64_t kc, const float *A, int64_t lda, int64_t ak,
                                    const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    int ncq = (int)((n + 1) / 2);
    if (nk == 3) { CT_GWP512(3) } else if (nk == 2) { CT_GWP512(2) } else { CT_GWP512(1) }
}

/* nk in 1..3, and nk == 1 whenever n > 16 */
static CT_T512 void ct_gw_ukr_512(int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda,
                                  int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    int nv = n > 16 ? 2 : 1;
    switch (m) {
        CT_GW512_CASE(1) CT_GW512_CASE(2) CT_GW512_CASE(3) CT_GW512_CASE(4)
        CT_GW512_CASE(5) CT_GW512_CASE(6) CT_GW512_CASE(7) CT_GW512_CASE(8)
        default: break;
    }
}

/* the b-major X pack's narrow rows (ct_ukr.walk_rows): one masked load and store per row */
static CT_T512 void ct_walk_rows_512(const char *base, int64_t s0, int64_t s1, int64_t T, int64_t t, int64_t b,
                                     int64_t nr, int64_t n, float *d) {
    __mmask16 k = ct_mask16(n);
    for (int64_t i = 0; i < nr; i++) {
        _mm512_mask_storeu_ps(d + i * n, k, _mm512_maskz_loadu_ps(k, base + t * s0 + b * s1));
        if (++t == T) { t = 0; b++; }
    }
}

/* the same sums, 16 (then 16 more) channels per vector: each lane is the scalar chain of its channel */
static CT_T512 void ct_gb_partials_512(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
    enum { NS = CT_PR / CT_GBR };
    __m512 g[NS][2];
    __mmask16 k0 = ct_mask16(wq), k1 = ct_mask16(wq > 16 ? wq - 16 : 0);
    int64_t S = ct_cdiv(nr, CT_GBR), full = nr / CT_GBR;
    for (int s = 0; s < NS; s++) g[s][0] = g[s][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < CT_GBR; i++) {
        for (int64_t s = 0; s < full; s++) {
            const float *row = v + (s * CT_GBR + i) * wq;
            g[s][0] = _mm512_add_ps(g[s][0], _mm512_maskz_loadu_ps(k0, row));
            if (wq > 16) g[s][1] = _mm512_add_ps(g[s][1], _mm512_maskz_loadu_ps(k1, row + 16));
        }
    }
    for (int64_t i = full * CT_GBR; i < nr; i++) {
        g[full][0] = _mm512_add_ps(g[full][0], _mm512_maskz_loadu_ps(k0, v + i * wq));
        if (wq > 16) g[full][1] = _mm512_add_ps(g[full][1], _mm512_maskz_loadu_ps(k1, v + i * wq + 16));
    }
    for (int64_t s = 0; s < S; s++) {
        _mm512_mask_storeu_ps(out + s * ostride, k0, g[s][0]);
        if (wq > 16) _mm512_mask_storeu_ps(out + s * ostride + 16, k1, g[s][1]);
    }
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
/* The permute network of the 8-channel transposes below: 8 vectors a[] in, out[m] (m = 4h + 2s + t) out, by
 * three rounds of two-source permutes with the index tables tb[round][2][16]: round 1 pairs a[2g], a[2g+1] into
 * R[g][h], round 2 pairs R[2q][h], R[2q+1][h] into S[q][h][s], round 3 pairs S[0][h][s], S[1][h][s] into
 * out[4h + 2s + t].  What each vector holds is the tables' business. */
CT_I512 void ct_perm8_512(const __m512 *a, const __m512i tb[3][2], __m512 *out) {
    __m512 R[4][2], S[2][2][2];
    _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++)
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            R[g][h] = _mm512_permutex2var_ps(a[2 * g], tb[0][h], a[2 * g + 1]);
    _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++)
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            _Pragma("GCC unroll 2") for (int s = 0; s < 2; s++)
                S[q][h][s] = _mm512_permutex2var_ps(R[2 * q][h], tb[1][s], R[2 * q + 1][h]);
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
        _Pragma("GCC unroll 2") for (int s = 0; s < 2; s++)
            _Pragma("GCC unroll 2") for (int t = 0; t < 2; t++)
                out[4 * h + 2 * s + t] = _mm512_permutex2var_ps(S[0][h][s], tb[2][t], S[1][h][s]);
}
CT_I512 void ct_perm8_tables(const int32_t t[3][2][16], __m512i tb[3][2]) {
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 2; k++) tb[r][k] = _mm512_loadu_si512(t[r][k]);
}
/* 8 channels, channel-major d[c*ld + i] (16 rows i a vector) -> row-major v[i*8 + c]: the permute network
 * instead of gathers (a gather from 8 rows ld apart touches 16 cache lines; this runs at about twice the speed
 * from the L1 tile of gradInput's chains).  Round 1 pairs channels (2g, 2g+1) into [row][2] for rows 8h..8h+7;
 * round 2 pairs those into [row][4] for rows 4s..4s+3 of the half; round 3 into [row][8], 2 rows a vector
 * (out[m]: rows 2m, 2m + 1).  The index tables are built from these definitions once per call. */
CT_I512 void ct_nar_out8_512(float *v, int64_t full, const float *d, int64_t ld) {
    int32_t t[3][2][16];
    for (int h = 0; h < 2; h++)
        for (int r8 = 0; r8 < 8; r8++)
            for (int c2 = 0; c2 < 2; c2++) t[0][h][r8 * 2 + c2] = c2 * 16 + 8 * h + r8;
    for (int s = 0; s < 2; s++)
        for (int r4 = 0; r4 < 4; r4++)
            for (int c4 = 0; c4 < 4; c4++) t[1][s][r4 * 4 + c4] = (c4 >> 1) * 16 + (4 * s + r4) * 2 + (c4 & 1);
    for (int u = 0; u < 2; u++)
        for (int r2 = 0; r2 < 2; r2++)
            for (int c8 = 0; c8 < 8; c8++) t[2][u][r2 * 8 + c8] = (c8 >> 2) * 16 + (2 * u + r2) * 4 + (c8 & 3);
    __m512i tb[3][2];
    ct_perm8_tables(t, tb);
    for (int64_t i = 0; i < full; i += 16) {
        __m512 a[8], o[8];
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) a[c] = _mm512_loadu_ps(d + c * ld + i);
        ct_perm8_512(a, tb, o);
        _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) _mm512_storeu_ps(v + (i + 2 * m) * 8, o[m]);
    }
}
/* The inverse: n runs of 16 rows of 8 channels, run i at v + i*rs, into d[c*ld + 16*i + r].  a[q] holds rows 2q,
 * 2q+1; round 1 gives channels 4h..4h+3 of rows 4g..4g+3 as [channel][row], round 2 channels 4h+2s, 4h+2s+1 of
 * rows 8q..8q+7, round 3 channel m = 4h+2s+t of the 16 rows. */
CT_I512 void ct_nar_in8_512(const float *v, int64_t rs, int64_t n, float *d, int64_t ld) {
    int32_t t[3][2][16];
    for (int h = 0; h < 2; h++)
        for (int cc = 0; cc < 4; cc++)
            for (int rr = 0; rr < 4; rr++) t[0][h][cc * 4 + rr] = rr * 8 + 4 * h + cc;
    for (int s = 0; s < 2; s++)
        for (int u = 0; u < 2; u++)
            for (int r8 = 0; r8 < 8; r8++) t[1][s][u * 8 + r8] = (r8 >> 2) * 16 + (2 * s + u) * 4 + (r8 & 3);
    for (int u = 0; u < 2; u++)
        for (int r = 0; r < 16; r++) t[2][u][r] = (r >> 3) * 16 + u * 8 + (r & 7);
    __m512i tb[3][2];
    ct_perm8_tables(t, tb);
    for (int64_t i = 0; i < n; i++) {
        __m512 a[8], o[8];
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) a[q] = _mm512_loadu_ps(v + i * rs + 16 * q);
        ct_perm8_512(a, tb, o);
        _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) _mm512_storeu_ps(d + m * ld + 16 * i, o[m]);
    }
}
/* 2 or 4 channels, by two-source permutes as above.  In: n runs of 16 rows [16][C] (run i at v + i*rs) into
 * d[c*ld + 16*i + r].  C = 2: channel c of the 16 rows = floats 2r + c of the run's two vectors.  C = 4: round 1
 * gives channels 2h, 2h+1 of rows 8p..8p+7 as [channel][row] from the run's vectors 2p, 2p+1, round 2 channel
 * 2h+u of the 16 rows. */
CT_I512 void ct_nar_in_small_512(const float *v, int64_t rs, int64_t n, int64_t C, float *d, int64_t ld) {
    int32_t t[2][2][16];
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 16; l++) {
            t[0][h][l] = C == 2 ? 2 * l + h : (l & 7) < 4 ? (l & 7) * 4 + 2 * h + (l >> 3)
                                                          : 16 + ((l & 7) - 4) * 4 + 2 * h + (l >> 3);
            t[1][h][l] = (l >> 3) * 16 + h * 8 + (l & 7);
        }
    __m512i i0[2], i1[2];
    for (int h = 0; h < 2; h++) {
        i0[h] = _mm512_loadu_si512(t[0][h]);
        i1[h] = _mm512_loadu_si512(t[1][h]);
    }
    for (int64_t i = 0; i < n; i++) {
        const float *r = v + i * rs;
        if (C == 2) {
            __m512 a0 = _mm512_loadu_ps(r), a1 = _mm512_loadu_ps(r + 16);
            for (int c = 0; c < 2; c++) _mm512_storeu_ps(d + c * ld + 16 * i, _mm512_permutex2var_ps(a0, i0[c], a1));
            continue;
        }
        __m512 a[4], R[2][2];
        for (int q = 0; q < 4; q++) a[q] = _mm512_loadu_ps(r + 16 * q);
        for (int p = 0; p < 2; p++)
            for (int h = 0; h < 2; h++) R[p][h] = _mm512_permutex2var_ps(a[2 * p], i0[h], a[2 * p + 1]);
        for (int h = 0; h < 2; h++)
            for (int u = 0; u < 2; u++)
                _mm512_storeu_ps(d + (2 * h + u) * ld + 16 * i, _mm512_permutex2var_ps(R[0][h], i1[u], R[1][h]));
    }
}
/* The inverse: d[c*ld + i] (16 rows a vector) -> row-major v[i*C + c], rows [0, full).  C = 2: rows 8m..8m+7 as
 * [row][2] from the two channels.  C = 4: round 1 as C = 2 for the channel pairs (0, 1) and (2, 3), round 2 rows
 * 4q..4q+3 as [row][4] from the pairs' vectors of rows 8(q/2).. */
CT_I512 void ct_nar_out_small_512(float *v, int64_t full, const float *d, int64_t ld, int64_t C) {
    int32_t t[2][2][16];
    for (int m = 0; m < 2; m++)
        for (int l = 0; l < 16; l++) {
            t[0][m][l] = (l & 1) * 16 + 8 * m + (l >> 1);
            t[1][m][l] = ((l & 3) >> 1) * 16 + (m * 4 + (l >> 2)) * 2 + (l & 1);
        }
    __m512i i0[2], i1[2];
    for (int m = 0; m < 2; m++) {
        i0[m] = _mm512_loadu_si512(t[0][m]);
        i1[m] = _mm512_loadu_si512(t[1][m]);
    }
    for (int64_t i = 0; i < full; i += 16) {
        if (C == 2) {
            __m512 b0 = _mm512_loadu_ps(d + i), b1 = _mm512_loadu_ps(d + ld + i);
            for (int m = 0; m < 2; m++) _mm512_storeu_ps(v + i * 2 + 16 * m, _mm512_permutex2var_ps(b0, i0[m], b1));
            continue;
        }
        __m512 b[4], S[2][2];
        for (int c = 0; c < 4; c++) b[c] = _mm512_loadu_ps(d + c * ld + i);
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 2; m++) S[h][m] = _mm512_permutex2var_ps(b[2 * h], i0[m], b[2 * h + 1]);
        for (int q = 0; q < 4; q++)
            _mm512_storeu_ps(v + i * 4 + 16 * q, _mm512_permutex2var_ps(S[0][q >> 1], i1[q & 1], S[1][q >> 1]));
    }
}
static CT_T512 void ct_nar_512(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t full = nr / 16 * 16;
    if (to && C == 8) {
        ct_nar_in8_512(v, 128, full / 16, d, ld);
    } else if (to && (C == 2 || C == 4)) {
        ct_nar_in_small_512(v, 16 * C, full / 16, C, d, ld);
    } else if (to) {
        __m512i idx = _mm512_mullo_epi32(iota, _mm512_set1_epi32((int)C));
        for (int64_t i = 0; i < full; i += 16)
            for (int64_t c = 0; c < C; c++)
                _mm512_storeu_ps(d + c * ld + i, _mm512_i32gather_ps(idx, v + i * C + c, 4));
    } else if (C == 8) {
        ct_nar_out8_512(v, full, d, ld);
    } else if (C == 2 || C == 4) {
        ct_nar_out_small_512(v, full, d, ld, C);
    } else {
        /* floats e = 16m + j of a run of 16 rows (16*C floats): row e / C, channel e % C */
        __m512i idx[CT_NW];
        for (int64_t m = 0; m < C; m++) {
            int32_t t[16];
            for (int j = 0; j < 16; j++) t[j] = (int32_t)(((16 * m + j) % C) * ld + (16 * m + j) / C);
            idx[m] = _mm512_loadu_si512(t);
        }
        for (int64_t i = 0; i < full; i += 16)
            for (int64_t m = 0; m < C; m++)
                _mm512_storeu_ps(v + i * C + 16 * m, _mm512_i32gather_ps(idx[m], d + i, 4));
    }
    ct_nar_port(to, v + full * C, nr - full, C, d + full, ld);
}
/* n rows of 16 items, row i at v + i*rs ([16][C] fp32), into d[c*ld + 16*i + l]: one gather a channel (8
 * channels: permutes) */
static CT_T512 void ct_gwn_px_512(const float *v, int64_t rs, int64_t n, int64_t C, float *d, int64_t ld) {
    if (C == 8) { ct_nar_in8_512(v, rs, n, d, ld); return; }
    if (C == 2 || C == 4) { ct_nar_in_small_512(v, rs, n, C, d, ld); return; }
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)C));
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            _mm512_storeu_ps(d + c * ld + 16 * i, _mm512_i32gather_ps(idx, v + i * rs + c, 4));
}

/* AVX-512: 16 items a vector; MI ci x MO co block sums in registers (up to 16), the chains in D (one load / add /
 * store per block).  FULL: all 16 lanes valid, plain loads and stores (the masked ones made gradWeight about 20%
 * slower at (512, 32, 8, 8, 3, 1)) */
CT_I512 void ct_gwn_body_512(const int MI, const int MO, const int FULL, const float *X, int64_t xo, int64_t xs,
                             int64_t ldx, const float *Y, int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0,
                             __mmask16 m, float *D, int64_t ldi, int64_t ldo) {
    __m512 s[4][4], x[4], y[4];
    for (int64_t t = ta; t < tz;) {
        int64_t te = ct_min(tz, (t / k0 + 1) * k0);
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm512_setzero_ps();
        for (; t < te; t++) {
            const float *xp = X + xo + t * xs, *yp = Y + t * B;
            _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
                x[i] = FULL ? _mm512_loadu_ps(xp + i * ldx) : _mm512_maskz_loadu_ps(m, xp + i * ldx);
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++)
                y[j] = FULL ? _mm512_loadu_ps(yp + j * ldy) : _mm512_maskz_loadu_ps(m, yp + j * ldy);
            _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
                _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm512_fmadd_ps(x[i], y[j], s[i][j]);
        }
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) {
                float *d = D + i * ldi + j * ldo;
                if (FULL) _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), s[i][j]));
                else _mm512_mask_storeu_ps(d, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, d), s[i][j]));
            }
    }
}
static CT_T512 void ct_gwn_512(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                               int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D,
                               int64_t ldi, int64_t ldo) {
    __mmask16 m = ct_mask16(nb);
    switch (mi * 8 + mo) {
#define CT_GWN512(MI, MO) \
        case MI * 8 + MO: \
            if (nb == 16) ct_gwn_body_512(MI, MO, 1, X, xo, xs, ldx, Y, ldy, B, ta, tz, k0, m, D, ldi, ldo); \
            else ct_gwn_body_512(MI, MO, 0, X, xo, xs, ldx, Y, ldy, B, ta, tz, k0, m, D, ldi, ldo); \
            break;
        CT_GWN512(1, 1) CT_GWN512(1, 2) CT_GWN512(1, 3) CT_GWN512(1, 4)
        CT_GWN512(2, 1) CT_GWN512(2, 2) CT_GWN512(2, 3) CT_GWN512(2, 4)
        CT_GWN512(3, 1) CT_GWN512(3, 2) CT_GWN512(3, 3) CT_GWN512(3, 4)
        CT_GWN512(4, 1) CT_GWN512(4, 2) CT_GWN512(4, 3) CT_GWN512(4, 4)
#undef CT_GWN512
        default: break;
    }
}

/* lanes [a, z) of 16 */
CT_I512 __mmask16 ct_mask_range16(int64_t a, int64_t z) {
    a = ct_max(0, ct_min(16, a));
    z = ct_max(0, ct_min(16, z));
    return z > a ? (__mmask16)(ct_mask16(z) & ~ct_mask16(a)) : (__mmask16)0;
}
/* one block (g, k) for MI ci of 64 rows: block sums in registers, the chains in an L1 tile c[MI][64] */
CT_I512 void ct_gin_blk_512(const int MI, const int FULL, const float *dy, int64_t RO, const float *w, int64_t Cin,
                            int64_t lo, int64_t hi, const __mmask16 *m, float *c) {
    __m512 s[4][4], y[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) s[i][v] = _mm512_setzero_ps();
    for (int64_t co = lo; co < hi; co++) {
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++)
            y[v] = FULL ? _mm512_loadu_ps(dy + co * RO + 16 * v) : _mm512_maskz_loadu_ps(m[v], dy + co * RO + 16 * v);
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++) {
            __m512 wv = _mm512_set1_ps(w[co * Cin + i]);
            _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) s[i][v] = _mm512_fmadd_ps(y[v], wv, s[i][v]);
        }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
            __m512 cv = _mm512_load_ps(c + 64 * i + 16 * v);
            _mm512_store_ps(c + 64 * i + 16 * v, FULL ? _mm512_add_ps(cv, s[i][v]) : _mm512_mask_add_ps(cv, m[v], cv, s[i][v]));
        }
}
/* rows [r0, r0 + nr), every ci, 64 rows at a time; chain (ci, row l) to D[ci*ldd + l - r0] */
static CT_T512 void ct_gin_512(const ct_nar_gi *P, int64_t r0, int64_t nr, float *D, int64_t ldd) {
    int64_t K = P->K, Cout = P->Cout, Cin = P->Cin, k0 = P->k0, RO = P->nlo, nG = ct_cdiv(Cout, k0);
    int64_t rend = r0 + nr;
    float c[CT_NW * 64] __attribute__((aligned(64)));
    for (int64_t r = r0; r < rend; r += 64) {
        for (int64_t e = 0; e < Cin * 64; e++) c[e] = P->gin_start ? P->gin_start[e / 64] : 0.0f;
        for (int64_t g = 0; g < nG; g++) {
            int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
            for (int64_t k = 0; k < K; k++) {
                int64_t va, vz;
                ct_gin_valid(P, k, rend, &va, &vz);
                __mmask16 m[4];
                int any = 0, full = 1;
                for (int v = 0; v < 4; v++) {
                    m[v] = ct_mask_range16(va - (r + 16 * v), vz - (r + 16 * v));
                    any |= m[v] != 0;
                    full &= m[v] == 0xFFFF;
                }
                if (!any) continue;
                const float *w = P->Wp + (ct_wblk(lo, hi, K, k) - lo) * Cin;
                const float *dy = P->DYc + r + ct_gin_shift(P, k);
                for (int64_t ci = 0; ci < Cin; ci += 4) {
                    /* every row valid: plain loads and adds (no masks) */
#define CT_GINB512(MI) \
                    if (full) ct_gin_blk_512(MI, 1, dy, RO, w + ci, Cin, lo, hi, m, c + 64 * ci); \
                    else ct_gin_blk_512(MI, 0, dy, RO, w + ci, Cin, lo, hi, m, c + 64 * ci); \
                    break;
                    switch (ct_min(4, Cin - ci)) {
                        case 4: CT_GINB512(4)
                        case 3: CT_GINB512(3)
                        case 2: CT_GINB512(2)
                        default: CT_GINB512(1)
                    }
#undef CT_GINB512
                }
            }
        }
        for (int64_t ci = 0; ci < Cin; ci++)
            for (int v = 0; v < 4; v++)
                _mm512_mask_storeu_ps(D + ci * ldd + (r - r0) + 16 * v, ct_mask_range16(0, rend - (r + 16 * v)),
                                      _mm512_load_ps(c + 64 * ci + 16 * v));
    }
}


/* ------------------------------------------------------------------------------------------------ */
/* the table                                                                                        */
/* ------------------------------------------------------------------------------------------------ */
static CT_T512 void ct_decode_row_x512(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_HIF8) ct_decode_row_port(src, stride, dt, n, out);      /* a table lookup per code */
    else ct_decode_row_512(src, stride, dt, n, out);
}

/* nk in 1..3 with the register-blocked kernels, else one k at a time */
static CT_T512 void ct_gw_seq_512(int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, int64_t ak,
                                  const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    if (m == CT_PX && n <= 8 && nk <= 3 && ct_gw_pairs_on) {
        ct_gw_pairs_512(nk, n, kc, A, lda, ak, B, ldb, C, ldc, ck);
        return;
    }
    if (nk <= 3 && (nk == 1 || n <= 16)) {
        ct_gw_ukr_512(nk, m, n, kc, A, lda, ak, B, ldb, C, ldc, ck);
        return;
    }
    for (int64_t kk = 0; kk < nk; kk++) ct_gw_ukr_512(1, m, n, kc, A + kk * ak, lda, 0, B, ldb, C + kk * ck, ldc, 0);
}

static CT_T512 void ct_gwc_x512(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B,
                                int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
                                int64_t ldc, int cin, ct_gw_pf *F) {
    if (form == CT_ACC_CUBE) ct_gwc_ukr_512(m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);
    else ct_gwc_gen(form, m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin);
}

static CT_T512 void ct_gic_rows_x512(int form, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,
                                     int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0,
                                     int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    if (form == CT_ACC_CUBE) ct_gic_rows_512(i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
    else ct_gic_rows_gen(form, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}

/* fp32 NaNs to CT_NAN_F32, 16 lanes at a time (a store only where a vector holds one); other dtypes generic */
static CT_T512 void ct_canon_nan_512(char *dst, int64_t n, int dt) {
    if (dt != CT_DT_F32) { ct_canon_nan_port(dst, n, dt); return; }
    float *v = (float *)dst;
    const __m512 qnan = _mm512_castsi512_ps(_mm512_set1_epi32((int)CT_NAN_F32));
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = ct_mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(k, v + i);
        __mmask16 nan = _mm512_mask_cmp_ps_mask(k, x, x, _CMP_UNORD_Q);
        if (nan) _mm512_mask_storeu_ps(v + i, nan, qnan);
    }
}

int ct_ukr_init_avx512(ct_ukr *U, const ct_ukr_opts *o) {
    ct_gw_pairs_on = o->gw_pairs;
    ct_bcast_on = o->bcast > 0;
    *U = (ct_ukr){
        .name = "avx512",
        .gi_mr_narrow = 28, .gi_mr_wide = 14, .gwn_mh = 4, .gwn_mw = 4, .narrow_gi_max_cin = CT_NW, .gwc_pair_n = 16,
        .decode_row = ct_decode_row_x512, .walk_rows = ct_walk_rows_512, .round_row = ct_round_row_512,
        .store_row = ct_store_row_512, .canon_nan = ct_canon_nan_512, .gb_partials = ct_gb_partials_512,
        .gi_seq = ct_gi_ukr_512, .gw_seq = ct_gw_seq_512,
        .gwc = ct_gwc_x512, .gwc_pair = ct_gwc_pair_512, .gic_rows = ct_gic_rows_x512,
        .nar_transpose = ct_nar_512, .gwn_px = ct_gwn_px_512, .gwn = ct_gwn_512, .gin = ct_gin_512,
    };
    return 0;
}

#else /* not x86-64 with GCC's vector extensions */

int ct_ukr_init_avx512(ct_ukr *U, const ct_ukr_opts *o) { (void)U; (void)o; return -1; }

#endif
