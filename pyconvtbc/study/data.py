"""The data of a study: problem shapes, seeded random inputs, ``.npz`` inputs, and the problems built from them."""
from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from .choices import (GRADS, INPUT_DTYPES, _as_list, _as_whole, _norm_distribution, _norm_scale,
                      _uniq)
from .reference import reference_gradients


@dataclass(frozen=True)
class Shape:
    """Problem sizes: input (T, B, Cin), weight (K, Cin, Cout), padding ``pad``; T is T_in."""

    T: int
    B: int
    Cin: int
    Cout: int
    K: int
    pad: int = 0

    @property
    def T_out(self):
        return self.T + 2 * self.pad - self.K + 1

    def reduction_length(self, grad):
        """Terms summed per output element: K*Cout (gradInput), B*T_out (gradWeight and gradBias)."""
        return self.K * self.Cout if grad == "gradInput" else self.B * self.T_out

    @property
    def label(self):
        return f"T={self.T} B={self.B} Cin={self.Cin} Cout={self.Cout} K={self.K} pad={self.pad}"

    @classmethod
    def parse(cls, spec, argname="shape"):
        """A Shape from a Shape, a tuple (T, B, Cin, Cout, K[, pad]), 'T,B,Cin,Cout,K[,pad]' or 'T=..,B=..'."""
        if isinstance(spec, Shape):
            vals = asdict(spec)
        elif isinstance(spec, dict):
            vals = dict(spec)
        elif isinstance(spec, str):
            parts = [p.strip() for p in spec.replace("x", ",").split(",") if p.strip()]
            if parts and all("=" in p for p in parts):
                vals = {}
                for p in parts:
                    k, _, v = p.partition("=")
                    vals[k.strip()] = v.strip()
            else:
                vals = parts
        else:
            try:
                vals = list(spec)
            except TypeError:
                vals = None
        names = ("T", "B", "Cin", "Cout", "K", "pad")
        expected = "T,B,Cin,Cout,K[,pad] (e.g. 64,8,64,64,3,1) or T=..,B=..,Cin=..,Cout=..,K=..[,pad=..]"
        if isinstance(vals, list):
            if len(vals) not in (5, 6):
                raise ValueError(f"{argname}: {spec!r} has {len(vals)} sizes; expected {expected}")
            vals = dict(zip(names, vals))
        if not isinstance(vals, dict) or not set(vals) <= set(names) or not set(names[:5]) <= set(vals):
            raise ValueError(f"{argname}: {spec!r} is not a shape; expected {expected}")
        out = {}
        for k in names:
            v = vals.get(k, 0)
            out[k] = _as_whole(v)
            if out[k] is None:
                raise ValueError(f"{argname}: {k}={v!r} in {spec!r} is not an integer")
        s = cls(**out)
        for k in names[:5]:
            if getattr(s, k) < 1:
                raise ValueError(f"{argname}: {k}={getattr(s, k)} in {spec!r}; expected >= 1")
        if not 0 <= s.pad <= 255:
            raise ValueError(f"{argname}: pad={s.pad} in {spec!r}; expected 0 <= pad <= 255")
        if s.T_out < 1:
            raise ValueError(f"{argname}: {spec!r} gives T_out = T + 2*pad - K + 1 = {s.T_out}; expected >= 1")
        return s


DEFAULT_SHAPE = Shape(64, 8, 64, 64, 3, 1)


def _base_samples(rng, shape, name, sigma):
    if name == "normal":
        return rng.standard_normal(shape)
    if name == "uniform":
        return rng.uniform(-1.0, 1.0, shape)
    # lognormal magnitudes with random signs: a wide dynamic range
    return rng.choice(np.array([-1.0, 1.0]), size=shape) * np.exp(sigma * rng.standard_normal(shape))


def make_data(shape, distribution="normal", scale=1.0, seed=0):
    """Seeded float64 data for one problem: dict grad_output (T_out,B,Cout), input, weight, bias.

    ``distribution``: 'normal' (N(0,1)), 'uniform' (U(-1,1)) or 'lognormal[:SIGMA]' (random sign times
    exp(SIGMA * N(0,1)), SIGMA = 1 by default); every value is then multiplied by ``scale``.  The samples depend
    on (seed, shape, distribution) only, so different scales are the same data scaled.
    """
    s = Shape.parse(shape)
    name, sigma = _norm_distribution(distribution)
    scale = _norm_scale("scale", scale)
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed: {seed!r}; expected an integer >= 0")
    ss = np.random.SeedSequence([int(seed), s.T, s.B, s.Cin, s.Cout, s.K, s.pad])
    shapes = {"grad_output": (s.T_out, s.B, s.Cout), "input": (s.T, s.B, s.Cin),
              "weight": (s.K, s.Cin, s.Cout), "bias": (s.Cout,)}
    out = {}
    for child, (key, shp) in zip(ss.spawn(4), shapes.items()):
        out[key] = scale * _base_samples(np.random.default_rng(child), shp, name, sigma)
    return out


_NPZ_KEYS = {"grad_output": ("grad_output", "self", "dy"), "input": ("input", "x"), "weight": ("weight", "w"),
             "bias": ("bias", "b")}


def load_npz(path, pad=None):
    """Arrays of one problem from an ``.npz`` file: (dict of float64 arrays, pad).

    Keys: ``grad_output`` (or ``self`` / ``dy``), ``input`` (or ``x``), ``weight`` (or ``w``), optional ``bias``
    (or ``b``; zeros if absent) and optional ``pad`` (a scalar; the ``pad`` argument wins, else 0).
    """
    arrays, shape = _read_npz(path, pad)
    return arrays, shape.pad


def _read_npz(path, pad):
    """``load_npz``, returning the problem's Shape instead of its pad."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise ValueError(f"npz: {path!r} is not a file; expected an .npz file with grad_output, input, weight")
    with np.load(path, allow_pickle=False) as z:
        files = set(z.files)
        arrays = {}
        for key, names in _NPZ_KEYS.items():
            hit = next((n for n in names if n in files), None)
            if hit is None:
                if key == "bias":
                    continue
                raise ValueError(f"npz: {path!r} has no {key!r} array (or {', '.join(names[1:])}); "
                                 f"it holds {sorted(files)}")
            arrays[key] = np.asarray(z[hit]).astype(np.float64)
        if pad is None:
            pad = int(z["pad"]) if "pad" in files else 0
    x, w, dy = arrays["input"], arrays["weight"], arrays["grad_output"]
    if x.ndim != 3 or w.ndim != 3 or dy.ndim != 3:
        raise ValueError(f"npz: {path!r}: input {x.shape}, weight {w.shape}, grad_output {dy.shape}; expected "
                         "3-D arrays (T,B,Cin), (K,Cin,Cout), (T_out,B,Cout)")
    shape = Shape.parse((x.shape[0], x.shape[1], x.shape[2], w.shape[2], w.shape[0], pad), argname="npz")
    if w.shape[1] != x.shape[2] or dy.shape != (shape.T_out, shape.B, shape.Cout):
        raise ValueError(f"npz: {path!r}: input {x.shape}, weight {w.shape}, grad_output {dy.shape} with pad "
                         f"{pad}; expected weight (K, {x.shape[2]}, Cout) and grad_output "
                         f"{(shape.T_out, shape.B, shape.Cout)}")
    arrays.setdefault("bias", np.zeros(shape.Cout))
    if arrays["bias"].shape != (shape.Cout,):
        raise ValueError(f"npz: {path!r}: bias {arrays['bias'].shape}; expected ({shape.Cout},)")
    return arrays, shape


@dataclass
class _Problem:
    shape: Shape
    distribution: str
    scale: float
    seed: Optional[int]
    source: dict                          # float64 arrays
    _cache: dict = field(default_factory=dict)

    def inputs(self, dtype):
        """Arrays in the input dtype (bias too) for the operator."""
        key = ("in", dtype)
        if key not in self._cache:
            npdt = INPUT_DTYPES[dtype]
            with np.errstate(over="ignore"):
                self._cache[key] = {k: v.astype(npdt) for k, v in self.source.items()}
        return self._cache[key]

    def reference(self, dtype, which):
        key = ("ref", dtype if which == "inputs" else None)
        if key not in self._cache:
            src = self.inputs(dtype) if which == "inputs" else self.source
            with np.errstate(invalid="ignore", over="ignore"):
                self._cache[key] = dict(zip(GRADS, reference_gradients(src["grad_output"], src["input"],
                                                                       src["weight"], self.shape.pad)))
        return self._cache[key]

    def context(self):
        s = self.shape
        return {"shape": s.label, "T": s.T, "B": s.B, "Cin": s.Cin, "Cout": s.Cout, "K": s.K, "pad": s.pad,
                "distribution": self.distribution, "scale": self.scale, "seed": self.seed}


def _problems(shapes, npz, distribution, scales, seed, pad=None):
    """The problems of a study: each shape (or the npz arrays) at each scale."""
    scales = _uniq(_norm_scale("scales", s) for s in _as_list("scales", scales))
    if npz is not None:
        if shapes is not None:
            raise ValueError("shapes and npz were both given; expected one source of data (shapes for seeded "
                             "random data, npz for arrays from a file)")
        arrays, s = _read_npz(npz, pad)
        return [_Problem(s, f"npz:{os.path.basename(str(npz))}", sc, None, {k: v * sc for k, v in arrays.items()})
                for sc in scales]
    if shapes is None:
        shapes = [DEFAULT_SHAPE]
    elif isinstance(shapes, (Shape, str, dict)) or (
            isinstance(shapes, (tuple, list)) and shapes and all(isinstance(v, (int, np.integer)) for v in shapes)):
        shapes = [Shape.parse(shapes, "shapes")]                  # one shape
    else:
        shapes = [Shape.parse(s, "shapes") for s in _as_list("shapes", shapes)]
    out = []
    for s in _uniq(shapes):
        base = make_data(s, distribution, 1.0, seed)
        for sc in scales:
            out.append(_Problem(s, distribution, sc, seed, {k: v * sc for k, v in base.items()}))
    return out
