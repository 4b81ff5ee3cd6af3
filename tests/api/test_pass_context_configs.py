"""Upstream-style ``with tvm.transform.PassContext(config={"tl.*": ...})``: apache-tvm 0.27 rejects
keys no C++ pass registered, so tilelang takes those keys out (tilelang/tvm_compat.py) and applies
them to the kernels compiled inside the context; a compile's own pass_configs win."""

import tvm

import tilelang
import tilelang.language as T
from tilelang.tvm_compat import tl_configs


def _copy_kernel():
    @T.prim_func
    def main(A: T.Tensor((1024,), "float32"), B: T.Tensor((1024,), "float32")):
        with T.Kernel(1, threads=128):
            for i in T.Parallel(1024):
                B[i] = A[i] * 2.0

    return main


def test_context_keys_are_kept_and_readable():
    key = tilelang.PassConfigKey.TL_DISABLE_WARP_SPECIALIZED
    with tvm.transform.PassContext(config={key: True, "tirx.noalias": True}) as ctx:
        assert tl_configs() == {"tl.disable_warp_specialized": True}
        assert tvm.transform.PassContext.current().config["tl.disable_warp_specialized"]
        assert ctx.config["tirx.noalias"]        # TVM's own key is still TVM's
        with tvm.transform.PassContext(config={"tl.disable_warp_specialized": False}):
            assert tl_configs() == {"tl.disable_warp_specialized": False}   # the inner one wins
        assert tl_configs() == {"tl.disable_warp_specialized": True}
    assert tl_configs() == {}


def test_context_configs_reach_the_compile_and_explicit_ones_win():
    def flags(**kw):
        return tilelang.lower(_copy_kernel(), target="sm_90a", **kw).compile_flags

    assert "--use_fast_math" not in flags()
    with tvm.transform.PassContext(config={"tl.enable_fast_math": True}):
        assert "--use_fast_math" in flags()
        assert "--use_fast_math" not in flags(pass_configs={"tl.enable_fast_math": False})
