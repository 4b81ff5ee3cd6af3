"""``CUDA``: an NVIDIA GPU described by its ``sm_XX`` architecture, plus the arch predicates.

Contract: ``CUDA(target)`` accepts what ``tilelang.compile`` accepts ("cuda", "auto", "sm_90a",
"cuda -arch=sm_80", a TVM cuda Target or a dict). With a CUDA device of that architecture present,
its sizes (SMs, shared memory, registers, L2) are queried from it; without one, they come from
``tilelang.targets.gpu_spec`` (the architecture's data-centre part: sm_80 A100, sm_90 H100 SXM),
and an architecture we hold no description of is a ``ValueError``. Peak tensor-core throughput
and DRAM bandwidth always come from ``tilelang.targets`` (the product named by the device).
"""

from __future__ import annotations

from tilelang import targets
from tilelang.carver.arch.arch_base import TileDevice
from tilelang.carver.arch.driver import cuda_driver


def check_sm_version(arch: str) -> int:
    """The compute capability of an ``sm_XX`` string (``"sm_90a"`` -> 90), or -1."""
    try:
        return targets.parse_arch(str(arch))
    except ValueError:
        return -1


def is_cuda_arch(arch: TileDevice) -> bool:
    return isinstance(arch, CUDA)


def is_volta_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and 70 <= arch.sm_version < 80


def is_ampere_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and 80 <= arch.sm_version < 89


def is_ada_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 89


def is_hopper_arch(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and arch.sm_version == 90


def has_mma_support(arch: TileDevice) -> bool:
    return is_cuda_arch(arch) and arch.sm_version >= 80


_DTYPE_ALIASES = {"float8_e4m3": "float8_e4m3fn"}


def is_tensorcore_supported_precision(in_dtype: str, accum_dtype: str, arch: TileDevice) -> bool:
    """Whether ``arch``'s tensor cores multiply ``in_dtype`` operands into ``accum_dtype``."""
    if not is_cuda_arch(arch) or arch.sm_version < 70:
        raise ValueError(f"tensor-core precisions are known for CUDA sm_70 and newer, not {arch!r}")
    a = _DTYPE_ALIASES.get(str(in_dtype), str(in_dtype))
    return targets.mma_problem(a, a, str(accum_dtype), f"sm_{arch.sm_version}") is None


class TensorInstruction:
    """A tensor-core instruction the recommender tiles for: its name and [M, N] shape."""

    def __init__(self, name: str, shape: list[int]):
        self.name = name
        self.shape = shape


def _arch_of(target) -> str:
    from tilelang.engine.lower import normalize_target

    kind = getattr(getattr(target, "kind", None), "name", None)
    if kind is not None:   # a TVM Target
        if kind != "cuda":
            raise ValueError(f"CUDA describes a cuda target, not {kind!r}: use CDNA for hip, CPU for llvm")
        arch = target.attrs.get("arch", None)
        return normalize_target(str(arch) if arch else "cuda")
    return normalize_target(target)


def _live_device_matches(sm_version: int) -> bool:
    torch = cuda_driver._torch_cuda()
    if torch is None:
        return False
    major, minor = torch.cuda.get_device_capability(0)
    return major * 10 + minor == sm_version


class CUDA(TileDevice):
    """An NVIDIA GPU: upstream's fields (``smem_cap``, ``compute_max_core``, ``l2_cache_size_bytes``...)
    plus ``arch``, ``smem_per_sm``, ``smem_per_block_optin``, ``memory_bandwidth_GBps``,
    ``tensor_core_tflops`` and ``from_device`` (whether the sizes were queried from a GPU)."""

    def __init__(self, target="cuda"):
        super().__init__()
        from tvm.target import Target

        self.arch: str = _arch_of(target)
        self.sm_version: int = check_sm_version(self.arch)
        self.target = Target({"kind": "cuda", "arch": self.arch})
        self.platform = "CUDA"
        self.compute_capability = str(self.sm_version)
        self.warp_size = 32
        self.sm_partition = 4
        self.from_device = _live_device_matches(self.sm_version)
        if self.from_device:
            self._query_device()
        else:
            self._describe_arch()
        # upstream's recommender budget and weights (relative, not measured)
        self.max_smem_usage = 2 * self.smem_cap
        self.transaction_size = [32, 128]
        self.bandwidth = [750, 12080]
        self.available_tensor_instructions = None

    def _query_device(self) -> None:
        d = cuda_driver
        self.name = d.get_device_name()
        self.smem_cap = d.get_shared_memory_per_block()
        self.smem_per_sm = d.get_max_dynamic_shared_size_bytes()
        self.smem_per_block_optin = d.get_device_attribute(
            d.cudaDeviceAttrNames.cudaDevAttrMaxSharedMemoryPerBlockOptin)
        self.compute_max_core = d.get_num_sms()
        self.reg_cap = d.get_registers_per_block()
        self.l2_cache_size_bytes = d.get_l2_cache_size()
        self._performance(targets.gpu_spec(self.arch, self.name))

    def _describe_arch(self) -> None:
        spec = targets.gpu_spec(self.arch)
        if spec is None:
            raise ValueError(
                f"no CUDA device of {self.arch} to query, and no built-in description of {self.arch}: "
                f"described without a device are {', '.join(targets.described_archs())}")
        self.name = spec["name"]
        self.smem_cap = 48 * targets.KIB
        self.smem_per_sm = spec["smem_per_sm"]
        self.smem_per_block_optin = targets.smem_per_block(self.arch)
        self.compute_max_core = spec["sm_count"]
        self.reg_cap = spec["registers_per_block"]
        self.l2_cache_size_bytes = spec["l2_bytes"]
        self._performance(spec)

    def _performance(self, spec) -> None:
        if spec is not None:
            self.memory_bandwidth_GBps = spec["dram_bandwidth_gbps"]
            self.tensor_core_tflops = spec["peak_tflops"]

    def get_avaliable_tensorintrin_shapes(self) -> list:
        self.available_tensor_instructions = (TensorInstruction("mma", [16, 16]), TensorInstruction("wmma", [16, 16]))
        return [t.shape for t in self.available_tensor_instructions]

    def __repr__(self) -> str:
        return f"CUDA({self.arch}: {self.name}, {self.compute_max_core} SMs)"


__all__ = [
    "CUDA", "check_sm_version", "has_mma_support", "is_ada_arch", "is_ampere_arch", "is_cuda_arch",
    "is_hopper_arch", "is_tensorcore_supported_precision", "is_volta_arch",
]
