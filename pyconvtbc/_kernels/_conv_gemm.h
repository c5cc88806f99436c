/* _conv_gemm.h: the backward's driver, over the kernel room's layers (docs/developer.md, "Kernel room"):
 *
 *   _ukr.h            the micro-kernel interface: one table per instruction set (_ukr_<isa>.c), chosen by the
 *                     caller (_ukr_select.c is the only place that compares ISA codes)
 *   _conv_roles.h     what the drivers shared with the forward take, in GEMM roles (ct_pk, ct_red): no plan
 *   _conv_plan.h      the backward's plan: sizes, tasks, workspace layout (ISA-free)
 *   _conv_pack.h      pack tasks: operands decoded and rounded into panels; gradBias partials
 *   _conv_seq.h       the sequential form's tasks
 *   _conv_cube.h      the cube forms' tasks (the accumulation model)
 *   _conv_narrow.h    the narrow-channel cube tasks and their packs
 *   _conv_stream.h    streamed DY windows
 *   _conv_gemm.h      (here) the backward's task dispatch; _conv_fwd.h the forward's plan and tasks
 *
 * Pipeline: pack tasks, then compute tasks (gw first, then gi; any thread: every output element is owned by one
 * task and summed in a fixed order, so results do not depend on threads, blocking or instruction set), then
 * post tasks (gw's piece trees / item sums, casts), then gradBias.  _conv_tbc.pyx runs the schedule.
 */
#ifndef PYCONVTBC_CONV_GEMM_H
#define PYCONVTBC_CONV_GEMM_H

#include "_conv_plan.h"
#include "_conv_pack.h"
#include "_conv_seq.h"
#include "_conv_cube.h"
#include "_conv_narrow.h"
#include "_conv_stream.h"

static void ct_pack_task(const ct_plan *P, int64_t task) {
    if (ct_stop(P)) return;
    if (P->nr.narrow && task < P->tk.n_pack_dy) {
        ct_nar_pack_dy(P, task);
        return;
    }
    if (task < P->tk.n_pack_dy) {
        ct_pack_dy(P, task);
        if (P->nr.narrow_gi) {              /* (one DY panel: task = its row chunk) */
            int64_t r0 = task * CT_PR;
            ct_pk pk = ct_plan_pk(P);
            ct_nar_pack_src(&pk, &P->dy, P->T_out, P->Cout, r0, ct_min(P->RO, r0 + CT_PR), (float *)P->ws.DYc, P->nr.nlo);
        }
        return;
    }
    task -= P->tk.n_pack_dy;
    if (task < P->tk.n_pack_x) { ct_pack_x(P, task); return; }
    task -= P->tk.n_pack_x;
    ct_pack_w(P, task);
}

/* ------------------------------------------------------------------------------------------------ */
/* compute tasks                                                                                    */

/* gw tasks first: they are the fewest and longest (narrow channels: one task, a chain over every row), so a
 * thread starts each of them while the others share the many short gi tasks (the order tasks run in never
 * changes a result: each output element belongs to one task) */
static void ct_comp_task(const ct_plan *P, int64_t task, float *cb) {
    if (ct_stop(P)) return;
    if (P->nr.narrow) {
        if (task < P->tk.n_gw) ct_gwn_task(P, task, cb);
        else ct_gin_task(P, task - P->tk.n_gw, cb);
    } else if (P->sm.acc == CT_ACC_SEQ) {
        if (task < P->tk.n_gw) ct_gw_task(P, task, cb);
        else ct_gi_task(P, task - P->tk.n_gw, cb);
    } else {
        if (task < P->tk.n_gw) ct_gwc_task(P, task, cb);
        else if (P->nr.narrow_gi) ct_gin_task(P, task - P->tk.n_gw, cb);
        else ct_gic_task(P, task - P->tk.n_gw, cb);
    }
}

/* after every compute task: the pairwise trees of the gw pieces (layout 1) */
static void ct_post_task(const ct_plan *P, int64_t task) {
    if (ct_stop(P)) return;
    if (P->nr.narrow) ct_gwn_finish(P, task);
    else ct_tree_task(P, task);
}

/* gb[co] = sum of the chunk partial sums in chunk order (a tree fixed by the shape alone) */
static void ct_finish_gb(const ct_plan *P) {
    float acc[256];
    int64_t es = ct_dt_size(P->gb_dt);
    for (int64_t c0 = 0; c0 < P->Cout; c0 += 256) {
        int64_t n = ct_min(256, P->Cout - c0);
        for (int64_t j = 0; j < n; j++) acc[j] = 0.0f;
        for (int64_t ch = 0; ch < P->tk.n_gb_parts; ch++) {
            const float *g = P->ws.gbp + ch * P->Cout + c0;
            for (int64_t j = 0; j < n; j++) acc[j] += g[j];
        }
        P->U->store_row(acc, n, P->gb + c0 * es, P->gb_dt, CT_C_FP32, CT_HIF8_TA, 0);
    }
}

/* Last: every NaN of the outputs to its format's canonical NaN (_ukr.h, CT_NAN_*), so that no output bit depends
 * on the operands' NaN payloads or the CPU's default NaN.  Tasks of CT_CANON_CHUNK elements: gi, gw, then gb. */
static int64_t ct_canon_ntasks(const ct_plan *P) {
    return ct_cdiv(P->RI * P->Cin, CT_CANON_CHUNK) + ct_cdiv(P->K * P->Cin * P->Cout, CT_CANON_CHUNK) +
           ct_cdiv(P->Cout, CT_CANON_CHUNK);
}
static void ct_canon_task(const ct_plan *P, int64_t task) {
    char *out[3] = {P->gi, P->gw, P->gb};
    int64_t n[3] = {P->RI * P->Cin, P->K * P->Cin * P->Cout, P->Cout};
    int dt[3] = {P->gi_dt, P->gw_dt, P->gb_dt};
    for (int i = 0; i < 3; i++) {
        int64_t nt = ct_cdiv(n[i], CT_CANON_CHUNK);
        if (task >= nt) { task -= nt; continue; }
        int64_t e0 = task * CT_CANON_CHUNK;
        if (out[i]) P->U->canon_nan(out[i] + e0 * ct_dt_size(dt[i]), ct_min(CT_CANON_CHUNK, n[i] - e0), dt[i]);
        return;
    }
}

#endif /* PYCONVTBC_CONV_GEMM_H */
