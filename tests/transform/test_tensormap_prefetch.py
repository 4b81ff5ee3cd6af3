"""With ``tl.enable_tensormap_prefetch`` every tensor map a kernel uses is prefetched once, at
entry, by thread 0, before the barrier initialisation, the producer's own prefetches dropped
(``Lowerer._prefetch_tensormaps``); by default the producer prefetches its maps before its first
load and the TMA store epilogue's map is fetched when the store issues."""

import re
import sys
from pathlib import Path

import tilelang
import tilelang.language as T

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
import gemm  # noqa: E402

SM90 = "cuda -arch=sm_90a"
KEY = "tl.enable_tensormap_prefetch"


def gemm_source(**configs):
    func = gemm.matmul.get_prim_func(512, 512, 512, block_M=128, block_N=128, block_K=64, num_stages=3)
    return tilelang.compile(func, target=SM90, pass_configs=configs).get_kernel_source()


def _body(src):
    """The kernel's body (after the definition's opening brace)."""
    return src[src.index("{", src.rindex("__global__ void")):]


def _maps(src):
    used = set(re.findall(r"TL_TMAP\((\d+)\)", _body(src)))
    fetched = re.findall(r"tl::prefetch_tma_descriptor\(TL_TMAP\((\d+)\)\)", src)
    return used, fetched


def test_every_map_is_prefetched_once():
    src = gemm_source(**{KEY: True})
    used, fetched = _maps(src)
    assert len(used) == 3 and sorted(fetched) == sorted(used)     # A, B (producer) and C's store


def test_every_map_is_prefetched_at_entry_by_thread_zero():
    body = _body(gemm_source(**{KEY: True}))
    entry, rest = body[:body.index("tl::mbarrier_init")], body[body.index("tl::mbarrier_init"):]
    fetched = re.findall(r"tl::prefetch_tma_descriptor\(TL_TMAP\((\d+)\)\)", entry)
    assert sorted(fetched) == ["0", "1", "2"]
    assert re.search(r"if \(\(\(int\)threadIdx.x\) == 0\) \{\s*tl::prefetch_tma_descriptor", entry)
    assert "prefetch_tma_descriptor" not in rest      # the producer's own went


def test_by_default_the_store_map_is_left_cold():
    src = gemm_source()
    used, fetched = _maps(src)
    assert len(fetched) == 2 and len(used - set(fetched)) == 1
    assert "tl::prefetch_tma_descriptor" not in _body(src)[:_body(src).index("tl::mbarrier_init")]


def test_a_kernel_without_maps_is_unchanged():
    @T.prim_func
    def add(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float32)):
        with T.Kernel(8, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i] + 1.0

    src = tilelang.compile(add, target=SM90, pass_configs={KEY: True}).get_kernel_source()
    assert "prefetch_tma_descriptor" not in src and "TL_TMAP" not in _body(src)
