"""TileOPs' forms (tests/transform/test_tileops_forms.py) run on the GPU against torch: a view of a
parameter declared before ``with T.Kernel``, a copy of a run-time extent into a cleared shared
tile (rows past the extent stay zero), vectorised shared fills of several types. Skips without a
CUDA GPU."""

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")
import tilelang.language as T  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_view_declared_before_the_kernel():
    @T.prim_func
    def kernel(x: T.Tensor((4, 64, 8, 8), "float16"), y: T.Tensor((4, 64, 8, 8), "float16")):
        x_flat = T.Tensor((4, 64, 64), "float16", x.data)
        y_flat = T.Tensor((4, 64, 64), "float16", y.data)
        with T.Kernel(4, threads=128) as bz:
            for i, j in T.Parallel(64, 64):
                y_flat[bz, i, j] = x_flat[bz, i, j] * T.float16(2)

    x = torch.randn(4, 64, 8, 8, dtype=torch.float16, device="cuda")
    y = torch.empty_like(x)
    tilelang.compile(kernel)(x, y)
    torch.testing.assert_close(y, x * 2)


def test_copy_of_a_run_time_extent_into_a_cleared_tile():
    @T.prim_func
    def kernel(x: T.Tensor((1024, 64), "float16"), lens: T.Tensor((16,), "int32"),
               y: T.Tensor((16, 64, 64), "float16")):
        with T.Kernel(16, threads=128) as bx:
            s = T.alloc_shared((64, 64), "float16")
            n = lens[bx]
            T.clear(s)
            T.copy(x[bx * 64:bx * 64 + n, 0:64], s[0:n, 0:64])
            T.copy(s, y[bx, :, :])

    torch.manual_seed(0)
    x = torch.randn(1024, 64, dtype=torch.float16, device="cuda")
    lens = torch.tensor([0, 1, 5, 16, 17, 31, 32, 33, 48, 63, 64, 2, 9, 40, 60, 64], dtype=torch.int32,
                        device="cuda")
    y = torch.full((16, 64, 64), 7.0, dtype=torch.float16, device="cuda")
    tilelang.compile(kernel)(x, lens, y)
    ref = torch.zeros(16, 64, 64, dtype=torch.float16, device="cuda")
    for b, n in enumerate(lens.tolist()):
        ref[b, :n] = x[b * 64:b * 64 + n]
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "int8", "int32"])
def test_shared_fill_of_each_type(dtype):
    @T.prim_func
    def kernel(y: T.Tensor((48, 64), dtype)):
        with T.Kernel(1, threads=128):
            s = T.alloc_shared((48, 64), dtype)
            T.fill(s, 3)
            T.fill(s[8:16, 32:64], 5)       # a part of the tile: rows at a 16-byte multiple
            T.copy(s, y)

    tdt = getattr(torch, dtype)
    y = torch.zeros(48, 64, dtype=tdt, device="cuda")
    tilelang.compile(kernel)(y)
    ref = torch.full((48, 64), 3, dtype=tdt, device="cuda")
    ref[8:16, 32:64] = 5
    torch.testing.assert_close(y, ref, rtol=0, atol=0)


def test_host_loop_launches_each_stage_in_order():
    @T.prim_func
    def kernel(y: T.Tensor((512,), "float32")):
        for s in range(3):
            with T.Kernel(4, threads=128) as bx:
                for i in T.Parallel(128):
                    y[bx * 128 + i] = y[bx * 128 + i] * 2.0 + s

    y = torch.randn(512, device="cuda")
    ref = ((y * 2 + 0) * 2 + 1) * 2 + 2
    tilelang.compile(kernel)(y)
    torch.testing.assert_close(y, ref)
