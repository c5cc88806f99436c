"""BF16 on AMX tiles: the backward and the forward with the AMX path, with the FMA kernels alone (AVX-512), and
torch's CPU bf16 conv_tbc / conv_tbc_backward, on the fairseq shapes, 1 and 2 threads.

    python bench/amx.py              # every fairseq shape, 1 and 2 threads
    python bench/amx.py --quick      # one shape
    python bench/amx.py --md         # Markdown rows (docs/performance.md, "AMX for BF16")

Our two paths run in one worker process (their calls interleaved, the order alternating between passes; the
hook ``isa`` picks 'amx' or 'avx512'), torch in another (as bench/run.py).  Per path the share of cube blocks
that took the tiles is reported (``_conv_tbc.amx_counts``: blocks outside the guard run on the FMA kernels).
Where the AMX tiles are off (no AMX-BF16, no permission, or a failed self-test) the script says why and times
the FMA kernels and torch only: the software stand-in ('amx_standin') is a test vehicle, not a fast path.
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

OPS = ("bwd", "fwd")


def _calls(pyconvtbc, case, arrs):
    dy, x, w, b = arrs
    pad, t = case.shape[5], case.threads
    return {"bwd": lambda: pyconvtbc.conv_tbc_backward(dy, x, w, b, pad, num_threads=t),
            "fwd": lambda: pyconvtbc.conv_tbc(x, w, b, pad, num_threads=t)}


def worker_paths():
    import numpy as np
    import pyconvtbc
    from pyconvtbc._kernels import _conv_tbc as K

    paths = (["amx"] if K.amx_status()["amx"] else []) + ["avx512" if "avx512" in K.isas() else K.isa_supported()]
    for line in sys.stdin:
        req = json.loads(line)
        case = _run._case(req["case"])
        arrs = _run._inputs(case, np)
        out = {}
        for op in OPS:
            calls = []
            for p in (paths if req["pass"] % 2 == 0 else paths[::-1]):
                f = _calls(pyconvtbc, case, arrs)[op]

                def call(p=p, f=f):
                    with K.hooks.override(isa=p):
                        return f()
                calls.append((f"{op}_{p}", call))
            out.update(_run._interleaved(calls, req["reps"]))
            if "amx" in paths:                                  # the share of blocks on the tiles, one call
                K.amx_counts(hw=True)
                dict(calls)[f"{op}_amx"]()
                steps, falls = K.amx_counts(hw=True)
                out[f"{op}_tiles"] = steps / max(1, steps + falls)
        print(json.dumps(out), flush=True)


def worker_torch():
    import numpy as np
    import torch

    for line in sys.stdin:
        req = json.loads(line)
        case = _run._case(req["case"])
        dy, x, w, b = [torch.from_numpy(np.asarray(a, np.float32)).to(torch.bfloat16)
                       for a in _run._inputs(case, np)]
        torch.set_num_threads(case.threads)
        pad = case.shape[5]
        out = {"bwd_torch": min(_run._timed(lambda: torch.ops.aten.conv_tbc_backward(dy, x, w, b, pad),
                                            req["reps"])),
               "fwd_torch": min(_run._timed(lambda: torch.conv_tbc(x, w, b, pad), req["reps"]))}
        print(json.dumps(out), flush=True)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--passes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--md", action="store_true")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker == "paths":
        return worker_paths()
    if args.worker == "torch":
        return worker_torch()
    from pyconvtbc._kernels import _conv_tbc as K
    st = K.amx_status()
    print(f"AMX tiles: {'on' if st['amx'] else 'off (' + st['amx_why'] + ')'}; CPU kernels: {K.isa_supported()}",
          flush=True)
    shapes = FAIRSEQ[:1] if args.quick else FAIRSEQ
    cases = [Case("fairseq", s, "bfloat16", 0, t) for s in shapes for t in (1, 2)]
    results, _ = _run.alternate(__file__, "paths", cases, args.passes, args.reps)
    for c in cases:
        res = results[c.name]
        med = {k: statistics.median(v) for k, v in res.items()}
        cells = []
        for op in OPS:
            fma = next(k for k in med if k.startswith(op + "_") and k not in (f"{op}_amx", f"{op}_tiles",
                                                                             f"{op}_torch"))
            row = [f"{op}: FMA {med[fma] * 1e3:.1f} ms"]
            if f"{op}_amx" in med:
                row.append(f"AMX {med[op + '_amx'] * 1e3:.1f} ms ({med[op + '_tiles'] * 100:.0f}% of blocks on "
                           f"tiles), AMX/FMA {_run.paired_ratio(res, fma, op + '_amx'):.2f}x")
            if f"{op}_torch" in med:
                best = op + "_amx" if op + "_amx" in med else fma
                row.append(f"torch {med[op + '_torch'] * 1e3:.1f} ms, torch/ours "
                           f"{_run.paired_ratio(res, op + '_torch', best):.2f}x")
            cells.append(", ".join(row))
        sep = " | " if args.md else "; "
        print(("| " if args.md else "") + f"{','.join(map(str, c.shape))} t{c.threads}{sep}" + sep.join(cells)
              + (" |" if args.md else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
