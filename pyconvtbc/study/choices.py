"""The accepted values of every study setting, and the normalisers that turn user input into them."""
from __future__ import annotations

import math

import numpy as np

from .. import formats as _reg
from ..formats import HF32_ROUNDINGS as _HF32, HIF8_ROUNDINGS as _HIF8
from ..profiles import COMPUTE_NAMES, PROFILES

# Every format list below comes from the registry (pyconvtbc/formats.py).
_OPERAND_TYPES = _reg.types_with_role(_reg.OPERAND)
_GW_ONLY_TYPES = _reg.types_with_role(_reg.GRAD_WEIGHT)
INPUT_DTYPES = {t.name: t.storage for t in _OPERAND_TYPES}
# 8-bit operands the forward takes on chips that have them (ascend950: HiFloat8), as uint8 codes: an input dtype
# of the forward only (--grads output), never among 'all'
FORWARD_ONLY_INPUTS = {t.name: t.storage for t in _reg.types_with_role(_reg.EIGHT_BIT_OPERAND)
                       if t.name not in INPUT_DTYPES}
_FORMAT_ALIASES = {t.aliases[0]: t.name for t in _OPERAND_TYPES + _GW_ONLY_TYPES}   # the short names
_INPUT_ALIASES = {a: t.name for t in _OPERAND_TYPES + _reg.types_with_role(_reg.EIGHT_BIT_OPERAND)
                  for a in t.aliases}
_ACL_CODE = {t.name: t.code for t in _OPERAND_TYPES + _reg.types_with_role(_reg.EIGHT_BIT_OPERAND)}

CUBE_MATH_TYPES = {"KEEP_DTYPE": 0, "ALLOW_FP32_DOWN_PRECISION": 1, "USE_FP16": 2, "USE_HF32": 3}
_CUBE_BY_VALUE = {v: k for k, v in CUBE_MATH_TYPES.items()}
_CUBE_ALIASES = {"keep": 0, "allow_fp32_down": 1, "allow_down": 1, "fp16": 2, "hf32": 3}

GW_DTYPES = ("same",) + tuple(t.name for t in _OPERAND_TYPES + _GW_ONLY_TYPES)
_GW_ALIASES = {**_FORMAT_ALIASES, **{a: t.name for t in _GW_ONLY_TYPES for a in t.aliases}, "weight": "same"}
_EIGHT_BIT = tuple(t.name for t in _GW_ONLY_TYPES)

HF32_ROUNDINGS = tuple(_HF32)
HIF8_ROUNDINGS = tuple(_HIF8)
SOCS = tuple(PROFILES)
GRADS = ("gradInput", "gradWeight", "gradBias")
# What a study can measure: the backward's three gradients and the forward's result (aclnnConvTbc's out).
FORWARD = "output"
MEASURED = GRADS + (FORWARD,)
_GRAD_ALIASES = {"gi": "gradInput", "grad_input": "gradInput", "gw": "gradWeight", "grad_weight": "gradWeight",
                 "gb": "gradBias", "grad_bias": "gradBias", "out": FORWARD, "forward": FORWARD, "fwd": FORWARD}
DISTRIBUTIONS = ("normal", "uniform", "lognormal")
REFERENCES = ("inputs", "source")
_COMPUTE_BY_NAME = {v: k for k, v in COMPUTE_NAMES.items()}


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


def _as_whole(v):
    """``v`` as an int when it is a whole number (not a bool), else None."""
    try:
        iv = int(v)
        return iv if not isinstance(v, bool) and iv == float(v) else None
    except (TypeError, ValueError):
        return None


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


# HF32 widths the chips have (ascend950: 10, ascend910b: 11); 1..22 are studied as what-ifs beyond the chips.
CHIP_HF32_BITS = (10, 11)


def _norm_bits(argname, v):
    if v is None or (isinstance(v, str) and v.strip().lower() in ("profile", "none", "default")):
        return None
    w = _as_whole(v)
    if w is not None and 1 <= w <= 22:
        return w
    raise ValueError(f"{argname}: {v!r} is not an HF32 mantissa width; expected 'profile' (None) or an integer "
                     "1..22 (10 and 11 are the chips'; other widths are what-ifs beyond the chips)")


def _norm_bool(argname, v):
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("on", "true", "yes", "1", "off", "false", "no", "0"):
        return v.strip().lower() in ("on", "true", "yes", "1")
    raise ValueError(f"{argname}: {v!r} is not a boolean; expected on/off (True/False)")


_AMAX_DEFAULT = 0.5
# 'amax' without FRAC: the fraction of the output format's largest finite value that gradWeight's largest exact
# magnitude is scaled to, per format, chosen from measured error (docs/studies.md, section 3: the median
# relative Frobenius error of HiFloat8 gradWeights of a trained fconv-style LM is 0.104 at FRAC 0.5 and 0.0265
# at 2^-11, where the values sit in HiFloat8's widest-mantissa range; E4M3FN's is flat from 1 down to 2^-8)
AMAX_FORMAT_DEFAULT = {"hifloat8": 2.0 ** -11}


def amax_fraction(fmt):
    """The default FRAC of 'amax' for gradWeight's output format ``fmt``."""
    return AMAX_FORMAT_DEFAULT.get(fmt, _AMAX_DEFAULT)


def _norm_scale_rule(argname, v):
    """A --scale entry: a positive number, 'amax[:FRAC]' (per-cell power-of-two scaling of grad_output so that
    gradWeight's largest exact magnitude lands in (FRAC/2, FRAC] of its output format's largest finite value;
    'amax' alone: the format's default FRAC, ``amax_fraction``) or 'best' (per cell, the power of two of
    grad_output with the smallest gradWeight rel Frob) -> float, 'amax', 'amax:FRAC' or 'best'."""
    if isinstance(v, str) and v.strip().lower() == "best":
        return "best"
    if isinstance(v, str) and v.strip().lower().startswith("amax"):
        _, _, frac = v.strip().partition(":")
        if not frac and v.strip().lower() == "amax":
            return "amax"
        try:
            f = float(frac) if frac else float("nan")
        except ValueError:
            f = float("nan")
        if not (math.isfinite(f) and 0 < f <= 1):
            raise ValueError(f"{argname}: {v!r}: FRAC of amax:FRAC must be a number in (0, 1]")
        return f"amax:{f:g}"
    return _norm_scale(argname, v)


def _norm_scale(argname, v):
    try:
        s = float(v)
    except (TypeError, ValueError):
        s = float("nan")
    if isinstance(v, bool) or not math.isfinite(s) or s <= 0:
        raise ValueError(f"{argname}: {v!r} is not a scale; expected a finite number > 0")
    return s


# The most accumulation orders a spread study takes (each order is a full computation of the gradient; the
# spread's statistics settle after a few dozen).  ``reduction_order_spread`` also checks, before computing, that
# the N results of each gradient fit in memory (``data.MAX_ELEMENTS`` values).
MAX_PERMUTATIONS = 10000


def _norm_permutations(permutations, argname="permutations"):
    if isinstance(permutations, bool) or not isinstance(permutations, (int, np.integer)) or permutations < 1:
        raise ValueError(f"{argname}: {permutations!r}; expected an integer >= 1")
    if permutations > MAX_PERMUTATIONS:
        raise ValueError(f"{argname}: {permutations!r}; expected an integer in [1, {MAX_PERMUTATIONS}] (the number "
                         "of accumulation orders)")
    return permutations


# The kernels' thread range (pyconvtbc.conv_tbc_backward's num_threads).
MAX_THREADS = 1024


def _norm_threads(num_threads, argname="num_threads"):
    """None (the kernels' default), or an integer in [1, MAX_THREADS]; else a ValueError naming ``argname``."""
    if num_threads is None:
        return None
    if (isinstance(num_threads, bool) or not isinstance(num_threads, (int, np.integer))
            or not 1 <= num_threads <= MAX_THREADS):
        raise ValueError(f"{argname}: {num_threads!r}; expected an integer in [1, {MAX_THREADS}]")
    return int(num_threads)


def _norm_grads(grads, argname="grads"):
    return _uniq(_normalise(argname, g, MEASURED, _GRAD_ALIASES, what="gradient (or output)")
                 for g in _as_list(argname, grads))


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


# The accumulation model of the cube (its forms; None: the operator's default) and the block size k0 (None: the
# compute precision's k0).
ACCUMULATIONS = ("cube", "cube_wide", "cube_rz", "sequential")
BLOCK_SIZE_RANGE = (1, 64)
_DEFAULT_WORDS = ("default", "none", "profile", "k0")


def _norm_accumulation(argname, v):
    if v is None or (isinstance(v, str) and v.strip().lower() in _DEFAULT_WORDS):
        return None
    return _normalise(argname, v, ACCUMULATIONS, what="accumulation form")


def _norm_block_size(argname, v):
    if v is None or (isinstance(v, str) and v.strip().lower() in _DEFAULT_WORDS):
        return None
    w = _as_whole(v)
    lo, hi = BLOCK_SIZE_RANGE
    if w is not None and lo <= w <= hi:
        return w
    raise ValueError(f"{argname}: {v!r} is not a block size; expected 'k0' (the compute precision's, None) or an "
                     f"integer {lo}..{hi}")


# Every axis of the grid: how one value of it is normalised, and the values that "all" stands for.
_AXES = {
    "input_dtypes": (lambda a, v: _normalise(a, v, tuple(INPUT_DTYPES) + tuple(FORWARD_ONLY_INPUTS),
                                             _INPUT_ALIASES, what="input dtype"),
                     tuple(INPUT_DTYPES)),
    "cube_math_types": (_norm_cube, tuple(CUBE_MATH_TYPES)),
    "socs": (lambda a, v: _normalise(a, v, SOCS, what="SoC profile"), SOCS),
    "grad_weight_dtypes": (lambda a, v: _normalise(a, v, GW_DTYPES, _GW_ALIASES, what="gradWeight dtype"),
                           GW_DTYPES),
    "hf32_roundings": (lambda a, v: _normalise(a, v, HF32_ROUNDINGS, what="HF32 rounding"), HF32_ROUNDINGS),
    "hf32_mantissa_bits": (_norm_bits, (None, 10, 11)),
    "hif8_roundings": (lambda a, v: _normalise(a, v, HIF8_ROUNDINGS, what="HiFloat8 rounding"), HIF8_ROUNDINGS),
    "saturate": (_norm_bool, (False, True)),
    "accumulations": (_norm_accumulation, ACCUMULATIONS),
    "block_sizes": (_norm_block_size, (None,)),
}
