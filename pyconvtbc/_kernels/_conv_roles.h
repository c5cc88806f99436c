/* _conv_roles.h: what the drivers shared by the two operators take, in GEMM roles: never an operator's plan.
 *
 * Each operator has its own plan (the backward's ct_plan, _conv_plan.h; the forward's ct_fwd, _conv_fwd.h).  The
 * drivers both use (row packs: _conv_pack.h, _conv_narrow.h; the cube chains of a reduction pass: _conv_cube.h;
 * the narrow reduction kernels' driver: _conv_narrow.h) take these records instead, filled by each operator with
 * its own names:
 *   ct_pk   how an operand's rows are packed (decoded and rounded to the compute precision);
 *   ct_red  one reduction pass C = start + A * W over (tap, channel) blocks: the backward's gradInput pass
 *           (A = packed DY, reduction over co, output channels ci; ct_gi_red) and the forward's pass (A = packed
 *           x, reduction over ci, output channels co; ct_fwd.red).
 * ISA-free: the micro-kernel table is handed in (U).
 */
#ifndef PYCONVTBC_CONV_ROLES_H
#define PYCONVTBC_CONV_ROLES_H

#include <stdint.h>

#include "_ukr.h"

/* An operand's packing: rows r = t*B + b decoded by U, rounded to the compute precision (HF32: hbits, hrnd) */
typedef struct {
    const ct_ukr *U;
    int64_t B;                            /* rows per time step (the batch) */
    int compute, hbits, hrnd;
} ct_pk;

/* A reduction pass: output rows r = t*B + b (t < t_c) x n_out channels j,
 *   C[r][j] = start[j] + sum over the blocks (g, k) (channel group g of k0 outer, tap k inner; _conv_cube.h)
 *             of sum_{c in g} A[a(r, k)][c] * W(k, c, j),
 * where tap k of row r reads A row a(r, k) = r + (k - pad)*B (fwd = 1: the forward) or r + (pad - k)*B (fwd = 0:
 * gradInput), A having t_a time steps (taps whose row lies outside them are skipped).  A is packed row-major in
 * panels of CT_PO channels (A + q*a_ps*CT_PO; its row 0 is A row a_r0: a streamed window's first) or, for the
 * narrow kernels, channel-major (channel c at Ac + c*a_ld); W: the weight panels (the cube forms' in block order,
 * ct_wblk, n_out columns a row for the narrow kernels). */
typedef struct {
    const ct_ukr *U;                      /* the micro-kernels */
    int acc;                              /* the form (CT_ACC_*) */
    int fwd;                              /* the tap's direction (above) */
    int64_t k0;                           /* cube block size (channels per group) */
    int64_t K, pad, B;                    /* taps, padding, rows per time step */
    int64_t t_c, t_a;                     /* time steps of the output C and of the operand A */
    int64_t n_red, n_out;                 /* reduction channels (A's), output channels (C's) */
    const float *A;                       /* row-major panels of A */
    int64_t a_ps, a_r0;                   /* rows per panel; the A row at panel row 0 */
    const float *Ac;                      /* channel-major A (narrow kernels) */
    int64_t a_ld;                         /* its channel stride */
    const float *W;                       /* the weight panels */
    const float *start;                   /* the chains' start values (n_out of them), or NULL: +0 */
} ct_red;

#endif /* PYCONVTBC_CONV_ROLES_H */
