"""Public codecs for the reduced-precision formats pyconvtbc emulates (docs/precision.md, "Public codecs").

Every function accepts any array-like of any shape and strides (it is made contiguous internally), returns a
new C-contiguous array of the same shape, and validates its keyword arguments with a ``ValueError`` that names
the argument, the value seen and what was expected.  The element-wise work runs without the GIL in
``_kernels/_codecs.pyx`` over the scalar codecs of ``_kernels/_fpround.pxd`` (the same ones the convolution
kernels use), on ``num_threads`` threads for large arrays.

Input conversion (docs/precision.md):
- float16, bfloat16, the float8 types and float32 convert to float32 exactly.
- float64 stays float64 for ``hif8_encode`` (rounded directly, not via fp32; ``rounding="hybrid"`` is defined
  on the fp32 pattern and rounds to fp32 first).  Every other function rounds float64 to float32 (RNE) first.
- integers and bools: as float64 for ``hif8_encode``, else cast to float32 (RNE).
- longdouble is cast to float64 first.  Complex, string, object and other dtypes raise ValueError.
"""
from __future__ import annotations

from typing import Literal, Optional

import numpy as np
from numpy.typing import ArrayLike, NDArray

import ml_dtypes

from ._kernels import _codecs as _k
from ._kernels._openmp import effective_threads
from .status import safe_repr

__all__ = [
    "hif8_encode",
    "hif8_decode",
    "round_to_hf32",
    "e4m3fn_encode",
    "e4m3fn_decode",
    "round_to_fp16",
    "round_to_bf16",
    "HIF8_ROUNDINGS",
    "HF32_ROUNDINGS",
]

from .formats import HF32_ROUNDINGS, HIF8_ROUNDINGS, is_float_like  # noqa: E402  (declared once, in the registry)


# ---- argument checks ------------------------------------------------------------------------------------
def _choice(name, value, table):
    if isinstance(value, str) and value in table:
        return table[value]
    expected = ", ".join(repr(k) for k in table)
    raise ValueError(f"{name} must be one of {expected}, got {value!r}")


def _flag(name, value):
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, np.integer)) and value in (0, 1):
        return bool(value)
    raise ValueError(f"{name} must be a bool (True or False), got {value!r}")


def _mantissa_bits(value):
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)) or not 1 <= value <= 22:
        raise ValueError(
            f"mantissa_bits must be an integer in 1..22 (11: ascend910b HF32, 10: ascend950), got {value!r}")
    return int(value)


# ---- input conversion -----------------------------------------------------------------------------------
def _array(name, x, what="a real numeric array-like"):
    """np.asarray(x), with a failure (an object whose __array__ raises, a ragged list) as a ValueError naming
    the argument; a Python int too large for int64 is read as the float it rounds to (+-inf past float64)."""
    if isinstance(x, int) and not isinstance(x, bool) and not -2**63 <= x < 2**64:
        try:
            x = float(x)
        except OverflowError:
            x = float("inf") if x > 0 else float("-inf")
    try:
        return np.asarray(x)
    except Exception as e:
        raise ValueError(f"{name} must be {what}; converting {safe_repr(x)} to an array failed "
                         f"({type(e).__name__}: {safe_repr(str(e), 200)})") from None


def _as_real(name, x, *, keep_f64):
    """A C-contiguous float32 (or float64 when keep_f64 and the input is wider) copy/view of x."""
    arr = _array(name, x)
    dt = arr.dtype
    if dt.kind in "iub":
        target = np.float64 if keep_f64 else np.float32
    elif is_float_like(dt):
        target = np.float64 if (dt.itemsize > 4 and keep_f64) else np.float32
        if dt.itemsize > 8:                     # longdouble: via float64
            arr = arr.astype(np.float64)
    else:
        raise ValueError(
            f"{name} must be a real numeric array-like (float16, bfloat16, float32, float64, integer), "
            f"got dtype {dt}")
    return np.asarray(arr, dtype=target, order="C")        # keeps 0-d shapes


def _as_codes(name, codes, allowed_dtype_names):
    """A C-contiguous uint8 array of 8-bit codes."""
    arr = _array(name, codes, "an array-like of uint8 codes")
    dt = arr.dtype
    if arr.size == 0 and not isinstance(codes, np.ndarray):    # [] reads as float64: no code to judge
        return np.empty(arr.shape, np.uint8)
    if dt == np.uint8:
        return np.asarray(arr, order="C")
    if dt.itemsize == 1 and (dt == np.int8 or dt.name in allowed_dtype_names):
        return np.asarray(arr, order="C").view(np.uint8)
    if dt.kind in "iu":
        if arr.size and (arr.min() < 0 or arr.max() > 255):
            raise ValueError(f"{name} must hold 8-bit codes 0..255, got values in "
                             f"[{arr.min()}, {arr.max()}]")
        return np.asarray(arr, dtype=np.uint8, order="C")
    raise ValueError(f"{name} must be an array of uint8 codes, got dtype {dt}")


def _run(kernel, src, out_dtype, *args, num_threads=None):
    threads = effective_threads(num_threads)      # checked even when there is nothing to convert
    flat = src.reshape(-1)
    out = np.empty(flat.shape[0], dtype=out_dtype)
    if flat.shape[0]:
        kernel(flat, out, *args, threads)
    return out.reshape(src.shape)


# ---- HiFloat8 -------------------------------------------------------------------------------------------
def hif8_encode(x: ArrayLike, *, rounding: Literal["ta", "hybrid"] = "ta", saturate: bool = False,
                num_threads: Optional[int] = None) -> NDArray[np.uint8]:
    """Encode values as HiFloat8 codes.

    Parameters
    ----------
    x : array_like
        Real values of any shape and strides: float16, bfloat16, the float8 types, float32, float64,
        integers or bools.  float64 (and integers) are rounded directly for ``"ta"``, never through float32;
        ``"hybrid"`` is defined on the float32 bit pattern, so it rounds float64 to float32 (RNE) first.
    rounding : {"ta", "hybrid"}, optional
        ``"ta"`` (default): to the nearest HiFloat8 value, ties away from zero, in the mantissa width of the
        value's class.  ``"hybrid"``: the HiFloat8 paper's HR rule taken literally (not verified on hardware;
        it moves some exactly representable values up one step, 16.0 -> 20.0).
    saturate : bool, optional
        False (default): magnitudes >= 40960 and +-inf give +-Inf (0x6F / 0xEF) and NaN gives 0x80.  True:
        they give +-32768 (0x6E / 0xEE) and NaN gives 0x00.
    num_threads : int or None, optional
        Threads for large arrays: None follows the package default (docs/getting-started.md, "Settings").

    Returns
    -------
    numpy.ndarray of uint8
        A new C-contiguous array of ``x``'s shape holding the codes.  -0.0 and values that round to zero
        give 0x00 (HiFloat8 has a single zero).

    Raises
    ------
    ValueError
        ``rounding`` or ``saturate`` is not one of the values above, ``num_threads`` is not a valid thread
        count, or ``x`` is not real numeric (complex, string, object ...); the message names the argument,
        the value and what was expected.

    Examples
    --------
    >>> hif8_encode([1.0, 18.0, -18.0, 1e6]).tolist()     # 18 is a tie between 16 and 20: away from zero
    [8, 65, 193, 111]
    """
    rnd = _choice("rounding", rounding, HIF8_ROUNDINGS)
    sat = _flag("saturate", saturate)
    src = _as_real("x", x, keep_f64=True)
    kernel = _k.hif8_encode_f64 if src.dtype == np.float64 else _k.hif8_encode_f32
    return _run(kernel, src, np.uint8, rnd, sat, num_threads=num_threads)


def hif8_decode(codes: ArrayLike, *, num_threads: Optional[int] = None) -> NDArray[np.float32]:
    """Decode HiFloat8 codes to float32.

    Parameters
    ----------
    codes : array_like
        8-bit codes of any shape: uint8; int8 and ``en_dtypes.hifloat8`` arrays are read as their bytes;
        other integer arrays must hold values in 0..255.
    num_threads : int or None, optional
        Threads for large arrays: None follows the package default.

    Returns
    -------
    numpy.ndarray of float32
        A new C-contiguous array of ``codes``' shape.  Every HiFloat8 value is exact in float32; 0x80 gives
        NaN and 0x6F / 0xEF give +-inf.

    Raises
    ------
    ValueError
        ``codes`` is not an array of 8-bit codes (another dtype, or integers outside 0..255), or
        ``num_threads`` is not a valid thread count.

    Examples
    --------
    >>> hif8_decode([0x08, 0x41, 0x6E, 0x7E]).tolist()
    [1.0, 20.0, 32768.0, 3.0517578125e-05]
    """
    src = _as_codes("codes", codes, ("hifloat8",))
    return _run(_k.hif8_decode, src, np.float32, num_threads=num_threads)


# ---- HF32 -----------------------------------------------------------------------------------------------
def round_to_hf32(x: ArrayLike, *, mantissa_bits: int = 11,
                  rounding: Literal["half_away", "nearest_even"] = "half_away",
                  num_threads: Optional[int] = None) -> NDArray[np.float32]:
    """Round values to HF32 (fp32's sign and exponent, ``mantissa_bits`` explicit mantissa bits).

    Parameters
    ----------
    x : array_like
        Real values of any shape and strides; float64, integers and bools are first rounded to float32
        (round to nearest even).
    mantissa_bits : int, optional
        11 (default, ascend910b) or 10 (ascend950); any integer in 1..22 is accepted.
    rounding : {"half_away", "nearest_even"}, optional
        ``"half_away"`` (default): round half away from zero, Huawei's test golden
        ``((bits >> (22-N)) + 1) >> 1 << (23-N)`` on the bit pattern.  ``"nearest_even"``: ties to even, the
        hardware documentation's default.
    num_threads : int or None, optional
        Threads for large arrays: None follows the package default.

    Returns
    -------
    numpy.ndarray of float32
        A new C-contiguous array of ``x``'s shape holding the rounded values.  +-inf and NaN are returned
        unchanged; a carry out of the largest binade gives inf (FLT_MAX -> inf).

    Raises
    ------
    ValueError
        ``mantissa_bits`` is not an integer in 1..22, ``rounding`` is not one of the values above,
        ``num_threads`` is not a valid thread count, or ``x`` is not real numeric.

    Examples
    --------
    >>> round_to_hf32([1 + 2**-12, 1 + 2**-12], mantissa_bits=11).tolist()   # a tie: away from zero
    [1.00048828125, 1.00048828125]
    >>> round_to_hf32([1 + 2**-12], rounding="nearest_even").tolist()
    [1.0]
    """
    n = _mantissa_bits(mantissa_bits)
    rnd = _choice("rounding", rounding, HF32_ROUNDINGS)
    src = _as_real("x", x, keep_f64=False)
    return _run(_k.round_hf32_f32, src, np.float32, n, rnd, num_threads=num_threads)


# ---- FLOAT8_E4M3FN --------------------------------------------------------------------------------------
def e4m3fn_encode(x: ArrayLike, *, saturate: bool = False,
                  num_threads: Optional[int] = None) -> NDArray[np.generic]:
    """``x`` as ``ml_dtypes.float8_e4m3fn`` (round to nearest even).

    Default: bit for bit what ``x.astype(ml_dtypes.float8_e4m3fn)`` gives on float32 input (|x| in (448, 464]
    -> 448, beyond -> NaN, inf -> NaN, zero keeps its sign).  ``saturate``: overflow and +-inf -> +-448,
    NaN -> 0.  float64 input is first rounded to float32 (RNE).
    """
    sat = _flag("saturate", saturate)
    src = _as_real("x", x, keep_f64=False)
    return _run(_k.e4m3fn_encode_f32, src, np.uint8, sat, num_threads=num_threads).view(ml_dtypes.float8_e4m3fn)


def e4m3fn_decode(codes: ArrayLike, *, num_threads: Optional[int] = None) -> NDArray[np.float32]:
    """float32 values of FLOAT8_E4M3FN codes (uint8 or ml_dtypes.float8_e4m3fn arrays)."""
    src = _as_codes("codes", codes, ("float8_e4m3fn",))
    return _run(_k.e4m3fn_decode, src, np.float32, num_threads=num_threads)


# ---- FP16 / BF16 ----------------------------------------------------------------------------------------
def round_to_fp16(x: ArrayLike, *, num_threads: Optional[int] = None) -> NDArray[np.float32]:
    """``x`` rounded to the nearest float16 value (RNE, overflow -> +-inf, subnormals kept), as float32."""
    src = _as_real("x", x, keep_f64=False)
    return _run(_k.round_f16_f32, src, np.float32, num_threads=num_threads)


def round_to_bf16(x: ArrayLike, *, num_threads: Optional[int] = None) -> NDArray[np.float32]:
    """``x`` rounded to the nearest bfloat16 value (RNE), as float32."""
    src = _as_real("x", x, keep_f64=False)
    return _run(_k.round_bf16_f32, src, np.float32, num_threads=num_threads)
