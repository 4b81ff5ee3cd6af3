"""A pipelined loop's copy of tile k + S, issued under ``if k + S < n``, is bounds-checked with that
condition known as a bound of ``k`` itself (``pipeline._before_end``): the analyzer's integer
bounds take ``k < n - S``, not ``k + S < n``, and without it the check of the last tile stayed in
the CUDA as a conditional cp.async whose predicate folded to ``(bool)1`` (upstream's gqa_decode
split kernel)."""

import pytest

import tilelang
import tilelang.language as T


def _batched_rows(B=8, S=1024, D=64, block=128, stages=2):
    @T.prim_func
    def k(A: T.Tensor((B * S, D), "float16"), O: T.Tensor((B, D), "float32")):
        with T.Kernel(1, B, threads=128) as (bx, bz):
            a = T.alloc_shared((block, D), "float16")
            acc = T.alloc_fragment((block, D), "float32")
            T.clear(acc)
            for i in T.Pipelined(S // block, num_stages=stages):
                T.copy(A[bz * S + i * block:bz * S + (i + 1) * block, :], a)
                for r, c in T.Parallel(block, D):
                    acc[r, c] += a[r, c]
            T.copy(acc[0, :], O[bz, :])
    return k


@pytest.mark.parametrize("configs", [{}, {"tl.enable_pipeline_split_groups": True,
                                          "tl.enable_pipeline_early_release": False}])
def test_the_prefetched_tile_is_proven_in_bounds(configs):
    src = tilelang.lower(_batched_rows(), target="sm_80", pass_configs=configs).source
    assert "cp_async_gs<16>" in src and "cp_async_gs_conditional" not in src
