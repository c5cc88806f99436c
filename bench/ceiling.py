"""What this CPU and pyconvtbc's fp32 micro-kernels can do at best, one thread: the FMA peak, and each micro-kernel
over L1-resident operands ("sequential" and "cube" sums, gradInput / forward and gradWeight), per instruction set.

    python bench/ceiling.py            # builds the C program below with the C compiler Python was built with, runs it
    PYCONVTBC_CEILING_CFLAGS=-mfma python bench/ceiling.py   # the same, every file built with hardware FMA

The kernels are the package's own: the program takes each instruction set's micro-kernel table the way the
kernels do (``ct_ukr_select``, pyconvtbc/_kernels/_ukr.h) and calls its entries directly, compiled from the same
sources (``_ukr_*.c``) with the package's compiler flags (setup.py's BASE_COMPILE_ARGS), so the table is an upper
bound for a whole call; `python bench/phases.py` gives the same kernels' rates inside calls.  Needs a C compiler
(the one that builds the package); every CPU has the portable table, x86-64 CPUs the AVX2 / AVX-512 ones their
extensions allow.
"""
import ast
import glob
import os
import shlex
import subprocess
import sys
import sysconfig
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
KERNELS = os.path.join(ROOT, "pyconvtbc", "_kernels")

# The timing program (C, compiled at run time with the package's micro-kernel sources).
SOURCE = r"""/* The ceiling of this CPU and of pyconvtbc's fp32 micro-kernels, one thread (bench/ceiling.py builds and runs it).
 *
 *   fma      the FMA peak: 16 (AVX2: 12) independent vector FMA chains, nothing else (2 flop per lane per FMA),
 *            best of 5 passes; x86-64 only
 *   gi/fwd   the gradInput (and forward) micro-kernels over L1-resident operands: rows x 32 ci, a reduction
 *            of 128 co, "sequential" (table entry gi_seq: one FMA chain) and "cube" (gic_rows: k0 = 8 block sums
 *            added into the chain)
 *   gw       the gradWeight micro-kernels over L1-resident operands: 8 ci x 32 co over 256 rows, "sequential"
 *            (gw_seq) and "cube" (gwc)
 *
 * Every instruction set this CPU and build run (ct_isa_runs), each through its table (ct_ukr_select, _ukr.h), as
 * the kernels call them.  Output: one line per entry, "name isa GFLOP/s" (best of 5 passes of >= 0.2 s each). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "_ukr.h"
#include "_codes.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define PEAK_X86 1
static __attribute__((target("avx512f,fma"))) double fma_peak_512(long n) {
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

static __attribute__((target("avx2,fma"))) double fma_peak_256(long n) {
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

enum { CO = 128, ROWS = 84, GWR = 256 };   /* gi: 84 rows x 32 ci over 128 co; gw: 256 rows */
static float *DY, *W, *GI, *XA, *YB, *GW, *CH;

/* best of 5 passes, each as many calls as fit in 0.2 s (at least 10) */
#define BEST(expr, flop)                                                            \
    do {                                                                            \
        best = 0;                                                                   \
        for (int pass = 0; pass < 5; pass++) {                                      \
            long calls = 0;                                                         \
            double t0 = now(), t;                                                   \
            do { expr; calls++; t = now() - t0; } while (calls < 10 || t < 0.2);    \
            double g = (flop) * calls / t / 1e9;                                    \
            if (g > best) best = g;                                                 \
        }                                                                           \
    } while (0)

static void run_table(const ct_ukr *U) {
    double best, gi_flop = 2.0 * ROWS * 32 * CO, gw_flop = 2.0 * GWR * 8 * 32;
    int64_t mr = U->gi_mr_wide;                /* the sequential gi rows per micro-tile of a 32-column panel */
    BEST(for (int64_t i = 0; i < ROWS; i += mr)
             U->gi_seq(ct_min(mr, ROWS - i), 32, DY, ROWS, i, 0, 1, 0, CO, CO, W, 0, GI + i * 32, 32),
         gi_flop);
    printf("gi_sequential %s %.1f\n", U->name, best);
    BEST(U->gic_rows(CT_ACC_CUBE, 0, ROWS, 32, DY, ROWS, 0, 0, 1, 0, CO / 8, 8, CO, W, GI, 32), gi_flop);
    printf("gi_cube %s %.1f\n", U->name, best);
    BEST(U->gw_seq(1, 8, 32, GWR, XA, 8, 0, YB, 32, GW, 32, 0), gw_flop);
    printf("gw_sequential %s %.1f\n", U->name, best);
    BEST(U->gwc(CT_ACC_CUBE, 8, 32, XA, 8, YB, 32, GWR, 8, 8, GW, 32, CH, 32, 0, NULL), gw_flop);
    printf("gw_cube %s %.1f\n", U->name, best);
}

int main(void) {
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
    ct_ukr_opts opts = {1, 0, 0};              /* the hooks' defaults: every variant knob by CPU */
    for (int isa = CT_ISA_N - 1; isa >= 0; isa--) {
        ct_ukr U;
        if (!ct_isa_runs(isa) || ct_ukr_select(&U, isa, &opts) != 0) continue;
#ifdef PEAK_X86
        double peak = 0;
        for (int pass = 0; pass < 5; pass++) {     /* best of 5 */
            double g = isa == CT_ISA_AVX512 ? fma_peak_512(10000000L)
                       : isa == CT_ISA_AVX2   ? fma_peak_256(10000000L) : 0;
            if (g > peak) peak = g;
        }
        if (peak > 0) printf("fma %s %.1f\n", U.name, peak);
#endif
        run_table(&U);
    }
    if (GI[0] == 12345.f && GW[0] == 12345.f) printf("#\n");
    return 0;
}
"""


def compile_args():
    """setup.py's BASE_COMPILE_ARGS (the flags the package compiles its kernels with), read from its text."""
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        tree = ast.parse(f.read())
    ns = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("IEEE_ARGS", "BASE_COMPILE_ARGS")
                                                for t in node.targets):
            exec(compile(ast.Module([node], []), "setup.py", "exec"), ns)
    return ns["BASE_COMPILE_ARGS"]


def build_and_run():
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    sources = sorted(glob.glob(os.path.join(KERNELS, "_ukr_*.c")))
    with tempfile.TemporaryDirectory() as tmp:
        exe, c_file = os.path.join(tmp, "ceiling"), os.path.join(tmp, "ceiling.c")
        with open(c_file, "w") as f:
            f.write(SOURCE)
        extra = shlex.split(os.environ.get("PYCONVTBC_CEILING_CFLAGS", ""))   # e.g. -mfma: the portable table
        subprocess.run(cc + compile_args() + extra + ["-I", KERNELS, c_file, *sources, "-o", exe, "-lm"],
                       check=True)                                         # with hardware FMA (fmaf inlined)
        out = subprocess.run([exe], check=True, capture_output=True, text=True).stdout
    rows = {}
    for line in out.splitlines():
        if line.startswith("#"):
            print(line)
            continue
        name, isa, g = line.split()
        rows[(name, isa)] = float(g)
    return rows


def _g(v):
    return "-" if v is None else f"{v:.0f}" if v >= 10 else f"{v:.1f}"


def main():
    rows = build_and_run()
    isas = list(dict.fromkeys(isa for _, isa in rows))          # the program's order: fastest first
    print("| isa | FMA peak GFLOP/s | kernel | sequential GFLOP/s | cube GFLOP/s | cube / sequential (time) "
          "| cube % of FMA peak |")
    print("|---|---|---|---|---|---|---|")
    for isa in isas:
        peak = rows.get(("fma", isa))
        for k, label in (("gi", "gradInput / forward"), ("gw", "gradWeight")):
            s, c = rows[(f"{k}_sequential", isa)], rows[(f"{k}_cube", isa)]
            print(f"| {isa} | {_g(peak)} | {label} | {_g(s)} | {_g(c)} | "
                  f"{s / c:.2f}x | {'-' if peak is None else f'{100 * c / peak:.0f}%'} |")
    peaks = [isa for isa in isas if ("fma", isa) in rows]
    if peaks:
        print("\nThe cube form does 9 vector operations per 8 products at k0 = 8 (a block of 8 FMAs, then one "
              "add into the chain), so where adds share the FMA ports (Intel's cores) its rate is at most 8/9 of "
              "the FMA peak: " + ", ".join(f"{isa} {rows[('fma', isa)] * 8 / 9:.0f} GFLOP/s" for isa in peaks)
              + ".  AMD's Zen cores add on pipes of their own: there the bound is the peak itself.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
