"""``tilelang.backend``: target resolution under upstream's module path (``tilelang.backend.target``).

Contract: ``determine_target`` is the only entry point here; kernels compile for CUDA GPUs only
(see ``tilelang.backend.target``).
"""

from __future__ import annotations

from tilelang.backend.target import auto_detect_target, determine_target, get_target_code_list, target_code

__all__ = ["auto_detect_target", "determine_target", "get_target_code_list", "target_code"]
