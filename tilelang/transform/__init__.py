"""Compiler passes, one file per pass; ``tilelang.engine.pipeline`` orders them."""

from tilelang.transform.pass_config import PassConfigKey  # upstream imports it from here
from tilelang.transform.simplify import apply_simplify, simplify_prim_func

__all__ = ["PassConfigKey", "apply_simplify", "simplify_prim_func"]
