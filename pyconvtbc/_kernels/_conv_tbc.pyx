# cython: language_level=3
"""The aclnnConvTbcBackward kernels: pack/round operands into the workspace, gi/gw/gb, output casts.

Entry points (docs/developer.md, "Kernel entry points"): ``workspace_size`` and ``run``.  The work itself is
C: the drivers (``_conv_gemm.h`` and the headers it includes, ``_conv_fwd.h``) over the micro-kernel table of the
instruction set chosen at run time (``_ukr.h``: one ``_ukr_<isa>.c`` each); this
module checks the arguments, lays out the workspace and schedules the tasks over OpenMP threads (through
Cython's prange; the shim ``_openmp.pxd`` is the only other place OpenMP is named).

Determinism: every output element is reduced by one thread in one fixed order, whatever the thread count,
so results are bitwise identical for any ``num_threads`` in both modes (docs/performance.md, "Determinism").
"""
import contextlib

from cython.parallel cimport prange, parallel, threadid
cimport numpy as cnp
from ._openmp cimport pyconvtbc_omp_barrier
from libc.stdint cimport int64_t, uintptr_t, uint8_t, uint16_t
from libc.string cimport memset
from libc.stddef cimport size_t
from posix.time cimport clock_gettime, timespec, CLOCK_MONOTONIC
from cpython.exc cimport PyErr_Fetch, PyErr_Restore
from cpython.ref cimport PyObject

cdef extern from "Python.h":
    int _check_py_signals "PyErr_CheckSignals" ()     # without Cython's exception propagation: we keep it

cdef extern from "<pthread.h>" nogil:
    ctypedef unsigned long pthread_t
    pthread_t pthread_self()
    int pthread_equal(pthread_t a, pthread_t b)

# The scalar codecs (C in _fpround.h, which the kernels include too) and the numeric codes (_codes.h).
from ._fpround cimport round_hf32, f32_to_f16_bits, f32_to_bf16_bits
from ._codes cimport (CT_DT_F32, CT_DT_F16, CT_DT_BF16, CT_DT_HIF8, CT_DT_E4M3, CT_C_FP32, CT_C_FP16, CT_C_BF16,
                      CT_HIF8_TA, CT_ACC_SEQ, CT_ACC_CUBE, CT_ACC_WIDE, CT_ACC_RZ)

cdef extern from "_ukr.h" nogil:
    ctypedef struct ct_ukr:
        const char *name
        void (*decode_row)(const char *src, int64_t stride, int dt, int64_t n, float *out)
        void (*round_row)(float *v, int64_t n, int compute, int hbits, int hrnd)
        void (*store_row)(const float *acc, int64_t n, char *dst, int dt, int pre, int hif8_rnd, int sat)
    ctypedef struct ct_ukr_opts:
        int gw_pairs, gi_rows, bcast, amx_pack
    int CT_ISA_PORTABLE, CT_ISA_AVX2, CT_ISA_AVX512, CT_ISA_NEON, CT_ISA_AMX, CT_ISA_AMX_SW, CT_ISA_N
    int ct_isa_runs(int isa)
    int ct_isa_supported()
    int ct_ukr_select(ct_ukr *U, int isa, const ct_ukr_opts *o)
    const ct_ukr *ct_ukr_for(const ct_ukr *U, int compute)
    const char *ct_amx_why(int hw)
    int ct_amx_check(int hw, char *why, size_t nwhy)
    void ct_amx_set_fault(int fault)
    void ct_amx_counts(int hw, int reset, int64_t *steps, int64_t *falls)
    int ct_amx_tile_dot(int hw, float *C, const float *a, const float *b, int nb)

cdef extern from "_conv_gemm.h" nogil:
    ctypedef struct ct_src:
        const char *base
        int64_t s0, s1, s2
        int dt
    ctypedef struct ct_tasks:
        int64_t n_pack, n_comp, n_pack_x, n_pack_w, n_gi, n_gw, n_post, n_gi_rb, n_gi_jb, nthreads_max
    ctypedef struct ct_wspace:
        int64_t off_dyp, off_xp, off_wp, off_gbp, off_cbuf, cbuf_stride, n_cbuf, total_floats, off_pcb, off_gwc
        int64_t dy_ps
        float *DYp
        float *Xp
        float *Wp
        float *gbp
        float *cbuf
        float *pcb
        float *gwc
    ctypedef struct ct_sums:
        int acc, layout
        int64_t k0, gw_pieces, gw_seg, gi_seg
        const int64_t *perm
    ctypedef struct ct_stream:
        int win
        int64_t n_w1, w1_rb, n_w2, win_rows
    ctypedef struct ct_plan:
        int64_t T_in, B, Cin, Cout, K, pad, T_out, RI, RO
        int compute, hbits, hrnd, hif8_rnd, saturate
        ct_src dy, x, w
        char *gi
        char *gw
        char *gb
        int gi_dt, gw_dt, gb_dt
        const ct_ukr *U
        ct_tasks tk
        ct_wspace ws
        ct_sums sm
        ct_stream st
        int (*poll)(void *) noexcept nogil
        void *poll_ctx
    void ct_plan_direct(ct_plan *P)
    int ct_dt_size(int dt)
    ctypedef struct ct_geom:
        int64_t piece_co, piece_red, pieces, gw_segment, gi_segment
    int ct_plan_dtypes(const int *dts)
    int ct_plan_init(ct_plan *P, int64_t T_in, int64_t B, int64_t Cin, int64_t Cout, int64_t K, int64_t pad,
                     int64_t nthreads, int gi_buf, int gw_buf, int acc, int64_t k0, int layout, const ct_geom *g,
                     const ct_ukr *U)
    void ct_pack_task(const ct_plan *P, int64_t task)
    void ct_comp_task(const ct_plan *P, int64_t task, float *cb)
    void ct_post_task(const ct_plan *P, int64_t task)
    void ct_finish_gb(const ct_plan *P)
    int CT_ALIGN
    int64_t ct_blk[6]
    int64_t ct_win_force
    int ct_stop(const ct_plan *P)
    int64_t ct_win1_begin(ct_plan *P, int64_t w)
    void ct_win1_pack(const ct_plan *P, int64_t w, int64_t task)
    int64_t ct_win2_begin(ct_plan *P, int64_t w)
    void ct_win2_pack(const ct_plan *P, int64_t task)
    void ct_win_zero(const ct_plan *P)
    int64_t ct_canon_ntasks(const ct_plan *P)
    void ct_canon_task(const ct_plan *P, int64_t task)
    int ct_narrow_on


cdef extern from "_conv_fwd.h" nogil:
    ctypedef struct ct_fwd_tasks:
        int64_t n_pack, n_comp, cbuf_stride, n_cbuf, nthreads_max, off_xp, off_wp, off_cbuf, total_floats
        int64_t n_rb, n_jb, n_pack_x
        float *Xp
        float *Wp
        float *cbuf
    ctypedef struct ct_fwd:
        int64_t T_in, B, Cin, Cout, K, pad, T_out, RI, RO
        int compute, hbits, hrnd, hif8_rnd, saturate, acc, pre
        const ct_ukr *U
        ct_src x, w
        const float *bias
        char *out
        int out_dt
        ct_fwd_tasks tk
        int win
        int64_t n_w, w_rb
        int (*poll)(void *) noexcept nogil
        void *poll_ctx
    int ct_fwd_stop(const ct_fwd *F)
    int ct_fwd_init(ct_fwd *F, int64_t T_in, int64_t B, int64_t Cin, int64_t Cout, int64_t K, int64_t pad,
                    int64_t nthreads, int acc, int64_t k0, int out_dt, int pre, const ct_ukr *U)
    void ct_fwd_bind(ct_fwd *F)
    void ct_fwd_pack_task(const ct_fwd *F, int64_t task)
    void ct_fwd_task(const ct_fwd *F, int64_t task, float *cb)
    int64_t ct_fwd_win_begin(ct_fwd *F, int64_t w)
    int64_t ct_fwd_canon_ntasks(const ct_fwd *F)
    void ct_fwd_canon_task(const ct_fwd *F, int64_t task)
    void ct_fwd_win_pack(const ct_fwd *F, int64_t w, int64_t task)


cnp.import_array()

cdef int _isa_max = ct_isa_supported()
_isa_ok = [bool(ct_isa_runs(i)) for i in range(CT_ISA_N)]      # the ISAs this CPU and build run

# The micro-kernel table of each ISA this CPU runs (_ukr.h), rebuilt when a variant knob changes (hooks.set);
# a call takes the one of _knobs.isa.
cdef ct_ukr _tables[6]
if CT_ISA_N > 6:                                   # (the table above has one slot per ISA code)
    raise ImportError(f"pyconvtbc: _tables holds 6 ISAs, the kernels define {CT_ISA_N}")
cdef ct_ukr_opts _ukr_opts = ct_ukr_opts(gw_pairs=1, gi_rows=0, bcast=0, amx_pack=0)


cdef int _build_tables() except -1:
    cdef int i
    for i in range(CT_ISA_N):
        if _isa_ok[i] and ct_ukr_select(&_tables[i], i, &_ukr_opts) != 0:
            raise ImportError(f"pyconvtbc: no micro-kernels for ISA code {i} in this build")
    return 0


_build_tables()

ISA_NAMES = {CT_ISA_PORTABLE: "portable", CT_ISA_AVX2: "avx2", CT_ISA_AVX512: "avx512", CT_ISA_NEON: "neon",
             CT_ISA_AMX: "amx", CT_ISA_AMX_SW: "amx_standin"}
_ISA_CODES = {name: code for code, name in ISA_NAMES.items()}

# Below this much work (lane flops: 2*T_out*B*K*(Cin16*Cout + Cin*Cout16), channels rounded up to the 16
# vector lanes, plus the packing passes) a call runs in the calling thread: waking sleeping OpenMP workers
# costs more than it saves there (bench/threshold.py; docs/performance.md, "Serial threshold").
PARALLEL_MIN_FLOPS = 10_000_000

_IN_DTYPES = (CT_DT_F32, CT_DT_F16, CT_DT_BF16)
_GW_DTYPES = _IN_DTYPES + (CT_DT_HIF8, CT_DT_E4M3)


def isa():
    """The instruction set the kernels use now: 'amx', 'avx512', 'avx2', 'neon', 'portable' or 'amx_standin'
    ('amx' and 'amx_standin' serve BF16 compute and hand every other call to their base table)."""
    return ISA_NAMES[_knobs.isa]


def isa_supported():
    """The best instruction set this CPU supports."""
    return ISA_NAMES[_isa_max]


def isas():
    """Every instruction set this CPU and build run (the hook ``isa`` takes any of them), portable first."""
    return [ISA_NAMES[i] for i in range(CT_ISA_N) if _isa_ok[i]]


def amx_status():
    """Whether the AMX tile path ('amx') and its software stand-in ('amx_standin') are on, and if not, why:
    ``{"amx": bool, "amx_why": str, "amx_standin": bool, "amx_standin_why": str}``.  The tile path needs
    AMX-BF16, Linux's permission for the tile state and a passed start-up self-test (_ukr_amx.c)."""
    return {"amx": _isa_ok[CT_ISA_AMX], "amx_why": ct_amx_why(1).decode(),
            "amx_standin": _isa_ok[CT_ISA_AMX_SW], "amx_standin_why": ct_amx_why(0).decode()}


def amx_selftest(hw):
    """Run the AMX self-test now on the tiles (hw true) or the stand-in: ``(passed, reason)``."""
    cdef char why[200]
    why[0] = 0
    ok = ct_amx_check(1 if hw else 0, why, 200)
    return bool(ok), why.decode()


def amx_counts(hw=False, reset=True):
    """``(tile steps, guard-failing blocks)`` made by the tiles (hw) or the stand-in since the last reset: how much
    of the BF16 cube work took the tile path, and how many blocks the guard sent to the FMA kernels."""
    cdef int64_t steps = 0, falls = 0
    ct_amx_counts(1 if hw else 0, 1 if reset else 0, &steps, &falls)
    return int(steps), int(falls)


def _amx_tile_dot(hw, c, a, b):
    """Test hook, no guard: c (16, 32) float32 after the tile steps of blocks a (nb, 16, 16) and b (nb, 16, 32)
    (nb <= 4; operands bf16 values as float32) on the tiles (hw) or the stand-in; returns the new c."""
    import numpy as np
    ca = np.array(c, np.float32, order="C")
    aa = np.ascontiguousarray(a, np.float32)
    ba = np.ascontiguousarray(b, np.float32)
    nb = aa.shape[0] if aa.ndim == 3 else 0
    if ca.shape != (16, 32) or aa.shape != (nb, 16, 16) or ba.shape != (nb, 16, 32) or not 1 <= nb <= 4:
        raise ValueError("c (16, 32), a (nb, 16, 16), b (nb, 16, 32), 1 <= nb <= 4 expected")
    cdef float[:, ::1] cc = ca
    cdef const float[:, :, ::1] av = aa
    cdef const float[:, :, ::1] bv = ba
    if ct_amx_tile_dot(1 if hw else 0, &cc[0, 0], &av[0, 0, 0], &bv[0, 0, 0], nb) != 0:
        raise ValueError("the AMX tiles are off here: " + ct_amx_why(1).decode())
    return ca


def _amx_fault(on):
    """Test hook: perturb one output bit of every AMX engine result (on) so that the self-test, run again, fails
    and turns the AMX paths off for the process; off restores them (the self-test runs again).  Returns isas()."""
    global _isa_max
    ct_amx_set_fault(1 if on else 0)
    for i in (CT_ISA_AMX, CT_ISA_AMX_SW):
        _isa_ok[i] = bool(ct_isa_runs(i))
    _isa_max = ct_isa_supported()
    if not _isa_ok[_knobs.isa]:
        _knobs.isa = _isa_max
    _build_tables()
    return isas()


# ---- test and profiling hooks ----------------------------------------------------------------------------
# Every knob that tests, bench/ and profiling turn lives behind ``hooks`` (nothing else writes them); a call
# reads them once, when it starts (``_run``).  They are process-wide and not thread safe: set them between
# calls, never while another thread runs the kernels.
#   isa           code path: one of isas() (None: the best this CPU has; 'amx_standin' is never the default)
#   parallel_min  work threshold below which a call runs serially (None: PARALLEL_MIN_FLOPS)
#   blocking      cache-blocking sizes (mci, nci, kci, mcw, ncw, kcw) of _conv_plan.h; a None entry keeps
#                 that size (None: the defaults).  kci changes gi's summation order (results stay correct,
#                 bits may change)
#   gw_pairs      the AVX-512 co-pair gw kernel for narrow channels (None: on); the same bits either way
#   gi_rows       rows per tile of the AVX2 cube gradInput / forward kernels, 4 or 6 (None: by CPU, 4 on AMD and
#                 6 elsewhere); the same bits either way
#   amx_vector_pack  the AMX tables' packing: None, AVX-512 where the CPU has it; False, the generic C; the
#                 same bits either way
#   bcast_fma     the AVX-512 cube kernels' broadcasts as each FMA's memory operand (True) or one shared
#                 vbroadcastss a row (False) (None: by CPU, True on AMD); the same bits either way
#   narrow        the narrow-channel "cube" kernels (_conv_narrow.h: Cin, Cout <= 8; the backward in ascend910b
#                 order, the forward on every chip) (None: on); the same bits either way; the workspace layout
#                 changes, so plan after setting it
#   phase_mask    run only some phases: 1 pack, 2 gi, 4 gw (None: 7 = all); results are then garbage
#   stream_rows   streamed DY (_conv_stream.h): windows of about this many rows whatever DY's size (0: never
#                 stream; None: stream when the packed DY would exceed 64 MiB).  The same bits either way;
#                 the workspace size changes, so plan after setting it
cdef struct _knobs_t:
    int isa
    double par_min
    int phase_mask

cdef _knobs_t _knobs = _knobs_t(isa=_isa_max, par_min=PARALLEL_MIN_FLOPS, phase_mask=7)
_BLOCKING_DEFAULT = tuple(ct_blk[i] for i in range(6))


def _check_blocking(int i, v):
    if v < 1 or (i in (1, 2, 4) and v % 32) or (i == 3 and v % 8) or (i == 0 and v % 42):
        raise ValueError(f"bad blocking value {v}")
    return v


class _Hooks:
    """The kernels' test and profiling knobs (see above): ``get()``, ``set(**knobs)``, ``override(**knobs)``."""

    names = ("isa", "parallel_min", "blocking", "gw_pairs", "gi_rows", "phase_mask", "stream_rows", "narrow",
             "bcast_fma", "amx_vector_pack")

    def get(self):
        """The current value of every knob, as a dict."""
        return {"isa": ISA_NAMES[_knobs.isa], "parallel_min": _knobs.par_min,
                "blocking": tuple(ct_blk[i] for i in range(6)), "gw_pairs": bool(_ukr_opts.gw_pairs),
                "gi_rows": None if _ukr_opts.gi_rows == 0 else _ukr_opts.gi_rows,
                "phase_mask": _knobs.phase_mask,
                "stream_rows": None if ct_win_force == 0 else max(0, ct_win_force),
                "narrow": bool(ct_narrow_on),
                "bcast_fma": None if _ukr_opts.bcast == 0 else _ukr_opts.bcast > 0,
                "amx_vector_pack": None if _ukr_opts.amx_pack == 0 else False}

    def set(self, **knobs):
        """Set the given knobs (None: the default); returns their old values, as a dict for ``set(**old)``.
        Every value is checked before any is set (TypeError / ValueError / KeyError)."""
        unknown = set(knobs) - set(self.names)
        if unknown:
            raise TypeError(f"unknown kernel hook(s) {sorted(unknown)}; expected {self.names}")
        v = knobs.get("isa")
        isa_code = _isa_max if v is None else _ISA_CODES[v]
        if not _isa_ok[isa_code]:
            raise ValueError(f"this CPU does not support {v}")
        v = knobs.get("parallel_min")
        par_min = PARALLEL_MIN_FLOPS if v is None else float(v)
        v = knobs.get("blocking")
        blk = _BLOCKING_DEFAULT if v is None else tuple(
            ct_blk[i] if b is None else _check_blocking(i, b) for i, b in enumerate(v))
        if len(blk) != 6:
            raise ValueError(f"blocking must have 6 entries (mci, nci, kci, mcw, ncw, kcw), got {v!r}")
        v = knobs.get("gw_pairs")
        pairs = 1 if v is None or v else 0
        v = knobs.get("gi_rows")
        if v is not None and (isinstance(v, bool) or v not in (4, 6)):
            raise ValueError(f"gi_rows must be None, 4 or 6, got {v!r}")
        gi_rows = 0 if v is None else int(v)
        v = knobs.get("phase_mask")
        mask = 7 if v is None else int(v)
        v = knobs.get("stream_rows")
        if v is not None and (isinstance(v, bool) or int(v) != v or v < 0):
            raise ValueError(f"stream_rows must be None or an int >= 0, got {v!r}")
        force = 0 if v is None else (-1 if v == 0 else int(v))
        v = knobs.get("narrow")
        narrow = 1 if v is None or v else 0
        v = knobs.get("bcast_fma")
        if v is not None and not isinstance(v, bool):
            raise ValueError(f"bcast_fma must be None, True or False, got {v!r}")
        bcast = 0 if v is None else (1 if v else -1)
        v = knobs.get("amx_vector_pack")
        if v not in (None, False):
            raise ValueError(f"amx_vector_pack must be None (by CPU) or False (the generic C), got {v!r}")
        amx_pack = 0 if v is None else -1
        old = {k: v for k, v in self.get().items() if k in knobs}
        global ct_win_force, ct_narrow_on
        if "bcast_fma" in knobs:
            _ukr_opts.bcast = bcast
        if "amx_vector_pack" in knobs:
            _ukr_opts.amx_pack = amx_pack
        if "narrow" in knobs:
            ct_narrow_on = narrow
        if "stream_rows" in knobs:
            ct_win_force = force
        if "isa" in knobs:
            _knobs.isa = isa_code
        if "parallel_min" in knobs:
            _knobs.par_min = par_min
        if "blocking" in knobs:
            for i in range(6):
                ct_blk[i] = blk[i]
        if "gw_pairs" in knobs:
            _ukr_opts.gw_pairs = pairs
        if "gi_rows" in knobs:
            _ukr_opts.gi_rows = gi_rows
        if "phase_mask" in knobs:
            _knobs.phase_mask = mask
        _build_tables()
        return old

    @contextlib.contextmanager
    def override(self, **knobs):
        """``with hooks.override(isa="portable"): ...``: the knobs set for the block, restored after it."""
        old = self.set(**knobs)
        try:
            yield self
        finally:
            self.set(**old)

    def last_stamps(self):
        """Seconds spent in (pack, gw, gi, gb) by the last serial call (gw + gi in parallel ones)."""
        return tuple(_stamps[i + 1] - _stamps[i] for i in range(4))


hooks = _Hooks()


# The hooks' older one-knob spellings (tests and bench/ use them).
def _set_isa(name):
    """Force a code path ('avx512', 'avx2', 'portable', or None for the best)."""
    hooks.set(isa=name)


def _set_parallel_min(flops=None):
    """The work threshold below which a call runs serially (None: the default). Returns the old one."""
    return hooks.set(parallel_min=flops)["parallel_min"]


def _set_blocking(mci=None, nci=None, kci=None, mcw=None, ncw=None, kcw=None):
    """Cache-blocking sizes (None: unchanged).  Returns the old ones."""
    return hooks.set(blocking=(mci, nci, kci, mcw, ncw, kcw))["blocking"]


def _set_gw_pairs(on=True):
    """The AVX-512 co-pair gw kernel for narrow channels on or off. Returns the old setting."""
    return hooks.set(gw_pairs=bool(on))["gw_pairs"]


def _set_phase_mask(mask=7):
    """Run only some phases (1 pack, 2 gi, 4 gw). Returns the old mask."""
    return hooks.set(phase_mask=mask)["phase_mask"]


def _last_stamps():
    return hooks.last_stamps()


# Accumulation forms (docs/precision.md, "Accumulation model"): the mode tuple's entry 5.
ACC_SEQUENTIAL, ACC_CUBE, ACC_CUBE_WIDE, ACC_CUBE_RZ = CT_ACC_SEQ, CT_ACC_CUBE, CT_ACC_WIDE, CT_ACC_RZ


# The options a call runs with: ``pyconvtbc._handoff.Mode``, read here by field name (the one place the kernels
# take them from Python).  A plain tuple is the older positional form, still accepted for direct callers (tests):
# (compute, hf32_bits, hf32_rounding, hif8_rounding, saturate[, acc, k0, X]) with X the backward's layout or the
# forward's pre-cast rounding.  Layout 1's pieces and segments then come from the SoC profile of that layout.
cdef struct _mode_t:
    int compute, hbits, hrnd, hif8_rnd, saturate, acc, layout, pre
    int64_t k0
    ct_geom geom


def _profile_geometry(int layout):
    from pyconvtbc.profiles import PROFILES
    for p in PROFILES.values():
        if p.sum_layout == layout and p.sum_geometry is not None:
            return tuple(p.sum_geometry)
    return ()


cdef int _read_mode(_mode_t *m, mode, bint forward) except -1:
    memset(m, 0, sizeof(_mode_t))
    if hasattr(mode, "_fields"):                  # the typed record
        base = (mode.compute, mode.hf32_mantissa_bits, mode.hf32_rounding, mode.hif8_rounding, mode.saturate)
        acc, k0, layout, geometry, pre = mode.accumulation, mode.k0, mode.layout, mode.geometry, mode.pre
    elif len(mode) == 5 and not forward:
        base, acc, k0, layout, geometry, pre = tuple(mode), CT_ACC_SEQ, 1, 0, (), CT_C_FP32
    elif len(mode) == 8:
        base, acc, k0 = tuple(mode[:5]), mode[5], mode[6]
        layout, pre = (0, mode[7]) if forward else (mode[7], CT_C_FP32)
        geometry = () if forward else _profile_geometry(int(layout))
    else:
        raise ValueError(f"mode must be a Mode record, or (compute, hf32_bits, hf32_rounding, hif8_rounding, "
                         f"saturate{', acc, k0, pre' if forward else '[, acc, k0, layout]'}), got {mode!r}")
    m.compute, m.hbits, m.hrnd, m.hif8_rnd = [int(v) for v in base[:4]]
    m.saturate = 1 if base[4] else 0
    m.acc, m.k0, m.layout, m.pre = int(acc), int(k0), int(layout), int(pre)
    if m.compute < CT_C_FP32 or m.compute > CT_C_BF16:
        raise ValueError(f"unknown compute precision {m.compute}")
    if not CT_ACC_SEQ <= m.acc <= CT_ACC_RZ or not 1 <= m.k0 <= 64 or m.layout not in (0, 1):
        raise ValueError(f"bad accumulation mode (acc, k0, layout) = {(m.acc, m.k0, m.layout)!r}")
    if m.layout == 1 and m.acc != CT_ACC_SEQ:
        if len(geometry) != 5 or min(int(v) for v in geometry) < 1:
            raise ValueError(f"layout 1 needs its geometry (piece_co, piece_red, pieces, gw_segment, gi_segment), "
                             f"got {geometry!r}")
        m.geom.piece_co, m.geom.piece_red, m.geom.pieces, m.geom.gw_segment, m.geom.gi_segment = [
            int(v) for v in geometry]
    return 0


class UnsupportedDtype(ValueError):
    """A dtype code the kernels have no row codec for (the plan refuses it)."""


_DT_ROLES = ("dy", "x", "w", "gi", "gw", "gb")


cdef int _plan(ct_plan *P, shape, Py_ssize_t nthreads, int compute, dtypes, int acc=CT_ACC_SEQ,
               int k0=1, int layout=0, const ct_geom *geom=NULL) except -1:
    if len(shape) != 6:
        raise ValueError(f"shape must be (T_in, B, Cin, Cout, K, pad), got {shape!r}")
    if len(dtypes) != 6:
        raise ValueError(f"dtypes must be (dy, x, w, gi, gw, gb) codes, got {dtypes!r}")
    cdef int dts[6]
    cdef int one[6]
    for i in range(6):
        dts[i] = int(dtypes[i])
    if ct_plan_dtypes(dts) != 0:                 # the kernels' rule (_conv_plan.h); name each refused code
        bad = []
        for i in range(6):
            for j in range(6):
                one[j] = dts[i] if j == i else CT_DT_F32
            if ct_plan_dtypes(one) != 0:
                bad.append(f"{_DT_ROLES[i]}: unsupported dtype code {dts[i]}")
        raise UnsupportedDtype("; ".join(bad))
    cdef int gi_dt = dts[3], gw_dt = dts[4]
    T_in, B, Cin, Cout, K, pad = [int(v) for v in shape]
    # fp32 outputs accumulate in place; other dtypes (and gi rounded to FP16/BF16 first) need fp32 tiles
    cdef int gi_buf = gi_dt != CT_DT_F32 or compute == CT_C_FP16 or compute == CT_C_BF16
    cdef int gw_buf = gw_dt != CT_DT_F32
    if ct_plan_init(P, T_in, B, Cin, Cout, K, pad, max(1, nthreads), gi_buf, gw_buf, acc, k0, layout, geom,
                    ct_ukr_for(&_tables[_knobs.isa], compute)) != 0:
        raise ValueError(f"invalid or too large shape {tuple(shape)!r}")
    return 0


cdef int _plan_sizes(ct_plan *P, shape, compute, dtypes, num_threads) except -1:
    """The plan of ``workspace_size`` / ``stream_windows``: compute is a compute precision (sequential form) or
    a whole mode tuple (see ``run``); dtypes the six (dy, x, w, gi, gw, gb) codes."""
    if len(dtypes) != 6:
        raise ValueError(f"dtypes must be (dy, x, w, gi, gw, gb) codes, got {dtypes!r}")
    cdef _mode_t m
    if isinstance(compute, tuple):
        _read_mode(&m, compute, False)
        return _plan(P, shape, int(num_threads), m.compute, dtypes, m.acc, m.k0, m.layout, &m.geom)
    return _plan(P, shape, int(num_threads), int(compute), dtypes)


def workspace_size(shape, compute, dtypes, num_threads):
    """Bytes of workspace ``run`` needs for this problem (packed operands, gb partial sums, per-thread tiles,
    piece sums).  compute: the compute precision (sequential form) or a whole mode tuple (see ``run``)."""
    cdef ct_plan P
    _plan_sizes(&P, shape, compute, dtypes, num_threads)
    if P.ws.total_floats == 0:
        return 0
    return int(P.ws.total_floats) * 4 + CT_ALIGN   # + alignment slack


def stream_windows(shape, compute, dtypes, num_threads):
    """(pass-1 windows, pass-2 windows) when ``run`` streams DY for this problem (_conv_stream.h), else (0, 0).
    Arguments as for ``workspace_size``."""
    cdef ct_plan P
    _plan_sizes(&P, shape, compute, dtypes, num_threads)
    return (int(P.st.n_w1), int(P.st.n_w2)) if P.st.win else (0, 0)


cdef int _src(ct_src *s, op, str name, tuple allowed=_IN_DTYPES) except -1:
    if len(op) != 5:
        raise ValueError(f"{name} must be (address, bs0, bs1, bs2, dtype), got {op!r}")
    addr, s0, s1, s2, dt = [int(v) for v in op]
    if dt not in allowed:
        raise ValueError(f"{name}: unsupported dtype code {dt}")
    s.base = <const char *><uintptr_t>addr
    s.s0 = s0
    s.s1 = s1
    s.s2 = s2
    s.dt = dt
    return 0


cdef char *_out(op, str name, tuple allowed, int *dt, Py_ssize_t n) except? NULL:
    if len(op) != 2:
        raise ValueError(f"{name} must be (address, dtype), got {op!r}")
    addr, code = int(op[0]), int(op[1])
    if code not in allowed:
        raise ValueError(f"{name}: unsupported dtype code {code}")
    if n > 0 and addr == 0:
        raise ValueError(f"{name}: null address for a non-empty output")
    dt[0] = code
    return <char *><uintptr_t>addr


def run(dy, x, w, gi, gw, gb, shape, mode, ws_ptr, ws_size, num_threads, perm=None, cancel=None):
    """Compute gradInput, gradWeight, gradBias (docs/developer.md).  Releases the GIL for all the work.

    mode: (compute, hf32_bits, hf32_rounding, hif8_rounding, saturate) for the sequential form, or with
    (acc, k0, layout) appended for the accumulation model; perm: None or an int64 array, a permutation of
    range(B): the order of the per-item gradWeight chains (layout 0); cancel: see ``_run``.  A signal
    handler's exception (KeyboardInterrupt) stops the call within about POLL_S seconds and is raised.
    """
    cdef ct_plan P
    if len(gi) != 2 or len(gw) != 2:
        raise ValueError("gi and gw must be (address, dtype)")
    _plan_mode(&P, shape, mode, num_threads, tuple(t[len(t) - 1] if len(t) else -1 for t in (dy, x, w)) + (gi[1], gw[1], gb[1]))
    keep = _set_perm(&P, perm)
    _src(&P.dy, dy, "dy")
    _src(&P.x, x, "x")
    _src(&P.w, w, "w")
    P.gi = _out(gi, "gi", _IN_DTYPES, &P.gi_dt, P.RI * P.Cin)
    P.gw = _out(gw, "gw", _GW_DTYPES, &P.gw_dt, P.K * P.Cin * P.Cout)
    P.gb = _out(gb, "gb", _IN_DTYPES, &P.gb_dt, P.Cout)
    _run(&P, <uintptr_t>int(ws_ptr), int(ws_size), cancel)
    del keep


def run_arrays(cnp.ndarray dy not None, cnp.ndarray x not None, cnp.ndarray w not None, cnp.ndarray gi not None,
               cnp.ndarray gw not None, cnp.ndarray gb not None, tuple codes, tuple shape, mode,
               cnp.ndarray ws, num_threads, perm=None, cancel=None):
    """``run`` for NumPy arrays (the NumPy layer's per-call path): addresses and strides are read here, in C.

    codes: the aclDataType codes of (dy, x, w, gi, gw, gb); the arrays must have the planned shapes.  gi, gw,
    gb must be C-contiguous.  ws: a uint8 array (or None when the plan needs no workspace).  mode, perm: as
    for ``run``.
    """
    cdef ct_plan P
    _plan_mode(&P, shape, mode, num_threads, codes)
    keep = _set_perm(&P, perm)
    _src_array(&P.dy, dy, int(codes[0]), P.T_out, P.B, P.Cout, "dy")
    _src_array(&P.x, x, int(codes[1]), P.T_in, P.B, P.Cin, "x")
    _src_array(&P.w, w, int(codes[2]), P.K, P.Cin, P.Cout, "w")
    P.gi = _out_array(gi, int(codes[3]), _IN_DTYPES, &P.gi_dt, P.RI * P.Cin, "gi")
    P.gw = _out_array(gw, int(codes[4]), _GW_DTYPES, &P.gw_dt, P.K * P.Cin * P.Cout, "gw")
    P.gb = _out_array(gb, int(codes[5]), _IN_DTYPES, &P.gb_dt, P.Cout, "gb")
    if ws is None:
        _run(&P, 0, 0, cancel)
    else:
        _run(&P, <uintptr_t>cnp.PyArray_DATA(ws), cnp.PyArray_NBYTES(ws), cancel)
    del keep


cdef object _set_perm(ct_plan *P, perm):
    """Point P.sm.perm at perm's data (checked, in C: a permutation of range(B)); returns the object to keep alive.

    Called per call in non-deterministic mode, so it makes no NumPy temporaries: an int64 C-contiguous array
    (what the planner passes) is read in place; anything else is converted once."""
    P.sm.perm = NULL
    if perm is None:
        return None
    cdef const int64_t[::1] v
    try:
        v = perm
    except (TypeError, ValueError, BufferError):
        import numpy as np
        a = np.ascontiguousarray(perm, dtype=np.int64)
        if a.ndim != 1:
            raise ValueError(f"perm must be a permutation of range({P.B}), got {perm!r}")
        v = a
    cdef Py_ssize_t n = v.shape[0], i
    cdef int64_t e
    cdef bytearray seen
    cdef unsigned char *sp
    if n != P.B:
        raise ValueError(f"perm must be a permutation of range({P.B}), got {perm!r}")
    if n == 0:
        return None
    seen = bytearray(n)
    sp = seen
    for i in range(n):
        e = v[i]
        if e < 0 or e >= n or sp[e]:
            raise ValueError(f"perm must be a permutation of range({P.B}), got {perm!r}")
        sp[e] = 1
    P.sm.perm = &v[0]
    return v


cdef int _plan_mode(ct_plan *P, shape, mode, num_threads, dtypes) except -1:
    cdef Py_ssize_t nt = max(1, int(num_threads))
    cdef _mode_t m
    _read_mode(&m, mode, False)
    _plan(P, shape, nt, m.compute, dtypes, m.acc, m.k0, m.layout, &m.geom)
    P.compute = m.compute
    P.hbits = m.hbits
    P.hrnd = m.hrnd
    P.hif8_rnd = m.hif8_rnd
    P.saturate = m.saturate
    return 0


cdef int _src_array(ct_src *s, cnp.ndarray a, int dt, int64_t d0, int64_t d1, int64_t d2, str name,
                    tuple allowed=_IN_DTYPES) except -1:
    if dt not in allowed:
        raise ValueError(f"{name}: unsupported dtype code {dt}")
    cdef cnp.npy_intp *dims = cnp.PyArray_DIMS(a)
    if (cnp.PyArray_NDIM(a) != 3 or dims[0] != d0 or dims[1] != d1 or dims[2] != d2
            or cnp.PyArray_ITEMSIZE(a) != ct_dt_size(dt)):
        raise ValueError(f"{name}: array of shape {(<object>a).shape} and dtype {(<object>a).dtype} "
                         f"does not match the plan")
    cdef cnp.npy_intp *st = cnp.PyArray_STRIDES(a)
    s.base = <const char *>cnp.PyArray_DATA(a) if cnp.PyArray_SIZE(a) else NULL
    s.s0 = st[0]
    s.s1 = st[1]
    s.s2 = st[2]
    s.dt = dt
    return 0


cdef char *_out_array(cnp.ndarray a, int code, tuple allowed, int *dt, Py_ssize_t n, str name) except? NULL:
    if code not in allowed:
        raise ValueError(f"{name}: unsupported dtype code {code}")
    if (cnp.PyArray_SIZE(a) != n or not cnp.PyArray_IS_C_CONTIGUOUS(a)
            or cnp.PyArray_ITEMSIZE(a) != ct_dt_size(code)):
        raise ValueError(f"{name}: output array of shape {(<object>a).shape} and dtype {(<object>a).dtype} "
                         f"does not match the plan")
    dt[0] = code
    return <char *>cnp.PyArray_DATA(a) if n > 0 else NULL


# ---- interruption ----------------------------------------------------------------------------------------
# While the kernels run (GIL released), the calling thread polls for signals at task and row-chunk boundaries,
# at most every POLL_S seconds: a pending KeyboardInterrupt (or any exception a signal handler raises) stops
# every thread at its next boundary, and is raised when the call returns (outputs partly written).
POLL_S = 0.05
cdef double _poll_s = POLL_S

cdef struct _poll_ctx:
    pthread_t tid
    double last
    int cancel
    const int *flag          # a caller's cancel flag (nonzero: stop), or NULL
    PyObject *etype
    PyObject *evalue
    PyObject *etb


cdef inline double _now() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return ts.tv_sec + 1e-9 * ts.tv_nsec


cdef int _check_signals(_poll_ctx *c) noexcept with gil:
    if _check_py_signals() != 0:
        PyErr_Fetch(&c.etype, &c.evalue, &c.etb)
        c.cancel = 1
    return c.cancel


cdef int _poll(void *vctx) noexcept nogil:
    cdef _poll_ctx *c = <_poll_ctx *>vctx
    cdef double t
    if c.cancel:
        return 1
    if c.flag != NULL and (<volatile const int *>c.flag)[0] != 0:
        c.cancel = 1
        return 1
    if not pthread_equal(pthread_self(), c.tid):     # only the calling thread takes signals
        return 0
    t = _now()
    if t - c.last < _poll_s:
        return 0
    c.last = t
    return _check_signals(c)


class Cancelled(RuntimeError):
    """The call was stopped through its cancel flag (outputs partly written)."""


cdef int _run(ct_plan *P, uintptr_t base, int64_t size, cancel=None) except -1:
    """Lay the workspace out, then execute (GIL released).  P holds the sizes, mode, sources and outputs.
    cancel: None, or a writable int32 array of one element; setting it nonzero (from any thread) stops the
    call at the next task or row-chunk boundary, which then raises Cancelled."""
    cdef _knobs_t knobs = _knobs          # the hooks' settings, read once for the whole call
    P.U = ct_ukr_for(&_tables[knobs.isa], P.compute)
    cdef float *fb = _workspace_base(base, size, P.ws.total_floats)
    P.ws.DYp = fb + P.ws.off_dyp if (fb != NULL and P.ws.off_xp > P.ws.off_dyp) else NULL
    P.ws.Xp = fb + P.ws.off_xp if (fb != NULL and P.ws.off_wp > P.ws.off_xp) else NULL
    P.ws.Wp = fb + P.ws.off_wp if (fb != NULL and P.ws.off_gbp > P.ws.off_wp) else NULL
    P.ws.gbp = fb + P.ws.off_gbp if fb != NULL else NULL
    P.ws.cbuf = fb + P.ws.off_cbuf if fb != NULL else NULL
    P.ws.pcb = fb + P.ws.off_pcb if (fb != NULL and P.ws.off_gwc > P.ws.off_pcb) else NULL
    P.ws.gwc = fb + P.ws.off_gwc if (fb != NULL and P.st.win and P.ws.total_floats > P.ws.off_gwc) else NULL
    ct_plan_direct(P)                    # single-panel fp32 operands are read in place (no pack pass)
    # work in "lane flops": narrow channels leave vector lanes idle (gi runs along Cin, gw along Cout, 16 lanes),
    # so their time follows the padded counts, not the true flops; plus the packing passes
    cdef double ci16 = <double>(((P.Cin + 15) // 16) * 16)
    cdef double co16 = <double>(((P.Cout + 15) // 16) * 16)
    cdef double work = 2.0 * <double>P.RO * <double>P.K * (ci16 * P.Cout + P.Cin * co16)
    work += 8.0 * (<double>P.RO * P.Cout + <double>P.RI * P.Cin)
    cdef int threads = <int>P.tk.nthreads_max
    if work < knobs.par_min:
        threads = 1
    cdef _poll_ctx ctx
    keep = _poll_begin(&ctx, cancel)
    P.poll = _poll
    P.poll_ctx = &ctx
    with nogil:
        if P.st.win:
            _execute_streamed(P, threads)
        else:
            _execute(P, threads, knobs.phase_mask)
        _canon(P, NULL, threads)
    del keep
    return _poll_end(&ctx)


cdef void _execute(ct_plan *P, int threads, int phase_mask) noexcept nogil:
    cdef Py_ssize_t i
    cdef Py_ssize_t n_pack = P.tk.n_pack
    cdef Py_ssize_t n_comp = P.tk.n_comp          # compute tasks: gw ones [0, n_gw), then gi ones
    cdef Py_ssize_t c0 = 0
    cdef Py_ssize_t n_post = P.tk.n_post if phase_mask & 4 else 0
    if phase_mask != 7:                  # profiling only
        if not (phase_mask & 1):
            n_pack = 0
        if not (phase_mask & 4):
            c0 = P.tk.n_gw
        if not (phase_mask & 2):
            n_comp = P.tk.n_gw
    _stamp(0)
    if threads <= 1:
        for i in range(n_pack):
            ct_pack_task(P, i)
        _stamp(1)
        _stamp(2)
        for i in range(c0, n_comp):
            ct_comp_task(P, i, P.ws.cbuf)
            if i == P.tk.n_gw - 1:
                _stamp(2)
        for i in range(n_post):
            ct_post_task(P, i)
    else:
        with parallel(num_threads=threads):
            for i in prange(n_pack, schedule="dynamic"):
                ct_pack_task(P, i)
            pyconvtbc_omp_barrier()       # Cython ends a prange inside parallel() with "nowait"
            for i in prange(c0, n_comp, schedule="dynamic"):
                ct_comp_task(P, i, P.ws.cbuf + threadid() * P.ws.cbuf_stride)
            pyconvtbc_omp_barrier()
            for i in prange(n_post, schedule="static"):
                ct_post_task(P, i)
    _stamp(3)
    if P.Cout > 0:
        ct_finish_gb(P)
    _stamp(4)


cdef void _execute_streamed(ct_plan *P, int threads) noexcept nogil:
    """Streamed DY (_conv_stream.h): gb sums and the X / W packs, then gi window by window, then gw window by
    window, then the casts and gb.  The phase mask does not apply."""
    cdef Py_ssize_t i, a, z, n
    cdef int64_t w
    cdef float *dyw = P.ws.DYp
    _stamp(0)
    P.ws.DYp = NULL                         # step 0: DY's pack tasks make gb's partial sums only
    _tasks(P, 0, 0, P.tk.n_pack, threads)
    P.ws.DYp = dyw
    _stamp(1)
    for w in range(P.st.n_w1):               # step 1: gi, windows of t-major rows
        if ct_stop(P):
            break
        n = ct_win1_begin(P, w)
        _tasks(P, 1, w, n, threads)
        a = P.tk.n_gw + w * P.st.w1_rb * P.tk.n_gi_jb
        z = P.tk.n_gw + min(P.tk.n_gi_rb, (w + 1) * P.st.w1_rb) * P.tk.n_gi_jb
        _tasks_comp(P, a, z, threads)
    _stamp(2)
    ct_win_zero(P)                       # step 2: gw, windows in the chains' order
    for w in range(P.st.n_w2):
        if ct_stop(P):
            break
        n = ct_win2_begin(P, w)
        _tasks(P, 2, 0, n, threads)
        _tasks_comp(P, 0, P.tk.n_gw, threads)
    _stamp(3)
    _tasks(P, 3, 0, P.tk.n_post, threads)   # step 3: casts (and the pieces' trees), gb
    if P.Cout > 0:
        ct_finish_gb(P)
    _stamp(4)


cdef void _tasks(ct_plan *P, int kind, int64_t w, Py_ssize_t n, int threads) noexcept nogil:
    """Run n tasks of one kind (0 pack, 1 window pack of pass 1 window w, 2 of pass 2, 3 post)."""
    cdef Py_ssize_t i
    if threads <= 1 or n <= 1:
        for i in range(n):
            _task(P, kind, w, i)
    else:
        for i in prange(n, num_threads=threads, schedule="dynamic"):
            _task(P, kind, w, i)


cdef inline void _task(ct_plan *P, int kind, int64_t w, Py_ssize_t i) noexcept nogil:
    if kind == 0:
        ct_pack_task(P, i)
    elif kind == 1:
        ct_win1_pack(P, w, i)
    elif kind == 2:
        ct_win2_pack(P, i)
    else:
        ct_post_task(P, i)


cdef void _tasks_comp(ct_plan *P, Py_ssize_t a, Py_ssize_t z, int threads) noexcept nogil:
    cdef Py_ssize_t i
    if threads <= 1 or z - a <= 1:
        for i in range(a, z):
            ct_comp_task(P, i, P.ws.cbuf)
    else:
        for i in prange(a, z, num_threads=threads, schedule="dynamic"):
            ct_comp_task(P, i, P.ws.cbuf + threadid() * P.ws.cbuf_stride)



# ---- the forward operator aclnnConvTbc (_conv_fwd.h) -------------------------------------------------------
_FWD_OUT_DTYPES = _IN_DTYPES + (CT_DT_HIF8,)
_FWD_IN_DTYPES = _FWD_OUT_DTYPES     # HiFloat8 operands are decoded while they are packed (exact in fp32)


cdef int _fwd_plan(ct_fwd *F, shape, mode, num_threads, int out_dt) except -1:
    if len(shape) != 6:
        raise ValueError(f"shape must be (T_in, B, Cin, Cout, K, pad), got {shape!r}")
    cdef _mode_t m
    _read_mode(&m, mode, True)
    T_in, B, Cin, Cout, K, pad = [int(v) for v in shape]
    compute, hbits, hrnd, hif8_rnd, saturate, acc, k0, pre = (m.compute, m.hbits, m.hrnd, m.hif8_rnd, m.saturate,
                                                               m.acc, m.k0, m.pre)
    if out_dt not in _FWD_OUT_DTYPES:               # (the forward writes the operand formats only)
        raise UnsupportedDtype(f"out: unsupported dtype code {out_dt}")
    cdef int rc = ct_fwd_init(F, T_in, B, Cin, Cout, K, pad, max(1, int(num_threads)), acc, k0, out_dt, pre,
                              ct_ukr_for(&_tables[_knobs.isa], compute))
    if rc == -2:
        raise UnsupportedDtype(f"out: unsupported dtype code {out_dt}")
    if rc != 0:
        raise ValueError(f"invalid or too large forward problem: shape {tuple(shape)!r}, mode {mode!r}")
    F.compute = compute
    F.hbits = hbits
    F.hrnd = hrnd
    F.hif8_rnd = hif8_rnd
    F.saturate = 1 if saturate else 0
    return 0


def forward_workspace_size(shape, mode, int out_dt, num_threads):
    """Bytes of workspace ``run_forward`` needs (packed x and w, per-thread tiles)."""
    cdef ct_fwd F
    _fwd_plan(&F, shape, mode, num_threads, out_dt)
    return 0 if F.tk.total_floats == 0 else int(F.tk.total_floats) * 4 + CT_ALIGN


def run_forward(x, w, bias, out, shape, mode, ws_ptr, ws_size, num_threads, cancel=None):
    """The forward sums (docs/developer.md).  Releases the GIL for all the work.

    x, w: (address, bs0, bs1, bs2, dtype) of (T_in, B, Cin) and (K, Cin, Cout), dtype FLOAT, FLOAT16, BF16 or
    HIFLOAT8 (decoded exactly while packed); bias: the address of Cout fp32
    start values (C-contiguous), or 0 for none; out: (address, dtype) of a C-contiguous (T_out, B, Cout) array
    (FLOAT, FLOAT16, BF16 or HIFLOAT8).  mode: (compute, hf32_bits, hf32_rounding, hif8_rounding, saturate, acc,
    k0, pre), pre the rounding of the fp32 sums before the cast (0 none, 2 FP16, 3 BF16).  cancel: as ``run``.
    """
    cdef ct_fwd F
    _fwd_plan(&F, shape, mode, num_threads, int(out[1]))
    _src(&F.x, x, "x", _FWD_IN_DTYPES)
    _src(&F.w, w, "w", _FWD_IN_DTYPES)
    F.bias = <const float *><uintptr_t>int(bias)
    F.out = _out(out, "out", _FWD_OUT_DTYPES, &F.out_dt, F.RO * F.Cout)
    _fwd_execute(&F, <uintptr_t>int(ws_ptr), int(ws_size), cancel)


def run_forward_arrays(cnp.ndarray x not None, cnp.ndarray w not None, cnp.ndarray start not None,
                       cnp.ndarray out not None, int in_dt, int out_dt, tuple shape, mode, cnp.ndarray ws,
                       num_threads):
    """``run_forward`` for NumPy arrays (the NumPy layer's per-call path): addresses and strides are read here,
    in C.  x, w: arrays of the planned shapes, dtype code in_dt (any strides); start: the Cout fp32 start values
    (C-contiguous float32); out: a new C-contiguous array of dtype code out_dt; ws: a uint8 array (or None when
    the plan needs no workspace)."""
    cdef ct_fwd F
    _fwd_plan(&F, shape, mode, num_threads, out_dt)
    _src_array(&F.x, x, in_dt, F.T_in, F.B, F.Cin, "x", _FWD_IN_DTYPES)
    _src_array(&F.w, w, in_dt, F.K, F.Cin, F.Cout, "w", _FWD_IN_DTYPES)
    if (cnp.PyArray_TYPE(start) != cnp.NPY_FLOAT32 or not cnp.PyArray_IS_C_CONTIGUOUS(start)
            or cnp.PyArray_SIZE(start) != F.Cout):
        raise ValueError(f"start: {F.Cout} C-contiguous float32 values expected")
    F.bias = <const float *>cnp.PyArray_DATA(start) if F.Cout > 0 else NULL
    F.out = _out_array(out, out_dt, _FWD_OUT_DTYPES, &F.out_dt, F.RO * F.Cout, "out")
    if ws is None:
        _fwd_execute(&F, 0, 0, None)
    else:
        _fwd_execute(&F, <uintptr_t>cnp.PyArray_DATA(ws), cnp.PyArray_NBYTES(ws), None)


cdef int _fwd_execute(ct_fwd *F, uintptr_t ws_ptr, int64_t ws_size, cancel) except -1:
    """Lay the forward's workspace out, then execute (GIL released).  F holds the sizes, mode, sources and
    output."""
    cdef _knobs_t knobs = _knobs          # the hooks' settings, read once for the whole call
    F.U = ct_ukr_for(&_tables[knobs.isa], F.compute)
    cdef float *fb = _workspace_base(ws_ptr, ws_size, F.tk.total_floats)
    F.tk.Xp = fb + F.tk.off_xp if (fb != NULL and F.tk.off_wp > F.tk.off_xp) else NULL
    F.tk.Wp = fb + F.tk.off_wp if (fb != NULL and F.tk.off_cbuf > F.tk.off_wp) else NULL
    F.tk.cbuf = fb + F.tk.off_cbuf if (fb != NULL and F.tk.n_cbuf > 0) else NULL
    ct_fwd_bind(F)
    cdef double ci16 = <double>(((F.Cin + 15) // 16) * 16)
    cdef double work = 2.0 * <double>F.RO * <double>F.K * ci16 * <double>F.Cout + 8.0 * <double>F.RI * F.Cin
    cdef int threads = <int>F.tk.nthreads_max if work >= knobs.par_min else 1
    cdef _poll_ctx ctx
    keep = _poll_begin(&ctx, cancel)
    F.poll = _poll
    F.poll_ctx = &ctx
    with nogil:
        _execute_fwd(F, threads)
        _canon(NULL, F, threads)
    del keep
    return _poll_end(&ctx)


cdef float *_workspace_base(uintptr_t base, int64_t size, int64_t total_floats) except? NULL:
    """The 64-byte aligned start of a workspace of ``size`` bytes at ``base`` that must hold total_floats."""
    cdef uintptr_t aligned
    if total_floats <= 0:
        return NULL
    if base == 0:
        raise ValueError("workspace is null")
    aligned = (base + <uintptr_t>(CT_ALIGN - 1)) & ~(<uintptr_t>(CT_ALIGN - 1))
    if size - <int64_t>(aligned - base) < total_floats * 4:
        raise ValueError(f"workspace of {size} bytes is too small; need {total_floats * 4 + CT_ALIGN}")
    return <float *>aligned


cdef object _poll_begin(_poll_ctx *ctx, cancel):
    """Start polling for signals and the cancel flag (see _run); returns the flag array to keep alive."""
    ctx.tid = pthread_self()
    ctx.last = _now()
    ctx.cancel = 0
    ctx.etype = ctx.evalue = ctx.etb = NULL
    ctx.flag = NULL
    cdef cnp.ndarray flag_arr
    if cancel is None:
        return None
    flag_arr = cancel
    if flag_arr.dtype.num != cnp.NPY_INT32 or flag_arr.size != 1 or not flag_arr.flags.writeable:
        raise ValueError("cancel must be a writable int32 array of one element")
    ctx.flag = <const int *>cnp.PyArray_DATA(flag_arr)
    return flag_arr


cdef int _poll_end(_poll_ctx *ctx) except -1:
    """After the work: raise what stopped it (a signal handler's exception, or Cancelled)."""
    if ctx.cancel:
        if ctx.etype != NULL:
            PyErr_Restore(ctx.etype, ctx.evalue, ctx.etb)
            return -1
        raise Cancelled("the call was cancelled through its cancel flag; outputs are partly written")
    return 0


cdef void _execute_fwd(ct_fwd *F, int threads) noexcept nogil:
    cdef Py_ssize_t i
    cdef Py_ssize_t n_pack = F.tk.n_pack
    cdef Py_ssize_t n_comp = F.tk.n_comp
    if F.win:
        _execute_fwd_streamed(F, threads)
        return
    if threads <= 1:
        for i in range(n_pack):
            ct_fwd_pack_task(F, i)
        for i in range(n_comp):
            ct_fwd_task(F, i, F.tk.cbuf)
    else:
        with parallel(num_threads=threads):
            for i in prange(n_pack, schedule="dynamic"):
                ct_fwd_pack_task(F, i)
            pyconvtbc_omp_barrier()
            for i in prange(n_comp, schedule="dynamic"):
                ct_fwd_task(F, i, F.tk.cbuf + threadid() * F.tk.cbuf_stride)


cdef void _execute_fwd_streamed(ct_fwd *F, int threads) noexcept nogil:
    """Streamed x (_conv_fwd.h): w packed whole, then x window by window, each followed by its row blocks."""
    cdef Py_ssize_t i, n, a, z
    cdef int64_t w
    for i in prange(F.tk.n_pack_x, F.tk.n_pack, num_threads=max(1, threads), schedule="dynamic"):
        ct_fwd_pack_task(F, i)
    for w in range(F.n_w):
        if ct_fwd_stop(F):
            break
        n = ct_fwd_win_begin(F, w)
        a = w * F.w_rb * F.tk.n_jb
        z = min(F.tk.n_rb, (w + 1) * F.w_rb) * F.tk.n_jb
        if threads <= 1:
            for i in range(n):
                ct_fwd_win_pack(F, w, i)
            for i in range(a, z):
                ct_fwd_task(F, i, F.tk.cbuf)
        else:
            for i in prange(n, num_threads=threads, schedule="dynamic"):
                ct_fwd_win_pack(F, w, i)
            for i in prange(a, z, num_threads=threads, schedule="dynamic"):
                ct_fwd_task(F, i, F.tk.cbuf + threadid() * F.tk.cbuf_stride)


cdef void _canon(const ct_plan *P, const ct_fwd *F, int threads) noexcept nogil:
    """Last step of a call: the outputs' NaNs to the canonical NaN (ct_canon_task / ct_fwd_canon_task)."""
    cdef Py_ssize_t i
    cdef Py_ssize_t n = ct_canon_ntasks(P) if P != NULL else ct_fwd_canon_ntasks(F)
    if n <= 1 or threads <= 1:
        for i in range(n):
            if P != NULL:
                ct_canon_task(P, i)
            else:
                ct_fwd_canon_task(F, i)
    else:
        for i in prange(n, num_threads=threads, schedule="static"):
            if P != NULL:
                ct_canon_task(P, i)
            else:
                ct_fwd_canon_task(F, i)


cdef double _stamps[5]

cdef inline void _stamp(int i) noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    _stamps[i] = ts.tv_sec + 1e-9 * ts.tv_nsec



# ---- test hooks: the vector row codecs of every instruction set, against the scalar codecs --------------
def _isa_index(str isa_name):
    """The code-path index of an instruction-set name; ValueError if this CPU lacks it (tests only)."""
    which = _ISA_CODES[isa_name]
    if not _isa_ok[which]:
        raise ValueError(f"this CPU does not support {isa_name}")
    return which


def _row_outputs(v, bint copy):
    """(fp32 values: a copy of v or empty, f16 bits, bf16 bits) for the row-codec hooks below."""
    import numpy as np
    n = len(v)
    r = np.array(v, dtype=np.float32) if copy else np.empty(n, dtype=np.float32)
    return r, np.empty(n, dtype=np.uint16), np.empty(n, dtype=np.uint16)


def _codec_rows(const float[::1] v, int compute, int hbits, int hrnd, str isa_name):
    """(rounded fp32, f16 bits, bf16 bits) of v through one code path's row codecs (tests only)."""
    cdef int which = _isa_index(isa_name)
    n = v.shape[0]
    r, h, b = _row_outputs(v, True)
    cdef float[::1] rv = r
    cdef uint16_t[::1] hv = h
    cdef uint16_t[::1] bv = b
    if n:
        _tables[which].round_row(&rv[0], n, compute, hbits, hrnd)
        _tables[which].store_row(&v[0], n, <char *>&hv[0], CT_DT_F16, CT_C_FP32, CT_HIF8_TA, 0)
        _tables[which].store_row(&v[0], n, <char *>&bv[0], CT_DT_BF16, CT_C_FP32, CT_HIF8_TA, 0)
    return r, h, b


def _decode_rows(const uint16_t[::1] h, int dt, str isa_name):
    """fp32 of 16-bit codes (dt CT_DT_F16 or CT_DT_BF16) through one code path's row decoder (tests only)."""
    import numpy as np
    cdef int which = _isa_index(isa_name)
    n = h.shape[0]
    out = np.empty(n, dtype=np.float32)
    cdef float[::1] ov = out
    if n:
        _tables[which].decode_row(<const char *>&h[0], 2, dt, n, &ov[0])
    return out


def _scalar_codecs(const float[::1] v, int hbits, int hrnd):
    """The _fpround scalar codecs on v: (round_hf32, f16 bits, bf16 bits) (tests only)."""
    n = v.shape[0]
    r, h, b = _row_outputs(v, False)
    cdef float[::1] rv = r
    cdef uint16_t[::1] hv = h
    cdef uint16_t[::1] bv = b
    cdef Py_ssize_t i
    for i in range(n):
        rv[i] = round_hf32(v[i], hbits, hrnd)
        hv[i] = f32_to_f16_bits(v[i])
        bv[i] = f32_to_bf16_bits(v[i])
    return r, h, b
