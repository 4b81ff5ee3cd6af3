"""Tensor helpers with upstream TileLang's names."""

from __future__ import annotations


def torch_assert_close(tensor_a, tensor_b, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False, equal_nan: bool = True,
                       check_device: bool = True, check_dtype: bool = True, base_name: str = "LHS",
                       ref_name: str = "RHS") -> None:
    """Raise AssertionError unless ``tensor_a`` is close to ``tensor_b`` (``atol + rtol * |b|``),
    allowing up to ``max_mismatched_ratio`` of the elements to be off: upstream's rule, the same
    comparison ``Profiler.assert_allclose`` makes."""
    from tilelang.profiler import compare_output

    if check_device and tensor_a.device != tensor_b.device:
        raise AssertionError(f"{base_name} is on {tensor_a.device}, {ref_name} on {tensor_b.device}")
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"{base_name} is {tensor_a.dtype}, {ref_name} is {tensor_b.dtype}")
    compare_output(base_name, tensor_a, tensor_b, atol=atol, rtol=rtol,
                   max_mismatched_ratio=max_mismatched_ratio or None, against=ref_name)
    if verbose:
        print(f"{base_name} matches {ref_name} (rtol={rtol:g}, atol={atol:g})")


__all__ = ["torch_assert_close"]
