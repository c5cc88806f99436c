"""Bit identity of both operators' outputs over a grid (shapes x chips x modes x forms x threads x ISAs x hooks).

A refactoring of the kernel room must not change one bit: record the SHA-256 of every case's outputs before it,
check them after it.

    python bench/bitid.py --write /tmp/bitid.json          # before
    python bench/bitid.py --check /tmp/bitid.json          # after: prints the differing cases, exit 1 if any

Cases a call refuses record the status code instead of a digest (so a change in what is refused shows too).
``--specials`` adds NaN / Inf / subnormal operands.  ``--quick`` runs a subset (every path, fewer repeats).
``--isa NAME[,NAME]`` runs only those instruction sets; a case a run records under an ISA that the recorded file
lacks is checked against that file's record of the same case under its other ISAs (all of which must agree), so
one ISA can be checked against another, e.g. under an emulator where each ISA runs in its own process:

    python bench/bitid.py --quick --isa portable --write /tmp/p.json
    python bench/bitid.py --quick --isa neon --check /tmp/p.json
"""
import argparse
import hashlib
import itertools
import json
import sys
import time

import ml_dtypes
import numpy as np

import pyconvtbc as pc
from pyconvtbc import _numpy_layer as NL
from pyconvtbc._kernels import _conv_tbc as K

BF16 = ml_dtypes.bfloat16
ISAS = K.isas()                 # every instruction set this CPU and build run, portable first

# (T_in, B, Cin, Cout, K, pad): pad > 0, B = 1, odd sizes, DY / W panels (> 32 channels), narrow channels
# (<= 8, B >= 8: the narrow kernels), ascend950 pieces (small outputs) and gradInput segments (K*Cout >= 32768),
# an Xp of several panels (Cin > 8), T_out not a multiple of the blocks
SHAPES = [
    (11, 3, 5, 7, 3, 1), (20, 1, 9, 20, 2, 0), (9, 4, 3, 37, 3, 2), (6, 2, 40, 3, 1, 0),
    (13, 2, 90, 130, 3, 1), (40, 16, 4, 4, 3, 1), (33, 9, 8, 2, 5, 2), (64, 8, 2, 8, 3, 1),
    (70, 3, 33, 65, 4, 3), (4, 2, 3, 16400, 2, 0), (200, 2, 16, 16, 3, 1), (17, 12, 8, 8, 1, 0),
]
# (input dtype, cubeMathType, gradWeight dtype)
MODES = [(np.float32, 0, None), (np.float32, 1, None), (np.float32, 2, None), (np.float32, 3, None),
         (np.float16, 0, None), (BF16, 0, None), (BF16, 3, None), (np.float32, 0, "hifloat8"),
         (np.float32, 0, "float8_e4m3fn")]
SOCS = ["ascend910b", "ascend950", "ascend910"]
FORMS = ["cube", "cube_wide", "cube_rz", "sequential"]
HOOKS = [{}, {"stream_rows": 37}, {"narrow": False}, {"gw_pairs": False}, {"bcast_fma": True},
         {"bcast_fma": False}, {"gi_rows": 4}]


def data(shape, dtype, seed, specials):
    T_in, B, Cin, Cout, K_, pad = shape
    T_out = T_in + 2 * pad - K_ + 1
    rng = np.random.default_rng(seed)
    arrs = [rng.standard_normal(s).astype(np.float32) for s in ((T_out, B, Cout), (T_in, B, Cin), (K_, Cin, Cout),
                                                                (Cout,))]
    if specials:
        for a in arrs[:3]:
            f = a.reshape(-1)
            n = max(1, f.size // 17)
            idx = rng.choice(f.size, size=min(f.size, 4 * n), replace=False)
            f[idx[:n]] = np.nan
            f[idx[n:2 * n]] = np.inf
            f[idx[2 * n:3 * n]] = -np.inf
            f[idx[3 * n:]] = 1e-40
    return [a.astype(dtype) for a in arrs]


def digest(arrays):
    h = hashlib.sha256()
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str(a.shape).encode() + str(a.dtype).encode())
        h.update(a.view(np.uint8).tobytes())
    return h.hexdigest()[:24]


def run_case(op, shape, mode, soc, form, threads, specials, seed):
    dtype, cmt, gwd = mode
    dy, x, w, b = data(shape, dtype, seed, specials)
    NL._plan_cache.clear()          # (hooks change workspace sizes: plan every call)
    try:
        if op == "bwd":
            out = pc.conv_tbc_backward(dy, x, w, b, shape[5], cube_math_type=cmt, grad_weight_dtype=gwd, soc=soc,
                                       deterministic=True, num_threads=threads, accumulation=form)
        else:
            if gwd is not None:
                return None
            out = (pc.conv_tbc(x, w, b, shape[5], cube_math_type=cmt, soc=soc, num_threads=threads,
                               accumulation=form),)
    except pc.AclnnError as e:
        return f"refused:{e.status}"
    return digest(out)


def cases(quick):
    for op, shape, mode, soc, form in itertools.product(("bwd", "fwd"), SHAPES, MODES, SOCS, FORMS):
        if quick and (SHAPES.index(shape) + MODES.index(mode) + SOCS.index(soc)) % 3:
            continue
        yield op, shape, mode, soc, form


def _case(key):
    """op|shape|mode|soc|form of a result key (without threads, ISA and hooks)."""
    return "|".join(key.split("|")[:5])


def _isa(key):
    return key.split("|")[6]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE")
    g.add_argument("--check", metavar="FILE")
    ap.add_argument("--specials", action="store_true", help="NaN / Inf / subnormal operands")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--shapes", help=f"comma-separated indices into SHAPES (0..{len(SHAPES) - 1}) to run "
                                     "(default: all)")
    ap.add_argument("--isa", help=f"comma-separated ISAs to run (default: all of {', '.join(ISAS)})")
    a = ap.parse_args(argv)
    threads = [int(t) for t in a.threads.split(",")]
    isas = ISAS
    if a.isa:
        isas = a.isa.split(",")
        bad = [i for i in isas if i not in ISAS]
        if bad:
            ap.error(f"--isa: {', '.join(bad)} not run here; expected some of {', '.join(ISAS)}")
    shapes = SHAPES if not a.shapes else [SHAPES[int(i)] for i in a.shapes.split(",")]
    planned = set()                                    # the cases this run was to make
    result = {}
    t0 = time.time()
    old = K.hooks.set(parallel_min=0)
    try:
        for n, (op, shape, mode, soc, form) in enumerate(cases(a.quick)):
            if shape not in shapes:
                continue                                        # (n, the data's seed, counts every case)
            hook_sets = HOOKS if (SHAPES.index(shape) % 4 == 0 or shape[2] <= 8) else HOOKS[:1]
            case = f"{op}|{shape}|{mode[0].__name__ if hasattr(mode[0], '__name__') else mode[0]}:{mode[1]}:" \
                   f"{mode[2]}|{soc}|{form}"
            planned.add(case)
            for isa, th, hk in itertools.product(isas, threads, hook_sets):
                if isa == "portable" and (th > 1 or hk):
                    continue                                    # the slow path: one run per case
                with K.hooks.override(isa=isa, **hk):
                    r = run_case(op, shape, mode, soc, form, th, a.specials, seed=n)
                if r is None:
                    continue
                result[f"{case}|t{th}|{isa}|{json.dumps(hk, sort_keys=True)}"] = r
    finally:
        K.hooks.set(**old)
    print(f"{len(result)} cases in {time.time() - t0:.0f} s (ISAs {', '.join(isas)})", file=sys.stderr)
    if a.write:
        with open(a.write, "w") as f:
            json.dump(result, f, indent=0, sort_keys=True)
        return 0
    with open(a.check) as f:
        base = json.load(f)
    by_case = {}                                       # (op, shape, mode, soc, form) -> the digests recorded
    for k, v in base.items():
        by_case.setdefault(_case(k), set()).add(v)
    base_isas = {_isa(k) for k in base}
    diff, cross = [], 0
    for k, r in result.items():
        if k in base:
            if base[k] != r:
                diff.append(k)
        elif _isa(k) not in base_isas and _case(k) in by_case:
            cross += 1                                 # an ISA the file lacks: against the case's other records
            if by_case[_case(k)] != {r}:
                diff.append(k)
    missing = [k for k in base if k not in result and _isa(k) in isas and _case(k) in planned]
    for k in diff[:50]:
        print("DIFFERS", k, base.get(k, sorted(by_case.get(_case(k), ()))), result[k])
    print(f"{len(base)} cases recorded, {len(result)} run ({cross} against another ISA's record), {len(diff)} differ, "
          f"{len(missing)} not run")
    return 1 if diff or missing else 0


if __name__ == "__main__":
    sys.exit(main())
