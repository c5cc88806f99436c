"""SoC profiles, the cubeMathType -> compute-precision table, and the emulation options.

The chips and the cubeMathType table (docs/semantics.md, section 3) are implemented here and nowhere else.
A profile decides: which data types exist, which cubeMathType values are errors, the HF32 mantissa width, the
default determinism and the order of the cube's partial sums (docs/precision.md, "Accumulation model").
"""
import os
import threading
from typing import TYPE_CHECKING, NamedTuple, Optional
from dataclasses import dataclass, field

import numpy as np

from .enums import aclDataType as DT
from .status import ACLNN_ERR_PARAM_INVALID, AclnnError, int_value, is_int, safe_repr
from .formats import COMPUTE_PRECISIONS, HF32_ROUNDINGS, HIF8_ROUNDINGS
from .typing import AccumulationOption, BoolOption, HF32RoundingOption, HiF8RoundingOption, IntOption, Accumulation, EmulationOptions, HF32Rounding, HiF8Rounding, SocName

# Compute precision C (declared in the registry, formats.COMPUTE_PRECISIONS; also used by the kernels).
COMPUTE_FP32, COMPUTE_HF32, COMPUTE_FP16, COMPUTE_BF16 = (c.code for c in COMPUTE_PRECISIONS)
COMPUTE_NAMES = {c.code: c.name for c in COMPUTE_PRECISIONS}

# The cube accumulation model (docs/precision.md, "Accumulation model"): the forms, and the products per cube
# step (k0) of each compute precision; block_size overrides k0 within BLOCK_SIZE_RANGE.
ACCUMULATIONS = {"sequential": 0, "cube": 1, "cube_wide": 2, "cube_rz": 3}
K0 = {c.code: c.k0 for c in COMPUTE_PRECISIONS}
BLOCK_SIZE_RANGE = (1, 64)

_F, _H, _B = int(DT.ACL_FLOAT), int(DT.ACL_FLOAT16), int(DT.ACL_BF16)
_ERR = None  # a table cell that is an error (161002)


class SumGeometry(NamedTuple):
    """How a chip with the piece layout (``sum_layout`` 1) cuts its cube reductions (docs/precision.md,
    "Accumulation model"): the output's blocks are ``piece_co`` output channels x ``piece_red`` reduction rows
    (ci, k); with fewer than ``pieces`` of them, gradWeight runs in ``pieces // blocks`` pieces combined by a
    pairwise tree; gradWeight's chains are cut into segments of ``gw_segment`` positions and gradInput's (when
    K*Cout >= ``gi_segment``) into segments of ``gi_segment`` reduction elements.  The kernels take these
    numbers from here: no chip's number is written in C."""
    piece_co: int
    piece_red: int
    pieces: int
    gw_segment: int
    gi_segment: int


@dataclass(frozen=True)
class SocProfile:
    name: str
    hf32_mantissa_bits: int
    has_bf16: bool            # BF16 for self/input/weight/gradInput/gradWeight (bias always may be BF16)
    deterministic_default: bool
    # cube_table[P][cubeMathType] -> compute precision, or None for an error cell
    cube_table: dict = field(repr=False)
    # how the cube's partial sums are ordered (docs/precision.md, "Accumulation model"): 0 = one gradWeight
    # chain per batch item, added in b order (or a per-call permutation when not deterministic); 1 = positions
    # t-outer, segments and pieces combined by a pairwise tree (always deterministic)
    sum_layout: int = 0
    sum_geometry: Optional[SumGeometry] = None   # sum_layout 1: its pieces and segments
    always_deterministic: bool = False
    eight_bit_operands: bool = False   # the forward takes 8-bit operands (formats.EIGHT_BIT_OPERAND: HiFloat8)


_TABLE_A2 = {  # ascend910b (Atlas A2/A3) and ascend950
    _F: (COMPUTE_FP32, COMPUTE_HF32, COMPUTE_FP16, COMPUTE_HF32),
    _H: (COMPUTE_FP16, COMPUTE_FP16, COMPUTE_FP16, COMPUTE_FP16),
    _B: (COMPUTE_BF16, COMPUTE_BF16, COMPUTE_FP16, COMPUTE_BF16),
}
_TABLE_910 = {  # older Atlas training: no fp32 cube path, no HF32, no BF16 compute
    _F: (_ERR, COMPUTE_FP16, COMPUTE_FP16, _ERR),
    _H: (COMPUTE_FP16, COMPUTE_FP16, COMPUTE_FP16, COMPUTE_FP16),
}

PROFILES = {
    "ascend910b": SocProfile("ascend910b", 11, True, False, _TABLE_A2),
    "ascend950": SocProfile("ascend950", 10, True, True, _TABLE_A2, sum_layout=1,
                            sum_geometry=SumGeometry(piece_co=128, piece_red=256, pieces=32, gw_segment=65536,
                                                     gi_segment=32768),
                            always_deterministic=True, eight_bit_operands=True),
    "ascend910": SocProfile("ascend910", 11, False, False, _TABLE_910),
}
DEFAULT_SOC = "ascend910b"


def promote(*dtypes):
    """PyTorch-style promotion of float dtypes: same -> same; with FLOAT -> FLOAT; FP16 + BF16 -> FLOAT."""
    s = set(int(d) for d in dtypes)
    return s.pop() if len(s) == 1 else _F


def compute_precision(profile, promoted, cube_math_type):
    """The compute precision for (P, cubeMathType) on ``profile``, or None where the table says error."""
    row = profile.cube_table.get(int(promoted))
    if row is None or not 0 <= int(cube_math_type) <= 3:
        return None
    return row[int(cube_math_type)]


_lock = threading.Lock()
_state = {"soc": None, "epoch": 0}   # epoch: bumped by every change of the process settings below


def settings_key():
    """A value that changes whenever set_soc_version or an emulation-option setter changes a setting
    (callers that cache per-setting results key them on it; environment variables are not covered)."""
    return _state["soc"], _state["epoch"]


def _reset_soc_version():
    """Back to no process-wide chip (the environment's or the default); for tests."""
    with _lock:
        _state["soc"] = None
        _state["epoch"] += 1


def _check_soc(name, argname="soc"):
    if not isinstance(name, str) or name.lower() not in PROFILES:
        raise ValueError(f"{argname} is {safe_repr(name)}; expected one of {sorted(PROFILES)}")
    return name.lower()


def set_soc_version(name: SocName) -> None:
    """Select the emulated chip for the whole process: 'ascend910b' (default), 'ascend950', 'ascend910'."""
    name = _check_soc(name)
    with _lock:
        _state["soc"] = name
        _state["epoch"] += 1


def get_soc_version() -> str:
    """The emulated chip: set_soc_version's, else $PYCONVTBC_SOC_VERSION, else 'ascend910b'."""
    with _lock:
        if _state["soc"] is not None:
            return _state["soc"]
    env = os.environ.get("PYCONVTBC_SOC_VERSION", "").strip()
    if env:
        return _check_soc(env, "PYCONVTBC_SOC_VERSION")
    return DEFAULT_SOC


def get_profile(name=None):
    return PROFILES[_check_soc(name) if name is not None else get_soc_version()]


# ---- emulation options beyond CANN (docs/precision.md, "Emulation options") ---------------------------
_DEFAULT_OPTIONS = {"hf32_rounding": "half_away", "hf32_mantissa_bits": None,
                    "hif8_rounding": "ta", "saturate": False,
                    "accumulation": "cube", "block_size": None, "order_seed": None}
_options = dict(_DEFAULT_OPTIONS)


# An option's value "default" is its built-in default (the table above: for hf32_mantissa_bits the chip's, for
# block_size the compute precision's k0, for order_seed a fresh order per call), whatever set_emulation_options
# set; a NumPy-layer keyword's None is the process-wide value (docs/numpy.md, "Emulation keywords").
DEFAULT = "default"

# what each emulation option accepts, in messages
OPTION_EXPECTED = {"hf32_rounding": "None, 'default', 'half_away' or 'nearest_even'",
                   "hf32_mantissa_bits": "None, 'default', 10 or 11",
                   "hif8_rounding": "None, 'default', 'ta' or 'hybrid'", "saturate": "None, 'default', True or False",
                   "accumulation": "None, 'default', 'cube', 'cube_wide', 'cube_rz' or 'sequential'",
                   "block_size": "None, 'default' or an integer in [1, 64]",
                   "order_seed": "None, 'default' or an integer >= 0"}


def check_option(name, value):
    """Validate one emulation option; returns the normalised value or raises ValueError naming it (a value
    whose __eq__, __hash__, __repr__ or __index__ raises reads as a bad value, never as another exception)."""
    try:
        return _check_option(name, value)
    except ValueError:
        raise
    except Exception:
        raise ValueError(f"{name} is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}") from None


def _check_option(name, value):
    if name in _DEFAULT_OPTIONS and isinstance(value, str) and str.__eq__(value, DEFAULT) is True:
        return _DEFAULT_OPTIONS[name]
    if name == "hf32_rounding":
        if value not in HF32_ROUNDINGS:
            raise ValueError(f"hf32_rounding is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}")
    elif name == "hif8_rounding":
        if value not in HIF8_ROUNDINGS:
            raise ValueError(f"hif8_rounding is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}")
    elif name == "hf32_mantissa_bits":
        n = int_value(value)
        if value is not None and (n is None or n not in (10, 11)):
            raise ValueError(f"hf32_mantissa_bits is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}")
        value = None if value is None else n
    elif name == "saturate":
        if not isinstance(value, (bool, int, np.bool_, np.integer)) or value not in (0, 1):
            raise ValueError(f"saturate is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}")
        value = bool(value)
    elif name == "accumulation":
        if not isinstance(value, str) or value not in ACCUMULATIONS:
            raise ValueError(f"accumulation is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}")
    elif name == "block_size":
        lo, hi = BLOCK_SIZE_RANGE
        n = int_value(value)
        if value is not None and (n is None or not lo <= n <= hi):
            raise ValueError(f"block_size is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}")
        value = None if value is None else n
    elif name == "order_seed":
        n = int_value(value)
        if value is not None and (n is None or n < 0):
            raise ValueError(f"order_seed is {safe_repr(value)}; expected {OPTION_EXPECTED[name]}")
        value = None if value is None else n
    else:
        raise ValueError(f"unknown emulation option {name!r}; expected one of {sorted(_DEFAULT_OPTIONS)}")
    return value


if TYPE_CHECKING:  # what type checkers see: the options by name, each with its type (the same call at run time)
    def set_emulation_options(*, hf32_rounding: Optional[HF32RoundingOption] = None,
                              hf32_mantissa_bits: Optional[IntOption] = None, hif8_rounding: Optional[HiF8RoundingOption] = None,
                              saturate: Optional[BoolOption] = None, accumulation: Optional[AccumulationOption] = None,
                              block_size: Optional[IntOption] = None, order_seed: Optional[IntOption] = None) -> None: ...
else:
    def set_emulation_options(**kwargs):
        """Set process-wide emulation options (read at phase 1): hf32_rounding, hf32_mantissa_bits,
        hif8_rounding, saturate, accumulation, block_size, order_seed.  ``None`` or ``"default"`` sets an option's
        built-in default (docs/numpy.md, "Emulation keywords").  Unknown names and bad values raise
        ``AclnnError`` 161002 (a ``ValueError``) naming the option, the value and what was expected; nothing is
        changed then."""
        try:
            checked = {k: check_option(k, _DEFAULT_OPTIONS[k] if v is None and k in _DEFAULT_OPTIONS else v)
                       for k, v in kwargs.items()}
        except ValueError as e:
            raise AclnnError(ACLNN_ERR_PARAM_INVALID, f"set_emulation_options: {e}") from None
        with _lock:
            _options.update(checked)
            _state["epoch"] += 1


def get_emulation_options() -> EmulationOptions:
    """The current emulation options as a dict (a copy)."""
    with _lock:
        return dict(_options)  # type: ignore[return-value]  # (its keys and values: _DEFAULT_OPTIONS, checked)


def reset_emulation_options() -> None:
    with _lock:
        _options.clear()
        _options.update(_DEFAULT_OPTIONS)
        _state["epoch"] += 1


def resolve_options(profile, **overrides):
    """Options for one call: overrides that are not None win over the process options ("default": the built-in
    default); then hf32_mantissa_bits None is the profile's."""
    opts = get_emulation_options()
    for k, v in overrides.items():
        if v is not None:
            opts[k] = check_option(k, v)
    if opts["hf32_mantissa_bits"] is None:
        opts["hf32_mantissa_bits"] = profile.hf32_mantissa_bits
    return opts


def accumulation_mode(profile, compute, options, default_k0=None):
    """(acc, k0, layout, geometry) for the kernels: the accumulation form's code, the block size (block_size, else
    default_k0 when given (8-bit operands: formats.K0_8BIT), else k0 of the compute precision), the profile's order
    of partial sums and (layout 1) its pieces and segments (a SumGeometry, else ())."""
    acc = ACCUMULATIONS[options["accumulation"]]
    k0 = (options["block_size"] if options["block_size"] is not None
          else default_k0 if default_k0 is not None else K0[compute])
    return acc, int(k0), profile.sum_layout, tuple(profile.sum_geometry or ())
