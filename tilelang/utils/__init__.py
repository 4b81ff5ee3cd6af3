"""Helpers upstream TileLang code imports from ``tilelang.utils``: the tensor helpers of
``tilelang.utils.tensor`` (``TensorSupplyType``, ``get_tensor_supply``, ``torch_assert_close``,
``map_torch_type``)."""

from tilelang.utils.tensor import TensorSupplyType, get_tensor_supply, map_torch_type, torch_assert_close

__all__ = ["TensorSupplyType", "get_tensor_supply", "map_torch_type", "torch_assert_close"]
