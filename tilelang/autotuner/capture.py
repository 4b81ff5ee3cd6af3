"""``set_autotune_inputs``: give the tuner real inputs instead of generated ones.

    with tilelang.autotuner.set_autotune_inputs(a, b):   # or set_autotune_inputs([a, b])
        kernel = matmul(M, N, K)

Inside the block, every tuning run in this thread checks and times the configs on these
tensors (the kernel's inputs, without its ``out_idx`` outputs) instead of calling
``supply_prog`` or generating random ones; blocks nest, the innermost wins.
``get_autotune_inputs()`` returns the active list, or None outside any block.
"""

from __future__ import annotations

import threading

_local = threading.local()


def _stack() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


class AutotuneInputs:
    """The context manager ``set_autotune_inputs`` returns."""

    def __init__(self, tensors: list):
        self.tensors = tensors

    def __enter__(self) -> "AutotuneInputs":
        _stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _stack().remove(self)


def set_autotune_inputs(*tensors) -> AutotuneInputs:
    """Inputs for the tuning runs inside the ``with`` block: ``(a, b)`` or ``([a, b])``."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    return AutotuneInputs(list(tensors))


def get_autotune_inputs() -> list | None:
    stack = _stack()
    return stack[-1].tensors if stack else None
