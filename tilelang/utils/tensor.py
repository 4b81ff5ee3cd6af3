"""Tensor helpers with upstream TileLang's names: ``TensorSupplyType``, ``get_tensor_supply``,
``torch_assert_close``, ``map_torch_type``.

Contract: ``get_tensor_supply(kind)`` returns ``supply(param_or_shape, dtype=None, device=None)``
that makes a fresh torch tensor. Its first argument is a kernel parameter (anything with
``shape`` and ``dtype``: our ``ParamSpec``, upstream's ``KernelParam``) or a shape; dtypes may be
torch dtypes or TileLang / TVM dtype names; the device defaults to the current CUDA device, else
the CPU. A symbolic dimension is a ValueError saying the shape must be static. The
distributions are upstream's (``Auto``: uniform in [-1, 1) for fp16/bf16/fp32, small integers
otherwise; ``Integer``: integers in [-2, 3), [0, 3) when unsigned; ...). torch is imported on use.
"""

from __future__ import annotations

import enum


class TensorSupplyType(enum.Enum):
    """How generated kernel inputs are filled (upstream's names and numbering)."""

    Integer = 1
    Uniform = 2
    Normal = 3
    Randn = 4
    Zero = 5
    One = 6
    Auto = 7


def map_torch_type(dtype):
    """The torch dtype for a TileLang / TVM dtype (name, ``T.float16``, ``DataType``) or a torch dtype."""
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    from tilelang.jit.adapter_args import torch_dtype

    return torch_dtype(str(dtype))


def _static_shape(shape) -> list[int]:
    dims = []
    for d in shape:
        try:
            dims.append(int(d))
        except (TypeError, ValueError):
            raise ValueError(f"cannot generate a tensor with symbolic shape {list(shape)}: dimension {d} "
                             "has no value; the shape must be static (give the tensors yourself)") from None
    return dims


def _default_device():
    import torch

    return torch.cuda.current_device() if torch.cuda.is_available() else "cpu"


def _is_unsigned(torch, dtype) -> bool:
    return dtype in (torch.uint8, getattr(torch, "uint16", None), getattr(torch, "uint32", None),
                     getattr(torch, "uint64", None))


def _small_ints(torch, shape, dtype, device):
    """upstream's Integer supply: [-2, 3), unsigned [0, 3), bool {0, 1}, fp8 from int8 bits' range."""
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, device=device).bool()
    if _is_unsigned(torch, dtype):
        return torch.randint(0, 3, shape, device=device).to(dtype)
    if dtype.is_floating_point and dtype.itemsize == 1:
        return torch.randint(-128, 128, shape, device=device, dtype=torch.int8).to(torch.float32).to(dtype)
    return torch.randint(-2, 3, shape, device=device).to(dtype)


def _fill(kind: TensorSupplyType, shape, dtype, device):
    import torch

    if kind == TensorSupplyType.Auto:
        if dtype in (torch.float16, torch.float32, torch.bfloat16):
            return torch.empty(shape, device=device, dtype=dtype).uniform_(-1.0, 1.0)
        return _small_ints(torch, shape, dtype, device)
    if dtype == torch.int8 and kind in (TensorSupplyType.Uniform, TensorSupplyType.Normal):
        return torch.ones(shape, device=device, dtype=dtype)
    if kind == TensorSupplyType.Integer:
        return _small_ints(torch, shape, dtype, device)
    if kind == TensorSupplyType.Uniform:
        return torch.empty(shape, device=device, dtype=torch.float32).uniform_(-1.0, 1.0).to(dtype)
    if kind == TensorSupplyType.Normal:
        return torch.empty(shape, device=device, dtype=torch.float32).normal_(-1.0, 1.0).to(dtype)
    if kind == TensorSupplyType.Randn:
        return torch.randn(shape, device=device).to(dtype)
    if kind == TensorSupplyType.Zero:
        return torch.zeros(shape, device=device, dtype=dtype)
    if kind == TensorSupplyType.One:
        return torch.ones(shape, device=device, dtype=dtype)
    raise ValueError(f"unknown tensor supply type {kind!r}")


def get_tensor_supply(supply_type: TensorSupplyType = TensorSupplyType.Integer):
    """A ``supply(param_or_shape, dtype=None, device=None) -> Tensor`` (see the module docstring)."""
    if not isinstance(supply_type, TensorSupplyType):
        raise ValueError(f"unknown tensor supply type {supply_type!r}; use tilelang.TensorSupplyType")

    def supply(param, dtype=None, device=None):
        if dtype is None:   # a parameter: ParamSpec / KernelParam
            shape, dtype = param.shape, param.dtype
        else:
            shape = param
        return _fill(supply_type, _static_shape(shape), map_torch_type(dtype),
                     _default_device() if device is None else device)

    return supply


def torch_assert_close(tensor_a, tensor_b, rtol: float = 1e-2, atol: float = 1e-3,
                       max_mismatched_ratio: float = 0.001, verbose: bool = False, equal_nan: bool = True,
                       check_device: bool = True, check_dtype: bool = True, check_layout: bool = True,
                       check_stride: bool = False, base_name: str = "LHS", ref_name: str = "RHS") -> bool:
    """Raise AssertionError unless ``tensor_a`` is close to ``tensor_b`` (``atol + rtol * |b|``),
    allowing up to ``max_mismatched_ratio`` of the elements to be off: upstream's rule, the same
    comparison ``Profiler.assert_allclose`` makes. Returns True (``assert torch_assert_close(...)``)."""
    if check_device and tensor_a.device != tensor_b.device:
        raise AssertionError(f"{base_name} is on {tensor_a.device}, {ref_name} on {tensor_b.device}")
    if check_dtype and tensor_a.dtype != tensor_b.dtype:
        raise AssertionError(f"{base_name} is {tensor_a.dtype}, {ref_name} is {tensor_b.dtype}")
    if check_layout and tensor_a.layout != tensor_b.layout:
        raise AssertionError(f"{base_name} has layout {tensor_a.layout}, {ref_name} {tensor_b.layout}")
    if check_stride and tensor_a.stride() != tensor_b.stride():
        raise AssertionError(f"{base_name} has strides {tensor_a.stride()}, {ref_name} {tensor_b.stride()}")
    compare_output(base_name, tensor_a, tensor_b, atol=atol, rtol=rtol,
                   max_mismatched_ratio=max_mismatched_ratio or None, against=ref_name)
    if verbose:
        print(f"{base_name} matches {ref_name} (rtol={rtol:g}, atol={atol:g})")
    return True


def compare_output(name: str, got, expected, atol: float, rtol: float, max_mismatched_ratio=None,
                   against: str = "the reference") -> None:
    """Raise AssertionError unless ``got`` matches ``expected`` within ``atol + rtol * |expected|``
    (integers exactly); with ``max_mismatched_ratio``, up to that fraction of the elements may be
    off (upstream's rule). Shared by ``torch_assert_close``, ``Profiler.assert_allclose`` and the
    autotuner's check."""
    import torch

    expected = torch.as_tensor(expected, device=got.device)
    if tuple(got.shape) != tuple(expected.shape):
        raise AssertionError(f"output {name!r}: shape {tuple(got.shape)} != reference {tuple(expected.shape)}")
    if got.dtype.is_floating_point or expected.dtype.is_floating_point:
        g, e = got.float(), expected.float()
    else:
        g, e = got.long(), expected.long()
        atol = rtol = 0
    if max_mismatched_ratio:
        close = torch.isclose(g, e, atol=atol, rtol=rtol, equal_nan=True)
        total = close.numel()
        bad = total - int(close.sum())
        if not total or bad <= max_mismatched_ratio * total:
            return
        diff = float((g - e).abs()[~close].nan_to_num(float("inf")).max())
        raise AssertionError(f"output {name!r}: {bad} of {total} elements ({bad / total:.2%}) differ from {against} "
                             f"beyond atol={atol:g}, rtol={rtol:g} ({bad / total:.2%} > max_mismatched_ratio "
                             f"{max_mismatched_ratio:g}); max abs diff {diff:g}")
    try:
        torch.testing.assert_close(g, e, atol=atol, rtol=rtol, equal_nan=True)
    except AssertionError as err:
        raise AssertionError(f"output {name!r} differs from {against}:\n{err}") from None

__all__ = ["TensorSupplyType", "compare_output", "get_tensor_supply", "map_torch_type", "torch_assert_close"]
