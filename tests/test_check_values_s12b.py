"""Values ``tilelang-check`` finds for kernel factories (issue 19, second part): a call through
``kernel = a if flag else b`` binds each factory with the values of its own branch, a factory
nothing calls takes the script's same-named variables, an eager kernel's ``T.const`` sizes take
the caller's same-named variables, module-level tensors give their shapes, ``not flag`` picks
the right annotation branch, and ``torch.tensor([... for i in range(n)]).max()`` is computed."""

from __future__ import annotations

import textwrap
from pathlib import Path

from tilelang.analysis.source import parse_file
from tilelang_lsp.binding import plan_file


def _plan(text, name, path="k.py"):
    plan = plan_file(parse_file(path, textwrap.dedent(text)))
    return next(fp for fp in plan.factories if fp.factory.name == name)


def _kwargs(text, name, path="k.py"):
    fp = _plan(text, name, path)
    assert fp.bindings, fp.unbound
    return dict(fp.bindings[0].kwargs), fp.bindings[0]


TWO_WAYS = """\
    import argparse
    import torch
    import tilelang
    import tilelang.language as T

    @tilelang.jit
    def one(M, N, num_stages):
        @T.prim_func
        def k(A: T.Tensor((M, N), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((num_stages, 64, 64), "float16")
                T.copy(A[0:64, 0:64], s[0, :, :])
        return k

    @tilelang.jit
    def two(M, N, num_stages):
        @T.prim_func
        def k(A: T.Tensor((M, N), "float16")):
            with T.Kernel(1, threads=128):
                s = T.alloc_shared((num_stages, 64, 64), "float16")
                T.copy(A[0:64, 0:64], s[0, :, :])
        return k

    def main():
        parser = argparse.ArgumentParser()
        parser.add_argument("--pair", action=argparse.BooleanOptionalAction, default=True)
        args = parser.parse_args()
        pair = args.pair
        num_stages = 6 if pair else 4
        kernel = two if pair else one
        kernel(M=1024, N=1024, num_stages=num_stages)
    """


def test_conditional_alias_binds_each_branch_with_its_own_values():
    kwargs, binding = _kwargs(TWO_WAYS, "two")
    assert kwargs["num_stages"] == "6 if True else 4" and "through" not in binding.origin
    kwargs, binding = _kwargs(TWO_WAYS, "one")
    assert eval(kwargs["num_stages"]) == 4       # noqa: S307 - a literal text
    assert "through `kernel = two if pair else one` with pair=False" in binding.origin


def test_conditional_alias_with_a_fixed_condition_binds_only_the_selected_factory():
    text = TWO_WAYS.replace("pair = args.pair", "pair = True")
    kwargs, _ = _kwargs(text, "two")
    assert kwargs["M"] == "1024"
    fp = _plan(text, "one")
    assert not any("line" in b.origin for b in fp.bindings)


UNCALLED = """\
    import tilelang
    import tilelang.language as T

    @tilelang.jit
    def called(M, N, blk_m):
        @T.prim_func
        def k(A: T.Tensor((M, N), "float32")):
            with T.Kernel(M // blk_m, threads=128):
                pass
        return k

    @tilelang.jit
    def uncalled(M, N, blk_m, blk_k):
        @T.prim_func
        def k(A: T.Tensor((M, N), "float32")):
            with T.Kernel(M // blk_m, threads=128):
                s = T.alloc_shared((blk_m, blk_k), "float32")
                T.copy(A[0, 0], s)
        return k

    if __name__ == "__main__":
        M, N, blk_m, blk_k = 8192, 4096, 1, 512
        called(M, N, blk_m)
    """


def test_an_uncalled_factory_takes_the_same_named_variables_of_main_block():
    kwargs, binding = _kwargs(UNCALLED, "uncalled")
    assert kwargs == {"M": "8192", "N": "4096", "blk_m": "1", "blk_k": "512"}
    assert binding.origin == "the values of __main__'s variables of the same names"


def test_no_namesakes_no_values():
    fp = _plan(UNCALLED.replace("M, N, blk_m, blk_k = 8192, 4096, 1, 512", "M, N, blk_m = 8192, 4096, 1"),
               "uncalled")
    assert not any("same names" in b.origin for b in fp.bindings)


EAGER = """\
    import torch
    import tilelang
    import tilelang.language as T

    m, k = 256, 512
    n = 1024
    A = torch.rand(m, k, device="cuda", dtype=torch.float16)
    B = torch.rand(n, k, device="cuda", dtype=torch.float16)

    @tilelang.jit
    def gemm(A, B, C, block_M, trans_B):
        M, N, K = T.const("M, N, K")
        A: T.Tensor((M, K), "float16")
        B: T.Tensor((K, N) if not trans_B else (N, K), "float16")
        C: T.Tensor((M, N), "float32")
        with T.Kernel(T.ceildiv(M, block_M), threads=128):
            pass

    @tilelang.jit
    def scaled(A, S, block_M):
        M, K = T.const("M, K")
        A: T.Tensor((M, K), "float16")
        with T.Kernel(T.ceildiv(M, block_M), threads=128):
            pass

    def main():
        c = torch.zeros((m, n), device="cuda", dtype=torch.float32)
        gemm(A, B, c, 64, True)
        M, K = 4096, 2048
        a, s = quantize(torch.randn(M, K))
        scaled(a, s, 128)
    """


def test_module_level_tensors_and_a_negated_annotation_branch():
    kwargs, _ = _kwargs(EAGER, "gemm")
    assert (kwargs["M"], kwargs["N"], kwargs["K"]) == ("m", "n", "k")


def test_eager_sizes_from_the_callers_same_named_variables():
    kwargs, binding = _kwargs(EAGER, "scaled")
    assert (kwargs["M"], kwargs["K"]) == ("4096", "2048")
    assert binding.origin.endswith("; M, K from the caller's variables of the same names")


def test_max_of_a_tensor_made_from_a_range_comprehension():
    text = """\
        import math
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def decode(batch, seqlen_pad):
            @T.prim_func
            def k(A: T.Tensor((batch, seqlen_pad), "float16")):
                with T.Kernel(batch, threads=128):
                    pass
            return k

        def main(b=4, cache_seqlen=1000):
            lens = torch.tensor([cache_seqlen + 2 * i for i in range(b)], dtype=torch.int32)
            max_seqlen = lens.max().item()
            pad = math.ceil(max_seqlen / 256) * 256
            decode(b, pad)
        """
    kwargs, _ = _kwargs(text, "decode")
    assert eval(kwargs["seqlen_pad"], {"math": __import__("math")}) == 1024   # noqa: S307 - max 1006 -> 1024


def test_module_level_cuda_tensors_load_on_meta_without_a_gpu():
    import torch

    from tilelang_lsp.worker_build import _tensors_without_gpu

    if torch.cuda.is_available():
        return
    with _tensors_without_gpu():
        t = torch.rand(8, 4, device="cuda", dtype=torch.float16) * 2 - 1
        u = torch.zeros(3).cuda()
    assert t.device.type == "meta" and tuple(t.shape) == (8, 4) and u.device.type == "meta"
    assert torch.rand(2).device.type == "cpu"     # put back


def test_starred_shape_unpacking_isinstance_of_a_tensor_sort_and_ctx_attributes():
    text = """\
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def mask(BlockIndices, block_size):
            batch, seq_len, heads, S = T.const("batch, seq_len, heads, S")
            BlockIndices: T.Tensor([batch, seq_len, heads, S], T.int32)
            with T.Kernel(seq_len, batch, heads * S):
                pass

        @tilelang.jit
        def attn(dim, groups):
            @T.prim_func
            def k(A: T.Tensor((dim, groups), "float16")):
                with T.Kernel(1, threads=128):
                    pass
            return k

        def bwd(k, v, block_indices, block_size):
            B, T_, H, K, V = *k.shape, v.shape[-1]
            attn(dim=K, groups=V)
            return mask(block_indices.to(torch.int32), block_size)

        class Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, k, v, block_indices, block_size):
                ctx.save_for_backward(k, v)
                ctx.block_indices = block_indices
                return k

            @staticmethod
            def backward(ctx, do):
                k, v = ctx.saved_tensors
                return bwd(k, v, ctx.block_indices, 32)

        def run(k, v, block_indices, counts):
            if isinstance(counts, int):
                block_indices = block_indices[:, :, :, :counts]
            return Fn.apply(k, v, block_indices, 32)

        def main():
            k = torch.randn(1, 64, 2, 48)
            v = torch.randn(1, 64, 2, 80)
            idx = torch.full((1, 64, 2, 4), 0, dtype=torch.long).sort(-1)[0]
            counts = torch.randint(1, 5, (1, 64, 2))
            run(k, v, idx, counts)
        """
    kwargs, _ = _kwargs(text, "attn")
    assert (kwargs["dim"], kwargs["groups"]) == ("48", "80")
    kwargs, _ = _kwargs(text, "mask")
    assert (kwargs["batch"], kwargs["seq_len"], kwargs["heads"], kwargs["S"]) == ("1", "64", "2", "4")


def test_a_transposed_register_a_operand_checks_clean(tmp_path):
    """(A K x M fragment read with transpose_A: its layout is the A operand's, swapped.)"""
    import subprocess
    import sys

    path = tmp_path / "k.py"
    path.write_text(textwrap.dedent("""\
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def k(M=64, N=64, K=64):
            @T.prim_func
            def main(A: T.Tensor((K, M), "float16"), B: T.Tensor((K, N), "float16"),
                     C: T.Tensor((M, N), "float32")):
                with T.Kernel(1, threads=128):
                    a = T.alloc_fragment((K, M), "float16")
                    b = T.alloc_shared((K, N), "float16")
                    c = T.alloc_fragment((M, N), "float32")
                    T.copy(A, a)
                    T.copy(B, b)
                    T.gemm(a, b, c, transpose_A=True, clear_accum=True)
                    T.copy(c, C)
            return main
        """))
    cli = Path(sys.executable).with_name("tilelang-check")
    out = subprocess.run([str(cli), str(path)], capture_output=True, text=True, timeout=300).stdout
    assert "TL0804" not in out and "error[" not in out
