"""T.copy extents of tests/transform/test_copy_extents_s42.py run on the GPU against torch: windows
whose extent is constant from the scalars stored before the copy, a slice of a symbolic length
into a fixed-size fragment (zero past it, nothing stored past it), a shared tile from a shorter
run-time source (zero past it), a pipelined loop over an int64 trip count. Skips without a CUDA
GPU."""

import pytest

torch = pytest.importorskip("torch")
tilelang = pytest.importorskip("tilelang")
import tilelang.language as T  # noqa: E402

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_windows_of_stored_bounds():
    @T.prim_func
    def kernel(X: T.Tensor((4096,), "float32"), Y: T.Tensor((4096,), "float32"), start: T.int32):
        with T.Kernel(1, threads=64) as bx:
            s = T.alloc_shared((64,), "float32")
            base = T.alloc_var("int32")
            base = start
            for i in T.serial(4):
                right = base + (i + 1) * 64
                left = right - 64
                T.copy(X[left:right], s)
                for j in T.Parallel(64):
                    s[j] = s[j] * 2
                T.copy(s, Y[left:right])

    x = torch.randn(4096, device="cuda")
    y = torch.zeros(4096, device="cuda")
    tilelang.compile(kernel)(x, y, 100)
    ref = torch.zeros(4096, device="cuda")
    ref[100:356] = x[100:356] * 2
    torch.testing.assert_close(y, ref)


def test_slice_of_a_symbolic_length_into_a_fixed_fragment():
    n = T.dynamic("n")

    @T.prim_func
    def kernel(A: T.Tensor([n], "int32"), B: T.Tensor([n], "int32")):
        with T.Kernel(1, threads=32) as bx:
            f = T.alloc_fragment((8,), "int32")
            T.copy(A[:n - 1], f)
            for i in T.Parallel(8):
                f[i] = f[i] + 1
            T.copy(f, B[1:])

    k = tilelang.compile(kernel)
    for size in (4, 9, 12):
        a = torch.arange(10, 10 + size, dtype=torch.int32, device="cuda")
        b = torch.full((size,), -1, dtype=torch.int32, device="cuda")
        k(a, b)
        ref = torch.full((size,), -1, dtype=torch.int32, device="cuda")
        m = min(size - 1, 8)
        ref[1:1 + m] = a[:m] + 1
        torch.testing.assert_close(b, ref)


def test_shared_tile_from_a_shorter_run_time_source():
    @T.prim_func
    def kernel(X: T.Tensor((512,), "float32"), lens: T.Tensor((8,), "int32"), Y: T.Tensor((8, 64), "float32")):
        with T.Kernel(8, threads=64) as bx:
            s = T.alloc_shared((64,), "float32")
            n = lens[bx]
            T.copy(X[bx * 64:bx * 64 + n], s)
            T.copy(s, Y[bx, :])

    x = torch.randn(512, device="cuda")
    lens = torch.tensor([0, 1, 5, 17, 32, 63, 64, 40], dtype=torch.int32, device="cuda")
    y = torch.full((8, 64), 7.0, device="cuda")
    tilelang.compile(kernel)(x, lens, y)
    ref = torch.zeros(8, 64, device="cuda")
    for b, n in enumerate(lens.tolist()):
        ref[b, :n] = x[b * 64:b * 64 + n]
    torch.testing.assert_close(y, ref)


def test_pipelined_loop_over_an_int64_trip_count():
    @T.prim_func
    def kernel(offsets: T.Tensor((5,), "int64"), X: T.Tensor((1024, 64), "float16"), Y: T.Tensor((4, 64), "float32")):
        with T.Kernel(4, threads=128) as bx:
            s = T.alloc_shared((32, 64), "float16")
            acc = T.alloc_fragment((64,), "float32")
            first = offsets[bx]
            T.clear(acc)
            for k in T.Pipelined((offsets[bx + 1] - first) // 32, num_stages=2):
                T.copy(X[first + k * 32:first + k * 32 + 32, :], s)
                T.reduce_sum(s, acc, dim=0, clear=False)
            T.copy(acc, Y[bx, :])

    offsets = torch.tensor([0, 64, 64, 320, 1024], dtype=torch.int64, device="cuda")
    x = torch.randn(1024, 64, dtype=torch.float16, device="cuda")
    y = torch.empty(4, 64, device="cuda")
    tilelang.compile(kernel)(offsets, x, y)
    ref = torch.stack([x[a:b].float().sum(0) for a, b in zip(offsets[:-1].tolist(), offsets[1:].tolist())])
    torch.testing.assert_close(y, ref, rtol=1e-2, atol=1e-2)
