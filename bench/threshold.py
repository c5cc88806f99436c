"""Measure where 2 threads start to pay off (the kernels' serial threshold, PARALLEL_MIN_FLOPS, in "work M":
lane flops, channels rounded up to the 16 vector lanes, plus the packing passes; see _conv_tbc.pyx).

    python bench/threshold.py            # prints, per size and idle gap between calls, 1- vs 2-thread times

Calls the kernel entry point directly (no API layer) with the threshold forced to 0, for problems
(512, 32, C, C, 3, 1) of growing C, with an idle gap (sleep) before each timed call: 0 (the worker threads are
still spinning from the previous call), 10 ms and 100 ms (they have gone to sleep and must be woken).
"""
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from pyconvtbc._kernels import _conv_tbc as K  # noqa: E402


def setup(shape, threads):
    T, B, Ci, Co, KK, p = shape
    To = T + 2 * p - KK + 1
    rng = np.random.default_rng(0)
    arrs = [rng.standard_normal(s, dtype=np.float32) for s in ((To, B, Co), (T, B, Ci), (KK, Ci, Co))]
    outs = [np.zeros((T, B, Ci), np.float32), np.zeros((KK, Ci, Co), np.float32), np.zeros(Co, np.float32)]
    n = K.workspace_size(shape, 0, (0,) * 6, threads)
    ws = np.zeros(max(n, 1), np.uint8)
    ops = [(a.ctypes.data, *a.strides, 0) for a in arrs]
    args = (*ops, *[(o.ctypes.data, 0) for o in outs], shape, (0, 11, 0, 0, False), ws.ctypes.data, n, threads)
    up = lambda c: -(-c // 16) * 16   # noqa: E731  (channels rounded up to the 16 vector lanes)
    work = 2 * To * B * KK * (up(Ci) * Co + Ci * up(Co)) + 8 * (To * B * Co + T * B * Ci)
    return args, (arrs, outs, ws), 4 * To * B * Ci * Co * KK, work


def main():
    reps = int(sys.argv[1]) if len(sys.argv) > 1 else 15
    old = K._set_parallel_min(0)
    try:
        print(f"{'shape':>22} {'MFLOP':>8} {'work M':>7} {'gap ms':>7} {'1 thread ms':>12} {'2 threads ms':>13} {'speed-up':>9}")
        shapes = [(512, 32, C, C, 3, 1) for C in (2, 4, 8, 16, 24, 32, 48, 64)]
        shapes[2:2] = [(64, 8, 16, 16, 3, 1), (128, 16, 16, 16, 3, 1), (64, 16, 32, 32, 3, 1),
                       (32, 16, 64, 64, 3, 1), (64, 16, 64, 64, 3, 1)]
        for shape in shapes:
            for gap in (0.0, 0.01, 0.1):
                res = {}
                for t in (1, 2):
                    args, keep, flops, work = setup(shape, t)
                    K.run(*args)
                    ts = []
                    for _ in range(reps):
                        if gap:
                            time.sleep(gap)
                        t0 = time.perf_counter()
                        K.run(*args)
                        ts.append(time.perf_counter() - t0)
                    res[t] = statistics.median(ts)
                print(f"{str(shape):>22} {flops / 1e6:8.1f} {work / 1e6:7.1f} {gap * 1e3:7.0f} {res[1] * 1e3:12.3f} {res[2] * 1e3:13.3f} "
                      f"{res[1] / res[2]:8.2f}x", flush=True)
    finally:
        K._set_parallel_min(old)


if __name__ == "__main__":
    main()
