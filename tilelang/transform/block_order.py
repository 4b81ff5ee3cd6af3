"""Longest blocks first: the launch order of a grid whose blocks do unequal work.

A causal attention forward loops ``bx + 1`` times in row block ``bx``: launched in the plain
order (``blockIdx.x`` fastest), each head's longest blocks start last, and the grid's last wave
ends with the longest blocks of the last heads still running on a few SMs while the others idle.
Where the trip counts of the kernel's loops are a function of ``blockIdx.x`` alone that grows (or
shrinks) with it, the block indices are permuted (a relabelling of the blocks: each block still
computes one tile, every tile once) so that the hardware launches the grid in sections of ``s``
of its (blockIdx.y, blockIdx.z) rows, each section longest row block first, then its ``s`` rows
(``s`` = SMs / row blocks, rounded up: the blocks in flight together are about one section, and
the rows of a section -- heads of one batch -- share their K / V in L2 as before).

Contract: ``plan(lw)`` returns the statements binding the permuted indices (and records the
substitution in ``lw.vmap``) or ``[]`` where it does not apply: a user's ``T.use_swizzle`` or a
persistent or clustered schedule decides the order, a grid or trip count that is not a
compile-time function of ``blockIdx.x``, a ``while`` loop (a block may wait on another's
progress), or a predicted gain under 3 % (``predicted_gain``: the two orders' makespans on the SMs'
block slots, in units of one iteration; a grid of many waves, or of nearly equal blocks, gains
nothing). H200, session 31: sink_mha_fwd (1024 blocks) 0.268 -> 0.243 ms, gqa_fwd_bshd_causal
(4096 blocks of 128 threads) 0.75 -> 0.72 ms; mha_fwd_bhsd_causal (8192 blocks, one per SM,
predicted 1.7 %) measured 1-3 % slower, and is left in the plain order. On by default;
``tl.enable_longest_first_blocks`` False turns it off.
"""

from __future__ import annotations

import heapq
import math

from tvm import tirx

from tilelang import targets
from tilelang.tir_utils import const_int, i32, substitute, tvm_ffi_walk, walk_stmts
from tilelang.transform.kernel import op_name

KEY = "tl.enable_longest_first_blocks"
MIN_GAIN = 1.03      # the predicted gain (``predicted_gain``) below which the order stays
MAX_SIMULATED = 1 << 15   # blocks; a larger grid has too many waves for its tail to matter


def find_swizzle(body):
    """(panel, order) of the kernel's first ``T.use_swizzle``, or None (the one the lowering uses)."""
    found = []

    def visit(s):
        if op_name(s) == "use_swizzle":
            found.append((int(s.value.args[0].value), str(s.value.args[1].value)))

    walk_stmts(body, visit)
    return found[0] if found else None


def _free_vars(expr) -> list:
    out = []
    tvm_ffi_walk(expr, lambda e: out.append(e) if isinstance(e, tirx.Var) else None)
    return out


def work_by_row(body, bx, gx: int):
    """The summed trip counts of the loops whose extent depends on ``bx``, for each value of ``bx``
    in ``range(gx)``; None where a loop's extent depends on anything but ``bx`` and constants, or
    where the kernel has a ``while`` loop; [] where no loop's extent depends on ``bx``."""
    extents, refuse = [], []

    def visit(s):
        if isinstance(s, tirx.While):
            refuse.append(s)
        elif isinstance(s, tirx.For):
            names = _free_vars(s.extent)
            if any(v.same_as(bx) for v in names):
                if any(not v.same_as(bx) for v in names):
                    refuse.append(s)
                extents.append(s.extent)

    walk_stmts(body, visit)
    if refuse:
        return None
    if not extents:
        return []
    work = []
    for x in range(gx):
        total = 0
        for e in extents:
            n = const_int(substitute(e, {bx: i32(x)}))
            if n is None:
                return None
            total += max(n, 0)
        work.append(total)
    return work


def direction(work) -> int:
    """+1 where the work grows with the row block (reverse it), -1 where it shrinks (keep it), 0
    where it does neither."""
    if len(set(work)) < 2:
        return 0
    if all(a <= b for a, b in zip(work, work[1:])):
        return 1
    if all(a >= b for a, b in zip(work, work[1:])):
        return -1
    return 0


def _makespan(works, slots: int) -> float:
    """When the last of ``works`` (in launch order) ends on ``slots`` block slots, each taking the
    next block as it frees (the hardware's block scheduler)."""
    free = [0.0] * slots
    for w in works:
        heapq.heappush(free, heapq.heappop(free) + w)
    return max(free)


def predicted_gain(work, rows: int, s: int, sense: int, slots: int) -> float:
    """The plain order's makespan over the permuted one's, each block taking its trip count plus
    one (its prologue and epilogue) on ``slots`` slots; 1.0 for a grid past ``MAX_SIMULATED``."""
    gx = len(work)
    if gx * rows > MAX_SIMULATED:
        return 1.0
    cost = [w + 1 for w in work]
    plain = [c for _ in range(rows) for c in cost]
    order = range(gx - 1, -1, -1) if sense > 0 else range(gx)
    permuted = [cost[x] for first in range(0, rows, s) for x in order for _ in range(min(s, rows - first))]
    return _makespan(plain, slots) / _makespan(permuted, slots)


def blocks_per_sm(threads: int, smem_bytes: int, registers: int, arch: str) -> int:
    """An estimate of the blocks an SM holds: shared memory, 2048 threads, and 64 K registers at
    ``registers`` a thread (ptxas decides the real count later)."""
    by_smem = targets.smem_per_block(arch) // max(smem_bytes, 1)
    return max(1, min(by_smem, 2048 // threads, 65536 // (threads * registers)))


def constant_blocks(lw):
    """The kernel's block count, or None for a grid that is not a compile-time constant."""
    dims = lw.info.launch_dims()
    blocks = 1
    for tag in ("blockIdx.x", "blockIdx.y", "blockIdx.z"):
        if tag in dims:
            n = const_int(dims[tag][1])
            if n is None:
                return None
            blocks *= n
    return blocks


def grid_waves(lw):
    """The kernel's blocks over the SMs' estimated block slots (``blocks_per_sm``), or None for a
    grid that is not a compile-time constant."""
    blocks = constant_blocks(lw)
    return None if blocks is None else blocks / block_slots(lw)


def block_slots(lw) -> int:
    """The blocks the GPU holds at once: SMs times ``blocks_per_sm``, a thread's registers taken as
    its fragments' words and some 32 for addresses, indices and loop state."""
    registers = min(255, lw.layouts.fragment_words() + 32)
    return _sm_count(lw) * blocks_per_sm(lw.T + lw.extra_threads, lw.smem_bytes, registers, _arch(lw))


def _arch(lw) -> str:
    return getattr(lw, "arch", None) or "sm_90a"


def _sm_count(lw) -> int:
    """The target's SMs (132, an H200's, where the target does not say)."""
    return targets.sm_count(_arch(lw)) or 132


def section_rows(rows: int, want: int) -> int:
    """Rows a section takes: the smallest divisor of ``rows`` from ``want`` to twice it (every
    section whole: the permutation divides by constants only), else ``want`` (the last section
    shorter), at most ``rows``."""
    want = max(1, min(rows, want))
    return next((d for d in range(want, min(rows, 2 * want) + 1) if rows % d == 0), want)


def plan(lw) -> list:
    """The permutation's bindings for the kernel ``lw`` lowers, or []: see the module docstring."""
    if lw.configs.get(KEY) is False:
        return []
    if lw.ws is not None and (lw.ws.persistent is not None or lw.ws.cluster is not None):
        return []
    if lw.cluster_dims is not None:
        return []
    info = lw.info
    dims = info.launch_dims()
    if "blockIdx.x" not in dims:
        return []
    bx, gx = dims["blockIdx.x"][0], const_int(dims["blockIdx.x"][1])
    rest = [(dims[t][0], const_int(dims[t][1])) for t in ("blockIdx.y", "blockIdx.z") if t in dims]
    if gx is None or gx < 2 or any(n is None for _, n in rest):
        return []
    work = work_by_row(info.body, bx, gx)
    if not work:
        return []
    sense = direction(work)
    if sense == 0:
        return []
    rows = math.prod(n for _, n in rest)
    s = section_rows(rows, -(-_sm_count(lw) // gx))
    if predicted_gain(work, rows, s, sense, block_slots(lw)) < MIN_GAIN:
        return []
    # the launch order's linear index; C division is exact on these non-negative values
    lin, scale = bx, gx
    for var, n in rest:
        lin = lin + var * i32(scale)
        scale *= n
    per = i32(gx * s)
    section = tirx.truncdiv(lin, per)
    within = tirx.truncmod(lin, per)
    size = i32(s) if rows % s == 0 else tirx.min(i32(rows) - section * i32(s), i32(s))
    q = tirx.truncdiv(within, size)
    row = section * i32(s) + tirx.truncmod(within, size)
    new_x = i32(gx - 1) - q if sense > 0 else q
    binds, pairs = [], [(bx, new_x, gx)]
    for var, n in rest:
        pairs.append((var, tirx.truncmod(row, i32(n)), n))
        row = tirx.truncdiv(row, i32(n))
    for old, expr, n in pairs:
        new = tirx.Var(f"{old.name}_lf", "int32")
        lw.vmap[old] = new
        lw.bind_loop(new, i32(n))
        binds.append(tirx.Bind(new, expr))
    return binds
