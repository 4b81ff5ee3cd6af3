"""Results of the session 11 codegen on a GPU: vectorized T.Parallel arithmetic (packed pairs),
negative lanes of vector indices, scalar fp4 stores, scalar int4 / uint4 accesses. CPU side:
tests/codegen/test_vectorize_session11.py, tests/codegen/test_int4_scalar.py."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "codegen"))
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")


@pytest.mark.parametrize("op", ["add", "fma", "fms"])
@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_vectorized_elementwise(op, dtype):
    import tilelang

    from test_vectorize_session11 import elementwise

    kernel = tilelang.compile(elementwise(dtype, width=8, op=op), out_idx=[3])
    tdt = getattr(torch, dtype)
    a, b, c = (torch.randn(128, 8, device="cuda", dtype=tdt) for _ in range(3))
    ref = {"add": lambda: a + b, "fma": lambda: a * b + c, "fms": lambda: a * b - c}[op]()
    tol = {} if dtype == "float32" else {"atol": 1e-2, "rtol": 1e-2}
    torch.testing.assert_close(kernel(a, b, c), ref, **tol)


def test_negative_vector_index_load_and_store():
    import tilelang

    from test_vectorize_session11 import negative_index_load, negative_index_store

    a = torch.arange(1024, device="cuda", dtype=torch.float32)
    b = tilelang.compile(negative_index_load(), out_idx=[1])(a)
    want = torch.tensor([[1022, 1023, 0, 1], [1023, 0, 1, 2], [0, 1, 2, 3], [1, 2, 3, 4]],
                        device="cuda", dtype=torch.float32)
    torch.testing.assert_close(b, want)

    store = tilelang.compile(negative_index_store())
    src = torch.arange(16, device="cuda", dtype=torch.float32).reshape(4, 4)
    out = torch.full((1024,), -1.0, device="cuda")
    store(src, out)
    want = torch.full((1024,), -1.0, device="cuda")
    for t in range(4):
        for k in range(4):
            want[(t - 2 + k) % 1024] = src[t, k]
    torch.testing.assert_close(out, want)


def test_scalar_fp4_scatter_is_byte_exact():
    import tilelang
    import tilelang.language as T

    n = 64

    @T.prim_func
    def main(src: T.Tensor((n, 128), T.float4_e2m1fn), dst: T.Tensor((n, 128), T.float4_e2m1fn),
             perm: T.Tensor((n,), T.int32)):
        with T.Kernel(n, threads=32) as i:
            for k in T.serial(128):
                dst[perm[i], k] = src[i, k]

    kernel = tilelang.compile(main)
    src = torch.randint(0, 256, (n, 64), dtype=torch.uint8, device="cuda").view(torch.int8)
    dst = torch.zeros(n, 64, dtype=torch.int8, device="cuda")
    perm = torch.randperm(n, dtype=torch.int32, device="cuda")
    kernel(src, dst, perm)
    inv = torch.empty_like(perm)
    inv[perm] = torch.arange(n, dtype=torch.int32, device="cuda")
    assert torch.equal(src.view(torch.uint8)[inv.long()], dst.view(torch.uint8))


def _int4_unpack(packed, signed: bool):
    """torch's packed int4 / uint4 storage (two per byte, element 2i in the low nibble) -> int32."""
    b = packed.view(torch.uint8).to(torch.int32)
    v = torch.stack([b & 0xF, b >> 4], dim=-1).flatten(-2)
    return torch.where(v >= 8, v - 16, v) if signed else v


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_scalar_int4_elementwise_reads_and_writes_its_nibble(dtype):
    """Neighbouring threads write the two nibbles of each byte at once (none may lose the other's)."""
    import tilelang

    from test_int4_scalar import elementwise

    kernel = tilelang.compile(elementwise(dtype))
    x = torch.randint(0, 256, (128,), dtype=torch.uint8, device="cuda")
    y = torch.zeros(256, dtype=torch.int32, device="cuda")
    z = torch.zeros(128, dtype=torch.uint8, device="cuda")
    if dtype == "int4":
        x, z = x.view(torch.int8), z.view(torch.int8)
    kernel(x, y, z)
    signed = dtype == "int4"
    want = _int4_unpack(x, signed)
    assert torch.equal(y, want)
    wrapped = (want * 3 - 1) & 0xF
    assert torch.equal(_int4_unpack(z, signed), torch.where(wrapped >= 8, wrapped - 16, wrapped) if signed else wrapped)


def test_int4_tile_copy_and_register_array():
    import tilelang

    from test_int4_scalar import tile_copy_and_registers

    main = tile_copy_and_registers()
    kernel = tilelang.compile(main)
    x = torch.randint(-128, 128, (128, 64), dtype=torch.int8, device="cuda")
    y = torch.zeros_like(x)
    r = torch.zeros(128, dtype=torch.int32, device="cuda")
    kernel(x, y, r)
    assert torch.equal(x, y)
    row = _int4_unpack(x[0], True)
    assert torch.equal(r, row.view(16, 8).flip(1).flatten())


@pytest.mark.parametrize("lanes,base,stride", [(4, 1, 2), (8, 4, 1), (8, 8, 1), (16, 16, 1)])
def test_int4_vector_ramps(lanes, base, stride):
    import tilelang

    from test_int4_scalar import ramps

    kernel = tilelang.compile(ramps(lanes, base, stride), out_idx=[1])
    source = torch.randint(-128, 128, (32,), dtype=torch.int8, device="cuda")
    out = kernel(source)
    want = _int4_unpack(source, True)[base:base + lanes * stride:stride]
    assert torch.equal(_int4_unpack(out, True), want)


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_int4_fragment_roundtrip(dtype):
    import tilelang

    from test_int4_scalar import fragment_roundtrip

    kernel = tilelang.compile(fragment_roundtrip(dtype))
    x = torch.randint(0, 256, (128, 32), dtype=torch.uint8, device="cuda")
    if dtype == "int4":
        x = x.view(torch.int8)
    z = torch.zeros(128, 64, dtype=torch.float32, device="cuda")
    kernel(x, z)
    assert torch.equal(z, _int4_unpack(x, dtype == "int4").float())


def test_int4_shared_tile_behind_a_float_tile():
    import tilelang

    from test_int4_scalar import behind_a_float_tile

    kernel = tilelang.compile(behind_a_float_tile())
    a = torch.randn(128, 64, device="cuda")
    x = torch.randint(-128, 128, (128, 32), dtype=torch.int8, device="cuda")
    z = torch.zeros(128, 64, device="cuda")
    kernel(a, x, z)
    torch.testing.assert_close(z, _int4_unpack(x, True).float() + a)
