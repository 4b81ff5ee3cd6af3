"""Launch attributes on CPU: the cuda.h struct layouts, T.annotate_l2_hit_ratio recorded in the
artifact and described by the host source, and the launcher's calls (PDL through cuLaunchKernelEx,
the L2 access-policy window set before and reset after the launch) against a recording fake driver.
"""

import ctypes
import shutil
import subprocess
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.artifact import ArtifactError, KernelArtifact
from tilelang.jit import driver
from tilelang.jit.kernel import _l2_window, uses_pdl


# ---------------------------------------------------------------- struct layouts (cuda.h)
def test_struct_layouts_match_cuda_h():
    win = driver.CUaccessPolicyWindow
    assert ctypes.sizeof(win) == 32
    assert [win.base_ptr.offset, win.num_bytes.offset, win.hitRatio.offset, win.hitProp.offset,
            win.missProp.offset] == [0, 8, 16, 20, 24]
    assert ctypes.sizeof(driver.CUlaunchAttributeValue) == 64
    assert ctypes.alignment(driver.CUlaunchAttributeValue) == 8
    assert driver.CUlaunchAttributeValue.programmaticStreamSerializationAllowed.offset == 0
    assert ctypes.sizeof(driver.CUlaunchAttribute) == 72 and driver.CUlaunchAttribute.value.offset == 8
    cfg = driver.CUlaunchConfig
    assert ctypes.sizeof(cfg) == 56
    assert [cfg.sharedMemBytes.offset, cfg.hStream.offset, cfg.attrs.offset, cfg.numAttrs.offset] == [24, 32, 40, 48]


def _cuda_include():
    found = sorted(Path("/usr/local").glob("cuda*/include/cuda.h"))
    return found[-1].parent if found else None


@pytest.mark.skipif(_cuda_include() is None or shutil.which("gcc") is None, reason="needs cuda.h and gcc")
def test_struct_layouts_against_the_c_compiler(tmp_path):
    src = tmp_path / "layout.c"
    src.write_text("""#include <cuda.h>
#include <stdio.h>
#include <stddef.h>
int main(void) {
  printf("%zu %zu %zu %zu %zu %zu %zu %zu\\n", sizeof(CUaccessPolicyWindow), offsetof(CUaccessPolicyWindow, hitRatio),
         sizeof(CUlaunchAttributeValue), sizeof(CUlaunchAttribute), offsetof(CUlaunchAttribute, value),
         sizeof(CUlaunchConfig), offsetof(CUlaunchConfig, hStream), offsetof(CUlaunchConfig, numAttrs));
  printf("%d %d %d %d %d %d\\n", (int)CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW,
         (int)CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, (int)CU_LAUNCH_ATTRIBUTE_COOPERATIVE,
         (int)CU_LIMIT_PERSISTING_L2_CACHE_SIZE, (int)CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE,
         (int)CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE);
  return 0;
}
""")
    exe = tmp_path / "layout"
    subprocess.run(["gcc", f"-I{_cuda_include()}", str(src), "-o", str(exe)], check=True)
    sizes, ids = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")[:2]
    d = driver
    assert [int(x) for x in sizes.split()] == [
        ctypes.sizeof(d.CUaccessPolicyWindow), d.CUaccessPolicyWindow.hitRatio.offset,
        ctypes.sizeof(d.CUlaunchAttributeValue), ctypes.sizeof(d.CUlaunchAttribute), d.CUlaunchAttribute.value.offset,
        ctypes.sizeof(d.CUlaunchConfig), d.CUlaunchConfig.hStream.offset, d.CUlaunchConfig.numAttrs.offset]
    assert [int(x) for x in ids.split()] == [
        d.CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, d.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
        d.CU_LAUNCH_ATTRIBUTE_COOPERATIVE, d.CU_LIMIT_PERSISTING_L2_CACHE_SIZE,
        d.CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE, d.CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE]


def test_launch_config_packing():
    cfg, attrs = driver.launch_config((4, 2, 1), (128, 1, 1), 1024, 0xABC0,
                                      [(driver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)])
    raw = ctypes.string_at(ctypes.addressof(cfg), ctypes.sizeof(cfg))
    assert list(memoryview(raw[:28]).cast("I")) == [4, 2, 1, 128, 1, 1, 1024]
    assert int.from_bytes(raw[32:40], "little") == 0xABC0
    assert int.from_bytes(raw[40:48], "little") == ctypes.addressof(attrs)
    assert int.from_bytes(raw[48:52], "little") == 1
    first = ctypes.string_at(ctypes.addressof(attrs), 72)
    assert int.from_bytes(first[:4], "little") == 6 and int.from_bytes(first[8:12], "little") == 1


def test_access_policy_window_value():
    v = driver.access_policy_window(0x7000, 4096, 0.8)
    raw = ctypes.string_at(ctypes.addressof(v), 64)
    assert int.from_bytes(raw[:8], "little") == 0x7000 and int.from_bytes(raw[8:16], "little") == 4096
    assert abs(ctypes.c_float.from_buffer_copy(raw[16:20]).value - 0.8) < 1e-6
    assert int.from_bytes(raw[20:24], "little") == 2 and int.from_bytes(raw[24:28], "little") == 1
    cleared = driver.access_policy_window(0, 0, 0.0)
    reset = ctypes.string_at(ctypes.addressof(cleared), 64)
    assert reset == bytes(64)


# ---------------------------------------------------------------- compile side
M = N = 256


def l2_kernel(dtype="float32", ratio=0.8):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(M * N // 256, threads=256) as bx:
            T.annotate_l2_hit_ratio({B: ratio})
            for i in T.serial(256):
                idx = bx * 256 + i
                C[idx // N, idx % N] = A[idx // N, idx % N] + B[idx // N, idx % N]
    return main


def plain_kernel(dtype="float32"):
    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
        with T.Kernel(M * N // 256, threads=256) as bx:
            for i in T.serial(256):
                idx = bx * 256 + i
                C[idx // N, idx % N] = A[idx // N, idx % N] + B[idx // N, idx % N]
    return main


def test_l2_hit_ratio_recorded_and_described():
    k = tilelang.compile(l2_kernel(), out_idx=[-1], target="cuda -arch=sm_90a")
    assert k.artifact.l2_persist == [{"param": 1, "hit_ratio": 0.8}]
    host = k.get_host_source()
    assert "__tvm_cuda_stream_set_access_policy_window_packed(B" in host
    assert "__tvm_cuda_stream_reset_access_policy_window_packed" in host
    # the annotation does not change the device code
    plain = tilelang.compile(plain_kernel(), out_idx=[-1], target="cuda -arch=sm_90a")
    assert k.get_kernel_source() == plain.get_kernel_source()
    assert "access_policy" not in plain.get_host_source()
    # round trip through JSON (the disk cache)
    assert KernelArtifact.from_json(k.artifact.to_json()).l2_persist == k.artifact.l2_persist
    # B's address follows the 3 kernel arguments in the launch values; 256*256 float32
    assert _l2_window(k.artifact, 3) == (3, M * N * 4, 0.8)
    assert "_launch(d, g0, g1, g2, _stream(d), (p0, p1, p2, p1, ))" in host
    assert "_stream(d), (p0, p1, p2, ))" in plain.get_host_source()


def test_l2_hit_ratio_float16_and_bad_ratio():
    k = tilelang.compile(l2_kernel("float16", 0.9), out_idx=[-1], target="cuda -arch=sm_90a")
    assert k.artifact.l2_persist == [{"param": 1, "hit_ratio": 0.9}]
    assert "half*" not in k.get_host_source()
    with pytest.raises(Exception, match=r"hit ratio of 'B' must be a number in \[0, 1\]"):
        l2_kernel(ratio=1.5)


def test_artifact_check_rejects_bad_l2_entries():
    k = tilelang.compile(l2_kernel(), out_idx=[-1], target="cuda -arch=sm_90a")
    from dataclasses import replace
    with pytest.raises(ArtifactError, match="l2_persist"):
        replace(k.artifact, l2_persist=[{"param": 9, "hit_ratio": 0.5}]).check()
    with pytest.raises(ArtifactError, match="hit_ratio"):
        replace(k.artifact, l2_persist=[{"param": 1, "hit_ratio": 2.0}]).check()


def pdl_kernel():
    @T.prim_func
    def main(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(4, threads=256) as bx:
            T.pdl_sync()
            for i in T.Parallel(256):
                B[bx * 256 + i] = A[bx * 256 + i] * 2.0
    return main


def test_pdl_kernel_is_marked():
    k = tilelang.compile(pdl_kernel(), target="cuda -arch=sm_90a")
    assert uses_pdl(k.artifact)
    assert "PROGRAMMATIC_STREAM_SERIALIZATION" in k.get_host_source()
    plain = tilelang.compile(plain_kernel(), out_idx=[-1], target="cuda -arch=sm_90a")
    assert not uses_pdl(plain.artifact)


# ---------------------------------------------------------------- launcher against a fake driver
class FakeDriver:
    """Records the driver calls the launcher makes (no GPU)."""

    def __init__(self, has_ex=True, ex_rc=0):
        self.calls = []
        self.limit = 1234
        self.ex_rc = ex_rc
        self.cuLaunchKernelEx = self._ex if has_ex else None
        self.cuLaunchCooperativeKernel = lambda *a: self.calls.append(("coop",)) or 0

    def _ex(self, cfg_addr, func, params, extra):
        cfg = driver.CUlaunchConfig.from_address(cfg_addr)
        attrs = [(cfg.attrs[i].id, cfg.attrs[i].value.programmaticStreamSerializationAllowed)
                 for i in range(cfg.numAttrs)]
        self.calls.append(("ex", (cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ), cfg.blockDimX, cfg.hStream, attrs))
        return self.ex_rc

    def fast_launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls.append(("plain", (gx, gy, gz)))
        return 0

    def fast_get_current(self, ptr):
        ptr.contents.value = 0x1   # the primary context is current

    def cuStreamSetAttribute(self, stream, attr, addr):
        w = driver.CUlaunchAttributeValue.from_address(addr).accessPolicyWindow
        self.calls.append(("window", attr, w.base_ptr, w.num_bytes, round(w.hitRatio, 3), w.hitProp, w.missProp))
        return 0

    def cuCtxGetLimit(self, *a):
        raise AssertionError("the launcher reads the limit through out()")

    def out(self, fn, *args, ctype=None, what=""):
        assert args == (driver.CU_LIMIT_PERSISTING_L2_CACHE_SIZE,)
        self.calls.append(("get_limit",))
        return self.limit

    def cuCtxSetLimit(self, which, size):
        self.calls.append(("set_limit", which, size))
        return 0

    def cuCtxResetPersistingL2Cache(self):
        self.calls.append(("reset_lines",))
        return 0

    def check(self, rc, what):
        assert rc == 0, what

    def describe(self, rc):
        return f"CUDA_ERROR_{rc}: fake"


def _launcher(monkeypatch, fake, **kw):
    monkeypatch.setattr(driver, "_driver", fake)
    monkeypatch.setattr(driver, "get_driver", lambda: fake)
    monkeypatch.setattr(driver, "_l2_caps", lambda device: (1 << 20, 1 << 22))
    launcher = driver.KernelLauncher(b"", "k", ["ptr", "ptr"], (128, 1, 1), 0, "sm_90a", **kw)
    launcher._funcs[0] = (ctypes.c_void_p(0x99), 0x1)
    return launcher


def test_pdl_launch_uses_launch_kernel_ex(monkeypatch):
    fake = FakeDriver()
    launcher = _launcher(monkeypatch, fake, pdl=True)
    launcher(0, 3, 1, 1, 0x500, (0x1000, 0x2000))
    assert fake.calls == [("ex", (3, 1, 1), 128, 0x500,
                           [(driver.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1)])]


def test_plain_kernel_keeps_the_fast_launch(monkeypatch):
    fake = FakeDriver()
    launcher = _launcher(monkeypatch, fake)
    launcher(0, 2, 1, 1, 0, (0x1000, 0x2000))
    assert fake.calls == [("plain", (2, 1, 1))]


def test_pdl_falls_back_with_a_warning(monkeypatch):
    monkeypatch.setattr(driver, "_warned", set())
    fake = FakeDriver(has_ex=False)
    launcher = _launcher(monkeypatch, fake, pdl=True)
    with pytest.warns(RuntimeWarning, match="lacks cuLaunchKernelEx"):
        launcher(0, 2, 1, 1, 0, (0x1000, 0x2000))
    assert fake.calls == [("plain", (2, 1, 1))]
    fake = FakeDriver(ex_rc=driver.CUDA_ERROR_NOT_SUPPORTED)
    launcher = _launcher(monkeypatch, fake, pdl=True)
    with pytest.warns(RuntimeWarning, match="refused programmatic stream serialization"):
        launcher(0, 2, 1, 1, 0, (0x1000, 0x2000))
    assert [c[0] for c in fake.calls] == ["ex", "plain"]


def test_l2_window_is_set_and_reset_around_the_launch(monkeypatch):
    fake = FakeDriver()
    launcher = _launcher(monkeypatch, fake, l2_window=(2, 4096, 0.8))
    launcher(0, 2, 1, 1, 0x500, (0x1000, 0x2000, 0x2000))
    L = driver.CU_LIMIT_PERSISTING_L2_CACHE_SIZE
    assert fake.calls == [
        ("get_limit",), ("set_limit", L, 4096),
        ("window", 1, 0x2000, 4096, 0.8, driver.CU_ACCESS_PROPERTY_PERSISTING, driver.CU_ACCESS_PROPERTY_STREAMING),
        ("plain", (2, 1, 1)),
        ("window", 1, None, 0, 0.0, 0, 0), ("reset_lines",), ("set_limit", L, 1234)]
    # a tensor larger than the device's persisting L2 gets a window of that size
    fake = FakeDriver()
    launcher = _launcher(monkeypatch, fake, l2_window=(2, 1 << 30, 0.5), pdl=True)
    launcher(0, 1, 1, 1, 0, (0x1000, 0x2000, 0x1000))
    assert fake.calls[1] == ("set_limit", L, 1 << 20)
    assert fake.calls[2][2:4] == (0x1000, 1 << 20)
    assert fake.calls[3][0] == "ex"
    # a None tensor (address 0): no window
    fake = FakeDriver()
    launcher = _launcher(monkeypatch, fake, l2_window=(2, 4096, 0.5))
    launcher(0, 1, 1, 1, 0, (0x1000, 0x2000, 0))
    assert fake.calls == [("plain", (1, 1, 1))]


def test_l2_tensor_the_kernel_does_not_read_still_gets_its_window():
    @T.prim_func
    def main(A: T.Tensor((1,), "float16")):
        with T.Kernel():
            T.annotate_l2_hit_ratio({A: 0.9})
            T.evaluate(0)

    k = tilelang.compile(main, target="cuda -arch=sm_90a")
    host = k.get_host_source()
    assert "A" not in k.artifact.kernel_args
    assert "__tvm_cuda_stream_set_access_policy_window_packed(A" in host
    assert "p0 = a0.data_ptr()" in host and "(p0, ))" in host


def test_a_single_wave_kernel_declares_one_block_per_sm():
    """engine/lower._single_wave_min_blocks: a constant grid of at most one block per SM (132 on
    sm_90a) with at most 128 threads a block is declared __launch_bounds__(T, 1)."""
    from tilelang.engine.lower import _single_wave_min_blocks

    assert _single_wave_min_blocks(["4", "32", "1"], [128, 1, 1], "sm_90a") == 1
    assert _single_wave_min_blocks(["132", "1", "1"], [64, 1, 1], "sm_90a") == 1
    assert _single_wave_min_blocks(["133", "1", "1"], [128, 1, 1], "sm_90a") is None    # two waves
    assert _single_wave_min_blocks(["4", "1", "1"], [256, 1, 1], "sm_90a") is None      # 256 threads
    assert _single_wave_min_blocks(["(M + 63) // 64", "1", "1"], [128, 1, 1], "sm_90a") is None
    assert _single_wave_min_blocks(["min(64, NUM_SMS)", "1", "1"], [128, 1, 1], "sm_90a") is None
    assert _single_wave_min_blocks(["4", "1", "1"], [128, 1, 1], "sm_86") is None       # no known SM count


def _doubling(blocks):
    """B = 2 A over ``blocks`` blocks of 128 threads."""
    n = blocks * 128

    @T.prim_func
    def main(A: T.Tensor((n,), T.float32), B: T.Tensor((n,), T.float32)):
        with T.Kernel(blocks, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] * 2.0

    return main


def test_single_wave_launch_bound_in_the_source():
    assert "__launch_bounds__(128, 1)" in tilelang.lower(_doubling(8), "sm_90a").kernel_source
    assert "__launch_bounds__(128)" in tilelang.lower(_doubling(8192), "sm_90a").kernel_source


def test_single_wave_launch_bound_can_be_turned_off():
    art = tilelang.lower(_doubling(8), "sm_90a", pass_configs={"tl.disable_single_wave_launch_bound": True})
    assert "__launch_bounds__(128)" in art.kernel_source
