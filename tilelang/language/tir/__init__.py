"""Upstream's ``tilelang.language.tir``: TVM's TIR script vocabulary, reachable under TileLang's
namespace (``from tilelang.language.tir import ir``)."""

from . import ir  # noqa: F401
from .ir import *  # noqa: F401,F403
from .ir import __all__  # noqa: F401
