/* _ukr_portable.c: the portable table (_ukr.h): the generic C of _ukr_generic.h, for every CPU and architecture.
 *
 * gcc vectorises some of it where the target allows (4-wide NEON on aarch64); fmaf is one instruction wherever
 * the target has a fused multiply-add (aarch64, x86 built with FMA), else the C library's exact fmaf.
 */
#include "_ukr.h"
#include "_ukr_generic.h"

int ct_ukr_init_portable(ct_ukr *U, const ct_ukr_opts *o) {
    (void)o;
    *U = (ct_ukr){
        .name = "portable",
        .gi_mr_narrow = 8, .gi_mr_wide = 8, .gwn_mh = 2, .gwn_mw = 2, .narrow_gi_max_cin = CT_NW,
        .decode_row = ct_decode_row_port, .walk_rows = ct_walk_rows_port, .round_row = ct_round_row_port,
        .store_row = ct_store_row_port, .canon_nan = ct_canon_nan_port, .gb_partials = ct_gb_partials_port,
        .gi_seq = ct_gi_seq_gen, .gw_seq = ct_gw_seq_gen,
        .gwc = ct_gwc_any, .gwc_pair = NULL, .gic_rows = ct_gic_rows_gen,
        .nar_transpose = ct_nar_port, .gwn_px = NULL, .gwn = ct_gwn_port, .gin = ct_gin_port,
    };
    return 0;
}
