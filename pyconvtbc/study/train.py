"""Study 5: training a small fairseq-style ConvTBC model in each NPU mode (``python -m pyconvtbc study train``).

The model is a tiny convolutional language model in the style of fairseq's ``fconv``: token embedding, ``layers``
causal ConvTBC layers (padding K-1 and the last K-1 steps dropped, as fairseq's LinearizedConvolution), each
followed by GLU and a scaled residual connection, then a linear projection to the vocabulary.  The task is
synthetic next-token prediction: each sequence follows a fixed random second-order rule (the next token is a
function of the two before it), with a share ``noise`` of tokens drawn at random, so the loss falls towards the
noise's entropy.  Every mode starts from the same weights and sees the same batches; the optimiser is SGD with
Nesterov momentum (fairseq's choice for these models) and gradient-norm clipping, so each update is the gradient
itself and its error is not normalised away.

Modes (``TRAIN_MODES``): ``torch`` (the reference: ``torch.conv_tbc`` in fp32), the emulated cubeMathTypes on
fp32 tensors (``KEEP_DTYPE``, ``ALLOW_FP32_DOWN_PRECISION``, ``USE_FP16``, ``USE_HF32``, and ``torch_npu``, what
torch_npu passes on the emulated chip), ``bf16`` (the emulated layers inside ``torch.autocast(bfloat16)``, as a
mixed-precision run on the NPU), ``torch_bf16`` (``torch.conv_tbc`` in the same autocast region, for comparison)
and ``hif8_gw`` (KEEP_DTYPE with a HiFloat8 gradWeight).  Both passes of every emulated ConvTBC run through
pyconvtbc (forward aclnnConvTbc, backward aclnnConvTbcBackward, deterministic); the rest of the model is torch.

Needs torch (imported when a run starts, never when ``pyconvtbc.study`` is imported); the plot needs matplotlib.
"""
from __future__ import annotations

import csv
import json
import math
import os
import time

import numpy as np

from .choices import SOCS, _as_list, _normalise, _uniq
from .report import _check_prefix, _writing, default_prefix

# name -> (emulation keywords or None for torch.conv_tbc, autocast dtype name or None, description)
TRAIN_MODES = {
    "torch": (None, None, "torch.conv_tbc, fp32 (the reference)"),
    "KEEP_DTYPE": ({"cube_math_type": "KEEP_DTYPE"}, None, "emulated, fp32 tensors, cubeMathType KEEP_DTYPE"),
    "ALLOW_FP32_DOWN_PRECISION": ({"cube_math_type": "ALLOW_FP32_DOWN_PRECISION"}, None,
                                  "emulated, fp32 tensors, cubeMathType ALLOW_FP32_DOWN_PRECISION"),
    "USE_FP16": ({"cube_math_type": "USE_FP16"}, None, "emulated, fp32 tensors, cubeMathType USE_FP16"),
    "USE_HF32": ({"cube_math_type": "USE_HF32"}, None, "emulated, fp32 tensors, cubeMathType USE_HF32"),
    "torch_npu": ({"cube_math_type": "torch_npu"}, None,
                  "emulated, fp32 tensors, what torch_npu passes (USE_HF32 on ascend910b / ascend950)"),
    "bf16": ({"cube_math_type": "KEEP_DTYPE"}, "bfloat16", "emulated, inside torch.autocast(bfloat16)"),
    "torch_bf16": (None, "bfloat16", "torch.conv_tbc inside torch.autocast(bfloat16)"),
    "hif8_gw": ({"cube_math_type": "KEEP_DTYPE", "grad_weight_dtype": "hifloat8"}, None,
                "emulated, fp32 tensors, KEEP_DTYPE with a HiFloat8 gradWeight"),
}
DEFAULT_TRAIN_MODES = ("torch", "KEEP_DTYPE", "USE_HF32", "USE_FP16", "bf16", "torch_bf16", "hif8_gw")
_MODE_ALIASES = {"fp32": "torch", "keep": "KEEP_DTYPE", "hf32": "USE_HF32", "fp16": "USE_FP16",
                 "allow_fp32_down": "ALLOW_FP32_DOWN_PRECISION", "hifloat8": "hif8_gw"}
REFERENCE_MODE = "torch"


def _torch():
    try:
        import torch
    except ImportError:
        from .._hints import TORCH_INSTALL
        raise ValueError(f"train: needs PyTorch ({TORCH_INSTALL})") from None
    return torch


def _norm_modes(modes, argname="modes"):
    return _uniq(_normalise(argname, m, tuple(TRAIN_MODES), _MODE_ALIASES, what="training mode")
                 for m in _as_list(argname, modes))


def _int(argname, v, lo, hi):
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
        raise ValueError(f"{argname}: {v!r}; expected an integer {lo}..{hi}")
    return int(v)


def make_batches(steps, batch=16, length=32, vocab=16, noise=0.1, seed=0):
    """``steps`` batches of token sequences (int64 array (steps, length + 1, batch)): a fixed random rule picks
    each token from the two before it; a share ``noise`` of the tokens is uniform instead."""
    rule = np.random.default_rng([seed, 0]).integers(0, vocab, size=(vocab, vocab))
    seq = np.empty((steps, length + 1, batch), dtype=np.int64)
    for i in range(steps):                     # step i's batch depends on (seed, i) only, not on ``steps``
        rng = np.random.default_rng([seed, 1, i])
        seq[i, :2] = rng.integers(0, vocab, size=(2, batch))
        flip = rng.random((length + 1, batch)) < noise
        rand = rng.integers(0, vocab, size=(length + 1, batch))
        for t in range(2, length + 1):
            seq[i, t] = np.where(flip[t], rand[t], rule[seq[i, t - 2], seq[i, t - 1]])
    return seq


def build_model(mode, vocab=16, dim=32, kernel=3, layers=2, soc=None, num_threads=1, seed=0):
    """The tiny fairseq-style model of ``mode`` (a name of ``TRAIN_MODES``), its weights drawn from ``seed`` (the
    same for every mode)."""
    torch = _torch()
    from ..torch import ConvTBC

    emulation, _, _ = TRAIN_MODES[_norm_modes([mode])[0]]

    class _TorchConvTBC(ConvTBC):
        """fairseq's ConvTBC as plain torch computes it (torch.conv_tbc both ways); same parameters."""

        def forward(self, x):
            return torch.conv_tbc(x, self.weight, self.bias, self.padding[0])

    def conv(cin, cout):
        if emulation is None:
            return _TorchConvTBC(cin, cout, kernel, padding=kernel - 1)
        kw = dict(emulation, num_threads=num_threads, deterministic=True)
        if soc is not None:
            kw["soc"] = soc
        return ConvTBC(cin, cout, kernel, padding=kernel - 1, **kw)

    class ConvLM(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, dim)
            self.convs = torch.nn.ModuleList([conv(dim, 2 * dim) for _ in range(layers)])
            self.proj = torch.nn.Linear(dim, vocab)

        def forward(self, tokens):                     # tokens: (T, B) -> logits (T, B, vocab)
            x = self.embed(tokens)
            T = tokens.shape[0]
            for c in self.convs:
                y = c(x)[:T]                           # causal: drop the last K-1 steps
                x = (torch.nn.functional.glu(y, dim=2) + x) * math.sqrt(0.5)
            return self.proj(x)

    torch.manual_seed(seed)
    return ConvLM()


def _train_one(mode, batches, lr, clip, model_kw, seed, on_step=None):
    torch = _torch()
    _, autocast, _ = TRAIN_MODES[mode]
    model = build_model(mode, seed=seed, **model_kw)
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9, nesterov=True)
    losses, times = [], []
    data = torch.from_numpy(batches)
    for seq in data:
        t0 = time.perf_counter()
        opt.zero_grad()
        with torch.autocast("cpu", dtype=getattr(torch, autocast or "bfloat16"), enabled=autocast is not None):
            logits = model(seq[:-1])
            loss = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]),
                                                     seq[1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        opt.step()
        times.append(time.perf_counter() - t0)
        losses.append(float(loss.detach()))
        if on_step is not None:
            on_step(mode)
    return losses, times


def train_modes(modes=DEFAULT_TRAIN_MODES, *, steps=200, batch=16, length=32, vocab=16, dim=32, kernel=3, layers=2,
                noise=0.1, lr=0.5, clip=1.0, soc=None, num_threads=1, seed=0, on_step=None):
    """Train the tiny model (``build_model``) for ``steps`` steps in each of ``modes`` from the same initial weights
    on the same batches (``make_batches``).  Returns a ``TrainResult``: per mode the loss of every step and the
    wall time of every step.  ``num_threads``: the emulated kernels' threads (torch's own stay as set).
    ``on_step``: None, or a function called with the mode's name after each training step (progress)."""
    torch = _torch()
    modes = _norm_modes(modes)
    steps = _int("steps", steps, 1, 10 ** 6)
    for name, v, hi in (("batch", batch, 4096), ("length", length, 4096), ("vocab", vocab, 65536),
                        ("dim", dim, 4096), ("kernel", kernel, 64), ("layers", layers, 64)):
        _int(name, v, 1 if name != "vocab" else 2, hi)
    seed = _int("seed", seed, 0, 2 ** 32 - 1)
    for name, v in (("noise", noise), ("lr", lr), ("clip", clip)):
        ok = not isinstance(v, bool) and isinstance(v, (int, float)) and math.isfinite(v)
        if not ok or (name == "noise" and not 0 <= v < 1) or (name != "noise" and v <= 0):
            raise ValueError(f"{name}: {v!r}; expected a number in {'[0, 1)' if name == 'noise' else '(0, inf)'}")
    if soc is not None:
        soc = _normalise("soc", soc, SOCS, what="SoC profile")
    if num_threads is not None:
        _int("num_threads", num_threads, 1, 1024)
    batches = make_batches(steps, batch, length, vocab, noise, seed)
    model_kw = dict(vocab=vocab, dim=dim, kernel=kernel, layers=layers, soc=soc, num_threads=num_threads)
    from ..status import AclnnError
    curves, times, rejected = {}, {}, {}
    for m in modes:
        try:
            curves[m], times[m] = _train_one(m, batches, lr, clip, model_kw, seed, on_step)
        except AclnnError as e:            # a mode the emulated chip rejects (e.g. FLOAT KEEP_DTYPE on ascend910)
            rejected[m] = {"status": int(e.status), "message": str(e.message)}
    from .. import __version__
    from ..profiles import get_profile
    meta = {"kind": "train", "version": __version__, "modes": list(modes), "steps": steps, "batch": batch,
            "length": length, "vocab": vocab, "dim": dim, "kernel": kernel, "layers": layers, "noise": noise,
            "lr": lr, "clip": clip, "soc": get_profile(soc).name,
            "num_threads": num_threads, "seed": seed, "torch_threads": torch.get_num_threads(),
            "noise_floor": _noise_floor(noise, vocab, length), "rejected": rejected}
    return TrainResult(curves, times, meta)


def _noise_floor(noise, vocab, length):
    """The mean cross entropy (nats) of the best possible predictor of the synthetic task: the first target
    (the second token) is uniform (log vocab); each later one is the rule's token with probability
    1 - noise + noise/vocab, each other token with noise/vocab."""
    p_hit, p_miss = 1 - noise + noise / vocab, noise / vocab
    h = -(p_hit * math.log(p_hit) + ((vocab - 1) * p_miss * math.log(p_miss) if p_miss > 0 else 0.0))
    return (math.log(vocab) + (length - 1) * h) / length


def _window_mean(xs, i, w):
    """The mean of the ``w`` values up to and including ``xs[i]`` (fewer at the start)."""
    lo = max(0, i - w + 1)
    return sum(xs[lo:i + 1]) / (i + 1 - lo)


class TrainResult:
    """Loss curves and step times of ``train_modes``: ``curves`` / ``times`` {mode: list per step}, ``meta``."""

    def __init__(self, curves, times, meta):
        self.curves, self.times, self.meta = curves, times, meta
        self.kind = "train"

    def checkpoints(self, n=6):
        steps = self.meta["steps"]
        return _uniq([0] + [max(0, round(steps * i / (n - 1)) - 1) for i in range(1, n)])

    def summary_rows(self):
        """One dict per mode: loss at the checkpoints (means of the steps//20 steps up to each), the mean of
        the last tenth, its ratio to the reference's, the largest |loss / reference loss - 1| over the steps, and
        the median time per step."""
        ref = self.curves.get(REFERENCE_MODE)
        steps = self.meta["steps"]
        w = max(1, steps // 20)
        tail = max(1, steps // 10)
        rows = []
        for m, losses in self.curves.items():
            final = sum(losses[-tail:]) / tail
            row = {"mode": m, "what": TRAIN_MODES[m][2],
                   "loss_at": {s + 1: _window_mean(losses, s, w) for s in self.checkpoints()},
                   "final": final, "ms_per_step": 1000 * float(np.median(self.times[m]))}
            if ref is not None:
                rfinal = sum(ref[-tail:]) / tail
                row["final_vs_ref"] = final / rfinal - 1
                row["max_dev"] = max(abs(a / b - 1) for a, b in zip(losses, ref))
                row["time_vs_ref"] = row["ms_per_step"] / (1000 * float(np.median(self.times[REFERENCE_MODE])))
            rows.append(row)
        return rows

    def table(self, markdown=False, width=None):
        """The loss curves (mean loss of the steps//20 steps up to each checkpoint), the last tenth's mean
        against the reference's, and the median time per step; text lines at most ``width`` characters where
        they can be (default ``TABLE_WIDTH``; 0: unlimited)."""
        from .table import TABLE_WIDTH, _comment, _render
        width = TABLE_WIDTH if width is None else width
        m = self.meta
        rows = self.summary_rows()
        cps = [s + 1 for s in self.checkpoints()]
        has_ref = REFERENCE_MODE in self.curves
        headers = (["mode"] + [f"step {s}" for s in cps] + ["last 10%"]
                   + (["vs torch", "max |dev|"] if has_ref else []) + ["ms/step"] + (["x torch"] if has_ref else []))
        cells = []
        by_mode = {r["mode"]: r for r in rows}
        for mode in self.meta["modes"]:
            if mode not in by_mode:
                why = self.meta.get("rejected", {}).get(mode, {"status": "?"})
                cells.append([mode, f"n/a ({why['status']})"] + [""] * (len(headers) - 2))
                continue
            r = by_mode[mode]
            c = [r["mode"]] + [f"{v:.4f}" for v in r["loss_at"].values()] + [f"{r['final']:.4f}"]
            is_ref = r["mode"] == REFERENCE_MODE
            if has_ref:
                c += ["-", "-"] if is_ref else [f"{100 * r['final_vs_ref']:+.2f}%", f"{r['max_dev']:.2g}"]
            c.append(f"{r['ms_per_step']:.1f} ms")
            if has_ref:
                c.append(f"{r['time_vs_ref']:.1f}x")
            cells.append(c)
        head = (_comment([f"training: {m['layers']} ConvTBC layers (dim {m['dim']}, K={m['kernel']}, GLU), vocab "
                          f"{m['vocab']}, T={m['length']} B={m['batch']}, {m['steps']} steps of SGD (lr {m['lr']:g}, "
                          f"Nesterov 0.9, clip {m['clip']:g}), seed {m['seed']}"], width)
                + _comment([f"loss: cross entropy (nats), mean of the {max(1, m['steps'] // 20)} step(s) up to each "
                            f"step shown; noise floor {m['noise_floor']:.4f}", f"soc: {m['soc']}",
                            f"kernel threads: {m['num_threads']}"], width))
        body = _render(headers, cells, markdown=markdown, width=width, keys=1)
        return body if markdown else "\n".join(head + [body])

    def save(self, outdir, prefix=None, plots=True):
        """``outdir/<prefix>.csv`` (step, then each mode's loss and time), ``.json`` (meta, curves, times,
        summary) and, with matplotlib, ``plots/<prefix>_loss.png``.  Returns {csv, json, plots: [paths]}."""
        prefix = _check_prefix(prefix or default_prefix(self.kind))
        os.makedirs(outdir, exist_ok=True)
        out = {"csv": os.path.join(outdir, f"{prefix}.csv"), "json": os.path.join(outdir, f"{prefix}.json"),
               "plots": []}
        modes = list(self.curves)

        def write_csv(path):
            with open(path, "w", newline="") as fh:
                w = csv.writer(fh)
                w.writerow(["step"] + [f"loss[{m}]" for m in modes] + [f"seconds[{m}]" for m in modes])
                for i in range(self.meta["steps"]):
                    w.writerow([i + 1] + [repr(self.curves[m][i]) for m in modes]
                               + [f"{self.times[m][i]:.6f}" for m in modes])

        def write_json(path):
            with open(path, "w") as fh:
                json.dump({"meta": self.meta, "curves": self.curves, "times": self.times,
                           "summary": self.summary_rows()}, fh, indent=1)
        _writing(write_csv, out["csv"])
        _writing(write_json, out["json"])
        if plots:
            p = _writing(self.plot, os.path.join(outdir, "plots", f"{prefix}_loss.png"))
            if p:
                out["plots"].append(p)
        return out

    def plot(self, path):
        """The loss curves (left) and each mode's |loss / reference loss - 1| (right) as a PNG; the path, or
        None when matplotlib is not installed."""
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError:
            return None
        from .plots import _STYLES
        fig = Figure(figsize=(11, 4))
        FigureCanvasAgg(fig)
        ax1, ax2 = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
        ref = self.curves.get(REFERENCE_MODE)
        steps = np.arange(1, self.meta["steps"] + 1)
        w = max(1, self.meta["steps"] // 20)
        for i, (m, losses) in enumerate(self.curves.items()):
            ls, mk = _STYLES[i % len(_STYLES)]
            smooth = [_window_mean(losses, s, w) for s in range(len(losses))]
            ax1.plot(steps, smooth, ls=ls, marker=mk, markevery=max(1, len(steps) // 8), lw=1.2, label=m)
            if ref is not None and m != REFERENCE_MODE:
                dev = [abs(a / b - 1) + 1e-9 for a, b in zip(losses, ref)]
                ax2.plot(steps, dev, ls=ls, marker=mk, markevery=max(1, len(steps) // 8), lw=1, label=m)
        ax1.axhline(self.meta["noise_floor"], color="0.5", ls=":", lw=1, label="noise floor")
        ax1.set_xlabel("step")
        ax1.set_ylabel(f"cross entropy (mean over {w} steps)")
        ax1.set_title("loss")
        ax1.legend(fontsize=7)
        ax2.set_yscale("log")
        ax2.set_xlabel("step")
        ax2.set_title(f"|loss / loss[{REFERENCE_MODE}] - 1|")
        if ref is not None and len(self.curves) > 1:
            ax2.legend(fontsize=7)
        fig.tight_layout()
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        fig.savefig(path, dpi=100, metadata={"Software": None})
        return path
