"""Compiler passes, one file per pass; ``tilelang.engine.pipeline`` orders them."""
