/* _ukr_neon.c: the AArch64 Advanced SIMD (NEON) micro-kernels and their table (_ukr.h).
 *
 * Not written yet: every build compiles it to the stub below, and AArch64 runs the portable table.
 */
#include "_ukr.h"

int ct_ukr_init_neon(ct_ukr *U, const ct_ukr_opts *o) { (void)U; (void)o; return -1; }
