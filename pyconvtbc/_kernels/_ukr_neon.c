/* _ukr_neon.c: the AArch64 Advanced SIMD (NEON) micro-kernels and their table (_ukr.h).
 *
 * Advanced SIMD with fused multiply-add is part of every AArch64 CPU, so this file needs no target attribute and
 * no run-time check; other architectures compile it to the stub at the end.  Four fp32 lanes a vector, 32
 * vector registers.  Every lane runs the generic C's operation sequence (_ukr_generic.h): vfmaq_f32(s, a, b) is
 * fmaf(a, b, s) (one rounding), the block sums start from +0 and the chains add them with one fp32 add, as the
 * AVX2 kernels do; the build's -ffp-contract=off keeps the compiler from fusing the adds.  Lanes past a row's end
 * are never read or written (ct_ld4 / ct_st4: NEON has no masked loads).
 *
 * fp16: FCVTN / FCVTL (vcvt_f16_f32 / vcvt_f32_f16) round to nearest even under the default FPCR (RN, no flush
 * to zero, no default NaN), as the generic codec does; FCVTN quietens a NaN keeping its payload's top bits
 * (pct_f32_to_f16_bits); FCVTL would quieten a signalling fp16 NaN that the generic decode keeps, so the decode
 * patches the Inf / NaN lanes from their bits (as the AVX2 decode does).
 *
 * Not vectorised here (the generic C): the 8-bit formats' codecs, HiFloat8 decode, the float64 forms (cube_wide,
 * cube_rz), walk_rows (a memcpy per row), the narrow transposes of 5-8 channels, gwn_px (NULL).
 */
#include "_ukr.h"

#if defined(__aarch64__) && defined(__GNUC__) && !defined(PYCONVTBC_NO_SIMD)
#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "_fpround.h"
#include "_ukr_generic.h"

#define CT_IN static inline __attribute__((always_inline))

/* Rows per tile of the cube gradInput / forward kernels: 4 or 6 (ct_ukr_opts.gi_rows; 6 by default: 24 block
 * sums in registers).  No result depends on it. */
static int ct_gicn_rows = 6;

/* ------------------------------------------------------------------------------------------------ */
/* partial vectors                                                                                  */
/* ------------------------------------------------------------------------------------------------ */
/* the first n (<= 0: none, >= 4: all) lanes at p; the others 0 */
CT_IN float32x4_t ct_ld4(const float *p, int64_t n) {
    if (n >= 4) return vld1q_f32(p);
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t l = 0; l < n; l++) t[l] = p[l];
    return vld1q_f32(t);
}
CT_IN void ct_st4(float *p, int64_t n, float32x4_t v) {
    if (n >= 4) { vst1q_f32(p, v); return; }
    float t[4];
    vst1q_f32(t, v);
    for (int64_t l = 0; l < n; l++) p[l] = t[l];
}
/* lanes [a, z) of p (clipped to 0..4); the others 0 */
CT_IN float32x4_t ct_ld4_rng(const float *p, int64_t a, int64_t z) {
    float t[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int64_t l = ct_max(a, 0); l < ct_min(z, 4); l++) t[l] = p[l];
    return vld1q_f32(t);
}
/* all-ones in lanes [a, z) */
CT_IN uint32x4_t ct_mask_rng4(int64_t a, int64_t z) {
    static const int32_t iota[4] = {0, 1, 2, 3};
    int32x4_t io = vld1q_s32(iota);
    int32x4_t av = vdupq_n_s32((int32_t)ct_max(-1, ct_min(5, a))), zv = vdupq_n_s32((int32_t)ct_max(-1, ct_min(5, z)));
    return vandq_u32(vcgeq_s32(io, av), vcltq_s32(io, zv));
}

/* ------------------------------------------------------------------------------------------------ */
/* rounding and codecs                                                                              */
/* ------------------------------------------------------------------------------------------------ */
CT_IN float32x4_t ct_round_f16_4(float32x4_t v) { return vcvt_f32_f16(vcvt_f16_f32(v)); }

/* pct_f32_to_bf16_bits on four lanes (the upper 16 bits of each lane 0) */
CT_IN uint32x4_t ct_bf16_bits_4(float32x4_t v) {
    uint32x4_t b = vreinterpretq_u32_f32(v);
    uint32x4_t u = vandq_u32(b, vdupq_n_u32(0x7FFFFFFFu));
    uint32x4_t nan = vcgtq_u32(u, vdupq_n_u32(0x7F800000u));
    uint32x4_t lsb = vandq_u32(vshrq_n_u32(b, 16), vdupq_n_u32(1u));
    uint32x4_t r = vshrq_n_u32(vaddq_u32(b, vaddq_u32(lsb, vdupq_n_u32(0x7FFFu))), 16);
    uint32x4_t qn = vorrq_u32(vshrq_n_u32(b, 16), vdupq_n_u32(0x40u));
    return vbslq_u32(nan, qn, r);
}
CT_IN float32x4_t ct_round_bf16_4(float32x4_t v) {
    return vreinterpretq_f32_u32(vshlq_n_u32(ct_bf16_bits_4(v), 16));
}
/* pct_round_hf32 with d = 23 - n dropped bits (1 <= d <= 22) */
CT_IN float32x4_t ct_round_hf32_4(float32x4_t v, int d, int hrnd) {
    uint32x4_t b = vreinterpretq_u32_f32(v);
    uint32x4_t u = vandq_u32(b, vdupq_n_u32(0x7FFFFFFFu));
    uint32x4_t s = vandq_u32(b, vdupq_n_u32(0x80000000u));
    uint32x4_t nan = vcgtq_u32(u, vdupq_n_u32(0x7F800000u));
    int32x4_t right = vdupq_n_s32(-d), left = vdupq_n_s32(d);
    uint32x4_t add = vdupq_n_u32(1u << (d - 1));
    if (hrnd == CT_HF32_NEAREST_EVEN) {
        uint32x4_t lsb = vandq_u32(vshlq_u32(u, right), vdupq_n_u32(1u));
        add = vaddq_u32(vsubq_u32(add, vdupq_n_u32(1u)), lsb);
    }
    uint32x4_t r = vshlq_u32(vshlq_u32(vaddq_u32(u, add), right), left);
    return vreinterpretq_f32_u32(vbslq_u32(nan, b, vorrq_u32(r, s)));
}

/* fp16 bits (in 32-bit lanes) to fp32, with the Inf / NaN lanes from their bits: a signalling NaN stays one */
CT_IN float32x4_t ct_f16_to_f32_4(uint16x4_t h) {
    uint32x4_t h32 = vmovl_u16(h);
    float32x4_t f = vcvt_f32_f16(vreinterpret_f16_u16(h));
    uint32x4_t sp = vceqq_u32(vandq_u32(h32, vdupq_n_u32(0x7C00u)), vdupq_n_u32(0x7C00u));
    uint32x4_t bits = vorrq_u32(vorrq_u32(vshlq_n_u32(vandq_u32(h32, vdupq_n_u32(0x8000u)), 16),
                                          vdupq_n_u32(0x7F800000u)),
                                vshlq_n_u32(vandq_u32(h32, vdupq_n_u32(0x3FFu)), 13));
    return vbslq_f32(sp, vreinterpretq_f32_u32(bits), f);
}

static void ct_decode_row_neon(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_F32 && stride == 4) { memcpy(out, src, (size_t)n * 4); return; }
    if (stride == 2 && (dt == CT_DT_F16 || dt == CT_DT_BF16)) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint16x8_t h = vld1q_u16((const uint16_t *)(const void *)(src + 2 * i));
            if (dt == CT_DT_F16) {
                vst1q_f32(out + i, ct_f16_to_f32_4(vget_low_u16(h)));
                vst1q_f32(out + i + 4, ct_f16_to_f32_4(vget_high_u16(h)));
            } else {
                vst1q_f32(out + i, vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)));
                vst1q_f32(out + i + 4, vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(h), 16)));
            }
        }
        for (; i < n; i++) out[i] = ct_load1(src + 2 * i, dt);
        return;
    }
    ct_decode_row_port(src, stride, dt, n, out);        /* strided rows, HiFloat8: the generic C */
}

static void ct_round_row_neon(float *v, int64_t n, int compute, int hbits, int hrnd) {
    if (compute != CT_C_HF32 && compute != CT_C_FP16 && compute != CT_C_BF16) return;   /* FP32: nothing */
    if (compute == CT_C_HF32 && (hbits < 1 || hbits > 22)) return;
    for (int64_t i = 0; i < n; i += 4) {
        float32x4_t x = ct_ld4(v + i, n - i);
        if (compute == CT_C_HF32) x = ct_round_hf32_4(x, 23 - hbits, hrnd);
        else if (compute == CT_C_FP16) x = ct_round_f16_4(x);
        else x = ct_round_bf16_4(x);
        ct_st4(v + i, n - i, x);
    }
}

static void ct_store_row_neon(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd, int sat) {
    switch (dt) {                                            /* by class: 4- and 2-byte floats here */
        case CT_DT_F32: case CT_DT_F16: case CT_DT_BF16: break;
        default: ct_store_row_port(acc, n, dst, dt, pre, hif8_rnd, sat); return;   /* 8-bit codes (others: none) */
    }
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        float32x4_t x = vld1q_f32(acc + i);
        if (pre == CT_C_FP16) x = ct_round_f16_4(x);
        else if (pre == CT_C_BF16) x = ct_round_bf16_4(x);
        if (dt == CT_DT_F32) vst1q_f32((float *)(void *)dst + i, x);
        else if (dt == CT_DT_F16) vst1_u16((uint16_t *)(void *)dst + i, vreinterpret_u16_f16(vcvt_f16_f32(x)));
        else vst1_u16((uint16_t *)(void *)dst + i, vmovn_u32(ct_bf16_bits_4(x)));
    }
    if (i < n) ct_store_row_port(acc + i, n - i, dst + (int64_t)ct_dt_size(dt) * i, dt, pre, hif8_rnd, sat);
}

/* NaNs to the canonical NaN of their format (ct_canon_nan_port), on the bit patterns: 4 fp32 or 8 fp16 / bf16
 * lanes at a time, a store only where a vector holds a NaN; 8-bit codes: the generic C (nothing to do) */
static void ct_canon_nan_neon(char *dst, int64_t n, int dt) {
    int64_t i = 0;
    if (dt == CT_DT_F32) {
        uint32_t *v = (uint32_t *)(void *)dst;
        for (; i + 4 <= n; i += 4) {
            uint32x4_t u = vld1q_u32(v + i);
            uint32x4_t nan = vcgtq_u32(vandq_u32(u, vdupq_n_u32(0x7FFFFFFFu)), vdupq_n_u32(0x7F800000u));
            if (vmaxvq_u32(nan)) vst1q_u32(v + i, vbslq_u32(nan, vdupq_n_u32(CT_NAN_F32), u));
        }
        ct_canon_nan_port(dst + 4 * i, n - i, dt);
        return;
    }
    if (dt == CT_DT_F16 || dt == CT_DT_BF16) {
        uint16_t *v = (uint16_t *)(void *)dst;
        uint16x8_t inf = vdupq_n_u16(dt == CT_DT_F16 ? 0x7C00u : 0x7F80u);
        uint16x8_t qn = vdupq_n_u16(dt == CT_DT_F16 ? CT_NAN_F16 : CT_NAN_BF16);
        for (; i + 8 <= n; i += 8) {
            uint16x8_t h = vld1q_u16(v + i);
            uint16x8_t nan = vcgtq_u16(vandq_u16(h, vdupq_n_u16(0x7FFFu)), inf);
            if (vmaxvq_u16(nan)) vst1q_u16(v + i, vbslq_u16(nan, qn, h));
        }
        ct_canon_nan_port(dst + 2 * i, n - i, dt);
        return;
    }
    ct_canon_nan_port(dst, n, dt);
}

/* gradBias: one partial per CT_GBR rows, each a chain of fp32 adds from +0 in row order (ct_gb_partials_port) */
static void ct_gb_partials_neon(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
    int64_t S = ct_cdiv(nr, CT_GBR), wv = wq / 4 * 4;
    for (int64_t s = 0; s < S; s++) {
        int64_t r0 = s * CT_GBR, r1 = ct_min(nr, r0 + CT_GBR);
        int64_t j = 0;
        for (; j + 16 <= wv; j += 16) {
            float32x4_t g0 = vdupq_n_f32(0.0f), g1 = g0, g2 = g0, g3 = g0;
            for (int64_t i = r0; i < r1; i++) {
                const float *row = v + i * wq + j;
                g0 = vaddq_f32(g0, vld1q_f32(row));
                g1 = vaddq_f32(g1, vld1q_f32(row + 4));
                g2 = vaddq_f32(g2, vld1q_f32(row + 8));
                g3 = vaddq_f32(g3, vld1q_f32(row + 12));
            }
            vst1q_f32(out + s * ostride + j, g0);
            vst1q_f32(out + s * ostride + j + 4, g1);
            vst1q_f32(out + s * ostride + j + 8, g2);
            vst1q_f32(out + s * ostride + j + 12, g3);
        }
        for (; j < wv; j += 4) {
            float32x4_t g = vdupq_n_f32(0.0f);
            for (int64_t i = r0; i < r1; i++) g = vaddq_f32(g, vld1q_f32(v + i * wq + j));
            vst1q_f32(out + s * ostride + j, g);
        }
        for (; j < wq; j++) {
            float g = 0.0f;
            for (int64_t i = r0; i < r1; i++) g = g + v[i * wq + j];
            out[s * ostride + j] = g;
        }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* sequential form: one FMA chain per element                                                        */
/* ------------------------------------------------------------------------------------------------ */
/* gi: M (<= 6) rows x NV (<= 4) vectors (n <= 16 columns valid) of C += DY(row, c) * B(c), c in [c0, c1) */
CT_IN void ct_gi_body_n(const int M, const int NV, int64_t n, const float *DYp, int64_t RO, int64_t row0,
                        int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t ldb, float *C, int64_t ldc) {
    float32x4_t acc[6][4];
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = ct_ld4(C + i * ldc + 4 * v, n - 4 * v);
    const float *B = Bp;
    int64_t c = c0;
    while (c < c1) {   /* the channels, split where they cross a DY panel */
        int64_t q = c / CT_PO, qb = q * CT_PO;
        int64_t wq = ct_min(CT_PO, Cout - qb);
        int64_t cend = ct_min(c1, qb + wq);
        const float *A = DYp + q * RO * CT_PO + row0 * wq + (c - qb);
        for (int64_t l = 0; l < cend - c; l++) {
            float32x4_t b[4];
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) b[v] = ct_ld4(B + 4 * v, n - 4 * v);
            _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
                float32x4_t a = vld1q_dup_f32(A + i * wq + l);
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = vfmaq_f32(acc[i][v], a, b[v]);
            }
            B += ldb;
        }
        c = cend;
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) ct_st4(C + i * ldc + 4 * v, n - 4 * v, acc[i][v]);
}

#define CT_GIN_NV(MM) \
    case MM: switch (nv) { \
        case 4: ct_gi_body_n(MM, 4, nn, DYp, RO, row0 + i, c0, c1, Cout, Bp + j0, n, C + i * ldc + j0, ldc); break; \
        case 3: ct_gi_body_n(MM, 3, nn, DYp, RO, row0 + i, c0, c1, Cout, Bp + j0, n, C + i * ldc + j0, ldc); break; \
        case 2: ct_gi_body_n(MM, 2, nn, DYp, RO, row0 + i, c0, c1, Cout, Bp + j0, n, C + i * ldc + j0, ldc); break; \
        default: ct_gi_body_n(MM, 1, nn, DYp, RO, row0 + i, c0, c1, Cout, Bp + j0, n, C + i * ldc + j0, ldc); \
    } break;

static void ct_gi_ukr_neon(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t c0, int64_t c1,
                           int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i += 6)
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t nn = ct_min(16, n - j0), nv = ct_cdiv(nn, 4);
            switch (ct_min(6, m - i)) {
                CT_GIN_NV(6) CT_GIN_NV(5) CT_GIN_NV(4) CT_GIN_NV(3) CT_GIN_NV(2) CT_GIN_NV(1)
                default: break;
            }
        }
}
#undef CT_GIN_NV

/* gw: M (<= 6) ci x NV (<= 4) vectors of co: C[i][j] += sum_p A[p*lda + i] * B[p*ldb + j] */
CT_IN void ct_gw_body_n(const int M, const int NV, int64_t n, int64_t kc, const float *A, int64_t lda,
                        const float *B, int64_t ldb, float *C, int64_t ldc) {
    float32x4_t acc[6][4];
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = ct_ld4(C + i * ldc + 4 * v, n - 4 * v);
    for (int64_t p = 0; p < kc; p++) {
        float32x4_t b[4];
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) b[v] = ct_ld4(B + 4 * v, n - 4 * v);
        _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
            float32x4_t a = vld1q_dup_f32(A + i);
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) acc[i][v] = vfmaq_f32(acc[i][v], a, b[v]);
        }
        A += lda;
        B += ldb;
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) ct_st4(C + i * ldc + 4 * v, n - 4 * v, acc[i][v]);
}

#define CT_GWN_NV(MM) \
    case MM: switch (nv) { \
        case 4: ct_gw_body_n(MM, 4, nn, kc, A + i, lda, B + j0, ldb, C + i * ldc + j0, ldc); break; \
        case 3: ct_gw_body_n(MM, 3, nn, kc, A + i, lda, B + j0, ldb, C + i * ldc + j0, ldc); break; \
        case 2: ct_gw_body_n(MM, 2, nn, kc, A + i, lda, B + j0, ldb, C + i * ldc + j0, ldc); break; \
        default: ct_gw_body_n(MM, 1, nn, kc, A + i, lda, B + j0, ldb, C + i * ldc + j0, ldc); \
    } break;

static void ct_gw_ukr_neon(int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, const float *B,
                           int64_t ldb, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i += 6)
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t nn = ct_min(16, n - j0), nv = ct_cdiv(nn, 4);
            switch (ct_min(6, m - i)) {
                CT_GWN_NV(6) CT_GWN_NV(5) CT_GWN_NV(4) CT_GWN_NV(3) CT_GWN_NV(2) CT_GWN_NV(1)
                default: break;
            }
        }
}
#undef CT_GWN_NV

static void ct_gi_seq_neon(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk, int64_t nk,
                           int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t bk, float *C, int64_t ldc) {
    for (int64_t kk = 0; kk < nk; kk++)
        ct_gi_ukr_neon(m, n, DYp, RO, row0 + kk * dk, c0, c1, Cout, Bp + kk * bk, C, ldc);
}

static void ct_gw_seq_neon(int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, int64_t ak,
                           const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    for (int64_t kk = 0; kk < nk; kk++) ct_gw_ukr_neon(m, n, kc, A + kk * ak, lda, B, ldb, C + kk * ck, ldc);
}

/* ------------------------------------------------------------------------------------------------ */
/* form CT_ACC_CUBE: block sums (FMA chains from +0) in registers, chains in an L1 tile (one add a block) */
/* ------------------------------------------------------------------------------------------------ */
/* cm[16*i + 4*v] += s[i][v] */
CT_IN void ct_chains_add_n(const int M, const int NV, float *cm, float32x4_t s[6][4]) {
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            vst1q_f32(cm + 16 * i + 4 * v, vaddq_f32(vld1q_f32(cm + 16 * i + 4 * v), s[i][v]));
}

/* gw: M (<= 4) ci x NV (<= 4) vectors of co (n valid) */
CT_IN void ct_gwc_body_n(const int M, const int NV, int64_t n, const float *A, int64_t lda, const float *B,
                         int64_t ldb, int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc,
                         int64_t ldc, int cin, ct_gw_pf *F) {
    float32x4_t s[6][4];
    float cm[6 * 16] __attribute__((aligned(16)));
    _Pragma("GCC unroll 4") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            vst1q_f32(cm + 16 * i + 4 * v, cin ? ct_ld4(Cc + i * ldc + 4 * v, n - 4 * v) : vdupq_n_f32(0.0f));
    int64_t p = 0, blen = first;
    while (p < nr) {
        int64_t e1 = ct_min(nr, p + blen);
        const float *Aq = A + p * lda, *Bq = B + p * ldb;
        _Pragma("GCC unroll 4") for (int i = 0; i < M; i++)
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = vdupq_n_f32(0.0f);
        for (int64_t q = p; q < e1; q++) {
            float32x4_t b[4];
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) b[v] = ct_ld4(Bq + 4 * v, n - 4 * v);
            _Pragma("GCC unroll 4") for (int i = 0; i < M; i++) {
                float32x4_t a = vld1q_dup_f32(Aq + i);
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = vfmaq_f32(s[i][v], a, b[v]);
            }
            Aq += lda;
            Bq += ldb;
        }
        ct_chains_add_n(M, NV, cm, s);
        if (F && ct_gw_pf_left(F)) ct_gw_pf_rows(F, 1);
        p = e1;
        blen = k0;
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) {
            float32x4_t c = vld1q_f32(cm + 16 * i + 4 * v);
            if (D) ct_st4(D + i * ldd + 4 * v, n - 4 * v, vaddq_f32(ct_ld4(D + i * ldd + 4 * v, n - 4 * v), c));
            else ct_st4(Cc + i * ldc + 4 * v, n - 4 * v, c);
        }
}

#define CT_GWC_NV(MM) \
    case MM: switch (nv) { \
        case 4: ct_gwc_body_n(MM, 4, nn, Ai, lda, Bj, ldb, nr, first, k0, Di, ldd, Ci, ldc, cin, F); break; \
        case 3: ct_gwc_body_n(MM, 3, nn, Ai, lda, Bj, ldb, nr, first, k0, Di, ldd, Ci, ldc, cin, F); break; \
        case 2: ct_gwc_body_n(MM, 2, nn, Ai, lda, Bj, ldb, nr, first, k0, Di, ldd, Ci, ldc, cin, F); break; \
        default: ct_gwc_body_n(MM, 1, nn, Ai, lda, Bj, ldb, nr, first, k0, Di, ldd, Ci, ldc, cin, F); \
    } break;

static void ct_gwc_ukr_neon(int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                            int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc, int64_t ldc,
                            int cin, ct_gw_pf *F) {
    for (int64_t i0 = 0; i0 < m; i0 += 4) {       /* 4 ci x 16 co per pass: 16 independent block sums */
        const float *Ai = A + i0;
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t nn = ct_min(16, n - j0), nv = ct_cdiv(nn, 4);
            const float *Bj = B + j0;
            float *Di = D ? D + i0 * ldd + j0 : NULL, *Ci = Cc ? Cc + i0 * ldc + j0 : NULL;
            switch (ct_min(4, m - i0)) {
                CT_GWC_NV(4) CT_GWC_NV(3) CT_GWC_NV(2) CT_GWC_NV(1)
                default: break;
            }
        }
    }
}
#undef CT_GWC_NV

/* gi: M (<= 6) rows x NV (<= 4) vectors of ci (n valid), blocks [jb0, jb1); the chains go through an L1 tile */
CT_IN void ct_gic_body_n(const int M, const int NV, int64_t n, const float *DYp, int64_t RO, int64_t row0,
                         int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout, const float *Bp,
                         int64_t ldb, float *C, int64_t ldc) {
    float cm[6 * 16] __attribute__((aligned(16)));
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            vst1q_f32(cm + 16 * i + 4 * v, ct_ld4(C + i * ldc + 4 * v, n - 4 * v));
    int64_t g = jb0 / K, kk = jb0 % K;
    for (int64_t jb = jb0; jb < jb1; jb++) {
        int64_t lo = g * k0, hi = ct_min(Cout, lo + k0), row = row0 + kk * dk;
        const float *Bb = Bp + ct_wblk(lo, hi, K, kk) * ldb;
        float32x4_t s[6][4];
        _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
            _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = vdupq_n_f32(0.0f);
        int64_t co = lo;
        while (co < hi) {   /* the group's channels, split where they cross a DY panel */
            int64_t q = co / CT_PO, qb = q * CT_PO, wq = ct_min(CT_PO, Cout - qb);
            int64_t cend = ct_min(hi, qb + wq);
            const float *Ar = DYp + q * RO * CT_PO + row * wq + (co - qb);
            for (int64_t l = 0; l < cend - co; l++) {
                float32x4_t b[4];
                _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) b[v] = ct_ld4(Bb + 4 * v, n - 4 * v);
                _Pragma("GCC unroll 6") for (int i = 0; i < M; i++) {
                    float32x4_t a = vld1q_dup_f32(Ar + i * wq + l);
                    _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++) s[i][v] = vfmaq_f32(s[i][v], a, b[v]);
                }
                Bb += ldb;
            }
            co = cend;
        }
        ct_chains_add_n(M, NV, cm, s);
        if (++kk == K) { kk = 0; g++; }
    }
    _Pragma("GCC unroll 6") for (int i = 0; i < M; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < NV; v++)
            ct_st4(C + i * ldc + 4 * v, n - 4 * v, vld1q_f32(cm + 16 * i + 4 * v));
}

#define CT_GIC_NV(MM) \
    case MM: switch (nv) { \
        case 4: ct_gic_body_n(MM, 4, nn, DYp, RO, i + rowoff, dk, K, jb0, jb1, k0, Cout, Bp + j0, n, Ci, ldc); break; \
        case 3: ct_gic_body_n(MM, 3, nn, DYp, RO, i + rowoff, dk, K, jb0, jb1, k0, Cout, Bp + j0, n, Ci, ldc); break; \
        case 2: ct_gic_body_n(MM, 2, nn, DYp, RO, i + rowoff, dk, K, jb0, jb1, k0, Cout, Bp + j0, n, Ci, ldc); break; \
        default: ct_gic_body_n(MM, 1, nn, DYp, RO, i + rowoff, dk, K, jb0, jb1, k0, Cout, Bp + j0, n, Ci, ldc); \
    } break;

/* rows [i0, i1) of a panel of n columns: each 16-column slice outer, tiles of M rows inner (the slice's weight
 * rows stay in L1 while the rows go by).  M (ct_gicn_rows) is register blocking only. */
CT_IN void ct_gic_rows_m_neon(const int M, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,
                              int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0,
                              int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        int64_t nn = ct_min(16, n - j0), nv = ct_cdiv(nn, 4);
        for (int64_t i = i0; i < i1; i += M) {
            float *Ci = C + (i - i0) * ldc + j0;
            switch (ct_min(M, i1 - i)) {
                CT_GIC_NV(6) CT_GIC_NV(5) CT_GIC_NV(4) CT_GIC_NV(3) CT_GIC_NV(2) CT_GIC_NV(1)
                default: break;
            }
        }
    }
}
#undef CT_GIC_NV
static __attribute__((noinline)) void ct_gic_rows4_neon(int64_t i0, int64_t i1, int64_t n, const float *DYp,
        int64_t RO, int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
        const float *Bp, float *C, int64_t ldc) {
    ct_gic_rows_m_neon(4, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}
static __attribute__((noinline)) void ct_gic_rows6_neon(int64_t i0, int64_t i1, int64_t n, const float *DYp,
        int64_t RO, int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
        const float *Bp, float *C, int64_t ldc) {
    ct_gic_rows_m_neon(6, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}

/* ------------------------------------------------------------------------------------------------ */
/* narrow channels                                                                                  */
/* ------------------------------------------------------------------------------------------------ */
/* [nr][C] <-> d[c*ld + i]: 4 rows at a time by the de-interleaving loads / interleaving stores for C = 2..4 */
static void ct_nar_neon(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    int64_t full = (C >= 2 && C <= 4) ? nr / 4 * 4 : 0;
    for (int64_t i = 0; i < full; i += 4) {
        float *r = v + i * C;
        if (C == 2) {
            if (to) { float32x4x2_t x = vld2q_f32(r); vst1q_f32(d + i, x.val[0]); vst1q_f32(d + ld + i, x.val[1]); }
            else { float32x4x2_t x = {{vld1q_f32(d + i), vld1q_f32(d + ld + i)}}; vst2q_f32(r, x); }
        } else if (C == 3) {
            if (to) {
                float32x4x3_t x = vld3q_f32(r);
                for (int c = 0; c < 3; c++) vst1q_f32(d + c * ld + i, x.val[c]);
            } else {
                float32x4x3_t x = {{vld1q_f32(d + i), vld1q_f32(d + ld + i), vld1q_f32(d + 2 * ld + i)}};
                vst3q_f32(r, x);
            }
        } else {
            if (to) {
                float32x4x4_t x = vld4q_f32(r);
                for (int c = 0; c < 4; c++) vst1q_f32(d + c * ld + i, x.val[c]);
            } else {
                float32x4x4_t x = {{vld1q_f32(d + i), vld1q_f32(d + ld + i), vld1q_f32(d + 2 * ld + i),
                                    vld1q_f32(d + 3 * ld + i)}};
                vst4q_f32(r, x);
            }
        }
    }
    ct_nar_port(to, v + full * C, nr - full, C, d + full, ld);
}

/* gw: MI (<= 2) ci x MO (<= 4) co, NV (<= 2) vectors of items (n <= 8 valid); block sums in registers, the
 * chains in D (one load / add / store a block), as ct_gwn_port */
CT_IN void ct_gwn_body_n(const int MI, const int MO, const int NV, const float *X, int64_t xo, int64_t xs,
                         int64_t ldx, const float *Y, int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0,
                         int64_t n, float *D, int64_t ldi, int64_t ldo) {
    float32x4_t s[2][4][2], x[2][2], y[4][2];
    for (int64_t t = ta; t < tz;) {
        int64_t te = ct_min(tz, (t / k0 + 1) * k0);
        _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++)
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) s[i][j][v] = vdupq_n_f32(0.0f);
        for (; t < te; t++) {
            const float *xp = X + xo + t * xs, *yp = Y + t * B;
            _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) x[i][v] = ct_ld4(xp + i * ldx + 4 * v, n - 4 * v);
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++)
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) y[j][v] = ct_ld4(yp + j * ldy + 4 * v, n - 4 * v);
            _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
                _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++)
                    _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++)
                        s[i][j][v] = vfmaq_f32(s[i][j][v], x[i][v], y[j][v]);
        }
        _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++)
                _Pragma("GCC unroll 2") for (int v = 0; v < NV; v++) {
                    float *dp = D + i * ldi + j * ldo + 4 * v;
                    ct_st4(dp, n - 4 * v, vaddq_f32(ct_ld4(dp, n - 4 * v), s[i][j][v]));
                }
    }
}
static void ct_gwn_neon(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                        int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D,
                        int64_t ldi, int64_t ldo) {
    if (mi < 1 || mi > 2 || mo < 1 || mo > 4) {       /* (the table's tile is 2 x 4: not reached) */
        ct_gwn_port(mi, mo, X, xo, xs, ldx, Y, ldy, B, ta, tz, k0, nb, D, ldi, ldo);
        return;
    }
    for (int64_t l = 0; l < nb; l += 8) {    /* halves of 8 items */
        int64_t n = ct_min(8, nb - l);
        int nv = n > 4 ? 2 : 1;
        switch ((mi * 8 + mo) * 2 + nv - 1) {
#define CT_GWNN(MI, MO, NV) \
            case (MI * 8 + MO) * 2 + NV - 1: \
                ct_gwn_body_n(MI, MO, NV, X + l, xo, xs, ldx, Y + l, ldy, B, ta, tz, k0, n, D + l, ldi, ldo); break;
#define CT_GWNN2(MI, MO) CT_GWNN(MI, MO, 1) CT_GWNN(MI, MO, 2)
            CT_GWNN2(1, 1) CT_GWNN2(1, 2) CT_GWNN2(1, 3) CT_GWNN2(1, 4)
            CT_GWNN2(2, 1) CT_GWNN2(2, 2) CT_GWNN2(2, 3) CT_GWNN2(2, 4)
#undef CT_GWNN2
#undef CT_GWNN
            default: break;
        }
    }
}

/* gi: one block (g, k) for MI (<= 4) ci of 16 rows (4 vectors); chains in the L1 tile c[MI][16]; lanes [a, z)
 * of the 16 valid (full: all) */
CT_IN void ct_gin_blk_n(const int MI, const float *dy, int64_t RO, const float *w, int64_t Cin, int64_t lo,
                        int64_t hi, int full, int64_t a, int64_t z, const uint32x4_t *m, float *c) {
    float32x4_t s[4][4], y[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) s[i][v] = vdupq_n_f32(0.0f);
    for (int64_t co = lo; co < hi; co++) {
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++)
            y[v] = full ? vld1q_f32(dy + co * RO + 4 * v) : ct_ld4_rng(dy + co * RO + 4 * v, a - 4 * v, z - 4 * v);
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++) {
            float32x4_t wv = vld1q_dup_f32(w + co * Cin + i);
            _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) s[i][v] = vfmaq_f32(s[i][v], y[v], wv);
        }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
            float32x4_t cv = vld1q_f32(c + 16 * i + 4 * v), nv = vaddq_f32(cv, s[i][v]);
            vst1q_f32(c + 16 * i + 4 * v, full ? nv : vbslq_f32(m[v], nv, cv));
        }
}
static void ct_gin_neon(const ct_nar_gi *P, int64_t r0, int64_t nr, float *D, int64_t ldd) {
    int64_t K = P->K, Cout = P->Cout, Cin = P->Cin, k0 = P->k0, RO = P->nlo, nG = ct_cdiv(Cout, k0);
    int64_t rend = r0 + nr;
    float c[CT_NW * 16] __attribute__((aligned(16)));
    if (Cin > CT_NW) { ct_gin_port(P, r0, nr, D, ldd); return; }     /* (the table's limit: not reached) */
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
                uint32x4_t m[4];
                for (int v = 0; v < 4; v++) m[v] = ct_mask_rng4(a - 4 * v, z - 4 * v);
                const float *w = P->Wp + (ct_wblk(lo, hi, K, k) - lo) * Cin;
                const float *dy = P->DYc + r + ct_gin_shift(P, k);
                for (int64_t ci = 0; ci < Cin; ci += 4) {
                    switch (ct_min(4, Cin - ci)) {
                        case 4: ct_gin_blk_n(4, dy, RO, w + ci, Cin, lo, hi, full, a, z, m, c + 16 * ci); break;
                        case 3: ct_gin_blk_n(3, dy, RO, w + ci, Cin, lo, hi, full, a, z, m, c + 16 * ci); break;
                        case 2: ct_gin_blk_n(2, dy, RO, w + ci, Cin, lo, hi, full, a, z, m, c + 16 * ci); break;
                        default: ct_gin_blk_n(1, dy, RO, w + ci, Cin, lo, hi, full, a, z, m, c + 16 * ci); break;
                    }
                }
            }
        }
        for (int64_t ci = 0; ci < Cin; ci++)
            for (int v = 0; v < 4; v++) {
                int64_t n = rend - (r + 4 * v);
                if (n > 0) ct_st4(D + ci * ldd + (r - r0) + 4 * v, n, vld1q_f32(c + 16 * ci + 4 * v));
            }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* the table                                                                                        */
/* ------------------------------------------------------------------------------------------------ */
static void ct_gwc_xneon(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                         int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc, int64_t ldc, int cin,
                         ct_gw_pf *F) {
    if (form == CT_ACC_CUBE) ct_gwc_ukr_neon(m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin, F);
    else ct_gwc_gen(form, m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin);
}

static void ct_gic_rows_xneon(int form, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,
                              int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0,
                              int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    if (form != CT_ACC_CUBE) ct_gic_rows_gen(form, i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
    else if (ct_gicn_rows == 4) ct_gic_rows4_neon(i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
    else ct_gic_rows6_neon(i0, i1, n, DYp, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C, ldc);
}

int ct_ukr_init_neon(ct_ukr *U, const ct_ukr_opts *o) {
    ct_gicn_rows = o->gi_rows == 4 ? 4 : 6;
    *U = (ct_ukr){
        .name = "neon",
        /* sequential gradInput: tiles of 6 rows x 16 columns (24 accumulators of the 32 registers) */
        .gi_mr_narrow = 6, .gi_mr_wide = 6, .gwn_mh = 2, .gwn_mw = 4, .narrow_gi_max_cin = CT_NW,
        .decode_row = ct_decode_row_neon, .walk_rows = ct_walk_rows_port, .round_row = ct_round_row_neon,
        .store_row = ct_store_row_neon, .canon_nan = ct_canon_nan_neon, .gb_partials = ct_gb_partials_neon,
        .gi_seq = ct_gi_seq_neon, .gw_seq = ct_gw_seq_neon,
        .gwc = ct_gwc_xneon, .gwc_pair = NULL, .gic_rows = ct_gic_rows_xneon,
        .nar_transpose = ct_nar_neon, .gwn_px = NULL, .gwn = ct_gwn_neon, .gin = ct_gin_neon,
    };
    return 0;
}

#else /* not AArch64 */

int ct_ukr_init_neon(ct_ukr *U, const ct_ukr_opts *o) { (void)U; (void)o; return -1; }

#endif
