"""CPU-tier conformance items of session 11: upstream module paths and behaviours they need.

Covers: the carver's matmul template and roller records, the nested-block budget of the front
end's rewrite, N-D plot_layout, T.alloc_tmem's located compile error, the mma lane maps, the
cache/autotuner names upstream imports, and the CPU worker's module forgetting.
"""

from __future__ import annotations

import ast
import sys
import textwrap
import types

import pytest

import tilelang
import tilelang.language as T


# ------------------------------------------------------------------ carver templates
def _template(M=4096, N=4096, K=4096, arch="sm_80", **kw):
    from tilelang.carver.arch import CUDA
    from tilelang.carver.template import MatmulTemplate

    kw.setdefault("in_dtype", T.float16)
    kw.setdefault("out_dtype", T.float16)
    kw.setdefault("accum_dtype", T.float32)
    return MatmulTemplate(M=M, N=N, K=K, **kw).with_arch(CUDA(arch))


def test_matmul_template_hints_fit_the_device():
    t = _template()
    hints = t.recommend_hints(topk=8)
    assert 1 <= len(hints) <= 8
    arch = t.arch
    for h in hints:
        bm, bn = h.block
        wm, wn = h.warp
        bk = h.rstep[0]
        assert bm % wm == 0 and bn % wn == 0 and (bm // wm) * (bn // wn) in (1, 2, 4, 8)
        assert h.pipeline_stage * (bm + bn) * bk * 2 <= arch.smem_per_block_optin
        assert h.smem_bytes == h.pipeline_stage * (bm + bn) * bk * 2
        assert h.regs_per_thread <= 255 and h.use_tc
        assert 2 <= h.pipeline_stage <= 4          # sm_80 pipelines its loads
    scores = [h.score for h in hints]
    assert scores == sorted(scores)
    # a 4096^3 GEMM wants big tiles, not 16x16 ones
    assert hints[0].block[0] * hints[0].block[1] >= 64 * 128


def test_matmul_template_small_and_gemv_shapes():
    for M, N, K in [(1, 1024, 1024), (256, 256, 64)]:
        hints = _template(M, N, K).recommend_hints(3)
        assert hints
        for h in hints:
            assert h.block[0] <= max(16, M if M & (M - 1) == 0 else 1 << M.bit_length())
            assert h.rstep[0] <= max(16, K)
    # one k step: nothing to pipeline
    (h,) = _template(128, 128, 16).recommend_hints(1)
    assert h.pipeline_stage == 1


def test_matmul_template_config_like_upstream_example():
    from tilelang.carver.roller.rasterization import NoRasterization, Rasterization2DColumn

    hints = _template(8192, 8192, 8192).recommend_hints(5)
    h = hints[0]
    cfg = h.to_dict()
    assert cfg["block_M"] == h.block[0] and cfg["block_K"] == h.rstep[0]
    assert cfg["threads"] == (h.block[0] // h.warp[0]) * (h.block[1] // h.warp[1]) * 32
    # 8192^2 fp16 operands overflow L2: a rasterization plan is attached
    assert isinstance(h.rasterization_plan, Rasterization2DColumn) and h.rasterization_plan.panel_width >= 2
    small = _template(256, 256, 256).recommend_hints(1)[0]
    assert small.rasterization_plan == NoRasterization()


def test_matmul_template_function_and_errors():
    from tvm import tirx

    t = _template(64, 32, 16, with_bias=True, out_dtype=T.float32)
    f = t.equivalent_function()
    assert isinstance(f, tirx.PrimFunc)
    names = [f.buffer_map[p].name for p in f.params]
    assert names[:3] == ["A", "B", "Bias"] and len(names) == 4
    out = f.buffer_map[f.params[3]]
    assert [int(x) for x in out.shape] == [64, 32] and str(out.dtype) == "float32"
    assert [int(x) for x in f.buffer_map[f.params[1]].shape] == [32, 16]   # trans_B: [N, K]
    from tilelang.carver.template import MatmulTemplate

    with pytest.raises(ValueError, match="M must be a positive int"):
        MatmulTemplate(M=0, N=1, K=1)
    with pytest.raises(ValueError, match="with_arch"):
        MatmulTemplate(M=16, N=16, K=16).recommend_hints()
    with pytest.raises(TypeError, match="carver.arch device"):
        MatmulTemplate(M=16, N=16, K=16).with_arch("sm_90")


# ------------------------------------------------------------------ rewrite nesting
def _nested_source(depth: int) -> str:
    lines = ["def kernel(A: T.Tensor((16,), 'float32')):", "    with T.Kernel(1, threads=32) as bx:"]
    indent = "        "
    for i in range(depth):
        lines.append(f"{indent}for i{i} in T.serial(1):" if i % 2 else f"{indent}if bx == {i}:")
        indent += "    "
    lines.append(f"{indent}A[0] = 1.0")
    return "\n".join(lines) + "\n"


def test_rewrite_keeps_deep_kernels_under_pythons_block_limit(tmp_path):
    from tilelang.frontend import rewrite as rw

    src = _nested_source(16)        # 8 ifs + 8 loops: 2 blocks each with span blocks -> > 20
    path = tmp_path / "deep_kernel.py"
    path.write_text("import tilelang.language as T\n\n" + src)
    mod = types.ModuleType("deep_kernel")
    mod.__file__ = str(path)
    exec(compile(path.read_text(), str(path), "exec"), mod.__dict__)
    sys.modules["deep_kernel"] = mod
    try:
        out = rw.rewrite(mod.kernel)        # compiles: no "too many statically nested blocks"
        assert out.name == "kernel"
        func = T.prim_func(mod.kernel)
        assert "A[0] = T.float32(1.0)" in func.script() or "A[0] = T.float32(1)" in func.script()
    finally:
        sys.modules.pop("deep_kernel", None)


def test_rewrite_of_shallow_kernels_is_unchanged():
    from tilelang.frontend.rewrite import _blocks_needed

    body = ast.parse(textwrap.dedent("""
        with a, b:
            for i in x:
                if c:
                    pass
    """)).body
    assert _blocks_needed(body) == 1 + 2 + 1 + 1


# ------------------------------------------------------------------ plot_layout
def test_plot_layout_draws_nd_layouts_flattened(tmp_path):
    from tilelang.tools.plot_layout import cell_labels, plot_layout

    layout = T.Layout([2, 4, 8], lambda i, j, k: (k, i * 4 + j))
    text, _ = cell_labels(layout)
    assert len(text) == 8 and len(text[0]) == 8
    assert text[5][0] == "5" and text[0][1] == "8"      # row 5 is (i=1, j=1); out shape [8, 8]
    written = plot_layout(layout, save_directory=tmp_path, name="r3", formats="svg")
    assert written and written[0].read_text().startswith("<svg")


# ------------------------------------------------------------------ tensor memory
def test_alloc_tmem_parses_and_fails_located_at_compile():
    @T.prim_func
    def f(A: T.Tensor((64, 64), "float32")):
        with T.Kernel(1, threads=128) as bx:
            C_tmem = T.alloc_tmem([64, 64], "float32")
            C_local = T.alloc_fragment((64, 64), "float32")
            T.copy(C_tmem, C_local)
            T.copy(C_local, A)

    assert "shared.tmem" in f.script()
    with pytest.raises(Exception, match=r"TL0002.*C_tmem.*tensor memory") as info:
        tilelang.compile(f, target="cuda")
    assert "T.alloc_tmem([64, 64]" in str(info.value)


def test_tcgen05_gemm_names_the_alternative():
    with pytest.raises(Exception, match=r"tcgen05_gemm\(A_s, B_s, C_t\).*T\.gemm"):
        @T.prim_func
        def f(A: T.Tensor((64, 64), "float16")):
            with T.Kernel(1, threads=128) as bx:
                A_s = T.alloc_shared((64, 64), "float16")
                B_s = T.alloc_shared((64, 64), "float16")
                C_t = T.alloc_tmem([64, 64], "float32")
                T.tcgen05_gemm(A_s, B_s, C_t)


# ------------------------------------------------------------------ lane maps and names
def test_mma_lane_maps_agree_with_the_load_index():
    from tilelang.cuda.intrinsics.layout import mma_layout as ml
    from tilelang.cuda.intrinsics.layout.utils import mma_load_a_index

    for lane in range(32):
        for e in range(4):
            assert ml.shared_16x8_to_mma_32x4_layout_sr_a(*mma_load_a_index(lane, e, 32)) == (lane, e)
        for e in range(8):
            assert ml.shared_16x16_to_mma_32x8_layout_sr_a(*mma_load_a_index(lane, e, 16)) == (lane, e)
    cells = {ml.mma_load_a_32x32_to_shared_16x64_layout(t, e) for t in range(32) for e in range(32)}
    assert cells == {(i, j) for i in range(16) for j in range(64)}
    assert ml.mma_load_a_32x32_to_shared_16x64_layout(5, 9) == (9, 9)   # lane 5: row 1 (+8), k 8 + 1
    assert ml.shared_16x8_to_mma_32x4_layout_rs_a(3, 2) == ml.shared_16x8_to_mma_a_32x4_layout(2, 3)


def test_upstream_import_paths():
    from tilelang.autotuner.param import BEST_CONFIG_PATH, KERNEL_PY_PATH, PARAMS_PATH
    from tilelang.cache import _dispatch_map
    from tilelang.cuda.language.intrinsics import (TCGEN05TensorCoreIntrinEmitter, TensorCoreIntrinEmitter,
                                                   WGMMATensorCoreIntrinEmitter)

    assert (BEST_CONFIG_PATH, KERNEL_PY_PATH, PARAMS_PATH) == ("best_config.json", "kernel.py", "params.pkl")
    _dispatch_map["tvm_ffi"]._memory_cache.clear()
    assert _dispatch_map["nvrtc"]._memory_cache == {}
    assert TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32",
                                   warp_row_tiles=32, warp_col_tiles=32).warp_rows == 2
    assert TCGEN05TensorCoreIntrinEmitter is not TensorCoreIntrinEmitter
    with pytest.raises(NotImplementedError, match="T.gemm"):
        WGMMATensorCoreIntrinEmitter()


def test_conformance_worker_forgets_namespace_children(tmp_path, monkeypatch):
    import importlib.util
    from pathlib import Path

    plugin_path = Path(__file__).resolve().parents[2] / "conformance" / "tl_conformance_plugin.py"
    spec = importlib.util.spec_from_file_location("_tl_plugin_under_test", plugin_path)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    pkg = tmp_path / "nsroot" / "gemm_x"
    pkg.mkdir(parents=True)
    (pkg / "utils.py").write_text("VALUE = 1\n")
    base = list(sys.path)
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.invalidate_caches()
    importlib.import_module("nsroot.gemm_x.utils")
    plugin._forget_upstream_modules(str(tmp_path), base)
    assert not any(n == "nsroot" or n.startswith("nsroot.") for n in sys.modules)
    sys.path.insert(0, str(tmp_path))
    try:
        assert importlib.import_module("nsroot.gemm_x.utils").VALUE == 1
    finally:
        sys.path.remove(str(tmp_path))
        for n in [n for n in sys.modules if n == "nsroot" or n.startswith("nsroot.")]:
            del sys.modules[n]


def test_utils_language_regions_and_scopes():
    from tvm import tirx

    import tilelang.utils.language as L

    b = tirx.decl_buffer((4, 8), "float16", name="X", scope="shared.dyn")
    assert L.is_shared(b) and L.is_shared_dynamic(b) and not L.is_shared(b, allow_dynamic=False)
    assert not L.is_fragment(b) and not L.is_global(b)
    assert str(L.to_buffer_region(b)) == "X[0:4, 0:8]"
    assert str(L.to_buffer_region(b, extents=[2])) == "X[0, 0:2]"
    assert str(L.to_buffer_region(tirx.BufferLoad(b, [1, 2]))) == "X[1, 2]"
    assert L.retrieve_shape(b) == [4, 8] and L.get_buffer_elems(b) == 32 and L.retrieve_dtype(b) == "float16"
    with pytest.raises(TypeError, match="expected a Buffer"):
        L.is_shared(tirx.Var("x", "int32"))


def _emitter_gemm(use_atom: bool):
    from tilelang.cuda.intrinsics.macro.mma_macro_generator import TensorCoreIntrinEmitter

    M = N = K = 64
    em = TensorCoreIntrinEmitter(a_dtype="float16", b_dtype="float16", accum_dtype="float32", a_transposed=False,
                                 b_transposed=True, block_row_warps=2, block_col_warps=2, warp_row_tiles=32,
                                 warp_col_tiles=32, chunk=32)
    la, lb, lc = em.warp_rows * em.local_size_a, em.warp_cols * em.local_size_b, \
        em.warp_rows * em.warp_cols * em.local_size_out
    im, inn = em.mma_num_inst_m, em.mma_num_inst_n

    @T.prim_func
    def main(A: T.Tensor((M, K), "float16"), B: T.Tensor((N, K), "float16"), C: T.Tensor((M, N), "float32")):
        with T.Kernel(1, 1, threads=128) as (bx, by):
            A_s = T.alloc_shared((M, 32), "float16")
            B_s = T.alloc_shared((N, 32), "float16")
            A_l = T.alloc_local((la,), "float16")
            B_l = T.alloc_local((lb,), "float16")
            C_l = T.alloc_local((lc,), "float32")
            T.clear(C_l)
            for ko in T.serial(K // 32):
                for i, k in T.Parallel(M, 32):
                    A_s[i, k] = A[i, ko * 32 + k]
                for j, k in T.Parallel(N, 32):
                    B_s[j, k] = B[j, ko * 32 + k]
                for ki in T.serial(2):
                    em.ldmatrix_a(A_l, A_s, ki)
                    em.ldmatrix_b(B_l, B_s, ki)
                    if use_atom:
                        for i, j in T.grid(im, inn):
                            em.mma_atom(A_l, B_l, C_l, i, j, ki)
                    else:
                        em.mma(A_l, B_l, C_l, ki)
            em.stmatrix(C_l, C)

    return main


def test_mma_atom_issues_what_mma_issues():
    atom = tilelang.compile(_emitter_gemm(True), target="cuda").get_kernel_source()
    whole = tilelang.compile(_emitter_gemm(False), target="cuda").get_kernel_source()
    assert atom.count("tl::mma_sync") == 2   # one per n8 half
    assert atom == whole                      # the atoms over T.grid are exactly mma()
