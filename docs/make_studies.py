"""Produce every output block and study figure of docs/studies.md, or check that the page still matches.

    python docs/make_studies.py            # rewrite the generated blocks of docs/studies.md and docs/img/*.png
    python docs/make_studies.py --check    # exit 1, with a diff, when a block no longer matches what runs now

Each generated block of the page sits between ``<!-- generated: NAME -->`` and ``<!-- end: NAME -->``; the
block is rebuilt from ``BLOCKS`` below: a command line run through ``python -m pyconvtbc study`` (shown as a
console session with its output), or a Python snippet executed as written (shown, then its output).  All
blocks run in order in one scratch directory (files one block writes, another may read), never in the
repository; figures are copied from there into docs/img/.  Blocks that need torch or matplotlib are skipped
(and reported) when it is missing.  tests/test_study_docs.py runs the check.
"""
from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "studies.md")
IMG = os.path.join(HERE, "img")

_LAYER_CODE = '''\
import torch
from pyconvtbc import study
from pyconvtbc.torch import ConvTBC

torch.manual_seed(0)


class TinyNet(torch.nn.Module):                 # two ConvTBC layers, as in a fairseq encoder
    def __init__(self):
        super().__init__()
        self.conv1 = ConvTBC(32, 64, 3, padding=1)
        self.conv2 = ConvTBC(64, 32, 3, padding=1)

    def forward(self, x):                       # x: (T, B, C)
        return self.conv2(torch.relu(self.conv1(x)))


model = TinyNet()
x, target = torch.randn(128, 16, 32), torch.randn(128, 16, 32)
with study.capture(model) as cap:               # records each ConvTBC backward's operands, per layer
    torch.nn.functional.mse_loss(model(x), target).backward()
cap.save("layers.pt")                           # for: python -m pyconvtbc study --data layers.pt ...
res = cap.study({"cube_math_types": ["KEEP_DTYPE"], "grad_weight_dtypes": ["float8_e4m3fn", "hifloat8"]},
                scales=[1, "amax"], grads=["gw"])
print(res.table())
print()
print(res.magnitude_table())
res.save("layer_out")                           # layer_out/plots/study_magnitudes.png, ...
'''

_API_CODE = '''\
from pyconvtbc import study
res = study.run_study("32,4,16,16,3,1", {"cube_math_types": ["KEEP_DTYPE", "USE_HF32"]}, grads=["gw"])
print(res.table())          # res.rows: one dict per cell x gradient; res.save("out") writes csv/json/md/png
'''

_LAYER_TABLE_CODE = '''\
import math
print("| layer | gradWeight | scale | gO scale | unf% | sub% | rel med | rel Frob | ULP n | ULP p99 |")
print("|---|---|---|---|---|---|---|---|---|---|")
for r in sorted(res.rows, key=lambda r: (r["out_format"], r["distribution"], str(r["scale"]))):
    p99 = "-" if r["ulp_p99"] is None else f"{r['ulp_p99']:.3g}"
    print(f"| {r['distribution']} | {r['out_format']} | {r['scale']} | 2^{int(math.log2(r['dy_scale']))} "
          f"| {100 * r['frac_underflow']:.2f}% | {100 * r['frac_subnormal']:.2f}% | {r['rel_median']:.3g} "
          f"| {r['rel_fro']:.3g} | {r['n_ulp']} of {r['n']} | {p99} |")
'''

# name -> (kind, text, figures {path in the scratch directory: name in docs/img}, needs).  Kinds: "cli" (a
# ``python -m pyconvtbc`` command line), "python" (a snippet, shown with its output), "markdown" (a snippet whose
# output is markdown, inserted as is), "script" (a repository script run in a subprocess).  Python snippets share
# one namespace, in order.
BLOCKS = {
    "modes": ("cli", "study --shape 16,4,16,16,3,1 --soc all --grads gi,gw --out study_out",
              {"study_out/plots/study_error_by_mode.png": "study_error_by_mode.png",
               "study_out/plots/study_ulp_hist_gradWeight.png": "study_ulp_hist_gradWeight.png"}, ("matplotlib",)),
    "forward": ("cli", "study --shape 16,4,16,16,3,1 --input-dtype all --grads output", {}, ()),
    "api": ("python", _API_CODE, {}, ()),
    "hf32": ("cli", "study --shape 16,4,16,16,3,1 --cube USE_HF32 --hf32-rounding all --hf32-mantissa-bits 10,11 "
                    "--grads gi,gw", {}, ()),
    "hf32_whatif": ("cli", "study --shape 16,4,16,16,3,1 --cube USE_HF32 --hf32-mantissa-bits 4,7,10,11,14,18,22 "
                           "--grads gw", {}, ()),
    "eight_bit": ("cli", "study --shape 16,4,16,16,3,1 --cube KEEP_DTYPE --grad-weight-dtype hifloat8,float8_e4m3fn "
                         "--saturate all --scale 1e-8,1,1000,amax:0.5,amax,best --grads gw", {}, ()),
    "window": ("cli", "study window --shape 16,4,16,16,3,1 --cube KEEP_DTYPE,USE_FP16 "
                      "--grad-weight-dtype float32,bfloat16,hifloat8,float8_e4m3fn --exponents=-24:24 "
                      "--out window_out",
               {"window_out/plots/window_window.png": "window_window.png"}, ("matplotlib",)),
    "spread": ("cli", "study spread --shape 16,4,16,16,3,1 --cube KEEP_DTYPE,USE_HF32,USE_FP16 "
                      "--grad-weight-dtype same,hifloat8 --permutations 10 --out spread_out",
               {"spread_out/plots/spread_spread_vs_error.png": "spread_spread_vs_error.png"}, ("matplotlib",)),
    "spread_fixed": ("cli", "study spread --shape 16,4,16,16,3,1 --cube KEEP_DTYPE --grads gw --permutations 10 "
                            "--fixed-order", {}, ()),
    "spread_operator": ("cli", "study spread --shape 16,4,16,16,3,1 --cube KEEP_DTYPE,USE_FP16 "
                               "--grad-weight-dtype same,hifloat8 --permutations 10 --order-source operator", {}, ()),
    "accumulation": ("cli", "study --shape 64,8,16,16,3,1 --cube KEEP_DTYPE,USE_FP16 --accumulation all "
                            "--block-size k0,32 --grads gi,gw", {}, ()),
    "growth": ("cli", "study growth --shape 16,4,16,16,3,1 --values 16,64,256,1024 --repeat 5 --out growth_out",
               {"growth_out/plots/growth_growth.png": "growth_growth.png"}, ("matplotlib",)),
    "growth_cout": ("cli", "study growth --shape 16,4,16,16,3,1 --axis Cout --values 8,32,128,512 --grads gi "
                           "--repeat 5", {}, ()),
    "layer": ("python", _LAYER_CODE,
              {"layer_out/plots/study_magnitudes.png": "layer_magnitudes.png",
               "layer_out/plots/study_ulp_hist_gradWeight.png": "layer_ulp_hist_gradWeight.png"},
              ("torch", "matplotlib")),
    "layer_table": ("markdown", _LAYER_TABLE_CODE, {}, ("torch",)),
    "layer_window": ("cli", "study window --data layers.pt --cube KEEP_DTYPE --grad-weight-dtype "
                            "hifloat8,float8_e4m3fn --exponents=-4:28 --out layer_window",
                     {"layer_window/plots/window_window.png": "layer_window.png"}, ("torch", "matplotlib")),
    "train_modes": ("cli", "study train --steps 200 --out train_out",
                    {"train_out/plots/train_loss.png": "train_loss.png"}, ("torch", "matplotlib")),
    "train_seeds": ("cli", "study train --steps 200 --seeds 5", {}, ("torch",)),
    "train": ("script", "examples/train_tiny_convtbc.py --out train_tiny_convtbc.png",
              {"train_tiny_convtbc.png": "train_tiny_convtbc.png"}, ("torch", "matplotlib")),
}
# Blocks whose output holds timings: compared with every time ("1.8 s", "12.3 ms") and time ratio ("1.7x")
# masked, and runs of spaces (a table's alignment) collapsed.
_TIMED = ("train_modes", "train_seeds", "train")
_TIME = re.compile(r"\b\d+\.\d (?:s|ms)\b|\b\d+\.\dx\b")


def _mask_times(text):
    return re.sub(r" +", " ", _TIME.sub("N.N", text))


# The timed blocks train models whose other layers run in torch's CPU kernels, whose fp32 (and autocast bf16)
# results differ in the last bits between CPUs (AVX-512 or AVX2 paths, Intel or AMD): the losses then differ
# in the 4th decimal.  So their numbers are compared with a tolerance (percentages within 0.05 points, others
# within 1e-3 + 0.2%), the text around them exactly.  Every other block is compared character for character.
_NUM = re.compile(r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?%?")


def _close_runs(a, b):
    a, b = _mask_times(a), _mask_times(b)
    if _NUM.sub("#", a) != _NUM.sub("#", b):
        return False
    for x, y in zip(_NUM.findall(a), _NUM.findall(b)):
        pct = x.endswith("%")
        u, v = float(x.rstrip("%")), float(y.rstrip("%"))
        if abs(u - v) > (0.05 if pct else 1e-3 + 2e-3 * max(abs(u), abs(v))):
            return False
    return True


_BEGIN = re.compile(r"^<!-- generated: (\w+) -->$", re.M)


def _available(mod):
    try:
        __import__(mod)
        return True
    except ImportError:
        return False


def _run(name, kind, text, ns):
    """The rendered block (markdown) of one workflow, run in the current directory (``ns``: the namespace the
    Python snippets share)."""
    from pyconvtbc.study import cli
    out = io.StringIO()
    if kind == "cli":
        with contextlib.redirect_stdout(out):
            rc = cli(shlex.split(text)[1:])
        if rc != 0:
            raise RuntimeError(f"block {name}: 'python -m pyconvtbc {text}' exited {rc}")
        return f"```console\n$ python -m pyconvtbc {text}\n{out.getvalue().rstrip()}\n```"
    if kind == "script":
        import subprocess
        argv = shlex.split(text)
        r = subprocess.run([sys.executable, os.path.join(os.path.dirname(HERE), argv[0])] + argv[1:],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"block {name}: 'python {text}' exited {r.returncode}: {r.stderr[-2000:]}")
        return f"```console\n$ python {text}\n{r.stdout.rstrip()}\n```"
    with contextlib.redirect_stdout(out):
        exec(compile(text, f"<docs block {name}>", "exec"), ns)
    if kind == "markdown":
        return out.getvalue().rstrip()
    return f"```python\n{text.rstrip()}\n```\n```text\n{out.getvalue().rstrip()}\n```"


@contextlib.contextmanager
def _no_rasterising():
    """Figures are built (so a broken figure still fails) but saved as empty files: the check compares text."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        yield
        return
    orig = Figure.savefig

    def savefig(self, fname, *a, **k):
        if not isinstance(fname, (str, os.PathLike)):
            return orig(self, fname, *a, **k)
        with open(fname, "wb"):
            pass
    Figure.savefig = savefig
    try:
        yield
    finally:
        Figure.savefig = orig


def render(names=None, figures_to=None, draw=True):
    """{name: rendered block} for ``names`` (default: every block whose needs are met), run in order in a scratch
    directory; figures copied into ``figures_to`` when given; ``draw=False`` builds the study figures without
    rasterising them (faster; the check).  Returns (blocks, skipped names)."""
    names = list(BLOCKS) if names is None else list(names)
    done, skipped = {}, []
    ns = {"__name__": "__docs__"}
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory() as tmp, (contextlib.nullcontext() if draw else _no_rasterising()):
        os.chdir(tmp)
        try:
            for name in names:
                kind, text, figs, needs = BLOCKS[name]
                if not all(_available(m) for m in needs):
                    skipped.append(name)
                    continue
                done[name] = _run(name, kind, text, ns)
                if figures_to:
                    for src, dst in figs.items():
                        shutil.copyfile(os.path.join(tmp, src), os.path.join(figures_to, dst))
        finally:
            os.chdir(cwd)
    return done, skipped


def page_blocks(page_text):
    """{name: the block's current text} of the page."""
    out = {}
    for m in _BEGIN.finditer(page_text):
        name = m.group(1)
        end = page_text.index(f"<!-- end: {name} -->", m.end())
        out[name] = page_text[m.end():end].strip("\n")
    return out


def replace_blocks(page_text, blocks):
    for name, body in blocks.items():
        begin = f"<!-- generated: {name} -->"
        i = page_text.index(begin) + len(begin)
        j = page_text.index(f"<!-- end: {name} -->", i)
        page_text = page_text[:i] + "\n" + body + "\n" + page_text[j:]
    return page_text


def check(names=None):  # noqa: D401
    """The differences (list of unified-diff strings) between the page's blocks and what the workflows print
    now, and the names skipped for a missing dependency."""
    with open(PAGE) as fh:
        current = page_blocks(fh.read())
    missing = sorted(set(BLOCKS) - set(current))
    if missing:
        return [f"docs/studies.md has no generated block for {missing}"], []
    blocks, skipped = render(names, draw=False)
    diffs = []
    for name, body in blocks.items():
        same = _close_runs(body, current[name]) if name in _TIMED else body == current[name]
        if not same:
            diffs.append("".join(difflib.unified_diff(current[name].splitlines(True), body.splitlines(True),
                                                      f"docs/studies.md [{name}]", f"now [{name}]")))
    return diffs, skipped


def main(argv=None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--check":
        diffs, skipped = check()
        for d in diffs:
            print(d)
        if skipped:
            print(f"skipped (torch or matplotlib missing): {', '.join(skipped)}")
        print("docs/studies.md is up to date" if not diffs else f"{len(diffs)} block(s) differ")
        return 1 if diffs else 0
    if argv:
        print(__doc__)
        return 2
    blocks, skipped = render(figures_to=IMG)
    with open(PAGE) as fh:
        text = fh.read()
    with open(PAGE, "w") as fh:
        fh.write(replace_blocks(text, blocks))
    print(f"rewrote {len(blocks)} blocks of docs/studies.md" + (f"; skipped {skipped}" if skipped else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
