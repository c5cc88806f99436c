/* _conv_stream.h: streamed DY, for a packed DY too large to keep whole (ct_plan.win; ct_plan_init decides).
 *
 * _conv_tbc.pyx's _execute_streamed runs the steps.  Instead of one packed copy of DY
 * (T_out*B*Cout floats, whatever DY's strides: a broadcast DY would be expanded), the workspace holds one window
 * of win_rows packed rows, refilled window after window:
 *   0. gb's partial sums straight from DY (ct_pack_dy with no DYp), X and W packed whole (as always);
 *   1. gi: window w holds the DY rows that gi row blocks [w*w1_rb, (w+1)*w1_rb) read (their rows, and the K-1
 *      time steps their taps reach), t-major; the gi tasks of those row blocks run on it;
 *   2. gw: windows in the order of gw's chains: t-major rows [w*w2_rows, ...) (sequential form, layout 1), or
 *      for the layout-0 cube forms items in the order perm, whole (w2_items per window) or in t ranges of
 *      w2_rows; every gw task takes the window's rows.  The chains go on from window to window (the chain values
 *      in gwc, the sums in gw itself or in fp32 at pcb); windows are whole blocks of k0 chain rows;
 *   3. the tree tasks cast (and for pieces combine) the fp32 sums; gb is finished.
 * Every element is summed by the same operations in the same order as with DY packed whole: results are bitwise
 * the same (tests/test_streamed.py), only where the packed rows live changes.
 */
#ifndef PYCONVTBC_CONV_STREAM_H
#define PYCONVTBC_CONV_STREAM_H

#include "_conv_pack.h"

/* pack DY rows [r, r + n) (t-major) of panel q at buffer row r - dy_r0, rounded to C */
static void ct_win_pack_rows(const ct_plan *P, int64_t q, int64_t r, int64_t n) {
    int64_t co0 = q * CT_PO, wq = ct_min(CT_PO, P->Cout - co0);
    ct_pk pk = ct_plan_pk(P);
    ct_pack_rows(&pk, &P->dy, P->Cout, r, n, co0, wq, P->ws.DYp + q * P->ws.dy_ps * CT_PO + (r - P->ws.dy_r0) * wq);
}

/* The DY rows [*ra, *rz) that gi window w's row blocks read: their rows shifted by pad - k for every tap k */
static void ct_win1_rows(const ct_plan *P, int64_t w, int64_t *ra, int64_t *rz) {
    ct_window_rows(w, P->st.w1_rb, P->tk.n_gi_rb, P->RI, P->RO, P->B, P->pad - P->K + 1, P->pad, ra, rz);
}

/* pass 1, window w: sets dy_r0; returns its pack tasks (CT_PR rows x panel); its gi tasks are
 * [w*w1_rb*n_gi_jb, min(n_gi_rb, (w+1)*w1_rb)*n_gi_jb) */
static int64_t ct_win1_begin(ct_plan *P, int64_t w) {
    int64_t ra, rz;
    ct_win1_rows(P, w, &ra, &rz);
    P->ws.dy_r0 = ra;
    return ct_cdiv(rz - ra, CT_PR) * P->tk.nq;
}

static void ct_win1_pack(const ct_plan *P, int64_t w, int64_t task) {
    if (ct_stop(P)) return;
    int64_t ra, rz;
    ct_win1_rows(P, w, &ra, &rz);
    ct_pk pk = ct_plan_pk(P);
    ct_window_pack(&pk, &P->dy, P->Cout, P->ws.DYp, P->ws.dy_ps, P->tk.nq, ra, rz, task);
}

/* pass 2, window w: sets its rows (w_r0, w_r1 and dy_r0; or items w_b0..w_b1 x t's w_t0..w_t1); returns its
 * pack tasks */
static int64_t ct_win2_begin(ct_plan *P, int64_t w) {
    if (P->sm.acc != CT_ACC_SEQ && P->sm.layout == 0) {
        if (P->st.w2_items > 0) {
            P->st.w_b0 = w * P->st.w2_items; P->st.w_b1 = ct_min(P->B, P->st.w_b0 + P->st.w2_items);
            P->st.w_t0 = 0; P->st.w_t1 = P->T_out;
        } else {
            int64_t per = ct_cdiv(P->T_out, P->st.w2_rows);
            P->st.w_b0 = w / per; P->st.w_b1 = P->st.w_b0 + 1;
            P->st.w_t0 = (w % per) * P->st.w2_rows; P->st.w_t1 = ct_min(P->T_out, P->st.w_t0 + P->st.w2_rows);
        }
        P->ws.dy_r0 = 0;
        return (P->st.w_b1 - P->st.w_b0) * P->tk.nq;
    }
    P->st.w_r0 = P->ws.dy_r0 = w * P->st.w2_rows;
    P->st.w_r1 = ct_min(P->RO, P->st.w_r0 + P->st.w2_rows);
    return ct_cdiv(P->st.w_r1 - P->st.w_r0, CT_PR) * P->tk.nq;
}

static void ct_win2_pack(const ct_plan *P, int64_t task) {
    if (ct_stop(P)) return;
    int64_t c = task / P->tk.nq, q = task % P->tk.nq;
    if (!(P->sm.acc != CT_ACC_SEQ && P->sm.layout == 0)) {
        int64_t r = P->st.w_r0 + c * CT_PR;
        ct_win_pack_rows(P, q, r, ct_min(CT_PR, P->st.w_r1 - r));
        return;
    }
    /* item bi = w_b0 + c (b = perm[bi]): its t's [w_t0, w_t1) at buffer rows c*(w_t1 - w_t0) + (t - w_t0) */
    int64_t bi = P->st.w_b0 + c, b = P->sm.perm ? P->sm.perm[bi] : bi, nt = P->st.w_t1 - P->st.w_t0;
    int64_t co0 = q * CT_PO, wq = ct_min(CT_PO, P->Cout - co0);
    float *v = P->ws.DYp + q * P->ws.dy_ps * CT_PO + c * nt * wq;
    ct_pk pk = ct_plan_pk(P);
    for (int64_t t = P->st.w_t0; t < P->st.w_t1; t++)
        ct_decode_rows(&pk, &P->dy, P->Cout, t * P->B + b, 1, co0, wq, v + (t - P->st.w_t0) * wq);
    P->U->round_row(v, nt * wq, ct_round_for(P->dy.dt, P->compute), P->hbits, P->hrnd);
}

/* before pass 2: gw's sums start at +0 (gw itself when fp32 and in one piece, else the fp32 sums at pcb) */
static void ct_win_zero(const ct_plan *P) {
    int64_t nw = P->K * P->Cin * P->Cout;
    if (P->ws.pcb) memset(P->ws.pcb, 0, (size_t)(P->sm.gw_pieces * nw) * 4);
    else memset(P->gw, 0, (size_t)nw * 4);
}

#endif /* PYCONVTBC_CONV_STREAM_H */
