"""A fragment reduction whose threads each hold several rows, reduced over 16 or 32 lanes of a warp,
goes through one ``tl::warp_allreduce_rows`` for all of a thread's rows (halved between lane
partners, then gathered back) instead of one butterfly a row: 31 shuffles instead of 80 for 16 rows
over 32 lanes. Fewer rows or lanes (an attention row: 2 rows over 4 lanes) keep the butterfly a row.
Such layouts come from annotations and other operators: a fragment the compiler lays out for a
reduction along its rows gets 8 lanes a row (``layout_inference._row_default``; upstream's MoE top-k
router, 64 x 128 logits on 128 threads: 4 rows a thread, 3 shuffles each, where 32 lanes a row took
16 rows a thread). CPU only: the generated CUDA is inspected and compiled;
tests/gpu/test_reduce_rows_gpu.py runs the kernels against torch."""

import re

import pytest

import tilelang
import tilelang.language as T
from tilelang.jit import nvcc
from tilelang.transform.lower_reduce import _rows_at_once

try:
    nvcc.find_nvcc()
    HAVE_NVCC = True
except Exception:  # noqa: BLE001
    HAVE_NVCC = False

_REDUCE = {"sum": "reduce_sum", "max": "reduce_max", "min": "reduce_min", "absmax": "reduce_absmax",
           "abssum": "reduce_abssum", "bitxor": "reduce_bitxor"}


def wide_rows(N, threads, dtype):
    """The layout of 16-byte vectors with as many lanes along a row as it has vectors (up to the
    block), then rows: one warp a row of 128 fp32, 16 lanes a row of 128 fp16."""
    vec = 16 // tilelang.language.dtypes.nbytes(dtype)
    lanes = min(N // vec, threads)
    rows = threads // lanes
    return lambda i, j: ((j // vec) % lanes + lanes * (i % rows), j % vec + vec * (i // rows))


def rows_kernel(M, N, blk_m, threads, kind="max", dtype="float32", wide=False):
    """out[i] = reduce(A[i, :]) for blocks of ``blk_m`` rows, the block's rows in one fragment
    (``wide``: annotated with ``wide_rows``, else laid out by the compiler)."""
    reduce = getattr(T, _REDUCE[kind])

    @T.prim_func
    def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M,), dtype)):
        with T.Kernel(T.ceildiv(M, blk_m), threads=threads) as bx:
            F = T.alloc_fragment((blk_m, N), dtype)
            R = T.alloc_fragment((blk_m,), dtype)
            if wide:
                T.annotate_layout({F: T.Fragment((blk_m, N), wide_rows(N, threads, dtype))})
            T.copy(A[bx * blk_m, 0], F)
            reduce(F, R, dim=1)
            T.copy(R, B[bx * blk_m])

    return main


def _source(func, arch="sm_90a"):
    return tilelang.lower(func, target=f"cuda -arch={arch}").kernel_source


def _calls(src):
    """(functor, LO, HI, rows or None) of each warp all-reduce the source makes."""
    rows = [(f, int(lo), int(hi), int(r)) for f, lo, hi, r in
            re.findall(r"tl::warp_allreduce_rows<tl::(\w+), (\d+), (\d+), (\d+)", src)]
    single = [(f, int(lo), int(hi), None) for f, lo, hi in re.findall(r"tl::warp_allreduce<tl::(\w+), (\d+), (\d+)", src)]
    return rows + single


# (blk_m, N, threads) -> the one all-reduce expected: the router's 16 rows over 32 lanes, 8 rows
# over 32, 8 rows over 16 lanes (two rows of 64 columns a warp); 4 rows over 16 lanes and 2 rows
# over 32 (too few: a butterfly each)
SHAPES = [((64, 128, 128), ("MaxOp", 1, 32, 16)), ((32, 128, 128), ("MaxOp", 1, 32, 8)),
          ((64, 64, 128), ("MaxOp", 1, 16, 8)), ((32, 64, 128), ("MaxOp", 1, 16, None)),
          ((8, 128, 128), ("MaxOp", 1, 32, None))]


@pytest.mark.parametrize("shape,expect", SHAPES)
def test_rows_reduced_at_once(shape, expect):
    blk_m, N, threads = shape
    calls = _calls(_source(rows_kernel(4 * blk_m, N, blk_m, threads, wide=True)))
    assert calls == [expect]


# (blk_m, N, threads) -> the compiler's own layout: 8 lanes a row of 16-byte vectors (a warp's
# load still covers whole 128-byte lines), unless the rows are too few for the other threads
# (8 rows on 128 threads: 16 lanes a row; 4 rows: a warp a row)
OWN = [((64, 128, 128), ("MaxOp", 1, 8, None)), ((32, 128, 128), ("MaxOp", 1, 8, None)),
       ((64, 64, 128), ("MaxOp", 1, 8, None)), ((8, 128, 128), ("MaxOp", 1, 16, None)),
       ((4, 128, 128), ("MaxOp", 1, 32, None))]


@pytest.mark.parametrize("shape,expect", OWN)
def test_rows_laid_out_for_the_reduction(shape, expect):
    blk_m, N, threads = shape
    src = _source(rows_kernel(4 * blk_m, N, blk_m, threads))
    assert _calls(src) == [expect]
    # the load stays 16 bytes a thread
    assert "*(float4*)" in src


def test_rule():
    assert _rows_at_once(16, 32) and _rows_at_once(8, 16) and _rows_at_once(64, 32)
    # an attention row's two rows over a quad, eight rows over 8 lanes, four rows over 16 lanes
    # (dsv4_act_quant_fp8), two rows over a warp, a row count not a power of two
    assert not _rows_at_once(2, 4) and not _rows_at_once(8, 8) and not _rows_at_once(4, 16)
    assert not _rows_at_once(2, 32) and not _rows_at_once(12, 32)


def topk_kernel(M, N=128, K=6, blk_m=64):
    """Upstream's examples/topk router: K rounds of a row max and the index of that max over
    ``blk_m`` x ``N`` logits on 128 threads (16 rows a thread at 64 x 128), each max then masked."""

    @T.prim_func
    def topk(logits: T.Tensor((M, N), "float32"), gates: T.Tensor((M, K), "float32"),
             idx: T.Tensor((M, K), "int32")):
        with T.Kernel(T.ceildiv(M, blk_m), threads=128) as bx:
            frag = T.alloc_fragment([blk_m, N], "float32")
            max_val = T.alloc_fragment([blk_m], "float32")
            expand = T.alloc_fragment([blk_m, N], "int32")
            max_idx = T.alloc_fragment([blk_m], "int32")
            T.copy(logits[bx * blk_m, 0], frag)
            for k in T.serial(K):
                T.fill(expand, -1)
                T.reduce_max(frag, max_val, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    expand[i, j] = T.if_then_else(max_val[i] == frag[i, j], j, expand[i, j])
                T.reduce_max(expand, max_idx, dim=1, clear=True)
                for i, j in T.Parallel(blk_m, N):
                    frag[i, j] = T.if_then_else(max_val[i] == frag[i, j], -10000.0, frag[i, j])
                for i in T.Parallel(blk_m):
                    gates[bx * blk_m + i, k] = max_val[i]
                    idx[bx * blk_m + i, k] = max_idx[i]

    return topk


def test_router_kernel_of_upstream_shape():
    """The top-k router's loop: both of its reductions (the max, then the max index) over 8 lanes,
    4 rows a thread, the index fragment laid out as the logits (they meet in one loop)."""
    src = _source(topk_kernel(512))
    assert _calls(src) == [("MaxOp", 1, 8, None)] * 2
    assert "float max_val[4];" in src and "int expand[64];" in src


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
def test_router_shuffles():
    """Both reductions of a round: 4 rows x 3 shuffles each (24; one warp a row with every row at
    once took 62)."""
    art = tilelang.lower(topk_kernel(512), target="cuda -arch=sm_90a")
    ptx = nvcc.compile_ptx(art.kernel_source, "sm_90a", art.compile_flags)
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 24


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
def test_shuffles_and_registers():
    """16 rows over 32 lanes: 31 shuffles in the PTX (a butterfly a row: 80), the rows stay in
    registers (no stack frame: every index a constant) and no branch splits the lanes around a
    shuffle (the lane's half is chosen by bit operations)."""
    art = tilelang.lower(rows_kernel(256, 128, 64, 128, wide=True), target="cuda -arch=sm_90a")
    ptx = nvcc.compile_ptx(art.kernel_source, "sm_90a", art.compile_flags)
    assert len(re.findall(r"shfl\.sync\.bfly", ptx)) == 31
    info = nvcc.ptxas_info(art.kernel_source, "sm_90a", art.compile_flags)
    assert [i.stack_frame for i in info.values()] == [0]
    assert "bra" not in ptx.split("shfl.sync.bfly", 1)[1].rsplit("shfl.sync.bfly", 1)[0]


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
@pytest.mark.parametrize("kind,dtype", [("max", "float32"), ("sum", "float16"), ("min", "bfloat16"),
                                        ("absmax", "float32"), ("bitxor", "int32"), ("sum", "float64")])
@pytest.mark.parametrize("arch", ["sm_90a", "sm_80"])
def test_compiles(kind, dtype, arch):
    art = tilelang.lower(rows_kernel(256, 128, 64, 128, kind=kind, dtype=dtype, wide=True), target=f"cuda -arch={arch}")
    assert "warp_allreduce_rows" in art.kernel_source
    assert nvcc.compile_cubin(art.kernel_source, arch, art.compile_flags)[:4] == b"\x7fELF"


def reduce_into_kernel(rounds=1):
    """A fragment a loop set to 1, then ``rounds`` sums of 64 x 64 squares added to it
    (``clear=False``) on 64 threads: 8 rows a thread over 8 lanes."""

    @T.prim_func
    def kernel(A: T.Tensor((64, 64), T.float32), B: T.Tensor((64,), T.float32)):
        with T.Kernel(1, threads=64):
            acc = T.alloc_fragment((64,), T.float32)
            prod = T.alloc_fragment((64, 64), T.float32)
            for i in T.Parallel(64):
                acc[i] = T.float32(1.0)
            for i, j in T.Parallel(64, 64):
                prod[i, j] = A[i, j] * A[i, j]
            for _ in T.unroll(rounds):
                T.reduce_sum(prod, acc, dim=1, clear=False)
            for i in T.Parallel(64):
                B[i] = acc[i]

    return kernel


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
def test_fragment_set_by_a_loop_then_reduced_into():
    art = tilelang.lower(reduce_into_kernel(), target="cuda -arch=sm_90a")
    body = art.kernel_source
    # laid out for the reduction: 8 rows a thread over 8 lanes, a butterfly each, added to acc
    assert "tl::warp_allreduce<tl::SumOp, 1, 8>" in body and "warp_allreduce_rows" not in body
    assert "float prod[64];" in body and "float acc[8];" in body
    assert nvcc.compile_cubin(body, "sm_90a", art.compile_flags)[:4] == b"\x7fELF"


def test_layout_origin_names_the_rule():
    """Hover and TL0201 messages name where a layout came from: the copy, and why its rows sit on
    fewer lanes than a plain copy's; the annotated wide rows and a plain copy say nothing more."""
    from tilelang.transform.kernel import analyze_kernel
    from tilelang.transform.layout_inference import infer_layouts

    def origin(func, name):
        layouts = infer_layouts(analyze_kernel(func), "sm_90a")
        return next(v for b, v in layouts.origin.items() if b.name == name)

    assert origin(rows_kernel(256, 128, 64, 128), "F").endswith(
        ", 8 lanes a row for its reduction along the rows")
    assert "lanes a row" not in origin(rows_kernel(16, 128, 4, 128), "F")     # 4 rows: a warp a row, as plain
    assert "lanes a row" not in origin(rows_kernel(256, 128, 64, 128, wide=True), "F")


def quant_kernel(M=256, N=128, blk_m=32, out_dtype="float8_e4m3"):
    """dsv4_act_quant_fp8's shape: bf16 rows to ``out_dtype`` with a per-row scale (absmax / 448)."""

    @T.prim_func
    def quant(X: T.Tensor((M, N), "bfloat16"), Y: T.Tensor((M, N), out_dtype), S: T.Tensor((M,), "float32")):
        with T.Kernel(M // blk_m, threads=128) as bx:
            x = T.alloc_fragment((blk_m, N), "float32")
            amax = T.alloc_fragment((blk_m,), "float32")
            y = T.alloc_fragment((blk_m, N), out_dtype)
            T.copy(X[bx * blk_m, 0], x)
            T.reduce_absmax(x, amax, dim=1)
            for i, j in T.Parallel(blk_m, N):
                y[i, j] = T.clamp(x[i, j] * 448.0 / T.max(amax[i], 1e-4), -448.0, 448.0)
            T.copy(y, Y[bx * blk_m, 0])
            for i in T.Parallel(blk_m):
                S[bx * blk_m + i] = amax[i] / 448.0

    return quant


@pytest.mark.parametrize("out_dtype,lanes", [("float8_e4m3", 16), ("bfloat16", 8)])
def test_narrowest_element_of_the_group_sizes_the_lanes(out_dtype, lanes):
    """bf16 rows loaded 8 a thread: stored as fp8, 8 bytes a thread, a row needs 16 lanes for a
    128-byte line (what the plain layout gives); stored as bf16, 8 lanes suffice."""
    src = _source(quant_kernel(out_dtype=out_dtype))
    assert _calls(src) == [("MaxOp", 1, lanes, None)]
