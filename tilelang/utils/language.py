"""Buffer helpers upstream code imports from ``tilelang.utils.language``.

Contract:
- Scope tests on a ``Buffer``, ``BufferLoad`` or ``BufferRegion``: ``is_global``, ``is_shared``
  (``shared`` or, with ``allow_dynamic``, ``shared.dyn``), ``is_shared_dynamic``,
  ``is_tensor_memory`` (``shared.tmem``, ``T.alloc_tmem``), ``is_local``, ``is_fragment``
  (``local.fragment``), ``is_local_var`` (``local.var``). Anything else raises ``TypeError``.
- ``to_buffer_region(obj, access_type="rw", extents=None)`` -> ``BufferRegion``: a whole buffer,
  a region as is, or a load as the unit region at its indices (a ``Ramp`` index spans its lanes).
  ``extents`` (trailing dims, leading ones padded with 1) replaces the region's extents, clipped
  to the original ones. ``access_type`` is accepted for upstream's signature.
- ``get_buffer_elems(buffer)``: the element count (an int when the shape is constant).
- ``retrieve_shape`` / ``retrieve_dtype``: the extents of ``to_buffer_region(obj)`` / its dtype.
"""

from __future__ import annotations

from tvm import ir, tirx

__all__ = ["get_buffer_elems", "is_fragment", "is_global", "is_local", "is_local_var", "is_shared",
           "is_shared_dynamic", "is_tensor_memory", "retrieve_dtype", "retrieve_shape", "to_buffer_region"]


# In apache-tvm 0.27 a buffer is a tensor-typed ``ir.Var``, a load an ``ir.TensorLoad`` and a
# region an ``ir.TensorRegion`` (``tirx.BufferLoad`` / ``tirx.BufferRegion`` are builder functions).
def _is_buffer(obj) -> bool:
    try:
        return isinstance(obj, ir.Var) and obj.shape is not None
    except Exception:  # noqa: BLE001 - a scalar variable has no shape
        return False


def _source(obj):
    """The buffer a load or region reads (``.source`` in 0.27, ``.buffer`` where patched)."""
    src = getattr(obj, "buffer", None)
    return src if src is not None else obj.source


def _buffer(obj) -> tirx.Buffer:
    if _is_buffer(obj):
        return obj
    if isinstance(obj, (ir.TensorLoad, ir.TensorRegion)):
        return _source(obj)
    raise TypeError(f"expected a Buffer, BufferLoad or BufferRegion, got {type(obj).__name__}")


def _scope(obj) -> str:
    return str(_buffer(obj).scope())


def is_global(obj) -> bool:
    return _scope(obj) == "global"


def is_shared(obj, allow_dynamic: bool = True) -> bool:
    return _scope(obj) == "shared" or (allow_dynamic and _scope(obj) == "shared.dyn")


def is_shared_dynamic(obj) -> bool:
    return _scope(obj) == "shared.dyn"


def is_tensor_memory(obj) -> bool:
    return _scope(obj) == "shared.tmem"


def is_local(obj) -> bool:
    return _scope(obj) == "local"


def is_fragment(obj) -> bool:
    return _scope(obj) == "local.fragment"


def is_local_var(obj) -> bool:
    return _scope(obj) == "local.var"


def _const(v):
    return int(v.value) if isinstance(v, tirx.IntImm) else v


def get_buffer_elems(buffer: tirx.Buffer):
    n = 1
    for d in buffer.shape:
        n = n * _const(d)
    return n


def to_buffer_region(obj, access_type: str = "rw", extents=None) -> tirx.BufferRegion:
    del access_type
    if isinstance(obj, ir.TensorRegion):
        region = obj
    elif _is_buffer(obj):
        region = tirx.BufferRegion(obj, [ir.Range.from_min_extent(0, d) for d in obj.shape])
    elif isinstance(obj, ir.TensorLoad):
        ranges = []
        for idx in obj.indices:
            if isinstance(idx, tirx.Ramp):
                ranges.append(ir.Range.from_min_extent(idx.base, idx.lanes))
            else:
                ranges.append(ir.Range.from_min_extent(idx, 1))
        region = tirx.BufferRegion(_source(obj), ranges)
    else:
        raise ValueError(f"to_buffer_region: unsupported argument {type(obj).__name__} (expected a Buffer, "
                         "BufferLoad or BufferRegion)")
    if extents is None:
        return region
    extents = list(extents)
    if len(extents) > len(region.region):
        raise ValueError(f"to_buffer_region: {len(extents)} extents for a {len(region.region)}-D region")
    extents = [1] * (len(region.region) - len(extents)) + extents
    ranges = [ir.Range.from_min_extent(r.min, tirx.min(r.extent, e) if not (
        isinstance(r.extent, tirx.IntImm) and isinstance(e, int) and e <= r.extent.value) else e)
        for r, e in zip(region.region, extents)]
    return tirx.BufferRegion(_source(region), ranges)


def retrieve_shape(obj) -> list:
    return [_const(r.extent) for r in to_buffer_region(obj).region]


def retrieve_dtype(obj) -> str:
    return str(_buffer(obj).dtype)
