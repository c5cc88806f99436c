/* _codes.h: the numeric codes the Python layers hand to the kernels, named once for all the C and Cython.
 *
 * Used by _fpround.h, _conv_gemm.h, _conv_cube.h and (through _codes.pxd) _conv_tbc.pyx and _codecs.pyx.
 * Each value equals its Python counterpart; tests/test_generated.py checks every one of them:
 *   CT_DT_*     aclDataType codes (pyconvtbc.enums.aclDataType) of the formats the kernels read or write
 *   CT_C_*      compute precisions C (pyconvtbc.profiles.COMPUTE_*)
 *   CT_HF32_*   HF32 rounding (pyconvtbc.profiles.HF32_ROUNDINGS)
 *   CT_HIF8_*   HiFloat8 rounding (pyconvtbc.profiles.HIF8_ROUNDINGS)
 *   CT_ACC_*    accumulation forms (pyconvtbc.profiles.ACCUMULATIONS; the mode tuple's entry 5)
 */
#ifndef PYCONVTBC_CODES_H
#define PYCONVTBC_CODES_H

enum { CT_DT_F32 = 0, CT_DT_F16 = 1, CT_DT_BF16 = 27, CT_DT_HIF8 = 34, CT_DT_E4M3 = 36 };
enum { CT_C_FP32 = 0, CT_C_HF32 = 1, CT_C_FP16 = 2, CT_C_BF16 = 3 };
enum { CT_HF32_HALF_AWAY = 0, CT_HF32_NEAREST_EVEN = 1 };
enum { CT_HIF8_TA = 0, CT_HIF8_HYBRID = 1 };
enum { CT_ACC_SEQ = 0, CT_ACC_CUBE = 1, CT_ACC_WIDE = 2, CT_ACC_RZ = 3 };

#endif /* PYCONVTBC_CODES_H */
