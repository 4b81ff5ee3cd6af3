"""tilelang.carver.arch.driver and CUDA("cuda") on a real GPU: the values agree with torch."""

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA device")


def test_driver_matches_torch():
    from tilelang.carver.arch import driver

    prop = torch.cuda.get_device_properties(0)
    assert driver.get_num_sms() == prop.multi_processor_count
    assert driver.get_device_name() == torch.cuda.get_device_name()
    assert driver.get_shared_memory_per_block() == prop.shared_memory_per_block
    assert driver.get_shared_memory_per_block(format="kb") == prop.shared_memory_per_block // 1024
    assert driver.get_registers_per_block() > 0
    assert driver.get_max_dynamic_shared_size_bytes() >= prop.shared_memory_per_block
    assert driver.get_persisting_l2_cache_max_size() >= 0


def test_cuda_describes_the_live_device():
    from tilelang.carver.arch import CUDA

    dev = CUDA("cuda")
    prop = torch.cuda.get_device_properties(0)
    assert dev.from_device
    assert dev.compute_max_core == prop.multi_processor_count
    assert dev.l2_cache_size_bytes == prop.L2_cache_size
    assert dev.name == prop.name
    if "H200" in prop.name:
        assert dev.memory_bandwidth_GBps == 4800.0 and dev.peak_tflops("float16") == 989.4
