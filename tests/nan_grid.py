"""The NaN-contract grid (docs/precision.md, "NaN outputs"): small problems with NaN, Inf and subnormal inputs
over shapes x chips x cubeMathTypes x accumulation forms x dtypes, both operators.

Used by tests/test_nan_contract.py (every instruction set of this CPU, bit-identical outputs, canonical NaNs,
NaN positions from an independent float64 model) and, as a script, by tools/aarch64_test.sh to compare the
outputs' SHA-256 between architectures:

    python tests/nan_grid.py --digest FILE      # one line per case: its id and the SHA-256 of its outputs
"""
import hashlib
import itertools
import sys
import zlib
from typing import Dict, Iterator, NamedTuple, Optional, Tuple

import ml_dtypes
import numpy as np

import pyconvtbc as pc

BF16 = ml_dtypes.bfloat16
DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": BF16}
SOCS = ("ascend910b", "ascend950", "ascend910")
FORMS = ("cube", "cube_wide", "cube_rz", "sequential")
# (T_in, B, Cin, Cout, K, pad): narrow channels (Cin, Cout <= 8: the narrow kernels) with padding (the issue's
# shape), a tiny one without padding, and channels across vector panels (Cout > 32) with an odd Cin
SHAPES = ((9, 3, 5, 7, 3, 1), (6, 2, 3, 2, 2, 0), (7, 2, 12, 37, 3, 1))
VARIANTS = ("clean", "inf", "nan")   # no specials; +-Inf, zeros and subnormals (NaN made inside); NaN inputs too
# The compute format per (operand dtype, chip) and cubeMathType 0..3, None where the operator refuses the cell
# (SEMANTICS.md section 3, the table tests/reference.py's CUBE_TABLE also holds).
from reference import CUBE_TABLE  # noqa: E402

# The one NaN encoding of every output format (docs/precision.md, "NaN outputs").
CANONICAL_NAN = {"float32": 0x7FC00000, "float16": 0x7E00, "bfloat16": 0x7FC0, "hifloat8": 0x80,
                 "float8_e4m3fn": 0x7F}
# Input patterns: fp32 / fp16 / bf16 NaNs with payloads, signalling and negative ones; infinities; subnormals.
SPECIAL_BITS = {
    "float32": {"nan": [0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF812345, 0x7FC0BEEF, 0x7FFFFFFF],
                "inf": [0x7F800000, 0xFF800000, 0x00000001, 0x80000001, 0x007FFFFF, 0x00000000, 0x80000000]},
    "float16": {"nan": [0x7E00, 0xFE00, 0x7C01, 0xFC02, 0x7E03, 0x7FFF],
                "inf": [0x7C00, 0xFC00, 0x0001, 0x8001, 0x03FF, 0x0000, 0x8000]},
    "bfloat16": {"nan": [0x7FC0, 0xFFC0, 0x7F81, 0xFF82, 0x7FC3, 0x7FFF],
                 "inf": [0x7F80, 0xFF80, 0x0001, 0x8001, 0x007F, 0x0000, 0x8000]},
    "hifloat8": {"nan": [0x80], "inf": [0x6F, 0xEF, 0x00, 0x01, 0x81]},   # NaN, +-Inf, zero, denormals
}
UINT = {4: np.uint32, 2: np.uint16, 1: np.uint8}


class Case(NamedTuple):
    op: str                  # "backward" or "forward"
    dtype: str               # operands' dtype: float32, float16, bfloat16, hifloat8 (forward, ascend950)
    soc: str
    cube_math_type: int
    form: str
    shape: Tuple[int, ...]
    variant: str
    gw_dtype: Optional[str]  # backward only: None (weight's dtype), "hifloat8" or "float8_e4m3fn"

    @property
    def id(self) -> str:
        gw = f"-gw_{self.gw_dtype}" if self.gw_dtype else ""
        return (f"{self.op}-{self.dtype}{gw}-{self.soc}-cmt{self.cube_math_type}-{self.form}-"
                f"{'x'.join(map(str, self.shape))}-{self.variant}")

    def compute(self) -> str:
        """The compute format ('FP32', 'HF32', 'FP16', 'BF16'; 'HIF8' for HiFloat8 operands)."""
        if self.dtype == "hifloat8":
            return "HIF8"
        return CUBE_TABLE[(self.dtype, self.soc)][self.cube_math_type]


def cases() -> Iterator[Case]:
    """Every case of the grid, in a fixed order."""
    for op, dtype, soc, cmt in itertools.product(("backward", "forward"), DTYPES, SOCS, range(4)):
        if CUBE_TABLE.get((dtype, soc), (None,) * 4)[cmt] is None:
            continue
        for form, shape, variant in itertools.product(FORMS, SHAPES, VARIANTS):
            yield Case(op, dtype, soc, cmt, form, shape, variant, None)
    # 8-bit gradWeight (NaN: HiFloat8 0x80, E4M3FN S.1111.111) from fp32 operands
    for gw, soc, form, shape, variant in itertools.product(("hifloat8", "float8_e4m3fn"), ("ascend910b", "ascend950"),
                                                           FORMS, SHAPES, VARIANTS):
        yield Case("backward", "float32", soc, 0, form, shape, variant, gw)
    # HiFloat8 operands and output (ascend950's forward)
    for form, shape, variant in itertools.product(FORMS, SHAPES, VARIANTS):
        yield Case("forward", "hifloat8", "ascend950", 0, form, shape, variant, None)


def _with_specials(rng, a: np.ndarray, dtype: str, variant: str) -> np.ndarray:
    """a with some elements replaced by the variant's special bit patterns (a fraction of the elements, at
    least one of each pattern where the array is large enough)."""
    if variant == "clean" or a.size == 0:
        return a
    pats = list(SPECIAL_BITS[dtype]["inf"])
    if variant == "nan":
        pats += SPECIAL_BITS[dtype]["nan"]
    flat = a.reshape(-1).view(UINT[a.dtype.itemsize])
    n = min(flat.size, max(2, flat.size // 6))
    idx = rng.choice(flat.size, n, replace=False)
    flat[idx] = np.array(pats, np.uint64)[np.arange(n) % len(pats)].astype(flat.dtype)
    return a


def _hif8_codes(rng, shape) -> np.ndarray:
    """HiFloat8 codes of moderate values (no Inf / NaN): the finite codes 0x01..0x5F with either sign."""
    codes = rng.integers(0x01, 0x60, size=shape).astype(np.uint8)
    return codes | (rng.integers(0, 2, size=shape).astype(np.uint8) << 7)


def operands(case: Case):
    """The case's arrays: (dy, x, w, b) for the backward, (x, w, b) for the forward."""
    T_in, B, Cin, Cout, K, pad = case.shape
    T_out = T_in + 2 * pad - K + 1
    rng = np.random.default_rng(zlib.crc32(f"{case.op}{case.dtype}{case.shape}{case.variant}".encode()))
    if case.dtype == "hifloat8":
        x = _with_specials(rng, _hif8_codes(rng, (T_in, B, Cin)), "hifloat8", case.variant)
        w = _with_specials(rng, _hif8_codes(rng, (K, Cin, Cout)), "hifloat8", case.variant)
        b = _with_specials(rng, rng.standard_normal(Cout).astype(np.float32), "float32", case.variant)
        return x, w, b
    dt = DTYPES[case.dtype]

    def mk(*shape):
        return _with_specials(rng, rng.standard_normal(shape).astype(np.float32).astype(dt), case.dtype,
                              case.variant)

    b = mk(Cout)
    if case.op == "forward":
        return mk(T_in, B, Cin), mk(K, Cin, Cout), b
    return mk(T_out, B, Cout), mk(T_in, B, Cin), mk(K, Cin, Cout), b


def run(case: Case, arrays, num_threads: int = 1) -> Dict[str, np.ndarray]:
    """The case's outputs by name, computed by the package with the current kernel hooks."""
    common = dict(cube_math_type=case.cube_math_type, soc=case.soc, accumulation=case.form, num_threads=num_threads)
    pad = case.shape[5]
    if case.op == "forward":
        out = pc.conv_tbc(*arrays, pad, hif8_inputs=case.dtype == "hifloat8", **common)
        return {"out": out}
    gi, gw, gb = pc.conv_tbc_backward(*arrays, pad, grad_weight_dtype=case.gw_dtype, deterministic=True, **common)
    return {"gradInput": gi, "gradWeight": gw, "gradBias": gb}


def output_format(case: Case, name: str) -> str:
    """The format name of an output (a CANONICAL_NAN key)."""
    if case.op == "forward":
        return case.dtype
    if name == "gradWeight" and case.gw_dtype:
        return case.gw_dtype
    return case.dtype


def digest(outputs: Dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(outputs):
        a = np.ascontiguousarray(outputs[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape}:".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def main(argv) -> int:
    if len(argv) != 3 or argv[1] != "--digest":
        print(__doc__, file=sys.stderr)
        return 2
    import platform
    n = 0
    with open(argv[2], "w", encoding="utf-8") as f:
        for case in cases():
            f.write(f"{case.id} {digest(run(case, operands(case)))}\n")
            n += 1
    print(f"nan_grid: {n} cases on {platform.machine()}, SHA-256 of each case's outputs in {argv[2]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
