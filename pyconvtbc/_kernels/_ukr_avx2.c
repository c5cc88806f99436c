/* _ukr_avx2.c: the AVX2 + FMA + F16C micro-kernels and their table (_ukr.h).
 *
 * Each function carries its target attribute (CT_T256 / CT_I256), so this file compiles with the package's
 * common flags and runs only where ct_ukr_select picks it.  Other architectures compile it to the stub at the end.
 */
#include "_ukr.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PYCONVTBC_NO_SIMD)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "_fpround.h"
#include "_ukr_generic.h"

#define CT_T256 __attribute__((target("avx2,fma,f16c")))
#define CT_I256 static inline __attribute__((always_inline, target("avx2,fma,f16c")))

/* Rows per tile of the cube gradInput / forward kernels: 4 or 6, set by ct_ukr_init_avx2 (ct_ukr_opts.gi_rows).
 * 4 on AMD (measured on Zen 1: 6-row tiles, 12 block sums with all 12 chains in L1, ran at 75-78% of the FMA
 * peak; 4-row tiles, 8 block sums with 3-4 of their 8 chains kept in registers by the compiler, at 83%), 6
 * elsewhere (Intel's AVX2 cores need 8 or more independent FMA chains in flight: on Sapphire Rapids, the AVX2
 * path's gradInput ran 1-2% faster with 6 rows than with 4).  No result depends on it. */
static int ct_gic256_rows = 6;
static inline int ct_gic256_m(void) { return ct_gic256_rows; }

static const int32_t ct_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
CT_I256 __m256i ct_mask8(int64_t n) {   /* first n (0..8) lanes */
    if (n >= 8) n = 8;
    if (n < 0) n = 0;
    return _mm256_loadu_si256((const __m256i *)(ct_mask_tab + 8 - n));
}
/* loads / stores of the first n (0..8) lanes; plain ones when all 8 are wanted: AMD's masked loads and stores
 * are slow (on a Zen 1 EPYC the sequential gradInput kernel ran 14 GFLOP/s with a masked load of its weight
 * rows, 30 with plain ones), and a masked store followed by a load of the same line stalls */
CT_I256 __m256 ct_ld8(const float *p, int64_t n, __m256i m) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
CT_I256 void ct_st8(float *p, int64_t n, __m256i m, __m256 v) {
    if (n >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, m, v);
}

CT_I256 __m256 ct_round_f16_256(__m256 v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
CT_I256 __m256i ct_bf16_bits_256(__m256 v) {
    __m256i b = _mm256_castps_si256(v);
    __m256i u = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
    /* u > 0x7F800000 as signed compare is fine: u is non-negative */
    __m256i nan = _mm256_cmpgt_epi32(u, _mm256_set1_epi32(0x7F800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    __m256i qn = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    return _mm256_and_si256(_mm256_blendv_epi8(r, qn, nan), _mm256_set1_epi32(0xFFFF));
}
CT_I256 __m256 ct_round_bf16_256(__m256 v) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(ct_bf16_bits_256(v), 16));
}
CT_I256 __m256 ct_round_hf32_256(__m256 v, int d, int hrnd) {
    __m256i b = _mm256_castps_si256(v);
    __m256i u = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i s = _mm256_andnot_si256(_mm256_set1_epi32(0x7FFFFFFF), b);
    __m256i nan = _mm256_cmpgt_epi32(u, _mm256_set1_epi32(0x7F800000));
    __m128i dv = _mm_cvtsi32_si128(d);
    __m256i add = _mm256_set1_epi32((int)(1u << (d - 1)));
    if (hrnd == CT_HF32_NEAREST_EVEN) {
        __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(u, dv), _mm256_set1_epi32(1));
        add = _mm256_add_epi32(_mm256_sub_epi32(add, _mm256_set1_epi32(1)), lsb);
    }
    __m256i r = _mm256_sll_epi32(_mm256_srl_epi32(_mm256_add_epi32(u, add), dv), dv);
    r = _mm256_or_si256(r, s);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, b, nan));
}

static CT_T256 void ct_decode_row_256(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_F32 && stride == 4) { memcpy(out, src, (size_t)n * 4); return; }
    if (stride == 2 && (dt == CT_DT_F16 || dt == CT_DT_BF16)) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
            __m256i h32 = _mm256_cvtepu16_epi32(h);
            __m256 f;
            if (dt == CT_DT_F16) {
                f = _mm256_cvtph_ps(h);   /* patch NaN/Inf lanes: keep signalling NaNs as the scalar codec does */
                __m256i sp = _mm256_cmpeq_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x7C00)),
                                                _mm256_set1_epi32(0x7C00));
                if (!_mm256_testz_si256(sp, sp)) {
                    __m256i bits = _mm256_or_si256(
                        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x8000)), 16),
                                        _mm256_set1_epi32(0x7F800000)),
                        _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x3FF)), 13));
                    f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(sp));
                }
            } else f = _mm256_castsi256_ps(_mm256_slli_epi32(h32, 16));
            _mm256_storeu_ps(out + i, f);
        }
        for (; i < n; i++) out[i] = ct_load1(src + 2 * i, dt);
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = ct_load1(src + i * stride, dt);
}

static CT_T256 void ct_round_row_256(float *v, int64_t n, int compute, int hbits, int hrnd) {
    if (compute == CT_C_FP32) return;
    if (compute == CT_C_HF32 && (hbits < 1 || hbits > 22)) return;
    for (int64_t i = 0; i < n; i += 8) {
        __m256i k = ct_mask8(n - i);
        __m256 x = ct_ld8(v + i, n - i, k);
        if (compute == CT_C_HF32) x = ct_round_hf32_256(x, 23 - hbits, hrnd);
        else if (compute == CT_C_FP16) x = ct_round_f16_256(x);
        else x = ct_round_bf16_256(x);
        ct_st8(v + i, n - i, k, x);
    }
}

static CT_T256 void ct_store_row_256(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd,
                                     int sat) {
    switch (dt) {                                            /* by class: 4- and 2-byte floats here */
        case CT_DT_F32: case CT_DT_F16: case CT_DT_BF16: break;
        default: ct_store_row_port(acc, n, dst, dt, pre, hif8_rnd, sat); return;   /* 8-bit codes (others: none) */
    }
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(acc + i);
        if (pre == CT_C_FP16) x = ct_round_f16_256(x);
        else if (pre == CT_C_BF16) x = ct_round_bf16_256(x);
        if (dt == CT_DT_F32) _mm256_storeu_ps((float *)dst + i, x);
        else if (dt == CT_DT_F16)
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + i),
                             _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        else {    /* CT_DT_BF16 */
            __m256i b = ct_bf16_bits_256(x);
            __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), p);
        }
    }
    if (i < n) ct_store_row_port(acc + i, n - i, dst + (int64_t)ct_dt_size(dt) * i, dt, pre, hif8_rnd, sat);
}

/* gi: M (<= 6) rows x n (<= 16) columns */
CT_I256 void ct_gi_body_256(const int M, const int NV, int64_t n, const float *DYp, int64_t RO, int64_t row0,
                            int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t ldb, float *C,
                            int64_t ldc) {
    __m256 acc[6][2];
    __m256i k0 = ct_mask8(n), k1 = ct_mask8(n - 8);
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        acc[i][0] = ct_ld8(C + i * ldc, n, k0);
        if (NV == 2) acc[i][1] = ct_ld8(C + i * ldc + 8, n - 8, k1);
    }
    const float *B = Bp;
    int64_t c = c0;
    while (c < c1) {
        int64_t q = c / CT_PO, qb = q * CT_PO;
        int64_t wq = ct_min(CT_PO, Cout - qb);
        int64_t cend = ct_min(c1, qb + wq);
        int64_t cnt = cend - c;
        const float *A = DYp + q * RO * CT_PO + row0 * wq + (c - qb);
        for (int64_t l = 0; l < cnt; l++) {
            __m256 b0 = ct_ld8(B, n, k0), b1 = _mm256_setzero_ps();
            if (NV == 2) b1 = ct_ld8(B + 8, n - 8, k1);
            _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                __m256 a = _mm256_broadcast_ss(A + i * wq + l);
                acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
                if (NV == 2) acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            }
            B += ldb;
        }
        c = cend;
    }
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        ct_st8(C + i * ldc, n, k0, acc[i][0]);
        if (NV == 2) ct_st8(C + i * ldc + 8, n - 8, k1, acc[i][1]);
    }
}

#define CT_GI256_CASE(MM) \
    case MM: { if (nv == 2) ct_gi_body_256(MM, 2, nn, DYp, RO, row0, c0, c1, Cout, Bp + j0, n, C + j0, ldc); \
               else ct_gi_body_256(MM, 1, nn, DYp, RO, row0, c0, c1, Cout, Bp + j0, n, C + j0, ldc); } break;

static CT_T256 void ct_gi_ukr_256(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t c0,
                                  int64_t c1, int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        int64_t nn = ct_min(16, n - j0);
        int nv = nn > 8 ? 2 : 1;
        switch (m) {
            CT_GI256_CASE(1) CT_GI256_CASE(2) CT_GI256_CASE(3)
            CT_GI256_CASE(4) CT_GI256_CASE(5) CT_GI256_CASE(6)
            default: break;
        }
    }
}

/* gw: M (<= 4) ci x n (<= 16) co */
CT_I256 void ct_gw_body_256(const int M, const int NV, int64_t n, int64_t kc, const float *A, int64_t lda,
                            const float *B, int64_t ldb, float *C, int64_t ldc) {
    __m256 acc[4][2];
    __m256i k0 = ct_mask8(n), k1 = ct_mask8(n - 8);
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        acc[i][0] = ct_ld8(C + i * ldc, n, k0);
        if (NV == 2) acc[i][1] = ct_ld8(C + i * ldc + 8, n - 8, k1);
    }
    for (int64_t p = 0; p < kc; p++) {
        __m256 b0 = ct_ld8(B, n, k0), b1 = _mm256_setzero_ps();
        if (NV == 2) b1 = ct_ld8(B + 8, n - 8, k1);
        _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
            __m256 a = _mm256_broadcast_ss(A + i);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            if (NV == 2) acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
        }
        A += lda; B += ldb;
    }
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        ct_st8(C + i * ldc, n, k0, acc[i][0]);
        if (NV == 2) ct_st8(C + i * ldc + 8, n - 8, k1, acc[i][1]);
    }
}

/* gw: M (<= 3) ci x 32 co (a whole DY panel): 12 independent chains (4 x 16 has 8, too few to hide the FMA
 * latency on two FMA pipes), 4 loads and 3 broadcasts per row */
CT_I256 void ct_gw_body32_256(const int M, int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb,
                              float *C, int64_t ldc) {
    __m256 acc[3][4];
    _Pragma("GCC unroll 3") for (int i = 0; i < M; i++)
        for (int v = 0; v < 4; v++) acc[i][v] = _mm256_loadu_ps(C + i * ldc + 8 * v);
    for (int64_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(B), b1 = _mm256_loadu_ps(B + 8);
        __m256 b2 = _mm256_loadu_ps(B + 16), b3 = _mm256_loadu_ps(B + 24);
        _Pragma("GCC unroll 3") for (int i = 0; i < M; i++) {
            __m256 a = _mm256_broadcast_ss(A + i);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm256_fmadd_ps(a, b3, acc[i][3]);
        }
        A += lda; B += ldb;
    }
    _Pragma("GCC unroll 3") for (int i = 0; i < M; i++)
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(C + i * ldc + 8 * v, acc[i][v]);
}

#define CT_GW256_CASE(MM) \
    case MM: { if (nv == 2) ct_gw_body_256(MM, 2, nn, kc, A + i0, lda, B + j0, ldb, C + i0 * ldc + j0, ldc); \
               else ct_gw_body_256(MM, 1, nn, kc, A + i0, lda, B + j0, ldb, C + i0 * ldc + j0, ldc); } break;

static CT_T256 void ct_gw_ukr_256(int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, const float *B,
                                  int64_t ldb, float *C, int64_t ldc) {
    if (n == CT_PO) {
        for (int64_t i0 = 0; i0 < m; i0 += 3) {
            switch (ct_min(3, m - i0)) {
                case 3: ct_gw_body32_256(3, kc, A + i0, lda, B, ldb, C + i0 * ldc, ldc); break;
                case 2: ct_gw_body32_256(2, kc, A + i0, lda, B, ldb, C + i0 * ldc, ldc); break;
                default: ct_gw_body32_256(1, kc, A + i0, lda, B, ldb, C + i0 * ldc, ldc); break;
            }
        }
        return;
    }
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
        int64_t mm = ct_min(4, m - i0);
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t nn = ct_min(16, n - j0);
            int nv = nn > 8 ? 2 : 1;
            switch (mm) {
                CT_GW256_CASE(1) CT_GW256_CASE(2) CT_GW256_CASE(3) CT_GW256_CASE(4)
                default: break;
            }
        }
    }
}

/* the b-major X pack's narrow rows (ct_ukr.walk_rows) */
static CT_T256 void ct_walk_rows_256(const char *base, int64_t s0, int64_t s1, int64_t T, int64_t t, int64_t b,
                                     int64_t nr, int64_t n, float *d) {
    __m256i m0 = ct_mask8(n), m1 = ct_mask8(n - 8);
    for (int64_t i = 0; i < nr; i++) {
        const float *src = (const float *)(base + t * s0 + b * s1);
        ct_st8(d + i * n, n, m0, ct_ld8(src, n, m0));
        if (n > 8) ct_st8(d + i * n + 8, n - 8, m1, ct_ld8(src + 8, n - 8, m1));
        if (++t == T) { t = 0; b++; }
    }
}

static CT_T256 void ct_gb_partials_256(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
    enum { NS = CT_PR / CT_GBR };
    __m256 g[NS][4];
    __m256i km[4];
    int64_t S = ct_cdiv(nr, CT_GBR), full = nr / CT_GBR, nv = ct_cdiv(wq, 8);
    for (int j = 0; j < 4; j++) km[j] = ct_mask8(wq - 8 * j);
    for (int s = 0; s < NS; s++) for (int j = 0; j < 4; j++) g[s][j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < CT_GBR; i++)
        for (int64_t s = 0; s < full; s++) {
            const float *row = v + (s * CT_GBR + i) * wq;
            for (int64_t j = 0; j < nv; j++)
                g[s][j] = _mm256_add_ps(g[s][j], ct_ld8(row + 8 * j, wq - 8 * j, km[j]));
        }
    for (int64_t i = full * CT_GBR; i < nr; i++)
        for (int64_t j = 0; j < nv; j++)
            g[full][j] = _mm256_add_ps(g[full][j], ct_ld8(v + i * wq + 8 * j, wq - 8 * j, km[j]));
    for (int64_t s = 0; s < S; s++)
        for (int64_t j = 0; j < nv; j++) ct_st8(out + s * ostride + 8 * j, wq - 8 * j, km[j], g[s][j]);
}

/* ------------------------------------------------------------------------------------------------ */
/* AVX2 + FMA, form CT_ACC_CUBE: block sums in registers, chains in memory (AVX-512 CPUs: the kernels below) */
/* ------------------------------------------------------------------------------------------------ */
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
static CT_T256 void ct_nar_256(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t full = nr / 8 * 8;
    if (to) {
        __m256i idx = _mm256_mullo_epi32(iota, _mm256_set1_epi32((int)C));
        for (int64_t i = 0; i < full; i += 8)
            for (int64_t c = 0; c < C; c++)
                _mm256_storeu_ps(d + c * ld + i, _mm256_i32gather_ps(v + i * C + c, idx, 4));
    } else {
        __m256i idx[CT_NW];
        for (int64_t m = 0; m < C; m++) {
            int32_t t[8];
            for (int j = 0; j < 8; j++) t[j] = (int32_t)(((8 * m + j) % C) * ld + (8 * m + j) / C);
            idx[m] = _mm256_loadu_si256((const __m256i *)t);
        }
        for (int64_t i = 0; i < full; i += 8)
            for (int64_t m = 0; m < C; m++)
                _mm256_storeu_ps(v + i * C + 8 * m, _mm256_i32gather_ps(d + i, idx[m], 4));
    }
    ct_nar_port(to, v + full * C, nr - full, C, d + full, ld);
}
static CT_T256 void ct_gwn_px_256(const float *v, int64_t rs, int64_t n, int64_t C, float *d, int64_t ld) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)C));
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < 2; h++)
                _mm256_storeu_ps(d + c * ld + 16 * i + 8 * h, _mm256_i32gather_ps(v + i * rs + 8 * h * C + c, idx, 4));
}
/* AVX2: 8 items a vector; block sums in registers, the chains in D (one load / add / store per block) */
CT_I256 void ct_gwn_body_256(const int MI, const int MO, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                             int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t n, float *D,
                             int64_t ldi, int64_t ldo) {
    __m256 s[2][4], x[2], y[4];
    __m256i m = ct_mask8(n);
    for (int64_t t = ta; t < tz;) {
        int64_t te = ct_min(tz, (t / k0 + 1) * k0);
        _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm256_setzero_ps();
        for (; t < te; t++) {
            const float *xp = X + xo + t * xs, *yp = Y + t * B;
            _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++) x[i] = ct_ld8(xp + i * ldx, n, m);
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) y[j] = ct_ld8(yp + j * ldy, n, m);
            _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
                _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm256_fmadd_ps(x[i], y[j], s[i][j]);
        }
        _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) {
                float *d = D + i * ldi + j * ldo;
                ct_st8(d, n, m, _mm256_add_ps(ct_ld8(d, n, m), s[i][j]));
            }
    }
}
static CT_T256 void ct_gwn_256(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                               int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D,
                               int64_t ldi, int64_t ldo) {
    for (int64_t l = 0; l < nb; l += 8) {    /* two halves of 8 items */
        int64_t n = ct_min(8, nb - l);
        switch (mi * 8 + mo) {
#define CT_GWN256(MI, MO) \
            case MI * 8 + MO: ct_gwn_body_256(MI, MO, X + l, xo, xs, ldx, Y + l, ldy, B, ta, tz, k0, n, D + l, ldi, ldo); break;
            CT_GWN256(1, 1) CT_GWN256(1, 2) CT_GWN256(1, 3) CT_GWN256(1, 4)
            CT_GWN256(2, 1) CT_GWN256(2, 2) CT_GWN256(2, 3) CT_GWN256(2, 4)
#undef CT_GWN256
            default: break;
        }
    }
}
CT_I256 __m256i ct_mask_range8(int64_t a, int64_t z) {
    a = ct_max(0, ct_min(8, a));
    z = ct_max(0, ct_min(8, z));
    return z > a ? _mm256_andnot_si256(ct_mask8(a), ct_mask8(z)) : _mm256_setzero_si256();
}
/* one block (g, k) for MI ci of 16 rows (2 vectors); chains in an L1 tile c[MI][16]; full: every lane valid */
CT_I256 void ct_gin_blk_256(const int MI, const float *dy, int64_t RO, const float *w, int64_t Cin, int64_t lo,
                            int64_t hi, int full, const __m256i *m, float *c) {
    __m256 s[4][2], y[2];
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) s[i][v] = _mm256_setzero_ps();
    for (int64_t co = lo; co < hi; co++) {
        _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++)
            y[v] = full ? _mm256_loadu_ps(dy + co * RO + 8 * v) : _mm256_maskload_ps(dy + co * RO + 8 * v, m[v]);
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++) {
            __m256 wv = _mm256_broadcast_ss(w + co * Cin + i);
            _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) s[i][v] = _mm256_fmadd_ps(y[v], wv, s[i][v]);
        }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) {
            __m256 cv = _mm256_load_ps(c + 16 * i + 8 * v), nv = _mm256_add_ps(cv, s[i][v]);
            _mm256_store_ps(c + 16 * i + 8 * v, full ? nv : _mm256_blendv_ps(cv, nv, _mm256_castsi256_ps(m[v])));
        }
}
static CT_T256 void ct_gin_256(const ct_nar_gi *P, int64_t r0, int64_t nr, float *D, int64_t ldd) {
    int64_t K = P->K, Cout = P->Cout, Cin = P->Cin, k0 = P->k0, RO = P->nlo, nG = ct_cdiv(Cout, k0);
    int64_t rend = r0 + nr;
    float c[CT_NW * 16] __attribute__((aligned(32)));
    for (int64_t r = r0; r < rend; r += 16) {
        for (int64_t e = 0; e < Cin * 16; e++) c[e] = P->gin_start ? P->gin_start[e / 16] : 0.0f;
        for (int64_t g = 0; g < nG; g++) {
            int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
            for (int64_t k = 0; k < K; k++) {
                int64_t va, vz;
                ct_gin_valid(P, k, rend, &va, &vz);
                int64_t a = va - r, z = vz - r;
                if (z <= 0 || a >= 16 || z <= a) continue;
                int full = a <= 0 && z >= 16;
                __m256i m[2];
                for (int v = 0; v < 2; v++) m[v] = ct_mask_range8(a - 8 * v, z - 8 * v);
                const float *w = P->Wp + (ct_wblk(lo, hi, K, k) - lo) * Cin;
                const float *dy = P->DYc + r + ct_gin_shift(P, k);
                for (int64_t ci = 0; ci < Cin; ci += 4) {
                    switch (ct_min(4, Cin - ci)) {
                        case 4: ct_gin_blk_256(4, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                        case 3: ct_gin_blk_256(3, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                        case 2: ct_gin_blk_256(2, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                        default: ct_gin_blk_256(1, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                    }
                }
            }
        }
        for (int64_t ci = 0; ci < Cin; ci++)
            for (int v = 0; v < 2; v++) {
                int64_t n = rend - (r + 8 * v);
                if (n > 0) ct_st8(D + ci * ldd + (r - r0) + 8 * v, n, ct_mask8(n), _mm256_load_ps(c + 16 * ci + 8 * v));
            }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* the table                                                                                        */
/* ------------------------------------------------------------------------------------------------ */
static CT_T256 void ct_decode_row_x256(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_HIF8) ct_decode_row_port(src, stride, dt, n, out);      /* a table lookup per code */
    else ct_decode_row_256(src, stride, dt, n, out);
}

static CT_T256 void ct_gi_seq_256(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk,
                                  int64_t nk, int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t bk,
                                  float *C, int64_t ldc) {
    for (int64_t kk = 0; kk < nk; kk++)
        ct_gi_ukr_256(m, n, DYp, RO, row0 + kk * dk, c0, c1, Cout, Bp + kk * bk, C, ldc);
}

static CT_T256 void ct_gw_seq_256(int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda,
                                  int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    for (int64_t kk = 0; kk < nk; kk++) ct_gw_ukr_256(m, n, kc, A + kk * ak, lda, B, ldb, C + kk * ck, ldc);
}

static CT_T256 void ct_gwc_x256(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B,
                                int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
                                int64_t ldc, int cin, ct_gw_pf *F) {
    if (form == CT_ACC_CUBE) ct_gwc_ukr_256(m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);
    else ct_gwc_gen(form, m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin);
}

static CT_T256 void ct_gic_rows_x256(int form, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,
                                     int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0,
                                     int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    if (form == CT_ACC_CUBE) ct_gic_rows_256(i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
    else ct_gic_rows_gen(form, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}

/* fp32 NaNs to CT_NAN_F32, 8 lanes at a time (a store only where a vector holds one); other dtypes generic */
static CT_T256 void ct_canon_nan_256(char *dst, int64_t n, int dt) {
    if (dt != CT_DT_F32) { ct_canon_nan_port(dst, n, dt); return; }
    float *v = (float *)dst;
    const __m256 qnan = _mm256_castsi256_ps(_mm256_set1_epi32((int)CT_NAN_F32));
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(v + i);
        __m256 nan = _mm256_cmp_ps(x, x, _CMP_UNORD_Q);
        if (!_mm256_testz_ps(nan, nan)) _mm256_storeu_ps(v + i, _mm256_blendv_ps(x, qnan, nan));
    }
    ct_canon_nan_port((char *)(v + i), n - i, dt);
}

int ct_ukr_init_avx2(ct_ukr *U, const ct_ukr_opts *o) {
    ct_gic256_rows = o->gi_rows == 4 ? 4 : 6;
    *U = (ct_ukr){
        .name = "avx2",
        /* the narrow gradInput kernels only up to 4 channels: above, the general kernels' 8 lanes along Cin are
         * full enough (the narrow ones took 5-12% longer at Cin = 8) */
        .gi_mr_narrow = 6, .gi_mr_wide = 6, .gwn_mh = 2, .gwn_mw = 4, .narrow_gi_max_cin = 4,
        .decode_row = ct_decode_row_x256, .walk_rows = ct_walk_rows_256, .round_row = ct_round_row_256,
        .store_row = ct_store_row_256, .canon_nan = ct_canon_nan_256, .gb_partials = ct_gb_partials_256,
        .gi_seq = ct_gi_seq_256, .gw_seq = ct_gw_seq_256,
        .gwc = ct_gwc_x256, .gwc_pair = NULL, .gic_rows = ct_gic_rows_x256,
        .nar_transpose = ct_nar_256, .gwn_px = ct_gwn_px_256, .gwn = ct_gwn_256, .gin = ct_gin_256,
    };
    return 0;
}

#else /* not x86-64 with GCC's vector extensions */

int ct_ukr_init_avx2(ct_ukr *U, const ct_ukr_opts *o) { (void)U; (void)o; return -1; }

#endif
