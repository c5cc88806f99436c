"""The data of a study: problem shapes, seeded random inputs, ``.npz`` inputs, and the problems built from them."""
from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

from .. import formats as _reg
from .._hints import TORCH_INSTALL
from .choices import (FORWARD_ONLY_INPUTS, GRADS, INPUT_DTYPES, _as_list, _as_whole, _norm_distribution,
                      _norm_scale, _norm_scale_rule, _uniq)
from .reference import reference_forward, reference_gradients


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
        """Terms summed per output element: K*Cout (gradInput), B*T_out (gradWeight and gradBias), K*Cin (the
        forward's output)."""
        if grad == "output":
            return self.K * self.Cin
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
            parts = [p.strip() for p in spec.strip().replace("x", ",").split(",")]
            if parts == [""]:
                parts = []
            if any(not p for p in parts):
                raise ValueError(f"{argname}: {spec!r} has an empty item; expected T,B,Cin,Cout,K[,pad] "
                                 "(e.g. 64,8,64,64,3,1)")
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
        shown = _spec_text(spec)
        if isinstance(vals, list):
            if len(vals) not in (5, 6):
                raise ValueError(f"{argname}: {shown} has {len(vals)} sizes; expected {expected}")
            vals = dict(zip(names, vals))
        if not isinstance(vals, dict) or not set(vals) <= set(names) or not set(names[:5]) <= set(vals):
            raise ValueError(f"{argname}: {shown} is not a shape; expected {expected}")
        out = {}
        for k in names:
            v = vals.get(k, 0)
            out[k] = _as_whole(v)
            if out[k] is None:
                raise ValueError(f"{argname}: {k}={v!r} in {shown} is not an integer")
        s = cls(**out)
        for k in names[:5]:
            if getattr(s, k) < 1:
                raise ValueError(f"{argname}: {k}={getattr(s, k)} in {shown}; expected >= 1")
        if not 0 <= s.pad <= 255:
            raise ValueError(f"{argname}: pad={s.pad} in {shown}; expected 0 <= pad <= 255")
        if s.T_out < 1:
            raise ValueError(f"{argname}: {shown} gives T_out = T + 2*pad - K + 1 = {s.T_out}; expected >= 1")
        return s


def _spec_text(spec):
    """A shape specification as the user would write it, for messages: 'T,B,...' text quoted as given; a dict,
    Shape or sequence as 'T=8,B=2,...' / '8,2,...' (not a Python repr)."""
    if isinstance(spec, str):
        return repr(spec)
    if isinstance(spec, Shape):
        spec = asdict(spec)
    if isinstance(spec, dict):
        return "'" + ",".join(f"{k}={v}" for k, v in spec.items()) + "'"
    try:
        return "'" + ",".join(str(v) for v in spec) + "'"
    except TypeError:
        return repr(spec)


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
_EXPECT_FILES = ("an .npz file, a directory of .npy files or a .pt file with grad_output, input, weight "
                 "[, bias, pad]")

# The study holds each operand in float64 (and in the input dtype, and the references): the largest array it takes.
MAX_ELEMENTS = 1 << 26


def check_size(shape, argname="shape"):
    """ValueError naming ``argname`` when one of ``shape``'s arrays is too large for a study to hold."""
    s = shape
    for what, n in (("grad_output (T_out*B*Cout)", s.T_out * s.B * s.Cout), ("input (T*B*Cin)", s.T * s.B * s.Cin),
                    ("weight (K*Cin*Cout)", s.K * s.Cin * s.Cout)):
        if n > MAX_ELEMENTS:
            raise ValueError(f"{argname}: {s.label} gives {what} = {n} elements ({n * 8 / 2 ** 30:.3g} GiB in "
                             f"float64); expected at most {MAX_ELEMENTS} elements per array in a study")
    return shape


def load_npz(path, pad=None):
    """Arrays of one problem from an ``.npz`` file: (dict of float64 arrays, pad).

    Keys: ``grad_output`` (or ``self`` / ``dy``), ``input`` (or ``x``), ``weight`` (or ``w``), optional ``bias``
    (or ``b``; zeros if absent) and optional ``pad`` (a scalar; the ``pad`` argument wins, else 0).
    """
    arrays, shape = _read_npz(path, pad)
    return arrays, shape.pad


def _pick(get, files, where):
    """The operands from a mapping-like source (``get(name)`` for a name in ``files``), as float64 arrays."""
    arrays = {}
    for key, names in _NPZ_KEYS.items():
        hit = next((n for n in names if n in files), None)
        if hit is None:
            if key == "bias":
                continue
            raise ValueError(f"data: {where} has no {key!r} array (or {', '.join(names[1:])}); "
                             f"it holds {sorted(files)}")
        arrays[key] = _as_f64(get(hit), f"{where}: {hit}")
    return arrays


# the registry's float formats that NumPy holds as ml_dtypes types (kind 'V'): bfloat16, float8_e4m3fn
_ML_FLOATS = tuple(t.storage.name for t in _reg.DATA_TYPES if t.name and t.storage.kind == "V")

def _as_f64(a, where):
    if hasattr(a, "detach"):                       # a torch tensor (bfloat16 has no NumPy twin: via float32)
        a = a.detach().cpu()
        a = a.float().numpy() if a.is_floating_point() else a.numpy()
    a = np.asarray(a)
    if a.dtype.kind not in "fiu" and a.dtype.name not in _ML_FLOATS:
        raise ValueError(f"data: {where} has dtype {a.dtype}; expected a real floating-point array")
    return a.astype(np.float64)


def _check_arrays(arrays, pad, where, pad_given=False):
    """The problem's Shape, after checking that the operands fit together (ValueError naming ``where``; naming
    ``pad`` when ``pad_given``: the caller's pad, which overrides the file's, does not fit the arrays)."""
    x, w, dy = arrays["input"], arrays["weight"], arrays["grad_output"]
    if x.ndim != 3 or w.ndim != 3 or dy.ndim != 3:
        raise ValueError(f"data: {where}: input {x.shape}, weight {w.shape}, grad_output {dy.shape}; expected "
                         "3-D arrays (T,B,Cin), (K,Cin,Cout), (T_out,B,Cout)")
    if pad_given:
        p = _as_whole(pad)
        if p is None or not 0 <= p <= 255:
            raise ValueError(f"pad: {pad!r}; expected an integer in [0, 255] (it overrides the pad of {where})")
        need = dy.shape[0] - x.shape[0] + w.shape[0] - 1          # = 2 * pad, from T_out = T + 2*pad - K + 1
        if need != 2 * p:
            fits = f"need pad {need // 2}" if need >= 0 and need % 2 == 0 else "fit no pad"
            raise ValueError(f"pad: {p} does not fit {where}: its input {x.shape}, weight {w.shape} and "
                             f"grad_output {dy.shape} {fits}; expected that pad, or none (the file's own)")
        pad = p
    shape = Shape.parse((x.shape[0], x.shape[1], x.shape[2], w.shape[2], w.shape[0], pad), argname=f"data {where}")
    if w.shape[1] != x.shape[2] or dy.shape != (shape.T_out, shape.B, shape.Cout):
        raise ValueError(f"data: {where}: input {x.shape}, weight {w.shape}, grad_output {dy.shape} with pad "
                         f"{pad}; expected weight (K, {x.shape[2]}, Cout) and grad_output "
                         f"{(shape.T_out, shape.B, shape.Cout)}")
    arrays.setdefault("bias", np.zeros(shape.Cout))
    if arrays["bias"].shape != (shape.Cout,):
        raise ValueError(f"data: {where}: bias {arrays['bias'].shape}; expected ({shape.Cout},)")
    check_size(shape, f"data {where}")
    return shape


def _pad_of(value, pad, where):
    if pad is not None:
        return pad
    if value is None:
        return 0
    p = _as_whole(np.asarray(value).reshape(-1)[0] if np.size(value) == 1 else None)
    if p is None:
        raise ValueError(f"data: {where}: pad {value!r}; expected one integer")
    return p


def _np_load(path, what, kind):
    """np.load without pickles; a file NumPy cannot read (empty, truncated, not NumPy's) is a usage error."""
    try:
        empty = os.path.getsize(path) == 0        # (numpy < 1.25 says "pickled" for an empty file, not EOFError)
    except OSError:
        empty = False
    if empty:
        raise ValueError(f"{what}: {str(path)!r} is empty or truncated; expected {_EXPECT_FILES}")
    try:
        return np.load(path, allow_pickle=False)
    except EOFError:
        raise ValueError(f"{what}: {str(path)!r} is empty or truncated; expected {_EXPECT_FILES}") from None
    except (OSError, ValueError) as e:
        why = "not a NumPy file" if "pickled" in str(e) else str(e)
        raise ValueError(f"{what}: {str(path)!r} is not a readable {kind} file ({why}); expected "
                         f"{_EXPECT_FILES}") from None


def _read_npz(path, pad):
    """``load_npz``, returning the problem's Shape instead of its pad."""
    if not isinstance(path, (str, os.PathLike)) or not os.path.isfile(path):
        raise ValueError(f"npz: {path!r} is not a file; expected an .npz file with grad_output, input, weight")
    z = _np_load(path, "npz", ".npz")
    if not hasattr(z, "files"):
        raise ValueError(f"npz: {path!r} holds one array, not an .npz archive; expected {_EXPECT_FILES}")
    with z:
        files = set(z.files)
        arrays = _pick(lambda n: z[n], files, repr(str(path)))
        given = pad is not None
        pad = _pad_of(z["pad"] if "pad" in files else None, pad, repr(str(path)))
    return arrays, _check_arrays(arrays, pad, repr(str(path)), given)


def load_data(path, pad=None):
    """The problems stored in ``path``: a list of (name, dict of float64 arrays, Shape).

    ``path`` is an ``.npz`` file (arrays ``grad_output`` / ``self`` / ``dy``, ``input`` / ``x``, ``weight`` /
    ``w``, optional ``bias`` / ``b`` and ``pad``), a directory of ``.npy`` files with those names
    (``grad_output.npy``, ...; ``pad.npy`` optional), or a ``.pt`` file (torch, loaded with ``weights_only``)
    holding one such dict of tensors or a list of them (what ``capture(...).save()`` writes: each with a
    ``name``).  ``pad`` overrides the stored pad.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.path.exists(path):
        raise ValueError(f"data: {path!r} does not exist; expected {_EXPECT_FILES}")
    p = str(path)
    base = os.path.basename(os.path.normpath(p))
    if os.path.isdir(p):
        files = {os.path.splitext(f)[0]: os.path.join(p, f) for f in os.listdir(p) if f.endswith(".npy")}

        def get(n):
            return _np_load(files[n], "data", ".npy")
        arrays = _pick(get, set(files), repr(p))
        pd = _pad_of(get("pad") if "pad" in files else None, pad, repr(p))
        return [(base, arrays, _check_arrays(arrays, pd, repr(p), pad is not None))]
    if p.endswith(".pt") or p.endswith(".pth"):
        return _load_pt(p, pad)
    arrays, shape = _read_npz(p, pad)
    return [(base, arrays, shape)]


def _first_sentence(e, limit=120):
    """The first sentence of an exception's message, on one line (torch's load errors run to paragraphs)."""
    text = " ".join(str(e).split())
    cut = text.find(". ")
    text = text[:cut] if cut > 0 else text.rstrip(".")
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _load_pt(path, pad):
    try:
        import torch
    except ImportError:
        raise ValueError(f"data: {path!r} is a torch file and torch is not installed; expected {_EXPECT_FILES} "
                         f"({TORCH_INSTALL})") from None
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:       # torch raises many kinds for a bad file, some with pages of advice
        raise ValueError(f"data: {path!r} is not a readable torch file ({type(e).__name__}: {_first_sentence(e)}); "
                         f"expected {_EXPECT_FILES}") from None
    recs = obj if isinstance(obj, (list, tuple)) else [obj]
    out = []
    for i, rec in enumerate(recs):
        where = f"{path!r}[{i}]" if isinstance(obj, (list, tuple)) else repr(path)
        if not isinstance(rec, dict):
            raise ValueError(f"data: {where} is a {type(rec).__name__}; expected a dict of tensors")
        arrays = _pick(rec.__getitem__, set(rec), where)
        pd = _pad_of(rec.get("pad"), pad, where)
        name = str(rec.get("name", f"{os.path.basename(path)}[{i}]" if len(recs) > 1 else os.path.basename(path)))
        out.append((name, arrays, _check_arrays(arrays, pd, where, pad is not None)))
    if not out:
        raise ValueError(f"data: {path!r} holds no problems; expected {_EXPECT_FILES}")
    return out


@dataclass
class _Problem:
    shape: Shape
    distribution: str
    scale: object                         # a float (multiplies grad_output, or all: scale_operands) or a rule
    seed: Optional[int]
    source: dict                          # float64 arrays
    _cache: dict = field(default_factory=dict)

    @property
    def amax(self):
        """FRAC of an 'amax:FRAC' scale rule, 'format' for 'amax' (the output format's default FRAC), 'best'
        for 'best', else None."""
        if not isinstance(self.scale, str):
            return None
        if self.scale in ("amax", "best"):
            return "format" if self.scale == "amax" else "best"
        return float(self.scale.partition(":")[2])

    def _replace_scale(self, scale):
        """The same problem (data and caches shared) under another scale rule (a string rule: same data)."""
        return _Problem(self.shape, self.distribution, scale, self.seed, self.source, self._cache)

    def inputs(self, dtype):
        """Arrays in the input dtype (bias too) for the operator; for a forward-only 8-bit input dtype
        (HiFloat8), input and weight as its uint8 codes (rounded TA), grad_output and bias in float32."""
        key = ("in", dtype)
        if key not in self._cache:
            if dtype in FORWARD_ONLY_INPUTS:
                from ..codecs import hif8_encode
                x = {k: v.astype(np.float32) for k, v in self.source.items()}
                x["input"], x["weight"] = hif8_encode(self.source["input"]), hif8_encode(self.source["weight"])
                self._cache[key] = x
            else:
                npdt = INPUT_DTYPES[dtype]
                with np.errstate(over="ignore"):
                    self._cache[key] = {k: v.astype(npdt) for k, v in self.source.items()}
        return self._cache[key]

    def input_values(self, dtype):
        """``inputs(dtype)`` as values (float64): HiFloat8 codes decoded."""
        x = self.inputs(dtype)
        if dtype not in FORWARD_ONLY_INPUTS:
            return x
        from ..codecs import hif8_decode
        return {k: (hif8_decode(v).astype(np.float64) if v.dtype == np.uint8 else v) for k, v in x.items()}

    def scaled_inputs(self, dtype, dy_scale):
        """``inputs(dtype)`` with grad_output multiplied by ``dy_scale`` before the cast to the input dtype."""
        if dy_scale == 1:
            return self.inputs(dtype)
        key = ("in", dtype, dy_scale)
        if key not in self._cache:
            x = dict(self.inputs(dtype))
            with np.errstate(over="ignore"):
                x["grad_output"] = (self.source["grad_output"] * dy_scale).astype(INPUT_DTYPES[dtype])
            self._cache[key] = x
        return self._cache[key]

    def reference(self, dtype, which, dy_scale=1):
        """float64 gradients of the operator's inputs ('inputs') or of the source data ('source'), with
        grad_output multiplied by ``dy_scale``."""
        if dy_scale != 1:
            key = ("ref", dtype if which == "inputs" else None, dy_scale)
            if key not in self._cache:
                if which == "inputs":
                    src = self.scaled_inputs(dtype, dy_scale)
                    dy = src["grad_output"].astype(np.float64)
                    with np.errstate(invalid="ignore", over="ignore"):
                        exact = math.frexp(dy_scale)[0] == 0.5 and np.array_equal(
                            dy, self.inputs(dtype)["grad_output"].astype(np.float64) * dy_scale)
                    if exact:       # the cast kept every scaled value exact: the gradients scale exactly too
                        self._cache[key] = {g: v * dy_scale for g, v in self.reference(dtype, which).items()}
                    else:
                        with np.errstate(invalid="ignore", over="ignore"):
                            self._cache[key] = dict(zip(GRADS, reference_gradients(
                                dy, src["input"], src["weight"], self.shape.pad)))
                else:
                    self._cache[key] = {g: v * dy_scale for g, v in self.reference(dtype, which).items()}
            return self._cache[key]
        key = ("ref", dtype if which == "inputs" else None)
        if key not in self._cache:
            src = self.inputs(dtype) if which == "inputs" else self.source
            with np.errstate(invalid="ignore", over="ignore"):
                self._cache[key] = dict(zip(GRADS, reference_gradients(src["grad_output"], src["input"],
                                                                       src["weight"], self.shape.pad)))
        return self._cache[key]

    def forward_reference(self, dtype, which):
        """float64 output of the forward (``reference_forward``) from the operator's inputs ('inputs': input,
        weight and bias in the input dtype) or from the source data ('source'); grad_output plays no part."""
        key = ("fwd", dtype if which == "inputs" else None)
        if key not in self._cache:
            src = self.input_values(dtype) if which == "inputs" else self.source
            with np.errstate(invalid="ignore", over="ignore"):
                self._cache[key] = reference_forward(src["input"], src["weight"], src["bias"], self.shape.pad)
        return self._cache[key]

    def context(self):
        s = self.shape
        return {"shape": s.label, "T": s.T, "B": s.B, "Cin": s.Cin, "Cout": s.Cout, "K": s.K, "pad": s.pad,
                "distribution": self.distribution, "scale": self.scale, "seed": self.seed}


SCALE_OPERANDS = ("grad_output", "all")


def _scaled(arrays, sc, operands="grad_output"):
    """The arrays under a numeric scale ``sc``: grad_output alone multiplied (``operands`` 'grad_output', the
    default: how a loss scale reaches the backward), or every array ('all'); a scale rule (a string): unchanged."""
    if isinstance(sc, str):
        return dict(arrays)
    if operands == "all":
        return {k: v * sc for k, v in arrays.items()}
    return {**arrays, "grad_output": arrays["grad_output"] * sc}


def _records(data, pad):
    """(name, arrays, Shape) records from ``data``: a path (``load_data``), a ``capture`` (its records), or a
    list of dicts with grad_output, input, weight [, bias, pad, name]."""
    if isinstance(data, (str, os.PathLike)):
        return load_data(data, pad)
    recs = getattr(data, "records", data)
    if isinstance(recs, dict):
        recs = [recs]
    out = []
    for i, rec in enumerate(_as_list("data", recs)):
        where = f"data[{i}]"
        if not isinstance(rec, dict):
            raise ValueError(f"data: {where} is a {type(rec).__name__}; expected a dict with grad_output, input, "
                             "weight [, bias, pad, name]")
        arrays = _pick(rec.__getitem__, set(rec), where)
        shape = _check_arrays(arrays, _pad_of(rec.get("pad"), pad, where), where, pad is not None)
        out.append((str(rec.get("name", f"layer{i}")), arrays, shape))
    return out


def _problems(shapes, npz, distribution, scales, seed, pad=None, data=None, scale_operands="grad_output"):
    """The problems of a study: each shape (or the arrays of ``npz`` / ``data``) at each scale (a number
    multiplies grad_output, or every operand with ``scale_operands='all'``)."""
    scales = _uniq(_norm_scale_rule("scales", s) for s in _as_list("scales", scales))
    if scale_operands not in SCALE_OPERANDS:
        raise ValueError(f"scale_operands: {scale_operands!r}; expected one of {', '.join(SCALE_OPERANDS)}")
    if npz is not None or data is not None:
        if sum(v is not None for v in (shapes, npz, data)) > 1:
            raise ValueError("shapes, npz and data: more than one was given; expected one source of data (shapes "
                             "for seeded random data, npz or data for arrays from a file or a capture)")
        if npz is not None:
            arrays, s = _read_npz(npz, pad)
            recs = [(f"npz:{os.path.basename(str(npz))}", arrays, s)]
        else:
            recs = _records(data, pad)
        return [_Problem(s, name, sc, None, _scaled(arrays, sc, scale_operands)) for name, arrays, s in recs
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
        check_size(s, "shapes")
        for sd in (seed if isinstance(seed, (list, tuple)) else [seed]):
            base = make_data(s, distribution, 1.0, sd)
            for sc in scales:
                out.append(_Problem(s, distribution, sc, sd, _scaled(base, sc, scale_operands)))
    return out
