"""Compiler passes, one file per pass; ``tilelang.engine.pipeline`` orders them."""

from tilelang.transform.pass_config import PassConfigKey  # upstream imports it from here

__all__ = ["PassConfigKey"]
