"""The ordered pass list. Each entry: (name, function(state) -> None), run in order by ``lower``.

    check             the static checks (``tilelang.analysis``): errors stop the build
    analyze_kernel    find the launch, the thread variables and every buffer
    infer_layouts     fragment / loop / shared layouts and gemm warp partitions
    stage_epilogues   sm_90a: accumulator copies to global memory staged through shared memory
    lower_tile_ops    tile ops, T.Parallel and T.Pipelined to thread-level TIR with barriers
    emit_cuda         TVM CUDA codegen + our device library include
"""

from __future__ import annotations

from tilelang.analysis import check_pass
from tilelang.codegen import emit_cuda
from tilelang.transform import stage_epilogue
from tilelang.transform.kernel import analyze_kernel
from tilelang.transform.layout_inference import infer_layouts
from tilelang.transform.lower_tile_ops import Lowerer


def _analyze(st):
    st.info = analyze_kernel(st.func)


def _layouts(st):
    st.layouts = infer_layouts(st.info, st.arch, st.pass_configs)


def _lower(st):
    lw = st.lowerer or Lowerer(st.info, st.layouts, st.pass_configs)   # (stage_epilogues built one)
    st.lowered = st.func.with_body(lw.run())
    st.smem_bytes = lw.smem_bytes
    st.tensormaps = lw.tensormaps          # TMA descriptors the launcher builds (warp-specialised loop)
    st.extra_threads = lw.extra_threads    # the producer warpgroup
    st.persistent_tiles = lw.persistent_tiles   # a persistent GEMM's tile count (grid: min(tiles, SMs))
    st.cluster_dims = lw.cluster_dims           # thread block clusters (tl.cluster_multicast)


def _emit(st):
    st.cuda = emit_cuda(st.lowered, st.arch, st.name, [t["name"] for t in st.tensormaps], st.cluster_dims)


PASSES = [
    ("check", check_pass),                        # static checks (TL codes)
    ("analyze_kernel", _analyze),
    ("infer_layouts", _layouts),
    ("stage_epilogues", stage_epilogue.apply),    # sm_90a: wgmma accumulator copies staged through shared memory
    ("lower_tile_ops", _lower),
    ("emit_cuda", _emit),
]
