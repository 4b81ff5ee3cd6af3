"""tcgen05 copy plans over CuTe layouts (tilelang.layout.cute_tcgen05, via tilelang._ffi_api)."""

import pytest

from tilelang import _ffi_api
from tilelang.layout import cute


def _tile(cols):
    return cute.make_layout((128, cols), stride=(cute.E(0), cute.E(1)))


def test_meta_atoms():
    meta = _ffi_api.get_tcgen05_meta_ld_16dp64b()
    assert meta.intrinsics_name == "tl::tcgen05_ld_32dp64bNx" and meta.max_chunks == 128
    assert str(meta.tv) == "((2,2,8),1):((8@0,1@1,1@0),0)"


def test_32dp32b_plan_is_lane_per_datapath():
    plan = _ffi_api.ExpandTcgen05Layout(_ffi_api.get_tcgen05_meta_ld_32dp32b(), _tile(8), 128)
    assert (plan.num_chunks_each_wg, plan.num_issues, plan.vals_per_issue, plan.datapaths_per_warp) == (8, 1, 8, 32)
    for dp in range(0, 128, 13):
        for col in range(8):
            assert cute.to_python(cute.from_python(plan.fragment((dp, col))) + (0, 0)) == (dp, col)


def test_gapped_tile_issues_once_per_batch():
    tile = cute.Layout.parse("(3,128,64):(128@1,1@0,1@1)")
    plan = _ffi_api.ExpandTcgen05Layout(_ffi_api.get_tcgen05_meta_st_32dp32b(), tile, 128)
    assert str(plan.fragment) == "(3,128,64):(64@1,1@0,1@1)"
    assert [plan.rest_domain(i) for i in range(plan.num_issues)] == [0, 1, 2]


def test_inexpressible_tiles_are_refused():
    meta = _ffi_api.get_tcgen05_meta_ld_16dp64b()
    assert _ffi_api.ExpandTcgen05Layout(meta, _tile(6), 128) is None       # 3 repetitions: not a power of two
    assert _ffi_api.ExpandTcgen05Layout(_ffi_api.get_tcgen05_meta_ld_16dp256b(), _tile(512), 128) is None
    with pytest.raises(ValueError, match="multiple of 128 threads"):
        _ffi_api.ExpandTcgen05Layout(meta, _tile(2), 96)
