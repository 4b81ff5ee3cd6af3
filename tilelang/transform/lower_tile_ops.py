"""Lower tile operators to thread-level TIR: the heart of the compiler.

Input: a parsed kernel (tl.* ops, T.Parallel nests, fragment/shared allocations) and its
``Layouts``. Output: a PrimFunc body where

* each fragment is a per-thread ``local`` array of ``layout.local_size`` registers;
* all shared buffers are views into one dynamic shared allocation (multi-buffered by the
  pipelining pass), indexed through their ``SharedLayout`` (swizzle); buffers whose lifetimes
  are disjoint share bytes (``smem_plan``);
* copies are vectorised per-thread loops (``cp.async`` for global->shared), gemms are calls into
  ``src/tl/gemm_sm80.h`` (mma.sync) or, when layout inference chose wgmma (sm_90a),
  ``src/tl/gemm_sm90.h``; reductions are in-thread loops + warp shuffles + shared memory,
  ``T.Parallel`` nests are unrolled per-thread loops over the loop layout's registers;
* ``__syncthreads()`` separates conflicting shared-memory accesses (see ``thread_sync``);
* on sm_90a a pipelined loop (a GEMM main loop, attention's KV loop) may become a TMA producer
  warpgroup plus consumer warpgroups (``warp_specialize``): the block then has 128 more threads
  than ``T.Kernel`` asked for; where one such block fills an SM and the loop's bounds do not
  depend on the block index (or its trip count pairs up row blocks x and gx - 1 - x: causal
  attention), it runs persistent, on a 1-D grid of ``min(tiles, SMs)`` blocks looping over the
  tiles (or pairs).

Every new statement carries the span of the user statement it came from.
"""

from __future__ import annotations

import contextlib
import functools
import math

import tvm
from tvm import ir, tirx

from tilelang import targets
from tilelang.language._ops import is_tl_call
from tilelang.language.dtypes import bits as dtype_bits, nbytes
from tilelang.tir_utils import (ExprRewriter, any_expr, as_logical, const_int, dtype_of, evaluate_extern, extern_name,
                                i32, is_zero_const, map_stmts, seq, simplify, substitute, substitute_stmt, tensor_loads,
                                tvm_ffi_walk, uses_vars, walk_stmts)
from tilelang.transform import (atomic_staging, block_order, early_prologue, lower_copy, lower_gather, lower_im2col,
                                lower_print, lower_reduce, pipeline, pipelined_loop, smem_plan, thread_sync,
                                user_barriers, tma, user_ws, warp_specialize)
from tilelang.transform.kernel import (FRAGMENT_SCOPE, SAFE_VALUE_ATTR, SHARED_SCOPES, KernelInfo, LoweringError,
                                       buffer_accesses, decode_region, is_parallel_nest, nest_loops, op_name,
                                       parallel_nest, safe_value, scope_of, static_shape)
from tilelang.transform.layout_inference import Layouts, memory_loop_layout, wgmma_swizzle_bytes
from tilelang.transform.pass_config import PassConfigKey
from tilelang.transform.lower_gemm_fma import fma_call
from tilelang.transform.vectorize_parallel import vectorize_register_loop
from tilelang.transform import barrier_hoist, thread_regions

SMEM_ALIGN = 128
MBARRIER_ALIGN = 8
TENSORMAP_PREFETCH = "tl.enable_tensormap_prefetch"   # pass config: prefetch the remaining maps at entry
SMEM_BUDGET_SM90 = targets.smem_per_block("sm_90a")   # shared memory one block may use (wgmma kernels)
SMEM_RESERVED_PER_BLOCK = 1024     # the shared memory the driver keeps for each resident block (sm_80+)
MAX_BLOCKS_PER_SM = 32
OCCUPANCY_NEUTRAL_REUSE_KEY = PassConfigKey.TL_ENABLE_OCCUPANCY_NEUTRAL_REUSE.value
MASK_UNSWITCH_BOTH_KEY = PassConfigKey.TL_ENABLE_MASK_UNSWITCH_BOTH.value   # _unswitch_select: both uniform sides


class Lowerer:
    def __init__(self, info: KernelInfo, layouts: Layouts, pass_configs: dict, reserve: int = 0,
                 arch: str | None = None):
        self.info = info
        self.arch = arch
        self.reserve = reserve
        # shared memory the plans below may fill: the budget less ``reserve`` bytes for what the
        # lowering carves after them (reduction workspaces; ``engine.pipeline`` learns it from a
        # first lowering that went over)
        self.budget = SMEM_BUDGET_SM90 - reserve
        self.layouts = layouts
        self.configs = pass_configs or {}
        self.T = info.num_threads
        self.tid = info.tid
        roles = getattr(info, "user_ws", None)      # T.ws: the compute role's own thread index
        if roles is not None and roles.lo:
            self.tid = info.tid - roles.lo * user_ws.GROUP
        self.role_block = None  # the T.ws block being lowered: (first, last + 1) warp group
        self.thread_guard = None  # the user's `if` on the thread index being lowered, if any
        self.thread_region = None  # the thread_regions.Region being lowered (tile work for a thread range)
        self.thread_conds = []     # the enclosing conditions on the thread index (barrier placement)
        self.defer_copy = None     # the statement whose lone cp.async may leave its wait (thread_sync)
        self.deferred_dst = None   # ... and the tile it left it for
        self.regions = thread_regions.regions(info)
        self.thread_vars = [iv.var for iv, _ in info.launch if str(iv.thread_tag).startswith("threadIdx")]
        self.an = tvm.sym.Analyzer()
        for iv, extent in info.launch:
            self.an.bind(iv.var, tvm.ir.Range(0, extent))
        self.vmap = {}          # variable substitution (block swizzle, pipelined loop shifts)
        self.stage = {}         # shared buffer -> stage index expression (multi-buffered)
        self.in_producer = False  # lowering a pipelined producer: the pipeline commits/waits
        self.pipelining = 0       # pipelined or warp-specialised loops being lowered around the statement
        self.loop_depth = 0       # loops (serial, T.Pipelined, while) of more than one iteration around the statement
        self.loops = []           # ... those of them that are `for` loops, outer to inner (as written)
        self.assumed = []         # T.assume conditions holding at the statement being lowered (``lower``)
        self.values = {}          # Bind variable -> its value, where that reads no memory (``static``)
        self.known = {}           # local scalar -> the value last stored to it, while still current (``static``)
        self.loop_back_barriers = []  # the barriers ending loop bodies (``thread_sync.closes_with_barrier``)
        self.loop_words = {}      # loop -> its live fragment words a thread (lower_reduce._fold_lanes)
        self.stages = pipelined_loop.plan_stages(info, self.configs.get(pipelined_loop.GATHERS_KEY) is not False)
        self.frag = {}          # fragment buffer -> local array buffer
        self.wgmma_acc_regs = {}  # local array -> the wgmma accumulator registers a thread holds in it
        self.smem_views = {}    # shared buffer -> its flat view over smem (elem_offset: stage 0's start)
        self.smem_bytes = 0
        self.own_bytes = False      # every shared buffer has bytes of its own (``_prefer_own_bytes``)
        self.loop_reuse = True      # buffers private to loop iterations share bytes (``_weigh_loop_reuse``)
        self.smem = tirx.decl_buffer((1,), "uint8", "smem", scope="shared.dyn")
        self.extra_allocs = []
        # sm_90a TMA producer warpgroup, or None and why not (the LSP's pipeline hover)
        self.ws, self.ws_reason = warp_specialize.plan_or_reason(self)
        if self.ws is not None:     # its pipeline keeps gathered copies as consumers: one buffer each
            self.stages = pipelined_loop.plan_stages(info, gathers=False)
        self.extra_threads = warp_specialize.PRODUCER_THREADS if self.ws else 0
        self.tensormaps = self.ws.tensormaps if self.ws else []
        self.persistent_why = None       # why a warp-specialised loop keeps one tile per block
        if self.ws is not None:
            # a persistent grid, with tl.cluster_multicast in clusters of two blocks taking tiles t
            # and t ^ 1; else one tile per block, with the key a tile pair per cluster
            self.ws.persistent = warp_specialize.persistent_plan(self)
            self.ws.cluster = (warp_specialize.persistent_cluster_plan(self) if self.ws.persistent is not None
                               else warp_specialize.cluster_plan(self))
        self._plan_memory()
        self._weigh_loop_reuse()
        if self.ws is not None and self.ws.persistent is not None and (
                self.smem_bytes > self.budget or (2 * self.smem_bytes <= SMEM_BUDGET_SM90 and self.T < 256
                                                  and not warp_specialize.wide_single_warpgroup(self))):
            # the staged tiles cannot keep bytes of their own; or two blocks fit on an SM (shared
            # memory, and registers: no 232-register consumer warpgroups, no accumulator wider than
            # one warpgroup's pair limit): a grid of one block per SM would
            # halve the occupancy (H200, fp16 GEMM 128 x 8192 x 8192 with 64x64 tiles: 231
            # TFLOP/s persistent, 342 one tile per block; 128x128 tiles, one block per SM either
            # way: 293 / 295, and 528 / 421 at 8192 x 8192 x 512)
            self.persistent_why = (f"with bytes of its own the pipeline would need {self.smem_bytes} bytes of shared "
                                   "memory" if self.smem_bytes > self.budget else
                                   "two blocks fit on an SM, which a grid of one block per SM would keep apart")
            self.ws.persistent = None
            self._plan_memory()
        if self.ws is not None:   # two blocks per SM for a one-warpgroup GEMM (setmaxnreg; may drop persistence)
            warp_specialize.plan_pair(self, SMEM_BUDGET_SM90 - 2 * reserve)
            warp_specialize.plan_ring(self, self.budget)   # one more buffer for the wgmma kept in flight
            warp_specialize.plan_heads(self, self.budget)  # two buffers for a persistent kernel's Q
            warp_specialize.plan_single_wave(self)         # setmaxnreg 24 / 240 for a block alone on its SM
        if self.ws is not None and self.ws.cluster is not None and self.ws.cluster.persistent \
                and self.ws.persistent is None:
            self.ws.cluster = None    # the plans above went back to one tile per block
        if self.configs.get(OCCUPANCY_NEUTRAL_REUSE_KEY):
            self._prefer_own_bytes()
        self.plan_bytes = self.smem_bytes   # the plan's; the lowering's workspaces come after
        self.min_blocks_per_sm = self.ws.min_blocks_per_sm if self.ws is not None else None   # (T, 2) / (T, 1)
        self.persistent_tiles = self.ws.persistent.tiles if self.ws and self.ws.persistent else None
        self.cluster_dims = self.ws.cluster.dims if self.ws and self.ws.cluster else None
        if self.cluster_dims is None:
            self.cluster_dims = warp_specialize.user_cluster_dims(info.func)    # T.ClusterKernel

    # ----- memory ------------------------------------------------------------------------
    def blocks_per_sm(self, smem_bytes: int) -> int:
        """An upper estimate of the blocks of this kernel one SM holds with ``smem_bytes`` of shared
        memory each: the least of the shared-memory, thread and register limits, the registers
        taken as a lower bound (the largest fragment plus 16 a thread: ptxas only knows more)."""
        spec = targets.gpu_spec(self.arch or "sm_90a") or {}
        per_sm = spec.get("smem_per_sm", 228 * 1024)
        threads = self.T + self.extra_threads
        regs = min(255, -(-(self.layouts.largest_fragment_words() + 16) // 8) * 8)
        limits = [spec.get("max_threads_per_sm", 2048) // threads, spec.get("registers_per_sm", 65536) // (regs * threads),
                  MAX_BLOCKS_PER_SM]
        if smem_bytes:
            limits.append(per_sm // (smem_bytes + SMEM_RESERVED_PER_BLOCK))
        return max(0, min(limits))

    def _weigh_loop_reuse(self):
        """Keep the bytes that buffers private to a loop's iterations share (``smem_plan.refine``)
        only where they pay for the barriers sharing asks for: the kernel fits only with them, or
        they let more blocks onto an SM (``blocks_per_sm``) in a grid of more than one wave of
        blocks at the plain plan's occupancy (or of run-time size). Upstream's gated-delta-net
        W / U kernel, 16,384 blocks: six blocks an SM -> eight; its state recurrence, 128
        blocks, keeps the plain plan: one block an SM either way."""
        if not smem_plan.narrows(self.info.body, self.info.shared_buffers()):
            return                          # (most kernels: nothing to weigh, no second plan)
        shared = self.smem_bytes
        self.loop_reuse = False
        self._plan_memory()
        plain = self.smem_bytes
        if plain == shared:
            return
        waves = block_order.grid_waves(self)        # at the plain plan's occupancy
        more = self.blocks_per_sm(shared) > self.blocks_per_sm(plain)
        if plain > self.budget or (more and (waves is None or waves > 1)):
            self.loop_reuse = True
            self._plan_memory()

    def _prefer_own_bytes(self):
        """``tl.enable_occupancy_neutral_reuse``: plan again with no shared bytes between buffers
        and keep that plan where it fits the budget and loses no block per SM (``blocks_per_sm``;
        a block pair, ``ws.pair``, needs its two), so that the barriers that only order one
        buffer's reads before another's writes on the same bytes go."""
        if not self.smem_alias or self.configs.get("tl.disable_shared_memory_reuse"):
            return
        need = max(self.blocks_per_sm(self.smem_bytes), 2 if self.ws is not None and self.ws.pair else 1)
        self.own_bytes = True
        self._plan_memory()
        pair_fits = 2 * self.smem_bytes <= SMEM_BUDGET_SM90 - 2 * self.reserve    # (plan_pair's budget)
        if self.smem_bytes <= self.budget and self.blocks_per_sm(self.smem_bytes) >= need and (
                not (self.ws is not None and self.ws.pair) or pair_fits):
            return
        self.own_bytes = False
        self._plan_memory()

    def _plan_memory(self):
        self.smem_views, self.smem_bytes, self.extra_allocs = {}, 0, []
        self.shared_scratch = []    # (share key, byte offset, bytes) of workspaces others may reuse
        sizes, aligns = {}, {}
        tail = [buf for buf in self.info.shared_buffers() if not static_shape(buf)]
        for buf in self.info.shared_buffers():
            if buf in tail:
                continue
            layout = self.layouts.shared[buf]
            size = getattr(layout, "size", _elems(buf)) * self.stages.get(buf, 1)
            sizes[buf] = size * nbytes(str(buf.dtype))
            # wgmma / TMA tiles: the swizzle is a function of address bits 4-9, so 1024-aligned (in
            # a wgmma kernel also a swizzled tile no wgmma reads: a TMA box may fill it, tma.box_layout)
            swizzled = getattr(layout, "slab", False) or (self.layouts.wgmma and getattr(layout, "group", 1) > 1)
            aligns[buf] = 1024 if swizzled else SMEM_ALIGN
        for buf in user_ws.barrier_buffers(self.info.body):
            if buf in aligns:   # an mbarrier needs its 8 bytes aligned, no more: barriers pack together
                aligns[buf] = MBARRIER_ALIGN
        # Buffers with disjoint lifetimes share bytes; the barrier planner treats them as one. In
        # a persistent kernel the producer fills the next tile's stages during the epilogue, so
        # the staged tiles are live throughout and share bytes with nothing.
        live = smem_plan.live_ranges(self.info.body, list(sizes))
        reuse = not self.configs.get("tl.disable_shared_memory_reuse") and not self.own_bytes
        planned = None
        ring = [decode_region(p.value.args[1]).buffer for p, _ in self.ws.producers] if self.ws is not None else []
        # The producer warp starts filling the ring (and loading the heads) as the kernel starts,
        # while the consumers still run what comes before the loop: those tiles are live from the
        # first statement (a tile read only before the loop, e.g. Q copied into registers, must
        # not lend them its bytes).
        for buf in ring + (list(self.ws.head_buffers) if self.ws is not None else []):
            if buf in live:
                live[buf] = (0, live[buf][1])
        for buf in getattr(self.info, "barrier_buffers", ()):    # T.alloc_barrier: never shares bytes
            if buf in live:
                live[buf] = (0, len(smem_plan.top_level(self.info.body)))
        if self.ws is not None and self.ws.persistent is not None:
            whole = (0, len(smem_plan.top_level(self.info.body)))
            for buf in ring:
                live[buf] = whole
            # The next tile's heads land during this tile's epilogue, where they have bytes of
            # their own; where that does not fit, they share them (attention's O_shared on Q's
            # bytes) and go back at the end of the tile instead (warp_specialize.head_release).
            if self.ws.heads:
                with_heads = {**live, **{buf: whole for buf in self.ws.head_buffers}}
                planned = smem_plan.plan(self.info.body, sizes, aligns, reuse=reuse, live=with_heads,
                                         refine_loops=self.loop_reuse)
                barriers = SMEM_ALIGN + 8 * (4 * self.ws.stages + 2 * self.ws.head_slots)   # at most, carved after
                self.ws.heads_late = planned[1] + barriers > self.budget
                if self.ws.heads_late:
                    planned = None
        if planned is None:
            planned = smem_plan.plan(self.info.body, sizes, aligns, reuse=reuse, live=live,
                                     refine_loops=self.loop_reuse)
        offsets, self.smem_bytes, self.smem_alias = planned
        for buf, n in sizes.items():
            # (elements per byte offset: a 4-bit element's index is half a byte; such a tile takes
            # a byte per element in the plan, twice what it holds)
            esize, packed = nbytes(str(buf.dtype)), max(1, 8 // dtype_bits(str(buf.dtype)))
            self.smem_views[buf] = tirx.decl_buffer((n // esize * packed,), str(buf.dtype), buf.name,
                                                    data=self.smem.data,
                                                    elem_offset=offsets[buf] // esize * packed, scope="shared.dyn")
        self._plan_tail(tail)
        if self.ws is not None:
            warp_specialize.plan_overlap(self)      # may split the ring into barrier groups
            self.ws.mbar = self._carve("tl_mbar", warp_specialize.barrier_count(self.ws), "uint64")
            self.extra_allocs.append(self.ws.mbar)
        self.strided = {}       # strided parameter -> (flat view, strides)
        for param in self.info.func.params:
            if tirx.is_buffer_var(param) and param.strides:
                extent = param.shape[0] * param.strides[0]
                view = tirx.decl_buffer((extent,), str(param.dtype), f"{param.name}_flat", data=param.data)
                self.strided[param] = (view, list(param.strides))
        for buf in self.info.fragment_buffers():
            layout = self.layouts.fragments[buf]
            self.frag[buf] = tirx.decl_buffer((max(layout.local_size, 1),), str(buf.dtype),
                                              buf.name, scope="local")

    def _plan_tail(self, tail):
        """Shared buffers of run-time extent (``T.alloc_shared((m, N))`` with a symbolic m): each
        takes bytes of its own after everything else (the plan's tiles and the lowering's
        workspaces), from ``smem_tail``, the static bytes' aligned end, bound at kernel entry
        (``run``); ``tail_bytes`` is their run-time size, which the launch adds to the dynamic
        shared memory (``dynamic_smem_expr``). Row-major, single-buffered, and no swizzle: a
        swizzled layout, a pipeline stage or 4-bit elements need a compile-time extent."""
        self.smem_tail = tirx.Var("smem_tail", "int32")
        self.tail_bytes = 0
        for buf in tail:
            err = run_time_extent_error(buf, self.layouts.shared[buf], self.stages.get(buf, 1))
            if err is not None:
                raise err
            esize = nbytes(str(buf.dtype))
            elems = math.prod(buf.shape)
            start = self.smem_tail + self.tail_bytes
            self.smem_views[buf] = tirx.decl_buffer((elems,), str(buf.dtype), buf.name, data=self.smem.data,
                                                    elem_offset=simplify(tirx.truncdiv(start, esize)),
                                                    scope="shared.dyn")
            size = tirx.Cast("int32", elems) * esize
            self.tail_bytes = simplify(self.tail_bytes + tirx.truncdiv(size + (SMEM_ALIGN - 1), SMEM_ALIGN)
                                       * SMEM_ALIGN)

    def tail_start(self) -> int:
        """Where the run-time-extent shared buffers start: the static bytes' aligned end."""
        return -(-self.smem_bytes // SMEM_ALIGN) * SMEM_ALIGN

    def dynamic_smem_expr(self):
        """The dynamic shared memory a launch needs: ``smem_bytes``, or, with buffers of run-time
        extent, an expression over the kernel's symbols."""
        if isinstance(self.tail_bytes, int) and self.tail_bytes == 0:
            return self.smem_bytes
        return simplify(self.tail_start() + self.tail_bytes)

    def _carve(self, name, elems, dtype, align=SMEM_ALIGN):
        esize = nbytes(dtype)
        offset = -(-self.smem_bytes // align) * align
        self.smem_bytes = offset + elems * esize
        view = tirx.decl_buffer((elems,), dtype, name, data=self.smem.data,
                                elem_offset=offset // esize, scope="shared.dyn")
        return view

    def scratch(self, name, elems, dtype, share=None):
        """A fresh shared-memory region (reduction workspace), allocated for the whole kernel.
        ``share``: a key naming the threads and the barrier of a workspace each use of which
        writes it only after a barrier over those threads and reads it before their next one (a
        cross-warp reduction's, ``lower_reduce._cross_warp``). Where a fresh region would take the
        block past its shared-memory budget, such a workspace takes the bytes of an earlier one
        with the same key that is large enough: that use's reads are over once every thread has
        met the barrier before this one's writes."""
        size = elems * nbytes(dtype)
        if share is not None and not self.scratch_fits(size):
            for key, offset, room in self.shared_scratch:
                if key == share and room >= size and offset % nbytes(dtype) == 0:
                    view = tirx.decl_buffer((elems,), dtype, name, data=self.smem.data,
                                            elem_offset=offset // nbytes(dtype), scope="shared.dyn")
                    self.extra_allocs.append(view)
                    return view
        view = self._carve(name, elems, dtype)
        self.extra_allocs.append(view)
        if share is not None:
            self.shared_scratch.append((share, self.smem_bytes - size, size))
        return view

    def scratch_fits(self, size, share=None) -> bool:
        """Whether a workspace of ``size`` bytes fits: carved after what the block already uses
        within the target's shared memory per block, or (with ``share``) on an earlier
        workspace's bytes (``scratch``)."""
        end = -(-self.smem_bytes // SMEM_ALIGN) * SMEM_ALIGN + size
        if end <= targets.smem_per_block(getattr(self, "arch", None) or "sm_90a"):
            return True
        return share is not None and any(k == share and room >= size for k, _, room in self.shared_scratch)

    def shared_offset(self, buf, indices):
        """Flat element offset of ``buf[indices]`` in its view (swizzle and stage included)."""
        off = self.layouts.shared[buf].offset(indices)
        stage = self.stage.get(buf)
        if stage is not None:
            off = off + stage * getattr(self.layouts.shared[buf], "size", _elems(buf))
        return simplify(off)

    def element(self, buf, indices):
        """(storage buffer, flat indices) where ``buf[indices]`` lives once lowered (``indices``
        already rewritten): a fragment's register, a shared buffer's slot in its view (swizzle and
        stage included), a strided parameter's flat view, else ``buf`` itself. The op lowerings
        (``lower_copy``, ``lower_print``...) reach lowered storage through this one door."""
        return _AccessRewriter(self, None).element(buf, indices)

    def shared_ptr(self, buf, indices):
        view = self.smem_views[buf]
        return tirx.address_of(tirx.BufferLoad(view, [self.shared_offset(buf, indices)]))

    # ----- expressions -------------------------------------------------------------------
    def rewrite(self, expr, loop=None):
        return _AccessRewriter(self, loop).visit(expr)

    def store(self, buf, indices, value, loop=None, span=None):
        rw = _AccessRewriter(self, loop)
        if loop is None:
            # outside T.Parallel the value is read only where the store's guard holds, so its
            # loads at the same element need no guard of their own
            indices = [rw.visit(i) for i in indices]
            guard = self.global_guard(buf, indices) if _scalar_indices(indices) else None
            with self.an.constraint_scope(guard) if guard is not None else contextlib.nullcontext():
                value = rw.visit(value)
        else:
            value = rw.visit(value)
            exact = rw._exact_local(buf, indices)
            if exact is not None:
                return tirx.BufferStore(self.frag[buf], value, [exact], span=span)
            indices = [rw.visit(i) for i in indices]
            guard = self.global_guard(buf, indices)
        target, idx = rw.element(buf, indices)
        store = tirx.BufferStore(target, value, idx, span=span)
        return store if guard is None else tirx.IfThenElse(guard, store, None, span=span)

    def global_guard(self, buf, indices):
        """An element of a global tensor the analyzer cannot prove in bounds is guarded, as
        upstream's safe-memory-access pass guards it: stores are skipped and loads read 0
        (``safe_value``), inside T.Parallel (tiles that overhang a tensor stay safe) and in plain
        statements alike (``C[idx] = A[idx] + B[idx]`` on a grid that overhangs N; a thread's own
        loop past a row's end, upstream's clean_and_maintain_logits_); a call taking an element's
        address runs only where it holds (``_AccessRewriter.address_guards``). Outside T.Parallel a
        vector index (T.Ramp) and a pointer in a store's value stay unguarded; the checker reports
        those (TL0602). The conditions of enclosing ``if``s are known (``lower_if``)."""
        if scope_of(buf) != "global" or self.configs.get("tl.disable_safe_memory_access"):
            return None
        conds = []
        for i, n in zip(indices, buf.shape):   # (a shifted index may also fall below 0)
            n = i32(n)
            if dtype_of(i) != dtype_of(n):   # int32 index into an int64 extent, or the reverse
                wide = "int64" if "int64" in (dtype_of(i), dtype_of(n)) else dtype_of(i)
                i, n = (x if dtype_of(x) == wide else tirx.Cast(wide, x) for x in (i, n))
            zero = tirx.IntImm(dtype_of(i), 0)
            conds += [c for c in (tirx.GE(i, zero), tirx.LT(i, n)) if not self.prove_bound(c)]
        if not conds:
            return None
        out = conds[0]
        for c in conds[1:]:
            out = tirx.And(out, c)
        return out

    def prove_bound(self, cond) -> bool:
        """``prove`` for an index bound, also where the index is a floor division by a positive
        constant: ``x // c < n`` holds where ``x < n * c`` does (a block index over a grid of
        ``seq_len * REPLICATE_H`` blocks, ``bx // REPLICATE_H < seq_len``), which the analyzer
        does not derive from ``x``'s bound on its own."""
        if self.prove(cond):
            return True
        i = cond.a
        if isinstance(cond, tirx.LT) and isinstance(i, tirx.FloorDiv) and isinstance(i.b, tirx.IntImm) \
                and i.b.value > 0:
            return self.prove(tirx.LT(i.a, cond.b * i.b))
        return False

    def prove(self, cond) -> bool:
        if self.assumed:
            with self.an.constraint_scope(functools.reduce(tirx.And, self.assumed)):
                return bool(self.an.can_prove(cond))
        return bool(self.an.can_prove(cond))

    def bind(self, stmt, loop=None):
        """A ``Bind``, its value rewritten; one that reads no memory is remembered for ``static``."""
        if not any_expr(stmt.value, lambda e: isinstance(e, (ir.TensorLoad, tirx.Call))):
            self.values[stmt.var] = stmt.value
        return tirx.Bind(stmt.var, self.rewrite(stmt.value, loop), span=stmt.span)

    def static(self, expr):
        """``expr`` (a tile extent) rewritten and simplified; where that is no constant but becomes
        a positive one with the values of the variables and scalars it reads put in (``right =
        base + 64; left = right - 64``: ``right - left`` is 64, TileOPs' prefill kernels), that
        constant. A scalar's value is known from its last store in the statements lowered so far
        where it reads only the thread's own registers, up to any statement that may store to it
        or to what the value reads (``lower``); not in pipelined loops, which lower their
        statements out of order."""
        plain = self.an.simplify(self.rewrite(expr))
        if const_int(plain) is not None or not (self.values or self.known):
            return plain
        known = _KnownScalars(self.known)
        for _ in range(8):
            wider = known.visit(substitute(expr, self.values))
            if wider.same_as(expr):
                break
            expr = wider
            value = const_int(self.an.simplify(self.rewrite(expr)))
            if value is not None and value > 0:    # (0: variables not yet set, as stored at allocation)
                return tirx.const(value, dtype_of(plain))
        return plain

    def bind_loop(self, var, extent):
        self.an.bind(var, tvm.ir.Range(0, extent))

    # ----- statements --------------------------------------------------------------------
    def lower(self, stmt):
        if isinstance(stmt, tirx.BufferStore):
            if self.known:
                self._forget([stmt.buffer])
            scalar = pipelined_loop.thread_scalar(stmt.buffer)
            if scalar and not self.pipelining and _reads_own(stmt.value, stmt.buffer):
                self.known[stmt.buffer] = stmt.value
        elif isinstance(stmt, (tirx.For, tirx.While)) and self.known:
            # a loop storing to a scalar: what was known of it may not hold from its second iteration
            self._forget(_written(stmt))
        # a T.assume inside a branch or loop holds there only: the assumptions go back after it
        saved = list(self.assumed) if isinstance(stmt, (tirx.IfThenElse, tirx.For, tirx.While)) else None
        try:
            return self._lower_stmt(stmt)
        finally:
            if saved is not None:
                self.assumed = saved
            if self.known and not isinstance(stmt, (tirx.BufferStore, tirx.Bind, tirx.SeqStmt)):
                self._forget(_written(stmt))      # (what it may have stored to)

    def _forget(self, buffers):
        """``known`` without the scalars among ``buffers`` and what was computed from any of them."""
        gone = list(buffers)
        while gone:
            for b in gone:
                self.known.pop(b, None)
            gone = [b for b, v in self.known.items() if uses_vars(v, gone)]

    def _lower_stmt(self, stmt):
        if isinstance(stmt, tirx.SeqStmt):
            return thread_sync.lower_sequence(self, list(stmt.seq))
        if isinstance(stmt, tirx.AllocBuffer):
            scope = scope_of(stmt.buffer)
            if scope in SHARED_SCOPES:
                return None
            if scope == FRAGMENT_SCOPE:
                return tirx.AllocBuffer(self.frag[stmt.buffer])
            return stmt
        if isinstance(stmt, tirx.Evaluate) and is_tl_call(stmt.value):
            return self.lower_op(stmt)
        if isinstance(stmt, tirx.Evaluate):
            rw = _AccessRewriter(self, None)
            value = rw.visit(stmt.value)
            if extern_name(value) and isinstance(value.ty, ir.PointerType):
                # T.call_extern("handle", f, ...) as a statement (upstream's examples call void
                # device functions so): 0.27 prints its pointer result cast, ``(void*)f(...)``,
                # which nvcc refuses for a void function; the call is made for its effect only
                value = tirx.call_extern("void", *value.args)
            if extern_name(value) == "tl::assume":
                cond = value.args[1]    # (the user's promise also spares the bounds guards it implies)
                cond = cond.value if isinstance(cond, tirx.Cast) else cond
                self.assumed.append(cond)
            # a call taking a global element's address (T.atomic_add(C[i], v)) runs only where
            # the element is inside its tensor, as upstream guards it; a cp.async from one copies
            # zeros there instead (tl::cp_async_gs_conditional, upstream's form; a predicate the
            # user gave, T.ptx_cp_async(..., predicate), still holds too)
            name = extern_name(value) or ""
            if name == "__syncthreads" and self.thread_conds and self.ws is None and self.role_block is None:
                # the user's barrier under an `if` some threads skip: over the threads it selects,
                # or split out of the `if` (upstream: partial barrier, or an error)
                got = thread_regions.guarded_sync(self)
                if got is not None:
                    return barrier_hoist.marker(user=True) if barrier_hoist.is_marker(got) else got
            if rw.address_guards and name.startswith(("tl::cp_async_gs<", "tl::cp_async_gs_conditional<")):
                dst, src, *predicate = value.args[1:]
                cond = functools.reduce(tirx.And, rw.address_guards + predicate)
                return evaluate_extern("tl::cp_async_gs_conditional" + name[name.index("<"):], dst, src, cond,
                                       span=stmt.span)
            return _guarded(tirx.Evaluate(value, span=stmt.span), rw.address_guards)
        if is_parallel_nest(stmt):
            return self.lower_parallel(stmt)
        if isinstance(stmt, (tirx.For, tirx.While)):
            repeats = not (isinstance(stmt, tirx.For) and const_int(self.rewrite(stmt.extent)) == 1)
            self.loop_depth += repeats
            pushed = repeats and isinstance(stmt, tirx.For)
            if pushed:
                self.loops.append(stmt)
            try:
                if isinstance(stmt, tirx.For):
                    return self.lower_for(stmt)
                # a scalar `while` (every thread evaluates the condition)
                return tirx.While(self.rewrite(stmt.condition), thread_sync.lower_loop_body(self, stmt.body),
                                  span=stmt.span)
            finally:
                self.loop_depth -= repeats
                if pushed:
                    self.loops.pop()
        if isinstance(stmt, tirx.BufferStore):
            return self.store(stmt.buffer, list(stmt.indices), stmt.value, span=stmt.span)
        if isinstance(stmt, tirx.IfThenElse):
            return self.lower_if(stmt)
        if isinstance(stmt, tirx.Bind):
            return self.bind(stmt)
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == "reduce_scope":
            return lower_reduce.lower_thread_allreduce(self, stmt)
        if user_ws.is_ws(stmt):
            return user_ws.lower_block(self, stmt)    # T.ws(...): a warp-group role
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == user_ws.ROLE_ATTR:
            return self.lower(stmt.body)              # (its mark is for the barrier planner only)
        if isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == SAFE_VALUE_ATTR:
            # a T.annotate_safe_value scoped apart from the kernel's (kernel._strip_safe_values)
            outer = self.info.safe_values
            self.info.safe_values = {**{k: v for k, v in outer.items() if not k.same_as(stmt.node)},
                                     stmt.node: stmt.value}
            try:
                return seq([self.lower(stmt.body)])
            finally:
                self.info.safe_values = outer
        if isinstance(stmt, tirx.AttrStmt):
            return tirx.AttrStmt(stmt.node, stmt.attr_key, stmt.value, seq([self.lower(stmt.body)]), span=stmt.span)
        if isinstance(stmt, tirx.DeclBuffer):
            return stmt
        if isinstance(stmt, tirx.AssertStmt):
            return stmt
        raise LoweringError("TL0002", f"unsupported statement {type(stmt).__name__} in a kernel", stmt.span)

    def lower_if(self, stmt):
        """An `if`. Under a condition on the thread index (``thread_conds``: all enclosing ones)
        a barrier the compiler needs is a named barrier over the threads they select, or, where
        they select no warp-aligned range, one split out of the `if` (``thread_regions.guarded_sync``,
        ``barrier_hoist``)."""
        cond = self.rewrite(stmt.condition)
        known = as_logical(cond)     # (``(i >= 0) & (i < n)`` as two facts for the analyzer)
        if not uses_vars(stmt.condition, self.thread_vars):
            # a condition on a value that differs between threads (``c = Mask[tx] != 0; if c:``):
            # its tile ops are lowered as written; a barrier inside is split out (``barrier_hoist``)
            varying = self._varies(stmt.condition)
            other = None
            if stmt.else_case is not None:
                with self._thread_cond(tirx.Not(stmt.condition) if varying else None), \
                        self.an.constraint_scope(tirx.Not(known)):
                    other = self.lower(stmt.else_case)
            with self._thread_cond(stmt.condition if varying else None), self.an.constraint_scope(known):
                then = self.lower(stmt.then_case)
        else:
            other = None
            if stmt.else_case is not None:
                with self.an.constraint_scope(tirx.Not(known)):
                    other = self.lower_branch(stmt.else_case, tirx.Not(stmt.condition), stmt.span)
            with self.an.constraint_scope(known):
                then = self.lower_branch(stmt.then_case, stmt.condition, stmt.span)
        # a barrier its branches need that only part of the threads reach goes out of the `if`
        return barrier_hoist.split_if(self, tirx.IfThenElse(cond, seq([then]), other, span=stmt.span),
                                      lambda: thread_sync.sync_stmt(self))

    @contextlib.contextmanager
    def _thread_cond(self, cond):
        """``cond`` (where not None) among ``thread_conds`` while a branch is lowered: the
        condition that holds in it, negated for an else branch."""
        if cond is not None:
            self.thread_conds.append(cond)
        try:
            yield
        finally:
            if cond is not None:
                self.thread_conds.pop()

    def _varies(self, cond) -> bool:
        """Whether ``cond`` (no thread index in it) reads a value that differs between threads
        (``thread_regions.thread_varying``, computed once per kernel)."""
        if not hasattr(self, "_varying"):
            self._varying = thread_regions.thread_varying(self.info.body, self.thread_vars)
        return thread_regions.reads_any(cond, self._varying[len(self.thread_vars):])

    def lower_branch(self, body, cond, span):
        """A branch of an `if` on the thread index, ``cond`` holding in it; a thread region
        (``thread_regions``) is lowered for its own threads: ``T`` of the range, thread index from
        its first thread."""
        self.thread_conds.append(cond)
        region = self.regions.get(body)
        saved = (self.T, self.tid, self.thread_guard, self.thread_region)
        try:
            if region is None:
                guard = self.an.simplify(thread_regions.conjunction(self.thread_conds))   # (not tx < 128: 128 <= tx)
                self.thread_guard = tirx.IfThenElse(guard, body, None, span=span)
                return self.lower(body)
            if self.ws is not None:
                raise LoweringError("TL0002", "tile work under an `if` on the thread index in a warp-specialised "
                                    "kernel is not supported yet (set tl.disable_warp_specialized)", span)
            self.T = region.count
            self.tid = simplify(self.info.tid - i32(region.first)) if region.first else self.info.tid
            self.thread_guard, self.thread_region = None, region
            return self.lower(body)
        finally:
            self.T, self.tid, self.thread_guard, self.thread_region = saved
            self.thread_conds.pop()

    def check_all_threads(self, what: str, span, stmt=None):
        """A tile op spreads its elements over every thread of the block; under an `if` on the
        thread index only some threads run it, and the others' elements would silently be skipped.
        An op over memory only, under a condition that selects a range of threads
        (``tx < 128``, ``128 <= tx < 256``), is spread over those threads instead (upstream's
        thread bounds): the range ``(first, count)`` is returned; None: every thread runs it."""
        if self.thread_guard is None:
            return None
        rng = self._selected_range(self.thread_guard.condition)
        if rng is not None and stmt is not None and not _touches_fragment(stmt):
            return rng
        line = getattr(self.thread_guard.span, "line", None)
        where = f" (line {line})" if line else ""
        raise LoweringError(
            "TL0002", f"{what} inside an `if` on the thread index{where} is not supported yet: the tile op "
            f"divides its elements among all {self.T} threads of the block, and the threads the condition "
            f"excludes would skip theirs", span,
            notes=["move the tile op out of the `if` (every thread runs it), or write the per-thread loop "
                   "with T.serial over the elements the selected threads own"])

    def _selected_range(self, cond):
        """(first, count) when ``cond`` holds exactly for threads first <= tid < first + count."""
        tid = self.tid
        with self.an.constraint_scope(cond):
            bound = self.an.const_int_bound(tid)
        lo, hi = int(bound.min_value), int(bound.max_value) + 1
        if not 0 <= lo < hi <= self.T:
            return None
        with self.an.constraint_scope(tirx.And(tirx.GE(tid, i32(lo)), tirx.LT(tid, i32(hi)))):
            if not self.prove(cond):
                return None
        return lo, hi - lo

    def on_threads(self, rng, lower):
        """``lower()`` with the tile op spread over the threads ``rng`` = (first, count) only."""
        if rng is None:
            return lower()
        saved = self.T, self.tid
        self.T, self.tid = rng[1], simplify(self.tid - i32(rng[0])) if rng[0] else self.tid
        try:
            return lower()
        finally:
            self.T, self.tid = saved

    def lower_for(self, loop):
        ws = self.ws is not None and loop.same_as(self.ws.loop)
        if ws or pipelined_loop.is_pipelined(loop):
            self.pipelining += 1    # (its schedule's barriers are ours: thread_sync.user_placed)
            try:
                return warp_specialize.lower_loop(self, loop) if ws else pipeline.lower_pipelined(self, loop)
            finally:
                self.pipelining -= 1
        if const_int(loop.min) == 0:
            self.bind_loop(loop.loop_var, self.rewrite(loop.extent))
        body = thread_sync.lower_loop_body(self, loop.body)
        ann = {k: v for k, v in loop.annotations.items() if not k.startswith("tl.")}
        return tirx.For(loop.loop_var, self.rewrite(loop.min), self.rewrite(loop.extent), loop.kind, body,
                        thread_binding=loop.thread_binding, annotations=ann, step=loop.step, span=loop.span)

    def lower_op(self, stmt):
        name = op_name(stmt)
        if name in ("copy", "fill", "gemm", "reduce", "cumsum", "im2col"):
            rng = self.check_all_threads(f"T.{name}", stmt.span, stmt if name in ("copy", "fill", "im2col") else None)
            if rng is not None:
                return self.on_threads(rng, lambda: self._lower_op(stmt, name))
        return self._lower_op(stmt, name)

    def _lower_op(self, stmt, name):
        if name == "copy":
            if user_ws.is_tma_copy(stmt):
                return user_ws.lower_tma_copy(self, stmt)
            if self.ws is not None and self.ws.is_head(stmt):
                return None      # the TMA producer loads it (warp_specialize._heads)
            if stmt in self.layouts.conversions:     # two fragments of different layouts
                return lower_reduce.convert_layout(self, stmt)
            return lower_copy.lower_copy(self, stmt)
        if name == "fill":
            return lower_copy.lower_fill(self, stmt)
        if name == "gemm":
            return self.lower_gemm(stmt)
        if name == "wait_wgmma":
            return self.lower_wait_wgmma(stmt)
        if name == "warpgroup_fence_operand":
            return self.lower_warpgroup_fence(stmt)
        if name == "gemm_sp":
            self.check_all_threads("T.gemm_sp", stmt.span)
            return self.lower_gemm_sp(stmt)
        if name == "reduce":
            return lower_reduce.lower_reduce(self, stmt)
        if name == "cumsum":
            return lower_reduce.lower_cumsum(self, stmt)
        if name == "atomic":    # (line staging first, on by default: None where it is off or does not apply)
            return atomic_staging.lower_atomic(self, stmt) or lower_copy.lower_atomic(self, stmt)
        if name == "im2col":
            return lower_im2col.lower_im2col(self, stmt)
        if name == "print":
            return lower_print.lower_print(self, stmt)
        if name in lower_reduce.REDUCER_OPS:
            return lower_reduce.lower_reducer_op(self, stmt, name)
        if name in ("annotate_layout",):
            return None
        if name == "use_swizzle":
            return None
        if user_barriers.handles(name):     # T.alloc_barrier, T.mbarrier_* (user-written mbarriers)
            return user_barriers.lower(self, stmt, name)
        raise LoweringError("TL0002", f"T.{name} has no lowering yet", stmt.span)

    # ----- T.Parallel --------------------------------------------------------------------
    def lower_parallel(self, stmt):
        rng = self.check_all_threads("T.Parallel", stmt.span, stmt)
        if rng is not None:
            return self.on_threads(rng, lambda: self._lower_parallel(stmt))
        return self._lower_parallel(stmt)

    def _lower_parallel(self, stmt):
        if self.in_producer:    # a gathered copy the pipeline issues ahead: cp.async (lower_gather.py)
            gathered = lower_gather.lower_gather(self, stmt)
            if gathered is not None:
                return gathered
        loop_vars, extents, body = parallel_nest(stmt)
        unswitched = self._unswitch_select(stmt, loop_vars, extents, body)
        if unswitched is not None:
            return unswitched
        return self._lower_parallel_nest(stmt, loop_vars, body)

    def _unswitch_select(self, stmt, loop_vars, extents, body):
        """A nest whose one store writes ``if_then_else(c, a, b)``, c a comparison of integers (or
        ``and`` / ``or`` / ``not`` of them): attention's causal mask (``q >= k``, 0 where it holds)
        or a length mask (``q >= len_q or k >= len_k``, 0 where it holds nowhere). The condition
        under which c holds at every point of the nest, or at none, is a scalar (interval analysis
        over the loop domain); the nest becomes ``if that: the store of a (or b), else: the nest as
        written`` (a uniform branch: causal attention stores 0 in every iteration but the diagonal
        one, a varlen kernel in every tile but the last), or just that store where the analyzer
        proves the scalar condition. A side storing 0 is tried first (transform/fuse_clear.py folds
        such a store into the gemm it feeds), else ``a``; a side the loops around never reach is
        skipped (``_never_around``). None where this does not apply."""
        if not isinstance(body, tirx.BufferStore):
            return None
        value = body.value
        if not (isinstance(value, ir.Call) and getattr(value.op, "name", "") == "prim.if_then_else"):
            return None
        cond, a, b = value.args
        dom = {v: tvm.sym.IntervalSet(0, e - 1) for v, e in zip(loop_vars, extents)}
        stored = body.buffer
        sides = ((True, a), (False, b))
        if is_zero_const(b) and not is_zero_const(a):
            sides = sides[::-1]
        both = bool(self.configs.get(MASK_UNSWITCH_BOTH_KEY))
        branches = []    # (scalar condition, the nest storing that side)
        for always, side in sides:
            scalar = self._uniform_condition(cond, always, loop_vars, dom, stored)
            if scalar is None or self._never_around(scalar):
                continue
            scalar = self.an.simplify(self.rewrite(scalar))
            if isinstance(scalar, tirx.IntImm) and not scalar.value:
                continue     # provably not uniform (a mask that always bites somewhere): the other side
            plain = _replace_innermost(stmt, len(loop_vars), tirx.BufferStore(body.buffer, side, body.indices,
                                                                              span=body.span))
            lowered = self._lower_parallel_nest(plain, loop_vars, parallel_nest(plain)[2])
            if self.prove(scalar):
                return lowered if not branches else tirx.IfThenElse(branches[0][0], branches[0][1], lowered,
                                                                    span=stmt.span)
            branches.append((scalar, lowered))
            if not both:
                break
        if not branches:
            return None
        out = self._lower_parallel_nest(stmt, loop_vars, body)
        for scalar, lowered in reversed(branches):
            out = tirx.IfThenElse(scalar, lowered, out, span=stmt.span)
        return out

    def _never_around(self, cond) -> bool:
        """``cond`` (``_uniform_condition``'s, as written) fails in every iteration of the ``for``
        loops around the statement, over their ranges: causal attention's backward loop starts at
        the diagonal block (``for k in T.Pipelined(by * block_M // block_N, ...)``), so its mask is
        never zero everywhere, and a branch for that side would only cost the kept side its own."""
        if isinstance(cond, tirx.And):
            return self._never_around(cond.a) or self._never_around(cond.b)
        if not (isinstance(cond, tirx.GE) and is_zero_const(cond.b)) or not self.loops:
            return False
        dom = {f.loop_var: tvm.sym.IntervalSet(f.min, f.min + f.extent - 1) for f in self.loops}
        reach = self.an.int_set(cond.a, dom)
        return not reach.is_everything() and not uses_vars(reach.max_value, list(dom)) and \
            self.prove(reach.max_value < 0)

    def _uniform_condition(self, cond, holds, loop_vars, dom, stored):
        """A condition free of ``loop_vars`` under which ``cond`` holds (``holds``) or fails at every
        point of ``dom``, or None where none is found. Comparisons of integers (no load of the buffer
        ``stored``, whose store the nest is) by their bound over the domain; ``and`` / ``or`` / ``not``
        by their parts."""
        if isinstance(cond, tirx.Not):
            return self._uniform_condition(cond.a, not holds, loop_vars, dom, stored)
        if isinstance(cond, (tirx.And, tirx.Or)):
            if isinstance(cond, tirx.And) != holds:
                return None      # "a or b" everywhere / "a and b" nowhere: not from the parts alone
            parts = [self._uniform_condition(x, holds, loop_vars, dom, stored) for x in (cond.a, cond.b)]
            return None if any(p is None for p in parts) else tirx.And(*parts)
        if isinstance(cond, (tirx.GE, tirx.GT)):
            diff = cond.a - cond.b - (1 if isinstance(cond, tirx.GT) else 0)
        elif isinstance(cond, (tirx.LE, tirx.LT)):
            diff = cond.b - cond.a - (1 if isinstance(cond, tirx.LT) else 0)
        else:
            return None
        if not dtype_of(diff).startswith("int") or any(e.source.same_as(stored) for e in tensor_loads(diff)):
            return None
        if not holds:
            diff = -diff - 1     # c fails at a point: diff < 0 there, i.e. -diff - 1 >= 0
        low = self.an.int_set(diff, dom)
        if low.is_everything() or uses_vars(low.min_value, loop_vars):
            return None
        return low.min_value >= 0

    def _lower_parallel_nest(self, stmt, loop_vars, body):
        layout = self.layouts.loops[loop_vars[0]]
        if layout.num_threads != self.T:     # over a range of the threads (check_all_threads)
            layout = memory_loop_layout(body, list(layout.shape), self.T, loop_vars[-1])
        # thread_sync.thread_elements: which thread touches which shared element
        self.__dict__.setdefault("nest_layouts", {})[stmt] = (layout, self.T, self.tid)
        v = tirx.Var("v", "int32")
        self.bind_loop(v, max(layout.local_size, 1))
        idx = layout.index(self.tid, v)
        loop = _LoopContext(loop_vars, idx, layout, v)
        saved = dict(self.vmap)
        for var, e in zip(loop_vars, idx):
            self.vmap[var] = e
        new_body = self._lower_parallel_body(body, loop)
        self.vmap = saved
        extents = [f.extent for f in nest_loops(stmt, len(loop_vars))]
        if list(layout.shape) != [const_int(n) for n in extents]:
            # a loop shorter than the layout it runs over (layout_inference: a fragment's layout
            # over part of it, or a dynamic extent's constant upper bound)
            inside = [tirx.LT(e, self.rewrite(n)) for e, n, m in zip(idx, extents, layout.shape)
                      if const_int(n) != m]
            if inside:
                cond = inside[0]
                for c in inside[1:]:
                    cond = tirx.And(cond, c)
                new_body = tirx.IfThenElse(cond, new_body, None)
        if layout.replication > 1 and _writes_memory(body, self.layouts.reducers):
            first = tirx.EQ(layout.replica_index(self.tid), i32(0))
            # the registers of whole-block reducers take one replica's update only (the all-reduce
            # adds every thread's partial); other registers are each replica's own copy
            folded = {self.frag[b] for b, plan in self.layouts.reducers.items() if plan is None and b in self.frag}
            own = set(self.frag.values()) - folded
            if _writes_registers(new_body, own):
                # every replica keeps its own copy of the registers the body writes (a replicated
                # ``mean[i] = ...`` read by every thread later): only the memory effects (and
                # whole-block reducer updates) are left to the first replica
                new_body = _guard_effects(new_body, first, own, self.layouts.reducers, folded)
            else:
                new_body = tirx.IfThenElse(first, new_body, None)
        n = max(layout.local_size, 1)
        if n == 1:
            return substitute_stmt(new_body, {v: i32(0)})
        w = _cast_vector_width(new_body, v, n, set(self.frag.values()))
        if w > 1:   # a register-to-register cast: lanes of a vectorized cast (paired conversions)
            vo, vi = tirx.Var("v", "int32"), tirx.Var("vi", "int32")
            inner = tirx.For(vi, i32(0), i32(w), tirx.ForKind.VECTORIZED,
                             substitute_stmt(new_body, {v: vo * w + vi}))
            if n == w:
                return substitute_stmt(inner, {vo: i32(0)})
            return tirx.For(vo, i32(0), i32(n // w), tirx.ForKind.SERIAL, inner,
                            annotations={"pragma_unroll": True}, span=stmt.span)
        wide = vectorize_register_loop(new_body, v, n, self.an, loop_vars[0].name, span=stmt.span,
                                       annotations={"pragma_unroll": True}, declare=self.extra_allocs.append)
        if wide is not None:   # 16-byte memory accesses (transform/vectorize_parallel.py)
            return wide
        return tirx.For(v, i32(0), i32(n), tirx.ForKind.SERIAL, new_body,
                        annotations={"pragma_unroll": True}, span=stmt.span)

    def _lower_parallel_body(self, body, loop):
        if isinstance(body, tirx.SeqStmt):
            return seq([self._lower_parallel_body(s, loop) for s in body.seq])
        if isinstance(body, tirx.BufferStore):
            return self.store(body.buffer, list(body.indices), body.value, loop=loop, span=body.span)
        if isinstance(body, tirx.IfThenElse):
            other = self._lower_parallel_body(body.else_case, loop) if body.else_case is not None else None
            return tirx.IfThenElse(self.rewrite(body.condition, loop), self._lower_parallel_body(body.then_case, loop),
                                   other, span=body.span)
        if isinstance(body, tirx.Evaluate) and is_tl_call(body.value, "reducer_update"):
            return lower_reduce.lower_reducer_update(self, body, loop)
        if isinstance(body, tirx.Evaluate):
            rw = _AccessRewriter(self, loop)
            out = tirx.Evaluate(rw.visit(body.value), span=body.span)
            return _guarded(out, rw.address_guards)   # (T.atomic_addx4(dKV[idx[i], j], ...))
        if isinstance(body, tirx.AllocBuffer):
            return body
        if isinstance(body, tirx.Bind):
            return self.bind(body, loop)
        if isinstance(body, tirx.For):
            inner = self._lower_parallel_body(body.body, loop)
            return tirx.For(body.loop_var, self.rewrite(body.min, loop), self.rewrite(body.extent, loop), body.kind,
                            inner, annotations={k: v for k, v in body.annotations.items() if not k.startswith("tl.")},
                            span=body.span)
        raise LoweringError("TL0002", f"unsupported statement {type(body).__name__} inside T.Parallel", body.span)

    # ----- T.gemm ------------------------------------------------------------------------
    def lower_gemm(self, stmt, asynchronous: bool = False):
        """The gemm call; ``asynchronous`` (wgmma, float accumulator): issue and commit only, the
        caller waits (``pipeline._lower_async_wgmma``, ``warp_specialize``)."""
        plan = self.layouts.gemms[stmt]
        args = stmt.value.args
        a, b, c = (decode_region(x) for x in args[:3])
        clear = args[6]
        if scope_of(b.buffer) not in SHARED_SCOPES:
            raise LoweringError("TL0002", "T.gemm's B operand must be in shared memory", stmt.span)
        b_ptr = self.shared_ptr(b.buffer, [self.rewrite(s) for s in b.starts])
        c_ptr = tirx.address_of(tirx.BufferLoad(self.frag[c.buffer], [i32(0)]))
        a_shared = scope_of(a.buffer) in SHARED_SCOPES
        if a_shared:
            a_ptr = self.shared_ptr(a.buffer, [self.rewrite(s) for s in a.starts])
        else:
            a_ptr = tirx.address_of(tirx.BufferLoad(self.frag[a.buffer], [i32(0)]))
        if plan.no_wait:
            return self._lower_wgmma_no_wait(stmt, plan, a, b, a_ptr, c_ptr, a_shared, clear)
        if plan.kind == "fma":
            make = lambda cl: evaluate_extern(fma_call(plan, a, b, c, a_shared, cl), a_ptr, b_ptr, c_ptr, span=stmt.span)
        elif plan.kind == "wgmma":
            fn = "tl::wgmma_gemm_ss" if a_shared else "tl::wgmma_gemm_rs"
            if asynchronous:
                fn = "tl::wgmma_gemm_ss_async" if a_shared else "tl::wgmma_gemm_rs_async"
            e = nbytes(str(b.buffer.dtype))
            swa = self._narrow_slab(a.buffer, (plan.M if plan.trans_a else plan.K) * e) if a_shared else 0
            swb = self._narrow_slab(b.buffer, (plan.K if plan.trans_b else plan.N) * e)
            common = (f"{plan.M}, {plan.N}, {plan.K}, {_wgmma_warpgroups(plan, swa, swb)}, {_b(plan.trans_a)}, "
                      f"{_b(plan.trans_b)}")
            make = lambda cl: evaluate_extern(f"{fn}<{common}, {cl}>", a_ptr, b_ptr, c_ptr, span=stmt.span)
            # (transform/fuse_clear.py: a zero fill of all of them folded into the gemm's scale-d)
            regs = plan.M // plan.warpgroups * (plan.N // plan.warpgroups_n) // 128
            acc = self.frag[c.buffer]
            self.wgmma_acc_regs[acc] = regs if self.wgmma_acc_regs.get(acc, regs) == regs else 0
        else:
            ldb, sb = self._mma_rows(b.buffer)
            k = plan.K
            b_ptr, cb = self._column_subtile(b, b_ptr)
            pack = _packed_int4(a.buffer, b.buffer)
            if pack:   # int4: tl::gemm_ss on the operands' bytes (K, rows in bytes)
                k, ldb = k // 2, ldb // 2
            common = f"{plan.M}, {plan.N}, {k}, {plan.warp_m}, {plan.warp_n}, {_b(plan.trans_a)}, {_b(plan.trans_b)}"
            tf32 = (self._holds_tf32(a.buffer) | 2 * self._holds_tf32(b.buffer),)
            if a_shared:
                lda, sa = self._mma_rows(a.buffer)
                a_ptr, ca = self._column_subtile(a, a_ptr)
                if pack:
                    lda //= 2
                tail = _defaulted_tail((ca, cb), (sa, sb), tf32, (pack,))
                make = lambda cl: evaluate_extern(f"tl::{plan.entry}gemm_ss<{common}, {cl}, {lda}, {ldb}{tail}>", a_ptr,
                                                  b_ptr, c_ptr, span=stmt.span)
            else:
                tail = _defaulted_tail((cb,), (sb,), tf32)
                make = lambda cl: evaluate_extern(f"tl::{plan.entry}gemm_rs<{common}, {cl}, {ldb}{tail}>", a_ptr, b_ptr,
                                                  c_ptr, span=stmt.span)
        flag = const_int(clear)
        if flag is not None:
            return make("true" if flag else "false")
        return tirx.IfThenElse(self.rewrite(clear), make("true"), make("false"), span=stmt.span)

    def _narrow_slab(self, buf, row_bytes: int) -> int:
        """The slab width (bytes) of a whole wgmma operand ``buf`` where its layout's slabs are
        narrower than the swizzle ``tl::wgmma_gemm_*`` derives from the operand's ``row_bytes``
        (``narrow_b_slab_bytes``); 0 where they are the same."""
        from tilelang.layout import SharedLayout

        layout = self.layouts.shared.get(buf)
        if not isinstance(layout, SharedLayout) or not layout.slab_bytes:
            return 0
        return layout.slab_bytes if layout.slab_bytes < wgmma_swizzle_bytes(row_bytes) else 0

    def _holds_tf32(self, buf) -> int:
        """1 when the float32 gemm operand ``buf`` was declared ``T.tfloat32``: its values are
        tf32 already and go to the tensor cores unrounded (``tl::gemm_ss`` / ``gemm_rs``'s TF32), as
        upstream passes every float32 operand; an operand declared float32 is rounded to nearest."""
        return int(str(buf.dtype) == "float32" and buf in self.info.tfloat32)

    def _mma_rows(self, buf):
        """(row stride, slab stride) of an mma.sync shared operand, in elements, as ``tl::gemm_ss`` /
        ``gemm_rs`` take them: (its row length, 0), or for an operand in the wgmma slab layout of
        several slabs (a buffer a wgmma gemm of the same kernel shares) (the slab width, rows x
        slab width)."""
        from tilelang.layout import SharedLayout

        layout = self.layouts.shared.get(buf)
        ld = const_int(buf.shape[-1])
        if isinstance(layout, SharedLayout) and layout.slab and layout.group > 1 and layout.slab_width < ld:
            return layout.slab_width, const_int(buf.shape[-2]) * layout.slab_width
        return ld, 0

    def _column_subtile(self, region, ptr):
        """(pointer, chunk offset) of an mma.sync shared operand: a sub-tile starting inside a
        swizzle period of its rows (``A_shared[:, 32:]`` of a 64-column tile) is addressed from its
        rows' start plus a 16-byte-chunk offset (``tl::gemm_ss``'s CA / CB), so the XOR applies to
        the buffer's own chunk index; any other operand keeps ``ptr`` and offset 0."""
        from tilelang.layout import SharedLayout

        layout = self.layouts.shared.get(region.buffer)
        col = const_int(region.starts[-1]) if region.starts else None
        if layout is None or not isinstance(layout, SharedLayout) or layout.group <= 1 or not col \
                or col % (layout.group * layout.vector) == 0:
            return ptr, 0
        starts = [self.rewrite(s) for s in region.starts[:-1]] + [i32(0)]
        return self.shared_ptr(region.buffer, starts), col // layout.vector

    # ----- T.wgmma_gemm / T.wait_wgmma ---------------------------------------------------------
    def _wgmma_descriptor(self, region, mn_major: bool, k: int):
        """``tl::initialize_wgmma_descriptor<SW, LBO, SBO>(address)`` of a shared operand: the
        address of the shared allocation plus the byte offset of the operand's first element (a
        slice along K starts at a slab), added to the address when constant, else given to
        ``tl::increase_descriptor_offset``."""
        buf = region.buffer
        layout = self.layouts.shared[buf]
        e = nbytes(str(buf.dtype))
        sw = layout.slab_width * e
        lbo = k * sw // 16 if mn_major else 1
        view = self.smem_views[buf]
        base = tirx.address_of(tirx.BufferLoad(view, [-view.elem_offset]))
        delta = simplify((view.elem_offset + self.shared_offset(buf, [self.rewrite(x) for x in region.starts])) * e)
        addr = tirx.call_extern("int32", "tl::smem_addr", base)
        step = const_int(delta)
        if step:
            addr = addr + i32(step)
        desc = tirx.call_extern("uint64", f"tl::initialize_wgmma_descriptor<{sw}, {lbo}, {8 * sw // 16}>", addr)
        if step is None:
            desc = tirx.call_extern("uint64", "tl::increase_descriptor_offset", desc, delta)
        return desc, sw

    def _lower_wgmma_no_wait(self, stmt, plan, a, b, a_ptr, c_ptr, a_shared, clear):
        """T.wgmma_gemm: issue and commit; a float accumulator is left in flight until the user's
        T.wait_wgmma (a half one is packed into 32-bit registers, so its call waits)."""
        desc_b, swb = self._wgmma_descriptor(b, not plan.trans_b, plan.K)
        ta = {"float16": "half", "bfloat16": "__nv_bfloat16", "float8_e4m3fn": "__nv_fp8_e4m3",
              "float8_e4m3": "__nv_fp8_e4m3", "float8_e5m2": "__nv_fp8_e5m2"}[str(b.buffer.dtype)]
        if a_shared:
            desc_a, swa = self._wgmma_descriptor(a, plan.trans_a, plan.K)
            head = (f"tl::wgmma_gemm_ss_desc<{plan.M}, {plan.N}, {plan.K}, {_wgmma_warpgroups(plan)}, {_b(plan.trans_a)}, "
                    f"{_b(plan.trans_b)}")
            tail = f"{swa}, {swb}, {ta}>"
            make = lambda cl: evaluate_extern(f"{head}, {cl}, {tail}", desc_a, desc_b, c_ptr, span=stmt.span)
        else:
            head = f"tl::wgmma_gemm_rs_desc<{plan.M}, {plan.N}, {plan.K}, {_wgmma_warpgroups(plan)}, {_b(plan.trans_b)}"
            make = lambda cl: evaluate_extern(f"{head}, {cl}, {swb}>", a_ptr, desc_b, c_ptr, span=stmt.span)
        flag = const_int(clear)
        if flag is not None:
            return make("true" if flag else "false")
        return tirx.IfThenElse(self.rewrite(clear), make("true"), make("false"), span=stmt.span)

    def lower_gemm_sp(self, stmt):
        """``tl::gemm_sp_ss`` (src/tl/mma_macro.h) on shared operands: row-major, or (A and B, whole
        tiles) in the mma operands' XOR swizzle, which the template is told."""
        from tilelang.transform.layout_inference import _whole_swizzlable

        plan = self.layouts.sparse_gemms[stmt]
        args = stmt.value.args
        a, e, b, c = (decode_region(x) for x in args[:4])
        if plan.kind == "wgmma_sp":
            return self._lower_wgmma_sp(stmt, plan, a, e, b, c)
        swizzled = []
        for r in (a, e, b):
            layout = self.layouts.shared[r.buffer]
            sw = getattr(layout, "swizzle", False) and getattr(layout, "group", 1) > 1
            if getattr(layout, "slab", True) or (sw and (r is e or not _whole_swizzlable(r))):
                raise LoweringError("TL0201", f"T.gemm_sp reads '{r.buffer.name}' row-major (or, a whole A or B "
                                    f"tile, in the mma operand swizzle), but it has {layout.describe()}", stmt.span)
            swizzled.append(sw)
        ptrs = [self.shared_ptr(r.buffer, [self.rewrite(x) for x in r.starts]) for r in (a, e, b)]
        c_ptr = tirx.address_of(tirx.BufferLoad(self.frag[c.buffer], [i32(0)]))
        lds = ", ".join(str(const_int(r.buffer.shape[-1])) for r in (a, e, b))
        if swizzled[0] or swizzled[2]:
            lds += f", {_b(swizzled[0])}, {_b(swizzled[2])}"
        head = f"tl::gemm_sp_ss<{plan.M}, {plan.N}, {plan.K}, {plan.warp_m}, {plan.warp_n}, {_b(plan.trans_b)}"
        make = lambda cl: evaluate_extern(f"{head}, {cl}, {lds}>", *ptrs, c_ptr, span=stmt.span)
        flag = const_int(args[6])
        if flag is not None:
            return make("true" if flag else "false")
        return tirx.IfThenElse(self.rewrite(args[6]), make("true"), make("false"), span=stmt.span)

    def _lower_wgmma_sp(self, stmt, plan, a, e, b, c):
        """``tl::wgmma_sp_gemm_ss`` (src/tl/gemm_sp_sm90.h): A and B in the wgmma slab layout, E
        row-major."""
        for r, slab in ((a, True), (b, True), (e, False)):
            layout = self.layouts.shared[r.buffer]
            if bool(getattr(layout, "slab", False)) != slab or (not slab and getattr(layout, "swizzle", False)):
                raise LoweringError("TL0201", f"T.gemm_sp (sparse wgmma) reads '{r.buffer.name}' "
                                    f"{'in the wgmma slab layout' if slab else 'row-major'}, but it has "
                                    f"{layout.describe()}", stmt.span)
        ptrs = [self.shared_ptr(r.buffer, [self.rewrite(x) for x in r.starts]) for r in (a, e, b)]
        c_ptr = tirx.address_of(tirx.BufferLoad(self.frag[c.buffer], [i32(0)]))
        lde = const_int(e.buffer.shape[-1])
        head = f"tl::wgmma_sp_gemm_ss<{plan.M}, {plan.N}, {plan.K}, {plan.warpgroups}, {_b(plan.trans_b)}"
        make = lambda cl: evaluate_extern(f"{head}, {cl}, {lde}>", *ptrs, c_ptr, span=stmt.span)
        flag = const_int(stmt.value.args[6])
        if flag is not None:
            return make("true" if flag else "false")
        return tirx.IfThenElse(self.rewrite(stmt.value.args[6]), make("true"), make("false"), span=stmt.span)

    def lower_wait_wgmma(self, stmt):
        """``tl::wait_wgmma<n>()``, then the float accumulators of the kernel's (in a thread region:
        the region's) T.wgmma_gemm calls are pinned so that no access to them moves above the wait."""
        n = const_int(stmt.value.args[0])
        out = [evaluate_extern(f"tl::wait_wgmma<{n}>", span=stmt.span)]
        seen = []
        for g, plan in self.layouts.gemms.items():
            region = self.thread_region
            if not plan.no_wait or (region is not None and self.regions.get(g) is not region):
                continue    # (in a thread region: its own gemms; another region's fragments are not in scope)
            a, c = (decode_region(g.value.args[i]).buffer for i in (0, 2))
            for buf, fence in ((c, "tl::wgmma_fence_accumulator"), (a, "tl::wgmma_fence_operand")):
                if scope_of(buf) != FRAGMENT_SCOPE or any(buf.same_as(x) for x in seen):
                    continue
                if buf is c and str(c.dtype) != "float32":
                    continue        # a half accumulator's call already waited
                seen.append(buf)
                count = self.layouts.fragments[buf].local_size
                ptr = tirx.address_of(tirx.BufferLoad(self.frag[buf], [i32(0)]))
                out.append(evaluate_extern(f"{fence}<{count}>", ptr, span=stmt.span))
        return seq(out)

    def lower_warpgroup_fence(self, stmt):
        """T.warpgroup_fence_operand: the thread's registers of a fragment (``num_regs`` 32-bit
        ones from element ``offset``, else the rest) pinned by the same empty asm as the fences
        after T.wait_wgmma; 8-bit fragments have no such fence and lower to nothing."""
        args = stmt.value.args
        buf = decode_region(args[0]).buffer
        offset, regs = const_int(args[1]), const_int(args[2])
        if offset is None or regs is None:
            raise LoweringError("TL0002", "T.warpgroup_fence_operand needs a constant offset and num_regs", stmt.span)
        if scope_of(buf) == FRAGMENT_SCOPE and buf in self.frag:
            storage, local = self.frag[buf], self.layouts.fragments[buf].local_size
        elif scope_of(buf) == "local":
            storage, local = buf, math.prod(const_int(d) or 1 for d in buf.shape)
        else:
            raise LoweringError("TL0002", f"T.warpgroup_fence_operand: '{buf.name}' is not a register fragment "
                                f"(scope {scope_of(buf)})", stmt.span)
        bits = tvm.DataType(str(buf.dtype)).bits
        count = local - offset if regs < 0 else min(regs * max(1, 32 // bits), local - offset)
        if bits == 16:
            count -= count % 2
        if count <= 0 or bits not in (16, 32):
            return None
        ptr = tirx.address_of(tirx.BufferLoad(storage, [i32(offset)]))
        fence = "tl::wgmma_fence_accumulator" if str(buf.dtype) == "float32" else "tl::wgmma_fence_operand"
        return evaluate_extern(f"{fence}<{count}>", ptr, span=stmt.span)

    # ----- the kernel --------------------------------------------------------------------
    def run(self):
        body = self.info.body
        swz = block_order.find_swizzle(body)
        # the block order: the user's T.use_swizzle, else longest blocks first where that gains
        prelude = self._block_swizzle(*swz) if swz is not None else block_order.plan(self)
        lowered = early_prologue.place(self, barrier_hoist.settle(self.lower(body)))
        init = []
        persistent = self.ws is not None and self.ws.persistent is not None
        if self.ws is not None:
            # a persistent kernel computes its block indices (and their swizzle) per tile
            lowered = warp_specialize.guard_consumers(lowered, self, prelude if persistent else ())
            init = warp_specialize.init_barriers(self)
            if persistent:
                prelude = []
        # The declared extent of a dynamic shared allocation is irrelevant: the launch passes
        # the real size (``smem_bytes``).
        allocs = [tirx.AllocBuffer(self.smem)]
        tail = not (isinstance(self.tail_bytes, int) and self.tail_bytes == 0)
        if tail:    # the run-time-extent buffers' start (_plan_tail)
            allocs.append(tirx.Bind(self.smem_tail, i32(self.tail_start())))
        prelude = prelude + [tirx.DeclBuffer(v, data=p.data) for p, (v, _) in self.strided.items()]
        allocs += [tirx.DeclBuffer(v, data=self.smem.data) for v in self.smem_views.values()]
        allocs += [tirx.DeclBuffer(v, data=self.smem.data) for v in self.extra_allocs]
        entry, lowered = self._prefetch_tensormaps(lowered)
        allocs += entry + init
        if self.ws is not None and self.ws.cluster is not None:
            # no block exits while its peer may still multicast into it or arrive on its barriers
            lowered = seq([lowered, evaluate_extern("tl::cluster_sync")])
        inner = seq(prelude + allocs + [lowered]) if self.smem_bytes or tail else seq(prelude + [lowered])
        for iv, extent in reversed(self.info.launch):
            tag = str(iv.thread_tag)
            if tag == "threadIdx.x" and self.extra_threads:
                extent = extent + self.extra_threads
            if persistent and tag in ("blockIdx.y", "blockIdx.z"):
                continue    # a 1-D grid of min(tiles, SMs) blocks (the launcher sizes it)
            if persistent and tag == "blockIdx.x":
                # the simplifier bounds blockIdx.x by this extent: the grid has up to `tiles` blocks
                extent = self.ws.persistent.tiles
                if const_int(extent) is None:
                    # A tile count computed from scalar parameters: the body recomputes its factors
                    # (block indices from the tile), and TVM's codegen would hoist the shared part
                    # to the host and pass it as an unbound kernel argument. The launcher sizes the
                    # grid (artifact.grid), so the attribute only bounds blockIdx.x: keep it loose.
                    extent = i32(2**31 - 1)
            inner = tirx.AttrStmt(iv, "thread_extent", extent, inner)
        return inner

    def _prefetch_tensormaps(self, lowered):
        """Thread 0 prefetches, first thing (before the barrier initialisation and its block
        barrier), every tensor map the kernel uses; the prefetches the warp-specialised producer
        issues right before its first load are dropped, so a map is fetched while the block sets
        up rather than when the first load or store issues (upstream prefetches all its maps at
        kernel entry). Opt-in (``tl.enable_tensormap_prefetch``; its earlier form, the maps no
        producer prefetched only, measured neutral to 1 % slower in session 28).
        -> (entry statements, ``lowered`` without its own prefetches)."""
        if not self.tensormaps or not self.configs.get(TENSORMAP_PREFETCH):
            return [], lowered

        lowered = map_stmts(lowered, lambda st: seq([]) if extern_name(st) == "tl::prefetch_tma_descriptor" else None)
        prefetch = [evaluate_extern("tl::prefetch_tma_descriptor", tma.tmap(j)) for j in range(len(self.tensormaps))]
        return [tirx.IfThenElse(tirx.EQ(self.info.tid, i32(0)), seq(prefetch), None)], lowered

    def _block_swizzle(self, panel, order):
        bx = self.info.block_vars.get("blockIdx.x")
        by = self.info.block_vars.get("blockIdx.y")
        if bx is None or by is None:
            return []
        launch = self.info.launch_dims()
        gx, gy = launch["blockIdx.x"][1], launch["blockIdx.y"][1]
        block_by, block_bx = by, bx
        cluster = self.ws.cluster if self.ws is not None else None
        if cluster is not None and cluster.persistent:
            cluster = None   # (a persistent cluster multicasts where the user's order pairs tiles up)
        if cluster is not None:
            if order == "col":
                return []     # (column panels over cluster rows: not done; the plain order shares B)
            # the two blocks of a cluster (blockIdx.y = 2m, 2m + 1) stay vertical neighbours: the
            # panels are laid over cluster rows m, and each block takes row 2 m' + its rank
            by, gy = tirx.floordiv(by, i32(2)), tirx.floordiv(gy, i32(2))
        # the launch order (blockIdx.x fastest): consecutive blocks are the ones in flight together
        lin = by * gx + bx
        if order == "col":   # panels of block columns: the same walk with the axes' roles swapped
            gx, gy = gy, gx
            block_by, block_bx = block_bx, block_by
        # All operands are non-negative: C division (truncdiv) is exact, and stays plain / and %
        # where the simplifier cannot see the signs (a persistent kernel's tile indices).
        per_group = gx * panel
        group = tirx.truncdiv(lin, per_group)
        first = group * panel
        size = tirx.min(gy - first, i32(panel))
        rem = tirx.truncmod(lin, per_group)
        row = first + tirx.truncmod(rem, size)
        if cluster is not None:
            row = row * 2 + cluster.rank
        new_by = tirx.Var(f"{block_by.name}_swz", "int32")
        new_bx = tirx.Var(f"{block_bx.name}_swz", "int32")
        self.vmap[block_by] = new_by
        self.vmap[block_bx] = new_bx
        if cluster is None:
            # a permutation of the grid: each new index keeps its block variable's range (panel
            # rows: first + rem % size < gy; columns: rem < gx * size, so rem / size < gx)
            for old, new in ((block_by, new_by), (block_bx, new_bx)):
                ext = next((e for iv, e in self.info.launch if iv.var.same_as(old)), None)
                if const_int(ext) is not None:
                    self.bind_loop(new, ext)
        # odd panels walk their columns backwards (upstream's rasterization2DRow / Column): the
        # blocks on either side of a panel boundary share their B (or A) tiles in L2
        # (branch-free: col, or gx - 1 - col where the panel's number is odd)
        col = tirx.truncdiv(rem, size)
        col = col + tirx.truncmod(group, i32(2)) * (gx - 1 - col * 2)
        return [tirx.Bind(new_by, row), tirx.Bind(new_bx, col)]


class _LoopContext:
    def __init__(self, loop_vars, idx, layout, v):
        self.loop_vars, self.idx, self.layout, self.v = loop_vars, idx, layout, v


def _guarded(stmt, conds: list):
    """``stmt`` under the conjunction of ``conds`` (itself when there are none)."""
    if not conds:
        return stmt
    return tirx.IfThenElse(functools.reduce(tirx.And, conds), stmt, None, span=stmt.span)


def _scalar_indices(indices) -> bool:
    """Whether no index is a vector (T.Ramp): outside T.Parallel a vector index is the user's own
    vector access, which the bounds guards leave alone."""
    return not any("x" in dtype_of(i) for i in indices)


class _AccessRewriter(ExprRewriter):
    """Substitute variables and redirect fragment/shared accesses to their lowered storage."""

    def __init__(self, lw: Lowerer, loop: _LoopContext | None):
        self.lw, self.loop = lw, loop
        self.address_guards = []    # bounds of global elements whose address is taken

    def _guard(self, buf, indices):
        """``Lowerer.global_guard`` of an element; outside T.Parallel a vector index (T.Ramp) is the
        user's own vector access and stays unguarded."""
        if self.loop is None and not _scalar_indices(indices):
            return None
        return self.lw.global_guard(buf, indices)

    def visit_Call(self, e):
        """``address_of(A[i])`` of a global tensor: a pointer cannot read 0 out of bounds, so its
        element is not guarded as a load; the bound check is kept for the caller to guard the whole
        statement (an Evaluate, in T.Parallel or not: ``address_guards``); a pointer elsewhere (a
        store's value, a bind) stays the user's own (TL0602 checks it)."""
        arg = e.args[0] if len(e.args) == 1 else None
        if (getattr(e.op, "name", "") != "tirx.address_of"
                or not isinstance(arg, ir.TensorLoad) or scope_of(arg.source) != "global"):
            return super().visit_Call(e)
        indices = [self.visit(i) for i in arg.indices]
        guard = self._guard(arg.source, indices)
        if guard is not None:
            self.address_guards.append(guard)
        buf, idx = self.element(arg.source, indices)
        return tirx.address_of(tirx.BufferLoad(buf, idx))

    def visit_var(self, var):
        for k, v in self.lw.vmap.items():
            if k.same_as(var):
                return v
        return var

    def visit_TensorLoad(self, e):
        if self.loop is not None:
            exact = self._exact_local(e.source, list(e.indices))
            if exact is not None:
                return tirx.BufferLoad(self.lw.frag[e.source], [exact])
        indices = [self.visit(i) for i in e.indices]
        buf, idx = self.element(e.source, indices)
        load = tirx.BufferLoad(buf, idx)
        guard = self._guard(e.source, indices)
        if guard is None:
            return load
        return tirx.if_then_else(guard, load, safe_value(self.lw.info, e.source, str(e.source.dtype)))

    def _exact_local(self, buf, indices):
        loop = self.loop
        if buf not in self.lw.frag or len(indices) != len(loop.loop_vars):
            return None
        if not all(isinstance(i, tirx.Var) and i.same_as(v) for i, v in zip(indices, loop.loop_vars)):
            return None
        if self.lw.layouts.fragments[buf] is not loop.layout and not self.lw.layouts.fragments[buf].same_as(loop.layout):
            return None
        return loop.v

    def element(self, buf, indices):
        lw = self.lw
        if buf in lw.frag:
            layout = lw.layouts.fragments[buf]
            local = lw.an.simplify(layout.local_of(indices))
            return lw.frag[buf], [local]
        if buf in lw.smem_views:
            return lw.smem_views[buf], [lw.an.simplify(lw.shared_offset(buf, indices))]
        if buf in lw.strided:
            # TVM 0.27 flattens parameters row-major whatever their declared strides: index a flat
            # view of the same data explicitly.
            view, strides = lw.strided[buf]
            return view, [lw.an.simplify(sum((i * s for i, s in zip(indices, strides)), i32(0)))]
        return buf, [lw.an.simplify(i) for i in indices]


def _touches_fragment(stmt) -> bool:
    """Whether a statement (a T.Parallel nest, a T.copy) reads or writes a fragment."""
    if op_name(stmt) is not None:
        return any(scope_of(decode_region(a).buffer) == FRAGMENT_SCOPE for a in stmt.value.args
                   if isinstance(a, ir.Call) and getattr(a.op, "name", "") == "tl.region")
    return any(scope_of(b) == FRAGMENT_SCOPE for b, _, _ in buffer_accesses(stmt))


def _replace_innermost(stmt, depth, body):
    """The T.Parallel nest ``stmt`` (``depth`` loops) with ``body`` as its innermost statement."""
    if depth == 0:
        return body
    return tirx.For(stmt.loop_var, stmt.min, stmt.extent, stmt.kind, _replace_innermost(stmt.body, depth - 1, body),
                    annotations=stmt.annotations, span=stmt.span)


def _writes_memory(body, reducers=None) -> bool:
    """Whether the body has effects one replica must not repeat. ``reducers``: {reducer: plan}
    (``Layouts.reducers``); an update of a reducer with a narrow plan runs on every replica (each
    replica group holds its own partials), one of a whole-block plan (``acc[i] += x`` of the older
    form too) on one replica only: the all-reduce takes every thread's partial."""
    found = []
    reducers = reducers or {}

    def visit(s):
        if isinstance(s, tirx.BufferStore) and scope_of(s.buffer) not in (FRAGMENT_SCOPE, "local"):
            found.append(s)
        if isinstance(s, tirx.BufferStore) and s.buffer in reducers and reducers[s.buffer] is None:
            found.append(s)
        if isinstance(s, tirx.Evaluate) and isinstance(s.value, ir.Call):
            if is_tl_call(s.value, "reducer_update") and reducers.get(s.value.args[0].source) is not None:
                return
            found.append(s)

    walk_stmts(body, visit)
    return bool(found)


def _writes_registers(body, registers) -> bool:
    """Whether the lowered body stores to one of ``registers`` (each replica's own copies)."""
    found = []
    walk_stmts(body, lambda s: found.append(s) if isinstance(s, tirx.BufferStore) and s.buffer in registers
               else None)
    return bool(found)


def _own_register(buf, registers, folded) -> bool:
    """A store every replica makes for itself: the fragment registers in ``registers`` and the
    body's own local temporaries, not a whole-block reducer's registers (``folded``)."""
    return buf in registers or (scope_of(buf) == "local" and buf not in folded)


def _guard_effects(body, cond, registers, reducers, folded=frozenset()):
    """``body`` with each statement of effect beyond this thread's own ``registers`` (a store to
    shared or global memory, a whole-block reducer's update, a call) under ``cond``; stores to
    ``registers`` and control flow stay unguarded."""
    def pre(s):
        if isinstance(s, tirx.BufferStore):
            if _own_register(s.buffer, registers, folded):
                return s
            return tirx.IfThenElse(cond, s, None)
        if isinstance(s, tirx.Evaluate):
            return tirx.IfThenElse(cond, s, None) if _writes_memory(s, reducers) else s
        return None

    return map_stmts(body, pre=pre)


def run_time_extent_error(buf, layout, stages: int):
    """The TL0002 LoweringError of a shared buffer of run-time extent that needs a compile-time one
    (staged by a pipeline, a swizzled layout, 4-bit elements), else None (also for a buffer of
    static shape: ``Lowerer._plan_tail``; the checker reports it too)."""
    if static_shape(buf):
        return None
    why = ("its tiles are staged by a software pipeline" if stages > 1 else
           "it has a swizzled layout (a gemm operand, a TMA box or T.annotate_layout)"
           if getattr(layout, "slab", False) or getattr(layout, "group", 1) > 1 or getattr(layout, "swizzled", False)
           else "4-bit elements are packed two to a byte" if dtype_bits(str(buf.dtype)) < 8 else None)
    if why is None:
        return None
    return LoweringError("TL0002", f"'{buf.name}' is allocated with run-time shape {list(buf.shape)}, but {why}",
                         getattr(buf, "span", None),
                         notes=["Allocate the largest tile the kernel handles (a constant) and copy only the part "
                                "in use (T.copy of a run-time extent guards the rest)."])


def _elems(buf) -> int:
    return math.prod(const_int(s) for s in buf.shape)



def _packed_int4(a, b) -> int:
    """``tl::gemm_ss``'s PACK for an int4 / uint4 gemm (A's code, 1 int4 or 2 uint4, plus 4 times
    B's: the operands are multiplied as the bytes holding them, two elements each, with mma.sync
    m16n8k64), else 0."""
    code = {"int4": 1, "uint4": 2}
    if str(a.dtype) in code and str(b.dtype) in code:
        return code[str(a.dtype)] + 4 * code[str(b.dtype)]
    return 0


def _defaulted_tail(*groups) -> str:
    """Template arguments that default to 0, in groups (``(CA, CB), (SA, SB)``) as ``, a, b, ...``:
    trailing groups of zeros left out, a group with a non-zero argument written whole."""
    groups = list(groups)
    while groups and not any(groups[-1]):
        groups.pop()
    return "".join(f", {a}" for g in groups for a in g)

def _b(flag: bool) -> str:
    return "true" if flag else "false"


def _wgmma_warpgroups(plan, swa: int = 0, swb: int = 0) -> str:
    """The warpgroup argument of the tl::wgmma_gemm_* templates: the number splitting M, or
    ``tl::Warpgroups<M, N>`` when warpgroups split N too, ``tl::Warpgroups<M, N, SWA, SWB>``
    when an operand's slabs are narrower than its row's swizzle (src/tl/gemm_sm90.h)."""
    if swa or swb:
        return f"tl::Warpgroups<{plan.warpgroups}, {plan.warpgroups_n}, {swa}, {swb}>"
    if plan.warpgroups_n == 1:
        return str(plan.warpgroups)
    return f"tl::Warpgroups<{plan.warpgroups}, {plan.warpgroups_n}>"


def _cast_vector_width(body, v, n, registers) -> int:
    """Lanes (2 or 4) in which the lowered T.Parallel body ``body`` (over register ``v`` of
    ``n``) runs as a vectorized loop, or 1. Only a converting register-to-register store
    qualifies: ``dst[v] = f(src[v], ...)`` with thread-local register arrays indexed by ``v``
    alone, loads of other values not depending on ``v``, and a cast with a paired CUDA
    conversion (``lower_copy.PAIRED_CASTS``). Other loops keep their serial form."""
    from tvm import ir

    from tilelang.tir_utils import tvm_ffi_walk

    if not isinstance(body, tirx.BufferStore) or body.buffer not in registers:
        return 1
    if len(body.indices) != 1 or not body.indices[0].same_as(v):
        return 1
    ok, casts, widest = [True], [], [nbytes(str(body.buffer.dtype))]

    def visit(e):
        if isinstance(e, ir.TensorLoad):
            if e.source in registers and len(e.indices) == 1 and e.indices[0].same_as(v):
                widest.append(nbytes(str(e.source.dtype)))
            elif uses_vars(e, [v]):
                ok[0] = False
        elif isinstance(e, tirx.Cast):
            casts.append((dtype_of(e.value), dtype_of(e)))
        elif isinstance(e, (ir.Call, tirx.Let)):
            ok[0] = False

    tvm_ffi_walk(body.value, visit)
    if not ok[0] or not any(c in lower_copy.PAIRED_CASTS for c in casts):
        return 1
    w = min(4, 16 // max(widest))
    while w > 1 and n % w:
        w //= 2
    return w


def _reads_own(value, buf) -> bool:
    """Whether ``value`` reads only the thread's own registers (local buffers other than ``buf``):
    a value read from shared or global memory may change under another thread between two reads."""
    return all(scope_of(e.source) in ("local", "local.var") and not e.source.same_as(buf)
               for e in tensor_loads(value))


def _written(stmt) -> list:
    """The buffers ``stmt`` may write: those it stores to, and any a call of it takes as an argument
    (a region's buffer, an element's address; not one read in an index or a value computed)."""
    out = []

    def arguments(e):
        if isinstance(e, tirx.Call):
            for a in e.args:
                if isinstance(a, ir.TensorLoad):
                    out.append(a.source)
                elif tirx.is_buffer_var(a):
                    out.append(a)

    def visit(s):
        if isinstance(s, tirx.BufferStore):
            out.append(s.buffer)
        elif isinstance(s, tirx.Evaluate):
            tvm_ffi_walk(s, arguments)
    walk_stmts(stmt, visit)
    return out


class _KnownScalars(ExprRewriter):
    """Reads of scalars replaced by the values ``Lowerer.known`` holds for them."""

    def __init__(self, known):
        self.known = known

    def visit_load(self, load, indices):
        value = self.known.get(load.source)
        if value is not None:
            return value
        return super().visit_load(load, indices)

