# The numeric codes of _codes.h for Cython (dtype codes, compute precisions, roundings, accumulation forms).
# _codes.h is the one place they are written; tests/test_generated.py checks them against the Python values.
cdef extern from "_codes.h" nogil:
    enum:
        CT_DT_F32
        CT_DT_F16
        CT_DT_BF16
        CT_DT_HIF8
        CT_DT_E4M3
    enum:
        CT_C_FP32
        CT_C_HF32
        CT_C_FP16
        CT_C_BF16
    enum:
        CT_HF32_HALF_AWAY
        CT_HF32_NEAREST_EVEN
    enum:
        CT_HIF8_TA
        CT_HIF8_HYBRID
    enum:
        CT_ACC_SEQ
        CT_ACC_CUBE
        CT_ACC_WIDE
        CT_ACC_RZ
