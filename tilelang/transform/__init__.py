"""Compiler passes, one file per pass; ``tilelang.engine.pipeline`` orders them."""

from tilelang.transform.pass_config import PassConfigKey  # upstream imports it from here
from tilelang.transform.simplify import apply_simplify, simplify_prim_func
from tilelang.transform.storage_sync import ThreadSync  # barrier insertion as a TVM pass (thread-level TIR)

__all__ = ["PassConfigKey", "ThreadSync", "apply_simplify", "simplify_prim_func"]
