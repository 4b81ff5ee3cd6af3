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


def _gemv(blocks, steps=32):
    """y = A x, one row per thread: each of ``steps`` iterations loads 8 halves of A and of x into
    registers (the upstream gemv's shape)."""
    n, k = blocks * 128, steps * 8

    @T.prim_func
    def main(A: T.Tensor((n, k), T.float16), x: T.Tensor((k,), T.float16), y: T.Tensor((n,), T.float32)):
        with T.Kernel(blocks, threads=128) as bx:
            a = T.alloc_local((8,), T.float16)
            xv = T.alloc_local((8,), T.float16)
            acc = T.alloc_local((1,), T.float32)
            tx = T.thread_binding(0, 128, thread="threadIdx.x")
            acc[0] = 0.0
            for ko in T.serial(steps):
                for v in T.vectorized(8):
                    a[v] = A[bx * 128 + tx, ko * 8 + v]
                for v in T.vectorized(8):
                    xv[v] = x[ko * 8 + v]
                for v in T.serial(8):
                    acc[0] += T.cast(a[v], T.float32) * T.cast(xv[v], T.float32)
            y[bx * 128 + tx] = acc[0]

    return main


def _shared_scan(blocks):
    """A loop that reads shared memory only (its global loads sit outside any loop): a row's
    running sum, as gdn's cumsum computes it."""
    n = blocks * 64

    @T.prim_func
    def main(G: T.Tensor((n,), T.float32), H: T.Tensor((n,), T.float32)):
        with T.Kernel(blocks, threads=128) as bx:
            s = T.alloc_shared((64,), T.float32)
            T.copy(G[bx * 64], s)
            T.cumsum(s, dim=0)
            T.copy(s, H[bx * 64])

    return main


def _global_to_global(blocks):
    """A T.copy from global memory to global memory (attention backward's dQ postprocess: float
    to half, 64 elements a thread): a loop of loads stored straight back to global memory."""
    n = blocks * 64

    @T.prim_func
    def main(A: T.Tensor((n, 128), T.float32), B: T.Tensor((n, 128), T.float16)):
        with T.Kernel(blocks, threads=128) as bx:
            T.copy(A[bx * 64:(bx + 1) * 64, :], B[bx * 64:(bx + 1) * 64, :])

    return main


def test_a_register_streaming_kernel_declares_one_block_per_sm():
    """engine/lower.register_streaming: a gemv (global loads into registers in a loop, no shared
    tiles or tensor cores) or a loop copying global memory to global memory, over many waves, is
    declared __launch_bounds__(T, 1); a kernel whose
    loop reads shared memory only, or a pipelined GEMM, keeps (T); the pass config turns it off."""
    many = 4096     # blocks: many waves, so the single-wave bound does not apply
    assert "__launch_bounds__(128, 1)" in tilelang.lower(_gemv(many), "sm_90a").kernel_source
    assert "__launch_bounds__(128, 1)" in tilelang.lower(_gemv(many), "sm_80").kernel_source
    off = tilelang.lower(_gemv(many), "sm_90a", pass_configs={"tl.disable_streaming_launch_bound": True})
    assert "__launch_bounds__(128)" in off.kernel_source
    assert "__launch_bounds__(128)" in tilelang.lower(_gemv(many, steps=1), "sm_90a").kernel_source   # no loop
    assert "__launch_bounds__(128)" in tilelang.lower(_shared_scan(many), "sm_90a").kernel_source
    assert "__launch_bounds__(128)" in tilelang.lower(_doubling(8192), "sm_90a").kernel_source
    # global to global, 64 elements a thread in a loop: its loads issued ahead too
    assert "__launch_bounds__(128, 1)" in tilelang.lower(_global_to_global(many), "sm_90a").kernel_source


def test_a_pipelined_gemm_is_not_register_streaming():
    M = N = K = 1024

    @T.prim_func
    def gemm(A: T.Tensor((M, K), T.float16), B: T.Tensor((K, N), T.float16), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // 64, M // 64, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 32), T.float16)
            B_s = T.alloc_shared((32, 64), T.float16)
            C_f = T.alloc_fragment((64, 64), T.float32)
            T.clear(C_f)
            for k in T.Pipelined(K // 32, num_stages=2):
                T.copy(A[by * 64, k * 32], A_s)
                T.copy(B[k * 32, bx * 64], B_s)
                T.gemm(A_s, B_s, C_f)
            T.copy(C_f, C[by * 64, bx * 64])

    import re

    assert "__launch_bounds__(128)" in tilelang.lower(gemm, "sm_80").kernel_source
    # (sm_90a: warp-specialised, two blocks per SM: (256, 2))
    assert not re.search(r"__launch_bounds__\(\d+, 1\)", tilelang.lower(gemm, "sm_90a").kernel_source)


def test_repeated_barriers_are_dropped():
    """thread_sync.drop_repeated_barriers: T.cumsum on a shared tile opens and closes with a
    barrier of its own next to the ones the sequence plan puts there; back to back, one of each
    pair goes (gdn's cumsum had three in a row, then two)."""
    import re

    src = tilelang.lower(_shared_scan(4), "sm_90a").kernel_source
    body = src[src.index("{", src.index("__global__")):]
    assert not re.search(r"__syncthreads\(\);\s*__syncthreads\(\);", body)
    assert body.count("__syncthreads();") == 2      # after the load, after the scan


def test_repeated_barrier_rules_on_plain_tir():
    """B; B -> B; B; fence; B -> fence; B; fence; fence -> fence; a barrier apart from another by
    a store stays; a named barrier is not the block barrier."""
    from tvm import tirx

    from tilelang.tir_utils import evaluate_extern, seq
    from tilelang.transform.thread_sync import drop_repeated_barriers

    def B():
        return evaluate_extern("__syncthreads")

    def F():
        return evaluate_extern("tl::fence_proxy_async")

    def N():
        return evaluate_extern("tl::named_barrier_sync", 1, 256)

    buf = tirx.decl_buffer((4,), "float32", "s", scope="shared")
    store = tirx.BufferStore(buf, tirx.FloatImm("float32", 0.0), [tirx.IntImm("int32", 0)])

    def names(stmt):
        out = []

        def flat(s):
            if isinstance(s, tirx.SeqStmt):
                for x in s.seq:
                    flat(x)
            elif isinstance(s, tirx.Evaluate):
                out.append({"__syncthreads": "B", "tl::fence_proxy_async": "F"}.get(str(s.value.args[0].value), "N"))
            else:
                out.append("S")

        flat(stmt)
        return "".join(out)

    assert names(drop_repeated_barriers(seq([store, B(), seq([B(), store]), B()]))) == "SBSB"
    assert names(drop_repeated_barriers(seq([store, B(), F(), B(), store]))) == "SFBS"
    assert names(drop_repeated_barriers(seq([store, F(), B(), F(), B()]))) == "SFB"
    assert names(drop_repeated_barriers(seq([store, B(), N(), B()]))) == "SBNB"
    assert names(drop_repeated_barriers(seq([store, N(), N()]))) == "SN"


def _clean_rows(block_k=256, threads=128):
    """Upstream's clean_logits_ in small: each block writes -inf over a row's columns outside
    [lo, hi), walking the row in chunks of ``block_k`` with a loop per thread; the row length is
    dynamic, so the last chunk may overhang it."""
    n = T.dynamic("n")
    m = T.dynamic("m")

    @T.prim_func
    def clean(L: T.Tensor((m, n), T.float32), Lo: T.Tensor((m,), T.int32), Hi: T.Tensor((m,), T.int32)):
        with T.Kernel(m, threads=threads) as bx:
            tx = T.thread_binding(0, threads, thread="threadIdx.x")
            lo = Lo[bx]
            hi = Hi[bx]
            for c in T.serial(T.ceildiv(n, block_k)):
                for k in T.serial(block_k // threads):
                    idx = c * block_k + k * threads + tx
                    if idx < lo or idx >= hi:
                        L[bx, idx] = -T.infinity(T.float32)

    return clean


def test_a_store_outside_t_parallel_is_guarded():
    """lower_tile_ops.global_guard: a global store that a thread's own loop can carry past the
    row's end (a dynamic length) is skipped there, as upstream's safe-memory-access pass does;
    a store the analyzer proves in bounds (the row's first element, an `if` that already
    checks) gets no guard; tl.disable_safe_memory_access drops it."""
    import re

    src = tilelang.lower(_clean_rows(), "sm_90a").kernel_source
    assert re.search(r"if \(\(\(\(c \* 256\) \+ \(k \* 128\)\) \+ \(\(int\)threadIdx\.x\)\) < n\) \{\s*L\[", src), src
    off = tilelang.lower(_clean_rows(), "sm_90a", pass_configs={"tl.disable_safe_memory_access": True})
    assert "< n)" not in off.kernel_source

    @T.prim_func
    def first(L: T.Tensor((64, 32), T.float32)):
        with T.Kernel(64, threads=32) as bx:
            tx = T.thread_binding(0, 32, thread="threadIdx.x")
            for k in T.serial(2):
                if k * 32 + tx < 32:
                    L[bx, k * 32 + tx] = 1.0

    body = tilelang.lower(first, "sm_90a").kernel_source
    body = body[body.index("__global__"):]
    assert body.count("if (") == 1, body       # the user's own check (simplified), not a second one


def test_an_assumption_holds_in_its_branch_only():
    """A T.assume inside an `if` spares the guard of a store after it in that branch, not of one
    after the `if` (lower_tile_ops: the assumptions of a branch or loop end with it)."""
    N = T.dynamic("N")

    @T.prim_func
    def k(A: T.Tensor((N,), T.float32), lo: T.int32, flag: T.int32):
        with T.Kernel(1, threads=32):
            if flag > 0:
                T.assume(lo >= 0 and lo < N)
                A[lo] = 1.0
            A[lo] = 2.0

    body = tilelang.lower(k, "sm_80").kernel_source
    body = body[body.index("__global__"):]
    assert body.count("if ((0 <= lo) && (lo < N))") == 1, body     # the store after the `if` only
