"""Where the time of one call goes: pack, gradInput and gradWeight timed apart, per accumulation form.

    python bench/phases.py                  # fp32 fairseq shapes, 1 thread, "sequential" and "cube"
    python bench/phases.py --threads 2      # the same with 2 threads (wall time)
    python bench/phases.py --quick          # one shape
    python bench/phases.py --shape 512,32,16,16,3,1 --reps 20   # any shape (T, B, Cin, Cout, K, pad)

Uses the profiling hook _conv_tbc._set_phase_mask (1 pack, 2 gi, 4 gw; the results of a partial call are
garbage): pack = time(mask 1), gi = time(mask 3) - pack, gw = time(mask 5) - pack, total = time(mask 7).  Each
entry is the median over --passes alternating passes of the best of --reps calls.  With one thread the time is
the process's CPU time (time.process_time), so that other processes on a shared machine disturb it less; with
more threads it is wall time.  GFLOP/s count 2*T_out*B*Cin*Cout*K per gradient.
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _cases import FAIRSEQ  # noqa: E402

MASKS = (1, 3, 5, 7)


def _inputs(shape, np):
    T_in, B, Cin, Cout, K, pad = shape
    T_out = T_in + 2 * pad - K + 1
    rng = np.random.default_rng(0)
    mk = lambda *s: rng.standard_normal(s, dtype=np.float32)  # noqa: E731
    return mk(T_out, B, Cout), mk(T_in, B, Cin), mk(K, Cin, Cout), mk(Cout)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--forms", default="sequential,cube", help="comma-separated accumulation forms")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--shape", help="one shape T,B,Cin,Cout,K,pad instead of the fairseq set")
    ap.add_argument("--soc", default="ascend910b", help="the chip profile whose order the sums follow")
    args = ap.parse_args(argv)
    import numpy as np
    import pyconvtbc
    from pyconvtbc._kernels import _conv_tbc as K

    clock = time.process_time if args.threads == 1 else time.perf_counter
    forms = args.forms.split(",")
    shapes = FAIRSEQ[:1] if args.quick else FAIRSEQ
    if args.shape:
        shapes = [tuple(int(v) for v in args.shape.split(","))]
        if len(shapes[0]) != 6:
            ap.error(f"--shape is {args.shape!r}; expected six integers T,B,Cin,Cout,K,pad")
    print(f"isa {K.isa()}, {args.soc}, {args.threads} thread(s), {'CPU' if args.threads == 1 else 'wall'} time, ms")
    for shape in shapes:
        dy, x, w, b = _inputs(shape, np)
        T_in, B, Cin, Cout, Kk, pad = shape
        gflop = 2 * (T_in + 2 * pad - Kk + 1) * B * Cin * Cout * Kk / 1e9
        res = {}
        old = K._set_phase_mask(7)
        try:
            for p in range(args.passes):
                order = [(f, m) for f in forms for m in MASKS]
                for form, mask in (order if p % 2 == 0 else order[::-1]):
                    K._set_phase_mask(mask)
                    call = lambda: pyconvtbc.conv_tbc_backward(  # noqa: E731
                        dy, x, w, b, pad, num_threads=args.threads, accumulation=form, soc=args.soc)
                    call()
                    best = float("inf")
                    for _ in range(args.reps):
                        t0 = clock()
                        call()
                        best = min(best, clock() - t0)
                    res.setdefault((form, mask), []).append(best)
        finally:
            K._set_phase_mask(old)
        med = {k: statistics.median(v) * 1e3 for k, v in res.items()}
        for form in forms:
            pack = med[(form, 1)]
            gi, gw = med[(form, 3)] - pack, med[(form, 5)] - pack
            print(f"{','.join(map(str, shape)):>22} {form:>10}: pack {pack:8.3f}  gi {gi:8.3f} "
                  f"({gflop / gi * 1e3:5.1f} GFLOP/s)  gw {gw:8.3f} ({gflop / gw * 1e3:5.1f} GFLOP/s)  "
                  f"total {med[(form, 7)]:8.3f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
