"""KernelArtifact: JSON round trip, consistency checks, restricted grid expressions."""

import pytest

from tilelang.artifact import ArtifactError, KernelArtifact, ParamSpec, arch_number, parse_int_expr


def make_artifact(**overrides) -> KernelArtifact:
    fields = dict(
        name="gemm", source="extern \"C\" __global__ void gemm() {}",
        params=[ParamSpec("A", "tensor", "float16", ["M", 64]),
                ParamSpec("B", "tensor", "float16", [64, "N"], [1, 64]),
                ParamSpec("C", "tensor", "float32", ["M", "N"]),
                ParamSpec("alpha", "scalar", "float32", [])],
        kernel_args=["A", "B", "C", "alpha", "M", "N"],
        grid=["(N + 127) // 128", "(M + 63) // 64", "1"], block=[128, 1, 1], dynamic_smem=0,
        arch="sm_90a", symbols={"M": [0, 0], "N": [1, 1]}, out_idx=[2],
        compile_flags=["-DFOO=1"])
    fields.update(overrides)
    return KernelArtifact(**fields)


def test_json_round_trip_excludes_cubin():
    art = make_artifact(cubin=b"\x7fELF...")
    text = art.to_json()
    assert "cubin" not in text.replace("cubin_sha256", "")
    back = KernelArtifact.from_json(text, cubin=art.cubin)
    assert back == art
    assert KernelArtifact.from_json(text).cubin is None
    assert isinstance(back.params[1], ParamSpec) and back.params[1].strides == [1, 64]


def test_from_json_rejects_unknown_fields_and_versions():
    data = make_artifact().to_dict()
    with pytest.raises(ArtifactError, match="unknown fields"):
        KernelArtifact.from_dict({**data, "bogus": 1})
    with pytest.raises(ArtifactError, match="format_version"):
        KernelArtifact.from_dict({**data, "format_version": 99})


def test_check_accepts_good_artifact():
    art = make_artifact()
    assert art.check() is art
    assert art.all_symbols() == ["M", "N"]
    assert art.input_indices() == [0, 1, 3]


@pytest.mark.parametrize("overrides, match", [
    ({"name": "not an ident"}, "C identifier"),
    ({"arch": "90a"}, "sm_<digits>"),
    ({"grid": ["1", "1"]}, "3 entries"),
    ({"block": [2048, 1, 1]}, "1024 threads"),
    ({"block": [0, 1, 1]}, "positive ints"),
    ({"dynamic_smem": -1}, "dynamic_smem"),
    ({"out_idx": [3]}, "scalar parameter"),
    ({"out_idx": [7]}, "not a parameter index"),
    ({"kernel_args": ["A", "K"]}, "neither a parameter nor a symbol"),
    ({"symbols": {"M": [0, 1]}}, "is not 'M'"),
    ({"symbols": {"M": [3, -1]}}, "int scalar"),
    ({"grid": ["M / 64", "1", "1"]}, "use //"),
    ({"grid": ["K", "1", "1"]}, "unknown name"),
    ({"index_bits": 16}, "index_bits"),
    ({"grid": ["1", "70000", "1"]}, r"grid\[1\] = '70000' is outside"),
    ({"grid": ["-1", "1", "1"]}, r"grid\[0\] = '-1' is outside"),
])
def test_check_rejects_inconsistent_artifacts(overrides, match):
    with pytest.raises(ArtifactError, match=match):
        make_artifact(**overrides).check()


def test_check_rejects_bad_params():
    bad = [ParamSpec("A", "tensor", "float17", [4])]
    with pytest.raises(ArtifactError, match="dtype"):
        make_artifact(params=bad, kernel_args=["A"], symbols={}, out_idx=[], grid=["1"] * 3).check()
    dup = [ParamSpec("A", "tensor", "float16", [4]), ParamSpec("A", "tensor", "float16", [4])]
    with pytest.raises(ArtifactError, match="unique"):
        make_artifact(params=dup, kernel_args=["A"], symbols={}, out_idx=[], grid=["1"] * 3).check()
    odd = [ParamSpec("A", "tensor", "float16", [4], align=3)]
    with pytest.raises(ArtifactError, match="power of two"):
        make_artifact(params=odd, kernel_args=["A"], symbols={}, out_idx=[], grid=["1"] * 3).check()


@pytest.mark.parametrize("expr", [
    "__import__('os').system('true')", "M.bit_length()", "M if M else 1", "[M][0]",
    "min", "M ** 2", "M / 2", "lambda: 1", "M < 3", "1.5",
])
def test_grid_expressions_are_restricted_to_integer_arithmetic(expr):
    with pytest.raises(ArtifactError):
        parse_int_expr(expr, {"M"})


def test_grid_expressions_allow_arithmetic_min_max():
    tree = parse_int_expr("max(1, min(M, 4)) * -(-M // 128) % 7 + (N - 1)", {"M", "N"})
    assert eval(compile(tree, "g", "eval"), {"M": 300, "N": 2}) == max(1, min(300, 4)) * 3 % 7 + 1


def test_arch_number():
    assert arch_number("sm_90a") == (90, "a")
    assert arch_number("sm_80") == (80, "")
    assert arch_number("sm_100f") == (100, "f")
    with pytest.raises(ArtifactError):
        arch_number("compute_90")


def test_arg_types_match_what_the_driver_packs():
    from tilelang.artifact import ARG_TYPES
    from tilelang.jit.driver import ARG_FORMATS

    assert set(ARG_TYPES) == set(ARG_FORMATS)
