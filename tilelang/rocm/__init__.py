"""Upstream's ``tilelang.rocm`` namespace: AMD facts that CUDA-side code asks about.

We compile for NVIDIA GPUs only; these functions answer questions about the host (is ROCm
installed?) and AMD architectures (a warp's width) so that code written for upstream's both
backends runs here and takes its CUDA branch.
"""

from .target import check_hip_availability, rocm_warp_size_for_arch

__all__ = ["check_hip_availability", "rocm_warp_size_for_arch"]
