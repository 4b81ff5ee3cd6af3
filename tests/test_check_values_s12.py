"""Values ``tilelang-check`` finds for kernel factories where the code computes them (issue 19):
data-dependent sizes bound as symbolic sizes, ``x.view(-1, N)``, class instances, argparse
namespaces, generator unpacking, helpers imported from sibling modules, ``torch.tensor`` of a
literal list, and what the trace must not take for a value (a list appended to)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tilelang.analysis.source import parse_file
from tilelang_lsp.binding import plan_file
from tilelang_lsp.binding_trace import is_symbolic_text, symbolic_ok


def _plan(text, name, path="k.py"):
    plan = plan_file(parse_file(path, textwrap.dedent(text)))
    return next(fp for fp in plan.factories if fp.factory.name == name)


def _kwargs(text, name, path="k.py"):
    fp = _plan(text, name, path)
    assert fp.bindings, fp.unbound
    return dict(fp.bindings[0].kwargs), fp.bindings[0]


VARLEN = """\
    import torch
    import tilelang
    import tilelang.language as T
    from helpers import unpad

    @tilelang.jit(out_idx=[-1])
    def attn(batch, UQ, heads, dim, block_M=64):
        q_shape = [UQ, heads, dim]

        @T.prim_func
        def kernel(Q: T.Tensor(q_shape, "float16"), cu: T.Tensor([batch + 1], "int32"),
                   O: T.Tensor(q_shape, "float16")):
            with T.Kernel(T.ceildiv(UQ, block_M), heads, threads=128) as (bx, by):
                s = T.alloc_shared((block_M, dim), "float16")
                T.copy(Q[bx * block_M, by, 0], s)
                T.copy(s, O[bx * block_M, by, 0])

        return kernel

    def main(batch=4, heads=8, dim=64):
        q = torch.randn(batch, 128, heads, dim, device="cuda")
        q_unpad, cu = unpad(q)
        UQ = q_unpad.shape[0]
        return attn(batch, UQ, heads, dim)
    """


def test_a_data_dependent_size_is_bound_symbolic():
    kwargs, binding = _kwargs(VARLEN, "attn")
    assert is_symbolic_text(kwargs["UQ"]) and kwargs["heads"] == "8" and kwargs["batch"] == "4"
    assert binding.origin.endswith("; UQ symbolic") and "UQ=<symbolic>" in binding.shown


def test_symbolic_only_where_a_symbolic_size_is_legal():
    node = parse_file("k.py", textwrap.dedent(VARLEN)).factories["attn"].node
    assert symbolic_ok(node, "UQ")
    assert not symbolic_ok(node, "dim")        # an allocation's extent needs a number
    assert not symbolic_ok(node, "batch")      # only ``batch + 1``: nothing binds it from a tensor
    grid_only = VARLEN.replace("Q: T.Tensor(q_shape", "Q: T.Tensor([64, heads, dim]").replace(
        "O: T.Tensor(q_shape", "O: T.Tensor([64, heads, dim]")
    assert not symbolic_ok(parse_file("k.py", textwrap.dedent(grid_only)).factories["attn"].node, "UQ")
    branchy = VARLEN.replace("    q_shape = [UQ, heads, dim]\n",
                             "    q_shape = [UQ, heads, dim]\n    if UQ > 4:\n        pass\n")
    assert not symbolic_ok(parse_file("k.py", textwrap.dedent(branchy)).factories["attn"].node, "UQ")


def test_view_with_an_inferred_dimension_keeps_the_others():
    text = """\
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def quant(x, block_size=128):
            M = T.dynamic("M")
            N = T.const("N")
            x: T.Tensor[(M, N), T.bfloat16]
            y = T.empty((M, N), T.float32)
            with T.Kernel(T.ceildiv(N, block_size), threads=128) as bx:
                pass
            return y

        def act_quant(x, block_size=128):
            N = x.size(-1)
            return quant(x.contiguous().view(-1, N), block_size=block_size)

        def test_it(M=256, N=1024):
            x = torch.randn((M, N), dtype=torch.bfloat16, device="cuda")
            act_quant(x, block_size=64)
        """
    kwargs, binding = _kwargs(text, "quant")
    assert kwargs == {"N": "1024", "block_size": "64"} and binding.eager


def test_class_instance_attributes_and_generator_unpacking():
    text = """\
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def mm(A, B, block_M, block_K):
            M, N, K = T.const("M, N, K")
            A: T.Tensor((M, K), T.float16)
            B: T.Tensor((K, N), T.float16)
            C = T.empty((M, N), T.float16)
            return C

        class Config:
            def __init__(self, M, N, K):
                self.M, self.N = M, N
                self.K = K
                self.block_M = 128
                self.block_K = 32

        def run(config):
            M, N, K = config.M, config.N, config.K
            a, b = (t.half() for t in (torch.randn(M, K), torch.randn(K, N)))
            return mm(a, b, config.block_M, config.block_K)

        def main():
            run(Config(512, 256, 64))
        """
    kwargs, _ = _kwargs(text, "mm")
    assert kwargs == {"M": "512", "K": "64", "N": "256", "block_M": "128", "block_K": "32"}


def test_helper_imported_from_a_sibling_and_module_constant_loop(tmp_path):
    (tmp_path / "util.py").write_text("def clone(t):\n    return t.detach().clone().requires_grad_(True)\n")
    text = textwrap.dedent("""\
        import torch
        import tilelang
        import tilelang.language as T
        from util import clone

        BLOCKS = (16, 32)

        @tilelang.jit(out_idx=[-1])
        def fwd(batch, seq_len, dim, block):
            @T.prim_func
            def kernel(Q: T.Tensor((batch, seq_len, dim), "float16"), O: T.Tensor((batch, seq_len, dim), "float16")):
                pass
            return kernel

        def run(batch, seq_len, dim, block):
            q = clone(torch.randn(batch, seq_len, dim, device="cuda"))
            b, s, d = q.shape
            return fwd(b, s, d, block)

        def test_all():
            for block in BLOCKS:
                run(2, 256, 64, block)
        """)
    path = tmp_path / "example.py"
    path.write_text(text)
    kwargs, _ = _kwargs(text, "fwd", str(path))
    assert kwargs == {"batch": "2", "seq_len": "256", "dim": "64", "block": "16"}


def test_tensor_of_a_literal_list_numel_max_and_arithmetic_helpers():
    text = """\
        import torch
        import tilelang
        import tilelang.language as T

        def ceil_div(x, y):
            return (x + y - 1) // y

        @tilelang.jit(out_idx=[-1])
        def grouped(batch, M_max, N):
            @T.prim_func
            def kernel(X: T.Tensor((M_max, N), "float16"), S: T.Tensor((batch,), "int32")):
                pass
            return kernel

        def main(sizes=None, N=512):
            if sizes is None:
                sizes = [100, 300, 200]
            sizes = torch.tensor(sizes, device="cuda", dtype=torch.int32)
            offsets = [0]
            for s in [1, 2]:
                offsets.append(s)
            offsets = torch.tensor(offsets, device="cuda")
            M_max = int(ceil_div(sizes.max(), 128) * 128)
            return grouped(sizes.numel(), M_max, N), grouped(offsets.numel(), M_max, N)
        """
    first, second = [dict(b.kwargs) for b in _plan(text, "grouped").bindings]
    assert first == {"batch": "3", "M_max": "int(ceil_div(max([100, 300, 200]), 128) * 128)", "N": "512"}
    assert is_symbolic_text(second["batch"])    # ``offsets`` was appended to: not the literal [0]


def test_argparse_namespace_and_local_apply_alias():
    text = """\
        import argparse
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit(out_idx=[-1])
        def fwd(batch, heads, dim):
            @T.prim_func
            def kernel(Q: T.Tensor((batch, heads, dim), "float16"), O: T.Tensor((batch, heads, dim), "float16")):
                pass
            return kernel

        class _Fn(torch.autograd.Function):
            @staticmethod
            def forward(ctx, q):
                batch, heads, dim = q.shape
                return fwd(batch, heads, dim)(q)

        def run(args):
            q = torch.randn(args.batch, args.heads, args.dim, device="cuda")
            apply = _Fn.apply
            return apply(q)

        def main():
            args = argparse.Namespace(batch=2, heads=8)
            args.dim = 64
            run(args)
        """
    kwargs, _ = _kwargs(text, "fwd")
    assert kwargs == {"batch": "2", "heads": "8", "dim": "64"}


def test_a_symbolic_kernel_builds_in_the_checker(tmp_path):
    (tmp_path / "helpers.py").write_text("def unpad(q):\n    return q.flatten(0, 1), None\n")
    (tmp_path / "kernel.py").write_text(textwrap.dedent(VARLEN))
    exe = Path(sys.executable).with_name("tilelang-check")
    done = subprocess.run([str(exe), "--explain", "kernel.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next(x for x in done.stdout.splitlines() if "kernel.py: attn:" in x)
    assert "built with attn(" in line and "UQ=UQ" in line and line.endswith("; UQ symbolic"), line


def test_args_from_a_parse_args_helper():
    text = """\
        import argparse
        import tilelang
        import tilelang.language as T

        @tilelang.jit(out_idx=[-1])
        def scale(N, block):
            @T.prim_func
            def kernel(X: T.Tensor((N,), "float32"), Y: T.Tensor((N,), "float32")):
                pass
            return kernel

        def parse_args():
            parser = argparse.ArgumentParser()
            parser.add_argument("--n", type=int, default=4096)
            parser.add_argument("--block", type=int, default=256)
            return parser.parse_args()

        def run(args):
            return scale(args.n, args.block)

        def main():
            args = parse_args()
            run(args)
        """
    kwargs, _ = _kwargs(text, "scale")
    assert kwargs == {"N": "4096", "block": "256"}
