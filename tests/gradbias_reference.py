"""An independent NumPy model of gradBias in ReduceSum's order, written from docs/precision.md ("gradBias:
ReduceSum's order"), not from the C: whole columns at a time, every add a float32 array add (round to nearest
even), so each column's sum is formed by exactly the adds the description lists."""
import numpy as np


def _halve(x):
    """Fold the rows of x (a power of two of them) by halving: rows r and r + h, h = n/2, n/4, ..., 1."""
    while x.shape[0] > 1:
        h = x.shape[0] // 2
        x = x[:h] + x[h:]
    return x[0]


def _pow2_at_most(n):
    m = 1
    while 2 * m <= n:
        m *= 2
    return m


def fold(u, variant):
    """fold(U) over the rows of u (n, C) float32: returns (C,)."""
    n = u.shape[0]
    if n == 1:
        return u[0]
    m = _pow2_at_most(n)
    head = u[:m].copy()
    head[:n - m] = head[:n - m] + u[m:]          # the rows beyond the power of two, added to the first ones
    if variant == "halving":
        return _halve(head)
    q = (m.bit_length() - 1) // 4
    for _ in range(q):                           # runs of 16 consecutive rows, each folded by halving
        head = np.stack([_halve(head[16 * g:16 * g + 16]) for g in range(head.shape[0] // 16)])
    return _halve(head)


def variant(width, align):
    d = -(-width // align) * align
    return "groups16" if 32 < d <= 64 else "halving"


def column_variants(C, tile, align):
    out = []
    for c in range(C):
        t0 = c // tile * tile
        out.append(variant(min(tile, C - t0), align))
    return np.array(out)


def reduce_sum_order(rows, geometry):
    """rows: (R, C) float32 (grad_output as rows r = t*B + b); geometry: (tile_rows, tiles_per_group, a_tile,
    a_tile2, align).  Returns the (C,) float32 sums in ReduceSum's order."""
    tile_rows, per_group, a_tile, a_tile2, align = geometry
    R, C = rows.shape
    nt = -(-R // tile_rows)
    padded = np.zeros((nt * tile_rows, C), np.float32)
    padded[:R] = rows
    tiles = padded.reshape(nt, tile_rows, C)
    v1 = column_variants(C, a_tile, align)
    v2 = column_variants(C, a_tile2, align)

    def fold_cols(u, vs):
        res = np.empty(C, np.float32)
        for name in ("halving", "groups16"):
            sel = vs == name
            if sel.any():
                res[sel] = fold(u[:, sel], name)
        return res

    partials = []
    for t0 in range(0, nt, per_group):
        n = min(per_group, nt - t0)
        pos = 1 if n <= 2 else _pow2_at_most(n - 1)
        cache = {}
        for i in range(pos):
            u = tiles[t0 + i]
            if i < n - pos:
                u = u + tiles[t0 + i + pos]
            a = fold_cols(u, v1)
            k = 0
            while (i >> k) & 1:
                a = a + cache[k]
                k += 1
            cache[k] = a
        partials.append(cache[pos.bit_length() - 1])
    return fold_cols(np.stack(partials), v2)


def sequential_order(rows, part=256):
    """The pre-ReduceSum order (accumulation "sequential"): fp32 chains over runs of 256 rows, from 0.0f, then
    the partials summed in order from 0.0f."""
    R, C = rows.shape
    acc = np.zeros(C, np.float32)
    for r0 in range(0, R, part):
        p = np.zeros(C, np.float32)
        for r in range(r0, min(R, r0 + part)):
            p = p + rows[r]
        acc = acc + p
    return acc
