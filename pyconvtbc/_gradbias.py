"""gradBias in the NPU's order: the geometry CANN's ReduceSum tiling picks, and the call of its kernel.

On ascend950 aclnnConvTbcBackward computes gradBias with ReduceSum over the (1, T_out*B, Cout) view of
grad_output (reduce the first two axes, keep Cout).  Which fp32 adds it does is fixed by the ReduceSum tiling
(rows per unified-buffer tile, tiles per core, channels per tile) and by the kernel's fold; both are written
down in docs/precision.md ("gradBias: ReduceSum's order") with the public sources they come from.  This module
ports the tiling (``geometry``); the C kernel (_kernels/_conv_bias.h, through _kernels/_bias.pyx) does the
adds.  Where the order is not known (ascend910b and ascend910: their ReduceSum kernel is not public; Cout = 1:
another pattern of the template), ``geometry`` returns None and the backward keeps its sequential order.
"""
from typing import NamedTuple, Optional

from .enums import aclDataType as DT


class Hardware(NamedTuple):
    """What the ReduceSum tiling reads of the chip (ReduceOpCompileInfo)."""

    vector_cores: int
    ub_size: int          # bytes
    cache_line: int       # bytes
    ub_block: int         # bytes
    vreg: int             # bytes


# ascend950: 64 vector cores, UB 253952 bytes (the platform file's ub_size), 32-byte UB blocks, 256-byte vector
# registers; the 256-byte cache line is the tiling source's own worked example (docs/precision.md)
HARDWARE = {"ascend950": Hardware(64, 253952, 256, 32, 256)}

CACHE_BUF = 16 * 1024      # CACHE_BUF_SIZE: UB kept for the cross-tile cache
MAX_INNER_A = 512          # bytes of channels per UB tile, at most
THRESHOLD = 0.95           # core-use ratio the tiling wants
VL_FP32 = 64               # fp32 lanes of a vector register: the stage-2 tile width (ELEMENT_ONE_REPEAT)


class Geometry(NamedTuple):
    """The order's parameters (the kernel's geometry tuple)."""

    tile_rows: int         # rows per UB tile (the last tile padded with +0.0f rows); R when R fits in one
    tiles_per_group: int   # tiles per core (factorRCntPerCore); groups = ceil(tiles / tiles_per_group)
    a_tile: int            # channels per stage-1 UB tile
    a_tile2: int           # channels per stage-2 tile (64)
    align: int             # channels a tile's row is padded to in UB (32-byte blocks of the narrowest dtype)


def _cdiv(a, b):
    return -(-a // b)


def _floor_align(a, b):
    return a // b * b


def _ceil_align(a, b):
    return _cdiv(a, b) * b


def _dag(in_bytes):
    """ReduceSum's DAG as the tiling counts it: (pre-reduce input buffers, other pre-reduce buffers,
    post-reduce buffers, ratio, widest bytes, narrowest bytes).  fp32: CopyIn -> ReduceSum -> CopyOut (the
    same-type casts are dropped), the input double-buffered twice over (the reduce is the DAG's node 1);
    fp16/bf16: CopyIn -> Cast -> ReduceSum -> Cast -> CopyOut, each cast one temporary buffer."""
    if in_bytes == 4:
        return 4, 0, 2, 1, 4, 4
    return 2, 1, 3, 2, 4, 2


def geometry(soc: str, rows: int, channels: int, dy_dtype: int) -> Optional[Geometry]:
    """The ReduceSum geometry for a (1, rows, channels) reduce over the rows, or None where the order is not
    modelled (another chip, channels == 1, an empty tensor, a dtype ReduceSum does not take)."""
    hw = HARDWARE.get(soc)
    if hw is None or rows < 1 or channels < 2:
        return None
    in_bytes = {int(DT.ACL_FLOAT): 4, int(DT.ACL_FLOAT16): 2, int(DT.ACL_BF16): 2}.get(int(dy_dtype))
    if in_bytes is None:
        return None
    return _tiling(hw, rows, channels, in_bytes)


def _tiling(hw, R, A, in_bytes):
    """A port of ReduceOpTiling::ComputeTiling for the pattern ARA with shape (1, R, A), contiguous, without
    batch invariance (opbase src/op_common/atvoss/reduce/reduce_tiling.cpp)."""
    pre_in, pre_rest, post, ratio, max_b, min_b = _dag(in_bytes)
    shape = (1, R, A)
    is_a = (True, False, True)
    # CalcBasicBlock
    ub_avail = hw.ub_size - CACHE_BUF
    basic = ub_avail / ((pre_in + pre_rest * ratio) + (post * ratio) / R)
    res_block = int(basic * ratio / R)
    result_block = min(max(_floor_align(res_block, hw.cache_line), MAX_INNER_A), CACHE_BUF)
    basic_block = _floor_align((ub_avail - result_block * post) // (pre_in + pre_rest * ratio), hw.vreg)
    b_block_num = basic_block * ratio // max_b
    # ComputeCacheLineBlock
    cache_size = hw.cache_line // in_bytes
    ub_blk_a = hw.ub_block // min_b          # the tail axis is A: aligned to the narrowest dtype's block
    line, step, outer, axis = 1, 1, 1, -1
    for i in (2, 1, 0):
        line *= shape[i]
        if line > cache_size:
            line //= shape[i]
            step = _cdiv(cache_size, line)
            if step > shape[i]:
                step = _floor_align(step, shape[i])
            outer = _cdiv(shape[i], step)
            axis = i
            break
        step, axis = shape[i], i
    a_size = r_size = 1
    for i in range(2, axis, -1):
        n = _ceil_align(shape[i], ub_blk_a) if i == 2 else shape[i]
        if is_a[i]:
            a_size *= n
        else:
            r_size *= n
    # InitUnit
    a_outer = r_outer = 1
    for i in range(0, axis, 2):
        a_outer *= shape[i]
    for i in range(1, axis, 2):
        r_outer *= shape[i]
    if is_a[axis]:
        a_outer *= outer
    else:
        r_outer *= outer
    cores = hw.vector_cores

    def rate_of(x, a_out):
        tc = x // _cdiv(x, cores)
        if tc > a_out:
            tc = _floor_align(tc, a_out)
        return tc / cores

    # ComputeUnitA
    split_a = is_a[axis]
    outer_a = a_outer // outer * shape[axis] if split_a else a_outer
    inner_a, max_inner_a = 1, MAX_INNER_A // max_b
    ia = axis if split_a else axis - 1
    while True:
        alen = shape[ia]
        st = step if ia == axis else 1
        max_step, split_here = st, False
        while st <= alen:
            s = _floor_align(st, ub_blk_a) if ia == 2 else st
            t_outer = outer_a // alen * _cdiv(alen, s)
            size = inner_a * s * a_size
            if size <= max_inner_a and size * r_size <= b_block_num:
                if rate_of(t_outer * r_outer, t_outer) > THRESHOLD:
                    max_step = s
            else:
                split_here = True
                break
            st += 1
        if split_here or max_step != alen or ia - 2 < 0:
            st = 1 if max_step == 0 else max_step
            inner_a *= st
            outer_a = outer_a // alen * _cdiv(alen, st)
            break
        inner_a *= _ceil_align(alen, ub_blk_a) if ia == 2 else alen
        outer_a //= alen
        ia -= 2
    unit_a = [ia, inner_a, outer_a, st]
    # ComputeUnitR
    outer_r = r_outer if split_a else r_outer // outer * shape[axis]
    inner_r, st = 1, 1
    ir = axis - 1 if split_a else axis
    while ir > -1:
        rlen = shape[ir]
        if unit_a[1] * inner_r * a_size * r_size * rlen <= b_block_num:
            outer_r //= rlen
            inner_r *= rlen
            ir -= 2
            continue
        st = min(b_block_num // (unit_a[1] * inner_r * a_size * r_size), rlen)
        min_step = step if ir == axis else 1
        for s in range(st, min_step, -1):
            if rate_of(unit_a[2] * (outer_r // rlen * _cdiv(rlen, s)), unit_a[2]) > THRESHOLD:
                st = s
                break
        inner_r *= st
        outer_r = outer_r // rlen * _cdiv(rlen, st)
        break
    unit_r = [ir, inner_r, outer_r, st]
    # ComputeProgressUnitA (R wholly in one tile: widen the channel tile)
    if unit_r[0] == -1:
        idx, u_step = unit_a[0], unit_a[3]
        inner_a = unit_a[1] // u_step
        outer_a = unit_a[2] // _cdiv(shape[idx], u_step) * shape[idx]
        max_inner = result_block // max_b
        line_elems = hw.cache_line // min_b
        ia = idx
        while True:
            alen = shape[ia]
            s = u_step + 1 if ia == idx else 1
            max_step, split_here = (u_step if ia == idx else 1), False
            while s <= alen:
                ts = _ceil_align(s, ub_blk_a) if ia == 2 else s
                t_inner = inner_a * ts
                t_outer = outer_a // alen * _cdiv(alen, ts)
                rate = t_outer / _ceil_align(t_outer, cores)
                if t_inner * unit_r[1] * a_size * r_size <= b_block_num and t_inner * a_size <= max_inner:
                    if t_inner * a_size <= line_elems or rate >= THRESHOLD:
                        max_step = ts
                    s += 1
                    continue
                split_here = True
                break
            if split_here or ia - 2 < 0:
                st = max_step
                inner_a *= st
                outer_a = outer_a // alen * _cdiv(alen, st)
                break
            inner_a *= _ceil_align(alen, ub_blk_a) if ia == 2 else alen
            outer_a //= alen
            ia -= 2
        unit_a = [ia, inner_a, outer_a, st]
    # SetTilingData
    total = unit_a[2] * unit_r[2]
    blocks = _cdiv(total, _cdiv(total, cores))
    if unit_a[2] < blocks:
        t = _ceil_align(blocks, unit_a[2])
        blocks = t if t <= cores else _floor_align(blocks, unit_a[2])
    per_core = _cdiv(unit_r[2], _cdiv(blocks, unit_a[2]))
    tile_rows = R if unit_r[0] == -1 else unit_r[3]
    a_tile = unit_a[3] if unit_a[0] == 2 else A
    return Geometry(tile_rows, per_core, min(a_tile, A), VL_FP32, hw.ub_block // min_b)


# ---- wiring (until the lead moves it into the backward kernel) -------------------------------------------
def apply_reducesum_gradbias(plan, dy, gb) -> None:
    """MOVE INTO THE KERNEL: overwrite the backward's gradBias with ReduceSum's order.

    Called after the main kernel by the backward's run paths.  ``plan``: the backward's plan (its ``extra`` is
    the Geometry or None; accumulation "sequential" keeps the kernel's order); ``dy`` = (address, byte strides
    0-2, dtype) of grad_output; ``gb`` = (address, dtype) of gradBias."""
    g = plan.extra
    if not isinstance(g, Geometry) or plan.mode.accumulation == 0:
        return
    from ._kernels import _bias
    s = plan.shape
    _bias.reduce_sum(dy, (s.T_out, s.B, s.Cout), tuple(g), gb)
