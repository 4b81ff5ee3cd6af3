"""The three sm_90a GEMM code paths against torch on an H100/H200: warp-specialised TMA + wgmma
(the default), cp.async-fed wgmma (``tl.disable_warp_specialized``) and mma.sync
(``tl.disable_wgmma``), at shapes where TMA boxes hang over the tensor edges and trip counts are
not multiples of the stage count; plus a warp-specialised kernel whose epilogue goes through
shared memory (named barriers among the consumers), and persistent grids of a few blocks that
each loop over many tiles."""

import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability()[0] != 9,
                                reason="needs an sm_90 GPU (H100 / H200)")
sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))

import tilelang  # noqa: E402
import tilelang.language as T  # noqa: E402

PATHS = {"ws": {}, "ws-cluster": {"tl.cluster_multicast": True}, "cp.async": {"tl.disable_warp_specialized": True},
         "mma.sync": {"tl.disable_wgmma": True}}
CONFIGS = [dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256),
           dict(block_M=128, block_N=128, block_K=32, num_stages=3, threads=128),
           dict(block_M=64, block_N=128, block_K=64, num_stages=2, threads=128)]


@pytest.mark.parametrize("path", list(PATHS))
@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: f"{c['block_M']}x{c['block_N']}x{c['block_K']}s{c['num_stages']}")
@pytest.mark.parametrize("M,N,K,dtype", [(1000, 1000, 1000, "float16"), (129, 257, 96, "bfloat16"),
                                         (256, 512, 64, "float16"), (16, 1024, 320, "bfloat16")])
def test_gemm_paths_match_torch(path, cfg, M, N, K, dtype):
    import gemm

    func = gemm.matmul.get_prim_func(M, N, K, dtype=dtype, **cfg)
    kernel = tilelang.compile(func, out_idx=[-1], pass_configs=PATHS[path])
    if path == "ws" and N % 8 == 0 and K % 8 == 0:
        assert kernel.artifact.block[0] == cfg["threads"] + 128   # the producer warpgroup
    tdt = getattr(torch, dtype)
    a = torch.randn(M, K, device="cuda", dtype=tdt)
    b = torch.randn(K, N, device="cuda", dtype=tdt)
    torch.testing.assert_close(kernel(a, b).float(), a.float() @ b.float(), rtol=2e-2, atol=2e-1)


def _staged_epilogue(M, N, K):
    @T.prim_func
    def kernel(A: T.Tensor((M, K), "float16"), B: T.Tensor((K, N), "float16"), C: T.Tensor((M, N), "float16")):
        with T.Kernel(T.ceildiv(N, 128), T.ceildiv(M, 128), threads=256) as (bx, by):
            A_s = T.alloc_shared((128, 64), "float16")
            B_s = T.alloc_shared((64, 128), "float16")
            C_s = T.alloc_shared((128, 128), "float16")
            C_l = T.alloc_fragment((128, 128), "float32")
            T.use_swizzle(4)
            T.clear(C_l)
            for k in T.Pipelined(T.ceildiv(K, 64), num_stages=3):
                T.copy(A[by * 128, k * 64], A_s)
                T.copy(B[k * 64, bx * 128], B_s)
                T.gemm(A_s, B_s, C_l)
            for i, j in T.Parallel(128, 128):
                C_l[i, j] = T.max(C_l[i, j], 0.0)
            T.copy(C_l, C_s)
            T.copy(C_s, C[by * 128, bx * 128])

    return kernel


@pytest.mark.parametrize("M,N,K", [(512, 512, 512), (300, 640, 200)])
def test_warp_specialised_gemm_with_shared_memory_epilogue(M, N, K):
    kernel = tilelang.compile(_staged_epilogue(M, N, K), out_idx=[-1])
    assert kernel.artifact.block[0] == 384 and len(kernel.artifact.tensormaps) == 3   # A, B loads; C stores
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    ref = torch.relu(a.float() @ b.float())
    for _ in range(3):   # repeated launches reuse the memoised tensor maps
        torch.testing.assert_close(kernel(a, b).float(), ref, rtol=2e-2, atol=2e-1)
    a2 = torch.randn(M, K, device="cuda", dtype=torch.float16)   # new tensors: new tensor maps
    torch.testing.assert_close(kernel(a2, b).float(), torch.relu(a2.float() @ b.float()), rtol=2e-2, atol=2e-1)


@pytest.mark.parametrize("sms", [1, 3, 7])
@pytest.mark.parametrize("M,N,K", [(512, 768, 64), (640, 512, 128), (1000, 1000, 320)])
def test_persistent_gemm_blocks_loop_over_many_tiles(monkeypatch, sms, M, N, K):
    """Grids of 1, 3 and 7 blocks (the launcher's SM count forced down) take many tiles each, the
    mbarrier ring running on across tiles with 1, 2 and 5 k-steps per tile (3 and 4 stages)."""
    import gemm
    from tilelang.jit import adapter_args

    monkeypatch.setitem(adapter_args._SM_COUNTS, torch.cuda.current_device(), sms)
    a = torch.randn(M, K, device="cuda", dtype=torch.float16)
    b = torch.randn(K, N, device="cuda", dtype=torch.float16)
    ref = a.float() @ b.float()
    # 128x256 s4 with the register epilogue (a shared stage would not fit beside its ring: it
    # would run one tile per block), 128x128 s3 over two consumer warp groups with the compiler's
    # epilogue stage + TMA stores (with one, two blocks fit an SM and the grid is not persistent)
    for cfg, configs in ((dict(block_M=128, block_N=256, block_K=64, num_stages=4, threads=256),
                          {"tl.disable_epilogue_staging": True}),
                         (dict(block_M=128, block_N=128, block_K=64, num_stages=3, threads=256),
                          {"tl.disable_block_pair": True})):   # (a pair of blocks per SM is not persistent)
        kernel = tilelang.compile(gemm.matmul.get_prim_func(M, N, K, **cfg), out_idx=[-1], pass_configs=configs)
        assert "NUM_SMS" in kernel.artifact.grid[0]
        torch.testing.assert_close(kernel(a, b).float(), ref, rtol=2e-2, atol=2e-1)
    staged = tilelang.compile(_staged_epilogue(M, N, K), out_idx=[-1])
    assert "NUM_SMS" in staged.artifact.grid[0]
    torch.testing.assert_close(staged(a, b).float(), torch.relu(ref), rtol=2e-2, atol=2e-1)
