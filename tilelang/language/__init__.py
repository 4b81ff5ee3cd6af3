"""The ``T`` namespace of TileLang: ``import tilelang.language as T``.

Kernels are Python functions decorated with ``@T.prim_func`` and parsed by TVM's TVMScript
parser (see ``tilelang.frontend``). Everything here either builds TVM IR directly (loops,
allocations, math) or emits a ``tl.*`` tile operator that the compiler lowers later.
"""

from __future__ import annotations

from tvm.script import tirx as _T
from tvm.tirx.script.parser.entry import BufferProxy as _BufferProxy

from tilelang.frontend.parser import install as _install_parser
from tilelang.frontend.parser import inline, macro, prim_func

from .alloc import (Ref, alloc_buffer, alloc_fragment, alloc_global, alloc_local, alloc_shared, alloc_var, const,
                    empty)
from .sm100 import (clc_get_first_ctaid_x, clc_is_canceled, clc_try_cancel_multicast,  # noqa: F401 - refused
                    tcgen05_cp_warpx4, tcgen05_gemm_blockscaled, tcgen05_sf_warp_transpose)
from .tmem import alloc_tmem, tcgen05_gemm, tcgen05_mma_arrive
from .annotate import (Fragment, annotate_l2_hit_ratio, annotate_layout, annotate_padding,
                       annotate_restrict_buffers, annotate_safe_value, disable_warp_group_reg_alloc,
                       no_set_max_nreg, print, use_swizzle)  # noqa: A004
from .barrier import (Persistent, WarpSpecialize, alloc_barrier, alloc_cluster_barrier,  # noqa: F401
                      annotate_consumer_reg_alloc, annotate_producer_reg_dealloc, barrier_arrive, barrier_wait,
                      cp_async_barrier_noinc,
                      dec_max_nreg, inc_max_nreg, mbarrier_arrive, mbarrier_arrive_expect_tx, mbarrier_expect_tx,
                      mbarrier_wait_parity, fence_proxy_async, named_barrier_arrive, pdl_sync, pdl_trigger, ptx_arrive_cluster_barrier,
                      set_max_nreg, sync_grid, sync_threads, tma_copy, tma_store_arrive, tma_store_wait, ws,
                      cluster_arrive, cluster_arrive_relaxed, cluster_wait, cluster_sync, block_rank_in_cluster,
                      copy_cluster)
from .builtins import (align_up, annotate_compile_flags, annotate_min_blocks_per_sm, annotate_pass_configs, attr,
                       let, match_buffer, thread_binding)
from .dtypes import normalize_dtype
from .kernel import (ClusterKernel, Kernel, get_block_binding, get_block_bindings, get_block_extent,
                     get_block_extents, get_cluster_dims, get_cluster_extent, get_cluster_extents, get_cluster_id,
                     get_cluster_ids, get_cluster_size, get_thread_binding, get_thread_bindings, get_thread_extent,
                     get_thread_extents)
from .intrinsics import *  # noqa: F401,F403 - warp vote/shuffle, IEEE and fast math
from .intrinsics import __cos, __exp, __exp10, __ffs, __fns, __ldg, __log, __log2, __log10, __sin, __tan  # noqa: F401
from .loops import (Parallel, Pipelined, Serial, Unroll, Vectorized, grid, parallel, serial, unroll,
                    vectorized)
from .transpose import transpose
from .random import rng_init, rng_rand, rng_rand_float
from .reducer import (alloc_reducer, comm_reducer, finalize_reducer, reducer_init, reducer_update,
                      tvm_thread_allreduce)
from .views import reshape, view
from .pointer import make_tensor, make_tensor_from_addr, ptr, ptx_commit_group, ptx_cp_async, ptx_wait_group
from .im2col import c2d_im2col, im2col  # noqa: F401
from .tile_schedule import BaseTileScheduler, PersistentTileScheduler  # noqa: F401
from .sm120 import mma_gemm_blockscaled  # noqa: F401
from .ws_schedule import (WSID, WSInstr, WSOpRef, WSPipeline, WSRole, WSSchedule, WSScope, WSSync,  # noqa: F401
                          WSSyncKind, annotate_ws_schedule, ws_op)
from .source_kernel import CUDASourceCodeKernel  # noqa: F401
from .math import *  # noqa: F401,F403 - the math helpers are part of T
from .math import abs, cast, ceildiv, floordiv, floormod, if_then_else, infinity, max, max_value, min, min_value  # noqa: F401
from .tile import async_copy  # noqa: F401
from .tile import (GemmWarpPolicy, atomic_add, atomic_addx2, atomic_addx4, atomic_load, atomic_max, atomic_min,
                   atomic_or, atomic_store, clear, copy, cummax, cumsum, fill,
                   gemm, gemm_sp, gemm_v2, reduce, reduce_absmax, reduce_abssum, reduce_bitand, reduce_bitor, reduce_bitxor,
                   reduce_max, reduce_min, reduce_sum, wait_wgmma, warpgroup_fence_operand, wgmma_gemm)

_install_parser()

# Dtypes (T.float16, T.float8_e4m3fn, T.float16x2, ...) are tvm.DataTypes that double as constructors
# (T.float32(0)); see dtypes.py. T.bool/T.int/T.float shadow builtins, as in upstream's T.
from .dtypes import *  # noqa: E402,F401,F403
from .dtypes import _all_dtypes, dtype  # noqa: E402,F401

handle = _T.handle
PrimExpr = __import__("tvm").ir.Expr  # every scalar expression (TVM 0.27 has no separate PrimExpr class)
Var = __import__("tvm").tirx.Var  # also a @T.macro parameter annotation, like T.Ref
evaluate = _T.evaluate
address_of = _T.address_of
call_extern = _T.call_extern
launch_thread = _T.launch_thread
int32_t = int32  # noqa: F405


def _in_kernel_body() -> bool:
    """True while a function body is being built (its statements go to TVM's IR builder)."""
    from tvm.script.ir_builder import IRBuilder
    return IRBuilder.is_in_scope()


class _TensorProxy(_BufferProxy):
    """``T.Tensor((M, K), dtype)``/``T.Buffer(...)`` parameter annotations; dtype in any spelling."""

    def __call__(self, shape, dtype="float32", data=None, strides=None, elem_offset=None,
                 byte_offset=None, scope="global", align=0, offset_factor=0, layout="default"):
        if not isinstance(shape, (list, tuple)):
            shape = (shape,)
        if data is not None and _in_kernel_body():
            # inside a kernel: a view over existing storage (``T.Tensor(shape, dtype, A.data)``) is
            # declared there (a DeclBuffer), as T.view does
            from tvm.tirx.script.builder import ir as _builder
            return _builder.decl_buffer(list(shape), normalize_dtype(dtype), data=data, strides=strides,
                                        elem_offset=elem_offset, scope=scope)
        return super().__call__(shape, normalize_dtype(dtype), data, strides, elem_offset,
                                byte_offset, scope, align, offset_factor, layout)

    def __getitem__(self, keys):
        """``T.Tensor[(M, N), dtype]``: upstream's subscript spelling of the same annotation."""
        return self(*keys) if isinstance(keys, tuple) else self(keys)


Tensor = _TensorProxy()
Buffer = Tensor


class _StridedTensorProxy:
    """``T.StridedTensor(shape, strides, dtype)`` (or ``T.StridedTensor[shape, strides, dtype]``):
    a tensor parameter with explicit element strides (a view of a larger tensor)."""

    def __call__(self, shape, strides, dtype="float32", scope="global", data=None):
        if not isinstance(shape, (list, tuple)):
            shape = (shape,)
        if not isinstance(strides, (list, tuple)) or len(strides) != len(shape):
            raise ValueError(f"T.StridedTensor needs one stride per dimension, got shape {shape} and strides {strides}")
        if data is not None:   # inside a kernel: a strided view over another tensor's storage
            from tvm.script.ir_builder import IRBuilder
            from tvm.tirx.script.builder import ir as _builder

            if not IRBuilder.is_in_scope():
                raise RuntimeError("T.StridedTensor(..., data=...) declares a view inside a kernel")
            return _builder.decl_buffer(tuple(shape), normalize_dtype(dtype), data=data, strides=list(strides),
                                        scope=scope)
        return _BufferProxy.__call__(Tensor, tuple(shape), normalize_dtype(dtype), strides=list(strides), scope=scope)

    def __getitem__(self, keys):
        return self(*keys)


StridedTensor = _StridedTensorProxy()


FragmentBuffer = Tensor
SharedBuffer = Tensor


def Layout(shape, forward_fn):  # noqa: N802 - mirrors upstream's T.Layout class
    """A shared-memory layout: ``T.Layout((M, N), lambda i, j: [i, j ^ (i % 8)])``."""
    from tilelang.layout import Layout as _Layout

    return _Layout(shape, forward_fn)


def dynamic(name: str, dtype="int32"):
    """A symbolic dimension, bound from the tensors' shapes at call time. Several names separated
    by commas or spaces (``T.dynamic("batch, seq_len")``) give a tuple of variables, one each."""
    import re

    from tvm import tirx

    names = [n for n in re.split(r"[\s,]+", name.strip()) if n]
    if len(names) > 1:
        return tuple(tirx.Var(n, normalize_dtype(dtype)) for n in names)
    return tirx.Var(name, normalize_dtype(dtype))


symbolic = dynamic



# TVMScript's own names that upstream's T exposes too (it re-exports TVM's IR builder): the
# ``with T.If(c): with T.Then(): ... with T.Else(): ...`` and ``with T.While(c):`` frames, IR node
# constructors (T.And, T.Or, T.Not, T.EQ, T.Max, T.IntImm, T.FloatImm, ...), T.decl_buffer,
# T.where, T.fma, T.broadcast / T.ramp, T.break_loop / T.continue_loop and the TVM builtins.
# TVMScript's parser handles them as in any TVMScript function; a name T defines itself wins.
_TVMSCRIPT_NAMES = (
    "Add", "And", "Assert", "BufferLoad", "Call", "CallEffectKind", "CommReducer", "Div", "EQ", "Else",
    "FloatImm", "FloorDiv", "FloorMod", "GE", "GT", "If", "IntImm", "IterVar", "LE", "LT", "Max", "Min", "Mod",
    "Mul", "NE", "Not", "Or", "Ptr", "Range", "Reduce", "Sub", "TVMBackendAllocWorkspace",
    "TVMBackendFreeWorkspace", "Then", "While", "anylist_getitem", "anylist_resetitem",
    "anylist_setitem_call_cpacked", "anylist_setitem_call_packed", "arg", "axis", "bind",
    "block_name_suffix_context", "boolean", "break_loop", "broadcast", "buffer", "buffer_decl", "buffer_store",
    "buffer_var", "call_cpacked", "call_cpacked_lowered", "call_kernel", "call_llvm_intrin",
    "call_llvm_pure_intrin", "call_packed", "call_packed_lowered", "continue_loop", "decl_buffer",
    "end_profile_intrinsic", "env_thread", "fabs", "fma", "func_attr", "func_name", "func_ret",
    "get_active_lane_mask", "handle_add_byte_offset", "ignore_loop_partition", "index_map", "init", "isnullptr",
    "iter_var", "llvm_lookup_intrinsic_id", "lookup_param", "meta_class", "meta_var", "q_multiply_shift",
    "q_multiply_shift_per_axis", "ramp", "reads", "sblock", "sblock_alloc_buffer", "sblock_attr",
    "start_profile_intrinsic", "target", "thread_return", "tvm_access_ptr", "tvm_bmma_sync", "tvm_call_cpacked",
    "tvm_call_cpacked_lowered", "tvm_call_packed", "tvm_call_packed_lowered", "tvm_fill_fragment",
    "tvm_load_matrix_sync", "tvm_mma_sync", "tvm_stack_alloca", "tvm_stack_make_array", "tvm_stack_make_shape",
    "tvm_storage_sync", "tvm_store_matrix_sync", "tvm_struct_get", "tvm_struct_set", "tvm_thread_invariant",
    "tvm_throw_last_error", "tvm_tuple", "tvm_warp_activemask", "type_annotation", "undef", "var",
    "vectorcombine", "vectorhigh", "vectorlow", "void", "vscale", "where", "writes",
)
globals().update({_n: getattr(_T, _n) for _n in _TVMSCRIPT_NAMES if _n not in globals() and hasattr(_T, _n)})

cdiv = ceildiv
loop_break = break_loop  # upstream's spelling of ``break`` inside a kernel loop  # noqa: F405
allocate = alloc_buffer
LocalBuffer = Tensor
StringImm = __import__("tvm").ir.StringImm


def index_to_coordinates(index, shape):
    """Row-major coordinates of the flat ``index`` in ``shape`` (the inverse of the linear index)."""
    coords = []
    for extent in reversed(list(shape)):
        coords.append(index % extent)
        index = index // extent
    return coords[::-1]


def _upstream_submodule(name: str):
    """Upstream splits ``tilelang.language`` into submodules that users also reach through it
    (``T.builtin.sync_threads()``, ``from tilelang.language.atomic import atomic_add``): a module
    named as upstream's whose attributes are T's own names."""
    import sys
    import types

    module = types.ModuleType(f"{__name__}.{name}", f"upstream's tilelang.language.{name}: T's names")

    def attribute(attr):
        if attr.startswith("__") or attr not in globals():
            raise AttributeError(f"module 'tilelang.language.{name}' has no attribute {attr!r}")
        return globals()[attr]

    module.__getattr__ = attribute
    return sys.modules.setdefault(module.__name__, module)


PrimFunc = __import__("tvm").tirx.PrimFunc   # (as upstream's T)

# Names of upstream's T that this compiler does not define, and what to write instead: a kernel
# using one fails at its line (the parser locates the AttributeError) with this advice rather
# than a bare "no attribute".
_SM100 = ("sm_100 (Blackwell) and later: this compiler targets sm_80 and sm_90a")
_INTRINSICS = "is here in tilelang.cuda.intrinsics only (where upstream's own examples import it from)"
_RAW_MMA = ("write the product as T.gemm (T.wgmma_gemm + T.wait_wgmma to overlap it on sm_90a; "
            "T.gemm_sp for a 2:4 sparse A); raw MMA instructions and descriptors are not exposed")
_RAW_BARRIER = ("use T.alloc_barrier with T.mbarrier_arrive / T.mbarrier_expect_tx / T.mbarrier_wait_parity")
_RAW_TMA = ("use T.copy or T.tma_copy(src, dst, barrier=...): the compiler builds the tensor map")
_UPSTREAM_ONLY = {
    **dict.fromkeys(("TensorCoreIntrinEmitter", "TensorCoreIntrinEmitterWithLadderTransform", "get_ldmatrix_offset",
                     "get_mma_micro_size", "get_swizzle_layout", "make_mma_swizzle_layout", "mma_store_index_map",
                     "compute_gmma_descriptor", "WGMMATensorCoreIntrinEmitter"), _INTRINSICS),
    **dict.fromkeys(("ptx_wgmma_ss", "ptx_wgmma_rs", "ptx_wgmma_sp_ss", "ptx_wgmma_sp_rs", "wgmma_mma",
                     "wgmma_gemm_sp", "alloc_wgmma_desc", "alloc_descriptor", "initialize_wgmma_descriptor",
                     "increase_descriptor_offset", "WGMMADescriptorParams", "ptx_mma", "ptx_mma_sp", "ptx_mma_sm70",
                     "ptx_ldmatrix", "mma_fill", "mma_store", "SparseTensorCoreIntrinEmitter",
                     "WGSparseTensorCoreIntrinEmitter"), _RAW_MMA),
    **dict.fromkeys(("ptx_arrive_barrier", "ptx_arrive_barrier_expect_tx", "ptx_cp_async_barrier",
                     "ptx_fence_barrier_init", "ptx_init_barrier_thread_count", "ptx_wait_barrier", "create_barriers"),
                    _RAW_BARRIER),
    **dict.fromkeys(("create_tma_descriptor", "tma_load", "ptx_cp_async_bulk"), _RAW_TMA),
    "annotate_ws_pipeline_depth": "the pipeline depth here is T.Pipelined's num_stages",
    "ret": "end the kernel's work with an `if` around it (no early return from device code)",
}
_SM100_MARKS = ("tcgen05", "TCGEN05", "umma", "blockscaled", "clc_", "_2sm", "tmem", "SM120", "gather4", "scatter4")


def __getattr__(name):
    """An AttributeError for a name T does not define, with advice where upstream's T has it."""
    hint = _UPSTREAM_ONLY.get(name)
    if hint is None and not name.startswith("__") and any(m in name for m in _SM100_MARKS):
        hint = f"upstream's T.{name} is for {_SM100}"
    elif hint == _INTRINSICS:
        hint = f"upstream's T.{name} {hint}"
    elif hint is not None:
        hint = f"upstream's T.{name} is not implemented by this compiler; {hint}"
    raise AttributeError(f"module 'tilelang.language' has no attribute {name!r}" + (f" ({hint})" if hint else ""))


for _n in ("builtin", "atomic", "customize", "common", "copy_op", "fill_op", "gemm_op", "reduce_op", "scan_op",
           "logical", "loop", "math_intrinsics", "proxy", "symbolics", "warp_specialize", "utils"):
    if _n not in globals():
        globals()[_n] = _upstream_submodule(_n)

# Last in the module, since they shadow builtins: C-style aliases upstream code uses (T.float is float32, T.half float16, ...).
float, half, double = float32, float16, float64  # noqa: A001,F405
int, long, short, uint = int32, int64, int16, uint32  # noqa: A001,F405
