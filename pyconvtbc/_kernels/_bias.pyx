# cython: language_level=3
"""gradBias in the order of CANN's ReduceSum (C in ``_conv_bias.h``; the order: docs/precision.md, "gradBias:
ReduceSum's order").  One entry point, ``reduce_sum``: grad_output by address and byte strides, the order's
geometry (``pyconvtbc._gradbias.Geometry``), and the output by address and dtype code."""
from libc.stdint cimport int64_t, uintptr_t, uint16_t, uint32_t
from libc.string cimport memcpy
from libc.stdlib cimport malloc, free

from ._fpround cimport f32_to_f16_bits, f32_to_bf16_bits
from ._codes cimport CT_DT_F32, CT_DT_F16, CT_DT_BF16

cdef extern from "_conv_bias.h" nogil:
    ctypedef struct cb_args:
        const char *base
        int64_t s0, s1, s2
        int dt
        int64_t T, B, C
        int64_t tile_rows, tiles_per_group, a_tile, a_tile2, align
    int cb_reduce_sum(const cb_args *a, float *out)

_DTYPES = (CT_DT_F32, CT_DT_F16, CT_DT_BF16)


def reduce_sum(dy, shape, geometry, out):
    """gradBias of grad_output ``dy`` = (address, byte stride 0, 1, 2, dtype code), ``shape`` = (T_out, B,
    Cout), ``geometry`` = (tile_rows, tiles_per_group, a_tile, a_tile2, align); writes Cout values to ``out`` =
    (address, dtype code): the fp32 sums, rounded to nearest even when the dtype is fp16 or bf16."""
    cdef cb_args a
    cdef float *acc
    cdef int64_t c, C
    cdef int rc, odt
    cdef uintptr_t dst
    cdef float v, qnan
    cdef uint32_t qnan_bits = 0x7FC00000
    if len(dy) != 5 or len(shape) != 3 or len(geometry) != 5 or len(out) != 2:
        raise ValueError("reduce_sum takes dy (address, s0, s1, s2, dtype), shape (T_out, B, Cout), "
                         "geometry (5 ints) and out (address, dtype)")
    if int(dy[4]) not in _DTYPES or int(out[1]) not in _DTYPES:
        raise ValueError(f"reduce_sum: dtype codes {dy[4]}, {out[1]}; expected FLOAT, FLOAT16 or BF16 codes")
    if any(int(g) < 1 for g in geometry) or any(int(s) < 0 for s in shape):
        raise ValueError(f"reduce_sum: geometry {tuple(geometry)} / shape {tuple(shape)} out of range")
    a.base = <const char *><uintptr_t>int(dy[0])
    a.s0, a.s1, a.s2, a.dt = int(dy[1]), int(dy[2]), int(dy[3]), int(dy[4])
    a.T, a.B, a.C = int(shape[0]), int(shape[1]), int(shape[2])
    a.tile_rows, a.tiles_per_group, a.a_tile, a.a_tile2, a.align = (int(g) for g in geometry)
    C = a.C
    if C == 0:
        return
    acc = <float *>malloc(sizeof(float) * C)
    if acc == NULL:
        raise MemoryError("reduce_sum: no memory for the sums")
    try:
        with nogil:
            rc = cb_reduce_sum(&a, acc)
        if rc != 0:
            raise MemoryError("reduce_sum: no memory for the tiles")
        dst, odt = <uintptr_t>int(out[0]), int(out[1])
        memcpy(&qnan, &qnan_bits, 4)
        with nogil:
            for c in range(C):
                v = acc[c]
                if v != v:          # the outputs' one NaN (docs/precision.md, "NaN outputs")
                    v = qnan
                if odt == CT_DT_F32:
                    (<float *>dst)[c] = v
                elif odt == CT_DT_F16:
                    (<uint16_t *>dst)[c] = f32_to_f16_bits(v)
                else:
                    (<uint16_t *>dst)[c] = f32_to_bf16_bits(v)
    finally:
        free(acc)
