"""Helpers upstream TileLang code imports from ``tilelang.utils`` (``tensor.torch_assert_close``)."""
