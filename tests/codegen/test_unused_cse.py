"""The generated CUDA declares no ``cse_vN`` that nothing reads (``codegen.cuda._drop_unused_cse``:
TVM's common-subexpression elimination binds values whose uses later simplification folds back
into their expressions)."""

import re
import sys
from pathlib import Path

import tilelang

from tilelang.codegen.cuda import _drop_unused_cse

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "transform"))
from test_closing_loop_barrier import CONFIGS, TARGET, after_loop  # noqa: E402


def test_a_declaration_nothing_reads_goes_and_then_what_only_it_read():
    src = ("  int cse_v1 = (((int)threadIdx.x) * 4);\n"
           "  int cse_v2 = (x + cse_v3);\n"
           "  int cse_v3 = 7;\n"
           "  int64_t cse_v12 = (a * 2);\n"
           "  y = cse_v12 + 1;\n")
    assert _drop_unused_cse(src) == "  int64_t cse_v12 = (a * 2);\n  y = cse_v12 + 1;\n"


def test_kernels_keep_only_the_cse_values_they_read():
    src = tilelang.compile(after_loop(), target=TARGET, pass_configs=CONFIGS).get_kernel_source()
    for name in re.findall(r"\b(cse_v\d+) = ", src):
        assert len(re.findall(r"\b" + name + r"\b", src)) > 1, name
