"""The user-facing layout algebra upstream offers (issue 17, deliverable 2): ``Layout.is_equal``,
``expand``, ``repeat``, output shapes, the bank swizzles and ``Fragment`` equality / repeat /
replicate. The bank swizzles must be the same maps the compiler uses for wgmma operands."""

import itertools

import numpy as np
import pytest
from tvm import tirx

import tilelang.language as T
from tilelang.layout import (Fragment, Layout, SharedLayout, SwizzleMode, make_full_bank_swizzled_layout,
                             make_gemm_fragment_8x8, make_gemm_fragment_8x8_transposed,
                             make_half_bank_swizzled_layout, make_quarter_bank_swizzled_layout,
                             make_swizzled_layout)
from tilelang.layout.fragment import Fragment as UpstreamSpelling
from tilelang.layout.layout import fold


def _ints(exprs):
    return [int(e) for e in exprs]


def test_equality_ignores_parameter_names_but_not_the_map():
    assert Layout([32, 4], lambda x, y: x * 4 + y).is_equal(Layout([32, 4], lambda a, b: a * 4 + b))
    assert not Layout([32, 4], lambda i, j: i * 4 + j).is_equal(Layout([32, 4], lambda i, j: j * 4 + i))
    assert not Layout([32, 4], lambda i, j: [i, j]).is_equal(Layout([32, 4], lambda i, j: [j, i]))


def test_expand_and_repeat_build_the_lifted_maps():
    base = Layout([16, 128], lambda j, k: j * 128 + k)
    assert base.expand([4]).is_equal(Layout([4, 16, 128], lambda i, j, k: [i, j * 128 + k]))
    assert base.expand([]) is base
    rep = Layout([8, 64], lambda i, j: i * 64 + j).repeat(dim=1, factor=3)
    assert rep.get_input_shape() == [8, 192] and rep.get_output_shape() == [3, 512]
    assert _ints(rep(5, 130)) == [2, 5 * 64 + 2]
    with pytest.raises(ValueError):
        base.repeat(dim=2, factor=2)


@pytest.mark.parametrize("make, chunks", [(make_full_bank_swizzled_layout, 8), (make_half_bank_swizzled_layout, 4),
                                          (make_quarter_bank_swizzled_layout, 2)])
def test_bank_swizzles_are_the_compilers_slab_layouts(make, chunks):
    rows, cols = 16, chunks * 8          # float16: one swizzle width per row
    buf = tirx.decl_buffer((rows, cols), "float16", scope="shared")
    layout = make(buf)
    slab = SharedLayout((rows, cols), 2, True, slab=True)
    assert slab.group == chunks
    out = layout.get_output_shape()
    for r, c in itertools.product(range(rows), range(cols)):
        got = _ints(layout.map_forward_index([r, c]))
        linear = (got[0] * out[1] + got[1]) * out[2] + got[2]
        assert linear == int(fold(slab.offset([tirx.IntImm("int32", r), tirx.IntImm("int32", c)]))), (r, c)


def test_swizzled_layout_keeps_the_compiler_swizzle_kind():
    buf = tirx.decl_buffer((64, 64), "float16", scope="shared")
    layout = make_swizzled_layout(buf)
    assert layout.encode()[0].value == "swizzle"
    assert sorted(_ints(layout(r, c))[0] for r in range(8) for c in range(64)) == list(range(512))
    assert SwizzleMode.SWIZZLE_128B.swizzle_byte_size() == 128 and SwizzleMode.NONE.swizzle_atom_size() == 1


def test_fragment_equality_and_algebra():
    assert UpstreamSpelling is Fragment
    a = Fragment([32, 4], forward_thread_fn=lambda x, y: x * 4 + y)
    assert a.is_equal(Fragment([32, 4], forward_thread_fn=lambda i, j: i * 4 + j))
    assert not a.is_equal(Fragment([32, 4], forward_thread_fn=lambda i, j: j * 4 + i))
    r4 = Fragment([32, 4], forward_thread_fn=lambda i, j, rep: i * 4 + rep, replicate=4)
    assert not r4.is_equal(Fragment([32, 4], forward_thread_fn=lambda i, j, rep: i * 4 + rep, replicate=2))
    frag = make_gemm_fragment_8x8()
    assert frag.get_thread_size() == 32 and frag.get_output_shape() == [2]
    assert int(frag.map_forward_thread([3, 5])) == 3 * 4 + 2
    tr = make_gemm_fragment_8x8_transposed()
    assert int(tr.map_forward_thread([5, 3])) == 3 * 4 + 2
    on_threads = frag.repeat([2, 1], repeat_on_thread=True)
    assert on_threads.get_thread_size() == 64 and int(on_threads.map_forward_thread([11, 5])) == 32 + 3 * 4 + 2
    in_regs = frag.repeat([2, 1], repeat_on_thread=False)
    assert in_regs.get_thread_size() == 32 and in_regs.get_output_shape() == [4]
    wide = frag.replicate(2)
    assert wide.get_thread_size() == 64 and int(wide.map_forward_thread([3, 5], rep=1)) == 32 + 14


def test_repeated_fragment_resolves_in_the_compiler():
    from tilelang.layout import build_user_fragment

    frag = make_gemm_fragment_8x8_transposed().repeat([2, 1], repeat_on_thread=False)
    axes = build_user_fragment(frag.encode(), 32, "x")
    table = np.zeros((16, 8), dtype=np.int64)
    for (i, j) in itertools.product(range(16), range(8)):
        table[i, j] = int(frag.map_forward_thread([i, j]))
    assert axes.shape == (16, 8) and table.max() == 31


def test_t_layout_still_encodes_named_variables():
    layout = T.Layout((8, 8), lambda i, j: [i, j ^ i])
    kind, n, *outputs = layout.encode()
    assert kind.value == "custom" and int(n) == 2 and outputs[0].var.name == "i"


def test_upstream_layout_constructors_annotate_kernels():
    import tilelang
    from tilelang.jit import nvcc
    from tilelang.layout import make_fully_replicated_layout_fragment

    @T.prim_func
    def k(A: T.Tensor((64, 64), T.float16), B: T.Tensor((64, 64), T.float16), C: T.Tensor((2,), T.float32)):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((64, 64), T.float16)
            S2 = T.alloc_shared((64, 64), T.float16)
            F = T.alloc_fragment((2,), T.float32)
            T.annotate_layout({S: make_full_bank_swizzled_layout(S), S2: make_swizzled_layout(S2),
                               F: make_fully_replicated_layout_fragment(F, 128)})
            T.copy(A, S)
            T.copy(S, S2)
            T.copy(S2, B)
            T.fill(F, 1.0)
            T.copy(F, C)

    art = tilelang.lower(k, "sm_90a")
    # The 128-byte bank swizzle of a 128-byte row XORs the 16-byte chunk with the row (mod 8).
    assert " ^ " in art.source
    try:
        nvcc.find_nvcc()
    except Exception:  # noqa: BLE001
        return
    assert nvcc.compile_cubin(art.source, "sm_90a", art.compile_flags)[:4] == b"\x7fELF"
