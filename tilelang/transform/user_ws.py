"""Warp-group roles the user writes: ``with T.ws(g...)`` blocks, and ``T.tma_copy``.

Contract. A kernel whose body holds ``T.ws`` blocks (``tl.ws`` attribute statements whose value
is a bitmask of 128-thread warp groups) is lowered as written: each block becomes ``if <the
thread is in those groups>:`` and the user's mbarriers order the roles; no automatic warp
specialisation applies, and loops run as written except for this pipelining:

* ``T.Pipelined(n, num_stages=S)``, S >= 2, whose body is T.ws blocks ordered by the user's
  mbarriers (``pipeline_roles``): every shared tile the loop writes and more than one role
  touches, and every barrier the loop uses, gets S copies; iteration k uses copy
  ``(k - min) % S``, and a wait's parity ``f(k)``, written for one barrier reused by every
  iteration, becomes ``f(min + (k - min) // S)``: the same count of the copy's own uses. No
  statement moves: the roles are different threads, so a producer simply runs up to S
  iterations ahead of its consumer (its wait for the consumer of iteration k - S passes on a
  fresh barrier). The loop runs as written (``info.user_ws_pipeline`` says why) where that
  renaming might not keep its meaning: a statement outside its T.ws blocks, a staged tile or
  barrier also used outside the loop, a barrier or tile indexed by the loop variable (stages
  written by hand), a barrier operation under a condition on it, a parity that is not an
  expression of it, a global tensor one role writes and another reads, cluster operations, a
  loop inside another loop, or S copies that would not fit in shared memory.

* The *compute role* is the set of warp groups of the blocks that hold fragment work (gemm,
  reductions, T.Parallel, fragments). Every such block names the same contiguous groups
  ``[lo, hi)``; the kernel's tile layouts are then built for ``128 (hi - lo)`` threads whose
  thread index is ``threadIdx.x - 128 lo`` (``apply`` narrows ``KernelInfo.threads``; the
  launch keeps the block the user asked for). Tile ops outside every ``T.ws`` block are refused
  in such a kernel: the threads outside the role would run them with indices of no element.
  Blocks that compute on *different* groups (each on fragments of its own) instead become
  ``if <thread in its groups>:`` branches before analysis, which ``thread_regions`` lays out
  for their own threads (tile ops outside them run on the whole block). Without user mbarriers
  the barrier planner orders shared memory between those branches; with them (FlashAttention-3's
  ping-pong) each branch is marked ``ROLE_ATTR`` and, as a T.ws block, left to the user's
  mbarriers.
* Any other block (a producer) spreads its memory-to-memory copies over its own threads, and
  issues ``T.tma_copy`` loads from one of them.
* Barriers the compiler inserts inside a block are named barriers over that block's threads
  (``thread_sync.sync_stmt``); between blocks the user's barriers order shared memory, so the
  barrier planner sees a block as touching nothing.
* ``T.tma_copy(src, dst, barrier=bar)`` (``tl.copy`` with a fifth operand, the barrier):
  global -> shared. Where the tile (the whole tile or one stage of it, ``tma.stage_slice``) is in
  the swizzled wgmma operand layout and the copy is a TMA box (``tma.tma_box_spec``), one thread
  of the block adds the tile's bytes to ``bar``'s transaction count and issues the boxes;
  otherwise the block's threads copy the tile themselves and fence their writes for the async
  proxy (their arrivals on ``bar`` then publish it). A shared -> global ``T.tma_copy`` is
  a plain copy by the block's threads. With ``cluster_mask`` the load is multicast
  (``tma.multicast``) and must be a TMA load; ``T.copy_cluster(src, dst, cluster_mask=m)``
  without a barrier is the same load completing on a barrier of its own (``lower_copy._tma_load``).
"""

from __future__ import annotations

from dataclasses import dataclass

from tvm import ir, tirx

from tilelang.language._ops import is_tl_call
from tilelang.language.dtypes import nbytes
from tilelang.tir_utils import (any_expr, buffer_roots, children, const_int, evaluate_extern, flatten, i32,
                                map_stmts, seq, tensor_loads, uses_vars, walk_stmts)
from tilelang.transform.kernel import FRAGMENT_SCOPE, LoweringError, decode_region, is_parallel_nest, scope_of

WS_ATTR = "tl.ws"
ROLE_ATTR = "tl.ws_role"    # a T.ws block of several computing roles, as a thread branch (``_as_thread_branches``)
GROUP = 128
_COMPUTE_OPS = ("gemm", "reduce", "cumsum")
_PIPELINE_KEYS = ("tl.num_stages", "tl.pipeline_order", "tl.pipeline_stage")


@dataclass
class Roles:
    lo: int          # the compute role: warp groups [lo, hi)
    hi: int
    total: int       # threads of the block as launched


def is_ws(stmt) -> bool:
    return isinstance(stmt, tirx.AttrStmt) and stmt.attr_key == WS_ATTR


def is_role(stmt) -> bool:
    """A T.ws block, or the thread branch one became (``ROLE_ATTR``): ordered against the other
    roles by the user's mbarriers, not by the barrier planner."""
    return isinstance(stmt, tirx.AttrStmt) and stmt.attr_key in (WS_ATTR, ROLE_ATTR)


def ws_blocks(body) -> list:
    out = []
    walk_stmts(body, lambda s: out.append(s) if is_ws(s) else None)
    return out


def _groups(mask: int) -> list:
    return [g for g in range(8) if (mask >> g) & 1]


def _touches_fragments(stmt) -> bool:
    found = []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            name = s.value.op.name[3:]
            if name in _COMPUTE_OPS:
                found.append(s)
            for a in s.value.args:
                if is_tl_call(a, "region") and scope_of(decode_region(a).buffer) == FRAGMENT_SCOPE:
                    found.append(s)
        elif is_parallel_nest(s):
            found.append(s)
        elif isinstance(s, tirx.BufferStore) and scope_of(s.buffer) == FRAGMENT_SCOPE:
            found.append(s)

    walk_stmts(stmt, visit)
    return bool(found)


def barrier_buffers(body) -> list:
    """The buffers of T.alloc_barrier: live for the whole kernel (``Lowerer._plan_memory``), so
    no tile borrows their bytes while a phase may still complete on them (``apply`` adds the
    tiles of staged loops)."""
    out = []
    walk_stmts(body, lambda s: out.append(s.value.args[0].source)
               if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "barrier_init") else None)
    return out


def _has_user_sync(body) -> bool:
    """A T.tma_copy load or a user mbarrier operation anywhere in the body."""
    return _user_sync(body) is not None


def _user_sync(body) -> str | None:
    """How the first T.tma_copy load (or T.copy_cluster multicast) or user mbarrier operation of
    the body is spelt, or None where there is none."""
    found = []

    def visit(s):
        if found:
            return
        if is_tma_copy(s) and scope_of(decode_region(s.value.args[0]).buffer) == "global":
            multicast = not isinstance(s.value.args[4], ir.TensorLoad)
            found.append("T.copy_cluster(cluster_mask=...)" if multicast else "T.tma_copy")
        elif isinstance(s, tirx.Evaluate) and is_tl_call(s.value) and s.value.op.name[3:] in (
                "barrier_init", "mbarrier_wait", "mbarrier_arrive", "mbarrier_expect_tx",
                "mbarrier_arrive_expect_tx", "mbarrier_arrive_cluster", "copy_cluster", "cp_async_barrier_noinc"):
            found.append(f"T.{s.value.op.name[3:]}")

    walk_stmts(body, visit)
    return found[0] if found else None


def _has_mma_gemm(stmt, layouts) -> bool:
    """Whether ``stmt`` holds a T.gemm planned on mma.sync (each gemm has its own kind on sm_90a)."""
    found = []

    def visit(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "gemm"):
            plan = layouts.gemms.get(s)
            if plan is None or plan.kind != "wgmma":
                found.append(s)

    walk_stmts(stmt, visit)
    return bool(found)


def _is_tile_stmt(s) -> bool:
    return (isinstance(s, tirx.Evaluate) and is_tl_call(s.value) and s.value.op.name[3:] in
            ("copy", "fill", "gemm", "reduce", "cumsum", "atomic")) or is_parallel_nest(s)


def apply(info, arch=None):
    """Narrow ``info`` to the compute role of a kernel with ``T.ws`` blocks (see the module
    docstring), multi-buffering its pipelined loops of role blocks for ``arch``'s shared memory
    (``pipeline_roles``); ``info`` unchanged when it has none."""
    info.barrier_buffers = barrier_buffers(info.body)
    blocks = ws_blocks(info.body)
    if not blocks:
        if _has_user_sync(info.body):
            # the user's mbarriers order the loop as written: no pipelining, no automatic roles
            info.pipelines_as_written = _as_written(info.body)
            info.body = _strip_pipelining(info.body)
            info.user_ws, info.has_user_ws = None, True
        return info
    total = info.num_threads
    compute = [b for b in blocks if _touches_fragments(b.body)]
    masks = {int(b.value.value) for b in compute}
    if len(masks) > 1:
        # several computing roles: each block is a thread region of its own threads; where the
        # user's mbarriers order them, the barrier planner leaves the roles to those
        ordered = _has_user_sync(info.body)
        info.body = _as_thread_branches(_strip_pipelining(info.body), info.tid, ordered)
        info.user_ws, info.has_user_ws = None, True
        return info
    info.body = _strip_pipelining(pipeline_roles(info, arch))
    # the tiles of a staged loop keep their bytes for the whole kernel too: the producer fills
    # them while the other roles may still run what comes before the loop
    info.barrier_buffers += [b for b in staged_copies(info.body) if b not in info.barrier_buffers]
    roles = None
    if masks:
        groups = _groups(masks.pop())
        lo, hi = groups[0], groups[-1] + 1
        if groups != list(range(lo, hi)):
            raise LoweringError("TL0002", f"T.ws{tuple(groups)}: a compute role must be consecutive warp groups",
                                compute[0].span)
        if len(info.threads) != 1:
            raise LoweringError("TL0002", "T.ws needs a one-dimensional thread block (threads=N)", compute[0].span)
        roles = Roles(lo, hi, total)
        info.threads = [GROUP * (hi - lo)]
        _refuse_outside(info.body)
    info.user_ws = roles
    info.has_user_ws = True
    return info


def _group_cond(tid, groups):
    """``tid`` in the warp groups ``groups`` (runs of consecutive groups as ranges)."""
    runs = []
    for g in groups:
        if runs and runs[-1][1] == g:
            runs[-1][1] = g + 1
        else:
            runs.append([g, g + 1])
    cond = None
    for lo, hi in runs:
        part = tirx.And(tirx.GE(tid, i32(GROUP * lo)), tirx.LT(tid, i32(GROUP * hi)))
        cond = part if cond is None else tirx.Or(cond, part)
    return cond, runs


def _as_thread_branches(body, tid, ordered=False):
    """Every ``T.ws`` block -> ``if <thread in its groups>: body``: with several computing roles
    the blocks are thread regions (``thread_regions``), each laid out for its own warp groups,
    and the compiler orders shared memory between them as between any branches. ``ordered``
    (the user's mbarriers order the roles): each ``if`` is marked a role (``ROLE_ATTR``), which
    the barrier planner sees as touching nothing, as it sees a T.ws block."""
    def go(s):
        if s is None:
            return None
        if is_ws(s):
            cond, _ = _group_cond(tid, _groups(int(s.value.value)))
            branch = tirx.IfThenElse(cond, seq([go(s.body)]), None, span=s.span)
            return tirx.AttrStmt(s.node, ROLE_ATTR, s.value, branch, span=s.span) if ordered else branch
        if isinstance(s, tirx.SeqStmt):
            return seq([go(x) for x in s.seq])
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(s.condition, go(s.then_case), go(s.else_case), span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
        if isinstance(s, tirx.For):
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, go(s.body), thread_binding=s.thread_binding,
                            annotations=s.annotations, step=s.step, span=s.span)
        return s

    return go(body)


def _refuse_outside(body):
    """Tile ops at the top of a role-split kernel (outside every T.ws block)."""
    def check(s):
        if is_ws(s):
            return
        if _is_tile_stmt(s):
            raise LoweringError("TL0002", "a tile operator outside every `with T.ws(...)` block of a kernel "
                                "that assigns warp-group roles: its elements are spread over the compute "
                                "role's threads only", s.span,
                                notes=["move it into the `with T.ws(...)` block of the role that computes"])
        for c in children(s):
            check(c)
    check(body)


def _as_written(body) -> list:
    """(loop, stages, the synchronising statement's spelling) of each ``T.Pipelined`` loop of two
    or more stages that ``_strip_pipelining`` runs as written for its own synchronisation (the
    checker's TL0406)."""
    from tilelang.language.loops import STAGES_ATTR

    out = []

    def visit(s):
        if isinstance(s, tirx.For) and (const_int(s.annotations.get(STAGES_ATTR, 0)) or 0) >= 2:
            why = _user_sync(s.body)
            if why is not None:
                out.append((s, const_int(s.annotations[STAGES_ATTR]), why))

    walk_stmts(body, visit)
    return out


def _strip_pipelining(body):
    """Loops of a role-split kernel run as written: drop T.Pipelined's stage annotations."""
    def go(s):
        if s is None:
            return None
        if isinstance(s, tirx.SeqStmt):
            return seq([go(x) for x in s.seq])
        if isinstance(s, tirx.IfThenElse):
            return tirx.IfThenElse(s.condition, go(s.then_case), go(s.else_case), span=s.span)
        if isinstance(s, tirx.AttrStmt):
            return tirx.AttrStmt(s.node, s.attr_key, s.value, go(s.body), span=s.span)
        if isinstance(s, tirx.For):
            if not (ws_blocks(s.body) or _has_user_sync(s.body)):
                return s        # a loop the user's barriers do not order keeps its pipeline
            ann = {k: v for k, v in s.annotations.items() if k not in _PIPELINE_KEYS}
            return tirx.For(s.loop_var, s.min, s.extent, s.kind, go(s.body), thread_binding=s.thread_binding,
                            annotations=ann, step=s.step, span=s.span)
        return s

    return go(body)


# ----- T.Pipelined loops of role blocks -----------------------------------------------------
STAGE_ATTR = "tl.ws_stage"     # inside a T.ws block of a staged loop: node [S, buffers...], value: the stage
_BAR_OPS = ("mbarrier_wait", "mbarrier_arrive", "mbarrier_expect_tx", "mbarrier_arrive_expect_tx",
            "cp_async_barrier_noinc")
_REFUSED_OPS = ("copy_cluster", "mbarrier_arrive_cluster", "barrier_init")


def _stmt_exprs(s) -> list:
    """The expressions a statement holds itself (not those of the statements inside it)."""
    if isinstance(s, tirx.Evaluate):
        return [s.value]
    if isinstance(s, tirx.BufferStore):
        return [s.value] + list(s.indices)
    if isinstance(s, (tirx.IfThenElse, tirx.While)):
        return [s.condition]
    if isinstance(s, tirx.For):
        return [s.min, s.extent]
    if isinstance(s, (tirx.Bind, tirx.AttrStmt)):
        return [s.value]
    return []


def _touched(s) -> set:
    """The buffers a statement itself reads or writes."""
    out = {ld.source for e in _stmt_exprs(s) for ld in tensor_loads(e)}
    if isinstance(s, tirx.BufferStore):
        out.add(s.buffer)
    return out


class _LoopAccess:
    """What the T.ws blocks of one loop do: per shared / global buffer the role masks that touch
    it and those that write it, the barrier operands, and why the loop cannot be staged."""

    def __init__(self, loop, barriers):
        self.k = loop.loop_var
        self.dep = [self.k]        # the loop variable and what is bound from it
        self.barriers = barriers
        self.access, self.write = {}, {}
        self.indexed = set()      # shared buffers indexed by the loop variable (staged by the user)
        self.used_bars = set()
        self.why = None

    def refuse(self, why):
        if self.why is None:
            self.why = why

    def touch(self, buf, mask, indices, write):
        if buf in self.barriers:
            self.refuse(f"barrier '{buf.name}' is used other than as an mbarrier operand")
            return
        if scope_of(buf) not in ("shared", "shared.dyn", "global"):
            return
        self.access.setdefault(buf, set()).add(mask)
        if write:
            self.write.setdefault(buf, set()).add(mask)
        if scope_of(buf) != "global" and any(uses_vars(i, self.dep) for i in indices):
            self.indexed.add(buf)

    def barrier(self, load, ctrl):
        if any(uses_vars(i, self.dep) for i in load.indices):
            self.refuse(f"barrier '{load.source.name}' is indexed by the loop variable")
        if ctrl:
            self.refuse(f"barrier '{load.source.name}' is used under a condition on the loop variable")
        self.used_bars.add(load.source)

    def block(self, s, mask, ctrl=False):
        if s is None:
            return
        if is_ws(s):
            self.refuse("a T.ws block inside a T.ws block")
            return
        if isinstance(s, tirx.While):
            self.refuse("a while loop in a role")
            return
        if isinstance(s, tirx.Bind) and uses_vars(s.value, self.dep):
            self.dep.append(s.var)
        if isinstance(s, tirx.IfThenElse):
            ctrl = ctrl or uses_vars(s.condition, self.dep)
        if isinstance(s, tirx.For):
            if uses_vars(s.min, self.dep) or uses_vars(s.extent, self.dep):
                ctrl = True
                self.dep.append(s.loop_var)
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value):
            self.op(s.value, mask, ctrl)
        else:
            for e in _stmt_exprs(s):
                self.expr(e, mask, write=isinstance(s, tirx.Evaluate) and _through_address(e))
            if isinstance(s, tirx.BufferStore):
                self.touch(s.buffer, mask, list(s.indices), True)
        for c in children(s):
            self.block(c, mask, ctrl)

    def expr(self, e, mask, write=False):
        for ld in tensor_loads(e):
            self.touch(ld.source, mask, list(ld.indices), write)

    def op(self, call, mask, ctrl):
        name = call.op.name[3:]
        args = list(call.args)
        if name in _REFUSED_OPS or (name == "copy" and len(args) > 6 and const_int(args[6])):
            self.refuse(f"T.{name} in the loop")
            return
        bars = []
        if name in _BAR_OPS and isinstance(args[0], ir.TensorLoad) and args[0].source in self.barriers:
            bars = [0]
            if name == "mbarrier_wait":
                parity = args[1]
                others = [v for v in self.dep if not v.same_as(self.k)]
                if not uses_vars(parity, [self.k]) or uses_vars(parity, others):
                    self.refuse(f"the parity of a wait on '{args[0].source.name}' is not an expression of "
                                f"the loop variable '{self.k.name}'")
        elif name == "copy" and len(args) > 4 and isinstance(args[4], ir.TensorLoad) \
                and args[4].source in self.barriers:
            bars = [4]
        for i, a in enumerate(args):
            if i in bars:
                self.barrier(a, ctrl)
                for x in a.indices:
                    self.expr(x, mask)
            elif is_tl_call(a, "region"):
                r = decode_region(a)
                self.touch(r.buffer, mask, r.starts, bool(r.access & 2))
                for x in list(r.starts) + list(r.extents):
                    self.expr(x, mask)
            else:
                # (a tile operand given some other way: counted as read and written)
                self.expr(a, mask, write=True)


def _through_address(e) -> bool:
    """Whether an expression hands an element's address to a call (it may be written through)."""
    return any_expr(e, lambda n: isinstance(n, ir.Call) and getattr(n.op, "name", None) == "tirx.address_of")


def _stage_plan(info, loop, arch):
    """(S, staged buffers) for a ``T.Pipelined(num_stages=S)`` loop of T.ws blocks, or why it
    runs as written (see ``pipeline_roles``)."""
    from tilelang import targets
    from tilelang.language.dtypes import nbytes
    from tilelang.language.loops import STAGES_ATTR

    S = const_int(loop.annotations.get(STAGES_ATTR))
    barriers = set(getattr(info, "barrier_buffers", ()))
    roles = _LoopAccess(loop, barriers)
    for s in flatten([loop.body]):
        if is_ws(s):
            roles.block(s.body, int(s.value.value))
        elif isinstance(s, tirx.Bind):
            if uses_vars(s.value, roles.dep):
                roles.dep.append(s.var)
            roles.expr(s.value, 0)
        else:
            return "a statement outside the loop's T.ws blocks"
    if roles.why:
        return roles.why
    if not roles.used_bars:
        return "no mbarrier orders its roles"
    for buf, masks in roles.write.items():
        if scope_of(buf) == "global" and len(roles.access[buf]) > 1:
            return f"'{buf.name}' is written by one role and accessed by another"
    data = [b for b, masks in roles.access.items()
            if scope_of(b) != "global" and b in roles.write and len(masks) > 1]
    for b in data:
        if b in roles.indexed:
            return f"'{b.name}' is indexed by the loop variable (stages written by hand)"
        if any(const_int(n) is None for n in b.shape):
            return f"'{b.name}' has a symbolic shape"
    staged = data + sorted(roles.used_bars, key=lambda b: b.name)
    # the staged buffers and barriers are the loop's own: nothing else touches them
    mine = set(staged)
    outside, every = [], set()

    def visit(s):
        every.update(_touched(s))
        if isinstance(s, (tirx.DeclBuffer, tirx.AllocBuffer)):
            every.add(s.buffer)
        if s.same_as(loop):
            walk_stmts(loop.body, lambda x: every.update(_touched(x)))
            return
        if not (isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "barrier_init")):
            outside.extend(b for b in _touched(s) if b in mine)   # (its allocation does not count)
        for c in children(s):
            visit(c)

    visit(info.body)
    # a view (T.view / T.reshape) of a shared buffer the loop touches hides who touches its bytes
    # (``Buffer.data`` is a fresh call on each access in apache-tvm 0.27: views are found through
    # the DeclBuffers that declare them over another buffer's data)
    roots = buffer_roots(info.body)
    for b in [b for b in roles.access if scope_of(b) != "global"]:
        other = next((x for x in every if roots.get(x, x).same_as(roots.get(b, b)) and not x.same_as(b)), None)
        if other is not None:
            return f"'{b.name}' and '{other.name}' are views of the same shared memory"
    if outside:
        return f"'{outside[0].name}' is also used outside the loop"
    total = 0
    for b in info.shared_buffers():
        n = 1
        for d in b.shape:
            n *= const_int(d) or 0
        size = -(-n * nbytes(str(b.dtype)) // 128) * 128
        total += size * (S if b in mine else 1)
    budget = targets.smem_per_block(arch or "sm_90a")
    if total > budget:
        return f"{S} copies of its tiles need {total} bytes of shared memory, over {budget}"
    return S, staged


def pipeline_roles(info, arch=None):
    """``info.body`` with every ``T.Pipelined(n, num_stages=S)`` loop (S >= 2) whose body is T.ws
    blocks ordered by the user's mbarriers multi-buffered (module docstring); the loops that
    cannot be keep their annotations (``_strip_pipelining`` then runs them as written) and
    ``info.user_ws_pipeline`` lists (loop, S or why not) for each such loop."""
    from tilelang.language.loops import STAGES_ATTR

    found = []

    def search(s, depth):
        if s is None:
            return
        if isinstance(s, tirx.For) and const_int(s.annotations.get(STAGES_ATTR, 0)) not in (None, 0, 1) \
                and ws_blocks(s.body):
            found.append((s, depth))
        for c in children(s):
            search(c, depth + isinstance(s, (tirx.For, tirx.While)))

    search(info.body, 0)
    info.user_ws_pipeline = []
    done = []
    for loop, depth in found:
        plan = "the loop is inside another loop" if depth else _stage_plan(info, loop, arch)
        info.user_ws_pipeline.append((loop, plan if isinstance(plan, str) else plan[0]))
        if not isinstance(plan, str):
            done.append((loop, _staged_loop(loop, *plan)))
    if not done:
        return info.body
    return map_stmts(info.body, pre=lambda s: next((new for old, new in done if s.same_as(old)), None))


def _staged_loop(loop, S, staged):
    """The loop with its waits' parities counted per stage and its T.ws blocks selecting stage
    ``(k - min) % S`` of the staged buffers and barriers."""
    from tilelang.tir_utils import substitute

    k, lo = loop.loop_var, loop.min
    j = k if const_int(lo) == 0 else k - lo
    use = tirx.floordiv(j, i32(S)) if const_int(lo) == 0 else lo + tirx.floordiv(j, i32(S))
    bars = set(staged)

    def waits(s):
        if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "mbarrier_wait") \
                and isinstance(s.value.args[0], ir.TensorLoad) and s.value.args[0].source in bars:
            call = s.value
            parity = substitute(call.args[1], {k: use})
            return tirx.Evaluate(ir.Call(call.op, [call.args[0], parity], ret_ty="handle"), span=s.span)
        return None

    import tvm_ffi

    node = tvm_ffi.convert([i32(S)] + list(staged))
    stage = tirx.floormod(j, i32(S))
    items = []
    for s in flatten([loop.body]):
        if is_ws(s):
            body = tirx.AttrStmt(node, STAGE_ATTR, stage, map_stmts(s.body, pre=waits), span=s.span)
            s = tirx.AttrStmt(s.node, s.attr_key, s.value, body, span=s.span)
        items.append(s)
    ann = {key: v for key, v in loop.annotations.items() if key not in _PIPELINE_KEYS}
    return tirx.For(k, lo, loop.extent, loop.kind, seq(items), thread_binding=loop.thread_binding,
                    annotations=ann, step=loop.step, span=loop.span)


def staged_copies(body) -> dict:
    """{buffer: copies} of the buffers and barriers that staged loops of T.ws blocks select a
    stage of (``pipelined_loop.plan_stages``)."""
    out = {}

    def visit(s):
        if isinstance(s, tirx.AttrStmt) and s.attr_key == STAGE_ATTR:
            items = list(s.node)
            for b in items[1:]:
                out[b] = max(out.get(b, 1), int(items[0]))

    walk_stmts(body, visit)
    return out


# ----- lowering -------------------------------------------------------------------------------
def lower_block(lw, stmt):
    """``with T.ws(g...)`` -> ``if <thread in g...>: body`` with the block's threads in force."""
    groups = _groups(int(stmt.value.value))
    phys = lw.info.tid
    cond = None
    runs, g = [], 0
    for g in groups:
        if runs and runs[-1][1] == g:
            runs[-1][1] = g + 1
        else:
            runs.append([g, g + 1])
    for lo, hi in runs:
        part = tirx.And(tirx.GE(phys, i32(GROUP * lo)), tirx.LT(phys, i32(GROUP * hi)))
        cond = part if cond is None else tirx.Or(cond, part)
    roles = getattr(lw.info, "user_ws", None)
    saved = (lw.T, lw.tid, lw.thread_guard, getattr(lw, "role_block", None))
    body, saved_stage = stmt.body, dict(lw.stage)
    if isinstance(body, tirx.AttrStmt) and body.attr_key == STAGE_ATTR:
        # a block of a staged loop (``pipeline_roles``): its buffers and barriers at this stage
        stage = lw.rewrite(body.value)
        for buf in list(body.node)[1:]:
            lw.stage[buf] = stage
        body = body.body
    try:
        compute = roles is not None and groups == list(range(roles.lo, roles.hi))
        if compute:
            if roles.lo and _has_mma_gemm(stmt.body, lw.layouts):
                # (tl::gemm_ss / gemm_rs place warps by threadIdx.x / 32 from warp 0)
                raise LoweringError("TL0002", f"T.ws{tuple(groups)}: an mma.sync gemm runs on the first warp "
                                    "groups of the block; give the computing role warp group 0", stmt.span)
            lw.thread_guard, lw.role_block = None, (roles.lo, roles.hi)
        elif len(runs) == 1:
            lo, hi = runs[0]
            lw.T, lw.tid = GROUP * (hi - lo), (phys - i32(GROUP * lo) if lo else phys)
            lw.thread_guard, lw.role_block = None, (lo, hi)
        else:
            lw.thread_guard = tirx.IfThenElse(cond, stmt.body, None, span=stmt.span)
            lw.role_block = None
        body = lw.lower(body)
    finally:
        lw.T, lw.tid, lw.thread_guard, lw.role_block = saved
        lw.stage = saved_stage
    return tirx.IfThenElse(cond, seq([body]), None, span=stmt.span)


def role_sync(lw):
    """The barrier the compiler inserts inside a T.ws block: a named barrier over its threads
    (1 + its first warp group), or None outside such blocks."""
    block = getattr(lw, "role_block", None)
    if block is None:
        return None
    return evaluate_extern("tl::named_barrier_sync", 1 + block[0], lw.T)


def is_tma_copy(stmt) -> bool:
    return isinstance(stmt, tirx.Evaluate) and is_tl_call(stmt.value, "copy") and len(stmt.value.args) > 4


def lower_tma_copy(lw, stmt):
    """``T.tma_copy``: TMA boxes or one bulk copy issued by a leader thread with ``expect_tx`` on
    the barrier, or the block's threads copying the tile (see the module docstring)."""
    from tilelang.transform import lower_copy, tma

    call = stmt.value
    src, dst = decode_region(call.args[0]), decode_region(call.args[1])
    bar = call.args[4]
    scope = const_int(call.args[5]) if len(call.args) > 5 else 0
    mask = tma.multicast_mask(lw, stmt)
    plain = tirx.Evaluate(ir.Call(call.op, list(call.args[:4]), ret_ty="handle"), span=stmt.span)
    if mask and (src.scope != "global" or dst.scope not in ("shared", "shared.dyn")):
        raise LoweringError("TL0002", f"cluster_mask multicasts a load from a global tensor into shared memory; "
                            f"'{src.buffer.name}' -> '{dst.buffer.name}' is {src.scope} -> {dst.scope}", stmt.span)
    if src.scope != "global" or dst.scope not in ("shared", "shared.dyn"):
        return lower_copy.lower_copy(lw, plain)
    if mask and not isinstance(bar, ir.TensorLoad):
        # T.copy_cluster(cluster_mask=...) without a barrier: a synchronous load on a barrier of its own
        out = lower_copy.lower_copy(lw, stmt)
        if out is None or not _has_call(out, "tl::tma_load_multicast"):
            spec = tma.tma_box_spec(lw, src, dst, len(lw.tensormaps)) if dst.is_whole() else None
            why = f" ({spec})" if isinstance(spec, str) else ""
            raise LoweringError("TL0002", f"T.copy_cluster(cluster_mask=...): the copy of '{src.buffer.name}' into "
                                f"'{dst.buffer.name}' cannot be one TMA load{why}; a multicast fills a whole shared "
                                "tile of a plain tensor parameter, laid out row-major or as a T.gemm operand of "
                                "16- or 8-bit elements", stmt.span)
        return out
    if not isinstance(bar, ir.TensorLoad):
        raise LoweringError("TL0002", "T.tma_copy from global to shared memory needs barrier=<an mbarrier from "
                            "T.alloc_barrier>", stmt.span)
    bar_ptr = tirx.address_of(lw.rewrite(bar))
    issue = _bulk(lw, src, dst, bar_ptr)
    if issue is None:
        index = len(lw.tensormaps)
        whole = dst.is_whole() or tma.stage_slice(dst)
        spec = tma.tma_box_spec(lw, src, dst, index, stages=True) if whole else "a part of the shared tile"
        if isinstance(spec, str) and mask:
            raise LoweringError("TL0002", f"T.tma_copy(cluster_mask=...): the copy of '{src.buffer.name}' into "
                                f"'{dst.buffer.name}' is not one TMA load ({spec}), so it cannot be multicast",
                                stmt.span)
        if isinstance(spec, str):
            # the threads copy the tile: each fences its writes for the async proxy (a wgmma reads
            # the tile) before it arrives on the barrier
            out = lower_copy.lower_copy(lw, plain)
            if out is None or not lw.layouts.wgmma:
                return out
            return seq([out, evaluate_extern("tl::fence_proxy_async")])
        lw.tensormaps.append(spec)
        issue = _boxes(lw, src, dst, spec, index, bar_ptr)
    if mask:
        issue = [issue[0]] + [tma.multicast(lw, s, mask, stmt.span) for s in issue[1:]]
    return tirx.IfThenElse(_leader(lw, scope), seq(issue), None, span=stmt.span)


def _has_call(stmt, prefix) -> bool:
    found = []

    def visit(node):
        if isinstance(node, tirx.Call) and node.args and isinstance(node.args[0], tirx.StringImm) \
                and node.args[0].value.startswith(prefix):
            found.append(node)

    tirx.stmt_functor.post_order_visit(stmt, visit)
    return bool(found)


def uses_multicast(body) -> bool:
    """Whether a kernel body multicasts a TMA load (a ``tl.copy`` with a cluster mask)."""
    found = []
    walk_stmts(body, lambda s: found.append(s) if isinstance(s, tirx.Evaluate) and is_tl_call(s.value, "copy")
               and len(s.value.args) > 6 and const_int(s.value.args[6]) else None)
    return bool(found)


def _leader(lw, scope):
    """The thread that issues a copy: the first of each ``scope`` threads (default: the block or
    the T.ws block being lowered)."""
    n = scope or lw.T
    block = getattr(lw, "role_block", None)
    base = GROUP * block[0] if block else 0
    if n % 32 == 0 and base % n == 0 and lw.T % n == 0:
        return tirx.call_extern("bool", f"tl::tl_shuffle_elect<{n}>")
    return tirx.EQ(tirx.floormod(lw.tid, i32(n)), i32(0))


def _contiguous(region):
    """Whether a region is one contiguous run of its buffer (row-major): after the first dimension
    of extent other than 1, every dimension is whole."""
    ext = [const_int(e) for e in region.extents]
    shape = [const_int(n) for n in region.buffer.shape]
    if None in ext or None in shape:
        return False
    d = next((k for k, e in enumerate(ext) if e != 1), len(ext))
    return all(ext[k] == shape[k] and const_int(region.starts[k]) == 0 for k in range(d + 1, len(ext)))


def _bulk(lw, src, dst, bar_ptr):
    """One ``cp.async.bulk`` of a contiguous run (no tensor map), or None."""
    from tilelang.language.dtypes import nbytes

    layout = lw.layouts.shared.get(dst.buffer)
    if getattr(layout, "group", 1) != 1 or getattr(layout, "slab", False) or dst.buffer in lw.strided:
        return None
    if src.buffer.strides or str(src.buffer.dtype) != str(dst.buffer.dtype):
        return None
    if not (_contiguous(src) and _contiguous(dst)):
        return None
    n = 1
    for e in dst.extents:
        n *= const_int(e)
    esize = nbytes(str(dst.buffer.dtype))
    if (n * esize) % 16:
        return None
    flat = i32(0)
    for st, dim in zip(src.starts, src.buffer.shape):
        flat = flat * dim + lw.rewrite(st)
    mod = lw.an.modular_set(flat)
    if (mod.coeff * esize) % 16 or (mod.base * esize) % 16:
        return None
    soff = lw.shared_offset(dst.buffer, [lw.rewrite(x) for x in dst.starts])
    smod = lw.an.modular_set(soff)
    if (smod.coeff * esize) % 16 or (smod.base * esize) % 16:
        return None
    view = lw.smem_views[dst.buffer]
    dst_ptr = tirx.address_of(tirx.BufferLoad(view, [soff]))
    src_ptr = tirx.address_of(lw.rewrite(tirx.BufferLoad(src.buffer, list(src.starts))))
    return [evaluate_extern("tl::mbarrier_expect_tx", bar_ptr, i32(n * esize)),
            evaluate_extern("tl::tma_load_bulk", dst_ptr, src_ptr, i32(n * esize), bar_ptr)]


def _boxes(lw, src, dst, spec, index, bar_ptr):
    """The TMA boxes of a whole slab-laid-out tile or one stage of it (tensor map ``index``), after
    ``expect_tx``."""
    from tilelang.transform.lower_copy import slab_loads

    rows, cols = (const_int(x) for x in dst.buffer.shape[-2:])
    # (a stage of the tile: its first element; the stage's rows and columns follow in the layout)
    base = lw.shared_offset(dst.buffer, [lw.rewrite(x) for x in dst.starts[:-2]] + [i32(0), i32(0)])
    return [evaluate_extern("tl::mbarrier_expect_tx", bar_ptr, i32(rows * cols * nbytes(str(dst.buffer.dtype)))),
            *slab_loads(lw, src, dst, index, spec["box"][0], bar_ptr, base)]


__all__ = ["Roles", "STAGE_ATTR", "apply", "is_tma_copy", "is_ws", "lower_block", "lower_tma_copy", "pipeline_roles",
           "role_sync", "staged_copies", "uses_multicast", "ws_blocks"]
