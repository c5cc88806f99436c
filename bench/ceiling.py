"""What this CPU and pyconvtbc's fp32 micro-kernels can do at best, one thread: the FMA peak, and each micro-kernel
over L1-resident operands ("sequential" and "cube" sums, gradInput / forward and gradWeight).

    python bench/ceiling.py            # builds bench/_ceiling.c with the C compiler Python was built with, runs it

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


def build_and_run():
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "ceiling")
        subprocess.run(cc + ["-O3", "-I", KERNELS, os.path.join(HERE, "_ceiling.c"), "-o", exe, "-lm"], check=True)
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
          "the chain), so at the FMA peak its rate is at most 8/9 of the peak: "
          + ", ".join(f"{isa} {rows[('fma', isa)] * 8 / 9:.0f} GFLOP/s" for isa in isas) + ".")


if __name__ == "__main__":
    sys.exit(main())
