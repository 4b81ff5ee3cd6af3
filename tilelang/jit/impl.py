"""``tilelang.jit.JITImpl``: upstream's name for what ``@tilelang.jit`` returns. Ours returns one
of three objects by the decorated function's form (a kernel factory, an eager-style kernel, a
``@T.prim_func`` compiled on first use); each derives from this class, so ``isinstance(k, JITImpl)``
and annotations such as ``JITImpl[..., T]`` written for upstream hold."""

from __future__ import annotations

__all__ = ["JITImpl"]


class JITImpl:
    """Base of every object ``@tilelang.jit`` returns (no behaviour of its own)."""

    __slots__ = ()

    def __class_getitem__(cls, params):   # upstream's JITImpl is Generic[_P, _KP, _T, _Ret]
        return cls
