"""Scalar device intrinsics of ``T``: fast math (``T.__exp``), IEEE arithmetic with an explicit
rounding mode (``T.ieee_add``), warp vote / ballot / shuffle / match (``T.any_sync``,
``T.shfl_sync``, and TVM's ``T.tvm_warp_shuffle`` family), thread-position queries (``T.get_lane_idx``) and bit helpers (``T.__ffs``).

Each builds a call of a CUDA intrinsic or of a ``tl::`` function of ``src/tl/warp.h``; the choice
of function by dtype and the checks of arguments happen here, when the kernel is traced.
"""

from __future__ import annotations

from tvm import tirx

from tilelang.tir_utils import const_int

from ._ops import as_expr
from .dtypes import is_narrow_float

_FULL_MASK = 0xFFFFFFFF
_ROUNDING = ("rn", "rz", "ru", "rd")
_FLOAT16 = ("float16", "bfloat16")


def _dtype(x) -> str:
    ty = x.ty
    return str(getattr(ty, "dtype", ty))


_FLOATS = ("float16", "bfloat16", "float32", "float64")


def _float_arg(x, name):
    x = as_expr(x)
    if _dtype(x) not in _FLOATS:
        raise TypeError(f"T.{name} only supports floating-point inputs, but got {_dtype(x)}")
    return x


def _extern(dtype, fn, *args):
    return tirx.call_extern(dtype, fn, *[as_expr(a) for a in args])


# ----- fast math: the hardware approximations (CUDA __expf & co.) ------------------------------
def _fast(cuda_name, precise):
    def op(x):
        x = _float_arg(x, cuda_name.rstrip("f"))
        dtype = _dtype(x)
        if dtype == "float32":
            return _extern("float32", cuda_name, x)
        if dtype == "float64":  # no approximation in double: the precise function
            return precise(x)
        if cuda_name == "__tanf":   # 16-bit tan: TVM's htan (float tanf, rounded once), as upstream
            return tirx.tan(x)
        # 16-bit: tl::fast_<name> (src/tl/math.h) widens, approximates in float, rounds once.
        return _extern(dtype, "tl::fast_" + cuda_name[2:].rstrip("f"), x)
    op.__name__ = cuda_name.rstrip("f")
    op.__doc__ = f"``{cuda_name}``: the fast hardware approximation (16-bit inputs computed in float32)."
    return op


__exp = _fast("__expf", tirx.exp)
__exp10 = _fast("__exp10f", tirx.exp10)
__log = _fast("__logf", tirx.log)
__log2 = _fast("__log2f", tirx.log2)
__log10 = _fast("__log10f", tirx.log10)
__sin = _fast("__sinf", tirx.sin)
__cos = _fast("__cosf", tirx.cos)
__tan = _fast("__tanf", tirx.tan)


def fast_rcp(x):
    """Approximate reciprocal: ``tl::fast_rcp`` (``rcp.approx.ftz.f32``) in float32; other
    floats divide (``T.ieee_frcp`` is the correctly rounded one)."""
    x = _float_arg(x, "fast_rcp")
    dtype = _dtype(x)
    if dtype == "float32":
        return _extern("float32", "tl::fast_rcp", x)
    return tirx.FloatImm(dtype, 1.0) / x


# ----- IEEE arithmetic with a rounding mode ----------------------------------------------------
def _check_rounding(mode):
    if not isinstance(mode, str) or mode not in _ROUNDING:
        raise ValueError(f"Invalid rounding mode '{mode}'. Must be one of: {set(_ROUNDING)}")


# op -> (float32 function stem, float64 function stem, 16-bit function)
_IEEE = {
    "add": ("__fadd", "__dadd", "__hadd"), "sub": ("__fsub", "__dsub", "__hsub"),
    "mul": ("__fmul", "__dmul", "__hmul"), "fmaf": ("__fmaf", "__fma", "__hfma"),
    "frcp": ("__frcp", "__drcp", "hrcp"), "fsqrt": ("__fsqrt", "__dsqrt", "hsqrt"),
    "fdiv": ("__fdiv", "__ddiv", "__hdiv"),
}


def _ieee(op, args, mode):
    _check_rounding(mode)
    args = [as_expr(a) for a in args]
    floats = [a for a in args if not isinstance(a, tirx.FloatImm)] or args
    dtype = _dtype(floats[0])
    args = [tirx.Cast(dtype, a) if _dtype(a) != dtype else a for a in args]
    f32, f64, f16 = _IEEE[op]
    if dtype == "float32":
        return _extern(dtype, f"{f32}_{mode}", *args)
    if dtype == "float64":
        return _extern(dtype, f"{f64}_{mode}", *args)
    if dtype in _FLOAT16:
        if mode != "rn":
            raise ValueError(f"T.ieee_{op}: Only rounding mode 'rn' is available for half precision ({dtype})")
        return _extern(dtype, f16, *args)
    raise TypeError(f"T.ieee_{op} needs float16/bfloat16/float32/float64 operands, got {dtype}")


def ieee_add(x, y, rounding_mode="rn"):
    """``x + y`` rounded as ``rounding_mode`` says (rn, rz, ru, rd)."""
    return _ieee("add", [x, y], rounding_mode)


def ieee_sub(x, y, rounding_mode="rn"):
    return _ieee("sub", [x, y], rounding_mode)


def ieee_mul(x, y, rounding_mode="rn"):
    return _ieee("mul", [x, y], rounding_mode)


def ieee_fmaf(x, y, z, rounding_mode="rn"):
    """``x * y + z`` with one rounding."""
    return _ieee("fmaf", [x, y, z], rounding_mode)


def fma(x, y, z):
    """``x * y + z`` as one fused multiply-add, rounded to nearest (upstream's ``T.fma``)."""
    return _ieee("fmaf", [x, y, z], "rn")


def fmul(x, y):
    """``x * y`` rounded to nearest, never contracted into an FMA with a later add (``T.fmul``)."""
    return _ieee("mul", [x, y], "rn")


def ieee_frcp(x, rounding_mode="rn"):
    return _ieee("frcp", [x], rounding_mode)


def ieee_fsqrt(x, rounding_mode="rn"):
    return _ieee("fsqrt", [x], rounding_mode)


def ieee_fdiv(x, y, rounding_mode="rn"):
    return _ieee("fdiv", [x, y], rounding_mode)


def ieee_frsqrt(x):
    """``1 / sqrt(x)`` rounded to nearest (float32 and 16-bit floats; CUDA has none for float64)."""
    x = _float_arg(x, "ieee_frsqrt")
    dtype = _dtype(x)
    if dtype == "float32":
        return _extern(dtype, "__frsqrt_rn", x)
    if dtype in _FLOAT16:
        return _extern(dtype, "hrsqrt", x)
    raise TypeError(f"T.ieee_frsqrt: frsqrt is not supported for {dtype}")


# ----- warp vote, ballot, match, shuffle ---------------------------------------------------------
def _mask(mask):
    return tirx.IntImm("uint32", int(mask)) if isinstance(mask, int) else mask


def _predicate(pred, name):
    pred = as_expr(pred)
    if not _dtype(pred).startswith(("int", "uint", "bool")):
        raise TypeError(f"T.{name} requires an integer or boolean predicate, but got {_dtype(pred)}.")
    return tirx.Cast("int32", pred) if _dtype(pred) != "int32" else pred


def any_sync(predicate, mask=_FULL_MASK):
    """Non-zero if any lane in ``mask`` has a non-zero predicate (``__any_sync``)."""
    return _extern("int32", "tl::__any_sync", _mask(mask), _predicate(predicate, "any_sync"))


def all_sync(predicate, mask=_FULL_MASK):
    """Non-zero if every lane in ``mask`` has a non-zero predicate (``__all_sync``)."""
    return _extern("int32", "tl::__all_sync", _mask(mask), _predicate(predicate, "all_sync"))


def ballot_sync(predicate, mask=_FULL_MASK):
    """uint64 bitmask of the lanes in ``mask`` whose predicate is non-zero."""
    return _extern("uint64", "tl::__ballot_sync", _mask(mask), _predicate(predicate, "ballot_sync"))


def ballot(predicate):
    """``ballot_sync`` over the full warp."""
    return _extern("uint64", "tl::__ballot_sync", _mask(_FULL_MASK), _predicate(predicate, "ballot"))


def activemask():
    """uint64 bitmask of the lanes executing this instruction."""
    return _extern("uint64", "tl::__activemask")


def _match_value(value):
    """A value ``__match_*_sync`` compares: 32/64-bit integers and floats as they are, narrower
    integers widened to int32 (16-bit floats are refused: CUDA has no match on them)."""
    value = as_expr(value)
    dtype = _dtype(value)
    if dtype in ("int32", "uint32", "int64", "uint64", "float32", "float64"):
        return value
    if dtype.startswith(("int", "uint", "bool")):
        return tirx.Cast("int32", value)
    raise TypeError(f"T.match_*_sync compares 32/64-bit integers or floats, got {dtype}")


def match_any_sync(value, mask=_FULL_MASK):
    """uint32 bitmask of the lanes in ``mask`` holding the same ``value`` as this lane."""
    return _extern("uint32", "tl::__match_any_sync", _mask(mask), _match_value(value))


def match_all_sync(value, mask=_FULL_MASK):
    """``mask`` if every lane in ``mask`` holds the same ``value``, else 0."""
    return _extern("uint32", "tl::__match_all_sync", _mask(mask), _match_value(value))


def _shuffle(fn, value, lane, width, mask):
    value = as_expr(value)
    return _extern(_dtype(value), fn, _mask(mask), value, lane, width)


def shfl_sync(value, srcLane, width=32, mask=_FULL_MASK):  # noqa: N803 - upstream's keyword
    """``value`` of lane ``srcLane`` of this lane's ``width``-lane group."""
    return _shuffle("tl::__shfl_sync", value, srcLane, width, mask)


def shfl_xor(value, delta, width=32, mask=_FULL_MASK):
    return _shuffle("tl::__shfl_xor_sync", value, delta, width, mask)


def shfl_down(value, delta, width=32, mask=_FULL_MASK):
    return _shuffle("tl::__shfl_down_sync", value, delta, width, mask)


def shfl_up(value, delta, width=32, mask=_FULL_MASK):
    return _shuffle("tl::__shfl_up_sync", value, delta, width, mask)


def tvm_warp_shuffle(mask, value, lane, width, warp_size):
    """TVM's spelling of ``__shfl_sync``: ``value`` of lane ``lane`` of this lane's ``width``-lane
    group (``warp_size``, the hardware warp's, is implied by the target and not used)."""
    return _shuffle("tl::__shfl_sync", value, lane, width, mask)


def tvm_warp_shuffle_up(mask, value, delta, width, warp_size):
    """TVM's spelling of ``__shfl_up_sync`` (``warp_size`` unused, as for ``tvm_warp_shuffle``)."""
    return _shuffle("tl::__shfl_up_sync", value, delta, width, mask)


def tvm_warp_shuffle_down(mask, value, delta, width, warp_size):
    """TVM's spelling of ``__shfl_down_sync`` (``warp_size`` unused, as for ``tvm_warp_shuffle``)."""
    return _shuffle("tl::__shfl_down_sync", value, delta, width, mask)


def tvm_warp_shuffle_xor(mask, value, delta, width, warp_size):
    """TVM's spelling of ``__shfl_xor_sync`` (``warp_size`` unused, as for ``tvm_warp_shuffle``)."""
    return _shuffle("tl::__shfl_xor_sync", value, delta, width, mask)


def sync_warp(mask=None):
    """``__syncwarp(mask)``: the lanes of ``mask`` (default: all) meet."""
    return _extern("void", "__syncwarp", _mask(_FULL_MASK if mask is None else mask))


def _block_vote(fn, predicate, name):
    return _extern("int32", fn, _predicate(predicate, name))


def syncthreads_count(predicate):
    """Block barrier returning how many threads have a non-zero predicate."""
    return _block_vote("__syncthreads_count", predicate, "syncthreads_count")


def syncthreads_and(predicate):
    """Block barrier returning non-zero if every thread's predicate is non-zero."""
    return _block_vote("__syncthreads_and", predicate, "syncthreads_and")


def syncthreads_or(predicate):
    """Block barrier returning non-zero if any thread's predicate is non-zero."""
    return _block_vote("__syncthreads_or", predicate, "syncthreads_or")


# ----- warp reductions of one register: every lane gets the result --------------------------
def _warp_reduce(op, value, integer_only=False):
    value = as_expr(value)
    if integer_only and not _dtype(value).startswith(("int", "uint")):
        raise TypeError(f"T.warp_reduce_{op.lower()[:-2]} needs an integer value, got {_dtype(value)}")
    dtype = _dtype(value)
    # fp8 values have no arithmetic and bool is no shuffle type: reduce in float32 / int32, as
    # C++ would promote them, and convert the result back
    wide = "float32" if is_narrow_float(dtype) else "int32" if dtype == "bool" else None
    if wide is None:
        return _extern(dtype, f"tl::warp_allreduce<tl::{op}, 1, 32>", value)
    return tirx.Cast(dtype, _extern(wide, f"tl::warp_allreduce<tl::{op}, 1, 32>", tirx.Cast(wide, value)))


def warp_reduce_sum(value):
    """Sum of ``value`` over the 32 lanes of the warp."""
    return _warp_reduce("SumOp", value)


def warp_reduce_max(value):
    return _warp_reduce("MaxOp", value)


def warp_reduce_min(value):
    return _warp_reduce("MinOp", value)


def warp_reduce_bitand(value):
    return _warp_reduce("BitAndOp", value, integer_only=True)


def warp_reduce_bitor(value):
    return _warp_reduce("BitOrOp", value, integer_only=True)


def warp_reduce_bitxor(value):
    return _warp_reduce("BitXorOp", value, integer_only=True)


# ----- thread positions ---------------------------------------------------------------------------
def _position(fn, *args):
    return _extern("int32", fn, *[a for a in args if a is not None])


def get_lane_idx(warp_size=None):
    """Lane of this thread within its warp (threads in the block's linear order)."""
    return _position("tl::get_lane_idx", warp_size)


def get_warp_idx(warp_size=None):
    """Warp of this thread within the block."""
    return _position("tl::get_warp_idx", warp_size)


def get_warp_idx_sync(warp_size=None):
    """``get_warp_idx``, made warp-uniform (the warp must be converged)."""
    return _position("tl::get_warp_idx_sync", warp_size)


def get_warp_group_idx(warp_size=None, warps_per_group=None):
    """Warp group (``warps_per_group`` warps, default 4) of this thread."""
    if warps_per_group is not None and warp_size is None:
        raise ValueError("get_warp_group_idx expects `warp_size` when specifying `warps_per_group`.")
    return _position("tl::get_warp_group_idx", warp_size, warps_per_group)


def shuffle_elect(thread_extent):
    """True on exactly one thread of each group of ``thread_extent`` threads (0: of the block)."""
    return _extern("bool", "tl::shuffle_elect", thread_extent)


# ----- logical reductions of a buffer range --------------------------------------------------
def _contiguous_range(obj, name):
    """(address of the first element, element count) of a buffer, slice or element; the range must
    be contiguous in memory (a row-major run) and readable by every thread (not a fragment)."""
    from tvm import ir
    from tvm.tirx import is_buffer_var

    obj = getattr(obj, "scalar", None) or obj
    if is_buffer_var(obj):
        buf, starts, extents = obj, [0] * len(obj.shape), list(obj.shape)
    elif isinstance(obj, ir.TensorRegion):
        buf, starts, extents = obj.source, [r.min for r in obj.region], [r.extent for r in obj.region]
    elif isinstance(obj, ir.TensorLoad):
        buf, starts, extents = obj.source, list(obj.indices), [1] * len(obj.indices)
    else:
        raise TypeError(f"T.{name} expects a buffer or a buffer slice, got {type(obj).__name__}")
    if str(buf.scope()) == "local.fragment":
        raise TypeError(f"T.{name} reads a range every thread holds; '{buf.name}' is a fragment (each thread "
                        "holds part of it): copy it to shared or local memory first")
    count, full = tirx.IntImm("int32", 1), True
    for k in reversed(range(len(extents))):
        if not full and not _is_const(extents[k], 1):
            raise ValueError(f"T.{name}: the range of '{buf.name}' must be contiguous (only the last sliced "
                             "dimensions may span more than one element)")
        count = count * extents[k]
        full = full and _is_const(tirx.IntImm("int32", 0) + extents[k] - buf.shape[k], 0)
    return tirx.address_of(tirx.BufferLoad(buf, [as_expr(s) for s in starts])), count


def _is_const(expr, value) -> bool:
    from tilelang.tir_utils import const_int

    return const_int(expr) == value


def any_of(buffer):
    """True if any element of ``buffer`` (a buffer or a contiguous slice) is non-zero."""
    return _extern("bool", "tl::any_of", *_contiguous_range(buffer, "any_of"))


def all_of(buffer):
    """True if every element of ``buffer`` (a buffer or a contiguous slice) is non-zero."""
    return _extern("bool", "tl::all_of", *_contiguous_range(buffer, "all_of"))


# ----- vectors, checks, dot products ----------------------------------------------------------
def extract_lane(vector, lane):
    """Lane ``lane`` (a constant) of a vector expression (``float16x2`` ...), as a scalar."""
    from tvm import ir

    if not isinstance(vector, ir.Expr):
        raise TypeError(f"T.extract_lane expects a PrimExpr vector, got {type(vector).__name__}")
    lanes = int(vector.ty.dtype.lanes)
    if lanes <= 1:
        raise ValueError(f"T.extract_lane expects a vector expression, got {_dtype(vector)}")
    value = getattr(lane, "value", lane)
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"T.extract_lane needs a compile-time integer lane, got {lane!r}")
    if not 0 <= value < lanes:
        raise IndexError(f"T.extract_lane: lane {value} is out of bounds for {_dtype(vector)}")
    return tirx.Shuffle([vector], [tirx.IntImm("int32", value)])


def device_assert(condition, msg: str = ""):
    """Trap the kernel (after printing ``msg``, the block and the thread) where ``condition`` is false."""
    from tvm import ir

    return _extern("int32", "tl::device_assert", tirx.Cast("bool", as_expr(condition)), ir.StringImm(str(msg)))


def assume(cond):
    """Promise the CUDA compiler that ``cond`` holds here (``__builtin_assume``); unchecked."""
    return _extern("int32", "tl::assume", tirx.Cast("bool", as_expr(cond)))


def dp4a(A, B, C):
    """``C[0] += dot(A[0:4], B[0:4])`` over signed bytes into an int32 accumulator (``__dp4a``)."""
    (a, _), (b, _), (c, _) = (_contiguous_range(x, "dp4a") for x in (A, B, C))
    for name, ref, want in (("A", a, "int8"), ("B", b, "int8"), ("C", c, "int32")):
        have = str(ref.args[0].source.dtype)
        if have != want:
            raise ValueError(f"T.dp4a requires {want} for {name}, got {have}")
    return _extern("int32", "tl::dp4a", a, b, c)


# ----- packed two-lane arithmetic -----------------------------------------------------------------
# vector dtype -> (integer of the same width that carries it through the call, CUDA pair type)
_PACKED = {"float32x2": ("uint64", "float2"), "float16x2": ("uint32", "__half2"),
           "bfloat16x2": ("uint32", "__nv_bfloat162")}


def _packed(op, *values):
    values = [as_expr(v) for v in values]
    dtypes = [_dtype(v) for v in values]
    for dtype in dtypes:
        if dtype not in _PACKED:
            raise ValueError(f"T.{op} needs float32x2, float16x2 or bfloat16x2 operands, got {dtype}")
    if len(set(dtypes)) > 1:
        raise ValueError(f"T.{op} needs all packed operands of the same dtype, got {dtypes}")
    carrier, pair = _PACKED[dtypes[0]]
    call = _extern(carrier, f"tl::{op}<{pair}>", *[tirx.reinterpret(carrier, v) for v in values])
    return tirx.reinterpret(dtypes[0], call)


def add2(a, b):
    """Lane-wise ``a + b`` of two packed pairs (``A[T.Ramp(i, 1, 2)]``): float32x2, float16x2, bfloat16x2."""
    return _packed("add2", a, b)


def sub2(a, b):
    return _packed("sub2", a, b)


def mul2(a, b):
    return _packed("mul2", a, b)


def fma2(a, b, c):
    """Lane-wise ``a * b + c`` with one rounding."""
    return _packed("fma2", a, b, c)


def max2(a, b):
    return _packed("max2", a, b)


def min2(a, b):
    return _packed("min2", a, b)


def abs2(a):
    return _packed("abs2", a)


# ----- explicit-width loads and stores (src/tl/ldst.h) ----------------------------------------------
# access width in bits -> dtype of the loaded value (TVM prints uint32x2 as uint2, ...)
_LD_TYPES = {32: "uint32", 64: "uint32x2", 128: "uint32x4", 256: "uint32x8"}


def _access_address(ref, name, bits, space):
    """Address of the first element of ``ref`` (an element, a contiguous slice or a whole buffer)
    for a ``bits``-wide access in memory ``space`` ("global" or "shared")."""
    address, count = _contiguous_range(ref, name)
    buf = address.args[0].source
    scope = str(buf.scope())
    if space == "global" and scope != "global":
        raise TypeError(f"T.{name} accesses global memory; '{buf.name}' is in {scope} memory")
    if space == "shared" and not scope.startswith("shared"):
        raise TypeError(f"T.{name} accesses shared memory; '{buf.name}' is in {scope} memory")
    from tilelang.tir_utils import const_int

    n = const_int(count)
    elem_bits = buf.dtype.bits * buf.dtype.lanes
    if n is not None and n > 1 and n * elem_bits != bits:
        raise ValueError(f"T.{name} moves {bits} bits, but the range of '{buf.name}' holds {n * elem_bits}")
    return address


def _pred(pred):
    pred = as_expr(pred)
    return pred if _dtype(pred) == "bool" else tirx.Cast("bool", pred)


def _ld(bits, space, src, pred=None):
    name = ("ldg" if space == "global" else "lds") + str(bits)
    address = _access_address(src, name, bits, space)
    fn = f"tl::load_{space}_{bits}"
    if pred is None:
        return _extern(_LD_TYPES[bits], fn, address)
    return _extern(_LD_TYPES[bits], fn + "_conditional", address, _pred(pred))


def _st(bits, space, dst, value, pred=None):
    name = ("stg" if space == "global" else "sts") + str(bits)
    address = _access_address(dst, name, bits, space)
    value = as_expr(value)
    vbits = value.ty.dtype.bits * value.ty.dtype.lanes
    if vbits != bits:
        raise ValueError(f"T.{name} stores a {bits}-bit value, got {_dtype(value)} ({vbits} bits)")
    fn = f"tl::store_{space}_{bits}"
    if pred is None:
        return _extern("void", fn, address, value)
    return _extern("void", fn + "_conditional", address, value, _pred(pred))


def ldg32(src, pred=None):
    """32 bits from global memory at ``src`` (an element or a slice) as a uint32, in one ``ld.global``;
    with ``pred``, the load happens only where it is true (else 0)."""
    return _ld(32, "global", src, pred)


def ldg64(src, pred=None):
    """64 bits from global memory as a uint32x2."""
    return _ld(64, "global", src, pred)


def ldg128(src, pred=None):
    """128 bits from global memory as a uint32x4."""
    return _ld(128, "global", src, pred)


def ldg256(src, pred=None):
    """256 bits from global memory as a uint32x8."""
    return _ld(256, "global", src, pred)


def stg32(dst, value, pred=None):
    """Store a 32-bit ``value`` to global memory at ``dst`` in one ``st.global`` (only where ``pred``)."""
    return _st(32, "global", dst, value, pred)


def stg64(dst, value, pred=None):
    return _st(64, "global", dst, value, pred)


def stg128(dst, value, pred=None):
    return _st(128, "global", dst, value, pred)


def stg256(dst, value, pred=None):
    return _st(256, "global", dst, value, pred)


def lds32(src):
    """32 bits from shared memory at ``src`` as a uint32 (one ``ld.shared``)."""
    return _ld(32, "shared", src)


def lds64(src):
    return _ld(64, "shared", src)


def lds128(src):
    return _ld(128, "shared", src)


def sts32(dst, value):
    """Store a 32-bit ``value`` to shared memory at ``dst`` (one ``st.shared``)."""
    return _st(32, "shared", dst, value)


def sts64(dst, value):
    return _st(64, "shared", dst, value)


def sts128(dst, value):
    return _st(128, "shared", dst, value)


def __ldg(ref, index=None):
    """``ref`` (an element ``x[i]``, or a buffer and a flat ``index``) read through the read-only
    data cache: ``__ldg(&x[i])``."""
    from tvm import ir
    from tvm.tirx import is_buffer_var

    ref = getattr(ref, "scalar", None) or ref
    if is_buffer_var(ref):
        if index is None:
            raise ValueError("T.__ldg(buffer, index) needs an index when given a buffer")
        if isinstance(index, (list, tuple)):
            if len(index) != 1:
                raise ValueError("T.__ldg takes one flat index with a buffer")
            index = index[0]
        load = tirx.BufferLoad(ref, [as_expr(index)])
    elif isinstance(ref, ir.TensorLoad):
        load = tirx.BufferLoad(ref.source, list(ref.indices))
    else:
        raise TypeError(f"T.__ldg expects an element x[i] or a buffer, got {type(ref).__name__}")
    buf = load.source
    if str(buf.scope()) != "global":
        raise TypeError(f"T.__ldg reads global memory; '{buf.name}' is in {buf.scope()} memory")
    return _extern(str(buf.dtype), "__ldg", tirx.address_of(load))


def access_ptr(base, access_type="r", *extents, offset=0, extent=None, ignore_last_ndim=0):
    """Pointer to the first element of ``base`` (a buffer, a slice or an element ``A[i, j]``),
    ``offset`` elements further, for passing to ``T.call_extern`` or ``T.ptx_cp_async``: the call
    ``tl.access_ptr(A[i, j], extent, rw_mask)``, an address once lowered
    (``tilelang.transform.pointer_ops``). ``access_type`` is "r" (mask 1), "w" (2), "rw" (3) or
    a mask; ``extent`` (elements) is given, or the product of ``extents``, else the region's
    size for a slice, the buffer's for a buffer, 1 for an element.
    ``ignore_last_ndim=k`` points at the start of the trailing ``k`` dimensions."""
    from tvm import ir
    from tvm.tirx import is_buffer_var

    from ._ops import get_op

    if isinstance(access_type, str) and access_type not in ("r", "w", "rw"):
        raise ValueError(f"T.access_ptr: access_type must be 'r', 'w' or 'rw', got {access_type!r}")
    if not isinstance(access_type, (str, int)):
        raise TypeError(f"T.access_ptr: access_type must be 'r', 'w', 'rw' or an int mask, got {access_type!r}")
    mask = {"r": 1, "w": 2, "rw": 3}[access_type] if isinstance(access_type, str) else int(access_type)
    if len(extents) == 1 and isinstance(extents[0], (list, tuple)):
        extents = tuple(extents[0])
    base = getattr(base, "scalar", None) or base
    if is_buffer_var(base):
        buf, starts = base, [tirx.IntImm("int32", 0)] * len(base.shape)
        size = list(base.shape)
    elif isinstance(base, ir.TensorRegion):
        buf, starts = base.source, [r.min for r in base.region]
        size = [r.extent for r in base.region]
    elif isinstance(base, ir.TensorLoad):
        buf, starts = base.source, list(base.indices)
        size = []
    else:
        raise TypeError(f"T.access_ptr expects a buffer, a buffer slice or an element, got {type(base).__name__}")
    if str(buf.scope()) == "local.fragment":
        raise TypeError(f"T.access_ptr: '{buf.name}' is a fragment (spread over threads); it has no address")
    starts = [as_expr(s) for s in starts]
    if ignore_last_ndim:
        k = int(ignore_last_ndim)
        starts = starts[:-k] + [tirx.IntImm("int32", 0)] * k
    if not (isinstance(offset, int) and offset == 0):
        starts[-1] = starts[-1] + as_expr(offset)
    if extent is None:
        extent = 1
        for e in (extents if extents else size):
            extent = extent * e if not (isinstance(extent, int) and extent == 1) else e
    extent = tirx.IntImm("int32", extent) if isinstance(extent, int) else as_expr(extent)
    load = tirx.BufferLoad(buf, starts)
    return ir.Call(get_op("access_ptr"), [load, extent, tirx.IntImm("int32", mask)], ret_ty="handle")


# ----- foreign CUDA source ---------------------------------------------------------------------------
IMPORT_SOURCE = "__tl_import_source"   # the marker call; tilelang.codegen.cuda moves its text up front


def import_source(source=None):
    """Make the CUDA ``source`` text (device functions for ``T.call_extern``) part of the kernel's
    translation unit: it is placed after ``#include "tl.h"``, once however often it is imported."""
    if source is None:
        return None
    if not isinstance(source, str):
        raise TypeError(f"T.import_source expects CUDA source text (str), got {type(source).__name__}")
    from tvm import ir

    from tvm.tirx.script.builder import ir as builder

    builder.evaluate(_extern("void", IMPORT_SOURCE, ir.StringImm(source)))
    return None


# ----- bits ------------------------------------------------------------------------------------------
def __ffs(value):
    """One-based position of the lowest set bit (0 if none)."""
    value = as_expr(value)
    return _extern("int32", "tl::__ffsll" if _dtype(value) in ("int64", "uint64") else "tl::__ffs", value)


def __fns(mask, base, offset):
    """Position of the ``offset``-th set bit of ``mask`` at or after bit ``base`` (CUDA ``__fns``)."""
    return _extern("uint32", "tl::__fns", tirx.Cast("uint32", as_expr(mask)), tirx.Cast("uint32", as_expr(base)),
                   offset)


# ----- raw warpgroup MMA sequencing (upstream's names; T.wgmma_gemm / T.wait_wgmma do this themselves) ----
def warpgroup_arrive():
    """``wgmma.fence``: register and shared-memory writes before it are seen by the wgmma issued
    after it (every thread of the warpgroup)."""
    return _extern("int32", "tl::wgmma_fence")


def warpgroup_commit_batch():
    """``wgmma.commit_group``: the wgmma issued since the last commit form one group."""
    return _extern("int32", "tl::wgmma_commit")


def warpgroup_wait(num_mma):
    """``wgmma.wait_group``: wait until at most ``num_mma`` (a constant 0..7) committed groups of
    this warpgroup are in flight. Unlike ``T.wait_wgmma`` it pins no accumulator registers: pair
    it with ``T.warpgroup_fence_operand`` as upstream's form does."""
    n = const_int(as_expr(num_mma))
    if n is None or not 0 <= n <= 7:
        raise ValueError(f"T.warpgroup_wait takes a constant 0..7 (wgmma groups left in flight), got {num_mma!r}")
    return _extern("int32", f"tl::wait_wgmma<{n}>")


__all__ = ["access_ptr", "import_source", "ldg32", "ldg64", "ldg128", "ldg256", "stg32", "stg64", "stg128", "stg256", "lds32",
           "lds64", "lds128", "sts32", "sts64", "sts128", "abs2", "activemask", "add2", "assume", "fma2", "max2", "min2", "mul2", "sub2", "device_assert", "dp4a", "extract_lane", "all_of", "all_sync", "any_of", "any_sync", "ballot", "ballot_sync", "fast_rcp", "get_lane_idx",
           "get_warp_group_idx", "get_warp_idx", "get_warp_idx_sync", "ieee_add", "ieee_fdiv", "ieee_fmaf",
           "fma", "fmul",
           "ieee_frcp", "ieee_frsqrt", "ieee_fsqrt", "ieee_mul", "ieee_sub", "match_all_sync", "match_any_sync",
           "shfl_down", "shfl_sync", "shfl_up", "shfl_xor", "shuffle_elect", "sync_warp", "tvm_warp_shuffle",
           "tvm_warp_shuffle_down", "tvm_warp_shuffle_up", "tvm_warp_shuffle_xor", "syncthreads_and",
           "syncthreads_count", "syncthreads_or", "warp_reduce_bitand", "warp_reduce_bitor", "warp_reduce_bitxor",
           "warp_reduce_max", "warp_reduce_min", "warp_reduce_sum", "warpgroup_arrive", "warpgroup_commit_batch",
           "warpgroup_wait"]
