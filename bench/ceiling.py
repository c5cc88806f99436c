"""What this CPU and pyconvtbc's fp32 micro-kernels can do at best, one thread: the FMA peak, and each micro-kernel
over L1-resident operands ("sequential" and "cube" sums, gradInput / forward and gradWeight).

    python bench/ceiling.py            # builds the C program below with the C compiler Python was built with, runs it

The kernels are the package's own (the C headers in pyconvtbc/_kernels), called directly, so the table is an upper
bound for a whole call; `python bench/phases.py` gives the same kernels' rates inside calls.  Needs a C compiler
(the one that builds the package) and an x86-64 CPU with AVX2 or AVX-512.
"""
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "pyconvtbc", "_kernels")

# The timing program (C, compiled at run time against the package's kernel headers).
SOURCE = r"""/* The ceiling of this CPU and of pyconvtbc's fp32 micro-kernels, one thread (bench/ceiling.py builds and runs it).
 *
 *   fma      the FMA peak: 16 independent vector FMA chains, nothing else (GFLOP/s = 2 per lane per FMA)
 *   gi/fwd   the gradInput (and forward) micro-kernels over L1-resident operands: rows x 32 ci, a reduction
 *            of 128 co, "sequential" (one FMA chain) and "cube" (k0 = 8 block sums added into the chain)
 *   gw       the gradWeight micro-kernels over L1-resident operands: 8 ci x 32 co over 256 rows
 *
 * The kernels are the package's own (the headers of pyconvtbc/_kernels), called directly, so the figures are
 * what the kernels can do when every operand is in L1; bench/phases.py gives what they do inside a call.
 * Output: one line per entry, "name isa GFLOP/s" (best of the passes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "_conv_gemm.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#if CT_X86
static CT_T512 double fma_peak_512(long n) {
    __m512 a[16], x = _mm512_set1_ps(1.0000001f), y = _mm512_set1_ps(-1e-7f);
    for (int i = 0; i < 16; i++) a[i] = _mm512_set1_ps((float)i);
    double t = now();
    for (long r = 0; r < n; r++) {
        _Pragma("GCC unroll 16") for (int i = 0; i < 16; i++) a[i] = _mm512_fmadd_ps(a[i], x, y);
    }
    t = now() - t;
    float s = 0;
    for (int i = 0; i < 16; i++) s += _mm512_reduce_add_ps(a[i]);
    if (s == 12345.f) printf("#\n");   /* keep the loop */
    return 2.0 * 16 * 16 * n / t / 1e9;
}

static CT_T256 double fma_peak_256(long n) {
    __m256 a[12], x = _mm256_set1_ps(1.0000001f), y = _mm256_set1_ps(-1e-7f);
    for (int i = 0; i < 12; i++) a[i] = _mm256_set1_ps((float)i);
    double t = now();
    for (long r = 0; r < n; r++) {
        _Pragma("GCC unroll 12") for (int i = 0; i < 12; i++) a[i] = _mm256_fmadd_ps(a[i], x, y);
    }
    t = now() - t;
    float buf[8], s = 0;
    for (int i = 0; i < 12; i++) {
        _mm256_storeu_ps(buf, a[i]);
        for (int j = 0; j < 8; j++) s += buf[j];
    }
    if (s == 12345.f) printf("#\n");
    return 2.0 * 12 * 8 * n / t / 1e9;
}
#endif

enum { CO = 128, ROWS = 84, GWR = 256 };   /* gi: 84 rows (6 x 14 tiles) x 32 ci over 128 co; gw: 256 rows */
static float *DY, *W, *GI, *XA, *YB, *GW, *CH;

static double rate(double flop_per_call, double secs, long calls) { return flop_per_call * calls / secs / 1e9; }

/* best of 5 passes of n calls */
#define BEST(expr, n, flop)                                                         \
    do {                                                                            \
        best = 0;                                                                   \
        for (int pass = 0; pass < 5; pass++) {                                      \
            double t = now();                                                       \
            for (long c = 0; c < (n); c++) { expr; }                                \
            double g = rate((flop), now() - t, (n));                                \
            if (g > best) best = g;                                                 \
        }                                                                           \
    } while (0)

int main(void) {
    int isa = ct_isa_supported();
    double best;
    /* DY: one panel per 32 co, ROWS rows each ([panel][row][32]); W: [co][32 ci]; X: [row][8 ci]; DY rows for gw:
     * [row][32 co] */
    DY = aligned_alloc(64, (size_t)CO * ROWS * 4);
    W = aligned_alloc(64, (size_t)CO * 32 * 4);
    GI = aligned_alloc(64, (size_t)ROWS * 32 * 4);
    XA = aligned_alloc(64, (size_t)GWR * 8 * 4);
    YB = aligned_alloc(64, (size_t)GWR * 32 * 4);
    GW = aligned_alloc(64, 8 * 32 * 4);
    CH = aligned_alloc(64, 8 * 32 * 4);
    for (int i = 0; i < CO * ROWS; i++) DY[i] = (float)(i % 13) * 1e-3f;
    for (int i = 0; i < CO * 32; i++) W[i] = (float)(i % 7) * 1e-3f;
    for (int i = 0; i < GWR * 8; i++) XA[i] = (float)(i % 5) * 1e-3f;
    for (int i = 0; i < GWR * 32; i++) YB[i] = (float)(i % 11) * 1e-3f;
    memset(GI, 0, (size_t)ROWS * 32 * 4);
    memset(GW, 0, 8 * 32 * 4);
    memset(CH, 0, 8 * 32 * 4);
    double gi_flop = 2.0 * ROWS * 32 * CO, gw_flop = 2.0 * GWR * 8 * 32;
#if CT_X86
    if (isa == CT_ISA_AVX512) {
        printf("fma avx512 %.1f\n", fma_peak_512(50000000L));
        BEST(for (int i = 0; i < ROWS; i += 14)
                 ct_gi_ukr_512(14, 32, DY, ROWS, i, 0, 1, 0, CO, CO, W, 0, GI + i * 32, 32),
             20000, gi_flop);
        printf("gi_sequential avx512 %.1f\n", best);
        BEST(ct_gic_rows_512(0, ROWS, 32, DY, ROWS, 0, 0, 1, 0, CO / 8, 8, CO, W, GI, 32), 20000, gi_flop);
        printf("gi_cube avx512 %.1f\n", best);
        BEST(ct_gw_ukr_512(1, 8, 32, GWR, XA, 8, 0, YB, 32, GW, 32, 0), 100000, gw_flop);
        printf("gw_sequential avx512 %.1f\n", best);
        BEST(ct_gwc_ukr_512(8, 32, XA, 8, YB, 32, GWR, 8, 8, GW, 32, CH, 32, 0, NULL), 100000, gw_flop);
        printf("gw_cube avx512 %.1f\n", best);
    }
    if (isa >= CT_ISA_AVX2) {
        printf("fma avx2 %.1f\n", fma_peak_256(50000000L));
        BEST(for (int i = 0; i < ROWS; i += 6) ct_gi_ukr_256(6, 32, DY, ROWS, i, 0, CO, CO, W, GI + i * 32, 32),
             20000, gi_flop);
        printf("gi_sequential avx2 %.1f\n", best);
        BEST(ct_gic_rows_256(0, ROWS, 32, DY, ROWS, 0, 0, 1, 0, CO / 8, 8, CO, W, GI, 32), 20000, gi_flop);
        printf("gi_cube avx2 %.1f\n", best);
        BEST(ct_gw_ukr_256(8, 32, GWR, XA, 8, YB, 32, GW, 32), 100000, gw_flop);
        printf("gw_sequential avx2 %.1f\n", best);
        BEST(ct_gwc_ukr_256(8, 32, XA, 8, YB, 32, GWR, 8, 8, GW, 32, CH, 32, 0, NULL), 100000, gw_flop);
        printf("gw_cube avx2 %.1f\n", best);
    }
#endif
    if (isa == CT_ISA_PORTABLE) printf("# no vector kernels on this CPU\n");
    if (GI[0] == 12345.f && GW[0] == 12345.f) printf("#\n");
    return 0;
}
"""


def build_and_run():
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    with tempfile.TemporaryDirectory() as tmp:
        exe, c_file = os.path.join(tmp, "ceiling"), os.path.join(tmp, "ceiling.c")
        with open(c_file, "w") as f:
            f.write(SOURCE)
        subprocess.run(cc + ["-O3", "-I", KERNELS, c_file, "-o", exe, "-lm"], check=True)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("#"):
            print(line)
            continue
        name, isa, g = line.split()
        rows[(name, isa)] = float(g)
    return rows


def main():
    rows = build_and_run()
    isas = sorted({isa for _, isa in rows}, reverse=True)
    if not isas:
        print("no vector kernels on this CPU (the portable path has no ceiling to measure)")
        return 0
    print("| isa | FMA peak GFLOP/s | kernel | sequential GFLOP/s | cube GFLOP/s | cube / sequential (time) "
          "| cube % of FMA peak |")
    print("|---|---|---|---|---|---|---|")
    for isa in isas:
        peak = rows[("fma", isa)]
        for k, label in (("gi", "gradInput / forward"), ("gw", "gradWeight")):
            s, c = rows[(f"{k}_sequential", isa)], rows[(f"{k}_cube", isa)]
            print(f"| {isa} | {peak:.0f} | {label} | {s:.0f} | {c:.0f} | {s / c:.2f}x | {100 * c / peak:.0f}% |")
    print("\nThe cube form does 9 vector operations per 8 products at k0 = 8 (a block of 8 FMAs, then one add into "
          "the chain), so where adds share the FMA ports (Intel's cores) its rate is at most 8/9 of the FMA peak: "
          + ", ".join(f"{isa} {rows[('fma', isa)] * 8 / 9:.0f} GFLOP/s" for isa in isas)
          + ".  AMD's Zen cores add on pipes of their own: there the bound is the peak itself.")


if __name__ == "__main__":
    sys.exit(main())
