"""Binding factory parameters: pragma, pyproject, literal call sites, defaults, in that order."""

from __future__ import annotations

import textwrap

import pytest

from tilelang.analysis.source import parse_file
from tilelang_lsp.binding import ConfigError, load_config, plan_file

FACTORY = textwrap.dedent(
    """\
    import tilelang
    import tilelang.language as T

    M = N = 1024
    K = 1001
    BLOCK = 64

    @tilelang.jit(out_idx=[-1])
    def matmul(M, N, K, block_M=128, dtype="float16"):
        @T.prim_func
        def kernel(A: T.Tensor((M, K), dtype), C: T.Tensor((M, N), dtype)):
            pass
        return kernel

    @tilelang.jit
    def scale(N=256):
        pass
    """
)


def plan(text, config=None, path="k.py"):
    return plan_file(parse_file(path, text), config)


def bindings(p, name):
    return next(fp for fp in p.factories if fp.factory.name == name).bindings


def test_literal_call_sites_with_module_constants():
    text = FACTORY + "kernel = matmul(M, N, K, block_M=BLOCK)\nother = matmul.get_prim_func(1, 2, 3)\n"
    found = bindings(plan(text), "matmul")
    assert [b.describe() for b in found] == [
        "matmul(M=1024, N=1024, K=1001, block_M=64) from the call at line 18",
        "matmul(M=1, N=2, K=3) from the call at line 19",
    ]


def test_call_sites_with_local_values_are_not_used():
    text = FACTORY + "def run(m):\n    return matmul(m, m, m)\n"
    p = plan(text)
    assert bindings(p, "matmul") == []
    assert next(fp for fp in p.factories if fp.factory.name == "matmul").unbound == ["M", "N", "K"]


def test_defaults_bind_a_factory_without_required_parameters():
    assert [b.describe() for b in bindings(plan(FACTORY), "scale")] == ["scale() from the defaults"]


def test_pragma_wins_over_call_sites():
    text = "# tilelang: check matmul(M=8, N=8, K=8)\n" + FACTORY + "kernel = matmul(1, 2, 3)\n"
    found = bindings(plan(text), "matmul")
    assert [b.origin for b in found] == ["the pragma at line 1"]
    assert found[0].kwargs == (("M", "8"), ("N", "8"), ("K", "8"))


def test_pyproject_binding_and_settings(tmp_path):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent(
        """\
        [tool.tilelang.check]
        target = "sm_80"
        ignore = ["TL0301"]
        [tool.tilelang.check.bind]
        matmul = [{ M = 64, N = 64, K = 64 }, { M = 128, N = 128, K = 128, dtype = "bfloat16" }]
        """))
    config = load_config(tmp_path)
    assert config.target == "sm_80" and config.ignore == ["TL0301"]
    found = bindings(plan(FACTORY + "kernel = matmul(1, 2, 3)\n", config, str(tmp_path / "k.py")), "matmul")
    assert [b.shown for b in found] == ["matmul(M=64, N=64, K=64)", "matmul(M=128, N=128, K=128, dtype='bfloat16')"]
    assert all(b.origin == "[tool.tilelang.check] in pyproject.toml" for b in found)


@pytest.mark.parametrize("table", ['target = 3', 'unknown = 1', 'bind = { matmul = 3 }', 'select = [1]'])
def test_malformed_pyproject_is_a_config_error(tmp_path, table):
    (tmp_path / "pyproject.toml").write_text(f"[tool.tilelang.check]\n{table}\n")
    with pytest.raises(ConfigError):
        load_config(tmp_path)


def test_a_binding_naming_an_unknown_parameter_is_tl0004(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool.tilelang.check.bind]\nmatmul = { Q = 1 }\n")
    p = plan(FACTORY, load_config(tmp_path), str(tmp_path / "k.py"))
    assert [d.code for d in p.diagnostics] == ["TL0004"]
