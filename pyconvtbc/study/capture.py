"""Capture the operands of every ConvTBC backward of a torch model, to study them layer by layer.

::

    from pyconvtbc import study
    with study.capture(model) as cap:          # model: optional, names each record after its layer
        loss_fn(model(x), y).backward()
    cap.save("layers.pt")                      # python -m pyconvtbc study --data layers.pt ...
    res = cap.study({"grad_weight_dtypes": ["float8_e4m3fn"]}, scales=[1, "amax"], grads=["gw"])

Every backward of ``pyconvtbc.torch.conv_tbc`` (and so of ``pyconvtbc.torch.ConvTBC``) run inside the block is
recorded: its grad_output, input, weight, bias and pad, as NumPy arrays in their own dtypes, with the layer's
name (the ``model``'s module that owns the weight, else ``conv_tbc#i`` in backward order).  The backward itself
runs unchanged.  The hook is process-wide while the block is open (do not open two at once).
"""
from __future__ import annotations

import numpy as np


class capture:
    """Context manager recording every pyconvtbc ConvTBC backward (see the module docstring).

    ``records``: one dict per backward call: ``name``, ``grad_output``, ``input``, ``weight``, ``bias``
    (NumPy arrays; bfloat16 as ``ml_dtypes.bfloat16``) and ``pad``.  ``max_records`` bounds the list (later calls
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
        orig = fn.__dict__["backward"]
        names = self._names()
        to_numpy = bridge._to_numpy

        def backward(ctx, grad_output):
            if len(self.records) < self.max_records:
                x, w, b = ctx.saved_tensors
                n = sum(r["name"].startswith("conv_tbc#") for r in self.records)
                self.records.append({"name": names.get(id(w), f"conv_tbc#{n}"),
                                     "grad_output": np.array(to_numpy(grad_output)), "input": np.array(to_numpy(x)),
                                     "weight": np.array(to_numpy(w)), "bias": np.array(to_numpy(b)),
                                     "pad": int(ctx.pad)})
            else:
                self.dropped += 1
            return orig.__func__(ctx, grad_output) if isinstance(orig, staticmethod) else orig(ctx, grad_output)

        self._fn, self._orig = fn, orig
        fn.backward = staticmethod(backward)
        capture._active = self
        return self

    def __exit__(self, *exc):
        self._fn.backward = self._orig
        capture._active = None
        return False

    def save(self, path):
        """Write the records to ``path``: ``.pt`` (torch tensors, a list of dicts; ``study --data``) or ``.npz``
        (the first record only: one problem per .npz)."""
        p = str(path)
        if p.endswith(".npz"):
            if not self.records:
                raise ValueError("capture.save: no records to save; expected a backward inside the block")
            r = self.records[0]
            np.savez(p, **{k: np.asarray(v, np.float32) if k != "pad" else v for k, v in r.items() if k != "name"})
            return p
        import torch
        recs = [{k: (torch.from_numpy(np.asarray(v, np.float32)) if isinstance(v, np.ndarray) else v)
                 for k, v in r.items()} for r in self.records]
        torch.save(recs, p)
        return p

    def study(self, grid=None, **kwargs):
        """``run_study`` on the records, one problem per backward call (layer); keywords as ``run_study``."""
        from .modes import run_study
        if not self.records:
            raise ValueError("capture.study: no records; expected a ConvTBC backward inside the block")
        return run_study(None, grid, data=self.records, **kwargs)
