"""The narrow-channel cube kernels against the general ones, per code path: the default "cube" call with the
kernels of _conv_narrow.h (lanes along items and rows) and with the hook ``narrow=False`` (lanes along the
channels), and the "sequential" form, on the small-channel shapes.

    python bench/narrow.py                   # (512, 32, C, C, 3, 1), C = 2, 4, 8, 16; AVX-512 and AVX2, 1 thread
    python bench/narrow.py --threads 2 --isa avx512
    python bench/narrow.py --op forward      # the same for the forward (conv_tbc), whose narrow path is chip-free
    python bench/narrow.py --soc ascend950   # ascend950's backward: narrow gradInput kernels, general gradWeight

One process; in each pass the three variants run in alternating order, each timed as the best of --reps rounds
of --calls calls; the table gives the medians over the passes (microseconds per call) and the paired ratios.
The hook changes the workspace layout, so the plan cache is emptied when it is switched (not timed).
"""
import argparse
import statistics
import sys
import time

SHAPES = [(512, 32, C, C, 3, 1) for C in (2, 4, 8, 16)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--isa", default=None, help="one code path (default: the vector ones this CPU has)")
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--op", choices=("backward", "forward"), default="backward")
    ap.add_argument("--soc", default="ascend910b", help="the chip profile of the backward (default ascend910b)")
    args = ap.parse_args(argv)
    import numpy as np
    import pyconvtbc
    from pyconvtbc import _numpy_layer as NL
    from pyconvtbc._kernels import _conv_tbc as K

    isas = [args.isa] if args.isa else [i for i in K.isas() if i != "portable"][::-1] or ["portable"]
    variants = [("narrow", "cube", True), ("general", "cube", False), ("sequential", "sequential", True)]
    chip = "" if args.op == "forward" else f", {args.soc}"
    print(f"{args.op}{chip}, {args.threads} thread(s), us per call, medians of {args.passes} passes")
    print("| shape (T,B,Cin,Cout,K,pad) | isa | cube, narrow kernels | cube, general kernels | sequential | "
          "general / narrow | sequential / narrow |")
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        T_in, B, Cin, Cout, Kk, pad = shape
        rng = np.random.default_rng(0)
        mk = lambda *s: rng.standard_normal(s, dtype=np.float32)  # noqa: E731
        dy, x, w, b = mk(T_in + 2 * pad - Kk + 1, B, Cout), mk(T_in, B, Cin), mk(Kk, Cin, Cout), mk(Cout)
        for isa in isas:
            res = {v[0]: [] for v in variants}
            try:
                K._set_isa(isa)
                for p in range(args.passes):
                    for name, acc, narrow in (variants if p % 2 == 0 else variants[::-1]):
                        NL._plan_cache.clear()
                        with K.hooks.override(narrow=narrow):
                            def call():
                                if args.op == "forward":
                                    pyconvtbc.conv_tbc(x, w, b, pad, num_threads=args.threads, accumulation=acc)
                                else:
                                    pyconvtbc.conv_tbc_backward(dy, x, w, b, pad, num_threads=args.threads,
                                                                accumulation=acc, soc=args.soc)
                            call()
                            best = float("inf")
                            for _ in range(args.reps):
                                t0 = time.perf_counter()
                                for _ in range(args.calls):
                                    call()
                                best = min(best, (time.perf_counter() - t0) / args.calls)
                        res[name].append(best * 1e6)
            finally:
                NL._plan_cache.clear()
                K._set_isa(None)
            med = {k: statistics.median(v) for k, v in res.items()}
            r1 = statistics.median(g / n for g, n in zip(res["general"], res["narrow"]))
            r2 = statistics.median(s / n for s, n in zip(res["sequential"], res["narrow"]))
            print(f"| {','.join(map(str, shape))} | {isa} | {med['narrow']:.0f} | {med['general']:.0f} | "
                  f"{med['sequential']:.0f} | {r1:.2f}x | {r2:.2f}x |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
