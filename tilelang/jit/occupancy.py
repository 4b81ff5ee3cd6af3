"""One more block per SM where a few registers stand in the way (``tl.enable_occupancy_step``, on by
default; false turns it off).

A kernel compiled under ``__launch_bounds__(T)`` gets the registers ptxas wants; where they are what
limits the blocks an SM holds, and a handful fewer would let one more block in (gdn
chunk_scaled_dot_kkt: 84 registers, five blocks of 128 threads; at 80, six), the kernel is compiled
again under ``__launch_bounds__(T, blocks + 1)`` and that cubin kept if ptxas fits it without
spilling (H100, session 47: kkt 0.197 -> 0.185 ms, 1.06x upstream's). Only for kernels whose
constant grid is more than one wave at the first build's occupancy (a kernel of one wave gains
nothing from more room), whose shared memory and threads leave room for the extra block, and
which no launch bound of their own already constrains.

The occupancy arithmetic follows the CUDA occupancy calculator: registers are allocated per warp
in units of 256 (a thread's count rounded up to a multiple of 8), shared memory per block with
1 KiB the driver reserves."""

from __future__ import annotations

import math
import re

from tilelang import targets

_BOUND = re.compile(r"__launch_bounds__\((\d+)\)")
_BOUNDED = re.compile(r"__launch_bounds__\(\s*\d+\s*,")
_REG_UNIT = 256             # registers are allocated per warp in units of this many
_RESERVED_SMEM = 1024       # bytes the driver keeps per block
_MAX_BLOCKS_PER_SM = 32
_MAX_CUT = 0.9              # the recompile may take a thread down to 90 % of its registers, no further


def _warp_registers(regs: int) -> int:
    return math.ceil(regs * 32 / _REG_UNIT) * _REG_UNIT


def blocks_per_sm(regs: int, threads: int, smem: int, spec: dict) -> tuple[int, int]:
    """(blocks an SM holds, of which the register limit alone allows how many)."""
    warps = math.ceil(threads / 32)
    by_regs = (spec["registers_per_sm"] // _warp_registers(max(regs, 1))) // warps
    by_threads = spec["max_threads_per_sm"] // threads
    by_smem = spec["smem_per_sm"] // (smem + _RESERVED_SMEM)
    return min(by_regs, by_threads, by_smem, _MAX_BLOCKS_PER_SM), by_regs


def step(source: str, block, grid, smem, arch: str, regs: int, spills: int) -> tuple[int, int] | None:
    """(the launch bound's block count, the registers a thread may then use) for a kernel worth
    compiling again under ``__launch_bounds__(T, blocks)``; None where it is not."""
    spec = targets.gpu_spec(arch)
    # (one kernel, declared and defined with the same bound, no block count of its own)
    if spec is None or spills or len(set(_BOUND.findall(source))) != 1 or _BOUNDED.search(source) \
            or not isinstance(smem, int):
        return None
    try:
        n_blocks = math.prod(int(str(g)) for g in grid)
    except ValueError:
        return None     # (a grid that depends on the arguments)
    threads = math.prod(int(b) for b in block)
    now, by_regs = blocks_per_sm(regs, threads, smem, spec)
    if now != by_regs or n_blocks <= now * spec["sm_count"]:
        return None     # registers are not the limit, or the grid is one wave already
    want = now + 1
    if blocks_per_sm(1, threads, smem, spec)[0] < want:
        return None     # shared memory or threads would stop the extra block anyway
    warps = math.ceil(threads / 32)
    per_warp = (spec["registers_per_sm"] // (want * warps)) // _REG_UNIT * _REG_UNIT
    fit = per_warp // 32 // 8 * 8
    if fit < regs * _MAX_CUT or fit < 32:
        return None
    return want, fit


def block_smem(art, info):
    """A block's shared memory: the artifact's dynamic bytes (None where they are a run-time
    expression) and the static bytes ptxas reports."""
    return art.dynamic_smem + (info.smem or 0) if isinstance(art.dynamic_smem, int) else None


def bounded(source: str, blocks: int) -> str:
    return _BOUND.sub(rf"__launch_bounds__(\1, {int(blocks)})", source)


def attempt(art, first, build):
    """Try the step on ``art`` whose first build ptxas reported as ``first``: ``build(source) ->
    (output, ptxas usage or None)`` builds the bounded source (usage None also where ptxas could
    not compile it at all). -> (that output, its usage, the launch bound's block count), with
    ``art.source`` the bounded source, where the step applies and its build is kept (``keeps``);
    None otherwise (``art`` unchanged)."""
    plan = step(art.source, art.block, art.grid, block_smem(art, first), art.arch, first.registers,
                first.spill_stores + first.spill_loads)
    if plan is None:
        return None
    source = bounded(art.source, plan[0])
    output, second = build(source)
    if not keeps(first, second, plan):
        return None
    art.source = source
    return output, second, plan[0]


def keeps(first, second, plan) -> bool:
    """Whether the bounded build (ptxas's ``second``) is kept over the first: it fits the registers
    the plan asked for without spilling and without a larger stack frame."""
    return (second is not None and not second.spill_stores and not second.spill_loads
            and second.stack_frame <= first.stack_frame and second.registers <= plan[1])
