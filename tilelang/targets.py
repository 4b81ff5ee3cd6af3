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
    if a in FP8:
        return ("float32",), None if cc >= 89 else "fp8 mma needs sm_89 (Ada) or sm_90 (Hopper)"
    return (), f"the tensor cores have no instruction for {a} operands"


def mma_problem(a: str, b: str, c: str, arch: str) -> tuple[str, str] | None:
    """Why ``A: a, B: b, C: c`` has no tensor-core instruction on ``arch``, as (operand, reason).

    ``operand`` is ``"B"`` when the operand types disagree, ``"A"`` when the operand type has no
    instruction, ``"C"`` when the accumulator type is the problem; ``None`` when supported.
    """
    cc = parse_arch(arch)
    mixed_fp8 = a in FP8 and b in FP8
    if a != b and not mixed_fp8 and not (a in INT8 and b in INT8):
        return "B", f"A is {a} but B is {b}: both operands of one mma must have the same type"
    accums, reason = _accumulators(a, cc)
    if reason is not None:
        return "A", f"{reason} (target {gpu_name(arch)})"
    if c not in accums:
        allowed = " or ".join(accums)
        return "C", f"{a} operands accumulate into {allowed}, not {c}"
    return None


def mma_k_granularity(dtype: str) -> int:
    """The K extent one mma instruction consumes for operands of ``dtype`` (16 for 16-bit types)."""
    if dtype in INT8 or dtype in FP8:
        return 32
    if dtype == "float32":
        return 8
    if dtype == "float64":
        return 4
    return 16
