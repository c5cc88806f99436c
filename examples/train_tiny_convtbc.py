"""Train a tiny ConvTBC model under four emulated NPU modes and plot the loss curves side by side.

    python examples/train_tiny_convtbc.py [--steps 300] [--out FILE.png | --doc-figure]

The plot goes to FILE.png, by default to a folder under the system's temporary directory (never a file the
repository tracks); ``--doc-figure`` regenerates the repository's figure docs/img/train_tiny_convtbc.png.

Both passes of each ConvTBC layer run through pyconvtbc (the forward aclnnConvTbc, the backward
aclnnConvTbcBackward) in one of: KEEP_DTYPE (fp32), USE_HF32, USE_FP16, and KEEP_DTYPE with a HIFLOAT8
gradWeight.  Every run starts from the same weights and sees the same batches, so the curves differ only by the
emulated precision.  ``python -m pyconvtbc study train`` is the larger workflow (a fairseq-style language model,
torch's fp32 run as the reference, time per step).
Needs torch (pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu); the plot needs matplotlib ('pyconvtbc[plot]').
"""
import argparse
import os
import sys
import tempfile
import time

import torch

from pyconvtbc.torch import ConvTBC

MODES = {
    "KEEP_DTYPE (fp32)": dict(cube_math_type="KEEP_DTYPE"),
    "USE_HF32": dict(cube_math_type="USE_HF32"),
    "USE_FP16": dict(cube_math_type="USE_FP16"),
    "HIFLOAT8 gradWeight": dict(cube_math_type="KEEP_DTYPE", grad_weight_dtype="hifloat8"),
}
T, B, CIN, HIDDEN, K = 32, 16, 4, 16, 3
DEFAULT_OUT = os.path.join(tempfile.gettempdir(), "pyconvtbc-examples", "train_tiny_convtbc.png")
DOC_FIGURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "docs", "img", "train_tiny_convtbc.png")


class TinyConvNet(torch.nn.Module):
    def __init__(self, **emulation):
        super().__init__()
        self.conv1 = ConvTBC(CIN, HIDDEN, K, padding=K // 2, **emulation)
        self.conv2 = ConvTBC(HIDDEN, 1, K, padding=K // 2, **emulation)

    def forward(self, x):                      # x: (T, B, CIN)
        return self.conv2(torch.tanh(self.conv1(x)))


def make_batches(steps, seed=0):
    """A fixed teacher (a random 2-layer conv net in plain torch) labels random sequences."""
    g = torch.Generator().manual_seed(seed)
    w1 = torch.randn(K, CIN, 8, generator=g) * 0.6
    w2 = torch.randn(K, 8, 1, generator=g) * 0.6
    xs = torch.randn(steps, T, B, CIN, generator=g)
    ys = torch.stack([torch.conv_tbc(torch.tanh(torch.conv_tbc(x, w1, torch.zeros(8), 1)), w2, torch.zeros(1), 1)
                      for x in xs])
    return xs, ys


def train(emulation, xs, ys, lr=0.05, seed=0):
    torch.manual_seed(seed)                    # same initial weights for every mode
    model = TinyConvNet(num_threads=1, deterministic=True, **emulation)
    # plain SGD with momentum: the update is the gradient itself (Adam's normalisation would hide its error)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    losses = []
    for x, y in zip(xs, ys):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def plot(curves, path):
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        print("matplotlib is not installed: no plot (pip install 'pyconvtbc[plot]')")
        return None
    n = len(curves)
    fig = Figure(figsize=(3.6 * (n + 1), 3.3))
    FigureCanvasAgg(fig)
    ref_name = next(iter(curves))
    ref = curves[ref_name]
    first = None
    for i, (name, losses) in enumerate(curves.items()):
        ax = fig.add_subplot(1, n + 1, i + 1, sharey=first)
        first = first or ax
        if name != ref_name:
            ax.plot(ref, color="0.7", lw=1, label=ref_name)
        ax.plot(losses, color=f"C{i}", lw=1.2, label=name)
        ax.set_yscale("log")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step")
        ax.legend(fontsize=7)
    first.set_ylabel("MSE loss")
    ax = fig.add_subplot(1, n + 1, n + 1)
    for i, (name, losses) in enumerate(curves.items()):
        if name != ref_name:
            ax.plot(range(1, len(ref)), [abs(a / b - 1) + 1e-9 for a, b in zip(losses[1:], ref[1:])], color=f"C{i}",
                    lw=1, label=name)
    ax.set_yscale("log")
    ax.set_title(f"|loss / loss[{ref_name.split()[0]}] - 1|", fontsize=10)
    ax.set_xlabel("step")
    ax.legend(fontsize=7)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=100)
    return path


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=300)
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--out", default=DEFAULT_OUT, help=f"the plot's path (default: {DEFAULT_OUT})")
    where.add_argument("--doc-figure", action="store_true",
                       help=f"write the documentation's figure, {os.path.relpath(DOC_FIGURE)}")
    a = ap.parse_args(argv)
    if a.doc_figure:
        a.out = DOC_FIGURE
    torch.set_num_threads(1)
    xs, ys = make_batches(a.steps)
    curves = {}
    t0 = time.perf_counter()
    for name, emu in MODES.items():
        t = time.perf_counter()
        curves[name] = train(emu, xs, ys)
        last = curves[name][-20:]
        print(f"{name:22s} first loss {curves[name][0]:.4f}   mean of last 20 {sum(last) / len(last):.5f}   "
              f"({time.perf_counter() - t:.1f} s)")
    print(f"total {time.perf_counter() - t0:.1f} s for {len(MODES)} x {a.steps} steps")
    path = plot(curves, a.out)
    if path:
        print(f"wrote {os.path.relpath(os.path.normpath(path))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
