"""Layout inference, session 12: another root when the program-order default ends in a conflict.

Flash decoding's combine kernel (upstream ``examples/flash_decoding/example_gqa_decode.py``, its
sm_90 config: 8 splits) fills ``lse_local[num_split, 128]`` with ``T.Parallel(num_split, 128)``,
reduces it over dim 0 and reads it as ``lse_local[k, j]`` inside ``for k in T.serial(...)``.
The default given to the first loop (vectorised over threads) leaves no thread holding a whole
column, so the serial loop conflicts; upstream tries other operators as roots and ours now
does too (``_Inference._settle``): the reduction's default puts column j on thread j and the
split rows in its registers. Kernels whose first run succeeds keep their layouts (and CUDA);
real conflicts keep their diagnostic.
"""

import shutil
import sys
from pathlib import Path

import pytest

import tilelang
import tilelang.language as T
from tilelang.diagnostics.errors import TileLangCompileError
from tilelang.jit import nvcc
from tilelang.transform import layout_inference

EXAMPLES = Path("/work/shared/conformance/upstream/examples/flash_decoding")
if not EXAMPLES.is_dir():
    EXAMPLES = Path(__file__).resolve().parents[2] / "shared/conformance/upstream/examples/flash_decoding"


def _have_nvcc() -> bool:
    try:
        return bool(nvcc.find_nvcc())
    except Exception:  # noqa: BLE001 - no toolchain: source checks only
        return shutil.which("nvcc") is not None


HAVE_NVCC = _have_nvcc()


def _example():
    if not (EXAMPLES / "example_gqa_decode.py").is_file():
        pytest.skip("upstream's flash_decoding example is not in this checkout")
    pytest.importorskip("einops")
    sys.path.insert(0, str(EXAMPLES))
    try:
        import example_gqa_decode
    finally:
        sys.path.remove(str(EXAMPLES))
    return example_gqa_decode


SPLIT = dict(block_N=128, block_H=64, num_split=8, num_stages=2, threads=128)   # its sm_90 heuristic
TEST_CFG = dict(block_N=128, block_H=64, num_split=1, num_stages=0, threads=128)  # its test's (sm_89)


def _example_func(cfg):
    m = _example()
    return m.flashattn._target.get_tir(1, 32, 8, 8192, 128, **cfg)


def _lower(func, arch="sm_90a"):
    return tilelang.lower(func, arch, out_idx=[4], pass_configs={"tl.disable_warp_specialized": True})


def _combine(art):
    """The combine kernel's source (the second part)."""
    assert art.parts and len(art.parts) == 2
    return art.parts[1].source


def _body(source):
    return source[source.rindex('extern "C" __global__'):]


def _compiles(source, arch="sm_90a"):
    if HAVE_NVCC:
        assert nvcc.compile_cubin(source, arch, [])[:4] == b"\x7fELF"


# ----- the example ------------------------------------------------------------------------------
def test_gqa_decode_split_config_compiles_with_a_column_per_thread():
    art = _lower(_example_func(SPLIT))
    body = _body(_combine(art))
    # lse_local[8, 128]: column j on thread j, its 8 split rows in registers (as upstream's)
    assert "half lse_local[8];" in body
    assert "lse_max_local[1]" in body and "lse_logsum_local[1]" in body and "scale_local[1]" in body
    # the reduction over the splits is per thread, no shuffle
    assert "shfl" not in body and "AllReduce" not in body
    # both serial loops over the splits read the thread's own register k
    assert "for (int k = 0; k < 8; ++k)" in body and "lse_local[k]" in body
    assert "lse_local[k_1]" in body
    # the fill from glse is one 16-byte load of the head's 8 split values
    assert "*(uint4*)(lse_local + 0) = *(uint4*)(glse + " in body
    # every thread adds its own column of the partial outputs
    assert "Output_partial[(((((int)blockIdx.x) * 1024) + (k_1 * 128)) + ((int)threadIdx.x))]" in body
    assert "Output[((((int)blockIdx.x) * 128) + ((int)threadIdx.x))]" in body


@pytest.mark.skipif(not HAVE_NVCC, reason="needs nvcc")
def test_gqa_decode_split_config_nvcc_accepts_both_kernels():
    art = _lower(_example_func(SPLIT))
    for part in art.parts:
        _compiles(part.source)


def test_gqa_decode_split_config_needed_another_root(monkeypatch):
    func = _example_func(SPLIT)
    monkeypatch.setattr(layout_inference, "ROOT_RETRIES", 0)    # the program-order fixpoint alone
    with pytest.raises(TileLangCompileError, match=r"TL0201.*lse_local\[k, j\]"):
        _lower(func)


@pytest.mark.parametrize("cfg", [TEST_CFG, dict(SPLIT, num_split=2, num_stages=1, block_N=64)])
def test_gqa_decode_other_configs_keep_their_cuda(monkeypatch, cfg):
    """Its test's config (which compiled before) lowers to the same CUDA with or without the
    search; a config that needed it compiles."""
    func = _example_func(cfg)
    with_search = _lower(func).source
    monkeypatch.setattr(layout_inference, "ROOT_RETRIES", 0)
    try:
        plain = _lower(func).source
    except TileLangCompileError:
        assert cfg["num_split"] > 1     # the combine kernel of a split config needs another root
        return
    assert plain == with_search


# ----- the same pattern, small --------------------------------------------------------------------
def combine_columns(B=4, S=8, W=128, threads=128):
    """out[b, j] = log2(sum_k 2^(x[b, k, j] - max_k x[b, k, j])) + max: a fragment filled by a
    loop over its shape, reduced over dim 0, then walked row by row in a serial loop."""

    @T.prim_func
    def main(X: T.Tensor((B, S, W), T.float16), Out: T.Tensor((B, W), T.float32)):
        with T.Kernel(B, threads=threads) as bx:
            x = T.alloc_fragment([S, W], T.float16)
            mx = T.alloc_fragment([W], T.float32)
            acc = T.alloc_fragment([W], T.float32)
            T.clear(acc)
            for k, j in T.Parallel(S, W):
                x[k, j] = X[bx, k, j]
            T.reduce_max(x, mx, dim=0, clear=True)
            for k in T.serial(S):
                for j in T.Parallel(W):
                    acc[j] += T.exp2(x[k, j] - mx[j])
            for j in T.Parallel(W):
                Out[bx, j] = T.log2(acc[j]) + mx[j]

    return main


def test_small_combine_layouts():
    from tilelang.transform.kernel import analyze_kernel

    func = combine_columns()
    info = analyze_kernel(func)
    layouts = layout_inference.infer_layouts(info, "sm_90a")
    frags = {b.name: f for b, f in layouts.fragments.items()}
    x, mx, acc = frags["x"], frags["mx"], frags["acc"]
    assert x.replication == 1 and x.local_size == 8
    owners = x.owners()     # [thread, register] -> flat element (k * 128 + j)
    for t in (0, 5, 127):
        assert sorted(int(e) % 128 for e in owners[t]) == [t] * 8
        assert sorted(int(e) // 128 for e in owners[t]) == list(range(8))
    for f in (mx, acc):
        assert f.replication == 1 and f.local_size == 1
        assert [int(f.owners()[t][0]) for t in (0, 5, 127)] == [0, 5, 127]


def test_small_combine_cuda():
    art = tilelang.lower(combine_columns(), "sm_90a")
    body = _body(art.source)
    assert "half x[8];" in body
    assert "for (int k = 0; k < 8; ++k)" in body and "x[k]" in body
    assert "shfl" not in body
    _compiles(art.source)


def test_small_combine_other_split_counts():
    for S in (2, 4, 16):
        body = _body(tilelang.lower(combine_columns(S=S), "sm_90a").source)
        assert f"half x[{S}];" in body and "shfl" not in body


# ----- real conflicts keep their diagnostic -----------------------------------------------------
def gemm_rows_walked(M=64, N=64, K=64):
    """A gemm accumulator (rows spread over warps by the mma layout) walked row by row in a
    serial loop: no thread holds a whole column, whatever the other layouts."""

    @T.prim_func
    def main(A: T.Tensor((M, K), T.float16), Bm: T.Tensor((K, N), T.float16), O: T.Tensor((N,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            a = T.alloc_shared((M, K), T.float16)
            b = T.alloc_shared((K, N), T.float16)
            c = T.alloc_fragment((M, N), T.float32)
            s = T.alloc_fragment((N,), T.float32)
            T.copy(A, a)
            T.copy(Bm, b)
            T.clear(c)
            T.clear(s)
            T.gemm(a, b, c)
            for k in T.serial(M):
                for j in T.Parallel(N):
                    s[j] += c[k, j]
            T.copy(s, O)

    return main


def test_real_conflict_keeps_its_diagnostic(monkeypatch):
    with pytest.raises(TileLangCompileError) as searched:
        tilelang.lower(gemm_rows_walked(), "sm_80")
    monkeypatch.setattr(layout_inference, "ROOT_RETRIES", 0)
    with pytest.raises(TileLangCompileError) as plain:
        tilelang.lower(gemm_rows_walked(), "sm_80")
    text = str(searched.value)
    assert "TL0201" in text and "c[k, j]" in text
    assert text == str(plain.value)


def test_annotated_layout_conflict_is_not_searched_away():
    """A fragment whose layout the user fixed: no default to take back, the conflict stands."""

    @T.prim_func
    def main(X: T.Tensor((8, 128), T.float16), Out: T.Tensor((128,), T.float32)):
        with T.Kernel(1, threads=128) as bx:
            x = T.alloc_fragment([8, 128], T.float16)
            acc = T.alloc_fragment([128], T.float32)
            T.annotate_layout({x: T.Fragment([8, 128], forward_fn=lambda i, j: ((i * 128 + j) // 8 % 128, j % 8))})
            T.clear(acc)
            for k, j in T.Parallel(8, 128):
                x[k, j] = X[k, j]
            for k in T.serial(8):
                for j in T.Parallel(128):
                    acc[j] += x[k, j]
            for j in T.Parallel(128):
                Out[j] = acc[j]

    with pytest.raises(TileLangCompileError, match=r"TL0201.*x\[k, j\]"):
        tilelang.lower(main, "sm_80")
