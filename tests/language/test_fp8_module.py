"""``tilelang.language.fp8``: the FP8 dtype upstream-style code asks for (CUDA: OCP formats)."""

import pytest
import torch

import tilelang.language as T
from tilelang.language.fp8 import determine_fp8_type, determine_torch_fp8_type


def test_cuda_build_gets_the_ocp_formats():
    if torch.version.hip is not None:
        pytest.skip("a ROCm build of torch")
    assert determine_fp8_type() == T.float8_e4m3fn and str(determine_fp8_type("e4m3")) == "float8_e4m3fn"
    assert str(determine_fp8_type("e5m2")) == "float8_e5m2"
    assert determine_torch_fp8_type("e4m3") is torch.float8_e4m3fn
    assert determine_torch_fp8_type("e5m2") is torch.float8_e5m2


def test_other_formats_are_refused():
    with pytest.raises(ValueError, match="Unsupported FP8 format: 'e3m4'"):
        determine_fp8_type("e3m4")


def test_rocm_builds_get_fnuz(monkeypatch):
    monkeypatch.setattr(torch.version, "hip", "6.2", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert str(determine_fp8_type("e4m3")) == "float8_e4m3fnuz"
    assert str(determine_fp8_type("e5m2")) == "float8_e5m2fnuz"
