"""Forms from TileOPs (tile-ai's kernel library on upstream TileLang) that ours refused or lowered
into slow code (session 41's probe):

* a view of a parameter declared before ``with T.Kernel`` (``x_flat = T.Tensor(shape, dtype,
  x.data)``, its conv kernels) was "the kernel body must be inside T.Kernel": such views now go
  into the kernel as they do when written inside it;
* a ``T.copy`` whose extent is a run-time value (``x[r0:r0 + n, :]`` into ``s[0:n, :]``, its
  ragged pooling) was TL0601: the tile is copied at the extent's bound (the shared side's room),
  each row guarded, 16 bytes at a time along the constant inner extent;
* ``T.fill`` / ``T.clear`` of a plainly laid out shared tile stored one element per store; now
  16-byte stores of the value repeated (``tl::fill_vec``).
Each kernel's CUDA is compiled with nvcc.
"""

import re

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc


def _body(func, arch="sm_90a"):
    art = tilelang.lower(func, arch)
    assert nvcc.compile_cubin(art.source, art.arch, art.compile_flags)[:4] == b"\x7fELF"
    return art.source[art.source.index('extern "C" __global__'):]


def test_view_of_a_parameter_declared_before_the_kernel():
    @T.prim_func
    def kernel(x: T.Tensor((4, 64, 8, 8), "float16"), y: T.Tensor((4, 64, 8, 8), "float16")):
        x_flat = T.Tensor((4, 64, 64), "float16", x.data)
        y_flat = T.Tensor((4, 64, 64), "float16", y.data)
        with T.Kernel(4, threads=128) as bz:
            for i, j in T.Parallel(64, 64):
                y_flat[bz, i, j] = x_flat[bz, i, j] * T.float16(2)

    body = _body(kernel)
    assert "*(uint4*)(y + " in body and "*(uint4*)(x + " in body     # the views index the parameters


def _ragged(rows_bound=64):
    @T.prim_func
    def kernel(x: T.Tensor((1024, 64), "float16"), lens: T.Tensor((16,), "int32"),
               y: T.Tensor((16, 64, 64), "float16")):
        with T.Kernel(16, threads=128) as bx:
            s = T.alloc_shared((rows_bound, 64), "float16")
            n = lens[bx]
            T.clear(s)
            T.copy(x[bx * 64:bx * 64 + n, 0:64], s[0:n, 0:64])
            T.copy(s, y[bx, :, :])
    return kernel


def test_copy_of_a_run_time_extent_is_guarded_per_row():
    body = _body(_ragged())
    # 64 rows x 64 halfs over 128 threads: 4 rounds of 16-byte vectors, row (it * 16 + tx / 8) < n
    assert re.search(r"if \(\(\(it_1 \* 16\) \+ \(\(\(int\)threadIdx.x\) >> 3\)\) < n\) \{\s*"
                     r"(int cse_v\d+ = [^;]*;\s*)*tl::copy_vec<16>", body)


def test_copy_of_an_unbounded_run_time_extent_is_refused():
    @T.prim_func
    def kernel(x: T.Tensor((1024, 64), "float16"), lens: T.Tensor((16,), "int32"),
               y: T.Tensor((1024, 64), "float16")):
        with T.Kernel(16, threads=128) as bx:
            n = lens[bx]
            T.copy(x[bx * 64:bx * 64 + n, 0:64], y[bx * 64:bx * 64 + n, 0:64])

    try:
        tilelang.lower(kernel, "sm_90a")
    except Exception as e:      # noqa: BLE001 - the located error is the point
        assert "TL0601" in str(e) and "compile-time constants" in str(e)
    else:
        raise AssertionError("a global-to-global copy of an unbounded run-time extent compiled")


def test_fill_of_a_plain_shared_tile_is_16_byte_stores():
    body = _body(_ragged())
    assert "tl::fill_vec<16>((&(((half*)smem)[((it * 1024) + (((int)threadIdx.x) * 8))]))" in body
