/* _conv_fwd.h: the forward operator aclnnConvTbc (docs/precision.md, "The forward operator").
 *
 *   out[t,b,co] = bias[co] + sum_k sum_ci x[t+k-pad, b, ci] * w[k, ci, co]      (x is 0 outside [0, T_in))
 *
 * The forward is a reduction pass of the same shape as gradInput's, so the two share its drivers and
 * micro-kernels, each with its own plan.  In GEMM roles (_conv_roles.h): A = x, packed like DY (channel panels of
 * 32, rounded to the compute precision C), the weight panels W = w (read along co: no transpose), the output
 * C = out, the reduction over (k, ci), the tap step +B instead of -B, the chains started at the bias.  The
 * forward's plan ct_fwd holds its own pass record `red` (red.A = the packed x, red.a_ps its rows per panel,
 * red.n_red = Cin, red.n_out = Cout, K, k0, the form, the table) and its packing record `pk`; the shared drivers
 * (ct_gic_rows / ct_gic_edge, ct_gin_rows_out, ct_pack_rows, ct_window_pack, ct_nar_pack_src) take those, and
 * the sequential form calls the table's gi_seq itself.
 *
 * Order of each output element's sum (one task computes it; nothing depends on threads or instruction set):
 *   every form starts from bias[co] (the fp32 value of the bias cast to Bc; 0 without a bias);
 *   cube forms: blocks (g, k) = (channel group of k0, tap), g outer, k inner, taps outside the sequence skipped,
 *     each block summed and added as in _conv_cube.h; one chain, no segments, no pieces;
 *   sequential: one fp32 FMA chain, taps k ascending outer, channels ci ascending inner.
 * The fp32 sums are then rounded to `pre` (FP16 / BF16 when C is; else none) and cast to out's dtype (FLOAT,
 * FLOAT16, BF16, or HiFloat8 with hif8_rnd / saturate).
 * Narrow channels (the cube form, Cin and Cout <= CT_NW (AVX2: Cout <= 4), B >= 8): gradInput's narrow kernels
 * make the same sums with their lanes along the output rows (red.fwd: tap k reads x row t + k - pad; the chains
 * start at the bias), from x packed channel-major; same operations, same order.
 */
#ifndef PYCONVTBC_CONV_FWD_H
#define PYCONVTBC_CONV_FWD_H

#include "_conv_plan.h"
#include "_conv_pack.h"
#include "_conv_cube.h"
#include "_conv_narrow.h"

/* the forward's tasks and workspace (float offsets from the aligned base; pointers bound by the caller) */
typedef struct {
    int64_t nxq, nwq, n_pack_x, n_pack_w, n_pack, n_rb, n_jb, n_comp, tile_ld, cbuf_stride, n_cbuf, nthreads_max;
    int64_t off_xp, off_wp, off_cbuf, total_floats;
    float *Xp, *Wp, *cbuf;
} ct_fwd_tasks;

typedef struct {
    int64_t T_in, B, Cin, Cout, K, pad, T_out, RI, RO;
    int compute, hbits, hrnd, hif8_rnd, saturate, acc, pre;
    const ct_ukr *U;                     /* the micro-kernels (_ukr.h) */
    int64_t k0;
    ct_src x, w;
    const float *bias;                   /* Cout fp32 start values, or NULL (start at +0) */
    char *out;                           /* C-contiguous (T_out, B, Cout) of out_dt */
    int out_dt, direct;                  /* direct: the sums are made in out itself (fp32, no rounding) */
    ct_fwd_tasks tk;                     /* tasks and workspace */
    /* the pass in GEMM roles (A = packed x, W = packed w, reduction over (k, ci), Cout output channels) and the
     * packing of x and w, as the shared drivers take them (_conv_roles.h; filled by ct_fwd_init, ct_fwd_bind) */
    ct_red red;
    ct_pk pk;
    /* streamed x (as gradInput's streamed DY, _conv_stream.h): when its packed copy would exceed CT_WIN_BYTES,
     * x is packed one window at a time: window w holds the x rows that output row blocks [w*w_rb, (w+1)*w_rb)
     * read (win_rows at most; red.a_ps rows per panel, red.a_r0 its first row) */
    int win;
    int64_t win_rows, w_rb, n_w;
    /* narrow channels ("cube", Cin and Cout <= CT_NW, B >= 8): gradInput's narrow kernels (_conv_narrow.h),
     * lanes along 16 (AVX2: 8) output rows; x packed channel-major, Xp[ci][red.a_ld] */
    int narrow;
    /* interruption: poll(poll_ctx) != 0 means stop (as the backward's); NULL: never stop */
    int (*poll)(void *);
    void *poll_ctx;
} ct_fwd;

static inline int ct_fwd_stop(const ct_fwd *F) { return F->poll != NULL && F->poll(F->poll_ctx); }

/* Sizes, tasks and workspace.  acc: the form (_conv_cube.h); pre: the rounding of the sums before the cast
 * (CT_C_FP32 = none, CT_C_FP16, CT_C_BF16); U: the micro-kernels the call will use (their block sizes pick the narrow
 * kernels or not).  Returns 0, or -1 for a bad or overflowing size. */
static int ct_fwd_init(ct_fwd *F, int64_t T_in, int64_t B, int64_t Cin, int64_t Cout, int64_t K, int64_t pad,
                       int64_t nthreads, int acc, int64_t k0, int out_dt, int pre, const ct_ukr *U) {
    if (ct_dt_class(out_dt) == CT_CLS_NONE) return -2;      /* a format no store path knows */
    int ok = 1;
    memset(F, 0, sizeof(*F));
    if (T_in < 0 || B < 0 || Cin < 0 || Cout < 0 || K < 1 || pad < 0 || nthreads < 1) return -1;
    if (acc < CT_ACC_SEQ || acc > CT_ACC_RZ || k0 < 1 || k0 > 64 || ct_dt_size(out_dt) == 0) return -1;
    if (pre != CT_C_FP32 && pre != CT_C_FP16 && pre != CT_C_BF16) return -1;
    F->T_in = T_in; F->B = B; F->Cin = Cin; F->Cout = Cout; F->K = K; F->pad = pad;
    F->T_out = T_in + 2 * pad - K + 1;
    if (F->T_out < 0) return -1;
    F->acc = acc; F->k0 = k0; F->out_dt = out_dt; F->pre = pre;
    F->RI = ct_mul_ok(T_in, B, &ok);
    F->RO = ct_mul_ok(F->T_out, B, &ok);
    int64_t nx = ct_mul_ok(F->RI, Cin, &ok);
    int64_t nw = ct_mul_ok(ct_mul_ok(K, Cin, &ok), Cout, &ok);
    (void)ct_mul_ok(F->RO, Cout, &ok);
    if (!ok) return -1;
    int prod = F->RI > 0 && Cin > 0 && Cout > 0 && F->RO > 0;
    F->tk.nxq = ct_cdiv(Cin, CT_PO);
    F->tk.nwq = ct_cdiv(Cout, CT_PO);
    F->tk.n_pack_x = prod ? ct_cdiv(F->RI, CT_PR) * F->tk.nxq : 0;
    F->tk.n_pack_w = prod ? K * F->tk.nwq : 0;
    F->tk.n_pack = F->tk.n_pack_x + F->tk.n_pack_w;
    F->tk.n_rb = Cout > 0 ? ct_cdiv(F->RO, CT_MCI) : 0;
    F->tk.n_jb = ct_cdiv(Cout, CT_NCI);
    F->tk.n_comp = F->tk.n_rb * F->tk.n_jb;
    F->direct = out_dt == CT_DT_F32 && pre == CT_C_FP32;
    F->tk.tile_ld = ct_min(CT_NCI, Cout);
    int64_t tile = F->direct ? 0 : ct_up(ct_min(CT_MCI, F->RO) * F->tk.tile_ld, CT_ALIGN / 4);
    F->tk.cbuf_stride = tile;
    F->tk.nthreads_max = F->tk.n_comp > 0 ? ct_min(nthreads, F->tk.n_comp) : 1;
    F->tk.n_cbuf = tile > 0 && F->tk.n_comp > 0 ? F->tk.nthreads_max : 0;
    F->red.a_ps = F->RI;
    if (prod && ct_win_force >= 0 && (ct_win_force > 0 || nx > CT_WIN_BYTES / 4)) {
        ct_window W = ct_window_plan(ct_window_target(Cin), K, B, F->tk.n_rb, F->RI, &ok);
        int64_t rows = W.rows;
        if (ok && rows < F->RI) {
            F->win = 1;
            F->win_rows = F->red.a_ps = rows;
            F->w_rb = W.w_rb;
            F->n_w = ct_cdiv(F->tk.n_rb, W.w_rb);
            nx = ct_mul_ok(rows, Cin, &ok);
        }
    }
    /* narrow channels: the cube sums with lanes along the output rows; chains and the cast tile per thread.
     * AVX2 only below 8 output channels: its 8 lanes along Cout are full at 8 (the general kernels were 1.10x
     * faster there; bench/narrow.py --op forward) */
    if (acc == CT_ACC_CUBE && prod && !F->win && ct_narrow_on && Cin <= CT_NW &&
        Cout <= U->narrow_gi_max_cin && B >= 8) {
        F->narrow = 1;
        F->red.a_ld = ct_up(F->RI, 16) + 16;            /* channel stride, as the backward's narrow packs */
        nx = ct_mul_ok(Cin, F->red.a_ld, &ok);
        F->tk.n_pack_x = ct_cdiv(F->RI, CT_PR);
        F->tk.n_pack = F->tk.n_pack_x + F->tk.n_pack_w;
        F->tk.n_comp = ct_cdiv(F->RO, CT_NR);
        F->tk.cbuf_stride = ct_up(2 * CT_NR * Cout, CT_ALIGN / 4);
        F->tk.nthreads_max = ct_min(nthreads, F->tk.n_comp);
        F->tk.n_cbuf = F->tk.nthreads_max;
    }
    int64_t o = 0;
    F->tk.off_xp = o; o += ct_up(prod ? nx : 0, CT_ALIGN / 4);
    F->tk.off_wp = o; o += ct_up(prod ? nw : 0, CT_ALIGN / 4);
    F->tk.off_cbuf = o; o += ct_mul_ok(F->tk.cbuf_stride, F->tk.n_cbuf, &ok);
    if (!ok || o > INT64_MAX / 8) return -1;
    F->tk.total_floats = o;
    /* the pass in GEMM roles: output rows r = t*B + b of T_out steps, reduction over Cin channels of x (T_in
     * steps), Cout output channels; tap k reads x row r + (k - pad)*B */
    ct_red *R = &F->red;
    R->acc = acc; R->k0 = k0; R->fwd = 1;
    R->K = K; R->pad = pad; R->B = B;
    R->t_c = F->T_out; R->t_a = T_in;
    R->n_red = Cin; R->n_out = Cout;
    return 0;
}

/* After the sources, outputs, micro-kernel table, mode and workspace pointers are set: the pass's operands (A = the
 * packed x, row-major or channel-major; W = the packed w; the chains' start = the bias) and x's and w's packing. */
static void ct_fwd_bind(ct_fwd *F) {
    ct_red *R = &F->red;
    R->U = F->U;
    R->A = F->tk.Xp;
    R->Ac = F->tk.Xp;
    R->W = F->tk.Wp;
    R->start = F->bias;
    ct_pk pk = {.U = F->U, .B = F->B, .compute = F->compute, .hbits = F->hbits, .hrnd = F->hrnd};
    F->pk = pk;
}

/* pack x: rows [r0, r1) of channel panel q into Xp[q][row][wq], rounded to C */
static void ct_fwd_pack_x(const ct_fwd *F, int64_t task) {
    int64_t chunk = task / F->tk.nxq, q = task % F->tk.nxq;
    int64_t r0 = chunk * CT_PR, r1 = ct_min(F->RI, r0 + CT_PR);
    int64_t c0 = q * CT_PO, wq = ct_min(CT_PO, F->Cin - c0);
    ct_pack_rows(&F->pk, &F->x, F->Cin, r0, r1 - r0, c0, wq, F->tk.Xp + q * F->RI * CT_PO + r0 * wq);
}

/* pack w: Wp[k][co panel p][ci][wj] = w[k, ci, 32p + j] (rows of w read along co: no transpose), rounded to C.
 * Cube forms: panel p at Wp + 32p*K*Cin, its rows in block order (ct_wblk over the reduction channels ci). */
static void ct_fwd_pack_w(const ct_fwd *F, int64_t task) {
    int64_t k = task / F->tk.nwq, p = task % F->tk.nwq;
    int64_t co0 = p * CT_PO, wj = ct_min(CT_PO, F->Cout - co0);
    int cube = F->acc != CT_ACC_SEQ, rnd = ct_round_for(F->w.dt, F->compute);
    float *dst = cube ? F->tk.Wp + co0 * F->K * F->Cin : F->tk.Wp + k * F->Cin * F->Cout + co0 * F->Cin;
    for (int64_t ci = 0; ci < F->Cin; ci++) {
        if ((ci & (CT_POLL_ROWS - 1)) == CT_POLL_ROWS - 1 && ct_fwd_stop(F)) return;   /* bounded work per poll */
        const char *row = F->w.base + k * F->w.s0 + ci * F->w.s1 + co0 * F->w.s2;
        int64_t r = ci;
        if (cube) {
            int64_t lo = ci - ci % F->k0;
            r = ct_wblk(lo, ct_min(F->Cin, lo + F->k0), F->K, k) + ci - lo;
        }
        F->U->decode_row(row, F->w.s2, F->w.dt, wj, dst + r * wj);
        if (cube) F->U->round_row(dst + r * wj, wj, rnd, F->hbits, F->hrnd);
    }
    for (int64_t ci = 0; !cube && ci < F->Cin; ci += CT_POLL_ROWS) {
        if (ci > 0 && ct_fwd_stop(F)) return;
        F->U->round_row(dst + ci * wj, ct_min(CT_POLL_ROWS, F->Cin - ci) * wj, rnd, F->hbits, F->hrnd);
    }
}

/* streamed x, window w: the x rows [*ra, *rz) that output row blocks [w*w_rb, (w+1)*w_rb) read */
static void ct_fwd_win_rows(const ct_fwd *F, int64_t w, int64_t *ra, int64_t *rz) {
    ct_window_rows(w, F->w_rb, F->tk.n_rb, F->RO, F->RI, F->B, -F->pad, F->K - 1 - F->pad, ra, rz);
}

/* window w: sets red.a_r0; returns its pack tasks (CT_PR rows x panel); its compute tasks are
 * [w*w_rb*n_jb, min(n_rb, (w+1)*w_rb)*n_jb) */
static int64_t ct_fwd_win_begin(ct_fwd *F, int64_t w) {
    int64_t ra, rz;
    ct_fwd_win_rows(F, w, &ra, &rz);
    F->red.a_r0 = ra;
    return ct_cdiv(rz - ra, CT_PR) * F->tk.nxq;
}

static void ct_fwd_win_pack(const ct_fwd *F, int64_t w, int64_t task) {
    if (ct_fwd_stop(F)) return;
    int64_t ra, rz;
    ct_fwd_win_rows(F, w, &ra, &rz);
    ct_window_pack(&F->pk, &F->x, F->Cin, F->tk.Xp, F->red.a_ps, F->tk.nxq, ra, rz, task);
}

/* narrow channels: rows [r0, r1) of x, every channel, into Xp[ci][red.a_ld], rounded to C */
static void ct_fwd_nar_pack_x(const ct_fwd *F, int64_t task) {
    int64_t r0 = task * CT_PR;
    ct_nar_pack_src(&F->pk, &F->x, F->T_in, F->Cin, r0, ct_min(F->RI, r0 + CT_PR), F->tk.Xp, F->red.a_ld);
}

static void ct_fwd_pack_task(const ct_fwd *F, int64_t task) {
    if (ct_fwd_stop(F)) return;
    if (task < F->tk.n_pack_x) {
        if (F->narrow) ct_fwd_nar_pack_x(F, task);
        else ct_fwd_pack_x(F, task);
    } else {
        ct_fwd_pack_w(F, task - F->tk.n_pack_x);
    }
}

/* output rows [u, v) (all valid for tap k): one tap of the sequential chain */
/* The sequential form's reduction channels per micro-kernel call at most, between two polls of the interruption
 * flag: a call's work is then bounded whatever Cin is (rows x CT_SEQ_POLL_C x 32 FMAs, about a millisecond).
 * Chains go on in the output tile from call to call: the same operations in the same order. */
#define CT_SEQ_POLL_C ((int64_t)1 << 16)

/* output rows [u, v) of tap k alone (rows whose taps are not all valid): channels in chunks, polling between them */
static void ct_fwd_rows(const ct_fwd *F, int64_t u, int64_t v, int64_t R0, int64_t j0, int64_t wj, int64_t k,
                        float *cj, int64_t ld) {
    const float *Bk = F->tk.Wp + j0 * F->Cin + k * F->Cin * F->Cout;     /* tap k, ci 0 of this co panel */
    int64_t shift = (k - F->pad) * F->B;
    int64_t MR = ct_gi_mr(F->U, wj);
    for (int64_t ca = 0; ca < F->Cin; ca += CT_SEQ_POLL_C) {
        int64_t cz = ct_min(F->Cin, ca + CT_SEQ_POLL_C);
        if (ca > 0 && ct_fwd_stop(F)) return;
        for (int64_t i = u; i < v; i += MR)
            F->U->gi_seq(ct_min(MR, v - i), wj, F->tk.Xp, F->red.a_ps, i + shift - F->red.a_r0, 0, 1, ca, cz, F->Cin,
                         Bk + ca * wj, 0, cj + (i - R0) * ld, ld);
    }
}

/* output rows [ia, ib), every tap valid: all taps in one call per tile, or (Cin > CT_SEQ_POLL_C) tap by tap in
 * channel chunks, polling between them */
static void ct_fwd_full_rows(const ct_fwd *F, int64_t ia, int64_t ib, int64_t R0, int64_t j0, int64_t wj, float *cj,
                             int64_t ld) {
    int64_t MR = ct_gi_mr(F->U, wj), B = F->B, row0 = -F->pad * B - F->red.a_r0;
    const float *Bp0 = F->tk.Wp + j0 * F->Cin;             /* tap 0, ci 0 of this co panel */
    if (F->Cin <= CT_SEQ_POLL_C) {
        for (int64_t i = ia; i < ib; i += MR)
            F->U->gi_seq(ct_min(MR, ib - i), wj, F->tk.Xp, F->red.a_ps, i + row0, B, F->K, 0, F->Cin, F->Cin, Bp0,
                         F->Cin * F->Cout, cj + (i - R0) * ld, ld);
        return;
    }
    for (int64_t k = 0; k < F->K; k++)
        ct_fwd_rows(F, ia, ib, R0, j0, wj, k, cj, ld);
}

/* compute task: output rows [R0, R1) x co [J0, J1) */
static void ct_fwd_task(const ct_fwd *F, int64_t task, float *cb) {
    if (ct_fwd_stop(F)) return;
    if (F->narrow) {     /* output rows [task*CT_NR, +CT_NR), every co (starting at the bias) */
        int64_t R0 = task * CT_NR;
        ct_gin_rows_out(&F->red, R0, ct_min(CT_NR, F->RO - R0), cb, F->out, F->out_dt, F->pre, F->hif8_rnd,
                        F->saturate);
        return;
    }
    ct_rows_tile rt = ct_rows_task(task, F->tk.n_jb, F->RO, F->Cout);
    int64_t R0 = rt.R0, R1 = rt.R1, J0 = rt.J0, J1 = rt.J1, nc = J1 - J0;
    float *ch = cb;
    int64_t ld = F->tk.tile_ld;
    if (F->direct) { ch = (float *)F->out + R0 * F->Cout + J0; ld = F->Cout; }
    for (int64_t r = 0; r < R1 - R0; r++) {             /* every chain starts at the bias */
        if (F->bias) memcpy(ch + r * ld, F->bias + J0, (size_t)nc * 4);
        else memset(ch + r * ld, 0, (size_t)nc * 4);
    }
    if (F->tk.Wp && F->tk.Xp) {
        int64_t K = F->K, pad = F->pad, B = F->B;
        /* rows valid for tap k: t in [pad - k, T_in + pad - k); for every tap: t in [pad, T_out - pad) */
        #define CT_FW_LO(k) (ct_max(0, pad - (k)) * B)
        #define CT_FW_HI(k) (ct_min(F->T_out, F->T_in + pad - (k)) * B)
        int64_t ia = ct_max(R0, pad * B), ib = ct_min(R1, (F->T_out - pad) * B);
        if (ia >= ib) ia = ib = R1;
        for (int64_t j0 = J0; j0 < J1; j0 += CT_PO) {
            int64_t wj = ct_min(CT_PO, F->Cout - j0);
            float *cj = ch + (j0 - J0);
            if (F->acc == CT_ACC_SEQ) {
                if (ct_fwd_stop(F)) return;                   /* (and within the panel: ct_fwd_rows) */
                /* taps outer, channels inner: the rows missing a tap take the taps they have, one at a time */
                for (int side = 0; side < 2; side++) {
                    int64_t u = side ? ib : R0, v = side ? R1 : ia;
                    for (int64_t k = 0; k < K && u < v; k++)
                        ct_fwd_rows(F, ct_max(u, CT_FW_LO(k)), ct_min(v, CT_FW_HI(k)), R0, j0, wj, k, cj, ld);
                }
                ct_fwd_full_rows(F, ia, ib, R0, j0, wj, cj, ld);
                continue;
            }
            const float *Bc = F->tk.Wp + j0 * K * F->Cin;        /* this co panel, in block order */
            int64_t nblk = ct_cdiv(F->Cin, F->k0) * K;
            int64_t step = ct_gic_step(F->k0);                /* blocks per pass (cache blocking) */
            for (int64_t j0b = 0; j0b < nblk; j0b += step) {
                int64_t j1b = ct_min(nblk, j0b + step);
                if (ct_fwd_stop(F)) return;
                /* rows missing some taps: output row t has taps pad - t .. T_in + pad - 1 - t */
                for (int side = 0; side < 2; side++) {
                    int64_t u = side ? ib : R0, v = side ? R1 : ia;
                    ct_gic_edge(&F->red, u, v, wj, -pad * B - F->red.a_r0, B, j0b, j1b, -1, pad, F->T_in + pad - 1,
                                Bc, cj + (u - R0) * ld, ld);
                }
                if (ia < ib) ct_gic_rows(&F->red, ia, ib, wj, -pad * B - F->red.a_r0, B, j0b, j1b, Bc, cj + (ia - R0) * ld, ld);
            }
        }
        #undef CT_FW_LO
        #undef CT_FW_HI
    }
    if (F->direct) return;
    int64_t es = ct_dt_size(F->out_dt);
    int pre = ct_round_for(F->out_dt, F->pre);
    if (nc == ld && nc == F->Cout)
        F->U->store_row(ch, (R1 - R0) * nc, F->out + R0 * F->Cout * es, F->out_dt, pre, F->hif8_rnd,
                     F->saturate);
    else
        for (int64_t r = R0; r < R1; r++)
            F->U->store_row(ch + (r - R0) * ld, nc, F->out + (r * F->Cout + J0) * es, F->out_dt, pre,
                         F->hif8_rnd, F->saturate);
}

/* Last: the output's NaNs to the canonical NaN (as the backward's ct_canon_task) */
static int64_t ct_fwd_canon_ntasks(const ct_fwd *F) { return ct_cdiv(F->RO * F->Cout, CT_CANON_CHUNK); }
static void ct_fwd_canon_task(const ct_fwd *F, int64_t task) {
    int64_t e0 = task * CT_CANON_CHUNK;
    if (F->out) F->U->canon_nan(F->out + e0 * ct_dt_size(F->out_dt), ct_min(CT_CANON_CHUNK, F->RO * F->Cout - e0),
                                F->out_dt);
}

#endif /* PYCONVTBC_CONV_FWD_H */
