"""``BaseTemplate``: what every carver template shares.

Contract: subclasses are dataclasses of the operator's parameters; ``initialize_function()``
builds the operator as a PrimFunc (called once, after construction) and
``get_hardware_aware_configs(arch, topk)`` ranks configurations. ``with_arch(arch)`` stores the
device and returns the template; ``recommend_hints(topk)`` needs it (``ValueError`` otherwise)
and returns at most ``topk`` hints, best first (an empty list when no configuration fits).
"""

from __future__ import annotations

from abc import ABC, abstractmethod

from tilelang.carver.arch import TileDevice
from tilelang.carver.roller.hint import Hint


class BaseTemplate(ABC):
    _arch: TileDevice | None = None
    _func = None

    def __post_init__(self):
        self._arch = None
        self._func = None
        self.initialize_function()

    @abstractmethod
    def initialize_function(self) -> None:
        """Build the operator's PrimFunc and record it with ``set_function``."""

    @abstractmethod
    def get_hardware_aware_configs(self, arch: TileDevice = None, topk: int = 10) -> list[Hint]:
        """The ``topk`` best configurations on ``arch``, best first."""

    def with_arch(self, arch: TileDevice) -> BaseTemplate:
        if not isinstance(arch, TileDevice):
            raise TypeError(f"{type(self).__name__}.with_arch expects a tilelang.carver.arch device "
                            f"(CUDA(...), CDNA(...)), got {type(arch).__name__}")
        self._arch = arch
        return self

    def has_arch(self) -> bool:
        return self._arch is not None

    @property
    def arch(self) -> TileDevice:
        return self._arch

    def _sm_version(self) -> int:
        return int(getattr(self._arch, "sm_version", 0) or 0)

    def is_volta_arch(self) -> bool:
        return self.has_arch() and 70 <= self._sm_version() < 80

    def is_ampere_arch(self) -> bool:
        return self.has_arch() and 80 <= self._sm_version() < 90

    def is_cdna_arch(self) -> bool:
        return self.has_arch() and getattr(self._arch, "platform", "") == "CDNA"

    def is_rdna_arch(self) -> bool:
        return self.has_arch() and getattr(self._arch, "platform", "") == "RDNA"

    def set_function(self, func) -> BaseTemplate:
        self._func = func
        return self

    def equivalent_function(self):
        """The operator as a TIR PrimFunc."""
        return self._func

    def recommend_hints(self, topk: int = 10) -> list[Hint]:
        if not self.has_arch():
            raise ValueError(f"{type(self).__name__}.recommend_hints: no device; call .with_arch(CUDA(...)) first")
        return self.get_hardware_aware_configs(self._arch, topk)
