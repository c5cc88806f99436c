/* _conv_gemm.h: the compute side of _conv_tbc.pyx (pack/round, micro-kernels, tasks, output casts).
 *
 * Included by _conv_tbc.pyx; scalar codecs pct_* from _fpround.h, dtype / compute / rounding codes from _codes.h:
 * every scalar path below calls them, and every vector path is tested bit for bit against them
 * (tests/test_kernels.py::test_vector_codecs_match_scalar).
 *
 * Pipeline (docs/performance.md has the why):
 *   pack   DY -> DYp  [co-panel q of 32][row r = t*B+b][wq]   rounded to C; gb partial sums fused (fixed chunks)
 *          X  -> Xp   [ci-panel p of 8][row r][wi]            rounded to C
 *          W  -> Wp   [k][ci-panel of 32][co][wj]             rounded to C
 *          (fp32 DY / X that already are one dense panel and need no rounding are read in place: ct_plan_direct)
 *   compute gw tasks (k x ci block x co block), then gi tasks (row block x ci block), any thread:
 *          every output element is owned by one task and reduced by one sequential fp32 FMA chain in a fixed
 *          order (gi: k ascending, co ascending; gw: rows ascending), so results do not depend on threads,
 *          blocking or instruction set.  A time shift is a pointer offset in the panels.
 *   cast   epilogue of each task: fp32 tile -> output dtype (gi first rounded to C for FP16/BF16).
 * All index arithmetic is int64_t.
 */
#ifndef PYCONVTBC_CONV_GEMM_H
#define PYCONVTBC_CONV_GEMM_H

#include <stdint.h>
#include <string.h>
#include <math.h>

#include "_codes.h"
#include "_fpround.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(PYCONVTBC_NO_SIMD)
#define CT_X86 1
#include <immintrin.h>
#else
#define CT_X86 0
#endif

enum { CT_ISA_PORTABLE = 0, CT_ISA_AVX2 = 1, CT_ISA_AVX512 = 2 };
static int ct_gw_pairs_on = 1;
/* The narrow-channel cube kernels (_conv_narrow.h) on or off (a profiling hook; plan after setting it): the same
 * bits either way */
static int ct_narrow_on = 1;   /* AVX-512 co-pair gw kernel for narrow channels (a profiling hook turns it off) */
/* Rows per tile of the AVX2 cube gradInput / forward kernels (_conv_cube.h): 4 or 6; 0 (the default) picks by
 * CPU: 4 on AMD (measured on Zen 1: 6-row tiles, 12 block sums with all 12 chains in L1, ran at 75-78% of the
 * FMA peak; 4-row tiles, 8 block sums with 3-4 of their 8 chains kept in registers by the compiler, at 83%), 6
 * elsewhere (Intel's AVX2 cores need 8 or more independent FMA chains in flight: on Sapphire Rapids, the AVX2
 * path's gradInput ran 1-2% faster with 6 rows than with 4).  A test hook sets it; no result depends on it. */
static int ct_gic256_rows = 0;
static int ct_cpu_amd = 0;          /* set by ct_isa_supported (at import, before any kernel runs) */
static inline int ct_gic256_m(void) { return ct_gic256_rows ? ct_gic256_rows : (ct_cpu_amd ? 4 : 6); }
/* The AVX-512 cube kernels' broadcasts (_conv_cube.h, ct_fma_bc512): 0 (the default) picks by CPU, the broadcast
 * as each FMA's memory operand on AMD, one vbroadcastss shared by the FMAs of a row elsewhere; 1 / -1 force
 * the first / the second (a test hook).  No result depends on it. */
static int ct_bcast_mode = 0;
static inline int ct_bcast_fma(void) { return ct_bcast_mode ? ct_bcast_mode > 0 : ct_cpu_amd; }

#define CT_PO 32          /* lanes of a DYp panel (co) and of a Wp panel (ci) */
#define CT_PX 8           /* lanes of an Xp panel (ci) */
#define CT_NW 8           /* narrow channels: Cin and Cout up to this take _conv_narrow.h's kernels, */
#define CT_NB 16          /* with CT_NB items per gw task (the lanes of one AVX-512 vector) */
#define CT_NR 512         /* and CT_NR rows per gi task */
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
#define CT_PR 2048        /* pack: rows per task */
#define CT_GBR 256        /* gb: rows per partial sum (fixed: part of gb's summation order) */
#define CT_XG 16          /* pack: Xp panels per task */
#define CT_ALIGN 64
#define CT_TREE_CHUNK 128  /* gw elements per pairwise-tree task (_conv_cube.h) */
/* Streamed DY (_conv_stream.h): a packed DY larger than this many bytes is packed one window at a time.
 * ct_win_force (a test hook): 0 automatic, > 0 stream with windows of about that many rows whatever the size,
 * < 0 never stream.  Neither changes a result: only where DY's packed rows are kept. */
#define CT_WIN_BYTES ((int64_t)64 << 20)
static int64_t ct_win_force = 0;

static inline int64_t ct_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t ct_max(int64_t a, int64_t b) { return a > b ? a : b; }
static inline int64_t ct_cdiv(int64_t a, int64_t b) { return b > 0 ? a / b + (a % b != 0) : 0; }  /* no a+b-1 overflow */
static inline int64_t ct_up(int64_t a, int64_t b) { return ct_cdiv(a, b) * b; }
/* narrow gradWeight (_conv_narrow.h): the t's of one chunk (whole blocks of k0, about 32), and the x rows the
 * chunk's K taps read (its t's plus K - 1) */
static inline int64_t ct_gwn_tc(int64_t k0) { return k0 * ct_max(1, 32 / k0); }
static inline int64_t ct_gwn_rows(int64_t k0, int64_t K) { return ct_gwn_tc(k0) + K - 1; }

/* Weight panels of the cube forms (gradInput and the forward) hold their rows in the order the chains take the
 * blocks: block (g, k) = the reduction channels [lo, hi) = [g*k0, min(C, g*k0 + k0)) of tap k starts at row
 * ct_wblk(lo, hi, K, k) of the panel (the groups before g are whole: lo*K rows), its channel c at row
 * ct_wblk + c - lo.  A pass of blocks is then one run of memory; in tap-major panels the taps of one group lie
 * Cin*Cout floats apart, on the same L1 sets, and a pass over many taps evicted its own weights. */
static inline int64_t ct_wblk(int64_t lo, int64_t hi, int64_t K, int64_t k) { return lo * K + k * (hi - lo); }

static inline int ct_dt_size(int dt) {
    switch (dt) { case CT_DT_F32: return 4; case CT_DT_F16: case CT_DT_BF16: return 2;
                  case CT_DT_HIF8: case CT_DT_E4M3: return 1; default: return 0; }
}

typedef struct {
    const char *base;           /* element [0,0,0] */
    int64_t s0, s1, s2;         /* byte strides (any sign, may be 0) */
    int dt;
} ct_src;

typedef struct {
    /* problem */
    int64_t T_in, B, Cin, Cout, K, pad, T_out, RI, RO;
    int compute, hbits, hrnd, hif8_rnd, saturate;
    ct_src dy, x, w;
    char *gi, *gw, *gb;
    int gi_dt, gw_dt, gb_dt;
    int isa;
    /* workspace layout (float offsets from the aligned base) */
    int64_t off_dyp, off_xp, off_wp, off_gbp, off_cbuf, cbuf_stride, n_cbuf, total_floats;
    float *DYp, *Xp, *Wp, *gbp, *cbuf;
    /* tasks */
    int64_t nq, nxp, nwp;                 /* panels: DY co-panels, X ci-panels(8), W ci-panels(32) */
    int64_t n_dy_chunks, n_x_chunks, n_xg, n_gb_parts;
    int64_t n_pack_dy, n_pack_x, n_pack_w, n_pack;
    int64_t n_gi_rb, n_gi_jb, n_gi, n_gw_ib, n_gw_ob, n_gw, n_comp;
    int64_t gi_ld, gw_ld;                 /* leading dims of the task tiles in cbuf */
    int64_t gw_kg;                        /* k per gw task */
    int64_t gw_nkr;                       /* k per register pass of the gw micro-kernel (narrow channels) */
    int64_t gw_mc, gw_nc;                 /* ci and co per gw task */
    int64_t nthreads_max;                 /* threads the workspace was laid out for (<= compute tasks) */
    int dy_direct, x_direct;              /* DYp / Xp point at the caller's operand itself (ct_plan_direct) */
    /* accumulation model (_conv_cube.h): form, block size k0, order layout (0 ascend910b/910, 1 ascend950) */
    int acc, layout;
    int64_t k0;
    const int64_t *perm;                  /* layout 0: the order the B per-item chains are added in (NULL: b order) */
    int64_t gw_pieces, gw_seg, gi_seg;    /* layout 1: gw pieces P, gw / gi segment lengths in blocks (0: none) */
    int64_t n_gw1;                        /* gw tasks per piece */
    int64_t gi_tile;                      /* floats of one gi tile in cbuf (two with gi segments) */
    int64_t off_pcb, n_post;              /* piece sums (P x K*Cin*Cout floats); pairwise-tree tasks */
    float *pcb;
    int bmajor;                           /* Xp rows in b-major order: row b*T_in + t (layout 0 cube forms, B > 1) */
    int64_t gw_ctile_off;                 /* floats from a thread's cbuf to its gw chain tile (cube forms) */
    /* DYp's geometry: rows per panel (panel q starts at DYp + q*dy_ps*CT_PO) and the DY row at its row 0 (t-major
     * rows; RO and 0 unless DY is streamed) */
    int64_t dy_ps, dy_r0;
    /* Streamed DY (ct_plan_init decides; _conv_stream.h runs it): DY is packed one window of rows at a time
     * instead of whole, in two passes.  win_rows: the window's capacity (rows); pass 1 (gi): w1_rb gi row blocks
     * per window, n_w1 windows; pass 2 (gw): n_w2 windows of w2_rows chain rows (layout-0 cube forms: w2_items
     * whole items per window, or windows of w2_rows t's within an item).  gwa: the fp32 gw accumulator (gw
     * itself when it is fp32, else pieces x gw floats at pcb); gwc: the cube forms' chain values (pieces x gw). */
    int win;
    int64_t win_rows, w1_rb, n_w1, w2_rows, w2_items, n_w2, off_gwc;
    float *gwc;
    int64_t w_r0, w_r1, w_b0, w_b1, w_t0, w_t1;   /* pass 2: the current window (set by the driver) */
    /* bmajor: floats from a thread's cbuf to its copy of one item's DY rows (a row chunk of one co panel), which
     * gradWeight's per-item chains read instead of the t-major rows B rows apart */
    int64_t gw_ybuf_off;
    /* narrow channels (_conv_narrow.h): DYp channel-major, no Xp, the per-item gw chains at pcb */
    int narrow;
    int64_t nlo, nli;                     /* narrow: the channel strides of DYp and of a gw task's x rows */
    /* narrow_gi: ascend950 (layout 1) "cube" with narrow channels: gradInput's order is ascend910b's, so its
     * narrow kernels run it, on a channel-major copy of DY at off_dyc (stride nlo) beside the row-major panels
     * that gradWeight's order reads.  DYc: the channel-major DY the narrow gradInput kernels read (DYp on the
     * narrow path, the copy with narrow_gi, the forward's x). */
    int narrow_gi;
    int64_t off_dyc;
    const float *DYc;
    /* the narrow gradInput kernels run the forward too (_conv_fwd.h): gin_fwd = 1 reads DYp's row t + k - pad
     * for tap k (the forward's x; rows t < T_out whose row is in [0, T_in)) instead of t + pad - k; the chains
     * start at gin_start[c] (the forward's bias; NULL: +0) */
    int gin_fwd;
    const float *gin_start;
    /* interruption: poll(poll_ctx) != 0 means stop (the caller was interrupted); tasks then return early and
     * the outputs are left partly written.  NULL: never stop. */
    int (*poll)(void *);
    void *poll_ctx;
} ct_plan;

static inline int ct_stop(const ct_plan *P) { return P->poll != NULL && P->poll(P->poll_ctx); }

/* ------------------------------------------------------------------------------------------------ */
/* plan: sizes, task counts, workspace layout.  Returns 0, or -1 when a size overflows int64.        */
/* ------------------------------------------------------------------------------------------------ */
static int64_t ct_mul_ok(int64_t a, int64_t b, int *ok) {
    if (a < 0 || b < 0) { *ok = 0; return 0; }
    if (a != 0 && b > INT64_MAX / 4 / a) { *ok = 0; return 0; }
    return a * b;
}

/* gi_buf / gw_buf: whether gi / gw need fp32 task tiles (else they accumulate in the fp32 output itself) */
/* acc, k0, layout: the accumulation model (_conv_cube.h; acc 0 = sequential, k0 and layout then unused) */
static int ct_plan_init(ct_plan *P, int64_t T_in, int64_t B, int64_t Cin, int64_t Cout, int64_t K,
                        int64_t pad, int64_t nthreads, int gi_buf, int gw_buf, int acc, int64_t k0, int layout,
                        int isa) {
    int ok = 1;
    memset(P, 0, sizeof(*P));
    if (T_in < 0 || B < 0 || Cin < 0 || Cout < 0 || K < 0 || pad < 0 || nthreads < 1) return -1;
    if (acc < CT_ACC_SEQ || acc > CT_ACC_RZ || (acc != CT_ACC_SEQ && (k0 < 1 || k0 > 64 || layout < 0 || layout > 1))) return -1;
    P->acc = acc; P->k0 = k0 > 0 ? k0 : 1; P->layout = layout;
    /* the per-item gradWeight chains of layout 0 read the rows of one b: keep X's contiguous, and copy DY's (the
     * t-major rows of one b are B rows apart: power-of-two strides then alias in L1) */
    P->bmajor = acc != CT_ACC_SEQ && layout == 0 && B > 1;
    P->T_in = T_in; P->B = B; P->Cin = Cin; P->Cout = Cout; P->K = K; P->pad = pad;
    P->T_out = T_in + 2 * pad - K + 1;
    if (P->T_out < 0) return -1;
    P->RI = ct_mul_ok(T_in, B, &ok);
    P->RO = ct_mul_ok(P->T_out, B, &ok);
    int64_t nd = ct_mul_ok(P->RO, Cout, &ok);
    int64_t nx = ct_mul_ok(P->RI, Cin, &ok);
    int64_t nw = ct_mul_ok(ct_mul_ok(K, Cin, &ok), Cout, &ok);
    if (!ok) return -1;
    P->nq = ct_cdiv(Cout, CT_PO);
    P->nxp = ct_cdiv(Cin, CT_PX);
    P->nwp = ct_cdiv(Cin, CT_PO);
    P->n_dy_chunks = Cout > 0 ? ct_cdiv(P->RO, CT_PR) : 0;
    P->n_x_chunks = ct_cdiv(P->RI, CT_PR);
    P->n_xg = ct_cdiv(P->nxp, CT_XG);
    /* packs are needed only where the products are: with no product, gi/gw are zeros */
    int64_t prod = (P->RI > 0 && Cin > 0 && Cout > 0 && K > 0 && P->RO > 0);
    P->n_pack_dy = P->n_dy_chunks * P->nq;          /* always: gb needs the sums */
    P->n_pack_x = prod ? P->n_x_chunks * P->n_xg : 0;
    P->n_pack_w = prod ? K * P->nwp : 0;
    P->n_pack = P->n_pack_dy + P->n_pack_x + P->n_pack_w;
    /* compute tasks */
    P->n_gi_rb = Cin > 0 ? ct_cdiv(P->RI, CT_MCI) : 0;
    P->n_gi_jb = ct_cdiv(Cin, CT_NCI);
    P->n_gi = P->n_gi_rb * P->n_gi_jb;
    /* k per register pass: narrow channels keep up to 3 k x 8 ci x 16 co accumulators in registers */
    P->gw_nkr = (Cout <= 16 && K > 0) ? ct_max(1, ct_min(K, ct_min(3, 24 / ct_max(1, ct_min(CT_PX, Cin))))) : 1;
    /* gw tasks: k groups x ci blocks x co blocks.  k per task: the DY rows of a row block are reused by every
     * k of the task; its fp32 tiles (k x ci x co) should stay within ~512 KiB of L2; groups are balanced
     * (K = 5 -> 3 + 2, not 4 + 1).  Then, while there are fewer than min(4, threads) tasks (2 threads could
     * not share gw with gi), split: ci blocks, then co blocks, then k groups down to the register pass (ci
     * and co halves are even, where K = 3 split into 3 tasks that 2 threads ran in 2 rounds; and a ci block
     * reads only its own X rows).  Not more: every task of a split reads all its DY rows again (the cube forms
     * copy them), so one thread keeps one task.  Measured on a Xeon, cube (512,32,32,32,3,1): 2.19 -> 1.65 ms
     * on 1 thread; on 2 threads 1.14 -> 1.03 ms with 3 tasks instead of 6, -> 0.93 ms with 2 ci halves.
     * None of it changes a gw sum: each element is one chain over the rows. */
    P->gw_mc = ct_min(CT_MCW, ct_up(ct_max(Cin, 1), CT_PX));
    P->gw_nc = ct_min(CT_NCW, ct_up(ct_max(Cout, 1), CT_PO));
    if (K > 0) {
        int64_t tile = ct_max(1, ct_min(P->gw_mc, Cin) * ct_min(P->gw_nc, Cout) * 4);
        int64_t gmax = ct_max(P->gw_nkr, ct_min(K, (512 * 1024) / tile));
        P->gw_kg = ct_cdiv(K, ct_cdiv(K, gmax));
        for (;;) {
            int64_t nt = ct_cdiv(K, P->gw_kg) * ct_cdiv(Cin, P->gw_mc) * ct_cdiv(Cout, P->gw_nc);
            if (nt >= ct_min(4, ct_max(1, nthreads))) break;
            if (P->gw_mc > CT_PX && P->gw_mc < 2 * Cin) P->gw_mc = ct_up(P->gw_mc / 2, CT_PX);
            else if (P->gw_nc > CT_PO && P->gw_nc < 2 * Cout) P->gw_nc = ct_up(P->gw_nc / 2, CT_PO);
            else if (P->gw_kg > P->gw_nkr) P->gw_kg = ct_max(P->gw_nkr, P->gw_kg / 2);
            else break;
        }
    } else {
        P->gw_kg = 1;
    }
    P->n_gw_ib = ct_cdiv(Cin, P->gw_mc);
    P->n_gw_ob = ct_cdiv(Cout, P->gw_nc);
    P->n_gw1 = P->n_gw = ct_cdiv(K, P->gw_kg) * P->n_gw_ib * P->n_gw_ob;
    /* ascend950 (layout 1): pieces when the output has fewer than 32 blocks of 128 co x 256 (ci, k): P = 32 // nb;
     * gw segments of 65536 positions, gi segments of 32768 reduction elements when K*Cout >= 32768 */
    if (acc != CT_ACC_SEQ && layout == 1) {
        int64_t nb = ct_cdiv(Cout, 128) * ct_cdiv(ct_mul_ok(Cin, K, &ok), 256);
        P->gw_pieces = (prod && nb > 0 && nb < 32) ? 32 / nb : 1;
        P->gw_seg = ct_max(1, 65536 / P->k0);
        if (ct_mul_ok(K, Cout, &ok) >= 32768) P->gi_seg = ct_max(1, 32768 / P->k0);
    } else {
        P->gw_pieces = 1;
    }
    if (P->gw_pieces > 1) {
        P->n_gw = P->n_gw1 * P->gw_pieces;
        P->n_post = ct_cdiv(ct_mul_ok(ct_mul_ok(K, Cin, &ok), Cout, &ok), CT_TREE_CHUNK);
    }
    P->n_comp = P->n_gi + P->n_gw;
    P->gi_ld = ct_min(CT_NCI, Cin);
    P->gw_ld = ct_min(P->gw_nc, Cout);
    P->gi_tile = ct_up(ct_min(CT_MCI, P->RI) * P->gi_ld, CT_ALIGN / 4);
    /* DY streamed in windows (_conv_stream.h) when its packed copy would exceed CT_WIN_BYTES.  Pass 1 (gi)
     * windows hold whole gi row blocks plus the K-1 time steps around them that their taps read; pass 2 (gw)
     * windows are whole blocks of k0 chain rows (layout-0 cube forms: whole items, or k0-aligned t ranges of one
     * item), so no block and no order changes. */
    P->dy_ps = P->RO;
    if (prod && ct_win_force >= 0) {
        int64_t target = ct_win_force > 0 ? ct_win_force : ct_max(1, CT_WIN_BYTES / 4 / Cout);
        int64_t halo = ct_mul_ok(K - 1, B, &ok);
        int64_t w1_rb = ct_max(1, (target - halo) / CT_MCI);
        int64_t rows1 = ct_min(P->RO, ct_min(w1_rb, P->n_gi_rb) * CT_MCI + halo);
        int64_t ka = acc == CT_ACC_SEQ ? 1 : P->k0;
        int64_t w2 = ct_max(ka, target / ka * ka), rows2, n_w2, items = 0;
        if (acc != CT_ACC_SEQ && layout == 0) {
            if (P->T_out <= w2) {
                items = ct_min(B, ct_max(1, w2 / P->T_out));
                rows2 = items * P->T_out;
                n_w2 = ct_cdiv(B, items);
            } else {
                rows2 = w2;
                n_w2 = ct_mul_ok(B, ct_cdiv(P->T_out, w2), &ok);
            }
        } else {
            rows2 = ct_min(w2, P->RO);
            n_w2 = ct_cdiv(P->RO, w2);
        }
        int64_t wr = ct_max(rows1, rows2);
        if (ok && wr < P->RO) {
            P->win = 1;
            P->win_rows = P->dy_ps = wr;
            P->w1_rb = w1_rb;
            P->n_w1 = ct_cdiv(P->n_gi_rb, w1_rb);
            P->w2_rows = w2;
            P->w2_items = items;
            P->n_w2 = n_w2;
            nd = ct_mul_ok(wr, Cout, &ok);
            if (gw_buf && P->gw_pieces == 1)    /* gw's fp32 sums (at pcb) are cast by the tree tasks */
                P->n_post = ct_cdiv(ct_mul_ok(ct_mul_ok(K, Cin, &ok), Cout, &ok), CT_TREE_CHUNK);
        }
    }
    /* narrow channels, ascend910b / ascend910 "cube" (_conv_narrow.h): lanes along the items (gw) and the rows
     * (gi) instead of the few channels.  Its per-item chains (K*Cin*Cout floats per item, B rounded up to whole
     * item blocks) take pcb's place, when they are no larger than the operands. */
    int64_t nch = 0;
    if (acc == CT_ACC_CUBE && layout == 0 && prod && !P->win && ct_narrow_on && Cin <= CT_NW && Cout <= CT_NW &&
        B >= 8 && !P->gi_seg) {
        int ok2 = 1;
        nch = ct_mul_ok(nw, ct_up(B, CT_NB), &ok2);
        if (ok2 && nch <= nd + nx) {
            P->narrow = 1;
            P->bmajor = 0;
            /* gw tasks of several item blocks each (ct_gwn_task), on half the threads, the many short gi tasks on
             * the rest: two gw tasks at once each took about twice their time alone (2 cores of a Sapphire Rapids
             * VM), and one gw task beside the gi tasks did not (docs/performance.md, narrow channels) */
            P->n_gw1 = P->n_gw = ct_min(ct_cdiv(B, CT_NB), ct_max(1, nthreads / 2));
            P->nlo = ct_up(P->RO, 16) + 16;
            /* gradWeight packs the x rows of its chunk itself (ct_gwn_pack_x): no X panel */
            P->nli = ct_gwn_rows(P->k0, K) * CT_NB + 16;
            P->n_pack = P->n_pack - P->n_pack_x;
            P->n_pack_x = 0;
            nd = Cout * P->nlo;
            nx = 0;
            P->n_gi_rb = P->n_gi = ct_cdiv(P->RI, CT_NR);
            P->n_gi_jb = 1;
            P->n_comp = P->n_gi + P->n_gw;
            P->n_post = ct_cdiv(nw, CT_TREE_CHUNK);
        }
    }
    /* (see narrow_gi; the copy's room is kept on every instruction set, so that a workspace sized under one
     * fits a run under another: the AVX2 path keeps its general kernels above 4 gradInput channels, whose 8
     * lanes along Cin are then full enough: the narrow ones took 5-12% longer at Cin = 8) */
    int64_t ndc = 0;
    if (!P->narrow && acc == CT_ACC_CUBE && layout == 1 && prod && !P->win && ct_narrow_on && Cin <= CT_NW &&
        Cout <= CT_NW && !P->gi_seg) {
        P->nlo = ct_up(P->RO, 16) + 16;
        ndc = ct_mul_ok(Cout, P->nlo, &ok);
        if (!(isa == CT_ISA_AVX2 && Cin > 4)) {
            P->narrow_gi = 1;
            P->n_gi_rb = P->n_gi = ct_cdiv(P->RI, CT_NR);
            P->n_gi_jb = 1;
            P->n_comp = P->n_gi + P->n_gw;
        }
    }
    /* gw tile (outputs other than fp32), then, for the cube forms, the chain tile [gw_kg][gw_mc][gw_ld] */
    int64_t gwt = gw_buf ? ct_up(P->gw_kg * ct_min(P->gw_mc, Cin) * P->gw_ld, CT_ALIGN / 4) : 0;
    P->gw_ctile_off = gwt;
    if (acc != CT_ACC_SEQ && prod) gwt += P->gw_kg * P->gw_mc * P->gw_ld;
    P->gw_ybuf_off = gwt;
    if (P->bmajor && prod) gwt += ct_max(1, CT_KCW / P->k0) * P->k0 * CT_PO;    /* one chunk of one co panel */
    int64_t cb = ct_max(gi_buf || P->gi_seg ? (P->gi_seg ? 2 : 1) * P->gi_tile : 0, gwt);
    if (P->narrow) cb = ct_max(cb, ct_max(2 * CT_NR, P->nli) * Cin);
    if (P->narrow_gi) cb = ct_max(cb, 2 * CT_NR * Cin);
    P->cbuf_stride = ct_up(cb, CT_ALIGN / 4);
    P->n_cbuf = P->n_comp > 0 ? ct_min(nthreads, P->n_comp) : 0;
    P->nthreads_max = P->n_comp > 0 ? ct_min(nthreads, P->n_comp) : 1;
    if (cb == 0) P->n_cbuf = 0;
    /* layout */
    int64_t o = 0;
    P->off_dyp = o; o += ct_up(prod ? nd : 0, CT_ALIGN / 4);
    P->off_dyc = o; o += ct_up(ndc, CT_ALIGN / 4);
    P->off_xp = o; o += ct_up(prod ? nx : 0, CT_ALIGN / 4);
    P->off_wp = o; o += ct_up(prod ? nw : 0, CT_ALIGN / 4);
    P->n_gb_parts = Cout > 0 ? ct_cdiv(P->RO, CT_GBR) : 0;
    P->off_gbp = o; o += ct_up(ct_mul_ok(P->n_gb_parts, Cout, &ok), CT_ALIGN / 4);
    P->off_cbuf = o; o += ct_mul_ok(P->cbuf_stride, P->n_cbuf, &ok);
    P->off_pcb = o;
    if (P->narrow) o += nch;
    else if ((P->gw_pieces > 1 && prod) || (P->win && gw_buf)) o += ct_mul_ok(P->gw_pieces, nw, &ok);
    P->off_gwc = o; if (P->win && acc != CT_ACC_SEQ) o += ct_mul_ok(P->gw_pieces, nw, &ok);
    if (!ok || o > INT64_MAX / 8) return -1;
    P->total_floats = o;
    return 0;
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
    P->DYc = P->narrow ? P->DYp : P->narrow_gi && P->DYp ? P->DYp + (P->off_dyc - P->off_dyp) : NULL;
    if (P->compute != CT_C_FP32 || P->narrow) return;     /* (narrow: channel-major panels, always packed) */
    if (P->DYp && P->nq == 1 && P->RO > 0 && ct_src_dense(&P->dy, P->T_out, P->B, P->Cout)) {
        P->DYp = (float *)(uintptr_t)P->dy.base;       /* read only */
        P->dy_direct = 1;
        P->win = 0;                                    /* nothing to stream */
        P->dy_ps = P->RO;
        if (P->gw_pieces == 1) P->n_post = 0;
    }
    if (P->Xp && P->nxp == 1 && P->RI > 0 && !P->bmajor && ct_src_dense(&P->x, P->T_in, P->B, P->Cin)) {
        P->Xp = (float *)(uintptr_t)P->x.base;         /* read only */
        P->x_direct = 1;
        P->n_pack = P->n_pack - P->n_pack_x;
        P->n_pack_x = 0;
    }
}

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

/* The rounding a packed operand of dtype dt needs: none when every dt value is already a compute-format value
 * (fp16 data with FP16 compute, bf16 with BF16).  Skipping it changes no result: rounding such a value gives
 * the value back, except that a signalling NaN comes back quiet, and an FMA quiets a NaN operand anyway and
 * returns the first NaN operand's payload, signalling or not. */
static inline int ct_round_for(int dt, int compute) {
    if ((compute == CT_C_FP16 && dt == CT_DT_F16) || (compute == CT_C_BF16 && dt == CT_DT_BF16)) return CT_C_FP32;
    return compute;
}

/* ------------------------------------------------------------------------------------------------ */
/* portable row codecs                                                                              */
/* ------------------------------------------------------------------------------------------------ */
static void ct_decode_row_port(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_F32 && stride == 4) { memcpy(out, src, (size_t)n * 4); return; }
    for (int64_t i = 0; i < n; i++) out[i] = ct_load1(src + i * stride, dt);
}

static void ct_round_row_port(float *v, int64_t n, int compute, int hbits, int hrnd) {
    if (compute == CT_C_FP32) return;
    for (int64_t i = 0; i < n; i++) v[i] = ct_round1(v[i], compute, hbits, hrnd);
}

/* out[i] = cast(acc[i]) to dt; pre (CT_C_FP16/BF16) rounds the accumulator to C first */
static void ct_store_row_port(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd, int sat) {
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
static void ct_gi_ukr_port(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t c0,
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
static void ct_gw_ukr_port(int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, const float *B,
                           int64_t ldb, float *C, int64_t ldc) {
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            float acc = C[i * ldc + j];
            for (int64_t p = 0; p < kc; p++) acc = fmaf(A[p * lda + i], B[p * ldb + j], acc);
            C[i * ldc + j] = acc;
        }
    }
}

#if CT_X86
/* ------------------------------------------------------------------------------------------------ */
/* AVX-512 (F, BW, VL, DQ) + FMA + F16C                                                             */
/* ------------------------------------------------------------------------------------------------ */
#define CT_T512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2")))
#define CT_I512 static inline __attribute__((always_inline, target("avx512f,avx512bw,avx512vl,avx512dq,fma,f16c,avx2")))

CT_I512 __mmask16 ct_mask16(int64_t n) { return n >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << n) - 1u); }

/* vector RNE fp32 -> fp16 -> fp32 and bf16, HF32 (integer), identical to the pct_* scalar codecs */
CT_I512 __m512 ct_round_f16_512(__m512 v) {
    return _mm512_cvtph_ps(_mm512_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
CT_I512 __m512i ct_bf16_bits_512(__m512 v) {   /* 32-bit lanes holding the bf16 pattern in the low half */
    __m512i b = _mm512_castps_si512(v);
    __m512i u = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    __mmask16 nan = _mm512_cmpgt_epu32_mask(u, _mm512_set1_epi32(0x7F800000));
    __m512i lsb = _mm512_and_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(b, _mm512_add_epi32(lsb, _mm512_set1_epi32(0x7FFF))), 16);
    __m512i qn = _mm512_or_si512(_mm512_srli_epi32(b, 16), _mm512_set1_epi32(0x40));
    return _mm512_and_si512(_mm512_mask_mov_epi32(r, nan, qn), _mm512_set1_epi32(0xFFFF));
}
CT_I512 __m512 ct_round_bf16_512(__m512 v) {
    return _mm512_castsi512_ps(_mm512_slli_epi32(ct_bf16_bits_512(v), 16));
}
CT_I512 __m512 ct_round_hf32_512(__m512 v, int d, int hrnd) {   /* d = 23 - mantissa bits, 1..22 */
    __m512i b = _mm512_castps_si512(v);
    __m512i u = _mm512_and_si512(b, _mm512_set1_epi32(0x7FFFFFFF));
    __m512i s = _mm512_andnot_si512(_mm512_set1_epi32(0x7FFFFFFF), b);
    __mmask16 nan = _mm512_cmpgt_epu32_mask(u, _mm512_set1_epi32(0x7F800000));
    __m512i dv = _mm512_set1_epi32(d);
    __m512i add = _mm512_set1_epi32((int)(1u << (d - 1)));
    if (hrnd == CT_HF32_NEAREST_EVEN) {
        __m512i lsb = _mm512_and_si512(_mm512_srlv_epi32(u, dv), _mm512_set1_epi32(1));
        add = _mm512_add_epi32(_mm512_sub_epi32(add, _mm512_set1_epi32(1)), lsb);
    }
    __m512i r = _mm512_sllv_epi32(_mm512_srlv_epi32(_mm512_add_epi32(u, add), dv), dv);
    r = _mm512_or_si512(r, s);
    return _mm512_castsi512_ps(_mm512_mask_mov_epi32(r, nan, b));
}

static CT_T512 void ct_decode_row_512(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_F32 && stride == 4) { memcpy(out, src, (size_t)n * 4); return; }
    if (stride == 2 && (dt == CT_DT_F16 || dt == CT_DT_BF16)) {
        for (int64_t i = 0; i < n; i += 16) {
            __mmask16 k = ct_mask16(n - i);
            __m256i h = _mm256_maskz_loadu_epi16(k, src + 2 * i);
            __m512 f;
            __m512i h32 = _mm512_cvtepu16_epi32(h);
            if (dt == CT_DT_F16) {
                /* vcvtph2ps quiets signalling NaNs; the scalar codec keeps the pattern: patch NaN/Inf lanes */
                f = _mm512_cvtph_ps(h);
                __m512i e = _mm512_and_si512(h32, _mm512_set1_epi32(0x7C00));
                __mmask16 sp = _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(0x7C00));
                if (sp) {
                    __m512i bits = _mm512_or_si512(
                        _mm512_or_si512(_mm512_slli_epi32(_mm512_and_si512(h32, _mm512_set1_epi32(0x8000)), 16),
                                        _mm512_set1_epi32(0x7F800000)),
                        _mm512_slli_epi32(_mm512_and_si512(h32, _mm512_set1_epi32(0x3FF)), 13));
                    f = _mm512_mask_mov_ps(f, sp, _mm512_castsi512_ps(bits));
                }
            } else f = _mm512_castsi512_ps(_mm512_slli_epi32(h32, 16));
            _mm512_mask_storeu_ps(out + i, k, f);
        }
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = ct_load1(src + i * stride, dt);
}

static CT_T512 void ct_round_row_512(float *v, int64_t n, int compute, int hbits, int hrnd) {
    if (compute == CT_C_FP32) return;
    if (compute == CT_C_HF32 && (hbits < 1 || hbits > 22)) return;
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = ct_mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(k, v + i);
        if (compute == CT_C_HF32) x = ct_round_hf32_512(x, 23 - hbits, hrnd);
        else if (compute == CT_C_FP16) x = ct_round_f16_512(x);
        else x = ct_round_bf16_512(x);
        _mm512_mask_storeu_ps(v + i, k, x);
    }
}

static CT_T512 void ct_store_row_512(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd,
                                     int sat) {
    if (dt == CT_DT_HIF8 || dt == CT_DT_E4M3) { ct_store_row_port(acc, n, dst, dt, pre, hif8_rnd, sat); return; }
    for (int64_t i = 0; i < n; i += 16) {
        __mmask16 k = ct_mask16(n - i);
        __m512 x = _mm512_maskz_loadu_ps(k, acc + i);
        if (pre == CT_C_FP16) x = ct_round_f16_512(x);
        else if (pre == CT_C_BF16) x = ct_round_bf16_512(x);
        if (dt == CT_DT_F32) _mm512_mask_storeu_ps((float *)dst + i, k, x);
        else if (dt == CT_DT_F16)
            _mm256_mask_storeu_epi16((uint16_t *)dst + i, k,
                                     _mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        else
            _mm256_mask_storeu_epi16((uint16_t *)dst + i, k, _mm512_cvtepi32_epi16(ct_bf16_bits_512(x)));
    }
}

/* gi micro-kernel, M rows x (NV*16 >= n) columns, accumulators in registers.
 * C[i][j] += sum_{kk<nk} sum_{c=c0}^{c1-1} DY(row0 + kk*dk + i, c) * Bp[kk*bk + (c-c0)*n + j]
 * (nk consecutive k: the DY row moves by dk = -B and the weight panel by bk = Cin*Cout per k). */
CT_I512 void ct_gi_body_512(const int M, const int NV, const int WQ, int64_t n, const float *DYp, int64_t RO,
                            int64_t row0, int64_t dk, int64_t nk, int64_t c0, int64_t c1, int64_t Cout,
                            const float *Bp, int64_t bk, float *C, int64_t ldc) {
    /* WQ > 0: the caller guarantees Cout == WQ (one narrow panel), so row addresses are constants */
    __m512 acc[28][2];
    __mmask16 k0 = ct_mask16(n), k1 = ct_mask16(n - 16 > 0 ? n - 16 : 0);
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        acc[i][0] = _mm512_maskz_loadu_ps(k0, C + i * ldc);
        if (NV == 2) acc[i][1] = _mm512_maskz_loadu_ps(k1, C + i * ldc + 16);
    }
    /* channel c0's panel: where each tap's first segment starts (row 0), for the prefetch below */
    const int64_t w0 = ct_min(CT_PO, Cout - c0 / CT_PO * CT_PO);
    const float *D0 = DYp + c0 / CT_PO * RO * CT_PO + c0 % CT_PO;
    for (int64_t kk = 0; kk < nk; kk++) {
        const float *B = Bp + kk * bk;
        int64_t row = row0 + kk * dk;
        int64_t c = c0;
        while (c < c1) {
            int64_t q = c / CT_PO, qb = q * CT_PO;
            int64_t wq = ct_min(CT_PO, Cout - qb);
            int64_t cend = ct_min(c1, qb + wq);
            int64_t cnt = cend - c;
            const float *A = DYp + q * RO * CT_PO + row * wq + (c - qb);
            if (wq == CT_PO) {
                /* The DY rows of the next segment (the next panel, else the next tap, else the next tile's
                 * first) are M <= 32 consecutive rows of one panel, from L2 or L3: fetched into L1 one line per
                 * channel step.  Measured on a Xeon (AVX-512): gradInput 4-9% faster in calls. */
                const float *An;
                if (cend < c1) An = DYp + (q + 1) * RO * CT_PO + row * ct_min(CT_PO, Cout - qb - CT_PO);
                else if (kk + 1 < nk) An = D0 + (row + dk) * w0;
                else An = D0 + (row0 + M) * w0;
                for (int64_t l = 0; l < cnt; l++) {
                    _mm_prefetch((const char *)(An + l * 16), _MM_HINT_T0);
                    __m512 b0 = _mm512_maskz_loadu_ps(k0, B), b1 = _mm512_setzero_ps();
                    if (NV == 2) b1 = _mm512_maskz_loadu_ps(k1, B + 16);
                    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                        __m512 av = _mm512_set1_ps(A[i * CT_PO + l]);
                        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                        if (NV == 2) acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
                    }
                    B += n;
                }
            } else {
                const int64_t W = WQ > 0 ? WQ : wq;
                for (int64_t l = 0; l < cnt; l++) {
                    __m512 b0 = _mm512_maskz_loadu_ps(k0, B), b1 = _mm512_setzero_ps();
                    if (NV == 2) b1 = _mm512_maskz_loadu_ps(k1, B + 16);
                    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                        __m512 av = _mm512_set1_ps(A[i * W + l]);
                        acc[i][0] = _mm512_fmadd_ps(av, b0, acc[i][0]);
                        if (NV == 2) acc[i][1] = _mm512_fmadd_ps(av, b1, acc[i][1]);
                    }
                    B += n;
                }
            }
            c = cend;
        }
    }
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        _mm512_mask_storeu_ps(C + i * ldc, k0, acc[i][0]);
        if (NV == 2) _mm512_mask_storeu_ps(C + i * ldc + 16, k1, acc[i][1]);
    }
}

#define CT_GI512_ARGS n, DYp, RO, row0, dk, nk, c0, c1, Cout, Bp, bk, C, ldc
#define CT_GI512_CASE(MM) \
    case MM: { if (nv == 2) ct_gi_body_512(MM, 2, 0, CT_GI512_ARGS); \
               else ct_gi_body_512(MM, 1, 0, CT_GI512_ARGS); } break;
#define CT_GI512_CASE1(MM) \
    case MM: ct_gi_body_512(MM, 1, 0, CT_GI512_ARGS); break;

static CT_T512 void ct_gi_ukr_512(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t dk,
                                  int64_t nk, int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t bk,
                                  float *C, int64_t ldc) {
    int nv = n > 16 ? 2 : 1;
    /* full tiles over one narrow panel: constant row strides (no per-row address registers to spill) */
    if (Cout == 2 || Cout == 4 || Cout == 8 || Cout == 16) {
        if (nv == 1 && m == 28) {
            switch (Cout) {
                case 2: ct_gi_body_512(28, 1, 2, CT_GI512_ARGS); return;
                case 4: ct_gi_body_512(28, 1, 4, CT_GI512_ARGS); return;
                case 8: ct_gi_body_512(28, 1, 8, CT_GI512_ARGS); return;
                default: ct_gi_body_512(28, 1, 16, CT_GI512_ARGS); return;
            }
        }
        if (nv == 2 && m == 14) {
            switch (Cout) {
                case 2: ct_gi_body_512(14, 2, 2, CT_GI512_ARGS); return;
                case 4: ct_gi_body_512(14, 2, 4, CT_GI512_ARGS); return;
                case 8: ct_gi_body_512(14, 2, 8, CT_GI512_ARGS); return;
                default: ct_gi_body_512(14, 2, 16, CT_GI512_ARGS); return;
            }
        }
    }
    switch (m) {
        CT_GI512_CASE(1) CT_GI512_CASE(2) CT_GI512_CASE(3) CT_GI512_CASE(4) CT_GI512_CASE(5)
        CT_GI512_CASE(6) CT_GI512_CASE(7) CT_GI512_CASE(8) CT_GI512_CASE(9) CT_GI512_CASE(10)
        CT_GI512_CASE(11) CT_GI512_CASE(12) CT_GI512_CASE(13) CT_GI512_CASE(14)
        /* n <= 16: one vector per row, up to 28 rows (ct_gi_mr) */
        CT_GI512_CASE1(15) CT_GI512_CASE1(16) CT_GI512_CASE1(17) CT_GI512_CASE1(18) CT_GI512_CASE1(19)
        CT_GI512_CASE1(20) CT_GI512_CASE1(21) CT_GI512_CASE1(22) CT_GI512_CASE1(23) CT_GI512_CASE1(24)
        CT_GI512_CASE1(25) CT_GI512_CASE1(26) CT_GI512_CASE1(27) CT_GI512_CASE1(28)
        default: break;
    }
}

/* gw micro-kernel: NK k x M (<= 8) ci x (NV*16 >= n) co, reduction over kc rows.
 * C[kk*ck + i*ldc + j] += sum_{p<kc} A[kk*ak + p*lda + i] * B[p*ldb + j]   (NK consecutive k share the DY rows) */
CT_I512 void ct_gw_body_512(const int NK, const int M, const int NV, int64_t n, int64_t kc, const float *A,
                            int64_t lda, int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc,
                            int64_t ck) {
    __m512 acc[3][8][2];
    __mmask16 k0 = ct_mask16(n), k1 = ct_mask16(n - 16 > 0 ? n - 16 : 0);
    const float *Ak[3];
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
        Ak[kk] = A + kk * ak;
        _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
            acc[kk][i][0] = _mm512_maskz_loadu_ps(k0, C + kk * ck + i * ldc);
            if (NV == 2) acc[kk][i][1] = _mm512_maskz_loadu_ps(k1, C + kk * ck + i * ldc + 16);
        }
    }
    for (int64_t p = 0; p < kc; p++) {
        __m512 b0 = _mm512_maskz_loadu_ps(k0, B), b1 = _mm512_setzero_ps();
        if (NV == 2) b1 = _mm512_maskz_loadu_ps(k1, B + 16);
        _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
            _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                __m512 av = _mm512_set1_ps(Ak[kk][p * lda + i]);
                acc[kk][i][0] = _mm512_fmadd_ps(av, b0, acc[kk][i][0]);
                if (NV == 2) acc[kk][i][1] = _mm512_fmadd_ps(av, b1, acc[kk][i][1]);
            }
        }
        B += ldb;
    }
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
        _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
            _mm512_mask_storeu_ps(C + kk * ck + i * ldc, k0, acc[kk][i][0]);
            if (NV == 2) _mm512_mask_storeu_ps(C + kk * ck + i * ldc + 16, k1, acc[kk][i][1]);
        }
    }
}

#define CT_GW512_CASE(MM) \
    case MM: { if (nv == 2) ct_gw_body_512(1, MM, 2, n, kc, A, lda, ak, B, ldb, C, ldc, ck); \
               else if (nk == 3) ct_gw_body_512(3, MM, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); \
               else if (nk == 2) ct_gw_body_512(2, MM, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); \
               else ct_gw_body_512(1, MM, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); } break;

/* gw micro-kernel for a full 8-ci panel and at most 8 co (narrow channels): the plain kernel would fill only
 * n of each vector's 16 lanes, so here a vector holds 8 ci x a PAIR of co: lane h*8 + i is (ci i, co 2cq + h).
 * Per row: the X row (8 ci) is broadcast to both halves straight from memory, the DY row is loaded once and
 * spread into the NCQ co pairs by a permute shared by the NK k.  Each lane is still the one fp32 FMA chain of
 * its (k, ci, co) over the rows in ascending order: bitwise the plain kernel's result.
 * C[kk*ck + i*ldc + j] += sum_{p<kc} A[kk*ak + p*lda + i] * B[p*ldb + j]   (i < 8, j < n <= 2*NCQ) */
CT_I512 void ct_gw_pair_512(const int NK, const int NCQ, int64_t n, int64_t kc, const float *A, int64_t lda,
                            int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    __m512 acc[3][4];
    __m512i idx[4], off[4];
    __mmask16 keep[4];
    const __m512i half = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);   /* h of each lane */
    const __m512i ci = _mm512_set_epi32(7, 6, 5, 4, 3, 2, 1, 0, 7, 6, 5, 4, 3, 2, 1, 0);     /* i of each lane */
    const __mmask16 kn = ct_mask16(n);
    const float *Ak[3];
    _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++) {
        idx[cq] = _mm512_add_epi32(_mm512_set1_epi32(2 * cq), half);                 /* co of each lane */
        keep[cq] = _mm512_cmplt_epi32_mask(idx[cq], _mm512_set1_epi32((int)n));
        off[cq] = _mm512_add_epi32(_mm512_mullo_epi32(ci, _mm512_set1_epi32((int)ldc)), idx[cq]);
    }
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
        Ak[kk] = A + kk * ak;
        _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++)
            acc[kk][cq] = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), keep[cq], off[cq], C + kk * ck, 4);
    }
    for (int64_t p = 0; p < kc; p++) {
        __m512 b = _mm512_maskz_loadu_ps(kn, B), bv[4];
        _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++) bv[cq] = _mm512_permutexvar_ps(idx[cq], b);
        _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++) {
            __m512 a = _mm512_broadcast_f32x8(_mm256_loadu_ps(Ak[kk] + p * lda));
            _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++)
                acc[kk][cq] = _mm512_fmadd_ps(a, bv[cq], acc[kk][cq]);
        }
        B += ldb;
    }
    _Pragma("GCC unroll 4") for (int kk = 0; kk < NK; kk++)
        _Pragma("GCC unroll 4") for (int cq = 0; cq < NCQ; cq++)
            _mm512_mask_i32scatter_ps(C + kk * ck, keep[cq], off[cq], acc[kk][cq], 4);
}

#define CT_GWP512(NK) \
    switch (ncq) { case 1: ct_gw_pair_512(NK, 1, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; \
                   case 2: ct_gw_pair_512(NK, 2, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; \
                   case 3: ct_gw_pair_512(NK, 3, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; \
                   default: ct_gw_pair_512(NK, 4, n, kc, A, lda, ak, B, ldb, C, ldc, ck); break; }

/* m == 8, 1 <= n <= 8, nk in 1..3 */
static CT_T512 void ct_gw_pairs_512(int64_t nk, int64_t n, int64_t kc, const float *A, int64_t lda, int64_t ak,
                                    const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    int ncq = (int)((n + 1) / 2);
    if (nk == 3) { CT_GWP512(3) } else if (nk == 2) { CT_GWP512(2) } else { CT_GWP512(1) }
}

/* nk in 1..3, and nk == 1 whenever n > 16 */
static CT_T512 void ct_gw_ukr_512(int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda,
                                  int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
    int nv = n > 16 ? 2 : 1;
    switch (m) {
        CT_GW512_CASE(1) CT_GW512_CASE(2) CT_GW512_CASE(3) CT_GW512_CASE(4)
        CT_GW512_CASE(5) CT_GW512_CASE(6) CT_GW512_CASE(7) CT_GW512_CASE(8)
        default: break;
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* AVX2 + FMA + F16C                                                                                */
/* ------------------------------------------------------------------------------------------------ */
#define CT_T256 __attribute__((target("avx2,fma,f16c")))
#define CT_I256 static inline __attribute__((always_inline, target("avx2,fma,f16c")))

static const int32_t ct_mask_tab[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};
CT_I256 __m256i ct_mask8(int64_t n) {   /* first n (0..8) lanes */
    if (n >= 8) n = 8;
    if (n < 0) n = 0;
    return _mm256_loadu_si256((const __m256i *)(ct_mask_tab + 8 - n));
}
/* loads / stores of the first n (0..8) lanes; plain ones when all 8 are wanted: AMD's masked loads and stores
 * are slow (on a Zen 1 EPYC the sequential gradInput kernel ran 14 GFLOP/s with a masked load of its weight
 * rows, 30 with plain ones), and a masked store followed by a load of the same line stalls */
CT_I256 __m256 ct_ld8(const float *p, int64_t n, __m256i m) {
    return n >= 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, m);
}
CT_I256 void ct_st8(float *p, int64_t n, __m256i m, __m256 v) {
    if (n >= 8) _mm256_storeu_ps(p, v);
    else _mm256_maskstore_ps(p, m, v);
}

CT_I256 __m256 ct_round_f16_256(__m256 v) {
    return _mm256_cvtph_ps(_mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}
CT_I256 __m256i ct_bf16_bits_256(__m256 v) {
    __m256i b = _mm256_castps_si256(v);
    __m256i u = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
    /* u > 0x7F800000 as signed compare is fine: u is non-negative */
    __m256i nan = _mm256_cmpgt_epi32(u, _mm256_set1_epi32(0x7F800000));
    __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(1));
    __m256i r = _mm256_srli_epi32(_mm256_add_epi32(b, _mm256_add_epi32(lsb, _mm256_set1_epi32(0x7FFF))), 16);
    __m256i qn = _mm256_or_si256(_mm256_srli_epi32(b, 16), _mm256_set1_epi32(0x40));
    return _mm256_and_si256(_mm256_blendv_epi8(r, qn, nan), _mm256_set1_epi32(0xFFFF));
}
CT_I256 __m256 ct_round_bf16_256(__m256 v) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(ct_bf16_bits_256(v), 16));
}
CT_I256 __m256 ct_round_hf32_256(__m256 v, int d, int hrnd) {
    __m256i b = _mm256_castps_si256(v);
    __m256i u = _mm256_and_si256(b, _mm256_set1_epi32(0x7FFFFFFF));
    __m256i s = _mm256_andnot_si256(_mm256_set1_epi32(0x7FFFFFFF), b);
    __m256i nan = _mm256_cmpgt_epi32(u, _mm256_set1_epi32(0x7F800000));
    __m128i dv = _mm_cvtsi32_si128(d);
    __m256i add = _mm256_set1_epi32((int)(1u << (d - 1)));
    if (hrnd == CT_HF32_NEAREST_EVEN) {
        __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(u, dv), _mm256_set1_epi32(1));
        add = _mm256_add_epi32(_mm256_sub_epi32(add, _mm256_set1_epi32(1)), lsb);
    }
    __m256i r = _mm256_sll_epi32(_mm256_srl_epi32(_mm256_add_epi32(u, add), dv), dv);
    r = _mm256_or_si256(r, s);
    return _mm256_castsi256_ps(_mm256_blendv_epi8(r, b, nan));
}

static CT_T256 void ct_decode_row_256(const char *src, int64_t stride, int dt, int64_t n, float *out) {
    if (dt == CT_DT_F32 && stride == 4) { memcpy(out, src, (size_t)n * 4); return; }
    if (stride == 2 && (dt == CT_DT_F16 || dt == CT_DT_BF16)) {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m128i h = _mm_loadu_si128((const __m128i *)(src + 2 * i));
            __m256i h32 = _mm256_cvtepu16_epi32(h);
            __m256 f;
            if (dt == CT_DT_F16) {
                f = _mm256_cvtph_ps(h);   /* patch NaN/Inf lanes: keep signalling NaNs as the scalar codec does */
                __m256i sp = _mm256_cmpeq_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x7C00)),
                                                _mm256_set1_epi32(0x7C00));
                if (!_mm256_testz_si256(sp, sp)) {
                    __m256i bits = _mm256_or_si256(
                        _mm256_or_si256(_mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x8000)), 16),
                                        _mm256_set1_epi32(0x7F800000)),
                        _mm256_slli_epi32(_mm256_and_si256(h32, _mm256_set1_epi32(0x3FF)), 13));
                    f = _mm256_blendv_ps(f, _mm256_castsi256_ps(bits), _mm256_castsi256_ps(sp));
                }
            } else f = _mm256_castsi256_ps(_mm256_slli_epi32(h32, 16));
            _mm256_storeu_ps(out + i, f);
        }
        for (; i < n; i++) out[i] = ct_load1(src + 2 * i, dt);
        return;
    }
    for (int64_t i = 0; i < n; i++) out[i] = ct_load1(src + i * stride, dt);
}

static CT_T256 void ct_round_row_256(float *v, int64_t n, int compute, int hbits, int hrnd) {
    if (compute == CT_C_FP32) return;
    if (compute == CT_C_HF32 && (hbits < 1 || hbits > 22)) return;
    for (int64_t i = 0; i < n; i += 8) {
        __m256i k = ct_mask8(n - i);
        __m256 x = ct_ld8(v + i, n - i, k);
        if (compute == CT_C_HF32) x = ct_round_hf32_256(x, 23 - hbits, hrnd);
        else if (compute == CT_C_FP16) x = ct_round_f16_256(x);
        else x = ct_round_bf16_256(x);
        ct_st8(v + i, n - i, k, x);
    }
}

static CT_T256 void ct_store_row_256(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd,
                                     int sat) {
    if (dt == CT_DT_HIF8 || dt == CT_DT_E4M3) { ct_store_row_port(acc, n, dst, dt, pre, hif8_rnd, sat); return; }
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256 x = _mm256_loadu_ps(acc + i);
        if (pre == CT_C_FP16) x = ct_round_f16_256(x);
        else if (pre == CT_C_BF16) x = ct_round_bf16_256(x);
        if (dt == CT_DT_F32) _mm256_storeu_ps((float *)dst + i, x);
        else if (dt == CT_DT_F16)
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + i),
                             _mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
        else {
            __m256i b = ct_bf16_bits_256(x);
            __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(b), _mm256_extracti128_si256(b, 1));
            _mm_storeu_si128((__m128i *)((uint16_t *)dst + i), p);
        }
    }
    if (i < n) ct_store_row_port(acc + i, n - i, dst + (int64_t)ct_dt_size(dt) * i, dt, pre, hif8_rnd, sat);
}

/* gi: M (<= 6) rows x n (<= 16) columns */
CT_I256 void ct_gi_body_256(const int M, const int NV, int64_t n, const float *DYp, int64_t RO, int64_t row0,
                            int64_t c0, int64_t c1, int64_t Cout, const float *Bp, int64_t ldb, float *C,
                            int64_t ldc) {
    __m256 acc[6][2];
    __m256i k0 = ct_mask8(n), k1 = ct_mask8(n - 8);
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        acc[i][0] = ct_ld8(C + i * ldc, n, k0);
        if (NV == 2) acc[i][1] = ct_ld8(C + i * ldc + 8, n - 8, k1);
    }
    const float *B = Bp;
    int64_t c = c0;
    while (c < c1) {
        int64_t q = c / CT_PO, qb = q * CT_PO;
        int64_t wq = ct_min(CT_PO, Cout - qb);
        int64_t cend = ct_min(c1, qb + wq);
        int64_t cnt = cend - c;
        const float *A = DYp + q * RO * CT_PO + row0 * wq + (c - qb);
        for (int64_t l = 0; l < cnt; l++) {
            __m256 b0 = ct_ld8(B, n, k0), b1 = _mm256_setzero_ps();
            if (NV == 2) b1 = ct_ld8(B + 8, n - 8, k1);
            _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
                __m256 a = _mm256_broadcast_ss(A + i * wq + l);
                acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
                if (NV == 2) acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            }
            B += ldb;
        }
        c = cend;
    }
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        ct_st8(C + i * ldc, n, k0, acc[i][0]);
        if (NV == 2) ct_st8(C + i * ldc + 8, n - 8, k1, acc[i][1]);
    }
}

#define CT_GI256_CASE(MM) \
    case MM: { if (nv == 2) ct_gi_body_256(MM, 2, nn, DYp, RO, row0, c0, c1, Cout, Bp + j0, n, C + j0, ldc); \
               else ct_gi_body_256(MM, 1, nn, DYp, RO, row0, c0, c1, Cout, Bp + j0, n, C + j0, ldc); } break;

static CT_T256 void ct_gi_ukr_256(int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0, int64_t c0,
                                  int64_t c1, int64_t Cout, const float *Bp, float *C, int64_t ldc) {
    for (int64_t j0 = 0; j0 < n; j0 += 16) {
        int64_t nn = ct_min(16, n - j0);
        int nv = nn > 8 ? 2 : 1;
        switch (m) {
            CT_GI256_CASE(1) CT_GI256_CASE(2) CT_GI256_CASE(3)
            CT_GI256_CASE(4) CT_GI256_CASE(5) CT_GI256_CASE(6)
            default: break;
        }
    }
}

/* gw: M (<= 4) ci x n (<= 16) co */
CT_I256 void ct_gw_body_256(const int M, const int NV, int64_t n, int64_t kc, const float *A, int64_t lda,
                            const float *B, int64_t ldb, float *C, int64_t ldc) {
    __m256 acc[4][2];
    __m256i k0 = ct_mask8(n), k1 = ct_mask8(n - 8);
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        acc[i][0] = ct_ld8(C + i * ldc, n, k0);
        if (NV == 2) acc[i][1] = ct_ld8(C + i * ldc + 8, n - 8, k1);
    }
    for (int64_t p = 0; p < kc; p++) {
        __m256 b0 = ct_ld8(B, n, k0), b1 = _mm256_setzero_ps();
        if (NV == 2) b1 = ct_ld8(B + 8, n - 8, k1);
        _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
            __m256 a = _mm256_broadcast_ss(A + i);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            if (NV == 2) acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
        }
        A += lda; B += ldb;
    }
    _Pragma("GCC unroll 28") for (int i = 0; i < M; i++) {
        ct_st8(C + i * ldc, n, k0, acc[i][0]);
        if (NV == 2) ct_st8(C + i * ldc + 8, n - 8, k1, acc[i][1]);
    }
}

/* gw: M (<= 3) ci x 32 co (a whole DY panel): 12 independent chains (4 x 16 has 8, too few to hide the FMA
 * latency on two FMA pipes), 4 loads and 3 broadcasts per row */
CT_I256 void ct_gw_body32_256(const int M, int64_t kc, const float *A, int64_t lda, const float *B, int64_t ldb,
                              float *C, int64_t ldc) {
    __m256 acc[3][4];
    _Pragma("GCC unroll 3") for (int i = 0; i < M; i++)
        for (int v = 0; v < 4; v++) acc[i][v] = _mm256_loadu_ps(C + i * ldc + 8 * v);
    for (int64_t p = 0; p < kc; p++) {
        __m256 b0 = _mm256_loadu_ps(B), b1 = _mm256_loadu_ps(B + 8);
        __m256 b2 = _mm256_loadu_ps(B + 16), b3 = _mm256_loadu_ps(B + 24);
        _Pragma("GCC unroll 3") for (int i = 0; i < M; i++) {
            __m256 a = _mm256_broadcast_ss(A + i);
            acc[i][0] = _mm256_fmadd_ps(a, b0, acc[i][0]);
            acc[i][1] = _mm256_fmadd_ps(a, b1, acc[i][1]);
            acc[i][2] = _mm256_fmadd_ps(a, b2, acc[i][2]);
            acc[i][3] = _mm256_fmadd_ps(a, b3, acc[i][3]);
        }
        A += lda; B += ldb;
    }
    _Pragma("GCC unroll 3") for (int i = 0; i < M; i++)
        for (int v = 0; v < 4; v++) _mm256_storeu_ps(C + i * ldc + 8 * v, acc[i][v]);
}

#define CT_GW256_CASE(MM) \
    case MM: { if (nv == 2) ct_gw_body_256(MM, 2, nn, kc, A + i0, lda, B + j0, ldb, C + i0 * ldc + j0, ldc); \
               else ct_gw_body_256(MM, 1, nn, kc, A + i0, lda, B + j0, ldb, C + i0 * ldc + j0, ldc); } break;

static CT_T256 void ct_gw_ukr_256(int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda, const float *B,
                                  int64_t ldb, float *C, int64_t ldc) {
    if (n == CT_PO) {
        for (int64_t i0 = 0; i0 < m; i0 += 3) {
            switch (ct_min(3, m - i0)) {
                case 3: ct_gw_body32_256(3, kc, A + i0, lda, B, ldb, C + i0 * ldc, ldc); break;
                case 2: ct_gw_body32_256(2, kc, A + i0, lda, B, ldb, C + i0 * ldc, ldc); break;
                default: ct_gw_body32_256(1, kc, A + i0, lda, B, ldb, C + i0 * ldc, ldc); break;
            }
        }
        return;
    }
    for (int64_t i0 = 0; i0 < m; i0 += 4) {
        int64_t mm = ct_min(4, m - i0);
        for (int64_t j0 = 0; j0 < n; j0 += 16) {
            int64_t nn = ct_min(16, n - j0);
            int nv = nn > 8 ? 2 : 1;
            switch (mm) {
                CT_GW256_CASE(1) CT_GW256_CASE(2) CT_GW256_CASE(3) CT_GW256_CASE(4)
                default: break;
            }
        }
    }
}

/* the b-major X pack's narrow rows (see ct_walk_rows): one masked load and store per row */
static CT_T512 void ct_walk_rows_512(const char *base, int64_t s0, int64_t s1, int64_t T, int64_t t, int64_t b,
                                     int64_t nr, int64_t n, float *d) {
    __mmask16 k = ct_mask16(n);
    for (int64_t i = 0; i < nr; i++) {
        _mm512_mask_storeu_ps(d + i * n, k, _mm512_maskz_loadu_ps(k, base + t * s0 + b * s1));
        if (++t == T) { t = 0; b++; }
    }
}
static CT_T256 void ct_walk_rows_256(const char *base, int64_t s0, int64_t s1, int64_t T, int64_t t, int64_t b,
                                     int64_t nr, int64_t n, float *d) {
    __m256i m0 = ct_mask8(n), m1 = ct_mask8(n - 8);
    for (int64_t i = 0; i < nr; i++) {
        const float *src = (const float *)(base + t * s0 + b * s1);
        ct_st8(d + i * n, n, m0, ct_ld8(src, n, m0));
        if (n > 8) ct_st8(d + i * n + 8, n - 8, m1, ct_ld8(src + 8, n - 8, m1));
        if (++t == T) { t = 0; b++; }
    }
}
#endif /* CT_X86 */

/* ------------------------------------------------------------------------------------------------ */
/* ISA selection                                                                                    */
/* ------------------------------------------------------------------------------------------------ */
static int ct_isa_supported(void) {
#if CT_X86
    __builtin_cpu_init();
    ct_cpu_amd = __builtin_cpu_is("amd") ? 1 : 0;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c") && __builtin_cpu_supports("avx2"))
        return CT_ISA_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c"))
        return CT_ISA_AVX2;
#endif
    return CT_ISA_PORTABLE;
}

static inline void ct_decode_row(int isa, const char *src, int64_t stride, int dt, int64_t n, float *out) {
#if CT_X86
    if (dt == CT_DT_HIF8) { ct_decode_row_port(src, stride, dt, n, out); return; }   /* a table lookup per code */
    if (isa == CT_ISA_AVX512) { ct_decode_row_512(src, stride, dt, n, out); return; }
    if (isa == CT_ISA_AVX2) { ct_decode_row_256(src, stride, dt, n, out); return; }
#endif
    ct_decode_row_port(src, stride, dt, n, out);
}
/* Rows of n <= 16 contiguous fp32 channels, row i at base + t*s0 + b*s1 with (t, b) walking t fastest from the
 * given start (t wraps at T into the next b), copied to d as [nr][n]: the b-major X pack's narrow rows */
static inline void ct_walk_rows(int isa, const char *base, int64_t s0, int64_t s1, int64_t T, int64_t t, int64_t b,
                                int64_t nr, int64_t n, float *d) {
#if CT_X86
    if (isa == CT_ISA_AVX512) { ct_walk_rows_512(base, s0, s1, T, t, b, nr, n, d); return; }
    if (isa == CT_ISA_AVX2) { ct_walk_rows_256(base, s0, s1, T, t, b, nr, n, d); return; }
#endif
    (void)isa;
    for (int64_t i = 0; i < nr; i++) {
        memcpy(d + i * n, base + t * s0 + b * s1, (size_t)n * 4);
        if (++t == T) { t = 0; b++; }
    }
}
static inline void ct_round_row(int isa, float *v, int64_t n, int compute, int hbits, int hrnd) {
#if CT_X86
    if (isa == CT_ISA_AVX512) { ct_round_row_512(v, n, compute, hbits, hrnd); return; }
    if (isa == CT_ISA_AVX2) { ct_round_row_256(v, n, compute, hbits, hrnd); return; }
#endif
    ct_round_row_port(v, n, compute, hbits, hrnd);
}
static inline void ct_store_row(int isa, const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd,
                                int sat) {
#if CT_X86
    if (isa == CT_ISA_AVX512) { ct_store_row_512(acc, n, dst, dt, pre, hif8_rnd, sat); return; }
    if (isa == CT_ISA_AVX2) { ct_store_row_256(acc, n, dst, dt, pre, hif8_rnd, sat); return; }
#endif
    ct_store_row_port(acc, n, dst, dt, pre, hif8_rnd, sat);
}
/* gi rows per micro-tile for a panel of n ci */
static inline int64_t ct_gi_mr(int isa, int64_t n) {
    return isa == CT_ISA_AVX512 ? (n <= 16 ? 28 : 14) : isa == CT_ISA_AVX2 ? 6 : 8;
}

/* gi: nk consecutive k (DY row step dk, weight step bk), co in [c0, c1), into the fp32 tile C */
static inline void ct_gi_ukr(int isa, int64_t m, int64_t n, const float *DYp, int64_t RO, int64_t row0,
                             int64_t dk, int64_t nk, int64_t c0, int64_t c1, int64_t Cout, const float *Bp,
                             int64_t bk, float *C, int64_t ldc) {
#if CT_X86
    if (isa == CT_ISA_AVX512) { ct_gi_ukr_512(m, n, DYp, RO, row0, dk, nk, c0, c1, Cout, Bp, bk, C, ldc); return; }
#endif
    for (int64_t kk = 0; kk < nk; kk++) {
#if CT_X86
        if (isa == CT_ISA_AVX2) {
            ct_gi_ukr_256(m, n, DYp, RO, row0 + kk * dk, c0, c1, Cout, Bp + kk * bk, C, ldc);
            continue;
        }
#endif
        ct_gi_ukr_port(m, n, DYp, RO, row0 + kk * dk, c0, c1, Cout, Bp + kk * bk, C, ldc);
    }
}
/* gw: nk consecutive k (A step ak, C step ck) */
static inline void ct_gw_ukr(int isa, int64_t nk, int64_t m, int64_t n, int64_t kc, const float *A, int64_t lda,
                             int64_t ak, const float *B, int64_t ldb, float *C, int64_t ldc, int64_t ck) {
#if CT_X86
    if (isa == CT_ISA_AVX512 && m == CT_PX && n <= 8 && nk <= 3 && ct_gw_pairs_on) {
        ct_gw_pairs_512(nk, n, kc, A, lda, ak, B, ldb, C, ldc, ck);
        return;
    }
    if (isa == CT_ISA_AVX512 && (nk <= 3 && (nk == 1 || n <= 16))) {
        ct_gw_ukr_512(nk, m, n, kc, A, lda, ak, B, ldb, C, ldc, ck);
        return;
    }
#endif
    for (int64_t kk = 0; kk < nk; kk++) {
#if CT_X86
        if (isa == CT_ISA_AVX512) { ct_gw_ukr_512(1, m, n, kc, A + kk * ak, lda, 0, B, ldb, C + kk * ck, ldc, 0); continue; }
        if (isa == CT_ISA_AVX2) { ct_gw_ukr_256(m, n, kc, A + kk * ak, lda, B, ldb, C + kk * ck, ldc); continue; }
#endif
        ct_gw_ukr_port(m, n, kc, A + kk * ak, lda, B, ldb, C + kk * ck, ldc);
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* pack tasks                                                                                       */
/* ------------------------------------------------------------------------------------------------ */
/* decode rows [r, r+nr) (r = t*B + b) of channels [c0, c0+n) of a (T, B, C) view into out[nr][n] (fp32) */
#define CT_RB 64   /* rows per pack step */
static void ct_decode_rows(const ct_plan *P, const ct_src *S, int64_t C, int64_t r, int64_t nr, int64_t c0,
                           int64_t n, float *out) {
    int64_t es = ct_dt_size(S->dt);
    int64_t t = r / P->B, b = r - t * P->B;
    if (S->s2 == es && c0 == 0 && n == C && S->s1 == C * es && S->s0 == P->B * S->s1) {
        /* the rows are one contiguous run of memory */
        ct_decode_row(P->isa, S->base + t * S->s0 + b * S->s1, es, S->dt, nr * n, out);
        return;
    }
    for (int64_t i = 0; i < nr; i++) {
        ct_decode_row(P->isa, S->base + t * S->s0 + b * S->s1 + c0 * S->s2, S->s2, S->dt, n, out + i * n);
        if (++b == P->B) { b = 0; t++; }
    }
}

/* rows [r, r + n) of source S (C channels), channels [c0, c0 + w), into v as [n][w] fp32, rounded to C: one panel's
 * rows, as the packs of a whole operand and of a streamed window store them (P: sizes, isa, compute, HF32 bits) */
static void ct_pack_rows(const ct_plan *P, const ct_src *S, int64_t C, int64_t r, int64_t n, int64_t c0, int64_t w,
                         float *v) {
    for (int64_t rr = r; rr < r + n; rr += CT_RB)
        ct_decode_rows(P, S, C, rr, ct_min(CT_RB, r + n - rr), c0, w, v + (rr - r) * w);
    ct_round_row(P->isa, v, n * w, ct_round_for(S->dt, P->compute), P->hbits, P->hrnd);
}

/* gb partial sums (see ct_gb_partials), one scalar chain per channel and partial */
static void ct_gb_partials_port(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
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

#if CT_X86
/* the same sums, 16 (then 16 more) channels per vector: each lane is the scalar chain of its channel */
static CT_T512 void ct_gb_partials_512(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
    enum { NS = CT_PR / CT_GBR };
    __m512 g[NS][2];
    __mmask16 k0 = ct_mask16(wq), k1 = ct_mask16(wq > 16 ? wq - 16 : 0);
    int64_t S = ct_cdiv(nr, CT_GBR), full = nr / CT_GBR;
    for (int s = 0; s < NS; s++) g[s][0] = g[s][1] = _mm512_setzero_ps();
    for (int64_t i = 0; i < CT_GBR; i++) {
        for (int64_t s = 0; s < full; s++) {
            const float *row = v + (s * CT_GBR + i) * wq;
            g[s][0] = _mm512_add_ps(g[s][0], _mm512_maskz_loadu_ps(k0, row));
            if (wq > 16) g[s][1] = _mm512_add_ps(g[s][1], _mm512_maskz_loadu_ps(k1, row + 16));
        }
    }
    for (int64_t i = full * CT_GBR; i < nr; i++) {
        g[full][0] = _mm512_add_ps(g[full][0], _mm512_maskz_loadu_ps(k0, v + i * wq));
        if (wq > 16) g[full][1] = _mm512_add_ps(g[full][1], _mm512_maskz_loadu_ps(k1, v + i * wq + 16));
    }
    for (int64_t s = 0; s < S; s++) {
        _mm512_mask_storeu_ps(out + s * ostride, k0, g[s][0]);
        if (wq > 16) _mm512_mask_storeu_ps(out + s * ostride + 16, k1, g[s][1]);
    }
}
static CT_T256 void ct_gb_partials_256(const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
    enum { NS = CT_PR / CT_GBR };
    __m256 g[NS][4];
    __m256i km[4];
    int64_t S = ct_cdiv(nr, CT_GBR), full = nr / CT_GBR, nv = ct_cdiv(wq, 8);
    for (int j = 0; j < 4; j++) km[j] = ct_mask8(wq - 8 * j);
    for (int s = 0; s < NS; s++) for (int j = 0; j < 4; j++) g[s][j] = _mm256_setzero_ps();
    for (int64_t i = 0; i < CT_GBR; i++)
        for (int64_t s = 0; s < full; s++) {
            const float *row = v + (s * CT_GBR + i) * wq;
            for (int64_t j = 0; j < nv; j++)
                g[s][j] = _mm256_add_ps(g[s][j], ct_ld8(row + 8 * j, wq - 8 * j, km[j]));
        }
    for (int64_t i = full * CT_GBR; i < nr; i++)
        for (int64_t j = 0; j < nv; j++)
            g[full][j] = _mm256_add_ps(g[full][j], ct_ld8(v + i * wq + 8 * j, wq - 8 * j, km[j]));
    for (int64_t s = 0; s < S; s++)
        for (int64_t j = 0; j < nv; j++) ct_st8(out + s * ostride + 8 * j, wq - 8 * j, km[j], g[s][j]);
}
#endif

/* gb partial sums: one per CT_GBR rows of DY (rows in order within it, from 0.0f); gb[co] is then the sum
 * of the partials in order.  A tree fixed by the shape alone; the up to CT_PR/CT_GBR partials of a pack task
 * are independent chains, summed interleaved. */
static void ct_gb_partials(int isa, const float *v, int64_t nr, int64_t wq, float *out, int64_t ostride) {
#if CT_X86
    if (isa == CT_ISA_AVX512) { ct_gb_partials_512(v, nr, wq, out, ostride); return; }
    if (isa == CT_ISA_AVX2) { ct_gb_partials_256(v, nr, wq, out, ostride); return; }
#endif
    (void)isa;
    ct_gb_partials_port(v, nr, wq, out, ostride);
}

static void ct_pack_dy(const ct_plan *P, int64_t task) {
    int64_t chunk = task / P->nq, q = task % P->nq;
    int64_t r0 = chunk * CT_PR, r1 = ct_min(P->RO, r0 + CT_PR);
    int64_t co0 = q * CT_PO, wq = ct_min(CT_PO, P->Cout - co0);
    float *gout = P->gbp + (chunk * (CT_PR / CT_GBR)) * P->Cout + co0;
    if (P->dy_direct) {                                          /* the panel is the caller's DY: gb only */
        ct_gb_partials(P->isa, P->DYp + r0 * wq, r1 - r0, wq, gout, P->Cout);
        return;
    }
    if (P->DYp) {
        /* the panel rows [r0, r1) are contiguous [rows][wq]: decode straight into them, sum, then round */
        float *v = P->DYp + q * P->RO * CT_PO + r0 * wq;
        for (int64_t rr = r0; rr < r1; rr += CT_RB)
            ct_decode_rows(P, &P->dy, P->Cout, rr, ct_min(CT_RB, r1 - rr), co0, wq, v + (rr - r0) * wq);
        ct_gb_partials(P->isa, v, r1 - r0, wq, gout, P->Cout);
        ct_round_row(P->isa, v, (r1 - r0) * wq, ct_round_for(P->dy.dt, P->compute), P->hbits, P->hrnd);
        return;
    }
    float tmp[CT_GBR * CT_PO];                                   /* gb only (no products) */
    for (int64_t rr = r0; rr < r1; rr += CT_GBR) {
        int64_t nr = ct_min(CT_GBR, r1 - rr);
        for (int64_t r2 = rr; r2 < rr + nr; r2 += CT_RB)
            ct_decode_rows(P, &P->dy, P->Cout, r2, ct_min(CT_RB, rr + nr - r2), co0, wq, tmp + (r2 - rr) * wq);
        ct_gb_partials(P->isa, tmp, nr, wq, gout + ((rr - r0) / CT_GBR) * P->Cout, P->Cout);
    }
}

static void ct_pack_x(const ct_plan *P, int64_t task) {
    int64_t chunk = task / P->n_xg, g = task % P->n_xg;
    int64_t r0 = chunk * CT_PR, r1 = ct_min(P->RI, r0 + CT_PR);
    int64_t p0 = g * CT_XG, p1 = ct_min(P->nxp, p0 + CT_XG);
    int64_t ci0 = p0 * CT_PX, ci1 = ct_min(P->Cin, p1 * CT_PX), n = ci1 - ci0;
    float tmp[CT_RB * CT_XG * CT_PX];
    for (int64_t rr = r0; rr < r1; rr += CT_RB) {
        int64_t nr = ct_min(CT_RB, r1 - rr);
        if (p1 - p0 == 1 && !P->bmajor) {   /* one panel: its rows [rr, rr+nr) are contiguous [nr][n] */
            float *v = P->Xp + p0 * P->RI * CT_PX + rr * n;
            ct_decode_rows(P, &P->x, P->Cin, rr, nr, ci0, n, v);
            ct_round_row(P->isa, v, nr * n, ct_round_for(P->x.dt, P->compute), P->hbits, P->hrnd);
            continue;
        }
        if (P->bmajor) {
            /* b-major panels are filled in their own row order: row b*T_in + t is source row t*B + b, so that
             * every panel is written sequentially (scattering the source rows instead wrote B streams a panel).
             * A single panel is filled in place, and narrow fp32 rows are copied with one vector each: a decode
             * call per row of a few channels cost more than the rest of a small call */
            float *d = p1 - p0 == 1 ? P->Xp + p0 * P->RI * CT_PX + rr * n : tmp;
            int64_t b = rr / P->T_in, t = rr - b * P->T_in;
            const char *base = P->x.base + ci0 * P->x.s2;
            if (P->x.dt == CT_DT_F32 && P->x.s2 == 4 && n <= 16) {
                ct_walk_rows(P->isa, base, P->x.s0, P->x.s1, P->T_in, t, b, nr, n, d);
            } else {
                for (int64_t i = 0; i < nr; i++) {
                    ct_decode_row(P->isa, base + t * P->x.s0 + b * P->x.s1, P->x.s2, P->x.dt, n, d + i * n);
                    if (++t == P->T_in) { t = 0; b++; }
                }
            }
            ct_round_row(P->isa, d, nr * n, ct_round_for(P->x.dt, P->compute), P->hbits, P->hrnd);
            if (d != tmp) continue;
        } else {
            ct_decode_rows(P, &P->x, P->Cin, rr, nr, ci0, n, tmp);
            ct_round_row(P->isa, tmp, nr * n, ct_round_for(P->x.dt, P->compute), P->hbits, P->hrnd);
        }
        for (int64_t p = p0; p < p1; p++) {
            int64_t wi = ct_min(CT_PX, P->Cin - p * CT_PX);
            float *d = P->Xp + p * P->RI * CT_PX + rr * wi;
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
    int64_t k = task / P->nwp, cp = task % P->nwp;
    int64_t ci0 = cp * CT_PO, wj = ct_min(CT_PO, P->Cin - ci0);
    int cube = P->acc != CT_ACC_SEQ;
    float *dst = cube ? P->Wp + ci0 * P->K * P->Cout : P->Wp + k * P->Cin * P->Cout + ci0 * P->Cout;
    float v[CT_PO * 64];
    for (int64_t c0 = 0; c0 < P->Cout; c0 += 64) {
        int64_t n = ct_min(64, P->Cout - c0);
        for (int64_t j = 0; j < wj; j++) {
            const char *row = P->w.base + k * P->w.s0 + (ci0 + j) * P->w.s1 + c0 * P->w.s2;
            ct_decode_row(P->isa, row, P->w.s2, P->w.dt, n, v + j * 64);
            ct_round_row(P->isa, v + j * 64, n, ct_round_for(P->w.dt, P->compute), P->hbits, P->hrnd);
        }
        for (int64_t c = 0; c < n; c++) {
            int64_t co = c0 + c, row = co;
            if (cube) {
                int64_t lo = co - co % P->k0;
                row = ct_wblk(lo, ct_min(P->Cout, lo + P->k0), P->K, k) + co - lo;
            }
            for (int64_t j = 0; j < wj; j++) dst[row * wj + j] = v[j * 64 + c];
        }
    }
}

static void ct_nar_pack_dy(const ct_plan *P, int64_t task);
static void ct_nar_pack_src(const ct_plan *P, const ct_src *S, int64_t T_in, int64_t C, int64_t r0, int64_t r1,
                            float *dst, int64_t ld);
static void ct_pack_task(const ct_plan *P, int64_t task) {
    if (ct_stop(P)) return;
    if (P->narrow && task < P->n_pack_dy) {
        ct_nar_pack_dy(P, task);
        return;
    }
    if (task < P->n_pack_dy) {
        ct_pack_dy(P, task);
        if (P->narrow_gi) {              /* (one DY panel: task = its row chunk) */
            int64_t r0 = task * CT_PR;
            ct_nar_pack_src(P, &P->dy, P->T_out, P->Cout, r0, ct_min(P->RO, r0 + CT_PR), (float *)P->DYc, P->nlo);
        }
        return;
    }
    task -= P->n_pack_dy;
    if (task < P->n_pack_x) { ct_pack_x(P, task); return; }
    task -= P->n_pack_x;
    ct_pack_w(P, task);
}

/* ------------------------------------------------------------------------------------------------ */
/* compute tasks                                                                                    */
/* ------------------------------------------------------------------------------------------------ */
/* gi for rows [u, v) of the task, one k at a time (rows whose valid k range is not all of 0..K-1) */
static void ct_gi_rows_per_k(const ct_plan *P, int64_t u, int64_t v, int64_t R0, int64_t c0, int64_t c1,
                             int64_t j0, int64_t wj, const float *Bp0, float *cb, int64_t ld, int64_t J0) {
    int64_t MR = ct_gi_mr(P->isa, wj);
    for (int64_t k = 0; k < P->K; k++) {
        int64_t lo = ct_max(0, k - P->pad), hi = ct_min(P->T_in, P->T_out + k - P->pad);
        int64_t a = ct_max(u, lo * P->B), b = ct_min(v, hi * P->B);
        int64_t shift = (P->pad - k) * P->B;
        for (int64_t i = a; i < b; i += MR)
            ct_gi_ukr(P->isa, ct_min(MR, b - i), wj, P->DYp, P->dy_ps, i + shift - P->dy_r0, 0, 1, c0, c1, P->Cout,
                      Bp0 + k * P->Cin * P->Cout, 0, cb + (i - R0) * ld + (j0 - J0), ld);
    }
}

/* gi task: rows [R0, R1) x ci [J0, J1).  Per element the order is: co block (CT_KCI) ascending, then k
 * ascending (valid k only), then co ascending within the block: one fp32 FMA chain. */
static void ct_gi_task(const ct_plan *P, int64_t task, float *cb) {
    int64_t rb = task / P->n_gi_jb, jb = task % P->n_gi_jb;
    int64_t R0 = rb * CT_MCI, R1 = ct_min(P->RI, R0 + CT_MCI);
    int64_t J0 = jb * CT_NCI, J1 = ct_min(P->Cin, J0 + CT_NCI), nc = J1 - J0;
    int64_t ld = P->gi_ld;
    int pre = (P->compute == CT_C_FP16 || P->compute == CT_C_BF16) ? P->compute : CT_C_FP32;
    int direct = P->gi_dt == CT_DT_F32 && pre == CT_C_FP32;   /* accumulate in the output itself */
    if (direct) {
        cb = (float *)P->gi + R0 * P->Cin + J0;
        ld = P->Cin;
    }
    if (nc == ld) memset(cb, 0, (size_t)((R1 - R0) * ld) * 4);
    else for (int64_t r = 0; r < R1 - R0; r++) memset(cb + r * ld, 0, (size_t)nc * 4);
    if (P->Wp && P->K > 0) {
        /* rows where every k is valid: t in [K-1-pad, T_out-pad) */
        int64_t ia = ct_max(R0, ct_max(0, P->K - 1 - P->pad) * P->B);
        int64_t ib = ct_min(R1, ct_min(P->T_in, P->T_out - P->pad) * P->B);
        if (ia >= ib) ia = ib = R1;
        for (int64_t c0 = 0; c0 < P->Cout; c0 += CT_KCI) {
            int64_t c1 = ct_min(P->Cout, c0 + CT_KCI);
            for (int64_t j0 = J0; j0 < J1; j0 += CT_PO) {
                if (ct_stop(P)) return;                                 /* (a panel is K*CT_KCI deep) */
                int64_t wj = ct_min(CT_PO, P->Cin - j0);
                const float *Bp0 = P->Wp + j0 * P->Cout + c0 * wj;     /* k = 0 */
                int64_t MR = ct_gi_mr(P->isa, wj);
                if (R0 < ia) ct_gi_rows_per_k(P, R0, ia, R0, c0, c1, j0, wj, Bp0, cb, ld, J0);
                for (int64_t i = ia; i < ib; i += MR)
                    ct_gi_ukr(P->isa, ct_min(MR, ib - i), wj, P->DYp, P->dy_ps, i + P->pad * P->B - P->dy_r0, -P->B, P->K, c0,
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
        ct_store_row(P->isa, cb, (R1 - R0) * nc, P->gi + R0 * P->Cin * es, P->gi_dt, pre, CT_HIF8_TA, 0);
    else
        for (int64_t r = R0; r < R1; r++)
            ct_store_row(P->isa, cb + (r - R0) * ld, nc, P->gi + (r * P->Cin + J0) * es, P->gi_dt, pre, CT_HIF8_TA, 0);
}

/* gw, rows [p0, p1) (all valid for k .. k+nk-1), one co panel, every ci panel of the task */
static inline void ct_gw_part(const ct_plan *P, int64_t k, int64_t nk, int64_t p0, int64_t p1, int64_t co,
                              int64_t wq, int64_t I0, int64_t I1, int64_t C0, float *cb, int64_t ld,
                              int64_t tile) {
    if (p0 >= p1) return;
    int64_t xs = (k - P->pad) * P->B;
    const float *Bq = P->DYp + (co / CT_PO) * P->dy_ps * CT_PO + (p0 - P->dy_r0) * wq;
    for (int64_t ci = I0; ci < I1; ci += CT_PX) {
        int64_t wi = ct_min(CT_PX, P->Cin - ci);
        const float *Ap = P->Xp + (ci / CT_PX) * P->RI * CT_PX + (p0 + xs) * wi;
        ct_gw_ukr(P->isa, nk, wi, wq, p1 - p0, Ap, wi, P->B * wi, Bq, wq, cb + (ci - I0) * ld + (co - C0), ld,
                  tile);
    }
}

/* gw task: k in [k0, k0+G) x ci [I0, I1) x co [C0, C1).  Row blocks of CT_KCW outermost (the DY block is
 * reused by every k and ci of the task), then co panels (a DY micro-panel stays in L1), then k, then ci panels.
 * Per element the order is rows ascending: one fp32 FMA chain, whatever the blocking. */
static void ct_gw_task(const ct_plan *P, int64_t task, float *cb) {
    int64_t per_k = P->n_gw_ib * P->n_gw_ob;
    int64_t kg = task / per_k, rem = task % per_k;
    int64_t ib = rem / P->n_gw_ob, ob = rem % P->n_gw_ob;
    int64_t k0 = kg * P->gw_kg, G = ct_min(P->gw_kg, P->K - k0);
    int64_t I0 = ib * P->gw_mc, I1 = ct_min(P->Cin, I0 + P->gw_mc);
    int64_t C0 = ob * P->gw_nc, C1 = ct_min(P->Cout, C0 + P->gw_nc), nc = C1 - C0;
    int64_t ld = P->gw_ld, tile = (I1 - I0) * ld;
    int direct = P->gw_dt == CT_DT_F32;                      /* accumulate in the output itself */
    if (direct || P->win) {                  /* (streamed DY: in gw's fp32 sums at pcb, cast by ct_tree_task) */
        cb = (direct ? (float *)P->gw : P->pcb) + (k0 * P->Cin + I0) * P->Cout + C0;
        ld = P->Cout;
        tile = P->Cin * P->Cout;
    }
    for (int64_t kk = 0; kk < G && !P->win; kk++) {          /* (streamed: zeroed once, before the first window) */
        if (nc == ld) memset(cb + kk * tile, 0, (size_t)((I1 - I0) * ld) * 4);
        else for (int64_t r = 0; r < I1 - I0; r++) memset(cb + kk * tile + r * ld, 0, (size_t)nc * 4);
    }
    if (P->Xp) {
        /* DY rows valid for k: [a_k, b_k), both non-increasing in k */
        #define CT_GW_A(k) (ct_max(0, P->pad - (k)) * P->B)
        #define CT_GW_B(k) (ct_min(P->T_out, P->T_in + P->pad - (k)) * P->B)
        int64_t lo = CT_GW_A(k0 + G - 1), hi = CT_GW_B(k0);
        if (P->win) { lo = ct_max(lo, P->w_r0); hi = ct_min(hi, P->w_r1); }   /* streamed: this window's rows */
        for (int64_t q0 = lo; q0 < hi; q0 += CT_KCW) {
            int64_t q1 = ct_min(hi, q0 + CT_KCW);
            if (ct_stop(P)) return;
            for (int64_t co = C0; co < C1; co += CT_PO) {
                int64_t wq = ct_min(CT_PO, P->Cout - co);
                for (int64_t ks = k0; ks < k0 + G; ks += P->gw_nkr) {
                    int64_t nk = ct_min(P->gw_nkr, k0 + G - ks);
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
    if (direct || P->win) return;
    int64_t es = ct_dt_size(P->gw_dt);
    for (int64_t kk = 0; kk < G; kk++) {
        int64_t k = k0 + kk;
        const float *t = cb + kk * tile;
        if (nc == ld && nc == P->Cout)
            ct_store_row(P->isa, t, (I1 - I0) * nc, P->gw + ((k * P->Cin + I0) * P->Cout) * es, P->gw_dt,
                         CT_C_FP32, P->hif8_rnd, P->saturate);
        else
            for (int64_t ci = I0; ci < I1; ci++)
                ct_store_row(P->isa, t + (ci - I0) * ld, nc, P->gw + ((k * P->Cin + ci) * P->Cout + C0) * es,
                             P->gw_dt, CT_C_FP32, P->hif8_rnd, P->saturate);
    }
}

#include "_conv_cube.h"
#include "_conv_narrow.h"
#include "_conv_stream.h"

/* gw tasks first: they are the fewest and longest (narrow channels: one task, a chain over every row), so a
 * thread starts each of them while the others share the many short gi tasks (the order tasks run in never
 * changes a result: each output element belongs to one task) */
static void ct_comp_task(const ct_plan *P, int64_t task, float *cb) {
    if (ct_stop(P)) return;
    if (P->narrow) {
        if (task < P->n_gw) ct_gwn_task(P, task, cb);
        else ct_gin_task(P, task - P->n_gw, cb);
    } else if (P->acc == CT_ACC_SEQ) {
        if (task < P->n_gw) ct_gw_task(P, task, cb);
        else ct_gi_task(P, task - P->n_gw, cb);
    } else {
        if (task < P->n_gw) ct_gwc_task(P, task, cb);
        else if (P->narrow_gi) ct_gin_task(P, task - P->n_gw, cb);
        else ct_gic_task(P, task - P->n_gw, cb);
    }
}

/* after every compute task: the pairwise trees of the gw pieces (layout 1) */
static void ct_post_task(const ct_plan *P, int64_t task) {
    if (ct_stop(P)) return;
    if (P->narrow) ct_gwn_finish(P, task);
    else ct_tree_task(P, task);
}

/* gb[co] = sum of the chunk partial sums in chunk order (a tree fixed by the shape alone) */
static void ct_finish_gb(const ct_plan *P) {
    float acc[256];
    int64_t es = ct_dt_size(P->gb_dt);
    for (int64_t c0 = 0; c0 < P->Cout; c0 += 256) {
        int64_t n = ct_min(256, P->Cout - c0);
        for (int64_t j = 0; j < n; j++) acc[j] = 0.0f;
        for (int64_t ch = 0; ch < P->n_gb_parts; ch++) {
            const float *g = P->gbp + ch * P->Cout + c0;
            for (int64_t j = 0; j < n; j++) acc[j] += g[j];
        }
        ct_store_row(P->isa, acc, n, P->gb + c0 * es, P->gb_dt, CT_C_FP32, CT_HIF8_TA, 0);
    }
}

#endif /* PYCONVTBC_CONV_GEMM_H */
