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


def __getattr__(name):
    raise AttributeError(f"tilelang._ffi_api.{name} is part of upstream TileLang's C++ library, which this "
                         "implementation does not provide")
