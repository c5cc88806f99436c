"""The command line: ``python -m pyconvtbc study [modes|spread|growth] [options]``."""
from __future__ import annotations

import argparse
import os
import shlex
import sys

from .choices import (_AXES, GRADS, REFERENCES, _norm_distribution, _norm_grads, _norm_permutations,
                      _norm_scale, _normalise)
from .data import Shape
from .grid import Grid
from .growth import _GROWTH_METRICS, error_growth
from .modes import run_study
from .spread import reduction_order_spread

_EPILOG = """\
examples:
  python -m pyconvtbc study                                  # per-mode table, default shape, FLOAT inputs
  python -m pyconvtbc study --soc all --input-dtype all --out study_out
  python -m pyconvtbc study --cube USE_HF32 --soc ascend910b,ascend950 --hf32-rounding all --hf32-mantissa-bits 10,11
  python -m pyconvtbc study --cube KEEP_DTYPE --grad-weight-dtype hifloat8,float8_e4m3fn \\
        --hif8-rounding all --saturate all --scale 1e-4,1,30 --grads gw
  python -m pyconvtbc study spread --cube KEEP_DTYPE,USE_HF32 --permutations 20
  python -m pyconvtbc study growth --values 16,64,256,1024,4096
Lists are comma-separated; 'all' takes every value of an axis.  Options of each sub-command:
  python -m pyconvtbc study {modes,spread,growth} --help          (docs/studies.md: the five workflows)"""


def _split(argname, text, all_values):
    items = [t.strip() for t in str(text).split(",") if t.strip()]
    if not items:
        raise ValueError(f"{argname}: {text!r} is empty; expected a comma-separated list")
    if len(items) == 1 and items[0].lower() == "all":
        return list(all_values)
    return items


def _parser():
    common = argparse.ArgumentParser(add_help=False)
    d = common.add_argument_group("data")
    d.add_argument("--shape", action="append", metavar="T,B,Cin,Cout,K[,pad]",
                   help="problem size (repeat for several); default 64,8,64,64,3,1 (growth: 16,8,32,32,3,1)")
    d.add_argument("--npz", metavar="FILE", help="arrays grad_output, input, weight [, bias, pad] from an .npz "
                   "file instead of random data")
    d.add_argument("--pad", type=int, default=None, help="padding for --npz data (default: the file's 'pad' or 0)")
    d.add_argument("--dist", default="normal", metavar="NAME",
                   help="normal | uniform | lognormal[:SIGMA] (random-sign lognormal); default normal")
    d.add_argument("--scale", default="1", metavar="S[,S...]", help="multiply the data by each scale; default 1")
    d.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    g = common.add_argument_group("grid (comma-separated lists, or 'all')")
    g.add_argument("--input-dtype", default="float32", metavar="LIST", help="float32,float16,bfloat16")
    g.add_argument("--cube", default="all", metavar="LIST",
                   help="cubeMathType: KEEP_DTYPE,ALLOW_FP32_DOWN_PRECISION,USE_FP16,USE_HF32 (or 0-3); default all")
    g.add_argument("--soc", default="ascend910b", metavar="LIST", help="ascend910b,ascend950,ascend910")
    g.add_argument("--grad-weight-dtype", default="same", metavar="LIST",
                   help="same (the weight's),float32,float16,bfloat16,hifloat8,float8_e4m3fn")
    g.add_argument("--hf32-rounding", default="half_away", metavar="LIST", help="half_away,nearest_even")
    g.add_argument("--hf32-mantissa-bits", default="profile", metavar="LIST", help="profile,10,11")
    g.add_argument("--hif8-rounding", default="ta", metavar="LIST", help="ta,hybrid")
    g.add_argument("--saturate", default="off", metavar="LIST", help="off,on (8-bit gradWeight overflow)")
    m = common.add_argument_group("measurement")
    m.add_argument("--grads", default=None, metavar="LIST",
                   help="gradInput,gradWeight,gradBias (or gi,gw,gb); default all (spread: gi,gw)")
    m.add_argument("--reference", default="inputs", metavar="WHICH",
                   help="inputs: float64 of the operator's inputs (default); source: of the data before the "
                        "cast to the input dtype")
    m.add_argument("--non-deterministic", action="store_true",
                   help="use the profile's default determinism instead of deterministic mode")
    m.add_argument("--threads", type=int, default=None, help="kernel threads (default: all cores)")
    o = common.add_argument_group("output")
    o.add_argument("--out", metavar="DIR", help="write <prefix>.csv, .json, .md and plots/*.png into DIR")
    o.add_argument("--prefix", default=None, help="file name prefix (default: study, spread or growth)")
    o.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    pr = o.add_mutually_exclusive_group()
    pr.add_argument("--progress", dest="progress", action="store_const", const=True, default="auto",
                    help="always show the progress bar (default: when stderr is a terminal)")
    pr.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                    help="never show the progress bar")

    top = argparse.ArgumentParser(
        prog="python -m pyconvtbc study", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Precision studies of the emulated NPU modes of aclnnConvTbcBackward: each mode's gradients "
                    "against a float64 reference (max abs / rel error, relative Frobenius error, ULP error in the "
                    "output format, overflow / underflow / NaN / Inf counts).  Sub-commands: modes (default), "
                    "spread, growth.", epilog=_EPILOG)
    sub = top.add_subparsers(dest="command", metavar="{modes,spread,growth}")
    sub.add_parser("modes", parents=[common], help="per-mode error table (the default)",
                   description="Per-mode error table over the grid.", epilog=_EPILOG,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = sub.add_parser("spread", parents=[common], help="run-to-run spread from the fp32 accumulation order",
                        description="For each cell: the spread of N seeded fp32 accumulation orders next to the "
                                    "mode's error, in ULPs of the output format.")
    sp.add_argument("--permutations", type=int, default=20, help="number of accumulation orders (default 20)")
    sp.add_argument("--fixed-order", action="store_true",
                    help="deterministic hardware: every run uses the same order (spread 0)")
    gr = sub.add_parser("growth", parents=[common], help="error against the reduction length",
                        description="Each mode's error as one size grows (T grows gradWeight's B*T_out; Cout or K "
                                    "grows gradInput's K*Cout).")
    gr.add_argument("--axis", default="T", help="size to sweep: T, B, Cin, Cout, K (default T)")
    gr.add_argument("--values", default="16,64,256,1024", metavar="LIST", help="values of the axis")
    gr.add_argument("--metric", default="rel_fro", help=f"metric of the table: {', '.join(_GROWTH_METRICS)}")
    return top


# The option of each grid axis (its value: a comma-separated list, or 'all').
_GRID_OPTIONS = {"input_dtypes": "--input-dtype", "cube_math_types": "--cube", "socs": "--soc",
                 "grad_weight_dtypes": "--grad-weight-dtype", "hf32_roundings": "--hf32-rounding",
                 "hf32_mantissa_bits": "--hf32-mantissa-bits", "hif8_roundings": "--hif8-rounding",
                 "saturate": "--saturate"}


def _grid_from_args(a):
    axes = {}
    for axis, (norm, every) in _AXES.items():
        opt = _GRID_OPTIONS[axis]
        axes[axis] = tuple(norm(opt, v) for v in _split(opt, getattr(a, opt[2:].replace("-", "_")), every))
    return Grid(**axes)


def cli(argv=None):
    """``python -m pyconvtbc study [modes|spread|growth] [options]``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] not in ("modes", "spread", "growth", "-h", "--help"):
        argv = ["modes"] + argv
    try:
        a = _parser().parse_args(argv)
    except SystemExit as e:       # --help (0) or a usage error (2, message already on stderr)
        return int(e.code or 0)
    try:
        grid = _grid_from_args(a)
        scales = [_norm_scale("--scale", s) for s in _split("--scale", a.scale, ())]
        if not scales:
            raise ValueError(f"--scale: {a.scale!r} names no scale; expected positive numbers, e.g. 1e-4,1,30")
        grads = _norm_grads(_split("--grads", a.grads, GRADS), "--grads") if a.grads else None
        shapes = [Shape.parse(s, "--shape") for s in a.shape] if a.shape else None
        _norm_distribution(a.dist, "--dist")
        _normalise("--reference", a.reference, REFERENCES, what="reference")
        if a.threads is not None and a.threads < 1:
            raise ValueError(f"--threads: {a.threads}; expected an integer >= 1")
        if a.npz is not None and a.command == "growth":
            raise ValueError("--npz: growth sweeps generated data; expected --shape (the base shape) instead")
        det = None if a.non_deterministic else True
        common = dict(grid=grid, distribution=a.dist, seed=a.seed, reference=a.reference,
                      num_threads=a.threads, progress=a.progress)
        if a.command == "modes":
            res = run_study(shapes, npz=a.npz, pad=a.pad, scales=scales, grads=grads or GRADS,
                            deterministic=det, **common)
        elif a.command == "spread":
            _norm_permutations(a.permutations, "--permutations")
            res = reduction_order_spread(shapes, npz=a.npz, pad=a.pad, scales=scales,
                                         grads=grads or ("gradInput", "gradWeight"),
                                         permutations=a.permutations, deterministic=a.fixed_order, **common)
        else:
            if shapes and len(shapes) > 1:
                raise ValueError("--shape: growth takes one base shape; expected a single --shape")
            if len(scales) > 1:
                raise ValueError("--scale: growth takes one scale; expected a single value")
            vals = _split("--values", a.values, ())
            res = error_growth(shapes[0] if shapes else None, vals, a.axis, scale=scales[0], grads=grads or GRADS,
                               metric=a.metric, deterministic=det, **common)
    except (ValueError, OSError) as e:
        print(f"study: error: {e}", file=sys.stderr)
        return 2
    res.meta["command"] = "python -m pyconvtbc study " + " ".join(shlex.quote(s) for s in argv)
    print(res.table())
    if a.out:
        made = res.save(a.out, a.prefix, plots=not a.no_plots)
        files = [made["csv"], made["json"], made["md"]] + made["plots"]
        print(f"\nwrote {len(files)} files to {a.out}: " + ", ".join(os.path.relpath(f, a.out) for f in files))
        if not a.no_plots and not made["plots"]:
            print("(plots skipped: matplotlib is not installed; pip install 'pyconvtbc[plot]')")
    return 0
