"""Upstream's ``tilelang.cuda.op``: per-instruction gemm implementation classes (``gemm``)."""
