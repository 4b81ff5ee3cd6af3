"""Gemm implementation registry (upstream's ``tilelang.tileop.gemm.registry``).

``register_gemm_impl(name, inst_name, predicate, impl_class)`` records (or, for a known
``name``, replaces) an entry; ``resolve_gemm_impl(inst_name, target)`` returns the one class whose
``inst_name`` matches and whose ``predicate(target)`` holds, else ``ValueError`` (none, or more
than one). The CUDA classes register when ``tilelang.cuda.op.gemm`` is imported (the registry
imports nothing above it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["GemmImplEntry", "register_gemm_impl", "resolve_gemm_impl"]


@dataclass(frozen=True)
class GemmImplEntry:
    name: str
    inst_name: str
    predicate: Callable
    impl_class: type


_GEMM_IMPLS: list[GemmImplEntry] = []


def register_gemm_impl(name: str, inst_name: str, predicate: Callable, impl_class: type) -> None:
    entry = GemmImplEntry(name, inst_name, predicate, impl_class)
    for i, known in enumerate(_GEMM_IMPLS):
        if known.name == name:
            _GEMM_IMPLS[i] = entry
            return
    _GEMM_IMPLS.append(entry)


def resolve_gemm_impl(gemm_inst: str, target) -> type:
    matches = [e for e in _GEMM_IMPLS if e.inst_name == gemm_inst and e.predicate(target)]
    if not matches:
        raise ValueError(f"No GEMM implementation registered for instruction {gemm_inst} and target {target}")
    if len(matches) > 1:
        raise ValueError(f"Multiple GEMM implementations matched instruction {gemm_inst} and target {target}: "
                         + ", ".join(e.name for e in matches))
    return matches[0].impl_class
