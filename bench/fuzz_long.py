"""Long fuzz run: the properties of tests/test_fuzz.py driven by a seeded random generator.

    python bench/fuzz_long.py [--cann N] [--numpy N] [--forward N] [--seed S] [--threads T] [--report FILE]

Runs N CANN-layer scenarios (both phases, statuses against the documented rules, results against the float64
reference, untouched bytes), N NumPy-layer calls and N forward calls (tests/test_fuzz_forward.py: statuses, and
bits against the forward's model), one example per seed S, S+1, ...  Prints the example count, the outcome
counters and every distinct failure, with the seed that reproduces it
(``test_fuzz.cann_property(test_fuzz.RandomDrawer(seed))``, ``test_fuzz_forward.forward_property(seed)``).
Exit status 1 if anything failed.
Default: 60 000 + 60 000 + 60 000 examples, kernels pinned to 1 thread (PYCONVTBC_FUZZ_THREADS).
"""
import argparse
import collections
import os
import sys
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [os.path.join(HERE, "..", "tests"), os.path.join(HERE, "..")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cann", type=int, default=60_000)
    ap.add_argument("--numpy", type=int, default=60_000)
    ap.add_argument("--forward", type=int, default=60_000)
    ap.add_argument("--seed", type=int, default=1_000_000)
    ap.add_argument("--threads", default="1", help="kernel threads per call ('' = random 1-4 per example)")
    ap.add_argument("--report", default=None, help="also write the summary to this file")
    ap.add_argument("--progress", type=int, default=10_000, help="print a line every N examples")
    args = ap.parse_args(argv)
    if args.threads:
        os.environ["PYCONVTBC_FUZZ_THREADS"] = args.threads
        os.environ.setdefault("OMP_NUM_THREADS", args.threads)
    import test_fuzz as tf
    import test_fuzz_forward as tff

    stats, failures, first = collections.Counter(), collections.Counter(), {}
    t0 = time.time()
    done = 0
    props = (("cann", args.cann, lambda s, st: tf.cann_property(tf.RandomDrawer(s), st)),
             ("numpy", args.numpy, lambda s, st: tf.numpy_property(tf.RandomDrawer(s), st)),
             ("forward", args.forward, lambda s, st: tff.forward_property(s, st)))
    for layer, n, prop in props:
        for i in range(n):
            seed = args.seed + i
            try:
                prop(seed, stats)
            except Exception as e:  # every distinct failure once, with the seed that reproduces it
                key = (layer, type(e).__name__, str(e)[:200])
                if key not in first:
                    first[key] = (seed, traceback.format_exc(limit=4))
                    print(f"FAILURE {layer} seed {seed}: {type(e).__name__}: {str(e)[:300]}", flush=True)
                failures[key] += 1
            done += 1
            if args.progress and done % args.progress == 0:
                print(f"... {done} examples, {sum(failures.values())} failures, {time.time() - t0:.0f} s", flush=True)
    lines = [f"fuzz_long: {done} examples ({args.cann} CANN layer, {args.numpy} NumPy layer, {args.forward} "
             f"forward), seeds from "
             f"{args.seed}, {time.time() - t0:.0f} s, kernel threads {args.threads or 'random 1-4'}",
             f"result: {'PASS' if not failures else 'FAIL'} ({sum(failures.values())} failing examples, "
             f"{len(failures)} distinct)"]
    lines += [f"  {k}: {v}" for k, v in sorted(stats.items())]
    for key, (seed, tb) in first.items():
        lines += [f"failure {key} x{failures[key]} (first seed {seed})", tb]
    text = "\n".join(lines)
    print(text)
    if args.report:
        with open(args.report, "w") as f:
            f.write(text + "\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
