"""Raw device pointers in kernels: ``T.ptr``, ``T.make_tensor`` and ``T.ptx_cp_async``.

Contract:
- ``a: T.ptr`` annotates a kernel parameter that is a raw device address. At call time it takes an
  ``int`` (``tensor.data_ptr()``) or a torch tensor (its data pointer); the runtime never reads a
  shape from it. In the IR it is a handle variable; ``T.ptr()`` / ``T.ptr(dtype)`` make one.
- As a dtype, ``T.ptr`` is a table of addresses: ``T.Tensor([G], T.ptr)`` is an ``int64`` tensor.
- ``T.make_tensor(ptr, shape, dtype="float32", strides=None)`` is a global tensor at ``ptr``:
  * over a ``T.ptr`` parameter, at the top of the kernel, the parameter *becomes* that tensor
    (a ``match_buffer``), so the lowering sees an ordinary tensor parameter. Its index is listed
    in a PrimFunc attribute (``pointer_param_indices``), which makes it a "pointer" parameter of the
    artifact (``tilelang.artifact``): the shape's symbols must come from scalar parameters.
  * over any other address (an element of a pointer table, an int64 value, a handle expression,
    or a ``T.ptr`` parameter inside ``T.Kernel``, as upstream allows), a typed handle is bound to
    that address where the call stands and the tensor is declared over it (a ``Bind`` then a
    ``DeclBuffer``); the parameter stays a raw address.
- ``T.make_tensor_from_addr(addr, shape, dtype, strides)`` is upstream's name for the second form
  (global tensors only).
- ``T.ptx_cp_async(dst, src, num_elems[, predicate])`` between two element pointers
  (``T.access_ptr``) is the call ``tl.ptx_cp_async``; ``T.ptx_commit_group()`` /
  ``T.ptx_wait_group(n)`` are ``tl::cp_async_commit`` / ``tl::cp_async_wait<n>``. The lowering is
  ``tilelang.transform.pointer_ops``.
"""

from __future__ import annotations

from tvm import ir, tirx
from tvm.script import tirx as _T
from tvm.tirx import is_buffer_var
from tvm.tirx.script.builder import ir as _builder

from .dtypes import normalize_dtype

POINTER_PARAM_ATTR = "tl.pointer_param"   # PrimFunc attribute "tl.pointer_param.<index>"


def pointer_param_indices(func) -> list[int]:
    """The indices of ``func``'s parameters declared ``T.ptr`` and made tensors by ``T.make_tensor``."""
    attrs = func.attrs if func.attrs is not None else {}
    prefix = POINTER_PARAM_ATTR + "."
    return sorted(int(k[len(prefix):]) for k in attrs.keys() if str(k).startswith(prefix))


def ptr(dtype=None, storage_scope: str = "global", *, is_size_var: bool = False):  # noqa: ARG001 - upstream's
    """A handle variable: the type of a raw-pointer parameter (``a: T.ptr``)."""
    if dtype is None:
        return _T.handle(storage_scope=storage_scope)
    return _T.handle(dtype=normalize_dtype(dtype), storage_scope=storage_scope)


# ``T.ptr`` written where a dtype goes (``T.Tensor([G], T.ptr)``) is an address table: int64
# (``dtypes.normalize_dtype`` reads this attribute, as it does TVMScript's dtype constructors').
ptr._dtype_str = "int64"


def _is_handle(expr) -> bool:
    return isinstance(getattr(expr, "ty", None), ir.PointerType)


def _prim_func_frame():
    from tvm.script.ir_builder import IRBuilder
    from tvm.tirx.script.builder.frame import PrimFuncFrame

    if not IRBuilder.is_in_scope():
        return None, []
    frames = list(IRBuilder.current().frames)
    funcs = [f for f in frames if isinstance(f, PrimFuncFrame)]
    return (funcs[-1] if funcs else None), frames


def _shape(shape):
    if isinstance(shape, (list, tuple)):
        return list(shape)
    return [shape]


def make_tensor(ptr, shape, dtype="float32", strides=None):
    """A global tensor of ``shape`` and ``dtype`` whose data is at ``ptr`` (see the module doc)."""
    if ptr is None or isinstance(ptr, (int, float, str)):
        raise TypeError(f"T.make_tensor expects a pointer (a T.ptr parameter or an address expression), "
                        f"got {type(ptr).__name__} {ptr!r}")
    dtype = normalize_dtype(dtype)
    shape = _shape(shape)
    if strides is not None:
        strides = _shape(strides)
    frame, frames = _prim_func_frame()
    if frame is None:
        raise RuntimeError("T.make_tensor() can only be used while a kernel is being built "
                           "(inside @T.prim_func or @tilelang.jit)")
    ptr = getattr(ptr, "scalar", None) or ptr
    if isinstance(ptr, tirx.Var) and _is_handle(ptr):
        index = next((k for k, a in enumerate(frame.args) if a.same_as(ptr)), None)
        if index is not None and frames[-1].same_as(frame):
            buf = _T.match_buffer(ptr, shape, dtype, strides=strides)
            _builder.func_attr({f"{POINTER_PARAM_ATTR}.{index}": True})
            return buf
    if is_buffer_var(ptr) or not isinstance(ptr, ir.Expr):     # (0.27's tirx.Buffer is ir.Var: no isinstance)
        raise TypeError(f"T.make_tensor expects a pointer (a T.ptr parameter or an address expression), "
                        f"got {type(ptr).__name__}")
    scope = "global"
    if _is_handle(ptr) and str(ptr.ty.storage_scope or ""):
        scope = str(ptr.ty.storage_scope)
    if not _is_handle(ptr):
        vdt = str(ptr.ty.dtype) if isinstance(ptr.ty, ir.PrimType) else str(ptr.ty)
        if vdt not in ("int64", "uint64"):
            raise TypeError(f"T.make_tensor: an address must be a pointer or a 64-bit integer, got {vdt}")
    typed = ir.PointerType(ir.PrimType(dtype), scope)
    # the address, reinterpreted as a pointer to ``dtype`` elements
    value = ir.Call(ir.Op.get("tirx.reinterpret"), [ptr], ret_ty=typed)
    data = _builder.Bind(value, typed)
    return _builder.decl_buffer(shape, dtype, data=data, strides=strides, scope=scope)


def make_tensor_from_addr(addr, shape, dtype="float32", strides=None, storage_scope="global"):
    """Upstream's name for ``T.make_tensor`` over an address value (a 64-bit integer or a pointer
    expression: an element of a table of ``data_ptr()``s): a global tensor at ``addr``."""
    if storage_scope != "global":
        raise ValueError(f"T.make_tensor_from_addr: only global tensors have addresses a kernel can be given "
                         f"(storage_scope={storage_scope!r}); view shared memory with T.view / T.reshape")
    return make_tensor(addr, shape, dtype, strides)


def ptx_cp_async(dst_access_ptr, src_access_ptr, num_elems, predicate=None):
    """An asynchronous global -> shared copy of ``num_elems`` elements (4, 8 or 16 bytes) between
    two element pointers (``T.access_ptr(S[i], "w")``, ``T.access_ptr(A[j], "r")``); with a
    ``predicate``, false fills the destination with zeros. Lowered to ``tl::cp_async_gs``; an
    element-wise copy in a ``T.vectorized`` loop becomes one wide copy. Commit and wait with
    ``T.ptx_commit_group()`` / ``T.ptx_wait_group(n)``."""
    from ._ops import as_expr, get_op

    args = [dst_access_ptr, src_access_ptr, as_expr(num_elems)]
    if predicate is not None:
        args.append(as_expr(predicate))
    for k, p in enumerate(args[:2]):
        if not _is_handle(p):
            raise TypeError(f"T.ptx_cp_async: the {('destination', 'source')[k]} must be a pointer "
                            f"(T.access_ptr(...) / T.address_of(...)), got {type(p).__name__}")
    return ir.Call(get_op("ptx_cp_async"), args, ret_ty="handle")


def ptx_commit_group():
    """Close the group of the cp.async copies issued so far (``cp.async.commit_group``)."""
    return tirx.call_extern("void", "tl::cp_async_commit")


def ptx_wait_group(num):
    """Wait until at most ``num`` committed cp.async groups are pending (``cp.async.wait_group``)."""
    if not isinstance(num, int) or num < 0:
        raise TypeError(f"T.ptx_wait_group takes a non-negative int constant, got {num!r}")
    return tirx.call_extern("void", f"tl::cp_async_wait<{num}>")


__all__ = ["ptr", "make_tensor", "ptx_cp_async", "ptx_commit_group", "ptx_wait_group"]
