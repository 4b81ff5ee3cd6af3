"""User-written synchronisation: barriers, warp-group roles, PDL, grid sync, persistent loops.

Contract (what each call builds; the device side is ``src/tl/barrier.h``):

* ``T.sync_threads()`` is ``__syncthreads()``; ``T.sync_threads(id, n)`` waits on named barrier
  ``id`` with ``n`` threads (``bar.sync``); ``T.named_barrier_arrive(id, n)`` only arrives
  (``bar.arrive``).
* ``T.alloc_barrier(count | [counts])`` allocates shared-memory mbarriers (one ``uint64`` each),
  initialised where the call stands (thread 0 inits, fence, block barrier): call it at the top of
  the kernel body, where every thread runs. Index the result (``mbars[i]``) to name one.
* ``T.mbarrier_wait_parity`` / ``T.barrier_wait`` wait for a phase parity; ``T.mbarrier_arrive``
  / ``T.barrier_arrive`` arrive once per calling thread (``T.cp_async_barrier_noinc`` once its
  ``cp.async`` copies have landed); ``T.mbarrier_expect_tx`` /
  ``T.mbarrier_arrive_expect_tx`` add expected transaction bytes (one thread should call them).
* ``with T.ws(g, ...):`` runs its body on warp groups ``g`` (threads ``128 g .. 128 g + 127``) of
  the block. Tile operators inside it are spread over the threads of the role that computes (see
  ``tilelang/transform/user_ws.py``).
* ``T.set_max_nreg(n, inc)`` / ``T.inc_max_nreg`` / ``T.dec_max_nreg``: ``setmaxnreg``.
* ``T.pdl_trigger()`` / ``T.pdl_sync()``: programmatic dependent launch (sm_90).
* ``T.fence_proxy_async()``: ``fence.proxy.async.shared::cta`` (sm_90), ordering this thread's
  ordinary shared-memory accesses before its later TMA / wgmma ones.
* ``T.sync_grid()``: a grid-wide barrier (the kernel is then launched cooperatively).
* ``for i, j in T.Persistent([M, N], wave, block_id, group_size=8):`` visits each tile of the
  domain once over ``ceildiv(tiles, wave)`` waves, the last dimension grouped by ``group_size``.
"""

from __future__ import annotations

from tvm import ir, tirx
from tvm.tirx.script.builder import ir as builder

from ._ops import as_expr, emit

WS_ATTR = "tl.ws"                 # AttrStmt key of a T.ws block; value: bitmask of warp groups
WARP_GROUP = 128


def sync_threads(barrier_id=None, arrive_count=None):
    """``__syncthreads()``, or ``bar.sync barrier_id, arrive_count`` on a named barrier."""
    if barrier_id is None and arrive_count is None:
        return tirx.call_extern("int32", "__syncthreads")
    if barrier_id is None:
        raise ValueError("T.sync_threads(barrier_id, arrive_count): a thread count needs a barrier id")
    if arrive_count is None:
        from .kernel import current_kernel
        ctx = current_kernel()
        if ctx is None:
            raise ValueError("T.sync_threads(barrier_id) needs arrive_count outside T.Kernel")
        arrive_count = ctx.num_threads
    return tirx.call_extern("int32", "tl::__sync_thread_partial", as_expr(barrier_id), as_expr(arrive_count))


def named_barrier_arrive(barrier_id, thread_count):
    """Arrive on named barrier ``barrier_id`` (``bar.arrive``) without waiting."""
    return tirx.call_extern("int32", "tl::__named_barrier_arrive", as_expr(barrier_id), as_expr(thread_count))


# ----- mbarriers -------------------------------------------------------------------------------
def alloc_barrier(arrive_count):
    """Shared-memory mbarriers with the given arrival counts, initialised here."""
    from .alloc import alloc_shared

    counts = [arrive_count] if isinstance(arrive_count, int) else list(arrive_count)
    if not counts:
        raise ValueError("T.alloc_barrier needs at least one arrival count")
    for c in counts:
        if not isinstance(c, int) or c <= 0:
            raise ValueError(f"T.alloc_barrier: arrival counts must be positive integers, got {c!r}")
    buf = alloc_shared((len(counts),), "uint64")
    emit("barrier_init", [tirx.BufferLoad(buf, [0])] + [int(c) for c in counts])
    return buf


def alloc_cluster_barrier(arrive_count):
    return alloc_barrier(arrive_count)


def _bar(mbarrier, what):
    """A barrier operand as ``BufferLoad(buf, [i])`` (a whole one-barrier buffer is element 0)."""
    if isinstance(mbarrier, ir.TensorLoad):     # (tirx.BufferLoad builds one)
        return mbarrier
    if tirx.is_buffer_var(mbarrier):
        return tirx.BufferLoad(mbarrier, [0] * len(mbarrier.shape))
    raise TypeError(f"{what}: expected a barrier from T.alloc_barrier (or one element of it), "
                    f"got {type(mbarrier).__name__}")


def _bar_op(name, *args):
    return ir.Call(_op(name), [as_expr(a) for a in args], ret_ty="handle")


def _op(name):
    from ._ops import get_op

    return get_op(name)


def mbarrier_wait_parity(mbarrier, parity):
    return _bar_op("mbarrier_wait", _bar(mbarrier, "T.mbarrier_wait_parity"), parity)


def mbarrier_arrive(mbarrier, cta_id=None):
    if cta_id is not None:
        return _bar_op("mbarrier_arrive_cluster", _bar(mbarrier, "T.mbarrier_arrive"), cta_id)
    return _bar_op("mbarrier_arrive", _bar(mbarrier, "T.mbarrier_arrive"))


def mbarrier_expect_tx(mbarrier, tx):
    return _bar_op("mbarrier_expect_tx", _bar(mbarrier, "T.mbarrier_expect_tx"), tx)


def mbarrier_arrive_expect_tx(mbarrier, tx):
    return _bar_op("mbarrier_arrive_expect_tx", _bar(mbarrier, "T.mbarrier_arrive_expect_tx"), tx)


def cp_async_barrier_noinc(mbarrier):
    """One arrival on ``mbarrier`` once every ``cp.async`` this thread issued so far has landed
    (``cp.async.mbarrier.arrive.noinc``: the arrival counts toward the barrier's arrival count)."""
    return _bar_op("cp_async_barrier_noinc", _bar(mbarrier, "T.cp_async_barrier_noinc"))


def barrier_wait(mbarrier, parity):
    return mbarrier_wait_parity(mbarrier, parity)


def barrier_arrive(mbarrier):
    return mbarrier_arrive(mbarrier)


def ptx_arrive_cluster_barrier(mbarrier, cta_id):
    return mbarrier_arrive(mbarrier, cta_id)


def tma_copy(src, dst, *, barrier=None, cluster_mask=None, leader_scope_threads=None, eviction_policy=None,
             annotations=None):
    """A copy whose synchronisation the user writes: global -> shared adds the tile's bytes to
    ``barrier``'s transaction count and issues the TMA load from one thread, without waiting
    (wait with ``T.mbarrier_wait_parity``); shared -> global issues the store."""
    from ._ops import emit as _emit
    from .tile import READ, WRITE, _shape_of, _to_region

    mask = _cluster_mask(cluster_mask, "T.tma_copy")
    src_shape, dst_shape = _shape_of(src), _shape_of(dst)
    if src_shape is None and dst_shape is None:
        raise ValueError("T.tma_copy needs at least one operand with a known extent (a buffer or a slice)")
    src_r = _to_region(src, READ, hint=dst_shape, what="tma_copy")
    dst_r = _to_region(dst, WRITE, hint=src_shape, what="tma_copy")
    bar = _bar(barrier, "T.tma_copy(barrier=...)") if barrier is not None else tirx.IntImm("int32", -1)
    scope = 0
    if leader_scope_threads is not None:
        if not isinstance(leader_scope_threads, int) or leader_scope_threads <= 0 or leader_scope_threads % 32:
            raise ValueError(f"T.tma_copy: leader_scope_threads must be a positive multiple of 32 (whole warps), "
                             f"got {leader_scope_threads!r}")
        scope = leader_scope_threads
    _emit("copy", [src_r, dst_r, 0, 0, bar, scope] + ([mask] if mask else []))


def _cluster_mask(cluster_mask, what):
    """A multicast mask as a positive int (bit r: block r of the cluster receives the tile), or 0."""
    if cluster_mask is None:
        return 0
    if isinstance(cluster_mask, tirx.IntImm):
        cluster_mask = cluster_mask.value
    if isinstance(cluster_mask, bool) or not isinstance(cluster_mask, int) or not 0 < cluster_mask < 1 << 16:
        raise ValueError(f"{what}(cluster_mask=...): expected a compile-time bitmask of the cluster's blocks "
                         f"(1 .. 0xffff), got {cluster_mask!r}")
    return cluster_mask


def copy_cluster(src, dst, *, dst_block=None, cluster_mask=None, remote_barrier=None, eviction_policy=None,
                 coalesced_width=None, annotations=None, loop_layout=None):
    """Copy this block's shared tile ``src`` into ``dst`` of block ``dst_block`` of the cluster.
    With ``remote_barrier`` (an mbarrier element, initialised with one arrival) the copy completes
    on the peer's barrier, which the peer waits on; without it, order it with
    ``T.cluster_sync()``."""
    from ._ops import emit as _emit
    from .tile import READ, WRITE, _shape_of, _to_region

    ann = dict(annotations or {})
    dst_block = ann.get("dst_block", dst_block)
    cluster_mask = ann.get("cluster_mask", cluster_mask)
    remote_barrier = ann.get("barrier", remote_barrier)
    mask = _cluster_mask(cluster_mask, "T.copy_cluster")
    if mask:
        # a multicast load: the lowest-ranked block of the mask loads the global tile into every
        # block of the mask; blocks outside it load their own; every block waits for its tile
        if dst_block is not None:
            raise ValueError("T.copy_cluster: give either cluster_mask= (a multicast load from a global "
                             "tensor) or dst_block= (a store into a peer block's shared memory), not both")
        src_shape, dst_shape = _shape_of(src), _shape_of(dst)
        src_r = _to_region(src, READ, hint=dst_shape, what="copy_cluster")
        dst_r = _to_region(dst, WRITE, hint=src_shape, what="copy_cluster")
        bar = _bar(remote_barrier, "T.copy_cluster(remote_barrier=...)") if remote_barrier is not None else \
            tirx.IntImm("int32", -1)
        _emit("copy", [src_r, dst_r, 0, 2, bar, 0, mask])
        return
    if dst_block is None:
        raise ValueError("T.copy_cluster needs dst_block=<the destination block's rank in the cluster>")
    src_shape, dst_shape = _shape_of(src), _shape_of(dst)
    src_r = _to_region(src, READ, hint=dst_shape, what="copy_cluster")
    dst_r = _to_region(dst, WRITE, hint=src_shape, what="copy_cluster")
    bar = _bar(remote_barrier, "T.copy_cluster(remote_barrier=...)") if remote_barrier is not None else \
        tirx.IntImm("int32", -1)
    _emit("copy_cluster", [src_r, dst_r, as_expr(dst_block), bar])


# ----- warp-group roles and registers ----------------------------------------------------------
def ws(*warp_group_idx):
    """``with T.ws(0):`` - the body runs on warp group 0 only (``with T.ws(0, 1):`` on both)."""
    groups = []
    for g in warp_group_idx:
        if isinstance(g, (list, tuple)):
            groups.extend(g)
        else:
            groups.append(g)
    if not groups:
        raise ValueError("T.ws needs at least one warp group index")
    mask = 0
    for g in groups:
        if not isinstance(g, int) or not 0 <= g < 8:
            raise ValueError(f"T.ws: warp group indices are integers 0..7, got {g!r}")
        mask |= 1 << g
    from .kernel import current_kernel

    ctx = current_kernel()
    if ctx is not None and max(groups) * WARP_GROUP >= ctx.num_threads:
        raise ValueError(f"T.ws({', '.join(map(str, groups))}): the block has only {ctx.num_threads} threads "
                         f"({max(1, ctx.num_threads // WARP_GROUP)} warp group(s) of {WARP_GROUP})")
    return builder.attr(tirx.IntImm("int32", 0), WS_ATTR, tirx.IntImm("int32", mask))


WarpSpecialize = ws


def set_max_nreg(reg_count: int, is_inc: int):
    """``setmaxnreg.inc`` (``is_inc`` true) or ``.dec`` to ``reg_count`` registers per thread."""
    reg_count = int(reg_count)
    if not (24 <= reg_count <= 256 and reg_count % 8 == 0):
        raise ValueError(f"T.set_max_nreg: the register count is 24..256 in steps of 8, got {reg_count}")
    fn = "tl::setmaxnreg_inc" if int(is_inc) else "tl::setmaxnreg_dec"
    return tirx.call_extern("int32", f"{fn}<{reg_count}>")


def inc_max_nreg(reg_count: int):
    return set_max_nreg(reg_count, 1)


def dec_max_nreg(reg_count: int):
    return set_max_nreg(reg_count, 0)


def annotate_producer_reg_dealloc(reg_count: int = 24):
    return None


def annotate_consumer_reg_alloc(reg_count: int = 240):
    return None


# ----- programmatic dependent launch, grid sync ------------------------------------------------
def pdl_trigger():
    """Let the next kernel on the stream start (its ``T.pdl_sync()`` still waits for this grid)."""
    return tirx.call_extern("int32", "cudaTriggerProgrammaticLaunchCompletion")


def pdl_sync():
    """Wait until the grids this kernel depends on have completed and flushed their memory."""
    return tirx.call_extern("int32", "cudaGridDependencySynchronize")


def tma_store_wait(count: int = 0, read: bool = True):
    """Wait until at most ``count`` groups of TMA stores are pending (``read``: only until they
    finished reading shared memory)."""
    return tirx.call_extern("int32", f"tl::tma_store_wait<{int(count)}, {'true' if read else 'false'}>")


def tma_store_arrive():
    return tirx.call_extern("int32", "tl::tma_store_arrive")


def fence_proxy_async():
    """``fence.proxy.async.shared::cta`` (sm_90): this thread's earlier ordinary shared-memory
    accesses are ordered before its later async-proxy ones (TMA, wgmma); with a barrier after it,
    before other threads' too."""
    return tirx.call_extern("int32", "tl::fence_proxy_async")


def sync_grid():
    """A barrier across every thread of the grid (``cooperative_groups::this_grid().sync()``)."""
    return tirx.call_extern("int32", "cooperative_groups::this_grid().sync")


# ----- thread block clusters (T.ClusterKernel) ------------------------------------------------
def cluster_arrive():
    """The release half of the cluster-wide barrier (every thread of every block calls it)."""
    return tirx.call_extern("int32", "tl::cluster_arrive")


def cluster_arrive_relaxed():
    """The cluster-wide barrier's arrive without release semantics (``barrier.cluster.arrive.relaxed``):
    for a rendezvous that orders no memory, e.g. before the first remote access that a later
    ``cluster_wait`` guards with its own fences."""
    return tirx.call_extern("int32", "tl::cluster_arrive_relaxed")


def cluster_wait():
    """The acquire half of the cluster-wide barrier."""
    return tirx.call_extern("int32", "tl::cluster_wait")


def cluster_sync():
    """A barrier over every thread of every block of the cluster."""
    return tirx.call_extern("int32", "tl::cluster_sync")


def block_rank_in_cluster():
    """This block's rank in its cluster (``%cluster_ctarank``)."""
    return tirx.call_extern("int32", "tl::cluster_ctarank")


# ----- persistent tile loop -------------------------------------------------------------------
class Persistent:
    """``for i, j in T.Persistent([M, N], wave_size, index, group_size=8):`` - block ``index`` of
    a wave of ``wave_size`` blocks visits tiles ``w * wave_size + index`` for waves ``w``; the
    tile order walks the last dimension in groups of ``group_size`` (neighbouring blocks share
    rows), and every tile of the domain is visited exactly once."""

    tl_loop_spec = True

    def __init__(self, domain, wave_size, index, group_size=8):
        if not isinstance(domain, (list, tuple)) or not domain:
            raise ValueError("T.Persistent needs a non-empty list of domain extents")
        self.domain = [as_expr(d) for d in domain]
        self.wave = as_expr(wave_size)
        self.index = as_expr(index)
        last = self.domain[-1]
        g = 1 if group_size is None else group_size
        g = as_expr(g)
        self.group = tirx.max(tirx.const(1, "int32"), tirx.min(g, last))
        from .math import ceildiv

        self.grouped = [ceildiv(last, self.group)] + self.domain[:-1] + [self.group]
        total = self.grouped[0]
        for d in self.grouped[1:]:
            total = total * d
        self.waves = ceildiv(total, self.wave)
        self._coords = None
        self._loop = None

    def loop_frames(self):
        self._loop = builder.serial(0, self.waves)
        return [_Recording(self._loop, self), _Guard(self)]

    def _decode(self, w):
        rem = w * self.wave + self.index
        idxs = [None] * len(self.grouped)
        for i in range(len(self.grouped) - 1, 0, -1):
            idxs[i] = tirx.truncmod(rem, self.grouped[i])
            rem = tirx.truncdiv(rem, self.grouped[i])
        idxs[0] = rem
        coords = idxs[1:-1] + [idxs[0] * self.group + idxs[-1]]
        self._coords = coords
        return tirx.LT(coords[-1], self.domain[-1])

    def loop_values(self, loop_vars):
        coords = self._coords
        return coords[0] if len(coords) == 1 else list(coords)


class _Recording:
    """The wave loop's frame; remembers its variable for the guard entered next."""

    def __init__(self, frame, spec):
        self.frame, self.spec = frame, spec

    def __enter__(self):
        self.spec._w = self.frame.__enter__()
        return self.spec._w

    def __exit__(self, *exc):
        return self.frame.__exit__(*exc)


class _Guard:
    """``if <the tile is inside the domain>:`` around the loop body."""

    def __init__(self, spec):
        self.spec = spec
        self.frames = []

    def __enter__(self):
        cond = self.spec._decode(self.spec._w)
        self.frames = [builder.If(cond), builder.Then()]
        for f in self.frames:
            f.__enter__()
        return None

    def __exit__(self, *exc):
        for f in reversed(self.frames):
            f.__exit__(*exc)
        return False


__all__ = [
    "sync_threads", "named_barrier_arrive", "alloc_barrier", "alloc_cluster_barrier", "mbarrier_wait_parity",
    "mbarrier_arrive", "mbarrier_expect_tx", "mbarrier_arrive_expect_tx", "barrier_wait", "barrier_arrive",
    "ptx_arrive_cluster_barrier", "cp_async_barrier_noinc", "ws", "WarpSpecialize", "set_max_nreg", "inc_max_nreg", "dec_max_nreg",
    "annotate_producer_reg_dealloc", "annotate_consumer_reg_alloc", "pdl_trigger", "pdl_sync", "sync_grid",
    "Persistent", "WS_ATTR", "tma_copy", "copy_cluster", "tma_store_wait", "tma_store_arrive", "fence_proxy_async", "cluster_arrive", "cluster_arrive_relaxed", "cluster_wait", "cluster_sync", "block_rank_in_cluster",
]
