"""The forward operator (aclnnConvTbc) against torch's CPU conv_tbc, on the benchmark's fairseq shapes.

    python bench/forward.py              # every fairseq shape, 1 and 2 threads
    python bench/forward.py --quick      # one shape
    python bench/forward.py --md         # Markdown rows (docs/performance.md, "The forward operator")

pyconvtbc's modes (fp32 KEEP_DTYPE "cube" and "sequential", USE_HF32, USE_FP16; float16 and bfloat16 inputs) run
in one worker process, torch's float32 conv_tbc in another.  In each pass the modes' calls are interleaved (--reps
rounds of one call of each mode, the order alternating), torch's calls follow; each time is the median over
passes of the pass's best, and each ratio the median over passes of the pass's ratio.
"""
import argparse
import json
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _cases import FAIRSEQ, Case  # noqa: E402
import run as _run  # noqa: E402

# (column, input dtype, cubeMathType, accumulation)
MODES = [("fp32", "float32", 0, "cube"), ("fp32_seq", "float32", 0, "sequential"), ("hf32", "float32", 3, "cube"),
         ("fp32_use_fp16", "float32", 2, "cube"), ("fp16", "float16", 0, "cube"), ("bf16", "bfloat16", 0, "cube")]


def _arrays(case, np):
    rng = np.random.default_rng(0)
    T_in, B, Cin, Cout, K, _ = case.shape
    x = rng.standard_normal((T_in, B, Cin), dtype=np.float32)
    w = (rng.standard_normal((K, Cin, Cout), dtype=np.float32) / np.sqrt(K * Cin)).astype(np.float32)
    b = rng.standard_normal(Cout, dtype=np.float32)
    return x, w, b


def worker_modes():
    import ml_dtypes
    import numpy as np
    import pyconvtbc
    cache = {}
    for line in sys.stdin:
        req = json.loads(line)
        case = _run._case(req["case"])
        if case.shape not in cache:
            cache.clear()
            x, w, b = _arrays(case, np)
            cache[case.shape] = {dt: (x.astype(d), w.astype(d), b) for dt, d in
                                 (("float32", np.float32), ("float16", np.float16),
                                  ("bfloat16", ml_dtypes.bfloat16))}
        order = MODES if req["pass"] % 2 == 0 else MODES[::-1]
        calls = []
        for col, dt, cube, acc in order:
            x, w, b = cache[case.shape][dt]
            kw = dict(num_threads=case.threads, cube_math_type=cube, accumulation=acc)
            calls.append((col, lambda x=x, w=w, b=b, kw=kw: pyconvtbc.conv_tbc(x, w, b, case.shape[5], **kw)))
        print(json.dumps(_run._interleaved(calls, req["reps"])), flush=True)


def worker_torch():
    import numpy as np
    import torch
    cache = {}
    for line in sys.stdin:
        req = json.loads(line)
        case = _run._case(req["case"])
        if case.shape not in cache:
            cache.clear()
            cache[case.shape] = [torch.from_numpy(a) for a in _arrays(case, np)]
        x, w, b = cache[case.shape]
        torch.set_num_threads(case.threads)
        with torch.no_grad():
            times = _run._timed(lambda: torch.conv_tbc(x, w, b, case.shape[5]), req["reps"])
        print(json.dumps({"times": times}), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker == "modes":
        return worker_modes()
    if args.worker == "torch":
        return worker_torch()
    shapes = FAIRSEQ[:1] if args.quick else FAIRSEQ
    cases = [Case("fairseq", s, "float32", 0, t) for s in shapes for t in (1, 2)]
    results, have_torch = _run.alternate(__file__, "modes", cases, args.passes, args.reps)
    cols = [m[0] for m in MODES] + (["torch"] if have_torch else [])
    if args.md:
        print("| shape (T,B,Cin,Cout,K,pad) | thr | " + " | ".join(f"{c} ms" for c in cols)
              + " | torch / fp32 | hf32 / fp32 | use_fp16 / fp32 | fp16 / fp32 | bf16 / fp32 | fp32 GFLOP/s |")
        print("|---|---|" + "---|" * (len(cols) + 6))
    for c in cases:
        res = results[c.name]
        med = {k: statistics.median(v) for k, v in res.items()}
        f = med["fp32"]
        vs_torch = _run.paired_ratio(res, "torch", "fp32") if "torch" in med else float("nan")
        ratios = [_run.paired_ratio(res, k, "fp32") for k in ("hf32", "fp32_use_fp16", "fp16", "bf16")]
        gflops = c.flops / 2 / f / 1e9
        if args.md:
            print(f"| {','.join(map(str, c.shape))} | {c.threads} | "
                  + " | ".join(f"{med[k] * 1e3:.1f}" for k in cols)
                  + f" | {vs_torch:.2f}x | " + " | ".join(f"{r:.2f}x" for r in ratios) + f" | {gflops:.0f} |")
        else:
            print(c.name, " ".join(f"{k}={med[k] * 1e3:.1f}ms" for k in cols),
                  f"torch/fp32={vs_torch:.2f}", " ".join(f"{r:.2f}" for r in ratios), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
