/* _conv_narrow.h: the "cube" form for narrow channels (Cin, Cout <= CT_NW), ascend910b / ascend910 order (and
 * gradInput on ascend950, whose gradInput order is the same: P->nr.narrow_gi).
 *
 * With a few channels the cube kernels, whose vector lanes run
 * along the channels, leave most lanes idle (2 of 16 at C = 2): the per-item gradWeight chains and the
 * gradInput blocks then cost 2-3x the sequential form.  Here the lanes run along the other axis instead:
 *   gradWeight: lanes = batch items b (an item block of CT_NB; a task runs one or more blocks).  Item b's chain
 *     for (k, ci, co) is the model's: blocks of k0 t's aligned at t = 0 (t's whose X row lies outside the
 *     sequence skipped), each block an fp32 FMA chain from +0, added into the chain (started at +0) with one
 *     fp32 add.  The chains are stored at P->ws.pcb, [item block][k][ci][co][CT_NB], and a post task adds them into
 *     the output (from +0) in the order perm (b order when NULL), one fp32 add each.
 *   gradInput: lanes = rows r = t*B + b.  Row r's chain over the blocks (g, k) (channel group g of k0 outer,
 *     tap k inner, taps whose DY row lies outside the sequence skipped: a masked add), each block an FMA chain
 *     from +0 over the group's channels in order, added into the chain (from +0).
 * Per element these are exactly the operations of ct_gwc_gen / ct_gic_gen in the same order, so results are
 * bitwise those of the other cube kernels on every instruction set (tests/test_accumulation.py).
 *
 * DY is packed channel-major: DYp as [co][nlo] (rows r = t*B + b, rounded to the compute precision; channel c
 * at c*nlo, nlo = RO rounded up to 16, plus 16, so that the channels are not a power of two apart and do not
 * alias in L1), in the workspace region of the row-major panels; gradBias's partial sums are taken in the DY
 * pack as on the other paths.  x has no panel: each gradWeight task copies the x rows of its items, a chunk at
 * a time, into its thread's buffer (channel-major, CT_NB items a row).  Wp is the cube forms' block-order weight
 * panel.
 */

/* (CT_NW, CT_NB, CT_NR: _ukr.h) */
/* ------------------------------------------------------------------------------------------------ */
/* packs: rows decoded and rounded as on the other paths, then stored channel-major                 */
#ifndef PYCONVTBC_CONV_NARROW_H
#define PYCONVTBC_CONV_NARROW_H

#include "_conv_pack.h"

/* [nr][C] -> d[c*ld + i] (to = 1), or d[c*ld + i] -> [nr][C] (to = 0): C <= CT_NW channels, fp32 */
static void ct_nar_transpose(const ct_ukr *U, int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    if (C == 1) {
        if (to) memcpy(d, v, (size_t)nr * 4);
        else memcpy(v, d, (size_t)nr * 4);
        return;
    }
    U->nar_transpose(to, v, nr, C, d, ld);
}

/* rows [r, r + nr) of source S (C channels) into dst[c*ld + i], rounded to the compute precision; v: the rows
 * decoded (tmp), or (dense fp32 sources) the source's own rows, which are then read in place */
static void ct_nar_rows(const ct_pk *pk, const ct_src *S, int dense, int64_t C, int64_t r, int64_t nr,
                        const float *v, float *dst, int64_t ld) {
    int rc = ct_round_for(S->dt, pk->compute);
    if (!dense) pk->U->round_row((float *)v, nr * C, rc, pk->hbits, pk->hrnd);
    ct_nar_transpose(pk->U, 1, (float *)v, nr, C, dst + r, ld);
    if (dense && rc != CT_C_FP32)
        for (int64_t c = 0; c < C; c++) pk->U->round_row(dst + c * ld + r, nr, rc, pk->hbits, pk->hrnd);
}

/* the DY pack's steps: 1024 rows of 8 channels or fewer (4 gb partial sums in flight: an add's latency) */
#define CT_NAR_TMP (1024 * 8)
static void ct_nar_pack_dy(const ct_plan *P, int64_t task) {
    int64_t r0 = task * CT_PR, r1 = ct_min(P->RO, r0 + CT_PR), C = P->Cout;
    int64_t step = ct_max(CT_GBR, CT_NAR_TMP / ct_max(1, C) / CT_GBR * CT_GBR);
    int dense = ct_src_dense(&P->dy, P->T_out, P->B, C);
    float tmp[CT_NAR_TMP];
    float *gout = P->ws.gbp + (task * (CT_PR / CT_GBR)) * C;
    ct_pk pk = ct_plan_pk(P);
    for (int64_t rr = r0; rr < r1; rr += step) {
        int64_t nr = ct_min(step, r1 - rr);
        const float *v = dense ? (const float *)(uintptr_t)P->dy.base + rr * C : tmp;
        if (!dense)
            for (int64_t r2 = rr; r2 < rr + nr; r2 += CT_RB)
                ct_decode_rows(&pk, &P->dy, C, r2, ct_min(CT_RB, rr + nr - r2), 0, C, tmp + (r2 - rr) * C);
        P->U->gb_partials(v, nr, C, gout + ((rr - r0) / CT_GBR) * C, C);   /* before the rounding */
        ct_nar_rows(&pk, &P->dy, dense, C, rr, nr, v, P->ws.DYp, P->nr.nlo);
    }
}

/* rows [r0, r1) of source S (T time steps of pk->B items, C channels) into dst[c*ld + r], rounded to the compute
 * precision: the channel-major copy of the backward's DY (narrow_gi) and the forward's x (_conv_fwd.h) */
static void ct_nar_pack_src(const ct_pk *pk, const ct_src *S, int64_t T, int64_t C, int64_t r0, int64_t r1,
                            float *dst, int64_t ld) {
    int dense = ct_src_dense(S, T, pk->B, C);
    float tmp[CT_RB * CT_NW];
    for (int64_t rr = r0; rr < r1; rr += CT_RB) {
        int64_t nr = ct_min(CT_RB, r1 - rr);
        const float *v = dense ? (const float *)(uintptr_t)S->base + rr * C : tmp;
        if (!dense) ct_decode_rows(pk, S, C, rr, nr, 0, C, tmp);
        ct_nar_rows(pk, S, dense, C, rr, nr, v, dst, ld);
    }
}
/* x rows [xa, xz) of items [b0, b0 + nb) (nb <= CT_NB) into d[ci*ld + (x - xa)*CT_NB + l], rounded to the
 * compute precision: a gradWeight task's own copy of the x rows of one chunk (lanes l beyond nb are not written) */
static void ct_gwn_pack_x(const ct_plan *P, int64_t b0, int64_t nb, int64_t xa, int64_t xz, float *d, int64_t ld) {
    const ct_src *S = &P->x;
    int64_t C = P->Cin, B = P->B;
    int dense = ct_src_dense(S, P->T_in, B, C), rc = ct_round_for(S->dt, P->compute);
    if (dense && rc == CT_C_FP32 && nb == 16 && P->U->gwn_px) {     /* where the table gathers whole item rows */
        P->U->gwn_px((const float *)(uintptr_t)S->base + (xa * B + b0) * C, B * C, xz - xa, C, d, ld);
        return;
    }
    float tmp[CT_NB * CT_NW];
    ct_pk pk = ct_plan_pk(P);
    for (int64_t x = xa; x < xz; x++) {
        int64_t r = x * B + b0;
        const float *v = dense ? (const float *)(uintptr_t)S->base + r * C : tmp;
        if (!dense) ct_decode_rows(&pk, S, C, r, nb, 0, C, tmp);
        if (rc != CT_C_FP32) {
            if (dense) memcpy(tmp, v, (size_t)(nb * C) * 4);
            P->U->round_row(tmp, nb * C, rc, P->hbits, P->hrnd);
            v = tmp;
        }
        ct_nar_transpose(P->U, 1, (float *)(uintptr_t)v, nb, C, d + (x - xa) * CT_NB, ld);
    }
}

/* gw item block blk: items [b0, b0 + CT_NB), every (k, ci, co) chain of them, in the block's own region of
 * P->ws.pcb (chain e = (k*Cin + ci)*Cout + co of item b0 + l at pcb[blk*nw*CT_NB + e*CT_NB + l]).  The chains run
 * through t in chunks of whole blocks (about 32 t's); the x rows of a chunk's items are copied into xb (the
 * thread's buffer: [ci][P->nr.nli], CT_NB floats a row), where they stay in L1 while every tap and tile reads them.
 * Only DY's rows come from the shared panel. */
static void ct_gwn_block(const ct_plan *P, int64_t blk, float *xb) {
    int64_t B = P->B, b0 = blk * CT_NB, nb = ct_min(CT_NB, B - b0), Cin = P->Cin, Cout = P->Cout, K = P->K;
    int64_t TC = ct_gwn_tc(P->sm.k0), nw = K * Cin * Cout, ldx = P->nr.nli;
    float *D0 = P->ws.pcb + blk * nw * CT_NB;
    memset(D0, 0, (size_t)(nw * CT_NB) * 4);
    const float *Y = P->ws.DYp + b0;
    int64_t mw = P->U->gwn_mw, mh = P->U->gwn_mh;   /* co and ci per register tile */
    for (int64_t T0 = 0; T0 < P->T_out; T0 += TC) {
        if (ct_stop(P)) return;
        /* x rows t + k - pad of the chunk's t's, inside the sequence */
        int64_t xa = ct_max(0, T0 - P->pad), xz = ct_min(P->T_in, T0 + TC + K - 1 - P->pad);
        if (xa >= xz) continue;
        ct_gwn_pack_x(P, b0, nb, xa, xz, xb, ldx);
        for (int64_t k = 0; k < K; k++) {
            int64_t ta = ct_max(T0, P->pad - k), tz = ct_min(T0 + TC, ct_min(P->T_out, P->T_in + P->pad - k));
            if (ta >= tz) continue;
            int64_t xo = (k - P->pad - xa) * CT_NB;     /* x row of t: t + k - pad, at (t + k - pad - xa)*CT_NB */
            for (int64_t ci = 0; ci < Cin; ci += mh) {
                int64_t mi = ct_min(mh, Cin - ci);
                for (int64_t co = 0; co < Cout; co += mw) {
                    int64_t mo = ct_min(mw, Cout - co);
                    const float *Xi = xb + ci * ldx, *Yj = Y + co * P->nr.nlo;
                    float *Dij = D0 + ((k * Cin + ci) * Cout + co) * CT_NB;
                    P->U->gwn(mi, mo, Xi, xo, CT_NB, ldx, Yj, P->nr.nlo, B, ta, tz, P->sm.k0, nb, Dij, Cout * CT_NB,
                              CT_NB);
                }
            }
        }
    }
}

/* gw task: item blocks task, task + n_gw, ... */
static void ct_gwn_task(const ct_plan *P, int64_t task, float *xb) {
    for (int64_t j = task; j < ct_cdiv(P->B, CT_NB); j += P->tk.n_gw) ct_gwn_block(P, j, xb);
}
/* post task: gw elements [e0, e0 + CT_TREE_CHUNK): the B item chains added into +0 in the order perm, then cast */
static void ct_gwn_finish(const ct_plan *P, int64_t task) {
    int64_t total = P->K * P->Cin * P->Cout, e0 = task * CT_TREE_CHUNK, n = ct_min(CT_TREE_CHUNK, total - e0);
    float acc[CT_TREE_CHUNK];
    for (int64_t e = 0; e < n; e++) {
        const float *ch = P->ws.pcb + (e0 + e) * CT_NB;
        float s = 0.0f;
        for (int64_t bi = 0; bi < P->B; bi++) {
            int64_t b = P->sm.perm ? P->sm.perm[bi] : bi;
            s = s + ch[(b / CT_NB) * total * CT_NB + b % CT_NB];
        }
        acc[e] = s;
    }
    int64_t es = ct_dt_size(P->gw_dt);
    P->U->store_row(acc, n, P->gw + e0 * es, P->gw_dt, CT_C_FP32, P->hif8_rnd, P->saturate);
}

/* ------------------------------------------------------------------------------------------------ */
/* gradInput: rows [r0, r0 + nr) x every ci; the chain of row r over blocks (g, k), tap k valid for rows  */
/*   t*B + b with 0 <= t + pad - k < T_out; DY of row r for tap k: DYp + co*nlo + r + (pad - k)*B;        */
/*   weights W(k, ci, co) at Wp[(ct_wblk(...) + co - lo) * Cin + ci]; chain (ci, row r) to D[ci*ldd + r-r0] */
/* ------------------------------------------------------------------------------------------------ */
/* (the kernels: ct_ukr.gin over the ct_nar_gi view of the pass, ct_gin_rows_out) */

/* rows [R0, R0 + rows) of a narrow reduction pass R (gradInput, or the forward), every output channel c (R->n_out
 * of them): the chains [c][CT_NR] in cb, then the rows [rows][c] to out (fp32: in place), else to the fp32 tile
 * after the chains (cb + c*CT_NR), rounded to pre and cast to dt.  (The kernels' view ct_nar_gi is in the
 * backward's words: T_in the gradInput rows' time steps, T_out DY's; gin_fwd turns the taps for the forward.) */
static void ct_gin_rows_out(const ct_red *R, int64_t R0, int64_t rows, float *cb, char *out, int dt, int pre,
                            int hif8_rnd, int sat) {
    int64_t C = R->n_out;
    ct_nar_gi G = {R->W, R->Ac, R->start, R->fwd ? R->t_a : R->t_c, R->fwd ? R->t_c : R->t_a, R->B, R->n_out,
                   R->n_red, R->K, R->pad, R->k0, R->a_ld, R->fwd};
    R->U->gin(&G, R0, rows, cb, CT_NR);
    int direct = dt == CT_DT_F32 && pre == CT_C_FP32;
    float *res = direct ? (float *)out + R0 * C : cb + C * CT_NR;
    ct_nar_transpose(R->U, 0, res, rows, C, cb, CT_NR);
    if (direct) return;
    R->U->store_row(res, rows * C, out + R0 * C * ct_dt_size(dt), dt, ct_round_for(dt, pre), hif8_rnd, sat);
}

/* gi task: rows [R0, R0 + CT_NR), every ci.  cb: the thread's buffer, [Cin][CT_NR] chains then (outputs other
 * than fp32) the [rows][Cin] fp32 tile that is cast. */
static void ct_gin_task(const ct_plan *P, int64_t task, float *cb) {
    int64_t R0 = task * CT_NR;
    int pre = (P->compute == CT_C_FP16 || P->compute == CT_C_BF16) ? P->compute : CT_C_FP32;
    ct_red R = ct_gi_red(P);
    ct_gin_rows_out(&R, R0, ct_min(CT_NR, P->RI - R0), cb, P->gi, P->gi_dt, pre, CT_HIF8_TA, 0);
}

#endif /* PYCONVTBC_CONV_NARROW_H */
