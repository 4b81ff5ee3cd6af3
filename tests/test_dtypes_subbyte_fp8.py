"""Sub-byte tensor arguments, fp8 device support and dtype-dependent T helpers (CPU only).

- packed fp4 / int4 params: a 1-byte torch tensor whose last dim holds two elements per byte binds
  the logical shape and strides (ArgPlan fast path and diagnoser, eager T.const binding);
- fp8 min / max / clamp and fp8 tensor-core gemms compile with nvcc (src/tl/fp8.h);
- T.infinity for bfloat16 / float8_e5m2, T.round(x, "ties-away-from-zero"), unsigned literals
  beyond int32, tcgen05 instruction descriptors.
"""

import shutil

import pytest
import torch

import tilelang
import tilelang.language as T
from tilelang import _ffi_api
from tilelang.artifact import ArtifactError, KernelArtifact, ParamSpec
from tilelang.jit.adapter_args import ArgPlan

SRC = 'extern "C" __global__ void k() {}'
needs_nvcc = pytest.mark.skipif(shutil.which("nvcc") is None and not __import__("os").path.exists(
    "/usr/local/bin/nvcc"), reason="needs nvcc")


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, device, gx, gy, gz, stream, values):
        self.calls.append(((gx, gy, gz), values))


def fp4_artifact(shape, strides=None, out=False, dtype="float4_e2m1fn"):
    syms = sorted({e for e in list(shape) + list(strides or []) if isinstance(e, str)})
    return KernelArtifact(
        name="k", source=SRC, params=[ParamSpec("x", "tensor", dtype, list(shape), strides)],
        kernel_args=["x"] + syms, grid=["1", "1", "1"], block=[32, 1, 1], dynamic_smem=0,
        arch="sm_90a", symbols={}, out_idx=[0] if out else [])


def plan(art):
    rec = Recorder()
    return ArgPlan(art, launch=rec, stream=lambda d: 0, device_type="cpu"), rec


# ---------------------------------------------------------------- packed sub-byte params
@pytest.mark.parametrize("storage", [torch.uint8, torch.int8, getattr(torch, "float4_e2m1fn_x2", torch.uint8)])
def test_packed_fp4_binds_logical_last_dim(storage):
    p, rec = plan(fp4_artifact([4, "n"]))
    p.entry(torch.zeros(4, 16, dtype=storage))
    assert rec.calls[-1][1][1:] == (32,)   # after the data pointer: n = 16 bytes * 2


def test_packed_fp4_binds_logical_strides():
    p, rec = plan(fp4_artifact(["m", 16], ["s", 1]))
    p.entry(torch.zeros(8, 8, dtype=torch.uint8)[::2])
    assert rec.calls[-1][1][1:] == (4, 32)   # m = 4, s = 16 bytes * 2


def test_packed_fp4_rejects_wrong_storage_and_extent():
    p, _ = plan(fp4_artifact(["m", 16]))
    with pytest.raises(TypeError, match="1-byte tensor holding packed float4_e2m1fn"):
        p.entry(torch.zeros(4, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"x.shape\[1\] must be 16, got 18"):
        p.entry(torch.zeros(4, 9, dtype=torch.uint8))


def test_packed_fp4_output_is_allocated_packed():
    p, _ = plan(fp4_artifact([4, 32], out=True))
    out = p.entry()
    assert tuple(out.shape) == (4, 16) and out.element_size() == 1


def test_artifact_rejects_packed_scalar():
    art = fp4_artifact([4])
    art.params.append(ParamSpec("s", "scalar", "float4_e2m1fn", []))
    with pytest.raises(ArtifactError, match="dtype 'float4_e2m1fn'"):
        art.check()


def test_eager_const_binds_logical_packed_shape():
    @tilelang.jit(out_idx=None)
    def kern(A):
        M, K, S = T.const("M K S")
        A: T.StridedTensor((M, K), (S, 1), T.float4_e2m1fn)
        with T.Kernel(1, threads=32):
            T.evaluate(A[0, 0])

    func = kern.get_tir(torch.empty((512, 256), dtype=torch.int8)[::2, :])
    buf = next(iter(func.buffer_map.values()))
    assert [int(x) for x in buf.shape] == [256, 512]
    assert [int(x) for x in buf.strides] == [1024, 1]


# ---------------------------------------------------------------- fp8 device support
def _fp8_binary(dtype, op):
    @T.prim_func
    def main(A: T.Tensor((256,), dtype), B: T.Tensor((256,), dtype), C: T.Tensor((256,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                a, b = A[bx * 128 + i], B[bx * 128 + i]
                C[bx * 128 + i] = (T.max(a, b) if op == "max" else T.min(a, b) if op == "min"
                                   else T.clamp(a, T.cast(-1.0, dtype), T.cast(1.0, dtype)))

    return main


@needs_nvcc
@pytest.mark.parametrize("dtype,op", [("float8_e4m3fn", "min"), ("float8_e5m2", "max"), ("float8_e4m3fn", "clamp")])
def test_fp8_min_max_compile(dtype, op):
    kernel = tilelang.compile(_fp8_binary(dtype, op), target="cuda")
    assert kernel.get_kernel_source().count("min(") + kernel.get_kernel_source().count("max(") >= 1


@needs_nvcc
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2"])
def test_fp8_gemm_compiles_on_tensor_cores(dtype):
    @T.prim_func
    def main(A: T.Tensor((128, 64), dtype), B: T.Tensor((128, 64), dtype), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            A_s = T.alloc_shared((128, 64), dtype)
            B_s = T.alloc_shared((128, 64), dtype)
            C_l = T.alloc_fragment((128, 128), "float32")
            T.clear(C_l)
            T.copy(A, A_s)
            T.copy(B, B_s)
            T.gemm(A_s, B_s, C_l, transpose_B=True)
            T.copy(C_l, C)

    kernel = tilelang.compile(main, target="cuda")
    assert kernel.artifact.cubin or kernel.get_kernel_source()


# ---------------------------------------------------------------- T helpers per dtype
def _fill(dtype, value_fn):
    @T.prim_func
    def main(A: T.Tensor((32,), dtype)):
        with T.Kernel(1, threads=32):
            T.fill(A, value_fn(dtype))

    return main


@pytest.mark.parametrize("dtype,bits", [("bfloat16", "(ushort)32640"), ("float8_e5m2", "(uchar)124")])
def test_infinity_of_types_without_a_literal(dtype, bits):
    expr = T.infinity(dtype)
    assert str(expr.dtype) == dtype
    src = tilelang.compile(_fill(dtype, T.infinity), target="cuda").get_kernel_source()
    assert bits in src


def test_round_ties_away_from_zero():
    @T.prim_func
    def main(A: T.Tensor((16,), "float32"), B: T.Tensor((16,), "float32")):
        with T.Kernel(1, threads=16):
            for i in T.Parallel(16):
                B[i] = T.round(A[i], "ties-away-from-zero")

    src = tilelang.compile(main, target="cuda").get_kernel_source()
    assert "tl::RoundTiesAwayFromZero(" in src
    x = T.int32()
    assert T.round(x, "ties-away-from-zero").same_as(x)
    assert "round" in str(T.round(T.float32(), "ties-to-even"))
    with pytest.raises(ValueError, match="unsupported rounding_mode 'up'"):
        T.round(T.float32(), "up")


def test_unsigned_literal_beyond_int32():
    a = T.uint32()
    assert "4294967295" in str(a & 0xFFFFFFFF)
    b = T.uint64()
    assert str((b | 0xFFFFFFFFFF).dtype) == "uint64"


def test_tcgen05_instruction_descriptors():
    fp4 = T.float4_e2m1_unpacked
    desc = int(_ffi_api.get_tcgen5_instr_desc(128, 128, 32, fp4, "float8_e4m3fn", "float32", True, True, 1, 1))
    assert ((desc >> 7) & 7, (desc >> 10) & 7, (desc >> 4) & 3) == (5, 0, 1)
    assert (desc >> 17) & 0x3F == 16 and (desc >> 24) & 0x1F == 8
    desc = int(_ffi_api.get_tcgen5_blockscaled_instr_desc(128, 64, "float8_e5m2", fp4, False, True, -1, 1, 1, 2))
    assert ((desc >> 7) & 7, (desc >> 10) & 7) == (1, 5)
    assert (desc >> 23) & 1 == 1 and (desc >> 13) & 1 == 1 and (desc >> 15) & 1 == 1
    assert (desc >> 29) & 3 == 1 and (desc >> 4) & 3 == 2
    with pytest.raises(ValueError, match="unsupported operand dtype float16"):
        _ffi_api.get_tcgen5_blockscaled_instr_desc(128, 64, "float16", fp4, True, True, 1, 1, 0, 0)
