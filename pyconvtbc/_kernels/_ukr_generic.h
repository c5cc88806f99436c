/* _ukr_generic.h: the generic C of every micro-kernel (any ISA, every form): the portable table's kernels
 * (_ukr_portable.c) and the vector ISAs' fallbacks (8-bit rows, the exact wide forms, tails).  Each is the
 * definition the vector kernels reproduce bit for bit: one fp32 FMA chain per element in the documented order,
 * or the cube form's blocks.  Static: each ISA file compiles its own copy with its own flags.
 */
#ifndef PYCONVTBC_UKR_GENERIC_H
#define PYCONVTBC_UKR_GENERIC_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "_codes.h"
#include "_fpround.h"
#include "_ukr.h"

/* every ISA file includes all of them and uses some */
#define CT_GEN static __attribute__((unused))

/* ------------------------------------------------------------------------------------------------ */
/* scalar element access                                                                            */
/* ------------------------------------------------------------------------------------------------ */
static inline float ct_load1(const char *p, int dt) {
    if (dt == CT_DT_F32) { float f; memcpy(&f, p, 4); return f; }
    if (dt == CT_DT_HIF8) return pct_hif8_to_f32(*(const uint8_t *)p);     /* the forward's HiFloat8 operands */
    uint16_t h; memcpy(&h, p, 2);
    return dt == CT_DT_F16 ? pct_f16_bits_to_f32(h) : pct_bf16_bits_to_f32(h);
}

static inline float ct_round1(float v, int compute, int hbits, int hrnd) {
    switch (compute) {
        case CT_C_HF32: return pct_round_hf32(v, hbits, hrnd);
        case CT_C_FP16: return pct_f16_bits_to_f32(pct_f32_to_f16_bits(v));
        case CT_C_BF16: return pct_bf16_bits_to_f32(pct_f32_to_bf16_bits(v));
        default: return v;
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* portable row codecs                                                                              */
/* ------------------------------------------------------------------------------------------------ */
CT_GEN void ct_decode_row_port(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_F32 && stride == 4) { memcpy(out, src, (size_t)n * 4); return; }
    for (int64_t i = 0; i < n; i++) out[i] = ct_load1(src + i * stride, dt);
}

CT_GEN void ct_round_row_port(float *v, int64_t n, int compute, int hbits, int hrnd) {
    if (compute == CT_C_FP32) return;
    for (int64_t i = 0; i < n; i++) v[i] = ct_round1(v[i], compute, hbits, hrnd);
}

/* out[i] = cast(acc[i]) to dt; pre (CT_C_FP16/BF16) rounds the accumulator to C first */
CT_GEN void ct_store_row_port(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd, int sat) {
    for (int64_t i = 0; i < n; i++) {
        float v = acc[i];
        if (pre == CT_C_FP16) v = pct_f16_bits_to_f32(pct_f32_to_f16_bits(v));
        else if (pre == CT_C_BF16) v = pct_bf16_bits_to_f32(pct_f32_to_bf16_bits(v));
        switch (dt) {
            case CT_DT_F32: memcpy(dst + 4 * i, &v, 4); break;
            case CT_DT_F16: { uint16_t h = pct_f32_to_f16_bits(v); memcpy(dst + 2 * i, &h, 2); break; }
            case CT_DT_BF16: { uint16_t h = pct_f32_to_bf16_bits(v); memcpy(dst + 2 * i, &h, 2); break; }
            case CT_DT_HIF8: ((uint8_t *)dst)[i] = pct_f32_to_hif8(v, hif8_rnd, sat); break;
            case CT_DT_E4M3: ((uint8_t *)dst)[i] = pct_f32_to_e4m3fn(v, sat); break;
            default: break;
        }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* portable micro-kernels: one fmaf chain per element, in the same order as the vector kernels       */
/* ------------------------------------------------------------------------------------------------ */
/* gi: C[i][j] += sum_{c=c0}^{c1-1} DY(row0+i, c) * Bp[(c-c0)*n + j]                                 */
CT_GEN void ct_gi_ukr_port(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t c0,
                           int64_t c1, int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            float acc = C[i * ldc + j];
            for (int64_t c = c0; c < c1; c++) {
                int64_t q = c / CT_PO, wq = ct_min(CT_PO, Cout - q * CT_PO);
                float a = DYp[q * RO * CT_PO + (row0 + i) * wq + (c - q * CT_PO)];
                acc = fmaf(a, Bp[(c - c0) * n + j], acc);
            }
            C[i * ldc + j] = acc;
        }
    }
}

/* gw: C[i][j] += sum_{p<kc} A[p*lda + i] * B[p*ldb + j] */
CT_GEN void ct_gw_ukr_port(int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, const float *B,
                           int64_t ldb, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            float acc = C[i * ldc + j];
            for (int64_t p = 0; p < kc; p++) acc = fmaf(A[p * lda + i], B[p * ldb + j], acc);
            C[i * ldc + j] = acc;
        }
    }
}

/* gradBias partial sums (ct_ukr.gb_partials) */
CT_GEN void ct_gb_partials_port(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
    float g[CT_PR / CT_GBR][CT_PO];
    int64_t S = ct_cdiv(nr, CT_GBR), full = nr / CT_GBR;
    memset(g, 0, sizeof(g));
    for (int64_t i = 0; i < CT_GBR; i++) {
        for (int64_t s = 0; s < full; s++) {
            const float *row = v + (s * CT_GBR + i) * wq;
            for (int64_t j = 0; j < wq; j++) g[s][j] += row[j];
        }
    }
    for (int64_t i = full * CT_GBR; i < nr; i++)                 /* a last, shorter partial */
        for (int64_t j = 0; j < wq; j++) g[full][j] += v[i * wq + j];
    for (int64_t s0 = 0; s0 < S; s0++) memcpy(out + s0 * ostride, g[s0], (size_t)wq * 4);
}


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

/* ------------------------------------------------------------------------------------------------ */
/* generic (any ISA, every form)                                                                     */
/* ---- the wide forms' exact block sums (CT_ACC_WIDE, CT_ACC_RZ) ----
 * One step: accumulator + the block's products, summed EXACTLY, rounded once to fp32 (to nearest even, or toward
 * zero).  The terms are fp32 values and exact fp32 x fp32 products (doubles of at most 48 significant bits), so
 * every finite term is a multiple of 2^-298 below 2^256 in magnitude: a 640-bit two's complement fixed-point
 * number with its bit 0 at 2^-300 holds any sum of them (up to 2^13 terms) exactly.  A block with an infinite or
 * NaN term gives what IEEE arithmetic gives (the float64 sum, rounded). */
#define CT_XL 10
typedef struct { uint64_t w[CT_XL]; double sp; int nonfin, allnegz; } ct_xsum;

static inline void ct_xsum_init(ct_xsum *S) {
    memset(S->w, 0, sizeof(S->w));
    S->sp = 0.0;
    S->nonfin = 0;
    S->allnegz = 1;
}

static inline void ct_xsum_add(ct_xsum *S, double x) {
    S->sp += x;
    if (!(x == x) || x - x != 0.0) { S->nonfin = 1; return; }          /* NaN or an infinity */
    if (x == 0.0) { if (!signbit(x)) S->allnegz = 0; return; }
    S->allnegz = 0;
    int e;
    double m = frexp(fabs(x), &e);                                      /* |x| = m 2^e, m in [0.5, 1) */
    uint64_t mi = (uint64_t)ldexp(m, 53);                               /* |x| = mi 2^(e - 53), exactly */
    int pos = e - 53 + 300;                                             /* bit of mi's lowest bit */
    if (pos < 0) { mi >>= -pos; pos = 0; }                              /* (those low bits are zeros) */
    int L = pos / 64, off = pos % 64;
    uint64_t lo = mi << off, hi = off ? mi >> (64 - off) : 0;
    if (signbit(x)) {                                                   /* subtract (lo, hi) at limb L */
        uint64_t borrow = S->w[L] < lo;
        S->w[L] -= lo;
        for (int k = L + 1; k < CT_XL; k++) {
            uint64_t sub = (k == L + 1 ? hi : 0), t = S->w[k] - sub - borrow;
            borrow = (S->w[k] < sub) || (S->w[k] - sub < borrow);
            S->w[k] = t;
            if (!borrow && k > L + 1) break;
        }
    } else {                                                            /* add */
        uint64_t t = S->w[L] + lo, carry = t < lo;
        S->w[L] = t;
        for (int k = L + 1; k < CT_XL; k++) {
            uint64_t add = (k == L + 1 ? hi : 0), u = S->w[k] + add;
            uint64_t c2 = u < add;
            u += carry;
            c2 |= u < carry;
            S->w[k] = u;
            carry = c2;
            if (!carry && k > L + 1) break;
        }
    }
}

/* bit b of the magnitude v[] */
static inline int ct_xbit(const uint64_t *v, int b) { return b >= 0 ? (int)((v[b / 64] >> (b % 64)) & 1u) : 0; }

static inline float ct_xsum_round(const ct_xsum *S, int form) {
    if (S->nonfin) return ct_wide_round(form, S->sp);
    uint64_t v[CT_XL];
    int neg = (int)(S->w[CT_XL - 1] >> 63), h = -1;
    uint64_t carry = 1;
    for (int k = 0; k < CT_XL; k++) {                                   /* the magnitude */
        v[k] = neg ? ~S->w[k] + carry : S->w[k];
        if (neg) carry = carry && v[k] == 0;
    }
    for (int k = CT_XL - 1; k >= 0 && h < 0; k--)
        if (v[k]) h = k * 64 + 63 - __builtin_clzll(v[k]);
    if (h < 0) return S->allnegz ? -0.0f : 0.0f;                        /* an exact zero */
    int lsb = ct_max(h - 23, 151);                                      /* 2^-149 at bit 151 */
    uint64_t kept = 0;
    for (int b = h; b >= lsb; b--) kept = (kept << 1) | (uint64_t)ct_xbit(v, b);
    if (form != CT_ACC_RZ && ct_xbit(v, lsb - 1)) {                     /* round to nearest, ties to even */
        int sticky = 0;
        for (int b = lsb - 2; b >= 0 && !sticky; b--) {
            if (b % 64 == 63 && b >= 63 && v[b / 64] == 0) { b -= 63; continue; }
            sticky = ct_xbit(v, b);
        }
        if (sticky || (kept & 1u)) kept++;
    }
    double mag = ldexp((double)kept, lsb - 300);                        /* exact: kept <= 2^24 */
    float f;
    if (mag > 3.4028234663852886e38) f = form == CT_ACC_RZ ? 3.4028234663852886e38f : (float)INFINITY;
    else f = (float)mag;
    return neg ? -f : f;
}

/* ------------------------------------------------------------------------------------------------ */
/* gw: a chain over rows q < nr of A[q*lda + i] * B[q*ldb + j]  (i < m <= 8, j < n <= 32); blocks: the first has
 * `first` rows, then k0 each.  The chain starts at 0, or (Cc != NULL) continues from Cc[i*ldc + j]; it ends with
 * D[i*ldd + j] += chain (D != NULL), or is saved in Cc to be continued (a chain cut into row chunks). */
CT_GEN void ct_gwc_gen(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                       int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc, int64_t ldc,
                       int cin) {
    float c[CT_PX * CT_PO], s[CT_PX * CT_PO];
    ct_xsum d[CT_PX * CT_PO];
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
                for (int64_t j = 0; j < n; j++) {
                    ct_xsum_init(&d[i * CT_PO + j]);
                    ct_xsum_add(&d[i * CT_PO + j], (double)c[i * CT_PO + j]);
                }
            for (int64_t q = p; q < e1; q++)
                for (int64_t i = 0; i < m; i++) {
                    double a = (double)A[q * lda + i];
                    for (int64_t j = 0; j < n; j++) ct_xsum_add(&d[i * CT_PO + j], a * (double)B[q * ldb + j]);
                }
            for (int64_t i = 0; i < m; i++)
                for (int64_t j = 0; j < n; j++) c[i * CT_PO + j] = ct_xsum_round(&d[i * CT_PO + j], form);
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
CT_GEN void ct_gic_gen(int form, int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk,
                       int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout, const float *Bp, float *C,
                       int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        float s[CT_PO];
        ct_xsum d[CT_PO];
        float *c = C + i * ldc;
        for (int64_t jb = jb0; jb < jb1; jb++) {
            int64_t g = jb / K, kk = jb % K, row = row0 + i + kk * dk;
            int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
            const float *Bk = Bp + (ct_wblk(lo, hi, K, kk) - lo) * n;      /* row co of the block at Bk + co*n */
            if (form == CT_ACC_CUBE) for (int64_t j = 0; j < n; j++) s[j] = 0.0f;
            else for (int64_t j = 0; j < n; j++) { ct_xsum_init(&d[j]); ct_xsum_add(&d[j], (double)c[j]); }
            for (int64_t co = lo; co < hi; co++) {
                int64_t q = co / CT_PO, wq = ct_min(CT_PO, Cout - q * CT_PO);
                float a = DYp[q * RO * CT_PO + row * wq + (co - q * CT_PO)];
                const float *b = Bk + co * n;
                if (form == CT_ACC_CUBE) for (int64_t j = 0; j < n; j++) s[j] = fmaf(a, b[j], s[j]);
                else for (int64_t j = 0; j < n; j++) ct_xsum_add(&d[j], (double)a * (double)b[j]);
            }
            if (form == CT_ACC_CUBE) for (int64_t j = 0; j < n; j++) c[j] = c[j] + s[j];
            else for (int64_t j = 0; j < n; j++) c[j] = ct_xsum_round(&d[j], form);
        }
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* [nr][C] -> dst[c*ld + i] (to = 1), or src[c*ld + i] -> [nr][C] (to = 0): C <= CT_NW channels, fp32.  The vector
 * paths gather a channel's 16 (8) rows, or a run of 16 (8) row-major floats, from L1. */
CT_GEN void ct_nar_port(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    for (int64_t i = 0; i < nr; i++)
        for (int64_t c = 0; c < C; c++) {
            if (to) d[c * ld + i] = v[i * C + c];
            else v[i * C + c] = d[c * ld + i];
        }
}


/* ------------------------------------------------------------------------------------------------ */
/* gradWeight: chains of nb (<= CT_NB) items, t in [ta, tz), for mi ci x mo co                        */
/*   X row of t: X + xo + t*xs (+ i*ldx for ci i), DY row: Y + t*B (+ j*ldy); chain (i, j) of item l    */
/*   continues from D[i*ldi + j*ldo + l] and is stored back there                                      */
/* ------------------------------------------------------------------------------------------------ */
CT_GEN void ct_gwn_port(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                        int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D,
                        int64_t ldi, int64_t ldo) {
    for (int64_t i = 0; i < mi; i++)
        for (int64_t j = 0; j < mo; j++)
            for (int64_t l = 0; l < nb; l++) {
                float c = D[i * ldi + j * ldo + l];
                for (int64_t t = ta; t < tz;) {
                    int64_t te = ct_min(tz, (t / k0 + 1) * k0);
                    float s = 0.0f;
                    for (; t < te; t++) s = fmaf(X[xo + t * xs + i * ldx + l], Y[t * B + j * ldy + l], s);
                    c = c + s;
                }
                D[i * ldi + j * ldo + l] = c;
            }
}


/*   t*B + b with 0 <= t + pad - k < T_out; DY of row r for tap k: DYp + co*nlo + r + (pad - k)*B;        */
/*   weights W(k, ci, co) at Wp[(ct_wblk(...) + co - lo) * Cin + ci]; chain (ci, row r) to D[ci*ldd + r-r0] */
/* ------------------------------------------------------------------------------------------------ */
/* the vector drivers' rows for tap k: [*va, *vz), those whose DY row t + pad - k is in the sequence (and below
 * rend); the portable driver checks the same per row.  The forward (gin_fwd): rows t < T_out whose x row
 * t + k - pad is in [0, T_in). */
static inline void ct_gin_valid(const ct_nar_gi *P, int64_t k, int64_t rend, int64_t *va, int64_t *vz) {
    if (P->gin_fwd) {
        *va = ct_max(0, P->pad - k) * P->B;
        *vz = ct_min(rend, ct_min(P->T_out, P->T_in + P->pad - k) * P->B);
        return;
    }
    *va = ct_max(0, k - P->pad) * P->B;
    *vz = ct_min(rend, ct_min(P->T_in, P->T_out + k - P->pad) * P->B);
}
/* the operand row of output row r for tap k, as an offset from r */
static inline int64_t ct_gin_shift(const ct_nar_gi *P, int64_t k) {
    return (P->gin_fwd ? k - P->pad : P->pad - k) * P->B;
}
CT_GEN void ct_gin_port(const ct_nar_gi *P, int64_t r0, int64_t nr, float *D, int64_t ldd) {
    int64_t K = P->K, B = P->B, Cout = P->Cout, Cin = P->Cin, k0 = P->k0, nG = ct_cdiv(Cout, k0);
    for (int64_t i = 0; i < Cin; i++)
        for (int64_t l = 0; l < nr; l++) {
            int64_t r = r0 + l, t = r / B;
            float c = P->gin_start ? P->gin_start[i] : 0.0f;
            for (int64_t g = 0; g < nG; g++) {
                int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
                for (int64_t k = 0; k < K; k++) {
                    int64_t d = P->gin_fwd ? t + k - P->pad : t + P->pad - k;
                    if (d < 0 || d >= (P->gin_fwd ? P->T_in : P->T_out)) continue;
                    const float *w = P->Wp + (ct_wblk(lo, hi, K, k) - lo) * Cin + i;
                    const float *y = P->DYc + r + ct_gin_shift(P, k);
                    float s = 0.0f;
                    for (int64_t co = lo; co < hi; co++) s = fmaf(y[co * P->nlo], w[co * Cin], s);
                    c = c + s;
                }
            }
            D[i * ldd + l] = c;
        }
}


/* NaNs to the canonical NaN of their format (ct_ukr.canon_nan) */
CT_GEN void ct_canon_nan_port(char *dst, int64_t n, int dt) {
    switch (dt) {
        case CT_DT_F32:
            for (int64_t i = 0; i < n; i++) {
                uint32_t u;
                memcpy(&u, dst + 4 * i, 4);
                if ((u & 0x7FFFFFFFu) > 0x7F800000u) { u = CT_NAN_F32; memcpy(dst + 4 * i, &u, 4); }
            }
            break;
        case CT_DT_F16: case CT_DT_BF16: {
            uint16_t inf = dt == CT_DT_F16 ? 0x7C00u : 0x7F80u, nan = dt == CT_DT_F16 ? CT_NAN_F16 : CT_NAN_BF16;
            for (int64_t i = 0; i < n; i++) {
                uint16_t h;
                memcpy(&h, dst + 2 * i, 2);
                if ((h & 0x7FFFu) > inf) memcpy(dst + 2 * i, &nan, 2);
            }
            break;
        }
        case CT_DT_E4M3:         /* both NaN codes (a NaN sum, and an overflow without saturation) */
            for (int64_t i = 0; i < n; i++)
                if ((((uint8_t *)dst)[i] & 0x7Fu) == 0x7Fu) ((uint8_t *)dst)[i] = CT_NAN_E4M3;
            break;
        default: break;          /* HiFloat8: one NaN code already */
    }
}

/* rows of n contiguous fp32 channels walked t fastest (ct_ukr.walk_rows) */
CT_GEN void ct_walk_rows_port(const char *base, int64_t s0, int64_t s1, int64_t T, int64_t t, int64_t b, int64_t nr,
                              int64_t n, float *d) {
    for (int64_t i = 0; i < nr; i++) {
        memcpy(d + i * n, base + t * s0 + b * s1, (size_t)n * 4);
        if (++t == T) { t = 0; b++; }
    }
}

/* ---- the generic table entries (the portable table; the vector tables' fallbacks for other forms) ---- */
CT_GEN void ct_gi_seq_gen(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk, int64_t nk,
                          int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t bk, float *C, int64_t ldc) {
    for (int64_t kk = 0; kk < nk; kk++)
        ct_gi_ukr_port(m, n, DYp, RO, row0 + kk * dk, c0, c1, Cout, Bp + kk * bk, C, ldc);
}

CT_GEN void ct_gw_seq_gen(int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, int64_t ak,
                          const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    for (int64_t kk = 0; kk < nk; kk++) ct_gw_ukr_port(m, n, kc, A + kk * ak, lda, B, ldb, C + kk * ck, ldc);
}

CT_GEN void ct_gwc_any(int form, int64_t m, int64_t n, const float *A, int64_t lda, const float *B, int64_t ldb,
                       int64_t nr, int64_t first, int64_t k0, float *D, int64_t ldd, float *Cc, int64_t ldc, int cin,
                       ct_gw_pf *F) {
    (void)F;
    ct_gwc_gen(form, m, n, A, lda, B, ldb, nr, first, k0, D, ldd, Cc, ldc, cin);
}

CT_GEN void ct_gic_rows_gen(int form, int64_t i0, int64_t i1, int64_t n, const float *DYp, int64_t RO,
                            int64_t rowoff, int64_t dk, int64_t K, int64_t jb0, int64_t jb1, int64_t k0, int64_t Cout,
                            const float *Bp, float *C, int64_t ldc) {
    for (int64_t i = i0; i < i1; i += 8)
        ct_gic_gen(form, ct_min(8, i1 - i), n, DYp, RO, i + rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C + (i - i0) * ldc,
                   ldc);
}

#endif /* PYCONVTBC_UKR_GENERIC_H */
