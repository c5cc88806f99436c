/* _conv_cube.h: the cube accumulation model (docs/precision.md, "Accumulation model").
 *
 * The cube forms' tasks (the micro-kernels are the table's, _ukr.h).  The NPU's cube does not add one product at a
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
 * blocking or the instruction set: every table's "cube" kernels (_ukr_<isa>.c) and the generic ones
 * (_ukr_generic.h: the portable table, and the exact wide forms) perform the same operations in the same order
 * (tests/test_accumulation.py checks every path against an independent model).
 */
#ifndef PYCONVTBC_CONV_CUBE_H
#define PYCONVTBC_CONV_CUBE_H

#include "_conv_plan.h"

/* blocks per pass of the cube gi / forward tasks: about CT_KCB reduction rows, so that a 16-column half of the
 * weight rows of a pass (CT_KCB x 64 bytes) stays in L1.  Cache blocking only: no result depends on it. */
static inline int64_t ct_gic_step(int64_t k0) { return ct_max(1, CT_KCB / k0); }

/* Blocks [jb0, jb1) of the chains of pass R (gradInput, or the forward: _conv_roles.h) for rows [i0, i1) of a
 * panel of n output columns: row i reads A's panel row i + rowoff for tap 0, tap k at + k*dk; row i's chains are
 * at C + (i - i0)*ldc. */
static inline void ct_gic_rows(const ct_red *R, int64_t i0, int64_t i1, int64_t n, int64_t rowoff, int64_t dk,
                               int64_t jb0, int64_t jb1, const float *Bp, float *C, int64_t ldc) {
    R->U->gic_rows(R->acc, i0, i1, n, R->A, R->a_ps, rowoff, dk, R->K, jb0, jb1, R->k0, R->n_red, Bp, C, ldc);
}

/* Rows [u, v) of blocks [jb0, jb1) where some rows lack some taps (the sequence's first and last time steps).
 * Row t*B + b has taps [max(0, sgn*t + alo), min(K-1, sgn*t + ahi)] (gradInput: sgn = 1, forward: sgn = -1).
 * With B >= CT_EDGE_B the rows go one time step at a time: its taps of a channel group are a run of consecutive
 * blocks, summed in one call with the chains in registers.  Otherwise (few rows per time step) one block at a
 * time over the rows that have its tap.  Either way every row adds its blocks in the chain's order: the result
 * is the same.  C: row u's chains. */
#define CT_EDGE_B 6
static void ct_gic_edge(const ct_red *R, int64_t u, int64_t v, int64_t n, int64_t rowoff, int64_t dk,
                        int64_t jb0, int64_t jb1, int sgn, int64_t alo, int64_t ahi, const float *Bp, float *C,
                        int64_t ldc) {
    int64_t K = R->K, B = R->B;
    if (u >= v || B < 1) return;
    if (B >= CT_EDGE_B) {
        for (int64_t t = u / B; t * B < v; t++) {
            int64_t a = ct_max(u, t * B), b = ct_min(v, (t + 1) * B);
            int64_t klo = ct_max(0, sgn * t + alo), khi = ct_min(K - 1, sgn * t + ahi);
            for (int64_t g = jb0 / K; g * K < jb1 && klo <= khi; g++) {
                int64_t s = ct_max(jb0, g * K + klo), e = ct_min(jb1, g * K + khi + 1);
                if (s < e) ct_gic_rows(R, a, b, n, rowoff, dk, s, e, Bp, C + (a - u) * ldc, ldc);
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
        if (a < b) ct_gic_rows(R, a, b, n, rowoff, dk, jb, jb + 1, Bp, C + (a - u) * ldc, ldc);
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
    ct_rows_tile rt = ct_rows_task(task, P->tk.n_gi_jb, P->RI, P->Cin);
    int64_t R0 = rt.R0, R1 = rt.R1, J0 = rt.J0, J1 = rt.J1, nc = J1 - J0;
    int64_t ld = P->tk.gi_ld, rows = R1 - R0;
    int pre = (P->compute == CT_C_FP16 || P->compute == CT_C_BF16) ? P->compute : CT_C_FP32;
    int direct = P->gi_dt == CT_DT_F32 && pre == CT_C_FP32;
    /* ch: the chain; out: where finished segments are added (only with segments) */
    float *ch = cb, *out = NULL;
    int64_t lch = ld, lout = ld;
    if (P->sm.gi_seg > 0) {
        out = cb + P->tk.gi_tile;
        if (direct) { out = (float *)P->gi + R0 * P->Cin + J0; lout = P->Cin; }
    } else if (direct) {
        ch = (float *)P->gi + R0 * P->Cin + J0;
        lch = P->Cin;
    }
    ct_tile_zero(ch, rows, nc, lch);
    if (out) ct_tile_zero(out, rows, nc, lout);
    ct_red R = ct_gi_red(P);                                           /* the pass the chain drivers take */
    if (P->ws.Wp && P->K > 0) {
        int64_t K = P->K, nblk = ct_cdiv(P->Cout, P->sm.k0) * K;
        int64_t step = ct_gic_step(P->sm.k0);                               /* blocks per pass (cache blocking) */
        for (int64_t j0b = 0; j0b < nblk;) {
            int64_t j1b = ct_min(nblk, j0b + step);
            if (P->sm.gi_seg > 0) j1b = ct_min(j1b, (j0b / P->sm.gi_seg + 1) * P->sm.gi_seg);
            /* rows where every tap is valid; row r reads DY row r + dyoff for tap 0, one time step (B rows) less
             * per tap */
            int64_t B = P->B, dyoff = P->pad * B - P->ws.dy_r0;
            int64_t ia = ct_max(R0, ct_max(0, K - 1 - P->pad) * B);
            int64_t ib = ct_min(R1, ct_min(P->T_in, P->T_out - P->pad) * B);
            if (ia >= ib) ia = ib = R1;
            for (int64_t j0 = J0; j0 < J1; j0 += CT_PO) {
                int64_t wj = ct_min(CT_PO, P->Cin - j0);
                const float *Bp0 = P->ws.Wp + j0 * P->K * P->Cout;        /* this ci panel, in block order */
                float *cj = ch + (j0 - J0);
                /* rows missing some taps: row t has taps t + pad - (T_out - 1) .. t + pad */
                for (int side = 0; side < 2; side++) {
                    int64_t u = side ? ib : R0, v = side ? R1 : ia;
                    ct_gic_edge(&R, u, v, wj, dyoff, -B, j0b, j1b, 1, P->pad - (P->T_out - 1), P->pad, Bp0,
                                cj + (u - R0) * lch, lch);
                }
                if (ia < ib) ct_gic_rows(&R, ia, ib, wj, dyoff, -B, j0b, j1b, Bp0, cj + (ia - R0) * lch, lch);
            }
            if (out && (j1b % P->sm.gi_seg == 0 || j1b == nblk)) {   /* a segment ends: add it, start a new chain */
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
        P->U->store_row(res + (r - R0) * lres, nc, P->gi + (r * P->Cin + J0) * es, P->gi_dt, pre, CT_HIF8_TA, 0);
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

/* For co panel co of a chunk: the prefetch cursor F of the next copy's rows (the next co panel's, else the next
 * chunk's first panel), from DY rows far apart (L3 or memory), fetched into L2 by the micro-kernels, one row per
 * block, while this panel computes (ct_gw_pf); and the chunk's DY rows of this panel (ybs[j] + u*sty of Bq),
 * item after item, copied contiguous into ybuf: every k and ci panel reads them there. */
static void ct_gwc_ycopy(const ct_plan *P, const ct_gw_tile *T, int64_t co, const float *Bq, int64_t wq, int64_t q0,
                         int64_t q1, int64_t sty, int64_t ni, const int64_t *ybs, float *ybuf, int64_t nn,
                         const int64_t *nybs, int64_t nq0, int64_t nq1, ct_gw_pf *F) {
    int last = co + CT_PO >= T->C1;
    int64_t cn = last ? T->C0 : co + CT_PO;
    F->ybs = last ? nybs : ybs;
    F->n = last ? nn : ni;
    F->q0 = F->u = last ? nq0 : q0;
    F->q1 = last ? nq1 : q1;
    F->wq = ct_min(CT_PO, P->Cout - cn);
    F->pb = P->ws.DYp + (cn / CT_PO) * P->ws.dy_ps * CT_PO;
    F->sty = sty;
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
}

#define CT_GW_ITEMS 32   /* items per chunk at most */
static void ct_gwc_chunk(const ct_plan *P, const ct_gw_tile *T, int64_t q0, int64_t q1, int64_t cs0, int64_t cs1,
                         int64_t U, int64_t stx, int64_t sty, int64_t ni, const int64_t *xbs, const int64_t *ybs,
                         float *ybuf, int64_t nn, const int64_t *nybs, int64_t nq0, int64_t nq1) {
    int64_t k0b = P->sm.k0, span = q1 - q0, yoff[CT_GW_ITEMS];
    for (int64_t j = 0; j < ni && ybuf; j++) yoff[j] = j * span - q0;   /* item j's rows in ybuf */
    for (int64_t co = T->C0; co < T->C1; co += CT_PO) {
        int64_t wq = ct_min(CT_PO, P->Cout - co);
        const float *Bq = P->ws.DYp + (co / CT_PO) * P->ws.dy_ps * CT_PO;
        /* item j's row u: Bq + (yr[j] + u*ys)*wq */
        const int64_t *yr = ybs;
        int64_t ys = sty;
        /* the rows of the next copy (the next co panel's, else the next chunk's first panel), from DY rows far
         * apart (L3 or memory): fetched into L2 by the micro-kernels, one row per block, while this panel
         * computes (ct_gw_pf) */
        ct_gw_pf F = {NULL, NULL, 0, 0, 0, 0, 0, 0, 0};
        if (ybuf) {
            ct_gwc_ycopy(P, T, co, Bq, wq, q0, q1, sty, ni, ybs, ybuf, nn, nybs, nq0, nq1, &F);
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
                const float *Xq = P->ws.Xp + (ci / CT_PX) * P->RI * CT_PX;
                int64_t kt = k - T->k0, o = (ci - T->I0) * T->ld + (co - T->C0);
                /* at most gwc_pair_n co: two full-or-last X panels to a call (where the table has the pair
                 * kernel) */
                if (P->U->gwc_pair && P->sm.acc == CT_ACC_CUBE && wq <= P->U->gwc_pair_n && wi == CT_PX &&
                    ci + CT_PX < T->I1) {
                    int64_t wi2 = ct_min(CT_PX, P->Cin - ci - CT_PX);
                    const float *Xq2 = Xq + P->RI * CT_PX;
                    for (int64_t j = 0; j < ni; j++) {
                        int64_t xr = xbs[j] + (a + (k - P->pad) * U) * stx;
                        P->U->gwc_pair(wi2, wq, Xq + xr * wi, stx * wi, Xq2 + xr * wi2, stx * wi2,
                                        Bq + (yr[j] + a * ys) * wq, ys * wq, z - a, first, k0b,
                                        fin ? T->cb + kt * T->tile + o : NULL, T->ld,
                                        T->cc ? T->cc + kt * T->tcc + (ci - T->I0) * T->lcc + (co - T->C0) : NULL,
                                        T->lcc, cin, F.pb ? &F : NULL);
                    }
                    ci += CT_PX;
                    continue;
                }
                for (int64_t j = 0; j < ni; j++)
                    P->U->gwc(P->sm.acc, wi, wq, Xq + (xbs[j] + (a + (k - P->pad) * U) * stx) * wi, stx * wi,
                               Bq + (yr[j] + a * ys) * wq, ys * wq, z - a, first, k0b,
                              fin ? T->cb + kt * T->tile + o : NULL, T->ld,
                               T->cc ? T->cc + kt * T->tcc + (ci - T->I0) * T->lcc + (co - T->C0) : NULL, T->lcc,
                               cin, F.pb ? &F : NULL);
            }
        }
    }
}

/* layout 0: one chain per batch item, over t, in the order perm (streamed: the window's items [w_b0, w_b1) and t's
 * [w_t0, w_t1), packed item after item); chunks of CH rows (cbase: the thread's buffer) */
static void ct_gwc_items(const ct_plan *P, const ct_gw_tile *T, float *cbase, int64_t CH) {
    int64_t B = P->B;
    int64_t bi0 = P->st.win ? P->st.w_b0 : 0, bi1 = P->st.win ? P->st.w_b1 : B;
    int64_t ta = P->st.win ? P->st.w_t0 : 0, tz = P->st.win ? P->st.w_t1 : P->T_out;
    /* whole chains of at most half a chunk: several items to a chunk (ct_gwc_chunk) */
    int64_t ni = 1;
    if (ta == 0 && tz == P->T_out && tz > 0 && 2 * tz <= CH) ni = ct_min(CT_GW_ITEMS, CH / tz);
    int64_t stx = P->sm.bmajor ? 1 : B, sty = P->st.win ? 1 : B;
    float *yv = P->sm.bmajor && !P->st.win ? cbase + P->ws.gw_ybuf_off : NULL;
    int64_t xbs[CT_GW_ITEMS], ybs[2][CT_GW_ITEMS], cur = 0;
    /* item bi's X base (b-major rows b*T_in + t when B > 1, else t) and DY base (t-major rows t*B + b,
     * copied chunk by chunk into ybuf when B > 1; the streamed window's item-major rows) */
    #define CT_GW_ITEM(bi) (P->sm.perm ? P->sm.perm[bi] : (bi))      /* the item taken bi-th */
    #define CT_GW_YB(bi) (P->st.win ? ((bi) - bi0) * (tz - ta) - ta : CT_GW_ITEM(bi))
    for (int64_t j = 0; j < ct_min(ni, bi1 - bi0); j++) ybs[cur][j] = CT_GW_YB(bi0 + j);
    for (int64_t bi = bi0; bi < bi1; bi += ni) {
        int64_t nb = ct_min(ni, bi1 - bi), nx = ct_min(ni, bi1 - bi - nb);
        for (int64_t j = 0; j < nb; j++) xbs[j] = CT_GW_ITEM(bi + j) * (P->sm.bmajor ? P->T_in : 1);
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
            ct_gwc_chunk(P, T, t0, ct_min(tz, t0 + CH), 0, P->T_out, 1, stx, sty, nb, xbs, ybs[cur], yv, nn,
                         nybs, nq0, nq1);
        }
        cur = !cur;
    }
    #undef CT_GW_YB
    #undef CT_GW_ITEM
}

/* layout 1: positions t*B + b: this piece's segments, each a chain; chunks of CH rows */
static void ct_gwc_segments(const ct_plan *P, const ct_gw_tile *T, int64_t piece, int64_t CH) {
    int64_t B = P->B, k0b = P->sm.k0;
    int64_t nB = ct_cdiv(P->RO, k0b), Pn = P->sm.gw_pieces;
    int64_t r0 = (piece * nB / Pn) * k0b, r1 = ct_min(P->RO, ((piece + 1) * nB / Pn) * k0b);
    int64_t seg = P->sm.gw_seg * k0b;                               /* rows per segment */
    for (int64_t s0 = r0; s0 < r1; s0 += seg) {
        int64_t s1 = ct_min(r1, s0 + seg);
        int64_t qa = P->st.win ? ct_max(s0, P->st.w_r0) : s0, qz = P->st.win ? ct_min(s1, P->st.w_r1) : s1;
        for (int64_t q0 = qa; q0 < qz; q0 += CH) {
            if (ct_stop(P)) return;
            int64_t zero = 0, ry = -P->ws.dy_r0;
            ct_gwc_chunk(P, T, q0, ct_min(qz, q0 + CH), s0, s1, B, 1, 1, 1, &zero, &ry, NULL, 0, NULL, 0, 0);
        }
    }
}

/* gw task (cube model): k in [k0, k0+G) x ci [I0, I1) x co [C0, C1), and (layout 1 with pieces) one piece. */
static void ct_gwc_task(const ct_plan *P, int64_t task, float *cb) {
    float *cbase = cb;                           /* the thread's buffer: task tile, then the chain tile */
    int64_t piece = 0;
    if (P->sm.gw_pieces > 1) { piece = task / P->tk.n_gw1; task %= P->tk.n_gw1; }
    ct_gw_range g = ct_gw_task_range(P, task);
    ct_gw_tile T;
    T.k0 = g.k0; T.G = g.G; T.I0 = g.I0; T.I1 = g.I1; T.C0 = g.C0; T.C1 = g.C1;
    int64_t nc = T.C1 - T.C0;
    T.cb = cb; T.ld = P->tk.gw_ld; T.tile = (T.I1 - T.I0) * T.ld;
    int direct = P->gw_dt == CT_DT_F32;
    if (P->sm.gw_pieces > 1 || (P->st.win && !direct)) {   /* this piece's sums (streamed: gw's fp32 sums), at pcb */
        T.cb = P->ws.pcb + piece * P->K * P->Cin * P->Cout + (T.k0 * P->Cin + T.I0) * P->Cout + T.C0;
        T.ld = P->Cout;
        T.tile = P->Cin * P->Cout;
    } else if (direct) {
        T.cb = (float *)P->gw + (T.k0 * P->Cin + T.I0) * P->Cout + T.C0;
        T.ld = P->Cout;
        T.tile = P->Cin * P->Cout;
    }
    if (!P->st.win)                                 /* (streamed DY: zeroed once, before the first window) */
        for (int64_t kk = 0; kk < T.G; kk++) ct_tile_zero(T.cb + kk * T.tile, T.I1 - T.I0, nc, T.ld);
    if (P->ws.Xp) {
        /* Chains are cut into chunks of CH rows (whole blocks) so that a chunk's rows stay in cache while every
         * (co, k, ci) of the task reads them. */
        int64_t k0b = P->sm.k0, CH = ct_max(1, CT_KCW / k0b) * k0b;
        T.cc = P->ws.cbuf ? cbase + P->ws.gw_ctile_off : NULL;
        T.lcc = P->tk.gw_ld;
        T.tcc = P->tk.gw_mc * P->tk.gw_ld;
        if (P->st.win) {                            /* streamed DY: chains carried from window to window */
            T.cc = P->ws.gwc + piece * P->K * P->Cin * P->Cout + (T.k0 * P->Cin + T.I0) * P->Cout + T.C0;
            T.lcc = P->Cout;
            T.tcc = P->Cin * P->Cout;
        }
        if (P->sm.layout == 0) ct_gwc_items(P, &T, cbase, CH);
        else ct_gwc_segments(P, &T, piece, CH);
    }
    if (direct || P->sm.gw_pieces > 1 || P->st.win) return;    /* (cast by ct_tree_task) */
    int64_t es = ct_dt_size(P->gw_dt);
    for (int64_t kk = 0; kk < T.G; kk++) {
        int64_t k = T.k0 + kk;
        for (int64_t ci = T.I0; ci < T.I1; ci++)
            P->U->store_row(T.cb + kk * T.tile + (ci - T.I0) * T.ld, nc,
                         P->gw + ((k * P->Cin + ci) * P->Cout + T.C0) * es, P->gw_dt, CT_C_FP32, P->hif8_rnd,
                         P->saturate);
    }
}

/* Pairwise tree over the P piece sums of gw elements [e0, e0 + n): (0+1), (2+3), ..., an odd last one carried
 * up unchanged; again until one is left.  Then cast to gradWeight's dtype. */
static void ct_tree_task(const ct_plan *P, int64_t task) {
    int64_t total = P->K * P->Cin * P->Cout, e0 = task * CT_TREE_CHUNK, n = ct_min(CT_TREE_CHUNK, total - e0);
    float t[32][CT_TREE_CHUNK];
    int64_t cnt = P->sm.gw_pieces;
    for (int64_t i = 0; i < cnt; i++) memcpy(t[i], P->ws.pcb + i * total + e0, (size_t)n * 4);
    while (cnt > 1) {
        int64_t h = cnt / 2;
        for (int64_t i = 0; i < h; i++)
            for (int64_t j = 0; j < n; j++) t[i][j] = t[2 * i][j] + t[2 * i + 1][j];
        if (cnt & 1) memcpy(t[h], t[cnt - 1], (size_t)n * 4);
        cnt = h + (cnt & 1);
    }
    int64_t es = ct_dt_size(P->gw_dt);
    P->U->store_row(t[0], n, P->gw + e0 * es, P->gw_dt, CT_C_FP32, P->hif8_rnd, P->saturate);
}


#endif /* PYCONVTBC_CONV_CUBE_H */
