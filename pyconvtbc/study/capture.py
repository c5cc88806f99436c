"""Capture the operands of every ConvTBC backward of a torch model, to study them layer by layer.

::

    from pyconvtbc import study
    with study.capture(model) as cap:          # model: optional, names each record after its layer
        loss_fn(model(x), y).backward()
    cap.save("layers.pt")                      # python -m pyconvtbc study --data layers.pt ...
    res = cap.study({"grad_weight_dtypes": ["float8_e4m3fn"]}, scales=[1, "amax"], grads=["gw"])

Every backward of ``pyconvtbc.torch.conv_tbc`` (and so of ``pyconvtbc.torch.ConvTBC``) run inside the block is
recorded: its grad_output, input, weight, bias and pad, as NumPy arrays in the dtype the operator saw (inside a
``torch.autocast`` region: the region's dtype, e.g. bfloat16), that dtype's name, and the layer's name: the
qualified name of the ``model``'s module whose forward made the call (``convs.0``), else ``conv_tbc#i`` in
backward order.  The backward itself runs unchanged.  The hooks are process-wide while the block is open (do
not open two at once).  ``save`` keeps the dtypes; ``study`` takes the captured dtypes as its default input
dtypes.
"""
from __future__ import annotations

import numpy as np


def _pop_into(stack):
    """A forward hook that pops ``stack`` and returns None (a hook's return value would replace the output)."""
    def hook(module, args, output):
        if stack:
            stack.pop()
    return hook


class capture:
    """Context manager recording every pyconvtbc ConvTBC backward (see the module docstring).

    ``records``: one dict per backward call: ``name``, ``dtype`` (the operator's dtype name), ``grad_output``,
    ``input``, ``weight``, ``bias`` (NumPy arrays in that dtype; bfloat16 as ``ml_dtypes.bfloat16``) and ``pad``.
    ``max_records`` bounds the list (later calls
    are counted in ``dropped``, not kept).
    """

    _active = None

    def __init__(self, model=None, *, max_records=1000):
        if isinstance(max_records, bool) or not isinstance(max_records, int) or max_records < 1:
            raise ValueError(f"max_records: {max_records!r}; expected an integer >= 1")
        self.model = model
        self.max_records = max_records
        self.records = []
        self.dropped = 0
        self._orig = None

    def _names(self):
        if self.model is None:
            return {}
        names = {}
        for mname, mod in self.model.named_modules():
            w = getattr(mod, "weight", None)
            if w is not None:
                names[id(w)] = mname or type(mod).__name__
        return names

    def __enter__(self):
        try:
            from .. import torch as bridge
        except ImportError as e:
            raise ImportError(f"study.capture needs torch: {e}") from e
        if capture._active is not None:
            raise RuntimeError("study.capture: another capture is open; expected one at a time")
        fn = bridge._ConvTBCFunction
        orig, orig_fwd = fn.__dict__["backward"], fn.__dict__["forward"]
        names = self._names()
        to_numpy = bridge._to_numpy
        calling = []                       # qualified names of the model's modules whose forward is running
        self._hooks = []
        if self.model is not None:
            for mname, mod in self.model.named_modules():
                if getattr(mod, "weight", None) is None:
                    continue
                label = mname or type(mod).__name__
                self._hooks.append(mod.register_forward_pre_hook(lambda m, a, label=label: calling.append(label)))
                self._hooks.append(mod.register_forward_hook(_pop_into(calling)))

        def forward(ctx, *args):
            ctx.pyconvtbc_capture_name = calling[-1] if calling else None
            return orig_fwd.__func__(ctx, *args) if isinstance(orig_fwd, staticmethod) else orig_fwd(ctx, *args)

        def backward(ctx, grad_output):
            if len(self.records) < self.max_records:
                x, w, b = ctx.saved_tensors
                n = sum(r["name"].startswith("conv_tbc#") for r in self.records)
                name = getattr(ctx, "pyconvtbc_capture_name", None) or names.get(id(w), f"conv_tbc#{n}")
                xs = np.array(to_numpy(x))
                self.records.append({"name": name, "dtype": xs.dtype.name,
                                     "grad_output": np.array(to_numpy(grad_output)), "input": xs,
                                     "weight": np.array(to_numpy(w)), "bias": np.array(to_numpy(b)),
                                     "pad": int(ctx.pad)})
            else:
                self.dropped += 1
            return orig.__func__(ctx, grad_output) if isinstance(orig, staticmethod) else orig(ctx, grad_output)

        self._fn, self._orig, self._orig_fwd = fn, orig, orig_fwd
        fn.forward = staticmethod(forward)
        fn.backward = staticmethod(backward)
        capture._active = self
        return self

    def __exit__(self, *exc):
        self._fn.backward = self._orig
        self._fn.forward = self._orig_fwd
        for h in self._hooks:
            h.remove()
        capture._active = None
        return False

    def save(self, path):
        """Write the records to ``path``: ``.pt`` (torch tensors, a list of dicts; ``study --data``) or ``.npz``
        (the first record only: one problem per .npz)."""
        p = str(path)
        if p.endswith(".npz"):
            if not self.records:
                raise ValueError("capture.save: no records to save; expected a backward inside the block")
            r = self.records[0]       # .npz holds no bfloat16: the values as float32 (exact), the dtype by name
            np.savez(p, **{k: (np.asarray(v, np.float32) if isinstance(v, np.ndarray) else np.asarray(v))
                           for k, v in r.items() if k != "name"})
            return p
        import torch

        def tensor(v):                # in the recorded dtype (bfloat16 through its bits)
            if v.dtype.name == "bfloat16":
                return torch.from_numpy(np.ascontiguousarray(v).view(np.int16)).view(torch.bfloat16)
            return torch.from_numpy(np.ascontiguousarray(v))
        recs = [{k: (tensor(v) if isinstance(v, np.ndarray) else v) for k, v in r.items()} for r in self.records]
        torch.save(recs, p)
        return p

    def study(self, grid=None, **kwargs):
        """``run_study`` on the records, one problem per backward call (layer); keywords as ``run_study``."""
        from .modes import run_study
        if not self.records:
            raise ValueError("capture.study: no records; expected a ConvTBC backward inside the block")
        if grid is None or (isinstance(grid, dict) and "input_dtypes" not in grid):
            # by default, the dtypes the layers saw (bfloat16 under a bf16 autocast)
            grid = dict(grid or {}, input_dtypes=list(dict.fromkeys(r["dtype"] for r in self.records)))
        recs = [{k: v for k, v in r.items() if k != "dtype"} for r in self.records]
        return run_study(None, grid, data=recs, **kwargs)
