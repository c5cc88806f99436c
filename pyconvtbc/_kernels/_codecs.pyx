# cython: language_level=3
"""Vectorised, GIL-free codec loops behind ``pyconvtbc.codecs`` (not public API).

Every function takes C-contiguous 1-D buffers of equal length (the caller in codecs.py checks dtypes,
contiguity and lengths) and a thread count.  Arrays of at least ``PARALLEL_MIN`` elements are split over
``num_threads`` OpenMP threads (static schedule); smaller ones run serially.  The per-element work is the
scalar codecs of ``_fpround.pxd``, so these loops and the convolution kernels round identically.
"""
from cython.parallel cimport prange
from libc.stdint cimport uint8_t, uint16_t

from ._fpround cimport (
    HIF8_HYBRID,
    bf16_bits_to_f32,
    e4m3fn_to_f32,
    f16_bits_to_f32,
    f32_to_bf16_bits,
    f32_to_e4m3fn,
    f32_to_f16_bits,
    f32_to_hif8,
    f64_to_hif8,
    hif8_to_f32,
    round_bf16,
    round_f16,
    round_hf32,
)

PARALLEL_MIN = 1 << 16
cdef Py_ssize_t _PARALLEL_MIN = PARALLEL_MIN


cdef inline int _threads(Py_ssize_t n, int num_threads) noexcept nogil:
    """1 for small arrays, else the requested count (at least 1)."""
    if n < _PARALLEL_MIN or num_threads < 1:
        return 1
    return num_threads


def hif8_encode_f32(const float[::1] x, uint8_t[::1] out, int rounding, bint saturate, int num_threads=1):
    """out[i] = HiFloat8 code of x[i] (rounding HIF8_TA / HIF8_HYBRID)."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    cdef int rnd = HIF8_HYBRID if rounding == HIF8_HYBRID else 0
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = f32_to_hif8(x[i], rnd, saturate)
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = f32_to_hif8(x[i], rnd, saturate)


def hif8_encode_f64(const double[::1] x, uint8_t[::1] out, int rounding, bint saturate, int num_threads=1):
    """out[i] = HiFloat8 code of the double x[i], rounded directly (hybrid: via fp32, see _fpround.pxd)."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    cdef int rnd = HIF8_HYBRID if rounding == HIF8_HYBRID else 0
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = f64_to_hif8(x[i], rnd, saturate)
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = f64_to_hif8(x[i], rnd, saturate)


def hif8_decode(const uint8_t[::1] codes, float[::1] out, int num_threads=1):
    cdef Py_ssize_t i, n = codes.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = hif8_to_f32(codes[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = hif8_to_f32(codes[i])


def round_hf32_f32(const float[::1] x, float[::1] out, int mantissa_bits, int rounding, int num_threads=1):
    """out[i] = x[i] rounded to fp32's exponent and ``mantissa_bits`` mantissa bits."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = round_hf32(x[i], mantissa_bits, rounding)
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = round_hf32(x[i], mantissa_bits, rounding)


def e4m3fn_encode_f32(const float[::1] x, uint8_t[::1] out, bint saturate, int num_threads=1):
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = f32_to_e4m3fn(x[i], saturate)
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = f32_to_e4m3fn(x[i], saturate)


def e4m3fn_decode(const uint8_t[::1] codes, float[::1] out, int num_threads=1):
    cdef Py_ssize_t i, n = codes.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = e4m3fn_to_f32(codes[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = e4m3fn_to_f32(codes[i])


def f16_encode_f32(const float[::1] x, uint16_t[::1] out, int num_threads=1):
    """IEEE binary16 bit patterns of x, round to nearest even."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = f32_to_f16_bits(x[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = f32_to_f16_bits(x[i])


def f16_decode(const uint16_t[::1] h, float[::1] out, int num_threads=1):
    cdef Py_ssize_t i, n = h.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = f16_bits_to_f32(h[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = f16_bits_to_f32(h[i])


def bf16_encode_f32(const float[::1] x, uint16_t[::1] out, int num_threads=1):
    """bfloat16 bit patterns of x, round to nearest even."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = f32_to_bf16_bits(x[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = f32_to_bf16_bits(x[i])


def bf16_decode(const uint16_t[::1] h, float[::1] out, int num_threads=1):
    cdef Py_ssize_t i, n = h.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = bf16_bits_to_f32(h[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = bf16_bits_to_f32(h[i])


def round_f16_f32(const float[::1] x, float[::1] out, int num_threads=1):
    """x rounded to the nearest fp16 value (RNE), returned as fp32."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = round_f16(x[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = round_f16(x[i])


def round_bf16_f32(const float[::1] x, float[::1] out, int num_threads=1):
    """x rounded to the nearest bf16 value (RNE), returned as fp32."""
    cdef Py_ssize_t i, n = x.shape[0]
    cdef int nt = _threads(n, num_threads)
    with nogil:
        if nt == 1:
            for i in range(n):
                out[i] = round_bf16(x[i])
        else:
            for i in prange(n, num_threads=nt, schedule="static"):
                out[i] = round_bf16(x[i])
