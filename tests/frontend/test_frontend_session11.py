"""Front end / jit / runtime behaviour added for upstream's tests (session 11), checked on CPU:
jit argument hashing and pytest collection, the rewritten-source view (tilelang.language.eager),
artifact.device_mod, int64 symbols, host-checked T.assume, the packed->unpacked fp4 SIMT copy
ban, T.extract_lane's element conversions, deferred rs/sat=False rejection, and
tilelang.backend / tilelang.cuda.backend."""

import pytest
import torch
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang import tvm
from tilelang.diagnostics import TileLangCompileError
from tilelang.jit.adapter_args import ArgPlan


@tilelang.jit
def _lazy(hidden: int, opts=None):
    @T.prim_func
    def kernel():
        T.evaluate(0)

    return kernel


def test_lazy_jit_refuses_unhashable_arguments():
    with pytest.raises(TypeError, match=r"argument 'opts' is unhashable \(list"):
        _lazy(512, opts=[1, 2])


def test_jit_objects_are_not_collected_as_tests():
    @tilelang.jit
    def test_eager(A: T.Tensor((16,), T.float32)):
        A[0] = 1.0

    assert _lazy.__test__ is False and test_eager.__test__ is False
    assert callable(test_eager) and test_eager.__wrapped__.__name__ == "test_eager"


def _copy_kernel():
    @T.prim_func
    def main(A: T.Tensor((128,), T.float32), B: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as _:
            for i in T.Parallel(128):
                B[i] = A[i]

    return main


def test_artifact_device_mod_lists_the_kernels():
    art = tilelang.lower(_copy_kernel(), target="sm_90a")
    names = [g.name_hint for g in art.device_mod.functions]
    assert names == [art.name]
    # (one block: a single wave, engine/lower._single_wave_min_blocks)
    assert f"void __launch_bounds__(128, 1) {art.name}(" in art.kernel_source


def test_eager_ast_mutate_shows_the_rewritten_source():
    from tilelang.language.eager import PrimFunc, const, macro, prim_func  # noqa: F401
    from tilelang.language.eager.ast import BaseBuilder, mutate  # noqa: F401

    def demo(A: T.Tensor[(1,), T.int32], B: T.Tensor[(1,), T.int32]):
        value = A[0]
        value -= 1
        B[0] = value

    assert "__tb.aug_assign('Sub', value, 1, name='value')" in mutate(demo).source

    @T.prim_func
    def main(A: T.Tensor[(1,), T.int32], B: T.Tensor[(1,), T.int32]):
        x = A[0]
        x -= 1
        B[0] = x

    assert isinstance(main, PrimFunc)


def test_int64_symbol_takes_int64_values():
    n = T.symbolic("n", "int64")

    @T.prim_func
    def main(x: T.Tensor[n, T.bfloat16]):
        with T.Kernel(T.ceildiv(n, 512), threads=128) as bx:
            for i in T.Parallel(512):
                x[bx * 512 + i] = 1.0

    art = tilelang.lower(main, target="sm_90a")
    assert "int64_t n" in art.kernel_source
    plan = ArgPlan(art, launch=lambda *a: None, stream=lambda d: 0, device_type="cpu")
    assert plan.sym_ranges["n"] == (-(2**63), 2**63 - 1)
    assert plan.art.kernel_arg_types == ["ptr", "int64"]      # packed as 8 bytes
    assert "_IMAX + 1" not in plan.source                     # no 2**31-element cap on x


def test_host_evaluable_assume_is_checked_before_the_launch():
    N = T.dynamic("N")

    @T.prim_func
    def main(A: T.Tensor((N,), T.float32), l: T.int32):
        with T.Kernel(1, threads=32):
            T.assume(N % 4 == 0)
            x = T.alloc_var(T.int32)
            x = l
            T.assume(x >= 0)          # device value: not checked on the host
            tx = T.get_thread_binding()
            if tx < N:
                A[tx] = 1.0

    art = tilelang.lower(main, target="sm_90a")
    assert art.host_asserts == [{"expr": "((N % 4) == 0)", "text": "N % 4 == 0"}]
    calls = []
    plan = ArgPlan(art, launch=lambda *a: calls.append(a), stream=lambda d: 0, device_type="cpu")
    plan.entry(torch.empty(8), 1)
    assert len(calls) == 1
    with pytest.raises(RuntimeError, match=r"Assume: N % 4 == 0 does not hold for this call \(N = 6\)"):
        plan.entry(torch.empty(6), 1)
    assert len(calls) == 1
    again = type(art).from_json(art.to_json())
    assert again.host_asserts == art.host_asserts


def test_packed_fp4_to_unpacked_simt_copy_is_refused():
    @T.prim_func
    def main(A: T.Tensor((64, 128), T.float4_e2m1fn)):
        with T.Kernel(2, 2, threads=128) as (bx, by):
            A_shared = T.alloc_shared((32, 64), T.float4_e2m1_unpacked)
            T.copy(A[by * 32, bx * 64], A_shared)

    with pytest.raises(tvm.error.InternalError, match="SIMT copy from packed global float4_e2m1fn A"):
        tilelang.lower(main, target="sm_90a")


@pytest.mark.parametrize("dtype,vector,elem", [(T.bfloat16, T.bfloat16x2, "bfloat16_t"),
                                               (T.float16, T.float16x2, "half_t")])
def test_extract_lane_converts_to_the_element_type(dtype, vector, elem):
    @T.prim_func
    def main(A: T.Tensor((2,), dtype), B: T.Tensor((2,), dtype)):
        with T.Kernel(1, threads=1):
            packed = T.alloc_var(vector)
            packed = vector(A[0], A[1])
            B[0] = T.extract_lane(packed, 0)
            B[1] = T.extract_lane(packed, 1)

    src = tilelang.lower(main, target="sm_90a").kernel_source
    assert f"B[0] = {elem}((packed).x);" in src and f"B[1] = {elem}((packed).y);" in src
    assert isinstance(T.extract_lane(tirx.Var("v", str(vector)), 0), tirx.Shuffle)


def test_rs_cast_without_saturation_is_refused_by_the_compile():
    @T.prim_func
    def main(A: T.Tensor[(128,), "float32"], B: T.Tensor[(128,), "float16"]):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(128):
                B[i] = T.cast(A[i], "float16", round="rs", sat=False, rbits=T.uint32(7))

    with pytest.raises(TileLangCompileError, match="sat=false is not supported") as err:
        tilelang.lower(main, target="sm_100a")
    assert err.value.diagnostics[0].span is not None


def test_backend_target_code_list_reaches_nvcc(monkeypatch):
    from tilelang.backend.target import determine_target, target_code
    from tilelang.cuda import backend as cuda_backend

    target = determine_target({"kind": "cuda", "arch": "sm_100f", "code": ["sm_100a", "sm_103a"]},
                              return_object=True)
    assert str(target.attrs["arch"]) == "sm_100f" and target_code(target) == ["sm_100a", "sm_103a"]
    assert str(determine_target("sm_90a", return_object=True).attrs["arch"]) == "sm_90a"
    with pytest.raises(ValueError, match="CUDA target code"):
        determine_target({"kind": "cuda", "arch": "sm_100f", "code": "sm_100a"})
    with pytest.raises(ValueError, match="CUDA GPUs"):
        determine_target({"kind": "llvm"})

    seen = {}

    def fake(code, target_format, arch, options=None, verbose=False):
        seen.update(format=target_format, arch=arch)
        return bytearray(b"x")

    monkeypatch.setattr(cuda_backend.nvcc, "compile_cuda", fake)
    cuda_backend.tilelang_callback_cuda_compile("__global__ void k() {}", target)
    assert seen == {"format": "fatbin", "arch": ["-gencode", "arch=compute_100f,code=[sm_100a,sm_103a]"]}
    cuda_backend.tilelang_callback_cuda_compile("__global__ void k() {}", determine_target("sm_90a", True))
    assert seen == {"format": "cubin", "arch": ["-arch=sm_90a"]}
