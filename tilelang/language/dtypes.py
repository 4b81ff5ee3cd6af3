"""Data types: the ``T.float16`` objects and every other dtype spelling, normalised for the compiler.

Kernel code passes dtypes as strings (``"float16"``), as ``T.float16`` (a ``dtype``: a
``tvm.DataType`` that is also a constructor, ``T.float16(0)``), as torch or numpy dtypes, as Python
``float``/``int``/``bool`` or as TVMScript dtype objects. ``dtype(x)`` accepts all of them;
``normalize_dtype(x)`` returns the plain storage string the compiler works with (``tfloat32`` is
stored as ``float32``; the tensor cores round it). ``dtype.as_torch()`` gives the torch storage type
(``int4`` and ``float4_e2m1fn`` are stored packed in ``int8`` / ``float4_e2m1fn_x2``).
"""

from __future__ import annotations

import builtins
from typing import Any

import numpy as np
import torch
import tvm_ffi
from tvm import ir, tirx

# Custom (non-DLPack) type codes. ``float4_e2m1_unpacked`` is one fp4 value per byte (the sm_100
# tcgen05 shared-memory form); ``tfloat32`` is a float32 word whose mantissa the tensor cores round.
_CUSTOM_TYPES = {"tfloat32": 129, "float4_e2m1_unpacked": 131}
_CUSTOM_NAMES = {code: name for name, code in _CUSTOM_TYPES.items()}


def _register_custom_types() -> None:
    """Teach tvm-ffi's dtype parser the ``custom[...]`` names (it asks two global functions)."""
    names = set(tvm_ffi.registry.list_global_func_names())
    if "dtype.get_custom_type_code" not in names:
        tvm_ffi.register_global_func("dtype.get_custom_type_code", _custom_code)
    if "dtype.get_custom_type_name" not in names:
        tvm_ffi.register_global_func("dtype.get_custom_type_name", _custom_name)


def _custom_code(name: str) -> int:
    if name not in _CUSTOM_TYPES:
        raise ValueError(f"unknown custom dtype {name!r}; known: {sorted(_CUSTOM_TYPES)}")
    return _CUSTOM_TYPES[name]


def _custom_name(code: int) -> str:
    if code not in _CUSTOM_NAMES:
        raise ValueError(f"unknown custom dtype code {code}")
    return _CUSTOM_NAMES[code]


_register_custom_types()

_ALIASES = {
    "half": "float16", "fp16": "float16", "float": "float32", "fp32": "float32", "double": "float64",
    "bf16": "bfloat16", "int": "int32", "long": "int64", "short": "int16", "uint": "uint32", "ulong": "uint64",
    "e4m3_float8": "float8_e4m3fn", "e5m2_float8": "float8_e5m2", "e4m3fnuz_float8": "float8_e4m3fnuz",
    "tfloat32": "custom[tfloat32]32", "tf32": "custom[tfloat32]32", "custom[tfloat32]": "custom[tfloat32]32",
    "float4_e2m1_unpacked": "custom[float4_e2m1_unpacked]8",
}
# What the compiler stores for a dtype whose storage differs from its name.
_STORAGE = {"float8_e4m3": "float8_e4m3fn"}

_PYTHON_DTYPE_TO_STR = {builtins.bool: "bool", builtins.int: "int32", builtins.float: "float32"}

_NUMPY_DTYPE_TO_STR = {
    np.bool_: "bool", np.int8: "int8", np.int16: "int16", np.int32: "int32", np.int64: "int64",
    np.uint8: "uint8", np.uint16: "uint16", np.uint32: "uint32", np.uint64: "uint64",
    np.float16: "float16", np.float32: "float32", np.float64: "float64",
}
_NUMPY_DTYPE_TO_STR.update({np.dtype(k): v for k, v in list(_NUMPY_DTYPE_TO_STR.items())})

_TORCH_DTYPE_TO_STR = {
    torch.bool: "bool", torch.int8: "int8", torch.int16: "int16", torch.int32: "int32", torch.int64: "int64",
    torch.uint8: "uint8", torch.float16: "float16", torch.float32: "float32", torch.float64: "float64",
    torch.bfloat16: "bfloat16",
}
for _name, _attr in [("uint16", "uint16"), ("uint32", "uint32"), ("uint64", "uint64"),
                     ("float8_e4m3fn", "float8_e4m3fn"), ("float8_e4m3fnuz", "float8_e4m3fnuz"),
                     ("float8_e5m2", "float8_e5m2"), ("float8_e5m2fnuz", "float8_e5m2fnuz"),
                     ("float8_e8m0fnu", "float8_e8m0fnu"), ("float4_e2m1fnx2", "float4_e2m1fn_x2")]:
    if getattr(torch, _attr, None) is not None:
        _TORCH_DTYPE_TO_STR[getattr(torch, _attr)] = _name
_STR_TO_TORCH_DTYPE = {v: k for k, v in _TORCH_DTYPE_TO_STR.items()}

_DTYPE_TO_STR = {**_PYTHON_DTYPE_TO_STR, **_NUMPY_DTYPE_TO_STR, **_TORCH_DTYPE_TO_STR}

# Storage dtypes torch lacks: (torch attribute to prefer, fallback).
_TORCH_STORAGE = {"int4": (None, torch.int8), "float4_e2m1fn": ("float4_e2m1fn_x2", torch.int8),
                  "float8_e4m3": ("float8_e4m3fn", None), "custom[tfloat32]32": (None, torch.float32)}


def _canonical(value: Any) -> str:
    """The dtype string for any accepted spelling, or TypeError."""
    if isinstance(value, tvm_ffi.dtype) and builtins.int(value.type_code) in _CUSTOM_NAMES:
        # TVM prints custom dtypes without their width; keep it.
        lanes = f"x{value.lanes}" if value.lanes > 1 else ""
        return f"custom[{_CUSTOM_NAMES[builtins.int(value.type_code)]}]{value.bits}{lanes}"
    if isinstance(value, str):
        return _ALIASES.get(value, value)
    inner = getattr(value, "_dtype_str", None)  # TVMScript's DtypeConstructor
    if isinstance(inner, str):
        return _ALIASES.get(inner, inner)
    if isinstance(value, ir.PrimType):
        return str(value.dtype)
    try:
        if value in _DTYPE_TO_STR:
            return _DTYPE_TO_STR[value]
    except TypeError:  # unhashable
        pass
    if isinstance(value, torch.dtype):
        raise TypeError(f"torch dtype {value} has no TileLang equivalent; "
                        f"supported: {sorted(map(str, _TORCH_DTYPE_TO_STR))}")
    raise TypeError(f"cannot interpret {value!r} ({type(value).__name__}) as a data type")


class _DataTypeQueries:
    """Queries upstream code asks of any dtype, ``buf.dtype.as_torch()`` included. They are attached
    to ``tvm.DataType`` itself (``_install_queries``): TVM hands out its own dtype objects."""

    @property
    def bytes(self) -> int:  # noqa: A003 - upstream's name
        return self.itemsize

    def as_torch(self) -> torch.dtype:
        """The torch dtype that stores this dtype (packed sub-byte types: their container)."""
        name = str(self)
        if name == "handle":
            return None
        if name in _TORCH_STORAGE:
            attr, fallback = _TORCH_STORAGE[name]
            found = getattr(torch, attr, None) if attr else None
            if found is None and fallback is None:
                raise ValueError(f"torch {torch.__version__} has no dtype for {name}")
            return found if found is not None else fallback
        if name in _STR_TO_TORCH_DTYPE:
            return _STR_TO_TORCH_DTYPE[name]
        raise ValueError(f"cannot convert dtype {name!r} to a torch dtype; supported: {sorted(_STR_TO_TORCH_DTYPE)}")

    def is_float4_e2m1fn(self) -> bool:
        """Packed 4-bit fp4 (e2m1): two values per byte."""
        return self.bits == 4 and builtins.int(self.type_code) == 17

    def is_float4_e2m1_unpacked(self) -> bool:
        """fp4 (e2m1) stored one value per byte (the tcgen05 shared-memory form)."""
        return self.bits == 8 and builtins.int(self.type_code) == _CUSTOM_TYPES["float4_e2m1_unpacked"]

    def is_float4(self) -> bool:
        return self.is_float4_e2m1fn() or self.is_float4_e2m1_unpacked()

    def is_tfloat32(self) -> bool:
        return builtins.int(self.type_code) == _CUSTOM_TYPES["tfloat32"]


def _expr_dtype(expr):
    """``expr.dtype``: the element type of a scalar expression, as upstream's TVM spells it."""
    ty = expr.ty
    if not isinstance(ty, ir.PrimType):
        raise AttributeError(f"{type(expr).__name__} of type {ty} has no dtype")
    return ty.dtype


def _install_queries() -> None:
    for name, member in vars(_DataTypeQueries).items():
        if not name.startswith("__") and not hasattr(tvm_ffi.dtype, name):
            setattr(tvm_ffi.dtype, name, member)
    if not hasattr(ir.Expr, "dtype"):
        ir.Expr.dtype = property(_expr_dtype)


_install_queries()


def _install_unsigned_literals() -> None:
    """``x & 0xFFFFFFFF`` for an unsigned ``x``: TVM turns a Python int above int32's range into a
    signed immediate before matching types, which wraps it negative and fails. An int literal meeting
    an unsigned operand becomes an immediate of the operand's own type instead. An arithmetic
    operator meeting None raises Python's TypeError (TVM's ``//`` crashed the process)."""
    operand = ir.expr.ExprOperand
    if getattr(operand, "_tl_unsigned_literals", False):
        return
    names = ("add", "sub", "mul", "floordiv", "mod", "and", "or", "xor", "lt", "le", "gt", "ge", "eq", "ne")
    for base in names:
        for name in (f"__{base}__", f"__r{base}__"):
            original = getattr(operand, name, None)
            if original is not None:
                setattr(operand, name, _unsigned_literal_op(original))
    operand._tl_unsigned_literals = True


def _unsigned_literal_op(original):
    arithmetic = not any(original.__name__.endswith(f"{c}__") for c in ("lt", "le", "gt", "ge", "eq", "ne"))

    def op(self, other):
        if other is None and arithmetic:
            # Python's TypeError ("unsupported operand type(s) for //: 'Var' and 'NoneType'"): TVM's
            # floordiv dereferences the missing operand and kills the process
            return NotImplemented
        if type(other) is builtins.int and other > 0x7FFFFFFF:  # smaller ones already work
            ty = getattr(self, "ty", None)
            prim = getattr(ty, "dtype", None) if isinstance(ty, ir.PrimType) else None
            if prim is not None and prim.type_code == 1 and prim.lanes == 1 and other < (1 << prim.bits):
                other = tirx.IntImm(str(prim), other)
        return original(self, other)

    op.__name__ = original.__name__
    op.__doc__ = original.__doc__
    return op


_install_unsigned_literals()


class dtype(tvm_ffi.dtype):  # noqa: N801 - upstream's name
    """A ``tvm.DataType`` that is also TVMScript's scalar constructor: ``T.float16(0)`` is a constant,
    ``T.float16(x)`` a cast, ``T.float16()`` a fresh variable, ``T.float16x2(a, b)`` a vector."""

    __slots__ = ()

    def __new__(cls, value: Any = "float32") -> dtype:
        if type(value) is cls:
            return value
        return super().__new__(cls, _canonical(value))

    @property
    def _dtype_str(self) -> str:
        """The spelling TVM's script builder reads off dtype objects."""
        return str(self)

    def __call__(self, *args, is_size_var: bool = False):
        if len(args) > 1:
            return tirx.Shuffle([_const_or_expr(a, self.element_of) for a in args], list(range(len(args))))
        value = args[0] if args else None
        if value is None:
            return (tirx.SizeVar if is_size_var else tirx.Var)("v", str(self))
        if isinstance(value, str):
            value = builtins.float(value)
        if isinstance(value, (builtins.bool, builtins.int, builtins.float, np.number)):
            if self.lanes > 1:
                return tirx.Broadcast(_constant(value, self.element_of), self.lanes)
            return _constant(value, str(self))
        current = str(getattr(value.ty, "dtype", value.ty))
        return tirx.Cast(str(self), value) if current != str(self) else value

    @property
    def element_of(self) -> str:
        return str(self.with_lanes(1)) if self.lanes > 1 else str(self)

    def __reduce__(self):
        return (dtype, (str(self),))


def _constant(value, name: str):
    """A constant of dtype ``name``; types TVM has no immediates for get a cast of a float32 one."""
    try:
        return tirx.const(value, name)
    except RuntimeError:  # TVM has no immediates of this type
        return tirx.Cast(name, tirx.const(builtins.float(value), "float32"))


def _const_or_expr(value, element):
    if isinstance(value, (builtins.bool, builtins.int, builtins.float)):
        return _constant(value, element)
    return value


AnyDType = ir.Type | str | type | torch.dtype | dtype


def get_tvm_dtype(value: Any) -> dtype:
    """``value`` as a ``dtype`` object."""
    return dtype(value)


def normalize_dtype(value: Any) -> str:
    """The storage dtype string the compiler uses for any accepted dtype spelling."""
    name = _canonical(value)
    if name.startswith("custom[tfloat32]32"):  # vectors too: custom[tfloat32]32x4 -> float32x4
        return "float32" + name[len("custom[tfloat32]32"):]
    return _STORAGE.get(name, name)


def resolve_torch_storage_dtype(value: Any) -> dtype:
    """The TileLang dtype of torch's physical storage for ``value`` (``int4`` -> ``int8``)."""
    return dtype(dtype(value).as_torch())


def is_float4_e2m1fn(value: Any) -> bool:
    return dtype(value).is_float4_e2m1fn()


def is_float4_e2m1_unpacked(value: Any) -> bool:
    return dtype(value).is_float4_e2m1_unpacked()


def is_float4(value: Any) -> bool:
    return dtype(value).is_float4()


def is_narrow_float(name: str) -> bool:
    """Whether the dtype name ``name`` (scalar, as ``str(dtype)`` prints it) is an 8-, 6- or 4-bit
    float: no CUDA arithmetic or math of its own. A string test, cheap on a code generator's path."""
    return name.startswith(("float8_", "float6_", "float4_"))    # (not float64: "float6" is its prefix)


def is_f8f6f4_family(value: Any) -> bool:
    """Whether ``value`` is an fp8, fp6 or fp4 operand type (tcgen05 ``kind::f8f6f4``)."""
    dt = dtype(value)
    return dt.is_float4() or (dt.bits in (6, 8) and str(dt).startswith(("float8", "float6")))


def validate_gemm_ab_dtypes(a_dtype, b_dtype, *, a_in_tmem: bool = False, allow_f8f6f4_mixed: bool = False) -> None:
    """Raise ValueError unless a gemm's A and B dtypes may be combined."""
    if a_in_tmem or dtype(a_dtype) == dtype(b_dtype):
        return
    if allow_f8f6f4_mixed and is_f8f6f4_family(a_dtype) and is_f8f6f4_family(b_dtype):
        return
    raise ValueError(f"mixed-dtype gemm needs f8f6f4-family operands, got A={a_dtype}, B={b_dtype}")


def bits(value: Any) -> int:
    """Bit width of one element of ``value``."""
    name = normalize_dtype(value)
    return 8 if name == "bool" else tvm_ffi.dtype(name).bits


def nbytes(value: Any) -> int:
    """Bytes per element (sub-byte types round up)."""
    return max(1, bits(value) // 8)


def is_float(value: Any) -> bool:
    name = normalize_dtype(value)
    return name.startswith(("float", "bfloat"))


# The dtype names of ``T`` (upstream's list and order): scalar types, C-style aliases and vectors.
_LANES = ("x2", "x4", "x8", "x16", "x32", "x64")
_FLOAT8 = ("float8_e3m4", "float8_e4m3", "float8_e4m3b11fnuz", "float8_e4m3fn", "float8_e4m3fnuz",
           "float8_e5m2", "float8_e5m2fnuz", "float8_e8m0fnu", "float6_e2m3fn", "float6_e3m2fn", "float4_e2m1fn")


def _with_vectors(bases, interleave=True):
    if interleave:
        return list(bases) + [b + x for x in _LANES for b in bases]
    return [n for b in bases for n in [b] + [b + x for x in _LANES]]


_all_dtypes = (["bool", "short", "int", "uint", "long", "half", "float", "double", "int4"]
               + _with_vectors(("int8", "int16", "int32", "int64"))
               + _with_vectors(("uint8", "uint16", "uint32", "uint64"))
               + _with_vectors(("float16", "float32", "float64"))
               + _with_vectors(_FLOAT8, interleave=False)
               + ["float4_e2m1_unpacked"] + _with_vectors(("bfloat16",), interleave=False)
               + _with_vectors(("tfloat32",), interleave=False))


def _spelling(name: str) -> str:
    if name.startswith("tfloat32"):
        return "custom[tfloat32]32" + name[len("tfloat32"):]
    return _ALIASES.get(name, name)


_DTYPE_OBJECTS = {name: dtype(_spelling(name)) for name in _all_dtypes}
globals().update(_DTYPE_OBJECTS)

__all__ = list(_all_dtypes) + ["AnyDType", "dtype", "get_tvm_dtype", "is_f8f6f4_family", "is_float4",
                                "is_float4_e2m1_unpacked", "is_float4_e2m1fn", "normalize_dtype",
                                "resolve_torch_storage_dtype", "validate_gemm_ab_dtypes"]
