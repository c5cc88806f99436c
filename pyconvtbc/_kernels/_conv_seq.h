/* _conv_seq.h: the sequential form's compute tasks (accumulation="sequential").
 *
 * Every output element is owned by one task and reduced by one sequential fp32 FMA chain in a fixed order
 * (gi: co block of CT_KCI ascending, then k ascending, then co; gw: rows ascending), so results do not depend on
 * threads, blocking or instruction set.  A time shift is a pointer offset in the panels.  Each task's epilogue
 * casts its fp32 tile to the output dtype (gi first rounded to C for FP16/BF16).
 */
#ifndef PYCONVTBC_CONV_SEQ_H
#define PYCONVTBC_CONV_SEQ_H

#include "_conv_plan.h"

/* gi for rows [u, v) of the task, one k at a time (rows whose valid k range is not all of 0..K-1) */
static void ct_gi_rows_per_k(const ct_plan *P, int64_t u, int64_t v, int64_t R0, int64_t c0, int64_t c1,
                             int64_t j0, int64_t wj, const float *Bp0, float *cb, int64_t ld, int64_t J0) {
    int64_t MR = ct_gi_mr(P->U, wj);
    for (int64_t k = 0; k < P->K; k++) {
        int64_t lo = ct_max(0, k - P->pad), hi = ct_min(P->T_in, P->T_out + k - P->pad);
        int64_t a = ct_max(u, lo * P->B), b = ct_min(v, hi * P->B);
        int64_t shift = (P->pad - k) * P->B;
        for (int64_t i = a; i < b; i += MR)
            P->U->gi_seq(ct_min(MR, b - i), wj, P->ws.DYp, P->ws.dy_ps, i + shift - P->ws.dy_r0, 0, 1, c0, c1, P->Cout,
                      Bp0 + k * P->Cin * P->Cout, 0, cb + (i - R0) * ld + (j0 - J0), ld);
    }
}

/* gi task: rows [R0, R1) x ci [J0, J1).  Per element the order is: co block (CT_KCI) ascending, then k
 * ascending (valid k only), then co ascending within the block: one fp32 FMA chain. */
static void ct_gi_task(const ct_plan *P, int64_t task, float *cb) {
    ct_rows_tile rt = ct_rows_task(task, P->tk.n_gi_jb, P->RI, P->Cin);
    int64_t R0 = rt.R0, R1 = rt.R1, J0 = rt.J0, J1 = rt.J1, nc = J1 - J0;
    int64_t ld = P->tk.gi_ld;
    int pre = (P->compute == CT_C_FP16 || P->compute == CT_C_BF16) ? P->compute : CT_C_FP32;
    int direct = P->gi_dt == CT_DT_F32 && pre == CT_C_FP32;   /* accumulate in the output itself */
    if (direct) {
        cb = (float *)P->gi + R0 * P->Cin + J0;
        ld = P->Cin;
    }
    if (nc == ld) memset(cb, 0, (size_t)((R1 - R0) * ld) * 4);
    else for (int64_t r = 0; r < R1 - R0; r++) memset(cb + r * ld, 0, (size_t)nc * 4);
    if (P->ws.Wp && P->K > 0) {
        /* rows where every k is valid: t in [K-1-pad, T_out-pad) */
        int64_t ia = ct_max(R0, ct_max(0, P->K - 1 - P->pad) * P->B);
        int64_t ib = ct_min(R1, ct_min(P->T_in, P->T_out - P->pad) * P->B);
        if (ia >= ib) ia = ib = R1;
        for (int64_t c0 = 0; c0 < P->Cout; c0 += CT_KCI) {
            int64_t c1 = ct_min(P->Cout, c0 + CT_KCI);
            for (int64_t j0 = J0; j0 < J1; j0 += CT_PO) {
                if (ct_stop(P)) return;                                 /* (a panel is K*CT_KCI deep) */
                int64_t wj = ct_min(CT_PO, P->Cin - j0);
                const float *Bp0 = P->ws.Wp + j0 * P->Cout + c0 * wj;     /* k = 0 */
                int64_t MR = ct_gi_mr(P->U, wj);
                if (R0 < ia) ct_gi_rows_per_k(P, R0, ia, R0, c0, c1, j0, wj, Bp0, cb, ld, J0);
                for (int64_t i = ia; i < ib; i += MR)
                    P->U->gi_seq(ct_min(MR, ib - i), wj, P->ws.DYp, P->ws.dy_ps, i + P->pad * P->B - P->ws.dy_r0, -P->B, P->K, c0,
                              c1, P->Cout, Bp0, P->Cin * P->Cout, cb + (i - R0) * ld + (j0 - J0), ld);
                if (ib < R1) ct_gi_rows_per_k(P, ib, R1, R0, c0, c1, j0, wj, Bp0, cb, ld, J0);
            }
        }
    }
    if (direct) return;
    int64_t es = ct_dt_size(P->gi_dt);
    /* rounding to C then casting to the same format is the cast alone (RNE is idempotent, NaNs stay quiet) */
    pre = ct_round_for(P->gi_dt, pre);
    if (nc == ld && nc == P->Cin)       /* tile rows and output rows are both contiguous */
        P->U->store_row(cb, (R1 - R0) * nc, P->gi + R0 * P->Cin * es, P->gi_dt, pre, CT_HIF8_TA, 0);
    else
        for (int64_t r = R0; r < R1; r++)
            P->U->store_row(cb + (r - R0) * ld, nc, P->gi + (r * P->Cin + J0) * es, P->gi_dt, pre, CT_HIF8_TA, 0);
}

/* gw, rows [p0, p1) (all valid for k .. k+nk-1), one co panel, every ci panel of the task */
static inline void ct_gw_part(const ct_plan *P, int64_t k, int64_t nk, int64_t p0, int64_t p1, int64_t co,
                              int64_t wq, int64_t I0, int64_t I1, int64_t C0, float *cb, int64_t ld,
                              int64_t tile) {
    if (p0 >= p1) return;
    int64_t xs = (k - P->pad) * P->B;
    const float *Bq = P->ws.DYp + (co / CT_PO) * P->ws.dy_ps * CT_PO + (p0 - P->ws.dy_r0) * wq;
    for (int64_t ci = I0; ci < I1; ci += CT_PX) {
        int64_t wi = ct_min(CT_PX, P->Cin - ci);
        const float *Ap = P->ws.Xp + (ci / CT_PX) * P->RI * CT_PX + (p0 + xs) * wi;
        P->U->gw_seq(nk, wi, wq, p1 - p0, Ap, wi, P->B * wi, Bq, wq, cb + (ci - I0) * ld + (co - C0), ld,
                  tile);
    }
}

/* gw task: k in [k0, k0+G) x ci [I0, I1) x co [C0, C1).  Row blocks of CT_KCW outermost (the DY block is
 * reused by every k and ci of the task), then co panels (a DY micro-panel stays in L1), then k, then ci panels.
 * Per element the order is rows ascending: one fp32 FMA chain, whatever the blocking. */
static void ct_gw_task(const ct_plan *P, int64_t task, float *cb) {
    ct_gw_range g = ct_gw_task_range(P, task);
    int64_t k0 = g.k0, G = g.G, I0 = g.I0, I1 = g.I1, C0 = g.C0, C1 = g.C1, nc = C1 - C0;
    int64_t ld = P->tk.gw_ld, tile = (I1 - I0) * ld;
    int direct = P->gw_dt == CT_DT_F32;                      /* accumulate in the output itself */
    if (direct || P->st.win) {                  /* (streamed DY: in gw's fp32 sums at pcb, cast by ct_tree_task) */
        cb = (direct ? (float *)P->gw : P->ws.pcb) + (k0 * P->Cin + I0) * P->Cout + C0;
        ld = P->Cout;
        tile = P->Cin * P->Cout;
    }
    for (int64_t kk = 0; kk < G && !P->st.win; kk++) {          /* (streamed: zeroed once, before the first window) */
        if (nc == ld) memset(cb + kk * tile, 0, (size_t)((I1 - I0) * ld) * 4);
        else for (int64_t r = 0; r < I1 - I0; r++) memset(cb + kk * tile + r * ld, 0, (size_t)nc * 4);
    }
    if (P->ws.Xp) {
        /* DY rows valid for k: [a_k, b_k), both non-increasing in k */
        #define CT_GW_A(k) (ct_max(0, P->pad - (k)) * P->B)
        #define CT_GW_B(k) (ct_min(P->T_out, P->T_in + P->pad - (k)) * P->B)
        int64_t lo = CT_GW_A(k0 + G - 1), hi = CT_GW_B(k0);
        if (P->st.win) { lo = ct_max(lo, P->st.w_r0); hi = ct_min(hi, P->st.w_r1); }   /* streamed: this window's rows */
        for (int64_t q0 = lo; q0 < hi; q0 += CT_KCW) {
            int64_t q1 = ct_min(hi, q0 + CT_KCW);
            if (ct_stop(P)) return;
            for (int64_t co = C0; co < C1; co += CT_PO) {
                int64_t wq = ct_min(CT_PO, P->Cout - co);
                for (int64_t ks = k0; ks < k0 + G; ks += P->tk.gw_nkr) {
                    int64_t nk = ct_min(P->tk.gw_nkr, k0 + G - ks);
                    float *cs = cb + (ks - k0) * tile;
                    if (nk == 1) {
                        ct_gw_part(P, ks, 1, ct_max(q0, CT_GW_A(ks)), ct_min(q1, CT_GW_B(ks)), co, wq, I0, I1,
                                   C0, cs, ld, tile);
                        continue;
                    }
                    /* rows valid for all nk: [ca, cz); the others of each k before / after them */
                    int64_t ca = ct_max(q0, CT_GW_A(ks)), cz = ct_min(q1, CT_GW_B(ks + nk - 1));
                    if (ca >= cz) ca = cz = q1;
                    for (int64_t kk = 0; kk < nk; kk++)
                        ct_gw_part(P, ks + kk, 1, ct_max(q0, CT_GW_A(ks + kk)), ct_min(ca, CT_GW_B(ks + kk)), co,
                                   wq, I0, I1, C0, cs + kk * tile, ld, tile);
                    ct_gw_part(P, ks, nk, ca, cz, co, wq, I0, I1, C0, cs, ld, tile);
                    for (int64_t kk = 0; kk < nk; kk++)
                        ct_gw_part(P, ks + kk, 1, ct_max(cz, CT_GW_A(ks + kk)), ct_min(q1, CT_GW_B(ks + kk)),
                                   co, wq, I0, I1, C0, cs + kk * tile, ld, tile);
                }
            }
        }
        #undef CT_GW_A
        #undef CT_GW_B
    }
    if (direct || P->st.win) return;
    int64_t es = ct_dt_size(P->gw_dt);
    for (int64_t kk = 0; kk < G; kk++) {
        int64_t k = k0 + kk;
        const float *t = cb + kk * tile;
        if (nc == ld && nc == P->Cout)
            P->U->store_row(t, (I1 - I0) * nc, P->gw + ((k * P->Cin + I0) * P->Cout) * es, P->gw_dt,
                         CT_C_FP32, P->hif8_rnd, P->saturate);
        else
            for (int64_t ci = I0; ci < I1; ci++)
                P->U->store_row(t + (ci - I0) * ld, nc, P->gw + ((k * P->Cin + ci) * P->Cout + C0) * es,
                             P->gw_dt, CT_C_FP32, P->hif8_rnd, P->saturate);
    }
}

#endif /* PYCONVTBC_CONV_SEQ_H */
