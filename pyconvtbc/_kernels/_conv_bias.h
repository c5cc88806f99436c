/* _conv_bias.h: gradBias = sum of grad_output over its two outer axes, in the order of CANN's ReduceSum
 * (the ascend950 kernel; docs/precision.md, "gradBias: ReduceSum's order").  Self-contained, ISA-free C; it
 * uses only _codes.h (dtype codes) and _fpround.h (the fp16/bf16 codecs).  Entry point: cb_reduce_sum().
 *
 * The order, per output channel c, over the R = T_out*B rows r = t*B + b of grad_output (fp32 adds):
 *   tiles:  R is cut into tiles of `tile_rows` rows; the last tile is padded with +0.0f rows to tile_rows.
 *   groups: the tiles are dealt in runs of `tiles_per_group` to groups (cores), in order.
 *   core:   a group of n tiles: pos = 1 if n <= 2 else the largest power of two below n; tail = n - pos.
 *           for i < pos: U = tile i (+ tile i+pos, added row by row, when i < tail); b_i = fold(U);
 *           the b_i enter a binary counter: with k = trailing one bits of i, a = b_i + cache[0] + ... +
 *           cache[k-1] (left to right), cache[k] = a.  The group's partial is cache[log2(pos)].
 *   final:  one group: its partial.  Several: fold(the partials in group order), with the stage-2 variant.
 *   fold(U) over its n rows: m = largest power of two <= n; U[r] += U[r+m] for r < n-m; then
 *           HALVING:  while m > 1: h = m/2, U[r] += U[r+h] for r < h, m = h;
 *           GROUPS16: log2(m) = 4q + e: q times, each run of 16 consecutive rows folds (halving, h = 8,4,2,1)
 *                     into one row (the runs' results in order); then the 2^e rows left fold by halving.
 *   variant: from dimA = the channel's UB tile width rounded up to `align`: GROUPS16 when 32 < dimA <= 64,
 *           HALVING otherwise.  Stage 1 tiles are `a_tile` channels wide, stage 2 tiles `a_tile2` channels.
 * All adds are IEEE fp32 round-to-nearest-even; grad_output fp16/bf16 values are widened exactly first. */
#ifndef PYCONVTBC_CONV_BIAS_H
#define PYCONVTBC_CONV_BIAS_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "_codes.h"
#include "_fpround.h"

enum { CB_HALVING = 0, CB_GROUPS16 = 1 };
enum { CB_CHUNK = 64 };     /* channels summed together (any chunk gives the same bits: channels are independent) */

typedef struct {
    const char *base;       /* grad_output (T_out, B, Cout) */
    int64_t s0, s1, s2;     /* byte strides */
    int dt;                 /* CT_DT_F32 / CT_DT_F16 / CT_DT_BF16 */
    int64_t T, B, C;
    int64_t tile_rows, tiles_per_group, a_tile, a_tile2, align;
} cb_args;

static inline int64_t cb_cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }
static inline int64_t cb_pow2_floor(int64_t n) { int64_t m = 1; while (m * 2 <= n) m *= 2; return m; }
static inline int cb_log2(int64_t n) { int k = 0; while (((int64_t)1 << k) < n) k++; return k; }

/* the split point of a core's tiles (FindNearestPower2 in the source): 1 for n <= 2, else the largest power of
 * two strictly below n */
static inline int64_t cb_bisection(int64_t n) { return n <= 2 ? 1 : cb_pow2_floor(n - 1); }

static inline int cb_variant(int64_t width, int64_t align) {
    int64_t d = cb_cdiv(width, align) * align;
    return (d > 32 && d <= 64) ? CB_GROUPS16 : CB_HALVING;
}

/* the variant of channel c when channels are tiled `tile` wide */
static inline int cb_variant_of(int64_t c, int64_t C, int64_t tile, int64_t align) {
    int64_t t0 = (c / tile) * tile, w = C - t0 < tile ? C - t0 : tile;
    return cb_variant(w, align);
}

static inline void cb_load_row(const cb_args *a, int64_t r, int64_t c0, int64_t n, float *out) {
    if (r >= a->T * a->B) { for (int64_t j = 0; j < n; j++) out[j] = 0.0f; return; }
    const char *p = a->base + (r / a->B) * a->s0 + (r % a->B) * a->s1 + c0 * a->s2;
    if (a->dt == CT_DT_F32 && a->s2 == 4) {
        memcpy(out, p, (size_t)n * 4);
    } else if (a->dt == CT_DT_F32) {
        for (int64_t j = 0; j < n; j++) { float f; memcpy(&f, p + j * a->s2, 4); out[j] = f; }
    } else if (a->dt == CT_DT_F16) {
        for (int64_t j = 0; j < n; j++) { uint16_t h; memcpy(&h, p + j * a->s2, 2); out[j] = pct_f16_bits_to_f32(h); }
    } else {
        for (int64_t j = 0; j < n; j++) { uint16_t h; memcpy(&h, p + j * a->s2, 2); out[j] = pct_bf16_bits_to_f32(h); }
    }
}

static inline void cb_add_rows(float *dst, const float *src, int64_t n) {
    for (int64_t j = 0; j < n; j++) dst[j] = dst[j] + src[j];
}

/* halving fold of the rows u[0..m-1] (m a power of two), row length w, row stride ld: result in u[0] */
static void cb_halve(float *u, int64_t m, int64_t w, int64_t ld) {
    for (int64_t h = m / 2; h >= 1; h /= 2)
        for (int64_t r = 0; r < h; r++) cb_add_rows(u + r * ld, u + (r + h) * ld, w);
}

/* fold(U) of the header comment: n rows of w channels (row stride ld); result in row 0 */
static void cb_fold(float *u, int64_t n, int64_t w, int64_t ld, int variant) {
    if (n <= 1) return;
    int64_t m = cb_pow2_floor(n);
    for (int64_t r = 0; r < n - m; r++) cb_add_rows(u + r * ld, u + (r + m) * ld, w);
    if (variant == CB_HALVING) { cb_halve(u, m, w, ld); return; }
    int q = cb_log2(m) / 4;
    for (int k = 0; k < q; k++) {
        int64_t L = m / 16;
        for (int64_t g = 0; g < L; g++) {
            cb_halve(u + 16 * g * ld, 16, w, ld);
            if (g) memcpy(u + g * ld, u + 16 * g * ld, (size_t)w * sizeof(float));
        }
        m = L;
    }
    cb_halve(u, m, w, ld);
}

/* one group's partial for channels [c0, c0+w): tiles [t0, t0+n) (n >= 1).  buf: 2*tile_rows*w floats, cache:
 * (log2(pos)+1)*w floats; result in out[w] */
static void cb_group(const cb_args *a, int64_t c0, int64_t w, int v1, int64_t t0, int64_t n,
                     float *buf, float *cache, float *out) {
    int64_t tr = a->tile_rows, pos = cb_bisection(n), tail = n - pos;
    float *U = buf, *V = buf + tr * w;
    for (int64_t i = 0; i < pos; i++) {
        for (int64_t r = 0; r < tr; r++) cb_load_row(a, (t0 + i) * tr + r, c0, w, U + r * w);
        if (i < tail) {
            for (int64_t r = 0; r < tr; r++) cb_load_row(a, (t0 + i + pos) * tr + r, c0, w, V + r * w);
            for (int64_t r = 0; r < tr; r++) cb_add_rows(U + r * w, V + r * w, w);
        }
        cb_fold(U, tr, w, w, v1);
        int k = 0;
        while ((i >> k) & 1) k++;                          /* trailing one bits of i */
        for (int j = 0; j < k; j++) cb_add_rows(U, cache + j * w, w);
        memcpy(cache + k * w, U, (size_t)w * sizeof(float));
    }
    memcpy(out, cache + cb_log2(pos) * w, (size_t)w * sizeof(float));
}

/* gradBias in ReduceSum's order: out[C] fp32 sums.  Returns 0, or -1 when memory ran out or an argument is
 * out of range (the caller checks these first; this is the last guard). */
static int cb_reduce_sum(const cb_args *a, float *out) {
    int64_t R = a->T * a->B, C = a->C;
    if (C <= 0) return 0;
    if (R <= 0) { for (int64_t c = 0; c < C; c++) out[c] = 0.0f; return 0; }
    if (a->tile_rows < 1 || a->tiles_per_group < 1 || a->a_tile < 1 || a->a_tile2 < 1 || a->align < 1) return -1;
    int64_t nt = cb_cdiv(R, a->tile_rows), G = cb_cdiv(nt, a->tiles_per_group);
    int64_t pos = cb_bisection(a->tiles_per_group < nt ? a->tiles_per_group : nt);
    float *buf = (float *)malloc(sizeof(float) * (size_t)CB_CHUNK *
                                 (size_t)(2 * a->tile_rows + cb_log2(pos) + 2 + G));
    if (!buf) return -1;
    float *cache = buf + 2 * a->tile_rows * CB_CHUNK, *parts = cache + (cb_log2(pos) + 1) * CB_CHUNK;
    for (int64_t c0 = 0; c0 < C;) {
        /* a run of channels with the same two variants, at most CB_CHUNK wide */
        int v1 = cb_variant_of(c0, C, a->a_tile, a->align), v2 = cb_variant_of(c0, C, a->a_tile2, a->align);
        int64_t w = 1;
        while (c0 + w < C && w < CB_CHUNK && cb_variant_of(c0 + w, C, a->a_tile, a->align) == v1 &&
               cb_variant_of(c0 + w, C, a->a_tile2, a->align) == v2) w++;
        for (int64_t g = 0; g < G; g++) {
            int64_t t0 = g * a->tiles_per_group, n = nt - t0 < a->tiles_per_group ? nt - t0 : a->tiles_per_group;
            cb_group(a, c0, w, v1, t0, n, buf, cache, parts + g * w);
        }
        cb_fold(parts, G, w, w, v2);
        memcpy(out + c0, parts, (size_t)w * sizeof(float));
        c0 += w;
    }
    free(buf);
    return 0;
}

#endif /* PYCONVTBC_CONV_BIAS_H */
