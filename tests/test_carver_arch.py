"""tilelang.carver.arch: device descriptions from tilelang.targets (no GPU needed), the arch
predicates, get_arch, and the driver module's behaviour without a device."""

import pytest
import torch

from tilelang import targets
from tilelang.carver import arch as carver_arch
from tilelang.carver.arch import (
    CDNA, CPU, CUDA, TileDevice, check_sm_version, driver, get_arch, has_mma_support, is_ada_arch,
    is_ampere_arch, is_cdna_arch, is_hopper_arch, is_tensorcore_supported_precision, is_volta_arch,
)

NO_GPU = not torch.cuda.is_available()


def _live_cc():
    if NO_GPU:
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return major * 10 + minor


def test_check_sm_version():
    assert check_sm_version("sm_90a") == 90
    assert check_sm_version("sm_80") == 80
    assert check_sm_version("90") == 90
    assert check_sm_version("sm_100a") == 100
    assert check_sm_version("sm_120f") == 120
    for bad in ("gfx942", "sm_", "", "sm_sm_90", "xsm_90", "sm_90_sm_80"):
        assert check_sm_version(bad) == -1


def test_cuda_describes_sm90_without_querying_when_no_matching_gpu():
    dev = CUDA("sm_90a")
    assert dev.arch == "sm_90a" and dev.sm_version == 90 and dev.compute_capability == "90"
    assert dev.platform == "CUDA" and dev.warp_size == 32
    assert dev.target.kind.name == "cuda" and dev.target.attrs["arch"] == "sm_90a"
    assert dev.compute_max_core == 132
    assert dev.smem_cap == 48 * 1024
    assert dev.smem_per_block_optin == 227 * 1024
    assert dev.smem_per_sm == 228 * 1024
    assert dev.reg_cap == 65536
    assert dev.l2_cache_size_bytes in (50 * 1024 * 1024, 60 * 1024 * 1024)   # H100/H200 (driver may round)
    assert dev.peak_tflops("float16") == 989.4
    assert dev.peak_tflops("float8_e4m3fn") == 1978.9
    assert dev.memory_bandwidth_GBps in (3350.0, 4800.0)
    if _live_cc() != 90:
        assert not dev.from_device and dev.name == "H100-SXM5-80GB" and dev.memory_bandwidth_GBps == 3350.0


@pytest.mark.skipif(_live_cc() == 80, reason="describes the live sm_80 GPU instead")
def test_cuda_describes_sm80():
    dev = CUDA("sm_80")
    assert (dev.name, dev.compute_max_core, dev.l2_cache_size_bytes) == ("A100-SXM4-80GB", 108, 40 * 1024 * 1024)
    assert dev.smem_per_block_optin == 163 * 1024
    assert dev.peak_tflops("bfloat16") == 312.0 and dev.peak_tflops("float8_e4m3fn") is None
    assert dev.memory_bandwidth_GBps == 2039.0
    assert "A100" in repr(dev) and "108 SMs" in repr(dev)


def test_cuda_target_spellings():
    import tvm

    assert CUDA("cuda -arch=sm_80").arch == "sm_80"
    assert CUDA({"kind": "cuda", "arch": "sm_80"}).arch == "sm_80"
    assert CUDA(tvm.target.Target({"kind": "cuda", "arch": "sm_80"})).arch == "sm_80"
    assert CUDA("sm_90").arch == "sm_90a"
    with pytest.raises(ValueError, match="CDNA"):
        CUDA(tvm.target.Target("llvm"))


@pytest.mark.skipif(not NO_GPU, reason="CUDA('cuda') describes the live GPU")
def test_cuda_default_without_gpu_is_hopper():
    assert CUDA("cuda").arch == "sm_90a"


@pytest.mark.skipif(_live_cc() == 86, reason="describes the live GPU")
def test_cuda_unknown_arch_without_device_is_a_clear_error():
    with pytest.raises(ValueError, match=r"no built-in description of sm_86.*sm_80, sm_90"):
        CUDA("sm_86")


def _fake(sm):
    dev = CUDA.__new__(CUDA)
    dev.sm_version = sm
    return dev


def test_arch_predicates():
    assert is_hopper_arch(_fake(90)) and has_mma_support(_fake(90)) and not is_ampere_arch(_fake(90))
    assert is_ampere_arch(_fake(80)) and is_ampere_arch(_fake(86)) and not is_ada_arch(_fake(86))
    assert is_ada_arch(_fake(89)) and is_volta_arch(_fake(70)) and not has_mma_support(_fake(75))
    assert has_mma_support(_fake(100)) and not is_hopper_arch(_fake(100))
    assert not is_hopper_arch(CDNA("hip"))


def test_tensorcore_precisions_follow_targets():
    h100, a100 = _fake(90), _fake(80)
    assert is_tensorcore_supported_precision("float16", "float32", h100)
    assert is_tensorcore_supported_precision("float8_e4m3", "float32", h100)
    assert not is_tensorcore_supported_precision("float8_e4m3", "float32", a100)
    assert is_tensorcore_supported_precision("int8", "int32", a100)
    assert not is_tensorcore_supported_precision("bfloat16", "float16", h100)
    with pytest.raises(ValueError):
        is_tensorcore_supported_precision("float16", "float32", CPU())


def test_cdna_description():
    dev = CDNA("hip")
    assert is_cdna_arch(dev) and dev.mcpu == "gfx942" and dev.name == "MI300X"
    assert (dev.compute_max_core, dev.smem_cap, dev.warp_size) == (304, 64 * 1024, 64)
    assert dev.compute_capability == "94" and dev.memory_bandwidth_GBps == 5300.0
    assert CDNA("hip -mcpu=gfx942").mcpu == "gfx942"
    with pytest.raises(ValueError, match="gfx1100"):
        CDNA("gfx1100")


def test_get_arch():
    assert isinstance(get_arch("sm_80"), CUDA)
    assert isinstance(get_arch("hip"), CDNA)
    assert isinstance(get_arch("llvm"), CPU)
    assert get_arch("llvm").get_avaliable_tensorintrin_shapes() == []
    assert CUDA("sm_80").get_avaliable_tensorintrin_shapes() == [[16, 16], [16, 16]]
    with pytest.raises(ValueError, match="unsupported target"):
        get_arch("metal")
    assert isinstance(carver_arch.auto_infer_current_arch(), TileDevice)


def test_targets_gpu_spec_picks_the_product_by_name():
    assert targets.gpu_spec("sm_90a", "NVIDIA H200")["dram_bandwidth_gbps"] == 4800.0
    assert targets.gpu_spec("sm_90a", "NVIDIA H100 80GB HBM3")["dram_bandwidth_gbps"] == 3350.0
    pcie = targets.gpu_spec("sm_90a", "NVIDIA H100 PCIe")
    assert (pcie["sm_count"], pcie["peak_tflops"]["float16"]) == (114, 756.0)
    assert targets.gpu_spec("sm_80", "NVIDIA A100-SXM4-40GB")["dram_bandwidth_gbps"] == 1555.0
    assert targets.gpu_spec("sm_80", "NVIDIA H200")["name"].startswith("A100")   # arch decides
    assert targets.gpu_spec("sm_89") is None
    assert targets.gpu_spec("sm_90a")["sm_count"] == targets.sm_count("sm_90a")
    spec = targets.gpu_spec("sm_90a")
    spec["peak_tflops"]["float16"] = 0
    assert targets.gpu_spec("sm_90a")["peak_tflops"]["float16"] == 989.4   # copies, not the table


def test_driver_imports_and_reports_no_device_clearly():
    from tilelang.carver.arch.driver import cuda_driver

    assert driver.get_num_sms is cuda_driver.get_num_sms
    if not NO_GPU:
        pytest.skip("a GPU is present (tests/gpu/test_carver_driver_gpu.py covers it)")
    assert driver.get_device_name() is None and driver.get_cuda_device_properties() is None
    for fn in (driver.get_num_sms, driver.get_registers_per_block, driver.get_shared_memory_per_block,
               driver.get_max_dynamic_shared_size_bytes, driver.get_persisting_l2_cache_max_size):
        with pytest.raises(RuntimeError, match="no CUDA device"):
            fn()
    with pytest.raises(ValueError, match="format"):
        cuda_driver._in(1024, "gb")
