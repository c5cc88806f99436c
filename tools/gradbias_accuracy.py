"""gradBias accuracy, before and after ReduceSum's order: error against the float64 sum and against torch's
fp32 sum, for 10^2 .. 10^6 terms (T_out*B) and a small and a large Cout.  Prints the table of docs/precision.md
("gradBias: ReduceSum's order").  Run from the repository root:  python tools/gradbias_accuracy.py

grad_output ~ N(1, 1) in fp32 (a nonzero mean: the sums grow with the count, as a chain's error does).
Error of one channel: |sum - exact| / |exact|, exact = the float64 sum of the same fp32 values; the table gives
the median and the largest over the channels.  "sequential" is the chain the backward used before (fp32 runs
of 256 rows, then the runs in order); "ReduceSum" is ascend950's order through the C kernel.
"""
import sys

import numpy as np
import torch

sys.path.insert(0, "tests")
from gradbias_reference import sequential_order  # noqa: E402

from pyconvtbc._gradbias import geometry  # noqa: E402
from pyconvtbc._kernels import _bias  # noqa: E402


def reducesum(dy):
    T, B, C = dy.shape
    g = geometry("ascend950", T * B, C, 0)
    out = np.zeros(C, np.float32)
    _bias.reduce_sum((dy.__array_interface__["data"][0], *dy.strides, 0), dy.shape, tuple(g),
                     (out.__array_interface__["data"][0], 0))
    return out, g


def main():
    rng = np.random.default_rng(0)
    print("| terms | Cout | geometry (rows/tile, tiles/core, groups) | sequential: median / max rel. error | "
          "ReduceSum: median / max | torch: median / max | max vs torch (seq. / ReduceSum) |")
    print("|---|---|---|---|---|---|---|")
    for n in (10**2, 10**3, 10**4, 10**5, 10**6):
        for C in (8, 256):
            B = 10 if n >= 100 else 1
            dy = (rng.standard_normal((n // B, B, C)) + 1.0).astype(np.float32)
            exact = dy.astype(np.float64).sum((0, 1))
            seq = sequential_order(dy.reshape(n, C))
            rs, g = reducesum(dy)
            tr = torch.from_numpy(dy).sum((0, 1)).numpy()
            err = lambda v: np.abs(v.astype(np.float64) - exact) / np.abs(exact)
            vt = lambda v: np.abs(v.astype(np.float64) - tr.astype(np.float64)) / np.abs(exact)
            groups = -(-(-(-n // g.tile_rows)) // g.tiles_per_group)
            cells = [f"{np.median(err(v)):.1e} / {err(v).max():.1e}" for v in (seq, rs, tr)]
            print(f"| {n:.0e} | {C} | {g.tile_rows}, {g.tiles_per_group}, {groups} | " + " | ".join(cells) +
                  f" | {vt(seq).max():.1e} / {vt(rs).max():.1e} |")


if __name__ == "__main__":
    main()
