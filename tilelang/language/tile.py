"""Tile operators: ``T.copy``, ``T.fill``/``T.clear``, ``T.gemm``, reductions (arithmetic and bitwise),
``T.cumsum``, atomics.

Each call checks what can be checked while parsing (operand kinds, ranks) and emits a ``tl.*``
Op (see ``_ops``). Errors raised here surface at the user's line through the front end.
"""

from __future__ import annotations

import enum

import tvm
from tvm import ir, tirx
from tvm.tirx import is_buffer_var

from tilelang.tir_utils import const_int

from ._ops import as_expr, emit, region

READ, WRITE, READ_WRITE = 1, 2, 3


class GemmWarpPolicy(enum.IntEnum):
    """How ``T.gemm`` partitions the block tile over warps.

    ``compute_warp_partition(M, N, num_warps) -> (m_warp, n_warp)`` is upstream's Python helper,
    which hand-written MMA emitters call (``T.gemm``'s own lowering makes its choice in
    ``transform.layout_inference.warp_partition``). A warp takes at least 16 rows and 8 columns:
    FullRow puts every warp along M (when M does not split that way: ``M // 16`` warps along M,
    the rest along N), FullCol the same along N (``N // 8``), Square picks the exact
    factorisation ``m * n == num_warps`` within those limits whose per-warp tile
    (``M / 16m`` by ``N / 8n`` units) has the aspect ratio closest to ``M / N``, smallest ``m``
    first on ties, and ``(1, 1)`` when none fits.
    """

    Square = 0
    FullRow = 1
    FullCol = 2

    def is_square(self) -> bool:
        return self == GemmWarpPolicy.Square

    def is_full_row(self) -> bool:
        return self == GemmWarpPolicy.FullRow

    def is_full_col(self) -> bool:
        return self == GemmWarpPolicy.FullCol

    @staticmethod
    def to_prime_factors(num):
        """Prime factors of ``num``, ascending, with multiplicity (``12 -> [2, 2, 3]``)."""
        factors, p = [], 2
        while p * p <= num:
            while num % p == 0:
                factors.append(p)
                num //= p
            p += 1
        if num > 1:
            factors.append(num)
        return factors

    def compute_warp_partition(self, M, N, num_warps):
        """``(m_warp, n_warp)`` for an ``M x N`` tile over ``num_warps`` warps (see the class)."""
        M, N, num_warps = int(M), int(N), int(num_warps)
        if num_warps < 1:
            raise ValueError(f"GemmWarpPolicy.compute_warp_partition: num_warps must be positive, got {num_warps}")

        def spill(along, unit, extent):   # all warps along one axis, or as many as fit
            if extent % (num_warps * unit) == 0:
                return num_warps, 1
            fit = extent // unit
            if fit < 1:
                raise ValueError(f"GemmWarpPolicy.{self.name}: a {M}x{N} tile has fewer than {unit} "
                                 f"{along}, the least one warp takes")
            return fit, max(1, num_warps // fit)

        if self.is_full_row():
            return spill("rows", 16, M)
        if self.is_full_col():
            n, m = spill("columns", 8, N)
            return m, n
        ratio = M / N if N > 0 else 1.0
        best, best_score = (1, 1), float("inf")
        for m in range(1, min(M // 16, num_warps) + 1):
            n = num_warps // m
            if m * n != num_warps or n > N // 8:
                continue
            score = abs((M / (16 * m)) / (N / (8 * n)) - ratio)
            if score < best_score:
                best, best_score = (m, n), score
        return best

    @classmethod
    def from_warp_partition(cls, m_warp: int, n_warp: int) -> "GemmWarpPolicy":
        """The policy a partition looks like: all along M (FullRow), all along N (FullCol), else Square."""
        if n_warp == 1 and m_warp > 1:
            return cls.FullRow
        if m_warp == 1 and n_warp > 1:
            return cls.FullCol
        return cls.Square


def _unwrap(x):
    scalar = getattr(x, "scalar", None)  # TVMScript scalar_wrapper
    return scalar if scalar is not None else x


def _shape_of(x):
    """Extents of the box an operand denotes, or None for a single-element corner form."""
    x = _unwrap(x)
    if is_buffer_var(x):
        return [e for e in x.shape]
    if isinstance(x, ir.TensorRegion):
        return [r.extent for r in x.region]
    return None


def _to_region(x, access, hint=None, what="operand"):
    x = _unwrap(x)
    if is_buffer_var(x):
        return region(x, [0] * len(x.shape), list(x.shape), access)
    if isinstance(x, ir.TensorRegion):
        return region(x.source, [r.min for r in x.region], [r.extent for r in x.region], access)
    if isinstance(x, ir.TensorLoad):
        buf, starts = x.source, list(x.indices)
        extents = [1] * len(starts)
        if hint is not None:
            hint = [h for h in hint]
            # Right-align the other operand's extents onto this buffer's dimensions, dropping
            # its leading unit dimensions when it has more of them.
            while len(hint) > len(starts) and _is_one(hint[0]):
                hint = hint[1:]
            if len(hint) > len(starts):
                raise ValueError(
                    f"cannot infer the extent of {buf.name}[...]: the other operand has rank "
                    f"{len(hint)} but {buf.name} has rank {len(starts)}")
            extents[len(starts) - len(hint):] = hint
        return region(buf, starts, extents, access)
    raise TypeError(f"T.{what} expects a buffer, a buffer slice or an element A[i, j], got {type(x).__name__}")


def _is_one(e) -> bool:
    return isinstance(e, int) and e == 1 or isinstance(e, tirx.IntImm) and e.value == 1


_PREFER = {"tma": False, "sync": True, "cp_async": True}  # prefer_instruction -> disable_tma


def copy(src, dst, coalesced_width=None, disable_tma=False, eviction_policy=None, loop_layout=None,
         prefer_instruction=None, annotations=None):
    """Copy a tile between global memory, shared memory and fragments, in any direction.

    ``prefer_instruction`` (upstream's hint): "tma" lets the copy use TMA where it can (the
    default), "sync" and "cp_async" keep it on the thread-issued path (``disable_tma``).
    ``annotations`` may carry ``coalesced_width``, ``disable_tma``, ``eviction_policy`` and
    ``prefer_instruction``, taking precedence over the arguments; other keys are pass hints of
    upstream's with no meaning here and are ignored."""
    ann = dict(annotations or {})
    coalesced_width = ann.get("coalesced_width", coalesced_width)
    disable_tma = bool(ann.get("disable_tma", disable_tma))
    prefer = ann.get("prefer_instruction", prefer_instruction)
    if prefer is not None:
        prefer = str(getattr(prefer, "value", prefer))
        if prefer not in _PREFER:
            raise ValueError(f"T.copy: prefer_instruction must be one of {sorted(_PREFER)}, got {prefer!r}")
        disable_tma = disable_tma or _PREFER[prefer]
    src_shape, dst_shape = _shape_of(src), _shape_of(dst)
    # (two elements A[i], B[j]: a one-element copy, as upstream reads them)
    src_r = _to_region(src, READ, hint=dst_shape, what="copy")
    dst_r = _to_region(dst, WRITE, hint=src_shape, what="copy")
    # the TMA flag: 1 disable_tma, 2 prefer_instruction="tma" (lower_copy: TMA where upstream picks it)
    tma_flag = 1 if disable_tma else 2 if prefer == "tma" else 0
    emit("copy", [src_r, dst_r, int(coalesced_width or 0), tma_flag])


ASYNC_COPY = 3   # the T.copy flag of T.async_copy (lower_copy: cp.async always, committed, no wait)


def async_copy(src, dst, coalesced_width=None, annotations=None, loop_layout=None):
    """``T.copy`` from global to shared memory that always issues cp.async (zero-filling what lies
    outside the source) and commits it without waiting: ``T.ptx_wait_group(n)`` waits. Any other
    direction is a compile error. ``annotations`` are upstream's pass hints and ``loop_layout``
    its thread mapping of the copy (as ``T.copy``'s: the compiler picks its own), ignored here."""
    del annotations, loop_layout
    src_shape, dst_shape = _shape_of(src), _shape_of(dst)
    src_r = _to_region(src, READ, hint=dst_shape, what="async_copy")
    dst_r = _to_region(dst, WRITE, hint=src_shape, what="async_copy")
    emit("copy", [src_r, dst_r, int(coalesced_width or 0), ASYNC_COPY])


def fill(buffer, value, annotations=None):
    """Set every element of a buffer (or a slice of one) to ``value``. ``annotations`` are
    upstream's pass hints (``T.WSID``...), with no meaning here."""
    emit("fill", [_to_region(buffer, WRITE, what="fill"), value])


def clear(buffer, annotations=None):
    """Set every element to zero (``annotations`` as ``T.fill``'s)."""
    fill(buffer, 0)


def gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
         clear_accum=False, k_pack=1, wg_wait=0, mbar=None, annotations=None):
    """C (+)= A @ B on the tensor cores; A and B in shared memory or fragments, C a fragment.
    ``annotations`` are upstream's pass hints (``T.WSID``...), with no meaning here."""
    a = _to_region(A, READ, what="gemm")
    b = _to_region(B, READ, what="gemm")
    c = _to_region(C, READ_WRITE, what="gemm")
    clear_expr = clear_accum if not isinstance(clear_accum, bool) else int(clear_accum)
    emit("gemm", [a, b, c, int(bool(transpose_A)), int(bool(transpose_B)), int(policy),
                  clear_expr, int(k_pack), int(wg_wait)])


# Upstream's second-generation gemm entry point takes the same arguments; one lowering serves both.
gemm_v2 = gemm

def gemm_sp(A_sparse, E, B, C, transpose_A=False, transpose_E=False, transpose_B=False,
            policy=GemmWarpPolicy.Square, clear_accum=False, k_pack=1, wg_wait=0, annotations=None):
    """C (+)= A @ B with A 2:4 structured-sparse along K (``mma.sp``): ``A_sparse`` holds the kept
    values (M x K/2), ``E`` their metadata (M x K/e_factor, ``tilelang.cuda.intrinsics.sparse_layout``),
    B is K x N (N x K with ``transpose_B``), all in shared memory; C a fragment. ``k_pack`` and
    ``wg_wait`` are upstream's and unused here; transposed A or E is not supported."""
    del k_pack, wg_wait, annotations
    if transpose_A or transpose_E:
        raise ValueError("T.gemm_sp: transpose_A / transpose_E are not supported (A_sparse is M x K/2, E is "
                         "M x K/e_factor, both row-major)")
    a = _to_region(A_sparse, READ, what="gemm_sp")
    e = _to_region(E, READ, what="gemm_sp")
    b = _to_region(B, READ, what="gemm_sp")
    c = _to_region(C, READ_WRITE, what="gemm_sp")
    clear_expr = clear_accum if not isinstance(clear_accum, bool) else int(clear_accum)
    emit("gemm_sp", [a, e, b, c, int(bool(transpose_B)), int(policy), clear_expr])


WGMMA_NO_WAIT = -1   # the wg_wait of T.wgmma_gemm: forced wgmma, issued without a wait


def wgmma_gemm(A, B, C, transpose_A=False, transpose_B=False, policy=GemmWarpPolicy.Square,
               clear_accum=False, annotations=None):
    """``T.gemm`` that must lower to Hopper wgmma (sm_90a) and does not wait for it: the wgmma
    group is committed and left in flight; ``T.wait_wgmma(n)`` retires it before C is read or A/B
    are overwritten. A/B may be slices of shared buffers along K (``A_s[:, k0:k0 + K]``, any
    ``k0``). Compilation fails (TL0002, also a ``tvm.error.InternalError``) where wgmma cannot be used; it never falls back to
    mma.sync. ``annotations`` are upstream's pass hints, ignored here."""
    del annotations
    gemm(A, B, C, transpose_A, transpose_B, policy, clear_accum, 1, WGMMA_NO_WAIT)


def wait_wgmma(id):  # noqa: A002 - upstream's parameter name
    """Wait until at most ``id`` committed wgmma groups of this warpgroup are still in flight."""
    value = _unwrap(id)
    if isinstance(value, tirx.IntImm):
        value = value.value
    if not isinstance(value, int) or not 0 <= value <= 7:
        raise ValueError(f"T.wait_wgmma takes a constant 0..7 (wgmma groups left in flight), got {id!r}")
    emit("wait_wgmma", [int(value)])


def warpgroup_fence_operand(buffer_or_ptr, offset=0, num_regs=None, dtype=None):
    """Pin the registers of a wgmma accumulator (or register operand) fragment here: no read or
    write of them moves across this point (upstream's ``T.warpgroup_fence_operand``). The
    fragments of ``T.wgmma_gemm`` are already pinned after each ``T.wait_wgmma``; this is the
    explicit form for hand-scheduled code. ``num_regs`` counts this thread's 32-bit registers from
    its element ``offset`` (default: the rest of the thread's part of the fragment); ``dtype`` is
    accepted for upstream's signature and must match the buffer's."""
    x = _unwrap(buffer_or_ptr)
    if isinstance(x, ir.TensorLoad):
        if any(const_int(i) != 0 for i in x.indices):
            raise ValueError("T.warpgroup_fence_operand: give the fragment itself and an `offset` (in this thread's "
                             f"elements), not an element {x.source.name}[...] of it")
        x = x.source
    if not is_buffer_var(x):
        raise TypeError("T.warpgroup_fence_operand expects a register fragment (T.alloc_fragment / T.alloc_local), "
                        f"got {type(x).__name__}")
    if dtype is not None and str(dtype) != str(x.dtype):
        raise ValueError(f"T.warpgroup_fence_operand: dtype {dtype} does not match {x.name}'s {x.dtype}")
    emit("warpgroup_fence_operand", [_to_region(x, READ_WRITE, what="warpgroup_fence_operand"), offset,
                                     -1 if num_regs is None else num_regs])


def _reduce(kind, src, dst, dim, clear, batch=1, nan_propagate=False, annotations=None):
    """Emit ``tl.reduce``. Upstream's ``batch`` (outputs per shared barrier pair), ``nan_propagate``
    and the same keys in ``annotations`` travel as two trailing arguments, present only when set;
    ``annotations={"enable_fadd2": False}`` (a float32 sum / abssum keeps its in-thread fold
    scalar where the target has packed ``.f32x2`` adds) as a third, present only when false."""
    ann = dict(annotations or {})
    batch = int(ann.pop("batch", batch))
    nan_propagate = bool(ann.pop("nan_propagate", nan_propagate))
    fadd2 = ann.pop("enable_fadd2", True)
    fadd2 = getattr(fadd2, "value", fadd2)
    if isinstance(fadd2, bool) or (isinstance(fadd2, int) and fadd2 in (0, 1)):
        fadd2 = bool(fadd2)
    else:
        raise ValueError(f"reduce_{kind}: annotation 'enable_fadd2' must be a boolean, got {fadd2!r}")
    if batch < 1:
        raise ValueError(f"batch must be >= 1, got {batch}")
    s = _to_region(src, READ, what=f"reduce_{kind}")
    d = _to_region(dst, WRITE, what=f"reduce_{kind}")
    args = [s, d, kind, int(dim), int(bool(clear))]
    if batch > 1 or nan_propagate or not fadd2:
        args += [batch, int(nan_propagate)]
    if not fadd2:
        args += [0]
    emit("reduce", args)


# ``batch``: outputs per batched all-reduce; it must divide the outputs each thread holds (checked
# when lowering). ``nan_propagate`` (max/min/absmax on float16/bfloat16, as upstream): a NaN input
# makes the result NaN (``__hmax_nan``); by default NaN loses to the other operand. Other types
# ignore it, as upstream does. ``annotations``: upstream's per-op hints; "batch" and
# "nan_propagate" are read from it, the SM100 packed-FP32 hint "enable_fadd2" has no meaning here.

def reduce_sum(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    _reduce("sum", buffer, out, dim, clear, batch, False, annotations)


def reduce_max(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    _reduce("max", buffer, out, dim, clear, batch, nan_propagate, annotations)


def reduce_min(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    _reduce("min", buffer, out, dim, clear, batch, nan_propagate, annotations)


def reduce_abssum(buffer, out, dim=-1, batch=1, annotations=None, clear=True):
    """Upstream's signature (no positional ``clear``); ``clear`` stays available as a keyword."""
    _reduce("abssum", buffer, out, dim, clear, batch, False, annotations)


def reduce_absmax(buffer, out, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    _reduce("absmax", buffer, out, dim, clear, batch, nan_propagate, annotations)


def _bit_reduce(kind, buffer, out, dim, clear, batch=1, annotations=None):
    src = _to_region(buffer, READ, what=f"reduce_{kind}")
    dtype = str(src.args[0].source.dtype)
    if not dtype.startswith(("int", "uint")):
        raise TypeError(f"T.reduce_{kind} reduces integer buffers, got {dtype}")
    _reduce(kind, buffer, out, dim, clear, batch, False, annotations)


def reduce_bitand(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    """Bitwise AND of ``buffer`` along ``dim`` into ``out`` (integer fragments)."""
    _bit_reduce("bitand", buffer, out, dim, clear, batch, annotations)


def reduce_bitor(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    _bit_reduce("bitor", buffer, out, dim, clear, batch, annotations)


def reduce_bitxor(buffer, out, dim=-1, clear=True, batch=1, annotations=None):
    _bit_reduce("bitxor", buffer, out, dim, clear, batch, annotations)


def reduce(buffer, out, reduce_type, dim=-1, clear=True, batch=1, nan_propagate=False, annotations=None):
    _reduce(str(reduce_type), buffer, out, dim, clear, batch, nan_propagate, annotations)


def cumsum(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive prefix sum of ``src`` along ``dim`` into ``dst`` (``src`` itself by default).
    ``annotations`` (upstream's per-op pass hints) are accepted; no pass of ours reads them."""
    s = _to_region(src, READ, what="cumsum")
    d = _to_region(dst if dst is not None else src, WRITE, what="cumsum")
    emit("cumsum", [s, d, int(dim), int(bool(reverse))])


def cummax(src, dst=None, dim=0, reverse=False, annotations=None):
    """Inclusive running maximum of ``src`` along ``dim`` into ``dst`` (``src`` itself by default);
    lowered like ``T.cumsum`` with max for +. ``annotations`` as for ``T.cumsum``."""
    s = _to_region(src, READ, what="cummax")
    d = _to_region(dst if dst is not None else src, WRITE, what="cummax")
    emit("cumsum", [s, d, int(dim), int(bool(reverse)), "max"])


# memory_order of a read-modify-write atomic -> the device library's ORDER (src/tl/atomic.h)
_RMW_ORDERS = {None: 0, "relaxed": 0, "consume": 1, "acquire": 1, "release": 2, "seq_cst": 3, "acq_rel": 4}


def _atomic(kind, dst, value, memory_order=None, return_prev=False):
    """An element atomic (``A[i]``: the device call, its old value the expression's value), a
    scalar broadcast over a slice, or a tile atomic between regions. A ``memory_order`` other
    than relaxed puts the PTX release / acquire fences around each element's relaxed atomic (a
    tile atomic: around the whole operation, in every thread)."""
    order = _RMW_ORDERS.get(memory_order) if isinstance(memory_order, (str, type(None))) else None
    if order is None:
        raise ValueError(f"T.atomic_{kind}: memory_order must be one of "
                         f"{sorted(k for k in _RMW_ORDERS if k)}, got {memory_order!r}")
    dst_u, val_u = _unwrap(dst), _unwrap(value)
    if isinstance(dst_u, ir.TensorLoad) and not is_buffer_var(val_u) and not isinstance(val_u, ir.TensorRegion):
        # Element-wise atomic: lower straight to the device library call.
        dtype = dst_u.source.dtype
        val = as_expr(val_u)
        if hasattr(val, "ty") and str(getattr(val.ty, "dtype", val.ty)) != str(dtype):
            val = tirx.Cast(str(dtype), val)
        name = f"tl::atomic_{kind}" if not order else f"tl::atomic_{kind}_ordered<{order}>"
        return tirx.call_extern(str(dtype), name, tirx.address_of(dst_u), val)
    from tvm.tirx.script.builder import ir as builder

    if order:
        builder.evaluate(tirx.call_extern("int32", f"tl::rmw_fence_before<{order}>"))
    if not is_buffer_var(val_u) and not isinstance(val_u, (ir.TensorRegion, ir.TensorLoad)):
        # a scalar value: every element of the buffer or slice gets it, one atomic each
        _atomic_broadcast(kind, dst_u, val_u)
    else:
        src_shape = _shape_of(val_u)
        d = _to_region(dst_u, READ_WRITE, hint=src_shape, what=f"atomic_{kind}")
        s = _to_region(val_u, READ, hint=_shape_of(dst_u), what=f"atomic_{kind}")
        emit("atomic", [d, s, kind])
    if order:
        builder.evaluate(tirx.call_extern("int32", f"tl::rmw_fence_after<{order}>"))
    return None


def _atomic_broadcast(kind, dst, value):
    """``T.atomic_<kind>(A[0:m, 0:n], x)`` with a scalar ``x``: a T.Parallel loop over the slice's
    (non-unit) extents doing the element atomic."""
    from tvm.tirx.script.builder import ir as builder

    from .loops import Parallel

    r = _to_region(dst, READ_WRITE, what=f"atomic_{kind}")     # tl.region(buf[mins], access, *extents)
    buf, mins, extents = r.args[0].source, list(r.args[0].indices), list(r.args[2:])
    loop_dims = [k for k, e in enumerate(extents) if not _is_one(e)]
    if not loop_dims:
        builder.evaluate(_atomic(kind, tirx.BufferLoad(buf, mins), value))
        return None
    frames = Parallel(*[extents[k] for k in loop_dims]).loop_frames()
    index = list(mins)
    for k, frame in zip(loop_dims, frames):
        index[k] = mins[k] + frame.__enter__()
    builder.evaluate(_atomic(kind, tirx.BufferLoad(buf, index), value))
    for frame in reversed(frames):
        frame.__exit__(None, None, None)
    return None


# (``annotations``: upstream's lowering hints for these ops, with no meaning here)
def atomic_add(dst, value, memory_order=None, return_prev=False, use_tma=False, annotations=None):
    return _atomic("add", dst, value, memory_order, return_prev)


def atomic_max(dst, value, memory_order=None, return_prev=False, annotations=None):
    return _atomic("max", dst, value, memory_order, return_prev)


def atomic_min(dst, value, memory_order=None, return_prev=False, annotations=None):
    return _atomic("min", dst, value, memory_order, return_prev)


# ----- element atomics with a memory order, bitwise or, packed adds ------------------------------------
_LOAD_ORDERS = {"relaxed": 0, "consume": 1, "acquire": 1, "seq_cst": 3}
_STORE_ORDERS = {"relaxed": 0, "release": 2, "seq_cst": 3}


def _element(ref, what):
    """The buffer and element address of ``A[i]`` (or of the first element of a slice/buffer)."""
    ref = _unwrap(ref)
    if is_buffer_var(ref):
        ref = tirx.BufferLoad(ref, [0] * len(ref.shape))
    elif isinstance(ref, ir.TensorRegion):
        ref = tirx.BufferLoad(ref.source, [r.min for r in ref.region])
    if not isinstance(ref, ir.TensorLoad):
        raise TypeError(f"T.{what} expects a buffer element A[i] (or a slice), got {type(ref).__name__}")
    return ref.source, tirx.address_of(ref)


def _order(orders, memory_order, what):
    if memory_order not in orders:
        raise ValueError(f"T.{what}: memory_order must be one of {sorted(orders)}, got {memory_order!r}")
    return orders[memory_order]


def atomic_load(src, memory_order="seq_cst"):
    """The value of a 32/64-bit element, read with ``memory_order`` (GPU scope)."""
    buf, addr = _element(src, "atomic_load")
    order = _order(_LOAD_ORDERS, memory_order, "atomic_load")
    return tirx.call_extern(str(buf.dtype), f"tl::atomic_load<{order}>", addr)


def atomic_store(dst, src, memory_order="seq_cst"):
    """Write ``src`` to a 32/64-bit element with ``memory_order`` (GPU scope)."""
    buf, addr = _element(dst, "atomic_store")
    order = _order(_STORE_ORDERS, memory_order, "atomic_store")
    return tirx.call_extern("int32", f"tl::atomic_store<{order}>", addr, as_expr(src))


def atomic_or(dst, value, memory_order=None):
    """Atomically OR ``value`` into an integer element; returns the old value. The OR is relaxed
    (``atomicOr``); another ``memory_order`` is refused rather than ignored."""
    if memory_order not in (None, "relaxed"):
        raise NotImplementedError(f"T.atomic_or(memory_order={memory_order!r}) is not supported: it is a relaxed "
                                  "atomicOr; order it with T.atomic_load / T.atomic_store or a fence")
    buf, addr = _element(dst, "atomic_or")
    if not str(buf.dtype).startswith(("int", "uint")):
        raise TypeError(f"T.atomic_or needs an integer element, got {buf.dtype}")
    value = as_expr(value)
    if str(getattr(value.ty, "dtype", value.ty)) != str(buf.dtype):
        value = tirx.Cast(str(buf.dtype), value)
    return tirx.call_extern(str(buf.dtype), "tl::atomic_or", addr, value)


def _atomic_packed(n, dst, value, return_prev):
    what = f"atomic_addx{n}"
    if return_prev:
        raise NotImplementedError(f"T.{what}(return_prev=True) is not supported: use T.atomic_add per element")
    dbuf, daddr = _element(dst, what)
    sbuf, saddr = _element(value, what)
    allowed = ("float16", "bfloat16", "float32") if n == 2 else ("float32",)
    if str(dbuf.dtype) not in allowed or str(sbuf.dtype) != str(dbuf.dtype):
        raise TypeError(f"T.{what} adds {n} consecutive {'/'.join(allowed)} elements of the same dtype, "
                        f"got {dbuf.dtype} += {sbuf.dtype}")
    return tirx.call_extern("int32", f"tl::atomic_addx{n}", daddr, saddr)


def atomic_addx2(dst, value, return_prev=False):
    """Atomically add the 2 consecutive elements at ``value`` to those at ``dst`` (one packed atomic)."""
    return _atomic_packed(2, dst, value, return_prev)


def atomic_addx4(dst, value, return_prev=False):
    """Atomically add 4 consecutive float32 at ``value`` to those at ``dst`` (one vector atomic on sm_90)."""
    return _atomic_packed(4, dst, value, return_prev)

