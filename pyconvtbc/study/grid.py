"""The grid of emulation modes: its axes (``Grid``) and the distinct modes it spans (``Cell``)."""
from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Optional

from .. import formats as _reg
from ..profiles import COMPUTE_HF32, COMPUTE_NAMES, PROFILES, compute_precision
from .choices import (_ACL_CODE, CHIP_HF32_BITS, _AXES, _EIGHT_BIT, CUBE_MATH_TYPES, FORWARD_ONLY_INPUTS, _as_list,
                      _uniq)

# the output formats whose encoder takes the HiFloat8 rounding option (registry: encode_keywords)
_HIF8_ROUNDED = tuple(t.name for t in _reg.types_with_role(_reg.GRAD_WEIGHT) if "rounding" in t.encode_keywords)


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
    accumulation: Optional[str] = None     # None: the operator's default form
    block_size: Optional[int] = None       # None: the compute precision's k0 (and always for 'sequential')

    def kwargs(self, deterministic=True, num_threads=None):
        """Keywords for ``pyconvtbc.conv_tbc_backward`` (explicit values: process options never leak in; the
        accumulation keywords only when the grid sets them)."""
        kw = dict(cube_math_type=CUBE_MATH_TYPES[self.cube_math_type], grad_weight_dtype=self.grad_weight_dtype,
                  soc=self.soc, deterministic=deterministic, num_threads=num_threads,
                  hf32_rounding=self.hf32_rounding or "half_away", hf32_mantissa_bits=self.hf32_mantissa_bits,
                  hif8_rounding=self.hif8_rounding or "ta", saturate=bool(self.saturate))
        if self.accumulation is not None:
            kw["accumulation"] = self.accumulation
        if self.block_size is not None:
            kw["block_size"] = self.block_size
        return kw

    def forward_kwargs(self, num_threads=None):
        """Keywords for ``pyconvtbc.conv_tbc`` (the forward): the backward's, less those of the backward only
        (gradWeight dtype, determinism; the forward is always deterministic)."""
        kw = self.kwargs(True, num_threads)
        for k in ("grad_weight_dtype", "deterministic"):
            kw.pop(k)
        if self.input_dtype in FORWARD_ONLY_INPUTS:       # HiFloat8 operands: uint8 codes (ascend950)
            kw["hif8_inputs"] = True
        return kw

    @property
    def what_if(self):
        """True for an HF32 width the chips do not have (run by pre-rounding the operands, see ``_run_cell``)."""
        return self.compute == "HF32" and self.hf32_mantissa_bits not in CHIP_HF32_BITS

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
    accumulations: tuple = (None,)
    block_sizes: tuple = (None,)

    def __post_init__(self):
        for name, (norm, every) in _AXES.items():
            v = getattr(self, name)
            if isinstance(v, str) and v.strip().lower() == "all":      # "all" (alone) takes every value
                v = every
            elif v is None and name in ("hf32_mantissa_bits", "accumulations", "block_sizes"):   # the defaults
                v = [None]
            setattr(self, name, _uniq(norm(name, x) for x in _as_list(name, v)))

    def cells(self):
        out = []
        for dt, soc, cube, gw, hr, hb, h8, sat, acc, bs in itertools.product(
                self.input_dtypes, self.socs, self.cube_math_types, self.grad_weight_dtypes, self.hf32_roundings,
                self.hf32_mantissa_bits, self.hif8_roundings, self.saturate, self.accumulations, self.block_sizes):
            profile = PROFILES[soc]
            if dt in FORWARD_ONLY_INPUTS:   # 8-bit operands: used as they are under every cubeMathType
                c, name = None, "HIF8" if profile.eight_bit_operands else "n/a"
            else:
                c = compute_precision(profile, _ACL_CODE[dt], CUBE_MATH_TYPES[cube])
                name = COMPUTE_NAMES[c] if c is not None else "n/a"
            hf32 = c == COMPUTE_HF32
            gw_eff = dt if gw == "same" else gw
            out.append(Cell(dt, cube, soc, gw_eff, name,
                            hr if hf32 else None, (hb or profile.hf32_mantissa_bits) if hf32 else None,
                            h8 if gw_eff in _HIF8_ROUNDED else None, sat if gw_eff in _EIGHT_BIT else None,
                            acc, bs if acc != "sequential" else None))
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
