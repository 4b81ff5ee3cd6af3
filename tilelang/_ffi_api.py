"""Upstream's ``tilelang._ffi_api``: the table of functions its C++ library registers (``tl.*``).

Ours has no C++ library; the entries that user code and upstream's tests call directly are the
Python implementations below. Any other name raises ``AttributeError`` saying it is not provided.
"""

from __future__ import annotations


def Layout_repeat(layout, dim: int, factor: int):  # noqa: N802 - upstream's name
    return layout.repeat(dim, factor)


def Layout_expand(layout, leading_shape):  # noqa: N802
    return layout.expand(list(leading_shape))


def Layout_is_equal(layout, other) -> bool:  # noqa: N802
    return layout.is_equal(other)


def Layout_input_shape(layout):  # noqa: N802
    return layout.get_input_shape()


def Layout_output_shape(layout):  # noqa: N802
    return layout.get_output_shape()


def Layout_index(layout):  # noqa: N802
    return layout.get_forward_index()


def Layout_linearized_index(layout):  # noqa: N802
    return layout.get_linearized_forward_index()


def Fragment_is_equal(fragment, other) -> bool:  # noqa: N802
    return fragment.is_equal(other)


def Fragment_thread_size(fragment) -> int:  # noqa: N802
    return fragment.get_thread_size()


def Fragment_repeat(fragment, repeats, repeat_on_thread=False, lower_dim_first=True):  # noqa: N802
    return fragment.repeat(repeats, repeat_on_thread, lower_dim_first)


def Fragment_replicate(fragment, factor: int):  # noqa: N802
    return fragment.replicate(factor)


def _tcgen05_meta(kind, shape):
    def get():
        from tilelang.layout.cute_tcgen05 import tcgen05_meta

        return tcgen05_meta(kind, shape)

    get.__name__ = f"get_tcgen05_meta_{kind}_{shape}"
    return get


get_tcgen05_meta_ld_32dp32b = _tcgen05_meta("ld", "32dp32b")
get_tcgen05_meta_ld_16dp64b = _tcgen05_meta("ld", "16dp64b")
get_tcgen05_meta_ld_16dp128b = _tcgen05_meta("ld", "16dp128b")
get_tcgen05_meta_ld_16dp256b = _tcgen05_meta("ld", "16dp256b")
get_tcgen05_meta_st_32dp32b = _tcgen05_meta("st", "32dp32b")
get_tcgen05_meta_st_16dp64b = _tcgen05_meta("st", "16dp64b")
get_tcgen05_meta_st_16dp128b = _tcgen05_meta("st", "16dp128b")
get_tcgen05_meta_st_16dp256b = _tcgen05_meta("st", "16dp256b")


def ExpandTcgen05Layout(meta, tmem_tile, num_threads):  # noqa: N802
    """The tcgen05 copy plan of a TMEM tile (a ``cute.Layout``), or ``None``."""
    from tilelang.layout.cute_tcgen05 import expand_tcgen05_layout

    return expand_tcgen05_layout(meta, tmem_tile, int(num_threads))


def get_tcgen5_instr_desc(atom_m, atom_n, atom_k, a_dtype, b_dtype, c_dtype, a_is_k_major, b_is_k_major,
                          scale_in_a, scale_in_b) -> int:
    from tilelang.language.tcgen05_desc import instr_desc

    return instr_desc(atom_m, atom_n, atom_k, a_dtype, b_dtype, c_dtype, a_is_k_major, b_is_k_major,
                      scale_in_a, scale_in_b)


def get_tcgen5_blockscaled_instr_desc(atom_m, atom_n, a_dtype, b_dtype, a_is_k_major, b_is_k_major,
                                      scale_in_a, scale_in_b, a_sf_id, b_sf_id) -> int:
    from tilelang.language.tcgen05_desc import blockscaled_instr_desc

    return blockscaled_instr_desc(atom_m, atom_n, a_dtype, b_dtype, a_is_k_major, b_is_k_major,
                                  scale_in_a, scale_in_b, a_sf_id, b_sf_id)


def __getattr__(name):
    raise AttributeError(f"tilelang._ffi_api.{name} is part of upstream TileLang's C++ library, which this "
                         "implementation does not provide")
