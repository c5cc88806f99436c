"""Codec throughput: pyconvtbc's HiFloat8 encoder vs ml_dtypes' float8_e4m3fn cast, HF32 rounding vs NumPy.

    python bench/bench_codecs.py [--n 10000000] [--reps 7] [--threads N]

Both sides of each comparison run on the same float32 array, alternating, ``--reps`` times; the medians and
the median of the per-repetition ratios are printed (ratio > 1: pyconvtbc is faster).  The HiFloat8 encoder
is timed single-threaded (like ml_dtypes' cast) and with ``--threads`` threads (default: all cores).
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))   # run from a checkout

import ml_dtypes
from pyconvtbc import codecs  # noqa: E402
from pyconvtbc._kernels._openmp import effective_threads  # noqa: E402


def _time(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def compare(name, ours, theirs, reps):
    ours(), theirs()                                     # warm up (page faults, caches)
    to, tt, ratios = [], [], []
    for _ in range(reps):
        a = _time(ours)
        b = _time(theirs)
        to.append(a)
        tt.append(b)
        ratios.append(b / a)
    print(f"{name:<44s} ours {statistics.median(to) * 1e3:8.2f} ms   reference {statistics.median(tt) * 1e3:8.2f} ms"
          f"   median ratio {statistics.median(ratios):5.2f}x")
    return statistics.median(ratios)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000_000)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    nt = effective_threads(args.threads)

    rng = np.random.default_rng(0)
    # gradient-like data: normal values over many binades, all HiFloat8 classes and the under/overflow ranges
    x = (rng.standard_normal(args.n) * np.exp2(rng.uniform(-26, 17, args.n))).astype(np.float32)
    print(f"n = {args.n:,} float32, {args.reps} alternating repetitions, threads = {nt}")

    e4m3 = lambda: x.astype(ml_dtypes.float8_e4m3fn)                               # noqa: E731
    compare("hif8_encode (1 thread) vs astype(e4m3fn)", lambda: codecs.hif8_encode(x, num_threads=1), e4m3,
            args.reps)
    compare(f"hif8_encode ({nt} threads) vs astype(e4m3fn)", lambda: codecs.hif8_encode(x, num_threads=nt),
            e4m3, args.reps)
    compare("e4m3fn_encode (1 thread) vs astype(e4m3fn)", lambda: codecs.e4m3fn_encode(x, num_threads=1), e4m3,
            args.reps)

    def numpy_hf32():
        i = x.view(np.int32)
        return ((((i >> 11) + 1) >> 1) << 12).view(np.float32)

    assert np.array_equal(codecs.round_to_hf32(x), numpy_hf32())
    compare("round_to_hf32 (1 thread) vs NumPy bit ops", lambda: codecs.round_to_hf32(x, num_threads=1),
            numpy_hf32, args.reps)
    compare(f"round_to_hf32 ({nt} threads) vs NumPy bit ops", lambda: codecs.round_to_hf32(x, num_threads=nt),
            numpy_hf32, args.reps)


if __name__ == "__main__":
    main()
