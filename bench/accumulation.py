"""What the accumulation model costs: "cube" (deterministic and not), "cube_wide" and "sequential", next to
torch's CPU conv_tbc_backward and the machine's SGEMM, on the benchmark's fp32 fairseq shapes.

    python bench/accumulation.py              # every fairseq shape, 1 and 2 threads
    python bench/accumulation.py --quick      # one shape
    python bench/accumulation.py --md         # Markdown rows (docs/performance.md, "Accumulation model")

pyconvtbc's forms run in one worker process, torch in another, SGEMM in a fresh one (as bench/run.py).  In each
pass the forms' calls are interleaved (--reps rounds of one call of each form, the order alternating), torch's
calls follow; each time is the median over passes of the pass's best, and each ratio the median over passes of
the pass's ratio (the two times of a pass were taken close together).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _cases import FAIRSEQ, Case  # noqa: E402
import run as _run  # noqa: E402

FORMS = [("sequential", True), ("cube", True), ("cube", False), ("cube_wide", True)]


def worker_forms():
    import numpy as np
    import pyconvtbc
    for line in sys.stdin:
        req = json.loads(line)
        case = _run._case(req["case"])
        dy, x, w, b = _run._inputs(case, np)
        order = FORMS if req["pass"] % 2 == 0 else FORMS[::-1]
        calls = []
        for acc, det in order:
            if acc == "cube_wide" and not req["wide"]:
                continue
            kw = dict(num_threads=case.threads, accumulation=acc, deterministic=det)
            calls.append((f"{acc}{'' if det else '_nd'}",
                          lambda kw=kw: pyconvtbc.conv_tbc_backward(dy, x, w, b, case.shape[5], **kw)))
        print(json.dumps(_run._interleaved(calls, req["reps"])), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--wide", action="store_true", help="also time cube_wide (slow)")
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker == "forms":
        return worker_forms()
    if args.worker == "torch":
        return _run.worker_torch()
    shapes = FAIRSEQ[:1] if args.quick else FAIRSEQ
    cases = [Case("fairseq", s, "float32", 0, t) for s in shapes for t in (1, 2)]
    sgemm = {}
    for t in (1, 2):
        env = dict(os.environ, OPENBLAS_NUM_THREADS=str(t), OMP_NUM_THREADS=str(t))
        r = subprocess.run([sys.executable, _run.__file__, "--worker", "sgemm", "5"], capture_output=True,
                           text=True, env=env)
        sgemm[t] = json.loads(r.stdout)["gflops"] if r.returncode == 0 else float("nan")
    results, have_torch = _run.alternate(__file__, "forms", cases, args.passes, args.reps, {"wide": args.wide})
    cols = ["sequential", "cube", "cube_nd"] + (["cube_wide"] if args.wide else []) + \
        (["torch"] if have_torch else [])
    if args.md:
        print(f"SGEMM 2048^3: 1 thread {sgemm[1]:.1f} GFLOP/s, 2 threads {sgemm[2]:.1f} GFLOP/s")
        print("| shape (T,B,Cin,Cout,K,pad) | thr | " + " | ".join(f"{c} ms" for c in cols)
              + " | cube / sequential | cube_nd / sequential | torch / cube | cube % SGEMM |")
        print("|---|---|" + "---|" * (len(cols) + 4))
    for c in cases:
        res = results[c.name]
        med = {k: statistics.median(v) for k, v in res.items()}
        ratio = _run.paired_ratio(res, "cube", "sequential")
        ratio_nd = _run.paired_ratio(res, "cube_nd", "sequential")
        vs_torch = _run.paired_ratio(res, "torch", "cube") if "torch" in med else float("nan")
        pct = c.flops / med["cube"] / 1e9 / sgemm[c.threads] * 100
        if args.md:
            print(f"| {','.join(map(str, c.shape))} | {c.threads} | "
                  + " | ".join(f"{med[k] * 1e3:.1f}" for k in cols)
                  + f" | {ratio:.2f}x | {ratio_nd:.2f}x | {vs_torch:.2f}x | {pct:.0f}% |")
        else:
            print(c.name, " ".join(f"{k}={med[k] * 1e3:.1f}ms" for k in cols),
                  f"cube/seq={ratio:.2f} cube_nd/seq={ratio_nd:.2f} torch/cube={vs_torch:.2f} "
                  f"SGEMM%={pct:.0f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
