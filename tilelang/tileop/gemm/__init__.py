"""Upstream's ``tilelang.tileop.gemm``: the registry of per-target gemm implementation classes
(``registry``). Our ``T.gemm`` lowering lives in ``tilelang.transform``; the registry answers
which instruction family upstream's dispatch would pick for a target."""
