"""The ``T`` namespace of TileLang: ``import tilelang.language as T``.

Kernels are Python functions decorated with ``@T.prim_func`` and parsed by TVM's TVMScript
parser (see ``tilelang.frontend``). Everything here either builds TVM IR directly (loops,
allocations, math) or emits a ``tl.*`` tile operator that the compiler lowers later.
"""

from __future__ import annotations

from tvm.script import tirx as _T
from tvm.tirx.script.parser.entry import BufferProxy as _BufferProxy

from tilelang.frontend.parser import install as _install_parser
from tilelang.frontend.parser import prim_func

from .alloc import alloc_fragment, alloc_global, alloc_local, alloc_shared, alloc_var, const, empty
from .annotate import (Fragment, annotate_l2_hit_ratio, annotate_layout, annotate_padding,
                       annotate_restrict_buffers, annotate_safe_value, disable_warp_group_reg_alloc,
                       no_set_max_nreg, print, sync_threads, use_swizzle)  # noqa: A004
from .dtypes import normalize_dtype
from .kernel import (Kernel, get_block_binding, get_block_bindings, get_thread_binding,
                     get_thread_bindings, get_thread_extent)
from .loops import Parallel, Pipelined, Vectorized, grid, serial, unroll, vectorized
from .math import *  # noqa: F401,F403 - the math helpers are part of T
from .math import abs, cast, ceildiv, floordiv, floormod, if_then_else, infinity, max, max_value, min, min_value  # noqa: F401
from .tile import (GemmWarpPolicy, atomic_add, atomic_max, atomic_min, clear, copy, cumsum, fill,
                   gemm, gemm_v2, reduce, reduce_absmax, reduce_abssum, reduce_max, reduce_min, reduce_sum)

_install_parser()

# Scalar dtypes double as constructors (T.float32(0)) and as dtype arguments (T.float16).
bool = _T.bool  # noqa: A001
int8, int16, int32, int64 = _T.int8, _T.int16, _T.int32, _T.int64
uint8, uint16, uint32, uint64 = _T.uint8, _T.uint16, _T.uint32, _T.uint64
float16, float32, float64, bfloat16 = _T.float16, _T.float32, _T.float64, _T.bfloat16
float8_e4m3fn, float8_e5m2 = _T.float8_e4m3fn, _T.float8_e5m2
float8_e4m3 = float8_e4m3fn
handle = _T.handle
macro = _T.macro
inline = _T.inline
evaluate = _T.evaluate
address_of = _T.address_of
call_extern = _T.call_extern
launch_thread = _T.launch_thread
int32_t = int32


class _TensorProxy(_BufferProxy):
    """``T.Tensor((M, K), dtype)``/``T.Buffer(...)`` parameter annotations; dtype in any spelling."""

    def __call__(self, shape, dtype="float32", data=None, strides=None, elem_offset=None,
                 byte_offset=None, scope="global", align=0, offset_factor=0, layout="default"):
        if not isinstance(shape, (list, tuple)):
            shape = (shape,)
        return super().__call__(shape, normalize_dtype(dtype), data, strides, elem_offset,
                                byte_offset, scope, align, offset_factor, layout)


Tensor = _TensorProxy()
Buffer = Tensor


def StridedTensor(shape, strides, dtype="float32", scope="global"):  # noqa: N802 - upstream name
    """A tensor parameter with explicit element strides (a view of a larger tensor)."""
    if not isinstance(shape, (list, tuple)):
        shape = (shape,)
    if not isinstance(strides, (list, tuple)) or len(strides) != len(shape):
        raise ValueError(f"T.StridedTensor needs one stride per dimension, got shape {shape} and strides {strides}")
    return _BufferProxy.__call__(Tensor, tuple(shape), normalize_dtype(dtype), strides=list(strides), scope=scope)


FragmentBuffer = Tensor
SharedBuffer = Tensor


def Layout(shape, forward_fn):  # noqa: N802 - mirrors upstream's T.Layout class
    """A shared-memory layout: ``T.Layout((M, N), lambda i, j: [i, j ^ (i % 8)])``."""
    from tilelang.layout import Layout as _Layout

    return _Layout(shape, forward_fn)


def dynamic(name: str, dtype="int32"):
    """A symbolic dimension, bound from the tensors' shapes at call time."""
    from tvm import tirx

    return tirx.Var(name, normalize_dtype(dtype))


symbolic = dynamic


# Last in the module, since they shadow builtins: C-style aliases upstream code uses (T.float is float32, T.half float16, ...).
float, half, double = float32, float16, float64  # noqa: A001
int, long, short, uint = int32, int64, int16, uint32  # noqa: A001
dtype = __import__("tvm_ffi").dtype
