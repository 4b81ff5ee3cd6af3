"""The language surface on the GPU: each kernel of language_kernels.py against torch."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs an NVIDIA GPU")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import tilelang  # noqa: E402
import language_kernels as lk  # noqa: E402


def cuda(*shape, dtype=torch.float32):
    return torch.randn(*shape, device="cuda", dtype=dtype)


@pytest.mark.parametrize("M", [64, 100, 1, 1000])
def test_dynamic_m_gemm(M):
    k = tilelang.compile(lk.dynamic_gemm(), out_idx=[-1])
    a, b = cuda(M, 256, dtype=torch.float16), cuda(256, 256, dtype=torch.float16)
    torch.testing.assert_close(k(a, b), a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_split_k_atomic_add():
    k = tilelang.compile(lk.split_k_gemm())
    a, b = cuda(128, 512, dtype=torch.float16), cuda(512, 128, dtype=torch.float16)
    c = torch.zeros(128, 128, device="cuda")
    k(a, b, c)
    torch.testing.assert_close(c, a.float() @ b.float(), rtol=1e-2, atol=1e-2)


def test_element_atomic_histogram():
    k = tilelang.compile(lk.element_atomic())
    x = torch.randint(0, 1000, (4096,), device="cuda", dtype=torch.int32)
    h = torch.zeros(16, device="cuda", dtype=torch.int32)
    k(x, h)
    torch.testing.assert_close(h, torch.bincount((x % 16).long(), minlength=16).int())


def test_reduce_min_abssum_absmax():
    k = tilelang.compile(lk.reductions(), out_idx=[1, 2, 3])
    x = cuda(64, 256)
    mn, asum, amax = k(x)
    torch.testing.assert_close(mn, x.amin(1))
    torch.testing.assert_close(asum, x.abs().sum(1), rtol=1e-4, atol=1e-3)
    torch.testing.assert_close(amax, x.abs().amax(1))


def test_column_reduce():
    k = tilelang.compile(lk.column_reduce(), out_idx=[-1])
    x = cuda(128, 64)
    torch.testing.assert_close(k(x), x.sum(0), rtol=1e-4, atol=1e-3)


def test_cumsum():
    k = tilelang.compile(lk.cumsum_rows(), out_idx=[-1])
    x = cuda(32, 128)
    torch.testing.assert_close(k(x), x.cumsum(1), rtol=1e-4, atol=1e-3)


def test_scalar_features():
    k = tilelang.compile(lk.scalar_features(), out_idx=[-1])
    x = cuda(1024)
    expect = torch.where(x > 0, x + 10.0, x)
    torch.testing.assert_close(k(x), expect)


def test_grid_3d_slices():
    k = tilelang.compile(lk.grid_3d(), out_idx=[-1])
    x = cuda(2, 3, 64, dtype=torch.float16)
    torch.testing.assert_close(k(x), x * 2)


def test_annotated_swizzle_round_trip():
    k = tilelang.compile(lk.annotated_swizzle(), out_idx=[-1])
    x = cuda(64, 64, dtype=torch.float16)
    torch.testing.assert_close(k(x), x)


def test_cache_hit_in_second_process(tmp_path):
    import subprocess

    code = ("import sys, time; sys.path.insert(0, %r); import tilelang, language_kernels as lk; "
            "t = time.time(); tilelang.compile(lk.grid_3d(), out_idx=[-1]); print(time.time() - t)")
    env = dict(__import__("os").environ, TILELANG_CACHE_DIR=str(tmp_path))
    first = float(subprocess.check_output([sys.executable, "-c", code % str(Path(__file__).parent)], env=env))
    second = float(subprocess.check_output([sys.executable, "-c", code % str(Path(__file__).parent)], env=env))
    assert second < first


def test_print_never_changes_results(capfd):
    k = tilelang.compile(lk.printed(), out_idx=[-1])
    x = cuda(4, 8)
    y = k(x)
    torch.cuda.synchronize()
    torch.testing.assert_close(y, x + 1)
    out = capfd.readouterr().out
    assert "s[31] =" in out and "x[0] =" in out and "x00:" in out


def test_eager_style_kernels():
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "jit"))
    import eager_kernels as ek

    a = cuda(256, 128, dtype=torch.float16)
    b = cuda(128, 192, dtype=torch.float16)
    torch.testing.assert_close(ek.matmul(a, b), (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-2)
    x = cuda(256, 64)
    y, s = ek.scale_rows(x, alpha=3.0)
    torch.testing.assert_close(y, x * 3.0)
    torch.testing.assert_close(s, (x * 3.0).sum(1), rtol=1e-4, atol=1e-3)


def test_custom_shared_layout_transpose():
    k = tilelang.compile(lk.custom_layout(), out_idx=[-1])
    x = cuda(32, 64)
    torch.testing.assert_close(k(x), x.T.contiguous())


def test_strided_tensor_view():
    k = tilelang.compile(lk.strided_copy(), out_idx=[-1])
    base = cuda(64, 80, dtype=torch.float16)
    torch.testing.assert_close(k(base[:, :64]), base[:, :64].contiguous())


def test_seed_style_patterns():
    a = cuda(512, 512, dtype=torch.float16)
    bt = cuda(512, 512, dtype=torch.float16)
    bias = cuda(512)
    k = tilelang.compile(lk.ALL["gemm_bias"](), out_idx=[-1])
    torch.testing.assert_close(k(a, bt, bias), a.float() @ bt.float().T + bias, rtol=1e-2, atol=1e-2)

    x, y = cuda(1000), cuda(1000)
    torch.testing.assert_close(tilelang.compile(lk.ALL["elementwise_global"](), out_idx=[-1])(x, y), x * y)

    x16 = cuda(1000, 1000, dtype=torch.float16)
    torch.testing.assert_close(tilelang.compile(lk.ALL["reduce_shared"](), out_idx=[-1])(x16), x16.float().sum(1),
                               rtol=1e-3, atol=1e-2)

    x = cuda(256, 64)
    expect = x.clone()
    for r in range(3):
        expect = expect * 0.5 + r
    torch.testing.assert_close(tilelang.compile(lk.ALL["serial_inner"](), out_idx=[-1])(x), expect)

    x = cuda(4096)
    torch.testing.assert_close(tilelang.compile(lk.ALL["local_vec"](), out_idx=[-1])(x), x * 2)

    b = cuda(512, 512, dtype=torch.float16)
    k = tilelang.compile(lk.ALL["gemm_rs_square"](), out_idx=[-1])
    torch.testing.assert_close(k(a, b), (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-1)


def test_cumsum_fragment_reverse():
    k = tilelang.compile(lk.cumsum_fragment(), out_idx=[-1])
    x = cuda(64, 32)
    torch.testing.assert_close(k(x), x.flip(0).cumsum(0).flip(0), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("name,dtype,rtol,atol", [
    ("gemm_bf16_f32", torch.bfloat16, 1e-2, 1e-2), ("gemm_tf32", torch.float32, 2e-2, 5e-2),
    ("gemm_fp16_accum", torch.float16, 2e-2, 2e-1), ("gemm_bk16_2warps", torch.float16, 1e-2, 1e-1)])
def test_gemm_dtypes(name, dtype, rtol, atol):
    k = tilelang.compile(lk.ALL[name](), out_idx=[-1])
    a, b = cuda(256, 256, dtype=dtype), cuda(256, 256, dtype=dtype)
    torch.testing.assert_close(k(a, b).float(), a.float() @ b.float(), rtol=rtol, atol=atol)


def test_gemm_int8():
    k = tilelang.compile(lk.ALL["gemm_int8"](), out_idx=[-1])
    a = torch.randint(-8, 8, (256, 256), device="cuda", dtype=torch.int8)
    b = torch.randint(-8, 8, (256, 256), device="cuda", dtype=torch.int8)
    torch.testing.assert_close(k(a, b), (a.float() @ b.float()).int())  # exact: |sums| < 2**24


def test_batched_gemm_slices():
    k = tilelang.compile(lk.ALL["batched_gemm"](), out_idx=[-1])
    a, b = cuda(4, 256, 128, dtype=torch.float16), cuda(4, 128, 256, dtype=torch.float16)
    torch.testing.assert_close(k(a, b), torch.bmm(a.float(), b.float()).half(), rtol=1e-2, atol=1e-1)


def test_ragged_parallel_is_safe():
    k = tilelang.compile(lk.ragged_parallel(), out_idx=[-1])
    a = cuda(100, 130)
    torch.testing.assert_close(k(a), a * 2)


def test_upstream_profiler_usage():
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import gemm

    kernel = gemm.matmul(512, 512, 512)
    profiler = kernel.get_profiler(tensor_supply_type=tilelang.TensorSupplyType.Normal)
    profiler.assert_allclose(lambda a, b: (a.float() @ b.float()).half(), rtol=1e-2, atol=1e-2)
    assert profiler.do_bench(lambda a, b: a @ b, warmup=5, rep=10) > 0
    assert profiler.do_bench(warmup=5, rep=10) > 0


def test_tile_copied_into_registers_before_a_warp_specialised_loop():
    """On sm_90a the producer fills the ring while the consumers still read A's tile: the ring
    has bytes of its own (it shared A_s's once, and the result was wrong)."""
    A, B = cuda(1024, 64, dtype=torch.float16), cuda(16 * 64, 64, dtype=torch.float16)
    C = tilelang.compile(lk.a_in_registers(), out_idx=[2])(A, B)
    ref = sum(A.float() @ B[k * 64:(k + 1) * 64].float().T for k in range(16))
    torch.testing.assert_close(C, ref, rtol=1e-3, atol=1e-2)
