/* _conv_pack.h: the backward's pack tasks (DY, X, W into the workspace's panels, rounded to the compute
 * precision; gradBias's partial sums fused into the DY pack) and the row helpers both operators' packs share
 * (ct_decode_rows, ct_pack_rows, ct_window_pack: they take a ct_pk, _conv_roles.h, never a plan).
 *
 * Panels (docs/performance.md has the why):
 *   DY -> DYp  [co-panel q of 32][row r = t*B+b][wq]   rounded to C; gb partial sums fused (fixed chunks)
 *   X  -> Xp   [ci-panel p of 8][row r][wi]            rounded to C
 *   W  -> Wp   [k][ci-panel of 32][co][wj]             rounded to C (cube forms: block order, ct_wblk)
 *   (fp32 DY / X that already are one dense panel and need no rounding are read in place: ct_plan_direct)
 */
#ifndef PYCONVTBC_CONV_PACK_H
#define PYCONVTBC_CONV_PACK_H

#include "_conv_plan.h"

/* decode rows [r, r+nr) (r = t*B + b) of channels [c0, c0+n) of a (T, B, C) view into out[nr][n] (fp32) */
#define CT_RB 64   /* rows per pack step */
static void ct_decode_rows(const ct_pk *pk, const ct_src *S, int64_t C, int64_t r, int64_t nr, int64_t c0,
                           int64_t n, float *out) {
    int64_t es = ct_dt_size(S->dt);
    int64_t t = r / pk->B, b = r - t * pk->B;
    if (S->s2 == es && c0 == 0 && n == C && S->s1 == C * es && S->s0 == pk->B * S->s1) {
        /* the rows are one contiguous run of memory */
        pk->U->decode_row(S->base + t * S->s0 + b * S->s1, es, S->dt, nr * n, out);
        return;
    }
    for (int64_t i = 0; i < nr; i++) {
        pk->U->decode_row(S->base + t * S->s0 + b * S->s1 + c0 * S->s2, S->s2, S->dt, n, out + i * n);
        if (++b == pk->B) { b = 0; t++; }
    }
}

/* rows [r, r + n) of source S (C channels), channels [c0, c0 + w), into v as [n][w] fp32, rounded to C: one panel's
 * rows, as the packs of a whole operand and of a streamed window store them */
static void ct_pack_rows(const ct_pk *pk, const ct_src *S, int64_t C, int64_t r, int64_t n, int64_t c0, int64_t w,
                         float *v) {
    for (int64_t rr = r; rr < r + n; rr += CT_RB)
        ct_decode_rows(pk, S, C, rr, ct_min(CT_RB, r + n - rr), c0, w, v + (rr - r) * w);
    pk->U->round_row(v, n * w, ct_round_for(S->dt, pk->compute), pk->hbits, pk->hrnd);
}

/* gb partial sums (see ct_gb_partials), one scalar chain per channel and partial */

static void ct_pack_dy(const ct_plan *P, int64_t task) {
    int64_t chunk = task / P->tk.nq, q = task % P->tk.nq;
    int64_t r0 = chunk * CT_PR, r1 = ct_min(P->RO, r0 + CT_PR);
    int64_t co0 = q * CT_PO, wq = ct_min(CT_PO, P->Cout - co0);
    float *gout = P->ws.gbp + (chunk * (CT_PR / CT_GBR)) * P->Cout + co0;
    ct_pk pk = ct_plan_pk(P);
    if (P->ws.dy_direct) {                                          /* the panel is the caller's DY: gb only */
        P->U->gb_partials(P->ws.DYp + r0 * wq, r1 - r0, wq, gout, P->Cout);
        return;
    }
    if (P->ws.DYp) {
        /* the panel rows [r0, r1) are contiguous [rows][wq]: decode straight into them, sum, then round */
        float *v = P->ws.DYp + q * P->RO * CT_PO + r0 * wq;
        for (int64_t rr = r0; rr < r1; rr += CT_RB)
            ct_decode_rows(&pk, &P->dy, P->Cout, rr, ct_min(CT_RB, r1 - rr), co0, wq, v + (rr - r0) * wq);
        P->U->gb_partials(v, r1 - r0, wq, gout, P->Cout);
        P->U->round_row(v, (r1 - r0) * wq, ct_round_for(P->dy.dt, P->compute), P->hbits, P->hrnd);
        return;
    }
    float tmp[CT_GBR * CT_PO];                                   /* gb only (no products) */
    for (int64_t rr = r0; rr < r1; rr += CT_GBR) {
        int64_t nr = ct_min(CT_GBR, r1 - rr);
        for (int64_t r2 = rr; r2 < rr + nr; r2 += CT_RB)
            ct_decode_rows(&pk, &P->dy, P->Cout, r2, ct_min(CT_RB, rr + nr - r2), co0, wq, tmp + (r2 - rr) * wq);
        P->U->gb_partials(tmp, nr, wq, gout + ((rr - r0) / CT_GBR) * P->Cout, P->Cout);
    }
}

static void ct_pack_x(const ct_plan *P, int64_t task) {
    int64_t chunk = task / P->tk.n_xg, g = task % P->tk.n_xg;
    int64_t r0 = chunk * CT_PR, r1 = ct_min(P->RI, r0 + CT_PR);
    int64_t p0 = g * CT_XG, p1 = ct_min(P->tk.nxp, p0 + CT_XG);
    int64_t ci0 = p0 * CT_PX, ci1 = ct_min(P->Cin, p1 * CT_PX), n = ci1 - ci0;
    float tmp[CT_RB * CT_XG * CT_PX];
    ct_pk pk = ct_plan_pk(P);
    for (int64_t rr = r0; rr < r1; rr += CT_RB) {
        int64_t nr = ct_min(CT_RB, r1 - rr);
        if (p1 - p0 == 1 && !P->sm.bmajor) {   /* one panel: its rows [rr, rr+nr) are contiguous [nr][n] */
            float *v = P->ws.Xp + p0 * P->RI * CT_PX + rr * n;
            ct_decode_rows(&pk, &P->x, P->Cin, rr, nr, ci0, n, v);
            P->U->round_row(v, nr * n, ct_round_for(P->x.dt, P->compute), P->hbits, P->hrnd);
            continue;
        }
        if (P->sm.bmajor) {
            /* b-major panels are filled in their own row order: row b*T_in + t is source row t*B + b, so that
             * every panel is written sequentially (scattering the source rows instead wrote B streams a panel).
             * A single panel is filled in place, and narrow fp32 rows are copied with one vector each: a decode
             * call per row of a few channels cost more than the rest of a small call */
            float *d = p1 - p0 == 1 ? P->ws.Xp + p0 * P->RI * CT_PX + rr * n : tmp;
            int64_t b = rr / P->T_in, t = rr - b * P->T_in;
            const char *base = P->x.base + ci0 * P->x.s2;
            if (P->x.dt == CT_DT_F32 && P->x.s2 == 4 && n <= 16) {
                P->U->walk_rows(base, P->x.s0, P->x.s1, P->T_in, t, b, nr, n, d);
            } else {
                for (int64_t i = 0; i < nr; i++) {
                    P->U->decode_row(base + t * P->x.s0 + b * P->x.s1, P->x.s2, P->x.dt, n, d + i * n);
                    if (++t == P->T_in) { t = 0; b++; }
                }
            }
            P->U->round_row(d, nr * n, ct_round_for(P->x.dt, P->compute), P->hbits, P->hrnd);
            if (d != tmp) continue;
        } else {
            ct_decode_rows(&pk, &P->x, P->Cin, rr, nr, ci0, n, tmp);
            P->U->round_row(tmp, nr * n, ct_round_for(P->x.dt, P->compute), P->hbits, P->hrnd);
        }
        for (int64_t p = p0; p < p1; p++) {
            int64_t wi = ct_min(CT_PX, P->Cin - p * CT_PX);
            float *d = P->ws.Xp + p * P->RI * CT_PX + rr * wi;
            const float *s = tmp + (p - p0) * CT_PX;
            if (wi == CT_PX)
                for (int64_t i = 0; i < nr; i++) memcpy(d + i * CT_PX, s + i * n, CT_PX * 4);
            else
                for (int64_t i = 0; i < nr; i++) memcpy(d + i * wi, s + i * n, (size_t)wi * 4);
        }
    }
}

/* Wp[k][cp][co][j] = w[k, 32cp + j, co]: a transpose, done through a [32][64] tile so that both the reads
 * (along co) and the writes (along j) are sequential.  Cube forms: panel cp at Wp + 32cp*K*Cout, its rows in
 * block order (ct_wblk). */
static void ct_pack_w(const ct_plan *P, int64_t task) {
    int64_t k = task / P->tk.nwp, cp = task % P->tk.nwp;
    int64_t ci0 = cp * CT_PO, wj = ct_min(CT_PO, P->Cin - ci0);
    int cube = P->sm.acc != CT_ACC_SEQ;
    float *dst = cube ? P->ws.Wp + ci0 * P->K * P->Cout : P->ws.Wp + k * P->Cin * P->Cout + ci0 * P->Cout;
    float v[CT_PO * 64];
    for (int64_t c0 = 0; c0 < P->Cout; c0 += 64) {
        int64_t n = ct_min(64, P->Cout - c0);
        if (c0 > 0 && c0 % CT_POLL_ROWS == 0 && ct_stop(P)) return;      /* bounded work per poll */
        for (int64_t j = 0; j < wj; j++) {
            const char *row = P->w.base + k * P->w.s0 + (ci0 + j) * P->w.s1 + c0 * P->w.s2;
            P->U->decode_row(row, P->w.s2, P->w.dt, n, v + j * 64);
            P->U->round_row(v + j * 64, n, ct_round_for(P->w.dt, P->compute), P->hbits, P->hrnd);
        }
        for (int64_t c = 0; c < n; c++) {
            int64_t co = c0 + c, row = co;
            if (cube) {
                int64_t lo = co - co % P->sm.k0;
                row = ct_wblk(lo, ct_min(P->Cout, lo + P->sm.k0), P->K, k) + co - lo;
            }
            for (int64_t j = 0; j < wj; j++) dst[row * wj + j] = v[j * 64 + c];
        }
    }
}

/* pack task `task` of a window holding operand rows [ra, rz): CT_PR rows of panel q (nq panels of the C channels
 * of source S, ps rows each), at panel row r - ra of `panels` */
static void ct_window_pack(const ct_pk *pk, const ct_src *S, int64_t C, float *panels, int64_t ps, int64_t nq,
                           int64_t ra, int64_t rz, int64_t task) {
    int64_t c = task / nq, q = task % nq, r0 = ra + c * CT_PR, r1 = ct_min(rz, r0 + CT_PR);
    int64_t c0 = q * CT_PO, wq = ct_min(CT_PO, C - c0);
    ct_pack_rows(pk, S, C, r0, r1 - r0, c0, wq, panels + q * ps * CT_PO + (r0 - ra) * wq);
}

#endif /* PYCONVTBC_CONV_PACK_H */
