"""Precision studies: what does each NPU mode do to the gradients of conv_tbc?

Three studies over one grid of emulation modes, each measured against an exact (float64) reference:

* ``run_study``               per-mode error table (``python -m pyconvtbc study`` / ``study modes``)
* ``reduction_order_spread``  run-to-run spread from the fp32 accumulation order (``study spread``)
* ``error_growth``            error against the reduction length, sweeping T (or another size) (``study growth``)

A *cell* of the grid is one choice of input dtype x cubeMathType x SoC profile x gradWeight dtype x HF32
rounding / mantissa width x HiFloat8 rounding x saturation.  Axes that cannot change a cell's result are
collapsed (shown as ``-``): the HF32 settings unless the compute precision is HF32, the HiFloat8 rounding unless
gradWeight is HIFLOAT8, saturation unless gradWeight is an 8-bit format.  A cell the operator rejects (for
example ascend910 with FLOAT KEEP_DTYPE, or BF16 on ascend910) becomes an ``n/a (161002)`` row.

Metrics (``error_metrics``), per gradient, of the computed result c against the float64 reference r:

* ``max_abs``  max |c - r|;  ``max_rel``  max |c - r| / |r| over r != 0;
  ``rel_fro``  ||c - r||_F / ||r||_F;  all three over the elements where c and r are finite.
* ``ulp_median`` / ``ulp_p99`` / ``ulp_max``: the distance from c to r counted in steps of the OUTPUT format
  (``pyconvtbc.formats.ulp_distance``: consecutive values are 1 apart, linear inside a gap; for HiFloat8 that is
  its tapered code order).  p99 is the nearest-rank percentile: the smallest error that at least 99 % of the
  elements do not exceed.
* counts: ``n_nan`` (c is NaN), ``n_inf`` (c is +-inf), ``n_overflow`` (r finite and either c is +-inf, or |r| is
  past the format's overflow threshold, or c is NaN with |r| > the format's max: E4M3FN's overflow), and
  ``n_underflow`` (r finite and non-zero, c exactly zero: flushed by operand rounding or the output cast).

The reference is computed from the operator's inputs as they are passed (``reference="inputs"``: the values in
the input dtype, not rounded to the compute precision), so the error is the operator's own; with
``reference="source"`` it is computed from the float64 data before the cast to the input dtype, so the input
quantisation is part of the error.

Nothing here imports torch or matplotlib at import time; plots are written only when matplotlib is installed
(the ``plot`` extra).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import itertools
import json
import math
import os
import shlex
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Optional

import numpy as np

import ml_dtypes

from .api import conv_tbc_backward
from .codecs import e4m3fn_encode, hif8_decode, hif8_encode, round_to_hf32
from .formats import HIF8_OVERFLOW, get_format, ulp_distance
from .profiles import COMPUTE_HF32, COMPUTE_NAMES, PROFILES, compute_precision
from .status import AclnnError

__all__ = [
    "Shape", "Cell", "Grid", "StudyResult", "GRADS", "DISTRIBUTIONS",
    "make_data", "load_npz", "reference_gradients", "ulp_errors", "error_metrics",
    "permuted_gradients", "run_study", "reduction_order_spread", "error_growth", "cli",
]

# ---- vocabularies -------------------------------------------------------------------------------------------
INPUT_DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
                "bfloat16": np.dtype(ml_dtypes.bfloat16)}
_INPUT_ALIASES = {"fp32": "float32", "float": "float32", "fp16": "float16", "half": "float16",
                  "bf16": "bfloat16"}
_ACL_CODE = {"float32": 0, "float16": 1, "bfloat16": 27}

CUBE_MATH_TYPES = {"KEEP_DTYPE": 0, "ALLOW_FP32_DOWN_PRECISION": 1, "USE_FP16": 2, "USE_HF32": 3}
_CUBE_BY_VALUE = {v: k for k, v in CUBE_MATH_TYPES.items()}
_CUBE_ALIASES = {"keep": 0, "allow_fp32_down": 1, "allow_down": 1, "fp16": 2, "hf32": 3}

GW_DTYPES = ("same", "float32", "float16", "bfloat16", "hifloat8", "float8_e4m3fn")
_GW_ALIASES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "hif8": "hifloat8",
               "e4m3": "float8_e4m3fn", "e4m3fn": "float8_e4m3fn", "weight": "same"}
_EIGHT_BIT = ("hifloat8", "float8_e4m3fn")

HF32_ROUNDINGS = ("half_away", "nearest_even")
HIF8_ROUNDINGS = ("ta", "hybrid")
SOCS = tuple(PROFILES)
GRADS = ("gradInput", "gradWeight", "gradBias")
_GRAD_ALIASES = {"gi": "gradInput", "grad_input": "gradInput", "gw": "gradWeight", "grad_weight": "gradWeight",
                 "gb": "gradBias", "grad_bias": "gradBias"}
DISTRIBUTIONS = ("normal", "uniform", "lognormal")
REFERENCES = ("inputs", "source")
_COMPUTE_BY_NAME = {v: k for k, v in COMPUTE_NAMES.items()}

# Overflow threshold of each output format: (value, inclusive).  A finite exact value at or past it cannot be
# represented: it rounds to Inf / NaN (or saturates).
#   IEEE formats: max + half its ulp; max has an odd significand, so the tie rounds (to even) up -> inclusive.
#   HiFloat8: 40960 = 1.25 * 2^15, ties away from zero -> inclusive (SEMANTICS.md section 4).
#   E4M3FN: 464 = 448 + 16 ties to even 448 (significand 1.110) -> exclusive.
_OVERFLOW = {
    "float32": (float.fromhex("0x1.fffffep127") + 2.0 ** (127 - 24), True),
    "float16": (65504.0 + 16.0, True),
    "bfloat16": (float.fromhex("0x1.fep127") + 2.0 ** (127 - 8), True),
    "hifloat8": (HIF8_OVERFLOW, True),
    "float8_e4m3fn": (464.0, False),
}


def _normalise(argname, value, choices, aliases=None, *, what="value"):
    """One validated choice (str) from ``value`` (case-insensitive), or a ValueError naming the argument."""
    if isinstance(value, str):
        key = value.strip()
        for c in choices:
            if key.lower() == str(c).lower():
                return c
        if aliases and key.lower() in aliases:
            return aliases[key.lower()]
    raise ValueError(f"{argname}: {value!r} is not a valid {what}; expected one of {', '.join(map(str, choices))}")


def _as_list(argname, values):
    if values is None:
        raise ValueError(f"{argname}: got None; expected a non-empty list")
    if isinstance(values, (str, int, float, bool, np.integer, np.floating)):
        values = [values]
    values = list(values)
    if not values:
        raise ValueError(f"{argname}: got an empty list; expected at least one value")
    return values


def _uniq(seq):
    out = []
    for v in seq:
        if v not in out:
            out.append(v)
    return tuple(out)


def _norm_cube(argname, v):
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        if int(v) in _CUBE_BY_VALUE:
            return _CUBE_BY_VALUE[int(v)]
    elif isinstance(v, str):
        s = v.strip()
        if s.isdigit() and int(s) in _CUBE_BY_VALUE:
            return _CUBE_BY_VALUE[int(s)]
        if s.upper() in CUBE_MATH_TYPES:
            return s.upper()
        if s.lower() in _CUBE_ALIASES:
            return _CUBE_BY_VALUE[_CUBE_ALIASES[s.lower()]]
    raise ValueError(f"{argname}: {v!r} is not a cubeMathType; expected one of "
                     f"{', '.join(CUBE_MATH_TYPES)} or 0-3")


def _norm_bits(argname, v):
    if v is None or (isinstance(v, str) and v.strip().lower() in ("profile", "none", "default")):
        return None
    try:
        if isinstance(v, bool):
            raise TypeError
        iv = int(v)
        if iv == float(v) and iv in (10, 11):
            return iv
    except (TypeError, ValueError):
        pass
    raise ValueError(f"{argname}: {v!r} is not an HF32 mantissa width; expected 'profile' (None), 10 or 11")


def _norm_bool(argname, v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("on", "true", "yes", "1", "off", "false", "no", "0"):
        return v.strip().lower() in ("on", "true", "yes", "1")
    raise ValueError(f"{argname}: {v!r} is not a boolean; expected on/off (True/False)")


def _norm_scale(argname, v):
    try:
        s = float(v)
    except (TypeError, ValueError):
        s = float("nan")
    if isinstance(v, bool) or not math.isfinite(s) or s <= 0:
        raise ValueError(f"{argname}: {v!r} is not a scale; expected a finite number > 0")
    return s


def _norm_grads(grads, argname="grads"):
    return _uniq(_normalise(argname, g, GRADS, _GRAD_ALIASES, what="gradient") for g in _as_list(argname, grads))


def _norm_distribution(dist, argname="distribution"):
    """'normal', 'uniform', 'lognormal' or 'lognormal:SIGMA' -> (name, sigma)."""
    if not isinstance(dist, str):
        raise ValueError(f"{argname}: {dist!r} is not a distribution; expected one of {', '.join(DISTRIBUTIONS)} "
                         "(lognormal:SIGMA sets the log-standard-deviation)")
    name, _, param = dist.strip().partition(":")
    name = _normalise(argname, name, DISTRIBUTIONS, what="distribution")
    sigma = 1.0
    if param:
        if name != "lognormal":
            raise ValueError(f"{argname}: {dist!r}: only lognormal takes a parameter (lognormal:SIGMA)")
        try:
            sigma = float(param)
        except ValueError:
            sigma = float("nan")
        if not (math.isfinite(sigma) and sigma > 0):
            raise ValueError(f"{argname}: {dist!r}: SIGMA must be a finite number > 0")
    return name, sigma


# ---- shapes and data ----------------------------------------------------------------------------------------
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
            try:
                iv = int(v)
                ok = not isinstance(v, bool) and iv == float(v)
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"{argname}: {k}={v!r} in {spec!r} is not an integer")
            out[k] = iv
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
    return arrays, shape.pad


def reference_gradients(grad_output, input, weight, pad=0):
    """float64 (gradInput, gradWeight, gradBias) of conv_tbc, straight from SEMANTICS.md section 1."""
    dy = np.asarray(grad_output, dtype=np.float64)
    x = np.asarray(input, dtype=np.float64)
    w = np.asarray(weight, dtype=np.float64)
    T, B, Cin = x.shape
    K, _, Cout = w.shape
    T_out = dy.shape[0]
    gi = np.zeros((T, B, Cin))
    gw = np.zeros((K, Cin, Cout))
    for k in range(K):
        # dy index s = t + pad - k  <->  x index t = s + k - pad; both in range
        s0, s1 = max(0, pad - k), min(T_out, T + pad - k)
        if s1 <= s0:
            continue
        t0, t1 = s0 + k - pad, s1 + k - pad
        d = dy[s0:s1].reshape(-1, Cout)
        xv = x[t0:t1].reshape(-1, Cin)
        gi[t0:t1] += (d @ w[k].T).reshape(t1 - t0, B, Cin)
        gw[k] = xv.T @ d
    gb = dy.reshape(-1, Cout).sum(axis=0)
    return gi, gw, gb


# ---- metrics ------------------------------------------------------------------------------------------------
def _values(computed, fmt):
    a = np.asarray(computed)
    if fmt == "hifloat8" and a.dtype == np.uint8:
        return hif8_decode(a).astype(np.float64)
    return a.astype(np.float64)


def _fmt_name(fmt):
    name = get_format(fmt).name if not isinstance(fmt, str) else fmt.lower()
    name = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16", "hif8": "hifloat8",
            "e4m3fn": "float8_e4m3fn"}.get(name, name)
    if name not in _OVERFLOW:
        raise ValueError(f"fmt: {fmt!r}; expected an output format, one of {', '.join(_OVERFLOW)}")
    return name


def ulp_errors(computed, reference, fmt):
    """Per-element distance from computed to reference in steps of the output format ``fmt`` (float64 array).

    ``computed`` is an array of values (any float dtype) or, for ``fmt='hifloat8'``, of uint8 HiFloat8 codes.
    """
    fmt = _fmt_name(fmt)
    return np.asarray(ulp_distance(fmt, _values(computed, fmt), np.asarray(reference, dtype=np.float64)))


def _stats_none():
    return {"max_abs": None, "max_rel": None, "rel_fro": None, "ulp_median": None, "ulp_p99": None,
            "ulp_max": None}


def error_metrics(computed, reference, fmt, *, return_ulps=False):
    """Error of ``computed`` (values, or HiFloat8 codes) against the float64 ``reference``, in format ``fmt``.

    Returns a dict: n, max_abs, max_rel, rel_fro, ulp_median, ulp_p99, ulp_max (over the elements where both
    are finite; None when there are none), n_overflow, n_underflow, n_nan, n_inf (see the module docstring).
    With ``return_ulps`` returns (dict, per-element ULP errors of the measured elements).
    """
    fmt = _fmt_name(fmt)
    c = _values(computed, fmt).reshape(-1)
    r = np.asarray(reference, dtype=np.float64).reshape(-1)
    if c.shape != r.shape:
        raise ValueError(f"computed has {c.size} elements but reference has {r.size}; expected the same shape")
    f = get_format(fmt)
    thr, inclusive = _OVERFLOW[fmt]
    rfin = np.isfinite(r)
    ar = np.abs(r)
    past = (ar >= thr) if inclusive else (ar > thr)
    out = {"n": int(c.size)}
    out["n_nan"] = int(np.isnan(c).sum())
    out["n_inf"] = int(np.isinf(c).sum())
    out["n_overflow"] = int((rfin & (np.isinf(c) | past | (np.isnan(c) & (ar > f.max)))).sum())
    out["n_underflow"] = int((rfin & (r != 0) & (c == 0)).sum())
    m = np.isfinite(c) & rfin
    stats = _stats_none()
    ulps = np.zeros(0)
    if m.any():
        cm, rm = c[m], r[m]
        d = np.abs(cm - rm)
        stats["max_abs"] = float(d.max())
        nz = rm != 0
        stats["max_rel"] = float((d[nz] / np.abs(rm[nz])).max()) if nz.any() else None
        nr = float(np.linalg.norm(rm))
        nd = float(np.linalg.norm(d))
        stats["rel_fro"] = nd / nr if nr > 0 else (0.0 if nd == 0 else math.inf)
        ulps = np.asarray(ulp_distance(fmt, cm, rm), dtype=np.float64)
        stats["ulp_median"] = float(np.median(ulps))
        stats["ulp_p99"] = float(np.percentile(ulps, 99, method="inverted_cdf"))
        stats["ulp_max"] = float(ulps.max())
    out.update(stats)
    order = ("n", "max_abs", "max_rel", "rel_fro", "ulp_median", "ulp_p99", "ulp_max", "n_overflow",
             "n_underflow", "n_nan", "n_inf")
    out = {k: out[k] for k in order}
    return (out, ulps) if return_ulps else out


# ---- the grid -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Cell:
    """One emulation mode.  Fields that cannot change the result are None (shown as '-')."""

    input_dtype: str
    cube_math_type: str
    soc: str
    grad_weight_dtype: str            # the effective dtype ('same' resolved to the weight's dtype)
    compute: str                      # FP32 / HF32 / FP16 / BF16, or 'n/a' when the profile has no such path
    hf32_rounding: Optional[str] = None
    hf32_mantissa_bits: Optional[int] = None
    hif8_rounding: Optional[str] = None
    saturate: Optional[bool] = None

    def kwargs(self, deterministic=True, num_threads=None):
        """Keywords for ``pyconvtbc.conv_tbc_backward`` (explicit values: process options never leak in)."""
        return dict(cube_math_type=CUBE_MATH_TYPES[self.cube_math_type], grad_weight_dtype=self.grad_weight_dtype,
                    soc=self.soc, deterministic=deterministic, num_threads=num_threads,
                    hf32_rounding=self.hf32_rounding or "half_away", hf32_mantissa_bits=self.hf32_mantissa_bits,
                    hif8_rounding=self.hif8_rounding or "ta", saturate=bool(self.saturate))

    def out_format(self, grad):
        return self.grad_weight_dtype if grad == "gradWeight" else self.input_dtype


@dataclass
class Grid:
    """The axes to sweep (lists of values, or "all"); ``cells()`` enumerates the distinct modes in a stable order."""

    input_dtypes: tuple = ("float32",)
    cube_math_types: tuple = tuple(CUBE_MATH_TYPES)
    socs: tuple = ("ascend910b",)
    grad_weight_dtypes: tuple = ("same",)
    hf32_roundings: tuple = ("half_away",)
    hf32_mantissa_bits: tuple = (None,)
    hif8_roundings: tuple = ("ta",)
    saturate: tuple = (False,)

    def __post_init__(self):
        every = {"input_dtypes": tuple(INPUT_DTYPES), "cube_math_types": tuple(CUBE_MATH_TYPES), "socs": SOCS,
                 "grad_weight_dtypes": GW_DTYPES, "hf32_roundings": HF32_ROUNDINGS,
                 "hf32_mantissa_bits": (None, 10, 11),
                 "hif8_roundings": HIF8_ROUNDINGS, "saturate": (False, True)}
        for name, values in every.items():          # "all" (alone) takes every value of an axis
            v = getattr(self, name)
            if isinstance(v, str) and v.strip().lower() == "all":
                setattr(self, name, values)
        self.input_dtypes = _uniq(_normalise("input_dtypes", v, tuple(INPUT_DTYPES), _INPUT_ALIASES,
                                             what="input dtype") for v in _as_list("input_dtypes",
                                                                                   self.input_dtypes))
        self.cube_math_types = _uniq(_norm_cube("cube_math_types", v)
                                     for v in _as_list("cube_math_types", self.cube_math_types))
        self.socs = _uniq(_normalise("socs", v, SOCS, what="SoC profile") for v in _as_list("socs", self.socs))
        self.grad_weight_dtypes = _uniq(_normalise("grad_weight_dtypes", v, GW_DTYPES, _GW_ALIASES,
                                                   what="gradWeight dtype")
                                        for v in _as_list("grad_weight_dtypes", self.grad_weight_dtypes))
        self.hf32_roundings = _uniq(_normalise("hf32_roundings", v, HF32_ROUNDINGS, what="HF32 rounding")
                                    for v in _as_list("hf32_roundings", self.hf32_roundings))
        bits = self.hf32_mantissa_bits
        self.hf32_mantissa_bits = _uniq(_norm_bits("hf32_mantissa_bits", v)
                                        for v in ([None] if bits is None else _as_list("hf32_mantissa_bits", bits)))
        self.hif8_roundings = _uniq(_normalise("hif8_roundings", v, HIF8_ROUNDINGS, what="HiFloat8 rounding")
                                    for v in _as_list("hif8_roundings", self.hif8_roundings))
        self.saturate = _uniq(_norm_bool("saturate", v) for v in _as_list("saturate", self.saturate))

    def cells(self):
        out = []
        for dt, soc, cube, gw, hr, hb, h8, sat in itertools.product(
                self.input_dtypes, self.socs, self.cube_math_types, self.grad_weight_dtypes, self.hf32_roundings,
                self.hf32_mantissa_bits, self.hif8_roundings, self.saturate):
            profile = PROFILES[soc]
            c = compute_precision(profile, _ACL_CODE[dt], CUBE_MATH_TYPES[cube])
            hf32 = c == COMPUTE_HF32
            gw_eff = dt if gw == "same" else gw
            out.append(Cell(dt, cube, soc, gw_eff, COMPUTE_NAMES[c] if c is not None else "n/a",
                            hr if hf32 else None, (hb or profile.hf32_mantissa_bits) if hf32 else None,
                            h8 if gw_eff == "hifloat8" else None, sat if gw_eff in _EIGHT_BIT else None))
        return list(_uniq(out))


def _as_grid(grid):
    if grid is None:
        return Grid()
    if isinstance(grid, Grid):
        return grid
    if isinstance(grid, dict):
        unknown = set(grid) - set(Grid.__dataclass_fields__)
        if unknown:
            raise ValueError(f"grid: unknown axes {sorted(unknown)}; expected some of "
                             f"{sorted(Grid.__dataclass_fields__)}")
        return Grid(**grid)
    raise ValueError(f"grid: {grid!r}; expected a Grid, a dict of axes or None")


# ---- problems -----------------------------------------------------------------------------------------------
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
    scales = _uniq(_norm_scale("scales", s) for s in _as_list("scales", scales))
    if npz is not None:
        if shapes is not None:
            raise ValueError("shapes and npz were both given; expected one source of data (shapes for seeded "
                             "random data, npz for arrays from a file)")
        arrays, p = load_npz(npz, pad)
        s = Shape.parse((arrays["input"].shape[0], arrays["input"].shape[1], arrays["input"].shape[2],
                         arrays["weight"].shape[2], arrays["weight"].shape[0], p))
        return [_Problem(s, f"npz:{os.path.basename(str(npz))}", sc, None, {k: v * sc for k, v in arrays.items()})
                for sc in scales]
    if shapes is None:
        shapes = [DEFAULT_SHAPE]
    elif isinstance(shapes, (Shape, str, dict)) or (
            isinstance(shapes, (tuple, list)) and shapes and all(isinstance(v, (int, np.integer)) for v in shapes)):
        shapes = [Shape.parse(shapes, "shapes")]                  # one shape
    else:
        shapes = [Shape.parse(s, "shapes") for s in _as_list("shapes", shapes)]
    _norm_distribution(distribution)
    out = []
    for s in _uniq(shapes):
        base = make_data(s, distribution, 1.0, seed)
        for sc in scales:
            out.append(_Problem(s, distribution, sc, seed, {k: v * sc for k, v in base.items()}))
    return out


_SAMPLE_MAX = 20000


def _measure(problem, cell, grads, reference, deterministic, num_threads, rng):
    """Rows (one per gradient) for one cell on one problem, plus ULP samples for the histograms."""
    base = {**problem.context(), **asdict(cell)}
    x = problem.inputs(cell.input_dtype)
    rows, samples = [], []
    try:
        outs = conv_tbc_backward(x["grad_output"], x["input"], x["weight"], x["bias"], problem.shape.pad,
                                 **cell.kwargs(deterministic, num_threads))
        status, message = 0, ""
    except AclnnError as e:
        outs, status, message = None, e.status, str(e.message)
    ref = problem.reference(cell.input_dtype, reference)
    for g in grads:
        row = dict(base)
        row.update(grad=g, out_format=cell.out_format(g), reduction_length=problem.shape.reduction_length(g),
                   status=status, message=message)
        if outs is None:
            row.update({"n": None, **_stats_none(), "n_overflow": None, "n_underflow": None, "n_nan": None,
                        "n_inf": None})
            samples.append(None)
        else:
            m, ulps = error_metrics(outs[GRADS.index(g)], ref[g], row["out_format"], return_ulps=True)
            row.update(m)
            if ulps.size > _SAMPLE_MAX:
                ulps = rng.choice(ulps, _SAMPLE_MAX, replace=False)
            samples.append(ulps)
        rows.append(row)
    return rows, samples


# ---- progress bar -------------------------------------------------------------------------------------------
class _Progress:
    """A one-line progress bar on stderr, drawn only once the work has run for ``delay`` seconds."""

    def __init__(self, total, label, enabled="auto", delay=2.0, stream=None):
        self.stream = sys.stderr if stream is None else stream
        if enabled == "auto":
            enabled = bool(getattr(self.stream, "isatty", lambda: False)())
        self.enabled, self.total, self.label, self.delay = bool(enabled), max(int(total), 1), label, delay
        self.done, self.t0, self.last, self.drawn = 0, time.monotonic(), 0.0, False

    def update(self, n=1):
        self.done += n
        if not self.enabled:
            return
        now = time.monotonic()
        if now - self.t0 < self.delay or (now - self.last < 0.1 and self.done < self.total):
            return
        self.last = now
        el = now - self.t0
        frac = self.done / self.total
        left = el / frac - el if frac > 0 else 0.0
        bar = "#" * int(30 * frac) + "." * (30 - int(30 * frac))
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}  {el:5.1f}s elapsed, "
                          f"~{left:4.0f}s left ")
        self.stream.flush()
        self.drawn = True

    def close(self):
        if self.drawn:
            self.stream.write("\n")
            self.stream.flush()


# ---- results ------------------------------------------------------------------------------------------------
_MODE_FIELDS = ("input_dtype", "cube_math_type", "soc", "grad_weight_dtype", "compute", "hf32_rounding",
                "hf32_mantissa_bits", "hif8_rounding", "saturate")
_PROBLEM_FIELDS = ("shape", "distribution", "scale", "seed")
_METRICS = ("max_abs", "max_rel", "rel_fro", "ulp_median", "ulp_p99", "ulp_max", "n_overflow", "n_underflow",
            "n_nan", "n_inf")
_SPREAD = ("permutations", "order", "spread_median", "spread_p99", "spread_max", "frac_varying")
_HEAD = {"shape": "shape", "distribution": "data", "scale": "scale", "seed": "seed", "input_dtype": "in",
         "cube_math_type": "cubeMathType", "soc": "soc", "grad_weight_dtype": "gw dtype", "compute": "C",
         "hf32_rounding": "hf32 rnd", "hf32_mantissa_bits": "hf32 bits", "hif8_rounding": "hif8 rnd",
         "saturate": "sat", "grad": "grad", "out_format": "out fmt", "reduction_length": "n_red",
         "max_abs": "max abs", "max_rel": "max rel", "rel_fro": "rel Frob", "ulp_median": "ULP med",
         "ulp_p99": "ULP p99", "ulp_max": "ULP max", "n_overflow": "ovf", "n_underflow": "unf", "n_nan": "NaN",
         "n_inf": "Inf", "permutations": "perms", "order": "order", "spread_median": "spread med",
         "spread_p99": "spread p99", "spread_max": "spread max", "frac_varying": "varying"}
_DEFINITIONS = """\
- error of each gradient against a float64 reference; `max abs` = max |c - r|, `max rel` = max |c - r| / |r|
  (r != 0), `rel Frob` = ||c - r||_F / ||r||_F, over the elements where c and r are finite;
- `ULP med/p99/max`: distance from c to r in steps of the output format (`out fmt`; HiFloat8: tapered, in code
  order; fractional inside a gap); p99 is nearest-rank;
- `ovf` overflow (r finite, c infinite or r past the format's overflow threshold), `unf` underflow to zero
  (r != 0, c == 0), `NaN` / `Inf`: counts of such c;
- `n/a (161002)`: the operator rejects this mode (for example FLOAT KEEP_DTYPE / USE_HF32 on ascend910, BF16
  on ascend910);
- `-`: a setting that cannot change this row (HF32 settings unless C is HF32, HiFloat8 rounding unless gradWeight
  is HIFLOAT8, saturation unless gradWeight is 8-bit)."""


def _fmt_value(key, v):
    if v is None:
        return "-"
    if isinstance(v, (bool, np.bool_)):
        return "on" if v else "off"
    if key == "frac_varying":
        return f"{100 * v:.1f}%"
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if key.startswith("ulp") or key.startswith("spread"):
            return f"{v:.0f}" if v == round(v) and abs(v) < 1e7 else f"{v:.3g}"
        if key == "scale":
            return f"{v:g}"
        return f"{v:.3g}"
    return str(v)


def _render(headers, cells, markdown=False):
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(c) + " |" for c in cells]
        return "\n".join(lines)
    widths = [max(len(h), *(len(c[i]) for c in cells)) if cells else len(h) for i, h in enumerate(headers)]
    num = [all(_looks_numeric(c[i]) for c in cells) for i in range(len(headers))]
    def line(vals):
        return "  ".join(v.rjust(w) if n else v.ljust(w) for v, w, n in zip(vals, widths, num)).rstrip()
    return "\n".join([line(headers), line(["-" * w for w in widths])] + [line(c) for c in cells])


def _looks_numeric(s):
    try:
        float(s.rstrip("%"))
        return True
    except ValueError:
        return s in ("-", "") or s.startswith("n/a (")


def _json_safe(v):
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, (np.integer,)):
        return int(v)
    if isinstance(v, (np.floating,)):
        return _json_safe(float(v))
    return v


@dataclass
class StudyResult:
    """Rows (one dict per cell x gradient) of a study, with writers for every output."""

    kind: str                    # "modes" | "spread" | "growth"
    rows: list
    meta: dict
    samples: list = field(default_factory=list, repr=False)   # per row: ULP errors (subsampled) or None

    # -- selection helpers
    def valid_rows(self):
        return [r for r in self.rows if r["status"] == 0]

    def _context_columns(self):
        """(columns that vary, {column: value} that are constant) among the problem and mode fields."""
        varying, constant = [], {}
        for k in _PROBLEM_FIELDS + _MODE_FIELDS + ("out_format",):
            vals = _uniq(r.get(k) for r in self.rows)
            if len(vals) > 1:
                varying.append(k)
            elif vals and vals[0] is not None and k != "out_format":
                constant[k] = vals[0]
        if self.kind == "growth":
            varying = [k for k in varying if k != "shape"]
        return varying, constant

    def _mode_label(self, row, varying=None):
        varying = self._context_columns()[0] if varying is None else varying
        keys = [k for k in _PROBLEM_FIELDS + _MODE_FIELDS if k in varying]
        parts = []
        for k in keys:
            v = row.get(k)
            if v is None:
                continue
            if k == "saturate":
                parts.append("sat" if v else "nosat")
            elif k == "hf32_mantissa_bits":
                parts.append(f"{v}b")
            elif k == "scale":
                parts.append(f"x{v:g}")
            elif k == "grad_weight_dtype":
                parts.append(f"gw={v}")
            else:
                parts.append(str(v))
        return " ".join(parts) if parts else "default"

    # -- text outputs
    def header_lines(self):
        _, constant = self._context_columns()
        lines = []
        if self.kind == "growth":
            m = self.meta
            lines.append(f"sweep: {m.get('axis')} in {m.get('values')} (base {m.get('base_shape')})")
        for k, v in constant.items():
            if k == "shape" and self.kind == "growth":
                continue
            lines.append(f"{_HEAD.get(k, k)}: {_fmt_value(k, v)}")
        return lines

    def _table_cells(self, markdown=False):
        varying, _ = self._context_columns()
        if self.kind == "growth":
            return self._growth_pivot(self.meta.get("metric", "rel_fro"))
        cols = varying + ["grad"]
        if "out_format" not in cols:
            cols.append("out_format")
        metrics = list(_METRICS) if self.kind == "modes" else ["ulp_median", "ulp_p99", "ulp_max"] + list(_SPREAD[2:])
        headers = [_HEAD[c] for c in cols + metrics]
        cells = []
        for r in self.rows:
            ctx = [_fmt_value(c, r.get(c)) for c in cols]
            if r["status"]:
                cells.append(ctx + [f"n/a ({r['status']})"] + [""] * (len(metrics) - 1))
            else:
                cells.append(ctx + [_fmt_value(m, r.get(m)) for m in metrics])
        return headers, cells

    def _growth_pivot(self, metric):
        axis = self.meta.get("axis", "T")
        values = list(self.meta.get("values", []))
        varying, _ = self._context_columns()
        mode_cols = [k for k in _MODE_FIELDS if k in varying]
        groups = {}
        for r in self.rows:
            key = (tuple(r.get(k) for k in _MODE_FIELDS), r["grad"])
            groups.setdefault(key, {})[r[axis]] = r
        headers = [_HEAD[k] for k in mode_cols] + ["grad", "out fmt", "n_red"] + \
            [f"{axis}={v}" for v in values] + ["slope"]
        slopes = {(tuple(s["cell"][k] for k in _MODE_FIELDS), s["grad"]): s["slope"]
                  for s in self.meta.get("slopes", [])}
        cells = []
        for (mode, grad), byv in groups.items():
            rows = [byv.get(v) for v in values]
            present = [r for r in rows if r is not None]
            nred = _uniq(r["reduction_length"] for r in present)
            nred_s = str(nred[0]) if len(nred) == 1 else f"{nred[0]}..{nred[-1]}"
            vals = []
            for r in rows:
                if r is None:
                    vals.append("")
                elif r["status"]:
                    vals.append(f"n/a ({r['status']})")
                else:
                    vals.append(_fmt_value(metric, r.get(metric)))
            sl = slopes.get((mode, grad))
            cells.append([_fmt_value(k, present[0].get(k)) for k in mode_cols] +
                         [grad, present[0]["out_format"], nred_s] + vals + ["-" if sl is None else f"{sl:.2f}"])
        return headers, cells

    def table(self):
        """The result as a plain-text table (constant settings on the lines above it)."""
        headers, cells = self._table_cells()
        title = {"modes": "per-mode error vs float64 reference",
                 "spread": f"reduction-order spread ({self.meta.get('permutations')} orders) next to the mode's "
                           "error, in ULPs of the output format",
                 "growth": f"{self.meta.get('metric', 'rel_fro')} vs {self.meta.get('axis', 'T')} "
                           "(slope: d log(error) / d log(reduction length))"}[self.kind]
        return "\n".join([f"# {title}", "# " + " | ".join(self.header_lines()), _render(headers, cells)])

    def to_csv(self, path):
        keys = list(self.rows[0]) if self.rows else []
        with open(path, "w", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=keys)
            w.writeheader()
            for r in self.rows:
                w.writerow({k: ("" if v is None else v) for k, v in r.items()})
        return path

    def to_json(self, path):
        doc = {"kind": self.kind, "meta": {k: _json_safe(v) for k, v in self.meta.items()},
               "rows": [{k: _json_safe(v) for k, v in r.items()} for r in self.rows]}
        with open(path, "w") as fh:
            json.dump(doc, fh, indent=1, default=str)
        return path

    def to_markdown(self, path, plots=()):
        headers, cells = self._table_cells()
        title = {"modes": "Per-mode error of the emulated NPU gradients",
                 "spread": "Reduction-order spread next to each mode's error",
                 "growth": "Error growth with the reduction length"}[self.kind]
        m = self.meta
        lines = [f"# pyconvtbc precision study: {title}", "",
                 f"pyconvtbc {m.get('version')}, {m.get('date')}.", ""]
        if m.get("command"):
            lines += ["```", m["command"], "```", ""]
        lines += ["## Setup", ""] + [f"- {l}" for l in self.header_lines()]
        lines += [f"- reference: {m.get('reference_text', '')}", f"- deterministic: {m.get('deterministic')}", ""]
        lines += ["## Results", "", _render(headers, cells, markdown=True), ""]
        if plots:
            lines += ["## Plots", ""]
            base = os.path.dirname(os.path.abspath(path))
            for p in plots:
                rel = os.path.relpath(os.path.abspath(p), base)
                lines += [f"![{os.path.splitext(os.path.basename(p))[0]}]({rel})", ""]
        lines += ["## Definitions", "", _DEFINITIONS, ""]
        if self.kind == "spread":
            lines += ["- `spread`: for each output element, the distance (in output-format steps) between the "
                      "largest and smallest of the results obtained with the different fp32 accumulation orders; "
                      "`varying`: the fraction of elements whose result depends on the order.", ""]
        with open(path, "w") as fh:
            fh.write("\n".join(lines))
        return path

    # -- plots
    def plot(self, outdir, prefix=None):
        """PNG plots into ``outdir``; returns their paths, or [] when matplotlib is not installed."""
        try:
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError:
            return []
        prefix = prefix or self.kind
        os.makedirs(outdir, exist_ok=True)
        paths = []

        def save(fig, name):
            FigureCanvasAgg(fig)
            p = os.path.join(outdir, f"{prefix}_{name}.png")
            fig.savefig(p, dpi=110, bbox_inches="tight")
            paths.append(p)

        varying, _ = self._context_columns()
        grads = list(_uniq(r["grad"] for r in self.rows))
        if self.kind in ("modes", "spread"):
            valid = self.valid_rows()
            if not valid:
                return paths
            ctx = [k for k in _PROBLEM_FIELDS + _MODE_FIELDS]
            keys = list(_uniq(tuple(r.get(k) for k in ctx) for r in valid))
            pos = {k: i for i, k in enumerate(keys)}
            labels = {}
            for r in valid:
                labels.setdefault(tuple(r.get(k) for k in ctx), self._mode_label(r, varying))
            fig = Figure(figsize=(2.5 + 3.0 * len(grads), 0.3 * max(4, len(keys)) + 1.2))
            first = None
            for gi, g in enumerate(grads):
                ax = fig.add_subplot(1, len(grads), gi + 1, sharey=first)
                first = first or ax
                rs = [r for r in valid if r["grad"] == g]
                y = np.array([pos[tuple(r.get(k) for k in ctx)] for r in rs], dtype=float)
                if self.kind == "modes":
                    ax.barh(y, [max(r["rel_fro"] or 0.0, 1e-17) for r in rs], color="tab:blue")
                    ax.set_xlabel("relative Frobenius error")
                else:
                    ax.barh(y - 0.2, [max(r["ulp_p99"] or 0, 1e-3) for r in rs], 0.4, label="error p99")
                    ax.barh(y + 0.2, [max(r["spread_p99"] or 0, 1e-3) for r in rs], 0.4, label="spread p99")
                    ax.set_xlabel("output-format ULPs (0 at 1e-3)")
                    if gi == 0:
                        fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, fontsize=8,
                                   bbox_to_anchor=(0.5, 1.0))
                ax.set_xscale("log")
                ax.set_title(f"{g} ({rs[0]['out_format']})" if len({r['out_format'] for r in rs}) == 1 else g,
                             fontsize=10)
                ax.grid(axis="x", alpha=0.3)
                if gi:
                    ax.tick_params(labelleft=False)
            first.set_yticks(range(len(keys)))
            first.set_yticklabels([labels[k] for k in keys], fontsize=7)
            first.set_ylim(len(keys) - 0.5, -0.5)
            fig.tight_layout()
            save(fig, "error_by_mode" if self.kind == "modes" else "spread_vs_error")
            if self.kind == "modes":
                for g in grads:
                    idx = [i for i, r in enumerate(self.rows)
                           if r["grad"] == g and r["status"] == 0 and self.samples and self.samples[i] is not None
                           and self.samples[i].size]
                    if not idx:
                        continue
                    groups = []                      # identical results share one curve
                    for i in idx:
                        for grp in groups:
                            if np.array_equal(self.samples[grp[0]], self.samples[i]):
                                grp.append(i)
                                break
                        else:
                            groups.append([i])
                    fig = Figure(figsize=(7.5, 3.8))
                    ax = fig.add_subplot(1, 1, 1)
                    allv = np.concatenate([self.samples[i] for i in idx])
                    hi = max(float(allv.max()), 1.0)
                    bins = np.concatenate(([0.0], np.geomspace(1e-3, hi * 1.01, 60)))
                    for gno, grp in enumerate(groups):
                        s_ = np.maximum(self.samples[grp[0]], 1e-3 * 1.0000001)
                        lab = self._mode_label(self.rows[grp[0]], varying)
                        if len(grp) > 1:
                            lab += f" (= {len(grp) - 1} more)"
                        ax.hist(s_, bins=bins, histtype="step", lw=1.3, label=lab,
                                linestyle=("-", "--", ":", "-.")[gno % 4])
                    ax.set_xscale("log")
                    ax.set_xlabel("ULP error in the output format (exact results drawn at 1e-3)")
                    ax.set_ylabel("elements" + (" (sampled)" if any(
                        self.rows[i]["n"] > self.samples[i].size for i in idx) else ""))
                    ax.set_title(f"{g}: ULP error histogram", fontsize=10)
                    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
                    save(fig, f"ulp_hist_{g}")
        else:
            axis = self.meta.get("axis", "T")
            metric = self.meta.get("metric", "rel_fro")
            mode_cols = [k for k in varying if k not in ("T", "B", "Cin", "Cout", "K", "pad")]
            fig = Figure(figsize=(4.5 * len(grads), 4))
            for gi_, g in enumerate(grads):
                ax = fig.add_subplot(1, len(grads), gi_ + 1)
                groups = {}
                for r in self.valid_rows():
                    if r["grad"] == g and r.get(metric) is not None:
                        groups.setdefault(tuple(r.get(k) for k in mode_cols), []).append(r)
                for key, rs in groups.items():
                    rs = sorted(rs, key=lambda r: r["reduction_length"])
                    ax.plot([r["reduction_length"] for r in rs], [max(r[metric], 1e-17) for r in rs], "o-",
                            label=self._mode_label(rs[0], mode_cols))
                if len({r["reduction_length"] for r in self.rows if r["grad"] == g}) == 1:
                    ax.text(0.5, 0.5, f"the reduction length of {g}\ndoes not change with {axis}", ha="center",
                            va="center", transform=ax.transAxes, fontsize=8, color="0.4")
                ax.set_xscale("log")
                ax.set_yscale("log")
                ax.set_xlabel(f"reduction length (sweeping {axis})")
                ax.set_ylabel(_HEAD.get(metric, metric))
                ax.set_title(g)
                ax.legend(fontsize=7)
            fig.tight_layout()
            save(fig, "growth")
        return paths

    def save(self, outdir, prefix=None, plots=True):
        """Write <prefix>.csv, .json, .md (and PNG plots when asked and possible); returns {kind: path(s)}."""
        prefix = prefix or ("study" if self.kind == "modes" else self.kind)
        os.makedirs(outdir, exist_ok=True)
        made = {"csv": self.to_csv(os.path.join(outdir, f"{prefix}.csv")),
                "json": self.to_json(os.path.join(outdir, f"{prefix}.json"))}
        pngs = self.plot(os.path.join(outdir, "plots"), prefix) if plots else []
        made["plots"] = pngs
        made["md"] = self.to_markdown(os.path.join(outdir, f"{prefix}.md"), pngs)
        return made


def _meta(kind, grid, problems, grads, reference, deterministic, **extra):
    from . import __version__
    ref_text = ("float64, from the operator's inputs (the values in the input dtype, not rounded to the compute "
                "precision)" if reference == "inputs" else
                "float64, from the source data before the cast to the input dtype")
    return {"kind": kind, "version": __version__, "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M"),
            "grid": {k: list(v) for k, v in asdict(grid).items()},
            "problems": [p.context() for p in problems], "grads": list(grads), "reference": reference,
            "reference_text": ref_text, "deterministic": deterministic, **extra}


def _check_common(grads, reference, deterministic):
    grads = _norm_grads(grads)
    reference = _normalise("reference", reference, REFERENCES, what="reference")
    if deterministic is not None:
        deterministic = _norm_bool("deterministic", deterministic)
    return grads, reference, deterministic


# ---- study 1: per-mode table --------------------------------------------------------------------------------
def run_study(shapes=None, grid=None, *, npz=None, pad=None, distribution="normal", scales=(1.0,), seed=0,
              grads=GRADS, reference="inputs", deterministic=True, num_threads=None, progress=False):
    """Per-mode error table: every cell of ``grid`` on every problem (shape x scale, or the npz arrays).

    shapes: Shape / 'T,B,Cin,Cout,K[,pad]' / tuples, one or a list (default 64,8,64,64,3,1); npz: a file of
    arrays instead (``load_npz``); grid: a ``Grid`` or a dict of its axes; deterministic: passed to the
    operator (None: the profile's default); progress: True / False / 'auto' (stderr is a terminal).
    Returns a ``StudyResult`` (``.table()``, ``.save(dir)``, ``.rows``).
    """
    grid = _as_grid(grid)
    grads, reference, deterministic = _check_common(grads, reference, deterministic)
    problems = _problems(shapes, npz, distribution, scales, seed, pad)
    cells = grid.cells()
    rows, samples = [], []
    rng = np.random.default_rng(0)
    bar = _Progress(len(problems) * len(cells), "study", progress)
    for p in problems:
        for c in cells:
            r, s = _measure(p, c, grads, reference, deterministic, num_threads, rng)
            rows += r
            samples += s
            bar.update()
    bar.close()
    return StudyResult("modes", rows, _meta("modes", grid, problems, grads, reference, deterministic), samples)


# ---- study 2: reduction-order spread ------------------------------------------------------------------------
def _round_to_compute(a32, compute, bits, rounding):
    """fp32 operands rounded to the compute precision (the values the cube multiplies)."""
    if compute == "FP32":
        return a32
    if compute == "HF32":
        return round_to_hf32(a32, mantissa_bits=bits, rounding=rounding)
    with np.errstate(over="ignore"):
        if compute == "FP16":
            return a32.astype(np.float16).astype(np.float32)
        return a32.astype(ml_dtypes.bfloat16).astype(np.float32)


def _cast_out(acc, fmt, hif8_rounding, saturate):
    """fp32 accumulators -> values (float64) of the output format."""
    with np.errstate(over="ignore", invalid="ignore"):
        if fmt == "float32":
            return acc.astype(np.float64)
        if fmt == "float16":
            return acc.astype(np.float16).astype(np.float64)
        if fmt == "bfloat16":
            return acc.astype(ml_dtypes.bfloat16).astype(np.float64)
        if fmt == "hifloat8":
            return hif8_decode(hif8_encode(acc, rounding=hif8_rounding, saturate=saturate)).astype(np.float64)
        return e4m3fn_encode(acc, saturate=saturate).astype(np.float64)


_CHUNK = 1 << 22   # products held at once (16 MiB of fp32)


def _term_chunks(grad, dy, x, w, pad):
    """Yield (output slice, products) with products of shape (n_terms, n_outputs_in_chunk), float32.

    Term j of every output element is the j-th product of its sum (zero where the formula's index is out of
    range); the products are float32 multiplies of float32 operands (exact for HF32/FP16/BF16 operands,
    correctly rounded for FP32 operands).
    """
    T_out, B, Cout = dy.shape
    T, _, Cin = x.shape
    K = w.shape[0]
    if grad == "gradBias":
        yield slice(0, Cout), dy.reshape(T_out * B, Cout)
    elif grad == "gradWeight":
        # gw[k, ci, co] = sum_(t,b) x[t+k-pad, b, ci] * dy[t, b, co]; chunk over ci
        step = max(1, _CHUNK // max(1, K * Cout * T_out * B))
        for c0 in range(0, Cin, step):
            c1 = min(Cin, c0 + step)
            P = np.zeros((T_out * B, K, c1 - c0, Cout), np.float32)
            for k in range(K):
                s0, s1 = max(0, pad - k), min(T_out, T + pad - k)
                if s1 > s0:
                    xs = x[s0 + k - pad:s1 + k - pad, :, c0:c1]
                    P[s0 * B:s1 * B, k] = (xs[:, :, :, None] * dy[s0:s1, :, None, :]).reshape((s1 - s0) * B,
                                                                                            c1 - c0, Cout)
            yield (slice(c0, c1)), P.reshape(T_out * B, -1)
    else:
        # gi[t, b, ci] = sum_(k,co) dy[t+pad-k, b, co] * w[k, ci, co]; chunk over t
        step = max(1, _CHUNK // max(1, K * Cout * B * Cin))
        for t0 in range(0, T, step):
            t1 = min(T, t0 + step)
            P = np.zeros((K, Cout, t1 - t0, B, Cin), np.float32)
            for k in range(K):
                lo, hi = max(t0, k - pad), min(t1, T_out + k - pad)     # t with 0 <= t+pad-k < T_out
                if hi > lo:
                    d = dy[lo + pad - k:hi + pad - k]                     # (hi-lo, B, Cout)
                    P[k, :, lo - t0:hi - t0] = np.moveaxis(d[:, :, None, :] * w[k][None, None, :, :], 3, 0)
            yield slice(t0, t1), P.reshape(K * Cout, -1)


def permuted_gradients(grad_output, input, weight, pad=0, *, grad="gradWeight", compute="FP32", permutations=1,
                       seed=0, deterministic=False, out_format=None, hf32_mantissa_bits=11,
                       hf32_rounding="half_away", hif8_rounding="ta", saturate=False):
    """One gradient computed ``permutations`` times, each with its own fp32 accumulation order.

    NumPy model of the cube on already-rounded operands: the operands are rounded to ``compute`` (FP32, HF32,
    FP16, BF16; gradBias uses the original grad_output), every product is a float32 multiply, and the terms
    of each output element are added one by one into a float32 accumulator in the order of a seeded random
    permutation of the terms (one permutation per run, shared by all output elements).  With
    ``deterministic=True`` every run uses the natural order (the formula's), so all runs agree.  The
    accumulator then goes through the output path (gradInput: rounded to C when C is FP16/BF16) and the cast to
    ``out_format`` (default: the input dtype, or float32).

    Returns float64 values of the output format, shape (permutations, *gradient shape).
    """
    grad = _normalise("grad", grad, GRADS, _GRAD_ALIASES, what="gradient")
    compute = _normalise("compute", compute, tuple(_COMPUTE_BY_NAME), what="compute precision")
    if isinstance(permutations, bool) or not isinstance(permutations, (int, np.integer)) or permutations < 1:
        raise ValueError(f"permutations: {permutations!r}; expected an integer >= 1")
    in_dt = np.asarray(input).dtype
    default_fmt = {np.dtype(np.float16): "float16", np.dtype(ml_dtypes.bfloat16): "bfloat16"}.get(in_dt, "float32")
    fmt = _fmt_name(out_format) if out_format is not None else default_fmt
    dy = np.asarray(grad_output).astype(np.float32)
    x = np.asarray(input).astype(np.float32)
    w = np.asarray(weight).astype(np.float32)
    if grad != "gradBias":
        dy = _round_to_compute(dy, compute, hf32_mantissa_bits, hf32_rounding)
        x = _round_to_compute(x, compute, hf32_mantissa_bits, hf32_rounding)
        w = _round_to_compute(w, compute, hf32_mantissa_bits, hf32_rounding)
    shape = {"gradInput": x.shape, "gradWeight": w.shape, "gradBias": (w.shape[2],)}[grad]
    n_terms = Shape(x.shape[0], x.shape[1], x.shape[2], w.shape[2], w.shape[0], pad).reduction_length(grad)
    rng = np.random.default_rng(seed)
    orders = [np.arange(n_terms) if deterministic else rng.permutation(n_terms) for _ in range(permutations)]
    out = np.empty((permutations,) + tuple(shape), np.float64)
    for sl, P in _term_chunks(grad, dy, x, w, pad):
        for i, order in enumerate(orders):
            acc = np.zeros(P.shape[1], np.float32)
            with np.errstate(over="ignore", invalid="ignore"):
                for j in order:
                    acc += P[j]
            if grad == "gradInput" and compute in ("FP16", "BF16"):
                acc = _round_to_compute(acc, compute, 0, "")
            vals = _cast_out(acc, fmt, hif8_rounding, saturate)
            if grad == "gradWeight":    # chunk over ci: P columns are (k, ci_chunk, co)
                out[i][:, sl, :] = vals.reshape(shape[0], sl.stop - sl.start, shape[2])
            elif grad == "gradInput":
                out[i, sl] = vals.reshape(sl.stop - sl.start, shape[1], shape[2])
            else:
                out[i] = vals
    return out


def _spread_stats(runs, fmt):
    with np.errstate(invalid="ignore"):
        hi, lo = runs.max(axis=0).reshape(-1), runs.min(axis=0).reshape(-1)
        d = np.asarray(ulp_distance(fmt, hi, lo), dtype=np.float64)
    d = d[np.isfinite(d)]
    if not d.size:
        return {"spread_median": None, "spread_p99": None, "spread_max": None, "frac_varying": None}
    return {"spread_median": float(np.median(d)), "spread_p99": float(np.percentile(d, 99, method="inverted_cdf")),
            "spread_max": float(d.max()), "frac_varying": float((d > 0).mean())}


def reduction_order_spread(shapes=None, grid=None, *, permutations=20, deterministic=False, npz=None, pad=None,
                           distribution="normal", scales=(1.0,), seed=0, grads=("gradInput", "gradWeight"),
                           reference="inputs", num_threads=None, progress=False):
    """For each cell: the mode's error (from the operator) and the spread of ``permutations`` fp32
    accumulation orders (``permuted_gradients``), both in ULPs of the output format.

    ``deterministic=True`` models deterministic hardware: every run uses the same order, the spread is 0.
    """
    grid = _as_grid(grid)
    grads, reference, _ = _check_common(grads, reference, True)
    if isinstance(permutations, bool) or not isinstance(permutations, (int, np.integer)) or permutations < 1:
        raise ValueError(f"permutations: {permutations!r}; expected an integer >= 1")
    deterministic = _norm_bool("deterministic", deterministic)
    problems = _problems(shapes, npz, distribution, scales, seed, pad)
    cells = grid.cells()
    rows, samples = [], []
    rng = np.random.default_rng(0)
    bar = _Progress(len(problems) * len(cells), "spread", progress)
    for p in problems:
        for c in cells:
            r, s = _measure(p, c, grads, reference, True, num_threads, rng)
            for row in r:
                row.update(permutations=int(permutations), order="fixed" if deterministic else "random")
                if row["status"]:
                    row.update({k: None for k in _SPREAD[2:]})
                    continue
                x = p.inputs(c.input_dtype)
                runs = permuted_gradients(
                    x["grad_output"], x["input"], x["weight"], p.shape.pad, grad=row["grad"], compute=c.compute,
                    permutations=permutations, seed=seed, deterministic=deterministic,
                    out_format=row["out_format"], hf32_mantissa_bits=c.hf32_mantissa_bits or 11,
                    hf32_rounding=c.hf32_rounding or "half_away", hif8_rounding=c.hif8_rounding or "ta",
                    saturate=bool(c.saturate))
                row.update(_spread_stats(runs, row["out_format"]))
            rows += r
            samples += s
            bar.update()
    bar.close()
    meta = _meta("spread", grid, problems, grads, reference, True, permutations=int(permutations),
                 order="fixed" if deterministic else "random")
    return StudyResult("spread", rows, meta, samples)


# ---- study 3: error growth ----------------------------------------------------------------------------------
GROWTH_AXES = ("T", "B", "Cin", "Cout", "K")
_GROWTH_METRICS = ("rel_fro", "max_rel", "max_abs", "ulp_median", "ulp_p99", "ulp_max")


def error_growth(base_shape=None, values=(16, 64, 256, 1024), axis="T", grid=None, *, distribution="normal",
                 scale=1.0, seed=0, grads=GRADS, reference="inputs", metric="rel_fro", deterministic=True,
                 num_threads=None, progress=False):
    """Each mode's error as one size grows: ``axis`` of ``base_shape`` takes each of ``values``.

    Sweeping T grows gradWeight's and gradBias's reduction length B*T_out; sweeping Cout (or K) grows
    gradInput's K*Cout.  ``meta['slopes']`` holds, per mode and gradient, the least-squares slope of
    log(metric) against log(reduction length) (0.5: random-walk growth, 1: linear; 0: no growth).
    """
    base = Shape.parse(base_shape if base_shape is not None else Shape(16, 8, 32, 32, 3, 1), "base_shape")
    axis = _normalise("axis", axis, GROWTH_AXES, what="size to sweep")
    metric = _normalise("metric", metric, _GROWTH_METRICS, what="metric")
    vals = []
    for v in _as_list("values", values):
        try:
            iv = int(v)
            ok = not isinstance(v, bool) and iv == float(v) and iv >= 1
        except (TypeError, ValueError):
            ok = False
        if not ok:
            raise ValueError(f"values: {v!r}; expected integers >= 1 for {axis}")
        vals.append(iv)
    vals = sorted(set(vals))
    shapes = [Shape.parse({**asdict(base), axis: v}, f"values ({axis}={v})") for v in vals]
    grid = _as_grid(grid)
    grads, reference, deterministic = _check_common(grads, reference, deterministic)
    cells = grid.cells()
    rows, samples = [], []
    problems = []
    rng = np.random.default_rng(0)
    bar = _Progress(len(shapes) * len(cells), "growth", progress)
    for s in shapes:
        p = _problems([s], None, distribution, [scale], seed)[0]
        problems.append(p)
        for c in cells:
            r, sm = _measure(p, c, grads, reference, deterministic, num_threads, rng)
            rows += r
            samples += sm
            bar.update()
    bar.close()
    slopes = []
    for c in cells:
        cd = asdict(c)
        for g in grads:
            pts = [(r["reduction_length"], r[metric]) for r in rows
                   if r["grad"] == g and r["status"] == 0 and all(r[k] == v for k, v in cd.items())
                   and r[metric] is not None and r[metric] > 0]
            slope = None
            if len({n for n, _ in pts}) >= 2:
                slope = float(np.polyfit(np.log([n for n, _ in pts]), np.log([e for _, e in pts]), 1)[0])
            slopes.append({"cell": cd, "grad": g, "slope": slope})
    meta = _meta("growth", grid, problems, grads, reference, deterministic, axis=axis, values=vals, metric=metric,
                 base_shape=base.label, slopes=slopes)
    res = StudyResult("growth", rows, meta, samples)
    return res


# ---- command line -------------------------------------------------------------------------------------------
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


def _grid_from_args(a):
    return Grid(
        input_dtypes=tuple(_normalise("--input-dtype", v, tuple(INPUT_DTYPES), _INPUT_ALIASES, what="input dtype")
                           for v in _split("--input-dtype", a.input_dtype, INPUT_DTYPES)),
        cube_math_types=tuple(_norm_cube("--cube", v) for v in _split("--cube", a.cube, CUBE_MATH_TYPES)),
        socs=tuple(_normalise("--soc", v, SOCS, what="SoC profile") for v in _split("--soc", a.soc, SOCS)),
        grad_weight_dtypes=tuple(_normalise("--grad-weight-dtype", v, GW_DTYPES, _GW_ALIASES, what="gradWeight dtype")
                                 for v in _split("--grad-weight-dtype", a.grad_weight_dtype, GW_DTYPES)),
        hf32_roundings=tuple(_normalise("--hf32-rounding", v, HF32_ROUNDINGS, what="HF32 rounding")
                             for v in _split("--hf32-rounding", a.hf32_rounding, HF32_ROUNDINGS)),
        hf32_mantissa_bits=tuple(_norm_bits("--hf32-mantissa-bits", v)
                                 for v in _split("--hf32-mantissa-bits", a.hf32_mantissa_bits, ("profile", 10, 11))),
        hif8_roundings=tuple(_normalise("--hif8-rounding", v, HIF8_ROUNDINGS, what="HiFloat8 rounding")
                             for v in _split("--hif8-rounding", a.hif8_rounding, HIF8_ROUNDINGS)),
        saturate=tuple(_norm_bool("--saturate", v) for v in _split("--saturate", a.saturate, ("off", "on"))))


def cli(argv=None):
    """``python -m pyconvtbc study [modes|spread|growth] [options]``; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or (argv[0] not in ("modes", "spread", "growth") and argv[0] not in ("-h", "--help")):
        argv = ["modes"] + argv
    try:
        a = _parser().parse_args(argv)
    except SystemExit as e:       # --help (0) or a usage error (2, message already on stderr)
        return int(e.code or 0)
    try:
        grid = _grid_from_args(a)
        scales = [_norm_scale("--scale", s) for s in _split("--scale", a.scale, ())]
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
            if a.permutations < 1:
                raise ValueError(f"--permutations: {a.permutations}; expected an integer >= 1")
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
