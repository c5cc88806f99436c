"""Every entry of each vector ISA's micro-kernel table against the portable table, bit for bit (tests/ukr_check.c).

The operator tests reach the kernels through the drivers' tilings only; this drives each table entry directly on
random shapes (tails of every width, row counts past one tile, blocks cut by panel edges) and on operands with NaN,
infinities, signed zeros, subnormals and huge values, and compares whole output buffers, so a write outside a
tile shows too.  The codecs must agree on every bit; the arithmetic on every bit but the sign and payload of a
NaN (x86 and ARM choose those by their own rules; the operators write one canonical NaN), which the program
counts apart.  Built with the C compiler that builds the package.
"""
import os
import shlex
import shutil
import subprocess
import sysconfig

import pytest

from pyconvtbc._kernels import _conv_tbc as K

HERE = os.path.dirname(os.path.abspath(__file__))
KERNELS = os.path.join(os.path.dirname(HERE), "pyconvtbc", "_kernels")
CODES = {"avx2": 1, "avx512": 2, "neon": 3, "amx": 4, "amx_standin": 5}      # CT_ISA_* of _ukr.h
VECTOR_ISAS = [i for i in K.isas() if i != "portable"]


def _compiler():
    cc = shlex.split(sysconfig.get_config_var("CC") or "cc")
    return cc if shutil.which(cc[0]) else None


@pytest.fixture(scope="module")
def ukr_check(tmp_path_factory):
    cc = _compiler()
    if cc is None or not os.path.isdir(KERNELS):
        pytest.skip("no C compiler, or no kernel sources beside the tests")
    srcs = sorted(os.path.join(KERNELS, f) for f in os.listdir(KERNELS) if f.startswith("_ukr_") and f.endswith(".c"))
    exe = str(tmp_path_factory.mktemp("ukr") / "ukr_check")
    # the package's flags (setup.py, BASE_COMPILE_ARGS): no contraction of a*b + c into an FMA, no fast math
    cmd = cc + ["-O3", "-fno-strict-aliasing", "-fno-math-errno", "-std=gnu11", "-fno-fast-math",
                "-fno-unsafe-math-optimizations", "-ffp-contract=off", "-I", KERNELS,
                os.path.join(HERE, "ukr_check.c"), *srcs, "-lm", "-o", exe]
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    return exe


@pytest.mark.skipif(not VECTOR_ISAS, reason="only the portable table runs here")
@pytest.mark.parametrize("isa", VECTOR_ISAS)
def test_table_matches_portable(ukr_check, isa):
    r = subprocess.run([ukr_check, str(CODES[isa]), "600", "20261206"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    # every entry was exercised: gi_seq, gw_seq, gwc, gic_rows (cube and wide), the codecs, gb, the narrow kernels
    names = {ln.split(isa + ":")[0].strip() for ln in lines}
    assert {"gi_seq", "gw_seq", "gwc cube", "gwc wide/rz", "gic_rows cube", "gic_rows wide/rz", "decode_row",
            "round_row", "store_row", "canon_nan", "gb_partials", "nar_transpose", "gwn", "gin"} <= names, r.stdout
    assert all(" 0 differ" in ln for ln in lines if not ln.startswith("tile steps")), r.stdout
    if isa.startswith("amx"):            # the AMX tables: the tile steps ran, and so did the guard's fallback
        tiles = next(ln for ln in lines if ln.startswith("tile steps"))
        steps, falls = [int(w) for w in tiles.replace(",", " ").split() if w.isdigit()]
        assert steps > 100 and falls > 100, tiles
