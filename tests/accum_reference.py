"""An independent model of the cube accumulation (docs/precision.md, "Accumulation model"), written from the
rules, not from the kernels: plain NumPy, float32 sums done in float64 and rounded once.

fp32 FMA: fma(a, b, s) = fp32(a*b + s).  Computing a*b + s in float64 and rounding to float32 gives exactly
that whenever the float64 sum is exact, which holds for the grid-valued data the tests use (few significant
bits, a narrow exponent range); the tests check that precondition (``grid_ok``).

Operands are the ROUNDED operands (already in the compute precision) as float32 arrays; results are the fp32
accumulators before the output cast.
"""
import numpy as np

F32, F64 = np.float32, np.float64
FORMS = ("cube", "cube_wide", "cube_rz", "sequential")


def round_rz(d):
    """float64 -> float32 toward zero."""
    f = np.asarray(d, F64).astype(F32)
    away = np.abs(f.astype(F64)) > np.abs(d)
    return np.where(away, np.nextafter(f, F32(0)), f).astype(F32)


class Chain:
    """One accumulator per output element, started at +0, taking blocks of products in order."""

    def __init__(self, shape, form):
        self.form = form
        self.c = np.zeros(shape, F32)

    def block(self, products, mask=None):
        """products: a list of (a, b) float32 arrays broadcasting to the shape; mask: where the block applies."""
        if self.form == "cube":
            s = np.zeros_like(self.c)
            for a, b in products:
                s = (a.astype(F64) * b.astype(F64) + s.astype(F64)).astype(F32)     # fp32 FMA
            new = (self.c + s).astype(F32)                                          # fp32 add, RNE
        else:
            d = self.c.astype(F64)
            for a, b in products:
                d = d + a.astype(F64) * b.astype(F64)
            new = d.astype(F32) if self.form == "cube_wide" else round_rz(d)
        self.c = new if mask is None else np.where(mask, new, self.c)


def k0_of(compute, block_size=None):
    """k0: 8 for FP32 / HF32 compute, 16 for FP16 / BF16 (8-bit operands: 32), unless block_size is given."""
    if block_size is not None:
        return block_size
    return {"fp32": 8, "hf32": 8, "fp16": 16, "bf16": 16, "fp8": 32}[compute]


def pairwise_tree(vals):
    """(0+1), (2+3), ...; an odd last one carried up unchanged; again until one is left (fp32 adds)."""
    vals = list(vals)
    while len(vals) > 1:
        nxt = [(vals[i] + vals[i + 1]).astype(F32) for i in range(0, len(vals) - 1, 2)]
        if len(vals) % 2:
            nxt.append(vals[-1])
        vals = nxt
    return vals[0]


# ascend950's pieces and segments (piece_co, piece_red, pieces, gw_segment, gi_segment), written here independently
# of pyconvtbc.profiles; a test may pass other numbers (geometry=) for a test-only chip
GEOMETRY_950 = (128, 256, 32, 65536, 32768)


def grad_weight(x, dy, K, pad, form, k0, soc="ascend910b", order=None, geometry=None):
    """gradWeight[k, ci, co] of the model.  x (T_in, B, Cin), dy (T_out, B, Cout) float32 (rounded operands).

    order: the batch order of the per-item chains (ascend910b / ascend910); None = 0..B-1."""
    T_in, B, Cin = x.shape
    T_out, _, Cout = dy.shape
    out = np.zeros((K, Cin, Cout), F32)
    if form == "sequential":   # one chain over every position, t outer, b inner (the old kernels' row order)
        for k in range(K):
            acc = np.zeros((Cin, Cout), F32)
            for t in range(T_out):
                if 0 <= t + k - pad < T_in:
                    for b in range(B):
                        acc = (x[t + k - pad, b][:, None].astype(F64) * dy[t, b][None, :] + acc).astype(F32)
            out[k] = acc
        return out
    for k in range(K):
        def prod(t, b):
            return (x[t + k - pad, b][:, None], dy[t, b][None, :])

        def valid(t):
            return 0 <= t + k - pad < T_in

        if soc in ("ascend910b", "ascend910"):
            total = np.zeros((Cin, Cout), F32)
            for b in (range(B) if order is None else order):
                ch = Chain((Cin, Cout), form)
                for t0 in range(0, T_out, k0):
                    blk = [prod(t, b) for t in range(t0, min(T_out, t0 + k0)) if valid(t)]
                    if blk:
                        ch.block(blk)
                total = (total + ch.c).astype(F32)
            out[k] = total
        else:  # ascend950: positions r = t*B + b
            RO = T_out * B
            nB = -(-RO // k0)
            pco, pred, npieces, gwseg, _ = geometry or GEOMETRY_950
            nb = -(-Cout // pco) * -(-(Cin * K) // pred)
            P = npieces // nb if 0 < nb < npieces else 1
            seg = max(1, gwseg // k0)
            pieces = []
            for i in range(P):
                b0, b1 = i * nB // P, (i + 1) * nB // P
                psum = np.zeros((Cin, Cout), F32)
                for s0 in range(b0, b1, seg):
                    ch = Chain((Cin, Cout), form)
                    for blk_i in range(s0, min(b1, s0 + seg)):
                        blk = [prod(r // B, r % B) for r in range(blk_i * k0, min(RO, blk_i * k0 + k0))
                               if valid(r // B)]
                        if blk:
                            ch.block(blk)
                    psum = (psum + ch.c).astype(F32)
                pieces.append(psum)
            out[k] = pairwise_tree(pieces) if P > 1 else pieces[0]
    return out


def grad_input(dy, w, T_in, pad, form, k0, soc="ascend910b", geometry=None):
    """gradInput[t, b, ci] of the model (before the output rounding).  dy (T_out, B, Cout), w (K, Cin, Cout)."""
    T_out, B, Cout = dy.shape
    K, Cin, _ = w.shape
    tt = np.arange(T_in)[:, None, None]
    if form == "sequential":   # co blocks of 256 outer, then k, then co (the old kernels' order)
        acc = np.zeros((T_in, B, Cin), F32)
        for c0 in range(0, Cout, 256):
            for k in range(K):
                rows = tt[:, 0, 0] + pad - k
                ok = (rows >= 0) & (rows < T_out)
                for co in range(c0, min(Cout, c0 + 256)):
                    a = np.zeros((T_in, B, 1), F32)
                    a[ok] = dy[rows[ok], :, co][:, :, None]
                    new = (a.astype(F64) * w[k, :, co][None, None, :] + acc).astype(F32)
                    acc = np.where(ok[:, None, None], new, acc)
        return acc
    nG = -(-Cout // k0)
    giseg = (geometry or GEOMETRY_950)[4]
    seg = max(1, giseg // k0) if ((soc == "ascend950" or geometry) and K * Cout >= giseg) else None
    out = np.zeros((T_in, B, Cin), F32)
    ch = Chain((T_in, B, Cin), form)
    j = 0
    for g in range(nG):
        for k in range(K):
            rows = np.arange(T_in) + pad - k
            ok = (rows >= 0) & (rows < T_out)
            rr = np.clip(rows, 0, max(T_out - 1, 0))
            blk = []
            if T_out > 0:
                for co in range(g * k0, min(Cout, g * k0 + k0)):
                    blk.append((dy[rr, :, co][:, :, None], w[k, :, co][None, None, :]))
            if blk and ok.any():
                ch.block(blk, mask=ok[:, None, None])
            j += 1
            if seg and j % seg == 0:
                out = (out + ch.c).astype(F32)
                ch = Chain((T_in, B, Cin), form)
    if seg:
        return (out + ch.c).astype(F32)
    return ch.c


def grid(rng, shape, bits=6, emin=-6, emax=6):
    """Grid-valued float32 data: signed integers of `bits` bits times 2**e, e in [emin, emax]."""
    m = rng.integers(-(2 ** bits) + 1, 2 ** bits, size=shape)
    e = rng.integers(emin, emax + 1, size=shape)
    return (m * np.exp2(e)).astype(F32)


def forward(x, w, bias, pad, form, k0):
    """The forward's fp32 sums out[t, b, co] before the output rounding.  x (T_in, B, Cin), w (K, Cin, Cout) are
    the rounded operands, bias the fp32 start values (Cout,) or None.  Cube forms: blocks (channel group of k0,
    tap), group outer, tap inner, taps outside the sequence skipped, starting from the bias; "sequential": one
    FMA chain from the bias, taps outer, channels inner."""
    T_in, B, Cin = x.shape
    K, _, Cout = w.shape
    T_out = T_in + 2 * pad - K + 1
    start = np.zeros((T_out, B, Cout), F32)
    if bias is not None:
        start[...] = np.asarray(bias, F32)[None, None, :]

    def tap(k):
        rows = np.arange(T_out) + k - pad
        ok = (rows >= 0) & (rows < T_in)
        return np.clip(rows, 0, max(T_in - 1, 0)), ok[:, None, None]

    if T_in == 0 or Cin == 0:
        return start
    if form == "sequential":
        acc = start
        for k in range(K):
            rr, ok = tap(k)
            for ci in range(Cin):
                new = (x[rr, :, ci][:, :, None].astype(F64) * w[k, ci, :][None, None, :] + acc).astype(F32)
                acc = np.where(ok, new, acc)
        return acc
    ch = Chain((T_out, B, Cout), form)
    ch.c = start
    for g in range(-(-Cin // k0)):
        for k in range(K):
            rr, ok = tap(k)
            blk = [(x[rr, :, ci][:, :, None], w[k, ci, :][None, None, :])
                   for ci in range(g * k0, min(Cin, g * k0 + k0))]
            if ok.any():
                ch.block(blk, mask=ok)
    return ch.c
