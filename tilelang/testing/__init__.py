"""Test helpers with upstream TileLang's names (``import tilelang.testing``).

    tilelang.testing.main()                      run pytest on the calling file
    @tilelang.testing.requires_cuda              skip without a CUDA GPU
    @tilelang.testing.requires_cuda_compute_version_ge(9, 0)   (also _gt, _eq, _lt, _le, and
                                                 requires_cuda_compute_version(major, minor, mode))
    tilelang.testing.set_random_seed(seed)       Python, NumPy and torch generators
    tilelang.testing.torch_assert_close(a, b, ...)

pytest is imported only when a decorator or ``main`` is used.
"""

from __future__ import annotations

import inspect
import operator
import random
import sys

from tilelang.utils.tensor import torch_assert_close

_MODES = {"ge": operator.ge, "gt": operator.gt, "eq": operator.eq, "lt": operator.lt, "le": operator.le}


def main() -> None:
    """Run pytest on the file that calls this (``if __name__ == "__main__": tilelang.testing.main()``)."""
    import pytest

    caller = inspect.stack()[1].filename
    sys.exit(pytest.main([caller, *sys.argv[1:]]))


def _capability():
    try:
        import torch

        if torch.cuda.is_available():
            return torch.cuda.get_device_capability()
    except Exception:  # noqa: BLE001 - no torch / no driver: no GPU
        pass
    return None


def requires_cuda(func):
    """Skip the test on a machine without a CUDA GPU."""
    import pytest

    return pytest.mark.skipif(_capability() is None, reason="needs a CUDA GPU")(func)


def requires_cuda_compute_version(major: int, minor: int = 0, mode: str = "ge"):
    """Skip unless the GPU's compute capability compares to (major, minor) by ``mode``
    (ge, gt, eq, lt, le)."""
    import pytest

    if mode not in _MODES:
        raise ValueError(f"mode must be one of {sorted(_MODES)}, not {mode!r}")
    cap = _capability()
    ok = cap is not None and _MODES[mode](tuple(cap), (major, minor))
    why = "needs a CUDA GPU" if cap is None else f"needs compute capability {mode} {major}.{minor}, not {cap[0]}.{cap[1]}"
    return pytest.mark.skipif(not ok, reason=why)


def requires_cuda_compute_version_ge(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "ge")


def requires_cuda_compute_version_gt(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "gt")


def requires_cuda_compute_version_eq(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "eq")


def requires_cuda_compute_version_lt(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "lt")


def requires_cuda_compute_version_le(major: int, minor: int = 0):
    return requires_cuda_compute_version(major, minor, "le")


def set_random_seed(seed: int = 42) -> None:
    """Seed Python's, NumPy's and torch's generators (all CUDA devices included)."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass
    try:
        import torch

        torch.manual_seed(seed)
        if torch.cuda.is_available():
            torch.cuda.manual_seed_all(seed)
    except ImportError:
        pass


__all__ = ["main", "requires_cuda", "requires_cuda_compute_version", "requires_cuda_compute_version_eq",
           "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt", "requires_cuda_compute_version_le",
           "requires_cuda_compute_version_lt", "set_random_seed", "torch_assert_close"]
