"""``CPU``: the host, for an ``llvm`` target (nothing to tune: no sizes are described)."""

from __future__ import annotations

from tilelang.carver.arch.arch_base import TileDevice


def is_cpu_arch(arch: TileDevice) -> bool:
    return isinstance(arch, CPU)


class CPU(TileDevice):
    def __init__(self, target="llvm"):
        super().__init__()
        self.target = target
        self.platform = "CPU"
        self.name = "cpu"

    def __repr__(self) -> str:
        return "CPU()"


__all__ = ["CPU", "is_cpu_arch"]
