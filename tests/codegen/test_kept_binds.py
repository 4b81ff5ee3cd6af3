"""Integer bindings that divide by a run-time value stay bindings (codegen/kept_binds.py): TVM's
simplifier used to substitute T.use_swizzle's block indices into every use, and nvcc then ran the
panel-width division again in every iteration of a warp-specialised loop (upstream's
deepseek_deepgemm example: a div.s32 after each mbarrier wait, ahead of the wgmma)."""

import re

import pytest
import tvm
from tvm import tirx

import tilelang
import tilelang.language as T
from tilelang.codegen.kept_binds import keep_dividing_binds
from tilelang.jit import nvcc
from tilelang.tir_utils import extern_name, seq, walk_stmts

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False

M, N, K = 512, 512, 256


def _scaled_gemm(panel):
    """A 64x128 block GEMM whose consumer loop reads a per-(block column, k) scale, as deepgemm's."""
    @T.prim_func
    def k(A: T.Tensor((M, K), T.float16), B: T.Tensor((N, K), T.float16),
          S: T.Tensor((N // 128, K // 64), T.float32), C: T.Tensor((M, N), T.float32)):
        with T.Kernel(N // 128, M // 64, threads=128) as (bx, by):
            A_s = T.alloc_shared((64, 64), T.float16)
            B_s = T.alloc_shared((128, 64), T.float16)
            acc = T.alloc_fragment((64, 128), T.float32)
            out = T.alloc_fragment((64, 128), T.float32)
            T.use_swizzle(panel_size=panel)
            T.clear(out)
            for ko in T.Pipelined(K // 64, num_stages=2):
                T.copy(A[by * 64, ko * 64], A_s)
                T.copy(B[bx * 128, ko * 64], B_s)
                T.gemm(A_s, B_s, acc, transpose_B=True, clear_accum=True)
                for i, j in T.Parallel(64, 128):
                    out[i, j] += acc[i, j] * S[bx, ko]
            T.copy(out, C[by * 64, bx * 128])

    return k


def _consumer_loop(src):
    body = src[src.index("for (int ko = 0;"):]
    return body[:body.index("for (int w = 0;")]


def test_swizzled_block_indices_are_computed_once_before_the_pipelined_loops():
    src = tilelang.lower(_scaled_gemm(3), "sm_90a").source
    assert "int bx_swz = tl::opaque(" in src and "int by_swz = tl::opaque(" in src
    loop = _consumer_loop(src)
    assert "S[((bx_swz * 4) + ko)]" in loop
    assert not re.search(r"[/%] \(", loop)      # no division by the panel width in the loop
    assert "(bx_swz * 128)" in src and "(by_swz * 64)" in src   # the producer's TMA coordinates
    # tl.disable_kept_binds: TVM substitutes the binding, the loop divides again
    off = tilelang.lower(_scaled_gemm(3), "sm_90a", pass_configs={"tl.disable_kept_binds": True}).source
    assert "tl::opaque" not in off and re.search(r"[/%] \(", _consumer_loop(off))


@pytest.mark.skipif(not HAVE_NVCC, reason="nvcc not found")
def test_the_panel_division_runs_before_the_first_barrier_wait():
    art = tilelang.lower(_scaled_gemm(3), "sm_90a")
    ptx = nvcc.compile_ptx(art.source, "sm_90a", art.compile_flags)
    divisions = [m.start() for m in re.finditer(r"\t(div|rem)\.s32", ptx)]
    assert len(divisions) == 1 and divisions[0] < ptx.index("mbarrier.try_wait")


def test_a_panel_as_tall_as_the_grid_is_left_to_tvm():
    """8 block rows, panel 8: the launch extents fold the division away, nothing is kept."""
    src = tilelang.lower(_scaled_gemm(8), "sm_90a").source
    assert "tl::opaque" not in src and "bx_swz" not in _consumer_loop(src)


def _func(*binds):
    n = tirx.Var("n", "int32")
    tx = tirx.Var("tx", "int32")
    iv = tirx.IterVar(tvm.ir.Range(0, 128), tx, tirx.IterVar.ThreadIndex, "threadIdx.x")
    body = tirx.AttrStmt(iv, "thread_extent", 128, seq([tirx.Bind(v, f(tx, n)) for v, f in binds]))
    return tirx.PrimFunc([n], body)


def _bound_values(func):
    out = {}
    walk_stmts(func.body, lambda s: out.__setitem__(s.var.name, s.value) if isinstance(s, tirx.Bind) else None)
    return out


def test_only_integer_binds_dividing_by_a_runtime_value_are_wrapped():
    func = _func((tirx.Var("q", "int32"), lambda tx, n: tirx.truncdiv(tx, n)),
                 (tirx.Var("r", "int32"), lambda tx, n: tirx.floormod(tx + n, 3)),
                 (tirx.Var("s", "int32"), lambda tx, n: tirx.truncdiv(n, tirx.min(n, 4) + 1)),
                 (tirx.Var("f", "float32"), lambda tx, n: tirx.Cast("float32", tx) / tirx.Cast("float32", n)))
    values = _bound_values(keep_dividing_binds(func))
    assert extern_name(values["q"]) == "tl::opaque"
    assert extern_name(values["s"]) == "tl::opaque"
    assert isinstance(values["r"], tirx.FloorMod) and not isinstance(values["f"], tirx.Call)


def test_a_function_without_such_binds_is_returned_as_is():
    func = _func((tirx.Var("r", "int32"), lambda tx, n: tirx.truncdiv(tx, 32)))
    assert keep_dividing_binds(func) is func
