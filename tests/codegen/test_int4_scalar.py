"""Scalar int4 / uint4 accesses (tilelang/codegen/subbyte.py): each reads or writes its own
nibble of torch's packed storage, never the whole 32-bit word TVM's codegen prints. Results on a
GPU: tests/gpu/test_vectorize_session11_gpu.py."""

import shutil

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc

HAVE_NVCC = shutil.which("nvcc") is not None


def _body(art) -> str:
    return art.source[art.source.index("__global__"):]


def elementwise(dtype: str = "int4"):
    @T.prim_func
    def main(x: T.Tensor((256,), dtype), y: T.Tensor((256,), T.int32), z: T.Tensor((256,), dtype)):
        with T.Kernel(2, threads=128) as bx:
            t = bx * 128 + T.get_thread_binding()
            y[t] = T.cast(x[t], T.int32)
            z[t] = T.cast(T.cast(x[t], T.int32) * 3 - 1, dtype)     # wraps to 4 bits
    return main


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_scalar_loads_and_stores_address_nibbles(dtype, arch):
    art = tilelang.lower(elementwise(dtype), arch)
    body = _body(art)
    load = "tl::uint4_load(x, " if dtype == "uint4" else "tl::int4_load(x, "
    assert body.count(load) == 2, body
    assert "tl::nibble_store(z, " in body
    assert "/ 8)" not in body and "z[" not in body, body     # no whole-word access of x or z
    assert "const int* __restrict__ x" in body or "const uint* __restrict__ x" in body   # still read-only
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, arch, art.compile_flags)


def tile_copy_and_registers():
    @T.prim_func
    def main(x: T.Tensor((128, 128), T.int4), y: T.Tensor((128, 128), T.int4), r: T.Tensor((128,), T.int32)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((64, 128), T.int4)
            T.copy(x[bx * 64, 0], s)
            T.copy(s, y[bx * 64, 0])
            loc = T.alloc_local((8,), T.int4)
            t = T.get_thread_binding()
            if bx == 0 and t < 16:
                for i in T.serial(8):
                    loc[i] = x[0, t * 8 + i]
                for i in T.serial(8):
                    r[t * 8 + i] = T.cast(loc[7 - i], T.int32)
    return main


def test_register_array_and_tile_copy():
    main = tile_copy_and_registers()
    art = tilelang.lower(main, "sm_90a")
    body = _body(art)
    assert "tl::nibble_store_local(loc, i, tl::int4_load(x, " in body
    assert "tl::int4_load(loc, (7 - i" in body
    # the tile copies move whole 16-byte vectors (their addresses are not rewritten)
    assert body.count("tl::copy_vec<16>(") == 2 and "int4_load(s" not in body, body
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)


def test_vectorized_narrow_int4_store():
    """A vectorized loop of two int4 lanes (upstream's PR #3036 test): TVM has no CUDA type for
    int4x2; each lane goes through its nibble."""
    @T.prim_func
    def main(out: T.Tensor((2,), T.int4)):
        with T.Kernel(1, threads=1):
            for i in T.vectorized(2):
                out[i] = T.cast(-3, T.int4)

    art = tilelang.lower(main, "sm_90a")
    assert "tl::nibble_store(out, " in _body(art)
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)


def ramps(lanes: int, base: int, stride: int):
    @T.prim_func
    def main(source: T.Tensor((64,), T.int4), output: T.Tensor((lanes,), T.int4)):
        with T.Kernel(1, threads=1):
            output[T.Ramp(0, 1, lanes)] = source[T.Ramp(base, stride, lanes)]
    return main


@pytest.mark.parametrize("lanes,base,stride,whole", [(4, 1, 2, False), (8, 4, 1, False), (8, 8, 1, True),
                                                      (16, 16, 1, True)])
def test_vector_ramps_of_int4(lanes, base, stride, whole):
    """Explicit T.Ramp accesses (upstream's PR #3036 test): whole aligned words stay one vector
    access; anything else (a stride, fewer than 8 lanes, a base not on a word) goes lane by lane."""
    art = tilelang.lower(ramps(lanes, base, stride), "sm_90a")
    body = _body(art)
    assert ("nibble_store" not in body) == whole, body
    if not whole:
        assert f"for (int lane = 0; lane < {lanes}; ++lane)" in body
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)


def fragment_roundtrip(dtype: str = "int4"):
    @T.prim_func
    def main(x: T.Tensor((128, 64), dtype), z: T.Tensor((128, 64), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            s = T.alloc_shared((64, 64), dtype)
            f = T.alloc_fragment((64, 64), dtype)
            T.copy(x[bx * 64, 0], f)
            T.copy(f, s)
            for i, j in T.Parallel(64, 64):
                z[bx * 64 + i, j] = T.cast(s[i, j], T.float32)
    return main


@pytest.mark.parametrize("dtype", ["int4", "uint4"])
def test_fragment_copies_move_whole_words(dtype):
    """global -> fragment -> shared: each thread's 16 elements move as two 32-bit words (as packed
    fp4 does), not nibble by nibble."""
    art = tilelang.lower(fragment_roundtrip(dtype), "sm_90a")
    body = _body(art)
    assert body.count("tl::copy_vec<8>(") == 2 and "nibble_store" not in body, body
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)


def behind_a_float_tile():
    """An int4 shared tile placed after a float32 one (16384 bytes): its elements start at
    element 32768 of the pool, two to a byte."""
    @T.prim_func
    def main(a: T.Tensor((128, 64), T.float32), x: T.Tensor((128, 64), T.int4), z: T.Tensor((128, 64), T.float32)):
        with T.Kernel(2, threads=128) as bx:
            sa = T.alloc_shared((64, 64), T.float32)
            s = T.alloc_shared((64, 64), T.int4)
            T.copy(a[bx * 64, 0], sa)
            for i, j in T.Parallel(64, 64):
                s[i, j] = x[bx * 64 + i, j]
            for i, j in T.Parallel(64, 64):
                z[bx * 64 + i, j] = T.cast(s[i, j], T.float32) + sa[i, j]
    return main


def test_packed_shared_tile_offset_counts_elements():
    art = tilelang.lower(behind_a_float_tile(), "sm_90a")
    body = _body(art)
    # (it was element 16384: byte 8192, inside the float tile)
    assert "tl::nibble_store(smem, " in body and body.count(" + 32768)") == 2, body
    if HAVE_NVCC:
        nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)
