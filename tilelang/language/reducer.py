"""Deferred reductions across threads: ``T.alloc_reducer`` and TVM's thread all-reduce.

Reducer epochs (``T.alloc_reducer`` / ``T.reducer_init`` / ``T.reducer_update`` /
``T.finalize_reducer``): every thread keeps a private partial result for each element of the
reducer; ``T.reducer_update(acc[idx], value)`` inside a ``T.Parallel`` loop folds ``value`` into
the partial of the thread that runs that iteration (each iteration counts once, however the loop
is replicated over threads); ``T.finalize_reducer(acc, dst)`` combines the partials of all
threads and writes the result into the fragment ``dst``. The starting value given to
``T.reducer_init`` is taken at the init and enters the result exactly once. Between init and
finalize the reducer may only be updated: a plain store, read or ``T.clear`` of it is a compile
error, as are an update outside any ``T.Parallel``, an update before the init, a second init and
an epoch that is never finalized (``tilelang.transform.lower_reduce`` checks and lowers).

The older form ``T.alloc_reducer(shape, dtype, replication="all")`` + ``T.clear`` + ``acc[i] +=
x`` + ``T.finalize_reducer(acc)`` (in place) is accepted too.

``T.comm_reducer(combiner, identities)`` and ``T.tvm_thread_allreduce(...)`` under a
``reduce_scope`` attribute are TVM's thread all-reduce, lowered by the same module.
"""

from __future__ import annotations

from tvm import ir, tirx
from tvm.script import tirx as _T

from ._ops import emit, region
from .alloc import alloc_fragment
from .dtypes import normalize_dtype

REDUCER_OPS = ("sum", "max", "min", "bitand", "bitor", "bitxor")
_BITWISE = ("bitand", "bitor", "bitxor")

comm_reducer = _T.comm_reducer
tvm_thread_allreduce = _T.tvm_thread_allreduce


def _whole(buf, access):
    return region(buf, [0] * len(buf.shape), list(buf.shape), access)


def alloc_reducer(shape, dtype="float32", op="sum", replication=None):
    """A reducer of ``shape`` combining with ``op`` (sum, max, min, bitand, bitor, bitxor)."""
    dtype = normalize_dtype(dtype)
    if op not in REDUCER_OPS:
        raise ValueError(f"T.alloc_reducer: unknown op {op!r}, expected one of {', '.join(REDUCER_OPS)}")
    if op in _BITWISE:
        assert str(dtype).startswith(("int", "uint")), (
            f"T.alloc_reducer(op={op!r}) needs an integer dtype, got {dtype}")
    if replication not in (None, "all", "none"):
        raise ValueError(f"T.alloc_reducer: replication must be 'all' or 'none', got {replication!r}")
    buf = alloc_fragment(shape, dtype)
    emit("reducer_decl", [_whole(buf, 2), ir.StringImm(op), tirx.IntImm("int32", int(replication is not None))])
    return buf


def _buffer_of(acc, what):
    buf = acc.source if isinstance(acc, ir.TensorLoad) else acc
    if not isinstance(buf, tirx.Buffer):
        raise TypeError(f"{what} takes a reducer from T.alloc_reducer, got {type(acc).__name__}")
    return buf


def reducer_init(reducer, init=None):
    """Open an epoch: every partial starts from the op's identity; ``init`` (taken now) is
    combined into the result once."""
    buf, value = _buffer_of(reducer, "T.reducer_init"), init
    args = [_whole(buf, 2)]
    if value is not None:
        if isinstance(value, (bool, int, float)):
            value = tirx.const(value, str(buf.dtype))
        elif str(value.dtype) != str(buf.dtype):
            raise TypeError(f"T.reducer_init: the starting value's dtype {value.dtype} does not match reducer "
                            f"'{buf.name}' ({buf.dtype}); cast it with T.cast")
        args.append(value)
    emit("reducer_init", args)


def reducer_update(target, value):
    """Fold ``value`` into the partial of the reducer element ``target`` (``acc[i]``)."""
    if not isinstance(target, ir.TensorLoad):
        raise TypeError("T.reducer_update takes a reducer element (acc[i]) and a value")
    if isinstance(value, (bool, int, float)):
        value = tirx.const(value, str(target.source.dtype))
    elif str(value.dtype) != str(target.source.dtype):
        value = tirx.Cast(str(target.source.dtype), value)
    emit("reducer_update", [target, value])


def finalize_reducer(reducer, dst=None, batch=1, annotations=None):
    """Close the epoch: combine the partials of all threads into ``dst`` (a fragment of the
    reducer's shape); without ``dst`` (the older form) the reducer itself holds the result.
    ``batch``: a block-wide all-reduce combines that many elements per round of barriers (it
    must divide the elements each thread holds; a collective inside one warp ignores it)."""
    if int(batch) < 1:
        raise ValueError(f"finalize_reducer: batch must be >= 1, got {batch}")
    buf = _buffer_of(reducer, "T.finalize_reducer")
    args = [_whole(buf, 1)]
    if dst is not None:
        dbuf = _buffer_of(dst, "T.finalize_reducer")
        if [int(s) for s in dbuf.shape] != [int(s) for s in buf.shape]:
            raise ValueError(f"T.finalize_reducer: '{dbuf.name}' has shape {list(dbuf.shape)}, reducer "
                             f"'{buf.name}' has {list(buf.shape)}")
        args.append(_whole(dbuf, 2))
    if int(batch) > 1:   # last, after the destination (an IntImm: no region)
        args.append(tirx.IntImm("int32", int(batch)))
    emit("finalize_reducer", args)
