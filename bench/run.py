"""Benchmark: pyconvtbc.conv_tbc_backward against torch.ops.aten.conv_tbc_backward.

    python bench/run.py                  # the full matrix (about 6 minutes on 2 quiet cores)
    python bench/run.py --quick          # a few cases, fewer repetitions
    python bench/run.py -k small -k t2   # only cases whose name contains every filter
    python bench/run.py --md out.md      # also write the table as Markdown
    python bench/run.py --progress | tee log   # progress as plain lines on stderr even when it is not a terminal

Per case: shape, dtype, cube math type, threads, pyconvtbc ms, torch ms (same thread count), torch/pyconvtbc
(how many times faster pyconvtbc is), GFLOP/s (4*T_out*B*Cin*Cout*K per call), % of the machine's float32 GEMM
rate (numpy `@` on 2048x2048 with the same thread count, measured in this run), peak memory of one call and the
workspace (also as a multiple of the fp32 bytes of self + input + weight).

Method: every peer runs in its own long-lived worker process (two thread pools in one process distort both):
one for pyconvtbc, one for torch, and a fresh process for each numpy GEMM measurement.  A pass times every case
on each peer in turn (the peer order alternates between passes); each timing is `--reps` calls after one warm-up
call; the reported time is the median over all passes and repetitions.  Between two peers the harness pauses so
that the other peer's spinning OpenMP threads have gone to sleep.  Torch has no HF32 / USE_FP16 mode: those rows
compare against torch's float32 time on the same inputs.  Peak memory is traced (tracemalloc) over the first
call in a fresh process: the workspace plus the outputs plus any temporaries.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _cases import MODE_NAMES, Case, all_cases  # noqa: E402

PAUSE_S = 0.05  # between peers: let the idle peer's OpenMP threads stop spinning


# --------------------------------------------------------------------------------------------------------
# workers
# --------------------------------------------------------------------------------------------------------
def _inputs(case, np):
    import ml_dtypes
    dt = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}[case.dtype]
    T_in, B, Cin, Cout, K, pad = case.shape
    rng = np.random.default_rng(0)
    mk = lambda *s: rng.standard_normal(s, dtype=np.float32).astype(dt)  # noqa: E731
    return mk(case.T_out, B, Cout), mk(T_in, B, Cin), mk(K, Cin, Cout), mk(Cout)


def _case(d):
    return Case(d["group"], tuple(d["shape"]), d["dtype"], d["mode"], d["threads"])


def _timed(call, reps):
    """One warm-up call (wakes thread pools), then ``reps`` timed calls: the list of seconds."""
    call()
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        call()
        times.append(time.perf_counter() - t0)
    return times


def _interleaved(calls, reps):
    """Variants timed side by side: ``calls`` is a list of (name, call); one warm-up call each, then ``reps``
    rounds of one timed call of each variant (the order reversed every other round).  Returns {name: best
    seconds}.  On a shared machine whose speed drifts over seconds, the variants then see the same drift, so
    ratios between them are steadier than between blocks of calls timed one variant after the other."""
    for _, call in calls:
        call()
    best = {name: float("inf") for name, _ in calls}
    for r in range(reps):
        for name, call in (calls if r % 2 == 0 else calls[::-1]):
            t0 = time.perf_counter()
            call()
            best[name] = min(best[name], time.perf_counter() - t0)
    return best


def paired_ratio(results, num, den):
    """The median over passes of results[num][p] / results[den][p]: each pass's two times were taken close together
    (interleaved calls, or the peer's right after ours), so each pass's ratio sees one state of the machine."""
    return statistics.median(a / b for a, b in zip(results[num], results[den]))


def worker_pyconvtbc():
    import numpy as np
    import pyconvtbc
    from pyconvtbc._kernels import _conv_tbc

    fn = pyconvtbc.conv_tbc_backward
    cache = {}
    for line in sys.stdin:
        req = json.loads(line)
        case = _case(req["case"])
        key = (case.shape, case.dtype)
        if key not in cache:
            cache.clear()
            cache[key] = _inputs(case, np)
        dy, x, w, b = cache[key]
        kw = dict(cube_math_type=case.mode, num_threads=case.threads)
        times = _timed(lambda: fn(dy, x, w, b, case.shape[5], **kw), req["reps"])
        print(json.dumps({"times": times, "isa": _conv_tbc.isa()}), flush=True)


def worker_torch():
    import numpy as np
    import torch

    cache = {}
    for line in sys.stdin:
        req = json.loads(line)
        case = _case(req["case"])
        key = (case.shape, case.dtype)
        if key not in cache:
            cache.clear()
            arrs = _inputs(case, np)
            tdt = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}[case.dtype]
            cache[key] = [torch.from_numpy(np.asarray(a, np.float32)).to(tdt) for a in arrs]
        dy, x, w, b = cache[key]
        torch.set_num_threads(case.threads)
        op = torch.ops.aten.conv_tbc_backward
        times = _timed(lambda: op(dy, x, w, b, case.shape[5]), req["reps"])
        print(json.dumps({"times": times, "version": torch.__version__}), flush=True)


def worker_peak():
    """One case, fresh process: traced peak of the first call, and the kernel workspace size."""
    import tracemalloc

    import numpy as np
    import pyconvtbc
    from pyconvtbc._kernels import _conv_tbc

    case = _case(json.loads(sys.argv[-1]))
    dy, x, w, b = _inputs(case, np)
    tracemalloc.start()
    pyconvtbc.conv_tbc_backward(dy, x, w, b, case.shape[5], cube_math_type=case.mode, num_threads=case.threads)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    code = {"float32": 0, "float16": 1, "bfloat16": 27}[case.dtype]
    compute = {0: {0: 0, 1: 2, 27: 3}[code], 2: 2, 3: 1 if code == 0 else {1: 2, 27: 3}[code]}.get(case.mode, 0)
    from pyconvtbc.profiles import get_profile, get_emulation_options, accumulation_mode
    mode = (compute, 11, 0, 0, False) + accumulation_mode(get_profile(), compute, get_emulation_options())
    ws = _conv_tbc.workspace_size(case.shape, mode, (code,) * 6, case.threads)   # the default (cube) plan's
    print(json.dumps({"peak": peak, "workspace": ws}), flush=True)


def worker_sgemm():
    import numpy as np
    n = 2048
    a = np.random.default_rng(0).standard_normal((n, n), dtype=np.float32)
    b = a.T.copy()
    for _ in range(2):
        a @ b
    times = []
    for _ in range(int(sys.argv[-1])):
        t0 = time.perf_counter()
        a @ b
        times.append(time.perf_counter() - t0)
    print(json.dumps({"gflops": 2 * n ** 3 / statistics.median(times) / 1e9}), flush=True)


# --------------------------------------------------------------------------------------------------------
# orchestration
# --------------------------------------------------------------------------------------------------------
def spawn(script, role, env=None):
    """A worker process: ``script --worker role``, one JSON request per line in, one JSON answer per line out."""
    return subprocess.Popen([sys.executable, os.path.abspath(script), "--worker", role], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True, env=env)


def ask(proc, req):
    """Send one request to a worker and read its answer."""
    proc.stdin.write(json.dumps(req) + "\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    if not line:
        raise RuntimeError("benchmark worker died")
    return json.loads(line)


def alternate(script, role, cases, passes, reps, extra=None):
    """The passes of a comparison script: ``script --worker role`` times pyconvtbc's variants (a JSON dict name ->
    seconds per request) and, when torch is installed, ``script --worker torch`` times torch's call; per pass and
    case, ours then torch's, with a pause between (a torch worker answering without "times" names its columns
    itself).  Returns ({case name: {column: [seconds per pass]}}, whether torch ran).  extra: more request fields
    for our worker."""
    ours, theirs = spawn(script, role), None
    try:
        import torch  # noqa: F401
        theirs = spawn(script, "torch")
    except ImportError:
        pass
    results = {c.name: {} for c in cases}
    for p in range(passes):
        for c in cases:
            d = c.__dict__
            for k, v in ask(ours, dict(extra or {}, case=d, reps=reps, **{"pass": p})).items():
                results[c.name].setdefault(k, []).append(v)
            time.sleep(PAUSE_S)
            if theirs is not None:
                ans = ask(theirs, {"case": d, "reps": reps})
                # {"times": [...]}: the column "torch" (its best); else the worker names its own columns
                for k, v in ({"torch": min(ans["times"])} if "times" in ans else ans).items():
                    results[c.name].setdefault(k, []).append(v)
                time.sleep(PAUSE_S)
    for w in (ours, theirs):
        if w is not None:
            w.stdin.close()
            w.wait()
    return results, theirs is not None


class Peer:
    def __init__(self, kind, env):
        self.p = spawn(__file__, kind, env)

    def time(self, case, reps):
        return ask(self.p, {"case": case.__dict__, "reps": reps})

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def _env(blas_threads):
    env = dict(os.environ)
    for v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        env[v] = str(blas_threads)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), env.get("PYTHONPATH", "")])
    return env


def sgemm(threads, reps):
    env = _env(threads)
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "sgemm", str(reps)],
                         capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)["gflops"]


def peak(case):
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "peak", json.dumps(case.__dict__)],
                         capture_output=True, text=True, env=_env(1), check=True)
    return json.loads(out.stdout)


def machine():
    info = {"python": sys.version.split()[0], "cpus": os.cpu_count()}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    try:
        import numpy
        info["numpy"] = numpy.__version__
    except ImportError:
        pass
    return info


def fmt_table(rows, markdown=False):
    hdr = ["case", "shape (T,B,Cin,Cout,K,pad)", "dtype", "mode", "thr", "pyconvtbc ms", "torch ms", "torch/ours",
           "GFLOP/s", "% SGEMM", "peak MB", "ws MB", "ws/ops"]
    out = []
    for r in rows:
        c = r["case"]
        out.append([c.group, ",".join(map(str, c.shape)), c.dtype, MODE_NAMES[c.mode], str(c.threads),
                    f"{r['ours_ms']:.3f}", f"{r['torch_ms']:.3f}" if r["torch_ms"] else "-",
                    f"{r['ratio']:.2f}x" if r["ratio"] else "-", f"{r['gflops']:.1f}", f"{r['pct_sgemm']:.0f}%",
                    f"{r['peak'] / 2**20:.1f}" if r.get("peak") is not None else "-",
                    f"{r['workspace'] / 2**20:.2f}" if r.get("workspace") is not None else "-",
                    f"{r['ws_ratio']:.2f}" if r.get("ws_ratio") is not None else "-"])
    if markdown:
        lines = ["| " + " | ".join(hdr) + " |", "|" + "|".join("---" for _ in hdr) + "|"]
        lines += ["| " + " | ".join(row) + " |" for row in out]
        return "\n".join(lines)
    widths = [max(len(h), *(len(row[i]) for row in out)) if out else len(h) for i, h in enumerate(hdr)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(hdr, widths))]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths)) for row in out]
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--quick", action="store_true", help="a few cases, fewer repetitions")
    ap.add_argument("-k", action="append", default=[], help="only cases whose name contains this (repeatable)")
    ap.add_argument("--passes", type=int, default=None, help="alternating passes (default 3, quick 2)")
    ap.add_argument("--reps", type=int, default=None, help="timed calls per case per pass (default: by size)")
    ap.add_argument("--threads", default="1,2", help="thread counts, comma separated")
    ap.add_argument("--no-torch", action="store_true", help="time pyconvtbc only")
    ap.add_argument("--no-peak", action="store_true", help="skip the peak-memory processes")
    ap.add_argument("--md", help="write the table (and the machine line) as Markdown to this file")
    ap.add_argument("--json", help="write the raw results to this file")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    ap.add_argument("--progress", dest="progress", action="store_const", const=True, default="auto",
                    help="always show progress on stderr: a bar on a terminal, else plain lines (default: a bar when "
                         "stderr is a terminal, nothing otherwise)")
    ap.add_argument("--no-progress", dest="progress", action="store_const", const=False, help="never show progress")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    args, rest = ap.parse_known_args(argv)
    if args.worker:
        {"pyconvtbc": worker_pyconvtbc, "torch": worker_torch, "peak": worker_peak,
         "sgemm": worker_sgemm}[args.worker]()
        return 0

    threads = tuple(int(t) for t in args.threads.split(","))
    cases = [c for c in all_cases(threads, args.quick) if all(f in c.name for f in args.k)]
    if args.list:
        print("\n".join(c.name for c in cases))
        return 0
    if not cases:
        print("no case matches", args.k, file=sys.stderr)
        return 1
    passes = args.passes or (2 if args.quick else 3)
    have_torch = not args.no_torch
    if have_torch:
        try:
            import importlib.util
            have_torch = importlib.util.find_spec("torch") is not None
        except Exception:
            have_torch = False
        if not have_torch:
            print("torch is not installed: timing pyconvtbc only", file=sys.stderr)

    def reps_for(case):
        if args.reps:
            return args.reps
        per_call = case.flops / 50e9 + 2e-4        # a rough guess of the call time
        n = int(max(3, min(200, 0.4 / per_call)))
        return max(2, n // 3) if args.quick else n

    env = _env(1)
    ours = Peer("pyconvtbc", env)
    theirs = Peer("torch", env) if have_torch else None
    samples = {c: {"ours": [], "torch": []} for c in cases}
    gemm = {t: [] for t in threads}
    isa = tver = None
    from pyconvtbc._console import Progress
    bar = Progress(passes * len(cases), "bench", args.progress)
    try:
        for p in range(passes):
            for t in threads:
                gemm[t].append(sgemm(t, 3 if args.quick else 5))
            for i, c in enumerate(cases):
                order = [("ours", ours), ("torch", theirs)] if (p + i) % 2 == 0 else [("torch", theirs), ("ours", ours)]
                for name, peer in order:
                    if peer is None:
                        continue
                    res = peer.time(c, reps_for(c))
                    samples[c][name] += res["times"]
                    isa = res.get("isa", isa)
                    tver = res.get("version", tver)
                    time.sleep(PAUSE_S)
                bar.update(1, f"pass {p + 1}/{passes}: {c.name}")
    finally:
        bar.close()
        ours.close()
        if theirs:
            theirs.close()

    rows = []
    for c in cases:
        o = statistics.median(samples[c]["ours"])
        tt = statistics.median(samples[c]["torch"]) if samples[c]["torch"] else None
        g = statistics.median(gemm[c.threads])
        r = {"case": c, "ours_ms": o * 1e3, "torch_ms": tt * 1e3 if tt else None, "ratio": tt / o if tt else None,
             "gflops": c.flops / o / 1e9, "pct_sgemm": 100 * c.flops / o / 1e9 / g, "sgemm": g}
        if not args.no_peak:
            pk = peak(c)
            r["peak"], r["workspace"] = pk["peak"], pk["workspace"]
            r["ws_ratio"] = pk["workspace"] / c.fp32_operand_bytes
        rows.append(r)

    mach = machine()
    head = (f"machine: {mach.get('cpu', '?')}, {mach['cpus']} CPUs; python {mach['python']}, numpy "
            f"{mach.get('numpy', '?')}, torch {tver or '-'}; pyconvtbc kernels: {isa}; numpy SGEMM 2048^3: "
            + ", ".join(f"{t} thread{'s' if t > 1 else ''} {statistics.median(gemm[t]):.1f} GFLOP/s" for t in threads)
            + f"; {passes} passes, medians")
    print(head)
    print(fmt_table(rows))
    if args.md:
        with open(args.md, "w") as f:
            f.write(head + "\n\n" + fmt_table(rows, markdown=True) + "\n")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": mach, "head": head, "rows": [{**r, "case": r["case"].__dict__} for r in rows]},
                      f, indent=1)
    return 0


if __name__ == "__main__":
    from pyconvtbc._console import quiet_broken_pipe
    sys.exit(quiet_broken_pipe(main))
