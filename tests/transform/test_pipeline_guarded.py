"""The guarded form of ``pipeline.lower_pipelined`` pinned on CPU (the CUDA source): a ``T.Pipelined`` body that is one
``if c:`` around its copies and gemm (a block-sparse main loop) is software-pipelined, with each
iteration's copies issued ahead under ``c`` of that iteration and its gemm run under ``c``, the
commits, waits and barriers unconditional; a condition that reads shared memory keeps the loop as
written. (It used to run as written: every tile's copies waited for before its gemm.)"""

import shutil

import pytest

import tilelang
import tilelang.language as T


def _blocksparse(stages=2, shared_cond=False):
    @T.prim_func
    def k(A: T.Tensor((1024, 1024), "float16"), B: T.Tensor((1024, 1024), "float16"),
          Mask: T.Tensor((8, 8, 32), "bool"), C: T.Tensor((1024, 1024), "float16")):
        with T.Kernel(8, 8, threads=128) as (bx, by):
            a = T.alloc_shared((128, 32), "float16")
            b = T.alloc_shared((32, 128), "float16")
            m = T.alloc_shared((32,), "bool")
            c = T.alloc_fragment((128, 128), "float32")
            T.clear(c)
            if shared_cond:
                T.copy(Mask[by, bx, :], m)
            for kk in T.Pipelined(32, num_stages=stages):
                if (m[kk] if shared_cond else Mask[by, bx, kk]):
                    T.copy(A[by * 128, kk * 32], a)
                    T.copy(B[kk * 32, bx * 128], b)
                    T.gemm(a, b, c)
            T.copy(c, C[by * 128, bx * 128])
    return k


def _loop(src):
    body = src[src.find('extern "C" __global__ void __launch'):]
    head, rest = body.split("for (int kk = 0; kk < 32; ++kk)", 1)
    return head, rest


@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_guarded_body_is_pipelined(target):
    src = tilelang.lower(_blocksparse(), target=target).source
    head, loop = _loop(src)
    # prologue: tile 0's copies under Mask[.., 0], one commit
    assert head.count("tl::cp_async_commit();") == 1
    assert "if (Mask[" in head and "cp_async" in head.split("if (Mask[", 1)[1]
    # in the loop: the next tile's copies under its own mask, then an unconditional commit and
    # wait, and the gemm under this iteration's mask
    nxt = loop.index("if (kk < 31)")
    guard_next = loop.index("if (Mask[", nxt)
    commit = loop.index("tl::cp_async_commit();")
    wait = loop.index("tl::cp_async_wait<1>();")
    guard_now = loop.index("if (Mask[", wait)
    gemm = loop.index("gemm", guard_now)
    assert nxt < guard_next < commit < wait < guard_now < gemm
    assert "+ 1)]" in loop[guard_next:commit].split("\n")[0]        # Mask[.. + kk + 1]
    assert "((kk + 1) & 1)" in loop[guard_next:commit]              # into the other stage
    assert "(kk & 1)" in loop[guard_now:]                            # reads this stage
    assert src.count("tl::cp_async_wait<0>();") >= 1


def test_condition_on_shared_memory_keeps_the_loop_as_written():
    src = tilelang.lower(_blocksparse(shared_cond=True), target="sm_90a").source
    _, loop = _loop(src)
    assert "if (kk < 31)" not in loop
    assert "tl::cp_async_wait<0>();" in loop


def test_one_stage_keeps_the_loop_as_written():
    src = tilelang.lower(_blocksparse(stages=1), target="sm_90a").source
    _, loop = _loop(src)
    assert "if (kk < 31)" not in loop


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not found")
@pytest.mark.parametrize("target", ["sm_90a", "sm_80"])
def test_guarded_pipeline_compiles(target):
    kernel = tilelang.compile(_blocksparse(), target=f"cuda -arch={target}")
    kernel.ensure_cubin()


def test_guard_without_copies_keeps_the_body_as_written():
    from tilelang.tir_utils import walk_stmts
    from tilelang.transform.pipelined_loop import PipelinedLoop, is_pipelined

    @T.prim_func
    def k(A: T.Tensor((128, 32), "float16"), Mask: T.Tensor((32,), "bool"), C: T.Tensor((128, 128), "float32")):
        with T.Kernel(1, threads=128):
            a = T.alloc_shared((128, 32), "float16")
            c = T.alloc_fragment((128, 128), "float32")
            T.copy(A, a)
            T.clear(c)
            for kk in T.Pipelined(32, num_stages=2):
                if Mask[kk]:
                    T.gemm(a, a, c, transpose_B=True)
            T.copy(c, C)

    loops = []
    walk_stmts(k.body, lambda s: loops.append(s) if is_pipelined(s) else None)
    pl = PipelinedLoop.of(loops[0])
    assert pl.guard is None and not pl.producers
    assert len(pl.consumers) == 1 and pl.consumers[0].same_as(loops[0].body)   # the `if`, not its branch
