"""The compiler driver: ``lower`` runs the pass pipeline and emits a ``KernelArtifact``."""

from .callback import (register_c_postproc, register_cuda_postproc, register_hip_postproc,
                       register_metal_postproc)
from .lower import lower

__all__ = ["lower", "register_c_postproc", "register_cuda_postproc", "register_hip_postproc",
           "register_metal_postproc"]
