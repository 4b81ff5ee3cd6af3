"""The compiler driver: ``lower`` runs the pass pipeline and emits a ``KernelArtifact``."""

from .lower import lower

__all__ = ["lower"]
