"""Test helpers with upstream TileLang's names (``import tilelang.testing``).

    tilelang.testing.main()                      run pytest on the calling file
    @tilelang.testing.requires_cuda              skip without a CUDA GPU
    @tilelang.testing.requires_cuda_compute_version_ge(9, 0)   (also _gt, _eq, _lt, _le, and
                                                 requires_cuda_compute_version(major, minor, mode))
    @tilelang.testing.requires_package("einops")   skip unless the packages import
    @tilelang.testing.requires_cuda_or_cdna      (CUDA only: we target no AMD GPU); requires_rocm,
                                                 requires_cdna, requires_gfx950, requires_metal and
                                                 requires_llvm always skip, saying why
    tilelang.testing.set_random_seed(seed)       Python, NumPy and torch generators
    tilelang.testing.torch_assert_close(a, b, ...)
    tilelang.testing.process_func(fn, name, **kw) / regression()   upstream's perf-regression
                                                 harness (``tilelang.testing.perf_regression``)

Importing it also gives ``tvm.testing`` upstream's ``requires_package`` (upstream examples
decorate with it after ``import tilelang.testing``); ``tvm.testing`` brings pytest with it.
"""

from __future__ import annotations

import inspect
import operator
import random
import sys

from tilelang.testing.perf_regression import process_func, regression
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


class _Gate:
    """A test requirement used as upstream's (TVM's ``Feature``): ``@gate`` on a test, or its pytest
    marks in a parameter (``pytest.param("cuda", marks=gate.marks())``)."""

    def __init__(self, mark, doc: str):
        self._mark, self.__doc__ = mark, doc

    def marks(self, **_options) -> list:
        return [self._mark()]

    def __call__(self, func=None, **_options):
        # (``@requires_cuda``, or upstream's ``@requires_cuda()`` / ``requires_cuda(support_required=...)``)
        return self._mark() if func is None else self._mark()(func)


def _skip_without_gpu():
    import pytest

    return pytest.mark.skipif(_capability() is None, reason="needs a CUDA GPU")


requires_cuda = _Gate(_skip_without_gpu, "Skip the test on a machine without a CUDA GPU.")
requires_cuda_or_cdna = _Gate(_skip_without_gpu, "Skip without a CUDA GPU (upstream also accepts AMD CDNA GPUs, "
                                                 "which we do not target).")


def _never(backend: str, why: str):
    def mark():
        import pytest

        return pytest.mark.skip(reason=f"needs {backend}: {why}")

    return _Gate(mark, f"Skip: needs {backend} ({why}).")


requires_rocm = _never("a ROCm GPU", "TileLang here compiles for CUDA GPUs only")
requires_cdna = _never("an AMD CDNA GPU", "TileLang here compiles for CUDA GPUs only")
requires_gfx950 = _never("an AMD gfx950 GPU", "TileLang here compiles for CUDA GPUs only")
requires_metal = _never("Metal", "TileLang here compiles for CUDA GPUs only")
requires_llvm = _never("the LLVM CPU backend", "TileLang here compiles for CUDA GPUs only")


def requires_package(*packages: str):
    """Skip unless every named package imports (``@requires_package("einops", "scipy")``)."""
    import importlib.util

    import pytest

    missing = []
    for name in packages:
        try:
            found = importlib.util.find_spec(name) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            missing.append(name)
    why = f"needs the package(s) {', '.join(missing)}" if missing else ""
    return pytest.mark.skipif(bool(missing), reason=why)


def requires_cuda_compute_version(major_version: int, minor_version: int = 0, mode: str = "ge"):
    """Skip unless the GPU's compute capability compares to (major_version, minor_version) by
    ``mode`` (ge, gt, eq, lt, le)."""
    major, minor = major_version, minor_version
    import pytest

    if mode not in _MODES:
        raise ValueError(f"mode must be one of {sorted(_MODES)}, not {mode!r}")
    cap = _capability()
    ok = cap is not None and _MODES[mode](tuple(cap), (major, minor))
    why = "needs a CUDA GPU" if cap is None else f"needs compute capability {mode} {major}.{minor}, not {cap[0]}.{cap[1]}"
    return pytest.mark.skipif(not ok, reason=why)


def requires_cuda_compute_version_ge(major_version: int, minor_version: int = 0):
    return requires_cuda_compute_version(major_version, minor_version, "ge")


def requires_cuda_compute_version_gt(major_version: int, minor_version: int = 0):
    return requires_cuda_compute_version(major_version, minor_version, "gt")


def requires_cuda_compute_version_eq(major_version: int, minor_version: int = 0):
    return requires_cuda_compute_version(major_version, minor_version, "eq")


def requires_cuda_compute_version_lt(major_version: int, minor_version: int = 0):
    return requires_cuda_compute_version(major_version, minor_version, "lt")


def requires_cuda_compute_version_le(major_version: int, minor_version: int = 0):
    return requires_cuda_compute_version(major_version, minor_version, "le")


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


__all__ = ["main", "process_func", "regression", "requires_cdna", "requires_cuda", "requires_cuda_compute_version",
           "requires_cuda_compute_version_eq", "requires_cuda_compute_version_ge", "requires_cuda_compute_version_gt",
           "requires_cuda_compute_version_le", "requires_cuda_compute_version_lt", "requires_cuda_or_cdna",
           "requires_gfx950", "requires_llvm", "requires_metal", "requires_package", "requires_rocm",
           "set_random_seed", "torch_assert_close"]


def _add_tvm_testing_names() -> None:
    import tvm.testing

    if not hasattr(tvm.testing, "requires_package"):
        tvm.testing.requires_package = requires_package


_add_tvm_testing_names()

