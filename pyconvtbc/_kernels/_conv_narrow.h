/* _conv_narrow.h: the "cube" form for narrow channels (Cin, Cout <= CT_NW), ascend910b / ascend910 order (and
 * gradInput on ascend950, whose gradInput order is the same: P->narrow_gi).
 *
 * Included by _conv_gemm.h after _conv_cube.h.  With a few channels the cube kernels, whose vector lanes run
 * along the channels, leave most lanes idle (2 of 16 at C = 2): the per-item gradWeight chains and the
 * gradInput blocks then cost 2-3x the sequential form.  Here the lanes run along the other axis instead:
 *   gradWeight: lanes = batch items b (an item block of CT_NB; a task runs one or more blocks).  Item b's chain
 *     for (k, ci, co) is the model's: blocks of k0 t's aligned at t = 0 (t's whose X row lies outside the
 *     sequence skipped), each block an fp32 FMA chain from +0, added into the chain (started at +0) with one
 *     fp32 add.  The chains are stored at P->pcb, [item block][k][ci][co][CT_NB], and a post task adds them into
 *     the output (from +0) in the order perm (b order when NULL), one fp32 add each.
 *   gradInput: lanes = rows r = t*B + b.  Row r's chain over the blocks (g, k) (channel group g of k0 outer,
 *     tap k inner, taps whose DY row lies outside the sequence skipped: a masked add), each block an FMA chain
 *     from +0 over the group's channels in order, added into the chain (from +0).
 * Per element these are exactly the operations of ct_gwc_gen / ct_gic_gen in the same order, so results are
 * bitwise those of the other cube kernels on every instruction set (tests/test_accumulation.py).
 *
 * DY is packed channel-major: DYp as [co][nlo] (rows r = t*B + b, rounded to the compute precision; channel c
 * at c*nlo, nlo = RO rounded up to 16, plus 16, so that the channels are not a power of two apart and do not
 * alias in L1), in the workspace region of the row-major panels; gradBias's partial sums are taken in the DY
 * pack as on the other paths.  x has no panel: each gradWeight task copies the x rows of its items, a chunk at
 * a time, into its thread's buffer (channel-major, CT_NB items a row).  Wp is the cube forms' block-order weight
 * panel.
 */
#ifndef PYCONVTBC_CONV_NARROW_H
#define PYCONVTBC_CONV_NARROW_H

/* (CT_NW, CT_NB, CT_NR: _conv_gemm.h) */
/* ------------------------------------------------------------------------------------------------ */
/* packs: rows decoded and rounded as on the other paths, then stored channel-major                 */
/* ------------------------------------------------------------------------------------------------ */
/* [nr][C] -> dst[c*ld + i] (to = 1), or src[c*ld + i] -> [nr][C] (to = 0): C <= CT_NW channels, fp32.  The vector
 * paths gather a channel's 16 (8) rows, or a run of 16 (8) row-major floats, from L1. */
static void ct_nar_port(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    for (int64_t i = 0; i < nr; i++)
        for (int64_t c = 0; c < C; c++) {
            if (to) d[c * ld + i] = v[i * C + c];
            else v[i * C + c] = d[c * ld + i];
        }
}
#if CT_X86
/* The permute network of the 8-channel transposes below: 8 vectors a[] in, out[m] (m = 4h + 2s + t) out, by
 * three rounds of two-source permutes with the index tables tb[round][2][16]: round 1 pairs a[2g], a[2g+1] into
 * R[g][h], round 2 pairs R[2q][h], R[2q+1][h] into S[q][h][s], round 3 pairs S[0][h][s], S[1][h][s] into
 * out[4h + 2s + t].  What each vector holds is the tables' business. */
CT_I512 void ct_perm8_512(const __m512 *a, const __m512i tb[3][2], __m512 *out) {
    __m512 R[4][2], S[2][2][2];
    _Pragma("GCC unroll 4") for (int g = 0; g < 4; g++)
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            R[g][h] = _mm512_permutex2var_ps(a[2 * g], tb[0][h], a[2 * g + 1]);
    _Pragma("GCC unroll 2") for (int q = 0; q < 2; q++)
        _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
            _Pragma("GCC unroll 2") for (int s = 0; s < 2; s++)
                S[q][h][s] = _mm512_permutex2var_ps(R[2 * q][h], tb[1][s], R[2 * q + 1][h]);
    _Pragma("GCC unroll 2") for (int h = 0; h < 2; h++)
        _Pragma("GCC unroll 2") for (int s = 0; s < 2; s++)
            _Pragma("GCC unroll 2") for (int t = 0; t < 2; t++)
                out[4 * h + 2 * s + t] = _mm512_permutex2var_ps(S[0][h][s], tb[2][t], S[1][h][s]);
}
CT_I512 void ct_perm8_tables(const int32_t t[3][2][16], __m512i tb[3][2]) {
    for (int r = 0; r < 3; r++)
        for (int k = 0; k < 2; k++) tb[r][k] = _mm512_loadu_si512(t[r][k]);
}
/* 8 channels, channel-major d[c*ld + i] (16 rows i a vector) -> row-major v[i*8 + c]: the permute network
 * instead of gathers (a gather from 8 rows ld apart touches 16 cache lines; this runs at about twice the speed
 * from the L1 tile of gradInput's chains).  Round 1 pairs channels (2g, 2g+1) into [row][2] for rows 8h..8h+7;
 * round 2 pairs those into [row][4] for rows 4s..4s+3 of the half; round 3 into [row][8], 2 rows a vector
 * (out[m]: rows 2m, 2m + 1).  The index tables are built from these definitions once per call. */
CT_I512 void ct_nar_out8_512(float *v, int64_t full, const float *d, int64_t ld) {
    int32_t t[3][2][16];
    for (int h = 0; h < 2; h++)
        for (int r8 = 0; r8 < 8; r8++)
            for (int c2 = 0; c2 < 2; c2++) t[0][h][r8 * 2 + c2] = c2 * 16 + 8 * h + r8;
    for (int s = 0; s < 2; s++)
        for (int r4 = 0; r4 < 4; r4++)
            for (int c4 = 0; c4 < 4; c4++) t[1][s][r4 * 4 + c4] = (c4 >> 1) * 16 + (4 * s + r4) * 2 + (c4 & 1);
    for (int u = 0; u < 2; u++)
        for (int r2 = 0; r2 < 2; r2++)
            for (int c8 = 0; c8 < 8; c8++) t[2][u][r2 * 8 + c8] = (c8 >> 2) * 16 + (2 * u + r2) * 4 + (c8 & 3);
    __m512i tb[3][2];
    ct_perm8_tables(t, tb);
    for (int64_t i = 0; i < full; i += 16) {
        __m512 a[8], o[8];
        _Pragma("GCC unroll 8") for (int c = 0; c < 8; c++) a[c] = _mm512_loadu_ps(d + c * ld + i);
        ct_perm8_512(a, tb, o);
        _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) _mm512_storeu_ps(v + (i + 2 * m) * 8, o[m]);
    }
}
/* The inverse: n runs of 16 rows of 8 channels, run i at v + i*rs, into d[c*ld + 16*i + r].  a[q] holds rows 2q,
 * 2q+1; round 1 gives channels 4h..4h+3 of rows 4g..4g+3 as [channel][row], round 2 channels 4h+2s, 4h+2s+1 of
 * rows 8q..8q+7, round 3 channel m = 4h+2s+t of the 16 rows. */
CT_I512 void ct_nar_in8_512(const float *v, int64_t rs, int64_t n, float *d, int64_t ld) {
    int32_t t[3][2][16];
    for (int h = 0; h < 2; h++)
        for (int cc = 0; cc < 4; cc++)
            for (int rr = 0; rr < 4; rr++) t[0][h][cc * 4 + rr] = rr * 8 + 4 * h + cc;
    for (int s = 0; s < 2; s++)
        for (int u = 0; u < 2; u++)
            for (int r8 = 0; r8 < 8; r8++) t[1][s][u * 8 + r8] = (r8 >> 2) * 16 + (2 * s + u) * 4 + (r8 & 3);
    for (int u = 0; u < 2; u++)
        for (int r = 0; r < 16; r++) t[2][u][r] = (r >> 3) * 16 + u * 8 + (r & 7);
    __m512i tb[3][2];
    ct_perm8_tables(t, tb);
    for (int64_t i = 0; i < n; i++) {
        __m512 a[8], o[8];
        _Pragma("GCC unroll 8") for (int q = 0; q < 8; q++) a[q] = _mm512_loadu_ps(v + i * rs + 16 * q);
        ct_perm8_512(a, tb, o);
        _Pragma("GCC unroll 8") for (int m = 0; m < 8; m++) _mm512_storeu_ps(d + m * ld + 16 * i, o[m]);
    }
}
/* 2 or 4 channels, by two-source permutes as above.  In: n runs of 16 rows [16][C] (run i at v + i*rs) into
 * d[c*ld + 16*i + r].  C = 2: channel c of the 16 rows = floats 2r + c of the run's two vectors.  C = 4: round 1
 * gives channels 2h, 2h+1 of rows 8p..8p+7 as [channel][row] from the run's vectors 2p, 2p+1, round 2 channel
 * 2h+u of the 16 rows. */
CT_I512 void ct_nar_in_small_512(const float *v, int64_t rs, int64_t n, int64_t C, float *d, int64_t ld) {
    int32_t t[2][2][16];
    for (int h = 0; h < 2; h++)
        for (int l = 0; l < 16; l++) {
            t[0][h][l] = C == 2 ? 2 * l + h : (l & 7) < 4 ? (l & 7) * 4 + 2 * h + (l >> 3)
                                                          : 16 + ((l & 7) - 4) * 4 + 2 * h + (l >> 3);
            t[1][h][l] = (l >> 3) * 16 + h * 8 + (l & 7);
        }
    __m512i i0[2], i1[2];
    for (int h = 0; h < 2; h++) {
        i0[h] = _mm512_loadu_si512(t[0][h]);
        i1[h] = _mm512_loadu_si512(t[1][h]);
    }
    for (int64_t i = 0; i < n; i++) {
        const float *r = v + i * rs;
        if (C == 2) {
            __m512 a0 = _mm512_loadu_ps(r), a1 = _mm512_loadu_ps(r + 16);
            for (int c = 0; c < 2; c++) _mm512_storeu_ps(d + c * ld + 16 * i, _mm512_permutex2var_ps(a0, i0[c], a1));
            continue;
        }
        __m512 a[4], R[2][2];
        for (int q = 0; q < 4; q++) a[q] = _mm512_loadu_ps(r + 16 * q);
        for (int p = 0; p < 2; p++)
            for (int h = 0; h < 2; h++) R[p][h] = _mm512_permutex2var_ps(a[2 * p], i0[h], a[2 * p + 1]);
        for (int h = 0; h < 2; h++)
            for (int u = 0; u < 2; u++)
                _mm512_storeu_ps(d + (2 * h + u) * ld + 16 * i, _mm512_permutex2var_ps(R[0][h], i1[u], R[1][h]));
    }
}
/* The inverse: d[c*ld + i] (16 rows a vector) -> row-major v[i*C + c], rows [0, full).  C = 2: rows 8m..8m+7 as
 * [row][2] from the two channels.  C = 4: round 1 as C = 2 for the channel pairs (0, 1) and (2, 3), round 2 rows
 * 4q..4q+3 as [row][4] from the pairs' vectors of rows 8(q/2).. */
CT_I512 void ct_nar_out_small_512(float *v, int64_t full, const float *d, int64_t ld, int64_t C) {
    int32_t t[2][2][16];
    for (int m = 0; m < 2; m++)
        for (int l = 0; l < 16; l++) {
            t[0][m][l] = (l & 1) * 16 + 8 * m + (l >> 1);
            t[1][m][l] = ((l & 3) >> 1) * 16 + (m * 4 + (l >> 2)) * 2 + (l & 1);
        }
    __m512i i0[2], i1[2];
    for (int m = 0; m < 2; m++) {
        i0[m] = _mm512_loadu_si512(t[0][m]);
        i1[m] = _mm512_loadu_si512(t[1][m]);
    }
    for (int64_t i = 0; i < full; i += 16) {
        if (C == 2) {
            __m512 b0 = _mm512_loadu_ps(d + i), b1 = _mm512_loadu_ps(d + ld + i);
            for (int m = 0; m < 2; m++) _mm512_storeu_ps(v + i * 2 + 16 * m, _mm512_permutex2var_ps(b0, i0[m], b1));
            continue;
        }
        __m512 b[4], S[2][2];
        for (int c = 0; c < 4; c++) b[c] = _mm512_loadu_ps(d + c * ld + i);
        for (int h = 0; h < 2; h++)
            for (int m = 0; m < 2; m++) S[h][m] = _mm512_permutex2var_ps(b[2 * h], i0[m], b[2 * h + 1]);
        for (int q = 0; q < 4; q++)
            _mm512_storeu_ps(v + i * 4 + 16 * q, _mm512_permutex2var_ps(S[0][q >> 1], i1[q & 1], S[1][q >> 1]));
    }
}
static CT_T512 void ct_nar_512(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    int64_t full = nr / 16 * 16;
    if (to && C == 8) {
        ct_nar_in8_512(v, 128, full / 16, d, ld);
    } else if (to && (C == 2 || C == 4)) {
        ct_nar_in_small_512(v, 16 * C, full / 16, C, d, ld);
    } else if (to) {
        __m512i idx = _mm512_mullo_epi32(iota, _mm512_set1_epi32((int)C));
        for (int64_t i = 0; i < full; i += 16)
            for (int64_t c = 0; c < C; c++)
                _mm512_storeu_ps(d + c * ld + i, _mm512_i32gather_ps(idx, v + i * C + c, 4));
    } else if (C == 8) {
        ct_nar_out8_512(v, full, d, ld);
    } else if (C == 2 || C == 4) {
        ct_nar_out_small_512(v, full, d, ld, C);
    } else {
        /* floats e = 16m + j of a run of 16 rows (16*C floats): row e / C, channel e % C */
        __m512i idx[CT_NW];
        for (int64_t m = 0; m < C; m++) {
            int32_t t[16];
            for (int j = 0; j < 16; j++) t[j] = (int32_t)(((16 * m + j) % C) * ld + (16 * m + j) / C);
            idx[m] = _mm512_loadu_si512(t);
        }
        for (int64_t i = 0; i < full; i += 16)
            for (int64_t m = 0; m < C; m++)
                _mm512_storeu_ps(v + i * C + 16 * m, _mm512_i32gather_ps(idx[m], d + i, 4));
    }
    ct_nar_port(to, v + full * C, nr - full, C, d + full, ld);
}
static CT_T256 void ct_nar_256(int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    int64_t full = nr / 8 * 8;
    if (to) {
        __m256i idx = _mm256_mullo_epi32(iota, _mm256_set1_epi32((int)C));
        for (int64_t i = 0; i < full; i += 8)
            for (int64_t c = 0; c < C; c++)
                _mm256_storeu_ps(d + c * ld + i, _mm256_i32gather_ps(v + i * C + c, idx, 4));
    } else {
        __m256i idx[CT_NW];
        for (int64_t m = 0; m < C; m++) {
            int32_t t[8];
            for (int j = 0; j < 8; j++) t[j] = (int32_t)(((8 * m + j) % C) * ld + (8 * m + j) / C);
            idx[m] = _mm256_loadu_si256((const __m256i *)t);
        }
        for (int64_t i = 0; i < full; i += 8)
            for (int64_t m = 0; m < C; m++)
                _mm256_storeu_ps(v + i * C + 8 * m, _mm256_i32gather_ps(d + i, idx[m], 4));
    }
    ct_nar_port(to, v + full * C, nr - full, C, d + full, ld);
}
#endif
static void ct_nar_transpose(int isa, int to, float *v, int64_t nr, int64_t C, float *d, int64_t ld) {
    if (C == 1) {
        if (to) memcpy(d, v, (size_t)nr * 4);
        else memcpy(v, d, (size_t)nr * 4);
        return;
    }
#if CT_X86
    if (isa == CT_ISA_AVX512) { ct_nar_512(to, v, nr, C, d, ld); return; }
    if (isa == CT_ISA_AVX2) { ct_nar_256(to, v, nr, C, d, ld); return; }
#endif
    (void)isa;
    ct_nar_port(to, v, nr, C, d, ld);
}

/* rows [r, r + nr) of source S (C channels) into dst[c*ld + i], rounded to the compute precision; v: the rows
 * decoded (tmp), or (dense fp32 sources) the source's own rows, which are then read in place */
static void ct_nar_rows(const ct_plan *P, const ct_src *S, int dense, int64_t C, int64_t r, int64_t nr,
                        const float *v, float *dst, int64_t ld) {
    int rc = ct_round_for(S->dt, P->compute);
    if (!dense) ct_round_row(P->isa, (float *)v, nr * C, rc, P->hbits, P->hrnd);
    ct_nar_transpose(P->isa, 1, (float *)v, nr, C, dst + r, ld);
    if (dense && rc != CT_C_FP32)
        for (int64_t c = 0; c < C; c++) ct_round_row(P->isa, dst + c * ld + r, nr, rc, P->hbits, P->hrnd);
}

/* the DY pack's steps: 1024 rows of 8 channels or fewer (4 gb partial sums in flight: an add's latency) */
#define CT_NAR_TMP (1024 * 8)
static void ct_nar_pack_dy(const ct_plan *P, int64_t task) {
    int64_t r0 = task * CT_PR, r1 = ct_min(P->RO, r0 + CT_PR), C = P->Cout;
    int64_t step = ct_max(CT_GBR, CT_NAR_TMP / ct_max(1, C) / CT_GBR * CT_GBR);
    int dense = ct_src_dense(&P->dy, P->T_out, P->B, C);
    float tmp[CT_NAR_TMP];
    float *gout = P->gbp + (task * (CT_PR / CT_GBR)) * C;
    for (int64_t rr = r0; rr < r1; rr += step) {
        int64_t nr = ct_min(step, r1 - rr);
        const float *v = dense ? (const float *)(uintptr_t)P->dy.base + rr * C : tmp;
        if (!dense)
            for (int64_t r2 = rr; r2 < rr + nr; r2 += CT_RB)
                ct_decode_rows(P, &P->dy, C, r2, ct_min(CT_RB, rr + nr - r2), 0, C, tmp + (r2 - rr) * C);
        ct_gb_partials(P->isa, v, nr, C, gout + ((rr - r0) / CT_GBR) * C, C);   /* before the rounding */
        ct_nar_rows(P, &P->dy, dense, C, rr, nr, v, P->DYp, P->nlo);
    }
}

/* rows [r0, r1) of x (source S: T_in time steps of P->B items, C channels) into dst[c*ld + r], rounded to the
 * compute precision: the backward's X pack, and the forward's (_conv_fwd.h) */
static void ct_nar_pack_src(const ct_plan *P, const ct_src *S, int64_t T_in, int64_t C, int64_t r0, int64_t r1,
                            float *dst, int64_t ld) {
    int dense = ct_src_dense(S, T_in, P->B, C);
    float tmp[CT_RB * CT_NW];
    for (int64_t rr = r0; rr < r1; rr += CT_RB) {
        int64_t nr = ct_min(CT_RB, r1 - rr);
        const float *v = dense ? (const float *)(uintptr_t)S->base + rr * C : tmp;
        if (!dense) ct_decode_rows(P, S, C, rr, nr, 0, C, tmp);
        ct_nar_rows(P, S, dense, C, rr, nr, v, dst, ld);
    }
}
#if CT_X86
/* n rows of 16 items, row i at v + i*rs ([16][C] fp32), into d[c*ld + 16*i + l]: one gather a channel (8
 * channels: permutes) */
static CT_T512 void ct_gwn_px_512(const float *v, int64_t rs, int64_t n, int64_t C, float *d, int64_t ld) {
    if (C == 8) { ct_nar_in8_512(v, rs, n, d, ld); return; }
    if (C == 2 || C == 4) { ct_nar_in_small_512(v, rs, n, C, d, ld); return; }
    const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                           _mm512_set1_epi32((int)C));
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            _mm512_storeu_ps(d + c * ld + 16 * i, _mm512_i32gather_ps(idx, v + i * rs + c, 4));
}
/* the same on AVX2: two gathers of 8 items a channel */
static CT_T256 void ct_gwn_px_256(const float *v, int64_t rs, int64_t n, int64_t C, float *d, int64_t ld) {
    const __m256i idx = _mm256_mullo_epi32(_mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), _mm256_set1_epi32((int)C));
    for (int64_t i = 0; i < n; i++)
        for (int64_t c = 0; c < C; c++)
            for (int64_t h = 0; h < 2; h++)
                _mm256_storeu_ps(d + c * ld + 16 * i + 8 * h, _mm256_i32gather_ps(v + i * rs + 8 * h * C + c, idx, 4));
}
#endif
/* x rows [xa, xz) of items [b0, b0 + nb) (nb <= CT_NB) into d[ci*ld + (x - xa)*CT_NB + l], rounded to the
 * compute precision: a gradWeight task's own copy of the x rows of one chunk (lanes l beyond nb are not written) */
static void ct_gwn_pack_x(const ct_plan *P, int64_t b0, int64_t nb, int64_t xa, int64_t xz, float *d, int64_t ld) {
    const ct_src *S = &P->x;
    int64_t C = P->Cin, B = P->B;
    int dense = ct_src_dense(S, P->T_in, B, C), rc = ct_round_for(S->dt, P->compute);
#if CT_X86
    if (dense && rc == CT_C_FP32 && nb == 16 && P->isa != CT_ISA_PORTABLE) {
        const float *v = (const float *)(uintptr_t)S->base + (xa * B + b0) * C;
        if (P->isa == CT_ISA_AVX512) ct_gwn_px_512(v, B * C, xz - xa, C, d, ld);
        else ct_gwn_px_256(v, B * C, xz - xa, C, d, ld);
        return;
    }
#endif
    float tmp[CT_NB * CT_NW];
    for (int64_t x = xa; x < xz; x++) {
        int64_t r = x * B + b0;
        const float *v = dense ? (const float *)(uintptr_t)S->base + r * C : tmp;
        if (!dense) ct_decode_rows(P, S, C, r, nb, 0, C, tmp);
        if (rc != CT_C_FP32) {
            if (dense) memcpy(tmp, v, (size_t)(nb * C) * 4);
            ct_round_row(P->isa, tmp, nb * C, rc, P->hbits, P->hrnd);
            v = tmp;
        }
        ct_nar_transpose(P->isa, 1, (float *)(uintptr_t)v, nb, C, d + (x - xa) * CT_NB, ld);
    }
}

/* ------------------------------------------------------------------------------------------------ */
/* gradWeight: chains of nb (<= CT_NB) items, t in [ta, tz), for mi ci x mo co                        */
/*   X row of t: X + xo + t*xs (+ i*ldx for ci i), DY row: Y + t*B (+ j*ldy); chain (i, j) of item l    */
/*   continues from D[i*ldi + j*ldo + l] and is stored back there                                      */
/* ------------------------------------------------------------------------------------------------ */
static void ct_gwn_port(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                        int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D,
                        int64_t ldi, int64_t ldo) {
    for (int64_t i = 0; i < mi; i++)
        for (int64_t j = 0; j < mo; j++)
            for (int64_t l = 0; l < nb; l++) {
                float c = D[i * ldi + j * ldo + l];
                for (int64_t t = ta; t < tz;) {
                    int64_t te = ct_min(tz, (t / k0 + 1) * k0);
                    float s = 0.0f;
                    for (; t < te; t++) s = fmaf(X[xo + t * xs + i * ldx + l], Y[t * B + j * ldy + l], s);
                    c = c + s;
                }
                D[i * ldi + j * ldo + l] = c;
            }
}

#if CT_X86
/* AVX-512: 16 items a vector; MI ci x MO co block sums in registers (up to 16), the chains in D (one load / add /
 * store per block).  FULL: all 16 lanes valid, plain loads and stores (the masked ones made gradWeight about 20%
 * slower at (512, 32, 8, 8, 3, 1)) */
CT_I512 void ct_gwn_body_512(const int MI, const int MO, const int FULL, const float *X, int64_t xo, int64_t xs,
                             int64_t ldx, const float *Y, int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0,
                             __mmask16 m, float *D, int64_t ldi, int64_t ldo) {
    __m512 s[4][4], x[4], y[4];
    for (int64_t t = ta; t < tz;) {
        int64_t te = ct_min(tz, (t / k0 + 1) * k0);
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm512_setzero_ps();
        for (; t < te; t++) {
            const float *xp = X + xo + t * xs, *yp = Y + t * B;
            _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
                x[i] = FULL ? _mm512_loadu_ps(xp + i * ldx) : _mm512_maskz_loadu_ps(m, xp + i * ldx);
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++)
                y[j] = FULL ? _mm512_loadu_ps(yp + j * ldy) : _mm512_maskz_loadu_ps(m, yp + j * ldy);
            _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
                _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm512_fmadd_ps(x[i], y[j], s[i][j]);
        }
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) {
                float *d = D + i * ldi + j * ldo;
                if (FULL) _mm512_storeu_ps(d, _mm512_add_ps(_mm512_loadu_ps(d), s[i][j]));
                else _mm512_mask_storeu_ps(d, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, d), s[i][j]));
            }
    }
}
static CT_T512 void ct_gwn_512(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                               int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D,
                               int64_t ldi, int64_t ldo) {
    __mmask16 m = ct_mask16(nb);
    switch (mi * 8 + mo) {
#define CT_GWN512(MI, MO) \
        case MI * 8 + MO: \
            if (nb == 16) ct_gwn_body_512(MI, MO, 1, X, xo, xs, ldx, Y, ldy, B, ta, tz, k0, m, D, ldi, ldo); \
            else ct_gwn_body_512(MI, MO, 0, X, xo, xs, ldx, Y, ldy, B, ta, tz, k0, m, D, ldi, ldo); \
            break;
        CT_GWN512(1, 1) CT_GWN512(1, 2) CT_GWN512(1, 3) CT_GWN512(1, 4)
        CT_GWN512(2, 1) CT_GWN512(2, 2) CT_GWN512(2, 3) CT_GWN512(2, 4)
        CT_GWN512(3, 1) CT_GWN512(3, 2) CT_GWN512(3, 3) CT_GWN512(3, 4)
        CT_GWN512(4, 1) CT_GWN512(4, 2) CT_GWN512(4, 3) CT_GWN512(4, 4)
#undef CT_GWN512
        default: break;
    }
}

/* AVX2: 8 items a vector; block sums in registers, the chains in D (one load / add / store per block) */
CT_I256 void ct_gwn_body_256(const int MI, const int MO, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                             int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t n, float *D,
                             int64_t ldi, int64_t ldo) {
    __m256 s[2][4], x[2], y[4];
    __m256i m = ct_mask8(n);
    for (int64_t t = ta; t < tz;) {
        int64_t te = ct_min(tz, (t / k0 + 1) * k0);
        _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm256_setzero_ps();
        for (; t < te; t++) {
            const float *xp = X + xo + t * xs, *yp = Y + t * B;
            _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++) x[i] = ct_ld8(xp + i * ldx, n, m);
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) y[j] = ct_ld8(yp + j * ldy, n, m);
            _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
                _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) s[i][j] = _mm256_fmadd_ps(x[i], y[j], s[i][j]);
        }
        _Pragma("GCC unroll 2") for (int i = 0; i < MI; i++)
            _Pragma("GCC unroll 4") for (int j = 0; j < MO; j++) {
                float *d = D + i * ldi + j * ldo;
                ct_st8(d, n, m, _mm256_add_ps(ct_ld8(d, n, m), s[i][j]));
            }
    }
}
static CT_T256 void ct_gwn_256(int64_t mi, int64_t mo, const float *X, int64_t xo, int64_t xs, int64_t ldx, const float *Y,
                               int64_t ldy, int64_t B, int64_t ta, int64_t tz, int64_t k0, int64_t nb, float *D,
                               int64_t ldi, int64_t ldo) {
    for (int64_t l = 0; l < nb; l += 8) {    /* two halves of 8 items */
        int64_t n = ct_min(8, nb - l);
        switch (mi * 8 + mo) {
#define CT_GWN256(MI, MO) \
            case MI * 8 + MO: ct_gwn_body_256(MI, MO, X + l, xo, xs, ldx, Y + l, ldy, B, ta, tz, k0, n, D + l, ldi, ldo); break;
            CT_GWN256(1, 1) CT_GWN256(1, 2) CT_GWN256(1, 3) CT_GWN256(1, 4)
            CT_GWN256(2, 1) CT_GWN256(2, 2) CT_GWN256(2, 3) CT_GWN256(2, 4)
#undef CT_GWN256
            default: break;
        }
    }
}
#endif

/* gw item block blk: items [b0, b0 + CT_NB), every (k, ci, co) chain of them, in the block's own region of
 * P->pcb (chain e = (k*Cin + ci)*Cout + co of item b0 + l at pcb[blk*nw*CT_NB + e*CT_NB + l]).  The chains run
 * through t in chunks of whole blocks (about 32 t's); the x rows of a chunk's items are copied into xb (the
 * thread's buffer: [ci][P->nli], CT_NB floats a row), where they stay in L1 while every tap and tile reads them.
 * Only DY's rows come from the shared panel. */
static void ct_gwn_block(const ct_plan *P, int64_t blk, float *xb) {
    int64_t B = P->B, b0 = blk * CT_NB, nb = ct_min(CT_NB, B - b0), Cin = P->Cin, Cout = P->Cout, K = P->K;
    int64_t TC = ct_gwn_tc(P->k0), nw = K * Cin * Cout, ldx = P->nli;
    float *D0 = P->pcb + blk * nw * CT_NB;
    memset(D0, 0, (size_t)(nw * CT_NB) * 4);
    const float *Y = P->DYp + b0;
    int mw = P->isa == CT_ISA_PORTABLE ? 2 : 4; /* co per register tile */
    int mh = P->isa == CT_ISA_AVX512 ? 4 : 2;   /* ci per register tile */
    for (int64_t T0 = 0; T0 < P->T_out; T0 += TC) {
        if (ct_stop(P)) return;
        /* x rows t + k - pad of the chunk's t's, inside the sequence */
        int64_t xa = ct_max(0, T0 - P->pad), xz = ct_min(P->T_in, T0 + TC + K - 1 - P->pad);
        if (xa >= xz) continue;
        ct_gwn_pack_x(P, b0, nb, xa, xz, xb, ldx);
        for (int64_t k = 0; k < K; k++) {
            int64_t ta = ct_max(T0, P->pad - k), tz = ct_min(T0 + TC, ct_min(P->T_out, P->T_in + P->pad - k));
            if (ta >= tz) continue;
            int64_t xo = (k - P->pad - xa) * CT_NB;     /* x row of t: t + k - pad, at (t + k - pad - xa)*CT_NB */
            for (int64_t ci = 0; ci < Cin; ci += mh) {
                int64_t mi = ct_min(mh, Cin - ci);
                for (int64_t co = 0; co < Cout; co += mw) {
                    int64_t mo = ct_min(mw, Cout - co);
                    const float *Xi = xb + ci * ldx, *Yj = Y + co * P->nlo;
                    float *Dij = D0 + ((k * Cin + ci) * Cout + co) * CT_NB;
#if CT_X86
                    if (P->isa == CT_ISA_AVX512) {
                        ct_gwn_512(mi, mo, Xi, xo, CT_NB, ldx, Yj, P->nlo, B, ta, tz, P->k0, nb, Dij, Cout * CT_NB,
                                   CT_NB);
                        continue;
                    }
                    if (P->isa == CT_ISA_AVX2) {
                        ct_gwn_256(mi, mo, Xi, xo, CT_NB, ldx, Yj, P->nlo, B, ta, tz, P->k0, nb, Dij, Cout * CT_NB,
                                   CT_NB);
                        continue;
                    }
#endif
                    ct_gwn_port(mi, mo, Xi, xo, CT_NB, ldx, Yj, P->nlo, B, ta, tz, P->k0, nb, Dij, Cout * CT_NB,
                                CT_NB);
                }
            }
        }
    }
}

/* gw task: item blocks task, task + n_gw, ... */
static void ct_gwn_task(const ct_plan *P, int64_t task, float *xb) {
    for (int64_t j = task; j < ct_cdiv(P->B, CT_NB); j += P->n_gw) ct_gwn_block(P, j, xb);
}
/* post task: gw elements [e0, e0 + CT_TREE_CHUNK): the B item chains added into +0 in the order perm, then cast */
static void ct_gwn_finish(const ct_plan *P, int64_t task) {
    int64_t total = P->K * P->Cin * P->Cout, e0 = task * CT_TREE_CHUNK, n = ct_min(CT_TREE_CHUNK, total - e0);
    float acc[CT_TREE_CHUNK];
    for (int64_t e = 0; e < n; e++) {
        const float *ch = P->pcb + (e0 + e) * CT_NB;
        float s = 0.0f;
        for (int64_t bi = 0; bi < P->B; bi++) {
            int64_t b = P->perm ? P->perm[bi] : bi;
            s = s + ch[(b / CT_NB) * total * CT_NB + b % CT_NB];
        }
        acc[e] = s;
    }
    int64_t es = ct_dt_size(P->gw_dt);
    ct_store_row(P->isa, acc, n, P->gw + e0 * es, P->gw_dt, CT_C_FP32, P->hif8_rnd, P->saturate);
}

/* ------------------------------------------------------------------------------------------------ */
/* gradInput: rows [r0, r0 + nr) x every ci; the chain of row r over blocks (g, k), tap k valid for rows  */
/*   t*B + b with 0 <= t + pad - k < T_out; DY of row r for tap k: DYp + co*nlo + r + (pad - k)*B;        */
/*   weights W(k, ci, co) at Wp[(ct_wblk(...) + co - lo) * Cin + ci]; chain (ci, row r) to D[ci*ldd + r-r0] */
/* ------------------------------------------------------------------------------------------------ */
/* the vector drivers' rows for tap k: [*va, *vz), those whose DY row t + pad - k is in the sequence (and below
 * rend); the portable driver checks the same per row.  The forward (gin_fwd): rows t < T_out whose x row
 * t + k - pad is in [0, T_in). */
static inline void ct_gin_valid(const ct_plan *P, int64_t k, int64_t rend, int64_t *va, int64_t *vz) {
    if (P->gin_fwd) {
        *va = ct_max(0, P->pad - k) * P->B;
        *vz = ct_min(rend, ct_min(P->T_out, P->T_in + P->pad - k) * P->B);
        return;
    }
    *va = ct_max(0, k - P->pad) * P->B;
    *vz = ct_min(rend, ct_min(P->T_in, P->T_out + k - P->pad) * P->B);
}
/* the operand row of output row r for tap k, as an offset from r */
static inline int64_t ct_gin_shift(const ct_plan *P, int64_t k) {
    return (P->gin_fwd ? k - P->pad : P->pad - k) * P->B;
}
static void ct_gin_port(const ct_plan *P, int64_t r0, int64_t nr, float *D, int64_t ldd) {
    int64_t K = P->K, B = P->B, Cout = P->Cout, Cin = P->Cin, k0 = P->k0, nG = ct_cdiv(Cout, k0);
    for (int64_t i = 0; i < Cin; i++)
        for (int64_t l = 0; l < nr; l++) {
            int64_t r = r0 + l, t = r / B;
            float c = P->gin_start ? P->gin_start[i] : 0.0f;
            for (int64_t g = 0; g < nG; g++) {
                int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
                for (int64_t k = 0; k < K; k++) {
                    int64_t d = P->gin_fwd ? t + k - P->pad : t + P->pad - k;
                    if (d < 0 || d >= (P->gin_fwd ? P->T_in : P->T_out)) continue;
                    const float *w = P->Wp + (ct_wblk(lo, hi, K, k) - lo) * Cin + i;
                    const float *y = P->DYc + r + ct_gin_shift(P, k);
                    float s = 0.0f;
                    for (int64_t co = lo; co < hi; co++) s = fmaf(y[co * P->nlo], w[co * Cin], s);
                    c = c + s;
                }
            }
            D[i * ldd + l] = c;
        }
}

#if CT_X86
/* lanes [a, z) of 16 */
CT_I512 __mmask16 ct_mask_range16(int64_t a, int64_t z) {
    a = ct_max(0, ct_min(16, a));
    z = ct_max(0, ct_min(16, z));
    return z > a ? (__mmask16)(ct_mask16(z) & ~ct_mask16(a)) : (__mmask16)0;
}
/* one block (g, k) for MI ci of 64 rows: block sums in registers, the chains in an L1 tile c[MI][64] */
CT_I512 void ct_gin_blk_512(const int MI, const int FULL, const float *dy, int64_t RO, const float *w, int64_t Cin,
                            int64_t lo, int64_t hi, const __mmask16 *m, float *c) {
    __m512 s[4][4], y[4];
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) s[i][v] = _mm512_setzero_ps();
    for (int64_t co = lo; co < hi; co++) {
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++)
            y[v] = FULL ? _mm512_loadu_ps(dy + co * RO + 16 * v) : _mm512_maskz_loadu_ps(m[v], dy + co * RO + 16 * v);
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++) {
            __m512 wv = _mm512_set1_ps(w[co * Cin + i]);
            _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) s[i][v] = _mm512_fmadd_ps(y[v], wv, s[i][v]);
        }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 4") for (int v = 0; v < 4; v++) {
            __m512 cv = _mm512_load_ps(c + 64 * i + 16 * v);
            _mm512_store_ps(c + 64 * i + 16 * v, FULL ? _mm512_add_ps(cv, s[i][v]) : _mm512_mask_add_ps(cv, m[v], cv, s[i][v]));
        }
}
/* rows [r0, r0 + nr), every ci, 64 rows at a time; chain (ci, row l) to D[ci*ldd + l - r0] */
static CT_T512 void ct_gin_512(const ct_plan *P, int64_t r0, int64_t nr, float *D, int64_t ldd) {
    int64_t K = P->K, Cout = P->Cout, Cin = P->Cin, k0 = P->k0, RO = P->nlo, nG = ct_cdiv(Cout, k0);
    int64_t rend = r0 + nr;
    float c[CT_NW * 64] __attribute__((aligned(64)));
    for (int64_t r = r0; r < rend; r += 64) {
        for (int64_t e = 0; e < Cin * 64; e++) c[e] = P->gin_start ? P->gin_start[e / 64] : 0.0f;
        for (int64_t g = 0; g < nG; g++) {
            int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
            for (int64_t k = 0; k < K; k++) {
                int64_t va, vz;
                ct_gin_valid(P, k, rend, &va, &vz);
                __mmask16 m[4];
                int any = 0, full = 1;
                for (int v = 0; v < 4; v++) {
                    m[v] = ct_mask_range16(va - (r + 16 * v), vz - (r + 16 * v));
                    any |= m[v] != 0;
                    full &= m[v] == 0xFFFF;
                }
                if (!any) continue;
                const float *w = P->Wp + (ct_wblk(lo, hi, K, k) - lo) * Cin;
                const float *dy = P->DYc + r + ct_gin_shift(P, k);
                for (int64_t ci = 0; ci < Cin; ci += 4) {
                    /* every row valid: plain loads and adds (no masks) */
#define CT_GINB512(MI) \
                    if (full) ct_gin_blk_512(MI, 1, dy, RO, w + ci, Cin, lo, hi, m, c + 64 * ci); \
                    else ct_gin_blk_512(MI, 0, dy, RO, w + ci, Cin, lo, hi, m, c + 64 * ci); \
                    break;
                    switch (ct_min(4, Cin - ci)) {
                        case 4: CT_GINB512(4)
                        case 3: CT_GINB512(3)
                        case 2: CT_GINB512(2)
                        default: CT_GINB512(1)
                    }
#undef CT_GINB512
                }
            }
        }
        for (int64_t ci = 0; ci < Cin; ci++)
            for (int v = 0; v < 4; v++)
                _mm512_mask_storeu_ps(D + ci * ldd + (r - r0) + 16 * v, ct_mask_range16(0, rend - (r + 16 * v)),
                                      _mm512_load_ps(c + 64 * ci + 16 * v));
    }
}

/* lanes [a, z) of 8, as a vector mask */
CT_I256 __m256i ct_mask_range8(int64_t a, int64_t z) {
    a = ct_max(0, ct_min(8, a));
    z = ct_max(0, ct_min(8, z));
    return z > a ? _mm256_andnot_si256(ct_mask8(a), ct_mask8(z)) : _mm256_setzero_si256();
}
/* one block (g, k) for MI ci of 16 rows (2 vectors); chains in an L1 tile c[MI][16]; full: every lane valid */
CT_I256 void ct_gin_blk_256(const int MI, const float *dy, int64_t RO, const float *w, int64_t Cin, int64_t lo,
                            int64_t hi, int full, const __m256i *m, float *c) {
    __m256 s[4][2], y[2];
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) s[i][v] = _mm256_setzero_ps();
    for (int64_t co = lo; co < hi; co++) {
        _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++)
            y[v] = full ? _mm256_loadu_ps(dy + co * RO + 8 * v) : _mm256_maskload_ps(dy + co * RO + 8 * v, m[v]);
        _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++) {
            __m256 wv = _mm256_broadcast_ss(w + co * Cin + i);
            _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) s[i][v] = _mm256_fmadd_ps(y[v], wv, s[i][v]);
        }
    }
    _Pragma("GCC unroll 4") for (int i = 0; i < MI; i++)
        _Pragma("GCC unroll 2") for (int v = 0; v < 2; v++) {
            __m256 cv = _mm256_load_ps(c + 16 * i + 8 * v), nv = _mm256_add_ps(cv, s[i][v]);
            _mm256_store_ps(c + 16 * i + 8 * v, full ? nv : _mm256_blendv_ps(cv, nv, _mm256_castsi256_ps(m[v])));
        }
}
static CT_T256 void ct_gin_256(const ct_plan *P, int64_t r0, int64_t nr, float *D, int64_t ldd) {
    int64_t K = P->K, Cout = P->Cout, Cin = P->Cin, k0 = P->k0, RO = P->nlo, nG = ct_cdiv(Cout, k0);
    int64_t rend = r0 + nr;
    float c[CT_NW * 16] __attribute__((aligned(32)));
    for (int64_t r = r0; r < rend; r += 16) {
        for (int64_t e = 0; e < Cin * 16; e++) c[e] = P->gin_start ? P->gin_start[e / 16] : 0.0f;
        for (int64_t g = 0; g < nG; g++) {
            int64_t lo = g * k0, hi = ct_min(Cout, lo + k0);
            for (int64_t k = 0; k < K; k++) {
                int64_t va, vz;
                ct_gin_valid(P, k, rend, &va, &vz);
                int64_t a = va - r, z = vz - r;
                if (z <= 0 || a >= 16 || z <= a) continue;
                int full = a <= 0 && z >= 16;
                __m256i m[2];
                for (int v = 0; v < 2; v++) m[v] = ct_mask_range8(a - 8 * v, z - 8 * v);
                const float *w = P->Wp + (ct_wblk(lo, hi, K, k) - lo) * Cin;
                const float *dy = P->DYc + r + ct_gin_shift(P, k);
                for (int64_t ci = 0; ci < Cin; ci += 4) {
                    switch (ct_min(4, Cin - ci)) {
                        case 4: ct_gin_blk_256(4, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                        case 3: ct_gin_blk_256(3, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                        case 2: ct_gin_blk_256(2, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                        default: ct_gin_blk_256(1, dy, RO, w + ci, Cin, lo, hi, full, m, c + 16 * ci); break;
                    }
                }
            }
        }
        for (int64_t ci = 0; ci < Cin; ci++)
            for (int v = 0; v < 2; v++) {
                int64_t n = rend - (r + 8 * v);
                if (n > 0) ct_st8(D + ci * ldd + (r - r0) + 8 * v, n, ct_mask8(n), _mm256_load_ps(c + 16 * ci + 8 * v));
            }
    }
}
#endif

/* rows [R0, R0 + rows) of the narrow gradInput (or forward) sums, every output channel c (P->Cin of them): the
 * chains [c][CT_NR] in cb, then the rows [rows][c] to out (fp32: in place), else to the fp32 tile after the
 * chains (cb + c*CT_NR), rounded to pre and cast to dt. */
static void ct_gin_rows_out(const ct_plan *P, int64_t R0, int64_t rows, float *cb, char *out, int dt, int pre,
                            int hif8_rnd, int sat) {
    int64_t C = P->Cin;
#if CT_X86
    if (P->isa == CT_ISA_AVX512) ct_gin_512(P, R0, rows, cb, CT_NR);
    else if (P->isa == CT_ISA_AVX2) ct_gin_256(P, R0, rows, cb, CT_NR);
    else
#endif
        ct_gin_port(P, R0, rows, cb, CT_NR);
    int direct = dt == CT_DT_F32 && pre == CT_C_FP32;
    float *res = direct ? (float *)out + R0 * C : cb + C * CT_NR;
    ct_nar_transpose(P->isa, 0, res, rows, C, cb, CT_NR);
    if (direct) return;
    ct_store_row(P->isa, res, rows * C, out + R0 * C * ct_dt_size(dt), dt, ct_round_for(dt, pre), hif8_rnd, sat);
}

/* gi task: rows [R0, R0 + CT_NR), every ci.  cb: the thread's buffer, [Cin][CT_NR] chains then (outputs other
 * than fp32) the [rows][Cin] fp32 tile that is cast. */
static void ct_gin_task(const ct_plan *P, int64_t task, float *cb) {
    int64_t R0 = task * CT_NR;
    int pre = (P->compute == CT_C_FP16 || P->compute == CT_C_BF16) ? P->compute : CT_C_FP32;
    ct_gin_rows_out(P, R0, ct_min(CT_NR, P->RI - R0), cb, P->gi, P->gi_dt, pre, CT_HIF8_TA, 0);
}

#endif /* PYCONVTBC_CONV_NARROW_H */
