"""Argument binding and cache keys of a ``@tilelang.jit`` kernel factory (upstream's ``.func``).

    key, _ = matmul.func.parse_args(1024, 1024, block_M=128)

Contract:
- ``FactoryFunc(factory)``: ``parse_args(*args, **kwargs)`` binds a call like Python would (the
  same ``TypeError`` messages: "got multiple values for argument", "missing a required
  argument") and returns ``((values, None), {})``: ``values`` is every parameter's value in
  signature order, defaults filled in, so the positional, keyword and default spellings of one
  call give one key. Keywords the signature does not name (``**kwargs`` factories, or upstream's
  extra compile-time constants) are appended as one sorted ``((name, value), ...)`` tuple.
- Values are frozen into hashable key parts: dicts, lists, sets and tuples recursively (tagged
  with their type, so ``[1]`` and ``(1,)`` differ); any other unhashable value is a TypeError
  ("Unsupported unhashable JIT compile-time cache key value ...").
- ``_parse_phase1_key(*args, **kwargs)`` returns ``(values, {}, compile_kwargs)``:
  ``compile_kwargs`` are the arguments to call the factory with (named ones and the extra
  keywords flattened into one dict). A factory takes no runtime tensors, hence the empty dicts.
- ``get_tir(*args, **kwargs)`` (also calling the object) runs the factory.
"""

from __future__ import annotations

import inspect
from collections.abc import Hashable

_MISSING = object()

__all__ = ["FactoryFunc", "freeze_key_part"]


def freeze_key_part(value):
    """A hashable stand-in for ``value`` (see the module docstring)."""
    if isinstance(value, dict):
        items = sorted(value.items(), key=lambda kv: repr(kv[0]))
        return dict, tuple((freeze_key_part(k), freeze_key_part(v)) for k, v in items)
    if isinstance(value, list):
        return list, tuple(freeze_key_part(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return set, tuple(sorted((freeze_key_part(v) for v in value), key=repr))
    if isinstance(value, tuple):
        return tuple(freeze_key_part(v) for v in value)
    if not isinstance(value, Hashable):
        raise TypeError(f"Unsupported unhashable JIT compile-time cache key value of type "
                        f"{type(value).__qualname__}: {value!r}")
    try:
        hash(value)
    except TypeError:
        raise TypeError(f"Unsupported unhashable JIT compile-time cache key value of type "
                        f"{type(value).__qualname__}: {value!r}") from None
    return value


class FactoryFunc:
    """The factory behind a ``@tilelang.jit`` kernel, with upstream's binding methods."""

    tensor_args: dict = {}   # a factory takes no runtime tensors

    def __init__(self, factory):
        self.orig_func = factory
        self.signature = inspect.signature(factory)
        params = [p for p in self.signature.parameters.values()
                  if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)]
        self.param_names = [p.name for p in params]
        self._index = {name: i for i, name in enumerate(self.param_names)}
        self._defaults = tuple(_MISSING if p.default is p.empty else p.default for p in params)
        self.mode = "lazy"

    def _bind(self, args: tuple, kwargs: dict) -> tuple[list, dict]:
        if len(args) > len(self.param_names):
            raise TypeError(f"{self.orig_func.__name__}() takes {len(self.param_names)} positional arguments "
                            f"but {len(args)} were given")
        values, extra = list(self._defaults), {}
        values[:len(args)] = args
        for name, value in kwargs.items():
            index = self._index.get(name)
            if index is None:
                extra[name] = value
            elif index < len(args):
                raise TypeError(f"got multiple values for argument '{name}'")
            else:
                values[index] = value
        for name, value in zip(self.param_names, values):
            if value is _MISSING:
                raise TypeError(f"missing a required argument: '{name}'")
        return values, extra

    def _key(self, values: list, extra: dict) -> tuple:
        parts = [freeze_key_part(v) for v in values]
        if extra:
            parts.append(tuple((k, freeze_key_part(v)) for k, v in sorted(extra.items())))
        return tuple(parts)

    def parse_args(self, *args, **kwargs):
        """``((key, None), {})`` for this call (see the module docstring)."""
        values, extra = self._bind(args, kwargs)
        return (self._key(values, extra), None), {}

    def _parse_phase1_key(self, *args, **kwargs):
        values, extra = self._bind(args, kwargs)
        return self._key(values, extra), {}, {**dict(zip(self.param_names, values)), **extra}

    def set_mode(self, mode: str) -> None:
        if mode != "lazy":
            raise ValueError(f"a kernel factory (returning a @T.prim_func) runs in lazy mode, not {mode!r}")
        self.mode = mode

    def get_tir(self, *args, **kwargs):
        return self.orig_func(*args, **kwargs)

    __call__ = get_tir

    def __getattr__(self, name):
        if name in ("__name__", "__qualname__", "__module__", "__code__", "__closure__", "__globals__", "__doc__"):
            return getattr(self.orig_func, name)
        if name == "__wrapped__":
            return self.orig_func
        raise AttributeError(f"'{type(self).__name__}' object has no attribute {name!r}")
