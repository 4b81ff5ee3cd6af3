"""The per-call host path of a kernel call, on CPU (no GPU): the generated argument checks and the
inline launch (``ArgPlan.bind_direct`` + ``KernelLauncher.direct_state``).

A fake driver stands for libcuda: its ``fast_launch_ex`` reads the CUlaunchConfig and the kernel
arguments back from memory, so the bytes the inline launch packs are checked against cuda.h's
layout (``driver.CUlaunchConfig``) and against the plain launcher's packing.
"""

import ctypes
import struct

import pytest
import torch

from tilelang.artifact import KernelArtifact, ParamSpec
from tilelang.jit import driver
from tilelang.jit.adapter_args import ArgPlan
from tilelang.jit.kernel import JITKernel

SRC = 'extern "C" __global__ void k() {}'
CTX, FUNC, STREAM = 0x7001, 0x99, 0x5000


def row_artifact(dtype="float32", smem=2048):
    """A row reduction: X[4096, 1024] -> Y[4096] (Y allocated when only X is passed)."""
    return KernelArtifact(
        name="row_sum", source=SRC,
        params=[ParamSpec("X", "tensor", dtype, [4096, 1024]), ParamSpec("Y", "tensor", dtype, [4096])],
        kernel_args=["X", "Y"], grid=["1024", "1", "1"], block=[128, 1, 1], dynamic_smem=smem,
        arch="sm_90a", symbols={}, out_idx=[1])


def scaled_artifact():
    """A symbolic shape, a scalar, and an int32 symbol passed to the kernel."""
    return KernelArtifact(
        name="scaled", source=SRC,
        params=[ParamSpec("A", "tensor", "float16", ["N", 64]), ParamSpec("B", "tensor", "float16", ["N", 64]),
                ParamSpec("alpha", "scalar", "float32", [])],
        kernel_args=["A", "B", "alpha", "N"], grid=["(N + 127) // 128", "2", "1"], block=[256, 1, 1],
        dynamic_smem=0, arch="sm_90a", symbols={"N": [0, 0]}, out_idx=[1])


class FakeDriver:
    """Records the launches; the context current on this thread is ``current``."""

    def __init__(self, rc=0, nargs=2):
        self.calls, self.rc, self.current, self.nargs = [], rc, CTX, nargs

    def fast_get_current(self, ptr):
        ptr.contents.value = self.current

    def fast_launch_ex(self, cfg, func, params, extra):
        c = driver.CUlaunchConfig.from_address(cfg.value)
        arr = ctypes.cast(params.value, ctypes.POINTER(ctypes.c_void_p))
        addrs = [arr[k] for k in range(self.nargs)]
        raw = ctypes.string_at(addrs[0], addrs[-1] - addrs[0] + 8)   # the packed arguments, as read now
        self.calls.append(("ex", (c.gridDimX, c.gridDimY, c.gridDimZ), (c.blockDimX, c.blockDimY, c.blockDimZ),
                           c.sharedMemBytes, c.hStream, bool(c.attrs), c.numAttrs, func.value, addrs, raw, extra))
        return self.rc

    def fast_launch(self, func, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
        self.calls.append(("plain", (gx, gy, gz), getattr(stream, "value", stream)))
        return self.rc

    cuLaunchKernelEx = None   # the launcher's attribute path then launches plainly (with a warning)

    def cuLaunchCooperativeKernel(self, func, gx, gy, gz, bx, by, bz, smem, stream, params):
        self.calls.append(("coop", (gx, gy, gz)))
        return self.rc

    def cuCtxPushCurrent_v2(self, ctx):
        self.calls.append(("push", ctx))
        return 0

    def cuCtxPopCurrent_v2(self, addr):
        self.calls.append(("pop",))
        return 0

    def check(self, rc, what):
        assert rc == 0, what

    def describe(self, rc):
        return f"CUDA_ERROR_FAKE_{rc}: fake failure"


def plan_with_launcher(monkeypatch, art, fake, **launcher_kw):
    monkeypatch.setattr(driver, "_driver", fake)
    plan = ArgPlan(art, stream=lambda d: STREAM, device_type="cpu")
    launcher = driver.KernelLauncher(b"", art.name, plan.arg_kinds, art.block, art.dynamic_smem, art.arch,
                                     **launcher_kw)
    launcher._funcs[-1] = (ctypes.c_void_p(FUNC), CTX)   # "loaded" on the CPU test device -1
    plan.set_launch(launcher)
    return plan, launcher


# ---------------------------------------------------------------- generated checks
def test_constant_shape_is_one_comparison():
    src = ArgPlan(row_artifact(), device_type="cpu").source
    assert "if s0 != (4096, 1024): return _fail(args)" in src
    assert "if s1 != (4096,): return _fail(args)" in src
    assert "len(s0)" not in src and "s0[0]" not in src


def test_symbolic_shape_keeps_per_entry_checks():
    src = ArgPlan(scaled_artifact(), device_type="cpu").source
    assert "if len(s0) != 2" in src and "s0[1] != 64" in src and "y0 = s0[0]" in src


@pytest.mark.parametrize("bad, error, match", [
    ((torch.zeros(4096, 1024, dtype=torch.float16),), TypeError,
     r"row_sum: parameter 'X' \(#0\): expected dtype float32 \(torch.float32\), got torch.float16"),
    ((torch.zeros(4096, 512),), ValueError, r"parameter 'X' \(#0\): X.shape\[1\] must be 1024, got 512"),
    ((torch.zeros(4096 * 1024),), ValueError, r"expected a 2-d tensor of shape \[4096, 1024\], got a 1-d"),
    ((torch.zeros(1024, 4096).t(),), ValueError, r"must be contiguous \(row-major\)"),
    ((torch.zeros(4096, 1024), torch.zeros(4097)), ValueError, r"'Y' \(#1\): Y.shape\[0\] must be 4096, got 4097"),
    (([1.0],), TypeError, r"parameter 'X' \(#0\) must be a torch.Tensor"),
    ((), TypeError, r"row_sum\(\) takes 2 arguments"),
])
def test_errors_stay_precise(bad, error, match):
    plan = ArgPlan(row_artifact(), launch=lambda *a: None, stream=lambda d: 0, device_type="cpu")
    with pytest.raises(error, match=match):
        plan.entry(*bad)


def test_cuda_plan_rejects_cpu_tensors_clearly():
    k = JITKernel(row_artifact())
    with pytest.raises((RuntimeError, ValueError), match=r"no CUDA device|must be a CUDA tensor"):
        k(torch.zeros(4096, 1024))


def test_fast_path_and_diagnoser_agree_on_constant_shapes():
    plan = ArgPlan(row_artifact(), launch=lambda *a: None, stream=lambda d: 0, device_type="cpu")
    good_x, good_y = torch.zeros(4096, 1024), torch.zeros(4096)
    wrong = [None, 3, torch.zeros(4096, 1024, dtype=torch.float64), torch.zeros(4095, 1024), torch.zeros(4096),
             torch.zeros(1, 4096, 1024), torch.zeros(2, 4096, 1024)[1], torch.zeros(4096, 1025)[:, 1:],
             torch.zeros(4096, 1), torch.zeros(4096, 2)]
    for args in [[w] for w in wrong] + [[good_x, w] for w in wrong] + [[w, good_y] for w in wrong]:
        try:
            plan.entry(*args)
        except (TypeError, ValueError) as e:
            assert "internal error" not in str(e)
            continue
        assert plan.diagnose(args) is None
    assert isinstance(plan.entry(good_x), torch.Tensor)
    assert plan.entry(good_x, good_y) is good_y


# ---------------------------------------------------------------- the inline launch
def test_first_call_goes_through_the_launcher_then_launches_inline(monkeypatch):
    fake = FakeDriver()
    plan, launcher = plan_with_launcher(monkeypatch, row_artifact(), fake)
    x = torch.zeros(4096, 1024)
    y = plan.entry(x)
    assert fake.calls == [("plain", (1024, 1, 1), STREAM)]
    assert plan._ns["_ddev"] == -1      # bound to the device of that launch
    y2 = plan.entry(x)
    ex = fake.calls[1]
    assert ex[:8] == ("ex", (1024, 1, 1), (128, 1, 1), 2048, STREAM, False, 0, FUNC)
    assert struct.unpack("<QQ", ex[9]) == (x.data_ptr(), y2.data_ptr()) and ex[10] is None
    assert y.shape == (4096,) and len(fake.calls) == 2
    # the launcher is not called any more: replace it with something that would fail
    monkeypatch.setattr(launcher, "__call__", None, raising=False)
    plan.entry(x, y)
    assert fake.calls[2][0] == "ex" and struct.unpack("<QQ", fake.calls[2][9]) == (x.data_ptr(), y.data_ptr())


def test_inline_config_matches_cuda_h_layout():
    assert struct.calcsize(driver.LAUNCH_CONFIG_FORMAT) == driver.LAUNCH_CONFIG_SPAN
    assert ctypes.sizeof(driver.CUlaunchConfig) <= driver.LAUNCH_CONFIG_SPAN
    raw = struct.pack(driver.LAUNCH_CONFIG_FORMAT, 7, 8, 9, 128, 2, 1, 4096, 0xABCDEF)
    cfg = driver.CUlaunchConfig.from_buffer_copy(raw[:ctypes.sizeof(driver.CUlaunchConfig)])
    assert ((cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ, cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ)
            == (7, 8, 9, 128, 2, 1))
    assert (cfg.sharedMemBytes, cfg.hStream, bool(cfg.attrs), cfg.numAttrs) == (4096, 0xABCDEF, False, 0)


def test_inline_packing_equals_the_launcher_packing(monkeypatch):
    """Scalars, symbols and pointers land at the same offsets and with the same bytes."""
    fake = FakeDriver(nargs=4)
    plan, launcher = plan_with_launcher(monkeypatch, scaled_artifact(), fake)
    a = torch.zeros(300, 64, dtype=torch.float16)
    plan.entry(a, 0.5)                          # through the launcher: its buffer holds the values
    _, _, size = launcher._layout
    start = ctypes.addressof(launcher._buf) + launcher._base
    plain = ctypes.string_at(start, size)
    b = plan.entry(a, 0.5)                      # inline
    ex = fake.calls[-1]
    assert ex[0] == "ex" and ex[1] == (3, 2, 1) and ex[2] == (256, 1, 1)
    first = ex[8][0]
    # the output differs between the two calls; everything else is byte-identical
    fmt, offsets, _ = launcher._layout
    got_plain, got_inline = struct.unpack(fmt, plain), struct.unpack(fmt, ex[9][:size])
    assert got_inline[0] == got_plain[0] == a.data_ptr()
    assert got_inline[1] == b.data_ptr()
    assert got_inline[2:] == got_plain[2:] == (0.5, 300)
    assert [ex[8][k] - first for k in range(len(offsets))] == offsets


def test_other_context_current_falls_back_to_the_launcher(monkeypatch):
    fake = FakeDriver()
    plan, _ = plan_with_launcher(monkeypatch, row_artifact(), fake)
    x = torch.zeros(4096, 1024)
    plan.entry(x)
    plan.entry(x)
    fake.current = 0x1234                       # e.g. a thread where another device is current
    fake.calls.clear()
    plan.entry(x)
    assert [c[0] for c in fake.calls] == ["push", "plain", "pop"]


def test_inline_launch_failure_is_a_located_driver_error(monkeypatch):
    fake = FakeDriver()
    plan, launcher = plan_with_launcher(monkeypatch, row_artifact(), fake)
    x = torch.zeros(4096, 1024)
    plan.entry(x)
    plan.entry(x)
    fake.rc = 719
    with pytest.raises(driver.CudaDriverError, match=r"launching kernel 'row_sum' on cuda:-1 with grid=\(1024, 1, 1\)"
                       r".*CUDA_ERROR_FAKE_719") as e:
        plan.entry(x)
    assert e.value.code == 719
    assert not launcher._lock.locked()


@pytest.mark.filterwarnings("ignore:kernel 'row_sum' uses T.pdl_sync")
@pytest.mark.parametrize("kw", [dict(pdl=True), dict(cooperative=True)])
def test_launches_with_attributes_are_not_inlined(monkeypatch, kw):
    fake = FakeDriver()
    plan, launcher = plan_with_launcher(monkeypatch, row_artifact(), fake, **kw)
    assert launcher.direct_state(-1) is None
    plan.entry(torch.zeros(4096, 1024))
    assert plan._ns["_ddev"] is None


def test_driver_without_launch_kernel_ex_is_not_inlined(monkeypatch):
    fake = FakeDriver()
    fake.fast_launch_ex = None
    plan, _ = plan_with_launcher(monkeypatch, row_artifact(), fake)
    x = torch.zeros(4096, 1024)
    for _ in range(3):
        plan.entry(x)
    assert [c[0] for c in fake.calls] == ["plain"] * 3


def test_l2_window_kernels_keep_the_launcher():
    art = row_artifact()
    art.l2_persist = [{"param": 0, "hit_ratio": 0.5}]
    plan = ArgPlan(art, device_type="cpu")
    assert "_ddev" not in plan.source and "_launch(d, g0, g1, g2, _stream(d), (p0, p1, p0, ))" in plan.source


# ---------------------------------------------------------------- tensor maps
class FakeEncoder:
    def __init__(self, rc=0):
        self.calls, self.rc = [], rc

    def cuTensorMapEncodeTiled(self, tmap, dtype, rank, addr, dims, strides, box, estrides, *enums):
        read = (lambda a, t, n: list((t * n).from_address(a)))
        self.calls.append((dtype, rank, addr, read(dims, ctypes.c_uint64, rank), read(box, ctypes.c_uint32, rank),
                           enums))
        ctypes.memmove(tmap, bytes([addr & 0xFF]) * 128, 128)
        return self.rc

    def check(self, rc, what):
        if rc:
            raise driver.CudaDriverError(f"{what} failed: CUDA_ERROR_INVALID_VALUE: fake", rc, "CUDA_ERROR_INVALID_VALUE")


def test_tensormap_encoder_prepares_once(monkeypatch):
    fake = FakeEncoder()
    monkeypatch.setattr(driver, "_driver", fake)
    enc = driver.tensormap_encoder("float16", [64, 128], [128], [64, 32], 128)
    assert enc(0x1000) == bytes([0x00]) * 128 and enc(0x2040) == bytes([0x40]) * 128
    assert [c[2] for c in fake.calls] == [0x1000, 0x2040]
    assert fake.calls[0][:2] == (6, 2) and fake.calls[0][3:5] == ([64, 128], [64, 32]) and fake.calls[0][5][1] == 3
    # the same bytes as the one-shot encoder
    assert driver.encode_tensormap("float16", [64, 128], [128], [64, 32], 128, 0x2040) == enc(0x2040)
    fake.rc = 1
    with pytest.raises(driver.CudaDriverError, match=r"tensor map \(dtype=float16, dims=\[64, 128\], strides=\[128\], "
                                                     r"box=\[64, 32\], swizzle=128, address=0x3000\)"):
        enc(0x3000)
    with pytest.raises(ValueError, match="swizzle 48"):
        driver.tensormap_encoder("float16", [64], [], [64], 48)(0x1000)


def test_tensormap_lookup_is_inline_and_encodes_through_the_prepared_encoder(monkeypatch):
    fake = FakeEncoder()
    monkeypatch.setattr(driver, "_driver", fake)
    art = row_artifact()
    art.kernel_args = ["X", "tmap_y"]
    art.kernel_arg_types = ["ptr", "tensormap"]
    art.tensormaps = [{"name": "tmap_y", "param": 1, "dtype": "float32", "dims": [4096], "strides": [],
                       "box": [4], "swizzle": 0}]
    seen = []
    plan = ArgPlan(art, launch=lambda *a: seen.append(a[-1]), stream=lambda d: 0, device_type="cpu")
    assert "m1 = _tmc0.get((d, p1)) or _tm0(p1, d)" in plan.source
    x, y = torch.zeros(4096, 1024), torch.zeros(4096)
    plan.entry(x, y)
    plan.entry(x, y)
    assert len(fake.calls) == 1 and fake.calls[0][2] == y.data_ptr()     # encoded once per address
    assert seen[0] == seen[1] == (x.data_ptr(), bytes([y.data_ptr() & 0xFF]) * 128)


def test_inline_launch_can_be_switched_off(monkeypatch):
    monkeypatch.setattr(driver, "INLINE_LAUNCH", False)
    fake = FakeDriver()
    plan, _ = plan_with_launcher(monkeypatch, row_artifact(), fake)
    x = torch.zeros(4096, 1024)
    for _ in range(3):
        plan.entry(x)
    assert [c[0] for c in fake.calls] == ["plain"] * 3 and plan._ns["_ddev"] is None
