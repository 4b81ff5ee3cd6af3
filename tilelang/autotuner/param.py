"""Upstream's import path for the autotuner's argument and result records:
``from tilelang.autotuner.param import CompileArgs, ProfileArgs, AutotuneResult``.

The records live in ``tilelang.autotuner.tuner``; this module only names them where upstream
code looks for them.
"""

from __future__ import annotations

import logging

from tilelang.autotuner.tuner import AutotuneResult, CompileArgs, ConfigResult, ProfileArgs

logger = logging.getLogger(__name__)

__all__ = ["AutotuneResult", "CompileArgs", "ConfigResult", "ProfileArgs"]
