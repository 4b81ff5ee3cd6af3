"""Queries of the live CUDA device, by index (device 0 unless told).

Contract: importing needs no GPU. ``get_cuda_device_properties`` and ``get_device_name`` return
None without a usable device (torch's view); every other function raises ``NoCudaError`` (a
``RuntimeError`` saying "no CUDA device: ...") when called without one. Attribute numbers are
CUDA's ``cudaDeviceAttr`` values, which equal the driver's ``CUdevice_attribute`` ones: they are
read with ``cuDeviceGetAttribute`` through ``tilelang.jit.driver``.
"""

from __future__ import annotations

from tilelang.jit import driver as _driver
from tilelang.jit.driver import NoCudaError

_FORMATS = {"bytes": 1, "kb": 1024, "mb": 1024 * 1024}


class cudaDeviceAttrNames:
    """The ``cudaDeviceAttr`` numbers these functions read."""

    cudaDevAttrMaxThreadsPerBlock: int = 1
    cudaDevAttrMaxSharedMemoryPerBlock: int = 8
    cudaDevAttrMaxRegistersPerBlock: int = 12
    cudaDevAttrMultiProcessorCount: int = 16
    cudaDevAttrL2CacheSize: int = 38
    cudaDevAttrMaxSharedMemoryPerMultiprocessor: int = 81
    cudaDevAttrMaxSharedMemoryPerBlockOptin: int = 97
    cudaDevAttrMaxPersistingL2CacheSize: int = 108


def _torch_cuda():
    try:
        import torch
    except ImportError:
        return None
    return torch if torch.cuda.is_available() else None


def get_cuda_device_properties(device_id: int = 0):
    """torch's ``_CudaDeviceProperties`` of the device, or None without a usable CUDA device."""
    torch = _torch_cuda()
    if torch is None:
        return None
    return torch.cuda.get_device_properties(torch.device("cuda", device_id))


def get_device_name(device_id: int = 0) -> str | None:
    """The device's name ("NVIDIA H200"), or None without a usable CUDA device."""
    prop = get_cuda_device_properties(device_id)
    return prop.name if prop is not None else None


def get_device_attribute(attr: int, device_id: int = 0) -> int:
    """The integer device attribute ``attr`` (a ``cudaDeviceAttr`` number) of the device."""
    return int(_driver.device_attribute(device_id, int(attr)))


def _in(value: int, format: str) -> int:
    if format not in _FORMATS:
        raise ValueError(f"format must be one of {', '.join(_FORMATS)}, got {format!r}")
    return value // _FORMATS[format]


def get_shared_memory_per_block(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory a block gets without opting in (48 KiB on every current GPU)."""
    return _in(get_device_attribute(cudaDeviceAttrNames.cudaDevAttrMaxSharedMemoryPerBlock, device_id), format)


def get_max_dynamic_shared_size_bytes(device_id: int = 0, format: str = "bytes") -> int:
    """Shared memory of one multiprocessor (the most a block can be given dynamically, before the
    1 KiB the system reserves per block: see ``cudaDevAttrMaxSharedMemoryPerBlockOptin``)."""
    return _in(get_device_attribute(cudaDeviceAttrNames.cudaDevAttrMaxSharedMemoryPerMultiprocessor, device_id),
               format)


def get_persisting_l2_cache_max_size(device_id: int = 0) -> int:
    """Bytes of L2 that can be set aside for persisting accesses."""
    return get_device_attribute(cudaDeviceAttrNames.cudaDevAttrMaxPersistingL2CacheSize, device_id)


def get_num_sms(device_id: int = 0) -> int:
    """The number of streaming multiprocessors (132 on an H100 SXM or H200)."""
    return get_device_attribute(cudaDeviceAttrNames.cudaDevAttrMultiProcessorCount, device_id)


def get_registers_per_block(device_id: int = 0) -> int:
    """32-bit registers available to one block."""
    return get_device_attribute(cudaDeviceAttrNames.cudaDevAttrMaxRegistersPerBlock, device_id)


def get_l2_cache_size(device_id: int = 0) -> int:
    """Bytes of L2 cache."""
    return get_device_attribute(cudaDeviceAttrNames.cudaDevAttrL2CacheSize, device_id)


__all__ = [
    "NoCudaError", "cudaDeviceAttrNames", "get_cuda_device_properties", "get_device_attribute",
    "get_device_name", "get_l2_cache_size", "get_max_dynamic_shared_size_bytes", "get_num_sms",
    "get_persisting_l2_cache_max_size", "get_registers_per_block", "get_shared_memory_per_block",
]
