"""What the checks need to know about a target GPU, by its ``sm_XX`` architecture string.

Contract: pure data and pure functions; no TVM, no CUDA driver. ``parse_arch`` accepts the
spellings the CLI and the JIT use (``sm_90a``, ``sm_90``, ``sm_80``, ``90``) and returns the
numeric compute capability (``90``) or raises ``ValueError`` for anything else.

Numbers come from the CUDA C Programming Guide, "Technical Specifications per Compute
Capability": the shared memory a single block may opt into, and the tensor-core (mma / wgmma)
operand and accumulator types per generation.
"""

from __future__ import annotations

import re

KIB = 1024
MAX_THREADS_PER_BLOCK = 1024
MAX_REGISTERS_PER_THREAD = 255
VECTOR_BYTES = 16

_ARCH = re.compile(r"^(?:sm_)?(\d{2,3})([af]?)$")

# Maximum dynamic shared memory per block (opt-in), bytes.
_SMEM_PER_BLOCK = {
    70: 96 * KIB, 72: 48 * KIB, 75: 64 * KIB, 80: 163 * KIB, 86: 99 * KIB, 87: 163 * KIB,
    89: 99 * KIB, 90: 227 * KIB, 100: 227 * KIB, 101: 227 * KIB, 103: 227 * KIB,
    110: 227 * KIB, 120: 99 * KIB, 121: 99 * KIB,
}

_GPU_NAMES = {70: "V100", 75: "T4", 80: "A100", 86: "RTX 3090 / A10", 89: "RTX 4090 / L40",
              90: "H100 / H200", 100: "B200", 120: "RTX 5090"}

# Multiprocessors of the architecture's data-centre part (A100, H100 SXM / H200, B200): the blocks
# in flight at one block per SM, for estimates that depend on them (the rasterisation hover).
_SM_COUNTS = {80: 108, 90: 132, 100: 148}

FP8 = ("float8_e4m3fn", "float8_e5m2")
INT8 = ("int8", "uint8")
INT4 = ("int4", "uint4")    # packed two to a byte; mma.sync m16n8k64 (tl::gemm_ss on their bytes)


def parse_arch(arch: str) -> int:
    """``"sm_90a"`` -> 90; ``ValueError`` for a spelling that names no CUDA architecture."""
    match = _ARCH.match(str(arch).strip())
    if match is None:
        raise ValueError(f"unknown target {arch!r}: expected sm_XX, e.g. sm_90a, sm_89 or sm_80")
    return int(match.group(1))


def gpu_name(arch: str) -> str:
    """A human name for the architecture, for messages: ``"sm_90a (H100 / H200)"``."""
    name = _GPU_NAMES.get(parse_arch(arch))
    return f"{arch} ({name})" if name else str(arch)


def smem_per_block(arch: str) -> int:
    """Bytes of shared memory one block can use on ``arch`` (the opt-in maximum)."""
    cc = parse_arch(arch)
    known = [k for k in _SMEM_PER_BLOCK if k <= cc]
    return _SMEM_PER_BLOCK[max(known)] if known else 48 * KIB


def sm_count(arch: str) -> int | None:
    """Multiprocessors of the architecture's data-centre GPU (132 for sm_90a), or None."""
    return _SM_COUNTS.get(parse_arch(arch))


def has_tma(arch: str) -> bool:
    """Whether the Tensor Memory Accelerator exists (sm_90 and newer)."""
    return parse_arch(arch) >= 90


def _accumulators(a: str, cc: int) -> tuple[tuple[str, ...], str | None]:
    """(accumulator dtypes the tensor cores offer for operand dtype ``a``, reason if none)."""
    if a == "float16":
        return ("float32", "float16"), None if cc >= 70 else "fp16 mma needs sm_70"
    if a == "bfloat16":
        return ("float32",), None if cc >= 80 else "bf16 mma needs sm_80 or newer"
    if a == "float32":
        return ("float32",), None if cc >= 80 else "tf32 mma needs sm_80 or newer"
    if a == "float64":
        return ("float64",), None if cc >= 80 else "fp64 mma needs sm_80 or newer"
    if a in INT8:
        return ("int32",), None if cc >= 75 else "int8 mma needs sm_75 or newer"
    if a in INT4:
        return ("int32",), None if cc >= 80 else "int4 mma needs sm_80 or newer"
    if a in FP8:   # wgmma also accumulates 8-bit floats into half (sm_90's mma.sync into float only here)
        return ("float32", "float16") if cc >= 90 else ("float32",), \
            None if cc >= 89 else "fp8 mma needs sm_89 (Ada) or sm_90 (Hopper)"
    return (), f"the tensor cores have no instruction for {a} operands"


def mma_problem(a: str, b: str, c: str, arch: str) -> tuple[str, str] | None:
    """Why ``A: a, B: b, C: c`` has no tensor-core instruction on ``arch``, as (operand, reason).

    ``operand`` is ``"B"`` when the operand types disagree, ``"A"`` when the operand type has no
    instruction, ``"C"`` when the accumulator type is the problem; ``None`` when supported.
    """
    cc = parse_arch(arch)
    mixed_fp8 = a in FP8 and b in FP8
    if a != b and not mixed_fp8 and not (a in INT8 and b in INT8) and not (a in INT4 and b in INT4):
        return "B", f"A is {a} but B is {b}: both operands of one mma must have the same type"
    accums, reason = _accumulators(a, cc)
    if reason is not None:
        return "A", f"{reason} (target {gpu_name(arch)})"
    if c not in accums:
        allowed = " or ".join(accums)
        return "C", f"{a} operands accumulate into {allowed}, not {c}"
    return None


# Operand -> accumulator types the SIMT fallback of ``T.gemm`` (``tl::gemm_fma_ss``) computes.
_FMA_TYPES = {"float64": ("float64",), "float32": ("float32", "float64"), "bfloat16": ("float32",),
              "float16": ("float32", "float16"), "int32": ("int32",), "int8": ("int32",), "uint8": ("int32",)}


def gemm_uses_fma(a: str, b: str, c: str, arch: str) -> bool:
    """Whether ``T.gemm`` with ``A: a, B: b, C: c`` on ``arch`` lowers to the CUDA-core FMA fallback.

    True when the types are ones the fallback computes and our tensor-core library has no
    instruction for them on ``arch``: fp64 always (no DMMA path), fp32 / bf16 before sm_80
    (Turing has neither tf32 nor bf16 mma), int8 before sm_80 (our int8 mma is m16n8k32), int32
    operands anywhere. Mixed operand types and
    accumulators the tensor cores would refuse for supported operands stay TL0102 errors.
    """
    if a != b or c not in _FMA_TYPES.get(a, ()):
        return False
    if a in ("float64", "int32"):
        return True
    if a in INT8 and parse_arch(arch) < 80:     # our int8 mma is m16n8k32 (sm_80)
        return True
    return mma_problem(a, b, c, arch) is not None


def mma_k_granularity(dtype: str) -> int:
    """The K extent one mma instruction consumes for operands of ``dtype`` (16 for 16-bit types)."""
    if dtype in INT8 or dtype in FP8:
        return 32
    if dtype in INT4:
        return 64
    if dtype == "float32":
        return 8
    if dtype == "float64":
        return 4
    return 16


# ----- whole-GPU facts (the performance model of tilelang.carver.arch / tilelang.tools.Analyzer) -----
# Per product, from NVIDIA's data sheets and the CUDA C Programming Guide; ``peak_tflops`` are dense
# tensor-core rates by operand dtype (float32 means TF32 mma; fp8 and int8 in TFLOP/s and TOP/s).
# Memory sizes in bytes, bandwidth in GB/s (10**9 bytes per second).
_A100 = {"name": "A100-SXM4-80GB", "sm_count": _SM_COUNTS[80], "smem_per_sm": 164 * KIB,
         "registers_per_sm": 65536, "registers_per_block": 65536, "max_threads_per_sm": 2048,
         "l2_bytes": 40 * KIB * KIB, "dram_bandwidth_gbps": 2039.0, "boost_clock_ghz": 1.41,
         "peak_tflops": {"float16": 312.0, "bfloat16": 312.0, "float32": 156.0, "float64": 19.5,
                         "int8": 624.0, "uint8": 624.0}}
_H100 = {"name": "H100-SXM5-80GB", "sm_count": _SM_COUNTS[90], "smem_per_sm": 228 * KIB,
         "registers_per_sm": 65536, "registers_per_block": 65536, "max_threads_per_sm": 2048,
         "l2_bytes": 50 * KIB * KIB, "dram_bandwidth_gbps": 3350.0, "boost_clock_ghz": 1.98,
         "peak_tflops": {"float16": 989.4, "bfloat16": 989.4, "float32": 494.7, "float64": 66.9,
                         "float8_e4m3fn": 1978.9, "float8_e5m2": 1978.9, "int8": 1978.9, "uint8": 1978.9}}
# H200: the H100 SXM chip (same SMs, clocks and tensor cores) with 141 GB of HBM3e at 4.8 TB/s.
_H200 = dict(_H100, name="H200-SXM-141GB", dram_bandwidth_gbps=4800.0)

# H100 PCIe: 114 SMs at lower clocks, HBM2e at 2.0 TB/s.
_H100_PCIE = dict(_H100, name="H100-PCIe-80GB", sm_count=114, dram_bandwidth_gbps=2000.0, boost_clock_ghz=1.755,
                  peak_tflops={"float16": 756.0, "bfloat16": 756.0, "float32": 378.0, "float64": 51.2,
                               "float8_e4m3fn": 1513.0, "float8_e5m2": 1513.0, "int8": 1513.0, "uint8": 1513.0})
_A100_40GB = dict(_A100, name="A100-40GB", dram_bandwidth_gbps=1555.0)
_A100_PCIE_80GB = dict(_A100, name="A100-PCIe-80GB", dram_bandwidth_gbps=1935.0)

_GPU_SPECS = {80: _A100, 90: _H100}        # the part an architecture stands for when no GPU is present
# (substring of the device's name as the driver reports it, arch, facts), first match wins
_GPU_PRODUCTS = (("H200", 90, _H200), ("H100 PCIe", 90, _H100_PCIE), ("H100", 90, _H100),
                 ("A100 80GB PCIe", 80, _A100_PCIE_80GB), ("40GB", 80, _A100_40GB), ("A100", 80, _A100))


def gpu_spec(arch: str, device_name: str | None = None) -> dict | None:
    """The facts of the GPU ``arch`` describes (``device_name``, e.g. torch's "NVIDIA H200", picks
    the product when several share the architecture), or None when we hold none for it."""
    cc = parse_arch(arch)
    for key, product_cc, spec in _GPU_PRODUCTS:
        if device_name and key in device_name and product_cc == cc:
            return _copy(spec)
    spec = _GPU_SPECS.get(cc)
    return _copy(spec) if spec is not None else None


def _copy(spec: dict) -> dict:
    return dict(spec, peak_tflops=dict(spec["peak_tflops"]))


def described_archs() -> list[str]:
    """The architectures ``gpu_spec`` knows without a device, as ``sm_XX``."""
    return [f"sm_{cc}" for cc in sorted(_GPU_SPECS)]


# AMD Instinct (CDNA) parts, by their LLVM processor name: described, not compiled for.
_AMD_SPECS = {
    "gfx942": {"name": "MI300X", "sm_count": 304, "smem_per_sm": 64 * KIB, "warp_size": 64,
               "l2_bytes": 32 * KIB * KIB, "dram_bandwidth_gbps": 5300.0,
               "peak_tflops": {"float16": 1307.4, "bfloat16": 1307.4, "float32": 163.4, "float64": 163.4,
                               "float8_e4m3fnuz": 2614.9, "float8_e5m2fnuz": 2614.9, "int8": 2614.9}},
}


def amd_spec(mcpu: str) -> dict | None:
    """The facts of the AMD GPU ``mcpu`` (``"gfx942"``) names, or None."""
    spec = _AMD_SPECS.get(str(mcpu).strip())
    return _copy(spec) if spec is not None else None
