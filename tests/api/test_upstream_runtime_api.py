"""Upstream TileLang's runtime-side names behave like upstream's (issue 17): tensor supply,
testing helpers, the perf-regression harness, post-processing callbacks, contrib.nvcc, JIT phase
logging, the factory's ``func`` binding, par_compile and the TVM-fork names."""

import logging
import sys
from pathlib import Path

import pytest
import torch

import tilelang
import tilelang.language as T
import tilelang.testing
from tilelang.transform.pass_config import PassConfigKey
from tilelang.utils.tensor import TensorSupplyType, get_tensor_supply

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))


# ------------------------------------------------------------------ tensor supply
def test_tensor_supply_distributions_are_upstreams():
    auto = get_tensor_supply(TensorSupplyType.Auto)
    x = auto((4096,), torch.float16, "cpu")
    assert x.dtype == torch.float16 and -1 <= x.min() and x.max() <= 1 and x.unique().numel() > 100
    ints = get_tensor_supply(TensorSupplyType.Integer)((4096,), "float32", "cpu")
    assert set(ints.unique().tolist()) <= {-2.0, -1.0, 0.0, 1.0, 2.0}
    assert set(get_tensor_supply()((512,), torch.uint8, "cpu").unique().tolist()) <= {0, 1, 2}
    assert not get_tensor_supply(TensorSupplyType.Zero)((3,), T.float32, "cpu").any()
    assert get_tensor_supply(TensorSupplyType.One)((3,), "int32", "cpu").tolist() == [1, 1, 1]
    assert tilelang.TensorSupplyType is TensorSupplyType


def test_tensor_supply_takes_a_kernel_parameter_and_refuses_symbolic_shapes():
    from tilelang.artifact import ParamSpec

    supply = get_tensor_supply(TensorSupplyType.Randn)
    t = supply(ParamSpec("A", "tensor", "bfloat16", [2, 3]), device="cpu")
    assert t.shape == (2, 3) and t.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="static"):
        supply(ParamSpec("A", "tensor", "float16", ["m", 3]), device="cpu")


# ------------------------------------------------------------------ testing helpers
def test_requires_package_and_backends_we_do_not_target():
    assert tilelang.testing.requires_package("torch").args == (False,)
    mark = tilelang.testing.requires_package("torch", "no_such_package_xyz")
    assert mark.args == (True,) and "no_such_package_xyz" in mark.kwargs["reason"]

    def f():
        pass

    for deco in (tilelang.testing.requires_rocm, tilelang.testing.requires_metal, tilelang.testing.requires_cdna):
        (mark,) = deco(f).pytestmark[-1:]
        assert mark.name == "skip" and "CUDA" in mark.kwargs["reason"]
    assert tilelang.testing.requires_cuda_or_cdna(f).pytestmark[-1].name == "skipif"
    # as marks of a parameter (upstream PR #2807: ``pytest.param("hip", marks=requires_rocm.marks())``)
    (cuda,), (rocm,) = tilelang.testing.requires_cuda.marks(), tilelang.testing.requires_rocm.marks()
    assert cuda.name == "skipif" and rocm.name == "skip"
    assert pytest.param("hip", marks=list(tilelang.testing.requires_rocm.marks())).marks[0].name == "skip"


def test_perf_regression_harness(capsys, monkeypatch):
    from tilelang.testing import perf_regression

    namespace = {}
    exec("import tilelang.testing\n"
         "def regression_fast():\n    tilelang.testing.process_func(lambda n: n / 2, 'fast', n=3)\n"
         "def regression_slow():\n    tilelang.testing.process_func(lambda: 4.0, 'slow')\n"
         "def helper():\n    raise AssertionError('not a regression case')\n"
         "tilelang.testing.regression(verbose=False)\n", namespace)
    assert capsys.readouterr().out.splitlines() == ["fast: 1.5", "slow: 4.0"]
    monkeypatch.setenv("TL_PERF_REGRESSION_FORMAT", "json")
    monkeypatch.setenv("TL_PERF_REGRESSION_ONLY", "slow")
    exec("tilelang.testing.regression(verbose=False)", namespace)
    line = capsys.readouterr().out.strip()
    assert line == perf_regression.RESULTS_JSON_PREFIX + '[{"name":"slow","latency":4.0,"case":"slow"}]'
    with pytest.warns(RuntimeWarning, match="dropped"):
        tilelang.testing.process_func(lambda: 0.0, "zero")


# ------------------------------------------------------------------ callbacks, nvcc, diagnostics
def test_cuda_postproc_callback_edits_freshly_generated_source():
    import softplus
    import tvm_ffi

    from tilelang.engine.callback import register_cuda_postproc_callback

    seen = []

    @register_cuda_postproc_callback
    def mark(code, target):
        seen.append(str(target.attrs["arch"]))
        return "// reviewed\n" + code

    try:
        art = tilelang.lower(softplus.softplus.get_prim_func(128, 128), "sm_80")
        assert art.source.startswith("// reviewed\n") and seen == ["sm_80"]
        with pytest.raises(Exception, match="already"):
            register_cuda_postproc_callback(override=False)(lambda code, _: code)
    finally:
        tvm_ffi.register_global_func("tilelang_callback_cuda_postproc", f=lambda code, _: code, override=True)
    assert not tilelang.lower(softplus.softplus.get_prim_func(128, 128), "sm_80").source.startswith("//")


def test_contrib_nvcc_helpers_and_a_real_compile():
    from tvm.target import Target

    from tilelang.contrib import nvcc

    assert nvcc.get_target_code_list(None) == [] and nvcc.get_target_code_list(["sm_100a"]) == ["sm_100a"]
    for bad in ("sm_100a", [], ["sm100a"], ["compute_100f"]):
        with pytest.raises(ValueError, match="CUDA target code"):
            nvcc.get_target_code_list(bad)
    target = Target({"kind": "cuda", "arch": "sm_90a"})
    assert nvcc.get_target_compute_version(target) == "9.0" and nvcc.get_target_arch("9.0") == "90a"
    assert nvcc.get_target_arch((8, 6)) == "86" and nvcc.parse_compute_version("8.9") == (8, 9)
    assert nvcc.have_bf16("8.0") and not nvcc.have_fp8("8.6") and nvcc.have_tma(target)
    with target:
        cubin = nvcc.compile_cuda('extern "C" __global__ void k(float* a) { a[0] = 1.0f; }', target_format="cubin")
    assert bytes(cubin[:4]) == b"\x7fELF"


def test_nvcc_timeout_kills_the_compile(monkeypatch):
    from tvm.target import Target

    from tilelang.contrib import nvcc
    from tilelang.jit import nvcc as toolchain

    monkeypatch.setenv("TILELANG_COMPILE_TIMEOUT_SECONDS", "0.001")
    with Target({"kind": "cuda", "arch": "sm_80"}), pytest.raises(RuntimeError, match="timed out after 0.001"):
        nvcc.compile_cuda('extern "C" __global__ void k() {}', target_format="ptx")
    with pytest.raises(toolchain.NVCCError, match="timed out after 0.001 seconds"):
        toolchain.compile_cubin('extern "C" __global__ void k() {}', "sm_80")


def test_jit_phase_logging(caplog):
    from tilelang.jit.diagnostics import jit_phase

    caplog.set_level(logging.INFO, logger="tilelang.jit.diagnostics")
    with jit_phase("unit", enabled=True, kernel="k", target="sm_90a"):
        pass
    with pytest.raises(ValueError, match="boom"), jit_phase("bad", enabled=True, backend="nvcc"):
        raise ValueError("boom")
    with jit_phase("quiet", enabled=False):
        pass
    messages = [r.getMessage() for r in caplog.records]
    assert messages[0].startswith("TileLang JIT phase start: unit") and "'sm_90a'" in messages[0]
    assert messages[1].startswith("TileLang JIT phase done: unit")
    assert "failed: bad" in messages[3] and "ValueError: boom" in messages[3] and "backend='nvcc'" in messages[3]
    assert len(messages) == 4


# ------------------------------------------------------------------ the jit factory
@tilelang.jit
def _factory(hidden: int, stride: int, flag: bool = False, opts=[1, 2]):  # noqa: B006 - upstream's test shape
    @T.prim_func
    def kernel(X: T.Tensor((hidden,), "float32")):
        with T.Kernel(1, threads=32) as _:
            for i in T.Parallel(hidden):
                X[i] = X[i] * stride

    return kernel


def test_factory_binding_canonicalises_call_forms():
    func = _factory.func
    key = ((8, 2, False, (list, (1, 2))), None)
    assert func.parse_args(8, 2) == (key, {}) and func.parse_args(stride=2, hidden=8, flag=False) == (key, {})
    with pytest.raises(TypeError, match="multiple values"):
        func.parse_args(8, hidden=8, stride=2)
    with pytest.raises(TypeError, match="missing a required argument: 'stride'"):
        func.parse_args(hidden=8)
    extra, _ = func.parse_args(8, 2, M=4)
    assert extra == ((8, 2, False, (list, (1, 2)), (("M", 4),)), None)
    with pytest.raises(TypeError, match="Unsupported unhashable"):
        func.parse_args(8, 2, opts=bytearray(b"x"))
    p1, tensors, kwargs = func._parse_phase1_key(8, 2, opts={"a": [1]})
    hash(p1)
    assert tensors == {} and kwargs == {"hidden": 8, "stride": 2, "flag": False, "opts": {"a": [1]}}
    assert _factory.mode == "lazy" and func.__name__ == "_factory"


@pytest.fixture
def fake_nvcc(monkeypatch, tmp_path):
    from tilelang.jit import nvcc

    calls = []
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(nvcc, "compile_cubin", lambda source, arch, flags=(), include_dirs=(): calls.append(arch)
                        or b"\x7fELF fake")
    return calls


def test_factory_kernels_are_shared_between_call_forms(fake_nvcc):
    a = _factory(16, 3)
    assert _factory(hidden=16, stride=3) is a and _factory(16, 3, False) is a
    assert _factory.get_kernel_source(16, 3) == a.get_kernel_source()
    assert _factory.compile(16, 3).get_kernel_source() == a.get_kernel_source()
    assert "X" in _factory.get_tir(16, 3).script()


def test_par_compile_keeps_order_and_can_skip_failures(fake_nvcc, tmp_path):
    kernels = _factory.par_compile([(32, 2), {"hidden": 64, "stride": 5}], num_workers=2)
    assert [k.params[0].shape for k in kernels] == [[32], [64]]
    out = tilelang.par_compile([_factory.get_tir(8, 1), "not a prim_func"], ignore_error=True)
    assert out[0] is not None and out[1] is None
    configs = {PassConfigKey.CUDA_KERNELS_OUTPUT_DIR: str(tmp_path / "kernels")}
    kernel = tilelang.compile(_factory.get_tir(8, 1), pass_configs=configs)
    assert (tmp_path / "kernels" / f"{kernel.name}.cu").read_text() == kernel.get_kernel_source()


# ------------------------------------------------------------------ profiler, TVM names, misc
def test_profiler_takes_upstreams_keywords():
    import softplus

    from tilelang.profiler import Profiler, do_bench

    kernel = tilelang.compile(softplus.softplus.get_prim_func(128, 128), target="sm_80")
    profiler = Profiler(kernel, tensor_supply_type=TensorSupplyType.Normal)
    with pytest.raises(ValueError, match="unknown profiler backend"):
        do_bench(lambda: None, backend="nvtx")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError, match="no CUDA device"):
            profiler.do_bench(func=lambda *a: None, backend="cupti", n_repeat=3)


def test_tvm_fork_names_map_onto_apache_tvm():
    import tvm
    from tvm import arith, tirx
    from tvm.tirx.stmt_functor import post_order_visit, substitute

    x = tirx.Var("x", "int32")
    assert str(arith.Analyzer().simplify(x * 2 + x)) == "x * 3"
    assert isinstance(x + 1, tirx.PrimExpr) and tvm.tir is tirx
    seen = []
    post_order_visit(tirx.Evaluate(x + 1), lambda n: seen.append(type(n).__name__))
    assert seen == ["Var", "IntImm", "Add", "Evaluate"]
    replaced = substitute(x + 1, {x: tirx.const(2, "int32")})
    assert isinstance(replaced, tirx.Add) and int(replaced.a) == 2 and tvm.ir.structural_equal(replaced, replaced)
    assert tvm.testing.requires_package("torch").name == "skipif" and issubclass(tvm.TVMError, RuntimeError)


def test_ir_transform_and_primfunc_buffer_map_of_the_fork():
    """TileOPs' trace passes (imported by its dense GEMM module): ``ir_transform`` rebuilding a
    body, ``tvm.ir.PrimExpr``, and ``PrimFunc(..., buffer_map=...)``."""
    import tvm
    from tvm import tirx
    from tvm.tirx.stmt_functor import ir_transform

    assert tvm.ir.PrimExpr is tvm.ir.Expr
    buf = tirx.decl_buffer((4,), "float32", "A")
    i = tirx.Var("i", "int32")
    store = tirx.BufferStore(buf, tirx.BufferLoad(buf, [i]) + tirx.FloatImm("float32", 1.0), [i])
    body = tirx.For(i, tirx.IntImm("int32", 0), tirx.IntImm("int32", 4), tirx.ForKind.SERIAL,
                    tirx.SeqStmt([store, tirx.Evaluate(tirx.IntImm("int32", 7))]))
    seen = []
    gone = ir_transform(body, None, lambda n: (seen.append(n), tirx.Evaluate(tirx.IntImm("int32", 0)))[1],
                        ["tir.BufferStore"])
    assert len(seen) == 1 and "A[i]" not in str(gone) and "T.evaluate(7)" in str(gone)
    two = ir_transform(body, None, lambda e: tirx.FloatImm("float32", 2.0) if isinstance(e, tirx.FloatImm) else None)
    assert "T.float32(2.0)" in str(two) and "T.float32(1.0)" in str(body)
    skipped = ir_transform(body, lambda n: n if isinstance(n, tirx.BufferStore) else None,
                           lambda e: tirx.FloatImm("float32", 2.0) if isinstance(e, tirx.FloatImm) else None)
    assert "T.float32(1.0)" in str(skipped)       # a node preorder returns is not entered
    func = tirx.PrimFunc([buf], body)
    again = tirx.PrimFunc(params=list(func.params), body=body, buffer_map=dict(func.buffer_map), attrs=func.attrs)
    assert [p.same_as(buf) for p in again.params] == [True]


def test_primfunc_of_buffer_data_params_and_a_failed_constructor_repr():
    """The fork's hand-built functions name a buffer parameter by ``buf.data`` (its pointer Var;
    0.27 spells it as a fresh ``tirx.buffer_data(buf)`` call each time): upstream's access_ptr
    test builds ``PrimFunc([buf.data], body, buffer_map={buf.data: buf})``. That was a TypeError,
    and pytest's traceback then printed ``self`` of the half-built PrimFunc, whose null handle
    killed the process (signal 11): the repr of an unconstructed node now names its type."""
    from tvm import tirx

    buf = tirx.decl_buffer((8, 8), "float16", name="A")
    body = tirx.Evaluate(tirx.IntImm("int32", 0))
    for func in (tirx.PrimFunc([buf.data], body, buffer_map={buf.data: buf}), tirx.PrimFunc([buf.data], body)):
        assert [p.same_as(buf) for p in func.params] == [True]
    assert repr(tirx.PrimFunc.__new__(tirx.PrimFunc)) == "<PrimFunc (not constructed)>"
    with pytest.raises(TypeError, match="params can only contain Var or Buffer"):
        tirx.PrimFunc(["A"], body)


def test_tirx_call_checks_and_builds_in_the_forks_argument_order():
    from tvm import tirx

    one = tirx.FloatImm("float32", 1.0)
    built = tirx.Call("float32", "tirx.exp", [one])          # (dtype, op, args), as upstream's fork
    assert isinstance(built, tirx.Call) and str(built.dtype) == "float32" and built.op.name == "tirx.exp"
    assert isinstance(T.exp(one), tirx.Call) and not isinstance(one, tirx.Call)
    assert issubclass(type(built), tirx.Call)


def test_small_upstream_names():
    from tilelang.autotuner.param import AutotuneResult, CompileArgs, ProfileArgs
    from tilelang.tileop.base import GemmWarpPolicy

    assert CompileArgs is tilelang.autotuner.CompileArgs and ProfileArgs().skip_check is False
    assert AutotuneResult is tilelang.autotuner.AutotuneResult and GemmWarpPolicy is T.GemmWarpPolicy
    assert tilelang.math.next_power_of_2(17) == 32 and tilelang.cdiv(7, 2) == 4 and tilelang.DataType("float16")
    tilelang.set_log_level("ERROR")
    assert logging.getLogger("tilelang").level == logging.ERROR
    with pytest.raises(ValueError, match="log level"):
        tilelang.set_log_level("LOUD")
    tilelang.set_log_level("WARNING")


def test_cuda_include_dirs_follow_the_toolkit_layout(tmp_path):
    from tilelang.jit.adapter.nvrtc.include_paths import discover_cuda_include_paths
    from tilelang.jit.nvcc import cuda_include_dirs

    assert discover_cuda_include_paths is cuda_include_dirs
    home = str(tmp_path)
    assert cuda_include_dirs(home, machine="x86_64", system="linux") == [   # nothing there yet
        f"{home}/include", f"{home}/targets/x86_64-linux/include", f"{home}/targets/x86_64-linux/include/cccl"]
    (tmp_path / "include" / "cccl").mkdir(parents=True)
    (tmp_path / "targets" / "sbsa-linux" / "include").mkdir(parents=True)
    assert cuda_include_dirs(home, machine="aarch64", system="linux") == [
        f"{home}/include", f"{home}/include/cccl", f"{home}/targets/sbsa-linux/include"]
    assert cuda_include_dirs(home, system="win32") == [f"{home}/include", f"{home}/include/cccl"]


def test_jit_kernel_and_artifact_attributes_upstream_code_reads(tmp_path):
    import softplus

    func = softplus.softplus.get_prim_func(128, 128)
    art = tilelang.lower(func, target="sm_80", enable_device_compile=True, target_host="c")
    assert art.kernel_source == art.source and art.cubin[:4] == b"\x7fELF"
    kernel = tilelang.compile(func, target="sm_80", pass_configs={PassConfigKey.TL_ENABLE_FAST_MATH: True})
    assert kernel.kernel_source == kernel.get_kernel_source() and kernel.target == "sm_80"
    assert kernel.compile_flags == ["--use_fast_math"]
    host = kernel.get_host_source()
    assert host.startswith("kernel: ") and "grid:" in host and "generated argument checker" in host
    kernel.export_ptx(tmp_path / "out" / "k.ptx")                  # the folder is created
    assert ".entry" in (tmp_path / "out" / "k.ptx").read_text()
    with pytest.raises(NotImplementedError, match="no shared library to export.*export_sources"):
        kernel.export_library(tmp_path / "k.so")
    from tilelang.jit import nvcc

    if nvcc.find_cuda_tool("cuobjdump") or nvcc.find_cuda_tool("nvdisasm"):
        kernel.export_sass(tmp_path / "sass" / "k.sass")
        assert "Function : " in (tmp_path / "sass" / "k.sass").read_text()
    assert tilelang.utils.get_tensor_supply is get_tensor_supply


def test_cache_module_names(tmp_path, monkeypatch):
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path))
    (tmp_path / "ab").mkdir()
    (tmp_path / "keep").mkdir()
    tilelang.cache.clear_cache()
    assert not (tmp_path / "ab").exists() and (tmp_path / "keep").exists()
    try:
        tilelang.cache.disable_cache()
        assert not tilelang.cache.is_cache_enabled() and not tilelang.is_cache_enabled()
    finally:
        tilelang.cache.enable_cache()
        from tilelang.jit import cache

        cache.set_enabled(None)
    assert tilelang.env.CUDA_HOME and tilelang.env.is_cache_enabled()


def test_jit_call_form_tells_1_from_1_0_and_true():
    """1, 1.0 and True are equal dict keys but specialise different kernels (a float or bool
    constant in the IR): the call-form memo in front of the argument key must not merge them.
    (The argument key itself, ``parse_args``, keeps upstream's plain values: its tests compare it.)"""
    from tilelang.jit import _call_form

    forms = {_call_form((1,), {}), _call_form((1.0,), {}), _call_form((True,), {})}
    assert len(forms) == 3 and _call_form((1,), {}) == _call_form((1,), {})


# ------------------------------------------------------------------ names harnesses import
@tilelang.jit
def _add1d(A, B, BLOCK_N: int):
    N = T.const("N")
    A: T.Tensor((N,), T.float16)
    B: T.Tensor((N,), T.float16)
    C = T.empty((N,), T.float16)
    with T.Kernel(N // BLOCK_N, threads=128) as bx:
        for i in T.Parallel(BLOCK_N):
            C[bx * BLOCK_N + i] = A[bx * BLOCK_N + i] + B[bx * BLOCK_N + i]
    return C


def test_jitimpl_kernelparam_and_print_source_code(capsys, tmp_path):
    """A puzzle harness written for upstream (tilelang-puzzles' common/utils.py) imports
    tilelang.jit.JITImpl and tilelang.engine.param.KernelParam for its type hints, reads the
    params' shape and dtype, and prints kernels with print_source_code()."""
    from tilelang.engine.param import KernelParam
    from tilelang.jit import JITImpl

    @tilelang.jit(out_idx=[-1])
    def factory(n):
        @T.prim_func
        def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
            with T.Kernel(1, threads=32):
                for i in T.Parallel(n):
                    B[i] = A[i]
        return main

    @tilelang.jit
    @T.prim_func
    def prim(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            A[T.get_thread_binding()] = 1.0

    assert all(isinstance(j, JITImpl) for j in (_add1d, factory, prim)) and JITImpl[int, str] is JITImpl
    kernel = _add1d.compile(N=4096, BLOCK_N=1024)
    params = kernel.params
    assert all(isinstance(p, KernelParam) for p in params)
    assert [list(p.shape) for p in params] == [[4096]] * 3 and params[0].torch_dtype() == torch.float16
    assert not params[0].is_scalar() and not params[0].is_float8() and not params[0].is_boolean()
    scalar = KernelParam("uint8", [])
    assert scalar.is_scalar() and scalar.is_unsigned() and scalar.torch_dtype() == torch.uint8
    assert str(scalar.tilelang_dtype()) == "uint8"
    kernel.print_source_code()
    assert 'extern "C" __global__' in capsys.readouterr().out
    kernel.show_source("both")
    out = capsys.readouterr().out
    assert "===== Kernel Source =====" in out and "===== Host Source =====" in out and "grid:" in out
    kernel.print_source_code(file=str(tmp_path / "k.cu"))
    assert (tmp_path / "k.cu").read_text() == kernel.get_kernel_source()
    with pytest.raises(ValueError, match="which="):
        kernel.show_source("ptx")


def test_a_misspelt_parameter_keyword_is_a_type_error():
    """`k(A, block_N=128)` for a parameter named BLOCK_N: upstream's TypeError (a missing required
    argument), here naming the keyword that was meant; it crashed the process in TVM's floordiv
    (`N // BLOCK_N` with BLOCK_N left None)."""
    from tvm import tirx

    with pytest.raises(TypeError, match=r"missing a required argument: 'BLOCK_N' \(block_N= names no parameter"):
        _add1d.compile(N=4096, block_N=1024)
    with pytest.raises(TypeError, match="unsupported operand"):
        tirx.Var("n", "int32") // None


def test_utils_device_helpers():
    # TileOPs' autotune input suppliers: `from tilelang.utils.device import get_current_device`
    import torch

    from tilelang.utils import device

    assert device.IS_CUDA == torch.cuda.is_available() and device.IS_NPU is False
    assert device.get_available_cpu_count() >= 1
    if device.IS_CUDA:
        assert device.get_current_device() == torch.cuda.current_device() and device.Event is torch.cuda.Event
        device.device_synchronize()
    elif not device.IS_MPS:
        assert device.get_current_device() is None and device.Event is None
        with pytest.raises(RuntimeError, match="no CUDA"):
            device.device_synchronize()
    with pytest.raises(ValueError, match="not a CUDA or MPS device"):
        device.device_synchronize("cpu")
