"""The command line: ``python -m pyconvtbc study [modes|spread|growth] [options]``."""
from __future__ import annotations

import argparse
import os
import re
import shlex
import sys
import textwrap

from ..__main__ import _prog
from .._hints import TORCH_INSTALL
from .choices import (_AXES, GRADS, GW_DTYPES, HF32_ROUNDINGS, HIF8_ROUNDINGS, INPUT_DTYPES, MAX_PERMUTATIONS,
                      MAX_THREADS, REFERENCES, _norm_distribution, _norm_grads, _norm_permutations, _norm_scale_rule,
                      _normalise)
from .data import Shape, check_size
from .grid import Grid
from .growth import _GROWTH_METRICS, error_growth
from .modes import run_study
from .plots import plot_names
from .report import _check_prefix, default_prefix
from .table import TABLE_WIDTH
from .spread import ORDER_SOURCES, reduction_order_spread
from .window import _norm_exponents, _norm_threshold, scale_window

_COMMANDS = ("modes", "spread", "growth", "window")

_EPILOG = """\
examples:
  python -m pyconvtbc study                                  # per-mode table, default shape, FLOAT inputs
  python -m pyconvtbc study --soc all --input-dtype all --out study_out
  python -m pyconvtbc study --cube USE_HF32 --soc ascend910b,ascend950 --hf32-rounding all --hf32-mantissa-bits 10,11
  python -m pyconvtbc study --cube KEEP_DTYPE --grad-weight-dtype hifloat8,float8_e4m3fn \\
        --hif8-rounding all --saturate all --scale 1e-4,1,30 --grads gw
  python -m pyconvtbc study spread --cube KEEP_DTYPE,USE_HF32 --permutations 20
  python -m pyconvtbc study growth --values 16,64,256,1024,4096 --repeat 5
  python -m pyconvtbc study --cube KEEP_DTYPE --grad-weight-dtype hifloat8 --scale 1,amax --magnitudes
  python -m pyconvtbc study window --cube KEEP_DTYPE --grad-weight-dtype hifloat8,float8_e4m3fn
  python -m pyconvtbc study --data layers.pt --grad-weight-dtype float8_e4m3fn --scale 1,amax
  python -m pyconvtbc study train --steps 200 --modes torch,KEEP_DTYPE,USE_HF32,bf16
Lists are comma-separated; 'all' takes every value of an axis.  Options of each sub-command:
  python -m pyconvtbc study {modes,spread,growth,window,train} --help     (docs/studies.md: the workflows)"""



def _split(argname, text, all_values):
    items = [t.strip() for t in str(text).split(",")]
    if not any(items):
        raise ValueError(f"{argname}: {text!r} is empty; expected a comma-separated list")
    if not all(items):
        raise ValueError(f"{argname}: {text!r} has an empty item; expected a comma-separated list without empty "
                         "entries")
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
    d.add_argument("--data", metavar="PATH", help="real operands instead of random data: an .npz file, a directory "
                   "of .npy files (grad_output.npy, input.npy, weight.npy [, bias.npy, pad.npy]) or a .pt file "
                   "(one dict of tensors, or the list that pyconvtbc.study.capture saves: one problem per layer)")
    d.add_argument("--pad", type=int, default=None,
                   help="padding for --npz / --data, 0..255, overriding the file's (default: the file's or 0); "
                        "generated data take theirs from --shape")
    d.add_argument("--dist", default=None, metavar="NAME",
                   help="generated data: normal | uniform | lognormal[:SIGMA] (random-sign lognormal); default "
                        "normal")
    d.add_argument("--scale", default="1", metavar="S[,S...]",
                   help="each entry: a number (multiplies grad_output; every operand with --scale-operands all), "
                        "amax[:FRAC] (per mode, grad_output times the power of two that puts the exact "
                        "gradWeight's largest magnitude in (FRAC/2, FRAC] of its output format's largest finite "
                        "value; FRAC by default 2^-11 for hifloat8, 0.5 for the others; lowered where grad_output "
                        "itself would pass FRAC of the input dtype's or the compute precision's range) or best (per "
                        "mode, the power of two of grad_output with the smallest gradWeight rel Frob, of 25 octaves "
                        "from amax:1 down); default 1")
    d.add_argument("--scale-operands", default="grad_output", choices=("grad_output", "all"),
                   help="what a numeric --scale multiplies: grad_output (default: a loss scale, as it reaches the "
                        "backward) or all (every operand: input, weight and bias too)")
    d.add_argument("--seed", type=int, default=None,
                   help="seed of the generated data (and of spread's model orders); default 0")
    d.add_argument("--repeat", type=int, default=1, metavar="N",
                   help="modes, growth: run seeds seed..seed+N-1 and report means with 95%% intervals (default 1)")
    g = common.add_argument_group("grid (comma-separated lists, or 'all')")
    g.add_argument("--input-dtype", default="float32", metavar="LIST",
                   help=",".join(INPUT_DTYPES) + " (all: these); hifloat8: the forward's HiFloat8 operands "
                        "(ascend950, with --grads output)")
    g.add_argument("--cube", default="all", metavar="LIST",
                   help="cubeMathType: KEEP_DTYPE,ALLOW_FP32_DOWN_PRECISION,USE_FP16,USE_HF32 (or 0-3); default all")
    g.add_argument("--soc", default="ascend910b", metavar="LIST", help="ascend910b,ascend950,ascend910")
    g.add_argument("--grad-weight-dtype", default="same", metavar="LIST",
                   help="same (the weight's)," + ",".join(GW_DTYPES[1:]))
    g.add_argument("--hf32-rounding", default="half_away", metavar="LIST", help=",".join(HF32_ROUNDINGS))
    g.add_argument("--hf32-mantissa-bits", default="profile", metavar="LIST",
                   help="profile,10,11 (the chips'), or any of 1..22: a what-if beyond the chips (operands rounded "
                        "to that width, then computed in FP32)")
    g.add_argument("--hif8-rounding", default="ta", metavar="LIST", help=",".join(HIF8_ROUNDINGS))
    g.add_argument("--saturate", default="off", metavar="LIST", help="off,on (8-bit gradWeight overflow)")
    g.add_argument("--accumulation", default="default", metavar="LIST",
                   help="default (the operator's),cube,cube_wide,cube_rz,sequential: how the cube forms its sums")
    g.add_argument("--block-size", default="k0", metavar="LIST",
                   help="k0 (the compute precision's) or integers 1..64: products per cube step")
    m = common.add_argument_group("measurement")
    m.add_argument("--grads", default=None, metavar="LIST",
                   help="gradInput,gradWeight,gradBias (or gi,gw,gb) and output (or out: the forward's result); "
                        "default the three gradients (spread: gi,gw)")
    m.add_argument("--reference", default="inputs", metavar="WHICH",
                   help="inputs: float64 of the operator's inputs (default); source: of the data before the "
                        "cast to the input dtype")
    m.add_argument("--non-deterministic", action="store_true",
                   help="use the profile's default determinism instead of deterministic mode")
    m.add_argument("--threads", type=int, default=None, help=f"kernel threads, 1..{MAX_THREADS} (default: all cores)")
    o = common.add_argument_group("output")
    o.add_argument("--out", metavar="DIR", help="write <prefix>.csv, .json, .md and plots/*.png into DIR")
    o.add_argument("--force", action="store_true", help="overwrite files an earlier run left in --out")
    o.add_argument("--prefix", default=None,
                   help="file name prefix (default: study for modes, else the sub-command: spread, growth, window)")
    o.add_argument("--no-plots", action="store_true", help="do not write PNG plots")
    o.add_argument("--width", type=int, default=TABLE_WIDTH, metavar="N",
                   help=f"longest line of the printed tables (default {TABLE_WIDTH}): a wider table is printed as "
                        "stacked tables that share its row labels; 0: one table, lines as long as they come")
    o.add_argument("--magnitudes", action="store_true",
                   help="modes only: also print where each operand's and gradient's values lie against each "
                        "format's limits (always in the .md report and the magnitudes plot)")
    pr = o.add_mutually_exclusive_group()
    pr.add_argument("--progress", dest="progress", action="store_const", const=True, default="auto",
                    help="always show the progress bar (default: when stderr is a terminal)")
    pr.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                    help="never show the progress bar")

    top = argparse.ArgumentParser(
        prog=f"{_prog()} study", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Precision studies of the emulated NPU modes of aclnnConvTbcBackward: each mode's gradients "
                    "against a float64 reference (max abs / rel error, relative Frobenius error, ULP error in the "
                    "output format, overflow / underflow / NaN / Inf counts).  Sub-commands: modes (default), "
                    "spread, growth, window, train.", epilog=_EPILOG)
    sub = top.add_subparsers(dest="command", metavar="{modes,spread,growth,window,train}")
    sub.add_parser("modes", parents=[common], help="per-mode error table (the default)",
                   description="Per-mode error table over the grid.", epilog=_EPILOG,
                   formatter_class=argparse.RawDescriptionHelpFormatter)
    sp = sub.add_parser("spread", parents=[common], help="run-to-run spread from the fp32 accumulation order",
                        description="For each cell: the spread of N seeded fp32 accumulation orders next to the "
                                    "mode's error, in ULPs of the output format.")
    sp.add_argument("--permutations", type=int, default=20,
                    help=f"number of accumulation orders, 1..{MAX_PERMUTATIONS}, and their results must fit in "
                         "memory like any array of a study (default 20)")
    sp.add_argument("--fixed-order", action="store_true",
                    help="deterministic hardware: every run uses the same order (spread 0)")
    sp.add_argument("--order-source", default="model", metavar="WHICH",
                    help="model: orders sampled in a NumPy model of the sums (default); operator: N calls of the "
                         "operator's own non-deterministic mode (order seeds 0..N-1)")
    gr = sub.add_parser("growth", parents=[common], help="error against the reduction length",
                        description="Each mode's error as one size grows (T grows gradWeight's B*T_out; Cout or K "
                                    "grows gradInput's K*Cout).")
    gr.add_argument("--axis", default="T", help="size to sweep: T, B, Cin, Cout, K (default T)")
    gr.add_argument("--values", default="16,64,256,1024", metavar="LIST", help="values of the axis")
    gr.add_argument("--metric", default="rel_fro", help=f"metric of the table: {', '.join(_GROWTH_METRICS)}")
    wi = sub.add_parser("window", parents=[common], help="the window of grad_output scales without under/overflow",
                        description="For each mode: grad_output scaled by 2^e for each exponent e, and the widest "
                                    "run of e where neither the overflow fraction nor the sub-normal fraction (exact "
                                    "values below the output format's smallest normal) exceeds --threshold and no "
                                    "result is NaN (an unsaturated float8_e4m3fn overflows to NaN), with the error "
                                    "inside it.")
    wi.add_argument("--exponents", default="-32:32", metavar="LO:HI",
                    help="exponents e of the scales 2^e: LO:HI (every integer) or a list, e.g. --exponents -8:8 "
                         "or --exponents=-8:8; default -32:32")
    wi.add_argument("--threshold", default="0.01", help="largest overflow / sub-normal fraction (default 0.01)")
    sub.add_parser("train", add_help=False, help="train a small ConvTBC model in each mode: loss curves, time per "
                   "step (needs torch; python -m pyconvtbc study train --help)")
    return top


def _train_parser():
    from .train import DEFAULT_TRAIN_MODES, TRAIN_MODES
    p = argparse.ArgumentParser(
        prog=f"{_prog()} study train", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a small fairseq-style ConvTBC language model (embedding, causal ConvTBC layers with GLU "
                    "and residuals, linear output) on a synthetic next-token task for N steps in each mode, from the "
                    "same initial weights on the same batches, and report the loss curves against torch's fp32 run "
                    "and the time per step.  Needs torch.",
        epilog="modes:\n" + "\n".join(f"  {k:26s} {v[2]}" for k, v in TRAIN_MODES.items()))
    p.add_argument("--modes", default=",".join(DEFAULT_TRAIN_MODES), metavar="LIST",
                   help=f"comma-separated, or 'all' (default {','.join(DEFAULT_TRAIN_MODES)})")
    p.add_argument("--steps", type=int, default=200, help="training steps per mode (default 200)")
    p.add_argument("--batch", type=int, default=16, help="sequences per batch (default 16)")
    p.add_argument("--length", type=int, default=32, help="tokens predicted per sequence, T (default 32)")
    p.add_argument("--vocab", type=int, default=16, help="vocabulary size (default 16)")
    p.add_argument("--dim", type=int, default=32, help="embedding / channel width (default 32)")
    p.add_argument("--kernel", type=int, default=3, help="ConvTBC kernel size K (default 3)")
    p.add_argument("--layers", type=int, default=2, help="ConvTBC layers (default 2)")
    p.add_argument("--noise", type=float, default=0.1, help="share of random tokens in the data (default 0.1)")
    p.add_argument("--lr", type=float, default=0.5, help="SGD learning rate (default 0.5)")
    p.add_argument("--clip", type=float, default=1.0, help="gradient-norm clipping (default 1.0)")
    p.add_argument("--soc", default=None, help="the emulated chip (default: $PYCONVTBC_SOC_VERSION, else ascend910b)")
    p.add_argument("--seed", type=int, default=0, help="seed of the data and the initial weights (default 0)")
    p.add_argument("--seeds", type=int, default=1, metavar="N",
                   help="train on N seeds (--seed .. --seed+N-1) and print each mode's final loss and its deviation "
                        "from torch as a mean with a 95%% interval, rows as they finish (default 1: one run, the "
                        "loss-curve table); --out then writes <prefix>.json")
    p.add_argument("--threads", type=int, default=1, help="the emulated kernels' threads (default 1)")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="torch's intra-op threads during the run (default 1; restored afterwards)")
    p.add_argument("--markdown", action="store_true", help="print the table as Markdown")
    p.add_argument("--width", type=int, default=TABLE_WIDTH, metavar="N",
                   help=f"longest line of the printed table (default {TABLE_WIDTH}; 0: no limit)")
    p.add_argument("--out", metavar="DIR", help="write <prefix>.csv (every step), .json and plots/<prefix>_loss.png")
    p.add_argument("--force", action="store_true", help="overwrite files an earlier run left in --out")
    p.add_argument("--prefix", default=None, help="file name prefix (default: train)")
    p.add_argument("--no-plots", action="store_true", help="do not write the PNG plot")
    p.add_argument("--progress", dest="progress", action="store_const", const=True, default="auto",
                   help="always show progress on stderr: a bar on a terminal, else plain lines (default: a bar "
                        "when stderr is a terminal, nothing otherwise)")
    p.add_argument("--no-progress", dest="progress", action="store_const", const=False, help="never show progress")
    return p


def _train_seeds_cli(a, modes, torch):
    """``study train --seeds N``: the header first, then each mode's row as it finishes (stdout, flushed)."""
    from .train_seeds import header_lines, row_line, train_seeds
    if not 2 <= a.seeds <= 1000:
        raise ValueError(f"--seeds: {a.seeds}; expected an integer 1..1000")
    if a.markdown:
        raise ValueError("--markdown: --seeds prints its rows as they finish, as text; expected no --markdown")
    if a.out is not None:
        prefix = a.prefix or default_prefix("train")
        _check_out(a.out, prefix, (".json",), [])
    kw = dict(steps=a.steps, batch=a.batch, length=a.length, vocab=a.vocab, dim=a.dim, kernel=a.kernel,
              layers=a.layers, noise=a.noise, lr=a.lr, clip=a.clip, soc=a.soc, num_threads=a.threads)
    train_modes_check = dict(kw, seeds=list(range(a.seed, a.seed + a.seeds)))
    keep = torch.get_num_threads()
    torch.set_num_threads(a.torch_threads)
    try:
        from .train import train_modes
        train_modes(modes[:1], **dict(kw, steps=1))          # every argument checked before the header
        print("\n".join(header_lines(train_modes_check, a.width)), flush=True)
        res = train_seeds(modes, seeds=a.seeds, seed=a.seed, on_row=lambda r: print(row_line(r), flush=True), **kw)
    finally:
        torch.set_num_threads(keep)
    if a.out is not None:
        import json
        path = os.path.join(a.out, f"{a.prefix or default_prefix('train')}.json")
        os.makedirs(a.out, exist_ok=True)
        with open(path, "w") as fh:
            json.dump({"meta": res.meta, "rows": res.rows}, fh, indent=1)
        print("\n" + _wrote([path], a.out, a.width))
    return 0


def _train_cli(argv):
    """``python -m pyconvtbc study train [options]``: 0 on success, 2 on a usage error."""
    from .train import TRAIN_MODES, train_modes
    try:
        a = _train_parser().parse_args(argv)
    except SystemExit as e:
        return int(e.code or 0)
    try:
        _check_width(a.width)
        if a.torch_threads < 1:
            raise ValueError(f"--torch-threads: {a.torch_threads}; expected an integer >= 1")
        if a.prefix is not None:
            _check_prefix(a.prefix, "--prefix")
        try:
            import torch
        except ImportError:
            raise ValueError(f"train needs PyTorch: {TORCH_INSTALL}") from None
        if a.out is not None:
            prefix = a.prefix or default_prefix("train")
            _check_out(a.out, prefix, (".csv", ".json"), [] if a.no_plots else plot_names("train", ()), a.force)
        modes = _split("--modes", a.modes, tuple(TRAIN_MODES))
        if a.seeds != 1:
            return _train_seeds_cli(a, modes, torch)
        keep = torch.get_num_threads()
        torch.set_num_threads(a.torch_threads)
        from .._console import Progress
        bar = Progress(len(modes) * max(a.steps, 1), "study train", a.progress)
        try:
            res = train_modes(modes, steps=a.steps, batch=a.batch, length=a.length, vocab=a.vocab, dim=a.dim,
                              kernel=a.kernel, layers=a.layers, noise=a.noise, lr=a.lr, clip=a.clip, soc=a.soc,
                              num_threads=a.threads, seed=a.seed, on_step=lambda m: bar.update(1, m))
        finally:
            bar.close()
            torch.set_num_threads(keep)
    except (ValueError, OSError) as e:
        msg = str(e)
        for k in ("modes", "steps", "batch", "length", "vocab", "dim", "kernel", "layers", "noise", "lr", "clip",
                  "soc", "seed"):
            if msg.startswith(f"{k}:"):
                msg = "--" + msg
                break
        msg = msg.replace("num_threads:", "--threads:", 1) if msg.startswith("num_threads:") else msg
        print(f"study train: error: {msg}", file=sys.stderr)
        return 2
    res.meta["torch_threads"] = a.torch_threads
    print(res.table(markdown=a.markdown, width=a.width))
    if a.out is not None:
        try:
            made = _save(res, a.out, a.prefix, not a.no_plots, a.force)
        except ValueError as e:
            print(f"study train: error: {e}", file=sys.stderr)
            return 2
        print("\n" + _wrote([made["csv"], made["json"]] + made["plots"], a.out, a.width))
        if not a.no_plots and not made["plots"]:
            print("(plot skipped: matplotlib is not installed; pip install 'pyconvtbc[plot]')")
    return 0


# The option of each grid axis (its value: a comma-separated list, or 'all').
_GRID_OPTIONS = {"input_dtypes": "--input-dtype", "cube_math_types": "--cube", "socs": "--soc",
                 "grad_weight_dtypes": "--grad-weight-dtype", "hf32_roundings": "--hf32-rounding",
                 "hf32_mantissa_bits": "--hf32-mantissa-bits", "hif8_roundings": "--hif8-rounding",
                 "saturate": "--saturate", "accumulations": "--accumulation", "block_sizes": "--block-size"}


def _grid_from_args(a):
    axes = {}
    for axis, (norm, every) in _AXES.items():
        opt = _GRID_OPTIONS[axis]
        axes[axis] = tuple(norm(opt, v) for v in _split(opt, getattr(a, opt[2:].replace("-", "_")), every))
    return Grid(**axes)


def _out_files(out, prefix, exts, plots):
    """The files a run writes into ``out``: <prefix><ext> for each ext, plots/<prefix>_<name>.png for each name."""
    plots_dir = os.path.join(out, "plots")
    return ([os.path.join(out, prefix + ext) for ext in exts]
            + [os.path.join(plots_dir, f"{prefix}_{name}.png") for name in plots])


def _check_targets(out, force):
    """Earlier results and symbolic links where this run writes: a usage error naming the path, unless ``force``
    (then the files are overwritten, and a link is removed, never written through).  A link in place of the
    plots/ directory is refused even with ``force``."""
    plots_dir = os.path.join(out, "plots")
    if os.path.islink(plots_dir):
        raise ValueError(f"--out: {plots_dir!r} is a symbolic link; expected a directory (the plots are never "
                         "written through a link)")
    for path in _out_targets.get(os.path.abspath(out), ()):
        if os.path.islink(path):
            if not force:
                raise ValueError(f"--out: {path!r} is a symbolic link; expected a fresh file name (the results are "
                                 "never written through a link), or --force to replace the link by the file")
            os.unlink(path)
        elif os.path.lexists(path) and not force:
            raise ValueError(f"--out: {path!r} exists (an earlier run's results?); expected a fresh --out or "
                             "--prefix, or --force to overwrite")


_out_targets = {}   # abspath(--out) -> the files this run writes there (set by _check_out, read by _save)


def _check_out(out, prefix, exts, plots=(), force=False):
    """Create the output directory now, and check that the files to be written there (<prefix><ext> for each
    ext, the plots/ directory and plots/<prefix>_<name>.png for each name of ``plots``) can be: a usage error
    before any computing when they cannot be, or when they exist (earlier results) or are symbolic links,
    unless ``force`` (``_check_targets``)."""
    if not out.strip():
        raise ValueError(f"--out: {out!r} is empty; expected a directory path (it is created if missing)")
    if os.path.exists(out) and not os.path.isdir(out):
        raise ValueError(f"--out: {out!r} is an existing file; expected a directory (it is created if missing)")
    try:
        os.makedirs(out, exist_ok=True)
    except OSError as e:
        raise ValueError(f"--out: {out!r} cannot be created ({e.strerror}); expected a writable directory") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"--out: {out!r} is not writable; expected a writable directory")
    plots_dir = os.path.join(out, "plots")
    if os.path.exists(plots_dir) and not os.path.isdir(plots_dir):
        raise ValueError(f"--out: {plots_dir!r} is an existing file; expected it free, or a directory (the plots "
                         "go there)")
    for ext in exts:
        path = os.path.join(out, prefix + ext)
        if os.path.isdir(path):
            raise ValueError(f"--out: {path!r} is a directory; expected a file name free for the {ext} output")
    for name in plots:
        path = os.path.join(plots_dir, f"{prefix}_{name}.png")
        if os.path.isdir(path) and not os.path.islink(path):
            raise ValueError(f"--out: {path!r} is a directory; expected a file name free for a plot (or "
                             "--no-plots)")
    _out_targets[os.path.abspath(out)] = _out_files(out, prefix, exts, plots)
    _check_targets(out, force)


def _save(res, out, prefix, plots, force=False):
    """res.save(...), with a failure to write (a full disk, a file system that refuses) as a usage error naming
    the file.  The targets are checked again first (the run may have taken minutes): no earlier result is
    overwritten without ``force``, no file is written through a symbolic link."""
    _check_targets(out, force)
    try:
        return res.save(out, prefix, plots=plots)
    except OSError as e:
        what = repr(e.filename) if e.filename is not None else f"into {out!r}"
        raise ValueError(f"--out: writing {what} failed ({e.strerror or e}); the results above were computed, but "
                         "the files are incomplete") from None


def _check_width(width):
    if width != 0 and not 40 <= width <= 100000:
        raise ValueError(f"--width: {width}; expected 0 (no limit) or an integer in [40, 100000]")


def _wrote(paths, out, width):
    """'wrote N files to OUT: a, b, ...', continued on indented lines past ``width`` characters (0: no limit)."""
    n = len(paths)
    text = f"wrote {n} file{'s' if n != 1 else ''} to {out}: " + ", ".join(os.path.relpath(f, out) for f in paths)
    if not width:
        return text
    return "\n".join(textwrap.wrap(text, width, subsequent_indent="  ", break_long_words=False,
                                    break_on_hyphens=False))


def _check_growth_sizes(base, values, axis):
    """Usage errors for a growth sweep whose sizes are not integers or too large, before any computing."""
    from dataclasses import asdict

    from .growth import GROWTH_AXES
    axis = _normalise("--axis", axis, GROWTH_AXES, what="size to sweep")
    base = base or Shape(16, 8, 32, 32, 3, 1)
    for v in values:
        try:
            iv = int(v)
        except ValueError:
            iv = 0
        if iv < 1:
            raise ValueError(f"--values: {v!r}; expected integers >= 1 for {axis}")
        where = f"--values ({axis}={iv})"
        check_size(Shape.parse({**asdict(base), axis: iv}, where), where)


def _exponents(text):
    t = str(text).strip()
    if ":" in t:
        lo, _, hi = t.partition(":")
        try:
            lo, hi = int(lo), int(hi)
        except ValueError:
            raise ValueError(f"--exponents: {text!r}; expected LO:HI (integers) or a comma-separated list") from None
        if lo > hi:
            raise ValueError(f"--exponents: {text!r}; expected LO <= HI")
        return _norm_exponents(list(range(lo, hi + 1)), "--exponents")
    return _norm_exponents(_split("--exponents", t, ()), "--exponents")


# Options whose value may look like a negative number or start with '-' ("--shape -16,4,..." would otherwise be
# taken for an unknown option): such a value is passed on as "--opt=value", so that its own check names it.
_VALUE_OPTIONS = ("--shape", "--exponents", "--values", "--scale", "--pad", "--seed", "--threads", "--repeat",
                  "--permutations", "--threshold", "--block-size", "--hf32-mantissa-bits", "--dist")
_DASH_VALUE = re.compile(r"^-[\d.]")


def _join_dash_values(argv):
    out, i = [], 0
    while i < len(argv):
        if argv[i] in _VALUE_OPTIONS and i + 1 < len(argv) and _DASH_VALUE.match(argv[i + 1]):
            out.append(f"{argv[i]}={argv[i + 1]}")
            i += 2
        else:
            out.append(argv[i])
            i += 1
    return out


# The options of the API's argument names, for messages raised below the command line ("axis: ..." is
# "--axis: ..." to the user).  npz / data: the option given.
_API_OPTIONS = {"source": "--order-source", "axis": "--axis", "values": "--values", "metric": "--metric",
                "grads": "--grads", "pad": "--pad", "permutations": "--permutations", "num_threads": "--threads",
                "repeat": "--repeat", "seed": "--seed", "shapes": "--shape", "scales": "--scale",
                "distribution": "--dist", "reference": "--reference", "exponents": "--exponents",
                "threshold": "--threshold", "input_dtypes": "--input-dtype", "scale_operands": "--scale-operands"}


def _cli_message(msg, a):
    """``msg`` with a leading API argument name replaced by the option the user typed."""
    m = re.match(r"([a-z_]+)(?=[: ])", msg)
    if not m:
        return msg
    word = m.group(1)
    data_opt = "--npz" if getattr(a, "npz", None) is not None else "--data"
    opt = data_opt if word in ("npz", "data") else _API_OPTIONS.get(word)
    return opt + msg[len(word):] if opt else msg


def _warn_non_finite(res):
    """A warning on stderr when rows hold NaN / Inf results that the overflow column does not count (NaN from a
    finite exact value, or NaN / Inf data): their errors cover only the finite elements, so the row can look
    clean but for its NaN / Inf counts."""
    rows = [r for r in res.rows if r.get("status") == 0 and r.get("n_nan") is not None]
    bad = [r for r in rows if (r["n_nan"] or 0) + (r["n_inf"] or 0) > (r["n_overflow"] or 0)]
    if bad:
        worst = sum((r["n_nan"] or 0) + (r["n_inf"] or 0) == r["n"] for r in bad)
        print(f"study: warning: {len(bad)} of {len(rows)} rows have NaN / Inf results that ovf% does not count "
              f"({worst} with no finite result; see the NaN and Inf columns): the operands or the sums overflowed "
              "the input dtype or the compute precision C, or the data hold NaN / Inf; their errors cover only "
              "the finite elements", file=sys.stderr)


def cli(argv=None):
    """``python -m pyconvtbc study [modes|spread|growth|window|train] [options]``; returns the exit status (0 on
    success, 2 on a usage error, 1 when stdout is closed early, e.g. by ``| head``: quietly)."""
    try:
        rc = _cli(argv)
        sys.stdout.flush()                # here, not at exit: a closed pipe is then caught below
        return rc
    except BrokenPipeError:
        _silence_stdout()
        return 1


def _silence_stdout():
    """After EPIPE on stdout: point it at /dev/null, so that the interpreter's final flush raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):    # stdout without a file descriptor (captured, closed)
        pass


def _cli(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "train":
        return _train_cli(argv[1:])
    if not argv or argv[0] not in _COMMANDS + ("-h", "--help"):
        argv = ["modes"] + argv
    try:
        a = _parser().parse_args(_join_dash_values(argv))
    except SystemExit as e:       # --help (0) or a usage error (2, message already on stderr)
        return int(e.code or 0)
    try:
        res = _run(a)
    except (ValueError, OSError) as e:
        print(f"study: error: {_cli_message(str(e), a)}", file=sys.stderr)
        return 2
    except MemoryError:
        print("study: error: the problem does not fit in memory; expected smaller --shape sizes"
              + (" or fewer --permutations" if a.command == "spread" else ""), file=sys.stderr)
        return 2
    res.meta["command"] = "python -m pyconvtbc study " + " ".join(shlex.quote(s) for s in argv)
    print(res.table(width=a.width))
    if a.magnitudes and res.kind == "modes":
        print("\n# magnitudes: share of each tensor's non-zero values in each range of a format")
        print(res.magnitude_table(width=a.width))
    if res.kind != "window":              # (the window study scans into overflow on purpose)
        sys.stdout.flush()                # the table before the warning
        _warn_non_finite(res)
    if a.out is not None:
        try:
            made = _save(res, a.out, a.prefix, not a.no_plots, a.force)
        except ValueError as e:
            print(f"study: error: {e}", file=sys.stderr)
            return 2
        print("\n" + _wrote([made["csv"], made["json"], made["md"]] + made["plots"], a.out, a.width))
        if not a.no_plots and not made["plots"]:
            print("(plots skipped: matplotlib is not installed; pip install 'pyconvtbc[plot]')")
    return 0


def _run(a):
    """Check every option (usage errors before any computing), then run the study; its StudyResult."""
    from_file = a.npz is not None or a.data is not None
    _check_width(a.width)
    grid = _grid_from_args(a)
    scales = [_norm_scale_rule("--scale", s) for s in _split("--scale", a.scale, ())]
    if not scales:
        raise ValueError(f"--scale: {a.scale!r} names no scale; expected positive numbers, e.g. 1e-4,1,30")
    grads = _norm_grads(_split("--grads", a.grads, GRADS), "--grads") if a.grads is not None else None
    shapes = [check_size(Shape.parse(s, "--shape"), "--shape") for s in a.shape] if a.shape else None
    dist = "normal" if a.dist is None else a.dist
    seed = 0 if a.seed is None else a.seed
    _norm_distribution(dist, "--dist")
    _normalise("--reference", a.reference, REFERENCES, what="reference")
    if a.threads is not None and not 1 <= a.threads <= MAX_THREADS:
        raise ValueError(f"--threads: {a.threads}; expected an integer in [1, {MAX_THREADS}]")
    if seed < 0:
        raise ValueError(f"--seed: {seed}; expected an integer >= 0")
    if not 1 <= a.repeat <= 1000:
        raise ValueError(f"--repeat: {a.repeat}; expected an integer 1..1000")
    if a.repeat > 1 and a.command in ("spread", "window"):
        raise ValueError(f"--repeat: {a.command} takes no repeats; expected --repeat with modes or growth")
    if a.magnitudes and a.command != "modes":
        raise ValueError(f"--magnitudes: {a.command} has no magnitude view; expected --magnitudes with modes (the "
                         "per-mode table)")
    if a.npz is not None and a.data is not None:
        raise ValueError("--npz and --data: both given; expected one file of operands")
    if from_file and a.command == "growth":
        raise ValueError(f"{'--npz' if a.npz else '--data'}: growth sweeps generated data; expected --shape "
                         "(the base shape) instead")
    if from_file and shapes:
        raise ValueError("--shape: given with a file of operands; expected one source of data")
    if a.pad is not None and not from_file:
        raise ValueError(f"--pad: {a.pad}; it only applies with --npz or --data (it overrides the file's pad); "
                         "for generated data, expected the pad as the 6th size of --shape T,B,Cin,Cout,K,pad")
    if a.pad is not None and not 0 <= a.pad <= 255:
        raise ValueError(f"--pad: {a.pad}; expected an integer in [0, 255]")
    data_opt = "--npz" if a.npz is not None else "--data"
    if from_file and a.dist is not None:
        raise ValueError(f"--dist: the data come from {data_opt}; expected --dist only with generated data "
                         "(--shape)")
    seed_orders = a.command == "spread" and not a.fixed_order and a.order_source.strip().lower() == "model"
    if from_file and a.seed is not None and not seed_orders:
        raise ValueError(f"--seed: the data come from {data_opt}; expected --seed only with generated data "
                         "(--shape) or spread's model orders")
    if a.repeat > 1 and from_file:
        raise ValueError(f"--repeat: {a.repeat}; repeats draw new random data, expected 1 with {data_opt}")
    if a.prefix is not None:
        _check_prefix(a.prefix, "--prefix")
    if a.command == "spread":
        _norm_permutations(a.permutations, "--permutations")
        _normalise("--order-source", a.order_source, ORDER_SOURCES, what="order source")
        if a.non_deterministic:   # the spread's orders come from --order-source / --fixed-order instead
            raise ValueError("--non-deterministic: spread takes its orders from --order-source (model: sampled "
                             "orders of the terms; operator: the operator's own non-deterministic mode, N calls) "
                             "and --fixed-order; expected --order-source operator")
    elif a.command == "window":
        if scales != [1.0]:
            raise ValueError("--scale: window sweeps the scales itself; expected --exponents instead")
        exponents = _exponents(a.exponents)
        threshold = _norm_threshold(a.threshold, "--threshold")
    elif a.command == "growth":
        if shapes and len(shapes) > 1:
            raise ValueError("--shape: growth takes one base shape; expected a single --shape")
        if len(scales) > 1:
            raise ValueError("--scale: growth takes one scale; expected a single value")
        vals = _split("--values", a.values, ())
        _check_growth_sizes(shapes[0] if shapes else None, vals, a.axis)
        _normalise("--metric", a.metric, _GROWTH_METRICS, what="metric")
    if a.out is not None:
        kind_grads = grads or {"spread": ("gradInput", "gradWeight"), "window": ("gradWeight",)}.get(a.command, GRADS)
        _check_out(a.out, a.prefix or default_prefix(a.command), (".csv", ".json", ".md"),
                   [] if a.no_plots else plot_names(a.command, kind_grads), a.force)
    det = None if a.non_deterministic else True
    common = dict(grid=grid, distribution=dist, seed=seed, reference=a.reference, num_threads=a.threads,
                  progress=a.progress)
    files = dict(npz=a.npz, data=a.data, pad=a.pad)
    if a.scale_operands != "grad_output" and (a.command == "window" or all(s == 1 for s in scales)):
        raise ValueError("--scale-operands: it says what a numeric --scale multiplies; expected it with a --scale "
                         "other than 1 (and not with window, which scales grad_output itself)")
    if a.command == "modes":
        return run_study(shapes, scales=scales, grads=grads or GRADS, repeat=a.repeat, deterministic=det, **files,
                         scale_operands=a.scale_operands, **common)
    if a.command == "spread":
        return reduction_order_spread(shapes, scales=scales, grads=grads or ("gradInput", "gradWeight"),
                                      permutations=a.permutations, deterministic=a.fixed_order,
                                      source=a.order_source, scale_operands=a.scale_operands, **files, **common)
    if a.command == "window":
        return scale_window(shapes, exponents=exponents, threshold=threshold, grads=grads or ("gradWeight",),
                            deterministic=det, **files, **common)
    return error_growth(shapes[0] if shapes else None, vals, a.axis, scale=scales[0], grads=grads or GRADS,
                        metric=a.metric, repeat=a.repeat, deterministic=det, scale_operands=a.scale_operands,
                        **common)
