"""Benchmark cases of issue 4: shapes (T_in, B, Cin, Cout, K, pad), dtypes, cube math types, thread counts."""
from dataclasses import dataclass

FAIRSEQ = [(64, 64, 256, 512, 3, 1), (128, 32, 512, 1024, 3, 1), (256, 16, 512, 512, 5, 2),
           (4096, 8, 256, 256, 3, 1), (256, 16, 256, 256, 25, 12)]
SMALL = [(512, 32, C, C, 3, 1) for C in (2, 8, 32)]
EXAMPLE = [(5, 1, 2, 2, 1, 0)]          # the operator document's example: per-call overhead

MODE_NAMES = {0: "KEEP", 1: "ALLOW_FP32_DOWN", 2: "USE_FP16", 3: "USE_HF32"}


@dataclass(frozen=True)
class Case:
    group: str          # fairseq / small / example / mode
    shape: tuple        # (T_in, B, Cin, Cout, K, pad)
    dtype: str          # float32 / float16 / bfloat16
    mode: int           # cubeMathType
    threads: int

    @property
    def T_out(self):
        T_in, _, _, _, K, pad = self.shape
        return T_in + 2 * pad - K + 1

    @property
    def flops(self):
        _, B, Cin, Cout, K, _ = self.shape
        return 4 * self.T_out * B * Cin * Cout * K

    @property
    def fp32_operand_bytes(self):
        T_in, B, Cin, Cout, K, _ = self.shape
        return 4 * (self.T_out * B * Cout + T_in * B * Cin + K * Cin * Cout)

    @property
    def name(self):
        s = "x".join(str(v) for v in self.shape)
        return f"{self.group}:{s}:{self.dtype}:{MODE_NAMES[self.mode]}:t{self.threads}"


def all_cases(threads=(1, 2), quick=False):
    """The full matrix, or with quick=True a few representative cases."""
    if quick:
        return [Case("fairseq", (64, 64, 256, 512, 3, 1), "float32", 0, t) for t in threads] + [
            Case("fairseq", (64, 64, 256, 512, 3, 1), "bfloat16", 0, max(threads)),
            Case("mode", (64, 64, 256, 512, 3, 1), "float32", 3, max(threads)),
            Case("mode", (64, 64, 256, 512, 3, 1), "float32", 2, max(threads)),
            Case("small", (512, 32, 8, 8, 3, 1), "float32", 0, max(threads)),
            Case("example", EXAMPLE[0], "float32", 0, max(threads)),
        ]
    cases = []
    for shape in FAIRSEQ:
        for dt in ("float32", "float16", "bfloat16"):
            for t in threads:
                cases.append(Case("fairseq", shape, dt, 0, t))
        for mode in (3, 2):                    # USE_HF32, USE_FP16 on float32 inputs
            for t in threads:
                cases.append(Case("mode", shape, "float32", mode, t))
    for shape in SMALL:
        for dt in ("float32", "float16", "bfloat16"):
            for t in threads:
                cases.append(Case("small", shape, dt, 0, t))
    for dt in ("float32", "float16", "bfloat16"):
        for t in threads:
            cases.append(Case("example", EXAMPLE[0], dt, 0, t))
    return cases
