# Scalar codecs shared by every kernel (docs/developer.md, "Scalar codecs"; docs/semantics.md, sections 4-5).
# All are ``cdef inline ... noexcept nogil`` over the C static inline helpers of _fpround.h (branch-light
# integer rounding; its 8-bit tables are generated into _fptables.h by tools/gen_tables.py).  Rounding rules
# and limits: docs/precision.md.  The numeric codes (rounding modes, compute precisions): _codes.pxd.
from libc.stdint cimport uint8_t, uint16_t

cdef extern from "_fpround.h":
    float pct_round_hf32(float x, int n, int rounding) noexcept nogil
    uint16_t pct_f32_to_f16_bits(float x) noexcept nogil
    float pct_f16_bits_to_f32(uint16_t h) noexcept nogil
    uint16_t pct_f32_to_bf16_bits(float x) noexcept nogil
    float pct_bf16_bits_to_f32(uint16_t h) noexcept nogil
    uint8_t pct_f32_to_hif8(float x, int rounding, int saturate) noexcept nogil
    uint8_t pct_f64_to_hif8(double x, int rounding, int saturate) noexcept nogil
    float pct_hif8_to_f32(uint8_t code) noexcept nogil
    uint8_t pct_f32_to_e4m3fn(float x, int saturate) noexcept nogil
    float pct_e4m3fn_to_f32(uint8_t code) noexcept nogil


cdef inline float round_hf32(float x, int mantissa_bits, int rounding) noexcept nogil:
    """Keep fp32's exponent and ``mantissa_bits`` mantissa bits (HF32_HALF_AWAY / HF32_NEAREST_EVEN)."""
    return pct_round_hf32(x, mantissa_bits, rounding)

cdef inline uint16_t f32_to_f16_bits(float x) noexcept nogil:
    return pct_f32_to_f16_bits(x)

cdef inline float f16_bits_to_f32(uint16_t h) noexcept nogil:
    return pct_f16_bits_to_f32(h)

cdef inline uint16_t f32_to_bf16_bits(float x) noexcept nogil:
    return pct_f32_to_bf16_bits(x)

cdef inline float bf16_bits_to_f32(uint16_t h) noexcept nogil:
    return pct_bf16_bits_to_f32(h)

cdef inline float round_f16(float x) noexcept nogil:
    return pct_f16_bits_to_f32(pct_f32_to_f16_bits(x))

cdef inline float round_bf16(float x) noexcept nogil:
    return pct_bf16_bits_to_f32(pct_f32_to_bf16_bits(x))

cdef inline uint8_t f32_to_hif8(float x, int rounding, bint saturate) noexcept nogil:
    return pct_f32_to_hif8(x, rounding, saturate)

cdef inline uint8_t f64_to_hif8(double x, int rounding, bint saturate) noexcept nogil:
    return pct_f64_to_hif8(x, rounding, saturate)

cdef inline float hif8_to_f32(uint8_t code) noexcept nogil:
    return pct_hif8_to_f32(code)

cdef inline uint8_t f32_to_e4m3fn(float x, bint saturate) noexcept nogil:
    return pct_f32_to_e4m3fn(x, saturate)

cdef inline float e4m3fn_to_f32(uint8_t code) noexcept nogil:
    return pct_e4m3fn_to_f32(code)
