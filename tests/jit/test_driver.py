"""The ctypes driver layer without a GPU: argument layout, packing, context handling, errors."""

import ctypes
import struct

import pytest
import torch

from tilelang.jit import driver
from tilelang.jit.driver import KernelLauncher, arg_layout, check_arch_compatible


def test_arg_layout_natural_alignment():
    fmt, offsets, size = arg_layout(["ptr", "int32", "ptr", "float32", "int64"])
    assert offsets == [0, 8, 16, 24, 32] and size == 40
    assert struct.calcsize(fmt) == size
    fmt, offsets, size = arg_layout(["int8", "int32", "tensormap", "float16"])
    assert offsets == [0, 4, 64, 192] and size == 194


def test_arg_layout_rejects_unknown_kind():
    with pytest.raises(ValueError, match="unsupported kernel argument kind 'complex64'"):
        arg_layout(["complex64"])


@pytest.mark.parametrize("arch, cc, ok", [
    ("sm_90a", (9, 0), True), ("sm_90a", (10, 0), False), ("sm_90", (9, 0), True),
    ("sm_80", (8, 6), True), ("sm_86", (8, 0), False), ("sm_80", (9, 0), False),
])
def test_arch_compatibility(arch, cc, ok):
    if ok:
        check_arch_compatible(arch, cc, 0)
    else:
        with pytest.raises(RuntimeError, match=f"compiled for {arch} but CUDA device 0 is sm_"):
            check_arch_compatible(arch, cc, 0)


class FakeDriver:
    """Stands in for _Driver: records launches and reads the packed arguments back."""

    def __init__(self, current_ctx):
        self.current = current_ctx
        self.launches, self.pushed, self.rc = [], [], 0

    def fast_get_current(self, ptr):
        ptr.contents.value = self.current
        return 0

    def cuCtxPushCurrent_v2(self, ctx):
        self.pushed.append(ctx)
        return 0

    def cuCtxPopCurrent_v2(self, addr):
        ctypes.c_void_p.from_address(addr).value = self.pushed.pop()
        return 0

    def check(self, rc, what):
        assert rc == 0, what

    def describe(self, rc):
        return f"CUDA_ERROR_FAKE: fake error {rc}"

    def fast_launch(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        # the real call has no argtypes: every argument must already be a C int, a ctypes
        # object or None, or ctypes would truncate it to 32 bits
        for v in (gx, gy, gz, bx, by, bz, smem):
            assert type(v) is int and 0 <= v < 2**31
        assert isinstance(f, ctypes.c_void_p) and isinstance(params, ctypes.c_void_p)
        assert stream is None or isinstance(stream, ctypes.c_void_p)
        self.launches.append(dict(f=f.value, grid=(gx, gy, gz), block=(bx, by, bz), smem=smem,
                                  stream=stream.value if stream else 0, params=params.value,
                                  extra=extra, pushed=list(self.pushed)))
        return self.rc


def read_params(params_addr, kinds):
    """Decode the kernelParams array the launcher passed: one pointer per argument."""
    ptrs = (ctypes.c_void_p * len(kinds)).from_address(params_addr)
    codes = {"ptr": ctypes.c_uint64, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
             "float32": ctypes.c_float, "float16": ctypes.c_uint16, "bool": ctypes.c_bool}
    out = []
    for p, kind in zip(ptrs, kinds):
        if kind == "tensormap":
            out.append(ctypes.string_at(p, 128))
            assert p % 64 == 0
        else:
            out.append(codes[kind].from_address(p).value)
    return out


@pytest.fixture
def fake_driver(monkeypatch):
    fake = FakeDriver(current_ctx=0xC0)
    monkeypatch.setattr(driver, "_driver", fake)
    return fake


def make_launcher(kinds):
    launcher = KernelLauncher(b"cubin", "k", kinds, (128, 1, 1), 1024, "sm_90a")
    launcher._funcs[0] = (ctypes.c_void_p(0xF0), 0xC0)  # as if loaded on device 0 in context 0xC0
    return launcher


def test_launch_packs_every_kind(fake_driver):
    kinds = ["ptr", "int32", "float32", "int64", "bool", "float16", "tensormap"]
    launcher = make_launcher(kinds)
    tmap = bytes(range(128))
    launcher(0, 3, 2, 1, 0x7F0000001234, (0xDEADBEEF000, -5, 1.5, 2**40, True, 1.0, tmap))
    (call,) = fake_driver.launches
    assert call["f"] == 0xF0 and call["grid"] == (3, 2, 1) and call["block"] == (128, 1, 1)
    assert call["smem"] == 1024 and call["stream"] == 0x7F0000001234 and call["extra"] is None
    assert call["pushed"] == []  # the primary context was already current: no push
    vals = read_params(call["params"], kinds)
    assert vals[:5] == [0xDEADBEEF000, -5, 1.5, 2**40, True]
    assert vals[5] == 0x3C00  # 1.0 in IEEE half
    assert vals[6] == tmap


def test_launch_pushes_primary_context_when_another_is_current(fake_driver):
    fake_driver.current = 0xBAD  # e.g. a fresh thread, or another device selected
    launcher = make_launcher(["int32"])
    launcher(0, 1, 1, 1, 0, (9,))
    assert fake_driver.launches[0]["pushed"] == [0xC0]
    assert fake_driver.pushed == []  # popped again: the caller's context is untouched
    assert read_params(fake_driver.launches[0]["params"], ["int32"]) == [9]


def test_launch_error_is_readable(fake_driver):
    fake_driver.rc = 700
    launcher = make_launcher(["ptr"])
    with pytest.raises(driver.CudaDriverError, match=r"launching kernel 'k' on cuda:0 with grid=\(1, 1, 1\).*"
                                                     r"CUDA_ERROR_FAKE.*earlier asynchronous failure") as e:
        launcher(0, 1, 1, 1, 0, (0,))
    assert e.value.code == 700


def test_no_gpu_gives_clear_error(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    monkeypatch.setattr(driver, "_driver", None)
    with pytest.raises(driver.NoCudaError, match="^no CUDA device"):
        driver.get_driver()

