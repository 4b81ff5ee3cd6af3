"""Values traced from the code that calls a factory (``tilelang_lsp.binding_trace``), value-free."""

from __future__ import annotations

import textwrap

from tilelang.analysis.source import parse_file
from tilelang_lsp.binding import plan_file

CLASSIC = textwrap.dedent(
    """\
    import argparse
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M, block_N, block_K, dtype=T.float16):
        @T.prim_func
        def kernel(A: T.Tensor((M, K), dtype), C: T.Tensor((M, N), dtype)):
            pass
        return kernel

    def main(M=4096, N=4096, K=4096):
        bm = 128
        for bk in [32, 64]:
            kernel = matmul(M, N, K, bm, 128, bk)

    if __name__ == "__main__":
        parser = argparse.ArgumentParser()
        parser.add_argument("--m", type=int, default=1024)
        args = parser.parse_args()
        main(args.m, N=2048)
    """
)

EAGER = textwrap.dedent(
    """\
    import torch
    import tilelang
    import tilelang.language as T

    @tilelang.jit
    def add(A, B, block_M, threads=128):
        M, N = T.const("M, N")
        A: T.Tensor((M, N), T.float32)
        B: T.Tensor((M, N), T.float32)
        C = T.empty((M, N), T.float32)
        return C

    def main(M=512, N=256):
        a = torch.randn(M, N, dtype=torch.float32, device="cuda")
        b = torch.randn(M, N, device="cuda")
        config = {"block_M": 32}
        return add(a, b, **config)
    """
)


def _bindings(text, name, path="k.py"):
    plan = plan_file(parse_file(path, text))
    return next(fp for fp in plan.factories if fp.factory.name == name).bindings


def test_call_in_main_traced_through_argparse_defaults_and_locals():
    first = _bindings(CLASSIC, "matmul")[0]
    assert dict(first.kwargs) == {"M": "1024", "N": "2048", "K": "4096", "block_M": "128", "block_N": "128",
                                  "block_K": "32"}
    assert first.soft and first.origin == "the call at line 15 (with the call at line 21)"


def test_eager_consts_from_tensor_shapes_and_dict_expansion():
    (binding,) = _bindings(EAGER, "add")
    assert binding.eager and dict(binding.kwargs) == {"M": "512", "N": "256", "block_M": "32"}


def test_untraceable_values_leave_the_factory_unbound():
    text = CLASSIC.replace("kernel = matmul(M, N, K, bm, 128, bk)", "kernel = matmul(*sizes)")
    plan = plan_file(parse_file("k.py", text))
    assert plan.factories[0].unbound == ["M", "N", "K", "block_M", "block_N", "block_K"]


def test_calls_in_a_sibling_test_file(tmp_path):
    (tmp_path / "example_k.py").write_text(CLASSIC.split("def main")[0])
    (tmp_path / "test_example_k.py").write_text(
        "import example_k\n\n\ndef test_it():\n    example_k.matmul(256, 256, 256, 64, 64, 32)\n")
    path = str(tmp_path / "example_k.py")
    (binding,) = _bindings(CLASSIC.split("def main")[0], "matmul", path)
    assert dict(binding.kwargs)["M"] == "256" and "test_example_k.py" in binding.origin


def test_triton_kernels_are_not_factories():
    text = "import triton\nimport tilelang as tl\n\n@triton.jit\ndef k(x):\n    pass\n\n@tl.jit\ndef f(N=1):\n    pass\n"
    assert set(parse_file("t.py", text).factories) == {"f"}


AUTOGRAD = textwrap.dedent(
    """\
    import torch
    import tilelang
    import tilelang.language as T

    @tilelang.jit(out_idx=[-1])
    def fwd(batch, heads, dim, block_M=64):
        @T.prim_func
        def kernel(Q: T.Tensor((batch, heads, dim), "float16"), O: T.Tensor((batch, heads, dim), "float16")):
            pass
        return kernel

    @tilelang.jit(out_idx=[-1])
    def bwd(batch, heads, dim, scale):
        @T.prim_func
        def kernel(Q: T.Tensor((batch, heads, dim), "float16"), O: T.Tensor((batch, heads, dim), "float16")):
            pass
        return kernel

    class _Attention(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, scale):
            batch, heads, dim = q.shape
            ctx.save_for_backward(q)
            ctx.scale = scale
            return fwd(batch, heads, dim)(q)

        @staticmethod
        def backward(ctx, do):
            (q,) = ctx.saved_tensors
            b, h, d = q.shape
            return bwd(b, h, d, ctx.scale)(q, do)

    attention = _Attention.apply

    def main(B=2, H=4, D=64):
        q = torch.empty(B, H, D, device="cuda").normal_().requires_grad_()
        return attention(q, 0.5)
    """
)


def test_autograd_forward_and_backward_traced_through_apply_and_saved_tensors():
    (forward,) = _bindings(AUTOGRAD, "fwd")[:1]
    assert dict(forward.kwargs) == {"batch": "2", "heads": "4", "dim": "64"}
    assert "_Attention.apply" in forward.origin
    backward = _bindings(AUTOGRAD, "bwd")[0]
    assert dict(backward.kwargs) == {"batch": "2", "heads": "4", "dim": "64", "scale": "0.5"}


def test_package_root_and_environment_notes(tmp_path):
    from tilelang_lsp.worker_build import environment_problem, package_root

    pkg = tmp_path / "proj" / "kernels"
    pkg.mkdir(parents=True)
    (tmp_path / "proj" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "helpers.py").write_text("")
    assert package_root(str(pkg / "mod.py")) == (str(tmp_path), "proj.kernels")
    assert package_root(str(tmp_path / "script.py")) == (str(tmp_path), "")

    missing = ModuleNotFoundError("No module named 'einops'", name="einops")
    assert "einops" in environment_problem(missing, str(pkg / "mod.py"))
    own = ModuleNotFoundError("No module named 'helpers'", name="helpers")
    assert environment_problem(own, str(pkg / "mod.py")) is None      # the user's own module: a real error
    assert "GPU" in environment_problem(RuntimeError("Found no NVIDIA driver on your system"), "x.py")
    assert environment_problem(ValueError("block_M must divide M"), "x.py") is None


def test_shapes_from_size_of_a_parameter_local_shape_lists_and_config_dicts():
    text = textwrap.dedent(
        """\
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def quant(X, block):
            M, N = T.const("M, N")
            x_shape = [M, N]
            X: T.Tensor(x_shape, T.float16)
            return X

        def act_quant(x, config):
            N = x.size(-1)
            return quant(x.view(x.size(0), N), config["block"])

        def main(m=64, n=512):
            shape = (m, n)
            cfg = {"block": 128}
            return act_quant(torch.randn(shape, device="cuda"), cfg)
        """
    )
    (binding,) = _bindings(text, "quant")
    assert dict(binding.kwargs) == {"M": "64", "N": "512", "block": "128"}
    (partial,) = _bindings(text.replace("x.view(x.size(0), N)", "x.view(-1, N)"), "quant")
    assert "M" not in dict(partial.kwargs)      # -1 is not a size: M stays open (no values in the worker)


def test_first_autotune_config_fills_open_parameters_and_brings_its_pass_configs():
    from tilelang_lsp.worker_build import _fill_from_autotune

    def factory(M, N, block_M=None, num_stages=2):
        pass

    class Tuned:   # what @autotune leaves: the configs beside the factory
        _configs = [{"block_M": 64, "num_stages": 3, "pass_configs": {"tl.disable_wgmma": True}},
                    {"block_M": 128, "num_stages": 4}]

    args, kwargs = [1024], {"N": 512, "num_stages": 1}
    extra = _fill_from_autotune(Tuned(), factory, None, args, kwargs)
    assert kwargs == {"N": 512, "num_stages": 1, "block_M": 64}      # given values win; no stray keys
    assert extra == {"tl.disable_wgmma": True}


def test_tuples_returned_by_helper_functions_and_scaled_tensors():
    text = textwrap.dedent(
        """\
        import torch
        import tilelang
        import tilelang.language as T

        @tilelang.jit
        def scaled(X, W, block):
            M, K = T.const("M, K")
            N = T.const("N")
            X: T.Tensor((M, K), T.float16)
            W: T.Tensor((N, K), T.float16)
            return X

        def prepare_input(m, k, n=256, dtype=torch.float16):
            x = torch.randn(m, k, dtype=dtype, device="cuda").requires_grad_(True) / 10
            w = torch.randn(n, k, dtype=dtype).cuda()
            return x, w

        def main(m=64, k=512):
            x, w = prepare_input(m, k)
            return scaled(x, w, 128)
        """
    )
    (binding,) = _bindings(text, "scaled")
    assert binding.eager and dict(binding.kwargs) == {"M": "64", "K": "512", "N": "256", "block": "128"}


def test_config_dict_returned_by_a_helper():
    text = CLASSIC.replace(
        "def main(M=4096, N=4096, K=4096):\n    bm = 128\n    for bk in [32, 64]:\n        kernel = matmul(M, N, K, bm, 128, bk)",
        "def get_config():\n    if not torch.cuda.is_available():\n        raise RuntimeError('no GPU')\n"
        "    if sm_version() == 80:\n        return {'block_M': 64, 'block_N': 128, 'block_K': 32}\n"
        "    return {'block_M': 128, 'block_N': 256, 'block_K': 64}\n\n"
        "def main(M=4096, N=4096, K=4096):\n    config = get_config()\n    kernel = matmul(M, N, K, **config)",
    ).replace("import argparse\n", "import argparse\nimport torch\n")
    first = _bindings(text, "matmul")[0]
    assert dict(first.kwargs) == {"M": "1024", "N": "2048", "K": "4096", "block_M": "64", "block_N": "128",
                                  "block_K": "32"}
