"""Gathered global-to-shared copies in a ``T.Pipelined`` loop (sparse attention's
``KV_shared[i, d] = KV[Indices[i], d]``) are producers of the software pipeline: issued a stage
ahead as 16-byte cp.async (zero-filled where the gathered row is out of bounds), into a staged
buffer (``pipelined_loop.gather_width``, ``lower_gather``). Nests that do not fit stay as they
were: consumers, lowered as plain stores."""

import pytest

import tilelang
import tilelang.language as T


def _body(src):
    return src[src.index("__global__"):]


def _sparse(stages=2, let=False, write_source=False, frag_index=False, threads=128):
    """One block: S = Q K^T over top-k gathered rows of KV, 64 rows per iteration."""
    N, D, TOPK, BI = 1024, 128, 256, 64

    @T.prim_func
    def kernel(Q: T.Tensor((64, D), T.bfloat16), KV: T.Tensor((N, D), T.bfloat16),
               Idx: T.Tensor((TOPK,), T.int32), Out: T.Tensor((64, BI), T.float32)):
        with T.Kernel(1, threads=threads) as bx:
            q_s = T.alloc_shared((64, D), T.bfloat16)
            kv_s = T.alloc_shared((BI, D), T.bfloat16)
            acc = T.alloc_fragment((64, BI), T.float32)
            rows = T.alloc_fragment((BI,), T.int32)
            T.copy(Q, q_s)
            T.fill(acc, 0)
            for i in T.Pipelined(TOPK // BI, num_stages=stages):
                if frag_index:
                    for r in T.Parallel(BI):
                        rows[r] = Idx[i * BI + r]
                    for r, d in T.Parallel(BI, D):
                        kv_s[r, d] = KV[rows[r], d]
                elif let:
                    for r, d in T.Parallel(BI, D):
                        row = Idx[i * BI + r]
                        kv_s[r, d] = KV[row, d]
                else:
                    for r, d in T.Parallel(BI, D):
                        kv_s[r, d] = KV[Idx[i * BI + r], d]
                T.gemm(q_s, kv_s, acc, transpose_B=True)
                if write_source:
                    for r in T.Parallel(BI):
                        Idx[i * BI + r] = 0
            T.copy(acc, Out)

    return kernel


def _loop(src):
    return src[src.index("for (int i = 0;"):]


def test_gather_is_issued_ahead_as_cp_async():
    src = _body(tilelang.lower(_sparse(), "sm_90a").source)
    loop = _loop(src)
    prologue = src[:src.index("for (int i = 0;")]
    # tile 0 before the loop, tile i+1 into the other stage inside it, each a 16-byte cp.async
    # zero-filled where the gathered row is not in [0, 1024)
    assert "tl::cp_async_gs_conditional<16>" in prologue and "tl::cp_async_commit();" in prologue
    assert "tl::cp_async_gs_conditional<16>" in loop
    assert "((i + 1) & 1) * 8192)" in loop           # stage (i + 1) % 2 of the 64 x 128 tile
    assert "tl::cp_async_wait<1>();" in loop
    assert "(0 <= Idx[" in loop and "< 1024)" in loop
    # the gemm reads stage i % 2
    assert "((i & 1) * 8192)" in loop


def test_gather_through_a_per_thread_scalar():
    # `row = Idx[...]` in the body (a per-thread scalar) is substituted into the address
    src = _body(tilelang.lower(_sparse(let=True), "sm_90a").source)
    assert "tl::cp_async_gs_conditional<16>" in _loop(src)


def _sparse_offset():
    """The rows gathered at an offset read before the loop (dsa_sparse_finetune's ``bos``: a
    per-thread scalar)."""

    @T.prim_func
    def kernel(Q: T.Tensor((64, 128), T.bfloat16), KV: T.Tensor((1024, 128), T.bfloat16),
               Idx: T.Tensor((256,), T.int32), Off: T.Tensor((2,), T.int32), Out: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            q_s = T.alloc_shared((64, 128), T.bfloat16)
            kv_s = T.alloc_shared((64, 128), T.bfloat16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.copy(Q, q_s)
            T.fill(acc, 0)
            base = Off[1]
            for i in T.Pipelined(4, num_stages=2):
                for r, d in T.Parallel(64, 128):
                    kv_s[r, d] = KV[base + Idx[i * 64 + r], d]
                T.gemm(q_s, kv_s, acc, transpose_B=True)
            T.copy(acc, Out)

    return kernel


def test_gather_at_an_offset_read_before_the_loop():
    loop = _loop(_body(tilelang.lower(_sparse_offset(), "sm_90a").source))
    assert "tl::cp_async_gs_conditional<16>" in loop
    assert "(0 <= (base + Idx[" in loop


def test_one_stage_loop_keeps_plain_stores():
    src = _body(tilelang.lower(_sparse(stages=1), "sm_90a").source)
    assert "cp_async" not in src


def test_gather_of_a_tensor_the_loop_writes_is_not_issued_ahead():
    src = _body(tilelang.lower(_sparse(write_source=True), "sm_90a").source)
    assert "cp_async" not in src


def test_gather_indexed_by_a_fragment_is_not_issued_ahead():
    src = _body(tilelang.lower(_sparse(frag_index=True), "sm_90a").source)
    assert "cp_async" not in src


def test_plain_parallel_copy_is_left_as_it_was():
    @T.prim_func
    def kernel(A: T.Tensor((256, 128), T.bfloat16), Out: T.Tensor((64, 64), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a_s = T.alloc_shared((64, 128), T.bfloat16)
            acc = T.alloc_fragment((64, 64), T.float32)
            T.fill(acc, 0)
            for i in T.Pipelined(4, num_stages=2):
                for r, d in T.Parallel(64, 128):
                    a_s[r, d] = A[i * 64 + r, d]
                T.gemm(a_s[:, :64], a_s[:, 64:], acc, transpose_B=True)
            T.copy(acc, Out)

    src = _body(tilelang.lower(kernel, "sm_80").source)
    assert "cp_async" not in src


def _unstaged():
    """A gather whose two stages do not fit (also launched by tests/gpu)."""
    @T.prim_func
    def kernel(KV: T.Tensor((4096, 1024), T.bfloat16), Idx: T.Tensor((256,), T.int32),
               Out: T.Tensor((256, 1024), T.bfloat16)):
        with T.Kernel(1, threads=128) as bx:
            kv_s = T.alloc_shared((64, 1024), T.bfloat16)
            for i in T.Pipelined(4, num_stages=2):
                for r, d in T.Parallel(64, 1024):
                    kv_s[r, d] = KV[Idx[i * 64 + r], d]
                for r, d in T.Parallel(64, 1024):
                    Out[i * 64 + r, d] = kv_s[r, d] * 2
    return kernel


def test_gather_whose_stages_do_not_fit_is_left_as_written():
    # two 64 x 1024 bf16 stages (256 KiB) do not fit the H200's 227 KiB; one (128 KiB) does: the
    # kernel compiles with the gather as written (plain stores into one buffer), no TL0501
    kernel = _unstaged()

    art = tilelang.lower(kernel, "sm_90a")
    assert "cp_async" not in _body(art.source)
    assert art.dynamic_smem <= 232448


def test_gather_on_sm80():
    src = _body(tilelang.lower(_sparse(), "sm_80").source)
    assert "tl::cp_async_gs_conditional<16>" in _loop(src)


def _attention(TOPK=256):
    """dsv4's sparse attention body: S = Q K^T over gathered rows, P = S, O += P K, then code after
    the last use of the gathered tile (its rows are used at two places); TOPK // 64 iterations."""
    N, D, BI = 1024, 64, 64

    @T.prim_func
    def kernel(Q: T.Tensor((64, D), T.bfloat16), KV: T.Tensor((N, D), T.bfloat16),
               Idx: T.Tensor((TOPK,), T.int32), Out: T.Tensor((64, D), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            q_s = T.alloc_shared((64, D), T.bfloat16)
            kv_s = T.alloc_shared((BI, D), T.bfloat16)
            p_s = T.alloc_shared((64, BI), T.bfloat16)
            acc_s = T.alloc_fragment((64, BI), T.float32)
            acc_o = T.alloc_fragment((64, D), T.float32)
            T.copy(Q, q_s)
            T.fill(acc_o, 0)
            for i in T.Pipelined(TOPK // BI, num_stages=2):
                for r, d in T.Parallel(BI, D):
                    kv_s[r, d] = KV[Idx[i * BI + r], d]
                T.gemm(q_s, kv_s, acc_s, transpose_B=True, clear_accum=True)
                T.copy(acc_s, p_s)
                T.gemm(p_s, kv_s, acc_o)
                for h, d in T.Parallel(64, D):
                    acc_o[h, d] = acc_o[h, d] * 0.5
            T.copy(acc_o, Out)

    return kernel


def test_gather_loop_takes_the_split_group_schedule():
    # two tiles in flight: both issued before the loop, tile i+2 refilled into stage i % 2 right
    # after the last gemm reading it (upstream's schedule of this kernel)
    src = _body(tilelang.lower(_attention(), "sm_90a").source)
    prologue = src[:src.index("for (int i = 0;")]
    assert prologue.count("tl::cp_async_commit();") == 2
    loop = _loop(src)
    assert "tl::cp_async_wait<1>();" in loop
    # the tail peel (default with gathered copies): iterations 0 and 1 reissue unconditionally,
    # 2 and 3 run in a loop of their own that issues nothing
    main, tail = loop.split("for (int i_tail = 2; i_tail < 4; ++i_tail)", 1)
    assert main.startswith("for (int i = 0; i < 2; ++i)") and "if (i < 2)" not in main
    # (stage i % 2: i < 2 there, so the analyzer folds it to i)
    assert "(i * 4096)" in main and "tl::cp_async_gs_conditional<16>" in main
    assert "cp_async_gs" not in tail[:tail.index("tl::cp_async_wait<0>();")]


@pytest.mark.parametrize("trips", [1, 2, 3])
def test_tail_peel_with_fewer_iterations_than_stages_and_one_more(trips):
    """Trip counts at the edges of the peel (2 stages): the prologue issues the first two tiles (those
    that exist), the main loop the others, one each, unconditionally; the peeled loop (from
    max(n - 2, 0); a loop of one iteration is inlined) issues none."""
    from tilelang.jit import nvcc

    art = tilelang.lower(_attention(TOPK=64 * trips), "sm_90a")
    src = _body(art.source)
    assert src.count("tl::cp_async_gs_conditional<16>") == trips      # each tile issued once, in one place
    assert "if (i < " not in src                                      # no guarded reissue
    if trips >= 2:
        assert f"for (int i_tail = {trips - 2}; i_tail < {trips}; ++i_tail)" in src
    assert nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)


def test_tail_peel_false_reissues_under_a_guard():
    src = _body(tilelang.lower(_attention(), "sm_90a", pass_configs={"tl.enable_pipeline_tail_peel": False}).source)
    loop = _loop(src)
    assert loop.startswith("for (int i = 0; i < 4; ++i)") and "if (i < 2)" in loop and "i_tail" not in loop


def test_split_groups_false_keeps_the_plain_schedule():
    art = tilelang.lower(_attention(), "sm_90a", pass_configs={"tl.enable_pipeline_split_groups": False})
    src = _body(art.source)
    prologue = src[:src.index("for (int i = 0;")]
    assert prologue.count("tl::cp_async_commit();") == 1
    assert "if (i < 3)" in _loop(src)


@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_gather_pipeline_compiles_with_nvcc(arch):
    from tilelang.jit import nvcc

    art = tilelang.lower(_sparse(let=True), arch)
    try:
        nvcc.compile_cubin(art.source, art.arch, art.compile_flags)
    except FileNotFoundError:
        pytest.skip("no nvcc")
