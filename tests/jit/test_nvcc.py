"""nvcc driver: real compiles of a tiny kernel (skipped without nvcc), parsing, errors, NVRTC flow."""

import sys
import types

import pytest

from tilelang.jit import nvcc
from tilelang.artifact import ArtifactError

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except nvcc.NVCCNotFoundError:
    HAVE_NVCC = False
needs_nvcc = pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")

TINY = r"""
extern "C" __global__ void scale(float* __restrict__ x, float a, int n) {
  __shared__ float tile[256];
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  tile[threadIdx.x] = i < n ? x[i] : 0.f;
  __syncthreads();
  if (i < n) x[i] = a * tile[255 - threadIdx.x];
}
"""


@pytest.fixture(autouse=True)
def no_nvrtc(monkeypatch):
    monkeypatch.delenv("TILELANG_USE_NVRTC", raising=False)
    monkeypatch.delenv("TILELANG_KEEP_TEMPS", raising=False)


def test_gencode_flags():
    assert nvcc.gencode_flags("sm_90a") == ["-gencode", "arch=compute_90a,code=sm_90a"]
    assert nvcc.gencode_flags("sm_80") == ["-gencode", "arch=compute_80,code=sm_80"]
    with pytest.raises(ArtifactError):
        nvcc.gencode_flags("90")


def test_explicit_nvcc_that_does_not_exist(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_NVCC", str(tmp_path / "nvcc"))
    with pytest.raises(nvcc.NVCCNotFoundError, match="TILELANG_NVCC"):
        nvcc.find_nvcc()


@needs_nvcc
def test_command_line(monkeypatch, tmp_path):
    monkeypatch.setenv("TILELANG_SRC_DIR", str(tmp_path))
    cmd = nvcc.build_command("cubin", "sm_90a", ["-DX=1"], ["/inc"], "k.cu", "k.cubin")
    assert cmd[1] == "-cubin" and "-G" not in cmd and cmd.count("-gencode") == 1
    for flag in ["-O3", "-std=c++17", "--expt-relaxed-constexpr", "-lineinfo", "-DX=1"]:
        assert flag in cmd
    assert cmd[cmd.index("-I") + 1] == str(tmp_path) and "/inc" in cmd


@needs_nvcc
@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_compile_cubin(arch):
    cubin = nvcc.compile_cubin(TINY, arch)
    assert cubin[:4] == b"\x7fELF"
    assert b"scale" in cubin


@needs_nvcc
def test_include_dir_from_src_dir(monkeypatch, tmp_path):
    (tmp_path / "tl.h").write_text("#define TL_SCALE 3.0f\n")
    monkeypatch.setenv("TILELANG_SRC_DIR", str(tmp_path))
    src = '#include "tl.h"\nextern "C" __global__ void k(float* x) { x[0] = TL_SCALE; }\n'
    assert nvcc.compile_cubin(src, "sm_80")[:4] == b"\x7fELF"


@needs_nvcc
def test_compile_ptx():
    ptx = nvcc.compile_ptx(TINY, "sm_90a")
    assert ".target sm_90a" in ptx and ".entry scale" in ptx


@needs_nvcc
def test_ptxas_info_from_real_compile():
    info = nvcc.ptxas_info(TINY, "sm_90a")["scale"]
    assert info.arch == "sm_90a" and info.registers > 0
    assert info.smem == 1024 and info.spill_stores == 0 and info.barriers == 1


def test_parse_ptxas_info_with_spills():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'main_kernel' for 'sm_90a'
ptxas info    : Function properties for main_kernel
    48 bytes stack frame, 40 bytes spill stores, 36 bytes spill loads
ptxas info    : Used 255 registers, used 2 barriers, 48 bytes cumulative stack size, 98304 bytes smem
ptxas info    : Compile time = 12.3 ms
ptxas info    : Compiling entry function 'other' for 'sm_90a'
ptxas info    : Used 8 registers, used 0 barriers
"""
    infos = nvcc.parse_ptxas_info(log)
    k = infos["main_kernel"]
    assert (k.registers, k.spill_stores, k.spill_loads, k.stack_frame, k.smem, k.barriers) == (255, 40, 36, 48, 98304, 2)
    assert infos["other"].registers == 8 and infos["other"].smem == 0


@needs_nvcc
def test_compile_error_is_surfaced_with_kept_source():
    broken = 'extern "C" __global__ void bad(float* x) { x[0] = undefined_symbol; }\n'
    with pytest.raises(nvcc.NVCCError) as e:
        nvcc.compile_cubin(broken, "sm_80")
    err = e.value
    assert "undefined_symbol" in str(err) and "undefined_symbol" in err.log
    assert "source kept at" in str(err)
    with open(err.source_path) as f:
        assert f.read() == broken
    assert err.command[0].endswith("nvcc")


@needs_nvcc
def test_temps_removed_unless_kept(monkeypatch, tmp_path):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    nvcc.compile_cubin(TINY, "sm_80")
    assert not list(tmp_path.glob("tilelang-nvcc-*"))
    monkeypatch.setenv("TILELANG_KEEP_TEMPS", "1")
    nvcc.compile_cubin(TINY, "sm_80")
    (kept,) = tmp_path.glob("tilelang-nvcc-*")
    assert (kept / "kernel.cu").read_text() == TINY


def test_disassemble_sass():
    if nvcc.find_cuda_tool("cuobjdump") or nvcc.find_cuda_tool("nvdisasm"):
        pytest.skip("a disassembler is installed; covered by the GPU tests")
    with pytest.raises(nvcc.CudaToolNotFoundError, match="neither cuobjdump nor nvdisasm"):
        nvcc.disassemble_sass(b"\x7fELF")


# ---------------------------------------------------------------- NVRTC (mocked module)
class _Result:
    NVRTC_SUCCESS = 0


def fake_nvrtc(fail_compile=False):
    mod = types.SimpleNamespace(nvrtcResult=_Result, calls=[])

    def create(src, name, n, headers, names):
        mod.calls.append(("create", src))
        return (0, "prog")

    def compile_(prog, n, opts):
        mod.calls.append(("compile", opts))
        return (6 if fail_compile else 0,)

    def log_size(prog):
        return (0, 12)

    def log(prog, buf):
        return (0,)

    mod.nvrtcCreateProgram = create
    mod.nvrtcCompileProgram = compile_
    mod.nvrtcGetCUBINSize = lambda prog: (0, 4)
    mod.nvrtcGetCUBIN = lambda prog, buf: (0,)
    mod.nvrtcGetPTXSize = lambda prog: (0, 4)
    mod.nvrtcGetPTX = lambda prog, buf: (0,)
    mod.nvrtcGetProgramLogSize = log_size
    mod.nvrtcGetProgramLog = log
    mod.nvrtcDestroyProgram = lambda prog: mod.calls.append(("destroy", prog))
    return mod


def install_fake(monkeypatch, mod):
    pkg = types.ModuleType("cuda")
    bindings = types.ModuleType("cuda.bindings")
    bindings.nvrtc = mod
    pkg.bindings = bindings
    monkeypatch.setitem(sys.modules, "cuda", pkg)
    monkeypatch.setitem(sys.modules, "cuda.bindings", bindings)
    monkeypatch.setitem(sys.modules, "cuda.bindings.nvrtc", mod)
    monkeypatch.setenv("TILELANG_USE_NVRTC", "1")


def test_nvrtc_used_when_requested(monkeypatch, tmp_path):
    mod = fake_nvrtc()
    install_fake(monkeypatch, mod)
    monkeypatch.setenv("TILELANG_SRC_DIR", str(tmp_path))
    out = nvcc.compile_cubin(TINY, "sm_90a", ["-O3", "-DX=1"])
    assert len(out) == 4
    opts = [o.decode() for o in mod.calls[1][1]]
    assert "--gpu-architecture=sm_90a" in opts and f"-I{tmp_path}" in opts and "-DX=1" in opts
    assert "-O3" not in opts  # nvcc-only flag dropped
    assert mod.calls[-1] == ("destroy", "prog")


def test_nvrtc_failure_raises_nvcc_error(monkeypatch):
    install_fake(monkeypatch, fake_nvrtc(fail_compile=True))
    with pytest.raises(nvcc.NVCCError, match="NVRTC compile failed"):
        nvcc.compile_cubin(TINY, "sm_90a")


def test_nvrtc_ignored_when_not_importable(monkeypatch):
    monkeypatch.setenv("TILELANG_USE_NVRTC", "1")
    for name in ("cuda", "cuda.bindings", "cuda.bindings.nvrtc"):
        monkeypatch.setitem(sys.modules, name, None)  # import fails
    assert nvcc._nvrtc_module() is None
