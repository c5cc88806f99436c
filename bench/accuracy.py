"""fp32 (KEEP_DTYPE) error of the accumulation forms against float64, next to PyTorch's CPU conv_tbc_backward.

    python bench/accuracy.py            # the long-reduction shapes of docs/precision.md, "Accumulation model"
    python bench/accuracy.py --md       # the same as a Markdown table

For each shape, gradInput and gradWeight are computed from the same float32 operands (standard normal, fixed
seed) by pyconvtbc with accumulation = sequential / cube / cube_wide / cube_rz (deterministic, ascend910b) and
by torch (when installed), and compared with a float64 computation of the same formula.  Reported: the largest
absolute error divided by the largest |exact| value of that gradient (a scale-free max error).
"""
import argparse
import sys

import numpy as np

import pyconvtbc as pc

SHAPES = [(4096, 8, 256, 256, 3, 1), (128, 32, 512, 512, 3, 1), (9, 4096, 64, 24, 3, 1)]
FORMS = ["sequential", "cube", "cube_wide", "cube_rz"]


def exact(dy, x, w, pad):
    """float64 gradInput and gradWeight (BLAS in float64; exact enough to measure fp32 errors)."""
    T_in, B, Cin = x.shape
    K = w.shape[0]
    T_out = dy.shape[0]
    dy64, x64, w64 = dy.astype(np.float64), x.astype(np.float64), w.astype(np.float64)
    xp = np.zeros((T_out + K - 1, B, Cin))
    lo = max(0, pad)
    xp[lo:lo + T_in] = x64[: T_out + K - 1 - lo]
    gw = np.stack([np.tensordot(xp[k:k + T_out], dy64, axes=([0, 1], [0, 1])) for k in range(K)])
    dyp = np.zeros((T_in + K - 1 + 2 * pad, B, dy.shape[2]))
    dyp[K - 1:K - 1 + T_out] = dy64
    gi = np.zeros((T_in, B, Cin))
    for k in range(K):
        # gi[t] += dy[t + pad - k] @ w[k].T ; dyp[j] = dy[j - (K-1)]
        s = K - 1 + pad - k
        gi += dyp[s:s + T_in] @ w64[k].T
    return gi, gw


def rel_max(a, ref):
    return float(np.abs(a.astype(np.float64) - ref).max() / max(np.abs(ref).max(), 1e-300))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--md", action="store_true", help="print a Markdown table")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    try:
        import torch
    except ImportError:
        torch = None
    rows = []
    for shape in SHAPES:
        T_in, B, Cin, Cout, K, pad = shape
        T_out = T_in + 2 * pad - K + 1
        rng = np.random.default_rng(args.seed)
        x = rng.standard_normal((T_in, B, Cin), dtype=np.float32)
        w = rng.standard_normal((K, Cin, Cout), dtype=np.float32)
        dy = rng.standard_normal((T_out, B, Cout), dtype=np.float32)
        b = np.zeros(Cout, np.float32)
        gi64, gw64 = exact(dy, x, w, pad)
        res = {}
        for f in FORMS:
            gi, gw, _ = pc.conv_tbc_backward(dy, x, w, b, pad, accumulation=f, deterministic=True)
            res[f] = (rel_max(gi, gi64), rel_max(gw, gw64))
        if torch is not None:
            tgi, tgw, _ = torch.ops.aten.conv_tbc_backward(torch.from_numpy(dy), torch.from_numpy(x),
                                                           torch.from_numpy(w), torch.from_numpy(b), pad)
            res["torch"] = (rel_max(tgi.numpy(), gi64), rel_max(tgw.numpy(), gw64))
        rows.append((shape, res))
        if not args.md:
            print(shape, "  ".join(f"{k}: gi {v[0]:.2e} gw {v[1]:.2e}" for k, v in res.items()), flush=True)
    if args.md:
        names = list(rows[0][1])
        print("| shape (T_in,B,Cin,Cout,K,pad) | terms gi / gw | gradient | " + " | ".join(names) + " |")
        print("|---|---|---|" + "---|" * len(names))
        for shape, res in rows:
            T_in, B, Cin, Cout, K, pad = shape
            T_out = T_in + 2 * pad - K + 1
            for gi_, g in ((0, "gradInput"), (1, "gradWeight")):
                terms = f"{K * Cout} / {B * T_out}"
                print(f"| {','.join(map(str, shape))} | {terms} | {g} | "
                      + " | ".join(f"{res[n][gi_]:.2e}" for n in names) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
