/* _conv_plan.h: the backward's plan (sizes, tasks, workspace layout), its views in the shared drivers' roles
 * (ct_plan_pk, ct_gi_red: _conv_roles.h), and the numerics every driver shares (blocking, the streamed-window
 * planner, the task tiles).
 *
 * ISA-free: the micro-kernel table (_ukr.h) is chosen by the caller and handed in (ct_plan.U); the planner reads
 * only its block sizes.  All index arithmetic is int64_t.
 */
#ifndef PYCONVTBC_CONV_PLAN_H
#define PYCONVTBC_CONV_PLAN_H

#include <stdint.h>
#include <string.h>

#include "_codes.h"
#include "_ukr.h"
#include "_conv_roles.h"

/* The narrow-channel cube kernels (_conv_narrow.h) on or off (a profiling hook; plan after setting it): the same
 * bits either way */
static int ct_narrow_on = 1;

/* Cache blocking.  CT_KCI is part of the definition of gi's summation order (co blocks of CT_KCI, then k, then
 * co): it is a constant, the same for every thread count and instruction set.  The others only move work
 * between tasks and cache levels and never change a result.  ct_blk[] holds them so that the profiling hook
 * _conv_tbc._set_blocking can vary them; nothing else writes it. */
enum { CT_B_MCI, CT_B_NCI, CT_B_KCI, CT_B_MCW, CT_B_NCW, CT_B_KCW, CT_B_N };
static int64_t ct_blk[CT_B_N] = {
    168,   /* gi task: rows (multiple of 14 and of 6) */
    256,   /* gi task: ci columns (multiple of CT_PO) */
    256,   /* gi: co per reduction block (multiple of CT_PO) */
    64,    /* gw task: ci rows (multiple of CT_PX) */
    256,   /* gw task: co columns (multiple of CT_PO) */
    256,   /* gw: rows per reduction block */
};
#define CT_MCI (ct_blk[CT_B_MCI])
#define CT_NCI (ct_blk[CT_B_NCI])
#define CT_KCI (ct_blk[CT_B_KCI])
#define CT_MCW (ct_blk[CT_B_MCW])
#define CT_NCW (ct_blk[CT_B_NCW])
#define CT_KCW (ct_blk[CT_B_KCW])
#define CT_XG 16          /* pack: Xp panels per task */
#define CT_ALIGN 64
#define CT_TREE_CHUNK 128  /* gw elements per pairwise-tree task (_conv_cube.h) */
#define CT_CANON_CHUNK ((int64_t)1 << 16)   /* output elements per canonical-NaN task (both operators) */
/* Streamed DY (_conv_stream.h): a packed DY larger than this many bytes is packed one window at a time.
 * ct_win_force (a test hook): 0 automatic, > 0 stream with windows of about that many rows whatever the size,
 * < 0 never stream.  Neither changes a result: only where DY's packed rows are kept. */
#define CT_WIN_BYTES ((int64_t)64 << 20)
static int64_t ct_win_force = 0;

/* narrow gradWeight (_conv_narrow.h): the t's of one chunk (whole blocks of k0, about 32), and the x rows the
 * chunk's K taps read (its t's plus K - 1) */
static inline int64_t ct_gwn_tc(int64_t k0) { return k0 * ct_max(1, 32 / k0); }
static inline int64_t ct_gwn_rows(int64_t k0, int64_t K) { return ct_gwn_tc(k0) + K - 1; }

typedef struct {
    const char *base;           /* element [0,0,0] */
    int64_t s0, s1, s2;         /* byte strides (any sign, may be 0) */
    int dt;
} ct_src;

/* tasks and their tiles (ct_plan_init) */
typedef struct {
    int64_t nq, nxp, nwp;                 /* panels: DY co-panels, X ci-panels(8), W ci-panels(32) */
    int64_t n_dy_chunks, n_x_chunks, n_xg, n_gb_parts;
    int64_t n_pack_dy, n_pack_x, n_pack_w, n_pack;
    int64_t n_gi_rb, n_gi_jb, n_gi, n_gw_ib, n_gw_ob, n_gw, n_comp;
    int64_t n_gw1;                        /* gw tasks per piece (ascend950) */
    int64_t n_post;                       /* post tasks: pairwise trees of the pieces, or the narrow item sums */
    int64_t nthreads_max;                 /* threads the workspace was laid out for (<= compute tasks) */
    int64_t gi_ld, gw_ld;                 /* leading dims of the task tiles in cbuf */
    int64_t gi_tile;                      /* floats of one gi tile in cbuf (two with gi segments) */
    int64_t gw_kg;                        /* k per gw task */
    int64_t gw_nkr;                       /* k per register pass of the gw micro-kernel (narrow channels) */
    int64_t gw_mc, gw_nc;                 /* ci and co per gw task */
} ct_tasks;

/* the workspace: regions (float offsets from the aligned base) and the pointers bound to them by the caller */
typedef struct {
    int64_t off_dyp, off_dyc, off_xp, off_wp, off_gbp, off_cbuf, cbuf_stride, n_cbuf, total_floats;
    int64_t off_pcb;                      /* piece sums (P x K*Cin*Cout floats), or the narrow per-item chains */
    int64_t off_gwc;                      /* streamed cube forms: the gw chain values carried between windows */
    int64_t gw_ctile_off;                 /* floats from a thread's cbuf to its gw chain tile (cube forms) */
    /* bmajor: floats from a thread's cbuf to its copy of one item's DY rows (a row chunk of one co panel), which
     * gradWeight's per-item chains read instead of the t-major rows B rows apart */
    int64_t gw_ybuf_off;
    float *DYp, *Xp, *Wp, *gbp, *cbuf, *pcb, *gwc;
    /* DYc: the channel-major DY the narrow gradInput kernels read (DYp on the narrow path, the copy at off_dyc
     * with narrow_gi) */
    const float *DYc;
    /* DYp's geometry: rows per panel (panel q starts at DYp + q*dy_ps*CT_PO) and the DY row at its row 0 (t-major
     * rows; RO and 0 unless DY is streamed) */
    int64_t dy_ps, dy_r0;
    int dy_direct, x_direct;              /* DYp / Xp point at the caller's operand itself (ct_plan_direct) */
} ct_wspace;

/* the accumulation model (_conv_cube.h): form, block size k0, order layout (0 ascend910b/910, 1 ascend950) */
typedef struct {
    int acc, layout;
    int64_t k0;
    const int64_t *perm;                  /* layout 0: the order the B per-item chains are added in (NULL: b order) */
    int64_t gw_pieces, gw_seg, gi_seg;    /* layout 1: gw pieces P, gw / gi segment lengths in blocks (0: none) */
    int bmajor;                           /* Xp rows in b-major order: row b*T_in + t (layout 0 cube forms, B > 1) */
} ct_sums;

/* Streamed DY (ct_plan_init decides; _conv_stream.h runs it): DY is packed one window of rows at a time instead of
 * whole, in two passes.  win_rows: the window's capacity (rows); pass 1 (gi): w1_rb gi row blocks per window, n_w1
 * windows; pass 2 (gw): n_w2 windows of w2_rows chain rows (layout-0 cube forms: w2_items whole items per window,
 * or windows of w2_rows t's within an item).  The fp32 gw sums live in gw itself when it is fp32, else (pieces x
 * gw floats) at pcb; the cube forms' chain values at gwc. */
typedef struct {
    int win;
    int64_t win_rows, w1_rb, n_w1, w2_rows, w2_items, n_w2;
    int64_t w_r0, w_r1, w_b0, w_b1, w_t0, w_t1;   /* pass 2: the current window (set by the driver) */
} ct_stream;

/* Narrow channels (_conv_narrow.h): DYp channel-major, no Xp, the per-item gw chains at pcb.  narrow_gi: ascend950
 * (layout 1) "cube" with narrow channels: gradInput's order is ascend910b's, so its narrow kernels run it, on a
 * channel-major copy of DY at off_dyc (stride nlo) beside the row-major panels that gradWeight's order reads. */
typedef struct {
    int narrow, narrow_gi;
    int64_t nlo, nli;                     /* the channel strides of DYp and of a gw task's x rows */
} ct_narrowing;

typedef struct {
    /* problem */
    int64_t T_in, B, Cin, Cout, K, pad, T_out, RI, RO;
    int compute, hbits, hrnd, hif8_rnd, saturate;
    ct_src dy, x, w;
    char *gi, *gw, *gb;
    int gi_dt, gw_dt, gb_dt;
    const ct_ukr *U;                      /* the micro-kernels (_ukr.h) */
    ct_tasks tk;
    ct_wspace ws;
    ct_sums sm;
    ct_stream st;
    ct_narrowing nr;
    /* interruption: poll(poll_ctx) != 0 means stop (the caller was interrupted); tasks then return early and
     * the outputs are left partly written.  NULL: never stop. */
    int (*poll)(void *);
    void *poll_ctx;
} ct_plan;

static inline int ct_stop(const ct_plan *P) { return P->poll != NULL && P->poll(P->poll_ctx); }
/* rows a pack task handles between two polls at most (a power of two): bounded work whatever the channel count */
#define CT_POLL_ROWS ((int64_t)1 << 16)

/* ------------------------------------------------------------------------------------------------ */
/* plan: sizes, task counts, workspace layout.  Returns 0, or -1 when a size overflows int64.        */
/* ------------------------------------------------------------------------------------------------ */
static int64_t ct_mul_ok(int64_t a, int64_t b, int *ok) {
    if (a < 0 || b < 0) { *ok = 0; return 0; }
    if (a != 0 && b > INT64_MAX / 4 / a) { *ok = 0; return 0; }
    return a * b;
}

/* ascend950's pieces and segments (profiles.SumGeometry, handed in from the SoC profile: no chip's number is
 * written here) */
typedef struct { int64_t piece_co, piece_red, pieces, gw_segment, gi_segment; } ct_geom;

/* the planner's sizes of the operands' packed copies (floats), decided step by step */
typedef struct { int64_t nd, nx, nw, ndc, nch; int prod; } ct_sizes;

/* sizes, form and pack tasks; -1 for a bad or overflowing size */
static int ct_plan_problem(ct_plan *P, int64_t T_in, int64_t B, int64_t Cin, int64_t Cout, int64_t K, int64_t pad,
                           int acc, int64_t k0, int layout, ct_sizes *Z) {
    int ok = 1;
    if (T_in < 0 || B < 0 || Cin < 0 || Cout < 0 || K < 0 || pad < 0) return -1;
    if (acc < CT_ACC_SEQ || acc > CT_ACC_RZ || (acc != CT_ACC_SEQ && (k0 < 1 || k0 > 64 || layout < 0 || layout > 1))) return -1;
    P->sm.acc = acc; P->sm.k0 = k0 > 0 ? k0 : 1; P->sm.layout = layout;
    /* the per-item gradWeight chains of layout 0 read the rows of one b: keep X's contiguous, and copy DY's (the
     * t-major rows of one b are B rows apart: power-of-two strides then alias in L1) */
    P->sm.bmajor = acc != CT_ACC_SEQ && layout == 0 && B > 1;
    P->T_in = T_in; P->B = B; P->Cin = Cin; P->Cout = Cout; P->K = K; P->pad = pad;
    P->T_out = T_in + 2 * pad - K + 1;
    if (P->T_out < 0) return -1;
    P->RI = ct_mul_ok(T_in, B, &ok);
    P->RO = ct_mul_ok(P->T_out, B, &ok);
    Z->nd = ct_mul_ok(P->RO, Cout, &ok);
    Z->nx = ct_mul_ok(P->RI, Cin, &ok);
    Z->nw = ct_mul_ok(ct_mul_ok(K, Cin, &ok), Cout, &ok);
    if (!ok) return -1;
    P->tk.nq = ct_cdiv(Cout, CT_PO);
    P->tk.nxp = ct_cdiv(Cin, CT_PX);
    P->tk.nwp = ct_cdiv(Cin, CT_PO);
    P->tk.n_dy_chunks = Cout > 0 ? ct_cdiv(P->RO, CT_PR) : 0;
    P->tk.n_x_chunks = ct_cdiv(P->RI, CT_PR);
    P->tk.n_xg = ct_cdiv(P->tk.nxp, CT_XG);
    /* packs are needed only where the products are: with no product, gi/gw are zeros */
    Z->prod = (P->RI > 0 && Cin > 0 && Cout > 0 && K > 0 && P->RO > 0);
    P->tk.n_pack_dy = P->tk.n_dy_chunks * P->tk.nq;          /* always: gb needs the sums */
    P->tk.n_pack_x = Z->prod ? P->tk.n_x_chunks * P->tk.n_xg : 0;
    P->tk.n_pack_w = Z->prod ? K * P->tk.nwp : 0;
    P->tk.n_pack = P->tk.n_pack_dy + P->tk.n_pack_x + P->tk.n_pack_w;
    return 0;
}

/* gi tasks, and gw tasks: k groups x ci blocks x co blocks.  k per task: the DY rows of a row block are reused by
 * every k of the task; its fp32 tiles (k x ci x co) should stay within ~512 KiB of L2; groups are balanced
 * (K = 5 -> 3 + 2, not 4 + 1).  Then, while there are fewer than min(4, threads) tasks (2 threads could not share
 * gw with gi), split: ci blocks, then co blocks, then k groups down to the register pass (ci and co halves are
 * even, where K = 3 split into 3 tasks that 2 threads ran in 2 rounds; and a ci block reads only its own X rows).
 * Not more: every task of a split reads all its DY rows again (the cube forms copy them), so one thread keeps one
 * task.  Measured on a Xeon, cube (512,32,32,32,3,1): 2.19 -> 1.65 ms on 1 thread; on 2 threads 1.14 -> 1.03 ms
 * with 3 tasks instead of 6, -> 0.93 ms with 2 ci halves.  None of it changes a gw sum: each element is one chain
 * over the rows. */
static void ct_plan_tasks(ct_plan *P, int64_t nthreads) {
    int64_t K = P->K, Cin = P->Cin, Cout = P->Cout;
    ct_tasks *t = &P->tk;
    t->n_gi_rb = Cin > 0 ? ct_cdiv(P->RI, CT_MCI) : 0;
    t->n_gi_jb = ct_cdiv(Cin, CT_NCI);
    t->n_gi = t->n_gi_rb * t->n_gi_jb;
    /* k per register pass: narrow channels keep up to 3 k x 8 ci x 16 co accumulators in registers */
    t->gw_nkr = (Cout <= 16 && K > 0) ? ct_max(1, ct_min(K, ct_min(3, 24 / ct_max(1, ct_min(CT_PX, Cin))))) : 1;
    t->gw_mc = ct_min(CT_MCW, ct_up(ct_max(Cin, 1), CT_PX));
    t->gw_nc = ct_min(CT_NCW, ct_up(ct_max(Cout, 1), CT_PO));
    t->gw_kg = 1;
    if (K > 0) {
        int64_t tile = ct_max(1, ct_min(t->gw_mc, Cin) * ct_min(t->gw_nc, Cout) * 4);
        int64_t gmax = ct_max(t->gw_nkr, ct_min(K, (512 * 1024) / tile));
        t->gw_kg = ct_cdiv(K, ct_cdiv(K, gmax));
        for (;;) {
            int64_t nt = ct_cdiv(K, t->gw_kg) * ct_cdiv(Cin, t->gw_mc) * ct_cdiv(Cout, t->gw_nc);
            if (nt >= ct_min(4, ct_max(1, nthreads))) break;
            if (t->gw_mc > CT_PX && t->gw_mc < 2 * Cin) t->gw_mc = ct_up(t->gw_mc / 2, CT_PX);
            else if (t->gw_nc > CT_PO && t->gw_nc < 2 * Cout) t->gw_nc = ct_up(t->gw_nc / 2, CT_PO);
            else if (t->gw_kg > t->gw_nkr) t->gw_kg = ct_max(t->gw_nkr, t->gw_kg / 2);
            else break;
        }
    }
    t->n_gw_ib = ct_cdiv(Cin, t->gw_mc);
    t->n_gw_ob = ct_cdiv(Cout, t->gw_nc);
    t->n_gw1 = t->n_gw = ct_cdiv(K, t->gw_kg) * t->n_gw_ib * t->n_gw_ob;
}

/* layout 1 (ascend950, geometry g): pieces when the output has fewer than g->pieces blocks of g->piece_co co x
 * g->piece_red (ci, k): P = pieces // blocks; gw segments of g->gw_segment positions, gi segments of g->gi_segment
 * reduction elements when K*Cout >= g->gi_segment */
static int ct_plan_pieces(ct_plan *P, const ct_geom *g, int prod) {
    int ok = 1;
    int64_t K = P->K, Cin = P->Cin, Cout = P->Cout;
    P->sm.gw_pieces = 1;
    if (P->sm.acc != CT_ACC_SEQ && P->sm.layout == 1) {
        if (!g || g->piece_co < 1 || g->piece_red < 1 || g->pieces < 1 || g->gw_segment < 1 || g->gi_segment < 1)
            return -1;
        int64_t nb = ct_cdiv(Cout, g->piece_co) * ct_cdiv(ct_mul_ok(Cin, K, &ok), g->piece_red);
        P->sm.gw_pieces = (prod && nb > 0 && nb < g->pieces) ? g->pieces / nb : 1;
        P->sm.gw_seg = ct_max(1, g->gw_segment / P->sm.k0);
        if (ct_mul_ok(K, Cout, &ok) >= g->gi_segment) P->sm.gi_seg = ct_max(1, g->gi_segment / P->sm.k0);
    }
    if (P->sm.gw_pieces > 1) {
        P->tk.n_gw = P->tk.n_gw1 * P->sm.gw_pieces;
        P->tk.n_post = ct_cdiv(ct_mul_ok(ct_mul_ok(K, Cin, &ok), Cout, &ok), CT_TREE_CHUNK);
    }
    P->tk.n_comp = P->tk.n_gi + P->tk.n_gw;
    P->tk.gi_ld = ct_min(CT_NCI, Cin);
    P->tk.gw_ld = ct_min(P->tk.gw_nc, Cout);
    P->tk.gi_tile = ct_up(ct_min(CT_MCI, P->RI) * P->tk.gi_ld, CT_ALIGN / 4);
    return ok ? 0 : -1;
}

/* Streamed operands, one planner for both (the backward's DY: _conv_stream.h; the forward's x: _conv_fwd.h).  An
 * output pass over row blocks of CT_MCI rows (rows r = t*B + b) reads, for output row r, the operand rows r + lo*B ..
 * r + hi*B (the K taps: hi - lo = K - 1).  When the operand's packed copy would be too large, it is packed one
 * window at a time: a window holds the operand rows of w_rb whole output row blocks (and the K - 1 time steps
 * around them), t-major, at panel row r - ra.  Only where the packed rows live changes, never an operation or
 * its order. */
/* windows of about this many rows for C channels: the test hook's size, else CT_WIN_BYTES of packed rows */
static inline int64_t ct_window_target(int64_t C) {
    return ct_win_force > 0 ? ct_win_force : ct_max(1, CT_WIN_BYTES / 4 / ct_max(1, C));
}

/* w_rb: output row blocks per window (of nrb); rows: a window's capacity in operand rows (of RA) */
typedef struct { int64_t w_rb, rows; } ct_window;
static ct_window ct_window_plan(int64_t target, int64_t K, int64_t B, int64_t nrb, int64_t RA, int *ok) {
    int64_t halo = ct_mul_ok(K - 1, B, ok);
    ct_window W;
    W.w_rb = ct_max(1, (target - halo) / CT_MCI);
    W.rows = ct_min(RA, ct_min(W.w_rb, nrb) * CT_MCI + halo);
    return W;
}

/* the operand rows [*ra, *rz) (of RA) that window w's output rows (row blocks [w*w_rb, (w+1)*w_rb) of nrb, R rows
 * in all) read: their rows shifted by lo*B .. hi*B */
static void ct_window_rows(int64_t w, int64_t w_rb, int64_t nrb, int64_t R, int64_t RA, int64_t B, int64_t lo,
                           int64_t hi, int64_t *ra, int64_t *rz) {
    int64_t rb0 = w * w_rb, rb1 = ct_min(nrb, rb0 + w_rb);
    int64_t R0 = rb0 * CT_MCI, R1 = ct_min(R, rb1 * CT_MCI);
    *ra = ct_max(0, R0 + lo * B);
    *rz = ct_min(RA, R1 + hi * B);
    if (*ra > *rz) *ra = *rz;
}

/* DY streamed in windows (_conv_stream.h) when its packed copy would exceed CT_WIN_BYTES.  Pass 1 (gi) windows hold
 * whole gi row blocks plus the K-1 time steps around them that their taps read; pass 2 (gw) windows are whole
 * blocks of k0 chain rows (layout-0 cube forms: whole items, or k0-aligned t ranges of one item), so no block and
 * no order changes. */
static void ct_plan_stream(ct_plan *P, int gw_buf, ct_sizes *Z, int *ok) {
    int64_t B = P->B, K = P->K, Cout = P->Cout, acc = P->sm.acc;
    P->ws.dy_ps = P->RO;
    if (!Z->prod || ct_win_force < 0) return;
    int64_t target = ct_window_target(Cout);
    ct_window W1 = ct_window_plan(target, K, B, P->tk.n_gi_rb, P->RO, ok);    /* pass 1: gi's row blocks */
    int64_t w1_rb = W1.w_rb, rows1 = W1.rows;
    int64_t ka = acc == CT_ACC_SEQ ? 1 : P->sm.k0;
    int64_t w2 = ct_max(ka, target / ka * ka), rows2, n_w2, items = 0;
    if (acc != CT_ACC_SEQ && P->sm.layout == 0) {
        if (P->T_out <= w2) {
            items = ct_min(B, ct_max(1, w2 / P->T_out));
            rows2 = items * P->T_out;
            n_w2 = ct_cdiv(B, items);
        } else {
            rows2 = w2;
            n_w2 = ct_mul_ok(B, ct_cdiv(P->T_out, w2), ok);
        }
    } else {
        rows2 = ct_min(w2, P->RO);
        n_w2 = ct_cdiv(P->RO, w2);
    }
    int64_t wr = ct_max(rows1, rows2);
    if (!*ok || wr >= P->RO) return;
    P->st.win = 1;
    P->st.win_rows = P->ws.dy_ps = wr;
    P->st.w1_rb = w1_rb;
    P->st.n_w1 = ct_cdiv(P->tk.n_gi_rb, w1_rb);
    P->st.w2_rows = w2;
    P->st.w2_items = items;
    P->st.n_w2 = n_w2;
    Z->nd = ct_mul_ok(wr, Cout, ok);
    if (gw_buf && P->sm.gw_pieces == 1)    /* gw's fp32 sums (at pcb) are cast by the tree tasks */
        P->tk.n_post = ct_cdiv(ct_mul_ok(ct_mul_ok(K, P->Cin, ok), Cout, ok), CT_TREE_CHUNK);
}

/* narrow channels, ascend910b / ascend910 "cube" (_conv_narrow.h): lanes along the items (gw) and the rows (gi)
 * instead of the few channels.  Its per-item chains (K*Cin*Cout floats per item, B rounded up to whole item
 * blocks) take pcb's place, when they are no larger than the operands.  And ascend950 "cube" with narrow channels
 * (narrow_gi): gradInput on the narrow kernels, from a channel-major copy of DY whose room is kept on every
 * instruction set, so that a workspace sized under one fits a run under another (U->narrow_gi_max_cin: the AVX2
 * path keeps its general kernels above 4 gradInput channels, whose 8 lanes along Cin are then full enough: the
 * narrow ones took 5-12% longer at Cin = 8). */
static void ct_plan_narrow(ct_plan *P, const ct_ukr *U, int64_t nthreads, ct_sizes *Z, int *ok) {
    int64_t B = P->B, K = P->K, Cin = P->Cin, Cout = P->Cout;
    int fits = Z->prod && !P->st.win && ct_narrow_on && Cin <= CT_NW && Cout <= CT_NW && !P->sm.gi_seg &&
               P->sm.acc == CT_ACC_CUBE;
    if (fits && P->sm.layout == 0 && B >= 8) {
        int ok2 = 1;
        int64_t nch = ct_mul_ok(Z->nw, ct_up(B, CT_NB), &ok2);
        if (ok2 && nch <= Z->nd + Z->nx) {
            Z->nch = nch;
            P->nr.narrow = 1;
            P->sm.bmajor = 0;
            /* gw tasks of several item blocks each (ct_gwn_task), on half the threads, the many short gi tasks on
             * the rest: two gw tasks at once each took about twice their time alone (2 cores of a Sapphire Rapids
             * VM), and one gw task beside the gi tasks did not (docs/performance.md, narrow channels) */
            P->tk.n_gw1 = P->tk.n_gw = ct_min(ct_cdiv(B, CT_NB), ct_max(1, nthreads / 2));
            P->nr.nlo = ct_up(P->RO, 16) + 16;
            /* gradWeight packs the x rows of its chunk itself (ct_gwn_pack_x): no X panel */
            P->nr.nli = ct_gwn_rows(P->sm.k0, K) * CT_NB + 16;
            P->tk.n_pack = P->tk.n_pack - P->tk.n_pack_x;
            P->tk.n_pack_x = 0;
            Z->nd = Cout * P->nr.nlo;
            Z->nx = 0;
            P->tk.n_gi_rb = P->tk.n_gi = ct_cdiv(P->RI, CT_NR);
            P->tk.n_gi_jb = 1;
            P->tk.n_comp = P->tk.n_gi + P->tk.n_gw;
            P->tk.n_post = ct_cdiv(Z->nw, CT_TREE_CHUNK);
        }
    } else if (fits && P->sm.layout == 1) {
        P->nr.nlo = ct_up(P->RO, 16) + 16;
        Z->ndc = ct_mul_ok(Cout, P->nr.nlo, ok);
        if (Cin <= U->narrow_gi_max_cin) {
            P->nr.narrow_gi = 1;
            P->tk.n_gi_rb = P->tk.n_gi = ct_cdiv(P->RI, CT_NR);
            P->tk.n_gi_jb = 1;
            P->tk.n_comp = P->tk.n_gi + P->tk.n_gw;
        }
    }
}

/* the threads' buffers, then the workspace's regions in order */
static int ct_plan_workspace(ct_plan *P, int gi_buf, int gw_buf, int64_t nthreads, const ct_sizes *Z, int ok) {
    int64_t Cin = P->Cin, Cout = P->Cout, acc = P->sm.acc, prod = Z->prod;
    /* gw tile (outputs other than fp32), then, for the cube forms, the chain tile [gw_kg][gw_mc][gw_ld] */
    int64_t gwt = gw_buf ? ct_up(P->tk.gw_kg * ct_min(P->tk.gw_mc, Cin) * P->tk.gw_ld, CT_ALIGN / 4) : 0;
    P->ws.gw_ctile_off = gwt;
    if (acc != CT_ACC_SEQ && prod) gwt += P->tk.gw_kg * P->tk.gw_mc * P->tk.gw_ld;
    P->ws.gw_ybuf_off = gwt;
    if (P->sm.bmajor && prod) gwt += ct_max(1, CT_KCW / P->sm.k0) * P->sm.k0 * CT_PO;    /* one chunk of one co panel */
    int64_t cb = ct_max(gi_buf || P->sm.gi_seg ? (P->sm.gi_seg ? 2 : 1) * P->tk.gi_tile : 0, gwt);
    if (P->nr.narrow) cb = ct_max(cb, ct_max(2 * CT_NR, P->nr.nli) * Cin);
    if (P->nr.narrow_gi) cb = ct_max(cb, 2 * CT_NR * Cin);
    P->ws.cbuf_stride = ct_up(cb, CT_ALIGN / 4);
    P->ws.n_cbuf = P->tk.n_comp > 0 ? ct_min(nthreads, P->tk.n_comp) : 0;
    P->tk.nthreads_max = P->tk.n_comp > 0 ? ct_min(nthreads, P->tk.n_comp) : 1;
    if (cb == 0) P->ws.n_cbuf = 0;
    int64_t o = 0;
    P->ws.off_dyp = o; o += ct_up(prod ? Z->nd : 0, CT_ALIGN / 4);
    P->ws.off_dyc = o; o += ct_up(Z->ndc, CT_ALIGN / 4);
    P->ws.off_xp = o; o += ct_up(prod ? Z->nx : 0, CT_ALIGN / 4);
    P->ws.off_wp = o; o += ct_up(prod ? Z->nw : 0, CT_ALIGN / 4);
    P->tk.n_gb_parts = Cout > 0 ? ct_cdiv(P->RO, CT_GBR) : 0;
    P->ws.off_gbp = o; o += ct_up(ct_mul_ok(P->tk.n_gb_parts, Cout, &ok), CT_ALIGN / 4);
    P->ws.off_cbuf = o; o += ct_mul_ok(P->ws.cbuf_stride, P->ws.n_cbuf, &ok);
    P->ws.off_pcb = o;
    if (P->nr.narrow) o += Z->nch;
    else if ((P->sm.gw_pieces > 1 && prod) || (P->st.win && gw_buf)) o += ct_mul_ok(P->sm.gw_pieces, Z->nw, &ok);
    P->ws.off_gwc = o; if (P->st.win && acc != CT_ACC_SEQ) o += ct_mul_ok(P->sm.gw_pieces, Z->nw, &ok);
    if (!ok || o > INT64_MAX / 8) return -1;
    P->ws.total_floats = o;
    return 0;
}

/* The backward's dtypes (dy, x, w, gi, gw, gb codes): operands and gi / gb of the 4- and 2-byte floats, gw also
 * of the 8-bit codes.  Returns 0, or -2 for a code outside these classes (the plan refuses it). */
static int ct_plan_dtypes(const int dts[6]) {
    for (int i = 0; i < 6; i++) {
        int c = ct_dt_class(dts[i]);
        if (c == CT_CLS_NONE || (c == CT_CLS_8 && i != 4)) return -2;
    }
    return 0;
}

/* The backward's plan: sizes, tasks, workspace layout.  Returns 0, or -1 for a bad or overflowing size.
 * gi_buf / gw_buf: whether gi / gw need fp32 task tiles (else they accumulate in the fp32 output itself);
 * acc, k0, layout: the accumulation model (_conv_cube.h; acc 0 = sequential, k0 and layout then unused);
 * g: layout 1's pieces and segments (the SoC profile's); U: the micro-kernels the call will use (block sizes). */
static int ct_plan_init(ct_plan *P, int64_t T_in, int64_t B, int64_t Cin, int64_t Cout, int64_t K,
                        int64_t pad, int64_t nthreads, int gi_buf, int gw_buf, int acc, int64_t k0, int layout,
                        const ct_geom *g, const ct_ukr *U) {
    int ok = 1;
    ct_sizes Z = {0, 0, 0, 0, 0, 0};
    memset(P, 0, sizeof(*P));
    if (nthreads < 1 || ct_plan_problem(P, T_in, B, Cin, Cout, K, pad, acc, k0, layout, &Z) != 0) return -1;
    ct_plan_tasks(P, nthreads);
    if (ct_plan_pieces(P, g, Z.prod) != 0) return -1;
    ct_plan_stream(P, gw_buf, &Z, &ok);
    ct_plan_narrow(P, U, nthreads, &Z, &ok);
    return ct_plan_workspace(P, gi_buf, gw_buf, nthreads, &Z, ok);
}

/* Zero-copy panels.  A DY panel is [rows][wq] fp32 and an X panel [rows][wi] fp32: when an operand has a single
 * panel (Cout <= CT_PO, Cin <= CT_PX), is fp32, needs no rounding (compute FP32) and its rows are one dense
 * run of memory, that run IS the panel: the kernels read the caller's buffer and the pack pass skips it
 * (gb's partial sums still read DY).  Same values, same order: results are bitwise those of the copy.
 * Called after the sources are set; the workspace keeps its size (it is decided before the strides are). */
static int ct_src_dense(const ct_src *S, int64_t T, int64_t B, int64_t C) {
    if (S->dt != CT_DT_F32 || ((uintptr_t)S->base & 3)) return 0;
    return (C <= 1 || S->s2 == 4) && (B <= 1 || S->s1 == 4 * C) && (T <= 1 || S->s0 == 4 * B * C);
}
static void ct_plan_direct(ct_plan *P) {
    /* (first, while DYp is still the workspace's panel region: the channel-major DY for the narrow gradInput) */
    P->ws.DYc = P->nr.narrow ? P->ws.DYp : P->nr.narrow_gi && P->ws.DYp ? P->ws.DYp + (P->ws.off_dyc - P->ws.off_dyp) : NULL;
    if (P->compute != CT_C_FP32 || P->nr.narrow) return;     /* (narrow: channel-major panels, always packed) */
    if (P->ws.DYp && P->tk.nq == 1 && P->RO > 0 && ct_src_dense(&P->dy, P->T_out, P->B, P->Cout)) {
        P->ws.DYp = (float *)(uintptr_t)P->dy.base;       /* read only */
        P->ws.dy_direct = 1;
        P->st.win = 0;                                    /* nothing to stream */
        P->ws.dy_ps = P->RO;
        if (P->sm.gw_pieces == 1) P->tk.n_post = 0;
    }
    if (P->ws.Xp && P->tk.nxp == 1 && P->RI > 0 && !P->sm.bmajor && ct_src_dense(&P->x, P->T_in, P->B, P->Cin)) {
        P->ws.Xp = (float *)(uintptr_t)P->x.base;         /* read only */
        P->ws.x_direct = 1;
        P->tk.n_pack = P->tk.n_pack - P->tk.n_pack_x;
        P->tk.n_pack_x = 0;
    }
}

/* The backward in the shared drivers' roles (_conv_roles.h), made from the plan where a task starts (the panels'
 * pointers and a streamed window's first row are the plan's, moved by the caller and the window drivers):
 * its operands' packing, and the gradInput pass: A = DY (packed), reduction over its Cout channels, Cin output
 * channels, tap k reading DY row r + (pad - k)*B, chains from +0. */
static inline ct_pk ct_plan_pk(const ct_plan *P) {
    ct_pk k = {.U = P->U, .B = P->B, .compute = P->compute, .hbits = P->hbits, .hrnd = P->hrnd};
    return k;
}
static inline ct_red ct_gi_red(const ct_plan *P) {
    ct_red R = {.U = P->U, .acc = P->sm.acc, .fwd = 0, .k0 = P->sm.k0, .K = P->K, .pad = P->pad, .B = P->B,
                .t_c = P->T_in, .t_a = P->T_out, .n_red = P->Cout, .n_out = P->Cin,
                .A = P->ws.DYp, .a_ps = P->ws.dy_ps, .a_r0 = P->ws.dy_r0, .Ac = P->ws.DYc, .a_ld = P->nr.nlo,
                .W = P->ws.Wp, .start = NULL};
    return R;
}

/* ------------------------------------------------------------------------------------------------ */

/* The rounding a packed operand of dtype dt needs: none when every dt value is already a compute-format value
 * (fp16 data with FP16 compute, bf16 with BF16).  Skipping it changes no result: rounding such a value gives
 * the value back, except that a signalling NaN comes back quiet, and an FMA quiets a NaN operand anyway and
 * returns the first NaN operand's payload, signalling or not. */
static inline int ct_round_for(int dt, int compute) {
    if ((compute == CT_C_FP16 && dt == CT_DT_F16) || (compute == CT_C_BF16 && dt == CT_DT_BF16)) return CT_C_FP32;
    return compute;
}


/* The tiles of the compute tasks, decoded in one place.  A row task (gradInput; the forward's output) of nj
 * column blocks: rows [R0, R1) of R x columns [J0, J1) of J (blocks of CT_MCI rows x CT_NCI columns). */
typedef struct { int64_t R0, R1, J0, J1; } ct_rows_tile;
static inline ct_rows_tile ct_rows_task(int64_t task, int64_t nj, int64_t R, int64_t J) {
    ct_rows_tile t;
    int64_t rb = task / nj, jb = task % nj;
    t.R0 = rb * CT_MCI; t.R1 = ct_min(R, t.R0 + CT_MCI);
    t.J0 = jb * CT_NCI; t.J1 = ct_min(J, t.J0 + CT_NCI);
    return t;
}
/* a gradWeight task: taps [k0, k0 + G) x ci [I0, I1) x co [C0, C1) */
typedef struct { int64_t k0, G, I0, I1, C0, C1; } ct_gw_range;
static inline ct_gw_range ct_gw_task_range(const ct_plan *P, int64_t task) {
    ct_gw_range g;
    int64_t per_k = P->tk.n_gw_ib * P->tk.n_gw_ob;
    int64_t kg = task / per_k, rem = task % per_k;
    int64_t ib = rem / P->tk.n_gw_ob, ob = rem % P->tk.n_gw_ob;
    g.k0 = kg * P->tk.gw_kg; g.G = ct_min(P->tk.gw_kg, P->K - g.k0);
    g.I0 = ib * P->tk.gw_mc; g.I1 = ct_min(P->Cin, g.I0 + P->tk.gw_mc);
    g.C0 = ob * P->tk.gw_nc; g.C1 = ct_min(P->Cout, g.C0 + P->tk.gw_nc);
    return g;
}

/* sequential gradInput rows per micro-tile for a panel of n columns */
static inline int64_t ct_gi_mr(const ct_ukr *U, int64_t n) { return n <= 16 ? U->gi_mr_narrow : U->gi_mr_wide; }

#endif /* PYCONVTBC_CONV_PLAN_H */
