"""Kernel arguments that are TMA tensor maps (CUtensorMap by value), on CPU (no GPU needed)."""

import ctypes
import json
import struct

import pytest
import torch

from tilelang.jit import driver
from tilelang.jit.adapter_args import ArgPlan
from tilelang.artifact import ArtifactError, KernelArtifact, ParamSpec
from tilelang.jit.driver import arg_layout

SRC = 'extern "C" __global__ void k() {}'


def tmap(name="A_desc", param=0, dtype="float16", dims=(64, 128), strides=(128,), box=(64, 64), swizzle=128):
    return {"name": name, "param": param, "dtype": dtype, "dims": list(dims), "strides": list(strides),
            "box": list(box), "swizzle": swizzle}


def tma_artifact(tensormaps=None, kernel_args=("A_desc", "C", "n", "B_desc"), kernel_arg_types="auto",
                 out_idx=(2,)):
    """C[128, 64] = f(A[128, 64], B[64, 64]) with A and B read through tensor maps only."""
    if tensormaps is None:
        tensormaps = [tmap("A_desc", 0), tmap("B_desc", 1, dims=(64, 64), box=(64, 32), swizzle=128)]
    if kernel_arg_types == "auto":
        kernel_arg_types = ["tensormap" if a.endswith("_desc") else "ptr" if a == "C" else "int32"
                            for a in kernel_args]
    return KernelArtifact(
        name="tma_gemm", source=SRC,
        params=[ParamSpec("A", "tensor", "float16", [128, 64]), ParamSpec("B", "tensor", "float16", [64, 64]),
                ParamSpec("C", "tensor", "float32", [128, 64]), ParamSpec("n", "scalar", "int32", [])],
        kernel_args=list(kernel_args), grid=["2", "1", "1"], block=[128, 1, 1], dynamic_smem=0, arch="sm_90a",
        symbols={}, out_idx=list(out_idx), kernel_arg_types=kernel_arg_types, tensormaps=tensormaps)


class Recorder:
    def __init__(self):
        self.calls = []

    def __call__(self, device, gx, gy, gz, stream, values):
        self.calls.append(((gx, gy, gz), stream, values))


class FakeEncoder:
    def __init__(self):
        self.calls = []

    def __call__(self, dtype, dims, strides, box, swizzle, address):
        self.calls.append((dtype, dims, strides, box, swizzle, address))
        return struct.pack("<QQ", address, len(self.calls)) + bytes(112)


def cpu_plan(art):
    rec, enc = Recorder(), FakeEncoder()
    return ArgPlan(art, launch=rec, stream=lambda d: 7, device_type="cpu", encode_tensormap=enc), rec, enc


# ---------------------------------------------------------------- artifact
def test_round_trip_keeps_tensormaps():
    art = tma_artifact().check()
    back = KernelArtifact.from_json(art.to_json())
    assert back.tensormaps == art.tensormaps
    assert back.to_json() == art.to_json()
    assert json.loads(art.to_json())["tensormaps"][1]["box"] == [64, 32]
    assert back.tensormap_index("B_desc") == 1


def test_old_json_without_tensormaps_loads_empty():
    art = tma_artifact(tensormaps=[], kernel_args=["C", "n"])
    data = json.loads(art.to_json())
    del data["tensormaps"]
    back = KernelArtifact.from_dict(data).check()
    assert back.tensormaps == []


def test_kernel_arg_types_default_to_tensormap():
    plan, _, _ = cpu_plan(tma_artifact(kernel_arg_types=None))
    assert plan.arg_kinds == ["tensormap", "ptr", "int32", "tensormap"]
    assert plan.arg_refs == [("tmap", 0), ("ptr", 2), ("scalar", 3), ("tmap", 1)]


@pytest.mark.parametrize("change, match", [
    (dict(strides=[120]), r"tensormaps\[0\] 'A_desc': strides\[0\] = 120 bytes is not a positive multiple of 16"),
    (dict(box=[64, 512]), r"'A_desc': box\[1\] = 512 is not in \[1, 256\]"),
    (dict(box=[128, 64]), r"'A_desc': box\[0\] \* element size = 256 bytes exceeds the swizzle width of 128"),
    (dict(box=[4, 64], swizzle=0), r"'A_desc': box\[0\] \* element size = 8 bytes is not a multiple of 16"),
    (dict(param=9), r"'A_desc': param 9 is not a parameter index"),
    (dict(param=3), r"'A_desc': param 3 is the scalar parameter 'n', not a tensor"),
    (dict(swizzle=16), r"'A_desc': swizzle 16 is not one of"),
    (dict(dtype="float32"), r"'A_desc': dtype float32 \(4 B\) and param 'A'"),
    (dict(dtype="complex"), r"'A_desc': dtype 'complex' is not one of"),
    (dict(dims=[1, 1, 1, 1, 1, 1], strides=[16] * 5, box=[1] * 6), r"'A_desc': dims .* has rank 6"),
    (dict(strides=[128, 256]), r"'A_desc': strides \[128, 256\] must have rank - 1 = 1 entries"),
    (dict(dims=[64, 256]), r"'A_desc': dims \[64, 256\] .* span 32768 bytes, more than the 16384 bytes"),
    (dict(name="A"), r"'A': name clashes with a parameter"),
    (dict(name="B_desc"), r"tensormaps\[1\] 'B_desc': name is not unique"),
    (dict(dims=[64.0, 128]), r"'A_desc': dims .* is not a list of ints"),
])
def test_check_rejects_bad_tensormaps(change, match):
    entries = [tmap("A_desc", 0), tmap("B_desc", 1, dims=(64, 64), box=(64, 32))]
    entries[0].update(change)
    if change.get("name") == "B_desc":
        entries[1] = tmap("B_desc", 1, dims=(64, 64), box=(64, 32))
        kargs = ("B_desc", "C", "n")
    else:
        kargs = ("C", "n", "B_desc")
    with pytest.raises(ArtifactError, match=match):
        tma_artifact(tensormaps=entries, kernel_args=kargs).check()


def test_check_rejects_missing_field_and_small_align():
    entry = tmap()
    del entry["swizzle"]
    with pytest.raises(ArtifactError, match=r"tensormaps\[0\] 'A_desc': has fields"):
        tma_artifact(tensormaps=[entry], kernel_args=["A_desc"]).check()
    art = tma_artifact(tensormaps=[tmap()], kernel_args=["A_desc"])
    art.params[0].align = 8
    with pytest.raises(ArtifactError, match=r"'A_desc': param 'A' has align 8"):
        art.check()


def test_check_kernel_arg_types_for_tensormaps():
    with pytest.raises(ArtifactError, match=r"kernel argument 'A_desc' cannot be passed as 'ptr'"):
        tma_artifact(kernel_arg_types=["ptr", "ptr", "int32", "tensormap"]).check()
    with pytest.raises(ArtifactError, match=r"kernel argument 'C' cannot be passed as 'tensormap'"):
        tma_artifact(kernel_arg_types=["tensormap", "tensormap", "int32", "tensormap"]).check()
    with pytest.raises(ArtifactError, match=r"kernel_args entry 'X_desc' is neither"):
        tma_artifact(kernel_args=["A_desc", "X_desc"], kernel_arg_types=None).check()


# ---------------------------------------------------------------- ArgPlan
def test_plan_passes_encoded_tensormaps_and_memoises():
    plan, rec, enc = cpu_plan(tma_artifact())
    assert "_tm0(p0, d)" in plan.source and "_tm1(p1, d)" in plan.source
    a, b = torch.zeros(128, 64, dtype=torch.float16), torch.zeros(64, 64, dtype=torch.float16)
    c = plan.entry(a, b, 5)
    assert c.shape == (128, 64) and c.dtype == torch.float32
    (grid, stream, values), = rec.calls
    assert grid == (2, 1, 1) and stream == 7
    assert len(values) == 4
    assert type(values[0]) is bytes and len(values[0]) == 128
    assert type(values[3]) is bytes and len(values[3]) == 128
    assert values[1] == c.data_ptr() and values[2] == 5
    assert struct.unpack_from("<Q", values[0])[0] == a.data_ptr()
    assert struct.unpack_from("<Q", values[3])[0] == b.data_ptr()
    assert enc.calls == [("float16", (64, 128), (128,), (64, 64), 128, a.data_ptr()),
                         ("float16", (64, 64), (128,), (64, 32), 128, b.data_ptr())]

    # same tensors again: no re-encoding, identical blobs
    plan.entry(a, b, 6)
    assert len(enc.calls) == 2
    assert rec.calls[1][2][0] == values[0] and rec.calls[1][2][3] == values[3]

    # a different A: only A's map is re-encoded
    a2 = torch.ones(128, 64, dtype=torch.float16)
    plan.entry(a2, b, 6)
    assert len(enc.calls) == 3 and enc.calls[2][5] == a2.data_ptr()
    assert struct.unpack_from("<Q", rec.calls[2][2][0])[0] == a2.data_ptr()
    assert rec.calls[2][2][3] == values[3]


def test_plan_all_params_and_tensormap_of_output():
    # the map is over the output C, which is also passed as a pointer; the call passes all params
    maps = [tmap("C_desc", 2, dtype="float32", dims=(64, 128), strides=(256,), box=(32, 64), swizzle=128)]
    art = tma_artifact(tensormaps=maps, kernel_args=["A", "C_desc", "C"], kernel_arg_types=None)
    plan, rec, enc = cpu_plan(art)
    assert plan.arg_kinds == ["ptr", "tensormap", "ptr"]
    a, b = torch.zeros(128, 64, dtype=torch.float16), torch.zeros(64, 64, dtype=torch.float16)
    c = torch.zeros(128, 64)
    assert plan.entry(a, b, c, 1) is c
    values = rec.calls[0][2]
    assert values[0] == a.data_ptr() and values[2] == c.data_ptr()
    assert struct.unpack_from("<Q", values[1])[0] == c.data_ptr()
    # inputs only: C is allocated, then its map is encoded over the new tensor
    out = plan.entry(a, b, 1)
    assert enc.calls[-1] == ("float32", (64, 128), (256,), (32, 64), 128, out.data_ptr())


def test_memo_is_bounded():
    plan, rec, enc = cpu_plan(tma_artifact(tensormaps=[tmap()], kernel_args=["A_desc"], kernel_arg_types=None,
                                           out_idx=()))
    tm = plan._ns["_tm0"]
    for k in range(200):
        tm(16 * k, 0)
    assert len(tm.cache) <= 64 and len(enc.calls) == 200
    tm(16 * 199, 0)
    assert len(enc.calls) == 200
    tm(16 * 199, 1)  # another device: encoded again
    assert len(enc.calls) == 201


def test_misaligned_tensor_under_a_tensormap_is_diagnosed():
    plan, rec, _ = cpu_plan(tma_artifact())
    base = torch.zeros(128 * 64 + 1, dtype=torch.float16)
    a = base[1:].view(128, 64)  # 2-byte offset
    b = torch.zeros(64, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"parameter 'A' \(#0\): data pointer .* is not 16-byte aligned"):
        plan.entry(a, b, 1)
    with pytest.raises(TypeError, match=r"parameter 'B' \(#1\): expected dtype float16"):
        plan.entry(torch.zeros(128, 64, dtype=torch.float16), b.float(), 1)
    assert rec.calls == []


def test_encoder_errors_name_the_tensormap():
    def bad(*args):
        raise driver.CudaDriverError("cuTensorMapEncodeTiled failed: CUDA_ERROR_INVALID_VALUE", 1,
                                     "CUDA_ERROR_INVALID_VALUE")

    art = tma_artifact()
    plan = ArgPlan(art, launch=Recorder(), stream=lambda d: 0, device_type="cpu", encode_tensormap=bad)
    with pytest.raises(driver.CudaDriverError, match=r"tma_gemm: encoding tensor map 'A_desc' over parameter 'A'"):
        plan.entry(torch.zeros(128, 64, dtype=torch.float16), torch.zeros(64, 64, dtype=torch.float16), 1)
    short = ArgPlan(art, launch=Recorder(), stream=lambda d: 0, device_type="cpu",
                   encode_tensormap=lambda *a: b"x" * 64)
    with pytest.raises(RuntimeError, match=r"not 128 bytes"):
        short.entry(torch.zeros(128, 64, dtype=torch.float16), torch.zeros(64, 64, dtype=torch.float16), 1)


def test_default_encoder_is_the_driver():
    plan = ArgPlan(tma_artifact(), launch=Recorder(), device_type="cpu")
    assert plan.encode_tensormap is driver.encode_tensormap


# ---------------------------------------------------------------- driver packing
def test_arg_layout_and_packing_of_tensormaps():
    kinds = ["ptr", "int32", "tensormap", "int64", "tensormap", "int32"]
    fmt, offsets, size = arg_layout(kinds)
    assert offsets == [0, 8, 64, 192, 256, 384]
    assert size == 388
    blob1, blob2 = bytes(range(128)), bytes(range(128, 256))
    buf = ctypes.create_string_buffer(size + 64)
    base = -ctypes.addressof(buf) % 64
    struct.Struct(fmt).pack_into(buf, base, 0xDEAD0000, -3, blob1, 2**40, blob2, 9)
    raw = buf.raw[base:base + size]
    assert struct.unpack_from("<Q", raw, 0)[0] == 0xDEAD0000
    assert struct.unpack_from("<i", raw, 8)[0] == -3
    assert raw[64:192] == blob1 and raw[256:384] == blob2
    assert struct.unpack_from("<q", raw, 192)[0] == 2**40
    assert struct.unpack_from("<i", raw, 384)[0] == 9


def test_launcher_packs_tensormap_values(monkeypatch):
    class Fake:
        def __init__(self):
            self.seen = None

        def fast_get_current(self, ptr):
            ptr.contents.value = 0xC0
            return 0

        def fast_launch(self, f, gx, gy, gz, bx, by, bz, smem, stream, params, extra):
            ptrs = (ctypes.c_void_p * 3).from_address(params.value)
            self.seen = [ptrs[0] % 64, ctypes.c_uint64.from_address(ptrs[0]).value,
                         ptrs[1] % 64, ctypes.string_at(ptrs[1], 128), ctypes.c_int32.from_address(ptrs[2]).value]
            return 0

    fake = Fake()
    monkeypatch.setattr(driver, "_driver", fake)
    launcher = driver.KernelLauncher(b"cubin", "k", ["ptr", "tensormap", "int32"], (128, 1, 1), 0, "sm_90a")
    launcher._funcs[0] = (ctypes.c_void_p(0xF0), 0xC0)
    blob = bytes(range(1, 129))
    launcher(0, 1, 1, 1, 0, (0x1000, blob, 42))
    assert fake.seen == [0, 0x1000, 0, blob, 42]


# ---------------------------------------------------------------- encode_tensormap
class FakeEncodeDriver:
    def __init__(self, rc=0):
        self.rc, self.calls = rc, []

    def cuTensorMapEncodeTiled(self, tmap, dtype, rank, addr, gdim, gstrides, box, estrides,
                               interleave, swizzle, l2, oob):
        rd = lambda a, t, n: list((t * n).from_address(a))  # noqa: E731
        self.calls.append(dict(aligned=tmap % 64 == 0, dtype=dtype, rank=rank, addr=addr,
                               dims=rd(gdim, ctypes.c_uint64, rank), strides=rd(gstrides, ctypes.c_uint64, rank - 1),
                               box=rd(box, ctypes.c_uint32, rank), estrides=rd(estrides, ctypes.c_uint32, rank),
                               interleave=interleave, swizzle=swizzle, l2=l2, oob=oob))
        ctypes.memmove(tmap, bytes(range(7, 135)), 128)
        return self.rc

    def check(self, rc, what):
        if rc:
            raise driver.CudaDriverError(f"{what} failed: CUDA_ERROR_INVALID_VALUE: invalid argument", rc,
                                         "CUDA_ERROR_INVALID_VALUE")


@pytest.mark.parametrize("dtype, code", [("float16", 6), ("bfloat16", 9), ("float32", 7), ("uint8", 0),
                                         ("int32", 3), ("int64", 5), ("float64", 8), ("float8_e4m3fn", 0)])
def test_encode_tensormap_enums(monkeypatch, dtype, code):
    fake = FakeEncodeDriver()
    monkeypatch.setattr(driver, "_driver", fake)
    out = driver.encode_tensormap(dtype, [64, 128, 3], [256, 32768], [32, 16, 1], 64, 0x7F0000001000)
    assert out == bytes(range(7, 135))
    (c,) = fake.calls
    assert c == dict(aligned=True, dtype=code, rank=3, addr=0x7F0000001000, dims=[64, 128, 3],
                     strides=[256, 32768], box=[32, 16, 1], estrides=[1, 1, 1], interleave=0, swizzle=2, l2=2, oob=0)


@pytest.mark.parametrize("swizzle, code", [(0, 0), (32, 1), (64, 2), (128, 3)])
def test_encode_tensormap_swizzle_and_rank1(monkeypatch, swizzle, code):
    fake = FakeEncodeDriver()
    monkeypatch.setattr(driver, "_driver", fake)
    driver.encode_tensormap("float16", [1024], [], [16], swizzle, 0x1000)
    assert fake.calls[0]["swizzle"] == code and fake.calls[0]["rank"] == 1 and fake.calls[0]["strides"] == []


def test_encode_tensormap_errors(monkeypatch):
    fake = FakeEncodeDriver(rc=1)
    monkeypatch.setattr(driver, "_driver", fake)
    with pytest.raises(driver.CudaDriverError, match=r"cuTensorMapEncodeTiled for tensor map \(dtype=float16, "
                                                     r"dims=\[64, 64\], strides=\[128\], box=\[64, 64\], "
                                                     r"swizzle=128, address=0x1000\).*INVALID_VALUE"):
        driver.encode_tensormap("float16", [64, 64], [128], [64, 64], 128, 0x1000)
    with pytest.raises(ValueError, match="swizzle 48"):
        driver.encode_tensormap("float16", [64], [], [64], 48, 0x1000)
    with pytest.raises(ValueError, match="dtype 'complex64'"):
        driver.encode_tensormap("complex64", [64], [], [64], 0, 0x1000)
    fake.cuTensorMapEncodeTiled = None  # an old driver without the entry point
    with pytest.raises(driver.CudaDriverError, match="lacks cuTensorMapEncodeTiled"):
        driver.encode_tensormap("float16", [64], [], [64], 0, 0x1000)


def test_encode_tensormap_without_gpu(monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    monkeypatch.setattr(driver, "_driver", None)
    with pytest.raises(driver.NoCudaError, match="^no CUDA device"):
        driver.encode_tensormap("float16", [64], [], [64], 0, 0x1000)
