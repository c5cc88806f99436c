/* ukr_check.c: every entry of one ISA's micro-kernel table (_ukr.h) against the portable table, bit for bit, on
 * random shapes and operands (NaN, infinities, zeros of both signs, subnormals, huge values among them).
 *
 *   cc -O3 -ffp-contract=off -fno-fast-math -I pyconvtbc/_kernels tests/ukr_check.c pyconvtbc/_kernels/_ukr_*.c -lm
 *   ./a.out ISA_CODE [ROUNDS [SEED]]        # ISA_CODE: CT_ISA_* (1 avx2, 2 avx512, 3 neon, 4 amx, 5 amx_standin)
 *
 * Whole output buffers are compared (so a write outside a kernel's tile shows too): the codecs bit for bit, the
 * arithmetic bit for bit but for the sign and payload of NaNs (x86 and ARM pick a NaN result's pattern by their
 * own rules; the operators write one canonical NaN), which are counted apart.  Prints one line per entry
 * (cases run, cases that differ) and exits 1 when any differ, 2 when the table cannot run here.
 * tests/test_ukr_tables.py builds and runs it for every vector ISA that runs.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "_ukr.h"

static uint64_t rs = 88172645463325252ull;
static uint64_t rnd(void) { rs ^= rs << 13; rs ^= rs >> 7; rs ^= rs << 17; return rs; }
static int64_t rint_(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }  /* [lo, hi] */

static float bits_f(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
/* the AMX tables, every other round: every value a bf16 value (low half zero) and specials rare, so that most
 * tiles pass the guard and run on the tile steps */
static int bf16_data;
static float rval_any(void);
static float rval(void) {
    float f = rval_any();
    if (bf16_data) {     /* (masked in place: GCC 12 at -O1 / -O2 drops the mask in f = bits_f(u & mask)) */
        uint32_t u;
        memcpy(&u, &f, 4);
        u &= 0xFFFF0000u;
        memcpy(&f, &u, 4);
    }
    return f;
}
/* mostly ordinary values of varied magnitude; 1 in 40 special (1 in 4000 in bf16 rounds) */
static float rval_any(void) {
    if (rnd() % (bf16_data ? 4000 : 40) == 0) {
        static const uint32_t sp[] = {0x7FC00000u, 0x7F800000u, 0xFF800000u, 0x00000000u, 0x80000000u, 0x00000123u,
                                      0x80400000u, 0x7F7FFFFFu, 0x38800000u, 0x33800001u, 0x477FF000u, 0xC77FEFFFu,
                                      0xFFC04000u, 0x7FC02000u, 0x7F802000u};
        return bits_f(sp[rnd() % (sizeof(sp) / sizeof(sp[0]))]);
    }
    float m = (float)((int64_t)(rnd() % 2000001) - 1000000) / 500000.0f;
    return ldexpf(m, (int)rint_(-12, 12));
}
static void fill(float *p, int64_t n) { for (int64_t i = 0; i < n; i++) p[i] = rval(); }
static void fill_bits(void *p, int64_t nbytes) {
    uint8_t *b = p;
    for (int64_t i = 0; i < nbytes; i++) b[i] = (uint8_t)rnd();
}

typedef struct { const char *name; long run, bad, nan; } ct_count;
static ct_count cnt[16];
static int ncnt;
static ct_count *counter(const char *name) {
    for (int i = 0; i < ncnt; i++) if (!strcmp(cnt[i].name, name)) return &cnt[i];
    cnt[ncnt].name = name;
    return &cnt[ncnt++];
}
static int is_nan_bits(uint32_t u) { return (u & 0x7FFFFFFFu) > 0x7F800000u; }
/* exact: the codecs (every bit defined); fp32 results of arithmetic: equal bits, or both NaN (the operators write
 * one canonical NaN: a NaN's sign and payload from the arithmetic are not part of the contract), counted apart */
static void verdict_x(const char *name, const void *a, const void *b, size_t n, const char *what, int exact) {
    ct_count *c = counter(name);
    c->run++;
    if (!memcmp(a, b, n)) return;
    if (!exact) {
        const uint32_t *x = a, *y = b;
        int real = 0;
        for (size_t i = 0; i < n / 4; i++)
            if (x[i] != y[i] && !(is_nan_bits(x[i]) && is_nan_bits(y[i]))) real = 1;
        if (!real) { c->nan++; return; }
    }
    if (c->bad++ < 3) fprintf(stderr, "DIFF %s: %s\n", name, what);
}
static void verdict(const char *name, const void *a, const void *b, size_t n, const char *what) {
    verdict_x(name, a, b, n, what, 0);
}
static void verdict_exact(const char *name, const void *a, const void *b, size_t n, const char *what) {
    verdict_x(name, a, b, n, what, 1);
}

static ct_ukr P, V;

/* buffers: two copies of each output */
#define NEWF(n) ((float *)calloc((size_t)(n) + 64, 4))

static void check_gi_seq(void) {
    /* m: up to the table's rows per micro-tile (the drivers' limit: ct_gi_mr) */
    int64_t Cout = rint_(1, 80), n = rint_(1, 32), m = rint_(1, n <= 16 ? V.gi_mr_narrow : V.gi_mr_wide);
    int64_t nk = rint_(1, 3), RO = rint_(20, 40);
    int64_t c0 = rint_(0, Cout - 1), c1 = rint_(c0 + 1, Cout), dk = rint_(-3, 3);
    int64_t span = (nk - 1) * (dk < 0 ? -dk : dk) + m;
    if (span > RO) return;
    int64_t row0 = dk < 0 ? rint_((nk - 1) * -dk, RO - m) : rint_(0, RO - span);
    int64_t nq = ct_cdiv(Cout, CT_PO), bk = (c1 - c0) * n + rint_(0, 5), ldc = n + rint_(0, 5);
    float *DY = NEWF(nq * RO * CT_PO), *Bp = NEWF(nk * bk), *C1 = NEWF(m * ldc), *C2 = NEWF(m * ldc);
    fill(DY, nq * RO * CT_PO); fill(Bp, nk * bk); fill(C1, m * ldc);
    memcpy(C2, C1, (size_t)(m * ldc) * 4);
    P.gi_seq(m, n, DY, RO, row0, dk, nk, c0, c1, Cout, Bp, bk, C1, ldc);
    V.gi_seq(m, n, DY, RO, row0, dk, nk, c0, c1, Cout, Bp, bk, C2, ldc);
    char w[160];
    snprintf(w, sizeof w, "m=%ld n=%ld nk=%ld c0=%ld c1=%ld Cout=%ld", (long)m, (long)n, (long)nk, (long)c0,
             (long)c1, (long)Cout);
    verdict("gi_seq", C1, C2, (size_t)(m * ldc) * 4, w);
    free(DY); free(Bp); free(C1); free(C2);
}

static void check_gw_seq(void) {
    int64_t nk = rint_(1, 3), m = rint_(1, 8), n = rint_(1, 32), kc = rint_(0, 70);
    int64_t lda = m + rint_(0, 3), ak = rint_(0, 3) * lda, ldb = n + rint_(0, 3), ldc = n + rint_(0, 3);
    int64_t ck = m * ldc + rint_(0, 7);
    int64_t na = (nk - 1) * ak + kc * lda + m, nc = nk * ck;
    float *A = NEWF(na), *B = NEWF(kc * ldb + n), *C1 = NEWF(nc), *C2 = NEWF(nc);
    fill(A, na); fill(B, kc * ldb + n); fill(C1, nc);
    memcpy(C2, C1, (size_t)nc * 4);
    P.gw_seq(nk, m, n, kc, A, lda, ak, B, ldb, C1, ldc, ck);
    V.gw_seq(nk, m, n, kc, A, lda, ak, B, ldb, C2, ldc, ck);
    char w[120];
    snprintf(w, sizeof w, "nk=%ld m=%ld n=%ld kc=%ld", (long)nk, (long)m, (long)n, (long)kc);
    verdict("gw_seq", C1, C2, (size_t)nc * 4, w);
    free(A); free(B); free(C1); free(C2);
}

static void check_gwc(void) {
    int form = (int)rint_(0, 5) < 4 ? CT_ACC_CUBE : (int)rint_(CT_ACC_WIDE, CT_ACC_RZ);
    int64_t m = rint_(1, 8), n = rint_(1, 32), nr = rint_(0, 80), k0 = rint_(1, 20), first = rint_(1, k0);
    int64_t lda = m + rint_(0, 3), ldb = n + rint_(0, 3), ldd = n + rint_(0, 3), ldc = n + rint_(0, 3);
    int cin = (int)(rnd() & 1), useD = (int)(rnd() % 3 != 0);
    float *A = NEWF(nr * lda + m), *B = NEWF(nr * ldb + n);
    float *D1 = NEWF(m * ldd), *D2 = NEWF(m * ldd), *K1 = NEWF(m * ldc), *K2 = NEWF(m * ldc);
    fill(A, nr * lda + m); fill(B, nr * ldb + n); fill(D1, m * ldd); fill(K1, m * ldc);
    memcpy(D2, D1, (size_t)(m * ldd) * 4);
    memcpy(K2, K1, (size_t)(m * ldc) * 4);
    P.gwc(form, m, n, A, lda, B, ldb, nr, first, k0, useD ? D1 : NULL, ldd, K1, ldc, cin, NULL);
    V.gwc(form, m, n, A, lda, B, ldb, nr, first, k0, useD ? D2 : NULL, ldd, K2, ldc, cin, NULL);
    char w[160];
    snprintf(w, sizeof w, "form=%d m=%ld n=%ld nr=%ld first=%ld k0=%ld cin=%d D=%d", form, (long)m, (long)n, (long)nr,
             (long)first, (long)k0, cin, useD);
    verdict(form == CT_ACC_CUBE ? "gwc cube" : "gwc wide/rz", D1, D2, (size_t)(m * ldd) * 4, w);
    verdict(form == CT_ACC_CUBE ? "gwc cube" : "gwc wide/rz", K1, K2, (size_t)(m * ldc) * 4, w);
    free(A); free(B); free(D1); free(D2); free(K1); free(K2);
}

static void check_gic_rows(void) {
    int form = (int)rint_(0, 5) < 4 ? CT_ACC_CUBE : (int)rint_(CT_ACC_WIDE, CT_ACC_RZ);
    static const int64_t k0s[] = {8, 16, 3, 5, 32};
    int64_t Cout = rint_(1, 80), K = rint_(1, 4), k0 = k0s[rnd() % 5], n = rnd() % 2 ? 32 : rint_(1, 32);
    int64_t nG = ct_cdiv(Cout, k0), RO = rint_(24, 48), m = rint_(1, 15), dk = rint_(-2, 2);
    int64_t span = (K - 1) * (dk < 0 ? -dk : dk) + m;
    if (span > RO) return;
    int64_t row0 = dk < 0 ? rint_((K - 1) * -dk, RO - m) : rint_(0, RO - span);
    int64_t jb0 = rint_(0, nG * K - 1), jb1 = rint_(jb0 + 1, nG * K), ldc = n + rint_(0, 3);
    int64_t i0 = rint_(0, 5), rowoff = row0 - i0, nq = ct_cdiv(Cout, CT_PO);
    int64_t nb = Cout * K * n;
    float *DY = NEWF(nq * RO * CT_PO), *Bp = NEWF(nb), *C1 = NEWF(m * ldc), *C2 = NEWF(m * ldc);
    fill(DY, nq * RO * CT_PO); fill(Bp, nb); fill(C1, m * ldc);
    memcpy(C2, C1, (size_t)(m * ldc) * 4);
    P.gic_rows(form, i0, i0 + m, n, DY, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C1, ldc);
    V.gic_rows(form, i0, i0 + m, n, DY, RO, rowoff, dk, K, jb0, jb1, k0, Cout, Bp, C2, ldc);
    char w[200];
    snprintf(w, sizeof w, "form=%d m=%ld n=%ld Cout=%ld K=%ld k0=%ld jb=[%ld,%ld) dk=%ld", form, (long)m, (long)n,
             (long)Cout, (long)K, (long)k0, (long)jb0, (long)jb1, (long)dk);
    verdict(form == CT_ACC_CUBE ? "gic_rows cube" : "gic_rows wide/rz", C1, C2, (size_t)(m * ldc) * 4, w);
    free(DY); free(Bp); free(C1); free(C2);
}

static void check_codecs(void) {
    /* decode: every fp16 / bf16 pattern once (first round), then random rows and strides */
    static int once;
    if (!once) {
        once = 1;
        uint16_t *h = malloc(65536 * 2);
        float *o1 = NEWF(65536), *o2 = NEWF(65536);
        for (int i = 0; i < 65536; i++) h[i] = (uint16_t)i;
        int dts[2] = {CT_DT_F16, CT_DT_BF16};
        for (int d = 0; d < 2; d++) {
            P.decode_row((const char *)h, 2, dts[d], 65536, o1);
            V.decode_row((const char *)h, 2, dts[d], 65536, o2);
            verdict_exact("decode_row", o1, o2, 65536 * 4, d ? "all bf16" : "all fp16");
        }
        free(h); free(o1); free(o2);
    }
    static const int dts[] = {CT_DT_F32, CT_DT_F16, CT_DT_BF16, CT_DT_HIF8};
    int dt = dts[rnd() % 4], es = ct_dt_size(dt);
    int64_t n = rint_(0, 45), stride = es * rint_(1, 3);
    char *src = malloc((size_t)(n * stride + 8));
    fill_bits(src, n * stride + 8);
    float *o1 = NEWF(n), *o2 = NEWF(n);
    P.decode_row(src, stride, dt, n, o1);
    V.decode_row(src, stride, dt, n, o2);
    char w[100];
    snprintf(w, sizeof w, "dt=%d n=%ld stride=%ld", dt, (long)n, (long)stride);
    verdict_exact("decode_row", o1, o2, (size_t)n * 4, w);
    free(src); free(o1); free(o2);

    /* round_row: random bit patterns and values */
    int compute = (int)rint_(0, 3), hbits = (int)rint_(0, 23), hrnd = (int)rint_(0, 1);
    n = rint_(0, 45);
    float *v1 = NEWF(n), *v2 = NEWF(n);
    if (rnd() & 1) fill_bits(v1, n * 4); else fill(v1, n);
    memcpy(v2, v1, (size_t)n * 4);
    P.round_row(v1, n, compute, hbits, hrnd);
    V.round_row(v2, n, compute, hbits, hrnd);
    snprintf(w, sizeof w, "compute=%d hbits=%d hrnd=%d n=%ld", compute, hbits, hrnd, (long)n);
    verdict_exact("round_row", v1, v2, (size_t)n * 4, w);

    /* store_row */
    static const int sdts[] = {CT_DT_F32, CT_DT_F16, CT_DT_BF16, CT_DT_HIF8, CT_DT_E4M3};
    dt = sdts[rnd() % 5];
    int pre = (int)rint_(0, 3), h8 = (int)rint_(0, 1), sat = (int)rint_(0, 1);
    if (rnd() & 1) fill_bits(v1, n * 4); else fill(v1, n);
    char *d1 = calloc((size_t)(4 * n + 16), 1), *d2 = calloc((size_t)(4 * n + 16), 1);
    P.store_row(v1, n, d1, dt, pre, h8, sat);
    V.store_row(v1, n, d2, dt, pre, h8, sat);
    snprintf(w, sizeof w, "dt=%d pre=%d n=%ld", dt, pre, (long)n);
    verdict_exact("store_row", d1, d2, (size_t)(4 * n + 16), w);

    /* canon_nan: random patterns (NaNs of every payload among them) in every class */
    dt = sdts[rnd() % 5];
    fill_bits(d1, 4 * n + 16);
    memcpy(d2, d1, (size_t)(4 * n + 16));
    P.canon_nan(d1, n, dt);
    V.canon_nan(d2, n, dt);
    snprintf(w, sizeof w, "dt=%d n=%ld", dt, (long)n);
    verdict_exact("canon_nan", d1, d2, (size_t)(4 * n + 16), w);
    free(v1); free(v2); free(d1); free(d2);
}

static void check_gb(void) {
    int64_t nr = rnd() % 4 ? rint_(0, 700) : rint_(0, CT_PR), wq = rint_(1, 32), S = ct_cdiv(nr, CT_GBR);
    int64_t ostride = wq + rint_(0, 5);
    float *v = NEWF(nr * wq), *o1 = NEWF(S * ostride + wq), *o2 = NEWF(S * ostride + wq);
    fill(v, nr * wq);
    P.gb_partials(v, nr, wq, o1, ostride);
    V.gb_partials(v, nr, wq, o2, ostride);
    char w[80];
    snprintf(w, sizeof w, "nr=%ld wq=%ld", (long)nr, (long)wq);
    verdict("gb_partials", o1, o2, (size_t)(S * ostride + wq) * 4, w);
    free(v); free(o1); free(o2);
}

static void check_narrow(void) {
    /* transposes */
    int64_t C = rint_(2, CT_NW), nr = rint_(0, 70), ld = nr + rint_(0, 5);
    int to = (int)(rnd() & 1);
    float *v1 = NEWF(nr * C), *v2 = NEWF(nr * C), *d1 = NEWF(C * ld), *d2 = NEWF(C * ld);
    fill(v1, nr * C); fill(d1, C * ld);
    memcpy(v2, v1, (size_t)(nr * C) * 4);
    memcpy(d2, d1, (size_t)(C * ld) * 4);
    P.nar_transpose(to, v1, nr, C, d1, ld);
    V.nar_transpose(to, v2, nr, C, d2, ld);
    char w[200];
    snprintf(w, sizeof w, "to=%d C=%ld nr=%ld", to, (long)C, (long)nr);
    verdict_exact("nar_transpose", v1, v2, (size_t)(nr * C) * 4, w);
    verdict_exact("nar_transpose", d1, d2, (size_t)(C * ld) * 4, w);
    free(v1); free(v2); free(d1); free(d2);

    /* gwn: X rows CT_NB apart per t, ldx per ci; Y rows B apart per t, ldy per co */
    int64_t mi = rint_(1, V.gwn_mh), mo = rint_(1, V.gwn_mw), nb = rint_(1, CT_NB), B = nb + rint_(0, 20);
    int64_t T = rint_(1, 40), ta = rint_(0, T - 1), tz = rint_(ta + 1, T), k0 = rint_(1, 12);
    int64_t ldx = T * CT_NB + rint_(0, 4), ldy = T * B + rint_(0, 4), ldi = mo * 20 * CT_NB, ldo = 20 * CT_NB;
    int64_t nx = mi * ldx, ny = mo * ldy, nd = mi * ldi;
    float *X = NEWF(nx), *Y = NEWF(ny), *D1 = NEWF(nd), *D2 = NEWF(nd);
    fill(X, nx); fill(Y, ny); fill(D1, nd);
    memcpy(D2, D1, (size_t)nd * 4);
    P.gwn(mi, mo, X, 0, CT_NB, ldx, Y, ldy, B, ta, tz, k0, nb, D1, ldi, ldo);
    V.gwn(mi, mo, X, 0, CT_NB, ldx, Y, ldy, B, ta, tz, k0, nb, D2, ldi, ldo);
    snprintf(w, sizeof w, "mi=%ld mo=%ld nb=%ld t=[%ld,%ld) k0=%ld", (long)mi, (long)mo, (long)nb, (long)ta, (long)tz,
             (long)k0);
    verdict("gwn", D1, D2, (size_t)nd * 4, w);
    free(X); free(Y); free(D1); free(D2);

    /* gin: gradInput (gin_fwd 0) and the forward (1) */
    ct_nar_gi G;
    memset(&G, 0, sizeof G);
    G.gin_fwd = (int)(rnd() & 1);
    G.B = rint_(1, 9); G.K = rint_(1, 4); G.pad = rint_(0, G.K - 1); G.T_in = rint_(1, 12);
    G.T_out = G.T_in + 2 * G.pad - G.K + 1;
    if (G.T_out < 1) return;
    G.Cin = rint_(1, CT_NW); G.Cout = rint_(1, 40); G.k0 = rint_(1, 16);
    int64_t rows_in = (G.gin_fwd ? G.T_in : G.T_out) * G.B, rows_out = (G.gin_fwd ? G.T_out : G.T_in) * G.B;
    G.nlo = rows_in + rint_(0, 4);
    float *Wp = NEWF(G.Cout * G.K * G.Cin), *DYc = NEWF(G.Cout * G.nlo), *st = NEWF(G.Cin);
    fill(Wp, G.Cout * G.K * G.Cin); fill(DYc, G.Cout * G.nlo); fill(st, G.Cin);
    G.Wp = Wp; G.DYc = DYc; G.gin_start = rnd() & 1 ? st : NULL;
    int64_t r0 = rint_(0, rows_out - 1), nrr = rint_(1, rows_out - r0), ldd = nrr + rint_(0, 3);
    float *o1 = NEWF(G.Cin * ldd), *o2 = NEWF(G.Cin * ldd);
    fill(o1, G.Cin * ldd);
    memcpy(o2, o1, (size_t)(G.Cin * ldd) * 4);
    P.gin(&G, r0, nrr, o1, ldd);
    V.gin(&G, r0, nrr, o2, ldd);
    snprintf(w, sizeof w, "fwd=%d B=%ld K=%ld pad=%ld T_in=%ld Cin=%ld Cout=%ld k0=%ld r0=%ld nr=%ld", G.gin_fwd,
             (long)G.B, (long)G.K, (long)G.pad, (long)G.T_in, (long)G.Cin, (long)G.Cout, (long)G.k0, (long)r0,
             (long)nrr);
    verdict("gin", o1, o2, (size_t)(G.Cin * ldd) * 4, w);
    free(Wp); free(DYc); free(st); free(o1); free(o2);
}

int main(int argc, char **argv) {
    int isa = argc > 1 ? atoi(argv[1]) : CT_ISA_N - 1;
    long rounds = argc > 2 ? atol(argv[2]) : 2000;
    if (argc > 3) rs = strtoull(argv[3], NULL, 10) | 1u;
    ct_ukr_opts o = {1, 0, 0, 0};
    int amx = isa == CT_ISA_AMX || isa == CT_ISA_AMX_SW;
    if (ct_ukr_init_portable(&P, &o) != 0 || !ct_isa_runs(isa) || ct_ukr_select(&V, isa, &o) != 0) {
        printf("ISA %d does not run here\n", isa);
        return 2;
    }
    for (long r = 0; r < rounds; r++) {
        if (r == rounds / 2) {            /* the other tile height of the cube gradInput for the second half, */
            o.gi_rows = 4;
            o.amx_pack = -1;              /* and the AMX tables' generic packing */
            ct_ukr_select(&V, isa, &o);
        }
        bf16_data = amx && r % 2;
        check_gi_seq(); check_gw_seq(); check_gwc(); check_gic_rows(); check_codecs(); check_gb(); check_narrow();
    }
    if (amx) {
        int64_t steps, falls;
        ct_amx_counts(isa == CT_ISA_AMX, 0, &steps, &falls);
        printf("tile steps         %s: %ld steps, %ld blocks to the FMA kernels\n", V.name, (long)steps, (long)falls);
    }
    long bad = 0;
    for (int i = 0; i < ncnt; i++) {
        printf("%-18s %s: %ld cases, %ld differ (%ld more differ only in NaN patterns)\n", cnt[i].name, V.name,
               cnt[i].run, cnt[i].bad, cnt[i].nan);
        bad += cnt[i].bad;
    }
    return bad ? 1 : 0;
}
