"""Pass configuration keys: documented, validated, honoured."""

import warnings

import pytest

import tilelang
from tilelang.transform.pass_config import EFFECTS, PassConfigKey, markdown, normalize


def test_every_key_has_a_documented_effect_and_the_doc_is_current():
    from pathlib import Path

    assert set(EFFECTS) == set(PassConfigKey)
    doc = Path(__file__).resolve().parents[2] / "docs" / "pass_configs.md"
    assert doc.read_text() == markdown()


def test_unknown_key_warns():
    with pytest.warns(UserWarning, match="tl.enable_fastmath"):
        normalize({"tl.enable_fastmath": True})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert normalize({PassConfigKey.TL_DISABLE_WARP_SPECIALIZED: True}) == {"tl.disable_warp_specialized": True}


def test_fast_math_reaches_nvcc_flags():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import softplus

    func = softplus.softplus.get_prim_func(128, 128)
    art = tilelang.lower(func, "sm_90a", pass_configs={"tl.enable_fast_math": True})
    assert "--use_fast_math" in art.compile_flags
    assert "--use_fast_math" not in tilelang.lower(func, "sm_90a").compile_flags


def test_jit_factory_builds_again_inside_a_pass_context():
    """A factory called inside ``with PassContext(config=...)`` returns a kernel built with those
    configs, not the one memoised for the same arguments outside it (and the outside one again after)."""
    import sys
    from pathlib import Path

    import tvm

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples"))
    import softplus

    factory = tilelang.jit(softplus.softplus.factory, out_idx=[-1], target="sm_90a")
    plain = factory(128, 128)
    with tvm.transform.PassContext(config={"tl.enable_fast_math": True}):
        fast = factory(128, 128)
    assert fast is not plain
    assert "--use_fast_math" in fast.artifact.compile_flags
    assert "--use_fast_math" not in plain.artifact.compile_flags
    assert factory(128, 128) is plain


def test_eager_compile_builds_again_inside_a_pass_context():
    import sys
    from pathlib import Path

    import tvm

    sys.path.insert(0, str(Path(__file__).resolve().parent))
    import eager_kernels

    plain = eager_kernels.matmul.compile(M=256, N=256, K=256)
    with tvm.transform.PassContext(config={"tl.enable_fast_math": True}):
        fast = eager_kernels.matmul.compile(M=256, N=256, K=256)
    assert fast is not plain and "--use_fast_math" in fast.artifact.compile_flags
    assert eager_kernels.matmul.compile(M=256, N=256, K=256) is plain
