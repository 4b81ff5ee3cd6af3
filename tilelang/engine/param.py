"""``tilelang.engine.param``: upstream's module of ``KernelParam``, the (dtype, shape) description
of a kernel parameter that harnesses written for upstream import for type hints and build from
TIR buffers and variables. A compiled kernel's ``params`` are ``tilelang.artifact.ParamSpec``
records, which answer the same questions (``shape``, ``dtype``, ``is_scalar()``, ``torch_dtype()``
...; not ``tilelang_dtype()``: ``T.dtype(p.dtype)``) and count as ``KernelParam`` instances."""

from __future__ import annotations

from abc import ABCMeta
from dataclasses import dataclass, field

from tvm import tirx

from tilelang.artifact import DtypeQueries, ParamSpec
from tilelang.language import dtypes

__all__ = ["KernelParam"]


@dataclass
class KernelParam(DtypeQueries, metaclass=ABCMeta):
    """A parameter's element type (a TVM dtype string) and shape (ints, or TIR variables for
    symbolic extents; ``[]`` for a scalar)."""

    dtype: str
    shape: list = field(default_factory=list)

    @classmethod
    def from_buffer(cls, buffer: tirx.Buffer) -> "KernelParam":
        shape = []
        for extent in buffer.shape:
            if isinstance(extent, tirx.IntImm):
                shape.append(int(extent.value))
            elif isinstance(extent, tirx.PrimExpr):
                shape.append(extent)
            else:
                raise ValueError(f"KernelParam.from_buffer: unsupported extent {extent!r} "
                                 f"({type(extent).__name__}) of buffer {buffer.name!r}")
        return cls(str(buffer.dtype), shape)

    @classmethod
    def from_var(cls, var: tirx.Var) -> "KernelParam":
        return cls(str(var.dtype), [])

    def tilelang_dtype(self) -> dtypes.dtype:
        return dtypes.dtype(self._dtype_name())


KernelParam.register(ParamSpec)   # a compiled kernel's params are KernelParams to isinstance
